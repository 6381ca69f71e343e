// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The eviction kernel: one pipeline for every policy (V1-V5,
// docs/tenants.md).
//
//   census (DirectoryHooks::Census: VisitHandles chunks, each object's
//   metadata copied under its shared lock, no lease granted)
//   -> rank outside every lock: earliest lease deadline first; soft-pinned
//      objects only in a second pass, only if allowed and only if the first
//      pass did not reach the lower bound (V3). The ranking keeps only the
//      best candidates that cover the goal with slack (a bounded heap), not
//      one entry per object: a cycle over 1M objects that frees a few MiB
//      allocates and sorts a few hundred candidates, not 1M. If skips use up
//      the kept candidates before the goal, the census runs again with a
//      larger cover (EvictionResult::census_rounds).
//   -> one candidate per explicit group (dedupe by group)
//   -> offload hand-off (optional host hook, no lock held): synchronous
//      (Options::offload, V4) or a ticket the host completes later
//      (Options::offload_async, V7, cairn/tenant/offload.h)
//   -> DirectoryHooks::EvictIfUnchanged: lock group, then members in key
//      order, revalidate identity, lifecycle, version, lease, pins, tasks;
//      release quota, mark kRemoving, matched-unlink every member (V1, V2)
//   -> host release callback with the tokens and payloads, no lock held.
//
// Policies pick the directories and the byte goals: MemoryWatermarkPolicy
// (every tenant, size bytes), the tenant-quota deficit (one tenant,
// counted bytes, V5) and evict-and-retry for a put the quota refused (the
// bytes the put lacks, from its tenant, V6). A candidate that changed since the
// census is skipped and the kernel keeps going down the ranking: a goal is a
// minimum, not a count (V2). A commit whose durable-log reservation fails, or
// whose record the log cannot make durable (H5), stops the cycle there, with
// the log's error in EvictionResult::status.
//
// Thread safety: an Evictor is safe from any thread; concurrent cycles are
// allowed (each candidate is revalidated under its locks) but compete for the
// same objects. A cycle holds no lock across host code or across another
// candidate; the callbacks (offload, on_evicted, the directories'
// on_removed) run with no cairn lock held and may call the directory.
//
// Metrics: Evictor::VisitMetrics() reports the cairn_eviction_* counters,
// summed over every cycle this Evictor ran (docs/metrics.md, "Eviction");
// the per-tenant eviction counts are each directory's
// cairn_directory_evicted_* (TenantRegistry::VisitMetrics labels them).

#ifndef CAIRN_TENANT_EVICTION_H_
#define CAIRN_TENANT_EVICTION_H_

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cairn/base/metrics.h"
#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/directory/group_directory.h"
#include "cairn/tenant/offload.h"
#include "cairn/tenant/tenant_registry.h"

CAIRN_NAMESPACE_BEGIN

// Memory watermark: when the tenants' objects hold more than
// high_watermark_ratio x capacity_bytes (size bytes), evict down to
// target_ratio x capacity with unpinned objects; if that cannot reach
// lower_bound_ratio x capacity and soft-pinned eviction is allowed, evict
// soft-pinned objects until it does. Requires
// 0 <= target_ratio <= lower_bound_ratio <= high_watermark_ratio <= 1 with
// high_watermark_ratio > 0, all finite, and capacity_bytes > 0.
struct MemoryWatermarkPolicy {
  std::uint64_t capacity_bytes = 0;
  double high_watermark_ratio = 0.95;
  double target_ratio = 0.80;
  double lower_bound_ratio = 0.90;

  Status Validate() const {
    const double h = high_watermark_ratio;
    const double t = target_ratio;
    const double l = lower_bound_ratio;
    if (!std::isfinite(h) || !std::isfinite(t) || !std::isfinite(l)) {
      return InvalidArgumentError("eviction ratios must be finite");
    }
    if (capacity_bytes == 0) {
      return InvalidArgumentError("eviction capacity_bytes must be > 0");
    }
    if (!(h > 0 && h <= 1) || !(t >= 0) || !(t <= l) || !(l <= h)) {
      return InvalidArgumentError(
          "eviction ratios need 0 <= target <= lower_bound <= high_watermark "
          "<= 1 and high_watermark > 0");
    }
    return Status::Ok();
  }
};

