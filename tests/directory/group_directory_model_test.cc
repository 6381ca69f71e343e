// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Model-based random test: random operation sequences run against the
// directory and against a single-threaded model of the semantics (singletons,
// explicit groups with one shared lease, create-or-join, erase, erase-group
// all-or-none, matched erase, leases on the injected clock, reads that grant
// a lease), compared in full after every step. A second model drives the
// batch mutations (BatchCreatePending, BatchCommit, BatchErase, D10) with
// quota, a durable log and eviction commits, and checks Q2 (charged bytes
// equal the live objects' charges) and V1 (each group wholly present or
// wholly gone) after every step. It runs with a pending-put timeout, so
// its creates take over expired pending puts (D11), and it also aborts
// current and stale tokens and runs the reaper; at the end of each seed
// the durable log is replayed onto an empty directory, which must hold
// the same active objects.

#include <chrono>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/directory/directory_hooks.h"
#include "cairn/directory/durable_log.h"
#include "cairn/directory/group_directory.h"
#include "cairn/directory/quota.h"
#include "cairn/ha/replay.h"
#include "directory/directory_testing.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using std::chrono::nanoseconds;
using std::chrono::seconds;
using testing::TestPayload;

constexpr std::int64_t kReadLease = 2'000'000'000;  // 2 s

struct ModelObject {
  ObjectId id = 0;
  std::string group;  // empty: singleton
  std::int64_t value = 0;
  std::int64_t lease = 0;  // singletons only
};

struct ModelGroup {
  std::set<std::string> members;
  std::int64_t lease = 0;
};

class Model {
 public:
  std::map<std::string, ModelObject> objects;
  std::map<std::string, ModelGroup> groups;

  std::int64_t Lease(const ModelObject& o) const {
    return o.group.empty() ? o.lease : groups.at(o.group).lease;
  }
  void GrantRead(const std::string& key, std::int64_t now) {
    ModelObject& o = objects.at(key);
    std::int64_t& cell = o.group.empty() ? o.lease : groups.at(o.group).lease;
    cell = std::max(cell, now + kReadLease);
  }
  void Remove(const std::string& key) {
    const std::string group = objects.at(key).group;
    objects.erase(key);
    if (!group.empty()) {
      groups.at(group).members.erase(key);
      if (groups.at(group).members.empty()) groups.erase(group);
    }
  }
};

template <typename Tag>
class GroupDirectoryModelTest : public ::testing::Test {};

TYPED_TEST_SUITE(GroupDirectoryModelTest, testing::RouteTypes,
                 testing::RouteTypeNames);

