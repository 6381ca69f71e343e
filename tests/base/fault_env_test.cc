// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The simulated disk the durability sweeps trust (testing/fault_env.h):
// what a power cut keeps and drops, what a kill keeps, and that each fault
// fires where it is armed.

#include "testing/fault_env.h"

#include <cerrno>
#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace cairn {
namespace {

using testing::CutMode;
using testing::EnvCall;
using testing::FaultEnv;

std::unique_ptr<FileHandle> MustCreate(FaultEnv& env, const std::string& path) {
  auto file = env.NewFile(path, FileOpenMode::kCreateExclusive);
  EXPECT_TRUE(file.ok()) << file.status().message();
  return file.ok() ? std::move(file).value() : nullptr;
}

TEST(FaultEnvTest, PowerCutKeepsSyncedBytesAndSyncedNamesOnly) {
  FaultEnv env;
  auto file = MustCreate(env, "/sim/a");
  ASSERT_TRUE(file->Append("synced").ok());
  ASSERT_TRUE(file->Sync().ok());
  ASSERT_TRUE(file->Append("-lost").ok());
  ASSERT_TRUE(env.SyncDir("/sim").ok());
  auto unnamed = MustCreate(env, "/sim/b");  // entry never synced
  ASSERT_TRUE(unnamed->Append("x").ok());
  ASSERT_TRUE(unnamed->Sync().ok());
  env.PowerCut(CutMode::kDropUnsynced);
  EXPECT_TRUE(env.dead());
  EXPECT_FALSE(file->Append("after").ok());
  env.Reboot();
  EXPECT_EQ(env.Contents("/sim/a"), "synced");
  EXPECT_EQ(env.Contents("/sim/b"), std::nullopt);
  // Handles from before the cut stay dead.
  EXPECT_FALSE(file->Sync().ok());
}

TEST(FaultEnvTest, RenameIsUndoneUntilTheDirectoryIsSynced) {
  FaultEnv env;
  ASSERT_TRUE(env.SetContents("/sim/f", "old").ok());
  auto tmp = MustCreate(env, "/sim/f.tmp");
  ASSERT_TRUE(tmp->Append("new").ok());
  ASSERT_TRUE(tmp->Sync().ok());
  ASSERT_TRUE(env.Rename("/sim/f.tmp", "/sim/f").ok());
  EXPECT_EQ(env.Contents("/sim/f"), "new");
  env.PowerCut(CutMode::kDropUnsynced);
  env.Reboot();
  EXPECT_EQ(env.Contents("/sim/f"), "old");

  auto again = MustCreate(env, "/sim/f.tmp");
  ASSERT_TRUE(again->Append("new").ok());
  ASSERT_TRUE(again->Sync().ok());
  ASSERT_TRUE(env.Rename("/sim/f.tmp", "/sim/f").ok());
  ASSERT_TRUE(env.SyncDir("/sim").ok());
  env.PowerCut(CutMode::kGarbageUnsynced);
  env.Reboot();
  EXPECT_EQ(env.Contents("/sim/f"), "new");
  EXPECT_EQ(env.Contents("/sim/f.tmp"), std::nullopt);
}

TEST(FaultEnvTest, NewDirectoryVanishesWithItsFilesUnlessItsParentIsSynced) {
  FaultEnv env;
  ASSERT_TRUE(env.CreateDir("/sim/d").ok());
  auto file = MustCreate(env, "/sim/d/x");
  ASSERT_TRUE(file->Append("data").ok());
  ASSERT_TRUE(file->Sync().ok());
  ASSERT_TRUE(env.SyncDir("/sim/d").ok());  // not /sim
  env.PowerCut(CutMode::kDropUnsynced);
  env.Reboot();
  EXPECT_FALSE(*env.FileExists("/sim/d"));
  EXPECT_EQ(env.Contents("/sim/d/x"), std::nullopt);
}

TEST(FaultEnvTest, GarbageAndTearModesOnlyTouchUnsyncedBytes) {
  for (CutMode mode : {CutMode::kGarbageUnsynced, CutMode::kTearUnsynced}) {
    FaultEnv env(3);
    auto file = MustCreate(env, "/sim/a");
    ASSERT_TRUE(env.SyncDir("/sim").ok());
    const std::string synced(1000, 's');
    ASSERT_TRUE(file->Append(synced).ok());
    ASSERT_TRUE(file->Sync().ok());
    ASSERT_TRUE(file->Append(std::string(3000, 'u')).ok());
    env.PowerCut(mode);
    env.Reboot();
    const std::string got = env.Contents("/sim/a").value();
    EXPECT_EQ(got.substr(0, 1000), synced) << testing::CutModeName(mode);
    if (mode == CutMode::kGarbageUnsynced) {
      EXPECT_EQ(got.size(), 4000u);
      EXPECT_NE(got.substr(1000), std::string(3000, 'u'));
    } else {
      EXPECT_LE(got.size(), 4000u);  // a prefix of the unsynced write
      EXPECT_EQ(got.substr(1000), std::string(got.size() - 1000, 'u'));
    }
  }
}

TEST(FaultEnvTest, KillKeepsEveryWrittenByte) {
  FaultEnv env;
  auto file = MustCreate(env, "/sim/a");
  ASSERT_TRUE(file->Append("unsynced").ok());
  env.Kill();
  EXPECT_FALSE(file->Append("more").ok());
  env.Reboot();
  EXPECT_EQ(env.Contents("/sim/a"), "unsynced");
}

TEST(FaultEnvTest, FaultsFireOnTheArmedCallOnly) {
  FaultEnv env;
  auto file = MustCreate(env, "/sim/a");
  env.FailCall(2, ENOSPC, EnvCall::kAppend);
  EXPECT_TRUE(file->Append("1").ok());
  Status full = file->Append("2");
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted) << full.message();
  EXPECT_TRUE(file->Append("3").ok());
  EXPECT_EQ(env.Contents("/sim/a"), "13");

  env.TearWrite(1, 2);
  EXPECT_FALSE(file->Append("abcd").ok());
  EXPECT_EQ(env.Contents("/sim/a"), "13ab");

  env.FailFrom(1, EIO, EnvCall::kSync);
  EXPECT_FALSE(file->Sync().ok());
  EXPECT_FALSE(file->Sync().ok());
  env.ClearFaults();
  EXPECT_TRUE(file->Sync().ok());

  env.CutAfterSync(1, CutMode::kDropUnsynced);
  ASSERT_TRUE(file->Append("x").ok());
  EXPECT_TRUE(file->Sync().ok());  // the sync itself succeeds
  EXPECT_TRUE(env.dead());
  EXPECT_EQ(env.faults_fired(), 5u);
}

TEST(FaultEnvTest, LocksAreExclusiveAndDieWithTheProcess) {
  FaultEnv env;
  auto lock = env.LockFile("/sim/LOCK");
  ASSERT_TRUE(lock.ok());
  EXPECT_EQ(env.LockFile("/sim/LOCK").status().code(),
            StatusCode::kFailedPrecondition);
  env.Kill();
  env.Reboot();
  auto relock = env.LockFile("/sim/LOCK");
  EXPECT_TRUE(relock.ok()) << relock.status().message();
  lock->reset();  // the dead process's lock lets go of nothing new
  EXPECT_EQ(env.LockFile("/sim/LOCK").status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace cairn
