// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// TenantRegistry: the host's map from tenant name to Tenant (its quota
// account and its GroupDirectory), published as immutable copy-on-write
// snapshots (docs/tenants.md).
//
// Two epoch domains, both owned here unless the host passes its own route
// domain:
//   - the registry's own domain protects the snapshots, so a reader stalled
//     in it never delays route reclamation, and the other way round (E6);
//   - one route domain shared by every tenant's route (the RFC's
//     process-wide route domain), so a thread that alternates between
//     tenants keeps one participant for all of them.
//
// One factory run per tenant (T1): GetOrCreate runs the factory once per
// (name, instance) however many callers race; every racer gets the same
// handle, and the tenant (quota bound to its directory) is fully built
// before the snapshot that names it is published. Removal makes a fresh
// instance (T2): Remove(name, instance) takes the tenant out of later
// snapshots; handles already held stay valid (shared ownership), a later
// GetOrCreate makes a new instance with a new TenantInstanceId, and
// instances never share objects. Empty tenants are never removed by the
// registry on its own.
//
// Thread safety: every method is safe from any thread. Find/WithTenant/
// GetOrCreate's hit path take no lock: one guard of the registry domain and
// an acquire load. Writers (a GetOrCreate miss, Remove) serialise on the
// registry writer lock, which is never held across host code (the factory)
// or tenant work; the old snapshot is retired after it is released. Lock
// order: registry writer -> (nothing); tenant work (group -> members) runs
// with no registry lock held (docs/concurrency.md).
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
  // The registry's own domain (snapshots only).
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
  // one twice). Locks the registry writer lock briefly; allocates. Not for
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
    return r.RemoveInstance(name, instance, nullptr);
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
        current_(new Snapshot()) {
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
    delete current_.load(std::memory_order_acquire);
    registry_domain_.Shutdown(std::chrono::seconds(1)).IgnoreError();
  }

  // The tenant named `name`, or kNotFound (code-only). Lock-free: one guard
  // of the registry domain, a lookup, one owner copy.
  Result<Handle> Find(std::string_view name) const {
    Guard guard = registry_domain_.EnterOnThisThread();
    const Snapshot* s = current_.load(std::memory_order_acquire);
    auto it = s->tenants.find(name);
    if (it == s->tenants.end()) return Status(StatusCode::kNotFound);
    return it->second;
  }

  // Runs fn(TenantType&) inside a guard of the registry domain, without
  // copying the owner; kNotFound (code-only) if no such tenant. fn must not
  // call GetOrCreate or Remove of this registry and must not keep the
  // reference; it may use the tenant's directory (another domain).
  template <typename Fn>
  Status WithTenant(std::string_view name, Fn&& fn) const {
    Guard guard = registry_domain_.EnterOnThisThread();
    const Snapshot* s = current_.load(std::memory_order_acquire);
    auto it = s->tenants.find(name);
    if (it == s->tenants.end()) return Status(StatusCode::kNotFound);
    fn(*it->second);
    return Status::Ok();
  }

  // The tenant named `name`, created by `factory` if absent. Exactly one caller
  // runs the factory per created instance (T1); racers wait for it and get the
  // same handle (or its error). The tenant is fully built before the snapshot
  // naming it is published. Errors: kInvalidArgument (empty or too long name,
  // null factory), the factory's error, kAborted (the factory, or the
  // tenant's construction, threw: its what() is the message),
  // kResourceExhausted (the registry domain stayed full, or out of memory).
  // Never throws; a failed creation leaves nothing behind, so a later call
  // for the name runs the factory again. Allocates; may block behind a
  // racing creation of the same name. Not for use inside WithTenant.
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
  // kResourceExhausted (registry domain full). Never checks emptiness.
  // With a durable log, the removal is logged (kTenantRemove) before it is
  // published and durable when Remove returns; a log error fails it.
  Status Remove(std::string_view name, TenantInstanceId instance) {
    return RemoveInstance(name, instance, options_.durable_log);
  }

  const Handle& default_tenant() const noexcept { return default_; }

  // Handles of every tenant in the current snapshot (a copy).
  std::vector<Handle> Tenants() const {
    Guard guard = registry_domain_.EnterOnThisThread();
    const Snapshot* s = current_.load(std::memory_order_acquire);
    std::vector<Handle> out;
    out.reserve(s->tenants.size());
    for (const auto& [name, tenant] : s->tenants) out.push_back(tenant);
    return out;
  }
  std::size_t size() const {
    Guard guard = registry_domain_.EnterOnThisThread();
    return current_.load(std::memory_order_acquire)->tenants.size();
  }

  EpochDomain& route_domain() const noexcept { return *route_domain_; }
  EpochDomain& registry_domain() const noexcept { return registry_domain_; }

  // Reports the cairn_tenant_* metrics (docs/metrics.md, "Tenants") to
  // `visitor`: the tenant count, creations, failed creations and removals;
  // then, for each tenant of one snapshot in name order, its quota (limit,
  // charged, committed, pending, deficit, refusals) and its directory's
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

  struct Snapshot {
    std::unordered_map<std::string, Handle, base_internal::KeyHash,
                       base_internal::KeyEq>
        tenants;
  };
  struct Outcome {
    Status status;
    Handle tenant;
  };
  // What a retired snapshot is charged: its table and nodes (the tenants
  // themselves are shared with the next snapshot).
  static constexpr std::size_t kBytesPerTenant = 96;

  static void DeleteSnapshot(void* p) { delete static_cast<Snapshot*>(p); }

  // One logged registry change (H1): reserved before mu_, appended under it
  // before the snapshot that shows the change is published, finalized
  // after it; cancelled if the change does not happen. `log` null: no-op.
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
                        DurableLog* log) {
    if (name == options_.default_tenant) {
      return FailedPreconditionError("the default tenant is never removed");
    }
    TenantLogStep step(log);
    CAIRN_RETURN_IF_ERROR(step.Reserve(name));
    Result<RetireReservation> budget = ReserveSnapshot();
    if (!budget.ok()) return std::move(budget).status();
    const Snapshot* old = nullptr;
    Handle removed;
    {
      MutexLock lock(&mu_);
      const Snapshot* s = current_.load(std::memory_order_relaxed);
      auto it = s->tenants.find(name);
      if (it == s->tenants.end() || it->second->instance_id() != instance) {
        return NotFoundError("no such tenant instance");
      }
      removed = it->second;
      CAIRN_RETURN_IF_ERROR(step.Append(DurableOp::kTenantRemove, *removed));
      auto next = std::make_unique<Snapshot>(*s);
      next->tenants.erase(next->tenants.find(name));
      old = s;
      current_.store(next.release(), std::memory_order_release);
    }
    removed->quota().CloseAdmission();
    removed_.Add();
    registry_domain_.RetireReserved(
        std::move(budget).value(), const_cast<Snapshot*>(old), &DeleteSnapshot);
    return step.Finalize();
  }

  Result<RetireReservation> ReserveSnapshot() {
    const std::size_t n = size() + 1;
    return registry_domain_.Reserve(sizeof(Snapshot) + n * kBytesPerTenant);
  }

  // GetOrCreate() after a miss. Whatever throws before the creation is
  // registered in creating_ leaves nothing behind; from then on every
  // failure, thrown or returned, is caught, the entry erased and the promise
  // fulfilled, so racers get the error and a later call starts afresh (an
  // unfulfilled promise would hand every later caller std::future_error).
  Result<Handle> Create(std::string_view name, const Factory& factory) {
    std::promise<Outcome> promise;
    std::shared_future<Outcome> pending;
    {
      MutexLock lock(&mu_);
      const Snapshot* s = current_.load(std::memory_order_relaxed);
      auto it = s->tenants.find(name);
      if (it != s->tenants.end()) return it->second;
      auto c = creating_.find(name);
      if (c != creating_.end()) {
        pending = c->second;
      } else {
        creating_.emplace(std::string(name), promise.get_future().share());
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
      // On success Publish forgets the creation under the lock that
      // publishes it: a Remove that follows cannot leave a finished
      // creation behind for a later GetOrCreate to wait on and return (T2).
      // The default tenant's creation is not logged: every registry has
      // one.
      if (outcome.status.ok()) {
        outcome.status =
            Publish(name, outcome.tenant,
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
      MutexLock lock(&mu_);
      // By iterator: erasing by key would build a std::string, which may
      // throw here.
      if (auto c = creating_.find(name); c != creating_.end()) {
        creating_.erase(c);
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
    try {
      {
        MutexLock lock(&mu_);
        const Snapshot* s = current_.load(std::memory_order_relaxed);
        if (s->tenants.find(name) != s->tenants.end() ||
            creating_.find(name) != creating_.end()) {
          return AlreadyExistsError("tenant name exists");
        }
      }
      Handle tenant = std::make_shared<TenantType>(
          std::string(name), instance, WithRegistryLog(std::move(options)),
          route_domain_);
      Result<RetireReservation> budget = ReserveSnapshot();
      if (!budget.ok()) return std::move(budget).status();
      const Snapshot* old = nullptr;
      {
        MutexLock lock(&mu_);
        const Snapshot* s = current_.load(std::memory_order_relaxed);
        // Checked again under the lock that publishes: a racing
        // GetOrCreate or CreateInstance of the name may have published.
        if (s->tenants.find(name) != s->tenants.end() ||
            creating_.find(name) != creating_.end()) {
          return AlreadyExistsError("tenant name exists");
        }
        auto next = std::make_unique<Snapshot>(*s);
        next->tenants.emplace(std::string(name), tenant);
        old = s;
        current_.store(next.release(), std::memory_order_release);
      }
      created_.Add();
      registry_domain_.RetireReserved(std::move(budget).value(),
                                      const_cast<Snapshot*>(old),
                                      &DeleteSnapshot);
      return tenant;
    } catch (const std::bad_alloc&) {
      return ResourceExhaustedError("out of memory creating a tenant");
    } catch (const std::exception& e) {
      return AbortedError(e.what());
    }
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

  // Publishes `tenant`, logged to `log` unless it is null.
  Status Publish(std::string_view name, const Handle& tenant, DurableLog* log) {
    TenantLogStep step(log);
    CAIRN_RETURN_IF_ERROR(step.Reserve(name));
    Result<RetireReservation> budget = ReserveSnapshot();
    if (!budget.ok()) return std::move(budget).status();
    const Snapshot* old = nullptr;
    {
      MutexLock lock(&mu_);
      const Snapshot* s = current_.load(std::memory_order_relaxed);
      CAIRN_RETURN_IF_ERROR(step.Append(DurableOp::kTenantCreate, *tenant));
      auto next = std::make_unique<Snapshot>(*s);
      next->tenants.emplace(std::string(name), tenant);
      old = s;
      current_.store(next.release(), std::memory_order_release);
      // Nothing may throw once the snapshot is published.
      if (auto c = creating_.find(name); c != creating_.end()) {
        creating_.erase(c);
      }
    }
    created_.Add();
    registry_domain_.RetireReserved(
        std::move(budget).value(), const_cast<Snapshot*>(old), &DeleteSnapshot);
    return step.Finalize();
  }

  const RegistryOptions options_;
  // Declared before the registry domain: retired snapshots (and the tenants
  // they may be the last owners of) are freed while the route domain lives.
  std::unique_ptr<EpochDomain> owned_route_domain_;
  EpochDomain* const route_domain_;
  mutable EpochDomain registry_domain_;
  std::atomic<const Snapshot*> current_;

  Mutex mu_;  // registry writer: snapshot publication, creating_
  // Looked up by string_view: cleanup must not allocate a key.
  std::unordered_map<std::string, std::shared_future<Outcome>,
                     base_internal::KeyHash, base_internal::KeyEq>
      creating_ CAIRN_GUARDED_BY(mu_);
  std::atomic<TenantInstanceId> next_instance_{1};
  Handle default_;
  // Metrics (VisitMetrics): registry writes only, so plain counters.
  Counter created_;
  Counter create_failures_;
  Counter removed_;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_TENANT_TENANT_REGISTRY_H_