struct EvictionResult {
  std::size_t census_objects = 0;  // summed over census rounds
  // Evictable candidates the census found (after group dedupe and census
  // filters), summed over census rounds.
  std::size_t candidates = 0;
  // Of those, the ones the bounded ranking kept, in exact eviction order
  // (V3): about what covers the goal twice over, at least
  // Evictor::kMinRanked per pass, whatever the directory's size.
  std::size_t ranked = 0;
  std::size_t census_rounds = 0;
  std::size_t evicted_objects = 0;  // every member of an evicted group counts
  std::size_t evicted_groups = 0;
  std::size_t skipped = 0;          // changed since the census (V2)
  std::size_t offload_refused = 0;  // kept because the hand-off was refused
  std::size_t offloaded = 0;
  std::uint64_t freed_bytes = 0;  // in the policy's measure
  // Asynchronous offload (V7): tickets handed to the host by this call and
  // their candidates' bytes (policy measure). Handed-off bytes count
  // towards the goal as freed bytes do: the host frees them by completing.
  std::size_t offload_handed_off = 0;
  std::uint64_t offload_handed_off_bytes = 0;
  // The call stopped offering because max_offloads_in_flight tickets were
  // out (its goal may be unmet).
  bool offload_bound_reached = false;
  bool used_soft_pinned_pass = false;
  // Why the cycle stopped early: OK if it ran to its goal or out of
  // candidates; otherwise the durable log's error. Either a commit's
  // reservation failed (that candidate and every later one are left
  // untouched), or a commit's record could not be made durable (H5: that
  // candidate was evicted and is counted, but is not acknowledged). A log
  // that fails once refuses every later reservation, so the cycle stops.
  Status status;
};

template <typename Payload = EmptyPayload,
          template <typename> class Route = ObjectRouteIndex>
class Evictor {
 public:
  using Directory = GroupDirectory<Payload, Route>;
  using Handle = ObjectHandle<Payload>;
  using Evicted = EvictedObject<Payload>;
  using Registry = TenantRegistry<Payload, Route>;
  using Ticket = OffloadTicket<Payload, Route>;

  // Which bytes a goal counts.
  enum class Measure : std::uint8_t { kSizeBytes, kCountedBytes };

  struct Options {
    // Soft-pinned objects may be evicted, in a second pass (V3).
    bool allow_soft_pinned = false;
    // With an offload hook, a refused hand-off keeps the object unless
    // force_evict is set (V4).
    bool force_evict = false;
    // Offered each candidate (every member of a group) before its commit,
    // with no lock held; true: the host took the data. Null: no offload.
    std::function<bool(const Handle&)> offload;
    // Asynchronous offload (V7): handed a ticket per candidate, with no
    // lock held, instead of the commit; the host completes it (keep,
    // remove, fail) now or later, from any thread. At most one of offload
    // and offload_async may be set (CAIRN_CHECK). force_evict does not
    // apply: a ticket that fails keeps its objects.
    std::function<void(Ticket)> offload_async;
    // Tickets out at once, over every cycle of this Evictor (0: no bound).
    // At the bound a cycle stops offering and says so
    // (EvictionResult::offload_bound_reached).
    std::size_t max_offloads_in_flight = 256;
    // Called after each committed candidate with what it removed (a group's
    // members together), with no lock held; the payloads are the host's.
    std::function<void(std::span<Evicted>)> on_evicted;
    std::size_t census_chunk = 0;  // 0: the directory's visit_chunk
  };

  explicit Evictor(Options options = {})
      : options_(std::move(options)),
        flights_(std::make_shared<tenant_internal::OffloadFlights<Payload>>(
            options_.max_offloads_in_flight, options_.on_evicted)) {
    CAIRN_CHECK_MSG(!(options_.offload && options_.offload_async),
                    "set at most one of offload and offload_async");
  }
  Evictor(const Evictor&) = delete;
  Evictor& operator=(const Evictor&) = delete;

