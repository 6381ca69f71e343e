// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The eviction kernel (V1-V5) and its policies.

#include "cairn/tenant/eviction.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "directory/directory_testing.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::Key;
using testing::TestPayload;
using Dir = GroupDirectory<TestPayload>;
using Handle = ObjectHandle<TestPayload>;
using Kernel = Evictor<TestPayload>;
using Access = ObjectAccess<TestPayload>;
using Registry = TenantRegistry<TestPayload>;

struct Fixture {
  explicit Fixture(DurableLog* log = nullptr) {
    DirectoryOptions o;
    o.clock = &clock;
    o.quota = &quota;
    o.durable_log = log;
    o.route.bucket_count = 64;
    o.on_removed = [this](const RemovedObject& r) {
      removed.push_back(r.token);
    };
    dir = std::make_unique<Dir>(o);
  }
  Handle Make(std::string_view key, std::uint64_t bytes,
              std::chrono::nanoseconds lease = {}, std::string_view group = {},
              std::int64_t value = 0) {
    CreateOptions c;
    c.size_bytes = bytes;
    c.counted_bytes = bytes;
    c.lease_ttl = lease;
    c.group = group;
    Result<Handle> h = dir->Create(key, c, TestPayload{value, bytes, 0});
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? h.value() : Handle();
  }
  bool Present(std::string_view key) { return dir->Pin(key).ok(); }
  EvictionResult Evict(Kernel& k, std::uint64_t target,
                       std::uint64_t lower = 0) {
    Dir* d = dir.get();
    return k.Evict(std::span<Dir* const>(&d, 1), target, lower,
                   Kernel::Measure::kSizeBytes);
  }

  ManualClock clock;
  QuotaAccount quota;
  std::vector<ObjectToken> removed;
  std::unique_ptr<Dir> dir;
};

TEST(EvictionTest, V1GroupIsEvictedWholeOrNotAtAll) {
  Fixture f;
  f.Make("g-a", 10, {}, "g");
  f.Make("g-b", 10, {}, "g");
  f.Make("g-c", 10, {}, "g");
  // One member with an in-flight task keeps the whole group.
  ASSERT_TRUE(f.dir
                  ->WithObjectExclusive(
                      "g-b", [](Access& a) { a.set_task(kTaskReplication); })
                  .ok());
  Kernel k;
  EvictionResult r = f.Evict(k, 1);
  EXPECT_EQ(r.evicted_objects, 0u);
  EXPECT_TRUE(f.Present("g-a") && f.Present("g-b") && f.Present("g-c"));
  ASSERT_TRUE(f.dir
                  ->WithObjectExclusive(
                      "g-b", [](Access& a) { a.clear_task(kTaskReplication); })
                  .ok());
  r = f.Evict(k, 1);  // one byte asked: the group still goes whole
  EXPECT_EQ(r.evicted_objects, 3u);
  EXPECT_EQ(r.evicted_groups, 1u);
  EXPECT_EQ(r.freed_bytes, 30u);
  EXPECT_FALSE(f.Present("g-a") || f.Present("g-b") || f.Present("g-c"));
  EXPECT_EQ(f.dir->FindGroup("g").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dir->group_count(), 0u);
  EXPECT_EQ(f.quota.charged(), 0u);
  EXPECT_EQ(f.removed.size(), 3u);
  // A later join starts a fresh group.
  f.Make("g-a", 10, {}, "g");
  EXPECT_TRUE(f.Present("g-a"));

  // A member that changes between census and commit (here: a task set
  // while the hand-off runs, no lock held) keeps the whole group too.
  f.Make("h-a", 10, {}, "h");
  f.Make("h-b", 10, {}, "h");
  Kernel::Options o;
  Dir* dir = f.dir.get();
  bool first = true;
  o.offload = [&](const Handle& h) {
    // The first member offered is the census candidate: change the other.
    if (first && h->group() != nullptr) {
      first = false;
      const std::string other = h->key() == "h-a" ? "h-b" : "h-a";
      EXPECT_TRUE(dir->WithObjectExclusive(
                         other, [](Access& a) { a.set_task(kTaskOffload); })
                      .ok());
    }
    return true;
  };
  Kernel racing(o);
  r = f.Evict(racing, 1000);
  EXPECT_TRUE(f.Present("h-a") && f.Present("h-b"));
  EXPECT_FALSE(f.Present("g-a"));  // the fresh group g went
}

