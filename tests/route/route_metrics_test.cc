// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// VisitRouteMetrics: every RouteDiagnostics field reaches its metric (each
// field given a distinct value), and a route's publications are counted.

#include "cairn/route/route_metrics.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "cairn/route/object_route_index.h"
#include "testing/metrics_expect.h"

namespace cairn {
namespace {

using testing_internal::Labels;
using testing_internal::ParsedExposition;
using testing_internal::RenderAndParse;

TEST(RouteMetricsTest, EveryDiagnosticsFieldIsReported) {
  RouteDiagnostics d;
  d.bucket_count = 2;
  d.resize_target_bucket_count = 3;
  d.table_bytes = 5;
  d.entries = 7;
  d.nonempty_buckets = 11;
  d.max_bucket_entries = 13;
  d.publications = 17;
  d.copied_bytes = 19;
  d.resizes = 23;
  d.resize_copied_bytes = 29;
  d.snapshot_bytes = 31;
  d.retired_bytes = 37;
  d.retired_count = 41;
  d.retired_bytes_total = 43;
  d.busy_count = 47;
  d.stall_reports = 53;
  d.oldest_reader_age = std::chrono::milliseconds(1500);
  const MetricLabel labels[] = {{"tenant", "a\"b"}, {"route", "main"}};
  const ParsedExposition p = RenderAndParse(
      [&](MetricVisitor& v) { VisitRouteMetrics(d, v, labels); });
  ASSERT_EQ(p.error, "");
  const Labels l = {{"tenant", "a\"b"}, {"route", "main"}};
  EXPECT_EQ(p.Value("cairn_route_buckets", l), 2);
  EXPECT_EQ(p.Value("cairn_route_resize_target_buckets", l), 3);
  EXPECT_EQ(p.Value("cairn_route_table_bytes", l), 5);
  EXPECT_EQ(p.Value("cairn_route_entries", l), 7);
  EXPECT_EQ(p.Value("cairn_route_nonempty_buckets", l), 11);
  EXPECT_EQ(p.Value("cairn_route_max_bucket_entries", l), 13);
  EXPECT_EQ(p.Value("cairn_route_publications_total", l), 17);
  EXPECT_EQ(p.Value("cairn_route_copied_bytes_total", l), 19);
  EXPECT_EQ(p.Value("cairn_route_resizes_total", l), 23);
  EXPECT_EQ(p.Value("cairn_route_resize_copied_bytes_total", l), 29);
  EXPECT_EQ(p.Value("cairn_route_snapshot_bytes", l), 31);
  EXPECT_EQ(p.Value("cairn_route_domain_retired_bytes", l), 37);
  EXPECT_EQ(p.Value("cairn_route_domain_retired_objects", l), 41);
  EXPECT_EQ(p.Value("cairn_route_retired_bytes_total", l), 43);
  EXPECT_EQ(p.Value("cairn_route_busy_total", l), 47);
  EXPECT_EQ(p.Value("cairn_route_domain_stall_reports_total", l), 53);
  EXPECT_DOUBLE_EQ(p.Value("cairn_route_oldest_reader_age_seconds", l), 1.5);
  EXPECT_EQ(p.samples.size(), 17u);
  EXPECT_EQ(p.types.at("cairn_route_publications_total"), "counter");
  EXPECT_EQ(p.types.at("cairn_route_entries"), "gauge");
}

struct Entry {
  Entry(std::uint64_t id_in, std::string key_in)
      : id_value(id_in), key(std::move(key_in)) {}
  std::uint64_t id() const { return id_value; }
  std::uint64_t id_value;
  std::string key;
  std::atomic<bool> dead{false};
};

TEST(RouteMetricsTest, PublicationsOfARouteAreCounted) {
  ObjectRouteIndex<Entry> route;
  for (std::uint64_t i = 0; i < 5; ++i) {
    const std::string key = "k" + std::to_string(i);
    ASSERT_TRUE(route.Publish(key, std::make_shared<Entry>(i + 1, key)).ok());
  }
  const ParsedExposition p = RenderAndParse(
      [&](MetricVisitor& v) { VisitRouteMetrics(route.Diagnostics(), v); });
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.Value("cairn_route_entries", {}), 5);
  EXPECT_EQ(p.Value("cairn_route_publications_total", {}), 5);
  EXPECT_EQ(p.Value("cairn_route_busy_total", {}), 0);
  EXPECT_GT(p.Value("cairn_route_copied_bytes_total", {}), 0);
  EXPECT_EQ(p.Value("cairn_route_buckets", {}),
            static_cast<double>(route.bucket_count()));
}

}  // namespace
}  // namespace cairn
