// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Memory machinery of ScanHashMap: the entry arena (stable addresses, 32-bit
// handles, size-class free lists) and the pool of overflow buckets (32-bit
// child ids). Every allocation goes through an IndexAllocator
// (cairn/index/index_allocator.h), so tests can make any of them fail.
//
// Failure atomicity: every call that allocates either succeeds or returns
// failure with the object exactly as it was (the memory it got so far is
// given back), so the map can promise that a failed call changes nothing.
//
// Thread safety: none; owned by one map (or one detached population).

#ifndef CAIRN_INDEX_INTERNAL_ARENA_H_
#define CAIRN_INDEX_INTERNAL_ARENA_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "cairn/base/check.h"
#include "cairn/base/version.h"
#include "cairn/index/index_allocator.h"
#include "cairn/index/internal/bucket.h"

CAIRN_NAMESPACE_BEGIN

namespace index_internal {

// Requests of a multiple of this size aligned to it are huge-page candidates:
// DefaultIndexAllocator maps them directly and advises transparent huge
// pages (random lookups over large tables are dominated by TLB misses).
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

inline constexpr std::size_t TableAlignment(std::size_t bytes) noexcept {
  return bytes >= kHugePageBytes ? kHugePageBytes : 64;
}

// Bytes DefaultIndexAllocator currently holds in direct mappings (they are
// invisible to malloc statistics; benchmarks add them to heap growth).
std::size_t DefaultAllocatorMappedBytes() noexcept;

// The move operations and destructor of a class that owns memory taken from
// an IndexAllocator, written once for EntryArena and BucketPool. `Core` has
// an allocator_, Release() (give everything back, end empty) and
// Swap(Core&) (exchange everything but the allocator). A move leaves the
// source empty on its own allocator. Release runs here, in the most derived
// class's destructor, while Core's members are still alive.
template <typename Core>
class OwnedRegion final : public Core {
 public:
  using Core::Core;
  OwnedRegion(OwnedRegion&& other) noexcept : Core(other.allocator_) {
    this->Swap(other);
  }
  OwnedRegion& operator=(OwnedRegion&& other) noexcept {
    if (this != &other) {
      this->Release();
      this->allocator_ = other.allocator_;
      this->Swap(other);
    }
    return *this;
  }
  ~OwnedRegion() { this->Release(); }
};

// Entries are carved from 256 KiB slabs in 8-byte granules. A handle is
// (slab << 15) | granule; handle 0 is never issued (the first granule of slab
// 0 is skipped), so 0 means "empty slot". Freed blocks go to a per-size free
// list threaded through their first word. Blocks never move. The first
// kSmallSlabs slabs are allocated one by one (small maps stay small); after
// that slabs come in 2 MiB groups of 8, huge-page aligned.
class EntryArenaCore {
 public:
  static constexpr unsigned kGranuleShift = 3;
  static constexpr std::uint32_t kGranule = 1u << kGranuleShift;
  static constexpr unsigned kSlabShift = 18;
  static constexpr std::uint32_t kSlabBytes = 1u << kSlabShift;
  static constexpr unsigned kOffsetBits = kSlabShift - kGranuleShift;
  static constexpr std::uint32_t kOffsetMask = (1u << kOffsetBits) - 1;
  static constexpr std::uint32_t kMaxSlabs = 1u << (32 - kOffsetBits);
  // The largest block the arena hands out.
  static constexpr std::uint32_t kLargestClassBytes = 4096;
  static constexpr std::uint32_t kClasses = kLargestClassBytes / kGranule;
  static constexpr std::uint32_t kSmallSlabs = 8;
  static constexpr std::uint32_t kGroupSlabs = kHugePageBytes / kSlabBytes;
  static_assert(std::size_t{kGroupSlabs} * kSlabBytes == kHugePageBytes);
  static_assert(kSmallSlabs % kGroupSlabs == 0, "groups start aligned");

  explicit EntryArenaCore(IndexAllocator* allocator) noexcept
      : allocator_(allocator) {}
  EntryArenaCore(const EntryArenaCore&) = delete;
  EntryArenaCore& operator=(const EntryArenaCore&) = delete;

