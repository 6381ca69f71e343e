// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ObjectRouteIndex on its own: the route contract (D3, D4, D9), the
// snapshot layout under collisions, and reclamation integration with a
// stalled reader (E4, E5). The directory suites run over it too.

#include "cairn/route/object_route_index.h"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/epoch/epoch_domain.h"
#include "cairn/route/route_concept.h"
#include "testing/alloc_counter.h"
#include "testing/locked_route.h"
#include "testing/route_peer.h"
#include "testing/stress.h"

namespace cairn {
namespace {

struct TestEntry {
  TestEntry(std::uint64_t id_in, std::string key_in)
      : id_value(id_in), key(std::move(key_in)) {}
  std::uint64_t id() const { return id_value; }
  std::uint64_t id_value;
  std::string key;
  std::atomic<bool> dead{false};
};
using Route = ObjectRouteIndex<TestEntry>;
using Owner = Route::Owner;

Owner Make(std::uint64_t id, std::string key) {
  return std::make_shared<TestEntry>(id, std::move(key));
}

TestEntry* Find(const Route& route, std::string_view key) {
  TestEntry* found = nullptr;
  route.WithEntry(key, [&](TestEntry* e) { found = e; });
  return found;
}

TEST(ObjectRouteIndexTest, PublishThenLookupBorrowsTheEntry) {
  Route route;
  Owner a = Make(1, "alpha");
  ASSERT_TRUE(route.Publish("alpha", a).ok());
  EXPECT_EQ(Find(route, "alpha"), a.get());
  EXPECT_EQ(Find(route, "beta"), nullptr);
  EXPECT_EQ(Find(route, ""), nullptr);
  EXPECT_EQ(route.Pin("alpha"), a);
  EXPECT_EQ(route.Pin("beta"), nullptr);
  EXPECT_EQ(a.use_count(), 2) << "the route holds exactly one owner";
}

// An empty route is its table: the writer stripes are made by the first
// write (docs/route.md, "Memory"), so a host's empty tenants stay small.
TEST(ObjectRouteIndexTest, EmptyRouteAllocatesOnlyItsTable) {
  EpochDomain domain;
  RouteOptions options;
  options.epoch_domain = &domain;
  testing::AllocationCounter counter;
  Route route(options);
  EXPECT_EQ(counter.count(), 1u) << "only the bucket table";
  EXPECT_EQ(route.Diagnostics().publications, 0u);
  Owner a = Make(1, "alpha");
  ASSERT_TRUE(route.Publish("alpha", a).ok());
  EXPECT_EQ(Find(route, "alpha"), a.get());
  EXPECT_EQ(route.Diagnostics().publications, 1u);
}

// Every allocation of a route's first write failed in turn (the stripes
// it makes among them): the write fails with kResourceExhausted and
// changes nothing, and the next write succeeds.
TEST(ObjectRouteIndexTest, FirstWriteSurvivesEachAllocationFailing) {
  EpochDomain domain;
  RouteOptions options;
  options.epoch_domain = &domain;
  for (int nth = 1;; ++nth) {
    SCOPED_TRACE(nth);
    Route route(options);
    Owner a = Make(1, "alpha");
    const std::uint64_t failed_before =
        testing::FailedAllocationsOnThisThread();
    testing::FailNthAllocationOnThisThread(nth);
    Status s = route.Publish("alpha", a);
    testing::FailNthAllocationOnThisThread(0);
    if (testing::FailedAllocationsOnThisThread() == failed_before) {
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_GT(nth, 1) << "the first write allocates";
      break;
    }
    ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
    EXPECT_EQ(Find(route, "alpha"), nullptr);
    EXPECT_EQ(a.use_count(), 1);
    ASSERT_TRUE(route.Publish("alpha", a).ok());
    EXPECT_EQ(Find(route, "alpha"), a.get());
  }
}

TEST(ObjectRouteIndexTest, D3PublishIsInsertOnly) {
  Route route;
  Owner first = Make(1, "k"), second = Make(2, "k");
  ASSERT_TRUE(route.Publish("k", first).ok());
  Status s = route.Publish("k", second);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Find(route, "k"), first.get()) << "routed entry changed";
  EXPECT_EQ(second.use_count(), 1) << "the candidate was kept";
}

TEST(ObjectRouteIndexTest, D4EraseIfMatchNeedsIdAndPointer) {
  Route route;
  Owner old_entry = Make(1, "k");
  ASSERT_TRUE(route.Publish("k", old_entry).ok());
  ASSERT_TRUE(route.EraseIfMatch("k", 1, old_entry.get()).ok());
  Owner recreated = Make(2, "k");
  ASSERT_TRUE(route.Publish("k", recreated).ok());
  // A stale eraser of the first instance: same key, old id and pointer.
  const auto not_found = StatusCode::kNotFound;
  EXPECT_EQ(route.EraseIfMatch("k", 1, old_entry.get()).code(), not_found);
  EXPECT_EQ(route.EraseIfMatch("k", 1, recreated.get()).code(), not_found)
      << "wrong id";
  EXPECT_EQ(route.EraseIfMatch("k", 2, old_entry.get()).code(), not_found)
      << "wrong ptr";
  EXPECT_EQ(route.EraseIfMatch("missing", 2, recreated.get()).code(),
            not_found);
  EXPECT_EQ(route.EraseIfMatch("k", 2, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Find(route, "k"), recreated.get());
  ASSERT_TRUE(route.EraseIfMatch("k", 2, recreated.get()).ok());
  EXPECT_EQ(Find(route, "k"), nullptr);
}

// EraseEachIfMatch answers each item as EraseIfMatch would in a loop, over
// more items than one prefetch window (8), with misses, a null entry, a
// stale id and a key repeated after its unlink mixed in; unlocked (no
// budget: each write its own guard) and locked (a budget: the window's
// writes inside one guard, counted once per window).
void EraseEachAnswersEachItemAsTheLoopWould(bool locked) {
  RouteOptions options;
  options.bucket_count = 4;           // many items share a bucket
  options.fixed_bucket_count = true;  // Entries() is the route's population
  Route route(options);
  std::vector<Owner> owners;
  for (int i = 0; i < 22; ++i) {
    owners.push_back(Make(100 + i, "key" + std::to_string(i)));
    ASSERT_TRUE(route.Publish(owners.back()->key, owners.back()).ok());
  }
  std::vector<Route::Unlinking> items;
  std::vector<StatusCode> want;
  for (int i = 0; i < 22; ++i) {
    const Owner& o = owners[i];
    if (i % 5 == 3) {  // stale id: kept
      items.push_back({o->key, o->id() + 1000, o.get()});
      want.push_back(StatusCode::kNotFound);
      continue;
    }
    items.push_back({o->key, o->id(), o.get()});
    want.push_back(StatusCode::kOk);
    if (i == 9) {  // the same again, right after its unlink
      items.push_back({o->key, o->id(), o.get()});
      want.push_back(StatusCode::kNotFound);
    }
  }
  items.push_back({"missing", 1, owners[0].get()});
  want.push_back(StatusCode::kNotFound);
  items.push_back({"key1", 101, nullptr});
  want.push_back(StatusCode::kInvalidArgument);
  std::vector<StatusCode> got(items.size(), StatusCode::kInternal);
  std::vector<int> calls(items.size(), 0);
  Route::WriteBudget none;
  route.EraseEachIfMatch(std::span<const Route::Unlinking>(items),
                         locked ? &none : nullptr,
                         [&](std::size_t i, const Status& s) {
                           ++calls[i];
                           got[i] = s.code();
                         });
  route.ReclaimIfDue();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(calls[i], 1) << "item " << i;
    EXPECT_EQ(got[i], want[i]) << "item " << i << " (" << items[i].key << ")";
  }
  for (int i = 0; i < 22; ++i) {
    EXPECT_EQ(Find(route, owners[i]->key),
              i % 5 == 3 ? owners[i].get() : nullptr)
        << owners[i]->key;
    if (i % 5 == 3) ++kept;
  }
  EXPECT_EQ(route.Diagnostics().entries, kept);
  EXPECT_EQ(route_internal::ObjectRouteIndexTestPeer::Entries(route), kept);
  // Every retired snapshot is freed once no guard is left (a window's guard
  // ended with the window).
  ASSERT_TRUE(route.epoch_domain().Barrier().ok());
  EXPECT_EQ(route.Diagnostics().retired_bytes, 0u);
}

TEST(ObjectRouteIndexTest, D4EraseEachIfMatchAnswersEachItemAsTheLoopWould) {
  EraseEachAnswersEachItemAsTheLoopWould(/*locked=*/false);
}

TEST(ObjectRouteIndexTest, D4EraseEachIfMatchWithABudgetAnswersAsTheLoop) {
  EraseEachAnswersEachItemAsTheLoopWould(/*locked=*/true);
}

// The route interface is a concept: both routes satisfy it, and a route
// missing a member (here EraseIfMatch) does not.
template <typename Entry>
struct RouteWithoutErase {
  using Owner = std::shared_ptr<Entry>;
  struct WriteBudget {};
  explicit RouteWithoutErase(const RouteOptions&) {}
  template <typename Fn>
  void WithEntry(std::string_view, Fn&&) const {}
  template <typename Fn>
  void WithEntries(std::span<const std::string_view>, Fn&&) const {}
  Owner Pin(std::string_view) const { return nullptr; }
  template <typename Fn>
  void VisitHandles(std::size_t, Fn&&) const {}
  Result<WriteBudget> PrepareWrite(std::string_view) { return WriteBudget{}; }
  void ReclaimIfDue() {}
  Status Publish(std::string_view, Owner, WriteBudget*) { return Status(); }
  RouteDiagnostics Diagnostics() const { return {}; }
};
// The same route with EraseIfMatch in the old shape (Result<bool>).
template <typename Entry>
struct RouteWithBoolErase : RouteWithoutErase<Entry> {
  using RouteWithoutErase<Entry>::RouteWithoutErase;
  Result<bool> EraseIfMatch(std::string_view, std::uint64_t, const Entry*,
                            typename RouteWithoutErase<Entry>::WriteBudget*) {
    return false;
  }
};
template <typename Entry>
struct CompleteRoute : RouteWithoutErase<Entry> {
  using RouteWithoutErase<Entry>::RouteWithoutErase;
  Status EraseIfMatch(std::string_view, std::uint64_t, const Entry*,
                      typename RouteWithoutErase<Entry>::WriteBudget*) {
    return Status();
  }
};
static_assert(ObjectRoute<ObjectRouteIndex<TestEntry>, TestEntry>);
static_assert(ObjectRoute<LockedRoute<TestEntry>, TestEntry>);
static_assert(ObjectRoute<CompleteRoute<TestEntry>, TestEntry>);
static_assert(!ObjectRoute<RouteWithoutErase<TestEntry>, TestEntry>);
static_assert(!ObjectRoute<RouteWithBoolErase<TestEntry>, TestEntry>);
static_assert(!ObjectRoute<ObjectRouteIndex<TestEntry>, int>);

TEST(ObjectRouteIndexTest, CollisionsInOneBucketStayDistinct) {
  RouteOptions options;
  options.bucket_count = 1;  // every key in one bucket
  options.fixed_bucket_count = true;
  options.stripe_count = 1;
  Route route(options);
  std::vector<Owner> owners;
  for (int i = 0; i < 300; ++i) {
    owners.push_back(Make(i + 1, "key-" + std::to_string(i)));
    ASSERT_TRUE(route.Publish(owners.back()->key, owners.back()).ok());
  }
  for (int i = 0; i < 300; i += 2) {
    ASSERT_TRUE(
        route.EraseIfMatch(owners[i]->key, i + 1, owners[i].get()).ok());
  }
  for (int i = 0; i < 300; ++i) {
    EXPECT_EQ(Find(route, owners[i]->key), i % 2 ? owners[i].get() : nullptr)
        << i;
  }
  RouteDiagnostics d = route.Diagnostics();
  EXPECT_EQ(d.entries, 150u);
  EXPECT_EQ(d.nonempty_buckets, 1u);
  EXPECT_EQ(d.max_bucket_entries, 150u);
  EXPECT_EQ(d.publications, 450u);
  EXPECT_GT(d.copied_bytes, 0u);
}

// An unlink that leaves the bucket at least as many live entries as buried
// slots buries the entry in place (nothing copied, the snapshot kept);
// otherwise it copies the bucket without the buried slots. Eight keys in one
// bucket, unlinked one by one: live/dead after each is 7/1, 6/2, 5/3, 4/4
// (buried), then 3/0 (copied: 5 dead would outnumber 3 live), 2/1
// (buried), 1/0 (copied). Every reader path skips a buried slot, and the
// counts stay exact.
TEST(ObjectRouteIndexTest,
     UnlinkBuriesInPlaceWhileBuriedSlotsDoNotOutnumberLive) {
  RouteOptions options;
  options.bucket_count = 1;
  options.fixed_bucket_count = true;
  Route route(options);
  std::vector<Owner> owners;
  for (int i = 0; i < 8; ++i) {
    owners.push_back(Make(i + 1, "bury-" + std::to_string(i)));
    ASSERT_TRUE(route.Publish(owners.back()->key, owners.back()).ok());
  }
  const bool copies[8] = {false, false, false, false, true, false, true};
  for (int i = 0; i < 7; ++i) {
    const RouteDiagnostics before = route.Diagnostics();
    ASSERT_TRUE(
        route.EraseIfMatch(owners[i]->key, i + 1, owners[i].get()).ok());
    const RouteDiagnostics after = route.Diagnostics();
    EXPECT_EQ(after.copied_bytes != before.copied_bytes, copies[i])
        << "unlink " << i;
    EXPECT_EQ(after.snapshot_bytes != before.snapshot_bytes, copies[i])
        << "unlink " << i;
    EXPECT_EQ(after.entries, 7u - i);
    EXPECT_EQ(after.max_bucket_entries, 7u - i);
    for (int j = 0; j < 8; ++j) {
      const bool routed = j > i;
      EXPECT_EQ(Find(route, owners[j]->key), routed ? owners[j].get() : nullptr)
          << "after unlink " << i << ", key " << j;
      EXPECT_EQ(route.Pin(owners[j]->key) != nullptr, routed);
      std::string_view key = owners[j]->key;
      route.WithEntries(std::span<const std::string_view>(&key, 1),
                        [&](std::size_t, TestEntry* e) {
                          EXPECT_EQ(e, routed ? owners[j].get() : nullptr);
                        });
    }
    std::size_t visited = 0;
    route.VisitHandles(4, [&](std::span<const Owner> chunk) {
      for (const Owner& o : chunk) {
        ++visited;
        EXPECT_GT(o->id(), static_cast<std::uint64_t>(i + 1));
      }
    });
    EXPECT_EQ(visited, 7u - i);
  }
  // A buried key is absent: publishing it again routes the new entry, and
  // the copy that publication makes leaves the buried slot out.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(route.Publish(owners[i]->key, owners[i]).ok());
  }
  ASSERT_TRUE(route.EraseIfMatch(owners[0]->key, 1, owners[0].get()).ok());
  Owner again = Make(100, owners[0]->key);  // 3 live, 1 buried
  ASSERT_TRUE(route.Publish(again->key, again).ok());
  EXPECT_EQ(Find(route, again->key), again.get());
  EXPECT_EQ(route.Diagnostics().entries, 4u);
  EXPECT_EQ(route.Diagnostics().max_bucket_entries, 4u);
  for (const Owner& o : {again, owners[1], owners[2], owners[7]}) {
    EXPECT_EQ(Find(route, o->key), o.get());
    ASSERT_TRUE(route.EraseIfMatch(o->key, o->id(), o.get()).ok());
  }
  const RouteDiagnostics empty = route.Diagnostics();
  EXPECT_EQ(empty.entries, 0u);
  EXPECT_EQ(empty.nonempty_buckets, 0u);
  EXPECT_EQ(empty.snapshot_bytes, 0u);
}

