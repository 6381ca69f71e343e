// Copyright 2026 The cairn Authors.
//
// Options, diagnostics and hashing shared by the object routes: the epoch
// copy-on-write ObjectRouteIndex (the library's route) and the LockedRoute
// reference (bench/baselines: test oracle and `owning` bench baseline).
//
// Route interface (what a Route<Entry> must provide):
//   using Owner = std::shared_ptr<Entry>;
//   explicit Route(const RouteOptions&);
//   template <class Fn> void WithEntry(std::string_view key, Fn&& fn) const;
//       fn(Entry*) with the entry borrowed for the call, nullptr if absent.
//   template <class Fn> void WithEntries(std::span<const std::string_view>,
//                                        Fn&& fn) const;
//       fn(std::size_t index, Entry*) for every key, in order.
//   Owner Pin(std::string_view key) const;
//   template <class Fn> void VisitHandles(std::size_t chunk, Fn&& fn) const;
//       fn(std::span<Owner>) once per chunk of at most `chunk` owners.
//   using WriteBudget = ...;  // retire budget for a write made under locks
//   Result<WriteBudget> PrepareWrite(std::string_view key);  // no lock held;
//       may wait for back-pressure (E4) and run deleters
//   void ReclaimIfDue();       // no lock held: deleters deferred by writes
//   Status Publish(std::string_view key, Owner owner,
//                  WriteBudget* budget = nullptr);  // insert-only (D3):
//       kAlreadyExists if routed; a route may also fail with
//       kResourceExhausted (the epoch route under back-pressure, E4).
//   Result<bool> EraseIfMatch(std::string_view key, std::uint64_t id,
//                             const Entry* entry,
//                             WriteBudget* budget = nullptr);  // D4
//       With a budget the write may be made under the caller's locks: it
//       never waits and never runs a deleter (kResourceExhausted at once
//       without room); without one it may do both.
//       true: unlinked; false: no match; an error: nothing changed.
//   RouteDiagnostics Diagnostics() const;
// Entry must expose `std::uint64_t id() const`.
//

#ifndef CAIRN_ROUTE_ROUTE_OPTIONS_H_
#define CAIRN_ROUTE_ROUTE_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

class EpochDomain;

struct RouteOptions {
  // Number of route buckets, rounded up to a power of two; fixed for the
  // route's lifetime (the RFC's first version does not resize). The default
  // was chosen from the table in docs/route.md.
  std::size_t bucket_count = std::size_t{1} << 16;
  // Writer stripes serialising publications (rounded up to a power of two).
  std::size_t stripe_count = 256;
  // The epoch domain the route retires bucket snapshots into. Null: the
  // route owns a domain of its own named "route" (the RFC's object-route
  // domain, separate from the tenant registry's, E6).
  EpochDomain* epoch_domain = nullptr;
};

struct RouteDiagnostics {
  std::size_t bucket_count = 0;
  std::size_t entries = 0;
  std::size_t nonempty_buckets = 0;
  std::size_t max_bucket_entries = 0;
  // Epoch route only (zero for the locked reference):
  std::uint64_t publications = 0;    // snapshots published
  std::uint64_t copied_bytes = 0;    // bytes of snapshots built by writers
  std::uint64_t snapshot_bytes = 0;  // bytes of the live snapshots
  std::uint64_t retired_bytes = 0;   // waiting for a grace period
  std::uint64_t retired_count = 0;
  std::uint64_t busy_count = 0;  // writes refused at the retired cap
  std::uint64_t stall_reports = 0;
  std::chrono::nanoseconds oldest_reader_age{0};
};

namespace route_internal {

// Transparent hash/equality so std::string_view looks up std::string keys
// without building a key copy.
struct KeyHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view key) const noexcept {
    return std::hash<std::string_view>{}(key);
  }
};
struct KeyEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const noexcept {
    return a == b;
  }
};

// Spreads the key hash so bucket choice and in-bucket slot choice use
// independent bits.
inline std::uint64_t MixHash(std::uint64_t h) noexcept {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

inline std::uint64_t RouteHash(std::string_view key) noexcept {
  return MixHash(KeyHash{}(key));
}

// VisitHandles' emission step: hands fn every full chunk of `staged` and
// keeps the remainder for the next round (flush: emit it too).
template <typename Owner, typename Fn>
void EmitChunks(std::vector<Owner>& staged, std::size_t chunk, bool flush,
                Fn& fn) {
  std::size_t begin = 0;
  while (staged.size() - begin >= chunk) {
    fn(std::span<Owner>(staged.data() + begin, chunk));
    begin += chunk;
  }
  if (flush && begin < staged.size()) {
    fn(std::span<Owner>(staged.data() + begin, staged.size() - begin));
    begin = staged.size();
  }
  staged.erase(staged.begin(), staged.begin() + begin);
}

inline std::size_t RoundUpPowerOfTwo(std::size_t n) noexcept {
  std::size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace route_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_ROUTE_ROUTE_OPTIONS_H_
