// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Out of memory on every retire path (issue 22, defect 7): each allocation a
// workload makes is failed in turn. Retire(), RetireReserved() and
// TryUnlinkAndRetire() are noexcept or return a Status, so a bad_alloc must
// never escape them (it would terminate the test); a refused retire leaves
// the node with the caller; every node handed over is freed exactly once,
// never under a guard, and ASan sees no leak.

#include <atomic>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/check.h"
#include "cairn/epoch/epoch_domain.h"
#include "testing/alloc_counter.h"

namespace cairn {
namespace {

struct Node {
  std::atomic<int>* freed;
};

void DeleteNode(void* p) {
  auto* node = static_cast<Node*>(p);
  node->freed->fetch_add(1, std::memory_order_relaxed);
  delete node;
}

constexpr int kNodes = 300;

struct Outcome {
  std::uint64_t allocations = 0;  // made inside the armed window
  bool failed = false;            // the armed allocation was reached
};

// Every retire path in one workload, with the `fail_nth` allocation of this
// thread failing (0: none): Retire() (the bag, its seals), Reserve() +
// RetireReserved() (both reclaim modes), TryUnlinkAndRetire(), reclaim
// passes, and a guard pinning the middle third. `destroy_unarmed` false
// lets every allocation fail while the domain is destroyed with nodes
// pending (its Shutdown() must not throw either).
Outcome RetireWorkload(int fail_nth, bool destroy_unarmed) {
  std::atomic<int> freed{0};
  int retired = 0;
  std::vector<Node*> nodes;
  std::vector<Node*> kept;  // refused: still ours
  nodes.reserve(kNodes);
  kept.reserve(kNodes);
  for (int i = 0; i < kNodes; ++i) nodes.push_back(new Node{&freed});
  Outcome outcome;
  {
    EpochOptions options;
    options.reclaim_every = 8;
    options.stall_threshold = std::chrono::nanoseconds(0);
    EpochDomain domain(options);
    std::optional<Participant> reader;
    {
      Result<Participant> r = domain.RegisterParticipant("reader");
      CAIRN_CHECK(r.ok());
      reader.emplace(std::move(r).value());
    }
    const std::uint64_t failed_before =
        testing::FailedAllocationsOnThisThread();
    testing::AllocationCounter counter;
    testing::FailNthAllocationOnThisThread(fail_nth);
    auto step = [&](int i) {
      Node* node = nodes[static_cast<std::size_t>(i)];
      Status s;
      switch (i % 4) {
        case 0:
          s = domain.Retire(node, 64, &DeleteNode);
          break;
        case 1:
        case 2: {
          Result<RetireReservation> r = domain.Reserve(64);
          s = r.status();
          if (r.ok()) {
            domain.RetireReserved(std::move(r).value(), node, &DeleteNode,
                                  i % 4 == 1 ? EpochDomain::Reclaim::kAllowed
                                             : EpochDomain::Reclaim::kDeferred);
          }
          break;
        }
        default: {
          bool unlinked = false;
          auto unlink = [&unlinked] { unlinked = true; };
          s = domain.TryUnlinkAndRetire(node, 64, &DeleteNode, unlink);
          EXPECT_EQ(unlinked, s.ok()) << "unlink runs exactly when it retires";
          break;
        }
      }
      if (s.ok()) {
        ++retired;
      } else {
        EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
        kept.push_back(node);
      }
      if (i % 16 == 0) domain.TryReclaim();
      domain.ReclaimIfDue();
    };
    int i = 0;
    for (; i < kNodes / 3; ++i) step(i);
    {
      // The middle third under a guard: nothing retired under it is freed
      // while it holds.
      Guard pin = reader->Enter();
      const int retired_before_pin = retired;
      for (; i < 2 * kNodes / 3; ++i) step(i);
      EXPECT_LE(freed.load(), retired_before_pin) << "fail_nth " << fail_nth;
    }
    for (; i < kNodes; ++i) step(i);
    outcome.allocations = counter.count();
    if (destroy_unarmed) {
      testing::FailNthAllocationOnThisThread(0);
      outcome.failed =
          testing::FailedAllocationsOnThisThread() != failed_before;
      EXPECT_TRUE(domain.Barrier().ok());
      EXPECT_EQ(freed.load(), retired) << "fail_nth " << fail_nth;
      EXPECT_EQ(domain.Diagnostics().retired_bytes, 0u);
    } else {
      reader.reset();  // participants go before their domain (E10)
      testing::FailNextAllocationsOnThisThread(1 << 30);
    }
  }
  testing::FailNextAllocationsOnThisThread(0);
  testing::FailNthAllocationOnThisThread(0);
  if (!destroy_unarmed) {
    outcome.failed = true;
    EXPECT_EQ(freed.load(), retired) << "the destructor frees what is pending";
  }
  for (Node* node : kept) delete node;  // refused: never freed by the domain
  EXPECT_EQ(freed.load(), retired);
  return outcome;
}

TEST(EpochOutOfMemoryTest, EveryAllocationOfTheRetirePathsFailedInTurn) {
  const Outcome healthy = RetireWorkload(0, /*destroy_unarmed=*/true);
  ASSERT_GT(healthy.allocations, 0u);
  int reached = 0;
  const int cases = static_cast<int>(healthy.allocations) + 2;
  for (int n = 1; n <= cases; ++n) {
    SCOPED_TRACE(n);
    if (RetireWorkload(n, /*destroy_unarmed=*/true).failed) ++reached;
  }
  // The sweep really failed allocations inside the domain.
  EXPECT_GE(reached, static_cast<int>(healthy.allocations) / 2);
  std::printf("[ epoch oom ] %d allocations failed in turn, %d reached\n",
              cases, reached);
}

TEST(EpochOutOfMemoryTest, DestructorWithEveryAllocationFailingFreesAll) {
  RetireWorkload(0, /*destroy_unarmed=*/false);
  RetireWorkload(3, /*destroy_unarmed=*/false);
}

// A thread whose allocations fail retires, crossing bag seals, and exits:
// its bag is handed back (thread_local destructor, noexcept) and every node
// it handed over is freed.
TEST(EpochOutOfMemoryTest, ExitingThreadOutOfMemoryLosesNothing) {
  for (int n = 1; n <= 12; ++n) {
    SCOPED_TRACE(n);
    std::atomic<int> freed{0};
    std::atomic<int> retired{0};
    EpochOptions options;
    options.reclaim_every = 16;
    EpochDomain domain(options);
    std::thread worker([&] {
      std::vector<Node*> nodes;
      nodes.reserve(70);
      for (int i = 0; i < 70; ++i) nodes.push_back(new Node{&freed});
      testing::FailNthAllocationOnThisThread(n);
      for (Node* node : nodes) {
        if (domain.Retire(node, 32, &DeleteNode).ok()) {
          retired.fetch_add(1, std::memory_order_relaxed);
        } else {
          delete node;
        }
      }
      testing::FailNthAllocationOnThisThread(0);
    });
    worker.join();
    ASSERT_TRUE(domain.Barrier().ok());
    EXPECT_EQ(freed.load(), retired.load());
    EXPECT_GE(retired.load(), 60);  // one failure refuses at most a few
  }
}

// A Retire() that finds no block and cannot allocate one first reclaims
// as a host pass does (two advances) and frees its own bag's expired blocks
// whole, which gives it a spare block; only then may it refuse. Here the
// pass a full block made due advanced the epoch once (an owner's pass), so
// the block waits for one more advance when every allocation starts to
// fail.
TEST(EpochOutOfMemoryTest, RetireOutOfMemoryAdvancesAndFreesItsOwnBlocks) {
  std::atomic<int> freed{0};
  EpochOptions options;
  options.reclaim_every = 64;
  EpochDomain domain(options);
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(domain.Retire(new Node{&freed}, 32, &DeleteNode).ok());
  }
  ASSERT_EQ(freed.load(), 0) << "the sealed block expired after one pass";
  Node* last = new Node{&freed};
  testing::FailNextAllocationsOnThisThread(1 << 30);
  const Status s = domain.Retire(last, 32, &DeleteNode);
  testing::FailNextAllocationsOnThisThread(0);
  ASSERT_TRUE(s.ok()) << "refused with an expirable block in its own bag: "
                      << s.ToString();
  EXPECT_EQ(freed.load(), 64);
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(freed.load(), 65);
}

}  // namespace
}  // namespace cairn
