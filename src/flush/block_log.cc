// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/flush/block_log.h"

#include <chrono>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "cairn/base/internal/coding.h"

CAIRN_NAMESPACE_BEGIN

namespace flush_internal {

AlignedBytes NewAlignedBytes(std::size_t bytes) noexcept {
  return AlignedBytes(static_cast<char*>(::operator new[](
      bytes, std::align_val_t{kDirectIoAlignment}, std::nothrow)));
}

}  // namespace flush_internal

namespace {

// Pages of the data-area image are pages of the file, and every header is
// one whole page, so a direct log's writes need no other alignment work.
constexpr std::size_t kPage = kDirectIoAlignment;
static_assert(kLogFileHeaderBytes % kPage == 0 &&
              kLogHeaderSlotBytes % kPage == 0 &&
              kLogBlockDataOffset % kPage == 0);

// A direct write that spans at most this many bytes, padded, is copied into
// the scratch pages and goes out as one write (a durable SET's usual
// flush); a longer one goes out from the block image, and its last,
// partial page from the scratch pages: two writes, but no copy of a block.
constexpr std::size_t kScratchBytes = std::size_t{64} << 10;

constexpr std::size_t AlignDown(std::size_t x) { return x / kPage * kPage; }
constexpr std::size_t AlignUp(std::size_t x) {
  return AlignDown(x + kPage - 1);
}

// A fresh log id: random_device where it works, mixed with the clock and an
// address so two logs made in one instant still differ.
std::uint64_t NewLogId() noexcept {
  std::uint64_t seed = 0;
  try {
    std::random_device device;
    seed = (std::uint64_t{device()} << 32) ^ device();
  } catch (...) {
    // No entropy source: the clock and address below still vary.
  }
  char mix[24];
  base_internal::StoreFixed<std::uint64_t>(mix, seed);
  base_internal::StoreFixed<std::uint64_t>(
      mix + 8,
      static_cast<std::uint64_t>(
          std::chrono::steady_clock::now().time_since_epoch().count()));
  base_internal::StoreFixed<std::uint64_t>(
      mix + 16,
      static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&seed)));
  return base_internal::Checksum64(mix, sizeof(mix), 0x6c6f6769);  // "logi"
}

}  // namespace

Status BlockLog::CheckBlockBytes(std::size_t block_bytes) {
  if (block_bytes < kLogMinBlockBytes || block_bytes > kLogMaxBlockBytes ||
      block_bytes % 4096 != 0) {
    return InvalidArgumentError(
        "block_bytes must be a multiple of 4096 between 12 KiB and 1 GiB");
  }
  return Status::Ok();
}

Result<BlockLog::Handles> BlockLog::OpenHandles(
    Env& env, const std::string& path, FileOpenMode mode,
    const BlockLogOptions& options) {
  const bool direct = options.direct_io && mode != FileOpenMode::kReadOnly;
  Result<std::unique_ptr<FileHandle>> file =
      direct ? env.NewDirectFile(path, mode) : env.NewFile(path, mode);
  if (!file.ok()) return file.status();
  Handles handles;
  handles.file = std::move(file).value();
  if (direct) {
    Result<std::unique_ptr<FileHandle>> reader =
        env.NewFile(path, FileOpenMode::kReadOnly);
    if (!reader.ok()) return reader.status();
    handles.reader = std::move(reader).value();
    handles.scratch = flush_internal::NewAlignedBytes(kScratchBytes);
    if (handles.scratch == nullptr) {
      return ResourceExhaustedError("BlockLog scratch pages");
    }
  }
  return handles;
}

