// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// BucketSnapshot: one route bucket, immutable once published but for the
// entry word of a slot buried in place (below). A single allocation holds a
// flat open-addressed table of slots (the full 64-bit hash beside each entry
// pointer, linear probing, load <= 2/3) and the key bytes, so a hit touches
// the slot line and the key's line, then the entry itself.
//
// Owners live in one RouteRecord per routed entry, allocated at publication
// and shared by every later snapshot of the bucket: copying a bucket copies
// slot words and key bytes only, never touching another entry's control
// block (which at a million objects is a cache miss per entry).
//
// An unlink either copies the bucket without the entry (the record then
// rides on the replaced snapshot and is freed with it, after the grace
// period) or, while the bucket keeps at least as many live entries as dead
// ones, buries the entry in place: its slot's entry word becomes Dead() (a
// release store under the writer stripe; that word and the header's count
// of buried slots are all of a published snapshot that ever changes) and
// the record is retired on its own. A
// buried slot still holds its probe run together; readers skip it, and the
// bucket's next copy (insert, unlink, resize) leaves it out. Readers load
// the entry word once, atomically, and use that value (Hit), so a slot
// buried while they look is either seen whole or skipped. Never include
// directly.

#ifndef CAIRN_ROUTE_INTERNAL_BUCKET_SNAPSHOT_H_
#define CAIRN_ROUTE_INTERNAL_BUCKET_SNAPSHOT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>
#include <utility>

#include "cairn/base/check.h"
#include "cairn/base/version.h"
#include "cairn/route/internal/snapshot_blocks.h"

CAIRN_NAMESPACE_BEGIN
namespace route_internal {

template <typename Entry>
struct RouteRecord {
  std::shared_ptr<Entry> owner;

  // Records live in route blocks (snapshot_blocks.h), as snapshots do.
  static constexpr std::size_t kBlock =
      BlockBytes(sizeof(std::shared_ptr<Entry>));
  // Null on allocation failure (`owner` is then released).
  static RouteRecord* New(std::shared_ptr<Entry> owner) noexcept {
    void* p = AllocateBlock(kBlock);
    return p == nullptr ? nullptr : new (p) RouteRecord{std::move(owner)};
  }
  static void Delete(RouteRecord* record) noexcept {
    if (record == nullptr) return;
    record->~RouteRecord();
    FreeBlock(record, kBlock);
  }
};

template <typename Entry>
class alignas(32) BucketSnapshot {
 public:
  using Owner = std::shared_ptr<Entry>;
  using Record = RouteRecord<Entry>;

  struct Slot {
    std::uint64_t hash;
    // null: free slot; Dead(): buried. Written in place only by Bury();
    // read concurrently through EntryOf().
    Entry* entry;
    Record* record;
    std::uint32_t key_offset;
    std::uint32_t key_size;
  };

  // A live slot and the entry its word held when it was read: use `entry`,
  // never slot->entry again (the slot may be buried since).
  struct Hit {
    const Slot* slot = nullptr;
    Entry* entry = nullptr;
    explicit operator bool() const noexcept { return slot != nullptr; }
  };

  // The one immutable empty bucket every route bucket starts with.
  static const BucketSnapshot* Empty() noexcept { return &kEmpty; }
  // The marker a resize leaves in a bucket of the table it moves away from:
  // the bucket's keys now live in the table's `next` (see RouteTable). Never
  // looked into; compared by address only.
  static const BucketSnapshot* Moved() noexcept { return &kMoved; }

  // The marker of a buried slot's entry word. Compared, never dereferenced.
  static Entry* Dead() noexcept {
    return reinterpret_cast<Entry*>(const_cast<char*>(&kDeadMark));
  }

  // The slot's entry word (null, Dead() or an entry), read atomically: a
  // writer may bury the slot while a reader looks.
  static Entry* EntryOf(const Slot& slot) noexcept {
    return std::atomic_ref<Entry*>(const_cast<Entry*&>(slot.entry))
        .load(std::memory_order_acquire);
  }

