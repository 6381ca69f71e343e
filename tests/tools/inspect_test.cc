// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// cairn-inspect (tools/inspect/inspect.h, docs/inspect.md): each format is
// written by the real library, then inspected whole, truncated and with
// one flipped byte; the exit status, the reported place and the output
// are checked.

#include "inspect/inspect.h"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/internal/coding.h"
#include "cairn/directory/durable_log.h"
#include "cairn/flush/block_log.h"
#include "cairn/flush/internal/checkpoint.h"
#include "cairn/flush/log_format.h"
#include "cairn/flush/log_store.h"
#include "cairn/ha/file_durable_log.h"
#include "cairn/ha/internal/snapshot_file.h"
#include "flush/flush_testing.h"
#include "testing/scratch_dir.h"

namespace cairn {
namespace {

using inspect::kExitDamaged;
using inspect::kExitOk;
using inspect::kExitUnreadable;
using testing::ReadWholeFile;
using testing::ScratchDir;
using testing::WriteWholeFile;

struct Output {
  int exit = -1;
  std::string out;
  std::string err;

  // The first line of type `type` ("damage", "torn_tail", ...), or "".
  std::string Line(std::string_view type) const {
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with(std::string(type) + " ")) return line;
    }
    return "";
  }
  std::vector<std::string> Lines(std::string_view type) const {
    std::vector<std::string> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with(std::string(type) + " ")) lines.push_back(line);
    }
    return lines;
  }
};

// The number after ` name=` in a text line; -1 if absent.
std::int64_t Num(const std::string& line, std::string_view name) {
  const std::string key = " " + std::string(name) + "=";
  const std::size_t at = line.find(key);
  if (at == std::string::npos) return -1;
  return std::stoll(line.substr(at + key.size()));
}

