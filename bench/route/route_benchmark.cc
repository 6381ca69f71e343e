// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Route A/B: the epoch copy-on-write route against `shard` (Mooncake main's
// 1024 shard locks), `owning` (the locked reference: copy the owner under
// a bucket lock) and, for W1 and W2, `object_index` (one rwlock per tenant,
// the strong handle copied under it), with identical per-object work
// (bench/common/entry.h): the object's own reader-writer lock, then a
// metadata read (shared) or a version bump and lease extension (exclusive).
// 64-byte keys, uniform unless stated.
//   W1  point reads
//   W2  batch read/write 1:1, 32 keys per batch (read batch, write batch, ...)
//   W3  W2 with every key in one shard / bucket / stripe of that route
// Names: BM_RouteW<n>/<impl>/<population>/real_time/threads:<t>.
// The adapters are bench/common/route_impls.h's, which the peers driver's
// self-check (BM_SuiteSelfCheck) checks; this driver has none of its own:
// a second caller of an adapter changes what the compiler inlines into the
// timed loops.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <malloc.h>

#include <benchmark/benchmark.h>

#include "bench/baselines/locked_route.h"
#include "bench/common/driver.h"
#include "bench/common/entry.h"
#include "bench/common/keys.h"
#include "bench/common/random.h"
#include "bench/common/route_impls.h"
#include "cairn/directory/group_directory.h"
#include "cairn/route/object_route_index.h"
#include "testing/route_peer.h"

