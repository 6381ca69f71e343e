// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// cairn-inspect (tools/inspect/inspect.h, docs/inspect.md).

#include "inspect/inspect.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/base/env.h"
#include "cairn/base/internal/coding.h"
#include "cairn/base/status.h"
#include "cairn/directory/durable_log.h"
#include "cairn/flush/block_log.h"
#include "cairn/flush/internal/checkpoint.h"
#include "cairn/flush/log_format.h"
#include "cairn/ha/file_durable_log.h"
#include "cairn/ha/internal/durable_log_segment.h"
#include "cairn/ha/internal/snapshot_file.h"

CAIRN_NAMESPACE_BEGIN
namespace inspect {
namespace {

using base_internal::LoadFixed;
using durable_log_internal::Frame;
using durable_log_internal::FrameRead;
using durable_log_internal::SegmentStream;

constexpr std::size_t kReadBytes = std::size_t{1} << 20;

constexpr char kUsage[] =
    "usage: cairn-inspect <command> [--json] [--max-record-bytes=N] <path>\n"
    "\n"
    "Reads cairn's files without changing them. <path> is a durable log\n"
    "directory or one of its segments (<20-digit LSN>.log), a snapshot, a\n"
    "LogStore directory (holding `log` and `checkpoint-<n>`), a block log or "
    "a\n"
    "checkpoint.\n"
    "\n"
    "commands:\n"
    "  identify  name the format and version\n"
    "  verify    check every checksum, length, sequence and chain; report\n"
    "            the first damaged place (file, byte offset, block)\n"
    "  dump      print every record in order\n"
    "  stat      counts, sizes, LSN and block ranges, live bytes per block\n"
    "\n"
    "options:\n"
    "  --json                  one JSON object per line\n"
    "  --max-record-bytes=N    largest durable log record the writer\n"
    "                          allowed (default 16777216)\n"
    "  --help                  this text\n"
    "\n"
    "exit status: 0 ok (a torn tail that recovery cuts is a note), 1 damaged,\n"
    "2 unreadable (missing, not a cairn file, unsupported format version,\n"
    "I/O error, bad command line)\n";

// ---- output ----------------------------------------------------------------

struct Field {
  enum class Kind : std::uint8_t { kWord, kBytes, kUint, kBool };
  std::string_view name;
  Kind kind = Kind::kWord;
  std::string_view text;
  std::uint64_t number = 0;
};

Field Word(std::string_view name, std::string_view word) {
  return {name, Field::Kind::kWord, word, 0};
}
Field Bytes(std::string_view name, std::string_view bytes) {
  return {name, Field::Kind::kBytes, bytes, 0};
}
Field Uint(std::string_view name, std::uint64_t value) {
  return {name, Field::Kind::kUint, {}, value};
}
Field Bool(std::string_view name, bool value) {
  return {name, Field::Kind::kBool, {}, value ? 1u : 0u};
}

// Text: `type name=value ...`, byte strings quoted and escaped. JSON: one
// object per line with "type" first.
class Printer {
 public:
  Printer(std::ostream& out, bool json) : out_(out), json_(json) {}

  void Emit(std::string_view type, std::initializer_list<Field> fields) {
    std::vector<Field> all(fields);
    Emit(type, all);
  }

  void Emit(std::string_view type, const std::vector<Field>& fields) {
    std::string line;
    if (json_) {
      line = R"({"type":")" + EscapeBytes(type, true) + "\"";
      for (const Field& f : fields) {
        line += ",\"";
        line += f.name;
        line += "\":";
        AppendValue(f, &line);
      }
      line += "}\n";
    } else {
      line = std::string(type);
      for (const Field& f : fields) {
        line += ' ';
        line += f.name;
        line += '=';
        AppendValue(f, &line);
      }
      line += '\n';
    }
    out_ << line;
  }

 private:
  void AppendValue(const Field& f, std::string* line) const {
    switch (f.kind) {
      case Field::Kind::kWord:
        if (json_) {
          *line += '"' + EscapeBytes(f.text, true) + '"';
        } else {
          *line += EscapeBytes(f.text, false);
        }
        break;
      case Field::Kind::kBytes:
        *line += '"' + EscapeBytes(f.text, json_) + '"';
        break;
      case Field::Kind::kUint:
        *line += std::to_string(f.number);
        break;
      case Field::Kind::kBool:
        *line += f.number != 0 ? "true" : "false";
        break;
    }
  }

  std::ostream& out_;
  const bool json_;
};

// ---- outcome ---------------------------------------------------------------

// What a walk found: nothing wrong, the first damage, or why the file could
// not be read; and a torn tail, if any, after the last durable boundary.
struct Outcome {
  int exit = kExitOk;
  bool unsupported = false;  // with kExitUnreadable: another format version
  std::string file;
  bool has_offset = false;
  std::uint64_t offset = 0;
  bool has_block = false;
  std::uint64_t block = 0;
  std::string what;

  bool torn = false;
  std::string torn_file;
  std::uint64_t torn_offset = 0;
  std::uint64_t torn_bytes = 0;
  std::string torn_what;

