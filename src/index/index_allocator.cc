// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The default IndexAllocator: aligned operator new for small requests, an
// anonymous mapping advised for transparent huge pages for 2 MiB-multiple
// ones.

#include "cairn/index/index_allocator.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <new>

#include "cairn/index/internal/arena.h"

CAIRN_NAMESPACE_BEGIN
namespace index_internal {

namespace {

// Only a statistic: no other memory is ordered by it.
std::atomic<std::size_t> mapped_bytes{0};

bool IsHugeRequest(std::size_t bytes, std::size_t alignment) {
  return alignment >= kHugePageBytes && bytes % kHugePageBytes == 0;
}

// Huge requests: an anonymous mapping trimmed to a 2 MiB boundary, advised
// for transparent huge pages; everything else: aligned operator new.
class NewDeleteAllocator final : public IndexAllocator {
 public:
  void* Allocate(std::size_t bytes, std::size_t alignment) noexcept override {
    if (!IsHugeRequest(bytes, alignment)) {
      return ::operator new (bytes, std::align_val_t{alignment}, std::nothrow);
    }
    const std::size_t span = bytes + alignment;
    void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const auto base = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = (base + alignment - 1) & ~(alignment - 1);
    if (aligned != base) munmap(raw, aligned - base);
    const std::uintptr_t end = base + span;
    if (end != aligned + bytes) {
      munmap(reinterpret_cast<void*>(aligned + bytes), end - (aligned + bytes));
    }
    void* memory = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
    madvise(memory, bytes, MADV_HUGEPAGE);  // a hint; failure is harmless
#endif
    mapped_bytes.fetch_add(bytes, std::memory_order_relaxed);
    return memory;
  }
  void Deallocate(void* pointer, std::size_t bytes,
                  std::size_t alignment) noexcept override {
    if (!IsHugeRequest(bytes, alignment)) {
      ::operator delete (pointer, std::align_val_t{alignment});
      return;
    }
    munmap(pointer, bytes);
    mapped_bytes.fetch_sub(bytes, std::memory_order_relaxed);
  }
};

}  // namespace

std::size_t DefaultAllocatorMappedBytes() noexcept {
  return mapped_bytes.load(std::memory_order_relaxed);
}
}  // namespace index_internal

IndexAllocator* DefaultIndexAllocator() noexcept {
  static index_internal::NewDeleteAllocator allocator;
  return &allocator;
}

CAIRN_NAMESPACE_END
