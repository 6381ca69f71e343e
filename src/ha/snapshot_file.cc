// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The snapshot file's writer and validating reader
// (cairn/ha/internal/snapshot_file.h). xxHash stays here, out of the
// public headers.

#include "cairn/ha/internal/snapshot_file.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "cairn/base/check.h"
#include "cairn/directory/quota.h"

CAIRN_NAMESPACE_BEGIN
namespace directory_internal {
namespace {

using base_internal::Checksum64;
using base_internal::LoadFixed;
using base_internal::PutFixed;
using base_internal::StoreFixed;

constexpr std::uint64_t kHeaderSeed = 0x736e6870;   // "snhp"
constexpr std::uint64_t kRecordSeed = 0x736e7263;   // "snrc"
constexpr std::uint64_t kDigestSeed = 0x736e6467;   // "sndg"
constexpr std::uint64_t kTrailerSeed = 0x736e7472;  // "sntr"
constexpr std::size_t kFlushBytes = std::size_t{1} << 20;

// Header: magic u64 | version u32 | header bytes u32 | tenants u64 | groups
// u64 | objects u64 | records u64 | log position u64 | next instance u64 |
// reserved u64 (0) | checksum u64 (of the first 72 bytes).
constexpr std::size_t kHeaderChecked = kSnapshotHeaderBytes - 8;
// Version 1's header: 64 bytes, sealed at 56. Its header-bytes field says
// so, which tells an intact older file (kFailedPrecondition) from a damaged
// one (kDataLoss).
constexpr std::size_t kV1HeaderBytes = 64;
// Trailer: magic u64 | file bytes u64 | records u64 | checksum u64 (of the
// final header, the records' digest and the trailer's first 24 bytes).
constexpr std::size_t kTrailerChecked = 24;
// Object body: id u64 | version u64 | size u64 | counted u64 | retained u64
// | lease ttl i64 | soft pin ttl i64 | flags u32 | key bytes u32 | payload
// bytes u32 | key | payload.
constexpr std::size_t kObjectFixed = 68;
constexpr std::uint32_t kFlagHardPinned = 1;
// Tenant body: instance u64 | quota limit u64 | next object id u64 | name
// bytes u32 | name.
constexpr std::size_t kTenantFixed = 28;
// Group body: members u32 | name bytes u32 | name.
constexpr std::size_t kGroupFixed = 8;
// Tenant end body: groups u64 | objects u64.
constexpr std::size_t kTenantEndBytes = 16;

void EncodeHeader(char* out, std::uint32_t version, std::uint64_t tenants,
                  std::uint64_t groups, std::uint64_t objects,
                  std::uint64_t records, std::uint64_t log_position,
                  std::uint64_t next_instance) {
  std::memset(out, 0, kSnapshotHeaderBytes);
  StoreFixed<std::uint64_t>(out, kSnapshotMagic);
  StoreFixed<std::uint32_t>(out + 8, version);
  StoreFixed<std::uint32_t>(out + 12,
                            static_cast<std::uint32_t>(kSnapshotHeaderBytes));
  StoreFixed<std::uint64_t>(out + 16, tenants);
  StoreFixed<std::uint64_t>(out + 24, groups);
  StoreFixed<std::uint64_t>(out + 32, objects);
  StoreFixed<std::uint64_t>(out + 40, records);
  StoreFixed<std::uint64_t>(out + 48, log_position);
  StoreFixed<std::uint64_t>(out + 56, next_instance);
  base_internal::SealRegion(out, kHeaderChecked, kHeaderSeed);
}

std::uint64_t TrailerChecksum(const char* header, std::uint64_t digest,
                              const char* trailer) {
  char buffer[kSnapshotHeaderBytes + 8 + kTrailerChecked];
  std::memcpy(buffer, header, kSnapshotHeaderBytes);
  StoreFixed<std::uint64_t>(buffer + kSnapshotHeaderBytes, digest);
  std::memcpy(buffer + kSnapshotHeaderBytes + 8, trailer, kTrailerChecked);
  return Checksum64(buffer, sizeof(buffer), kTrailerSeed);
}

std::uint64_t RecordChecksum(const char* frame_and_body, std::size_t bytes) {
  return Checksum64(frame_and_body, bytes, kRecordSeed);
}

// Appends one record (frame, body, checksum) and returns where it starts.
std::size_t AppendFramedRecord(SnapshotRecordType type, std::string_view body,
                               std::string* out) {
  const std::size_t start = out->size();
  PutFixed<std::uint32_t>(out, static_cast<std::uint32_t>(body.size()));
  PutFixed<std::uint8_t>(out, static_cast<std::uint8_t>(type));
  out->append(3, '\0');
  out->append(body);
  PutFixed<std::uint64_t>(
      out, RecordChecksum(out->data() + start, out->size() - start));
  return start;
}

// Fills the trailer of a file of `file_bytes` holding `records` records
// whose bytes digest to `digest`, under the final `header`.
void EncodeTrailer(char* trailer, const char* header, std::uint64_t file_bytes,
                   std::uint64_t records, std::uint64_t digest) {
  StoreFixed<std::uint64_t>(trailer, kSnapshotTrailerMagic);
  StoreFixed<std::uint64_t>(trailer + 8, file_bytes);
  StoreFixed<std::uint64_t>(trailer + 16, records);
  StoreFixed<std::uint64_t>(trailer + kTrailerChecked,
                            TrailerChecksum(header, digest, trailer));
}

}  // namespace

SnapshotFileWriter::SnapshotFileWriter(Env* env, std::string path,
                                       std::string tmp,
                                       std::unique_ptr<FileHandle> file,
                                       const SnapshotWriteOptions& options)
    : env_(env),
      path_(std::move(path)),
      tmp_(std::move(tmp)),
      file_(std::move(file)),
      options_(options),
      digest_(kDigestSeed) {
  // The header's place; it is written for real by Commit().
  buffer_.assign(kSnapshotHeaderBytes, '\0');
}

Result<std::unique_ptr<SnapshotFileWriter>> SnapshotFileWriter::Create(
    const std::string& path, const SnapshotWriteOptions& options) {
  if (path.empty()) return InvalidArgumentError("empty snapshot path");
  Env* const env = Env::OrDefault(options.env);
  // A temporary file of this writer's own (`path`.tmp.<pid>.<n>, created
  // exclusively): two writers of one path must never share an inode, or the
  // later one's rename publishes the earlier one's bytes mixed into its own.
  static std::atomic<std::uint64_t> next_tmp{0};
  for (int attempt = 0;; ++attempt) {
    std::string tmp =
        path + ".tmp." + std::to_string(::getpid()) + "." +
        std::to_string(next_tmp.fetch_add(1, std::memory_order_relaxed));
    Result<std::unique_ptr<FileHandle>> file =
        env->NewFile(tmp, FileOpenMode::kCreateExclusive);
    if (file.ok()) {
      return std::unique_ptr<SnapshotFileWriter>(new SnapshotFileWriter(
          env, path, std::move(tmp), std::move(file).value(), options));
    }
    // kAlreadyExists: a leftover of an earlier process with this pid; try
    // the next.
    if (file.status().code() != StatusCode::kAlreadyExists || attempt == 15) {
      return file.status();
    }
  }
}

SnapshotFileWriter::~SnapshotFileWriter() {
  // A writer that failed has already abandoned its file (file_ is null).
  if (!committed_ && file_ != nullptr) Abandon();
}

void SnapshotFileWriter::Abandon() {
  file_.reset();  // closes it, if still open
  env_->Remove(tmp_).IgnoreError();
}

Status SnapshotFileWriter::AppendRecord(SnapshotRecordType type,
                                        std::string_view body) {
  if (file_ == nullptr) {
    return FailedPreconditionError("snapshot writer failed");
  }
  if (body.size() > kSnapshotMaxRecordBytes) {
    return InvalidArgumentError("snapshot record larger than 1 GiB");
  }
  const std::size_t start = AppendFramedRecord(type, body, &buffer_);
  const std::size_t record_bytes = buffer_.size() - start;
  digest_.Update(buffer_.data() + start, record_bytes);
  offset_ += record_bytes;
  ++records_;
  if (buffer_.size() >= kFlushBytes) return FlushBuffer();
  return Status::Ok();
}

Status SnapshotFileWriter::FlushBuffer() {
  Status s = file_->Append(buffer_);
  buffer_.clear();
  if (!s.ok()) Abandon();
  return s;
}

Status SnapshotFileWriter::BeginTenant(const SnapshotTenant& tenant) {
  CAIRN_CHECK_MSG(!in_tenant_, "BeginTenant inside a tenant");
  in_tenant_ = true;
  tenant_groups_ = 0;
  tenant_objects_ = 0;
  ++tenants_;
  body_.clear();
  PutFixed<std::uint64_t>(&body_, tenant.instance);
  PutFixed<std::uint64_t>(&body_, tenant.quota_limit_bytes);
  PutFixed<std::uint64_t>(&body_, tenant.next_object_id);
  PutFixed<std::uint32_t>(&body_,
                          static_cast<std::uint32_t>(tenant.name.size()));
  body_.append(tenant.name);
  return AppendRecord(SnapshotRecordType::kTenant, body_);
}

Status SnapshotFileWriter::AddGroup(std::string_view name,
                                    std::size_t members) {
  CAIRN_CHECK_MSG(
      in_tenant_ && members_left_ == 0 && members > 0 && !name.empty(),
      "AddGroup out of order");
  members_left_ = members;
  ++groups_;
  ++tenant_groups_;
  body_.clear();
  PutFixed<std::uint32_t>(&body_, static_cast<std::uint32_t>(members));
  PutFixed<std::uint32_t>(&body_, static_cast<std::uint32_t>(name.size()));
  body_.append(name);
  return AppendRecord(SnapshotRecordType::kGroup, body_);
}

Status SnapshotFileWriter::AddObject(const SnapshotObject& object) {
  CAIRN_CHECK_MSG(in_tenant_ && !object.key.empty() && object.id != 0 &&
                      object.version != 0,
                  "AddObject out of order");
  if (members_left_ > 0) --members_left_;
  ++objects_;
  ++tenant_objects_;
  body_.clear();
  PutFixed<std::uint64_t>(&body_, object.id);
  PutFixed<std::uint64_t>(&body_, object.version);
  PutFixed<std::uint64_t>(&body_, object.size_bytes);
  PutFixed<std::uint64_t>(&body_, object.counted_bytes);
  PutFixed<std::uint64_t>(&body_, object.retained_bytes);
  PutFixed<std::int64_t>(&body_, object.lease_ttl_nanos);
  PutFixed<std::int64_t>(&body_, object.soft_pin_ttl_nanos);
  PutFixed<std::uint32_t>(&body_, object.hard_pinned ? kFlagHardPinned : 0u);
  PutFixed<std::uint32_t>(&body_,
                          static_cast<std::uint32_t>(object.key.size()));
  PutFixed<std::uint32_t>(&body_,
                          static_cast<std::uint32_t>(object.payload.size()));
  body_.append(object.key);
  body_.append(object.payload);
  return AppendRecord(SnapshotRecordType::kObject, body_);
}

Status SnapshotFileWriter::EndTenant() {
  CAIRN_CHECK_MSG(in_tenant_ && members_left_ == 0, "EndTenant out of order");
  in_tenant_ = false;
  body_.clear();
  PutFixed<std::uint64_t>(&body_, tenant_groups_);
  PutFixed<std::uint64_t>(&body_, tenant_objects_);
  return AppendRecord(SnapshotRecordType::kTenantEnd, body_);
}

Status SnapshotFileWriter::Commit() {
  CAIRN_CHECK_MSG(!in_tenant_ && !committed_, "Commit out of order");
  if (file_ == nullptr) {
    return FailedPreconditionError("snapshot writer failed");
  }
  char header[kSnapshotHeaderBytes];
  EncodeHeader(header, options_.format_version, tenants_, groups_, objects_,
               records_, options_.log_position, next_instance_);
  char trailer[kSnapshotTrailerBytes];
  EncodeTrailer(trailer, header, offset_ + kSnapshotTrailerBytes, records_,
                digest_.Digest());
  buffer_.append(trailer, sizeof(trailer));
  if (Status s = FlushBuffer(); !s.ok()) return s;
  // Every step before the rename leaves `path` as it was: on failure the
  // temporary file is removed.
  Status s = file_->WriteAt(0, std::string_view(header, sizeof(header)));
  if (s.ok() && options_.sync) s = file_->Sync();
  if (s.ok()) s = file_->Close();
  if (s.ok()) s = env_->Rename(tmp_, path_);
  if (!s.ok()) {
    Abandon();
    return s;
  }
  file_.reset();
  committed_ = true;
  if (!options_.sync) return Status::Ok();
  return env_->SyncDir(DirectoryOf(path_));
}

// ---- reader ----------------------------------------------------------------

namespace {

Status Corrupt(const std::string& what) {
  return DataLossError("corrupt snapshot: " + what);
}

// Walks the records between the header and the trailer.
class RecordParser {
 public:
  RecordParser(const char* data, std::size_t begin, std::size_t end)
      : data_(data), at_(begin), end_(end) {}

