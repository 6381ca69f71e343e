// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// libFuzzer harness for the block log and checkpoint formats: the input
// becomes a store directory (its `log` and maybe its `checkpoint`) and
// LogStore::Open recovers from it. The first byte picks how each file is
// made: the log raw (the rest of the input is the file, so the file header
// checks are fuzzed) or framed (a valid file header and a block whose
// records and header carry valid checksums, then input-chosen damage, so
// recovery itself is fuzzed); the checkpoint absent, raw, or built by the
// encoder from input-chosen counts and entries (valid seal, fuzzed
// contents).
// Invariants: a refused Open is kDataLoss, kFailedPrecondition or
// kInvalidArgument and changed no file; a store that opens reads back the
// same state after a Close (which writes a checkpoint) and a second Open
// (which loads it); the read is never kDataLoss once Open said OK.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/base/env.h"
#include "cairn/flush/internal/checkpoint.h"
#include "cairn/flush/log_format.h"
#include "cairn/flush/log_store.h"

namespace {

using cairn::LogStore;
using cairn::LogStoreOptions;
using cairn::StatusCode;

constexpr std::uint32_t kDatabases = 3;
constexpr std::size_t kBlockBytes = cairn::kLogMinBlockBytes;

void Require(bool condition) {
  if (!condition) std::abort();
}

// Reads the input front to back; past the end it yields zeros.
class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size)
      : data_(data), size_(size) {}
  std::uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::uint32_t U32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= std::uint32_t{Byte()} << (8 * i);
    return v;
  }
  std::string Bytes(std::size_t n) {
    n = std::min(n, size_ - pos_);
    std::string out(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return out;
  }
  std::string Rest() { return Bytes(size_ - pos_); }
  bool empty() const { return pos_ >= size_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

const std::string& Dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string d = std::string(base != nullptr ? base : "/tmp") +
                    "/cairn_block_log_fuzz_" + std::to_string(::getpid());
    return d;
  }();
  return dir;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  Require(f != nullptr);
  Require(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  std::fclose(f);
}

std::string ReadFile(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return "<absent>";
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

std::string Key(std::uint8_t b) { return "k" + std::to_string(b % 16); }

// A valid file header (format v2, log id kLogId), then block 0 framed from
// the input: records with valid checksums for their seats, sometimes a seal
// record, a header slot naming a prefix of them (headers are hints that may
// lag), then damage the input asks for (a boundary moved, a byte flipped, a
// second block's header or records).
constexpr std::uint64_t kLogId = 0x5eed;

std::string FramedLog(Input& in, std::set<std::string>* keys) {
  std::string file(cairn::kLogFileHeaderBytes + kBlockBytes, '\0');
  cairn::EncodeLogFileHeader({kBlockBytes, kLogId},
                             std::span<char, cairn::kLogFileHeaderBytes>(
                                 file.data(), cairn::kLogFileHeaderBytes));
  char* data =
      file.data() + cairn::kLogFileHeaderBytes + cairn::kLogBlockDataOffset;
  const std::size_t data_bytes = cairn::LogDataBytes(kBlockBytes);
  std::uint32_t used = 0;
  std::uint32_t count = 0;
  std::uint64_t chain = 0;
  // The header names the state after `named` records.
  std::uint32_t named_used = 0;
  std::uint32_t named_count = 0;
  std::uint64_t named_chain = 0;
  const int records = in.Byte() % 24;
  const int named = records == 0 ? 0 : in.Byte() % (records + 1);
  for (int i = 0; i < records; ++i) {
    const std::uint8_t kind = in.Byte();
    const auto type = static_cast<cairn::LogRecordType>(1 + kind % 3);
    const std::uint32_t db = (kind >> 2) % (kDatabases + 1);  // one too many
    const std::string key = Key(in.Byte());
    const std::string value = in.Bytes(in.Byte() % 40);
    keys->insert(key);
    const std::size_t bytes = cairn::LogRecordBytes(key.size(), value.size());
    if (used + bytes > cairn::LogRecordSpace(kBlockBytes)) break;
    const cairn::LogRecordSeat seat{kLogId, 0, used};
    const std::uint32_t sum = cairn::EncodeLogRecord(
        type, db, type == cairn::LogRecordType::kFlushDb ? "" : key,
        type == cairn::LogRecordType::kSet ? value : "", seat, data + used);
    // A record's encoded size follows what was encoded.
    cairn::LogRecordView view;
    if (!cairn::DecodeLogRecord(std::span<const char>(data, data_bytes), used,
                                seat, &view)
             .ok()) {
      break;
    }
    used += view.bytes;
    ++count;
    chain = cairn::LogChainChecksum(chain, sum);
    if (i + 1 == named) {
      named_used = used;
      named_count = count;
      named_chain = chain;
    }
  }
  const std::uint8_t shape = in.Byte();
  if (shape & 1) {  // a seal ends block 0; recovery goes on to block 1
    const std::uint32_t sum = cairn::EncodeLogRecord(
        cairn::LogRecordType::kSeal, 0, "", "", {kLogId, 0, used}, data + used);
    used += static_cast<std::uint32_t>(cairn::kLogSealRecordBytes);
    ++count;
    chain = cairn::LogChainChecksum(chain, sum);
  }
  cairn::LogBlockHeader header;
  header.block = 0;
  header.sequence = 1 + in.Byte() % 3;
  // Usually a lagging hint; sometimes every record, the seal included.
  header.used_bytes = (shape & 2) ? used : named_used;
  header.record_count = (shape & 2) ? count : named_count;
  header.chain_checksum = (shape & 2) ? chain : named_chain;
  const std::uint8_t damage = in.Byte();
  if (damage & 1) header.used_bytes += static_cast<std::int8_t>(in.Byte());
  if (damage & 2) header.record_count += static_cast<std::int8_t>(in.Byte());
  char* slot = file.data() + cairn::kLogFileHeaderBytes +
               (header.sequence % 2) * cairn::kLogHeaderSlotBytes;
  cairn::EncodeLogBlockHeader(header,
                              std::span<char, cairn::kLogHeaderSlotBytes>(
                                  slot, cairn::kLogHeaderSlotBytes));
  if (damage & 4) {  // flip a byte of the data or a slot
    const std::size_t at = cairn::kLogFileHeaderBytes + in.U32() % kBlockBytes;
    file[at] = static_cast<char>(file[at] ^ (1 + in.Byte() % 255));
  }
  if (damage & 8) file.resize(file.size() - in.U32() % kBlockBytes);
  if (damage & 16) {  // a second block: a record, its header naming it
    std::string block(kBlockBytes, '\0');
    const std::uint64_t index = 1 + (damage >> 6);  // sometimes the wrong one
    const std::string key = Key(in.Byte());
    keys->insert(key);
    const std::uint32_t sum = cairn::EncodeLogRecord(
        cairn::LogRecordType::kSet, 0, key, in.Bytes(in.Byte() % 40),
        {kLogId, index, 0}, block.data() + cairn::kLogBlockDataOffset);
    cairn::LogBlockHeader next;
    next.block = index;
    next.slot = 1;  // the block slot it sits in (format 3)
    next.sequence = 1;
    if (shape & 4) {
      cairn::LogRecordView view;
      (void)cairn::DecodeLogRecord(
          std::span<const char>(block.data() + cairn::kLogBlockDataOffset,
                                cairn::LogDataBytes(kBlockBytes)),
          0, {kLogId, index, 0}, &view);
      next.used_bytes = view.bytes;
      next.record_count = 1;
      next.chain_checksum = cairn::LogChainChecksum(0, sum);
    }
    cairn::EncodeLogBlockHeader(next,
                                std::span<char, cairn::kLogHeaderSlotBytes>(
                                    block.data() + cairn::kLogHeaderSlotBytes,
                                    cairn::kLogHeaderSlotBytes));
    file += block;
  }
  if (damage & 32) file += in.Bytes(in.Byte());  // a tail after the blocks
  return file;
}

// A checkpoint sealed by the encoder; counts, position and entries from
// the input, so they are often wrong.
std::string EncodedCheckpoint(Input& in, std::set<std::string>* keys) {
  const std::uint32_t partitions = 1 + in.Byte() % 3;
  const std::uint32_t databases = 1 + in.Byte() % (kDatabases + 1);
  const std::uint64_t block = in.Byte() % 3;
  const std::uint32_t offset = in.U32() % (2 * kBlockBytes);
  cairn::flush_internal::CheckpointEncoder enc(partitions, databases, block,
                                               offset);
  const std::uint32_t maps = partitions * databases;
  std::vector<std::uint64_t> counts(maps);
  const int entries = in.Byte() % 12;
  for (int i = 0; i < entries; ++i) counts[in.Byte() % maps] += 1;
  if (in.Byte() & 1) counts[0] += in.Byte() % 3;  // a count that is off
  for (std::uint32_t m = 0; m < maps; ++m) enc.SetMapCount(m, counts[m]);
  for (int i = 0; i < entries; ++i) {
    const std::string key = Key(in.Byte());
    keys->insert(key);
    cairn::RecordLocation loc;
    loc.block = in.Byte() % 2;
    loc.offset = in.U32() % (2 * kBlockBytes);
    loc.length = in.U32() % 256;
    const std::uint32_t db = in.Byte() % (databases + 1);
    enc.AddEntry(db, key, loc);
  }
  return std::move(enc).Finish();
}

using State = std::map<std::pair<std::uint32_t, std::string>, std::string>;

// `trusted_checkpoint`: the checkpoint was sealed by the encoder with
// input-chosen entries. Open trusts a sealed checkpoint's locations (it
// does not read the log behind them), so a Get through one may fail its
// record check (kDataLoss); from the log, or from a checkpoint whose seal
// had to survive the fuzzer, every indexed record must read back. An entry
// that runs past its block is refused by Open (kDataLoss;
// corpus/block_log_checkpoint_entry_past_block was the reproducer).
State ReadAll(LogStore& store, const std::set<std::string>& keys,
              bool trusted_checkpoint) {
  State out;
  for (std::uint32_t db = 0; db < kDatabases; ++db) {
    for (const std::string& key : keys) {
      std::string value;
      const cairn::Status s = store.Get(db, key, &value);
      if (s.ok()) {
        out[{db, key}] = value;
      } else if (s.code() != StatusCode::kNotFound &&
                 !(trusted_checkpoint && s.code() == StatusCode::kDataLoss)) {
        // Open said OK, so every indexed record must read back.
        std::fprintf(stderr, "Get(%u, %s) after a successful Open: %s\n", db,
                     key.c_str(), s.ToString().c_str());
        std::abort();
      }
    }
  }
  return out;
}

LogStoreOptions Options() {
  LogStoreOptions o;
  o.partitions = 2;
  o.databases = kDatabases;
  o.block_bytes = kBlockBytes;
  o.max_key_bytes = 64;
  o.max_value_bytes = 1024;
  o.sync = false;  // the page cache is the disk here
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  Input in(data, size);
  const std::uint8_t mode = in.Byte();
  std::set<std::string> keys;
  for (int i = 0; i < 16; ++i) keys.insert(Key(static_cast<std::uint8_t>(i)));
  std::string checkpoint;
  bool has_checkpoint = true;
  switch ((mode >> 2) % 3) {
    case 0:
      has_checkpoint = false;
      break;
    case 1:
      checkpoint = in.Bytes(in.U32() % 512);
      break;
    default:
      checkpoint = EncodedCheckpoint(in, &keys);
      break;
  }
  const std::string log = mode % 4 == 0 ? in.Rest() : FramedLog(in, &keys);

  const std::string& dir = Dir();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  Require(std::filesystem::create_directory(dir));
  const std::string log_path = dir + "/log";
  const std::string ckpt_path = cairn::flush_internal::CheckpointPath(dir, 1);
  WriteFile(log_path, log);
  if (has_checkpoint) WriteFile(ckpt_path, checkpoint);

  auto store = LogStore::Open(dir, Options());
  if (!store.ok()) {
    const StatusCode code = store.status().code();
    Require(code == StatusCode::kDataLoss ||
            code == StatusCode::kFailedPrecondition ||
            code == StatusCode::kInvalidArgument);
    // "On error nothing was changed on disk."
    Require(ReadFile(log_path) == log);
    Require(ReadFile(ckpt_path) ==
            (has_checkpoint ? checkpoint : std::string("<absent>")));
    return 0;
  }
  const bool trusted = has_checkpoint && (mode >> 2) % 3 == 2;
  const State first = ReadAll(**store, keys, trusted);
  Require((*store)->Close().ok());
  store->reset();
  // Reopened from the checkpoint Close wrote: the same state.
  auto again = LogStore::Open(dir, Options());
  Require(again.ok());
  Require(ReadAll(**again, keys, trusted) == first);
  // And it still takes writes that survive one more reopen.
  Require((*again)->Set(0, "fresh", "value").ok());
  Require((*again)->Close().ok());
  again->reset();
  auto third = LogStore::Open(dir, Options());
  Require(third.ok());
  std::string value;
  Require((*third)->Get(0, "fresh", &value).ok() && value == "value");
  return 0;
}
