// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Machinery behind EpochDomain's inline read path. Never include directly.

#ifndef CAIRN_EPOCH_INTERNAL_EPOCH_SLOT_H_
#define CAIRN_EPOCH_INTERNAL_EPOCH_SLOT_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "cairn/base/version.h"
#include "cairn/epoch/read_side_mode.h"

CAIRN_NAMESPACE_BEGIN

namespace epoch_internal {

// An opaque per-thread tag: the address of a thread_local byte.
inline std::uintptr_t ThisThreadTag() noexcept {
  static thread_local char tag;
  return reinterpret_cast<std::uintptr_t>(&tag);
}

// The state of one slot packs the pinned epoch and an active bit:
// (epoch << 1) | 1 while a guard is held, 0 otherwise.
inline constexpr std::uint64_t kActiveBit = 1;
inline constexpr std::uint64_t PackPinned(std::uint64_t epoch) noexcept {
  return (epoch << 1) | kActiveBit;
}
inline constexpr std::uint64_t PinnedEpoch(std::uint64_t state) noexcept {
  return state >> 1;
}

// One registered participant. The first cache line is written only by its
// owner on enter/leave (E7); the second is the advancer's bookkeeping, so a
// stall report never makes the owner's line bounce. Slots are never freed
// before their domain's core, so the advancer walks them without a lock.
struct alignas(128) Slot {
  // --- owner line -----------------------------------------------------
  std::atomic<std::uint64_t> state{0};
  std::uint32_t nesting = 0;  // owner only
  // The thread that entered last; lets blocking calls detect a caller that
  // is itself inside a guard of the same domain.
  std::atomic<std::uintptr_t> owner_thread{0};
  std::atomic<bool> in_use{false};
  Slot* next = nullptr;  // immutable once the slot is linked

  // --- advancer line (guarded by the core's advance mutex) --------------
  alignas(64) std::uint64_t stall_epoch = 0;
  std::uint64_t stall_participant = 0;
  std::uint32_t stall_reports = 0;
  // Registration data (guarded by the core's registry mutex).
  std::uint64_t participant_id = 0;
  std::string name;
  bool implicit = false;  // registered by EnterOnThisThread()
};

// The part of a domain the inline read path touches. The global epoch has a
// cache line of its own: readers load it, only the advancer writes it.
struct ReadSide {
  alignas(128) std::atomic<std::uint64_t> global_epoch{1};
  ReadSideMode mode = ReadSideMode::kSeqCst;
  // Drawn at random when the domain is created. With this ReadSide's address
  // it keys the per-thread participant cache: the address tells apart the
  // live domains of every copy of cairn in the process (two shared objects
  // may each link their own), the nonce a later domain that reuses the
  // address of a destroyed one.
  std::uint64_t nonce = 0;
};

// The calling thread's most recently used implicit participant. Trivially
// destructible, so reading it is a plain %fs-relative load; the owning cache
// (with the participants themselves) lives in epoch_domain.cc.
struct ThreadLast {
  const ReadSide* read_side = nullptr;
  std::uint64_t nonce = 0;
  Slot* slot = nullptr;

  bool Matches(const ReadSide* domain) const noexcept {
    return read_side == domain && nonce == domain->nonce;
  }
};
inline thread_local ThreadLast thread_last;

inline void EnterSlot(const ReadSide& read_side, Slot* slot) noexcept {
  if (slot->nesting++ != 0) return;  // a nested enter publishes nothing (E8)
  // A stale epoch here is only conservative: it blocks the advance. Acquire
  // keeps the guarded loads after this one on weakly ordered CPUs: were one
  // performed earlier it could read a pointer unlinked before the epoch we
  // pin (free on x86, `ldar` on ARM).
  const std::uint64_t pinned =
      PackPinned(read_side.global_epoch.load(std::memory_order_acquire));
  slot->owner_thread.store(ThisThreadTag(), std::memory_order_relaxed);
  if (read_side.mode == ReadSideMode::kAsymmetric) {
    slot->state.store(pinned, std::memory_order_relaxed);
    // The advancer's membarrier orders this store before our later loads.
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    slot->state.exchange(pinned, std::memory_order_seq_cst);
  }
}

inline void LeaveSlot(Slot* slot) noexcept {
  if (--slot->nesting != 0) return;
  // Release: every read made inside the guard happens before the advancer's
  // acquire load that sees the slot inactive, and so before any free.
  slot->state.store(0, std::memory_order_release);
}

}  // namespace epoch_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_EPOCH_INTERNAL_EPOCH_SLOT_H_