Output Inspect(std::vector<std::string> args) {
  std::vector<const char*> argv = {"cairn-inspect"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out;
  std::ostringstream err;
  Output r;
  r.exit = inspect::InspectMain(
      std::span<const char* const>(argv.data(), argv.size()), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

void FlipByte(const std::string& path, std::uint64_t offset) {
  std::string bytes = ReadWholeFile(path);
  ASSERT_LT(offset, bytes.size());
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x40);
  WriteWholeFile(path, bytes);
}

void Truncate(const std::string& path, std::uint64_t size) {
  std::filesystem::resize_file(path, size);
}

// ---- durable log -----------------------------------------------------------

void Write(FileDurableLog& log, const std::string& body) {
  Result<LogReservation> r = log.Reserve(body.size());
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(log.Append(*r, body).ok());
  ASSERT_TRUE(log.Finalize(*r, {}).ok());
}

std::string ObjectRecord(DurableOp op, int i) {
  std::string body;
  BeginDurableRecord(op, 3, kNoGroup, "", 1, &body);
  DurableObjectState s;
  s.object = 100 + static_cast<ObjectId>(i);
  s.version = 1;
  s.size_bytes = 4096;
  s.counted_bytes = 4096;
  const std::string key = std::string("key\0", 4) + std::to_string(i);
  s.key = key;
  s.payload_logged = true;
  AddDurableObject(s, "payload", &body);
  return body;
}

// A log of 3 segments: LSN 1 a tenant record, 2..4 | 5..7 | 8..10 objects.
void WriteDurableLog(const std::string& dir) {
  FileDurableLogOptions options;
  options.sync = false;
  auto log = FileDurableLog::Open(dir, options);
  ASSERT_TRUE(log.ok()) << log.status().message();
  std::string tenant;
  EncodeDurableTenantRecord(DurableOp::kTenantCreate, 3, "alpha", 1 << 20,
                            &tenant);
  Write(**log, tenant);
  for (int i = 2; i <= 10; ++i) {
    Write(**log,
          ObjectRecord(i == 9 ? DurableOp::kErase : DurableOp::kCreate, i));
    if (i == 4 || i == 7) {
      ASSERT_TRUE((*log)->Rotate().ok());
    }
  }
}

std::string Segment(const std::string& dir, Lsn first) {
  return dir + "/" + DurableLogSegmentName(first);
}

// The byte offset of the record with LSN `lsn`, from a dump.
std::int64_t RecordOffset(const std::string& path, Lsn lsn) {
  Output dump = Inspect({"dump", path});
  for (const std::string& line : dump.Lines("record")) {
    if (Num(line, "lsn") == static_cast<std::int64_t>(lsn)) {
      return Num(line, "offset");
    }
  }
  return -1;
}

TEST(InspectTest, DurableLogDirectoryVerifiesDumpsAndStats) {
  ScratchDir dir("inspect");
  const std::string log = dir.File("wal");
  WriteDurableLog(log);
  Output id = Inspect({"identify", log});
  EXPECT_EQ(id.exit, kExitOk);
  EXPECT_NE(id.Line("format").find("kind=durable_log_directory version=2"),
            std::string::npos)
      << id.out;

  Output verify = Inspect({"verify", log});
  EXPECT_EQ(verify.exit, kExitOk) << verify.out;
  EXPECT_EQ(verify.Line("damage"), "");
  EXPECT_EQ(verify.Line("torn_tail"), "");
  EXPECT_EQ(Num(verify.Line("durable_log"), "records"), 10);

  Output dump = Inspect({"dump", log});
  ASSERT_EQ(dump.exit, kExitOk) << dump.out;
  const std::vector<std::string> records = dump.Lines("record");
  ASSERT_EQ(records.size(), 10u);
  for (std::size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(Num(records[i], "lsn"), static_cast<std::int64_t>(i + 1));
  }
  EXPECT_NE(records[0].find("op=tenant_create tenant=3 tenant_name=\"alpha\""),
            std::string::npos)
      << records[0];
  EXPECT_NE(records[8].find("op=erase"), std::string::npos) << records[8];
  const std::vector<std::string> objects = dump.Lines("object");
  ASSERT_EQ(objects.size(), 9u);
  // A key is bytes: the NUL is escaped.
  EXPECT_NE(objects[0].find("key=\"key\\x002\" object_id=102 version=1 "
                            "size=4096"),
            std::string::npos)
      << objects[0];
  EXPECT_NE(objects[0].find("payload_bytes=7"), std::string::npos);

  Output stat = Inspect({"stat", log});
  ASSERT_EQ(stat.exit, kExitOk);
  const std::string summary = stat.Line("durable_log");
  EXPECT_EQ(Num(summary, "segments"), 3);
  EXPECT_EQ(Num(summary, "first_lsn"), 1);
  EXPECT_EQ(Num(summary, "last_lsn"), 10);
  EXPECT_EQ(Num(summary, "tenant_create"), 1);
  EXPECT_EQ(Num(summary, "erase"), 1);
  EXPECT_EQ(Num(summary, "create"), 8);
  const std::vector<std::string> segments = stat.Lines("segment");
  ASSERT_EQ(segments.size(), 3u);
  EXPECT_EQ(Num(segments[1], "first_lsn"), 5);
  EXPECT_EQ(Num(segments[1], "last_lsn"), 7);
  EXPECT_EQ(
      Num(segments[1], "bytes"),
      static_cast<std::int64_t>(std::filesystem::file_size(Segment(log, 5))));

  // One segment on its own is identified and read too.
  Output one = Inspect({"verify", Segment(log, 8)});
  EXPECT_EQ(one.exit, kExitOk) << one.out;
  EXPECT_NE(one.Line("format").find("kind=durable_log_segment"),
            std::string::npos);
  EXPECT_EQ(Num(one.Line("durable_log"), "first_lsn"), 8);
}

TEST(InspectTest, DurableLogJsonEscapesKeyBytes) {
  ScratchDir dir("inspect");
  const std::string log = dir.File("wal");
  WriteDurableLog(log);
  Output dump = Inspect({"dump", "--json", log});
  ASSERT_EQ(dump.exit, kExitOk);
  std::istringstream in(dump.out);
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    EXPECT_TRUE(line.starts_with("{\"type\":\"") && line.ends_with("}"))
        << line;
  }
  EXPECT_GT(lines, 20);
  EXPECT_NE(dump.out.find("\"key\":\"key\\u00002\""), std::string::npos)
      << dump.out;
  EXPECT_NE(dump.out.find("{\"type\":\"result\",\"status\":\"ok\",\"exit\":0}"),
            std::string::npos);
}

TEST(InspectTest, DurableLogTornTailIsANoteNotDamage) {
  ScratchDir dir("inspect");
  const std::string log = dir.File("wal");
  WriteDurableLog(log);
  const std::string newest = Segment(log, 8);
  const std::int64_t last = RecordOffset(log, 10);
  ASSERT_GT(last, 0);
  Truncate(newest, static_cast<std::uint64_t>(last) + 11);
  Output verify = Inspect({"verify", log});
  EXPECT_EQ(verify.exit, kExitOk) << verify.out;
  const std::string torn = verify.Line("torn_tail");
  EXPECT_EQ(Num(torn, "offset"), last) << verify.out;
  EXPECT_EQ(Num(torn, "bytes"), 11);
  EXPECT_NE(torn.find(newest), std::string::npos);
  EXPECT_EQ(Num(verify.Line("durable_log"), "last_lsn"), 9);
}

TEST(InspectTest, DurableLogFlippedByteIsReportedAtItsFrame) {
  ScratchDir dir("inspect");
  const std::string log = dir.File("wal");
  WriteDurableLog(log);
  // Record 6, in the middle segment (5..7): damage in an older segment.
  const std::int64_t at = RecordOffset(log, 6);
  ASSERT_GT(at, 0);
  FlipByte(Segment(log, 5), static_cast<std::uint64_t>(at) + 30);
  Output verify = Inspect({"verify", log});
  EXPECT_EQ(verify.exit, kExitDamaged) << verify.out;
  const std::string damage = verify.Line("damage");
  EXPECT_EQ(Num(damage, "offset"), at) << verify.out;
  EXPECT_NE(damage.find(Segment(log, 5)), std::string::npos);
  EXPECT_NE(damage.find("bad frame"), std::string::npos);
  EXPECT_NE(damage.find("at LSN 6"), std::string::npos);
  // The records before the damage are still dumped.
  Output dump = Inspect({"dump", log});
  EXPECT_EQ(dump.exit, kExitDamaged);
  EXPECT_EQ(dump.Lines("record").size(), 5u);
}

TEST(InspectTest, DurableLogDamageBeforeAValidRecordInTheNewestSegment) {
  ScratchDir dir("inspect");
  const std::string log = dir.File("wal");
  WriteDurableLog(log);
  const std::int64_t at = RecordOffset(log, 9);
  ASSERT_GT(at, 0);
  FlipByte(Segment(log, 8), static_cast<std::uint64_t>(at) + 25);
  Output verify = Inspect({"verify", log});
  EXPECT_EQ(verify.exit, kExitDamaged) << verify.out;
  const std::string damage = verify.Line("damage");
  EXPECT_EQ(Num(damage, "offset"), at);
  EXPECT_NE(damage.find("a valid record follows"), std::string::npos);
}

TEST(InspectTest, DurableLogGapBetweenSegmentsIsDamage) {
  ScratchDir dir("inspect");
  const std::string log = dir.File("wal");
  WriteDurableLog(log);
  std::filesystem::remove(Segment(log, 5));
  Output verify = Inspect({"verify", log});
  EXPECT_EQ(verify.exit, kExitDamaged) << verify.out;
  const std::string damage = verify.Line("damage");
  EXPECT_NE(damage.find("LSN gap"), std::string::npos) << damage;
  EXPECT_NE(damage.find("LSNs 5 .. 7 missing"), std::string::npos) << damage;
  EXPECT_NE(damage.find(Segment(log, 8)), std::string::npos);
}

TEST(InspectTest, StoreDirectoryWithAHeaderlessFileIsDamaged) {
  ScratchDir dir("inspect");
  const std::string log = dir.File("wal");
  WriteDurableLog(log);
  // Cut below the magic and version: still a log directory (its names say
  // so), whose first segment Open refuses with kDataLoss.
  Truncate(Segment(log, 1), 7);
  Output verify = Inspect({"verify", log});
  EXPECT_EQ(verify.exit, kExitDamaged) << verify.out;
  EXPECT_NE(verify.Line("format").find("version=unknown"), std::string::npos);
  EXPECT_NE(verify.Line("damage").find(Segment(log, 1)), std::string::npos);

  const std::string store = dir.File("store");
  std::filesystem::create_directory(store);
  WriteWholeFile(store + "/log", "not a block log at all");
  Output garbage = Inspect({"verify", store});
  EXPECT_EQ(garbage.exit, kExitDamaged) << garbage.out;
  EXPECT_NE(garbage.Line("damage").find("offset=0"), std::string::npos);
}

// ---- snapshot --------------------------------------------------------------

void WriteSnapshotFile(const std::string& path, std::uint32_t version) {
  SnapshotWriteOptions options;
  options.sync = false;
  options.log_position = 42;
  options.format_version = version;
  auto w = directory_internal::SnapshotFileWriter::Create(path, options);
  ASSERT_TRUE(w.ok());
  directory_internal::SnapshotTenant t;
  t.name = "alpha";
  t.instance = 3;
  t.quota_limit_bytes = 1 << 20;
  t.next_object_id = 50;
  ASSERT_TRUE((*w)->BeginTenant(t).ok());
  directory_internal::SnapshotObject o;
  o.key = "single";
  o.payload = "p1";
  o.id = 7;
  o.version = 2;
  o.size_bytes = 10;
  o.counted_bytes = 10;
  ASSERT_TRUE((*w)->AddObject(o).ok());
  ASSERT_TRUE((*w)->AddGroup("g", 2).ok());
  o.key = "m1";
  o.id = 8;
  ASSERT_TRUE((*w)->AddObject(o).ok());
  const std::string odd_key("m\n2", 3);
  o.key = odd_key;
  o.id = 9;
  o.hard_pinned = true;
  ASSERT_TRUE((*w)->AddObject(o).ok());
  ASSERT_TRUE((*w)->EndTenant().ok());
  ASSERT_TRUE((*w)->Commit().ok());
}

TEST(InspectTest, SnapshotDumpsTenantsGroupsAndObjects) {
  ScratchDir dir("inspect");
  const std::string snap = dir.File("meta.snap");
  WriteSnapshotFile(snap, kSnapshotFormatVersion);
  Output verify = Inspect({"verify", snap});
  EXPECT_EQ(verify.exit, kExitOk) << verify.out;
  const std::string header = verify.Line("snapshot");
  EXPECT_EQ(Num(header, "log_position"), 42);
  EXPECT_EQ(Num(header, "objects"), 3);
  EXPECT_EQ(Num(header, "groups"), 1);

  Output dump = Inspect({"dump", snap});
  ASSERT_EQ(dump.exit, kExitOk);
  EXPECT_NE(dump.Line("tenant").find("name=\"alpha\" instance=3"),
            std::string::npos);
  EXPECT_NE(dump.Line("group").find("name=\"g\" members=2"), std::string::npos);
  const std::vector<std::string> objects = dump.Lines("object");
  ASSERT_EQ(objects.size(), 3u);
  EXPECT_NE(objects[0].find("group=\"\" key=\"single\" object_id=7 version=2"),
            std::string::npos)
      << objects[0];
  EXPECT_NE(objects[2].find("key=\"m\\x0a2\""), std::string::npos)
      << objects[2];
  EXPECT_NE(objects[2].find("hard_pinned=true"), std::string::npos);

  Output stat = Inspect({"stat", snap});
  EXPECT_EQ(Num(stat.Line("snapshot_summary"), "counted_bytes"), 30);
}

TEST(InspectTest, SnapshotTruncatedOrFlippedIsDamaged) {
  ScratchDir dir("inspect");
  const std::string snap = dir.File("meta.snap");
  WriteSnapshotFile(snap, kSnapshotFormatVersion);
  const std::uint64_t size = std::filesystem::file_size(snap);
  std::filesystem::copy_file(snap, dir.File("cut.snap"));
  Truncate(dir.File("cut.snap"), size - 5);
  Output cut = Inspect({"verify", dir.File("cut.snap")});
  EXPECT_EQ(cut.exit, kExitDamaged) << cut.out;
  EXPECT_NE(cut.Line("damage").find("truncated"), std::string::npos);

  FlipByte(snap, 100);
  Output flipped = Inspect({"verify", snap});
  EXPECT_EQ(flipped.exit, kExitDamaged) << flipped.out;
  EXPECT_NE(flipped.Line("damage").find("checksum"), std::string::npos);
}

TEST(InspectTest, SnapshotVersionOneIsIdentifiedAndUnsupported) {
  ScratchDir dir("inspect");
  const std::string snap = dir.File("old.snap");
  WriteSnapshotFile(snap, 1);
  for (const char* command : {"identify", "verify"}) {
    Output r = Inspect({command, snap});
    EXPECT_EQ(r.exit, kExitUnreadable) << r.out;
    EXPECT_NE(r.Line("format").find("kind=snapshot version=1 supported=false"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.Line("result").find("status=unsupported"), std::string::npos);
  }
}

// ---- LogStore, block log, checkpoint ---------------------------------------

constexpr std::size_t kBlockBytes = kLogMinBlockBytes;  // 12 KiB
constexpr std::size_t kValueBytes = 1000;

LogStoreOptions StoreOptions() {
  LogStoreOptions options;
  options.partitions = 2;
  options.databases = 2;
  options.block_bytes = kBlockBytes;
  options.sync = false;
  options.checkpoint_on_close = false;
  options.max_key_bytes = 64;
  options.max_value_bytes = 2000;
  return options;
}

std::string KeyOf(int i) { return "k" + std::to_string(100 + i); }

// 20 keys (1000-byte values, 1020-byte records) over several 4 KiB data
// areas, 5 of them written twice, then a checkpoint; then 3 more sets that
// only replay would see. Four records fill a data area (4080 bytes of
// record space), so blocks 0 .. 5 end with a seal record at 4080 and block
// 6 holds the last 4 records. Checkpoint and Close write every block's
// header (format 2 writes them lazily, as hints).
void WriteStore(const std::string& dir) {
  auto store = LogStore::Open(dir, StoreOptions());
  ASSERT_TRUE(store.ok()) << store.status().message();
  const std::string value(kValueBytes, 'v');
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE((*store)->Set(i % 2, KeyOf(i), value).ok());
    if (i == 8) {
      ASSERT_TRUE((*store)->Flush().ok());
    }
  }
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*store)->Set(i % 2, KeyOf(i), value).ok());
  }
  ASSERT_TRUE((*store)->Checkpoint().ok());
  for (int i = 20; i < 23; ++i) {
    ASSERT_TRUE((*store)->Set(0, KeyOf(i), value).ok());
  }
  ASSERT_TRUE((*store)->Close().ok());
}

