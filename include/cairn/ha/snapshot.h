// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Snapshot and restore (H2, docs/snapshot.md). WriteSnapshot writes a
// GroupDirectory, one Tenant or a whole TenantRegistry to a file while it
// serves; RestoreSnapshot / RestoreRegistrySnapshot build a fresh directory
// or registry from such a file.
//
// What a snapshot holds: every kActive object's key, ObjectId, version,
// explicit group, size, counted and retained bytes, hard pin, the time its
// lease and soft pin had left when it was read, and its payload as the
// host's encoder wrote it; per tenant its name, instance id, quota limit and
// next ObjectId; per file the durable-log position it reflects
// (SnapshotWriteOptions::log_position) and, for a registry, its next
// TenantInstanceId. A snapshot at log position P plus a replay of every log
// record above P rebuilds the state (HA recovery).
// Objects that are not kActive (a pending put) are not written; a staged
// upsert is not either (its object is written in its committed state). Each
// unit is read in one step under its locks (DirectoryHooks::InspectUnit): a
// singleton under its shared lock, an explicit group under its group lock
// and every member's shared lock. No global stop: units are read at
// different instants, so a snapshot is consistent per object and per group,
// not across them.
//
// What a restore does: validates the whole file (checksums, lengths,
// grammar, counts) and decodes every payload before it creates anything;
// then creates the objects with their stored ObjectIds and versions
// (DirectoryHooks::CreateRestored, so later log records address them) in a
// new directory whose id counter resumes above every stored id and the
// stored next id, and whose route starts at a bucket count sized from the
// stored object count (std::bit_ceil of it, or the host's bucket_count if
// larger). Each group's lease is the largest member lease stored (group
// lease = max member deadline), restarted from the restore's clock; every
// object's counted bytes are charged to its tenant's account. A file that
// fails validation returns kDataLoss (kFailedPrecondition for a well-formed
// file of another format version, version 1 included) and nothing is
// created.
//
// Every file access goes through an Env (cairn/base/env.h):
// SnapshotWriteOptions::env for a write, the restores' `env` argument for a
// read; null means Env::Default().
//
// Thread safety: WriteSnapshot may run concurrently with every directory and
// registry call (it takes only the per-unit locks above, one unit at a time;
// the host's encoder runs under them with the rules of a WithObject callback
// and must not call into the directory). The file I/O runs with no lock
// held. Restores build objects nobody else can reach until they return.
// Neither is for use inside a directory callback.

#ifndef CAIRN_HA_SNAPSHOT_H_
#define CAIRN_HA_SNAPSHOT_H_

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cairn/base/env.h"
#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/directory/group_directory.h"
#include "cairn/directory/quota.h"
#include "cairn/ha/internal/snapshot_file.h"
#include "cairn/ha/snapshot_metrics.h"
#include "cairn/tenant/tenant_registry.h"

CAIRN_NAMESPACE_BEGIN

// Writes a payload's bytes into *out (empty on entry). Runs under the
// object's shared lock: it must not call into the directory or block. An
// error stops the snapshot; the target file is left as it was.
template <typename Payload>
using SnapshotEncoder =
    std::function<Status(const Payload& payload, std::string* out)>;
// Rebuilds a payload from the encoder's bytes (valid only for the call). An
// error fails the restore before anything is created.
template <typename Payload>
using SnapshotDecoder = std::function<Result<Payload>(std::string_view bytes)>;

// SnapshotStats and SnapshotMetrics: cairn/ha/snapshot_metrics.h.

