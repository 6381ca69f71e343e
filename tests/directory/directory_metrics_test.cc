// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// GroupDirectory::VisitMetrics: a workload whose every count is known,
// rendered as Prometheus text, parsed back (testing/metrics_text.h) and
// checked value by value; the lookups' counters under 8 threads (exact
// totals); and the read path still allocation-free with the counters in
// place.

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/base/metrics.h"
#include "cairn/directory/directory_hooks.h"
#include "cairn/directory/group_directory.h"
#include "cairn/directory/quota.h"
#include "directory/directory_testing.h"
#include "testing/alloc_counter.h"
#include "testing/metrics_text.h"

namespace cairn {
namespace {

using Directory = testing::TestDirectory<testing::EpochRouteTag>;
using testing::Key;
using testing::Sized;
using testing_internal::ParsedExposition;
using testing_internal::ParseExposition;
using Labels = std::vector<std::pair<std::string, std::string>>;

ParsedExposition Scrape(const Directory& dir) {
  PrometheusRenderer renderer;
  dir.VisitMetrics(renderer);
  const std::string text = renderer.Finish();
  ParsedExposition parsed = ParseExposition(text);
  EXPECT_EQ(parsed.error, "") << text;
  return parsed;
}

double Op(const ParsedExposition& p, std::string_view op,
          std::string_view result) {
  const double v =
      p.Value("cairn_directory_operations_total",
              {{"op", std::string(op)}, {"result", std::string(result)}});
  // A result that never happened is not reported (ok always is).
  return std::isnan(v) && result != "ok" ? 0 : v;
}

double Lookups(const ParsedExposition& p, std::string_view op,
               std::string_view result) {
  return p.Value("cairn_directory_lookups_total",
                 {{"op", std::string(op)}, {"result", std::string(result)}});
}

// The census version of the object `handle`, read without a lookup (a
// census does not count as one).
std::uint64_t CensusVersion(const Directory& dir,
                            const Directory::Handle& handle) {
  std::uint64_t version = 0;
  EXPECT_TRUE(DirectoryHooks::Census(dir, [&](const Directory::Handle& h,
                                              const ObjectMetadata& m) {
                if (h.get() == handle.get()) version = m.version;
              }).ok());
  return version;
}

TEST(DirectoryMetricsTest, EmptyDirectoryReportsZeros) {
  Directory dir;
  const ParsedExposition p = Scrape(dir);
  EXPECT_EQ(p.types.at("cairn_directory_operations_total"), "counter");
  EXPECT_EQ(p.types.at("cairn_directory_objects"), "gauge");
  EXPECT_EQ(p.Value("cairn_directory_objects", {}), 0);
  for (std::string_view op : {"create", "create_pending", "commit", "abort",
                              "begin_upsert", "commit_upsert", "abort_upsert",
                              "erase", "erase_group", "adjust_charge"}) {
    EXPECT_EQ(Op(p, op, "ok"), 0) << op;
  }
  for (std::string_view op : {"get", "pin", "batch"}) {
    EXPECT_EQ(Lookups(p, op, "hit"), 0) << op;
    EXPECT_EQ(Lookups(p, op, "miss"), 0) << op;
  }
  // Only the ok results: 10 op samples, no zero series for the others.
  std::size_t op_samples = 0;
  for (const auto& s : p.samples) {
    if (s.name == "cairn_directory_operations_total") ++op_samples;
  }
  EXPECT_EQ(op_samples, 10u);
}

// Every write outcome, lookup, eviction and reap of a scripted workload
// with a 1000-byte quota; the comments carry the running charge.
TEST(DirectoryMetricsTest, KnownWorkloadCountsExactly) {
  ManualClock clock;
  QuotaAccount quota(1000);
  DirectoryOptions options;
  options.clock = &clock;
  options.quota = &quota;
  options.pending_put_timeout = std::chrono::seconds(1);
  Directory dir(options);

  // Creates: 10 + 10 fit (1000 bytes), 10 refused by quota, 1 exists, and
  // a group of 3 empty members.
  std::vector<Directory::Handle> k;
  for (int i = 0; i < 10; ++i) {
    auto made = dir.Create(Key("k", i), Sized(50));
    ASSERT_TRUE(made.ok());
    k.push_back(std::move(made).value());
  }
  std::vector<Directory::Handle> q;
  int refused = 0;
  for (int i = 0; i < 20; ++i) {
    auto made = dir.Create(Key("q", i), Sized(50));
    if (made.ok()) {
      q.push_back(std::move(made).value());
    } else {
      EXPECT_EQ(made.status().code(), StatusCode::kResourceExhausted);
      ++refused;
    }
  }
  ASSERT_EQ(refused, 10);
  EXPECT_EQ(dir.Create("k0", Sized(0)).status().code(),
            StatusCode::kAlreadyExists);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(dir.Create(Key("g", i), testing::InGroup("grp")).ok());
  }
  // Erases: one of each outcome.
  ASSERT_TRUE(dir.Erase("k9").ok());  // 950
  EXPECT_EQ(dir.Erase("nope").code(), StatusCode::kNotFound);
  ASSERT_TRUE(dir.EraseGroup("grp").ok());
  EXPECT_EQ(dir.EraseGroup("nogrp").code(), StatusCode::kNotFound);

