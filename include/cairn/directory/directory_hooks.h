// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The steps of a GroupDirectory that the components built on it need and a
// host serving requests does not: the census and the revalidating commit of
// the eviction kernel (cairn/tenant/eviction.h), the one-unit read of a
// snapshot (cairn/ha/snapshot.h), and the creates with a given identity and
// the id counter of a restore or a log replay (cairn/ha). They are not
// GroupDirectory methods so the host API stays what a host calls; a host
// writing its own eviction policy may use them too, under the same rules.

#ifndef CAIRN_DIRECTORY_DIRECTORY_HOOKS_H_
#define CAIRN_DIRECTORY_DIRECTORY_HOOKS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/directory/directory_options.h"
#include "cairn/directory/object_entry.h"

CAIRN_NAMESPACE_BEGIN

// An object the eviction commit removed. The payload was moved out under
// the object's exclusive lock, after the object became kRemoving, so no
// lookup can see the moved-from value.
template <typename Payload>
struct EvictedObject {
  ObjectToken token;
  std::string key;
  GroupId group = kNoGroup;
  std::uint64_t size_bytes = 0;
  std::uint64_t counted_bytes = 0;
  Payload payload;
};

// One object an asynchronous offload offered, with the version the
// eviction kernel saw (cairn/tenant/offload.h): `entry` is the handle's
// get(), compared as an identity only.
struct OfferedMember {
  const void* entry = nullptr;
  std::uint64_t version = 0;
};

class DirectoryHooks {
 public:
  // The identity a restored or replayed object keeps: its ObjectId and
  // version as the primary had them, so later log records (which name
  // objects by tenant instance and id) address this instance.
  struct RestoredIdentity {
    ObjectId id = 0;
    std::uint64_t version = 1;
  };

  // Creates `key` as kActive with id `identity.id` and version
  // `identity.version`, for a snapshot restore or a log replay. Never
  // logged to the directory's durable log (the change is already in a log
  // or a snapshot); options.counted_bytes is charged with
  // QuotaAccount::ForceCharge (past the limit and past closed admission:
  // the primary admitted the object). The id counter first resumes above
  // identity.id (ids are never reused, even if the create then fails).
  // Options as Create (group, sizes, lease, pins). Errors as Create, each
  // with no state change but the id counter: kInvalidArgument (id 0 or the
  // largest ObjectId, version 0, bad key or group name), kAlreadyExists
  // (key routed), kFailedPrecondition (group being torn down), kUnavailable
  // (shut down), the route's write error; ForceCharge's kInvalidArgument on
  // overflow. The caller keeps ids unique in the directory (a snapshot's
  // reader refuses a file naming one id under two keys). Locks, blocking
  // and allocation as Create. Not for use inside a callback.
  template <typename Directory>
  static Result<typename Directory::Handle> CreateRestored(
      Directory& dir, std::string_view key, RestoredIdentity identity,
      const CreateOptions& options,
      typename Directory::PayloadType payload =
          typename Directory::PayloadType()) {
    return dir.CreateRestored(key, identity, options, std::move(payload));
  }

  // Raises the id counter of `dir` so every later id is > `id` (a replayed
  // record names an id the replica never created, say an erase of an object
  // it never saw). Never lowers it. Lock-free; any thread.
  template <typename Directory>
  static void ReserveObjectIds(Directory& dir, ObjectId id) noexcept {
    dir.ReserveObjectIds(id);
  }

  // The id the next create of `dir` would get (every id handed out so far
  // is below it), for a snapshot to record. Lock-free; any thread.
  template <typename Directory>
  static ObjectId NextObjectIdPeek(const Directory& dir) noexcept {
    return dir.PeekNextObjectId();
  }

  // Census: fn(const Handle&, const ObjectMetadata&) for every active
  // object of `dir`, the metadata copied under the object's shared lock
  // without granting any lease (a census is not a read), fn called with no
  // lock or guard held. Chunks as VisitHandles (rule D9). kUnavailable after
  // shutdown.
  template <typename Directory, typename Fn>
  static Status Census(const Directory& dir, Fn&& fn, std::size_t chunk = 0) {
    return dir.Census(std::forward<Fn>(fn), chunk);
  }

  // Reads the unit `handle` belongs to in one step, for a snapshot, granting
  // no lease (a snapshot is not a read). A singleton: fn(const View&) under
  // its shared lock if it is still kActive. A member: the group lock, then
  // every live member's lock shared in ascending key order (lock order L2),
  // then fn(const View&) for each kActive member in that order, so the
  // group's membership and each member are read at one instant. Returns
  // kNotFound if the object (for a member: its group) is gone,
  // kInvalidArgument for an empty handle, kUnavailable after shutdown. fn
  // runs under those locks with the rules of a WithObject callback (no call
  // into this directory, no blocking); readers are not blocked, writers of
  // the unit wait. Allocates the member list. Not for use inside a callback.
  template <typename Directory, typename Fn>
  static Status InspectUnit(const Directory& dir,
                            const typename Directory::Handle& handle, Fn&& fn) {
    return dir.InspectUnit(handle, std::forward<Fn>(fn));
  }

