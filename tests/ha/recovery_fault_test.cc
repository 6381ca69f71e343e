// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Fault sweeps of the HA path (H1-H4, docs/ha.md) on FaultEnv, the
// simulated disk: a primary registry logs to a FileDurableLog (small
// segments) and writes snapshots at log positions that truncate the log,
// while the workload of recovery_crash.h runs; one fault per case (every
// call failed in turn, every write torn, a power cut after every sync in
// each of the three modes). After each case, Recover from what the disk
// kept must hold every acknowledged mutation (it returned OK), nothing
// else but possibly the one in flight (a batch's keys each on their own:
// part of a batch in flight may survive), and
// accounts equal to their objects' charges.

#include <cerrno>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "cairn/ha/file_durable_log.h"
#include "cairn/ha/standby.h"
#include "cairn/tenant/tenant_registry.h"
#include "ha/recovery_crash.h"
#include "testing/fault_env.h"
#include "testing/fault_sweep.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::CrashBlob;
using testing::CrashState;
using testing::FaultEnv;
using Registry = TenantRegistry<CrashBlob>;

constexpr int kOps = 120;
constexpr int kSnapshotEvery = 25;
constexpr std::uint64_t kStride = testing::kUnderTsan ? 5 : 1;
constexpr std::uint64_t kSeed = 23;

// Runs the workload until it ends or something fails; returns how many
// mutations were acknowledged. The primary is gone when it returns (its
// files stay as the disk has them).
int RunPrimary(FaultEnv& env) {
  FileDurableLogOptions o;
  o.env = &env;
  o.segment_bytes = 1024;
  auto log = FileDurableLog::Open("/sim/log", o);
  if (!log.ok()) return 0;
  RegistryOptions r;
  r.durable_log = log.value().get();
  auto registry = std::make_unique<Registry>(r);
  std::mt19937_64 rng(kSeed);
  int acked = 0;
  for (int serial = 1; serial <= kOps; ++serial) {
    const testing::CrashOp op = testing::NextCrashOp(rng, serial);
    // Acknowledged means the mutation returned OK: a write or sync error
    // after the change became visible fails the mutation itself (H5).
    if (!testing::RunCrashOp(*registry, op).ok()) break;
    acked = serial;
    if (serial % kSnapshotEvery == 0) {
      SnapshotWriteOptions so;
      so.env = &env;
      if (!WriteSnapshotAt(*registry, *log.value(), "/sim/snapshot",
                           testing::EncodeCrashBlob, so, /*truncate=*/true)
               .ok()) {
        break;
      }
    }
  }
  registry.reset();
  return acked;
}

// "" if recovery holds the acknowledged mutations (and maybe one more).
std::string CheckRecovery(FaultEnv& env, int acked) {
  if (env.dead()) env.Reboot();
  StandbyOptions<CrashBlob> options;
  options.env = &env;
  options.log_dir = "/sim/log";
  options.decode = testing::DecodeCrashBlob;
  auto snapshot = env.FileExists("/sim/snapshot");
  if (snapshot.ok() && snapshot.value())
    options.snapshot_path = "/sim/snapshot";
  FileDurableLogOptions log_options;
  log_options.env = &env;
  auto recovered = Recover<CrashBlob>(options, log_options);
  if (!recovered.ok()) {
    // A primary that never finished creating its log acknowledged nothing.
    if (acked == 0 && recovered.status().code() == StatusCode::kNotFound) {
      return "";
    }
    return "recovery failed: " + recovered.status().ToString();
  }
  CrashState got;
  for (const auto& tenant : recovered.value()->registry().Tenants()) {
    auto& objects = got[std::string(tenant->name())];
    std::uint64_t sum = 0;
    auto& dir = tenant->directory();
    Status visited =
        dir.VisitHandles([&](std::span<const ObjectHandle<CrashBlob>> hs) {
          for (const auto& h : hs) {
            dir.WithHandle(h,
                           [&](const auto& view) {
                             objects[std::string(view.key())] = {
                                 view.payload().bytes, view.counted_bytes()};
                             sum += view.counted_bytes();
                           })
                .IgnoreError();
          }
        });
    if (!visited.ok()) return "visit: " + visited.ToString();
    if (tenant->quota().charged() != sum) {
      return "tenant " + std::string(tenant->name()) + " charged " +
             std::to_string(tenant->quota().charged()) + ", objects hold " +
             std::to_string(sum);
    }
  }
  if (testing::RecoveredAckedOrInFlight(got, kSeed, acked)) return "";
  return std::to_string(acked) +
         " acknowledged: the recovered state is not the model's after them, "
         "with none, part or all of the next";
}

// The healthy run's counts, which bound each sweep.
struct Healthy {
  std::uint64_t calls = 0;
  std::uint64_t writes = 0;
  std::uint64_t syncs = 0;
};
Healthy MeasureHealthy() {
  FaultEnv env;
  const std::uint64_t calls = env.calls();
  const std::uint64_t writes = env.writes();
  const std::uint64_t syncs = env.syncs();
  EXPECT_EQ(RunPrimary(env), kOps);
  const Healthy healthy{env.calls() - calls, env.writes() - writes,
                        env.syncs() - syncs};
  EXPECT_EQ(CheckRecovery(env, kOps), "");
  return healthy;
}

TEST(RecoveryFaultTest, EveryCallFailedInTurn) {
  const Healthy healthy = MeasureHealthy();
  testing::SweepTally tally("HA recovery", "every call failed");
  for (std::uint64_t i = 1; i <= healthy.calls; i += kStride) {
    FaultEnv env;
    env.FailCall(i, EIO);
    const int acked = RunPrimary(env);
    env.ClearFaults();
    tally.Add("call " + std::to_string(i), static_cast<std::size_t>(acked),
              CheckRecovery(env, acked));
  }
  tally.Report();
}

TEST(RecoveryFaultTest, EveryWriteTorn) {
  const Healthy healthy = MeasureHealthy();
  testing::SweepTally tally("HA recovery", "every write torn");
  for (std::uint64_t i = 1; i <= healthy.writes; i += kStride) {
    FaultEnv env;
    env.TearWrite(i, /*keep_bytes=*/7);
    const int acked = RunPrimary(env);
    env.ClearFaults();
    tally.Add("write " + std::to_string(i), static_cast<std::size_t>(acked),
              CheckRecovery(env, acked));
  }
  tally.Report();
}

TEST(RecoveryFaultTest, PowerCutAfterEverySync) {
  const Healthy healthy = MeasureHealthy();
  for (testing::CutMode mode :
       {testing::CutMode::kDropUnsynced, testing::CutMode::kGarbageUnsynced,
        testing::CutMode::kTearUnsynced}) {
    testing::SweepTally tally(
        "HA recovery",
        "power cut (mode " + std::to_string(static_cast<int>(mode)) + ")");
    for (std::uint64_t i = 1; i <= healthy.syncs; i += kStride) {
      FaultEnv env(i);
      env.CutAfterSync(i, mode);
      const int acked = RunPrimary(env);
      tally.Add("sync " + std::to_string(i), static_cast<std::size_t>(acked),
                CheckRecovery(env, acked));
    }
    tally.Report();
  }
}

}  // namespace
}  // namespace cairn
