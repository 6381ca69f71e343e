// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Flush benchmarks for gates X4 and X5 (docs/flush.md, bench/flush/gates.py).
//   BM_FlushX4Receipts/<serial|staged>/<population>/<maps>
//       the receipt pass over one 8 MiB block's receipts (8192 records of
//       1 KiB) against `population` entries spread over `maps` maps;
//       items = receipts. Batches cycle over 64 blocks' worth of receipts.
//   BM_FlushX4Sweep/<metadata ahead>_<bucket ahead>/<population>/<maps>
//   BM_FlushX4Block/<serial|staged>/<population>/<maps>
//       the sliced pass under a mutex (512 receipts per slice); counters
//       locked_ns_per_block (mean time the lock is held per block),
//       locked_p50_ns / locked_p99_ns / locked_max_ns (that time's
//       distribution over the blocks), slice_p50_ns / slice_p99_ns (each
//       block's longest single hold, over the blocks) and max_slice_ns (the
//       longest single hold of the run).
//   BM_FlushX5Set/<off|on|watermark>/<keys>/real_time, BM_FlushX5Get/...
//       LogStore on a real file (fdatasync on) in $CAIRN_BENCH_DIR or /tmp:
//       1 KiB values over `keys` keys, 8 MiB blocks, a writer flushes as
//       soon as a block is full (real time: fdatasync waits count);
//       counters p50_ns, p99_ns and p9999_ns per operation (a flush
//       lands on about one SET in 8192).
//   BM_FlushX5SetTail/<flusher|inline>/<keys>/<rate>/real_time
//       the same SETs (fdatasync per block, no per-SET durability), tail
//       latency, paced at `rate` SETs per second (0: unpaced): `flusher` runs
//       LogStoreOptions::host_flusher with a RunFlusher thread
//       (max_sealed_blocks 4), `inline` the default (the SET that finds a full
//       block waiting writes and syncs it, max_sealed_blocks 1). Counters
//       p50_ns, p99_ns, p9999_ns, p9999_over_p50, and backpressure_waits (SETs
//       that waited for the flusher).
// Worlds are built once per process and shared by the repetitions, so a
// filter selecting candidate and baseline lets random interleaving
// alternate them.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "cairn/base/metrics.h"
#include "cairn/base/mutex.h"
#include "cairn/flush/log_store.h"
#include "cairn/flush/receipt_pass.h"

namespace {

using cairn::FlushReceipt;
using cairn::RecordIndex;
using cairn::RecordLocation;

constexpr std::size_t kPerBlock = 8192;  // 8 MiB of 1 KiB records
constexpr std::size_t kBatches = 64;
constexpr std::size_t kKeyBytes = 24;

std::uint64_t Mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string KeyOf(std::uint64_t i) {
  char buffer[kKeyBytes + 1];
  std::snprintf(buffer, sizeof(buffer), "user%020llu",
                static_cast<unsigned long long>(Mix(i)));
  return std::string(buffer, kKeyBytes);
}

// `population` entries over `maps` maps, and kBatches blocks of receipts:
// each block's records were rewritten into that block, as SETs would.
struct X4World {
  std::size_t population = 0;
  std::size_t map_count = 0;
  std::vector<std::unique_ptr<RecordIndex>> maps;
  std::vector<std::vector<FlushReceipt>> batches;

