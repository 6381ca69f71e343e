// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Checkpoint while writers run (X11): the copy takes one partition lock at a
// time and the flush and the file are written with none, so writes go on;
// replay from the position taken before the copy restores what they wrote.
// Checkpoint generations (X12): each checkpoint is a new file, and the
// older ones go only once the newer is durable.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cairn/flush/log_store.h"
#include "flush/flush_testing.h"
#include "testing/counting_env.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::CountingEnv;
using testing::EnvCall;
using testing::ScratchDir;
using testing::SyncGateEnv;

LogStoreOptions CheckpointOptions(Env* env) {
  LogStoreOptions o;
  o.partitions = 4;
  o.databases = 2;
  o.block_bytes = 64 * 1024;
  o.max_value_bytes = 1024;
  o.sync = true;
  // Close only flushes: reopening then loads the checkpoint under test and
  // replays the log after its position.
  o.checkpoint_on_close = false;
  o.env = env;
  return o;
}

std::unique_ptr<LogStore> MustOpen(const std::string& dir,
                                   const LogStoreOptions& o) {
  auto store = LogStore::Open(dir, o);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

std::string GetOr(LogStore& store, std::uint32_t db, const std::string& key) {
  std::string v;
  const Status s = store.Get(db, key, &v);
  if (s.code() == StatusCode::kNotFound) return "<absent>";
  EXPECT_TRUE(s.ok()) << s.ToString();
  return v;
}

std::string Key(const char* prefix, int i) {
  return prefix + std::to_string(i);
}

// While a Checkpoint waits in each of its syncs (the flush's, the file's),
// Set, Del and Get of keys in every partition complete; after reopening,
// what they did is there. Planted bugs: holding every partition lock for
// the whole checkpoint (as before) trips the watchdog; taking the position
// after the flush instead of before the copy loses the writes made during
// the flush's sync (their records lie before it, but the copy has none of
// them).
TEST(LogStoreCheckpointTest, X11WritersGoOnDuringACheckpoint) {
  ScratchDir dir;
  SyncGateEnv gate(Env::Default());
  const LogStoreOptions o = CheckpointOptions(&gate);
  std::map<std::string, std::string> model;
  int stages = 0;
  {
    auto store = MustOpen(dir.path(), o);
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 64; ++i) {
      ASSERT_TRUE(store->Set(0, Key("k", i), "old").ok());
      model[Key("k", i)] = "old";
    }
    ASSERT_TRUE(store->Flush().ok());

    gate.Hold();
    std::atomic<bool> done{false};
    Status checkpoint;
    std::thread checkpointer([&] {
      checkpoint = store->Checkpoint();
      done.store(true);
    });
    // Each time the checkpoint enters a sync, write from another thread;
    // the writes must finish while the sync is held.
    bool stalled = false;
    for (int entered = 1; !done.load() && !stalled;) {
      if (gate.Entered() < entered) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      const int stage = stages++;
      auto writes = std::async(std::launch::async, [&] {
        for (int i = 0; i < 16; ++i) {
          const std::string key = Key("s", stage * 100 + i);
          if (!store->Set(0, key, "new").ok()) return false;
        }
        // Overwrite and delete keys the copy may already hold.
        if (!store->Set(0, Key("k", stage), "during").ok()) return false;
        if (!store->Del(0, Key("k", 32 + stage)).ok()) return false;
        return GetOr(*store, 0, Key("k", 16 + stage)) == "old";
      });
      if (writes.wait_for(std::chrono::seconds(10)) !=
          std::future_status::ready) {
        stalled = true;
        gate.Release();  // let the checkpoint finish, then the writes
      }
      EXPECT_TRUE(writes.get()) << "stage " << stage;
      for (int i = 0; i < 16; ++i) model[Key("s", stage * 100 + i)] = "new";
      model[Key("k", stage)] = "during";
      model.erase(Key("k", 32 + stage));
      ++entered;
      gate.Permit();
    }
    checkpointer.join();
    gate.Release();
    ASSERT_FALSE(stalled) << "writes waited for the checkpoint";
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.ToString();
    // The log's sync and the checkpoint file's, at least.
    EXPECT_GE(stages, 2);
    ASSERT_TRUE(store->Close().ok());
  }
  auto store = MustOpen(dir.path(), o);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->recovery().from_checkpoint);
  for (int i = 0; i < 64; ++i) {
    const std::string key = Key("k", i);
    auto it = model.find(key);
    EXPECT_EQ(GetOr(*store, 0, key),
              it == model.end() ? "<absent>" : it->second)
        << key;
  }
  for (int stage = 0; stage < stages; ++stage) {
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(GetOr(*store, 0, Key("s", stage * 100 + i)), "new");
    }
  }
  EXPECT_EQ(store->KeyCount(0), model.size());
}