TEST(ObjectRouteIndexTest, BatchFindsEveryKeyInOrderStagedOrNot) {
  Route route;
  std::vector<Owner> owners;
  std::vector<std::string> keys;
  for (int i = 0; i < 100; ++i) {
    keys.push_back("batch-" + std::to_string(i));
    if (i % 3 != 0) {
      owners.push_back(Make(i + 1, keys.back()));
      ASSERT_TRUE(route.Publish(keys.back(), owners.back()).ok());
    }
  }
  keys.push_back(keys[1]);  // a duplicate key
  std::vector<std::string_view> views(keys.begin(), keys.end());
  std::vector<TestEntry*> staged(views.size()), plain(views.size());
  route.WithEntries(views, [&](std::size_t i, TestEntry* e) { staged[i] = e; });
  route_internal::ObjectRouteIndexTestPeer::WithEntriesUnstaged(
      route, views, [&](std::size_t i, TestEntry* e) { plain[i] = e; });
  for (std::size_t i = 0; i < views.size(); ++i) {
    TestEntry* expected = Find(route, views[i]);
    EXPECT_EQ(staged[i], expected) << i;
    EXPECT_EQ(plain[i], expected) << i;
    EXPECT_EQ(expected != nullptr, (i % 3 != 0) || i == 100) << i;
  }
}

