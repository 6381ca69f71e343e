// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The flush receipt pass. Every append to the block log leaves a receipt
// naming the index entry it wrote ({entry address, 32-bit hash, tag, map,
// map generation, block, offset, length}). Once a block's data and header
// are durable up to a boundary, the pass walks that block's receipts and
// marks each still-live entry durable:
//   - a zero address, an unknown map or a generation other than the map's
//     current one is skipped, and nothing of it is dereferenced (X7);
//   - the entry is found by FindAddress (address compared, never
//     dereferenced first); absent -> skipped;
//   - it is marked durable only if its own location lies in the flushed
//     block below the flushed boundary (X6). An entry rewritten to a later
//     record, or an address reused by another key, is left alone.
//
// Staged form: the maps' headers are prefetched `metadata_ahead` receipts
// ahead and the head buckets plus the entry line `bucket_ahead` receipts
// ahead, so that many misses are in flight at once; 0 turns a stage off
// (both 0 is the serial pass). The staged pass gives exactly the serial
// pass's result (X8): hints are pure, and the bucket stage skips receipts
// the apply step would skip before touching anything.
//
// Slicing: ApplyReceiptsSliced runs the pass in slices of `slice_receipts`
// under the caller's lock, releasing it between slices, so a writer waits
// for at most one slice, never a whole block; it reports the time held.
// Staged, it prefetches a slice's entry lines (the receipts' addresses
// only, no map) before it takes the lock, so those misses are not spent
// holding it.
//
// Thread safety: the maps are owner-only (ScanHashMap); the caller holds
// whatever makes it the owner for the duration (for the sliced form, the
// lock it passes). The functions themselves keep no state, never allocate
// and never block except on that lock.

#ifndef CAIRN_FLUSH_RECEIPT_PASS_H_
#define CAIRN_FLUSH_RECEIPT_PASS_H_

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "cairn/base/mutex.h"
#include "cairn/base/version.h"
#include "cairn/index/scan_hash_map.h"

CAIRN_NAMESPACE_BEGIN

// An index value: where a key's newest record lives in the log.
struct RecordLocation {
  static constexpr std::uint32_t kDurable = 1;
  // flags bits 8..31: the block slot the block sits in (BlockLog).
  static constexpr std::uint32_t kSlotShift = 8;
  static constexpr std::uint32_t kMaxSlots = std::uint32_t{1} << 24;

  std::uint32_t block = 0;   // the block's number (its place in log order)
  std::uint32_t offset = 0;  // in the block's data area
  std::uint32_t length = 0;  // whole record, header included
  std::uint32_t flags = 0;

  bool durable() const noexcept { return (flags & kDurable) != 0; }
  std::uint32_t slot() const noexcept { return flags >> kSlotShift; }
  void set_slot(std::uint32_t slot) noexcept {
    flags =
        (flags & ((std::uint32_t{1} << kSlotShift) - 1)) | (slot << kSlotShift);
  }
};

using RecordIndex = ScanHashMap<RecordLocation>;

// What an append leaves for the flush pass.
struct FlushReceipt {
  std::uintptr_t address = 0;    // the entry written; 0: nothing to mark
  std::uint64_t generation = 0;  // the map's generation at the append
  std::uint32_t hash32 = 0;
  std::uint32_t map = 0;  // the host's map number (see the Maps callable)
  std::uint32_t block = 0;
  std::uint32_t offset = 0;
  std::uint32_t length = 0;
  std::uint8_t tag = 0;
};

// The part of one block that is durable: records of `block` ending at or
// below `boundary`.
struct FlushedRange {
  std::uint32_t block = 0;
  std::uint32_t boundary = 0;
};

struct ReceiptPassOptions {
  std::size_t metadata_ahead = 16;   // 0: no map-header prefetch
  std::size_t bucket_ahead = 8;      // 0: no bucket / entry prefetch
  std::size_t slice_receipts = 512;  // ApplyReceiptsSliced only; >= 1
};

struct ReceiptPassStats {
  std::uint64_t marked = 0;           // entries newly marked durable
  std::uint64_t already_durable = 0;  // found, in range, already marked
  std::uint64_t superseded = 0;       // found, but its location is elsewhere
  std::uint64_t missing = 0;          // no entry at that address any more
  std::uint64_t stale = 0;  // zero address, unknown map, old generation
  // ApplyReceiptsSliced only.
  std::uint64_t slices = 0;
  std::uint64_t locked_nanos = 0;     // total time the lock was held
  std::uint64_t max_slice_nanos = 0;  // longest single hold

  void Add(const ReceiptPassStats& o) noexcept {
    marked += o.marked;
    already_durable += o.already_durable;
    superseded += o.superseded;
    missing += o.missing;
    stale += o.stale;
    slices += o.slices;
    locked_nanos += o.locked_nanos;
    max_slice_nanos = std::max(max_slice_nanos, o.max_slice_nanos);
  }
  bool SameOutcome(const ReceiptPassStats& o) const noexcept {
    return marked == o.marked && already_durable == o.already_durable &&
           superseded == o.superseded && missing == o.missing &&
           stale == o.stale;
  }
};