  RecordIndex* operator()(std::uint32_t map) { return maps[map].get(); }
};

X4World& World(std::size_t population, std::size_t map_count) {
  // Every world a run asks for stays built, so interleaved repetitions of
  // different map counts do not rebuild (16M entries: about 1.5 GB each).
  static std::map<std::pair<std::size_t, std::size_t>, std::unique_ptr<X4World>>
      worlds;
  auto& world = worlds[{population, map_count}];
  if (world != nullptr) return *world;
  world = std::make_unique<X4World>();
  world->population = population;
  world->map_count = map_count;
  for (std::size_t m = 0; m < map_count; ++m) {
    world->maps.push_back(std::make_unique<RecordIndex>());
    (void)world->maps.back()->PreallocateForExpectedSize(population /
                                                         map_count);
  }
  for (std::uint64_t i = 0; i < population; ++i) {
    const RecordLocation loc{1000, 0, 1024, RecordLocation::kDurable};
    (void)world->maps[i % map_count]->Insert(KeyOf(i), loc);
  }
  std::mt19937_64 rng(42);
  for (std::size_t b = 0; b < kBatches; ++b) {
    std::vector<FlushReceipt> batch;
    batch.reserve(kPerBlock);
    for (std::size_t j = 0; j < kPerBlock; ++j) {
      const std::uint64_t i = rng() % population;
      const std::uint32_t m = static_cast<std::uint32_t>(i % map_count);
      RecordIndex& map = *world->maps[m];
      const std::string key = KeyOf(i);
      const std::uint64_t hash = map.HashOf(key);
      RecordIndex::Entry* e = map.Find(key);
      const RecordLocation loc{static_cast<std::uint32_t>(b),
                               static_cast<std::uint32_t>(j * 1024), 1024, 0};
      e->value() = loc;
      FlushReceipt r;
      r.address = e->address();
      r.generation = map.generation();
      r.hash32 = RecordIndex::Hash32(hash);
      r.tag = RecordIndex::TagOf(hash);
      r.map = m;
      r.block = loc.block;
      r.offset = loc.offset;
      r.length = loc.length;
      batch.push_back(r);
    }
    world->batches.push_back(std::move(batch));
  }
  return *world;
}

void RunPass(benchmark::State& state, std::size_t population, std::size_t maps,
             cairn::ReceiptPassOptions options) {
  X4World& world = World(population, maps);
  std::size_t b = 0;
  std::uint64_t seen = 0;
  for (auto _ : state) {
    const auto stats = cairn::ApplyReceipts(
        world.batches[b], world,
        {static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(8 << 20)},
        options);
    seen += stats.marked + stats.already_durable + stats.superseded;
    benchmark::DoNotOptimize(seen);
    b = (b + 1) % kBatches;
  }
  state.SetItemsProcessed(
      static_cast<std::int64_t>(state.iterations() * kPerBlock));
}

void RunBlock(benchmark::State& state, std::size_t population, std::size_t maps,
              cairn::ReceiptPassOptions options) {
  X4World& world = World(population, maps);
  cairn::Mutex mu;
  options.slice_receipts = 512;
  std::size_t b = 0;
  std::uint64_t locked = 0;
  std::uint64_t max_slice = 0;
  std::vector<std::uint64_t> block_locked;
  std::vector<std::uint64_t> block_slice;
  block_locked.reserve(1 << 16);
  block_slice.reserve(1 << 16);
  for (auto _ : state) {
    const auto stats = cairn::ApplyReceiptsSliced(
        world.batches[b], world,
        {static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(8 << 20)},
        options, &mu);
    locked += stats.locked_nanos;
    max_slice = std::max(max_slice, stats.max_slice_nanos);
    if (block_locked.size() < block_locked.capacity()) {
      block_locked.push_back(stats.locked_nanos);
      block_slice.push_back(stats.max_slice_nanos);
    }
    b = (b + 1) % kBatches;
  }
  // Nearest-rank quantile of a sorted, non-empty vector.
  auto quantile = [](const std::vector<std::uint64_t>& sorted, double q) {
    const auto rank = static_cast<std::size_t>(
        std::ceil(q * static_cast<double>(sorted.size())));
    return static_cast<double>(sorted[std::max<std::size_t>(rank, 1) - 1]);
  };
  if (!block_locked.empty()) {
    std::sort(block_locked.begin(), block_locked.end());
    std::sort(block_slice.begin(), block_slice.end());
    state.counters["locked_p50_ns"] = quantile(block_locked, 0.5);
    state.counters["locked_p99_ns"] = quantile(block_locked, 0.99);
    state.counters["locked_max_ns"] = static_cast<double>(block_locked.back());
    state.counters["slice_p50_ns"] = quantile(block_slice, 0.5);
    state.counters["slice_p99_ns"] = quantile(block_slice, 0.99);
  }
  state.SetItemsProcessed(
      static_cast<std::int64_t>(state.iterations() * kPerBlock));
  state.counters["locked_ns_per_block"] = benchmark::Counter(
      static_cast<double>(locked), benchmark::Counter::kAvgIterations);
  state.counters["max_slice_ns"] = static_cast<double>(max_slice);
}

// --- X5: LogStore end to end -------------------------------------------------

std::string BenchDir() {
  const char* env = std::getenv("CAIRN_BENCH_DIR");
  std::string base = env != nullptr ? env : "/tmp";
  std::string pattern = base + "/cairn_flush_bench_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) std::abort();
  return pattern;
}

struct X5World {
  std::string dir;
  std::unique_ptr<cairn::LogStore> store;
  std::size_t keys = 0;
  ~X5World() {
    store.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

cairn::LogStoreOptions X5Options(const std::string& mode) {
  cairn::LogStoreOptions o;
  o.max_sealed_blocks = 1;  // flush as soon as a block is full
  o.checkpoint_on_close = false;
  if (mode == "off") o.pass.metadata_ahead = o.pass.bucket_ahead = 0;
  if (mode == "watermark") o.mode = cairn::FlushMode::kWatermark;
  return o;
}

X5World& Store(const std::string& mode, std::size_t keys) {
  static std::map<std::string, std::unique_ptr<X5World>> worlds;
  auto& slot = worlds[mode + "/" + std::to_string(keys)];
  if (slot == nullptr) {
    slot = std::make_unique<X5World>();
    slot->dir = BenchDir();
    slot->keys = keys;
    auto store = cairn::LogStore::Open(slot->dir, X5Options(mode));
    if (!store.ok()) std::abort();
    slot->store = std::move(store).value();
    const std::string value(1024, 'v');
    for (std::uint64_t i = 0; i < keys; ++i) {
      if (!slot->store->Set(0, KeyOf(i), value).ok()) std::abort();
    }
    if (!slot->store->Flush().ok()) std::abort();
  }
  return *slot;
}

// Per-operation latencies of one run (the first 2^20 operations), reported
// as p50/p99/p99.99 counters.
class LatencySamples {
 public:
  LatencySamples() { samples_.reserve(1 << 20); }
  // Records the time since `start` (taken just before the operation).
  void AddSince(std::chrono::steady_clock::time_point start) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    if (samples_.size() < samples_.capacity())
      samples_.push_back(static_cast<std::uint32_t>(ns));
  }
  void Report(benchmark::State& state) {
    if (samples_.empty()) return;
    std::sort(samples_.begin(), samples_.end());
    state.counters["p50_ns"] = samples_[samples_.size() / 2];
    state.counters["p99_ns"] = samples_[samples_.size() * 99 / 100];
    state.counters["p9999_ns"] = samples_[samples_.size() * 9999 / 10000];
  }
  // How many operations took over `ns` (after Report, which sorts).
  double CountOver(std::uint32_t ns) const {
    return static_cast<double>(
        samples_.end() -
        std::upper_bound(samples_.begin(), samples_.end(), ns));
  }
  double size() const { return static_cast<double>(samples_.size()); }

 private:
  std::vector<std::uint32_t> samples_;
};

void RunSet(benchmark::State& state, const std::string& mode,
            std::size_t keys) {
  X5World& world = Store(mode, keys);
  const cairn::FlushReport before = world.store->FlushTotals();
  std::mt19937_64 rng(7);
  std::string value(1024, 'x');
  LatencySamples latency;
  for (auto _ : state) {
    value[rng() % value.size()]++;
    const auto start = std::chrono::steady_clock::now();
    if (!world.store->Set(0, KeyOf(rng() % keys), value).ok()) std::abort();
    latency.AddSince(start);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  latency.Report(state);
  // Where the flushes' time went: I/O (write + fdatasync) vs receipt pass.
  const cairn::FlushReport after = world.store->FlushTotals();
  const double blocks =
      static_cast<double>(after.blocks_written - before.blocks_written);
  const double io = static_cast<double>(after.io_nanos - before.io_nanos);
  const double pass = static_cast<double>(after.pass_nanos - before.pass_nanos);
  if (blocks > 0) {
    state.counters["flush_io_ns_per_block"] = io / blocks;
    state.counters["pass_ns_per_block"] = pass / blocks;
    state.counters["pass_share"] = pass / (io + pass);
  }
}

void RunGet(benchmark::State& state, const std::string& mode,
            std::size_t keys) {
  X5World& world = Store(mode, keys);
  std::mt19937_64 rng(9);
  std::string value;
  LatencySamples latency;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    if (!world.store->Get(0, KeyOf(rng() % keys), &value).ok()) std::abort();
    latency.AddSince(start);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  latency.Report(state);
}

// Gate flush.X5.set_p9999: a store whose full blocks a flusher thread
// writes (or, inline, the SET that finds one waiting), built once per mode.
struct X5TailWorld {
  std::string dir;
  std::unique_ptr<cairn::LogStore> store;
  std::jthread flusher;
  ~X5TailWorld() {
    // The host's shutdown order: Close (the flusher then returns), join,
    // destroy.
    if (store != nullptr) (void)store->Close();
    if (flusher.joinable()) flusher.join();
    store.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

X5TailWorld& TailStore(const std::string& mode, std::size_t keys) {
  static std::map<std::string, std::unique_ptr<X5TailWorld>> worlds;
  auto& slot = worlds[mode + "/" + std::to_string(keys)];
  if (slot != nullptr) return *slot;
  slot = std::make_unique<X5TailWorld>();
  slot->dir = BenchDir();
  cairn::LogStoreOptions o;
  o.checkpoint_on_close = false;
  if (mode == "flusher") {
    o.host_flusher = true;  // max_sealed_blocks stays 4
  } else {
    o.max_sealed_blocks = 1;  // the SET after a block fills flushes it
  }
  auto store = cairn::LogStore::Open(slot->dir, o);
  if (!store.ok()) std::abort();
  slot->store = std::move(store).value();
  if (mode == "flusher") {
    cairn::LogStore* const s = slot->store.get();
    slot->flusher = std::jthread([s](std::stop_token stop) {
      const cairn::Status status = s->RunFlusher(stop);
      if (!status.ok()) {
        std::fprintf(stderr, "flusher: %s\n",
                     std::string(status.message()).c_str());
        std::abort();
      }
    });
  }
  const std::string value(1024, 'v');
  for (std::uint64_t i = 0; i < keys; ++i) {
    if (!slot->store->Set(0, KeyOf(i), value).ok()) std::abort();
  }
  if (!slot->store->Flush().ok()) std::abort();
  return *slot;
}

// One counter of the store's metrics, by name.
double StoreCounter(const cairn::LogStore& store, std::string_view name) {
  struct Find final : cairn::MetricVisitor {
    std::string_view name;
    double value = 0;
    void Visit(const cairn::MetricSample& sample) override {
      if (sample.name == name) value += sample.value;
    }
  } find;
  find.name = name;
  store.VisitMetrics(find);
  return find.value;
}

void RunSetTail(benchmark::State& state, const std::string& mode,
                std::size_t keys, std::size_t rate) {
  X5TailWorld& world = TailStore(mode, keys);
  const double waits_before =
      StoreCounter(*world.store, "cairn_logstore_backpressure_waits_total");
  std::mt19937_64 rng(11);
  std::string value(1024, 'x');
  LatencySamples latency;
  // Paced: every 32 SETs the writer sleeps until their scheduled time, so
  // that the SETs arrive at `rate` per second (0: as fast as it can, so
  // the disk's throughput sets the pace through back-pressure). A SET's
  // latency is its own call, not its delay behind the schedule.
  const auto begin = std::chrono::steady_clock::now();
  std::uint64_t done = 0;
  for (auto _ : state) {
    if (rate != 0 && done % 32 == 0) {
      std::this_thread::sleep_until(
          begin + std::chrono::nanoseconds(done * 1'000'000'000ull / rate));
    }
    ++done;
    value[rng() % value.size()]++;
    const auto start = std::chrono::steady_clock::now();
    if (!world.store->Set(0, KeyOf(rng() % keys), value).ok()) std::abort();
    latency.AddSince(start);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  latency.Report(state);
  if (state.counters.count("p50_ns") != 0 && state.counters["p50_ns"] > 0) {
    state.counters["p9999_over_p50"] =
        state.counters["p9999_ns"] / state.counters["p50_ns"];
  }
  state.counters["samples"] = latency.size();
  state.counters["over_100us"] = latency.CountOver(100'000);
  state.counters["over_1ms"] = latency.CountOver(1'000'000);
  state.counters["backpressure_waits"] =
      StoreCounter(*world.store, "cairn_logstore_backpressure_waits_total") -
      waits_before;
}

}  // namespace

int main(int argc, char** argv) {
  const cairn::ReceiptPassOptions serial{0, 0, 512};
  const cairn::ReceiptPassOptions staged{16, 8, 512};
  for (std::size_t n : {std::size_t{1000000}, std::size_t{16000000}}) {
    const std::string pop = std::to_string(n);
    for (std::size_t maps : {std::size_t{1}, std::size_t{16384}}) {
      const std::string suffix = "/" + pop + "/" + std::to_string(maps);
      for (const auto& [name, options] :
           {std::pair{"serial", serial}, std::pair{"staged", staged}}) {
        benchmark::RegisterBenchmark(
            ("BM_FlushX4Receipts/" + std::string(name) + suffix).c_str(),
            [n, maps, options](benchmark::State& s) {
              RunPass(s, n, maps, options);
            });
        benchmark::RegisterBenchmark(
            ("BM_FlushX4Block/" + std::string(name) + suffix).c_str(),
            [n, maps, options](benchmark::State& s) {
              RunBlock(s, n, maps, options);
            });
      }
      for (const auto& [meta, bucket] :
           {std::pair{0, 0}, std::pair{4, 2}, std::pair{8, 4}, std::pair{16, 8},
            std::pair{32, 16}, std::pair{64, 32}, std::pair{16, 0},
            std::pair{0, 8}}) {
        const cairn::ReceiptPassOptions options{
            static_cast<std::size_t>(meta), static_cast<std::size_t>(bucket),
            512};
        benchmark::RegisterBenchmark(
            ("BM_FlushX4Sweep/" + std::to_string(meta) + "_" +
             std::to_string(bucket) + suffix)
                .c_str(),
            [n, maps, options](benchmark::State& s) {
              RunPass(s, n, maps, options);
            });
      }
    }
  }
  for (std::size_t keys : {std::size_t{100000}, std::size_t{1000000}}) {
    for (const char* mode : {"off", "on", "watermark"}) {
      const std::string m = mode;
      benchmark::RegisterBenchmark(
          ("BM_FlushX5Set/" + m + "/" + std::to_string(keys)).c_str(),
          [m, keys](benchmark::State& s) { RunSet(s, m, keys); })
          ->UseRealTime();  // fdatasync waits are part of the cost
      benchmark::RegisterBenchmark(
          ("BM_FlushX5Get/" + m + "/" + std::to_string(keys)).c_str(),
          [m, keys](benchmark::State& s) { RunGet(s, m, keys); })
          ->UseRealTime();
    }
  }
  for (std::size_t keys : {std::size_t{100000}, std::size_t{1000000}}) {
    for (const char* mode : {"flusher", "inline"}) {
      for (std::size_t rate : {std::size_t{25000}, std::size_t{0}}) {
        const std::string m = mode;
        benchmark::RegisterBenchmark(
            ("BM_FlushX5SetTail/" + m + "/" + std::to_string(keys) + "/" +
             std::to_string(rate))
                .c_str(),
            [m, keys, rate](benchmark::State& s) {
              RunSetTail(s, m, keys, rate);
            })
            ->UseRealTime();
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
