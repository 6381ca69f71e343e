// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/flush/block_log.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cairn/base/internal/coding.h"
#include "cairn/flush/log_format.h"
#include "flush/flush_testing.h"
#include "testing/counting_env.h"
#include "testing/fault_env.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::CountingEnv;
using testing::EnvCall;
using testing::FaultEnv;
using testing::ReadWholeFile;
using testing::ScratchDir;
using testing::WriteWholeFile;

constexpr std::size_t kBlock = 64 * 1024;
constexpr std::uint64_t kLogId = 0x1d;

BlockLogOptions SmallBlocks() {
  BlockLogOptions options;
  options.block_bytes = kBlock;
  return options;
}

// The flush protocol's steps for one block: its data, a sync, then a header
// naming the synced boundary, a sync (LogStore writes the header lazily,
// with a later flush's data; this is the eager form).
Status DataThenHeader(BlockLog& log, LogBlockBuffer& buffer,
                      std::uint32_t seq) {
  CAIRN_RETURN_IF_ERROR(log.WriteData(buffer.block(), buffer.flushed,
                                      buffer.data() + buffer.flushed,
                                      buffer.used() - buffer.flushed));
  CAIRN_RETURN_IF_ERROR(log.Sync());
  buffer.flushed = buffer.used();
  CAIRN_RETURN_IF_ERROR(log.WriteHeader(buffer.HeaderAtUsed(seq)));
  return log.Sync();
}

