// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The Linux futex calls and the spin hint that Mutex (mutex.cc) and RwLock
// (rw_lock.cc) park with. Internal: no public header includes it.

#ifndef CAIRN_BASE_INTERNAL_FUTEX_H_
#define CAIRN_BASE_INTERNAL_FUTEX_H_

#if !defined(__linux__)
#error "cairn's locks park on a Linux futex"
#endif

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN
namespace base_internal {

// Spins before a thread sleeps: a critical section under a cairn lock is a
// few hundred nanoseconds, shorter than a futex round trip.
inline constexpr int kSpins = 64;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

inline std::uint32_t* FutexAddress(std::atomic<std::uint32_t>& word) {
  // std::atomic<std::uint32_t> is a lock-free 4-byte object whose
  // representation is the value, which is what a futex compares.
  static_assert(sizeof(std::atomic<std::uint32_t>) == 4);
  static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
  return reinterpret_cast<std::uint32_t*>(&word);
}

// Sleeps while *word == expected (the kernel compares atomically with
// queueing the thread), until woken by a FutexWake whose bitset intersects
// `bitset`. Returns early on a changed word, a signal or a spurious wakeup:
// callers re-read the word and loop.
inline void FutexWait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                      std::uint32_t bitset = FUTEX_BITSET_MATCH_ANY) {
  syscall(SYS_futex, FutexAddress(word), FUTEX_WAIT_BITSET_PRIVATE, expected,
          nullptr, nullptr, bitset);
}

inline void FutexWake(std::atomic<std::uint32_t>& word, int count,
                      std::uint32_t bitset = FUTEX_BITSET_MATCH_ANY) {
  syscall(SYS_futex, FutexAddress(word), FUTEX_WAKE_BITSET_PRIVATE, count,
          nullptr, nullptr, bitset);
}

}  // namespace base_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_BASE_INTERNAL_FUTEX_H_
