// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/flush/block_log.h"

#include <chrono>
#include <new>
#include <random>
#include <string>
#include <utility>

#include "cairn/base/internal/coding.h"

CAIRN_NAMESPACE_BEGIN
namespace {

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
  Result<std::unique_ptr<FileHandle>> file =
      env.NewFile(tmp, FileOpenMode::kCreateOrTruncate);
  if (!file.ok()) return file.status();
  LogFileInfo info;
  info.block_bytes = block_bytes;
  info.log_id = NewLogId();
  std::unique_ptr<BlockLog> log(new (std::nothrow) BlockLog(
      std::move(file).value(), path, info, options.sync));
  if (log == nullptr) return ResourceExhaustedError("BlockLog");
  char header[kLogFileHeaderBytes];
  EncodeLogFileHeader(info, std::span<char, kLogFileHeaderBytes>(header));
  CAIRN_RETURN_IF_ERROR(
      log->file_->WriteAt(0, std::string_view(header, sizeof(header))));
  CAIRN_RETURN_IF_ERROR(log->Sync());
  // The handle stays open across the rename: it is the same file.
  CAIRN_RETURN_IF_ERROR(env.Rename(tmp, path));
  if (options.sync) CAIRN_RETURN_IF_ERROR(env.SyncDir(DirectoryOf(path)));
  return log;
}

Result<std::unique_ptr<BlockLog>> BlockLog::Open(
    const std::string& path, const BlockLogOptions& options) {
  Result<std::unique_ptr<FileHandle>> file =
      Env::OrDefault(options.env)
          ->NewFile(path, options.read_only ? FileOpenMode::kReadOnly
                                            : FileOpenMode::kReadWrite);
  if (!file.ok()) {
    if (file.status().code() == StatusCode::kNotFound) {
      return NotFoundError("no log file: " + path);
    }
    return file.status();
  }
  char header[kLogFileHeaderBytes];
  Result<std::size_t> n = (*file)->ReadAt(0, header);
  if (!n.ok()) return n.status();
  Result<LogFileInfo> info =
      DecodeLogFileHeader(std::span<const char>(header, *n));
  if (!info.ok()) {
    return Status(info.status().code(),
                  std::string(info.status().message()) + ": " + path);
  }
  std::unique_ptr<BlockLog> log(new (std::nothrow) BlockLog(
      std::move(file).value(), path, *info, options.sync));
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
  return file_->WriteAt(BlockOffset(slot) + kLogBlockDataOffset + offset,
                        std::string_view(data, bytes));
}

Status BlockLog::WriteHeader(const LogBlockHeader& header) {
  if (header.used_bytes > data_bytes()) {
    return InvalidArgumentError("header boundary past the end of a block");
  }
  char slot[kLogHeaderSlotBytes];
  EncodeLogBlockHeader(header, std::span<char, kLogHeaderSlotBytes>(slot));
  return file_->WriteAt(
      BlockOffset(header.slot) + (header.sequence % 2) * kLogHeaderSlotBytes,
      std::string_view(slot, sizeof(slot)));
}

Result<LogBlockHeader> BlockLog::ReadHeader(std::uint64_t slot) const {
  char slots[2 * kLogHeaderSlotBytes];
  Result<std::size_t> n = file_->ReadAt(BlockOffset(slot), slots);
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
      file_->ReadAt(BlockOffset(slot) + kLogBlockDataOffset + offset,
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
  const std::string zeros(kLogBlockDataOffset + kLogRecordHeaderBytes, '\0');
  return file_->WriteAt(BlockOffset(slot), zeros);
}

Status BlockLog::Truncate(std::uint64_t bytes) {
  CAIRN_RETURN_IF_ERROR(file_->Truncate(bytes));
  return Sync();
}

LogBlockBuffer::LogBlockBuffer(std::uint64_t block, std::size_t data_bytes,
                               std::uint64_t log_id,
                               std::uint32_t slot) noexcept
    : block_(block),
      slot_(slot),
      capacity_(data_bytes),
      log_id_(log_id),
      data_(new (std::nothrow) char[data_bytes]) {
  if (data_ == nullptr) capacity_ = 0;
}

std::uint32_t LogBlockBuffer::Append(LogRecordType type, std::uint32_t db,
                                     std::string_view key,
                                     std::string_view value) noexcept {
  const std::uint32_t offset = used_;
  const std::uint32_t checksum = EncodeLogRecord(
      type, db, key, value, {log_id_, block_, offset}, data_.get() + offset);
  used_ += static_cast<std::uint32_t>(LogRecordBytes(key.size(), value.size()));
  ++records_;
  chain_ = LogChainChecksum(chain_, checksum);
  return offset;
}

void LogBlockBuffer::Seal() noexcept {
  if (sealed_ || !ok()) return;
  // Fits() kept kLogSealRecordBytes free for this.
  (void)Append(LogRecordType::kSeal, 0, {}, {});
  sealed_ = true;
}

void LogBlockBuffer::Resume(std::uint32_t used, std::uint32_t records,
                            std::uint64_t chain, std::uint32_t on_disk_sequence,
                            std::uint32_t on_disk_used) noexcept {
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