TEST(EvictionTest, V2CandidateChangedSinceCensusIsSkippedAndReplaced) {
  Fixture f;
  f.Make("a", 10);
  f.Make("b", 10);
  f.Make("c", 10);
  Kernel::Options o;
  bool changed = false;
  Dir* dir = f.dir.get();
  // The hand-off runs between census and commit with no lock held: use it
  // to change the first candidate (a size change moves its version).
  o.offload = [&](const Handle& h) {
    if (!changed) {
      changed = true;
      EXPECT_TRUE(
          dir->WithHandleExclusive(h, [](Access& a) { a.set_size_bytes(10); })
              .ok());
    }
    return true;
  };
  Kernel k(o);
  EvictionResult r = f.Evict(k, 20);
  EXPECT_EQ(r.skipped, 1u);
  EXPECT_EQ(r.evicted_objects, 2u);  // the goal is a minimum: 20 bytes freed
  EXPECT_EQ(r.freed_bytes, 20u);
  EXPECT_EQ(f.dir->object_count(), 1u);
}

TEST(EvictionTest, V3EarliestLeaseFirstSoftPinnedOnlyInSecondPass) {
  Fixture f;
  f.Make("late", 10, std::chrono::seconds(3));
  f.Make("early", 10, std::chrono::seconds(1));
  f.Make("mid", 10, std::chrono::seconds(2));
  f.Make("pinned", 10);
  ASSERT_TRUE(f.dir
                  ->WithObjectExclusive("pinned",
                                        [&](Access& a) {
                                          a.set_soft_pin_deadline_nanos(
                                              f.clock.NowNanos() +
                                              1'000'000'000'000);
                                        })
                  .ok());
  f.clock.Advance(std::chrono::seconds(5));
  Kernel k;
  EvictionResult r = f.Evict(k, 10);
  EXPECT_EQ(r.evicted_objects, 1u);
  EXPECT_FALSE(f.Present("early"));
  EXPECT_TRUE(f.Present("mid") && f.Present("late"));
  // Without permission the soft-pinned object stays even below the goal.
  r = f.Evict(k, 100, 100);
  EXPECT_EQ(r.evicted_objects, 2u);
  EXPECT_FALSE(r.used_soft_pinned_pass);
  EXPECT_TRUE(f.Present("pinned"));
  // Allowed: only in the second pass, once unpinned ones cannot reach the
  // lower bound.
  f.Make("x", 10);
  Kernel::Options o;
  o.allow_soft_pinned = true;
  Kernel soft(o);
  r = f.Evict(soft, 10, 10);
  EXPECT_FALSE(r.used_soft_pinned_pass);
  EXPECT_FALSE(f.Present("x"));
  EXPECT_TRUE(f.Present("pinned"));
  r = f.Evict(soft, 10, 10);
  EXPECT_TRUE(r.used_soft_pinned_pass);
  EXPECT_FALSE(f.Present("pinned"));
}

TEST(EvictionTest, V4TasksBlockAndRefusedOffloadKeepsDataUnlessForced) {
  Fixture f;
  f.Make("busy", 10);
  f.Make("o", 10);
  ASSERT_TRUE(f.dir
                  ->WithObjectExclusive(
                      "busy", [](Access& a) { a.set_task(kTaskOffload); })
                  .ok());
  Kernel::Options refuse;
  int offered = 0;
  refuse.offload = [&](const Handle&) {
    ++offered;
    return false;
  };
  Kernel keep(refuse);
  EvictionResult r = f.Evict(keep, 100);
  EXPECT_EQ(r.evicted_objects, 0u);
  EXPECT_EQ(r.offload_refused, 1u);
  EXPECT_EQ(offered, 1);  // the busy object is never even offered
  EXPECT_TRUE(f.Present("o") && f.Present("busy"));
  refuse.force_evict = true;
  Kernel force(refuse);
  r = f.Evict(force, 100);
  EXPECT_EQ(r.evicted_objects, 1u);
  EXPECT_FALSE(f.Present("o"));
  EXPECT_TRUE(f.Present("busy"));
  // Accepted hand-off: evicted and counted as offloaded.
  f.Make("p", 10);
  Kernel::Options accept;
  accept.offload = [](const Handle&) { return true; };
  Kernel take(accept);
  r = f.Evict(take, 10);
  EXPECT_EQ(r.offloaded, 1u);
  EXPECT_FALSE(f.Present("p"));
}

