// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Log replay and standby (H3, docs/ha.md): records applied to a replica
// give the primary's state, idempotently and only in LSN order; a model
// test drives every logged mutation on a primary registry with snapshots,
// truncation and standbys started at random points and compares a
// standby's state with the primary's after every poll; concurrent writers
// with a standby following; promotion; damaged logs.

#include "cairn/ha/replay.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/directory/group_directory.h"
#include "cairn/ha/file_durable_log.h"
#include "cairn/ha/snapshot.h"
#include "cairn/ha/standby.h"
#include "cairn/tenant/eviction.h"
#include "cairn/tenant/tenant_registry.h"
#include "testing/scratch_dir.h"
#include "testing/stress.h"

namespace cairn {
namespace {

// A payload whose bytes are logged, so replay can rebuild it.
struct Blob {
  std::string bytes;
};

}  // namespace

template <>
struct DurablePayloadCodec<Blob> {
  static constexpr bool kLogsPayload = true;
  static void Encode(const Blob& b, std::string* out) { out->append(b.bytes); }
  static Result<Blob> Decode(std::string_view bytes) {
    return Blob{std::string(bytes)};
  }
};

namespace {

using Dir = GroupDirectory<Blob>;
using Registry = TenantRegistry<Blob>;
using Handle = ObjectHandle<Blob>;
using View = ObjectView<Blob>;
using StandbyT = Standby<Blob>;
using testing::ScratchDir;

Status EncodeBlob(const Blob& b, std::string* out) {
  out->append(b.bytes);
  return Status::Ok();
}
Result<Blob> DecodeBlob(std::string_view bytes) {
  return Blob{std::string(bytes)};
}

// ---- state of a registry, compared field by field --------------------------

struct ObjectState {
  ObjectId id = 0;
  std::uint64_t version = 0;
  std::uint64_t size = 0;
  std::uint64_t counted = 0;
  std::string group;
  std::string payload;
  friend bool operator==(const ObjectState&, const ObjectState&) = default;
};
struct TenantState {
  TenantInstanceId instance = 0;
  std::uint64_t charged = 0;
  std::map<std::string, ObjectState> objects;
  friend bool operator==(const TenantState&, const TenantState&) = default;
};
using State = std::map<std::string, TenantState>;

std::map<std::string, ObjectState> DumpDirectory(const Dir& dir) {
  std::vector<Handle> handles;
  EXPECT_TRUE(dir.VisitHandles([&](std::span<const Handle> chunk) {
                   handles.insert(handles.end(), chunk.begin(), chunk.end());
                 })
                  .ok());
  std::map<std::string, ObjectState> out;
  for (const Handle& h : handles) {
    ObjectState o;
    o.id = h.token().object;
    if (h->group() != nullptr) o.group = std::string(h->group()->name());
    const Status read = dir.WithHandle(h, [&](const View& v) {
      o.version = v.version();
      o.size = v.size_bytes();
      o.counted = v.counted_bytes();
      o.payload = v.payload().bytes;
      out[std::string(v.key())] = o;
    });
    EXPECT_TRUE(read.ok() || read.code() == StatusCode::kNotFound)
        << read.ToString();
  }
  return out;
}

State Dump(const Registry& registry) {
  State state;
  for (const auto& tenant : registry.Tenants()) {
    TenantState t;
    t.instance = tenant->instance_id();
    t.charged = tenant->quota().charged();
    t.objects = DumpDirectory(tenant->directory());
    // Q2: an account holds exactly its objects' charges.
    std::uint64_t sum = 0;
    for (const auto& [key, o] : t.objects) sum += o.counted;
    EXPECT_EQ(t.charged, sum) << "tenant " << tenant->name();
    state[std::string(tenant->name())] = std::move(t);
  }
  return state;
}

std::string Describe(const State& state) {
  std::string out;
  for (const auto& [name, t] : state) {
    out += name + "#" + std::to_string(t.instance) +
           " charged=" + std::to_string(t.charged) + ":";
    for (const auto& [key, o] : t.objects) {
      out += " " + key + "(" + std::to_string(o.id) + " v" +
             std::to_string(o.version) + " " + o.group + " '" + o.payload +
             "')";
    }
    out += "\n";
  }
  return out;
}

// ---- directory-level replay
// --------------------------------------------------

// Every logged op on a primary directory, replayed from scratch onto an
// empty replica, twice over, and from a mid-way snapshot.
TEST(ReplayTest, DirectoryRecordsRebuildThePrimaryIdempotently) {
  InMemoryDurableLog log;
  DirectoryOptions options;
  options.durable_log = &log;
  Dir primary(options);
  ASSERT_TRUE(primary.Create("a", {}, Blob{"a1"}).ok());
  CreateOptions member;
  member.group = "g";
  member.counted_bytes = 5;
  ASSERT_TRUE(primary.Create("m1", member, Blob{"m1"}).ok());
  ASSERT_TRUE(primary.Create("m2", member, Blob{"m2"}).ok());
  CreateOptions reserve;
  reserve.counted_bytes = 8;
  auto pending = primary.CreatePending("p", reserve, Blob{"p"});
  ASSERT_TRUE(pending.ok());
  CommitOptions settle;  // a partial settlement (Q4)
  settle.counted_bytes = 6;
  ASSERT_TRUE(primary.Commit("p", pending->token(), settle).ok());
  auto a = primary.Pin("a");
  ASSERT_TRUE(a.ok());
  UpsertOptions upsert;
  upsert.size_bytes = 9;
  upsert.counted_bytes = 3;
  ASSERT_TRUE(primary.BeginUpsert("a", a->token(), upsert).ok());
  ASSERT_TRUE(
      primary.CommitUpsertWithPayload("a", a->token(), Blob{"a2"}).ok());
  ASSERT_TRUE(primary.AdjustCharge("a", a->token(), {7, 0}).ok());  // kAdjust
  ASSERT_TRUE(primary.Erase("p").ok());
  ASSERT_TRUE(primary.Create("p", {}, Blob{"p-again"}).ok());  // a new id
  ASSERT_TRUE(primary.EraseGroup("g").ok());
  ASSERT_TRUE(primary.Create("m1", member, Blob{"m1-again"}).ok());

  const std::vector<std::string> bodies = log.durable_bodies();
  ASSERT_EQ(bodies.size(), 10u);
  const auto want = DumpDirectory(primary);
  EXPECT_EQ(want.at("a").counted, 10u);

  Dir replica;
  for (int round = 0; round < 2; ++round) {
    for (const std::string& body : bodies) {
      DurableRecordView record;
      ASSERT_TRUE(DecodeDurableRecord(body, &record).ok());
      ASSERT_TRUE(ApplyDurableRecord(replica, record).ok());
    }
    EXPECT_EQ(DumpDirectory(replica), want) << "round " << round;
  }
  // Any suffix onto any prefix's result, replayed again from an earlier
  // point (a snapshot that reflects more than its position says).
  for (std::size_t cut = 0; cut <= bodies.size(); ++cut) {
    for (std::size_t from = 0; from <= cut; ++from) {
      Dir r;
      for (std::size_t i = 0; i < cut; ++i) {
        DurableRecordView record;
        ASSERT_TRUE(DecodeDurableRecord(bodies[i], &record).ok());
        ASSERT_TRUE(ApplyDurableRecord(r, record).ok());
      }
      for (std::size_t i = from; i < bodies.size(); ++i) {
        DurableRecordView record;
        ASSERT_TRUE(DecodeDurableRecord(bodies[i], &record).ok());
        ASSERT_TRUE(ApplyDurableRecord(r, record).ok());
      }
      EXPECT_EQ(DumpDirectory(r), want) << "cut " << cut << " from " << from;
    }
  }
  // Ids are kept and never reissued: a create after replay gets a new one.
  auto fresh = replica.Create("new");
  ASSERT_TRUE(fresh.ok());
  for (const auto& [key, o] : want)
    EXPECT_GT(fresh->token().object, o.id) << key;
}

// D11 with H1 and H3: a takeover of an expired pending put or staged
// upsert writes no record (nothing a reader sees changes), the stale
// token's late Commit / CommitUpsert fails and writes none either, and a
// replica that applies the log holds exactly the primary's active objects
// (ids, versions, sizes, payloads) and their charges. A fixed scenario,
// then random takeover-heavy sequences applied as a standby would, record
// by record, compared after every step.
TEST(ReplayTest, D11TakeoversReplayToThePrimarysDirectory) {
  static constexpr std::chrono::nanoseconds kTimeout{100};
  struct Source {
    ManualClock clock;
    QuotaAccount quota;
    InMemoryDurableLog log;
    std::unique_ptr<Dir> dir;
    Source() {
      DirectoryOptions o;
      o.clock = &clock;
      o.quota = &quota;
      o.durable_log = &log;
      o.pending_put_timeout = kTimeout;
      dir = std::make_unique<Dir>(std::move(o));
    }
  };
  struct Follower {
    QuotaAccount quota;
    std::unique_ptr<Dir> dir;
    std::size_t applied = 0;
    Follower() {
      DirectoryOptions o;
      o.quota = &quota;
      dir = std::make_unique<Dir>(std::move(o));
    }
    void CatchUp(const InMemoryDurableLog& log) {
      const std::vector<std::string> bodies = log.durable_bodies();
      for (; applied < bodies.size(); ++applied) {
        DurableRecordView record;
        ASSERT_TRUE(DecodeDurableRecord(bodies[applied], &record).ok());
        ASSERT_TRUE(ApplyDurableRecord(*dir, record).ok());
      }
    }
  };
  // The primary's committed state: its objects, and its charges less the
  // pending ones (which no replica holds).
  auto expect_same = [](Source& p, Follower& r) {
    r.CatchUp(p.log);
    const auto want = DumpDirectory(*p.dir);
    EXPECT_EQ(DumpDirectory(*r.dir), want);
    std::uint64_t sum = 0;
    for (const auto& [key, o] : want) sum += o.counted;
    EXPECT_EQ(p.quota.charged() - p.dir->pending_charge_bytes(), sum);
    EXPECT_EQ(r.quota.charged(), sum);
  };

  {
    Source p;
    Follower r;
    ASSERT_TRUE(p.dir->Create("a", {}, Blob{"a1"}).ok());
    CreateOptions put;
    put.counted_bytes = 4;
    auto stale = p.dir->CreatePending("p", put, Blob{"old"});
    ASSERT_TRUE(stale.ok());
    CreateOptions member = put;
    member.group = "g";
    auto stale_member = p.dir->CreatePending("m", member, Blob{"m-old"});
    ASSERT_TRUE(stale_member.ok());
    auto a = p.dir->Pin("a");
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(p.dir->BeginUpsert("a", a->token(), {7, 7}).ok());
    p.clock.Advance(kTimeout);
    // The takeovers: nothing logged.
    put.counted_bytes = 6;
    auto fresh = p.dir->CreatePending("p", put, Blob{"new"});
    ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
    member.counted_bytes = 2;
    auto fresh_member = p.dir->CreatePending("m", member, Blob{"m-new"});
    ASSERT_TRUE(fresh_member.ok()) << fresh_member.status().ToString();
    UpsertStage stage;
    ASSERT_TRUE(p.dir->BeginUpsert("a", a->token(), {9, 3}, &stage).ok());
    ASSERT_EQ(p.log.records().size(), 1u);  // "a"'s create only
    // The stale holders' late calls fail and log nothing.
    EXPECT_EQ(p.dir->Commit("p", stale->token()).code(), StatusCode::kNotFound);
    EXPECT_EQ(p.dir->Commit("m", stale_member->token()).code(),
              StatusCode::kNotFound);
    EXPECT_EQ(
        p.dir->CommitUpsertWithPayload("a", a->token(), Blob{"stale"}).code(),
        StatusCode::kFailedPrecondition);
    ASSERT_EQ(p.log.records().size(), 1u);
    ASSERT_TRUE(p.dir->Commit("p", fresh->token()).ok());
    ASSERT_TRUE(p.dir->Commit("m", fresh_member->token()).ok());
    ASSERT_TRUE(
        p.dir->CommitUpsertWithPayload("a", a->token(), stage, Blob{"a2"})
            .ok());
    ASSERT_EQ(p.log.durable_bodies().size(), 4u);
    expect_same(p, r);
    const auto dumped = DumpDirectory(*r.dir);
    EXPECT_EQ(dumped.at("p").id, fresh->token().object);
    EXPECT_EQ(dumped.at("p").payload, "new");
    EXPECT_EQ(dumped.at("m").group, "g");
    EXPECT_EQ(dumped.at("a").payload, "a2");
    EXPECT_EQ(dumped.at("a").counted, 3u);
    // Applied again from the start: the same (idempotent, H3).
    Follower again;
    again.CatchUp(p.log);
    again.applied = 0;
    again.CatchUp(p.log);
    EXPECT_EQ(DumpDirectory(*again.dir), DumpDirectory(*p.dir));
  }

  const int seeds = testing::StressIterations(testing::kUnderTsan ? 3 : 10);
  for (int seed = 0; seed < seeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Source p;
    Follower r;
    std::mt19937_64 rng(seed * 31337 + 5);
    auto pick = [&](std::uint64_t n) { return rng() % n; };
    std::vector<std::pair<std::string, ObjectToken>> puts;
    std::vector<std::pair<std::string, UpsertStage>> stages;
    for (int step = 0; step < 300; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const std::string key = "k" + std::to_string(pick(5));
      const std::string payload = "p" + std::to_string(step);
      switch (pick(9)) {
        case 0:
        case 1: {
          CreateOptions o;
          o.counted_bytes = pick(20);
          std::string group;  // o.group views it: alive through the call
          if (pick(3) == 0) {
            group = "g" + std::to_string(pick(2));
            o.group = group;
          }
          auto made = p.dir->CreatePending(key, o, Blob{payload});
          if (made.ok()) puts.emplace_back(key, made->token());
          break;
        }
        case 2: {
          if (puts.empty()) break;
          const auto& [k, t] = puts[pick(puts.size())];
          p.dir->Commit(k, t).IgnoreError();
          break;
        }
        case 3: {
          if (puts.empty()) break;
          const auto& [k, t] = puts[pick(puts.size())];
          p.dir->Abort(k, t).IgnoreError();
          break;
        }
        case 4: {
          auto pinned = p.dir->Pin(key);
          if (!pinned.ok()) break;
          const std::uint64_t bytes = pick(20);
          UpsertStage stage;
          const bool named = pick(2) == 0;
          if (p.dir
                  ->BeginUpsert(key, pinned->token(), {bytes, bytes},
                                named ? &stage : nullptr)
                  .ok() &&
              named) {
            stages.emplace_back(key, stage);
          }
          break;
        }
        case 5: {
          auto pinned = p.dir->Pin(key);
          if (!pinned.ok()) break;
          if (!stages.empty() && pick(2) == 0) {
            const auto& [k, stage] = stages[pick(stages.size())];
            auto staged = p.dir->Pin(k);
            if (!staged.ok()) break;
            p.dir
                ->CommitUpsertWithPayload(k, staged->token(), stage,
                                          Blob{payload})
                .IgnoreError();
          } else {
            p.dir->CommitUpsertWithPayload(key, pinned->token(), Blob{payload})
                .IgnoreError();
          }
          break;
        }
        case 6:
          p.clock.Advance(std::chrono::nanoseconds(30 + pick(60)));
          break;
        case 7:
          p.dir->ReapPendingPuts();
          break;
        default: {
          EraseOptions force;
          force.force = true;
          p.dir->Erase(key, force).IgnoreError();
          break;
        }
      }
      expect_same(p, r);
      ASSERT_EQ(p.log.open_reservations(), 0u);
      if (HasFailure()) return;
    }
  }
}

TEST(ReplayTest, ApplierRefusesGapsAndSkipsWhatItApplied) {
  InMemoryDurableLog log;
  RegistryOptions options;
  options.durable_log = &log;
  Registry primary(options);
  ASSERT_TRUE(primary.default_tenant()->directory().Create("k1").ok());
  ASSERT_TRUE(primary.default_tenant()->directory().Create("k2").ok());
  ASSERT_TRUE(primary.default_tenant()->directory().Create("k3").ok());
  const auto bodies = log.durable_bodies();
  ASSERT_EQ(bodies.size(), 3u);

  Registry replica;
  LogApplier<Blob> applier(&replica, 0);
  ASSERT_TRUE(applier.Apply(1, bodies[0]).ok());
  const Status gap = applier.Apply(3, bodies[2]);
  EXPECT_EQ(gap.code(), StatusCode::kDataLoss) << gap.ToString();
  EXPECT_EQ(applier.applied_lsn(), 1u);
  EXPECT_EQ(replica.default_tenant()->directory().object_count(), 1u);
  ASSERT_TRUE(applier.Apply(1, bodies[0]).ok());  // already applied
  EXPECT_EQ(applier.stats().already_applied, 1u);
  ASSERT_TRUE(applier.Apply(2, bodies[1]).ok());
  ASSERT_TRUE(applier.Apply(3, bodies[2]).ok());
  EXPECT_EQ(Dump(replica), Dump(primary));
  // A damaged body is refused and nothing moves.
  const Status bad = applier.Apply(4, "garbage");
  EXPECT_EQ(bad.code(), StatusCode::kDataLoss) << bad.ToString();
  EXPECT_EQ(applier.applied_lsn(), 3u);
}

TEST(ReplayTest, TenantRecordsKeepInstancesAndSkipRemovedTenants) {
  InMemoryDurableLog log;
  RegistryOptions options;
  options.durable_log = &log;
  Registry primary(options);
  auto factory = [](std::string_view) -> Result<TenantOptions> {
    TenantOptions o;
    o.quota_limit_bytes = 1000;
    return o;
  };
  auto t1 = primary.GetOrCreate("t", factory);
  ASSERT_TRUE(t1.ok());
  ASSERT_TRUE(t1.value()->directory().Create("x").ok());
  ASSERT_TRUE(primary.Remove("t", t1.value()->instance_id()).ok());
  // A held handle still writes to the removed instance: logged, and
  // skipped by replay (the instance is not state any more).
  ASSERT_TRUE(t1.value()->directory().Create("y").ok());
  auto t2 = primary.GetOrCreate("t", factory);
  ASSERT_TRUE(t2.ok());
  ASSERT_NE(t2.value()->instance_id(), t1.value()->instance_id());
  ASSERT_TRUE(t2.value()->directory().Create("z").ok());

  Registry replica;
  LogApplier<Blob> applier(&replica, 0);
  Lsn lsn = 0;
  for (const std::string& body : log.durable_bodies()) {
    ASSERT_TRUE(applier.Apply(++lsn, body).ok());
  }
  EXPECT_EQ(applier.stats().removed_tenant, 1u);
  EXPECT_EQ(Dump(replica), Dump(primary)) << Describe(Dump(replica));
  auto found = replica.Find("t");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found.value()->quota().limit(), 1000u);
}

// ---- the model test: primary, snapshots, truncation, standbys --------------

struct Primary {
  ScratchDir scratch{"replay"};
  std::string log_dir = scratch.File("log");
  std::unique_ptr<FileDurableLog> log;
  std::unique_ptr<Registry> registry;
  std::string snapshot;  // the newest snapshot, if any