  bool ok() const noexcept { return exit == kExitOk; }
};

Outcome Damage(std::string file, std::uint64_t offset, std::string what) {
  Outcome o;
  o.exit = kExitDamaged;
  o.file = std::move(file);
  o.has_offset = true;
  o.offset = offset;
  o.what = std::move(what);
  return o;
}

Outcome BlockDamage(std::string file, std::uint64_t offset, std::uint64_t block,
                    std::string what) {
  Outcome o = Damage(std::move(file), offset, std::move(what));
  o.has_block = true;
  o.block = block;
  return o;
}

// A library status about `file`: kDataLoss is damage (at `offset` when
// known), kFailedPrecondition another format version, anything else an
// unreadable file.
Outcome FromStatus(const Status& s, std::string file, bool has_offset = false,
                   std::uint64_t offset = 0) {
  Outcome o;
  o.file = std::move(file);
  o.what = std::string(s.message());
  if (s.code() == StatusCode::kDataLoss) {
    o.exit = kExitDamaged;
    o.has_offset = has_offset;
    o.offset = offset;
  } else {
    o.exit = kExitUnreadable;
    o.unsupported = s.code() == StatusCode::kFailedPrecondition;
  }
  return o;
}

// Damage found inside block `block` names it.
Outcome InBlock(Outcome o, std::uint64_t block) {
  if (o.exit == kExitDamaged) {
    o.has_block = true;
    o.block = block;
  }
  return o;
}

Outcome Unreadable(std::string file, std::string what) {
  Outcome o;
  o.exit = kExitUnreadable;
  o.file = std::move(file);
  o.what = std::move(what);
  return o;
}

// Prints the torn-tail note, the damage or error, and the result line;
// returns the exit status.
int Finish(const Outcome& o, Printer& p) {
  if (o.torn) {
    p.Emit("torn_tail",
           {Bytes("file", o.torn_file), Uint("offset", o.torn_offset),
            Uint("bytes", o.torn_bytes), Bytes("what", o.torn_what),
            Bytes("note",
                  "no valid record follows these bytes: recovery cuts them, "
                  "so they are not counted as damage")});
  }
  if (o.exit == kExitDamaged) {
    std::vector<Field> f = {Bytes("file", o.file)};
    if (o.has_offset) f.push_back(Uint("offset", o.offset));
    if (o.has_block) f.push_back(Uint("block", o.block));
    f.push_back(Bytes("what", o.what));
    p.Emit("damage", f);
  } else if (o.exit == kExitUnreadable) {
    p.Emit(o.unsupported ? "unsupported" : "error",
           {Bytes("file", o.file), Bytes("what", o.what)});
  }
  const std::string_view result = o.exit == kExitOk        ? "ok"
                                  : o.exit == kExitDamaged ? "damaged"
                                  : o.unsupported          ? "unsupported"
                                                           : "unreadable";
  p.Emit("result",
         {Word("status", result), Uint("exit", std::uint64_t(o.exit))});
  return o.exit;
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  return dir + "/" + name;
}

// ---- identification --------------------------------------------------------

enum class Kind : std::uint8_t {
  kDurableLogDir,
  kDurableLogSegment,
  kSnapshot,
  kLogStoreDir,
  kBlockLog,
  kCheckpoint,
};

std::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kDurableLogDir:
      return "durable_log_directory";
    case Kind::kDurableLogSegment:
      return "durable_log_segment";
    case Kind::kSnapshot:
      return "snapshot";
    case Kind::kLogStoreDir:
      return "log_store_directory";
    case Kind::kBlockLog:
      return "block_log";
    case Kind::kCheckpoint:
      return "checkpoint";
  }
  return "unknown";
}

struct Identity {
  Kind kind = Kind::kBlockLog;
  // False for a store directory whose file is too short or has another
  // magic: the directory is known, its file is damaged (the walk says how).
  bool version_known = true;
  std::uint32_t version = 0;
  std::uint32_t supported = 0;  // the version the library reads
  std::string file;             // the file the version was read from
};

// Every cairn file starts with a magic u64 and a version u32.
Result<Identity> IdentifyFile(Env& env, const std::string& path) {
  Result<std::unique_ptr<FileHandle>> file =
      env.NewFile(path, FileOpenMode::kReadOnly);
  if (!file.ok()) return file.status();
  char head[12];
  Result<std::size_t> n = (*file)->ReadAt(0, head);
  if (!n.ok()) return n.status();
  if (*n < sizeof(head)) {
    return InvalidArgumentError("not a cairn file: " + std::to_string(*n) +
                                " bytes, too short for a magic and version");
  }
  Identity id;
  id.file = path;
  id.version = LoadFixed<std::uint32_t>(head + 8);
  switch (LoadFixed<std::uint64_t>(head)) {
    case kDurableLogMagic:
      id.kind = Kind::kDurableLogSegment;
      id.supported = kDurableLogFormatVersion;
      break;
    case kSnapshotMagic:
      id.kind = Kind::kSnapshot;
      id.supported = kSnapshotFormatVersion;
      break;
    case kLogFileMagic:
      id.kind = Kind::kBlockLog;
      id.supported = kLogFormatVersion;
      break;
    case flush_internal::kCheckpointMagic:
      id.kind = Kind::kCheckpoint;
      id.supported = flush_internal::kCheckpointVersion;
      break;
    default:
      return InvalidArgumentError("not a cairn file: unknown magic");
  }
  return id;
}

Result<Identity> Identify(Env& env, const std::string& path) {
  Result<std::vector<std::string>> names = env.List(path);
  if (!names.ok()) {
    Result<bool> exists = env.FileExists(path);
    if (exists.ok() && !*exists) return NotFoundError("no such file");
    return IdentifyFile(env, path);
  }
  // A store directory is known by its file names; a file there that is too
  // short or has another magic is damage the walk reports.
  const auto in_directory = [&](const std::string& file, Kind file_kind,
                                Kind kind) -> Result<Identity> {
    Result<Identity> id = IdentifyFile(env, file);
    if (!id.ok() && id.status().code() != StatusCode::kInvalidArgument) {
      return id;
    }
    Identity known;
    if (id.ok() && id->kind == file_kind) known = *id;
    if (!id.ok() || id->kind != file_kind) known.version_known = false;
    known.kind = kind;
    known.file = file;
    return known;
  };
  if (std::find(names->begin(), names->end(), "log") != names->end()) {
    return in_directory(JoinPath(path, "log"), Kind::kBlockLog,
                        Kind::kLogStoreDir);
  }
  Result<std::vector<Lsn>> firsts =
      durable_log_internal::ListSegments(env, path);
  if (!firsts.ok()) return firsts.status();
  if (firsts->empty()) {
    return InvalidArgumentError(
        "not a cairn store directory: no `log` file and no durable log "
        "segment");
  }
  return in_directory(JoinPath(path, DurableLogSegmentName(firsts->front())),
                      Kind::kDurableLogSegment, Kind::kDurableLogDir);
}

// ---- durable log -----------------------------------------------------------

std::string_view OpName(DurableOp op) {
  switch (op) {
    case DurableOp::kCreate:
      return "create";
    case DurableOp::kCommit:
      return "commit";
    case DurableOp::kUpsert:
      return "upsert";
    case DurableOp::kErase:
      return "erase";
    case DurableOp::kEraseGroup:
      return "erase_group";
    case DurableOp::kEvict:
      return "evict";
    case DurableOp::kTenantCreate:
      return "tenant_create";
    case DurableOp::kTenantRemove:
      return "tenant_remove";
    case DurableOp::kAdjust:
      return "adjust";
  }
  return "unknown";
}

struct SegmentInfo {
  std::string path;
  Lsn first = 0;
  Lsn last = 0;  // first - 1 when it holds no record
  std::uint64_t records = 0;
  std::uint64_t bytes = 0;
};

// A segment to walk: its path and the first LSN its name says (0: a
// segment given on its own, whose name is not checked).
struct SegmentRef {
  std::string path;
  Lsn named_first = 0;
};

