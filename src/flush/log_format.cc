// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Encoding and checking of the block log format (cairn/flush/log_format.h).

#include "cairn/flush/log_format.h"

#include <cstring>
#include <string>

#include "cairn/base/internal/coding.h"

CAIRN_NAMESPACE_BEGIN
namespace {

using base_internal::Checksum64;
using base_internal::LoadFixed;
using base_internal::SealedHeaderCheck;
using base_internal::StoreFixed;

constexpr std::uint64_t kFileSeed = 0x66696c65;    // "file"
constexpr std::uint64_t kHeaderSeed = 0x68656164;  // "head"
constexpr std::uint64_t kRecordSeed = 0x7265636f;  // "reco"
constexpr std::uint64_t kChainSeed = 0x63686169;   // "chai"

// File header: magic u64 | version u32 | header bytes u32 | block bytes u64
// | log id u64 | checksum u64 (of the first 32 bytes).
constexpr std::size_t kFileChecked = 32;
// Version 1 sealed its file header after 24 bytes (no log id); decoding one
// checks that seal, so an intact version 1 log gets kFailedPrecondition.
constexpr std::size_t kFileCheckedV1 = 24;
// Block header: magic u64 | version u32 | sequence u32 | block u64 |
// used u32 | records u32 | chain u64 | slot u32 | reserved u32 |
// checksum u64 (of the first 48 bytes).
constexpr std::size_t kBlockChecked = 48;
// Record header: checksum u32 | type u8 | reserved u8 | key length u16 |
// value length u32 | db u32.

}  // namespace

void EncodeLogFileHeader(const LogFileInfo& info,
                         std::span<char, kLogFileHeaderBytes> out,
                         std::uint32_t version) noexcept {
  std::memset(out.data(), 0, out.size());
  char* p = out.data();
  StoreFixed<std::uint64_t>(p, kLogFileMagic);
  StoreFixed<std::uint32_t>(p + 8, version);
  StoreFixed<std::uint32_t>(p + 12,
                            static_cast<std::uint32_t>(kLogFileHeaderBytes));
  StoreFixed<std::uint64_t>(p + 16, info.block_bytes);
  StoreFixed<std::uint64_t>(p + 24, info.log_id);
  base_internal::SealRegion(p, kFileChecked, kFileSeed);
}

Result<LogFileInfo> DecodeLogFileHeader(std::span<const char> in) {
  const char* p = in.data();
  const bool v1 = in.size() >= 12 && LoadFixed<std::uint32_t>(p + 8) == 1;
  CAIRN_RETURN_IF_ERROR(base_internal::VerifySealedHeader(
      in, kLogFileMagic, kLogFormatVersion, v1 ? kFileCheckedV1 : kFileChecked,
      kFileSeed,
      {.format = "log",
       .truncated = "log file header is truncated",
       .wrong_magic = "not a cairn log: wrong magic in the file header",
       .bad_checksum = "log file header checksum mismatch"}));
  const std::uint64_t block_bytes = LoadFixed<std::uint64_t>(p + 16);
  if (LoadFixed<std::uint32_t>(p + 12) != kLogFileHeaderBytes ||
      block_bytes < kLogMinBlockBytes || block_bytes > kLogMaxBlockBytes ||
      block_bytes % 4096 != 0) {
    return DataLossError("log file header names an invalid geometry");
  }
  LogFileInfo info;
  info.block_bytes = block_bytes;
  info.log_id = LoadFixed<std::uint64_t>(p + 24);
  return info;
}

void EncodeLogBlockHeader(const LogBlockHeader& header,
                          std::span<char, kLogHeaderSlotBytes> out,
                          std::uint32_t version) noexcept {
  std::memset(out.data(), 0, out.size());
  char* p = out.data();
  StoreFixed<std::uint64_t>(p, kLogBlockMagic);
  StoreFixed<std::uint32_t>(p + 8, version);
  StoreFixed<std::uint32_t>(p + 12, header.sequence);
  StoreFixed<std::uint64_t>(p + 16, header.block);
  StoreFixed<std::uint32_t>(p + 24, header.used_bytes);
  StoreFixed<std::uint32_t>(p + 28, header.record_count);
  StoreFixed<std::uint64_t>(p + 32, header.chain_checksum);
  StoreFixed<std::uint32_t>(p + 40, header.slot);
  StoreFixed<std::uint32_t>(p + 44, 0);
  base_internal::SealRegion(p, kBlockChecked, kHeaderSeed);
}

LogSlotState DecodeLogBlockHeader(std::span<const char> in,
                                  LogBlockHeader* out) noexcept {
  switch (base_internal::CheckSealedHeader(
      in, kLogBlockMagic, kLogFormatVersion, kBlockChecked, kHeaderSeed)) {
    case SealedHeaderCheck::kValid:
      break;
    case SealedHeaderCheck::kWrongVersion:
      return LogSlotState::kWrongVersion;
    default:  // never written, torn or overwritten
      return LogSlotState::kInvalid;
  }
  const char* p = in.data();
  out->sequence = LoadFixed<std::uint32_t>(p + 12);
  out->block = LoadFixed<std::uint64_t>(p + 16);
  out->used_bytes = LoadFixed<std::uint32_t>(p + 24);
  out->record_count = LoadFixed<std::uint32_t>(p + 28);
  out->chain_checksum = LoadFixed<std::uint64_t>(p + 32);
  out->slot = LoadFixed<std::uint32_t>(p + 40);
  return LogSlotState::kValid;
}

