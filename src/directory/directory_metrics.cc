// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/directory/internal/directory_metrics.h"

CAIRN_NAMESPACE_BEGIN

namespace directory_internal {

void VisitDirectoryMetrics(const DirectoryMetricValues& v,
                           MetricVisitor& visitor) {
  visitor.GaugeValue("cairn_directory_objects",
                     "Objects routed in the directory (pending puts too).",
                     static_cast<double>(v.objects));
  visitor.GaugeValue("cairn_directory_groups", "Explicit groups.",
                     static_cast<double>(v.groups));
  visitor.GaugeValue(
      "cairn_directory_pending_unlinks",
      "Removed objects whose route unlink is parked for a later write.",
      static_cast<double>(v.pending_unlinks));
  visitor.GaugeValue(
      "cairn_directory_pending_charge_bytes",
      "Counted bytes charged by pending puts and staged upserts.",
      static_cast<double>(v.pending_charge_bytes));
  visitor.CounterValue(
      "cairn_directory_lifecycle_stripe_waits_total",
      "Creates and erases that waited for their key's lifecycle stripe.",
      v.lifecycle_stripe_waits);

  static constexpr std::string_view kLookupHelp =
      "Lookups by kind: get (WithObject, WithToken, WithHandle), pin, batch "
      "(keys of WithObjects); hit: the object was active.";
  struct LookupRow {
    std::string_view op;
    std::string_view result;
    ReadSlot slot;
  };
  static constexpr std::array<LookupRow, 6> kLookups = {{
      {"get", "hit", kGetHit},
      {"get", "miss", kGetMiss},
      {"pin", "hit", kPinHit},
      {"pin", "miss", kPinMiss},
      {"batch", "hit", kBatchHits},
      {"batch", "miss", kBatchMisses},
  }};
  for (const LookupRow& row : kLookups) {
    const std::array<MetricLabel, 2> labels = {
        MetricLabel{"op", row.op}, MetricLabel{"result", row.result}};
    visitor.CounterValue("cairn_directory_lookups_total", kLookupHelp,
                         v.reads[row.slot], labels);
  }
  visitor.CounterValue("cairn_directory_lookup_batches_total",
                       "Batch lookups (WithObjects calls).", v.reads[kBatches]);

  // Every op's result="ok" is always reported; another result once it has
  // happened, so a directory does not export dozens of zero series.
  static constexpr std::string_view kOpHelp =
      "Write operations by op and result.";
  for (std::size_t op = 0; op < kMetricOps; ++op) {
    for (std::size_t outcome = 0; outcome < kMetricOutcomes; ++outcome) {
      const std::uint64_t n =
          v.writes == nullptr ? 0 : v.writes->OpValue(op, outcome);
      if (outcome != static_cast<std::size_t>(MetricOutcome::kOk) && n == 0) {
        continue;
      }
      const std::array<MetricLabel, 2> labels = {
          MetricLabel{"op", kMetricOpNames[op]},
          MetricLabel{"result", kMetricOutcomeNames[outcome]}};
      visitor.CounterValue("cairn_directory_operations_total", kOpHelp, n,
                           labels);
    }
  }

  auto value = [&](const Counter WriteCounters::*c) -> std::uint64_t {
    return v.writes == nullptr ? 0 : (v.writes->*c).Value();
  };
  visitor.CounterValue(
      "cairn_directory_evicted_objects_total",
      "Objects removed by eviction (every member of an evicted group).",
      value(&WriteCounters::evicted_objects));
  visitor.CounterValue("cairn_directory_evicted_groups_total",
                       "Explicit groups evicted whole.",
                       value(&WriteCounters::evicted_groups));
  static constexpr std::string_view kEvictedBytesHelp =
      "Bytes of evicted objects: size (size_bytes) or counted "
      "(counted_bytes, the quota's measure).";
  const std::array<MetricLabel, 1> size = {MetricLabel{"measure", "size"}};
  const std::array<MetricLabel, 1> counted = {
      MetricLabel{"measure", "counted"}};
  visitor.CounterValue("cairn_directory_evicted_bytes_total", kEvictedBytesHelp,
                       value(&WriteCounters::evicted_size_bytes), size);
  visitor.CounterValue("cairn_directory_evicted_bytes_total", kEvictedBytesHelp,
                       value(&WriteCounters::evicted_counted_bytes), counted);
  visitor.CounterValue(
      "cairn_directory_reaped_total",
      "Pending puts and staged upserts aborted by ReapPendingPuts.",
      value(&WriteCounters::reaped));
}

}  // namespace directory_internal

CAIRN_NAMESPACE_END
