// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// TenantRegistry: the host's map from tenant name to Tenant (its quota
// account and its GroupDirectory), split by name hash into shards, each
// published as an immutable copy-on-write map (docs/tenants.md). A change
// copies one shard, so creating or removing a tenant costs O(tenants /
// shards), not O(tenants).
//
// Two epoch domains, both owned here unless the host passes its own route
// domain:
//   - the registry's own domain protects the shard maps, so a reader stalled
//     in it never delays route reclamation, and the other way round (E6);
//   - one route domain shared by every tenant's route (the RFC's
//     process-wide route domain), so a thread that alternates between
//     tenants keeps one participant for all of them.
//
// One factory run per tenant (T1): GetOrCreate runs the factory once per
// (name, instance) however many callers race; every racer gets the same
// handle, and the tenant (quota bound to its directory) is fully built
// before the shard map that names it is published. Removal makes a fresh
// instance (T2): Remove(name, instance) takes the tenant out of later
// shard maps; handles already held stay valid (shared ownership), a later
// GetOrCreate makes a new instance with a new TenantInstanceId, and
// instances never share objects. Empty tenants are never removed by the
// registry on its own.
//
// Thread safety: every method is safe from any thread. Find/WithTenant/
// GetOrCreate's hit path take no lock and allocate nothing: one guard of the
// registry domain and an acquire load of the name's shard. Writers (a
// GetOrCreate miss, Remove) serialise on the writer lock of the name's shard
// only (writers of other shards run in parallel), which is never held across
// host code (the factory) or tenant work, and never together with another
// shard's; the old shard map is retired after it is released. Lock order:
// shard writer -> (nothing); tenant work (group -> members) runs with no
// registry lock held (docs/concurrency.md).
//
// Metrics: VisitMetrics() reports the cairn_tenant_* metrics and, for each
// tenant, its quota and its directory's cairn_directory_* metrics labelled
// tenant="<name>" (docs/metrics.md).

#ifndef CAIRN_TENANT_TENANT_REGISTRY_H_
#define CAIRN_TENANT_TENANT_REGISTRY_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cairn/base/internal/hash.h"
#include "cairn/base/metrics.h"
#include "cairn/base/mutex.h"
#include "cairn/base/status.h"
#include "cairn/base/thread_annotations.h"
#include "cairn/base/version.h"
#include "cairn/directory/durable_log.h"
#include "cairn/directory/group_directory.h"
#include "cairn/directory/quota.h"
#include "cairn/epoch/epoch_domain.h"
#include "cairn/tenant/internal/tenant_map.h"
#include "cairn/tenant/remove_all.h"

CAIRN_NAMESPACE_BEGIN

// What a tenant is built from. The registry overrides three directory
// fields: tenant_instance (a fresh id, or RegistryHooks::CreateInstance's),
// quota (the tenant's own account) and route.epoch_domain (the shared route
// domain).
struct TenantOptions {
  std::uint64_t quota_limit_bytes = QuotaAccount::kUnlimited;
  DirectoryOptions directory;
};

// One tenant instance: its name, instance id, quota account and directory.
// The account is constructed before the directory and bound to it, so a
// published tenant always charges its own account (T1).
template <typename Payload = EmptyPayload,
          template <typename> class Route = ObjectRouteIndex>
class Tenant {
 public:
  using Directory = GroupDirectory<Payload, Route>;

  Tenant(std::string name, TenantInstanceId instance, TenantOptions options,
         EpochDomain* route_domain)
      : name_(std::move(name)),
        instance_(instance),
        quota_(options.quota_limit_bytes),
        directory_(Bind(std::move(options.directory), instance, &quota_,
                        route_domain)) {}
  Tenant(const Tenant&) = delete;
  Tenant& operator=(const Tenant&) = delete;

  std::string_view name() const noexcept { return name_; }
  TenantInstanceId instance_id() const noexcept { return instance_; }
  QuotaAccount& quota() noexcept { return quota_; }
  const QuotaAccount& quota() const noexcept { return quota_; }
  Directory& directory() noexcept { return directory_; }
  const Directory& directory() const noexcept { return directory_; }

 private:
  static DirectoryOptions Bind(DirectoryOptions d, TenantInstanceId instance,
                               QuotaAccount* quota, EpochDomain* domain) {
    d.tenant_instance = instance;
    d.quota = quota;
    d.route.epoch_domain = domain;
    return d;
  }

  const std::string name_;
  const TenantInstanceId instance_;
  QuotaAccount quota_;
  Directory directory_;
};