  // Reports the cairn_eviction_* counters (docs/metrics.md, "Eviction"):
  // cycles, census rounds, passes, candidates evicted (objects, groups,
  // bytes in both measures), skipped, offload hand-offs accepted and
  // refused, asynchronous hand-offs by outcome and in flight, and cycles
  // stopped by a durable-log refusal or the in-flight bound. Relaxed loads;
  // the in-flight gauge takes the in-flight mutex (a leaf) briefly. A cycle
  // or completion running meanwhile may be partly included. Safe from any
  // thread, also from the evictor's own callbacks.
  void VisitMetrics(MetricVisitor& visitor) const {
    const tenant_internal::OffloadFlights<Payload>& f = *flights_;
    visitor.CounterValue("cairn_eviction_cycles_total",
                         "Eviction cycles run (Evict calls with a goal).",
                         cycles_.Value());
    visitor.CounterValue("cairn_eviction_census_rounds_total",
                         "Census rounds over the cycles' directories.",
                         census_rounds_.Value());
    static constexpr std::string_view kPassHelp =
        "Ranked passes: unpinned candidates, then soft-pinned ones.";
    const std::array<MetricLabel, 1> unpinned = {
        MetricLabel{"pass", "unpinned"}};
    const std::array<MetricLabel, 1> soft = {
        MetricLabel{"pass", "soft_pinned"}};
    visitor.CounterValue("cairn_eviction_passes_total", kPassHelp,
                         unpinned_passes_.Value(), unpinned);
    visitor.CounterValue("cairn_eviction_passes_total", kPassHelp,
                         soft_passes_.Value(), soft);
    visitor.CounterValue("cairn_eviction_evicted_objects_total",
                         "Objects evicted (every member of an evicted group).",
                         evicted_objects_.Value() + f.evicted_objects.Value());
    visitor.CounterValue("cairn_eviction_evicted_groups_total",
                         "Explicit groups evicted whole.",
                         evicted_groups_.Value() + f.evicted_groups.Value());
    static constexpr std::string_view kBytesHelp =
        "Bytes evicted: size (size_bytes) or counted (counted_bytes).";
    const std::array<MetricLabel, 1> size = {MetricLabel{"measure", "size"}};
    const std::array<MetricLabel, 1> counted = {
        MetricLabel{"measure", "counted"}};
    visitor.CounterValue(
        "cairn_eviction_evicted_bytes_total", kBytesHelp,
        evicted_size_bytes_.Value() + f.evicted_size_bytes.Value(), size);
    visitor.CounterValue(
        "cairn_eviction_evicted_bytes_total", kBytesHelp,
        evicted_counted_bytes_.Value() + f.evicted_counted_bytes.Value(),
        counted);
    visitor.CounterValue(
        "cairn_eviction_skipped_total",
        "Candidates that changed since the census and were kept (V2).",
        skipped_.Value());
    static constexpr std::string_view kOffloadHelp =
        "Offload hand-offs by result (a group's members count as one).";
    const std::array<MetricLabel, 1> accepted = {
        MetricLabel{"result", "accepted"}};
    const std::array<MetricLabel, 1> refused = {
        MetricLabel{"result", "refused"}};
    visitor.CounterValue("cairn_eviction_offloads_total", kOffloadHelp,
                         offload_accepted_.Value(), accepted);
    visitor.CounterValue("cairn_eviction_offloads_total", kOffloadHelp,
                         offload_refused_.Value(), refused);
    static constexpr std::string_view kAsyncHelp =
        "Asynchronous offload tickets: handed off, then by completion (a "
        "group is one ticket).";
    const std::array<MetricLabel, 1> handed = {
        MetricLabel{"outcome", "handed_off"}};
    const std::array<MetricLabel, 1> kept = {MetricLabel{"outcome", "kept"}};
    const std::array<MetricLabel, 1> removed = {
        MetricLabel{"outcome", "removed"}};
    const std::array<MetricLabel, 1> failed = {
        MetricLabel{"outcome", "failed"}};
    const std::array<MetricLabel, 1> not_applied = {
        MetricLabel{"outcome", "not_applied"}};
    visitor.CounterValue("cairn_eviction_offload_tickets_total", kAsyncHelp,
                         handed_off_.Value(), handed);
    visitor.CounterValue("cairn_eviction_offload_tickets_total", kAsyncHelp,
                         f.kept.Value(), kept);
    visitor.CounterValue("cairn_eviction_offload_tickets_total", kAsyncHelp,
                         f.removed.Value(), removed);
    visitor.CounterValue("cairn_eviction_offload_tickets_total", kAsyncHelp,
                         f.failed.Value(), failed);
    visitor.CounterValue("cairn_eviction_offload_tickets_total", kAsyncHelp,
                         f.not_applied.Value(), not_applied);
    visitor.GaugeValue("cairn_eviction_offloads_in_flight",
                       "Asynchronous offload tickets not yet completed.",
                       static_cast<double>(f.in_flight()));
    visitor.CounterValue(
        "cairn_eviction_offload_bound_stops_total",
        "Cycles that stopped offering at max_offloads_in_flight.",
        bound_stops_.Value());
    visitor.CounterValue(
        "cairn_eviction_log_refusals_total",
        "Cycles stopped because the durable log refused a reservation or "
        "could not make an eviction durable.",
        log_refusals_.Value());
  }

