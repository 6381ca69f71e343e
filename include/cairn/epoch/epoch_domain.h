// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// EpochDomain: epoch-based reclamation for readers that must not lock.
//
// A reader enters a Guard through its Participant, reads shared pointers,
// and leaves. A writer unlinks a node so no new reader can reach it, then
// Retire()s it; the domain runs the node's deleter once every guard that was
// active at the retire has left (E1). Nothing runs in a hidden thread: grace
// periods advance and deleters run inside TryReclaim(), Retire(), Barrier()
// and Shutdown(), on the caller's thread.
//
// Domain lifetime. The host owns each domain; there is no global one. Every
// Participant must be destroyed before its domain (E10): destroying a domain
// with registered participants is reported through Options::error_hook and
// the shared core stays alive until the last participant goes, so it is an
// error, never undefined behaviour. Destruction calls Shutdown().
//
// Guards. `Guard g = participant.Enter();` — nestable (E8), RAII,
// [[nodiscard]]. A Participant is one execution context: a thread, or a
// reactor that multiplexes many requests on one thread. One Participant must
// not be used by two threads at the same time.
//
// Status codes shared by every method:
//   kFailedPrecondition  a call that may wait for guards (Barrier(),
//                        Shutdown(), a Retire()/Reserve() that needs
//                        back-pressure) made inside a guard of the same
//                        domain, where it would wait for itself. A Retire()
//                        that fits under the cap is fine inside a guard.
//   kUnavailable         the domain is shut down: RegisterParticipant(),
//                        Retire(), Reserve() and TryReserve() after
//                        Shutdown().
// Deleters run with no cairn lock held; they may call Retire() but must not
// call Barrier() or Shutdown().
//
// Bounded memory (E4). Retired bytes never exceed Options::retired_bytes_cap.
// "Retired bytes" are exactly the `bytes` callers pass to Retire(), Reserve()
// and TryReserve(), from the call until the node's deleter has run (or the
// unused reservation is dropped). cairn adds nothing for its own bookkeeping
// and cannot see what a node keeps alive: a caller whose node pins more
// memory (a record, the payload it owns) includes that in `bytes`. A retire
// that would cross the cap reclaims synchronously until
// Options::reclaim_deadline, then fails with kResourceExhausted ("busy") and
// the caller keeps ownership of the pointer. Stalled guards are reported with
// back-off at 1x, 3x, 9x, ... the stall threshold (E5).
//
// Read-side modes (read_side_mode.h). kSeqCst (default) publishes with one
// `xchg`. kAsymmetric publishes with a plain store; the advancer calls
// membarrier(2) instead. ThreadSanitizer cannot see membarrier, so TSan
// builds test kSeqCst.
//
// Costs depend on the machine: guard enter + leave in kSeqCst mode measured
// about 7 ns on a 2-core Debian 12 VM (AMD EPYC), whose `xchg` is slow, and
// about 1 ns there in kAsymmetric mode. docs/epoch.md lists each figure with
// the machine and the command that measured it.
//
// Allocation: Participant::Enter(), leaving a guard, and an
// EnterOnThisThread() on a thread already bound to the domain never allocate
// or lock. Out of memory never throws out of a retire path: Retire(),
// Reserve(), TryReserve() and TryUnlinkAndRetire() refuse with
// kResourceExhausted (the caller keeps the node), and RetireReserved() uses
// the block its reservation pledged (docs/concurrency.md, point 10). The
// first EnterOnThisThread() on a thread registers it; out of memory there
// is fatal (CAIRN_CHECK), as a guard cannot be refused.
//
// Thread safety: every EpochDomain method is safe from any thread.

#ifndef CAIRN_EPOCH_EPOCH_DOMAIN_H_
#define CAIRN_EPOCH_EPOCH_DOMAIN_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "cairn/base/clock.h"
#include "cairn/base/metrics.h"
#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/epoch/internal/epoch_slot.h"
#include "cairn/epoch/read_side_mode.h"

CAIRN_NAMESPACE_BEGIN

namespace epoch_internal {
class DomainCore;
class ThreadCache;
class EpochTestPeer;  // defined by cairn's tests only
}  // namespace epoch_internal

// What a stall report says about one guard held past the threshold (E5).
struct StallReport {
  std::string domain;
  std::uint64_t participant_id = 0;
  std::string participant_name;
  std::uint64_t pinned_epoch = 0;
  std::uint64_t global_epoch = 0;
  // A lower bound: the guard was entered before the epoch after its pinned
  // one began. Computed from the advancer's (epoch, time) ring.
  std::chrono::nanoseconds age{0};
  // Everything retired and not yet freeable is waiting on the oldest guard.
  std::uint64_t retired_count = 0;
  std::uint64_t retired_bytes = 0;
  // 0 for the report at 1x the threshold, 1 at 3x, 2 at 9x, ...
  std::uint32_t report_index = 0;
};

