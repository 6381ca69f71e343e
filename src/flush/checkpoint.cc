// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The LogStore checkpoint file (cairn/flush/internal/checkpoint.h).

#include "cairn/flush/internal/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "cairn/base/check.h"
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

// CheckSealedHeader's answer (in its order) as the readers' status.
Status SealStatus(SealedHeaderCheck check, const char* header,
                  const std::string& path) {
  switch (check) {
    case SealedHeaderCheck::kValid:
      return Status();
    case SealedHeaderCheck::kTruncated:
      return Truncated(path);
    case SealedHeaderCheck::kWrongMagic:
      return DataLossError("not a cairn checkpoint: " + path);
    case SealedHeaderCheck::kBadChecksum:
      return DataLossError("checkpoint checksum mismatch: " + path);
    case SealedHeaderCheck::kWrongVersion:
      return FailedPreconditionError(
          "checkpoint format version " +
          std::to_string(LoadFixed<std::uint32_t>(header + 8)) +
          " is not supported");
  }
  return Status();
}

CheckpointHeader DecodeHeader(const char* p) {
  CheckpointHeader h;
  h.partitions = LoadFixed<std::uint32_t>(p + 12);
  h.databases = LoadFixed<std::uint32_t>(p + 16);
  h.offset = LoadFixed<std::uint32_t>(p + 20);
  h.block = LoadFixed<std::uint64_t>(p + 24);
  h.entries = LoadFixed<std::uint64_t>(p + kEntriesField);
  return h;
}

// The bytes of the entry whose fixed part (kCheckpointEntryBytes) is at p.
std::uint64_t EntryBytes(const char* p) {
  return kCheckpointEntryBytes + std::uint64_t{LoadFixed<std::uint32_t>(p + 4)};
}

// Decodes the entry at p, of which `available` bytes are at hand (the rest
// of the file's body). *bytes is its length. An entry may lie past the
// checkpoint's position (a record appended while the copy ran); the reader
// checks it against the log (LogStore::Recover, the inspector).
Status DecodeEntry(const char* p, std::uint64_t available,
                   const std::string& path, CheckpointEntry* out,
                   std::uint64_t* bytes) {
  if (available < kCheckpointEntryBytes) return Truncated(path);
  *bytes = EntryBytes(p);
  if (available < *bytes) return Truncated(path);
  out->db = LoadFixed<std::uint32_t>(p);
  out->location = RecordLocation{
      LoadFixed<std::uint32_t>(p + 8), LoadFixed<std::uint32_t>(p + 12),
      LoadFixed<std::uint32_t>(p + 16), RecordLocation::kDurable};
  out->key = std::string_view(
      p + kCheckpointEntryBytes,
      static_cast<std::size_t>(*bytes) - kCheckpointEntryBytes);
  return Status();
}

// A file read front to back through a buffer that holds what Get asked
// for last: at least 1 MiB at a time, more only for a longer request.
class BufferedFile {
 public:
  explicit BufferedFile(std::unique_ptr<FileHandle> file)
      : file_(std::move(file)) {}

  // [at, at + n) of the file, which the caller knows it holds.
  Result<const char*> Get(std::uint64_t at, std::size_t n) {
    if (at < at_ || at + n > at_ + buf_.size()) {
      try {
        buf_.resize(std::max<std::size_t>(n, kChunk));
      } catch (const std::bad_alloc&) {
        return ResourceExhaustedError("checkpoint read buffer: " +
                                      file_->path());
      }
      Result<std::size_t> read = file_->ReadAt(at, buf_);
      if (!read.ok()) return read.status();
      if (*read < n) return Truncated(file_->path());
      buf_.resize(*read);
      at_ = at;
    }
    return buf_.data() + (at - at_);
  }

 private:
  static constexpr std::size_t kChunk = std::size_t{1} << 20;
  std::unique_ptr<FileHandle> file_;
  std::vector<char> buf_;
  std::uint64_t at_ = 0;
};

}  // namespace

namespace {

constexpr std::string_view kCheckpointName = "checkpoint";
constexpr std::string_view kTempSuffix = ".tmp";

// The generation a checkpoint file name stands for: "checkpoint" is 0,
// "checkpoint-<decimal>" its number. False for any other name.
bool ParseGeneration(std::string_view name, std::uint64_t* generation) {
  if (name == kCheckpointName) {
    *generation = 0;
    return true;
  }
  if (!name.starts_with(kCheckpointName) ||
      name.size() <= kCheckpointName.size() + 1 ||
      name[kCheckpointName.size()] != '-') {
    return false;
  }
  const std::string_view digits = name.substr(kCheckpointName.size() + 1);
  if (digits[0] == '0') return false;  // one spelling per number
  const auto [end, ec] = std::from_chars(
      digits.data(), digits.data() + digits.size(), *generation);
  return ec == std::errc() && end == digits.data() + digits.size();
}

}  // namespace

