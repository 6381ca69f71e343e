// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Route blocks: the allocations that hold bucket snapshots and route
// records, kept for reuse by the thread that frees them. Every route write
// allocates a snapshot (and a create a record) and retires one, and retired
// ones are freed in batches (a reclaim pass frees everything whose grace
// period ended, dozens at a time), which overflows the allocator's small
// per-thread cache and sends most frees and the allocations after them
// through its slow paths. Here a freed block goes to a per-thread list of
// its size class instead, and the next allocation of that class takes it.
//
// Sizes are multiples of kBlockUnit (BlockBytes); blocks above
// kMaxCachedBlock are never cached. Bounded: a thread keeps at most
// kCacheBytesPerThread bytes (a free past it goes to the allocator), and
// gives everything back when it exits. A block in the list is poisoned
// under AddressSanitizer, so a use after free of a snapshot is still
// reported. Never include directly.

#ifndef CAIRN_ROUTE_INTERNAL_SNAPSHOT_BLOCKS_H_
#define CAIRN_ROUTE_INTERNAL_SNAPSHOT_BLOCKS_H_

#include <cstddef>
#include <new>

#include "cairn/base/version.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define CAIRN_BLOCK_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define CAIRN_BLOCK_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define CAIRN_BLOCK_POISON(p, n) ((void)(p), (void)(n))
#define CAIRN_BLOCK_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

CAIRN_NAMESPACE_BEGIN
namespace route_internal {

inline constexpr std::size_t kBlockUnit = 16;
inline constexpr std::size_t kMaxCachedBlock = 1024;
inline constexpr std::size_t kCacheBytesPerThread = std::size_t{64} << 10;

// The size of the block that holds `bytes`, a multiple of `unit` (a power
// of two, at least kBlockUnit).
inline constexpr std::size_t BlockBytes(
    std::size_t bytes, std::size_t unit = kBlockUnit) noexcept {
  return (bytes + unit - 1) & ~(unit - 1);
}

// One thread's free blocks, a list per size class. Trivially destructible,
// so it stays readable in other thread_local destructors; BlockCacheDrain
// empties it at thread exit.
struct BlockCache {
  void* head[kMaxCachedBlock / kBlockUnit];
  std::size_t bytes;  // in the lists
  bool armed;         // this thread's drain is registered
  bool gone;          // drained at thread exit: cache nothing more

  static std::size_t Class(std::size_t block) noexcept {
    return block / kBlockUnit - 1;
  }

  void* Pop(std::size_t block) noexcept {
    void*& top = head[Class(block)];
    void* p = top;
    if (p == nullptr) return nullptr;
    CAIRN_BLOCK_UNPOISON(p, block);
    top = *static_cast<void**>(p);
    bytes -= block;
    return p;
  }

  void Push(void* p, std::size_t block) noexcept {
    void*& top = head[Class(block)];
    *static_cast<void**>(p) = top;
    top = p;
    bytes += block;
    CAIRN_BLOCK_POISON(p, block);
  }

  void Drain() noexcept {
    gone = true;
    for (std::size_t block = kBlockUnit; block <= kMaxCachedBlock;
         block += kBlockUnit) {
      while (void* p = Pop(block)) ::operator delete(p);
    }
  }
};

inline thread_local constinit BlockCache block_cache{};

struct BlockCacheDrain {
  ~BlockCacheDrain() { block_cache.Drain(); }
};
inline thread_local BlockCacheDrain block_cache_drain;

// A block of `block` bytes (a BlockBytes() value), from this thread's list
// if it has one. Null on allocation failure.
inline void* AllocateBlock(std::size_t block) noexcept {
  if (block <= kMaxCachedBlock) {
    if (void* p = block_cache.Pop(block)) return p;
  }
  return ::operator new(block, std::nothrow);
}

// Frees a block from AllocateBlock(block): into this thread's list while
// it has room, else to the allocator.
inline void FreeBlock(void* p, std::size_t block) noexcept {
  BlockCache& cache = block_cache;
  if (block <= kMaxCachedBlock && !cache.gone &&
      cache.bytes + block <= kCacheBytesPerThread) {
    if (!cache.armed) {
      cache.armed = true;
      static_cast<void>(&block_cache_drain);  // registers its destructor
    }
    cache.Push(p, block);
    return;
  }
  ::operator delete(p);
}

}  // namespace route_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_ROUTE_INTERNAL_SNAPSHOT_BLOCKS_H_
