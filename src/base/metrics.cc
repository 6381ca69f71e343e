// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/base/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cairn/base/check.h"

CAIRN_NAMESPACE_BEGIN

namespace metrics_internal {

std::uint32_t AssignThreadStripe() noexcept {
  static std::atomic<std::uint32_t> next{0};
  thread_stripe = next.fetch_add(1, std::memory_order_relaxed) & 0xffffu;
  return thread_stripe;
}

}  // namespace metrics_internal

std::uint64_t HistogramSnapshot::CountAtOrBelow(
    std::uint64_t bound) const noexcept {
  std::uint64_t n = 0;
  for (int i = 0; i < kBuckets; ++i) {
    // Bucket i ends at BucketLower(i + 1) - 1.
    if (BucketLower(i + 1) - 1 > bound) break;
    n += counts[static_cast<std::size_t>(i)];
  }
  return n;
}

std::uint64_t HistogramSnapshot::Quantile(double q) const noexcept {
  std::uint64_t total = 0;
  for (std::uint64_t c : counts) total += c;
  if (total == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const auto rank = std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total))));
  std::uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts[static_cast<std::size_t>(i)];
    if (seen >= rank) return BucketLower(i);
  }
  return BucketLower(kBuckets - 1);
}

HistogramSnapshot Histogram::Snapshot() const noexcept {
  HistogramSnapshot s;
  s.scale = scale_;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    s.counts[i] = counts_[i].load(std::memory_order_relaxed);
  }
  // count is the sum of what was read, so the buckets and the count agree
  // even while Record races with this read.
  for (std::uint64_t c : s.counts) s.count += c;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

void MetricVisitor::CounterValue(std::string_view name, std::string_view help,
                                 std::uint64_t value,
                                 std::span<const MetricLabel> labels) {
  MetricSample s;
  s.name = name;
  s.help = help;
  s.kind = MetricKind::kCounter;
  s.labels = labels;
  s.value = static_cast<double>(value);
  Visit(s);
}

void MetricVisitor::GaugeValue(std::string_view name, std::string_view help,
                               double value,
                               std::span<const MetricLabel> labels) {
  MetricSample s;
  s.name = name;
  s.help = help;
  s.kind = MetricKind::kGauge;
  s.labels = labels;
  s.value = value;
  Visit(s);
}

void MetricVisitor::HistogramValue(std::string_view name, std::string_view help,
                                   const HistogramSnapshot& snapshot,
                                   std::span<const MetricLabel> labels) {
  MetricSample s;
  s.name = name;
  s.help = help;
  s.kind = MetricKind::kHistogram;
  s.labels = labels;
  s.histogram = &snapshot;
  Visit(s);
}

void LabelScope::Visit(const MetricSample& sample) {
  const std::size_t n = labels_.size() + sample.labels.size();
  CAIRN_CHECK_MSG(n <= kMaxLabels, "LabelScope: too many labels");
  std::array<MetricLabel, kMaxLabels> all;
  std::copy(labels_.begin(), labels_.end(), all.begin());
  std::copy(sample.labels.begin(), sample.labels.end(),
            all.begin() + static_cast<std::ptrdiff_t>(labels_.size()));
  MetricSample scoped = sample;
  scoped.labels = std::span<const MetricLabel>(all.data(), n);
  inner_.Visit(scoped);
}

namespace {

bool ValidName(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       c == '_' || c == ':';
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

bool ValidLabelName(std::string_view name) {
  return ValidName(name) && name.find(':') == std::string_view::npos;
}

// HELP text escapes backslash and newline; label values also the quote.
void AppendEscaped(std::string& out, std::string_view text, bool quote) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

void AppendNumber(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    out += buf;
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    out += buf;
  }
}

// `name{labels[,extra]} value\n`
void AppendSample(std::string& out, std::string_view name,
                  std::string_view suffix, std::span<const MetricLabel> labels,
                  std::string_view extra_name, std::string_view extra_value,
                  double value) {
  out += name;
  out += suffix;
  if (!labels.empty() || !extra_name.empty()) {
    out += '{';
    bool first = true;
    auto label = [&](std::string_view n, std::string_view v) {
      CAIRN_CHECK_MSG(ValidLabelName(n), "metrics: invalid label name");
      if (!first) out += ',';
      first = false;
      out += n;
      out += "=\"";
      AppendEscaped(out, v, /*quote=*/true);
      out += '"';
    };
    for (const MetricLabel& l : labels) label(l.name, l.value);
    if (!extra_name.empty()) label(extra_name, extra_value);
    out += '}';
  }
  out += ' ';
  AppendNumber(out, value);
  out += '\n';
}

}  // namespace

void PrometheusRenderer::Visit(const MetricSample& sample) {
  CAIRN_CHECK_MSG(ValidName(sample.name), "metrics: invalid metric name");
  auto it = families_.find(sample.name);
  if (it == families_.end()) {
    it = families_
             .emplace(std::string(sample.name),
                      Family{std::string(sample.help), sample.kind, {}})
             .first;
    order_.emplace_back(sample.name);
  }
  Family& f = it->second;
  CAIRN_CHECK_MSG(f.kind == sample.kind,
                  "metrics: one family reported with two kinds");
  if (sample.kind != MetricKind::kHistogram) {
    AppendSample(f.lines, sample.name, "", sample.labels, "", "", sample.value);
    return;
  }
  CAIRN_CHECK(sample.histogram != nullptr);
  const HistogramSnapshot& h = *sample.histogram;
  // Cumulative buckets at 4^k recorded units: bucket boundaries, so each
  // count is exact.
  std::uint64_t top = 0;  // the largest recorded bucket's end
  for (int i = HistogramSnapshot::kBuckets - 1; i >= 0; --i) {
    if (h.counts[static_cast<std::size_t>(i)] != 0) {
      top = HistogramSnapshot::BucketLower(i + 1);
      break;
    }
  }
  char le[32];
  for (std::uint64_t bound = 1;; bound *= 4) {
    std::snprintf(le, sizeof le, "%.6g", static_cast<double>(bound) * h.scale);
    // Values below 4^k (integers, so <= 4^k - 1): exact, since 4^k is a
    // bucket boundary.
    AppendSample(f.lines, sample.name, "_bucket", sample.labels, "le", le,
                 static_cast<double>(h.CountAtOrBelow(bound - 1)));
    if (bound >= top || bound > (UINT64_MAX >> 2)) break;
  }
  AppendSample(f.lines, sample.name, "_bucket", sample.labels, "le", "+Inf",
               static_cast<double>(h.count));
  AppendSample(f.lines, sample.name, "_sum", sample.labels, "", "",
               static_cast<double>(h.sum) * h.scale);
  AppendSample(f.lines, sample.name, "_count", sample.labels, "", "",
               static_cast<double>(h.count));
}

std::string PrometheusRenderer::Finish() {
  std::string out;
  for (const std::string& name : order_) {
    const Family& f = families_.find(name)->second;
    out += "# HELP ";
    out += name;
    out += ' ';
    AppendEscaped(out, f.help, /*quote=*/false);
    out += "\n# TYPE ";
    out += name;
    switch (f.kind) {
      case MetricKind::kCounter:
        out += " counter\n";
        break;
      case MetricKind::kGauge:
        out += " gauge\n";
        break;
      case MetricKind::kHistogram:
        out += " histogram\n";
        break;
    }
    out += f.lines;
  }
  order_.clear();
  families_.clear();
  return out;
}

CAIRN_NAMESPACE_END
