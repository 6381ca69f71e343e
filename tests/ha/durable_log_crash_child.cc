// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The durable-log crash test's child: a GroupDirectory logging to a
// FileDurableLog in directory `path` (4 KiB segments) makes a random stream of
// mutations (create, create in a group, two-phase create + commit, upsert with
// a payload, erase) until it is killed. Every record on_durable reports is sent
// to `ack_fd` as one DurableAck (durable_log_crash.h), in the order on_durable
// sees them.
//   durable_log_crash_child <path> <seed> <ack_fd> <sync 0|1>

#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>

#include "cairn/directory/group_directory.h"
#include "cairn/ha/file_durable_log.h"
#include "ha/durable_log_crash.h"

namespace {

using cairn::testing::CrashPayload;
using cairn::testing::DurableAck;
using Dir = cairn::GroupDirectory<CrashPayload>;

int Fail(const char* what, const cairn::Status& s) {
  std::fprintf(stderr, "child: %s: %s\n", what, s.ToString().c_str());
  return 5;
}

}  // namespace

int main(int argc, char** argv) {
  // Dies with the test that started it, whatever happens to that test.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s path seed ack_fd sync\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  std::mt19937_64 rng(std::strtoull(argv[2], nullptr, 10));
  const int ack_fd = std::atoi(argv[3]);
  // What the mutation in progress expects its record to say; on_durable
  // runs inside that call (this child has one thread).
  DurableAck expected{};
  bool ack_failed = false;
  cairn::FileDurableLogOptions options;
  options.sync = std::string(argv[4]) == "1";
  // A record torn by the previous kill is cut (nothing after it was
  // acknowledged: the parent checks that before starting this child).
  options.truncate_damaged_tail = true;
  options.segment_bytes = 4096;
  options.on_durable = [&](std::span<const cairn::ObjectToken> tokens) {
    DurableAck ack = expected;
    ack.objects = static_cast<std::uint32_t>(tokens.size());
    ack.object = tokens.empty() ? 0 : tokens[0].object;
    // One write of fewer than PIPE_BUF bytes: the parent reads it whole
    // or not at all.
    if (::write(ack_fd, &ack, sizeof(ack)) != sizeof(ack)) ack_failed = true;
  };
  auto log = cairn::FileDurableLog::Open(path, options);
  if (!log.ok()) return Fail("open", log.status());
  cairn::DirectoryOptions o;
  o.durable_log = log->get();
  o.route.bucket_count = 64;
  Dir dir(o);
  std::set<std::string> live;
  for (std::uint64_t serial = 1;; ++serial) {
    if (ack_failed) return 4;
    const std::string key = "k" + std::to_string(rng() % 48);
    const std::string payload = "m" + std::to_string(serial);
    expected = DurableAck{};
    expected.serial = serial;
    const std::uint64_t dice = rng() % 4;
    cairn::Status s;
    if (live.count(key) == 0) {
      cairn::CreateOptions co;
      co.size_bytes = co.counted_bytes = 8;
      const std::string group = "g" + std::to_string(rng() % 3);
      if (dice == 0) co.group = group;
      if (dice != 3) {
        expected.op = static_cast<std::uint8_t>(cairn::DurableOp::kCreate);
        s = dir.Create(key, co, CrashPayload{payload}).status();
        if (!s.ok()) return Fail("create", s);
      } else {
        auto pending = dir.CreatePending(key, co, CrashPayload{payload});
        if (!pending.ok()) return Fail("create pending", pending.status());
        expected.op = static_cast<std::uint8_t>(cairn::DurableOp::kCommit);
        s = dir.Commit(key, pending->token());
        if (!s.ok()) return Fail("commit", s);
      }
      live.insert(key);
    } else if (dice < 2) {
      auto pinned = dir.Pin(key);
      if (!pinned.ok()) return Fail("pin", pinned.status());
      s = dir.BeginUpsert(key, pinned->token(), {8, 8});
      if (!s.ok()) return Fail("begin upsert", s);
      expected.op = static_cast<std::uint8_t>(cairn::DurableOp::kUpsert);
      // The payload-carrying form: the callback form logs no payload
      // bytes (docs/durable_log.md).
      s = dir.CommitUpsertWithPayload(key, pinned->token(),
                                      CrashPayload{payload});
      if (!s.ok()) return Fail("commit upsert", s);
    } else {
      expected.op = static_cast<std::uint8_t>(cairn::DurableOp::kErase);
      s = dir.Erase(key);
      if (!s.ok()) return Fail("erase", s);
      live.erase(key);
    }
  }
}
