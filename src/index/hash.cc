// Copyright 2026 The cairn Authors.
//
// The compiled part of the index: the keyed XXH3 hash (xxhash stays out of
// public headers), seeds, map ids and the default allocator.

#include <atomic>
#include <cstdint>
#include <new>
#include <random>
#include <string_view>

#include <xxhash.h>

#include "cairn/index/internal/arena.h"
#include "cairn/index/scan_hash_map.h"

CAIRN_NAMESPACE_BEGIN
namespace index_internal {

std::uint64_t HashKey(std::string_view key, std::uint64_t seed) noexcept {
  return XXH3_64bits_withSeed(key.data(), key.size(), seed);
}

std::uint64_t RandomSeed() noexcept {
  std::random_device device;
  std::uint64_t seed = 0;
  while (seed == 0) {
    seed = (std::uint64_t{device()} << 32) ^ device();
  }
  return seed;
}

std::uint64_t NextMapId() noexcept {
  // Only uniqueness matters; no other memory is ordered by this counter.
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

namespace {

class NewDeleteAllocator final : public IndexAllocator {
 public:
  void* Allocate(std::size_t bytes, std::size_t alignment) noexcept override {
    return ::operator new(bytes, std::align_val_t{alignment}, std::nothrow);
  }
  void Deallocate(void* pointer, std::size_t bytes,
                  std::size_t alignment) noexcept override {
    ::operator delete(pointer, std::align_val_t{alignment});
  }
};

}  // namespace
}  // namespace index_internal

IndexAllocator* DefaultIndexAllocator() noexcept {
  static index_internal::NewDeleteAllocator allocator;
  return &allocator;
}

CAIRN_NAMESPACE_END