  Primary() {
    FileDurableLogOptions o;
    o.sync = false;          // durability is the fault sweeps' subject
    o.segment_bytes = 4096;  // many segments, so truncation drops some
    auto opened = FileDurableLog::Open(log_dir, o);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    log = std::move(opened).value();
    RegistryOptions r;
    r.durable_log = log.get();
    registry = std::make_unique<Registry>(r);
  }

  StandbyOptions<Blob> StandbyFrom(const std::string& snapshot_path) const {
    StandbyOptions<Blob> s;
    s.snapshot_path = snapshot_path;
    s.decode = DecodeBlob;
    s.log_dir = log_dir;
    return s;
  }
};

class ModelDriver {
 public:
  ModelDriver(Primary* p, std::uint64_t seed) : p_(p), rng_(seed) {}

  void Step() {
    const int dice = Pick(100);
    if (dice < 4) return MakeTenant();
    if (dice < 6) return RemoveTenant();
    if (dice < 30) return CreateObject(/*member=*/false);
    if (dice < 40) return CreateObject(/*member=*/true);
    if (dice < 50) return TwoPhasePut();
    if (dice < 56) return Upsert();
    if (dice < 60) return AdjustCharge();
    if (dice < 75) return EraseObject();
    if (dice < 80) return EraseGroup();
    if (dice < 84) return Evict();
    if (dice < 92) return Snapshot();
    return PollStandby();
  }

