// Copyright 2026 The cairn Authors.
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
  // Number of route buckets, rounded up to a power of two; fixed for the
  // route's lifetime (the route does not resize). The default was chosen
  // from the table in docs/route.md.
  std::size_t bucket_count = std::size_t{1} << 16;
  // Writer stripes serialising publications (rounded up to a power of two).
  std::size_t stripe_count = 256;
  // The epoch domain the route retires bucket snapshots into; must outlive
  // the route. Null: the route owns a domain of its own named "route".
  EpochDomain* epoch_domain = nullptr;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_ROUTE_ROUTE_OPTIONS_H_
