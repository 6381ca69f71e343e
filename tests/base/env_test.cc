// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The contract of Env::Default() (the POSIX file layer), and of the test
// Env that wraps it (tests/testing/counting_env.h).

#include "cairn/base/env.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "testing/counting_env.h"
#include "testing/scratch_dir.h"

namespace cairn {
namespace {

using testing::CountingEnv;
using testing::EnvCall;
using testing::ScratchDir;

std::unique_ptr<FileHandle> MustOpen(const std::string& path,
                                     FileOpenMode mode) {
  auto file = Env::Default()->NewFile(path, mode);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  return file.ok() ? std::move(file).value() : nullptr;
}

std::string ReadRange(const FileHandle& file, std::uint64_t offset,
                      std::size_t bytes) {
  std::string out(bytes, '\0');
  auto n = file.ReadAt(offset, std::span<char>(out.data(), out.size()));
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  out.resize(n.ok() ? *n : 0);
  return out;
}

bool MessageNames(const Status& s, const std::string& path) {
  return s.message().find(path) != std::string_view::npos;
}

TEST(EnvTest, CreateExclusiveFailsOnAnExistingFile) {
  ScratchDir dir("env");
  const std::string path = dir.File("a");
  ASSERT_NE(MustOpen(path, FileOpenMode::kCreateExclusive), nullptr);
  auto again = Env::Default()->NewFile(path, FileOpenMode::kCreateExclusive);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(MessageNames(again.status(), path)) << again.status().ToString();
}

TEST(EnvTest, OpeningAMissingFileIsNotFoundAndNamesIt) {
  ScratchDir dir("env");
  const std::string path = dir.File("missing");
  for (FileOpenMode mode :
       {FileOpenMode::kReadWrite, FileOpenMode::kReadOnly}) {
    auto file = Env::Default()->NewFile(path, mode);
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
    EXPECT_TRUE(MessageNames(file.status(), path));
  }
  auto nested = Env::Default()->NewFile(dir.File("no/such"),
                                        FileOpenMode::kCreateExclusive);
  EXPECT_EQ(nested.status().code(), StatusCode::kNotFound);
}

TEST(EnvTest, ADirectoryIsNotAFile) {
  ScratchDir dir("env");
  for (FileOpenMode mode :
       {FileOpenMode::kReadWrite, FileOpenMode::kReadOnly}) {
    auto file = Env::Default()->NewFile(dir.path(), mode);
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(EnvTest, PositionalWritesReadBackAndReadsStopAtTheEnd) {
  ScratchDir dir("env");
  auto file = MustOpen(dir.File("a"), FileOpenMode::kCreateExclusive);
  ASSERT_NE(file, nullptr);
  ASSERT_TRUE(file->WriteAt(0, "hello").ok());
  ASSERT_TRUE(file->WriteAt(10, "world").ok());  // leaves a hole of zeros
  EXPECT_EQ(*file->Size(), 15u);
  EXPECT_EQ(ReadRange(*file, 0, 15), std::string("hello\0\0\0\0\0world", 15));
  EXPECT_EQ(ReadRange(*file, 12, 100), "rld");  // short only at the end
  EXPECT_EQ(ReadRange(*file, 1000, 8), "");
  ASSERT_TRUE(file->WriteAt(1, "EL").ok());
  EXPECT_EQ(ReadRange(*file, 0, 5), "hELlo");
  EXPECT_TRUE(file->Sync().ok());
  EXPECT_EQ(Env::Default()->FileSize(dir.File("a")).value(), 15u);
}

TEST(EnvTest, AppendWritesAtTheEndAndWriteAtLeavesItsPosition) {
  ScratchDir dir("env");
  const std::string path = dir.File("a");
  {
    auto file = MustOpen(path, FileOpenMode::kCreateExclusive);
    ASSERT_TRUE(file->Append("abc").ok());
    ASSERT_TRUE(file->WriteAt(0, "X").ok());
    ASSERT_TRUE(file->Append("def").ok());
    EXPECT_EQ(ReadRange(*file, 0, 100), "Xbcdef");
    ASSERT_TRUE(file->Close().ok());
  }
  // A reopened file appends after what it holds.
  auto file = MustOpen(path, FileOpenMode::kReadWrite);
  ASSERT_TRUE(file->Append("gh").ok());
  EXPECT_EQ(ReadRange(*file, 0, 100), "Xbcdefgh");
}

TEST(EnvTest, TruncateCutsTheFileAndPullsAppendBack) {
  ScratchDir dir("env");
  auto file = MustOpen(dir.File("a"), FileOpenMode::kCreateExclusive);
  ASSERT_TRUE(file->Append("abcdef").ok());
  ASSERT_TRUE(file->Truncate(2).ok());
  EXPECT_EQ(*file->Size(), 2u);
  ASSERT_TRUE(file->Append("Z").ok());
  EXPECT_EQ(ReadRange(*file, 0, 100), "abZ");
  ASSERT_TRUE(file->Truncate(5).ok());  // extends with zeros
  EXPECT_EQ(ReadRange(*file, 0, 100), std::string("abZ\0\0", 5));
}

TEST(EnvTest, CreateOrTruncateEmptiesAnExistingFile) {
  ScratchDir dir("env");
  const std::string path = dir.File("a");
  ASSERT_TRUE(
      MustOpen(path, FileOpenMode::kCreateExclusive)->Append("old").ok());
  auto file = MustOpen(path, FileOpenMode::kCreateOrTruncate);
  EXPECT_EQ(*file->Size(), 0u);
  ASSERT_TRUE(file->Append("new").ok());
  EXPECT_EQ(ReadRange(*file, 0, 100), "new");
}

TEST(EnvTest, ReadOnlyRefusesWritesAndAClosedFileRefusesEverything) {
  ScratchDir dir("env");
  const std::string path = dir.File("a");
  ASSERT_TRUE(MustOpen(path, FileOpenMode::kCreateExclusive)->Append("x").ok());
  auto file = MustOpen(path, FileOpenMode::kReadOnly);
  Status write = file->WriteAt(0, "y");
  EXPECT_FALSE(write.ok());
  EXPECT_TRUE(MessageNames(write, path)) << write.ToString();
  EXPECT_EQ(ReadRange(*file, 0, 10), "x");
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ(file->Close().code(), StatusCode::kFailedPrecondition);
  char byte;
  EXPECT_EQ(file->ReadAt(0, std::span<char>(&byte, 1)).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(file->Sync().code(), StatusCode::kFailedPrecondition);
}

TEST(EnvTest, RenameListExistsSizeAndRemove) {
  ScratchDir dir("env");
  Env& env = *Env::Default();
  ASSERT_TRUE(MustOpen(dir.File("b"), FileOpenMode::kCreateExclusive)
                  ->Append("12345")
                  .ok());
  ASSERT_NE(MustOpen(dir.File("a"), FileOpenMode::kCreateExclusive), nullptr);
  EXPECT_EQ(*env.List(dir.path()), (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(env.Rename(dir.File("b"), dir.File("c")).ok());
  EXPECT_EQ(*env.List(dir.path()), (std::vector<std::string>{"a", "c"}));
  EXPECT_FALSE(*env.FileExists(dir.File("b")));
  EXPECT_TRUE(*env.FileExists(dir.File("c")));
  EXPECT_FALSE(*env.FileExists(dir.File("a/under/a/file")));
  EXPECT_EQ(*env.FileSize(dir.File("c")), 5u);
  ASSERT_TRUE(env.SyncDir(dir.path()).ok());
  ASSERT_TRUE(env.Remove(dir.File("a")).ok());
  EXPECT_EQ(*env.List(dir.path()), (std::vector<std::string>{"c"}));

  // Every failure names its path.
  Status s = env.Remove(dir.File("a"));
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_TRUE(MessageNames(s, dir.File("a")));
  s = env.Rename(dir.File("a"), dir.File("d"));
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_TRUE(MessageNames(s, dir.File("a")));
  EXPECT_EQ(env.FileSize(dir.File("a")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(env.List(dir.File("a")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(env.SyncDir(dir.File("a")).code(), StatusCode::kNotFound);
}

TEST(EnvTest, CreateDirMakesOneLevel) {
  ScratchDir dir("env");
  Env& env = *Env::Default();
  ASSERT_TRUE(env.CreateDir(dir.File("sub")).ok());
  EXPECT_TRUE(*env.FileExists(dir.File("sub")));
  EXPECT_EQ(env.CreateDir(dir.File("sub")).code(), StatusCode::kAlreadyExists);
  Status nested = env.CreateDir(dir.File("x/y"));
  EXPECT_EQ(nested.code(), StatusCode::kNotFound);
  EXPECT_TRUE(MessageNames(nested, dir.File("x/y")));
}

TEST(EnvTest, ALockExcludesASecondHolderUntilReleased) {
  ScratchDir dir("env");
  Env& env = *Env::Default();
  const std::string path = dir.File("LOCK");
  auto first = env.LockFile(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = env.LockFile(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(MessageNames(second.status(), path));
  ASSERT_TRUE(env.UnlockFile(std::move(first).value()).ok());
  auto third = env.LockFile(path);
  ASSERT_TRUE(third.ok());
  third.value().reset();  // destroying a lock releases it too
  EXPECT_TRUE(env.LockFile(path).ok());
}

TEST(EnvTest, IoErrorPicksTheCodeFromErrnoAndNamesThePath) {
  EXPECT_EQ(IoError("cannot write", "/p", ENOSPC).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(IoError("cannot write", "/p", EDQUOT).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(IoError("cannot open", "/p", ENOENT).code(), StatusCode::kNotFound);
  EXPECT_EQ(IoError("cannot create", "/p", EEXIST).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(IoError("cannot open", "/p", EISDIR).code(),
            StatusCode::kInvalidArgument);
  const Status io = IoError("cannot sync", "/dir/file", EIO);
  EXPECT_EQ(io.code(), StatusCode::kInternal);
  EXPECT_EQ(io.message().substr(0, 20), "cannot sync /dir/fil");
  EXPECT_EQ(DirectoryOf("/dir/file"), "/dir");
  EXPECT_EQ(DirectoryOf("file"), ".");
  EXPECT_EQ(DirectoryOf("/file"), "/");
}

TEST(EnvTest, ReadWholeFileReadsEveryByte) {
  ScratchDir dir("env");
  const std::string path = dir.File("a");
  const std::string bytes(100000, 'q');
  ASSERT_TRUE(
      MustOpen(path, FileOpenMode::kCreateExclusive)->Append(bytes).ok());
  std::string out;
  ASSERT_TRUE(ReadWholeFile(*Env::Default(), path, &out).ok());
  EXPECT_EQ(out, bytes);
  std::vector<char> as_vector;
  ASSERT_TRUE(ReadWholeFile(*Env::Default(), path, &as_vector).ok());
  EXPECT_EQ(as_vector.size(), bytes.size());
  EXPECT_EQ(ReadWholeFile(*Env::Default(), dir.File("b"), &out).code(),
            StatusCode::kNotFound);
}

// Direct I/O through the POSIX Env (skipped where the scratch directory's
// filesystem refuses O_DIRECT, which must then be kInvalidArgument naming
// the path): whole aligned pages write, sync and read back, through the
// direct handle and through a buffered one of the same file, which Linux
// keeps coherent with the direct writes.
TEST(EnvTest, DirectFileWritesAndReadsAlignedPages) {
  ScratchDir dir("env");
  const std::string path = dir.File("direct");
  auto made =
      Env::Default()->NewDirectFile(path, FileOpenMode::kCreateExclusive);
  if (made.status().code() == StatusCode::kInvalidArgument) {
    EXPECT_NE(made.status().message().find(path), std::string::npos);
    GTEST_SKIP() << made.status().message();
  }
  ASSERT_TRUE(made.ok()) << made.status().message();
  FileHandle& file = **made;
  auto buffered = MustOpen(path, FileOpenMode::kReadOnly);
  ASSERT_NE(buffered, nullptr);
  EXPECT_EQ(ReadRange(*buffered, 0, 10), "");  // caches the empty file
  struct alignas(kDirectIoAlignment) Pages {
    char bytes[2 * kDirectIoAlignment];
  };
  auto pages = std::make_unique<Pages>();
  std::memset(pages->bytes, 'd', sizeof(pages->bytes));
  ASSERT_TRUE(file.WriteAt(kDirectIoAlignment,
                           std::string_view(pages->bytes, sizeof(pages->bytes)))
                  .ok());
  ASSERT_TRUE(file.Sync().ok());
  EXPECT_EQ(ReadRange(*buffered, 0, 3 * kDirectIoAlignment),
            std::string(kDirectIoAlignment, '\0') +
                std::string(2 * kDirectIoAlignment, 'd'));
  // Written again directly: the buffered handle sees the new bytes, not
  // its cached pages.
  std::memset(pages->bytes, 'e', kDirectIoAlignment);
  ASSERT_TRUE(file.WriteAt(kDirectIoAlignment,
                           std::string_view(pages->bytes, kDirectIoAlignment))
                  .ok());
  EXPECT_EQ(ReadRange(*buffered, kDirectIoAlignment - 1, 3),
            std::string("\0ee", 3));
  std::memset(pages->bytes, 0, sizeof(pages->bytes));
  Result<std::size_t> read = file.ReadAt(
      kDirectIoAlignment, std::span<char>(pages->bytes, sizeof(pages->bytes)));
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(*read, 2 * kDirectIoAlignment);
  EXPECT_EQ(std::string_view(pages->bytes, sizeof(pages->bytes)),
            std::string(kDirectIoAlignment, 'e') +
                std::string(kDirectIoAlignment, 'd'));
}

TEST(CountingEnvTest, CountsCallsAndFailsOrTearsTheChosenOne) {
  ScratchDir dir("env");
  CountingEnv env;
  const std::string path = dir.File("a");
  auto made = env.NewFile(path, FileOpenMode::kCreateExclusive);
  ASSERT_TRUE(made.ok());
  FileHandle& file = **made;
  env.FailNth(EnvCall::kSync, 2, InternalError("boom"));
  EXPECT_TRUE(file.Sync().ok());
  EXPECT_EQ(file.Sync().message(), "boom");
  EXPECT_TRUE(file.Sync().ok());  // a fault fires once
  EXPECT_EQ(env.count(EnvCall::kSync), 3u);

  env.TearNth(EnvCall::kAppend, 1, 3);
  EXPECT_FALSE(file.Append("abcdef").ok());
  EXPECT_EQ(ReadRange(file, 0, 100), "abc");  // only the prefix landed
  env.TearNth(EnvCall::kWriteAt, 1, 0);
  EXPECT_FALSE(file.WriteAt(0, "xyz").ok());
  EXPECT_EQ(ReadRange(file, 0, 100), "abc");

  // A path filter: only calls on matching paths count down.
  env.FailNth(EnvCall::kRename, 1, InternalError("no"), "other");
  ASSERT_TRUE(env.Rename(path, dir.File("b")).ok());
  ASSERT_TRUE(
      env.NewFile(dir.File("other"), FileOpenMode::kCreateExclusive).ok());
  EXPECT_FALSE(env.Rename(dir.File("other"), dir.File("c")).ok());
  EXPECT_EQ(env.count(EnvCall::kRename), 2u);
  EXPECT_EQ(env.count(EnvCall::kRename, "other"), 1u);
  EXPECT_EQ(env.count(EnvCall::kNewFile), 2u);
}

}  // namespace
}  // namespace cairn
