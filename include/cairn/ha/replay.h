// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Log replay (H3, docs/ha.md): applying durable-log records to a directory
// or a registry, so a snapshot taken at a log position plus the records
// above it rebuild the primary's state.
//
// Every record is a post-state (durable_log.h): a create, commit, upsert or
// charge adjustment carries the object's id, version, sizes and (with payload
// logging) its payload; a removal names the object instances it removed; a
// tenant record names the instance. Applying one is idempotent and needs no
// knowledge of what the target already reflects:
//   - a post-state for (key, id): the key routed as `id` takes it unless the
//     object's version is already higher; routed as another id, that object
//     is replaced (it can only be one a later record recreates); unrouted,
//     the object is created with its logged id and version;
//   - a removal of (key, id): erased if routed as `id`, else nothing;
//   - a tenant creation: the name's tenant becomes that instance (another
//     instance under the name is replaced); a removal: removed if it is
//     still that instance.
// So records applied in LSN order onto a snapshot that reflects every
// record at or below its log position, and possibly some above it, give the
// state the last record describes (the argument is in docs/ha.md).
//
// Thread safety: ApplyDurableRecord may run beside other calls into the
// directory, but a replica's only writer should be its applier (a standby's
// registry refuses host writes until it is promoted). LogApplier is not
// thread-safe: one thread applies.

#ifndef CAIRN_HA_REPLAY_H_
#define CAIRN_HA_REPLAY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/directory/directory_hooks.h"
#include "cairn/directory/durable_log.h"
#include "cairn/directory/group_directory.h"
#include "cairn/tenant/tenant_registry.h"

CAIRN_NAMESPACE_BEGIN

// A DurableLog that refuses every Reserve (kFailedPrecondition) until
// Attach names the log it forwards to. A standby's registry logs through
// one, so host writes fail until promotion and then go to the promoted log.
// Thread safety: every method is safe from any thread; Attach once.
class StandbyLog final : public DurableLog {
 public:
  Result<LogReservation> Reserve(std::size_t bytes) override {
    DurableLog* target = target_.load(std::memory_order_acquire);
    if (target == nullptr) {
      return FailedPreconditionError(
          "a standby accepts no writes until it is promoted");
    }
    return target->Reserve(bytes);
  }
  // A reservation was granted by the target, so it is set from here on.
  Status Append(const LogReservation& reservation,
                std::string_view record) override {
    return target_.load(std::memory_order_acquire)->Append(reservation, record);
  }
  Status Finalize(const LogReservation& reservation,
                  std::span<const ObjectToken> tokens) override {
    return target_.load(std::memory_order_acquire)
        ->Finalize(reservation, tokens);
  }
  void Cancel(const LogReservation& reservation) noexcept override {
    target_.load(std::memory_order_acquire)->Cancel(reservation);
  }
  Result<LogReservation> ReserveBatch(std::size_t records,
                                      std::size_t bytes) override {
    DurableLog* target = target_.load(std::memory_order_acquire);
    if (target == nullptr) {
      return FailedPreconditionError(
          "a standby accepts no writes until it is promoted");
    }
    return target->ReserveBatch(records, bytes);
  }

  // From now on every call goes to `log` (not owned; outlives this).
  void Attach(DurableLog* log) noexcept {
    target_.store(log, std::memory_order_release);
  }
  bool attached() const noexcept {
    return target_.load(std::memory_order_acquire) != nullptr;
  }

 private:
  std::atomic<DurableLog*> target_{nullptr};
};

namespace ha_internal {

// The payload a post-state carries: decoded with the codec's Decode when
// logged; *has is false when the record carries none.
template <typename Payload>
Status DecodeLoggedPayload(const DurableObjectState& state, Payload* out,
                           bool* has) {
  *has = false;
  if (!state.payload_logged) return Status::Ok();
  if constexpr (DurablePayloadCodec<Payload>::kLogsPayload) {
    Result<Payload> decoded =
        DurablePayloadCodec<Payload>::Decode(state.payload);
    if (!decoded.ok()) return std::move(decoded).status();
    *out = std::move(decoded).value();
    *has = true;
    return Status::Ok();
  } else {
    return FailedPreconditionError(
        "the log carries payload bytes this payload type cannot decode");
  }
}

}  // namespace ha_internal

