// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// One test per rule D1-D9, L1-L3, P1-P5 of semantics.md (named after the
// rule), plus bad input and the model basics. Every suite is typed over the
// route implementations in directory_testing.h.

#include "cairn/directory/group_directory.h"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "directory/directory_testing.h"
#include "directory/every_log.h"
#include "testing/directory_peer.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using std::chrono::seconds;
using testing::InGroup;
using testing::TestPayload;
using testing::Watchdog;

template <typename Tag>
class GroupDirectoryTest : public ::testing::Test {
 protected:
  using Directory = testing::TestDirectory<Tag>;
  using Handle = typename Directory::Handle;
  using View = typename Directory::View;
  using Access = typename Directory::Access;

  DirectoryOptions Options() {
    DirectoryOptions options;
    options.clock = &clock_;
    options.on_removed = [this](const RemovedObject& r) {
      std::lock_guard<std::mutex> lock(removed_mu_);
      removed_.push_back(r.token.object);
      removed_bytes_ += r.counted_bytes;
    };
    return options;
  }

  static Handle Must(Result<Handle> r) {
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : Handle();
  }

  std::size_t RemovedCount() {
    std::lock_guard<std::mutex> lock(removed_mu_);
    return removed_.size();
  }

  ManualClock clock_;
  std::mutex removed_mu_;
  std::vector<ObjectId> removed_;
  std::uint64_t removed_bytes_ = 0;
};

TYPED_TEST_SUITE(GroupDirectoryTest, testing::RouteTypes,
                 testing::RouteTypeNames);

// ---- D1-D9 ------------------------------------------------------------------

TYPED_TEST(GroupDirectoryTest,
           D1CallbackRunsUnderObjectLockWithLifecycleValidated) {
  using ViewT = typename TestFixture::View;
  using AccessT = typename TestFixture::Access;
  static_assert(!std::is_copy_constructible_v<ViewT>);
  static_assert(!std::is_move_constructible_v<ViewT>);
  static_assert(!std::is_copy_assignable_v<ViewT>);
  static_assert(!std::is_copy_constructible_v<AccessT>);
  static_assert(!std::is_move_constructible_v<AccessT>);

  typename TestFixture::Directory dir(this->Options());
  this->Must(dir.Create("k"));
  std::atomic<bool> inside{false};
  std::atomic<bool> reader_started{false};
  std::atomic<bool> reader_saw_inside{false};
  std::thread reader;
  ASSERT_TRUE(
      dir.WithObjectExclusive(
             "k",
             [&](AccessT& a) {
               EXPECT_EQ(a.lifecycle(), Lifecycle::kActive);
               inside.store(true, std::memory_order_seq_cst);
               reader = std::thread([&] {
                 reader_started.store(true, std::memory_order_seq_cst);
                 EXPECT_TRUE(
                     dir.WithObject(
                            "k",
                            [&](ViewT& v) {
                              EXPECT_EQ(v.lifecycle(), Lifecycle::kActive);
                              if (inside.load(std::memory_order_seq_cst)) {
                                reader_saw_inside.store(true);
                              }
                            })
                         .ok());
               });
               while (!reader_started.load(std::memory_order_seq_cst)) {
                 std::this_thread::yield();
               }
               // Give the reader every chance to (wrongly) get in.
               std::this_thread::sleep_for(std::chrono::milliseconds(20));
               a.payload().value = 7;
               inside.store(false, std::memory_order_seq_cst);
             })
          .ok());
  reader.join();
  EXPECT_FALSE(reader_saw_inside.load());
  // The batch form validates too: an erased key is reported, not handed out.
  ASSERT_TRUE(dir.Erase("k").ok());
  std::string_view keys[] = {"k"};
  int calls = 0;
  ASSERT_TRUE(dir.WithObjects(keys,
                              [&](std::size_t, StatusCode code, ViewT* v) {
                                ++calls;
                                EXPECT_EQ(code, StatusCode::kNotFound);
                                EXPECT_EQ(v, nullptr);
                              })
                  .ok());
  EXPECT_EQ(calls, 1);
}

TYPED_TEST(GroupDirectoryTest, D2PinReturnsHandleThatKeepsMemoryNotValidity) {
  typename TestFixture::Directory dir(this->Options());
  this->Must(dir.Create("k", {}, TestPayload{41, 0, 0}));
  auto pinned = dir.Pin("k");
  ASSERT_TRUE(pinned.ok());
  auto handle = std::move(pinned).value();
  const ObjectId old_id = handle->id();
  ASSERT_TRUE(dir.Erase("k").ok());
  EXPECT_EQ(handle->key(), "k");  // memory alive (ASan checks)
  EXPECT_FALSE(handle.is_current());
  EXPECT_EQ(dir.WithHandle(handle, [](auto&) { ADD_FAILURE(); }).code(),
            StatusCode::kNotFound);
  auto fresh = this->Must(dir.Create("k"));
  EXPECT_NE(fresh->id(), old_id);
  EXPECT_EQ(dir.WithHandle(handle, [](auto&) { ADD_FAILURE(); }).code(),
            StatusCode::kNotFound);
  EXPECT_TRUE(dir.WithHandle(fresh, [](auto&) {}).ok());
}

