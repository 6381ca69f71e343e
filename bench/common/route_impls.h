// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Adapters that drive a route-level implementation through one interface
// (Publish, ReadOne, WriteOne, ReadBatch, WriteBatch), each doing the shared
// per-object work (bench/common/entry.h), and the self-check a driver runs
// on its adapters before its figures count. Entry is the including file's
// BenchEntry<Tag> (entry.h says why the tag).

#ifndef CAIRN_BENCH_COMMON_ROUTE_IMPLS_H_
#define CAIRN_BENCH_COMMON_ROUTE_IMPLS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/baselines/object_index.h"
#include "bench/baselines/shard_route.h"
#include "bench/common/entry.h"
#include "bench/common/keys.h"
#include "cairn/base/mutex.h"
#include "cairn/route/route_concept.h"
#include "cairn/route/route_options.h"

namespace cairn::bench {

// Reads and writes through a route's WithEntry / WithEntries callbacks (the
// library's route, the locked reference, the two-level baseline). Adapters
// whose route type is the same pass themselves as `Adapter`, so each gets
// its own copy of these functions, as each had before they were shared: more
// callers of one copy make GCC inline less of it into the timed loops.
template <typename Entry, typename RouteT, typename Adapter = void>
struct CallbackAccess {
  RouteT route;
  void ReadOne(std::string_view key, std::uint64_t* sink) const {
    route.WithEntry(key, [&](Entry* e) { ReadWork(e, sink); });
  }
  void WriteOne(std::string_view key, std::int64_t now) const {
    route.WithEntry(key, [&](Entry* e) { WriteWork(e, now); });
  }
  void ReadBatch(std::span<const std::string_view> keys,
                 std::uint64_t* sink) const {
    route.WithEntries(keys, [&](std::size_t, Entry* e) { ReadWork(e, sink); });
  }
  void WriteBatch(std::span<const std::string_view> keys,
                  std::int64_t now) const {
    route.WithEntries(keys, [&](std::size_t, Entry* e) { WriteWork(e, now); });
  }
};

// Any route that satisfies the concept, so a driver measures whatever route
// the library ships.
template <typename Entry, typename RouteT>
struct RouteAdapter : CallbackAccess<Entry, RouteT> {
  static_assert(ObjectRoute<RouteT, Entry>);
  using Owner = std::shared_ptr<Entry>;
  bool Publish(const std::string& key, Owner owner) {
    return this->route.Publish(key, std::move(owner)).ok();
  }
  bool Erase(const Owner& e) {
    return this->route.EraseIfMatch(e->key, e->id(), e.get()).ok();
  }
};

// Batches as one point operation per key, for implementations without a
// batch path (the shard-locked and object_index baselines, the peers); Self
// has ReadOne and WriteOne.
template <typename Self>
struct BatchesByPoint {
  void ReadBatch(std::span<const std::string_view> keys,
                 std::uint64_t* sink) const {
    for (std::string_view k : keys) self().ReadOne(k, sink);
  }
  void WriteBatch(std::span<const std::string_view> keys,
                  std::int64_t now) const {
    for (std::string_view k : keys) self().WriteOne(k, now);
  }

