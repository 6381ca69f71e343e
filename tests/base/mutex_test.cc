// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/base/mutex.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace cairn {
namespace {

TEST(MutexTest, SerialisesWriters) {
  Mutex mu;
  int counter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        MutexLock lock(&mu);
        ++counter;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 40000);
}

// Try-lock probes from another thread, written so the thread-safety
// analysis can follow them (the lock is released in the branch that took it).
bool CanLock(Mutex& mu) {
  if (!mu.TryLock()) return false;
  mu.Unlock();
  return true;
}
bool CanLock(SharedMutex& mu) {
  if (!mu.TryLock()) return false;
  mu.Unlock();
  return true;
}
bool CanLockShared(SharedMutex& mu) {
  if (!mu.TryLockShared()) return false;
  mu.UnlockShared();
  return true;
}

TEST(MutexTest, TryLockFailsWhileHeld) {
  Mutex mu;
  bool acquired = true;
  {
    MutexLock lock(&mu);
    std::thread([&] { acquired = CanLock(mu); }).join();
  }
  EXPECT_FALSE(acquired);
  EXPECT_TRUE(CanLock(mu));
}

TEST(SharedMutexTest, ReadersShareWritersExclude) {
  SharedMutex mu;
  {
    ReaderLock reader(&mu);
    bool second_reader = false;
    bool writer = true;
    std::thread([&] {
      second_reader = CanLockShared(mu);
      writer = CanLock(mu);
    }).join();
    EXPECT_TRUE(second_reader);
    EXPECT_FALSE(writer);
  }
  {
    WriterLock writer(&mu);
    bool reader = true;
    bool other_writer = true;
    std::thread([&] {
      reader = CanLockShared(mu);
      other_writer = CanLock(mu);
    }).join();
    EXPECT_FALSE(reader);
    EXPECT_FALSE(other_writer);
  }
  EXPECT_TRUE(CanLock(mu));
}

}  // namespace
}  // namespace cairn