// Writers (each owning its keys, in every partition and both databases)
// Set and Del while another thread checkpoints in a loop; the writers stop
// right after the last checkpoint returns, so it raced them. Reopening
// (checkpoint + replay) gives exactly each writer's last state. Planted
// bug: taking the position after the copy instead of before it lost keys
// written during the copy to partitions already copied.
TEST(LogStoreCheckpointStressTest, X11CheckpointsRacingWritersRecoverTheState) {
  ScratchDir dir;
  LogStoreOptions o = CheckpointOptions(Env::Default());
  o.sync = false;  // no crash here: the copy and replay are under test
  o.block_bytes = 256 * 1024;
  constexpr int kWriters = 4;
  constexpr int kKeys = 2000;
  std::vector<std::map<std::string, std::string>> models(kWriters);
  int checkpoints = 0;
  {
    auto store = MustOpen(dir.path(), o);
    ASSERT_NE(store, nullptr);
    std::atomic<bool> stop_writers{false};
    std::atomic<bool> failed{false};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        std::mt19937 rng(static_cast<unsigned>(w + 1));
        auto& model = models[static_cast<std::size_t>(w)];
        for (std::uint64_t n = 0; !stop_writers.load(std::memory_order_relaxed);
             ++n) {
          const std::string key =
              "w" + std::to_string(w) + "-" + std::to_string(rng() % kKeys);
          const std::uint32_t db = rng() % 2;
          const std::string mkey = std::to_string(db) + "/" + key;
          if (rng() % 8 == 0) {
            const Status s = store->Del(db, key);
            if (!s.ok() && s.code() != StatusCode::kNotFound) failed = true;
            model.erase(mkey);
          } else {
            const std::string value = std::to_string(n);
            if (!store->Set(db, key, value).ok()) failed = true;
            model[mkey] = value;
          }
        }
      });
    }
    const auto until =
        std::chrono::steady_clock::now() + testing::StressDuration(600);
    while (std::chrono::steady_clock::now() < until || checkpoints < 3) {
      const Status s = store->Checkpoint();
      ASSERT_TRUE(s.ok()) << s.ToString();
      ++checkpoints;
    }
    stop_writers = true;
    for (auto& t : writers) t.join();
    EXPECT_FALSE(failed.load());
    ASSERT_TRUE(store->Close().ok());
  }
  auto store = MustOpen(dir.path(), o);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->recovery().from_checkpoint);
  std::size_t expected[2] = {0, 0};
  std::size_t mismatches = 0;
  for (int w = 0; w < kWriters; ++w) {
    for (int k = 0; k < kKeys; ++k) {
      const std::string key = "w" + std::to_string(w) + "-" + std::to_string(k);
      for (std::uint32_t db = 0; db < 2; ++db) {
        const auto& model = models[static_cast<std::size_t>(w)];
        auto it = model.find(std::to_string(db) + "/" + key);
        const std::string want = it == model.end() ? "<absent>" : it->second;
        if (it != model.end()) ++expected[db];
        if (GetOr(*store, db, key) != want) ++mismatches;
      }
    }
  }
  EXPECT_EQ(mismatches, 0u) << "after " << checkpoints << " checkpoints";
  EXPECT_EQ(store->KeyCount(0), expected[0]);
  EXPECT_EQ(store->KeyCount(1), expected[1]);
}