namespace directory_internal {

// The longest lease or soft pin a restore grants (about 146 years): a
// damaged-but-checksummed or hand-made file cannot make restore time + ttl
// overflow the clock's 64 bits.
inline constexpr std::int64_t kMaxRestoredTtlNanos = std::int64_t{1} << 62;
inline std::chrono::nanoseconds RestoredTtl(std::int64_t stored) {
  return std::chrono::nanoseconds(std::min(stored, kMaxRestoredTtlNanos));
}

// Remaining time of a deadline at `now`; 0 for none or expired.
inline std::int64_t Remaining(std::int64_t deadline, std::int64_t now) {
  return deadline > now ? deadline - now : 0;
}

// The starting bucket count of a restored route holding `objects`: the mean
// then starts between 0.5 and 1 entries per bucket, inside the route's band,
// so the restore triggers no resize (docs/route.md, "Resizing").
inline std::size_t PresizedBucketCount(std::size_t requested,
                                       std::uint64_t objects) {
  const std::uint64_t want = std::bit_ceil(std::max<std::uint64_t>(objects, 1));
  return std::max<std::size_t>(requested, static_cast<std::size_t>(want));
}

// One object as read under its unit's locks; the views point into it.
struct SnapshotUnitObject {
  std::string key;
  std::string payload;
  SnapshotObject record;
};

// Writes one tenant section: every unit of `directory`, each read in one
// InspectUnit step, appended to `out` after its locks are released.
template <typename Payload, template <typename> class Route>
Status WriteTenantSection(const GroupDirectory<Payload, Route>& directory,
                          const SnapshotTenant& tenant,
                          const SnapshotEncoder<Payload>& encode,
                          SnapshotFileWriter* out) {
  using Directory = GroupDirectory<Payload, Route>;
  using Handle = typename Directory::Handle;
  using View = typename Directory::View;
  // Read before any unit: every id handed out before the visit is below it,
  // including ids of objects erased before the snapshot (never reused).
  SnapshotTenant record = tenant;
  record.next_object_id = DirectoryHooks::NextObjectIdPeek(directory);
  CAIRN_RETURN_IF_ERROR(out->BeginTenant(record));
  std::unordered_set<GroupId> seen_groups;
  std::vector<SnapshotUnitObject> unit;
  std::size_t used = 0;
  Status failed;
  Status visited = directory.VisitHandles([&](std::span<const Handle> handles) {
    for (const Handle& handle : handles) {
      if (!failed.ok()) return;
      const auto* group = handle->group();
      // A group is read whole once, from the first member the visit meets.
      if (group != nullptr && !seen_groups.insert(group->id()).second) {
        continue;
      }
      const std::int64_t now = directory.clock()->NowNanos();
      used = 0;
      Status encoded;
      Status read =
          DirectoryHooks::InspectUnit(directory, handle, [&](const View& view) {
            if (!encoded.ok()) return;
            if (used == unit.size()) unit.emplace_back();
            SnapshotUnitObject& o = unit[used++];
            o.key.assign(view.key());
            o.payload.clear();
            if (encode) encoded = encode(view.payload(), &o.payload);
            SnapshotObject& r = o.record;
            r.id = view.id();
            r.version = view.version();
            r.size_bytes = view.size_bytes();
            r.counted_bytes = view.counted_bytes();
            r.retained_bytes = view.retained_bytes();
            r.lease_ttl_nanos = Remaining(view.lease_deadline_nanos(), now);
            r.soft_pin_ttl_nanos =
                Remaining(view.soft_pin_deadline_nanos(), now);
            r.hard_pinned = view.hard_pinned();
          });
      if (read.code() == StatusCode::kNotFound) continue;  // gone meanwhile
      if (!read.ok()) {
        failed = read;
        return;
      }
      if (!encoded.ok()) {
        failed = encoded;
        return;
      }
      if (used == 0) continue;  // a group whose members are all pending
      // File I/O only now, with every lock of the unit released (L3).
      if (group != nullptr) failed = out->AddGroup(group->name(), used);
      for (std::size_t i = 0; i < used && failed.ok(); ++i) {
        SnapshotUnitObject& o = unit[i];
        o.record.key = o.key;
        o.record.payload = o.payload;
        failed = out->AddObject(o.record);
      }
    }
  });
  CAIRN_RETURN_IF_ERROR(visited);
  CAIRN_RETURN_IF_ERROR(failed);
  return out->EndTenant();
}

// Runs `sections(writer)` and commits the file.
template <typename Sections>
Status WriteSnapshotFileUntimed(const std::string& path,
                                const SnapshotWriteOptions& options,
                                SnapshotStats* stats, Sections&& sections) {
  Result<std::unique_ptr<SnapshotFileWriter>> made =
      SnapshotFileWriter::Create(path, options);
  if (!made.ok()) return std::move(made).status();
  SnapshotFileWriter& writer = *made.value();
  CAIRN_RETURN_IF_ERROR(sections(&writer));
  CAIRN_RETURN_IF_ERROR(writer.Commit());
  if (stats != nullptr) {
    *stats = SnapshotStats{};
    stats->tenants = writer.tenants();
    stats->groups = writer.groups();
    stats->objects = writer.objects();
    stats->file_bytes = writer.bytes() + kSnapshotTrailerBytes;
    stats->log_position = options.log_position;
  }
  return Status::Ok();
}

// As above, recorded into options.metrics (if set) with the time it took.
template <typename Sections>
Status WriteSnapshotFile(const std::string& path,
                         const SnapshotWriteOptions& options,
                         SnapshotStats* stats, Sections&& sections) {
  SnapshotMetrics* const metrics = options.metrics;
  if (metrics == nullptr) {
    return WriteSnapshotFileUntimed(path, options, stats,
                                    std::forward<Sections>(sections));
  }
  SnapshotStats written;
  const std::int64_t start = metrics->clock()->NowNanos();
  Status s = WriteSnapshotFileUntimed(path, options, &written,
                                      std::forward<Sections>(sections));
  metrics->RecordWrite(
      s, written,
      std::chrono::nanoseconds(metrics->clock()->NowNanos() - start));
  if (s.ok() && stats != nullptr) *stats = written;
  return s;
}

template <typename Payload>
Status CheckEncoder(const SnapshotEncoder<Payload>& encode) {
  if (!encode && !std::is_same_v<Payload, EmptyPayload>) {
    return InvalidArgumentError("a snapshot of payloads needs an encoder");
  }
  return Status::Ok();
}

// What one tenant's restore will create: the units it keeps, with their
// decoded payloads in object order. Built before anything is created.
template <typename Payload>
struct TenantRestorePlan {
  const ParsedSnapshotTenant* parsed = nullptr;
  struct Unit {
    std::string_view group;  // empty: a singleton
    std::size_t first = 0;
    std::size_t count = 0;
    std::int64_t lease_ttl_nanos = 0;  // a group's: the max over members
  };
  std::vector<Unit> units;
  std::vector<Payload> payloads;  // one per kept object, in unit order
  std::uint64_t objects = 0;
  std::uint64_t groups = 0;
  std::uint64_t counted_bytes = 0;
  std::size_t skipped_units = 0;
  // The largest ObjectId in the section, skipped units included: the
  // restored id counter resumes above it and above the stored next id.
  std::uint64_t max_object_id = 0;
};

template <typename Payload>
Result<TenantRestorePlan<Payload>> PlanTenantRestore(
    const ParsedSnapshotTenant& tenant, const SnapshotDecoder<Payload>& decode,
    std::size_t max_key_bytes) {
  TenantRestorePlan<Payload> plan;
  plan.parsed = &tenant;
  std::unordered_set<std::string_view> keys;
  std::unordered_set<std::string_view> group_names;
  keys.reserve(tenant.objects.size());
  for (const SnapshotObject& o : tenant.objects) {
    plan.max_object_id = std::max<std::uint64_t>(plan.max_object_id, o.id);
  }
  for (const SnapshotUnit& u : tenant.units) {
    if (u.group_name.size() > max_key_bytes) {
      return InvalidArgumentError(
          "snapshot group name longer than the directory's max_key_bytes");
    }
    bool clash = !u.group_name.empty() && group_names.contains(u.group_name);
    std::int64_t lease = 0;
    for (std::size_t i = u.first; i < u.first + u.count; ++i) {
      const SnapshotObject& o = tenant.objects[i];
      if (o.key.size() > max_key_bytes) {
        return InvalidArgumentError(
            "snapshot key longer than the directory's max_key_bytes");
      }
      clash = clash || keys.contains(o.key);
      // Group lease = max member deadline: every member of a group stores the
      // lease it saw; the latest one wins, as a lease only moves later (P1).
      lease = std::max(lease, o.lease_ttl_nanos);
    }
    // A key repeated inside the unit: one hash set, linear in its members.
    if (!clash && u.count > 1) {
      std::unordered_set<std::string_view> unit_keys;
      unit_keys.reserve(u.count);
      for (std::size_t i = u.first; i < u.first + u.count && !clash; ++i) {
        clash = !unit_keys.insert(tenant.objects[i].key).second;
      }
    }
    if (clash) {
      ++plan.skipped_units;
      continue;
    }
    if (!u.group_name.empty()) {
      group_names.insert(u.group_name);
      ++plan.groups;
    }
    for (std::size_t i = u.first; i < u.first + u.count; ++i) {
      const SnapshotObject& o = tenant.objects[i];
      keys.insert(o.key);
      if (decode) {
        Result<Payload> p = decode(o.payload);
        if (!p.ok()) {
          const Status& s = p.status();
          return Status(s.code(), "payload of snapshot key '" +
                                      std::string(o.key) +
                                      "': " + std::string(s.message()));
        }
        plan.payloads.push_back(std::move(p).value());
      } else if constexpr (std::is_same_v<Payload, EmptyPayload>) {
        if (!o.payload.empty()) {
          return InvalidArgumentError(
              "snapshot holds payload bytes and no decoder was given");
        }
        plan.payloads.emplace_back();
      } else {
        return InvalidArgumentError("restoring payloads needs a decoder");
      }
      plan.counted_bytes += o.counted_bytes;
      ++plan.objects;
    }
    plan.units.push_back({u.group_name, u.first, u.count,
                          u.group_name.empty()
                              ? tenant.objects[u.first].lease_ttl_nanos
                              : lease});
  }
  return plan;
}

// Creates the plan's objects in `directory` with their stored ids and
// versions (DirectoryHooks::CreateRestored, charges forced), then resumes
// the id counter above max(stored next id, largest stored id); *charged
// accumulates the counted bytes charged so far (for the caller's rollback).
template <typename Payload, template <typename> class Route>
Status LoadTenant(GroupDirectory<Payload, Route>& directory,
                  TenantRestorePlan<Payload>& plan, std::uint64_t* charged) {
  DirectoryHooks::ReserveObjectIds(
      directory, std::max<std::uint64_t>(
                     plan.max_object_id,
                     plan.parsed->tenant.next_object_id - 1));  // never 0
  std::size_t next_payload = 0;
  for (const auto& u : plan.units) {
    for (std::size_t i = u.first; i < u.first + u.count; ++i) {
      const SnapshotObject& o = plan.parsed->objects[i];
      CreateOptions options;
      options.group = u.group;
      options.size_bytes = o.size_bytes;
      options.counted_bytes = o.counted_bytes;
      options.retained_bytes = o.retained_bytes;
      options.lease_ttl = RestoredTtl(u.lease_ttl_nanos);
      options.soft_pin_ttl = RestoredTtl(o.soft_pin_ttl_nanos);
      options.hard_pin = o.hard_pinned;
      auto made = DirectoryHooks::CreateRestored(
          directory, o.key, {.id = o.id, .version = o.version}, options,
          std::move(plan.payloads[next_payload++]));
      if (!made.ok()) {
        const Status& s = made.status();
        return Status(s.code(), "restoring snapshot key '" +
                                    std::string(o.key) +
                                    "': " + std::string(s.message()));
      }
      *charged += o.counted_bytes;
    }
  }
  return Status::Ok();
}

}  // namespace directory_internal

