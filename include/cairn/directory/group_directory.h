// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// GroupDirectory: one tenant's objects. Singletons and explicit groups of
// objects, each object behind its own reader-writer lock, found in one hash
// through a route (key -> entry owner), with leases and pins, a group
// catalog, and lifecycle stripes that serialise creates and erases of one
// key. See docs/directory.md for the model and docs/concurrency.md for the
// lock order.
//
// The route is a policy: GroupDirectory<Payload, Route> requires
// Route<ObjectEntry<Payload>> to satisfy the ObjectRoute concept
// (cairn/route/route_concept.h). The library's route, and the default, is
// the epoch copy-on-write ObjectRouteIndex: its reads take no lock (an epoch
// guard of the route's domain), its writes lock one writer stripe.
//
// Thread safety: every public method is safe from any thread, concurrently
// with every other. Lock order (L2), outermost first:
//   lifecycle stripe -> group catalog (leaf) | group -> object(s) in
//   ascending key order -> route writer stripe (leaf)
// The catalog and the route's writer stripes are leaves: nothing else is
// acquired while one is held. No lock is held across a host callback (L3)
// except the object's own lock during a WithObject(s)/WithHandle/WithToken
// callback, which is the contract. Inside such a callback the host must not
// call back into this directory (it would nest object locks outside the order)
// and must not block on work that needs this object. The removal callback
// (DirectoryOptions::on_removed) runs with no directory lock held and may
// call any method.
//
// Read path: point and batch lookups write no shared state (no route lock,
// no owner copy; Pin copies one owner) except their hit/miss counters, which
// are per-thread stripes (one relaxed add on the calling thread's stripe per
// point lookup, at most three per batch; VisitMetrics, docs/metrics.md). A
// read that grants a lease does an atomic max on the object's (or its
// group's) lease cell. Every read-path miss is a code-only Status (no
// allocation).
//
// Metrics: VisitMetrics() reports the cairn_directory_* metrics; write
// outcomes are counted in a block allocated by the first counted write, so
// an empty directory holds the read stripes (256 bytes) and one pointer.
//
// Shutdown: after Shutdown() every call that takes a key, handle, token or
// visitor returns kUnavailable, the one "shut down" code of cairn; Shutdown()
// itself is idempotent (OK again), and the accessors (Diagnostics(),
// is_shut_down(), object_count(), ...) keep answering. Writes also return
// kUnavailable once the route's epoch domain is shut down.

#ifndef CAIRN_DIRECTORY_GROUP_DIRECTORY_H_
#define CAIRN_DIRECTORY_GROUP_DIRECTORY_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cairn/base/check.h"
#include "cairn/base/clock.h"
#include "cairn/base/internal/hash.h"
#include "cairn/base/internal/lazy_array.h"
#include "cairn/base/metrics.h"
#include "cairn/base/mutex.h"
#include "cairn/base/status.h"
#include "cairn/base/thread_annotations.h"
#include "cairn/base/version.h"
#include "cairn/directory/directory_hooks.h"
#include "cairn/directory/directory_options.h"
#include "cairn/directory/durable_log.h"
#include "cairn/directory/group_entry.h"
#include "cairn/directory/handles.h"
#include "cairn/directory/internal/directory_metrics.h"
#include "cairn/directory/internal/log_step.h"
#include "cairn/directory/object_entry.h"
#include "cairn/directory/quota.h"
#include "cairn/route/object_route_index.h"

CAIRN_NAMESPACE_BEGIN

namespace directory_internal {
class GroupDirectoryTestPeer;

// The callback archetype of a route's EraseEachIfMatch (declared only).
struct UnlinkDone {
  void operator()(std::size_t index, const Status& status) const;
};

// A route with ObjectRouteIndex's optional EraseEachIfMatch
// (docs/route.md): a group's unlinks go through it.
template <typename R>
concept UnlinksEach = requires(R& r, std::span<const typename R::Unlinking> u,
                               typename R::WriteBudget* budget) {
  r.EraseEachIfMatch(u, budget, UnlinkDone{});
};

}  // namespace directory_internal

// Route must satisfy DirectoryRoute (a static_assert, not a requires-clause:
// a constraint on the class would be checked wherever the type is named, and
// a Payload that holds a GroupDirectory<Payload>* names it while incomplete).
template <typename Payload = EmptyPayload,
          template <typename> class Route = ObjectRouteIndex>
class GroupDirectory {
  static_assert(DirectoryRoute<Route, Payload>,
                "Route<ObjectEntry<Payload>> must satisfy cairn::ObjectRoute "
                "(cairn/route/route_concept.h)");

 public:
  using PayloadType = Payload;
  using Entry = ObjectEntry<Payload>;
  using Group = GroupEntry<Payload>;
  using Handle = ObjectHandle<Payload>;
  using GroupHandleType = GroupHandle<Payload>;
  using View = ObjectView<Payload>;
  using Access = ObjectAccess<Payload>;
  using RouteType = Route<Entry>;
  using WriteBudget = typename RouteType::WriteBudget;
  using Owner = std::shared_ptr<Entry>;

  explicit GroupDirectory(DirectoryOptions options = {})
      : options_(std::move(options)),
        clock_(options_.clock != nullptr ? options_.clock : Clock::Steady()),
        route_(options_.route),
        stripe_count_(
            options_.lifecycle_stripes == 0 ? 1 : options_.lifecycle_stripes),
        stripes_(stripe_count_) {}

  GroupDirectory(const GroupDirectory&) = delete;
  GroupDirectory& operator=(const GroupDirectory&) = delete;

  // ---- create ------------------------------------------------------------

  // Creates a singleton, or creates-or-joins the explicit group
  // options.group. Errors, each with no state change: kInvalidArgument (bad
  // key or group name), kAlreadyExists (key routed), kFailedPrecondition
  // (the group is being torn down by EraseGroup, or the directory is sealed,
  // SealIfEmpty), kUnavailable (shut down),
  // or the route's own write error (the epoch route's kResourceExhausted
  // under back-pressure, waited for before any lock is taken; the create is
  // then undone, including a group it made; kUnavailable once the route's
  // epoch domain is shut down). Locks: the key's lifecycle stripe; for a
  // member the catalog (briefly), then the group, then the new object, then
  // a route writer stripe. Blocks behind writers of the same stripe or
  // group; allocates. Not for use inside a callback.
  Result<Handle> Create(std::string_view key, const CreateOptions& options = {},
                        Payload payload = Payload()) {
    bool quota_refused = false;
    Result<Handle> made =
        CreateImpl(key, options, std::move(payload), /*pending=*/false,
                   /*restored=*/nullptr, &quota_refused);
    CountOp(MetricOp::kCreate, made.status().code(), quota_refused);
    return made;
  }

  // ---- two-phase puts and upserts, charged to quota (Q1-Q4, docs/tenants.md)

  // The first phase of a put: as Create, but the object is routed in
  // kCreating (no lookup returns it, D6) with its counted bytes charged as
  // pending. Commit() makes it kActive; Abort() or ReapPendingPuts() removes
  // it and refunds the charge. A pending key blocks other creates of it
  // (kAlreadyExists) until it expires: a pending put of the key older than
  // pending_put_timeout (ReapPendingPuts' rule, on the injected clock) is
  // taken over (D11): under the key's lifecycle stripe it is aborted as
  // Abort would (its charge refunded, its removal callback run once,
  // off-lock, after this call's own work), so its token's Commit or Abort
  // then fails with kNotFound, and this put takes the key. If the quota
  // refuses this put's charge while an expired put holds the key, that put
  // is aborted first and the charge tried once more. Errors as Create, plus
  // kResourceExhausted from the quota (its message carries the deficit),
  // nothing charged.
  Result<Handle> CreatePending(std::string_view key,
                               const CreateOptions& options = {},
                               Payload payload = Payload()) {
    bool quota_refused = false;
    Result<Handle> made =
        CreateImpl(key, options, std::move(payload), /*pending=*/true,
                   /*restored=*/nullptr, &quota_refused);
    CountOp(MetricOp::kCreatePending, made.status().code(), quota_refused);
    return made;
  }

  // Commits the pending put `token` routed under `key`: kCreating ->
  // kActive, the pending charge becomes the committed counted bytes, the
  // version moves. With options.counted_bytes set the put settles
  // partially (Q4): the object keeps that many counted bytes and the rest
  // of its reservation is refunded to the account in the same step (the
  // replicas that failed give their room back). Errors, no state change:
  // kNotFound (key not routed, or it names another instance than `token`),
  // kFailedPrecondition (the instance is not kCreating: already committed,
  // aborted or removed), kInvalidArgument (bad key, or counted_bytes above
  // the reservation), kUnavailable. Locks the object only.
  Status Commit(std::string_view key, ObjectToken token,
                const CommitOptions& options = {}) {
    return Counted(MetricOp::kCommit, [&]() -> Status {
      if (Status s = CheckCall(key); !s.ok()) return s;
      if (token.tenant != options_.tenant_instance) return NotFoundError();
      const Owner owner = route_.Pin(key);  // released after the lock
      if (owner == nullptr || owner->id() != token.object) {
        return NotFoundError();
      }
      Entry* e = owner.get();
      // Durable log (H1): reserved before the object lock.
      LogStep log(options_.durable_log, options_.tenant_instance);
      if (Status s = log.Reserve(key, e); !s.ok()) return s;
      if (Status s = CommitLocked(e, &log, options); !s.ok()) return s;
      return log.Finalize(token);
    }());
  }

  // Adjusts the committed charge of the active object `token` (Q4): its
  // counted bytes move by adjustment.charge_bytes - adjustment.refund_bytes
  // in one step under its exclusive lock, and so does the account: a net
  // increase is admitted against the quota as CreatePending's charge is
  // (Q1), a net decrease is refunded at once. A host that keeps replicas
  // charges a new or replacement replica's bytes and refunds a lost one's.
  // The version moves (an eviction that ranked the object before the
  // change skips it, V2) and, with a durable log, a kAdjust post-state is
  // logged (H1). A zero net change changes nothing and logs nothing. Errors,
  // no state change: kResourceExhausted (quota: "quota exceeded: deficit N
  // bytes" or "admission closed", as CreatePending), kNotFound (not routed,
  // not that instance, or not kActive: a pending put settles at Commit),
  // kFailedPrecondition (an upsert is staged: its commit replaces the whole
  // charge, so settle it first; or a quota ledger mismatch),
  // kInvalidArgument (bad key, a refund above the counted bytes, counted
  // bytes past 63 bits), kUnavailable, the log's Reserve or Append error;
  // with `expected_version`, kAborted if the object's version is not that
  // one, so a change the host computed from a state it read earlier
  // (ObjectMetadata::version) never applies over another (an offload's
  // Keep, another adjustment). An upsert staged and abandoned blocks it
  // until the reaper or a named BeginUpsert takes the staging over (D11).
  // Locks the object only; allocates only the record and error messages.
  // Not for use inside a callback.
  Status AdjustCharge(
      std::string_view key, ObjectToken token,
      const ChargeAdjustment& adjustment,
      std::optional<std::uint64_t> expected_version = std::nullopt) {
    bool quota_refused = false;
    Status s = AdjustChargeImpl(key, token, adjustment, expected_version,
                                &quota_refused);
    CountOp(MetricOp::kAdjustCharge, s.code(), quota_refused);
    return s;
  }

  // Aborts the pending put `token`: the object leaves the route (matched
  // unlink), its pending charge is refunded, and the removal callback runs
  // once, off-lock. Errors, no state change: kNotFound (not routed or not
  // that instance), kFailedPrecondition (not kCreating), kInvalidArgument,
  // kUnavailable, kResourceExhausted (route busy). Locks as Erase.
  Status Abort(std::string_view key, ObjectToken token) {
    return Counted(
        MetricOp::kAbort,
        AbortPending(key, token, std::numeric_limits<std::int64_t>::max()));
  }

  // Stages an upsert of the active instance `token`: charges
  // options.counted_bytes as pending (lock-free, before any lock) and
  // records the new size. Readers keep seeing the committed state (size,
  // counted bytes, version, payload) until CommitUpsert(). Errors, nothing
  // charged: kNotFound (not routed, not that instance, not kActive),
  // kFailedPrecondition (an upsert is already pending), kResourceExhausted
  // (quota, with the deficit), kInvalidArgument, kUnavailable.
  Status BeginUpsert(std::string_view key, ObjectToken token,
                     const UpsertOptions& options) {
    return BeginUpsert(key, token, options, nullptr);
  }
  // BeginUpsert that names its staging in *stage (null: as above), to pass
  // to CommitUpsert / AbortUpsert, and that takes over (D11) a staged upsert
  // of the instance older than pending_put_timeout (ReapPendingPuts' rule,
  // on the injected clock): under the object's exclusive lock the expired
  // staging's charge is refunded and this one staged in the same step. A
  // CommitUpsert or AbortUpsert of the expired staging then fails with
  // kFailedPrecondition and leaves this one as it is: named, its number is
  // not this one's; unnamed, a staging that took over another is settled
  // only by a call naming it. The unnamed BeginUpsert takes over nothing:
  // both stagers would hold the same token. If the quota refuses this
  // charge, an expired staging is taken over first and the charge tried
  // once more under the lock; refused again, kResourceExhausted, and the
  // expired staging stays dropped (the reaper would have dropped it). A
  // staging not yet expired refuses as above. Not logged: a staged upsert
  // is invisible (H1); the commit logs. Errors as BeginUpsert.
  Status BeginUpsert(std::string_view key, ObjectToken token,
                     const UpsertOptions& options, UpsertStage* stage) {
    bool quota_refused = false;
    Status s = BeginUpsertImpl(key, token, options, stage, &quota_refused);
    CountOp(MetricOp::kBeginUpsert, s.code(), quota_refused);
    return s;
  }