TEST(ObjectRouteIndexTest, D9VisitHandlesEmitsBoundedChunks) {
  RouteOptions options;
  options.bucket_count = 64;
  Route route(options);
  std::vector<Owner> owners;
  for (int i = 0; i < 1000; ++i) {
    owners.push_back(Make(i + 1, "v" + std::to_string(i)));
    ASSERT_TRUE(route.Publish(owners.back()->key, owners.back()).ok());
  }
  std::map<std::uint64_t, int> seen;
  std::size_t chunks = 0;
  route.VisitHandles(37, [&](std::span<Owner> chunk) {
    EXPECT_LE(chunk.size(), 37u);
    EXPECT_FALSE(chunk.empty());
    // No guard is held while the visitor runs: a Barrier here would fail.
    EXPECT_TRUE(route.epoch_domain().Barrier().ok());
    for (const Owner& o : chunk) ++seen[o->id()];
    ++chunks;
  });
  EXPECT_EQ(seen.size(), 1000u);
  for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << id;
  EXPECT_EQ(chunks, (1000 + 36) / 37);
}

TEST(ObjectRouteIndexTest, UnlinkedOwnerIsReleasedAfterAGracePeriod) {
  EpochOptions epoch_options;
  epoch_options.reclaim_every = 1'000'000;
  EpochDomain domain(epoch_options);
  RouteOptions options;
  options.epoch_domain = &domain;
  Route route(options);
  Owner entry = Make(1, "k");
  std::weak_ptr<TestEntry> watch = entry;
  ASSERT_TRUE(route.Publish("k", std::move(entry)).ok());
  {
    Guard reader = domain.EnterOnThisThread();
    TestEntry* borrowed = Find(route, "k");
    ASSERT_NE(borrowed, nullptr);
    std::thread([&] {
      ASSERT_TRUE(route.EraseIfMatch("k", 1, borrowed).ok());
      domain.TryReclaim();
      domain.TryReclaim();
    }).join();
    EXPECT_FALSE(watch.expired()) << "freed under a reader";
    EXPECT_EQ(borrowed->id(), 1u);
  }
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(route.Diagnostics().retired_bytes, 0u);
}

// An entry that declares what it keeps alive (ObjectEntry's retained_bytes).
struct CountedEntry {
  CountedEntry(std::uint64_t id_in, std::uint64_t bytes)
      : id_value(id_in), declared(bytes) {}
  std::uint64_t id() const { return id_value; }
  std::uint64_t retained_bytes() const { return declared; }
  std::uint64_t id_value;
  std::uint64_t declared;
};

