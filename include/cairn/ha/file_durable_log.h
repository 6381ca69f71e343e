// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// FileDurableLog: a DurableLog (durable_log.h, H1) on a directory of
// append-only segment files, format v2 (docs/durable_log.md):
//
//   <dir>/LOCK                      held by the writer while it is open
//   <dir>/<first LSN, 20 digits>.log   one segment
//   segment = header (28 bytes) | frame | frame | ...
//   header  = magic "CAIRNDLG" u64 | format version u32 | reserved u32 |
//             first LSN u64 | checksum u32 (low half of an XXH64 of the
//             24 bytes before it)
//   frame   = body length u32 | LSN u64 | XXH64 of (LSN bytes + body),
//             seeded with the length, u64 | body (EncodeDurableRecord's bytes)
//
// Every record written gets a log sequence number (LSN): gapless, strictly
// increasing, in append order, assigned when the record is written (a
// cancelled record never gets one). Segment k + 1 starts at the LSN after
// segment k's last. Append copies the record into memory (no I/O under the
// caller's locks). Finalize writes every record resolved so far, in append
// order, and calls fdatasync before it returns (group commit: one write and
// one sync cover every record finalized meanwhile); it first waits for
// records appended earlier to be finalized or cancelled, so a record that
// might still be voided (Cancel) never reaches the file. A failed write or
// sync is sticky: status() reports it and every later Reserve and Append
// fails with it, so no further change becomes visible. Rotate() starts a new
// segment at the next write and DropThrough(lsn) removes the segments a
// snapshot made unnecessary. DurableLogReader reads (and tails) the records
// from any LSN with bounded memory, with no lock, while a writer appends.
// Every integer is little-endian. All I/O goes through an Env.
//
// Thread safety: every method is safe from any thread. The log's lock is a
// leaf (Append runs under directory object locks); Finalize waits and does
// I/O with no lock of the log held; DropThrough does its I/O under a lock of
// its own that no appender takes. A DurableLogReader is used by one thread
// at a time.

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
#include <vector>

#include "cairn/base/clock.h"
#include "cairn/base/env.h"
#include "cairn/base/metrics.h"
#include "cairn/base/mutex.h"
#include "cairn/base/status.h"
#include "cairn/base/thread_annotations.h"
#include "cairn/base/version.h"
#include "cairn/directory/durable_log.h"

CAIRN_NAMESPACE_BEGIN

inline constexpr std::uint64_t kDurableLogMagic =
    0x474c444e52494143ull;  // "CAIRNDLG"
inline constexpr std::uint32_t kDurableLogFormatVersion = 2;
// A segment's header: magic u64 | version u32 | reserved u32 | first LSN
// u64 | checksum u32.
inline constexpr std::size_t kDurableLogHeaderBytes = 28;
// A frame's fixed part: length u32 | LSN u64 | checksum u64.
inline constexpr std::size_t kDurableLogFrameBytes = 20;
inline constexpr std::size_t kDurableLogMaxRecordBytes = std::size_t{1} << 30;
// XXH64 seeds: the header's checksum is the low half of XXH64(its first 24
// bytes, kDurableLogHeaderSeed); a frame's is XXH64(LSN bytes + body,
// kDurableLogRecordSeed ^ length).
inline constexpr std::uint64_t kDurableLogHeaderSeed = 0x44555241424c4548ull;
inline constexpr std::uint64_t kDurableLogRecordSeed = 0x44555241424c5245ull;

// The name of the segment whose first record has LSN `first`:
// "<20 zero-padded decimal digits>.log".
std::string DurableLogSegmentName(Lsn first);

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
  // Opening a log whose newest segment has a truncated or corrupt tail:
  // false fails with kDataLoss; true cuts the segment back to its valid
  // prefix, but only if no valid frame follows the damage (a record whose
  // on_durable may have fired is never dropped: damage before one is
  // kDataLoss either way). Damage in an older segment is always kDataLoss.
  bool truncate_damaged_tail = false;
  // A write that would start when the current segment holds at least this
  // many bytes (and at least one record) starts a new segment first. At
  // least 1.
  std::uint64_t segment_bytes = std::uint64_t{64} << 20;
  // Called by Finalize once the record is durable, with no lock held.
  std::function<void(std::span<const ObjectToken>)> on_durable;
  // Called once per written batch after it is durable, with the last LSN of
  // the batch (for a follower's or host's bookkeeping); optional. Runs on
  // the finalizer that wrote the batch, with no lock held, one call at a
  // time and in LSN order; the next batch waits for it, so keep it short.
  std::function<void(Lsn)> on_batch_durable;
  // 0: continue after the last LSN on disk, or start at LSN 1 in an empty
  // directory. Nonzero: the first LSN written in an empty directory (a
  // promoted follower continuing a primary's LSNs); with segments on disk it
  // must equal the last LSN on disk + 1, else Open is kFailedPrecondition.
  Lsn start_lsn = 0;
  // The file layer the log goes through; null means Env::Default(). Not
  // owned: it must outlive the log.
  Env* env = nullptr;
  // Times the batch syncs reported by VisitMetrics; null is
  // kInvalidArgument. Not owned: it must outlive the log.
  const Clock* clock = Clock::Steady();
};