std::vector<LogRecordView> DecodeAll(const std::string& data,
                                     std::uint64_t log_id,
                                     std::uint64_t block = 0) {
  std::vector<LogRecordView> out;
  std::size_t offset = 0;
  while (offset < data.size()) {
    LogRecordView v;
    Status s = DecodeLogRecord(
        std::span<const char>(data.data(), data.size()), offset,
        {log_id, block, static_cast<std::uint32_t>(offset)}, &v);
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
  std::uint64_t log_id = 0;
  std::unique_ptr<LogBlockBuffer> buffer_owner;
  {
    auto log = BlockLog::Create(path, SmallBlocks());
    ASSERT_TRUE(log.ok()) << log.status().message();
    log_id = (*log)->log_id();
    buffer_owner =
        std::make_unique<LogBlockBuffer>(0, LogDataBytes(kBlock), log_id);
    LogBlockBuffer& buffer = *buffer_owner;
    ASSERT_TRUE(buffer.ok());
    buffer.Append(LogRecordType::kSet, 3, "alpha", "one");
    buffer.Append(LogRecordType::kDelete, 3, "beta", "");
    ASSERT_TRUE(DataThenHeader(**log, buffer, 1).ok());
    buffer.Append(LogRecordType::kFlushDb, 7, "", "");
    buffer.Append(LogRecordType::kSet, 0, "gamma", std::string(1000, 'g'));
    ASSERT_TRUE(DataThenHeader(**log, buffer, 2).ok());
  }
  const LogBlockBuffer& buffer = *buffer_owner;
  auto log = BlockLog::Open(path, {});
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ((*log)->block_bytes(), kBlock);
  EXPECT_EQ((*log)->log_id(), log_id);
  auto header = (*log)->ReadHeader(0);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->sequence, 2u);
  EXPECT_EQ(header->used_bytes, buffer.used());
  EXPECT_EQ(header->record_count, 4u);
  EXPECT_EQ(header->chain_checksum, buffer.chain_checksum());
  std::string data(header->used_bytes, '\0');
  ASSERT_TRUE((*log)->ReadData(0, 0, data.size(), data.data()).ok());
  const auto records = DecodeAll(data, log_id);
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
  LogBlockBuffer buffer(0, LogDataBytes(kBlock), kLogId);
  std::uint32_t first_boundary = 0;
  {
    auto log = BlockLog::Create(path, SmallBlocks());
    ASSERT_TRUE(log.ok());
    buffer.Append(LogRecordType::kSet, 0, "k1", "v1");
    ASSERT_TRUE(DataThenHeader(**log, buffer, 1).ok());
    first_boundary = buffer.used();
    buffer.Append(LogRecordType::kSet, 0, "k2", "v2");
    ASSERT_TRUE(DataThenHeader(**log, buffer, 2).ok());
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
  LogBlockBuffer buffer(0, LogDataBytes(kBlock), (*log)->log_id());
  buffer.Append(LogRecordType::kSet, 0, "k", "v");
  ASSERT_TRUE((*log)->WriteData(0, 0, buffer.data(), buffer.used()).ok());
  EXPECT_EQ((*log)->ReadHeader(0).status().code(), StatusCode::kNotFound);
  // A header that names another block slot is not this slot's.
  LogBlockHeader wrong = buffer.HeaderAtUsed(1);
  wrong.slot = 5;
  char bytes[kLogHeaderSlotBytes];
  EncodeLogBlockHeader(wrong, std::span<char, kLogHeaderSlotBytes>(bytes));
  std::string file = ReadWholeFile(dir.File("log"));
  file.replace(kLogFileHeaderBytes + kLogHeaderSlotBytes, sizeof(bytes), bytes,
               sizeof(bytes));
  WriteWholeFile(dir.File("log"), file);
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
  // Another version: a newer one, and version 2 (blocks at fixed places,
  // before block slots were reused), which this build refuses.
  for (std::uint32_t version : {2u, 4u}) {
    std::string other(kLogFileHeaderBytes, '\0');
    EncodeLogFileHeader(
        {kBlock, 7},
        std::span<char, kLogFileHeaderBytes>(other.data(), kLogFileHeaderBytes),
        version);
    WriteWholeFile(dir.File("other"), other);
    auto refused = BlockLog::Open(dir.File("other"), {});
    EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(
        refused.status().message().find("version " + std::to_string(version)),
        std::string_view::npos)
        << refused.status().message();
  }
  // An intact version 1 log (its header sealed after 24 bytes, no log id)
  // is refused as another version, not as damage.
  std::string v1(kLogFileHeaderBytes, '\0');
  base_internal::StoreFixed<std::uint64_t>(v1.data(), kLogFileMagic);
  base_internal::StoreFixed<std::uint32_t>(v1.data() + 8, 1);
  base_internal::StoreFixed<std::uint32_t>(v1.data() + 12, 4096);
  base_internal::StoreFixed<std::uint64_t>(v1.data() + 16, kBlock);
  base_internal::SealRegion(v1.data(), 24, 0x66696c65);  // v1's "file" seed
  WriteWholeFile(dir.File("v1"), v1);
  auto older = BlockLog::Open(dir.File("v1"), {});
  EXPECT_EQ(older.status().code(), StatusCode::kFailedPrecondition)
      << older.status().message();
  EXPECT_NE(older.status().message().find("version 1"), std::string_view::npos);
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
  LogBlockBuffer buffer(0, 4096, kLogId);
  buffer.Append(LogRecordType::kSet, 1, "key", "value");
  std::string data(buffer.data(), buffer.used());
  LogRecordView v;
  const LogRecordSeat seat{kLogId, 0, 0};
  ASSERT_TRUE(DecodeLogRecord(std::span<const char>(data.data(), data.size()),
                              0, seat, &v)
                  .ok());
  for (std::size_t i = 0; i < data.size(); ++i) {
    std::string bad = data;
    bad[i] ^= 0x10;
    EXPECT_EQ(DecodeLogRecord(std::span<const char>(bad.data(), bad.size()), 0,
                              seat, &v)
                  .code(),
              StatusCode::kDataLoss)
        << "flipped byte " << i;
  }
  for (std::size_t cut = 0; cut < data.size(); ++cut) {
    EXPECT_EQ(
        DecodeLogRecord(std::span<const char>(data.data(), cut), 0, seat, &v)
            .code(),
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

// A record validates only at the seat it was written for: the same bytes
// read as if at another offset, another block or in another log fail their
// checksum, so bytes an earlier write left elsewhere never pass as a record
// here (planted bug: seeding the checksum without the seat makes every
// case below decode).
TEST(BlockLogTest, RecordValidatesOnlyAtItsSeat) {
  LogBlockBuffer buffer(5, 4096, kLogId);
  buffer.Append(LogRecordType::kSet, 1, "pad", "");
  const std::uint32_t at = buffer.Append(LogRecordType::kSet, 1, "key", "v");
  buffer.Seal();
  EXPECT_TRUE(buffer.sealed());
  EXPECT_FALSE(buffer.Fits(1));
  const std::string data(buffer.data() + at, buffer.used() - at);
  const std::span<const char> bytes(data.data(), data.size());
  LogRecordView v;
  ASSERT_TRUE(DecodeLogRecord(bytes, 0, {kLogId, 5, at}, &v).ok());
  EXPECT_EQ(v.key, "key");
  EXPECT_EQ(DecodeLogRecord(bytes, 0, {kLogId, 5, 0}, &v).code(),
            StatusCode::kDataLoss);
  EXPECT_EQ(DecodeLogRecord(bytes, 0, {kLogId, 6, at}, &v).code(),
            StatusCode::kDataLoss);
  EXPECT_EQ(DecodeLogRecord(bytes, 0, {kLogId + 1, 5, at}, &v).code(),
            StatusCode::kDataLoss);
  // The seal is a record of its own, bound to its seat like the others.
  const std::uint32_t seal_at = buffer.used() - kLogSealRecordBytes;
  ASSERT_TRUE(
      DecodeLogRecord(bytes, seal_at - at, {kLogId, 5, seal_at}, &v).ok());
  EXPECT_EQ(v.type, LogRecordType::kSeal);
  EXPECT_EQ(DecodeLogRecord(bytes, seal_at - at, {kLogId, 6, 0}, &v).code(),
            StatusCode::kDataLoss);
}

// Every byte and every sync of the log goes through BlockLogOptions::env:
// the Env sees each write and sync, and a sync or write it fails comes back,
// leaving the previous header in force.
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

  LogBlockBuffer buffer(0, LogDataBytes(kBlock), (*log)->log_id());
  buffer.Append(LogRecordType::kSet, 1, "alpha", "one");
  ASSERT_TRUE(DataThenHeader(**log, buffer, 1).ok());
  EXPECT_EQ(env.count(EnvCall::kWriteAt), 3u);  // data, header
  EXPECT_EQ(env.count(EnvCall::kSync), 3u);     // after each

  // The data's sync fails: it comes back, and no header is written.
  buffer.Append(LogRecordType::kSet, 1, "beta", "two");
  env.FailNth(EnvCall::kSync, 1, InternalError("injected sync failure"));
  const std::uint32_t durable = buffer.flushed;
  Status failed = DataThenHeader(**log, buffer, 2);
  EXPECT_EQ(failed.message(), "injected sync failure");
  EXPECT_EQ(env.count(EnvCall::kWriteAt), 4u);
  buffer.flushed = durable;
  // Retried, its header write tears after 20 bytes, inside the checked
  // fields: slot 0 does not decode, so slot 1's header stays in force.
  env.TearNth(EnvCall::kWriteAt, 2, 20);
  EXPECT_FALSE(DataThenHeader(**log, buffer, 2).ok());
  auto header = (*log)->ReadHeader(0);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->sequence, 1u);
  EXPECT_EQ(header->used_bytes, durable);
  EXPECT_GE(env.count(EnvCall::kReadAt, path), 1u);

  // Open reads through the Env too, and its failure comes back.
  log->reset();
  env.FailNth(EnvCall::kReadAt, 1, InternalError("injected read failure"));
  EXPECT_EQ(BlockLog::Open(path, options).status().message(),
            "injected read failure");
}

// Direct I/O (FaultEnv refuses any direct write or read that is not whole
// aligned pages, and counts it): a data write starts at the start of its
// first page, rewriting the durable bytes there unchanged, and ends at the
// end of its last page with zeros past the records, whatever the buffer
// holds there; a short write is one write, a long one (past the scratch
// pages) two: its whole pages from the buffer, then its last page. Headers
// are single pages; reads, at any offset, go through a buffered handle.
TEST(BlockLogTest, DirectIoWritesWholePagesPaddedWithZeros) {
  FaultEnv env;
  BlockLogOptions options;
  options.block_bytes = 256 * 1024;
  options.direct_io = true;
  options.env = &env;
  const std::string path = env.root() + "/log";
  auto log = BlockLog::Create(path, options);
  ASSERT_TRUE(log.ok()) << log.status().message();
  ASSERT_TRUE((*log)->direct_io());
  const std::uint64_t data_at = (*log)->BlockOffset(0) + kLogBlockDataOffset;
  ASSERT_TRUE((*log)->WriteHeader({0, 1, 0, 0, 0, 0}).ok());

  LogBlockBuffer buffer(0, LogDataBytes(options.block_bytes), (*log)->log_id());
  ASSERT_TRUE(buffer.ok());
  // Writes from the durable boundary to used(), then syncs; returns the
  // number of writes it took and checks the file's data area: the buffer's
  // bytes up to used(), then zeros to the end of that page, then nothing.
  auto flush = [&]() -> std::uint64_t {
    const std::uint64_t writes = env.writes();
    EXPECT_TRUE((*log)
                    ->WriteData(0, buffer.flushed,
                                buffer.data() + buffer.flushed,
                                buffer.used() - buffer.flushed)
                    .ok());
    EXPECT_TRUE((*log)->Sync().ok());
    buffer.flushed = buffer.used();
    const std::string file = env.Contents(path).value_or("");
    const std::size_t padded = (buffer.used() + 4095) / 4096 * 4096;
    EXPECT_EQ(file.size(), data_at + padded);
    EXPECT_EQ(file.substr(data_at, buffer.used()),
              std::string(buffer.data(), buffer.used()));
    EXPECT_EQ(file.substr(data_at + buffer.used()),
              std::string(padded - buffer.used(), '\0'));
    return env.writes() - writes;
  };
  // Past used() the buffer holds a record appended (by another writer)
  // after the flush's boundary, not zeros.
  buffer.Append(LogRecordType::kSet, 1, "alpha", std::string(100, 'a'));
  LogBlockBuffer::Reservation later;
  ASSERT_TRUE(buffer.TryReserve(LogRecordBytes(5, 3000), &later));
  buffer.Fill(later, LogRecordType::kSet, 1, "later", std::string(3000, 'l'));
  buffer.Complete(later);
  EXPECT_EQ(flush(), 1u);
  // Inside the first page: the page again, from its start.
  buffer.Append(LogRecordType::kSet, 1, "beta", std::string(2000, 'b'));
  EXPECT_EQ(flush(), 1u);
  // Across pages, from the middle of one.
  buffer.Append(LogRecordType::kSet, 1, "gamma", std::string(9000, 'c'));
  EXPECT_EQ(flush(), 1u);
  // Longer than the scratch pages: whole pages from the buffer, then the
  // last, padded.
  for (int i = 0; i < 30; ++i) {
    buffer.Append(LogRecordType::kSet, 1, "delta" + std::to_string(i),
                  std::string(3000, 'd'));
  }
  ASSERT_NE(buffer.used() % 4096, 0u);
  EXPECT_EQ(flush(), 2u);
  ASSERT_TRUE((*log)->WriteHeader(buffer.HeaderAtUsed(2)).ok());
  ASSERT_TRUE((*log)->Wipe(1).ok());
  EXPECT_EQ(env.misaligned(), 0u);

  // Reads at any offset, through the buffered handle.
  std::string record(LogRecordBytes(4, 2000), '\0');
  const std::uint32_t beta_at = static_cast<std::uint32_t>(
      LogRecordBytes(5, 100) + LogRecordBytes(5, 3000));
  ASSERT_TRUE((*log)->ReadData(0, beta_at, record.size(), record.data()).ok());
  LogRecordView view;
  ASSERT_TRUE(
      DecodeLogRecord(record, 0, {(*log)->log_id(), 0, beta_at}, &view).ok());
  EXPECT_EQ(view.key, "beta");
  auto header = (*log)->ReadHeader(0);
  ASSERT_TRUE(header.ok()) << header.status().message();
  EXPECT_EQ(header->used_bytes, buffer.used());
  EXPECT_EQ(env.misaligned(), 0u);

  // Reopened direct, the log reads the same.
  log->reset();
  auto reopened = BlockLog::Open(path, options);
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  EXPECT_TRUE((*reopened)->direct_io());
  std::string data(buffer.used(), '\0');
  ASSERT_TRUE((*reopened)->ReadData(0, 0, data.size(), data.data()).ok());
  EXPECT_EQ(DecodeAll(data, (*reopened)->log_id()).size(), 34u);
  EXPECT_EQ(env.misaligned(), 0u);
}

// A filesystem (or an Env) that refuses direct I/O: Create and Open fail
// with kInvalidArgument naming the path, and never fall back to buffered
// writes.
TEST(BlockLogTest, DirectIoRefusedIsInvalidArgument) {
  FaultEnv env;
  BlockLogOptions options = SmallBlocks();
  options.env = &env;
  const std::string path = env.root() + "/log";
  ASSERT_TRUE(BlockLog::Create(path, options).ok());
  env.RefuseDirectIo();
  options.direct_io = true;
  Result<std::unique_ptr<BlockLog>> opened = BlockLog::Open(path, options);
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(opened.status().message().find(path), std::string::npos)
      << opened.status().message();
  Result<std::unique_ptr<BlockLog>> created =
      BlockLog::Create(env.root() + "/other", options);
  EXPECT_EQ(created.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(created.status().message().find("direct I/O"), std::string::npos)
      << created.status().message();
  // Read-only (an inspector) needs no direct handle.
  options.read_only = true;
  EXPECT_TRUE(BlockLog::Open(path, options).ok());
}

// Drain returns a boundary only once every reservation below it has
// completed: here it must wait for the first of two reservations, filled
// and completed last. Planted bug: Drain returning the end without waiting
// for the old phase's count (the loop removed) returned at once, before the
// first record was filled, and failed "drained early".
TEST(LogBlockBufferTest, DrainWaitsForReservationsInFlightBelowIt) {
  LogBlockBuffer buffer(0, kBlock - kLogBlockDataOffset, kLogId);
  ASSERT_TRUE(buffer.ok());
  const std::size_t bytes = LogRecordBytes(3, 10);
  LogBlockBuffer::Reservation first;
  LogBlockBuffer::Reservation second;
  ASSERT_TRUE(buffer.TryReserve(bytes, &first));
  ASSERT_TRUE(buffer.TryReserve(bytes, &second));
  EXPECT_EQ(second.offset, first.offset + bytes);
  buffer.Fill(second, LogRecordType::kSet, 0, "two", std::string(10, '2'));
  buffer.Complete(second);
  std::atomic<bool> drained{false};
  std::uint32_t boundary = 0;
  std::thread drainer([&] {
    boundary = buffer.Drain();
    drained.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(drained.load()) << "drained early";
  // A reservation after the drain's flip is not waited for.
  LogBlockBuffer::Reservation third;
  ASSERT_TRUE(buffer.TryReserve(bytes, &third));
  buffer.Fill(first, LogRecordType::kSet, 0, "one", std::string(10, '1'));
  buffer.Complete(first);
  drainer.join();
  EXPECT_EQ(boundary, 2 * bytes);
  buffer.Advance(boundary);
  EXPECT_EQ(buffer.used(), 2 * bytes);
  EXPECT_EQ(buffer.record_count(), 2u);
  LogRecordView view;
  ASSERT_TRUE(
      DecodeLogRecord({buffer.data(), buffer.used()}, 0, {kLogId, 0, 0}, &view)
          .ok());
  EXPECT_EQ(view.key, "one");
  // The third, still in flight, holds the next drain.
  buffer.Fill(third, LogRecordType::kSet, 0, "tri", std::string(10, '3'));
  buffer.Complete(third);
  EXPECT_EQ(buffer.Drain(), 3 * bytes);
}

// The seal takes the last bytes and refuses every later reservation; a
// record that does not fit before the seal's bytes is refused too.
TEST(LogBlockBufferTest, SealRefusesLaterReservations) {
  LogBlockBuffer buffer(0, 4096, kLogId);
  ASSERT_TRUE(buffer.ok());
  LogBlockBuffer::Reservation r;
  EXPECT_FALSE(buffer.TryReserve(4096 - kLogSealRecordBytes + 1, &r));
  ASSERT_TRUE(buffer.TryReserve(4096 - kLogSealRecordBytes, &r));
  buffer.Fill(
      r, LogRecordType::kSet, 0, "k",
      std::string(4096 - kLogSealRecordBytes - LogRecordBytes(1, 0), 'v'));
  buffer.Complete(r);
  EXPECT_FALSE(buffer.TryReserve(1, &r));
  buffer.AppendSeal();
  EXPECT_EQ(buffer.reserved(), 4096u);
  buffer.Advance(buffer.Drain());
  EXPECT_TRUE(buffer.sealed());
  EXPECT_EQ(buffer.record_count(), 2u);
  buffer.AppendSeal();  // a no-op on a sealed block
  EXPECT_EQ(buffer.reserved(), 4096u);
}

// Eight threads append until the block is full while a flusher drains and
// advances: every boundary it gets ends a record, every record below it
// decodes, and the chain and count match a serial replay of the bytes.
// Planted bug: Drain not waiting for the old phase's count failed the
// decode below a boundary ("record at ...": bytes not filled yet).
TEST(LogBlockBufferTest, ConcurrentAppendsLeaveNoHoleBelowADrain) {
  constexpr int kThreads = 8;
  const int rounds = testing::StressIterations(20);
  for (int round = 0; round < rounds; ++round) {
    LogBlockBuffer buffer(round, 256 * 1024, kLogId);
    ASSERT_TRUE(buffer.ok());
    std::atomic<bool> full{false};
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([&, t] {
        for (int i = 0;; ++i) {
          const std::string key = std::to_string(t) + ":" + std::to_string(i);
          const std::string value(static_cast<std::size_t>((i * 37 + t) % 300),
                                  static_cast<char>('a' + t));
          LogBlockBuffer::Reservation r;
          if (!buffer.TryReserve(LogRecordBytes(key.size(), value.size()),
                                 &r)) {
            full.store(true);
            return;
          }
          buffer.Fill(r, LogRecordType::kSet, 0, key, value);
          buffer.Complete(r);
        }
      });
    }
    std::uint32_t checked = 0;
    auto check_up_to = [&](std::uint32_t end) {
      while (checked < end) {
        LogRecordView view;
        const Status s =
            DecodeLogRecord({buffer.data(), end}, checked,
                            {kLogId, std::uint64_t(round), checked}, &view);
        ASSERT_TRUE(s.ok()) << "record at " << checked << ": " << s.message();
        checked += view.bytes;
      }
      ASSERT_EQ(checked, end);
    };
    while (!full.load()) {
      const std::uint32_t end = buffer.Drain();
      buffer.Advance(end);
      check_up_to(end);
      if (::testing::Test::HasFatalFailure()) break;
    }
    for (auto& w : writers) w.join();
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    buffer.AppendSeal();
    buffer.Advance(buffer.Drain());
    check_up_to(buffer.used());
    ASSERT_TRUE(buffer.sealed());
    // The flusher's fold equals a single-threaded replay of the bytes.
    LogBlockBuffer replay(round, 256 * 1024, kLogId);
    std::uint32_t at = 0;
    while (at < buffer.used()) {
      LogRecordView view;
      ASSERT_TRUE(DecodeLogRecord({buffer.data(), buffer.used()}, at,
                                  {kLogId, std::uint64_t(round), at}, &view)
                      .ok());
      if (view.type == LogRecordType::kSeal) {
        replay.Seal();
      } else {
        replay.Append(view.type, view.db, view.key, view.value);
      }
      at += view.bytes;
    }
    EXPECT_EQ(replay.used(), buffer.used());
    EXPECT_EQ(replay.record_count(), buffer.record_count());
    EXPECT_EQ(replay.chain_checksum(), buffer.chain_checksum());
  }
}

}  // namespace
}  // namespace cairn
