// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The read path's "does not allocate" contract, checked with the counting
// operator new of testing/alloc_counter.h: after one warm-up call on the
// thread (which registers the thread's implicit epoch participant), hits
// and misses of every lookup allocate nothing, on the library's epoch
// route and at both levels (route and directory).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/directory/group_directory.h"
#include "cairn/route/object_route_index.h"
#include "directory/directory_testing.h"
#include "testing/alloc_counter.h"

namespace cairn {
namespace {

using testing::AllocationCounter;
using Directory = testing::TestDirectory<testing::EpochRouteTag>;

constexpr int kBatch = 32;

class ReadPathAllocTest : public ::testing::Test {
 protected:
  ReadPathAllocTest() : dir_(Options()) {
    for (int i = 0; i < kBatch; ++i) keys_.push_back(testing::Key("key-", i));
    // Half the batch is routed (singletons and members), half is not.
    for (int i = 0; i < kBatch; i += 2) {
      auto made = dir_.Create(
          keys_[i], i % 4 == 0 ? CreateOptions{} : testing::InGroup("g"));
      EXPECT_TRUE(made.ok()) << made.status().ToString();
      if (made.ok()) handles_.push_back(std::move(made).value());
    }
    views_.assign(keys_.begin(), keys_.end());
    auto erased = dir_.Create("erased");
    EXPECT_TRUE(erased.ok());
    erased_ = std::move(erased).value();
    EXPECT_TRUE(dir_.Erase("erased").ok());
    WarmUp();
  }

  static DirectoryOptions Options() {
    DirectoryOptions options;
    options.read_lease_ttl = std::chrono::seconds(1);  // leases are granted
    return options;
  }

  // The thread's first guard of the route's domain registers its implicit
  // participant, which allocates once.
  void WarmUp() {
    EXPECT_TRUE(dir_.WithObject(keys_[0], [](auto&) {}).ok());
    EXPECT_TRUE(dir_.Pin(keys_[0]).ok());
  }

