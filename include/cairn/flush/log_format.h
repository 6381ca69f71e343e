// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The on-disk format of cairn's block log, version 3 (docs/flush.md has the
// picture and the crash argument).
//
//   file   = file header (4 KiB: block size, a random log id) | slot 0 | ...
//   slot   = one block: header slot 0 (4 KiB) | header slot 1 (4 KiB) | data
//            area
//
// Blocks are numbered in log order (a number is never given twice) and sit
// in block slots; a slot freed by compaction is reused by a later block, so
// the order is the numbers', and each header names its block and its slot.
//   data   = record | record | ... | seal record     (records never span)
//   record = 16-byte record header | key bytes | value bytes
//
// Records validate themselves: each record's 32-bit checksum covers its
// header fields, key and value and is seeded with its seat, the log id and
// the (block number, offset) it was written at, so a record is valid only at
// the place it was written in the log it was written to, and a reused
// slot's old bytes never pass for its new block's. Bytes left by an
// earlier write elsewhere, another log's bytes and garbage do not pass. A
// block that is full ends with a seal record (type kSeal, no key or value);
// every block keeps room for it.
//
// The commit point is the record bytes: a flush writes the new records and
// issues one sync. A block header is a hint that names a boundary whose
// bytes an earlier sync already made durable (with the count and chained
// checksums of the records below it); it is rewritten lazily, in slot
// (sequence % 2), alongside a later flush's data. Recovery requires every
// record below the newest valid header's boundary to be valid and to match
// its chain (else kDataLoss), then accepts the contiguous valid records past
// it; a seal record ends the block and recovery goes on in the next one.
// Every integer is stored little-endian (the only byte order cairn builds
// for). All encoding and decoding of the format is in this header and
// log_format.cc.
//
// Thread safety: pure functions over caller buffers; any thread.

#ifndef CAIRN_FLUSH_LOG_FORMAT_H_
#define CAIRN_FLUSH_LOG_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "cairn/base/status.h"
#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

inline constexpr std::uint64_t kLogFileMagic =
    0x474f4c4e52494143ull;  // "CAIRNLOG"
inline constexpr std::uint64_t kLogBlockMagic =
    0x4b4c424e52494143ull;  // "CAIRNBLK"
inline constexpr std::uint32_t kLogFormatVersion = 3;
inline constexpr std::size_t kLogFileHeaderBytes = 4096;
inline constexpr std::size_t kLogHeaderSlotBytes = 4096;
// Offset of the data area inside a block: two header slots.
inline constexpr std::size_t kLogBlockDataOffset = 2 * kLogHeaderSlotBytes;
inline constexpr std::size_t kLogDefaultBlockBytes = std::size_t{8} << 20;
inline constexpr std::size_t kLogMinBlockBytes = kLogBlockDataOffset + 4096;
inline constexpr std::size_t kLogMaxBlockBytes = std::size_t{1} << 30;
inline constexpr std::size_t kLogRecordHeaderBytes = 16;
// Bytes of a seal record; every block keeps this much room for one.
inline constexpr std::size_t kLogSealRecordBytes = kLogRecordHeaderBytes;
// Hard limits of the format (u16 key length); a store may set lower ones.
inline constexpr std::size_t kLogMaxKeyBytes = 65535;

enum class LogRecordType : std::uint8_t {
  kSet = 1,      // db, key, value
  kDelete = 2,   // db, key
  kFlushDb = 3,  // db
  kSeal = 4,     // the last record of a full block; no db, key or value
};

// What the file header holds.
struct LogFileInfo {
  std::uint64_t block_bytes = 0;
  // Random, chosen when the log is created; seeds every record checksum.
  std::uint64_t log_id = 0;
};

// Where a record sits: the log it belongs to, its block and its offset in
// that block's data area. Its checksum is seeded with all three.
struct LogRecordSeat {
  std::uint64_t log_id = 0;
  std::uint64_t block = 0;
  std::uint32_t offset = 0;
};

