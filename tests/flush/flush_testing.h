// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Shared by the flush tests: the scratch directory and whole-file helpers
// every file test uses, and SyncGateEnv, which holds file syncs so a test
// can stop a flush inside its sync.

#ifndef CAIRN_TESTS_FLUSH_FLUSH_TESTING_H_
#define CAIRN_TESTS_FLUSH_FLUSH_TESTING_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cairn/base/env.h"
#include "cairn/flush/internal/checkpoint.h"
#include "testing/scratch_dir.h"

namespace cairn::testing {

// The path of the checkpoint in force in store `dir` (its newest
// generation), or "" if it has none.
inline std::string NewestCheckpoint(const std::string& dir) {
  Result<flush_internal::CheckpointFiles> files =
      flush_internal::ListCheckpoints(*Env::Default(), dir);
  if (!files.ok() || !files->any) return "";
  return flush_internal::CheckpointPath(dir, files->newest);
}

// An Env over another whose file syncs can be held: while holding, each
// Sync waits for a permit, so a test can stop a flush inside its sync.
class SyncGateEnv final : public Env {
 public:
  explicit SyncGateEnv(Env* base) : base_(base) {}

  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    holding_ = true;
  }
  // Lets one held sync (now or later) go on.
  void Permit() {
    std::lock_guard<std::mutex> lock(mu_);
    ++permits_;
    cv_.notify_all();
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    holding_ = false;
    cv_.notify_all();
  }
  // Waits until `n` syncs have entered the gate since construction; false
  // after 10 s without them (the test then fails rather than hangs).
  [[nodiscard]] bool WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10),
                        [&] { return entered_ >= n; });
  }

  // Makes every later sync take at least `delay` (a slow disk).
  void SetSyncDelay(std::chrono::microseconds delay) {
    std::lock_guard<std::mutex> lock(mu_);
    delay_ = delay;
  }

  // Syncs that have entered the gate since construction.
  int Entered() {
    std::lock_guard<std::mutex> lock(mu_);
    return entered_;
  }

  Result<std::unique_ptr<FileHandle>> NewFile(const std::string& path,
                                              FileOpenMode mode) override {
    auto file = base_->NewFile(path, mode);
    if (!file.ok()) return file;
    return std::unique_ptr<FileHandle>(new File(this, std::move(file).value()));
  }
  Status Rename(const std::string& from, const std::string& to) override {
    return base_->Rename(from, to);
  }
  Status SyncDir(const std::string& d) override { return base_->SyncDir(d); }
  Status Remove(const std::string& p) override { return base_->Remove(p); }
  Status CreateDir(const std::string& d) override {
    return base_->CreateDir(d);
  }
  Result<std::vector<std::string>> List(const std::string& d) override {
    return base_->List(d);
  }
  Result<std::uint64_t> FileSize(const std::string& p) override {
    return base_->FileSize(p);
  }
  Result<bool> FileExists(const std::string& p) override {
    return base_->FileExists(p);
  }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& p) override {
    return base_->LockFile(p);
  }
  Status UnlockFile(std::unique_ptr<FileLock> lock) override {
    return base_->UnlockFile(std::move(lock));
  }

 private:
  class File final : public FileHandle {
   public:
    File(SyncGateEnv* env, std::unique_ptr<FileHandle> base)
        : FileHandle(base->path()), env_(env), base_(std::move(base)) {}
    Result<std::size_t> ReadAt(std::uint64_t offset,
                               std::span<char> out) const override {
      return base_->ReadAt(offset, out);
    }
    Status WriteAt(std::uint64_t offset, std::string_view data) override {
      return base_->WriteAt(offset, data);
    }
    Status Append(std::string_view data) override {
      return base_->Append(data);
    }
    Status Sync() override {
      env_->Gate();
      return base_->Sync();
    }
    Status Truncate(std::uint64_t bytes) override {
      return base_->Truncate(bytes);
    }
    Result<std::uint64_t> Size() const override { return base_->Size(); }
    Status Close() override { return base_->Close(); }

   private:
    SyncGateEnv* const env_;
    const std::unique_ptr<FileHandle> base_;
  };

  void Gate() {
    std::unique_lock<std::mutex> lock(mu_);
    if (delay_.count() > 0) {
      const std::chrono::microseconds delay = delay_;
      lock.unlock();
      std::this_thread::sleep_for(delay);
      lock.lock();
    }
    if (!holding_) return;
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return permits_ > 0 || !holding_; });
    if (permits_ > 0) --permits_;
  }

  Env* const base_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool holding_ = false;
  int permits_ = 0;
  int entered_ = 0;
  std::chrono::microseconds delay_{0};
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_FLUSH_FLUSH_TESTING_H_
