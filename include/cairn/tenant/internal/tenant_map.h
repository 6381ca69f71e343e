// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The immutable map of one TenantRegistry shard (docs/tenants.md,
// "Shards"): an open-addressing table of (hash, name entry) slots. A name
// entry is allocated once, when its tenant is published, and is shared by
// every later map of the shard until a removal drops it; so a change builds
// a new table from the old one's slots (two words each, no entry touched, no
// reference count moved) plus or minus one entry, and costs O(entries of
// the shard) plain copies.
//
// Ownership: the entries of the newest map are owned by the registry; an
// entry dropped by a removal is owned by the map the removal replaced
// (`dropped`, a field lookups never read) and freed with it, after the
// registry domain's grace period. Thread safety: a published map is never
// changed except for `dropped`, written once by the shard's writer before
// the map is retired; lookups may run from any thread inside a guard of the
// registry domain.

#ifndef CAIRN_TENANT_INTERNAL_TENANT_MAP_H_
#define CAIRN_TENANT_INTERNAL_TENANT_MAP_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN
namespace tenant_internal {

template <typename Handle>
struct NamedTenant {
  std::string name;
  Handle tenant;
};

template <typename Handle>
class TenantMap {
 public:
  using Named = NamedTenant<Handle>;
  struct Slot {
    std::uint64_t hash = 0;
    const Named* named = nullptr;  // null: empty
  };

  TenantMap(const TenantMap&) = delete;
  TenantMap& operator=(const TenantMap&) = delete;
  ~TenantMap() { delete dropped_; }
  // The slots follow the header in the same block (one allocation per
  // map): `delete` of a TenantMap frees that block.
  static void operator delete(void* p) { ::operator delete(p); }

  // A map holding `old`'s entries (old may be null: none) except `drop`,
  // plus `add` if it is not null; null when that leaves it empty. The
  // entries are shared with `old`, not copied. Allocates one block (the
  // map and its slots).
  static std::unique_ptr<TenantMap> Rebuilt(const TenantMap* old,
                                            const Named* drop,
                                            std::uint64_t add_hash,
                                            const Named* add) {
    std::size_t count = old == nullptr ? 0 : old->count_;
    if (drop != nullptr) --count;
    if (add != nullptr) ++count;
    if (count == 0) return nullptr;
    std::unique_ptr<TenantMap> next(Make(count));
    if (old != nullptr) {
      for (std::size_t i = 0; i <= old->mask_; ++i) {
        const Slot& s = old->slots()[i];
        if (s.named != nullptr && s.named != drop) next->Insert(s);
      }
    }
    if (add != nullptr) next->Insert(Slot{add_hash, add});
    return next;
  }

  // The entry named `name` (whose mixed hash is `hash`), or null.
  const Named* Find(std::uint64_t hash, std::string_view name) const noexcept {
    for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots()[i];
      if (s.named == nullptr) return nullptr;
      if (s.hash == hash && s.named->name == name) return s.named;
    }
  }

  // fn(const Named&) for every entry, in slot order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (std::size_t i = 0; i <= mask_; ++i) {
      if (slots()[i].named != nullptr) fn(*slots()[i].named);
    }
  }

  std::size_t size() const noexcept { return count_; }
  // The bytes this map holds itself (not its entries): what a retired map
  // is charged, plus its dropped entry.
  std::size_t bytes() const noexcept {
    return sizeof(TenantMap) + (mask_ + 1) * sizeof(Slot) +
           (dropped_ == nullptr ? 0 : sizeof(Named) + dropped_->name.size());
  }
  // An upper bound of bytes() for a map of `count` entries with a dropped
  // one whose name has `name_bytes` bytes.
  static std::size_t BytesFor(std::size_t count, std::size_t name_bytes) {
    return sizeof(TenantMap) + Capacity(count) * sizeof(Slot) + sizeof(Named) +
           name_bytes;
  }

  // Hands the entry a removal dropped to this (replaced) map, which frees
  // it. Called once, by the shard's writer, before the map is retired.
  void set_dropped(const Named* named) noexcept { dropped_ = named; }

  // Frees every entry of the map (the registry's destructor: the newest
  // map owns its entries).
  void DeleteEntries() noexcept {
    for (std::size_t i = 0; i <= mask_; ++i) {
      delete slots()[i].named;
      slots()[i].named = nullptr;
    }
    count_ = 0;
  }

 private:
  // Load at most one half, so every probe ends at an empty slot.
  static std::size_t Capacity(std::size_t count) {
    return std::bit_ceil(count < 2 ? std::size_t{4} : 2 * count);
  }

  // A map of `count` entries' capacity, its slots empty, in one block.
  static TenantMap* Make(std::size_t count) {
    static_assert(alignof(Slot) <= alignof(TenantMap));
    const std::size_t capacity = Capacity(count);
    void* block = ::operator new(sizeof(TenantMap) + capacity * sizeof(Slot));
    return new (block) TenantMap(count, capacity);
  }

  TenantMap(std::size_t count, std::size_t capacity) noexcept
      : count_(count), mask_(capacity - 1) {
    std::uninitialized_value_construct_n(slots(), capacity);
  }

  Slot* slots() noexcept { return reinterpret_cast<Slot*>(this + 1); }
  const Slot* slots() const noexcept {
    return reinterpret_cast<const Slot*>(this + 1);
  }

  void Insert(const Slot& slot) noexcept {
    std::size_t i = slot.hash & mask_;
    while (slots()[i].named != nullptr) i = (i + 1) & mask_;
    slots()[i] = slot;
  }

  std::size_t count_;
  const std::size_t mask_;
  const Named* dropped_ = nullptr;
  // Followed by mask_ + 1 Slots.
};

}  // namespace tenant_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_TENANT_INTERNAL_TENANT_MAP_H_
