// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// TenantRegistry's shards: every tenant found in its shard whatever the
// shard count, a change retires the map of one shard only, the hit path
// allocates nothing, a removal out of memory changes nothing, and writers
// of every shard racing readers agree with what they did.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/tenant/tenant_registry.h"
#include "directory/directory_testing.h"
#include "testing/alloc_counter.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::TestPayload;
using Registry = TenantRegistry<TestPayload>;

Result<TenantOptions> Small(std::string_view) {
  TenantOptions options;
  options.directory.route.bucket_count = 2;
  return options;
}

RegistryOptions WithShards(std::size_t shards) {
  RegistryOptions options;
  options.shards = shards;
  return options;
}

std::set<std::string> Names(const Registry& registry) {
  std::set<std::string> names;
  for (const Registry::Handle& t : registry.Tenants()) {
    names.emplace(t->name());
  }
  return names;
}

TEST(TenantRegistryShardTest, EveryTenantIsFoundWhateverTheShardCount) {
  for (std::size_t shards : {0, 1, 3, 8, 1024}) {
    SCOPED_TRACE(shards);
    Registry registry(WithShards(shards));
    EXPECT_EQ(registry.shard_count(), shards <= 1 ? 1u : std::bit_ceil(shards));
    std::set<std::string> expected = {"default"};
    for (int i = 0; i < 600; ++i) {
      const std::string name = "t" + std::to_string(i);
      ASSERT_TRUE(registry.GetOrCreate(name, Small).ok());
      expected.insert(name);
    }
    // Remove every third tenant, so shards shrink (some to empty) while
    // others keep their entries.
    for (int i = 0; i < 600; i += 3) {
      const std::string name = "t" + std::to_string(i);
      Result<Registry::Handle> t = registry.Find(name);
      ASSERT_TRUE(t.ok());
      ASSERT_TRUE(registry.Remove(name, t.value()->instance_id()).ok());
      expected.erase(name);
    }
    EXPECT_EQ(registry.size(), expected.size());
    EXPECT_EQ(Names(registry), expected);
    for (int i = 0; i < 600; ++i) {
      const std::string name = "t" + std::to_string(i);
      Result<Registry::Handle> found = registry.Find(name);
      ASSERT_EQ(found.ok(), i % 3 != 0) << name;
      if (found.ok()) {
        EXPECT_EQ(found.value()->name(), name);
        bool ran = false;
        EXPECT_TRUE(registry
                        .WithTenant(name,
                                    [&](Registry::TenantType& t) {
                                      ran = t.name() == name;
                                    })
                        .ok());
        EXPECT_TRUE(ran);
      }
    }
    // A removed name comes back as a new instance in its shard.
    ASSERT_TRUE(registry.GetOrCreate("t0", Small).ok());
    EXPECT_TRUE(registry.Find("t0").ok());
  }
}

// Allocations made by one GetOrCreate miss of a tenant named `name`.
std::uint64_t AllocationsOfOneCreation(Registry& registry,
                                       const std::string& name) {
  testing::AllocationCounter counter;
  EXPECT_TRUE(registry.GetOrCreate(name, Small).ok());
  return counter.count();
}

// A change copies and retires one shard's map: with 2,000 tenants over 64
// shards (about 31 each), one creation allocates about what it does in a
// registry of 10 tenants (a copy of the whole map would allocate per
// tenant), and
// the bytes it retires are a few of that shard's slots, not the 2,000
// tenants a whole-map copy would retire. A reader stalled in the registry
// domain keeps the retired map counted.
TEST(TenantRegistryShardTest, AChangeRetiresTheMapOfItsShardOnly) {
  Registry registry(WithShards(64));
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(registry.GetOrCreate("t" + std::to_string(i), Small).ok());
  }
  const std::uint64_t at_ten = AllocationsOfOneCreation(registry, "probe-a");
  for (int i = 10; i < 2000; ++i) {
    ASSERT_TRUE(registry.GetOrCreate("t" + std::to_string(i), Small).ok());
  }
  // A few allocations may differ (an epoch block refilled, say); a copy of
  // the whole map would add about 2,000.
  EXPECT_LE(AllocationsOfOneCreation(registry, "probe-b"), at_ten + 8);
  std::atomic<bool> entered{false};
  std::atomic<bool> release{false};
  std::thread stalled([&] {
    EXPECT_TRUE(
        registry
            .WithTenant("default",
                        [&](Registry::TenantType&) {
                          entered.store(true, std::memory_order_release);
                          while (!release.load(std::memory_order_acquire)) {
                            std::this_thread::sleep_for(
                                std::chrono::milliseconds(1));
                          }
                        })
            .ok());
  });
  while (!entered.load(std::memory_order_acquire)) std::this_thread::yield();
  const std::size_t before =
      registry.registry_domain().Diagnostics().retired_bytes;
  ASSERT_TRUE(registry.GetOrCreate("one-more", Small).ok());
  const std::size_t retired =
      registry.registry_domain().Diagnostics().retired_bytes - before;
  release.store(true, std::memory_order_release);
  stalled.join();
  // 31 tenants of a shard (63 at the most here) are at most 128 slots of
  // 16 bytes; 2,000 tenants would be 4,096 slots.
  EXPECT_GT(retired, 0u);
  EXPECT_LT(retired, 4096u) << "a creation retired more than one shard's map";
}

