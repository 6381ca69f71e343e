// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/base/mutex.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/rw_lock_testing.h"
#include "testing/stress.h"

namespace cairn {
namespace {

TEST(MutexTest, SerialisesWriters) {
  Mutex mu;
  int counter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        MutexLock lock(&mu);
        ++counter;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 40000);
}

// Try-lock probes from another thread, written so the thread-safety
// analysis can follow them (the lock is released in the branch that took it).
bool CanLock(Mutex& mu) {
  if (!mu.TryLock()) return false;
  mu.Unlock();
  return true;
}
bool CanLock(SharedMutex& mu) {
  if (!mu.TryLock()) return false;
  mu.Unlock();
  return true;
}
bool CanLockShared(SharedMutex& mu) {
  if (!mu.TryLockShared()) return false;
  mu.UnlockShared();
  return true;
}

TEST(MutexTest, TryLockFailsWhileHeld) {
  Mutex mu;
  bool acquired = true;
  {
    MutexLock lock(&mu);
    std::thread([&] { acquired = CanLock(mu); }).join();
  }
  EXPECT_FALSE(acquired);
  EXPECT_TRUE(CanLock(mu));
}

TEST(SharedMutexTest, ReadersShareWritersExclude) {
  SharedMutex mu;
  {
    ReaderLock reader(&mu);
    bool second_reader = false;
    bool writer = true;
    std::thread([&] {
      second_reader = CanLockShared(mu);
      writer = CanLock(mu);
    }).join();
    EXPECT_TRUE(second_reader);
    EXPECT_FALSE(writer);
  }
  {
    WriterLock writer(&mu);
    bool reader = true;
    bool other_writer = true;
    std::thread([&] {
      reader = CanLockShared(mu);
      other_writer = CanLock(mu);
    }).join();
    EXPECT_FALSE(reader);
    EXPECT_FALSE(other_writer);
  }
  EXPECT_TRUE(CanLock(mu));
}

// Mutex and its hook-less core: TSan sees Mutex through its __tsan_mutex_*
// hooks (and checks what it guards), and checks MutexCore's own acquire and
// release orderings, since the guarded words below are plain memory.
template <typename L>
class MutexStressTest : public ::testing::Test {};
using MutexTypes = ::testing::Types<Mutex, base_internal::MutexCore>;
TYPED_TEST_SUITE(MutexStressTest, MutexTypes);

template <typename L>
void Exclusive(L& mu, std::uint64_t& a, std::uint64_t& b,
               std::atomic<int>& inside, std::atomic<int>& violations,
               bool sleep_inside) {
  mu.Lock();
  if (inside.fetch_add(1, std::memory_order_relaxed) != 0) {
    violations.fetch_add(1, std::memory_order_relaxed);
  }
  ++a;
  // Holding the lock across a sleep sends the other threads past their
  // spin into the futex, so wakeups are exercised, not only the spin.
  if (sleep_inside) std::this_thread::sleep_for(std::chrono::microseconds(50));
  ++b;
  inside.fetch_sub(1, std::memory_order_relaxed);
  mu.Unlock();
}

// 8 threads on 2 cores, blocking and try acquisitions, some sections
// sleeping while they hold: every section alone, every increment counted,
// and nobody left asleep (the watchdog turns a lost wakeup into a failure).
TYPED_TEST(MutexStressTest, ExcludesAndWakesEverySleeper) {
  testing::LockWatchdog dog(std::chrono::seconds(240),
                            "ExcludesAndWakesEverySleeper");
  TypeParam mu;
  std::uint64_t a = 0;  // plain: TSan reports what the lock fails to order
  std::uint64_t b = 0;
  std::atomic<int> inside{0};
  std::atomic<int> violations{0};
  std::atomic<std::uint64_t> sections{0};
  const int iterations = testing::StressIterations(40000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::uint64_t mine = 0;
      for (int i = 0; i < iterations; ++i) {
        if (i % 8 == 3) {
          if (!mu.TryLock()) continue;
          if (inside.fetch_add(1, std::memory_order_relaxed) != 0) {
            violations.fetch_add(1, std::memory_order_relaxed);
          }
          ++a;
          ++b;
          inside.fetch_sub(1, std::memory_order_relaxed);
          mu.Unlock();
        } else {
          Exclusive(mu, a, b, inside, violations, (i + t) % 512 == 0);
        }
        ++mine;
      }
      sections.fetch_add(mine, std::memory_order_relaxed);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(violations.load(), 0);
  mu.Lock();
  EXPECT_EQ(a, sections.load());
  EXPECT_EQ(b, a);
  mu.Unlock();
}

// A thread that sleeps on the futex is woken by the Unlock that frees the
// lock, and the word then says a sleeper may be left (so the next Unlock
// wakes too) until the lock is free.
TEST(MutexCoreTest, UnlockWakesAThreadAsleepOnTheLock) {
  testing::LockWatchdog dog(std::chrono::seconds(60),
                            "UnlockWakesAThreadAsleepOnTheLock");
  base_internal::MutexCore mu;
  mu.Lock();
  std::atomic<pid_t> tid{0};
  std::atomic<bool> acquired{false};
  std::thread sleeper([&] {
    tid.store(testing::CurrentTid());
    mu.Lock();
    acquired.store(true);
    mu.Unlock();
  });
  testing::WaitUntil([&] {
    const pid_t t = tid.load();
    return t != 0 && testing::ThreadAsleep(t) &&
           mu.RawWord() == base_internal::MutexCore::kSleepers;
  });
  EXPECT_FALSE(acquired.load());
  mu.Unlock();
  sleeper.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_EQ(mu.RawWord(), base_internal::MutexCore::kFree);
}

// std::condition_variable_any waits with Mutex (LogStore's group commit and
// flusher handoff do): the waiter releases the lock while it sleeps, so the
// notifier can take it, and takes it back when woken.
TEST(MutexTest, ConditionVariableAnyReleasesWhileWaiting) {
  testing::LockWatchdog dog(std::chrono::seconds(60),
                            "ConditionVariableAnyReleasesWhileWaiting");
  Mutex mu;
  std::condition_variable_any cv;
  bool ready = false;
  bool seen = false;
  std::atomic<bool> checked{false};  // the waiter found `ready` false
  std::atomic<pid_t> tid{0};
  std::thread waiter([&] {
    tid.store(testing::CurrentTid());
    std::unique_lock<Mutex> lock(mu);
    cv.wait(lock, [&] {
      checked.store(true);
      return ready;
    });
    seen = true;
  });
  // Only once the waiter is asleep in the wait (holding nothing, if the
  // wait released the lock) does this thread take the lock.
  testing::WaitUntil(
      [&] { return checked.load() && testing::ThreadAsleep(tid.load()); });
  {
    std::unique_lock<Mutex> lock(mu);
    ready = true;
  }
  cv.notify_all();
  waiter.join();
  EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace cairn