  // Live entries (buried slots not counted). Safe from a reader.
  std::uint32_t size() const noexcept {
    return size_ - dead_.load(std::memory_order_relaxed);
  }
  // Buried slots. Writers only (under the bucket's stripe).
  std::uint32_t dead() const noexcept {
    return dead_.load(std::memory_order_relaxed);
  }
  std::size_t bytes() const noexcept { return bytes_; }
  bool empty() const noexcept { return size() == 0; }

  // The live slot routing `key` and its entry, or none. Reads only (the
  // entry words atomically, see EntryOf()). On a hash match the entry's
  // line is prefetched before the key bytes are compared, so the two misses
  // overlap (the caller locks the entry next).
  // Always inlined: it is every point lookup's probe, and a call costs a
  // directory lookup about a tenth of its instructions (docs/directory.md,
  // "Cost of a lookup").
  [[gnu::always_inline]] Hit Find(std::uint64_t hash,
                                  std::string_view key) const noexcept {
    if (size_ == 0) return {};
    for (std::uint32_t i = ProbeStart(hash);; i = (i + 1) & mask_) {
      const Slot& slot = slots()[i];
      Entry* const entry = EntryOf(slot);
      if (entry == nullptr) return {};
      if (slot.hash == hash && entry != Dead()) {
        __builtin_prefetch(entry, 1, 3);
        __builtin_prefetch(reinterpret_cast<const char*>(entry) + 64, 1, 3);
        if (KeyEquals(slot, key)) return {&slot, entry};
      }
    }
  }

  // The first live slot whose stored hash equals `hash` (a candidate: its
  // key is not compared), or none. Reads the header and slot lines only.
  Hit FindHash(std::uint64_t hash) const noexcept {
    if (size_ == 0) return {};
    for (std::uint32_t i = ProbeStart(hash);; i = (i + 1) & mask_) {
      const Slot& slot = slots()[i];
      Entry* const entry = EntryOf(slot);
      if (entry == nullptr) return {};
      if (slot.hash == hash && entry != Dead()) return {&slot, entry};
    }
  }

  bool KeyEquals(const Slot& slot, std::string_view key) const noexcept {
    return slot.key_size == key.size() &&
           std::memcmp(blob() + slot.key_offset, key.data(), key.size()) == 0;
  }

  // Hints for a staged lookup: the key bytes of a candidate slot, and the
  // first two lines of the entry it routes, for writing: the caller takes
  // the entry's lock next (ObjectEntry's lock starts in its second line).
  void PrefetchCandidate(const Hit& hit) const noexcept {
    __builtin_prefetch(blob() + hit.slot->key_offset, 0, 3);
    __builtin_prefetch(hit.entry, 1, 3);
    __builtin_prefetch(reinterpret_cast<const char*>(hit.entry) + 64, 1, 3);
  }

  const Owner& owner(const Slot* slot) const noexcept {
    return slot->record->owner;
  }
  std::string_view key(const Slot& slot) const noexcept {
    return std::string_view(blob() + slot.key_offset, slot.key_size);
  }

  // Calls fn(const Slot&) for every live slot. A reader's fn must not read
  // slot.entry (it may be buried meanwhile); a writer's (under the
  // stripe) may.
  template <typename Fn>
  void ForEachSlot(Fn&& fn) const {
    for (std::uint32_t i = 0; size_ != 0 && i <= mask_; ++i) {
      Entry* const entry = EntryOf(slots()[i]);
      if (entry != nullptr && entry != Dead()) fn(slots()[i]);
    }
  }

  // Resize, growing: the slots of `s` whose hash has `bit` clear go to
  // *low, the others to *high (the shared empty snapshot for none). Records
  // are shared, not copied. False on allocation failure, with nothing left
  // allocated.
  static bool Split(const BucketSnapshot* s, std::uint64_t bit,
                    const BucketSnapshot** low, const BucketSnapshot** high) {
    std::uint32_t n_high = 0;
    std::size_t key_high = 0;
    s->ForEachSlot([&](const Slot& slot) {
      if ((slot.hash & bit) != 0) {
        ++n_high;
        key_high += slot.key_size;
      }
    });
    BucketSnapshot* parts[2] = {nullptr, nullptr};
    const std::uint32_t n[2] = {s->size() - n_high, n_high};
    const std::size_t keys[2] = {s->LiveKeyBytes() - key_high, key_high};
    for (int h = 0; h < 2; ++h) {
      if (n[h] == 0) continue;
      parts[h] = Allocate(n[h], keys[h]);
      if (parts[h] == nullptr) {
        if (parts[0] != nullptr) Destroy(parts[0]);
        return false;
      }
    }
    s->ForEachSlot([&](const Slot& slot) {
      parts[(slot.hash & bit) != 0 ? 1 : 0]->Add(slot.hash, s->key(slot),
                                                 slot.entry, slot.record);
    });
    *low = parts[0] != nullptr ? parts[0] : Empty();
    *high = parts[1] != nullptr ? parts[1] : Empty();
    return true;
  }

