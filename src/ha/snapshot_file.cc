// Copyright 2026 The cairn Authors.
//
// The snapshot file's writer and validating reader
// (cairn/ha/internal/snapshot_file.h). xxHash stays here, out of the
// public headers.

#include "cairn/ha/internal/snapshot_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <unordered_set>
#include <utility>

// The XXH64 state is a member of the writer, so its layout is needed.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "cairn/base/check.h"
#include "cairn/directory/quota.h"

CAIRN_NAMESPACE_BEGIN
namespace directory_internal {
namespace {

constexpr std::uint64_t kHeaderSeed = 0x736e6870;   // "snhp"
constexpr std::uint64_t kRecordSeed = 0x736e7263;   // "snrc"
constexpr std::uint64_t kDigestSeed = 0x736e6467;   // "sndg"
constexpr std::uint64_t kTrailerSeed = 0x736e7472;  // "sntr"
constexpr std::size_t kFlushBytes = std::size_t{1} << 20;

// Header: magic u64 | version u32 | header bytes u32 | tenants u64 | groups
// u64 | objects u64 | records u64 | reserved u64 (0) | checksum u64 (of the
// first 56 bytes).
constexpr std::size_t kHeaderChecked = 56;
// Trailer: magic u64 | file bytes u64 | records u64 | checksum u64 (of the
// final header, the records' digest and the trailer's first 24 bytes).
constexpr std::size_t kTrailerChecked = 24;
// Object body: size u64 | counted u64 | retained u64 | lease ttl i64 | soft
// pin ttl i64 | flags u32 | key bytes u32 | payload bytes u32 | key | payload.
constexpr std::size_t kObjectFixed = 52;
constexpr std::uint32_t kFlagHardPinned = 1;
// Tenant body: instance u64 | quota limit u64 | name bytes u32 | name.
constexpr std::size_t kTenantFixed = 20;
// Group body: members u32 | name bytes u32 | name.
constexpr std::size_t kGroupFixed = 8;
// Tenant end body: groups u64 | objects u64.
constexpr std::size_t kTenantEndBytes = 16;

template <typename T>
void Put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}
template <typename T>
void PutAt(char* out, std::size_t offset, T value) {
  std::memcpy(out + offset, &value, sizeof(T));
}
template <typename T>
T Get(const char* in, std::size_t offset) {
  T value;
  std::memcpy(&value, in + offset, sizeof(T));
  return value;
}

Status IoError(const char* what, const std::string& path, int error) {
  const std::string message =
      std::string(what) + " " + path + ": " + std::strerror(error);
  if (error == ENOENT) return NotFoundError(message);
  return error == ENOSPC || error == EDQUOT ? ResourceExhaustedError(message)
                                            : InternalError(message);
}

std::string DirectoryOf(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status WriteAll(int fd, const char* data, std::size_t bytes,
                const std::string& path) {
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::write(fd, data + done, bytes - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("cannot write", path, errno);
    }
    done += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

void EncodeHeader(char* out, std::uint32_t version, std::uint64_t tenants,
                  std::uint64_t groups, std::uint64_t objects,
                  std::uint64_t records) {
  std::memset(out, 0, kSnapshotHeaderBytes);
  PutAt<std::uint64_t>(out, 0, kSnapshotMagic);
  PutAt<std::uint32_t>(out, 8, version);
  PutAt<std::uint32_t>(out, 12,
                       static_cast<std::uint32_t>(kSnapshotHeaderBytes));
  PutAt<std::uint64_t>(out, 16, tenants);
  PutAt<std::uint64_t>(out, 24, groups);
  PutAt<std::uint64_t>(out, 32, objects);
  PutAt<std::uint64_t>(out, 40, records);
  PutAt<std::uint64_t>(out, kHeaderChecked,
                       XXH64(out, kHeaderChecked, kHeaderSeed));
}

std::uint64_t TrailerChecksum(const char* header, std::uint64_t digest,
                              const char* trailer) {
  char buffer[kSnapshotHeaderBytes + 8 + kTrailerChecked];
  std::memcpy(buffer, header, kSnapshotHeaderBytes);
  std::memcpy(buffer + kSnapshotHeaderBytes, &digest, 8);
  std::memcpy(buffer + kSnapshotHeaderBytes + 8, trailer, kTrailerChecked);
  return XXH64(buffer, sizeof(buffer), kTrailerSeed);
}

std::uint64_t RecordChecksum(const char* frame_and_body, std::size_t bytes) {
  return XXH64(frame_and_body, bytes, kRecordSeed);
}

}  // namespace

struct SnapshotFileWriter::Digest {
  XXH64_state_t state;
};

SnapshotFileWriter::SnapshotFileWriter(std::string path, std::string tmp,
                                       int fd,
                                       const SnapshotWriteOptions& options)
    : path_(std::move(path)),
      tmp_(std::move(tmp)),
      fd_(fd),
      options_(options),
      digest_(std::make_unique<Digest>()) {
  XXH64_reset(&digest_->state, kDigestSeed);
  // The header's place; it is written for real by Commit().
  buffer_.assign(kSnapshotHeaderBytes, '\0');
}

Result<std::unique_ptr<SnapshotFileWriter>> SnapshotFileWriter::Create(
    const std::string& path, const SnapshotWriteOptions& options) {
  if (path.empty()) return InvalidArgumentError("empty snapshot path");
  // A temporary file of this writer's own (`path`.tmp.<pid>.<n>, created
  // exclusively): two writers of one path must never share an inode, or the
  // later one's rename publishes the earlier one's bytes mixed into its own.
  static std::atomic<std::uint64_t> next_tmp{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0;; ++attempt) {
    tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
          std::to_string(next_tmp.fetch_add(1, std::memory_order_relaxed));
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) break;
    // EEXIST: a leftover of an earlier process with this pid; try the next.
    if (errno != EEXIST || attempt == 15) {
      return IoError("cannot create", tmp, errno);
    }
  }
  return std::unique_ptr<SnapshotFileWriter>(
      new SnapshotFileWriter(path, std::move(tmp), fd, options));
}

SnapshotFileWriter::~SnapshotFileWriter() {
  if (!committed_) Abandon();
}

void SnapshotFileWriter::Abandon() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  ::unlink(tmp_.c_str());
}