TEST(EvictionTest, P4LeasedAndHardPinnedObjectsAreNeverEvicted) {
  Fixture f;
  f.Make("leased", 10, std::chrono::seconds(10));
  f.Make("member", 10, std::chrono::seconds(10), "g");
  CreateOptions hard;
  hard.size_bytes = 10;
  hard.hard_pin = true;
  ASSERT_TRUE(f.dir->Create("hard", hard).ok());
  Kernel k;
  EXPECT_EQ(f.Evict(k, 1000).evicted_objects, 0u);
  f.clock.Advance(std::chrono::seconds(11));
  EXPECT_EQ(f.Evict(k, 1000).evicted_objects, 2u);
  EXPECT_TRUE(f.Present("hard"));
}

TEST(EvictionTest, ReleaseCallbackRunsOffLockWithTokensAndPayloads) {
  Fixture f;
  const Handle a = f.Make("a", 10, {}, {}, 41);
  const Handle m1 = f.Make("m1", 5, {}, "g", 42);
  const Handle m2 = f.Make("m2", 5, {}, "g", 43);
  Kernel::Options o;
  std::set<std::int64_t> payloads;
  std::vector<ObjectToken> tokens;
  Dir* dir = f.dir.get();
  o.on_evicted = [&](std::span<EvictedObject<TestPayload>> batch) {
    for (auto& x : batch) {
      payloads.insert(x.payload.value);
      tokens.push_back(x.token);
    }
    // No cairn lock is held here: the directory accepts writes.
    EXPECT_TRUE(dir->Create(Key("from-callback-", tokens.size())).ok());
  };
  Kernel k(o);
  EvictionResult r = f.Evict(k, 20);
  EXPECT_EQ(r.evicted_objects, 3u);
  EXPECT_EQ(payloads, (std::set<std::int64_t>{41, 42, 43}));
  EXPECT_EQ(tokens.size(), 3u);
  std::set<ObjectId> ids;
  for (auto& t : tokens) ids.insert(t.object);
  EXPECT_EQ(ids, (std::set<ObjectId>{a.token().object, m1.token().object,
                                     m2.token().object}));
  EXPECT_EQ(f.removed.size(), 3u);
  // Held handles stay valid; the instances are no longer current.
  EXPECT_FALSE(a.is_current() || m1.is_current());
}

TEST(EvictionTest, V5QuotaEvictionTouchesOnlyItsTenantAndSharesTheCommit) {
  Registry registry;
  auto factory = [](std::string_view) -> Result<TenantOptions> {
    TenantOptions t;
    t.directory.route.bucket_count = 64;
    return t;
  };
  auto a = registry.GetOrCreate("a", factory).value();
  auto b = registry.GetOrCreate("b", factory).value();
  for (int i = 0; i < 10; ++i) {
    CreateOptions c;
    c.size_bytes = c.counted_bytes = 10;
    ASSERT_TRUE(a->directory().Create(Key("k", i), c).ok());
    ASSERT_TRUE(b->directory().Create(Key("k", i), c).ok());
  }
  a->quota().set_limit(65);
  EXPECT_EQ(a->quota().deficit(), 35u);
  Kernel k;
  EvictionResult r = k.RunQuotaDeficit(*a);
  EXPECT_EQ(r.evicted_objects, 4u);
  EXPECT_EQ(a->quota().deficit(), 0u);
  EXPECT_EQ(a->directory().object_count(), 6u);
  EXPECT_EQ(b->directory().object_count(), 10u);
  EXPECT_EQ(k.RunQuotaDeficit(*b).evicted_objects, 0u);
  // The watermark policy runs the same commit over every tenant.
  MemoryWatermarkPolicy p;
  p.capacity_bytes = 100;
  p.high_watermark_ratio = 1.0;
  p.target_ratio = 0.5;
  p.lower_bound_ratio = 0.5;
  Result<EvictionResult> w = k.RunWatermark(registry, p);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w.value().freed_bytes, 110u);  // 160 used, down to 50
  EXPECT_EQ(a->directory().object_count() + b->directory().object_count(), 5u);
  EXPECT_EQ(a->quota().charged() + b->quota().charged(), 50u);
  // Below the high watermark nothing moves.
  p.high_watermark_ratio = 0.9;
  EXPECT_EQ(k.RunWatermark(registry, p).value().evicted_objects, 0u);
}

