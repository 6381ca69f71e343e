// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Bench-only baseline `shard`: the route of Mooncake's main. 1024 shards,
// each a std::shared_mutex over an unordered_map<string, shared_ptr<Entry>>
// with heterogeneous lookup (no key copy per read). Reads hold the shard lock
// shared and writes hold it exclusive while they do the per-object work,
// exactly as the directory on main does. The best honest version of itself:
// shards are cache-line aligned, the map is pre-sized, lookups do not copy
// keys or owners.

#ifndef CAIRN_BENCH_BASELINES_SHARD_ROUTE_H_
#define CAIRN_BENCH_BASELINES_SHARD_ROUTE_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "cairn/base/internal/hash.h"

namespace cairn::bench {

template <typename Entry>
class ShardRoute {
 public:
  static constexpr std::size_t kShards = 1024;
  using Owner = std::shared_ptr<Entry>;

  void Reserve(std::size_t total) {
    for (Shard& s : shards_) s.map.reserve(total / kShards + 1);
  }

  bool Publish(std::string key, Owner owner) {
    Shard& s = ShardFor(key);
    std::unique_lock lock(s.mu);
    return s.map.try_emplace(std::move(key), std::move(owner)).second;
  }

  bool Erase(std::string_view key) {
    Shard& s = ShardFor(key);
    Owner unlinked;  // released after the shard lock, like the candidate
    std::unique_lock lock(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end()) return false;
    unlinked = std::move(it->second);
    s.map.erase(it);
    return true;
  }

  // fn(Entry*) under the shard lock held shared (nullptr if absent).
  template <typename Fn>
  void Read(std::string_view key, Fn&& fn) const {
    const Shard& s = ShardFor(key);
    std::shared_lock lock(s.mu);
    auto it = s.map.find(key);
    fn(it == s.map.end() ? nullptr : it->second.get());
  }

  // fn(Entry*) under the shard lock held exclusive.
  template <typename Fn>
  void Write(std::string_view key, Fn&& fn) {
    Shard& s = ShardFor(key);
    std::unique_lock lock(s.mu);
    auto it = s.map.find(key);
    fn(it == s.map.end() ? nullptr : it->second.get());
  }

  std::size_t ShardIndex(std::string_view key) const {
    return base_internal::KeyHash{}(key) % kShards;
  }

 private:
  struct alignas(64) Shard {
    mutable std::shared_mutex mu;
    std::unordered_map<std::string, Owner, base_internal::KeyHash,
                       base_internal::KeyEq>
        map;
  };
  const Shard& ShardFor(std::string_view key) const {
    return shards_[ShardIndex(key)];
  }
  Shard& ShardFor(std::string_view key) { return shards_[ShardIndex(key)]; }

  Shard shards_[kShards];
};

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_BASELINES_SHARD_ROUTE_H_
