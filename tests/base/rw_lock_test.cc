// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Deterministic tests of RwLock's protocol: each scenario waits for a named
// state (a count in the word, a thread asleep in the futex) before it moves
// on, never for a time. The protocol tests drive base_internal::RwLockCore,
// which RwLock wraps, because they read its word.

#include "cairn/base/rw_lock.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/rw_lock_testing.h"
#include "cairn/base/mutex.h"

namespace cairn {
namespace {

using Core = base_internal::RwLockCore;
using testing::CurrentTid;
using testing::LockWatchdog;
using testing::ThreadAsleep;
using testing::WaitUntil;

constexpr std::chrono::seconds kBound{60};

std::uint32_t Waiters(const Core& core) {
  return (core.RawWord() & Core::kWaiterMask) / Core::kWaiterUnit;
}

// Try-lock probes, written so the thread-safety analysis can follow them.
bool CanLock(RwLock& mu) {
  if (!mu.TryLock()) return false;
  mu.Unlock();
  return true;
}
bool CanLockShared(RwLock& mu) {
  if (!mu.TryLockShared()) return false;
  mu.UnlockShared();
  return true;
}

TEST(RwLockTest, IsOneWordAndGuardsWorkWithIt) {
  EXPECT_EQ(sizeof(RwLock), 4u);
  RwLock mu;
  {
    WriterLock writer(&mu);
    bool can_lock = true;
    bool can_lock_shared = true;
    std::thread([&] {
      can_lock = CanLock(mu);
      can_lock_shared = CanLockShared(mu);
    }).join();
    EXPECT_FALSE(can_lock);
    EXPECT_FALSE(can_lock_shared);
  }
  {
    ReaderLock reader(&mu);
    bool can_lock = true;
    bool can_lock_shared = false;
    std::thread([&] {
      can_lock = CanLock(mu);
      can_lock_shared = CanLockShared(mu);
    }).join();
    EXPECT_FALSE(can_lock);
    EXPECT_TRUE(can_lock_shared);
  }
  EXPECT_TRUE(CanLock(mu));
  EXPECT_TRUE(CanLockShared(mu));
}

TEST(RwLockTest, WordCountsReadersAndMarksTheWriter) {
  Core core;
  core.LockShared();
  core.LockShared();
  EXPECT_EQ(core.RawWord(), 2u);
  EXPECT_FALSE(core.TryLock());
  EXPECT_TRUE(core.TryLockShared());
  EXPECT_EQ(core.RawWord(), 3u);
  core.UnlockShared();
  core.UnlockShared();
  core.UnlockShared();
  EXPECT_EQ(core.RawWord(), 0u);
  core.Lock();
  EXPECT_EQ(core.RawWord(), Core::kWriter);
  EXPECT_FALSE(core.TryLock());
  EXPECT_FALSE(core.TryLockShared());
  core.Unlock();
  EXPECT_EQ(core.RawWord(), 0u);
}

// The reader count never carries into the waiting-writer bits: at 2^20 - 1
// readers a further reader is refused (LockShared would yield until one
// leaves).
TEST(RwLockTest, ReaderCountSaturatesWithoutOverflow) {
  LockWatchdog dog(kBound, "ReaderCountSaturatesWithoutOverflow");
  Core core;
  for (std::uint32_t i = 0; i < Core::kReaderMask; ++i) core.LockShared();
  EXPECT_EQ(core.RawWord(), Core::kReaderMask);
  EXPECT_FALSE(core.TryLockShared());
  EXPECT_FALSE(core.TryLock());
  std::atomic<bool> extra_in{false};
  std::thread extra([&] {
    core.LockShared();
    extra_in.store(true, std::memory_order_relaxed);
  });
  // Time for an overflowing LockShared to show; a correct one waits.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(extra_in.load(std::memory_order_relaxed));
  EXPECT_EQ(core.RawWord(), Core::kReaderMask);
  core.UnlockShared();
  extra.join();
  EXPECT_TRUE(extra_in.load(std::memory_order_relaxed));
  EXPECT_EQ(core.RawWord(), Core::kReaderMask);
  core.UnlockShared();
  EXPECT_TRUE(core.TryLockShared());
  for (std::uint32_t i = 0; i < Core::kReaderMask; ++i) core.UnlockShared();
  EXPECT_EQ(core.RawWord(), 0u);
}

// Writer preference: once a writer waits, no new reader enters, and the
// last reader out wakes the writer asleep in the futex.
TEST(RwLockTest, WaitingWriterHoldsOffNewReaders) {
  LockWatchdog dog(kBound, "WaitingWriterHoldsOffNewReaders");
  Core core;
  core.LockShared();
  std::atomic<pid_t> writer_tid{0};
  std::atomic<bool> writer_in{false};
  std::atomic<bool> reader_in{false};
  std::atomic<bool> writer_saw_reader{true};
  std::thread writer([&] {
    writer_tid.store(CurrentTid(), std::memory_order_relaxed);
    core.Lock();
    writer_saw_reader.store(reader_in.load(std::memory_order_relaxed),
                            std::memory_order_relaxed);
    writer_in.store(true, std::memory_order_relaxed);
    core.Unlock();
  });
  WaitUntil([&] { return Waiters(core) == 1; });
  EXPECT_FALSE(core.TryLockShared());

  std::atomic<pid_t> reader_tid{0};
  std::thread reader([&] {
    reader_tid.store(CurrentTid(), std::memory_order_relaxed);
    core.LockShared();
    reader_in.store(true, std::memory_order_relaxed);
    core.UnlockShared();
  });
  WaitUntil([&] {
    const pid_t tid = reader_tid.load(std::memory_order_relaxed);
    return reader_in.load(std::memory_order_relaxed) ||
           (tid != 0 && ThreadAsleep(tid));
  });
  EXPECT_FALSE(reader_in.load(std::memory_order_relaxed));
  EXPECT_NE(core.RawWord() & Core::kReadersParked, 0u);
  WaitUntil([&] { return ThreadAsleep(writer_tid.load()); });
  EXPECT_FALSE(writer_in.load(std::memory_order_relaxed));

  core.UnlockShared();  // the last reader out wakes the writer
  writer.join();
  reader.join();
  EXPECT_TRUE(writer_in.load());
  EXPECT_FALSE(writer_saw_reader.load());
  EXPECT_TRUE(reader_in.load());
  EXPECT_EQ(core.RawWord(), 0u);
}

// A writer's release with no writer waiting clears the parked flag and
// wakes every parked reader.
TEST(RwLockTest, WriterReleaseWakesEveryParkedReader) {
  LockWatchdog dog(kBound, "WriterReleaseWakesEveryParkedReader");
  Core core;
  core.Lock();
  constexpr int kReaders = 3;
  std::vector<std::atomic<pid_t>> tids(kReaders);
  std::atomic<int> done{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&, i] {
      tids[i].store(CurrentTid(), std::memory_order_relaxed);
      core.LockShared();
      done.fetch_add(1, std::memory_order_relaxed);
      core.UnlockShared();
    });
  }
  WaitUntil([&] {
    for (auto& tid : tids) {
      const pid_t t = tid.load(std::memory_order_relaxed);
      if (t == 0 || !ThreadAsleep(t)) return false;
    }
    return true;
  });
  EXPECT_EQ(core.RawWord(), Core::kWriter | Core::kReadersParked);
  EXPECT_EQ(done.load(), 0);
  core.Unlock();
  for (auto& t : readers) t.join();
  EXPECT_EQ(done.load(), kReaders);
  EXPECT_EQ(core.RawWord(), 0u);
}