  Directory dir_;
  std::vector<std::string> keys_;
  std::vector<std::string_view> views_;
  std::vector<Directory::Handle> handles_;
  Directory::Handle erased_;
};

TEST_F(ReadPathAllocTest, WithObjectHitAndMissDoNotAllocate) {
  AllocationCounter allocs;
  int seen = 0;
  Status hit = dir_.WithObject(
      keys_[0], [&](auto& v) { seen += v.payload().value == 0 ? 1 : 0; });
  Status member_hit = dir_.WithObjectExclusive(
      keys_[2], [&](auto& a) { a.payload().value = 1; });
  Status miss = dir_.WithObject(keys_[1], [&](auto&) { ++seen; });
  Status miss_exclusive = dir_.WithObjectExclusive(keys_[1], [&](auto&) {});
  Status removed = dir_.WithObject("erased", [&](auto&) { ++seen; });
  Status bad_key = dir_.WithObject("", [&](auto&) { ++seen; });
  EXPECT_EQ(allocs.count(), 0u);
  EXPECT_TRUE(hit.ok());
  EXPECT_TRUE(member_hit.ok());
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(miss.code(), StatusCode::kNotFound);
  EXPECT_EQ(miss_exclusive.code(), StatusCode::kNotFound);
  EXPECT_EQ(removed.code(), StatusCode::kNotFound);
  EXPECT_EQ(bad_key.code(), StatusCode::kInvalidArgument);
}

TEST_F(ReadPathAllocTest, WithHandleAndWithTokenMissesDoNotAllocate) {
  const ObjectToken live = handles_[0].token();
  AllocationCounter allocs;
  Status handle_hit = dir_.WithHandle(handles_[0], [](auto&) {});
  Status handle_miss = dir_.WithHandle(erased_, [](auto&) {});
  Status empty_handle = dir_.WithHandle(Directory::Handle(), [](auto&) {});
  Status token_hit = dir_.WithToken(keys_[0], live, [](auto&) {});
  Status token_miss = dir_.WithToken("erased", erased_.token(), [](auto&) {});
  Status other_tenant = dir_.WithToken(
      keys_[0], ObjectToken{live.tenant + 1, live.object}, [](auto&) {});
  Status wrong_instance = dir_.WithToken(
      keys_[0], ObjectToken{live.tenant, live.object + 1000}, [](auto&) {});
  EXPECT_EQ(allocs.count(), 0u);
  EXPECT_TRUE(handle_hit.ok());
  EXPECT_EQ(handle_miss.code(), StatusCode::kNotFound);
  EXPECT_EQ(empty_handle.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(token_hit.ok());
  EXPECT_EQ(token_miss.code(), StatusCode::kNotFound);
  EXPECT_EQ(other_tenant.code(), StatusCode::kNotFound);
  EXPECT_EQ(wrong_instance.code(), StatusCode::kNotFound);
}

TEST_F(ReadPathAllocTest, PinHitAndMissDoNotAllocate) {
  AllocationCounter allocs;
  // A hit copies the route's owner (a reference count, not an allocation).
  Result<Directory::Handle> hit = dir_.Pin(keys_[2]);
  Result<Directory::Handle> miss = dir_.Pin(keys_[1]);
  Result<Directory::Handle> removed = dir_.Pin("erased");
  EXPECT_EQ(allocs.count(), 0u);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit.value().get(), handles_[1].get());
  EXPECT_EQ(miss.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(removed.status().code(), StatusCode::kNotFound);
}

TEST_F(ReadPathAllocTest, WithObjectsOverThirtyTwoKeysDoesNotAllocate) {
  int hits = 0, misses = 0;
  AllocationCounter allocs;
  Status shared =
      dir_.WithObjects(views_, [&](std::size_t, StatusCode code, auto* view) {
        if (code == StatusCode::kOk && view != nullptr) ++hits;
        if (code == StatusCode::kNotFound) ++misses;
      });
  Status exclusive = dir_.WithObjectsExclusive(
      views_, [&](std::size_t, StatusCode code, auto* access) {
        if (code == StatusCode::kOk) access->payload().value += 1;
      });
  EXPECT_EQ(allocs.count(), 0u);
  EXPECT_TRUE(shared.ok());
  EXPECT_TRUE(exclusive.ok());
  EXPECT_EQ(hits, kBatch / 2);
  EXPECT_EQ(misses, kBatch / 2);
}

// A matched erase that matches nothing answers with a code-only kNotFound.
TEST_F(ReadPathAllocTest, EraseIfMatchMissDoesNotAllocate) {
  const Directory::Handle& live = handles_[0];
  AllocationCounter allocs;  // the fixture's creates warmed this thread
  Status stale_id = dir_.EraseIfMatch(keys_[0], live->id() + 1, live.get());
  Status unknown = dir_.EraseIfMatch(keys_[1], live->id(), live.get());
  EXPECT_EQ(allocs.count(), 0u);
  EXPECT_EQ(stale_id.code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_TRUE(dir_.Pin(keys_[0]).ok());
}

// The same contract one level down, on the route itself.
TEST(RouteReadPathAllocTest, LookupsAndEraseIfMatchMissDoNotAllocate) {
  struct Entry {
    std::uint64_t id() const { return 7; }
  };
  ObjectRouteIndex<Entry> route;
  auto owner = std::make_shared<Entry>();
  ASSERT_TRUE(route.Publish("k", owner).ok());
  std::vector<std::string> keys;
  for (int i = 0; i < kBatch; ++i) keys.push_back(testing::Key("other-", i));
  keys[5] = "k";
  std::vector<std::string_view> views(keys.begin(), keys.end());
  route.WithEntry("k", [](Entry*) {});  // warm-up: implicit participant
  AllocationCounter allocs;
  Entry* hit = nullptr;
  Entry* miss = owner.get();
  route.WithEntry("k", [&](Entry* e) { hit = e; });
  route.WithEntry("absent", [&](Entry* e) { miss = e; });
  int found = 0;
  route.WithEntries(
      views, [&](std::size_t, Entry* e) { found += e != nullptr ? 1 : 0; });
  std::shared_ptr<Entry> pinned = route.Pin("k");
  std::shared_ptr<Entry> absent = route.Pin("absent");
  ObjectRouteIndex<Entry>::WriteBudget none;
  Status wrong_id = route.EraseIfMatch("k", 8, owner.get());
  Status unrouted = route.EraseIfMatch("absent", 7, owner.get(), &none);
  EXPECT_EQ(allocs.count(), 0u);
  EXPECT_EQ(wrong_id.code(), StatusCode::kNotFound);
  EXPECT_EQ(unrouted.code(), StatusCode::kNotFound);
  EXPECT_EQ(hit, owner.get());
  EXPECT_EQ(miss, nullptr);
  EXPECT_EQ(found, 1);
  EXPECT_EQ(pinned, owner);
  EXPECT_EQ(absent, nullptr);
}

}  // namespace
}  // namespace cairn
