// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The route-level benches' object and the per-object work every
// implementation does for one key: the object's own reader-writer lock,
// then a metadata read (shared) or a version bump and lease extension
// (exclusive). One definition, so no implementation's work can drift from
// another's.

#ifndef CAIRN_BENCH_COMMON_ENTRY_H_
#define CAIRN_BENCH_COMMON_ENTRY_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bench/common/keys.h"
#include "cairn/base/mutex.h"
#include "cairn/base/rw_lock.h"
#include "cairn/base/thread_annotations.h"

namespace cairn::bench {

// Tag: a type the including file declares in its unnamed namespace. The
// entry, and every route, adapter and loop instantiated over it, then has
// internal linkage, as each bench's own entry type had before this header:
// GCC inlines a function only this file can call (an adapter's ReadOne, the
// route's lookup) where it keeps an externally visible one out of line, so
// an entry with external linkage would add calls to the timed loops.
//   struct Local {};
//   using Entry = bench::BenchEntry<Local>;
template <typename Tag>
struct BenchEntry {
  BenchEntry(std::uint64_t id_in, std::string key_in)
      : id_value(id_in), key(std::move(key_in)) {}
  std::uint64_t id() const { return id_value; }
  const std::uint64_t id_value;
  const std::string key;
  // The directory's per-object lock (ObjectEntry), so the route benches'
  // per-object work is the library's.
  mutable RwLock mu;
  std::uint64_t size_bytes CAIRN_GUARDED_BY(mu) = 4096;
  std::uint64_t version CAIRN_GUARDED_BY(mu) = 0;
  std::int64_t lease CAIRN_GUARDED_BY(mu) = 0;
};

// A miss (null) does no work.
template <typename Tag>
inline void ReadWork(const BenchEntry<Tag>* e, std::uint64_t* sink) {
  if (e == nullptr) return;
  ReaderLock lock(&e->mu);
  *sink += e->size_bytes + e->version;
}
template <typename Tag>
inline void WriteWork(BenchEntry<Tag>* e, std::int64_t now) {
  if (e == nullptr) return;
  WriterLock lock(&e->mu);
  ++e->version;
  e->lease = std::max(e->lease, now + 1000);
}

// The entries of Keys(n) (entry i has id i + 1), built once per process and
// size; every implementation routes these same objects.
template <typename Entry>
const std::vector<std::shared_ptr<Entry>>& Entries(std::size_t n) {
  static std::mutex mu;
  static std::map<std::size_t,
                  std::unique_ptr<std::vector<std::shared_ptr<Entry>>>>
      cache;
  const std::vector<std::string>& keys = Keys(n);
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[n];
  if (!slot) {
    slot = std::make_unique<std::vector<std::shared_ptr<Entry>>>();
    slot->reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      slot->push_back(std::make_shared<Entry>(i + 1, keys[i]));
    }
  }
  return *slot;
}

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_COMMON_ENTRY_H_
