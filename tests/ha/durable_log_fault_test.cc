// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// FileDurableLog against a failing disk (testing/fault_env.h): a seeded
// workload of reservations, appends, cancels, finalizes, rotations (small
// segments), DropThrough calls and reopens runs with every call failed in
// turn, every write torn, a power cut after every sync, at random calls and
// at every call of a DropThrough. After each case the disk reboots healthy;
// the log must open (cutting only a torn tail) and hold, with gapless LSNs,
// the finalized records in order: every record whose on_durable fired,
// except those at or below a dropped LSN. Plus the defects this suite was
// written for: damage inside the log (or in an older segment, or a gap), a
// failed sync, a second writer and a failed first header.

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
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

constexpr char kLog[] = "/sim/durable";
// Small segments: the workload's ~200 KB cross a segment boundary every few
// batches, so every sweep also covers rotation.
constexpr std::uint64_t kSegmentBytes = 8192;

std::string SegmentPath(Lsn first) {
  return std::string(kLog) + "/" + DurableLogSegmentName(first);
}

struct Entry {
  Lsn lsn = 0;
  std::string body;
};

// Every record in the log, in order.
Result<std::vector<Entry>> Records(Env* env) {
  std::vector<Entry> records;
  Status s = ReadDurableLog(
      kLog,
      [&](Lsn lsn, std::string_view r) {
        records.push_back(Entry{lsn, std::string(r)});
      },
      nullptr, env);
  if (!s.ok()) return s;
  return records;
}

// What the log is known to hold: every record read back at the last reopen
// or finalized since (by LSN: the finalized records get the LSNs after the
// last one read, in order), how many of those finalized records on_durable
// acknowledged, and the highest LSN a DropThrough was asked to drop.
struct History {
  std::map<Lsn, std::string> known;
  Lsn base_first = 1;  // lowest LSN held at the last reopen
  Lsn base_last = 0;   // highest LSN held at the last reopen
  std::size_t finalized = 0;
  std::size_t durable = 0;
  Lsn dropped_through = 0;
};