struct EpochDiagnostics {
  std::uint64_t global_epoch = 0;
  std::uint64_t registered_participants = 0;
  // Slots ever allocated; departed participants' slots are reused (E9).
  std::uint64_t participant_slots = 0;
  std::uint64_t active_guards = 0;
  // The guard pinning the oldest epoch (lower bound on its age, as in
  // StallReport); zero when no guard is active.
  std::chrono::nanoseconds oldest_guard_age{0};
  std::uint64_t oldest_guard_participant = 0;
  std::string oldest_guard_participant_name;
  std::uint64_t retired_count = 0;
  std::uint64_t retired_bytes = 0;  // includes outstanding reservations
  std::uint64_t peak_retired_bytes = 0;
  std::uint64_t grace_periods = 0;
  std::chrono::nanoseconds since_last_advance{0};
  std::uint64_t busy_count = 0;  // retires refused with kResourceExhausted
  std::uint64_t stall_reports = 0;
};

struct EpochOptions {
  std::string name = "epoch";
  std::size_t retired_bytes_cap = std::size_t{256} << 20;
  // How long a back-pressured Retire() reclaims before it gives up (busy).
  // Measured on the steady clock: waiting is real time.
  std::chrono::nanoseconds reclaim_deadline = std::chrono::milliseconds(20);
  // Guard age (on `clock`) that earns a stall report; 0 disables reports.
  std::chrono::nanoseconds stall_threshold = std::chrono::seconds(1);
  // Called with no lock held. Default: one line on stderr.
  std::function<void(const StallReport&)> stall_hook;
  // Lifetime errors (E10). Default: one line on stderr.
  std::function<void(std::string_view)> error_hook;
  ReadSideMode read_side_mode = ReadSideMode::kSeqCst;
  // Clock for ages in stall reports and diagnostics (P5).
  const Clock* clock = Clock::Steady();
  // Retire() runs a reclaim pass (one epoch advance, skipped if another
  // thread advanced since) every `reclaim_every` retirements; a thread's
  // expired retirements are freed a few per Retire() in between (E11). 1 is
  // the sanitize mode: seal and advance twice on every call, so a
  // use-after-free shows at once under ASan.
  std::uint32_t reclaim_every = 64;
};

class EpochDomain;
class Participant;

// RAII read-side critical section. Moves, never copies.
// Obtained from Participant::Enter() or EpochDomain::EnterOnThisThread().
class [[nodiscard]] Guard {
 public:
  Guard(Guard&& other) noexcept : slot_(std::exchange(other.slot_, nullptr)) {}
  Guard& operator=(Guard&&) = delete;
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
  ~Guard() {
    if (slot_ != nullptr) epoch_internal::LeaveSlot(slot_);
  }

 private:
  friend class Participant;
  friend class EpochDomain;
  Guard(const epoch_internal::ReadSide& read_side,
        epoch_internal::Slot* slot) noexcept
      : slot_(slot) {
    epoch_internal::EnterSlot(read_side, slot_);
  }

  epoch_internal::Slot* slot_;
};

// One registered execution context of a domain. Move-only.
class Participant {
 public:
  Participant(Participant&& other) noexcept;
  Participant& operator=(Participant&& other) noexcept;
  Participant(const Participant&) = delete;
  Participant& operator=(const Participant&) = delete;
  // Deregisters. Destroying a participant inside one of its guards is a
  // programmer error (CAIRN_CHECK).
  ~Participant();

  Guard Enter() noexcept { return Guard(*read_side_, slot_); }
  bool InGuard() const noexcept { return slot_->nesting != 0; }
  std::uint64_t id() const noexcept { return id_; }

 private:
  friend class EpochDomain;
  friend class epoch_internal::ThreadCache;
  friend class epoch_internal::EpochTestPeer;
  Participant(std::shared_ptr<epoch_internal::DomainCore> core,
              epoch_internal::Slot* slot, std::uint64_t id) noexcept;
  void Release() noexcept;

  std::shared_ptr<epoch_internal::DomainCore> core_;
  const epoch_internal::ReadSide* read_side_ = nullptr;
  epoch_internal::Slot* slot_ = nullptr;
  std::uint64_t id_ = 0;
};

