// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/base/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "testing/metrics_text.h"

namespace cairn {
namespace {

using testing_internal::ParsedExposition;
using testing_internal::ParseExposition;

TEST(MetricsTest, CounterAndStripedCountersSumEveryThread) {
  Counter c;
  StripedCounters<3> striped;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        c.Add();
        striped.Add(0);
        striped.Add(2, 3);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.Value(), std::uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(striped.Value(0), std::uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(striped.Value(1), 0u);
  EXPECT_EQ(striped.Value(2), std::uint64_t{kThreads} * kPerThread * 3);
}

TEST(MetricsTest, ThreadsCreatedTogetherGetDifferentStripes) {
  std::vector<std::uint32_t> stripes(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back(
        [&, t] { stripes[t] = metrics_internal::ThreadStripe(); });
  }
  for (auto& t : threads) t.join();
  std::sort(stripes.begin(), stripes.end());
  EXPECT_EQ(std::unique(stripes.begin(), stripes.end()), stripes.end());
}

TEST(MetricsTest, HistogramBucketsAreLogLinear) {
  using H = HistogramSnapshot;
  for (std::uint64_t v = 0; v < 4096; ++v) {
    const int b = H::BucketOf(v);
    EXPECT_LE(H::BucketLower(b), v);
    EXPECT_GT(H::BucketLower(b + 1), v);
  }
  EXPECT_EQ(H::BucketOf(UINT64_MAX), H::kBuckets - 1);
  EXPECT_EQ(H::BucketLower(H::kBuckets), UINT64_MAX);
  // Four buckets per power of two: 1024..2047 splits at 1280, 1536, 1792.
  EXPECT_EQ(H::BucketLower(H::BucketOf(1300)), 1280u);
  EXPECT_EQ(H::BucketLower(H::BucketOf(2047)), 1792u);
  // Every power of two is a boundary.
  for (int k = 2; k < 64; ++k) {
    const std::uint64_t p = std::uint64_t{1} << k;
    EXPECT_EQ(H::BucketLower(H::BucketOf(p)), p);
  }
}

TEST(MetricsTest, HistogramCountsSumAndQuantiles) {
  Histogram h(1e-9);
  // Known latencies: 90 of 1 us, 9 of 1 ms, 1 of 1 s.
  for (int i = 0; i < 90; ++i) h.Record(1'000);
  for (int i = 0; i < 9; ++i) h.Record(1'000'000);
  h.Record(1'000'000'000);
  const HistogramSnapshot s = h.Snapshot();
  EXPECT_EQ(s.count, 100u);
  EXPECT_EQ(s.sum, 90u * 1'000 + 9u * 1'000'000 + 1'000'000'000u);
  EXPECT_DOUBLE_EQ(s.scale, 1e-9);
  EXPECT_EQ(s.Quantile(0.5),
            HistogramSnapshot::BucketLower(HistogramSnapshot::BucketOf(1'000)));
  EXPECT_EQ(s.Quantile(0.95), HistogramSnapshot::BucketLower(
                                  HistogramSnapshot::BucketOf(1'000'000)));
  EXPECT_EQ(s.Quantile(1.0), HistogramSnapshot::BucketLower(
                                 HistogramSnapshot::BucketOf(1'000'000'000)));
  EXPECT_EQ(s.CountAtOrBelow(1023), 90u);
  EXPECT_EQ(s.CountAtOrBelow((1u << 20) - 1), 99u);
  EXPECT_EQ(s.CountAtOrBelow(UINT64_MAX), 100u);
  EXPECT_EQ(HistogramSnapshot{}.Quantile(0.99), 0u);
}

TEST(MetricsTest, LabelScopePrependsLabels) {
  PrometheusRenderer r;
  const MetricLabel tenant[] = {{"tenant", "a"}};
  LabelScope scope(r, tenant);
  const MetricLabel op[] = {{"op", "get"}};
  scope.CounterValue("cairn_test_ops_total", "Operations.", 7, op);
  const ParsedExposition p = ParseExposition(r.Finish());
  ASSERT_TRUE(p.error.empty()) << p.error;
  EXPECT_EQ(p.Value("cairn_test_ops_total", {{"tenant", "a"}, {"op", "get"}}),
            7);
}

TEST(MetricsTest, RendererGroupsFamiliesAndParsesBack) {
  PrometheusRenderer r;
  const MetricLabel a[] = {{"tenant", "a\"b\\c\nd"}};
  const MetricLabel b[] = {{"tenant", "b"}};
  r.CounterValue("cairn_test_ops_total", "Operations, by tenant.", 3, a);
  r.GaugeValue("cairn_test_bytes", "Bytes held.\nSecond line.", 1.5, a);
  // Same family again after another one: must join its family's group.
  r.CounterValue("cairn_test_ops_total", "Operations, by tenant.", 4, b);
  Histogram h(1e-9);
  h.Record(3);          // below 4 ns
  h.Record(4);          // not below 4 ns: `le` 4^k counts values below 4^k
  h.Record(1000);       // below 1024 ns
  h.Record(5'000'000);  // 5 ms
  r.HistogramValue("cairn_test_sync_seconds", "Sync time.", h.Snapshot());
  const std::string text = r.Finish();

  const ParsedExposition p = ParseExposition(text);
  ASSERT_TRUE(p.error.empty()) << p.error << "\n" << text;
  EXPECT_EQ(p.types.at("cairn_test_ops_total"), "counter");
  EXPECT_EQ(p.types.at("cairn_test_bytes"), "gauge");
  EXPECT_EQ(p.types.at("cairn_test_sync_seconds"), "histogram");
  EXPECT_EQ(p.helps.at("cairn_test_bytes"), "Bytes held.\\nSecond line.");
  EXPECT_EQ(p.Value("cairn_test_ops_total", {{"tenant", "a\"b\\c\nd"}}), 3);
  EXPECT_EQ(p.Value("cairn_test_ops_total", {{"tenant", "b"}}), 4);
  EXPECT_EQ(p.Value("cairn_test_bytes", {{"tenant", "a\"b\\c\nd"}}), 1.5);
  EXPECT_EQ(p.Value("cairn_test_sync_seconds_bucket", {{"le", "4e-09"}}), 1);
  EXPECT_EQ(p.Value("cairn_test_sync_seconds_bucket", {{"le", "1.6e-08"}}), 2);
  EXPECT_EQ(p.Value("cairn_test_sync_seconds_bucket", {{"le", "1.024e-06"}}),
            3);
  EXPECT_EQ(p.Value("cairn_test_sync_seconds_bucket", {{"le", "+Inf"}}), 4);
  EXPECT_EQ(p.Value("cairn_test_sync_seconds_count", {}), 4);
  EXPECT_NEAR(p.Value("cairn_test_sync_seconds_sum", {}), 5'001'007e-9, 1e-15);
  // Families are contiguous: both ops samples come before the gauge's TYPE.
  EXPECT_LT(text.rfind("cairn_test_ops_total{"),
            text.find("# TYPE cairn_test_bytes"));
  // Buckets are cumulative and stop after the largest recorded value.
  double last = 0;
  int buckets = 0;
  for (const auto& s : p.samples) {
    if (s.name != "cairn_test_sync_seconds_bucket") continue;
    EXPECT_GE(s.value, last);
    last = s.value;
    ++buckets;
  }
  EXPECT_EQ(buckets, 14);  // 4^0 .. 4^12 (16.8 ms) and +Inf
  EXPECT_TRUE(r.Finish().empty());
}

TEST(MetricsDeathTest, InvalidNameOrKindChangeIsAProgrammerError) {
  PrometheusRenderer r;
  EXPECT_DEATH(r.CounterValue("9bad", "", 1), "invalid metric name");
  r.CounterValue("cairn_x_total", "", 1);
  EXPECT_DEATH(r.GaugeValue("cairn_x_total", "", 1), "two kinds");
}

}  // namespace
}  // namespace cairn
