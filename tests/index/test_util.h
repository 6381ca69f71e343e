// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Helpers shared by the ScanHashMap tests.

#ifndef CAIRN_TESTS_INDEX_TEST_UTIL_H_
#define CAIRN_TESTS_INDEX_TEST_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <ostream>
#include <random>
#include <string>

#include "cairn/index/scan_hash_map.h"
#include "testing/scan_hash_map_peer.h"

namespace cairn {
// Prints outcomes by name in test failure messages (found by ADL).
inline std::ostream& operator<<(std::ostream& os, ScanHashMapOutcome outcome) {
  return os << StatusCodeName(ToStatusCode(outcome));
}
}  // namespace cairn

namespace cairn::index_test {

using Outcome = ScanHashMapOutcome;
using Peer = index_internal::ScanHashMapTestPeer;

struct Loc {
  std::uint64_t offset;
  bool operator==(const Loc&) const = default;
};

using Map = ScanHashMap<Loc>;

inline std::string Key(std::uint64_t i, std::size_t width = 16) {
  char buffer[32];
  const int n = std::snprintf(buffer, sizeof(buffer), "k%llu",
                              static_cast<unsigned long long>(i));
  std::string key(buffer, static_cast<std::size_t>(n));
  if (key.size() < width) key.append(width - key.size(), '.');
  return key;
}

// An allocator that fails on demand: after `fail_after` more successful
// allocations, or with probability `fail_per_mille` (seeded, deterministic).
// Tracks live bytes so leaks show up in the test itself.
class FailingAllocator final : public IndexAllocator {
 public:
  explicit FailingAllocator(std::uint64_t seed = 1) : rng_(seed) {}

  void* Allocate(std::size_t bytes, std::size_t alignment) noexcept override {
    ++calls_;
    if (fail_after_ >= 0 && fail_after_-- == 0) {
      ++failures_;
      return nullptr;
    }
    if (fail_per_mille_ > 0 &&
        std::uniform_int_distribution<int>(0, 999)(rng_) < fail_per_mille_) {
      ++failures_;
      return nullptr;
    }
    void* p = DefaultIndexAllocator()->Allocate(bytes, alignment);
    if (p != nullptr) live_bytes_ += bytes;
    return p;
  }
  void Deallocate(void* pointer, std::size_t bytes,
                  std::size_t alignment) noexcept override {
    live_bytes_ -= bytes;
    DefaultIndexAllocator()->Deallocate(pointer, bytes, alignment);
  }

  void FailAfter(long n) { fail_after_ = n; }
  void FailPerMille(int p) { fail_per_mille_ = p; }
  void Heal() {
    fail_after_ = -1;
    fail_per_mille_ = 0;
  }
  long failures() const { return failures_; }
  long calls() const { return calls_; }
  long long live_bytes() const { return live_bytes_; }

 private:
  std::mt19937_64 rng_;
  long fail_after_ = -1;
  int fail_per_mille_ = 0;
  long failures_ = 0;
  long calls_ = 0;
  long long live_bytes_ = 0;
};

}  // namespace cairn::index_test

#endif  // CAIRN_TESTS_INDEX_TEST_UTIL_H_
