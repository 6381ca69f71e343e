// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// FileDurableLog::VisitMetrics against a workload whose counts are known,
// read back from the Prometheus text; the sync histogram against latencies
// a ClockEnv makes each fdatasync take on a ManualClock.

#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/base/metrics.h"
#include "cairn/ha/file_durable_log.h"
#include "testing/clock_env.h"
#include "testing/counting_env.h"
#include "testing/metrics_expect.h"
#include "testing/scratch_dir.h"

namespace cairn {
namespace {

using std::chrono::milliseconds;
using testing::ClockEnv;
using testing::CountingEnv;
using testing::EnvCall;
using testing::ScratchDir;
using testing_internal::BucketValue;
using testing_internal::Labels;
using testing_internal::ParsedExposition;
using testing_internal::RenderAndParse;

// Reserve, Append and Finalize one record; true if it became durable.
bool Write(FileDurableLog& log, const std::string& body) {
  Result<LogReservation> r = log.Reserve(body.size());
  if (!r.ok() || !log.Append(*r, body).ok()) return false;
  const Lsn before = log.durable_lsn();
  const bool durable = log.Finalize(*r, {}).ok();
  return durable && log.durable_lsn() > before;
}

TEST(DurableLogMetricsTest, CountsAndSyncTimesMatchAKnownWorkload) {
  ScratchDir dir;
  ManualClock clock;
  CountingEnv faults;
  ClockEnv env(&clock, &faults);
  FileDurableLogOptions options;
  options.env = &env;
  options.clock = &clock;
  options.max_record_bytes = 100;
  options.max_pending_bytes = 300;
  auto opened = FileDurableLog::Open(dir.path() + "/log", options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  FileDurableLog& log = **opened;
  const MetricLabel label[] = {{"log", "main"}};
  auto render = [&] {
    return RenderAndParse(
        [&](MetricVisitor& v) { log.VisitMetrics(v, label); });
  };
  const Labels l = {{"log", "main"}};

  // Three records, one batch each; their syncs take 1, 3 and 20 ms.
  env.QueueSyncs({milliseconds(1), milliseconds(3), milliseconds(20)});
  ASSERT_TRUE(Write(log, std::string(10, 'a')));
  ASSERT_TRUE(Write(log, std::string(20, 'b')));
  ASSERT_TRUE(Write(log, std::string(30, 'c')));
  ASSERT_EQ(env.queued(), 0u);
  ParsedExposition p = render();
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.types.at("cairn_durable_log_sync_seconds"), "histogram");
  EXPECT_EQ(p.Value("cairn_durable_log_appended_records_total", l), 3);
  EXPECT_EQ(p.Value("cairn_durable_log_appended_bytes_total", l), 60);
  EXPECT_EQ(p.Value("cairn_durable_log_written_records_total", l), 3);
  EXPECT_EQ(p.Value("cairn_durable_log_written_bytes_total", l), 60 + 3 * 20);
  EXPECT_EQ(p.Value("cairn_durable_log_batches_total", l), 3);
  EXPECT_EQ(p.Value("cairn_durable_log_syncs_total", l), 3);
  EXPECT_EQ(p.Value("cairn_durable_log_durable_lsn", l), 3);
  EXPECT_EQ(p.Value("cairn_durable_log_first_lsn", l), 1);
  const std::string h = "cairn_durable_log_sync_seconds";
  EXPECT_EQ(p.Value(h + "_count", l), 3);
  EXPECT_DOUBLE_EQ(p.Value(h + "_sum", l), 0.024);
  // Below 4^10 ns (1.05 ms): the 1 ms sync; below 4^11 ns (4.19 ms): and
  // the 3 ms one; 20 ms is above 4^12 ns (16.8 ms), below 4^13 ns.
  EXPECT_EQ(BucketValue(p, h, l, 1048576e-9), 1);
  EXPECT_EQ(BucketValue(p, h, l, 4194304e-9), 2);
  EXPECT_EQ(BucketValue(p, h, l, 16777216e-9), 2);
  EXPECT_EQ(BucketValue(p, h, l, 67108864e-9), 3);

  // An appended record cancelled, a reservation dropped unappended, then
  // one record: its batch skips the cancelled one.
  Result<LogReservation> cancelled = log.Reserve(40);
  ASSERT_TRUE(cancelled.ok());
  ASSERT_TRUE(log.Append(*cancelled, std::string(40, 'x')).ok());
  log.Cancel(*cancelled);
  Result<LogReservation> dropped = log.Reserve(50);
  ASSERT_TRUE(dropped.ok());
  log.Cancel(*dropped);
  ASSERT_TRUE(Write(log, std::string(5, 'd')));
  // Two reservations of 100 (120 bytes each with the frame) fill 240 of
  // 300 pending bytes; a third is refused.
  Result<LogReservation> r1 = log.Reserve(100);
  Result<LogReservation> r2 = log.Reserve(100);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(log.Reserve(100).status().code(), StatusCode::kResourceExhausted);
  p = render();
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.Value("cairn_durable_log_cancelled_records_total", l), 1);
  EXPECT_EQ(p.Value("cairn_durable_log_appended_records_total", l), 5);
  EXPECT_EQ(p.Value("cairn_durable_log_appended_bytes_total", l), 105);
  EXPECT_EQ(p.Value("cairn_durable_log_written_records_total", l), 4);
  EXPECT_EQ(p.Value("cairn_durable_log_written_bytes_total", l), 145);
  EXPECT_EQ(p.Value("cairn_durable_log_pending_bytes", l), 240);
  EXPECT_EQ(p.Value("cairn_durable_log_pending_records", l), 2);
  EXPECT_EQ(p.Value("cairn_durable_log_refused_total",
                    {{"log", "main"}, {"reason", "pending_bytes"}}),
            1);
  log.Cancel(*r1);
  log.Cancel(*r2);

