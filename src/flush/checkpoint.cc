// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The LogStore checkpoint file (cairn/flush/internal/checkpoint.h).

#include "cairn/flush/internal/checkpoint.h"

#include <memory>
#include <utility>

#include "cairn/base/internal/coding.h"

CAIRN_NAMESPACE_BEGIN
namespace flush_internal {
namespace {

using base_internal::AppendSeal;
using base_internal::CheckSealedHeader;
using base_internal::kSealBytes;
using base_internal::LoadFixed;
using base_internal::PutFixed;
using base_internal::SealedHeaderCheck;
using base_internal::StoreFixed;

constexpr std::uint64_t kCheckpointSeed = 0x636b7074;  // "ckpt"
// Where the header keeps the entry total, which Finish fills in.
constexpr std::size_t kEntriesField = 32;

Status Truncated(const std::string& path) {
  return DataLossError("checkpoint is truncated: " + path);
}

}  // namespace

std::string CheckpointPath(const std::string& dir) {
  return dir + "/checkpoint";
}
std::string CheckpointTempPath(const std::string& dir) {
  return dir + "/checkpoint.tmp";
}

CheckpointEncoder::CheckpointEncoder(std::uint32_t partitions,
                                     std::uint32_t databases,
                                     std::uint64_t block,
                                     std::uint32_t offset) {
  PutFixed<std::uint64_t>(&out_, kCheckpointMagic);
  PutFixed<std::uint32_t>(&out_, kCheckpointVersion);
  PutFixed<std::uint32_t>(&out_, partitions);
  PutFixed<std::uint32_t>(&out_, databases);
  PutFixed<std::uint32_t>(&out_, offset);
  PutFixed<std::uint64_t>(&out_, block);
  PutFixed<std::uint64_t>(&out_, 0);  // the entry total, filled by Finish
}

void CheckpointEncoder::AddMapCount(std::uint64_t entries) {
  PutFixed<std::uint64_t>(&out_, entries);
  entries_ += entries;
}

void CheckpointEncoder::AddEntry(std::uint32_t db, std::string_view key,
                                 const RecordLocation& location) {
  PutFixed<std::uint32_t>(&out_, db);
  PutFixed<std::uint32_t>(&out_, static_cast<std::uint32_t>(key.size()));
  PutFixed<std::uint32_t>(&out_, location.block);
  PutFixed<std::uint32_t>(&out_, location.offset);
  PutFixed<std::uint32_t>(&out_, location.length);
  out_.append(key);
}

std::string CheckpointEncoder::Finish() && {
  StoreFixed<std::uint64_t>(out_.data() + kEntriesField, entries_);
  AppendSeal(&out_, kCheckpointSeed);
  return std::move(out_);
}

Status WriteCheckpointFile(Env& env, const std::string& dir,
                           std::string_view bytes, bool sync) {
  const std::string tmp = CheckpointTempPath(dir);
  // Truncating, not exclusive: a crash may have left a checkpoint.tmp.
  Result<std::unique_ptr<FileHandle>> file =
      env.NewFile(tmp, FileOpenMode::kCreateOrTruncate);
  if (!file.ok()) return file.status();
  CAIRN_RETURN_IF_ERROR((*file)->Append(bytes));
  if (sync) CAIRN_RETURN_IF_ERROR((*file)->Sync());
  // A close error is dropped, as LogStore always has: with sync on the
  // bytes are already durable.
  (*file)->Close().IgnoreError();
  CAIRN_RETURN_IF_ERROR(env.Rename(tmp, CheckpointPath(dir)));
  return sync ? env.SyncDir(dir) : Status();
}

Result<CheckpointFile> CheckpointFile::Read(Env& env, const std::string& path) {
  CheckpointFile file;
  file.path_ = path;
  CAIRN_RETURN_IF_ERROR(ReadWholeFile(env, path, &file.bytes_));
  const std::string& data = file.bytes_;
  if (data.size() < kCheckpointHeaderBytes + kSealBytes) return Truncated(path);
  const char* p = data.data();
  // The checksum seals the whole file: it is its last 8 bytes.
  const std::size_t body = data.size() - kSealBytes;
  switch (CheckSealedHeader(data, kCheckpointMagic, kCheckpointVersion, body,
                            kCheckpointSeed)) {
    case SealedHeaderCheck::kValid:
      break;
    case SealedHeaderCheck::kTruncated:
      return Truncated(path);
    case SealedHeaderCheck::kWrongMagic:
      return DataLossError("not a cairn checkpoint: " + path);
    case SealedHeaderCheck::kBadChecksum:
      return DataLossError("checkpoint checksum mismatch: " + path);
    case SealedHeaderCheck::kWrongVersion:
      return FailedPreconditionError(
          "checkpoint format version " +
          std::to_string(LoadFixed<std::uint32_t>(p + 8)) +
          " is not supported");
  }
  file.partitions_ = LoadFixed<std::uint32_t>(p + 12);
  file.databases_ = LoadFixed<std::uint32_t>(p + 16);
  file.offset_ = LoadFixed<std::uint32_t>(p + 20);
  file.block_ = LoadFixed<std::uint64_t>(p + 24);
  file.entries_ = LoadFixed<std::uint64_t>(p + kEntriesField);
  const std::uint64_t maps = std::uint64_t{file.partitions_} * file.databases_;
  if (maps > (body - kCheckpointHeaderBytes) / 8) return Truncated(path);
  file.entries_begin_ = kCheckpointHeaderBytes + maps * 8;
  std::uint64_t stored_total = 0;
  for (std::uint64_t m = 0; m < maps; ++m) stored_total += file.map_count(m);
  if (stored_total != file.entries_) {
    return DataLossError("checkpoint counts do not add up: " + path);
  }
  return file;
}

std::uint64_t CheckpointFile::map_count(std::uint64_t map) const noexcept {
  return LoadFixed<std::uint64_t>(bytes_.data() + kCheckpointHeaderBytes +
                                  map * 8);
}

Status CheckpointFile::ForEachEntry(
    const std::function<Status(const CheckpointEntry&)>& fn) const {
  const char* p = bytes_.data();
  const std::size_t body = bytes_.size() - kSealBytes;
  std::size_t pos = entries_begin_;
  for (std::uint64_t i = 0; i < entries_; ++i) {
    if (body - pos < kCheckpointEntryBytes) return Truncated(path_);
    CheckpointEntry entry;
    entry.db = LoadFixed<std::uint32_t>(p + pos);
    const std::uint32_t key_bytes = LoadFixed<std::uint32_t>(p + pos + 4);
    entry.location = RecordLocation{LoadFixed<std::uint32_t>(p + pos + 8),
                                    LoadFixed<std::uint32_t>(p + pos + 12),
                                    LoadFixed<std::uint32_t>(p + pos + 16),
                                    RecordLocation::kDurable};
    pos += kCheckpointEntryBytes;
    if (body - pos < key_bytes) return Truncated(path_);
    entry.key = std::string_view(p + pos, key_bytes);
    pos += key_bytes;
    const RecordLocation& loc = entry.location;
    if (loc.block > block_ ||
        (loc.block == block_ &&
         loc.offset + std::uint64_t{loc.length} > offset_)) {
      return DataLossError("a checkpoint entry points past its position");
    }
    CAIRN_RETURN_IF_ERROR(fn(entry));
  }
  if (pos != body) {
    return DataLossError("checkpoint has trailing bytes: " + path_);
  }
  return Status();
}

}  // namespace flush_internal
CAIRN_NAMESPACE_END