  void Finish() {
    PollStandby();
    for (auto& s : standbys_) ASSERT_TRUE(s->Poll().ok());
  }

 private:
  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::string Key() { return "k" + std::to_string(Pick(60)); }
  std::string Payload() { return "p" + std::to_string(rng_() % 100000); }
  Registry::Handle Tenant() {
    auto tenants = p_->registry->Tenants();
    return tenants[Pick(static_cast<int>(tenants.size()))];
  }

  void MakeTenant() {
    auto made = p_->registry->GetOrCreate(
        "t" + std::to_string(Pick(5)),
        [](std::string_view) -> Result<TenantOptions> {
          return TenantOptions{};
        });
    ASSERT_TRUE(made.ok()) << made.status().ToString();
  }
  void RemoveTenant() {
    auto t = Tenant();
    const Status s = p_->registry->Remove(t->name(), t->instance_id());
    ASSERT_TRUE(s.ok() || s.code() == StatusCode::kFailedPrecondition)
        << s.ToString();
  }
  void CreateObject(bool member) {
    CreateOptions o;
    std::string group = "g" + std::to_string(Pick(4));
    if (member) o.group = group;
    o.size_bytes = static_cast<std::uint64_t>(Pick(1000));
    o.counted_bytes = static_cast<std::uint64_t>(Pick(100));
    auto made = Tenant()->directory().Create(Key(), o, Blob{Payload()});
    ASSERT_TRUE(made.ok() || made.status().code() == StatusCode::kAlreadyExists)
        << made.status().ToString();
  }
  void TwoPhasePut() {
    auto t = Tenant();
    const std::string key = Key();
    CreateOptions o;
    o.counted_bytes = static_cast<std::uint64_t>(Pick(100));
    auto pending = t->directory().CreatePending(key, o, Blob{Payload()});
    if (!pending.ok()) return;
    // Half the commits settle partially (Q4): the replica keeps the
    // settled charge, not the reservation.
    CommitOptions settle;
    if (Pick(2) == 0) {
      settle.counted_bytes = static_cast<std::uint64_t>(
          Pick(static_cast<int>(o.counted_bytes) + 1));
    }
    const Status s = Pick(3) == 0
                         ? t->directory().Abort(key, pending->token())
                         : t->directory().Commit(key, pending->token(), settle);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void Upsert() {
    auto t = Tenant();
    const std::string key = Key();
    auto pinned = t->directory().Pin(key);
    if (!pinned.ok()) return;
    UpsertOptions o;
    o.size_bytes = static_cast<std::uint64_t>(Pick(1000));
    o.counted_bytes = static_cast<std::uint64_t>(Pick(100));
    if (!t->directory().BeginUpsert(key, pinned->token(), o).ok()) return;
    const Status s = Pick(4) == 0
                         ? t->directory().AbortUpsert(key, pinned->token())
                         : t->directory().CommitUpsertWithPayload(
                               key, pinned->token(), Blob{Payload()});
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  // A replica added, lost or replaced (Q4): a kAdjust record.
  void AdjustCharge() {
    auto t = Tenant();
    const std::string key = Key();
    auto pinned = t->directory().Pin(key);
    if (!pinned.ok()) return;
    const ChargeAdjustment a{static_cast<std::uint64_t>(Pick(60)),
                             static_cast<std::uint64_t>(Pick(60))};
    const Status s = t->directory().AdjustCharge(key, pinned->token(), a);
    // A refund above the counted bytes is refused; a staged upsert never
    // outlives Upsert().
    ASSERT_TRUE(s.ok() || s.code() == StatusCode::kInvalidArgument)
        << s.ToString();
  }
  void EraseObject() {
    EraseOptions o;
    o.force = true;
    const Status s = Tenant()->directory().Erase(Key(), o);
    ASSERT_TRUE(s.ok() || s.code() == StatusCode::kNotFound) << s.ToString();
  }
  void EraseGroup() {
    EraseOptions o;
    o.force = true;
    const Status s =
        Tenant()->directory().EraseGroup("g" + std::to_string(Pick(4)), o);
    ASSERT_TRUE(s.ok() || s.code() == StatusCode::kNotFound) << s.ToString();
  }
  void Evict() {
    Evictor<Blob> evictor;
    Dir* dir = &Tenant()->directory();
    evictor.Evict(std::span<Dir* const>(&dir, 1),
                  static_cast<std::uint64_t>(Pick(2000)), 0,
                  Evictor<Blob>::Measure::kSizeBytes);
  }
  void Snapshot() {
    const std::string path =
        p_->scratch.File("snap" + std::to_string(snapshots_++));
    SnapshotWriteOptions o;
    o.sync = false;  // no power cuts here: the fault sweeps cover them
    ASSERT_TRUE(WriteSnapshotAt(*p_->registry, *p_->log, path, EncodeBlob, o,
                                /*truncate=*/Pick(2) == 0)
                    .ok());
    p_->snapshot = path;
  }
  void PollStandby() {
    if (standbys_.empty() || Pick(3) == 0) {
      auto opened = StandbyT::Open(p_->StandbyFrom(p_->snapshot));
      ASSERT_TRUE(opened.ok()) << opened.status().ToString();
      standbys_.push_back(std::move(opened).value());
    }
    for (auto it = standbys_.begin(); it != standbys_.end();) {
      Result<std::size_t> polled = (*it)->Poll();
      if (!polled.ok() && polled.status().code() == StatusCode::kOutOfRange) {
        it = standbys_.erase(it);  // fell behind a truncation
        continue;
      }
      ASSERT_TRUE(polled.ok()) << polled.status().ToString();
      ASSERT_EQ((*it)->applied_lsn(), p_->log->durable_lsn());
      const State want = Dump(*p_->registry);
      const State got = Dump((*it)->registry());
      ASSERT_EQ(got, want) << "standby from LSN " << (*it)->snapshot_lsn()
                           << "\nwant:\n"
                           << Describe(want) << "got:\n"
                           << Describe(got);
      ++it;
    }
  }

  Primary* const p_;
  std::mt19937_64 rng_;
  int snapshots_ = 0;
  std::vector<std::unique_ptr<StandbyT>> standbys_;
};

TEST(ReplayModelTest, StandbysAndRecoveryMatchThePrimary) {
  const int seeds = testing::StressIterations(3);
  const int steps = testing::kUnderTsan ? 300 : 1000;
  for (int seed = 1; seed <= seeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Primary p;
    ModelDriver driver(&p, static_cast<std::uint64_t>(seed));
    for (int i = 0; i < steps; ++i) {
      driver.Step();
      if (HasFatalFailure()) return;
    }
    driver.Finish();
    if (HasFatalFailure()) return;
    // Crash-free shutdown of the primary, then recovery from the newest
    // snapshot and whatever the log still holds.
    const State want = Dump(*p.registry);
    const Lsn last = p.log->durable_lsn();
    p.registry.reset();
    p.log.reset();
    auto recovered = Recover<Blob>(p.StandbyFrom(p.snapshot));
    ASSERT_TRUE(recovered.ok()) << recovered.status().ToString();
    EXPECT_EQ(recovered.value()->applied_lsn(), last);
    EXPECT_EQ(Dump(recovered.value()->registry()), want);
    // Promoted: it writes, continuing the LSNs.
    auto& promoted = recovered.value()->registry();
    ASSERT_TRUE(promoted.default_tenant()->directory().Create("after").ok());
    EXPECT_EQ(recovered.value()->log()->durable_lsn(), last + 1);
  }
}

// ---- concurrency: writers on the primary, a standby following -------------

TEST(ReplayConcurrencyTest, StandbyFollowsConcurrentWriters) {
  Primary p;
  auto standby = StandbyT::Open(p.StandbyFrom(""));
  ASSERT_TRUE(standby.ok()) << standby.status().ToString();
  const int threads = 4;
  const int ops = testing::StressIterations(testing::kUnderTsan ? 500 : 2000);
  std::atomic<bool> done{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < threads; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 7);
      Dir& dir = p.registry->default_tenant()->directory();
      for (int i = 0; i < ops; ++i) {
        // Keys shared between threads: per-key order is what replay needs.
        const std::string key = "k" + std::to_string(rng() % 64);
        switch (rng() % 4) {
          case 0: {
            CreateOptions o;
            o.counted_bytes = rng() % 50;
            dir.Create(key, o, Blob{std::to_string(rng())})
                .status()
                .IgnoreError();
            break;
          }
          case 1: {
            EraseOptions o;
            o.force = true;
            dir.Erase(key, o).IgnoreError();
            break;
          }
          case 2: {  // a replica added, lost or replaced (Q4)
            auto pinned = dir.Pin(key);
            if (!pinned.ok()) break;
            dir.AdjustCharge(key, pinned->token(), {rng() % 30, rng() % 30})
                .IgnoreError();
            break;
          }
          default: {
            auto pinned = dir.Pin(key);
            if (!pinned.ok()) break;
            UpsertOptions o;
            o.counted_bytes = rng() % 50;
            if (dir.BeginUpsert(key, pinned->token(), o).ok()) {
              dir.CommitUpsertWithPayload(key, pinned->token(),
                                          Blob{std::to_string(rng())})
                  .IgnoreError();
            }
          }
        }
      }
    });
  }
  std::thread follower([&] {
    while (!done.load(std::memory_order_acquire)) {
      ASSERT_TRUE(standby.value()->Poll().ok());
      std::this_thread::yield();
    }
  });
  // Snapshots while the writers run: each reflects its position and, for
  // some keys, later records, which replay must absorb.
  std::vector<std::string> snapshots;
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    snapshots.push_back(p.scratch.File("snap" + std::to_string(i)));
    SnapshotWriteOptions o;
    o.sync = false;
    ASSERT_TRUE(
        WriteSnapshotAt(*p.registry, *p.log, snapshots.back(), EncodeBlob, o)
            .ok());
  }
  for (auto& w : writers) w.join();
  done.store(true, std::memory_order_release);
  follower.join();
  ASSERT_TRUE(standby.value()->Poll().ok());
  EXPECT_EQ(standby.value()->applied_lsn(), p.log->durable_lsn());
  const State want = Dump(*p.registry);
  EXPECT_EQ(Dump(standby.value()->registry()), want);
  for (const std::string& path : snapshots) {
    auto from_snapshot = StandbyT::Open(p.StandbyFrom(path));
    ASSERT_TRUE(from_snapshot.ok()) << from_snapshot.status().ToString();
    ASSERT_TRUE(from_snapshot.value()->Poll().ok());
    EXPECT_EQ(Dump(from_snapshot.value()->registry()), want)
        << "from " << path << " at LSN "
        << from_snapshot.value()->snapshot_lsn();
  }
}