using DurableRecordFn = std::function<void(const SegmentInfo&, std::uint64_t,
                                           Lsn, const DurableRecordView&)>;

// Walks the segments in order with the rules FileDurableLog::Open applies
// with truncate_damaged_tail (what Recover opens with): every header, the
// name against the header, no LSN gap between segments, LSNs in sequence,
// every frame's checksum; only the newest segment may end in a torn tail,
// and only if no valid frame follows it. Every body is decoded with
// DecodeDurableRecord; one that does not decode is damage.
Outcome WalkDurableLog(Env& env, const std::vector<SegmentRef>& segments,
                       std::size_t max_record_bytes,
                       const DurableRecordFn& on_record,
                       const std::function<void(const SegmentInfo&)>& on_end) {
  Lsn last = 0;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const bool newest = i + 1 == segments.size();
    const std::string& path = segments[i].path;
    std::unique_ptr<SegmentStream> stream;
    Status opened = SegmentStream::Open(env, path, FileOpenMode::kReadOnly,
                                        max_record_bytes, kReadBytes, &stream);
    if (!opened.ok()) return FromStatus(opened, path, true, 0);
    SegmentInfo info;
    info.path = path;
    info.first = stream->first();
    if (segments[i].named_first != 0 &&
        stream->first() != segments[i].named_first) {
      return Damage(path, 16,
                    "segment header says first LSN " +
                        std::to_string(stream->first()) + ", its name " +
                        std::to_string(segments[i].named_first));
    }
    if (i > 0 && info.first != last + 1) {
      return Damage(path, 16,
                    "LSN gap between segments: LSNs " +
                        std::to_string(last + 1) + " .. " +
                        std::to_string(info.first - 1) + " missing");
    }
    last = info.first - 1;
    Outcome torn;
    for (;;) {
      Frame frame;
      Result<FrameRead> read = stream->Read(&frame);
      if (!read.ok()) return FromStatus(read.status(), path);
      if (*read == FrameRead::kEnd) break;
      const std::uint64_t at = stream->offset();
      if (*read == FrameRead::kFrame) {
        if (frame.lsn != last + 1) {
          return Damage(path, at,
                        "LSN " + std::to_string(frame.lsn) +
                            " out of sequence (expected " +
                            std::to_string(last + 1) + ")");
        }
        DurableRecordView view;
        if (Status s = DecodeDurableRecord(frame.body, &view); !s.ok()) {
          return Damage(path, at,
                        "record LSN " + std::to_string(frame.lsn) +
                            " has a valid checksum but does not decode: " +
                            std::string(s.message()));
        }
        last = frame.lsn;
        ++info.records;
        if (on_record) on_record(info, at, frame.lsn, view);
        stream->Advance(frame);
        continue;
      }
      const std::string what =
          *read == FrameRead::kIncomplete
              ? "truncated frame (the file ends inside it)"
              : "bad frame (checksum mismatch, or a length of 0 or over "
                "--max-record-bytes)";
      const std::string expect = " at LSN " + std::to_string(last + 1);
      if (!newest) {
        return Damage(path, at,
                      what + expect + " in a segment that is not the newest");
      }
      Result<bool> follows = stream->ValidFrameAfter(at);
      if (!follows.ok()) return FromStatus(follows.status(), path);
      if (*follows) {
        return Damage(path, at,
                      what + expect +
                          ", and a valid record follows: damage inside the "
                          "log, not a torn tail");
      }
      Result<std::uint64_t> size = stream->file().Size();
      if (!size.ok()) return FromStatus(size.status(), path);
      torn.torn = true;
      torn.torn_file = path;
      torn.torn_offset = at;
      torn.torn_bytes = *size - at;
      torn.torn_what = what + expect;
      break;
    }
    Result<std::uint64_t> size = stream->file().Size();
    if (!size.ok()) return FromStatus(size.status(), path);
    info.bytes = *size;
    info.last = last;
    if (on_end) on_end(info);
    if (newest) return torn;
  }
  return Outcome();
}

int InspectDurableLog(Env& env, const std::string& path, bool directory,
                      const InspectOptions& options, Printer& p) {
  std::vector<SegmentRef> segments;
  if (directory) {
    Result<std::vector<Lsn>> firsts =
        durable_log_internal::ListSegments(env, path);
    if (!firsts.ok()) return Finish(FromStatus(firsts.status(), path), p);
    for (const Lsn first : *firsts) {
      segments.push_back({JoinPath(path, DurableLogSegmentName(first)), first});
    }
  } else {
    segments.push_back({path, 0});
  }
  const bool dump = options.command == Command::kDump;
  const bool stat = options.command == Command::kStat;
  std::uint64_t records = 0;
  std::uint64_t body_objects = 0;
  std::uint64_t by_op[9] = {};
  Lsn first_lsn = 0;
  Lsn last_lsn = 0;
  std::uint64_t bytes = 0;
  const auto on_record = [&](const SegmentInfo& seg, std::uint64_t offset,
                             Lsn lsn, const DurableRecordView& r) {
    if (records++ == 0) first_lsn = lsn;
    last_lsn = lsn;
    body_objects += r.objects.size();
    ++by_op[static_cast<std::size_t>(r.op) % 9];
    if (!dump) return;
    std::vector<Field> f = {Uint("lsn", lsn), Bytes("file", seg.path),
                            Uint("offset", offset), Word("op", OpName(r.op)),
                            Uint("tenant", r.tenant)};
    if (r.op == DurableOp::kTenantCreate || r.op == DurableOp::kTenantRemove) {
      f.push_back(Bytes("tenant_name", r.tenant_name));
      if (r.op == DurableOp::kTenantCreate) {
        f.push_back(Uint("quota_limit_bytes", r.quota_limit_bytes));
      }
    } else {
      f.push_back(Uint("group", r.group));
      f.push_back(Bytes("group_name", r.group_name));
      f.push_back(Uint("objects", r.objects.size()));
    }
    p.Emit("record", f);
    for (const DurableObjectState& o : r.objects) {
      std::vector<Field> g = {Uint("lsn", lsn),
                              Bytes("key", o.key),
                              Uint("object_id", o.object),
                              Uint("version", o.version),
                              Uint("size", o.size_bytes),
                              Uint("counted_bytes", o.counted_bytes),
                              Bool("payload_logged", o.payload_logged)};
      if (o.payload_logged)
        g.push_back(Uint("payload_bytes", o.payload.size()));
      p.Emit("object", g);
    }
  };
  const auto on_end = [&](const SegmentInfo& seg) {
    bytes += seg.bytes;
    if (dump || stat) {
      p.Emit("segment",
             {Bytes("file", seg.path), Uint("first_lsn", seg.first),
              Uint("last_lsn", seg.last), Uint("records", seg.records),
              Uint("bytes", seg.bytes)});
    }
  };
  Outcome o = WalkDurableLog(env, segments, options.max_record_bytes, on_record,
                             on_end);
  std::vector<Field> summary = {
      Uint("segments", segments.size()), Uint("records", records),
      Uint("first_lsn", first_lsn), Uint("last_lsn", last_lsn),
      Uint("bytes", bytes)};
  if (stat) {
    summary.push_back(Uint("objects", body_objects));
    for (std::uint8_t op = 1; op <= 8; ++op) {
      summary.push_back(Uint(OpName(static_cast<DurableOp>(op)), by_op[op]));
    }
  }
  if (o.exit != kExitUnreadable) p.Emit("durable_log", summary);
  return Finish(o, p);
}

