// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Gate flush.X5.space_amp (docs/flush.md, "X5: space amplification"):
// LogStore's file bytes over its live bytes after 10 passes of uniform
// overwrite with compaction running. `keys` 16-byte keys with 1 KiB random
// values are loaded, then overwritten 10 times over in a uniformly random
// order (10 x keys SETs); the host compacts as a host would: every 256
// SETs, while the blocks in use take over 1.2x the live bytes, one Compact
// call (the emptiest block, if at most 90% live: its copies need one new
// block, so the file grows by at most one block past the blocks in use).
// 8 MiB blocks (the default), 16 partitions, no fdatasync (space, not
// durability, is measured), a real file under $CAIRN_BENCH_DIR or /tmp.
// Counters: space_amp (the log file's size on disk over the live bytes),
// file_mib, live_mib, write_amp (bytes written by flushes over the bytes
// the SETs appended), relocated_mib, blocks_freed.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>

#include <benchmark/benchmark.h>

#include "cairn/flush/log_store.h"

namespace {

constexpr std::size_t kKeyBytes = 16;
constexpr std::size_t kValueBytes = 1024;
// The host's policy: compact while the blocks in use take more than this
// many times the live bytes.
constexpr double kTrigger = 1.2;

std::uint64_t Mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string KeyOf(std::uint64_t i) {
  char buf[kKeyBytes + 1];
  std::snprintf(buf, sizeof(buf), "k%015llx",
                static_cast<unsigned long long>(Mix(i) >> 4));
  return std::string(buf, kKeyBytes);
}

std::string BenchDir() {
  const char* env = std::getenv("CAIRN_BENCH_DIR");
  std::string pattern =
      std::string(env != nullptr ? env : "/tmp") + "/cairn_space_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) std::abort();
  return pattern;
}

void BM_FlushX5SpaceAmp(benchmark::State& state) {
  const auto keys = static_cast<std::uint64_t>(state.range(0));
  constexpr int kPasses = 10;
  std::string value(kValueBytes, '\0');
  std::mt19937_64 rng(42);
  for (auto _ : state) {
    state.PauseTiming();
    const std::string dir = BenchDir();
    cairn::LogStoreOptions options;
    options.partitions = 16;
    options.databases = 1;
    options.sync = false;
    options.checkpoint_on_close = false;
    auto opened = cairn::LogStore::Open(dir, options);
    if (!opened.ok()) {
      state.SkipWithError(std::string(opened.status().message()).c_str());
      return;
    }
    cairn::LogStore& store = **opened;
    state.ResumeTiming();
    auto set = [&](std::uint64_t i) {
      for (std::size_t b = 0; b < kValueBytes; b += 8) {
        const std::uint64_t r = rng();
        std::memcpy(value.data() + b, &r, 8);
      }
      if (!store.Set(0, KeyOf(i), value).ok()) std::abort();
    };
    for (std::uint64_t i = 0; i < keys; ++i) set(i);
    cairn::CompactOptions compact;
    compact.max_live_fraction = 0.9;
    compact.max_blocks = 1;
    std::uint64_t relocated = 0;
    std::uint64_t freed = 0;
    std::uint64_t calls = 0;
    const std::uint64_t sets = kPasses * keys;
    for (std::uint64_t n = 0; n < sets; ++n) {
      set(rng() % keys);
      if (n % 256 != 255) continue;
      // The blocks in use (free slots excluded: new blocks reuse them)
      // against the live bytes.
      const cairn::LogStoreSpace space = store.Space();
      if (static_cast<double>(space.blocks.size() * space.block_bytes) >
          kTrigger * static_cast<double>(space.live_bytes)) {
        cairn::CompactReport report;
        if (!store.Compact(compact, &report).ok()) std::abort();
        relocated += report.bytes_relocated;
        freed += report.blocks_freed;
        ++calls;
      }
    }
    if (!store.Flush().ok()) std::abort();
    state.PauseTiming();
    const cairn::LogStoreSpace space = store.Space();
    const double file =
        static_cast<double>(std::filesystem::file_size(dir + "/log"));
    const double live = static_cast<double>(space.live_bytes);
    const double appended = static_cast<double>(keys + sets) *
                            cairn::LogRecordBytes(kKeyBytes, kValueBytes);
    state.counters["space_amp"] = file / live;
    state.counters["file_mib"] = file / (1 << 20);
    state.counters["live_mib"] = live / (1 << 20);
    state.counters["write_amp"] =
        static_cast<double>(store.FlushTotals().bytes_written) / appended;
    state.counters["relocated_mib"] =
        static_cast<double>(relocated) / (1 << 20);
    state.counters["blocks_freed"] = static_cast<double>(freed);
    state.counters["compact_calls"] = static_cast<double>(calls);
    state.counters["slots"] = static_cast<double>(space.slots);
    (void)store.Close();
    opened->reset();
    std::filesystem::remove_all(dir);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() *
                          static_cast<std::int64_t>(keys * (kPasses + 1)));
}
BENCHMARK(BM_FlushX5SpaceAmp)
    ->Arg(100'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
