// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The compiled part of ScanHashMap: per-map seeds and process-unique map ids.

#include "cairn/index/scan_hash_map.h"

#include <atomic>
#include <cstdint>
#include <random>

CAIRN_NAMESPACE_BEGIN
namespace index_internal {

std::uint64_t RandomSeed() noexcept {
  std::random_device device;
  std::uint64_t seed = 0;
  while (seed == 0) {
    seed = (std::uint64_t{device()} << 32) ^ device();
  }
  return seed;
}

std::uint64_t NextMapId() noexcept {
  // Only uniqueness matters; no other memory is ordered by this counter.
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace index_internal
CAIRN_NAMESPACE_END
