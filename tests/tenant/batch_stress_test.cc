// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Batch mutations of one tenant's directory (D10) racing eviction (V1, V5)
// and the takeover of expired pending puts and staged upserts (D11), with
// partial settlement (Q4). Every per-key status is one its single call
// documents; a taken-over token's late Commit/Abort fails as D11 says and
// its removal is emitted once; at quiescence the account equals the live
// objects' charges (Q2) and an evicted group has no member left (V1).
// TSan checks the locking.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/directory/durable_log.h"
#include "cairn/ha/replay.h"
#include "cairn/tenant/eviction.h"
#include "cairn/tenant/tenant_registry.h"
#include "directory/directory_testing.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::Key;
using testing::TestPayload;
using Registry = TenantRegistry<TestPayload>;
using Dir = GroupDirectory<TestPayload>;
using Handle = ObjectHandle<TestPayload>;
using Kernel = Evictor<TestPayload>;
using PendingPut = Dir::PendingPut;
using std::chrono::microseconds;

constexpr int kKeys = 128;
constexpr int kGroupedKeys = 32;  // keys 0..31: groups of 4 adjacent keys
constexpr int kUpsertKeys = 16;   // the last 16 keys, singletons
constexpr std::uint64_t kLimit = 5000;
constexpr std::uint64_t kHighWater = 2500;  // the eviction thread's trigger
constexpr std::uint64_t kLowWater = 1500;   // ... and its goal
// On the manual clock, which the takeover threads advance by 1-20 us per
// step: a put left alone expires after ~100 of their steps, one committed
// right after its batch almost never.
constexpr microseconds kPendingTimeout{1000};

bool OneOf(const Status& s, std::initializer_list<StatusCode> codes) {
  for (StatusCode c : codes) {
    if (s.code() == c) return true;
  }
  return false;
}

// A pending put this test made and has not settled yet.
struct Held {
  int key = 0;
  ObjectToken token;
  std::uint64_t reserved = 0;
};

// A named staging this test made and has not settled yet.
struct Staged {
  int key = 0;
  ObjectToken token;
  UpsertStage stage;
};

CommitOptions Settle(std::uint64_t counted) {
  CommitOptions o;
  o.counted_bytes = counted;
  return o;
}

