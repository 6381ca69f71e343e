// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The recovery crash test's child: a TenantRegistry logging to a
// FileDurableLog in `<dir>/log` (synced) runs the seeded mutation sequence
// of recovery_crash.h, writes a snapshot at a log position and truncates
// the log every `snapshot_every` mutations, and after each mutation
// returns sends its serial (u64) to `ack_fd`, until it is killed.
//   recovery_crash_child <dir> <seed> <ack_fd> <snapshot_every>

#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>

#include "cairn/ha/file_durable_log.h"
#include "cairn/ha/standby.h"
#include "cairn/tenant/tenant_registry.h"
#include "ha/recovery_crash.h"

namespace {

using cairn::testing::CrashBlob;
using cairn::testing::CrashOp;
using Registry = cairn::TenantRegistry<CrashBlob>;

int Fail(const char* what, const cairn::Status& s) {
  std::fprintf(stderr, "child: %s: %s\n", what, s.ToString().c_str());
  return 5;
}

}  // namespace

int main(int argc, char** argv) {
  // Dies with the test that started it, whatever happens to that test.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s dir seed ack_fd snapshot_every\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::mt19937_64 rng(std::strtoull(argv[2], nullptr, 10));
  const int ack_fd = std::atoi(argv[3]);
  const std::uint64_t snapshot_every = std::strtoull(argv[4], nullptr, 10);
  cairn::FileDurableLogOptions options;
  options.segment_bytes = 8192;  // several segments, so truncation drops
  auto log = cairn::FileDurableLog::Open(dir + "/log", options);
  if (!log.ok()) return Fail("open", log.status());
  cairn::RegistryOptions r;
  r.durable_log = log->get();
  Registry registry(r);
  for (std::uint64_t serial = 1;; ++serial) {
    const CrashOp op = cairn::testing::NextCrashOp(rng, serial);
    if (cairn::Status s = cairn::testing::RunCrashOp(registry, op); !s.ok()) {
      return Fail("op", s);
    }
    if (::write(ack_fd, &serial, sizeof(serial)) != sizeof(serial)) return 4;
    if (serial % snapshot_every == 0) {
      cairn::Status s = cairn::WriteSnapshotAt(
          registry, *log.value(), dir + "/snapshot",
          cairn::testing::EncodeCrashBlob, {}, /*truncate=*/true);
      if (!s.ok()) return Fail("snapshot", s);
    }
  }
}