TYPED_TEST(GroupDirectoryTest, D3PublishIsInsertOnly) {
  // Route level: the second Publish fails and leaves both owners untouched.
  struct FakeEntry {
    std::uint64_t id_;
    std::uint64_t id() const { return id_; }
  };
  typename TypeParam::template Route<FakeEntry> route(
      RouteOptions{.bucket_count = 4});
  auto first = std::make_shared<FakeEntry>(FakeEntry{1});
  auto candidate = std::make_shared<FakeEntry>(FakeEntry{2});
  EXPECT_TRUE(route.Publish("k", first).ok());
  EXPECT_EQ(route.Publish("k", candidate).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(route.Pin("k").get(), first.get());
  EXPECT_EQ(candidate.use_count(), 1);
  EXPECT_EQ(candidate->id(), 2u);

  // Directory level: create of a routed key is kAlreadyExists, no change.
  typename TestFixture::Directory dir(this->Options());
  auto h = this->Must(dir.Create("k", {}, TestPayload{5, 0, 0}));
  auto again = dir.Create("k", {}, TestPayload{9, 0, 0});
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  auto again_grouped = dir.Create("k", InGroup("g"));
  EXPECT_EQ(again_grouped.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(dir.object_count(), 1u);
  EXPECT_EQ(dir.group_count(), 0u);
  EXPECT_TRUE(dir.FindGroup("g").status().code() == StatusCode::kNotFound);
  ASSERT_TRUE(dir.WithObject("k",
                             [&](auto& v) {
                               EXPECT_EQ(v.id(), h->id());
                               EXPECT_EQ(v.payload().value, 5);
                             })
                  .ok());
}

TYPED_TEST(GroupDirectoryTest, D4StaleEraseIfMatchNeverUnlinksRecreatedEntry) {
  typename TestFixture::Directory dir(this->Options());
  auto old_handle = this->Must(dir.Create("k"));
  const ObjectId old_id = old_handle->id();
  const auto* old_ptr = old_handle.get();
  ASSERT_TRUE(dir.Erase("k").ok());
  auto fresh = this->Must(dir.Create("k"));
  const auto not_found = StatusCode::kNotFound;
  EXPECT_EQ(dir.EraseIfMatch("k", old_id, old_ptr).code(), not_found);
  EXPECT_EQ(dir.EraseIfMatch("k", fresh->id(), old_ptr).code(), not_found);
  EXPECT_EQ(dir.EraseIfMatch("k", old_id, fresh.get()).code(), not_found);
  EXPECT_TRUE(dir.Pin("k").ok());
  EXPECT_EQ(this->RemovedCount(), 1u);
  // Released old instance: its address may be reused, the id never is.
  old_handle = {};
  auto fresh2 = this->Must(dir.Create("k2"));
  EXPECT_EQ(dir.EraseIfMatch("k2", old_id, fresh2.get()).code(), not_found);
  EXPECT_TRUE(dir.EraseIfMatch("k", fresh->id(), fresh.get()).ok());
  EXPECT_EQ(dir.EraseIfMatch("k", fresh->id(), fresh.get()).code(), not_found);
  EXPECT_EQ(this->RemovedCount(), 2u);
  // Route level: the same rule without the directory around it.
  EXPECT_TRUE(dir.Pin("k2").ok());
}

TYPED_TEST(GroupDirectoryTest,
           D5DeferredCallbackNeverMutatesRecreatedInstance) {
  typename TestFixture::Directory dir(this->Options());
  for (const bool grouped : {false, true}) {
    const std::string key = grouped ? "member" : "single";
    CreateOptions options = grouped ? InGroup("g") : CreateOptions{};
    auto old_handle = this->Must(dir.Create(key, options));
    const ObjectToken token = old_handle.token();
    EXPECT_EQ(token.tenant, dir.tenant_instance());
    ASSERT_TRUE(dir.Erase(key).ok());
    auto fresh = this->Must(dir.Create(key, options));
    std::uint64_t version_before = 0;
    ASSERT_TRUE(
        dir.WithObject(key, [&](auto& v) { version_before = v.version(); })
            .ok());
    // The deferred work fires now, carrying the token (and a handle).
    EXPECT_EQ(dir.WithTokenExclusive(key, token,
                                     [](auto& a) { a.payload().value = -1; })
                  .code(),
              StatusCode::kNotFound);
    EXPECT_EQ(dir.WithHandleExclusive(old_handle,
                                      [](auto& a) { a.payload().value = -1; })
                  .code(),
              StatusCode::kNotFound);
    ASSERT_TRUE(dir.WithObject(key,
                               [&](auto& v) {
                                 EXPECT_EQ(v.payload().value, 0);
                                 EXPECT_EQ(v.version(), version_before);
                               })
                    .ok());
    // The right token still works.
    EXPECT_TRUE(dir.WithTokenExclusive(key, fresh.token(),
                                       [](auto& a) { a.payload().value = 1; })
                    .ok());
    // A token of another tenant instance never matches.
    EXPECT_EQ(dir.WithToken(key, ObjectToken{token.tenant + 1, fresh->id()},
                            [](auto&) { ADD_FAILURE(); })
                  .code(),
              StatusCode::kNotFound);
  }
}

TYPED_TEST(GroupDirectoryTest,
           D6NoLookupReturnsRemovedObjectAndRemovalEmittedOnce) {
  typename TestFixture::Directory dir(this->Options());
  CreateOptions counted;
  counted.counted_bytes = 100;
  auto h = this->Must(dir.Create("k", counted));
  CreateOptions member = InGroup("g");
  member.counted_bytes = 10;
  this->Must(dir.Create("m", member));
  ASSERT_TRUE(dir.Erase("k").ok());
  EXPECT_EQ(dir.Erase("k").code(), StatusCode::kNotFound);
  EXPECT_EQ(dir.EraseIfMatch("k", h->id(), h.get()).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(dir.WithObject("k", [](auto&) { ADD_FAILURE(); }).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(dir.Pin("k").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(dir.EraseGroup("g").ok());
  EXPECT_EQ(dir.EraseGroup("g").code(), StatusCode::kNotFound);
  EXPECT_EQ(dir.Erase("m").code(), StatusCode::kNotFound);
  std::string_view keys[] = {"k", "m"};
  ASSERT_TRUE(dir.WithObjects(keys,
                              [](std::size_t, StatusCode code, auto* v) {
                                EXPECT_EQ(code, StatusCode::kNotFound);
                                EXPECT_EQ(v, nullptr);
                              })
                  .ok());
  std::size_t visited = 0;
  ASSERT_TRUE(
      dir.VisitHandles([&](auto handles) { visited += handles.size(); }).ok());
  EXPECT_EQ(visited, 0u);
  EXPECT_EQ(this->RemovedCount(), 2u);
  EXPECT_EQ(this->removed_bytes_, 110u);
}

TYPED_TEST(GroupDirectoryTest, D7HeldMemberHandleKeepsWholeGroupAlive) {
  typename TestFixture::Directory dir(this->Options());
  auto a = this->Must(dir.Create("a", InGroup("g"), TestPayload{1, 0, 0}));
  auto b = this->Must(dir.Create("b", InGroup("g")));
  auto c = this->Must(dir.Create("c", InGroup("g")));
  auto group = a.group();
  ASSERT_TRUE(group);
  EXPECT_EQ(group.get(), b.group().get());  // O(1) from any member
  std::weak_ptr<GroupEntry<TestPayload>> weak_group = group.owner();
  const auto* b_ptr = b.get();
  b = {};
  c = {};
  group = {};
  ASSERT_TRUE(dir.EraseGroup("g").ok());
  // Only `a` is held, yet the group and every member's memory survive.
  EXPECT_FALSE(weak_group.expired());
  EXPECT_FALSE(a.is_current());
  EXPECT_FALSE(a.group().is_current());
  EXPECT_EQ(a.group()->name(), "g");
  EXPECT_EQ(a->key(), "a");
  EXPECT_EQ(b_ptr->key(), "b");  // ASan: still allocated through `a`
  a = {};
  if constexpr (!TypeParam::kUnlinkFreesImmediately) {
    // The retired snapshots still own the members until a grace period.
    ASSERT_TRUE(directory_internal::GroupDirectoryTestPeer::route(dir)
                    .epoch_domain()
                    .Barrier()
                    .ok());
  }
  EXPECT_TRUE(weak_group.expired());
  // A singleton handle across erase stays dereferenceable too.
  auto s = this->Must(dir.Create("s"));
  ASSERT_TRUE(dir.Erase("s").ok());
  EXPECT_EQ(s->key(), "s");
}

TYPED_TEST(GroupDirectoryTest, D8MemberNeverRoutedBeforeGroupAndLeaseWired) {
  typename TestFixture::Directory dir(this->Options());
  constexpr int kMembers = 200;
  std::atomic<bool> stop{false};
  std::atomic<int> checked{0};
  const std::int64_t lease_floor =
      this->clock_.NowNanos() + std::chrono::nanoseconds(seconds(30)).count();
  std::thread reader([&] {
    int next = 0;
    while (next < kMembers && !stop.load(std::memory_order_relaxed)) {
      auto pinned = dir.Pin(testing::Key("m", next));
      if (!pinned.ok()) continue;
      auto group = pinned->group();
      EXPECT_TRUE(group);
      EXPECT_TRUE(group.is_current());
      EXPECT_GE(group->lease_deadline_nanos(), lease_floor);
      EXPECT_TRUE(dir.WithObject(testing::Key("m", next),
                                 [&](auto& v) {
                                   EXPECT_NE(v.group_id(), kNoGroup);
                                   EXPECT_GE(v.lease_deadline_nanos(),
                                             lease_floor);
                                 })
                      .ok());
      checked.fetch_add(1, std::memory_order_relaxed);
      ++next;
    }
  });
  CreateOptions options = InGroup("g");
  options.lease_ttl = seconds(30);
  for (int i = 0; i < kMembers; ++i) {
    this->Must(dir.Create(testing::Key("m", i), options));
  }
  reader.join();
  EXPECT_EQ(checked.load(), kMembers);
}

TYPED_TEST(GroupDirectoryTest,
           D9VisitHandlesCopiesBoundedChunksWithoutHoldingLocks) {
  DirectoryOptions options = this->Options();
  options.route.bucket_count = 4;
  typename TestFixture::Directory dir(std::move(options));
  constexpr int kObjects = 100;
  for (int i = 0; i < kObjects; ++i) {
    this->Must(dir.Create(
        testing::Key("o", i),
        i % 2 == 0 ? InGroup(testing::Key("g", i % 6)) : CreateOptions{}));
  }
  Watchdog watchdog(testing::kWatchdogBound, "D9 visit with writes inside");
  std::set<ObjectId> seen;
  std::size_t chunks = 0;
  int created = 0;
  ASSERT_TRUE(dir.VisitHandles(
                     [&](auto handles) {
                       ++chunks;
                       EXPECT_LE(handles.size(), 7u);
                       for (const auto& h : handles) {
                         EXPECT_TRUE(seen.insert(h->id()).second);
                       }
                       // No route, group or object lock is held here.
                       EXPECT_TRUE(dir.Create(testing::Key("new", created++),
                                              InGroup("g0"))
                                       .ok());
                       EXPECT_TRUE(dir.WithObjectExclusive(handles[0]->key(),
                                                           [](auto&) {})
                                       .ok());
                     },
                     7)
                  .ok());
  EXPECT_GE(seen.size(), static_cast<std::size_t>(kObjects));
  EXPECT_GE(chunks, static_cast<std::size_t>(kObjects / 7));
}

// ---- L1-L3 ------------------------------------------------------------------

TYPED_TEST(GroupDirectoryTest,
           L1WritersSharingBucketAndStripeNeverWaitOnOtherObjectLock) {
  DirectoryOptions options = this->Options();
  options.route.bucket_count = 1;  // every key shares the bucket
  options.lifecycle_stripes = 1;   // and the stripe
  typename TestFixture::Directory dir(std::move(options));
  this->Must(dir.Create("held", InGroup("g")));
  this->Must(dir.Create("other", InGroup("g2")));
  std::atomic<bool> holding{false};
  std::atomic<bool> release{false};
  std::thread holder([&] {
    EXPECT_TRUE(dir.WithObjectExclusive(
                       "held",
                       [&](auto&) {
                         holding.store(true, std::memory_order_seq_cst);
                         while (!release.load(std::memory_order_seq_cst)) {
                           std::this_thread::yield();
                         }
                       })
                    .ok());
  });
  while (!holding.load(std::memory_order_seq_cst)) std::this_thread::yield();
  {
    Watchdog watchdog(testing::kWatchdogBound, "L1 writers behind a held lock");
    EXPECT_TRUE(dir.Create("b").ok());
    EXPECT_TRUE(
        dir.WithObjectExclusive("b", [](auto& a) { a.set_size_bytes(1); })
            .ok());
    EXPECT_TRUE(
        dir.WithObjectExclusive("other", [](auto& a) { a.set_size_bytes(1); })
            .ok());
    EXPECT_TRUE(dir.Create("c", InGroup("g2")).ok());
    EXPECT_TRUE(dir.Erase("b").ok());
    EXPECT_TRUE(dir.EraseGroup("g2").ok());
    EXPECT_TRUE(dir.Pin("held").ok());
  }
  release.store(true, std::memory_order_seq_cst);
  holder.join();
}

TYPED_TEST(GroupDirectoryTest,
           L2OneLockOrderAcrossGroupMemberAndRouteOperations) {
  // Every lock-taking path, interleaved on a small key space; TSan's deadlock
  // detector (detect_deadlocks=1) reports any lock-order cycle it observes.
  DirectoryOptions options = this->Options();
  options.route.bucket_count = 2;
  options.lifecycle_stripes = 2;
  typename TestFixture::Directory dir(std::move(options));
  Watchdog watchdog(testing::kWatchdogBound, "L2 mixed workload");
  const int iterations = testing::StressIterations(2000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::string> keys;
      for (int k = 0; k < 8; ++k) keys.push_back(testing::Key("k", k));
      std::vector<std::string_view> batch(keys.rbegin(), keys.rend());
      for (int i = 0; i < iterations; ++i) {
        const std::string& key = keys[(i * 7 + t) % keys.size()];
        const std::string group = testing::Key("g", (i + t) % 2);
        switch ((i + t) % 6) {
          case 0:
            dir.Create(key, InGroup(group)).status().IgnoreError();
            break;
          case 1:
            dir.Erase(key).IgnoreError();
            break;
          case 2:
            dir.EraseGroup(group).IgnoreError();
            break;
          case 3:
            dir.WithObjectsExclusive(batch,
                                     [](std::size_t, StatusCode, auto*) {})
                .IgnoreError();
            break;
          case 4:
            dir.Create(key).status().IgnoreError();
            break;
          default:
            dir.VisitHandles([&](auto handles) {
                 for (const auto& h : handles) {
                   dir.WithHandle(h, [](auto&) {}).IgnoreError();
                 }
               })
                .IgnoreError();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::size_t visited = 0;
  ASSERT_TRUE(dir.VisitHandles([&](auto h) { visited += h.size(); }).ok());
  EXPECT_EQ(visited, dir.object_count());
  EXPECT_EQ(dir.Diagnostics().route.entries, dir.object_count());
}

TYPED_TEST(GroupDirectoryTest, L3NoLockHeldAcrossHostCallbacks) {
  // The removal callback re-enters the directory on every lock the erase
  // took: the same key's stripe, the same group, the route bucket, the
  // catalog. With any of them still held this would self-deadlock.
  DirectoryOptions options = this->Options();
  options.route.bucket_count = 1;
  options.lifecycle_stripes = 1;
  typename TestFixture::Directory* self = nullptr;
  std::atomic<int> reentered{0};
  options.on_removed = [&](const RemovedObject& r) {
    auto& dir = *self;
    if (r.key == "s") {
      EXPECT_TRUE(dir.Create("s-again").ok());
      EXPECT_TRUE(dir.Create("m-new", InGroup("g")).ok());
    } else if (r.key == "m1") {
      EXPECT_TRUE(dir.Create("m3", InGroup("g")).ok());  // group lock free
      EXPECT_TRUE(dir.FindGroup("g").ok());              // catalog free
    } else if (r.key == "x") {
      EXPECT_TRUE(dir.EraseGroup("g").ok());
    }
    EXPECT_TRUE(dir.WithObjectExclusive("anchor", [](auto&) {}).ok());
    EXPECT_TRUE(dir.VisitHandles([](auto) {}).ok());
    (void)dir.Diagnostics();
    reentered.fetch_add(1, std::memory_order_relaxed);
  };
  typename TestFixture::Directory dir(std::move(options));
  self = &dir;
  Watchdog watchdog(testing::kWatchdogBound, "L3 re-entrant removal callbacks");
  this->Must(dir.Create("anchor"));
  this->Must(dir.Create("s"));
  this->Must(dir.Create("m1", InGroup("g")));
  this->Must(dir.Create("m2", InGroup("g")));
  this->Must(dir.Create("x", InGroup("gx")));
  ASSERT_TRUE(dir.Erase("s").ok());
  ASSERT_TRUE(dir.Erase("m1").ok());
  ASSERT_TRUE(dir.Erase("x").ok());  // callback erases group g (m2, m-new, m3)
  EXPECT_EQ(reentered.load(), 6);
  EXPECT_EQ(dir.FindGroup("g").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(dir.object_count(), 2u);  // anchor, s-again
}

// ---- P1-P5 ------------------------------------------------------------------

TYPED_TEST(GroupDirectoryTest, P1LeaseGrantNeverMovesDeadlineEarlier) {
  typename TestFixture::Directory dir(this->Options());
  CreateOptions options;
  options.lease_ttl = seconds(10);
  this->Must(dir.Create("k", options));
  const std::int64_t t0 = this->clock_.NowNanos();
  const std::int64_t ten = std::chrono::nanoseconds(seconds(10)).count();
  ASSERT_TRUE(dir.WithObject("k",
                             [&](auto& v) {
                               EXPECT_EQ(v.lease_deadline_nanos(), t0 + ten);
                               EXPECT_EQ(v.GrantLease(seconds(1)),
                                         t0 + ten);  // not earlier
                               EXPECT_EQ(v.lease_deadline_nanos(), t0 + ten);
                             })
                  .ok());
  this->clock_.Advance(seconds(20));
  ASSERT_TRUE(
      dir.WithObject("k",
                     [&](auto& v) {
                       EXPECT_EQ(
                           v.GrantLease(seconds(1)),
                           this->clock_.NowNanos() +
                               std::chrono::nanoseconds(seconds(1)).count());
                     })
          .ok());
}

TYPED_TEST(GroupDirectoryTest, P2MemberReadExtendsSharedGroupLease) {
  DirectoryOptions options = this->Options();
  options.read_lease_ttl = seconds(5);
  typename TestFixture::Directory dir(std::move(options));
  auto a = this->Must(dir.Create("a", InGroup("g")));
  this->Must(dir.Create("b", InGroup("g")));
  this->Must(dir.Create("s"));
  this->clock_.Advance(seconds(100));
  ASSERT_TRUE(dir.WithObject("a", [](auto&) {}).ok());
  const std::int64_t expected =
      this->clock_.NowNanos() + std::chrono::nanoseconds(seconds(5)).count();
  EXPECT_EQ(a.group()->lease_deadline_nanos(), expected);
  ASSERT_TRUE(dir.WithObjectExclusive("b",
                                      [&](auto& v) {
                                        EXPECT_EQ(v.lease_deadline_nanos(),
                                                  expected);  // shared lease
                                      })
                  .ok());
  ASSERT_TRUE(dir.WithObjectExclusive("s",
                                      [&](auto& v) {
                                        EXPECT_EQ(v.lease_deadline_nanos(),
                                                  0);  // untouched
                                      })
                  .ok());
  // Now b is leased through a's read: erase of b needs force (P4).
  EXPECT_EQ(dir.Erase("b").code(), StatusCode::kFailedPrecondition);
}

TYPED_TEST(GroupDirectoryTest,
           P3ReadsNeverExtendSoftPinAndHardPinIsSetAtCreation) {
  DirectoryOptions options = this->Options();
  options.read_lease_ttl = seconds(5);
  typename TestFixture::Directory dir(std::move(options));
  CreateOptions create;
  create.soft_pin_ttl = seconds(3);
  create.hard_pin = true;
  this->Must(dir.Create("k", create));
  this->Must(dir.Create("plain"));
  const std::int64_t pin =
      this->clock_.NowNanos() + std::chrono::nanoseconds(seconds(3)).count();
  for (int i = 0; i < 3; ++i) {
    this->clock_.Advance(seconds(1));
    ASSERT_TRUE(dir.WithObject("k",
                               [&](auto& v) {
                                 EXPECT_EQ(v.soft_pin_deadline_nanos(), pin);
                                 EXPECT_TRUE(v.hard_pinned());
                                 v.GrantLease(seconds(50));
                                 EXPECT_EQ(v.soft_pin_deadline_nanos(), pin);
                               })
                    .ok());
  }
  ASSERT_TRUE(
      dir.WithObject("k", [](auto& v) { EXPECT_FALSE(v.soft_pinned()); }).ok());
  ASSERT_TRUE(
      dir.WithObject("plain", [](auto& v) { EXPECT_FALSE(v.hard_pinned()); })
          .ok());
}

TYPED_TEST(GroupDirectoryTest, P4UnexpiredLeaseBlocksEraseWithoutForce) {
  typename TestFixture::Directory dir(this->Options());
  CreateOptions leased;
  leased.lease_ttl = seconds(10);
  auto s = this->Must(dir.Create("s", leased));
  CreateOptions member = InGroup("g");
  member.lease_ttl = seconds(10);
  this->Must(dir.Create("m1", member));
  this->Must(dir.Create("m2", InGroup("g")));
  EXPECT_EQ(dir.Erase("s").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(dir.EraseIfMatch("s", s->id(), s.get()).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(dir.Erase("m2").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(dir.EraseGroup("g").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(dir.object_count(), 3u);  // all or none: nothing went
  EXPECT_TRUE(dir.Pin("m1").ok());
  EXPECT_TRUE(dir.Pin("m2").ok());
  EXPECT_EQ(this->RemovedCount(), 0u);
  EXPECT_TRUE(dir.Erase("s", EraseOptions{.force = true}).ok());
  EXPECT_TRUE(dir.EraseGroup("g", EraseOptions{.force = true}).ok());
  EXPECT_EQ(dir.object_count(), 0u);
  EXPECT_EQ(this->RemovedCount(), 3u);
}

TYPED_TEST(GroupDirectoryTest, P5ClockIsInjectedAndDrivesExpiry) {
  typename TestFixture::Directory dir(this->Options());
  CreateOptions leased;
  leased.lease_ttl = seconds(3600);
  this->Must(dir.Create("k", leased));
  EXPECT_EQ(dir.Erase("k").code(), StatusCode::kFailedPrecondition);
  this->clock_.Advance(seconds(3599));
  EXPECT_EQ(dir.Erase("k").code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(
      dir.WithObject("k", [](auto& v) { EXPECT_FALSE(v.lease_expired()); })
          .ok());
  this->clock_.Advance(seconds(1));
  ASSERT_TRUE(
      dir.WithObject("k", [](auto& v) { EXPECT_TRUE(v.lease_expired()); })
          .ok());
  EXPECT_TRUE(dir.Erase("k").ok());
}

// ---- model basics
// -------------------------------------------------------------

TYPED_TEST(GroupDirectoryTest, SingletonAndMemberShapes) {
  typename TestFixture::Directory dir(this->Options());
  auto s = this->Must(dir.Create("s"));
  auto m = this->Must(dir.Create("m", InGroup("g")));
  EXPECT_TRUE(s->is_singleton());
  EXPECT_FALSE(s.group());
  EXPECT_FALSE(m->is_singleton());
  ASSERT_TRUE(m.group());
  auto found = dir.FindGroup("g");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->get(), m.group().get());
  EXPECT_EQ(found.value()->MemberIds(), std::vector<ObjectId>{m->id()});
  EXPECT_EQ(dir.group_count(), 1u);
}

// A group keeps its members in ascending key order whatever order they
// join and leave in (the order its transactions lock them in, L2, and its
// durable records list them in); EraseGroup then removes every one.
TYPED_TEST(GroupDirectoryTest, L2GroupKeepsItsMembersInKeyOrder) {
  typename TestFixture::Directory dir(this->Options());
  std::map<std::string, ObjectId> ids;
  for (const char* key : {"m5", "m1", "m9", "m3", "m7", "m0", "m8"}) {
    ids[key] = this->Must(dir.Create(key, InGroup("g")))->id();
  }
  ASSERT_TRUE(dir.Erase("m3").ok());
  ids.erase("m3");
  ids["m4"] = this->Must(dir.Create("m4", InGroup("g")))->id();
  std::vector<ObjectId> want;
  for (const auto& [key, id] : ids) want.push_back(id);
  auto group = dir.FindGroup("g");
  ASSERT_TRUE(group.ok());
  EXPECT_EQ(group.value()->MemberIds(), want);
  ASSERT_TRUE(dir.EraseGroup("g").ok());
  for (const auto& [key, id] : ids) {
    EXPECT_EQ(dir.WithObject(key, [](auto&) {}).code(), StatusCode::kNotFound)
        << key;
  }
  EXPECT_EQ(dir.object_count(), 0u);
}

TYPED_TEST(GroupDirectoryTest,
           LastMemberLeavingStartsFreshGroupWithFreshLease) {
  typename TestFixture::Directory dir(this->Options());
  CreateOptions leased = InGroup("g");
  leased.lease_ttl = seconds(1);
  auto a = this->Must(dir.Create("a", leased));
  const GroupId first = a.group()->id();
  this->clock_.Advance(seconds(2));
  ASSERT_TRUE(dir.Erase("a").ok());
  EXPECT_FALSE(a.group().is_current());
  EXPECT_EQ(dir.group_count(), 0u);
  auto b = this->Must(dir.Create("b", InGroup("g")));
  EXPECT_NE(b.group()->id(), first);
  EXPECT_EQ(b.group()->lease_deadline_nanos(), 0);
  EXPECT_EQ(dir.group_count(), 1u);
}

TYPED_TEST(GroupDirectoryTest, WithObjectsHoldsAtMostOneObjectLockAtATime) {
  // A batch over {a, b} blocked on b (held elsewhere) must already have
  // released a: otherwise this is the classic two-lock deadlock.
  typename TestFixture::Directory dir(this->Options());
  this->Must(dir.Create("a", InGroup("g")));
  this->Must(dir.Create("b", InGroup("g")));
  Watchdog watchdog(testing::kWatchdogBound, "batch lock scope");
  std::atomic<bool> b_held{false};
  std::atomic<bool> a_taken_elsewhere{false};
  std::atomic<bool> batch_did_a{false};
  std::thread holder([&] {
    EXPECT_TRUE(dir.WithObjectExclusive("b",
                                        [&](auto&) {
                                          b_held.store(
                                              true, std::memory_order_seq_cst);
                                          while (!a_taken_elsewhere.load(
                                              std::memory_order_seq_cst)) {
                                            std::this_thread::yield();
                                          }
                                        })
                    .ok());
  });
  while (!b_held.load(std::memory_order_seq_cst)) std::this_thread::yield();
  std::string_view keys[] = {"a", "b"};
  std::thread batch([&] {
    EXPECT_TRUE(dir.WithObjectsExclusive(
                       keys,
                       [&](std::size_t i, StatusCode code, auto*) {
                         EXPECT_EQ(code, StatusCode::kOk);
                         if (i == 0)
                           batch_did_a.store(true, std::memory_order_seq_cst);
                       })
                    .ok());
  });
  while (!batch_did_a.load(std::memory_order_seq_cst))
    std::this_thread::yield();
  // The batch is now on its way to (or blocked on) b; a must be free.
  EXPECT_TRUE(dir.WithObjectExclusive("a", [](auto&) {}).ok());
  a_taken_elsewhere.store(true, std::memory_order_seq_cst);
  holder.join();
  batch.join();
}

TYPED_TEST(GroupDirectoryTest, WithObjectsReportsEachKeyInOrder) {
  typename TestFixture::Directory dir(this->Options());
  this->Must(dir.Create("a", InGroup("g")));
  this->Must(dir.Create("b", InGroup("g")));
  this->Must(dir.Create("c"));
  const std::string too_long(2000, 'x');
  std::string_view keys[] = {"a", "missing", "b", "a", "", too_long, "c", "a"};
  std::vector<StatusCode> codes;
  ASSERT_TRUE(dir.WithObjectsExclusive(
                     keys,
                     [&](std::size_t i, StatusCode code, auto* access) {
                       EXPECT_EQ(i, codes.size());
                       codes.push_back(code);
                       if (access != nullptr) {
                         EXPECT_EQ(access->key(), keys[i]);
                         access->payload().value += 1;
                       }
                     })
                  .ok());
  const std::vector<StatusCode> expected = {StatusCode::kOk,
                                            StatusCode::kNotFound,
                                            StatusCode::kOk,
                                            StatusCode::kOk,
                                            StatusCode::kInvalidArgument,
                                            StatusCode::kInvalidArgument,
                                            StatusCode::kOk,
                                            StatusCode::kOk};
  EXPECT_EQ(codes, expected);
  ASSERT_TRUE(
      dir.WithObject("a", [](auto& v) { EXPECT_EQ(v.payload().value, 3); })
          .ok());
}

TYPED_TEST(GroupDirectoryTest, EnvelopeChangesBumpVersion) {
  typename TestFixture::Directory dir(this->Options());
  this->Must(dir.Create("k"));
  std::uint64_t v0 = 0;
  ASSERT_TRUE(dir.WithObject("k", [&](auto& v) { v0 = v.version(); }).ok());
  ASSERT_TRUE(dir.WithObjectExclusive("k",
                                      [&](auto& a) {
                                        a.set_size_bytes(10);
                                        a.set_task(kTaskOffload);
                                        a.set_soft_pin_deadline_nanos(5);
                                        a.clear_task(kTaskOffload);
                                        a.GrantLease(seconds(1));
                                        EXPECT_EQ(a.version(), v0 + 5);
                                        const ObjectMetadata m = a.metadata();
                                        EXPECT_EQ(m.size_bytes, 10u);
                                        EXPECT_EQ(m.tasks, 0u);
                                        EXPECT_EQ(m.soft_pin_deadline_nanos, 5);
                                      })
                  .ok());
}

TYPED_TEST(GroupDirectoryTest, DiagnosticsCountObjectsGroupsAndBuckets) {
  DirectoryOptions options = this->Options();
  options.route.bucket_count = 8;
  options.route.fixed_bucket_count = true;  // the epoch route would grow
  typename TestFixture::Directory dir(std::move(options));
  for (int i = 0; i < 20; ++i) {
    this->Must(dir.Create(
        testing::Key("k", i),
        i < 10 ? InGroup(testing::Key("g", i % 3)) : CreateOptions{}));
  }
  const DirectoryDiagnostics d = dir.Diagnostics();
  EXPECT_EQ(d.objects, 20u);
  EXPECT_EQ(d.groups, 3u);
  EXPECT_EQ(d.route.bucket_count, 8u);
  EXPECT_EQ(d.route.entries, 20u);
  EXPECT_GE(d.route.nonempty_buckets, 1u);
  EXPECT_LE(d.route.nonempty_buckets, 8u);
  EXPECT_GE(d.route.max_bucket_entries, 3u);  // pigeonhole: 20 keys, 8 buckets
}

// ---- bad input
// ---------------------------------------------------------------

TYPED_TEST(GroupDirectoryTest, BadInputIsRejectedWithoutStateChange) {
  DirectoryOptions options = this->Options();
  options.max_key_bytes = 8;
  typename TestFixture::Directory dir(std::move(options));
  auto h = this->Must(dir.Create("ok"));
  const auto expect_unchanged = [&] {
    EXPECT_EQ(dir.object_count(), 1u);
    EXPECT_EQ(dir.group_count(), 0u);
    EXPECT_EQ(dir.Diagnostics().route.entries, 1u);
    EXPECT_EQ(this->RemovedCount(), 0u);
  };
  EXPECT_EQ(dir.Create("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dir.Create("123456789").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dir.Create("k", InGroup("123456789")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dir.Create("ok").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(dir.WithObject("", [](auto&) { ADD_FAILURE(); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dir.Pin("123456789").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dir.Erase("").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dir.Erase("nope").code(), StatusCode::kNotFound);
  EXPECT_EQ(dir.EraseGroup("nope").code(), StatusCode::kNotFound);
  EXPECT_EQ(dir.EraseIfMatch("ok", h->id() + 1, h.get()).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(dir.EraseIfMatch("ok", h->id(), nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dir.EraseIfMatch("", h->id(), h.get()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dir.WithHandle(typename TestFixture::Handle(), [](auto&) {}).code(),
            StatusCode::kInvalidArgument);
  expect_unchanged();
}

TYPED_TEST(GroupDirectoryTest, JoiningGroupBeingTornDownFails) {
  // A join that found the group in the catalog but locks it after EraseGroup
  // marked it removing gets kFailedPrecondition and changes nothing. To hit
  // the window, a reader holds a member's lock so EraseGroup waits holding
  // the group lock; the joiner then queues on the group lock. Each round's
  // outcome is checked; the window is retried until observed.
  bool observed = false;
  for (int round = 0; round < 20 && !observed; ++round) {
    typename TestFixture::Directory dir(this->Options());
    this->Must(dir.Create("m1", InGroup("g")));
    std::atomic<bool> holding{false};
    std::atomic<bool> release{false};
    std::thread holder([&] {
      EXPECT_TRUE(
          dir.WithObject("m1",
                         [&](auto&) {
                           holding.store(true, std::memory_order_seq_cst);
                           while (!release.load(std::memory_order_seq_cst)) {
                             std::this_thread::yield();
                           }
                         })
              .ok());
    });
    while (!holding.load(std::memory_order_seq_cst)) std::this_thread::yield();
    std::thread eraser([&] { EXPECT_TRUE(dir.EraseGroup("g").ok()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * (round + 1)));
    Status join_status;
    std::thread joiner(
        [&] { join_status = dir.Create("m2", InGroup("g")).status(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * (round + 1)));
    release.store(true, std::memory_order_seq_cst);
    holder.join();
    eraser.join();
    joiner.join();
    if (join_status.code() == StatusCode::kFailedPrecondition) {
      observed = true;
      EXPECT_EQ(dir.Pin("m2").status().code(), StatusCode::kNotFound);
      EXPECT_EQ(dir.object_count(), 0u);
      EXPECT_EQ(dir.group_count(), 0u);
    } else {
      // The joiner got in first (then EraseGroup took it too) or after the
      // teardown (a fresh group). Either way the directory is consistent.
      ASSERT_TRUE(join_status.ok()) << join_status.ToString();
      EXPECT_EQ(dir.object_count(), dir.Diagnostics().route.entries);
    }
  }
  EXPECT_TRUE(observed);
}

TYPED_TEST(GroupDirectoryTest, EveryCallAfterShutdownIsUnavailable) {
  typename TestFixture::Directory dir(this->Options());
  auto h = this->Must(dir.Create("k", InGroup("g")));
  ASSERT_TRUE(dir.Shutdown().ok());
  const auto unavailable = StatusCode::kUnavailable;
  EXPECT_TRUE(dir.Shutdown().ok()) << "Shutdown() is idempotent";
  EXPECT_EQ(dir.Create("x").status().code(), unavailable);
  EXPECT_EQ(dir.WithObject("k", [](auto&) { ADD_FAILURE(); }).code(),
            unavailable);
  EXPECT_EQ(dir.WithObjectExclusive("k", [](auto&) { ADD_FAILURE(); }).code(),
            unavailable);
  std::string_view keys[] = {"k"};
  EXPECT_EQ(dir.WithObjects(
                   keys, [](std::size_t, StatusCode, auto*) { ADD_FAILURE(); })
                .code(),
            unavailable);
  EXPECT_EQ(dir.WithHandle(h, [](auto&) { ADD_FAILURE(); }).code(),
            unavailable);
  EXPECT_EQ(dir.WithToken("k", h.token(), [](auto&) { ADD_FAILURE(); }).code(),
            unavailable);
  EXPECT_EQ(dir.Pin("k").status().code(), unavailable);
  EXPECT_EQ(dir.VisitHandles([](auto) { ADD_FAILURE(); }).code(), unavailable);
  EXPECT_EQ(dir.FindGroup("g").status().code(), unavailable);
  EXPECT_EQ(dir.Erase("k").code(), unavailable);
  EXPECT_EQ(dir.EraseGroup("g").code(), unavailable);
  EXPECT_EQ(dir.EraseIfMatch("k", h->id(), h.get()).code(), unavailable);
  EXPECT_EQ(dir.object_count(), 1u);
  EXPECT_EQ(h->key(), "k");
  EXPECT_EQ(this->RemovedCount(), 0u);
}

// ---- route errors (fault-injecting route policy)
// ------------------------------

// A route policy that fails writes on demand the way the epoch route does
// under back-pressure (kResourceExhausted, nothing changed). It also shows
// that GroupDirectory depends only on the route interface.
template <typename Entry>
class FlakyRoute {
 public:
  using Owner = std::shared_ptr<Entry>;
  using WriteBudget = typename LockedRoute<Entry>::WriteBudget;
  explicit FlakyRoute(const RouteOptions& options) : inner_(options) {}
  Result<WriteBudget> PrepareWrite(std::string_view key) {
    return inner_.PrepareWrite(key);
  }
  void ReclaimIfDue() { inner_.ReclaimIfDue(); }
  template <typename Fn>
  void WithEntry(std::string_view key, Fn&& fn) const {
    inner_.WithEntry(key, std::forward<Fn>(fn));
  }
  template <typename Fn>
  void WithEntries(std::span<const std::string_view> keys, Fn&& fn) const {
    inner_.WithEntries(keys, std::forward<Fn>(fn));
  }
  Owner Pin(std::string_view key) const { return inner_.Pin(key); }
  template <typename Fn>
  void VisitHandles(std::size_t chunk, Fn&& fn) const {
    inner_.VisitHandles(chunk, std::forward<Fn>(fn));
  }
  Status Publish(std::string_view key, Owner owner, WriteBudget* budget) {
    if (Take(fail_publishes)) return ResourceExhaustedError("injected");
    return inner_.Publish(key, std::move(owner), budget);
  }
  Status EraseIfMatch(std::string_view key, std::uint64_t id,
                      const Entry* entry, WriteBudget* budget) {
    if (Take(fail_unlinks)) return ResourceExhaustedError("injected");
    return inner_.EraseIfMatch(key, id, entry, budget);
  }
  RouteDiagnostics Diagnostics() const { return inner_.Diagnostics(); }

  mutable std::atomic<int> fail_publishes{0};
  mutable std::atomic<int> fail_unlinks{0};

 private:
  static bool Take(std::atomic<int>& budget) {
    int n = budget.load(std::memory_order_relaxed);
    while (n > 0) {
      if (budget.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }
  LockedRoute<Entry> inner_;
};

using FlakyDirectory = GroupDirectory<TestPayload, FlakyRoute>;

// GroupDirectory requires its route to be an ObjectRoute; a route that
// misses a member is rejected where the directory type is named.
template <typename Entry>
class RouteWithoutVisit : public FlakyRoute<Entry> {
 public:
  using FlakyRoute<Entry>::FlakyRoute;
  void VisitHandles() = delete;  // hides the inherited member template
};
static_assert(DirectoryRoute<ObjectRouteIndex, TestPayload>);
static_assert(DirectoryRoute<LockedRoute, TestPayload>);
static_assert(DirectoryRoute<FlakyRoute, TestPayload>);
static_assert(DirectoryRoute<FlakyRoute, EmptyPayload>);
// A group's unlinks take the epoch route's staged EraseEachIfMatch; the
// test routes, which lack it, unlink one by one.
static_assert(directory_internal::UnlinksEach<
              ObjectRouteIndex<ObjectEntry<TestPayload>>>);
static_assert(
    !directory_internal::UnlinksEach<LockedRoute<ObjectEntry<TestPayload>>>);
static_assert(!DirectoryRoute<RouteWithoutVisit, TestPayload>);

TEST(GroupDirectoryRouteErrorTest, PublishErrorLeavesNoState) {
  FlakyDirectory dir;
  directory_internal::GroupDirectoryTestPeer::route(dir).fail_publishes.store(
      1);
  EXPECT_EQ(dir.Create("s").status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(dir.Pin("s").status().code(), StatusCode::kNotFound);
  directory_internal::GroupDirectoryTestPeer::route(dir).fail_publishes.store(
      1);
  EXPECT_EQ(dir.Create("m", InGroup("fresh")).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(dir.FindGroup("fresh").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(dir.group_count(), 0u);
  auto first = dir.Create("m1", InGroup("g"));
  ASSERT_TRUE(first.ok());
  directory_internal::GroupDirectoryTestPeer::route(dir).fail_publishes.store(
      1);
  EXPECT_EQ(dir.Create("m2", InGroup("g")).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(first.value().group()->MemberIds(),
            std::vector<ObjectId>{first.value()->id()});
  EXPECT_TRUE(first.value().group().is_current());
  EXPECT_EQ(dir.object_count(), 1u);
  EXPECT_TRUE(dir.Create("m2", InGroup("g")).ok());
  EXPECT_TRUE(dir.Create("s").ok());
  EXPECT_EQ(dir.object_count(), 3u);
  EXPECT_EQ(dir.Diagnostics().route.entries, 3u);
}

TEST(GroupDirectoryRouteErrorTest, UnlinkErrorCommitsRemovalAndRetriesUnlink) {
  int removals = 0;
  DirectoryOptions options;
  options.on_removed = [&](const RemovedObject&) { ++removals; };
  FlakyDirectory dir(std::move(options));
  ASSERT_TRUE(dir.Create("k").ok());
  ASSERT_TRUE(dir.Create("a", InGroup("g")).ok());
  ASSERT_TRUE(dir.Create("b", InGroup("g")).ok());
  directory_internal::GroupDirectoryTestPeer::route(dir).fail_unlinks.store(1);
  ASSERT_TRUE(dir.Erase("k").ok());
  EXPECT_EQ(removals, 1);
  EXPECT_EQ(dir.Pin("k").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(dir.Diagnostics().pending_unlinks, 1u);
  EXPECT_EQ(dir.Diagnostics().route.entries, 3u);  // parked, invisible
  // The next write retries the parked unlink first.
  EXPECT_EQ(dir.Erase("k").code(), StatusCode::kNotFound);
  EXPECT_EQ(dir.Diagnostics().pending_unlinks, 0u);
  EXPECT_EQ(dir.Diagnostics().route.entries, 2u);
  directory_internal::GroupDirectoryTestPeer::route(dir).fail_unlinks.store(2);
  ASSERT_TRUE(dir.EraseGroup("g").ok());  // both member unlinks fail
  EXPECT_EQ(removals, 3);
  EXPECT_EQ(dir.FindGroup("g").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(dir.Diagnostics().pending_unlinks, 2u);
  std::size_t visited = 0;
  ASSERT_TRUE(dir.VisitHandles([&](auto h) { visited += h.size(); }).ok());
  EXPECT_EQ(visited, 0u);
  // The retry of `a` fails again, `b` goes; the create of `a` then finishes
  // the unlink of the removed instance itself.
  directory_internal::GroupDirectoryTestPeer::route(dir).fail_unlinks.store(1);
  auto again = dir.Create("a");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(dir.Diagnostics().route.entries, 1u);
  // The stale parked unlink no longer matches and is dropped.
  EXPECT_EQ(dir.Erase("zzz").code(), StatusCode::kNotFound);
  EXPECT_EQ(dir.Diagnostics().pending_unlinks, 0u);
  EXPECT_TRUE(dir.Pin("a").ok());
  EXPECT_EQ(dir.object_count(), 1u);
  EXPECT_EQ(removals, 3);
}

// L3 on a failed create: the entry that was never routed is destroyed, and
// its payload's destructor (host code) runs, only after every directory lock
// is released. The destructor asks another thread to create a key on the
// directory's only lifecycle stripe and waits for it: with the stripe still
// held that create cannot finish in time (the destructor then records the
// failure and lets it finish later instead of deadlocking).
struct ProbePayload;
using ProbeDirectory = GroupDirectory<ProbePayload, FlakyRoute>;

struct ProbePayload {
  ProbeDirectory* dir = nullptr;
  std::atomic<int>* destroyed = nullptr;
  std::atomic<int>* under_lock = nullptr;
  std::vector<std::thread>* probes = nullptr;
  const testing::TestLog* log = nullptr;
  ProbePayload() = default;
  ProbePayload(ProbeDirectory* d, std::atomic<int>* n, std::atomic<int>* bad,
               std::vector<std::thread>* p, const testing::TestLog* l)
      : dir(d), destroyed(n), under_lock(bad), probes(p), log(l) {}
  ProbePayload(ProbePayload&& other) noexcept
      : dir(std::exchange(other.dir, nullptr)),
        destroyed(other.destroyed),
        under_lock(other.under_lock),
        probes(other.probes),
        log(other.log),
        read_key(std::move(other.read_key)) {}
  // Only into a moved-from payload: overwriting a live one would run its
  // release in place, under whatever lock the caller holds.
  ProbePayload& operator=(ProbePayload&& other) noexcept {
    EXPECT_EQ(dir, nullptr) << "a live payload overwritten in place";
    dir = std::exchange(other.dir, nullptr);
    destroyed = other.destroyed;
    under_lock = other.under_lock;
    probes = other.probes;
    log = other.log;
    read_key = std::move(other.read_key);
    return *this;
  }
  // Set: the probe reads this key (needs its object lock) instead of
  // creating a key (needs the stripe).
  std::string read_key;
  ~ProbePayload() {
    if (dir == nullptr) return;
    // With a log, the probe also needs every earlier record resolved (the
    // file log's Finalize waits for them).
    EXPECT_FALSE(log->HasUnresolvedRecord())
        << "payload destroyed while a logged write's record is unresolved";
    const int n = destroyed->fetch_add(1) + 1;
    auto done = std::make_shared<std::atomic<bool>>(false);
    ProbeDirectory* d = dir;
    probes->emplace_back([d, done, n, key = read_key] {
      if (key.empty()) {
        EXPECT_TRUE(d->Create(testing::Key("probe-", n)).ok());
      } else {
        EXPECT_TRUE(d->WithObject(key, [](auto&) {}).ok());
      }
      done->store(true);
    });
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!done->load() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!done->load()) under_lock->fetch_add(1);
  }
};

// Run with every durable log (tests/directory/every_log.h): the payload is
// destroyed after the create's record is cancelled, too.
class GroupDirectoryRouteErrorLogTest
    : public ::testing::TestWithParam<testing::LogKind> {};

INSTANTIATE_TEST_SUITE_P(EveryLog, GroupDirectoryRouteErrorLogTest,
                         ::testing::ValuesIn(testing::kEveryLog),
                         testing::LogKindName);

TEST_P(GroupDirectoryRouteErrorLogTest,
       L3FailedCreateDestroysPayloadWithNoDirectoryLockHeld) {
  testing::Watchdog watchdog(std::chrono::seconds(60), "failed create");
  testing::TestLog log(GetParam());
  std::atomic<int> destroyed{0}, under_lock{0};
  std::vector<std::thread> probes;
  {
    DirectoryOptions options;
    options.lifecycle_stripes = 1;  // the probe needs the creator's stripe
    options.durable_log = log.get();
    ProbeDirectory dir(std::move(options));
    ASSERT_TRUE(dir.Create("m0", InGroup("g")).ok());
    for (const bool member : {false, true}) {
      directory_internal::GroupDirectoryTestPeer::route(dir)
          .fail_publishes.store(1);
      auto made = dir.Create(
          member ? "m1" : "s", member ? InGroup("g") : CreateOptions{},
          ProbePayload(&dir, &destroyed, &under_lock, &probes, &log));
      EXPECT_EQ(made.status().code(), StatusCode::kResourceExhausted);
      EXPECT_EQ(destroyed.load(), member ? 2 : 1) << "payload kept alive";
      EXPECT_EQ(under_lock.exchange(0), 0)
          << (member ? "member" : "singleton")
          << " payload destroyed under a directory lock";
    }
    for (std::thread& t : probes) t.join();
    EXPECT_TRUE(dir.Pin("probe-1").ok());
    EXPECT_TRUE(dir.Pin("probe-2").ok());
  }
}

// L3 on CommitUpsertWithPayload: the replaced payload is destroyed after
// the object's lock is released (its probe reads the same object) and,
// with a log, after the upsert's record is finalized.
TEST_P(GroupDirectoryRouteErrorLogTest,
       L3UpsertWithPayloadDestroysReplacedPayloadWithNoLockHeld) {
  testing::Watchdog watchdog(std::chrono::seconds(60), "upsert with payload");
  testing::TestLog log(GetParam());
  std::atomic<int> destroyed{0}, under_lock{0};
  std::vector<std::thread> probes;
  {
    DirectoryOptions options;
    options.durable_log = log.get();
    ProbeDirectory dir{std::move(options)};
    ProbePayload old(&dir, &destroyed, &under_lock, &probes, &log);
    old.read_key = "a";
    ASSERT_TRUE(dir.Create("a", CreateOptions{}, std::move(old)).ok());
    Result<ObjectHandle<ProbePayload>> a = dir.Pin("a");
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(dir.BeginUpsert("a", a->token(), {1, 1}).ok());
    ASSERT_TRUE(
        dir.CommitUpsertWithPayload("a", a->token(), ProbePayload()).ok());
    EXPECT_EQ(destroyed.load(), 1) << "replaced payload kept alive";
    EXPECT_EQ(under_lock.load(), 0)
        << "replaced payload destroyed under the object lock";
    for (std::thread& t : probes) t.join();
  }
}

// An empty directory holds no lifecycle stripes (docs/directory.md, "Memory
// of an empty directory"): reads never make them; the first create does, and
// a later erase uses the same array.
TEST(GroupDirectoryStripeTest,
     LifecycleStripesMadeByFirstWriteNotByConstruction) {
  using Peer = directory_internal::GroupDirectoryTestPeer;
  DirectoryOptions options;
  options.lifecycle_stripes = 4096;
  GroupDirectory<TestPayload> dir(std::move(options));
  EXPECT_FALSE(Peer::lifecycle_stripes_allocated(dir));
  EXPECT_EQ(dir.WithObject("k", [](auto&) {}).code(), StatusCode::kNotFound);
  EXPECT_EQ(dir.Erase("k").code(), StatusCode::kNotFound);
  EXPECT_TRUE(dir.Pin("k").status().code() == StatusCode::kNotFound);
  ASSERT_TRUE(dir.Create("k").ok());
  EXPECT_TRUE(Peer::lifecycle_stripes_allocated(dir));
  EXPECT_TRUE(dir.Erase("k", EraseOptions{.force = true}).ok());
  ASSERT_TRUE(dir.Create("k").ok());
  EXPECT_TRUE(dir.Pin("k").ok());
}

// First writes racing on a fresh directory each try to install the stripe
// array; exactly one array wins and every create lands (ASan reports the
// loser's array if it leaks; TSan the install if it races).
TEST(GroupDirectoryStripeTest, RacingFirstWritesShareOneStripeArray) {
  constexpr int kThreads = 4;
  const int rounds = testing::StressIterations(20);
  for (int round = 0; round < rounds; ++round) {
    GroupDirectory<TestPayload> dir;
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        ready.fetch_add(1);
        while (ready.load() < kThreads) {
        }
        EXPECT_TRUE(dir.Create("key-" + std::to_string(t)).ok());
      });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(dir.object_count(), static_cast<std::size_t>(kThreads));
    for (int t = 0; t < kThreads; ++t) {
      EXPECT_TRUE(dir.Pin("key-" + std::to_string(t)).ok());
    }
  }
}

}  // namespace
}  // namespace cairn
