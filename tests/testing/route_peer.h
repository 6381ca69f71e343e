// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Test-only access to ObjectRouteIndex internals, for tests and benchmarks
// (never for hosts). The route declares this class its friend; nothing in
// the library uses it.

#ifndef CAIRN_TESTS_TESTING_ROUTE_PEER_H_
#define CAIRN_TESTS_TESTING_ROUTE_PEER_H_

#include <cstddef>
#include <span>
#include <string_view>

#include "cairn/base/internal/hash.h"
#include "cairn/epoch/epoch_domain.h"
#include "cairn/route/object_route_index.h"

namespace cairn::route_internal {

class ObjectRouteIndexTestPeer {
 public:
  // WithEntries without its staged loads: one guard, then hash, bucket load
  // and lookup key by key. The baseline that decides whether the staged
  // batch loop earns its place (bench/route, `epoch_unstaged`).
  template <typename Entry, typename Fn>
  static void WithEntriesUnstaged(const ObjectRouteIndex<Entry>& route,
                                  std::span<const std::string_view> keys,
                                  Fn&& fn) {
    Guard guard = route.domain_->EnterOnThisThread();
    for (std::size_t i = 0; i < keys.size(); ++i) {
      fn(i, route.Lookup(base_internal::RouteHash(keys[i]), keys[i]));
    }
  }

  // WithEntries with another staging window (bench/route sweeps it).
  template <std::size_t kWindow, typename Entry, typename Fn>
  static void WithEntriesWindow(const ObjectRouteIndex<Entry>& route,
                                std::span<const std::string_view> keys,
                                Fn&& fn) {
    route.template WithEntriesStaged<kWindow>(keys, fn);
  }

  // Calls hook(arg) on the resizing thread after every bucket store of a
  // resize move (split or merge), with the route's resize mutex and the
  // unit's writer stripe held: the hook may read the route (lock-free) but
  // not write it. Set before the route is shared; null clears it.
  template <typename Entry>
  static void SetResizeStoreHook(ObjectRouteIndex<Entry>& route,
                                 void (*hook)(void*), void* arg) {
    route.resize_store_hook_ = hook;
    route.resize_store_hook_arg_ = arg;
  }

  // Sets the route's population count as a resize reads it, and runs one
  // resize step as an unlocked write would (MaybeResize), so a test can
  // race the two directly. Only with no real writer running.
  template <typename Entry>
  static void SetEntries(ObjectRouteIndex<Entry>& route, std::size_t n) {
    route.entries_.store(n, std::memory_order_relaxed);
  }
  // The population count a resize reads.
  template <typename Entry>
  static std::size_t Entries(const ObjectRouteIndex<Entry>& route) {
    return route.entries_.load(std::memory_order_relaxed);
  }
  template <typename Entry>
  static void StepResize(ObjectRouteIndex<Entry>& route) {
    route.MaybeResize(/*locked=*/false);
  }

  // The bucket `key` hashes to (bench/route's collision workload, W3). A
  // bench baseline that exposes its own BucketIndex() is asked directly.
  template <typename Route>
  static std::size_t BucketIndex(const Route& route, std::string_view key) {
    if constexpr (requires { route.BucketIndex(key); }) {
      return route.BucketIndex(key);
    } else {
      return base_internal::RouteHash(key) & (route.bucket_count() - 1);
    }
  }
};

}  // namespace cairn::route_internal

#endif  // CAIRN_TESTS_TESTING_ROUTE_PEER_H_
