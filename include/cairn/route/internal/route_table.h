// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// RouteTable: one bucket table of the resizing route. A single allocation:
// a header (the mask and the `next` link a resize sets) followed by the
// bucket pointers, each an atomic pointer to a BucketSnapshot.
// A bucket holding BucketSnapshot::Moved() has been moved to `next`; see
// ObjectRouteIndex ("Resizing") and docs/concurrency.md for the protocol.
// Never include directly.

#ifndef CAIRN_ROUTE_INTERNAL_ROUTE_TABLE_H_
#define CAIRN_ROUTE_INTERNAL_ROUTE_TABLE_H_

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN
namespace route_internal {

template <typename Snapshot>
class alignas(64) RouteTable {
 public:
  using Bucket = std::atomic<const Snapshot*>;

  // A table of `size` (a power of two) buckets, each the shared empty
  // snapshot, with no `next`. Null on allocation failure.
  static RouteTable* Allocate(std::size_t size) noexcept {
    void* raw = ::operator new(
        BytesFor(size), std::align_val_t(alignof(RouteTable)), std::nothrow);
    if (raw == nullptr) return nullptr;
    auto* table = new (raw) RouteTable(size);
    Bucket* buckets = table->buckets();
    for (std::size_t i = 0; i < size; ++i) {
      new (&buckets[i]) Bucket(Snapshot::Empty());
    }
    return table;
  }

  // EpochDomain deleter (and the route's destructor). Frees the table only:
  // the snapshots it points to are freed by whoever owns them.
  static void Destroy(void* p) noexcept {
    ::operator delete(p, std::align_val_t(alignof(RouteTable)));
  }

  static std::size_t BytesFor(std::size_t size) noexcept {
    return sizeof(RouteTable) + size * sizeof(Bucket);
  }

  std::size_t size() const noexcept { return mask_ + 1; }
  std::size_t mask() const noexcept { return mask_; }
  unsigned log2_size() const noexcept { return log2_size_; }
  std::size_t bytes() const noexcept { return BytesFor(size()); }

  Bucket& at(std::uint64_t hash) noexcept { return buckets()[hash & mask_]; }
  const Bucket& at(std::uint64_t hash) const noexcept {
    return buckets()[hash & mask_];
  }

  // The table this one's buckets move to (set, with release, before the
  // first bucket is marked moved; never changes after).
  std::atomic<RouteTable*> next{nullptr};

 private:
  explicit RouteTable(std::size_t size) noexcept
      : mask_(size - 1),
        log2_size_(static_cast<unsigned>(std::countr_zero(size))) {}

  Bucket* buckets() const noexcept {
    return reinterpret_cast<Bucket*>(
        reinterpret_cast<char*>(const_cast<RouteTable*>(this)) +
        sizeof(RouteTable));
  }

  const std::size_t mask_;
  const unsigned log2_size_;
};

// Reverses the bits of `x`: VisitHandles walks keys in the order of their
// reversed hash, so a bucket of any table size is one contiguous interval.
inline std::uint64_t ReverseBits(std::uint64_t x) noexcept {
  x = ((x >> 1) & 0x5555555555555555ULL) | ((x & 0x5555555555555555ULL) << 1);
  x = ((x >> 2) & 0x3333333333333333ULL) | ((x & 0x3333333333333333ULL) << 2);
  x = ((x >> 4) & 0x0f0f0f0f0f0f0f0fULL) | ((x & 0x0f0f0f0f0f0f0f0fULL) << 4);
  return __builtin_bswap64(x);
}

}  // namespace route_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_ROUTE_INTERNAL_ROUTE_TABLE_H_
