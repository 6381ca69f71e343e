// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Model-based random test of quota, two-phase puts (settled whole or
// partially, Q4), charge adjustments, upserts, erases, eviction, RemoveAll
// with and without force and sealing against a
// single-threaded model, checking Q2 (charged bytes == the live objects'
// charges) and V1 (groups all or none) after every step;
// and a stress test running eviction, foreground batches and churn
// together (TSan checks it).

#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/tenant/eviction.h"
#include "cairn/tenant/remove_all.h"
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
using View = ObjectView<TestPayload>;

constexpr int kKeys = 40;
constexpr int kGroupedKeys = 15;  // keys 0..14 join group g<i % 5>

std::string GroupOf(int i) {
  return i < kGroupedKeys ? Key("g", i % 5) : std::string();
}

struct ModelObject {
  ObjectToken token;
  bool pending = false;       // kCreating
  std::uint64_t counted = 0;  // committed (or pending put's) bytes
  std::uint64_t upsert = 0;   // staged upsert bytes
  bool upsert_pending = false;
  bool busy = false;       // task flag set
  std::int64_t since = 0;  // when the put or the upsert was staged
};

TEST(TenantModelTest, Q2V1RandomOperationsAgreeWithModel) {
  const int kSteps = testing::StressIterations(3000);
  std::mt19937_64 rng(12345);
  ManualClock clock;
  QuotaAccount quota(600);
  DirectoryOptions o;
  o.clock = &clock;
  o.quota = &quota;
  o.route.bucket_count = 16;
  o.pending_put_timeout = std::chrono::seconds(5);
  std::set<ObjectId> removed_ids;
  o.on_removed = [&](const RemovedObject& r) {
    EXPECT_TRUE(removed_ids.insert(r.token.object).second)
        << "removal emitted twice (D6)";
  };
  Dir dir(o);
  std::map<int, ModelObject> model;
  std::map<std::string, int> done;  // successful operations by kind

  auto charged_in_model = [&] {
    std::uint64_t sum = 0;
    for (auto& [i, m] : model) {
      sum += m.counted + (m.upsert_pending ? m.upsert : 0);
    }
    return sum;
  };
  auto rand = [&](int n) { return static_cast<int>(rng() % n); };

  for (int step = 0; step < kSteps; ++step) {
    const int op = rand(16);
    int i = rand(kKeys);
    if ((op == 4 || op == 5) && rand(4) != 0) {  // aim at upsert states
      const bool want_staged = op == 5;
      for (auto& [j, m] : model) {
        if (!m.pending && m.upsert_pending == want_staged) i = j;
      }
    }
    // Aim commits at pending puts and adjustments at committed objects.
    if ((op == 2 || op == 15) && rand(4) != 0) {
      std::vector<int> fit;
      for (auto& [j, m] : model) {
        if (m.pending == (op == 2) && !m.upsert_pending) fit.push_back(j);
      }
      if (!fit.empty()) i = fit[rand(static_cast<int>(fit.size()))];
    }
    const std::string key = Key("k", i);
    auto it = model.find(i);
    std::map<int, ModelObject> before = model;
    const std::uint64_t bytes = 1 + rand(60);
    const std::string group = GroupOf(i);  // CreateOptions holds a view
    CreateOptions c;
    c.group = group;
    c.size_bytes = c.counted_bytes = bytes;
    SCOPED_TRACE("step " + std::to_string(step) + " op " + std::to_string(op) +
                 " key " + key);
    const bool fits = quota.charged() + bytes <= quota.limit();
    switch (op) {
      case 0:
      case 1: {  // create / create pending
        const bool pending = op == 1;
        Result<Handle> h =
            pending ? dir.CreatePending(key, c) : dir.Create(key, c);
        if (it != model.end()) {
          EXPECT_FALSE(h.ok());
        } else if (!fits) {
          EXPECT_EQ(h.status().code(), StatusCode::kResourceExhausted);
        } else {
          ASSERT_TRUE(h.ok()) << h.status().ToString();
          model[i] =
              ModelObject{h.value().token(), pending, bytes, 0, false, false,
                          clock.NowNanos()};
        }
        break;
      }
      case 2: {  // commit
        const ObjectToken tok =
            it != model.end() ? it->second.token : ObjectToken{1, 999999};
        // Half the commits settle partially (Q4): at most the reservation,
        // now and then one byte more (refused).
        CommitOptions settle;
        if (rand(2) == 0) {
          const std::uint64_t reserved =
              it != model.end() ? it->second.counted : 0;
          settle.counted_bytes = rand(8) == 0
                                     ? reserved + 1
                                     : rand(static_cast<int>(reserved) + 1);
        }
        Status s = dir.Commit(key, tok, settle);
        if (it == model.end()) {
          EXPECT_EQ(s.code(), StatusCode::kNotFound);
        } else if (!it->second.pending) {
          EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
        } else if (settle.counted_bytes.value_or(0) > it->second.counted) {
          EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
          ++done["commit-over-refused"];
        } else {
          ASSERT_TRUE(s.ok()) << s.ToString();
          it->second.pending = false;
          if (settle.counted_bytes.has_value()) {
            if (*settle.counted_bytes < it->second.counted) {
              ++done["partial-commit"];
            }
            it->second.counted = *settle.counted_bytes;
          }
          ++done["commit"];
        }
        break;
      }
      case 3: {  // abort
        if (it == model.end()) break;
        Status s = dir.Abort(key, it->second.token);
        if (it->second.pending) {
          ASSERT_TRUE(s.ok()) << s.ToString();
          model.erase(it);
        } else {
          EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
        }
        break;
      }
      case 4: {  // begin upsert
        if (it == model.end()) break;
        Status s = dir.BeginUpsert(key, it->second.token, {bytes, bytes});
        if (!fits) {
          EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
        } else if (it->second.pending) {
          EXPECT_EQ(s.code(), StatusCode::kNotFound);
        } else if (it->second.upsert_pending) {
          EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
        } else {
          ASSERT_TRUE(s.ok()) << s.ToString();
          it->second.upsert_pending = true;
          it->second.upsert = bytes;
          it->second.since = clock.NowNanos();
          ++done["begin-upsert"];
        }
        break;
      }
      case 5: {  // commit or abort the upsert
        if (it == model.end()) break;
        const bool commit = rand(2) == 0;
        Status s = commit ? dir.CommitUpsert(key, it->second.token)
                          : dir.AbortUpsert(key, it->second.token);
        if (it->second.pending) {
          EXPECT_EQ(s.code(), StatusCode::kNotFound);
        } else if (!it->second.upsert_pending) {
          EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
        } else {
          ASSERT_TRUE(s.ok()) << s.ToString();
          if (commit) it->second.counted = it->second.upsert;
          ++done[commit ? "commit-upsert" : "abort-upsert"];
          it->second.upsert_pending = false;
          it->second.upsert = 0;
        }
        break;
      }
      case 6: {  // erase one object
        Status s = dir.Erase(key);
        if (it == model.end() || it->second.pending) {
          EXPECT_EQ(s.code(), StatusCode::kNotFound);
        } else {
          ASSERT_TRUE(s.ok()) << s.ToString();
          model.erase(it);
        }
        break;
      }
      case 7: {  // erase a whole group
        const std::string g = Key("g", rand(5));
        Status s = dir.EraseGroup(g);
        bool any = false;
        for (auto m = model.begin(); m != model.end();) {
          if (GroupOf(m->first) == g) {
            any = true;
            m = model.erase(m);
          } else {
            ++m;
          }
        }
        EXPECT_EQ(s.ok(), any) << s.ToString();
        break;
      }
      case 8: {  // toggle a task (blocks eviction)
        if (it == model.end() || it->second.pending) break;
        const bool set = !it->second.busy;
        ASSERT_TRUE(dir.WithObjectExclusive(key,
                                            [&](Access& a) {
                                              if (set) {
                                                a.set_task(kTaskOffload);
                                              } else {
                                                a.clear_task(kTaskOffload);
                                              }
                                            })
                        .ok());
        it->second.busy = set;
        break;
      }
      case 9:
      case 10: {  // evict some bytes
        std::set<ObjectId> evicted;
        Kernel::Options ko;
        ko.on_evicted = [&](std::span<EvictedObject<TestPayload>> batch) {
          for (auto& x : batch) evicted.insert(x.token.object);
        };
        Kernel kernel(ko);
        Dir* d = &dir;
        const EvictionResult r =
            kernel.Evict(std::span<Dir* const>(&d, 1), 1 + rand(150), 0,
                         Kernel::Measure::kCountedBytes);
        EXPECT_EQ(r.evicted_objects, evicted.size());
        if (r.evicted_groups != 0) ++done["evict-group"];
        std::set<std::string> hit_groups;
        for (auto m = model.begin(); m != model.end();) {
          if (evicted.count(m->second.token.object) != 0) {
            EXPECT_FALSE(m->second.pending || m->second.busy);
            if (!GroupOf(m->first).empty())
              hit_groups.insert(GroupOf(m->first));
            m = model.erase(m);
          } else {
            ++m;
          }
        }
        // V1: a group the cycle touched has no member left.
        for (auto& [j, m] : model) {
          EXPECT_EQ(hit_groups.count(GroupOf(j)), 0u)
              << "k" << j << " survived its group's eviction";
        }
        break;
      }
      case 11: {  // quota limit changes, reaping, time
        if (rand(2) == 0) {
          quota.set_limit(200 + rand(800));
        } else {
          clock.Advance(std::chrono::seconds(rand(4)));
          const std::int64_t cutoff =
              clock.NowNanos() -
              std::chrono::nanoseconds(std::chrono::seconds(5)).count();
          std::size_t expected = 0;
          for (auto m = model.begin(); m != model.end();) {
            if (m->second.pending && m->second.since <= cutoff) {
              ++expected;
              m = model.erase(m);
              continue;
            }
            if (!m->second.pending && m->second.upsert_pending &&
                m->second.since <= cutoff) {
              ++expected;
              m->second.upsert_pending = false;
              m->second.upsert = 0;
            }
            ++m;
          }
          EXPECT_EQ(dir.ReapPendingPuts(), expected);
        }
        break;
      }
      case 12:
      case 13: {  // RemoveAll, rarely (it empties much of the model)
        const bool force = op == 13;
        if (rand(force ? 8 : 3) != 0) break;
        // The model is small (eviction keeps it so): give one live object a
        // task first, half the time, so busy objects meet RemoveAll.
        if (rand(2) == 0) {
          for (auto& [j, m] : model) {
            if (m.pending || m.busy) continue;
            ASSERT_TRUE(
                dir.WithObjectExclusive(
                       Key("k", j), [](Access& a) { a.set_task(kTaskOffload); })
                    .ok());
            m.busy = true;
            break;
          }
        }
        // Without force a singleton is kept when pending, busy or staged;
        // a group when one member is (V1: whole or not at all).
        auto busy = [](const ModelObject& m) {
          return m.pending || m.busy || m.upsert_pending;
        };
        std::set<std::string> kept_groups;
        std::size_t kept_singletons = 0;
        std::size_t pending_singletons = 0;
        for (auto& [j, m] : model) {
          if (GroupOf(j).empty()) {
            kept_singletons += busy(m) ? 1 : 0;
            pending_singletons += m.pending ? 1 : 0;
          } else if (busy(m)) {
            kept_groups.insert(GroupOf(j));
          }
        }
        const RemoveAllResult r =
            RemoveAllObjects(dir, RemoveAllOptions{force});
        ASSERT_TRUE(r.status.ok()) << r.status.ToString();
        if (force) {
          EXPECT_TRUE(r.kept.empty());
          EXPECT_EQ(r.aborted_puts, pending_singletons);
          model.clear();
          ++done["remove-all-force"];
        } else {
          EXPECT_EQ(r.kept.size(), kept_singletons + kept_groups.size());
          for (const KeptObject& k : r.kept) {
            EXPECT_EQ(k.reason.code(), StatusCode::kFailedPrecondition);
            if (!k.group.empty()) {
              EXPECT_EQ(kept_groups.count(k.group), 1u) << k.group;
            }
          }
          for (auto m = model.begin(); m != model.end();) {
            const bool keep = GroupOf(m->first).empty()
                                  ? busy(m->second)
                                  : kept_groups.count(GroupOf(m->first)) != 0;
            m = keep ? std::next(m) : model.erase(m);
          }
          if (!r.kept.empty() && r.removed_objects != 0) {
            ++done["remove-all-kept"];
          }
          if (kept_singletons + kept_groups.size() != 0) {
            for (auto& [j, m] : model) done["remove-all-kept-busy"] += m.busy;
          }
        }
        break;
      }
      case 15: {  // adjust the charge: a replica added, lost or replaced
        const ObjectToken tok =
            it != model.end() ? it->second.token : ObjectToken{1, 999999};
        // Now and then a large replica, which meets the limit.
        const ChargeAdjustment a{
            static_cast<std::uint64_t>(rand(4) == 0 ? rand(600) : rand(50)),
            static_cast<std::uint64_t>(rand(50))};
        const std::uint64_t charged_before = quota.charged();
        Status s = dir.AdjustCharge(key, tok, a);
        if (it == model.end() || it->second.pending) {
          EXPECT_EQ(s.code(), StatusCode::kNotFound);
        } else if (it->second.upsert_pending) {
          EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
        } else if (a.refund_bytes > a.charge_bytes &&
                   a.refund_bytes - a.charge_bytes > it->second.counted) {
          EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
        } else if (a.charge_bytes > a.refund_bytes &&
                   charged_before + a.charge_bytes - a.refund_bytes >
                       quota.limit()) {
          // Q1: refused as a put would be, nothing charged.
          EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
          ++done["adjust-refused"];
        } else {
          ASSERT_TRUE(s.ok()) << s.ToString();
          it->second.counted =
              it->second.counted + a.charge_bytes - a.refund_bytes;
          ++done[a.charge_bytes >= a.refund_bytes ? "adjust-up"
                                                  : "adjust-down"];
        }
        // Q1: an admitted charge never passes the limit.
        if (quota.charged() > charged_before) {
          EXPECT_LE(quota.charged(), quota.limit());
        }
        break;
      }
      case 14: {  // seal if empty: refused while anything lives
        Status s = dir.SealIfEmpty();
        EXPECT_EQ(s.ok(), model.empty()) << s.ToString();
        if (s.ok()) {
          EXPECT_EQ(dir.Create(key, c).status().code(),
                    StatusCode::kFailedPrecondition);
          dir.Unseal();
          ++done["seal"];
        }
        break;
      }
    }
    // Q2 after every step, and the directory agrees with the model.
    ASSERT_EQ(quota.charged(), charged_in_model());
    std::uint64_t visible = 0;
    std::size_t active = 0;
    ASSERT_TRUE(DirectoryHooks::Census(dir, [&](const Handle&,
                                                const ObjectMetadata& m) {
                  visible += m.counted_bytes;
                  ++active;
                }).ok());
    std::uint64_t model_visible = 0;
    std::size_t model_active = 0;
    for (auto& [j, m] : model) {
      if (!m.pending) {
        model_visible += m.counted;
        ++model_active;
      }
    }
    ASSERT_EQ(visible, model_visible);
    ASSERT_EQ(active, model_active);
    ASSERT_EQ(dir.object_count(), model.size());
  }
  // Every kind of step ran and succeeded at least once.
  for (const char* kind :
       {"commit", "begin-upsert", "commit-upsert", "abort-upsert",
        "evict-group", "remove-all-force", "remove-all-kept",
        "remove-all-kept-busy", "seal", "partial-commit", "commit-over-refused",
        "adjust-up", "adjust-down", "adjust-refused"}) {
    EXPECT_GT(done[kind], 0) << kind << " never succeeded";
  }
}