struct RegistryOptions {
  // The registry's own domain (shard maps only).
  EpochOptions registry_epoch = [] {
    EpochOptions o;
    o.name = "tenant-registry";
    o.retired_bytes_cap = std::size_t{64} << 20;
    return o;
  }();
  // The route domain every tenant's route shares; must outlive the registry
  // and every tenant handle. Null: the registry owns one built from
  // route_epoch.
  EpochDomain* route_domain = nullptr;
  EpochOptions route_epoch = [] {
    EpochOptions o;
    o.name = "route";
    return o;
  }();
  // Created with the registry and never removed (Remove refuses it).
  std::string default_tenant = "default";
  TenantOptions default_tenant_options;
  // The default tenant's instance id; 0: the registry's first (1). Non-zero
  // (RestoreRegistrySnapshot passes a snapshot's): that id, and the
  // registry's instance counter starts above it.
  TenantInstanceId default_tenant_instance = 0;
  std::size_t max_name_bytes = 256;
  // Shards of the tenant map (rounded up to a power of two, at most 65,536;
  // 0 means 1). A creation or removal copies the map of one shard, so it
  // costs O(tenants / shards). Each shard costs one word with no tenant;
  // shards share min(shards, 256) writer locks of 128 bytes each.
  std::size_t shards = 4096;
  // The durable log (H1, docs/durable_log.md) that records every tenant
  // GetOrCreate publishes and every Remove, and the log of each tenant's
  // directory whose options name none (the default tenant's too). Its
  // creation is not logged: every registry starts with it. Not owned; must
  // outlive the registry. Null: nothing is logged.
  DurableLog* durable_log = nullptr;
};

// The steps of a TenantRegistry that a snapshot restore and a log replay
// need (cairn/ha) and a host serving requests does not: a tenant made with a
// given instance id, and the instance counter. Not TenantRegistry methods
// so the host API stays what a host calls.
class RegistryHooks {
 public:
  // Makes tenant `name` with instance id `instance` and `options` (the
  // registry overrides the three directory fields as for any tenant). The
  // factory is not called and nothing is logged: the tenant is already in a
  // snapshot or a log. The instance counter first resumes above `instance`
  // (instance ids are never reused). Errors, nothing published:
  // kInvalidArgument (empty or too long name, instance 0 or the largest
  // TenantInstanceId), kAlreadyExists (a tenant named `name` exists or is
  // being created), kAborted (the tenant's construction threw),
  // kResourceExhausted (registry domain full, or out of memory). The caller
  // keeps instance ids unique (a snapshot's reader refuses a file naming
  // one twice). Locks the name's shard writer lock briefly; allocates. Not for
  // use inside WithTenant.
  template <typename Registry>
  static Result<typename Registry::Handle> CreateInstance(
      Registry& r, std::string_view name, TenantInstanceId instance,
      TenantOptions options) {
    return r.CreateInstance(name, instance, std::move(options));
  }
  // The instance id the next created tenant would get (every id handed out
  // so far is below it). Lock-free.
  template <typename Registry>
  static TenantInstanceId NextInstancePeek(const Registry& r) noexcept {
    return r.next_instance_.load(std::memory_order_relaxed);
  }
  // Removes tenant `name` if it is still instance `instance`, as Remove
  // does, but without logging it: the removal is already in a log (replay).
  template <typename Registry>
  static Status RemoveUnlogged(Registry& r, std::string_view name,
                               TenantInstanceId instance) {
    return r.RemoveInstance(name, instance, nullptr, /*if_empty=*/false);
  }
  // Raises the instance counter so every later id is > `instance`. Never
  // lowers it. Lock-free.
  template <typename Registry>
  static void ReserveInstances(Registry& r,
                               TenantInstanceId instance) noexcept {
    r.ReserveInstances(instance);
  }
};

template <typename Payload = EmptyPayload,
          template <typename> class Route = ObjectRouteIndex>
class TenantRegistry {
 public:
  using TenantType = Tenant<Payload, Route>;
  using Handle = std::shared_ptr<TenantType>;
  // Builds the options of a new tenant; runs once per created instance,
  // with no registry lock held. An error fails that GetOrCreate (and the
  // callers racing it) and publishes nothing.
  using Factory = std::function<Result<TenantOptions>(std::string_view name)>;

