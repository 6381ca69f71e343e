// Copyright 2026 The cairn Authors.
//
// ObjectRouteIndex: the read-path RFC's "Proposed Route". A fixed array of
// buckets, each an atomic pointer to an immutable BucketSnapshot that owns
// its key strings and entry owners; fixed writer stripes; one shared empty
// snapshot. Readers never lock: one epoch guard per point request or batch,
// an acquire load of the bucket, a lookup by string_view, and the entry is
// borrowed (no owner copy) for the callback. Writers lock the key's stripe,
// copy only that bucket, publish the copy with release, and retire the old
// snapshot into the EpochDomain with its byte size.
//
// Entry owners: for a singleton a plain owner; for an explicit group member
// an aliasing owner whose .get() is the member and whose control block keeps
// the whole group alive. The route looks inside an Entry only for
// `std::uint64_t id() const` (matched unlink, D4) and, if Entry has one,
// `retained_bytes()` (retired bytes, below). It satisfies ObjectRoute
// (route_concept.h), the interface GroupDirectory requires.
//
// Retired bytes (E4). Every write charges the route's epoch domain, against
// its retired_bytes_cap, for what it leaves waiting for a grace period:
//   counted: the replaced bucket snapshot (its whole allocation: header,
//     slots and key bytes); for an unlink also the entry's RouteRecord, the
//     Entry object (sizeof(Entry)) and the entry's declared
//     `retained_bytes()` (the host memory the host says the entry keeps
//     alive; an entry declaring more than the whole cap is charged without
//     them, so it can still be unlinked). See RetainedBytes().
//   not counted: the shared_ptr control block, heap memory the entry owns
//     beyond what it declares (a long key, a payload's buffers), and for a
//     group member the group, which other members may keep alive anyway.
// A charge is released when the deleter ran. The retired cap therefore
// bounds snapshots, records and declared entry memory, not every byte.
//
// Errors, all code-only (they may be returned under the caller's locks):
// kNotFound and kAlreadyExists; kResourceExhausted when
// busy (the retired cap stayed full, E4) or out of memory; kUnavailable once
// the route's epoch domain is shut down (writes only: reads keep working);
// kInvalidArgument if one write would retire more than the domain's whole
// retired_bytes_cap (a cap configured below one bucket snapshot).
//
// Thread safety: every member is safe from any thread. Reads (WithEntry,
// WithEntries, Pin, VisitHandles, Diagnostics) take no lock and write no
// shared memory; they enter a guard of the route's domain through the
// calling thread's implicit participant (EpochDomain::EnterOnThisThread).
// Publish and EraseIfMatch lock one writer stripe, which is a leaf: nothing
// else is locked and no host code runs under it (L3). Callbacks run inside
// the read guard: they may take object and group locks, but must not call
// the route domain's Barrier() or Shutdown(), and nothing they are handed may
// outlive the callback (D1). A write may wait for back-pressure (E4), so it
// must not be called from inside a callback of the same route.

#ifndef CAIRN_ROUTE_OBJECT_ROUTE_INDEX_H_
#define CAIRN_ROUTE_OBJECT_ROUTE_INDEX_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/base/check.h"
#include "cairn/base/mutex.h"
#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/epoch/epoch_domain.h"
#include "cairn/route/internal/bucket_snapshot.h"
#include "cairn/route/internal/chunk_emitter.h"
#include "cairn/route/internal/route_hash.h"
#include "cairn/route/route_concept.h"
#include "cairn/route/route_diagnostics.h"
#include "cairn/route/route_options.h"

CAIRN_NAMESPACE_BEGIN

namespace route_internal {
class ObjectRouteIndexTestPeer;
}  // namespace route_internal

template <typename Entry>
class ObjectRouteIndex {
  static_assert(RoutableEntry<Entry>,
                "a route Entry needs `std::uint64_t id() const`");

 public:
  using Owner = std::shared_ptr<Entry>;

  // Retire budget taken by PrepareWrite() with no lock held, for one write
  // the caller then makes under locks of its own. Move-only.
  class WriteBudget {
   public:
    WriteBudget() = default;

   private:
    friend class ObjectRouteIndex;
    std::optional<RetireReservation> reservation_;
  };

