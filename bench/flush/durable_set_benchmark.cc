// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Gate X5, durable SETs (docs/flush.md, bench/flush/gates.py):
//   BM_FlushX5Durable/<logstore|logstore_direct|rocksdb|leveldb>/<keys>/
//       real_time/threads:<n>
// Each operation is one SET acknowledged durable: LogStore::SetDurable
// (group commit, one fdatasync per group), RocksDB and LevelDB Put with
// WriteOptions::sync = true (their own group commit of the write-ahead
// log). 16-byte keys uniform over `keys` keys that are loaded first (not
// durable per key, one sync at the end), 1 KiB values of random bytes, a
// real file under $CAIRN_BENCH_DIR or /tmp. items = acknowledged SETs.
//
// The stores and their tuning: peer_stores.h. LogStore here: fdatasync on,
// the default max_sealed_blocks; logstore_direct with direct_io.

#include <cstddef>
#include <string>

#include <benchmark/benchmark.h>

#include "bench/flush/peer_stores.h"
#include "cairn/flush/log_store.h"

namespace {

// Never destroyed by exit: RunPeerBenchmarks clears it, before RocksDB's own
// statics go.
auto& stores = *new cairn::bench::PeerStores(
    "durable", cairn::bench::PeerLogStoreOptions());

void RunDurable(benchmark::State& state, const std::string& impl,
                std::size_t keys) {
  const auto [before, after] = cairn::bench::TimePeerSets(
      state, stores.Get(impl, keys), keys, cairn::bench::PeerWrite::kDurable);
  if (state.thread_index() == 0 && after.syncs > before.syncs) {
    // LogStore: how many SETs one fdatasync served (all threads; the
    // others finish with thread 0 within one sync), and the time per sync.
    const double syncs = static_cast<double>(after.syncs - before.syncs);
    state.counters["sets_per_sync"] =
        static_cast<double>(state.iterations()) * state.threads() / syncs;
    state.counters["io_ns_per_sync"] =
        static_cast<double>(after.io_nanos - before.io_nanos) / syncs;
  }
}

}  // namespace

int main(int argc, char** argv) {
  cairn::bench::RegisterPeerBenchmarks("BM_FlushX5Durable", RunDurable);
  return cairn::bench::RunPeerBenchmarks(argc, argv, stores);
}