constexpr std::uint64_t kRecordBytes = kLogRecordHeaderBytes + 4 + kValueBytes;
// Where a full block's seal record sits in its data area.
constexpr std::uint64_t kSealOffset = 4 * kRecordBytes;
static_assert(kSealOffset + kLogSealRecordBytes <= LogDataBytes(kBlockBytes));
static_assert(5 * kRecordBytes > LogRecordSpace(kBlockBytes));

std::uint64_t BlockOffset(std::uint64_t block) {
  return kLogFileHeaderBytes + block * kBlockBytes;
}
std::uint64_t DataOffset(std::uint64_t block) {
  return BlockOffset(block) + kLogBlockDataOffset;
}

// Makes both header slots of `block` invalid (as if never written).
void WipeHeaders(const std::string& log, std::uint64_t block) {
  std::string bytes = ReadWholeFile(log);
  ASSERT_LE(BlockOffset(block) + kLogBlockDataOffset, bytes.size());
  std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(BlockOffset(block)),
              kLogBlockDataOffset, '\0');
  WriteWholeFile(log, bytes);
}

TEST(InspectTest, LogStoreVerifiesAndCountsLiveBytesPerBlock) {
  ScratchDir dir("inspect");
  const std::string store = dir.File("store");
  WriteStore(store);
  Output verify = Inspect({"verify", store});
  EXPECT_EQ(verify.exit, kExitOk) << verify.out;
  EXPECT_NE(verify.Line("format").find("kind=log_store_directory version=3 "
                                       "supported=true"),
            std::string::npos)
      << verify.out;
  EXPECT_EQ(verify.Line("torn_tail"), "");
  const std::string summary = verify.Line("block_log");
  EXPECT_EQ(Num(summary, "records"), 28);
  // 28 records and the seals of the 6 full blocks.
  EXPECT_EQ(Num(summary, "used_bytes"),
            28 * kRecordBytes + 6 * kLogSealRecordBytes);
  EXPECT_EQ(Num(summary, "blocks"), 7);

  Output stat = Inspect({"stat", store});
  ASSERT_EQ(stat.exit, kExitOk) << stat.out;
  const std::vector<std::string> lines = stat.Lines("block");
  ASSERT_EQ(lines.size(), 7u);
  std::int64_t live = 0;
  std::int64_t live_records = 0;
  for (std::size_t b = 0; b < lines.size(); ++b) {
    const std::string& line = lines[b];
    const bool sealed = b < 6;
    EXPECT_EQ(Num(line, "records"), 4) << line;
    EXPECT_EQ(Num(line, "used_bytes"),
              4 * kRecordBytes + (sealed ? kLogSealRecordBytes : 0))
        << line;
    EXPECT_NE(line.find(sealed ? "sealed=true" : "sealed=false"),
              std::string::npos)
        << line;
    // Close wrote every block's header: each covers all its records.
    EXPECT_NE(line.find("header=true"), std::string::npos) << line;
    EXPECT_EQ(Num(line, "header_used_bytes"), Num(line, "used_bytes")) << line;
    live += Num(line, "checkpoint_live_bytes");
    live_records += Num(line, "checkpoint_live_records");
  }
  // The checkpoint keeps the 20 newest versions; the 5 overwritten records
  // in block 0 and 1 are dead, the 3 after the checkpoint not counted.
  EXPECT_EQ(live, 20 * kRecordBytes);
  EXPECT_EQ(live_records, 20);
  EXPECT_EQ(Num(lines[0], "checkpoint_live_bytes"), 0);  // k100..k103 rewritten
  // Block 6: k104's rewrite (live), then 3 records after the checkpoint.
  EXPECT_EQ(Num(lines[6], "checkpoint_live_bytes"), kRecordBytes);

  Output dump = Inspect({"dump", store});
  ASSERT_EQ(dump.exit, kExitOk);
  EXPECT_EQ(dump.Lines("record").size(), 28u);
  EXPECT_EQ(dump.Lines("entry").size(), 20u);
  EXPECT_NE(dump.Line("record").find("block=0 offset=0 op=set db=0 "
                                     "key=\"k100\" value_bytes=1000"),
            std::string::npos)
      << dump.Line("record");
  const std::vector<std::string> seals = dump.Lines("seal");
  ASSERT_EQ(seals.size(), 6u) << dump.out;
  for (std::size_t b = 0; b < seals.size(); ++b) {
    EXPECT_EQ(Num(seals[b], "block"), static_cast<std::int64_t>(b));
    EXPECT_EQ(Num(seals[b], "offset"), static_cast<std::int64_t>(kSealOffset));
  }
  EXPECT_EQ(Num(dump.Line("checkpoint"), "entries"), 20);
}

