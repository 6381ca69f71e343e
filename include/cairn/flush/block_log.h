// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// BlockLog: a log of fixed-size blocks in one real file (format in
// cairn/flush/log_format.h), written with positional writes and made durable
// with fdatasync, all through an Env (cairn/base/env.h); and LogBlockBuffer,
// the in-memory image of the block being filled.
//
// Flush protocol (FlushBlock): write the block's data from its last flushed
// boundary to the new one; fdatasync; write a header naming the new boundary
// into slot (sequence % 2); fdatasync. When FlushBlock returns OK every
// record below the new boundary is durable. A crash before the header sync
// leaves the previous header (the other slot) in force, so recovery sees the
// old boundary and treats the bytes above it as a torn tail.
//
// Thread safety: BlockLog's reads (ReadHeader, ReadData, FileBytes) may run
// on any number of threads, concurrently with one writer; the writes
// (FlushBlock, WriteData, WriteHeader, Sync, Truncate) must come from one
// thread at a time (the host serialises its flushes). Reads and writes of
// distinct byte ranges need no lock (FileHandle allows them concurrently).
// All calls may block on I/O. A
// LogBlockBuffer is a plain object: the host guards it (LogStore appends
// under its log mutex and flushes a snapshot of the bytes already written,
// which appends never touch again).

#ifndef CAIRN_FLUSH_BLOCK_LOG_H_
#define CAIRN_FLUSH_BLOCK_LOG_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "cairn/base/env.h"
#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/flush/log_format.h"

CAIRN_NAMESPACE_BEGIN

struct BlockLogOptions {
  // Block size in bytes, a multiple of 4096 in [kLogMinBlockBytes,
  // kLogMaxBlockBytes]; 8 MiB by default. Fixed when the file is created.
  std::size_t block_bytes = kLogDefaultBlockBytes;
  // fdatasync at both sync points. false skips the syncs: records then
  // survive a process crash (they are in the page cache) but not a power
  // loss. For tests and benches that measure the CPU path.
  bool sync = true;
  // Open only: open the file read-only (an inspector; every write then
  // fails). Create ignores it.
  bool read_only = false;
  // The file layer the log goes through; null means Env::Default(). Not
  // owned: it must outlive the log.
  Env* env = nullptr;
};

class BlockLog {
 public:
  // Creates a new log file (kAlreadyExists if `path` exists): the file
  // header is written and synced under `path`.tmp, which is then renamed to
  // `path` and the directory synced, so a crash leaves either no log or a
  // whole one. kInvalidArgument for a bad block size; the Env's error
  // (kInternal with errno text, kResourceExhausted for a full disk) if the
  // file cannot be created or written. The caller owns the directory: two
  // creators of one path at once are not detected (LogStore holds a lock).
  static Result<std::unique_ptr<BlockLog>> Create(
      const std::string& path, const BlockLogOptions& options);
  // Create's block size check, for callers that must validate before they
  // touch the disk: kInvalidArgument unless block_bytes is a multiple of
  // 4096 between kLogMinBlockBytes and kLogMaxBlockBytes.
  static Status CheckBlockBytes(std::size_t block_bytes);
  // Opens an existing log and checks its file header: kNotFound if absent,
  // kDataLoss for a truncated or damaged header or a file that is not a
  // cairn log, kFailedPrecondition for another format version. The block
  // size comes from the file; options.block_bytes is ignored.
  static Result<std::unique_ptr<BlockLog>> Open(const std::string& path,
                                                const BlockLogOptions& options);

  BlockLog(const BlockLog&) = delete;
  BlockLog& operator=(const BlockLog&) = delete;
  ~BlockLog();

  std::size_t block_bytes() const noexcept { return block_bytes_; }
  std::size_t data_bytes() const noexcept { return LogDataBytes(block_bytes_); }
  const std::string& path() const noexcept { return path_; }
  // File offset of a block's first header slot.
  std::uint64_t BlockOffset(std::uint64_t block) const noexcept {
    return kLogFileHeaderBytes + block * block_bytes_;
  }

