// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// TenantRegistry::VisitMetrics and Evictor::VisitMetrics: workloads whose
// every count is known, rendered as Prometheus text, parsed back
// (testing/metrics_text.h) and checked value by value; a visit racing
// tenant creations and removals (TSan).

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/base/metrics.h"
#include "cairn/directory/durable_log.h"
#include "cairn/tenant/eviction.h"
#include "cairn/tenant/tenant_registry.h"
#include "directory/directory_testing.h"
#include "testing/metrics_text.h"

namespace cairn {
namespace {

using testing::Key;
using testing::TestPayload;
using testing_internal::ParsedExposition;
using testing_internal::ParseExposition;
using Registry = TenantRegistry<TestPayload>;
using Kernel = Evictor<TestPayload>;
using Dir = GroupDirectory<TestPayload>;

template <typename Source>
ParsedExposition Scrape(const Source& source) {
  PrometheusRenderer renderer;
  source.VisitMetrics(renderer);
  const std::string text = renderer.Finish();
  ParsedExposition parsed = ParseExposition(text);
  EXPECT_EQ(parsed.error, "") << text;
  return parsed;
}

Registry::Factory Limited(std::uint64_t limit) {
  return [limit](std::string_view) -> Result<TenantOptions> {
    TenantOptions t;
    t.quota_limit_bytes = limit;
    t.directory.route.bucket_count = 64;
    return t;
  };
}

CreateOptions Bytes(std::uint64_t n) {
  CreateOptions c;
  c.size_bytes = n;
  c.counted_bytes = n;
  return c;
}

double TenantValue(const ParsedExposition& p, std::string_view name,
                   std::string_view tenant) {
  return p.Value(name, {{"tenant", std::string(tenant)}});
}

// Tenants created, failed and removed; tenant a's quota (limit, charged,
// committed, pending, deficit, refusals) through a quota eviction; the
// directories' metrics labelled per tenant.
TEST(TenantMetricsTest, RegistryKnownWorkloadCountsExactly) {
  Registry registry;  // the default tenant: unlimited
  auto a = registry.GetOrCreate("a", Limited(100)).value();
  auto b = registry.GetOrCreate("b", Limited(100)).value();
  EXPECT_FALSE(registry
                   .GetOrCreate("bad",
                                [](std::string_view) -> Result<TenantOptions> {
                                  return InvalidArgumentError("no");
                                })
                   .ok());
  ASSERT_TRUE(registry.Remove("b", b->instance_id()).ok());

  // Tenant a: three 30-byte objects, a fourth refused, a 10-byte pending
  // put (charged 100, committed 90, pending 10).
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(a->directory().Create(Key("k", i), Bytes(30)).ok());
  }
  EXPECT_EQ(a->directory().Create("k3", Bytes(30)).status().code(),
            StatusCode::kResourceExhausted);
  ASSERT_TRUE(a->directory().CreatePending("p", Bytes(10)).ok());
  // The default tenant: two hits and a miss.
  Dir& d = registry.default_tenant()->directory();
  ASSERT_TRUE(d.Create("x").ok());
  EXPECT_TRUE(d.WithObject("x", [](auto&) {}).ok());
  EXPECT_TRUE(d.WithObject("x", [](auto&) {}).ok());
  EXPECT_FALSE(d.WithObject("y", [](auto&) {}).ok());

