// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The snapshot file (H2): its writer and its validating reader. Machinery for
// cairn/ha/snapshot.h, which is what hosts include; docs/snapshot.md
// has the format.
//
//   file    = header (64 B) | record* | trailer (32 B)
//   record  = body bytes u32 | type u8 | 3 zero bytes | body | XXH64 u64
//   tenant  = kTenant, then its units (a kObject singleton, or a kGroup
//             followed by exactly its members' kObject records), then
//             kTenantEnd with the tenant's group and object counts
//
// The header carries the magic, the format version, the totals (tenants,
// groups, objects, records), the durable-log position the snapshot reflects,
// the registry's next instance id and a checksum of its own fields; it is
// written
// last, over a zeroed placeholder, once the totals are known. The trailer
// carries its magic, the file length, the record count and a checksum over
// the final header, a digest of every record byte and its own fields, so a
// dropped, repeated or reordered record, a cut file and trailing bytes are
// all detected. Every integer is little-endian. Both go through an Env
// (SnapshotWriteOptions::env, ReadSnapshotFile's env).
//
// Thread safety: a writer is used by one thread. ReadSnapshotFile is a pure
// function of the file.

#ifndef CAIRN_HA_INTERNAL_SNAPSHOT_FILE_H_
#define CAIRN_HA_INTERNAL_SNAPSHOT_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/base/env.h"
#include "cairn/base/internal/coding.h"
#include "cairn/base/status.h"
#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

class SnapshotMetrics;  // cairn/ha/snapshot_metrics.h

inline constexpr std::uint64_t kSnapshotMagic =
    0x504e534e52494143ull;  // "CAIRNSNP"
inline constexpr std::uint64_t kSnapshotTrailerMagic =
    0x444e454e52494143ull;  // "CAIRNEND"
// Version 2 added the log position, the id counters and each object's id
// and version; a version-1 file (64-byte header) is refused.
inline constexpr std::uint32_t kSnapshotFormatVersion = 2;
inline constexpr std::size_t kSnapshotHeaderBytes = 80;
inline constexpr std::size_t kSnapshotTrailerBytes = 32;
inline constexpr std::size_t kSnapshotRecordFrameBytes = 16;
// A record body (one key and its encoded payload, say) is at most this big.
inline constexpr std::size_t kSnapshotMaxRecordBytes = std::size_t{1} << 30;

// How a snapshot is written.
struct SnapshotWriteOptions {
  // fdatasync the file before the rename and fsync its directory after.
  bool sync = true;
  // The tenant name a snapshot of a lone GroupDirectory records (a
  // registry's or a Tenant's snapshot records the tenants' own names).
  std::string tenant_name = "default";
  // The durable log's durable LSN read BEFORE the snapshot starts: every
  // record at or below it had its change visible before any unit was read,
  // so the snapshot reflects it or a later state; replay applies every
  // record above it. 0: none (no log). Recorded in the header and returned
  // by a restore (SnapshotStats::log_position).
  std::uint64_t log_position = 0;
  // For tests that need a well-formed file of another format version.
  std::uint32_t format_version = kSnapshotFormatVersion;
  // The file layer the snapshot is written through; null means
  // Env::Default(). Not owned: it must outlive the write.
  Env* env = nullptr;
  // Where the write is counted and timed (on the metrics' clock), failed
  // writes included; null: nowhere. Not owned.
  SnapshotMetrics* metrics = nullptr;
};

