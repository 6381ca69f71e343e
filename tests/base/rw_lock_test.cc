// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Deterministic tests of RwLock's protocol: each scenario waits for a named
// state (a count in the word, a thread asleep in the futex) before it moves
// on, never for a time. The protocol tests drive base_internal::RwLockCore,
// which RwLock wraps, because they read its word. The reader-bias tests
// replace the bias clock with a value they set, so the back-off is exact.

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

// --- Reader bias ---------------------------------------------------------

// Replaces the bias clock for one test. Each test starts later than any
// back-off an earlier one (or the real clock) can have stored, because two
// tests' locks may share a back-off bucket (they live at reused stack
// addresses).
class RwLockBiasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::uint64_t next = std::uint64_t{1} << 60;
    next += std::uint64_t{1} << 40;
    now_ = next;
    SetClock(now_);
  }
  void TearDown() override {
    base_internal::g_bias_clock_for_testing.store(0, std::memory_order_relaxed);
  }
  static void SetClock(std::uint64_t t) {
    base_internal::g_bias_clock_for_testing.store(t, std::memory_order_relaxed);
  }
  // Token reads through the word until one sets the bias (one in
  // kBiasSample may; the clock is past any back-off), each released at once.
  static void Bias(Core& core) {
    for (std::uint32_t i = 0; i < base_internal::kBiasSample; ++i) {
      ReaderToken token;
      core.LockShared(&token);
      ASSERT_FALSE(token.biased());
      const bool set = (core.RawWord() & Core::kReaderBias) != 0;
      core.UnlockShared(token);
      if (set) break;
    }
    ASSERT_EQ(core.RawWord(), Core::kReaderBias);
  }
  std::uint64_t now_ = 0;
};

// Once biased, token readers hold the lock in table slots (one per thread)
// and leave the word alone; a plain reader still counts in the word.
TEST_F(RwLockBiasTest, BiasedReadersHoldSlotsNotTheWord) {
  Core core;
  // Unbiased, token reads count in the word until one sets the bias.
  std::uint32_t reads = 0;
  for (std::uint32_t w = 0; (w & Core::kReaderBias) == 0; ++reads) {
    ASSERT_LT(reads, base_internal::kBiasSample);
    ReaderToken token;
    core.LockShared(&token);
    EXPECT_FALSE(token.biased());
    w = core.RawWord();
    EXPECT_EQ(w & Core::kReaderMask, 1u);
    core.UnlockShared(token);
  }
  EXPECT_EQ(core.RawWord(), Core::kReaderBias);

  ReaderToken mine;
  core.LockShared(&mine);
  EXPECT_TRUE(mine.biased());
  EXPECT_EQ(core.RawWord(), Core::kReaderBias);
  EXPECT_EQ(core.SlotForTesting().lock.load(), &core);
  ReaderToken theirs;
  bool theirs_biased = false;
  std::thread([&] {
    ASSERT_TRUE(core.TryLockShared(&theirs));
    theirs_biased = theirs.biased();
  }).join();
  EXPECT_TRUE(theirs_biased);
  EXPECT_EQ(core.RawWord(), Core::kReaderBias);
  core.LockShared();
  EXPECT_EQ(core.RawWord(), Core::kReaderBias | 1);
  core.UnlockShared();
  // Biased readers hold it: the try fails and gives the word back biased,
  // since slots still name the lock (a word of 0 would let the next
  // writer in without a scan).
  EXPECT_FALSE(core.TryLock());
  EXPECT_EQ(core.RawWord(), Core::kReaderBias);
  core.UnlockShared(theirs);
  core.UnlockShared(mine);
  EXPECT_EQ(core.SlotForTesting().lock.load(), nullptr);
  EXPECT_TRUE(core.TryLock());
  core.Unlock();
}