// Item of E4: the retired cap counts what an unlink leaves waiting for a
// grace period, not only the snapshot: the entry's record and entry object,
// and the bytes the entry declares.
TEST(ObjectRouteIndexTest, RetiredBytesCountTheUnlinkedRecordAndDeclaredBytes) {
  using CountedRoute = ObjectRouteIndex<CountedEntry>;
  constexpr std::size_t kFixed =
      sizeof(std::shared_ptr<CountedEntry>) + sizeof(CountedEntry);
  EpochOptions epoch_options;
  epoch_options.reclaim_every = 1'000'000;
  EpochDomain domain(epoch_options);
  RouteOptions options;
  options.bucket_count = 1;
  options.epoch_domain = &domain;
  CountedRoute route(options);
  auto heavy = std::make_shared<CountedEntry>(1, 100'000);
  auto light = std::make_shared<CountedEntry>(2, 0);
  ASSERT_TRUE(route.Publish("heavy", heavy).ok());
  ASSERT_TRUE(route.Publish("light", light).ok());
  ASSERT_TRUE(domain.Barrier().ok());
  ASSERT_EQ(domain.Diagnostics().retired_bytes, 0u);
  EXPECT_EQ(CountedRoute::RetainedBytes(*heavy), kFixed + 100'000);
  EXPECT_EQ(CountedRoute::RetainedBytes(*light), kFixed);

  Participant reader = std::move(domain.RegisterParticipant()).value();
  Guard guard = reader.Enter();  // keeps every retirement pending
  const std::uint64_t both = route.Diagnostics().snapshot_bytes;
  // The bucket keeps "light": "heavy" is buried in place, and only its
  // record (with the bytes it declares) is retired.
  ASSERT_TRUE(route.EraseIfMatch("heavy", 1, heavy.get()).ok());
  const std::uint64_t after_heavy = domain.Diagnostics().retired_bytes;
  EXPECT_EQ(after_heavy, kFixed + 100'000);
  EXPECT_EQ(route.Diagnostics().snapshot_bytes, both);
  // The last live entry goes by copy: the snapshot is retired with the
  // record riding on it.
  ASSERT_TRUE(route.EraseIfMatch("light", 2, light.get()).ok());
  const std::uint64_t after_light = domain.Diagnostics().retired_bytes;
  EXPECT_EQ(after_light, after_heavy + both + kFixed);
  // A bury with a budget from PrepareWrite (sized for a copy, as the
  // directory's erases take it) still charges the record alone.
  auto first = std::make_shared<CountedEntry>(3, 0);
  auto second = std::make_shared<CountedEntry>(4, 0);
  ASSERT_TRUE(route.Publish("first", first).ok());
  ASSERT_TRUE(route.Publish("second", second).ok());
  const std::uint64_t before_bury = domain.Diagnostics().retired_bytes;
  auto budget = route.PrepareWrite("first");
  ASSERT_TRUE(budget.ok());
  ASSERT_TRUE(
      route.EraseIfMatch("first", 3, first.get(), &budget.value()).ok());
  EXPECT_EQ(domain.Diagnostics().retired_bytes, before_bury + kFixed);
  EXPECT_EQ(route.Diagnostics().retired_bytes,
            domain.Diagnostics().retired_bytes);
}

// An entry declaring more than the whole cap is charged without its
// declared bytes: otherwise it could never be unlinked.
TEST(ObjectRouteIndexTest, EntryDeclaringMoreThanTheCapCanStillBeUnlinked) {
  EpochOptions epoch_options;
  epoch_options.retired_bytes_cap = 64 << 10;
  EpochDomain domain(epoch_options);
  RouteOptions options;
  options.epoch_domain = &domain;
  ObjectRouteIndex<CountedEntry> route(options);
  auto huge = std::make_shared<CountedEntry>(1, std::uint64_t{1} << 30);
  ASSERT_TRUE(route.Publish("huge", huge).ok());
  auto budget = route.PrepareWrite("huge");
  ASSERT_TRUE(budget.ok()) << budget.status().ToString();
  EXPECT_TRUE(route.EraseIfMatch("huge", 1, huge.get(), &budget.value()).ok());
  ASSERT_TRUE(route.Publish("huge", huge).ok());
  EXPECT_TRUE(route.EraseIfMatch("huge", 1, huge.get()).ok());
  EXPECT_EQ(route.Pin("huge"), nullptr);
}

// A write refused for want of retire room changes nothing: the entry stays
// routed, unburied, and its record stays with the bucket, so the write that
// later retires the bucket's snapshot does not free the entry with it. Run
// twice: with "kept" beside one other live entry its unlink would bury it;
// with a buried slot in the bucket too it would copy (the copy it built is
// dropped unseen).
TEST(ObjectRouteIndexTest, RefusedUnlinkKeepsTheEntryAndItsRecord) {
  for (const bool copies : {false, true}) {
    SCOPED_TRACE(copies ? "unlink by copy" : "unlink in place");
    EpochOptions epoch_options;
    epoch_options.retired_bytes_cap = 64 << 10;
    epoch_options.reclaim_deadline = std::chrono::milliseconds(1);
    EpochDomain domain(epoch_options);
    RouteOptions options;
    options.bucket_count = 1;
    options.fixed_bucket_count = true;
    options.epoch_domain = &domain;
    Route route(options);
    Owner kept = Make(1, "kept");
    std::weak_ptr<TestEntry> watch = kept;
    TestEntry* const raw = kept.get();
    ASSERT_TRUE(route.Publish("kept", std::move(kept)).ok());
    ASSERT_TRUE(route.Publish("other", Make(2, "other")).ok());
    if (copies) {  // 2 live and 1 buried: one more bury would outnumber
      Owner gone = Make(4, "gone");
      ASSERT_TRUE(route.Publish("gone", gone).ok());
      const std::uint64_t copied = route.Diagnostics().copied_bytes;
      ASSERT_TRUE(route.EraseIfMatch("gone", 4, gone.get()).ok());
      ASSERT_EQ(route.Diagnostics().copied_bytes, copied) << "not buried";
    }
    domain.TryReclaim();  // hands this thread's retire credit back to the cap
    std::vector<RetireReservation> fill;  // the cap, full
    while (true) {
      Result<RetireReservation> r = domain.TryReserve(64);
      if (!r.ok()) break;
      fill.push_back(std::move(r).value());
    }
    const RouteDiagnostics before = route.Diagnostics();
    Route::WriteBudget none;
    EXPECT_EQ(route.EraseIfMatch("kept", 1, raw, &none).code(),
              StatusCode::kResourceExhausted);
    EXPECT_EQ(route.EraseIfMatch("kept", 1, raw).code(),
              StatusCode::kResourceExhausted);
    EXPECT_EQ(route.Publish("third", Make(3, "third"), &none).code(),
              StatusCode::kResourceExhausted);
    EXPECT_EQ(Find(route, "kept"), raw);
    EXPECT_EQ(Find(route, "third"), nullptr);
    EXPECT_EQ(route.Diagnostics().publications, before.publications);
    EXPECT_EQ(route.Diagnostics().entries, 2u);
    fill.clear();
    // Retires the snapshot the refused unlinks started from.
    ASSERT_TRUE(route.Publish("third", Make(3, "third")).ok());
    ASSERT_TRUE(domain.Barrier().ok());
    EXPECT_FALSE(watch.expired()) << "a refused unlink freed the entry";
    EXPECT_EQ(Find(route, "kept"), raw);
    ASSERT_TRUE(route.EraseIfMatch("kept", 1, raw).ok());
    ASSERT_TRUE(domain.Barrier().ok());
    EXPECT_TRUE(watch.expired());
  }
}

// Route blocks (snapshots and records) a thread frees are reused by its
// next allocations of the same size, up to kCacheBytesPerThread; past that
// they go back to the allocator. (What a thread keeps is freed when it
// exits: the ASan build's leak check fails otherwise.)
TEST(RouteBlockCacheTest, ReusesFreedBlocksUpToTheBound) {
  using route_internal::AllocateBlock;
  using route_internal::block_cache;
  using route_internal::FreeBlock;
  using route_internal::kCacheBytesPerThread;
  constexpr std::size_t kBlock = 256;
  std::thread([] {
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < 2 * kCacheBytesPerThread / kBlock; ++i) {
      blocks.push_back(AllocateBlock(kBlock));
      ASSERT_NE(blocks.back(), nullptr);
    }
    for (void* p : blocks) FreeBlock(p, kBlock);
    EXPECT_EQ(block_cache.bytes, kCacheBytesPerThread) << "unbounded";
    testing::AllocationCounter allocs;
    void* again = AllocateBlock(kBlock);
    EXPECT_EQ(allocs.count(), 0u) << "a freed block was not reused";
    EXPECT_EQ(block_cache.bytes, kCacheBytesPerThread - kBlock);
    void* other = AllocateBlock(kBlock + 64);  // another size class
    EXPECT_EQ(allocs.count(), 1u);
    FreeBlock(other, kBlock + 64);
    FreeBlock(again, kBlock);
  }).join();
}

// kUnavailable is cairn's one "shut down" code: once the route's epoch
// domain is shut down every write that would retire says so, with nothing
// changed; a miss is still kNotFound and reads keep working.
TEST(ObjectRouteIndexTest, WritesAfterDomainShutdownAreUnavailable) {
  EpochDomain domain;
  RouteOptions options;
  options.epoch_domain = &domain;
  Route route(options);
  Owner kept = Make(1, "kept");
  ASSERT_TRUE(route.Publish("kept", kept).ok());
  ASSERT_TRUE(domain.Shutdown(std::chrono::seconds(5)).ok());
  Owner fresh = Make(2, "fresh");
  EXPECT_EQ(route.Publish("fresh", fresh).code(), StatusCode::kUnavailable);
  EXPECT_EQ(route.EraseIfMatch("kept", 1, kept.get()).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(route.PrepareWrite("kept").status().code(),
            StatusCode::kUnavailable);
  Route::WriteBudget none;
  EXPECT_EQ(route.Publish("fresh", fresh, &none).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(route.EraseIfMatch("kept", 1, kept.get(), &none).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(route.EraseIfMatch("absent", 1, kept.get()).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(Find(route, "kept"), kept.get());
  EXPECT_EQ(Find(route, "fresh"), nullptr);
  EXPECT_EQ(fresh.use_count(), 1);
}

// The RFC's reclamation gate: a reader stalls inside a batch while writers
// publish and erase in its bucket.
TEST(ObjectRouteIndexReclamationTest,
     StalledReaderIsBoundedReportedAndDrained) {
  std::atomic<int> reports{0};
  std::string reported_name;
  std::mutex report_mu;
  EpochOptions epoch_options;
  epoch_options.name = "route";
  epoch_options.retired_bytes_cap = 64 << 10;
  epoch_options.reclaim_deadline = std::chrono::milliseconds(2);
  epoch_options.stall_threshold = std::chrono::milliseconds(20);
  epoch_options.reclaim_every = 1;
  epoch_options.stall_hook = [&](const StallReport& r) {
    std::lock_guard<std::mutex> lock(report_mu);
    reported_name = r.participant_name;
    reports.fetch_add(1);
  };
  EpochDomain domain(epoch_options);
  RouteOptions options;
  options.bucket_count = 4;  // writers share the reader's bucket
  options.epoch_domain = &domain;
  Route route(options);
  std::vector<Owner> base;
  for (int i = 0; i < 32; ++i) {
    base.push_back(Make(i + 1, "base-" + std::to_string(i)));
    ASSERT_TRUE(route.Publish(base.back()->key, base.back()).ok());
  }
  std::atomic<bool> inside{false}, release{false};
  std::thread reader([&] {
    Participant named =
        std::move(domain.RegisterParticipant("stalled-batch")).value();
    Guard outer = named.Enter();  // the batch's guard, under a known name
    std::vector<std::string_view> keys{base[0]->key, base[1]->key};
    route.WithEntries(keys, [&](std::size_t, TestEntry* e) {
      ASSERT_NE(e, nullptr);
      inside.store(true);
      while (!release.load())
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_EQ(e->id() <= 2, true) << "entry freed under the stalled reader";
    });
  });
  while (!inside.load()) std::this_thread::yield();
  std::uint64_t next_id = 1000;
  int busy = 0, ok = 0;
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
  while (std::chrono::steady_clock::now() < end) {
    Owner churn = Make(next_id, "churn-" + std::to_string(next_id));
    Status s = route.Publish(churn->key, churn);
    if (s.ok()) {
      ++ok;
      Status erased = route.EraseIfMatch(churn->key, next_id, churn.get());
      if (!erased.ok()) {
        EXPECT_EQ(erased.code(), StatusCode::kResourceExhausted);
        ++busy;
      }
    } else {
      EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
      ++busy;
    }
    ++next_id;
    EXPECT_LE(domain.Diagnostics().retired_bytes,
              epoch_options.retired_bytes_cap);
  }
  RouteDiagnostics during = route.Diagnostics();
  EXPECT_GT(busy, 0) << "writers never reached the cap";
  EXPECT_GT(ok, 0);
  EXPECT_GE(during.busy_count, static_cast<std::uint64_t>(busy));
  EXPECT_LE(during.retired_bytes, epoch_options.retired_bytes_cap);
  EXPECT_GT(reports.load(), 0);
  {
    std::lock_guard<std::mutex> lock(report_mu);
    EXPECT_EQ(reported_name, "stalled-batch");
  }
  EXPECT_GT(during.oldest_reader_age.count(), 0);
  release.store(true);
  reader.join();
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(route.Diagnostics().retired_bytes, 0u);
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(Find(route, base[i]->key), base[i].get());
}

// Readers and writers race on a small key space; each reader checks that
// whatever it borrows is a live entry for the key it asked for.
TEST(ObjectRouteIndexStressTest, ReadersAlwaysSeeLiveEntriesOfTheirKey) {
  RouteOptions options;
  options.bucket_count = 8;
  Route route(options);
  constexpr int kKeys = 64;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back("s" + std::to_string(i));
  std::atomic<bool> stop{false};
  std::atomic<long> wrong{0}, reads{0};
  std::atomic<std::uint64_t> next_id{1};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      std::minstd_rand rng(w);
      std::vector<Owner> mine(kKeys);
      while (!stop.load(std::memory_order_relaxed)) {
        const int k = rng() % kKeys;
        if (k % 2 != w) continue;  // each writer owns half the keys
        if (mine[k] == nullptr) {
          Owner fresh = Make(next_id.fetch_add(1), keys[k]);
          if (route.Publish(keys[k], fresh).ok()) mine[k] = fresh;
        } else {
          if (route.EraseIfMatch(keys[k], mine[k]->id(), mine[k].get()).ok()) {
            mine[k]->dead.store(true, std::memory_order_relaxed);
            mine[k].reset();
          }
        }
      }
    });
  }
  for (int r = 0; r < 6; ++r) {
    threads.emplace_back([&, r] {
      std::minstd_rand rng(100 + r);
      std::vector<std::string_view> batch(8);
      while (!stop.load(std::memory_order_relaxed)) {
        for (auto& k : batch) k = keys[rng() % kKeys];
        route.WithEntries(batch, [&](std::size_t i, TestEntry* e) {
          if (e != nullptr && e->key != batch[i]) wrong.fetch_add(1);
          reads.fetch_add(1, std::memory_order_relaxed);
        });
        Owner pinned = route.Pin(keys[rng() % kKeys]);
        if (pinned != nullptr && pinned->key.empty()) wrong.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(testing::StressDuration(300));
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(reads.load(), 0);
}

// One fixed bucket holding every key: long probe runs that wrap around the
// snapshot's slot table. Publications that keep the snapshot's capacity copy
// it whole and an unlink closes its slot by backward shift; after every
// write each routed key is found with its own entry and every unlinked key
// misses, through growth, shrink and re-insertion in scrambled orders.
TEST(ObjectRouteIndexTest, OneBucketChurnKeepsEveryKeyFindable) {
  RouteOptions options;
  options.bucket_count = 1;
  options.fixed_bucket_count = true;
  Route route(options);
  constexpr int kKeys = 300;
  std::vector<Owner> owners;
  for (int i = 0; i < kKeys; ++i) {
    owners.push_back(Make(
        i + 1, "one-" + std::to_string(i * 7919) + std::string(i % 13, 'x')));
  }
  std::vector<bool> routed(kKeys, false);
  auto check = [&](int step) {
    for (int i = 0; i < kKeys; ++i) {
      TestEntry* want = routed[i] ? owners[i].get() : nullptr;
      if (Find(route, owners[i]->key) != want) {
        return ::testing::AssertionFailure()
               << "step " << step << ": key " << i << " "
               << (routed[i] ? "lost" : "still routed");
      }
    }
    return ::testing::AssertionSuccess();
  };
  std::minstd_rand rng(7);
  int step = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kKeys; ++i) {  // fill in a scrambled order
      const int k = static_cast<int>((i * 113 + round * 31) % kKeys);
      if (routed[k]) continue;
      ASSERT_TRUE(route.Publish(owners[k]->key, owners[k]).ok());
      routed[k] = true;
      if (++step % 7 == 0) {
        ASSERT_TRUE(check(step));
      }
    }
    ASSERT_TRUE(check(step));
    for (int i = 0; i < kKeys; ++i) {  // unlink most of them, at random
      const int k = static_cast<int>(rng() % kKeys);
      if (!routed[k]) continue;
      ASSERT_TRUE(
          route.EraseIfMatch(owners[k]->key, owners[k]->id(), owners[k].get())
              .ok());
      routed[k] = false;
      ASSERT_TRUE(check(++step));
    }
  }
  EXPECT_EQ(route.bucket_count(), 1u);
}

// ---- resizing ---------------------------------------------------------------

// Every key in `owners[0, n)` routes its owner; everything in `gone` misses.
::testing::AssertionResult AllFound(const Route& route,
                                    const std::vector<Owner>& owners,
                                    std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) {
    if (Find(route, owners[j]->key) != owners[j].get()) {
      return ::testing::AssertionFailure() << "lost " << owners[j]->key;
    }
  }
  return ::testing::AssertionSuccess();
}

// The table doubles above the band and halves below it, every key stays
// routed at every step of the incremental move, and once no resize is in
// progress the mean entries per bucket is inside the band.
TEST(ObjectRouteIndexResizeTest, GrowsAndShrinksKeepingEveryKeyRouted) {
  RouteOptions options;
  options.bucket_count = 4;
  Route route(options);
  constexpr std::size_t kKeys = 3000;
  std::vector<Owner> owners;
  std::size_t sizes_seen = 0, last_size = route.bucket_count();
  for (std::size_t i = 0; i < kKeys; ++i) {
    owners.push_back(Make(i + 1, "grow-" + std::to_string(i)));
    ASSERT_TRUE(route.Publish(owners.back()->key, owners.back()).ok());
    if (route.bucket_count() != last_size) {
      ++sizes_seen;
      last_size = route.bucket_count();
    }
    if (i % 61 == 0) {
      ASSERT_TRUE(AllFound(route, owners, i + 1)) << i;
    }
  }
  ASSERT_TRUE(AllFound(route, owners, kKeys));
  RouteDiagnostics grown = route.Diagnostics();
  EXPECT_EQ(grown.entries, kKeys);
  EXPECT_EQ(grown.bucket_count, 2048u) << "3000 keys: mean 1.5 at 2048";
  EXPECT_EQ(grown.resize_target_bucket_count, 0u);
  EXPECT_EQ(grown.resizes, 9u) << "4 -> 2048 is nine doublings";
  EXPECT_EQ(sizes_seen, 9u);
  EXPECT_GT(grown.resize_copied_bytes, 0u);
  EXPECT_EQ(grown.table_bytes,
            route_internal::RouteTable<
                route_internal::BucketSnapshot<TestEntry>>::BytesFor(2048));
  // Drain to 10 keys, checking every key as the table halves.
  for (std::size_t i = kKeys; i-- > 10;) {
    ASSERT_TRUE(
        route.EraseIfMatch(owners[i]->key, i + 1, owners[i].get()).ok());
    if (i % 61 == 0) {
      ASSERT_TRUE(AllFound(route, owners, i)) << i;
    }
  }
  ASSERT_TRUE(AllFound(route, owners, 10));
  for (std::size_t i = 10; i < kKeys; i += 7)
    ASSERT_EQ(Find(route, owners[i]->key), nullptr) << i;
  RouteDiagnostics shrunk = route.Diagnostics();
  EXPECT_EQ(shrunk.entries, 10u);
  EXPECT_LE(shrunk.bucket_count, 16u);
  EXPECT_GE(shrunk.resizes, grown.resizes + 7);
  // Never below the starting size.
  for (std::size_t i = 10; i-- > 0;)
    ASSERT_TRUE(
        route.EraseIfMatch(owners[i]->key, i + 1, owners[i].get()).ok());
  for (int i = 0; i < 64; ++i) {  // writes drive any resize still running
    Owner o = Make(100000 + i, "again");
    ASSERT_TRUE(route.Publish("again", o).ok());
    ASSERT_TRUE(route.EraseIfMatch("again", 100000 + i, o.get()).ok());
  }
  EXPECT_EQ(route.bucket_count(), 4u);
  EXPECT_EQ(route.Diagnostics().entries, 0u);
}

// Every intermediate state of a resize move keeps every stable key routed:
// after each bucket store of every split (growth) and merge (shrink), a
// reader (WithEntry, a WithEntries batch and Pin, all lock-free) run from the
// resize's test seam finds each stable key's own entry. A move that marks the
// old bucket Moved before the new bucket holds its keys sends such a reader
// to an empty bucket; a stress can only hope to land in that window, this
// lands in it at every store.
TEST(ObjectRouteIndexResizeTest, EveryStoreOfAMoveKeepsStableKeysRouted) {
  RouteOptions options;
  options.bucket_count = 4;
  Route route(options);
  struct Probe {
    Route* route;
    std::vector<Owner> stable;
    std::vector<std::string_view> keys;
    std::size_t stores = 0;
    std::size_t misses = 0;
  } probe{&route, {}, {}, 0, 0};
  for (int i = 0; i < 24; ++i) {
    probe.stable.push_back(Make(i + 1, "stable-" + std::to_string(i)));
    ASSERT_TRUE(
        route.Publish(probe.stable.back()->key, probe.stable.back()).ok());
  }
  for (const Owner& o : probe.stable) probe.keys.push_back(o->key);
  route_internal::ObjectRouteIndexTestPeer::SetResizeStoreHook(
      route,
      [](void* arg) {
        auto* p = static_cast<Probe*>(arg);
        ++p->stores;
        for (const Owner& o : p->stable) {
          p->route->WithEntry(o->key, [&](TestEntry* e) {
            if (e != o.get()) ++p->misses;
          });
          if (p->route->Pin(o->key) != o) ++p->misses;
        }
        p->route->WithEntries(p->keys, [&](std::size_t i, TestEntry* e) {
          if (e != p->stable[i].get()) ++p->misses;
        });
      },
      &probe);
  // Growth: 4 -> 512 buckets, every split observed.
  std::vector<Owner> churn;
  for (int i = 0; i < 800; ++i) {
    churn.push_back(Make(1000 + i, "churn-" + std::to_string(i)));
    ASSERT_TRUE(route.Publish(churn.back()->key, churn.back()).ok());
  }
  const RouteDiagnostics grown = route.Diagnostics();
  const std::size_t split_stores = probe.stores;
  EXPECT_GE(grown.resizes, 6u);
  EXPECT_GT(split_stores, 0u);
  EXPECT_EQ(probe.misses, 0u) << "a split left a stable key unreachable";
  // Shrink: drain the churn keys; every merge observed.
  for (const Owner& o : churn) {
    ASSERT_TRUE(route.EraseIfMatch(o->key, o->id(), o.get()).ok());
  }
  for (int i = 0; i < 64; ++i) {  // writes drive a resize still running
    Owner o = Make(5000 + i, "again");
    ASSERT_TRUE(route.Publish("again", o).ok());
    ASSERT_TRUE(route.EraseIfMatch("again", o->id(), o.get()).ok());
  }
  EXPECT_GT(route.Diagnostics().resizes, grown.resizes + 3);
  EXPECT_GT(probe.stores, split_stores) << "no merge was observed";
  EXPECT_EQ(probe.misses, 0u) << "a merge left a stable key unreachable";
  route_internal::ObjectRouteIndexTestPeer::SetResizeStoreHook(route, nullptr,
                                                               nullptr);
  EXPECT_TRUE(AllFound(route, probe.stable, probe.stable.size()));
}

// A write made under the caller's locks (a budget passed) runs only bounded
// resize work: moves and the finish, never the O(size) start, which waits
// for ReclaimIfDue() (called with no lock held) or an unlocked write.
TEST(ObjectRouteIndexResizeTest,
     LockedWritesLeaveTheResizeStartToReclaimIfDue) {
  RouteOptions options;
  options.bucket_count = 4;
  Route route(options);
  std::vector<Owner> owners;
  for (int i = 0; i < 40; ++i) {
    owners.push_back(Make(i + 1, "locked-" + std::to_string(i)));
    Route::WriteBudget budget;
    ASSERT_TRUE(route.Publish(owners.back()->key, owners.back(), &budget).ok());
  }
  RouteDiagnostics d = route.Diagnostics();
  EXPECT_EQ(d.bucket_count, 4u);
  EXPECT_EQ(d.resize_target_bucket_count, 0u) << "a locked write started it";
  route.ReclaimIfDue();
  d = route.Diagnostics();
  EXPECT_EQ(d.resizes, 1u) << "4 buckets move in one slice";
  EXPECT_EQ(d.bucket_count, 8u);
  // The mean is still above the band; the next start waits again.
  Owner more = Make(100, "locked-more");
  Route::WriteBudget budget;
  ASSERT_TRUE(route.Publish(more->key, more, &budget).ok());
  owners.push_back(more);
  EXPECT_EQ(route.Diagnostics().resize_target_bucket_count, 0u);
  EXPECT_TRUE(AllFound(route, owners, owners.size()));
}

TEST(ObjectRouteIndexResizeTest, FixedBucketCountNeverResizes) {
  RouteOptions options;
  options.bucket_count = 4;
  options.fixed_bucket_count = true;
  Route route(options);
  std::vector<Owner> owners;
  for (int i = 0; i < 200; ++i) {
    owners.push_back(Make(i + 1, "f" + std::to_string(i)));
    ASSERT_TRUE(route.Publish(owners.back()->key, owners.back()).ok());
  }
  RouteDiagnostics d = route.Diagnostics();
  EXPECT_EQ(d.bucket_count, 4u);
  EXPECT_EQ(d.resizes, 0u);
  EXPECT_TRUE(AllFound(route, owners, owners.size()));
}

// VisitHandles while a writer grows and shrinks the table under it: every
// entry routed for the whole visit is emitted exactly once, and no entry is
// emitted twice.
TEST(ObjectRouteIndexResizeTest, VisitDuringResizeEmitsStableEntriesOnce) {
  RouteOptions options;
  options.bucket_count = 4;
  Route route(options);
  std::vector<Owner> stable;
  for (int i = 0; i < 300; ++i) {
    stable.push_back(Make(i + 1, "stable-" + std::to_string(i)));
    ASSERT_TRUE(route.Publish(stable.back()->key, stable.back()).ok());
  }
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::vector<Owner> churn;
    std::uint64_t id = 1'000'000;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < 2000; ++i) {  // grow
        churn.push_back(Make(id, "churn-" + std::to_string(id)));
        ++id;
        ASSERT_TRUE(route.Publish(churn.back()->key, churn.back()).ok());
      }
      for (const Owner& o : churn) {  // shrink
        ASSERT_TRUE(route.EraseIfMatch(o->key, o->id(), o.get()).ok());
      }
      churn.clear();
    }
  });
  const std::uint64_t resizes_before = route.Diagnostics().resizes;
  int visits = 0;
  const auto end =
      std::chrono::steady_clock::now() + testing::StressDuration(400);
  while (visits < 10 || std::chrono::steady_clock::now() < end) {
    std::map<std::uint64_t, int> seen;
    route.VisitHandles(16, [&](std::span<Owner> chunk) {
      for (const Owner& o : chunk) ++seen[o->id()];
      std::this_thread::yield();  // let the writer move buckets meanwhile
    });
    for (const Owner& o : stable) ASSERT_EQ(seen[o->id()], 1) << o->key;
    for (const auto& [id, count] : seen) ASSERT_EQ(count, 1) << id;
    ++visits;
  }
  stop.store(true);
  writer.join();
  EXPECT_GT(route.Diagnostics().resizes, resizes_before + 2)
      << "the visits never overlapped a resize";
}