namespace directory_internal {

enum class SnapshotRecordType : std::uint8_t {
  kTenant = 1,
  kGroup = 2,
  kObject = 3,
  kTenantEnd = 4,
};

// One object as stored. Leases and soft pins are stored as the time they had
// left when the object was read (0: none), never as deadlines: a monotonic
// clock has no origin shared with another process.
struct SnapshotObject {
  std::string_view key;
  std::string_view payload;   // the host encoder's bytes
  std::uint64_t id = 0;       // its ObjectId (never 0)
  std::uint64_t version = 1;  // its version (never 0)
  std::uint64_t size_bytes = 0;
  std::uint64_t counted_bytes = 0;
  std::uint64_t retained_bytes = 0;
  std::int64_t lease_ttl_nanos = 0;
  std::int64_t soft_pin_ttl_nanos = 0;
  bool hard_pinned = false;
};

struct SnapshotTenant {
  std::string_view name;
  std::uint64_t instance = 0;  // the snapshotted instance's id
  std::uint64_t quota_limit_bytes = 0;
  // The directory's next ObjectId, read before any of its units (never 0).
  std::uint64_t next_object_id = 1;
};

// A singleton (empty group_name) or an explicit group: objects
// [first, first + count) of its tenant, in file order.
struct SnapshotUnit {
  std::string_view group_name;
  std::size_t first = 0;
  std::size_t count = 0;
};

struct ParsedSnapshotTenant {
  SnapshotTenant tenant;
  std::vector<SnapshotUnit> units;
  std::vector<SnapshotObject> objects;
  std::size_t groups = 0;
};

// A validated file; every string_view points into `bytes`.
struct ParsedSnapshot {
  std::vector<char> bytes;
  std::vector<ParsedSnapshotTenant> tenants;
  std::uint64_t groups = 0;
  std::uint64_t objects = 0;
  std::uint64_t log_position = 0;
  std::uint64_t next_instance = 0;  // 0: not a registry's snapshot
};

// Writes a snapshot to a temporary file of its own (`path`.tmp.<pid>.<n>,
// created exclusively), then (Commit) syncs it and renames it
// over `path`. Records are buffered and written in large chunks. Calls must
// follow the grammar above (CAIRN_CHECK). A writer destroyed before a
// successful Commit removes its temporary file.
class SnapshotFileWriter {
 public:
  // Errors: kInvalidArgument (empty path), the Env's error creating the
  // temporary file (kNotFound if the directory does not exist).
  static Result<std::unique_ptr<SnapshotFileWriter>> Create(
      const std::string& path, const SnapshotWriteOptions& options);
  ~SnapshotFileWriter();
  SnapshotFileWriter(const SnapshotFileWriter&) = delete;
  SnapshotFileWriter& operator=(const SnapshotFileWriter&) = delete;

  // The registry's next instance id, read before its tenants (0, the
  // default: not a registry's snapshot). Any time before Commit.
  void set_next_instance(std::uint64_t next) noexcept { next_instance_ = next; }
  Status BeginTenant(const SnapshotTenant& tenant);
  // A group of `members` objects; exactly that many AddObject calls follow.
  Status AddGroup(std::string_view name, std::size_t members);
  Status AddObject(const SnapshotObject& object);
  Status EndTenant();
  // Trailer, header, sync, rename, directory sync. Errors leave `path` as it
  // was (the temporary file is removed).
  Status Commit();

  std::uint64_t tenants() const noexcept { return tenants_; }
  std::uint64_t groups() const noexcept { return groups_; }
  std::uint64_t objects() const noexcept { return objects_; }
  std::uint64_t bytes() const noexcept { return offset_; }

 private:
  SnapshotFileWriter(Env* env, std::string path, std::string tmp,
                     std::unique_ptr<FileHandle> file,
                     const SnapshotWriteOptions& options);
  Status AppendRecord(SnapshotRecordType type, std::string_view body);
  Status FlushBuffer();
  void Abandon();

  Env* const env_;
  const std::string path_;
  const std::string tmp_;
  std::unique_ptr<FileHandle> file_;  // null once committed or abandoned
  const SnapshotWriteOptions options_;
  std::string buffer_;
  std::string body_;
  std::uint64_t offset_ = kSnapshotHeaderBytes;  // file bytes so far
  std::uint64_t records_ = 0;
  std::uint64_t tenants_ = 0;
  std::uint64_t groups_ = 0;
  std::uint64_t objects_ = 0;
  std::uint64_t next_instance_ = 0;
  std::uint64_t tenant_groups_ = 0;
  std::uint64_t tenant_objects_ = 0;
  std::size_t members_left_ = 0;
  bool in_tenant_ = false;
  bool committed_ = false;
  base_internal::StreamingChecksum64 digest_;  // over the record bytes
};

// Reads and validates the whole file before returning anything: header
// (magic, checksum, version), trailer (magic, file length, checksum over
// header, records and trailer), every record's frame and checksum, the
// grammar, field lengths and every count. Errors: kDataLoss (corrupt,
// truncated, trailing bytes, or a file that is not a snapshot),
// kFailedPrecondition (a well-formed file of another format version),
// kNotFound (no such file), kInternal (a read error). Read through `env`
// (null: Env::Default()).
Result<ParsedSnapshot> ReadSnapshotFile(const std::string& path,
                                        Env* env = nullptr);
// The same checks over bytes already in memory (the fuzz harness's entry).
Result<ParsedSnapshot> ParseSnapshot(std::vector<char> file);

// Frames `records` into a file with valid checksums, a header whose counts
// tally the record types, and a trailer: for tests and the fuzz harness,
// which need files whose checksums pass and whose grammar or fields do not.
std::vector<char> FrameSnapshotForTest(
    std::span<const std::pair<SnapshotRecordType, std::string>> records,
    std::uint32_t version = kSnapshotFormatVersion,
    std::uint64_t log_position = 0, std::uint64_t next_instance = 0);

}  // namespace directory_internal

CAIRN_NAMESPACE_END

#endif  // CAIRN_HA_INTERNAL_SNAPSHOT_FILE_H_