  static constexpr std::uint32_t Granules(std::size_t bytes) noexcept {
    return static_cast<std::uint32_t>((bytes + kGranule - 1) >> kGranuleShift);
  }
  // The bytes of `granules` granules, computed in size_t.
  static constexpr std::size_t GranuleBytes(std::uint32_t granules) noexcept {
    return std::size_t{granules} * kGranule;
  }

  // Memory for one more slab (or slab group), taken from the allocator but
  // not yet installed: Prepare fills it, then exactly one of Commit and
  // Abandon consumes it. Lets the map acquire everything an insert needs
  // before it changes anything.
  struct Growth {
    std::byte** directory = nullptr;  // a larger slab directory, or null
    std::uint32_t capacity = 0;       // its entries
    void* slabs = nullptr;            // the new slab memory, or null
    std::uint32_t adding = 0;         // slabs in it
  };

  // True if Allocate(bytes) will succeed once `growth` is committed; takes
  // from the allocator only what that needs (often nothing). On false
  // nothing was taken. Changes no state of the arena.
  bool Prepare(std::size_t bytes, Growth& growth) noexcept {
    growth = Growth{};
    const std::uint32_t granules = Granules(bytes);
    if (granules == 0 || granules > kClasses) return false;
    if (free_heads_[granules - 1] != 0) return true;
    if (slab_count_ != 0 && bump_ + granules * kGranule <= kSlabBytes) {
      return true;
    }
    if (slab_count_ < slab_reserved_) return true;  // a reserved slab is left
    const std::uint32_t adding = slab_reserved_ < kSmallSlabs ? 1 : kGroupSlabs;
    if (slab_reserved_ + adding > kMaxSlabs) return false;
    if (slab_reserved_ + adding > slab_capacity_) {
      std::uint32_t capacity = slab_capacity_ == 0 ? 16 : slab_capacity_ * 2;
      while (capacity < slab_reserved_ + adding) capacity *= 2;
      void* memory = allocator_->Allocate(capacity * sizeof(std::byte*),
                                          alignof(std::byte*));
      if (memory == nullptr) return false;
      growth.directory = static_cast<std::byte**>(memory);
      growth.capacity = capacity;
    }
    growth.slabs = allocator_->Allocate(std::size_t{adding} * kSlabBytes,
                                        BlockAlignment(adding));
    if (growth.slabs == nullptr) {
      Abandon(growth);
      return false;
    }
    growth.adding = adding;
    return true;
  }

  // Installs prepared memory. Cannot fail.
  void Commit(Growth& growth) noexcept {
    if (growth.directory != nullptr) {
      if (slab_reserved_ != 0) {
        std::memcpy(growth.directory, slabs_,
                    slab_reserved_ * sizeof(std::byte*));
      }
      if (slabs_ != nullptr) {
        allocator_->Deallocate(slabs_, slab_capacity_ * sizeof(std::byte*),
                               alignof(std::byte*));
      }
      slabs_ = growth.directory;
      slab_capacity_ = growth.capacity;
    }
    for (std::uint32_t i = 0; i < growth.adding; ++i) {
      slabs_[slab_reserved_ + i] =
          static_cast<std::byte*>(growth.slabs) + std::size_t{i} * kSlabBytes;
    }
    slab_reserved_ += growth.adding;
    growth = Growth{};
  }

  // Gives prepared memory back to the allocator.
  void Abandon(Growth& growth) noexcept {
    if (growth.slabs != nullptr) {
      allocator_->Deallocate(growth.slabs,
                             std::size_t{growth.adding} * kSlabBytes,
                             BlockAlignment(growth.adding));
    }
    if (growth.directory != nullptr) {
      allocator_->Deallocate(growth.directory,
                             growth.capacity * sizeof(std::byte*),
                             alignof(std::byte*));
    }
    growth = Growth{};
  }

