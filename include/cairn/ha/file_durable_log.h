// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// FileDurableLog: a DurableLog (durable_log.h, H1) on one append-only file.
//
//   file   = header (16 bytes) | record | record | ...
//   header = magic "CAIRNDLG" u64 | format version u32 | checksum u32
//   record = body length u32 | XXH64 of the body (seeded with its length)
//            u64 | body (EncodeDurableRecord's bytes)
//
// Append copies the framed record into memory (no I/O under the caller's
// locks). Finalize writes every record resolved so far, in append order,
// and calls fdatasync before it returns (group commit: one write and one
// sync cover every record finalized meanwhile); it first waits for records
// appended earlier to be finalized or cancelled, so a record that might still
// be voided (Cancel) never reaches the file. A failed write or sync is
// sticky: status() reports it and every later Reserve and Append fails with
// it, so no further change becomes visible. ReadDurableLog iterates a file's
// records and stops with kDataLoss at the first truncated or corrupt one,
// reporting the valid prefix. Every integer is little-endian. All of the
// file's I/O goes through an Env (FileDurableLogOptions::env).
//
// Thread safety: every method is safe from any thread. The log's lock is a
// leaf (Append runs under directory object locks); Finalize waits and does
// I/O with no lock of the log held.

#ifndef CAIRN_HA_FILE_DURABLE_LOG_H_
#define CAIRN_HA_FILE_DURABLE_LOG_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "cairn/base/env.h"
#include "cairn/base/mutex.h"
#include "cairn/base/status.h"
#include "cairn/base/thread_annotations.h"
#include "cairn/base/version.h"
#include "cairn/directory/durable_log.h"

CAIRN_NAMESPACE_BEGIN

inline constexpr std::uint64_t kDurableLogMagic =
    0x474c444e52494143ull;  // "CAIRNDLG"
inline constexpr std::uint32_t kDurableLogFormatVersion = 1;
inline constexpr std::size_t kDurableLogHeaderBytes = 16;
inline constexpr std::size_t kDurableLogFrameBytes = 12;
inline constexpr std::size_t kDurableLogMaxRecordBytes = std::size_t{1} << 30;

struct FileDurableLogOptions {
  // fdatasync before Finalize returns. Off only where durability does not
  // matter (the records then reach the disk when the OS writes them).
  bool sync = true;
  // Largest record body; a larger Reserve or Append is kInvalidArgument.
  // 1 .. kDurableLogMaxRecordBytes.
  std::size_t max_record_bytes = std::size_t{16} << 20;
  // Bytes reserved or appended but not yet written; a Reserve past it is
  // kResourceExhausted. At least max_record_bytes + kDurableLogFrameBytes.
  std::size_t max_pending_bytes = std::size_t{64} << 20;
  // Opening a file whose tail is truncated or corrupt: false fails with
  // kDataLoss; true cuts the file back to its valid prefix, but only if no
  // valid record follows the damage (a record whose on_durable may have
  // fired is never dropped: damage before one is kDataLoss either way).
  bool truncate_damaged_tail = false;
  // Called by Finalize once the record is durable, with no lock held.
  std::function<void(std::span<const ObjectToken>)> on_durable;
  // The file layer the log goes through; null means Env::Default(). Not
  // owned: it must outlive the log.
  Env* env = nullptr;
};

// What ReadDurableLog got through.
struct DurableLogScan {
  std::uint64_t records = 0;      // valid records, in order
  std::uint64_t valid_bytes = 0;  // header + valid records
};

// Calls fn(body) for each record of the file at `path`, in order. OK at a
// clean end of file. kDataLoss at the first truncated record or checksum
// mismatch (fn has seen the valid prefix, which *scan describes), or for a
// header that is not a cairn durable log; kFailedPrecondition for another
// format version; kNotFound if there is no file; kInternal for an I/O error.
// The file is read through `env` (null: Env::Default()).
Status ReadDurableLog(const std::string& path,
                      const std::function<void(std::string_view)>& fn,
                      DurableLogScan* scan = nullptr, Env* env = nullptr);

