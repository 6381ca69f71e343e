// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Key hashing for every component: transparent hash/equality for string
// maps, the route hash that picks buckets and probe slots, and the keyed
// XXH3 hash of the record index (both compiled in src/base/hash.cc so
// xxHash stays out of public headers). For cairn's own components; hosts
// never include it.

#ifndef CAIRN_BASE_INTERNAL_HASH_H_
#define CAIRN_BASE_INTERNAL_HASH_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN
namespace base_internal {

// Transparent hash/equality so std::string_view looks up std::string keys
// without building a key copy.
struct KeyHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view key) const noexcept {
    return std::hash<std::string_view>{}(key);
  }
};
struct KeyEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const noexcept {
    return a == b;
  }
};

// A 64-bit finaliser: spreads a hash's entropy over all its bits (the
// directory's lifecycle stripes use it over the route hash, so a key's
// stripe does not follow its route bucket).
[[gnu::always_inline]] inline std::uint64_t MixHash(std::uint64_t h) noexcept {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

// The route's hash: XXH3 of `key` (compiled in hash.cc). It picks a key's
// bucket (low bits) and its slot and tag within the bucket (the other
// bits). For the short keys routes hold it runs in about a third of the
// instructions of std::hash plus MixHash.
std::uint64_t RouteHash(std::string_view key) noexcept;

// XXH3 of `key` under `seed`: the index's hash, keyed per map so one map's
// collisions say nothing about another's.
std::uint64_t KeyedHash(std::string_view key, std::uint64_t seed) noexcept;

}  // namespace base_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_BASE_INTERNAL_HASH_H_
