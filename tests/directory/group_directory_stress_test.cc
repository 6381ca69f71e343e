// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The lifetime suites the read-path RFC's gates ask for, typed over the route
// implementations. Iteration counts scale with CAIRN_STRESS_SCALE; every
// scenario runs under a watchdog whose generous bound fails the test on a
// deadlock. Nothing here asserts a time or a rate.

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/directory/group_directory.h"
#include "directory/directory_testing.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::InGroup;
using testing::StressIterations;
using testing::TestPayload;
using testing::Watchdog;

template <typename Tag>
class GroupDirectoryStressTest : public ::testing::Test {
 protected:
  using Directory = testing::TestDirectory<Tag>;
  using Handle = typename Directory::Handle;

  // Removal log: ObjectId -> how many times its removal was emitted.
  DirectoryOptions Options() {
    DirectoryOptions options;
    options.route.bucket_count = 16;
    options.lifecycle_stripes = 8;
    options.on_removed = [this](const RemovedObject& r) {
      std::lock_guard<std::mutex> lock(mu_);
      ++removals_[r.token.object];
      released_bytes_ += r.counted_bytes;
    };
    return options;
  }

  // Every emitted removal was emitted exactly once (D6).
  void ExpectEachRemovalOnce() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, count] : removals_) {
      EXPECT_EQ(count, 1) << "object " << id;
    }
  }

  std::mutex mu_;
  std::map<ObjectId, int> removals_;
  std::uint64_t released_bytes_ = 0;
};

TYPED_TEST_SUITE(GroupDirectoryStressTest, testing::RouteTypes,
                 testing::RouteTypeNames);

// Inside every callback the envelope and payload belong to the instance the
// callback names: stamp == size_bytes, set together at create.
template <typename View>
void ExpectConsistent(const View& v) {
  EXPECT_EQ(v.lifecycle(), Lifecycle::kActive);
  EXPECT_EQ(v.payload().stamp, v.size_bytes());
  EXPECT_EQ(v.payload().last_writer == 0 || v.payload().last_writer == v.id(),
            true);
}

CreateOptions Stamped(std::uint64_t stamp, std::string_view group = {}) {
  CreateOptions options;
  options.group = group;
  options.size_bytes = stamp;
  options.counted_bytes = 8;
  return options;
}

TYPED_TEST(GroupDirectoryStressTest, LookupRacingEraseThenRecreate) {
  typename TestFixture::Directory dir(this->Options());
  Watchdog watchdog(testing::kWatchdogBound, "lookup vs erase-then-recreate");
  constexpr int kKeys = 4;
  const int rounds = StressIterations(6000);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> hits{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      std::vector<std::string> keys;
      for (int k = 0; k < kKeys; ++k) keys.push_back(testing::Key("k", k));
      const std::vector<std::string_view> batch(keys.begin(), keys.end());
      while (!stop.load(std::memory_order_relaxed)) {
        const std::string& key = keys[r % kKeys];
        dir.WithObject(key,
                       [&](auto& v) {
                         ExpectConsistent(v);
                         EXPECT_EQ(v.key(), key);
                         hits.fetch_add(1, std::memory_order_relaxed);
                       })
            .IgnoreError();
        dir.WithObjects(batch,
                        [&](std::size_t i, StatusCode code, auto* v) {
                          if (v != nullptr) {
                            ExpectConsistent(*v);
                            EXPECT_EQ(v->key(), batch[i]);
                          } else {
                            EXPECT_EQ(code, StatusCode::kNotFound);
                          }
                        })
            .IgnoreError();
        auto pinned = dir.Pin(key);
        if (pinned.ok()) {
          EXPECT_EQ(pinned.value()->key(), key);
          dir.WithHandle(pinned.value(),
                         [&](auto& v) {
                           ExpectConsistent(v);
                           EXPECT_EQ(v.id(), pinned.value()->id());
                         })
              .IgnoreError();
        }
      }
    });
  }
  std::uint64_t stamp = 1;
  for (int i = 0; i < rounds; ++i) {
    const std::string key = testing::Key("k", i % kKeys);
    const std::string group =
        (i / kKeys) % 2 == 0 ? "" : testing::Key("g", i % 2);
    dir.Erase(key).IgnoreError();
    ++stamp;
    ASSERT_TRUE(
        dir.Create(key, Stamped(stamp, group), TestPayload{0, stamp, 0}).ok());
  }
  stop.store(true, std::memory_order_relaxed);
  for (auto& t : readers) t.join();
  this->ExpectEachRemovalOnce();
  EXPECT_EQ(dir.object_count(), static_cast<std::size_t>(kKeys));
}