TEST(TenantRegistryShardTest, LookupsAndGetOrCreateHitsDoNotAllocate) {
  Registry registry;
  // Names past the short-string buffer: a lookup that built a std::string
  // key would allocate.
  const std::string name = "a-tenant-name-longer-than-sso";
  const std::string missing = "a-missing-name-longer-than-sso";
  ASSERT_TRUE(registry.GetOrCreate(name, Small).ok());
  // The thread's first call registers it with the registry domain.
  ASSERT_TRUE(registry.Find(name).ok());
  testing::AllocationCounter counter;
  for (int i = 0; i < 100; ++i) {
    Result<Registry::Handle> hit = registry.Find(name);
    ASSERT_TRUE(hit.ok());
    EXPECT_EQ(registry.Find(missing).status().code(), StatusCode::kNotFound);
    ASSERT_TRUE(registry.WithTenant(name, [](Registry::TenantType&) {}).ok());
    ASSERT_TRUE(registry.GetOrCreate(name, Small).ok());
  }
  EXPECT_EQ(counter.count(), 0u);
}

TEST(TenantRegistryShardTest,
     RemoveOutOfMemoryReturnsAStatusAndChangesNothing) {
  int refused = 0;
  for (int n = 1; n <= 8; ++n) {
    SCOPED_TRACE(n);
    Registry registry(WithShards(1));
    ASSERT_TRUE(registry.GetOrCreate("a", Small).ok());
    Result<Registry::Handle> b = registry.GetOrCreate("b", Small);
    ASSERT_TRUE(b.ok());
    testing::FailNthAllocationOnThisThread(n);
    const Status s = registry.Remove("b", b.value()->instance_id());
    testing::FailNthAllocationOnThisThread(0);
    if (!s.ok()) {
      ++refused;
      EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
      EXPECT_TRUE(registry.Find("b").ok());
      EXPECT_EQ(registry.size(), 3u);
      ASSERT_TRUE(registry.Remove("b", b.value()->instance_id()).ok());
    }
    EXPECT_FALSE(registry.Find("b").ok());
    EXPECT_TRUE(registry.Find("a").ok());
    EXPECT_EQ(registry.size(), 2u);
  }
  EXPECT_GT(refused, 0);
}

// Writers create and remove their own names, spread over every shard of a
// small registry, while readers look them up; a name a writer holds
// created is always found, one it removed is never found by it, and at the
// end the registry holds exactly the names left created.
TEST(TenantRegistryShardStressTest, WritersOfEveryShardAndReadersAgree) {
  Registry registry(WithShards(8));
  constexpr int kWriters = 4;
  constexpr int kReaders = 4;
  const int rounds = testing::StressIterations(400);
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::set<std::string>> kept(kWriters);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int r = 0; r < rounds; ++r) {
        const std::string name =
            "w" + std::to_string(w) + "-" + std::to_string(r % 37);
        Result<Registry::Handle> t = registry.GetOrCreate(name, Small);
        if (!t.ok() || !registry.Find(name).ok()) wrong.fetch_add(1);
        if (r % 3 != 0) {
          if (!registry.Remove(name, t.value()->instance_id()).ok() ||
              registry.Find(name).ok()) {
            wrong.fetch_add(1);
          }
          kept[w].erase(name);
        } else {
          kept[w].insert(name);
        }
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      std::uint64_t seen = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const std::string name = "w" + std::to_string(r % kWriters) + "-" +
                                 std::to_string(seen % 37);
        Result<Registry::Handle> t = registry.Find(name);
        if (t.ok() && t.value()->name() != name) wrong.fetch_add(1);
        seen += t.ok() ? 1 : 2;
        if (r == 0) (void)registry.Tenants();
      }
    });
  }
  for (int w = 0; w < kWriters; ++w) threads[w].join();
  stop.store(true);
  for (std::size_t i = kWriters; i < threads.size(); ++i) threads[i].join();
  EXPECT_EQ(wrong.load(), 0);
  std::set<std::string> expected = {"default"};
  for (const auto& names : kept) expected.insert(names.begin(), names.end());
  EXPECT_EQ(Names(registry), expected);
  EXPECT_EQ(registry.size(), expected.size());
}

}  // namespace
}  // namespace cairn
