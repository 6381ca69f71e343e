// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// T2 against a creation still in flight: once Remove has returned, a later
// GetOrCreate must build a new instance, never hand out the removed one.
// The window is between GetOrCreate publishing its tenant and forgetting
// its in-flight creation; both must happen under one registry lock.

#include <atomic>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "cairn/tenant/tenant_registry.h"
#include "directory/directory_testing.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using Registry = TenantRegistry<testing::TestPayload>;

TEST(TenantRegistryRaceTest,
     T2GetOrCreateAfterRemoveNeverReturnsTheRemovedInstance) {
  Registry registry;
  auto factory = [](std::string_view) -> Result<TenantOptions> {
    TenantOptions options;
    options.directory.route.bucket_count = 2;
    return options;
  };
  const int rounds = testing::StressIterations(400);
  int stale = 0;
  for (int round = 0; round < rounds; ++round) {
    const std::string name = "t" + std::to_string(round);
    TenantInstanceId removed_id = 0;
    Registry::Handle late;
    std::thread creator([&] { (void)registry.GetOrCreate(name, factory); });
    std::thread remover([&] {
      for (;;) {
        Result<Registry::Handle> found = registry.Find(name);
        if (!found.ok()) continue;
        const TenantInstanceId id = found.value()->instance_id();
        if (!registry.Remove(name, id).ok()) continue;
        Result<Registry::Handle> again = registry.GetOrCreate(name, factory);
        ASSERT_TRUE(again.ok());
        late = again.value();
        removed_id = id;
        return;
      }
    });
    creator.join();
    remover.join();
    ASSERT_TRUE(late);
    if (late->instance_id() == removed_id) ++stale;
    EXPECT_TRUE(registry.Find(name).ok());
  }
  EXPECT_EQ(stale, 0)
      << "GetOrCreate after Remove returned the removed instance";
}

}  // namespace
}  // namespace cairn
