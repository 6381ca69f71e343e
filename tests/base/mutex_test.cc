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
  {
    ReaderLock reader(&mu);
    bool second_reader = false;
    bool writer = true;
    std::thread([&] {
      second_reader = mu.TryLockShared();
      if (second_reader) mu.UnlockShared();
      writer = mu.TryLock();
      if (writer) mu.Unlock();
    }).join();
    EXPECT_TRUE(second_reader);
    EXPECT_FALSE(writer);
  }
  {
    WriterLock writer(&mu);
    bool reader = true;
    bool other_writer = true;
    std::thread([&] {
      reader = mu.TryLockShared();
      if (reader) mu.UnlockShared();
      other_writer = mu.TryLock();
      if (other_writer) mu.Unlock();
    }).join();
    EXPECT_FALSE(reader);
    EXPECT_FALSE(other_writer);
  }
  ASSERT_TRUE(mu.TryLock());
  mu.Unlock();
}

}  // namespace
}  // namespace cairn