  // The flush protocol for one block (see the top of this file): writes
  // data[from, header.used_bytes) of the block's data area, syncs, writes
  // `header` into slot header.sequence % 2, syncs. `data` is the start of
  // the block's data area. kInternal (kResourceExhausted for a full disk) on an
  // I/O error (the block's state on disk is then its previous header's).
  Status FlushBlock(const LogBlockHeader& header, const char* data,
                    std::uint32_t from);
  // The steps of FlushBlock, for tests that stop between them.
  Status WriteData(std::uint64_t block, std::uint32_t offset, const char* data,
                   std::size_t bytes);
  Status WriteHeader(const LogBlockHeader& header);
  Status Sync();

  // The block's newest valid header (the slot with the larger sequence
  // among those that decode and name this block). kNotFound if neither
  // slot holds one (never flushed, torn, or past the end of the file);
  // kFailedPrecondition if a slot holds a header of another format version.
  Result<LogBlockHeader> ReadHeader(std::uint64_t block) const;
  // Reads `bytes` of a block's data area from `offset`. kDataLoss if the
  // file ends first, kInternal on an I/O error.
  Status ReadData(std::uint64_t block, std::uint32_t offset, std::size_t bytes,
                  char* out) const;
  Result<std::uint64_t> FileBytes() const;
  // Cuts the file to `bytes` and syncs.
  Status Truncate(std::uint64_t bytes);

 private:
  BlockLog(std::unique_ptr<FileHandle> file, std::string path,
           std::size_t block_bytes, bool sync)
      : file_(std::move(file)),
        path_(std::move(path)),
        block_bytes_(block_bytes),
        sync_(sync) {}

  const std::unique_ptr<FileHandle> file_;
  const std::string path_;
  const std::size_t block_bytes_;
  const bool sync_;
};

// The in-memory image of one block's data area while it fills. Records are
// appended at the end; bytes below used() never change again, so a flusher
// may write them while later appends continue (under the host's lock).
class LogBlockBuffer {
 public:
  // Allocates data_bytes (the block's data area). Check ok() afterwards: a
  // failed allocation leaves a buffer that accepts nothing.
  LogBlockBuffer(std::uint64_t block, std::size_t data_bytes) noexcept;
  LogBlockBuffer(const LogBlockBuffer&) = delete;
  LogBlockBuffer& operator=(const LogBlockBuffer&) = delete;

  bool ok() const noexcept { return data_ != nullptr; }
  std::uint64_t block() const noexcept { return block_; }
  const char* data() const noexcept { return data_.get(); }
  std::uint32_t used() const noexcept { return used_; }
  std::uint32_t record_count() const noexcept { return records_; }
  std::uint64_t chain_checksum() const noexcept { return chain_; }
  std::size_t capacity() const noexcept { return capacity_; }
  bool Fits(std::size_t record_bytes) const noexcept {
    return ok() && record_bytes <= capacity_ - used_;
  }
  // Appends one record (the caller checked Fits and the limits) and
  // returns its offset in the data area.
  std::uint32_t Append(LogRecordType type, std::uint32_t db,
                       std::string_view key, std::string_view value) noexcept;
  // The state before an append, to undo that append (Rollback) while no
  // one else appended or flushed since (the host's lock held throughout).
  struct Mark {
    std::uint32_t used;
    std::uint32_t records;
    std::uint64_t chain;
  };
  Mark mark() const noexcept { return {used_, records_, chain_}; }
  void Rollback(const Mark& m) noexcept {
    used_ = m.used;
    records_ = m.records;
    chain_ = m.chain;
  }
  // Empties the buffer for reuse as `block`.
  void Reset(std::uint64_t block) noexcept {
    block_ = block;
    used_ = records_ = 0;
    chain_ = 0;
    flushed = sequence = 0;
  }
  // The header a flush up to used() writes.
  LogBlockHeader HeaderAtUsed(std::uint32_t seq) const noexcept {
    return {block_, seq, used_, records_, chain_};
  }

  // Flush bookkeeping, kept by the flusher.
  std::uint32_t flushed = 0;   // durable boundary
  std::uint32_t sequence = 0;  // last header sequence written

 private:
  std::uint64_t block_;
  std::size_t capacity_;
  std::unique_ptr<char[]> data_;
  std::uint32_t used_ = 0;
  std::uint32_t records_ = 0;
  std::uint64_t chain_ = 0;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_FLUSH_BLOCK_LOG_H_
