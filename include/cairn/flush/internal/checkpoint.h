// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The LogStore checkpoint file (docs/flush.md, "Checkpoint format"): every
// index entry's key and log location, the per-map entry counts that let a
// load presize each map, and the log position it reflects.
//
//   file    = header (40 B) | count u64 x (partitions * databases)
//             | entry* | XXH64 of everything before it u64
//   header  = magic "CAIRNCKP" u64 | version u32 | partitions u32
//             | databases u32 | log offset u32 | log block u64 | entries u64
//   entry   = db u32 | key bytes u32 | block u32 | offset u32 | length u32
//             | key
//
// Counts are partition-major (map = partition * databases + db). Each
// checkpoint is a generation, the file `checkpoint-<generation>` (decimal,
// from 1), written to `checkpoint-<generation>.tmp`, synced, renamed, and
// the directory synced, all through an Env; the newest generation present
// is in force, and older ones are removed only after a newer one is
// durable. A store written before generations holds one file `checkpoint`,
// read as generation 0. Machinery for LogStore.
//
// Thread safety: a CheckpointEncoder is a plain object; a CheckpointFile
// is immutable once read; the functions may run on any thread.

#ifndef CAIRN_FLUSH_INTERNAL_CHECKPOINT_H_
#define CAIRN_FLUSH_INTERNAL_CHECKPOINT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/base/env.h"
#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/flush/receipt_pass.h"

CAIRN_NAMESPACE_BEGIN
namespace flush_internal {

inline constexpr std::uint64_t kCheckpointMagic =
    0x504b434e52494143ull;  // "CAIRNCKP"
inline constexpr std::uint32_t kCheckpointVersion = 1;
inline constexpr std::size_t kCheckpointHeaderBytes = 40;
inline constexpr std::size_t kCheckpointEntryBytes = 20;

// The path of checkpoint generation `generation` of the store in `dir`
// (0: the name a store written before generations used).
std::string CheckpointPath(const std::string& dir, std::uint64_t generation);

// The checkpoint files in a store's directory.
struct CheckpointFiles {
  bool any = false;          // a checkpoint (not a temp file) is present
  std::uint64_t newest = 0;  // its newest generation, if any
  // Every generation present and every temp file, newest's excepted: what
  // a checkpoint newer than all of them removes (file names, not paths).
  std::vector<std::string> older;
};
// Lists `dir` (the Env's error if it cannot).
Result<CheckpointFiles> ListCheckpoints(Env& env, const std::string& dir);

// Builds a checkpoint in memory: SetMapCount for each map (a map never set
// counts 0) and AddEntry once per entry, in any order (the counts have their
// own place ahead of the entries), then Finish. Every call but SetMapCount
// may throw std::bad_alloc.
class CheckpointEncoder {
 public:
  CheckpointEncoder(std::uint32_t partitions, std::uint32_t databases,
                    std::uint64_t block, std::uint32_t offset);
  // `map` = partition * databases + db, < partitions * databases.
  void SetMapCount(std::uint64_t map, std::uint64_t entries);
  void AddEntry(std::uint32_t db, std::string_view key,
                const RecordLocation& location);
  // The file's bytes: the header's entry total (the sum of the map counts)
  // filled in and the checksum appended.
  std::string Finish() &&;

 private:
  std::uint64_t maps_;  // partitions * databases
  std::string out_;
  std::uint64_t entries_ = 0;
};

// Writes `bytes` as checkpoint generation `generation` (>= 1): to its temp
// file, synced, renamed to CheckpointPath(dir, generation), and the
// directory synced; without `sync` it skips both syncs. Then, once the new
// file is durable, removes the files ListCheckpoints lists as older (a
// failed removal is left for the next checkpoint: the newest generation is
// in force whatever older files remain). The Env's error if the write,
// sync or rename failed (the previous checkpoint then stays in force).
Status WriteCheckpointFile(Env& env, const std::string& dir,
                           std::uint64_t generation, std::string_view bytes,
                           bool sync);

struct CheckpointEntry {
  std::uint32_t db = 0;
  std::string_view key;     // points into the CheckpointFile
  RecordLocation location;  // flags: kDurable
};

// The header's fields.
struct CheckpointHeader {
  std::uint32_t partitions = 0;
  std::uint32_t databases = 0;
  std::uint32_t offset = 0;  // the log position it reflects: offset ...
  std::uint64_t block = 0;   // ... in this block
  std::uint64_t entries = 0;
};

// CheckpointFile::Read's and ForEachEntry's checks, with the same statuses,
// over a file streamed through a bounded buffer (1 MiB, or one entry if
// larger; never the file): a first pass checks the seal, a second decodes
// the header (on_header), the per-map counts and every entry in file order
// (on_entry, with the entry's byte offset in the file; the key is valid
// during the call; its error stops the scan). For an inspector; LogStore
// loads the file whole with CheckpointFile.
Status ScanCheckpointFile(
    Env& env, const std::string& path,
    const std::function<void(const CheckpointHeader&)>& on_header,
    const std::function<Status(const CheckpointEntry&, std::uint64_t offset)>&
        on_entry);

// A checkpoint read whole and checked: its header, checksum, version and
// that the counts are all there and add up to the header's total. The
// entries are checked as ForEachEntry walks them.
class CheckpointFile {
 public:
  // kDataLoss for a file that is truncated, not a checkpoint or fails its
  // checksum or counts; kFailedPrecondition for another format version;
  // the Env's error if it cannot be read.
  static Result<CheckpointFile> Read(Env& env, const std::string& path);

  std::uint32_t partitions() const noexcept { return partitions_; }
  std::uint32_t databases() const noexcept { return databases_; }
  // The log position the checkpoint reflects.
  std::uint64_t block() const noexcept { return block_; }
  std::uint32_t offset() const noexcept { return offset_; }
  std::uint64_t entries() const noexcept { return entries_; }
  // The stored entry count of map `map` (partition * databases + db).
  std::uint64_t map_count(std::uint64_t map) const noexcept;

  // Calls fn for every entry in file order and stops at its first error.
  // kDataLoss, before fn sees it, for an entry cut short, and at the end
  // for trailing bytes. An entry may name a record past the checkpoint's
  // position; the reader checks that the log holds it.
  Status ForEachEntry(
      const std::function<Status(const CheckpointEntry&)>& fn) const;

 private:
  CheckpointFile() = default;

  std::string path_;
  std::string bytes_;
  std::uint32_t partitions_ = 0;
  std::uint32_t databases_ = 0;
  std::uint32_t offset_ = 0;
  std::uint64_t block_ = 0;
  std::uint64_t entries_ = 0;
  std::size_t entries_begin_ = 0;
};

}  // namespace flush_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_FLUSH_INTERNAL_CHECKPOINT_H_
