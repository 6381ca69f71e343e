// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// One test per rule E1-E10 of semantics.md, each run in both read-side modes.

#include "cairn/epoch/epoch_domain.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "testing/alloc_counter.h"
#include "testing/epoch_peer.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

// A retired node that counts how often it was deleted.
struct Counted {
  std::atomic<int>* deletions;
};

void DeleteCounted(void* p) {
  auto* node = static_cast<Counted*>(p);
  node->deletions->fetch_add(1, std::memory_order_relaxed);
  delete node;
}

Status RetireCounted(EpochDomain& domain, std::atomic<int>* deletions,
                     std::size_t bytes = 64) {
  auto* node = new Counted{deletions};
  Status s = domain.Retire(node, bytes, &DeleteCounted);
  if (!s.ok()) delete node;  // on error the caller still owns it
  return s;
}

Participant Register(EpochDomain& domain, std::string_view name = {}) {
  Result<Participant> p = domain.RegisterParticipant(name);
  CAIRN_CHECK(p.ok());
  return std::move(p).value();
}

// Another thread inside a guard of `participant` from construction until
// Release() (or destruction): what pins an epoch in these tests.
class GuardHolder {
 public:
  explicit GuardHolder(Participant& participant)
      : thread_([this, &participant] {
          Guard guard = participant.Enter();
          entered_.store(true);
          while (!release_.load()) std::this_thread::yield();
        }) {
    while (!entered_.load()) std::this_thread::yield();
  }
  ~GuardHolder() { Release(); }
  GuardHolder(const GuardHolder&) = delete;
  GuardHolder& operator=(const GuardHolder&) = delete;

  // Leaves the guard and joins the thread.
  void Release() {
    release_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> entered_{false};
  std::atomic<bool> release_{false};
  std::thread thread_;
};

class EpochDomainTest : public ::testing::TestWithParam<ReadSideMode> {
 protected:
  EpochOptions Options() {
    EpochOptions options;
    options.name = "test";
    options.read_side_mode = GetParam();
    options.reclaim_every = 1'000'000;  // reclaim only when the test says
    options.stall_threshold = nanoseconds(0);
    return options;
  }
};

INSTANTIATE_TEST_SUITE_P(
    Modes, EpochDomainTest,
    ::testing::Values(ReadSideMode::kSeqCst, ReadSideMode::kAsymmetric),
    [](const ::testing::TestParamInfo<ReadSideMode>& param_info) {
      return param_info.param == ReadSideMode::kSeqCst ? "SeqCst"
                                                       : "Asymmetric";
    });

TEST_P(EpochDomainTest, E1RetiredNodeFreedOnlyAfterActiveGuardsLeave) {
  EpochDomain domain(Options());
  Participant reader = Register(domain, "reader");
  std::atomic<int> deletions{0};
  {
    Guard guard = reader.Enter();
    ASSERT_TRUE(RetireCounted(domain, &deletions).ok());
    for (int i = 0; i < 10; ++i) domain.TryReclaim();
    EXPECT_EQ(deletions.load(), 0) << "freed under an active guard";
  }
  domain.TryReclaim();
  domain.TryReclaim();
  EXPECT_EQ(deletions.load(), 1);
}

// A guard that pins an epoch later than a node's retirement does not hold
// the node back: it is freed on schedule while that guard is still held.
TEST_P(EpochDomainTest, E1GuardEnteredAfterRetireDoesNotDelayIt) {
  EpochDomain domain(Options());
  Participant old_reader = Register(domain, "old");
  Participant new_reader = Register(domain, "new");
  std::atomic<int> deletions{0};
  std::optional<Guard> old_guard(old_reader.Enter());  // pins R
  const std::uint64_t retired_at = domain.Diagnostics().global_epoch;
  ASSERT_TRUE(RetireCounted(domain, &deletions).ok());  // stamped R
  domain.TryReclaim();  // R -> R+1; the old guard blocks R+1 -> R+2
  ASSERT_EQ(domain.Diagnostics().global_epoch, retired_at + 1);
  EXPECT_EQ(deletions.load(), 0);
  // Entered after the retire and before its grace period could pass.
  Guard new_guard = new_reader.Enter();  // pins R+1
  old_guard.reset();
  EXPECT_EQ(deletions.load(), 0) << "freed with no reclaim";
  domain.TryReclaim();  // R+1 -> R+2 (the new guard has seen R+1): freed
  EXPECT_EQ(domain.Diagnostics().global_epoch, retired_at + 2)
      << "the new guard blocked the advance past the node";
  EXPECT_EQ(deletions.load(), 1) << "the later guard delayed the node";
  EXPECT_TRUE(new_reader.InGuard());
}

TEST_P(EpochDomainTest, E2FreedWithinTwoReclaimAttemptsWithoutGuards) {
  EpochDomain domain(Options());
  Participant idle = Register(domain);
  std::atomic<int> deletions{0};
  ASSERT_TRUE(RetireCounted(domain, &deletions).ok());
  std::size_t freed = domain.TryReclaim();
  if (freed == 0) freed = domain.TryReclaim();
  EXPECT_EQ(freed, 1u);
  EXPECT_EQ(deletions.load(), 1);
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 0u);
}