// ---- write -----------------------------------------------------------------

// Writes every kActive object of `directory` to `path` as one tenant section
// named options.tenant_name, with the directory's tenant instance and its
// account's limit (unlimited without one). The file is written to
// its own temporary file (`path`.tmp.<pid>.<n>), synced (options.sync), renamed
// over `path`, and the directory synced. Errors: kInvalidArgument (empty path;
// a non-empty Payload and no encoder), the encoder's error, kUnavailable (shut
// down), I/O errors (kNotFound: no such directory; kResourceExhausted: disk
// full; kInternal). On error `path` is untouched and the temporary file
// removed. Locks: one unit at a time (DirectoryHooks::InspectUnit); blocks
// writers of that unit while it is read, never readers. Allocates.
template <typename Payload, template <typename> class Route>
Status WriteSnapshot(
    const GroupDirectory<Payload, Route>& directory, const std::string& path,
    const std::type_identity_t<SnapshotEncoder<Payload>>& encode,
    const SnapshotWriteOptions& options = {}, SnapshotStats* stats = nullptr) {
  CAIRN_RETURN_IF_ERROR(directory_internal::CheckEncoder<Payload>(encode));
  directory_internal::SnapshotTenant tenant;
  tenant.name = options.tenant_name;
  tenant.instance = directory.tenant_instance();
  tenant.quota_limit_bytes = directory.quota() != nullptr
                                 ? directory.quota()->limit()
                                 : QuotaAccount::kUnlimited;
  return directory_internal::WriteSnapshotFile(
      path, options, stats, [&](directory_internal::SnapshotFileWriter* w) {
        return directory_internal::WriteTenantSection(directory, tenant, encode,
                                                      w);
      });
}

