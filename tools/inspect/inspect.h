// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// cairn-inspect's logic (docs/inspect.md), as a library so that the
// command's main, its tests and its fuzz harness call the same code.
//
// It identifies a cairn file or store directory by its magic and format
// version (a durable log directory or one of its segments, a snapshot, a
// LogStore directory, a block log, a checkpoint), then verifies it, dumps
// its records or prints its statistics. Every format is read through the
// library's own decoders: SegmentStream and DecodeDurableRecord for the
// durable log, BlockLog / DecodeLogRecord (at each record's seat) for the
// block log (format 3, scanned with LogStore recovery's rules),
// ScanCheckpointFile for the checkpoint and ReadSnapshotFile for the
// snapshot. The durable log, the block log and the checkpoint are streamed
// through bounded buffers; a snapshot is read whole by the library's
// reader, as a restore reads it.
//
// Thread safety: RunInspect and InspectMain keep no state between calls;
// any number may run at once on different files.

#ifndef CAIRN_TOOLS_INSPECT_INSPECT_H_
#define CAIRN_TOOLS_INSPECT_INSPECT_H_

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN
namespace inspect {

// Exit statuses.
inline constexpr int kExitOk = 0;
inline constexpr int kExitDamaged = 1;
// Missing, not a cairn file, a format version the library does not read,
// an I/O error, or a bad command line.
inline constexpr int kExitUnreadable = 2;

enum class Command : std::uint8_t { kIdentify, kVerify, kDump, kStat };

struct InspectOptions {
  Command command = Command::kVerify;
  // One JSON object per line instead of text.
  bool json = false;
  // The largest durable-log record body accepted (the writer's
  // FileDurableLogOptions::max_record_bytes); a frame claiming more is
  // damage. 1 .. 1 GiB.
  std::size_t max_record_bytes = std::size_t{16} << 20;
};

// Inspects `path` (a file or a directory) and writes the result to `out`;
// returns the exit status (kExitOk, kExitDamaged, kExitUnreadable).
int RunInspect(const std::string& path, const InspectOptions& options,
               std::ostream& out);

// The command line: `cairn-inspect <command> [options] <path>` (see
// kUsage in inspect.cc and docs/inspect.md). Usage errors go to `err` and
// return kExitUnreadable; --help prints the usage to `out` and returns 0.
int InspectMain(std::span<const char* const> args, std::ostream& out,
                std::ostream& err);

// How a key or any byte string is printed: printable ASCII as is, a
// backslash as "\\", a double quote as "\"", every other byte as "\xNN"
// (text) or "\u00NN" (JSON: each byte maps to the code point of its value).
std::string EscapeBytes(std::string_view bytes, bool json);

}  // namespace inspect
CAIRN_NAMESPACE_END

#endif  // CAIRN_TOOLS_INSPECT_INSPECT_H_
