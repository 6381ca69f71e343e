// Copyright 2026 The cairn Authors.

#include "cairn/flush/block_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <utility>

CAIRN_NAMESPACE_BEGIN
namespace {

// An operating-system call failed: kResourceExhausted for a full disk or
// quota, kInternal otherwise, with the errno text.
Status IoError(const char* what, const std::string& path, int error) {
  const std::string message =
      std::string(what) + " " + path + ": " + std::strerror(error);
  return error == ENOSPC || error == EDQUOT ? ResourceExhaustedError(message)
                                            : InternalError(message);
}

// Reads up to `bytes` at `offset`; returns the count read (short at EOF) or
// -1 with errno set.
ssize_t ReadFully(int fd, std::uint64_t offset, char* out, std::size_t bytes) {
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, out + done, bytes - done,
                              static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(done);
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
  const int fd =
      ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return AlreadyExistsError("log file exists: " + path);
    return IoError("cannot create", path, errno);
  }
  std::unique_ptr<BlockLog> log(
      new (std::nothrow) BlockLog(fd, path, block_bytes, options.sync));
  if (log == nullptr) {
    ::close(fd);
    return ResourceExhaustedError("BlockLog");
  }
  char header[kLogFileHeaderBytes];
  EncodeLogFileHeader(block_bytes,
                      std::span<char, kLogFileHeaderBytes>(header));
  CAIRN_RETURN_IF_ERROR(log->WriteAt(0, header, sizeof(header)));
  CAIRN_RETURN_IF_ERROR(log->Sync());
  return log;
}

Result<std::unique_ptr<BlockLog>> BlockLog::Open(
    const std::string& path, const BlockLogOptions& options) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError("no log file: " + path);
    return IoError("cannot open", path, errno);
  }
  char header[kLogFileHeaderBytes];
  const ssize_t n = ReadFully(fd, 0, header, sizeof(header));
  if (n < 0) {
    const int error = errno;
    ::close(fd);
    return IoError("cannot read", path, error);
  }
  Result<std::uint64_t> block_bytes = DecodeLogFileHeader(
      std::span<const char>(header, static_cast<std::size_t>(n)));
  if (!block_bytes.ok()) {
    ::close(fd);
    return Status(block_bytes.status().code(),
                  std::string(block_bytes.status().message()) + ": " + path);
  }
  std::unique_ptr<BlockLog> log(new (std::nothrow) BlockLog(
      fd, path, static_cast<std::size_t>(*block_bytes), options.sync));
  if (log == nullptr) {
    ::close(fd);
    return ResourceExhaustedError("BlockLog");
  }
  return log;
}

BlockLog::~BlockLog() { ::close(fd_); }

Status BlockLog::WriteAt(std::uint64_t offset, const char* data,
                         std::size_t bytes) {
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pwrite(fd_, data + done, bytes - done,
                               static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("cannot write", path_, errno);
    }
    done += static_cast<std::size_t>(n);
  }
  return Status();
}

Status BlockLog::Sync() {
  if (!sync_) return Status();
  while (::fdatasync(fd_) != 0) {
    if (errno != EINTR) return IoError("cannot sync", path_, errno);
  }
  return Status();
}

Status BlockLog::WriteData(std::uint64_t block, std::uint32_t offset,
                           const char* data, std::size_t bytes) {
  if (offset > data_bytes() || bytes > data_bytes() - offset) {
    return InvalidArgumentError("write past the end of a block");
  }
  return WriteAt(BlockOffset(block) + kLogBlockDataOffset + offset, data,
                 bytes);
}

Status BlockLog::WriteHeader(const LogBlockHeader& header) {
  if (header.used_bytes > data_bytes()) {
    return InvalidArgumentError("header boundary past the end of a block");
  }
  char slot[kLogHeaderSlotBytes];
  EncodeLogBlockHeader(header, std::span<char, kLogHeaderSlotBytes>(slot));
  return WriteAt(
      BlockOffset(header.block) + (header.sequence % 2) * kLogHeaderSlotBytes,
      slot, sizeof(slot));
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
  const ssize_t n = ReadFully(fd_, BlockOffset(block), slots, sizeof(slots));
  if (n < 0) return IoError("cannot read", path_, errno);
  bool found = false;
  bool wrong_version = false;
  LogBlockHeader best;
  for (int s = 0; s < 2; ++s) {
    const std::size_t begin = s * kLogHeaderSlotBytes;
    if (static_cast<std::size_t>(n) < begin + kLogHeaderSlotBytes) break;
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
  const ssize_t n = ReadFully(
      fd_, BlockOffset(block) + kLogBlockDataOffset + offset, out, bytes);
  if (n < 0) return IoError("cannot read", path_, errno);
  if (static_cast<std::size_t>(n) != bytes) {
    return DataLossError("log file ends inside block " + std::to_string(block));
  }
  return Status();
}

Result<std::uint64_t> BlockLog::FileBytes() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return IoError("cannot stat", path_, errno);
  return static_cast<std::uint64_t>(st.st_size);
}

Status BlockLog::Truncate(std::uint64_t bytes) {
  while (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
    if (errno != EINTR) return IoError("cannot truncate", path_, errno);
  }
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