  Status Parse(ParsedSnapshot* out) {
    ParsedSnapshotTenant* tenant = nullptr;
    std::size_t members_left = 0;
    std::uint64_t tenant_counted = 0;  // the tenant's counted bytes so far
    std::unordered_set<std::string_view> names;
    std::unordered_set<std::uint64_t> instances;
    // The tenant's ids so far, with their keys.
    std::unordered_map<std::uint64_t, std::string_view> ids;
    while (at_ < end_) {
      SnapshotRecordType type = SnapshotRecordType::kTenant;
      const char* body = nullptr;
      std::size_t bytes = 0;
      CAIRN_RETURN_IF_ERROR(Next(&type, &body, &bytes));
      ++records_;
      switch (type) {
        case SnapshotRecordType::kTenant: {
          if (tenant != nullptr) return Corrupt("tenant inside a tenant");
          if (bytes < kTenantFixed) return Corrupt("short tenant record");
          const std::uint32_t name_bytes = LoadFixed<std::uint32_t>(body + 24);
          if (name_bytes != bytes - kTenantFixed) {
            return Corrupt("tenant record length");
          }
          out->tenants.emplace_back();
          tenant = &out->tenants.back();
          tenant_counted = 0;
          ids.clear();
          tenant->tenant.instance = LoadFixed<std::uint64_t>(body);
          tenant->tenant.quota_limit_bytes = LoadFixed<std::uint64_t>(body + 8);
          tenant->tenant.next_object_id = LoadFixed<std::uint64_t>(body + 16);
          tenant->tenant.name =
              std::string_view(body + kTenantFixed, name_bytes);
          if (tenant->tenant.next_object_id == 0 ||
              tenant->tenant.instance ==
                  std::numeric_limits<std::uint64_t>::max()) {
            return Corrupt("tenant record fields");
          }
          if (!names.insert(tenant->tenant.name).second) {
            return Corrupt("tenant named twice");
          }
          // Instance 0: a lone directory's snapshot that had none.
          if (tenant->tenant.instance != 0 &&
              !instances.insert(tenant->tenant.instance).second) {
            return Corrupt("tenant instance named twice");
          }
          break;
        }
        case SnapshotRecordType::kGroup: {
          if (tenant == nullptr || members_left != 0) {
            return Corrupt("group record out of place");
          }
          if (bytes < kGroupFixed) return Corrupt("short group record");
          const std::uint32_t members = LoadFixed<std::uint32_t>(body);
          const std::uint32_t name_bytes = LoadFixed<std::uint32_t>(body + 4);
          if (name_bytes != bytes - kGroupFixed || name_bytes == 0 ||
              members == 0) {
            return Corrupt("group record fields");
          }
          SnapshotUnit unit;
          unit.group_name = std::string_view(body + kGroupFixed, name_bytes);
          unit.first = tenant->objects.size();
          tenant->units.push_back(unit);
          ++tenant->groups;
          members_left = members;
          break;
        }
        case SnapshotRecordType::kObject: {
          if (tenant == nullptr) return Corrupt("object outside a tenant");
          if (bytes < kObjectFixed) return Corrupt("short object record");
          SnapshotObject o;
          o.id = LoadFixed<std::uint64_t>(body);
          o.version = LoadFixed<std::uint64_t>(body + 8);
          o.size_bytes = LoadFixed<std::uint64_t>(body + 16);
          o.counted_bytes = LoadFixed<std::uint64_t>(body + 24);
          o.retained_bytes = LoadFixed<std::uint64_t>(body + 32);
          o.lease_ttl_nanos = LoadFixed<std::int64_t>(body + 40);
          o.soft_pin_ttl_nanos = LoadFixed<std::int64_t>(body + 48);
          const std::uint32_t flags = LoadFixed<std::uint32_t>(body + 56);
          const std::uint32_t key_bytes = LoadFixed<std::uint32_t>(body + 60);
          const std::uint32_t payload_bytes =
              LoadFixed<std::uint32_t>(body + 64);
          if ((flags & ~kFlagHardPinned) != 0 || key_bytes == 0 ||
              std::uint64_t{key_bytes} + payload_bytes !=
                  bytes - kObjectFixed ||
              o.lease_ttl_nanos < 0 || o.soft_pin_ttl_nanos < 0 || o.id == 0 ||
              o.id == std::numeric_limits<std::uint64_t>::max() ||
              o.version == 0) {
            return Corrupt("object record fields");
          }
          // No account holds more than kUnlimited: only a damaged (or
          // crafted) file sums past it.
          if (o.counted_bytes > QuotaAccount::kUnlimited - tenant_counted) {
            return Corrupt("tenant counted bytes exceed any quota");
          }
          tenant_counted += o.counted_bytes;
          o.hard_pinned = (flags & kFlagHardPinned) != 0;
          o.key = std::string_view(body + kObjectFixed, key_bytes);
          o.payload =
              std::string_view(body + kObjectFixed + key_bytes, payload_bytes);
          // One id under two keys is no state a directory had (a key met
          // twice, as one object, is the plan's to skip).
          if (auto [it, fresh] = ids.emplace(o.id, o.key);
              !fresh && it->second != o.key) {
            return Corrupt("object id under two keys");
          }
          if (members_left > 0) {
            --members_left;
            ++tenant->units.back().count;
          } else {
            SnapshotUnit unit;
            unit.first = tenant->objects.size();
            unit.count = 1;
            tenant->units.push_back(unit);
          }
          tenant->objects.push_back(o);
          break;
        }
        case SnapshotRecordType::kTenantEnd: {
          if (tenant == nullptr || members_left != 0) {
            return Corrupt("tenant end out of place");
          }
          if (bytes != kTenantEndBytes) return Corrupt("tenant end length");
          if (LoadFixed<std::uint64_t>(body) != tenant->groups ||
              LoadFixed<std::uint64_t>(body + 8) != tenant->objects.size()) {
            return Corrupt("tenant counts do not match its records");
          }
          out->groups += tenant->groups;
          out->objects += tenant->objects.size();
          tenant = nullptr;
          break;
        }
        default:
          return Corrupt("unknown record type");
      }
    }
    if (tenant != nullptr) return Corrupt("last tenant is not closed");
    return Status::Ok();
  }

