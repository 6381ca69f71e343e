// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ClockEnv: an Env for metrics tests that wraps another and advances a
// ManualClock inside each file Sync by the next duration queued with
// QueueSyncs (none queued: no advance), so a component that times its
// syncs on that clock reports latencies the test chose.

#ifndef CAIRN_TESTS_TESTING_CLOCK_ENV_H_
#define CAIRN_TESTS_TESTING_CLOCK_ENV_H_

#include <chrono>
#include <deque>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/base/clock.h"
#include "cairn/base/env.h"

namespace cairn::testing {

class ClockEnv final : public Env {
 public:
  ClockEnv(ManualClock* clock, Env* base = Env::Default())
      : clock_(clock), base_(base) {}

  void QueueSyncs(std::initializer_list<std::chrono::nanoseconds> durations) {
    std::lock_guard<std::mutex> lock(mu_);
    queued_.insert(queued_.end(), durations.begin(), durations.end());
  }
  std::size_t queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queued_.size();
  }

  Result<std::unique_ptr<FileHandle>> NewFile(const std::string& path,
                                              FileOpenMode mode) override {
    Result<std::unique_ptr<FileHandle>> file = base_->NewFile(path, mode);
    if (!file.ok()) return file;
    return std::unique_ptr<FileHandle>(new File(this, std::move(file).value()));
  }
  Status Rename(const std::string& from, const std::string& to) override {
    return base_->Rename(from, to);
  }
  Status SyncDir(const std::string& dir) override {
    return base_->SyncDir(dir);
  }
  Status Remove(const std::string& path) override {
    return base_->Remove(path);
  }
  Status CreateDir(const std::string& dir) override {
    return base_->CreateDir(dir);
  }
  Result<std::vector<std::string>> List(const std::string& dir) override {
    return base_->List(dir);
  }
  Result<std::uint64_t> FileSize(const std::string& path) override {
    return base_->FileSize(path);
  }
  Result<bool> FileExists(const std::string& path) override {
    return base_->FileExists(path);
  }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override {
    return base_->LockFile(path);
  }
  Status UnlockFile(std::unique_ptr<FileLock> lock) override {
    return base_->UnlockFile(std::move(lock));
  }

 private:
  class File final : public FileHandle {
   public:
    File(ClockEnv* env, std::unique_ptr<FileHandle> base)
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
      env_->AdvanceForSync();
      return base_->Sync();
    }
    Status Truncate(std::uint64_t bytes) override {
      return base_->Truncate(bytes);
    }
    Result<std::uint64_t> Size() const override { return base_->Size(); }
    Status Close() override { return base_->Close(); }

   private:
    ClockEnv* const env_;
    const std::unique_ptr<FileHandle> base_;
  };

  void AdvanceForSync() {
    std::chrono::nanoseconds d{0};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queued_.empty()) return;
      d = queued_.front();
      queued_.pop_front();
    }
    clock_->Advance(d);
  }

  ManualClock* const clock_;
  Env* const base_;
  mutable std::mutex mu_;
  std::deque<std::chrono::nanoseconds> queued_;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_TESTING_CLOCK_ENV_H_
