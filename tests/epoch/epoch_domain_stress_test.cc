// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Races: an rcutorture-style age check, a sanitize-mode torture that frees for
// real (ASan shows any early free), a TSan ordering test, and an
// oversubscribed mixed workload (8 threads on 2 cores). Durations scale with
// CAIRN_STRESS_SCALE.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/epoch/epoch_domain.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// rcutorture's element: its age grows by one at each grace period it
// survives after retirement. Age 0: published; 1: retired; 2: its grace
// period has passed (the deleter ran). A reader must never see age 2.
struct TortureElement {
  std::atomic<int> age{0};
  std::uint64_t payload = 0;
};

struct Graveyard {
  std::mutex mu;
  std::vector<std::unique_ptr<TortureElement>> dead;
};
Graveyard* graveyard = nullptr;

void AgeToDead(void* p) {
  auto* e = static_cast<TortureElement*>(p);
  e->age.store(2, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(graveyard->mu);
  graveyard->dead.emplace_back(e);  // kept readable so a late reader is seen
}

void RunAgeTorture(ReadSideMode mode) {
  Graveyard yard;
  graveyard = &yard;
  EpochOptions options;
  options.name = "torture";
  options.read_side_mode = mode;
  options.reclaim_every = 4;
  EpochDomain domain(options);
  auto* first = new TortureElement;
  first->payload = ~std::uint64_t{0} - 1;
  std::atomic<TortureElement*> current{first};
  std::atomic<bool> stop{false};
  std::atomic<long> reads{0}, too_old{0}, bad_payload{0};

  constexpr int kReaders = 6, kWriters = 2;  // 8 threads on 2 cores
  std::vector<std::thread> threads;
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      Participant p = std::move(domain.RegisterParticipant("reader")).value();
      std::minstd_rand rng(r);
      while (!stop.load(std::memory_order_relaxed)) {
        Guard g = p.Enter();
        TortureElement* e = current.load(std::memory_order_acquire);
        if (rng() % 8 == 0) {
          Guard nested = p.Enter();
          std::this_thread::yield();  // get preempted inside the guard
        }
        if (e->age.load(std::memory_order_relaxed) > 1) too_old.fetch_add(1);
        if (e->payload != ~std::uint64_t{0} - 1) bad_payload.fetch_add(1);
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        auto* fresh = new TortureElement;
        fresh->payload = ~std::uint64_t{0} - 1;
        TortureElement* old =
            current.exchange(fresh, std::memory_order_acq_rel);
        old->age.store(1, std::memory_order_relaxed);
        while (!domain.Retire(old, sizeof(*old), &AgeToDead).ok()) {
          std::this_thread::yield();
        }
      }
    });
  }
  std::this_thread::sleep_for(testing::StressDuration(400));
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(too_old.load(), 0)
      << "a reader saw an element past its grace period";
  EXPECT_EQ(bad_payload.load(), 0);
  EXPECT_GT(reads.load(), 0);
  EXPECT_GT(domain.Diagnostics().grace_periods, 2u);
  delete current.load();
  ASSERT_TRUE(domain.Shutdown(std::chrono::seconds(10)).ok());
  graveyard = nullptr;
}

TEST(EpochTortureStressTest, ReadersNeverSeeAgeAboveOneSeqCst) {
  RunAgeTorture(ReadSideMode::kSeqCst);
}

TEST(EpochTortureStressTest, ReadersNeverSeeAgeAboveOneAsymmetric) {
  if (testing::kUnderTsan) GTEST_SKIP() << "TSan cannot see membarrier";
  RunAgeTorture(ReadSideMode::kAsymmetric);
}

// Sanitize mode: tiny bags (reclaim on every retire) and real frees, so any
// early free is a heap-use-after-free under ASan.
struct Node {
  std::uint64_t a, b;
};

void RunFreeingTorture(ReadSideMode mode) {
  EpochOptions options;
  options.read_side_mode = mode;
  options.reclaim_every = 1;
  options.retired_bytes_cap = 64 * sizeof(Node);  // exercise back-pressure
  options.reclaim_deadline = milliseconds(2);
  EpochDomain domain(options);
  std::atomic<Node*> slot{new Node{1, 1}};
  std::atomic<bool> stop{false};
  std::atomic<long> mismatches{0}, busy{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 6; ++r) {
    threads.emplace_back([&] {
      Participant p = std::move(domain.RegisterParticipant()).value();
      while (!stop.load(std::memory_order_relaxed)) {
        Guard g = p.Enter();
        Node* n = slot.load(std::memory_order_acquire);
        if (n->a != n->b) mismatches.fetch_add(1);
      }
    });
  }
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      std::uint64_t v = 10 + w;
      while (!stop.load(std::memory_order_relaxed)) {
        Node* fresh = new Node{v, v};
        v += 2;
        Node* old = slot.exchange(fresh, std::memory_order_acq_rel);
        while (true) {
          Status s = domain.Retire(old);
          if (s.ok()) break;
          ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
          busy.fetch_add(1);
        }
      }
    });
  }
  std::this_thread::sleep_for(testing::StressDuration(300));
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EpochDiagnostics d = domain.Diagnostics();
  EXPECT_LE(d.peak_retired_bytes, options.retired_bytes_cap);
  EXPECT_EQ(d.busy_count, static_cast<std::uint64_t>(busy.load()));
  delete slot.load();
  ASSERT_TRUE(domain.Shutdown(std::chrono::seconds(10)).ok());
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 0u);
}