// ---- block log -------------------------------------------------------------

std::string_view LogTypeName(LogRecordType type) {
  switch (type) {
    case LogRecordType::kSet:
      return "set";
    case LogRecordType::kDelete:
      return "delete";
    case LogRecordType::kFlushDb:
      return "flush_db";
    case LogRecordType::kSeal:
      return "seal";
  }
  return "unknown";
}

// A window over the bytes of one block's data area that the file holds
// (`avail`): holds the record being decoded and read-ahead, never more
// than max(1 MiB, the largest record) bytes.
class BlockWindow {
 public:
  BlockWindow(const BlockLog& log, std::uint64_t slot, std::size_t avail)
      : log_(log), slot_(slot), avail_(avail) {}

  // Makes [offset, offset + n) readable through Window(); the caller keeps
  // offset + n within avail.
  Status Ensure(std::uint32_t offset, std::size_t n) {
    if (offset >= at_ && offset + n <= at_ + buf_.size()) return Status();
    const std::size_t want = std::max<std::size_t>(
        n, std::min<std::size_t>(kReadBytes, avail_ - offset));
    buf_.resize(want);
    at_ = offset;
    return log_.ReadData(slot_, offset, want, buf_.data());
  }
  std::span<const char> Window(std::uint32_t offset) const {
    return std::span<const char>(buf_.data() + (offset - at_),
                                 buf_.size() - (offset - at_));
  }

 private:
  const BlockLog& log_;
  const std::uint64_t slot_;
  const std::size_t avail_;
  std::vector<char> buf_;
  std::uint32_t at_ = 0;
};

// What the scan found in one block (every block up to the last).
struct ScannedBlock {
  std::uint64_t block = 0;  // its number (log order)
  std::uint32_t slot = 0;   // its block slot in the file
  bool has_header = false;
  LogBlockHeader header;      // the newest valid slot, if has_header
  std::uint32_t end = 0;      // where its valid records end (seal included)
  std::uint32_t records = 0;  // records other than the seal
  bool sealed = false;
};

struct BlockLogWalk {
  std::uint64_t block_bytes = 0;
  std::uint64_t file_bytes = 0;
  std::uint64_t log_id = 0;
  std::uint64_t records = 0;         // records other than seals
  std::vector<ScannedBlock> blocks;  // in log order, up to the last block
  // The checkpoint position to check as a record boundary (LogStore).
  bool check_position = false;
  std::uint64_t position_block = 0;
  std::uint32_t position_offset = 0;
  bool position_met = false;
};

// Called before a block's records with its newest valid header (null if
// neither slot holds one).
using BlockFn = std::function<void(std::uint64_t, const LogBlockHeader*)>;
using LogRecordFn =
    std::function<void(std::uint64_t, std::uint32_t, const LogRecordView&)>;

// Scans one block as LogStore::ScanBlock does: its newest valid header is a
// hint; every record below its boundary must decode at its seat and the
// count and chain must match the header there (else damage); past the
// boundary the contiguous valid records are accepted up to the first that
// does not decode (the torn tail) or a seal (the block is full).
Outcome ScanBlock(const BlockLog& log, std::uint64_t block, std::uint32_t slot,
                  const BlockFn& on_block, const LogRecordFn& on_record,
                  BlockLogWalk* walk, ScannedBlock* scan) {
  const std::string& path = log.path();
  scan->block = block;
  scan->slot = slot;
  Result<LogBlockHeader> header = log.ReadHeader(slot);
  scan->has_header = header.ok() && header->block == block;
  if (!header.ok() && header.status().code() != StatusCode::kNotFound) {
    return InBlock(
        FromStatus(header.status(), path, true, log.BlockOffset(slot)), block);
  }
  if (scan->has_header) scan->header = *header;
  const std::uint64_t header_at =
      log.BlockOffset(slot) +
      (scan->header.sequence % 2) * std::uint64_t{kLogHeaderSlotBytes};
  const std::uint64_t data_at = log.BlockOffset(slot) + kLogBlockDataOffset;
  const std::size_t avail =
      walk->file_bytes > data_at
          ? static_cast<std::size_t>(std::min<std::uint64_t>(
                walk->file_bytes - data_at, log.data_bytes()))
          : 0;
  const std::uint32_t boundary = scan->has_header ? scan->header.used_bytes : 0;
  if (boundary > avail) {
    return BlockDamage(path, data_at + avail, block,
                       "the header names " + std::to_string(boundary) +
                           " bytes of the data area, the file holds " +
                           std::to_string(avail));
  }
  if (on_block) on_block(block, scan->has_header ? &scan->header : nullptr);
  BlockWindow window(log, slot, avail);
  const bool position_here =
      walk->check_position && walk->position_block == block;
  std::uint32_t offset = 0;
  std::uint32_t previous = 0;
  std::uint32_t count = 0;  // every record, the seal included (the chain's)
  std::uint64_t chain = 0;
  bool met_boundary = !scan->has_header;
  for (;;) {
    if (position_here && offset == walk->position_offset) {
      walk->position_met = true;
    }
    if (scan->has_header && offset == boundary) {
      // Below a header's boundary every record was synced before the
      // header was written: they must all be there, matching its chain.
      if (count != scan->header.record_count ||
          chain != scan->header.chain_checksum) {
        return BlockDamage(path, header_at, block,
                           "chain mismatch: the header vouches for " +
                               std::to_string(scan->header.record_count) +
                               " records below offset " +
                               std::to_string(boundary) + ", the data holds " +
                               std::to_string(count) +
                               (count == scan->header.record_count
                                    ? " with another chain checksum"
                                    : ""));
      }
      met_boundary = true;
    }
    if (scan->sealed || offset >= avail) break;
    // Read what the record claims if the file holds it, else only its
    // header (or what is left): DecodeLogRecord then says why it fails.
    const std::size_t left = avail - offset;
    std::size_t bytes = std::min(left, kLogRecordHeaderBytes);
    if (Status s = window.Ensure(offset, bytes); !s.ok()) {
      return InBlock(FromStatus(s, path, true, data_at + offset), block);
    }
    if (bytes == kLogRecordHeaderBytes) {
      const std::size_t claimed = LogRecordBytesFromHeader(
          window.Window(offset).first<kLogRecordHeaderBytes>());
      if (claimed <= left) {
        bytes = claimed;
        if (Status s = window.Ensure(offset, bytes); !s.ok()) {
          return InBlock(FromStatus(s, path, true, data_at + offset), block);
        }
      }
    }
    LogRecordView record;
    if (Status s = DecodeLogRecord(window.Window(offset).first(bytes), 0,
                                   {walk->log_id, block, offset}, &record);
        !s.ok()) {
      if (offset < boundary) {
        return BlockDamage(path, data_at + offset, block,
                           "record below the header's boundary (" +
                               std::to_string(boundary) +
                               "): " + std::string(s.message()));
      }
      break;  // the end of what was written and synced: a torn tail
    }
    chain = LogChainChecksum(chain, record.checksum);
    ++count;
    if (record.type == LogRecordType::kSeal) {
      scan->sealed = true;
    } else {
      ++scan->records;
      ++walk->records;
    }
    if (on_record) on_record(block, offset, record);
    previous = offset;
    offset += record.bytes;
  }
  if (!met_boundary) {
    return BlockDamage(path, data_at + previous, block,
                       "a record crosses the header's boundary (" +
                           std::to_string(boundary) + ")");
  }
  scan->end = offset;
  return Outcome();
}