// V3 with the bounded ranking: the census keeps only the best candidates
// that cover the goal twice over (at least kMinRanked), and still evicts
// exactly the earliest leases, ties larger first.
TEST(EvictionTest, V3BoundedRankingKeepsFewCandidatesInExactOrder) {
  Fixture f;
  constexpr int kObjects = 500;
  std::vector<int> order(kObjects);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(12));
  for (int i : order) {  // object i's lease ends i+1 seconds from now
    f.Make(Key("l", i), 10, std::chrono::seconds(i + 1));
  }
  f.clock.Advance(std::chrono::seconds(kObjects + 1));
  Kernel k;
  EvictionResult r = f.Evict(k, 50);
  EXPECT_EQ(r.census_rounds, 1u);
  EXPECT_EQ(r.candidates, static_cast<std::size_t>(kObjects));
  EXPECT_EQ(r.ranked, Kernel::kMinRanked);  // 2 x 50 bytes is 10 objects
  EXPECT_EQ(r.evicted_objects, 5u);
  for (int i = 0; i < kObjects; ++i) {
    EXPECT_EQ(f.Present(Key("l", i)), i >= 5) << i;
  }
  // A goal of 500 bytes keeps the 100 best (1,000 bytes) of 495.
  r = f.Evict(k, 500);
  EXPECT_EQ(r.ranked, 100u);
  EXPECT_EQ(r.evicted_objects, 50u);
  for (int i = 0; i < kObjects; ++i) {
    EXPECT_EQ(f.Present(Key("l", i)), i >= 55) << i;
  }

  // Equal leases: the larger first.
  Fixture g;
  for (int i : order) g.Make(Key("s", i), 1 + i);
  r = g.Evict(k, 3 * kObjects - 3);  // the three largest: 500 + 499 + 498
  EXPECT_EQ(r.evicted_objects, 3u);
  EXPECT_LT(r.ranked, static_cast<std::size_t>(kObjects));
  for (int i = 0; i < kObjects; ++i) {
    EXPECT_EQ(g.Present(Key("s", i)), i < kObjects - 3) << i;
  }
}

// V2 with the bounded ranking: when skips use up every kept candidate
// before the goal while more exist, the kernel runs another census round
// and still frees the goal.
TEST(EvictionTest, V2SkipsBeyondTheKeptCandidatesStartAnotherCensusRound) {
  Fixture f;
  for (int i = 0; i < 200; ++i) f.Make(Key("o", i), 10);
  Kernel::Options o;
  Dir* dir = f.dir.get();
  int offers = 0;
  // The first 20 candidates offered change (a version bump) before their
  // commit, so each is skipped: round one keeps only kMinRanked of them.
  o.offload = [&](const Handle& h) {
    if (++offers <= 20) {
      EXPECT_TRUE(
          dir->WithHandleExclusive(h, [](Access& a) { a.set_size_bytes(10); })
              .ok());
    }
    return true;
  };
  Kernel k(o);
  EvictionResult r = f.Evict(k, 10);
  EXPECT_EQ(r.census_rounds, 2u);
  EXPECT_EQ(r.skipped, 20u);
  EXPECT_EQ(r.evicted_objects, 1u);
  EXPECT_EQ(r.freed_bytes, 10u);
  EXPECT_EQ(f.dir->object_count(), 199u);
  EXPECT_EQ(f.quota.charged(), 1990u);
}

// V4 with census rounds: a candidate whose hand-off was refused (and kept)
// is not offered again by a later round of the same call.
TEST(EvictionTest, V4RefusedHandOffIsNotOfferedAgainByALaterRound) {
  Fixture f;
  for (int i = 0; i < 100; ++i) f.Make(Key("o", i), 10);
  for (int i = 0; i < 4; ++i) f.Make(Key("m", i), 10, {}, "grp");
  Kernel::Options o;
  std::map<ObjectId, int> offered;
  int refusals = 0;
  o.offload = [&](const Handle& h) {
    ++offered[h->id()];
    return ++refusals > 40;  // the first 40 offers are refused
  };
  Kernel k(o);
  EvictionResult r = f.Evict(k, 10);
  EXPECT_GE(r.census_rounds, 2u);
  EXPECT_GE(r.freed_bytes, 10u);
  for (const auto& [id, n] : offered) EXPECT_EQ(n, 1) << id;
  EXPECT_GE(r.offload_refused, 16u);
}