// A writer clears the bias as it takes the word, then waits until the
// biased reader leaves its slot; readers arriving meanwhile go to the word
// and wait behind the writer.
TEST_F(RwLockBiasTest, WriterRevokesAndWaitsForBiasedReaders) {
  LockWatchdog dog(kBound, "WriterRevokesAndWaitsForBiasedReaders");
  Core core;
  Bias(core);
  ReaderToken token;
  core.LockShared(&token);
  ASSERT_TRUE(token.biased());
  std::atomic<bool> writer_in{false};
  std::thread writer([&] {
    core.Lock();
    writer_in.store(true, std::memory_order_relaxed);
    core.Unlock();
  });
  // The writer has taken the word and cleared the bias (or, if it did not
  // wait for the slot, already been through).
  WaitUntil([&] {
    return core.RawWord() == Core::kWriter ||
           writer_in.load(std::memory_order_relaxed);
  });
  EXPECT_FALSE(writer_in.load(std::memory_order_relaxed));
  ReaderToken late;
  EXPECT_FALSE(core.TryLockShared(&late));
  EXPECT_FALSE(core.TryEnterBiased(&late));
  // Time for a writer that does not wait for the slot to show; a correct
  // one waits.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(writer_in.load(std::memory_order_relaxed));
  core.UnlockShared(token);
  writer.join();
  EXPECT_TRUE(writer_in.load());
  EXPECT_EQ(core.RawWord(), 0u);  // the bias stays off
  EXPECT_GT(core.BiasResumeAtForTesting(), now_);
}

// After a revocation, a token read sets the bias again only once the clock
// reaches the back-off; before that it counts in the word.
TEST_F(RwLockBiasTest, BiasResumesOnlyAfterTheBackoff) {
  Core core;
  Bias(core);
  core.Lock();  // no reader: the revocation costs 0 ticks on the test clock
  core.Unlock();
  const std::uint64_t resume = core.BiasResumeAtForTesting();
  EXPECT_EQ(resume, now_ + Core::kMinBiasBackoff);
  for (const std::uint64_t t : {now_, resume - 1}) {
    SetClock(t);
    // More reads than the sample: any of them would have set the bias.
    for (std::uint32_t i = 0; i < 2 * base_internal::kBiasSample; ++i) {
      ReaderToken token;
      core.LockShared(&token);
      EXPECT_FALSE(token.biased());
      EXPECT_EQ(core.RawWord(), 1u);
      core.UnlockShared(token);
      EXPECT_EQ(core.RawWord(), 0u);
    }
  }
  SetClock(resume);
  Bias(core);
  ReaderToken token;
  core.LockShared(&token);
  EXPECT_TRUE(token.biased());
  core.UnlockShared(token);
}

// The back-off is kBiasBackoff times what the revocation took: here the
// writer waited D ticks for a biased reader.
TEST_F(RwLockBiasTest, BackoffIsProportionalToTheRevocationCost) {
  LockWatchdog dog(kBound, "BackoffIsProportionalToTheRevocationCost");
  Core core;
  Bias(core);
  ReaderToken token;
  core.LockShared(&token);
  ASSERT_TRUE(token.biased());
  std::thread writer([&] {
    core.Lock();
    core.Unlock();
  });
  // The writer read the clock before it took the word.
  WaitUntil([&] { return core.RawWord() == Core::kWriter; });
  constexpr std::uint64_t kCost = 1000000;
  SetClock(now_ + kCost);
  core.UnlockShared(token);
  writer.join();
  EXPECT_EQ(core.BiasResumeAtForTesting(),
            now_ + kCost + kCost * Core::kBiasBackoff);
}

// A reader whose slot is taken (by another lock's reader, here a planted
// address) counts in the word instead; the writer then waits for it there.
TEST_F(RwLockBiasTest, SlotCollisionFallsBackToTheWord) {
  Core core;
  Bias(core);
  base_internal::ReaderSlot& slot = core.SlotForTesting();
  int other_lock = 0;
  slot.lock.store(&other_lock);
  ReaderToken token;
  core.LockShared(&token);
  EXPECT_FALSE(token.biased());
  EXPECT_EQ(core.RawWord(), Core::kReaderBias | 1);
  EXPECT_FALSE(core.TryLock());
  EXPECT_EQ(core.RawWord(), Core::kReaderBias | 1);  // no revocation
  core.UnlockShared(token);
  EXPECT_EQ(core.RawWord(), Core::kReaderBias);
  EXPECT_EQ(slot.lock.load(), &other_lock);  // left alone
  slot.lock.store(nullptr);
  core.Lock();  // no slot names this lock: no wait
  core.Unlock();
}