  // Installs the staged upsert of `token`: the old committed charge is
  // released, the pending one committed, size and counted bytes take their
  // staged values, the version moves, and then fn(ObjectAccess&) runs under
  // the same exclusive lock so the host installs the new payload in the
  // same step. Errors, no state change: kNotFound, kFailedPrecondition (no
  // upsert pending; or a quota ledger mismatch), kInvalidArgument,
  // kUnavailable. Same callback rules as WithObjectExclusive. With a durable
  // log, the record is appended before fn runs, so it carries the staged
  // envelope and no payload bytes; use CommitUpsertWithPayload to log them.
  template <typename Fn>
  Status CommitUpsert(std::string_view key, ObjectToken token, Fn&& fn) {
    return Counted(
        MetricOp::kCommitUpsert,
        CommitStagedUpsert(key, token, StageRef{}, LogPayload::kNone, {}, fn));
  }
  Status CommitUpsert(std::string_view key, ObjectToken token) {
    return CommitUpsert(key, token, [](Access&) {});
  }
  // CommitUpsert of the staging `stage` names (D11): kFailedPrecondition
  // if another staging, or none, is pending.
  template <typename Fn>
  Status CommitUpsert(std::string_view key, ObjectToken token,
                      UpsertStage stage, Fn&& fn) {
    return Counted(MetricOp::kCommitUpsert,
                   CommitStagedUpsert(key, token, StageRef{false, &stage},
                                      LogPayload::kNone, {}, fn));
  }
  Status CommitUpsert(std::string_view key, ObjectToken token,
                      UpsertStage stage) {
    return CommitUpsert(key, token, stage, [](Access&) {});
  }

  // CommitUpsert that installs `payload` as the object's payload. With a
  // durable log whose DurablePayloadCodec logs payloads, the record carries
  // the new payload's bytes (encoded here, before any lock), so a replay
  // sees what readers see. The replaced payload is destroyed after the
  // object lock is released. Errors, no state change: as CommitUpsert.
  Status CommitUpsertWithPayload(std::string_view key, ObjectToken token,
                                 Payload payload) {
    return CommitUpsertWithPayloadImpl(key, token, StageRef{},
                                       std::move(payload));
  }
  // CommitUpsertWithPayload of the staging `stage` names (D11), as the
  // CommitUpsert that names one.
  Status CommitUpsertWithPayload(std::string_view key, ObjectToken token,
                                 UpsertStage stage, Payload payload) {
    return CommitUpsertWithPayloadImpl(key, token, StageRef{false, &stage},
                                       std::move(payload));
  }

  // Drops the staged upsert of `token` and refunds its pending charge; the
  // committed state is untouched. Errors as CommitUpsert.
  Status AbortUpsert(std::string_view key, ObjectToken token) {
    return Counted(
        MetricOp::kAbortUpsert,
        AbortStagedUpsert(key, token, std::numeric_limits<std::int64_t>::max(),
                          StageRef{}));
  }
  // AbortUpsert of the staging `stage` names (D11).
  Status AbortUpsert(std::string_view key, ObjectToken token,
                     UpsertStage stage) {
    return Counted(
        MetricOp::kAbortUpsert,
        AbortStagedUpsert(key, token, std::numeric_limits<std::int64_t>::max(),
                          StageRef{false, &stage}));
  }

  // Aborts every pending put and staged upsert older than
  // pending_put_timeout (0: none) on the injected clock. Returns how many it
  // aborted. Census through the route in chunks (D9), each candidate's lock
  // taken briefly and shared; the aborts then run as Abort/AbortUpsert, each
  // re-checking that it is the same instance and still that old. Not for use
  // inside a callback.
  std::size_t ReapPendingPuts() {
    std::int64_t cutoff = 0;
    if (!PendingCutoff(&cutoff) || is_shut_down()) return 0;
    struct Expired {
      std::string key;
      ObjectToken token;
      bool upsert;
    };
    std::vector<Expired> expired;
    route_.VisitHandles(
        options_.visit_chunk == 0 ? 1 : options_.visit_chunk,
        [&](std::span<Owner> owners) {
          for (const Owner& o : owners) {
            const Entry* e = o.get();
            ReaderLock lock(&e->mu_);
            const Lifecycle lc = e->lifecycle_.load(std::memory_order_relaxed);
            if (e->ledger_.pending_since_nanos > cutoff) continue;
            if (lc == Lifecycle::kCreating &&
                e->ledger_.state == directory_internal::Ledger::kPending) {
              expired.push_back({std::string(e->key()), e->token(), false});
            } else if (lc == Lifecycle::kActive && e->ledger_.upsert_pending) {
              expired.push_back({std::string(e->key()), e->token(), true});
            }
          }
        });
    std::size_t reaped = 0;
    for (const Expired& x : expired) {
      const Status s =
          x.upsert ? AbortStagedUpsert(x.key, x.token, cutoff, StageRef{true})
                   : AbortPending(x.key, x.token, cutoff);
      if (s.ok()) ++reaped;
    }
    if (directory_internal::WriteCounters* w = metrics_.Get();
        w != nullptr && reaped != 0) {
      w->reaped.Add(reaped);
    }
    return reaped;
  }

  // ---- lookups: under the object lock, kActive only (D1, D6) ---------------

  // Runs fn(View&) with the object's lock held shared and its lifecycle
  // validated as kActive; grants read_lease_ttl first if configured. Returns
  // kNotFound if the key is absent or not active, kInvalidArgument for a bad
  // key, kUnavailable after shutdown. Enters an epoch guard of the route's
  // domain (no route lock, no owner copy), then takes the object lock inside
  // it; blocks only behind an exclusive holder of this object; does not
  // allocate after the thread's first call. Not callable inside another
  // callback (it would nest object locks); callable from the removal callback
  // and from a VisitHandles visitor.
  template <typename Fn>
  Status WithObject(std::string_view key, Fn&& fn) const {
    return LookupOne<false>(key, fn);
  }
  // As WithObject with the lock held exclusively; fn(Access&). Grants no
  // implicit lease.
  template <typename Fn>
  Status WithObjectExclusive(std::string_view key, Fn&& fn) const {
    return LookupOne<true>(key, fn);
  }

  // Batch lookup. Calls fn(std::size_t index, StatusCode code, View* view)
  // once per key in order; `view` is non-null exactly when code == kOk and
  // must not be kept. Per-key codes: kOk, kNotFound, kInvalidArgument. At most
  // one object lock is held at a time and no lock at all between keys, so
  // duplicate keys and keys of one group cannot self-deadlock. The returned
  // Status is kUnavailable after shutdown, else OK. The whole batch runs
  // inside one epoch guard of the route's domain. Does not allocate after
  // the thread's first call. Same callback rules as
  // WithObject.
  template <typename Fn>
  Status WithObjects(KeySpan keys, Fn&& fn) const {
    return LookupBatch<false>(keys, fn);
  }
  template <typename Fn>
  Status WithObjectsExclusive(KeySpan keys, Fn&& fn) const {
    return LookupBatch<true>(keys, fn);
  }

  // Revalidates a held handle (D2, D5): runs fn under the object lock only if
  // that very instance is still kActive; a recreated key is a different
  // instance and is never touched. No route access; locks the object only;
  // does not allocate. Same callback rules as WithObject.
  template <typename Fn>
  Status WithHandle(const Handle& handle, Fn&& fn) const {
    if (Status s = CheckShutdown(); !s.ok()) return s;
    if (!handle) return InvalidArgumentError();
    return CountGet(RunLocked<false, /*kFromRoute=*/false>(handle.get(), fn));
  }
  template <typename Fn>
  Status WithHandleExclusive(const Handle& handle, Fn&& fn) const {
    if (Status s = CheckShutdown(); !s.ok()) return s;
    if (!handle) return InvalidArgumentError();
    return CountGet(RunLocked<true, /*kFromRoute=*/false>(handle.get(), fn));
  }

  // Resolves `key` and runs fn only if it names the instance `token` (D5);
  // kNotFound otherwise (erased, recreated, other tenant instance). Locks as
  // WithObject; does not allocate. Same callback rules as WithObject.
  template <typename Fn>
  Status WithToken(std::string_view key, ObjectToken token, Fn&& fn) const {
    Status s = LookupToken<false>(key, token, fn);
    CountGet(s.code()).IgnoreError();
    return s;
  }
  template <typename Fn>
  Status WithTokenExclusive(std::string_view key, ObjectToken token,
                            Fn&& fn) const {
    Status s = LookupToken<true>(key, token, fn);
    CountGet(s.code()).IgnoreError();
    return s;
  }

  // A strong handle to the active object (D2); kNotFound if absent or not
  // kActive. An epoch guard of the route's domain and one refcount
  // increment (the owner copy); does not allocate after the thread's first
  // call. Takes no lock at all, so it is safe inside a callback.
  Result<Handle> Pin(std::string_view key) const {
    if (Status s = CheckCall(key); !s.ok()) return s;
    Owner owner = route_.Pin(key);
    if (owner == nullptr || owner->lifecycle_hint() != Lifecycle::kActive) {
      reads_.Add(directory_internal::kPinMiss);
      return NotFoundError();
    }
    reads_.Add(directory_internal::kPinHit);
    return Handle(std::move(owner));
  }

  // Calls fn(std::span<const Handle>) with every active object, in chunks of
  // at most `chunk` (0: options.visit_chunk) handles (D9). Owners are copied
  // a few buckets at a time under a short epoch guard, released before fn
  // runs, so fn may call any directory method. Objects created or erased during
  // the visit may or may not be seen; objects present throughout are seen
  // exactly once. Allocates the chunk buffers.
  template <typename Fn>
  Status VisitHandles(Fn&& fn, std::size_t chunk = 0) const {
    return VisitRouted(fn, chunk, /*with_pending=*/false);
  }
  // As VisitHandles, with the pending puts too (kCreating objects, which no
  // lookup returns; lifecycle_hint() tells them apart): for a caller that
  // aborts or reports them, as TenantRegistry::RemoveAll does.
  template <typename Fn>
  Status VisitHandlesWithPending(Fn&& fn, std::size_t chunk = 0) const {
    return VisitRouted(fn, chunk, /*with_pending=*/true);
  }

  // Seals the directory if it holds no object (a pending put counts): every
  // later create fails with kFailedPrecondition ("directory is sealed").
  // One compare-and-swap on the object count, which a create moves (by
  // compare-and-swap too) before it publishes, so a create either counted
  // first (the seal fails: kFailedPrecondition, "holds N objects") or sees
  // the seal: a sealed directory never gains an object. Lock-free; safe
  // inside any callback. Used by TenantRegistry::RemoveIfEmpty.
  Status SealIfEmpty() {
    std::size_t empty = 0;
    if (objects_.compare_exchange_strong(empty, kSealed,
                                         std::memory_order_relaxed)) {
      return Status::Ok();
    }
    if ((empty & kSealed) != 0) return Status::Ok();  // sealed already
    return FailedPreconditionError("directory holds " + std::to_string(empty) +
                                   " objects");
  }
  // Lifts a seal (creates work again). Lock-free.
  void Unseal() noexcept {
    objects_.fetch_and(~kSealed, std::memory_order_relaxed);
  }
  bool is_sealed() const noexcept {
    return (objects_.load(std::memory_order_relaxed) & kSealed) != 0;
  }

  // The catalog's current group of this name; kNotFound if none. Locks the
  // catalog briefly (a leaf), so it is safe inside any callback.
  Result<GroupHandleType> FindGroup(std::string_view name) const {
    if (Status s = CheckCall(name); !s.ok()) return s;
    MutexLock lock(&catalog_mu_);
    auto it = catalog_.find(name);
    if (it == catalog_.end()) return NotFoundError();
    return GroupHandleType(it->second);
  }

  // ---- erase: matched unlink, removed once, callbacks off-lock (D4, D6, L3)

  // Erases the object routed under `key`: mark kRemoving under the object
  // lock, release it, matched-unlink the route, then (off-lock) run the
  // removal callback. A member leaves its group; the last member tears the
  // group down. Errors, no state change: kNotFound (unknown or already
  // erased), kFailedPrecondition (lease unexpired and !force, P4),
  // kInvalidArgument, kUnavailable, kResourceExhausted (the route's retire
  // budget, taken before any lock, stayed unavailable past the epoch
  // domain's deadline). A route error on the unlink does not undo
  // a committed removal: the unlink is parked and retried by later writes
  // (Diagnostics().pending_unlinks). Locks the stripe, the group (members),
  // the object, a route writer stripe, the catalog (last member). Not for use
  // inside a WithObject callback; safe inside the removal callback and
  // VisitHandles.
  Status Erase(std::string_view key, EraseOptions options = {}) {
    return Counted(MetricOp::kErase, [&]() -> Status {
      if (Status s = CheckCall(key); !s.ok()) return s;
      // Durable log (H1): reserved before any lock.
      LogStep log(options_.durable_log, options_.tenant_instance);
      if (Status s = log.Reserve(key, nullptr); !s.ok()) return s;
      return EraseRouted(key, options, Lifecycle::kActive,
                         std::numeric_limits<std::int64_t>::max(), &log,
                         [](const Entry&) { return true; });
    }());
  }

  // Erases `key` only if it still names the instance (id, entry): a stale id
  // or pointer never touches a recreated entry (D4). `entry` is compared,
  // never dereferenced. OK: this call erased it. Errors, no state change:
  // kNotFound (no match: stale identity, unknown key, or an object already
  // being removed; code-only, and like every lookup it allocates nothing
  // after the thread's first call into the directory, which registers the
  // thread with the route's epoch domain), kFailedPrecondition (lease
  // unexpired and !force, P4), kInvalidArgument (bad key or null entry),
  // kUnavailable (shut down), kResourceExhausted (busy, as Erase). Same
  // locks as Erase.
  Status EraseIfMatch(std::string_view key, ObjectId id, const Entry* entry,
                      EraseOptions options = {}) {
    return Counted(MetricOp::kErase, [&]() -> Status {
      if (Status s = CheckCall(key); !s.ok()) return s;
      if (entry == nullptr) return InvalidArgumentError();
      // Durable log (H1): reserved before any lock.
      LogStep log(options_.durable_log, options_.tenant_instance);
      if (Status s = log.Reserve(key, nullptr); !s.ok()) return s;
      return EraseRouted(key, options, Lifecycle::kActive,
                         std::numeric_limits<std::int64_t>::max(), &log,
                         [&](const Entry& routed) {
                           return &routed == entry && routed.id() == id;
                         });
    }());
  }

  // Erases every member of the named group, all or none. Locks the group, then
  // every member exclusively in ascending key order, checks them all (no
  // unexpired lease unless force, P4), marks them all kRemoving, releases the
  // members, unlinks each route slot, retires the group from the catalog,
  // releases the group, and only then runs the removal callbacks. Errors, no
  // state change: kNotFound (no such group, or already torn down),
  // kFailedPrecondition (group lease unexpired and !force), kInvalidArgument,
  // kUnavailable. Joins racing the teardown fail with kFailedPrecondition.
  Status EraseGroup(std::string_view name, EraseOptions options = {}) {
    return Counted(MetricOp::kEraseGroup, EraseGroupImpl(name, options));
  }