  // A handle to `bytes` bytes (8-byte aligned). Never allocates: the caller
  // made room with Prepare and Commit first (checked).
  std::uint32_t Allocate(std::size_t bytes) noexcept {
    const std::uint32_t granules = Granules(bytes);
    CAIRN_DCHECK(granules >= 1 && granules <= kClasses);
    std::uint32_t& head = free_heads_[granules - 1];
    if (head != 0) {
      const std::uint32_t handle = head;
      std::memcpy(&head, Address(handle), sizeof(head));
      live_bytes_ += GranuleBytes(granules);
      free_bytes_ -= GranuleBytes(granules);
      return handle;
    }
    if (slab_count_ == 0 || bump_ + granules * kGranule > kSlabBytes) {
      CAIRN_CHECK_MSG(slab_count_ < slab_reserved_,
                      "EntryArena::Allocate without a prepared slab");
      NextSlab();
    }
    const std::uint32_t handle =
        ((slab_count_ - 1) << kOffsetBits) | (bump_ >> kGranuleShift);
    bump_ += granules * kGranule;
    live_bytes_ += GranuleBytes(granules);
    return handle;
  }

  void Free(std::uint32_t handle, std::size_t bytes) noexcept {
    const std::uint32_t granules = Granules(bytes);
    CAIRN_DCHECK(handle != 0 && granules >= 1 && granules <= kClasses);
    std::uint32_t& head = free_heads_[granules - 1];
    std::memcpy(Address(handle), &head, sizeof(head));
    head = handle;
    live_bytes_ -= GranuleBytes(granules);
    free_bytes_ += GranuleBytes(granules);
  }

  void* Address(std::uint32_t handle) const noexcept {
    return slabs_[handle >> kOffsetBits] +
           (static_cast<std::size_t>(handle & kOffsetMask) << kGranuleShift);
  }

  // Bytes held from the allocator (slabs plus the slab directory).
  std::size_t reserved_bytes() const noexcept {
    return static_cast<std::size_t>(slab_reserved_) * kSlabBytes +
           slab_capacity_ * sizeof(std::byte*);
  }
  // Bytes in live blocks (rounded to granules).
  std::size_t live_bytes() const noexcept { return live_bytes_; }

  void PrefetchDirectory() const noexcept {
    if (slabs_ != nullptr) PrefetchRead(slabs_);
  }

 private:
  // Starts bumping in the next reserved slab.
  void NextSlab() noexcept {
    // The unused tail of the previous slab becomes a free block.
    if (slab_count_ != 0 && bump_ < kSlabBytes) {
      const std::uint32_t tail = kSlabBytes - bump_;
      const std::uint32_t granules = std::min(tail / kGranule, kClasses);
      if (granules > 0) {
        const std::uint32_t handle =
            ((slab_count_ - 1) << kOffsetBits) | (bump_ >> kGranuleShift);
        live_bytes_ += GranuleBytes(granules);  // Free() subtracts it again.
        Free(handle, GranuleBytes(granules));
      }
    }
    ++slab_count_;
    bump_ = slab_count_ == 1 ? kGranule : 0;
  }

  static constexpr std::size_t BlockAlignment(std::uint32_t slabs) noexcept {
    return slabs == kGroupSlabs ? kHugePageBytes : 64;
  }

 protected:
  ~EntryArenaCore() = default;

 private:
  // Gives every slab and the directory back; the arena ends empty.
  void Release() noexcept {
    for (std::uint32_t i = 0; i < slab_reserved_;) {
      const std::uint32_t slabs = i < kSmallSlabs ? 1 : kGroupSlabs;
      allocator_->Deallocate(slabs_[i], std::size_t{slabs} * kSlabBytes,
                             BlockAlignment(slabs));
      i += slabs;
    }
    if (slabs_ != nullptr) {
      allocator_->Deallocate(slabs_, slab_capacity_ * sizeof(std::byte*),
                             alignof(std::byte*));
    }
    slabs_ = nullptr;
    slab_count_ = slab_reserved_ = slab_capacity_ = 0;
    bump_ = 0;
    live_bytes_ = free_bytes_ = 0;
    std::memset(free_heads_, 0, sizeof(free_heads_));
  }

