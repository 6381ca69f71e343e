// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// RwLock: a reader-writer lock in one 32-bit word, parked on a Linux futex.
// It is the directory's per-object lock (ObjectEntry), where
// std::shared_mutex cost 56 bytes per object.
//
// Thread safety: every method is safe from any thread. Lock/LockShared may
// block (spin briefly, then sleep in the kernel); Unlock/UnlockShared and
// the try forms never block. Nothing allocates. Not recursive: a thread
// that holds the lock in either mode must not take it again.
//
// Policy: writers are preferred. A writer that finds the lock held counts
// itself as waiting in the word, and from then on no new reader enters, so
// a continuous stream of readers cannot starve it (the readers already in
// drain, and the last one out wakes it). The price is that a continuous
// stream of writers can hold readers off. There is no timed lock and no
// upgrade: nothing in cairn uses either.
//
// The memory-ordering argument (acquire on every successful acquisition,
// release on every release, the futex protocol that loses no wakeup) is in
// docs/concurrency.md, "RwLock".
//
// Sanitizers: clang's -Wthread-safety sees RwLock as a capability, like
// SharedMutex. Under TSan, RwLock tells TSan about each acquisition and
// release with the __tsan_mutex_* hooks (shared ones with the read-lock
// flag), as abseil's Mutex does, so reports name the lock and TSan checks
// what the lock guards; TSan then ignores the lock's own atomics.
// base_internal::RwLockCore is the same lock without the hooks, for tests
// that let TSan check the lock's own orderings.

#ifndef CAIRN_BASE_RW_LOCK_H_
#define CAIRN_BASE_RW_LOCK_H_

#include <atomic>
#include <cstdint>

#include "cairn/base/mutex.h"
#include "cairn/base/thread_annotations.h"
#include "cairn/base/version.h"

#if defined(__SANITIZE_THREAD__)
#define CAIRN_RW_LOCK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CAIRN_RW_LOCK_TSAN 1
#endif
#endif
#ifndef CAIRN_RW_LOCK_TSAN
#define CAIRN_RW_LOCK_TSAN 0
#endif

#if CAIRN_RW_LOCK_TSAN
#include <sanitizer/tsan_interface.h>
#endif

CAIRN_NAMESPACE_BEGIN
namespace base_internal {

// The lock word and its protocol, without sanitizer hooks or annotations.
// Layout (docs/concurrency.md, "RwLock"):
//   bit 31      kWriter: a writer holds the lock
//   bit 30      kReadersParked: at least one reader sleeps on the futex
//   bits 20-29  writers waiting (registered, spinning or asleep)
//   bits 0-19   readers holding the lock
class RwLockCore {
 public:
  static constexpr std::uint32_t kWriter = 1u << 31;
  static constexpr std::uint32_t kReadersParked = 1u << 30;
  static constexpr std::uint32_t kWaiterUnit = 1u << 20;
  static constexpr std::uint32_t kWaiterMask = 0x3ffu << 20;
  static constexpr std::uint32_t kReaderMask = kWaiterUnit - 1;
  // Futex bitsets: readers and writers sleep on the same word but are woken
  // separately.
  static constexpr std::uint32_t kWakeReaders = 1;
  static constexpr std::uint32_t kWakeWriters = 2;

  constexpr RwLockCore() noexcept = default;
  RwLockCore(const RwLockCore&) = delete;
  RwLockCore& operator=(const RwLockCore&) = delete;