TEST(EpochSanitizeStressTest, RealFreesNeverRaceReadersSeqCst) {
  RunFreeingTorture(ReadSideMode::kSeqCst);
}

TEST(EpochSanitizeStressTest, RealFreesNeverRaceReadersAsymmetric) {
  if (testing::kUnderTsan) GTEST_SKIP() << "TSan cannot see membarrier";
  RunFreeingTorture(ReadSideMode::kAsymmetric);
}

// TSan ordering test: the payload is plain memory. The deleter writes to it
// before freeing; TSan reports a race unless every reader's access happens
// before the deleter (leave = release, advancer scan = acquire).
struct Plain {
  std::uint64_t words[4];
};

void PoisonAndDelete(void* p) {
  auto* node = static_cast<Plain*>(p);
  for (auto& w : node->words) w = 0xdead;
  delete node;
}

TEST(EpochOrderingStressTest, DeleterHappensAfterEveryReader) {
  EpochOptions options;
  options.reclaim_every = 1;
  EpochDomain domain(options);
  std::atomic<Plain*> slot{new Plain{{7, 7, 7, 7}}};
  std::atomic<bool> stop{false};
  std::atomic<long> poisoned{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&] {
      Participant p = std::move(domain.RegisterParticipant()).value();
      while (!stop.load(std::memory_order_relaxed)) {
        Guard g = p.Enter();
        Plain* n = slot.load(std::memory_order_acquire);
        std::uint64_t sum = 0;
        for (auto w : n->words) sum += w;
        if (sum != 28) poisoned.fetch_add(1);
      }
    });
  }
  threads.emplace_back([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      Plain* old =
          slot.exchange(new Plain{{7, 7, 7, 7}}, std::memory_order_acq_rel);
      while (!domain.Retire(old, sizeof(Plain), &PoisonAndDelete).ok()) {
      }
    }
  });
  std::this_thread::sleep_for(testing::StressDuration(300));
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(poisoned.load(), 0);
  delete slot.load();
}

// Everything at once, oversubscribed: participants come and go, guards nest,
// writers hit the cap, Barrier and Diagnostics run concurrently. Afterwards
// every deleter ran exactly once and the cap was never crossed.
TEST(EpochMixedStressTest, OversubscribedChurnKeepsEveryRule) {
  EpochOptions options;
  options.retired_bytes_cap = 4096;
  options.reclaim_deadline = milliseconds(1);
  options.reclaim_every = 2;
  options.stall_threshold = milliseconds(50);
  std::atomic<long> stall_reports{0};
  options.stall_hook = [&](const StallReport&) { stall_reports.fetch_add(1); };
  EpochDomain domain(options);
  constexpr int kNodes = 1 << 14;
  std::vector<std::atomic<int>> deleted(kNodes);
  std::atomic<int> next{0};
  std::atomic<bool> stop{false};
  struct Tracked {
    std::atomic<int>* counter;
  };
  auto retire_one = [&](int id) {
    auto* t = new Tracked{&deleted[id]};
    Status s = domain.Retire(t, 64, [](void* p) {
      auto* tracked = static_cast<Tracked*>(p);
      tracked->counter->fetch_add(1, std::memory_order_relaxed);
      delete tracked;
    });
    if (!s.ok()) {
      delete t;
      return false;
    }
    return true;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::minstd_rand rng(t);
      while (!stop.load(std::memory_order_relaxed)) {
        Participant p = std::move(domain.RegisterParticipant()).value();
        for (int i = 0; i < 50; ++i) {
          switch (rng() % 6) {
            case 0:
            case 1: {
              Guard g = p.Enter();
              Guard nested = p.Enter();
              if (rng() % 4 == 0) std::this_thread::yield();
              break;
            }
            case 2:
            case 3: {
              const int id = next.fetch_add(1);
              if (id >= kNodes) break;
              if (!retire_one(id)) deleted[id].fetch_add(1);  // refused: ours
              break;
            }
            case 4:
              if (rng() % 16 == 0) {
                ASSERT_TRUE(domain.Barrier().ok());
              }
              break;
            default:
              (void)domain.Diagnostics();
              domain.TryReclaim();
          }
        }
      }
    });
  }
  const auto end = Clock::now() + testing::StressDuration(500);
  while (Clock::now() < end && next.load() < kNodes) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  EpochDiagnostics d = domain.Diagnostics();
  EXPECT_LE(d.peak_retired_bytes, options.retired_bytes_cap);
  EXPECT_EQ(d.registered_participants, 0u);
  EXPECT_LE(d.participant_slots, 8u) << "slots were not reused";
  ASSERT_TRUE(domain.Shutdown(std::chrono::seconds(10)).ok());
  const int used = std::min(next.load(), kNodes);
  for (int i = 0; i < used; ++i) {
    ASSERT_EQ(deleted[i].load(), 1) << "node " << i;
  }
  for (int i = used; i < kNodes; ++i) ASSERT_EQ(deleted[i].load(), 0);
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 0u);
}

}  // namespace
}  // namespace cairn
