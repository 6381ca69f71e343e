// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// SnapshotStats (what one snapshot write or restore did) and SnapshotMetrics,
// the host's running totals of them (docs/metrics.md, "Snapshots and
// standby"). A snapshot is a function call, so the host owns one
// SnapshotMetrics and passes it in: SnapshotWriteOptions::metrics for
// writes (WriteSnapshot and WriteSnapshotAt record into it),
// StandbyOptions::snapshot_metrics for a standby's restore, TimeRestore
// around a restore of its own:
//
//   SnapshotMetrics snapshots;                  // the host's, long-lived
//   SnapshotWriteOptions w;  w.metrics = &snapshots;
//   WriteSnapshot(registry, path, encode, w);
//   SnapshotStats stats;
//   auto restored = snapshots.TimeRestore(stats, [&] {
//     return RestoreRegistrySnapshot<P>(path, decode, {}, &stats);
//   });
//   snapshots.VisitMetrics(visitor);
//
// Thread safety: every method is safe from any thread at once (counters and
// histograms are relaxed atomics; a read may miss a record that races it).
// Recording never allocates, locks or blocks.

#ifndef CAIRN_HA_SNAPSHOT_METRICS_H_
#define CAIRN_HA_SNAPSHOT_METRICS_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

#include "cairn/base/clock.h"
#include "cairn/base/metrics.h"
#include "cairn/base/status.h"
#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

// What a write or a restore did.
struct SnapshotStats {
  std::size_t tenants = 0;
  std::size_t groups = 0;
  std::size_t objects = 0;
  std::uint64_t file_bytes = 0;
  // The durable-log position the snapshot reflects: the write's
  // SnapshotWriteOptions::log_position, the value a restore read (0: none).
  // Replay every log record above it on the restored state.
  std::uint64_t log_position = 0;
  // Restore only: units (a singleton, or a group with all its members) not
  // created because an earlier unit of the file holds one of their keys or
  // their group name. A key erased and created again while the snapshot ran
  // can be met twice; the unit read first wins, and a replay of the log from
  // log_position repairs what it kept (docs/snapshot.md).
  std::size_t skipped_units = 0;
};

class SnapshotMetrics {
 public:
  // `clock` times writes and restores; not owned, never null.
  explicit SnapshotMetrics(const Clock* clock = Clock::Steady()) noexcept;
  SnapshotMetrics(const SnapshotMetrics&) = delete;
  SnapshotMetrics& operator=(const SnapshotMetrics&) = delete;

  const Clock* clock() const noexcept { return clock_; }

  // One write or restore that took `duration`: counted, timed, and if
  // `status` is OK its `stats` added to the totals and kept as the last.
  void RecordWrite(const Status& status, const SnapshotStats& stats,
                   std::chrono::nanoseconds duration) noexcept;
  void RecordRestore(const Status& status, const SnapshotStats& stats,
                     std::chrono::nanoseconds duration) noexcept;

  // Calls restore() (which returns a Status or a Result and fills `stats`
  // when it succeeds), times it on the clock and records it; returns what
  // restore() returned.
  template <typename Fn>
  auto TimeRestore(const SnapshotStats& stats, Fn&& restore)
      -> decltype(std::forward<Fn>(restore)()) {
    const std::int64_t start = clock_->NowNanos();
    auto result = std::forward<Fn>(restore)();
    const std::chrono::nanoseconds took(clock_->NowNanos() - start);
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(result)>,
                                 Status>) {
      RecordRestore(result, stats, took);
    } else {
      RecordRestore(result.status(), stats, took);
    }
    return result;
  }

  // Reports the cairn_snapshot_* metrics, each with `labels` first.
  // Allocates nothing itself (the visitor may).
  void VisitMetrics(MetricVisitor& visitor,
                    std::span<const MetricLabel> labels = {}) const;

 private:
  struct Side {
    Counter runs;
    Counter failures;
    Counter objects;
    Counter groups;
    Counter bytes;
    Counter skipped_units;
    std::atomic<std::uint64_t> last_objects{0};
    std::atomic<std::uint64_t> last_bytes{0};
    std::atomic<std::uint64_t> last_log_position{0};
    Histogram nanos{1e-9};
    void Record(const Status& status, const SnapshotStats& stats,
                std::chrono::nanoseconds duration) noexcept;
  };

  const Clock* const clock_;
  Side write_;
  Side restore_;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_HA_SNAPSHOT_METRICS_H_