// A reader stalls inside a batch while writers grow the table: retired
// bytes (moved snapshots, the old table) stay under the cap, the stall is
// reported under the reader's name, and once it leaves the resize finishes
// with every key routed.
TEST(ObjectRouteIndexResizeTest, StalledReaderAcrossAResizeIsBounded) {
  std::atomic<int> reports{0};
  std::string reported_name;
  std::mutex report_mu;
  EpochOptions epoch_options;
  epoch_options.retired_bytes_cap = 32 << 10;
  epoch_options.reclaim_deadline = std::chrono::milliseconds(2);
  epoch_options.stall_threshold = std::chrono::milliseconds(20);
  epoch_options.reclaim_every = 1;
  epoch_options.stall_hook = [&](const StallReport& r) {
    std::lock_guard<std::mutex> lock(report_mu);
    reported_name = r.participant_name;
    reports.fetch_add(1);
  };
  EpochDomain domain(epoch_options);
  RouteOptions options;
  options.bucket_count = 4;
  options.epoch_domain = &domain;
  Route route(options);
  std::vector<Owner> owners;
  for (int i = 0; i < 16; ++i) {
    owners.push_back(Make(i + 1, "pre-" + std::to_string(i)));
    ASSERT_TRUE(route.Publish(owners.back()->key, owners.back()).ok());
  }
  std::atomic<bool> inside{false}, release{false};
  std::thread reader([&] {
    Participant named =
        std::move(domain.RegisterParticipant("stalled-resize")).value();
    Guard outer = named.Enter();
    std::vector<std::string_view> keys{owners[0]->key, owners[1]->key};
    route.WithEntries(keys, [&](std::size_t i, TestEntry* e) {
      ASSERT_NE(e, nullptr);
      inside.store(true);
      while (!release.load())
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_EQ(e->id(), i + 1) << "entry freed under the stalled reader";
    });
  });
  while (!inside.load()) std::this_thread::yield();
  const std::uint64_t resizes_before = route.Diagnostics().resizes;
  int busy = 0;
  std::uint64_t id = 17;
  bool resize_seen = false;
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
  while (std::chrono::steady_clock::now() < end) {
    Owner o = Make(id, "during-" + std::to_string(id));
    Status s = route.Publish(o->key, o);
    if (s.ok()) {
      owners.push_back(o);
      ++id;
    } else {
      ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
      ++busy;
    }
    RouteDiagnostics d = route.Diagnostics();
    resize_seen |=
        d.resize_target_bucket_count != 0 || d.resizes != resizes_before;
    ASSERT_LE(domain.Diagnostics().peak_retired_bytes,
              epoch_options.retired_bytes_cap);
  }
  EXPECT_TRUE(resize_seen) << "no resize started during the stall";
  EXPECT_GT(busy, 0) << "writers never reached the cap";
  EXPECT_GT(reports.load(), 0);
  {
    std::lock_guard<std::mutex> lock(report_mu);
    EXPECT_EQ(reported_name, "stalled-resize");
  }
  release.store(true);
  reader.join();
  // Writes after the stall finish the resize.
  for (int i = 0; i < 200; ++i) {
    Owner o = Make(id, "after-" + std::to_string(id));
    ++id;
    ASSERT_TRUE(route.Publish(o->key, o).ok());
    owners.push_back(o);
  }
  RouteDiagnostics after = route.Diagnostics();
  EXPECT_GT(after.resizes, resizes_before);
  EXPECT_TRUE(AllFound(route, owners, owners.size()));
  EXPECT_LE(domain.Diagnostics().peak_retired_bytes,
            epoch_options.retired_bytes_cap);
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(route.Diagnostics().retired_bytes, 0u);
}