  // Resize, shrinking: one snapshot holding the slots of both. The shared
  // empty snapshot if both are empty; null on allocation failure.
  static const BucketSnapshot* Merge(const BucketSnapshot* a,
                                     const BucketSnapshot* b) {
    if (a->size() + b->size() == 0) return Empty();
    BucketSnapshot* merged =
        Allocate(a->size() + b->size(), a->LiveKeyBytes() + b->LiveKeyBytes());
    if (merged == nullptr) return nullptr;
    for (const BucketSnapshot* from : {a, b}) {
      from->ForEachSlot([&](const Slot& slot) {
        merged->Add(slot.hash, from->key(slot), slot.entry, slot.record);
      });
    }
    return merged;
  }

  // A new snapshot: this one's live entries plus (key -> record). The
  // caller checked that `key` is absent. Null on allocation failure.
  // When the copy keeps this snapshot's capacity and nothing is buried, its
  // slots and key bytes (one contiguous run) are copied whole; otherwise
  // every live slot is re-added.
  BucketSnapshot* CopyWithInsert(std::string_view key, std::uint64_t hash,
                                 Record* record) const {
    const bool same = dead() == 0 && CapacityFor(size_ + 1) == mask_ + 1;
    BucketSnapshot* copy =
        Allocate(size() + 1, LiveKeyBytes() + key.size(), /*clear=*/!same);
    if (copy == nullptr) return nullptr;
    if (same) {
      std::memcpy(copy->slots(), slots(),
                  BlobOffset() - SlotsOffset() + key_bytes_);
      copy->size_ = size_;
      copy->key_bytes_ = key_bytes_;
    } else {
      CopyInto(copy, nullptr);
    }
    copy->Add(hash, key, record->owner.get(), record);
    return copy;
  }

  // A new snapshot without `erased` (a live slot of this snapshot) and
  // without the buried ones. The shared empty snapshot when nothing is
  // left; null on allocation failure. With the capacity kept and nothing
  // buried, the slots are copied whole, the erased key's bytes are cut out
  // of the key run, and its slot is closed by backward shift (the
  // linear-probing delete), so no slot is re-added.
  const BucketSnapshot* CopyWithErase(const Slot* erased) const {
    if (size() == 1) return Empty();
    const bool same = dead() == 0 && CapacityFor(size_ - 1) == mask_ + 1;
    BucketSnapshot* copy =
        Allocate(size() - 1, LiveKeyBytes() - erased->key_size,
                 /*clear=*/!same);
    if (copy == nullptr) return nullptr;
    if (!same) {
      CopyInto(copy, erased);
      return copy;
    }
    const std::uint32_t offset = erased->key_offset;
    const std::uint32_t length = erased->key_size;
    Slot* to = copy->slots();
    std::memcpy(to, slots(), BlobOffset() - SlotsOffset());
    std::memcpy(copy->blob(), blob(), offset);
    std::memcpy(copy->blob() + offset, blob() + offset + length,
                key_bytes_ - offset - length);
    for (std::uint32_t i = 0; i <= mask_; ++i) {
      if (to[i].entry != nullptr && to[i].key_offset > offset) {
        to[i].key_offset -= length;
      }
    }
    // Backward shift: a later slot of the probe run moves into the hole
    // unless its home slot lies cyclically in (hole, slot].
    std::uint32_t hole = static_cast<std::uint32_t>(erased - slots());
    for (std::uint32_t j = (hole + 1) & mask_; to[j].entry != nullptr;
         j = (j + 1) & mask_) {
      const std::uint32_t home = ProbeStart(to[j].hash);
      const bool stays =
          hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (!stays) {
        to[hole] = to[j];
        hole = j;
      }
    }
    to[hole] = Slot{0, nullptr, nullptr, 0, 0};
    copy->size_ = size_ - 1;
    copy->key_bytes_ = key_bytes_ - length;
    return copy;
  }

