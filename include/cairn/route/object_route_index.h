// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ObjectRouteIndex: the read-path RFC's "Proposed Route". A bucket table
// (an atomic pointer to an array of buckets), each bucket an atomic pointer
// to a BucketSnapshot that owns its key strings and entry owners; fixed
// writer stripes; one shared empty snapshot. Readers never lock: one epoch
// guard per point request or batch, an acquire load of the table and then
// of the bucket, a lookup by string_view, and the entry is borrowed (no
// owner copy) for the callback. Writers lock the key's stripe, copy only
// that bucket, publish the copy with release, and retire the old snapshot
// into the EpochDomain with its byte size. An unlink that can buries the
// entry's slot in place instead, keeping the snapshot and retiring only the
// entry's record (docs/route.md, "Unlinking in place").
//
// Resizing: the table starts at RouteOptions::bucket_count buckets and
// doubles (halves) when the mean entries per bucket leaves the band
// [0.5, 2] (kMinMeanQuarters, kMaxMeanQuarters); writes move its buckets to
// the new
// table a slice at a time, each under its writer stripe, and readers never
// wait for it (see "Resizing" below and docs/concurrency.md).
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
// else is locked and no host code runs under it (L3). A write that then
// finds a resize due or running try-locks the route's resize mutex (never
// waits for it) and, holding it, locks up to kResizeSlice stripes one at a
// time, so the order is resize mutex -> writer stripe. Callbacks run inside
// the read guard: they may take object and group locks, but must not call
// the route domain's Barrier() or Shutdown(), and nothing they are handed may
// outlive the callback (D1). A write may wait for back-pressure (E4), so it
// must not be called from inside a callback of the same route.