Result<std::unique_ptr<BlockLog>> BlockLog::Create(
    const std::string& path, const BlockLogOptions& options) {
  const std::size_t block_bytes = options.block_bytes;
  CAIRN_RETURN_IF_ERROR(CheckBlockBytes(block_bytes));
  Env& env = *Env::OrDefault(options.env);
  Result<bool> exists = env.FileExists(path);
  if (!exists.ok()) return exists.status();
  if (*exists) return AlreadyExistsError("log file exists: " + path);
  // Truncating, not exclusive: a crash may have left a log.tmp behind.
  const std::string tmp = path + ".tmp";
  Result<Handles> handles =
      OpenHandles(env, tmp, FileOpenMode::kCreateOrTruncate, options);
  if (!handles.ok()) return handles.status();
  LogFileInfo info;
  info.block_bytes = block_bytes;
  info.log_id = NewLogId();
  std::unique_ptr<BlockLog> log(new (std::nothrow) BlockLog(
      std::move(handles).value(), path, info, options.sync));
  if (log == nullptr) return ResourceExhaustedError("BlockLog");
  alignas(kDirectIoAlignment) char header[kLogFileHeaderBytes];
  EncodeLogFileHeader(info, std::span<char, kLogFileHeaderBytes>(header));
  CAIRN_RETURN_IF_ERROR(
      log->file_->WriteAt(0, std::string_view(header, sizeof(header))));
  CAIRN_RETURN_IF_ERROR(log->Sync());
  // The handles stay open across the rename: it is the same file.
  CAIRN_RETURN_IF_ERROR(env.Rename(tmp, path));
  if (options.sync) CAIRN_RETURN_IF_ERROR(env.SyncDir(DirectoryOf(path)));
  return log;
}

Result<std::unique_ptr<BlockLog>> BlockLog::Open(
    const std::string& path, const BlockLogOptions& options) {
  Result<Handles> handles = OpenHandles(
      *Env::OrDefault(options.env), path,
      options.read_only ? FileOpenMode::kReadOnly : FileOpenMode::kReadWrite,
      options);
  if (!handles.ok()) {
    if (handles.status().code() == StatusCode::kNotFound) {
      return NotFoundError("no log file: " + path);
    }
    return handles.status();
  }
  char header[kLogFileHeaderBytes];
  const FileHandle& reader =
      handles->reader != nullptr ? *handles->reader : *handles->file;
  Result<std::size_t> n = reader.ReadAt(0, header);
  if (!n.ok()) return n.status();
  Result<LogFileInfo> info =
      DecodeLogFileHeader(std::span<const char>(header, *n));
  if (!info.ok()) {
    return Status(info.status().code(),
                  std::string(info.status().message()) + ": " + path);
  }
  std::unique_ptr<BlockLog> log(new (std::nothrow) BlockLog(
      std::move(handles).value(), path, *info, options.sync));
  if (log == nullptr) return ResourceExhaustedError("BlockLog");
  return log;
}

BlockLog::~BlockLog() = default;

Status BlockLog::Sync() {
  if (!sync_) return Status();
  return file_->Sync();
}

Status BlockLog::WriteData(std::uint64_t slot, std::uint32_t offset,
                           const char* data, std::size_t bytes) {
  if (offset > data_bytes() || bytes > data_bytes() - offset) {
    return InvalidArgumentError("write past the end of a block");
  }
  const std::uint64_t at = BlockOffset(slot) + kLogBlockDataOffset;
  if (direct_io()) return WriteDataDirect(at, offset, data, bytes);
  return file_->WriteAt(at + offset, std::string_view(data, bytes));
}

Status BlockLog::WriteDataDirect(std::uint64_t at, std::uint32_t offset,
                                 const char* data, std::size_t bytes) {
  const char* const image = data - offset;  // aligned: the caller's promise
  const std::size_t begin = AlignDown(offset);
  const std::size_t end = offset + bytes;
  const std::size_t last_page = AlignDown(end);
  // image[from, end) into the scratch pages, zero to the end of the page:
  // the bytes past the records are not written yet (appends may be
  // filling them meanwhile), and zeros end recovery's scan there.
  auto padded = [&](std::size_t from) {
    const std::size_t n = end - from;
    std::memcpy(scratch_.get(), image + from, n);
    std::memset(scratch_.get() + n, 0, AlignUp(n) - n);
    return std::string_view(scratch_.get(), AlignUp(n));
  };
  if (AlignUp(end) - begin <= kScratchBytes) {
    return file_->WriteAt(at + begin, padded(begin));
  }
  CAIRN_RETURN_IF_ERROR(file_->WriteAt(
      at + begin, std::string_view(image + begin, last_page - begin)));
  if (last_page == end) return Status();
  return file_->WriteAt(at + last_page, padded(last_page));
}

Status BlockLog::WriteHeader(const LogBlockHeader& header) {
  if (header.used_bytes > data_bytes()) {
    return InvalidArgumentError("header boundary past the end of a block");
  }
  alignas(kDirectIoAlignment) char slot[kLogHeaderSlotBytes];
  EncodeLogBlockHeader(header, std::span<char, kLogHeaderSlotBytes>(slot));
  return file_->WriteAt(
      BlockOffset(header.slot) + (header.sequence % 2) * kLogHeaderSlotBytes,
      std::string_view(slot, sizeof(slot)));
}

