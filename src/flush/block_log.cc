// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/flush/block_log.h"

#include <new>
#include <string>
#include <utility>

CAIRN_NAMESPACE_BEGIN

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
  std::unique_ptr<BlockLog> log(new (std::nothrow) BlockLog(
      std::move(file).value(), path, block_bytes, options.sync));
  if (log == nullptr) return ResourceExhaustedError("BlockLog");
  char header[kLogFileHeaderBytes];
  EncodeLogFileHeader(block_bytes,
                      std::span<char, kLogFileHeaderBytes>(header));
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
  Result<std::uint64_t> block_bytes =
      DecodeLogFileHeader(std::span<const char>(header, *n));
  if (!block_bytes.ok()) {
    return Status(block_bytes.status().code(),
                  std::string(block_bytes.status().message()) + ": " + path);
  }
  std::unique_ptr<BlockLog> log(new (std::nothrow) BlockLog(
      std::move(file).value(), path, static_cast<std::size_t>(*block_bytes),
      options.sync));
  if (log == nullptr) return ResourceExhaustedError("BlockLog");
  return log;
}

BlockLog::~BlockLog() = default;

Status BlockLog::Sync() {
  if (!sync_) return Status();
  return file_->Sync();
}

Status BlockLog::WriteData(std::uint64_t block, std::uint32_t offset,
                           const char* data, std::size_t bytes) {
  if (offset > data_bytes() || bytes > data_bytes() - offset) {
    return InvalidArgumentError("write past the end of a block");
  }
  return file_->WriteAt(BlockOffset(block) + kLogBlockDataOffset + offset,
                        std::string_view(data, bytes));
}

Status BlockLog::WriteHeader(const LogBlockHeader& header) {
  if (header.used_bytes > data_bytes()) {
    return InvalidArgumentError("header boundary past the end of a block");
  }
  char slot[kLogHeaderSlotBytes];
  EncodeLogBlockHeader(header, std::span<char, kLogHeaderSlotBytes>(slot));
  return file_->WriteAt(
      BlockOffset(header.block) + (header.sequence % 2) * kLogHeaderSlotBytes,
      std::string_view(slot, sizeof(slot)));
}

Status BlockLog::FlushBlock(const LogBlockHeader& header, const char* data,
                            std::uint32_t from) {
  if (from > header.used_bytes) {
    return InvalidArgumentError("flush boundary moves backwards");
  }
  CAIRN_RETURN_IF_ERROR(
      WriteData(header.block, from, data + from, header.used_bytes - from));
  CAIRN_RETURN_IF_ERROR(Sync());
  CAIRN_RETURN_IF_ERROR(WriteHeader(header));
  return Sync();
}

Result<LogBlockHeader> BlockLog::ReadHeader(std::uint64_t block) const {
  char slots[2 * kLogHeaderSlotBytes];
  Result<std::size_t> n = file_->ReadAt(BlockOffset(block), slots);
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
    if (state != LogSlotState::kValid || h.block != block ||
        h.sequence % 2 != static_cast<std::uint32_t>(s) ||
        h.used_bytes > data_bytes()) {
      continue;
    }
    if (!found || h.sequence > best.sequence) best = h;
    found = true;
  }
  if (found) return best;
  if (wrong_version) {
    return FailedPreconditionError("block " + std::to_string(block) +
                                   " has a header of another format version");
  }
  return NotFoundError();
}

Status BlockLog::ReadData(std::uint64_t block, std::uint32_t offset,
                          std::size_t bytes, char* out) const {
  if (offset > data_bytes() || bytes > data_bytes() - offset) {
    return InvalidArgumentError("read past the end of a block");
  }
  Result<std::size_t> n =
      file_->ReadAt(BlockOffset(block) + kLogBlockDataOffset + offset,
                    std::span<char>(out, bytes));
  if (!n.ok()) return n.status();
  if (*n != bytes) {
    return DataLossError("log file ends inside block " + std::to_string(block));
  }
  return Status();
}

Result<std::uint64_t> BlockLog::FileBytes() const { return file_->Size(); }

Status BlockLog::Truncate(std::uint64_t bytes) {
  CAIRN_RETURN_IF_ERROR(file_->Truncate(bytes));
  return Sync();
}

LogBlockBuffer::LogBlockBuffer(std::uint64_t block,
                               std::size_t data_bytes) noexcept
    : block_(block),
      capacity_(data_bytes),
      data_(new (std::nothrow) char[data_bytes]) {
  if (data_ == nullptr) capacity_ = 0;
}

std::uint32_t LogBlockBuffer::Append(LogRecordType type, std::uint32_t db,
                                     std::string_view key,
                                     std::string_view value) noexcept {
  const std::uint32_t offset = used_;
  const std::uint32_t checksum =
      EncodeLogRecord(type, db, key, value, data_.get() + offset);
  used_ += static_cast<std::uint32_t>(LogRecordBytes(key.size(), value.size()));
  ++records_;
  chain_ = LogChainChecksum(chain_, checksum);
  return offset;
}

CAIRN_NAMESPACE_END
