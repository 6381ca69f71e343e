// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Snapshot and restore (H2): round trips of a directory and of a registry,
// group lease = max member lease, non-active objects dropped, presizing,
// quota on restore, corrupt files, and a snapshot taken while writers churn
// (SnapshotStressTest) restored and checked against what the writers did.

#include "cairn/ha/snapshot.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/directory/group_directory.h"
#include "cairn/epoch/epoch_domain.h"
#include "cairn/tenant/tenant_registry.h"
#include "directory/directory_testing.h"
#include "testing/counting_env.h"
#include "testing/scratch_dir.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::Key;
using testing::TestPayload;
using Dir = GroupDirectory<TestPayload>;
using Handle = ObjectHandle<TestPayload>;
using View = ObjectView<TestPayload>;
using Access = ObjectAccess<TestPayload>;
using Registry = TenantRegistry<TestPayload>;
using std::chrono::nanoseconds;
using std::chrono::seconds;

using testing::ReadWholeFile;
using testing::ScratchDir;
using testing::Sized;
using testing::WriteWholeFile;

Status Encode(const TestPayload& p, std::string* out) {
  out->append(reinterpret_cast<const char*>(&p.value), sizeof(p.value));
  out->append(reinterpret_cast<const char*>(&p.stamp), sizeof(p.stamp));
  out->append(reinterpret_cast<const char*>(&p.last_writer),
              sizeof(p.last_writer));
  return Status::Ok();
}
Result<TestPayload> Decode(std::string_view bytes) {
  TestPayload p;
  if (bytes.size() != 24) return InvalidArgumentError("payload is 24 bytes");
  std::memcpy(&p.value, bytes.data(), 8);
  std::memcpy(&p.stamp, bytes.data() + 8, 8);
  std::memcpy(&p.last_writer, bytes.data() + 16, 8);
  return p;
}

TestPayload Payload(std::int64_t value, std::uint64_t stamp) {
  TestPayload p;
  p.value = value;
  p.stamp = stamp;
  return p;
}

// Everything a test compares about one restored object.
struct Seen {
  std::string group;  // empty: a singleton
  std::uint64_t size = 0;
  std::uint64_t counted = 0;
  std::uint64_t retained = 0;
  std::int64_t lease = 0;
  std::int64_t soft_pin = 0;
  bool hard_pinned = false;
  TestPayload payload;
};

// Reads every object of `dir` (shared lock, no lease: WithHandle grants
// read_lease_ttl, which these directories leave at 0).
std::map<std::string, Seen> Contents(const Dir& dir) {
  std::map<std::string, Seen> out;
  EXPECT_TRUE(dir.VisitHandles([&](std::span<const Handle> handles) {
                   for (const Handle& h : handles) {
                     Seen s;
                     if (h->group() != nullptr) {
                       s.group = std::string(h->group()->name());
                     }
                     std::string key;
                     Status st = dir.WithHandle(h, [&](const View& v) {
                       key = std::string(v.key());
                       s.size = v.size_bytes();
                       s.counted = v.counted_bytes();
                       s.retained = v.retained_bytes();
                       s.lease = v.lease_deadline_nanos();
                       s.soft_pin = v.soft_pin_deadline_nanos();
                       s.hard_pinned = v.hard_pinned();
                       s.payload = v.payload();
                     });
                     if (st.ok()) out.emplace(key, s);
                   }
                 })
                  .ok());
  return out;
}

DirectoryOptions WithClock(const Clock* clock, QuotaAccount* quota = nullptr) {
  DirectoryOptions o;
  o.clock = clock;
  o.quota = quota;
  return o;
}

TEST(SnapshotTest, H2RoundTripRestoresObjectsGroupsSizesPayloadsAndPins) {
  ScratchDir scratch;
  ManualClock clock;
  QuotaAccount quota(1 << 20);
  DirectoryOptions options = WithClock(&clock, &quota);
  options.read_lease_ttl = seconds(5);  // a snapshot must not grant it
  Dir dir(options);

  CreateOptions a = Sized(10);
  a.retained_bytes = 7;
  a.lease_ttl = seconds(30);
  a.soft_pin_ttl = seconds(40);
  ASSERT_TRUE(dir.Create("a", a, Payload(1, 10)).ok());
  CreateOptions b = Sized(20);
  b.hard_pin = true;
  ASSERT_TRUE(dir.Create("b", b, Payload(2, 20)).ok());
  CreateOptions m = Sized(5, "g1");
  m.lease_ttl = seconds(12);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(dir.Create(Key("g1/", i), m, Payload(100 + i, 5)).ok());
  }
  ASSERT_TRUE(dir.Create("h/0", Sized(3, "g2"), Payload(200, 3)).ok());
  clock.Advance(seconds(10));  // a has 20 s of lease left, g1 2 s

  SnapshotStats written;
  ASSERT_TRUE(
      WriteSnapshot(dir, scratch.File("snap"), Encode, {}, &written).ok());
  EXPECT_EQ(written.tenants, 1u);
  EXPECT_EQ(written.groups, 2u);
  EXPECT_EQ(written.objects, 6u);
  EXPECT_FALSE(std::filesystem::exists(scratch.File("snap.tmp")));
  // Not a read: no lease was granted to anything.
  EXPECT_TRUE(
      dir.WithObjectExclusive(
             "b", [](Access& x) { EXPECT_EQ(x.lease_deadline_nanos(), 0); })
          .ok());

  clock.Advance(seconds(100));  // time between snapshot and restore
  QuotaAccount restored_quota;
  SnapshotStats restored;
  auto copy = RestoreSnapshot<TestPayload>(scratch.File("snap"), Decode,
                                           WithClock(&clock, &restored_quota),
                                           &restored);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(restored.objects, 6u);
  EXPECT_EQ(restored.groups, 2u);
  EXPECT_EQ(restored.skipped_units, 0u);
  EXPECT_EQ(restored.file_bytes, written.file_bytes);
  const Dir& r = *copy.value();
  EXPECT_EQ(r.object_count(), 6u);
  EXPECT_EQ(r.group_count(), 2u);
  EXPECT_EQ(restored_quota.charged(), 10u + 20 + 15 + 3);

  const std::int64_t now = clock.NowNanos();
  const auto got = Contents(r);
  ASSERT_EQ(got.size(), 6u);
  const Seen& sa = got.at("a");
  EXPECT_EQ(sa.group, "");
  EXPECT_EQ(sa.size, 10u);
  EXPECT_EQ(sa.counted, 10u);
  EXPECT_EQ(sa.retained, 7u);
  // Leases restart from the restore's clock with the time they had left.
  EXPECT_EQ(sa.lease, now + nanoseconds(seconds(20)).count());
  EXPECT_EQ(sa.soft_pin, now + nanoseconds(seconds(30)).count());
  EXPECT_FALSE(sa.hard_pinned);
  EXPECT_EQ(sa.payload.value, 1);
  const Seen& sb = got.at("b");
  EXPECT_TRUE(sb.hard_pinned);
  EXPECT_EQ(sb.lease, 0);
  EXPECT_EQ(sb.soft_pin, 0);
  EXPECT_EQ(sb.payload.value, 2);
  EXPECT_EQ(sb.payload.stamp, 20u);
  for (int i = 0; i < 3; ++i) {
    const Seen& s = got.at(Key("g1/", i));
    EXPECT_EQ(s.group, "g1");
    EXPECT_EQ(s.size, 5u);
    EXPECT_EQ(s.lease, now + nanoseconds(seconds(2)).count());
    EXPECT_EQ(s.payload.value, 100 + i);
  }
  EXPECT_EQ(got.at("h/0").group, "g2");
  // The members share one group again.
  auto g1 = r.FindGroup("g1");
  ASSERT_TRUE(g1.ok());
  EXPECT_EQ(g1.value()->member_count(), 3u);
}