Status SnapshotFileWriter::AppendRecord(SnapshotRecordType type,
                                        std::string_view body) {
  if (fd_ < 0) return FailedPreconditionError("snapshot writer failed");
  if (body.size() > kSnapshotMaxRecordBytes) {
    return InvalidArgumentError("snapshot record larger than 1 GiB");
  }
  const std::size_t start = buffer_.size();
  Put<std::uint32_t>(buffer_, static_cast<std::uint32_t>(body.size()));
  Put<std::uint8_t>(buffer_, static_cast<std::uint8_t>(type));
  buffer_.append(3, '\0');
  buffer_.append(body);
  const std::uint64_t checksum =
      RecordChecksum(buffer_.data() + start, buffer_.size() - start);
  Put<std::uint64_t>(buffer_, checksum);
  const std::size_t record_bytes = buffer_.size() - start;
  XXH64_update(&digest_->state, buffer_.data() + start, record_bytes);
  offset_ += record_bytes;
  ++records_;
  if (buffer_.size() >= kFlushBytes) return FlushBuffer();
  return Status::Ok();
}

Status SnapshotFileWriter::FlushBuffer() {
  Status s = WriteAll(fd_, buffer_.data(), buffer_.size(), tmp_);
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
  Put<std::uint64_t>(body_, tenant.instance);
  Put<std::uint64_t>(body_, tenant.quota_limit_bytes);
  Put<std::uint32_t>(body_, static_cast<std::uint32_t>(tenant.name.size()));
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
  Put<std::uint32_t>(body_, static_cast<std::uint32_t>(members));
  Put<std::uint32_t>(body_, static_cast<std::uint32_t>(name.size()));
  body_.append(name);
  return AppendRecord(SnapshotRecordType::kGroup, body_);
}