// Readers (WithEntry, WithEntries batches, Pin) race writers that grow and
// shrink the table over and over: a stable key is never missed, and every
// borrowed entry is a live entry of the key asked for. 8 threads.
TEST(ObjectRouteIndexStressTest, ReadersNeverMissAStableKeyDuringResizes) {
  RouteOptions options;
  options.bucket_count = 8;
  Route route(options);
  std::vector<Owner> stable;
  for (int i = 0; i < 200; ++i) {
    stable.push_back(Make(i + 1, "stable-" + std::to_string(i)));
    ASSERT_TRUE(route.Publish(stable.back()->key, stable.back()).ok());
  }
  constexpr int kWriters = 3, kReaders = 5, kChurnKeys = 1500;
  std::vector<std::vector<std::string>> churn_keys(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    for (int i = 0; i < kChurnKeys; ++i) {
      churn_keys[w].push_back("w" + std::to_string(w) + "-" +
                              std::to_string(i));
    }
  }
  std::atomic<bool> stop{false};
  std::atomic<long> missed{0}, wrong{0}, reads{0};
  std::atomic<std::uint64_t> next_id{1000};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::vector<Owner> mine;
      while (!stop.load(std::memory_order_relaxed)) {
        for (const std::string& key : churn_keys[w]) {
          mine.push_back(Make(next_id.fetch_add(1), key));
          if (!route.Publish(key, mine.back()).ok()) wrong.fetch_add(1);
        }
        for (Owner& o : mine) {
          if (!route.EraseIfMatch(o->key, o->id(), o.get()).ok())
            wrong.fetch_add(1);
          o->dead.store(true, std::memory_order_relaxed);
        }
        mine.clear();
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      std::minstd_rand rng(100 + r);
      std::vector<std::string_view> batch(32);
      std::vector<bool> is_stable(batch.size());
      while (!stop.load(std::memory_order_relaxed)) {
        for (std::size_t i = 0; i < batch.size(); ++i) {
          is_stable[i] = rng() % 2 == 0;
          batch[i] =
              is_stable[i]
                  ? std::string_view(stable[rng() % stable.size()]->key)
                  : std::string_view(
                        churn_keys[rng() % kWriters][rng() % kChurnKeys]);
        }
        route.WithEntries(batch, [&](std::size_t i, TestEntry* e) {
          if (e == nullptr) {
            if (is_stable[i]) missed.fetch_add(1);
          } else if (e->key != batch[i] ||
                     (is_stable[i] &&
                      e->dead.load(std::memory_order_relaxed))) {
            wrong.fetch_add(1);
          }
          reads.fetch_add(1, std::memory_order_relaxed);
        });
        const Owner& s = stable[rng() % stable.size()];
        if (route.Pin(s->key) != s) missed.fetch_add(1);
        route.WithEntry(s->key, [&](TestEntry* e) {
          if (e != s.get()) missed.fetch_add(1);
        });
      }
    });
  }
  std::this_thread::sleep_for(testing::StressDuration(1500));
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(missed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(reads.load(), 0);
  RouteDiagnostics d = route.Diagnostics();
  EXPECT_GE(d.resizes, 4u) << "the writers never resized the table";
  EXPECT_TRUE(AllFound(route, stable, stable.size()));
}