  explicit TenantRegistry(RegistryOptions options = {})
      : options_(std::move(options)),
        owned_route_domain_(
            options_.route_domain == nullptr
                ? std::make_unique<EpochDomain>(options_.route_epoch)
                : nullptr),
        route_domain_(options_.route_domain != nullptr
                          ? options_.route_domain
                          : owned_route_domain_.get()),
        registry_domain_(options_.registry_epoch),
        shard_count_(ShardCount(options_.shards)),
        writer_count_(std::min(shard_count_, kMaxWriters)),
        maps_(new std::atomic<const TenantMap*>[shard_count_]()),
        writers_(new Writer[writer_count_]) {
    TenantOptions defaults = options_.default_tenant_options;
    Result<Handle> made =
        options_.default_tenant_instance != 0
            ? CreateInstance(options_.default_tenant,
                             options_.default_tenant_instance, defaults)
            : GetOrCreate(
                  options_.default_tenant,
                  [defaults](std::string_view) -> Result<TenantOptions> {
                    return defaults;
                  });
    CAIRN_CHECK_MSG(made.ok(), "the default tenant could not be created");
    default_ = std::move(made).value();
  }
  TenantRegistry(const TenantRegistry&) = delete;
  TenantRegistry& operator=(const TenantRegistry&) = delete;

  // No call may still be running. Tenants die with their last handle; a
  // handle held past the registry must not outlive the route domain.
  ~TenantRegistry() {
    default_.reset();
    for (std::size_t i = 0; i < shard_count_; ++i) {
      TenantMap* m =
          const_cast<TenantMap*>(maps_[i].load(std::memory_order_acquire));
      if (m == nullptr) continue;
      m->DeleteEntries();  // the newest map owns its entries
      delete m;
    }
    registry_domain_.Shutdown(std::chrono::seconds(1)).IgnoreError();
  }

  // The tenant named `name`, or kNotFound (code-only). Lock-free: one guard
  // of the registry domain, an acquire load of the name's shard, a lookup,
  // one owner copy; allocates nothing after the thread's first call.
  Result<Handle> Find(std::string_view name) const {
    const std::uint64_t hash = base_internal::RouteHash(name);
    Guard guard = registry_domain_.EnterOnThisThread();
    const TenantMap* m = ShardOf(hash).map.load(std::memory_order_acquire);
    const Named* found = m == nullptr ? nullptr : m->Find(hash, name);
    if (found == nullptr) return Status(StatusCode::kNotFound);
    return found->tenant;
  }

  // Runs fn(TenantType&) inside a guard of the registry domain, without
  // copying the owner; kNotFound (code-only) if no such tenant. fn must not
  // call GetOrCreate or Remove of this registry and must not keep the
  // reference; it may use the tenant's directory (another domain).
  template <typename Fn>
  Status WithTenant(std::string_view name, Fn&& fn) const {
    const std::uint64_t hash = base_internal::RouteHash(name);
    Guard guard = registry_domain_.EnterOnThisThread();
    const TenantMap* m = ShardOf(hash).map.load(std::memory_order_acquire);
    const Named* found = m == nullptr ? nullptr : m->Find(hash, name);
    if (found == nullptr) return Status(StatusCode::kNotFound);
    fn(*found->tenant);
    return Status::Ok();
  }

  // The tenant named `name`, created by `factory` if absent. Exactly one caller
  // runs the factory per created instance (T1); racers wait for it and get the
  // same handle (or its error). The tenant is fully built before the shard
  // map naming it is published. Errors: kInvalidArgument (empty or too long
  // name, null factory), the factory's error, kAborted (the factory, or the
  // tenant's construction, threw: its what() is the message),
  // kResourceExhausted (the registry domain stayed full, or out of memory).
  // Never throws; a failed creation leaves nothing behind, so a later call
  // for the name runs the factory again. A hit is Find (lock-free, no
  // allocation); a miss allocates, copies the map of the name's shard
  // (O(tenants / shards)) and may block behind a racing creation of the same
  // name. Not for use inside WithTenant.
  Result<Handle> GetOrCreate(std::string_view name, const Factory& factory) {
    if (name.empty() || name.size() > options_.max_name_bytes) {
      return InvalidArgumentError("bad tenant name");
    }
    try {
      if (Result<Handle> found = Find(name); found.ok()) return found;
      if (!factory) return InvalidArgumentError("null tenant factory");
      return Create(name, factory);
    } catch (const std::bad_alloc&) {
      // Before the creation was registered (Create() catches after it).
      return ResourceExhaustedError("out of memory creating a tenant");
    }
  }

  // Removes the tenant `name` if it is still the instance `instance` (T2).
  // Held handles stay valid; its quota account is closed to new charges
  // (releases still work). Errors, no change: kNotFound (no such tenant, or
  // another instance), kFailedPrecondition (the default tenant),
  // kResourceExhausted (registry domain full, or out of memory). Never
  // checks emptiness. Locks the writer lock of the name's shard; copies
  // that shard's map. With a durable log, the removal is logged (kTenantRemove)
  // before it is published and durable when Remove returns; a log error fails
  // it.
  Status Remove(std::string_view name, TenantInstanceId instance) {
    return RemoveInstance(name, instance, options_.durable_log,
                          /*if_empty=*/false);
  }