  // ---- batch mutations (D10, docs/directory.md "Batch mutations") ----------
  //
  // Each batch call stands for its single calls issued in index order by
  // one thread: every key gets the Status its single call would have
  // returned at that point, so a key that fails (exists, quota refused,
  // wrong token, leased...) does not fail the others, and a key repeated in
  // one batch meets what its earlier occurrence did (a second pending
  // create of it is kAlreadyExists, a second commit of one token
  // kFailedPrecondition, a second erase kNotFound). A batch is not atomic:
  // other threads see each key's change as soon as it is made, in index
  // order. What is shared is the durable log's cost: one ReserveBatch for
  // the whole batch, one record appended per change (under that object's
  // lock, as the single call appends it), and one Finalize, so one wait for
  // durability (FileDurableLog: one write and one fdatasync) covers every
  // record. If the log cannot make the batch durable (H5), every key whose
  // record was in it returns the log's error: its change is made and
  // visible, as a single call's is, but not acknowledged; keys that failed
  // on their own keep their own error. A failed ReserveBatch fails every
  // key that passed its argument checks, with nothing changed. The result
  // always has one Status per key, in order. Not for use inside a callback.

  // One put of BatchCreatePending.
  struct PendingPut {
    std::string_view key;
    CreateOptions options;
    Payload payload{};
  };

  // CreatePending for each put, in order; each payload is moved from.
  // Result i is CreatePending's for puts[i] (quota charged per put, Q1: a
  // refused put charges nothing and does not stop the others). A pending
  // put writes no log record, so this saves no log work over the loop of
  // CreatePending it stands for; each put takes its own route write
  // (retire budget, stripe). Empty `puts`: an empty result.
  std::vector<Result<Handle>> BatchCreatePending(std::span<PendingPut> puts) {
    std::vector<Result<Handle>> out;
    out.reserve(puts.size());
    for (PendingPut& put : puts) {
      out.push_back(
          CreatePending(put.key, put.options, std::move(put.payload)));
    }
    return out;
  }

