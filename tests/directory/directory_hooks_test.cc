// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// DirectoryHooks' identity hooks (restore and log replay, issue 23):
// CreateRestored keeps the id and version it is given, is never logged and
// forces its charge; the id counter resumes above every restored or
// reserved id and never moves back. (Census, InspectUnit and
// EvictIfUnchanged are tested with their users: tests/tenant/eviction_test.cc
// and tests/ha/snapshot_test.cc.)

#include "cairn/directory/directory_hooks.h"

#include <cstdint>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/directory/durable_log.h"
#include "cairn/directory/group_directory.h"
#include "cairn/directory/quota.h"
#include "directory/directory_testing.h"

namespace cairn {
namespace {

using testing::Sized;
using testing::TestPayload;
using Dir = GroupDirectory<TestPayload>;
using View = ObjectView<TestPayload>;
using Identity = DirectoryHooks::RestoredIdentity;

TestPayload Value(std::int64_t v) {
  TestPayload p;
  p.value = v;
  return p;
}

// The id and version `key` has in `dir` (0, 0 if absent).
std::pair<ObjectId, std::uint64_t> IdAndVersion(const Dir& dir,
                                                std::string_view key) {
  std::pair<ObjectId, std::uint64_t> out{0, 0};
  dir.WithObject(key,
                 [&](const View& v) {
                   out = {v.id(), v.version()};
                 })
      .IgnoreError();
  return out;
}

TEST(DirectoryHooksTest, CreateRestoredKeepsIdAndVersionAndResumesTheCounter) {
  ManualClock clock;
  DirectoryOptions options;
  options.clock = &clock;
  Dir dir(options);
  EXPECT_EQ(DirectoryHooks::NextObjectIdPeek(dir), 1u);
  auto a = DirectoryHooks::CreateRestored(dir, "a", {.id = 40, .version = 7},
                                          Sized(3), Value(1));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)->id(), 40u);
  EXPECT_EQ(IdAndVersion(dir, "a"),
            std::make_pair(ObjectId{40}, std::uint64_t{7}));
  // A member of a group keeps its identity too.
  auto m = DirectoryHooks::CreateRestored(dir, "m", {.id = 12, .version = 3},
                                          Sized(1, "g"), Value(2));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(IdAndVersion(dir, "m"),
            std::make_pair(ObjectId{12}, std::uint64_t{3}));
  ASSERT_TRUE(dir.FindGroup("g").ok());
  // The counter resumed above the largest id, not above the last one.
  EXPECT_EQ(DirectoryHooks::NextObjectIdPeek(dir), 41u);
  auto fresh = dir.Create("b", Sized(1), Value(3));
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->id(), 41u);
  EXPECT_EQ(IdAndVersion(dir, "b").second, 1u);
  EXPECT_EQ(dir.object_count(), 3u);
  // A restored object is a live object like any other: found by its token.
  EXPECT_TRUE(
      dir.WithToken("a", (*a)->token(),
                    [](const View& v) { EXPECT_EQ(v.payload().value, 1); })
          .ok());
}

TEST(DirectoryHooksTest, ReserveObjectIdsOnlyRaisesTheCounter) {
  Dir dir;
  DirectoryHooks::ReserveObjectIds(dir, 99);
  EXPECT_EQ(DirectoryHooks::NextObjectIdPeek(dir), 100u);
  DirectoryHooks::ReserveObjectIds(dir, 5);  // never lowers
  EXPECT_EQ(DirectoryHooks::NextObjectIdPeek(dir), 100u);
  auto made = dir.Create("k");
  ASSERT_TRUE(made.ok());
  EXPECT_EQ((*made)->id(), 100u);
  // The largest id cannot be reserved past: the counter stays usable.
  DirectoryHooks::ReserveObjectIds(dir, std::numeric_limits<ObjectId>::max());
  EXPECT_EQ(DirectoryHooks::NextObjectIdPeek(dir),
            std::numeric_limits<ObjectId>::max());
}

TEST(DirectoryHooksTest, CreateRestoredErrorsChangeNothing) {
  QuotaAccount quota;
  DirectoryOptions options;
  options.quota = &quota;
  Dir dir(options);
  ASSERT_TRUE(
      DirectoryHooks::CreateRestored(dir, "k", {.id = 5}, Sized(2), Value(1))
          .ok());
  ASSERT_EQ(quota.charged(), 2u);
  auto expect = [&](std::string_view key, Identity identity, StatusCode code,
                    const char* what) {
    auto made =
        DirectoryHooks::CreateRestored(dir, key, identity, Sized(4), Value(2));
    EXPECT_EQ(made.status().code(), code) << what;
    EXPECT_EQ(quota.charged(), 2u) << what;
    EXPECT_EQ(dir.object_count(), 1u) << what;
  };
  expect("k", {.id = 6}, StatusCode::kAlreadyExists, "key already routed");
  expect("k2", {.id = 0}, StatusCode::kInvalidArgument, "id 0");
  expect("k2", {.id = 7, .version = 0}, StatusCode::kInvalidArgument,
         "version 0");
  expect("k2", {.id = std::numeric_limits<ObjectId>::max()},
         StatusCode::kInvalidArgument, "the largest id");
  expect("", {.id = 8}, StatusCode::kInvalidArgument, "empty key");
  // The first object is untouched.
  EXPECT_EQ(IdAndVersion(dir, "k"),
            std::make_pair(ObjectId{5}, std::uint64_t{1}));
  ASSERT_TRUE(dir.Shutdown().ok());
  expect("k3", {.id = 9}, StatusCode::kUnavailable, "shut down");
}

TEST(DirectoryHooksTest, CreateRestoredIsNotLoggedAndForcesTheCharge) {
  // The primary admitted the object and logged it: the replica must take it
  // past its limit and closed admission, and must not log it again.
  InMemoryDurableLog log;
  QuotaAccount quota(10);
  DirectoryOptions options;
  options.durable_log = &log;
  options.quota = &quota;
  Dir dir(options);
  ASSERT_TRUE(dir.Create("logged", Sized(4), Value(1)).ok());
  const std::size_t records = log.records().size();
  ASSERT_EQ(records, 1u);
  EXPECT_EQ(dir.Create("over", Sized(20), Value(2)).status().code(),
            StatusCode::kResourceExhausted);
  auto over = DirectoryHooks::CreateRestored(dir, "over", {.id = 3}, Sized(20),
                                             Value(2));
  ASSERT_TRUE(over.ok()) << over.status().ToString();
  EXPECT_EQ(quota.charged(), 24u);
  EXPECT_EQ(quota.deficit(), 14u);
  quota.CloseAdmission();
  ASSERT_TRUE(DirectoryHooks::CreateRestored(dir, "closed", {.id = 4},
                                             Sized(1, "g"), Value(3))
                  .ok());
  EXPECT_EQ(quota.charged(), 25u);
  EXPECT_EQ(log.records().size(), records);
  EXPECT_EQ(log.reserve_calls(), 2u);  // the two host creates only
  EXPECT_EQ(log.open_reservations(), 0u);
  // Erasing a restored object releases its charge (Q2) and is logged.
  ASSERT_TRUE(dir.Erase("over").ok());
  EXPECT_EQ(quota.charged(), 5u);
  EXPECT_EQ(log.records().size(), records + 1);
}

}  // namespace
}  // namespace cairn
