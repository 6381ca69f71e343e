// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ObjectEntry: one named object instance in a GroupDirectory. It carries an
// ObjectId (never reused within a tenant instance), its owned key, a link to
// its explicit group (null for a singleton), a lifecycle
// (kCreating -> kActive -> kRemoving), a private reader-writer lock (RwLock,
// one 32-bit word, writers preferred) and the metadata envelope: size, lease
// deadline (monotone, P1), soft-pin deadline, hard-pin flag, a version
// counter, in-flight task flags, the bytes counted for quota with their
// ledger state (pending, committed, released; Q2), and the host's Payload.
//
// Thread safety: the identity (id, key, group, tenant, hard pin) is
// immutable and readable from any thread through a handle; counted_bytes() is
// an atomic that only the commit of a two-phase put or upsert and a charge
// adjustment change. The lock
// is private: metadata and payload are reachable only inside a
// GroupDirectory callback, through ObjectView (shared lock) or ObjectAccess
// (exclusive lock), see handles.h. lifecycle_hint() is an acquire load of a
// value written under the exclusive lock; outside a callback it is only a
// hint, as a handle keeps memory alive, not validity (D2).

#ifndef CAIRN_DIRECTORY_OBJECT_ENTRY_H_
#define CAIRN_DIRECTORY_OBJECT_ENTRY_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "cairn/base/rw_lock.h"
#include "cairn/base/thread_annotations.h"
#include "cairn/base/version.h"
#include "cairn/route/route_concept.h"

CAIRN_NAMESPACE_BEGIN

using TenantInstanceId = std::uint64_t;
using GroupId = std::uint64_t;
using ObjectId = std::uint64_t;

// 0 is never issued: it is the "no group" / "no object" value.
inline constexpr GroupId kNoGroup = 0;

// Names one object instance for deferred or durable work (D5). Compare it,
// never re-resolve by key alone.
struct ObjectToken {
  TenantInstanceId tenant = 0;
  ObjectId object = 0;
  friend bool operator==(const ObjectToken&, const ObjectToken&) = default;
};

enum class Lifecycle : std::uint8_t { kCreating, kActive, kRemoving };

// In-flight task bits a host sets on an object (offload, replication) under
// its exclusive lock; visible in ObjectView::tasks().
enum TaskFlag : std::uint32_t {
  kTaskOffload = 1u << 0,
  kTaskReplication = 1u << 1,
};

// The default host payload: nothing.
struct EmptyPayload {};

// A copy of the metadata envelope, taken inside a callback.
struct ObjectMetadata {
  std::uint64_t size_bytes = 0;
  // Effective lease: the object's own for a singleton, the group's shared
  // lease for a member (P2). 0 means never leased.
  std::int64_t lease_deadline_nanos = 0;
  std::int64_t soft_pin_deadline_nanos = 0;
  bool hard_pinned = false;
  std::uint64_t version = 0;
  std::uint32_t tasks = 0;
  std::uint64_t counted_bytes = 0;
};

template <typename Payload>
class ObjectEntry;
template <typename Payload>
class GroupEntry;
template <typename Payload>
class ObjectView;
template <typename Payload>
class ObjectAccess;

// A route template GroupDirectory<Payload, Route> can use: Route<Entry> is an
// ObjectRoute (cairn/route/route_concept.h) for the directory's entry type.
template <template <typename> class Route, typename Payload>
concept DirectoryRoute =
    ObjectRoute<Route<ObjectEntry<Payload>>, ObjectEntry<Payload>>;

template <typename Payload, template <typename> class Route>
class GroupDirectory;

