// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// BlockLog: a log of fixed-size blocks in one real file (format in
// cairn/flush/log_format.h), written with positional writes and made durable
// with fdatasync, all through an Env (cairn/base/env.h); and LogBlockBuffer,
// the in-memory image of the block being filled.
//
// Direct I/O (BlockLogOptions::direct_io): the log's writes bypass the page
// cache (Env::NewDirectFile, O_DIRECT), in whole aligned pages: the file
// header and each block header are one 4 KiB page at a 4 KiB offset already,
// and a data write covers the pages its bytes touch, from the start of the
// first (its bytes below the write, durable already, go again unchanged) to
// the end of the last, zero past the last record (recovery stops at zeros:
// no record type is 0). Reads go through a second, buffered handle of the
// same file: unaligned reads need no bounce buffer, and Linux keeps the two
// coherent (a direct write drops the cached pages it covers, before and
// after it, so a read that begins once the write returned sees its bytes;
// the log reads a record only once a sync after its write returned).
//
// Flush protocol (the host's, e.g. LogStore's): write the new records of
// every block being flushed (data from its last durable boundary up to the
// new one) and, as a hint, each block's header naming the boundary an
// earlier sync made durable; then one Sync. The records are the commit
// point: they validate themselves (log_format.h), so when Sync returns OK
// every record written before it is durable and recovery finds it; a header
// never vouches for bytes its own sync is still making durable.
//
// Thread safety: BlockLog's reads (ReadHeader, ReadData, FileBytes) may run
// on any number of threads, concurrently with one writer; the writes
// (WriteData, WriteHeader, Sync, Truncate) must come from one
// thread at a time (the host serialises its flushes). Reads and writes of
// distinct byte ranges need no lock (FileHandle allows them concurrently).
// All calls may block on I/O. A
// LogBlockBuffer takes appends from any number of threads and one flusher
// at a time (its class comment: TryReserve/Fill/Complete, Drain/Advance);
// the flusher writes bytes below a drained boundary, which appends never
// touch again.

#ifndef CAIRN_FLUSH_BLOCK_LOG_H_
#define CAIRN_FLUSH_BLOCK_LOG_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>

#include "cairn/base/env.h"
#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/flush/log_format.h"

CAIRN_NAMESPACE_BEGIN

namespace flush_internal {

// Bytes aligned to kDirectIoAlignment, as direct I/O needs (a block
// buffer, the log's scratch pages).
struct AlignedDelete {
  void operator()(char* p) const noexcept {
    ::operator delete[](p, std::align_val_t{kDirectIoAlignment});
  }
};
using AlignedBytes = std::unique_ptr<char[], AlignedDelete>;
// Null if memory ran out.
AlignedBytes NewAlignedBytes(std::size_t bytes) noexcept;

}  // namespace flush_internal

struct BlockLogOptions {
  // Block size in bytes, a multiple of 4096 in [kLogMinBlockBytes,
  // kLogMaxBlockBytes]; 8 MiB by default. Fixed when the file is created.
  std::size_t block_bytes = kLogDefaultBlockBytes;
  // fdatasync at each sync point. false skips the syncs: records then
  // survive a process crash (they are in the page cache) but not a power
  // loss. For tests and benches that measure the CPU path.
  bool sync = true;
  // Open only: open the file read-only (an inspector; every write then
  // fails). Create ignores it.
  bool read_only = false;
  // Writes bypass the page cache (see the top of this file); reads do not.
  // Not a property of the file: each Create or Open chooses. kInvalidArgument
  // from Create or Open, naming the path, if the filesystem (or the Env)
  // refuses direct I/O: there is no silent fallback. Ignored with read_only.
  // docs/flush.md has the measurements behind the default
  // (LogStoreOptions::direct_io says what they found).
  bool direct_io = false;
  // The file layer the log goes through; null means Env::Default(). Not
  // owned: it must outlive the log.
  Env* env = nullptr;
};

