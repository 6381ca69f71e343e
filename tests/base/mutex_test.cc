// Copyright 2026 The cairn Authors.

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

TEST(MutexTest, TryLockFailsWhileHeld) {
  Mutex mu;
  mu.Lock();
  bool acquired = true;
  std::thread([&] {
    acquired = mu.TryLock();
    if (acquired) mu.Unlock();
  }).join();
  EXPECT_FALSE(acquired);
  mu.Unlock();
  ASSERT_TRUE(mu.TryLock());
  mu.Unlock();
}

TEST(SharedMutexTest, ReadersShareWritersExclude) {
  SharedMutex mu;
  int value = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        WriterLock lock(&mu);
        ++value;
      }
    });
    threads.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        ReaderLock lock(&mu);
        EXPECT_GE(value, 0);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(value, 10000);
}

}  // namespace
}  // namespace cairn
