// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Removing a tenant only if it is empty (T3) and removing a tenant's
// objects with and without force (T4): what is kept and why, quota
// released (Q2), every removal logged (H1) and reproduced by a replay, and
// both racing creates and erases in the same tenant (TSan).

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/directory/durable_log.h"
#include "cairn/ha/replay.h"
#include "cairn/tenant/remove_all.h"
#include "cairn/tenant/tenant_registry.h"
#include "directory/directory_testing.h"
#include "testing/alloc_counter.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::Key;
using testing::TestPayload;
using Registry = TenantRegistry<TestPayload>;
using Access = ObjectAccess<TestPayload>;

Registry::Factory Options(const Clock* clock) {
  return [clock](std::string_view) -> Result<TenantOptions> {
    TenantOptions o;
    o.directory.clock = clock;
    o.directory.route.bucket_count = 16;
    return o;
  };
}

CreateOptions Counted(std::uint64_t bytes, std::string_view group = {}) {
  CreateOptions c;
  c.size_bytes = c.counted_bytes = bytes;
  c.group = group;
  return c;
}

// Charges of the live objects (committed, pending and staged), read under
// each object's lock through the census: active objects only, so callers
// use it where no put is pending.
std::uint64_t LiveCharges(const GroupDirectory<TestPayload>& dir) {
  std::uint64_t sum = 0;
  EXPECT_TRUE(
      DirectoryHooks::Census(dir, [&](const auto&, const ObjectMetadata& m) {
        sum += m.counted_bytes;
      }).ok());
  return sum;
}

std::map<std::string, std::string> KeptByName(const RemoveAllResult& r) {
  std::map<std::string, std::string> kept;
  for (const KeptObject& k : r.kept) {
    EXPECT_EQ(k.reason.code(), StatusCode::kFailedPrecondition);
    kept[k.group.empty() ? k.key : "group " + k.group] =
        std::string(k.reason.message());
  }
  return kept;
}