TEST(SnapshotTest, H2GroupLeaseIsTheLargestMemberLease) {
  // Members of one group may store different leases (a read extends the
  // group lease between two member reads); the restored group lease is the
  // largest, whatever the order of the members in the file.
  ScratchDir scratch;
  const std::string path = scratch.File("snap");
  {
    auto w = directory_internal::SnapshotFileWriter::Create(path, {});
    ASSERT_TRUE(w.ok());
    directory_internal::SnapshotTenant t;
    t.name = "default";
    ASSERT_TRUE((*w)->BeginTenant(t).ok());
    ASSERT_TRUE((*w)->AddGroup("g", 3).ok());
    const std::int64_t leases[] = {5, 20, 10};
    for (int i = 0; i < 3; ++i) {
      std::string key = Key("m", i);
      std::string payload;
      ASSERT_TRUE(Encode(Payload(i, 1), &payload).ok());
      directory_internal::SnapshotObject o;
      o.key = key;
      o.payload = payload;
      o.id = static_cast<ObjectId>(i + 1);
      o.size_bytes = 1;
      o.lease_ttl_nanos = nanoseconds(seconds(leases[i])).count();
      ASSERT_TRUE((*w)->AddObject(o).ok());
    }
    ASSERT_TRUE((*w)->EndTenant().ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  ManualClock clock;
  auto copy = RestoreSnapshot<TestPayload>(path, Decode, WithClock(&clock));
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  auto g = copy.value()->FindGroup("g");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g.value()->lease_deadline_nanos(),
            clock.NowNanos() + nanoseconds(seconds(20)).count());
}

TEST(SnapshotTest, H2ObjectsNotActiveAreDroppedAndStagedUpsertsAreNot) {
  ScratchDir scratch;
  ManualClock clock;
  QuotaAccount quota;
  Dir dir(WithClock(&clock, &quota));
  // A pending put, a pending member of a group with an active member, and
  // an active object with a staged (uncommitted) upsert.
  ASSERT_TRUE(dir.CreatePending("pending", Sized(4), Payload(9, 4)).ok());
  ASSERT_TRUE(dir.Create("g/active", Sized(2, "g"), Payload(1, 2)).ok());
  ASSERT_TRUE(
      dir.CreatePending("g/pending", Sized(3, "g"), Payload(2, 3)).ok());
  auto up = dir.Create("up", Sized(8), Payload(3, 8));
  ASSERT_TRUE(up.ok());
  ASSERT_TRUE(dir.BeginUpsert("up", up->token(), {50, 50}).ok());
  EXPECT_EQ(quota.charged(), 4u + 2 + 3 + 8 + 50);

  ASSERT_TRUE(WriteSnapshot(dir, scratch.File("snap"), Encode).ok());
  QuotaAccount restored_quota;
  auto copy = RestoreSnapshot<TestPayload>(scratch.File("snap"), Decode,
                                           WithClock(&clock, &restored_quota));
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  const auto got = Contents(*copy.value());
  EXPECT_EQ(got.count("pending"), 0u);
  EXPECT_EQ(got.count("g/pending"), 0u);
  ASSERT_EQ(got.count("g/active"), 1u);
  ASSERT_EQ(got.count("up"), 1u);
  // The committed state, not the staged one.
  EXPECT_EQ(got.at("up").size, 8u);
  EXPECT_EQ(got.at("up").counted, 8u);
  EXPECT_EQ(got.at("up").payload.value, 3);
  EXPECT_EQ(copy.value()->object_count(), 2u);
  EXPECT_EQ(restored_quota.charged(), 2u + 8);
}

TEST(SnapshotTest, H2RestorePresizesTheRouteFromTheStoredCount) {
  ScratchDir scratch;
  ManualClock clock;
  Dir dir(WithClock(&clock));
  constexpr int kObjects = 3000;
  for (int i = 0; i < kObjects; ++i) {
    ASSERT_TRUE(dir.Create(Key("k", i), Sized(1), Payload(i, 1)).ok());
  }
  ASSERT_TRUE(WriteSnapshot(dir, scratch.File("snap"), Encode).ok());
  DirectoryOptions options = WithClock(&clock);
  options.route.bucket_count = 64;
  auto copy =
      RestoreSnapshot<TestPayload>(scratch.File("snap"), Decode, options);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  const DirectoryDiagnostics d = copy.value()->Diagnostics();
  EXPECT_EQ(d.objects, static_cast<std::size_t>(kObjects));
  EXPECT_EQ(d.route.entries, static_cast<std::size_t>(kObjects));
  // bit_ceil(3000): the route started there and never had to resize.
  EXPECT_EQ(d.route.bucket_count, 4096u);
  EXPECT_EQ(d.route.resize_target_bucket_count, 0u);
  EXPECT_EQ(d.route.resizes, 0u);
}

TEST(SnapshotTest, H2RegistryRoundTripKeepsTenantsLimitsAndCharges) {
  ScratchDir scratch;
  ManualClock clock;
  RegistryOptions options;
  options.default_tenant_options.directory.clock = &clock;
  Registry registry(options);
  auto factory = [&](std::uint64_t limit) {
    return [&clock, limit](std::string_view) -> Result<TenantOptions> {
      TenantOptions t;
      t.quota_limit_bytes = limit;
      t.directory.clock = &clock;
      return t;
    };
  };
  auto red = registry.GetOrCreate("red", factory(1000));
  auto blue = registry.GetOrCreate("blue", factory(50));
  ASSERT_TRUE(red.ok() && blue.ok());
  Dir& def = registry.default_tenant()->directory();
  ASSERT_TRUE(def.Create("d", Sized(1), Payload(1, 1)).ok());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(
        (*red)
            ->directory()
            .Create(Key("r", i), Sized(10, i < 4 ? "rg" : ""), Payload(i, 10))
            .ok());
  }
  ASSERT_TRUE((*blue)->directory().Create("x", Sized(40), Payload(7, 40)).ok());
  // Blue ends over its limit: restored over it, not refused.
  (*blue)->quota().set_limit(30);
  // An empty tenant is a tenant too.
  ASSERT_TRUE(registry.GetOrCreate("empty", factory(5)).ok());

  SnapshotStats written;
  ASSERT_TRUE(
      WriteSnapshot(registry, scratch.File("snap"), Encode, {}, &written).ok());
  EXPECT_EQ(written.tenants, 4u);
  EXPECT_EQ(written.objects, 12u);

  RegistryOptions fresh;
  fresh.default_tenant_options.directory.clock = &clock;
  SnapshotStats restored;
  auto copy = RestoreRegistrySnapshot<TestPayload>(scratch.File("snap"), Decode,
                                                   fresh, &restored);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(restored.tenants, 4u);
  EXPECT_EQ(restored.objects, 12u);
  EXPECT_EQ(restored.groups, 1u);
  Registry& r = *copy.value();
  EXPECT_EQ(r.size(), 4u);
  auto r_red = r.Find("red");
  auto r_blue = r.Find("blue");
  auto r_empty = r.Find("empty");
  ASSERT_TRUE(r_red.ok() && r_blue.ok() && r_empty.ok());
  EXPECT_EQ((*r_red)->quota().limit(), 1000u);
  EXPECT_EQ((*r_red)->quota().charged(), 100u);
  EXPECT_EQ((*r_red)->directory().object_count(), 10u);
  EXPECT_EQ((*r_red)->directory().group_count(), 1u);
  EXPECT_EQ((*r_blue)->quota().limit(), 30u);
  EXPECT_EQ((*r_blue)->quota().charged(), 40u);
  EXPECT_EQ((*r_blue)->quota().deficit(), 10u);
  EXPECT_EQ((*r_empty)->directory().object_count(), 0u);
  EXPECT_EQ((*r_empty)->quota().limit(), 5u);
  EXPECT_EQ(r.default_tenant()->directory().object_count(), 1u);
  EXPECT_EQ(r.default_tenant()->quota().charged(), 1u);
  const auto red_objects = Contents((*r_red)->directory());
  EXPECT_EQ(red_objects.at("r2").group, "rg");
  EXPECT_EQ(red_objects.at("r7").group, "");
  EXPECT_EQ(red_objects.at("r7").payload.value, 7);
}

