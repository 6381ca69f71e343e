// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// IndexAllocator: where a ScanHashMap gets its memory. Every allocation the
// map makes (bucket tables, overflow bucket chunks, entry arena slabs and the
// directories that list them) goes through the allocator named in
// ScanHashMapOptions, so a host can account for, place or limit the map's
// memory, and a test can make any single allocation fail.
//
// Thread safety: the map calls its allocator only from its owner thread
// (and from whichever thread destroys the map or a detached population). An
// allocator shared by maps owned by different threads must be thread-safe
// itself; DefaultIndexAllocator() is.

#ifndef CAIRN_INDEX_INDEX_ALLOCATOR_H_
#define CAIRN_INDEX_INDEX_ALLOCATOR_H_

#include <cstddef>

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

// Allocate returns nullptr on failure and never throws; the map then reports
// kResourceExhausted and changes nothing. `alignment` is a power of two, at
// least 8. Deallocate receives the same size and alignment the block was
// allocated with. Requests of a multiple of 2 MiB aligned to 2 MiB are the
// map's large tables and slab groups (huge-page candidates).
class IndexAllocator {
 public:
  virtual ~IndexAllocator() = default;
  virtual void* Allocate(std::size_t bytes, std::size_t alignment) noexcept = 0;
  virtual void Deallocate(void* pointer, std::size_t bytes,
                          std::size_t alignment) noexcept = 0;
};

// The process allocator: aligned nothrow operator new, except for 2 MiB
// requests aligned to 2 MiB, which are mapped directly and advised for
// transparent huge pages (MADV_HUGEPAGE) where the system supports it.
// Stateless and thread-safe; lives for the whole program.
IndexAllocator* DefaultIndexAllocator() noexcept;

CAIRN_NAMESPACE_END

#endif  // CAIRN_INDEX_INDEX_ALLOCATOR_H_