  // The kernel: evicts from `dirs` until `target_bytes` (measured by
  // `measure`) are freed with unpinned candidates, then, if fewer than
  // `lower_bound_bytes` were freed and soft-pinned eviction is allowed,
  // continues with soft-pinned ones until `lower_bound_bytes`. Candidates
  // run in one global ranking across `dirs`. A directory shut down mid-way
  // is skipped. The first commit whose durable-log reservation or record
  // fails ends the call, with that error in EvictionResult::status. With
  // offload_async, a candidate handed off counts its bytes towards the
  // goals (EvictionResult::offload_handed_off_bytes) and is not committed
  // here; the call ends early at the in-flight bound (V7).
  EvictionResult Evict(std::span<Directory* const> dirs,
                       std::uint64_t target_bytes,
                       std::uint64_t lower_bound_bytes, Measure measure) {
    EvictionResult result;
    if (target_bytes == 0 && lower_bound_bytes == 0) return result;
    cycles_.Add();
    // Candidates whose offload was refused (and kept) are not offered again
    // by a later census round of this call.
    Refused refused;
    std::uint64_t slack = kInitialSlack;
    while (true) {
      const std::uint64_t freed = Progress(result);
      const std::uint64_t need_unpinned =
          target_bytes > freed ? target_bytes - freed : 0;
      const std::uint64_t need_soft =
          options_.allow_soft_pinned && lower_bound_bytes > freed
              ? lower_bound_bytes - freed
              : 0;
      Selection unpinned(SaturatingMul(need_unpinned, slack),
                         need_unpinned > 0);
      Selection soft(SaturatingMul(need_soft, slack), need_soft > 0);
      CensusAndRank(dirs, measure, refused, &unpinned, &soft, &result);
      std::vector<Candidate> ranked = unpinned.TakeRanked();
      RunPass(dirs, ranked, /*soft=*/false, target_bytes, measure, refused,
              &result);
      // The log refused, or the in-flight bound was reached: stop.
      if (!result.status.ok() || result.offload_bound_reached) return result;
      if (Progress(result) < target_bytes && unpinned.dropped()) {
        slack = SaturatingMul(slack, kSlackGrowth);  // more exist: look again
        continue;
      }
      if (options_.allow_soft_pinned && Progress(result) < lower_bound_bytes) {
        result.used_soft_pinned_pass = true;
        ranked = soft.TakeRanked();
        RunPass(dirs, ranked, /*soft=*/true, lower_bound_bytes, measure,
                refused, &result);
        if (!result.status.ok() || result.offload_bound_reached) {
          return result;
        }
        if (Progress(result) < lower_bound_bytes && soft.dropped()) {
          slack = SaturatingMul(slack, kSlackGrowth);
          continue;
        }
      }
      return result;
    }
  }

  // Memory watermark over every tenant of `registry` (size bytes). Census
  // of every tenant; nothing is evicted below the high watermark.
  // kInvalidArgument for a policy with nonsense ratios.
  Result<EvictionResult> RunWatermark(const Registry& registry,
                                      const MemoryWatermarkPolicy& policy) {
    if (Status s = policy.Validate(); !s.ok()) return s;
    std::vector<typename Registry::Handle> tenants = registry.Tenants();
    std::vector<Directory*> dirs;
    dirs.reserve(tenants.size());
    std::uint64_t used = 0;
    for (const auto& t : tenants) {
      dirs.push_back(&t->directory());
      DirectoryHooks::Census(t->directory(), [&](const Handle&,
                                                 const ObjectMetadata& m) {
        used += m.size_bytes;
      }).IgnoreError();
    }
    return RunWatermarkOn(dirs, used, policy);
  }

  // The same policy over explicit directories, with `used_bytes` measured by
  // the host (or by a census).
  Result<EvictionResult> RunWatermarkOn(std::span<Directory* const> dirs,
                                        std::uint64_t used_bytes,
                                        const MemoryWatermarkPolicy& policy) {
    if (Status s = policy.Validate(); !s.ok()) return s;
    const double cap = static_cast<double>(policy.capacity_bytes);
    if (static_cast<double>(used_bytes) <= policy.high_watermark_ratio * cap) {
      return EvictionResult{};
    }
    auto need = [&](double ratio) -> std::uint64_t {
      const double keep = ratio * cap;
      const double u = static_cast<double>(used_bytes);
      return u > keep ? static_cast<std::uint64_t>(std::ceil(u - keep)) : 0;
    };
    return Evict(dirs, need(policy.target_ratio),
                 need(policy.lower_bound_ratio), Measure::kSizeBytes);
  }

