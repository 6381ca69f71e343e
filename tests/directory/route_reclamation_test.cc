// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The RFC's reclamation gate at directory level, on the epoch route: a
// reader stalls inside WithObjects while writers create and erase in its
// bucket. Retired bytes stay under the cap, writers get the busy status past
// the deadline instead of hanging, the stall report names the reader, and
// after the reader leaves everything is reclaimed. Then a clean shutdown
// with retirements still pending.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/epoch/epoch_domain.h"
#include "directory/directory_testing.h"
#include "directory/every_log.h"

namespace cairn {
namespace {

using std::chrono::milliseconds;
using Directory = testing::TestDirectory<testing::EpochRouteTag>;

TEST(RouteReclamationTest, StalledBatchReaderIsBoundedReportedAndDrained) {
  std::mutex mu;
  std::vector<StallReport> reports;
  EpochOptions epoch_options;
  epoch_options.name = "route";
  epoch_options.retired_bytes_cap = 32 << 10;
  epoch_options.reclaim_deadline = milliseconds(2);
  epoch_options.stall_threshold = milliseconds(20);
  epoch_options.reclaim_every = 1;
  epoch_options.stall_hook = [&](const StallReport& r) {
    std::lock_guard<std::mutex> lock(mu);
    reports.push_back(r);
  };
  EpochDomain domain(epoch_options);
  std::atomic<int> removed{0};
  DirectoryOptions options;
  options.route.bucket_count = 1;  // every key in the reader's bucket
  options.route.fixed_bucket_count = true;
  options.route.epoch_domain = &domain;
  options.on_removed = [&](const RemovedObject&) { removed.fetch_add(1); };
  auto dir = std::make_unique<Directory>(std::move(options));
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(dir->Create(testing::Key("base", i)).ok());
  }

  std::atomic<bool> inside{false}, release{false};
  std::atomic<std::uint64_t> reader_id{0};
  std::thread reader([&] {
    std::vector<std::string> keys{"base0", "base1", "base2"};
    std::vector<std::string_view> views(keys.begin(), keys.end());
    Status s = dir->WithObjects(
        views, [&](std::size_t i, StatusCode code, const auto* view) {
          EXPECT_EQ(code, StatusCode::kOk);
          if (i != 0) return;
          reader_id.store(domain.Diagnostics().oldest_guard_participant);
          inside.store(true);
          while (!release.load()) std::this_thread::sleep_for(milliseconds(1));
          EXPECT_EQ(view->key(), "base0");  // ASan: still alive
        });
    EXPECT_TRUE(s.ok());
  });
  while (!inside.load()) std::this_thread::yield();

  int created = 0, busy = 0, kept = 0;
  const auto end = std::chrono::steady_clock::now() + milliseconds(150);
  for (int i = 0; std::chrono::steady_clock::now() < end; ++i) {
    const std::string key = testing::Key("churn", i);
    auto made = dir->Create(key);
    if (!made.ok()) {
      EXPECT_EQ(made.status().code(), StatusCode::kResourceExhausted)
          << made.status().ToString();
      ++busy;
      continue;
    }
    ++created;
    Status erased = dir->Erase(key, EraseOptions{.force = true});
    if (!erased.ok()) {
      // An unlink retires more than a publish (the snapshot plus the
      // entry's record), so the cap can admit a create and refuse its erase.
      EXPECT_EQ(erased.code(), StatusCode::kResourceExhausted)
          << erased.ToString();
      ++busy;
      ++kept;
    }
    EXPECT_LE(domain.Diagnostics().retired_bytes,
              epoch_options.retired_bytes_cap);
  }
  const DirectoryDiagnostics during = dir->Diagnostics();
  EXPECT_GT(busy, 0) << "writers never reached the cap";
  EXPECT_GT(created, 0);
  EXPECT_LE(during.route.retired_bytes, epoch_options.retired_bytes_cap);
  EXPECT_GE(during.route.busy_count, 1u);
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_FALSE(reports.empty());
    EXPECT_EQ(reports.back().participant_id, reader_id.load())
        << "the report names someone else: " << reports.back().participant_name;
    EXPECT_GE(reports.back().age, milliseconds(20));
  }
  release.store(true);
  reader.join();

