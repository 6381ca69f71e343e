// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// RwLockCore's slow paths: spinning, registering as a waiting writer,
// parking on the futex and waking, revoking the reader bias; and the
// visible-readers table. The protocol, why it loses no wakeup and why a
// biased reader and a revoking writer exclude each other are in
// docs/concurrency.md, "RwLock".

#include "cairn/base/rw_lock.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <thread>

#include "cairn/base/internal/futex.h"

CAIRN_NAMESPACE_BEGIN
namespace base_internal {

// Each region starts a cache line (kRegionSlots * 8 bytes is a multiple of
// 64), so two threads of different regions share no line.
alignas(64) ReaderSlot g_reader_slots[kReaderSlots];
alignas(64) std::atomic<std::uint64_t> g_bias_resume_at[kBiasBuckets];
std::atomic<std::uint64_t> g_bias_clock_for_testing{0};

std::uint32_t AssignReaderIndex() noexcept {
  static std::atomic<std::uint32_t> next{0};
  std::uint32_t index = next.fetch_add(1, std::memory_order_relaxed) + 1;
  if (index == 0) index = 1;  // wrapped: threads share offsets, which is safe
  t_reader_index = index;
  return index;
}

std::uint64_t BiasClockSlow() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

namespace {

// Waits until `slot` no longer names `lock`: the biased reader's section
// is usually short, but it may be preempted (or run a callback), so spin,
// then yield, then sleep in growing steps.
void WaitWhileSlotNames(ReaderSlot& slot, const void* lock) {
  std::chrono::nanoseconds sleep{1000};
  for (int i = 0; slot.lock.load(std::memory_order_seq_cst) == lock; ++i) {
    if (i < kSpins) {
      CpuRelax();
    } else if (i < 2 * kSpins) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, std::chrono::nanoseconds{1000000});
    }
  }
}

}  // namespace

bool RwLockCore::RevokeBias(std::uint64_t start, bool wait) noexcept {
  const std::size_t in_region = RegionSlot(this);
  for (std::size_t r = 0; r < kReaderRegions; ++r) {
    ReaderSlot& slot = g_reader_slots[r * kRegionSlots + in_region];
    // seq_cst: the load half of the writer's store-load pair (the store is
    // the seq_cst RMW that cleared the bias); acquire against the reader's
    // releasing clear of its slot.
    if (slot.lock.load(std::memory_order_seq_cst) != this) continue;
    if (!wait) return false;
    WaitWhileSlotNames(slot, this);
  }
  const std::uint64_t end = BiasClock();
  const std::uint64_t cost = end > start ? end - start : 0;
  g_bias_resume_at[BiasBucket(this)].store(
      end + std::max(cost * kBiasBackoff, kMinBiasBackoff),
      std::memory_order_relaxed);
  return true;
}

bool RwLockCore::TryLock() noexcept {
  std::uint32_t s = word_.load(std::memory_order_relaxed);
  while ((s & (kWriter | kReaderMask)) == 0) {
    const bool biased = (s & kReaderBias) != 0;
    const std::uint64_t start = biased ? BiasClock() : 0;
    if (word_.compare_exchange_weak(
            s, (s | kWriter) & ~kReaderBias,
            biased ? std::memory_order_seq_cst : std::memory_order_acquire,
            std::memory_order_relaxed)) {
      if (!biased || RevokeBias(start, /*wait=*/false)) return true;
      // A biased reader holds it: give the lock back with the bias set
      // again, since a slot still names the lock.
      ReleaseRestoringBias();
      return false;
    }
  }
  return false;
}