std::string CheckpointPath(const std::string& dir, std::uint64_t generation) {
  std::string path = dir + "/" + std::string(kCheckpointName);
  if (generation != 0) path += "-" + std::to_string(generation);
  return path;
}

Result<CheckpointFiles> ListCheckpoints(Env& env, const std::string& dir) {
  Result<std::vector<std::string>> names = env.List(dir);
  if (!names.ok()) return names.status();
  CheckpointFiles files;
  std::string newest_name;
  for (std::string& name : *names) {
    std::string_view base = name;
    const bool temp = base.ends_with(kTempSuffix);
    if (temp) base.remove_suffix(kTempSuffix.size());
    std::uint64_t generation = 0;
    if (!ParseGeneration(base, &generation)) continue;
    if (temp || (files.any && generation < files.newest)) {
      files.older.push_back(std::move(name));
      continue;
    }
    if (files.any) files.older.push_back(std::move(newest_name));
    files.any = true;
    files.newest = generation;
    newest_name = std::move(name);
  }
  return files;
}

CheckpointEncoder::CheckpointEncoder(std::uint32_t partitions,
                                     std::uint32_t databases,
                                     std::uint64_t block, std::uint32_t offset)
    : maps_(std::uint64_t{partitions} * databases) {
  PutFixed<std::uint64_t>(&out_, kCheckpointMagic);
  PutFixed<std::uint32_t>(&out_, kCheckpointVersion);
  PutFixed<std::uint32_t>(&out_, partitions);
  PutFixed<std::uint32_t>(&out_, databases);
  PutFixed<std::uint32_t>(&out_, offset);
  PutFixed<std::uint64_t>(&out_, block);
  PutFixed<std::uint64_t>(&out_, 0);  // the entry total, filled by Finish
  out_.append(maps_ * sizeof(std::uint64_t), '\0');  // the counts
}

void CheckpointEncoder::SetMapCount(std::uint64_t map, std::uint64_t entries) {
  CAIRN_CHECK(map < maps_);
  char* at = out_.data() + kCheckpointHeaderBytes + map * sizeof(std::uint64_t);
  entries_ -= LoadFixed<std::uint64_t>(at);
  StoreFixed<std::uint64_t>(at, entries);
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
                           std::uint64_t generation, std::string_view bytes,
                           bool sync) {
  CAIRN_CHECK(generation >= 1);
  const std::string path = CheckpointPath(dir, generation);
  const std::string tmp = path + std::string(kTempSuffix);
  // Truncating, not exclusive: a crash may have left this temp file.
  Result<std::unique_ptr<FileHandle>> file =
      env.NewFile(tmp, FileOpenMode::kCreateOrTruncate);
  if (!file.ok()) return file.status();
  CAIRN_RETURN_IF_ERROR((*file)->Append(bytes));
  if (sync) CAIRN_RETURN_IF_ERROR((*file)->Sync());
  // A close error is dropped, as LogStore always has: with sync on the
  // bytes are already durable.
  (*file)->Close().IgnoreError();
  CAIRN_RETURN_IF_ERROR(env.Rename(tmp, path));
  if (sync) CAIRN_RETURN_IF_ERROR(env.SyncDir(dir));
  // The new generation is durable: the older ones are garbage now. A
  // failure here loses nothing (the newest is in force); the next
  // checkpoint lists and removes what is left.
  Result<CheckpointFiles> files = ListCheckpoints(env, dir);
  if (files.ok()) {
    for (const std::string& name : files->older) {
      std::string older = dir;
      older.append("/").append(name);
      env.Remove(older).IgnoreError();
    }
  }
  return Status();
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
  CAIRN_RETURN_IF_ERROR(
      SealStatus(CheckSealedHeader(data, kCheckpointMagic, kCheckpointVersion,
                                   body, kCheckpointSeed),
                 p, path));
  const CheckpointHeader h = DecodeHeader(p);
  file.partitions_ = h.partitions;
  file.databases_ = h.databases;
  file.offset_ = h.offset;
  file.block_ = h.block;
  file.entries_ = h.entries;
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
    CheckpointEntry entry;
    std::uint64_t bytes = 0;
    CAIRN_RETURN_IF_ERROR(
        DecodeEntry(p + pos, body - pos, path_, &entry, &bytes));
    pos += static_cast<std::size_t>(bytes);
    CAIRN_RETURN_IF_ERROR(fn(entry));
  }
  if (pos != body) {
    return DataLossError("checkpoint has trailing bytes: " + path_);
  }
  return Status();
}