// Walks the blocks in log order with the rules of LogStore::Recover: each
// block slot's newest valid header names the block it holds (a slot whose
// header slots are both damaged is identified by its first record, which
// validates only at its block's number), the blocks are taken in order of
// their numbers (a number no slot holds was compacted away), and from block
// to block (Recover starts at the checkpoint; the blocks before it are
// checked too, as a Get of a record there reads them): ScanBlock per block,
// on to the next block after a seal; the first block without a valid seal
// is the last, and no later block may hold a header naming records. Bytes
// past the last block's valid records are the torn tail Recover cuts, when
// that block sits in the last slot Recover keeps.
Outcome WalkBlockLog(Env& env, const std::string& path, const BlockFn& on_block,
                     const LogRecordFn& on_record, BlockLogWalk* walk) {
  BlockLogOptions options;
  options.read_only = true;
  options.env = &env;
  Result<std::unique_ptr<BlockLog>> opened = BlockLog::Open(path, options);
  if (!opened.ok()) return FromStatus(opened.status(), path, true, 0);
  const BlockLog& log = **opened;
  walk->block_bytes = log.block_bytes();
  // The id DecodeLogFileHeader read from the file header: every record's
  // seat names it.
  walk->log_id = log.log_id();
  Result<std::uint64_t> file_bytes = log.FileBytes();
  if (!file_bytes.ok()) return FromStatus(file_bytes.status(), path);
  walk->file_bytes = *file_bytes;
  const std::uint64_t file_slots =
      *file_bytes > kLogFileHeaderBytes
          ? (*file_bytes - kLogFileHeaderBytes + log.block_bytes() - 1) /
                log.block_bytes()
          : 0;
  if (file_slots > RecordLocation::kMaxSlots) {
    return Damage(path, *file_bytes, "more block slots than a log may hold");
  }
  struct Found {
    std::uint64_t block;
    std::uint32_t slot;
    bool has_header;
    LogBlockHeader header;
  };
  std::vector<Found> found;
  std::vector<std::uint32_t> headerless;
  for (std::uint32_t slot = 0; slot < file_slots; ++slot) {
    Result<LogBlockHeader> header = log.ReadHeader(slot);
    if (header.ok()) {
      found.push_back({header->block, slot, true, *header});
    } else if (header.status().code() == StatusCode::kNotFound) {
      headerless.push_back(slot);
    } else {
      return FromStatus(header.status(), path, true, log.BlockOffset(slot));
    }
  }
  auto by_block = [](const Found& a, const Found& b) {
    return a.block < b.block;
  };
  std::sort(found.begin(), found.end(), by_block);
  const std::uint64_t max_named = found.empty() ? 0 : found.back().block + 1;
  std::vector<std::uint64_t> missing;
  for (std::uint64_t b = 0, i = 0; b <= max_named && missing.size() < 4096;
       ++b) {
    if (i < found.size() && found[i].block == b) {
      ++i;
    } else {
      missing.push_back(b);
    }
  }
  for (std::uint32_t slot : headerless) {
    const std::uint64_t data_at = log.BlockOffset(slot) + kLogBlockDataOffset;
    if (missing.empty() || *file_bytes < data_at + kLogRecordHeaderBytes) {
      continue;
    }
    char head[kLogRecordHeaderBytes];
    if (!log.ReadData(slot, 0, sizeof(head), head).ok()) continue;
    const std::size_t bytes = LogRecordBytesFromHeader(head);
    if (bytes > log.data_bytes() || data_at + bytes > *file_bytes) continue;
    std::string record(bytes, '\0');
    if (!log.ReadData(slot, 0, bytes, record.data()).ok()) continue;
    for (auto it = missing.begin(); it != missing.end(); ++it) {
      LogRecordView view;
      if (DecodeLogRecord(std::span<const char>(record.data(), record.size()),
                          0, {log.log_id(), *it, 0}, &view)
              .ok()) {
        found.push_back({*it, slot, false, LogBlockHeader{}});
        missing.erase(it);
        break;
      }
    }
  }
  std::sort(found.begin(), found.end(), by_block);
  for (std::size_t i = 1; i < found.size(); ++i) {
    if (found[i].block == found[i - 1].block) {
      return BlockDamage(path, log.BlockOffset(found[i].slot), found[i].block,
                         "block " + std::to_string(found[i].block) +
                             " is claimed by two slots");
    }
  }
  std::size_t head = found.size();
  for (std::size_t i = 0; i < found.size(); ++i) {
    if (found[i].block > UINT32_MAX) {
      return BlockDamage(path, log.BlockOffset(found[i].slot), found[i].block,
                         "more blocks than a log may hold");
    }
    ScannedBlock scan;
    Outcome o = ScanBlock(log, found[i].block, found[i].slot, on_block,
                          on_record, walk, &scan);
    walk->blocks.push_back(scan);
    if (!o.ok()) return o;
    if (!scan.sealed) {
      head = i;
      break;
    }
  }
  if (walk->check_position && !walk->position_met &&
      ((!found.empty() && found.back().block > walk->position_block) ||
       walk->position_offset == 0)) {
    // The checkpoint's block is gone (compacted away, or its first header
    // torn while it held no record): replay starts after it.
    bool present = false;
    for (const Found& f : found) present |= f.block == walk->position_block;
    if (!present) walk->position_met = true;
  }
  std::uint32_t last_slot = 0;  // one past the highest slot Recover keeps
  for (std::size_t i = 0; i < found.size() && i <= head; ++i) {
    last_slot = std::max(last_slot, found[i].slot + 1);
  }
  if (head == found.size()) {
    // Every block is sealed (or there is none): Recover opens a new one.
    Outcome o;
    const std::uint64_t cut = log.BlockOffset(last_slot);
    if (*file_bytes > cut) {
      o.torn = true;
      o.torn_file = path;
      o.torn_offset = cut;
      o.torn_bytes = *file_bytes - cut;
      o.torn_what = "bytes past the last block slot in use";
    }
    return o;
  }
  const ScannedBlock& last = walk->blocks.back();
  for (std::size_t i = head + 1; i < found.size(); ++i) {
    if (found[i].has_header && found[i].header.used_bytes > 0) {
      return BlockDamage(
          path, log.BlockOffset(last.slot) + kLogBlockDataOffset + last.end,
          last.block,
          "block " + std::to_string(last.block) + " ends at offset " +
              std::to_string(last.end) + " without a seal but block " +
              std::to_string(found[i].block) +
              " has a header: durable records are damaged");
    }
  }
  Outcome o;
  const std::uint64_t durable_end =
      last.slot + 1 == last_slot
          ? log.BlockOffset(last.slot) + kLogBlockDataOffset + last.end
          : log.BlockOffset(last_slot);
  if (*file_bytes > durable_end) {
    o.torn = true;
    o.torn_file = path;
    o.torn_offset = durable_end;
    o.torn_bytes = *file_bytes - durable_end;
    o.torn_what = "bytes past the last valid record of block " +
                  std::to_string(last.block) + " (data offset " +
                  std::to_string(last.end) + ")";
  }
  return o;
}

