// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// FileDurableLog against a failing disk (testing/fault_env.h): a seeded
// workload of reservations, appends, cancels, finalizes and reopens runs
// with every call failed in turn, every write torn, and a power cut after
// every sync and at random calls. After each case the disk reboots healthy;
// the log must open (cutting only a torn tail) and hold, in order, a prefix
// of the finalized records that contains every record whose on_durable
// fired. Plus the defects this suite was written for: damage inside the
// log, a failed sync, a second writer and a failed first header.

#include <cerrno>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cairn/ha/file_durable_log.h"
#include "gtest/gtest.h"
#include "testing/fault_env.h"
#include "testing/fault_sweep.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::CutMode;
using testing::EnvCall;
using testing::FaultEnv;
using testing::SweepTally;

constexpr char kLog[] = "/sim/durable.log";

// Every record in the file, in order.
Result<std::vector<std::string>> Records(Env* env) {
  std::vector<std::string> records;
  Status s = ReadDurableLog(
      kLog, [&](std::string_view r) { records.emplace_back(r); }, nullptr, env);
  if (!s.ok()) return s;
  return records;
}

// Records the log holds, and which of the records written since they were
// read were finalized, and how many of those on_durable acknowledged.
struct History {
  std::vector<std::string> base;
  std::vector<std::string> finalized;
  std::size_t durable = 0;
};

// Empty if `got` is base + a prefix of finalized at least `durable` long.
std::string CheckPrefix(const History& h, const std::vector<std::string>& got) {
  const std::size_t base = h.base.size();
  const auto fail = [&](const std::string& why) {
    return why + " (" + std::to_string(got.size()) + " records read, " +
           std::to_string(base) + " from before, " +
           std::to_string(h.finalized.size()) + " finalized since, " +
           std::to_string(h.durable) + " acknowledged)";
  };
  if (got.size() < base + h.durable) return fail("acknowledged records lost");
  if (got.size() > base + h.finalized.size()) {
    return fail("records nobody finalized");
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::string& want = i < base ? h.base[i] : h.finalized[i - base];
    if (got[i] != want) return fail("record " + std::to_string(i) + " differs");
  }
  return {};
}

struct WorkloadRun {
  History history;
  std::unique_ptr<FileDurableLog> log;
  std::size_t acknowledged_checked = 0;
  std::string failure;
};

FileDurableLogOptions Options(Env* env, std::size_t* acknowledged) {
  FileDurableLogOptions options;
  options.env = env;
  options.truncate_damaged_tail = true;
  options.max_record_bytes = 4096;
  options.on_durable = [acknowledged](std::span<const ObjectToken>) {
    ++*acknowledged;
  };
  return options;
}

// Opens the log, checks it against the history and restarts the history
// from it. Returns false (and records a failure if the disk is healthy) if
// it cannot.
bool Reopen(Env* env, WorkloadRun* run, std::size_t* acknowledged,
            bool must_open) {
  run->log.reset();
  auto opened = FileDurableLog::Open(kLog, Options(env, acknowledged));
  Result<std::vector<std::string>> records =
      opened.ok() ? Records(env)
                  : Result<std::vector<std::string>>(opened.status());
  if (!records.ok()) {
    if (must_open && run->failure.empty()) {
      run->failure =
          "reopen failed: " + std::string(records.status().message());
    }
    return false;
  }
  run->acknowledged_checked += run->history.durable;
  std::string wrong = CheckPrefix(run->history, *records);
  if (!wrong.empty() && run->failure.empty()) run->failure = wrong;
  run->history = History{std::move(records).value(), {}, 0};
  run->log = std::move(opened).value();
  *acknowledged = 0;
  return true;
}

void RunWorkload(FaultEnv* env, std::uint64_t seed, WorkloadRun* run,
                 std::size_t* acknowledged) {
  std::mt19937_64 rng(seed);
  if (!Reopen(env, run, acknowledged, false)) return;
  for (int step = 0; step < 120; ++step) {
    FileDurableLog& log = *run->log;
    if (rng() % 10 == 0) {
      if (!Reopen(env, run, acknowledged, false)) return;
      continue;
    }
    // A batch of one to three records, one of them maybe cancelled.
    const int n = 1 + static_cast<int>(rng() % 3);
    const int cancel = rng() % 4 == 0 ? static_cast<int>(rng() % n) : -1;
    std::vector<std::pair<LogReservation, std::string>> batch;
    for (int i = 0; i < n; ++i) {
      std::string record = "step" + std::to_string(step) + "." +
                           std::to_string(i) + ":" +
                           std::string(rng() % 1500, 'a' + step % 26);
      Result<LogReservation> r = log.Reserve(record.size());
      if (!r.ok()) break;
      if (!log.Append(*r, record).ok()) {
        log.Cancel(*r);
        break;
      }
      batch.emplace_back(*r, std::move(record));
    }
    for (int i = 0; i < static_cast<int>(batch.size()); ++i) {
      if (i == cancel) {
        log.Cancel(batch[i].first);
        continue;
      }
      run->history.finalized.push_back(batch[i].second);
      log.Finalize(batch[i].first, {});
      run->history.durable = *acknowledged;
    }
  }
}

