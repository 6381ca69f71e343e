// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// D11: a pending put or staged upsert past pending_put_timeout is taken over
// by the next CreatePending of its key / the next named BeginUpsert of its
// object, without waiting for ReapPendingPuts: the stale charge refunded in
// the same step (Q2), the stale token's Commit/Abort (CommitUpsert/
// AbortUpsert) refused without touching the new put, nothing logged (a
// pending step is invisible, H1). Deterministic tests on a manual clock,
// then a stress test where puts race takeovers, commits, aborts and the
// reaper.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/directory/durable_log.h"
#include "cairn/directory/group_directory.h"
#include "cairn/directory/quota.h"
#include "directory/directory_testing.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using std::chrono::nanoseconds;
using testing::Sized;
using testing::TestPayload;

constexpr nanoseconds kTimeout{1000};

// A directory on a manual clock with a quota account, a durable log and a
// removal counter.
struct Fixture {
  explicit Fixture(std::uint64_t limit = QuotaAccount::kUnlimited,
                   nanoseconds timeout = kTimeout)
      : quota(limit) {
    DirectoryOptions o;
    o.clock = &clock;
    o.quota = &quota;
    o.durable_log = &log;
    o.pending_put_timeout = timeout;
    o.on_removed = [this](const RemovedObject& r) {
      std::lock_guard<std::mutex> lock(mu);
      ++removed[r.token.object];
    };
    dir = std::make_unique<GroupDirectory<TestPayload>>(std::move(o));
  }
  int Removals(ObjectId id) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = removed.find(id);
    return it == removed.end() ? 0 : it->second;
  }
  // The committed counted bytes of every active object.
  std::uint64_t ActiveCounted() {
    std::uint64_t sum = 0;
    EXPECT_TRUE(dir->VisitHandles([&](auto handles) {
                     for (const auto& h : handles) sum += h->counted_bytes();
                   })
                    .ok());
    return sum;
  }
  // Q2: the account holds the active objects' charges plus the pending
  // ones (the pending gauge).
  void ExpectQ2() {
    EXPECT_EQ(quota.charged(), ActiveCounted() + dir->pending_charge_bytes());
  }

  ManualClock clock;
  QuotaAccount quota;
  InMemoryDurableLog log;
  std::mutex mu;
  std::map<ObjectId, int> removed;
  std::unique_ptr<GroupDirectory<TestPayload>> dir;
};

TEST(PendingTakeoverTest, D11ExpiredPendingPutIsTakenOverByCreatePending) {
  Fixture f;
  auto old = f.dir->CreatePending("k", Sized(10));
  ASSERT_TRUE(old.ok());
  f.clock.Advance(kTimeout);  // at the cutoff: expired, as the reaper says
  auto put = f.dir->CreatePending("k", Sized(25));
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_NE(put->token(), old->token());
  // The stale charge left in the same step (Q2); the stale put's removal
  // was emitted once.
  EXPECT_EQ(f.quota.charged(), 25u);
  EXPECT_EQ(f.dir->pending_charge_bytes(), 25u);
  EXPECT_EQ(f.Removals(old->token().object), 1);
  EXPECT_EQ(f.dir->object_count(), 1u);
  f.ExpectQ2();
  // The new put is pending (invisible) and young: the reaper leaves it.
  EXPECT_EQ(f.dir->Pin("k").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dir->ReapPendingPuts(), 0u);
  ASSERT_TRUE(f.dir->Commit("k", put->token()).ok());
  EXPECT_EQ(f.dir->Pin("k").value().token(), put->token());
  EXPECT_EQ(f.quota.charged(), 25u);
  EXPECT_EQ(f.dir->pending_charge_bytes(), 0u);
  f.ExpectQ2();
}

