// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Replica-aware quota settlement (Q4): a two-phase put committed with fewer
// counted bytes than it reserved (the rest refunded at once), and charge
// adjustments of a committed object (a replica added, replaced or lost),
// admitted against the quota as a put is, logged (H1) and replayed; and a
// stress of settlement and adjustment racing eviction and erase (Q2 at the
// end, TSan-clean).

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/base/metrics.h"
#include "cairn/directory/group_directory.h"
#include "cairn/ha/replay.h"
#include "cairn/tenant/eviction.h"
#include "directory/directory_testing.h"
#include "testing/metrics_text.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::Key;
using testing::TestPayload;
using Dir = GroupDirectory<TestPayload>;
using Handle = ObjectHandle<TestPayload>;
using View = ObjectView<TestPayload>;

struct Fixture {
  explicit Fixture(std::uint64_t limit, bool logged = false) : quota(limit) {
    DirectoryOptions o;
    o.clock = &clock;
    o.quota = &quota;
    o.route.bucket_count = 64;
    if (logged) o.durable_log = &log;
    dir = std::make_unique<Dir>(o);
  }
  // The committed counted bytes and version lookups see.
  std::uint64_t Counted(std::string_view key) const {
    std::uint64_t counted = 0;
    EXPECT_TRUE(dir->WithObject(
                       key, [&](const View& v) { counted = v.counted_bytes(); })
                    .ok());
    return counted;
  }
  std::uint64_t Version(std::string_view key) const {
    std::uint64_t version = 0;
    EXPECT_TRUE(
        dir->WithObject(key, [&](const View& v) { version = v.version(); })
            .ok());
    return version;
  }
  // A pending put of `reserved` counted bytes under `key`.
  // `must`: the put has to succeed (else a failed put is a 0 token).
  ObjectToken Reserve(std::string_view key, std::uint64_t reserved,
                      std::string_view group = {}, bool must = true) {
    CreateOptions c;
    c.group = group;
    c.size_bytes = 10;
    c.counted_bytes = reserved;
    Result<Handle> h = dir->CreatePending(key, c);
    EXPECT_TRUE(h.ok() || !must) << h.status().ToString();
    return h.ok() ? h.value().token() : ObjectToken{};
  }
  ObjectToken Committed(std::string_view key, std::uint64_t counted,
                        std::string_view group = {}) {
    const ObjectToken t = Reserve(key, counted, group);
    EXPECT_TRUE(dir->Commit(key, t).ok());
    return t;
  }
  double Metric(std::string_view op, std::string_view result) const {
    PrometheusRenderer renderer;
    dir->VisitMetrics(renderer);
    const testing_internal::ParsedExposition p =
        testing_internal::ParseExposition(renderer.Finish());
    const double v =
        p.Value("cairn_directory_operations_total",
                {{"op", std::string(op)}, {"result", std::string(result)}});
    return std::isnan(v) && result != "ok" ? 0 : v;
  }

  ManualClock clock;
  QuotaAccount quota;
  InMemoryDurableLog log;
  std::unique_ptr<Dir> dir;
};

CommitOptions Settle(std::uint64_t counted) {
  CommitOptions o;
  o.counted_bytes = counted;
  return o;
}

TEST(SettlementTest, Q4PartialCommitKeepsWhatSucceededAndRefundsTheRest) {
  Fixture f(1000);
  // Three replicas of 100 reserved; two were written.
  const ObjectToken t = f.Reserve("a", 300);
  EXPECT_EQ(f.quota.charged(), 300u);
  EXPECT_EQ(f.dir->pending_charge_bytes(), 300u);
  ASSERT_TRUE(f.dir->Commit("a", t, Settle(200)).ok());
  EXPECT_EQ(f.quota.charged(), 200u);  // the third replica's 100 back at once
  EXPECT_EQ(f.dir->pending_charge_bytes(), 0u);
  EXPECT_EQ(f.Counted("a"), 200u);
  EXPECT_EQ(f.Version("a"), 2u);
  // The refund is room for another put right away.
  const ObjectToken u = f.Reserve("b", 800);
  // Settling at zero keeps the object and refunds everything.
  ASSERT_TRUE(f.dir->Commit("b", u, Settle(0)).ok());
  EXPECT_EQ(f.quota.charged(), 200u);
  EXPECT_EQ(f.Counted("b"), 0u);
  // No settlement given: the whole reservation is committed.
  const ObjectToken w = f.Reserve("c", 50);
  ASSERT_TRUE(f.dir->Commit("c", w).ok());
  EXPECT_EQ(f.quota.charged(), 250u);
  // The erase releases what was committed, not what was reserved (Q2).
  ASSERT_TRUE(f.dir->Erase("a").ok());
  EXPECT_EQ(f.quota.charged(), 50u);
}