TEST_P(EpochDomainTest, E3BarrierFreesEverythingRetiredBeforeIt) {
  EpochDomain domain(Options());
  Participant reader = Register(domain);
  std::atomic<int> deletions{0};
  std::atomic<bool> entered{false};
  std::thread holder([&] {
    Guard guard = reader.Enter();
    entered.store(true);
    std::this_thread::sleep_for(milliseconds(30));
  });
  while (!entered.load()) std::this_thread::yield();
  for (int i = 0; i < 100; ++i)
    ASSERT_TRUE(RetireCounted(domain, &deletions).ok());
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(deletions.load(), 100);
  holder.join();
  EXPECT_EQ(domain.Diagnostics().retired_count, 0u);
}

// Retirements wait in their thread's bag; Barrier() and Shutdown() must
// reach the bag of a thread that is still alive and idle.
TEST_P(EpochDomainTest, E3BarrierAndShutdownReachOtherThreadsRetirements) {
  EpochDomain domain(Options());
  std::atomic<int> deletions{0};
  std::atomic<int> phase{0};
  std::thread retirer([&] {
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(RetireCounted(domain, &deletions).ok());
    }
    phase.store(1);
    while (phase.load() != 2) std::this_thread::yield();
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(RetireCounted(domain, &deletions).ok());
    }
    phase.store(3);
    while (phase.load() != 4) std::this_thread::yield();
  });
  while (phase.load() != 1) std::this_thread::yield();
  EXPECT_EQ(domain.Diagnostics().retired_count, 5u);
  // A reader entered before the Barrier and leaving during it: a Barrier
  // that took its target before sealing the bags would return at once.
  Participant reader = Register(domain);
  std::atomic<bool> entered{false};
  std::thread holder([&] {
    Guard g = reader.Enter();
    entered.store(true);
    std::this_thread::sleep_for(milliseconds(20));
  });
  while (!entered.load()) std::this_thread::yield();
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(deletions.load(), 5) << "Barrier missed a live thread's bag";
  holder.join();
  phase.store(2);
  while (phase.load() != 3) std::this_thread::yield();
  ASSERT_TRUE(domain.Shutdown(seconds(5)).ok());
  EXPECT_EQ(deletions.load(), 8) << "Shutdown missed a live thread's bag";
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 0u);
  phase.store(4);
  retirer.join();
}

TEST_P(EpochDomainTest, E3BarrierTimesOutWhileAGuardPinsANode) {
  EpochDomain domain(Options());
  Participant reader = Register(domain);
  std::atomic<int> deletions{0};
  GuardHolder holder(reader);
  ASSERT_TRUE(RetireCounted(domain, &deletions).ok());
  Status s = domain.Barrier(milliseconds(5));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(deletions.load(), 0);
  holder.Release();
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(deletions.load(), 1);
}

// A deleter that blocks until the test releases it, so that a thread can
// be caught in the middle of freeing its bag.
struct Blocking {
  std::atomic<bool>* entered;
  std::atomic<bool>* release;
  std::atomic<int>* deletions;
};

void DeleteBlocking(void* p) {
  auto* node = static_cast<Blocking*>(p);
  node->entered->store(true);
  while (!node->release->load()) std::this_thread::yield();
  node->deletions->fetch_add(1);
  delete node;
}

// A thread frees its own bag's blocks a few deleters at a time; Barrier()
// must wait for a block whose deleters that thread is still running, not
// only for blocks still on a list.
TEST_P(EpochDomainTest, E3BarrierWaitsForADeleterAnotherThreadIsRunning) {
  EpochOptions options = Options();
  options.reclaim_every = 1;  // the retire itself advances and frees
  EpochDomain domain(options);
  std::atomic<bool> entered{false};
  std::atomic<bool> release{false};
  std::atomic<int> deletions{0};
  std::thread owner([&] {
    auto* node = new Blocking{&entered, &release, &deletions};
    ASSERT_TRUE(domain.Retire(node, 64, &DeleteBlocking).ok());
  });
  while (!entered.load()) std::this_thread::yield();
  // The owner is inside the node's deleter, inside its own Retire().
  EXPECT_EQ(domain.Barrier(milliseconds(20)).code(),
            StatusCode::kDeadlineExceeded)
      << "Barrier returned while a deleter of a node retired before it ran";
  EXPECT_EQ(deletions.load(), 0);
  release.store(true);
  owner.join();
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(deletions.load(), 1);
  EXPECT_EQ(domain.Diagnostics().retired_count, 0u);
}