Status SnapshotFileWriter::AddObject(const SnapshotObject& object) {
  CAIRN_CHECK_MSG(in_tenant_ && !object.key.empty(), "AddObject out of order");
  if (members_left_ > 0) --members_left_;
  ++objects_;
  ++tenant_objects_;
  body_.clear();
  Put<std::uint64_t>(body_, object.size_bytes);
  Put<std::uint64_t>(body_, object.counted_bytes);
  Put<std::uint64_t>(body_, object.retained_bytes);
  Put<std::int64_t>(body_, object.lease_ttl_nanos);
  Put<std::int64_t>(body_, object.soft_pin_ttl_nanos);
  Put<std::uint32_t>(body_, object.hard_pinned ? kFlagHardPinned : 0u);
  Put<std::uint32_t>(body_, static_cast<std::uint32_t>(object.key.size()));
  Put<std::uint32_t>(body_, static_cast<std::uint32_t>(object.payload.size()));
  body_.append(object.key);
  body_.append(object.payload);
  return AppendRecord(SnapshotRecordType::kObject, body_);
}

Status SnapshotFileWriter::EndTenant() {
  CAIRN_CHECK_MSG(in_tenant_ && members_left_ == 0, "EndTenant out of order");
  in_tenant_ = false;
  body_.clear();
  Put<std::uint64_t>(body_, tenant_groups_);
  Put<std::uint64_t>(body_, tenant_objects_);
  return AppendRecord(SnapshotRecordType::kTenantEnd, body_);
}

Status SnapshotFileWriter::Commit() {
  CAIRN_CHECK_MSG(!in_tenant_ && !committed_, "Commit out of order");
  if (fd_ < 0) return FailedPreconditionError("snapshot writer failed");
  char header[kSnapshotHeaderBytes];
  EncodeHeader(header, options_.format_version, tenants_, groups_, objects_,
               records_);
  char trailer[kSnapshotTrailerBytes];
  PutAt<std::uint64_t>(trailer, 0, kSnapshotTrailerMagic);
  PutAt<std::uint64_t>(trailer, 8, offset_ + kSnapshotTrailerBytes);
  PutAt<std::uint64_t>(trailer, 16, records_);
  PutAt<std::uint64_t>(
      trailer, kTrailerChecked,
      TrailerChecksum(header, XXH64_digest(&digest_->state), trailer));
  buffer_.append(trailer, sizeof(trailer));
  if (Status s = FlushBuffer(); !s.ok()) return s;
  ssize_t n;
  do {
    n = ::pwrite(fd_, header, sizeof(header), 0);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof(header))) {
    const int error = n < 0 ? errno : EIO;
    Abandon();
    return IoError("cannot write the header of", tmp_, error);
  }
  if (options_.sync && ::fdatasync(fd_) != 0) {
    const int error = errno;
    Abandon();
    return IoError("cannot sync", tmp_, error);
  }
  if (::close(fd_) != 0) {
    const int error = errno;
    fd_ = -1;
    Abandon();
    return IoError("cannot close", tmp_, error);
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    Abandon();
    return IoError("cannot rename", tmp_, error);
  }
  committed_ = true;
  if (!options_.sync) return Status::Ok();
  const std::string dir = DirectoryOf(path_);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return IoError("cannot open", dir, errno);
  const int rc = ::fsync(dir_fd);
  const int error = errno;
  ::close(dir_fd);
  if (rc != 0) return IoError("cannot sync", dir, error);
  return Status::Ok();
}

// ---- reader ----------------------------------------------------------------