  // Remove, only if the tenant's directory holds no object (a pending put
  // counts) (T3). Under the shard's writer lock the directory is sealed
  // (GroupDirectory::SealIfEmpty): a create in the tenant either counted its
  // object first, and the removal fails, or finds the directory sealed and
  // fails with kFailedPrecondition; so a removed tenant never gains an
  // object, through a held handle either. Errors, no change:
  // kFailedPrecondition "tenant is not empty: directory holds N objects",
  // and those of Remove. A failed log append after the seal lifts it again
  // (creates refused meanwhile saw kFailedPrecondition). Logged as Remove
  // (kTenantRemove). Locks the shard's writer lock.
  Status RemoveIfEmpty(std::string_view name, TenantInstanceId instance) {
    return RemoveInstance(name, instance, options_.durable_log,
                          /*if_empty=*/true);
  }

  // Removes the objects of tenant `name` if it is still instance `instance`
  // (T4, RemoveAllObjects in cairn/tenant/remove_all.h): without force,
  // leased, pinned, busy and pending objects and groups holding one are
  // kept and reported; with force everything goes. Each removal is a
  // directory erase (logged, H1; its quota charge released, Q2). The tenant
  // stays in the registry (RemoveIfEmpty removes it once it is empty).
  // result.status is kNotFound (code-only) if there is no such tenant
  // instance. No registry lock is held while it runs. Not for use inside
  // WithTenant.
  RemoveAllResult RemoveAll(std::string_view name, TenantInstanceId instance,
                            const RemoveAllOptions& options = {}) {
    Result<Handle> tenant = Find(name);
    if (!tenant.ok() || tenant.value()->instance_id() != instance) {
      RemoveAllResult result;
      result.status = Status(StatusCode::kNotFound);
      return result;
    }
    return RemoveAllObjects(tenant.value()->directory(), options);
  }

  const Handle& default_tenant() const noexcept { return default_; }

  // Handles of every tenant (a copy), read shard by shard inside one guard
  // of the registry domain: every tenant published before the call and not
  // removed before it is in the list; one created or removed during the
  // call may or may not be. Allocates the list. Not for use inside
  // WithTenant.
  std::vector<Handle> Tenants() const {
    Guard guard = registry_domain_.EnterOnThisThread();
    std::vector<Handle> out;
    out.reserve(size());
    for (std::size_t i = 0; i < shard_count_; ++i) {
      const TenantMap* m = maps_[i].load(std::memory_order_acquire);
      if (m == nullptr) continue;
      m->ForEach([&](const Named& n) { out.push_back(n.tenant); });
    }
    return out;
  }
  // The number of tenants (the default one too). Lock-free; a creation or
  // removal racing the call may or may not be counted.
  std::size_t size() const noexcept {
    return size_.load(std::memory_order_relaxed);
  }
  // The number of shards (RegistryOptions::shards rounded up).
  std::size_t shard_count() const noexcept { return shard_count_; }

  EpochDomain& route_domain() const noexcept { return *route_domain_; }
  EpochDomain& registry_domain() const noexcept { return registry_domain_; }