TEST(RemoveIfEmptyTest, T3RefusesATenantWithObjectsOrAPendingPut) {
  ManualClock clock;
  Registry registry;
  auto t = registry.GetOrCreate("t", Options(&clock));
  ASSERT_TRUE(t.ok());
  auto& dir = t.value()->directory();
  const TenantInstanceId id = t.value()->instance_id();
  ASSERT_TRUE(dir.Create("a").ok());
  Status s = registry.RemoveIfEmpty("t", id);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("not empty"), std::string_view::npos)
      << s.ToString();
  EXPECT_TRUE(registry.Find("t").ok());
  EXPECT_TRUE(dir.Create("b").ok()) << "a refused removal left it sealed";
  ASSERT_TRUE(dir.Erase("a").ok());
  ASSERT_TRUE(dir.Erase("b").ok());
  // A pending put is an object too.
  auto pending = dir.CreatePending("p", Counted(1));
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(registry.RemoveIfEmpty("t", id).code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(dir.Abort("p", pending.value().token()).ok());
  // Other instance, unknown name, default tenant.
  EXPECT_EQ(registry.RemoveIfEmpty("t", id + 100).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(registry.RemoveIfEmpty("nope", 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(registry.RemoveIfEmpty("default", 1).code(),
            StatusCode::kFailedPrecondition);
  // Empty now: removed, and the held handle's directory takes no object.
  ASSERT_TRUE(registry.RemoveIfEmpty("t", id).ok());
  EXPECT_FALSE(registry.Find("t").ok());
  Result<ObjectHandle<TestPayload>> late = dir.Create("late");
  EXPECT_EQ(late.status().code(), StatusCode::kFailedPrecondition);
  // (A charge would be refused first: the removed tenant's account is
  // closed to new charges, as after any removal.)
  EXPECT_EQ(dir.CreatePending("late", Counted(0)).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(dir.CreatePending("late", Counted(1)).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(dir.Create("m", Counted(0, "g")).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(dir.object_count(), 0u);
  // A new instance of the name is open as usual.
  auto again = registry.GetOrCreate("t", Options(&clock));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again.value()->directory().Create("a").ok());
}

// A create counts its object before it publishes (T3's seal); one that
// fails, even by running out of memory (thrown), gives the count back, so
// an empty directory can still be sealed.
TEST(RemoveIfEmptyTest, T3ACreateThatRunsOutOfMemoryGivesItsCountBack) {
  GroupDirectory<TestPayload> dir;
  // The thread's first calls bind it to the route's epoch domain, which
  // may not fail; warm up first.
  ASSERT_TRUE(dir.Create("warm", Counted(1, "g")).ok());
  ASSERT_TRUE(dir.Erase("warm").ok());
  int threw = 0;
  constexpr int kBound = 40;
  for (int n = 1; n <= kBound; ++n) {
    SCOPED_TRACE(n);
    const CreateOptions c = Counted(1, n % 2 == 0 ? "g" : "");
    bool created = false;
    const bool reached = testing::FailNthAllocationDuring(
        n, &threw, [&] { created = dir.Create("k", c).ok(); });
    // The last two calls (one of each kind) must make fewer allocations
    // than their n, or the bound misses some.
    if (n > kBound - 2) {
      EXPECT_FALSE(reached) << "raise the bound";
    }
    if (created) {
      ASSERT_TRUE(dir.Erase("k").ok());
    }
    EXPECT_EQ(dir.object_count(), 0u);
    ASSERT_TRUE(dir.SealIfEmpty().ok());
    dir.Unseal();
  }
  EXPECT_GT(threw, 0);
}

// H1: the removal is logged as a kTenantRemove; a refused record removes
// nothing and lifts the seal, so creates work again.
TEST(RemoveIfEmptyTest, T3IsLoggedAndARefusedRecordLiftsTheSeal) {
  InMemoryDurableLog log;
  RegistryOptions options;
  options.durable_log = &log;
  Registry registry(options);
  auto t = registry.GetOrCreate("t", Options(nullptr));
  ASSERT_TRUE(t.ok());
  const TenantInstanceId id = t.value()->instance_id();
  log.FailAppend(UnavailableError("log down"));
  EXPECT_EQ(registry.RemoveIfEmpty("t", id).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(registry.Find("t").ok());
  EXPECT_FALSE(t.value()->directory().is_sealed());
  ASSERT_TRUE(t.value()->directory().Create("k").ok());
  ASSERT_TRUE(t.value()->directory().Erase("k").ok());
  ASSERT_TRUE(registry.RemoveIfEmpty("t", id).ok());
  const auto bodies = log.durable_bodies();
  ASSERT_FALSE(bodies.empty());
  DurableRecordView v;
  ASSERT_TRUE(DecodeDurableRecord(bodies.back(), &v).ok());
  EXPECT_EQ(v.op, DurableOp::kTenantRemove);
  EXPECT_EQ(v.tenant, id);
  EXPECT_EQ(log.open_reservations(), 0u);
}

// Creates through a held handle race RemoveIfEmpty: whichever wins, a
// removed tenant never holds an object, and every create that returned OK
// is in a tenant that was not removed (its removal then failed).
TEST(RemoveIfEmptyStressTest,
     T3RacingCreatesNeverLeaveAnObjectInARemovedTenant) {
  Registry registry;
  std::mt19937_64 rng(3);
  // Each round starts three threads: slow under TSan (about 0.25 s) and on
  // a loaded machine.
  const int rounds = testing::StressIterations(testing::kUnderTsan ? 20 : 100);
  int removed = 0;
  int refused = 0;
  for (int round = 0; round < rounds; ++round) {
    auto t = registry.GetOrCreate("t", Options(nullptr));
    ASSERT_TRUE(t.ok());
    auto& dir = t.value()->directory();
    std::atomic<bool> go{false};
    std::atomic<int> created{0};
    std::vector<std::thread> creators;
    for (int c = 0; c < 3; ++c) {
      creators.emplace_back([&, c] {
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        for (int i = 0; i < 4; ++i) {
          Result<ObjectHandle<TestPayload>> h =
              dir.Create(Key("c" + std::to_string(c) + "-", i));
          if (h.ok()) {
            created.fetch_add(1);
          } else {
            EXPECT_EQ(h.status().code(), StatusCode::kFailedPrecondition);
          }
        }
      });
    }
    go.store(true, std::memory_order_release);
    // Start at a random point of the creators' run, so both outcomes occur.
    for (int spin = static_cast<int>(rng() % 64); spin > 0; --spin) {
      std::this_thread::yield();
    }
    Status s;
    for (int attempt = 0; attempt < 3; ++attempt) {
      s = registry.RemoveIfEmpty("t", t.value()->instance_id());
      if (s.ok()) break;
      EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    }
    for (auto& th : creators) th.join();
    if (s.ok()) {
      ++removed;
      EXPECT_EQ(dir.object_count(), 0u);
      EXPECT_EQ(created.load(), 0) << "an object was created in a tenant "
                                      "that was then removed as empty";
      EXPECT_FALSE(dir.Create("after").ok());
    } else {
      ++refused;
      EXPECT_GT(created.load(), 0);
      EXPECT_EQ(dir.object_count(), static_cast<std::size_t>(created.load()));
      const RemoveAllResult all = registry.RemoveAll(
          "t", t.value()->instance_id(), RemoveAllOptions{true});
      ASSERT_TRUE(all.status.ok()) << all.status.ToString();
      ASSERT_TRUE(registry.RemoveIfEmpty("t", t.value()->instance_id()).ok());
    }
  }
  std::printf(
      "[ remove if empty ] %d rounds removed at once, %d after the "
      "creates\n",
      removed, refused);
}

// The fixture of the RemoveAll tests: one object of every kind.
struct Mixed {
  explicit Mixed(Registry* registry, ManualClock* clock) {
    t = registry->GetOrCreate("t", Options(clock)).value();
    auto& dir = t->directory();
    EXPECT_TRUE(dir.Create("plain", Counted(10)).ok());
    CreateOptions leased = Counted(11);
    leased.lease_ttl = std::chrono::seconds(30);
    EXPECT_TRUE(dir.Create("leased", leased).ok());
    CreateOptions hard = Counted(12);
    hard.hard_pin = true;
    EXPECT_TRUE(dir.Create("hard", hard).ok());
    CreateOptions soft = Counted(13);
    soft.soft_pin_ttl = std::chrono::seconds(30);
    EXPECT_TRUE(dir.Create("soft", soft).ok());
    EXPECT_TRUE(dir.Create("busy", Counted(14)).ok());
    EXPECT_TRUE(dir.WithObjectExclusive(
                       "busy", [](Access& a) { a.set_task(kTaskReplication); })
                    .ok());
    auto staged = dir.Create("staged", Counted(15));
    EXPECT_TRUE(staged.ok());
    EXPECT_TRUE(
        dir.BeginUpsert("staged", staged.value().token(), {20, 20}).ok());
    pending = dir.CreatePending("pending", Counted(16)).value().token();
    // An idle group and a group with one hard-pinned member.
    EXPECT_TRUE(dir.Create("g1-a", Counted(1, "g1")).ok());
    EXPECT_TRUE(dir.Create("g1-b", Counted(1, "g1")).ok());
    EXPECT_TRUE(dir.Create("g2-a", Counted(1, "g2")).ok());
    CreateOptions pinned_member = Counted(1, "g2");
    pinned_member.hard_pin = true;
    EXPECT_TRUE(dir.Create("g2-b", pinned_member).ok());
  }
  Registry::Handle t;
  ObjectToken pending;
};

TEST(RemoveAllTest, T4WithoutForceKeepsAndReportsLeasedPinnedBusyAndPending) {
  ManualClock clock;
  Registry registry;
  Mixed m(&registry, &clock);
  auto& dir = m.t->directory();
  const RemoveAllResult r =
      registry.RemoveAll("t", m.t->instance_id(), RemoveAllOptions{false});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.removed_objects, 3u);  // plain, g1-a, g1-b
  EXPECT_EQ(r.removed_groups, 1u);
  EXPECT_EQ(r.aborted_puts, 0u);
  const std::map<std::string, std::string> kept = KeptByName(r);
  const std::map<std::string, std::string> expected = {
      {"leased", "lease has not expired"},
      {"hard", "object is hard-pinned"},
      {"soft", "object is soft-pinned"},
      {"busy", "object has a task in flight"},
      {"staged", "object has a staged upsert"},
      {"pending", "object is a pending put"},
      {"group g2", "a group member is hard-pinned"}};
  EXPECT_EQ(kept, expected);
  EXPECT_FALSE(dir.Pin("plain").ok());
  EXPECT_FALSE(dir.Pin("g1-a").ok());
  EXPECT_TRUE(dir.Pin("g2-a").ok()) << "a group with a pinned member is kept "
                                       "whole";
  EXPECT_EQ(dir.object_count(), 8u);
  // Q2: the account holds exactly what the kept objects hold.
  EXPECT_EQ(m.t->quota().charged(),
            11u + 12 + 13 + 14 + (15 + 20) + 16 + 1 + 1);
  // The tenant is not empty, so it stays.
  EXPECT_EQ(registry.RemoveIfEmpty("t", m.t->instance_id()).code(),
            StatusCode::kFailedPrecondition);
  // Once the lease and the soft pin expired, the task ended and the upsert
  // committed, a second call takes those too.
  clock.Advance(std::chrono::seconds(31));
  ASSERT_TRUE(dir.WithObjectExclusive(
                     "busy", [](Access& a) { a.clear_task(kTaskReplication); })
                  .ok());
  ASSERT_TRUE(
      dir.CommitUpsert("staged", dir.Pin("staged").value().token()).ok());
  const RemoveAllResult second =
      registry.RemoveAll("t", m.t->instance_id(), RemoveAllOptions{false});
  ASSERT_TRUE(second.status.ok());
  EXPECT_EQ(second.removed_objects, 4u);     // leased, soft, busy, staged
  EXPECT_EQ(KeptByName(second).size(), 3u);  // hard, pending, g2
}

TEST(RemoveAllTest, T4WithForceRemovesEverythingAndReleasesTheQuota) {
  ManualClock clock;
  Registry registry;
  Mixed m(&registry, &clock);
  auto& dir = m.t->directory();
  const RemoveAllResult r =
      registry.RemoveAll("t", m.t->instance_id(), RemoveAllOptions{true});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(r.kept.empty());
  EXPECT_EQ(r.removed_objects, 10u);
  EXPECT_EQ(r.removed_groups, 2u);
  EXPECT_EQ(r.aborted_puts, 1u);
  EXPECT_EQ(dir.object_count(), 0u);
  EXPECT_EQ(dir.group_count(), 0u);
  EXPECT_EQ(m.t->quota().charged(), 0u);  // Q2
  EXPECT_EQ(dir.pending_charge_bytes(), 0u);
  // The pending put's holder learns it was aborted.
  EXPECT_EQ(dir.Commit("pending", m.pending).code(), StatusCode::kNotFound);
  ASSERT_TRUE(registry.RemoveIfEmpty("t", m.t->instance_id()).ok());
  EXPECT_EQ(registry.RemoveAll("t", m.t->instance_id()).status.code(),
            StatusCode::kNotFound);
}

// H1: every removal is a directory erase record (kErase / kEraseGroup;
// a pending put's abort is not logged, as its create was not), and a log
// that refuses a reservation stops the call with its error, the object
// untouched. A replica applying the log ends with the primary's state.
TEST(RemoveAllTest, T4RemovalsAreLoggedAndAReplicaReproducesThem) {
  ManualClock clock;
  InMemoryDurableLog log;
  RegistryOptions options;
  options.durable_log = &log;
  Registry primary(options);
  Mixed m(&primary, &clock);
  auto& dir = m.t->directory();
  const std::size_t before = log.durable_bodies().size();
  log.FailReserve(UnavailableError("log down"));
  const RemoveAllResult refused =
      primary.RemoveAll("t", m.t->instance_id(), RemoveAllOptions{true});
  EXPECT_EQ(refused.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(log.open_reservations(), 0u);
  const std::size_t left = dir.object_count();
  EXPECT_GE(left, 1u);
  const RemoveAllResult kept =
      primary.RemoveAll("t", m.t->instance_id(), RemoveAllOptions{false});
  ASSERT_TRUE(kept.status.ok());
  const RemoveAllResult forced =
      primary.RemoveAll("t", m.t->instance_id(), RemoveAllOptions{true});
  ASSERT_TRUE(forced.status.ok());
  EXPECT_EQ(dir.object_count(), 0u);
  std::multiset<DurableOp> ops;
  const auto bodies = log.durable_bodies();
  for (std::size_t i = before; i < bodies.size(); ++i) {
    DurableRecordView v;
    ASSERT_TRUE(DecodeDurableRecord(bodies[i], &v).ok());
    ops.insert(v.op);
  }
  // Singletons: plain, leased, hard, soft, busy, staged (the aborted put
  // is not logged); groups: g1, g2.
  EXPECT_EQ(ops.count(DurableOp::kErase), 6u);
  EXPECT_EQ(ops.count(DurableOp::kEraseGroup), 2u);
  ASSERT_TRUE(primary.RemoveIfEmpty("t", m.t->instance_id()).ok());

  Registry replica;
  LogApplier<TestPayload> applier(&replica, 0);
  Lsn lsn = 0;
  for (const std::string& body : log.durable_bodies()) {
    ASSERT_TRUE(applier.Apply(++lsn, body).ok());
  }
  EXPECT_FALSE(replica.Find("t").ok());
  EXPECT_EQ(replica.size(), primary.size());
}

// RemoveAll racing creates, two-phase puts, upserts and erases in the same
// tenant, with and without force: no data race or deadlock (TSan,
// watchdog), every kept report names a kFailedPrecondition, and at
// quiescence the account equals the live objects' charges (Q2); a last
// forced RemoveAll with no writer empties the tenant and its account.
TEST(RemoveAllStressTest, T4RacingCreatesAndErasesKeepsTheLedger) {
  testing::Watchdog watchdog(testing::kWatchdogBound, "remove-all stress");
  Registry registry;
  auto t = registry.GetOrCreate("t", Options(nullptr));
  ASSERT_TRUE(t.ok());
  auto& dir = t.value()->directory();
  const TenantInstanceId id = t.value()->instance_id();
  std::atomic<bool> stop{false};
  std::atomic<bool> tenant_removed{false};
  std::atomic<bool> late{false};
  std::atomic<long> bad{0};
  std::atomic<long> removed{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      while (!stop.load(std::memory_order_acquire)) {
        const std::string key = Key("k", static_cast<long long>(rng() % 64));
        const std::uint64_t bytes = 1 + rng() % 32;
        switch (rng() % 6) {
          case 0:
            dir.Create(key, Counted(bytes)).status().IgnoreError();
            break;
          case 1: {
            const std::string group =
                Key("g", static_cast<long long>(rng() % 4));
            dir.Create(key, Counted(bytes, group)).status().IgnoreError();
            break;
          }
          case 2: {
            auto h = dir.CreatePending(key, Counted(bytes));
            if (h.ok() && rng() % 2 == 0) {
              dir.Commit(key, h.value().token()).IgnoreError();
            } else if (h.ok()) {
              dir.Abort(key, h.value().token()).IgnoreError();
            }
            break;
          }
          case 3: {
            auto h = dir.Pin(key);
            if (h.ok() &&
                dir.BeginUpsert(key, h.value().token(), {bytes, bytes}).ok()) {
              dir.CommitUpsert(key, h.value().token()).IgnoreError();
            }
            break;
          }
          case 4:
            dir.Erase(key).IgnoreError();
            break;
          default:
            dir.EraseGroup(Key("g", static_cast<long long>(rng() % 4)))
                .IgnoreError();
        }
      }
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      while (!stop.load(std::memory_order_acquire) &&
             !tenant_removed.load(std::memory_order_acquire)) {
        const RemoveAllResult res =
            registry.RemoveAll("t", id, RemoveAllOptions{r == 1});
        // kNotFound: the other remover removed the tenant meanwhile (it
        // may not have set tenant_removed yet), so the registry no longer
        // has it.
        if (!res.status.ok() && !(res.status.code() == StatusCode::kNotFound &&
                                  !registry.Find("t").ok())) {
          bad.fetch_add(1);
          ADD_FAILURE() << "RemoveAll: " << res.status.ToString();
        }
        for (const KeptObject& k : res.kept) {
          if (k.reason.code() != StatusCode::kFailedPrecondition) {
            bad.fetch_add(1);
            ADD_FAILURE() << "kept: " << k.reason.ToString();
          }
        }
        removed.fetch_add(static_cast<long>(res.removed_objects));
        // In the last third: racing creates make it fail or succeed; a
        // success seals the tenant, after which the writers' creates fail.
        if (late.load(std::memory_order_acquire) &&
            registry.RemoveIfEmpty("t", id).ok()) {
          tenant_removed.store(true, std::memory_order_release);
        }
      }
    });
  }
  std::this_thread::sleep_for(testing::StressDuration(1000));
  late.store(true, std::memory_order_release);
  std::this_thread::sleep_for(testing::StressDuration(500));
  stop.store(true, std::memory_order_release);
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  // Quiescence: no put is pending (every writer commits or aborts its own).
  EXPECT_EQ(t.value()->quota().charged(), LiveCharges(dir));
  const RemoveAllResult last = RemoveAllObjects(dir, RemoveAllOptions{true});
  ASSERT_TRUE(last.status.ok());
  EXPECT_EQ(dir.object_count(), 0u);
  EXPECT_EQ(t.value()->quota().charged(), 0u);
  std::printf(
      "[ remove all stress ] %ld objects removed while writers ran, "
      "tenant removed as empty: %s\n",
      removed.load(), tenant_removed.load() ? "yes" : "no");
}

}  // namespace
}  // namespace cairn
