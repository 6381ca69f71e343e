// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// LogStore::VisitMetrics against a workload whose counts are known, with
// sync latencies chosen by the test (ClockEnv advances the store's clock
// inside each fdatasync).

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cairn/base/metrics.h"
#include "cairn/flush/log_store.h"
#include "flush/flush_testing.h"
#include "testing/clock_env.h"
#include "testing/metrics_text.h"

namespace cairn {
namespace {

using std::chrono::milliseconds;
using testing::ClockEnv;
using testing::ScratchDir;
using testing_internal::ParsedExposition;
using testing_internal::ParseExposition;

LogStoreOptions Options(Env* env, const Clock* clock) {
  LogStoreOptions o;
  o.partitions = 4;
  o.databases = 2;
  o.block_bytes = 64 * 1024;
  o.max_value_bytes = 8192;
  o.sync = true;  // ClockEnv advances the clock inside each file Sync
  o.env = env;
  o.clock = clock;
  o.checkpoint_on_close = false;
  return o;
}

ParsedExposition Scrape(const LogStore& store) {
  PrometheusRenderer r;
  const MetricLabel store_label[] = {{"store", "s1"}};
  store.VisitMetrics(r, store_label);
  ParsedExposition p = ParseExposition(r.Finish());
  EXPECT_TRUE(p.error.empty()) << p.error;
  return p;
}

double Counter(const ParsedExposition& p, const char* name,
               const char* result = nullptr) {
  if (result == nullptr) return p.Value(name, {{"store", "s1"}});
  return p.Value(name, {{"store", "s1"}, {"result", result}});
}

TEST(LogStoreMetricsTest, CountsOperationsByResult) {
  ScratchDir dir("logstore_metrics_ops");
  ManualClock clock;
  ClockEnv env(&clock);
  auto opened = LogStore::Open(dir.path() + "/s", Options(&env, &clock));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  LogStore& store = **opened;

  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store.Set(0, "k" + std::to_string(i), "v").ok());
  }
  EXPECT_FALSE(store.Set(0, "", "v").ok());   // empty key
  EXPECT_FALSE(store.Set(7, "k", "v").ok());  // db out of range
  EXPECT_TRUE(store.Del(0, "k0").ok());
  EXPECT_EQ(store.Del(0, "k0").code(), StatusCode::kNotFound);
  EXPECT_FALSE(store.Del(0, "").ok());
  std::string value;
  EXPECT_TRUE(store.Get(0, "k1", &value).ok());
  EXPECT_TRUE(store.Get(0, "k2", &value).ok());
  EXPECT_EQ(store.Get(0, "k0", &value).code(), StatusCode::kNotFound);
  EXPECT_EQ(store.Get(1, "k1", &value).code(), StatusCode::kNotFound);
  EXPECT_TRUE(store.FlushDb(1).ok());

  const ParsedExposition p = Scrape(store);
  EXPECT_EQ(p.types.at("cairn_logstore_sets_total"), "counter");
  EXPECT_EQ(Counter(p, "cairn_logstore_sets_total", "ok"), 5);
  EXPECT_EQ(Counter(p, "cairn_logstore_sets_total", "error"), 2);
  EXPECT_EQ(Counter(p, "cairn_logstore_deletes_total", "ok"), 1);
  EXPECT_EQ(Counter(p, "cairn_logstore_deletes_total", "not_found"), 1);
  EXPECT_EQ(Counter(p, "cairn_logstore_deletes_total", "error"), 1);
  EXPECT_EQ(Counter(p, "cairn_logstore_gets_total", "hit"), 2);
  EXPECT_EQ(Counter(p, "cairn_logstore_gets_total", "miss"), 2);
  EXPECT_EQ(Counter(p, "cairn_logstore_gets_total", "error"), 0);
  EXPECT_EQ(Counter(p, "cairn_logstore_flushdbs_total"), 1);
  EXPECT_EQ(Counter(p, "cairn_logstore_durable_waits_total"), 0);
  EXPECT_EQ(Counter(p, "cairn_logstore_flushes_total"), 0);
}