  // Reports the cairn_tenant_* metrics (docs/metrics.md, "Tenants") to
  // `visitor`: the tenant count, creations, failed creations and removals;
  // then, for each tenant of one Tenants() list in name order, its quota
  // (limit, charged, committed, pending, deficit, refusals) and its directory's
  // metrics (GroupDirectory::VisitMetrics) with the label tenant="<name>"
  // placed first. The tenant list is copied (one owner copy per tenant)
  // inside one guard of the registry domain, which is left before the first
  // Visit: no registry lock or guard is held while the visitor runs, so the
  // visitor may call this registry, and a tenant removed meanwhile is still
  // reported by this call (its handle keeps it alive). Allocates the copied
  // list. Not for use inside WithTenant (it enters the registry domain).
  void VisitMetrics(MetricVisitor& visitor) const {
    std::vector<Handle> tenants = Tenants();
    std::sort(
        tenants.begin(), tenants.end(),
        [](const Handle& a, const Handle& b) { return a->name() < b->name(); });
    visitor.GaugeValue("cairn_tenant_tenants",
                       "Tenants in the registry (the default one too).",
                       static_cast<double>(tenants.size()));
    visitor.CounterValue(
        "cairn_tenant_created_total",
        "Tenant instances published (GetOrCreate misses, restores).",
        created_.Value());
    visitor.CounterValue(
        "cairn_tenant_create_failures_total",
        "GetOrCreate creations that failed (factory error or throw, log, "
        "memory).",
        create_failures_.Value());
    visitor.CounterValue("cairn_tenant_removed_total",
                         "Tenant instances removed.", removed_.Value());
    for (const Handle& t : tenants) {
      const std::array<MetricLabel, 1> label = {
          MetricLabel{"tenant", t->name()}};
      const QuotaAccount& quota = t->quota();
      const std::uint64_t limit = quota.limit();
      const std::uint64_t charged = quota.charged();
      // Racing reads: pending may briefly exceed what the charge read shows.
      const std::uint64_t pending =
          std::min(t->directory().pending_charge_bytes(), charged);
      visitor.GaugeValue(
          "cairn_tenant_quota_limit_bytes",
          "The tenant's quota limit in counted bytes (+Inf: unlimited).",
          limit == QuotaAccount::kUnlimited
              ? std::numeric_limits<double>::infinity()
              : static_cast<double>(limit),
          label);
      visitor.GaugeValue("cairn_tenant_quota_charged_bytes",
                         "Counted bytes charged to the tenant's quota.",
                         static_cast<double>(charged), label);
      visitor.GaugeValue(
          "cairn_tenant_quota_committed_bytes",
          "Charged bytes of committed objects (charged minus pending).",
          static_cast<double>(charged - pending), label);
      visitor.GaugeValue("cairn_tenant_quota_pending_bytes",
                         "Charged bytes of pending puts and staged upserts.",
                         static_cast<double>(pending), label);
      visitor.GaugeValue("cairn_tenant_quota_deficit_bytes",
                         "Charged bytes over the limit (0 within it).",
                         static_cast<double>(quota.deficit()), label);
      visitor.CounterValue(
          "cairn_tenant_quota_refusals_total",
          "Creates, pending creates and upserts the tenant's quota refused.",
          t->directory().quota_refusals(), label);
      LabelScope scoped(visitor, label);
      t->directory().VisitMetrics(scoped);
    }
  }

 private:
  friend class RegistryHooks;

  // One shard's tenants: immutable once published (internal/tenant_map.h).
  using TenantMap = tenant_internal::TenantMap<Handle>;
  using Named = typename TenantMap::Named;
  struct Outcome {
    Status status;
    Handle tenant;
  };
  // The writer side of shards: the lock that serialises the publications
  // of its shards (shard i uses writer i mod the writer count) and their
  // creations in flight, on its own cache lines.
  struct alignas(64) Writer {
    Mutex mu;
    // Creations in flight, looked up by string_view: cleanup must not
    // allocate a key.
    std::unordered_map<std::string, std::shared_future<Outcome>,
                       base_internal::KeyHash, base_internal::KeyEq>
        creating CAIRN_GUARDED_BY(mu);
  };
  // One shard: its published map (null: no tenant; stored with release
  // under writer.mu, loaded with acquire inside a guard of the registry
  // domain) and its writer.
  struct Shard {
    std::atomic<const TenantMap*>& map;
    Writer& writer;
  };
  static constexpr std::size_t kMaxWriters = 256;

  static void DeleteMap(void* p) { delete static_cast<TenantMap*>(p); }

  static std::size_t ShardCount(std::size_t requested) {
    std::size_t n = 1;
    while (n < requested && n < (std::size_t{1} << 16)) n <<= 1;
    return n;
  }
  // The shard of a name whose mixed hash is `hash`: its bits 32 and up
  // (a shard's table probes from the low bits).
  Shard ShardOf(std::uint64_t hash) const noexcept {
    const std::size_t i =
        static_cast<std::size_t>(hash >> 32) & (shard_count_ - 1);
    return Shard{maps_[i], writers_[i & (writer_count_ - 1)]};
  }
  // Publishes `next` (null: the shard is empty) as `shard`'s map with
  // release, and returns the map it replaces. Caller holds shard.writer.mu.
  static TenantMap* Swap(const Shard& shard, std::unique_ptr<TenantMap> next)
      CAIRN_REQUIRES(shard.writer.mu) {
    const TenantMap* old = shard.map.load(std::memory_order_relaxed);
    shard.map.store(next.release(), std::memory_order_release);
    return const_cast<TenantMap*>(old);
  }
  // Retires a replaced map on `budget` (reserved before the shard lock);
  // nothing to retire when the shard was empty.
  void RetireMap(RetireReservation budget, TenantMap* old) {
    if (old == nullptr) return;  // the reservation is released unused
    registry_domain_.RetireReserved(std::move(budget), old, &DeleteMap);
  }