class FileDurableLog final : public DurableLog {
 public:
  // Opens the log in directory `path`, creating the directory if it is
  // missing (its parent must exist; the parent is synced whenever the log
  // is new) and a first segment if it holds none (header written and
  // synced under <name>.tmp, renamed into place, directory synced). Takes
  // an exclusive lock on <path>/LOCK. Existing segments are checked in LSN
  // order, streamed with a bounded buffer: every header, that each segment
  // starts at the LSN after the previous one's last, and every frame (only
  // the newest segment may have a damaged tail; see truncate_damaged_tail).
  // The newest segment and the directory are then synced. Stale *.tmp files
  // are removed. Errors: kInvalidArgument (empty path, not a directory, bad
  // options), kNotFound (no parent directory), kFailedPrecondition (another
  // writer holds the lock, another format version, start_lsn disagrees with
  // the log), kDataLoss (damage), kInternal / kResourceExhausted (I/O).
  static Result<std::unique_ptr<FileDurableLog>> Open(
      const std::string& path, FileDurableLogOptions options = {});
  // Closes the files. Every reservation must have been finalized or
  // cancelled.
  ~FileDurableLog() override;
  FileDurableLog(const FileDurableLog&) = delete;
  FileDurableLog& operator=(const FileDurableLog&) = delete;

  // Fails with the sticky error, kInvalidArgument (bytes over
  // max_record_bytes) or kResourceExhausted (max_pending_bytes). Allocates
  // the record's buffer. Never does I/O.
  Result<LogReservation> Reserve(std::size_t bytes) override;
  // Copies the record; fails with the sticky error or kInvalidArgument
  // (empty, or over max_record_bytes). Never does I/O; allocates only if the
  // record is longer than its reservation.
  Status Append(const LogReservation& reservation,
                std::string_view record) override;
  // Waits for earlier records to be resolved, then writes the resolved
  // prefix (assigning LSNs, rotating to a new segment first if due) and
  // syncs it, or waits for another finalizer doing so; then calls
  // on_durable and returns OK. After a write or sync error it returns that
  // error at once: the record is not durable (status() says the same).
  Status Finalize(const LogReservation& reservation,
                  std::span<const ObjectToken> tokens) override;
  void Cancel(const LogReservation& reservation) noexcept override;
  // A batch: every Append under it is a record (and, once written, an LSN)
  // of its own, placed in append order among other writers' records; one
  // Finalize waits for and writes them all (one sync when no other writer
  // interleaves unresolved records), one Cancel voids them all. Until the
  // batch is finalized, records appended after its first one (by any
  // writer) wait for it to be resolved. Errors: the sticky error,
  // kInvalidArgument (`records` is 0, or the batch could never fit in
  // max_pending_bytes), kResourceExhausted (max_pending_bytes now). Each
  // record is still at most max_record_bytes (checked at Append).
  Result<LogReservation> ReserveBatch(std::size_t records,
                                      std::size_t bytes) override;