// The same race driven directly: one thread flips the population a resize
// reads between 5 (grow due on a 2-bucket table) and 0 (shrink due on a
// 4-bucket one) while another steps the resize, millions of chances for a
// step to read the two values in its decision. With the second reading
// planted back the table shrank to 1 bucket in 5 of 5 runs, within 4,000 to
// 20,000 steps.
TEST(ObjectRouteIndexResizeTest, DirectionIsDecidedFromOneReading) {
  RouteOptions options;
  options.bucket_count = 2;
  options.stripe_count = 2;
  Route route(options);
  // A first write makes the stripes a resize locks.
  const Owner o = Make(1, "k");
  ASSERT_TRUE(route.Publish(o->key, o).ok());
  ASSERT_TRUE(route.EraseIfMatch(o->key, o->id(), o.get()).ok());
  using Peer = route_internal::ObjectRouteIndexTestPeer;
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      Peer::SetEntries(route, 5);
      Peer::SetEntries(route, 0);
    }
  });
  long too_small = 0;
  long steps = 0;
  const auto until =
      std::chrono::steady_clock::now() + testing::StressDuration(500);
  while (std::chrono::steady_clock::now() < until && too_small == 0) {
    for (int i = 0; i < 256; ++i) {
      Peer::StepResize(route);
      if (route.bucket_count() < 2) ++too_small;
    }
    steps += 256;
  }
  stop.store(true);
  flipper.join();
  Peer::SetEntries(route, 0);
  EXPECT_EQ(too_small, 0) << "after " << steps << " steps";
  EXPECT_GE(route.Diagnostics().resizes, 2u);
}