// ---- identity: ids, versions, instances, counters, log position (issue 23)

// key -> (id, version) of every object of `dir`.
std::map<std::string, std::pair<ObjectId, std::uint64_t>> Identities(
    const Dir& dir) {
  std::map<std::string, std::pair<ObjectId, std::uint64_t>> out;
  EXPECT_TRUE(dir.VisitHandles([&](std::span<const Handle> handles) {
                   for (const Handle& h : handles) {
                     dir.WithHandle(
                            h,
                            [&](const View& v) {
                              out[std::string(v.key())] = {v.id(), v.version()};
                            })
                         .IgnoreError();
                   }
                 })
                  .ok());
  return out;
}

// Moves `key`'s version on (a lease that moves bumps it).
void BumpVersion(Dir& dir, std::string_view key, int times) {
  for (int i = 1; i <= times; ++i) {
    ASSERT_TRUE(
        dir.WithObject(key,
                       [&](const View& v) { v.GrantLease(seconds(100 * i)); })
            .ok());
  }
}

TEST(SnapshotTest, H2IdsAndVersionsSurviveARoundTripAndTheCounterResumes) {
  ScratchDir scratch;
  ManualClock clock;
  Dir dir(WithClock(&clock));
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(dir.Create(Key("s", i), Sized(1), Payload(i, 1)).ok());
    ASSERT_TRUE(dir.Create(Key("m", i), Sized(1, "g"), Payload(i, 1)).ok());
  }
  BumpVersion(dir, "s2", 3);
  BumpVersion(dir, "m4", 2);  // a member's lease is its group's: one bump
  // The largest id belongs to an object erased before the snapshot: only
  // the stored next id keeps a restored directory from handing it out again.
  auto last = dir.Create("gone", Sized(1), Payload(0, 0));
  ASSERT_TRUE(last.ok());
  const ObjectId gone_id = (*last)->id();
  ASSERT_TRUE(dir.Erase("gone").ok());
  const auto before = Identities(dir);
  ASSERT_EQ(before.size(), 12u);
  ASSERT_GT(before.at("s2").second, 1u);
  ASSERT_GT(before.at("m4").second, 1u);
  for (const auto& [key, identity] : before) ASSERT_LT(identity.first, gone_id);

  ASSERT_TRUE(WriteSnapshot(dir, scratch.File("snap"), Encode).ok());
  auto copy = RestoreSnapshot<TestPayload>(scratch.File("snap"), Decode,
                                           WithClock(&clock));
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  Dir& restored = *copy.value();
  EXPECT_EQ(Identities(restored), before);
  EXPECT_EQ(DirectoryHooks::NextObjectIdPeek(restored),
            DirectoryHooks::NextObjectIdPeek(dir));
  auto fresh = restored.Create("new", Sized(1), Payload(0, 0));
  ASSERT_TRUE(fresh.ok());
  EXPECT_GT((*fresh)->id(), gone_id);
  // An old token reaches the restored instance (same tenant instance, same
  // id): a replayed log record addresses it.
  auto old = dir.Pin("s2");
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(
      restored
          .WithToken("s2", old->token(),
                     [](const View& v) { EXPECT_EQ(v.payload().value, 2); })
          .ok());
}

TEST(SnapshotTest, H2LogPositionRoundTrips) {
  ScratchDir scratch;
  ManualClock clock;
  Dir dir(WithClock(&clock));
  ASSERT_TRUE(dir.Create("k", Sized(1), Payload(1, 1)).ok());
  SnapshotWriteOptions options;
  options.log_position = 0x1234'5678'9abcull;
  SnapshotStats written;
  ASSERT_TRUE(
      WriteSnapshot(dir, scratch.File("snap"), Encode, options, &written).ok());
  EXPECT_EQ(written.log_position, options.log_position);
  SnapshotStats restored;
  ASSERT_TRUE(RestoreSnapshot<TestPayload>(scratch.File("snap"), Decode,
                                           WithClock(&clock), &restored)
                  .ok());
  EXPECT_EQ(restored.log_position, options.log_position);
  // A registry's too; and no position is 0.
  Registry registry;
  ASSERT_TRUE(
      WriteSnapshot(registry, scratch.File("reg"), Encode, options).ok());
  ASSERT_TRUE(RestoreRegistrySnapshot<TestPayload>(scratch.File("reg"), Decode,
                                                   {}, &restored)
                  .ok());
  EXPECT_EQ(restored.log_position, options.log_position);
  ASSERT_TRUE(WriteSnapshot(dir, scratch.File("none"), Encode).ok());
  ASSERT_TRUE(RestoreSnapshot<TestPayload>(scratch.File("none"), Decode,
                                           WithClock(&clock), &restored)
                  .ok());
  EXPECT_EQ(restored.log_position, 0u);
}

TEST(SnapshotTest, H2RegistryRestoreKeepsInstancesAndIdsAndResumesCounters) {
  ScratchDir scratch;
  ManualClock clock;
  RegistryOptions options;
  options.default_tenant_options.directory.clock = &clock;
  Registry registry(options);
  auto factory = [&clock](std::string_view) -> Result<TenantOptions> {
    TenantOptions t;
    t.directory.clock = &clock;
    return t;
  };
  auto red = registry.GetOrCreate("red", factory);
  auto blue = registry.GetOrCreate("blue", factory);
  ASSERT_TRUE(red.ok() && blue.ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*red)->directory().Create(Key("r", i), Sized(1)).ok());
    ASSERT_TRUE((*blue)->directory().Create(Key("b", i), Sized(1, "bg")).ok());
  }
  ASSERT_TRUE(
      registry.default_tenant()->directory().Create("d", Sized(1)).ok());
  BumpVersion((*red)->directory(), "r3", 2);
  // The largest instance belongs to a tenant removed before the snapshot.
  auto gone = registry.GetOrCreate("gone", factory);
  ASSERT_TRUE(gone.ok());
  const TenantInstanceId gone_instance = (*gone)->instance_id();
  ASSERT_TRUE(registry.Remove("gone", gone_instance).ok());

  ASSERT_TRUE(WriteSnapshot(registry, scratch.File("snap"), Encode).ok());
  RegistryOptions fresh;
  fresh.default_tenant_options.directory.clock = &clock;
  auto copy =
      RestoreRegistrySnapshot<TestPayload>(scratch.File("snap"), Decode, fresh);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  Registry& r = *copy.value();
  ASSERT_EQ(r.size(), 3u);
  for (const auto& original : registry.Tenants()) {
    auto twin = r.Find(original->name());
    ASSERT_TRUE(twin.ok()) << original->name();
    EXPECT_EQ((*twin)->instance_id(), original->instance_id())
        << original->name();
    EXPECT_EQ((*twin)->directory().tenant_instance(), original->instance_id());
    EXPECT_EQ(Identities((*twin)->directory()),
              Identities(original->directory()))
        << original->name();
    EXPECT_EQ(DirectoryHooks::NextObjectIdPeek((*twin)->directory()),
              DirectoryHooks::NextObjectIdPeek(original->directory()));
  }
  EXPECT_EQ(r.default_tenant()->instance_id(),
            registry.default_tenant()->instance_id());
  EXPECT_EQ(RegistryHooks::NextInstancePeek(r),
            RegistryHooks::NextInstancePeek(registry));
  auto later = r.GetOrCreate("later", factory);
  ASSERT_TRUE(later.ok());
  EXPECT_GT((*later)->instance_id(), gone_instance);
}