// ---- promotion
// ---------------------------------------------------------------

TEST(StandbyTest, RefusesWritesUntilPromotedAndThenContinuesTheLsns) {
  Primary p;
  ASSERT_TRUE(p.registry->default_tenant()->directory().Create("a").ok());
  auto standby = StandbyT::Open(p.StandbyFrom(""));
  ASSERT_TRUE(standby.ok()) << standby.status().ToString();
  ASSERT_TRUE(standby.value()->Poll().ok());
  Dir& replica = standby.value()->registry().default_tenant()->directory();
  EXPECT_EQ(replica.Create("b").status().code(),
            StatusCode::kFailedPrecondition);
  // The primary still holds the log: promotion is refused, nothing moves.
  auto refused = standby.value()->Promote();
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition)
      << refused.status().ToString();
  ASSERT_TRUE(p.registry->default_tenant()->directory().Create("c").ok());
  const Lsn last = p.log->durable_lsn();
  p.registry.reset();
  p.log.reset();
  auto promoted = standby.value()->Promote();
  ASSERT_TRUE(promoted.ok()) << promoted.status().ToString();
  EXPECT_EQ(standby.value()->applied_lsn(), last);  // "c" applied on the way
  ASSERT_TRUE(replica.Create("b").ok());
  EXPECT_EQ(promoted.value()->durable_lsn(), last + 1);
  EXPECT_EQ(replica.object_count(), 3u);
  EXPECT_EQ(standby.value()->Poll().status().code(),
            StatusCode::kFailedPrecondition);
}

