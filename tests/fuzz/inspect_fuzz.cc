// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// libFuzzer harness for cairn-inspect's logic (tools/inspect/inspect.h):
// verify, dump --json and stat over fuzzer bytes written to files. The first
// byte picks the mode:
//   0  the rest is one file (any format, found by its magic);
//   1  the rest is the only segment of a durable log directory;
//   2  the rest is the `log` of a LogStore directory;
//   3  the rest, split at a 16-bit length, is a LogStore's `log` and
//      `checkpoint`;
//   4  a durable log written by FileDurableLog with input-chosen keys, then
//      input-chosen damage (a cut or a flipped byte);
//   5  a LogStore written with input-chosen sets and a checkpoint, then
//      input-chosen damage to its log.
// Invariants: the exit status is 0, 1 or 2, and the same for verify, dump
// and stat; in mode 4 verify says 0 exactly when FileDurableLog::Open with
// truncate_damaged_tail (what Recover does) accepts the log, and 1 exactly
// when Open fails with kDataLoss; in mode 5 (block log format 2: records
// bound to their seat, headers as hints, seals) a LogStore that verify
// passes opens, one that LogStore::Open refuses with kDataLoss is damaged
// (verify also checks the blocks before the checkpoint, so it may find
// damage Open does not read), and an undamaged one passes.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>

#include "cairn/directory/durable_log.h"
#include "cairn/flush/log_format.h"
#include "cairn/flush/log_store.h"
#include "cairn/ha/file_durable_log.h"
#include "inspect/inspect.h"

namespace {

namespace fs = std::filesystem;
using cairn::inspect::Command;
using cairn::inspect::InspectOptions;

void RequireAt(bool condition, int line) {
  if (condition) return;
  std::fprintf(stderr, "inspect_fuzz.cc:%d: invariant failed\n", line);
  std::abort();
}
#define Require(condition) RequireAt((condition), __LINE__)

const std::string& Root() {
  static const std::string path = [] {
    const char* base = std::getenv("TMPDIR");
    std::error_code ignored;
    if (base == nullptr) {
      base = fs::is_directory("/dev/shm", ignored) ? "/dev/shm" : "/tmp";
    }
    return std::string(base) + "/cairn_inspect_fuzz_" +
           std::to_string(::getpid());
  }();
  return path;
}

void WriteFile(const std::string& path, std::string_view bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  Require(f != nullptr);
  Require(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  std::fclose(f);
}

void Damage(const std::string& path, std::string_view how) {
  if (how.size() < 3) return;
  std::error_code ec;
  const std::uint64_t size = fs::file_size(path, ec);
  if (ec || size == 0) return;
  const std::uint64_t at =
      (static_cast<std::uint8_t>(how[1]) |
       (std::uint64_t{static_cast<std::uint8_t>(how[2])} << 8)) %
      size;
  if (how[0] & 1) {
    fs::resize_file(path, at);
  } else {
    FILE* f = std::fopen(path.c_str(), "r+b");
    Require(f != nullptr);
    std::fseek(f, static_cast<long>(at), SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, static_cast<long>(at), SEEK_SET);
    std::fputc((c ^ 0x20) & 0xff, f);
    std::fclose(f);
  }
}

// Runs verify, dump --json and stat; returns their common exit status.
int InspectAll(const std::string& path) {
  int status = -1;
  for (const Command command :
       {Command::kVerify, Command::kDump, Command::kStat}) {
    InspectOptions options;
    options.command = command;
    options.json = command == Command::kDump;
    options.max_record_bytes = 4096;
    std::ostringstream out;
    const int exit = cairn::inspect::RunInspect(path, options, out);
    Require(exit >= 0 && exit <= 2);
    Require(status == -1 || status == exit);
    status = exit;
  }
  return status;
}

void DurableLogMode(std::string_view input, const std::string& dir) {
  const std::size_t split =
      input.empty()
          ? 0
          : std::min<std::size_t>(static_cast<std::uint8_t>(input[0]) % 4,
                                  input.size());
  const std::string_view damage = input.substr(0, split);
  input.remove_prefix(split);
  {
    cairn::FileDurableLogOptions options;
    options.sync = false;
    options.max_record_bytes = 4096;
    auto log = cairn::FileDurableLog::Open(dir, options);
    Require(log.ok());
    // Each key is a run of up to 32 input bytes.
    for (int n = 0; !input.empty() && n < 16; ++n) {
      const std::size_t len = std::min<std::size_t>(
          input.size(), 1 + static_cast<std::uint8_t>(input[0]) % 32);
      const std::string key(input.substr(0, len));
      input.remove_prefix(len);
      std::string body;
      cairn::BeginDurableRecord(cairn::DurableOp::kCreate, 1, cairn::kNoGroup,
                                "", 1, &body);
      cairn::DurableObjectState s;
      s.object = static_cast<cairn::ObjectId>(n + 1);
      s.version = 1;
      s.key = key;
      cairn::AddDurableObject(s, "", &body);
      auto r = (*log)->Reserve(body.size());
      Require(r.ok());
      Require((*log)->Append(*r, body).ok());
      Require((*log)->Finalize(*r, {}).ok());
      if (n % 5 == 4) Require((*log)->Rotate().ok());
    }
  }
  std::error_code ignored;
  fs::remove(dir + "/LOCK", ignored);
  std::string newest;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().string() > newest) newest = e.path().string();
  }
  const bool damaged = damage.size() >= 3;
  if (damaged) Damage(newest, damage);
  const int exit = InspectAll(dir);
  cairn::FileDurableLogOptions options;
  options.sync = false;
  options.max_record_bytes = 4096;
  options.truncate_damaged_tail = true;
  auto reopened = cairn::FileDurableLog::Open(dir, options);
  Require((exit == 0) == reopened.ok());
  if (!reopened.ok()) {
    Require((exit == 1) ==
            (reopened.status().code() == cairn::StatusCode::kDataLoss));
  }
  if (!damaged) Require(exit == 0);
}