namespace directory_internal {

template <typename Payload>
class LogStep;  // internal/log_step.h

// deadline = max(deadline, candidate) (P1). Returns true if it moved.
inline bool AtomicMax(std::atomic<std::int64_t>& deadline,
                      std::int64_t candidate) noexcept {
  std::int64_t current = deadline.load(std::memory_order_relaxed);
  while (current < candidate) {
    if (deadline.compare_exchange_weak(current, candidate,
                                       std::memory_order_relaxed,
                                       std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

// What GroupDirectory passes when it builds an entry.
struct EntryInit {
  TenantInstanceId tenant = 0;
  ObjectId id = 0;
  std::string key;
  std::uint64_t size_bytes = 0;
  std::uint64_t counted_bytes = 0;
  std::uint64_t retained_bytes = 0;
  std::int64_t lease_deadline_nanos = 0;
  std::int64_t soft_pin_deadline_nanos = 0;
  bool hard_pinned = false;
  // Quota ledger at creation: kCommitted for a charged Create, kPending for
  // CreatePending, kUncharged without a quota account.
  std::uint8_t ledger = 0;
  std::int64_t pending_since_nanos = 0;
};

// The per-object quota ledger (Q2), guarded by the object lock. The
// committed charge is the entry's counted_bytes(); `pending` is a charge not
// yet committed: a two-phase put's counted bytes (state kPending) or a staged
// upsert's new counted bytes (state kCommitted with upsert_pending).
// `upsert_stage` numbers the instance's stagings (BeginUpsert), so a
// CommitUpsert or AbortUpsert that names one (UpsertStage) touches no other;
// `upsert_took_over`: the staging took over an expired one (D11), so only a
// call naming it may settle it. Both fit the padding before `pending`.
struct Ledger {
  enum State : std::uint8_t { kUncharged, kPending, kCommitted, kReleased };
  State state = kUncharged;
  bool upsert_pending = false;
  bool upsert_took_over = false;
  std::uint32_t upsert_stage = 0;
  std::uint64_t pending = 0;
  std::uint64_t pending_size = 0;
  std::int64_t pending_since_nanos = 0;
};

}  // namespace directory_internal

template <typename Payload = EmptyPayload>
class ObjectEntry {
 public:
  ObjectEntry(directory_internal::EntryInit init, GroupEntry<Payload>* group,
              Payload payload)
      : tenant_(init.tenant),
        id_(init.id),
        key_(std::move(init.key)),
        group_(group),
        counted_bytes_(init.counted_bytes),
        retained_bytes_(init.retained_bytes),
        hard_pinned_(init.hard_pinned),
        lease_deadline_(init.lease_deadline_nanos),
        size_bytes_(init.size_bytes),
        soft_pin_deadline_(init.soft_pin_deadline_nanos),
        payload_(std::move(payload)) {
    ledger_.state = static_cast<directory_internal::Ledger::State>(init.ledger);
    if (ledger_.state == directory_internal::Ledger::kPending) {
      ledger_.pending = init.counted_bytes;
      ledger_.pending_size = init.size_bytes;
      ledger_.pending_since_nanos = init.pending_since_nanos;
      counted_bytes_.store(0, std::memory_order_relaxed);
    }
  }

  ObjectEntry(const ObjectEntry&) = delete;
  ObjectEntry& operator=(const ObjectEntry&) = delete;

  ObjectId id() const noexcept { return id_; }
  std::string_view key() const noexcept { return key_; }
  ObjectToken token() const noexcept { return ObjectToken{tenant_, id_}; }
  bool is_singleton() const noexcept { return group_ == nullptr; }
  // The explicit group, or null. O(1): no hash, no lock (section 1).
  GroupEntry<Payload>* group() const noexcept { return group_; }
  bool hard_pinned() const noexcept { return hard_pinned_; }
  // The committed counted bytes; changed only by a committed upsert or a
  // charge adjustment (GroupDirectory::AdjustCharge).
  std::uint64_t counted_bytes() const noexcept {
    return counted_bytes_.load(std::memory_order_relaxed);
  }
  // Host memory the entry keeps alive (CreateOptions::retained_bytes); the
  // route charges it to its retired-bytes cap when the entry is unlinked.
  std::uint64_t retained_bytes() const noexcept { return retained_bytes_; }
  // Acquire load; authoritative only inside a callback.
  Lifecycle lifecycle_hint() const noexcept {
    return lifecycle_.load(std::memory_order_acquire);
  }

 private:
  friend class ObjectView<Payload>;
  friend class ObjectAccess<Payload>;
  template <typename P, template <typename> class R>
  friend class GroupDirectory;
  friend class directory_internal::LogStep<Payload>;

  // Written only with mu_ held exclusively.
  void SetLifecycle(Lifecycle next) CAIRN_REQUIRES(mu_) {
    lifecycle_.store(next, std::memory_order_release);
  }
  bool active_locked() const CAIRN_REQUIRES_SHARED(mu_) {
    return lifecycle_.load(std::memory_order_relaxed) == Lifecycle::kActive;
  }

  const TenantInstanceId tenant_;
  const ObjectId id_;
  const std::string key_;
  GroupEntry<Payload>* const group_;
  // Written under the exclusive lock (commit of a put or an upsert, a
  // charge adjustment).
  std::atomic<std::uint64_t> counted_bytes_;
  const std::uint64_t retained_bytes_;
  const bool hard_pinned_;
  // Next to the bool, so the one-byte lifecycle and the 4-byte lock share
  // the padding before the 8-byte cells.
  std::atomic<Lifecycle> lifecycle_{Lifecycle::kCreating};
  mutable RwLock mu_;
  // Singletons only; a member's lease is its group's (P2). Moved by an
  // atomic max under the shared or exclusive lock.
  std::atomic<std::int64_t> lease_deadline_;
  // Bumped on every envelope change, including a lease that moved.
  std::atomic<std::uint64_t> version_{1};
  std::uint64_t size_bytes_ CAIRN_GUARDED_BY(mu_);
  std::int64_t soft_pin_deadline_ CAIRN_GUARDED_BY(mu_);
  std::uint32_t tasks_ CAIRN_GUARDED_BY(mu_) = 0;
  Payload payload_ CAIRN_GUARDED_BY(mu_);
  directory_internal::Ledger ledger_ CAIRN_GUARDED_BY(mu_);
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_DIRECTORY_OBJECT_ENTRY_H_