// The checkpoint files in `dir`, by name, sorted.
std::vector<std::string> CheckpointFileNames(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("checkpoint")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Each checkpoint writes generation n+1 (checkpoint-<n+1>); the older files
// are removed only after the new one and its directory entry are synced;
// a failed attempt leaves the previous generation in force and its number
// is not reused; Open loads the newest generation present, a store's
// pre-generation file `checkpoint` counting as generation 0. Planted bugs:
// removing the older files before the directory sync left checkpoint-2
// gone after the failed SyncDir (the file list check fails); Open loading
// the oldest generation read 1 entry instead of 2.
TEST(LogStoreCheckpointTest,
     X12GenerationsReplaceOlderOnlyOnceTheNewerIsDurable) {
  ScratchDir dir;
  CountingEnv env;
  const LogStoreOptions o = CheckpointOptions(&env);
  using Names = std::vector<std::string>;
  {
    auto store = MustOpen(dir.path(), o);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Set(0, "a", "1").ok());
    ASSERT_TRUE(store->Checkpoint().ok());
    EXPECT_EQ(CheckpointFileNames(dir.path()), Names{"checkpoint-1"});
    ASSERT_TRUE(store->Set(0, "a", "2").ok());
    ASSERT_TRUE(store->Checkpoint().ok());
    EXPECT_EQ(CheckpointFileNames(dir.path()), Names{"checkpoint-2"});

    // Generation 3 is renamed into place but its directory sync fails:
    // generation 2 must stay.
    ASSERT_TRUE(store->Set(0, "b", "1").ok());
    env.FailNth(EnvCall::kSyncDir, 1, InternalError("injected dir sync"));
    EXPECT_EQ(store->Checkpoint().message(), "injected dir sync");
    EXPECT_EQ(CheckpointFileNames(dir.path()),
              (Names{"checkpoint-2", "checkpoint-3"}));
    // Generation 4's file sync fails: only its temp file is left.
    ASSERT_TRUE(store->Set(0, "a", "3").ok());
    env.FailNth(EnvCall::kSync, 1, InternalError("injected sync"),
                "checkpoint");
    EXPECT_EQ(store->Checkpoint().message(), "injected sync");
    EXPECT_EQ(CheckpointFileNames(dir.path()),
              (Names{"checkpoint-2", "checkpoint-3", "checkpoint-4.tmp"}));
    ASSERT_TRUE(store->Close().ok());  // flushes; no checkpoint on close
  }
  {
    auto store = MustOpen(dir.path(), o);
    ASSERT_NE(store, nullptr);
    // Generation 3 (a, b), not 2 (a alone); replay brings a=3.
    EXPECT_TRUE(store->recovery().from_checkpoint);
    EXPECT_EQ(store->recovery().checkpoint_entries, 2u);
    EXPECT_EQ(GetOr(*store, 0, "a"), "3");
    EXPECT_EQ(GetOr(*store, 0, "b"), "1");
    // The next generation after the newest (its temp file is rewritten);
    // every other checkpoint file is removed.
    ASSERT_TRUE(store->Checkpoint().ok());
    EXPECT_EQ(CheckpointFileNames(dir.path()), Names{"checkpoint-4"});
    ASSERT_TRUE(store->Close().ok());
  }
  // A store from before generations: its one file `checkpoint` is read as
  // generation 0, and the first checkpoint replaces it with generation 1.
  std::filesystem::rename(dir.File("checkpoint-4"), dir.File("checkpoint"));
  auto store = MustOpen(dir.path(), o);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->recovery().from_checkpoint);
  EXPECT_EQ(store->recovery().checkpoint_entries, 2u);
  EXPECT_EQ(GetOr(*store, 0, "a"), "3");
  ASSERT_TRUE(store->Checkpoint().ok());
  EXPECT_EQ(CheckpointFileNames(dir.path()), Names{"checkpoint-1"});
}

}  // namespace
}  // namespace cairn