TEST(InspectTest, BlockLogFlippedByteNamesTheBlockAndRecord) {
  ScratchDir dir("inspect");
  const std::string store = dir.File("store");
  WriteStore(store);
  const std::string log = store + "/log";
  // Block 2's second record, inside its value: below the boundary of
  // block 2's header, so damage (recovery returns kDataLoss), not a tail.
  const std::uint64_t record = DataOffset(2) + kRecordBytes;
  FlipByte(log, record + 200);
  for (const std::string& path : {store, log}) {
    Output verify = Inspect({"verify", path});
    EXPECT_EQ(verify.exit, kExitDamaged) << verify.out;
    const std::string damage = verify.Line("damage");
    EXPECT_EQ(Num(damage, "offset"), static_cast<std::int64_t>(record))
        << damage;
    EXPECT_EQ(Num(damage, "block"), 2);
    EXPECT_NE(damage.find("below the header's boundary"), std::string::npos)
        << damage;
    EXPECT_NE(damage.find("checksum mismatch"), std::string::npos) << damage;
  }
}

TEST(InspectTest, BlockLogCutBelowABoundaryIsDamage) {
  ScratchDir dir("inspect");
  const std::string store = dir.File("store");
  WriteStore(store);
  const std::string log = store + "/log";
  // Block 6's header survives, its data below the boundary does not.
  Truncate(log, DataOffset(6) + 10);
  Output verify = Inspect({"verify", log});
  EXPECT_EQ(verify.exit, kExitDamaged) << verify.out;
  const std::string damage = verify.Line("damage");
  EXPECT_EQ(Num(damage, "block"), 6) << damage;
  EXPECT_EQ(Num(damage, "offset"),
            static_cast<std::int64_t>(DataOffset(6) + 10));
  EXPECT_NE(damage.find("the file holds 10"), std::string::npos) << damage;
  // The same with block 6's header gone is a torn tail: its first record
  // is cut, nothing vouches for it, and nothing names the slot's block
  // either, so Recover cuts the file at the slot's start.
  WipeHeaders(log, 6);
  Output torn = Inspect({"verify", log});
  EXPECT_EQ(torn.exit, kExitOk) << torn.out;
  EXPECT_EQ(Num(torn.Line("torn_tail"), "offset"),
            static_cast<std::int64_t>(BlockOffset(6)));
  EXPECT_EQ(Num(torn.Line("torn_tail"), "bytes"),
            static_cast<std::int64_t>(kLogBlockDataOffset + 10));
  EXPECT_EQ(Num(torn.Line("block_log"), "records"), 24);
}