TEST(SettlementTest, Q4CommitWithMoreThanReservedIsRefusedAndChangesNothing) {
  Fixture f(1000);
  const ObjectToken t = f.Reserve("a", 100);
  Status s = f.dir->Commit("a", t, Settle(101));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(f.quota.charged(), 100u);
  EXPECT_EQ(f.dir->pending_charge_bytes(), 100u);
  EXPECT_EQ(f.dir->Pin("a").status().code(), StatusCode::kNotFound);  // pending
  // Still pending and committable at the reservation.
  ASSERT_TRUE(f.dir->Commit("a", t, Settle(100)).ok());
  EXPECT_EQ(f.quota.charged(), 100u);
  EXPECT_EQ(f.Counted("a"), 100u);
  // A settled put cannot be settled again.
  EXPECT_EQ(f.dir->Commit("a", t, Settle(10)).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.quota.charged(), 100u);
}

TEST(SettlementTest, Q4BatchCommitSettlesEachPutAsItsSingleCommit) {
  Fixture f(1000, /*logged=*/true);
  const ObjectToken a = f.Reserve("a", 100);
  const ObjectToken b = f.Reserve("b", 100);
  const ObjectToken c = f.Reserve("c", 100);
  const std::string_view keys[] = {"a", "b", "c"};
  const ObjectToken tokens[] = {a, b, c};
  CommitOptions options[] = {Settle(40), Settle(101), {}};
  // Mismatched lengths: nothing changes.
  std::vector<Status> out = f.dir->BatchCommit(
      keys, tokens, std::span<const CommitOptions>(options, 2));
  for (const Status& s : out) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(f.quota.charged(), 300u);
  out = f.dir->BatchCommit(keys, tokens, options);
  EXPECT_TRUE(out[0].ok());
  EXPECT_EQ(out[1].code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(out[2].ok());
  EXPECT_EQ(f.quota.charged(), 240u);  // 40 + 100 (b pending) + 100
  EXPECT_EQ(f.Counted("a"), 40u);
  EXPECT_EQ(f.Counted("c"), 100u);
  // The batch's records carry the settled bytes.
  std::vector<std::string> bodies = f.log.durable_bodies();
  ASSERT_EQ(bodies.size(), 2u);
  DurableRecordView v;
  ASSERT_TRUE(DecodeDurableRecord(bodies[0], &v).ok());
  EXPECT_EQ(v.op, DurableOp::kCommit);
  EXPECT_EQ(v.objects[0].counted_bytes, 40u);
}

// A batch cannot void one of its records, so a commit or erase whose
// refund the account could not take (here a ledger broken by hand) is
// refused before its record is appended: no record of a change that never
// happened. A refused append changes nothing.
TEST(SettlementTest, H1Q4BatchCommitLogsOnlyTheCommitsItMade) {
  Fixture f(1000, /*logged=*/true);
  const ObjectToken a = f.Reserve("a", 100);
  const ObjectToken b = f.Reserve("b", 100);
  // The account loses 150 behind the directory's back: 50 left, so a's
  // refund of 40 fits and b's of 100 no longer does.
  ASSERT_TRUE(f.quota.Release(150).ok());
  const std::string_view keys[] = {"a", "b"};
  const ObjectToken tokens[] = {a, b};
  const CommitOptions options[] = {Settle(60), Settle(0)};
  std::vector<Status> out = f.dir->BatchCommit(keys, tokens, options);
  EXPECT_TRUE(out[0].ok());
  EXPECT_EQ(out[1].code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.quota.charged(), 10u);
  std::vector<std::string> bodies = f.log.durable_bodies();
  ASSERT_EQ(bodies.size(), 1u);
  DurableRecordView v;
  ASSERT_TRUE(DecodeDurableRecord(bodies[0], &v).ok());
  EXPECT_EQ(v.objects[0].key, "a");
  // b is still pending: a commit of it is refused the same way.
  EXPECT_EQ(f.dir->Commit("b", b, Settle(0)).code(),
            StatusCode::kFailedPrecondition);
  // The ledger mended (a's 60 and b's 100), then a refused append: nothing
  // changes.
  ASSERT_TRUE(f.quota.ForceCharge(150).ok());
  const ObjectToken c = f.Reserve("c", 100);
  const std::uint64_t before = f.quota.charged();
  f.log.FailAppend(DataLossError("append"));
  const std::string_view c_key[] = {"c"};
  const ObjectToken c_token[] = {c};
  const CommitOptions c_options[] = {Settle(30)};
  out = f.dir->BatchCommit(c_key, c_token, c_options);
  EXPECT_EQ(out[0].code(), StatusCode::kDataLoss);
  EXPECT_EQ(f.quota.charged(), before);
  EXPECT_EQ(f.log.durable_bodies().size(), 1u);
  out = f.dir->BatchCommit(c_key, c_token, c_options);
  EXPECT_TRUE(out[0].ok());
  EXPECT_EQ(f.quota.charged(), before - 70);
  EXPECT_EQ(f.Counted("c"), 30u);
}

TEST(SettlementTest, H1BatchEraseLogsOnlyTheErasesItMade) {
  Fixture f(1000, /*logged=*/true);
  f.Committed("a", 40);
  f.Committed("b", 100);
  // 60 left of 140: a's release of 40 fits, b's of 100 no longer does.
  ASSERT_TRUE(f.quota.Release(80).ok());
  const std::size_t records = f.log.durable_bodies().size();
  const std::string_view keys[] = {"a", "b"};
  std::vector<Status> out = f.dir->BatchErase(keys);
  EXPECT_TRUE(out[0].ok());
  EXPECT_EQ(out[1].code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(f.dir->Pin("a").ok());
  EXPECT_TRUE(f.dir->Pin("b").ok());
  EXPECT_EQ(f.quota.charged(), 20u);
  const std::vector<std::string> bodies = f.log.durable_bodies();
  ASSERT_EQ(bodies.size(), records + 1);
  DurableRecordView v;
  ASSERT_TRUE(DecodeDurableRecord(bodies.back(), &v).ok());
  EXPECT_EQ(v.op, DurableOp::kErase);
  EXPECT_EQ(v.objects[0].key, "a");
}

TEST(SettlementTest, Q4AdjustChargesAReplicaAndRefundsALostOne) {
  Fixture f(1000);
  const ObjectToken t = f.Committed("a", 200);
  // A new replica of 100.
  ASSERT_TRUE(f.dir->AdjustCharge("a", t, {100, 0}).ok());
  EXPECT_EQ(f.quota.charged(), 300u);
  EXPECT_EQ(f.Counted("a"), 300u);
  EXPECT_EQ(f.Version("a"), 3u);
  // A replica of 100 lost.
  ASSERT_TRUE(f.dir->AdjustCharge("a", t, {0, 100}).ok());
  EXPECT_EQ(f.quota.charged(), 200u);
  EXPECT_EQ(f.Counted("a"), 200u);
  // A replacement: the new replica (120) charged, the old (100) refunded,
  // in one step.
  ASSERT_TRUE(f.dir->AdjustCharge("a", t, {120, 100}).ok());
  EXPECT_EQ(f.quota.charged(), 220u);
  EXPECT_EQ(f.Counted("a"), 220u);
  // A zero net change is OK and changes nothing, not even the version.
  const std::uint64_t version = f.Version("a");
  ASSERT_TRUE(f.dir->AdjustCharge("a", t, {50, 50}).ok());
  EXPECT_EQ(f.Version("a"), version);
  EXPECT_EQ(f.quota.charged(), 220u);
  // Refunding more than the object counts is refused, nothing changed.
  EXPECT_EQ(f.dir->AdjustCharge("a", t, {0, 221}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(f.quota.charged(), 220u);
  EXPECT_EQ(f.Counted("a"), 220u);
  // Down to zero is allowed.
  ASSERT_TRUE(f.dir->AdjustCharge("a", t, {0, 220}).ok());
  EXPECT_EQ(f.quota.charged(), 0u);
  EXPECT_EQ(f.Metric("adjust_charge", "ok"), 5);
  EXPECT_EQ(f.Metric("adjust_charge", "error"), 1);
}

// expected_version: a change the host computed from a state it read
// earlier applies only while the object has not moved since (an offload's
// Keep or another adjustment in between is kAborted, nothing changed).
// Planted bug: ignoring expected_version let the stale refund apply over
// the other change (counted 0 instead of 100).
TEST(SettlementTest,
     Q4AdjustWithAnExpectedVersionNeverAppliesOverAnotherChange) {
  Fixture f(1000);
  const ObjectToken t = f.Committed("a", 300);
  const std::uint64_t read = f.Version("a");
  ASSERT_TRUE(f.dir->AdjustCharge("a", t, {0, 200}).ok());  // lands first
  const ChargeAdjustment lost{0, 100};
  EXPECT_EQ(f.dir->AdjustCharge("a", t, lost, read).code(),
            StatusCode::kAborted);
  EXPECT_EQ(f.Counted("a"), 100u);
  EXPECT_EQ(f.quota.charged(), 100u);
  ASSERT_TRUE(f.dir->AdjustCharge("a", t, lost, f.Version("a")).ok());
  EXPECT_EQ(f.Counted("a"), 0u);
  EXPECT_EQ(f.quota.charged(), 0u);
}

TEST(SettlementTest, Q4AdjustIsAdmittedAgainstTheQuotaLikeAPut) {
  Fixture f(300);
  const ObjectToken t = f.Committed("a", 200);
  // Up to the limit exactly.
  ASSERT_TRUE(f.dir->AdjustCharge("a", t, {100, 0}).ok());
  EXPECT_EQ(f.quota.charged(), 300u);
  // One byte past it: the put's refusal, nothing changed.
  const std::uint64_t version = f.Version("a");
  const Status refused = f.dir->AdjustCharge("a", t, {1, 0});
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("deficit 1 bytes"), std::string_view::npos)
      << refused.ToString();
  CreateOptions c;
  c.counted_bytes = 1;
  const Status put = f.dir->CreatePending("b", c).status();
  EXPECT_EQ(put.code(), refused.code());
  EXPECT_EQ(put.message(), refused.message());
  EXPECT_EQ(f.quota.charged(), 300u);
  EXPECT_EQ(f.Counted("a"), 300u);
  EXPECT_EQ(f.Version("a"), version);
  EXPECT_EQ(f.Metric("adjust_charge", "quota"), 1);
  // A replacement whose net is a refund passes at the limit.
  ASSERT_TRUE(f.dir->AdjustCharge("a", t, {50, 60}).ok());
  EXPECT_EQ(f.quota.charged(), 290u);
  // Closed admission refuses a growth but not a refund, as for a put.
  f.quota.CloseAdmission();
  EXPECT_EQ(f.dir->AdjustCharge("a", t, {5, 0}).code(),
            StatusCode::kResourceExhausted);
  ASSERT_TRUE(f.dir->AdjustCharge("a", t, {0, 90}).ok());
  EXPECT_EQ(f.quota.charged(), 200u);
  f.quota.OpenAdmission();
  EXPECT_EQ(f.quota.charged(), f.Counted("a"));  // Q2
}

TEST(SettlementTest, Q4AdjustOfAStalePendingOrStagedObjectIsRefused) {
  Fixture f(1000);
  const ObjectToken old = f.Committed("a", 100);
  ASSERT_TRUE(f.dir->Erase("a").ok());
  const ObjectToken now = f.Committed("a", 100);
  // A stale token never touches the recreated key (D5).
  EXPECT_EQ(f.dir->AdjustCharge("a", old, {10, 0}).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(
      f.dir->AdjustCharge("a", ObjectToken{99, now.object}, {10, 0}).code(),
      StatusCode::kNotFound);
  EXPECT_EQ(f.dir->AdjustCharge("nope", now, {10, 0}).code(),
            StatusCode::kNotFound);
  // A pending put settles at Commit, not here.
  const ObjectToken pending = f.Reserve("p", 100);
  EXPECT_EQ(f.dir->AdjustCharge("p", pending, {10, 0}).code(),
            StatusCode::kNotFound);
  // A staged upsert replaces the whole charge at its commit: refused.
  ASSERT_TRUE(f.dir->BeginUpsert("a", now, {10, 30}).ok());
  EXPECT_EQ(f.dir->AdjustCharge("a", now, {10, 0}).code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(f.dir->CommitUpsert("a", now).ok());
  ASSERT_TRUE(f.dir->AdjustCharge("a", now, {10, 0}).ok());
  EXPECT_EQ(f.Counted("a"), 40u);
  EXPECT_EQ(f.quota.charged(), 140u);  // 40 + the pending 100
  EXPECT_EQ(f.dir->AdjustCharge("", now, {1, 0}).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(f.dir->Shutdown().ok());
  EXPECT_EQ(f.dir->AdjustCharge("a", now, {1, 0}).code(),
            StatusCode::kUnavailable);
}

TEST(SettlementTest, Q4EvictionReleasesAndReportsTheAdjustedCharge) {
  Fixture f(1000);
  const ObjectToken t = f.Committed("a", 100);
  const std::uint64_t census = f.Version("a");
  Result<Handle> h = f.dir->Pin("a");
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(f.dir->AdjustCharge("a", t, {50, 0}).ok());
  // An eviction that ranked the object before the adjustment skips it.
  std::vector<EvictedObject<TestPayload>> out;
  EXPECT_EQ(DirectoryHooks::EvictIfUnchanged(*f.dir, *h, census, false, &out),
            StatusCode::kAborted);
  // One that sees it frees the new charge.
  Evictor<TestPayload> kernel;
  Dir* d = f.dir.get();
  const EvictionResult r =
      kernel.Evict(std::span<Dir* const>(&d, 1), 150, 0,
                   Evictor<TestPayload>::Measure::kCountedBytes);
  EXPECT_EQ(r.evicted_objects, 1u);
  EXPECT_EQ(r.freed_bytes, 150u);
  EXPECT_EQ(f.quota.charged(), 0u);
}

TEST(SettlementTest, H1Q4SettlementAndAdjustmentAreLoggedAndReplayed) {
  Fixture f(1000, /*logged=*/true);
  const ObjectToken a = f.Reserve("a", 300);
  ASSERT_TRUE(f.dir->Commit("a", a, Settle(200)).ok());
  const ObjectToken b = f.Committed("b", 100, "g");
  ASSERT_TRUE(f.dir->AdjustCharge("a", a, {120, 100}).ok());  // 220
  ASSERT_TRUE(f.dir->AdjustCharge("b", b, {0, 30}).ok());     // 70
  // Refused adjustments leave no durable record.
  EXPECT_FALSE(f.dir->AdjustCharge("a", a, {2000, 0}).ok());
  EXPECT_FALSE(f.dir->AdjustCharge("b", b, {0, 71}).ok());
  EXPECT_EQ(f.log.open_reservations(), 0u);
  const std::vector<std::string> bodies = f.log.durable_bodies();
  ASSERT_EQ(bodies.size(), 4u);
  DurableRecordView v;
  ASSERT_TRUE(DecodeDurableRecord(bodies[0], &v).ok());
  EXPECT_EQ(v.op, DurableOp::kCommit);
  EXPECT_EQ(v.objects[0].counted_bytes, 200u);
  ASSERT_TRUE(DecodeDurableRecord(bodies[2], &v).ok());
  EXPECT_EQ(v.op, DurableOp::kAdjust);
  EXPECT_EQ(v.objects[0].key, "a");
  EXPECT_EQ(v.objects[0].counted_bytes, 220u);
  EXPECT_EQ(v.objects[0].version, 3u);
  ASSERT_TRUE(DecodeDurableRecord(bodies[3], &v).ok());
  EXPECT_EQ(v.op, DurableOp::kAdjust);
  EXPECT_EQ(v.group_name, "g");
  EXPECT_EQ(v.objects[0].counted_bytes, 70u);
  // A replica from the log, twice over (idempotent), has the charges; its
  // tighter limit does not refuse them (the primary admitted them).
  for (int pass = 0; pass < 2; ++pass) {
    QuotaAccount replica_quota(100);
    DirectoryOptions o;
    o.quota = &replica_quota;
    Dir replica(o);
    for (int round = 0; round < 2; ++round) {
      for (const std::string& body : bodies) {
        ASSERT_TRUE(DecodeDurableRecord(body, &v).ok());
        ASSERT_TRUE(ApplyDurableRecord(replica, v).ok());
      }
    }
    EXPECT_EQ(replica_quota.charged(), 290u);
    std::uint64_t counted = 0;
    ASSERT_TRUE(replica
                    .WithObject("a",
                                [&](const View& view) {
                                  counted = view.counted_bytes();
                                  EXPECT_EQ(view.version(), 3u);
                                })
                    .ok());
    EXPECT_EQ(counted, 220u);
    // A replica that already had the pre-adjustment object moves its
    // charge by the difference (ReplayUpdate).
    if (pass == 1) break;
  }
  // Replaying only the commits, then the adjustments, gives the same.
  QuotaAccount q2;
  DirectoryOptions o2;
  o2.quota = &q2;
  Dir replica(o2);
  for (std::size_t i : {0u, 1u}) {
    ASSERT_TRUE(DecodeDurableRecord(bodies[i], &v).ok());
    ASSERT_TRUE(ApplyDurableRecord(replica, v).ok());
  }
  EXPECT_EQ(q2.charged(), 300u);
  for (std::size_t i : {2u, 3u}) {
    ASSERT_TRUE(DecodeDurableRecord(bodies[i], &v).ok());
    ASSERT_TRUE(ApplyDurableRecord(replica, v).ok());
  }
  EXPECT_EQ(q2.charged(), 290u);
}

TEST(SettlementTest, H1AdjustLogErrorsChangeNothing) {
  Fixture f(1000, /*logged=*/true);
  const ObjectToken t = f.Committed("a", 100);
  f.log.FailReserve(UnavailableError("log full"));
  EXPECT_EQ(f.dir->AdjustCharge("a", t, {10, 0}).code(),
            StatusCode::kUnavailable);
  f.log.FailAppend(DataLossError("append"));
  EXPECT_EQ(f.dir->AdjustCharge("a", t, {0, 10}).code(), StatusCode::kDataLoss);
  EXPECT_EQ(f.quota.charged(), 100u);
  EXPECT_EQ(f.Counted("a"), 100u);
  EXPECT_EQ(f.Version("a"), 2u);
  EXPECT_EQ(f.log.open_reservations(), 0u);
  EXPECT_EQ(f.log.durable_bodies().size(), 1u);
  // A Finalize failure: made, visible, not acknowledged (H5).
  f.log.FailFinalize(DataLossError("sync"));
  EXPECT_EQ(f.dir->AdjustCharge("a", t, {10, 0}).code(), StatusCode::kDataLoss);
  EXPECT_EQ(f.Counted("a"), 110u);
  EXPECT_EQ(f.quota.charged(), 110u);
}

// Settlement and adjustment racing eviction and erase on 8 threads: every
// call returns one of its documented codes, nothing deadlocks, and at
// quiescence the account equals the live objects' charges (Q2) and never
// passed its limit by an admitted charge (Q1).
TEST(SettlementStressTest, Q4SettleAndAdjustRacingEvictionAndEraseKeepQ2) {
  constexpr int kKeys = 48;
  constexpr std::uint64_t kLimit = 4000;
  Fixture f(kLimit);
  std::atomic<bool> stop{false};
  std::atomic<bool> over_limit{false};
  std::atomic<std::uint64_t> settled{0};
  std::atomic<std::uint64_t> adjusted{0};
  auto worker = [&](int seed) {
    std::uint64_t x = 0x9e3779b97f4a7c15ULL * (seed + 1);
    auto rand = [&](std::uint64_t n) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      return x % n;
    };
    while (!stop.load(std::memory_order_relaxed)) {
      const int i = static_cast<int>(rand(kKeys));
      const std::string key = Key("k", i);
      const std::string group = i < 12 ? Key("g", i % 3) : std::string();
      switch (rand(6)) {
        case 0:
        case 1: {  // a put of up to 3 replicas, settled at what succeeded
          const std::uint64_t replica = 1 + rand(60);
          const ObjectToken t =
              f.Reserve(key, 3 * replica, group, /*must=*/false);
          if (t.object == 0) break;  // exists, or refused by the quota
          const Status s = f.dir->Commit(key, t, Settle(replica * rand(4)));
          // A racing EraseGroup removes pending members too.
          EXPECT_TRUE(s.ok() || s.code() == StatusCode::kNotFound ||
                      s.code() == StatusCode::kFailedPrecondition)
              << s.ToString();
          if (s.ok()) settled.fetch_add(1, std::memory_order_relaxed);
          break;
        }
        case 2:
        case 3: {  // a replica added, lost or replaced
          Result<Handle> h = f.dir->Pin(key);
          if (!h.ok()) break;
          const ChargeAdjustment a{rand(80), rand(80)};
          const Status s = f.dir->AdjustCharge(key, h.value().token(), a);
          EXPECT_TRUE(s.ok() || s.code() == StatusCode::kNotFound ||
                      s.code() == StatusCode::kResourceExhausted ||
                      s.code() == StatusCode::kInvalidArgument)
              << s.ToString();
          if (s.ok()) adjusted.fetch_add(1, std::memory_order_relaxed);
          break;
        }
        case 4: {
          const Status s = group.empty() || rand(2) == 0
                               ? f.dir->Erase(key)
                               : f.dir->EraseGroup(group);
          EXPECT_TRUE(s.ok() || s.code() == StatusCode::kNotFound)
              << s.ToString();
          break;
        }
        case 5: {
          Evictor<TestPayload> kernel;
          Dir* d = f.dir.get();
          kernel.Evict(std::span<Dir* const>(&d, 1), rand(400), 0,
                       Evictor<TestPayload>::Measure::kCountedBytes);
          break;
        }
      }
      if (f.quota.charged() > kLimit) {
        over_limit.store(true, std::memory_order_relaxed);
      }
    }
  };
  {
    testing::Watchdog watchdog(std::chrono::seconds(60), "settlement stress");
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) threads.emplace_back(worker, t);
    std::this_thread::sleep_for(testing::StressDuration(700));
    stop.store(true);
    for (std::thread& t : threads) t.join();
  }
  EXPECT_FALSE(over_limit.load()) << "an admitted charge passed the limit";
  EXPECT_GT(settled.load(), 0u);
  EXPECT_GT(adjusted.load(), 0u);
  // Q2 at quiescence: the account is exactly the live objects' charges.
  std::uint64_t live = 0;
  ASSERT_TRUE(DirectoryHooks::Census(*f.dir, [&](const Handle&,
                                                 const ObjectMetadata& m) {
                live += m.counted_bytes;
              }).ok());
  EXPECT_EQ(f.dir->pending_charge_bytes(), 0u);
  EXPECT_EQ(f.quota.charged(), live);
}

}  // namespace
}  // namespace cairn
