// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Tenant and eviction benchmarks.
//
// BM_DirectoryW7/{quiet,evicting}/<population>: one thread runs W2 batches
//   (32 uniform keys, read and write batches alternating) against one
//   directory; in `evicting` a second thread runs eviction cycles (census of
//   the whole directory, rank, evict 64 objects, re-create them) for the
//   whole run. Counters: key ops/s of the foreground, its batch p50, p99,
//   p999 and max (us), the share of its wall time on a CPU, runnable but
//   waiting for one, and blocked (fg_cpu_pct, fg_runq_pct, fg_blocked_pct,
//   from /proc/thread-self/schedstat), and for `evicting` the census CPU per
//   1M objects (ms, thread CPU time of whole cycles) and the eviction
//   thread's own CPU and wait shares (ev_cpu_pct, ev_runq_pct).
// BM_DirectoryT1/{multi,single}/<tenants>: point reads through the registry
//   (WithTenant, then WithObject) that alternate over <tenants> tenants of
//   1,000 objects each, or the same reads in one tenant holding all
//   <tenants> x 1,000 objects. Counter bytes_per_empty_tenant: RSS growth
//   per empty tenant over 1,000 empty tenants.

#include <benchmark/benchmark.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cairn/tenant/eviction.h"
#include "cairn/tenant/tenant_registry.h"