TEST(InspectTest, BlockLogDamagedHeadersAreOnlyHints) {
  ScratchDir dir("inspect");
  const std::string store = dir.File("store");
  WriteStore(store);
  const std::string log = store + "/log";
  Output dump = Inspect({"dump", log});
  std::int64_t slot = -1;
  for (const std::string& line : dump.Lines("block")) {
    if (Num(line, "block") == 2) slot = Num(line, "slot");
  }
  ASSERT_GE(slot, 0) << dump.out;
  // Block 2's newest header slot: the records past the older slot's
  // boundary (or past offset 0) validate themselves, the seal leads on to
  // block 3, so nothing is lost (LogStoreTest.X10DamagedHeadersAreOnlyHints).
  FlipByte(log, BlockOffset(2) +
                    static_cast<std::uint64_t>(slot) * kLogHeaderSlotBytes +
                    20);
  Output verify = Inspect({"verify", log});
  EXPECT_EQ(verify.exit, kExitOk) << verify.out;
  EXPECT_EQ(verify.Line("damage"), "");
  EXPECT_EQ(verify.Line("torn_tail"), "");
  EXPECT_EQ(Num(verify.Line("block_log"), "records"), 28);
  // And with both of its slots gone.
  WipeHeaders(log, 2);
  Output stat = Inspect({"stat", log});
  EXPECT_EQ(stat.exit, kExitOk) << stat.out;
  const std::vector<std::string> blocks = stat.Lines("block");
  ASSERT_EQ(blocks.size(), 7u);
  EXPECT_NE(blocks[2].find("header=false"), std::string::npos) << blocks[2];
  EXPECT_NE(blocks[2].find("sealed=true"), std::string::npos) << blocks[2];
  EXPECT_EQ(Num(blocks[2], "records"), 4);
  EXPECT_EQ(Num(stat.Line("block_log"), "records"), 28);
  // LogStore::Open agrees.
  auto reopened = LogStore::Open(store, StoreOptions());
  EXPECT_TRUE(reopened.ok()) << reopened.status().message();
}