  // Two-phase puts.
  auto p0 = dir.CreatePending("p0", Sized(30));  // 980
  ASSERT_TRUE(p0.ok());
  EXPECT_EQ(dir.CreatePending("p1", Sized(100)).status().code(),
            StatusCode::kResourceExhausted);
  ASSERT_TRUE(dir.Commit("p0", p0.value().token()).ok());
  EXPECT_EQ(dir.Commit("p0", p0.value().token()).code(),
            StatusCode::kFailedPrecondition);
  auto p2 = dir.CreatePending("p2", Sized(20));  // 1000
  ASSERT_TRUE(p2.ok());
  ASSERT_TRUE(dir.Abort("p2", p2.value().token()).ok());  // 980
  auto p3 = dir.CreatePending("p3", Sized(10));           // 990
  ASSERT_TRUE(p3.ok());
  EXPECT_EQ(dir.pending_charge_bytes(), 10u);

  // Upserts.
  const ObjectToken k0 = k[0].token();
  const ObjectToken k1 = k[1].token();
  ASSERT_TRUE(dir.BeginUpsert("k0", k0, {5, 5}).ok());  // 995
  EXPECT_EQ(dir.pending_charge_bytes(), 15u);
  EXPECT_EQ(dir.BeginUpsert("k1", k1, {100, 100}).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(dir.BeginUpsert("k0", k0, {5, 5}).code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(dir.CommitUpsert("k0", k0).ok());         // 945
  ASSERT_TRUE(dir.BeginUpsert("k1", k1, {7, 7}).ok());  // 952
  EXPECT_EQ(dir.pending_charge_bytes(), 17u);
  ASSERT_TRUE(dir.AbortUpsert("k1", k1).ok());  // 945
  EXPECT_EQ(dir.AbortUpsert("k1", k1).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(quota.charged(), 945u);
  EXPECT_EQ(dir.pending_charge_bytes(), 10u);

  // Lookups: get 11 hits, 4 misses; pin 1 and 2; two batches, 12 and 2.
  for (int i = 0; i < 10; ++i) {
    (void)dir.WithObject(Key("k", i), [](auto&) {});  // k9 misses
  }
  EXPECT_EQ(dir.WithObject("zz", [](auto&) {}).code(), StatusCode::kNotFound);
  EXPECT_TRUE(dir.WithToken("k0", k0, [](auto&) {}).ok());
  EXPECT_EQ(dir.WithToken("k0", k1, [](auto&) {}).code(),
            StatusCode::kNotFound);
  EXPECT_TRUE(dir.WithHandle(k[0], [](auto&) {}).ok());
  EXPECT_EQ(dir.WithHandle(k[9], [](auto&) {}).code(), StatusCode::kNotFound);
  // A malformed key is not a lookup.
  EXPECT_EQ(dir.WithObject("", [](auto&) {}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(dir.Pin("k1").ok());
  EXPECT_FALSE(dir.Pin("zz").ok());
  EXPECT_FALSE(dir.Pin("p3").ok());  // pending: not active
  const std::array<std::string_view, 4> mixed = {"k0", "k1", "zz", "k9"};
  EXPECT_TRUE(
      dir.WithObjects(mixed, [](std::size_t, StatusCode, auto*) {}).ok());
  std::vector<std::string> qkeys;
  for (int i = 0; i < 10; ++i) qkeys.push_back(Key("q", i));
  const std::vector<std::string_view> qviews(qkeys.begin(), qkeys.end());
  EXPECT_TRUE(
      dir.WithObjectsExclusive(qviews, [](std::size_t, StatusCode, auto*) {})
          .ok());

  // Evictions: singleton q0 (50 bytes), then group "eg" of two 10-byte
  // members, whole.
  auto e0 = dir.Create("e0", Sized(10, "eg"));  // 955
  auto e1 = dir.Create("e1", Sized(10, "eg"));  // 965
  ASSERT_TRUE(e0.ok() && e1.ok());
  std::vector<EvictedObject<testing::TestPayload>> out;
  ASSERT_EQ(DirectoryHooks::EvictIfUnchanged(
                dir, q[0], CensusVersion(dir, q[0]), false, &out),
            StatusCode::kOk);  // 915
  ASSERT_EQ(DirectoryHooks::EvictIfUnchanged(
                dir, e0.value(), CensusVersion(dir, e0.value()), false, &out),
            StatusCode::kOk);  // 895
  ASSERT_EQ(out.size(), 3u);

  // Reap: p3 is older than the 1 s timeout.
  clock.Advance(std::chrono::seconds(2));
  EXPECT_EQ(dir.ReapPendingPuts(), 1u);  // 885
  EXPECT_EQ(quota.charged(), 885u);

  const ParsedExposition p = Scrape(dir);
  EXPECT_EQ(Op(p, "create", "ok"), 25);
  EXPECT_EQ(Op(p, "create", "exists"), 1);
  EXPECT_EQ(Op(p, "create", "quota"), 10);
  EXPECT_EQ(Op(p, "create_pending", "ok"), 3);
  EXPECT_EQ(Op(p, "create_pending", "quota"), 1);
  EXPECT_EQ(Op(p, "commit", "ok"), 1);
  EXPECT_EQ(Op(p, "commit", "precondition"), 1);
  EXPECT_EQ(Op(p, "abort", "ok"), 1);  // the reaper's abort is not an op
  EXPECT_EQ(Op(p, "begin_upsert", "ok"), 2);
  EXPECT_EQ(Op(p, "begin_upsert", "quota"), 1);
  EXPECT_EQ(Op(p, "begin_upsert", "precondition"), 1);
  EXPECT_EQ(Op(p, "commit_upsert", "ok"), 1);
  EXPECT_EQ(Op(p, "abort_upsert", "ok"), 1);
  EXPECT_EQ(Op(p, "abort_upsert", "precondition"), 1);
  EXPECT_EQ(Op(p, "erase", "ok"), 1);
  EXPECT_EQ(Op(p, "erase", "not_found"), 1);
  EXPECT_EQ(Op(p, "erase_group", "ok"), 1);
  EXPECT_EQ(Op(p, "erase_group", "not_found"), 1);
  // Every op sample is one of those above: nothing else was counted.
  double ops = 0;
  for (const auto& s : p.samples) {
    if (s.name == "cairn_directory_operations_total") ops += s.value;
  }
  EXPECT_EQ(ops, 25 + 1 + 10 + 3 + 1 + 1 + 1 + 1 + 2 + 1 + 1 + 1 + 1 + 1 + 1 +
                     1 + 1 + 1);
  EXPECT_EQ(dir.quota_refusals(), 12u);

  EXPECT_EQ(Lookups(p, "get", "hit"), 11);
  EXPECT_EQ(Lookups(p, "get", "miss"), 4);
  EXPECT_EQ(Lookups(p, "pin", "hit"), 1);
  EXPECT_EQ(Lookups(p, "pin", "miss"), 2);
  EXPECT_EQ(Lookups(p, "batch", "hit"), 12);
  EXPECT_EQ(Lookups(p, "batch", "miss"), 2);
  EXPECT_EQ(p.Value("cairn_directory_lookup_batches_total", {}), 2);

  EXPECT_EQ(p.Value("cairn_directory_evicted_objects_total", {}), 3);
  EXPECT_EQ(p.Value("cairn_directory_evicted_groups_total", {}), 1);
  EXPECT_EQ(
      p.Value("cairn_directory_evicted_bytes_total", {{"measure", "size"}}),
      70);
  EXPECT_EQ(
      p.Value("cairn_directory_evicted_bytes_total", {{"measure", "counted"}}),
      70);
  EXPECT_EQ(p.Value("cairn_directory_reaped_total", {}), 1);

  // 10 k + 10 q + 3 g - k9 - 3 g + p0 + p2 - p2 + p3 + e0 + e1 - q0 - e0 -
  // e1 - p3 = 19.
  EXPECT_EQ(p.Value("cairn_directory_objects", {}), 19);
  EXPECT_EQ(dir.object_count(), 19u);
  EXPECT_EQ(p.Value("cairn_directory_groups", {}), 0);
  EXPECT_EQ(p.Value("cairn_directory_pending_charge_bytes", {}), 0);
  EXPECT_EQ(p.Value("cairn_directory_pending_unlinks", {}), 0);
  EXPECT_EQ(p.types.at("cairn_directory_lifecycle_stripe_waits_total"),
            "counter");
  EXPECT_EQ(p.helps.count("cairn_directory_objects"), 1u);
}

// The pending-charge gauge follows every way a pending charge ends: commit,
// abort, erase of an object with a staged upsert, group erase and eviction
// of members with staged upserts.
TEST(DirectoryMetricsTest, PendingChargeGaugeReturnsToZero) {
  QuotaAccount quota;
  DirectoryOptions options;
  options.quota = &quota;
  Directory dir(options);
  auto a = dir.Create("a", Sized(1));
  auto m0 = dir.Create("m0", Sized(1, "grp"));
  auto m1 = dir.Create("m1", Sized(1, "grp"));
  auto v0 = dir.Create("v0", Sized(1, "ev"));
  ASSERT_TRUE(a.ok() && m0.ok() && m1.ok() && v0.ok());
  ASSERT_TRUE(dir.BeginUpsert("a", a.value().token(), {4, 4}).ok());
  ASSERT_TRUE(dir.BeginUpsert("m0", m0.value().token(), {8, 8}).ok());
  ASSERT_TRUE(dir.BeginUpsert("v0", v0.value().token(), {16, 16}).ok());
  auto p = dir.CreatePending("p", Sized(32, "grp"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(dir.pending_charge_bytes(), 60u);
  ASSERT_TRUE(dir.Erase("a").ok());
  EXPECT_EQ(dir.pending_charge_bytes(), 56u);
  ASSERT_TRUE(dir.EraseGroup("grp").ok());  // m0's upsert and p's put
  EXPECT_EQ(dir.pending_charge_bytes(), 16u);
  std::vector<EvictedObject<testing::TestPayload>> out;
  ASSERT_EQ(DirectoryHooks::EvictIfUnchanged(
                dir, v0.value(), CensusVersion(dir, v0.value()), false, &out),
            StatusCode::kOk);
  EXPECT_EQ(dir.pending_charge_bytes(), 0u);
  EXPECT_EQ(quota.charged(), 0u);
  EXPECT_EQ(Scrape(dir).Value("cairn_directory_pending_charge_bytes", {}), 0);
}

// 8 threads of lookups (point, pin, batch; hits and misses) and creates
// against one directory: exact totals once they are joined.
TEST(DirectoryMetricsTest, ConcurrentCountsAreExact) {
  Directory dir;
  constexpr int kPreloaded = 64;
  for (int i = 0; i < kPreloaded; ++i)
    ASSERT_TRUE(dir.Create(Key("h", i)).ok());
  constexpr int kThreads = 8;
  constexpr int kRounds = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&dir, t] {
      const std::array<std::string_view, 3> batch = {"h1", "absent", "h2"};
      for (int r = 0; r < kRounds; ++r) {
        (void)dir.WithObject(Key("h", r % kPreloaded), [](auto&) {});
        (void)dir.WithObject("absent", [](auto&) {});
        (void)dir.Pin("h0");
        (void)dir.WithObjects(batch, [](std::size_t, StatusCode, auto*) {});
        if (r % 10 == 0) {
          EXPECT_TRUE(dir.Create(Key(Key("t", t) + "-", r)).ok());
          // Every thread also tries one shared key: one of them wins.
          (void)dir.Create(Key("shared-", r));
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const ParsedExposition p = Scrape(dir);
  constexpr double kN = kThreads * kRounds;
  EXPECT_EQ(Lookups(p, "get", "hit"), kN);
  EXPECT_EQ(Lookups(p, "get", "miss"), kN);
  EXPECT_EQ(Lookups(p, "pin", "hit"), kN);
  EXPECT_EQ(Lookups(p, "batch", "hit"), 2 * kN);
  EXPECT_EQ(Lookups(p, "batch", "miss"), kN);
  EXPECT_EQ(p.Value("cairn_directory_lookup_batches_total", {}), kN);
  constexpr double kCreates = kThreads * (kRounds / 10);
  constexpr double kShared = kRounds / 10;
  EXPECT_EQ(Op(p, "create", "ok"), kPreloaded + kCreates + kShared);
  EXPECT_EQ(Op(p, "create", "exists"), kShared * (kThreads - 1));
  EXPECT_EQ(p.Value("cairn_directory_objects", {}),
            kPreloaded + kCreates + kShared);
}

// The read path with the counters in place: after the thread's warm-up
// call, hits and misses of every lookup allocate nothing (the counters are
// inline stripes; the write block is never touched by a lookup), and the
// counters did move.
TEST(DirectoryMetricsTest, LookupsAllocateNothingWithCounters) {
  Directory dir;
  ASSERT_TRUE(dir.Create("a").ok());
  ASSERT_TRUE(dir.Create("m", testing::InGroup("g")).ok());
  auto a = dir.Pin("a");  // warm-up: registers the thread's participant
  ASSERT_TRUE(a.ok());
  const std::array<std::string_view, 4> keys = {"a", "m", "absent", ""};
  const ObjectToken token = a.value().token();
  testing::AllocationCounter allocs;
  int ran = 0;
  for (int i = 0; i < 100; ++i) {
    (void)dir.WithObject("a", [&](auto&) { ++ran; });
    (void)dir.WithObject("absent", [&](auto&) { ++ran; });
    (void)dir.WithObjectExclusive("m", [&](auto&) { ++ran; });
    (void)dir.WithToken("a", token, [&](auto&) { ++ran; });
    (void)dir.WithHandle(a.value(), [&](auto&) { ++ran; });
    (void)dir.Pin("a");
    (void)dir.Pin("absent");
    (void)dir.WithObjects(keys, [&](std::size_t, StatusCode c, auto*) {
      ran += c == StatusCode::kOk ? 1 : 0;
    });
  }
  EXPECT_EQ(allocs.count(), 0u);
  EXPECT_EQ(ran, 600);
  const ParsedExposition p = Scrape(dir);
  EXPECT_EQ(Lookups(p, "get", "hit"), 400);
  EXPECT_EQ(Lookups(p, "get", "miss"), 100);
  EXPECT_EQ(Lookups(p, "pin", "hit"), 101);
  EXPECT_EQ(Lookups(p, "pin", "miss"), 100);
  EXPECT_EQ(Lookups(p, "batch", "hit"), 200);
  EXPECT_EQ(Lookups(p, "batch", "miss"), 100);  // "" is not a lookup
}

// The renderer's text for a directory is well formed under a LabelScope
// (what TenantRegistry does), and every family has its HELP and TYPE.
TEST(DirectoryMetricsTest, ExpositionUnderLabelScopeParses) {
  Directory dir;
  ASSERT_TRUE(dir.Create("x").ok());
  PrometheusRenderer renderer;
  const std::array<MetricLabel, 1> scope = {MetricLabel{"tenant", "a\"b"}};
  LabelScope scoped(renderer, scope);
  dir.VisitMetrics(scoped);
  const ParsedExposition p = ParseExposition(renderer.Finish());
  ASSERT_EQ(p.error, "");
  for (const auto& s : p.samples) {
    ASSERT_FALSE(s.labels.empty()) << s.name;
    EXPECT_EQ(s.labels.front(),
              (std::pair<std::string, std::string>("tenant", "a\"b")));
    EXPECT_EQ(p.types.count(s.name), 1u) << s.name;
    EXPECT_EQ(p.helps.count(s.name), 1u) << s.name;
  }
  EXPECT_EQ(
      p.Value("cairn_directory_operations_total",
              Labels{{"tenant", "a\"b"}, {"op", "create"}, {"result", "ok"}}),
      1);
}

}  // namespace
}  // namespace cairn
