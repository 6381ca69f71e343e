// Copyright 2026 The cairn Authors.
//
// The durable-log hook (H1): every change a reader can see is reserved
// before any directory lock and appended under the object lock before it is
// visible; a failed reservation or append changes nothing; the finalizer
// gets the changed instances' ObjectTokens. Driven through
// InMemoryDurableLog, whose hooks run inside Reserve and Append.

#include "cairn/directory/durable_log.h"

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/directory/file_durable_log.h"
#include "cairn/directory/group_directory.h"
#include "cairn/directory/quota.h"
#include "directory/directory_testing.h"
#include "flush/flush_testing.h"
#include "testing/stress.h"

// A payload whose bytes the log carries.
struct LoggedPayload {
  std::string bytes;
};

template <>
struct cairn::DurablePayloadCodec<LoggedPayload> {
  static constexpr bool kLogsPayload = true;
  static void Encode(const LoggedPayload& p, std::string* out) {
    out->append(p.bytes);
  }
};

namespace cairn {
namespace {

using Dir = GroupDirectory<LoggedPayload>;
using Handle = ObjectHandle<LoggedPayload>;
using View = ObjectView<LoggedPayload>;
using Access = ObjectAccess<LoggedPayload>;
using testing::Key;
using testing::Watchdog;

constexpr std::chrono::seconds kDeadlockBound{60};

CreateOptions Sized(std::uint64_t bytes, std::string_view group = {}) {
  CreateOptions o;
  o.size_bytes = bytes;
  o.counted_bytes = bytes;
  o.group = group;
  return o;
}

struct Fixture {
  explicit Fixture(std::size_t stripes = 256) {
    DirectoryOptions o;
    o.clock = &clock;
    o.quota = &quota;
    o.durable_log = &log;
    o.lifecycle_stripes = stripes;
    o.route.bucket_count = 64;
    o.on_removed = [this](const RemovedObject& r) {
      std::lock_guard<std::mutex> lock(removed_mu);
      removed.push_back(r.token);
      // The record of a removal is durable before its callback runs.
      bool durable = false;
      for (const auto& rec : log.records()) {
        DurableRecordView v;
        if (rec.state != InMemoryDurableLog::RecordState::kDurable ||
            !DecodeDurableRecord(rec.body, &v).ok() ||
            v.op == DurableOp::kCreate || v.op == DurableOp::kCommit ||
            v.op == DurableOp::kUpsert) {
          continue;
        }
        for (const ObjectToken& t : rec.tokens) durable |= t == r.token;
      }
      if (!durable) removed_before_durable.push_back(r.token);
    };
    dir = std::make_unique<Dir>(o);
  }
  std::vector<DurableRecordView> Durable() const {
    durable_bodies = log.durable_bodies();
    std::vector<DurableRecordView> out;
    for (const std::string& body : durable_bodies) {
      DurableRecordView v;
      EXPECT_TRUE(DecodeDurableRecord(body, &v).ok());
      out.push_back(v);
    }
    return out;
  }
  std::uint64_t Version(std::string_view key) const {
    std::uint64_t version = 0;
    EXPECT_TRUE(
        dir->WithObject(key, [&](const View& v) { version = v.version(); })
            .ok());
    return version;
  }