// The resize direction is decided from one reading of the population. A
// population crossing the grow threshold of a table at its starting size
// while other writers erase once read "grow due" and then, re-read,
// "shrink": the table halved below its starting size, below the writer
// stripes' count, so two stripes covered one bucket and a merge retired a
// snapshot a writer was replacing (a double free, seen as 2-8% crashes of
// the tenant RemoveAll stress). Here 4 threads each insert and erase two
// keys of a 2-bucket, 2-stripe route, so the population (0 to 8) walks
// across its grow threshold (5) and its shrink threshold at 4 buckets (1)
// all the time; the table must never be smaller than its starting size.
// With the second reading planted back: crashes (double free) or a 1-bucket
// table in 7 of 10 runs here, 3 of 25 on a busier machine; the test above
// drives the race itself.
TEST(ObjectRouteIndexStressTest, TableNeverShrinksBelowItsStartingSize) {
  constexpr std::size_t kStart = 2;
  RouteOptions options;
  options.bucket_count = kStart;
  options.stripe_count = kStart;
  Route route(options);
  constexpr int kWriters = 4, kKeysPerWriter = 2;
  std::atomic<bool> stop{false};
  std::atomic<long> wrong{0}, too_small{0};
  std::atomic<std::uint64_t> next_id{1};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::vector<Owner> mine;
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < kKeysPerWriter; ++i) {
          mine.push_back(
              Make(next_id.fetch_add(1),
                   "w" + std::to_string(w) + "-" + std::to_string(i)));
          if (!route.Publish(mine.back()->key, mine.back()).ok()) {
            wrong.fetch_add(1);
          }
        }
        for (Owner& o : mine) {
          if (!route.EraseIfMatch(o->key, o->id(), o.get()).ok()) {
            wrong.fetch_add(1);
          }
        }
        mine.clear();
        if (route.bucket_count() < kStart) too_small.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(testing::StressDuration(1500));
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(too_small.load(), 0);
  const RouteDiagnostics d = route.Diagnostics();
  EXPECT_GE(d.bucket_count, kStart);
  EXPECT_GE(d.resizes, 4u) << "the writers never resized the table";
  EXPECT_EQ(d.entries, 0u);
  std::printf("[ resize stress ] %llu resizes\n",
              static_cast<unsigned long long>(d.resizes));
}

}  // namespace
}  // namespace cairn
