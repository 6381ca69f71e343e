// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// RwLockCore's slow paths: spinning, registering as a waiting writer,
// parking on the futex and waking. The protocol and why it loses no wakeup
// are in docs/concurrency.md, "RwLock".

#include "cairn/base/rw_lock.h"

#if !defined(__linux__)
#error "RwLock parks on a Linux futex"
#endif

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstdint>

CAIRN_NAMESPACE_BEGIN
namespace base_internal {
namespace {

// Spins before a thread sleeps: a critical section under an object lock is a
// few hundred nanoseconds, shorter than a futex round trip.
constexpr int kSpins = 64;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

std::uint32_t* Address(std::atomic<std::uint32_t>& word) {
  // std::atomic<std::uint32_t> is a lock-free 4-byte object (static_assert in
  // the header) whose representation is the value, which is what a futex
  // compares.
  return reinterpret_cast<std::uint32_t*>(&word);
}

// Sleeps while *word == expected (the kernel compares atomically with
// queueing the thread), until woken by a FutexWake whose bitset intersects
// `bitset`. Returns early on a changed word, a signal or a spurious wakeup:
// callers re-read the word and loop.
void FutexWait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
               std::uint32_t bitset) {
  syscall(SYS_futex, Address(word), FUTEX_WAIT_BITSET_PRIVATE, expected,
          nullptr, nullptr, bitset);
}

void FutexWake(std::atomic<std::uint32_t>& word, int count,
               std::uint32_t bitset) {
  syscall(SYS_futex, Address(word), FUTEX_WAKE_BITSET_PRIVATE, count, nullptr,
          nullptr, bitset);
}

}  // namespace

void RwLockCore::LockSlow() noexcept {
  bool registered = false;  // counted in the waiting-writer field
  int spins = 0;
  std::uint32_t s = word_.load(std::memory_order_relaxed);
  for (;;) {
    if ((s & (kWriter | kReaderMask)) == 0) {
      // Free: take it, and stop counting this thread as waiting.
      const std::uint32_t next = (s | kWriter) - (registered ? kWaiterUnit : 0);
      if (word_.compare_exchange_weak(s, next, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        return;
      }
      continue;
    }
    if (!registered) {
      if ((s & kWaiterMask) == kWaiterMask) {
        // 1023 writers already wait: retry unregistered, never asleep.
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
    if (s < kReaderMask) {
      if (word_.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        return;
      }
      continue;
    }
    if ((s & ~kReaderMask) == 0) {
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

void RwLockCore::UnlockSlow() noexcept {
  std::uint32_t s = word_.load(std::memory_order_relaxed);
  for (;;) {
    std::uint32_t next = s & ~kWriter;
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