TEST(LogStoreMetricsTest, DurableWaitsFlushesAndSyncsWithKnownLatencies) {
  ScratchDir dir("logstore_metrics_sync");
  ManualClock clock;
  ClockEnv env(&clock);
  auto opened = LogStore::Open(dir.path() + "/s", Options(&env, &clock));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  LogStore& store = **opened;
  const ParsedExposition before = Scrape(store);

  // Three durable SETs one after another: each is one flush of a partly
  // filled block, so one sync each, taking 3, 5 and 40 ms.
  env.QueueSyncs({milliseconds(3), milliseconds(5), milliseconds(40)});
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store.SetDurable(0, "d" + std::to_string(i), "value").ok());
  }
  EXPECT_EQ(env.queued(), 0u);

  const ParsedExposition p = Scrape(store);
  EXPECT_EQ(Counter(p, "cairn_logstore_sets_total", "ok"), 3);
  EXPECT_EQ(Counter(p, "cairn_logstore_durable_waits_total"), 3);
  EXPECT_EQ(Counter(p, "cairn_logstore_durable_wait_failures_total"), 0);
  EXPECT_EQ(Counter(p, "cairn_logstore_flushes_total"), 3);
  EXPECT_EQ(Counter(p, "cairn_logstore_syncs_total") -
                Counter(before, "cairn_logstore_syncs_total"),
            3);
  EXPECT_GT(Counter(p, "cairn_logstore_written_bytes_total"), 3 * 5);
  EXPECT_EQ(p.types.at("cairn_logstore_flush_io_seconds"), "histogram");
  const std::vector<std::pair<std::string, std::string>> io_labels = {
      {"store", "s1"}};
  EXPECT_EQ(p.Value("cairn_logstore_flush_io_seconds_count", io_labels), 3);
  EXPECT_NEAR(p.Value("cairn_logstore_flush_io_seconds_sum", io_labels), 0.048,
              1e-9);
  // Buckets: 3 and 5 ms are below 4^12 ns (16.8 ms), 40 ms is not.
  EXPECT_EQ(p.Value("cairn_logstore_flush_io_seconds_bucket",
                    {{"store", "s1"}, {"le", "0.0167772"}}),
            2);
  EXPECT_EQ(p.Value("cairn_logstore_durable_wait_seconds_count", io_labels), 3);
  EXPECT_NEAR(p.Value("cairn_logstore_durable_wait_seconds_sum", io_labels),
              0.048, 1e-9);

  // A checkpoint: counted, timed, and its flush counted too.
  env.QueueSyncs({milliseconds(7)});
  ASSERT_TRUE(store.Checkpoint().ok());
  const ParsedExposition c = Scrape(store);
  EXPECT_EQ(Counter(c, "cairn_logstore_checkpoints_total"), 1);
  EXPECT_EQ(Counter(c, "cairn_logstore_checkpoint_failures_total"), 0);
  EXPECT_EQ(c.Value("cairn_logstore_checkpoint_seconds_count", io_labels), 1);
  EXPECT_NEAR(c.Value("cairn_logstore_checkpoint_seconds_sum", io_labels),
              0.007, 1e-9);
  EXPECT_EQ(Counter(c, "cairn_logstore_flushes_total"), 4);
}

TEST(LogStoreMetricsTest, ConcurrentOperationsSumExactly) {
  ScratchDir dir("logstore_metrics_threads");
  LogStoreOptions o = Options(nullptr, nullptr);
  o.sync = false;
  auto opened = LogStore::Open(dir.path() + "/s", o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  LogStore& store = **opened;
  constexpr int kThreads = 8;
  constexpr int kOps = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&store, t] {
      std::string value;
      for (int i = 0; i < kOps; ++i) {
        const std::string key = std::to_string(t) + "/" + std::to_string(i);
        EXPECT_TRUE(store.Set(0, key, "v").ok());
        EXPECT_TRUE(store.Get(0, key, &value).ok());
        EXPECT_EQ(store.Get(1, key, &value).code(), StatusCode::kNotFound);
      }
    });
  }
  for (auto& t : threads) t.join();
  const ParsedExposition p = Scrape(store);
  EXPECT_EQ(Counter(p, "cairn_logstore_sets_total", "ok"), kThreads * kOps);
  EXPECT_EQ(Counter(p, "cairn_logstore_gets_total", "hit"), kThreads * kOps);
  EXPECT_EQ(Counter(p, "cairn_logstore_gets_total", "miss"), kThreads * kOps);
}

}  // namespace
}  // namespace cairn