TEST(BatchTakeoverStressTest, BatchesRaceEvictionAndTakeoverKeepQ2AndV1) {
  ManualClock clock;
  InMemoryDurableLog log;
  std::mutex removed_mu;
  std::map<ObjectId, int> removed;  // removal callbacks per instance
  Registry registry;
  auto factory = [&](std::string_view) -> Result<TenantOptions> {
    TenantOptions t;
    t.quota_limit_bytes = kLimit;
    t.directory.clock = &clock;
    t.directory.durable_log = &log;
    t.directory.pending_put_timeout = kPendingTimeout;
    t.directory.route.bucket_count = 64;
    t.directory.lifecycle_stripes = 8;
    t.directory.on_removed = [&](const RemovedObject& r) {
      std::lock_guard<std::mutex> lock(removed_mu);
      ++removed[r.token.object];
    };
    return t;
  };
  auto tenant = registry.GetOrCreate("batch", factory).value();
  Dir& dir = tenant->directory();
  QuotaAccount& quota = tenant->quota();

  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(Key("k", i));
  std::vector<std::string> group_names;
  for (int g = 0; g < kGroupedKeys / 4; ++g) group_names.push_back(Key("g", g));
  // A put of key i reserving `reserved` counted bytes (CreateOptions keeps
  // a view of the group name: group_names outlives every call).
  auto options_for = [&](int i, std::uint64_t reserved) {
    CreateOptions c;
    c.size_bytes = reserved;
    c.counted_bytes = reserved;
    if (i < kGroupedKeys) c.group = group_names[i / 4];
    return c;
  };
  // A create takes the key (taking over an expired pending put of it,
  // D11), or meets a routed key (kAlreadyExists) or the quota. No EraseGroup
  // runs, so no join meets an explicit teardown (kFailedPrecondition): a join
  // racing an eviction's teardown retries on a fresh group.
  auto create_ok = [](const Status& s) {
    return s.ok() || OneOf(s, {StatusCode::kAlreadyExists,
                               StatusCode::kResourceExhausted});
  };

  std::mutex mu;
  std::set<ObjectId> taken_over;  // our unsettled put, settled by another
  std::set<GroupId> evicted_groups;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> partial_settles{0};
  std::atomic<std::uint64_t> stale_upserts{0};
  std::atomic<std::uint64_t> upsert_commits{0};
  std::atomic<std::uint64_t> batch_erased{0};
  std::atomic<std::uint64_t> quota_refusals{0};
  std::atomic<std::uint64_t> deficit_evicted{0};
  std::atomic<std::uint64_t> evicted{0};

  // Commit or Abort of an unsettled put of ours: OK, or it was taken over
  // (D11: kNotFound, or kFailedPrecondition if the call had already found
  // the removed instance). Nothing else can remove a pending put here: no
  // reaper runs, erases and eviction take active objects only.
  auto settle_result = [&](const Status& s, const Held& h, const char* what) {
    if (s.ok()) return;
    EXPECT_TRUE(
        OneOf(s, {StatusCode::kNotFound, StatusCode::kFailedPrecondition}))
        << what << " of " << keys[h.key] << ": " << s.ToString();
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(taken_over.insert(h.token.object).second)
        << "instance " << h.token.object << " refused twice";
  };
  // Abort takes a route write: under back-pressure it may refuse
  // (kResourceExhausted, nothing changed), so try again.
  auto abort = [&](const Held& h) {
    Status s = dir.Abort(keys[h.key], h.token);
    while (s.code() == StatusCode::kResourceExhausted) {
      std::this_thread::yield();
      s = dir.Abort(keys[h.key], h.token);
    }
    return s;
  };
  auto abort_held = [&](const Held& h) { settle_result(abort(h), h, "Abort"); };
  // Settles a named staging of ours: OK; kFailedPrecondition if a named
  // BeginUpsert took it over (D11); kNotFound if the object went (erase,
  // eviction).
  // `known_taken_over`: the staging is known to have been taken over, so its
  // settlement must be refused (D11), never applied to the new staging.
  auto settle_staged = [&](const Staged& st, bool commit,
                           bool known_taken_over = false) {
    const Status s = commit ? dir.CommitUpsert(keys[st.key], st.token, st.stage)
                            : dir.AbortUpsert(keys[st.key], st.token, st.stage);
    EXPECT_TRUE(
        (s.ok() && !known_taken_over) ||
        OneOf(s, {StatusCode::kNotFound, StatusCode::kFailedPrecondition}))
        << (commit ? "CommitUpsert " : "AbortUpsert ") << keys[st.key] << ": "
        << s.ToString();
    if (s.code() == StatusCode::kFailedPrecondition) {
      stale_upserts.fetch_add(1, std::memory_order_relaxed);
    }
    if (s.ok() && commit) upsert_commits.fetch_add(1);
  };

  std::vector<std::vector<Held>> held(8);  // per thread, read after join
  std::vector<std::vector<Staged>> staged(8);

  // Batch creators: BatchCreatePending of 8-32 keys, then one BatchCommit
  // of most of them (settled at 0-3 of 3 replicas, some asking for more
  // than they reserved) plus some older puts of ours that may have been
  // taken over meanwhile, and a repeated token; some aborted, some left
  // pending to expire.
  auto creator = [&](int t) {
    std::mt19937_64 rng(t * 7919 + 3);
    std::vector<Held>& mine = held[t];
    while (!stop.load(std::memory_order_relaxed)) {
      const int n = 8 + static_cast<int>(rng() % 25);
      std::vector<PendingPut> puts;
      std::vector<int> idx;
      std::vector<std::uint64_t> replica;
      for (int j = 0; j < n; ++j) {
        const int i = static_cast<int>(rng() % kKeys);
        const std::uint64_t r = 1 + rng() % 40;
        idx.push_back(i);
        replica.push_back(r);
        puts.push_back(PendingPut{keys[i], options_for(i, 3 * r), {}});
      }
      const std::vector<Result<Handle>> made = dir.BatchCreatePending(puts);
      ASSERT_EQ(made.size(), puts.size());
      std::vector<std::string_view> ckeys;
      std::vector<ObjectToken> ctokens;
      std::vector<CommitOptions> copts;
      std::vector<Held> cheld;
      std::vector<bool> over;  // asked for more than it reserved
      auto add = [&](const Held& h, CommitOptions o, bool too_much) {
        ckeys.push_back(keys[h.key]);
        ctokens.push_back(h.token);
        copts.push_back(o);
        cheld.push_back(h);
        over.push_back(too_much);
      };
      for (std::size_t j = 0; j < made.size(); ++j) {
        const Status& s = made[j].status();
        EXPECT_TRUE(create_ok(s))
            << "BatchCreatePending " << keys[idx[j]] << ": " << s.ToString();
        if (s.code() == StatusCode::kResourceExhausted) {
          quota_refusals.fetch_add(1, std::memory_order_relaxed);
        }
        if (!s.ok()) continue;
        const Held h{idx[j], made[j]->token(), 3 * replica[j]};
        switch (rng() % 10) {
          case 0:
          case 1:
          case 2:
          case 3:
          case 4:  // 0-3 of the 3 replicas written
            add(h, Settle(replica[j] * (rng() % 4)), false);
            break;
          case 5:
            add(h, Settle(h.reserved + 1), true);
            break;
          case 6:
            abort_held(h);
            break;
          default:  // left pending, to expire
            mine.push_back(h);
            break;
        }
      }
      // Older puts of ours, committed whole.
      for (int j = 0; j < 4 && !mine.empty(); ++j) {
        const std::size_t at = rng() % mine.size();
        add(mine[at], CommitOptions{}, false);
        mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(at));
      }
      const bool repeat = !ckeys.empty() && !over[0] && rng() % 4 == 0;
      if (repeat) {
        ckeys.push_back(ckeys[0]);
        ctokens.push_back(ctokens[0]);
        copts.push_back(copts[0]);
      }
      const std::vector<Status> out = dir.BatchCommit(ckeys, ctokens, copts);
      ASSERT_EQ(out.size(), ckeys.size());
      for (std::size_t j = 0; j < cheld.size(); ++j) {
        const Held& h = cheld[j];
        if (over[j] && out[j].code() == StatusCode::kInvalidArgument) {
          mine.push_back(h);  // refused, still pending and ours (Q4)
          continue;
        }
        if (out[j].ok() && copts[j].counted_bytes.has_value() &&
            *copts[j].counted_bytes < h.reserved) {
          partial_settles.fetch_add(1, std::memory_order_relaxed);
        }
        EXPECT_FALSE(over[j] && out[j].ok()) << "settled above the reservation";
        settle_result(out[j], h, "BatchCommit");
      }
      if (repeat) {
        // The repeat meets what the first did (D10): a second commit of one
        // token is kFailedPrecondition (kNotFound if an erase took the
        // committed object meanwhile); a taken-over one fails again. Never
        // a second OK.
        const Status& again = out.back();
        EXPECT_TRUE(OneOf(
            again, {StatusCode::kNotFound, StatusCode::kFailedPrecondition}))
            << "repeat of " << ckeys[0] << ": " << again.ToString() << " after "
            << out[0].ToString();
      }
      while (mine.size() > 16) {
        abort_held(mine.front());
        mine.erase(mine.begin());
      }
    }
  };

  // Takers-over: advance the clock, then a single CreatePending of a random
  // key (takes over an expired pending put of it, D11) or a named
  // BeginUpsert of its object (takes over an expired staging); their own
  // puts and stagings are settled now, later or never (left to expire).
  auto taker = [&](int t) {
    std::mt19937_64 rng(t * 104729 + 11);
    std::vector<Held>& mine = held[t];
    std::vector<Staged>& stages = staged[t];
    while (!stop.load(std::memory_order_relaxed)) {
      clock.Advance(microseconds(1 + rng() % 20));
      const int i = static_cast<int>(rng() % kKeys);
      const std::uint64_t r = 1 + rng() % 40;
      if (rng() % 3 != 0) {
        Result<Handle> made = dir.CreatePending(keys[i], options_for(i, 3 * r));
        EXPECT_TRUE(create_ok(made.status()))
            << "CreatePending " << keys[i] << ": " << made.status().ToString();
        if (made.ok()) {
          const Held h{i, made->token(), 3 * r};
          if (rng() % 2 == 0) {
            settle_result(dir.Commit(keys[i], h.token, Settle(r * (rng() % 4))),
                          h, "Commit");
          } else {
            mine.push_back(h);
          }
        }
      } else {
        // Upserts go to a few singleton keys, half the time to one this
        // thread staged before, so that an expired staging is met again.
        const int u = !stages.empty() && rng() % 2 == 0
                          ? stages[rng() % stages.size()].key
                          : kKeys - 1 - i % kUpsertKeys;
        Result<Handle> pinned = dir.Pin(keys[u]);
        if (pinned.ok()) {
          Staged st{u, pinned->token(), {}};
          const Status s =
              dir.BeginUpsert(keys[u], st.token, {r, r}, &st.stage);
          EXPECT_TRUE(s.ok() || OneOf(s, {StatusCode::kNotFound,
                                          StatusCode::kFailedPrecondition,
                                          StatusCode::kResourceExhausted}))
              << "BeginUpsert " << keys[u] << ": " << s.ToString();
          if (s.ok()) {
            // A staging of ours on this instance was expired and has just
            // been taken over (D11): settling it now is refused.
            for (std::size_t j = 0; j < stages.size();) {
              if (stages[j].key == u && stages[j].token == st.token) {
                settle_staged(stages[j], rng() % 2 == 0,
                              /*known_taken_over=*/true);
                stages.erase(stages.begin() + static_cast<std::ptrdiff_t>(j));
              } else {
                ++j;
              }
            }
            stages.push_back(st);
          }
        }
      }
      if (rng() % 4 == 0 && !mine.empty()) {
        const std::size_t at = rng() % mine.size();
        const Held h = mine[at];
        mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(at));
        settle_result(
            rng() % 2 == 0 ? dir.Commit(keys[h.key], h.token) : abort(h), h,
            "Commit/Abort");
      }
      if (rng() % 16 == 0 && !stages.empty()) {
        const std::size_t at = rng() % stages.size();
        settle_staged(stages[at], rng() % 3 != 0);
        stages.erase(stages.begin() + static_cast<std::ptrdiff_t>(at));
      }
      while (mine.size() > 8) {
        abort_held(mine.front());
        mine.erase(mine.begin());
      }
      while (stages.size() > 32) {
        settle_staged(stages.front(), false);
        stages.erase(stages.begin());
      }
    }
  };

  // Batch erasers: 8-32 keys, pending or absent ones kNotFound.
  auto eraser = [&](int t) {
    std::mt19937_64 rng(t * 31 + 7);
    while (!stop.load(std::memory_order_relaxed)) {
      const int n = 8 + static_cast<int>(rng() % 25);
      std::vector<std::string_view> erase;
      for (int j = 0; j < n; ++j) {
        // Seldom an upsert key, so that some stagings live to expire.
        const bool any = rng() % 16 == 0;
        erase.push_back(keys[rng() % (any ? kKeys : kKeys - kUpsertKeys)]);
      }
      const std::vector<Status> out = dir.BatchErase(erase);
      ASSERT_EQ(out.size(), erase.size());
      for (std::size_t j = 0; j < out.size(); ++j) {
        EXPECT_TRUE(out[j].ok() || out[j].code() == StatusCode::kNotFound)
            << "BatchErase " << erase[j] << ": " << out[j].ToString();
        if (out[j].ok()) batch_erased.fetch_add(1, std::memory_order_relaxed);
      }
      // Erase less often than the others create.
      std::this_thread::sleep_for(microseconds(200));
    }
  };

  // Eviction: above the high water mark, down to the low one (counted
  // bytes); every few cycles the tenant-quota policy (V5) after the limit
  // drops below the charge, then the limit is put back.
  auto evictor = [&] {
    Kernel::Options ko;
    ko.on_evicted = [&](std::span<EvictedObject<TestPayload>> batch) {
      evicted.fetch_add(batch.size(), std::memory_order_relaxed);
      const GroupId g = batch.front().group;
      for (const auto& x : batch) EXPECT_EQ(x.group, g) << "V1: one group";
      if (g != kNoGroup) {
        std::lock_guard<std::mutex> lock(mu);
        evicted_groups.insert(g);
      }
    };
    Kernel kernel(ko);
    Dir* d = &dir;
    std::uint64_t cycle = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const std::uint64_t charged = quota.charged();
      if (++cycle % 8 == 0) {
        quota.set_limit(charged / 2);
        const EvictionResult r = kernel.RunQuotaDeficit(*tenant);
        EXPECT_TRUE(r.status.ok()) << r.status.ToString();
        deficit_evicted.fetch_add(r.evicted_objects);
        quota.set_limit(kLimit);
      } else if (charged > kHighWater) {
        const EvictionResult r =
            kernel.Evict(std::span<Dir* const>(&d, 1), charged - kLowWater, 0,
                         Kernel::Measure::kCountedBytes);
        EXPECT_TRUE(r.status.ok()) << r.status.ToString();
      }
      std::this_thread::sleep_for(microseconds(100));
    }
  };

  {
    testing::Watchdog watchdog(testing::kWatchdogBound, "batch takeover");
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) threads.emplace_back(creator, t);
    for (int t = 3; t < 5; ++t) threads.emplace_back(taker, t);
    for (int t = 5; t < 7; ++t) threads.emplace_back(eraser, t);
    threads.emplace_back(evictor);
    std::this_thread::sleep_for(testing::StressDuration(1500));
    stop.store(true);
    for (std::thread& th : threads) th.join();
  }

  // Quiescence: settle everything still ours. Staged upserts first (an
  // abort of a put never touches them, and the reverse).
  for (const std::vector<Staged>& v : staged) {
    for (const Staged& st : v) settle_staged(st, false);
  }
  for (const std::vector<Held>& v : held) {
    for (const Held& h : v) abort_held(h);
  }

  // How much each race ran (in the XML output).
  RecordProperty("puts_taken_over", static_cast<int>(taken_over.size()));
  RecordProperty("stagings_taken_over", static_cast<int>(stale_upserts));
  RecordProperty("partial_settles", static_cast<int>(partial_settles));
  RecordProperty("batch_erased", static_cast<int>(batch_erased));
  RecordProperty("evicted", static_cast<int>(evicted));
  RecordProperty("deficit_evicted", static_cast<int>(deficit_evicted));
  EXPECT_GT(taken_over.size(), 0u) << "no pending put was taken over";
  EXPECT_GT(stale_upserts.load(), 0u) << "no staged upsert was taken over";
  EXPECT_GT(upsert_commits.load(), 0u);
  EXPECT_GT(partial_settles.load(), 0u);
  EXPECT_GT(batch_erased.load(), 0u);
  EXPECT_GT(quota_refusals.load(), 0u);
  EXPECT_GT(evicted.load(), 0u);
  EXPECT_GT(deficit_evicted.load(), 0u);

  // Each instance was removed at most once; a taken-over put exactly once
  // (by its takeover, whose callback ran).
  {
    std::lock_guard<std::mutex> lock(removed_mu);
    for (const auto& [id, n] : removed) EXPECT_EQ(n, 1) << id;
    for (ObjectId id : taken_over) {
      EXPECT_EQ(removed.count(id), 1u) << "taken over, never removed: " << id;
    }
  }
  // Q2: no pending charge is left, and the account holds exactly the live
  // objects' committed counted bytes.
  EXPECT_EQ(dir.pending_charge_bytes(), 0u);
  std::uint64_t live = 0;
  std::map<GroupId, std::size_t> routed_members;
  ASSERT_TRUE(DirectoryHooks::Census(dir, [&](const Handle& h,
                                              const ObjectMetadata& m) {
                live += m.counted_bytes;
                if (h->group() != nullptr) ++routed_members[h->group()->id()];
              }).ok());
  EXPECT_EQ(quota.charged(), live) << "Q2";
  EXPECT_LE(quota.charged(), kLimit);
  // V1: a group an eviction took has no member left; a live group's
  // members are all routed.
  for (GroupId g : evicted_groups) EXPECT_EQ(routed_members.count(g), 0u) << g;
  for (const std::string& name : group_names) {
    auto found = dir.FindGroup(name);
    if (!found.ok()) continue;
    EXPECT_EQ(found.value()->member_count(),
              routed_members[found.value()->id()])
        << name;
  }
  EXPECT_EQ(log.open_reservations(), 0u);
  // H1 with D11 and Q4: a standby built from the durable records has the
  // primary's live objects, each with its id, version and counted bytes
  // (a takeover and a refused batch key leave no record).
  struct State {
    ObjectId id = 0;
    std::uint64_t version = 0;
    std::uint64_t counted = 0;
    bool operator==(const State&) const = default;
  };
  auto states_of = [](Dir& d) {
    std::map<std::string, State> out;
    EXPECT_TRUE(DirectoryHooks::Census(d, [&](const Handle& h,
                                              const ObjectMetadata& m) {
                  out[std::string(h->key())] =
                      State{h.token().object, m.version, m.counted_bytes};
                }).ok());
    return out;
  };
  Dir standby{DirectoryOptions{}};
  for (const std::string& body : log.durable_bodies()) {
    DurableRecordView v;
    ASSERT_TRUE(DecodeDurableRecord(body, &v).ok());
    if (v.op == DurableOp::kTenantCreate || v.op == DurableOp::kTenantRemove) {
      continue;
    }
    ASSERT_TRUE(ApplyDurableRecord(standby, v).ok());
  }
  const std::map<std::string, State> primary_states = states_of(dir);
  const std::map<std::string, State> standby_states = states_of(standby);
  EXPECT_FALSE(primary_states.empty());
  EXPECT_EQ(primary_states.size(), standby_states.size());
  for (const auto& [key, state] : primary_states) {
    auto it = standby_states.find(key);
    ASSERT_NE(it, standby_states.end()) << key;
    EXPECT_TRUE(it->second == state)
        << key << ": standby id " << it->second.id << " v" << it->second.version
        << " counted " << it->second.counted << ", primary id " << state.id
        << " v" << state.version << " counted " << state.counted;
  }
}

}  // namespace
}  // namespace cairn
