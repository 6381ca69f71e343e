// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Metrics a host exports in one call: cheap counters, a log-linear
// histogram, one visitor every component accepts (`VisitMetrics`), and a
// renderer for the Prometheus text exposition format (docs/metrics.md).
//
//   Counter            one relaxed atomic; for paths that already take a
//                      lock or do I/O (syncs, flushes, evictions).
//   StripedCounters<N> N counters spread over a few cache lines, one per
//                      thread stripe, so hot readers of different threads
//                      do not write one shared line; Value() sums stripes.
//   Histogram          log-linear buckets (4 per power of two, about 19%
//                      resolution) of non-negative integers (nanoseconds,
//                      bytes); Record is three relaxed atomic adds.
//   MetricVisitor      receives each metric as a MetricSample: name, help,
//                      kind, labels and value; LabelScope prepends labels
//                      (a tenant's name) to everything visited through it.
//   PrometheusRenderer a MetricVisitor that collects samples and renders
//                      them, grouped by family, as exposition text.
//
// Thread safety: Counter, StripedCounters and Histogram may be updated and
// read from any thread at once; a read is a sum of relaxed loads, so it can
// miss increments that race with it but never reports one twice. Updates
// never allocate and never block. MetricVisitor and PrometheusRenderer are
// used by one thread at a time; a VisitMetrics call hands the visitor
// string_views that are valid only during the Visit call.

#ifndef CAIRN_BASE_METRICS_H_
#define CAIRN_BASE_METRICS_H_

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

enum class MetricKind : std::uint8_t { kCounter, kGauge, kHistogram };

struct MetricLabel {
  std::string_view name;
  std::string_view value;
};

// A histogram's state as read: per-bucket counts (bucket i covers
// [BucketLower(i), BucketLower(i + 1))), their total and the sum of the
// recorded values. `scale` converts a recorded value to the exported unit
// (1e-9 for nanoseconds exported as seconds, 1 for bytes).
struct HistogramSnapshot {
  static constexpr int kSubBuckets = 4;              // per power of two
  static constexpr int kBuckets = 63 * kSubBuckets;  // up to UINT64_MAX

  std::array<std::uint64_t, kBuckets> counts{};
  std::uint64_t count = 0;
  std::uint64_t sum = 0;
  double scale = 1.0;

  static constexpr int BucketOf(std::uint64_t v) noexcept {
    if (v < kSubBuckets) return static_cast<int>(v);
    const int msb = 63 - std::countl_zero(v);
    const int shift = msb - 2;  // keeps the two bits below the top one
    return (shift + 1) * kSubBuckets +
           static_cast<int>((v >> shift) & (kSubBuckets - 1));
  }
  // Smallest value of bucket i; i == kBuckets gives the end of the range
  // (saturated at UINT64_MAX).
  static constexpr std::uint64_t BucketLower(int i) noexcept {
    if (i < kSubBuckets) return static_cast<std::uint64_t>(i);
    if (i >= kBuckets) return UINT64_MAX;
    const int shift = i / kSubBuckets - 1;
    return static_cast<std::uint64_t>(kSubBuckets + i % kSubBuckets) << shift;
  }
  // Recorded values <= bound (in recorded units): the counts of every
  // bucket that lies wholly at or below it. Exact when bound + 1 is a
  // bucket boundary (every power of two is one).
  std::uint64_t CountAtOrBelow(std::uint64_t bound) const noexcept;
  // The value at quantile q in [0, 1], in recorded units: the lower bound
  // of the bucket holding it (0 when empty).
  std::uint64_t Quantile(double q) const noexcept;
};

// One relaxed atomic counter.
class Counter {
 public:
  void Add(std::uint64_t n = 1) noexcept {
    value_.fetch_add(n, std::memory_order_relaxed);
  }
  std::uint64_t Value() const noexcept {
    return value_.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t> value_{0};
};

namespace metrics_internal {
inline constexpr std::uint32_t kNoStripe = UINT32_MAX;
// Assigns the calling thread's stripe (round robin) and returns it.
std::uint32_t AssignThreadStripe() noexcept;
// Constant-initialised, so reading it is one thread-local load.
inline thread_local std::uint32_t thread_stripe = kNoStripe;
// This thread's stripe, in [0, 2^16): assigned round robin on a thread's
// first call, so threads created together land on different stripes.
inline std::uint32_t ThreadStripe() noexcept {
  const std::uint32_t s = thread_stripe;
  return s != kNoStripe ? s : AssignThreadStripe();
}
}  // namespace metrics_internal

// N counters, each kept in kStripes cache-line-aligned stripes; a thread
// adds to its own stripe. Memory: kStripes * 64 * ceil(N / 8) bytes.
template <std::size_t N, std::size_t kStripes = 4>
class StripedCounters {
  static_assert(N > 0 && std::has_single_bit(kStripes));

