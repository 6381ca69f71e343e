// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// RwLock torture: 8 threads (on a 2-core machine, oversubscribed) mixing
// blocking and try acquisitions of both modes, plain and biased (token)
// shared ones, every critical section checked for mutual exclusion, and a
// writer that must get through while readers stream. A watchdog turns a lost
// wakeup or a starved writer into a failure. Each test runs over RwLock (TSan
// sees it through its
// __tsan_mutex_* hooks and checks the data it guards) and over
// base_internal::RwLockCore (no hooks: TSan checks the lock's own acquire and
// release orderings). Durations scale with CAIRN_STRESS_SCALE.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/rw_lock_testing.h"
#include "cairn/base/rw_lock.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::LockWatchdog;
using testing::StressDuration;
using testing::StressIterations;

constexpr std::chrono::seconds kBound{240};

// What the lock guards. `a` and `b` are plain (non-atomic) words: a writer
// moves both, a reader checks they agree, and TSan reports any access pair
// the lock failed to order. The checker counts are relaxed atomics, so they
// order nothing themselves (a seq_cst checker would hide an ordering bug of
// the lock from TSan).
struct Guarded {
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  std::atomic<int> readers_in{0};
  std::atomic<int> writers_in{0};
  std::atomic<std::uint64_t> violations{0};
};

// Set per section by the mixed torture: the section yields the CPU while
// it holds the lock.
thread_local bool t_yield_inside = false;

void ReadSection(Guarded& g) {
  g.readers_in.fetch_add(1, std::memory_order_relaxed);
  if (g.writers_in.load(std::memory_order_relaxed) != 0) {
    g.violations.fetch_add(1, std::memory_order_relaxed);
  }
  if (g.a != g.b) g.violations.fetch_add(1, std::memory_order_relaxed);
  if (t_yield_inside) std::this_thread::yield();
  g.readers_in.fetch_sub(1, std::memory_order_relaxed);
}

void WriteSection(Guarded& g) {
  if (g.writers_in.fetch_add(1, std::memory_order_relaxed) != 0 ||
      g.readers_in.load(std::memory_order_relaxed) != 0) {
    g.violations.fetch_add(1, std::memory_order_relaxed);
  }
  ++g.a;
  if (t_yield_inside) std::this_thread::yield();
  ++g.b;
  g.writers_in.fetch_sub(1, std::memory_order_relaxed);
}

// The per-lock-type calls. RwLock's are annotated for the thread-safety
// analysis; each helper acquires and releases in one scope.
template <typename L>
void Read(L& mu, Guarded& g) {
  mu.LockShared();
  ReadSection(g);
  mu.UnlockShared();
}
template <typename L>
bool TryRead(L& mu, Guarded& g) {
  if (!mu.TryLockShared()) return false;
  ReadSection(g);
  mu.UnlockShared();
  return true;
}
template <typename L>
void TokenRead(L& mu, Guarded& g) {
  ReaderToken token;
  mu.LockShared(&token);
  ReadSection(g);
  mu.UnlockShared(token);
}
template <typename L>
bool TryTokenRead(L& mu, Guarded& g) {
  ReaderToken token;
  if (!mu.TryLockShared(&token)) return false;
  ReadSection(g);
  mu.UnlockShared(token);
  return true;
}
template <typename L>
void Write(L& mu, Guarded& g) {
  mu.Lock();
  WriteSection(g);
  mu.Unlock();
}
template <typename L>
bool TryWrite(L& mu, Guarded& g) {
  if (!mu.TryLock()) return false;
  WriteSection(g);
  mu.Unlock();
  return true;
}

template <typename L>
class RwLockStressTest : public ::testing::Test {};
using LockTypes = ::testing::Types<RwLock, base_internal::RwLockCore>;
TYPED_TEST_SUITE(RwLockStressTest, LockTypes);

// Every thread mixes LockShared (35% plain, 35% with a token, which takes
// the biased path while the lock is biased), TryLockShared (5%, half with a
// token), Lock (20%) and TryLock (5%) on one lock: the bias is revoked and
// set again all the time. At the end a == b == the number of successful
// write sections, and no section saw another it must exclude.
TYPED_TEST(RwLockStressTest, MixedReadersAndWritersExclude) {
  LockWatchdog dog(kBound, "MixedReadersAndWritersExclude");
  TypeParam mu;
  Guarded g;
  constexpr int kThreads = 8;
  const auto duration = StressDuration(testing::kUnderTsan ? 600 : 1500);
  const auto deadline = std::chrono::steady_clock::now() + duration;
  std::atomic<std::uint64_t> writes{0};
  std::atomic<std::uint64_t> reads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::uint64_t rng = 0x9e3779b97f4a7c15ULL * (t + 1);
      std::uint64_t my_writes = 0;
      std::uint64_t my_reads = 0;
      int i = 0;
      while ((++i & 63) != 0 || std::chrono::steady_clock::now() < deadline) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        const unsigned op = static_cast<unsigned>(rng % 100);
        // One section in 32 yields the CPU while it holds the lock, so the
        // others contend, spin and sleep in the futex instead of running
        // their sections one scheduler quantum at a time.
        t_yield_inside = ((rng >> 32) & 31) == 0;
        if (op < 35) {
          Read(mu, g);
          ++my_reads;
        } else if (op < 70) {
          TokenRead(mu, g);
          ++my_reads;
        } else if (op < 75) {
          my_reads +=
              ((op & 1) != 0 ? TryTokenRead(mu, g) : TryRead(mu, g)) ? 1 : 0;
        } else if (op < 95) {
          Write(mu, g);
          ++my_writes;
        } else {
          my_writes += TryWrite(mu, g) ? 1 : 0;
        }
      }
      writes.fetch_add(my_writes, std::memory_order_relaxed);
      reads.fetch_add(my_reads, std::memory_order_relaxed);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(g.violations.load(), 0u);
  EXPECT_EQ(g.a, writes.load());
  EXPECT_EQ(g.b, writes.load());
  EXPECT_GT(reads.load(), 0u);
  EXPECT_GT(writes.load(), 0u);
  std::printf("%llu reads, %llu writes\n",
              static_cast<unsigned long long>(reads.load()),
              static_cast<unsigned long long>(writes.load()));
}