// Writer preference holds on the biased path: once a writer waits, a token
// reader neither enters through a slot nor through the word.
TEST_F(RwLockBiasTest, WaitingWriterStopsBiasedReaders) {
  LockWatchdog dog(kBound, "WaitingWriterStopsBiasedReaders");
  Core core;
  Bias(core);
  core.LockShared();  // a plain reader, in the word
  std::thread writer([&] {
    core.Lock();
    core.Unlock();
  });
  WaitUntil([&] { return Waiters(core) == 1; });
  EXPECT_NE(core.RawWord() & Core::kReaderBias, 0u);
  ReaderToken token;
  EXPECT_FALSE(core.TryEnterBiased(&token));
  EXPECT_FALSE(core.TryLockShared(&token));
  EXPECT_EQ(core.SlotForTesting().lock.load(), nullptr);
  core.UnlockShared();
  writer.join();
  EXPECT_EQ(core.RawWord(), 0u);
}

// The biased entry re-checks the bias after claiming its slot: a reader
// that saw the bias before a writer revoked it (the entry called while the
// writer holds) must back out and leave its slot empty.
TEST_F(RwLockBiasTest, BiasedEntryBacksOutAfterRevocation) {
  Core core;
  Bias(core);
  core.Lock();
  ReaderToken token;
  EXPECT_FALSE(core.TryEnterBiased(&token));
  EXPECT_FALSE(token.biased());
  EXPECT_EQ(core.SlotForTesting().lock.load(), nullptr);
  core.Unlock();
}

// The token records the slot: a hold taken on one thread and released on
// another frees the slot the acquisition claimed.
TEST_F(RwLockBiasTest, TokenReleasedOnAnotherThread) {
  Core core;
  Bias(core);
  ReaderToken token;
  base_internal::ReaderSlot* acquired_slot = nullptr;
  // Acquire on a thread whose slot for this lock is not this thread's (two
  // threads share a region when their reader indexes agree modulo
  // kReaderRegions).
  for (int i = 0; i < static_cast<int>(base_internal::kReaderRegions); ++i) {
    std::thread([&] {
      core.LockShared(&token);
      acquired_slot = &core.SlotForTesting();
    }).join();
    if (acquired_slot != &core.SlotForTesting()) break;
    core.UnlockShared(token);
  }
  ASSERT_TRUE(token.biased());
  ASSERT_NE(acquired_slot, &core.SlotForTesting());
  EXPECT_EQ(acquired_slot->lock.load(), &core);
  std::thread([&] { core.UnlockShared(token); }).join();
  EXPECT_EQ(acquired_slot->lock.load(), nullptr);
  EXPECT_TRUE(core.TryLock());
  core.Unlock();
}

// The ReaderLock guard over an RwLock takes the biased path and releases
// its own slot.
TEST_F(RwLockBiasTest, ReaderLockGuardUsesTheBias) {
  RwLock mu;
  Core& core = reinterpret_cast<Core&>(mu);  // the RwLock's only member
  for (std::uint32_t i = 0; i < base_internal::kBiasSample; ++i) {
    ReaderLock reader(&mu);  // through the word until one sets the bias
  }
  ASSERT_EQ(core.RawWord(), Core::kReaderBias);
  base_internal::ReaderSlot& slot = core.SlotForTesting();
  {
    ReaderLock reader(&mu);
    EXPECT_EQ(slot.lock.load(), static_cast<const void*>(&mu));
    EXPECT_FALSE(CanLock(mu));
  }
  EXPECT_EQ(slot.lock.load(), nullptr);
  EXPECT_TRUE(CanLock(mu));
}

}  // namespace
}  // namespace cairn
