// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Gate X5, buffered SETs and GETs (docs/flush.md, bench/flush/gates.py):
//   BM_FlushX5BufferedSet/<logstore|logstore_direct|rocksdb|leveldb>/<keys>/
//       real_time/threads:<n>
//       one SET with no per-SET durability: LogStore::Set (8 MiB blocks,
//       the SET after a block fills writes it and fdatasyncs: back-pressure
//       with max_sealed_blocks 1), RocksDB and LevelDB Put with
//       WriteOptions::sync = false (the write-ahead log is written, not
//       synced); logstore_direct is LogStore with direct_io. Overwrites
//       of keys uniform over the loaded ones, 1 KiB values of random
//       bytes. items = SETs. LogStore's counters:
//       flush_io_share (the fraction of the run's wall time its flushes
//       spent writing and syncing) and syncs_per_block.
//   BM_FlushX5BufferedGet/<impl>/<keys>/real_time/threads:<n>
//       one GET of a key uniform over the loaded ones (every one found).
//       items = GETs.
//   BM_LogStoreAppend/real_time/threads:<n>
//       a diagnostic, not a gate: LogStore's append path alone (appends
//       take no store-wide lock; docs/flush.md, "Many writers"): Set
//       overwrites of 100k keys with 100-byte values into 1 GiB blocks,
//       sync off, so that no flush and few page faults of new block
//       buffers fall in the timed loop. Each run opens a store of its own.
// The `keys` keys are loaded first (peer_stores.h: the stores and their
// tuning), into a real file under $CAIRN_BENCH_DIR or /tmp. A process
// shares one store per implementation between SETs and GETs: the gates run
// them in separate processes, so that GETs read the store as loaded.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include <benchmark/benchmark.h>

#include "bench/flush/peer_stores.h"
#include "cairn/flush/log_store.h"

namespace {

cairn::LogStoreOptions BufferedOptions() {
  cairn::LogStoreOptions o = cairn::bench::PeerLogStoreOptions();
  o.max_sealed_blocks = 1;  // flush as soon as a block is full
  return o;
}

// Never destroyed by exit: RunPeerBenchmarks clears it, before RocksDB's own
// statics go.
auto& stores = *new cairn::bench::PeerStores("buffered", BufferedOptions());

void RunSet(benchmark::State& state, const std::string& impl,
            std::size_t keys) {
  const auto [before, after] = cairn::bench::TimePeerSets(
      state, stores.Get(impl, keys), keys, cairn::bench::PeerWrite::kBuffered);
  if (state.thread_index() == 0 &&
      after.blocks_written > before.blocks_written) {
    // LogStore: the share of the run's wall time its flushes spent writing
    // and syncing (they run on the writers' threads, and every writer waits
    // for them), and the syncs a block took.
    state.counters["flush_io_share"] = benchmark::Counter(
        static_cast<double>(after.io_nanos - before.io_nanos) / 1e9,
        benchmark::Counter::kIsRate);
    state.counters["syncs_per_block"] =
        static_cast<double>(after.syncs - before.syncs) /
        static_cast<double>(after.blocks_written - before.blocks_written);
  }
}

void RunGet(benchmark::State& state, const std::string& impl,
            std::size_t keys) {
  cairn::bench::PeerStore& store = stores.Get(impl, keys);
  std::mt19937_64 rng = cairn::bench::PeerThreadRng(state.thread_index());
  std::string value;
  for (auto _ : state) {
    if (!store.Get(cairn::bench::PeerKey(rng() % keys), &value)) std::abort();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// BM_LogStoreAppend's store: made by thread 0 before the threads' common
// start, closed by it after their common end.
std::unique_ptr<cairn::LogStore>& AppendStore() {
  static auto& store = *new std::unique_ptr<cairn::LogStore>;
  return store;
}

void BM_LogStoreAppend(benchmark::State& state) {
  constexpr std::size_t kKeys = 100000;
  static std::string dir;
  if (state.thread_index() == 0) {
    cairn::LogStoreOptions o;
    o.sync = false;
    o.block_bytes = std::size_t{1} << 30;
    o.max_sealed_blocks = 64;
    o.checkpoint_on_close = false;
    dir = cairn::bench::PeerBenchDir("append", "logstore");
    auto opened = cairn::LogStore::Open(dir + "/store", o);
    if (!opened.ok()) std::abort();
    AppendStore() = std::move(opened).value();
    const std::string value(100, 'v');
    for (std::size_t i = 0; i < kKeys; ++i) {
      if (!AppendStore()->Set(0, cairn::bench::PeerKey(i), value).ok()) {
        std::abort();
      }
    }
  }
  std::mt19937_64 rng = cairn::bench::PeerThreadRng(state.thread_index());
  const std::string value(100, static_cast<char>('a' + state.thread_index()));
  for (auto _ : state) {
    if (!AppendStore()
             ->Set(0, cairn::bench::PeerKey(rng() % kKeys), value)
             .ok()) {
      std::abort();
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  if (state.thread_index() == 0) {
    if (!AppendStore()->Close().ok()) std::abort();
    AppendStore().reset();
    std::filesystem::remove_all(dir);
  }
}
BENCHMARK(BM_LogStoreAppend)->UseRealTime()->Threads(1)->Threads(2)->Threads(8);

}  // namespace

int main(int argc, char** argv) {
  cairn::bench::RegisterPeerBenchmarks("BM_FlushX5BufferedSet", RunSet);
  cairn::bench::RegisterPeerBenchmarks("BM_FlushX5BufferedGet", RunGet);
  return cairn::bench::RunPeerBenchmarks(argc, argv, stores);
}
