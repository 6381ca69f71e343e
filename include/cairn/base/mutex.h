// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Mutex, cairn's exclusive lock; an annotated wrapper over
// std::shared_mutex; and the scoped guards (MutexLock, WriterLock,
// ReaderLock). The compact reader-writer lock the directory uses per
// object is RwLock, in rw_lock.h.
//
// Thread safety: these are the locks; every method is safe from any thread.
// They carry clang's -Wthread-safety annotations so the analysis can check
// cairn's lock discipline.
//
// Mutex is one 32-bit word parked on a Linux futex (0 free, 1 held, 2 held
// with sleepers possible; base_internal::MutexCore): an uncontended Lock and
// Unlock are one atomic instruction each, inline, where std::mutex calls into
// pthread (about 70 instructions per pair, measured with callgrind on the
// route's write path, where a publication takes two). Contended, Lock spins
// briefly and then sleeps; Unlock wakes one sleeper. Not recursive, no timed
// lock, not fair (a thread that just unlocked may take it again before a woken
// one). Under TSan it reports each acquisition and release with the
// __tsan_mutex_* hooks, as RwLock does, so TSan checks what it guards and
// its lock order; the word's own atomics are then ignored. (absl::Mutex
// from Debian's prebuilt absl is not instrumented, so cairn never uses it.)

#ifndef CAIRN_BASE_MUTEX_H_
#define CAIRN_BASE_MUTEX_H_

#include <atomic>
#include <cstdint>
#include <shared_mutex>

#include "cairn/base/thread_annotations.h"
#include "cairn/base/version.h"

#if defined(__SANITIZE_THREAD__)
#define CAIRN_MUTEX_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CAIRN_MUTEX_TSAN 1
#endif
#endif
#ifndef CAIRN_MUTEX_TSAN
#define CAIRN_MUTEX_TSAN 0
#endif

#if CAIRN_MUTEX_TSAN
#include <sanitizer/tsan_interface.h>
#endif

CAIRN_NAMESPACE_BEGIN

namespace base_internal {

// Mutex's word and protocol, without sanitizer hooks or annotations (the
// stress test runs TSan over it to check the acquire/release orderings).
class MutexCore {
 public:
  static constexpr std::uint32_t kFree = 0;
  static constexpr std::uint32_t kHeld = 1;
  static constexpr std::uint32_t kSleepers = 2;  // held; a thread may sleep

  constexpr MutexCore() noexcept = default;
  MutexCore(const MutexCore&) = delete;
  MutexCore& operator=(const MutexCore&) = delete;

  void Lock() noexcept {
    std::uint32_t expected = kFree;
    if (!word_.compare_exchange_strong(expected, kHeld,
                                       std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
      LockSlow();
    }
  }
  void Unlock() noexcept {
    if (word_.exchange(kFree, std::memory_order_release) == kSleepers) Wake();
  }
  bool TryLock() noexcept {
    std::uint32_t expected = kFree;
    return word_.compare_exchange_strong(
        expected, kHeld, std::memory_order_acquire, std::memory_order_relaxed);
  }
  // A snapshot of the word, for tests: it may change as soon as it is read.
  std::uint32_t RawWord() const noexcept {
    return word_.load(std::memory_order_relaxed);
  }

 private:
  // src/base/mutex.cc.
  void LockSlow() noexcept;
  void Wake() noexcept;

  std::atomic<std::uint32_t> word_{kFree};
};

}  // namespace base_internal

class CAIRN_CAPABILITY("mutex") Mutex {
 public:
#if CAIRN_MUTEX_TSAN
  Mutex() noexcept { __tsan_mutex_create(this, __tsan_mutex_not_static); }
  ~Mutex() { __tsan_mutex_destroy(this, __tsan_mutex_not_static); }
#else
  constexpr Mutex() noexcept = default;
  ~Mutex() = default;
#endif
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // May block: spins briefly, then sleeps until the holder unlocks.
  void Lock() CAIRN_ACQUIRE() {
    PreLock(0);
    core_.Lock();
    PostLock(0);
  }
  // Never blocks; wakes one sleeper if there may be one.
  void Unlock() CAIRN_RELEASE() {
    PreUnlock();
    core_.Unlock();
    PostUnlock();
  }
  // Never blocks; false if the lock is held.
  [[nodiscard]] bool TryLock() CAIRN_TRY_ACQUIRE(true) {
    PreLock(kTry);
    const bool ok = core_.TryLock();
    PostLock(ok ? kTry : kTry | kTryFailed);
    return ok;
  }
  // Documents (and tells the analysis) that the caller holds the lock.
  void AssertHeld() const CAIRN_ASSERT_CAPABILITY(this) {}

  // Standard spelling, so std::unique_lock and std::condition_variable_any
  // work with it. (There is no try_lock(): std::lock and a std::scoped_lock
  // of several mutexes do not.)
  void lock() CAIRN_ACQUIRE() { Lock(); }
  void unlock() CAIRN_RELEASE() { Unlock(); }

 private:
#if CAIRN_MUTEX_TSAN
  static constexpr unsigned kTry = __tsan_mutex_try_lock;
  static constexpr unsigned kTryFailed = __tsan_mutex_try_lock_failed;
  void PreLock(unsigned flags) { __tsan_mutex_pre_lock(this, flags); }
  void PostLock(unsigned flags) { __tsan_mutex_post_lock(this, flags, 0); }
  void PreUnlock() { __tsan_mutex_pre_unlock(this, 0); }
  void PostUnlock() { __tsan_mutex_post_unlock(this, 0); }
#else
  static constexpr unsigned kTry = 0;
  static constexpr unsigned kTryFailed = 0;
  static void PreLock(unsigned) {}
  static void PostLock(unsigned) {}
  static void PreUnlock() {}
  static void PostUnlock() {}
#endif

  base_internal::MutexCore core_;
};

static_assert(sizeof(Mutex) == 4);

class CAIRN_CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() CAIRN_ACQUIRE() { mu_.lock(); }
  void Unlock() CAIRN_RELEASE() { mu_.unlock(); }
  void LockShared() CAIRN_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() CAIRN_RELEASE_SHARED() { mu_.unlock_shared(); }
  [[nodiscard]] bool TryLock() CAIRN_TRY_ACQUIRE(true) {
    return mu_.try_lock();
  }
  [[nodiscard]] bool TryLockShared() CAIRN_TRY_ACQUIRE_SHARED(true) {
    return mu_.try_lock_shared();
  }

  // Document (and tell the analysis) that the caller holds the lock
  // exclusively, or at least shared.
  void AssertHeld() const CAIRN_ASSERT_CAPABILITY(this) {}
  void AssertReaderHeld() const CAIRN_ASSERT_SHARED_CAPABILITY(this) {}

 private:
  std::shared_mutex mu_;
};

class CAIRN_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) CAIRN_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() CAIRN_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Scoped exclusive and shared holds of a SharedMutex or an RwLock
// (cairn/base/rw_lock.h): `WriterLock lock(&mu);` deduces the lock type.
template <typename Lockable>
class CAIRN_SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(Lockable* mu) CAIRN_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterLock() CAIRN_RELEASE() { mu_->Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  Lockable* const mu_;
};

template <typename Lockable>
class CAIRN_SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(Lockable* mu) CAIRN_ACQUIRE_SHARED(mu) : mu_(mu) {
    mu_->LockShared();
  }
  ~ReaderLock() CAIRN_RELEASE() { mu_->UnlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  Lockable* const mu_;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_BASE_MUTEX_H_