Result<LogBlockHeader> BlockLog::ReadHeader(std::uint64_t slot) const {
  char slots[2 * kLogHeaderSlotBytes];
  Result<std::size_t> n = reader().ReadAt(BlockOffset(slot), slots);
  if (!n.ok()) return n.status();
  bool found = false;
  bool wrong_version = false;
  LogBlockHeader best;
  for (int s = 0; s < 2; ++s) {
    const std::size_t begin = s * kLogHeaderSlotBytes;
    if (*n < begin + kLogHeaderSlotBytes) break;
    LogBlockHeader h;
    const LogSlotState state = DecodeLogBlockHeader(
        std::span<const char>(slots + begin, kLogHeaderSlotBytes), &h);
    if (state == LogSlotState::kWrongVersion) wrong_version = true;
    if (state != LogSlotState::kValid || h.slot != slot ||
        h.sequence % 2 != static_cast<std::uint32_t>(s) ||
        h.used_bytes > data_bytes()) {
      continue;
    }
    // A reused slot may still hold a header of the block that had it
    // before in its other header slot: the newer block wins.
    if (!found || h.block > best.block ||
        (h.block == best.block && h.sequence > best.sequence)) {
      best = h;
    }
    found = true;
  }
  if (found) return best;
  if (wrong_version) {
    return FailedPreconditionError("block slot " + std::to_string(slot) +
                                   " has a header of another format version");
  }
  return NotFoundError();
}

Status BlockLog::ReadData(std::uint64_t slot, std::uint32_t offset,
                          std::size_t bytes, char* out) const {
  if (offset > data_bytes() || bytes > data_bytes() - offset) {
    return InvalidArgumentError("read past the end of a block");
  }
  Result<std::size_t> n =
      reader().ReadAt(BlockOffset(slot) + kLogBlockDataOffset + offset,
                      std::span<char>(out, bytes));
  if (!n.ok()) return n.status();
  if (*n != bytes) {
    return DataLossError("log file ends inside block slot " +
                         std::to_string(slot));
  }
  return Status();
}

Result<std::uint64_t> BlockLog::FileBytes() const { return file_->Size(); }

Status BlockLog::Wipe(std::uint64_t slot) {
  // The whole first page of the data area, not only its first record
  // header: whole pages, which a direct log can write.
  alignas(kDirectIoAlignment) static const char
      kZeros[kLogBlockDataOffset + kPage] = {};
  return file_->WriteAt(BlockOffset(slot),
                        std::string_view(kZeros, sizeof(kZeros)));
}

Status BlockLog::Truncate(std::uint64_t bytes) {
  CAIRN_RETURN_IF_ERROR(file_->Truncate(bytes));
  return Sync();
}

Status LogBlockBuffer::LoadBoundaryPage(const BlockLog& log) {
  if (!log.direct_io()) return Status();
  const std::size_t page = AlignDown(used_);
  if (page == used_) return Status();
  return log.ReadData(slot_, static_cast<std::uint32_t>(page), used_ - page,
                      data_.get() + page);
}

LogBlockBuffer::LogBlockBuffer(std::uint64_t block, std::size_t data_bytes,
                               std::uint64_t log_id,
                               std::uint32_t slot) noexcept
    : block_(block),
      slot_(slot),
      capacity_(data_bytes),
      log_id_(log_id),
      data_(flush_internal::NewAlignedBytes(data_bytes)) {
  if (data_ == nullptr) capacity_ = 0;
}

bool LogBlockBuffer::Fits(std::size_t record_bytes) const noexcept {
  const std::uint64_t s = state_.load(std::memory_order_relaxed);
  const std::uint64_t end = s & kOffsetMask;
  return ok() && (s & kSealedBit) == 0 && capacity_ >= kLogSealRecordBytes &&
         record_bytes <= capacity_ - kLogSealRecordBytes - end;
}

