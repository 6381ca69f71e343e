// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/flush/block_log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cairn/flush/log_format.h"
#include "flush/flush_testing.h"
#include "testing/counting_env.h"

namespace cairn {
namespace {

using testing::CountingEnv;
using testing::EnvCall;
using testing::ReadWholeFile;
using testing::ScratchDir;
using testing::WriteWholeFile;

constexpr std::size_t kBlock = 64 * 1024;

BlockLogOptions SmallBlocks() {
  BlockLogOptions options;
  options.block_bytes = kBlock;
  return options;
}

std::vector<LogRecordView> DecodeAll(const std::string& data) {
  std::vector<LogRecordView> out;
  std::size_t offset = 0;
  while (offset < data.size()) {
    LogRecordView v;
    Status s = DecodeLogRecord(std::span<const char>(data.data(), data.size()),
                               offset, &v);
    EXPECT_TRUE(s.ok()) << s.message();
    if (!s.ok()) break;
    out.push_back(v);
    offset += v.bytes;
  }
  return out;
}

TEST(BlockLogTest, FlushedRecordsReadBackAfterReopen) {
  ScratchDir dir;
  const std::string path = dir.File("log");
  LogBlockBuffer buffer(0, LogDataBytes(kBlock));
  ASSERT_TRUE(buffer.ok());
  {
    auto log = BlockLog::Create(path, SmallBlocks());
    ASSERT_TRUE(log.ok()) << log.status().message();
    buffer.Append(LogRecordType::kSet, 3, "alpha", "one");
    buffer.Append(LogRecordType::kDelete, 3, "beta", "");
    ASSERT_TRUE(
        (*log)->FlushBlock(buffer.HeaderAtUsed(1), buffer.data(), 0).ok());
    buffer.flushed = buffer.used();
    buffer.Append(LogRecordType::kFlushDb, 7, "", "");
    buffer.Append(LogRecordType::kSet, 0, "gamma", std::string(1000, 'g'));
    ASSERT_TRUE(
        (*log)
            ->FlushBlock(buffer.HeaderAtUsed(2), buffer.data(), buffer.flushed)
            .ok());
  }
  auto log = BlockLog::Open(path, {});
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ((*log)->block_bytes(), kBlock);
  auto header = (*log)->ReadHeader(0);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->sequence, 2u);
  EXPECT_EQ(header->used_bytes, buffer.used());
  EXPECT_EQ(header->record_count, 4u);
  EXPECT_EQ(header->chain_checksum, buffer.chain_checksum());
  std::string data(header->used_bytes, '\0');
  ASSERT_TRUE((*log)->ReadData(0, 0, data.size(), data.data()).ok());
  const auto records = DecodeAll(data);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].type, LogRecordType::kSet);
  EXPECT_EQ(records[0].db, 3u);
  EXPECT_EQ(records[0].key, "alpha");
  EXPECT_EQ(records[0].value, "one");
  EXPECT_EQ(records[1].type, LogRecordType::kDelete);
  EXPECT_EQ(records[2].type, LogRecordType::kFlushDb);
  EXPECT_EQ(records[2].db, 7u);
  EXPECT_EQ(records[3].value, std::string(1000, 'g'));
  std::uint64_t chain = 0;
  for (const auto& r : records) chain = LogChainChecksum(chain, r.checksum);
  EXPECT_EQ(chain, header->chain_checksum);
  EXPECT_EQ((*log)->ReadHeader(1).status().code(), StatusCode::kNotFound);
}

// Headers alternate between the two slots, so a torn newer header leaves
// the older one in force (planted bug: writing every header to slot 0 makes
// this fail, both slots' states are then lost together).
TEST(BlockLogTest, TornHeaderFallsBackToTheOtherSlot) {
  ScratchDir dir;
  const std::string path = dir.File("log");
  LogBlockBuffer buffer(0, LogDataBytes(kBlock));
  std::uint32_t first_boundary = 0;
  {
    auto log = BlockLog::Create(path, SmallBlocks());
    ASSERT_TRUE(log.ok());
    buffer.Append(LogRecordType::kSet, 0, "k1", "v1");
    ASSERT_TRUE(
        (*log)->FlushBlock(buffer.HeaderAtUsed(1), buffer.data(), 0).ok());
    first_boundary = buffer.used();
    buffer.Append(LogRecordType::kSet, 0, "k2", "v2");
    ASSERT_TRUE(
        (*log)
            ->FlushBlock(buffer.HeaderAtUsed(2), buffer.data(), first_boundary)
            .ok());
  }
  std::string bytes = ReadWholeFile(path);
  // Sequence 2 lives in slot 0 of block 0: tear it.
  bytes[kLogFileHeaderBytes + 20] ^= 0x5a;
  WriteWholeFile(path, bytes);
  auto log = BlockLog::Open(path, {});
  ASSERT_TRUE(log.ok());
  auto header = (*log)->ReadHeader(0);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->sequence, 1u);
  EXPECT_EQ(header->used_bytes, first_boundary);
  EXPECT_EQ(header->record_count, 1u);
}