class BlockLog {
 public:
  // Creates a new log file (kAlreadyExists if `path` exists) with a fresh
  // random log id: the file header is written and synced under `path`.tmp,
  // which is then renamed to `path` and the directory synced, so a crash leaves
  // either no log or a whole one. kInvalidArgument for a bad block size; the
  // Env's error (kInternal with errno text, kResourceExhausted for a full disk)
  // if the file cannot be created or written. The caller owns the directory:
  // two creators of one path at once are not detected (LogStore holds a lock).
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
  // The id every record checksum of this log is seeded with.
  std::uint64_t log_id() const noexcept { return log_id_; }
  bool direct_io() const noexcept { return reader_ != nullptr; }
  // File offset of block slot `slot`'s first header slot. Blocks are
  // numbered in log order (LogBlockHeader::block, the number their records
  // are seeded with) and sit in slots: the host chooses a block's slot, and
  // a slot is reused once its block is compacted away. The reads and writes
  // below take the slot; the header names both.
  std::uint64_t BlockOffset(std::uint64_t slot) const noexcept {
    return kLogFileHeaderBytes + slot * block_bytes_;
  }

  // The steps of the flush protocol (see the top of this file). WriteData
  // writes `bytes` of a block's data area at `offset`; WriteHeader writes
  // `header` into header slot header.sequence % 2 of block slot header.slot;
  // Sync is fdatasync (nothing when
  // options.sync is false). kInternal (kResourceExhausted for a full disk)
  // on an I/O error. With direct_io, `data - offset` must be the start of
  // the block's data-area image, aligned to kDirectIoAlignment (a
  // LogBlockBuffer's data() is), whose bytes below `offset` in the page
  // holding it are the block's durable bytes there: the write goes out in
  // whole pages from that page's start, zero past `offset + bytes`.
  Status WriteData(std::uint64_t slot, std::uint32_t offset, const char* data,
                   std::size_t bytes);
  Status WriteHeader(const LogBlockHeader& header);
  Status Sync();

  // Block slot `slot`'s newest valid header: among the header slots that
  // decode and name this block slot, the one of the newest block, then the
  // larger sequence. kNotFound if neither holds one (never written, torn,
  // or past the end of the file); kFailedPrecondition if a header slot
  // holds a header of another format version.
  Result<LogBlockHeader> ReadHeader(std::uint64_t slot) const;
  // Reads `bytes` of block slot `slot`'s data area from `offset`. kDataLoss
  // if the file ends first, kInternal on an I/O error.
  Status ReadData(std::uint64_t slot, std::uint32_t offset, std::size_t bytes,
                  char* out) const;
  Result<std::uint64_t> FileBytes() const;
  // Overwrites block slot `slot`'s two header slots and the first page of
  // its data area (its first record header) with zeros (not synced): the slot
  // then names no block and its first record validates at no seat. Recovery's
  // use, for a block it dropped.
  Status Wipe(std::uint64_t slot);
  // Cuts the file to `bytes` and syncs.
  Status Truncate(std::uint64_t bytes);

 private:
  // The handles of one log file: `file` takes the writes (direct or not);
  // `reader`, the buffered handle reads go through when `file` is direct,
  // is null otherwise (`file` reads too); `scratch` is the direct log's.
  struct Handles {
    std::unique_ptr<FileHandle> file;
    std::unique_ptr<FileHandle> reader;
    flush_internal::AlignedBytes scratch;
  };
  // Opens `path` as `options` say, the write handle as `mode` says.
  static Result<Handles> OpenHandles(Env& env, const std::string& path,
                                     FileOpenMode mode,
                                     const BlockLogOptions& options);
  BlockLog(Handles handles, std::string path, const LogFileInfo& info,
           bool sync)
      : file_(std::move(handles.file)),
        reader_(std::move(handles.reader)),
        scratch_(std::move(handles.scratch)),
        path_(std::move(path)),
        block_bytes_(info.block_bytes),
        log_id_(info.log_id),
        sync_(sync) {}
  const FileHandle& reader() const noexcept {
    return reader_ != nullptr ? *reader_ : *file_;
  }
  // WriteData with direct_io: `at` is the data area's file offset.
  Status WriteDataDirect(std::uint64_t at, std::uint32_t offset,
                         const char* data, std::size_t bytes);

