// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The benches' random numbers: a xorshift generator (cheap enough to sit in
// a timed loop), the YCSB Zipf generator, and pre-drawn key streams that
// every implementation of a workload reads alike.

#ifndef CAIRN_BENCH_COMMON_RANDOM_H_
#define CAIRN_BENCH_COMMON_RANDOM_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace cairn::bench {

// xorshift64; the state must not be 0.
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

// Zipf(theta) ranks by the YCSB generator (Gray et al., "Quickly generating
// billion-record synthetic databases"), scrambled so the hot ranks land on
// random keys, as YCSB's ScrambledZipfianGenerator does.
class Zipf {
 public:
  Zipf(std::size_t n, double theta) : n_(n) {
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

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_COMMON_RANDOM_H_