  explicit ObjectRouteIndex(const RouteOptions& options = {})
      : owned_domain_(options.epoch_domain == nullptr
                          ? std::make_unique<EpochDomain>(DefaultEpochOptions())
                          : nullptr),
        domain_(options.epoch_domain != nullptr ? options.epoch_domain
                                                : owned_domain_.get()),
        bucket_mask_(route_internal::RoundUpPowerOfTwo(
                         std::max<std::size_t>(options.bucket_count, 1)) -
                     1),
        stripe_mask_(route_internal::RoundUpPowerOfTwo(
                         std::max<std::size_t>(options.stripe_count, 1)) -
                     1),
        buckets_(new Bucket[bucket_mask_ + 1]),
        stripes_(new Stripe[stripe_mask_ + 1]) {}

  ObjectRouteIndex(const ObjectRouteIndex&) = delete;
  ObjectRouteIndex& operator=(const ObjectRouteIndex&) = delete;

  // No reader or writer may still be running. Live snapshots are freed here;
  // retired ones belong to the domain (an owned domain drains them now).
  ~ObjectRouteIndex() {
    for (std::size_t b = 0; b <= bucket_mask_; ++b) {
      const Snapshot* s = buckets_[b].current.load(std::memory_order_acquire);
      if (s != Snapshot::Empty()) Snapshot::DestroyWithRecords(s);
    }
  }

  // fn(Entry*) with the routed entry borrowed for the call (nullptr if not
  // routed), inside one epoch guard. Lock-free; no allocation after the
  // thread's first call.
  template <typename Fn>
  void WithEntry(std::string_view key, Fn&& fn) const {
    Guard guard = domain_->EnterOnThisThread();
    fn(Lookup(route_internal::RouteHash(key), key));
  }

  // fn(index, Entry*) for every key in order, all inside one guard. Loads
  // are staged across the batch: hashes and bucket loads first, then the
  // probe slots, then the lookups, so their misses overlap.
  template <typename Fn>
  void WithEntries(std::span<const std::string_view> keys, Fn&& fn) const {
    Guard guard = domain_->EnterOnThisThread();
    constexpr std::size_t kWindow = 16;
    std::uint64_t hashes[kWindow];
    const Snapshot* snapshots[kWindow];
    for (std::size_t base = 0; base < keys.size(); base += kWindow) {
      const std::size_t n = std::min(kWindow, keys.size() - base);
      for (std::size_t i = 0; i < n; ++i) {
        hashes[i] = route_internal::RouteHash(keys[base + i]);
        __builtin_prefetch(&buckets_[hashes[i] & bucket_mask_], 0, 3);
      }
      for (std::size_t i = 0; i < n; ++i) {
        snapshots[i] = buckets_[hashes[i] & bucket_mask_].current.load(
            std::memory_order_acquire);
        snapshots[i]->Prefetch(hashes[i]);
      }
      for (std::size_t i = 0; i < n; ++i) {
        const typename Snapshot::Slot* slot =
            snapshots[i]->Find(hashes[i], keys[base + i]);
        fn(base + i, slot == nullptr ? nullptr : slot->entry);
      }
    }
  }

  // A strong owner copied from the protected snapshot, or null (D2).
  Owner Pin(std::string_view key) const {
    Guard guard = domain_->EnterOnThisThread();
    const std::uint64_t hash = route_internal::RouteHash(key);
    const Snapshot* s = BucketFor(hash).current.load(std::memory_order_acquire);
    const typename Snapshot::Slot* slot = s->Find(hash, key);
    return slot == nullptr ? Owner() : s->owner(slot);
  }

  // fn(std::span<Owner>) per chunk of at most `chunk` (>= 1) owners. Owners
  // are copied whole bucket by whole bucket under a short guard per chunk;
  // fn runs with no guard held (D9). Entries published or unlinked during
  // the visit may or may not be emitted. Allocates the chunk buffer.
  template <typename Fn>
  void VisitHandles(std::size_t chunk, Fn&& fn) const {
    if (chunk == 0) chunk = 1;
    std::vector<Owner> staged;
    staged.reserve(chunk);
    std::size_t b = 0;
    while (b <= bucket_mask_) {
      {
        Guard guard = domain_->EnterOnThisThread();
        for (; b <= bucket_mask_ && staged.size() < chunk; ++b) {
          buckets_[b]
              .current.load(std::memory_order_acquire)
              ->ForEach([&](const Owner& owner) { staged.push_back(owner); });
        }
      }
      route_internal::EmitChunks(staged, chunk, /*flush=*/false, fn);
    }
    route_internal::EmitChunks(staged, chunk, /*flush=*/true, fn);
  }