  void Lock() noexcept {
    std::uint32_t expected = 0;
    if (word_.compare_exchange_strong(expected, kWriter,
                                      std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      return;
    }
    LockSlow();
  }
  bool TryLock() noexcept {
    std::uint32_t s = word_.load(std::memory_order_relaxed);
    while ((s & (kWriter | kReaderMask)) == 0) {
      if (word_.compare_exchange_weak(s, s | kWriter, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }
  void Unlock() noexcept {
    std::uint32_t expected = kWriter;
    if (word_.compare_exchange_strong(expected, 0, std::memory_order_release,
                                      std::memory_order_relaxed)) {
      return;
    }
    UnlockSlow();
  }

  void LockShared() noexcept {
    std::uint32_t s = word_.load(std::memory_order_relaxed);
    // s < kReaderMask: no writer holds or waits, no reader is parked, and
    // the reader count has room.
    if (s < kReaderMask &&
        word_.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                    std::memory_order_relaxed)) {
      return;
    }
    LockSharedSlow();
  }
  bool TryLockShared() noexcept {
    std::uint32_t s = word_.load(std::memory_order_relaxed);
    while (s < kReaderMask) {
      if (word_.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }
  void UnlockShared() noexcept {
    const std::uint32_t prev = word_.fetch_sub(1, std::memory_order_release);
    // The last reader out wakes one waiting writer. (Readers never sleep
    // while only readers hold the lock, so none needs waking here.)
    if ((prev & kReaderMask) == 1 && (prev & kWaiterMask) != 0) {
      WakeWriter();
    }
  }

  // A snapshot of the word, for tests: it may change as soon as it is read.
  std::uint32_t RawWord() const noexcept {
    return word_.load(std::memory_order_relaxed);
  }

 private:
  void LockSlow() noexcept;
  void LockSharedSlow() noexcept;
  void UnlockSlow() noexcept;
  void WakeWriter() noexcept;

  std::atomic<std::uint32_t> word_{0};
};

static_assert(sizeof(RwLockCore) == 4);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

}  // namespace base_internal

class CAIRN_CAPABILITY("mutex") RwLock {
 public:
#if CAIRN_RW_LOCK_TSAN
  RwLock() noexcept { __tsan_mutex_create(this, __tsan_mutex_not_static); }
  ~RwLock() { __tsan_mutex_destroy(this, __tsan_mutex_not_static); }
#else
  RwLock() noexcept = default;
  ~RwLock() = default;
#endif
  RwLock(const RwLock&) = delete;
  RwLock& operator=(const RwLock&) = delete;

  // Exclusive. May block.
  void Lock() CAIRN_ACQUIRE() {
    PreLock(0);
    core_.Lock();
    PostLock(0);
  }
  // Never blocks; false if a writer or any reader holds the lock.
  [[nodiscard]] bool TryLock() CAIRN_TRY_ACQUIRE(true) {
    PreLock(kTry);
    const bool ok = core_.TryLock();
    PostLock(ok ? kTry : kTry | kTryFailed);
    return ok;
  }
  // Never blocks; may wake one waiting thread.
  void Unlock() CAIRN_RELEASE() {
    PreUnlock(0);
    core_.Unlock();
    PostUnlock(0);
  }

  // Shared. May block, including while other readers hold the lock if a
  // writer is waiting (writers are preferred).
  void LockShared() CAIRN_ACQUIRE_SHARED() {
    PreLock(kRead);
    core_.LockShared();
    PostLock(kRead);
  }
  // Never blocks; false if a writer holds the lock or is waiting for it.
  [[nodiscard]] bool TryLockShared() CAIRN_TRY_ACQUIRE_SHARED(true) {
    PreLock(kRead | kTry);
    const bool ok = core_.TryLockShared();
    PostLock(ok ? kRead | kTry : kRead | kTry | kTryFailed);
    return ok;
  }
  void UnlockShared() CAIRN_RELEASE_SHARED() {
    PreUnlock(kRead);
    core_.UnlockShared();
    PostUnlock(kRead);
  }

  // Document (and tell the analysis) that the caller holds the lock
  // exclusively, or at least shared.
  void AssertHeld() const CAIRN_ASSERT_CAPABILITY(this) {}
  void AssertReaderHeld() const CAIRN_ASSERT_SHARED_CAPABILITY(this) {}

 private:
#if CAIRN_RW_LOCK_TSAN
  static constexpr unsigned kRead = __tsan_mutex_read_lock;
  static constexpr unsigned kTry = __tsan_mutex_try_lock;
  static constexpr unsigned kTryFailed = __tsan_mutex_try_lock_failed;
  void PreLock(unsigned flags) { __tsan_mutex_pre_lock(this, flags); }
  void PostLock(unsigned flags) { __tsan_mutex_post_lock(this, flags, 0); }
  void PreUnlock(unsigned flags) { __tsan_mutex_pre_unlock(this, flags); }
  void PostUnlock(unsigned flags) { __tsan_mutex_post_unlock(this, flags); }
#else
  static constexpr unsigned kRead = 0;
  static constexpr unsigned kTry = 0;
  static constexpr unsigned kTryFailed = 0;
  static void PreLock(unsigned) {}
  static void PostLock(unsigned) {}
  static void PreUnlock(unsigned) {}
  static void PostUnlock(unsigned) {}
#endif

  base_internal::RwLockCore core_;
};

static_assert(sizeof(RwLock) == 4);

CAIRN_NAMESPACE_END

#endif  // CAIRN_BASE_RW_LOCK_H_