// Empty if `got` is gapless, matches what was written, holds every record
// that was on disk at the last reopen or acknowledged since (except those a
// DropThrough may have removed), and nothing that was never finalized.
std::string CheckPrefix(const History& h, const std::vector<Entry>& got) {
  const auto fail = [&](const std::string& why) {
    std::string range = got.empty() ? std::string("none")
                                    : std::to_string(got.front().lsn) + ".." +
                                          std::to_string(got.back().lsn);
    return why + " (read LSNs " + range + "; held " +
           std::to_string(h.base_first) + ".." + std::to_string(h.base_last) +
           " before, " + std::to_string(h.finalized) + " finalized since, " +
           std::to_string(h.durable) + " acknowledged, dropped through " +
           std::to_string(h.dropped_through) + ")";
  };
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (i > 0 && got[i].lsn != got[i - 1].lsn + 1) return fail("LSN gap");
    auto it = h.known.find(got[i].lsn);
    if (it == h.known.end()) return fail("a record nobody finalized");
    if (it->second != got[i].body) {
      return fail("record " + std::to_string(got[i].lsn) + " differs");
    }
  }
  const Lsn lo = std::max(h.dropped_through + 1, h.base_first);
  const Lsn hi = h.base_last + h.durable;
  if (lo <= hi &&
      (got.empty() || got.front().lsn > lo || got.back().lsn < hi)) {
    return fail("acknowledged records lost");
  }
  if (!got.empty() && got.back().lsn > h.base_last + h.finalized) {
    return fail("records nobody finalized");
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
  options.segment_bytes = kSegmentBytes;
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
  Result<std::vector<Entry>> records =
      opened.ok() ? Records(env) : Result<std::vector<Entry>>(opened.status());
  if (!records.ok()) {
    if (must_open && run->failure.empty()) {
      run->failure =
          "reopen failed: " + std::string(records.status().message());
    }
    return false;
  }
  History& h = run->history;
  run->acknowledged_checked += h.durable;
  std::string wrong = CheckPrefix(h, *records);
  const Lsn durable_lsn = (*opened)->durable_lsn();
  const Lsn first_lsn = (*opened)->first_lsn();
  if (wrong.empty() &&
      (records->empty() ? first_lsn != durable_lsn + 1
                        : (first_lsn != records->front().lsn ||
                           durable_lsn != records->back().lsn))) {
    wrong = "first_lsn() " + std::to_string(first_lsn) + " / durable_lsn() " +
            std::to_string(durable_lsn) + " disagree with the records read";
  }
  if (!wrong.empty() && run->failure.empty()) run->failure = wrong;
  // LSNs above what was read may be assigned again (a torn tail was cut).
  h.known.erase(h.known.upper_bound(durable_lsn), h.known.end());
  for (Entry& e : *records) h.known[e.lsn] = std::move(e.body);
  h.base_first = first_lsn;
  h.base_last = durable_lsn;
  h.finalized = 0;
  h.durable = 0;
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
    History& h = run->history;
    const std::uint64_t dice = rng() % 20;
    if (dice < 2) {
      if (!Reopen(env, run, acknowledged, false)) return;
      continue;
    }
    if (dice == 2) {
      // Drop what a snapshot at a recent LSN would cover.
      const Lsn durable = log.durable_lsn();
      const Lsn through = durable - std::min<Lsn>(durable, rng() % 8);
      h.dropped_through = std::max(h.dropped_through, through);
      if (!log.DropThrough(through).ok()) return;
      continue;
    }
    if (dice == 3 && !log.Rotate().ok()) return;
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
      h.known[h.base_last + 1 + h.finalized++] = batch[i].second;
      const std::size_t before = *acknowledged;
      const bool durable = log.Finalize(batch[i].first, {}).ok();
      // OK exactly when the record became durable (on_durable ran for it).
      EXPECT_EQ(*acknowledged, before + (durable ? 1 : 0));
      h.durable = *acknowledged;
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
  std::vector<EnvCall> journal;
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
  const std::vector<EnvCall> journal = env.journal();
  // The workload crosses segment boundaries and drops segments.
  EXPECT_GE(std::count(journal.begin(), journal.end(), EnvCall::kRename), 8);
  EXPECT_GE(std::count(journal.begin(), journal.end(), EnvCall::kRemove), 4);
  return Counts{env.calls(), env.writes(), env.syncs(), journal};
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

// A power cut at each call a DropThrough makes (each segment's removal and
// the directory sync after it), in each mode: after the reboot every
// acknowledged record above the dropped LSN is still there, gapless.
TEST(DurableLogFaultTest, PowerCutAtEveryDropThroughCall) {
  const Counts healthy = CountHealthyRun();
  SweepTally tally("FileDurableLog", "power cut in DropThrough");
  std::size_t cases = 0;
  for (std::uint64_t i = 0; i < healthy.journal.size(); ++i) {
    if (healthy.journal[i] != EnvCall::kRemove) continue;
    // Call i + 1 is the removal, i + 2 the directory sync after it, i + 3
    // the call after that.
    for (std::uint64_t at = i + 1; at <= i + 3; ++at) {
      for (CutMode mode : kModes) {
        if ((cases++ % kStride) != 0) continue;
        WorkloadRun run;
        std::string failure = RunCase(
            at, [&](FaultEnv& env) { env.CutAtCall(at, mode); },
            Ending::kPowerCut, mode, &run);
        tally.Add("cut at call " + std::to_string(at) + " (" +
                      testing::CutModeName(mode) + ")",
                  run.acknowledged_checked, failure);
      }
    }
  }
  EXPECT_GT(cases, 0u);
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
    EXPECT_TRUE((*log)->Finalize(*r, {}).ok());
  }
  EXPECT_EQ(acknowledged, static_cast<std::size_t>(n));
  log->reset();
  return env->Contents(SegmentPath(1)).value_or("");
}