void LogStoreMode(std::string_view input, const std::string& dir) {
  const std::size_t split =
      input.empty()
          ? 0
          : std::min<std::size_t>(static_cast<std::uint8_t>(input[0]) % 4,
                                  input.size());
  const std::string_view damage = input.substr(0, split);
  input.remove_prefix(split);
  cairn::LogStoreOptions options;
  options.partitions = 2;
  options.databases = 2;
  options.block_bytes = cairn::kLogMinBlockBytes;
  options.sync = false;
  options.max_key_bytes = 32;
  options.max_value_bytes = 2048;
  options.checkpoint_on_close = false;
  {
    auto store = cairn::LogStore::Open(dir, options);
    Require(store.ok());
    for (int n = 0; input.size() >= 2 && n < 24; ++n) {
      const std::uint8_t op = static_cast<std::uint8_t>(input[0]);
      const std::size_t len =
          std::min<std::size_t>(input.size() - 1, 1 + op % 8);
      const std::string key(input.substr(1, len));
      input.remove_prefix(1 + len);
      if (op % 7 == 0) {
        const cairn::Status s = (*store)->Del(op % 2, key);
        Require(s.ok() || s.code() == cairn::StatusCode::kNotFound);
      } else if (op % 11 == 0) {
        Require((*store)->Checkpoint().ok());
      } else {
        Require((*store)->Set(op % 2, key, std::string(op * 7u, 'v')).ok());
      }
    }
    Require((*store)->Close().ok());
  }
  const bool damaged = damage.size() >= 3;
  if (damaged) Damage(dir + "/log", damage);
  const int exit = InspectAll(dir);
  if (!damaged) Require(exit == 0);
  auto store = cairn::LogStore::Open(dir, options);
  if (exit == 0) Require(store.ok());
  if (!store.ok() && store.status().code() == cairn::StatusCode::kDataLoss) {
    Require(exit == 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data + 1),
                               size - 1);
  std::error_code ignored;
  fs::remove_all(Root(), ignored);
  Require(fs::create_directory(Root()));
  const std::string store = Root() + "/store";
  switch (data[0] % 6) {
    case 0:
      WriteFile(Root() + "/file", input);
      InspectAll(Root() + "/file");
      break;
    case 1:
      Require(fs::create_directory(store));
      WriteFile(store + "/" + cairn::DurableLogSegmentName(1), input);
      InspectAll(store);
      break;
    case 2:
      Require(fs::create_directory(store));
      WriteFile(store + "/log", input);
      InspectAll(store);
      break;
    case 3: {
      Require(fs::create_directory(store));
      const std::size_t cut =
          input.size() < 2
              ? 0
              : std::min<std::size_t>(
                    input.size() - 2,
                    static_cast<std::uint8_t>(input[0]) |
                        (static_cast<std::uint8_t>(input[1]) << 8));
      const std::string_view rest =
          input.substr(std::min<std::size_t>(2, input.size()));
      WriteFile(store + "/log", rest.substr(0, cut));
      WriteFile(store + "/checkpoint", rest.substr(cut));
      InspectAll(store);
      break;
    }
    case 4:
      DurableLogMode(input, store);
      break;
    case 5:
      LogStoreMode(input, store);
      break;
  }
  fs::remove_all(Root(), ignored);
  return 0;
}
