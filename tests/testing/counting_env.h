// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// CountingEnv: an Env for tests that wraps another (Env::Default() unless
// given), records every call it passes on (its kind and path), and can make
// a chosen call fail or tear:
//
//   CountingEnv env;
//   env.FailNth(EnvCall::kSync, 2);            // the 2nd Sync from now fails
//   env.TearNth(EnvCall::kWriteAt, 1, 100);    // the next WriteAt writes its
//                                              // first 100 bytes, then fails
//   env.FailNth(EnvCall::kRename, 1, status, "checkpoint");  // only paths
//                                              // containing "checkpoint"
//   ... run the format with options.env = &env ...
//   EXPECT_EQ(env.count(EnvCall::kSync), 4);
//
// A failed call never reaches the wrapped Env; a torn one passes on a
// prefix and then reports the failure. Each fault fires once. Thread-safe:
// the journal and the faults sit behind one mutex.

#ifndef CAIRN_TESTS_TESTING_COUNTING_ENV_H_
#define CAIRN_TESTS_TESTING_COUNTING_ENV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/base/env.h"
#include "cairn/base/status.h"

namespace cairn::testing {

// One kind of Env or FileHandle call.
enum class EnvCall : std::uint8_t {
  // Env
  kNewFile,
  kRename,
  kSyncDir,
  kRemove,
  kCreateDir,
  kList,
  kFileSize,
  kFileExists,
  kLockFile,
  kUnlockFile,
  // FileHandle
  kReadAt,
  kWriteAt,
  kAppend,
  kSync,
  kTruncate,
  kSize,
  kClose,
};

class CountingEnv final : public Env {
 public:
  struct Call {
    EnvCall call;
    std::string path;  // the file's path; for Rename, the source
  };

  explicit CountingEnv(Env* base = Env::Default()) : base_(base) {}

  // Calls of this kind so far, only those on paths containing `path_part`
  // if it is not empty.
  std::uint64_t count(EnvCall call, std::string_view path_part = {}) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::uint64_t n = 0;
    for (const Call& c : journal_) {
      if (c.call == call && Matches(c.path, path_part)) ++n;
    }
    return n;
  }
  std::vector<Call> journal() const {
    std::lock_guard<std::mutex> lock(mu_);
    return journal_;
  }

  // The nth call of this kind from now (1: the next one), on a path
  // containing `path_part` if given, fails with `status` and does nothing.
  void FailNth(EnvCall call, std::uint64_t nth,
               Status status = InternalError("injected failure"),
               std::string path_part = {}) {
    Arm(call, nth, std::nullopt, std::move(status), std::move(path_part));
  }
  // As FailNth for a WriteAt or Append, which first writes the first
  // `keep_bytes` of its data (all of it if shorter): a torn write.
  void TearNth(EnvCall call, std::uint64_t nth, std::size_t keep_bytes,
               Status status = InternalError("injected torn write"),
               std::string path_part = {}) {
    Arm(call, nth, keep_bytes, std::move(status), std::move(path_part));
  }

  Result<std::unique_ptr<FileHandle>> NewFile(const std::string& path,
                                              FileOpenMode mode) override {
    if (auto fault = Enter(EnvCall::kNewFile, path)) return fault->status;
    Result<std::unique_ptr<FileHandle>> file = base_->NewFile(path, mode);
    if (!file.ok()) return file;
    return std::unique_ptr<FileHandle>(
        new CountingFile(this, std::move(file).value()));
  }
  // Counted and failed as a NewFile.
  Result<std::unique_ptr<FileHandle>> NewDirectFile(
      const std::string& path, FileOpenMode mode) override {
    if (auto fault = Enter(EnvCall::kNewFile, path)) return fault->status;
    Result<std::unique_ptr<FileHandle>> file = base_->NewDirectFile(path, mode);
    if (!file.ok()) return file;
    return std::unique_ptr<FileHandle>(
        new CountingFile(this, std::move(file).value()));
  }
  Status Rename(const std::string& from, const std::string& to) override {
    if (auto fault = Enter(EnvCall::kRename, from)) return fault->status;
    return base_->Rename(from, to);
  }
  Status SyncDir(const std::string& dir) override {
    if (auto fault = Enter(EnvCall::kSyncDir, dir)) return fault->status;
    return base_->SyncDir(dir);
  }
  Status Remove(const std::string& path) override {
    if (auto fault = Enter(EnvCall::kRemove, path)) return fault->status;
    return base_->Remove(path);
  }
  Status CreateDir(const std::string& dir) override {
    if (auto fault = Enter(EnvCall::kCreateDir, dir)) return fault->status;
    return base_->CreateDir(dir);
  }
  Result<std::vector<std::string>> List(const std::string& dir) override {
    if (auto fault = Enter(EnvCall::kList, dir)) return fault->status;
    return base_->List(dir);
  }
  Result<std::uint64_t> FileSize(const std::string& path) override {
    if (auto fault = Enter(EnvCall::kFileSize, path)) return fault->status;
    return base_->FileSize(path);
  }
  Result<bool> FileExists(const std::string& path) override {
    if (auto fault = Enter(EnvCall::kFileExists, path)) return fault->status;
    return base_->FileExists(path);
  }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override {
    if (auto fault = Enter(EnvCall::kLockFile, path)) return fault->status;
    return base_->LockFile(path);
  }
  Status UnlockFile(std::unique_ptr<FileLock> lock) override {
    const std::string path = lock != nullptr ? lock->path() : std::string();
    if (auto fault = Enter(EnvCall::kUnlockFile, path)) return fault->status;
    return base_->UnlockFile(std::move(lock));
  }