std::vector<std::string> Bodies(const std::vector<Entry>& entries) {
  std::vector<std::string> bodies;
  for (const Entry& e : entries) bodies.push_back(e.body);
  return bodies;
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
  ASSERT_TRUE(env.SetContents(SegmentPath(1), bytes).ok());
  std::size_t acknowledged = 0;
  auto opened = FileDurableLog::Open(kLog, Options(&env, &acknowledged));
  EXPECT_EQ(opened.status().code(), StatusCode::kDataLoss)
      << opened.status().message();
  EXPECT_EQ(env.Contents(SegmentPath(1)), bytes);

  // A damaged last record is a torn tail: cut, and the 99 before it stay.
  FaultEnv tail_env;
  bytes = LogOf(&tail_env, 100);
  bytes[bytes.size() - 2] ^= 0x10;
  ASSERT_TRUE(tail_env.SetContents(SegmentPath(1), bytes).ok());
  opened = FileDurableLog::Open(kLog, Options(&tail_env, &acknowledged));
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  opened->reset();
  Result<std::vector<Entry>> records = Records(&tail_env);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 99u);
  EXPECT_EQ(records->back().lsn, 99u);
  EXPECT_EQ(Bodies(*records).back(), "record-98");
}

// Segments older than the newest: damage there is never a torn tail, and a
// missing segment between two others is a gap. Both are kDataLoss even with
// truncate_damaged_tail, and nothing is changed.
TEST(DurableLogFaultTest, DamageInAnOlderSegmentOrAGapIsDataLoss) {
  for (const bool gap : {false, true}) {
    FaultEnv env;
    std::size_t acknowledged = 0;
    FileDurableLogOptions options = Options(&env, &acknowledged);
    options.segment_bytes = 1;  // every batch its own segment
    {
      auto log = FileDurableLog::Open(kLog, options);
      ASSERT_TRUE(log.ok()) << log.status().message();
      for (int i = 0; i < 4; ++i) {
        const std::string record = "record-" + std::to_string(i);
        Result<LogReservation> r = (*log)->Reserve(record.size());
        ASSERT_TRUE(r.ok());
        ASSERT_TRUE((*log)->Append(*r, record).ok());
        ASSERT_TRUE((*log)->Finalize(*r, {}).ok());
      }
      EXPECT_EQ((*log)->segments(), 4u);
    }
    if (gap) {
      ASSERT_TRUE(env.Remove(SegmentPath(2)).ok());
    } else {
      std::string bytes = env.Contents(SegmentPath(2)).value_or("");
      bytes.back() ^=
          0x01;  // its last (only) record: a "tail", but not the log's
      ASSERT_TRUE(env.SetContents(SegmentPath(2), bytes).ok());
    }
    auto opened = FileDurableLog::Open(kLog, options);
    EXPECT_EQ(opened.status().code(), StatusCode::kDataLoss)
        << opened.status().message();
    EXPECT_EQ(Records(&env).status().code(), StatusCode::kDataLoss);
  }
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
      return (*log)->Finalize(*r, {});
    };
    ASSERT_TRUE(write("first").ok());
    EXPECT_EQ(acknowledged, 1u);
    env.FailCall(1, error, EnvCall::kSync);
    // Finalize reports the failed sync (H5); on_durable did not fire.
    EXPECT_FALSE(write("second").ok());
    EXPECT_EQ(acknowledged, 1u);
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

// The first segment's creation (or the directory's) fails: no headerless
// segment is left behind for every later Open to refuse.
TEST(DurableLogFaultTest, FailedFirstHeaderLeavesNoLog) {
  for (EnvCall call : {EnvCall::kWriteAt, EnvCall::kSync, EnvCall::kRename,
                       EnvCall::kSyncDir, EnvCall::kCreateDir}) {
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
