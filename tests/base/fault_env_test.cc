// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The simulated disk the durability sweeps trust (testing/fault_env.h):
// what a power cut keeps and drops, what a kill keeps, and that each fault
// fires where it is armed.

#include "testing/fault_env.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>

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

// A byte rewritten with the value it held at the last sync stays when the
// power is cut in garbage mode (a direct write's rewrite of the durable
// head of its first page); the bytes the write changed become garbage.
TEST(FaultEnvTest, GarbageModeKeepsBytesRewrittenUnchanged) {
  FaultEnv env(5);
  auto file = MustCreate(env, "/sim/a");
  ASSERT_TRUE(env.SyncDir("/sim").ok());
  const std::string synced(1000, 's');
  ASSERT_TRUE(file->WriteAt(0, synced).ok());
  ASSERT_TRUE(file->Sync().ok());
  ASSERT_TRUE(file->WriteAt(0, synced + std::string(3000, 'u')).ok());
  env.PowerCut(CutMode::kGarbageUnsynced);
  env.Reboot();
  const std::string got = env.Contents("/sim/a").value();
  ASSERT_EQ(got.size(), 4000u);
  EXPECT_EQ(got.substr(0, 1000), synced);
  EXPECT_NE(got.substr(1000), std::string(3000, 'u'));
}

// A direct handle takes only whole aligned pages (offset, length and buffer
// address), as O_DIRECT does: anything else fails with EINVAL, changes
// nothing and is counted; a buffered handle of the same file reads
// anywhere. RefuseDirectIo makes NewDirectFile fail as a filesystem without
// O_DIRECT does.
TEST(FaultEnvTest, DirectHandlesTakeAlignedPagesOnly) {
  FaultEnv env;
  auto made = env.NewDirectFile("/sim/d", FileOpenMode::kCreateExclusive);
  ASSERT_TRUE(made.ok()) << made.status().message();
  FileHandle& file = **made;
  struct alignas(kDirectIoAlignment) Pages {
    char bytes[2 * kDirectIoAlignment];
  };
  auto pages = std::make_unique<Pages>();
  std::memset(pages->bytes, 'p', sizeof(pages->bytes));
  const std::string_view page(pages->bytes, kDirectIoAlignment);
  EXPECT_TRUE(file.WriteAt(kDirectIoAlignment, page).ok());
  EXPECT_EQ(env.misaligned(), 0u);
  EXPECT_EQ(file.WriteAt(100, page).code(), StatusCode::kInternal);
  EXPECT_FALSE(file.WriteAt(0, page.substr(0, 100)).ok());
  EXPECT_FALSE(
      file.WriteAt(0, std::string_view(pages->bytes + 1, kDirectIoAlignment))
          .ok());
  EXPECT_FALSE(file.Append(page.substr(0, 10)).ok());
  EXPECT_FALSE(
      file.ReadAt(1, std::span<char>(pages->bytes, kDirectIoAlignment)).ok());
  EXPECT_EQ(env.misaligned(), 5u);
  EXPECT_EQ(env.Contents("/sim/d").value(),
            std::string(kDirectIoAlignment, '\0') + std::string(page));
  Result<std::size_t> read =
      file.ReadAt(0, std::span<char>(pages->bytes, kDirectIoAlignment));
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, kDirectIoAlignment);

  auto buffered = env.NewFile("/sim/d", FileOpenMode::kReadOnly);
  ASSERT_TRUE(buffered.ok());
  char three[3];
  read = (*buffered)->ReadAt(kDirectIoAlignment + 1, three);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(std::string_view(three, *read), "ppp");
  EXPECT_EQ(env.misaligned(), 5u);

  env.RefuseDirectIo();
  auto refused = env.NewDirectFile("/sim/e", FileOpenMode::kCreateExclusive);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("/sim/e"), std::string::npos);
  EXPECT_TRUE(env.NewFile("/sim/e", FileOpenMode::kCreateExclusive).ok());
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