  // Exchanges everything but the allocator.
  void Swap(EntryArenaCore& other) noexcept {
    std::swap(slabs_, other.slabs_);
    std::swap(slab_count_, other.slab_count_);
    std::swap(slab_reserved_, other.slab_reserved_);
    std::swap(slab_capacity_, other.slab_capacity_);
    std::swap(bump_, other.bump_);
    std::swap(live_bytes_, other.live_bytes_);
    std::swap(free_bytes_, other.free_bytes_);
    for (std::uint32_t i = 0; i < kClasses; ++i) {
      std::swap(free_heads_[i], other.free_heads_[i]);
    }
  }

  IndexAllocator* allocator_;
  std::byte** slabs_ = nullptr;
  std::uint32_t slab_count_ = 0;     // slabs in use (the last one bumps)
  std::uint32_t slab_reserved_ = 0;  // slabs with memory behind them
  std::uint32_t slab_capacity_ = 0;  // directory entries
  std::uint32_t bump_ = 0;
  std::size_t live_bytes_ = 0;
  std::size_t free_bytes_ = 0;
  std::uint32_t free_heads_[kClasses] = {};

  friend class OwnedRegion<EntryArenaCore>;
};

using EntryArena = OwnedRegion<EntryArenaCore>;

// Overflow buckets in 32 KiB chunks of 512; id = (chunk << 9) | index, id 0
// never issued. Free buckets are threaded through their child word. Reserve()
// is the only call that allocates, so a rehash step can plan its buckets
// first and then move handles without any chance of failure.
class BucketPoolCore {
 public:
  static constexpr unsigned kChunkShift = 9;
  static constexpr std::uint32_t kChunkBuckets = 1u << kChunkShift;
  static constexpr std::uint32_t kMaxChunks = 1u << (32 - kChunkShift);
  // One entry of the chunk directory, an array of Bucket pointers.
  // NOLINTNEXTLINE(bugprone-sizeof-expression): the size of a pointer, meant
  static constexpr std::size_t kChunkPointerBytes = sizeof(Bucket*);

  explicit BucketPoolCore(IndexAllocator* allocator) noexcept
      : allocator_(allocator) {}
  BucketPoolCore(const BucketPoolCore&) = delete;
  BucketPoolCore& operator=(const BucketPoolCore&) = delete;

  Bucket& Get(std::uint32_t id) const noexcept {
    return chunks_[id >> kChunkShift][id & (kChunkBuckets - 1)];
  }

  // Makes sure `count` buckets can be acquired without allocating. All or
  // nothing: on false the pool is exactly as it was.
  bool Reserve(std::size_t count) noexcept {
    if (free_count_ >= count) return true;
    // Chunks to add; chunk 0 yields one bucket less (id 0 is never issued).
    std::size_t gained = 0;
    std::uint32_t adding = 0;
    while (free_count_ + gained < count) {
      if (adding == kMaxChunks - chunk_count_) return false;
      gained += chunk_count_ + adding == 0 ? kChunkBuckets - 1 : kChunkBuckets;
      ++adding;
    }
    // Collect the new chunks in a grown directory, or in the unused tail of
    // the current one (invisible until chunk_count_ moves).
    Bucket** directory = chunks_;
    std::uint32_t capacity = chunk_capacity_;
    if (chunk_count_ + adding > chunk_capacity_) {
      capacity = chunk_capacity_ == 0 ? 4 : chunk_capacity_ * 2;
      while (capacity < chunk_count_ + adding) capacity *= 2;
      void* memory =
          allocator_->Allocate(capacity * kChunkPointerBytes, alignof(Bucket*));
      if (memory == nullptr) return false;
      directory = static_cast<Bucket**>(memory);
    }
    for (std::uint32_t i = 0; i < adding; ++i) {
      void* memory =
          allocator_->Allocate(kChunkBuckets * sizeof(Bucket), alignof(Bucket));
      if (memory == nullptr) {
        while (i-- > 0) {
          allocator_->Deallocate(directory[chunk_count_ + i],
                                 kChunkBuckets * sizeof(Bucket),
                                 alignof(Bucket));
        }
        if (directory != chunks_) {
          allocator_->Deallocate(directory, capacity * kChunkPointerBytes,
                                 alignof(Bucket*));
        }
        return false;
      }
      directory[chunk_count_ + i] = static_cast<Bucket*>(memory);
    }
    // Everything is in hand: install.
    if (directory != chunks_) {
      if (chunk_count_ != 0) {
        std::memcpy(directory, chunks_, chunk_count_ * kChunkPointerBytes);
      }
      if (chunks_ != nullptr) {
        allocator_->Deallocate(chunks_, chunk_capacity_ * kChunkPointerBytes,
                               alignof(Bucket*));
      }
      chunks_ = directory;
      chunk_capacity_ = capacity;
    }
    // Thread the new buckets onto the free list, lowest id first.
    for (std::uint32_t c = chunk_count_ + adding; c-- > chunk_count_;) {
      Bucket* chunk = chunks_[c];
      std::memset(static_cast<void*>(chunk), 0, kChunkBuckets * sizeof(Bucket));
      const std::uint32_t base = c << kChunkShift;
      for (std::uint32_t i = kChunkBuckets; i-- > 0;) {
        if (base + i == 0) continue;  // id 0 means "no child"
        chunk[i].child = free_head_;
        free_head_ = base + i;
        ++free_count_;
      }
    }
    chunk_count_ += adding;
    return true;
  }