// As above for one tenant: its name, instance id and quota limit are
// recorded (options.tenant_name is not used).
template <typename Payload, template <typename> class Route>
Status WriteSnapshot(
    const Tenant<Payload, Route>& tenant, const std::string& path,
    const std::type_identity_t<SnapshotEncoder<Payload>>& encode,
    const SnapshotWriteOptions& options = {}, SnapshotStats* stats = nullptr) {
  CAIRN_RETURN_IF_ERROR(directory_internal::CheckEncoder<Payload>(encode));
  directory_internal::SnapshotTenant record;
  record.name = tenant.name();
  record.instance = tenant.instance_id();
  record.quota_limit_bytes = tenant.quota().limit();
  return directory_internal::WriteSnapshotFile(
      path, options, stats, [&](directory_internal::SnapshotFileWriter* w) {
        return directory_internal::WriteTenantSection(tenant.directory(),
                                                      record, encode, w);
      });
}

// As above for every tenant of `registry` (the registry's snapshot at the
// call: a tenant created later is not written, a tenant removed meanwhile
// still is), one section per tenant, in no particular order.
template <typename Payload, template <typename> class Route>
Status WriteSnapshot(
    const TenantRegistry<Payload, Route>& registry, const std::string& path,
    const std::type_identity_t<SnapshotEncoder<Payload>>& encode,
    const SnapshotWriteOptions& options = {}, SnapshotStats* stats = nullptr) {
  CAIRN_RETURN_IF_ERROR(directory_internal::CheckEncoder<Payload>(encode));
  // Read before the tenants: every instance handed out before is below it.
  const TenantInstanceId next_instance =
      RegistryHooks::NextInstancePeek(registry);
  const auto tenants = registry.Tenants();
  return directory_internal::WriteSnapshotFile(
      path, options, stats, [&](directory_internal::SnapshotFileWriter* w) {
        w->set_next_instance(next_instance);
        for (const auto& tenant : tenants) {
          directory_internal::SnapshotTenant record;
          record.name = tenant->name();
          record.instance = tenant->instance_id();
          record.quota_limit_bytes = tenant->quota().limit();
          CAIRN_RETURN_IF_ERROR(directory_internal::WriteTenantSection(
              tenant->directory(), record, encode, w));
        }
        return Status::Ok();
      });
}