  // Takes the retire budget a write to `key` needs (its bucket's current
  // snapshot, the unlink cost of the entry routed under `key` if any, and
  // room to grow), waiting for back-pressure like EpochDomain::Reserve() and
  // running due deleters. Call with no lock held. Errors: kResourceExhausted
  // (busy past the domain's deadline), kUnavailable (the domain is shut
  // down), kFailedPrecondition (called inside a guard of the route's domain
  // while the cap is full).
  Result<WriteBudget> PrepareWrite(std::string_view key) {
    const std::uint64_t hash = route_internal::RouteHash(key);
    std::size_t need, floor;
    {
      Guard guard = domain_->EnterOnThisThread();
      const Snapshot* s =
          BucketFor(hash).current.load(std::memory_order_acquire);
      need = floor = RetiredCost(s);
      if (const typename Snapshot::Slot* slot = s->Find(hash, key)) {
        need += RetainedBytes(*slot->entry);
        floor += kRecordBytes;
      }
    }
    need += need / 4;  // the bucket may grow before the write locks it
    floor += floor / 4;
    Result<RetireReservation> reserved = Take(need, floor, /*wait=*/true);
    if (!reserved.ok()) return std::move(reserved).status();
    WriteBudget budget;
    budget.reservation_.emplace(std::move(reserved).value());
    return budget;
  }

  // Runs the domain's reclaim if a write made under locks left one due
  // (those writes never run deleters themselves). Call with no lock held.
  void ReclaimIfDue() { domain_->ReclaimIfDue(); }

  // Insert-only (D3). OK: routed. kAlreadyExists: `key` is routed (nothing
  // changes). kResourceExhausted: the retired cap has no room, or a snapshot
  // could not be allocated. kUnavailable: the route's epoch domain is shut
  // down. On every error nothing changes and `owner` is not kept. Locks the
  // key's writer stripe to copy one bucket.
  //   budget == nullptr: the caller holds no lock; the write may wait for
  //     back-pressure and run deleters, after unlocking the stripe.
  //   budget != nullptr: the caller may hold locks; the write never waits
  //     and never runs a deleter (host code) here. It spends the budget
  //     (from PrepareWrite, or empty) and tops it up without waiting;
  //     without room it refuses at once. Call ReclaimIfDue() after unlocking.
  Status Publish(std::string_view key, Owner owner,
                 WriteBudget* budget = nullptr) {
    CAIRN_CHECK(owner != nullptr);
    const std::uint64_t hash = route_internal::RouteHash(key);
    std::unique_ptr<Record> record(new (std::nothrow) Record{owner});
    if (record == nullptr) return AllocationFailed();
    Status s = Write(
        hash, budget,
        [&](const Snapshot* old, std::size_t*, std::size_t*) {
          if (old->Find(hash, key) != nullptr) return AlreadyExistsError();
          return Status::Ok();
        },
        [&](const Snapshot* old) -> const Snapshot* {
          return old->CopyWithInsert(key, hash, record.get());
        });
    if (s.ok()) record.release();  // owned by the bucket's snapshots now
    return s;
  }

  // Matched unlink (D4): unlinks `key` only if it routes `entry` and
  // entry->id() == id. OK: unlinked. kNotFound: no such match (nothing to
  // do; a code-only status, no allocation). kInvalidArgument: null `entry`.
  // kResourceExhausted, kUnavailable: as Publish. On every error nothing
  // changes. `entry` is compared before it is dereferenced. Locks and
  // budget as Publish; a miss needs no budget. The unlinked owner is
  // released after a grace period, never under the stripe lock.
  Status EraseIfMatch(std::string_view key, std::uint64_t id,
                      const Entry* entry, WriteBudget* budget = nullptr) {
    if (entry == nullptr) return InvalidArgumentError();
    const std::uint64_t hash = route_internal::RouteHash(key);
    const typename Snapshot::Slot* slot = nullptr;
    return Write(
        hash, budget,
        [&](const Snapshot* old, std::size_t* extra, std::size_t* floor) {
          slot = old->Find(hash, key);
          if (slot == nullptr || slot->entry != entry || entry->id() != id) {
            return NotFoundError();
          }
          *extra = RetainedBytes(*entry);
          *floor = kRecordBytes;
          return Status::Ok();
        },
        [&](const Snapshot* old) {
          const Snapshot* fresh = old->CopyWithErase(slot);
          // The record rides on the retired snapshot and is freed with it.
          if (fresh != nullptr) old->AdoptUnlinked(slot->record);
          return fresh;
        });
  }