  // Commit for each (keys[i], tokens[i]), in order, with one log
  // reservation and one Finalize for the batch. The route is read inside
  // one epoch guard for the whole batch (as WithObjects), each object
  // locked exclusively in turn, never two at once. `options` is empty
  // (every put commits whole) or has one CommitOptions per key (partial
  // settlement, Q4). Per-key errors as Commit. keys, tokens and a
  // non-empty `options` of different lengths: every key is
  // kInvalidArgument, nothing changes.
  std::vector<Status> BatchCommit(KeySpan keys,
                                  std::span<const ObjectToken> tokens,
                                  std::span<const CommitOptions> options = {}) {
    std::vector<Status> out(keys.size());
    if (tokens.size() != keys.size() ||
        (!options.empty() && options.size() != keys.size())) {
      for (Status& s : out) {
        s = InvalidArgumentError("keys, tokens and options differ in count");
      }
      CountBatch(MetricOp::kCommit, out);
      return out;
    }
    std::size_t records = 0;
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      out[i] = CheckCall(keys[i]);
      if (out[i].ok() && tokens[i].tenant != options_.tenant_instance) {
        out[i] = NotFoundError();
      }
      if (out[i].ok()) {
        ++records;
        bytes += DurableRecordBytes(keys[i].size(), 0, 0);
      }
    }
    // Durable log (H1): reserved before any object lock.
    LogStep log(options_.durable_log, options_.tenant_instance);
    if (records != 0) {
      if (Status s = log.ReserveBatch(records, bytes); !s.ok()) {
        FailChecked(out, s);
        CountBatch(MetricOp::kCommit, out);
        return out;
      }
    }
    std::vector<std::size_t> done;
    std::vector<ObjectToken> committed;
    if (log.active()) {
      done.reserve(records);
      committed.reserve(records);
    }
    route_.WithEntries(keys, [&](std::size_t i, Entry* e) {
      if (!out[i].ok()) return;
      if (e == nullptr || e->id() != tokens[i].object) {
        out[i] = NotFoundError();
        return;
      }
      out[i] =
          CommitLocked(e, &log, options.empty() ? CommitOptions{} : options[i]);
      if (out[i].ok() && log.active()) {
        done.push_back(i);
        committed.push_back(tokens[i]);
      }
    });
    if (Status durable = log.FinalizeBatch(committed); !durable.ok()) {
      for (std::size_t i : done) out[i] = durable;  // made, not acknowledged
    }
    CountBatch(MetricOp::kCommit, out);
    return out;
  }

  // Erase for each key, in order (`options` for every key), with one log
  // reservation and one Finalize for the batch; the removal callbacks run
  // after that Finalize, off-lock, in index order. Each key is erased under
  // its lifecycle stripe as Erase does, one key at a time. Unlike Erase, the
  // unlinks take no retire budget in advance (as EraseGroup): an unlink the
  // route refuses for lack of room is parked and retried by later writes
  // (Diagnostics().pending_unlinks), so no key waits for back-pressure
  // while the batch's records are open. Per-key errors as Erase, with
  // kResourceExhausted only when the durable log's append of that key's
  // record runs out of memory (nothing of that key changed).
  std::vector<Status> BatchErase(KeySpan keys, EraseOptions options = {}) {
    std::vector<Status> out(keys.size());
    std::size_t records = 0;
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      out[i] = CheckCall(keys[i]);
      if (out[i].ok()) {
        ++records;
        bytes += DurableRecordBytes(keys[i].size(), 0, 0);
      }
    }
    LogStep log(options_.durable_log, options_.tenant_instance);
    if (records != 0) {
      if (Status s = log.ReserveBatch(records, bytes); !s.ok()) {
        FailChecked(out, s);
        CountBatch(MetricOp::kErase, out);
        return out;
      }
    }
    RetryPendingUnlinks();
    std::vector<Removal> removals;
    std::vector<std::size_t> done;
    std::vector<ObjectToken> tokens;
    // Every owner this batch pinned, released after the batch's record is
    // finalized and its callbacks ran: a release may free an entry (host
    // destructors), which must not run while the batch's records are open.
    std::vector<Owner> held;
    // Room first: once a key's erase is made (its record appended, its
    // charge released) nothing may run out of memory before the batch is
    // finalized.
    removals.reserve(records);
    done.reserve(records);
    tokens.reserve(records);
    held.reserve(records);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!out[i].ok()) continue;
      WriteBudget none;
      Removal removal;
      StripeLock stripe(&StripeFor(keys[i]), &stripe_waits_);
      Owner owner = route_.Pin(keys[i]);
      if (owner == nullptr) {
        out[i] = NotFoundError();
        continue;
      }
      out[i] =
          EraseInstance(owner, options, &removal, &none, Lifecycle::kActive,
                        std::numeric_limits<std::int64_t>::max(), &log);
      if (out[i].ok()) {
        tokens.push_back(removal.info.token);
        removals.push_back(std::move(removal));
        done.push_back(i);
      }
      held.push_back(std::move(owner));
    }
    // Finalized before the reclaim (payload destructors) and the callbacks.
    if (Status durable = log.FinalizeBatch(tokens); !durable.ok()) {
      for (std::size_t i : done) out[i] = durable;  // made, not acknowledged
    }
    route_.ReclaimIfDue();
    for (Removal& r : removals) RunRemovedCallback(r);
    CountBatch(MetricOp::kErase, out);
    return out;
  }

  // ---- lifecycle and diagnostics --------------------------------------------

  // Every later lookup or write fails with kUnavailable; a second Shutdown()
  // returns OK, as the epoch domain's does. Calls already running finish.
  // Objects stay allocated until the directory is destroyed; handles stay
  // valid after that. No lock.
  Status Shutdown() {
    shut_down_.store(true, std::memory_order_release);
    return Status::Ok();
  }
  bool is_shut_down() const noexcept {
    return shut_down_.load(std::memory_order_acquire);
  }

  // Counts and route occupancy. Cold: walks every route bucket, one short
  // epoch guard each.
  // Allowed after shutdown.
  DirectoryDiagnostics Diagnostics() const {
    DirectoryDiagnostics d;
    d.objects = objects_.load(std::memory_order_relaxed) & ~kSealed;
    d.groups = groups_.load(std::memory_order_relaxed);
    d.route = route_.Diagnostics();
    d.lifecycle_stripe_waits = stripe_waits_.load(std::memory_order_relaxed);
    d.pending_unlinks = pending_count_.load(std::memory_order_relaxed);
    return d;
  }

  // Reports every cairn_directory_* metric (docs/metrics.md, "Directory")
  // to `visitor`: the object, group and pending gauges, the lookups'
  // hit/miss counters (summed over their thread stripes), the write
  // operations by op and result, evictions and reaps. Every op's
  // result="ok" sample is always reported, another result once it has
  // happened. No lock and no route walk (unlike Diagnostics()): relaxed
  // loads only, so counts racing with the visit may or may not be included.
  // Allocates nothing itself (the visitor may). Safe from any thread, after
  // shutdown, and inside any callback; holds no directory lock while the
  // visitor runs, so the visitor may call this directory.
  void VisitMetrics(MetricVisitor& visitor) const {
    directory_internal::DirectoryMetricValues v;
    v.objects = objects_.load(std::memory_order_relaxed) & ~kSealed;
    v.groups = groups_.load(std::memory_order_relaxed);
    v.pending_unlinks = pending_count_.load(std::memory_order_relaxed);
    v.lifecycle_stripe_waits = stripe_waits_.load(std::memory_order_relaxed);
    v.pending_charge_bytes = pending_charge_.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < v.reads.size(); ++i) {
      v.reads[i] = reads_.Value(i);
    }
    v.writes = metrics_.Peek();
    directory_internal::VisitDirectoryMetrics(v, visitor);
  }
  // Counted bytes charged as pending (pending puts and staged upserts) and
  // not yet committed or refunded: the cairn_directory_pending_charge_bytes
  // gauge. Lock-free.
  std::uint64_t pending_charge_bytes() const noexcept {
    return pending_charge_.load(std::memory_order_relaxed);
  }
  // Creates, pending creates and upserts the quota refused, summed over the
  // ops (cairn_directory_operations_total{result="quota"}). Lock-free.
  std::uint64_t quota_refusals() const noexcept {
    const directory_internal::WriteCounters* w = metrics_.Peek();
    if (w == nullptr) return 0;
    std::uint64_t n = 0;
    for (std::size_t op = 0; op < directory_internal::kMetricOps; ++op) {
      n += w->OpValue(op, static_cast<std::size_t>(
                              directory_internal::MetricOutcome::kQuota));
    }
    return n;
  }
  // Routed objects, pending puts included; a create is counted from just
  // before it publishes (SealIfEmpty), so a create that then fails is
  // counted for that moment. Lock-free.
  std::size_t object_count() const noexcept {
    return objects_.load(std::memory_order_relaxed) & ~kSealed;
  }
  std::size_t group_count() const noexcept {
    return groups_.load(std::memory_order_relaxed);
  }
  TenantInstanceId tenant_instance() const noexcept {
    return options_.tenant_instance;
  }
  // The injected clock (P5).
  const Clock* clock() const noexcept { return clock_; }
  // The account this directory charges; null without quota.
  QuotaAccount* quota() const noexcept { return options_.quota; }

 private:
  friend class directory_internal::GroupDirectoryTestPeer;
  // The eviction and snapshot hooks (cairn/directory/directory_hooks.h).
  friend class DirectoryHooks;

  using LogStep = directory_internal::LogStep<Payload>;
  using LogPayload = directory_internal::LogPayload;

  // Which staged upsert a CommitUpsert / AbortUpsert settles (D11, see
  // Settles).
  struct StageRef {
    bool any = false;
    const UpsertStage* named = nullptr;
  };

  struct Removal {
    Owner owner;  // keeps the entry (and its key) alive for the callback
    RemovedObject info;
  };

  // objects_'s top bit: the directory is sealed (SealIfEmpty).
  static constexpr std::size_t kSealed = ~(~std::size_t{0} >> 1);

  // Counts a new object before it is published, unless the directory is
  // sealed: a compare-and-swap, so SealIfEmpty and creates are ordered.
  bool CountNewObject() noexcept {
    std::size_t n = objects_.load(std::memory_order_relaxed);
    do {
      if ((n & kSealed) != 0) return false;
    } while (
        !objects_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
    return true;
  }

  // VisitHandles and VisitHandlesWithPending.
  template <typename Fn>
  Status VisitRouted(Fn& fn, std::size_t chunk, bool with_pending) const {
    if (Status s = CheckShutdown(); !s.ok()) return s;
    if (chunk == 0)
      chunk = options_.visit_chunk == 0 ? 1 : options_.visit_chunk;
    std::vector<Handle> handles;
    handles.reserve(chunk);
    route_.VisitHandles(chunk, [&](std::span<Owner> owners) {
      handles.clear();
      for (Owner& owner : owners) {
        const Lifecycle lc = owner->lifecycle_hint();
        if (lc == Lifecycle::kActive ||
            (with_pending && lc == Lifecycle::kCreating)) {
          handles.emplace_back(std::move(owner));
        }
      }
      if (!handles.empty()) {
        fn(std::span<const Handle>(handles.data(), handles.size()));
      }
    });
    return Status::Ok();
  }

  // Why an object may not go by an erase with only_if_idle ("is
  // hard-pinned", ...), or null. Caller holds e's lock exclusively.
  const char* BusyReason(const Entry* e) const {
    e->mu_.AssertHeld();
    if (e->lifecycle_.load(std::memory_order_relaxed) == Lifecycle::kCreating) {
      return "is a pending put";
    }
    if (e->hard_pinned()) return "is hard-pinned";
    if (e->soft_pin_deadline_ > clock_->NowNanos()) return "is soft-pinned";
    if (e->tasks_ != 0) return "has a task in flight";
    if (e->ledger_.upsert_pending) return "has a staged upsert";
    return nullptr;
  }

  struct alignas(64) Stripe {
    Mutex mu;
  };

  // Lifecycle stripe lock; counts a wait when the stripe was taken.
  class CAIRN_SCOPED_CAPABILITY StripeLock {
   public:
    StripeLock(Mutex* mu, std::atomic<std::uint64_t>* waits) CAIRN_ACQUIRE(mu)
        : mu_(mu) {
      if (!mu->TryLock()) {
        waits->fetch_add(1, std::memory_order_relaxed);
        mu->Lock();
      }
    }
    ~StripeLock() CAIRN_RELEASE() { mu_->Unlock(); }
    StripeLock(const StripeLock&) = delete;
    StripeLock& operator=(const StripeLock&) = delete;

   private:
    Mutex* const mu_;
  };

  // The key's lifecycle stripe. The stripe array is made by the first
  // write that asks (base_internal::LazyArray: one acquire load after
  // that); out of memory there throws std::bad_alloc, as a create's other
  // allocations do.
  Mutex& StripeFor(std::string_view key) const {
    Stripe* stripes = stripes_.Get();
    if (stripes == nullptr) [[unlikely]]
      throw std::bad_alloc();
    const std::uint64_t h = base_internal::MixHash(
        base_internal::RouteHash(key) ^ 0x9e3779b97f4a7c15ULL);
    return stripes[h % stripe_count_].mu;
  }

  // Read-path checks: code-only statuses, which never allocate.
  Status CheckShutdown() const noexcept {
    if (shut_down_.load(std::memory_order_acquire)) return UnavailableError();
    return Status::Ok();
  }
  StatusCode KeyCode(std::string_view key) const noexcept {
    if (key.empty() || key.size() > options_.max_key_bytes) {
      return StatusCode::kInvalidArgument;
    }
    return StatusCode::kOk;
  }
  Status CheckCall(std::string_view key) const noexcept {
    if (Status s = CheckShutdown(); !s.ok()) return s;
    return Status(KeyCode(key));
  }

  ObjectId NextObjectId() noexcept {
    return next_object_id_.fetch_add(1, std::memory_order_relaxed);
  }
  // A new entry, not yet routed nor kActive (nothing reads its version
  // until it is): the version a restored object had.
  static void SetRestoredVersion(
      Entry* e, const DirectoryHooks::RestoredIdentity& identity) noexcept {
    e->version_.store(identity.version, std::memory_order_relaxed);
  }
  // DirectoryHooks::NextObjectIdPeek / ReserveObjectIds.
  ObjectId PeekNextObjectId() const noexcept {
    return next_object_id_.load(std::memory_order_relaxed);
  }
  void ReserveObjectIds(ObjectId id) noexcept {
    if (id == std::numeric_limits<ObjectId>::max()) [[unlikely]]
      id = std::numeric_limits<ObjectId>::max() - 1;  // keep the counter
    ObjectId next = next_object_id_.load(std::memory_order_relaxed);
    while (next <= id && !next_object_id_.compare_exchange_weak(
                             next, id + 1, std::memory_order_relaxed,
                             std::memory_order_relaxed)) {
    }
  }

  // The group transaction locks a run-time set of members in a loop and
  // unlocks them in another, which the analysis cannot pair.
  static void LockObject(Entry* e) CAIRN_NO_THREAD_SAFETY_ANALYSIS {
    e->mu_.Lock();
  }
  static void UnlockObject(Entry* e) CAIRN_NO_THREAD_SAFETY_ANALYSIS {
    e->mu_.Unlock();
  }
  // The group transaction's member locks: taken in the given (ascending
  // key, L2) order, released in reverse by Unlock or, if an exception (out
  // of memory) leaves the scope first, by the destructor.
  class MemberLocks {
   public:
    explicit MemberLocks(const std::vector<Entry*>& members)
        : members_(members) {
      for (Entry* e : members_) LockObject(e);
    }
    MemberLocks(const MemberLocks&) = delete;
    MemberLocks& operator=(const MemberLocks&) = delete;
    ~MemberLocks() { Unlock(); }
    void Unlock() {
      if (!held_) return;
      held_ = false;
      for (auto it = members_.rbegin(); it != members_.rend(); ++it) {
        UnlockObject(*it);
      }
    }

   private:
    const std::vector<Entry*>& members_;
    bool held_ = true;
  };
  // Caller holds e's lock exclusively (the group transaction's loop).
  static void MarkRemoving(Entry* e) {
    e->mu_.AssertHeld();
    e->SetLifecycle(Lifecycle::kRemoving);
  }

  // Caller holds e's lock (exclusively: erase and the group transaction).
  RemovedObject Describe(const Entry* e) const {
    e->mu_.AssertReaderHeld();
    RemovedObject info;
    info.token = e->token();
    info.key = e->key();
    info.group = e->group() == nullptr ? kNoGroup : e->group()->id();
    info.size_bytes = e->size_bytes_;
    info.counted_bytes = e->counted_bytes();
    return info;
  }
  Removal MakeRemoval(Owner owner) const {
    Removal r;
    r.info = Describe(owner.get());
    r.owner = std::move(owner);
    return r;
  }

  // What removals committed under object locks leave for after them
  // (EraseGroup and eviction): the removed callback's descriptions (kept
  // only when a callback is installed), the durable log's tokens (only when
  // a log is active) and the totals eviction counts. The caller keeps the
  // entries alive (its owner of the group or of the object), so no owner is
  // taken per member. ReserveRemovals runs before the member locks, so that
  // AddRemoval never allocates once the change is made.
  struct MemberRemovals {
    std::vector<RemovedObject> described;
    std::vector<ObjectToken> tokens;
    std::size_t count = 0;
    std::uint64_t size_bytes = 0;
    std::uint64_t counted_bytes = 0;
  };
  void ReserveRemovals(MemberRemovals* r, std::size_t n,
                       const LogStep& log) const {
    if (options_.on_removed) r->described.reserve(n);
    if (log.active()) r->tokens.reserve(n);
  }
  // Caller holds e's lock exclusively.
  void AddRemoval(MemberRemovals* r, const Entry* e, const LogStep& log) const {
    e->mu_.AssertHeld();
    if (options_.on_removed) r->described.push_back(Describe(e));
    if (log.active()) r->tokens.push_back(e->token());
    ++r->count;
    r->size_bytes += e->size_bytes_;
    r->counted_bytes += e->counted_bytes();
  }
  // With no lock held (host code).
  void RunRemovedCallbacks(const MemberRemovals& r) const {
    for (const RemovedObject& info : r.described) options_.on_removed(info);
  }

  // The lock-and-validate core of every lookup (D1, D6): kOk exactly when
  // fn ran. `kFromRoute`: `e` came from this directory's route, so it is
  // one of this directory's entries (only Create publishes, with this
  // tenant instance) and the tenant check is skipped; a handle's entry
  // (WithHandle) may come from another directory and is checked.
  template <bool kExclusive, bool kFromRoute = true, typename Fn>
  StatusCode RunLocked(Entry* e, Fn& fn) const {
    if constexpr (kExclusive) {
      WriterLock lock(&e->mu_);
      if (!e->active_locked() ||
          (!kFromRoute && e->tenant_ != options_.tenant_instance)) {
        return StatusCode::kNotFound;
      }
      Access access(*e, clock_);
      fn(access);
    } else {
      ReaderLock lock(&e->mu_);
      if (!e->active_locked() ||
          (!kFromRoute && e->tenant_ != options_.tenant_instance)) {
        return StatusCode::kNotFound;
      }
      View view(*e, clock_);
      if (options_.read_lease_ttl.count() > 0) [[unlikely]] {
        view.GrantLease(options_.read_lease_ttl);
      }
      fn(view);
    }
    return StatusCode::kOk;
  }

  // Point lookups. The route's read is inlined into the lookup
  // (docs/directory.md, "Cost of a lookup").
  template <bool kExclusive, typename Fn>
  [[gnu::always_inline]] Status LookupOne(std::string_view key, Fn& fn) const {
    if (Status s = CheckCall(key); !s.ok()) return s;
    StatusCode code = StatusCode::kNotFound;
    route_.WithEntry(key, [&](Entry* e) {
      if (e != nullptr) code = RunLocked<kExclusive>(e, fn);
    });
    // kOk or kNotFound: one add on this thread's stripe.
    reads_.Add(code == StatusCode::kOk ? directory_internal::kGetHit
                                       : directory_internal::kGetMiss);
    return Status(code);
  }

  template <bool kExclusive, typename Fn>
  Status LookupToken(std::string_view key, ObjectToken token, Fn& fn) const {
    if (Status s = CheckCall(key); !s.ok()) return s;
    if (token.tenant != options_.tenant_instance) return NotFoundError();
    StatusCode code = StatusCode::kNotFound;
    route_.WithEntry(key, [&](Entry* e) {
      if (e != nullptr && e->id() == token.object) {
        code = RunLocked<kExclusive>(e, fn);
      }
    });
    return Status(code);
  }

  // A routed key passed Create's key check (options_ never change), so the
  // per-key check runs on a miss only: it decides between kNotFound and
  // kInvalidArgument.
  template <bool kExclusive, typename Fn>
  Status LookupBatch(KeySpan keys, Fn& fn) const {
    if (Status s = CheckShutdown(); !s.ok()) return s;
    using Arg = std::conditional_t<kExclusive, Access, View>;
    // Counted once per batch, not per key: the batch and its hit and miss
    // totals, on this thread's stripe. Only the miss path counts keys; the
    // hits are the rest.
    std::size_t misses = 0;
    std::size_t invalid = 0;
    route_.WithEntries(keys, [&](std::size_t i, Entry* e) {
      StatusCode code = StatusCode::kNotFound;
      if (e != nullptr) [[likely]] {
        auto run = [&](Arg& arg) { fn(i, StatusCode::kOk, &arg); };
        if (RunLocked<kExclusive>(e, run) == StatusCode::kOk) return;
      } else {
        code = KeyCode(keys[i]);
        if (code == StatusCode::kOk) code = StatusCode::kNotFound;
      }
      ++(code == StatusCode::kNotFound ? misses : invalid);
      fn(i, code, static_cast<Arg*>(nullptr));
    });
    reads_.Add(directory_internal::kBatches);
    reads_.Add(directory_internal::kBatchHits, keys.size() - misses - invalid);
    if (misses != 0) reads_.Add(directory_internal::kBatchMisses, misses);
    return Status::Ok();
  }

  std::shared_ptr<Group> FindOrMakeGroup(std::string_view name) {
    MutexLock lock(&catalog_mu_);
    auto it = catalog_.find(name);
    if (it != catalog_.end()) return it->second;
    auto group = std::make_shared<Group>(
        next_group_id_.fetch_add(1, std::memory_order_relaxed),
        std::string(name));
    catalog_.emplace(std::string(name), group);
    groups_.fetch_add(1, std::memory_order_relaxed);
    return group;
  }

  // Removes `group` from the catalog if the catalog still names it. The
  // catalog is a leaf, so this may run under the group lock.
  void RetireFromCatalog(const Group* group) {
    MutexLock lock(&catalog_mu_);
    auto it = catalog_.find(group->name());
    if (it != catalog_.end() && it->second.get() == group) catalog_.erase(it);
  }

  // Under the instance's exclusive lock: checks it may be erased, logs the
  // removal, releases its quota ledger and marks it kRemoving. An error
  // changes nothing. The caller unlinks it after the lock is released (L3).
  Status MarkErased(const Owner& owner, const EraseOptions& options,
                    Removal* removal, Lifecycle expect,
                    std::int64_t pending_cutoff, LogStep* log) {
    Entry* e = owner.get();
    WriterLock lock(&e->mu_);
    if (Status s = CheckErasable(e, options, expect, pending_cutoff); !s.ok()) {
      return s;
    }
    if (Status s = RefundableOrMismatch(ChargedBytes(e)); !s.ok()) return s;
    if (Status s = log->AppendRemoval(DurableOp::kErase, e); !s.ok()) {
      return s;
    }
    if (Status s = ReleaseLedger(e); !s.ok()) return s;
    *removal = MakeRemoval(owner);
    e->SetLifecycle(Lifecycle::kRemoving);
    return Status::Ok();
  }

  // Erase protocol for one routed instance. Caller holds the key's stripe.
  // `expect` is the lifecycle the instance must be in: kActive for an erase,
  // kCreating for the abort of a pending put.
  Status EraseInstance(const Owner& owner, const EraseOptions& options,
                       Removal* removal, WriteBudget* budget, Lifecycle expect,
                       std::int64_t pending_cutoff, LogStep* log) {
    Entry* e = owner.get();
    Group* group = e->group();
    if (group == nullptr) {
      if (Status s =
              MarkErased(owner, options, removal, expect, pending_cutoff, log);
          !s.ok()) {
        return s;
      }
      // Object lock released before the route changes (L3).
      Unlink(owner, budget);
      objects_.fetch_sub(1, std::memory_order_relaxed);
      return Status::Ok();
    }
    bool group_gone = false;
    {
      MutexLock group_lock(&group->mu_);
      if (Status s =
              MarkErased(owner, options, removal, expect, pending_cutoff, log);
          !s.ok()) {
        return s;
      }
      group->RemoveMember(e);
      if (group->live_.empty()) {
        group->SetLifecycle(Lifecycle::kRemoving);
        RetireFromCatalog(group);
        group_gone = true;
      }
      Unlink(owner, budget);
    }
    objects_.fetch_sub(1, std::memory_order_relaxed);
    if (group_gone) groups_.fetch_sub(1, std::memory_order_relaxed);
    return Status::Ok();
  }

  // Caller holds e's lock exclusively.
  Status CheckErasable(const Entry* e, const EraseOptions& options,
                       Lifecycle expect, std::int64_t pending_cutoff) const {
    e->mu_.AssertHeld();
    if (e->lifecycle_.load(std::memory_order_relaxed) != expect) {
      if (expect == Lifecycle::kActive) return NotFoundError();
      return FailedPreconditionError("object is not kCreating");
    }
    if (expect == Lifecycle::kCreating) {
      // A reaper's abort: only if the put is still as old as it saw.
      if (e->ledger_.pending_since_nanos > pending_cutoff) {
        return FailedPreconditionError("pending put is younger than cutoff");
      }
      return Status::Ok();
    }
    if (!options.force) {
      if (LeaseHeld(e->group() == nullptr ? e->lease_deadline_
                                          : e->group()->lease_deadline_)) {
        return FailedPreconditionError("lease has not expired");
      }
      if (options.only_if_idle) {
        if (const char* why = BusyReason(e); why != nullptr) {
          return FailedPreconditionError(std::string("object ") + why);
        }
      }
    }
    return Status::Ok();
  }

  // True while the lease `deadline` holds. A deadline of 0 is no lease (no
  // TTL was given), so the clock is read only for a set one; the answer is
  // the same as comparing with the clock, which is positive (Clock).
  bool LeaseHeld(const std::atomic<std::int64_t>& deadline) const {
    const std::int64_t at = deadline.load(std::memory_order_relaxed);
    return at != 0 && at > clock_->NowNanos();
  }

  // ---- eviction: skip changed, busy, pinned, leased (V2, V4, P3, P4) ----

  // Caller holds e's lock exclusively.
  bool Evictable(const Entry* e, std::int64_t now,
                 bool allow_soft_pinned) const {
    e->mu_.AssertHeld();
    if (e->lifecycle_.load(std::memory_order_relaxed) != Lifecycle::kActive ||
        e->hard_pinned() || e->tasks_ != 0) {
      return false;
    }
    const std::int64_t lease =
        e->group() == nullptr
            ? e->lease_deadline_.load(std::memory_order_relaxed)
            : e->group()->lease_deadline_.load(std::memory_order_relaxed);
    if (lease > now) return false;
    return allow_soft_pinned || e->soft_pin_deadline_ <= now;
  }
  // Identity: the key still routes to this very entry.
  bool StillRouted(const Entry* e) const {
    bool same = false;
    route_.WithEntry(e->key(), [&](Entry* routed) { same = routed == e; });
    return same;
  }
  // Caller holds e's lock exclusively and has marked it (or is marking it)
  // removed: nothing can reach the payload any more.
  // `key` is e's key, copied before the change (a long key allocates).
  EvictedObject<Payload> MoveOut(Entry* e, std::string key) {
    e->mu_.AssertHeld();
    EvictedObject<Payload> x;
    x.token = e->token();
    x.key = std::move(key);
    x.group = e->group() == nullptr ? kNoGroup : e->group()->id();
    x.size_bytes = e->size_bytes_;
    x.counted_bytes = e->counted_bytes();
    x.payload = std::move(e->payload_);
    return x;
  }

  // ---- create ----

  // DirectoryHooks::CreateRestored: the create path with a given identity.
  Result<Handle> CreateRestored(std::string_view key,
                                DirectoryHooks::RestoredIdentity identity,
                                const CreateOptions& options, Payload payload) {
    if (identity.id == 0 ||
        identity.id == std::numeric_limits<ObjectId>::max() ||
        identity.version == 0) {
      return InvalidArgumentError("restored object id or version out of range");
    }
    ReserveObjectIds(identity.id);
    return CreateImpl(key, options, std::move(payload), /*pending=*/false,
                      &identity);
  }

  // What a create releases, destroyed by CreateImpl after the stripe, the
  // group lock and the log record are released and resolved (L3): `routed`,
  // an earlier removed instance whose unlink the create finished (its
  // release may free an entry), and an entry that failed to publish (a
  // singleton's last owner, or a member's storage).
  struct CreateLeftovers {
    Owner routed;
    Owner unpublished_owner;
    std::unique_ptr<Entry> unpublished;
    // An expired pending put CreatePending took over (D11): its removal
    // callback runs after the create's own work.
    Removal taken_over;
  };

  // `restored` (DirectoryHooks::CreateRestored only; null on every host
  // create): the id and version the object gets instead of NextObjectId()
  // and 1, no durable-log record, and a forced charge.
  Result<Handle> CreateImpl(
      std::string_view key, const CreateOptions& options, Payload payload,
      bool pending, const DirectoryHooks::RestoredIdentity* restored = nullptr,
      bool* quota_refused = nullptr) {
    if (Status s = CheckCall(key); !s.ok()) return s;
    if (!options.group.empty() &&
        options.group.size() > options_.max_key_bytes) {
      return InvalidArgumentError("group name longer than max_key_bytes");
    }
    const std::int64_t now = clock_->NowNanos();
    directory_internal::EntryInit init;
    init.tenant = options_.tenant_instance;
    init.key = std::string(key);
    init.size_bytes = options.size_bytes;
    init.counted_bytes = options.counted_bytes;
    init.retained_bytes = options.retained_bytes;
    init.lease_deadline_nanos =
        options.lease_ttl.count() > 0 ? now + options.lease_ttl.count() : 0;
    init.soft_pin_deadline_nanos = options.soft_pin_ttl.count() > 0
                                       ? now + options.soft_pin_ttl.count()
                                       : 0;
    init.hard_pinned = options.hard_pin;
    init.ledger = pending ? directory_internal::Ledger::kPending
                          : directory_internal::Ledger::kCommitted;
    init.pending_since_nanos = now;

    // Declared before the log step, so that an earlier instance or an
    // unpublished entry the create releases is destroyed (its payload
    // destructor is host code, which may mutate a directory sharing the
    // log) only after the record is finalized or cancelled.
    CreateLeftovers leftovers;
    // Durable log (H1): reserved before the charge and any lock, the payload
    // encoded here (off-lock); a pending put is invisible and logs at Commit
    // instead.
    LogStep log(options_.durable_log,
                options_.tenant_instance);  // cancels on every failure return,
                                            // after the locks
    std::string payload_bytes;
    if (!pending && options_.durable_log != nullptr && restored == nullptr) {
      if constexpr (DurablePayloadCodec<Payload>::kLogsPayload) {
        DurablePayloadCodec<Payload>::Encode(payload, &payload_bytes);
      }
      if (Status s = log.ReserveBytes(DurableRecordBytes(
              key.size(), options.group.size(), payload_bytes.size()));
          !s.ok()) {
        return s;
      }
    }
    // Quota (Q1, Q3): charged first, lock-free, and refunded if the create
    // fails. A restored object was admitted by the primary: forced.
    Status charged = restored == nullptr
                         ? ChargeQuota(options.counted_bytes)
                         : ForceChargeQuota(options.counted_bytes);
    // An expired pending put holding the key may hold the room this put
    // needs (D11): aborted first, then one more try.
    if (pending && charged.code() == StatusCode::kResourceExhausted &&
        AbortExpiredPut(key)) {
      charged = ChargeQuota(options.counted_bytes);
    }
    if (Status s = std::move(charged); !s.ok()) {
      if (quota_refused != nullptr && restored == nullptr) {
        *quota_refused = true;
      }
      return s;
    }
    RetryPendingUnlinks();
    // Retire budget first, with no lock held: waiting for it may run
    // deleters (host destructors), which must never run under our locks.
    Result<WriteBudget> budget = route_.PrepareWrite(key);
    if (!budget.ok()) {
      RefundQuota(options.counted_bytes).IgnoreError();
      return std::move(budget).status();
    }
    // A pending put's charge is counted before it can be published, so a
    // racing Commit or Abort never subtracts it first.
    if (pending) AddPendingCharge(options.counted_bytes);
    Result<Handle> made = CreateWithBudget(
        key, options, std::move(init), std::move(payload), &budget.value(),
        pending, &log, payload_bytes, restored, &leftovers);
    if (!made.ok()) {
      RefundQuota(options.counted_bytes).IgnoreError();
      if (pending) SubPendingCharge(options.counted_bytes);
    }
    // Finalized (a failure: cancelled) before the reclaim runs payload
    // destructors (docs/concurrency.md, "Durable log").
    Status durable;
    if (made.ok()) durable = log.Finalize(made.value().token());
    log.Cancel();
    route_.ReclaimIfDue();
    if (leftovers.taken_over.owner != nullptr) {
      RunRemovedCallback(leftovers.taken_over);
    }
    if (!durable.ok()) return durable;  // made, not acknowledged (H5)
    return made;
  }

  Result<Handle> CreateWithBudget(
      std::string_view key, const CreateOptions& options,
      directory_internal::EntryInit init, Payload payload, WriteBudget* budget,
      bool pending, LogStep* log, std::string_view payload_bytes,
      const DirectoryHooks::RestoredIdentity* restored, CreateLeftovers* left) {
    Owner& routed = left->routed;
    Owner& unpublished_owner = left->unpublished_owner;
    std::unique_ptr<Entry>& unpublished = left->unpublished;
    StripeLock stripe(&StripeFor(key), &stripe_waits_);
    if (routed = route_.Pin(key); routed != nullptr) {
      if (pending && restored == nullptr &&
          routed->lifecycle_hint() == Lifecycle::kCreating) {
        // A pending put of the key: taken over if expired (D11).
        if (Status s = TakeOverExpiredPut(routed, budget, &left->taken_over);
            !s.ok()) {
          return s;
        }
      } else if (routed->lifecycle_hint() != Lifecycle::kRemoving) {
        return AlreadyExistsError("key is already routed");
      }
      // A removed instance whose unlink is still pending or in flight
      // (EraseGroup does not hold key stripes; a takeover whose unlink the
      // route refused): finish it for the remover. kNotFound: another
      // writer (the takeover, usually) unlinked it meanwhile, as good.
      Status unlinked =
          route_.EraseIfMatch(key, routed->id(), routed.get(), budget);
      if (!unlinked.ok() && unlinked.code() != StatusCode::kNotFound) {
        return unlinked;
      }
    }
    // Counted before it is published, so a seal never misses it
    // (SealIfEmpty); every way out but a publication gives the count back,
    // a thrown std::bad_alloc too.
    if (!CountNewObject()) {
      return FailedPreconditionError(
          "directory is sealed: its tenant was removed");
    }
    struct Uncount {
      std::atomic<std::size_t>* objects;
      ~Uncount() {
        if (objects != nullptr) {
          objects->fetch_sub(1, std::memory_order_relaxed);
        }
      }
    } uncount{&objects_};
    if (options.group.empty()) {
      init.id = restored == nullptr ? NextObjectId() : restored->id;
      Owner owner =
          std::make_shared<Entry>(std::move(init), nullptr, std::move(payload));
      if (restored != nullptr) SetRestoredVersion(owner.get(), *restored);
      // Durable log (H1): the record is appended under the new entry's lock
      // before the entry is routed; a failed append publishes nothing.
      Status s = pending ? Status::Ok()
                         : ActivateLogged(owner.get(), log, payload_bytes);
      // The stripe serialises creates of this key, so only a route error
      // (back-pressure, shutdown) can refuse the slot; then nothing was
      // published.
      if (s.ok()) s = route_.Publish(key, owner, budget);
      if (!s.ok()) {
        unpublished_owner = std::move(owner);  // released after the stripe
        return s;
      }
      uncount.objects = nullptr;  // published: counted for good
      return Handle(std::move(owner));
    }
    // An emptied group leaves the catalog in the same group-lock section
    // that marks it removing, so a retry finds a fresh group or makes one.
    for (;;) {
      std::shared_ptr<Group> group = FindOrMakeGroup(options.group);
      MutexLock group_lock(&group->mu_);
      if (!group->active_locked()) {
        if (group->explicit_teardown_) {
          return FailedPreconditionError("group is being torn down");
        }
        continue;
      }
      init.id = restored == nullptr ? NextObjectId() : restored->id;
      const std::int64_t lease = init.lease_deadline_nanos;
      init.lease_deadline_nanos = 0;  // a member's lease is the group's
      Entry* entry = group->AddMember(std::move(init), std::move(payload));
      if (restored != nullptr) SetRestoredVersion(entry, *restored);
      Owner owner(group, entry);  // aliasing: keeps the group alive
      Status s =
          pending ? Status::Ok() : ActivateLogged(entry, log, payload_bytes);
      // The group and its lease are wired before the member is routed (D8),
      // but only after its record is appended (H1), so a refused append
      // leaves the group's lease as it was.
      if (s.ok() && lease != 0) {
        directory_internal::AtomicMax(group->lease_deadline_, lease);
      }
      if (s.ok()) s = route_.Publish(key, owner, budget);
      if (!s.ok()) {
        // Never routed, so nobody else saw it: drop it again. A group this
        // create made is torn down with it. A lease it granted the group
        // stays: a lease deadline never moves earlier (P1), and other
        // members' readers may already have observed it.
        owner.reset();
        group->RemoveMember(entry);
        unpublished = std::move(group->entries_.back());
        group->entries_.pop_back();
        if (group->live_.empty()) {
          group->SetLifecycle(Lifecycle::kRemoving);
          RetireFromCatalog(group.get());
          groups_.fetch_sub(1, std::memory_order_relaxed);
        }
        return s;
      }
      uncount.objects = nullptr;  // published: counted for good
      return Handle(std::move(owner));
    }
  }

  // ---- eviction and snapshot hooks (DirectoryHooks) ----

  // Census: fn(const Handle&, const ObjectMetadata&) for every active
  // object, the metadata copied under the object's shared lock without
  // granting any lease (a census is not a read), fn called with no lock or
  // guard held. Chunks as VisitHandles (D9). kUnavailable after shutdown.
  template <typename Fn>
  Status Census(Fn&& fn, std::size_t chunk = 0) const {
    return VisitHandles(
        [&](std::span<const Handle> handles) {
          for (const Handle& h : handles) {
            ObjectMetadata m;
            bool active = false;
            {
              ReaderLock lock(&h->mu_);
              active = h->active_locked();
              if (active) m = View(*h.get(), clock_).metadata();
            }
            if (active) fn(h, m);
          }
        },
        chunk);
  }

  // Reads the unit `handle` belongs to in one step, for a snapshot, granting
  // no lease (a snapshot is not a read). A singleton: fn(const View&) under
  // its shared lock if it is still kActive. A member: the group lock, then
  // every live member's lock shared in ascending key order (L2), then
  // fn(const View&) for each kActive member in that order, so the group's
  // membership and each member are read at one instant. Returns kNotFound
  // if the object (for a member: its group) is gone, kInvalidArgument for an
  // empty handle, kUnavailable after shutdown. fn runs under those locks with
  // the rules of a WithObject callback (no call into this directory, no
  // blocking); readers are not blocked, writers of the unit wait. Allocates
  // the member list. Not for use inside a callback.
  template <typename Fn>
  Status InspectUnit(const Handle& handle, Fn&& fn) const {
    if (Status s = CheckShutdown(); !s.ok()) return s;
    if (!handle) return InvalidArgumentError();
    Entry* e = handle.get();
    Group* group = e->group();
    if (group == nullptr) {
      ReaderLock lock(&e->mu_);
      if (!e->active_locked() || e->tenant_ != options_.tenant_instance) {
        return NotFoundError();
      }
      const View view(*e, clock_);
      fn(view);
      return Status::Ok();
    }
    MutexLock group_lock(&group->mu_);
    if (!group->active_locked()) return NotFoundError();
    const std::vector<Entry*> members = SortedMembers(group);
    for (Entry* m : members) LockObjectShared(m);
    for (Entry* m : members) {
      if (ActiveUnderSharedLock(m)) {
        const View view(*m, clock_);
        fn(view);
      }
    }
    for (auto it = members.rbegin(); it != members.rend(); ++it) {
      UnlockObjectShared(*it);
    }
    return Status::Ok();
  }

  // The group's live members in ascending key order, the order a group
  // transaction locks them in (L2; GroupEntry::MembersByKey). Allocates the
  // list.
  static std::vector<Entry*> SortedMembers(const Group* group)
      CAIRN_REQUIRES(group->mu_) {
    std::vector<Entry*> members;
    members.reserve(group->live_.size());
    for (const auto& m : group->MembersByKey()) members.push_back(m.entry);
    return members;
  }

  // InspectUnit locks a run-time set of members in one loop and unlocks
  // them in another, which the analysis cannot pair.
  static void LockObjectShared(Entry* e) CAIRN_NO_THREAD_SAFETY_ANALYSIS {
    e->mu_.LockShared();
  }
  static void UnlockObjectShared(Entry* e) CAIRN_NO_THREAD_SAFETY_ANALYSIS {
    e->mu_.UnlockShared();
  }
  static bool ActiveUnderSharedLock(const Entry* e)
      CAIRN_NO_THREAD_SAFETY_ANALYSIS {
    return e->active_locked();
  }

  // The eviction kernel's revalidating commit for one ranked candidate
  // (V1, V2, V4, V5). For a member, its whole group is the unit: the group
  // lock, then every member exclusively in ascending key order (L2). Every
  // member must still be kActive with an expired lease, no hard pin, no
  // soft pin unless `allow_soft_pinned`, and no in-flight task; the
  // candidate must still be routed as itself and still have
  // `census_version`. Then, with the locks held, every member's charge is
  // released (Q2), it is marked kRemoving and its payload moved to *out;
  // after the member locks, each route slot is matched-unlinked and the
  // group leaves the catalog. The removal callback runs after every lock.
  // `expected_members` (0: any) is how many members the caller offered
  // for offload; a group that has another count now is not evicted. With
  // `offered` not empty, every member must also be one of `offered` at the
  // version listed there (an asynchronous offload's "remove" completion).
  // Returns kOk (evicted, appended to *out), kAborted (changed or not
  // evictable now: the caller moves on to later candidates), kNotFound
  // (already gone), kUnavailable (shut down), or the durable log's code
  // when its Reserve failed, with the status in *log_error if given
  // (nothing changed; the kernel stops its cycle there). kOk with
  // *log_error set: evicted, but the log could not make it durable (H5;
  // the log now refuses every change). Not for use inside a callback.
  StatusCode EvictIfUnchanged(const Handle& candidate,
                              std::uint64_t census_version,
                              bool allow_soft_pinned,
                              std::vector<EvictedObject<Payload>>* out,
                              std::size_t expected_members = 0,
                              Status* log_error = nullptr,
                              std::span<const OfferedMember> offered = {}) {
    if (is_shut_down()) return StatusCode::kUnavailable;
    if (!candidate || out == nullptr) return StatusCode::kInvalidArgument;
    Entry* c = candidate.get();
    Group* group = c->group();
    // Sorted by entry before any lock, searched under the member locks.
    std::vector<OfferedMember> seen(offered.begin(), offered.end());
    std::sort(seen.begin(), seen.end(),
              [](const OfferedMember& a, const OfferedMember& b) {
                return std::less<const void*>()(a.entry, b.entry);
              });
    auto offered_now = [&seen](const Entry* e) {
      auto it = std::lower_bound(seen.begin(), seen.end(),
                                 static_cast<const void*>(e),
                                 [](const OfferedMember& m, const void* p) {
                                   return std::less<const void*>()(m.entry, p);
                                 });
      return it != seen.end() && it->entry == e &&
             it->version == e->version_.load(std::memory_order_relaxed);
    };
    // Durable log (H1): reserved before the group and object locks.
    LogStep log(options_.durable_log, options_.tenant_instance);
    if (Status s = log.Reserve(c->key(), c); !s.ok()) {
      if (log_error != nullptr) *log_error = s;
      return s.code();
    }
    const std::int64_t now = clock_->NowNanos();
    MemberRemovals removals;
    WriteBudget none;
    if (group == nullptr) {
      // Room first: nothing may run out of memory once the record is
      // appended and the ledger released.
      ReserveRemovals(&removals, 1, log);
      out->reserve(out->size() + 1);
      std::string key(c->key());  // immutable: no lock needed to copy it
      {
        WriterLock lock(&c->mu_);
        if (!c->active_locked()) return StatusCode::kNotFound;
        if (c->version_.load(std::memory_order_relaxed) != census_version ||
            !Evictable(c, now, allow_soft_pinned) || !StillRouted(c) ||
            !log.AppendRemoval(DurableOp::kEvict, c).ok() ||
            !ReleaseLedger(c).ok()) {
          return StatusCode::kAborted;
        }
        AddRemoval(&removals, c, log);
        out->push_back(MoveOut(c, std::move(key)));
        c->SetLifecycle(Lifecycle::kRemoving);
      }
      Unlink(candidate.owner(), &none);  // after the object lock (L3)
      objects_.fetch_sub(1, std::memory_order_relaxed);
      CountEvicted(removals, /*group=*/false);
    } else {
      const std::shared_ptr<Group> owner_of_group(candidate.owner(), group);
      MutexLock group_lock(&group->mu_);
      if (!group->active_locked()) return StatusCode::kNotFound;
      const std::vector<Entry*> members = SortedMembers(group);
      // Room first, before any member lock: nothing may run out of memory
      // once the record is appended and the quota refunded.
      ReserveRemovals(&removals, members.size(), log);
      out->reserve(out->size() + members.size());
      // Keys are immutable: copied now, with no member lock held.
      std::vector<std::string> keys;
      keys.reserve(members.size());
      for (const Entry* e : members) keys.emplace_back(e->key());
      MemberLocks member_locks(members);
      bool ok =
          (expected_members == 0 || expected_members == members.size()) &&
          c->lifecycle_.load(std::memory_order_relaxed) == Lifecycle::kActive &&
          c->version_.load(std::memory_order_relaxed) == census_version &&
          StillRouted(c);
      for (Entry* e : members) {
        if (!ok) break;
        ok = Evictable(e, now, allow_soft_pinned) &&
             (seen.empty() || offered_now(e));
      }
      if (ok) {
        ok = log.AppendGroup(DurableOp::kEvict, group, members).ok();
      }
      if (ok) {
        std::uint64_t charged = 0;
        for (Entry* e : members) charged += ChargedBytes(e);
        ok = RefundQuota(charged).ok();
      }
      if (ok) {
        for (std::size_t i = 0; i < members.size(); ++i) {
          Entry* e = members[i];
          MarkLedgerReleased(e);
          AddRemoval(&removals, e, log);
          out->push_back(MoveOut(e, std::move(keys[i])));
          MarkRemoving(e);
        }
      }
      member_locks.Unlock();
      if (!ok) return StatusCode::kAborted;
      // A group is evicted whole (V1): all its members leave together.
      group->SetLifecycle(Lifecycle::kRemoving);
      UnlinkMembers(owner_of_group, members, &none);
      group->live_.clear();
      RetireFromCatalog(group);
      objects_.fetch_sub(removals.count, std::memory_order_relaxed);
      groups_.fetch_sub(1, std::memory_order_relaxed);
      CountEvicted(removals, /*group=*/true);
    }
    // Finalized before the reclaim (payload destructors) and the callbacks.
    // Evicted even if the log cannot make it durable: *out has the objects,
    // *log_error says they are not acknowledged (H5).
    Status durable = FinalizeRemovals(&log, removals.tokens);
    if (!durable.ok() && log_error != nullptr) *log_error = std::move(durable);
    route_.ReclaimIfDue();
    RunRemovedCallbacks(removals);
    return StatusCode::kOk;
  }

  // DirectoryHooks::KeepIfUnchanged: an offload's "keep" completion for
  // one object. Under its exclusive lock: still kActive, routed as itself,
  // at `version` and evictable now; then the charge moves to
  // `counted_bytes` (growth charged against the limit, a shrink refunded),
  // a kUpsert record is appended (with `given` as the payload bytes when
  // `payload` is kGiven, else none), size, counted bytes and version move,
  // and fn(Access&) runs under the same lock.
  template <typename Fn>
  Status KeepIfUnchanged(const Handle& handle, std::uint64_t version,
                         bool allow_soft_pinned, std::uint64_t size_bytes,
                         std::uint64_t counted_bytes, Fn& fn,
                         LogPayload payload = LogPayload::kNone,
                         std::string_view given = {}) {
    if (Status s = CheckShutdown(); !s.ok()) return s;
    if (!handle) return InvalidArgumentError("empty handle");
    Entry* e = handle.get();
    LogStep log(options_.durable_log, options_.tenant_instance);
    if (Status s = log.Reserve(e->key(), e, given.size()); !s.ok()) return s;
    const std::int64_t now = clock_->NowNanos();
    {
      WriterLock lock(&e->mu_);
      if (!e->active_locked()) return NotFoundError("object is gone");
      // A staged upsert's commit would replace the charge and envelope
      // this sets, with the payload left demoted: refused, as AdjustCharge
      // refuses.
      if (e->version_.load(std::memory_order_relaxed) != version ||
          e->ledger_.upsert_pending || !Evictable(e, now, allow_soft_pinned) ||
          !StillRouted(e)) {
        return AbortedError("object changed since it was offered");
      }
      const std::uint64_t held = e->counted_bytes();
      if (Status s =
              log.AppendObject(DurableOp::kUpsert, e, version + 1, size_bytes,
                               counted_bytes, payload, given);
          !s.ok()) {
        return s;
      }
      // Q1/Q2: a growth is charged against the limit, a shrink refunded,
      // after the append: a refusal voids the record (the log step is not
      // finalized) and no room is ever given back and taken again.
      if (counted_bytes > held) {
        if (Status s = ChargeQuota(counted_bytes - held); !s.ok()) return s;
      } else if (!RefundQuota(held - counted_bytes).ok()) {
        return FailedPreconditionError("quota ledger mismatch");
      }
      e->counted_bytes_.store(counted_bytes, std::memory_order_relaxed);
      e->size_bytes_ = size_bytes;
      e->version_.fetch_add(1, std::memory_order_relaxed);
      Access access(*e, clock_);
      fn(access);
    }
    return log.Finalize(e->token());
  }

  // DirectoryHooks::KeepWithPayloadIfUnchanged: KeepIfUnchanged that
  // installs `payload` (moved from only if it is installed) as the object's
  // payload; with a durable log whose DurablePayloadCodec logs payloads, the
  // kUpsert record carries its bytes (encoded here, before any lock), so a
  // replay sees the demoted payload readers see. The replaced payload is
  // destroyed after the lock.
  Status KeepWithPayloadIfUnchanged(const Handle& handle, std::uint64_t version,
                                    bool allow_soft_pinned,
                                    std::uint64_t size_bytes,
                                    std::uint64_t counted_bytes,
                                    Payload& payload) {
    std::string bytes;
    if constexpr (DurablePayloadCodec<Payload>::kLogsPayload) {
      if (options_.durable_log != nullptr) {
        DurablePayloadCodec<Payload>::Encode(payload, &bytes);
      }
    }
    std::optional<Payload> replaced;  // outlives the lock
    auto install = [&](Access& access) {
      replaced.emplace(std::move(access.payload()));
      access.payload() = std::move(payload);
    };
    return KeepIfUnchanged(handle, version, allow_soft_pinned, size_bytes,
                           counted_bytes, install, LogPayload::kGiven, bytes);
  }

  // EraseGroup's body.
  Status EraseGroupImpl(std::string_view name, const EraseOptions& options) {
    if (Status s = CheckCall(name); !s.ok()) return s;
    // Durable log (H1): reserved before the catalog and the group.
    LogStep log(options_.durable_log, options_.tenant_instance);
    if (Status s = log.Reserve(name, nullptr); !s.ok()) return s;
    RetryPendingUnlinks();
    std::shared_ptr<Group> group;
    {
      MutexLock lock(&catalog_mu_);
      auto it = catalog_.find(name);
      if (it == catalog_.end()) return NotFoundError("no such group");
      group = it->second;
    }
    MemberRemovals removals;
    {
      MutexLock group_lock(&group->mu_);
      if (!group->active_locked()) return NotFoundError("group torn down");
      if (!options.force && LeaseHeld(group->lease_deadline_)) {
        return FailedPreconditionError("group lease has not expired");
      }
      const std::vector<Entry*> members = SortedMembers(group.get());
      // Room first, before any member lock: nothing may run out of memory
      // once the record is appended and the quota refunded.
      ReserveRemovals(&removals, members.size(), log);
      // Group transaction: all member locks, ascending key order (L2). A
      // reader extending the group lease holds its member's shared lock, so
      // with every member locked the lease check above cannot be overtaken.
      MemberLocks member_locks(members);
      const bool leased = !options.force && LeaseHeld(group->lease_deadline_);
      // only_if_idle: one busy member keeps the whole group.
      const char* busy = nullptr;
      if (!leased && !options.force && options.only_if_idle) {
        for (Entry* e : members) {
          if (busy == nullptr) busy = BusyReason(e);
        }
      }
      if (busy != nullptr) {
        member_locks.Unlock();
        return FailedPreconditionError(std::string("a group member ") + busy);
      }
      // Durable log (H1): one record names every member, appended before
      // anything moves.
      Status appended;
      if (!leased) {
        appended =
            log.AppendGroup(DurableOp::kEraseGroup, group.get(), members);
      }
      // Quota ledger (Q2): the members' charges leave the account in one
      // release, or the group stays as it was.
      bool mismatch = false;
      if (!leased && appended.ok()) {
        std::uint64_t charged = 0;
        for (Entry* e : members) charged += ChargedBytes(e);
        if (!RefundQuota(charged).ok()) {
          mismatch = true;
        } else {
          for (Entry* e : members) MarkLedgerReleased(e);
        }
      }
      if (!leased && !mismatch && appended.ok()) {
        for (Entry* e : members) {
          MarkRemoving(e);
          AddRemoval(&removals, e, log);
        }
      }
      member_locks.Unlock();
      if (leased) return FailedPreconditionError("group lease has not expired");
      if (!appended.ok()) return appended;
      if (mismatch) return FailedPreconditionError("quota ledger mismatch");
      group->explicit_teardown_ = true;
      group->SetLifecycle(Lifecycle::kRemoving);
      // Under the group lock: unlinks never wait for retire budget here;
      // one refused for lack of room is parked and retried.
      WriteBudget none;
      UnlinkMembers(group, members, &none);
      group->live_.clear();
      RetireFromCatalog(group.get());
    }
    objects_.fetch_sub(removals.count, std::memory_order_relaxed);
    groups_.fetch_sub(1, std::memory_order_relaxed);
    // Finalized before anything runs host code: the reclaim (payload
    // destructors) and the removal callbacks (docs/concurrency.md).
    Status durable = FinalizeRemovals(&log, removals.tokens);
    route_.ReclaimIfDue();
    RunRemovedCallbacks(removals);
    return durable;
  }

  // BeginUpsert's body; *quota_refused: the quota refused the charge.
  // `stage` non-null: a named staging, which may take over an expired one
  // (D11).
  Status BeginUpsertImpl(std::string_view key, ObjectToken token,
                         const UpsertOptions& options, UpsertStage* stage,
                         bool* quota_refused) {
    if (Status s = CheckCall(key); !s.ok()) return s;
    std::int64_t cutoff = 0;
    const bool takes_over = stage != nullptr && PendingCutoff(&cutoff);
    // Charged before any lock. Refused for room, a named staging may still
    // take over an expired one and charge under the object lock (Q3).
    Status charge = ChargeQuota(options.counted_bytes);
    const bool charge_locked =
        takes_over && charge.code() == StatusCode::kResourceExhausted;
    if (!charge.ok() && !charge_locked) {
      *quota_refused = true;
      return charge;
    }
    const std::int64_t now = clock_->NowNanos();
    Status refused;
    bool staged = false;
    auto stage_fn = [&](Access& access) {
      access.entry_.mu_.AssertHeld();
      directory_internal::Ledger& ledger = access.entry_.ledger_;
      bool took_over = false;
      if (ledger.upsert_pending) {
        if (!takes_over || ledger.pending_since_nanos > cutoff) {
          refused =
              charge_locked
                  ? charge
                  : FailedPreconditionError("an upsert is already pending");
          *quota_refused = charge_locked;
          return;
        }
        // Takeover (D11): the expired staging's charge leaves the account
        // in the step that stages this one.
        refused = DropStagedUpsert(ledger);
        if (!refused.ok()) return;
        took_over = true;
      } else if (charge_locked) {
        refused = charge;
        *quota_refused = true;
        return;
      }
      if (charge_locked) {
        // The expired staging stays dropped if this is refused too.
        if (Status c = ChargeQuota(options.counted_bytes); !c.ok()) {
          refused = std::move(c);
          *quota_refused = true;
          return;
        }
      }
      ledger.upsert_pending = true;
      ledger.upsert_took_over = took_over;
      if (++ledger.upsert_stage == 0) ledger.upsert_stage = 1;  // 0: none
      if (stage != nullptr) stage->number = ledger.upsert_stage;
      ledger.pending = options.counted_bytes;
      AddPendingCharge(options.counted_bytes);
      ledger.pending_size = options.size_bytes;
      ledger.pending_since_nanos = now;
      staged = true;
    };
    Status s = LookupToken<true>(key, token, stage_fn);
    if (!staged && !charge_locked) {
      RefundQuota(options.counted_bytes).IgnoreError();
    }
    return s.ok() ? refused : s;
  }

  // CommitUpsertWithPayload's body.
  Status CommitUpsertWithPayloadImpl(std::string_view key, ObjectToken token,
                                     StageRef ref, Payload payload) {
    std::string bytes;
    if constexpr (DurablePayloadCodec<Payload>::kLogsPayload) {
      if (options_.durable_log != nullptr) {
        DurablePayloadCodec<Payload>::Encode(payload, &bytes);
      }
    }
    std::optional<Payload> replaced;  // outlives the lock
    return Counted(
        MetricOp::kCommitUpsert,
        CommitStagedUpsert(key, token, ref, LogPayload::kGiven, bytes,
                           [&](Access& access) {
                             replaced.emplace(std::move(access.payload()));
                             access.payload() = std::move(payload);
                           }));
  }

  // AdjustCharge's body; *quota_refused: the quota refused the charge.
  // Under the object's exclusive lock: the checks, the kAdjust record
  // (H1), then the account (a refused charge voids the record), then the
  // entry. Nothing changes on any error.
  Status AdjustChargeImpl(std::string_view key, ObjectToken token,
                          const ChargeAdjustment& adjustment,
                          std::optional<std::uint64_t> expected_version,
                          bool* quota_refused) {
    if (Status s = CheckCall(key); !s.ok()) return s;
    const std::uint64_t charge = adjustment.charge_bytes;
    const std::uint64_t refund = adjustment.refund_bytes;
    const bool grows = charge >= refund;
    const std::uint64_t delta = grows ? charge - refund : refund - charge;
    // Durable log (H1): reserved before the object lock; nothing to log
    // for a zero net change.
    LogStep log(delta == 0 ? nullptr : options_.durable_log,
                options_.tenant_instance);
    if (Status s = log.Reserve(key, nullptr); !s.ok()) return s;
    Status refused;
    auto adjust = [&](Access& access) {
      Entry& e = access.entry_;
      e.mu_.AssertHeld();
      directory_internal::Ledger& ledger = e.ledger_;
      if (ledger.upsert_pending) {
        refused = FailedPreconditionError(
            "an upsert is staged: its commit replaces the charge");
        return;
      }
      if (expected_version.has_value() &&
          *expected_version != e.version_.load(std::memory_order_relaxed)) {
        refused = AbortedError("object version moved since it was read");
        return;
      }
      const std::uint64_t held = e.counted_bytes();
      if (!grows && delta > held) {
        refused = InvalidArgumentError("refund of " + std::to_string(delta) +
                                       " bytes exceeds the " +
                                       std::to_string(held) + " counted bytes");
        return;
      }
      if (grows && delta > QuotaAccount::kUnlimited - held) {
        refused = InvalidArgumentError("counted bytes overflow");
        return;
      }
      if (delta == 0) return;
      const std::uint64_t counted = grows ? held + delta : held - delta;
      if (Status s =
              log.AppendObject(DurableOp::kAdjust, &e,
                               e.version_.load(std::memory_order_relaxed) + 1,
                               e.size_bytes_, counted, LogPayload::kNone);
          !s.ok()) {
        refused = std::move(s);
        return;
      }
      // Quota (Q1): admitted like a put's charge; a refusal changes
      // nothing (the appended record is voided by the log step).
      if (grows) {
        if (Status s = ChargeQuota(delta); !s.ok()) {
          *quota_refused = s.code() == StatusCode::kResourceExhausted;
          refused = std::move(s);
          return;
        }
      } else if (!RefundQuota(delta).ok()) {
        refused = FailedPreconditionError("quota ledger mismatch");
        return;
      }
      e.counted_bytes_.store(counted, std::memory_order_relaxed);
      e.version_.fetch_add(1, std::memory_order_relaxed);
    };
    Status s = LookupToken<true>(key, token, adjust);
    if (!s.ok()) return s;
    if (!refused.ok()) return refused;
    return log.Finalize(token);
  }

  // CommitUpsert's body; `payload`/`given` say which payload bytes the
  // record carries (none, or bytes the caller encoded off-lock).
  template <typename Fn>
  Status CommitStagedUpsert(std::string_view key, ObjectToken token,
                            StageRef ref, LogPayload payload,
                            std::string_view given, Fn&& fn) {
    if (Status s = CheckCall(key); !s.ok()) return s;
    // Durable log (H1): reserved before the object lock.
    LogStep log(options_.durable_log, options_.tenant_instance);
    if (Status s = log.Reserve(key, nullptr, given.size()); !s.ok()) {
      return s;
    }
    Status refused;
    auto commit = [&](Access& access) {
      Entry& e = access.entry_;
      e.mu_.AssertHeld();
      directory_internal::Ledger& ledger = e.ledger_;
      if (!Settles(ledger, ref)) {
        refused = FailedPreconditionError("no upsert is pending");
        return;
      }
      if (Status s = log.AppendObject(
              DurableOp::kUpsert, &e,
              e.version_.load(std::memory_order_relaxed) + 1,
              ledger.pending_size, ledger.pending, payload, given);
          !s.ok()) {
        refused = std::move(s);
        return;
      }
      if (Status s = RefundQuota(e.counted_bytes()); !s.ok()) {
        refused = FailedPreconditionError("quota ledger mismatch");
        return;
      }
      e.counted_bytes_.store(ledger.pending, std::memory_order_relaxed);
      e.size_bytes_ = ledger.pending_size;
      ledger.upsert_pending = false;
      DropPendingCharge(ledger);
      e.version_.fetch_add(1, std::memory_order_relaxed);
      fn(access);
    };
    Status s = LookupToken<true>(key, token, commit);
    if (!s.ok()) return s;
    if (!refused.ok()) return refused;
    return log.Finalize(token);
  }

  // Activates a new, unrouted entry; with a log, first appends its create
  // record under the entry's lock.
  Status ActivateLogged(Entry* e, LogStep* log, std::string_view payload) {
    WriterLock lock(&e->mu_);
    if (Status s = log->AppendObject(
            DurableOp::kCreate, e, e->version_.load(std::memory_order_relaxed),
            e->size_bytes_, e->counted_bytes(), LogPayload::kGiven, payload);
        !s.ok()) {
      return s;
    }
    e->SetLifecycle(Lifecycle::kActive);
    return Status::Ok();
  }
  // The removals' tokens, gathered as they are made: a vector reserved
  // with the removals, before the change, so that nothing allocates after
  // it.
  static Status FinalizeRemovals(LogStep* log,
                                 std::span<const ObjectToken> tokens) {
    if (!log->active()) return Status::Ok();
    return log->Finalize(tokens);
  }

  // Commit's step under e's exclusive lock (taken here): kCreating ->
  // kActive with its record appended first (H1), settling at
  // options.counted_bytes if given (Q4: the rest of the reservation is
  // refunded in the same step); an error changes nothing. The refund runs
  // after the append; an account already short of it (Q2 broken
  // elsewhere) refuses the commit before the append (RefundableOrMismatch),
  // since a batch cannot void one record of its reservation.
  Status CommitLocked(Entry* e, LogStep* log, const CommitOptions& options) {
    WriterLock lock(&e->mu_);
    if (e->lifecycle_.load(std::memory_order_relaxed) != Lifecycle::kCreating) {
      return FailedPreconditionError("object is not kCreating");
    }
    directory_internal::Ledger& ledger = e->ledger_;
    const std::uint64_t settled =
        options.counted_bytes.value_or(ledger.pending);
    if (settled > ledger.pending) {
      return InvalidArgumentError("commit counts " + std::to_string(settled) +
                                  " bytes, more than the " +
                                  std::to_string(ledger.pending) +
                                  " bytes reserved");
    }
    const std::uint64_t refund = ledger.pending - settled;
    if (Status s = RefundableOrMismatch(refund); !s.ok()) return s;
    if (Status s =
            log->AppendObject(DurableOp::kCommit, e,
                              e->version_.load(std::memory_order_relaxed) + 1,
                              e->size_bytes_, settled, LogPayload::kEntry);
        !s.ok()) {
      return s;
    }
    if (!RefundQuota(refund).ok()) {
      return FailedPreconditionError("quota ledger mismatch");
    }
    e->counted_bytes_.store(settled, std::memory_order_relaxed);
    ledger.state = directory_internal::Ledger::kCommitted;
    DropPendingCharge(ledger);
    e->SetLifecycle(Lifecycle::kActive);
    e->version_.fetch_add(1, std::memory_order_relaxed);
    return Status::Ok();
  }

  // A batch whose log reservation failed: every key that passed its
  // checks gets the log's error.
  static void FailChecked(std::vector<Status>& out, const Status& error) {
    for (Status& s : out) {
      if (s.ok()) s = error;
    }
  }

  // ---- log replay hooks (DirectoryHooks) ----

  Status ReplayErase(std::string_view key, ObjectId id) {
    if (Status s = CheckCall(key); !s.ok()) return s;
    LogStep unlogged(nullptr, options_.tenant_instance);
    EraseOptions force;
    force.force = true;
    return EraseRouted(key, force, Lifecycle::kActive,
                       std::numeric_limits<std::int64_t>::max(), &unlogged,
                       [id](const Entry& routed) { return routed.id() == id; });
  }

  Status ReplayUpdate(std::string_view key, ObjectId id, std::uint64_t version,
                      std::uint64_t size_bytes, std::uint64_t counted_bytes,
                      Payload* payload) {
    Status refused;
    auto update = [&](Access& access) {
      Entry& e = access.entry_;
      e.mu_.AssertHeld();
      if (version < e.version_.load(std::memory_order_relaxed)) return;
      const std::uint64_t held = e.counted_bytes();
      if (counted_bytes != held && options_.quota != nullptr) {
        // Q2: the account moves by the difference; the primary admitted it.
        refused = counted_bytes > held
                      ? options_.quota->ForceCharge(counted_bytes - held)
                      : RefundQuota(held - counted_bytes);
        if (!refused.ok()) return;
      }
      e.counted_bytes_.store(counted_bytes, std::memory_order_relaxed);
      e.size_bytes_ = size_bytes;
      e.version_.store(version, std::memory_order_relaxed);
      if (payload != nullptr) e.payload_ = std::move(*payload);
    };
    Status s = LookupToken<true>(key, ObjectToken{options_.tenant_instance, id},
                                 update);
    return s.ok() ? refused : s;
  }

  // ---- metrics (docs/metrics.md, "Directory") ----

  using MetricOp = directory_internal::MetricOp;

  // Write paths: one relaxed add in the write counters' block (skipped in
  // the unlikely case the block could not be allocated).
  void CountOp(MetricOp op, StatusCode code,
               bool quota_refused = false) noexcept {
    if (directory_internal::WriteCounters* w = metrics_.Get(); w != nullptr) {
      w->CountOp(op, directory_internal::OutcomeOf(code, quota_refused));
    }
  }
  Status Counted(MetricOp op, Status s) {
    CountOp(op, s.code());
    return s;
  }
  // Each key of a batch counted as its single op.
  void CountBatch(MetricOp op, const std::vector<Status>& out) noexcept {
    for (const Status& s : out) CountOp(op, s.code());
  }
  // Read paths: a hit (kOk) or a miss (kNotFound) on this thread's stripe;
  // other codes (bad argument, shut down) are not lookups. Returns `code`.
  Status CountGet(StatusCode code) const noexcept {
    if (code == StatusCode::kOk) {
      reads_.Add(directory_internal::kGetHit);
    } else if (code == StatusCode::kNotFound) {
      reads_.Add(directory_internal::kGetMiss);
    }
    return Status(code);
  }
  void CountEvicted(const MemberRemovals& removals, bool group) noexcept {
    directory_internal::WriteCounters* w = metrics_.Get();
    if (w == nullptr) return;
    w->evicted_objects.Add(removals.count);
    if (group) w->evicted_groups.Add();
    w->evicted_size_bytes.Add(removals.size_bytes);
    w->evicted_counted_bytes.Add(removals.counted_bytes);
  }
  // The pending-charge gauge: the sum of the live ledgers' `pending`. Adds
  // precede the subtractions of the same charge.
  void AddPendingCharge(std::uint64_t bytes) noexcept {
    if (bytes != 0) pending_charge_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void SubPendingCharge(std::uint64_t bytes) noexcept {
    if (bytes != 0) pending_charge_.fetch_sub(bytes, std::memory_order_relaxed);
  }
  // Zeroes a ledger's pending charge and takes it off the gauge.
  void DropPendingCharge(directory_internal::Ledger& ledger) {
    SubPendingCharge(ledger.pending);
    ledger.pending = 0;
  }

  // ---- quota ledger (Q1-Q4) ----

  Status ChargeQuota(std::uint64_t bytes) {
    if (options_.quota == nullptr || bytes == 0) return Status::Ok();
    return options_.quota->Charge(bytes);
  }
  Status ForceChargeQuota(std::uint64_t bytes) {
    if (options_.quota == nullptr || bytes == 0) return Status::Ok();
    return options_.quota->ForceCharge(bytes);
  }
  Status RefundQuota(std::uint64_t bytes) noexcept {
    if (options_.quota == nullptr || bytes == 0) return Status::Ok();
    return options_.quota->Release(bytes);
  }
  // What `e` holds in the account: its committed counted bytes plus any
  // pending charge. Caller holds e's lock.
  static std::uint64_t ChargedBytes(const Entry* e) {
    e->mu_.AssertReaderHeld();
    const directory_internal::Ledger& ledger = e->ledger_;
    switch (ledger.state) {
      case directory_internal::Ledger::kPending:
        return ledger.pending;
      case directory_internal::Ledger::kCommitted:
        return e->counted_bytes() +
               (ledger.upsert_pending ? ledger.pending : 0);
      default:
        return 0;
    }
  }
  // A staged upsert's charge leaves the account and the staging ends
  // (AbortUpsert; a takeover of an expired staging, D11). A mismatch (the
  // account holds less) changes nothing. Caller holds the object's lock
  // exclusively.
  Status DropStagedUpsert(directory_internal::Ledger& ledger) {
    if (!RefundQuota(ledger.pending).ok()) {
      return FailedPreconditionError("quota ledger mismatch");
    }
    ledger.upsert_pending = false;
    DropPendingCharge(ledger);
    return Status::Ok();
  }
  void MarkLedgerReleased(Entry* e) {
    e->mu_.AssertHeld();
    directory_internal::Ledger& ledger = e->ledger_;
    ledger.state = directory_internal::Ledger::kReleased;
    ledger.upsert_pending = false;
    DropPendingCharge(ledger);
  }
  // Called under an object's exclusive lock before a record whose change
  // refunds `bytes` of that object's charge is appended: the refund after
  // the append then cannot fail. The account holds at least the object's
  // own charge while the ledger is sound (Q2), and other objects' releases
  // never take it; an account short of it is a ledger already broken
  // elsewhere, refused here, before a record exists (a batch cannot void
  // one of its records). Only a release racing that refusal on a ledger
  // already broken could still fail the refund after the append.
  Status RefundableOrMismatch(std::uint64_t bytes) const noexcept {
    if (options_.quota == nullptr || bytes == 0 ||
        options_.quota->charged() >= bytes) {
      return Status::Ok();
    }
    return FailedPreconditionError("quota ledger mismatch");
  }

  // Releases e's whole charge exactly once, as a removal is emitted once (D6):
  // the ledger then says released. A mismatch (the account holds less) changes
  // nothing (Q2). Caller holds e's lock exclusively.
  Status ReleaseLedger(Entry* e) {
    e->mu_.AssertHeld();
    if (!RefundQuota(ChargedBytes(e)).ok()) {
      return FailedPreconditionError("quota ledger mismatch");
    }
    MarkLedgerReleased(e);
    return Status::Ok();
  }

  // Which staged upsert a CommitUpsert / AbortUpsert settles (D11): any
  // (the reaper, which re-checks the age), the staging `named` names, or,
  // for an unnamed call, one that took over no other (Settles).
  static bool Settles(const directory_internal::Ledger& ledger, StageRef ref) {
    if (!ledger.upsert_pending) return false;
    if (ref.any) return true;
    if (ref.named == nullptr) return !ledger.upsert_took_over;
    return ledger.upsert_stage == ref.named->number;
  }

  // The reaper's expiry rule, which CreatePending's takeover (D11) shares:
  // a pending put or staged upsert whose pending_since_nanos is at or
  // before *cutoff (now minus pending_put_timeout on the injected clock)
  // has expired. False when pending_put_timeout is 0: nothing expires.
  bool PendingCutoff(std::int64_t* cutoff) const {
    if (options_.pending_put_timeout.count() <= 0) return false;
    *cutoff = clock_->NowNanos() - options_.pending_put_timeout.count();
    return true;
  }

  // CreatePending's takeover (D11). Caller holds the key's lifecycle
  // stripe; `owner` is the routed instance, seen kCreating. Aborts it as
  // Abort does (EraseInstance: under its lock it must still be kCreating
  // and expired; its charge is released, it is marked kRemoving and
  // unlinked), leaving its removal in *removal for the caller to emit
  // off-lock. Not logged: a pending put is invisible (H1), and so are its
  // abort and the new pending put. kAlreadyExists, nothing changed, if it
  // has not expired or was committed meanwhile; a route error as Erase.
  Status TakeOverExpiredPut(const Owner& owner, WriteBudget* budget,
                            Removal* removal) {
    std::int64_t cutoff = 0;
    if (!PendingCutoff(&cutoff)) {
      return AlreadyExistsError("key is already routed");
    }
    LogStep no_log(nullptr, options_.tenant_instance);
    Status s = EraseInstance(owner, EraseOptions{}, removal, budget,
                             Lifecycle::kCreating, cutoff, &no_log);
    if (s.code() == StatusCode::kFailedPrecondition) {
      return AlreadyExistsError("key is already routed");
    }
    return s;
  }

  // CreatePending refused by the quota (D11): aborts the pending put
  // routed under `key` if it has expired, as the reaper would (its own
  // stripe, Abort's locks). True if it did.
  bool AbortExpiredPut(std::string_view key) {
    std::int64_t cutoff = 0;
    if (!PendingCutoff(&cutoff) || KeyCode(key) != StatusCode::kOk) {
      return false;
    }
    const Owner owner = route_.Pin(key);
    if (owner == nullptr || owner->lifecycle_hint() != Lifecycle::kCreating) {
      return false;
    }
    return AbortPending(key, owner->token(), cutoff).ok();
  }

  // A pending put is invisible, so its abort is not logged.
  Status AbortPending(std::string_view key, ObjectToken token,
                      std::int64_t cutoff) {
    if (Status s = CheckCall(key); !s.ok()) return s;
    if (token.tenant != options_.tenant_instance) return NotFoundError();
    LogStep no_log(nullptr, options_.tenant_instance);
    return EraseRouted(
        key, EraseOptions{}, Lifecycle::kCreating, cutoff, &no_log,
        [&](const Entry& routed) { return routed.id() == token.object; });
  }

  // The erase protocol for the instance routed under `key`, if `matches`
  // it: pinned under the key's lifecycle stripe, erased by EraseInstance,
  // its record finalized, then the removal callback off-lock.
  template <typename Match>
  Status EraseRouted(std::string_view key, const EraseOptions& options,
                     Lifecycle expect, std::int64_t pending_cutoff,
                     LogStep* log, Match&& matches) {
    RetryPendingUnlinks();
    Result<WriteBudget> budget = route_.PrepareWrite(key);
    if (!budget.ok()) return std::move(budget).status();
    Removal removal;
    Owner owner;  // outlives the stripe: its release may free the entry
    {
      StripeLock stripe(&StripeFor(key), &stripe_waits_);
      owner = route_.Pin(key);
      if (owner == nullptr || !matches(*owner)) return NotFoundError();
      if (Status s = EraseInstance(owner, options, &removal, &budget.value(),
                                   expect, pending_cutoff, log);
          !s.ok()) {
        return s;
      }
    }
    // Finalized before the reclaim (payload destructors) and the callback.
    Status durable = log->Finalize(removal.info.token);
    route_.ReclaimIfDue();
    RunRemovedCallback(removal);
    return durable;
  }

  Status AbortStagedUpsert(std::string_view key, ObjectToken token,
                           std::int64_t cutoff, StageRef ref) {
    Status refused;
    auto drop = [&](Access& access) {
      access.entry_.mu_.AssertHeld();
      directory_internal::Ledger& ledger = access.entry_.ledger_;
      if (!Settles(ledger, ref) || ledger.pending_since_nanos > cutoff) {
        refused = FailedPreconditionError("no upsert is pending");
        return;
      }
      refused = DropStagedUpsert(ledger);
    };
    Status s = LookupToken<true>(key, token, drop);
    return s.ok() ? refused : s;
  }

  // Matched unlink of a removed instance. The removal is already committed
  // (kRemoving: no lookup returns it), so a route error does not undo it:
  // the owner is parked and the unlink retried by later writes. kNotFound
  // (no match) means another writer already unlinked it.
  void Unlink(const Owner& owner, WriteBudget* budget) {
    ParkIfRefused(owner, route_.EraseIfMatch(owner->key(), owner->id(),
                                             owner.get(), budget));
  }

  // Unlink for each member of a group transaction, in order; `group` owns
  // them (its members' owners are aliasing owners of the group). A route
  // that has EraseEachIfMatch (the epoch route) runs them in chunks that
  // fetch the members' buckets ahead; another route, one at a time.
  // Allocates nothing unless an unlink is refused (its owner is parked): it
  // runs after the removals are committed.
  void UnlinkMembers(const std::shared_ptr<Group>& group,
                     std::span<Entry* const> members, WriteBudget* budget) {
    if constexpr (directory_internal::UnlinksEach<RouteType>) {
      constexpr std::size_t kChunk = 8;
      typename RouteType::Unlinking items[kChunk];
      for (std::size_t base = 0; base < members.size(); base += kChunk) {
        const std::size_t n = std::min(kChunk, members.size() - base);
        for (std::size_t i = 0; i < n; ++i) {
          const Entry* e = members[base + i];
          items[i] = {e->key(), e->id(), e};
        }
        route_.EraseEachIfMatch(
            std::span<const typename RouteType::Unlinking>(items, n), budget,
            [&](std::size_t i, const Status& s) {
              if (!s.ok() && s.code() != StatusCode::kNotFound) {
                ParkIfRefused(Owner(group, members[base + i]), s);
              }
            });
      }
    } else {
      for (Entry* e : members) Unlink(Owner(group, e), budget);
    }
  }

  void ParkIfRefused(const Owner& owner, const Status& unlinked) {
    if (unlinked.ok() || unlinked.code() == StatusCode::kNotFound) return;
    MutexLock lock(&pending_mu_);
    pending_.push_back(owner);
    pending_count_.store(pending_.size(), std::memory_order_relaxed);
  }

  // Retries parked unlinks. Called with no lock held at the start of every
  // write; costs one relaxed load when nothing is parked.
  void RetryPendingUnlinks() {
    if (pending_count_.load(std::memory_order_relaxed) == 0) return;
    std::vector<Owner> parked;
    {
      MutexLock lock(&pending_mu_);
      parked.swap(pending_);
      pending_count_.store(0, std::memory_order_relaxed);
    }
    // Never waits: an unlink still without room stays parked.
    WriteBudget none;
    for (const Owner& owner : parked) Unlink(owner, &none);
    route_.ReclaimIfDue();
  }

  void RunRemovedCallback(Removal& removal) {
    if (options_.on_removed) options_.on_removed(removal.info);
    removal.owner.reset();  // the last owner may free the entry here, off-lock
  }

  const DirectoryOptions options_;
  const Clock* const clock_;
  RouteType route_;
  const std::size_t stripe_count_;
  // Made by the first create or erase (StripeFor).
  const base_internal::LazyArray<Stripe> stripes_;

  mutable Mutex catalog_mu_;
  std::unordered_map<std::string, std::shared_ptr<Group>,
                     base_internal::KeyHash, base_internal::KeyEq>
      catalog_ CAIRN_GUARDED_BY(catalog_mu_);

  // Parked unlinks (a leaf lock: only route writes run after it, unlocked).
  Mutex pending_mu_;
  std::vector<Owner> pending_ CAIRN_GUARDED_BY(pending_mu_);
  std::atomic<std::size_t> pending_count_{0};

  std::atomic<bool> shut_down_{false};
  std::atomic<ObjectId> next_object_id_{1};
  std::atomic<GroupId> next_group_id_{1};
  std::atomic<std::size_t> objects_{0};
  std::atomic<std::size_t> groups_{0};
  mutable std::atomic<std::uint64_t> stripe_waits_{0};

  // Metrics: the lookups' stripes (each its own cache line, so no reader
  // writes a line the directory's shared fields are on) and the write
  // counters' block, allocated by the first counted write.
  directory_internal::LazyWriteCounters metrics_;
  // The pending-charge gauge (pending_charge_bytes()).
  std::atomic<std::uint64_t> pending_charge_{0};
  mutable directory_internal::ReadCounters reads_;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_DIRECTORY_GROUP_DIRECTORY_H_
