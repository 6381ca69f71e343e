// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// SIGKILL test of the primary (H1-H3, docs/ha.md): a child process runs a
// registry with a synced FileDurableLog, periodic snapshots and log
// truncation, acknowledging each mutation after it returns; the parent
// kills it at a random point, recovers from the snapshot and the log, and
// checks that the state is the model's after every acknowledged mutation
// (plus, possibly, the one in flight: returned but not yet acknowledged),
// and that every quota account equals its objects' charges.

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/ha/standby.h"
#include "ha/recovery_crash.h"
#include "testing/child_process.h"
#include "testing/scratch_dir.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::CrashBlob;
using testing::CrashState;

CrashState DumpRecovered(const TenantRegistry<CrashBlob>& registry) {
  CrashState state;
  for (const auto& tenant : registry.Tenants()) {
    auto& objects = state[std::string(tenant->name())];
    std::uint64_t sum = 0;
    auto& dir = tenant->directory();
    EXPECT_TRUE(
        dir.VisitHandles([&](std::span<const ObjectHandle<CrashBlob>> handles) {
             for (const auto& h : handles) {
               EXPECT_TRUE(dir.WithHandle(h,
                                          [&](const auto& view) {
                                            objects[std::string(view.key())] = {
                                                view.payload().bytes,
                                                view.counted_bytes()};
                                            sum += view.counted_bytes();
                                          })
                               .ok());
             }
           })
            .ok());
    EXPECT_EQ(tenant->quota().charged(), sum) << tenant->name();
  }
  return state;
}

TEST(RecoveryCrashTest, EveryAcknowledgedMutationSurvivesSigkill) {
  const int kills = testing::StressIterations(24);
  std::mt19937_64 rng(20261206);
  int recovered_with_snapshot = 0;
  for (int round = 0; round < kills; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    testing::ScratchDir scratch("recovery-crash");
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const std::uint64_t seed = rng();
    testing::ChildProcess child(
        CAIRN_RECOVERY_CRASH_CHILD,
        {scratch.path(), std::to_string(seed), std::to_string(fds[1]), "25"},
        fds[0]);
    ::close(fds[1]);
    ASSERT_TRUE(child.started());
    // Let it run a while, reading acknowledgements so it never blocks.
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    std::uint64_t acked = 0;
    auto drain = [&] {
      std::uint64_t serial;
      while (::read(fds[0], &serial, sizeof(serial)) ==
             static_cast<ssize_t>(sizeof(serial))) {
        ASSERT_EQ(serial, acked + 1);
        acked = serial;
      }
    };
    // The kill timer starts at the first acknowledgement, so that a slow
    // (sanitizer or loaded) machine still kills a child that has made its
    // log, not one still starting up.
    const auto startup_limit =
        std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (acked == 0 && std::chrono::steady_clock::now() < startup_limit) {
      drain();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_GT(acked, 0u) << "the child acknowledged nothing in 120 s";
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(30 + rng() % 300);
    while (std::chrono::steady_clock::now() < until) {
      drain();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_TRUE(child.Kill()) << "the child exited before the kill";
    drain();
    ::close(fds[0]);

    StandbyOptions<CrashBlob> options;
    options.log_dir = scratch.File("log");
    options.decode = testing::DecodeCrashBlob;
    if (std::filesystem::exists(scratch.File("snapshot"))) {
      options.snapshot_path = scratch.File("snapshot");
      ++recovered_with_snapshot;
    }
    auto recovered = Recover<CrashBlob>(options);
    ASSERT_TRUE(recovered.ok()) << recovered.status().ToString();
    const CrashState got = DumpRecovered(recovered.value()->registry());

    // The model after the acknowledged mutations, with none, part (of a
    // batch's keys) or all of the one in flight.
    EXPECT_TRUE(testing::RecoveredAckedOrInFlight(got, seed, acked))
        << acked << " acknowledged mutations; the recovered state is not "
        << "the model's after them, with none, part or all of the next";
  }
  // Most rounds ran long enough to snapshot and truncate at least once.
  EXPECT_GT(recovered_with_snapshot, 0);
}

}  // namespace
}  // namespace cairn