  // The eviction kernel's revalidating commit for one ranked candidate
  // (rules V1, V2, V4, V5). For a member, its whole group is the unit: the
  // group lock, then every member exclusively in ascending key order (L2).
  // Every member must still be kActive with an expired lease, no hard pin,
  // no soft pin unless `allow_soft_pinned`, and no in-flight task; the
  // candidate must still be routed as itself and still have
  // `census_version`. Then, with the locks held, every member's charge is
  // released (Q2), it is marked kRemoving and its payload moved to *out;
  // after the member locks, each route slot is matched-unlinked and the
  // group leaves the catalog. The removal callback runs after every lock.
  // `expected_members` (0: any) is how many members the caller offered for
  // offload; a group that has another count now is not evicted. Returns kOk
  // (evicted, appended to *out), kAborted (changed or not evictable now: the
  // caller moves on to later candidates), kNotFound (already gone),
  // kUnavailable (shut down), or, when the directory's durable log refused
  // the reservation, that error's code with the status in *log_error if
  // given (nothing changed; the kernel stops its cycle at it). kOk with
  // *log_error set: evicted, but the log could not make the eviction
  // durable (H5). With `offered` not empty (a group offered through an
  // asynchronous offload, rule V7), every member must also be listed there
  // at the version it has now: a member added, or changed, since the offer
  // keeps the group. Not for use inside a callback.
  template <typename Directory>
  static StatusCode EvictIfUnchanged(
      Directory& dir, const typename Directory::Handle& candidate,
      std::uint64_t census_version, bool allow_soft_pinned,
      std::vector<EvictedObject<typename Directory::PayloadType>>* out,
      std::size_t expected_members = 0, Status* log_error = nullptr,
      std::span<const OfferedMember> offered = {}) {
    return dir.EvictIfUnchanged(candidate, census_version, allow_soft_pinned,
                                out, expected_members, log_error, offered);
  }

  // An asynchronous offload's "keep" completion for one object (rule V7):
  // under the object's exclusive lock, if it is still kActive, routed as
  // itself, at `version` and evictable (lease expired, no hard pin, no soft
  // pin unless `allow_soft_pinned`, no task), its quota charge moves to
  // `counted_bytes` (a growth is charged against the limit and may be
  // refused, a shrink is refunded: Q1, Q2), a kUpsert record with the new
  // envelope and no payload bytes is appended to the durable log, size,
  // counted bytes and version move (version + 1), and fn(ObjectAccess&)
  // runs under the same lock for the host to install the demoted payload
  // (the rules of a WithObjectExclusive callback). Errors, nothing changed:
  // kNotFound (gone), kAborted (changed or not evictable), kResourceExhausted
  // (the growth's charge), kFailedPrecondition (ledger mismatch),
  // kUnavailable, kInvalidArgument (empty handle), the log's Reserve or
  // Append error; a Finalize error after the change is returned as H5 (the
  // change is made, not acknowledged). Not for use inside a callback.
  template <typename Directory, typename Fn>
  static Status KeepIfUnchanged(Directory& dir,
                                const typename Directory::Handle& handle,
                                std::uint64_t version, bool allow_soft_pinned,
                                std::uint64_t size_bytes,
                                std::uint64_t counted_bytes, Fn&& fn) {
    return dir.KeepIfUnchanged(handle, version, allow_soft_pinned, size_bytes,
                               counted_bytes, fn);
  }
  // KeepIfUnchanged that installs `payload` as the demoted payload (moved
  // from only if installed) and, with a durable log whose
  // DurablePayloadCodec logs payloads, logs its bytes in the kUpsert record
  // (so a standby or a recovery has the payload readers see). The replaced
  // payload is destroyed off-lock. Errors as KeepIfUnchanged.
  template <typename Directory>
  static Status KeepWithPayloadIfUnchanged(
      Directory& dir, const typename Directory::Handle& handle,
      std::uint64_t version, bool allow_soft_pinned, std::uint64_t size_bytes,
      std::uint64_t counted_bytes, typename Directory::PayloadType& payload) {
    return dir.KeepWithPayloadIfUnchanged(handle, version, allow_soft_pinned,
                                          size_bytes, counted_bytes, payload);
  }

  // Log replay (cairn/ha/replay.h). Neither step is logged to the
  // directory's durable log: the change is already in a log.
  //
  // Erases `key` if it is routed as object `id`, whatever its lease (the
  // primary already decided). kNotFound if it is not. Locks as Erase.
  template <typename Directory>
  static Status ReplayErase(Directory& dir, std::string_view key, ObjectId id) {
    return dir.ReplayErase(key, id);
  }
  // Gives the object routed under `key` as `id` a logged post-state:
  // version, size and counted bytes (its quota charge moves by the
  // difference, admitted once already, so never refused) and, if `payload`
  // is not null, the payload. A state older than the object's (a lower
  // version) is skipped: the object already reflects a later record. kOk
  // (applied or skipped), kNotFound (not routed as `id`). Locks the object.
  template <typename Directory>
  static Status ReplayUpdate(Directory& dir, std::string_view key, ObjectId id,
                             std::uint64_t version, std::uint64_t size_bytes,
                             std::uint64_t counted_bytes,
                             typename Directory::PayloadType* payload) {
    return dir.ReplayUpdate(key, id, version, size_bytes, counted_bytes,
                            payload);
  }
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_DIRECTORY_DIRECTORY_HOOKS_H_