TYPED_TEST(GroupDirectoryStressTest, StaleEraseIfMatchAfterRecreate) {
  typename TestFixture::Directory dir(this->Options());
  Watchdog watchdog(testing::kWatchdogBound, "stale EraseIfMatch");
  const int rounds = StressIterations(8000);
  std::atomic<bool> stop{false};
  std::mutex matched_mu;
  std::vector<ObjectId> matched;  // ids erased by a successful EraseIfMatch
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        auto pinned = dir.Pin("k");
        if (!pinned.ok()) continue;
        const ObjectId id = pinned.value()->id();
        const auto* ptr = pinned.value().get();
        std::this_thread::yield();  // let the recreate overtake us
        const Status s = dir.EraseIfMatch("k", id, ptr);
        EXPECT_TRUE(s.ok() || s.code() == StatusCode::kNotFound)
            << s.ToString();
        if (s.ok()) {
          std::lock_guard<std::mutex> lock(matched_mu);
          matched.push_back(id);
        }
      }
    });
  }
  std::set<ObjectId> created;
  for (int i = 0; i < rounds; ++i) {
    dir.Erase("k").IgnoreError();
    auto h = dir.Create("k", Stamped(1, i % 2 == 0 ? "" : "g"));
    if (h.ok()) created.insert(h.value()->id());
  }
  stop.store(true, std::memory_order_relaxed);
  for (auto& t : threads) t.join();
  this->ExpectEachRemovalOnce();
  std::lock_guard<std::mutex> lock(this->mu_);
  // Every successful EraseIfMatch erased exactly the instance it named.
  std::set<ObjectId> unique(matched.begin(), matched.end());
  EXPECT_EQ(unique.size(), matched.size());
  for (ObjectId id : matched) {
    EXPECT_TRUE(created.count(id) == 1);
    EXPECT_EQ(this->removals_[id], 1);
  }
  // The surviving instance (if any) was never erased.
  auto survivor = dir.Pin("k");
  if (survivor.ok()) {
    EXPECT_EQ(this->removals_.count(survivor.value()->id()), 0u);
  }
}

TYPED_TEST(GroupDirectoryStressTest, GroupTeardownWhileMemberHandlesHeld) {
  typename TestFixture::Directory dir(this->Options());
  Watchdog watchdog(testing::kWatchdogBound,
                    "group teardown with held handles");
  const int rounds = StressIterations(600);
  constexpr int kMembers = 8;
  for (int round = 0; round < rounds; ++round) {
    std::vector<typename TestFixture::Handle> held;
    for (int m = 0; m < kMembers; ++m) {
      auto h = dir.Create(testing::Key("m", m), Stamped(m, "g"),
                          TestPayload{0, static_cast<std::uint64_t>(m), 0});
      ASSERT_TRUE(h.ok());
      held.push_back(std::move(h).value());
    }
    const GroupId old_group = held[0].group()->id();
    std::atomic<bool> go{false};
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; ++r) {
      readers.emplace_back([&, r] {
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        for (int m = r; m < kMembers; m += 2) {
          dir.WithHandle(held[m], [](auto& v) { ExpectConsistent(v); })
              .IgnoreError();
          auto group = held[m].group();
          EXPECT_EQ(group->id(), old_group);
          EXPECT_EQ(group->name(), "g");
        }
      });
    }
    go.store(true, std::memory_order_release);
    ASSERT_TRUE(dir.EraseGroup("g").ok());
    for (auto& t : readers) t.join();
    for (const auto& h : held) {
      EXPECT_FALSE(h.is_current());
      EXPECT_FALSE(h.group().is_current());
      EXPECT_EQ(dir.WithHandle(h, [](auto&) { ADD_FAILURE(); }).code(),
                StatusCode::kNotFound);
    }
    // A fresh group under the same name does not resurrect the old one.
    auto fresh = dir.Create("m0", InGroup("g"));
    ASSERT_TRUE(fresh.ok());
    EXPECT_NE(fresh.value().group()->id(), old_group);
    EXPECT_FALSE(held[0].group().is_current());
    ASSERT_TRUE(dir.EraseGroup("g").ok());
  }
  this->ExpectEachRemovalOnce();
  EXPECT_EQ(dir.object_count(), 0u);
  EXPECT_EQ(dir.group_count(), 0u);
}