// The census visitor runs with no lock of the directory held, chunk after
// chunk: it may write the very object it was just handed.
TEST(EvictionTest, CensusVisitorRunsWithNoDirectoryLockHeld) {
  Fixture f;
  for (int i = 0; i < 40; ++i) f.Make(Key("o", i), 10, {}, i % 2 ? "g" : "");
  testing::Watchdog watchdog(testing::kWatchdogBound, "census visitor");
  std::size_t seen = 0;
  Dir* dir = f.dir.get();
  ASSERT_TRUE(DirectoryHooks::Census(
                  *f.dir,
                  [&](const Handle& h, const ObjectMetadata&) {
                    ++seen;
                    EXPECT_TRUE(
                        dir->WithHandleExclusive(
                               h, [](Access& a) { a.payload().value += 1; })
                            .ok());
                    EXPECT_TRUE(dir->Erase(h->key()).ok());
                  },
                  3)
                  .ok());
  EXPECT_EQ(seen, 40u);
  EXPECT_EQ(f.dir->object_count(), 0u);
}

// The stop rule: a commit whose durable-log reservation fails ends the
// cycle there (a log that refuses one reservation refuses the next ones),
// reported in EvictionResult::status; later candidates, the soft-pinned
// pass and further census rounds are not tried.
TEST(EvictionTest, FailedLogReservationStopsTheCycleAndIsReported) {
  InMemoryDurableLog log;
  Fixture f(&log);
  f.Make("a", 10, std::chrono::seconds(1));  // ranked first
  f.Make("b", 10, std::chrono::seconds(2));
  f.Make("c", 10, std::chrono::seconds(3));
  f.Make("soft", 10);
  ASSERT_TRUE(f.dir
                  ->WithObjectExclusive("soft",
                                        [&](Access& a) {
                                          a.set_soft_pin_deadline_nanos(
                                              f.clock.NowNanos() +
                                              1'000'000'000'000);
                                        })
                  .ok());
  f.clock.Advance(std::chrono::seconds(5));
  Kernel::Options o;
  o.allow_soft_pinned = true;
  Kernel k(o);
  const std::uint64_t reserves = log.reserve_calls();
  log.FailReserve(ResourceExhaustedError("log full"));
  EvictionResult r = f.Evict(k, 40, 40);
  EXPECT_EQ(log.reserve_calls() - reserves, 1u)
      << "the cycle went on after the log refused a reservation";
  EXPECT_EQ(r.status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status.message(), "log full");
  EXPECT_EQ(r.evicted_objects, 0u);
  EXPECT_EQ(r.freed_bytes, 0u);
  EXPECT_EQ(r.skipped, 0u);
  EXPECT_FALSE(r.used_soft_pinned_pass);
  EXPECT_EQ(r.census_rounds, 1u);
  for (const char* key : {"a", "b", "c", "soft"}) {
    EXPECT_TRUE(f.Present(key)) << key;
  }
  EXPECT_TRUE(f.removed.empty());
  EXPECT_EQ(f.quota.charged(), 40u);
  EXPECT_EQ(log.open_reservations(), 0u);
  // The log accepts again: the next cycle evicts and reports OK.
  r = f.Evict(k, 40, 40);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.evicted_objects, 4u);
  EXPECT_TRUE(r.used_soft_pinned_pass);
}

TEST(EvictionTest, WatermarkPolicyRejectsNonsenseRatios) {
  Kernel k;
  Registry registry;
  auto bad = [&](MemoryWatermarkPolicy p) {
    return k.RunWatermark(registry, p).status().code();
  };
  MemoryWatermarkPolicy ok;
  ok.capacity_bytes = 100;
  EXPECT_TRUE(k.RunWatermark(registry, ok).ok());
  MemoryWatermarkPolicy p = ok;
  p.capacity_bytes = 0;
  EXPECT_EQ(bad(p), StatusCode::kInvalidArgument);
  p = ok;
  p.high_watermark_ratio = 1.5;
  EXPECT_EQ(bad(p), StatusCode::kInvalidArgument);
  p = ok;
  p.high_watermark_ratio = 0;
  EXPECT_EQ(bad(p), StatusCode::kInvalidArgument);
  p = ok;
  p.target_ratio = 0.95;  // above the lower bound
  EXPECT_EQ(bad(p), StatusCode::kInvalidArgument);
  p = ok;
  p.lower_bound_ratio = 0.99;  // above the high watermark
  EXPECT_EQ(bad(p), StatusCode::kInvalidArgument);
  p = ok;
  p.target_ratio = -0.1;
  EXPECT_EQ(bad(p), StatusCode::kInvalidArgument);
  p = ok;
  p.target_ratio = std::nan("");
  EXPECT_EQ(bad(p), StatusCode::kInvalidArgument);
}