TEST(SnapshotTest, H2RegistryRestoreWithAnotherDefaultNameKeepsEveryInstance) {
  // The file's "default" section is an ordinary tenant of a registry whose
  // default tenant is named "main": it keeps its stored instance, and the
  // new default tenant gets a fresh one above every stored instance.
  ScratchDir scratch;
  Registry registry;
  auto red = registry.GetOrCreate("red", [](std::string_view) {
    return Result<TenantOptions>(TenantOptions{});
  });
  ASSERT_TRUE(red.ok());
  ASSERT_TRUE((*red)->directory().Create("k", Sized(1)).ok());
  ASSERT_TRUE(WriteSnapshot(registry, scratch.File("snap"), Encode).ok());
  RegistryOptions fresh;
  fresh.default_tenant = "main";
  auto copy =
      RestoreRegistrySnapshot<TestPayload>(scratch.File("snap"), Decode, fresh);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  Registry& r = *copy.value();
  auto old_default = r.Find("default");
  auto r_red = r.Find("red");
  ASSERT_TRUE(old_default.ok() && r_red.ok());
  EXPECT_EQ((*old_default)->instance_id(),
            registry.default_tenant()->instance_id());
  EXPECT_EQ((*r_red)->instance_id(), (*red)->instance_id());
  EXPECT_EQ(r.default_tenant()->name(), "main");
  EXPECT_GE(r.default_tenant()->instance_id(),
            RegistryHooks::NextInstancePeek(registry));
  EXPECT_GT(RegistryHooks::NextInstancePeek(r),
            r.default_tenant()->instance_id());
  // A host-chosen default instance that a stored tenant holds is refused.
  fresh.default_tenant_instance = (*red)->instance_id();
  EXPECT_EQ(
      RestoreRegistrySnapshot<TestPayload>(scratch.File("snap"), Decode, fresh)
          .status()
          .code(),
      StatusCode::kInvalidArgument);
}

// ---- corrupt, truncated and refused files --------------------------------

// A small snapshot with singletons, a group and payloads.
std::string SmallSnapshot(const ScratchDir& scratch, ManualClock* clock) {
  Dir dir(WithClock(clock));
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(dir.Create(Key("s", i), Sized(i + 1), Payload(i, i + 1)).ok());
    EXPECT_TRUE(
        dir.Create(Key("m", i), Sized(2, "grp"), Payload(10 + i, 2)).ok());
  }
  const std::string path = scratch.File("good");
  EXPECT_TRUE(WriteSnapshot(dir, path, Encode).ok());
  return ReadWholeFile(path);
}

// Restores `bytes` into a directory charged to `quota`; the status.
Status TryRestore(const ScratchDir& scratch, const std::string& bytes,
                  ManualClock* clock, QuotaAccount* quota) {
  const std::string path = scratch.File("bad");
  WriteWholeFile(path, bytes);
  auto copy =
      RestoreSnapshot<TestPayload>(path, Decode, WithClock(clock, quota));
  if (copy.ok()) return Status::Ok();
  return copy.status();
}

TEST(SnapshotTest, H2CorruptOrTruncatedFileIsDataLossAndLoadsNothing) {
  ScratchDir scratch;
  ManualClock clock;
  const std::string good = SmallSnapshot(scratch, &clock);
  QuotaAccount quota;
  ASSERT_TRUE(TryRestore(scratch, good, &clock, &quota).ok());
  ASSERT_EQ(quota.charged(), 1u + 2 + 3 + 4 + 8);
  QuotaAccount untouched;
  auto expect_data_loss = [&](const std::string& bytes,
                              const std::string& what) {
    const Status s = TryRestore(scratch, bytes, &clock, &untouched);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << what << ": " << s.ToString();
    EXPECT_EQ(untouched.charged(), 0u) << what;
  };
  std::string bad = good;
  bad[0] ^= 1;
  expect_data_loss(bad, "wrong magic");
  expect_data_loss("", "empty file");
  expect_data_loss(good + "x", "one trailing byte");
  expect_data_loss(good + good, "a second copy appended");
  // Every single-byte change anywhere is caught: header, frames, bodies,
  // payloads, trailer.
  for (std::size_t i = 0; i < good.size(); ++i) {
    bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x20);
    expect_data_loss(bad, "flipped byte " + std::to_string(i));
  }
  // Cut at every length.
  for (std::size_t n = 0; n < good.size(); ++n) {
    expect_data_loss(good.substr(0, n), "truncated to " + std::to_string(n));
  }
}

// Bodies of the records, as the writer lays them out.
template <typename T>
void Append(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}
std::string TenantBody(std::string_view name, std::uint64_t instance = 1,
                       std::uint64_t next_object_id = 1) {
  std::string b;
  Append<std::uint64_t>(b, instance);
  Append<std::uint64_t>(b, QuotaAccount::kUnlimited);
  Append<std::uint64_t>(b, next_object_id);
  Append<std::uint32_t>(b, static_cast<std::uint32_t>(name.size()));
  b.append(name);
  return b;
}
std::string GroupBody(std::string_view name, std::uint32_t members) {
  std::string b;
  Append<std::uint32_t>(b, members);
  Append<std::uint32_t>(b, static_cast<std::uint32_t>(name.size()));
  b.append(name);
  return b;
}
// Ids default to the key's first byte: distinct for the tests' one-letter
// keys.
constexpr std::uint64_t kIdFromKey = ~std::uint64_t{0};
std::string ObjectBody(std::string_view key, std::uint32_t key_bytes,
                       std::int64_t lease_ttl = 0,
                       std::uint64_t counted_bytes = 0,
                       std::uint64_t id = kIdFromKey,
                       std::uint64_t version = 1) {
  std::string b;
  if (id == kIdFromKey) {
    id = key.empty() ? 1 : static_cast<unsigned char>(key[0]);
  }
  Append<std::uint64_t>(b, id);
  Append<std::uint64_t>(b, version);
  Append<std::uint64_t>(b, counted_bytes);  // size
  Append<std::uint64_t>(b, counted_bytes);
  Append<std::uint64_t>(b, 0);  // retained
  Append<std::int64_t>(b, lease_ttl);
  Append<std::int64_t>(b, lease_ttl);  // soft pin
  Append<std::uint32_t>(b, 0);
  Append<std::uint32_t>(b, key_bytes);
  Append<std::uint32_t>(b, 0);
  b.append(key);
  return b;
}
std::string EndBody(std::uint64_t groups, std::uint64_t objects) {
  std::string b;
  Append<std::uint64_t>(b, groups);
  Append<std::uint64_t>(b, objects);
  return b;
}

