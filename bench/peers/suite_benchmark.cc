// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The suite's route-level comparisons with peers and baselines, written
// against the route concept (cairn/route/route_concept.h) so they measure
// whatever route the library ships as ObjectRouteIndex. Every implementation
// does the same per-object work (bench/common/entry.h): the object's own
// reader-writer lock, then a metadata read (shared) or a version bump and
// lease extension (exclusive). 64-byte keys. W1 and W2 (uniform point reads
// and batches against shard and object_index) are measured once, in
// bench/route.
//   W6  Zipf 0.99 point ops, read:95 (YCSB B) and read:50 (YCSB A)
//       epoch, shard, object_index and the peers compiled in: tbb
//       (tbb::concurrent_hash_map), lfht (liburcu cds_lfht, urcu-memb),
//       cuckoo (libcuckoo)
//   W4  flat (the route: key -> object) vs two_level (key -> group, then a
//       member lookup by string key): point reads, same-group and
//       cross-group batch R/W 1:1, group sizes 8, 32, 128
//   W8  RSS per object of flat vs two_level with a group-size mix (a quarter
//       of the objects each in groups of 1, 8, 32 and 128), from
//       /proc/self/status around the population phase; run one
//       implementation per process (the runner does).
// Batches record their latency in a histogram (p50_ns, p99_ns counters).
// Population: CAIRN_SUITE_POPULATION (default 1M).

#include <malloc.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/baselines/two_level_route.h"
#include "bench/common/driver.h"
#include "bench/common/entry.h"
#include "bench/common/keys.h"
#include "bench/common/latency.h"
#include "bench/common/random.h"
#include "bench/common/route_impls.h"
#include "cairn/route/object_route_index.h"
#include "cairn/route/route_concept.h"

#if CAIRN_SUITE_HAVE_TBB
#include <oneapi/tbb/concurrent_hash_map.h>
#endif
#if CAIRN_SUITE_HAVE_LFHT
#include "bench/peers/lfht_peer.h"
#endif
#if CAIRN_SUITE_HAVE_CUCKOO
#include <libcuckoo/cuckoohash_map.hh>
#endif