  // OK, or the sticky write/sync error.
  Status status() const;
  // The highest LSN written and synced (with sync off: written); the last
  // LSN on disk at Open (start_lsn - 1, or 0, for a new log).
  Lsn durable_lsn() const;
  // The lowest LSN the log still holds; durable_lsn() + 1 when it holds
  // none.
  Lsn first_lsn() const;
  // The next write starts a new segment (if the current one holds a
  // record), e.g. after a snapshot so that DropThrough can remove the old
  // one. Takes the log's lock only; no I/O. Returns the sticky error if any.
  Status Rotate();
  // Removes every segment all of whose records have LSN <= `lsn`, oldest
  // first, never the segment being written to, syncing the directory after
  // each removal (so a crash leaves a contiguous run of segments). Its I/O
  // runs under a lock of its own, never under the lock Reserve, Append and
  // Finalize take. Returns how many segments it removed, or the I/O error
  // (the segments removed before it stay removed). Safe to call
  // concurrently with everything.
  Result<std::size_t> DropThrough(Lsn lsn);
  // Records written and synced, and fdatasync calls made for batches (group
  // commit makes the second smaller than the first under concurrency).
  std::uint64_t durable_records() const;
  std::uint64_t syncs() const;
  // Segment files the log holds.
  std::size_t segments() const;
  // Reports the log's cairn_durable_log_* metrics (docs/metrics.md,
  // "Durable log"), each with `labels` first: records and bytes appended,
  // cancelled and written, batches, syncs and the histogram of their time
  // (on options.clock), LSNs, segments, rotations, dropped segments,
  // pending reservations, refusals and failures. Takes the log's lock
  // briefly (never during I/O) and calls the visitor with no lock held.
  // Safe from any thread.
  void VisitMetrics(MetricVisitor& visitor,
                    std::span<const MetricLabel> labels = {}) const;
  // The directory.
  const std::string& path() const noexcept { return dir_; }

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
    std::string frame;          // frame header (filled at write) + body
    // A batch reservation's first slot (ReserveBatch): the ids of the
    // slots its later Appends made, resolved with it.
    bool batch = false;
    std::vector<std::uint64_t> more;
  };
  struct OpenedLog;

  FileDurableLog(OpenedLog opened, std::string dir,
                 FileDurableLogOptions options);
  bool FrontResolved() const CAIRN_REQUIRES(mu_);
  // Writes and syncs the resolved prefix; called with mu_ held through
  // `lock`, releases it around the I/O.
  void FlushResolved(std::unique_lock<Mutex>& lock) CAIRN_REQUIRES(mu_);

  const std::unique_ptr<FileLock> lock_;  // <dir>/LOCK, held while open
  const std::string dir_;
  const FileDurableLogOptions options_;
  Env& env_;
  // The segment being written to. Replaced only by the flusher (the one
  // finalizer with flushing_ set), and read only by it.
  std::unique_ptr<FileHandle> file_;

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
  // The current segment's size: where the next write goes.
  std::uint64_t end_ CAIRN_GUARDED_BY(mu_);
  // First LSN of every segment held, oldest first; back() is the current.
  std::deque<Lsn> segments_ CAIRN_GUARDED_BY(mu_);
  Lsn durable_lsn_ CAIRN_GUARDED_BY(mu_);  // next LSN = durable_lsn_ + 1
  bool rotate_requested_ CAIRN_GUARDED_BY(mu_) = false;
  bool flushing_ CAIRN_GUARDED_BY(mu_) = false;
  Status error_ CAIRN_GUARDED_BY(mu_);
  std::uint64_t durable_records_ CAIRN_GUARDED_BY(mu_) = 0;
  std::uint64_t syncs_ CAIRN_GUARDED_BY(mu_) = 0;
  // Metrics only (VisitMetrics); all counted under mu_, where the state
  // they describe changes.
  struct Totals {
    std::uint64_t appended_records = 0;
    std::uint64_t appended_bytes = 0;  // record bodies
    std::uint64_t cancelled_records = 0;
    std::uint64_t written_bytes = 0;  // frames, as written to segments
    std::uint64_t batches = 0;
    std::uint64_t rotations = 0;
    std::uint64_t dropped_segments = 0;
    std::uint64_t refused_pending = 0;  // Reserve past max_pending_bytes
    std::uint64_t refused_failed = 0;   // Reserve/Append after a failure
    std::uint64_t write_errors = 0;
    std::uint64_t sync_errors = 0;
  };
  Totals totals_ CAIRN_GUARDED_BY(mu_);
  // Batch fdatasync times in nanoseconds on options_.clock; recorded with
  // no lock held (relaxed atomics).
  Histogram sync_nanos_{1e-9};
  // Serializes DropThrough calls; never taken by appenders. Taken before
  // mu_.
  Mutex drop_mu_ CAIRN_ACQUIRED_BEFORE(mu_);
};

// One record DurableLogReader::Next returned. `body` stays valid until the
// next call of Next (or the reader's destruction).
struct DurableLogEntry {
  Lsn lsn = 0;
  std::string_view body;
};

struct DurableLogReaderOptions {
  // The file layer; null means Env::Default(). Not owned.
  Env* env = nullptr;
  // Largest record body the reader accepts; a frame claiming more is
  // damage. Use the writer's value.
  std::size_t max_record_bytes = std::size_t{16} << 20;
  // Bytes read from a segment at a time. The reader's buffer holds at most
  // read_bytes + max_record_bytes + kDurableLogFrameBytes bytes.
  std::size_t read_bytes = std::size_t{1} << 20;
};

