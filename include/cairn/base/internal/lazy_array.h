// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// LazyArray<T>: an array made by the first caller that needs it, so an
// object that is never written (an empty tenant's route and directory)
// does not pay for its writer stripes. For cairn's own components; hosts
// never include it.
//
// Thread safety: Get is safe from any thread. Racing first calls each build
// an array and install it with a compare-and-swap (acq_rel); the loser
// frees its own and returns the winner's, so a T is constructed before any
// thread can reach it. Every later call is one acquire load.

#ifndef CAIRN_BASE_INTERNAL_LAZY_ARRAY_H_
#define CAIRN_BASE_INTERNAL_LAZY_ARRAY_H_

#include <atomic>
#include <cstddef>
#include <new>

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN
namespace base_internal {

template <typename T>
class LazyArray {
 public:
  explicit LazyArray(std::size_t size) noexcept : size_(size) {}
  LazyArray(const LazyArray&) = delete;
  LazyArray& operator=(const LazyArray&) = delete;
  ~LazyArray() { delete[] items_.load(std::memory_order_acquire); }

  // The array, made on the first call; null if that allocation failed
  // (a later call tries again).
  T* Get() const noexcept {
    T* items = items_.load(std::memory_order_acquire);
    if (items != nullptr) [[likely]]
      return items;
    T* fresh = new (std::nothrow) T[size_];
    if (fresh == nullptr) return nullptr;
    if (items_.compare_exchange_strong(items, fresh, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
      return fresh;
    }
    delete[] fresh;  // another first call installed its array
    return items;
  }
  // The array if made, else null. Never allocates.
  T* IfMade() const noexcept { return items_.load(std::memory_order_acquire); }
  std::size_t size() const noexcept { return size_; }

 private:
  const std::size_t size_;
  mutable std::atomic<T*> items_{nullptr};
};

}  // namespace base_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_BASE_INTERNAL_LAZY_ARRAY_H_