  // What an unlinked entry adds to the retired bytes charged to the epoch
  // domain until its grace period ends: its route record and the entry
  // object, plus `entry.retained_bytes()` when Entry declares it (the memory
  // the host says the entry keeps alive). See "Retired bytes" in the file
  // comment.
  static std::size_t RetainedBytes(const Entry& entry) noexcept {
    if constexpr (requires { entry.retained_bytes(); }) {
      return kRecordBytes + static_cast<std::size_t>(entry.retained_bytes());
    } else {
      return kRecordBytes;
    }
  }

  // Occupancy walks every bucket under short guards (not an atomic snapshot
  // of the whole route); epoch figures come from the domain. Cold path.
  RouteDiagnostics Diagnostics() const {
    RouteDiagnostics d;
    d.bucket_count = bucket_mask_ + 1;
    for (std::size_t b = 0; b <= bucket_mask_; ++b) {
      Guard guard = domain_->EnterOnThisThread();
      const Snapshot* s = buckets_[b].current.load(std::memory_order_acquire);
      d.entries += s->size();
      if (!s->empty()) {
        ++d.nonempty_buckets;
        d.snapshot_bytes += s->bytes();
      }
      d.max_bucket_entries =
          std::max<std::size_t>(d.max_bucket_entries, s->size());
    }
    d.publications = publications_.load(std::memory_order_relaxed);
    d.copied_bytes = copied_bytes_.load(std::memory_order_relaxed);
    const EpochDiagnostics e = domain_->Diagnostics();
    d.retired_bytes = e.retired_bytes;
    d.retired_count = e.retired_count;
    d.busy_count = e.busy_count + refusals_.load(std::memory_order_relaxed);
    d.stall_reports = e.stall_reports;
    d.oldest_reader_age = e.oldest_guard_age;
    return d;
  }

  std::size_t bucket_count() const noexcept { return bucket_mask_ + 1; }
  EpochDomain& epoch_domain() const noexcept { return *domain_; }

 private:
  friend class route_internal::ObjectRouteIndexTestPeer;

  using Snapshot = route_internal::BucketSnapshot<Entry>;
  using Record = route_internal::RouteRecord<Entry>;
  // An unlinked entry's fixed share of the retired bytes: its record and the
  // entry object the record's owner may be the last to hold.
  static constexpr std::size_t kRecordBytes = sizeof(Record) + sizeof(Entry);

  struct Bucket {
    std::atomic<const Snapshot*> current{Snapshot::Empty()};
  };
  struct alignas(64) Stripe {
    Mutex mu;
  };

  static EpochOptions DefaultEpochOptions() {
    EpochOptions options;
    options.name = "route";
    return options;
  }

  Entry* Lookup(std::uint64_t hash, std::string_view key) const noexcept {
    const Snapshot* s = BucketFor(hash).current.load(std::memory_order_acquire);
    const typename Snapshot::Slot* slot = s->Find(hash, key);
    return slot == nullptr ? nullptr : slot->entry;
  }

  static Status AllocationFailed() { return ResourceExhaustedError(); }

  static std::size_t RetiredCost(const Snapshot* s) noexcept {
    // The empty snapshot is shared and never retired.
    return s == Snapshot::Empty() ? 0 : s->bytes();
  }

  // Reserves `need` retired bytes (waiting for back-pressure if `wait`). A
  // request larger than the domain's whole cap (kInvalidArgument: an entry
  // declaring more than the cap) is retried as `floor`, without the
  // declared bytes, so such an entry can still be unlinked. A shut-down
  // domain answers kUnavailable, passed on as is.
  Result<RetireReservation> Take(std::size_t need, std::size_t floor,
                                 bool wait) {
    Result<RetireReservation> now = domain_->TryReserve(need);
    if (!now.ok() && now.status().code() == StatusCode::kInvalidArgument &&
        floor < need) {
      return Take(floor, floor, wait);
    }
    if (now.ok() || !wait ||
        now.status().code() != StatusCode::kResourceExhausted) {
      return now;
    }
    return domain_->Reserve(need);
  }

