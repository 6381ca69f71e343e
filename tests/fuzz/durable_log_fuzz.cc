// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// libFuzzer harness for the durable log's segment format (FileDurableLog,
// DurableLogReader) and its record bodies (DecodeDurableRecord), over a log
// directory holding one segment. The first byte picks the mode: raw (the
// rest of the input is the segment file) or framed (input-chosen bodies
// written by a real FileDurableLog, so frames, LSNs and checksums are valid,
// then input-chosen damage: a cut, a flipped byte, trailing bytes).
// Invariants: a reader ends cleanly (exactly at the end of the file, LSNs
// 1, 2, ...) or at a damaged tail or with kDataLoss / kFailedPrecondition,
// having consumed a valid prefix inside the file; a reader that tails the
// file while it grows in two steps returns the same records as one that
// reads it whole; a body that decodes re-encodes to the same bytes; Open
// agrees with the read (a clean file opens; a damaged one is refused, or
// with truncate_damaged_tail leaves a file whose records are the valid
// prefix); an opened log appends a record that the next read finds after
// the others, with the next LSN.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/directory/durable_log.h"
#include "cairn/ha/file_durable_log.h"

namespace {

using cairn::Lsn;
using cairn::StatusCode;

constexpr std::size_t kMaxRecord = 4096;

void Require(bool condition) {
  if (!condition) std::abort();
}

const std::string& Path() {
  static const std::string path = [] {
    // tmpfs when there is one: every run creates a log directory and
    // segment, whose syncs cost nothing there.
    const char* base = std::getenv("TMPDIR");
    std::error_code ignored;
    if (base == nullptr) {
      base = std::filesystem::is_directory("/dev/shm", ignored) ? "/dev/shm"
                                                                : "/tmp";
    }
    return std::string(base) + "/cairn_durable_log_fuzz_" +
           std::to_string(::getpid());
  }();
  return path;
}

const std::string& Segment() {
  static const std::string path =
      Path() + "/" + cairn::DurableLogSegmentName(1);
  return path;
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
  Require(f != nullptr);
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

cairn::FileDurableLogOptions Options(bool truncate) {
  cairn::FileDurableLogOptions o;
  o.sync = false;  // the page cache is the disk here
  o.max_record_bytes = kMaxRecord;
  o.max_pending_bytes = 1 << 16;
  o.truncate_damaged_tail = truncate;
  return o;
}

// Appends `body` through the log's protocol; false if refused.
bool AppendBody(cairn::FileDurableLog& log, std::string_view body) {
  cairn::Result<cairn::LogReservation> r = log.Reserve(body.size());
  if (!r.ok()) return false;
  if (!log.Append(*r, body).ok()) {
    log.Cancel(*r);
    return false;
  }
  return log.Finalize(*r, {}).ok();
}

// A body built by the encoder from input bytes: valid or nearly (the count
// may disagree with the objects, an op may be unknown).
std::string EncodedBody(std::string_view raw) {
  auto byte = [&](std::size_t i) {
    return i < raw.size() ? static_cast<std::uint8_t>(raw[i]) : 0;
  };
  const std::string_view rest = raw.size() > 8 ? raw.substr(8) : "";
  const std::uint32_t objects = byte(1) % 3;
  std::string body;
  cairn::BeginDurableRecord(static_cast<cairn::DurableOp>(byte(0) % 8), byte(2),
                            byte(3), rest.substr(0, byte(4) % 4),
                            objects + (byte(5) == 0xff ? 1 : 0), &body);
  for (std::uint32_t i = 0; i < objects; ++i) {
    cairn::DurableObjectState st;
    st.object = byte(6) + i;
    st.version = byte(7);
    st.key = rest.substr(0, 1 + i);
    st.payload_logged = (byte(6) & 1) != 0;
    cairn::AddDurableObject(st, rest, &body);
  }
  return body;
}

// Decoding then encoding a body gives back its bytes.
void CheckBody(std::string_view body) {
  cairn::DurableRecordView v;
  if (!cairn::DecodeDurableRecord(body, &v).ok()) return;
  std::string again;
  cairn::BeginDurableRecord(v.op, v.tenant, v.group, v.group_name,
                            static_cast<std::uint32_t>(v.objects.size()),
                            &again);
  for (const cairn::DurableObjectState& st : v.objects) {
    cairn::AddDurableObject(st, st.payload, &again);
  }
  Require(again == body);
}

struct ReadResult {
  cairn::Status status;  // OK: a clean end; kDataLoss also for a torn tail
  std::vector<std::string> bodies;
  std::uint64_t valid_bytes = 0;
};

// Drains `reader`, appending to *out; false from Next ends it.
void Drain(cairn::DurableLogReader& reader, ReadResult* out) {
  for (;;) {
    cairn::DurableLogEntry e;
    cairn::Result<bool> next = reader.Next(&e);
    if (!next.ok()) {
      out->status = next.status();
      return;
    }
    if (!*next) break;
    Require(e.lsn == out->bodies.size() + 1);
    out->bodies.emplace_back(e.body);
    out->valid_bytes = reader.bytes_read();
  }
  out->status = reader.stopped_at_damaged_tail()
                    ? cairn::DataLossError("torn tail")
                    : cairn::Status::Ok();
}

cairn::DurableLogReaderOptions ReaderOptions() {
  cairn::DurableLogReaderOptions o;
  o.max_record_bytes = kMaxRecord;
  o.read_bytes = 64;  // many refills
  return o;
}

ReadResult ReadLog() {
  ReadResult out;
  auto reader = cairn::DurableLogReader::Open(Path(), 1, ReaderOptions());
  if (!reader.ok()) {
    out.status = reader.status();
    return out;
  }
  out.valid_bytes = (*reader)->bytes_read();
  Drain(**reader, &out);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data + 1),
                               size - 1);
  const std::string& path = Path();
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
  if (data[0] % 2 == 0) {
    std::filesystem::create_directory(path, ignored);
    WriteFile(Segment(), std::string(input));
  } else {
    // Bodies separated by 0xff bytes, each raw or encoded (its first byte
    // picks), written by the real log; then the damage the mode byte asks
    // for, positioned by the input's last bytes.
    auto log = cairn::FileDurableLog::Open(path, Options(false));
    Require(log.ok());
    std::size_t start = 0;
    while (start <= input.size()) {
      std::size_t end = input.find('\xff', start);
      if (end == std::string_view::npos) end = input.size();
      const std::string_view piece = input.substr(start, end - start);
      const bool encoded = !piece.empty() && (piece[0] & 1) != 0;
      AppendBody(**log, encoded ? EncodedBody(piece.substr(1)) : piece);
      start = end + 1;
    }
    log->reset();
    std::string file = ReadFile(Segment());
    const std::size_t where =
        size >= 3 ? (std::size_t{data[size - 1]} << 8 | data[size - 2]) : 0;
    const std::uint8_t damage = data[0] >> 1;
    if ((damage & 1) && !file.empty()) file.resize(where % file.size());
    if ((damage & 2) && !file.empty()) {
      file[where % file.size()] ^= static_cast<char>(1 + (damage >> 3) % 255);
    }
    if (damage & 4) file.append(input.substr(0, damage % 40));
    WriteFile(Segment(), file);
  }
  const std::string before = ReadFile(Segment());