TEST(SnapshotTest, H2WellChecksummedFileWithBadStructureIsDataLoss) {
  // Checksums pass; the grammar, a length or a count does not.
  using T = directory_internal::SnapshotRecordType;
  using Records = std::vector<std::pair<T, std::string>>;
  ScratchDir scratch;
  ManualClock clock;
  auto restore = [&](const Records& records) {
    const auto bytes = directory_internal::FrameSnapshotForTest(records);
    WriteWholeFile(scratch.File("framed"),
                   std::string(bytes.begin(), bytes.end()));
    auto copy = RestoreSnapshot<EmptyPayload>(scratch.File("framed"), nullptr,
                                              WithClock(&clock));
    return copy.ok() ? Status::Ok() : copy.status();
  };
  const Records good = {{T::kTenant, TenantBody("t")},
                        {T::kGroup, GroupBody("g", 1)},
                        {T::kObject, ObjectBody("a", 1)},
                        {T::kObject, ObjectBody("b", 1)},
                        {T::kTenantEnd, EndBody(1, 2)}};
  ASSERT_TRUE(restore(good).ok());
  const std::vector<std::pair<std::string, Records>> bad = {
      {"object outside a tenant",
       {{T::kObject, ObjectBody("a", 1)},
        {T::kTenant, TenantBody("t")},
        {T::kTenantEnd, EndBody(0, 0)}}},
      {"tenant never closed", {{T::kTenant, TenantBody("t")}}},
      {"tenant inside a tenant",
       {{T::kTenant, TenantBody("t")}, {T::kTenant, TenantBody("u")}}},
      {"group short of members",
       {{T::kTenant, TenantBody("t")},
        {T::kGroup, GroupBody("g", 2)},
        {T::kObject, ObjectBody("a", 1)},
        {T::kTenantEnd, EndBody(1, 1)}}},
      {"group of no members",
       {{T::kTenant, TenantBody("t")},
        {T::kGroup, GroupBody("g", 0)},
        {T::kTenantEnd, EndBody(1, 0)}}},
      {"tenant end miscounts",
       {{T::kTenant, TenantBody("t")},
        {T::kObject, ObjectBody("a", 1)},
        {T::kTenantEnd, EndBody(0, 2)}}},
      {"key length past its record",
       {{T::kTenant, TenantBody("t")},
        {T::kObject, ObjectBody("a", 9)},
        {T::kTenantEnd, EndBody(0, 1)}}},
      {"empty key",
       {{T::kTenant, TenantBody("t")},
        {T::kObject, ObjectBody("", 0)},
        {T::kTenantEnd, EndBody(0, 1)}}},
      {"unknown record type",
       {{T::kTenant, TenantBody("t")},
        {static_cast<T>(9), "x"},
        {T::kTenantEnd, EndBody(0, 0)}}},
      {"counted bytes past what an account can hold",
       {{T::kTenant, TenantBody("t")},
        {T::kObject, ObjectBody("a", 1, 0, QuotaAccount::kUnlimited / 2 + 1)},
        {T::kObject, ObjectBody("b", 1, 0, QuotaAccount::kUnlimited / 2 + 1)},
        {T::kTenantEnd, EndBody(0, 2)}}},
      {"tenant named twice",
       {{T::kTenant, TenantBody("t")},
        {T::kTenantEnd, EndBody(0, 0)},
        {T::kTenant, TenantBody("t")},
        {T::kTenantEnd, EndBody(0, 0)}}},
      {"tenant instance stored twice",
       {{T::kTenant, TenantBody("t", 3)},
        {T::kTenantEnd, EndBody(0, 0)},
        {T::kTenant, TenantBody("u", 3)},
        {T::kTenantEnd, EndBody(0, 0)}}},
      {"tenant next object id 0",
       {{T::kTenant, TenantBody("t", 1, 0)}, {T::kTenantEnd, EndBody(0, 0)}}},
      {"object id 0",
       {{T::kTenant, TenantBody("t")},
        {T::kObject, ObjectBody("a", 1, 0, 0, 0)},
        {T::kTenantEnd, EndBody(0, 1)}}},
      {"object version 0",
       {{T::kTenant, TenantBody("t")},
        {T::kObject, ObjectBody("a", 1, 0, 0, 5, 0)},
        {T::kTenantEnd, EndBody(0, 1)}}},
      {"one object id under two keys",
       {{T::kTenant, TenantBody("t")},
        {T::kObject, ObjectBody("a", 1, 0, 0, 5)},
        {T::kObject, ObjectBody("b", 1, 0, 0, 5)},
        {T::kTenantEnd, EndBody(0, 2)}}},
  };
  for (const auto& [what, records] : bad) {
    EXPECT_EQ(restore(records).code(), StatusCode::kDataLoss) << what;
  }
}

TEST(SnapshotTest, H2HugeStoredLeaseIsClampedInsteadOfOverflowing) {
  // A file may carry any non-negative time left; restore time + that must
  // not overflow the clock's 64 bits (UBSan would flag it).
  using T = directory_internal::SnapshotRecordType;
  const std::vector<std::pair<T, std::string>> records = {
      {T::kTenant, TenantBody("t")},
      {T::kObject,
       ObjectBody("a", 1, std::numeric_limits<std::int64_t>::max())},
      {T::kTenantEnd, EndBody(0, 1)}};
  const auto bytes = directory_internal::FrameSnapshotForTest(records);
  ScratchDir scratch;
  WriteWholeFile(scratch.File("framed"),
                 std::string(bytes.begin(), bytes.end()));
  ManualClock clock;
  auto copy = RestoreSnapshot<EmptyPayload>(scratch.File("framed"), nullptr,
                                            WithClock(&clock));
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  const std::int64_t expect =
      clock.NowNanos() + directory_internal::kMaxRestoredTtlNanos;
  EXPECT_TRUE(copy.value()
                  ->WithObjectExclusive(
                      "a",
                      [&](ObjectAccess<EmptyPayload>& a) {
                        EXPECT_EQ(a.lease_deadline_nanos(), expect);
                        EXPECT_EQ(a.soft_pin_deadline_nanos(), expect);
                      })
                  .ok());
}

TEST(SnapshotTest, H2RestoredCounterResumesAboveTheLargestStoredId) {
  // The stored next id can be below a stored id (an object created after
  // the counter was read and met by the visit): the counter resumes above
  // both. A hand-made file stores next id 1 and ids 50 (skipped: its key
  // repeats) and 30.
  using T = directory_internal::SnapshotRecordType;
  const std::vector<std::pair<T, std::string>> records = {
      {T::kTenant, TenantBody("t", 1, /*next_object_id=*/1)},
      {T::kObject, ObjectBody("a", 1, 0, 0, /*id=*/30, /*version=*/4)},
      {T::kObject, ObjectBody("a", 1, 0, 0, /*id=*/50)},
      {T::kTenantEnd, EndBody(0, 2)}};
  const auto bytes = directory_internal::FrameSnapshotForTest(records);
  ScratchDir scratch;
  WriteWholeFile(scratch.File("framed"),
                 std::string(bytes.begin(), bytes.end()));
  ManualClock clock;
  SnapshotStats stats;
  auto copy = RestoreSnapshot<EmptyPayload>(scratch.File("framed"), nullptr,
                                            WithClock(&clock), &stats);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(stats.skipped_units, 1u);
  EXPECT_TRUE(copy.value()
                  ->WithObject("a",
                               [](const ObjectView<EmptyPayload>& v) {
                                 EXPECT_EQ(v.id(), 30u);
                                 EXPECT_EQ(v.version(), 4u);
                               })
                  .ok());
  EXPECT_EQ(DirectoryHooks::NextObjectIdPeek(*copy.value()), 51u);
}