  const std::unique_ptr<FileHandle> file_;
  const std::unique_ptr<FileHandle> reader_;
  // direct_io: a small write is copied here and padded, so that it goes
  // out as one aligned write (writes come from one thread at a time).
  const flush_internal::AlignedBytes scratch_;
  const std::string path_;
  const std::size_t block_bytes_;
  const std::uint64_t log_id_;
  const bool sync_;
};

// The in-memory image of one block's data area while it fills.
//
// Appends from many threads (LogStore's writers): TryReserve claims the next
// bytes of the block by one compare-and-swap on a state word, Fill encodes
// the record there with no lock, Complete publishes it. No reservation ever
// fails after it is made, so the block never has a hole. Seal reserves the
// last 16 bytes for the seal record (every other record leaves them free)
// and makes every later TryReserve fail.
//
// One flusher at a time (the host serialises it): Drain returns a boundary
// below which every reservation has completed (it waits for the ones in
// flight), and Advance folds the records up to it into used(),
// record_count(), chain_checksum() and sealed(), the block's state that a
// flush writes and a header names. Bytes below used() never change again.
//
// The state word: bits 0-31 the reserved end, 32-46 and 47-61 the number of
// reservations in flight of phase 0 and 1, bit 62 "sealed", bit 63 the
// current phase. Drain flips the phase: every reservation below the end it
// read then was taken in the old phase, so once that phase's count is zero
// all of them have completed (the count is read with acquire, each Complete
// subtracts with release: their bytes are visible). Drains never overlap,
// so the old phase's count is zero again before the next flip.
//
// Append and the single-threaded Seal (tests, tools, recovery) do all of it
// in one call.
class LogBlockBuffer {
 public:
  // Allocates data_bytes (the block's data area, aligned to
  // kDirectIoAlignment for a direct log's writes) for block `block` of the
  // log `log_id`, in block slot `slot`. Check ok() afterwards: a failed
  // allocation leaves a buffer that accepts nothing.
  LogBlockBuffer(std::uint64_t block, std::size_t data_bytes,
                 std::uint64_t log_id, std::uint32_t slot = 0) noexcept;
  LogBlockBuffer(const LogBlockBuffer&) = delete;
  LogBlockBuffer& operator=(const LogBlockBuffer&) = delete;

  bool ok() const noexcept { return data_ != nullptr; }
  std::uint64_t block() const noexcept { return block_; }
  std::uint32_t slot() const noexcept { return slot_; }
  const char* data() const noexcept { return data_.get(); }
  std::size_t capacity() const noexcept { return capacity_; }

  // --- Appends (any number of threads) --------------------------------------
  struct Reservation {
    std::uint32_t offset = 0;  // in the data area
    std::uint32_t phase = 0;   // what Complete needs
  };
  // Claims record_bytes at the end of the block; false if the block is
  // sealed or the record does not fit before the seal's bytes.
  bool TryReserve(std::size_t record_bytes, Reservation* r) noexcept;
  // Encodes the record at the reservation (made for its size); no lock.
  void Fill(const Reservation& r, LogRecordType type, std::uint32_t db,
            std::string_view key, std::string_view value) noexcept;
  // Publishes the filled reservation to Drain.
  void Complete(const Reservation& r) noexcept;
  // Reserves, fills and completes the seal record; no reservation succeeds
  // afterwards. No-op on a sealed block.
  void AppendSeal() noexcept;
  // The end of everything reserved so far (the seal included).
  std::uint32_t reserved() const noexcept {
    return static_cast<std::uint32_t>(state_.load(std::memory_order_acquire) &
                                      kOffsetMask);
  }
  bool Fits(std::size_t record_bytes) const noexcept;

