// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// MutexCore's slow paths (Mutex's word). The word is 0 (free), 1 (held) or 2
// (held, and a thread may be asleep on it). A thread that sleeps first stores
// 2, and FutexWait sleeps only while the word still reads 2, so an Unlock
// (which stores 0 and wakes one thread if it read 2) cannot slip between the
// store and the sleep unnoticed. A woken thread takes the lock by storing
// 2 again, conservatively: there may be other sleepers, and the next
// Unlock must wake one. docs/concurrency.md, "Mutex".

#include "cairn/base/mutex.h"

#include "cairn/base/internal/futex.h"

CAIRN_NAMESPACE_BEGIN
namespace base_internal {

void MutexCore::LockSlow() noexcept {
  for (int i = 0; i < kSpins; ++i) {
    std::uint32_t expected = kFree;
    if (word_.load(std::memory_order_relaxed) == kFree &&
        word_.compare_exchange_weak(expected, kHeld, std::memory_order_acquire,
                                    std::memory_order_relaxed)) {
      return;
    }
    CpuRelax();
  }
  // Acquire: the exchange that reads kFree takes the lock.
  while (word_.exchange(kSleepers, std::memory_order_acquire) != kFree) {
    FutexWait(word_, kSleepers);
  }
}

void MutexCore::Wake() noexcept { FutexWake(word_, 1); }

}  // namespace base_internal
CAIRN_NAMESPACE_END