TEST(PendingTakeoverTest, D11PendingPutNotYetExpiredStillRefusesCreatePending) {
  Fixture f;
  auto old = f.dir->CreatePending("k", Sized(10));
  ASSERT_TRUE(old.ok());
  f.clock.Advance(kTimeout - nanoseconds(1));
  EXPECT_EQ(f.dir->CreatePending("k", Sized(5)).status().code(),
            StatusCode::kAlreadyExists);
  // Nothing moved: the first put's charge, gauge and token are as before.
  EXPECT_EQ(f.quota.charged(), 10u);
  EXPECT_EQ(f.dir->pending_charge_bytes(), 10u);
  EXPECT_EQ(f.Removals(old->token().object), 0);
  ASSERT_TRUE(f.dir->Commit("k", old->token()).ok());
  // A committed object is never taken over, however old.
  f.clock.Advance(kTimeout * 10);
  EXPECT_EQ(f.dir->CreatePending("k", Sized(5)).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(f.dir->Create("k", Sized(5)).status().code(),
            StatusCode::kAlreadyExists);
  f.ExpectQ2();

  // Without a timeout nothing expires: a pending put holds its key.
  Fixture never(QuotaAccount::kUnlimited, nanoseconds(0));
  auto held = never.dir->CreatePending("k", Sized(10));
  ASSERT_TRUE(held.ok());
  never.clock.Advance(std::chrono::hours(1));
  EXPECT_EQ(never.dir->CreatePending("k", Sized(5)).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_TRUE(never.dir->Commit("k", held->token()).ok());
}

TEST(PendingTakeoverTest,
     D11StaleTokenAfterTakeoverFailsAndLeavesNewPutIntact) {
  Fixture f;
  auto old = f.dir->CreatePending("k", Sized(10));
  ASSERT_TRUE(old.ok());
  f.clock.Advance(kTimeout * 2);
  auto put = f.dir->CreatePending("k", Sized(30));
  ASSERT_TRUE(put.ok());
  // The stale token names an instance the key no longer routes: kNotFound,
  // as after an Abort or a reap, and the new put is untouched.
  EXPECT_EQ(f.dir->Commit("k", old->token()).code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dir->Abort("k", old->token()).code(), StatusCode::kNotFound);
  const std::vector<std::string_view> keys = {"k"};
  const std::vector<ObjectToken> tokens = {old->token()};
  EXPECT_EQ(f.dir->BatchCommit(keys, tokens)[0].code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dir->pending_charge_bytes(), 30u);
  EXPECT_EQ(f.Removals(put->token().object), 0);
  EXPECT_EQ(f.Removals(old->token().object), 1);
  EXPECT_TRUE(f.log.records().empty());  // nothing visible happened (H1)
  ASSERT_TRUE(f.dir->Commit("k", put->token()).ok());
  EXPECT_EQ(f.dir->Commit("k", old->token()).code(), StatusCode::kNotFound);
  auto pinned = f.dir->Pin("k");
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(pinned->token(), put->token());
  EXPECT_EQ(pinned.value()->counted_bytes(), 30u);
  f.ExpectQ2();
  // The takeover and the stale calls wrote nothing: one record, the new
  // put's commit.
  const auto bodies = f.log.durable_bodies();
  ASSERT_EQ(bodies.size(), 1u);
  DurableRecordView record;
  ASSERT_TRUE(DecodeDurableRecord(bodies[0], &record).ok());
  EXPECT_EQ(record.op, DurableOp::kCommit);
  ASSERT_EQ(record.objects.size(), 1u);
  EXPECT_EQ(record.objects[0].object, put->token().object);
  EXPECT_EQ(record.objects[0].counted_bytes, 30u);
}

TEST(PendingTakeoverTest, D11TakeoverOfAGroupMemberKeepsV1) {
  Fixture f;
  auto old = f.dir->CreatePending("m", Sized(10, "g"));
  ASSERT_TRUE(old.ok());
  auto other = f.dir->CreatePending("n", Sized(10, "h"));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(f.dir->Commit("n", other->token()).ok());
  const GroupId g_before = f.dir->FindGroup("g").value()->id();
  f.clock.Advance(kTimeout);
  // Taken over into another group: "g" lost its only member and is gone
  // whole; "h" gains the new member when it commits.
  auto put = f.dir->CreatePending("m", Sized(7, "h"));
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(f.dir->FindGroup("g").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dir->group_count(), 1u);
  ASSERT_TRUE(f.dir->Commit("m", put->token()).ok());
  auto h = f.dir->FindGroup("h");
  ASSERT_TRUE(h.ok());
  std::vector<ObjectId> ids = h.value()->MemberIds();
  std::sort(ids.begin(), ids.end());
  std::vector<ObjectId> want = {other->token().object, put->token().object};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(ids, want);
  // Back into a fresh "g": a new group, not the torn-down one.
  auto again = f.dir->CreatePending("x", Sized(1, "g"));
  ASSERT_TRUE(again.ok());
  f.clock.Advance(kTimeout);
  auto taken = f.dir->CreatePending("x", Sized(2, "g"));
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(f.Removals(again->token().object), 1);
  ASSERT_TRUE(f.dir->Commit("x", taken->token()).ok());
  auto g = f.dir->FindGroup("g");
  ASSERT_TRUE(g.ok());
  EXPECT_NE(g.value()->id(), g_before);
  EXPECT_EQ(g.value()->MemberIds(),
            std::vector<ObjectId>{taken->token().object});
  f.ExpectQ2();
}

TEST(PendingTakeoverTest, D11TakeoverFreesTheRoomAFullQuotaNeeds) {
  Fixture f(/*limit=*/100);
  auto old = f.dir->CreatePending("k", Sized(100));
  ASSERT_TRUE(old.ok());
  // Not expired: the quota refuses and the stale put stays.
  f.clock.Advance(kTimeout - nanoseconds(1));
  EXPECT_EQ(f.dir->CreatePending("k", Sized(60)).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(f.quota.charged(), 100u);
  EXPECT_EQ(f.Removals(old->token().object), 0);
  // Expired: its room goes to the new put.
  f.clock.Advance(nanoseconds(1));
  auto put = f.dir->CreatePending("k", Sized(60));
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(f.quota.charged(), 60u);
  EXPECT_EQ(f.dir->pending_charge_bytes(), 60u);
  EXPECT_EQ(f.Removals(old->token().object), 1);
  EXPECT_EQ(f.dir->Commit("k", old->token()).code(), StatusCode::kNotFound);
  ASSERT_TRUE(f.dir->Commit("k", put->token()).ok());
  f.ExpectQ2();
  // A put too big even with the stale room: the stale put is aborted (the
  // reaper would have), the new one refused, nothing else charged.
  auto stale = f.dir->CreatePending("s", Sized(40));
  ASSERT_TRUE(stale.ok());
  f.clock.Advance(kTimeout);
  EXPECT_EQ(f.dir->CreatePending("s", Sized(41)).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(f.Removals(stale->token().object), 1);
  EXPECT_EQ(f.quota.charged(), 60u);
  f.ExpectQ2();
}

// An active object "k" counting 10, for the upsert tests.
ObjectToken MakeActive(Fixture& f) {
  auto made = f.dir->Create("k", Sized(10));
  EXPECT_TRUE(made.ok());
  return made.value().token();
}

std::uint64_t Counted(Fixture& f) {
  auto pinned = f.dir->Pin("k");
  EXPECT_TRUE(pinned.ok());
  return pinned.ok() ? pinned.value()->counted_bytes() : 0;
}

TEST(PendingTakeoverTest, D11ExpiredStagedUpsertIsTakenOverByNamedBeginUpsert) {
  Fixture f;
  const ObjectToken k = MakeActive(f);
  ASSERT_TRUE(f.dir->BeginUpsert("k", k, {40, 40}).ok());
  EXPECT_EQ(f.quota.charged(), 50u);
  f.clock.Advance(kTimeout);
  UpsertStage stage;
  ASSERT_TRUE(f.dir->BeginUpsert("k", k, {20, 20}, &stage).ok());
  EXPECT_NE(stage.number, 0u);
  // The stale staging's 40 left in the same step; the committed 10 stays.
  EXPECT_EQ(f.quota.charged(), 30u);
  EXPECT_EQ(f.dir->pending_charge_bytes(), 20u);
  EXPECT_EQ(Counted(f), 10u);
  f.ExpectQ2();
  EXPECT_EQ(f.dir->ReapPendingPuts(), 0u);  // the new staging is young
  ASSERT_TRUE(f.dir->CommitUpsert("k", k, stage).ok());
  EXPECT_EQ(Counted(f), 20u);
  EXPECT_EQ(f.quota.charged(), 20u);
  EXPECT_EQ(f.dir->pending_charge_bytes(), 0u);
  f.ExpectQ2();
  // Named stagings take over each other too.
  UpsertStage first;
  ASSERT_TRUE(f.dir->BeginUpsert("k", k, {5, 5}, &first).ok());
  f.clock.Advance(kTimeout * 3);
  UpsertStage second;
  ASSERT_TRUE(f.dir->BeginUpsert("k", k, {6, 6}, &second).ok());
  EXPECT_NE(first.number, second.number);
  EXPECT_EQ(f.quota.charged(), 26u);
  ASSERT_TRUE(
      f.dir->CommitUpsertWithPayload("k", k, second, TestPayload{7}).ok());
  EXPECT_EQ(Counted(f), 6u);
  f.ExpectQ2();
}

TEST(PendingTakeoverTest,
     D11StaleUpsertCommitOrAbortFailsAndLeavesTheNewStagingIntact) {
  Fixture f;
  const ObjectToken k = MakeActive(f);
  // An unnamed stale staging, taken over by a named one.
  ASSERT_TRUE(f.dir->BeginUpsert("k", k, {40, 40}).ok());
  f.clock.Advance(kTimeout);
  UpsertStage stage;
  ASSERT_TRUE(f.dir->BeginUpsert("k", k, {20, 20}, &stage).ok());
  const std::size_t records = f.log.records().size();
  EXPECT_EQ(f.dir->CommitUpsert("k", k).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.dir->CommitUpsertWithPayload("k", k, TestPayload{1}).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.dir->AbortUpsert("k", k).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.log.records().size(), records);  // nothing logged
  EXPECT_EQ(f.dir->pending_charge_bytes(), 20u);
  EXPECT_EQ(Counted(f), 10u);
  f.ExpectQ2();
  // A named stale staging: its number is not the current one.
  UpsertStage stale = stage;
  f.clock.Advance(kTimeout);
  UpsertStage fresh;
  ASSERT_TRUE(f.dir->BeginUpsert("k", k, {33, 33}, &fresh).ok());
  EXPECT_EQ(f.dir->CommitUpsert("k", k, stale).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      f.dir->CommitUpsertWithPayload("k", k, stale, TestPayload{1}).code(),
      StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.dir->AbortUpsert("k", k, stale).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.dir->pending_charge_bytes(), 33u);
  EXPECT_EQ(f.quota.charged(), 43u);
  // The new staging settles normally, and only once.
  ASSERT_TRUE(f.dir->AbortUpsert("k", k, fresh).ok());
  EXPECT_EQ(f.dir->AbortUpsert("k", k, fresh).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.quota.charged(), 10u);
  EXPECT_EQ(f.dir->pending_charge_bytes(), 0u);
  f.ExpectQ2();
  // An unnamed staging that took over nothing is still settled unnamed.
  ASSERT_TRUE(f.dir->BeginUpsert("k", k, {2, 2}).ok());
  ASSERT_TRUE(f.dir->CommitUpsert("k", k).ok());
  EXPECT_EQ(Counted(f), 2u);
  f.ExpectQ2();
}

TEST(PendingTakeoverTest, D11UnnamedBeginUpsertAndYoungStagingsStillRefuse) {
  Fixture f;
  const ObjectToken k = MakeActive(f);
  ASSERT_TRUE(f.dir->BeginUpsert("k", k, {40, 40}).ok());
  f.clock.Advance(kTimeout * 5);
  // Unnamed: both stagers would hold one token, so no takeover.
  EXPECT_EQ(f.dir->BeginUpsert("k", k, {1, 1}).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.quota.charged(), 50u);
  ASSERT_TRUE(f.dir->CommitUpsert("k", k).ok());  // still the stager's
  UpsertStage young;
  ASSERT_TRUE(f.dir->BeginUpsert("k", k, {3, 3}, &young).ok());
  f.clock.Advance(kTimeout - nanoseconds(1));
  UpsertStage late;
  EXPECT_EQ(f.dir->BeginUpsert("k", k, {4, 4}, &late).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(late.number, 0u);
  EXPECT_EQ(f.quota.charged(), 43u);
  ASSERT_TRUE(f.dir->CommitUpsert("k", k, young).ok());
  f.ExpectQ2();
  // No timeout: nothing expires.
  Fixture never(QuotaAccount::kUnlimited, nanoseconds(0));
  const ObjectToken n = MakeActive(never);
  ASSERT_TRUE(never.dir->BeginUpsert("k", n, {1, 1}).ok());
  never.clock.Advance(std::chrono::hours(1));
  EXPECT_EQ(never.dir->BeginUpsert("k", n, {2, 2}, &late).code(),
            StatusCode::kFailedPrecondition);
}

TEST(PendingTakeoverTest, D11UpsertTakeoverFreesTheRoomAFullQuotaNeeds) {
  Fixture f(/*limit=*/100);
  const ObjectToken k = MakeActive(f);
  ASSERT_TRUE(f.dir->BeginUpsert("k", k, {90, 90}).ok());
  UpsertStage stage;
  // Young: refused for room, nothing moved.
  EXPECT_EQ(f.dir->BeginUpsert("k", k, {50, 50}, &stage).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(f.quota.charged(), 100u);
  f.clock.Advance(kTimeout);
  ASSERT_TRUE(f.dir->BeginUpsert("k", k, {50, 50}, &stage).ok());
  EXPECT_EQ(f.quota.charged(), 60u);
  EXPECT_EQ(f.dir->pending_charge_bytes(), 50u);
  EXPECT_EQ(f.dir->CommitUpsert("k", k).code(),
            StatusCode::kFailedPrecondition);
  f.ExpectQ2();
  // Too big even with the stale room: the stale staging is dropped (the
  // reaper would have), the new one refused.
  f.clock.Advance(kTimeout);
  UpsertStage big;
  EXPECT_EQ(f.dir->BeginUpsert("k", k, {95, 95}, &big).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(f.quota.charged(), 10u);
  EXPECT_EQ(f.dir->pending_charge_bytes(), 0u);
  EXPECT_EQ(f.dir->CommitUpsert("k", k, stage).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(Counted(f), 10u);
  f.ExpectQ2();
  EXPECT_EQ(f.dir->quota_refusals(), 2u);
}

// ---- stress: puts race takeovers, commits, aborts and the reaper ---------

TEST(PendingTakeoverStressTest, D11PutsRaceTakeoverCommitAbortAndTheReaper) {
  constexpr int kThreads = 8;
  Fixture f(/*limit=*/2000, nanoseconds(100));
  const std::vector<std::string> keys = {"a", "b", "c", "d"};
  const auto duration =
      testing::StressDuration(testing::kUnderTsan ? 400 : 800);
  std::mutex mu;
  std::set<ObjectId> committed;  // Commit returned OK
  std::set<ObjectId> erased;     // EraseIfMatch returned OK
  std::set<ObjectId> created;
  std::atomic<bool> stop{false};
  testing::Watchdog watchdog(testing::kWatchdogBound, "takeover stress");
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t * 7919 + 1);
      std::vector<std::pair<std::string, ObjectToken>> mine;
      std::vector<std::pair<std::string, UpsertStage>> stages;
      while (!stop.load(std::memory_order_relaxed)) {
        const std::string& key = keys[rng() % keys.size()];
        switch (rng() % 10) {
          case 0:
          case 1: {
            const std::uint64_t bytes = 1 + rng() % 50;
            auto put = f.dir->CreatePending(key, Sized(bytes));
            if (put.ok()) {
              std::lock_guard<std::mutex> lock(mu);
              created.insert(put->token().object);
              mine.emplace_back(key, put->token());
            } else {
              const StatusCode c = put.status().code();
              EXPECT_TRUE(c == StatusCode::kAlreadyExists ||
                          c == StatusCode::kResourceExhausted)
                  << put.status().ToString();
            }
            break;
          }
          case 2:
          case 3: {  // commit one of mine, current or stale
            if (mine.empty()) break;
            const auto [k, token] = mine[rng() % mine.size()];
            const Status s = f.dir->Commit(k, token);
            if (s.ok()) {
              std::lock_guard<std::mutex> lock(mu);
              committed.insert(token.object);
            } else {
              EXPECT_TRUE(s.code() == StatusCode::kNotFound ||
                          s.code() == StatusCode::kFailedPrecondition)
                  << s.ToString();
            }
            break;
          }
          case 4: {  // abort one of mine
            if (mine.empty()) break;
            const auto [k, token] = mine[rng() % mine.size()];
            const Status s = f.dir->Abort(k, token);
            EXPECT_TRUE(s.ok() || s.code() == StatusCode::kNotFound ||
                        s.code() == StatusCode::kFailedPrecondition)
                << s.ToString();
            break;
          }
          case 5: {  // stage an upsert, named or not
            auto pinned = f.dir->Pin(key);
            if (!pinned.ok()) break;
            const std::uint64_t bytes = 1 + rng() % 30;
            UpsertStage stage;
            const bool named = rng() % 2 == 0;
            const Status s = f.dir->BeginUpsert(
                key, pinned->token(), {bytes, bytes}, named ? &stage : nullptr);
            if (s.ok() && named) stages.emplace_back(key, stage);
            if (s.ok() && !named && rng() % 2 == 0) {
              f.dir->CommitUpsert(key, pinned->token()).IgnoreError();
            }
            break;
          }
          case 6: {  // settle one of my named stagings, current or stale
            if (stages.empty()) break;
            const auto [k, stage] = stages[rng() % stages.size()];
            auto pinned = f.dir->Pin(k);
            if (!pinned.ok()) break;
            const Status s =
                rng() % 3 == 0 ? f.dir->AbortUpsert(k, pinned->token(), stage)
                               : f.dir->CommitUpsert(k, pinned->token(), stage);
            EXPECT_TRUE(s.ok() || s.code() == StatusCode::kNotFound ||
                        s.code() == StatusCode::kFailedPrecondition)
                << s.ToString();
            break;
          }
          case 7: {  // erase a committed one of mine
            if (mine.empty()) break;
            const auto [k, token] = mine[rng() % mine.size()];
            auto pinned = f.dir->Pin(k);
            if (!pinned.ok() || pinned->token() != token) break;
            EraseOptions force;
            force.force = true;
            if (f.dir->EraseIfMatch(k, token.object, pinned->get(), force)
                    .ok()) {
              std::lock_guard<std::mutex> lock(mu);
              erased.insert(token.object);
            }
            break;
          }
          case 8:
            f.clock.Advance(nanoseconds(20 + rng() % 60));
            break;
          default:
            f.dir->ReapPendingPuts();
            break;
        }
        if (mine.size() > 64) mine.erase(mine.begin(), mine.begin() + 32);
        if (stages.size() > 64)
          stages.erase(stages.begin(), stages.begin() + 32);
      }
    });
  }
  std::this_thread::sleep_for(duration);
  stop.store(true);
  for (std::thread& th : threads) th.join();

  // Quiescent. Q2 with pending puts and stagings still open...
  f.ExpectQ2();
  // ...and after every one of them expired and was reaped.
  f.clock.Advance(std::chrono::seconds(1));
  f.dir->ReapPendingPuts();
  EXPECT_EQ(f.dir->pending_charge_bytes(), 0u);
  EXPECT_EQ(f.quota.charged(), f.ActiveCounted());
  // Each instance was removed at most once; one whose Commit succeeded was
  // never removed by a takeover, an abort or the reaper (only by its
  // erase), and every active object is one that committed.
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& [id, n] : f.removed) EXPECT_EQ(n, 1) << id;
  for (ObjectId id : committed) {
    if (erased.count(id) == 0) {
      EXPECT_EQ(f.removed.count(id), 0u) << "committed " << id << " removed";
    }
  }
  std::size_t active = 0;
  ASSERT_TRUE(f.dir
                  ->VisitHandles([&](auto handles) {
                    for (const auto& h : handles) {
                      ++active;
                      EXPECT_EQ(committed.count(h.token().object), 1u);
                    }
                  })
                  .ok());
  EXPECT_EQ(created.size(), f.removed.size() + active);
  EXPECT_EQ(f.dir->object_count(), active);
  EXPECT_EQ(f.log.open_reservations(), 0u);
  // Everything erased: the account is empty (Q2).
  for (const std::string& k : keys) {
    EraseOptions force;
    force.force = true;
    f.dir->Erase(k, force).IgnoreError();
  }
  EXPECT_EQ(f.quota.charged(), 0u);
  EXPECT_GT(committed.size(), 0u);
}

}  // namespace
}  // namespace cairn