  // Whether unlinking one live entry may bury it in place: the bucket keeps
  // another live entry and no more buried slots than live ones, so buried
  // slots never cost more than the live ones beside them. Writers only.
  bool CanBury() const noexcept {
    const std::uint32_t live = size();
    return live > 1 && dead() + 1 <= live - 1;
  }

  // Unlinks `slot` (live, of this published snapshot) in place: its entry
  // word becomes Dead() with a release store. Writers only, under the
  // bucket's stripe; the caller retires the slot's record.
  void Bury(const Slot* slot) const noexcept {
    std::atomic_ref<Entry*>(const_cast<Slot*>(slot)->entry)
        .store(Dead(), std::memory_order_release);
    dead_.store(dead() + 1, std::memory_order_relaxed);
  }

  // Hands the record of the entry unlinked from this (now unreachable)
  // snapshot to it, so Destroy() frees both after the grace period. Readers
  // of this snapshot never read the field.
  void AdoptUnlinked(Record* record) const noexcept { unlinked_ = record; }

  // EpochDomain deleter. Frees the snapshot and its unlinked record (whose
  // owner release may destroy the entry); routed records are shared with
  // the bucket's current snapshot and stay.
  static void Destroy(void* p) noexcept {
    auto* snapshot = static_cast<BucketSnapshot*>(p);
    CAIRN_DCHECK(snapshot != &kEmpty && snapshot != &kMoved);
    Record::Delete(snapshot->unlinked_);
    FreeBlock(reinterpret_cast<char*>(snapshot) - snapshot->pad_,
              snapshot->bytes_);
  }

  // For the route's destructor: frees every routed record, then the
  // snapshot. A buried slot's record was retired on its own.
  static void DestroyWithRecords(const BucketSnapshot* snapshot) noexcept {
    snapshot->ForEachSlot(
        [](const Slot& slot) { Record::Delete(slot.record); });
    Destroy(const_cast<BucketSnapshot*>(snapshot));
  }

 private:
  constexpr BucketSnapshot() = default;

  static std::uint32_t CapacityFor(std::uint32_t n) noexcept {
    std::uint32_t capacity = 2;
    while (capacity < n + n / 2 + 1) capacity <<= 1;
    return capacity;
  }
  static std::size_t SlotsOffset() noexcept {
    static_assert(sizeof(BucketSnapshot) == kLine / 2);
    return (sizeof(BucketSnapshot) + alignof(Slot) - 1) & ~(alignof(Slot) - 1);
  }
  std::size_t BlobOffset() const noexcept {
    return SlotsOffset() + sizeof(Slot) * (std::size_t{mask_} + 1);
  }
  Slot* slots() const noexcept {
    return reinterpret_cast<Slot*>(
        reinterpret_cast<char*>(const_cast<BucketSnapshot*>(this)) +
        SlotsOffset());
  }
  char* blob() const noexcept {
    return reinterpret_cast<char*>(const_cast<BucketSnapshot*>(this)) +
           BlobOffset();
  }
  std::uint32_t ProbeStart(std::uint64_t hash) const noexcept {
    // The low bits chose the bucket; use the high ones inside it.
    return static_cast<std::uint32_t>(hash >> 40) & mask_;
  }

