// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Directory-level gates: the product's own path. GroupDirectory's
// WithObject / WithObjectExclusive / WithObjects / WithObjectsExclusive on a
// real payload (two replica descriptors on the heap, as a store's object
// metadata holds) against `shard_directory` (bench/baselines/
// shard_directory.h: the shard lock held while the per-object work runs).
// Both do the same per-object work:
//   read   size + version + the first replica's size (a load from the
//          payload's heap block)
//   write  bump the first replica's status and set the size (which bumps the
//          version)
// Workloads (YCSB shapes): keys uniform or Zipf 0.99 (scrambled), reads
// 100% (C), 95% (B) or 50% (A), point operations or 32-key batches (one
// batch is all reads or all writes, drawn with the read share). Batches
// record their latency in a histogram (p50_ns, p99_ns, p999_ns counters),
// and read and write batches each in one of their own (read_p99_ns,
// write_p99_ns, ...), as the read-path RFC reported them.
// Names: BM_Dir/<impl>/zipf:<0|1>/read:<pct>/batch:<1|32>/real_time/
// threads:<t>. Population: CAIRN_SUITE_POPULATION (default 1M).

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

#include "bench/baselines/shard_directory.h"
#include "bench/common/driver.h"
#include "bench/common/keys.h"
#include "bench/common/latency.h"
#include "bench/common/random.h"
#include "bench/directory/object_payload.h"
#include "cairn/directory/group_directory.h"

namespace cairn::bench {
namespace {

template <typename V>
inline void ReadWork(const V& view, std::uint64_t* sink) {
  *sink +=
      view.size_bytes() + view.version() + view.payload().replicas.front().size;
}
template <typename A>
inline void WriteWork(A& access) {
  Replica& r = access.payload().replicas.front();
  r.status = (r.status + 1) & 3;
  access.set_size_bytes(access.size_bytes() ^ 1);
}

// --- implementations ---------------------------------------------------------

struct DirectoryImpl {
  static constexpr const char* kName = "directory";
  GroupDirectory<ObjectPayload> dir;

  bool Create(std::string_view key, std::uint64_t i,
              std::uint64_t size = 4096) {
    CreateOptions options;
    options.size_bytes = size;
    return dir.Create(key, options, MakePayload(i)).ok();
  }
  void ReadOne(std::string_view key, std::uint64_t* sink) const {
    (void)dir.WithObject(
        key, [&](const ObjectView<ObjectPayload>& v) { ReadWork(v, sink); });
  }
  void WriteOne(std::string_view key) const {
    (void)dir.WithObjectExclusive(
        key, [&](ObjectAccess<ObjectPayload>& a) { WriteWork(a); });
  }
  void ReadBatch(std::span<const std::string_view> keys,
                 std::uint64_t* sink) const {
    (void)dir.WithObjects(
        keys, [&](std::size_t, StatusCode, const ObjectView<ObjectPayload>* v) {
          if (v != nullptr) ReadWork(*v, sink);
        });
  }
  void WriteBatch(std::span<const std::string_view> keys) const {
    (void)dir.WithObjectsExclusive(
        keys, [&](std::size_t, StatusCode, ObjectAccess<ObjectPayload>* a) {
          if (a != nullptr) WriteWork(*a);
        });
  }
};

struct ShardDirectoryImpl {
  static constexpr const char* kName = "shard_directory";
  using Dir = ShardDirectory<ObjectPayload>;
  mutable Dir dir;