// ---- restore ---------------------------------------------------------------

// Builds a new directory from a snapshot holding one tenant section.
// `options` are the new directory's (clock, callbacks, quota account, tenant
// instance, ...); options.route.bucket_count is raised to the presized
// count. Every object keeps its stored ObjectId and version; the id counter
// resumes above the stored next id and every stored id. The stored quota
// limit and tenant instance are not applied: the host's account
// (options.quota) and options.tenant_instance are. Before anything is
// created the file is validated, every payload decoded and the account
// asked for the sum of the counted bytes (the objects are then charged with
// ForceCharge, so a host charging the account meanwhile may leave it over
// its limit rather than fail the restore half-way). Errors, with nothing
// created and the account unchanged: kDataLoss (corrupt, truncated or not a
// snapshot), kFailedPrecondition (another format version), kInvalidArgument
// (several tenant sections; a key or group name over options.max_key_bytes;
// payload bytes and no decoder), kResourceExhausted (the account cannot take
// the restored bytes; the message carries the deficit), the decoder's
// error, kNotFound (no such file), a create's error (route back-pressure).
// Units that repeat a key or group name already restored are skipped
// (stats->skipped_units). The file is read through `env` (null:
// Env::Default()). Allocates; blocks only on file reads.
template <typename Payload = EmptyPayload,
          template <typename> class Route = ObjectRouteIndex>