#ifndef CAIRN_ROUTE_OBJECT_ROUTE_INDEX_H_
#define CAIRN_ROUTE_OBJECT_ROUTE_INDEX_H_

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/base/check.h"
#include "cairn/base/internal/hash.h"
#include "cairn/base/internal/lazy_array.h"
#include "cairn/base/mutex.h"
#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/epoch/epoch_domain.h"
#include "cairn/route/internal/bucket_snapshot.h"
#include "cairn/route/internal/chunk_emitter.h"
#include "cairn/route/internal/route_table.h"
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

  // The band a resizing route keeps the mean entries per bucket in: it
  // doubles its table when the mean rises above 2 and halves it (never
  // below the starting size) when the mean falls below 0.5. A factor of four
  // between the two, so a resize leaves the mean at about 1, in the middle
  // of the band, and churn at one population never resizes back and forth.
  // Small buckets keep a publication's copy to a few cache lines
  // (docs/route.md, "Resizing").
  // In quarters of an entry: the band is [kMinMeanQuarters / 4,
  // kMaxMeanQuarters / 4] entries per bucket.
  static constexpr std::size_t kMaxMeanQuarters = 8;
  static constexpr std::size_t kMinMeanQuarters = 2;
  // Buckets a write moves to the new table while a resize is in progress
  // (each under its own writer stripe, one at a time).
  static constexpr std::size_t kResizeSlice = 8;
  // Keys a batch lookup stages together (WithEntries).
  static constexpr std::size_t kBatchWindow = 32;
  // Unlinks EraseEachIfMatch stages together.
  static constexpr std::size_t kUnlinkWindow = 8;

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
        min_buckets_(
            std::bit_ceil(std::max<std::size_t>(options.bucket_count, 1))),
        fixed_(options.fixed_bucket_count),
        // Never more stripes than the smallest table has buckets, so every
        // bucket of every table size belongs to exactly one stripe.
        stripe_mask_(std::min(std::bit_ceil(std::max<std::size_t>(
                                  options.stripe_count, 1)),
                              min_buckets_) -
                     1),
        stripes_(stripe_mask_ + 1) {
    Table* table = Table::Allocate(min_buckets_);
    // A constructor reports out of memory the standard way (the registry
    // building a tenant turns it into kResourceExhausted).
    if (table == nullptr) throw std::bad_alloc();
    table_.store(table, std::memory_order_relaxed);
    table_size_.store(min_buckets_, std::memory_order_relaxed);
  }

  ObjectRouteIndex(const ObjectRouteIndex&) = delete;
  ObjectRouteIndex& operator=(const ObjectRouteIndex&) = delete;

  // No reader or writer may still be running. Live snapshots and tables
  // are freed here (a resize in progress holds live snapshots in both of
  // its tables); retired ones belong to the domain (an owned domain drains
  // them now).
  ~ObjectRouteIndex() {
    Table* t = table_.load(std::memory_order_acquire);
    while (t != nullptr) {
      for (std::size_t b = 0; b < t->size(); ++b) {
        const Snapshot* s = t->at(b).load(std::memory_order_acquire);
        if (s != Snapshot::Empty() && s != Snapshot::Moved()) {
          Snapshot::DestroyWithRecords(s);
        }
      }
      Table* next = t->next.load(std::memory_order_acquire);
      Table::Destroy(t);
      t = next;
    }
    MutexLock lock(&resize_mu_);
    for (Table* kept : kept_tables_) Table::Destroy(kept);
  }

  // fn(Entry*) with the routed entry borrowed for the call (nullptr if not
  // routed), inside one epoch guard. Lock-free; no allocation after the
  // thread's first call.
  template <typename Fn>
  [[gnu::always_inline]] void WithEntry(std::string_view key, Fn&& fn) const {
    Guard guard = domain_->EnterOnThisThread();
    fn(Lookup(base_internal::RouteHash(key), key));
  }

  // fn(index, Entry*) for every key in order, all inside one guard. Loads
  // are staged across windows of kBatchWindow keys so that each key's
  // dependent misses overlap with the other keys' ones: (1) hash and
  // prefetch the bucket pointer; (2) load the snapshot pointer and prefetch
  // its first lines (header and slots); (3) probe the slots by hash and
  // prefetch the candidate's key bytes and its entry, whose lock the
  // callback takes next; (4) compare the key and run the callback.
  template <typename Fn>
  void WithEntries(std::span<const std::string_view> keys, Fn&& fn) const {
    WithEntriesStaged<kBatchWindow>(keys, fn);
  }

  // A strong owner copied from the protected snapshot, or null (D2).
  Owner Pin(std::string_view key) const {
    Guard guard = domain_->EnterOnThisThread();
    const std::uint64_t hash = base_internal::RouteHash(key);
    const Snapshot* s = Resolve(table_.load(std::memory_order_acquire), hash);
    const typename Snapshot::Hit hit = s->Find(hash, key);
    return hit ? s->owner(hit.slot) : Owner();
  }

  // fn(std::span<Owner>) per chunk of at most `chunk` (>= 1) owners. Owners
  // are copied whole bucket by whole bucket under a short guard per chunk;
  // fn runs with no guard held (D9). Every entry routed for the whole visit
  // is emitted exactly once, also while the table resizes (keys are walked
  // in the order of their bit-reversed hash, in which a bucket of any table
  // size is one interval); entries published or unlinked during the visit
  // may or may not be emitted. Allocates the chunk buffer.
  template <typename Fn>
  void VisitHandles(std::size_t chunk, Fn&& fn) const {
    if (chunk == 0) chunk = 1;
    std::vector<Owner> staged;
    staged.reserve(chunk);
    // Every key whose reversed hash is below `cursor` has been visited.
    std::uint64_t cursor = 0;
    bool done = false;
    while (!done) {
      {
        Guard guard = domain_->EnterOnThisThread();
        const Table* table = table_.load(std::memory_order_acquire);
        while (!done && staged.size() < chunk) {
          // A hash whose bucket, in any table, holds the key at `cursor`.
          const std::uint64_t probe = route_internal::ReverseBits(cursor);
          const Table* at = table;
          const Snapshot* s = at->at(probe).load(std::memory_order_acquire);
          while (s == Snapshot::Moved()) {
            at = at->next.load(std::memory_order_acquire);
            s = at->at(probe).load(std::memory_order_acquire);
          }
          s->ForEachSlot([&](const typename Snapshot::Slot& slot) {
            if (route_internal::ReverseBits(slot.hash) >= cursor) {
              staged.push_back(slot.record->owner);
            }
          });
          // Past this bucket's interval: its top log2_size bits plus one.
          const unsigned bits = at->log2_size();
          if (bits == 0) {
            done = true;
          } else {
            const std::uint64_t top = cursor >> (64 - bits);
            if (top == at->mask()) {
              done = true;
            } else {
              cursor = (top + 1) << (64 - bits);
            }
          }
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
    const std::uint64_t hash = base_internal::RouteHash(key);
    std::size_t need, floor;
    {
      Guard guard = domain_->EnterOnThisThread();
      const Snapshot* s = Resolve(table_.load(std::memory_order_acquire), hash);
      need = floor = RetiredCost(s);
      if (const typename Snapshot::Hit hit = s->Find(hash, key)) {
        need += RetainedBytes(*hit.entry);
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
  // (those writes never run deleters themselves), and starts a resize such
  // a write found due (allocating and clearing the new table is O(table
  // size), so it never runs under the caller's locks). Call with no lock
  // held. When nothing is due: a relaxed load, the epoch domain's
  // thread-local bag lookup, and two more relaxed loads.
  void ReclaimIfDue() {
    MaybeResize(/*locked=*/false);
    domain_->ReclaimIfDue();
  }

  // Insert-only (D3). OK: routed. kAlreadyExists: `key` is routed (nothing
  // changes). kResourceExhausted: the retired cap has no room, or a snapshot
  // could not be allocated. kUnavailable: the route's epoch domain is shut
  // down. On every error nothing changes and `owner` is not kept. Locks the
  // key's writer stripe to copy one bucket; then, if the table is due to
  // resize or resizing, moves up to kResizeSlice buckets, each under its
  // own stripe (see "Resizing" in docs/route.md).
  //   budget == nullptr: the caller holds no lock; the write may wait for
  //     back-pressure and run deleters, after unlocking the stripe.
  //   budget != nullptr: the caller may hold locks; the write never waits
  //     and never runs a deleter (host code) here. It spends the budget
  //     (from PrepareWrite, or empty) and tops it up without waiting;
  //     without room it refuses at once. Call ReclaimIfDue() after unlocking.
  Status Publish(std::string_view key, Owner owner,
                 WriteBudget* budget = nullptr) {
    CAIRN_CHECK(owner != nullptr);
    const std::uint64_t hash = base_internal::RouteHash(key);
    std::unique_ptr<Record, RecordDeleter> record(
        Record::New(std::move(owner)));
    if (record == nullptr) return AllocationFailed();
    Status s = Write(
        hash, budget,
        [&](const Snapshot* old, Change*) {
          if (old->Find(hash, key)) return AlreadyExistsError();
          return Status::Ok();
        },
        [&](const Snapshot* old) -> const Snapshot* {
          return old->CopyWithInsert(key, hash, record.get());
        });
    if (!s.ok()) return s;
    record.release();  // owned by the bucket's snapshots now
    entries_.fetch_add(1, std::memory_order_relaxed);
    MaybeResize(budget != nullptr);
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
    return EraseHashedIfMatch(base_internal::RouteHash(key), key, id, entry,
                              budget);
  }

  // One matched unlink of EraseEachIfMatch.
  struct Unlinking {
    std::string_view key;
    std::uint64_t id = 0;
    const Entry* entry = nullptr;
  };

  // EraseIfMatch for each of `items`, in order, as that loop would (each
  // its own write: stripe, copy, retire), with what the unlinks read
  // fetched ahead: the buckets and writer stripes of a window of items are
  // prefetched before the window's unlinks run, so their cache misses
  // overlap instead of following one another (a group teardown unlinks
  // every member back to back). done(i, status) after item i's unlink,
  // with EraseIfMatch's status. Locks and budget as EraseIfMatch.
  // With a budget (the caller's locked write, which never waits for a grace
  // period and never runs a deleter) a window's unlinks run inside the one
  // guard its prefetches entered, so each write's guard is a nested one
  // (no fence), and the window counts its unlinks once and then steps a
  // resize once (a teardown moves a resize a slice per window, not per
  // unlink). `done` then runs inside that guard too: it must not wait for
  // the route's domain (Barrier) nor hand it a deleter to run.
  template <typename Done>
  void EraseEachIfMatch(std::span<const Unlinking> items, WriteBudget* budget,
                        Done&& done) {
    Stripe* const stripes = stripes_.Get();
    std::uint64_t hashes[kUnlinkWindow];
    for (std::size_t base = 0; base < items.size(); base += kUnlinkWindow) {
      const std::size_t n = std::min(kUnlinkWindow, items.size() - base);
      // Under a guard: hash the window's keys and fetch their buckets and
      // stripes, then their snapshots.
      auto stage = [&] {
        const Table* table = table_.load(std::memory_order_acquire);
        for (std::size_t i = 0; i < n; ++i) {
          hashes[i] = base_internal::RouteHash(items[base + i].key);
          __builtin_prefetch(&table->at(hashes[i]), 0, 3);
          if (stripes != nullptr) {
            __builtin_prefetch(&stripes[hashes[i] & stripe_mask_], 1, 3);
          }
        }
        for (std::size_t i = 0; i < n; ++i) {
          const char* lines =
              reinterpret_cast<const char*>(Resolve(table, hashes[i]));
          __builtin_prefetch(lines, 0, 3);
          __builtin_prefetch(lines + 64, 0, 3);
          __builtin_prefetch(lines + 128, 0, 3);
        }
      };
      auto unlink = [&] {
        std::size_t unlinked = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const Unlinking& item = items[base + i];
          Status s = item.entry == nullptr
                         ? InvalidArgumentError()
                         : UnlinkHashedIfMatch(hashes[i], item.key, item.id,
                                               item.entry, budget);
          if (s.ok()) ++unlinked;
          done(base + i, s);
        }
        return unlinked;
      };
      std::size_t unlinked = 0;
      if (budget != nullptr) {
        Guard guard = domain_->EnterOnThisThread();
        stage();
        unlinked = unlink();
      } else {
        {
          Guard guard = domain_->EnterOnThisThread();
          stage();
        }
        // An unlocked write may wait for back-pressure, which must not
        // happen inside a guard: each enters its own (a resize may retire
        // the staged table once that guard ended; the writes load the
        // table again).
        unlinked = unlink();
      }
      if (unlinked != 0) {
        entries_.fetch_sub(unlinked, std::memory_order_relaxed);
        MaybeResize(budget != nullptr);
      }
    }
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

  // Occupancy walks every bucket of the current table (and of the table a
  // resize in progress moves to) under one guard; it is not an atomic
  // snapshot of the route while writers run. Epoch figures come from the
  // domain. Cold path.
  RouteDiagnostics Diagnostics() const {
    RouteDiagnostics d;
    {
      Guard guard = domain_->EnterOnThisThread();
      const Table* t = table_.load(std::memory_order_acquire);
      d.bucket_count = t->size();
      d.table_bytes = t->bytes();
      for (; t != nullptr; t = t->next.load(std::memory_order_acquire)) {
        if (t->size() != d.bucket_count) {
          d.resize_target_bucket_count = t->size();
          d.table_bytes += t->bytes();
        }
        for (std::size_t b = 0; b < t->size(); ++b) {
          const Snapshot* s = t->at(b).load(std::memory_order_acquire);
          if (s == Snapshot::Moved()) continue;
          d.entries += s->size();
          if (!s->empty()) {
            ++d.nonempty_buckets;
            d.snapshot_bytes += s->bytes();
          }
          d.max_bucket_entries =
              std::max<std::size_t>(d.max_bucket_entries, s->size());
        }
      }
    }
    std::uint64_t retired_by_writes = 0;
    const Stripe* stripes = stripes_.IfMade();
    for (std::size_t i = 0; stripes != nullptr && i <= stripe_mask_; ++i) {
      const Stripe& stripe = stripes[i];
      d.publications += stripe.publications.load(std::memory_order_relaxed);
      d.copied_bytes += stripe.copied_bytes.load(std::memory_order_relaxed);
      retired_by_writes += stripe.retired_bytes.load(std::memory_order_relaxed);
    }
    d.resizes = resizes_.load(std::memory_order_relaxed);
    d.resize_copied_bytes =
        resize_copied_bytes_.load(std::memory_order_relaxed);
    d.retired_bytes_total =
        retired_by_writes + retired_total_.load(std::memory_order_relaxed);
    const EpochDiagnostics e = domain_->Diagnostics();
    d.retired_bytes = e.retired_bytes;
    d.retired_count = e.retired_count;
    d.busy_count = e.busy_count + refusals_.load(std::memory_order_relaxed);
    d.stall_reports = e.stall_reports;
    d.oldest_reader_age = e.oldest_guard_age;
    return d;
  }

  // The current table's bucket count (a resize in progress still counts
  // the table it moves away from).
  std::size_t bucket_count() const noexcept {
    return table_size_.load(std::memory_order_relaxed);
  }
  EpochDomain& epoch_domain() const noexcept { return *domain_; }

 private:
  friend class route_internal::ObjectRouteIndexTestPeer;

  using Snapshot = route_internal::BucketSnapshot<Entry>;
  using Record = route_internal::RouteRecord<Entry>;
  using Table = route_internal::RouteTable<Snapshot>;
  // An unlinked entry's fixed share of the retired bytes: its record and the
  // entry object the record's owner may be the last to hold.
  static constexpr std::size_t kRecordBytes = Record::kBlock + sizeof(Entry);
  struct RecordDeleter {
    void operator()(Record* record) const noexcept { Record::Delete(record); }
  };
  // EpochDomain deleter of a record retired on its own (a buried entry's).
  static void DeleteRecord(void* record) noexcept {
    Record::Delete(static_cast<Record*>(record));
  }

  // EraseIfMatch with the key's hash already computed.
  Status EraseHashedIfMatch(std::uint64_t hash, std::string_view key,
                            std::uint64_t id, const Entry* entry,
                            WriteBudget* budget) {
    Status s = UnlinkHashedIfMatch(hash, key, id, entry, budget);
    if (!s.ok()) return s;
    entries_.fetch_sub(1, std::memory_order_relaxed);
    MaybeResize(budget != nullptr);
    return s;
  }

  // The unlink itself; the caller counts it in entries_ and then steps a
  // resize (MaybeResize).
  Status UnlinkHashedIfMatch(std::uint64_t hash, std::string_view key,
                             std::uint64_t id, const Entry* entry,
                             WriteBudget* budget) {
    const typename Snapshot::Slot* slot = nullptr;
    return Write(
        hash, budget,
        [&](const Snapshot* old, Change* change) {
          const typename Snapshot::Hit hit = old->Find(hash, key);
          if (!hit || hit.entry != entry || entry->id() != id) {
            return NotFoundError();
          }
          slot = hit.slot;
          change->extra = RetainedBytes(*entry);
          change->extra_floor = kRecordBytes;
          change->unlinked = slot->record;
          // In place when the bucket allows it: no copy, and only the
          // record is retired (docs/route.md, "Unlinking in place").
          if (old->CanBury()) change->buried = slot;
          return Status::Ok();
        },
        [&](const Snapshot* old) { return old->CopyWithErase(slot); });
  }

  // Packed (not a cache line each): stripes are taken by writers only, and
  // an empty route should stay small (docs/route.md, "Memory"). Each keeps
  // the write figures of its own publications, written only under `mu`
  // (a load and a store, no read-modify-write) and read lock-free by
  // Diagnostics(): shared counters would put contended atomic RMWs on every
  // publication (docs/route.md, "Cost of a publication").
  // One per cache line, so writers of neighbouring stripes share none.
  struct alignas(64) Stripe {
    Mutex mu;
    std::atomic<std::uint64_t> publications{0};
    std::atomic<std::uint64_t> copied_bytes{0};
    std::atomic<std::uint64_t> retired_bytes{0};

    void Count(std::uint64_t copied, std::uint64_t retired) noexcept {
      Bump(publications, 1);
      Bump(copied_bytes, copied);
      Bump(retired_bytes, retired);
    }
    static void Bump(std::atomic<std::uint64_t>& cell,
                     std::uint64_t by) noexcept {
      cell.store(cell.load(std::memory_order_relaxed) + by,
                 std::memory_order_relaxed);
    }
  };

  static EpochOptions DefaultEpochOptions() {
    EpochOptions options;
    options.name = "route";
    return options;
  }

  // The snapshot routing `hash`, starting at `table` (loaded under the
  // caller's guard) and following `next` past buckets a resize moved.
  [[gnu::always_inline]] static const Snapshot* Resolve(
      const Table* table, std::uint64_t hash) noexcept {
    const Snapshot* s = table->at(hash).load(std::memory_order_acquire);
    while (s == Snapshot::Moved()) [[unlikely]] {
        table = table->next.load(std::memory_order_acquire);
        s = table->at(hash).load(std::memory_order_acquire);
      }
    return s;
  }

  // Caller holds a guard.
  [[gnu::always_inline]] Entry* Lookup(std::uint64_t hash,
                                       std::string_view key) const noexcept {
    const Snapshot* s = Resolve(table_.load(std::memory_order_acquire), hash);
    return s->Find(hash, key).entry;
  }

  // The full probe out of line, for the staged loop's rare hash collision
  // (Find is always inlined; inlined here it only adds register pressure).
  [[gnu::noinline]] static typename Snapshot::Hit FindCold(
      const Snapshot* s, std::uint64_t hash, std::string_view key) noexcept {
    return s->Find(hash, key);
  }

  // WithEntries with a window of kWindow keys (the bench sweeps it).
  template <std::size_t kWindow, typename Fn>
  void WithEntriesStaged(std::span<const std::string_view> keys, Fn& fn) const {
    Guard guard = domain_->EnterOnThisThread();
    const Table* table = table_.load(std::memory_order_acquire);
    std::uint64_t hashes[kWindow];
    const Snapshot* snapshots[kWindow];
    typename Snapshot::Hit candidates[kWindow];
    for (std::size_t base = 0; base < keys.size(); base += kWindow) {
      const std::size_t n = std::min(kWindow, keys.size() - base);
      for (std::size_t i = 0; i < n; ++i) {
        hashes[i] = base_internal::RouteHash(keys[base + i]);
        __builtin_prefetch(&table->at(hashes[i]), 0, 3);
      }
      for (std::size_t i = 0; i < n; ++i) {
        snapshots[i] = Resolve(table, hashes[i]);
        const char* lines = reinterpret_cast<const char*>(snapshots[i]);
        __builtin_prefetch(lines, 0, 3);
        __builtin_prefetch(lines + 64, 0, 3);
        __builtin_prefetch(lines + 128, 0, 3);
      }
      for (std::size_t i = 0; i < n; ++i) {
        candidates[i] = snapshots[i]->FindHash(hashes[i]);
        if (candidates[i]) snapshots[i]->PrefetchCandidate(candidates[i]);
      }
      for (std::size_t i = 0; i < n; ++i) {
        typename Snapshot::Hit hit = candidates[i];
        if (hit && !snapshots[i]->KeyEquals(*hit.slot, keys[base + i]))
            [[unlikely]] {
          // Another key with the same 64-bit hash: the full probe.
          hit = FindCold(snapshots[i], hashes[i], keys[base + i]);
        }
        fn(base + i, hit.entry);
      }
    }
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

  // What check() tells Write() about a change it allows: what the write
  // retires besides the old snapshot (an unlinked entry's RetainedBytes,
  // and `extra_floor` to charge instead if that exceeds the cap), and the
  // record of the entry it unlinks, which rides on the retired snapshot.
  // `buried`: the unlink is made in place instead (Snapshot::Bury), nothing
  // is built, and the record alone is retired.
  struct Change {
    std::size_t extra = 0;
    std::size_t extra_floor = 0;
    Record* unlinked = nullptr;
    const typename Snapshot::Slot* buried = nullptr;
  };

  // One copy-on-write step on the bucket of `hash`. Under a guard and the
  // stripe lock, the bucket is found through the current table (following
  // `next` past a bucket a resize moved: under the stripe no bucket of it
  // can move), and check(old, &change) decides whether to change it: a
  // non-OK Status refuses (returned as is, nothing changed); OK proceeds.
  // build(old) makes the replacement (null: allocation failure, nothing
  // changed). The replacement is published, and `old` retired, in one step
  // of the domain (TryUnlinkAndRetire: the retire budget is taken first,
  // from the thread's credit, and without it nothing is published), or
  // with the reservation in hand (from PrepareWrite, see Publish, or waited
  // for below) if it covers the write; the replacement is dropped unseen if
  // neither has room.
  // Without room: a locked write refuses at once; an unlocked one drops the
  // stripe and the guard, waits in Reserve() and starts over, a bounded
  // number of times. Reserve() may run deleters, which are host code, so it
  // never runs under a cairn lock (L3).
  template <typename Check, typename Build>
  Status Write(std::uint64_t hash, WriteBudget* locked, Check&& check,
               Build&& build) {
    constexpr int kMaxWaits = 4;
    WriteBudget own;
    WriteBudget* budget = locked != nullptr ? locked : &own;
    std::optional<RetireReservation>& reservation = budget->reservation_;
    // Made by the route's first write (an empty route stays small:
    // docs/route.md, "Memory").
    Stripe* const stripes = stripes_.Get();
    if (stripes == nullptr) return AllocationFailed();
    for (int waits = 0;; ++waits) {
      // What the write retires: the replaced snapshot, or the record of an
      // entry buried in place.
      void* retired = nullptr;
      EpochDomain::Deleter deleter = nullptr;
      std::size_t need = 0;
      std::size_t floor = 0;
      Status s;
      {
        // The guard keeps the table alive: a resize may retire it while
        // this writer waits for the stripe.
        Guard guard = domain_->EnterOnThisThread();
        Stripe& stripe = stripes[hash & stripe_mask_];
        MutexLock lock(&stripe.mu);
        Table* table = table_.load(std::memory_order_acquire);
        const Snapshot* old = table->at(hash).load(std::memory_order_acquire);
        while (old == Snapshot::Moved()) {
          table = table->next.load(std::memory_order_acquire);
          old = table->at(hash).load(std::memory_order_acquire);
        }
        Change change;
        CAIRN_RETURN_IF_ERROR(check(old, &change));
        const Snapshot* fresh = nullptr;
        if (change.buried != nullptr) {
          retired = change.unlinked;
          deleter = &DeleteRecord;
          need = change.extra;
          floor = change.extra_floor;
        } else {
          retired = const_cast<Snapshot*>(old);
          deleter = &Snapshot::Destroy;
          need = RetiredCost(old) + change.extra;
          floor = RetiredCost(old) + change.extra_floor;
          // Filling an empty bucket retires nothing, but a shut-down domain
          // refuses every write alike.
          if (old == Snapshot::Empty() && domain_->shut_down()) {
            return UnavailableError();
          }
          fresh = build(old);
          if (fresh == nullptr) return AllocationFailed();
        }
        auto unlink = [&] {
          if (change.buried != nullptr) {
            old->Bury(change.buried);
            stripe.Count(0, need);
            return;
          }
          // Release: the snapshot's contents (and the entries it owns,
          // initialised before publication, D8) reach acquiring readers.
          table->at(hash).store(fresh, std::memory_order_release);
          // The unlinked entry's record rides on the retired snapshot and
          // is freed with it.
          if (change.unlinked != nullptr) old->AdoptUnlinked(change.unlinked);
          // Counted under the stripe: once it is released, another writer
          // may replace and retire `fresh`.
          stripe.Count(RetiredCost(fresh), need);
        };
        if (old == Snapshot::Empty()) {  // shared: nothing to retire
          unlink();
          reservation.reset();
          return Status::Ok();
        }
        const bool covered =
            reservation.has_value() && reservation->bytes() >= need;
        if (covered && change.buried == nullptr) {
          unlink();
        } else {
          // A bury charges its record alone, so a reservation (sized by
          // PrepareWrite for a copy) is its fallback, not its charge.
          if (!covered) reservation.reset();
          s = domain_->TryUnlinkAndRetire(retired, need, deleter, unlink);
          if (s.code() == StatusCode::kInvalidArgument && floor < need) {
            // An entry declaring more than the whole cap: charged without
            // its declared bytes, so it can still be unlinked.
            s = domain_->TryUnlinkAndRetire(retired, floor, deleter, unlink);
          }
          if (covered) {
            if (s.code() == StatusCode::kResourceExhausted) {
              unlink();  // retired with the reservation below
              s = Status::Ok();
            } else {
              reservation.reset();
            }
          }
          if (!s.ok() && fresh != nullptr && fresh != Snapshot::Empty()) {
            Snapshot::Destroy(const_cast<Snapshot*>(fresh));  // never seen
          }
          if (!s.ok() && s.code() != StatusCode::kResourceExhausted) {
            return s;  // shut down
          }
        }
      }
      if (s.ok()) {
        if (reservation.has_value()) {
          domain_->RetireReserved(std::move(*reservation), retired, deleter,
                                  EpochDomain::Reclaim::kDeferred);
          reservation.reset();
        }
        if (locked == nullptr) domain_->ReclaimIfDue();
        return s;
      }
      // No room under the stripe.
      if (locked != nullptr || waits == kMaxWaits) {
        refusals_.fetch_add(1, std::memory_order_relaxed);
        return ResourceExhaustedError();
      }
      Result<RetireReservation> waited =
          Take(need + need / 4, floor + floor / 4, /*wait=*/true);
      if (!waited.ok()) return std::move(waited).status();
      reservation.emplace(std::move(waited).value());
    }
  }

  // ---- resizing -------------------------------------------------------------
  //
  // One resize at a time, driven by writes (no hidden thread). A write that
  // finds the mean outside the band, or a resize in progress, try-locks
  // resize_mu_ (never waits for it) and runs one step: start a resize
  // (allocate the new table, link it as the current table's `next`), move
  // up to kResizeSlice units, or finish (publish the new table as current,
  // retire the old one). A unit is one old bucket (growing: split into new
  // buckets i and i + old size) or one new bucket (shrinking: merge of old
  // buckets j and j + new size); both lie under one writer stripe because
  // no table is smaller than the stripe count. A unit moves under that
  // stripe: the new snapshots are stored in the new table, then the old
  // bucket(s) are set to Moved() with release, then the replaced snapshots
  // are retired. Writers and readers that meet Moved() follow `next`.
  // The argument is in docs/concurrency.md ("Route resizing").

  // `locked`: the caller may hold locks of its own, so no deleter runs here.
  void MaybeResize(bool locked) {
    if (fixed_) return;
    if (!resizing_.load(std::memory_order_relaxed) && ResizeTarget() == 0) {
      return;
    }
    if (!resize_mu_.TryLock()) return;  // another writer is stepping
    ResizeStep(locked);
    resize_mu_.Unlock();
    if (!locked) domain_->ReclaimIfDue();
  }

  // The size the table should move to, or 0 while the mean entries per
  // bucket is inside the band. One reading of the population decides both
  // whether and which way: read twice, a population falling through the
  // grow threshold between the readings turned a due grow into a shrink of
  // a table at its starting size, below the stripe count (two stripes then
  // covered one bucket: a double free).
  std::size_t ResizeTarget() const noexcept {
    std::size_t n = entries_.load(std::memory_order_relaxed);
    // Both count after their stripe is released, so an erase may count
    // down before the publication it follows counts up: a count briefly
    // below zero reads as empty, not as a huge population.
    if (n > std::numeric_limits<std::size_t>::max() / 2) n = 0;
    const std::size_t size = table_size_.load(std::memory_order_relaxed);
    if (4 * n > kMaxMeanQuarters * size) return size * 2;
    if (size > min_buckets_ && 4 * n < kMinMeanQuarters * size) return size / 2;
    return 0;
  }

  // `locked`: the caller may hold its own locks, so only bounded work runs:
  // a slice of moves or the finish, never the start (the O(size) table
  // allocation), which waits for an unlocked write or ReclaimIfDue().
  void ResizeStep(bool locked) CAIRN_REQUIRES(resize_mu_) {
    // Only this thread (holding resize_mu_) changes table_ or retires a
    // table, so it reads them without a guard.
    Table* from = table_.load(std::memory_order_relaxed);
    if (!resizing_.load(std::memory_order_relaxed)) {
      if (locked) return;
      // table_size_ is from->size() here: only this thread changes either.
      const std::size_t target = ResizeTarget();
      if (target == 0) return;
      // Every table covers the stripes, so each bucket of every size lies
      // under one stripe (see Write()).
      CAIRN_CHECK(target >= min_buckets_);
      Table* to = Table::Allocate(target);
      if (to == nullptr) return;  // try again at a later write
      // Release: the new table's empty buckets are initialised before any
      // thread can follow `next` to it.
      from->next.store(to, std::memory_order_release);
      cursor_ = 0;
      resizing_.store(true, std::memory_order_relaxed);
    }
    Table* to = from->next.load(std::memory_order_relaxed);
    const bool grow = to->size() > from->size();
    const std::size_t units = grow ? from->size() : to->size();
    for (std::size_t k = 0; k < kResizeSlice && cursor_ < units; ++k) {
      if (!(grow ? SplitUnit(from, to, cursor_) : MergeUnit(from, to, cursor_)))
        return;  // no retire room or memory now; a later write retries
      ++cursor_;
    }
    if (cursor_ == units) Finish(from, to);
  }

  // Moves old bucket i of `from` to buckets i and i + from->size() of `to`.
  bool SplitUnit(Table* from, Table* to, std::size_t i)
      CAIRN_REQUIRES(resize_mu_) {
    const Snapshot* old = nullptr;
    std::optional<RetireReservation> reservation;
    {
      MutexLock lock(&MadeStripes()[i & stripe_mask_].mu);
      old = from->at(i).load(std::memory_order_acquire);
      if (!Reserve(old, &reservation)) return false;
      const Snapshot* low = nullptr;
      const Snapshot* high = nullptr;
      if (!Snapshot::Split(old, from->size(), &low, &high)) return false;
      to->at(i).store(low, std::memory_order_release);
      ResizeStored();
      to->at(i + from->size()).store(high, std::memory_order_release);
      ResizeStored();
      // Release: a thread that reads Moved() sees the new buckets filled.
      from->at(i).store(Snapshot::Moved(), std::memory_order_release);
      ResizeStored();
      resize_copied_bytes_.fetch_add(RetiredCost(low) + RetiredCost(high),
                                     std::memory_order_relaxed);
    }
    RetireMoved(old, &reservation);
    return true;
  }

  // Moves old buckets j and j + to->size() of `from` to bucket j of `to`.
  bool MergeUnit(Table* from, Table* to, std::size_t j)
      CAIRN_REQUIRES(resize_mu_) {
    const Snapshot* a = nullptr;
    const Snapshot* b = nullptr;
    std::optional<RetireReservation> reserve_a, reserve_b;
    {
      MutexLock lock(&MadeStripes()[j & stripe_mask_].mu);
      a = from->at(j).load(std::memory_order_acquire);
      b = from->at(j + to->size()).load(std::memory_order_acquire);
      if (!Reserve(a, &reserve_a) || !Reserve(b, &reserve_b)) return false;
      const Snapshot* merged = Snapshot::Merge(a, b);
      if (merged == nullptr) return false;
      to->at(j).store(merged, std::memory_order_release);
      ResizeStored();
      from->at(j).store(Snapshot::Moved(), std::memory_order_release);
      ResizeStored();
      from->at(j + to->size())
          .store(Snapshot::Moved(), std::memory_order_release);
      ResizeStored();
      resize_copied_bytes_.fetch_add(RetiredCost(merged),
                                     std::memory_order_relaxed);
    }
    RetireMoved(a, &reserve_a);
    RetireMoved(b, &reserve_b);
    return true;
  }

  // The test seam after each bucket store of a resize move (see
  // resize_store_hook_).
  void ResizeStored() const {
    if (resize_store_hook_ != nullptr) [[unlikely]] {
      resize_store_hook_(resize_store_hook_arg_);
    }
  }

  // Budget for retiring a moved snapshot, taken without waiting (the
  // resize runs under the caller's locks and resize_mu_).
  bool Reserve(const Snapshot* s, std::optional<RetireReservation>* out) {
    if (s == Snapshot::Empty()) return true;
    Result<RetireReservation> r = domain_->TryReserve(s->bytes());
    if (!r.ok()) return false;
    out->emplace(std::move(r).value());
    return true;
  }

  void RetireMoved(const Snapshot* s, std::optional<RetireReservation>* r) {
    if (s == Snapshot::Empty()) return;
    retired_total_.fetch_add(s->bytes(), std::memory_order_relaxed);
    // Deferred: resize_mu_ is held (and maybe the caller's locks).
    domain_->RetireReserved(std::move(**r), const_cast<Snapshot*>(s),
                            &Snapshot::Destroy,
                            EpochDomain::Reclaim::kDeferred);
    r->reset();
  }

  // Every bucket of `from` is Moved(): `to` becomes the current table and
  // `from` is retired (readers that loaded it still follow its `next`).
  void Finish(Table* from, Table* to) CAIRN_REQUIRES(resize_mu_) {
    Result<RetireReservation> r = domain_->TryReserve(from->bytes());
    if (!r.ok() && r.status().code() == StatusCode::kResourceExhausted) {
      return;  // the cap (or memory) is full now; a later write finishes
    }
    if (!r.ok()) {
      // Room to keep `from` before it is unlinked: a bad_alloc after the
      // store below would lose the table and escape the write.
      try {
        kept_tables_.reserve(kept_tables_.size() + 1);
      } catch (const std::bad_alloc&) {
        return;  // a later write finishes
      }
    }
    table_.store(to, std::memory_order_release);
    table_size_.store(to->size(), std::memory_order_relaxed);
    resizing_.store(false, std::memory_order_relaxed);
    resizes_.fetch_add(1, std::memory_order_relaxed);
    if (r.ok()) {
      retired_total_.fetch_add(from->bytes(), std::memory_order_relaxed);
      domain_->RetireReserved(std::move(r).value(), from, &Table::Destroy,
                              EpochDomain::Reclaim::kDeferred);
    } else {
      // A table larger than the whole cap, or a domain shut down: it
      // cannot be retired, so it is kept (all Moved, never freed under a
      // reader) until the route is destroyed.
      kept_tables_.push_back(from);
    }
  }

  // The stripes, which a write made already (a resize runs only after
  // writes).
  Stripe* MadeStripes() noexcept {
    Stripe* stripes = stripes_.IfMade();
    CAIRN_DCHECK(stripes != nullptr);
    return stripes;
  }

  const std::unique_ptr<EpochDomain> owned_domain_;
  EpochDomain* const domain_;
  const std::size_t min_buckets_;  // the starting size; never shrinks below
  const bool fixed_;
  const std::size_t stripe_mask_;                   // < min_buckets_
  const base_internal::LazyArray<Stripe> stripes_;  // made by a first write
  // Read by every reader; written only by a resize finishing.
  alignas(64) std::atomic<Table*> table_{nullptr};
  // Write side.
  alignas(64) std::atomic<std::size_t> entries_{0};
  std::atomic<std::size_t> table_size_{0};
  std::atomic<bool> resizing_{false};
  Mutex resize_mu_;
  std::size_t cursor_ CAIRN_GUARDED_BY(resize_mu_) = 0;
  std::vector<Table*> kept_tables_ CAIRN_GUARDED_BY(resize_mu_);
  std::atomic<std::uint64_t> refusals_{0};  // locked writes without room
  std::atomic<std::uint64_t> resizes_{0};
  std::atomic<std::uint64_t> resize_copied_bytes_{0};
  // Retired bytes of resize moves (writes count theirs in their stripe).
  std::atomic<std::uint64_t> retired_total_{0};
  // Test seam, set only through ObjectRouteIndexTestPeer before the route
  // is shared: called on the resizing thread after every bucket store of a
  // split or merge (resize_mu_ and the unit's writer stripe held), so a test
  // can read the route, lock-free as any reader racing the move, at each
  // intermediate state. Null in every host.
  void (*resize_store_hook_)(void*) = nullptr;
  void* resize_store_hook_arg_ = nullptr;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_ROUTE_OBJECT_ROUTE_INDEX_H_
