// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Bench-only baseline `shard_group_directory`: explicit groups on the
// shard-locked directory (shard_directory.h), as a host adds them to that
// shape: a group catalog of 256 shards, each a mutex over an
// unordered_map<group name, member keys>. A member's creation and a group's
// teardown hold the group's catalog shard for the whole operation (so a
// group is created and erased atomically with respect to other group
// operations), and lock each member's object shard in turn. Member objects
// are freed after their shard lock, group member lists after the catalog
// lock.

#ifndef CAIRN_BENCH_BASELINES_SHARD_GROUP_DIRECTORY_H_
#define CAIRN_BENCH_BASELINES_SHARD_GROUP_DIRECTORY_H_

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bench/baselines/shard_directory.h"
#include "cairn/base/internal/hash.h"

namespace cairn::bench {

template <typename Payload>
class ShardGroupDirectory {
 public:
  static constexpr std::size_t kCatalogShards = 256;

  // Creates `key` as a member of `group` (created if absent); false if the
  // key exists.
  bool CreateMember(std::string_view group, std::string_view key,
                    std::uint64_t size, Payload payload) {
    CatalogShard& c = CatalogFor(group);
    std::lock_guard lock(c.mu);
    if (!objects_.Create(key, size, std::move(payload))) return false;
    auto it = c.groups.find(group);
    if (it == c.groups.end()) {
      it = c.groups.emplace(std::string(group), std::vector<std::string>())
               .first;
    }
    it->second.emplace_back(key);
    return true;
  }

  // Removes the group and every member; the number of members removed.
  std::size_t EraseGroup(std::string_view group) {
    std::vector<std::string> members;  // freed after the catalog lock
    CatalogShard& c = CatalogFor(group);
    std::lock_guard lock(c.mu);
    auto it = c.groups.find(group);
    if (it == c.groups.end()) return 0;
    members = std::move(it->second);
    c.groups.erase(it);
    std::size_t erased = 0;
    for (const std::string& key : members) erased += objects_.Erase(key);
    return erased;
  }

  ShardDirectory<Payload>& objects() { return objects_; }

 private:
  struct alignas(64) CatalogShard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<std::string>,
                       base_internal::KeyHash, base_internal::KeyEq>
        groups;
  };
  CatalogShard& CatalogFor(std::string_view group) {
    return catalog_[base_internal::KeyHash{}(group) % kCatalogShards];
  }

  ShardDirectory<Payload> objects_;
  CatalogShard catalog_[kCatalogShards];
};

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_BASELINES_SHARD_GROUP_DIRECTORY_H_