  std::uint64_t records() const noexcept { return records_; }

 private:
  Status Next(SnapshotRecordType* type, const char** body, std::size_t* bytes) {
    if (end_ - at_ < kSnapshotRecordFrameBytes) {
      return Corrupt("record frame cut short");
    }
    const char* frame = data_ + at_;
    const std::uint32_t body_bytes = LoadFixed<std::uint32_t>(frame);
    if (body_bytes > end_ - at_ - kSnapshotRecordFrameBytes) {
      return Corrupt("record longer than the file");
    }
    const std::size_t checked = 8 + std::size_t{body_bytes};
    if (LoadFixed<std::uint64_t>(frame + checked) !=
        RecordChecksum(frame, checked)) {
      return Corrupt("record checksum mismatch at offset " +
                     std::to_string(at_));
    }
    if (frame[5] != 0 || frame[6] != 0 || frame[7] != 0) {
      return Corrupt("record frame padding");
    }
    *type = static_cast<SnapshotRecordType>(frame[4]);
    *body = frame + 8;
    *bytes = body_bytes;
    at_ += checked + 8;
    return Status::Ok();
  }

  const char* const data_;
  std::size_t at_;
  const std::size_t end_;
  std::uint64_t records_ = 0;
};

}  // namespace

Result<ParsedSnapshot> ReadSnapshotFile(const std::string& path, Env* env) {
  std::vector<char> bytes;
  CAIRN_RETURN_IF_ERROR(ReadWholeFile(*Env::OrDefault(env), path, &bytes));
  return ParseSnapshot(std::move(bytes));
}

Result<ParsedSnapshot> ParseSnapshot(std::vector<char> file) {
  ParsedSnapshot parsed;
  parsed.bytes = std::move(file);
  const std::vector<char>& bytes = parsed.bytes;
  const std::size_t size = bytes.size();
  const char* header = bytes.data();
  // A header that says it is version 1's size is checked as one, so an
  // intact version-1 file is told apart from a damaged file.
  const bool v1_sized =
      size >= 16 && LoadFixed<std::uint32_t>(header + 12) == kV1HeaderBytes;
  Status verified = base_internal::VerifySealedHeader(
      std::span<const char>(header, size), kSnapshotMagic,
      kSnapshotFormatVersion, v1_sized ? kV1HeaderBytes - 8 : kHeaderChecked,
      kHeaderSeed,
      {.format = "snapshot",
       .truncated = "snapshot is truncated: no complete header",
       .wrong_magic = "not a cairn snapshot: wrong magic",
       .bad_checksum = "snapshot header checksum mismatch"});
  if (verified.code() == StatusCode::kFailedPrecondition &&
      LoadFixed<std::uint32_t>(header + 8) == 1) {
    return FailedPreconditionError(
        std::string(verified.message()) +
        ": a version-1 snapshot records no log position, object ids or "
        "versions, so it cannot start a replica; take a new snapshot");
  }
  CAIRN_RETURN_IF_ERROR(verified);
  if (LoadFixed<std::uint32_t>(header + 12) != kSnapshotHeaderBytes ||
      LoadFixed<std::uint64_t>(header + 64) != 0) {
    return DataLossError("snapshot header fields");
  }
  parsed.log_position = LoadFixed<std::uint64_t>(header + 48);
  parsed.next_instance = LoadFixed<std::uint64_t>(header + 56);
  if (size < kSnapshotHeaderBytes + kSnapshotTrailerBytes) {
    return DataLossError("snapshot is truncated: no trailer");
  }
  const std::size_t trailer_at = size - kSnapshotTrailerBytes;
  const char* trailer = bytes.data() + trailer_at;
  if (LoadFixed<std::uint64_t>(trailer) != kSnapshotTrailerMagic ||
      LoadFixed<std::uint64_t>(trailer + 8) != size) {
    return DataLossError(
        "snapshot is truncated or has trailing bytes: no trailer at its end");
  }
  const std::uint64_t digest =
      Checksum64(bytes.data() + kSnapshotHeaderBytes,
                 trailer_at - kSnapshotHeaderBytes, kDigestSeed);
  if (LoadFixed<std::uint64_t>(trailer + kTrailerChecked) !=
      TrailerChecksum(header, digest, trailer)) {
    return DataLossError("snapshot checksum mismatch");
  }
  RecordParser parser(bytes.data(), kSnapshotHeaderBytes, trailer_at);
  CAIRN_RETURN_IF_ERROR(parser.Parse(&parsed));
  if (parser.records() != LoadFixed<std::uint64_t>(header + 40) ||
      parser.records() != LoadFixed<std::uint64_t>(trailer + 16) ||
      parsed.tenants.size() != LoadFixed<std::uint64_t>(header + 16) ||
      parsed.groups != LoadFixed<std::uint64_t>(header + 24) ||
      parsed.objects != LoadFixed<std::uint64_t>(header + 32)) {
    return Corrupt("counts in the header do not match the records");
  }
  return parsed;
}

std::vector<char> FrameSnapshotForTest(
    std::span<const std::pair<SnapshotRecordType, std::string>> records,
    std::uint32_t version, std::uint64_t log_position,
    std::uint64_t next_instance) {
  std::string out(kSnapshotHeaderBytes, '\0');
  std::uint64_t counts[4] = {0, 0, 0, 0};  // tenants, groups, objects, all
  for (const auto& [type, body] : records) {
    AppendFramedRecord(type, body, &out);
    if (type == SnapshotRecordType::kTenant) ++counts[0];
    if (type == SnapshotRecordType::kGroup) ++counts[1];
    if (type == SnapshotRecordType::kObject) ++counts[2];
    ++counts[3];
  }
  char header[kSnapshotHeaderBytes];
  EncodeHeader(header, version, counts[0], counts[1], counts[2], counts[3],
               log_position, next_instance);
  std::memcpy(out.data(), header, sizeof(header));
  const std::uint64_t digest =
      Checksum64(out.data() + kSnapshotHeaderBytes,
                 out.size() - kSnapshotHeaderBytes, kDigestSeed);
  char trailer[kSnapshotTrailerBytes];
  EncodeTrailer(trailer, header, out.size() + kSnapshotTrailerBytes, counts[3],
                digest);
  out.append(trailer, sizeof(trailer));
  return std::vector<char>(out.begin(), out.end());
}

}  // namespace directory_internal
CAIRN_NAMESPACE_END