  bool Create(std::string_view key, std::uint64_t i,
              std::uint64_t size = 4096) {
    return dir.Create(key, size, MakePayload(i));
  }
  void ReadOne(std::string_view key, std::uint64_t* sink) const {
    (void)dir.WithObject(key, [&](const Dir::View& v) { ReadWork(v, sink); });
  }
  void WriteOne(std::string_view key) const {
    (void)dir.WithObjectExclusive(key, [&](Dir::Access& a) { WriteWork(a); });
  }
  void ReadBatch(std::span<const std::string_view> keys,
                 std::uint64_t* sink) const {
    dir.WithObjects(keys, [&](std::size_t, const Dir::View* v) {
      if (v != nullptr) ReadWork(*v, sink);
    });
  }
  void WriteBatch(std::span<const std::string_view> keys) const {
    dir.WithObjectsExclusive(keys, [&](std::size_t, Dir::Access* a) {
      if (a != nullptr) WriteWork(*a);
    });
  }
};

// One built instance per implementation and process.
template <typename Impl>
const Impl& GetBuilt() {
  static std::mutex mu;
  static std::unique_ptr<Impl> built;
  std::lock_guard<std::mutex> lock(mu);
  if (!built) {
    const std::size_t n = PopulationSize();
    const std::vector<std::string>& keys = Keys(n);
    Progress("building %s with %zu objects", Impl::kName, n);
    built = std::make_unique<Impl>();
    AtEnd([] { built.reset(); });
    for (std::size_t i = 0; i < n; ++i) {
      if (!built->Create(keys[i], i)) {
        std::fprintf(stderr, "create of key %zu failed\n", i);
        std::abort();
      }
    }
  }
  return *built;
}

// range(0): Zipf 0.99 (1) or uniform (0); range(1): read percent;
// range(2): batch size (1: point operations).
template <typename Impl>
void BM_Dir(benchmark::State& state) {
  const bool zipf = state.range(0) != 0;
  const auto read_pct = static_cast<std::uint64_t>(state.range(1));
  const auto batch = static_cast<std::size_t>(state.range(2));
  const std::size_t n = PopulationSize();
  const Impl& impl = GetBuilt<Impl>();
  const std::vector<std::string>& keys = Keys(n);
  const std::vector<std::uint32_t>& stream =
      KeyStream(n, zipf, state.thread_index());
  Rng rng{0xd1b54a32d192ed03ULL +
          31 * static_cast<std::uint64_t>(state.thread_index())};
  std::size_t pos = rng.Below(kStreamLength);
  std::uint64_t sink = 0;
  static LatencyRecorder recorder, read_recorder, write_recorder;
  Histogram histogram, read_histogram, write_histogram;
  if (batch > 1) {
    recorder.Start(state);
    read_recorder.Start(state);
    write_recorder.Start(state);
  }
  std::vector<std::string_view> batch_keys(batch);
  for (auto _ : state) {
    const bool read = rng.Below(100) < read_pct;
    if (batch == 1) {
      const std::string_view key = keys[stream[pos]];
      pos = (pos + 1) & (kStreamLength - 1);
      if (read) {
        impl.ReadOne(key, &sink);
      } else {
        impl.WriteOne(key);
      }
      continue;
    }
    for (auto& k : batch_keys) {
      k = keys[stream[pos]];
      pos = (pos + 1) & (kStreamLength - 1);
    }
    const std::uint64_t start = NowNanos();
    if (read) {
      impl.ReadBatch(batch_keys, &sink);
    } else {
      impl.WriteBatch(batch_keys);
    }
    const std::uint64_t took = NowNanos() - start;
    histogram.Add(took);
    (read ? read_histogram : write_histogram).Add(took);
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(
      static_cast<std::int64_t>(state.iterations() * batch));
  if (batch > 1) {
    recorder.Finish(state, histogram);
    read_recorder.Finish(state, read_histogram, "read_");
    write_recorder.Finish(state, write_histogram, "write_");
  }
}

// Self-check, run by the runner before the gates: each implementation finds
// every key's own object, misses an absent key, refuses a duplicate create,
// and its writes and batches land on the right objects. Object i is created
// with size 4096 + i (version 1), so a read adds 4096 + i + version + 4096.
template <typename Impl>
bool CheckImpl(std::string* why) {
  constexpr std::size_t kN = 5000;
  std::vector<std::string> keys;
  auto impl = std::make_unique<Impl>();
  auto fail = [&](const std::string& what) {
    *why = std::string(Impl::kName) + ": " + what;
    return false;
  };
  for (std::size_t i = 0; i < kN; ++i) {
    keys.push_back(PopulationKey(i, "check/"));
    if (!impl->Create(keys.back(), i, 4096 + i)) return fail("create failed");
  }
  if (impl->Create(keys[7], 7, 1)) return fail("duplicate create accepted");
  auto value = [](std::size_t i, std::uint64_t version) {
    return (4096 + i) + version + 4096;
  };
  for (std::size_t i = 0; i < kN; ++i) {
    std::uint64_t sink = 0;
    impl->ReadOne(keys[i], &sink);
    if (sink != value(i, 1)) {
      return fail("a read reached the wrong object (key " + std::to_string(i) +
                  ": " + std::to_string(sink) + ", expected " +
                  std::to_string(value(i, 1)) + ")");
    }
  }
  std::uint64_t sink = 0;
  impl->ReadOne(PopulationKey(kN + 1, "check/"), &sink);
  if (sink != 0) return fail("an absent key reached an object");
  std::vector<std::string_view> batch;
  std::uint64_t expected = 0;
  for (std::size_t i = 100; i < 100 + kBatch - 1; ++i) {
    batch.push_back(keys[i]);
    expected += value(i, 1);
  }
  batch.push_back("check/absent");
  sink = 0;
  impl->ReadBatch(batch, &sink);
  if (sink != expected) return fail("a read batch missed or repeated keys");
  impl->WriteBatch(batch);  // size ^= 1, version 2
  expected = 0;
  for (std::size_t i = 100; i < 100 + kBatch - 1; ++i) {
    expected += ((4096 + i) ^ 1) + 2 + 4096;
  }
  sink = 0;
  impl->ReadBatch(batch, &sink);
  if (sink != expected) return fail("a write batch went astray");
  impl->WriteOne(keys[3]);
  sink = 0;
  impl->ReadOne(keys[3], &sink);
  if (sink != ((4096 + 3) ^ 1) + 2 + 4096) {
    return fail("a point write went astray");
  }
  return true;
}

void BM_DirSelfCheck(benchmark::State& state) {
  std::string why;
  bool ok = true;
  for (auto _ : state) {
    ok = CheckImpl<DirectoryImpl>(&why) && CheckImpl<ShardDirectoryImpl>(&why);
  }
  if (!ok) state.SkipWithError(why.c_str());
}
BENCHMARK(BM_DirSelfCheck)->Iterations(1);

void Configure(benchmark::internal::Benchmark* b) {
  b->ArgNames({"zipf", "read", "batch"});
  for (int zipf : {0, 1}) {
    for (int read : {50, 95, 100}) {
      for (int batch : {1, 32}) b->Args({zipf, read, batch});
    }
  }
  b->Threads(1)->Threads(2)->Threads(8)->UseRealTime();
}

BENCHMARK_TEMPLATE(BM_Dir, DirectoryImpl)
    ->Name("BM_Dir/directory")
    ->Apply(Configure);
BENCHMARK_TEMPLATE(BM_Dir, ShardDirectoryImpl)
    ->Name("BM_Dir/shard_directory")
    ->Apply(Configure);

}  // namespace
}  // namespace cairn::bench

int main(int argc, char** argv) {
  return cairn::bench::RunBenchmarksThenTearDown(argc, argv);
}