 public:
  void Add(std::size_t i, std::uint64_t n = 1) noexcept {
    const std::size_t s = metrics_internal::ThreadStripe() & (kStripes - 1);
    stripes_[s].v[i].fetch_add(n, std::memory_order_relaxed);
  }
  std::uint64_t Value(std::size_t i) const noexcept {
    std::uint64_t total = 0;
    for (const Stripe& s : stripes_) {
      total += s.v[i].load(std::memory_order_relaxed);
    }
    return total;
  }

 private:
  struct alignas(64) Stripe {
    std::array<std::atomic<std::uint64_t>, N> v{};
  };
  std::array<Stripe, kStripes> stripes_{};
};

// Log-linear histogram; see HistogramSnapshot for the buckets.
class Histogram {
 public:
  // `scale`: what one recorded unit is in the exported unit.
  explicit Histogram(double scale = 1.0) noexcept : scale_(scale) {}
  void Record(std::uint64_t v) noexcept {
    counts_[static_cast<std::size_t>(HistogramSnapshot::BucketOf(v))].fetch_add(
        1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(v, std::memory_order_relaxed);
  }
  HistogramSnapshot Snapshot() const noexcept;

 private:
  std::array<std::atomic<std::uint64_t>, HistogramSnapshot::kBuckets> counts_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_{0};
  double scale_;
};

// One metric as a component reports it. Names follow Prometheus:
// `cairn_<component>_<what>[_<unit>]`, counters end in `_total`, units are
// base units (seconds, bytes). The views live for the Visit call only.
struct MetricSample {
  std::string_view name;
  std::string_view help;
  MetricKind kind = MetricKind::kCounter;
  std::span<const MetricLabel> labels;
  double value = 0;                              // counter and gauge
  const HistogramSnapshot* histogram = nullptr;  // kHistogram
};

class MetricVisitor {
 public:
  virtual ~MetricVisitor() = default;
  virtual void Visit(const MetricSample& sample) = 0;

  // Helpers for components.
  void CounterValue(std::string_view name, std::string_view help,
                    std::uint64_t value,
                    std::span<const MetricLabel> labels = {});
  void GaugeValue(std::string_view name, std::string_view help, double value,
                  std::span<const MetricLabel> labels = {});
  void HistogramValue(std::string_view name, std::string_view help,
                      const HistogramSnapshot& snapshot,
                      std::span<const MetricLabel> labels = {});
};

// Forwards every sample to `inner` with `labels` placed before the
// sample's own (at most kMaxLabels in all; more is a programmer error).
// Does not allocate.
class LabelScope final : public MetricVisitor {
 public:
  static constexpr std::size_t kMaxLabels = 8;
  LabelScope(MetricVisitor& inner, std::span<const MetricLabel> labels)
      : inner_(inner), labels_(labels) {}
  void Visit(const MetricSample& sample) override;

 private:
  MetricVisitor& inner_;
  std::span<const MetricLabel> labels_;
};

// Collects samples and renders the Prometheus text exposition format
// (version 0.0.4): per family one `# HELP` and `# TYPE` line, then its
// samples; families in first-seen order; label values escaped; histograms
// as cumulative `_bucket{le="..."}` lines at every power of four 4^k of the
// recorded unit, each counting the values below 4^k (plus +Inf), then `_sum`
// and `_count`. A name that is not a
// valid metric name, or a family reported with two kinds, is a programmer
// error (CAIRN_CHECK).
class PrometheusRenderer final : public MetricVisitor {
 public:
  void Visit(const MetricSample& sample) override;
  // The text of everything visited so far, then starts over.
  std::string Finish();

 private:
  struct Family {
    std::string help;
    MetricKind kind;
    std::string lines;
  };
  std::vector<std::string> order_;
  std::map<std::string, Family, std::less<>> families_;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_BASE_METRICS_H_
