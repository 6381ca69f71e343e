// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// libFuzzer harness for the durable log's file format (FileDurableLog,
// ReadDurableLog) and its record bodies (DecodeDurableRecord). The first
// byte picks the mode: raw (the rest of the input is the file) or framed
// (input-chosen bodies written by a real FileDurableLog, so frames and
// checksums are valid, then input-chosen damage: a cut, a flipped byte,
// trailing bytes).
// Invariants: ReadDurableLog ends OK (exactly at the end of the file) or
// kDataLoss / kFailedPrecondition with a valid prefix inside the file; a
// body that decodes re-encodes to the same bytes; Open agrees with the
// read (a clean file opens; a damaged one is refused, or with
// truncate_damaged_tail leaves a file whose records are the valid prefix);
// an opened log appends a record that the next read finds after the others.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/directory/durable_log.h"
#include "cairn/ha/file_durable_log.h"

namespace {

using cairn::StatusCode;

void Require(bool condition) {
  if (!condition) std::abort();
}

const std::string& Path() {
  static const std::string path = [] {
    const char* base = std::getenv("TMPDIR");
    return std::string(base != nullptr ? base : "/tmp") +
           "/cairn_durable_log_fuzz_" + std::to_string(::getpid());
  }();
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
  o.max_record_bytes = 4096;
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
  log.Finalize(*r, {});
  return log.status().ok();
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data + 1),
                               size - 1);
  const std::string& path = Path();
  std::remove(path.c_str());
  if (data[0] % 2 == 0) {
    WriteFile(path, std::string(input));
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
    std::string file = ReadFile(path);
    const std::size_t where =
        size >= 3 ? (std::size_t{data[size - 1]} << 8 | data[size - 2]) : 0;
    const std::uint8_t damage = data[0] >> 1;
    if ((damage & 1) && !file.empty()) file.resize(where % file.size());
    if ((damage & 2) && !file.empty()) {
      file[where % file.size()] ^= static_cast<char>(1 + (damage >> 3) % 255);
    }
    if (damage & 4) file.append(input.substr(0, damage % 40));
    WriteFile(path, file);
  }
  const std::string before = ReadFile(path);

  std::vector<std::string> bodies;
  cairn::DurableLogScan scan;
  const cairn::Status read = cairn::ReadDurableLog(
      path, [&](std::string_view body) { bodies.emplace_back(body); }, &scan);
  Require(bodies.size() == scan.records);
  Require(scan.valid_bytes <= before.size());
  if (read.ok()) {
    Require(scan.valid_bytes == before.size());
  } else {
    Require(read.code() == StatusCode::kDataLoss ||
            read.code() == StatusCode::kFailedPrecondition);
  }
  for (const std::string& body : bodies) CheckBody(body);

  // Open without truncation: a clean file opens and changes nothing; a
  // damaged one is refused (and is left as it was).
  {
    auto log = cairn::FileDurableLog::Open(path, Options(false));
    Require(log.ok() == read.ok());
    if (!log.ok()) Require(ReadFile(path) == before);
  }
  auto log = cairn::FileDurableLog::Open(path, Options(true));
  if (!log.ok()) {
    Require(!read.ok());
    return 0;
  }
  // What it kept is exactly the valid prefix (a cut tail, or all).
  std::vector<std::string> kept;
  Require(ReadFile(path) == before.substr(0, scan.valid_bytes));
  const bool appended = AppendBody(**log, "fuzz-tail");
  log->reset();
  const cairn::Status reread = cairn::ReadDurableLog(
      path, [&](std::string_view body) { kept.emplace_back(body); });
  Require(reread.ok());
  Require(kept.size() == bodies.size() + (appended ? 1 : 0));
  for (std::size_t i = 0; i < bodies.size(); ++i) Require(kept[i] == bodies[i]);
  if (appended) Require(kept.back() == "fuzz-tail");
  return 0;
}