  // Tenant-quota deficit (V5): frees the tenant's deficit in counted bytes,
  // from that tenant only. Nothing to do if it is within its limit.
  EvictionResult RunQuotaDeficit(typename Registry::TenantType& tenant) {
    const std::uint64_t deficit = tenant.quota().deficit();
    if (deficit == 0) return EvictionResult{};
    Directory* dir = &tenant.directory();
    return Evict(std::span<Directory* const>(&dir, 1), deficit, deficit,
                 Measure::kCountedBytes);
  }

  // What AdmitEvicting did: the last put's result (Status or Result<T>, as
  // the put returns), and the evictions it ran for it, summed.
  template <typename PutResult>
  struct Admission {
    PutResult put;
    EvictionResult eviction;  // status: the log's error, if one stopped it
    std::size_t rounds = 0;   // evictions run
  };

  // Evict-and-retry (V6): runs put(), the host's create of a charge of
  // `bytes` counted bytes in `tenant` (CreatePending, Create or BeginUpsert
  // with counted_bytes = bytes). If it fails with kResourceExhausted while
  // the tenant's quota lacks room for `bytes` (charged + bytes > limit,
  // admission open), evicts the bytes it lacks from that tenant only (the
  // V5 ranking in counted bytes: leased, pinned, busy and pending objects
  // stay) and runs put() again; at most `max_rounds` evictions, as a
  // concurrent put may take the room first. Returns the put's refusal,
  // with no more rounds, when an eviction frees nothing (nothing evictable:
  // eviction.candidates says whether there was any), when the log stops an
  // eviction (eviction.status), when admission is closed or `bytes` exceeds
  // the limit itself. Any other result of put() is returned at once, with
  // no eviction; but the directory charges the quota before it finds the
  // key, so at a full tenant a put whose key exists is refused by the quota
  // first, and evicts, before it fails with kAlreadyExists. Safe from any
  // thread; not inside a callback of the tenant's directory (the eviction
  // takes its locks). With offload_async, only tickets completed before the
  // retry (say, inside the hook) have freed anything for it.
  template <typename Put>
  auto AdmitEvicting(typename Registry::TenantType& tenant, std::uint64_t bytes,
                     Put&& put, std::size_t max_rounds = 3)
      -> Admission<std::invoke_result_t<Put&>> {
    Admission<std::invoke_result_t<Put&>> out{put(), {}, 0};
    Directory* dir = &tenant.directory();
    const QuotaAccount& quota = tenant.quota();
    while (CodeOf(out.put) == StatusCode::kResourceExhausted &&
           out.rounds < max_rounds && !quota.admission_closed()) {
      const std::uint64_t limit = quota.limit();
      const std::uint64_t charged = quota.charged();
      if (bytes > limit) break;             // can never be admitted
      if (charged <= limit - bytes) break;  // room: not the quota
      const std::uint64_t lacking = charged - (limit - bytes);
      EvictionResult r = Evict(std::span<Directory* const>(&dir, 1), lacking,
                               lacking, Measure::kCountedBytes);
      ++out.rounds;
      AddTo(out.eviction, r);
      if (!r.status.ok()) break;
      // Room appeared if the eviction freed bytes, or (offload_async) a
      // ticket completed inside the hook refunded some: those count in
      // the ticket, not in r.freed_bytes, so the account says it.
      if (r.freed_bytes == 0 && quota.charged() >= charged) break;
      out.put = put();
    }
    return out;
  }

 private:
  // The bounded ranking keeps the best candidates covering slack x the
  // bytes still needed; the slack grows by kSlackGrowth per census round
  // that ran out of kept candidates (skips) while more existed.
  static constexpr std::uint64_t kInitialSlack = 2;
  static constexpr std::uint64_t kSlackGrowth = 8;

 public:
  // Each pass keeps at least this many candidates, whatever their bytes, so
  // a few skips do not force another census round.
  static constexpr std::size_t kMinRanked = 16;

 private:
  struct Candidate {
    std::size_t dir = 0;
    Handle handle;
    std::uint64_t version = 0;
    std::int64_t lease = 0;
    std::uint64_t bytes = 0;  // a group's: the sum of its census members
    bool soft_pinned = false;
    std::vector<Handle> members;  // a group's members seen by the census
    std::vector<std::uint64_t> member_versions;  // members[i]'s census version
  };