// ---- Evict-and-retry (V6) ---------------------------------------------------

// A tenant at its quota limit with ten objects of 10 counted bytes, leases
// ended one second apart (so the V3 order is k0, k1, ...).
struct AdmitFixture {
  AdmitFixture() {
    auto factory = [this](std::string_view) -> Result<TenantOptions> {
      TenantOptions t;
      t.quota_limit_bytes = 100;
      t.directory.clock = &clock;
      t.directory.route.bucket_count = 64;
      return t;
    };
    tenant = registry.GetOrCreate("a", factory).value();
    for (int i = 0; i < 10; ++i) {
      CreateOptions c;
      c.size_bytes = c.counted_bytes = 10;
      c.lease_ttl = std::chrono::seconds(i + 1);
      EXPECT_TRUE(tenant->directory().Create(Key("k", i), c).ok());
    }
    clock.Advance(std::chrono::seconds(11));  // every lease has ended
  }
  // The host's put: a create charging `bytes`.
  auto Put(std::string key, std::uint64_t bytes) {
    return [this, key = std::move(key), bytes] {
      CreateOptions c;
      c.size_bytes = c.counted_bytes = bytes;
      return tenant->directory().Create(key, c);
    };
  }
  std::uint64_t CountedSum() {
    std::uint64_t sum = 0;
    EXPECT_TRUE(
        DirectoryHooks::Census(tenant->directory(),
                               [&](const Handle&, const ObjectMetadata& m) {
                                 sum += m.counted_bytes;
                               })
            .ok());
    return sum;
  }
  bool Present(std::string_view key) {
    return tenant->directory().Pin(key).ok();
  }

  ManualClock clock;
  Registry registry;
  Registry::Handle tenant;
};

TEST(EvictionTest, V6EvictAndRetryAdmitsAPutTheQuotaRefused) {
  AdmitFixture f;
  // Mooncake's PutStart at a full tenant: refused, the tenant's deficit
  // evicted, the put retried.
  ASSERT_EQ(f.Put("new", 25)().status().code(), StatusCode::kResourceExhausted);
  Kernel k;
  auto admitted = k.AdmitEvicting(*f.tenant, 25, f.Put("new", 25));
  ASSERT_TRUE(admitted.put.ok()) << admitted.put.status().ToString();
  EXPECT_EQ(admitted.rounds, 1u);
  EXPECT_TRUE(admitted.eviction.status.ok());
  // It lacked 25 bytes: the three earliest leases go (30 bytes), no more.
  EXPECT_EQ(admitted.eviction.evicted_objects, 3u);
  EXPECT_EQ(admitted.eviction.freed_bytes, 30u);
  EXPECT_FALSE(f.Present(Key("k", 0)));
  EXPECT_FALSE(f.Present(Key("k", 2)));
  EXPECT_TRUE(f.Present(Key("k", 3)));
  EXPECT_TRUE(f.Present("new"));
  EXPECT_EQ(f.tenant->quota().charged(), 95u);
  EXPECT_EQ(f.CountedSum(), 95u) << "Q2";
  // A put that fits runs once, with no eviction.
  auto fits = k.AdmitEvicting(*f.tenant, 5, f.Put("small", 5));
  EXPECT_TRUE(fits.put.ok());
  EXPECT_EQ(fits.rounds, 0u);
  EXPECT_EQ(f.tenant->directory().object_count(), 9u);
}