// Two writers asleep behind a third: each release wakes one, each woken
// writer leaves the waiting count, and readers parked behind them wake after
// the last one.
TEST(RwLockTest, WaitingWritersWakeInTurnThenParkedReaders) {
  LockWatchdog dog(kBound, "WaitingWritersWakeInTurnThenParkedReaders");
  Core core;
  core.Lock();
  std::uint64_t counter = 0;  // guarded by core; TSan checks it
  std::vector<std::atomic<pid_t>> tids(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      tids[i].store(CurrentTid(), std::memory_order_relaxed);
      core.Lock();
      ++counter;
      core.Unlock();
    });
  }
  WaitUntil([&] { return Waiters(core) == 2; });
  std::atomic<int> readers_done{0};
  for (int i = 2; i < 4; ++i) {
    threads.emplace_back([&, i] {
      tids[i].store(CurrentTid(), std::memory_order_relaxed);
      core.LockShared();
      EXPECT_EQ(counter, 3u);  // all three writers went first
      readers_done.fetch_add(1, std::memory_order_relaxed);
      core.UnlockShared();
    });
  }
  WaitUntil([&] {
    for (auto& tid : tids) {
      const pid_t t = tid.load(std::memory_order_relaxed);
      if (t == 0 || !ThreadAsleep(t)) return false;
    }
    return true;
  });
  EXPECT_EQ(core.RawWord(),
            Core::kWriter | Core::kReadersParked | 2 * Core::kWaiterUnit);
  ++counter;
  core.Unlock();
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 3u);
  EXPECT_EQ(readers_done.load(), 2);
  EXPECT_EQ(core.RawWord(), 0u);
}

}  // namespace
}  // namespace cairn
