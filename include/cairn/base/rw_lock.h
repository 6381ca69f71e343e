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
// Reader bias. A shared acquisition that passes a ReaderToken
// (LockShared(&token), TryLockShared(&token), and the ReaderLock guard) may
// leave the word alone: while the word's kReaderBias bit is set, the reader
// claims a slot of a process-wide table of visible readers (in its thread's
// region, at the lock's hash), re-checks the bit, and records the slot in
// its token; its release clears that slot. So readers of a hot object on
// different cores write their own lines instead of bouncing the object's.
// A writer clears the bit with its acquisition and waits until no region's
// slot for the lock names it (revocation); the bit is set again by a later
// shared acquisition through the word (one in kBiasSample of them), but
// only once a back-off proportional to what the revocation cost has passed,
// so a lock that is written often stays on the plain word. The token holds
// the slot, so a token may be released from another thread than the one
// that acquired. The token-less LockShared/TryLockShared/UnlockShared
// always count in the word. The table is shared: the lock is still one
// word.
//
// The memory-ordering argument (acquire on every successful acquisition,
// release on every release, the futex protocol that loses no wakeup, the
// store-load pairing of a biased reader with a revoking writer) is in
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
#include <cstddef>
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

class RwLockCore;

// The visible-readers table (src/base/rw_lock.cc). A slot holds the address
// of the lock a biased reader holds, or null. The table is kReaderRegions
// regions of kRegionSlots slots; a thread claims slots only in the region
// of its reader index (modulo kReaderRegions), so with up to kReaderRegions
// threads each writes only its own lines, and a lock's slot in each region
// is the one at the lock's hash: a revoking writer scans kReaderRegions
// slots, one per region.
inline constexpr std::size_t kReaderRegions = 8;
inline constexpr std::size_t kRegionSlots = 128;  // 1 KiB, 16 lines
inline constexpr std::size_t kReaderSlots = kReaderRegions * kRegionSlots;
// Back-off buckets (locks hashed).
inline constexpr std::size_t kBiasBuckets = 1024;

struct ReaderSlot {
  std::atomic<const void*> lock{nullptr};
};
extern ReaderSlot g_reader_slots[kReaderSlots];

// Per bucket: the clock value (BiasClock) before which a shared acquisition
// does not set the bias again after a revocation. Locks that share a bucket
// share the back-off, which only delays their bias.
extern std::atomic<std::uint64_t> g_bias_resume_at[kBiasBuckets];

// A nonzero value replaces the clock, for deterministic tests.
extern std::atomic<std::uint64_t> g_bias_clock_for_testing;

// The thread's reader index, 1-based, assigned on first use; and a count of
// its unbiased token reads (one in kBiasSample may set the bias).
inline constinit thread_local std::uint32_t t_reader_index = 0;
inline constinit thread_local std::uint32_t t_bias_tick = 0;
std::uint32_t AssignReaderIndex() noexcept;

inline std::uint64_t LockHash(const void* lock) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(lock);
  return static_cast<std::uint64_t>(a >> 2) * 0x9e3779b97f4a7c15ULL;
}
// The lock's slot index within a region, and its back-off bucket.
inline std::size_t RegionSlot(const void* lock) noexcept {
  return static_cast<std::size_t>(LockHash(lock) >> 57);  // 7 bits
}
inline std::size_t BiasBucket(const void* lock) noexcept {
  return static_cast<std::size_t>(LockHash(lock) >> 54);  // 10 bits
}
static_assert(kRegionSlots == std::size_t{1} << 7);
static_assert(kBiasBuckets == std::size_t{1} << 10);

inline ReaderSlot& ReaderSlotFor(const void* lock) noexcept {
  std::uint32_t index = t_reader_index;
  if (index == 0) index = AssignReaderIndex();
  return g_reader_slots[(index % kReaderRegions) * kRegionSlots +
                        RegionSlot(lock)];
}

// Ticks (the TSC on x86, nanoseconds elsewhere); only differences and
// comparisons matter.
std::uint64_t BiasClockSlow() noexcept;
inline std::uint64_t BiasClock() noexcept {
  const std::uint64_t fake =
      g_bias_clock_for_testing.load(std::memory_order_relaxed);
  if (fake != 0) return fake;
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();
#else
  return BiasClockSlow();
#endif
}