TYPED_TEST(GroupDirectoryModelTest, RandomSequencesMatchSingleThreadedModel) {
  const int seeds = testing::StressIterations(testing::kUnderTsan ? 16 : 40);
  const int steps = testing::StressIterations(testing::kUnderTsan ? 500 : 800);
  for (int seed = 0; seed < seeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ManualClock clock;
    DirectoryOptions options;
    options.clock = &clock;
    options.read_lease_ttl = nanoseconds(kReadLease);
    options.route.bucket_count = 4;
    options.lifecycle_stripes = 2;
    std::map<ObjectId, int> removals;
    options.on_removed = [&](const RemovedObject& r) {
      ++removals[r.token.object];
    };
    testing::TestDirectory<TypeParam> dir(std::move(options));
    Model model;
    std::mt19937_64 rng(seed * 7919 + 17);
    std::vector<std::string> keys;
    for (int i = 0; i < 10; ++i) keys.push_back(testing::Key("key", i));
    const std::vector<std::string> group_names = {"ga", "gb", "gc"};
    // Old identities, for stale EraseIfMatch.
    std::vector<std::pair<std::string,
                          typename testing::TestDirectory<TypeParam>::Handle>>
        history;

    auto pick = [&](const auto& v) -> const auto& {
      return v[rng() % v.size()];
    };

    for (int step = 0; step < steps; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const std::int64_t now = clock.NowNanos();
      const int op = static_cast<int>(rng() % 11);
      const std::string& key = pick(keys);
      switch (op) {
        case 0:
        case 1: {  // create singleton or member
          CreateOptions create;
          std::string group;
          if (op == 1) {
            group = pick(group_names);
            create.group = group;
          }
          const bool leased = rng() % 3 == 0;
          if (leased) create.lease_ttl = seconds(5);
          const std::int64_t value = static_cast<std::int64_t>(rng() % 1000);
          auto result = dir.Create(key, create, TestPayload{value, 0, 0});
          if (model.objects.count(key) != 0) {
            EXPECT_EQ(result.status().code(), StatusCode::kAlreadyExists);
            break;
          }
          ASSERT_TRUE(result.ok()) << result.status().ToString();
          ModelObject o;
          o.id = result.value()->id();
          o.group = group;
          o.value = value;
          const std::int64_t deadline =
              leased ? now + nanoseconds(seconds(5)).count() : 0;
          if (group.empty()) {
            o.lease = deadline;
          } else {
            ModelGroup& g = model.groups[group];
            g.members.insert(key);
            g.lease = std::max(g.lease, deadline);
          }
          model.objects[key] = o;
          history.emplace_back(key, std::move(result).value());
          break;
        }
        case 2: {  // erase
          const bool force = rng() % 2 == 0;
          const Status s = dir.Erase(key, EraseOptions{force});
          auto it = model.objects.find(key);
          if (it == model.objects.end()) {
            EXPECT_EQ(s.code(), StatusCode::kNotFound);
          } else if (!force && model.Lease(it->second) > now) {
            EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
          } else {
            EXPECT_TRUE(s.ok()) << s.ToString();
            model.Remove(key);
          }
          break;
        }
        case 3: {  // erase group
          const std::string& group = pick(group_names);
          const bool force = rng() % 2 == 0;
          const Status s = dir.EraseGroup(group, EraseOptions{force});
          auto it = model.groups.find(group);
          if (it == model.groups.end()) {
            EXPECT_EQ(s.code(), StatusCode::kNotFound);
          } else if (!force && it->second.lease > now) {
            EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
          } else {
            EXPECT_TRUE(s.ok()) << s.ToString();
            const std::set<std::string> members = it->second.members;
            for (const auto& m : members) model.Remove(m);
          }
          break;
        }
        case 4: {  // matched erase with a current or stale identity
          if (history.empty()) break;
          const auto& [old_key, handle] = pick(history);
          const Status s = dir.EraseIfMatch(old_key, handle->id(), handle.get(),
                                            EraseOptions{true});
          auto it = model.objects.find(old_key);
          const bool expect =
              it != model.objects.end() && it->second.id == handle->id();
          EXPECT_EQ(s.code(), expect ? StatusCode::kOk : StatusCode::kNotFound);
          if (expect) model.Remove(old_key);
          break;
        }
        case 5: {  // exclusive write
          const std::int64_t value = static_cast<std::int64_t>(rng() % 1000);
          const Status s = dir.WithObjectExclusive(
              key, [&](auto& a) { a.payload().value = value; });
          auto it = model.objects.find(key);
          if (it == model.objects.end()) {
            EXPECT_EQ(s.code(), StatusCode::kNotFound);
          } else {
            EXPECT_TRUE(s.ok());
            it->second.value = value;
          }
          break;
        }
        case 6: {  // shared batch read (grants the read lease)
          std::vector<std::string_view> batch;
          for (int i = 0; i < 5; ++i) batch.push_back(pick(keys));
          ASSERT_TRUE(
              dir.WithObjects(batch,
                              [&](std::size_t i, StatusCode code, auto* v) {
                                const std::string k(batch[i]);
                                auto it = model.objects.find(k);
                                if (it == model.objects.end()) {
                                  EXPECT_EQ(code, StatusCode::kNotFound);
                                  EXPECT_EQ(v, nullptr);
                                  return;
                                }
                                ASSERT_NE(v, nullptr);
                                model.GrantRead(k, now);
                                EXPECT_EQ(v->id(), it->second.id);
                                EXPECT_EQ(v->payload().value, it->second.value);
                                EXPECT_EQ(v->lease_deadline_nanos(),
                                          model.Lease(it->second));
                              })
                  .ok());
          break;
        }
        case 7: {  // point read
          const Status s = dir.WithObject(key, [&](auto& v) {
            EXPECT_EQ(v.payload().value, model.objects.at(key).value);
          });
          if (model.objects.count(key) == 0) {
            EXPECT_EQ(s.code(), StatusCode::kNotFound);
          } else {
            EXPECT_TRUE(s.ok());
            model.GrantRead(key, now);
          }
          break;
        }
        case 8:
          clock.Advance(seconds(1 + static_cast<int>(rng() % 3)));
          break;
        case 9: {  // pin
          auto pinned = dir.Pin(key);
          auto it = model.objects.find(key);
          EXPECT_EQ(pinned.ok(), it != model.objects.end());
          if (pinned.ok() && it != model.objects.end()) {
            EXPECT_EQ(pinned.value()->id(), it->second.id);
          }
          break;
        }
        default: {  // token lookup with a current or stale token
          if (history.empty()) break;
          const auto& [old_key, handle] = pick(history);
          const Status s =
              dir.WithTokenExclusive(old_key, handle.token(), [](auto&) {});
          auto it = model.objects.find(old_key);
          EXPECT_EQ(s.ok(),
                    it != model.objects.end() && it->second.id == handle->id());
          break;
        }
      }

      // Full comparison (exclusive access grants no lease, so it observes
      // without changing the model).
      for (const auto& k : keys) {
        auto it = model.objects.find(k);
        const Status s = dir.WithObjectExclusive(k, [&](auto& a) {
          ASSERT_NE(it, model.objects.end());
          EXPECT_EQ(a.id(), it->second.id);
          EXPECT_EQ(a.payload().value, it->second.value);
          EXPECT_EQ(a.lease_deadline_nanos(), model.Lease(it->second));
          EXPECT_EQ(a.is_singleton(), it->second.group.empty());
        });
        EXPECT_EQ(s.ok(), it != model.objects.end()) << k;
      }
      for (const auto& name : group_names) {
        auto found = dir.FindGroup(name);
        auto it = model.groups.find(name);
        ASSERT_EQ(found.ok(), it != model.groups.end()) << name;
        if (!found.ok()) continue;
        std::set<ObjectId> ids;
        for (ObjectId id : found.value()->MemberIds()) ids.insert(id);
        std::set<ObjectId> expected;
        for (const auto& m : it->second.members)
          expected.insert(model.objects.at(m).id);
        EXPECT_EQ(ids, expected);
        EXPECT_EQ(found.value()->lease_deadline_nanos(), it->second.lease);
      }
      EXPECT_EQ(dir.object_count(), model.objects.size());
      EXPECT_EQ(dir.group_count(), model.groups.size());
      std::size_t visited = 0;
      ASSERT_TRUE(
          dir.VisitHandles([&](auto handles) { visited += handles.size(); }, 3)
              .ok());
      EXPECT_EQ(visited, model.objects.size());
      if (::testing::Test::HasFailure()) return;
    }
    for (const auto& [id, count] : removals) EXPECT_EQ(count, 1) << id;
  }
}