// Applies one record's object changes to `directory` (its tenant field is
// not checked; tenant records are kInvalidArgument). Idempotent, as the
// header comment says. Errors: kDataLoss (a record whose shape its op does
// not allow), the payload decoder's error, a directory error (kUnavailable
// after shutdown, kResourceExhausted under route back-pressure); applying
// the record again after an error completes it. Not logged to the
// directory's durable log. Not for use inside a directory callback.
template <typename Payload, template <typename> class Route>
Status ApplyDurableRecord(GroupDirectory<Payload, Route>& directory,
                          const DurableRecordView& record) {
  switch (record.op) {
    case DurableOp::kCreate:
    case DurableOp::kCommit:
    case DurableOp::kUpsert:
    case DurableOp::kAdjust: {
      if (record.objects.size() != 1) {
        return DataLossError("a post-state record names one object");
      }
      const DurableObjectState& state = record.objects[0];
      Payload payload{};
      bool has_payload = false;
      CAIRN_RETURN_IF_ERROR(
          ha_internal::DecodeLoggedPayload(state, &payload, &has_payload));
      Status updated = DirectoryHooks::ReplayUpdate(
          directory, state.key, state.object, state.version, state.size_bytes,
          state.counted_bytes, has_payload ? &payload : nullptr);
      if (updated.code() != StatusCode::kNotFound) return updated;
      // Routed as another instance: one a later record recreates, or a
      // leftover of an earlier one; either way this post-state replaces it.
      if (auto routed = directory.Pin(state.key); routed.ok()) {
        Status erased = DirectoryHooks::ReplayErase(
            directory, state.key, routed.value().token().object);
        if (!erased.ok() && erased.code() != StatusCode::kNotFound) {
          return erased;
        }
      }
      CreateOptions options;
      options.group = record.group_name;
      options.size_bytes = state.size_bytes;
      options.counted_bytes = state.counted_bytes;
      auto made = DirectoryHooks::CreateRestored(
          directory, state.key,
          DirectoryHooks::RestoredIdentity{state.object, state.version},
          options, std::move(payload));
      return made.ok() ? Status::Ok() : std::move(made).status();
    }
    case DurableOp::kErase:
    case DurableOp::kEraseGroup:
    case DurableOp::kEvict:
      for (const DurableObjectState& state : record.objects) {
        Status erased =
            DirectoryHooks::ReplayErase(directory, state.key, state.object);
        if (!erased.ok() && erased.code() != StatusCode::kNotFound) {
          return erased;
        }
        // Ids are never reused, even for an object this replica never saw.
        DirectoryHooks::ReserveObjectIds(directory, state.object);
      }
      return Status::Ok();
    case DurableOp::kTenantCreate:
    case DurableOp::kTenantRemove:
      break;
  }
  return InvalidArgumentError("a tenant record applies to a registry");
}

// What a LogApplier did.
struct ApplyStats {
  std::uint64_t applied = 0;  // records applied
  // Records at or below applied_lsn() when offered (already reflected).
  std::uint64_t already_applied = 0;
  // Object records of a tenant instance the registry does not hold: one
  // removed before the snapshot (its objects are not state any more).
  std::uint64_t removed_tenant = 0;
};

// Applies a durable log, record by record in LSN order, to a registry. The
// registry must be a replica: nothing but the applier changes it (a
// Standby's registry refuses host writes). Not thread-safe.
template <typename Payload = EmptyPayload,
          template <typename> class Route = ObjectRouteIndex>
class LogApplier {
 public:
  using Registry = TenantRegistry<Payload, Route>;
  using Factory = typename Registry::Factory;

