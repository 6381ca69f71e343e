// Copyright 2026 The cairn Authors.
//
// What the gate suite's drivers share: 64-byte keys, the population size,
// uniform and Zipf 0.99 key streams (the same streams for every
// implementation), a log-linear latency histogram merged across benchmark
// threads into p50/p99 counters, and RSS from /proc/self/status.

#ifndef CAIRN_BENCH_SUITE_SUITE_COMMON_H_
#define CAIRN_BENCH_SUITE_SUITE_COMMON_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

namespace cairn::suite {

constexpr std::size_t kKeySize = 64;
constexpr std::size_t kBatch = 32;

// Teardown of the structures a driver builds once per process: run by the
// driver's main after the benchmarks, in reverse order, before static
// destruction starts (so nothing they call at destruction has been
// destroyed yet).
inline std::mutex& AtEndMutex() {
  static std::mutex mu;
  return mu;
}
inline std::vector<std::function<void()>>& AtEndList() {
  static std::vector<std::function<void()>> fns;
  return fns;
}
inline void AtEnd(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(AtEndMutex());
  AtEndList().push_back(std::move(fn));
}
inline int RunBenchmarksThenTearDown(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::vector<std::function<void()>> fns;
  {
    std::lock_guard<std::mutex> lock(AtEndMutex());
    fns.swap(AtEndList());
  }
  for (auto it = fns.rbegin(); it != fns.rend(); ++it) (*it)();
  return 0;
}

// Objects per population: CAIRN_SUITE_POPULATION (the runner sets it),
// default 1M.
inline std::size_t PopulationSize() {
  static const std::size_t n = [] {
    const char* env = std::getenv("CAIRN_SUITE_POPULATION");
    const long long v = env == nullptr ? 0 : std::atoll(env);
    return v > 0 ? static_cast<std::size_t>(v) : std::size_t{1'000'000};
  }();
  return n;
}

inline std::string MakeKey(std::uint64_t i,
                           const char* prefix = "tenant-0/object/") {
  char buf[kKeySize + 1];
  std::snprintf(buf, sizeof(buf), "%s%016llx", prefix,
                static_cast<unsigned long long>(i * 0x9e3779b97f4a7c15ULL));
  std::string key(buf);
  key.resize(kKeySize, '.');
  return key;
}

// The keys of the population, built once per process.
inline const std::vector<std::string>& Keys(std::size_t n) {
  static std::mutex mu;
  static std::map<std::size_t, std::unique_ptr<std::vector<std::string>>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[n];
  if (!slot) {
    slot = std::make_unique<std::vector<std::string>>();
    slot->reserve(n);
    for (std::size_t i = 0; i < n; ++i) slot->push_back(MakeKey(i));
  }
  return *slot;
}

struct Rng {
  std::uint64_t s;
  std::uint64_t Next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  // Uniform below n without a division.
  std::size_t Below(std::size_t n) {
    return static_cast<std::size_t>(
        (static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
};

inline void Progress(const char* fmt, const char* what, std::size_t n) {
  std::fprintf(stderr, "[bench] ");
  std::fprintf(stderr, fmt, what, n);
  std::fprintf(stderr, "\n");
}

// Zipf(theta) ranks by the YCSB generator (Gray et al., "Quickly generating
// billion-record synthetic databases"), scrambled so the hot ranks land on
// random keys, as YCSB's ScrambledZipfianGenerator does.
class Zipf {
 public:
  Zipf(std::size_t n, double theta) : n_(n), theta_(theta) {
    for (std::size_t i = 1; i <= n; ++i) zetan_ += 1.0 / std::pow(i, theta);
    const double zeta2 = 1.0 + 1.0 / std::pow(2.0, theta);
    alpha_ = 1.0 / (1.0 - theta);
    eta_ = (1.0 - std::pow(2.0 / static_cast<double>(n), 1.0 - theta)) /
           (1.0 - zeta2 / zetan_);
    half_pow_ = 1.0 + std::pow(0.5, theta);
  }
  std::size_t Rank(double u) const {
    const double uz = u * zetan_;
    if (uz < 1.0) return 0;
    if (uz < half_pow_) return 1;
    const auto r = static_cast<std::size_t>(
        static_cast<double>(n_) * std::pow(eta_ * u - eta_ + 1.0, alpha_));
    return std::min(r, n_ - 1);
  }
  std::size_t Next(Rng& rng) const {
    const double u =
        static_cast<double>(rng.Next() >> 11) * (1.0 / 9007199254740992.0);
    std::uint64_t h = Rank(u) * 0x9e3779b97f4a7c15ULL;  // scramble the rank
    h ^= h >> 29;
    return static_cast<std::size_t>(
        (static_cast<unsigned __int128>(h * 0xbf58476d1ce4e5b9ULL) * n_) >> 64);
  }

 private:
  std::size_t n_;
  double theta_;
  double zetan_ = 0;
  double alpha_ = 0;
  double eta_ = 0;
  double half_pow_ = 0;
};

// A pre-drawn stream of key indices per (distribution, thread), identical
// for every implementation, so the generator's cost (a pow per Zipf draw)
// stays out of the timed loop.
constexpr std::size_t kStreamLength = std::size_t{1} << 20;
inline const std::vector<std::uint32_t>& KeyStream(std::size_t n, bool zipf,
                                                   int thread) {
  static std::mutex mu;
  static std::map<std::tuple<std::size_t, bool, int>,
                  std::unique_ptr<std::vector<std::uint32_t>>>
      cache;
  static std::map<std::size_t, std::unique_ptr<Zipf>> zipfs;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[{n, zipf, thread}];
  if (!slot) {
    slot = std::make_unique<std::vector<std::uint32_t>>(kStreamLength);
    Rng rng{0x51ab1e5ULL + 7919ULL * static_cast<std::uint64_t>(thread + 1) +
            (zipf ? 0xabcdULL : 0)};
    if (zipf) {
      auto& z = zipfs[n];
      if (!z) z = std::make_unique<Zipf>(n, 0.99);
      for (auto& v : *slot) v = static_cast<std::uint32_t>(z->Next(rng));
    } else {
      for (auto& v : *slot) v = static_cast<std::uint32_t>(rng.Below(n));
    }
  }
  return *slot;
}

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
  void Finish(benchmark::State& state, const Histogram& mine) {
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
    state.counters["p50_ns"] = merged_.Quantile(0.50);
    state.counters["p99_ns"] = merged_.Quantile(0.99);
    state.counters["p999_ns"] = merged_.Quantile(0.999);
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

// VmRSS of this process in bytes, from /proc/self/status (0 if unreadable).
inline std::uint64_t RssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
    }
  }
  return 0;
}

}  // namespace cairn::suite

#endif  // CAIRN_BENCH_SUITE_SUITE_COMMON_H_
