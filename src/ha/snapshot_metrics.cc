// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/ha/snapshot_metrics.h"

#include <string_view>

#include "cairn/base/check.h"

CAIRN_NAMESPACE_BEGIN

SnapshotMetrics::SnapshotMetrics(const Clock* clock) noexcept : clock_(clock) {
  CAIRN_CHECK_MSG(clock_ != nullptr, "SnapshotMetrics: clock is null");
}

void SnapshotMetrics::Side::Record(const Status& status,
                                   const SnapshotStats& stats,
                                   std::chrono::nanoseconds duration) noexcept {
  runs.Add();
  nanos.Record(
      duration.count() > 0 ? static_cast<std::uint64_t>(duration.count()) : 0);
  if (!status.ok()) {
    failures.Add();
    return;
  }
  objects.Add(stats.objects);
  groups.Add(stats.groups);
  bytes.Add(stats.file_bytes);
  skipped_units.Add(stats.skipped_units);
  last_objects.store(stats.objects, std::memory_order_relaxed);
  last_bytes.store(stats.file_bytes, std::memory_order_relaxed);
  last_log_position.store(stats.log_position, std::memory_order_relaxed);
}

void SnapshotMetrics::RecordWrite(const Status& status,
                                  const SnapshotStats& stats,
                                  std::chrono::nanoseconds duration) noexcept {
  write_.Record(status, stats, duration);
}

void SnapshotMetrics::RecordRestore(
    const Status& status, const SnapshotStats& stats,
    std::chrono::nanoseconds duration) noexcept {
  restore_.Record(status, stats, duration);
}

void SnapshotMetrics::VisitMetrics(MetricVisitor& visitor,
                                   std::span<const MetricLabel> labels) const {
  LabelScope v(visitor, labels);
  const auto last = [](const std::atomic<std::uint64_t>& a) {
    return static_cast<double>(a.load(std::memory_order_relaxed));
  };
  v.CounterValue("cairn_snapshot_writes_total",
                 "Snapshot writes, failed ones included.", write_.runs.Value());
  v.CounterValue("cairn_snapshot_write_failures_total",
                 "Snapshot writes that returned an error (the target file "
                 "was left as it was).",
                 write_.failures.Value());
  v.HistogramValue("cairn_snapshot_write_seconds",
                   "Time of each snapshot write, from the first unit read to "
                   "the directory sync after the rename.",
                   write_.nanos.Snapshot());
  v.CounterValue("cairn_snapshot_written_objects_total",
                 "Objects written by successful snapshot writes.",
                 write_.objects.Value());
  v.CounterValue("cairn_snapshot_written_groups_total",
                 "Explicit groups written by successful snapshot writes.",
                 write_.groups.Value());
  v.CounterValue("cairn_snapshot_written_bytes_total",
                 "File bytes written by successful snapshot writes.",
                 write_.bytes.Value());
  v.GaugeValue("cairn_snapshot_last_write_objects",
               "Objects in the last successful snapshot write.",
               last(write_.last_objects));
  v.GaugeValue("cairn_snapshot_last_write_bytes",
               "File bytes of the last successful snapshot write.",
               last(write_.last_bytes));
  v.GaugeValue("cairn_snapshot_last_write_log_position",
               "Durable-log LSN the last successful snapshot write reflects "
               "(replay starts after it).",
               last(write_.last_log_position));
  v.CounterValue("cairn_snapshot_restores_total",
                 "Snapshot restores, failed ones included.",
                 restore_.runs.Value());
  v.CounterValue("cairn_snapshot_restore_failures_total",
                 "Snapshot restores that returned an error (nothing was "
                 "built).",
                 restore_.failures.Value());
  v.HistogramValue("cairn_snapshot_restore_seconds",
                   "Time of each snapshot restore: read, validate, decode, "
                   "create.",
                   restore_.nanos.Snapshot());
  v.CounterValue("cairn_snapshot_restored_objects_total",
                 "Objects created by successful restores.",
                 restore_.objects.Value());
  v.CounterValue("cairn_snapshot_restored_groups_total",
                 "Explicit groups created by successful restores.",
                 restore_.groups.Value());
  v.CounterValue("cairn_snapshot_restored_bytes_total",
                 "File bytes read by successful restores.",
                 restore_.bytes.Value());
  v.CounterValue("cairn_snapshot_restore_skipped_units_total",
                 "Units a restore skipped because an earlier unit held one "
                 "of their keys or their group name.",
                 restore_.skipped_units.Value());
  v.GaugeValue("cairn_snapshot_last_restore_log_position",
               "Durable-log LSN the last successful restore reflected.",
               last(restore_.last_log_position));
}

CAIRN_NAMESPACE_END
