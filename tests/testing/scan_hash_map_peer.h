// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Test-only access to ScanHashMap internals that are not part of its API:
// the rehash position and the number of overflow buckets in use. Tests,
// benches and the fuzz harness include this; library code never does.

#ifndef CAIRN_TESTS_TESTING_SCAN_HASH_MAP_PEER_H_
#define CAIRN_TESTS_TESTING_SCAN_HASH_MAP_PEER_H_

#include <cstddef>
#include <cstdint>

#include "cairn/index/scan_hash_map.h"

namespace cairn::index_internal {

class ScanHashMapTestPeer {
 public:
  // True while an old and a new table coexist.
  template <typename Value>
  static bool IsRehashing(const ScanHashMap<Value>& map) noexcept {
    return map.storage_.rehashing;
  }
  // Next bucket of the old table a rehash step moves.
  template <typename Value>
  static std::uint64_t RehashIndex(const ScanHashMap<Value>& map) noexcept {
    return map.storage_.rehash_index;
  }
  // Overflow buckets in use (both tables).
  template <typename Value>
  static std::size_t ChainBuckets(const ScanHashMap<Value>& map) noexcept {
    return map.storage_.pool.used_count();
  }
  // Mutation count that stable scan cursors are checked against.
  template <typename Value>
  static std::uint64_t Version(const ScanHashMap<Value>& map) noexcept {
    return map.version_;
  }
};

}  // namespace cairn::index_internal

#endif  // CAIRN_TESTS_TESTING_SCAN_HASH_MAP_PEER_H_
