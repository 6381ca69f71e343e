// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The allocation-failure helper the out-of-memory tests loop on: a wrong
// "reached" answer would end their loops early (silently testing less) or
// never.

#include "testing/alloc_counter.h"

#include <new>

#include <gtest/gtest.h>

namespace cairn {
namespace {

// Three allocations. Calls of operator new itself, not new-expressions,
// which an optimizer may elide.
void AllocateThree() {
  void* blocks[3];
  for (void*& block : blocks) block = ::operator new(16);
  for (void* block : blocks) ::operator delete(block);
}

TEST(AllocCounterTest, FailNthAllocationDuringSaysWhetherTheNthWasMade) {
  int threw = 0;
  // Twice over: a failure from an earlier call must not count as this
  // call's.
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    for (int n = 1; n <= 3; ++n) {
      EXPECT_TRUE(testing::FailNthAllocationDuring(n, &threw, AllocateThree));
    }
    EXPECT_FALSE(testing::FailNthAllocationDuring(4, &threw, AllocateThree));
    EXPECT_EQ(threw, 3 * (round + 1));
  }
  // Disarmed afterwards.
  testing::AllocationCounter allocs;
  AllocateThree();
  EXPECT_EQ(allocs.count(), 3u);
}

}  // namespace
}  // namespace cairn