  const ReadResult read = ReadLog();
  Require(read.valid_bytes <= before.size());
  if (read.status.ok()) {
    Require(read.valid_bytes == before.size());
  } else {
    Require(read.status.code() == StatusCode::kDataLoss ||
            read.status.code() == StatusCode::kFailedPrecondition);
  }
  for (const std::string& body : read.bodies) CheckBody(body);

  // Tailing: the file appears in two steps (split where the input says);
  // a reader that drains after each step returns the same records as the
  // whole read, and ends the same way.
  if (before.size() >= cairn::kDurableLogHeaderBytes) {
    const std::size_t split =
        cairn::kDurableLogHeaderBytes +
        (size >= 2 ? data[size - 1] * 7u : 0) %
            (before.size() - cairn::kDurableLogHeaderBytes + 1);
    WriteFile(Segment(), before.substr(0, split));
    auto reader = cairn::DurableLogReader::Open(path, 1, ReaderOptions());
    if (reader.ok()) {
      ReadResult tail;
      Drain(**reader, &tail);
      const bool first_ok =
          tail.status.ok() || tail.status.message() == "torn tail";
      WriteFile(Segment(), before);
      if (first_ok) {
        Drain(**reader, &tail);
        Require(tail.bodies == read.bodies);
        Require(tail.status.ok() == read.status.ok());
      }
    }
    WriteFile(Segment(), before);
  }

  // Open without truncation: a clean file opens and changes nothing; a
  // damaged one is refused (and is left as it was).
  {
    auto log = cairn::FileDurableLog::Open(path, Options(false));
    Require(log.ok() == read.status.ok());
    if (!log.ok()) Require(ReadFile(Segment()) == before);
  }
  auto log = cairn::FileDurableLog::Open(path, Options(true));
  if (!log.ok()) {
    Require(!read.status.ok());
    return 0;
  }
  // What it kept is exactly the valid prefix (a cut tail, or all).
  Require(ReadFile(Segment()) == before.substr(0, read.valid_bytes));
  Require((*log)->durable_lsn() == read.bodies.size());
  const bool appended = AppendBody(**log, "fuzz-tail");
  log->reset();
  const ReadResult reread = ReadLog();
  Require(reread.status.ok());
  Require(reread.bodies.size() == read.bodies.size() + (appended ? 1 : 0));
  for (std::size_t i = 0; i < read.bodies.size(); ++i) {
    Require(reread.bodies[i] == read.bodies[i]);
  }
  if (appended) Require(reread.bodies.back() == "fuzz-tail");
  return 0;
}