TEST(InspectTest, BlockLogLostSealBeforeAHeaderedBlockIsDamage) {
  ScratchDir dir("inspect");
  const std::string store = dir.File("store");
  WriteStore(store);
  const std::string log = store + "/log";
  // Without block 2's headers, a bad third record ends the scan there
  // (block 2 has no valid seal, so it is the last block), but block 3 has a
  // header: durable records were lost, as
  // LogStoreTest.X10DamagedBlockBeforeAHeaderedBlockIsDataLoss says.
  WipeHeaders(log, 2);
  FlipByte(log, DataOffset(2) + 2 * kRecordBytes + 100);
  Output verify = Inspect({"verify", log});
  EXPECT_EQ(verify.exit, kExitDamaged) << verify.out;
  const std::string damage = verify.Line("damage");
  EXPECT_EQ(Num(damage, "block"), 2) << damage;
  EXPECT_EQ(Num(damage, "offset"),
            static_cast<std::int64_t>(DataOffset(2) + 2 * kRecordBytes));
  EXPECT_NE(damage.find("without a seal but block 3 has a header"),
            std::string::npos)
      << damage;
  EXPECT_EQ(verify.Line("torn_tail"), "");
  // LogStore::Open replays from the checkpoint (block 6) and never reads
  // block 2; without the checkpoint it replays from block 0 and agrees.
  std::filesystem::remove(testing::NewestCheckpoint(store));
  auto reopened = LogStore::Open(store, StoreOptions());
  EXPECT_EQ(reopened.status().code(), StatusCode::kDataLoss)
      << reopened.status().message();
}

TEST(InspectTest, BlockLogTornTailIsANote) {
  ScratchDir dir("inspect");
  const std::string store = dir.File("store");
  WriteStore(store);
  const std::string log = store + "/log";
  const std::uint64_t size = std::filesystem::file_size(log);
  EXPECT_EQ(size, DataOffset(6) + 4 * kRecordBytes);
  std::string bytes = ReadWholeFile(log);
  bytes.append(100, 'x');
  WriteWholeFile(log, bytes);
  Output verify = Inspect({"verify", log});
  EXPECT_EQ(verify.exit, kExitOk) << verify.out;
  const std::string torn = verify.Line("torn_tail");
  EXPECT_EQ(Num(torn, "offset"), static_cast<std::int64_t>(size));
  EXPECT_EQ(Num(torn, "bytes"), 100);
  EXPECT_EQ(Num(verify.Line("block_log"), "records"), 28);
}

// A log written with the library's BlockLog and LogBlockBuffer as a crash
// may leave it: block 0's only header names its first record, but the
// block was filled and sealed past it and block 1 holds one more record,
// with no header (format 2 writes headers lazily). The scan goes past the
// hint, through the seal, into block 1.
TEST(InspectTest, BlockLogSealPastTheHeaderHintLeadsToTheNextBlock) {
  ScratchDir dir("inspect");
  const std::string path = dir.File("log");
  BlockLogOptions options;
  options.block_bytes = kBlockBytes;
  options.sync = false;
  std::uint64_t log_id = 0;
  std::uint32_t hint = 0;
  {
    auto log = BlockLog::Create(path, options);
    ASSERT_TRUE(log.ok()) << log.status().message();
    log_id = (*log)->log_id();
    LogBlockBuffer b0(0, (*log)->data_bytes(), log_id);
    ASSERT_TRUE(b0.ok());
    const std::string value(kValueBytes, 'v');
    b0.Append(LogRecordType::kSet, 0, "k000", value);
    const LogBlockHeader first = b0.HeaderAtUsed(1);
    hint = first.used_bytes;
    int n = 1;
    for (; b0.Fits(kRecordBytes); ++n) {
      b0.Append(LogRecordType::kSet, 1, "k00" + std::to_string(n), value);
    }
    ASSERT_EQ(n, 4);
    b0.Seal();
    ASSERT_TRUE((*log)->WriteData(0, 0, b0.data(), b0.used()).ok());
    ASSERT_TRUE((*log)->WriteHeader(first).ok());
    LogBlockBuffer b1(1, (*log)->data_bytes(), log_id, 1);
    ASSERT_TRUE(b1.ok());
    b1.Append(LogRecordType::kDelete, 1, "k001", "");
    ASSERT_TRUE((*log)->WriteData(1, 0, b1.data(), b1.used()).ok());
  }
  Output stat = Inspect({"stat", path});
  EXPECT_EQ(stat.exit, kExitOk) << stat.out;
  EXPECT_EQ(stat.Line("torn_tail"), "") << stat.out;
  const std::vector<std::string> blocks = stat.Lines("block");
  ASSERT_EQ(blocks.size(), 2u) << stat.out;
  EXPECT_EQ(Num(blocks[0], "header_used_bytes"), hint);
  EXPECT_EQ(Num(blocks[0], "used_bytes"),
            static_cast<std::int64_t>(kSealOffset + kLogSealRecordBytes));
  EXPECT_NE(blocks[0].find("sealed=true"), std::string::npos) << blocks[0];
  EXPECT_NE(blocks[1].find("header=false"), std::string::npos) << blocks[1];
  EXPECT_EQ(Num(blocks[1], "records"), 1);
  EXPECT_NE(blocks[1].find("sealed=false"), std::string::npos) << blocks[1];
  EXPECT_EQ(Num(stat.Line("block_log"), "records"), 5);
  // The id from the file header (a u64, so compared as text).
  EXPECT_NE(
      stat.Line("block_log").find(" log_id=" + std::to_string(log_id) + " "),
      std::string::npos)
      << stat.out;

  Output dump = Inspect({"dump", path});
  ASSERT_EQ(dump.exit, kExitOk) << dump.out;
  EXPECT_EQ(Num(dump.Line("seal"), "offset"),
            static_cast<std::int64_t>(kSealOffset));
  const std::vector<std::string> records = dump.Lines("record");
  ASSERT_EQ(records.size(), 5u);
  EXPECT_NE(records[4].find("block=1 offset=0 op=delete db=1 key=\"k001\""),
            std::string::npos)
      << records[4];

  // Garbage after block 1's record is a torn tail, where recovery cuts.
  const std::uint64_t end = DataOffset(1) + LogRecordBytes(4, 0);
  ASSERT_EQ(std::filesystem::file_size(path), end);
  std::string bytes = ReadWholeFile(path);
  bytes.append(40, 'x');
  WriteWholeFile(path, bytes);
  Output torn = Inspect({"verify", path});
  EXPECT_EQ(torn.exit, kExitOk) << torn.out;
  EXPECT_EQ(Num(torn.Line("torn_tail"), "offset"),
            static_cast<std::int64_t>(end));
  EXPECT_EQ(Num(torn.Line("torn_tail"), "bytes"), 40);

  // A flipped byte in block 0's seal, past the hint: block 0 becomes the
  // last block, and block 1's record is a torn tail, not damage.
  FlipByte(path, DataOffset(0) + kSealOffset + 6);
  Output unsealed = Inspect({"verify", path});
  EXPECT_EQ(unsealed.exit, kExitOk) << unsealed.out;
  EXPECT_EQ(Num(unsealed.Line("torn_tail"), "offset"),
            static_cast<std::int64_t>(DataOffset(0) + kSealOffset));
  EXPECT_EQ(Num(unsealed.Line("block_log"), "records"), 4);
  // Unless block 1 has a header: then block 0 lost a durable seal.
  {
    auto log = BlockLog::Open(path, options);
    ASSERT_TRUE(log.ok());
    LogBlockBuffer b1(1, (*log)->data_bytes(), log_id, 1);
    ASSERT_TRUE(b1.ok());
    b1.Append(LogRecordType::kDelete, 1, "k001", "");
    ASSERT_TRUE((*log)->WriteHeader(b1.HeaderAtUsed(1)).ok());
  }
  Output lost = Inspect({"verify", path});
  EXPECT_EQ(lost.exit, kExitDamaged) << lost.out;
  EXPECT_EQ(Num(lost.Line("damage"), "block"), 0);
  EXPECT_NE(lost.Line("damage").find("block 1 has a header"), std::string::npos)
      << lost.out;
}

