// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// RouteDiagnostics: a route's occupancy and, for the epoch route, its
// publication and reclamation figures. A value type, filled by
// Diagnostics() (a cold path).

#ifndef CAIRN_ROUTE_ROUTE_DIAGNOSTICS_H_
#define CAIRN_ROUTE_ROUTE_DIAGNOSTICS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

struct RouteDiagnostics {
  // The current bucket table (while a resize runs, the table it moves
  // away from; resize_target_bucket_count is the one it moves to, else 0).
  std::size_t bucket_count = 0;
  std::size_t resize_target_bucket_count = 0;
  std::size_t table_bytes = 0;  // the live bucket tables' allocations
  std::size_t entries = 0;
  std::size_t nonempty_buckets = 0;
  std::size_t max_bucket_entries = 0;
  // Epoch route only (a route without an epoch domain leaves them zero):
  // Writes made: snapshots published, and unlinks in place (docs/route.md).
  std::uint64_t publications = 0;
  std::uint64_t copied_bytes = 0;  // bytes of snapshots built by writers
  std::uint64_t resizes = 0;       // resizes finished (grow or shrink)
  // Bytes of snapshots built by resizes (splits and merges).
  std::uint64_t resize_copied_bytes = 0;
  std::uint64_t snapshot_bytes = 0;  // bytes of the live snapshots
  // Bytes charged to the epoch domain and not yet released: retired
  // snapshots, the records and declared bytes of the entries unlinked with
  // them (see ObjectRouteIndex, "Retired bytes"), and budgets taken by
  // writes in flight. The domain's figure: other users of a shared domain
  // are included.
  std::uint64_t retired_bytes = 0;
  std::uint64_t retired_count = 0;
  // Bytes this route has charged for retirement since it was built
  // (replaced and moved snapshots, unlinked records and declared bytes, old
  // tables): the churn cost, cumulative.
  std::uint64_t retired_bytes_total = 0;
  std::uint64_t busy_count = 0;  // writes refused at the retired cap
  std::uint64_t stall_reports = 0;
  std::chrono::nanoseconds oldest_reader_age{0};
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_ROUTE_ROUTE_DIAGNOSTICS_H_