  // `applied`: the LSN `registry` reflects (a restored snapshot's log
  // position; 0 for a registry no record has touched). `factory` gives the
  // options of each tenant a kTenantCreate record makes (null: defaults);
  // the record's quota limit is applied over them. The registry must
  // outlive the applier.
  LogApplier(Registry* registry, Lsn applied, Factory factory = nullptr)
      : registry_(registry), applied_(applied), factory_(std::move(factory)) {
    for (const auto& tenant : registry_->Tenants()) {
      tenants_[tenant->instance_id()] = tenant;
    }
  }

  // Applies the record `body` at `lsn`. At or below applied_lsn(): already
  // reflected, skipped (OK). applied_lsn() + 1: applied, and applied_lsn()
  // advances. Higher: kDataLoss (a gap; nothing applied). Errors leave
  // applied_lsn() where it was: kDataLoss / kFailedPrecondition (the record
  // does not decode), the directory's or registry's error (offering the
  // same record again resumes it: every step is idempotent).
  Status Apply(Lsn lsn, std::string_view body) {
    if (lsn <= applied_) {
      ++stats_.already_applied;
      return Status::Ok();
    }
    if (lsn != applied_ + 1) {
      return DataLossError("durable log gap: expected LSN " +
                           std::to_string(applied_ + 1) + ", found " +
                           std::to_string(lsn));
    }
    DurableRecordView record;
    CAIRN_RETURN_IF_ERROR(DecodeDurableRecord(body, &record));
    CAIRN_RETURN_IF_ERROR(ApplyDecoded(record));
    applied_ = lsn;
    ++stats_.applied;
    return Status::Ok();
  }

  Lsn applied_lsn() const noexcept { return applied_; }
  const ApplyStats& stats() const noexcept { return stats_; }

 private:
  using Handle = typename Registry::Handle;

  Status ApplyDecoded(const DurableRecordView& record) {
    switch (record.op) {
      case DurableOp::kTenantCreate:
        return CreateTenant(record);
      case DurableOp::kTenantRemove:
        return RemoveTenant(record);
      default:
        break;
    }
    auto it = tenants_.find(record.tenant);
    if (it == tenants_.end()) {
      ++stats_.removed_tenant;
      return Status::Ok();
    }
    return ApplyDurableRecord(it->second->directory(), record);
  }

  Status CreateTenant(const DurableRecordView& record) {
    if (auto found = registry_->Find(record.tenant_name); found.ok()) {
      if (found.value()->instance_id() == record.tenant) return Status::Ok();
      // Another instance under the name: a later one, replaced here and
      // made again by the later record.
      CAIRN_RETURN_IF_ERROR(DropTenant(found.value()));
    }
    TenantOptions options;
    if (factory_) {
      Result<TenantOptions> made = factory_(record.tenant_name);
      if (!made.ok()) return std::move(made).status();
      options = std::move(made).value();
    }
    options.quota_limit_bytes = record.quota_limit_bytes;
    auto made = RegistryHooks::CreateInstance(
        *registry_, record.tenant_name, record.tenant, std::move(options));
    if (!made.ok()) return std::move(made).status();
    tenants_[record.tenant] = std::move(made).value();
    return Status::Ok();
  }

  Status RemoveTenant(const DurableRecordView& record) {
    auto found = registry_->Find(record.tenant_name);
    if (!found.ok() || found.value()->instance_id() != record.tenant) {
      tenants_.erase(record.tenant);
      return Status::Ok();
    }
    return DropTenant(found.value());
  }

  Status DropTenant(const Handle& tenant) {
    CAIRN_RETURN_IF_ERROR(RegistryHooks::RemoveUnlogged(
        *registry_, tenant->name(), tenant->instance_id()));
    tenants_.erase(tenant->instance_id());
    return Status::Ok();
  }

  Registry* const registry_;
  Lsn applied_;
  const Factory factory_;
  std::unordered_map<TenantInstanceId, Handle> tenants_;
  ApplyStats stats_;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_HA_REPLAY_H_