// With offload_async, a host that demotes inside the hook (Keep with fewer
// counted bytes) frees room through the ticket, not through the eviction's
// freed bytes: AdmitEvicting sees it in the account and retries the put.
// Planted bug: stopping when the eviction freed nothing (freed_bytes == 0)
// returned the first refusal after one round.
TEST(EvictionTest, V6RetriesAfterATicketCompletedInTheHookMadeRoom) {
  AdmitFixture f;
  Kernel::Options o;
  std::size_t kept = 0;
  o.offload_async = [&](OffloadTicket<TestPayload> t) {
    // Demote to 1 counted byte: the object stays, 9 bytes are refunded.
    OffloadCompletion done =
        t.Keep(KeptBytes{10, 1}, [](Access& a) { a.payload().value = 2; });
    EXPECT_TRUE(done.status.ok()) << done.status.ToString();
    kept += done.applied;
  };
  Kernel k(o);
  auto admitted = k.AdmitEvicting(*f.tenant, 25, f.Put("new", 25));
  ASSERT_TRUE(admitted.put.ok()) << admitted.put.status().ToString();
  EXPECT_EQ(admitted.eviction.freed_bytes, 0u);
  EXPECT_EQ(admitted.eviction.evicted_objects, 0u);
  EXPECT_GE(kept, 3u);  // 25 bytes lacking, 9 refunded per demotion
  EXPECT_EQ(f.tenant->directory().object_count(), 11u);  // nothing removed
  EXPECT_EQ(f.CountedSum(), f.tenant->quota().charged()) << "Q2";
}

TEST(EvictionTest, V6SaysWhyNotAndEvictsNothingItCannotUse) {
  AdmitFixture f;
  Kernel k;
  // A charge over the limit itself can never be admitted: nothing evicted.
  auto huge = k.AdmitEvicting(*f.tenant, 101, f.Put("huge", 101));
  EXPECT_EQ(huge.put.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(huge.rounds, 0u);
  // Another error than the quota's: returned at once. (At a full tenant
  // the same put is refused by the quota first: the directory charges
  // before it finds the key, so AdmitEvicting would evict for it.)
  f.tenant->quota().set_limit(1000);
  auto exists = k.AdmitEvicting(*f.tenant, 10, f.Put(Key("k", 4), 10));
  EXPECT_EQ(exists.put.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(exists.rounds, 0u);
  EXPECT_EQ(f.tenant->directory().object_count(), 10u);
  f.tenant->quota().set_limit(100);
  // Nothing evictable (every object leased again): one eviction that frees
  // nothing, and the put's refusal.
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(f.tenant->directory()
                    .WithObjectExclusive(
                        Key("k", i),
                        [&](Access& a) { a.GrantLease(std::chrono::hours(1)); })
                    .ok());
  }
  auto leased = k.AdmitEvicting(*f.tenant, 10, f.Put("new", 10));
  EXPECT_EQ(leased.put.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(leased.rounds, 1u);
  EXPECT_EQ(leased.eviction.evicted_objects, 0u);
  EXPECT_EQ(f.tenant->directory().object_count(), 10u);
  // Admission closed: no eviction.
  f.clock.Advance(std::chrono::hours(2));
  f.tenant->quota().CloseAdmission();
  auto closed = k.AdmitEvicting(*f.tenant, 10, f.Put("new", 10));
  EXPECT_EQ(closed.put.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(closed.rounds, 0u);
  EXPECT_EQ(f.tenant->directory().object_count(), 10u);
  EXPECT_EQ(f.CountedSum(), f.tenant->quota().charged()) << "Q2";
}

// Eight threads put into one full tenant through AdmitEvicting: the quota is
// never passed (Q1), every put either lands or says why, and the ledger
// matches the objects at the end (Q2).
TEST(EvictionStressTest, V6RacingAdmissionsKeepTheQuota) {
  AdmitFixture f;
  Kernel k;
  constexpr int kThreads = 8;
  const int puts = testing::StressIterations(200);
  std::atomic<int> admitted{0};
  std::atomic<bool> over{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < puts; ++i) {
        std::string key = "t" + std::to_string(t) + "-" + std::to_string(i);
        auto r = k.AdmitEvicting(*f.tenant, 10, f.Put(key, 10));
        if (r.put.ok()) {
          admitted.fetch_add(1);
        } else if (r.put.status().code() != StatusCode::kResourceExhausted) {
          ADD_FAILURE() << r.put.status().ToString();
        }
        if (f.tenant->quota().charged() > 100) over.store(true);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(over.load()) << "Q1";
  EXPECT_GT(admitted.load(), 0);
  EXPECT_LE(f.tenant->quota().charged(), 100u);
  EXPECT_EQ(f.CountedSum(), f.tenant->quota().charged()) << "Q2";
}

}  // namespace
}  // namespace cairn