  ParsedExposition p = Scrape(registry);
  EXPECT_EQ(p.Value("cairn_tenant_tenants", {}), 2);  // default and a
  EXPECT_EQ(p.Value("cairn_tenant_created_total", {}), 3);
  EXPECT_EQ(p.Value("cairn_tenant_create_failures_total", {}), 1);
  EXPECT_EQ(p.Value("cairn_tenant_removed_total", {}), 1);
  EXPECT_EQ(TenantValue(p, "cairn_tenant_quota_limit_bytes", "a"), 100);
  EXPECT_EQ(TenantValue(p, "cairn_tenant_quota_limit_bytes", "default"),
            std::numeric_limits<double>::infinity());
  EXPECT_EQ(TenantValue(p, "cairn_tenant_quota_charged_bytes", "a"), 100);
  EXPECT_EQ(TenantValue(p, "cairn_tenant_quota_committed_bytes", "a"), 90);
  EXPECT_EQ(TenantValue(p, "cairn_tenant_quota_pending_bytes", "a"), 10);
  EXPECT_EQ(TenantValue(p, "cairn_tenant_quota_deficit_bytes", "a"), 0);
  EXPECT_EQ(TenantValue(p, "cairn_tenant_quota_refusals_total", "a"), 1);
  EXPECT_EQ(TenantValue(p, "cairn_tenant_quota_refusals_total", "default"), 0);
  // A removed tenant is not reported.
  EXPECT_TRUE(
      std::isnan(TenantValue(p, "cairn_tenant_quota_limit_bytes", "b")));
  // Directory metrics, labelled tenant="<name>" first.
  EXPECT_EQ(TenantValue(p, "cairn_directory_objects", "a"), 4);
  EXPECT_EQ(TenantValue(p, "cairn_directory_objects", "default"), 1);
  EXPECT_EQ(p.Value("cairn_directory_operations_total",
                    {{"tenant", "a"}, {"op", "create"}, {"result", "quota"}}),
            1);
  EXPECT_EQ(p.Value("cairn_directory_lookups_total",
                    {{"tenant", "default"}, {"op", "get"}, {"result", "hit"}}),
            2);
  EXPECT_EQ(p.Value("cairn_directory_lookups_total",
                    {{"tenant", "default"}, {"op", "get"}, {"result", "miss"}}),
            1);
  EXPECT_EQ(p.Sum("cairn_directory_objects", {"tenant", "a"}) +
                p.Sum("cairn_directory_objects", {"tenant", "default"}),
            5);

  // The limit drops to 80: a deficit of 20, freed by the quota policy with
  // one 30-byte object (the pending put is not evictable).
  a->quota().set_limit(80);
  p = Scrape(registry);
  EXPECT_EQ(TenantValue(p, "cairn_tenant_quota_deficit_bytes", "a"), 20);
  Kernel k;
  const EvictionResult r = k.RunQuotaDeficit(*a);
  ASSERT_EQ(r.evicted_objects, 1u);
  p = Scrape(registry);
  EXPECT_EQ(TenantValue(p, "cairn_tenant_quota_charged_bytes", "a"), 70);
  EXPECT_EQ(TenantValue(p, "cairn_tenant_quota_committed_bytes", "a"), 60);
  EXPECT_EQ(TenantValue(p, "cairn_tenant_quota_deficit_bytes", "a"), 0);
  EXPECT_EQ(TenantValue(p, "cairn_directory_evicted_objects_total", "a"), 1);
  EXPECT_EQ(p.Value("cairn_directory_evicted_bytes_total",
                    {{"tenant", "a"}, {"measure", "counted"}}),
            30);
  EXPECT_EQ(TenantValue(p, "cairn_directory_evicted_objects_total", "default"),
            0);