// A record with the right bytes at another seat (another offset, as a
// stale copy would sit) does not pass: the seat seeds its checksum.
TEST(InspectTest, BlockLogRecordAtAnotherSeatIsATornTail) {
  ScratchDir dir("inspect");
  const std::string path = dir.File("log");
  BlockLogOptions options;
  options.block_bytes = kBlockBytes;
  options.sync = false;
  auto log = BlockLog::Create(path, options);
  ASSERT_TRUE(log.ok());
  LogBlockBuffer b0(0, (*log)->data_bytes(), (*log)->log_id());
  ASSERT_TRUE(b0.ok());
  b0.Append(LogRecordType::kSet, 0, "a", "1");
  const std::uint32_t one = b0.used();
  ASSERT_TRUE((*log)->WriteData(0, 0, b0.data(), one).ok());
  // The first record's bytes again, right after it.
  ASSERT_TRUE((*log)->WriteData(0, one, b0.data(), one).ok());
  Output verify = Inspect({"verify", path});
  EXPECT_EQ(verify.exit, kExitOk) << verify.out;
  EXPECT_EQ(Num(verify.Line("block_log"), "records"), 1);
  EXPECT_EQ(Num(verify.Line("torn_tail"), "offset"),
            static_cast<std::int64_t>(DataOffset(0) + one));
  // Under a header that vouches for both, the copy is damage.
  LogBlockHeader header = b0.HeaderAtUsed(1);
  header.used_bytes = 2 * one;
  header.record_count = 2;
  ASSERT_TRUE((*log)->WriteHeader(header).ok());
  Output damaged = Inspect({"verify", path});
  EXPECT_EQ(damaged.exit, kExitDamaged) << damaged.out;
  EXPECT_EQ(Num(damaged.Line("damage"), "offset"),
            static_cast<std::int64_t>(DataOffset(0) + one));
  EXPECT_NE(damaged.Line("damage").find("checksum mismatch"), std::string::npos)
      << damaged.out;
}

TEST(InspectTest, CheckpointAloneAndDamaged) {
  ScratchDir dir("inspect");
  const std::string store = dir.File("store");
  WriteStore(store);
  const std::string checkpoint = testing::NewestCheckpoint(store);
  Output dump = Inspect({"dump", checkpoint});
  EXPECT_EQ(dump.exit, kExitOk) << dump.out;
  EXPECT_NE(dump.Line("format").find("kind=checkpoint version=1"),
            std::string::npos);
  const std::vector<std::string> entries = dump.Lines("entry");
  ASSERT_EQ(entries.size(), 20u);
  // Entries follow the header and one count per map (2 x 2).
  EXPECT_EQ(Num(entries[0], "offset"),
            static_cast<std::int64_t>(flush_internal::kCheckpointHeaderBytes +
                                      4 * 8));
  EXPECT_EQ(Num(dump.Line("checkpoint_summary"), "live_bytes"),
            20 * kRecordBytes);

  FlipByte(checkpoint, 80);
  Output flipped = Inspect({"verify", store});
  EXPECT_EQ(flipped.exit, kExitDamaged) << flipped.out;
  EXPECT_NE(flipped.Line("damage").find("checkpoint checksum mismatch"),
            std::string::npos);
}