Status ScanCheckpointFile(
    Env& env, const std::string& path,
    const std::function<void(const CheckpointHeader&)>& on_header,
    const std::function<Status(const CheckpointEntry&, std::uint64_t offset)>&
        on_entry) {
  Result<std::unique_ptr<FileHandle>> handle =
      env.NewFile(path, FileOpenMode::kReadOnly);
  if (!handle.ok()) return handle.status();
  Result<std::uint64_t> size = (*handle)->Size();
  if (!size.ok()) return size.status();
  BufferedFile file(std::move(handle).value());
  if (*size < kCheckpointHeaderBytes + kSealBytes) return Truncated(path);
  const std::uint64_t body = *size - kSealBytes;
  // Pass 1: the seal, checked in CheckSealedHeader's order.
  char header[kCheckpointHeaderBytes];
  {
    Result<const char*> at = file.Get(0, kCheckpointHeaderBytes);
    if (!at.ok()) return at.status();
    std::memcpy(header, *at, sizeof(header));
  }
  if (LoadFixed<std::uint64_t>(header) != kCheckpointMagic) {
    return SealStatus(SealedHeaderCheck::kWrongMagic, header, path);
  }
  base_internal::StreamingChecksum64 digest(kCheckpointSeed);
  for (std::uint64_t pos = 0; pos < body;) {
    const auto n =
        static_cast<std::size_t>(std::min<std::uint64_t>(body - pos, 1 << 20));
    Result<const char*> at = file.Get(pos, n);
    if (!at.ok()) return at.status();
    digest.Update(*at, n);
    pos += n;
  }
  Result<const char*> seal = file.Get(body, kSealBytes);
  if (!seal.ok()) return seal.status();
  if (LoadFixed<std::uint64_t>(*seal) != digest.Digest()) {
    return SealStatus(SealedHeaderCheck::kBadChecksum, header, path);
  }
  if (LoadFixed<std::uint32_t>(header + 8) != kCheckpointVersion) {
    return SealStatus(SealedHeaderCheck::kWrongVersion, header, path);
  }
  // Pass 2: header, counts, entries.
  const CheckpointHeader h = DecodeHeader(header);
  const std::uint64_t maps = std::uint64_t{h.partitions} * h.databases;
  if (maps > (body - kCheckpointHeaderBytes) / 8) return Truncated(path);
  std::uint64_t stored_total = 0;
  for (std::uint64_t m = 0; m < maps; ++m) {
    Result<const char*> at = file.Get(kCheckpointHeaderBytes + m * 8, 8);
    if (!at.ok()) return at.status();
    stored_total += LoadFixed<std::uint64_t>(*at);
  }
  if (stored_total != h.entries) {
    return DataLossError("checkpoint counts do not add up: " + path);
  }
  if (on_header) on_header(h);
  std::uint64_t pos = kCheckpointHeaderBytes + maps * 8;
  for (std::uint64_t i = 0; i < h.entries; ++i) {
    if (body - pos < kCheckpointEntryBytes) return Truncated(path);
    Result<const char*> fixed = file.Get(pos, kCheckpointEntryBytes);
    if (!fixed.ok()) return fixed.status();
    // Capped by the file before anything is read for it.
    const std::uint64_t want = EntryBytes(*fixed);
    if (body - pos < want) return Truncated(path);
    Result<const char*> at = file.Get(pos, static_cast<std::size_t>(want));
    if (!at.ok()) return at.status();
    CheckpointEntry entry;
    std::uint64_t bytes = 0;
    CAIRN_RETURN_IF_ERROR(DecodeEntry(*at, want, path, &entry, &bytes));
    if (on_entry) CAIRN_RETURN_IF_ERROR(on_entry(entry, pos));
    pos += bytes;
  }
  if (pos != body) {
    return DataLossError("checkpoint has trailing bytes: " + path);
  }
  return Status();
}

}  // namespace flush_internal
CAIRN_NAMESPACE_END
