// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Batch latency for the benches: a log-linear histogram per benchmark
// thread, merged across the threads into p50/p99/p999 counters.

#ifndef CAIRN_BENCH_COMMON_LATENCY_H_
#define CAIRN_BENCH_COMMON_LATENCY_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include <benchmark/benchmark.h>

namespace cairn::bench {

// Log-linear latency histogram: 16 sub-buckets per power of two (about 6%
// resolution) from 1 ns to 2^63 ns.
class Histogram {
 public:
  static constexpr int kSub = 16;
  void Add(std::uint64_t ns) { ++counts_[Index(ns)]; }
  void Merge(const Histogram& other) {
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      counts_[i] += other.counts_[i];
    }
  }
  void Clear() { counts_.fill(0); }
  std::uint64_t Count() const {
    std::uint64_t n = 0;
    for (auto c : counts_) n += c;
    return n;
  }
  // The value at quantile q (0..1): the midpoint of its bucket.
  double Quantile(double q) const {
    const std::uint64_t total = Count();
    if (total == 0) return 0;
    const auto rank =
        static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total)));
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= std::max<std::uint64_t>(rank, 1)) {
        const double lo = static_cast<double>(Lower(static_cast<int>(i)));
        const double hi = static_cast<double>(Lower(static_cast<int>(i) + 1));
        return (lo + hi) / 2;
      }
    }
    return 0;
  }

  static int Index(std::uint64_t ns) {
    if (ns < kSub) return static_cast<int>(ns);
    const int msb = 63 - std::countl_zero(ns);
    const int shift = msb - 4;
    return (shift + 1) * kSub + static_cast<int>((ns >> shift) & (kSub - 1));
  }
  static std::uint64_t Lower(int index) {
    if (index < kSub) return static_cast<std::uint64_t>(index);
    const int shift = index / kSub - 1;
    return static_cast<std::uint64_t>(kSub + index % kSub) << shift;
  }

 private:
  std::array<std::uint64_t, 61 * kSub> counts_{};
};

// Merges every benchmark thread's histogram; thread 0 waits for the others
// and publishes p50/p99/p999 as counters (the other threads publish 0, so
// Google Benchmark's per-thread sum is thread 0's figure). One recorder per
// benchmark function; runs of one function never overlap.
class LatencyRecorder {
 public:
  // Called by every thread before its timed loop (thread 0 resets; the
  // benchmark's start barrier orders it before any thread's merge).
  void Start(const benchmark::State& state) {
    if (state.thread_index() == 0) {
      std::lock_guard<std::mutex> lock(mu_);
      merged_.Clear();
      arrived_.store(0, std::memory_order_relaxed);
    }
  }
  // Counters p50_ns, p99_ns and p999_ns, each name after `prefix`.
  void Finish(benchmark::State& state, const Histogram& mine,
              const std::string& prefix = "") {
    {
      std::lock_guard<std::mutex> lock(mu_);
      merged_.Merge(mine);
    }
    arrived_.fetch_add(1, std::memory_order_acq_rel);
    if (state.thread_index() != 0) return;
    while (arrived_.load(std::memory_order_acquire) < state.threads()) {
      std::this_thread::yield();
    }
    std::lock_guard<std::mutex> lock(mu_);
    state.counters[prefix + "p50_ns"] = merged_.Quantile(0.50);
    state.counters[prefix + "p99_ns"] = merged_.Quantile(0.99);
    state.counters[prefix + "p999_ns"] = merged_.Quantile(0.999);
  }

 private:
  std::mutex mu_;
  Histogram merged_;
  std::atomic<int> arrived_{0};
};

inline std::uint64_t NowNanos() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_COMMON_LATENCY_H_