// Checkpoints whose seal is good but whose entries are not what the header
// counts (built with the library's encoder): the scan reports the entry's
// offset.
TEST(InspectTest, CheckpointEntryDamageIsReportedAtTheEntry) {
  ScratchDir dir("inspect");
  const auto write = [&](std::uint64_t counted, int written) {
    flush_internal::CheckpointEncoder encoder(2, 2, /*block=*/5, /*offset=*/0);
    encoder.SetMapCount(0, counted);  // maps 1-3 count 0
    for (int i = 0; i < written; ++i) {
      encoder.AddEntry(0, "key" + std::to_string(i), RecordLocation{1, 0, 20});
    }
    WriteWholeFile(dir.File("checkpoint"), std::move(encoder).Finish());
  };
  // Entries start after the header and 4 map counts; each is 20 + 4 bytes.
  const std::int64_t first = flush_internal::kCheckpointHeaderBytes + 4 * 8;
  write(3, 3);
  EXPECT_EQ(Inspect({"verify", dir.File("checkpoint")}).exit, kExitOk);

  write(3, 2);
  Output truncated = Inspect({"verify", dir.File("checkpoint")});
  EXPECT_EQ(truncated.exit, kExitDamaged) << truncated.out;
  EXPECT_EQ(Num(truncated.Line("damage"), "offset"), first + 2 * 24)
      << truncated.out;
  EXPECT_NE(truncated.Line("damage").find("truncated"), std::string::npos);

  write(2, 3);
  Output trailing = Inspect({"verify", dir.File("checkpoint")});
  EXPECT_EQ(trailing.exit, kExitDamaged) << trailing.out;
  EXPECT_EQ(Num(trailing.Line("damage"), "offset"), first + 2 * 24);
  EXPECT_NE(trailing.Line("damage").find("trailing bytes"), std::string::npos);
}

TEST(InspectTest, BlockLogOfAnotherVersionIsUnsupported) {
  ScratchDir dir("inspect");
  // An intact version 1 log (its file header sealed after 24 bytes, no log
  // id), which the library refuses: identified, and unsupported.
  const std::string v1_path = dir.File("v1");
  std::string v1(kLogFileHeaderBytes, '\0');
  base_internal::StoreFixed<std::uint64_t>(v1.data(), kLogFileMagic);
  base_internal::StoreFixed<std::uint32_t>(v1.data() + 8, 1);
  base_internal::StoreFixed<std::uint32_t>(v1.data() + 12, 4096);
  base_internal::StoreFixed<std::uint64_t>(v1.data() + 16, kBlockBytes);
  base_internal::SealRegion(v1.data(), 24, 0x66696c65);  // v1's "file" seed
  WriteWholeFile(v1_path, v1);
  for (const char* command : {"identify", "verify", "dump", "stat"}) {
    Output r = Inspect({command, v1_path});
    EXPECT_EQ(r.exit, kExitUnreadable) << command << "\n" << r.out;
    EXPECT_NE(r.Line("format").find("kind=block_log version=1 "
                                    "supported=false"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.Line("unsupported").find("version 1"), std::string::npos)
        << r.out;
    EXPECT_NE(r.Line("result").find("status=unsupported"), std::string::npos);
  }
  // A newer one, written by the library's encoder.
  const std::string v3_path = dir.File("v3");
  std::string header(kLogFileHeaderBytes, '\0');
  EncodeLogFileHeader(
      {kBlockBytes, 7},
      std::span<char, kLogFileHeaderBytes>(header.data(), header.size()),
      kLogFormatVersion + 1);
  WriteWholeFile(v3_path, header);
  Output verify = Inspect({"verify", v3_path});
  EXPECT_EQ(verify.exit, kExitUnreadable) << verify.out;
  EXPECT_NE(verify.Line("format").find("kind=block_log version=4 "
                                       "supported=false"),
            std::string::npos);
}

TEST(InspectTest, CommandLineErrors) {
  EXPECT_EQ(Inspect({"--help"}).exit, kExitOk);
  EXPECT_NE(Inspect({"--help"}).out.find("usage: cairn-inspect"),
            std::string::npos);
  EXPECT_EQ(Inspect({"frobnicate", "/tmp"}).exit, kExitUnreadable);
  EXPECT_EQ(Inspect({"verify"}).exit, kExitUnreadable);
  EXPECT_EQ(Inspect({"verify", "--max-record-bytes=x", "/tmp"}).exit,
            kExitUnreadable);
  ScratchDir dir("inspect");
  Output missing = Inspect({"verify", dir.File("nothing")});
  EXPECT_EQ(missing.exit, kExitUnreadable);
  EXPECT_NE(missing.Line("error").find("no such file"), std::string::npos);
  WriteWholeFile(dir.File("text"), "hello, this is not a cairn file");
  Output text = Inspect({"verify", dir.File("text")});
  EXPECT_EQ(text.exit, kExitUnreadable);
  EXPECT_NE(text.Line("error").find("not a cairn file"), std::string::npos);
  Output empty_dir = Inspect({"verify", dir.path()});
  EXPECT_EQ(empty_dir.exit, kExitUnreadable);
}

TEST(InspectTest, EscapeBytes) {
  const std::string bytes("a\"b\\c\x01\xff", 7);
  EXPECT_EQ(inspect::EscapeBytes(bytes, false), "a\\\"b\\\\c\\x01\\xff");
  EXPECT_EQ(inspect::EscapeBytes(bytes, true), "a\\\"b\\\\c\\u0001\\u00ff");
}

}  // namespace
}  // namespace cairn