Result<std::unique_ptr<GroupDirectory<Payload, Route>>> RestoreSnapshot(
    const std::string& path, const SnapshotDecoder<Payload>& decode,
    DirectoryOptions options = {}, SnapshotStats* stats = nullptr,
    Env* env = nullptr) {
  using Directory = GroupDirectory<Payload, Route>;
  Result<directory_internal::ParsedSnapshot> parsed =
      directory_internal::ReadSnapshotFile(path, env);
  if (!parsed.ok()) return std::move(parsed).status();
  if (parsed->tenants.size() != 1) {
    return InvalidArgumentError(
        "the snapshot holds " + std::to_string(parsed->tenants.size()) +
        " tenants; restore it with RestoreRegistrySnapshot");
  }
  auto plan = directory_internal::PlanTenantRestore<Payload>(
      parsed->tenants[0], decode, options.max_key_bytes);
  if (!plan.ok()) return std::move(plan).status();
  QuotaAccount* const quota = options.quota;
  if (quota != nullptr && plan->counted_bytes > 0) {
    // Asked once for the whole restore, so the deficit is the restore's.
    if (Status s = quota->Charge(plan->counted_bytes); !s.ok()) {
      return Status(s.code(),
                    "restoring " + std::to_string(plan->counted_bytes) +
                        " counted bytes: " + std::string(s.message()));
    }
    quota->Release(plan->counted_bytes).IgnoreError();
  }
  options.route.bucket_count = directory_internal::PresizedBucketCount(
      options.route.bucket_count, plan->objects);
  auto directory = std::make_unique<Directory>(std::move(options));
  std::uint64_t charged = 0;
  if (Status s = directory_internal::LoadTenant(*directory, *plan, &charged);
      !s.ok()) {
    // The directory dies unseen; its objects' charges leave the account.
    if (quota != nullptr) quota->Release(charged).IgnoreError();
    return s;
  }
  if (stats != nullptr) {
    *stats = SnapshotStats{};
    stats->tenants = 1;
    stats->groups = plan->groups;
    stats->objects = plan->objects;
    stats->file_bytes = parsed->bytes.size();
    stats->log_position = parsed->log_position;
    stats->skipped_units = plan->skipped_units;
  }
  return directory;
}

// Builds a new registry from a snapshot: one tenant per section, under its
// stored name and its stored TenantInstanceId (RegistryHooks::CreateInstance:
// log records name tenants by instance, T2), its stored quota limit and
// options.default_tenant_options.directory as its directory options (route
// presized from its own object count); every object keeps its stored
// ObjectId and version, each directory's id counter resumes above its
// stored next id and every stored id, and the registry's instance counter
// above its stored next instance and every stored instance. The tenant
// named options.default_tenant is the registry's default tenant, built with
// the stored instance (options.default_tenant_instance is set to it); a
// file with no section of that name gives the default tenant
// options.default_tenant_instance if set (kInvalidArgument if a section
// holds it), else a fresh instance above every stored one. A section
// stored with instance 0 (a lone directory's snapshot that had none) gets a
// fresh instance. Each account is charged its objects' counted bytes
// (forced: the primary admitted them) and then given its stored limit, so
// a tenant that was over its limit when snapshotted is restored over it
// (QuotaAccount::deficit(), which the tenant-quota eviction policy frees)
// rather than refused. Errors, with no registry built: as RestoreSnapshot,
// plus kInvalidArgument for a tenant name the registry refuses. The file is
// read through `env` (null: Env::Default()).
template <typename Payload = EmptyPayload,
          template <typename> class Route = ObjectRouteIndex>
