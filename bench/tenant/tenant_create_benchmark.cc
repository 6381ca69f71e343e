// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Tenant creation and size benchmarks (gates directory.T2.tenant_create and
// directory.W8.empty_tenant_bytes).
//
// BM_DirectoryT2/<n>: GetOrCreate of the n-th tenant. The registry holds
//   n - 1 tenants (the default one among them), each built with the default
//   TenantOptions; every iteration times one GetOrCreate miss of a fresh name
//   (manual time: the clock is read just around that call) and then removes
//   that tenant again, untimed, so every timed call creates the n-th tenant.
//   The timed call includes building the tenant (its quota account and
//   directory), the registry's publication and the retirement of what the
//   publication replaced; the registry domain's reclaim passes (replaced
//   maps, dropped entries) run where they fall due, timed or not. The bench
//   holds a handle to each of the last 256 removed tenants and drops the
//   oldest untimed, so a tenant's destruction (which the registry leaves to
//   whichever call frees its last map, at 10,000 tenants often a timed
//   creation, at 10 never) is not timed at any n. Counters: `tenants`, the
//   registry's size before the timed call; `p50_us`, the median of the timed
//   calls (the iteration time is their mean, which a preemption by another
//   process inflates).
//
// BM_TenantW8/<objects>: heap bytes per tenant (glibc in-use bytes,
//   mallinfo2) over 1,000 tenants made with the default TenantOptions in a
//   registry built beforehand (its fixed shards are not counted), each then
//   given `objects` singleton objects of 16-byte keys. Counter
//   `bytes_per_tenant`; 0 objects is the empty tenant.

#include <benchmark/benchmark.h>

#include <malloc.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cairn/tenant/tenant_registry.h"

namespace cairn {
namespace {

using Registry = TenantRegistry<>;

Result<TenantOptions> Defaults(std::string_view) { return TenantOptions{}; }

// One registry per n, built on first use and kept: repetitions run
// interleaved, and a rebuild per repetition would dominate the run.
struct T2World {
  explicit T2World(std::size_t n) {
    std::fprintf(stderr, "[bench] T2: populating %zu tenants\n", n - 1);
    // The default tenant is the first; n - 2 more make n - 1.
    for (std::size_t i = 0; i + 2 < n; ++i) {
      if (!registry.GetOrCreate("tenant-" + std::to_string(i), Defaults).ok()) {
        std::abort();
      }
    }
  }
  Registry registry;
  std::uint64_t next = 0;
};

T2World& T2(std::size_t n) {
  static std::map<std::size_t, std::unique_ptr<T2World>> worlds;
  auto& world = worlds[n];
  if (!world) world = std::make_unique<T2World>(n);
  return *world;
}

void BM_DirectoryT2(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  T2World& w = T2(n);
  const std::size_t before = w.registry.size();
  std::vector<double> seconds;
  seconds.reserve(1 << 16);
  constexpr std::size_t kKeptRemoved = 256;
  std::vector<Registry::Handle> removed(kKeptRemoved);
  std::size_t kept = 0;
  for (auto _ : state) {
    const std::string name = "fresh-" + std::to_string(w.next++);
    const auto start = std::chrono::steady_clock::now();
    Result<Registry::Handle> made = w.registry.GetOrCreate(name, Defaults);
    const auto stop = std::chrono::steady_clock::now();
    if (!made.ok()) {
      state.SkipWithError("GetOrCreate failed");
      break;
    }
    const double t = std::chrono::duration<double>(stop - start).count();
    state.SetIterationTime(t);
    if (seconds.size() < seconds.capacity()) seconds.push_back(t);
    if (!w.registry.Remove(name, made.value()->instance_id()).ok()) {
      state.SkipWithError("Remove failed");
      break;
    }
    // The bench keeps the last kKeptRemoved removed tenants alive and drops
    // the oldest here, untimed: by then the registry has long reclaimed the
    // maps that held it (a pass every 64 retirements), so the drop is the
    // last owner and the destruction stays out of the timed calls; the
    // registry's reclaim of replaced maps and dropped entries runs at its
    // natural rate, inside whichever call makes it due.
    removed[kept++ % kKeptRemoved] = std::move(made).value();
  }
  removed.clear();
  state.counters["tenants"] = static_cast<double>(before);
  if (!seconds.empty()) {
    auto mid =
        seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 2);
    std::nth_element(seconds.begin(), mid, seconds.end());
    state.counters["p50_us"] = *mid * 1e6;
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_DirectoryT2)
    ->Arg(10)
    ->Arg(10'000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_TenantW8(benchmark::State& state) {
  constexpr int kTenants = 1000;
  const int objects = static_cast<int>(state.range(0));
  double per_tenant = 0;
  for (auto _ : state) {
    Registry registry;
    std::vector<Registry::Handle> tenants;
    tenants.reserve(kTenants);
    const std::size_t before = mallinfo2().uordblks;
    for (int t = 0; t < kTenants; ++t) {
      Result<Registry::Handle> made =
          registry.GetOrCreate("tenant-" + std::to_string(t), Defaults);
      if (!made.ok()) std::abort();
      char key[32];
      for (int i = 0; i < objects; ++i) {
        std::snprintf(key, sizeof(key), "object-%09d", i);
        if (!made.value()->directory().Create(key).ok()) std::abort();
      }
      tenants.push_back(std::move(made).value());
    }
    per_tenant = static_cast<double>(mallinfo2().uordblks - before) / kTenants;
  }
  state.counters["bytes_per_tenant"] = per_tenant;
}

BENCHMARK(BM_TenantW8)
    ->ArgName("objects")
    ->Arg(0)
    ->Arg(1)
    ->Arg(16)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace cairn

BENCHMARK_MAIN();
