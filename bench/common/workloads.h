// Copyright 2026 The cairn Authors.
//
// The timed loops the route-level workloads share. An implementation
// (Impl) offers ReadOne(key, sink), ReadBatch(keys, sink) and
// WriteBatch(keys, now); the caller's `pick` chooses the keys, so each
// workload keeps its own key draw.

#ifndef CAIRN_BENCH_COMMON_WORKLOADS_H_
#define CAIRN_BENCH_COMMON_WORKLOADS_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <benchmark/benchmark.h>

#include "bench/common/keys.h"
#include "bench/common/latency.h"

namespace cairn::bench {

// Point reads; pick() returns the next key.
template <typename Impl, typename Pick>
void RunPointReads(benchmark::State& state, const Impl& impl, Pick&& pick) {
  std::uint64_t sink = 0;
  for (auto _ : state) impl.ReadOne(pick(), &sink);
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}

// Read and write batches of kBatch keys, alternating (odd threads start
// with a write); pick(batch) fills a batch. With kRecordLatency each batch
// is timed into the p50_ns/p99_ns/p999_ns counters; without it the loop
// has no clock reads.
template <bool kRecordLatency, typename Impl, typename Pick>
void RunBatches(benchmark::State& state, Impl& impl, Pick&& pick) {
  [[maybe_unused]] static LatencyRecorder recorder;
  [[maybe_unused]] Histogram histogram;
  if constexpr (kRecordLatency) recorder.Start(state);
  std::string_view batch[kBatch];
  std::uint64_t sink = 0;
  std::int64_t now = 0;
  bool write = state.thread_index() % 2 == 1;
  for (auto _ : state) {
    pick(batch);
    [[maybe_unused]] std::uint64_t start = 0;
    if constexpr (kRecordLatency) start = NowNanos();
    if (write) {
      impl.WriteBatch(batch, ++now);
    } else {
      impl.ReadBatch(batch, &sink);
    }
    if constexpr (kRecordLatency) histogram.Add(NowNanos() - start);
    write = !write;
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations() * kBatch);
  if constexpr (kRecordLatency) recorder.Finish(state, histogram);
}

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_COMMON_WORKLOADS_H_