struct BatchModelObject {
  ObjectToken token;
  std::string group;
  std::uint64_t counted = 0;
  bool pending = true;
  bool hard_pin = false;
  std::int64_t lease = 0;  // singletons only
  std::int64_t since = 0;  // when the pending put was made
};

constexpr std::int64_t kPendingTimeout = 2'000'000'000;  // 2 s

TYPED_TEST(GroupDirectoryModelTest, D10Q2V1BatchMutationsMatchModel) {
  using Dir = testing::TestDirectory<TypeParam>;
  using Handle = typename Dir::Handle;
  const int seeds = testing::StressIterations(testing::kUnderTsan ? 8 : 30);
  const int steps = testing::StressIterations(testing::kUnderTsan ? 300 : 600);
  for (int seed = 0; seed < seeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ManualClock clock;
    QuotaAccount quota(400);
    InMemoryDurableLog log;
    DirectoryOptions options;
    options.clock = &clock;
    options.quota = &quota;
    options.durable_log = &log;
    options.route.bucket_count = 4;
    options.lifecycle_stripes = 2;
    options.pending_put_timeout = nanoseconds(kPendingTimeout);
    std::map<ObjectId, int> removals;
    options.on_removed = [&](const RemovedObject& r) {
      ++removals[r.token.object];
    };
    Dir dir(std::move(options));
    std::map<std::string, BatchModelObject> model;
    std::map<std::string, std::int64_t> group_lease;  // live groups only
    std::vector<std::pair<std::string, ObjectToken>> history;
    std::mt19937_64 rng(seed * 104729 + 3);
    auto rand = [&](std::uint64_t n) { return rng() % n; };
    std::vector<std::string> keys;
    for (int i = 0; i < 12; ++i) keys.push_back(testing::Key("k", i));
    const std::vector<std::string> groups = {"", "", "ga", "gb"};
    auto charged = [&] {
      std::uint64_t sum = 0;
      for (const auto& [k, o] : model) sum += o.counted;
      return sum;
    };
    auto members = [&](const std::string& group) {
      std::vector<std::string> out;
      for (const auto& [k, o] : model) {
        if (o.group == group) out.push_back(k);
      }
      return out;
    };
    auto remove = [&](const std::string& key) {
      const std::string group = model.at(key).group;
      model.erase(key);
      if (!group.empty() && members(group).empty()) group_lease.erase(group);
    };
    auto lease_of = [&](const BatchModelObject& o) {
      return o.group.empty() ? o.lease : group_lease.at(o.group);
    };
    // The reaper's expiry rule (D11): pending and made at or before the
    // cutoff.
    auto expired = [&](const std::string& key, std::int64_t now) {
      auto it = model.find(key);
      return it != model.end() && it->second.pending &&
             it->second.since <= now - kPendingTimeout;
    };

    for (int step = 0; step < steps; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const std::int64_t now = clock.NowNanos();
      const std::size_t batch = 1 + rand(5);
      switch (rand(9)) {
        case 0:
        case 1: {  // BatchCreatePending
          std::vector<std::string> names;
          std::vector<typename Dir::PendingPut> puts;
          for (std::size_t i = 0; i < batch; ++i) {
            names.push_back(keys[rand(keys.size())]);
          }
          for (const std::string& n : names) {
            typename Dir::PendingPut put;
            put.key = n;
            put.options.counted_bytes = rand(4) == 0 ? 0 : 1 + rand(120);
            put.options.size_bytes = put.options.counted_bytes;
            put.options.group = groups[rand(groups.size())];
            put.options.hard_pin = rand(8) == 0;
            if (rand(4) == 0) put.options.lease_ttl = std::chrono::seconds(3);
            puts.push_back(std::move(put));
          }
          const auto made = dir.BatchCreatePending(puts);
          ASSERT_EQ(made.size(), puts.size());
          for (std::size_t i = 0; i < puts.size(); ++i) {
            const CreateOptions& o = puts[i].options;
            // As CreatePending: the quota is charged before the route is
            // looked at; refused, an expired pending put of the key is
            // aborted and the charge tried again (D11).
            auto fits = [&] {
              return o.counted_bytes == 0 ||
                     charged() + o.counted_bytes <= quota.limit();
            };
            if (!fits()) {
              if (expired(names[i], now)) remove(names[i]);
              if (!fits()) {
                EXPECT_EQ(made[i].status().code(),
                          StatusCode::kResourceExhausted);
                continue;
              }
            }
            if (model.count(names[i]) != 0) {
              if (!expired(names[i], now)) {
                EXPECT_EQ(made[i].status().code(), StatusCode::kAlreadyExists);
                continue;
              }
              remove(names[i]);  // taken over (D11)
            }
            ASSERT_TRUE(made[i].ok()) << made[i].status().ToString();
            BatchModelObject m;
            m.token = made[i]->token();
            m.group = std::string(o.group);
            m.counted = o.counted_bytes;
            m.hard_pin = o.hard_pin;
            m.since = now;
            const std::int64_t deadline =
                o.lease_ttl.count() > 0 ? now + o.lease_ttl.count() : 0;
            if (m.group.empty()) {
              m.lease = deadline;
            } else {
              std::int64_t& g = group_lease[m.group];
              g = std::max(g, deadline);
            }
            model[names[i]] = m;
            history.emplace_back(names[i], m.token);
          }
          break;
        }
        case 2: {  // BatchCommit of current and stale tokens
          if (history.empty()) break;
          std::vector<std::string> names;
          std::vector<ObjectToken> tokens;
          for (std::size_t i = 0; i < batch; ++i) {
            const auto& [k, t] = history[rand(history.size())];
            names.push_back(k);
            tokens.push_back(t);
          }
          // Half the batches settle partially (Q4): each put at most its
          // reservation, now and then one byte over (refused).
          std::vector<CommitOptions> settle;
          if (rand(2) == 0) {
            for (std::size_t i = 0; i < names.size(); ++i) {
              auto it = model.find(names[i]);
              const std::uint64_t reserved =
                  it == model.end() ? 0 : it->second.counted;
              CommitOptions o;
              if (rand(3) != 0) {
                o.counted_bytes =
                    rand(6) == 0 ? reserved + 1 : rand(reserved + 1);
              }
              settle.push_back(o);
            }
          }
          std::vector<std::string_view> views(names.begin(), names.end());
          const std::vector<Status> out =
              dir.BatchCommit(views, tokens, settle);
          ASSERT_EQ(out.size(), names.size());
          for (std::size_t i = 0; i < names.size(); ++i) {
            auto it = model.find(names[i]);
            // kWhole: commits the whole reservation.
            constexpr std::uint64_t kWhole = ~std::uint64_t{0};
            const std::uint64_t settled =
                settle.empty() || !settle[i].counted_bytes.has_value()
                    ? kWhole
                    : *settle[i].counted_bytes;
            if (it == model.end() ||
                it->second.token.object != tokens[i].object) {
              EXPECT_EQ(out[i].code(), StatusCode::kNotFound);
            } else if (!it->second.pending) {
              EXPECT_EQ(out[i].code(), StatusCode::kFailedPrecondition);
            } else if (settled != kWhole && settled > it->second.counted) {
              EXPECT_EQ(out[i].code(), StatusCode::kInvalidArgument);
            } else {
              EXPECT_TRUE(out[i].ok()) << out[i].ToString();
              it->second.pending = false;
              if (settled != kWhole) it->second.counted = settled;
            }
          }
          break;
        }
        case 7: {  // AdjustCharge of a current or stale token (Q4)
          if (history.empty()) break;
          const auto& [k, t] = history[rand(history.size())];
          const ChargeAdjustment a{rand(60), rand(60)};
          const Status s = dir.AdjustCharge(k, t, a);
          auto it = model.find(k);
          if (it == model.end() || it->second.token.object != t.object ||
              it->second.pending) {
            EXPECT_EQ(s.code(), StatusCode::kNotFound);
          } else if (a.refund_bytes > a.charge_bytes + it->second.counted) {
            EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
          } else if (a.charge_bytes > a.refund_bytes &&
                     charged() + a.charge_bytes - a.refund_bytes >
                         quota.limit()) {
            EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
          } else {
            EXPECT_TRUE(s.ok()) << s.ToString();
            it->second.counted += a.charge_bytes;
            it->second.counted -= a.refund_bytes;
          }
          break;
        }
        case 3: {  // BatchErase
          std::vector<std::string> names;
          for (std::size_t i = 0; i < batch; ++i) {
            names.push_back(keys[rand(keys.size())]);
          }
          const bool force = rand(2) == 0;
          std::vector<std::string_view> views(names.begin(), names.end());
          const std::vector<Status> out =
              dir.BatchErase(views, EraseOptions{force});
          for (std::size_t i = 0; i < names.size(); ++i) {
            auto it = model.find(names[i]);
            if (it == model.end() || it->second.pending) {
              EXPECT_EQ(out[i].code(), StatusCode::kNotFound);
            } else if (!force && lease_of(it->second) > now) {
              EXPECT_EQ(out[i].code(), StatusCode::kFailedPrecondition);
            } else {
              EXPECT_TRUE(out[i].ok()) << out[i].ToString();
              remove(names[i]);
            }
          }
          break;
        }
        case 4: {  // an eviction commit of one unit (V1)
          const std::string& key = keys[rand(keys.size())];
          Result<Handle> h = dir.Pin(key);
          auto it = model.find(key);
          ASSERT_EQ(h.ok(), it != model.end() && !it->second.pending);
          if (!h.ok()) break;
          std::uint64_t version = 0;
          ASSERT_TRUE(
              dir.WithHandle(h.value(),
                             [&](const auto& v) { version = v.version(); })
                  .ok());
          std::vector<std::string> unit = it->second.group.empty()
                                              ? std::vector<std::string>{key}
                                              : members(it->second.group);
          bool evictable = true;
          for (const std::string& m : unit) {
            const BatchModelObject& o = model.at(m);
            evictable &= !o.pending && !o.hard_pin && lease_of(o) <= now;
          }
          std::vector<EvictedObject<testing::TestPayload>> out;
          const StatusCode code = DirectoryHooks::EvictIfUnchanged(
              dir, h.value(), version, false, &out);
          if (!evictable) {
            EXPECT_EQ(code, StatusCode::kAborted);
            EXPECT_TRUE(out.empty());
            break;
          }
          EXPECT_EQ(code, StatusCode::kOk);
          EXPECT_EQ(out.size(), unit.size());
          // The evicted objects carry their settled or adjusted charges.
          std::uint64_t want = 0;
          std::uint64_t got = 0;
          for (const std::string& m : unit) want += model.at(m).counted;
          for (const auto& x : out) got += x.counted_bytes;
          EXPECT_EQ(got, want);
          for (const std::string& m : unit) remove(m);
          break;
        }
        case 5: {  // Abort of a current or stale token
          if (history.empty()) break;
          const auto& [k, t] = history[rand(history.size())];
          const Status s = dir.Abort(k, t);
          auto it = model.find(k);
          if (it == model.end() || it->second.token.object != t.object) {
            EXPECT_EQ(s.code(), StatusCode::kNotFound);
          } else if (!it->second.pending) {
            EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
          } else {
            EXPECT_TRUE(s.ok()) << s.ToString();
            remove(k);
          }
          break;
        }
        case 6: {  // the reaper: every expired pending put goes
          std::size_t want = 0;
          for (const std::string& k : keys) {
            if (expired(k, now)) {
              remove(k);
              ++want;
            }
          }
          EXPECT_EQ(dir.ReapPendingPuts(), want);
          break;
        }
        default:
          clock.Advance(std::chrono::seconds(1 + rand(2)));
          break;
      }

      // Q2: the account holds exactly the live objects' charges, pending
      // ones included; the pending gauge the pending ones'.
      ASSERT_EQ(quota.charged(), charged());
      std::uint64_t pending = 0;
      for (const auto& [k, o] : model) pending += o.pending ? o.counted : 0;
      ASSERT_EQ(dir.pending_charge_bytes(), pending);
      // Each key routes as the model says (pending: not visible).
      for (const std::string& k : keys) {
        auto it = model.find(k);
        Result<Handle> h = dir.Pin(k);
        const bool active = it != model.end() && !it->second.pending;
        ASSERT_EQ(h.ok(), active) << k;
        if (active) {
          EXPECT_EQ(h.value().token(), it->second.token) << k;
        }
      }
      // V1: every group is wholly present (its members are exactly the
      // model's) or wholly gone.
      for (const std::string& g : {std::string("ga"), std::string("gb")}) {
        auto found = dir.FindGroup(g);
        const std::vector<std::string> expect = members(g);
        ASSERT_EQ(found.ok(), !expect.empty()) << g;
        if (!found.ok()) continue;
        std::set<ObjectId> ids;
        for (ObjectId id : found.value()->MemberIds()) ids.insert(id);
        std::set<ObjectId> want;
        for (const std::string& m : expect) {
          want.insert(model.at(m).token.object);
        }
        EXPECT_EQ(ids, want) << g;
        EXPECT_EQ(found.value()->lease_deadline_nanos(), group_lease.at(g));
      }
      EXPECT_EQ(dir.object_count(), model.size());
      EXPECT_EQ(log.open_reservations(), 0u);
      if (::testing::Test::HasFailure()) return;
    }
    for (const auto& [id, count] : removals) EXPECT_EQ(count, 1) << id;
    // The log replayed onto an empty directory gives the active objects
    // (takeovers, aborts and reaps wrote nothing, H1): same ids, same
    // counted bytes, and an account holding exactly them (Q2).
    QuotaAccount replica_quota;
    DirectoryOptions replica_options;
    replica_options.quota = &replica_quota;
    Dir replica(std::move(replica_options));
    for (const std::string& body : log.durable_bodies()) {
      DurableRecordView record;
      ASSERT_TRUE(DecodeDurableRecord(body, &record).ok());
      ASSERT_TRUE(ApplyDurableRecord(replica, record).ok());
    }
    std::uint64_t committed = 0;
    for (const std::string& k : keys) {
      auto it = model.find(k);
      Result<Handle> h = replica.Pin(k);
      const bool active = it != model.end() && !it->second.pending;
      ASSERT_EQ(h.ok(), active) << k;
      if (!active) continue;
      EXPECT_EQ(h.value().token().object, it->second.token.object) << k;
      EXPECT_EQ(h.value()->counted_bytes(), it->second.counted) << k;
      committed += it->second.counted;
    }
    EXPECT_EQ(replica_quota.charged(), committed);
  }
}

}  // namespace
}  // namespace cairn