namespace {
// The checksum seed of a record at `seat`: its log, block and offset, so the
// same bytes anywhere else fail their checksum.
std::uint64_t SeatSeed(const LogRecordSeat& seat) noexcept {
  char buffer[20];
  StoreFixed<std::uint64_t>(buffer, seat.log_id);
  StoreFixed<std::uint64_t>(buffer + 8, seat.block);
  StoreFixed<std::uint32_t>(buffer + 16, seat.offset);
  return Checksum64(buffer, sizeof(buffer), kRecordSeed);
}

std::uint32_t RecordChecksum(const char* record, std::size_t bytes,
                             const LogRecordSeat& seat) noexcept {
  // Everything after the checksum field: type, lengths, db, key, value.
  return static_cast<std::uint32_t>(
      Checksum64(record + 4, bytes - 4, SeatSeed(seat)));
}
}  // namespace

std::uint32_t EncodeLogRecord(LogRecordType type, std::uint32_t db,
                              std::string_view key, std::string_view value,
                              const LogRecordSeat& seat, char* out) noexcept {
  StoreFixed<std::uint8_t>(out + 4, static_cast<std::uint8_t>(type));
  StoreFixed<std::uint8_t>(out + 5, 0);
  StoreFixed<std::uint16_t>(out + 6, static_cast<std::uint16_t>(key.size()));
  StoreFixed<std::uint32_t>(out + 8, static_cast<std::uint32_t>(value.size()));
  StoreFixed<std::uint32_t>(out + 12, db);
  if (!key.empty())
    std::memcpy(out + kLogRecordHeaderBytes, key.data(), key.size());
  if (!value.empty()) {
    std::memcpy(out + kLogRecordHeaderBytes + key.size(), value.data(),
                value.size());
  }
  const std::uint32_t checksum =
      RecordChecksum(out, LogRecordBytes(key.size(), value.size()), seat);
  StoreFixed<std::uint32_t>(out, checksum);
  return checksum;
}

std::size_t LogRecordBytesFromHeader(
    std::span<const char, kLogRecordHeaderBytes> header) noexcept {
  return LogRecordBytes(LoadFixed<std::uint16_t>(header.data() + 6),
                        LoadFixed<std::uint32_t>(header.data() + 8));
}

Status DecodeLogRecord(std::span<const char> data, std::size_t at,
                       const LogRecordSeat& seat, LogRecordView* out) {
  if (at > data.size() || data.size() - at < kLogRecordHeaderBytes) {
    return DataLossError("log record header runs past the data");
  }
  const char* p = data.data() + at;
  const std::uint8_t type = LoadFixed<std::uint8_t>(p + 4);
  const std::size_t key_bytes = LoadFixed<std::uint16_t>(p + 6);
  const std::size_t bytes = LogRecordBytesFromHeader(
      std::span<const char, kLogRecordHeaderBytes>(p, kLogRecordHeaderBytes));
  if (data.size() - at < bytes) {
    return DataLossError("log record runs past the data");
  }
  if (type < static_cast<std::uint8_t>(LogRecordType::kSet) ||
      type > static_cast<std::uint8_t>(LogRecordType::kSeal)) {
    return DataLossError("log record has an unknown type");
  }
  if (type == static_cast<std::uint8_t>(LogRecordType::kSeal) &&
      bytes != kLogSealRecordBytes) {
    return DataLossError("log seal record has a key or value");
  }
  const std::uint32_t checksum = LoadFixed<std::uint32_t>(p);
  if (checksum != RecordChecksum(p, bytes, seat)) {
    return DataLossError("log record checksum mismatch");
  }
  out->type = static_cast<LogRecordType>(type);
  out->db = LoadFixed<std::uint32_t>(p + 12);
  out->key = std::string_view(p + kLogRecordHeaderBytes, key_bytes);
  out->value = std::string_view(p + kLogRecordHeaderBytes + key_bytes,
                                bytes - kLogRecordHeaderBytes - key_bytes);
  out->checksum = checksum;
  out->bytes = static_cast<std::uint32_t>(bytes);
  return Status();
}

std::uint64_t LogChainChecksum(std::uint64_t chain,
                               std::uint32_t record_checksum) noexcept {
  char buffer[12];
  StoreFixed<std::uint64_t>(buffer, chain);
  StoreFixed<std::uint32_t>(buffer + 8, record_checksum);
  return Checksum64(buffer, sizeof(buffer), kChainSeed);
}

CAIRN_NAMESPACE_END