namespace {

Status ReadWholeFile(const std::string& path, std::vector<char>* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return IoError("cannot stat", path, error);
  }
  try {
    out->resize(static_cast<std::size_t>(st.st_size));
  } catch (const std::bad_alloc&) {
    ::close(fd);
    return ResourceExhaustedError("snapshot does not fit in memory");
  }
  std::size_t done = 0;
  while (done < out->size()) {
    const ssize_t n = ::read(fd, out->data() + done, out->size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      return IoError("cannot read", path, error);
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  // A file that grew while it was read is not what fstat described.
  char extra;
  ssize_t more;
  do {
    more = ::read(fd, &extra, 1);
  } while (more < 0 && errno == EINTR);
  ::close(fd);
  if (done != out->size() || more != 0) {
    return DataLossError("snapshot changed size while it was read");
  }
  return Status::Ok();
}

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
          const std::uint32_t name_bytes = Get<std::uint32_t>(body, 16);
          if (name_bytes != bytes - kTenantFixed) {
            return Corrupt("tenant record length");
          }
          out->tenants.emplace_back();
          tenant = &out->tenants.back();
          tenant_counted = 0;
          tenant->tenant.instance = Get<std::uint64_t>(body, 0);
          tenant->tenant.quota_limit_bytes = Get<std::uint64_t>(body, 8);
          tenant->tenant.name =
              std::string_view(body + kTenantFixed, name_bytes);
          if (!names.insert(tenant->tenant.name).second) {
            return Corrupt("tenant named twice");
          }
          break;
        }
        case SnapshotRecordType::kGroup: {
          if (tenant == nullptr || members_left != 0) {
            return Corrupt("group record out of place");
          }
          if (bytes < kGroupFixed) return Corrupt("short group record");
          const std::uint32_t members = Get<std::uint32_t>(body, 0);
          const std::uint32_t name_bytes = Get<std::uint32_t>(body, 4);
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
          o.size_bytes = Get<std::uint64_t>(body, 0);
          o.counted_bytes = Get<std::uint64_t>(body, 8);
          o.retained_bytes = Get<std::uint64_t>(body, 16);
          o.lease_ttl_nanos = Get<std::int64_t>(body, 24);
          o.soft_pin_ttl_nanos = Get<std::int64_t>(body, 32);
          const std::uint32_t flags = Get<std::uint32_t>(body, 40);
          const std::uint32_t key_bytes = Get<std::uint32_t>(body, 44);
          const std::uint32_t payload_bytes = Get<std::uint32_t>(body, 48);
          if ((flags & ~kFlagHardPinned) != 0 || key_bytes == 0 ||
              std::uint64_t{key_bytes} + payload_bytes !=
                  bytes - kObjectFixed ||
              o.lease_ttl_nanos < 0 || o.soft_pin_ttl_nanos < 0) {
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
          if (Get<std::uint64_t>(body, 0) != tenant->groups ||
              Get<std::uint64_t>(body, 8) != tenant->objects.size()) {
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
    const std::uint32_t body_bytes = Get<std::uint32_t>(frame, 0);
    if (body_bytes > end_ - at_ - kSnapshotRecordFrameBytes) {
      return Corrupt("record longer than the file");
    }
    const std::size_t checked = 8 + std::size_t{body_bytes};
    if (Get<std::uint64_t>(frame, checked) != RecordChecksum(frame, checked)) {
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

Result<ParsedSnapshot> ReadSnapshotFile(const std::string& path) {
  std::vector<char> bytes;
  CAIRN_RETURN_IF_ERROR(ReadWholeFile(path, &bytes));
  return ParseSnapshot(std::move(bytes));
}

Result<ParsedSnapshot> ParseSnapshot(std::vector<char> file) {
  ParsedSnapshot parsed;
  parsed.bytes = std::move(file);
  const std::vector<char>& bytes = parsed.bytes;
  const std::size_t size = bytes.size();
  if (size < kSnapshotHeaderBytes) {
    return DataLossError("snapshot is truncated: no complete header");
  }
  const char* header = bytes.data();
  if (Get<std::uint64_t>(header, 0) != kSnapshotMagic) {
    return DataLossError("not a cairn snapshot: wrong magic");
  }
  if (Get<std::uint64_t>(header, kHeaderChecked) !=
      XXH64(header, kHeaderChecked, kHeaderSeed)) {
    return DataLossError("snapshot header checksum mismatch");
  }
  const std::uint32_t version = Get<std::uint32_t>(header, 8);
  if (version != kSnapshotFormatVersion) {
    return FailedPreconditionError(
        "snapshot format version " + std::to_string(version) +
        " is not supported (this build reads " +
        std::to_string(kSnapshotFormatVersion) + ")");
  }
  if (Get<std::uint32_t>(header, 12) != kSnapshotHeaderBytes ||
      Get<std::uint64_t>(header, 48) != 0) {
    return DataLossError("snapshot header fields");
  }
  if (size < kSnapshotHeaderBytes + kSnapshotTrailerBytes) {
    return DataLossError("snapshot is truncated: no trailer");
  }
  const std::size_t trailer_at = size - kSnapshotTrailerBytes;
  const char* trailer = bytes.data() + trailer_at;
  if (Get<std::uint64_t>(trailer, 0) != kSnapshotTrailerMagic ||
      Get<std::uint64_t>(trailer, 8) != size) {
    return DataLossError(
        "snapshot is truncated or has trailing bytes: no trailer at its end");
  }
  const std::uint64_t digest =
      XXH64(bytes.data() + kSnapshotHeaderBytes,
            trailer_at - kSnapshotHeaderBytes, kDigestSeed);
  if (Get<std::uint64_t>(trailer, kTrailerChecked) !=
      TrailerChecksum(header, digest, trailer)) {
    return DataLossError("snapshot checksum mismatch");
  }
  RecordParser parser(bytes.data(), kSnapshotHeaderBytes, trailer_at);
  CAIRN_RETURN_IF_ERROR(parser.Parse(&parsed));
  if (parser.records() != Get<std::uint64_t>(header, 40) ||
      parser.records() != Get<std::uint64_t>(trailer, 16) ||
      parsed.tenants.size() != Get<std::uint64_t>(header, 16) ||
      parsed.groups != Get<std::uint64_t>(header, 24) ||
      parsed.objects != Get<std::uint64_t>(header, 32)) {
    return Corrupt("counts in the header do not match the records");
  }
  return parsed;
}

std::vector<char> FrameSnapshotForTest(
    std::span<const std::pair<SnapshotRecordType, std::string>> records,
    std::uint32_t version) {
  std::string out(kSnapshotHeaderBytes, '\0');
  std::uint64_t counts[4] = {0, 0, 0, 0};  // tenants, groups, objects, all
  for (const auto& [type, body] : records) {
    const std::size_t start = out.size();
    Put<std::uint32_t>(out, static_cast<std::uint32_t>(body.size()));
    Put<std::uint8_t>(out, static_cast<std::uint8_t>(type));
    out.append(3, '\0');
    out.append(body);
    Put<std::uint64_t>(out,
                       RecordChecksum(out.data() + start, out.size() - start));
    if (type == SnapshotRecordType::kTenant) ++counts[0];
    if (type == SnapshotRecordType::kGroup) ++counts[1];
    if (type == SnapshotRecordType::kObject) ++counts[2];
    ++counts[3];
  }
  char header[kSnapshotHeaderBytes];
  EncodeHeader(header, version, counts[0], counts[1], counts[2], counts[3]);
  std::memcpy(out.data(), header, sizeof(header));
  const std::uint64_t digest =
      XXH64(out.data() + kSnapshotHeaderBytes,
            out.size() - kSnapshotHeaderBytes, kDigestSeed);
  char trailer[kSnapshotTrailerBytes];
  PutAt<std::uint64_t>(trailer, 0, kSnapshotTrailerMagic);
  PutAt<std::uint64_t>(trailer, 8, out.size() + kSnapshotTrailerBytes);
  PutAt<std::uint64_t>(trailer, 16, counts[3]);
  PutAt<std::uint64_t>(trailer, kTrailerChecked,
                       TrailerChecksum(header, digest, trailer));
  out.append(trailer, sizeof(trailer));
  return std::vector<char>(out.begin(), out.end());
}

}  // namespace directory_internal
CAIRN_NAMESPACE_END