// The fixed fields of a block header (one slot).
struct LogBlockHeader {
  // The block's number: its place in the log's order, never reused (records
  // are seeded with it). Blocks are numbered in the order they are opened.
  std::uint64_t block = 0;
  std::uint32_t sequence = 0;        // flush sequence of this block, from 1
  std::uint32_t used_bytes = 0;      // flushed boundary inside the data area
  std::uint32_t record_count = 0;    // records below the boundary
  std::uint64_t chain_checksum = 0;  // LogChainChecksum over those records
  // Where the block sits in the file (block slot `slot` at 4 KiB + slot *
  // block size); must match the position the header is read from. A slot
  // whose block was compacted away is reused by a later block.
  std::uint32_t slot = 0;
};

// What a decoded header slot says.
enum class LogSlotState : std::uint8_t {
  kValid,         // magic, checksum and version good
  kInvalid,       // never written, torn, or overwritten: ignore the slot
  kWrongVersion,  // a well-formed header of another format version
};

// One record as found in a data area; key and value point into it.
struct LogRecordView {
  LogRecordType type = LogRecordType::kSet;
  std::uint32_t db = 0;
  std::string_view key;
  std::string_view value;
  std::uint32_t checksum = 0;
  std::uint32_t bytes = 0;  // whole record, header included
};

// Bytes a record of this key and value takes.
constexpr std::size_t LogRecordBytes(std::size_t key_bytes,
                                     std::size_t value_bytes) noexcept {
  return kLogRecordHeaderBytes + key_bytes + value_bytes;
}
// Bytes of a block's data area.
constexpr std::size_t LogDataBytes(std::size_t block_bytes) noexcept {
  return block_bytes - kLogBlockDataOffset;
}
// Bytes of a block's data area that records other than the seal may use.
constexpr std::size_t LogRecordSpace(std::size_t block_bytes) noexcept {
  return LogDataBytes(block_bytes) - kLogSealRecordBytes;
}

// Writes the file header into out[0, kLogFileHeaderBytes).
// `version` is for tests that write another format version.
void EncodeLogFileHeader(const LogFileInfo& info,
                         std::span<char, kLogFileHeaderBytes> out,
                         std::uint32_t version = kLogFormatVersion) noexcept;
// What a file header says. kDataLoss if the magic or checksum is wrong (not
// a cairn log, or damaged), kFailedPrecondition for another format version,
// kDataLoss for a block size out of range.
Result<LogFileInfo> DecodeLogFileHeader(std::span<const char> in);

// Writes one header slot into out[0, kLogHeaderSlotBytes), zero padded.
void EncodeLogBlockHeader(const LogBlockHeader& header,
                          std::span<char, kLogHeaderSlotBytes> out,
                          std::uint32_t version = kLogFormatVersion) noexcept;
LogSlotState DecodeLogBlockHeader(std::span<const char> in,
                                  LogBlockHeader* out) noexcept;

// Encodes a record that will sit at `seat` into out (which has
// LogRecordBytes(key, value) bytes) and returns its checksum. The caller has
// validated the sizes. A kSeal record has db 0 and no key or value.
std::uint32_t EncodeLogRecord(LogRecordType type, std::uint32_t db,
                              std::string_view key, std::string_view value,
                              const LogRecordSeat& seat, char* out) noexcept;
// The whole size of the record whose header is `header` (its first
// kLogRecordHeaderBytes bytes), from the key and value lengths it names:
// how many bytes a streaming reader needs before DecodeLogRecord. Nothing
// is checked; DecodeLogRecord checks the record.
std::size_t LogRecordBytesFromHeader(
    std::span<const char, kLogRecordHeaderBytes> header) noexcept;
// Decodes the record at data[at], which sits at `seat` in the log (data may
// be a copy of just that record, at 0). kDataLoss if it does not fit in the
// data, has an unknown type or a malformed seal, or fails its checksum
// (which it does at any other seat).
Status DecodeLogRecord(std::span<const char> data, std::size_t at,
                       const LogRecordSeat& seat, LogRecordView* out);

// The chain checksum after appending a record with `record_checksum`; the
// chain of an empty block is 0.
std::uint64_t LogChainChecksum(std::uint64_t chain,
                               std::uint32_t record_checksum) noexcept;

CAIRN_NAMESPACE_END

#endif  // CAIRN_FLUSH_LOG_FORMAT_H_