// True if this shared acquisition of `lock` through the word may set the
// bias: one in kBiasSample of the thread's unbiased token reads (so a lock
// read once between writes is rarely biased, and the clock is read
// rarely), once the lock's back-off has passed.
inline constexpr std::uint32_t kBiasSample = 8;
inline bool BiasMayResume(const void* lock) noexcept {
  if ((++t_bias_tick & (kBiasSample - 1)) != 0) return false;
  const std::uint64_t at =
      g_bias_resume_at[BiasBucket(lock)].load(std::memory_order_relaxed);
  return at == 0 || BiasClock() >= at;
}

}  // namespace base_internal

// Where a shared hold was recorded: a reader-table slot, or the lock word.
// Filled by LockShared(&token) / TryLockShared(&token), passed back to
// UnlockShared(token). Copyable; one token per hold.
class ReaderToken {
 public:
  constexpr ReaderToken() noexcept = default;
  // For tests: whether the hold is a biased one (in a table slot).
  bool biased() const noexcept { return slot_ != nullptr; }

 private:
  friend class base_internal::RwLockCore;
  base_internal::ReaderSlot* slot_ = nullptr;
};

namespace base_internal {

// The lock word and its protocol, without sanitizer hooks or annotations.
// Layout (docs/concurrency.md, "RwLock"):
//   bit 31      kWriter: a writer holds the lock
//   bit 30      kReadersParked: at least one reader sleeps on the futex
//   bit 29      kReaderBias: token readers may use the table
//   bits 20-28  writers waiting (registered, spinning or asleep)
//   bits 0-19   readers holding the lock through the word
class RwLockCore {
 public:
  static constexpr std::uint32_t kWriter = 1u << 31;
  static constexpr std::uint32_t kReadersParked = 1u << 30;
  static constexpr std::uint32_t kReaderBias = 1u << 29;
  static constexpr std::uint32_t kWaiterUnit = 1u << 20;
  static constexpr std::uint32_t kWaiterMask = 0x1ffu << 20;
  static constexpr std::uint32_t kReaderMask = kWaiterUnit - 1;
  // Futex bitsets: readers and writers sleep on the same word but are woken
  // separately.
  static constexpr std::uint32_t kWakeReaders = 1;
  static constexpr std::uint32_t kWakeWriters = 2;
  // A revocation that took c ticks keeps the bias off for
  // max(c * kBiasBackoff, kMinBiasBackoff) ticks.
  static constexpr std::uint64_t kBiasBackoff = 16;
  static constexpr std::uint64_t kMinBiasBackoff = 4096;

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
  // Never blocks: on a biased lock it revokes the bias and, if a biased
  // reader still holds, gives the lock back and fails.
  bool TryLock() noexcept;
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
    if (ReaderMayEnter(s) &&
        word_.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                    std::memory_order_relaxed)) {
      return;
    }
    LockSharedSlow();
  }
  bool TryLockShared() noexcept {
    std::uint32_t s = word_.load(std::memory_order_relaxed);
    while (ReaderMayEnter(s)) {
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

  // Shared, biased when the lock is: the hold is recorded in `token`.
  void LockShared(ReaderToken* token) noexcept {
    std::uint32_t s = word_.load(std::memory_order_relaxed);
    if ((s & kReaderBias) != 0 && TryEnterBiased(token)) return;
    token->slot_ = nullptr;
    s = word_.load(std::memory_order_relaxed);
    if (s < kReaderMask) {
      // Unbiased and free for readers: count in the word, and set the bias
      // if its back-off has passed.
      const std::uint32_t next =
          BiasMayResume(this) ? (s + 1) | kReaderBias : s + 1;
      if (word_.compare_exchange_weak(s, next, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        return;
      }
    }
    LockSharedSlow();
  }
  bool TryLockShared(ReaderToken* token) noexcept {
    const std::uint32_t s = word_.load(std::memory_order_relaxed);
    if ((s & kReaderBias) != 0 && TryEnterBiased(token)) return true;
    token->slot_ = nullptr;
    return TryLockShared();
  }
  void UnlockShared(const ReaderToken& token) noexcept {
    if (token.slot_ != nullptr) {
      // Pairs with the revoking writer's seq_cst scan (acquire).
      token.slot_->lock.store(nullptr, std::memory_order_release);
      return;
    }
    UnlockShared();
  }

  // The biased entry on its own: claim this thread's slot for the lock,
  // then re-check the bias. True (the slot recorded in `token`) if the lock
  // was still biased with no writer waiting; false, with nothing held, if
  // the slot is taken or the bias is gone. Public for the tests.
  bool TryEnterBiased(ReaderToken* token) noexcept {
    ReaderSlot& slot = ReaderSlotFor(this);
    const void* expected = nullptr;
    // seq_cst publication, then a seq_cst load of the word: the store-load
    // pair against the writer's seq_cst bias clear and slot scan.
    if (!slot.lock.compare_exchange_strong(expected, this,
                                           std::memory_order_seq_cst,
                                           std::memory_order_relaxed)) {
      return false;
    }
    if ((word_.load(std::memory_order_seq_cst) & (kReaderBias | kWaiterMask)) ==
        kReaderBias) {
      token->slot_ = &slot;
      return true;
    }
    slot.lock.store(nullptr, std::memory_order_release);
    return false;
  }

  // A snapshot of the word, for tests: it may change as soon as it is read.
  std::uint32_t RawWord() const noexcept {
    return word_.load(std::memory_order_relaxed);
  }
  // For tests: the slot this thread's biased hold of this lock would use,
  // and the clock value from which the bias may be set again.
  ReaderSlot& SlotForTesting() noexcept { return ReaderSlotFor(this); }
  std::uint64_t BiasResumeAtForTesting() const noexcept {
    return g_bias_resume_at[BiasBucket(this)].load(std::memory_order_relaxed);
  }

 private:
  // No writer holds or waits, no reader is parked, and the count has room
  // (the bias bit does not matter).
  static bool ReaderMayEnter(std::uint32_t s) noexcept {
    return (s & ~kReaderBias) < kReaderMask;
  }

  void LockSlow() noexcept;
  void LockSharedSlow() noexcept;
  void UnlockSlow() noexcept;
  void WakeWriter() noexcept;
  // With the writer bit held and the bias just cleared: waits until no
  // region's slot for this lock names it (if `wait`), and starts the
  // back-off measured from `start`. If not `wait`, returns false at once
  // (no back-off) when a slot names the lock.
  bool RevokeBias(std::uint64_t start, bool wait) noexcept;
  // A writer's release that also ORs `set` into the word, waking as Unlock
  // does. TryLock's give-back after a failed revocation sets the bias
  // again: a slot naming the lock must always be covered by the bias bit
  // or by a writer that waits for it.
  void Release(std::uint32_t set) noexcept;
  void ReleaseRestoringBias() noexcept;

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

  // Exclusive. May block (also while biased readers leave).
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
  // writer is waiting (writers are preferred). Counts in the word.
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

  // Shared, through the reader table while the lock is biased; the same
  // blocking and writer preference as above. Release with
  // UnlockShared(token), from any thread.
  void LockShared(ReaderToken* token) CAIRN_ACQUIRE_SHARED() {
    PreLock(kRead);
    core_.LockShared(token);
    PostLock(kRead);
  }
  [[nodiscard]] bool TryLockShared(ReaderToken* token)
      CAIRN_TRY_ACQUIRE_SHARED(true) {
    PreLock(kRead | kTry);
    const bool ok = core_.TryLockShared(token);
    PostLock(ok ? kRead | kTry : kRead | kTry | kTryFailed);
    return ok;
  }
  void UnlockShared(const ReaderToken& token) CAIRN_RELEASE_SHARED() {
    PreUnlock(kRead);
    core_.UnlockShared(token);
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

// The shared guard over an RwLock takes the biased path: it keeps the token.
template <>
class CAIRN_SCOPED_CAPABILITY ReaderLock<RwLock> {
 public:
  explicit ReaderLock(RwLock* mu) CAIRN_ACQUIRE_SHARED(mu) : mu_(mu) {
    mu_->LockShared(&token_);
  }
  ~ReaderLock() CAIRN_RELEASE() { mu_->UnlockShared(token_); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  RwLock* const mu_;
  ReaderToken token_;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_BASE_RW_LOCK_H_