TYPED_TEST(GroupDirectoryStressTest,
           DelayedTokenCallbacksNeverTouchRecreatedInstance) {
  typename TestFixture::Directory dir(this->Options());
  Watchdog watchdog(testing::kWatchdogBound, "delayed token callbacks");
  const int rounds = StressIterations(10000);
  struct Deferred {
    std::string key;
    ObjectToken token;
    typename TestFixture::Handle handle;
  };
  std::mutex queue_mu;
  std::deque<Deferred> queue;
  std::atomic<bool> done{false};
  std::atomic<int> fired_ok{0};
  std::thread worker([&] {
    for (;;) {
      Deferred d;
      {
        std::lock_guard<std::mutex> lock(queue_mu);
        if (queue.empty()) {
          if (done.load(std::memory_order_acquire)) return;
        } else {
          d = std::move(queue.front());
          queue.pop_front();
        }
      }
      if (d.key.empty()) {
        std::this_thread::yield();
        continue;
      }
      auto write = [&](auto& a) {
        EXPECT_EQ(a.id(), d.token.object);
        a.payload().last_writer = d.token.object;
        a.payload().value += 1;
        fired_ok.fetch_add(1, std::memory_order_relaxed);
      };
      if (d.token.object % 2 == 0) {
        dir.WithTokenExclusive(d.key, d.token, write).IgnoreError();
      } else {
        dir.WithHandleExclusive(d.handle, write).IgnoreError();
      }
    }
  });
  for (int i = 0; i < rounds; ++i) {
    const std::string key = testing::Key("k", i % 3);
    dir.Erase(key).IgnoreError();
    auto h = dir.Create(key, Stamped(0, i % 4 < 2 ? "" : "g"));
    ASSERT_TRUE(h.ok());
    {
      std::lock_guard<std::mutex> lock(queue_mu);
      queue.push_back(Deferred{key, h.value().token(), h.value()});
    }
  }
  done.store(true, std::memory_order_release);
  worker.join();
  // The final instance of each key received exactly its own deferred write
  // and none of the writes queued for the instances it replaced.
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(dir.WithObject(testing::Key("k", k),
                               [](auto& v) {
                                 EXPECT_EQ(v.payload().value, 1);
                                 EXPECT_EQ(v.payload().last_writer, v.id());
                               })
                    .ok());
  }
  EXPECT_GE(fired_ok.load(), 3);
  this->ExpectEachRemovalOnce();
}

TYPED_TEST(GroupDirectoryStressTest, RacingErasersReleaseExactlyOnce) {
  typename TestFixture::Directory dir(this->Options());
  Watchdog watchdog(testing::kWatchdogBound, "racing erasers");
  const int rounds = StressIterations(400);
  constexpr int kObjects = 12;
  std::uint64_t created_bytes = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<typename TestFixture::Handle> handles;
    for (int i = 0; i < kObjects; ++i) {
      auto h =
          dir.Create(testing::Key("o", i),
                     Stamped(i, i % 3 == 0 ? "" : testing::Key("g", i % 3)));
      ASSERT_TRUE(h.ok());
      created_bytes += 8;
      handles.push_back(std::move(h).value());
    }
    std::atomic<bool> go{false};
    std::vector<std::thread> erasers;
    for (int t = 0; t < 4; ++t) {
      erasers.emplace_back([&, t] {
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        for (int i = 0; i < kObjects; ++i) {
          const int j = (i + t * 5) % kObjects;
          const std::string key = testing::Key("o", j);
          switch ((t + i) % 3) {
            case 0:
              dir.Erase(key).IgnoreError();
              break;
            case 1:
              dir.EraseIfMatch(key, handles[j]->id(), handles[j].get())
                  .IgnoreError();
              break;
            default:
              if (j % 3 != 0)
                dir.EraseGroup(testing::Key("g", j % 3)).IgnoreError();
              else
                dir.Erase(key).IgnoreError();
          }
        }
      });
    }
    go.store(true, std::memory_order_release);
    for (auto& t : erasers) t.join();
    EXPECT_EQ(dir.object_count(), 0u);
    EXPECT_EQ(dir.group_count(), 0u);
  }
  this->ExpectEachRemovalOnce();
  std::lock_guard<std::mutex> lock(this->mu_);
  EXPECT_EQ(this->removals_.size(),
            static_cast<std::size_t>(rounds * kObjects));
  EXPECT_EQ(this->released_bytes_, created_bytes);
}

