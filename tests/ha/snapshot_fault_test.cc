// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Snapshots against a failing disk (testing/fault_env.h). A directory is
// snapshotted once (the old snapshot), changed, and snapshotted again over
// the same path with one fault: every call failed in turn, every write
// torn, a power cut after every sync and at every call. After the disk
// reboots, the path must restore to the old snapshot or the new one, whole
// (the new one if its WriteSnapshot returned OK), never to a mix or
// nothing. Restore itself is run with every call failed in turn: it fails
// with an error or gives back the whole snapshot.

#include <cerrno>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cairn/directory/group_directory.h"
#include "cairn/ha/snapshot.h"
#include "directory/directory_testing.h"
#include "gtest/gtest.h"
#include "testing/fault_env.h"
#include "testing/fault_sweep.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::CutMode;
using testing::FaultEnv;
using testing::Key;
using testing::Sized;
using testing::SweepTally;
using Dir = GroupDirectory<>;
using Handle = ObjectHandle<EmptyPayload>;
using View = ObjectView<EmptyPayload>;

constexpr char kSnapshot[] = "/sim/directory.snap";

// key -> (size, group)
using Contents = std::map<std::string, std::pair<std::uint64_t, std::string>>;

Contents Read(const Dir& dir) {
  Contents out;
  EXPECT_TRUE(
      dir.VisitHandles([&](std::span<const Handle> handles) {
           for (const Handle& h : handles) {
             const std::string group = h->group() != nullptr
                                           ? std::string(h->group()->name())
                                           : std::string();
             EXPECT_TRUE(
                 dir.WithHandle(
                        h,
                        [&](const View& v) {
                          out[std::string(v.key())] = {v.size_bytes(), group};
                        })
                     .ok());
           }
         })
          .ok());
  return out;
}

// The old state: 300 objects, some in groups; the new one erases a sixth
// of them and adds 40.
void FillOld(Dir* dir) {
  for (int i = 0; i < 300; ++i) {
    const std::string group = i % 4 == 0 ? "g" + std::to_string(i % 3) : "";
    ASSERT_TRUE(dir->Create(Key("k", i), Sized(100 + i, group)).ok());
  }
}
void ChangeToNew(Dir* dir) {
  for (int i = 0; i < 300; i += 3) {
    if (i % 4 != 0) {
      ASSERT_TRUE(dir->Erase(Key("k", i)).ok());
    }
  }
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(dir->Create(Key("n", i), Sized(7 * i + 1)).ok());
  }
}

Status Write(const Dir& dir, Env* env) {
  SnapshotWriteOptions options;
  options.env = env;
  return WriteSnapshot(dir, kSnapshot, {}, options);
}

Result<Contents> Restore(Env* env) {
  auto restored =
      RestoreSnapshot<EmptyPayload>(kSnapshot, {}, {}, nullptr, env);
  if (!restored.ok()) return restored.status();
  return Read(**restored);
}

struct States {
  Contents old_state, new_state;
};

States MakeStates() {
  Dir dir;
  FillOld(&dir);
  States s;
  s.old_state = Read(dir);
  ChangeToNew(&dir);
  s.new_state = Read(dir);
  return s;
}

// One case: old snapshot written healthy, then `arm`, then the new one.
template <typename Arm>
std::string RunCase(std::uint64_t seed, Arm&& arm, CutMode mode,
                    const States& states) {
  FaultEnv env(seed);
  Dir dir;
  FillOld(&dir);
  if (Status s = Write(dir, &env); !s.ok()) {
    return "old snapshot: " + std::string(s.message());
  }
  ChangeToNew(&dir);
  arm(env);
  const bool written = Write(dir, &env).ok();
  if (!env.dead()) env.PowerCut(mode);
  env.Reboot();
  Result<Contents> got = Restore(&env);
  if (!got.ok())
    return "restore failed: " + std::string(got.status().message());
  if (*got == states.new_state) return {};
  if (*got == states.old_state && !written) return {};
  return written ? "WriteSnapshot returned OK but the old snapshot came back"
                 : "restored neither the old snapshot nor the new one";
}

struct Counts {
  std::uint64_t calls, writes, syncs;
};