// E11: a write pays for a bounded amount of reclamation. Retire() and
// ReclaimIfDue() run at most kStepNodes (8) deleters of the calling
// thread's expired retirements, plus at most 8 of departed threads', never
// a whole block of 64; and that is enough to keep up: pending nodes stay
// within a few blocks.
TEST_P(EpochDomainTest, E11RetireRunsABoundedNumberOfDeleters) {
  EpochOptions options = Options();
  options.reclaim_every = 64;
  EpochDomain domain(options);
  std::atomic<int> deletions{0};
  int most = 0;
  std::uint64_t most_pending = 0;
  for (int i = 0; i < 20'000; ++i) {
    const int before = deletions.load();
    ASSERT_TRUE(RetireCounted(domain, &deletions).ok());
    most = std::max(most, deletions.load() - before);
    most_pending = std::max(most_pending, domain.Diagnostics().retired_count);
  }
  EXPECT_GT(deletions.load(), 19'000) << "owner steps fell behind";
  EXPECT_LE(most, 8) << "one Retire() ran a whole batch of deleters";
  EXPECT_LE(most_pending, 4u * 64) << "pending nodes grew past a few blocks";
  // The deferred form: the work waits for ReclaimIfDue(), which is bounded
  // the same way.
  int most_deferred = 0;
  int unlinks = 0;
  auto unlink = [&] { ++unlinks; };
  for (int i = 0; i < 20'000; ++i) {
    auto* node = new Counted{&deletions};
    const int before = deletions.load();
    ASSERT_TRUE(
        domain.TryUnlinkAndRetire(node, 64, &DeleteCounted, unlink).ok());
    EXPECT_EQ(deletions.load(), before) << "a deferred retire ran a deleter";
    domain.ReclaimIfDue();
    most_deferred = std::max(most_deferred, deletions.load() - before);
  }
  EXPECT_EQ(unlinks, 20'000);
  EXPECT_GT(deletions.load(), 39'000);
  EXPECT_LE(most_deferred, 8);
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(deletions.load(), 40'000);
}

// A thread that exits, or goes idle, leaves its sealed nodes in its bag;
// other threads' retirements free them (a few per sweep, every fourth pass,
// once the bag has sealed nothing for a whole round of sweeps) without any
// host TryReclaim(). Then a new thread takes the departed bag over and goes
// idle at once: its backlog must still be freed.
TEST_P(EpochDomainTest, E9DepartedThreadsBagIsFreedByOthersRetirements) {
  EpochOptions options = Options();
  options.reclaim_every = 64;
  EpochDomain domain(options);
  // This thread binds its bag first, so the departed thread's bag is not
  // simply taken over by it.
  std::atomic<int> mine{0};
  ASSERT_TRUE(RetireCounted(domain, &mine).ok());
  std::atomic<int> departed{0};
  std::thread([&] {
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(RetireCounted(domain, &departed).ok());
    }
  }).join();
  EXPECT_EQ(departed.load(), 0);
  for (int i = 0; i < 64 * 128 && departed.load() < 20; ++i) {
    ASSERT_TRUE(RetireCounted(domain, &mine).ok());
  }
  EXPECT_EQ(departed.load(), 20)
      << "a departed thread's retirements waited for a host reclaim";
  // An idle thread that is still alive: its sealed block (64 of its 100
  // nodes; the other 36 wait unsealed in its open block for a host pass)
  // is freed by this thread's retirements.
  // A guard held while it retires keeps it from freeing its own block.
  std::atomic<int> idle{0};
  std::atomic<bool> retired{false};
  std::atomic<bool> release{false};
  Participant reader = Register(domain);
  std::optional<GuardHolder> pin(std::in_place, reader);
  std::thread sleeper([&] {
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(RetireCounted(domain, &idle).ok());
    }
    retired.store(true);
    while (!release.load()) std::this_thread::yield();
  });
  while (!retired.load()) std::this_thread::yield();
  const int before = idle.load();
  pin.reset();
  for (int i = 0; i < 64 * 128 && idle.load() < 64; ++i) {
    ASSERT_TRUE(RetireCounted(domain, &mine).ok());
  }
  EXPECT_GE(idle.load(), 64) << "an idle thread's expired block was kept ("
                             << before << " freed by its own retires)";
  release.store(true);
  sleeper.join();
}

TEST_P(EpochDomainTest, E4RetireAtCapFailsBusyAfterDeadline) {
  EpochOptions options = Options();
  options.retired_bytes_cap = 1000;
  options.reclaim_deadline = milliseconds(5);
  EpochDomain domain(options);
  Participant reader = Register(domain);
  std::atomic<int> deletions{0};
  GuardHolder stalled(reader);
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(RetireCounted(domain, &deletions, 100).ok());
  const auto start = std::chrono::steady_clock::now();
  Status busy = RetireCounted(domain, &deletions, 100);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(busy.code(), StatusCode::kResourceExhausted) << busy.ToString();
  EXPECT_GE(waited, milliseconds(5)) << "gave up before the deadline";
  EpochDiagnostics d = domain.Diagnostics();
  EXPECT_EQ(d.busy_count, 1u);
  EXPECT_EQ(d.retired_bytes, 1000u);
  EXPECT_LE(d.peak_retired_bytes, 1000u);
  stalled.Release();
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(deletions.load(), 10);
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 0u);
  EXPECT_TRUE(RetireCounted(domain, &deletions, 100).ok());
}

// A thread that retires takes retired-byte credit from the cap ahead of use
// (so most retires touch no shared word). The credit is charged to the cap,
// so it must never be reported as retired bytes, and a writer short of room
// must get it back: back-pressure seals every bag and returns its credit.
TEST_P(EpochDomainTest,
       E4CreditHeldByAnotherThreadIsReturnedUnderBackPressure) {
  EpochOptions options = Options();
  options.retired_bytes_cap = 64 * 1024;
  options.reclaim_deadline = milliseconds(200);
  EpochDomain domain(options);
  Participant reader = Register(domain);
  std::atomic<int> deletions{0};
  std::atomic<bool> retired{false}, release{false};
  // Retires one byte and keeps its thread (and so its bag and credit) alive.
  std::thread holder([&] {
    ASSERT_TRUE(RetireCounted(domain, &deletions, 1).ok());
    retired.store(true);
    while (!release.load()) std::this_thread::yield();
  });
  while (!retired.load()) std::this_thread::yield();
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 1u) << "credit reported";
  {
    // A guard pins everything, so only the holder's credit can make room.
    Guard guard = reader.Enter();
    std::thread writer([&] {
      const Status s = RetireCounted(domain, &deletions, 64 * 1024 - 1);
      EXPECT_TRUE(s.ok()) << s.ToString();
    });
    writer.join();
    EXPECT_EQ(domain.Diagnostics().retired_bytes, 64u * 1024);
  }
  release.store(true);
  holder.join();
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(deletions.load(), 2);
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 0u);
}