// Mostly biased readers (95% token reads, 2% plain) and rare writers
// (2% Lock, 1% TryLock): most reads hold table slots, and every write
// revokes a bias that was set again since the last. One read section in 16
// yields the CPU, so writers wait in the revocation for a preempted biased
// reader. Counts the sections that ran on the biased path, so a run that
// never took it fails.
TYPED_TEST(RwLockStressTest, BiasedReadersAndRevokingWritersExclude) {
  LockWatchdog dog(kBound, "BiasedReadersAndRevokingWritersExclude");
  TypeParam mu;
  Guarded g;
  constexpr int kThreads = 8;
  const auto duration = StressDuration(testing::kUnderTsan ? 600 : 1500);
  const auto deadline = std::chrono::steady_clock::now() + duration;
  std::atomic<std::uint64_t> writes{0};
  std::atomic<std::uint64_t> biased_reads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::uint64_t rng = 0x2545f4914f6cdd1dULL * (t + 1);
      std::uint64_t my_writes = 0;
      std::uint64_t my_biased = 0;
      int i = 0;
      while ((++i & 63) != 0 || std::chrono::steady_clock::now() < deadline) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        const unsigned op = static_cast<unsigned>(rng % 100);
        t_yield_inside = ((rng >> 32) & 15) == 0;
        if (op < 94) {
          ReaderToken token;
          mu.LockShared(&token);
          ReadSection(g);
          my_biased += token.biased() ? 1 : 0;
          mu.UnlockShared(token);
        } else if (op < 95) {
          TryTokenRead(mu, g);
        } else if (op < 97) {
          Read(mu, g);
        } else if (op < 99) {
          Write(mu, g);
          ++my_writes;
        } else {
          my_writes += TryWrite(mu, g) ? 1 : 0;
        }
      }
      writes.fetch_add(my_writes, std::memory_order_relaxed);
      biased_reads.fetch_add(my_biased, std::memory_order_relaxed);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(g.violations.load(), 0u);
  EXPECT_EQ(g.a, writes.load());
  EXPECT_EQ(g.b, writes.load());
  EXPECT_GT(writes.load(), 0u);
  EXPECT_GT(biased_reads.load(), 0u);
  std::printf("%llu biased reads, %llu writes\n",
              static_cast<unsigned long long>(biased_reads.load()),
              static_cast<unsigned long long>(writes.load()));
}

// Six readers (three of them biased when they can) hold the lock almost all
// the time, their sections overlapping, so the reader count would never
// reach zero under a reader-preferring lock; two writers must still finish
// their sections. The readers stop only when the writers are done, so a starved
// writer trips the watchdog.
TYPED_TEST(RwLockStressTest, WritersGetThroughStreamingReaders) {
  LockWatchdog dog(kBound, "WritersGetThroughStreamingReaders");
  TypeParam mu;
  Guarded g;
  constexpr int kReaders = 6;
  constexpr int kWriters = 2;
  const int writes_each = StressIterations(testing::kUnderTsan ? 50 : 200);
  std::atomic<int> writers_left{kWriters};
  std::atomic<int> readers_started{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      bool started = false;
      while (writers_left.load(std::memory_order_relaxed) > 0) {
        // Half the readers take the biased path whenever the bias is set.
        ReaderToken token;
        if (r % 2 == 0) {
          mu.LockShared(&token);
        } else {
          mu.LockShared();
        }
        // A long section: a reader spends nearly all its time inside.
        for (int k = 0; k < 200; ++k) ReadSection(g);
        if (r % 2 == 0) {
          mu.UnlockShared(token);
        } else {
          mu.UnlockShared();
        }
        if (!started) {
          started = true;
          readers_started.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  // Let the readers' stream start before the writers arrive.
  while (readers_started.load(std::memory_order_relaxed) < kReaders) {
    std::this_thread::yield();
  }
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&] {
      for (int i = 0; i < writes_each; ++i) Write(mu, g);
      writers_left.fetch_sub(1, std::memory_order_relaxed);
    });
  }
  for (auto& t : writers) t.join();
  for (auto& t : threads) t.join();
  EXPECT_EQ(g.violations.load(), 0u);
  EXPECT_EQ(g.a, static_cast<std::uint64_t>(kWriters) * writes_each);
}

}  // namespace
}  // namespace cairn