TEST(SnapshotTest, H2FileOfAnotherFormatVersionIsRefusedAndLoadsNothing) {
  ScratchDir scratch;
  ManualClock clock;
  Dir dir(WithClock(&clock));
  ASSERT_TRUE(dir.Create("k", Sized(1), Payload(1, 1)).ok());
  SnapshotWriteOptions options;
  options.format_version = kSnapshotFormatVersion + 1;
  ASSERT_TRUE(WriteSnapshot(dir, scratch.File("v2"), Encode, options).ok());
  QuotaAccount quota;
  auto copy = RestoreSnapshot<TestPayload>(scratch.File("v2"), Decode,
                                           WithClock(&clock, &quota));
  ASSERT_FALSE(copy.ok());
  EXPECT_EQ(copy.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(copy.status().message().find(
                "version " + std::to_string(kSnapshotFormatVersion + 1)),
            std::string_view::npos);
  EXPECT_EQ(quota.charged(), 0u);
}

// A version-1 file as the version-1 writer (main before issue 23) wrote it:
// one tenant "default", one object "k" with payload "abc", 3 bytes.
constexpr char kVersionOneSnapshotHex[] =
    "434149524e534e50010000004000000001000000000000000000000000000000"
    "0100000000000000030000000000000000000000000000003b8c493346114b81"
    "1b000000010000000100000000000000ffffffffffffff7f0700000064656661"
    "756c746ee56c55190273b3380000000300000003000000000000000300000000"
    "0000000000000000000000000000000000000000000000000000000000000001"
    "000000030000006b6162630ab980433862c0de10000000040000000000000000"
    "0000000100000000000000f78306c3c5a66b99434149524e454e44f300000000"
    "0000000300000000000000e7bf0e0d2e8b614c";

std::string FromHex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(
        std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

TEST(SnapshotTest, H2VersionOneFileIsRefusedWithAClearMessage) {
  ScratchDir scratch;
  const std::string v1 = FromHex(kVersionOneSnapshotHex);
  ASSERT_EQ(v1.size(), 243u);
  WriteWholeFile(scratch.File("v1"), v1);
  QuotaAccount quota;
  DirectoryOptions options;
  options.quota = &quota;
  auto copy = RestoreSnapshot<std::string>(
      scratch.File("v1"),
      [](std::string_view b) -> Result<std::string> { return std::string(b); },
      options);
  ASSERT_FALSE(copy.ok());
  EXPECT_EQ(copy.status().code(), StatusCode::kFailedPrecondition);
  const std::string_view message = copy.status().message();
  EXPECT_NE(message.find("version 1 is not supported"), std::string_view::npos)
      << message;
  EXPECT_NE(message.find("take a new snapshot"), std::string_view::npos)
      << message;
  EXPECT_EQ(quota.charged(), 0u);
  EXPECT_EQ(RestoreRegistrySnapshot<std::string>(
                scratch.File("v1"),
                [](std::string_view b) -> Result<std::string> {
                  return std::string(b);
                })
                .status()
                .code(),
            StatusCode::kFailedPrecondition);
  // A damaged version-1 file is damaged, not old.
  std::string bad = v1;
  bad[20] ^= 1;
  WriteWholeFile(scratch.File("v1bad"), bad);
  EXPECT_EQ(RestoreSnapshot<EmptyPayload>(scratch.File("v1bad"), nullptr)
                .status()
                .code(),
            StatusCode::kDataLoss);
}

TEST(SnapshotTest, H2RestoreOverTheQuotaFailsWithTheDeficitAndLoadsNothing) {
  ScratchDir scratch;
  ManualClock clock;
  const std::string good = SmallSnapshot(scratch, &clock);  // 18 bytes
  QuotaAccount quota(15);
  ASSERT_TRUE(quota.Charge(5).ok());  // the host's own charge
  const Status s = TryRestore(scratch, good, &clock, &quota);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  // The whole restore's deficit (5 + 18 - 15), not one object's.
  EXPECT_NE(s.message().find("deficit 8 bytes"), std::string_view::npos)
      << s.ToString();
  EXPECT_EQ(quota.charged(), 5u);
  // A restore that fails half-way (a key this directory refuses) gives back
  // what it charged.
  QuotaAccount roomy;
  DirectoryOptions small = WithClock(&clock, &roomy);
  small.max_key_bytes = 1;
  WriteWholeFile(scratch.File("bad"), good);
  auto refused =
      RestoreSnapshot<TestPayload>(scratch.File("bad"), Decode, small);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(roomy.charged(), 0u);
}

TEST(SnapshotTest, H2RestoreThatFailsHalfWayGivesBackWhatItCharged) {
  // The route refuses creates part-way (its epoch domain is at its retired
  // cap behind a stalled reader): the restore fails with the route's status
  // and the host account is left as it was.
  ScratchDir scratch;
  ManualClock clock;
  {
    Dir dir(WithClock(&clock));
    for (int i = 0; i < 400; ++i) {
      ASSERT_TRUE(dir.Create(Key("k", i), Sized(1), Payload(i, 1)).ok());
    }
    ASSERT_TRUE(WriteSnapshot(dir, scratch.File("snap"), Encode).ok());
  }
  EpochOptions epoch_options;
  epoch_options.name = "route";
  epoch_options.retired_bytes_cap = 8 << 10;
  epoch_options.reclaim_deadline = std::chrono::milliseconds(2);
  epoch_options.stall_threshold = nanoseconds(0);
  EpochDomain domain(epoch_options);
  QuotaAccount quota;
  ASSERT_TRUE(quota.Charge(3).ok());
  Result<Participant> reader = domain.RegisterParticipant("stalled reader");
  ASSERT_TRUE(reader.ok());
  {
    Guard guard = reader->Enter();
    std::thread restorer([&] {
      DirectoryOptions options = WithClock(&clock, &quota);
      options.route.epoch_domain = &domain;
      auto copy =
          RestoreSnapshot<TestPayload>(scratch.File("snap"), Decode, options);
      ASSERT_FALSE(copy.ok());
      EXPECT_EQ(copy.status().code(), StatusCode::kResourceExhausted)
          << copy.status().ToString();
      EXPECT_NE(copy.status().message().find("restoring snapshot key"),
                std::string_view::npos);
    });
    restorer.join();
  }
  EXPECT_EQ(quota.charged(), 3u);
  ASSERT_TRUE(domain.Barrier().ok());
}

TEST(SnapshotTest, BadArgumentsAreRejectedWithNoFileLeftBehind) {
  ScratchDir scratch;
  ManualClock clock;
  Dir dir(WithClock(&clock));
  ASSERT_TRUE(dir.Create("k", Sized(1), Payload(1, 1)).ok());
  // A payload and no encoder.
  EXPECT_EQ(WriteSnapshot(dir, scratch.File("s"), nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSnapshot(dir, "", Encode).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSnapshot(dir, scratch.File("no/such/dir/s"), Encode).code(),
            StatusCode::kNotFound);
  // An encoder error stops the snapshot; an older file stays as it was.
  ASSERT_TRUE(WriteSnapshot(dir, scratch.File("s"), Encode).ok());
  const std::string before = ReadWholeFile(scratch.File("s"));
  auto failing = [](const TestPayload&, std::string*) {
    return AbortedError("host refused");
  };
  EXPECT_EQ(WriteSnapshot(dir, scratch.File("s"), failing).code(),
            StatusCode::kAborted);
  EXPECT_EQ(ReadWholeFile(scratch.File("s")), before);
  EXPECT_FALSE(std::filesystem::exists(scratch.File("s.tmp")));
  // Restores: no such file, no decoder, a decoder error.
  EXPECT_EQ(RestoreSnapshot<TestPayload>(scratch.File("none"), Decode)
                .status()
                .code(),
            StatusCode::kNotFound);
  EXPECT_EQ(
      RestoreSnapshot<TestPayload>(scratch.File("s"), nullptr).status().code(),
      StatusCode::kInvalidArgument);
  auto refuse = [](std::string_view) -> Result<TestPayload> {
    return InvalidArgumentError("bad payload");
  };
  EXPECT_EQ(
      RestoreSnapshot<TestPayload>(scratch.File("s"), refuse).status().code(),
      StatusCode::kInvalidArgument);
  // A registry snapshot of several tenants is not one directory.
  Registry registry;
  ASSERT_TRUE(registry
                  .GetOrCreate("other",
                               [](std::string_view) -> Result<TenantOptions> {
                                 return TenantOptions{};
                               })
                  .ok());
  ASSERT_TRUE(WriteSnapshot(registry, scratch.File("reg"), Encode).ok());
  EXPECT_EQ(
      RestoreSnapshot<TestPayload>(scratch.File("reg"), Decode).status().code(),
      StatusCode::kInvalidArgument);
  // After shutdown the directory refuses, and no file is left.
  ASSERT_TRUE(dir.Shutdown().ok());
  EXPECT_EQ(WriteSnapshot(dir, scratch.File("late"), Encode).code(),
            StatusCode::kUnavailable);
  EXPECT_FALSE(std::filesystem::exists(scratch.File("late")));
  EXPECT_FALSE(std::filesystem::exists(scratch.File("late.tmp")));
}

TEST(SnapshotTest, H2UnitRepeatingAKeyOrGroupNameIsSkippedWhole) {
  // A key erased and created again in another unit while a snapshot ran can
  // be met twice; the unit written first wins and later ones are skipped
  // whole, so a group is never restored torn.
  ScratchDir scratch;
  const std::string path = scratch.File("snap");
  {
    auto w = directory_internal::SnapshotFileWriter::Create(path, {});
    ASSERT_TRUE(w.ok());
    directory_internal::SnapshotTenant t;
    t.name = "default";
    ASSERT_TRUE((*w)->BeginTenant(t).ok());
    std::string payload;
    ASSERT_TRUE(Encode(Payload(1, 1), &payload).ok());
    ObjectId next_id = 1;  // a key met twice was two instances
    auto add = [&](std::string_view key) {
      directory_internal::SnapshotObject o;
      o.key = key;
      o.payload = payload;
      o.id = next_id++;
      return (*w)->AddObject(o);
    };
    ASSERT_TRUE(add("a").ok());
    ASSERT_TRUE((*w)->AddGroup("g", 2).ok());  // repeats "a": skipped
    ASSERT_TRUE(add("a").ok());
    ASSERT_TRUE(add("b").ok());
    ASSERT_TRUE((*w)->AddGroup("h", 1).ok());
    ASSERT_TRUE(add("c").ok());
    ASSERT_TRUE((*w)->AddGroup("h", 1).ok());  // repeats group "h": skipped
    ASSERT_TRUE(add("d").ok());
    ASSERT_TRUE((*w)->EndTenant().ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  ManualClock clock;
  SnapshotStats stats;
  auto copy =
      RestoreSnapshot<TestPayload>(path, Decode, WithClock(&clock), &stats);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(stats.skipped_units, 2u);
  const auto got = Contents(*copy.value());
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(got.at("a").group, "");
  EXPECT_EQ(got.at("c").group, "h");
  EXPECT_EQ(copy.value()->group_count(), 1u);
}

// ---- a snapshot taken while writers churn ----------------------------------

constexpr int kSingletonKeys = 24;
constexpr int kGroups = 6;
constexpr int kMembers = 4;

std::string MemberKey(int group, int member) {
  std::string key = Key("g", group);
  key.append("/");
  key.append(std::to_string(member));
  return key;
}

TEST(SnapshotStressTest, H2SnapshotDuringChurnRestoresAStateTheWritersMade) {
  ScratchDir scratch;
  QuotaAccount quota;
  DirectoryOptions options;
  options.quota = &quota;
  options.read_lease_ttl = std::chrono::milliseconds(1);
  Dir dir(options);
  testing::Watchdog watchdog(testing::kWatchdogBound, "snapshot churn");

  // What each writer made visible, per key: (payload value, size). A state
  // is logged before it can become visible. Singleton writers own the keys
  // i % kWriters == w; the group writer owns every group.
  constexpr int kWriters = 2;
  std::vector<
      std::map<std::string, std::set<std::pair<std::int64_t, std::uint64_t>>>>
      singleton_log(kWriters);
  std::map<int, std::set<std::int64_t>> group_log;  // generations per group
  std::atomic<std::int64_t> generation{1};
  std::atomic<bool> stop{false};

  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(77 + w);
      auto& log = singleton_log[w];
      while (!stop.load(std::memory_order_relaxed)) {
        const int i =
            static_cast<int>(rng() % (kSingletonKeys / kWriters)) * kWriters +
            w;
        const std::string key = Key("s", i);
        const std::int64_t gen = generation.fetch_add(1);
        const std::uint64_t size = 1 + rng() % 1000;
        auto pinned = dir.Pin(key);
        const int op = static_cast<int>(rng() % 8);
        if (!pinned.ok()) {
          if (op < 2) {  // a put that is aborted: never visible
            auto p = dir.CreatePending(key, Sized(size), Payload(gen, size));
            if (p.ok()) {
              EXPECT_TRUE(dir.Abort(key, p->token()).ok());
            }
          } else if (op < 4) {  // a two-phase put that commits
            log[key].insert({gen, size});
            auto p = dir.CreatePending(key, Sized(size), Payload(gen, size));
            if (p.ok()) {
              EXPECT_TRUE(dir.Commit(key, p->token()).ok());
            }
          } else {
            log[key].insert({gen, size});
            EXPECT_TRUE(dir.Create(key, Sized(size), Payload(gen, size)).ok());
          }
          continue;
        }
        const ObjectToken token = pinned->token();
        if (op < 3) {
          EXPECT_TRUE(dir.Erase(key, EraseOptions{true}).ok());
        } else if (op < 4) {  // staged, then dropped: never visible
          if (dir.BeginUpsert(key, token, {size, size}).ok()) {
            EXPECT_TRUE(dir.AbortUpsert(key, token).ok());
          }
        } else {
          log[key].insert({gen, size});
          if (dir.BeginUpsert(key, token, {size, size}).ok()) {
            EXPECT_TRUE(dir.CommitUpsert(key, token,
                                         [&](Access& a) {
                                           a.payload() = Payload(gen, size);
                                         })
                            .ok());
          }
        }
      }
    });
  }
  threads.emplace_back([&] {
    std::mt19937_64 rng(99);
    std::vector<bool> present(kGroups, false);
    while (!stop.load(std::memory_order_relaxed)) {
      const int g = static_cast<int>(rng() % kGroups);
      const std::string name = Key("g", g);
      if (present[g]) {
        EXPECT_TRUE(dir.EraseGroup(name, EraseOptions{true}).ok());
        present[g] = false;
        continue;
      }
      // Members join one by one, in order: at any instant the group holds
      // members 0..k of one generation.
      const std::int64_t gen = generation.fetch_add(1);
      group_log[g].insert(gen);
      for (int m = 0; m < kMembers; ++m) {
        EXPECT_TRUE(dir.Create(MemberKey(g, m), Sized(gen % 97 + 1, name),
                               Payload(gen, gen % 97 + 1))
                        .ok());
      }
      present[g] = true;
    }
  });
  threads.emplace_back([&] {  // readers grant leases while snapshots run
    std::mt19937_64 rng(5);
    while (!stop.load(std::memory_order_relaxed)) {
      const std::string key =
          rng() % 2 == 0 ? Key("s", static_cast<int>(rng() % kSingletonKeys))
                         : MemberKey(static_cast<int>(rng() % kGroups), 0);
      dir.WithObject(key,
                     [](const View& v) {
                       EXPECT_EQ(v.payload().stamp, v.size_bytes());
                     })
          .IgnoreError();
    }
  });

  const int kSnapshots = testing::kUnderTsan ? 3 : 6;
  const auto pause = testing::StressDuration(40);
  for (int s = 0; s < kSnapshots; ++s) {
    std::this_thread::sleep_for(pause);
    SnapshotWriteOptions write;
    write.sync = false;
    ASSERT_TRUE(
        WriteSnapshot(dir, scratch.File(Key("snap", s)), Encode, write).ok());
  }
  stop.store(true);
  for (std::thread& t : threads) t.join();

  std::map<std::string, std::set<std::pair<std::int64_t, std::uint64_t>>>
      singletons;
  for (auto& log : singleton_log) singletons.merge(log);
  std::size_t restored_objects = 0;
  for (int s = 0; s < kSnapshots; ++s) {
    SCOPED_TRACE("snapshot " + std::to_string(s));
    QuotaAccount restored_quota;
    DirectoryOptions ro;
    ro.quota = &restored_quota;
    SnapshotStats stats;
    auto copy = RestoreSnapshot<TestPayload>(scratch.File(Key("snap", s)),
                                             Decode, ro, &stats);
    ASSERT_TRUE(copy.ok()) << copy.status().ToString();
    const auto got = Contents(*copy.value());
    std::map<std::string, std::map<int, std::int64_t>> groups;
    std::uint64_t counted = 0;
    for (const auto& [key, seen] : got) {
      counted += seen.counted;
      // One object's size and payload were read together (stamp == size)
      // and were a state its writer made.
      EXPECT_EQ(seen.payload.stamp, seen.size) << key;
      EXPECT_EQ(seen.counted, seen.size) << key;
      if (key[0] == 's') {
        EXPECT_EQ(seen.group, "") << key;
        EXPECT_EQ(singletons[key].count({seen.payload.value, seen.size}), 1u)
            << key << " holds a state no writer made";
      } else {
        const int g = std::stoi(key.substr(1, key.find('/') - 1));
        const int m = std::stoi(key.substr(key.find('/') + 1));
        EXPECT_EQ(seen.group, Key("g", g)) << key;
        groups[seen.group][m] = seen.payload.value;
        EXPECT_EQ(group_log[g].count(seen.payload.value), 1u) << key;
      }
    }
    // Each group was read at one instant: members 0..k of one generation.
    for (const auto& [name, members] : groups) {
      int expect = 0;
      for (const auto& [m, gen] : members) {
        EXPECT_EQ(m, expect++) << name << " is torn";
        EXPECT_EQ(gen, members.begin()->second) << name << " mixes instances";
      }
    }
    EXPECT_EQ(restored_quota.charged(), counted);  // Q2 after restore
    EXPECT_EQ(copy.value()->group_count(), groups.size());
    restored_objects += got.size();
  }
  EXPECT_GT(restored_objects, 0u);
}

// Review finding: two WriteSnapshot calls to one path (a timer and a manual
// snapshot, say) shared the temporary file `path`.tmp. The second one's
// O_TRUNC open took over the first one's inode; after the second renamed it
// over `path` and returned OK, the first kept writing into that inode (now
// `path`) and then failed its own rename. Planted/real: the committed file
// at `path` mixed both writers' bytes and did not restore (kDataLoss).
TEST(SnapshotTest, ConcurrentWritersToOnePathLeaveAWholeSnapshot) {
  ScratchDir scratch;
  const std::string path = scratch.File("snap");
  GroupDirectory<EmptyPayload> small;
  GroupDirectory<EmptyPayload> big;
  ASSERT_TRUE(small.Create("s").ok());
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(big.Create(Key("big/", i)).ok());
  std::atomic<bool> a_inside{false};
  std::atomic<bool> b_done{false};
  const SnapshotEncoder<EmptyPayload> stall = [&](const EmptyPayload&,
                                                  std::string*) {
    a_inside.store(true);
    while (!b_done.load()) std::this_thread::yield();
    return Status::Ok();
  };
  Status a_status;
  std::thread a([&] { a_status = WriteSnapshot(small, path, stall); });
  while (!a_inside.load()) std::this_thread::yield();
  const Status b_status =
      WriteSnapshot(big, path, SnapshotEncoder<EmptyPayload>{});
  b_done.store(true);
  a.join();
  ASSERT_TRUE(b_status.ok()) << b_status.ToString();
  auto restored = RestoreSnapshot<EmptyPayload>(path, {});
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  // The file is whichever writer committed last, whole.
  EXPECT_EQ((*restored)->object_count(), a_status.ok() ? 1u : 200u);
}

// Review finding: PlanTenantRestore looked for a key repeated inside one
// group by comparing every member with every earlier one, so restoring a
// group of n members cost n^2/2 key comparisons (40,000 members: 8e8). A
// group restores at about the cost of as many singletons. Planted/real: the
// pairwise loop; the group restore took tens of times the singletons'.
TEST(SnapshotTest, LargeGroupRestoresInTimeLinearInItsMembers) {
  ScratchDir scratch;
  const int n = 40000;
  auto write = [&](const std::string& path, bool grouped) {
    auto w = directory_internal::SnapshotFileWriter::Create(path, {});
    ASSERT_TRUE(w.ok());
    directory_internal::SnapshotTenant t;
    t.name = "default";
    ASSERT_TRUE((*w)->BeginTenant(t).ok());
    if (grouped) {
      ASSERT_TRUE((*w)->AddGroup("big", n).ok());
    }
    for (int i = 0; i < n; ++i) {
      const std::string key = Key("k/", i);
      directory_internal::SnapshotObject o;
      o.key = key;
      o.id = static_cast<ObjectId>(i + 1);
      ASSERT_TRUE((*w)->AddObject(o).ok());
    }
    ASSERT_TRUE((*w)->EndTenant().ok());
    ASSERT_TRUE((*w)->Commit().ok());
  };
  write(scratch.File("singletons"), false);
  write(scratch.File("group"), true);
  auto restore = [&](const std::string& path) {
    const auto start = std::chrono::steady_clock::now();
    auto made = RestoreSnapshot<EmptyPayload>(path, {});
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    if (made.ok()) {
      EXPECT_EQ((*made)->object_count(), std::size_t(n));
    }
    return took;
  };
  // Best of three each, interleaved (a shared, loaded machine).
  auto singles = std::chrono::steady_clock::duration::max();
  auto grouped = singles;
  for (int round = 0; round < 3; ++round) {
    singles = std::min(singles, restore(scratch.File("singletons")));
    grouped = std::min(grouped, restore(scratch.File("group")));
  }
  const double ratio = std::chrono::duration<double>(grouped).count() /
                       std::chrono::duration<double>(singles).count();
  std::printf("group/singletons restore time: %.2f\n", ratio);
  EXPECT_LT(ratio, 6.0);
}

// The snapshot's file goes through the Env: the writer's create, appends,
// header write, sync, rename and directory sync, and the restore's read. A
// step the Env fails (or an append it tears) fails WriteSnapshot, removes
// the temporary file and leaves the previous snapshot as it was.
TEST(SnapshotTest, FileGoesThroughTheEnvAndAFailedStepLeavesTheOldSnapshot) {
  ScratchDir scratch;
  testing::CountingEnv env;
  using testing::EnvCall;
  ManualClock clock;
  Dir dir(WithClock(&clock));
  ASSERT_TRUE(dir.Create("a", Sized(1), Payload(1, 1)).ok());
  SnapshotWriteOptions options;
  options.env = &env;
  const std::string path = scratch.File("snap");
  const std::string tmp = path + ".tmp.";
  ASSERT_TRUE(WriteSnapshot(dir, path, Encode, options).ok());
  EXPECT_EQ(env.count(EnvCall::kNewFile, tmp), 1u);
  EXPECT_EQ(env.count(EnvCall::kAppend, tmp), 1u);   // one buffered chunk
  EXPECT_EQ(env.count(EnvCall::kWriteAt, tmp), 1u);  // the final header
  EXPECT_EQ(env.count(EnvCall::kSync, tmp), 1u);
  EXPECT_EQ(env.count(EnvCall::kRename, tmp), 1u);
  EXPECT_EQ(env.count(EnvCall::kSyncDir, scratch.path()), 1u);
  const std::string good = ReadWholeFile(path);

  ASSERT_TRUE(dir.Create("b", Sized(1), Payload(2, 2)).ok());
  env.FailNth(EnvCall::kSync, 1, InternalError("injected sync failure"));
  EXPECT_EQ(WriteSnapshot(dir, path, Encode, options).message(),
            "injected sync failure");
  env.TearNth(EnvCall::kAppend, 1, 10, InternalError("injected torn append"));
  EXPECT_EQ(WriteSnapshot(dir, path, Encode, options).message(),
            "injected torn append");
  env.FailNth(EnvCall::kRename, 1, InternalError("injected rename failure"));
  EXPECT_EQ(WriteSnapshot(dir, path, Encode, options).message(),
            "injected rename failure");
  EXPECT_EQ(ReadWholeFile(path), good);
  EXPECT_EQ(env.count(EnvCall::kRemove, tmp), 3u);
  EXPECT_EQ(*Env::Default()->List(scratch.path()),
            std::vector<std::string>{"snap"});

  env.FailNth(EnvCall::kReadAt, 1, InternalError("injected read failure"),
              path);
  EXPECT_EQ(RestoreSnapshot<TestPayload>(path, Decode, {}, nullptr, &env)
                .status()
                .message(),
            "injected read failure");
  auto restored = RestoreSnapshot<TestPayload>(path, Decode, {}, nullptr, &env);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ((*restored)->object_count(), 1u);
  env.FailNth(EnvCall::kNewFile, 1, InternalError("injected open failure"),
              path);
  EXPECT_EQ(
      RestoreRegistrySnapshot<TestPayload>(path, Decode, {}, nullptr, &env)
          .status()
          .message(),
      "injected open failure");
}

}  // namespace
}  // namespace cairn
