// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ObjectRoute<R, Entry>: what GroupDirectory requires of its route (key ->
// entry owner). The library's route is ObjectRouteIndex; a host may plug in
// its own, and one that misses a member fails to compile with a single
// "constraints not satisfied" error naming the missing expression.
//
// Members, for `R r; const R& cr;`:
//   R::Owner                 std::shared_ptr<Entry>
//   R::WriteBudget           retire budget for one write made under locks
//   R(const RouteOptions&)
//   cr.WithEntry(key, fn)    fn(Entry*): the routed entry borrowed for the
//                            call, nullptr if `key` is not routed. Must not
//                            allocate (a miss included).
//   cr.WithEntries(keys, fn) fn(std::size_t index, Entry*) for every key of
//                            a std::span<const std::string_view>, in order.
//   cr.Pin(key) -> Owner     a strong owner, or null.
//   cr.VisitHandles(chunk, fn)
//                            fn(std::span<Owner>) once per chunk of at most
//                            `chunk` owners, with no route lock held.
//   r.PrepareWrite(key) -> Result<WriteBudget>
//                            called with no lock held; may wait for
//                            back-pressure and run deleters.
//   r.ReclaimIfDue()         called with no lock held: runs what writes made
//                            under locks deferred.
//   r.Publish(key, owner, budget) -> Status
//                            insert-only (D3): OK, kAlreadyExists (routed,
//                            nothing changed), kResourceExhausted (busy),
//                            kUnavailable (the route's epoch domain is shut
//                            down), kInvalidArgument (the write would retire
//                            more than the domain's whole cap: a cap set
//                            below one bucket snapshot).
//   r.EraseIfMatch(key, id, entry, budget) -> Status
//                            matched unlink (D4): OK (unlinked), kNotFound
//                            (no entry with this id at this address),
//                            kResourceExhausted (busy), kUnavailable (shut
//                            down), kInvalidArgument (null entry). On any
//                            error nothing changed.
//   cr.Diagnostics() -> RouteDiagnostics
// With a non-null budget, Publish and EraseIfMatch may be called under the
// caller's locks: they never wait and never run a deleter (host code).
// Entry must expose `std::uint64_t id() const`.
//
// Shutdown: a route has no Shutdown() of its own; once the epoch domain it
// retires into is shut down, its writes return kUnavailable. Reads keep
// working.

#ifndef CAIRN_ROUTE_ROUTE_CONCEPT_H_
#define CAIRN_ROUTE_ROUTE_CONCEPT_H_

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/route/route_diagnostics.h"
#include "cairn/route/route_options.h"

CAIRN_NAMESPACE_BEGIN

namespace route_internal {

// Callback archetypes: the exact shapes a route must accept (declared only;
// used in unevaluated contexts).
template <typename Entry>
struct EntryVisitor {
  void operator()(Entry* entry) const;
};
template <typename Entry>
struct BatchVisitor {
  void operator()(std::size_t index, Entry* entry) const;
};
template <typename Owner>
struct ChunkVisitor {
  void operator()(std::span<Owner> owners) const;
};

}  // namespace route_internal

// What a route needs of an entry: a stable 64-bit identity.
template <typename Entry>
concept RoutableEntry = requires(const Entry& entry) {
  { entry.id() } -> std::convertible_to<std::uint64_t>;
};

template <typename R, typename Entry>
concept ObjectRoute = RoutableEntry<Entry> &&
    std::same_as<typename R::Owner, std::shared_ptr<Entry>> &&
    std::constructible_from<R, const RouteOptions&> &&
    requires(R& r, const R& cr, std::string_view key,
             std::span<const std::string_view> keys, typename R::Owner owner,
             typename R::WriteBudget* budget, std::uint64_t id,
             const Entry* entry, std::size_t chunk) {
  typename R::WriteBudget;
  cr.WithEntry(key, route_internal::EntryVisitor<Entry>{});
  cr.WithEntries(keys, route_internal::BatchVisitor<Entry>{});
  { cr.Pin(key) } -> std::same_as<typename R::Owner>;
  cr.VisitHandles(chunk, route_internal::ChunkVisitor<typename R::Owner>{});
  { r.PrepareWrite(key) } -> std::same_as<Result<typename R::WriteBudget>>;
  r.ReclaimIfDue();
  { r.Publish(key, owner, budget) } -> std::same_as<Status>;
  { r.EraseIfMatch(key, id, entry, budget) } -> std::same_as<Status>;
  { cr.Diagnostics() } -> std::same_as<RouteDiagnostics>;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_ROUTE_ROUTE_CONCEPT_H_