bool LogBlockBuffer::Reserve(std::size_t bytes, bool seal,
                             Reservation* r) noexcept {
  if (!ok() || capacity_ < kLogSealRecordBytes) return false;
  // Every record but the seal leaves the seal's bytes free.
  const std::uint64_t limit =
      seal ? capacity_ : capacity_ - kLogSealRecordBytes;
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  for (;;) {
    const std::uint64_t end = s & kOffsetMask;
    if ((s & kSealedBit) != 0 || end > limit || bytes > limit - end) {
      return false;
    }
    const std::uint32_t phase = PhaseOf(s);
    if (((s >> kCountShift[phase]) & kCountMask) == kCountMask) {
      // 32767 appends in flight on one block: wait for one to complete.
      std::this_thread::yield();
      s = state_.load(std::memory_order_relaxed);
      continue;
    }
    std::uint64_t next = s + bytes + (std::uint64_t{1} << kCountShift[phase]);
    if (seal) next |= kSealedBit;
    // acq_rel: the reservation is ordered after the block's publication
    // (Reset) and before this thread's Fill.
    if (state_.compare_exchange_weak(s, next, std::memory_order_acq_rel,
                                     std::memory_order_relaxed)) {
      *r = {static_cast<std::uint32_t>(end), phase};
      return true;
    }
  }
}

bool LogBlockBuffer::TryReserve(std::size_t record_bytes,
                                Reservation* r) noexcept {
  return Reserve(record_bytes, /*seal=*/false, r);
}

void LogBlockBuffer::Fill(const Reservation& r, LogRecordType type,
                          std::uint32_t db, std::string_view key,
                          std::string_view value) noexcept {
  (void)EncodeLogRecord(type, db, key, value, {log_id_, block_, r.offset},
                        data_.get() + r.offset);
}

void LogBlockBuffer::Complete(const Reservation& r) noexcept {
  // release: Drain's acquire of the count sees the filled bytes.
  state_.fetch_sub(std::uint64_t{1} << kCountShift[r.phase],
                   std::memory_order_release);
}

void LogBlockBuffer::AppendSeal() noexcept {
  Reservation r;
  if (!Reserve(kLogSealRecordBytes, /*seal=*/true, &r)) return;
  Fill(r, LogRecordType::kSeal, 0, {}, {});
  Complete(r);
}

std::uint32_t LogBlockBuffer::Drain() noexcept {
  const std::uint64_t before =
      state_.fetch_xor(kPhaseBit, std::memory_order_acq_rel);
  const int shift = kCountShift[PhaseOf(before)];
  while (((state_.load(std::memory_order_acquire) >> shift) & kCountMask) !=
         0) {
    std::this_thread::yield();
  }
  return static_cast<std::uint32_t>(before & kOffsetMask);
}

void LogBlockBuffer::Advance(std::uint32_t end) noexcept {
  const char* const data = data_.get();
  while (used_ < end) {
    const char* p = data + used_;
    const std::size_t bytes = LogRecordBytesFromHeader(
        std::span<const char, kLogRecordHeaderBytes>(p, kLogRecordHeaderBytes));
    if (base_internal::LoadFixed<std::uint8_t>(p + 4) ==
        static_cast<std::uint8_t>(LogRecordType::kSeal)) {
      sealed_ = true;
    }
    chain_ =
        LogChainChecksum(chain_, base_internal::LoadFixed<std::uint32_t>(p));
    ++records_;
    used_ += static_cast<std::uint32_t>(bytes);
  }
}

std::uint32_t LogBlockBuffer::Append(LogRecordType type, std::uint32_t db,
                                     std::string_view key,
                                     std::string_view value) noexcept {
  Reservation r;
  if (!TryReserve(LogRecordBytes(key.size(), value.size()), &r)) {
    return used_;  // the caller checked Fits
  }
  Fill(r, type, db, key, value);
  Complete(r);
  Advance(reserved());
  return r.offset;
}

void LogBlockBuffer::Seal() noexcept {
  AppendSeal();
  Advance(reserved());
}

void LogBlockBuffer::Resume(std::uint32_t used, std::uint32_t records,
                            std::uint64_t chain, std::uint32_t on_disk_sequence,
                            std::uint32_t on_disk_used) noexcept {
  state_.store(used, std::memory_order_relaxed);
  used_ = used;
  records_ = records;
  chain_ = chain;
  sealed_ = false;
  flushed = used;
  durable = HeaderAtUsed(0);
  sequence = on_disk_sequence;
  header_used = on_disk_used;
}

CAIRN_NAMESPACE_END