  ASSERT_TRUE(domain.Barrier().ok());
  // Erases whose unlink was refused are parked and retried by later writes.
  ASSERT_TRUE(dir->Create("after").ok());
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(dir->Diagnostics().pending_unlinks, 0u);
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 0u);
  EXPECT_EQ(dir->object_count(), 17u + kept);
  EXPECT_EQ(removed.load(), created - kept);

  // Clean shutdown with retirements pending: retire some snapshots, then
  // destroy the directory and shut the domain down; everything is freed once.
  std::weak_ptr<const ObjectEntry<testing::TestPayload>> watch;
  {
    auto h = dir->Pin("base3");
    ASSERT_TRUE(h.ok());
    watch = h.value().owner();
  }
  {
    Participant pinner =
        std::move(domain.RegisterParticipant("pinner")).value();
    Guard old_reader = pinner.Enter();  // keeps the retirement pending
    ASSERT_TRUE(dir->Erase("base3", EraseOptions{.force = true}).ok());
    EXPECT_GT(domain.Diagnostics().retired_count, 0u);
    EXPECT_FALSE(watch.expired());
  }
  dir.reset();
  ASSERT_TRUE(domain.Shutdown(std::chrono::seconds(5)).ok());
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 0u);
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace cairn

namespace cairn {
namespace {

// L3 with the epoch route: an erased entry's last owner is released by a
// reclaim, possibly during another key's write. That release runs the
// host's payload destructor, which must see no directory lock held: here it
// calls back into the directory, which has a single lifecycle stripe, so a
// reclaim under the stripe would deadlock (caught by the watchdog).
//
// With a durable log, that reclaim must also come after the write's record
// is finalized (docs/concurrency.md, "Durable log"): FileDurableLog's
// Finalize waits for every earlier record, so the destructor's create
// would wait for the write that runs the destructor (a hang, caught by the
// watchdog), and the in-memory log shows the pending record directly.
struct ReentrantPayload;
using ReentrantDirectory = GroupDirectory<ReentrantPayload>;

struct ReentrantPayload {
  ReentrantDirectory* dir = nullptr;
  std::atomic<int>* destroyed = nullptr;
  const testing::TestLog* log = nullptr;
  ReentrantPayload() = default;
  ReentrantPayload(ReentrantDirectory* d, std::atomic<int>* n,
                   const testing::TestLog* l)
      : dir(d), destroyed(n), log(l) {}
  ReentrantPayload(ReentrantPayload&& other) noexcept
      : dir(std::exchange(other.dir, nullptr)),
        destroyed(std::exchange(other.destroyed, nullptr)),
        log(std::exchange(other.log, nullptr)) {}
  ReentrantPayload& operator=(ReentrantPayload&&) = delete;
  ~ReentrantPayload() {
    if (dir == nullptr) return;
    EXPECT_FALSE(log->HasUnresolvedRecord())
        << "payload destroyed while a logged write's record is unresolved";
    const int n = destroyed->fetch_add(1) + 1;
    EXPECT_TRUE(dir->Create(testing::Key("from-destructor-", n)).ok());
  }
};

class RouteReclamationLogTest
    : public ::testing::TestWithParam<testing::LogKind> {};

INSTANTIATE_TEST_SUITE_P(EveryLog, RouteReclamationLogTest,
                         ::testing::ValuesIn(testing::kEveryLog),
                         testing::LogKindName);

TEST_P(RouteReclamationLogTest, L3EntryDestructorsRunWithNoDirectoryLockHeld) {
  testing::Watchdog watchdog(std::chrono::seconds(60), "reentrant destructor");
  testing::TestLog log(GetParam());
  EpochOptions epoch_options;
  epoch_options.reclaim_every = 1;
  EpochDomain domain(epoch_options);
  std::atomic<int> destroyed{0};
  {
    DirectoryOptions options;
    options.lifecycle_stripes = 1;  // every key shares the one stripe
    options.route.epoch_domain = &domain;
    options.durable_log = log.get();
    ReentrantDirectory dir(std::move(options));
    for (int i = 0; i < 8; ++i) {
      ASSERT_TRUE(dir.Create(testing::Key("victim-", i), {},
                             ReentrantPayload(&dir, &destroyed, &log))
                      .ok());
    }
    {
      // A reader keeps the erased entries' snapshots from being reclaimed
      // during their own erases, so their release lands in later writes.
      Participant reader = std::move(domain.RegisterParticipant()).value();
      Guard guard = reader.Enter();
      for (int i = 0; i < 8; ++i) {
        ASSERT_TRUE(dir.Erase(testing::Key("victim-", i)).ok());
      }
      EXPECT_EQ(destroyed.load(), 0);
    }
    for (int i = 0; i < 8 && destroyed.load() < 8; ++i) {
      ASSERT_TRUE(dir.Create(testing::Key("later-", i)).ok());
      ASSERT_TRUE(dir.Erase(testing::Key("later-", i)).ok());
    }
    ASSERT_TRUE(domain.Barrier().ok());
    EXPECT_EQ(destroyed.load(), 8);
    EXPECT_TRUE(dir.Pin("from-destructor-8").ok());
  }
  ASSERT_TRUE(domain.Shutdown(std::chrono::seconds(5)).ok());
  EXPECT_FALSE(log.HasUnresolvedRecord());
  EXPECT_TRUE(log.status().ok()) << log.status().ToString();
}

// Quota bytes (counted_bytes) may live anywhere and are not charged to the
// route's retired-bytes cap; the host memory an entry keeps alive
// (retained_bytes) is. With a reader pinning every retirement, two objects
// that each count half the cap are both erasable, and an erase charges
// (at least) the retained bytes.
TEST(RouteReclamationTest, ErasedObjectsChargeRetainedNotCountedBytes) {
  constexpr std::size_t kCap = 1 << 20;
  EpochOptions epoch_options;
  epoch_options.name = "route";
  epoch_options.retired_bytes_cap = kCap;
  epoch_options.reclaim_deadline = milliseconds(2);
  EpochDomain domain(epoch_options);
  DirectoryOptions options;
  options.route.epoch_domain = &domain;
  auto dir = std::make_unique<Directory>(std::move(options));
  CreateOptions big;
  big.counted_bytes = kCap / 2;
  big.retained_bytes = 4096;
  ASSERT_TRUE(dir->Create("a", big).ok());
  ASSERT_TRUE(dir->Create("b", big).ok());
  Result<Participant> reader = domain.RegisterParticipant("reader");
  ASSERT_TRUE(reader.ok());
  {
    Guard guard = reader->Enter();
    std::thread eraser([&] {
      const std::size_t before = domain.Diagnostics().retired_bytes;
      ASSERT_TRUE(dir->Erase("a").ok());
      const std::size_t after_one = domain.Diagnostics().retired_bytes;
      EXPECT_GE(after_one - before, 4096u) << "retained bytes not charged";
      const Status second = dir->Erase("b");
      EXPECT_TRUE(second.ok()) << second.ToString();
      EXPECT_LT(domain.Diagnostics().retired_bytes, kCap / 2);
    });
    eraser.join();
  }
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(domain.Diagnostics().retired_bytes, 0u);
  dir.reset();
}

// EraseGroup unlinks its members through the route's staged
// EraseEachIfMatch under the group lock, never waiting for retire budget:
// with the cap full (a guard held, so nothing is reclaimed) the refused
// unlinks are parked, the group is gone all the same, and the next write
// after the guard ends unlinks them. 20 members: more than one prefetch
// window of 8.
TEST(RouteReclamationTest, EraseGroupParksUnlinksTheCapRefuses) {
  EpochOptions epoch_options;
  epoch_options.retired_bytes_cap = 4 << 10;
  epoch_options.reclaim_deadline = milliseconds(2);
  EpochDomain domain(epoch_options);
  DirectoryOptions options;
  options.route.epoch_domain = &domain;
  auto dir = std::make_unique<Directory>(std::move(options));
  constexpr int kMembers = 20;
  for (int i = 0; i < kMembers; ++i) {
    ASSERT_TRUE(dir->Create(testing::Key("m", i), testing::InGroup("g")).ok());
  }
  ASSERT_TRUE(domain.Barrier().ok());
  {
    Guard guard = domain.EnterOnThisThread();
    ASSERT_TRUE(dir->EraseGroup("g").ok());
    const std::size_t parked = dir->Diagnostics().pending_unlinks;
    EXPECT_GT(parked, 0u) << "the cap never refused an unlink";
    EXPECT_LT(parked, static_cast<std::size_t>(kMembers))
        << "the cap refused every unlink";
    EXPECT_EQ(dir->Diagnostics().route.entries, parked);
    EXPECT_LE(domain.Diagnostics().retired_bytes,
              epoch_options.retired_bytes_cap);
  }
  for (int i = 0; i < kMembers; ++i) {
    EXPECT_EQ(dir->WithObject(testing::Key("m", i), [](const auto&) {}).code(),
              StatusCode::kNotFound);
  }
  EXPECT_EQ(dir->object_count(), 0u);
  ASSERT_TRUE(domain.Barrier().ok());
  ASSERT_TRUE(dir->Create("after").ok());
  ASSERT_TRUE(domain.Barrier().ok());
  EXPECT_EQ(dir->Diagnostics().pending_unlinks, 0u);
  EXPECT_EQ(dir->Diagnostics().route.entries, 1u);
}

}  // namespace
}  // namespace cairn
