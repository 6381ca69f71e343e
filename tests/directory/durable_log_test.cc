// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The durable-log hook (H1): every change a reader can see is reserved
// before any directory lock and appended under the object lock before it is
// visible; a failed reservation or append changes nothing; the finalizer
// gets the changed instances' ObjectTokens. Driven through
// InMemoryDurableLog, whose hooks run inside Reserve and Append.

#include "cairn/directory/durable_log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/directory/group_directory.h"
#include "cairn/directory/quota.h"
#include "cairn/epoch/epoch_domain.h"
#include "directory/directory_testing.h"
#include "directory/durable_log_testing.h"
#include "directory/every_log.h"
#include "testing/alloc_counter.h"
#include "testing/stress.h"

namespace cairn {
namespace {

// Dir, Handle, View, Access, Fixture, Sized and the other shared names.
using namespace testing::durable_log_names;

TEST(DurableLogTest, H1ReserveHappensBeforeAnyDirectoryLock) {
  // One lifecycle stripe: every key's create and erase takes it. From
  // inside Reserve the hook takes, on the same thread, the stripe (an
  // erase of an absent key), the catalog and the group lock (FindGroup,
  // member_count) and every probed object's lock exclusively. Had the
  // directory reserved under any of them, the probe would self-deadlock
  // and the watchdog would fail the test.
  Fixture f(/*stripes=*/1);
  Watchdog watchdog(kDeadlockBound, "H1 reserve lock probe");
  thread_local bool in_probe = false;
  std::atomic<int> probes{0};
  f.log.set_on_reserve([&] {
    if (in_probe) return;  // the probe's own erase reserves too
    in_probe = true;
    EXPECT_EQ(f.dir->Erase("absent-probe").code(), StatusCode::kNotFound);
    for (int i = 1; i <= 5; ++i) {
      f.dir->WithObjectExclusive(Key("k", i), [](Access&) {}).IgnoreError();
    }
    Result<GroupHandle<LoggedPayload>> g = f.dir->FindGroup(Key("k", 100));
    if (g.ok()) {
      EXPECT_GT((*g)->member_count(), 0u);
    }
    probes.fetch_add(1, std::memory_order_relaxed);
    in_probe = false;
  });
  RunEveryLoggedMutation(f, "k");
  // Every logged mutation reserved once (plus the probes' own erases).
  EXPECT_GE(probes.load(), 10);
  EXPECT_EQ(f.log.open_reservations(), 0u);
}

// A failed reservation or append leaves every object, its version and the
// quota exactly as they were; nothing becomes durable; no reservation leaks.
void CheckFailureLeavesObjectsUntouched(bool fail_append) {
  Fixture f;
  Dir& d = *f.dir;
  ASSERT_TRUE(d.Create("a", Sized(10), {"a"}).ok());
  ASSERT_TRUE(d.Create("m1", Sized(10, "g"), {"m1"}).ok());
  ASSERT_TRUE(d.Create("m2", Sized(10, "g"), {"m2"}).ok());
  Result<Handle> pending = d.CreatePending("p", Sized(5), {"p"});
  ASSERT_TRUE(pending.ok());
  Result<Handle> a = d.Pin("a");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(d.BeginUpsert("a", a->token(), {30, 30}).ok());
  const std::size_t durable_before = f.log.durable_bodies().size();
  const std::uint64_t charged = f.quota.charged();
  const std::uint64_t version_a = f.Version("a");
  const std::size_t objects = d.object_count();

  auto fail_next = [&] {
    const Status injected = UnavailableError("log down");
    if (fail_append) {
      f.log.FailAppend(injected);
    } else {
      f.log.FailReserve(injected);
    }
  };
  auto expect_failed = [&](Status s, const char* what) {
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << what;
    EXPECT_EQ(f.quota.charged(), charged) << what;
    EXPECT_EQ(d.object_count(), objects) << what;
    EXPECT_EQ(f.log.open_reservations(), 0u) << what;
    EXPECT_EQ(f.log.durable_bodies().size(), durable_before) << what;
  };

  fail_next();
  expect_failed(d.Create("new", Sized(10), {"n"}).status(), "create");
  EXPECT_EQ(d.Pin("new").status().code(), StatusCode::kNotFound);
  fail_next();
  expect_failed(d.Create("m3", Sized(10, "g"), {"m3"}).status(), "join");
  EXPECT_EQ(d.Pin("m3").status().code(), StatusCode::kNotFound);
  fail_next();
  expect_failed(d.Create("m4", Sized(10, "fresh")).status(), "new group");
  EXPECT_EQ(d.FindGroup("fresh").status().code(), StatusCode::kNotFound);
  fail_next();
  expect_failed(d.Commit("p", pending->token()), "commit");
  EXPECT_EQ(d.Pin("p").status().code(), StatusCode::kNotFound);  // kCreating
  CommitOptions settle;  // a partial settlement refunds nothing either
  settle.counted_bytes = 2;
  fail_next();
  expect_failed(d.Commit("p", pending->token(), settle), "settling commit");
  EXPECT_EQ(d.Pin("p").status().code(), StatusCode::kNotFound);
  Result<Handle> m1 = d.Pin("m1");
  ASSERT_TRUE(m1.ok());
  const std::uint64_t version_m1 = f.Version("m1");
  fail_next();
  expect_failed(d.AdjustCharge("m1", m1->token(), {4, 0}), "adjust up");
  fail_next();
  expect_failed(d.AdjustCharge("m1", m1->token(), {0, 4}), "adjust down");
  EXPECT_EQ(f.Version("m1"), version_m1);
  EXPECT_TRUE(d.WithObject("m1", [](const View& v) {
                 EXPECT_EQ(v.counted_bytes(), 10u);
               }).ok());
  fail_next();
  expect_failed(d.CommitUpsert("a", a->token(),
                               [](Access& x) { x.payload().bytes = "new"; }),
                "upsert");
  EXPECT_EQ(f.Version("a"), version_a);
  EXPECT_TRUE(d.WithObject("a", [](const View& v) {
                 EXPECT_EQ(v.size_bytes(), 10u);
                 EXPECT_EQ(v.counted_bytes(), 10u);
                 EXPECT_EQ(v.payload().bytes, "a");
               }).ok());
  fail_next();
  expect_failed(d.CommitUpsertWithPayload("a", a->token(), {"new"}),
                "upsert with payload");
  EXPECT_EQ(f.Version("a"), version_a);
  EXPECT_TRUE(d.WithObject("a", [](const View& v) {
                 EXPECT_EQ(v.size_bytes(), 10u);
                 EXPECT_EQ(v.payload().bytes, "a");
               }).ok());
  fail_next();
  expect_failed(d.Erase("a"), "erase");
  fail_next();
  expect_failed(d.EraseIfMatch("a", (*a)->id(), a->get()), "erase if match");
  fail_next();
  expect_failed(d.EraseGroup("g"), "erase group");
  EXPECT_TRUE(d.Pin("m1").ok());
  EXPECT_TRUE(d.Pin("m2").ok());
  fail_next();
  std::vector<EvictedObject<LoggedPayload>> out;
  const StatusCode evicted =
      DirectoryHooks::EvictIfUnchanged(d, *a, f.Version("a"), false, &out);
  EXPECT_NE(evicted, StatusCode::kOk);
  EXPECT_TRUE(out.empty());
  expect_failed(UnavailableError(), "evict");
  EXPECT_TRUE(d.Pin("a").ok());
  EXPECT_TRUE(f.removed.empty());
  if (fail_append) {
    // Appended-then-failed records never existed; cancelled ones are void.
    for (const auto& r : f.log.records()) {
      EXPECT_NE(r.state, InMemoryDurableLog::RecordState::kAppended);
    }
  }

  // The same calls succeed once the log works: the state was intact.
  ASSERT_TRUE(d.Commit("p", pending->token()).ok());
  ASSERT_TRUE(d.CommitUpsert("a", a->token()).ok());
  ASSERT_TRUE(d.EraseGroup("g").ok());
  ASSERT_TRUE(d.Erase("a").ok());
  EXPECT_EQ(f.quota.charged(), 5u);
  EXPECT_EQ(f.log.open_reservations(), 0u);
}

TEST(DurableLogTest, H1FailedReservationLeavesObjectUntouched) {
  CheckFailureLeavesObjectsUntouched(/*fail_append=*/false);
}

TEST(DurableLogTest, H1FailedAppendLeavesObjectUntouched) {
  CheckFailureLeavesObjectsUntouched(/*fail_append=*/true);
}

// CommitUpsertWithPayload logs the payload readers will see: the record is
// the upsert's post-state (version, staged size, new payload bytes) and its
// reservation covered the payload. CommitUpsert with a callback logs the
// envelope only (its payload is written after the append).
TEST(DurableLogTest, H1UpsertWithPayloadLogsTheNewPayload) {
  Fixture f;
  Dir& d = *f.dir;
  ASSERT_TRUE(d.Create("a", Sized(10), {"one"}).ok());
  Result<Handle> a = d.Pin("a");
  ASSERT_TRUE(a.ok());
  const std::string big(300, 'x');
  ASSERT_TRUE(d.BeginUpsert("a", a->token(), {20, 20}).ok());
  ASSERT_TRUE(d.CommitUpsertWithPayload("a", a->token(), {big}).ok());

  std::vector<DurableRecordView> durable = f.Durable();
  ASSERT_FALSE(durable.empty());
  const DurableRecordView& last = durable.back();
  EXPECT_EQ(last.op, DurableOp::kUpsert);
  ASSERT_EQ(last.objects.size(), 1u);
  EXPECT_TRUE(last.objects[0].payload_logged);
  EXPECT_EQ(last.objects[0].payload, big);
  EXPECT_EQ(last.objects[0].size_bytes, 20u);
  EXPECT_EQ(last.objects[0].version, f.Version("a"));
  EXPECT_TRUE(d.WithObject("a", [&](const View& v) {
                 EXPECT_EQ(v.payload().bytes, big);
                 EXPECT_EQ(v.size_bytes(), 20u);
               }).ok());
  // The reservation asked for the whole record, payload included.
  const InMemoryDurableLog::Record record = f.log.records().back();
  EXPECT_EQ(record.state, InMemoryDurableLog::RecordState::kDurable);
  EXPECT_EQ(record.reserved_bytes, record.body.size());

  // The callback form: same op, no payload bytes.
  ASSERT_TRUE(d.BeginUpsert("a", a->token(), {30, 30}).ok());
  ASSERT_TRUE(d.CommitUpsert("a", a->token(), [](Access& x) {
                 x.payload().bytes = "three";
               }).ok());
  durable = f.Durable();
  EXPECT_EQ(durable.back().op, DurableOp::kUpsert);
  EXPECT_FALSE(durable.back().objects[0].payload_logged);
}

// Review finding: a member create whose append fails must not move its
// group's lease either (H1: nothing a reader can observe changes). The
// group lease is visible (View::lease_deadline_nanos of every member) and
// gates a non-forced EraseGroup. Planted/real: the lease was raised before
// the append, so this EraseGroup failed with "group lease has not expired".
TEST(DurableLogTest, H1FailedMemberAppendLeavesGroupLeaseUntouched) {
  Fixture f;
  Dir& d = *f.dir;
  ASSERT_TRUE(d.Create("m1", Sized(10, "g"), {"m1"}).ok());
  std::int64_t lease_before = -1;
  ASSERT_TRUE(d.WithObject("m1", [&](const View& v) {
                 lease_before = v.lease_deadline_nanos();
               }).ok());
  CreateOptions leased = Sized(10, "g");
  leased.lease_ttl = std::chrono::hours(1);
  f.log.FailAppend(UnavailableError("log down"));
  EXPECT_EQ(d.Create("m2", leased, {"m2"}).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(d.Pin("m2").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(d.WithObject("m1", [&](const View& v) {
                 EXPECT_EQ(v.lease_deadline_nanos(), lease_before);
               }).ok());
  EXPECT_TRUE(d.EraseGroup("g").ok());
}

// Records of `op` the log holds that were not cancelled.
std::size_t LiveRecords(const InMemoryDurableLog& log, DurableOp op) {
  std::size_t count = 0;
  for (const auto& r : log.records()) {
    DurableRecordView v;
    if (r.state != InMemoryDurableLog::RecordState::kCancelled &&
        DecodeDurableRecord(r.body, &v).ok() && v.op == op) {
      ++count;
    }
  }
  return count;
}

// The thread's first retirement binds it to the route's epoch domain, which
// may not fail: an out-of-memory test warms up first.
void BindToTheRouteDomain(Dir& d) {
  ASSERT_TRUE(d.Create("warm", Sized(10)).ok());
  ASSERT_TRUE(d.Erase("warm").ok());
}

// The out-of-memory tests below fail each allocation of one call in turn,
// up to this many; each checks that its call made fewer.
constexpr int kMaxAllocations = 400;

// An EraseGroup that runs out of memory (std::bad_alloc, thrown as the
// directory's writes throw it) before its record is appended changes
// nothing: no kEraseGroup record, the quota and every member as they were,
// and the member locks free (a second EraseGroup, under a watchdog,
// succeeds). Every allocation of the call fails in turn; the directory
// itself allocates nothing after the append (but to park an unlink the
// route refuses, which this test's route never does), so a later failure
// can only come from the log (this test's InMemoryDurableLog records the
// tokens in Finalize) or the removal callback, and then the group is gone
// whole.
// Real bugs this caught: the removals and the finalized tokens were
// allocated after the record was appended and the quota refunded, the
// removals with every member locked; a failure there left the locks held
// (the watchdog fired) and the log ahead of memory.
TEST(DurableLogTest, H1EraseGroupOutOfMemoryChangesNothing) {
  int threw = 0;
  int n = 1;
  for (; n <= kMaxAllocations; ++n) {
    SCOPED_TRACE(n);
    Fixture f;
    Dir& d = *f.dir;
    BindToTheRouteDomain(d);
    for (int m = 0; m < 4; ++m) {
      const std::string key = "m" + std::to_string(m);
      ASSERT_TRUE(d.Create(key, Sized(10, "g"), {key}).ok());
    }
    const std::uint64_t charged = f.quota.charged();
    auto erase_records = [&] {
      return LiveRecords(f.log, DurableOp::kEraseGroup);
    };
    bool erased = false;
    const bool reached = testing::FailNthAllocationDuring(
        n, &threw, [&] { erased = d.EraseGroup("g").ok(); });
    if (erased || erase_records() == 1) {
      EXPECT_EQ(d.object_count(), 0u);
      EXPECT_EQ(f.quota.charged(), 0u);
      if (!reached) break;  // the call made fewer than n allocations
      continue;
    }
    EXPECT_EQ(erase_records(), 0u);
    EXPECT_EQ(f.quota.charged(), charged);
    EXPECT_EQ(d.object_count(), 4u);
    EXPECT_EQ(f.log.open_reservations(), 0u);
    auto again =
        std::async(std::launch::async, [&] { return d.EraseGroup("g"); });
    if (again.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      std::fprintf(stderr, "EraseGroup after a failed one hangs (n=%d)\n", n);
      std::abort();
    }
    ASSERT_TRUE(again.get().ok());
    EXPECT_EQ(d.object_count(), 0u);
    EXPECT_EQ(erase_records(), 1u);
  }
  EXPECT_GT(threw, 0);
  EXPECT_LE(n, kMaxAllocations)
      << "the call made more allocations than the bound";
}

// Group eviction failing each allocation in turn, with keys too long for
// std::string's inline buffer: whether it evicts, refuses or throws, memory
// agrees with the log (the members and their charges are there exactly when
// no eviction record is), no reservation is left open, and a later eviction
// takes the group. Real bug this caught: the evicted objects' keys were
// copied after the record was appended and the quota refunded, under the
// member locks, so a long key's allocation failing there left memory ahead
// of a cancelled record.
TEST(DurableLogTest, H1GroupEvictionOutOfMemoryChangesNothing) {
  int threw = 0;
  int n = 1;
  for (; n <= kMaxAllocations; ++n) {
    SCOPED_TRACE(n);
    Fixture f;
    Dir& d = *f.dir;
    BindToTheRouteDomain(d);
    std::vector<std::string> keys;
    for (int m = 0; m < 4; ++m) {
      keys.push_back("a-member-key-longer-than-sso-" + std::to_string(m));
      ASSERT_TRUE(d.Create(keys.back(), Sized(10, "g"), {keys.back()}).ok());
    }
    const std::uint64_t charged = f.quota.charged();
    Result<Handle> victim = d.Pin(keys[0]);
    ASSERT_TRUE(victim.ok());
    const std::uint64_t version = f.Version(keys[0]);
    std::vector<EvictedObject<LoggedPayload>> out;
    StatusCode code = StatusCode::kInternal;
    const bool reached = testing::FailNthAllocationDuring(n, &threw, [&] {
      code = DirectoryHooks::EvictIfUnchanged(d, *victim, version, false, &out);
    });
    EXPECT_EQ(f.log.open_reservations(), 0u);
    const std::size_t logged = LiveRecords(f.log, DurableOp::kEvict);
    ASSERT_LE(logged, 1u);
    EXPECT_EQ(d.object_count(), logged == 1 ? 0u : keys.size());
    EXPECT_EQ(f.quota.charged(), logged == 1 ? 0u : charged);
    EXPECT_EQ(out.size(), logged == 1 ? keys.size() : 0u);
    if (code == StatusCode::kOk) {
      EXPECT_EQ(logged, 1u);
      if (!reached) break;  // the call made fewer than n allocations
      continue;
    }
    if (logged == 1) continue;  // evicted; the host's callback threw after
    out.clear();
    EXPECT_EQ(DirectoryHooks::EvictIfUnchanged(d, *victim, f.Version(keys[0]),
                                               false, &out),
              StatusCode::kOk);
    EXPECT_EQ(d.object_count(), 0u);
    EXPECT_EQ(f.quota.charged(), 0u);
  }
  EXPECT_GT(threw, 0);
  EXPECT_LE(n, kMaxAllocations)
      << "the call made more allocations than the bound";
}

// BatchErase failing each allocation in turn: whether it returns or throws,
// the keys gone from memory are exactly those whose erase records were
// finalized, their charges refunded, with no reservation left open; a later
// batch then erases every key. Real bugs this caught: the removals, their
// tokens and the erased indices were gathered into vectors grown after each
// key's erase was made (its record appended, its charge released), and the
// log's Append could throw under the object lock; either escaped with keys
// gone from memory and their records never finalized.
TEST(DurableLogTest, H1BatchEraseOutOfMemoryChangesNothing) {
  const std::vector<std::string> keys = {"b0", "b1", "b2", "b3"};
  const std::vector<std::string_view> views(keys.begin(), keys.end());
  int threw = 0;
  int n = 1;
  for (; n <= kMaxAllocations; ++n) {
    SCOPED_TRACE(n);
    Fixture f;
    Dir& d = *f.dir;
    BindToTheRouteDomain(d);
    for (const std::string& key : keys) {
      ASSERT_TRUE(d.Create(key, Sized(10), {key}).ok());
    }
    const std::uint64_t charged = f.quota.charged();
    auto erase_records = [&] { return LiveRecords(f.log, DurableOp::kErase); };
    const std::size_t records_before = erase_records();  // the warm-up's
    std::vector<Status> out;
    bool returned = false;
    const bool reached = testing::FailNthAllocationDuring(n, &threw, [&] {
      out = d.BatchErase(views);
      returned = true;
    });
    // Memory agrees with the log whatever happened: an exception may also
    // come from the fixture's removal callback (host code, which runs
    // after the batch is finalized).
    EXPECT_EQ(f.log.open_reservations(), 0u);
    const std::size_t logged = erase_records() - records_before;
    EXPECT_EQ(d.object_count(), keys.size() - logged);
    EXPECT_EQ(f.quota.charged(), charged - logged * 10);
    if (returned) {
      std::size_t erased = 0;
      for (const Status& s : out) erased += s.ok() ? 1 : 0;
      EXPECT_EQ(logged, erased);
      if (!reached) break;  // the call made fewer than n allocations
    }
    for (const Status& s : d.BatchErase(views)) {
      EXPECT_TRUE(s.ok() || s.code() == StatusCode::kNotFound) << s.ToString();
    }
    EXPECT_EQ(d.object_count(), 0u);
    EXPECT_EQ(f.quota.charged(), 0u);
  }
  EXPECT_GT(threw, 0);
  EXPECT_LE(n, kMaxAllocations)
      << "the call made more allocations than the bound";
}

TEST(DurableLogTest, H1NoChangeIsVisibleBeforeItsRecordIsAppended) {
  // Inside Append (the directory holds the object lock) another thread
  // looks at the key with lock-free reads: the change must not show yet.
  Fixture f;
  Dir& d = *f.dir;
  std::string expect;  // what the other thread must see, per step
  std::atomic<int> checks{0};
  f.log.set_on_append([&](std::string_view record) {
    DurableRecordView v;
    ASSERT_TRUE(DecodeDurableRecord(record, &v).ok());
    std::thread reader([&] {
      for (const DurableObjectState& o : v.objects) {
        Result<Handle> h = d.Pin(o.key);
        switch (v.op) {
          case DurableOp::kCreate:
          case DurableOp::kCommit:
            EXPECT_EQ(h.status().code(), StatusCode::kNotFound) << o.key;
            break;
          case DurableOp::kUpsert:
          case DurableOp::kAdjust:
            ASSERT_TRUE(h.ok());
            EXPECT_NE((*h)->counted_bytes(), o.counted_bytes) << o.key;
            break;
          default:  // removals: still active and routed
            ASSERT_TRUE(h.ok()) << o.key;
            EXPECT_EQ((*h)->lifecycle_hint(), Lifecycle::kActive);
            EXPECT_EQ((*h)->id(), o.object);
        }
      }
    });
    reader.join();
    checks.fetch_add(1, std::memory_order_relaxed);
  });
  RunEveryLoggedMutation(f, "v");
  EXPECT_EQ(checks.load(), 11);
  // And once each call returned, its change is visible.
  EXPECT_EQ(d.object_count(), 0u);
}

TEST(DurableLogTest, H1RacingReaderNeverSeesAnUnloggedChange) {
  // A reader keeps resolving one key while a writer creates and erases it.
  // Whenever the reader sees instance Y, the create of Y was appended, and
  // so was the erase of every instance it saw before Y.
  Fixture f;
  Dir& d = *f.dir;
  std::mutex mu;
  std::set<ObjectId> created;
  std::set<ObjectId> erased;
  f.log.set_on_append([&](std::string_view record) {
    DurableRecordView v;
    ASSERT_TRUE(DecodeDurableRecord(record, &v).ok());
    // Widens the window a change published before its append would open.
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    std::lock_guard<std::mutex> lock(mu);
    for (const DurableObjectState& o : v.objects) {
      (v.op == DurableOp::kCreate ? created : erased).insert(o.object);
    }
  });
  const int rounds = testing::StressIterations(300);
  std::atomic<bool> done{false};
  std::thread reader([&] {
    ObjectId last = 0;
    while (!done.load(std::memory_order_acquire)) {
      // Pin takes no object lock: it sees a routed, active entry at once.
      Result<Handle> h = d.Pin("k");
      if (!h.ok()) continue;
      const ObjectId seen = (*h)->id();
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_EQ(created.count(seen), 1u) << seen;
      if (last != 0 && last != seen) {
        EXPECT_EQ(erased.count(last), 1u);
      }
      last = seen;
    }
  });
  for (int i = 0; i < rounds; ++i) {
    ASSERT_TRUE(d.Create("k", Sized(1)).ok());
    ASSERT_TRUE(d.Erase("k").ok());
  }
  done.store(true, std::memory_order_release);
  reader.join();
  EXPECT_EQ(f.log.durable_bodies().size(), 2u * rounds);
}

TEST(DurableLogTest, H1FinalizerReceivesTheObjectTokensOfItsRecord) {
  Fixture f;
  Dir& d = *f.dir;
  RunEveryLoggedMutation(f, "t");
  const std::vector<DurableRecordView> durable = f.Durable();
  const auto records = f.log.records();
  ASSERT_EQ(durable.size(), 11u);
  // Each durable record's finalizer got exactly its objects' tokens.
  std::size_t i = 0;
  for (const auto& r : records) {
    if (r.state != InMemoryDurableLog::RecordState::kDurable) continue;
    const DurableRecordView& v = durable[i++];
    ASSERT_EQ(r.tokens.size(), v.objects.size());
    for (std::size_t j = 0; j < v.objects.size(); ++j) {
      EXPECT_EQ(r.tokens[j],
                (ObjectToken{d.tenant_instance(), v.objects[j].object}));
      EXPECT_EQ(v.tenant, d.tenant_instance());
    }
  }
  // The post-states, in the order the changes happened.
  const DurableOp ops[] = {
      DurableOp::kCreate, DurableOp::kCreate,     DurableOp::kCreate,
      DurableOp::kCommit, DurableOp::kUpsert,     DurableOp::kErase,
      DurableOp::kErase,  DurableOp::kEraseGroup, DurableOp::kCreate};
  for (std::size_t k = 0; k < 9; ++k) EXPECT_EQ(durable[k].op, ops[k]) << k;
  const DurableObjectState& create = durable[0].objects[0];
  EXPECT_EQ(create.key, "t1");
  EXPECT_EQ(create.version, 1u);
  EXPECT_EQ(create.size_bytes, 10u);
  EXPECT_TRUE(create.payload_logged);
  EXPECT_EQ(create.payload, "one");
  EXPECT_EQ(durable[1].group_name, "t100");
  EXPECT_NE(durable[1].group, kNoGroup);
  const DurableObjectState& commit = durable[3].objects[0];
  EXPECT_EQ(commit.key, "t4");
  EXPECT_EQ(commit.version, 2u);
  EXPECT_EQ(commit.counted_bytes, 7u);
  EXPECT_EQ(commit.payload, "p");
  const DurableObjectState& upsert = durable[4].objects[0];
  EXPECT_EQ(upsert.version, 2u);
  EXPECT_EQ(upsert.size_bytes, 20u);
  EXPECT_FALSE(upsert.payload_logged);
  ASSERT_EQ(durable[7].objects.size(), 2u);
  EXPECT_EQ(durable[7].objects[0].key, "t2");  // ascending key order
  EXPECT_EQ(durable[7].objects[1].key, "t3");
  // The eviction, last, is durable too (its record follows the create).
  const auto all = f.log.records();
  DurableRecordView evict;
  ASSERT_TRUE(DecodeDurableRecord(all.back().body, &evict).ok());
  EXPECT_EQ(evict.op, DurableOp::kEvict);
  EXPECT_EQ(all.back().state, InMemoryDurableLog::RecordState::kDurable);
  EXPECT_TRUE(f.removed_before_durable.empty());
  EXPECT_EQ(f.removed.size(), 5u);
}

TEST(DurableLogTest, H1InvisibleStepsAreNotLogged) {
  // A pending put, a staged upsert and their aborts change nothing a reader
  // can see: they reserve nothing and append nothing.
  Fixture f;
  Dir& d = *f.dir;
  Result<Handle> p = d.CreatePending("p", Sized(3));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(d.Abort("p", p->token()).ok());
  ASSERT_TRUE(d.Create("a", Sized(3)).ok());
  Result<Handle> a = d.Pin("a");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(d.BeginUpsert("a", a->token(), {4, 4}).ok());
  ASSERT_TRUE(d.AbortUpsert("a", a->token()).ok());
  EXPECT_EQ(f.log.records().size(), 1u);  // the create of "a" only
  EXPECT_EQ(f.log.reserve_calls(), 1u);
}

// Every logged mutation in turn, with its record's Finalize failing: the
// mutation returns the log's error (its change is visible but was never
// acknowledged), the record is not durable, and the log then refuses the
// next mutation, which changes nothing (H5).
TEST(DurableLogTest, H5MutationWhoseRecordIsNotDurableReturnsTheLogError) {
  const Status kLost = InternalError("injected: record not durable");
  // Each step makes one logged change; steps before it set the stage.
  using Step = std::function<Status(Fixture&)>;
  const std::vector<std::pair<const char*, Step>> steps = {
      {"create",
       [](Fixture& f) { return f.dir->Create("a", Sized(10)).status(); }},
      {"create in a group",
       [](Fixture& f) {
         return f.dir->Create("m1", Sized(10, "g"), {"m1"}).status();
       }},
      {"commit",
       [](Fixture& f) {
         Result<Handle> p = f.dir->CreatePending("p", Sized(7), {"p"});
         if (!p.ok()) return p.status();
         return f.dir->Commit("p", p->token());
       }},
      {"commit upsert",
       [](Fixture& f) {
         Result<Handle> a = f.dir->Pin("a");
         if (!a.ok()) return a.status();
         CAIRN_RETURN_IF_ERROR(f.dir->BeginUpsert("a", a->token(), {20, 20}));
         return f.dir->CommitUpsert("a", a->token(), [](Access&) {});
       }},
      {"erase", [](Fixture& f) { return f.dir->Erase("a"); }},
      {"erase if match",
       [](Fixture& f) {
         Result<Handle> p = f.dir->Pin("p");
         if (!p.ok()) return p.status();
         return f.dir->EraseIfMatch("p", (*p)->id(), p->get());
       }},
      {"erase group", [](Fixture& f) { return f.dir->EraseGroup("g"); }},
  };
  for (std::size_t k = 0; k < steps.size(); ++k) {
    SCOPED_TRACE(steps[k].first);
    Fixture f;
    for (std::size_t i = 0; i < k; ++i) ASSERT_TRUE(steps[i].second(f).ok());
    const std::size_t durable_before = f.log.durable_bodies().size();
    f.log.FailFinalize(kLost);
    EXPECT_EQ(steps[k].second(f), kLost);
    EXPECT_EQ(f.log.durable_bodies().size(), durable_before);
    EXPECT_EQ(f.log.open_reservations(), 0u);
    // The log is failed: the next change is refused and makes nothing.
    EXPECT_EQ(f.dir->Create("after", Sized(1)).status(), kLost);
    EXPECT_EQ(f.dir->WithObject("after", [](const View&) {}).code(),
              StatusCode::kNotFound);
  }
}

// An eviction whose record is not durable still evicted (the object is
// handed out and gone), and says the log failed (H5).
TEST(DurableLogTest, H5EvictionWhoseRecordIsNotDurableReportsTheLogError) {
  const Status kLost = InternalError("injected: record not durable");
  Fixture f;
  Dir& d = *f.dir;
  ASSERT_TRUE(d.Create("v", Sized(5), {"v"}).ok());
  Result<Handle> victim = d.Pin("v");
  ASSERT_TRUE(victim.ok());
  const std::uint64_t version = f.Version("v");
  f.log.FailFinalize(kLost);
  std::vector<EvictedObject<LoggedPayload>> out;
  Status log_error;
  EXPECT_EQ(DirectoryHooks::EvictIfUnchanged(d, *victim, version, false, &out,
                                             0, &log_error),
            StatusCode::kOk);
  EXPECT_EQ(log_error, kLost);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(d.WithObject("v", [](const View&) {}).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(f.log.durable_bodies().size(), 1u);  // the create only
}

TEST(DurableLogTest, DecodeRejectsDamagedRecords) {
  std::string body;
  BeginDurableRecord(DurableOp::kCreate, 7, kNoGroup, "", 1, &body);
  DurableObjectState s;
  s.object = 3;
  s.key = "key";
  s.payload_logged = true;
  AddDurableObject(s, "pay", &body);
  DurableRecordView v;
  ASSERT_TRUE(DecodeDurableRecord(body, &v).ok());
  EXPECT_EQ(v.tenant, 7u);
  ASSERT_EQ(v.objects.size(), 1u);
  EXPECT_EQ(v.objects[0].payload, "pay");
  // Every truncation is kDataLoss, as are trailing bytes and a bad op.
  for (std::size_t n = 0; n < body.size(); ++n) {
    EXPECT_EQ(DecodeDurableRecord(body.substr(0, n), &v).code(),
              StatusCode::kDataLoss)
        << n;
  }
  EXPECT_EQ(DecodeDurableRecord(body + "x", &v).code(), StatusCode::kDataLoss);
  std::string bad_op = body;
  bad_op[1] = 99;
  EXPECT_EQ(DecodeDurableRecord(bad_op, &v).code(), StatusCode::kDataLoss);
  std::string bad_version = body;
  bad_version[0] = 1;  // the format before tenant records
  EXPECT_EQ(DecodeDurableRecord(bad_version, &v).code(),
            StatusCode::kFailedPrecondition);
}

TEST(DurableLogTest, TenantRecordsRoundTripAndRejectDamage) {
  std::string create;
  EncodeDurableTenantRecord(DurableOp::kTenantCreate, 9, "acme", 4096, &create);
  EXPECT_EQ(create.size(), DurableTenantRecordBytes(4));
  DurableRecordView v;
  ASSERT_TRUE(DecodeDurableRecord(create, &v).ok());
  EXPECT_EQ(v.op, DurableOp::kTenantCreate);
  EXPECT_EQ(v.tenant, 9u);
  EXPECT_EQ(v.tenant_name, "acme");
  EXPECT_EQ(v.quota_limit_bytes, 4096u);
  EXPECT_TRUE(v.objects.empty());
  std::string remove;
  EncodeDurableTenantRecord(DurableOp::kTenantRemove, 9, "acme", 0, &remove);
  ASSERT_TRUE(DecodeDurableRecord(remove, &v).ok());
  EXPECT_EQ(v.op, DurableOp::kTenantRemove);
  EXPECT_EQ(v.tenant_name, "acme");
  for (std::size_t n = 0; n < create.size(); ++n) {
    EXPECT_EQ(DecodeDurableRecord(create.substr(0, n), &v).code(),
              StatusCode::kDataLoss)
        << n;
  }
  EXPECT_EQ(DecodeDurableRecord(remove + "x", &v).code(),
            StatusCode::kDataLoss);
  // A tenant record naming objects, a group or no tenant is damage.
  std::string with_objects;
  BeginDurableRecord(DurableOp::kTenantRemove, 9, kNoGroup, "acme", 1,
                     &with_objects);
  AddDurableObject(DurableObjectState{}, "", &with_objects);
  EXPECT_EQ(DecodeDurableRecord(with_objects, &v).code(),
            StatusCode::kDataLoss);
  std::string nameless;
  EncodeDurableTenantRecord(DurableOp::kTenantRemove, 9, "", 0, &nameless);
  EXPECT_EQ(DecodeDurableRecord(nameless, &v).code(), StatusCode::kDataLoss);
  std::string grouped;
  BeginDurableRecord(DurableOp::kTenantRemove, 9, 3, "acme", 0, &grouped);
  EXPECT_EQ(DecodeDurableRecord(grouped, &v).code(), StatusCode::kDataLoss);
}

// A payload destructor may mutate any directory sharing the log (here a
// second directory): the route's reclaim, which runs destructors of erased
// entries, comes after the write's record is finalized (docs/concurrency.md,
// "Durable log"). Erased victims are kept from reclamation by a reader, then
// each mutation kind that reclaims after its append runs until the victims'
// destructors have run from its reclaim. Had the reclaim come first,
// FileDurableLog's Finalize in the destructor's create would wait for the
// record of the very mutation running the destructor (a hang, caught by
// the watchdog), and the in-memory log would show that record unresolved.
struct SharingPayload;
using SharingDir = GroupDirectory<SharingPayload>;

struct SharingPayload {
  SharingDir* other = nullptr;  // shares the log with the owner's directory
  std::atomic<int>* destroyed = nullptr;
  const testing::TestLog* log = nullptr;
  SharingPayload() = default;
  SharingPayload(SharingDir* d, std::atomic<int>* n, const testing::TestLog* l)
      : other(d), destroyed(n), log(l) {}
  SharingPayload(SharingPayload&& o) noexcept
      : other(std::exchange(o.other, nullptr)),
        destroyed(std::exchange(o.destroyed, nullptr)),
        log(std::exchange(o.log, nullptr)) {}
  // Only into a moved-from payload (MoveOut of an eviction).
  SharingPayload& operator=(SharingPayload&& o) noexcept {
    EXPECT_EQ(other, nullptr) << "a live payload overwritten in place";
    other = std::exchange(o.other, nullptr);
    destroyed = std::exchange(o.destroyed, nullptr);
    log = std::exchange(o.log, nullptr);
    return *this;
  }
  ~SharingPayload() {
    if (other == nullptr) return;
    EXPECT_FALSE(log->HasUnresolvedRecord())
        << "payload destroyed while a logged write's record is unresolved";
    const int n = destroyed->fetch_add(1) + 1;
    EXPECT_TRUE(other->Create(Key("from-destructor-", n)).ok());
  }
};

enum class Reclaimer { kCreate, kErase, kEraseGroup, kEvict };

using ReclaimParam = std::tuple<testing::LogKind, Reclaimer>;

class DurableLogReclaimTest : public ::testing::TestWithParam<ReclaimParam> {};

const char* ReclaimerName(Reclaimer r) {
  static constexpr const char* kNames[] = {"Create", "Erase", "EraseGroup",
                                           "Evict"};
  return kNames[static_cast<int>(r)];
}
void PrintTo(Reclaimer r, std::ostream* os) { *os << ReclaimerName(r); }

std::string ReclaimName(const ::testing::TestParamInfo<ReclaimParam>& info) {
  return testing::LogKindString(std::get<0>(info.param)) +
         ReclaimerName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    EveryLog, DurableLogReclaimTest,
    ::testing::Combine(::testing::ValuesIn(testing::kEveryLog),
                       ::testing::Values(Reclaimer::kCreate, Reclaimer::kErase,
                                         Reclaimer::kEraseGroup,
                                         Reclaimer::kEvict)),
    ReclaimName);

TEST_P(DurableLogReclaimTest,
       H1PayloadDestructorMayMutateADirectorySharingTheLog) {
  constexpr int kVictims = 4;
  constexpr int kTries = 8;
  Watchdog watchdog(kDeadlockBound, "payload destructor sharing the log");
  const Reclaimer reclaimer = std::get<1>(GetParam());
  testing::TestLog log(std::get<0>(GetParam()));
  EpochOptions epoch_options;
  epoch_options.reclaim_every = 1;
  EpochDomain domain(epoch_options);
  std::atomic<int> destroyed{0};
  {
    DirectoryOptions options;
    options.route.epoch_domain = &domain;
    options.durable_log = log.get();
    SharingDir other(options);
    SharingDir dir(options);
    for (int i = 0; i < kVictims; ++i) {
      ASSERT_TRUE(dir.Create(Key("victim-", i), {},
                             SharingPayload(&other, &destroyed, &log))
                      .ok());
    }
    for (int i = 0; i < kTries; ++i) {  // what the mutations remove
      ASSERT_TRUE(dir.Create(Key("single-", i)).ok());
      for (int m = 0; m < 2; ++m) {
        ASSERT_TRUE(dir.Create(Key(Key("member-", i) + "-", m),
                               testing::InGroup(Key("group-", i)))
                        .ok());
      }
    }
    {
      // A reader keeps the victims from being reclaimed by their own
      // erases, so their destructors run in a later mutation's reclaim.
      Participant reader = std::move(domain.RegisterParticipant()).value();
      Guard guard = reader.Enter();
      for (int i = 0; i < kVictims; ++i) {
        ASSERT_TRUE(dir.Erase(Key("victim-", i)).ok());
      }
    }
    ASSERT_EQ(destroyed.load(), 0);
    for (int i = 0; i < kTries && destroyed.load() < kVictims; ++i) {
      switch (reclaimer) {
        case Reclaimer::kCreate:
          ASSERT_TRUE(dir.Create(Key("new-", i)).ok());
          break;
        case Reclaimer::kErase:
          ASSERT_TRUE(dir.Erase(Key("single-", i)).ok());
          break;
        case Reclaimer::kEraseGroup:
          ASSERT_TRUE(dir.EraseGroup(Key("group-", i)).ok());
          break;
        case Reclaimer::kEvict: {
          const std::string key = Key("single-", i);
          Result<ObjectHandle<SharingPayload>> h = dir.Pin(key);
          ASSERT_TRUE(h.ok());
          std::uint64_t version = 0;
          ASSERT_TRUE(dir.WithObject(key,
                                     [&](const ObjectView<SharingPayload>& v) {
                                       version = v.version();
                                     })
                          .ok());
          std::vector<EvictedObject<SharingPayload>> out;
          ASSERT_EQ(
              DirectoryHooks::EvictIfUnchanged(dir, *h, version, false, &out),
              StatusCode::kOk);
          break;
        }
      }
    }
    EXPECT_EQ(destroyed.load(), kVictims)
        << "the mutations' reclaims did not run the victims' destructors";
    EXPECT_TRUE(other.Pin(Key("from-destructor-", kVictims)).ok());
  }
  ASSERT_TRUE(domain.Shutdown(std::chrono::seconds(5)).ok());
  EXPECT_FALSE(log.HasUnresolvedRecord());
  EXPECT_TRUE(log.status().ok()) << log.status().ToString();
}

}  // namespace
}  // namespace cairn
