// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The compiled part of ScanHashMap: per-map seeds, process-unique map ids
// and the metrics report.

#include "cairn/index/scan_hash_map.h"

#include <atomic>
#include <cstdint>
#include <random>
#include <span>
#include <string_view>

#include "cairn/base/metrics.h"

CAIRN_NAMESPACE_BEGIN
namespace index_internal {

std::uint64_t RandomSeed() noexcept {
  std::random_device device;
  std::uint64_t seed = 0;
  while (seed == 0) {
    seed = (std::uint64_t{device()} << 32) ^ device();
  }
  return seed;
}

std::uint64_t NextMapId() noexcept {
  // Only uniqueness matters; no other memory is ordered by this counter.
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void VisitScanHashMapMetrics(const ScanHashMapMetricsInput& in,
                             MetricVisitor& visitor,
                             std::span<const MetricLabel> labels) {
  LabelScope v(visitor, labels);
  v.GaugeValue("cairn_index_entries", "Entries in the record index.",
               static_cast<double>(in.entries));
  v.GaugeValue("cairn_index_slots",
               "Slots of the table new entries go to (12 per bucket).",
               static_cast<double>(in.slots));
  v.GaugeValue("cairn_index_load_ratio",
               "Entries per slot of the table new entries go to; the map "
               "grows above 0.75 and shrinks below 0.25.",
               in.slots == 0 ? 0.0
                             : static_cast<double>(in.entries) /
                                   static_cast<double>(in.slots));
  v.GaugeValue("cairn_index_rehashing",
               "1 while an incremental resize is in progress, else 0.",
               in.rehashing ? 1.0 : 0.0);
  const MetricLabel buckets[] = {{"part", "buckets"}};
  const MetricLabel chains[] = {{"part", "chains"}};
  const MetricLabel arena[] = {{"part", "arena"}};
  constexpr std::string_view kMemoryHelp =
      "Bytes held from the IndexAllocator: bucket tables, overflow chain "
      "pool, entry arena.";
  v.GaugeValue("cairn_index_memory_bytes", kMemoryHelp,
               static_cast<double>(in.memory.bucket_bytes), buckets);
  v.GaugeValue("cairn_index_memory_bytes", kMemoryHelp,
               static_cast<double>(in.memory.chain_bytes), chains);
  v.GaugeValue("cairn_index_memory_bytes", kMemoryHelp,
               static_cast<double>(in.memory.arena_bytes), arena);
  v.GaugeValue("cairn_index_arena_live_bytes",
               "Arena bytes of live entries (each rounded to 8 bytes); the "
               "rest of the arena is slack left by erases.",
               static_cast<double>(in.memory.arena_live_bytes));
  v.CounterValue("cairn_index_resizes_started_total",
                 "Resizes (grow or shrink) started.",
                 in.stats.rehashes_started);
  v.CounterValue("cairn_index_rehash_steps_total",
                 "Bucket chains moved by incremental rehash steps.",
                 in.stats.rehash_steps);
  v.CounterValue("cairn_index_rehash_step_failures_total",
                 "Resize starts or rehash steps that could not allocate "
                 "(retried by a later mutation or Maintain()).",
                 in.stats.rehash_step_failures);
  v.CounterValue("cairn_index_chain_compactions_total",
                 "Overflow chains compacted after an erase.",
                 in.stats.chain_compactions);
}

}  // namespace index_internal
CAIRN_NAMESPACE_END