 private:
  struct Fault {
    EnvCall call;
    std::uint64_t calls_left;  // matching calls until it fires
    std::optional<std::size_t> keep_bytes;
    Status status;
    std::string path_part;
  };

  class CountingFile final : public FileHandle {
   public:
    CountingFile(CountingEnv* env, std::unique_ptr<FileHandle> base)
        : FileHandle(base->path()), env_(env), base_(std::move(base)) {}

    Result<std::size_t> ReadAt(std::uint64_t offset,
                               std::span<char> out) const override {
      if (auto fault = env_->Enter(EnvCall::kReadAt, path())) {
        return fault->status;
      }
      return base_->ReadAt(offset, out);
    }
    Status WriteAt(std::uint64_t offset, std::string_view data) override {
      if (auto fault = env_->Enter(EnvCall::kWriteAt, path())) {
        return Tear(*fault, data, [&](std::string_view prefix) {
          return base_->WriteAt(offset, prefix);
        });
      }
      return base_->WriteAt(offset, data);
    }
    Status Append(std::string_view data) override {
      if (auto fault = env_->Enter(EnvCall::kAppend, path())) {
        return Tear(*fault, data, [&](std::string_view prefix) {
          return base_->Append(prefix);
        });
      }
      return base_->Append(data);
    }
    Status Sync() override {
      if (auto fault = env_->Enter(EnvCall::kSync, path())) {
        return fault->status;
      }
      return base_->Sync();
    }
    Status Truncate(std::uint64_t bytes) override {
      if (auto fault = env_->Enter(EnvCall::kTruncate, path())) {
        return fault->status;
      }
      return base_->Truncate(bytes);
    }
    Result<std::uint64_t> Size() const override {
      if (auto fault = env_->Enter(EnvCall::kSize, path())) {
        return fault->status;
      }
      return base_->Size();
    }
    Status Close() override {
      if (auto fault = env_->Enter(EnvCall::kClose, path())) {
        return fault->status;
      }
      return base_->Close();
    }

   private:
    // Writes the fault's prefix of `data` (if it tears) and reports it.
    template <typename Write>
    static Status Tear(const Fault& fault, std::string_view data,
                       Write&& write) {
      if (fault.keep_bytes.has_value()) {
        Status wrote = write(data.substr(0, *fault.keep_bytes));
        if (!wrote.ok()) return wrote;
      }
      return fault.status;
    }

    CountingEnv* const env_;
    const std::unique_ptr<FileHandle> base_;
  };

  static bool Matches(std::string_view path, std::string_view part) {
    return part.empty() || path.find(part) != std::string_view::npos;
  }

  void Arm(EnvCall call, std::uint64_t nth,
           std::optional<std::size_t> keep_bytes, Status status,
           std::string path_part) {
    std::lock_guard<std::mutex> lock(mu_);
    faults_.push_back(Fault{call, nth == 0 ? 1 : nth, keep_bytes,
                            std::move(status), std::move(path_part)});
  }

  // Records the call; returns the fault that fires on it, if one does.
  std::optional<Fault> Enter(EnvCall call, const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    journal_.push_back(Call{call, path});
    // Every armed fault sees the call; one fires per call, the others that
    // come due wait for the next.
    auto due = faults_.end();
    for (auto it = faults_.begin(); it != faults_.end(); ++it) {
      if (it->call != call || !Matches(path, it->path_part)) continue;
      if (--it->calls_left > 0) continue;
      if (due == faults_.end()) {
        due = it;
      } else {
        it->calls_left = 1;
      }
    }
    if (due == faults_.end()) return std::nullopt;
    Fault fired = std::move(*due);
    faults_.erase(due);
    return fired;
  }

  Env* const base_;
  mutable std::mutex mu_;
  std::vector<Call> journal_;
  std::vector<Fault> faults_;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_TESTING_COUNTING_ENV_H_
