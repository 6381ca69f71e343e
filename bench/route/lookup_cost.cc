// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Instructions per lookup on the directory's read path against the route's
// own work plus the object lock, for `valgrind --tool=callgrind` (repeatable
// instruction counts; wall time on a shared machine is not). Builds a
// GroupDirectory and an ObjectRouteIndex of bench entries over the same
// keys (default 1M), then runs each phase over the same key sequence, a
// route phase before its directory twin (so both find their locks in the
// same state):
//   route_point        route.WithEntry + the entry's lock shared + a read
//   route_point_excl   route.WithEntry + the entry's lock exclusive + a read
//   route_batch        route.WithEntries (32 keys) + shared lock + read
//   route_batch_excl   route.WithEntries (32 keys) + exclusive lock + read
//   dir_point          GroupDirectory::WithObject + the same read
//   dir_point_excl     GroupDirectory::WithObjectExclusive + the same read
//   dir_batch          GroupDirectory::WithObjects (32 keys)
//   dir_batch_excl     GroupDirectory::WithObjectsExclusive (32 keys)
// and, for the W5 churn gate's publication path, create+delete pairs on top
// of the population (each pair: publish a fresh key, unlink the one made
// 256 pairs earlier, as bench/route's BM_RouteW5 does):
//   route_churn        ObjectRouteIndex::Publish + EraseIfMatch
//   shard_churn        the `shard` baseline's insert + erase
// Under callgrind (bench/route/lookup_cost.py runs it) each phase is one
// dump ("phase <name> <lookups>"); instrumentation is off while the
// population is built. Without valgrind it only prints ns per lookup, which
// on a shared machine is a hint, not a figure.
// Usage: cairn_lookup_cost [--population=N] [--lookups=N] (lookups per
// phase, rounded down to whole batches).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define CAIRN_HAVE_CALLGRIND 1
#else
#define CAIRN_HAVE_CALLGRIND 0
#endif

#include "bench/baselines/shard_route.h"
#include "bench/common/entry.h"
#include "bench/common/flags.h"
#include "bench/common/keys.h"
#include "bench/common/random.h"
#include "cairn/base/mutex.h"
#include "cairn/directory/group_directory.h"
#include "cairn/route/object_route_index.h"