TEST(BlockLogTest, DataWithoutHeaderIsNotABlock) {
  ScratchDir dir;
  auto log = BlockLog::Create(dir.File("log"), SmallBlocks());
  ASSERT_TRUE(log.ok());
  LogBlockBuffer buffer(0, LogDataBytes(kBlock));
  buffer.Append(LogRecordType::kSet, 0, "k", "v");
  ASSERT_TRUE((*log)->WriteData(0, 0, buffer.data(), buffer.used()).ok());
  EXPECT_EQ((*log)->ReadHeader(0).status().code(), StatusCode::kNotFound);
  // A header that names another block's index is not this block's.
  LogBlockHeader wrong = buffer.HeaderAtUsed(1);
  wrong.block = 5;
  ASSERT_TRUE((*log)->WriteHeader(wrong).ok());
  EXPECT_EQ((*log)->ReadHeader(0).status().code(), StatusCode::kNotFound);
}

TEST(BlockLogTest, BadFilesGetClearStatus) {
  ScratchDir dir;
  EXPECT_EQ(BlockLog::Open(dir.File("missing"), {}).status().code(),
            StatusCode::kNotFound);
  BlockLogOptions bad;
  bad.block_bytes = 5000;
  EXPECT_EQ(BlockLog::Create(dir.File("bad"), bad).status().code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(BlockLog::Create(dir.File("log"), SmallBlocks()).ok());
  EXPECT_EQ(BlockLog::Create(dir.File("log"), SmallBlocks()).status().code(),
            StatusCode::kAlreadyExists);

  const std::string good = ReadWholeFile(dir.File("log"));
  // Not a cairn log.
  WriteWholeFile(dir.File("text"), std::string(8192, 'x'));
  auto text = BlockLog::Open(dir.File("text"), {});
  EXPECT_EQ(text.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(text.status().message().find("magic"), std::string_view::npos);
  // Truncated header.
  WriteWholeFile(dir.File("short"), good.substr(0, 20));
  EXPECT_EQ(BlockLog::Open(dir.File("short"), {}).status().code(),
            StatusCode::kDataLoss);
  // Damaged header.
  std::string damaged = good;
  damaged[17] ^= 1;
  WriteWholeFile(dir.File("damaged"), damaged);
  EXPECT_EQ(BlockLog::Open(dir.File("damaged"), {}).status().code(),
            StatusCode::kDataLoss);
  // Another version.
  std::string v2(kLogFileHeaderBytes, '\0');
  EncodeLogFileHeader(
      kBlock,
      std::span<char, kLogFileHeaderBytes>(v2.data(), kLogFileHeaderBytes), 2);
  WriteWholeFile(dir.File("v2"), v2);
  auto newer = BlockLog::Open(dir.File("v2"), {});
  EXPECT_EQ(newer.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(newer.status().message().find("version 2"), std::string_view::npos);
}

TEST(BlockLogTest, WrongVersionBlockHeaderIsReported) {
  ScratchDir dir;
  auto log = BlockLog::Create(dir.File("log"), SmallBlocks());
  ASSERT_TRUE(log.ok());
  char slot[kLogHeaderSlotBytes];
  LogBlockHeader h{0, 1, 0, 0, 0};
  EncodeLogBlockHeader(h, std::span<char, kLogHeaderSlotBytes>(slot), 9);
  LogBlockHeader decoded;
  EXPECT_EQ(
      DecodeLogBlockHeader(std::span<const char>(slot, sizeof(slot)), &decoded),
      LogSlotState::kWrongVersion);
  std::string file = ReadWholeFile(dir.File("log"));
  file.resize(kLogFileHeaderBytes + kBlock, '\0');
  std::copy(slot, slot + sizeof(slot),
            file.begin() + kLogFileHeaderBytes + kLogHeaderSlotBytes);
  WriteWholeFile(dir.File("log"), file);
  auto reopened = BlockLog::Open(dir.File("log"), {});
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->ReadHeader(0).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(BlockLogTest, CorruptOrTruncatedRecordsAreDataLoss) {
  LogBlockBuffer buffer(0, 4096);
  buffer.Append(LogRecordType::kSet, 1, "key", "value");
  std::string data(buffer.data(), buffer.used());
  LogRecordView v;
  ASSERT_TRUE(
      DecodeLogRecord(std::span<const char>(data.data(), data.size()), 0, &v)
          .ok());
  for (std::size_t i = 0; i < data.size(); ++i) {
    std::string bad = data;
    bad[i] ^= 0x10;
    EXPECT_EQ(
        DecodeLogRecord(std::span<const char>(bad.data(), bad.size()), 0, &v)
            .code(),
        StatusCode::kDataLoss)
        << "flipped byte " << i;
  }
  for (std::size_t cut = 0; cut < data.size(); ++cut) {
    EXPECT_EQ(
        DecodeLogRecord(std::span<const char>(data.data(), cut), 0, &v).code(),
        StatusCode::kDataLoss);
  }
  // Reading past the end of the file is data loss, not garbage.
  ScratchDir dir;
  auto log = BlockLog::Create(dir.File("log"), SmallBlocks());
  ASSERT_TRUE(log.ok());
  char out[16];
  EXPECT_EQ((*log)->ReadData(0, 0, sizeof(out), out).code(),
            StatusCode::kDataLoss);
  EXPECT_EQ((*log)->ReadData(0, LogDataBytes(kBlock), 1, out).code(),
            StatusCode::kInvalidArgument);
}

// Every byte and every sync of the log goes through BlockLogOptions::env:
// the Env sees the two writes and two syncs of each flush, and a sync or
// write it fails comes back from FlushBlock, leaving the previous header.
TEST(BlockLogTest, IoGoesThroughTheEnvAndItsFailuresComeBack) {
  ScratchDir dir;
  CountingEnv env;
  BlockLogOptions options = SmallBlocks();
  options.env = &env;
  const std::string path = dir.File("log");
  auto log = BlockLog::Create(path, options);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(env.count(EnvCall::kNewFile, path), 1u);
  EXPECT_EQ(env.count(EnvCall::kWriteAt), 1u);  // the file header
  EXPECT_EQ(env.count(EnvCall::kSync), 1u);

  LogBlockBuffer buffer(0, LogDataBytes(kBlock));
  buffer.Append(LogRecordType::kSet, 1, "alpha", "one");
  ASSERT_TRUE(
      (*log)->FlushBlock(buffer.HeaderAtUsed(1), buffer.data(), 0).ok());
  buffer.flushed = buffer.used();
  EXPECT_EQ(env.count(EnvCall::kWriteAt), 3u);  // data, header
  EXPECT_EQ(env.count(EnvCall::kSync), 3u);     // after each

  // The data's sync fails: FlushBlock reports it and writes no header.
  buffer.Append(LogRecordType::kSet, 1, "beta", "two");
  env.FailNth(EnvCall::kSync, 1, InternalError("injected sync failure"));
  Status failed =
      (*log)->FlushBlock(buffer.HeaderAtUsed(2), buffer.data(), buffer.flushed);
  EXPECT_EQ(failed.message(), "injected sync failure");
  EXPECT_EQ(env.count(EnvCall::kWriteAt), 4u);
  // Retried, its header write tears after 20 bytes, inside the checked
  // fields: slot 0 does not decode, so slot 1's header stays in force.
  env.TearNth(EnvCall::kWriteAt, 2, 20);
  EXPECT_FALSE(
      (*log)
          ->FlushBlock(buffer.HeaderAtUsed(2), buffer.data(), buffer.flushed)
          .ok());
  auto header = (*log)->ReadHeader(0);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->sequence, 1u);
  EXPECT_EQ(header->used_bytes, buffer.flushed);
  EXPECT_GE(env.count(EnvCall::kReadAt, path), 1u);

  // Open reads through the Env too, and its failure comes back.
  log->reset();
  env.FailNth(EnvCall::kReadAt, 1, InternalError("injected read failure"));
  EXPECT_EQ(BlockLog::Open(path, options).status().message(),
            "injected read failure");
}

}  // namespace
}  // namespace cairn