class FileDurableLog final : public DurableLog {
 public:
  // Opens `path`, creating it if it does not exist (header written and
  // synced under `path`.tmp, renamed into place, directory synced); an
  // existing file must be a valid durable log and is appended to, after
  // its bytes and directory entry are synced. Holds an exclusive lock on
  // `path`.lock while open. Errors: kInvalidArgument (empty path, a
  // directory, bad options), kNotFound (no such directory),
  // kFailedPrecondition (another writer holds the lock, or another format
  // version), kDataLoss (a damaged file, as ReadDurableLog; damage followed
  // by a valid record is kDataLoss even with truncate_damaged_tail),
  // kInternal / kResourceExhausted (I/O).
  static Result<std::unique_ptr<FileDurableLog>> Open(
      const std::string& path, FileDurableLogOptions options = {});
  // Closes the file. Every reservation must have been finalized or
  // cancelled.
  ~FileDurableLog() override;
  FileDurableLog(const FileDurableLog&) = delete;
  FileDurableLog& operator=(const FileDurableLog&) = delete;

  // Fails with the sticky error, kInvalidArgument (bytes over
  // max_record_bytes) or kResourceExhausted (max_pending_bytes). Allocates
  // the record's buffer. Never does I/O.
  Result<LogReservation> Reserve(std::size_t bytes) override;
  // Frames and copies the record; fails with the sticky error or
  // kInvalidArgument (over max_record_bytes). Never does I/O; allocates only
  // if the record is longer than its reservation.
  Status Append(const LogReservation& reservation,
                std::string_view record) override;
  // Waits for earlier records to be resolved, writes the resolved prefix
  // and syncs it (or waits for another finalizer doing so), then calls
  // on_durable. After a write or sync error it returns at once; the record
  // is then not durable and status() says why.
  void Finalize(const LogReservation& reservation,
                std::span<const ObjectToken> tokens) override;
  void Cancel(const LogReservation& reservation) noexcept override;

  // OK, or the sticky write/sync error.
  Status status() const;
  // Records written and synced, and fdatasync calls made (group commit
  // makes the second smaller than the first under concurrency).
  std::uint64_t durable_records() const;
  std::uint64_t syncs() const;
  const std::string& path() const noexcept { return path_; }

 private:
  enum class SlotState : std::uint8_t {
    kReserved,
    kAppended,
    kFinalized,
    kCancelled
  };
  struct Slot {
    SlotState state = SlotState::kReserved;
    std::uint64_t seq = 0;      // append order, from 1
    std::uint64_t charged = 0;  // bytes counted in pending_bytes_
    std::string frame;
  };

  FileDurableLog(std::unique_ptr<FileLock> lock,
                 std::unique_ptr<FileHandle> file, std::string path,
                 FileDurableLogOptions options, std::uint64_t end);
  bool FrontResolved() const CAIRN_REQUIRES(mu_);
  // Writes and syncs the resolved prefix; called with mu_ held through
  // `lock`, releases it around the I/O.
  void FlushResolved(std::unique_lock<Mutex>& lock) CAIRN_REQUIRES(mu_);
  Status WriteAndSync(const std::string& bytes, std::uint64_t offset);

  const std::unique_ptr<FileLock> lock_;  // `path`.lock, held while open
  const std::unique_ptr<FileHandle> file_;
  const std::string path_;
  const FileDurableLogOptions options_;

  mutable Mutex mu_;
  std::condition_variable_any resolved_;
  std::unordered_map<std::uint64_t, Slot> slots_ CAIRN_GUARDED_BY(mu_);
  std::deque<std::uint64_t> order_ CAIRN_GUARDED_BY(mu_);  // appended ids
  std::uint64_t next_id_ CAIRN_GUARDED_BY(mu_) = 1;
  std::uint64_t appended_seq_ CAIRN_GUARDED_BY(mu_) = 0;
  // Every record with seq <= written_seq_ is resolved: written and synced,
  // or dropped (cancelled).
  std::uint64_t written_seq_ CAIRN_GUARDED_BY(mu_) = 0;
  std::uint64_t pending_bytes_ CAIRN_GUARDED_BY(mu_) = 0;
  std::uint64_t end_ CAIRN_GUARDED_BY(mu_);  // file offset of the next write
  bool flushing_ CAIRN_GUARDED_BY(mu_) = false;
  Status error_ CAIRN_GUARDED_BY(mu_);
  std::uint64_t durable_records_ CAIRN_GUARDED_BY(mu_) = 0;
  std::uint64_t syncs_ CAIRN_GUARDED_BY(mu_) = 0;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_HA_FILE_DURABLE_LOG_H_