  // Bytes towards a goal: freed now, or handed off for the host to free.
  static std::uint64_t Progress(const EvictionResult& r) noexcept {
    return r.freed_bytes + r.offload_handed_off_bytes;
  }

  static StatusCode CodeOf(const Status& s) noexcept { return s.code(); }
  template <typename T>
  static StatusCode CodeOf(const Result<T>& r) noexcept {
    return r.status().code();
  }

  static void AddTo(EvictionResult& into, const EvictionResult& r) {
    into.census_objects += r.census_objects;
    into.candidates += r.candidates;
    into.ranked += r.ranked;
    into.census_rounds += r.census_rounds;
    into.evicted_objects += r.evicted_objects;
    into.evicted_groups += r.evicted_groups;
    into.skipped += r.skipped;
    into.offload_refused += r.offload_refused;
    into.offloaded += r.offloaded;
    into.freed_bytes += r.freed_bytes;
    into.offload_handed_off += r.offload_handed_off;
    into.offload_handed_off_bytes += r.offload_handed_off_bytes;
    into.offload_bound_reached |= r.offload_bound_reached;
    into.used_soft_pinned_pass |= r.used_soft_pinned_pass;
    if (!r.status.ok()) into.status = r.status;
  }

  // Eviction order (V3): earliest lease deadline first; ties: the larger first,
  // so fewer commits reach the goal.
  static bool RanksBefore(std::int64_t lease_a, std::uint64_t bytes_a,
                          std::int64_t lease_b, std::uint64_t bytes_b) {
    if (lease_a != lease_b) return lease_a < lease_b;
    return bytes_a > bytes_b;
  }
  static bool RanksBefore(const Candidate& a, const Candidate& b) {
    return RanksBefore(a.lease, a.bytes, b.lease, b.bytes);
  }