void RwLockCore::LockSlow() noexcept {
  bool registered = false;  // counted in the waiting-writer field
  int spins = 0;
  std::uint32_t s = word_.load(std::memory_order_relaxed);
  for (;;) {
    if ((s & (kWriter | kReaderMask)) == 0) {
      // Free: take it, stop counting this thread as waiting, and clear the
      // bias; then wait for the biased readers (seq_cst: the store half of
      // the store-load pair with them).
      const bool biased = (s & kReaderBias) != 0;
      const std::uint64_t start = biased ? BiasClock() : 0;
      const std::uint32_t next =
          ((s | kWriter) & ~kReaderBias) - (registered ? kWaiterUnit : 0);
      if (word_.compare_exchange_weak(
              s, next,
              biased ? std::memory_order_seq_cst : std::memory_order_acquire,
              std::memory_order_relaxed)) {
        if (biased) RevokeBias(start, /*wait=*/true);
        return;
      }
      continue;
    }
    if (!registered) {
      if ((s & kWaiterMask) == kWaiterMask) {
        // 511 writers already wait: retry unregistered, never asleep.
        sched_yield();
        s = word_.load(std::memory_order_relaxed);
        continue;
      }
      // From here on no new reader enters (writer preference).
      if (word_.compare_exchange_weak(s, s + kWaiterUnit,
                                      std::memory_order_relaxed,
                                      std::memory_order_relaxed)) {
        registered = true;
        s += kWaiterUnit;
      }
      continue;
    }
    if (spins < kSpins) {
      ++spins;
      CpuRelax();
      s = word_.load(std::memory_order_relaxed);
      continue;
    }
    // Held and this thread is counted: every release that sees the count
    // wakes one writer, and the kernel returns at once if the word is no
    // longer `s`.
    FutexWait(word_, s, kWakeWriters);
    s = word_.load(std::memory_order_relaxed);
  }
}

void RwLockCore::LockSharedSlow() noexcept {
  int spins = 0;
  std::uint32_t s = word_.load(std::memory_order_relaxed);
  for (;;) {
    if (ReaderMayEnter(s)) {
      if (word_.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        return;
      }
      continue;
    }
    if ((s & ~(kReaderMask | kReaderBias)) == 0) {
      // 2^20 - 1 readers hold it: wait for one to leave, never asleep.
      sched_yield();
      s = word_.load(std::memory_order_relaxed);
      continue;
    }
    // A writer holds the lock or waits for it.
    if (spins < kSpins) {
      ++spins;
      CpuRelax();
      s = word_.load(std::memory_order_relaxed);
      continue;
    }
    if ((s & kReadersParked) == 0) {
      if (!word_.compare_exchange_weak(s, s | kReadersParked,
                                       std::memory_order_relaxed,
                                       std::memory_order_relaxed)) {
        continue;
      }
      s |= kReadersParked;
    }
    // The flag is set in `s`: the writer release that clears it wakes every
    // parked reader, and the kernel returns at once if the word moved.
    FutexWait(word_, s, kWakeReaders);
    s = word_.load(std::memory_order_relaxed);
  }
}

void RwLockCore::UnlockSlow() noexcept { Release(0); }

void RwLockCore::ReleaseRestoringBias() noexcept { Release(kReaderBias); }

void RwLockCore::Release(std::uint32_t set) noexcept {
  std::uint32_t s = word_.load(std::memory_order_relaxed);
  for (;;) {
    std::uint32_t next = (s & ~kWriter) | set;
    const bool writers_wait = (s & kWaiterMask) != 0;
    const bool wake_readers = !writers_wait && (s & kReadersParked) != 0;
    if (wake_readers) next &= ~kReadersParked;
    if (word_.compare_exchange_weak(s, next, std::memory_order_release,
                                    std::memory_order_relaxed)) {
      if (writers_wait) {
        FutexWake(word_, 1, kWakeWriters);
      } else if (wake_readers) {
        FutexWake(word_, INT_MAX, kWakeReaders);
      }
      return;
    }
  }
}

void RwLockCore::WakeWriter() noexcept { FutexWake(word_, 1, kWakeWriters); }

}  // namespace base_internal
CAIRN_NAMESPACE_END