 private:
  const Self& self() const { return static_cast<const Self&>(*this); }
};

// Mooncake main's route when the RFC was written: the shard lock is held
// (shared for reads, exclusive for writes) while the per-object work runs.
template <typename Entry>
struct ShardAdapter : BatchesByPoint<ShardAdapter<Entry>> {
  using Owner = std::shared_ptr<Entry>;
  static constexpr const char* kName = "shard";
  mutable ShardRoute<Entry> route;
  bool Publish(const std::string& key, Owner owner) {
    return route.Publish(key, std::move(owner));
  }
  bool Erase(const Owner& e) { return route.Erase(e->key); }
  void ReadOne(std::string_view key, std::uint64_t* sink) const {
    route.Read(key, [&](Entry* e) { ReadWork(e, sink); });
  }
  void WriteOne(std::string_view key, std::int64_t now) const {
    route.Write(key, [&](Entry* e) { WriteWork(e, now); });
  }
};

// Mooncake main's route as of late 2026: one rwlock per tenant, the strong
// handle copied under it, then the entry's own lock.
template <typename Entry>
struct ObjectIndexAdapter : BatchesByPoint<ObjectIndexAdapter<Entry>> {
  using Owner = std::shared_ptr<Entry>;
  static constexpr const char* kName = "object_index";
  ObjectIndex<Entry> index;
  bool Publish(const std::string& key, const Owner& owner) {
    return index.Insert(key, owner);
  }
  void ReadOne(std::string_view key, std::uint64_t* sink) const {
    const Owner e = index.Get(key);
    ReadWork(e.get(), sink);
  }
  void WriteOne(std::string_view key, std::int64_t now) const {
    const Owner e = index.Get(key);
    WriteWork(e.get(), now);
  }
};

// Registers the running thread with an implementation that needs it (a peer
// on liburcu: static ThreadEnter/ThreadExit) for the scope.
template <typename Impl>
struct ThreadScope {
  ThreadScope() {
    if constexpr (requires { Impl::ThreadEnter(); }) Impl::ThreadEnter();
  }
  ~ThreadScope() {
    if constexpr (requires { Impl::ThreadExit(); }) Impl::ThreadExit();
  }
};

// Every adapter routes correctly: each key reaches its own entry (entry i
// carries version i, so a read adds 4096 + i), an absent key reaches none,
// a duplicate publication is refused, writes land on the right entry, and
// batches cover every key. An adapter without Publish is built with
// Build(keys, entries). False, with the failure in `why`, on the first
// wrong answer.
template <typename Entry, typename Impl>
bool CheckRouteImpl(std::string* why) {
  constexpr std::size_t kN = 5000;
  std::vector<std::string> keys;
  std::vector<std::shared_ptr<Entry>> entries;
  for (std::size_t i = 0; i < kN; ++i) {
    keys.push_back(PopulationKey(i, "check/"));
    entries.push_back(std::make_shared<Entry>(i + 1, keys.back()));
    WriterLock lock(&entries.back()->mu);
    entries.back()->version = i;
  }
  ThreadScope<Impl> scope;
  auto impl = std::make_unique<Impl>();
  auto fail = [&](const std::string& what) {
    *why = std::string(Impl::kName) + ": " + what;
    return false;
  };
  if constexpr (requires { impl->Publish(keys[0], entries[0]); }) {
    for (std::size_t i = 0; i < kN; ++i) {
      if (!impl->Publish(keys[i], entries[i])) return fail("publish refused");
    }
    if (impl->Publish(keys[7], entries[7])) {
      return fail("duplicate publication accepted");
    }
  } else {
    if (!impl->Build(keys, entries)) return fail("build failed");
  }
  for (std::size_t i = 0; i < kN; ++i) {
    std::uint64_t sink = 0;
    impl->ReadOne(keys[i], &sink);
    if (sink != 4096 + i) return fail("a read reached the wrong entry");
  }
  std::uint64_t sink = 0;
  impl->ReadOne(PopulationKey(kN + 1, "check/"), &sink);
  if (sink != 0) return fail("an absent key reached an entry");
  std::vector<std::string_view> batch;
  std::uint64_t expected = 0;
  for (std::size_t i = 100; i < 100 + kBatch; ++i) {
    batch.push_back(keys[i]);
    expected += 4096 + i;
  }
  batch.back() = "check/absent";  // a miss inside a batch visits nothing
  expected -= 4096 + 100 + kBatch - 1;
  sink = 0;
  impl->ReadBatch(batch, &sink);
  if (sink != expected) return fail("a read batch missed or repeated keys");
  impl->WriteBatch(batch, 1);
  sink = 0;
  impl->ReadBatch(batch, &sink);
  if (sink != expected + kBatch - 1) return fail("a write batch went astray");
  if constexpr (requires { impl->WriteOne(keys[0], 1); }) {
    impl->WriteOne(keys[3], 1);
    sink = 0;
    impl->ReadOne(keys[3], &sink);
    if (sink != 4096 + 4) return fail("a point write went astray");
  }
  return true;
}

// Runs CheckRouteImpl over every Impl, in order, as a benchmark body: the
// first failure becomes the benchmark's error, which the gate runner reads.
template <typename Entry, typename... Impls>
void RunRouteSelfCheck(benchmark::State& state) {
  std::string why;
  bool ok = true;
  for (auto _ : state) ok = (CheckRouteImpl<Entry, Impls>(&why) && ...);
  if (!ok) state.SkipWithError(why.c_str());
}

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_COMMON_ROUTE_IMPLS_H_