  // A zeroed bucket id, or 0 if the allocator failed.
  std::uint32_t Acquire() noexcept {
    if (!Reserve(1)) return 0;
    const std::uint32_t id = free_head_;
    Bucket& bucket = Get(id);
    free_head_ = bucket.child;
    bucket.child = 0;
    --free_count_;
    ++used_count_;
    return id;
  }

  void Release(std::uint32_t id) noexcept {
    Bucket& bucket = Get(id);
    ClearBucket(bucket);
    bucket.child = free_head_;
    free_head_ = id;
    ++free_count_;
    --used_count_;
  }

  std::size_t used_count() const noexcept { return used_count_; }
  std::size_t reserved_bytes() const noexcept {
    return static_cast<std::size_t>(chunk_count_) * kChunkBuckets *
               sizeof(Bucket) +
           chunk_capacity_ * kChunkPointerBytes;
  }

 protected:
  ~BucketPoolCore() = default;

 private:
  // Gives every chunk and the directory back; the pool ends empty.
  void Release() noexcept {
    for (std::uint32_t i = 0; i < chunk_count_; ++i) {
      allocator_->Deallocate(chunks_[i], kChunkBuckets * sizeof(Bucket),
                             alignof(Bucket));
    }
    if (chunks_ != nullptr) {
      allocator_->Deallocate(chunks_, chunk_capacity_ * kChunkPointerBytes,
                             alignof(Bucket*));
    }
    chunks_ = nullptr;
    chunk_count_ = chunk_capacity_ = 0;
    free_head_ = 0;
    free_count_ = used_count_ = 0;
  }

  // Exchanges everything but the allocator.
  void Swap(BucketPoolCore& other) noexcept {
    std::swap(chunks_, other.chunks_);
    std::swap(chunk_count_, other.chunk_count_);
    std::swap(chunk_capacity_, other.chunk_capacity_);
    std::swap(free_head_, other.free_head_);
    std::swap(free_count_, other.free_count_);
    std::swap(used_count_, other.used_count_);
  }

  IndexAllocator* allocator_;
  Bucket** chunks_ = nullptr;
  std::uint32_t chunk_count_ = 0;
  std::uint32_t chunk_capacity_ = 0;
  std::uint32_t free_head_ = 0;
  std::size_t free_count_ = 0;
  std::size_t used_count_ = 0;

  friend class OwnedRegion<BucketPoolCore>;
};

using BucketPool = OwnedRegion<BucketPoolCore>;

// Bucket array of one table, 2^exponent buckets, zeroed.
struct Table {
  Bucket* buckets = nullptr;
  int exponent = -1;  // -1: no table
  std::size_t used = 0;

  bool present() const noexcept { return exponent >= 0; }
  std::uint64_t bucket_count() const noexcept {
    return exponent < 0 ? 0 : (std::uint64_t{1} << exponent);
  }
  std::uint32_t mask() const noexcept {
    return static_cast<std::uint32_t>(bucket_count() - 1);
  }
  std::size_t bytes() const noexcept { return bucket_count() * sizeof(Bucket); }
};

}  // namespace index_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_INDEX_INTERNAL_ARENA_H_