namespace cairn::bench {
namespace {

// Local to this file, so everything instantiated over the entry keeps
// internal linkage (bench/common/entry.h says why).
struct Local {};
using Entry = BenchEntry<Local>;
using Owner = std::shared_ptr<Entry>;

// --- implementations: one adapter each --------------------------------------

struct EpochImpl : RouteAdapter<Entry, ObjectRouteIndex<Entry>> {
  static constexpr const char* kName = "epoch";
};
using ShardImpl = ShardAdapter<Entry>;
using ObjectIndexImpl = ObjectIndexAdapter<Entry>;

// Peers do point operations only (W6; a batch goes key by key); each keeps
// the entry alive the way it is built to: an element read lock (TBB's
// const_accessor), an RCU read-side section (cds_lfht), the bucket locks of
// find_fn (libcuckoo).
#if CAIRN_SUITE_HAVE_TBB
struct TbbHashCompare {
  using is_transparent = void;
  std::size_t hash(std::string_view k) const {
    return base_internal::RouteHash(k);
  }
  bool equal(std::string_view a, std::string_view b) const { return a == b; }
};
struct TbbImpl : BatchesByPoint<TbbImpl> {
  static constexpr const char* kName = "tbb";
  using Map = tbb::concurrent_hash_map<std::string, Owner, TbbHashCompare>;
  mutable Map map;
  bool Publish(const std::string& key, const Owner& owner) {
    return map.insert({key, owner});
  }
  void ReadOne(std::string_view key, std::uint64_t* sink) const {
    Map::const_accessor a;
    ReadWork(map.find(a, key) ? a->second.get() : nullptr, sink);
  }
  void WriteOne(std::string_view key, std::int64_t now) const {
    Map::const_accessor a;  // metadata write: the map entry is unchanged
    WriteWork(map.find(a, key) ? a->second.get() : nullptr, now);
  }
};
#endif

#if CAIRN_SUITE_HAVE_LFHT
struct LfhtImpl : BatchesByPoint<LfhtImpl> {
  static constexpr const char* kName = "lfht";
  LfhtPeer table{PopulationSize()};
  static void ThreadEnter() { LfhtPeer::RegisterThread(); }
  static void ThreadExit() { LfhtPeer::UnregisterThread(); }
  bool Publish(const std::string& key, const Owner& owner) {
    return table.Insert(key, owner.get());  // Entries() keeps it alive
  }
  void ReadOne(std::string_view key, std::uint64_t* sink) const {
    LfhtPeer::ReadLock();
    ReadWork(static_cast<Entry*>(table.Lookup(key)), sink);
    LfhtPeer::ReadUnlock();
  }
  void WriteOne(std::string_view key, std::int64_t now) const {
    LfhtPeer::ReadLock();
    WriteWork(static_cast<Entry*>(table.Lookup(key)), now);
    LfhtPeer::ReadUnlock();
  }
};
#endif

#if CAIRN_SUITE_HAVE_CUCKOO
struct CuckooImpl : BatchesByPoint<CuckooImpl> {
  static constexpr const char* kName = "cuckoo";
  using Map =
      libcuckoo::cuckoohash_map<std::string, Owner, base_internal::KeyHash,
                                base_internal::KeyEq>;
  Map map;
  bool Publish(const std::string& key, const Owner& owner) {
    return map.insert(key, owner);
  }
  void ReadOne(std::string_view key, std::uint64_t* sink) const {
    if (!map.find_fn(key, [&](const Owner& e) { ReadWork(e.get(), sink); })) {
      ReadWork(static_cast<const Entry*>(nullptr), sink);
    }
  }
  void WriteOne(std::string_view key, std::int64_t now) const {
    if (!map.find_fn(key, [&](const Owner& e) { WriteWork(e.get(), now); })) {
      WriteWork(static_cast<Entry*>(nullptr), now);
    }
  }
};
#endif

// One built instance per implementation and process, over the population:
// published key by key, or by Build(keys, entries) for an implementation
// that builds groups (two_level).
template <typename Impl>
const Impl& GetBuilt() {
  static std::mutex mu;
  // Torn down by main after the benchmarks (AtEnd); Entries() outlives it.
  static std::unique_ptr<Impl> built;
  std::lock_guard<std::mutex> lock(mu);
  if (built == nullptr) {
    const std::size_t n = PopulationSize();
    const std::vector<std::string>& keys = Keys(n);
    const std::vector<Owner>& entries = Entries<Entry>(n);
    Progress("building %s with %zu objects", Impl::kName, n);
    built = std::make_unique<Impl>();
    AtEnd([] { built.reset(); });
    if constexpr (requires { built->Build(keys, entries); }) {
      if (!built->Build(keys, entries)) std::abort();
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        if (!built->Publish(keys[i], entries[i])) std::abort();
      }
    }
  }
  return *built;
}

// Alternating read and write batches of 32 keys; `pick` fills a batch.
template <typename Impl, typename Pick>
void RunBatches(benchmark::State& state, const Impl& impl, Pick&& pick) {
  static LatencyRecorder recorder;
  Histogram histogram;
  recorder.Start(state);
  std::string_view batch[kBatch];
  std::uint64_t sink = 0;
  std::int64_t now = 0;
  bool write = state.thread_index() % 2 == 1;
  for (auto _ : state) {
    pick(batch);
    const std::uint64_t start = NowNanos();
    if (write) {
      impl.WriteBatch(batch, ++now);
    } else {
      impl.ReadBatch(batch, &sink);
    }
    histogram.Add(NowNanos() - start);
    write = !write;
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations() * kBatch);
  recorder.Finish(state, histogram);
}

// range(0): read percent. Zipf 0.99 point operations.
template <typename Impl>
void BM_SuiteW6(benchmark::State& state) {
  ThreadScope<Impl> scope;
  const auto read_pct = static_cast<std::uint64_t>(state.range(0));
  const std::size_t n = PopulationSize();
  const Impl& impl = GetBuilt<Impl>();
  const std::vector<std::string>& keys = Keys(n);
  const std::vector<std::uint32_t>& stream =
      KeyStream(n, /*zipf=*/true, state.thread_index());
  Rng rng{0xfeedULL + 131 * static_cast<std::uint64_t>(state.thread_index())};
  std::size_t pos = rng.Below(kStreamLength);
  std::uint64_t sink = 0;
  std::int64_t now = 0;
  for (auto _ : state) {
    const std::string_view key = keys[stream[pos]];
    pos = (pos + 1) & (kStreamLength - 1);
    if (rng.Below(100) < read_pct) {
      impl.ReadOne(key, &sink);
    } else {
      impl.WriteOne(key, ++now);
    }
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}

// --- W4: flat vs two_level ---------------------------------------------------

// Object i belongs to group i / g; the flat side is the library route built
// for W6 (the grouping only decides which keys a batch takes).
template <std::size_t kGroupSize>
struct TwoLevelImpl
    : CallbackAccess<Entry, TwoLevelRoute<Entry, ObjectRouteIndex>,
                     TwoLevelImpl<kGroupSize>> {
  static constexpr const char* kName = "two_level";
  bool Build(const std::vector<std::string>& keys,
             const std::vector<Owner>& entries) {
    const std::size_t n = keys.size();
    for (std::size_t first = 0; first < n; first += kGroupSize) {
      auto group = this->route.MakeGroup(kGroupSize);
      for (std::size_t i = first; i < std::min(n, first + kGroupSize); ++i) {
        if (!this->route.Join(group, keys[i], entries[i])) return false;
      }
    }
    return true;
  }
};

template <typename Impl, std::size_t kGroupSize>
void BM_SuiteW4Point(benchmark::State& state) {
  const std::size_t n = PopulationSize();
  const Impl& impl = GetBuilt<Impl>();
  const std::vector<std::string>& keys = Keys(n);
  Rng rng{0x4444ULL + 977 * static_cast<std::uint64_t>(state.thread_index())};
  std::uint64_t sink = 0;
  for (auto _ : state) impl.ReadOne(keys[rng.Below(n)], &sink);
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}

template <typename Impl, std::size_t kGroupSize>
void BM_SuiteW4Same(benchmark::State& state) {
  const std::size_t n = PopulationSize();
  const Impl& impl = GetBuilt<Impl>();
  const std::vector<std::string>& keys = Keys(n);
  const std::size_t groups = n / kGroupSize;
  Rng rng{0x5555ULL + 977 * static_cast<std::uint64_t>(state.thread_index())};
  RunBatches(state, impl, [&](std::string_view* batch) {
    const std::size_t first = rng.Below(groups) * kGroupSize;
    for (std::size_t i = 0; i < kBatch; ++i) {
      batch[i] = keys[first + rng.Below(kGroupSize)];
    }
  });
}

template <typename Impl, std::size_t kGroupSize>
void BM_SuiteW4Cross(benchmark::State& state) {
  const std::size_t n = PopulationSize();
  const Impl& impl = GetBuilt<Impl>();
  const std::vector<std::string>& keys = Keys(n);
  Rng rng{0x6666ULL + 977 * static_cast<std::uint64_t>(state.thread_index())};
  RunBatches(state, impl, [&](std::string_view* batch) {
    for (std::size_t i = 0; i < kBatch; ++i) batch[i] = keys[rng.Below(n)];
  });
}

// --- W8: RSS per object -----------------------------------------------------

// The group-size mix: a quarter of the objects each in groups of 1, 8, 32
// and 128 (the last group of a quarter may be smaller).
std::size_t GroupSizeAt(std::size_t i, std::size_t n) {
  static constexpr std::size_t kSizes[] = {1, 8, 32, 128};
  return kSizes[std::min<std::size_t>(3, i * 4 / n)];
}

// Calls make_group(size) for each group, then member(group, i) per object.
template <typename MakeGroup, typename Member>
void ForEachGroup(std::size_t n, MakeGroup&& make_group, Member&& member) {
  std::size_t i = 0;
  while (i < n) {
    const std::size_t size = std::min(GroupSizeAt(i, n), n - i);
    auto group = make_group(size);
    for (std::size_t end = i + size; i < end; ++i) member(group, i);
  }
}

// Flat: the route maps every key to its object; a group keeps only a list of
// its members (as the directory's group catalog does), a singleton none.
struct FlatW8 {
  static constexpr const char* kName = "flat";
  struct Group {
    std::vector<Entry*> members;
  };
  ObjectRouteIndex<Entry> route{RouteOptions{}};
  std::vector<std::unique_ptr<Group>> groups;
  void Build(const std::vector<std::string>& keys) {
    ForEachGroup(
        keys.size(),
        [&](std::size_t size) -> Group* {
          if (size == 1) return nullptr;
          groups.push_back(std::make_unique<Group>());
          groups.back()->members.reserve(size);
          return groups.back().get();
        },
        [&](Group* g, std::size_t i) {
          auto e = std::make_shared<Entry>(i + 1, keys[i]);
          if (g != nullptr) g->members.push_back(e.get());
          if (!route.Publish(keys[i], std::move(e), nullptr).ok()) std::abort();
        });
  }
};

struct TwoLevelW8 {
  static constexpr const char* kName = "two_level";
  TwoLevelRoute<Entry, ObjectRouteIndex> route;
  void Build(const std::vector<std::string>& keys) {
    ForEachGroup(
        keys.size(), [&](std::size_t size) { return route.MakeGroup(size); },
        [&](const auto& g, std::size_t i) {
          if (!route.Join(g, keys[i],
                          std::make_shared<Entry>(i + 1, keys[i]))) {
            std::abort();
          }
        });
  }
};

template <typename Impl>
void BM_SuiteW8(benchmark::State& state) {
  const std::size_t n = PopulationSize();
  const std::vector<std::string>& keys = Keys(n);
  for (auto _ : state) {
    malloc_trim(0);
    const std::uint64_t before = RssBytes();
    const std::uint64_t heap_before = mallinfo2().uordblks;
    Progress("W8: building %s with %zu objects", Impl::kName, n);
    auto impl = std::make_unique<Impl>();
    impl->Build(keys);
    // Snapshots the build retired are garbage, not the structure's size:
    // with no reader left, a few reclaim passes free them.
    for (int i = 0; i < 64 && impl->route.Diagnostics().retired_bytes > 0;
         ++i) {
      impl->route.ReclaimIfDue();
    }
    state.counters["retired_bytes_left"] =
        static_cast<double>(impl->route.Diagnostics().retired_bytes);
    malloc_trim(0);
    const std::uint64_t after = RssBytes();
    // Heap bytes in use: the same growth without the allocator's free holes
    // (RSS depends on how the build's freed snapshots fragmented the heap).
    state.counters["heap_bytes_per_object"] =
        static_cast<double>(mallinfo2().uordblks - heap_before) /
        static_cast<double>(n);
    const double per_object =
        static_cast<double>(after - before) / static_cast<double>(n);
    state.counters["rss_bytes_per_object"] = per_object;
    state.counters["rss_per_1m_objects"] = per_object * 1e6;
    state.PauseTiming();
    impl.reset();  // destruction is not measured
    state.ResumeTiming();
  }
}

// --- self-check -------------------------------------------------------------

// Run by the gate runner before the gates; they are skipped, with the
// failure, if an adapter answers wrong.
void BM_SuiteSelfCheck(benchmark::State& state) {
  RunRouteSelfCheck<Entry, EpochImpl, ShardImpl, ObjectIndexImpl,
#if CAIRN_SUITE_HAVE_TBB
                    TbbImpl,
#endif
#if CAIRN_SUITE_HAVE_LFHT
                    LfhtImpl,
#endif
#if CAIRN_SUITE_HAVE_CUCKOO
                    CuckooImpl,
#endif
                    TwoLevelImpl<8>>(state);
}
BENCHMARK(BM_SuiteSelfCheck)->Iterations(1);

// --- registration ------------------------------------------------------------

void Sweep(benchmark::internal::Benchmark* b) {
  b->Threads(1)->Threads(2)->Threads(8)->UseRealTime();
}
void W6Args(benchmark::internal::Benchmark* b) {
  b->ArgName("read")->Arg(95)->Arg(50);
  Sweep(b);
}

#define CAIRN_SUITE_W6(Impl, name) \
  BENCHMARK_TEMPLATE(BM_SuiteW6, Impl)->Name("BM_SuiteW6/" name)->Apply(W6Args)

CAIRN_SUITE_W6(EpochImpl, "epoch");
CAIRN_SUITE_W6(ShardImpl, "shard");
CAIRN_SUITE_W6(ObjectIndexImpl, "object_index");
#if CAIRN_SUITE_HAVE_TBB
BENCHMARK_TEMPLATE(BM_SuiteW6, TbbImpl)->Name("BM_SuiteW6/tbb")->Apply(W6Args);
#endif
#if CAIRN_SUITE_HAVE_LFHT
BENCHMARK_TEMPLATE(BM_SuiteW6, LfhtImpl)
    ->Name("BM_SuiteW6/lfht")
    ->Apply(W6Args);
#endif
#if CAIRN_SUITE_HAVE_CUCKOO
BENCHMARK_TEMPLATE(BM_SuiteW6, CuckooImpl)
    ->Name("BM_SuiteW6/cuckoo")
    ->Apply(W6Args);
#endif

#define CAIRN_SUITE_W4(W, g)                            \
  BENCHMARK_TEMPLATE(BM_SuiteW4##W, EpochImpl, g)       \
      ->Name("BM_SuiteW4" #W "/flat/g:" #g)             \
      ->Apply(Sweep);                                   \
  BENCHMARK_TEMPLATE(BM_SuiteW4##W, TwoLevelImpl<g>, g) \
      ->Name("BM_SuiteW4" #W "/two_level/g:" #g)        \
      ->Apply(Sweep)

CAIRN_SUITE_W4(Point, 32);
CAIRN_SUITE_W4(Same, 8);
CAIRN_SUITE_W4(Same, 32);
CAIRN_SUITE_W4(Same, 128);
CAIRN_SUITE_W4(Cross, 8);
CAIRN_SUITE_W4(Cross, 32);
CAIRN_SUITE_W4(Cross, 128);

BENCHMARK_TEMPLATE(BM_SuiteW8, FlatW8)
    ->Name("BM_SuiteW8/flat")
    ->Iterations(1)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_SuiteW8, TwoLevelW8)
    ->Name("BM_SuiteW8/two_level")
    ->Iterations(1)
    ->UseRealTime();

}  // namespace
}  // namespace cairn::bench

int main(int argc, char** argv) {
  return cairn::bench::RunBenchmarksThenTearDown(argc, argv);
}