  // Rotate, write LSN 5 into a second segment, drop the first (LSNs 1-4).
  ASSERT_TRUE(log.Rotate().ok());
  ASSERT_TRUE(Write(log, std::string(8, 'e')));
  EXPECT_EQ(log.segments(), 2u);
  Result<std::size_t> removed = log.DropThrough(4);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 1u);

  // The next batch's sync fails: sticky, and the next Reserve is refused.
  faults.FailNth(EnvCall::kSync, 1);
  EXPECT_FALSE(Write(log, std::string(7, 'f')));
  EXPECT_FALSE(log.status().ok());
  EXPECT_FALSE(log.Reserve(10).ok());

  p = render();
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.Value("cairn_durable_log_appended_records_total", l), 7);
  EXPECT_EQ(p.Value("cairn_durable_log_appended_bytes_total", l), 120);
  EXPECT_EQ(p.Value("cairn_durable_log_cancelled_records_total", l), 1);
  EXPECT_EQ(p.Value("cairn_durable_log_written_records_total", l), 5);
  EXPECT_EQ(p.Value("cairn_durable_log_written_bytes_total", l), 173);
  EXPECT_EQ(p.Value("cairn_durable_log_batches_total", l), 5);
  EXPECT_EQ(p.Value("cairn_durable_log_syncs_total", l), 5);
  EXPECT_EQ(p.Value(h + "_count", l), 6);  // the failed sync is timed too
  EXPECT_DOUBLE_EQ(p.Value(h + "_sum", l), 0.024);
  EXPECT_EQ(p.Value("cairn_durable_log_durable_lsn", l), 5);
  EXPECT_EQ(p.Value("cairn_durable_log_first_lsn", l), 5);
  EXPECT_EQ(p.Value("cairn_durable_log_segments", l), 1);
  EXPECT_EQ(p.Value("cairn_durable_log_rotations_total", l), 1);
  EXPECT_EQ(p.Value("cairn_durable_log_dropped_segments_total", l), 1);
  EXPECT_EQ(p.Value("cairn_durable_log_pending_bytes", l), 0);
  EXPECT_EQ(p.Value("cairn_durable_log_pending_records", l), 0);
  EXPECT_EQ(p.Value("cairn_durable_log_refused_total",
                    {{"log", "main"}, {"reason", "pending_bytes"}}),
            1);
  EXPECT_EQ(p.Value("cairn_durable_log_refused_total",
                    {{"log", "main"}, {"reason", "failed"}}),
            1);
  EXPECT_EQ(p.Value("cairn_durable_log_write_errors_total", l), 0);
  EXPECT_EQ(p.Value("cairn_durable_log_sync_errors_total", l), 1);
  EXPECT_EQ(p.Value("cairn_durable_log_failed", l), 1);
}

TEST(DurableLogMetricsTest, FailedWriteIsCountedAndNullClockRefused) {
  ScratchDir dir;
  CountingEnv faults;
  FileDurableLogOptions options;
  options.env = &faults;
  options.clock = nullptr;
  EXPECT_EQ(FileDurableLog::Open(dir.path() + "/log", options).status().code(),
            StatusCode::kInvalidArgument);
  options.clock = Clock::Steady();
  auto opened = FileDurableLog::Open(dir.path() + "/log", options);
  ASSERT_TRUE(opened.ok());
  FileDurableLog& log = **opened;
  faults.FailNth(EnvCall::kWriteAt, 1);
  EXPECT_FALSE(Write(log, "record"));
  const ParsedExposition p =
      RenderAndParse([&](MetricVisitor& v) { log.VisitMetrics(v); });
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.Value("cairn_durable_log_write_errors_total", {}), 1);
  EXPECT_EQ(p.Value("cairn_durable_log_sync_errors_total", {}), 0);
  EXPECT_EQ(p.Value("cairn_durable_log_sync_seconds_count", {}), 0);
  EXPECT_EQ(p.Value("cairn_durable_log_batches_total", {}), 0);
  EXPECT_EQ(p.Value("cairn_durable_log_failed", {}), 1);
  EXPECT_EQ(p.Value("cairn_durable_log_durable_lsn", {}), 0);
  EXPECT_EQ(p.Value("cairn_durable_log_appended_records_total", {}), 1);
}

}  // namespace
}  // namespace cairn
