// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Annotated wrappers over std::mutex and std::shared_mutex, and the scoped
// guards (MutexLock, WriterLock, ReaderLock). The compact reader-writer lock
// the directory uses per object is RwLock, in rw_lock.h.
//
// Thread safety: these are the locks; every method is safe from any thread.
// They exist so clang's -Wthread-safety can check cairn's lock discipline, and
// because TSan sees std::mutex through pthread (absl::Mutex from Debian's
// prebuilt absl is not instrumented, so cairn never uses it).

#ifndef CAIRN_BASE_MUTEX_H_
#define CAIRN_BASE_MUTEX_H_

#include <mutex>
#include <shared_mutex>

#include "cairn/base/thread_annotations.h"
#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

class CAIRN_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() CAIRN_ACQUIRE() { mu_.lock(); }
  void Unlock() CAIRN_RELEASE() { mu_.unlock(); }
  [[nodiscard]] bool TryLock() CAIRN_TRY_ACQUIRE(true) {
    return mu_.try_lock();
  }
  // Documents (and tells the analysis) that the caller holds the lock.
  void AssertHeld() const CAIRN_ASSERT_CAPABILITY(this) {}

  // Standard spelling, so std::condition_variable_any and std::scoped_lock
  // work with it.
  void lock() CAIRN_ACQUIRE() { mu_.lock(); }
  void unlock() CAIRN_RELEASE() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

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
