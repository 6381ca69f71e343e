// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The benches' keys: 64 bytes, a prefix and 16 hex digits padded with '.',
// the population of n keys the route and directory benches build, and the
// batch size.

#ifndef CAIRN_BENCH_COMMON_KEYS_H_
#define CAIRN_BENCH_COMMON_KEYS_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cairn::bench {

constexpr std::size_t kKeySize = 64;
// Keys per batch in every batch workload.
constexpr std::size_t kBatch = 32;
constexpr const char* kObjectPrefix = "tenant-0/object/";

// "<prefix><id in hex>", padded to kKeySize.
inline std::string MakeKey(std::uint64_t id,
                           const char* prefix = kObjectPrefix) {
  char buf[kKeySize + 1];
  std::snprintf(buf, sizeof(buf), "%s%016llx", prefix,
                static_cast<unsigned long long>(id));
  std::string key(buf);
  key.resize(kKeySize, '.');
  return key;
}

// Key i of a population: i times the 64-bit golden ratio, so neighbouring
// objects differ in every digit rather than in the last few.
inline std::string PopulationKey(std::uint64_t i,
                                 const char* prefix = kObjectPrefix) {
  return MakeKey(i * 0x9e3779b97f4a7c15ULL, prefix);
}

// The n keys of a population, built once per process and size.
inline const std::vector<std::string>& Keys(std::size_t n) {
  static std::mutex mu;
  static std::map<std::size_t, std::unique_ptr<std::vector<std::string>>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[n];
  if (!slot) {
    slot = std::make_unique<std::vector<std::string>>();
    slot->reserve(n);
    for (std::size_t i = 0; i < n; ++i) slot->push_back(PopulationKey(i));
  }
  return *slot;
}

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_COMMON_KEYS_H_