enum class Ending : std::uint8_t { kKill, kPowerCut };

std::string Finish(FaultEnv* env, WorkloadRun* run, std::size_t* acknowledged,
                   Ending ending, CutMode mode) {
  if (ending == Ending::kKill) {
    env->Kill();
  } else if (!env->dead()) {
    env->PowerCut(mode);
  }
  run->log.reset();
  env->Reboot();
  Reopen(env, run, acknowledged, true);
  run->log.reset();  // before `env` goes
  return run->failure;
}

constexpr std::uint64_t kSeed = 11;
constexpr int kErrors[] = {EIO, ENOSPC, EDQUOT};
// TSan runs these single-threaded sweeps about 50 times slower than a
// release build and finds nothing more in them: it takes every 5th case
// (release and ASan+UBSan run them all).
constexpr std::uint64_t kStride = testing::kUnderTsan ? 5 : 1;
constexpr CutMode kModes[] = {CutMode::kDropUnsynced, CutMode::kTearUnsynced,
                              CutMode::kGarbageUnsynced};

// Runs one case: `arm` sets the fault on a fresh disk.
template <typename Arm>
std::string RunCase(std::uint64_t seed, Arm&& arm, Ending ending, CutMode mode,
                    WorkloadRun* run) {
  FaultEnv env(seed);
  arm(env);
  std::size_t acknowledged = 0;
  RunWorkload(&env, kSeed, run, &acknowledged);
  return Finish(&env, run, &acknowledged, ending, mode);
}

struct Counts {
  std::uint64_t calls, writes, syncs;
};

Counts CountHealthyRun() {
  FaultEnv env;
  WorkloadRun run;
  std::size_t acknowledged = 0;
  RunWorkload(&env, kSeed, &run, &acknowledged);
  EXPECT_EQ(run.failure, "");
  EXPECT_EQ(
      Finish(&env, &run, &acknowledged, Ending::kKill, CutMode::kDropUnsynced),
      "");
  return Counts{env.calls(), env.writes(), env.syncs()};
}

TEST(DurableLogFaultTest, EveryCallFailedInTurn) {
  const std::uint64_t calls = CountHealthyRun().calls;
  SweepTally tally("FileDurableLog", "every call failed");
  for (std::uint64_t i = 1; i <= calls; i += kStride) {
    for (Ending ending : {Ending::kKill, Ending::kPowerCut}) {
      WorkloadRun run;
      std::string failure = RunCase(
          i, [&](FaultEnv& env) { env.FailCall(i, kErrors[i % 3]); }, ending,
          CutMode::kDropUnsynced, &run);
      tally.Add("call " + std::to_string(i), run.acknowledged_checked, failure);
    }
  }
  std::printf("[ sweep    ] the workload makes %llu calls\n",
              static_cast<unsigned long long>(calls));
  tally.Report();
}

TEST(DurableLogFaultTest, EveryWriteTornInTurn) {
  const std::uint64_t writes = CountHealthyRun().writes;
  SweepTally tally("FileDurableLog", "every write torn");
  for (std::uint64_t i = 1; i <= writes; i += kStride) {
    WorkloadRun run;
    std::mt19937_64 rng(i);
    const std::size_t keep = rng() % 3000;
    std::string failure = RunCase(
        i, [&](FaultEnv& env) { env.TearWrite(i, keep); }, Ending::kPowerCut,
        kModes[i % 3], &run);
    tally.Add("write " + std::to_string(i), run.acknowledged_checked, failure);
  }
  std::printf("[ sweep    ] the workload makes %llu writes\n",
              static_cast<unsigned long long>(writes));
  tally.Report();
}

TEST(DurableLogFaultTest, PowerCutAfterEverySyncAndAtRandomCalls) {
  const Counts healthy = CountHealthyRun();
  SweepTally tally("FileDurableLog", "power cut");
  for (std::uint64_t i = 1; i <= healthy.syncs; i += kStride) {
    for (CutMode mode : kModes) {
      WorkloadRun run;
      std::string failure = RunCase(
          i, [&](FaultEnv& env) { env.CutAfterSync(i, mode); },
          Ending::kPowerCut, mode, &run);
      tally.Add("cut after sync " + std::to_string(i) + " (" +
                    testing::CutModeName(mode) + ")",
                run.acknowledged_checked, failure);
    }
  }
  const auto random_cuts =
      static_cast<std::size_t>(1000 * testing::StressScale() / kStride);
  std::mt19937_64 rng(kSeed);
  for (std::size_t c = 0; c < random_cuts; ++c) {
    const std::uint64_t at = 1 + rng() % healthy.calls;
    const CutMode mode = kModes[c % 3];
    WorkloadRun run;
    std::string failure = RunCase(
        c, [&](FaultEnv& env) { env.CutAtCall(at, mode); }, Ending::kPowerCut,
        mode, &run);
    tally.Add("cut at call " + std::to_string(at) + " (" +
                  testing::CutModeName(mode) + ")",
              run.acknowledged_checked, failure);
  }
  std::printf("[ sweep    ] the workload makes %llu syncs\n",
              static_cast<unsigned long long>(healthy.syncs));
  tally.Report();
}