// ---- checkpoint ------------------------------------------------------------

struct CheckpointWalk {
  std::uint64_t entries = 0;
  std::uint64_t key_bytes = 0;
  std::uint64_t live_bytes = 0;
};

using EntryFn = std::function<Outcome(std::uint64_t index, std::uint64_t offset,
                                      const flush_internal::CheckpointEntry&)>;
using CheckpointHeaderFn =
    std::function<void(const flush_internal::CheckpointHeader&)>;

// Streams the checkpoint through the library's scanner (the seal, the
// counts, every entry: CheckpointFile's checks) and walks its entries;
// on_entry may report damage of its own.
Outcome WalkCheckpoint(Env& env, const std::string& path,
                       const CheckpointHeaderFn& on_header,
                       const EntryFn& on_entry, CheckpointWalk* walk) {
  Outcome found;
  // Where the entry after the last one seen starts: where an error the
  // scanner finds in an entry (or trailing bytes) is.
  std::uint64_t next = 0;
  const Status s = flush_internal::ScanCheckpointFile(
      env, path,
      [&](const flush_internal::CheckpointHeader& h) {
        next = flush_internal::kCheckpointHeaderBytes +
               std::uint64_t{h.partitions} * h.databases * 8;
        if (on_header) on_header(h);
      },
      [&](const flush_internal::CheckpointEntry& e,
          std::uint64_t offset) -> Status {
        if (on_entry) {
          found = on_entry(walk->entries, offset, e);
          if (!found.ok()) return DataLossError("stop");
        }
        ++walk->entries;
        walk->key_bytes += e.key.size();
        walk->live_bytes += e.location.length;
        next = offset + flush_internal::kCheckpointEntryBytes + e.key.size();
        return Status();
      });
  if (!found.ok()) return found;
  if (!s.ok()) return FromStatus(s, path, next != 0, next);
  return Outcome();
}

void EmitCheckpointHeader(const flush_internal::CheckpointHeader& h,
                          const std::string& path, Printer& p) {
  p.Emit("checkpoint",
         {Bytes("file", path), Uint("partitions", h.partitions),
          Uint("databases", h.databases), Uint("log_block", h.block),
          Uint("log_offset", h.offset), Uint("entries", h.entries)});
}

Outcome EmitEntry(std::uint64_t index, std::uint64_t offset,
                  const flush_internal::CheckpointEntry& e, Printer& p) {
  p.Emit("entry",
         {Uint("index", index), Uint("offset", offset), Uint("db", e.db),
          Bytes("key", e.key), Uint("block", e.location.block),
          Uint("block_offset", e.location.offset),
          Uint("length", e.location.length)});
  return Outcome();
}

int InspectCheckpoint(Env& env, const std::string& path,
                      const InspectOptions& options, Printer& p) {
  const bool dump = options.command == Command::kDump;
  CheckpointWalk walk;
  Outcome o = WalkCheckpoint(
      env, path,
      [&](const flush_internal::CheckpointHeader& h) {
        if (dump || options.command == Command::kStat) {
          EmitCheckpointHeader(h, path, p);
        }
      },
      dump ? EntryFn([&](std::uint64_t i, std::uint64_t at,
                         const flush_internal::CheckpointEntry& e) {
        return EmitEntry(i, at, e, p);
      })
           : EntryFn(),
      &walk);
  if (o.exit != kExitUnreadable) {
    p.Emit("checkpoint_summary",
           {Uint("entries", walk.entries), Uint("key_bytes", walk.key_bytes),
            Uint("live_bytes", walk.live_bytes)});
  }
  return Finish(o, p);
}

// ---- block log and LogStore ------------------------------------------------

