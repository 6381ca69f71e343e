// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// VisitRouteMetrics: a route's RouteDiagnostics as cairn_route_* metrics
// (docs/metrics.md, "Route"). A route is reached through its directory, so
// the directory's VisitMetrics calls this with its own labels; a host that
// owns a route directly calls it with route.Diagnostics().
//
// Thread safety: a pure function of its arguments; the visitor's rules
// apply (one thread at a time).

#ifndef CAIRN_ROUTE_ROUTE_METRICS_H_
#define CAIRN_ROUTE_ROUTE_METRICS_H_

#include <span>

#include "cairn/base/metrics.h"
#include "cairn/base/version.h"
#include "cairn/route/route_diagnostics.h"

CAIRN_NAMESPACE_BEGIN

// Reports every field of `d`, each sample with `labels` first (at most
// LabelScope::kMaxLabels of them). The retired and stall figures are the
// route's epoch domain's (shared by every user of that domain); the
// domain's own metrics (EpochDomain::VisitMetrics) carry them too.
// Allocates nothing itself (the visitor may).
inline void VisitRouteMetrics(const RouteDiagnostics& d, MetricVisitor& visitor,
                              std::span<const MetricLabel> labels = {}) {
  LabelScope v(visitor, labels);
  const auto n = [](auto x) { return static_cast<double>(x); };
  v.GaugeValue("cairn_route_buckets",
               "Buckets of the route's current table (while a resize runs, "
               "the table it moves away from).",
               n(d.bucket_count));
  v.GaugeValue("cairn_route_resize_target_buckets",
               "Buckets of the table a running resize moves to; 0 when no "
               "resize runs.",
               n(d.resize_target_bucket_count));
  v.GaugeValue("cairn_route_table_bytes",
               "Bytes of the live bucket tables' allocations.",
               n(d.table_bytes));
  v.GaugeValue("cairn_route_entries", "Entries the route holds.", n(d.entries));
  v.GaugeValue("cairn_route_nonempty_buckets", "Buckets holding an entry.",
               n(d.nonempty_buckets));
  v.GaugeValue("cairn_route_max_bucket_entries",
               "Entries in the fullest bucket (a long bucket is a hot "
               "copy-on-write publication).",
               n(d.max_bucket_entries));
  v.GaugeValue("cairn_route_snapshot_bytes",
               "Bytes of the live bucket snapshots.", n(d.snapshot_bytes));
  v.CounterValue("cairn_route_publications_total",
                 "Route writes made: bucket snapshots published, and "
                 "unlinks in place.",
                 d.publications);
  v.CounterValue("cairn_route_copied_bytes_total",
                 "Bytes of bucket snapshots built by writers (the "
                 "copy-on-write cost).",
                 d.copied_bytes);
  v.CounterValue("cairn_route_resizes_total",
                 "Route resizes finished (grow or shrink).", d.resizes);
  v.CounterValue("cairn_route_resize_copied_bytes_total",
                 "Bytes of bucket snapshots built by resizes.",
                 d.resize_copied_bytes);
  v.CounterValue("cairn_route_retired_bytes_total",
                 "Bytes this route has charged for retirement (replaced "
                 "snapshots, unlinked records, old tables).",
                 d.retired_bytes_total);
  v.CounterValue("cairn_route_busy_total",
                 "Route writes refused at the epoch domain's retired-bytes "
                 "cap.",
                 d.busy_count);
  v.GaugeValue("cairn_route_domain_retired_bytes",
               "Retired bytes pending in the route's epoch domain (every "
               "user of the domain).",
               n(d.retired_bytes));
  v.GaugeValue("cairn_route_domain_retired_objects",
               "Retired objects pending in the route's epoch domain.",
               n(d.retired_count));
  v.CounterValue("cairn_route_domain_stall_reports_total",
                 "Stall reports of the route's epoch domain.", d.stall_reports);
  v.GaugeValue("cairn_route_oldest_reader_age_seconds",
               "Lower bound on the age of the oldest reader guard of the "
               "route's epoch domain.",
               static_cast<double>(d.oldest_reader_age.count()) * 1e-9);
}

CAIRN_NAMESPACE_END

#endif  // CAIRN_ROUTE_ROUTE_METRICS_H_