// Writes `n` records through a healthy log and returns the file's bytes.
std::string LogOf(FaultEnv* env, int n) {
  std::size_t acknowledged = 0;
  auto log = FileDurableLog::Open(kLog, Options(env, &acknowledged));
  EXPECT_TRUE(log.ok()) << log.status().message();
  for (int i = 0; i < n; ++i) {
    const std::string record = "record-" + std::to_string(i);
    Result<LogReservation> r = (*log)->Reserve(record.size());
    EXPECT_TRUE(r.ok());
    EXPECT_TRUE((*log)->Append(*r, record).ok());
    (*log)->Finalize(*r, {});
  }
  EXPECT_EQ(acknowledged, static_cast<std::size_t>(n));
  log->reset();
  return env->Contents(kLog).value_or("");
}

// One flipped bit in record 10 of 100 must not drop records 11-100, whose
// on_durable already fired: Open fails with kDataLoss even when told to
// cut a damaged tail, and the file is left as it was.
TEST(DurableLogFaultTest, DamageBeforeValidRecordsIsDataLossNotATornTail) {
  FaultEnv env;
  std::string bytes = LogOf(&env, 100);
  const std::size_t record10 = bytes.find("record-10");
  ASSERT_NE(record10, std::string::npos);
  bytes[record10 + 2] ^= 0x10;
  ASSERT_TRUE(env.SetContents(kLog, bytes).ok());
  std::size_t acknowledged = 0;
  auto opened = FileDurableLog::Open(kLog, Options(&env, &acknowledged));
  EXPECT_EQ(opened.status().code(), StatusCode::kDataLoss)
      << opened.status().message();
  EXPECT_EQ(env.Contents(kLog), bytes);

  // A damaged last record is a torn tail: cut, and the 99 before it stay.
  FaultEnv tail_env;
  bytes = LogOf(&tail_env, 100);
  bytes[bytes.size() - 2] ^= 0x10;
  ASSERT_TRUE(tail_env.SetContents(kLog, bytes).ok());
  opened = FileDurableLog::Open(kLog, Options(&tail_env, &acknowledged));
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  opened->reset();
  Result<std::vector<std::string>> records = Records(&tail_env);
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(records->size(), 99u);
}

// A failed fdatasync: the record is not reported durable (no on_durable),
// the error is sticky, and nothing later is accepted.
TEST(DurableLogFaultTest, FailedSyncIsNeverReportedDurable) {
  for (int error : kErrors) {
    FaultEnv env;
    std::size_t acknowledged = 0;
    auto log = FileDurableLog::Open(kLog, Options(&env, &acknowledged));
    ASSERT_TRUE(log.ok()) << log.status().message();
    auto write = [&](const std::string& record) {
      Result<LogReservation> r = (*log)->Reserve(record.size());
      if (!r.ok()) return r.status();
      CAIRN_RETURN_IF_ERROR((*log)->Append(*r, record));
      (*log)->Finalize(*r, {});
      return Status::Ok();
    };
    ASSERT_TRUE(write("first").ok());
    EXPECT_EQ(acknowledged, 1u);
    env.FailCall(1, error, EnvCall::kSync);
    ASSERT_TRUE(write("second").ok());
    EXPECT_EQ(acknowledged, 1u);  // on_durable did not fire
    EXPECT_EQ((*log)->durable_records(), 1u);
    EXPECT_FALSE((*log)->status().ok());
    EXPECT_FALSE(write("third").ok());  // sticky: the next Reserve fails
    EXPECT_FALSE((*log)->status().ok());
    EXPECT_EQ(acknowledged, 1u);
    EXPECT_EQ((*log)->durable_records(), 1u);
  }
}

TEST(DurableLogFaultTest, SecondWriterIsRefused) {
  FaultEnv env;
  std::size_t acknowledged = 0;
  auto first = FileDurableLog::Open(kLog, Options(&env, &acknowledged));
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = FileDurableLog::Open(kLog, Options(&env, &acknowledged));
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition)
      << second.status().message();
  first->reset();
  EXPECT_TRUE(FileDurableLog::Open(kLog, Options(&env, &acknowledged)).ok());
}

// The first header write fails: no headerless log is left behind for every
// later Open to refuse.
TEST(DurableLogFaultTest, FailedFirstHeaderLeavesNoLog) {
  for (EnvCall call : {EnvCall::kWriteAt, EnvCall::kSync, EnvCall::kRename}) {
    FaultEnv env;
    std::size_t acknowledged = 0;
    env.FailCall(1, EIO, call);
    EXPECT_FALSE(FileDurableLog::Open(kLog, Options(&env, &acknowledged)).ok());
    env.PowerCut(CutMode::kTearUnsynced);
    env.Reboot();
    auto opened = FileDurableLog::Open(kLog, Options(&env, &acknowledged));
    EXPECT_TRUE(opened.ok()) << opened.status().message();
  }
}

}  // namespace
}  // namespace cairn