int InspectBlockLog(Env& env, const std::string& path, bool store,
                    const InspectOptions& options, Printer& p) {
  const bool dump = options.command == Command::kDump;
  const bool stat = options.command == Command::kStat;
  const std::string log_path = store ? JoinPath(path, "log") : path;
  std::string checkpoint_path;
  BlockLogWalk walk;
  bool has_checkpoint = false;
  std::uint64_t cp_block = 0;
  std::uint32_t cp_offset = 0;
  if (store) {
    // The newest generation, as LogStore::Open takes it.
    Result<flush_internal::CheckpointFiles> files =
        flush_internal::ListCheckpoints(env, path);
    if (!files.ok()) return Finish(FromStatus(files.status(), path), p);
    has_checkpoint = files->any;
    if (has_checkpoint) {
      checkpoint_path = flush_internal::CheckpointPath(path, files->newest);
    }
  }
  if (has_checkpoint) {
    // Checked whole first (checksum, counts), as LogStore::Open does.
    CheckpointWalk cw;
    Outcome o = WalkCheckpoint(
        env, checkpoint_path,
        [&](const flush_internal::CheckpointHeader& h) {
          cp_block = h.block;
          cp_offset = h.offset;
          if (dump || stat) EmitCheckpointHeader(h, checkpoint_path, p);
        },
        EntryFn(), &cw);
    if (!o.ok()) return Finish(o, p);
    walk.check_position = true;
    walk.position_block = cp_block;
    walk.position_offset = cp_offset;
  }
  const auto on_block = [&](std::uint64_t block, const LogBlockHeader* h) {
    if (!dump) return;
    std::vector<Field> f = {Uint("block", block), Bool("header", h != nullptr)};
    if (h != nullptr) {
      f.push_back(Uint("sequence", h->sequence));
      f.push_back(Uint("slot", h->sequence % 2));
      f.push_back(Uint("header_used_bytes", h->used_bytes));
      f.push_back(Uint("header_records", h->record_count));
    }
    p.Emit("block", f);
  };
  const auto on_record = [&](std::uint64_t block, std::uint32_t offset,
                             const LogRecordView& r) {
    if (!dump) return;
    if (r.type == LogRecordType::kSeal) {
      p.Emit("seal", {Uint("block", block), Uint("offset", offset),
                      Uint("bytes", r.bytes)});
      return;
    }
    p.Emit("record", {Uint("block", block), Uint("offset", offset),
                      Word("op", LogTypeName(r.type)), Uint("db", r.db),
                      Bytes("key", r.key), Uint("value_bytes", r.value.size()),
                      Uint("bytes", r.bytes)});
  };
  Outcome o = WalkBlockLog(env, log_path, on_block, on_record, &walk);
  if (o.exit == kExitUnreadable) return Finish(o, p);
  const std::uint64_t blocks = walk.blocks.size();
  // The checkpoint against the log, as Recover checks it, and the live
  // bytes per block its entries point at.
  std::vector<std::uint64_t> live(blocks, 0);
  std::vector<std::uint64_t> live_entries(blocks, 0);
  std::map<std::uint64_t, std::size_t> index_of;  // block number -> index
  for (std::size_t i = 0; i < blocks; ++i) index_of[walk.blocks[i].block] = i;
  if (o.ok() && has_checkpoint && !walk.position_met) {
    o = Damage(checkpoint_path, 20,
               "the checkpoint's log position (block " +
                   std::to_string(cp_block) + ", offset " +
                   std::to_string(cp_offset) +
                   ") is not a record boundary the log's valid records "
                   "reach");
  }
  if (o.ok() && has_checkpoint) {
    CheckpointWalk cw;
    Outcome entries = WalkCheckpoint(
        env, checkpoint_path, nullptr,
        [&](std::uint64_t i, std::uint64_t at,
            const flush_internal::CheckpointEntry& e) {
          const RecordLocation& loc = e.location;
          const auto it = index_of.find(loc.block);
          if (it == index_of.end()) {
            // A block compacted away after the checkpoint: replay applies
            // the record's copy, in a later block, over this entry.
            if (!walk.blocks.empty() && loc.block < walk.blocks.back().block) {
              if (dump) return EmitEntry(i, at, e, p);
              return Outcome();
            }
            return Damage(checkpoint_path, at,
                          "entry " + std::to_string(i) + " points past block " +
                              std::to_string(loc.block) + "'s valid records");
          }
          if (std::uint64_t{loc.offset} + loc.length >
              walk.blocks[it->second].end) {
            return Damage(checkpoint_path, at,
                          "entry " + std::to_string(i) + " points past block " +
                              std::to_string(loc.block) + "'s valid records");
          }
          live[it->second] += loc.length;
          ++live_entries[it->second];
          if (dump) return EmitEntry(i, at, e, p);
          return Outcome();
        },
        &cw);
    if (!entries.ok()) o = entries;
  }
  if (stat) {
    // Only what the format records: per block its header hint, the bytes
    // and records the scan accepts, whether it is sealed, and the bytes the
    // checkpoint's entries keep live in it (replay past the checkpoint is
    // not counted).
    for (std::uint64_t b = 0; b < blocks; ++b) {
      const ScannedBlock& s = walk.blocks[b];
      std::vector<Field> f = {Uint("block", s.block),
                              Uint("block_slot", s.slot),
                              Bool("header", s.has_header)};
      if (s.has_header) {
        f.push_back(Uint("sequence", s.header.sequence));
        f.push_back(Uint("header_used_bytes", s.header.used_bytes));
      }
      f.push_back(Uint("used_bytes", s.end));
      f.push_back(Uint("records", s.records));
      f.push_back(Bool("sealed", s.sealed));
      if (has_checkpoint) {
        f.push_back(Uint("checkpoint_live_bytes", live[b]));
        f.push_back(Uint("checkpoint_live_records", live_entries[b]));
      }
      p.Emit("block", f);
    }
  }
  std::uint64_t used_total = 0;
  for (const ScannedBlock& s : walk.blocks) used_total += s.end;
  std::vector<Field> summary = {Bytes("file", log_path),
                                Uint("block_bytes", walk.block_bytes),
                                Uint("file_bytes", walk.file_bytes),
                                Uint("log_id", walk.log_id),
                                Uint("blocks", blocks),
                                Uint("used_bytes", used_total),
                                Uint("records", walk.records)};
  if (store) summary.push_back(Bool("checkpoint", has_checkpoint));
  p.Emit("block_log", summary);
  return Finish(o, p);
}

// ---- snapshot --------------------------------------------------------------

