// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// EpochDomain::VisitMetrics against workloads whose counts are known, read
// back from the Prometheus text; the cap-wait histogram against latencies
// made by a ManualClock that a deleter advances.

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/base/metrics.h"
#include "cairn/epoch/epoch_domain.h"
#include "testing/metrics_expect.h"

namespace cairn {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing_internal::BucketValue;
using testing_internal::Labels;
using testing_internal::ParsedExposition;
using testing_internal::RenderAndParse;

struct Node {
  std::size_t bytes;
};
void DeleteNode(void* p) { delete static_cast<Node*>(p); }

ManualClock* advance_on_delete = nullptr;  // set by the cap-wait test
void DeleteNodeAdvancing(void* p) {
  advance_on_delete->Advance(milliseconds(5));
  delete static_cast<Node*>(p);
}

Status RetireNode(EpochDomain& domain, std::size_t bytes,
                  EpochDomain::Deleter deleter = &DeleteNode) {
  auto* node = new Node{bytes};
  Status s = domain.Retire(node, bytes, deleter);
  if (!s.ok()) delete node;  // the caller keeps it on error
  return s;
}

// A guard of `participant` held on another thread until Release().
class HeldGuard {
 public:
  explicit HeldGuard(Participant& participant)
      : thread_([this, &participant] {
          Guard guard = participant.Enter();
          entered_.store(true, std::memory_order_release);
          while (!release_.load(std::memory_order_acquire)) {
            std::this_thread::yield();
          }
        }) {
    while (!entered_.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  ~HeldGuard() { Release(); }
  HeldGuard(const HeldGuard&) = delete;
  HeldGuard& operator=(const HeldGuard&) = delete;
  void Release() {
    release_.store(true, std::memory_order_release);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> entered_{false};
  std::atomic<bool> release_{false};
  std::thread thread_;
};

double Metric(const ParsedExposition& p, const std::string& name,
              const std::string& domain) {
  return p.Value(name, {{"domain", domain}});
}

TEST(EpochMetricsTest, CountsMatchAKnownWorkload) {
  ManualClock clock;
  std::vector<StallReport> reports;
  EpochOptions options;
  options.name = "counts";
  options.clock = &clock;
  options.retired_bytes_cap = 1 << 20;
  options.reclaim_every = 1'000'000;  // reclaim only when the test says
  options.stall_threshold = seconds(1);
  options.stall_hook = [&](const StallReport& r) { reports.push_back(r); };
  EpochDomain domain(options);
  auto visit = [&](MetricVisitor& v) { domain.VisitMetrics(v); };

  // Ten nodes of 100 bytes, none reclaimed yet.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(RetireNode(domain, 100).ok());
  ParsedExposition p = RenderAndParse(visit);
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.types["cairn_epoch_retired_bytes"], "gauge");
  EXPECT_EQ(p.types["cairn_epoch_reclaimed_bytes_total"], "counter");
  EXPECT_EQ(p.types["cairn_epoch_cap_wait_seconds"], "histogram");
  EXPECT_EQ(Metric(p, "cairn_epoch_global_epoch", "counts"), 1);
  EXPECT_EQ(Metric(p, "cairn_epoch_retired_objects", "counts"), 10);
  EXPECT_EQ(Metric(p, "cairn_epoch_retired_bytes", "counts"), 1000);
  EXPECT_EQ(Metric(p, "cairn_epoch_retired_bytes_cap", "counts"), 1 << 20);
  EXPECT_EQ(Metric(p, "cairn_epoch_reclaim_passes_total", "counts"), 0);
  EXPECT_EQ(Metric(p, "cairn_epoch_reclaimed_objects_total", "counts"), 0);
  EXPECT_EQ(Metric(p, "cairn_epoch_participants", "counts"), 0);

  // One pass with no guard: two grace periods free all ten (E2).
  EXPECT_EQ(domain.TryReclaim(), 10u);
  p = RenderAndParse(visit);
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(Metric(p, "cairn_epoch_global_epoch", "counts"), 3);
  EXPECT_EQ(Metric(p, "cairn_epoch_grace_periods_total", "counts"), 2);
  EXPECT_EQ(Metric(p, "cairn_epoch_reclaim_passes_total", "counts"), 1);
  EXPECT_EQ(Metric(p, "cairn_epoch_reclaimed_objects_total", "counts"), 10);
  EXPECT_EQ(Metric(p, "cairn_epoch_reclaimed_bytes_total", "counts"), 1000);
  EXPECT_EQ(Metric(p, "cairn_epoch_retired_objects", "counts"), 0);
  EXPECT_EQ(Metric(p, "cairn_epoch_retired_bytes", "counts"), 0);
  // The peak is of bytes charged to the cap, a thread's retire credit
  // (cap / 64 here) included.
  EXPECT_GE(Metric(p, "cairn_epoch_retired_bytes_peak", "counts"), 1000);
  EXPECT_LE(Metric(p, "cairn_epoch_retired_bytes_peak", "counts"),
            1000 + (1 << 20) / 64);

  // A reader pins epoch 3; three nodes of 50 bytes wait behind it.
  Result<Participant> reader = domain.RegisterParticipant("reader");
  ASSERT_TRUE(reader.ok());
  HeldGuard held(*reader);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(RetireNode(domain, 50).ok());
  EXPECT_EQ(domain.TryReclaim(), 0u);  // 3 -> 4, then blocked; age 0
  clock.Advance(seconds(1));
  EXPECT_EQ(domain.TryReclaim(), 0u);  // report 0, at 1x the threshold
  clock.Advance(seconds(2));
  EXPECT_EQ(domain.TryReclaim(), 0u);  // report 1, at 3x
  ASSERT_EQ(reports.size(), 2u);
  p = RenderAndParse(visit);
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(Metric(p, "cairn_epoch_participants", "counts"), 1);
  EXPECT_EQ(Metric(p, "cairn_epoch_participant_slots", "counts"), 1);
  EXPECT_EQ(Metric(p, "cairn_epoch_active_guards", "counts"), 1);
  EXPECT_EQ(Metric(p, "cairn_epoch_global_epoch", "counts"), 4);
  EXPECT_EQ(Metric(p, "cairn_epoch_grace_periods_total", "counts"), 3);
  EXPECT_EQ(Metric(p, "cairn_epoch_reclaim_passes_total", "counts"), 4);
  EXPECT_EQ(Metric(p, "cairn_epoch_stall_reports_total", "counts"), 2);
  EXPECT_EQ(Metric(p, "cairn_epoch_oldest_guard_age_seconds", "counts"), 3);
  EXPECT_EQ(Metric(p, "cairn_epoch_since_last_advance_seconds", "counts"), 3);
  EXPECT_EQ(Metric(p, "cairn_epoch_retired_objects", "counts"), 3);
  EXPECT_EQ(Metric(p, "cairn_epoch_retired_bytes", "counts"), 150);
  EXPECT_EQ(Metric(p, "cairn_epoch_barriers_total", "counts"), 0);

  // A barrier times out behind the reader; after it leaves one completes.
  EXPECT_EQ(domain.Barrier(milliseconds(1)).code(),
            StatusCode::kDeadlineExceeded);
  held.Release();
  ASSERT_TRUE(domain.Barrier().ok());
  p = RenderAndParse(visit);
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(Metric(p, "cairn_epoch_barriers_total", "counts"), 2);
  EXPECT_EQ(Metric(p, "cairn_epoch_barrier_timeouts_total", "counts"), 1);
  EXPECT_EQ(Metric(p, "cairn_epoch_stall_reports_total", "counts"), 2);
  EXPECT_EQ(Metric(p, "cairn_epoch_active_guards", "counts"), 0);
  EXPECT_EQ(Metric(p, "cairn_epoch_oldest_guard_age_seconds", "counts"), 0);
  EXPECT_EQ(Metric(p, "cairn_epoch_reclaimed_objects_total", "counts"), 13);
  EXPECT_EQ(Metric(p, "cairn_epoch_reclaimed_bytes_total", "counts"), 1150);
  EXPECT_EQ(Metric(p, "cairn_epoch_retired_bytes", "counts"), 0);
  EXPECT_GT(Metric(p, "cairn_epoch_reclaim_passes_total", "counts"), 4);
  EXPECT_EQ(Metric(p, "cairn_epoch_busy_total", "counts"), 0);
  EXPECT_EQ(Metric(p, "cairn_epoch_cap_wait_seconds_count", "counts"), 0);
}

TEST(EpochMetricsTest, CapWaitHistogramHasTheKnownLatencies) {
  ManualClock clock;
  advance_on_delete = &clock;
  EpochOptions options;
  options.name = "cap";
  options.clock = &clock;
  options.retired_bytes_cap = 1000;
  options.reclaim_every = 1'000'000;
  options.reclaim_deadline = milliseconds(1);
  options.stall_threshold = seconds(0);
  EpochDomain domain(options);

  // 900 bytes whose deleter takes 5 ms of the clock; 200 more must wait
  // for it: one wait of exactly 5 ms, then room.
  ASSERT_TRUE(RetireNode(domain, 900, &DeleteNodeAdvancing).ok());
  ASSERT_TRUE(RetireNode(domain, 200).ok());
  // A reader pins 600 bytes; 500 more wait reclaim_deadline (real time, no
  // clock movement: a wait of 0) and are refused.
  ASSERT_TRUE(domain.Barrier().ok());
  Result<Participant> reader = domain.RegisterParticipant("reader");
  ASSERT_TRUE(reader.ok());
  {
    HeldGuard held(*reader);
    ASSERT_TRUE(RetireNode(domain, 600).ok());
    EXPECT_EQ(RetireNode(domain, 500).code(), StatusCode::kResourceExhausted);
  }

  // A second domain reported through the same renderer keeps its own label.
  EpochOptions other_options;
  other_options.name = "other";
  EpochDomain other(other_options);
  const ParsedExposition p = RenderAndParse([&](MetricVisitor& v) {
    domain.VisitMetrics(v);
    other.VisitMetrics(v);
  });
  advance_on_delete = nullptr;
  ASSERT_EQ(p.error, "");
  const Labels cap = {{"domain", "cap"}};
  const std::string h = "cairn_epoch_cap_wait_seconds";
  EXPECT_EQ(p.Value(h + "_count", cap), 2);
  EXPECT_DOUBLE_EQ(p.Value(h + "_sum", cap), 0.005);
  // le = 4^k ns: values below 1 ns (the refusal's 0), below 4^11 ns
  // (4.19 ms: still only the 0), below 4^12 ns (16.8 ms: both).
  EXPECT_EQ(BucketValue(p, h, cap, 1e-9), 1);
  EXPECT_EQ(BucketValue(p, h, cap, 4194304e-9), 1);
  EXPECT_EQ(BucketValue(p, h, cap, 16777216e-9), 2);
  EXPECT_EQ(p.Value(h + "_bucket", {{"domain", "cap"}, {"le", "+Inf"}}), 2);
  EXPECT_EQ(p.Value("cairn_epoch_busy_total", cap), 1);
  EXPECT_EQ(p.Value("cairn_epoch_retired_bytes_cap", cap), 1000);
  EXPECT_GE(p.Value("cairn_epoch_retired_bytes_peak", cap), 900);
  EXPECT_LE(p.Value("cairn_epoch_retired_bytes_peak", cap), 1000);
  EXPECT_EQ(p.Value(h + "_count", {{"domain", "other"}}), 0);
  EXPECT_EQ(p.Value("cairn_epoch_busy_total", {{"domain", "other"}}), 0);
}

}  // namespace
}  // namespace cairn