// ---- damaged logs
// ------------------------------------------------------------

TEST(StandbyTest, AMissingMiddleSegmentIsDataLossAndNothingPastItApplies) {
  Primary p;
  Dir& dir = p.registry->default_tenant()->directory();
  for (int i = 0; i < 400; ++i) {
    ASSERT_TRUE(dir.Create("key" + std::to_string(i)).ok());
  }
  p.registry.reset();
  p.log.reset();
  std::vector<std::string> segments;
  for (const auto& e : std::filesystem::directory_iterator(p.log_dir)) {
    if (e.path().extension() == ".log") segments.push_back(e.path().string());
  }
  std::sort(segments.begin(), segments.end());
  ASSERT_GE(segments.size(), 3u);
  std::filesystem::remove(segments[1]);
  auto standby = StandbyT::Open(p.StandbyFrom(""));
  ASSERT_TRUE(standby.ok()) << standby.status().ToString();
  const Result<std::size_t> polled = standby.value()->Poll();
  EXPECT_EQ(polled.status().code(), StatusCode::kDataLoss)
      << polled.status().ToString();
  const Lsn applied = standby.value()->applied_lsn();
  EXPECT_GT(applied, 0u);
  EXPECT_LT(applied, 400u);
  EXPECT_EQ(
      standby.value()->registry().default_tenant()->directory().object_count(),
      applied);
}

}  // namespace
}  // namespace cairn
