// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// RouteOptions: how an object route is sized and which epoch domain it
// retires into. Read once, at construction.

#ifndef CAIRN_ROUTE_ROUTE_OPTIONS_H_
#define CAIRN_ROUTE_ROUTE_OPTIONS_H_

#include <cstddef>

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

class EpochDomain;

struct RouteOptions {
  // The starting number of route buckets, rounded up to a power of two. The
  // route doubles its bucket table when the mean entries per bucket rises
  // above 2 and halves it when the mean falls below 0.5, never below this
  // starting size (docs/route.md, "Resizing").
  std::size_t bucket_count = 64;
  // Keep bucket_count for the route's lifetime (no resizing), for hosts that
  // size the route themselves.
  bool fixed_bucket_count = false;
  // Writer stripes serialising publications (rounded up to a power of two,
  // and capped at the starting bucket count: each bucket of every table
  // size must belong to one stripe).
  std::size_t stripe_count = 64;
  // The epoch domain the route retires bucket snapshots into; must outlive
  // the route. Null: the route owns a domain of its own named "route".
  EpochDomain* epoch_domain = nullptr;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_ROUTE_ROUTE_OPTIONS_H_