// Retired-byte budget taken ahead of an unlink, so a writer can learn that it
// would be refused before it publishes anything. Consumed by
// EpochDomain::RetireReserved(); released unused on destruction.
class [[nodiscard]] RetireReservation {
 public:
  RetireReservation(RetireReservation&& other) noexcept
      : core_(std::move(other.core_)), bytes_(std::exchange(other.bytes_, 0)) {}
  RetireReservation& operator=(RetireReservation&&) = delete;
  RetireReservation(const RetireReservation&) = delete;
  RetireReservation& operator=(const RetireReservation&) = delete;
  ~RetireReservation();

  std::size_t bytes() const noexcept { return bytes_; }

 private:
  friend class EpochDomain;
  RetireReservation(std::shared_ptr<epoch_internal::DomainCore> core,
                    std::size_t bytes) noexcept
      : core_(std::move(core)), bytes_(bytes) {}

  std::shared_ptr<epoch_internal::DomainCore> core_;
  std::size_t bytes_;
};

class EpochDomain {
 public:
  using Deleter = void (*)(void*);

  explicit EpochDomain(EpochOptions options = {});
  EpochDomain(const EpochDomain&) = delete;
  EpochDomain& operator=(const EpochDomain&) = delete;
  // Shutdown(reclaim_deadline), then reports participants still registered
  // (E10); see the file comment.
  ~EpochDomain();

  // Takes a free slot (reusing one a departed participant left, E9) or adds
  // one. Locks the registry; may allocate. kUnavailable after Shutdown().
  Result<Participant> RegisterParticipant(std::string_view name = {});

  // Enters a guard through an implicit participant that the domain registers
  // for the calling thread on first use ("thread-<n>") and that is released
  // when the thread exits. For APIs that cannot take a Participant (the
  // directory's WithObject). The hit path compares a thread-local key (the
  // domain's address and a random per-domain nonce, unique even across two
  // copies of cairn in one process) on top of Enter(), and neither
  // allocates nor locks; the first call on a thread locks the registry and
  // allocates.
  // Implicit participants are not reported as a lifetime error (E10) at domain
  // destruction, and they keep working (with nothing to protect) after
  // Shutdown().
  Guard EnterOnThisThread() noexcept {
    epoch_internal::ThreadLast& last = epoch_internal::thread_last;
    if (!last.Matches(read_side_)) BindThisThread();
    return Guard(*read_side_, last.slot);
  }

  // Defers `deleter(ptr)` past a grace period. `bytes` is what the node costs
  // and is what the cap counts (see "Bounded memory" above). On error the
  // caller still owns `ptr`:
  //   kResourceExhausted  the cap stayed full for reclaim_deadline (busy)
  //   kFailedPrecondition back-pressure needed inside a guard of this domain
  //   kUnavailable        the domain is shut down
  //   kInvalidArgument    bytes > cap, or a null ptr/deleter
  // Appends to the calling thread's retire bag (its own lock; the first
  // retire on a thread allocates the bag), charging the cap from the bag's
  // credit (a shared CAS only to refill it); a full block is sealed onto the
  // bag's own list. May run other nodes' deleters, a bounded number (E11):
  // at most 8 of this thread's expired retirements and 8 of an idle or
  // exited thread's.
  Status Retire(void* ptr, std::size_t bytes, Deleter deleter);
  template <typename T>
  Status Retire(T* ptr, std::size_t bytes = sizeof(T)) {
    return Retire(static_cast<void*>(ptr), bytes,
                  [](void* p) { delete static_cast<T*>(p); });
  }

  // The first half of Retire(): waits for room like Retire() does, with the
  // same errors (kResourceExhausted also when out of memory). It pledges the
  // list space the retire may need, so RetireReserved() then never fails.
  Result<RetireReservation> Reserve(std::size_t bytes);
  // Reserve() without waiting or reclaiming (so no deleter runs): for
  // callers that hold a lock of their own. kResourceExhausted if the cap has
  // no room right now (not counted as busy); other errors as Retire().
  Result<RetireReservation> TryReserve(std::size_t bytes);
  // kDeferred: append only, never run deleters here, for callers that hold
  // a lock of their own; a reclaim that falls due is left to the next
  // ReclaimIfDue() (or any other reclaiming call).
  enum class Reclaim : std::uint8_t { kAllowed, kDeferred };
  void RetireReserved(RetireReservation reservation, void* ptr, Deleter deleter,
                      Reclaim reclaim = Reclaim::kAllowed) noexcept;