  // One logged registry change (H1): reserved before the shard writer lock,
  // appended under it before the shard map that shows the change is published,
  // finalized after it; cancelled if the change does not happen. `log` null:
  // no-op.
  class TenantLogStep {
   public:
    explicit TenantLogStep(DurableLog* log) noexcept : log_(log) {}
    TenantLogStep(const TenantLogStep&) = delete;
    TenantLogStep& operator=(const TenantLogStep&) = delete;
    ~TenantLogStep() {
      if (reserved_) log_->Cancel(reservation_);
    }
    Status Reserve(std::string_view name) {
      if (log_ == nullptr) return Status::Ok();
      Result<LogReservation> r =
          log_->Reserve(DurableTenantRecordBytes(name.size()));
      if (!r.ok()) return std::move(r).status();
      reservation_ = *r;
      reserved_ = true;
      return Status::Ok();
    }
    Status Append(DurableOp op, const TenantType& tenant) {
      if (!reserved_) return Status::Ok();
      std::string record;
      EncodeDurableTenantRecord(op, tenant.instance_id(), tenant.name(),
                                tenant.quota().limit(), &record);
      return log_->Append(reservation_, record);
    }
    // OK once the record is durable (or without a log), else the log's
    // error: the change is visible but not acknowledged (H5).
    Status Finalize() {
      if (!std::exchange(reserved_, false)) return Status::Ok();
      return log_->Finalize(reservation_, {});
    }

   private:
    DurableLog* const log_;
    bool reserved_ = false;
    LogReservation reservation_;
  };

  // Remove's body; `log` null for a removal that is not logged (replay).
  Status RemoveInstance(std::string_view name, TenantInstanceId instance,
                        DurableLog* log, bool if_empty) {
    if (name == options_.default_tenant) {
      return FailedPreconditionError("the default tenant is never removed");
    }
    try {
      return RemoveFromShard(name, instance, log, if_empty);
    } catch (const std::bad_alloc&) {
      // Thrown before the new map was published: nothing changed.
      return ResourceExhaustedError("out of memory removing a tenant");
    }
  }

  Status RemoveFromShard(std::string_view name, TenantInstanceId instance,
                         DurableLog* log, bool if_empty) {
    TenantLogStep step(log);
    CAIRN_RETURN_IF_ERROR(step.Reserve(name));
    const std::uint64_t hash = base_internal::RouteHash(name);
    const Shard shard = ShardOf(hash);
    Result<RetireReservation> budget = ReserveMap(shard, name.size());
    if (!budget.ok()) return std::move(budget).status();
    TenantMap* old = nullptr;
    Handle removed;
    {
      MutexLock lock(&shard.writer.mu);
      const TenantMap* m = shard.map.load(std::memory_order_relaxed);
      const Named* named = m == nullptr ? nullptr : m->Find(hash, name);
      if (named == nullptr || named->tenant->instance_id() != instance) {
        return NotFoundError("no such tenant instance");
      }
      removed = named->tenant;
      // Built before the append, so a failed allocation logs nothing.
      std::unique_ptr<TenantMap> next =
          TenantMap::Rebuilt(m, named, 0, nullptr);
      // T3: sealed under the shard lock after the last step that may throw,
      // so every way out below either removes the tenant or lifts the seal.
      bool sealed_here = false;
      if (if_empty) {
        auto& dir = removed->directory();
        sealed_here = !dir.is_sealed();
        if (Status empty = dir.SealIfEmpty(); !empty.ok()) {
          return FailedPreconditionError("tenant is not empty: " +
                                         std::string(empty.message()));
        }
      }
      if (Status s = step.Append(DurableOp::kTenantRemove, *removed); !s.ok()) {
        if (sealed_here) removed->directory().Unseal();
        return s;
      }
      old = Swap(shard, std::move(next));
      // The replaced map frees the entry when its grace period ends: a
      // reader may still hold it.
      old->set_dropped(named);
      size_.fetch_sub(1, std::memory_order_relaxed);
    }
    removed->quota().CloseAdmission();
    removed_.Add();
    RetireMap(std::move(budget).value(), old);
    return step.Finalize();
  }

  // Retire budget for one map of `shard` one tenant larger than it is now,
  // with a dropped entry named with `name_bytes` bytes.
  Result<RetireReservation> ReserveMap(const Shard& shard,
                                       std::size_t name_bytes) {
    std::size_t n = 1;
    {
      // Read inside a guard (the map may be retired meanwhile), left before
      // Reserve, which may wait for the domain's guards.
      Guard guard = registry_domain_.EnterOnThisThread();
      const TenantMap* m = shard.map.load(std::memory_order_acquire);
      if (m != nullptr) n += m->size();
    }
    return registry_domain_.Reserve(TenantMap::BytesFor(n, name_bytes));
  }

