// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// LockedRoute: the read-path RFC's locked reference route ("owning"). A fixed
// array of route buckets, each an owning string map from key to an entry
// owner, guarded by one reader-writer lock per bucket. A lookup copies the
// owner under the bucket's shared lock, releases the lock, and only then hands
// the entry to the caller; the copied owner keeps the entry alive for the
// call.
//
// Not part of the library: it satisfies the ObjectRoute concept
// (cairn/route/route_concept.h) beside the library's ObjectRouteIndex and
// lives on only as the test oracle and the `owning` benchmark baseline. It
// lives with the tests, which need nothing outside tests/ on their include
// path; bench/baselines/locked_route.h includes it from here.
//
// Thread safety: every member is safe from any thread. The bucket lock is a
// leaf: no route member calls back into the host, takes another lock, or runs
// a callback while it holds a bucket lock (L3). Callbacks passed to WithEntry,
// WithEntries and VisitHandles run with no route lock held, so they may take
// group and object locks and may even publish or unlink (the owner copy keeps
// the entry alive). Reads write nothing shared except the bucket lock word
// and the owner's reference count (for a group member, the group's control
// block, shared by all its members): the two costs this reference route
// exists to measure and the epoch route removes.

#ifndef CAIRN_TESTS_TESTING_LOCKED_ROUTE_H_
#define CAIRN_TESTS_TESTING_LOCKED_ROUTE_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cairn/base/check.h"
#include "cairn/base/internal/hash.h"
#include "cairn/base/mutex.h"
#include "cairn/base/status.h"
#include "cairn/base/thread_annotations.h"
#include "cairn/base/version.h"
#include "cairn/route/internal/chunk_emitter.h"
#include "cairn/route/route_diagnostics.h"
#include "cairn/route/route_options.h"

CAIRN_NAMESPACE_BEGIN

template <typename Entry>
class LockedRoute {
 public:
  using Owner = std::shared_ptr<Entry>;
  // The locked route retires nothing, so a write needs no budget.
  struct WriteBudget {};

  Result<WriteBudget> PrepareWrite(std::string_view) { return WriteBudget{}; }
  void ReclaimIfDue() {}

  // Uses options.bucket_count only (no stripes, no epoch domain).
  explicit LockedRoute(const RouteOptions& options = {})
      : mask_(std::bit_ceil(options.bucket_count == 0 ? 1
                                                      : options.bucket_count) -
              1),
        buckets_(mask_ + 1) {}

  LockedRoute(const LockedRoute&) = delete;
  LockedRoute& operator=(const LockedRoute&) = delete;

  // Calls fn(Entry*) with the routed entry, or nullptr if `key` is not
  // routed. Locks the key's bucket shared only to copy the owner; fn runs
  // unlocked while the copy keeps the entry alive. Blocks only behind a
  // writer of the same bucket; does not allocate.
  template <typename Fn>
  void WithEntry(std::string_view key, Fn&& fn) const {
    Owner owner = Pin(key);
    fn(owner.get());
  }