// Reads the records of a log directory in LSN order from a given LSN, and
// tails it while a FileDurableLog (in this process or another) appends,
// rotates and drops segments. Holds no lock and never writes. Memory is
// bounded by the buffer (DurableLogReaderOptions::read_bytes plus one
// record).
//
// A record is returned once its bytes are complete and checksum-valid in
// the file, which may be before the writer's fdatasync: a follower may
// apply a record that the primary never acknowledged (a crash of the
// primary can then lose it from the primary's log). That is allowed: only
// records no client was told are durable can be affected.
//
// Thread safety: one thread at a time per reader; any number of readers.
class DurableLogReader {
 public:
  // Opens the log in `dir` at the record with LSN `from` (>= 1; 0 means the
  // oldest record the log holds). The record need not exist yet (tailing).
  // Errors: kNotFound (no directory, or no segment in it), kOutOfRange
  // (`from` is below the oldest segment: dropped), kDataLoss (a damaged
  // header), kFailedPrecondition (another format version), I/O errors.
  static Result<std::unique_ptr<DurableLogReader>> Open(
      const std::string& dir, Lsn from, DurableLogReaderOptions options = {});
  ~DurableLogReader();
  DurableLogReader(const DurableLogReader&) = delete;
  DurableLogReader& operator=(const DurableLogReader&) = delete;

  // true: *out is the record with LSN next_lsn() (which then advances).
  // false: no complete record is readable now: a clean end, or an
  // incomplete (or checksum-failing) frame at the end of the newest segment,
  // which a writer may still be writing or a crash tore; call again later to
  // tail a live log. At the end of a segment the reader moves on to the
  // next one once it exists, after reading the old one to its end once
  // more. Errors (the reader stays where it was):
  //   kOutOfRange  a segment it needs was dropped (DropThrough): the caller
  //                needs a newer snapshot;
  //   kDataLoss    damage that is not an incomplete tail of the newest
  //                segment: a bad frame followed by a valid one, an
  //                incomplete frame at the end of a segment that has a
  //                successor, a gap in LSNs between segments, an LSN out of
  //                sequence, a damaged header;
  //   kFailedPrecondition  a segment of another format version;
  //   an Env error.
  Result<bool> Next(DurableLogEntry* out);
  // The LSN of the record the next successful Next returns.
  Lsn next_lsn() const noexcept { return next_lsn_; }
  // Bytes consumed so far: segment headers and frames, including frames
  // skipped to reach `from` (for lag in bytes).
  std::uint64_t bytes_read() const noexcept { return bytes_read_; }
  // Whether the last Next that returned false stopped at an incomplete or
  // checksum-failing frame (a torn or still-being-written tail) rather than
  // at a clean end.
  bool stopped_at_damaged_tail() const noexcept { return damaged_tail_; }
  // The buffer's capacity in bytes (bounded; see DurableLogReaderOptions).
  std::size_t buffer_capacity() const noexcept;

 private:
  class Segment;
  DurableLogReader(std::string dir, Lsn from, DurableLogReaderOptions options,
                   Env& env);
  // Opens the segment whose first LSN is `first` (kOutOfRange if gone).
  Status OpenSegment(Lsn first);
  // At the end of the current segment: whether a later one exists (by the
  // name the next would have, then by listing).
  Result<bool> NextSegmentExists();
  // Moves to the segment starting at cursor_: kDataLoss for a gap,
  // kOutOfRange if it was dropped.
  Status OpenNextSegment();

  const std::string dir_;
  const DurableLogReaderOptions options_;
  Env& env_;
  std::unique_ptr<Segment> segment_;
  Lsn cursor_ = 0;  // LSN of the next frame in segment_
  Lsn next_lsn_;
  std::uint64_t bytes_read_ = 0;
  bool damaged_tail_ = false;
};

// What ReadDurableLog got through.
struct DurableLogScan {
  std::uint64_t records = 0;      // valid records, in order
  std::uint64_t valid_bytes = 0;  // segment headers + valid frames
  Lsn first_lsn = 0;              // of the first record read (0: none)
  Lsn last_lsn = 0;               // of the last record read (0: none)
};

// Calls fn(lsn, body) for each record of the log directory `dir`, oldest
// first (a DurableLogReader from the oldest segment). OK at a clean end;
// kDataLoss at a torn or damaged tail (fn has seen the valid records, which
// *scan describes) and for the reader's damage; the reader's other errors
// (kNotFound if there is no log). Reads through `env` (null: the default)
// with the reader's default max_record_bytes (16 MiB): a log written with a
// larger limit needs a DurableLogReader with that limit.
Status ReadDurableLog(const std::string& dir,
                      const std::function<void(Lsn, std::string_view)>& fn,
                      DurableLogScan* scan = nullptr, Env* env = nullptr);

CAIRN_NAMESPACE_END

#endif  // CAIRN_HA_FILE_DURABLE_LOG_H_