// Eviction cycles, foreground batches and churn at once. Checks: no data
// race or deadlock (TSan, watchdog); every batch sees consistent payloads;
// every evicted group has no member left routed (V1); at quiescence the
// account equals the live charges (Q2).
TEST(TenantStressTest, EvictionForegroundBatchesAndChurnTogether) {
  testing::Watchdog watchdog(testing::kWatchdogBound, "tenant stress");
  QuotaAccount quota;
  DirectoryOptions o;
  o.quota = &quota;
  o.route.bucket_count = 256;
  o.pending_put_timeout = std::chrono::milliseconds(1);
  Dir dir(o);
  constexpr int kStressKeys = 256;
  constexpr int kGroups = 16;
  constexpr int kMembers = 4;
  auto group_key = [](int g, int m) {
    return Key("G" + std::to_string(g) + "-", m);
  };
  std::atomic<bool> stop{false};
  std::atomic<long> v1_violations{0};
  std::atomic<long> torn{0};
  std::atomic<long> evicted_total{0};
  std::vector<std::thread> threads;
  // Two eviction threads.
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      Kernel::Options ko;
      ko.allow_soft_pinned = t == 1;
      ko.on_evicted = [&](std::span<EvictedObject<TestPayload>> batch) {
        evicted_total.fetch_add(static_cast<long>(batch.size()),
                                std::memory_order_relaxed);
        for (auto& x : batch) {
          if (x.group == kNoGroup || x.key[0] != 'G') continue;
          const int g = std::stoi(x.key.substr(1, x.key.find('-') - 1));
          for (int m = 0; m < kMembers; ++m) {
            Result<Handle> still = dir.Pin(group_key(g, m));
            if (still.ok() && still.value()->group() != nullptr &&
                still.value()->group()->id() == x.group) {
              v1_violations.fetch_add(1, std::memory_order_relaxed);
            }
          }
        }
      };
      Kernel kernel(ko);
      Dir* d = &dir;
      while (!stop.load(std::memory_order_acquire)) {
        kernel.Evict(std::span<Dir* const>(&d, 1), 200, 200,
                     Kernel::Measure::kCountedBytes);
        std::this_thread::yield();
      }
    });
  }
  // Three foreground batch threads (W2-shaped: 32 keys, reads and writes).
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<std::string> keys(32);
      std::vector<std::string_view> views(32);
      while (!stop.load(std::memory_order_acquire)) {
        for (int k = 0; k < 32; ++k) {
          keys[k] = rng() % 4 == 0
                        ? group_key(static_cast<int>(rng() % kGroups),
                                    static_cast<int>(rng() % kMembers))
                        : Key("s", static_cast<long long>(rng() % kStressKeys));
          views[k] = keys[k];
        }
        if (rng() % 2 == 0) {
          ASSERT_TRUE(
              dir.WithObjects(views,
                              [&](std::size_t, StatusCode code, View* v) {
                                if (code == StatusCode::kOk &&
                                    v->payload().stamp != v->size_bytes()) {
                                  torn.fetch_add(1, std::memory_order_relaxed);
                                }
                              })
                  .ok());
        } else {
          ASSERT_TRUE(dir.WithObjectsExclusive(
                             views,
                             [&](std::size_t, StatusCode code, Access* a) {
                               if (code != StatusCode::kOk) return;
                               const std::uint64_t size = 1 + rng() % 64;
                               a->set_size_bytes(size);
                               a->payload().stamp = size;
                               a->payload().value += 1;
                             })
                          .ok());
        }
      }
    });
  }
  // Three churn threads: create, two-phase puts, upserts, erases, groups.
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      while (!stop.load(std::memory_order_acquire)) {
        const int op = static_cast<int>(rng() % 6);
        const std::uint64_t bytes = 1 + rng() % 64;
        CreateOptions c;
        c.size_bytes = c.counted_bytes = bytes;
        const TestPayload p{0, bytes, 0};
        if (op == 0) {
          const int g = static_cast<int>(rng() % kGroups);
          const std::string name = Key("G", g);  // CreateOptions holds a view
          c.group = name;
          for (int m = 0; m < kMembers; ++m) {
            dir.Create(group_key(g, m), c, p).status().IgnoreError();
          }
          continue;
        }
        const std::string key =
            Key("s", static_cast<long long>(rng() % kStressKeys));
        if (op == 1) {
          dir.Create(key, c, p).status().IgnoreError();
        } else if (op == 2) {
          Result<Handle> h = dir.CreatePending(key, c, p);
          if (h.ok()) {
            if (rng() % 3 != 0) {
              dir.Commit(key, h.value().token()).IgnoreError();
            } else if (rng() % 2 == 0) {
              dir.Abort(key, h.value().token()).IgnoreError();
            }  // else: left for the reaper
          }
        } else if (op == 3) {
          Result<Handle> h = dir.Pin(key);
          if (h.ok() &&
              dir.BeginUpsert(key, h.value().token(), {bytes, bytes}).ok()) {
            dir.CommitUpsert(key, h.value().token(),
                             [&](Access& a) { a.payload().stamp = bytes; })
                .IgnoreError();
          }
        } else if (op == 4) {
          dir.Erase(key).IgnoreError();
        } else {
          dir.ReapPendingPuts();
        }
      }
    });
  }
  std::this_thread::sleep_for(testing::StressDuration(2000));
  stop.store(true, std::memory_order_release);
  for (auto& th : threads) th.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  dir.ReapPendingPuts();  // quiescence: no pending puts left
  EXPECT_EQ(v1_violations.load(), 0);
  EXPECT_EQ(torn.load(), 0);
  std::uint64_t live = 0;
  ASSERT_TRUE(
      DirectoryHooks::Census(dir, [&](const Handle&, const ObjectMetadata& m) {
        live += m.counted_bytes;
      }).ok());
  EXPECT_EQ(quota.charged(), live);  // Q2 at quiescence
  EXPECT_GT(evicted_total.load(), 0);
}

}  // namespace
}  // namespace cairn
