// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// For directory tests that must hold with every durable log: no log,
// InMemoryDurableLog and FileDurableLog (in a scratch directory). A test is
// parameterised over LogKind and makes its log with TestLog.
//
// The in-memory log tells whether an appended record is still unresolved
// (HasUnresolvedRecord), so a test can check that host code does not run
// while a record is pending; the file log's Finalize waits for every
// earlier record to be resolved, so host code that mutates a directory
// sharing it while a record is pending hangs (run such tests under a
// Watchdog).

#ifndef CAIRN_TESTS_DIRECTORY_EVERY_LOG_H_
#define CAIRN_TESTS_DIRECTORY_EVERY_LOG_H_

#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "cairn/directory/durable_log.h"
#include "cairn/ha/file_durable_log.h"
#include "testing/scratch_dir.h"

namespace cairn::testing {

enum class LogKind { kNone, kInMemory, kFile };

inline constexpr LogKind kEveryLog[] = {LogKind::kNone, LogKind::kInMemory,
                                        LogKind::kFile};

inline std::string LogKindString(LogKind kind) {
  switch (kind) {
    case LogKind::kNone:
      return "NoLog";
    case LogKind::kInMemory:
      return "InMemoryLog";
    case LogKind::kFile:
      return "FileLog";
  }
  return "Unknown";
}
// For INSTANTIATE_TEST_SUITE_P: NoLog, InMemoryLog, FileLog.
inline std::string LogKindName(const ::testing::TestParamInfo<LogKind>& info) {
  return LogKindString(info.param);
}
// GetParam() in failure messages.
inline void PrintTo(LogKind kind, std::ostream* os) {
  *os << LogKindString(kind);
}

class TestLog {
 public:
  explicit TestLog(LogKind kind) {
    if (kind == LogKind::kInMemory) {
      memory_ = std::make_unique<InMemoryDurableLog>();
    } else if (kind == LogKind::kFile) {
      scratch_.emplace("every_log");
      // A name that does not exist yet: Open creates the log there, whether
      // it takes a file path or a directory of segments.
      Result<std::unique_ptr<FileDurableLog>> opened =
          FileDurableLog::Open(scratch_->path() + "/log");
      EXPECT_TRUE(opened.ok()) << opened.status().ToString();
      if (opened.ok()) file_ = std::move(opened).value();
    }
  }
  TestLog(const TestLog&) = delete;
  TestLog& operator=(const TestLog&) = delete;

  // For DirectoryOptions::durable_log; null for kNone.
  DurableLog* get() const {
    if (memory_ != nullptr) return memory_.get();
    return file_.get();
  }
  // In-memory log only: some appended record is neither finalized nor
  // cancelled. Always false for the other kinds.
  bool HasUnresolvedRecord() const {
    if (memory_ == nullptr) return false;
    for (const InMemoryDurableLog::Record& r : memory_->records()) {
      if (r.state == InMemoryDurableLog::RecordState::kAppended) return true;
    }
    return false;
  }
  // The file log's sticky error; OK for the other kinds.
  Status status() const {
    return file_ != nullptr ? file_->status() : Status::Ok();
  }

 private:
  std::optional<ScratchDir> scratch_;  // outlives the file log
  std::unique_ptr<InMemoryDurableLog> memory_;
  std::unique_ptr<FileDurableLog> file_;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_DIRECTORY_EVERY_LOG_H_