int InspectSnapshot(Env& env, const std::string& path,
                    const InspectOptions& options, Printer& p) {
  Result<directory_internal::ParsedSnapshot> parsed =
      directory_internal::ReadSnapshotFile(path, &env);
  if (!parsed.ok()) return Finish(FromStatus(parsed.status(), path), p);
  const directory_internal::ParsedSnapshot& s = *parsed;
  const bool dump = options.command == Command::kDump;
  std::uint64_t key_bytes = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t counted_bytes = 0;
  p.Emit("snapshot", {Bytes("file", path), Uint("file_bytes", s.bytes.size()),
                      Uint("log_position", s.log_position),
                      Uint("next_instance", s.next_instance),
                      Uint("tenants", s.tenants.size()),
                      Uint("groups", s.groups), Uint("objects", s.objects)});
  for (const directory_internal::ParsedSnapshotTenant& t : s.tenants) {
    std::uint64_t tenant_bytes = 0;
    for (const directory_internal::SnapshotObject& o : t.objects) {
      key_bytes += o.key.size();
      payload_bytes += o.payload.size();
      counted_bytes += o.counted_bytes;
      tenant_bytes += o.counted_bytes;
    }
    if (options.command == Command::kVerify) continue;
    p.Emit("tenant",
           {Bytes("name", t.tenant.name), Uint("instance", t.tenant.instance),
            Uint("quota_limit_bytes", t.tenant.quota_limit_bytes),
            Uint("next_object_id", t.tenant.next_object_id),
            Uint("groups", t.groups), Uint("objects", t.objects.size()),
            Uint("counted_bytes", tenant_bytes)});
    if (!dump) continue;
    for (const directory_internal::SnapshotUnit& u : t.units) {
      if (!u.group_name.empty()) {
        p.Emit("group",
               {Bytes("tenant", t.tenant.name), Bytes("name", u.group_name),
                Uint("members", u.count)});
      }
      for (std::size_t i = u.first; i < u.first + u.count; ++i) {
        const directory_internal::SnapshotObject& o = t.objects[i];
        p.Emit("object",
               {Bytes("tenant", t.tenant.name), Bytes("group", u.group_name),
                Bytes("key", o.key), Uint("object_id", o.id),
                Uint("version", o.version), Uint("size", o.size_bytes),
                Uint("counted_bytes", o.counted_bytes),
                Uint("retained_bytes", o.retained_bytes),
                Uint("lease_ttl_ns",
                     static_cast<std::uint64_t>(o.lease_ttl_nanos)),
                Uint("soft_pin_ttl_ns",
                     static_cast<std::uint64_t>(o.soft_pin_ttl_nanos)),
                Bool("hard_pinned", o.hard_pinned),
                Uint("payload_bytes", o.payload.size())});
      }
    }
  }
  if (options.command == Command::kStat) {
    p.Emit("snapshot_summary",
           {Uint("key_bytes", key_bytes), Uint("payload_bytes", payload_bytes),
            Uint("counted_bytes", counted_bytes)});
  }
  return Finish(Outcome(), p);
}

Result<std::size_t> ParseSize(std::string_view text) {
  std::size_t value = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return InvalidArgumentError("not a number: " + std::string(text));
  }
  return value;
}

}  // namespace

std::string EscapeBytes(std::string_view bytes, bool json) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size());
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      out += json ? "\\u00" : "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

int RunInspect(const std::string& path, const InspectOptions& options,
               std::ostream& out) {
  Printer p(out, options.json);
  Env& env = *Env::Default();
  if (options.max_record_bytes == 0 ||
      options.max_record_bytes > kDurableLogMaxRecordBytes) {
    return Finish(Unreadable(path, "--max-record-bytes must be 1 .. 1 GiB"), p);
  }
  Result<Identity> id = Identify(env, path);
  if (!id.ok()) {
    return Finish(Unreadable(path, std::string(id.status().message())), p);
  }
  const bool supported = !id->version_known || id->version == id->supported;
  if (id->version_known) {
    p.Emit("format",
           {Bytes("path", path), Word("kind", KindName(id->kind)),
            Uint("version", id->version), Bool("supported", supported)});
  } else {
    p.Emit("format", {Bytes("path", path), Word("kind", KindName(id->kind)),
                      Word("version", "unknown"),
                      Bytes("note", "no cairn header in " + id->file)});
  }
  // Another version is decided by the library's decoder, which tells an
  // intact header of another version (unsupported) from a damaged one:
  // the walk stops at that header either way, so identify runs it too.
  if (supported && options.command == Command::kIdentify) {
    return Finish(Outcome(), p);
  }
  switch (id->kind) {
    case Kind::kDurableLogDir:
      return InspectDurableLog(env, path, true, options, p);
    case Kind::kDurableLogSegment:
      return InspectDurableLog(env, path, false, options, p);
    case Kind::kSnapshot:
      return InspectSnapshot(env, path, options, p);
    case Kind::kLogStoreDir:
      return InspectBlockLog(env, path, true, options, p);
    case Kind::kBlockLog:
      return InspectBlockLog(env, path, false, options, p);
    case Kind::kCheckpoint:
      return InspectCheckpoint(env, path, options, p);
  }
  return Finish(Unreadable(path, "unknown format"), p);
}

int InspectMain(std::span<const char* const> args, std::ostream& out,
                std::ostream& err) {
  InspectOptions options;
  bool have_command = false;
  std::string path;
  bool have_path = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      out << kUsage;
      return kExitOk;
    }
    if (arg == "--json") {
      options.json = true;
    } else if (arg.starts_with("--max-record-bytes=")) {
      Result<std::size_t> n =
          ParseSize(arg.substr(std::string_view("--max-record-bytes=").size()));
      if (!n.ok()) {
        err << "cairn-inspect: " << n.status().message() << "\n" << kUsage;
        return kExitUnreadable;
      }
      options.max_record_bytes = *n;
    } else if (arg.starts_with("-")) {
      err << "cairn-inspect: unknown option " << arg << "\n" << kUsage;
      return kExitUnreadable;
    } else if (!have_command) {
      have_command = true;
      if (arg == "identify") {
        options.command = Command::kIdentify;
      } else if (arg == "verify") {
        options.command = Command::kVerify;
      } else if (arg == "dump") {
        options.command = Command::kDump;
      } else if (arg == "stat") {
        options.command = Command::kStat;
      } else {
        err << "cairn-inspect: unknown command " << arg << "\n" << kUsage;
        return kExitUnreadable;
      }
    } else if (!have_path) {
      have_path = true;
      path = std::string(arg);
    } else {
      err << "cairn-inspect: more than one path\n" << kUsage;
      return kExitUnreadable;
    }
  }
  if (!have_command || !have_path) {
    err << kUsage;
    return kExitUnreadable;
  }
  return RunInspect(path, options, out);
}

}  // namespace inspect
CAIRN_NAMESPACE_END