  // --- The flusher (one at a time) ------------------------------------------
  // A boundary at or past used() below which every reservation completed;
  // waits (yielding) for the reservations in flight below it.
  std::uint32_t Drain() noexcept;
  // Folds the completed records in [used(), end) into the state below.
  void Advance(std::uint32_t end) noexcept;
  std::uint32_t used() const noexcept { return used_; }
  std::uint32_t record_count() const noexcept { return records_; }
  std::uint64_t chain_checksum() const noexcept { return chain_; }
  bool sealed() const noexcept { return sealed_; }

  // --- Single-threaded use (tests, tools, recovery) --------------------------
  // Appends one record (the caller checked Fits and the limits) and
  // returns its offset in the data area; used() moves past it.
  std::uint32_t Append(LogRecordType type, std::uint32_t db,
                       std::string_view key, std::string_view value) noexcept;
  // Appends the seal record; nothing fits afterwards.
  void Seal() noexcept;
  // Continues a block recovery found durable up to `used`, holding
  // `records` records with chain `chain`: later appends go above it. The
  // bytes below `used` are not in the buffer (they are on disk, durable);
  // `on_disk_sequence` and `on_disk_used` describe the block's newest header
  // on disk (0 and 0 if none).
  void Resume(std::uint32_t used, std::uint32_t records, std::uint64_t chain,
              std::uint32_t on_disk_sequence,
              std::uint32_t on_disk_used) noexcept;
  // After Resume: if `log` is direct, reads the durable bytes of the page
  // holding used() from its block slot slot() into the buffer, since the
  // next flush writes that page again from its start; nothing otherwise.
  // The log's read error if that fails.
  Status LoadBoundaryPage(const BlockLog& log);
  // Empties the buffer for reuse as `block` of the same log, in `slot`
  // (no append in flight; the caller publishes it afterwards).
  void Reset(std::uint64_t block, std::uint32_t slot) noexcept {
    block_ = block;
    slot_ = slot;
    state_.store(0, std::memory_order_relaxed);
    used_ = records_ = 0;
    chain_ = 0;
    sealed_ = false;
    flushed = 0;
    durable = {};
    sequence = header_used = 0;
  }
  // The header naming the block's state at used() (a flush's snapshot).
  LogBlockHeader HeaderAtUsed(std::uint32_t seq) const noexcept {
    return {block_, seq, used_, records_, chain_, slot_};
  }

  // Flush bookkeeping, kept by the flusher.
  std::uint32_t flushed = 0;      // durable boundary (== durable.used_bytes)
  LogBlockHeader durable;         // the block's state at `flushed`
  std::uint32_t sequence = 0;     // sequence of the newest synced header
  std::uint32_t header_used = 0;  // the boundary that header names

 private:
  static constexpr std::uint64_t kOffsetMask = 0xffffffffu;
  static constexpr int kCountShift[2] = {32, 47};
  static constexpr std::uint64_t kCountMask = 0x7fff;
  static constexpr std::uint64_t kSealedBit = std::uint64_t{1} << 62;
  static constexpr std::uint64_t kPhaseBit = std::uint64_t{1} << 63;
  static std::uint32_t PhaseOf(std::uint64_t s) noexcept {
    return static_cast<std::uint32_t>(s >> 63);
  }
  // Reserves `bytes` at the end if `fits(end)`; `seal` sets the sealed bit.
  bool Reserve(std::size_t bytes, bool seal, Reservation* r) noexcept;

  std::uint64_t block_;
  std::uint32_t slot_;
  std::size_t capacity_;
  std::uint64_t log_id_;
  flush_internal::AlignedBytes data_;
  std::atomic<std::uint64_t> state_{0};
  // The flusher's: the records folded so far.
  std::uint32_t used_ = 0;
  std::uint32_t records_ = 0;
  std::uint64_t chain_ = 0;
  bool sealed_ = false;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_FLUSH_BLOCK_LOG_H_