  // Calls fn(index, Entry*) for each key in order; nullptr for an absent key.
  // One bucket lock at a time, released before fn runs.
  template <typename Fn>
  void WithEntries(std::span<const std::string_view> keys, Fn&& fn) const {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      Owner owner = Pin(keys[i]);
      fn(i, owner.get());
    }
  }

  // A strong owner of the routed entry, or null. Locks the bucket shared.
  Owner Pin(std::string_view key) const {
    const Bucket& bucket = BucketFor(key);
    ReaderLock lock(&bucket.mu);
    auto it = bucket.map.find(key);
    if (it == bucket.map.end()) return Owner();
    return it->second;
  }

  // Emits every routed owner in chunks of at most `chunk` (>= 1) owners.
  // Each bucket is copied under its own shared lock, then the lock is
  // released before fn(std::span<Owner>) runs, so no lock is held across the
  // whole population or across fn. Allocates the chunk buffer. Entries
  // published or unlinked during the visit may or may not be emitted.
  template <typename Fn>
  void VisitHandles(std::size_t chunk, Fn&& fn) const {
    if (chunk == 0) chunk = 1;
    std::vector<Owner> staged;
    for (const Bucket& bucket : buckets_) {
      {
        ReaderLock lock(&bucket.mu);
        for (const auto& [key, owner] : bucket.map) staged.push_back(owner);
      }
      route_internal::EmitChunks(staged, chunk, /*flush=*/false, fn);
    }
    route_internal::EmitChunks(staged, chunk, /*flush=*/true, fn);
  }

  // Insert-only (D3): routes `key` to `owner`, or returns kAlreadyExists and
  // changes nothing if `key` is already routed. Locks the bucket
  // exclusively; allocates the key copy and the map node. Never fails
  // otherwise (no back-pressure in the locked route).
  Status Publish(std::string_view key, Owner owner,
                 WriteBudget* /*budget*/ = nullptr) {
    CAIRN_CHECK(owner != nullptr);
    std::string lookup_key(key);  // allocated before the lock is taken
    Bucket& bucket = BucketFor(key);
    WriterLock lock(&bucket.mu);
    if (!bucket.map.try_emplace(std::move(lookup_key), std::move(owner))
             .second) {
      return AlreadyExistsError();
    }
    return Status::Ok();
  }

  // Matched unlink (D4): removes `key` only if it still resolves to an entry
  // with this id at this address. OK: unlinked; kNotFound: no match, nothing
  // changed (code-only); kInvalidArgument: null entry. Never busy and never
  // shut down (no epoch domain). The unlinked owner is destroyed after the
  // bucket lock is released, so an entry's destructor never runs under a
  // route lock.
  Status EraseIfMatch(std::string_view key, std::uint64_t id,
                      const Entry* entry, WriteBudget* /*budget*/ = nullptr) {
    if (entry == nullptr) return InvalidArgumentError();
    Bucket& bucket = BucketFor(key);
    Owner unlinked;
    {
      WriterLock lock(&bucket.mu);
      auto it = bucket.map.find(key);
      if (it == bucket.map.end() || it->second.get() != entry ||
          it->second->id() != id) {
        return NotFoundError();
      }
      unlinked = std::move(it->second);
      bucket.map.erase(it);
    }
    return Status::Ok();
  }

  // Occupancy, read bucket by bucket under each shared lock (not an atomic
  // snapshot of the whole route); the epoch-only fields stay zero. Cold.
  RouteDiagnostics Diagnostics() const {
    RouteDiagnostics d;
    d.bucket_count = buckets_.size();
    for (const Bucket& bucket : buckets_) {
      ReaderLock lock(&bucket.mu);
      const std::size_t n = bucket.map.size();
      d.entries += n;
      if (n != 0) ++d.nonempty_buckets;
      if (n > d.max_bucket_entries) d.max_bucket_entries = n;
    }
    return d;
  }

  std::size_t bucket_count() const noexcept { return buckets_.size(); }

  // Which bucket a key lands in (tests use it to force collisions).
  std::size_t BucketIndex(std::string_view key) const noexcept {
    return static_cast<std::size_t>(base_internal::RouteHash(key)) & mask_;
  }

 private:
  struct alignas(64) Bucket {
    mutable SharedMutex mu;
    std::unordered_map<std::string, Owner, base_internal::KeyHash,
                       base_internal::KeyEq>
        map CAIRN_GUARDED_BY(mu);
  };

  const Bucket& BucketFor(std::string_view key) const noexcept {
    return buckets_[BucketIndex(key)];
  }
  Bucket& BucketFor(std::string_view key) noexcept {
    return buckets_[BucketIndex(key)];
  }

  const std::size_t mask_;
  std::vector<Bucket> buckets_;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_TESTS_TESTING_LOCKED_ROUTE_H_