  // One copy-on-write step on the bucket of `hash`. Under the stripe lock,
  // check(old, &extra, &floor) decides whether to change the bucket: a
  // non-OK Status refuses (returned as is, nothing changed); OK proceeds,
  // and `extra` is what the write retires besides `old` (an unlinked
  // entry's RetainedBytes, `floor` if that exceeds the cap). Then the
  // retire budget for it all is put in hand before build(old) makes the
  // replacement (null: allocation failure, nothing changed): from `locked`
  // (see Publish) or taken without waiting under the stripe. Without room:
  // a locked write refuses at once; an unlocked one drops the stripe, waits
  // in Reserve() (which may run deleters, i.e. host code, so never under a
  // cairn lock: L3) and starts over, a bounded number of times.
  template <typename Check, typename Build>
  Status Write(std::uint64_t hash, WriteBudget* locked, Check&& check,
               Build&& build) {
    constexpr int kMaxWaits = 4;
    Bucket& bucket = BucketFor(hash);
    WriteBudget own;
    WriteBudget* budget = locked != nullptr ? locked : &own;
    std::optional<RetireReservation>& reservation = budget->reservation_;
    for (int waits = 0;; ++waits) {
      const Snapshot* old = nullptr;
      std::size_t need = 0;
      std::size_t floor = 0;
      {
        MutexLock lock(&StripeFor(hash).mu);
        old = bucket.current.load(std::memory_order_acquire);
        std::size_t extra = 0;
        std::size_t extra_floor = 0;
        CAIRN_RETURN_IF_ERROR(check(old, &extra, &extra_floor));
        need = RetiredCost(old) + extra;
        floor = RetiredCost(old) + extra_floor;
        if (!reservation.has_value() || reservation->bytes() < need) {
          reservation.reset();
          Result<RetireReservation> now = Take(need, floor, /*wait=*/false);
          if (now.ok()) {
            reservation.emplace(std::move(now).value());
          } else if (now.status().code() != StatusCode::kResourceExhausted) {
            return std::move(now).status();  // shut down
          }
        }
        if (reservation.has_value()) {
          const Snapshot* fresh = build(old);
          if (fresh == nullptr) return AllocationFailed();
          // Release: the snapshot's contents (and the entries it owns,
          // initialised before publication, D8) reach acquiring readers.
          bucket.current.store(fresh, std::memory_order_release);
          // Counted under the stripe: once it is released, another writer
          // may replace and retire `fresh`, and this thread holds no guard.
          publications_.fetch_add(1, std::memory_order_relaxed);
          copied_bytes_.fetch_add(RetiredCost(fresh),
                                  std::memory_order_relaxed);
        }
      }
      if (!reservation.has_value()) {  // no room under the stripe
        if (locked != nullptr || waits == kMaxWaits) {
          refusals_.fetch_add(1, std::memory_order_relaxed);
          return ResourceExhaustedError();
        }
        Result<RetireReservation> waited =
            Take(need + need / 4, floor + floor / 4, /*wait=*/true);
        if (!waited.ok()) return std::move(waited).status();
        reservation.emplace(std::move(waited).value());
        continue;
      }
      if (old != Snapshot::Empty()) {
        domain_->RetireReserved(std::move(*reservation),
                                const_cast<Snapshot*>(old), &Snapshot::Destroy,
                                locked != nullptr
                                    ? EpochDomain::Reclaim::kDeferred
                                    : EpochDomain::Reclaim::kAllowed);
      }
      reservation.reset();
      return Status::Ok();
    }
  }

  const Bucket& BucketFor(std::uint64_t hash) const noexcept {
    return buckets_[hash & bucket_mask_];
  }
  Bucket& BucketFor(std::uint64_t hash) noexcept {
    return buckets_[hash & bucket_mask_];
  }
  Stripe& StripeFor(std::uint64_t hash) noexcept {
    return stripes_[(hash & bucket_mask_) & stripe_mask_];
  }

  const std::unique_ptr<EpochDomain> owned_domain_;
  EpochDomain* const domain_;
  const std::size_t bucket_mask_;
  const std::size_t stripe_mask_;
  const std::unique_ptr<Bucket[]> buckets_;
  const std::unique_ptr<Stripe[]> stripes_;
  std::atomic<std::uint64_t> publications_{0};
  std::atomic<std::uint64_t> copied_bytes_{0};
  std::atomic<std::uint64_t> refusals_{0};  // locked writes without room
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_ROUTE_OBJECT_ROUTE_INDEX_H_