namespace cairn {
namespace {

// Local to this file, so everything instantiated over the entry keeps
// internal linkage (bench/common/entry.h says why).
struct Local {};
using Entry = bench::BenchEntry<Local>;
using bench::kBatch;
using bench::ReadWork;

using Directory = GroupDirectory<>;
using Route = ObjectRouteIndex<Entry>;

// Runs `body` once under its own callgrind dump (or a wall clock).
template <typename Body>
void RunPhase(const char* name, std::size_t lookups, Body&& body) {
#if CAIRN_HAVE_CALLGRIND
  CALLGRIND_ZERO_STATS;
#endif
  const auto start = std::chrono::steady_clock::now();
  body();
  const double ns = std::chrono::duration<double, std::nano>(
                        std::chrono::steady_clock::now() - start)
                        .count();
#if CAIRN_HAVE_CALLGRIND
  char label[128];
  std::snprintf(label, sizeof(label), "phase %s %zu", name, lookups);
  CALLGRIND_DUMP_STATS_AT(label);
#endif
  std::printf("%-18s %zu lookups  %.1f ns/lookup (wall, a hint)\n", name,
              lookups, ns / static_cast<double>(lookups));
}

int Main(int argc, char** argv) {
  bench::Flags flags(argc, argv, "[--population=N] [--lookups=N]");
  const std::size_t n = flags.Unsigned("population", 1'000'000);
  const std::size_t lookups =
      flags.Unsigned("lookups", 100'000) / kBatch * kBatch;
  if (!flags.Ok()) return 2;
  if (n == 0 || lookups == 0) {
    std::fprintf(stderr,
                 "--population must be positive, --lookups at least %zu\n",
                 kBatch);
    return 2;
  }
  const std::vector<std::string>& keys = bench::Keys(n);

  Directory dir;
  Route route;
  std::vector<std::shared_ptr<Entry>> entries;
  entries.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    CreateOptions options;
    options.size_bytes = 4096;
    if (!dir.Create(keys[i], options).ok()) {
      std::fprintf(stderr, "create %zu failed\n", i);
      return 1;
    }
    entries.push_back(std::make_shared<Entry>(i + 1, keys[i]));
    // As the directory's create does (it activates each entry under its
    // exclusive lock): glibc's rwlock then starts its next read from the
    // same state in both.
    { WriterLock lock(&entries.back()->mu); }
    if (!route.Publish(keys[i], entries.back()).ok()) {
      std::fprintf(stderr, "publish %zu failed\n", i);
      return 1;
    }
  }
  route.ReclaimIfDue();
  std::vector<std::string_view> sequence(lookups);
  bench::Rng rng{0x9e3779b97f4a7c15ULL};
  for (auto& k : sequence) k = keys[rng.Next() % n];
  const std::span<const std::string_view> all(sequence);

  std::uint64_t sink = 0;
  // Warm-up: binds this thread to both epoch domains (the first guard on a
  // thread allocates), outside the measured phases.
  for (std::size_t i = 0; i < kBatch; ++i) {
    route.WithEntry(sequence[i], [&](Entry* e) { sink += e != nullptr; });
    (void)dir.WithObject(sequence[i],
                         [&](const ObjectView<>& v) { sink += v.version(); });
  }
#if CAIRN_HAVE_CALLGRIND
  CALLGRIND_START_INSTRUMENTATION;
#endif

  RunPhase("route_point", lookups, [&] {
    for (std::string_view k : sequence) {
      route.WithEntry(k, [&](Entry* e) { ReadWork(e, &sink); });
    }
  });
  RunPhase("dir_point", lookups, [&] {
    for (std::string_view k : sequence) {
      (void)dir.WithObject(k, [&](const ObjectView<>& v) {
        sink += v.size_bytes() + v.version();
      });
    }
  });
  RunPhase("route_batch", lookups, [&] {
    for (std::size_t b = 0; b < lookups; b += kBatch) {
      route.WithEntries(all.subspan(b, kBatch),
                        [&](std::size_t, Entry* e) { ReadWork(e, &sink); });
    }
  });
  RunPhase("dir_batch", lookups, [&] {
    for (std::size_t b = 0; b < lookups; b += kBatch) {
      (void)dir.WithObjects(all.subspan(b, kBatch), [&](std::size_t, StatusCode,
                                                        const ObjectView<>* v) {
        if (v != nullptr) {
          sink += v->size_bytes() + v->version();
        }
      });
    }
  });
  RunPhase("route_point_excl", lookups, [&] {
    for (std::string_view k : sequence) {
      route.WithEntry(k, [&](Entry* e) {
        if (e == nullptr) return;
        WriterLock lock(&e->mu);
        sink += e->version;
      });
    }
  });
  RunPhase("dir_point_excl", lookups, [&] {
    for (std::string_view k : sequence) {
      (void)dir.WithObjectExclusive(
          k, [&](ObjectAccess<>& a) { sink += a.version(); });
    }
  });
  RunPhase("route_batch_excl", lookups, [&] {
    for (std::size_t b = 0; b < lookups; b += kBatch) {
      route.WithEntries(all.subspan(b, kBatch), [&](std::size_t, Entry* e) {
        if (e == nullptr) return;
        WriterLock lock(&e->mu);
        sink += e->version;
      });
    }
  });
  RunPhase("dir_batch_excl", lookups, [&] {
    for (std::size_t b = 0; b < lookups; b += kBatch) {
      (void)dir.WithObjectsExclusive(
          all.subspan(b, kBatch),
          [&](std::size_t, StatusCode, ObjectAccess<>* a) {
            if (a != nullptr) sink += a->version();
          });
    }
  });
  // Churn: the same fresh keys for both, made before the phases.
  constexpr std::size_t kLag = 256;
  const std::size_t pairs = lookups;
  std::vector<std::shared_ptr<Entry>> fresh;
  fresh.reserve(pairs);
  for (std::size_t i = 0; i < pairs; ++i) {
    const std::uint64_t id = (std::uint64_t{1} << 40) + i;
    fresh.push_back(std::make_shared<Entry>(id, bench::PopulationKey(id)));
  }
  bench::ShardRoute<Entry> shard;
  for (std::size_t i = 0; i < n; ++i) shard.Publish(keys[i], entries[i]);
  bool churn_ok = true;
  RunPhase("route_churn", pairs, [&] {
    for (std::size_t i = 0; i < pairs; ++i) {
      if (i >= kLag) {
        const Entry* old = fresh[i - kLag].get();
        churn_ok &= route.EraseIfMatch(old->key, old->id(), old).ok();
      }
      churn_ok &= route.Publish(fresh[i]->key, fresh[i]).ok();
    }
  });
  RunPhase("shard_churn", pairs, [&] {
    for (std::size_t i = 0; i < pairs; ++i) {
      if (i >= kLag) churn_ok &= shard.Erase(fresh[i - kLag]->key);
      churn_ok &= shard.Publish(fresh[i]->key, fresh[i]);
    }
  });
  if (!churn_ok) {
    std::fprintf(stderr, "a churn write failed\n");
    return 1;
  }
#if CAIRN_HAVE_CALLGRIND
  CALLGRIND_STOP_INSTRUMENTATION;
#endif
  std::printf("sink %llu\n", static_cast<unsigned long long>(sink));
  return 0;
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) { return cairn::Main(argc, argv); }