  static std::uint64_t SaturatingMul(std::uint64_t a, std::uint64_t b) {
    if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) {
      return std::numeric_limits<std::uint64_t>::max();
    }
    return a * b;
  }

  // The best-ranked candidates whose bytes cover `cover` (and at least
  // kMinRanked of them): a heap with the worst kept candidate on top. A
  // candidate ranked after every kept one is refused once the cover is met,
  // before its handle is copied; a kept one that the cover no longer needs
  // is dropped. dropped(): some evictable candidate was not kept.
  class Selection {
   public:
    Selection(std::uint64_t cover, bool wanted)
        : cover_(cover), wanted_(wanted) {}

    bool Wants(std::int64_t lease, std::uint64_t bytes) {
      if (!wanted_) return false;
      if (Covered() && !RanksBefore(lease, bytes, heap_.front().lease,
                                    heap_.front().bytes)) {
        dropped_ = true;
        return false;
      }
      return true;
    }
    // Only after Wants() said true.
    void Add(Candidate c) {
      sum_ += c.bytes;
      heap_.push_back(std::move(c));
      std::push_heap(heap_.begin(), heap_.end(), WorseOnTop);
      while (heap_.size() > kMinRanked &&
             sum_ - heap_.front().bytes >= cover_) {
        sum_ -= heap_.front().bytes;
        std::pop_heap(heap_.begin(), heap_.end(), WorseOnTop);
        heap_.pop_back();
        dropped_ = true;
      }
    }
    std::size_t size() const { return heap_.size(); }
    bool dropped() const { return dropped_; }
    // The kept candidates, best first.
    std::vector<Candidate> TakeRanked() {
      std::sort_heap(heap_.begin(), heap_.end(), WorseOnTop);
      return std::move(heap_);
    }

   private:
    static bool WorseOnTop(const Candidate& a, const Candidate& b) {
      return RanksBefore(a, b);
    }
    bool Covered() const {
      return heap_.size() >= kMinRanked && sum_ >= cover_;
    }

    const std::uint64_t cover_;
    const bool wanted_;
    std::uint64_t sum_ = 0;
    bool dropped_ = false;
    std::vector<Candidate> heap_;
  };

  // Handles whose offload was refused and kept, or that were handed off
  // asynchronously (or found in flight), pinned so that their addresses
  // stay theirs for the whole Evict call: none is offered again by it.
  struct Refused {
    std::unordered_set<const void*> entries;
    std::vector<Handle> pinned;
    bool Contains(const Handle& h) const {
      return !entries.empty() && entries.count(h.get()) != 0;
    }
    void Add(const Handle& h) {
      if (entries.insert(h.get()).second) pinned.push_back(h);
    }
  };

  // One census round over `dirs` into the two bounded rankings. Candidates
  // whose hand-off was refused earlier in this Evict call are left out.
  void CensusAndRank(std::span<Directory* const> dirs, Measure measure,
                     const Refused& refused, Selection* unpinned,
                     Selection* soft_pinned, EvictionResult* result) {
    ++result->census_rounds;
    census_rounds_.Add();
    // Group dedupe: one candidate per (directory, group); its bytes add up
    // the members the census saw. Groups are ranked once the census is
    // over, when a blocked member is known.
    struct GroupKey {
      std::size_t dir;
      GroupId group;
      bool operator==(const GroupKey&) const = default;
    };
    struct GroupKeyHash {
      std::size_t operator()(const GroupKey& k) const noexcept {
        return std::hash<std::uint64_t>{}(k.group * 0x9e3779b97f4a7c15ULL ^
                                          k.dir);
      }
    };
    std::vector<Candidate> groups;
    std::unordered_map<GroupKey, std::size_t, GroupKeyHash> group_slot;
    std::unordered_set<GroupKey, GroupKeyHash> group_blocked;
    auto offer = [&](std::int64_t lease, std::uint64_t bytes, bool soft,
                     auto&& make) {
      ++result->candidates;
      Selection* sel = soft ? soft_pinned : unpinned;
      if (sel->Wants(lease, bytes)) sel->Add(make());
    };
    for (std::size_t d = 0; d < dirs.size(); ++d) {
      const std::int64_t now = dirs[d]->clock()->NowNanos();
      DirectoryHooks::Census(
          *dirs[d],
          [&](const Handle& h, const ObjectMetadata& m) {
            ++result->census_objects;
            const GroupId g =
                h->group() == nullptr ? kNoGroup : h->group()->id();
            const bool blocked =
                m.hard_pinned || m.tasks != 0 || m.lease_deadline_nanos > now;
            const std::uint64_t bytes =
                measure == Measure::kSizeBytes ? m.size_bytes : m.counted_bytes;
            const bool soft = m.soft_pin_deadline_nanos > now;
            if (g == kNoGroup) {
              if (blocked || refused.Contains(h)) return;
              offer(m.lease_deadline_nanos, bytes, soft, [&] {
                return Candidate{d,     h,    m.version, m.lease_deadline_nanos,
                                 bytes, soft, {},        {}};
              });
              return;
            }
            const GroupKey key{d, g};
            if (blocked) {  // one unevictable member keeps the group
              group_blocked.insert(key);
              return;
            }
            auto [it, fresh] = group_slot.emplace(key, groups.size());
            if (fresh) {
              groups.push_back(Candidate{d,
                                         h,
                                         m.version,
                                         m.lease_deadline_nanos,
                                         bytes,
                                         soft,
                                         {h},
                                         {m.version}});
            } else {
              Candidate& c = groups[it->second];
              c.bytes += bytes;
              c.soft_pinned = c.soft_pinned || soft;
              c.members.push_back(h);
              c.member_versions.push_back(m.version);
            }
          },
          options_.census_chunk)
          .IgnoreError();
    }
    for (Candidate& c : groups) {
      if (group_blocked.count(GroupKey{c.dir, c.handle->group()->id()}) != 0 ||
          refused.Contains(c.handle)) {
        continue;
      }
      offer(c.lease, c.bytes, c.soft_pinned, [&] { return std::move(c); });
    }
    result->ranked += unpinned->size() + soft_pinned->size();
  }

  void RunPass(std::span<Directory* const> dirs,
               const std::vector<Candidate>& ranked, bool soft,
               std::uint64_t goal, Measure measure, Refused& refused,
               EvictionResult* result) {
    (soft ? soft_passes_ : unpinned_passes_).Add();
    std::vector<Evicted> out;
    for (const Candidate& c : ranked) {
      if (Progress(*result) >= goal) return;
      if (c.soft_pinned != soft) continue;
      if (options_.offload_async) {
        if (refused.Contains(c.handle)) continue;
        if (!HandOffAsync(dirs, c, soft, refused, result)) return;  // bound
        continue;
      }
      if (options_.offload) {
        if (refused.Contains(c.handle)) continue;
        if (!HandOff(c, result)) {
          refused.Add(c.handle);  // a group: every member, so any matches
          for (const Handle& m : c.members) refused.Add(m);
          continue;
        }
      }
      out.clear();
      // With offload, a group evicts only the members that were offered.
      const std::size_t expect = options_.offload ? c.members.size() : 0;
      Status log_error;
      const StatusCode code = DirectoryHooks::EvictIfUnchanged(
          *dirs[c.dir], c.handle, c.version, soft, &out, expect, &log_error);
      if (!log_error.ok() && code != StatusCode::kOk) {
        // The durable log refused the reservation: stop here, leaving this
        // and every later candidate as they are.
        result->status = std::move(log_error);
        log_refusals_.Add();
        return;
      }
      if (code != StatusCode::kOk) {
        if (code == StatusCode::kAborted) {
          ++result->skipped;
          skipped_.Add();
        }
        continue;
      }
      result->evicted_objects += out.size();
      evicted_objects_.Add(out.size());
      if (c.handle->group() != nullptr) {
        ++result->evicted_groups;
        evicted_groups_.Add();
      }
      std::uint64_t size = 0;
      std::uint64_t counted = 0;
      for (const Evicted& x : out) {
        size += x.size_bytes;
        counted += x.counted_bytes;
      }
      evicted_size_bytes_.Add(size);
      evicted_counted_bytes_.Add(counted);
      result->freed_bytes += measure == Measure::kSizeBytes ? size : counted;
      if (options_.on_evicted) {
        options_.on_evicted(std::span<Evicted>(out.data(), out.size()));
      }
      if (!log_error.ok()) {
        // Evicted, but the log could not make it durable (H5): counted and
        // handed over above, then the cycle stops with the log's error.
        result->status = std::move(log_error);
        log_refusals_.Add();
        return;
      }
    }
  }

  // Offload hand-off (V4): offers the candidate (a group's every live
  // member) for offload.
  // False: keep it (refused and not force_evict).
  bool HandOff(const Candidate& c, EvictionResult* result) {
    bool accepted = true;
    if (c.members.empty()) {
      accepted = options_.offload(c.handle);
    } else {
      for (const Handle& h : c.members) {
        accepted = options_.offload(h) && accepted;
      }
    }
    if (accepted) {
      ++result->offloaded;
      offload_accepted_.Add();
      return true;
    }
    ++result->offload_refused;
    offload_refused_.Add();
    return options_.force_evict;
  }

  // Asynchronous hand-off (V7): admits the candidate into the in-flight
  // set and hands the host its ticket, with no lock held. A candidate
  // already in flight (from another cycle) is passed over; either way it
  // is not offered again in this call. False: the in-flight bound is
  // reached, the call stops offering.
  bool HandOffAsync(std::span<Directory* const> dirs, const Candidate& c,
                    bool soft, Refused& offered, EvictionResult* result) {
    std::vector<Handle> handles;
    std::vector<std::uint64_t> versions;
    if (c.members.empty()) {
      handles.push_back(c.handle);
      versions.push_back(c.version);
    } else {
      handles = c.members;
      versions = c.member_versions;
    }
    std::vector<const void*> entries;
    entries.reserve(handles.size());
    for (const Handle& h : handles) entries.push_back(h.get());
    switch (flights_->Begin(entries)) {
      case tenant_internal::OffloadFlights<Payload>::Admit::kFull:
        result->offload_bound_reached = true;
        bound_stops_.Add();
        return false;
      case tenant_internal::OffloadFlights<Payload>::Admit::kBusy:
        for (const Handle& h : handles) offered.Add(h);
        return true;
      case tenant_internal::OffloadFlights<Payload>::Admit::kAdmitted:
        break;
    }
    for (const Handle& h : handles) offered.Add(h);
    ++result->offload_handed_off;
    result->offload_handed_off_bytes += c.bytes;
    handed_off_.Add();
    options_.offload_async(Ticket(flights_, dirs[c.dir], std::move(handles),
                                  std::move(versions), std::move(entries), soft,
                                  c.bytes));
    return true;
  }

  const Options options_;
  // In-flight tickets and the counters their completions move; shared with
  // the tickets, which may outlive this Evictor.
  const std::shared_ptr<tenant_internal::OffloadFlights<Payload>> flights_;
  // Metrics (VisitMetrics): summed over every cycle; each add is made where
  // the cycle's EvictionResult field moves.
  Counter cycles_;
  Counter census_rounds_;
  Counter unpinned_passes_;
  Counter soft_passes_;
  Counter evicted_objects_;
  Counter evicted_groups_;
  Counter evicted_size_bytes_;
  Counter evicted_counted_bytes_;
  Counter skipped_;
  Counter offload_accepted_;
  Counter offload_refused_;
  Counter handed_off_;
  Counter bound_stops_;
  Counter log_refusals_;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_TENANT_EVICTION_H_