  // GetOrCreate() after a miss. Whatever throws before the creation is
  // registered in creating_ leaves nothing behind; from then on every
  // failure, thrown or returned, is caught, the entry erased and the promise
  // fulfilled, so racers get the error and a later call starts afresh (an
  // unfulfilled promise would hand every later caller std::future_error).
  Result<Handle> Create(std::string_view name, const Factory& factory) {
    std::promise<Outcome> promise;
    std::shared_future<Outcome> pending;
    const std::uint64_t hash = base_internal::RouteHash(name);
    const Shard shard = ShardOf(hash);
    {
      MutexLock lock(&shard.writer.mu);
      if (const TenantMap* m = shard.map.load(std::memory_order_relaxed);
          m != nullptr) {
        const Named* found = m->Find(hash, name);
        if (found != nullptr) return found->tenant;
      }
      auto c = shard.writer.creating.find(name);
      if (c != shard.writer.creating.end()) {
        pending = c->second;
      } else {
        shard.writer.creating.emplace(std::string(name),
                                      promise.get_future().share());
      }
    }
    if (pending.valid()) {  // a racer runs the factory: wait for it
      const Outcome& outcome = pending.get();
      if (!outcome.status.ok()) return outcome.status;
      return outcome.tenant;
    }
    Outcome outcome;
    try {
      outcome = Build(name, factory);
      // On success Publish forgets the creation under the shard lock that
      // publishes it: a Remove that follows cannot leave a finished
      // creation behind for a later GetOrCreate to wait on and return (T2).
      // The default tenant's creation is not logged: every registry has
      // one.
      if (outcome.status.ok()) {
        outcome.status =
            Publish(shard, name, outcome.tenant,
                    default_ != nullptr ? options_.durable_log : nullptr);
      }
    } catch (const std::bad_alloc&) {
      outcome.status =
          ResourceExhaustedError("out of memory creating a tenant");
    } catch (const std::exception& e) {
      outcome.status = AbortedError(e.what());
    } catch (...) {
      outcome.status = AbortedError("the tenant factory threw");
    }
    if (!outcome.status.ok()) {
      outcome.tenant.reset();
      MutexLock lock(&shard.writer.mu);
      // By iterator: erasing by key would build a std::string, which may
      // throw here.
      if (auto c = shard.writer.creating.find(name);
          c != shard.writer.creating.end()) {
        shard.writer.creating.erase(c);
      }
    }
    if (!outcome.status.ok()) create_failures_.Add();
    promise.set_value(outcome);
    if (!outcome.status.ok()) return outcome.status;
    return outcome.tenant;
  }

  // RegistryHooks::ReserveInstances.
  void ReserveInstances(TenantInstanceId instance) noexcept {
    constexpr TenantInstanceId kMax =
        std::numeric_limits<TenantInstanceId>::max();
    if (instance == kMax) [[unlikely]]
      instance = kMax - 1;  // keep the counter
    TenantInstanceId next = next_instance_.load(std::memory_order_relaxed);
    while (next <= instance &&
           !next_instance_.compare_exchange_weak(next, instance + 1,
                                                 std::memory_order_relaxed,
                                                 std::memory_order_relaxed)) {
    }
  }

  // RegistryHooks::CreateInstance: a tenant of a given instance id, built
  // and published as Create() does, with no factory and no racers to wait
  // for (a name being created by GetOrCreate is kAlreadyExists).
  Result<Handle> CreateInstance(std::string_view name,
                                TenantInstanceId instance,
                                TenantOptions options) {
    if (name.empty() || name.size() > options_.max_name_bytes) {
      return InvalidArgumentError("bad tenant name");
    }
    if (instance == 0 ||
        instance == std::numeric_limits<TenantInstanceId>::max()) {
      return InvalidArgumentError("tenant instance id out of range");
    }
    ReserveInstances(instance);
    const std::uint64_t hash = base_internal::RouteHash(name);
    const Shard shard = ShardOf(hash);
    try {
      {
        MutexLock lock(&shard.writer.mu);
        if (NameTaken(shard, hash, name)) {
          return AlreadyExistsError("tenant name exists");
        }
      }
      Handle tenant = std::make_shared<TenantType>(
          std::string(name), instance, WithRegistryLog(std::move(options)),
          route_domain_);
      auto named = std::make_unique<Named>(Named{std::string(name), tenant});
      Result<RetireReservation> budget = ReserveMap(shard, 0);
      if (!budget.ok()) return std::move(budget).status();
      TenantMap* old = nullptr;
      {
        MutexLock lock(&shard.writer.mu);
        // Checked again under the lock that publishes: a racing
        // GetOrCreate or CreateInstance of the name may have published.
        if (NameTaken(shard, hash, name)) {
          return AlreadyExistsError("tenant name exists");
        }
        std::unique_ptr<TenantMap> next =
            TenantMap::Rebuilt(shard.map.load(std::memory_order_relaxed),
                               nullptr, hash, named.get());
        named.release();  // owned by the published map from here on
        old = Swap(shard, std::move(next));
        size_.fetch_add(1, std::memory_order_relaxed);
      }
      created_.Add();
      RetireMap(std::move(budget).value(), old);
      return tenant;
    } catch (const std::bad_alloc&) {
      return ResourceExhaustedError("out of memory creating a tenant");
    } catch (const std::exception& e) {
      return AbortedError(e.what());
    }
  }