  // `clear`: empty every slot (false: the caller fills them all).
  static BucketSnapshot* Allocate(std::uint32_t n, std::size_t key_bytes,
                                  bool clear = true) {
    const std::uint32_t capacity = CapacityFor(n);
    BucketSnapshot probe;
    probe.mask_ = capacity - 1;
    // Aligned by hand from a plain allocation: glibc's aligned operator new
    // (memalign) splits and frees the slack on every call, which measured
    // as the largest single cost of a create+delete (BM_RouteW5). The block
    // is rounded up to a whole cache line, so keys of nearby lengths share
    // a size class, and reused through this thread's block cache
    // (snapshot_blocks.h).
    const std::size_t bytes =
        BlockBytes(probe.BlobOffset() + key_bytes + kAlignSlack, 64);
    if (bytes > UINT32_MAX) return nullptr;  // kept as 32 bits
    void* raw = AllocateBlock(bytes);
    if (raw == nullptr) return nullptr;
    const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned =
        (address + kLine - 1) & ~std::uintptr_t{kLine - 1};
    auto* s = new (reinterpret_cast<void*>(aligned)) BucketSnapshot();
    s->pad_ = static_cast<std::uint32_t>(aligned - address);
    s->mask_ = capacity - 1;
    s->bytes_ = static_cast<std::uint32_t>(bytes);
    if (clear) {
      Slot* slots = s->slots();
      for (std::uint32_t i = 0; i < capacity; ++i) {
        slots[i] = Slot{0, nullptr, nullptr, 0, 0};
      }
    }
    return s;
  }

  // The key bytes of the live slots: a copy allocates exactly these, so
  // its block is the size class a copy without buried slots would take
  // (a larger one defeats the thread's block cache, snapshot_blocks.h).
  std::size_t LiveKeyBytes() const noexcept {
    if (dead() == 0) return key_bytes_;
    std::size_t bytes = 0;
    ForEachSlot([&](const Slot& slot) { bytes += slot.key_size; });
    return bytes;
  }

  void CopyInto(BucketSnapshot* copy, const Slot* skip) const {
    ForEachSlot([&](const Slot& slot) {
      if (&slot != skip)
        copy->Add(slot.hash, key(slot), slot.entry, slot.record);
    });
  }

  void Add(std::uint64_t hash, std::string_view key, Entry* entry,
           Record* record) {
    std::uint32_t i = ProbeStart(hash);
    while (slots()[i].entry != nullptr) i = (i + 1) & mask_;
    std::memcpy(blob() + key_bytes_, key.data(), key.size());
    slots()[i] =
        Slot{hash, entry, record, static_cast<std::uint32_t>(key_bytes_),
             static_cast<std::uint32_t>(key.size())};
    key_bytes_ += static_cast<std::uint32_t>(key.size());
    ++size_;
  }

  static const BucketSnapshot kEmpty;
  static const BucketSnapshot kMoved;
  // Aligned as an entry, so Dead() is a well-formed Entry* value.
  alignas(Entry) static const char kDeadMark;

  // A snapshot starts on a cache line, and its header takes half of it, so
  // the first slots share the header's line: a lookup in a small bucket
  // (the route keeps about two entries per bucket) misses on one line
  // more often than on two.
  static constexpr std::size_t kLine = 64;
  // What a hand-aligned allocation may need on top of its bytes
  // (operator new returns at least 16-byte aligned memory).
  static constexpr std::size_t kAlignSlack =
      kLine - __STDCPP_DEFAULT_NEW_ALIGNMENT__;

  std::uint32_t mask_ = 0;   // capacity - 1 (capacity is a power of two)
  std::uint32_t size_ = 0;   // occupied slots: live and buried
  std::uint32_t pad_ = 0;    // bytes before `this` in its allocation
  std::uint32_t bytes_ = 0;  // the whole block (snapshot_blocks.h)
  // Key bytes in the blob, buried keys' included (below bytes_, so 32 bits).
  std::uint32_t key_bytes_ = 0;
  mutable std::atomic<std::uint32_t> dead_{0};  // buried slots, see Bury()
  mutable Record* unlinked_ = nullptr;  // writer-only, see AdoptUnlinked()
};

template <typename Entry>
inline const BucketSnapshot<Entry> BucketSnapshot<Entry>::kEmpty{};
template <typename Entry>
inline const BucketSnapshot<Entry> BucketSnapshot<Entry>::kMoved{};
template <typename Entry>
alignas(Entry) inline const char BucketSnapshot<Entry>::kDeadMark = 0;

}  // namespace route_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_ROUTE_INTERNAL_BUCKET_SNAPSHOT_H_