  // Unlink and retire in one step, for a writer under a lock of its own
  // that must learn a retire would be refused before it unlinks anything
  // (the route's copy-on-write publication). With the calling thread's
  // retire bag locked, charges `bytes` from the bag's credit (a shared CAS
  // only to refill it, else an exact charge of the cap) and, only if that
  // succeeds, calls unlink(arg), which must make `ptr` unreachable, then
  // appends `ptr` to the bag: one lock, no reservation object, no wait.
  // No deleter runs here (as Reclaim::kDeferred): call ReclaimIfDue() once
  // unlocked. `unlink` runs under the bag's lock, a leaf: it must not lock,
  // allocate or call the domain. Code-only errors, `unlink` not called and
  // `ptr` still the caller's: kResourceExhausted (no room now; not counted
  // as busy), kUnavailable (shut down), kInvalidArgument (bytes > cap).
  using Unlink = void (*)(void*);
  Status TryUnlinkAndRetire(void* ptr, std::size_t bytes, Deleter deleter,
                            Unlink unlink, void* arg) noexcept;
  // The same with a callable: unlink() is called as above.
  template <typename Fn>
  Status TryUnlinkAndRetire(void* ptr, std::size_t bytes, Deleter deleter,
                            Fn& unlink) noexcept {
    return TryUnlinkAndRetire(
        ptr, bytes, deleter, [](void* fn) { (*static_cast<Fn*>(fn))(); },
        &unlink);
  }

  // Runs the reclamation work the calling thread's deferred retirements
  // made due, bounded as Retire()'s (E11): an epoch advance attempt every
  // reclaim_every retirements and at most 8 deleters of this thread's
  // expired nodes (and 8 of an idle or exited thread's). A thread-local
  // lookup and one relaxed load otherwise. Call with no lock held.
  std::size_t ReclaimIfDue();

  // Never waits for a guard: advances the epoch if every active guard has seen
  // it (up to twice), frees what is past its grace period, emits due stall
  // reports. Returns the number of nodes freed by this call.
  std::size_t TryReclaim();

  // Waits until every node retired before the call has been freed (E3).
  // kFailedPrecondition inside a guard; kDeadlineExceeded after `timeout`.
  Status Barrier(
      std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max());

  // Refuses new participants and retirements (they return kUnavailable from
  // now on), waits up to `deadline` for the active guards to leave, then runs
  // every pending deleter exactly once and ends with zero retired bytes
  // (E10). kDeadlineExceeded if guards stayed; pending nodes are then kept
  // (never freed under a reader) and a later Shutdown() or the last
  // participant's exit frees them. kFailedPrecondition inside a guard of
  // this domain. A second Shutdown() is OK (and drains again). A Retire()
  // racing Shutdown() on another thread either returns kUnavailable or
  // completes; a node it completes after Shutdown() returned is freed by a
  // later Shutdown() (the destructor calls one) or with the domain.
  Status Shutdown(std::chrono::nanoseconds deadline);

  EpochDiagnostics Diagnostics() const;

  // Reports the domain's metrics (docs/metrics.md, "Epoch"), each labelled
  // domain="<EpochOptions::name>": Diagnostics() as gauges and counters,
  // reclaim, barrier and busy totals, and the histogram of time waited at
  // the retired-bytes cap. Takes what Diagnostics() takes (the advance and
  // registry locks, briefly) and allocates; never waits for a guard. Safe
  // from any thread, not inside a deleter. Counting costs nothing on the
  // read side: guards write no counter; only reclaim passes, barriers,
  // refusals and cap waits do.
  void VisitMetrics(MetricVisitor& visitor) const;

  // The fork rule: call in the child of fork(), on the forking thread, before
  // using the domain. Guards of other (now gone) threads are cleared, locks
  // are re-initialised, and pending retirements are dropped without running
  // their deleters (the child frees nothing it did not allocate itself).
  void ResetAfterFork() noexcept;

  const std::string& name() const noexcept;
  // True once Shutdown() has begun: retirements answer kUnavailable. For a
  // writer that changes shared state without retiring anything (the route
  // filling an empty bucket) and must refuse as the others do.
  bool shut_down() const noexcept;
  // The effective mode: kAsymmetric falls back to kSeqCst without membarrier.
  ReadSideMode read_side_mode() const noexcept;

 private:
  friend class epoch_internal::EpochTestPeer;
  void BindThisThread() noexcept;

  std::shared_ptr<epoch_internal::DomainCore> core_;
  const epoch_internal::ReadSide* read_side_;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_EPOCH_EPOCH_DOMAIN_H_
