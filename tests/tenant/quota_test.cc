// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// QuotaAccount (Q1, Q3) and the directory's ledger (Q2): two-phase puts,
// upserts, reaping, and the bad-input paths.

#include "cairn/directory/quota.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/directory/group_directory.h"
#include "cairn/tenant/tenant_registry.h"
#include "directory/directory_testing.h"
#include "testing/alloc_counter.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::Key;
using testing::Sized;
using testing::TestPayload;
using Dir = GroupDirectory<TestPayload>;
using View = ObjectView<TestPayload>;
using Access = ObjectAccess<TestPayload>;

struct Fixture {
  explicit Fixture(std::uint64_t limit) : quota(limit) {
    DirectoryOptions o;
    o.clock = &clock;
    o.quota = &quota;
    o.pending_put_timeout = std::chrono::seconds(10);
    o.route.bucket_count = 64;
    o.on_removed = [this](const RemovedObject& r) {
      removed.push_back(r.token);
    };
    dir = std::make_unique<Dir>(o);
  }
  ManualClock clock;
  QuotaAccount quota;
  std::vector<ObjectToken> removed;
  std::unique_ptr<Dir> dir;
};

TEST(QuotaTest, Q1ChargeFailsWithDeficitAndNothingCharged) {
  QuotaAccount account(100);
  ASSERT_TRUE(account.Charge(60).ok());
  std::uint64_t deficit = 0;
  Status s = account.Charge(70, &deficit);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(deficit, 30u);
  EXPECT_NE(s.message().find("deficit 30 bytes"), std::string_view::npos);
  EXPECT_EQ(account.charged(), 60u);
  ASSERT_TRUE(account.Charge(40).ok());
  EXPECT_EQ(account.charged(), 100u);
  // The admission-closed bit refuses charges but not releases.
  account.CloseAdmission();
  EXPECT_EQ(account.Charge(0).code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(account.Release(50).ok());
  EXPECT_EQ(account.charged(), 50u);
  account.OpenAdmission();
  EXPECT_TRUE(account.Charge(10).ok());
  // A lower limit leaves a deficit for eviction to free.
  account.set_limit(20);
  EXPECT_EQ(account.deficit(), 40u);
  EXPECT_EQ(account.Charge(QuotaAccount::kUnlimited).code(),
            StatusCode::kInvalidArgument);
}

TEST(QuotaTest, ForceChargePassesTheLimitAndClosedAdmissionButNotOverflow) {
  // A restored or replayed object was admitted by the primary: it is
  // charged whatever the replica's limit or admission says.
  QuotaAccount account(100);
  ASSERT_TRUE(account.Charge(60).ok());
  ASSERT_TRUE(account.ForceCharge(70).ok());
  EXPECT_EQ(account.charged(), 130u);
  EXPECT_EQ(account.deficit(), 30u);
  EXPECT_EQ(account.Charge(1).code(), StatusCode::kResourceExhausted);
  account.CloseAdmission();
  ASSERT_TRUE(account.ForceCharge(5).ok());
  EXPECT_EQ(account.charged(), 135u);
  EXPECT_TRUE(account.admission_closed());  // the closed bit is kept
  EXPECT_EQ(account.Charge(0).code(), StatusCode::kResourceExhausted);
  // Only an overflow of the 63-bit count fails, charging nothing.
  EXPECT_EQ(account.ForceCharge(QuotaAccount::kUnlimited - 134).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(account.charged(), 135u);
  EXPECT_TRUE(account.admission_closed());
  ASSERT_TRUE(account.ForceCharge(QuotaAccount::kUnlimited - 135).ok());
  EXPECT_EQ(account.charged(), QuotaAccount::kUnlimited);
  EXPECT_TRUE(account.admission_closed());
  ASSERT_TRUE(account.Release(QuotaAccount::kUnlimited).ok());
  EXPECT_EQ(account.charged(), 0u);
}

TEST(QuotaTest, Q1ConcurrentChargesNeverOvershootTheLimit) {
  QuotaAccount account(1000);
  std::atomic<long> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (account.Charge(7).ok()) {
          granted.fetch_add(7, std::memory_order_relaxed);
          if (i % 3 == 0) {
            ASSERT_TRUE(account.Release(7).ok());
            granted.fetch_sub(7, std::memory_order_relaxed);
          }
        }
        ASSERT_LE(account.charged(), 1000u);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(account.charged(), static_cast<std::uint64_t>(granted.load()));
}

TEST(QuotaTest, ChargeAndReleaseDoNotAllocate) {
  QuotaAccount account(100);
  testing::AllocationCounter counter;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(account.Charge(1).ok());
    ASSERT_TRUE(account.Release(1).ok());
  }
  // A mismatched release is a code-only status.
  EXPECT_EQ(account.Release(1).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(counter.count(), 0u);
}

TEST(QuotaTest, Q2LedgerMismatchReturnsErrorAndMutatesNothing) {
  QuotaAccount account(100);
  ASSERT_TRUE(account.Charge(10).ok());
  EXPECT_EQ(account.Release(11).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(account.charged(), 10u);

  // In a directory: the host drained the account behind its back, so an
  // erase finds the ledger out of step; it fails and the object stays.
  Fixture f(1000);
  ASSERT_TRUE(f.dir->Create("k", Sized(40)).ok());
  ASSERT_TRUE(f.quota.Release(30).ok());
  EXPECT_EQ(f.dir->Erase("k").code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(f.dir->Pin("k").ok());
  EXPECT_EQ(f.quota.charged(), 10u);
  EXPECT_TRUE(f.removed.empty());
  ASSERT_TRUE(f.quota.Charge(30).ok());
  EXPECT_TRUE(f.dir->Erase("k").ok());
  EXPECT_EQ(f.quota.charged(), 0u);
}

TEST(QuotaTest, Q2ChargedBytesEqualLiveObjectsAcrossEveryPath) {
  Fixture f(1000);
  auto live_sum = [&] {
    std::uint64_t sum = 0;
    Status s =
        f.dir->VisitHandles([&](std::span<const ObjectHandle<TestPayload>> hs) {
          for (const auto& h : hs) sum += h->counted_bytes();
        });
    EXPECT_TRUE(s.ok());
    return sum;
  };
  ASSERT_TRUE(f.dir->Create("a", Sized(100)).ok());
  ASSERT_TRUE(f.dir->Create("g1", Sized(50, "g")).ok());
  ASSERT_TRUE(f.dir->Create("g2", Sized(50, "g")).ok());
  EXPECT_EQ(f.quota.charged(), 200u);
  EXPECT_EQ(live_sum(), 200u);
  // Failure paths refund: an existing key, an over-quota create.
  EXPECT_EQ(f.dir->Create("a", Sized(100)).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(f.dir->Create("big", Sized(900)).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(f.quota.charged(), 200u);
  // Pending puts count while pending; commit keeps, abort refunds.
  Result<ObjectHandle<TestPayload>> p1 = f.dir->CreatePending("p1", Sized(30));
  Result<ObjectHandle<TestPayload>> p2 = f.dir->CreatePending("p2", Sized(20));
  ASSERT_TRUE(p1.ok() && p2.ok());
  EXPECT_EQ(f.quota.charged(), 250u);
  ASSERT_TRUE(f.dir->Commit("p1", p1.value().token()).ok());
  ASSERT_TRUE(f.dir->Abort("p2", p2.value().token()).ok());
  EXPECT_EQ(f.quota.charged(), 230u);
  EXPECT_EQ(live_sum(), 230u);
  // Upsert: the new size replaces the old one at commit.
  ObjectToken a = f.dir->Pin("a").value().token();
  ASSERT_TRUE(f.dir->BeginUpsert("a", a, {60, 60}).ok());
  EXPECT_EQ(f.quota.charged(), 290u);
  ASSERT_TRUE(f.dir->CommitUpsert("a", a).ok());
  EXPECT_EQ(f.quota.charged(), 190u);
  EXPECT_EQ(live_sum(), 190u);
  // Erase a member and the whole group; erase the singleton.
  ASSERT_TRUE(f.dir->Erase("g1").ok());
  EXPECT_EQ(f.quota.charged(), 140u);
  ASSERT_TRUE(f.dir->EraseGroup("g").ok());
  ASSERT_TRUE(f.dir->Erase("a").ok());
  ASSERT_TRUE(f.dir->Erase("p1").ok());
  EXPECT_EQ(f.quota.charged(), 0u);
  EXPECT_EQ(live_sum(), 0u);
}

TEST(QuotaTest, Q3QuotaCallsTakeNoRegistryDirectoryOrRouteLock) {
  TenantRegistry<TestPayload> registry;
  auto& tenant = *registry.default_tenant();
  ASSERT_TRUE(tenant.directory().Create("k", Sized(5)).ok());
  // Under the registry's read guard, and under the object's exclusive lock
  // (where the directory itself releases charges), the account still
  // answers: it needs no lock any of them holds.
  ASSERT_TRUE(registry
                  .WithTenant("default",
                              [&](TenantRegistry<TestPayload>::TenantType& t) {
                                ASSERT_TRUE(t.quota().Charge(10).ok());
                                ASSERT_TRUE(t.quota().Release(10).ok());
                              })
                  .ok());
  ASSERT_TRUE(
      tenant.directory()
          .WithObjectExclusive("k",
                               [&](Access&) {
                                 ASSERT_TRUE(tenant.quota().Charge(1).ok());
                                 ASSERT_TRUE(tenant.quota().Release(1).ok());
                               })
          .ok());
  // The account is one lock-free word.
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
  EXPECT_EQ(tenant.quota().charged(), 5u);
}

TEST(TwoPhasePutTest, PendingPutIsInvisibleUntilCommit) {
  Fixture f(1000);
  Result<ObjectHandle<TestPayload>> p =
      f.dir->CreatePending("k", Sized(10), TestPayload{5, 10, 0});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(f.dir->WithObject("k", [](const View&) {}).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(f.dir->Pin("k").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dir->Create("k").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(f.dir->Erase("k").code(), StatusCode::kNotFound);
  std::uint64_t version_before = 0;
  ASSERT_TRUE(f.dir->Commit("k", p.value().token()).ok());
  ASSERT_TRUE(f.dir
                  ->WithObject("k",
                               [&](const View& v) {
                                 EXPECT_EQ(v.payload().value, 5);
                                 EXPECT_EQ(v.counted_bytes(), 10u);
                                 version_before = v.version();
                               })
                  .ok());
  EXPECT_GT(version_before, 1u);
}

TEST(TwoPhasePutTest, AbortRefundsAndEmitsRemovalOnce) {
  Fixture f(1000);
  Result<ObjectHandle<TestPayload>> p =
      f.dir->CreatePending("m", Sized(30, "grp"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(f.quota.charged(), 30u);
  ASSERT_TRUE(f.dir->Abort("m", p.value().token()).ok());
  EXPECT_EQ(f.quota.charged(), 0u);
  ASSERT_EQ(f.removed.size(), 1u);
  EXPECT_EQ(f.removed[0], p.value().token());
  EXPECT_EQ(f.dir->Abort("m", p.value().token()).code(), StatusCode::kNotFound);
  EXPECT_EQ(f.removed.size(), 1u);
  // The emptied group left the catalog; the key is free again.
  EXPECT_EQ(f.dir->FindGroup("grp").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(f.dir->Create("m", Sized(30)).ok());
}

TEST(TwoPhasePutTest, CommitOrAbortOfWrongStateOrInstanceIsRejected) {
  Fixture f(1000);
  Result<ObjectHandle<TestPayload>> p = f.dir->CreatePending("k", Sized(10));
  ASSERT_TRUE(p.ok());
  const ObjectToken tok = p.value().token();
  ObjectToken other = tok;
  other.object += 1000;
  EXPECT_EQ(f.dir->Commit("k", other).code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dir->Abort("k", other).code(), StatusCode::kNotFound);
  ObjectToken other_tenant = tok;
  other_tenant.tenant += 1;
  EXPECT_EQ(f.dir->Commit("k", other_tenant).code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dir->Commit("unknown", tok).code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dir->Commit("", tok).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(f.dir->Commit("k", tok).ok());
  // Now kActive: neither phase applies again.
  EXPECT_EQ(f.dir->Commit("k", tok).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.dir->Abort("k", tok).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.quota.charged(), 10u);
  EXPECT_TRUE(f.removed.empty());
  // Quota exceeded on the first phase: nothing routed, deficit reported.
  Result<ObjectHandle<TestPayload>> big =
      f.dir->CreatePending("big", Sized(995));
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("deficit 5 bytes"),
            std::string_view::npos);
  EXPECT_EQ(f.dir->Commit("big", tok).code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dir->object_count(), 1u);
}

TEST(TwoPhasePutTest, UncommittedPutsAndUpsertsAreReapedAfterTimeout) {
  Fixture f(1000);
  Result<ObjectHandle<TestPayload>> old =
      f.dir->CreatePending("old", Sized(10));
  ASSERT_TRUE(old.ok());
  ASSERT_TRUE(f.dir->Create("u", Sized(10)).ok());
  const ObjectToken u = f.dir->Pin("u").value().token();
  ASSERT_TRUE(f.dir->BeginUpsert("u", u, {20, 20}).ok());
  f.clock.Advance(std::chrono::seconds(6));
  Result<ObjectHandle<TestPayload>> young =
      f.dir->CreatePending("young", Sized(10));
  ASSERT_TRUE(young.ok());
  EXPECT_EQ(f.quota.charged(), 50u);
  EXPECT_EQ(f.dir->ReapPendingPuts(), 0u);
  f.clock.Advance(std::chrono::seconds(5));
  // "old" and the upsert are 11 s old, "young" 5 s.
  EXPECT_EQ(f.dir->ReapPendingPuts(), 2u);
  EXPECT_EQ(f.quota.charged(), 20u);
  EXPECT_EQ(f.dir->Commit("old", old.value().token()).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(f.dir->CommitUpsert("u", u).code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(
      f.dir
          ->WithObject("u",
                       [](const View& v) { EXPECT_EQ(v.counted_bytes(), 10u); })
          .ok());
  ASSERT_TRUE(f.dir->Commit("young", young.value().token()).ok());
  f.clock.Advance(std::chrono::seconds(60));
  EXPECT_EQ(f.dir->ReapPendingPuts(), 0u);
  EXPECT_EQ(f.quota.charged(), 20u);
}

TEST(TwoPhasePutTest, UpsertKeepsCommittedStateVisibleUntilCommit) {
  Fixture f(1000);
  ASSERT_TRUE(f.dir->Create("k", Sized(10), TestPayload{1, 10, 0}).ok());
  const ObjectToken tok = f.dir->Pin("k").value().token();
  std::uint64_t v0 = 0;
  ASSERT_TRUE(
      f.dir->WithObject("k", [&](const View& v) { v0 = v.version(); }).ok());
  ASSERT_TRUE(f.dir->BeginUpsert("k", tok, {40, 40}).ok());
  EXPECT_EQ(f.dir->BeginUpsert("k", tok, {1, 1}).code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(f.dir
                  ->WithObject("k",
                               [&](const View& v) {
                                 EXPECT_EQ(v.payload().value, 1);
                                 EXPECT_EQ(v.size_bytes(), 10u);
                                 EXPECT_EQ(v.counted_bytes(), 10u);
                                 EXPECT_EQ(v.version(), v0);
                               })
                  .ok());
  ASSERT_TRUE(f.dir
                  ->CommitUpsert("k", tok,
                                 [](Access& a) {
                                   a.payload() = TestPayload{2, 40, 0};
                                 })
                  .ok());
  ASSERT_TRUE(f.dir
                  ->WithObject("k",
                               [&](const View& v) {
                                 EXPECT_EQ(v.payload().value, 2);
                                 EXPECT_EQ(v.size_bytes(), 40u);
                                 EXPECT_EQ(v.counted_bytes(), 40u);
                                 EXPECT_GT(v.version(), v0);
                               })
                  .ok());
  EXPECT_EQ(f.quota.charged(), 40u);
  // Abort: the staged charge is refunded, the committed state kept.
  ASSERT_TRUE(f.dir->BeginUpsert("k", tok, {5, 5}).ok());
  ASSERT_TRUE(f.dir->AbortUpsert("k", tok).ok());
  EXPECT_EQ(f.quota.charged(), 40u);
  EXPECT_EQ(f.dir->AbortUpsert("k", tok).code(),
            StatusCode::kFailedPrecondition);
  // Over quota: refused with the deficit, nothing staged.
  Status s = f.dir->BeginUpsert("k", tok, {961, 961});
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("deficit 1 bytes"), std::string_view::npos);
  EXPECT_EQ(f.dir->CommitUpsert("k", tok).code(),
            StatusCode::kFailedPrecondition);
  // A stale token never stages on a recreated instance (D5).
  ASSERT_TRUE(f.dir->Erase("k").ok());
  ASSERT_TRUE(f.dir->Create("k", Sized(10)).ok());
  EXPECT_EQ(f.dir->BeginUpsert("k", tok, {1, 1}).code(), StatusCode::kNotFound);
  EXPECT_EQ(f.quota.charged(), 10u);
}

TEST(TwoPhasePutTest, UnknownTenantIsRejected) {
  TenantRegistry<TestPayload> registry;
  EXPECT_EQ(registry.Find("nobody").status().code(), StatusCode::kNotFound);
  Fixture f(100);
  Result<ObjectHandle<TestPayload>> p = f.dir->CreatePending("k", Sized(1));
  ASSERT_TRUE(p.ok());
  // A token of another tenant instance names nothing here.
  ObjectToken foreign = p.value().token();
  foreign.tenant = 99;
  EXPECT_EQ(f.dir->Commit("k", foreign).code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dir->BeginUpsert("k", foreign, {}).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace cairn