TEST_P(EpochDomainTest, E4BlockingCallsInsideOwnGuardAreErrors) {
  EpochOptions options = Options();
  options.retired_bytes_cap = 100;
  EpochDomain domain(options);
  Participant p = Register(domain);
  std::atomic<int> deletions{0};
  Guard guard = p.Enter();
  ASSERT_TRUE(RetireCounted(domain, &deletions, 100).ok())
      << "a retire that fits is fine inside a guard";
  EXPECT_EQ(RetireCounted(domain, &deletions, 1).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(domain.Barrier().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(domain.Shutdown(milliseconds(1)).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(domain.Diagnostics().busy_count, 0u);
}

TEST_P(EpochDomainTest, E4BadRetireArgumentsAreRejected) {
  EpochOptions options = Options();
  options.retired_bytes_cap = 100;
  EpochDomain domain(options);
  std::atomic<int> deletions{0};
  EXPECT_EQ(RetireCounted(domain, &deletions, 101).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(domain.Retire(nullptr, 1, &DeleteCounted).code(),
            StatusCode::kInvalidArgument);
  int x = 0;
  EXPECT_EQ(domain.Retire(&x, 1, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 0u);
}

TEST_P(EpochDomainTest, E4ReservationHoldsBudgetUntilUsedOrDropped) {
  EpochOptions options = Options();
  options.retired_bytes_cap = 100;
  options.reclaim_deadline = milliseconds(1);
  EpochDomain domain(options);
  std::atomic<int> deletions{0};
  {
    Result<RetireReservation> r = domain.Reserve(80);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(domain.Diagnostics().retired_bytes, 80u);
    EXPECT_EQ(RetireCounted(domain, &deletions, 30).code(),
              StatusCode::kResourceExhausted);
  }
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 0u);
  Result<RetireReservation> r = domain.Reserve(80);
  ASSERT_TRUE(r.ok());
  domain.RetireReserved(std::move(r).value(), new Counted{&deletions},
                        &DeleteCounted);
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(deletions.load(), 1);
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 0u);
}

TEST_P(EpochDomainTest, E5StallReportNamesTheReaderWithBackoff) {
  ManualClock clock;
  std::vector<StallReport> reports;
  EpochOptions options = Options();
  options.clock = &clock;
  options.stall_threshold = seconds(1);
  options.stall_hook = [&](const StallReport& r) { reports.push_back(r); };
  EpochDomain domain(options);
  Participant stuck = Register(domain, "stuck-reader");
  std::atomic<int> deletions{0};
  Guard guard = stuck.Enter();
  ASSERT_TRUE(RetireCounted(domain, &deletions, 4096).ok());
  domain.TryReclaim();  // advances once, then blocked by the guard
  EXPECT_TRUE(reports.empty());

  clock.Advance(milliseconds(1500));
  domain.TryReclaim();
  ASSERT_EQ(reports.size(), 1u);
  const StallReport& first = reports[0];
  EXPECT_EQ(first.domain, "test");
  EXPECT_EQ(first.participant_name, "stuck-reader");
  EXPECT_EQ(first.participant_id, stuck.id());
  EXPECT_LT(first.pinned_epoch, first.global_epoch);
  EXPECT_GE(first.age, milliseconds(1500));
  EXPECT_EQ(first.retired_count, 1u);
  EXPECT_EQ(first.retired_bytes, 4096u);
  EXPECT_EQ(first.report_index, 0u);

  clock.Advance(seconds(1));  // 2.5 s: below 3x
  domain.TryReclaim();
  EXPECT_EQ(reports.size(), 1u);
  clock.Advance(seconds(1));  // 3.5 s
  domain.TryReclaim();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[1].report_index, 1u);
  clock.Advance(seconds(6));  // 9.5 s
  domain.TryReclaim();
  domain.TryReclaim();
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_EQ(reports[2].report_index, 2u);

  EpochDiagnostics d = domain.Diagnostics();
  EXPECT_EQ(d.stall_reports, 3u);
  EXPECT_EQ(d.active_guards, 1u);
  EXPECT_EQ(d.oldest_guard_participant, stuck.id());
  EXPECT_EQ(d.oldest_guard_participant_name, "stuck-reader");
  EXPECT_GE(d.oldest_guard_age, milliseconds(9500));
  EXPECT_EQ(deletions.load(), 0);
}

TEST_P(EpochDomainTest, E5DefaultStallReportGoesToStderr) {
  ManualClock clock;
  EpochOptions options = Options();
  options.clock = &clock;
  options.stall_threshold = seconds(1);
  EpochDomain domain(options);
  Participant stuck = Register(domain, "stderr-reader");
  std::atomic<int> deletions{0};
  Guard guard = stuck.Enter();
  ASSERT_TRUE(RetireCounted(domain, &deletions).ok());
  domain.TryReclaim();
  clock.Advance(seconds(2));
  ::testing::internal::CaptureStderr();
  domain.TryReclaim();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("stderr-reader"), std::string::npos) << err;
  EXPECT_NE(err.find("retired nodes"), std::string::npos) << err;
}

TEST_P(EpochDomainTest, E6StalledGuardInOneDomainDoesNotDelayAnother) {
  EpochOptions route_options = Options();
  route_options.name = "route";
  EpochOptions registry_options = Options();
  registry_options.name = "registry";
  EpochDomain route(route_options), registry(registry_options);
  Participant route_reader = Register(route);
  Participant registry_writer = Register(registry);
  std::atomic<int> route_deletions{0}, registry_deletions{0};
  Guard stalled = route_reader.Enter();
  ASSERT_TRUE(RetireCounted(route, &route_deletions).ok());
  ASSERT_TRUE(RetireCounted(registry, &registry_deletions).ok());
  ASSERT_TRUE(registry.Barrier().ok());
  EXPECT_EQ(registry_deletions.load(), 1);
  route.TryReclaim();
  route.TryReclaim();
  EXPECT_EQ(route_deletions.load(), 0);
}

class CountingClock final : public Clock {
 public:
  std::int64_t NowNanos() const noexcept override {
    reads.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  mutable std::atomic<int> reads{0};
};

// What a slot's owner line holds, for comparing before and after.
struct SlotImage {
  std::uint64_t state;
  std::uint32_t nesting;
  std::uintptr_t owner_thread;
  bool in_use;
  bool operator==(const SlotImage&) const = default;
};

SlotImage Image(const Participant& p) {
  const epoch_internal::Slot& slot = epoch_internal::EpochTestPeer::slot(p);
  return SlotImage{slot.state.load(), slot.nesting, slot.owner_thread.load(),
                   slot.in_use.load()};
}

TEST_P(EpochDomainTest, E7EnterLeaveReadNoClockAndWriteOnlyTheirSlot) {
  CountingClock clock;
  EpochOptions options = Options();
  options.clock = &clock;
  EpochDomain domain(options);
  // Registered so that the slot list reads: idle, mine, held (each new slot
  // goes to the head), putting both neighbours of `mine` next to it.
  Participant held = Register(domain, "held");
  Participant mine = Register(domain, "mine");
  Participant idle = Register(domain, "idle");
  GuardHolder holder(held);  // another thread's active slot
  std::atomic<int> deletions{0};
  ASSERT_TRUE(RetireCounted(domain, &deletions).ok());
  domain.TryReclaim();  // one advance: `held` now pins an older epoch

  const epoch_internal::ReadSide& read_side =
      epoch_internal::EpochTestPeer::read_side(domain);
  const std::uint64_t epoch = read_side.global_epoch.load();
  const std::uint64_t nonce = read_side.nonce;
  const SlotImage held_before = Image(held), idle_before = Image(idle);
  const SlotImage mine_before = Image(mine);
  const EpochDiagnostics before = domain.Diagnostics();
  const int clock_reads = clock.reads.load();
  for (int i = 0; i < 1000; ++i) {
    Guard g = mine.Enter();
    Guard nested = mine.Enter();
  }
  EXPECT_EQ(clock.reads.load(), clock_reads) << "read path read the clock";
  EXPECT_EQ(Image(held), held_before) << "enter/leave wrote another's slot";
  EXPECT_EQ(Image(idle), idle_before) << "enter/leave wrote another's slot";
  EXPECT_EQ(read_side.global_epoch.load(), epoch);
  EXPECT_EQ(read_side.nonce, nonce);
  // Its own slot is back to inactive, with this thread as the owner.
  const SlotImage mine_after = Image(mine);
  EXPECT_EQ(mine_after.state, 0u);
  EXPECT_EQ(mine_after.nesting, 0u);
  EXPECT_EQ(mine_after.in_use, mine_before.in_use);
  EXPECT_EQ(mine_after.owner_thread, epoch_internal::ThisThreadTag());
  const EpochDiagnostics after = domain.Diagnostics();
  EXPECT_EQ(after.global_epoch, before.global_epoch);
  EXPECT_EQ(after.grace_periods, before.grace_periods);
  EXPECT_EQ(after.active_guards, 1u);
  EXPECT_EQ(after.oldest_guard_participant, held.id());
  EXPECT_EQ(deletions.load(), 0);
  holder.Release();
  // The slot layout that keeps one reader's writes off another's line.
  static_assert(alignof(epoch_internal::Slot) >= 64);
  static_assert(sizeof(epoch_internal::Slot) % 64 == 0);
  static_assert(alignof(epoch_internal::ReadSide) >= 64);
}

TEST_P(EpochDomainTest, E8NestedGuardsBalanceAndDoNotRepublish) {
  EpochDomain domain(Options());
  Participant p = Register(domain);
  std::atomic<int> deletions{0};
  {
    Guard outer = p.Enter();
    domain.TryReclaim();  // the outer guard's epoch is current: one advance
    const std::uint64_t epoch = domain.Diagnostics().global_epoch;
    ASSERT_TRUE(RetireCounted(domain, &deletions).ok());
    {
      Guard inner = p.Enter();
      EXPECT_TRUE(p.InGuard());
      // Had the inner enter republished the new epoch, these would advance.
      domain.TryReclaim();
      domain.TryReclaim();
      EXPECT_EQ(domain.Diagnostics().global_epoch, epoch);
      { Guard innermost = p.Enter(); }
    }
    EXPECT_TRUE(p.InGuard()) << "inner leave ended the outer guard";
    EXPECT_EQ(domain.Diagnostics().active_guards, 1u);
    domain.TryReclaim();
    EXPECT_EQ(deletions.load(), 0);
  }
  EXPECT_FALSE(p.InGuard());
  EXPECT_EQ(domain.Diagnostics().active_guards, 0u);
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(deletions.load(), 1);
}

TEST_P(EpochDomainTest, E8MovedGuardLeavesOnce) {
  EpochDomain domain(Options());
  Participant p = Register(domain);
  {
    Guard a = p.Enter();
    Guard b = std::move(a);
    EXPECT_TRUE(p.InGuard());
  }
  EXPECT_FALSE(p.InGuard());
}

TEST_P(EpochDomainTest, E9ExitingParticipantsRetirementsAreFreedAndSlotReused) {
  EpochDomain domain(Options());
  std::atomic<int> deletions{0};
  for (int round = 0; round < 20; ++round) {
    std::thread([&] {
      Participant p = Register(domain, "short-lived");
      Guard g = p.Enter();
      for (int i = 0; i < 5; ++i)
        ASSERT_TRUE(RetireCounted(domain, &deletions).ok());
    }).join();
  }
  EpochDiagnostics d = domain.Diagnostics();
  EXPECT_EQ(d.registered_participants, 0u);
  EXPECT_EQ(d.participant_slots, 1u) << "departed slots were not reused";
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(deletions.load(), 100);
  Participant a = Register(domain), b = Register(domain);
  EXPECT_NE(a.id(), b.id());
  EXPECT_EQ(domain.Diagnostics().participant_slots, 2u);
}

TEST_P(EpochDomainTest, E10ShutdownRunsEveryDeleterExactlyOnce) {
  EpochDomain domain(Options());
  std::vector<std::atomic<int>> deletions(500);
  {
    Participant p = Register(domain);
    for (auto& d : deletions) ASSERT_TRUE(RetireCounted(domain, &d, 10).ok());
    domain.TryReclaim();
    domain.TryReclaim();
    for (int i = 0; i < 50; ++i)
      ASSERT_TRUE(RetireCounted(domain, &deletions[i], 10).ok());
    ASSERT_TRUE(domain.Shutdown(seconds(5)).ok());
  }
  for (int i = 0; i < 500; ++i) {
    EXPECT_EQ(deletions[i].load(), i < 50 ? 2 : 1) << i;
  }
  EpochDiagnostics d = domain.Diagnostics();
  EXPECT_EQ(d.retired_bytes, 0u);
  EXPECT_EQ(d.retired_count, 0u);
  // One code for "shut down": kUnavailable, never kFailedPrecondition
  // (which means "blocking call inside your own guard").
  std::atomic<int> late{0};
  EXPECT_EQ(RetireCounted(domain, &late).code(), StatusCode::kUnavailable);
  EXPECT_EQ(domain.RegisterParticipant().status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(domain.Reserve(10).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(domain.TryReserve(10).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(domain.Shutdown(seconds(1)).ok()) << "second shutdown";
  EXPECT_EQ(late.load(), 0);
}

TEST_P(EpochDomainTest, E10ShutdownWaitsForGuardsAndKeepsNodesOnTimeout) {
  EpochDomain domain(Options());
  Participant reader = Register(domain);
  std::atomic<int> deletions{0};
  GuardHolder holder(reader);
  ASSERT_TRUE(RetireCounted(domain, &deletions).ok());
  EXPECT_EQ(domain.Shutdown(milliseconds(5)).code(),
            StatusCode::kDeadlineExceeded);
  EXPECT_EQ(deletions.load(), 0);
  holder.Release();
  EXPECT_TRUE(domain.Shutdown(seconds(5)).ok());
  EXPECT_EQ(deletions.load(), 1);
}

TEST_P(EpochDomainTest, E10DestroyingDomainWithParticipantsIsReported) {
  std::vector<std::string> errors;
  EpochOptions options = Options();
  options.error_hook = [&](std::string_view e) { errors.emplace_back(e); };
  auto domain = std::make_unique<EpochDomain>(options);
  std::atomic<int> deletions{0};
  Participant survivor = Register(*domain, "survivor");
  ASSERT_TRUE(RetireCounted(*domain, &deletions).ok());
  domain.reset();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("1 registered participants"), std::string::npos)
      << errors[0];
  EXPECT_EQ(deletions.load(), 1) << "shutdown in the destructor freed it";
  {
    Guard still_valid = survivor.Enter();  // no UB: the core outlives
  }
}

TEST_P(EpochDomainTest, RegistrationNamesAndIds) {
  EpochDomain domain(Options());
  Participant named = Register(domain, "reactor-0");
  Participant unnamed = Register(domain);
  EXPECT_NE(named.id(), unnamed.id());
  EXPECT_EQ(domain.Diagnostics().registered_participants, 2u);
  Participant moved = std::move(named);
  EXPECT_EQ(domain.Diagnostics().registered_participants, 2u);
  {
    Guard g = moved.Enter();
    EpochDiagnostics d = domain.Diagnostics();
    EXPECT_EQ(d.oldest_guard_participant_name, "reactor-0");
  }
}

bool KernelHasPrivateExpeditedMembarrier() {
  const long mask = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  return mask >= 0 && (mask & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0;
}

TEST(EpochDomainModeTest, AsymmetricFallsBackOnlyWithoutMembarrier) {
  EpochOptions options;
  options.read_side_mode = ReadSideMode::kAsymmetric;
  EpochDomain domain(options);
  // Asked independently of the library: the mode follows the kernel.
  EXPECT_EQ(domain.read_side_mode(), KernelHasPrivateExpeditedMembarrier()
                                         ? ReadSideMode::kAsymmetric
                                         : ReadSideMode::kSeqCst);
  EpochDomain plain;
  EXPECT_EQ(plain.read_side_mode(), ReadSideMode::kSeqCst)
      << "kSeqCst was asked for";
}

TEST(EpochDomainForkTest, ChildResetsStateAndFreesNothing) {
  if (testing::kUnderTsan) GTEST_SKIP() << "TSan does not follow fork children";
  EpochOptions options;
  options.reclaim_every = 1'000'000;
  EpochDomain domain(options);
  Participant mine = Register(domain);
  Participant other = Register(domain);
  std::atomic<int> deletions{0};
  GuardHolder holder(other);  // its thread will not exist in the child
  ASSERT_TRUE(RetireCounted(domain, &deletions).ok());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    domain.ResetAfterFork();
    int code = 0;
    EpochDiagnostics d = domain.Diagnostics();
    if (d.active_guards != 0) code |= 1;
    if (d.retired_count != 0 || d.retired_bytes != 0) code |= 2;
    std::atomic<int> child_deletions{0};
    {
      Guard g = mine.Enter();
      if (!RetireCounted(domain, &child_deletions).ok()) code |= 4;
    }
    if (!domain.Barrier(seconds(5)).ok()) code |= 8;
    if (child_deletions.load() != 1) code |= 16;
    if (deletions.load() != 0) code |= 32;  // the parent's node: not freed
    _exit(code);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0);
  holder.Release();
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(deletions.load(), 1) << "the parent still frees its own node";
}

TEST(EpochDomainDeathTest, DestroyingParticipantInsideGuardAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (testing::kUnderTsan) GTEST_SKIP() << "death tests fork";
  EXPECT_DEATH(
      {
        EpochDomain domain;
        auto p = std::make_unique<Participant>(Register(domain));
        Guard g = p->Enter();
        p.reset();
      },
      "Participant destroyed while one of its guards is active");
}

}  // namespace
}  // namespace cairn

namespace cairn {
namespace {

TEST(EpochThreadParticipantTest, EnterOnThisThreadRegistersOncePerThread) {
  EpochOptions options;
  options.reclaim_every = 1'000'000;
  EpochDomain domain(options);
  std::atomic<int> deletions{0};
  {
    Guard g = domain.EnterOnThisThread();
    Guard nested = domain.EnterOnThisThread();
    EXPECT_EQ(domain.Diagnostics().registered_participants, 1u);
    EXPECT_EQ(domain.Diagnostics().active_guards, 1u);
    ASSERT_TRUE(RetireCounted(domain, &deletions).ok());
    // Back-pressure and Barrier see the implicit guard too.
    EXPECT_EQ(domain.Barrier().code(), StatusCode::kFailedPrecondition);
    domain.TryReclaim();
    domain.TryReclaim();
    EXPECT_EQ(deletions.load(), 0);
  }
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(deletions.load(), 1);
  std::thread([&] {
    Guard g = domain.EnterOnThisThread();
    EXPECT_EQ(domain.Diagnostics().registered_participants, 2u);
  }).join();
  EXPECT_EQ(domain.Diagnostics().registered_participants, 1u)
      << "thread exit released its implicit participant";
}

TEST(EpochThreadParticipantTest, TwoDomainsOnOneThreadKeepSeparateSlots) {
  EpochDomain a, b;
  {
    Guard ga = a.EnterOnThisThread();
    Guard gb = b.EnterOnThisThread();
    Guard ga2 = a.EnterOnThisThread();
    EXPECT_EQ(a.Diagnostics().active_guards, 1u);
    EXPECT_EQ(b.Diagnostics().active_guards, 1u);
  }
  EXPECT_EQ(a.Diagnostics().active_guards, 0u);
  EXPECT_EQ(b.Diagnostics().active_guards, 0u);
}

TEST(EpochThreadParticipantTest, ImplicitParticipantsAreNotAnE10Error) {
  std::vector<std::string> errors;
  EpochOptions options;
  options.error_hook = [&](std::string_view e) { errors.emplace_back(e); };
  {
    EpochDomain domain(options);
    Guard g = domain.EnterOnThisThread();
  }
  EXPECT_TRUE(errors.empty()) << errors[0];
  // A new domain (perhaps at the same address) gets a fresh participant.
  EpochDomain again;
  Guard g = again.EnterOnThisThread();
  EXPECT_EQ(again.Diagnostics().active_guards, 1u);
}

}  // namespace
}  // namespace cairn

namespace cairn {
namespace {

TEST(EpochReserveTest, TryReserveNeverWaitsOrCountsBusy) {
  EpochOptions options;
  options.retired_bytes_cap = 100;
  options.reclaim_deadline = std::chrono::seconds(10);  // would be noticed
  EpochDomain domain(options);
  Result<RetireReservation> held = domain.TryReserve(90);
  ASSERT_TRUE(held.ok());
  testing::AllocationCounter allocs;
  Result<RetireReservation> refused = domain.TryReserve(20);
  EXPECT_EQ(allocs.count(), 0u) << "a refusal under a caller's lock allocated";
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(domain.Diagnostics().busy_count, 0u);
  EXPECT_EQ(domain.TryReserve(101).status().code(),
            StatusCode::kInvalidArgument);
}

// The route's one-step publication: the unlink runs only once the bytes
// are charged, so a refused writer has changed nothing; the node is then
// pending like any retirement, and no refusal allocates or counts as busy.
TEST(EpochReserveTest, TryUnlinkAndRetireUnlinksOnlyWithRoom) {
  EpochOptions options;
  options.retired_bytes_cap = 100;
  options.reclaim_deadline = std::chrono::seconds(10);  // would be noticed
  EpochDomain domain(options);
  std::atomic<int> deletions{0};
  int unlinks = 0;
  auto unlink = [&] { ++unlinks; };
  auto* node = new Counted{&deletions};
  std::optional<RetireReservation> held(
      std::move(domain.TryReserve(90)).value());
  EXPECT_EQ(domain.TryUnlinkAndRetire(node, 20, &DeleteCounted, unlink).code(),
            StatusCode::kResourceExhausted);  // binds this thread's bag
  {
    testing::AllocationCounter allocs;
    EXPECT_EQ(
        domain.TryUnlinkAndRetire(node, 20, &DeleteCounted, unlink).code(),
        StatusCode::kResourceExhausted);
    EXPECT_EQ(allocs.count(), 0u)
        << "a refusal under a caller's lock allocated";
  }
  EXPECT_EQ(unlinks, 0) << "unlinked without the retire budget";
  EXPECT_EQ(domain.Diagnostics().busy_count, 0u);
  EXPECT_EQ(domain.TryUnlinkAndRetire(node, 101, &DeleteCounted, unlink).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(unlinks, 0);
  held.reset();
  ASSERT_TRUE(domain.TryUnlinkAndRetire(node, 20, &DeleteCounted, unlink).ok());
  EXPECT_EQ(unlinks, 1);
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 20u);
  EXPECT_EQ(deletions.load(), 0);
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(deletions.load(), 1);
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 0u);
  ASSERT_TRUE(domain.Shutdown(std::chrono::seconds(5)).ok());
  auto* late = new Counted{&deletions};
  EXPECT_EQ(domain.TryUnlinkAndRetire(late, 20, &DeleteCounted, unlink).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(unlinks, 1);
  delete late;
}

}  // namespace
}  // namespace cairn

namespace cairn {
namespace {

// A thread that entered many domains must not keep the dead ones alive: the
// next bind forgets them, which here frees a node left pending in one.
TEST(EpochThreadParticipantTest, DestroyedDomainsAreForgottenByTheNextBind) {
  std::atomic<int> deletions{0};
  std::vector<std::string> errors;
  {
    EpochOptions options;
    options.reclaim_every = 1'000'000;
    options.error_hook = [&](std::string_view e) { errors.emplace_back(e); };
    auto doomed = std::make_unique<EpochDomain>(options);
    Guard g = doomed->EnterOnThisThread();
    ASSERT_TRUE(RetireCounted(*doomed, &deletions).ok());
    doomed.reset();  // inside our own guard: shutdown refused, node kept
  }
  EXPECT_FALSE(errors.empty());
  EXPECT_EQ(deletions.load(), 0);
  EpochDomain next;
  Guard g = next.EnterOnThisThread();  // binds: drops the dead domain
  EXPECT_EQ(deletions.load(), 1) << "the dead domain's core was kept alive";
}

// Each short-lived domain is destroyed inside this thread's guard of it, so
// its shutdown is refused and its node stays pending until its core dies.
// The core dies only when the thread cache forgets the domain, which the
// next bind must do: a cache that keeps dead domains keeps every node, and
// grows (and slows every bind) with each domain the thread ever entered.
TEST(EpochThreadParticipantTest, ManyShortLivedDomainsKeepBindingCheap) {
  constexpr int kDomains = 500;
  std::atomic<int> deletions{0};
  EpochOptions options;
  options.reclaim_every = 1'000'000;
  options.error_hook = [](std::string_view) {};  // destroyed inside a guard
  for (int i = 0; i < kDomains; ++i) {
    auto domain = std::make_unique<EpochDomain>(options);
    Guard g = domain->EnterOnThisThread();  // binds: forgets the last one
    ASSERT_TRUE(RetireCounted(*domain, &deletions).ok());
    domain.reset();
  }
  EXPECT_EQ(deletions.load(), kDomains - 1)
      << "binding kept destroyed domains alive";
  EpochDomain a, b;
  for (int i = 0; i < 100; ++i) {
    Guard ga = a.EnterOnThisThread();
    Guard gb = b.EnterOnThisThread();
  }
  EXPECT_EQ(deletions.load(), kDomains);
  EXPECT_EQ(a.Diagnostics().registered_participants, 1u);
  EXPECT_EQ(b.Diagnostics().registered_participants, 1u);
}

// Entering and leaving a guard, and an EnterOnThisThread() on a bound
// thread, never allocate (the claim in epoch_domain.h).
TEST(EpochAllocationTest, GuardsAndBoundThreadEntriesDoNotAllocate) {
  EpochDomain domain;
  Participant p = Register(domain);
  { Guard warm = domain.EnterOnThisThread(); }  // binds (allocates once)
  { Guard warm = p.Enter(); }
  testing::AllocationCounter allocs;
  for (int i = 0; i < 1000; ++i) {
    Guard g = p.Enter();
    Guard nested = p.Enter();
    Guard implicit = domain.EnterOnThisThread();
    Guard implicit_nested = domain.EnterOnThisThread();
  }
  EXPECT_EQ(allocs.count(), 0u);
}

}  // namespace
}  // namespace cairn