  const ParsedExposition e = Scrape(k);
  EXPECT_EQ(e.Value("cairn_eviction_cycles_total", {}), 1);
  EXPECT_EQ(e.Value("cairn_eviction_census_rounds_total", {}), 1);
  EXPECT_EQ(e.Value("cairn_eviction_passes_total", {{"pass", "unpinned"}}), 1);
  EXPECT_EQ(e.Value("cairn_eviction_passes_total", {{"pass", "soft_pinned"}}),
            0);
  EXPECT_EQ(e.Value("cairn_eviction_evicted_objects_total", {}), 1);
  EXPECT_EQ(
      e.Value("cairn_eviction_evicted_bytes_total", {{"measure", "counted"}}),
      30);
  EXPECT_EQ(
      e.Value("cairn_eviction_evicted_bytes_total", {{"measure", "size"}}), 30);
}

// Every Evictor counter against cycles whose outcome is known: offload
// refused then accepted, a group, a skip, a soft-pinned pass and a log
// refusal.
TEST(TenantMetricsTest, EvictorCountsEveryOutcome) {
  ManualClock clock;
  InMemoryDurableLog log;
  DirectoryOptions o;
  o.clock = &clock;
  o.durable_log = &log;
  o.route.bucket_count = 64;
  Dir dir(o);
  Dir* dirs[] = {&dir};
  ASSERT_TRUE(dir.Create("s1", Bytes(10)).ok());
  ASSERT_TRUE(dir.Create("s2", Bytes(20)).ok());
  CreateOptions member = Bytes(5);
  member.group = "g";
  ASSERT_TRUE(dir.Create("m1", member).ok());
  ASSERT_TRUE(dir.Create("m2", member).ok());

  // Cycle 1: every hand-off refused and kept: 3 candidates (s1, s2, g).
  Kernel::Options refuse;
  refuse.offload = [](const ObjectHandle<TestPayload>&) { return false; };
  Kernel keep(refuse);
  EvictionResult r = keep.Evict(dirs, 1000, 0, Kernel::Measure::kSizeBytes);
  EXPECT_EQ(r.offload_refused, 3u);
  EXPECT_EQ(r.evicted_objects, 0u);
  ParsedExposition p = Scrape(keep);
  EXPECT_EQ(p.Value("cairn_eviction_offloads_total", {{"result", "refused"}}),
            3);
  EXPECT_EQ(p.Value("cairn_eviction_offloads_total", {{"result", "accepted"}}),
            0);
  EXPECT_EQ(p.Value("cairn_eviction_evicted_objects_total", {}), 0);

  // Cycle 2: accepted, everything evicted: s1, s2 and the group (2 members).
  Kernel::Options accept;
  accept.offload = [](const ObjectHandle<TestPayload>&) { return true; };
  Kernel take(accept);
  r = take.Evict(dirs, 1000, 0, Kernel::Measure::kSizeBytes);
  ASSERT_EQ(r.evicted_objects, 4u);
  p = Scrape(take);
  EXPECT_EQ(p.Value("cairn_eviction_cycles_total", {}), 1);
  EXPECT_EQ(p.Value("cairn_eviction_offloads_total", {{"result", "accepted"}}),
            3);
  EXPECT_EQ(p.Value("cairn_eviction_evicted_objects_total", {}), 4);
  EXPECT_EQ(p.Value("cairn_eviction_evicted_groups_total", {}), 1);
  EXPECT_EQ(
      p.Value("cairn_eviction_evicted_bytes_total", {{"measure", "size"}}), 40);
  EXPECT_EQ(p.Value("cairn_eviction_log_refusals_total", {}), 0);
  EXPECT_EQ(p.Value("cairn_eviction_skipped_total", {}), 0);

  // Cycle 3 and 4 on one kernel: a soft-pinned object evicted in the second
  // pass; then the log refuses and the cycle stops.
  Kernel::Options soft_ok;
  soft_ok.allow_soft_pinned = true;
  Kernel k(soft_ok);
  ASSERT_TRUE(dir.Create("soft", Bytes(8)).ok());
  ASSERT_TRUE(dir.WithObjectExclusive("soft",
                                      [&](ObjectAccess<TestPayload>& a) {
                                        a.set_soft_pin_deadline_nanos(
                                            clock.NowNanos() +
                                            1'000'000'000'000);
                                      })
                  .ok());
  r = k.Evict(dirs, 8, 8, Kernel::Measure::kSizeBytes);
  ASSERT_EQ(r.evicted_objects, 1u);
  ASSERT_TRUE(r.used_soft_pinned_pass);
  ASSERT_TRUE(dir.Create("last", Bytes(3)).ok());
  log.FailReserve(ResourceExhaustedError("log full"));
  r = k.Evict(dirs, 3, 0, Kernel::Measure::kSizeBytes);
  EXPECT_EQ(r.status.code(), StatusCode::kResourceExhausted);
  p = Scrape(k);
  EXPECT_EQ(p.Value("cairn_eviction_cycles_total", {}), 2);
  EXPECT_EQ(p.Value("cairn_eviction_census_rounds_total", {}), 2);
  EXPECT_EQ(p.Value("cairn_eviction_passes_total", {{"pass", "unpinned"}}), 2);
  EXPECT_EQ(p.Value("cairn_eviction_passes_total", {{"pass", "soft_pinned"}}),
            1);
  EXPECT_EQ(p.Value("cairn_eviction_evicted_objects_total", {}), 1);
  EXPECT_EQ(
      p.Value("cairn_eviction_evicted_bytes_total", {{"measure", "counted"}}),
      8);
  EXPECT_EQ(p.Value("cairn_eviction_log_refusals_total", {}), 1);
  // The directory counted the same evictions: 4 + 1.
  const ParsedExposition dp = Scrape(dir);
  EXPECT_EQ(dp.Value("cairn_directory_evicted_objects_total", {}), 5);
  EXPECT_EQ(
      dp.Value("cairn_directory_evicted_bytes_total", {{"measure", "size"}}),
      48);
}

// A candidate that changed since the census is skipped and counted: the
// offload hook (no lock held) bumps the candidate's version first.
TEST(TenantMetricsTest, EvictorCountsSkippedCandidates) {
  DirectoryOptions o;
  o.route.bucket_count = 64;
  Dir dir(o);
  Dir* dirs[] = {&dir};
  ASSERT_TRUE(dir.Create("a", Bytes(10)).ok());
  Kernel::Options change;
  change.offload = [&dir](const ObjectHandle<TestPayload>& h) {
    auto token = h.token();
    EXPECT_TRUE(dir.BeginUpsert("a", token, {10, 10}).ok());
    EXPECT_TRUE(dir.CommitUpsert("a", token).ok());  // the version moves
    return true;
  };
  Kernel k(change);
  const EvictionResult r = k.Evict(dirs, 10, 0, Kernel::Measure::kSizeBytes);
  EXPECT_EQ(r.skipped, 1u);
  const ParsedExposition p = Scrape(k);
  EXPECT_EQ(p.Value("cairn_eviction_skipped_total", {}), 1);
  EXPECT_EQ(p.Value("cairn_eviction_evicted_objects_total", {}), 0);
}

// Scrapes racing tenant creations, removals and writes: well-formed text
// every time (TSan checks the visit's reads), exact counters at the end.
TEST(TenantMetricsTest, VisitRacesCreationsAndRemovals) {
  Registry registry;
  constexpr int kWriters = 3;
  constexpr int kTenantsEach = 40;
  std::atomic<bool> done{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&registry, w] {
      for (int i = 0; i < kTenantsEach; ++i) {
        const std::string name = Key(Key("w", w) + "-", i);
        auto t = registry.GetOrCreate(name, Limited(1000));
        ASSERT_TRUE(t.ok());
        EXPECT_TRUE(t.value()->directory().Create("k", Bytes(1)).ok());
        if (i % 2 == 0) {
          EXPECT_TRUE(registry.Remove(name, t.value()->instance_id()).ok());
        }
      }
    });
  }
  std::thread scraper([&] {
    while (!done.load(std::memory_order_acquire)) {
      PrometheusRenderer renderer;
      registry.VisitMetrics(renderer);
      const ParsedExposition p = ParseExposition(renderer.Finish());
      EXPECT_EQ(p.error, "");
    }
  });
  for (std::thread& t : writers) t.join();
  done.store(true, std::memory_order_release);
  scraper.join();
  const ParsedExposition p = Scrape(registry);
  EXPECT_EQ(p.Value("cairn_tenant_created_total", {}),
            1 + kWriters * kTenantsEach);
  EXPECT_EQ(p.Value("cairn_tenant_removed_total", {}),
            kWriters * kTenantsEach / 2);
  EXPECT_EQ(p.Value("cairn_tenant_tenants", {}),
            1 + kWriters * kTenantsEach / 2);
  EXPECT_EQ(p.Sum("cairn_directory_objects", {"tenant", "w0-1"}), 1);
}

}  // namespace
}  // namespace cairn