  ManualClock clock;
  QuotaAccount quota;
  InMemoryDurableLog log;
  std::mutex removed_mu;
  std::vector<ObjectToken> removed;
  std::vector<ObjectToken> removed_before_durable;
  mutable std::vector<std::string> durable_bodies;
  std::unique_ptr<Dir> dir;
};

// Runs every mutation the log covers once, on fresh keys under `tag`.
// Each step checks its own status.
void RunEveryLoggedMutation(Fixture& f, std::string_view tag) {
  Dir& d = *f.dir;
  const std::string single = Key(tag, 1);
  const std::string group = Key(tag, 100);
  ASSERT_TRUE(d.Create(single, Sized(10), LoggedPayload{"one"}).ok());
  ASSERT_TRUE(d.Create(Key(tag, 2), Sized(10, group), {"m2"}).ok());
  ASSERT_TRUE(d.Create(Key(tag, 3), Sized(10, group), {"m3"}).ok());
  Result<Handle> pending = d.CreatePending(Key(tag, 4), Sized(7), {"p"});
  ASSERT_TRUE(pending.ok());
  ASSERT_TRUE(d.Commit(Key(tag, 4), pending->token()).ok());
  Result<Handle> h = d.Pin(single);
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(d.BeginUpsert(single, h->token(), {20, 20}).ok());
  ASSERT_TRUE(d.CommitUpsert(single, h->token(), [](Access& a) {
                 a.payload().bytes = "two";
               }).ok());
  ASSERT_TRUE(d.Erase(single).ok());
  Result<Handle> p4 = d.Pin(Key(tag, 4));
  ASSERT_TRUE(p4.ok());
  ASSERT_TRUE(d.EraseIfMatch(Key(tag, 4), (*p4)->id(), p4->get()).ok());
  ASSERT_TRUE(d.EraseGroup(group).ok());
  ASSERT_TRUE(d.Create(Key(tag, 5), Sized(5)).ok());
  Result<Handle> victim = d.Pin(Key(tag, 5));
  ASSERT_TRUE(victim.ok());
  std::vector<Dir::Evicted> out;
  ASSERT_EQ(d.EvictIfUnchanged(*victim, f.Version(Key(tag, 5)), false, &out),
            StatusCode::kOk);
}

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
  std::vector<Dir::Evicted> out;
  const StatusCode evicted =
      d.EvictIfUnchanged(*a, f.Version("a"), false, &out);
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
  EXPECT_EQ(checks.load(), 10);
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
  ASSERT_EQ(durable.size(), 10u);
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
  bad_version[0] = 2;
  EXPECT_EQ(DecodeDurableRecord(bad_version, &v).code(),
            StatusCode::kFailedPrecondition);
}

// ---- FileDurableLog ----

using testing::ReadWholeFile;
using testing::ScratchDir;
using testing::WriteWholeFile;

std::vector<std::string> ReadBodies(const std::string& path, Status* status,
                                    DurableLogScan* scan = nullptr) {
  std::vector<std::string> bodies;
  *status = ReadDurableLog(
      path, [&](std::string_view body) { bodies.emplace_back(body); }, scan);
  return bodies;
}

// Writes `n` one-object records straight through the log's protocol.
void AppendRecords(FileDurableLog* log, int n, std::string_view tag) {
  for (int i = 0; i < n; ++i) {
    std::string body;
    BeginDurableRecord(DurableOp::kCreate, 1, kNoGroup, "", 1, &body);
    DurableObjectState st;
    st.object = static_cast<ObjectId>(i + 1);
    const std::string key = Key(tag, i);
    st.key = key;
    AddDurableObject(st, "", &body);
    Result<LogReservation> r = log->Reserve(body.size());
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(log->Append(*r, body).ok());
    const ObjectToken token{1, st.object};
    log->Finalize(*r, std::span<const ObjectToken>(&token, 1));
  }
}

TEST(FileDurableLogTest, H1DirectoryChangesRoundTripThroughTheFile) {
  ScratchDir dir;
  const std::string path = dir.File("h1.log");
  std::vector<ObjectToken> durable_tokens;
  FileDurableLogOptions options;
  options.on_durable = [&](std::span<const ObjectToken> tokens) {
    durable_tokens.insert(durable_tokens.end(), tokens.begin(), tokens.end());
  };
  Result<std::unique_ptr<FileDurableLog>> log =
      FileDurableLog::Open(path, options);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  // The in-memory log records the same calls, for comparison.
  Fixture f;
  DirectoryOptions o;
  o.durable_log = log->get();
  o.route.bucket_count = 64;
  Fixture g;
  g.dir = std::make_unique<Dir>(o);
  RunEveryLoggedMutation(g, "t");
  RunEveryLoggedMutation(f, "t");
  EXPECT_TRUE((*log)->status().ok());
  EXPECT_EQ((*log)->durable_records(), 10u);
  EXPECT_GE((*log)->syncs(), 1u);
  log->reset();  // closed; the file alone must hold every record

  Status s;
  DurableLogScan scan;
  const std::vector<std::string> bodies = ReadBodies(path, &s, &scan);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(scan.records, 10u);
  EXPECT_EQ(scan.valid_bytes, ReadWholeFile(path).size());
  // Same records as the in-memory log saw (same ids: fresh directories).
  EXPECT_EQ(bodies, f.log.durable_bodies());
  // on_durable got every record's tokens, in order: 11 objects (a group
  // erase names two).
  ASSERT_EQ(durable_tokens.size(), 11u);
  DurableRecordView v;
  ASSERT_TRUE(DecodeDurableRecord(bodies[0], &v).ok());
  EXPECT_EQ(durable_tokens[0], (ObjectToken{1, v.objects[0].object}));

  // Reopened, the log appends after the existing records.
  log = FileDurableLog::Open(path);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  AppendRecords(log->get(), 2, "again");
  log->reset();
  EXPECT_EQ(ReadBodies(path, &s).size(), 12u);
  EXPECT_TRUE(s.ok());
}

TEST(FileDurableLogTest, TornTailIsDataLossAndReportsTheValidPrefix) {
  ScratchDir dir;
  const std::string path = dir.File("torn.log");
  {
    Result<std::unique_ptr<FileDurableLog>> log = FileDurableLog::Open(path);
    ASSERT_TRUE(log.ok());
    AppendRecords(log->get(), 3, "k");
  }
  const std::string whole = ReadWholeFile(path);
  Status s;
  DurableLogScan full;
  ASSERT_EQ(ReadBodies(path, &s, &full).size(), 3u);
  ASSERT_TRUE(s.ok());
  // Every cut inside the last record (its frame or its body) is torn.
  DurableLogScan two;
  WriteWholeFile(path, whole.substr(0, whole.size() - 1));
  std::vector<std::string> bodies = ReadBodies(path, &s, &two);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(bodies.size(), 2u);
  EXPECT_EQ(two.records, 2u);
  const std::size_t last = full.valid_bytes - two.valid_bytes;
  for (std::size_t cut = 1; cut < last; ++cut) {
    WriteWholeFile(path, whole.substr(0, whole.size() - cut));
    DurableLogScan scan;
    EXPECT_EQ(ReadBodies(path, &s, &scan).size(), 2u) << cut;
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << cut;
    EXPECT_EQ(scan.valid_bytes, two.valid_bytes) << cut;
  }
  // Open refuses the damaged file unless told to cut the tail off.
  WriteWholeFile(path, whole.substr(0, whole.size() - 5));
  Result<std::unique_ptr<FileDurableLog>> refused = FileDurableLog::Open(path);
  EXPECT_EQ(refused.status().code(), StatusCode::kDataLoss);
  FileDurableLogOptions repair;
  repair.truncate_damaged_tail = true;
  Result<std::unique_ptr<FileDurableLog>> log =
      FileDurableLog::Open(path, repair);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  AppendRecords(log->get(), 1, "after");
  log->reset();
  bodies = ReadBodies(path, &s);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(bodies.size(), 3u);
}

TEST(FileDurableLogTest, FlippedByteIsDataLoss) {
  ScratchDir dir;
  const std::string path = dir.File("flip.log");
  {
    Result<std::unique_ptr<FileDurableLog>> log = FileDurableLog::Open(path);
    ASSERT_TRUE(log.ok());
    AppendRecords(log->get(), 3, "k");
  }
  const std::string whole = ReadWholeFile(path);
  Status s;
  // Flip each byte of the records (not the header) in turn: every flip is
  // caught, and the records before the damaged one still read.
  std::size_t caught = 0;
  for (std::size_t i = kDurableLogHeaderBytes; i < whole.size(); ++i) {
    std::string bad = whole;
    bad[i] ^= 0x20;
    WriteWholeFile(path, bad);
    DurableLogScan scan;
    const std::vector<std::string> bodies = ReadBodies(path, &s, &scan);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << i;
    EXPECT_LT(bodies.size(), 3u) << i;
    EXPECT_LE(scan.valid_bytes, i) << i;
    caught += s.code() == StatusCode::kDataLoss;
  }
  EXPECT_EQ(caught, whole.size() - kDurableLogHeaderBytes);
  // A damaged header: not a durable log, or another version.
  std::string bad_magic = whole;
  bad_magic[0] ^= 0x01;
  WriteWholeFile(path, bad_magic);
  ReadBodies(path, &s);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(FileDurableLog::Open(path).status().code(), StatusCode::kDataLoss);
}

TEST(FileDurableLogTest, CancelledRecordsNeverReachTheFile) {
  // B is appended after A; A is cancelled after its append (as when the
  // route refuses a create's publish). B's Finalize waits for A to be
  // resolved and the file holds B only.
  ScratchDir dir;
  const std::string path = dir.File("cancel.log");
  Result<std::unique_ptr<FileDurableLog>> log = FileDurableLog::Open(path);
  ASSERT_TRUE(log.ok());
  FileDurableLog& l = **log;
  auto body = [](std::string_view key) {
    std::string b;
    BeginDurableRecord(DurableOp::kErase, 1, kNoGroup, "", 1, &b);
    DurableObjectState st;
    st.key = key;
    AddDurableObject(st, "", &b);
    return b;
  };
  Result<LogReservation> a = l.Reserve(64);
  Result<LogReservation> b = l.Reserve(64);
  Result<LogReservation> c = l.Reserve(64);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_TRUE(l.Append(*a, body("a")).ok());
  ASSERT_TRUE(l.Append(*b, body("b")).ok());
  l.Cancel(*c);  // never appended
  std::atomic<bool> finalized{false};
  std::thread finalizer([&] {
    const ObjectToken t{1, 2};
    l.Finalize(*b, std::span<const ObjectToken>(&t, 1));
    finalized.store(true, std::memory_order_release);
  });
  // B cannot be durable while A is unresolved (A is ahead of it).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(finalized.load(std::memory_order_acquire));
  l.Cancel(*a);
  finalizer.join();
  EXPECT_EQ(l.durable_records(), 1u);
  Status s;
  const std::vector<std::string> bodies = ReadBodies(path, &s);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(bodies.size(), 1u);
  EXPECT_EQ(bodies[0], body("b"));
}

// A write that fails is sticky (durable_log.h, Finalize): the record it
// carried is not reported durable, status() keeps the error, and every later
// mutation is refused with it, so nothing more becomes visible. The write is
// made to fail with RLIMIT_FSIZE (ctest runs each test in its own process;
// the limit is restored before the test ends).
TEST(FileDurableLogTest, FailedWriteIsStickyAndRefusesLaterChanges) {
  ScratchDir dir;
  const std::string path = dir.File("sticky.log");
  std::atomic<int> durable{0};
  FileDurableLogOptions options;
  options.on_durable = [&](std::span<const ObjectToken>) { ++durable; };
  Result<std::unique_ptr<FileDurableLog>> log =
      FileDurableLog::Open(path, options);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  DirectoryOptions o;
  o.durable_log = log->get();
  Dir d(o);
  ASSERT_TRUE(d.Create("before", Sized(1), {"x"}).ok());
  ASSERT_EQ(durable.load(), 1);
  const std::size_t size = ReadWholeFile(path).size();

  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  void (*saved_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = size + 8;  // less than one more record
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  // Visible (the change cannot be undone) but not durable.
  EXPECT_TRUE(d.Create("lost", Sized(1), {"y"}).ok());
  const Status sticky = (*log)->status();
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  std::signal(SIGXFSZ, saved_handler);

  EXPECT_FALSE(sticky.ok());
  EXPECT_EQ(durable.load(), 1) << "a failed record was reported durable";
  EXPECT_EQ((*log)->durable_records(), 1u);
  // With room again, the log still refuses: the error is sticky.
  EXPECT_EQ(d.Create("after", Sized(1), {"z"}).status().code(), sticky.code());
  EXPECT_EQ(d.Pin("after").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.Erase("before").code(), sticky.code());
  EXPECT_TRUE(d.Pin("before").ok());
  EXPECT_EQ((*log)->status().code(), sticky.code());
  // The file holds the durable prefix (and perhaps a torn tail).
  Status s;
  DurableLogScan scan;
  ReadBodies(path, &s, &scan);
  EXPECT_EQ(scan.records, 1u);
}

TEST(FileDurableLogTest, BadOptionsAndPathsAreRejected) {
  ScratchDir dir;
  EXPECT_EQ(FileDurableLog::Open("").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(FileDurableLog::Open(dir.path()).status().code(),
            StatusCode::kInvalidArgument);  // a directory
  EXPECT_EQ(FileDurableLog::Open(dir.File("no/such/dir.log")).status().code(),
            StatusCode::kNotFound);
  FileDurableLogOptions zero;
  zero.max_record_bytes = 0;
  EXPECT_EQ(FileDurableLog::Open(dir.File("a.log"), zero).status().code(),
            StatusCode::kInvalidArgument);
  FileDurableLogOptions tight;
  tight.max_record_bytes = 100;
  tight.max_pending_bytes = 100;
  EXPECT_EQ(FileDurableLog::Open(dir.File("a.log"), tight).status().code(),
            StatusCode::kInvalidArgument);
  // A file that is not a durable log (here: empty) is refused.
  WriteWholeFile(dir.File("empty.log"), "");
  EXPECT_EQ(FileDurableLog::Open(dir.File("empty.log")).status().code(),
            StatusCode::kDataLoss);
  Status s;
  EXPECT_EQ(ReadBodies(dir.File("missing.log"), &s).size(), 0u);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  // Limits: a record over max_record_bytes, and the pending-bytes budget.
  FileDurableLogOptions small;
  small.max_record_bytes = 128;
  small.max_pending_bytes = 300;
  Result<std::unique_ptr<FileDurableLog>> log =
      FileDurableLog::Open(dir.File("small.log"), small);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ((*log)->Reserve(129).status().code(), StatusCode::kInvalidArgument);
  Result<LogReservation> r1 = (*log)->Reserve(128);
  Result<LogReservation> r2 = (*log)->Reserve(128);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ((*log)->Reserve(128).status().code(),
            StatusCode::kResourceExhausted);
  (*log)->Cancel(*r1);
  Result<LogReservation> r3 = (*log)->Reserve(128);
  EXPECT_TRUE(r3.ok());
  EXPECT_EQ((*log)->Append(*r2, std::string(129, 'x')).code(),
            StatusCode::kInvalidArgument);
  (*log)->Cancel(*r2);
  (*log)->Cancel(*r3);
}

TEST(FileDurableLogTest, H1ConcurrentWritersKeepPerKeyOrderInTheFile) {
  // Four threads create and erase their own keys and race on shared ones
  // through one file log (group commit). Every change returned OK is in the
  // file, and each key's records alternate create, erase, as the changes
  // happened.
  ScratchDir dir;
  const std::string path = dir.File("race.log");
  Result<std::unique_ptr<FileDurableLog>> log = FileDurableLog::Open(path);
  ASSERT_TRUE(log.ok());
  DirectoryOptions o;
  o.durable_log = log->get();
  o.route.bucket_count = 64;
  Dir d(o);
  const int rounds = testing::StressIterations(150);
  std::atomic<std::uint64_t> changes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        const std::string key = Key("shared", i % 3);
        if (d.Create(key, Sized(1), {"x"}).ok()) {
          changes.fetch_add(1, std::memory_order_relaxed);
        }
        if (d.Erase(key).ok()) changes.fetch_add(1, std::memory_order_relaxed);
        const std::string own = Key(std::to_string(t) + "-", i % 5);
        if (d.Create(own, Sized(1)).ok()) {
          changes.fetch_add(1, std::memory_order_relaxed);
        }
        if (d.Erase(own).ok()) changes.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_TRUE((*log)->status().ok());
  Status s;
  const std::vector<std::string> bodies = ReadBodies(path, &s);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(bodies.size(), changes.load());
  std::unordered_map<std::string, DurableOp> last;
  for (const std::string& body : bodies) {
    DurableRecordView v;
    ASSERT_TRUE(DecodeDurableRecord(body, &v).ok());
    const std::string key(v.objects[0].key);
    auto it = last.find(key);
    const DurableOp expect = it == last.end() || it->second == DurableOp::kErase
                                 ? DurableOp::kCreate
                                 : DurableOp::kErase;
    EXPECT_EQ(v.op, expect) << key;
    last[key] = v.op;
  }
}

}  // namespace
}  // namespace cairn
