// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Bench-only baseline `two_level`: the read-path RFC's alternative to a flat
// route. Every object belongs to a group (a singleton is a group of one);
// the first level routes the object key to its group through a route of the
// same kind the flat design uses (any ObjectRoute, so the comparison isolates
// the second level), and the second level finds the member by its string
// key in the group's own map, under the group's reader-writer lock.
//
// The best honest version of itself: member lookups are heterogeneous (no
// key copy), the group map is pre-sized to its group size, and a batch keeps
// the group's shared lock across consecutive keys of the same group instead
// of re-taking it per key (one group lock at a time).

#ifndef CAIRN_BENCH_BASELINES_TWO_LEVEL_ROUTE_H_
#define CAIRN_BENCH_BASELINES_TWO_LEVEL_ROUTE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "cairn/base/internal/hash.h"
#include "cairn/route/route_concept.h"

namespace cairn::bench {

template <typename Entry>
struct TwoLevelGroup {
  explicit TwoLevelGroup(std::uint64_t id_in, std::size_t expected_members)
      : id_value(id_in) {
    members.reserve(expected_members);
  }
  std::uint64_t id() const { return id_value; }

  const std::uint64_t id_value;
  mutable std::shared_mutex mu;
  std::unordered_map<std::string, std::shared_ptr<Entry>,
                     base_internal::KeyHash, base_internal::KeyEq>
      members;  // guarded by mu
};

template <typename Entry, template <typename> class Route>
class TwoLevelRoute {
 public:
  using Group = TwoLevelGroup<Entry>;
  using GroupOwner = std::shared_ptr<Group>;
  static_assert(ObjectRoute<Route<Group>, Group>,
                "the first level must satisfy cairn::ObjectRoute");

  explicit TwoLevelRoute(const RouteOptions& options = {}) : route_(options) {}

  GroupOwner MakeGroup(std::size_t expected_members) {
    return std::make_shared<Group>(next_group_id_++, expected_members);
  }

  // Adds `entry` under `key` to `group`, then routes `key` to the group.
  bool Join(const GroupOwner& group, std::string_view key,
            std::shared_ptr<Entry> entry) {
    {
      std::unique_lock lock(group->mu);
      if (!group->members.try_emplace(std::string(key), std::move(entry))
               .second) {
        return false;
      }
    }
    return route_.Publish(key, group, nullptr).ok();
  }

  // fn(Entry*) (nullptr if absent) with the group's lock held shared.
  template <typename Fn>
  void WithEntry(std::string_view key, Fn&& fn) const {
    route_.WithEntry(key, [&](Group* g) {
      if (g == nullptr) {
        fn(static_cast<Entry*>(nullptr));
        return;
      }
      std::shared_lock lock(g->mu);
      auto it = g->members.find(key);
      fn(it == g->members.end() ? nullptr : it->second.get());
    });
  }

  // fn(index, Entry*) per key in order; the shared lock of a group is kept
  // while consecutive keys resolve to it.
  template <typename Fn>
  void WithEntries(std::span<const std::string_view> keys, Fn&& fn) const {
    const Group* locked = nullptr;
    std::shared_lock<std::shared_mutex> lock;
    route_.WithEntries(keys, [&](std::size_t i, Group* g) {
      if (g == nullptr) {
        fn(i, static_cast<Entry*>(nullptr));
        return;
      }
      if (g != locked) {
        // One group lock at a time: release the last before taking the next.
        if (lock.owns_lock()) lock.unlock();
        lock = std::shared_lock<std::shared_mutex>(g->mu);
        locked = g;
      }
      auto it = g->members.find(keys[i]);
      fn(i, it == g->members.end() ? nullptr : it->second.get());
    });
  }

  // The first level's housekeeping and occupancy (the route concept's).
  void ReclaimIfDue() { route_.ReclaimIfDue(); }
  RouteDiagnostics Diagnostics() const { return route_.Diagnostics(); }

 private:
  Route<Group> route_;
  std::uint64_t next_group_id_ = 1;  // groups are made by one thread
};

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_BASELINES_TWO_LEVEL_ROUTE_H_