TYPED_TEST(GroupDirectoryStressTest, VisitHandlesDuringChurn) {
  typename TestFixture::Directory dir(this->Options());
  Watchdog watchdog(testing::kWatchdogBound, "visit during churn");
  constexpr int kStable = 64;
  for (int i = 0; i < kStable; ++i) {
    ASSERT_TRUE(dir.Create(testing::Key("stable", i),
                           Stamped(i, i % 4 == 0 ? "sg" : ""))
                    .ok());
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> churners;
  for (int t = 0; t < 2; ++t) {
    churners.emplace_back([&, t] {
      int i = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const std::string key =
            testing::Key("churn", t) + testing::Key("_", i % 16);
        dir.Erase(key).IgnoreError();
        dir.Create(key, Stamped(1, i % 2 == 0 ? "" : testing::Key("cg", t)))
            .status()
            .IgnoreError();
        if (i % 17 == 0) dir.EraseGroup(testing::Key("cg", t)).IgnoreError();
        ++i;
      }
    });
  }
  const int visits = StressIterations(400);
  for (int v = 0; v < visits; ++v) {
    std::map<std::string, int> stable_seen;
    ASSERT_TRUE(dir.VisitHandles(
                       [&](auto handles) {
                         EXPECT_LE(handles.size(), 5u);
                         for (const auto& h : handles) {
                           const std::string key(h->key());
                           if (key.rfind("stable", 0) == 0) ++stable_seen[key];
                         }
                       },
                       5)
                    .ok());
    EXPECT_EQ(stable_seen.size(), static_cast<std::size_t>(kStable));
    for (const auto& [key, count] : stable_seen) EXPECT_EQ(count, 1) << key;
  }
  stop.store(true, std::memory_order_relaxed);
  for (auto& t : churners) t.join();
  this->ExpectEachRemovalOnce();
}

TYPED_TEST(GroupDirectoryStressTest,
           MixedBatchesUnderEightThreadsNeverDeadlock) {
  typename TestFixture::Directory dir(this->Options());
  Watchdog watchdog(testing::kWatchdogBound, "mixed batches, 8 threads");
  // Groups g0..g3 of 6 members each, plus 8 singletons.
  std::vector<std::string> keys;
  for (int g = 0; g < 4; ++g) {
    for (int m = 0; m < 6; ++m) {
      keys.push_back(testing::Key("g", g) + testing::Key("m", m));
    }
  }
  for (int s = 0; s < 8; ++s) keys.push_back(testing::Key("s", s));
  auto group_of = [](const std::string& key) {
    return key[0] == 'g' ? key.substr(0, 2) : std::string();
  };
  for (const auto& key : keys) {
    ASSERT_TRUE(
        dir.Create(key, Stamped(7, group_of(key)), TestPayload{0, 7, 0}).ok());
  }
  const int iterations = StressIterations(testing::kUnderTsan ? 1500 : 4000);
  std::atomic<std::uint64_t> callbacks{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      std::vector<std::string_view> batch;
      for (int i = 0; i < iterations; ++i) {
        batch.clear();
        const int g = static_cast<int>(rng() % 4);
        // Same-group keys, descending and repeated, then cross-group ones.
        for (int m = 5; m >= 0; m -= 2) batch.push_back(keys[g * 6 + m]);
        batch.push_back(keys[g * 6 + 1]);
        batch.push_back(keys[g * 6 + 1]);
        batch.push_back(keys[rng() % keys.size()]);
        batch.push_back(keys[rng() % keys.size()]);
        batch.push_back("absent");
        const int op = static_cast<int>(rng() % 10);
        if (op < 4) {
          dir.WithObjects(batch,
                          [&](std::size_t, StatusCode, auto* v) {
                            if (v != nullptr) ExpectConsistent(*v);
                            callbacks.fetch_add(1, std::memory_order_relaxed);
                          })
              .IgnoreError();
        } else if (op < 8) {
          dir.WithObjectsExclusive(batch,
                                   [&](std::size_t, StatusCode, auto* a) {
                                     if (a != nullptr) {
                                       ExpectConsistent(*a);
                                       a->payload().value += 1;
                                     }
                                     callbacks.fetch_add(
                                         1, std::memory_order_relaxed);
                                   })
              .IgnoreError();
        } else if (op == 8) {
          const std::string& key = keys[rng() % keys.size()];
          dir.Erase(key).IgnoreError();
          dir.Create(key, Stamped(7, group_of(key)), TestPayload{0, 7, 0})
              .status()
              .IgnoreError();
        } else {
          const std::string group = testing::Key("g", g);
          if (dir.EraseGroup(group).ok()) {
            for (int m = 0; m < 6; ++m) {
              dir.Create(keys[g * 6 + m], Stamped(7, group),
                         TestPayload{0, 7, 0})
                  .status()
                  .IgnoreError();
            }
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GT(callbacks.load(), 0u);
  EXPECT_EQ(dir.object_count(), dir.Diagnostics().route.entries);
  this->ExpectEachRemovalOnce();
}

}  // namespace
}  // namespace cairn
