// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The options, per-call settings and diagnostics of a GroupDirectory
// (cairn/directory/group_directory.h): what a host fills in and reads back.

#ifndef CAIRN_DIRECTORY_DIRECTORY_OPTIONS_H_
#define CAIRN_DIRECTORY_DIRECTORY_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>

#include "cairn/base/clock.h"
#include "cairn/base/version.h"
#include "cairn/directory/durable_log.h"
#include "cairn/directory/object_entry.h"
#include "cairn/directory/quota.h"
#include "cairn/route/route_diagnostics.h"
#include "cairn/route/route_options.h"

CAIRN_NAMESPACE_BEGIN

using KeySpan = std::span<const std::string_view>;

// What the removal callback learns about an object that left the directory.
// Emitted exactly once per instance (D6), off-lock (L3).
struct RemovedObject {
  ObjectToken token;
  std::string_view key;  // valid for the duration of the callback
  GroupId group = kNoGroup;
  std::uint64_t size_bytes = 0;
  std::uint64_t counted_bytes = 0;
};

struct DirectoryOptions {
  TenantInstanceId tenant_instance = 1;
  // Keys (and group names) longer than this are rejected.
  std::size_t max_key_bytes = 1024;
  // Injected monotonic clock (P5); must outlive the directory.
  const Clock* clock = nullptr;  // null: Clock::Steady()
  // Lease granted by every shared read (WithObject(s), WithHandle,
  // WithToken); 0 grants none. Exclusive access never grants implicitly.
  std::chrono::nanoseconds read_lease_ttl{0};
  // Passed to the route: bucket and writer-stripe counts, and the epoch
  // domain it retires into (null: the route owns one).
  RouteOptions route;
  // Lifecycle stripes (creates and erases of keys hashing to one stripe are
  // serialised; 0 means 1). Allocated by the directory's first create or
  // erase, not by the constructor: an empty directory holds none
  // (docs/directory.md, "Memory of an empty directory").
  std::size_t lifecycle_stripes = 256;
  // Default VisitHandles chunk.
  std::size_t visit_chunk = 256;
  // Called once per removed object instance, with no directory lock held.
  std::function<void(const RemovedObject&)> on_removed;
  // The account this directory charges each object's counted bytes to
  // (Q1-Q3, docs/tenants.md); null: nothing is charged. Must outlive the
  // directory. The TenantRegistry binds each tenant's own account here.
  QuotaAccount* quota = nullptr;
  // A two-phase put or upsert not committed within this time is aborted by
  // ReapPendingPuts(); 0: never reaped.
  std::chrono::nanoseconds pending_put_timeout{0};
  // Durable log (H1, docs/durable_log.md): every change a reader can see
  // (create, commit, upsert, erase, group erase, eviction) is reserved in this
  // log before any directory lock and appended under the object lock before it
  // becomes visible; a failed reservation or append changes nothing. Null: no
  // log (one null test per mutation). Must outlive the directory.
  DurableLog* durable_log = nullptr;
};

// The staged state of an upsert (BeginUpsert): what the object will count
// once CommitUpsert() installs it.
struct UpsertOptions {
  std::uint64_t size_bytes = 0;
  std::uint64_t counted_bytes = 0;
};

// Names one staging of an object's upsert: BeginUpsert's out-parameter,
// passed back to CommitUpsert / AbortUpsert so they settle that staging and
// no later one (D11). Numbers are per object instance, from 1; 0 names none.
struct UpsertStage {
  std::uint32_t number = 0;
};

// How a two-phase put settles (Commit, BatchCommit). A host that reserved
// room for N replicas at CreatePending and saw only some of them written
// commits the bytes those replicas count; the rest of the reservation goes
// back to the tenant's account in the same step (Q4, docs/tenants.md).
struct CommitOptions {
  // The counted bytes the object keeps: at most what CreatePending charged
  // (more is kInvalidArgument; a larger charge is AdjustCharge's). Empty:
  // the whole reservation.
  std::optional<std::uint64_t> counted_bytes;
};

// A change to an active object's committed charge (AdjustCharge): a
// replica added or replaced charges its bytes, a replica lost refunds its
// bytes. The object's counted bytes move by charge_bytes - refund_bytes, in
// one step; a net increase is admitted against the quota as a put's charge
// is (Q1), a net decrease refunded at once.
struct ChargeAdjustment {
  std::uint64_t charge_bytes = 0;  // a new or replacement replica's bytes
  std::uint64_t refund_bytes = 0;  // a lost or replaced replica's bytes
};

struct CreateOptions {
  // Empty: a singleton. Otherwise create-or-join this explicit group.
  std::string_view group;
  std::uint64_t size_bytes = 0;
  // The bytes this object counts for (quota). They may live anywhere
  // (another process, a disk); cairn only reports them. They change only by
  // a settling Commit (CommitOptions), AdjustCharge or a committed upsert.
  std::uint64_t counted_bytes = 0;
  // Host memory the entry keeps alive and frees with it (its payload's
  // buffers, say). Once the object is erased these bytes, with the entry's
  // route record, are charged to the route's retired-bytes cap until its
  // grace period ends, so the cap bounds real memory (docs/route.md).
  std::uint64_t retained_bytes = 0;
  // Initial lease (P1); for a member it extends the group's lease before the
  // member is routed (D8).
  std::chrono::nanoseconds lease_ttl{0};
  std::chrono::nanoseconds soft_pin_ttl{0};
  bool hard_pin = false;  // Hard pins are set only at create (P3)
};

struct EraseOptions {
  // Erase even if the lease has not expired (P4).
  bool force = false;
  // Without force, also refuse (kFailedPrecondition, the message says why)
  // an object that is hard- or soft-pinned, has a task in flight or a staged
  // upsert, and for EraseGroup a group with such a member or a member that
  // is a pending put: what TenantRegistry::RemoveAll keeps without force
  // (docs/tenants.md). Checked under the object locks, with the lease.
  bool only_if_idle = false;
};

struct DirectoryDiagnostics {
  std::size_t objects = 0;
  std::size_t groups = 0;
  RouteDiagnostics route;
  // Creates/erases that found their key's lifecycle stripe taken (write path
  // only). Read-path lock waits are not counted: counting them would need a
  // shared write per lookup.
  std::uint64_t lifecycle_stripe_waits = 0;
  // Removed objects whose route unlink failed (route back-pressure) and is
  // retried by later writes; they are invisible to every lookup meanwhile.
  std::size_t pending_unlinks = 0;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_DIRECTORY_DIRECTORY_OPTIONS_H_
