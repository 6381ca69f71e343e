// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// SnapshotMetrics and Standby::VisitMetrics against a workload whose counts
// are known, read back from the Prometheus text; the write and restore
// histograms against latencies that the encoder and decoder make on a
// ManualClock.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/base/metrics.h"
#include "cairn/ha/file_durable_log.h"
#include "cairn/ha/snapshot.h"
#include "cairn/ha/snapshot_metrics.h"
#include "cairn/ha/standby.h"
#include "cairn/tenant/tenant_registry.h"
#include "testing/metrics_expect.h"
#include "testing/scratch_dir.h"

namespace cairn {
namespace {

struct Note {
  std::string text;
};

}  // namespace

template <>
struct DurablePayloadCodec<Note> {
  static constexpr bool kLogsPayload = true;
  static void Encode(const Note& n, std::string* out) { out->append(n.text); }
  static Result<Note> Decode(std::string_view bytes) {
    return Note{std::string(bytes)};
  }
};

namespace {

using std::chrono::milliseconds;
using testing::ScratchDir;
using testing_internal::BucketValue;
using testing_internal::Labels;
using testing_internal::ParsedExposition;
using testing_internal::RenderAndParse;
using Registry = TenantRegistry<Note>;

TEST(SnapshotMetricsTest, WritesRestoresAndAStandbyAreCounted) {
  ScratchDir scratch("snapmetrics");
  const std::string log_dir = scratch.File("log");
  const std::string path = scratch.File("snap");
  ManualClock clock;
  FileDurableLogOptions log_options;
  log_options.sync = false;
  auto opened = FileDurableLog::Open(log_dir, log_options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<FileDurableLog> log = std::move(opened).value();
  RegistryOptions registry_options;
  registry_options.durable_log = log.get();
  Registry registry(registry_options);
  auto& dir = registry.default_tenant()->directory();
  // Three singletons and a group of two: five objects, one group.
  for (const char* key : {"a", "b", "c"}) {
    ASSERT_TRUE(dir.Create(key, CreateOptions{}, Note{key}).ok());
  }
  CreateOptions member;
  member.group = "g";
  for (const char* key : {"d", "e"}) {
    ASSERT_TRUE(dir.Create(key, member, Note{key}).ok());
  }

  // A write whose encoder takes 1 ms of the clock per object: 5 ms.
  SnapshotMetrics metrics(&clock);
  SnapshotWriteOptions w;
  w.sync = false;
  w.metrics = &metrics;
  auto encode = [&clock](const Note& n, std::string* out) {
    clock.Advance(milliseconds(1));
    out->append(n.text);
    return Status::Ok();
  };
  SnapshotStats written;
  ASSERT_TRUE(
      WriteSnapshotAt(registry, *log, path, encode, w, false, &written).ok());
  ASSERT_EQ(written.objects, 5u);
  const Lsn snapshot_lsn = log->durable_lsn();
  ASSERT_GT(snapshot_lsn, 0u);
  const auto file_bytes = static_cast<double>(std::filesystem::file_size(path));
  // A write into a missing directory fails before any unit is read.
  EXPECT_FALSE(
      WriteSnapshot(registry, scratch.File("no/such/snap"), encode, w).ok());

  // Two more objects reach the log after the snapshot.
  for (const char* key : {"f", "h"}) {
    ASSERT_TRUE(dir.Create(key, CreateOptions{}, Note{key}).ok());
  }

  // A standby restores through the metrics: 2 ms per decoded object.
  StandbyOptions<Note> s;
  s.snapshot_path = path;
  s.log_dir = log_dir;
  s.snapshot_metrics = &metrics;
  s.decode = [&clock](std::string_view bytes) -> Result<Note> {
    clock.Advance(milliseconds(2));
    return Note{std::string(bytes)};
  };
  auto standby = Standby<Note>::Open(s);
  ASSERT_TRUE(standby.ok()) << standby.status().ToString();
  Result<std::size_t> polled = (*standby)->Poll();
  ASSERT_TRUE(polled.ok());
  EXPECT_EQ(*polled, log->durable_lsn() - snapshot_lsn);

  // A restore of something that is not a snapshot fails, timed at 0.
  SnapshotStats bad_stats;
  auto bad = metrics.TimeRestore(bad_stats, [&] {
    return RestoreRegistrySnapshot<Note>(log_dir + "/LOCK", s.decode, {},
                                         &bad_stats);
  });
  EXPECT_FALSE(bad.ok());

  const ParsedExposition p = RenderAndParse([&](MetricVisitor& v) {
    metrics.VisitMetrics(v);
    const MetricLabel label[] = {{"replica", "r1"}};
    (*standby)->VisitMetrics(v, label);
    log->VisitMetrics(v);
  });
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.types.at("cairn_snapshot_write_seconds"), "histogram");
  EXPECT_EQ(p.Value("cairn_snapshot_writes_total", {}), 2);
  EXPECT_EQ(p.Value("cairn_snapshot_write_failures_total", {}), 1);
  EXPECT_EQ(p.Value("cairn_snapshot_write_seconds_count", {}), 2);
  EXPECT_DOUBLE_EQ(p.Value("cairn_snapshot_write_seconds_sum", {}), 0.005);
  // Below 4^11 ns (4.19 ms): only the failed write's 0; below 4^12 ns: both.
  EXPECT_EQ(BucketValue(p, "cairn_snapshot_write_seconds", {}, 4194304e-9), 1);
  EXPECT_EQ(BucketValue(p, "cairn_snapshot_write_seconds", {}, 16777216e-9), 2);
  EXPECT_EQ(p.Value("cairn_snapshot_written_objects_total", {}), 5);
  EXPECT_EQ(p.Value("cairn_snapshot_written_groups_total", {}), 1);
  EXPECT_EQ(p.Value("cairn_snapshot_written_bytes_total", {}), file_bytes);
  EXPECT_EQ(p.Value("cairn_snapshot_last_write_objects", {}), 5);
  EXPECT_EQ(p.Value("cairn_snapshot_last_write_bytes", {}), file_bytes);
  EXPECT_EQ(p.Value("cairn_snapshot_last_write_log_position", {}),
            static_cast<double>(snapshot_lsn));
  EXPECT_EQ(p.Value("cairn_snapshot_restores_total", {}), 2);
  EXPECT_EQ(p.Value("cairn_snapshot_restore_failures_total", {}), 1);
  EXPECT_EQ(p.Value("cairn_snapshot_restore_seconds_count", {}), 2);
  EXPECT_DOUBLE_EQ(p.Value("cairn_snapshot_restore_seconds_sum", {}), 0.010);
  EXPECT_EQ(BucketValue(p, "cairn_snapshot_restore_seconds", {}, 4194304e-9),
            1);
  EXPECT_EQ(BucketValue(p, "cairn_snapshot_restore_seconds", {}, 16777216e-9),
            2);
  EXPECT_EQ(p.Value("cairn_snapshot_restored_objects_total", {}), 5);
  EXPECT_EQ(p.Value("cairn_snapshot_restored_groups_total", {}), 1);
  EXPECT_EQ(p.Value("cairn_snapshot_restored_bytes_total", {}), file_bytes);
  EXPECT_EQ(p.Value("cairn_snapshot_restore_skipped_units_total", {}), 0);
  EXPECT_EQ(p.Value("cairn_snapshot_last_restore_log_position", {}),
            static_cast<double>(snapshot_lsn));

  const Labels r = {{"replica", "r1"}};
  const double durable = static_cast<double>(log->durable_lsn());
  EXPECT_EQ(p.Value("cairn_standby_applied_lsn", r), durable);
  EXPECT_EQ(p.Value("cairn_standby_snapshot_lsn", r),
            static_cast<double>(snapshot_lsn));
  EXPECT_EQ(p.Value("cairn_standby_applied_records_total", r),
            durable - static_cast<double>(snapshot_lsn));
  EXPECT_EQ(p.Value("cairn_standby_already_applied_records_total", r), 0);
  EXPECT_EQ(p.Value("cairn_standby_removed_tenant_records_total", r), 0);
  // The reader read the segment header and every frame (those up to the
  // snapshot too, skipped to reach its position): all the log wrote.
  EXPECT_EQ(p.Value("cairn_standby_read_bytes_total", r),
            kDurableLogHeaderBytes +
                p.Value("cairn_durable_log_written_bytes_total", {}));
  EXPECT_EQ(p.Value("cairn_standby_polls_total", r), 1);
  EXPECT_EQ(p.Value("cairn_standby_poll_errors_total", r), 0);
  EXPECT_EQ(p.Value("cairn_standby_promoted", r), 0);
}

}  // namespace
}  // namespace cairn
