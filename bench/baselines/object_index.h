// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Bench-only baseline `object_index`: the object route of Mooncake's main as
// of late 2026 (mooncake-store's ObjectIndex, #4161), rewritten here in its
// shape: one std::shared_mutex per tenant over an
// unordered_map<string, shared_ptr<Entry>> with transparent lookup (no key
// copy per read). Get copies the strong handle under the shared lock and
// releases the lock before returning; the caller then takes the entry's own
// lock. Insert and the identity-checked EraseIf take the lock exclusive;
// Insert stamps a publication generation under it, as the original does.
// Like the original, the map is not pre-sized.

#ifndef CAIRN_BENCH_BASELINES_OBJECT_INDEX_H_
#define CAIRN_BENCH_BASELINES_OBJECT_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "cairn/base/internal/hash.h"

namespace cairn::bench {

template <typename Entry>
class ObjectIndex {
 public:
  using Owner = std::shared_ptr<Entry>;

  // The routed entry's strong handle, or null. The shared lock is released
  // before returning: the handle keeps the entry alive, not current.
  Owner Get(std::string_view key) const {
    std::shared_lock<std::shared_mutex> lock(route_lock_);
    auto it = route_.find(key);
    return it == route_.end() ? nullptr : it->second;
  }

  // False (and `entry` untouched) if `key` is already routed.
  bool Insert(std::string key, Owner entry) {
    std::unique_lock<std::shared_mutex> lock(route_lock_);
    const auto [it, inserted] = route_.try_emplace(std::move(key), entry);
    if (!inserted) return false;
    ++generation_;  // the publication stamp the original keeps per entry
    return true;
  }

  // Unlinks `key` only if it still resolves to `expected`.
  bool EraseIf(std::string_view key, const Entry* expected) {
    Owner unlinked;  // released after the lock
    std::unique_lock<std::shared_mutex> lock(route_lock_);
    auto it = route_.find(key);
    if (it == route_.end() || it->second.get() != expected) return false;
    unlinked = std::move(it->second);
    route_.erase(it);
    return true;
  }

  std::size_t size() const {
    std::shared_lock<std::shared_mutex> lock(route_lock_);
    return route_.size();
  }

 private:
  mutable std::shared_mutex route_lock_;
  std::unordered_map<std::string, Owner, base_internal::KeyHash,
                     base_internal::KeyEq>
      route_;
  std::uint64_t generation_ = 0;
};

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_BASELINES_OBJECT_INDEX_H_