namespace cairn {
namespace {

// Local to this file, so everything instantiated over the entry keeps
// internal linkage (bench/common/entry.h says why).
struct Local {};
using Entry = bench::BenchEntry<Local>;
using Owner = std::shared_ptr<Entry>;
using bench::kBatch;
using bench::MakeKey;
using bench::ReadWork;
using bench::Rng;
using bench::WriteWork;

constexpr std::size_t kHotKeys = 64;

// The population: key i's string and entry i are allocated one after the
// other, as when the route gates were first measured. bench::Keys and
// bench::Entries build all keys, then all entries; with that layout the
// shard baseline's W1 read 20% slower (epoch unchanged), moving the gates.
struct Population {
  std::vector<std::string> keys;
  std::vector<Owner> entries;
};
const Population& GetPopulation(std::size_t n) {
  static std::mutex mu;
  static std::map<std::size_t, std::unique_ptr<Population>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[n];
  if (!slot) {
    slot = std::make_unique<Population>();
    for (std::size_t i = 0; i < n; ++i) {
      slot->keys.push_back(bench::PopulationKey(i));
      slot->entries.push_back(
          std::make_shared<Entry>(i + 1, slot->keys.back()));
    }
  }
  return *slot;
}

// --- implementations -------------------------------------------------------

// Write-side counters for W5 (zero for routes that change in place).
struct ChurnStats {
  std::uint64_t publications = 0;
  std::uint64_t copied_bytes = 0;  // by writes and by resizes
  std::uint64_t retired_bytes = 0;
  std::uint64_t buckets = 0;
};

// Both callback routes (the library's epoch route and the locked reference)
// are driven the same way; only the route type differs. Beside the shared
// adapter: the bucket a key lands in (W3) and the write-side counters (W5).
template <typename RouteT>
struct CallbackRouteImpl : bench::RouteAdapter<Entry, RouteT> {
  std::size_t Collision(std::string_view key) const {
    return route_internal::ObjectRouteIndexTestPeer::BucketIndex(this->route,
                                                                 key);
  }
  ChurnStats Stats() const {
    const RouteDiagnostics d = this->route.Diagnostics();
    return ChurnStats{d.publications, d.copied_bytes + d.resize_copied_bytes,
                      d.retired_bytes_total, d.bucket_count};
  }
};

struct EpochImpl : CallbackRouteImpl<ObjectRouteIndex<Entry>> {
  static constexpr const char* kName = "epoch";
};

struct OwningImpl : CallbackRouteImpl<LockedRoute<Entry>> {
  static constexpr const char* kName = "owning";
};

// The epoch route without the staged batch loop (decides whether staging
// earns its place).
struct EpochUnstagedImpl : EpochImpl {
  static constexpr const char* kName = "epoch_unstaged";
  void ReadBatch(std::span<const std::string_view> keys,
                 std::uint64_t* sink) const {
    route_internal::ObjectRouteIndexTestPeer::WithEntriesUnstaged(
        route, keys, [&](std::size_t, Entry* e) { ReadWork(e, sink); });
  }
  void WriteBatch(std::span<const std::string_view> keys,
                  std::int64_t now) const {
    route_internal::ObjectRouteIndexTestPeer::WithEntriesUnstaged(
        route, keys, [&](std::size_t, Entry* e) { WriteWork(e, now); });
  }
};

// The staged batch loop with another window (the sweep behind
// ObjectRouteIndex::kBatchWindow).
template <std::size_t kWindow>
struct EpochWindowImpl : EpochImpl {
  void ReadBatch(std::span<const std::string_view> keys,
                 std::uint64_t* sink) const {
    route_internal::ObjectRouteIndexTestPeer::WithEntriesWindow<kWindow>(
        route, keys, [&](std::size_t, Entry* e) { ReadWork(e, sink); });
  }
  void WriteBatch(std::span<const std::string_view> keys,
                  std::int64_t now) const {
    route_internal::ObjectRouteIndexTestPeer::WithEntriesWindow<kWindow>(
        route, keys, [&](std::size_t, Entry* e) { WriteWork(e, now); });
  }
};

struct ShardImpl : bench::ShardAdapter<Entry> {
  std::size_t Collision(std::string_view key) const {
    return route.ShardIndex(key);
  }
  ChurnStats Stats() const { return ChurnStats{}; }
};

// W1 and W2 only: one lock per tenant has no bucket to collide in (W3).
using ObjectIndexImpl = bench::ObjectIndexAdapter<Entry>;

// One built instance per (implementation, population): the population plus,
// for an implementation with buckets or shards, kHotKeys extra keys that all
// collide in one of them (and so in its writer stripe), for W3.
template <typename Impl>
struct Built {
  std::unique_ptr<Impl> impl = std::make_unique<Impl>();
  std::vector<std::string> hot_keys;
  std::vector<Owner> hot_entries;
};

template <typename Impl>
Built<Impl>& GetBuilt(std::size_t n) {
  static std::mutex mu;
  static std::map<std::size_t, std::unique_ptr<Built<Impl>>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[n];
  if (!slot) {
    bench::Progress("building %s with %zu objects", Impl::kName, n);
    slot = std::make_unique<Built<Impl>>();
    const std::vector<std::string>& keys = GetPopulation(n).keys;
    const std::vector<Owner>& entries = GetPopulation(n).entries;
    for (std::size_t i = 0; i < n; ++i) {
      if (!slot->impl->Publish(keys[i], entries[i])) std::abort();
    }
    if constexpr (requires { slot->impl->Collision(""); }) {
      const std::size_t target = slot->impl->Collision(MakeKey(0, "hot/"));
      for (std::uint64_t i = 0; slot->hot_keys.size() < kHotKeys; ++i) {
        std::string key = MakeKey(i, "hot/");
        if (slot->impl->Collision(key) != target) continue;
        slot->hot_entries.push_back(std::make_shared<Entry>(n + 1 + i, key));
        if (!slot->impl->Publish(key, slot->hot_entries.back())) std::abort();
        slot->hot_keys.push_back(std::move(key));
      }
    }
  }
  return *slot;
}

template <typename Impl>
void BM_RouteW1(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  Built<Impl>& built = GetBuilt<Impl>(n);
  const std::vector<std::string>& keys = GetPopulation(n).keys;
  Rng rng{0x1234567ULL +
          977 * static_cast<std::uint64_t>(state.thread_index())};
  std::uint64_t sink = 0;
  for (auto _ : state) built.impl->ReadOne(keys[rng.Next() % n], &sink);
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}

// Read and write batches of 32 uniform keys, alternating. The loop stays
// this driver's own (the peers' W4 loop also times each batch): sharing it
// changed what GCC inlines into it, and so the instructions W2 and W3 run.
template <typename Impl>
void RunBatches(benchmark::State& state, Impl& impl,
                const std::vector<std::string>& keys) {
  Rng rng{0x7654321ULL +
          1009 * static_cast<std::uint64_t>(state.thread_index())};
  std::string_view batch[kBatch];
  std::uint64_t sink = 0;
  std::int64_t now = 0;
  bool write = state.thread_index() % 2 == 1;
  for (auto _ : state) {
    for (auto& k : batch) k = keys[rng.Next() % keys.size()];
    if (write) {
      impl.WriteBatch(batch, ++now);
    } else {
      impl.ReadBatch(batch, &sink);
    }
    write = !write;
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations() * kBatch);
}

template <typename Impl>
void BM_RouteW2(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  RunBatches(state, *GetBuilt<Impl>(n).impl, GetPopulation(n).keys);
}

template <typename Impl>
void BM_RouteW3(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  Built<Impl>& built = GetBuilt<Impl>(n);
  RunBatches(state, *built.impl, built.hot_keys);
}

// W5 membership churn: each iteration creates one fresh object and deletes
// the one created kLag iterations earlier, on top of the population. Each
// pair is timed (steady clock, both implementations alike) for the p99; the
// route's counters give copied and retired bytes per publication over the
// run (a create and a delete are one publication each).
template <typename Impl>
void BM_RouteW5(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  Impl& impl = *GetBuilt<Impl>(n).impl;
  constexpr std::size_t kLag = 256;
  std::vector<Owner> ring(kLag);
  std::vector<std::uint32_t> pair_ns;
  pair_ns.reserve(1 << 20);
  std::uint64_t next = (std::uint64_t{1} << 40) +
                       (static_cast<std::uint64_t>(state.thread_index()) << 32);
  std::size_t i = 0;
  const ChurnStats before = impl.Stats();
  for (auto _ : state) {
    Owner& slot = ring[i++ % kLag];
    Owner fresh = std::make_shared<Entry>(next, MakeKey(next, "churn/"));
    ++next;
    const auto start = std::chrono::steady_clock::now();
    if (slot != nullptr && !impl.Erase(slot))
      state.SkipWithError("erase failed");
    if (!impl.Publish(fresh->key, fresh)) state.SkipWithError("publish failed");
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    if (pair_ns.size() < pair_ns.capacity())
      pair_ns.push_back(static_cast<std::uint32_t>(ns));
    slot = std::move(fresh);
  }
  const ChurnStats after = impl.Stats();
  for (Owner& o : ring) {
    if (o != nullptr) impl.Erase(o);
  }
  state.SetItemsProcessed(state.iterations() * 2);  // a create and a delete
  if (!pair_ns.empty()) {
    std::sort(pair_ns.begin(), pair_ns.end());
    state.counters["p99_pair_ns"] = benchmark::Counter(
        pair_ns[pair_ns.size() * 99 / 100], benchmark::Counter::kAvgThreads);
  }
  if (state.thread_index() == 0) {
    const double pubs =
        static_cast<double>(after.publications - before.publications);
    state.counters["copied_bytes_per_pub"] =
        pubs > 0 ? (after.copied_bytes - before.copied_bytes) / pubs : 0.0;
    state.counters["retired_bytes_per_pub"] =
        pubs > 0 ? (after.retired_bytes - before.retired_bytes) / pubs : 0.0;
    state.counters["buckets"] = static_cast<double>(after.buckets);
  }
}

// Bucket-count sweep for docs/route.md: point reads at 1M objects with
// 2^k buckets, plus the route's bytes and the bytes a publication copies.
void BM_RouteBucketSweep(benchmark::State& state) {
  const std::size_t buckets = std::size_t{1} << state.range(0);
  const std::size_t n = 1'000'000;
  const std::vector<std::string>& keys = GetPopulation(n).keys;
  const std::vector<Owner>& entries = GetPopulation(n).entries;
  static std::mutex mu;
  static std::map<std::size_t, std::unique_ptr<ObjectRouteIndex<Entry>>> cache;
  ObjectRouteIndex<Entry>* route;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto& slot = cache[buckets];
    if (!slot) {
      RouteOptions options;
      options.bucket_count = buckets;
      options.fixed_bucket_count = true;
      slot = std::make_unique<ObjectRouteIndex<Entry>>(options);
      for (std::size_t i = 0; i < n; ++i) {
        if (!slot->Publish(keys[i], entries[i]).ok()) std::abort();
      }
    }
    route = slot.get();
  }
  Rng rng{0xabcdefULL + static_cast<std::uint64_t>(state.thread_index())};
  std::uint64_t sink = 0;
  for (auto _ : state) {
    route->WithEntry(keys[rng.Next() % n],
                     [&](Entry* e) { ReadWork(e, &sink); });
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
  const RouteDiagnostics d = route->Diagnostics();
  state.counters["route_bytes_per_object"] =
      static_cast<double>(d.snapshot_bytes + buckets * sizeof(void*)) / n;
  state.counters["copied_bytes_per_publish"] =
      static_cast<double>(d.snapshot_bytes) /
      static_cast<double>(d.nonempty_buckets);
  state.counters["max_bucket_entries"] =
      static_cast<double>(d.max_bucket_entries);
  // Churn outside the timed loop: create + delete pairs on top of the
  // population, as W5 does, timed with the steady clock.
  constexpr int kPairs = 20000;
  std::vector<Owner> fresh;
  fresh.reserve(kPairs);
  for (int i = 0; i < kPairs; ++i) {
    const std::uint64_t id = (std::uint64_t{1} << 41) + i;
    fresh.push_back(std::make_shared<Entry>(id, MakeKey(id, "sweep/")));
  }
  const auto start = std::chrono::steady_clock::now();
  for (const Owner& o : fresh) {
    if (!route->Publish(o->key, o).ok()) std::abort();
    if (!route->EraseIfMatch(o->key, o->id(), o.get()).ok()) std::abort();
  }
  const double ns = std::chrono::duration<double, std::nano>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  state.counters["churn_ns_per_create_delete"] = ns / kPairs;
}
BENCHMARK(BM_RouteBucketSweep)->DenseRange(12, 20, 2)->UseRealTime();

// W8: heap bytes per empty GroupDirectory with default options, measured
// as glibc's in-use bytes (mallinfo2, so allocator overhead included) around
// building 1,000 of them. Two cases: `shared_domain` passes one route epoch
// domain to every directory (RouteOptions::epoch_domain, the setup of a host
// with many tenants), `own_domain` lets each route own its domain. The
// counter `after_first_create` is the bytes per directory once each holds
// one object: the first create makes the lifecycle stripes (an empty
// directory has none) and the object itself.
struct Directories {
  std::vector<std::unique_ptr<GroupDirectory<>>> dirs;
  double bytes_per_directory = 0;
};

// 1,000 directories (on `domain` if not null) and the heap bytes per
// directory their building added, the vector holding them left out; with
// `first_object` each creates one object as soon as it is made.
Directories MakeDirectories(EpochDomain* domain, bool first_object) {
  constexpr int kDirectories = 1000;
  Directories made;
  const std::size_t before = mallinfo2().uordblks;
  made.dirs.reserve(kDirectories);
  const std::size_t vector_bytes = mallinfo2().uordblks - before;
  for (int i = 0; i < kDirectories; ++i) {
    DirectoryOptions options;
    options.tenant_instance = static_cast<TenantInstanceId>(i + 1);
    if (domain != nullptr) options.route.epoch_domain = domain;
    made.dirs.push_back(std::make_unique<GroupDirectory<>>(options));
    if (first_object && !made.dirs.back()->Create("first-object").ok()) {
      std::abort();
    }
  }
  made.bytes_per_directory =
      static_cast<double>(mallinfo2().uordblks - before - vector_bytes) /
      kDirectories;
  return made;
}

void BM_DirectoryW8(benchmark::State& state) {
  EpochDomain domain;
  EpochDomain* const shared = state.range(0) == 1 ? &domain : nullptr;
  double per_directory = 0;
  for (auto _ : state) {
    Directories made = MakeDirectories(shared, /*first_object=*/false);
    per_directory = made.bytes_per_directory;
    state.PauseTiming();
    made.dirs.clear();
    state.ResumeTiming();
  }
  state.counters["bytes_per_directory"] = per_directory;
  state.counters["after_first_create"] =
      MakeDirectories(shared, /*first_object=*/true).bytes_per_directory;
  state.counters["route_bytes"] =
      static_cast<double>(sizeof(ObjectRouteIndex<ObjectEntry<>>));
}
BENCHMARK(BM_DirectoryW8)
    ->ArgName("shared_domain")
    ->Arg(1)
    ->Arg(0)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

void Configure(benchmark::internal::Benchmark* b) {
  b->Arg(100'000)
      ->Arg(1'000'000)
      ->Threads(1)
      ->Threads(2)
      ->Threads(8)
      ->UseRealTime();
}

#define CAIRN_ROUTE_BENCH(W, Impl, name) \
  BENCHMARK_TEMPLATE(BM_Route##W, Impl)  \
      ->Name("BM_Route" #W "/" name)     \
      ->Apply(Configure)

CAIRN_ROUTE_BENCH(W1, EpochImpl, "epoch");
CAIRN_ROUTE_BENCH(W1, ShardImpl, "shard");
CAIRN_ROUTE_BENCH(W1, ObjectIndexImpl, "object_index");
CAIRN_ROUTE_BENCH(W2, EpochImpl, "epoch");
CAIRN_ROUTE_BENCH(W2, EpochUnstagedImpl, "epoch_unstaged");
CAIRN_ROUTE_BENCH(W2, EpochWindowImpl<8>, "epoch_window8");
CAIRN_ROUTE_BENCH(W2, EpochWindowImpl<16>, "epoch_window16");
CAIRN_ROUTE_BENCH(W2, ShardImpl, "shard");
CAIRN_ROUTE_BENCH(W2, ObjectIndexImpl, "object_index");
CAIRN_ROUTE_BENCH(W3, EpochImpl, "epoch");
CAIRN_ROUTE_BENCH(W3, ShardImpl, "shard");
// W5 at 100k, 1M and 10M (the 10M population takes several GiB: the gate
// runner asks for it only with --full).
void ConfigureChurn(benchmark::internal::Benchmark* b) {
  b->Arg(100'000)
      ->Arg(1'000'000)
      ->Arg(10'000'000)
      ->Threads(1)
      ->Threads(2)
      ->UseRealTime();
}
BENCHMARK_TEMPLATE(BM_RouteW5, EpochImpl)
    ->Name("BM_RouteW5/epoch")
    ->Apply(ConfigureChurn);
BENCHMARK_TEMPLATE(BM_RouteW5, ShardImpl)
    ->Name("BM_RouteW5/shard")
    ->Apply(ConfigureChurn);
CAIRN_ROUTE_BENCH(W1, OwningImpl, "owning");
CAIRN_ROUTE_BENCH(W2, OwningImpl, "owning");
CAIRN_ROUTE_BENCH(W3, OwningImpl, "owning");

}  // namespace
}  // namespace cairn

BENCHMARK_MAIN();