Result<std::unique_ptr<TenantRegistry<Payload, Route>>> RestoreRegistrySnapshot(
    const std::string& path, const SnapshotDecoder<Payload>& decode,
    RegistryOptions options = {}, SnapshotStats* stats = nullptr,
    Env* env = nullptr) {
  using Registry = TenantRegistry<Payload, Route>;
  using Plan = directory_internal::TenantRestorePlan<Payload>;
  Result<directory_internal::ParsedSnapshot> parsed =
      directory_internal::ReadSnapshotFile(path, env);
  if (!parsed.ok()) return std::move(parsed).status();
  const DirectoryOptions base = options.default_tenant_options.directory;
  std::vector<Plan> plans;
  plans.reserve(parsed->tenants.size());
  TenantInstanceId max_instance = 0;
  for (const auto& tenant : parsed->tenants) {
    const std::string_view name = tenant.tenant.name;
    if (name.empty() || name.size() > options.max_name_bytes) {
      return InvalidArgumentError("snapshot tenant name the registry refuses");
    }
    auto plan = directory_internal::PlanTenantRestore<Payload>(
        tenant, decode, base.max_key_bytes);
    if (!plan.ok()) return std::move(plan).status();
    plans.push_back(std::move(plan).value());
    max_instance = std::max(max_instance, tenant.tenant.instance);
  }
  // Every instance handed out by the snapshotted registry is below this.
  const TenantInstanceId resume =
      std::max<TenantInstanceId>(parsed->next_instance, max_instance + 1);
  const std::uint64_t default_limit =
      options.default_tenant_options.quota_limit_bytes;
  options.default_tenant_options.quota_limit_bytes = QuotaAccount::kUnlimited;
  bool default_in_file = false;
  for (const Plan& plan : plans) {
    if (plan.parsed->tenant.name == options.default_tenant) {
      default_in_file = true;
      options.default_tenant_options.directory.route.bucket_count =
          directory_internal::PresizedBucketCount(base.route.bucket_count,
                                                  plan.objects);
      options.default_tenant_instance = plan.parsed->tenant.instance != 0
                                            ? plan.parsed->tenant.instance
                                            : resume;
    } else if (plan.parsed->tenant.instance != 0 &&
               plan.parsed->tenant.instance ==
                   options.default_tenant_instance) {
      return InvalidArgumentError(
          "options.default_tenant_instance is a stored tenant's instance");
    }
  }
  if (options.default_tenant_instance == 0) {
    options.default_tenant_instance = resume;
  }
  const std::string default_name = options.default_tenant;
  auto registry = std::make_unique<Registry>(std::move(options));
  RegistryHooks::ReserveInstances(*registry, resume - 1);
  SnapshotStats totals;
  for (Plan& plan : plans) {
    const std::string_view name = plan.parsed->tenant.name;
    typename Registry::Handle tenant;
    if (name == default_name) {
      tenant = registry->default_tenant();
    } else {
      TenantOptions made;
      made.quota_limit_bytes = QuotaAccount::kUnlimited;
      made.directory = base;
      made.directory.route.bucket_count =
          directory_internal::PresizedBucketCount(base.route.bucket_count,
                                                  plan.objects);
      Result<typename Registry::Handle> created =
          plan.parsed->tenant.instance != 0
              ? RegistryHooks::CreateInstance(*registry, name,
                                              plan.parsed->tenant.instance,
                                              std::move(made))
              : registry->GetOrCreate(
                    name, [&made](std::string_view) -> Result<TenantOptions> {
                      return made;
                    });
      if (!created.ok()) return std::move(created).status();
      tenant = std::move(created).value();
    }
    std::uint64_t charged = 0;
    CAIRN_RETURN_IF_ERROR(
        directory_internal::LoadTenant(tenant->directory(), plan, &charged));
    tenant->quota().set_limit(plan.parsed->tenant.quota_limit_bytes);
    ++totals.tenants;
    totals.groups += plan.groups;
    totals.objects += plan.objects;
    totals.skipped_units += plan.skipped_units;
  }
  if (!default_in_file)
    registry->default_tenant()->quota().set_limit(default_limit);
  if (stats != nullptr) {
    totals.file_bytes = parsed->bytes.size();
    totals.log_position = parsed->log_position;
    *stats = totals;
  }
  return registry;
}

CAIRN_NAMESPACE_END

#endif  // CAIRN_HA_SNAPSHOT_H_