namespace cairn {
namespace {

struct Payload {
  std::uint64_t value = 0;
};
using Dir = GroupDirectory<Payload>;
using Registry = TenantRegistry<Payload>;
using Kernel = Evictor<Payload>;

std::string Key64(std::uint64_t i) {
  char buf[65];
  std::snprintf(buf, sizeof(buf), "%064llu",
                static_cast<unsigned long long>(i));
  return std::string(buf, 64);
}

std::size_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// This thread's scheduler figures from /proc/thread-self/schedstat: time on
// a CPU and time runnable but waiting for one (ns). Zero if unavailable.
struct SchedStat {
  double on_cpu_ns = 0;
  double run_wait_ns = 0;
};
SchedStat ThreadSchedStat() {
  SchedStat s;
  std::ifstream f("/proc/thread-self/schedstat");
  f >> s.on_cpu_ns >> s.run_wait_ns;
  return s;
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

void Progress(const char* what, std::size_t n) {
  std::fprintf(stderr, "[tenant bench] populating %s: %zu objects\n", what, n);
}

// ---- W7 ----------------------------------------------------------------

struct W7World {
  explicit W7World(std::size_t population) : keys(population) {
    Progress("W7", population);
    DirectoryOptions o;
    o.quota = &quota;
    o.route.bucket_count = std::max<std::size_t>(1024, population / 4);
    dir = std::make_unique<Dir>(o);
    CreateOptions c;
    c.size_bytes = c.counted_bytes = 4096;
    for (std::size_t i = 0; i < population; ++i) {
      keys[i] = Key64(i);
      if (!dir->Create(keys[i], c).ok()) std::abort();
    }
  }
  QuotaAccount quota;
  std::unique_ptr<Dir> dir;
  std::vector<std::string> keys;
};

// One world per population, built on first use and kept: repetitions run
// interleaved, and a rebuild per repetition would dominate the run.
W7World& W7(std::size_t population) {
  static std::map<std::size_t, std::unique_ptr<W7World>> worlds;
  auto& world = worlds[population];
  if (!world) world = std::make_unique<W7World>(population);
  return *world;
}

void BM_DirectoryW7(benchmark::State& state, bool evicting) {
  W7World& w = W7(static_cast<std::size_t>(state.range(0)));
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> census_objects{0};
  double census_cpu = 0;
  SchedStat ev_sched;  // the evictor's, over its whole run
  double ev_wall_ns = 0;
  std::thread evictor;
  if (evicting) {
    evictor = std::thread([&] {
      std::vector<std::string> refill;
      Kernel::Options ko;
      ko.on_evicted = [&](std::span<EvictedObject<Payload>> batch) {
        for (auto& x : batch) refill.push_back(std::move(x.key));
      };
      Kernel kernel(ko);
      Dir* d = w.dir.get();
      CreateOptions c;
      c.size_bytes = c.counted_bytes = 4096;
      const SchedStat s0 = ThreadSchedStat();
      const auto w0 = std::chrono::steady_clock::now();
      while (!stop.load(std::memory_order_acquire)) {
        const double t0 = ThreadCpuSeconds();
        const EvictionResult r =
            kernel.Evict(std::span<Dir* const>(&d, 1), 64 * 4096, 0,
                         Kernel::Measure::kSizeBytes);
        census_cpu += ThreadCpuSeconds() - t0;
        census_objects.fetch_add(r.census_objects, std::memory_order_relaxed);
        for (const std::string& k : refill)
          w.dir->Create(k, c).status().IgnoreError();
        refill.clear();
      }
      const SchedStat s1 = ThreadSchedStat();
      ev_sched.on_cpu_ns = s1.on_cpu_ns - s0.on_cpu_ns;
      ev_sched.run_wait_ns = s1.run_wait_ns - s0.run_wait_ns;
      ev_wall_ns = std::chrono::duration<double, std::nano>(
                       std::chrono::steady_clock::now() - w0)
                       .count();
    });
  }
  std::mt19937_64 rng(42);
  std::vector<std::string_view> batch(32);
  std::vector<double> latency;
  latency.reserve(1 << 16);
  std::uint64_t ops = 0;
  bool write = false;
  const SchedStat sched0 = ThreadSchedStat();
  const auto wall0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (auto& k : batch) k = w.keys[rng() % w.keys.size()];
    const auto t0 = std::chrono::steady_clock::now();
    if (write) {
      w.dir
          ->WithObjectsExclusive(
              batch,
              [](std::size_t, StatusCode code, ObjectAccess<Payload>* a) {
                if (code == StatusCode::kOk) a->payload().value += 1;
              })
          .IgnoreError();
    } else {
      std::uint64_t sum = 0;
      w.dir
          ->WithObjects(
              batch,
              [&](std::size_t, StatusCode code, ObjectView<Payload>* v) {
                if (code == StatusCode::kOk) sum += v->payload().value;
              })
          .IgnoreError();
      benchmark::DoNotOptimize(sum);
    }
    latency.push_back(std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - t0)
                          .count());
    write = !write;
    ops += batch.size();
  }
  const SchedStat sched1 = ThreadSchedStat();
  const double wall_ns = std::chrono::duration<double, std::nano>(
                             std::chrono::steady_clock::now() - wall0)
                             .count();
  stop.store(true, std::memory_order_release);
  if (evictor.joinable()) evictor.join();
  // Where the foreground's wall time went: on a CPU, runnable but waiting
  // for one (the machine is shared), or blocked (lock waits, page faults).
  if (wall_ns > 0 && sched1.on_cpu_ns > 0) {
    const double cpu = sched1.on_cpu_ns - sched0.on_cpu_ns;
    const double wait = sched1.run_wait_ns - sched0.run_wait_ns;
    state.counters["fg_cpu_pct"] = 100.0 * cpu / wall_ns;
    state.counters["fg_runq_pct"] = 100.0 * wait / wall_ns;
    state.counters["fg_blocked_pct"] =
        std::max(0.0, 100.0 * (wall_ns - cpu - wait) / wall_ns);
  }
  std::sort(latency.begin(), latency.end());
  state.SetItemsProcessed(static_cast<std::int64_t>(ops));
  if (!latency.empty()) {
    state.counters["p99_us"] =
        latency[std::min(latency.size() - 1, latency.size() * 99 / 100)];
    state.counters["p50_us"] = latency[latency.size() / 2];
    state.counters["p999_us"] =
        latency[std::min(latency.size() - 1, latency.size() * 999 / 1000)];
    state.counters["max_us"] = latency.back();
  }
  if (evicting && ev_wall_ns > 0 && ev_sched.on_cpu_ns > 0) {
    state.counters["ev_cpu_pct"] = 100.0 * ev_sched.on_cpu_ns / ev_wall_ns;
    state.counters["ev_runq_pct"] = 100.0 * ev_sched.run_wait_ns / ev_wall_ns;
  }
  const std::uint64_t seen = census_objects.load(std::memory_order_relaxed);
  if (evicting && seen > 0) {
    state.counters["census_cpu_ms_per_1M"] =
        census_cpu * 1e3 * 1e6 / static_cast<double>(seen);
  }
}

// ---- T1 ----------------------------------------------------------------

constexpr std::size_t kObjectsPerTenant = 1000;

struct T1World {
  explicit T1World(std::size_t tenants) : count(tenants) {
    Progress("T1", 2 * tenants * kObjectsPerTenant);
    auto small = [](std::string_view) -> Result<TenantOptions> {
      TenantOptions t;
      t.directory.route.bucket_count = 1024;  // ~1 object per bucket
      return t;
    };
    const std::size_t total = tenants * kObjectsPerTenant;
    auto big = [total](std::string_view) -> Result<TenantOptions> {
      TenantOptions t;
      t.directory.route.bucket_count = total;  // the same load factor
      return t;
    };
    for (std::size_t t = 0; t < tenants; ++t) {
      names.push_back("tenant-" + std::to_string(t));
      auto h = multi.GetOrCreate(names.back(), small);
      if (!h.ok()) std::abort();
    }
    auto one = single.GetOrCreate("all", big);
    if (!one.ok()) std::abort();
    keys.resize(total);
    for (std::size_t i = 0; i < total; ++i) keys[i] = Key64(i);
    for (std::size_t i = 0; i < total; ++i) {
      // Object i lives in tenant i % tenants in the multi-tenant registry.
      auto h = multi.Find(names[i % tenants]);
      if (!h.value()->directory().Create(keys[i]).ok()) std::abort();
      if (!one.value()->directory().Create(keys[i]).ok()) std::abort();
    }
  }
  std::size_t count;
  Registry multi;
  Registry single;
  std::vector<std::string> names;
  std::vector<std::string> keys;
};

T1World& T1(std::size_t tenants) {
  static std::map<std::size_t, std::unique_ptr<T1World>> worlds;
  auto& world = worlds[tenants];
  if (!world) world = std::make_unique<T1World>(tenants);
  return *world;
}

void BM_DirectoryT1(benchmark::State& state, bool multi) {
  T1World& w = T1(static_cast<std::size_t>(state.range(0)));
  std::mt19937_64 rng(7);
  const std::size_t total = w.keys.size();
  std::uint64_t found = 0;
  std::size_t tenant = 0;
  for (auto _ : state) {
    // Alternate tenants: object i lives in tenant i % count, so walking the
    // tenants in turn picks a random object of the next tenant.
    tenant = (tenant + 1) % w.count;
    const std::size_t i = (rng() % (total / w.count)) * w.count + tenant;
    const std::string_view name =
        multi ? std::string_view(w.names[tenant]) : std::string_view("all");
    const Registry& r = multi ? w.multi : w.single;
    r.WithTenant(name, [&](Registry::TenantType& t) {
       t.directory()
           .WithObject(w.keys[i],
                       [&](const ObjectView<Payload>& v) {
                         found += v.payload().value + 1;
                       })
           .IgnoreError();
     }).IgnoreError();
  }
  benchmark::DoNotOptimize(found);
  state.SetItemsProcessed(state.iterations());
  if (multi) {
    // Bytes per empty tenant, over 1,000 empty tenants of the same shape.
    static double per_tenant = -1;
    if (per_tenant < 0) {
      Registry empty;
      auto small = [](std::string_view) -> Result<TenantOptions> {
        TenantOptions t;
        t.directory.route.bucket_count = 1024;
        return t;
      };
      const std::size_t before = RssBytes();
      for (int t = 0; t < 1000; ++t) {
        if (!empty.GetOrCreate("e" + std::to_string(t), small).ok()) {
          std::abort();
        }
      }
      per_tenant = static_cast<double>(RssBytes() - before) / 1000.0;
    }
    state.counters["bytes_per_empty_tenant"] = per_tenant;
  }
}

void W7Args(benchmark::internal::Benchmark* b) {
  b->Arg(100'000)->Arg(1'000'000)->UseRealTime()->Unit(benchmark::kMicrosecond);
}
void T1Args(benchmark::internal::Benchmark* b) {
  b->Arg(100)->Arg(1000)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_DirectoryW7, quiet, false)->Apply(W7Args);
BENCHMARK_CAPTURE(BM_DirectoryW7, evicting, true)->Apply(W7Args);
BENCHMARK_CAPTURE(BM_DirectoryT1, multi, true)->Apply(T1Args);
BENCHMARK_CAPTURE(BM_DirectoryT1, single, false)->Apply(T1Args);

}  // namespace
}  // namespace cairn

BENCHMARK_MAIN();