namespace flush_internal {

// The map a receipt names if it is still current, else null.
template <typename Maps>
RecordIndex* LiveMap(Maps& maps, const FlushReceipt& r) noexcept {
  if (r.address == 0) return nullptr;
  RecordIndex* map = maps(r.map);
  if (map == nullptr || map->generation() != r.generation) return nullptr;
  return map;
}

template <typename Maps>
void ApplyOne(Maps& maps, const FlushReceipt& r, const FlushedRange& range,
              ReceiptPassStats& stats) noexcept {
  RecordIndex* map = LiveMap(maps, r);
  if (map == nullptr) {
    ++stats.stale;
    return;
  }
  RecordIndex::Entry* entry = map->FindAddress(r.address, r.hash32, r.tag);
  if (entry == nullptr) {
    ++stats.missing;
    return;
  }
  RecordLocation& loc = entry->value();
  if (loc.block != range.block || loc.offset > range.boundary ||
      loc.length > range.boundary - loc.offset) {
    ++stats.superseded;
    return;
  }
  if (loc.durable()) {
    ++stats.already_durable;
    return;
  }
  loc.flags |= RecordLocation::kDurable;
  ++stats.marked;
}

}  // namespace flush_internal

// The pass over `receipts` for the durable `range`. `maps(uint32_t map)`
// returns the RecordIndex* a receipt's map number names, or null.
template <typename Maps>
ReceiptPassStats ApplyReceipts(std::span<const FlushReceipt> receipts,
                               Maps&& maps, const FlushedRange& range,
                               const ReceiptPassOptions& options) noexcept {
  ReceiptPassStats stats;
  const std::size_t n = receipts.size();
  const std::size_t meta = options.metadata_ahead;
  const std::size_t bucket = options.bucket_ahead;
  auto prefetch_meta = [&](std::size_t i) {
    if (receipts[i].address == 0) return;
    if (const RecordIndex* map = maps(receipts[i].map)) map->PrefetchMetadata();
  };
  auto prefetch_bucket = [&](std::size_t i) {
    const FlushReceipt& r = receipts[i];
    if (const RecordIndex* map = flush_internal::LiveMap(maps, r)) {
      map->PrefetchBucket(r.hash32);
      // The entry's first line, where its location is: a hint only, and
      // issued only for a current generation (X7).
      __builtin_prefetch(reinterpret_cast<const void*>(r.address), 1, 3);
    }
  };
  if (meta == 0 && bucket == 0) {
    for (std::size_t i = 0; i < n; ++i) {
      flush_internal::ApplyOne(maps, receipts[i], range, stats);
    }
    return stats;
  }
  for (std::size_t i = 0; i < std::min(meta, n); ++i) prefetch_meta(i);
  for (std::size_t i = 0; i < std::min(bucket, n); ++i) prefetch_bucket(i);
  for (std::size_t i = 0; i < n; ++i) {
    if (meta != 0 && i + meta < n) prefetch_meta(i + meta);
    if (bucket != 0 && i + bucket < n) prefetch_bucket(i + bucket);
    flush_internal::ApplyOne(maps, receipts[i], range, stats);
  }
  return stats;
}

// ApplyReceipts in slices of options.slice_receipts, each under `mu`,
// released between slices; adds the time held to the stats. Blocks on `mu`.
template <typename Maps>
ReceiptPassStats ApplyReceiptsSliced(std::span<const FlushReceipt> receipts,
                                     Maps&& maps, const FlushedRange& range,
                                     const ReceiptPassOptions& options,
                                     Mutex* mu) CAIRN_EXCLUDES(mu) {
  ReceiptPassStats total;
  const std::size_t slice = std::max<std::size_t>(options.slice_receipts, 1);
  for (std::size_t begin = 0; begin < receipts.size(); begin += slice) {
    const std::size_t count = std::min(slice, receipts.size() - begin);
    if (options.bucket_ahead != 0) {
      // The staged pass fetches the slice's entry lines before it takes the
      // lock, so their misses are not spent holding it. Only the receipts'
      // own addresses are read (no map, which the lock guards); a prefetch
      // is a hint that never faults, so a stale address is harmless (X7:
      // nothing of a stale receipt is dereferenced).
      for (std::size_t i = begin; i < begin + count; ++i) {
        if (receipts[i].address != 0) {
          __builtin_prefetch(reinterpret_cast<const void*>(receipts[i].address),
                             1, 2);
        }
      }
    }
    mu->Lock();
    const auto start = std::chrono::steady_clock::now();
    ReceiptPassStats part =
        ApplyReceipts(receipts.subspan(begin, count), maps, range, options);
    const auto held = std::chrono::steady_clock::now() - start;
    mu->Unlock();
    part.slices = 1;
    part.locked_nanos = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(held).count());
    part.max_slice_nanos = part.locked_nanos;
    total.Add(part);
  }
  return total;
}

CAIRN_NAMESPACE_END

#endif  // CAIRN_FLUSH_RECEIPT_PASS_H_
