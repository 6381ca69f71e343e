// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Helpers for the components' metrics tests: render what a VisitMetrics call
// reports, parse it back (metrics_text.h), and read one histogram bucket by
// its numeric upper bound.

#ifndef CAIRN_TESTS_TESTING_METRICS_EXPECT_H_
#define CAIRN_TESTS_TESTING_METRICS_EXPECT_H_

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cairn/base/metrics.h"
#include "testing/metrics_text.h"

namespace cairn::testing_internal {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Renders everything `visit(renderer)` reports and parses it back.
template <typename Fn>
ParsedExposition RenderAndParse(Fn&& visit) {
  PrometheusRenderer renderer;
  visit(static_cast<MetricVisitor&>(renderer));
  return ParseExposition(renderer.Finish());
}

// The `<name>_bucket` sample with `labels` plus le = `bound` (compared as
// numbers, to the renderer's six significant digits); NaN if none.
inline double BucketValue(const ParsedExposition& parsed,
                          const std::string& name, const Labels& labels,
                          double bound) {
  for (const ParsedSample& s : parsed.samples) {
    if (s.name != name + "_bucket" || s.labels.size() != labels.size() + 1 ||
        s.labels.back().first != "le") {
      continue;
    }
    if (!std::equal(labels.begin(), labels.end(), s.labels.begin())) continue;
    const double le = std::strtod(s.labels.back().second.c_str(), nullptr);
    if (std::fabs(le - bound) <= 1e-5 * bound) return s.value;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace cairn::testing_internal

#endif  // CAIRN_TESTS_TESTING_METRICS_EXPECT_H_