// The calls, writes and syncs of writing the new snapshot.
Counts CountNewSnapshotWrite() {
  FaultEnv env;
  Dir dir;
  FillOld(&dir);
  EXPECT_TRUE(Write(dir, &env).ok());
  ChangeToNew(&dir);
  const Counts before{env.calls(), env.writes(), env.syncs()};
  EXPECT_TRUE(Write(dir, &env).ok());
  return Counts{env.calls() - before.calls, env.writes() - before.writes,
                env.syncs() - before.syncs};
}

constexpr int kErrors[] = {EIO, ENOSPC, EDQUOT};
constexpr CutMode kModes[] = {CutMode::kDropUnsynced, CutMode::kTearUnsynced,
                              CutMode::kGarbageUnsynced};

TEST(SnapshotFaultTest, WriteWithEveryCallFailedTornOrCut) {
  const States states = MakeStates();
  const Counts counts = CountNewSnapshotWrite();
  SweepTally failed("snapshot", "write, every call failed");
  SweepTally torn("snapshot", "write, every write torn");
  SweepTally cut("snapshot",
                 "write, power cut at every call and after every sync");
  for (std::uint64_t i = 1; i <= counts.calls; ++i) {
    for (CutMode mode : kModes) {
      failed.Add("call " + std::to_string(i),
                 /*acknowledged_checked=*/1,
                 RunCase(
                     i, [&](FaultEnv& env) { env.FailCall(i, kErrors[i % 3]); },
                     mode, states));
    }
  }
  // Every call, cut in every mode, each with many seeds: the torn and
  // garbage modes differ by seed.
  const auto cuts = static_cast<std::uint64_t>(1000 * testing::StressScale());
  for (std::uint64_t c = 0; c < cuts; ++c) {
    const std::uint64_t at = 1 + c % counts.calls;
    const CutMode mode = kModes[(c / counts.calls) % 3];
    cut.Add(
        "cut at call " + std::to_string(at) + " (seed " + std::to_string(c) +
            ")",
        /*acknowledged_checked=*/1,
        RunCase(
            c, [&](FaultEnv& env) { env.CutAtCall(at, mode); }, mode, states));
  }
  for (std::uint64_t i = 1; i <= counts.writes; ++i) {
    for (std::size_t keep : {0, 1, 100, 4096}) {
      torn.Add("write " + std::to_string(i),
               /*acknowledged_checked=*/1,
               RunCase(
                   i, [&](FaultEnv& env) { env.TearWrite(i, keep); },
                   kModes[i % 3], states));
    }
  }
  for (std::uint64_t i = 1; i <= counts.syncs; ++i) {
    for (CutMode mode : kModes) {
      cut.Add("cut after sync " + std::to_string(i),
              /*acknowledged_checked=*/1,
              RunCase(
                  i, [&](FaultEnv& env) { env.CutAfterSync(i, mode); }, mode,
                  states));
    }
  }
  std::printf(
      "[ sweep    ] writing a snapshot makes %llu calls, %llu writes, "
      "%llu syncs\n",
      static_cast<unsigned long long>(counts.calls),
      static_cast<unsigned long long>(counts.writes),
      static_cast<unsigned long long>(counts.syncs));
  failed.Report();
  torn.Report();
  cut.Report();
}

TEST(SnapshotFaultTest, RestoreWithEveryCallFailed) {
  const States states = MakeStates();
  FaultEnv env;
  {
    Dir dir;
    FillOld(&dir);
    ChangeToNew(&dir);
    ASSERT_TRUE(Write(dir, &env).ok());
  }
  const std::uint64_t before = env.calls();
  ASSERT_TRUE(Restore(&env).ok());
  const std::uint64_t calls = env.calls() - before;
  SweepTally tally("snapshot", "restore, every call failed");
  for (std::uint64_t i = 1; i <= calls; ++i) {
    env.FailCall(i, kErrors[i % 3]);
    Result<Contents> got = Restore(&env);
    env.ClearFaults();
    std::string failure;
    if (got.ok() && *got != states.new_state) {
      failure = "restored a partial directory";
    }
    tally.Add("call " + std::to_string(i), 1, failure);
  }
  tally.Report();
}

}  // namespace
}  // namespace cairn
