// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The on-disk format of cairn's block log (docs/flush.md has the picture).
//
//   file   = file header (4 KiB) | block 0 | block 1 | ...
//   block  = header slot 0 (4 KiB) | header slot 1 (4 KiB) | data area
//   data   = record | record | ...          (records never span blocks)
//   record = 16-byte record header | key bytes | value bytes
//
// A block is flushed in steps: its data from the last flushed boundary to
// the new one is written and synced, then a block header naming the new
// boundary is written to slot (sequence % 2) and synced. A header torn by a
// crash therefore leaves the other slot, with the previous boundary, intact.
// Each record carries a 32-bit checksum over its own header fields, key and
// value; each block header carries the chain of its records' checksums up to
// its boundary and a checksum of its own fields. Every integer is stored
// little-endian (the only byte order cairn builds for).
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
inline constexpr std::uint32_t kLogFormatVersion = 1;
inline constexpr std::size_t kLogFileHeaderBytes = 4096;
inline constexpr std::size_t kLogHeaderSlotBytes = 4096;
// Offset of the data area inside a block: two header slots.
inline constexpr std::size_t kLogBlockDataOffset = 2 * kLogHeaderSlotBytes;
inline constexpr std::size_t kLogDefaultBlockBytes = std::size_t{8} << 20;
inline constexpr std::size_t kLogMinBlockBytes = kLogBlockDataOffset + 4096;
inline constexpr std::size_t kLogMaxBlockBytes = std::size_t{1} << 30;
inline constexpr std::size_t kLogRecordHeaderBytes = 16;
// Hard limits of the format (u16 key length); a store may set lower ones.
inline constexpr std::size_t kLogMaxKeyBytes = 65535;

enum class LogRecordType : std::uint8_t {
  kSet = 1,      // db, key, value
  kDelete = 2,   // db, key
  kFlushDb = 3,  // db
};

// The fixed fields of a block header (one slot).
struct LogBlockHeader {
  std::uint64_t block = 0;           // block index; must match its position
  std::uint32_t sequence = 0;        // flush sequence of this block, from 1
  std::uint32_t used_bytes = 0;      // flushed boundary inside the data area
  std::uint32_t record_count = 0;    // records below the boundary
  std::uint64_t chain_checksum = 0;  // LogChainChecksum over those records
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

// Writes the file header into out[0, kLogFileHeaderBytes).
// `version` is for tests that write another format version.
void EncodeLogFileHeader(std::uint64_t block_bytes,
                         std::span<char, kLogFileHeaderBytes> out,
                         std::uint32_t version = kLogFormatVersion) noexcept;
// The block size a file header names. kDataLoss if the magic or checksum is
// wrong (not a cairn log, or damaged), kFailedPrecondition for another
// format version, kDataLoss for a block size out of range.
Result<std::uint64_t> DecodeLogFileHeader(std::span<const char> in);

// Writes one header slot into out[0, kLogHeaderSlotBytes), zero padded.
void EncodeLogBlockHeader(const LogBlockHeader& header,
                          std::span<char, kLogHeaderSlotBytes> out,
                          std::uint32_t version = kLogFormatVersion) noexcept;
LogSlotState DecodeLogBlockHeader(std::span<const char> in,
                                  LogBlockHeader* out) noexcept;

// Encodes a record at out (which has LogRecordBytes(key, value) bytes) and
// returns its checksum. The caller has validated the sizes.
std::uint32_t EncodeLogRecord(LogRecordType type, std::uint32_t db,
                              std::string_view key, std::string_view value,
                              char* out) noexcept;
// The whole size of the record whose header is `header` (its first
// kLogRecordHeaderBytes bytes), from the key and value lengths it names:
// how many bytes a streaming reader needs before DecodeLogRecord. Nothing
// is checked; DecodeLogRecord checks the record.
std::size_t LogRecordBytesFromHeader(
    std::span<const char, kLogRecordHeaderBytes> header) noexcept;
// Decodes the record at data[offset]. kDataLoss if it does not fit in the
// data, has an unknown type, or fails its checksum.
Status DecodeLogRecord(std::span<const char> data, std::size_t offset,
                       LogRecordView* out);

// The chain checksum after appending a record with `record_checksum`; the
// chain of an empty block is 0.
std::uint64_t LogChainChecksum(std::uint64_t chain,
                               std::uint32_t record_checksum) noexcept;

CAIRN_NAMESPACE_END

#endif  // CAIRN_FLUSH_LOG_FORMAT_H_