  // The name is published in `shard` or being created there. Caller holds
  // shard.writer.mu.
  static bool NameTaken(const Shard& shard, std::uint64_t hash,
                        std::string_view name) CAIRN_REQUIRES(shard.writer.mu) {
    const TenantMap* m = shard.map.load(std::memory_order_relaxed);
    return (m != nullptr && m->Find(hash, name) != nullptr) ||
           shard.writer.creating.find(name) != shard.writer.creating.end();
  }

  Outcome Build(std::string_view name, const Factory& factory) {
    Outcome outcome;
    Result<TenantOptions> made = factory(name);
    if (!made.ok()) {
      outcome.status = std::move(made).status();
      return outcome;
    }
    const TenantInstanceId id =
        next_instance_.fetch_add(1, std::memory_order_relaxed);
    outcome.tenant = std::make_shared<TenantType>(
        std::string(name), id, WithRegistryLog(std::move(made).value()),
        route_domain_);
    return outcome;
  }

  // A tenant's directory logs to the registry's log unless its options
  // name another.
  TenantOptions WithRegistryLog(TenantOptions options) const {
    if (options.directory.durable_log == nullptr) {
      options.directory.durable_log = options_.durable_log;
    }
    return options;
  }

  // Publishes `tenant` in `shard` (the name's), logged to `log` unless it
  // is null.
  Status Publish(const Shard& shard, std::string_view name,
                 const Handle& tenant, DurableLog* log) {
    TenantLogStep step(log);
    CAIRN_RETURN_IF_ERROR(step.Reserve(name));
    const std::uint64_t hash = base_internal::RouteHash(name);
    auto named = std::make_unique<Named>(Named{std::string(name), tenant});
    Result<RetireReservation> budget = ReserveMap(shard, 0);
    if (!budget.ok()) return std::move(budget).status();
    TenantMap* old = nullptr;
    {
      MutexLock lock(&shard.writer.mu);
      // Built before the append, so a failed allocation logs nothing.
      std::unique_ptr<TenantMap> next =
          TenantMap::Rebuilt(shard.map.load(std::memory_order_relaxed), nullptr,
                             hash, named.get());
      CAIRN_RETURN_IF_ERROR(step.Append(DurableOp::kTenantCreate, *tenant));
      named.release();  // owned by the published map from here on
      old = Swap(shard, std::move(next));
      size_.fetch_add(1, std::memory_order_relaxed);
      // Nothing may throw once the map is published.
      if (auto c = shard.writer.creating.find(name);
          c != shard.writer.creating.end()) {
        shard.writer.creating.erase(c);
      }
    }
    created_.Add();
    RetireMap(std::move(budget).value(), old);
    return step.Finalize();
  }

  const RegistryOptions options_;
  // Declared before the registry domain: retired shard maps (and the tenants
  // they may be the last owners of) are freed while the route domain lives.
  std::unique_ptr<EpochDomain> owned_route_domain_;
  EpochDomain* const route_domain_;
  mutable EpochDomain registry_domain_;
  const std::size_t shard_count_;
  const std::size_t writer_count_;
  // The shards' published maps, packed: a reader loads one word; a
  // publication (rare) invalidates the line for readers of its neighbours.
  const std::unique_ptr<std::atomic<const TenantMap*>[]> maps_;
  const std::unique_ptr<Writer[]> writers_;
  // Tenants over every shard; moved under a shard's writer lock.
  std::atomic<std::size_t> size_{0};
  std::atomic<TenantInstanceId> next_instance_{1};
  Handle default_;
  // Metrics (VisitMetrics): registry writes, from any shard's writer.
  Counter created_;
  Counter create_failures_;
  Counter removed_;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_TENANT_TENANT_REGISTRY_H_
