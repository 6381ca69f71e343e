// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// LogStore against a failing disk (testing/fault_env.h). One seeded
// workload (Set, Del, FlushDb, Flush, Checkpoint, Close and reopen) runs
// once on a healthy disk to count its calls, writes and syncs, then once per
// case with one fault: every call failed in turn, every write torn in turn,
// and a power cut after every sync and at random calls. After each case the
// disk reboots healthy and the store must open and hold exactly the state
// after some prefix of the operations it accepted, at least as long as the
// last one a Flush, Checkpoint or Close acknowledged (the durability promise
// in docs/flush.md). The same check runs at every reopen inside the
// workload. The sweeps run three ways: writes making room inline, with a
// flusher, and with direct I/O, where FaultEnv also fails a case that made
// a misaligned direct call.

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cairn/flush/log_store.h"
#include "gtest/gtest.h"
#include "testing/alloc_counter.h"
#include "testing/fault_env.h"
#include "testing/fault_sweep.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::CutMode;
using testing::EnvCall;
using testing::FaultEnv;
using testing::SweepTally;

constexpr char kStore[] = "/sim/store";
constexpr std::uint32_t kDatabases = 2;
constexpr int kKeys = 24;

using State = std::map<std::pair<std::uint32_t, std::string>, std::string>;

struct Mutation {
  enum class Type : std::uint8_t { kSet, kDel, kFlushDb } type;
  std::uint32_t db;
  std::string key;
  std::string value;
};

void Apply(State* state, const Mutation& m) {
  switch (m.type) {
    case Mutation::Type::kSet:
      (*state)[{m.db, m.key}] = m.value;
      break;
    case Mutation::Type::kDel:
      state->erase({m.db, m.key});
      break;
    case Mutation::Type::kFlushDb:
      std::erase_if(*state,
                    [&](const auto& e) { return e.first.first == m.db; });
      break;
  }
}

// What the store accepted since it was last opened, on top of what that
// open recovered, and how much of it was acknowledged durable.
struct History {
  State base;
  std::vector<Mutation> accepted;
  std::size_t durable = 0;  // accepted[0, durable) are acknowledged

  void Acknowledge() { durable = accepted.size(); }
  // After a reopen that recovered `state`.
  void Restart(State state) {
    base = std::move(state);
    accepted.clear();
    durable = 0;
  }
};

// How the store runs. `flusher`: with host_flusher, and the workload calls
// FlushSealed after every other step, as a host's flusher would (on the
// workload's thread, so that each case is deterministic; a flusher thread
// runs in ConcurrentSetDurableThenPowerCut and in the crash test).
// `direct`: direct_io, whose every write FaultEnv checks for alignment.
struct StoreSetup {
  bool flusher = false;
  bool direct = false;
  std::string Name() const {
    return std::string(flusher ? " (flusher)" : "") +
           (direct ? " (direct I/O)" : "");
  }
};

LogStoreOptions Options(Env* env, bool checkpoint_on_close,
                        StoreSetup setup = {}) {
  const bool flusher = setup.flusher;
  LogStoreOptions options;
  options.env = env;
  options.partitions = 2;
  options.databases = kDatabases;
  // A direct log gets two data pages, not one, so that its flushes
  // start and end inside pages and cross them.
  options.block_bytes = kLogMinBlockBytes + (setup.direct ? 4096 : 0);
  options.max_key_bytes = 16;
  options.max_value_bytes = 1500;
  options.max_sealed_blocks = flusher ? 3 : 2;
  options.host_flusher = flusher;
  options.checkpoint_on_close = checkpoint_on_close;
  options.direct_io = setup.direct;
  return options;
}

std::string Key(int k) { return "key" + std::to_string(k); }

// The store's whole content, by Get of every key the workload uses; a key
// count that disagrees (an entry the workload never wrote) is an error.
Result<State> ReadState(LogStore& store) {
  State state;
  for (std::uint32_t db = 0; db < kDatabases; ++db) {
    std::size_t found = 0;
    for (int k = 0; k < kKeys; ++k) {
      std::string value;
      Status s = store.Get(db, Key(k), &value);
      if (s.code() == StatusCode::kNotFound) continue;
      if (!s.ok()) return s;
      state[{db, Key(k)}] = std::move(value);
      ++found;
    }
    if (store.KeyCount(db) != found) {
      return DataLossError("database " + std::to_string(db) + " holds " +
                           std::to_string(store.KeyCount(db)) +
                           " keys, Get found " + std::to_string(found));
    }
  }
  return state;
}

// Empty if `got` is the state after some prefix of `history` that keeps
// every acknowledged mutation; else what is wrong.
std::string CheckPrefix(const History& history, const State& got) {
  State state = history.base;
  for (std::size_t n = 0;; ++n) {
    if (n >= history.durable && state == got) return {};
    if (n == history.accepted.size()) break;
    Apply(&state, history.accepted[n]);
  }
  return "recovered " + std::to_string(got.size()) +
         " keys, which match no prefix of the " +
         std::to_string(history.accepted.size()) +
         " accepted mutations that keeps the " +
         std::to_string(history.durable) + " acknowledged";
}

// Opens the store and checks what it recovered against `history`, which
// then restarts from it. Empty on success, else the failure.
std::string Reopen(Env* env, bool checkpoint_on_close, StoreSetup setup,
                   History* history, std::unique_ptr<LogStore>* store) {
  store->reset();
  auto opened =
      LogStore::Open(kStore, Options(env, checkpoint_on_close, setup));
  if (!opened.ok()) {
    return "Open failed: " + std::string(opened.status().message());
  }
  Result<State> state = ReadState(**opened);
  if (!state.ok()) {
    // An injected read error says nothing about what the disk holds; a
    // record that fails its checksum does.
    if (state.status().code() != StatusCode::kDataLoss) {
      return "Open failed: cannot read back: " +
             std::string(state.status().message());
    }
    return "reading back failed: " + std::string(state.status().message());
  }
  std::string wrong = CheckPrefix(*history, *state);
  if (!wrong.empty()) return wrong;
  history->Restart(std::move(state).value());
  *store = std::move(opened).value();
  return {};
}

// One run of the seeded workload. A failed reopen inside it ends the run
// (a host cannot go on without its store); a failed check is recorded.
struct WorkloadRun {
  History history;
  std::unique_ptr<LogStore> store;
  std::string failure;  // the first check that failed
  std::size_t acknowledged_checked = 0;
  std::uint64_t blocks_freed = 0;  // by Compact
  std::uint64_t slots_reused = 0;  // at the end of a healthy run
};

void RunWorkload(FaultEnv* env, std::uint64_t seed, WorkloadRun* run,
                 StoreSetup setup) {
  const bool flusher = setup.flusher;
  std::mt19937_64 rng(seed);
  const bool checkpoint_on_close = seed % 2 == 0;
  auto opened =
      LogStore::Open(kStore, Options(env, checkpoint_on_close, setup));
  if (!opened.ok()) return;  // nothing was accepted
  run->store = std::move(opened).value();
  History& history = run->history;
  for (int step = 0; step < 160; ++step) {
    LogStore& store = *run->store;
    // Its error fails the writes that need room, as they will see.
    if (flusher && step % 2 == 1) (void)store.FlushSealed();
    const int dice = static_cast<int>(rng() % 100);
    const auto db = static_cast<std::uint32_t>(rng() % kDatabases);
    const std::string key = Key(static_cast<int>(rng() % kKeys));
    if (dice < 66) {
      std::string value(1 + rng() % 1400, 'a' + static_cast<char>(step % 26));
      value[0] = static_cast<char>('A' + rng() % 26);
      // One Set in six is SetDurable, which acknowledges everything before
      // it as well (the log is a prefix).
      if (dice % 6 == 0) {
        const bool ok = store.SetDurable(db, key, value).ok();
        // A SetDurable whose sync failed has appended: its record is
        // accepted (it may survive) but not acknowledged. Get serves it
        // from memory, with no I/O, if so.
        std::string got;
        if (ok || (store.Get(db, key, &got).ok() && got == value)) {
          history.accepted.push_back({Mutation::Type::kSet, db, key, value});
        }
        if (ok) history.Acknowledge();
      } else if (store.Set(db, key, value).ok()) {
        history.accepted.push_back({Mutation::Type::kSet, db, key, value});
      }
    } else if (dice < 76) {
      if (store.Del(db, key).ok()) {
        history.accepted.push_back({Mutation::Type::kDel, db, key, {}});
      }
    } else if (dice < 78) {
      if (store.FlushDb(db).ok()) {
        history.accepted.push_back({Mutation::Type::kFlushDb, db, {}, {}});
      }
    } else if (dice < 84) {
      if (store.Flush().ok()) history.Acknowledge();
    } else if (dice < 90) {
      // Compaction: copies live records to the head, syncs, frees blocks
      // whose slots the next blocks reuse. It acknowledges nothing itself.
      CompactOptions compact;
      compact.max_live_fraction = 1.0;
      compact.max_blocks = 4;
      CompactReport report;
      if (store.Compact(compact, &report).ok()) {
        run->blocks_freed += report.blocks_freed;
      }
    } else if (dice < 95) {
      if (store.Checkpoint().ok()) history.Acknowledge();
    } else {
      if (store.Close().ok()) history.Acknowledge();
      const std::size_t acknowledged = history.durable;
      std::string wrong =
          Reopen(env, checkpoint_on_close, setup, &history, &run->store);
      if (run->store == nullptr) {
        if (run->failure.empty() && !wrong.starts_with("Open failed")) {
          run->failure = wrong;
        }
        return;
      }
      run->acknowledged_checked += acknowledged;
      if (!wrong.empty() && run->failure.empty()) run->failure = wrong;
    }
  }
  // Slots reused: more blocks were opened than the file has slots.
  const LogStoreSpace space = run->store->Space();
  if (!space.blocks.empty() && space.blocks.back().block + 1 > space.slots) {
    run->slots_reused = space.blocks.back().block + 1 - space.slots;
  }
  if (run->store->Close().ok()) history.Acknowledge();
}

enum class Ending : std::uint8_t { kKill, kPowerCut };

// After the workload: the process dies (or the power is cut), the disk
// reboots healthy, and the store must open and pass the prefix check. A
// direct write that broke O_DIRECT's alignment rule fails the case too,
// even if the store survived the error it got.
std::string Finish(FaultEnv* env, WorkloadRun* run, Ending ending, CutMode mode,
                   StoreSetup setup) {
  if (ending == Ending::kKill) {
    env->Kill();
  } else if (!env->dead()) {
    env->PowerCut(mode);
  }
  run->store.reset();  // its Close fails: the process is gone
  env->Reboot();
  run->acknowledged_checked += run->history.durable;
  std::unique_ptr<LogStore> store;
  std::string wrong = Reopen(env, true, setup, &run->history, &store);
  if (!run->failure.empty()) return run->failure;
  if (env->misaligned() != 0) {
    return std::to_string(env->misaligned()) + " misaligned direct I/O calls";
  }
  return wrong;
}

constexpr std::uint64_t kSeed = 7;
constexpr int kErrors[] = {EIO, ENOSPC, EDQUOT};
// TSan runs these single-threaded sweeps about 50 times slower than a
// release build and finds nothing more in them: it takes every 5th case
// (release and ASan+UBSan run them all).
constexpr std::uint64_t kStride = testing::kUnderTsan ? 5 : 1;
constexpr CutMode kModes[] = {CutMode::kDropUnsynced, CutMode::kTearUnsynced,
                              CutMode::kGarbageUnsynced};

struct Counts {
  std::uint64_t calls, writes, syncs;
};

Counts CountHealthyRun(StoreSetup setup) {
  FaultEnv env;
  WorkloadRun run;
  RunWorkload(&env, kSeed, &run, setup);
  Counts counts{env.calls(), env.writes(), env.syncs()};
  EXPECT_EQ(run.failure, "");
  // The sweeps cover compaction: blocks freed and their slots reused.
  EXPECT_GE(run.blocks_freed, 3u);
  EXPECT_GE(run.slots_reused, 2u);
  std::printf(
      "[ sweep    ] the workload frees %llu blocks by Compact; %llu "
      "slots reused\n",
      static_cast<unsigned long long>(run.blocks_freed),
      static_cast<unsigned long long>(run.slots_reused));
  EXPECT_EQ(Finish(&env, &run, Ending::kKill, CutMode::kDropUnsynced, setup),
            "");
  return counts;
}

void SweepEveryCallFailed(StoreSetup setup) {
  const Counts counts = CountHealthyRun(setup);
  SweepTally tally("LogStore", std::string("every call failed") + setup.Name());
  for (std::uint64_t i = 1; i <= counts.calls; i += kStride) {
    for (Ending ending : {Ending::kKill, Ending::kPowerCut}) {
      FaultEnv env(i);
      env.FailCall(i, kErrors[i % 3]);
      WorkloadRun run;
      RunWorkload(&env, kSeed, &run, setup);
      const std::string failure =
          Finish(&env, &run, ending, CutMode::kDropUnsynced, setup);

      tally.Add("call " + std::to_string(i) +
                    (ending == Ending::kKill ? " then kill" : " then cut"),
                run.acknowledged_checked, failure);
    }
  }
  std::printf("[ sweep    ] the workload makes %llu calls\n",
              static_cast<unsigned long long>(counts.calls));
  tally.Report();
}

void SweepEveryWriteTorn(StoreSetup setup) {
  const Counts counts = CountHealthyRun(setup);
  SweepTally tally("LogStore", std::string("every write torn") + setup.Name());
  for (std::uint64_t i = 1; i <= counts.writes; i += kStride) {
    FaultEnv env(i);
    std::mt19937_64 rng(i);
    env.TearWrite(i, rng() % 6000);
    WorkloadRun run;
    RunWorkload(&env, kSeed, &run, setup);
    const std::string failure =
        Finish(&env, &run, Ending::kPowerCut, kModes[i % 3], setup);

    tally.Add("write " + std::to_string(i), run.acknowledged_checked, failure);
  }
  std::printf("[ sweep    ] the workload makes %llu writes\n",
              static_cast<unsigned long long>(counts.writes));
  tally.Report();
}

void SweepPowerCuts(StoreSetup setup) {
  const Counts counts = CountHealthyRun(setup);
  SweepTally tally("LogStore", std::string("power cut") + setup.Name());
  for (std::uint64_t i = 1; i <= counts.syncs; i += kStride) {
    for (CutMode mode : kModes) {
      FaultEnv env(i);
      env.CutAfterSync(i, mode);
      WorkloadRun run;
      RunWorkload(&env, kSeed, &run, setup);
      const std::string failure =
          Finish(&env, &run, Ending::kPowerCut, mode, setup);

      tally.Add("cut after sync " + std::to_string(i) + " (" +
                    testing::CutModeName(mode) + ")",
                run.acknowledged_checked, failure);
    }
  }
  const auto random_cuts =
      static_cast<std::size_t>(1000 * testing::StressScale() / kStride);
  std::mt19937_64 rng(kSeed);
  for (std::size_t c = 0; c < random_cuts; ++c) {
    const std::uint64_t at = 1 + rng() % counts.calls;
    const CutMode mode = kModes[c % 3];
    FaultEnv env(c);
    env.CutAtCall(at, mode);
    WorkloadRun run;
    RunWorkload(&env, kSeed, &run, setup);
    const std::string failure =
        Finish(&env, &run, Ending::kPowerCut, mode, setup);

    tally.Add("cut at call " + std::to_string(at) + " (" +
                  testing::CutModeName(mode) + ")",
              run.acknowledged_checked, failure);
  }
  std::printf("[ sweep    ] the workload makes %llu syncs\n",
              static_cast<unsigned long long>(counts.syncs));
  tally.Report();
}

// A sync fails, then the power is cut at each of the calls that follow it
// (the retry's writes among them), with unsynced bytes turned to garbage:
// the retry must not put the last durable header at risk (it rewrites the
// header slot the failed attempt used, never the other one).
void SweepFailedSyncThenCut(StoreSetup setup) {
  FaultEnv healthy;
  {
    WorkloadRun run;
    RunWorkload(&healthy, kSeed, &run, setup);
  }
  const std::vector<EnvCall> journal = healthy.journal();
  SweepTally tally("LogStore",
                   std::string("failed sync, then cut") + setup.Name());
  constexpr std::uint64_t kWindow = 12;
  std::uint64_t syncs = 0;
  for (std::uint64_t at = 1; at <= journal.size(); ++at) {
    if (journal[at - 1] != EnvCall::kSync || syncs++ % kStride != 0) continue;
    for (std::uint64_t later = 1; later <= kWindow; ++later) {
      FaultEnv env(at * kWindow + later);
      env.FailCall(at, EIO);
      env.CutAtCall(at + later, CutMode::kGarbageUnsynced);
      WorkloadRun run;
      RunWorkload(&env, kSeed, &run, setup);
      const std::string failure = Finish(&env, &run, Ending::kPowerCut,
                                         CutMode::kGarbageUnsynced, setup);

      tally.Add("sync at call " + std::to_string(at) + " failed, cut " +
                    std::to_string(later) + " calls later",
                run.acknowledged_checked, failure);
    }
  }
  tally.Report();
}

constexpr StoreSetup kFlusher{.flusher = true};
// Direct I/O under the same sweeps: every write checked for alignment, the
// page-start rewrites and the zero padding under every fault.
constexpr StoreSetup kDirect{.direct = true};

TEST(LogStoreFaultTest, EveryCallFailedInTurn) { SweepEveryCallFailed({}); }
TEST(LogStoreFaultTest, EveryCallFailedInTurnWithFlusher) {
  SweepEveryCallFailed(kFlusher);
}
TEST(LogStoreFaultTest, EveryCallFailedInTurnDirectIo) {
  SweepEveryCallFailed(kDirect);
}
TEST(LogStoreFaultTest, EveryWriteTornInTurn) { SweepEveryWriteTorn({}); }
TEST(LogStoreFaultTest, EveryWriteTornInTurnWithFlusher) {
  SweepEveryWriteTorn(kFlusher);
}
TEST(LogStoreFaultTest, EveryWriteTornInTurnDirectIo) {
  SweepEveryWriteTorn(kDirect);
}
TEST(LogStoreFaultTest, PowerCutAfterEverySyncAndAtRandomCalls) {
  SweepPowerCuts({});
}
TEST(LogStoreFaultTest, PowerCutAfterEverySyncAndAtRandomCallsWithFlusher) {
  SweepPowerCuts(kFlusher);
}
TEST(LogStoreFaultTest, PowerCutAfterEverySyncAndAtRandomCallsDirectIo) {
  SweepPowerCuts(kDirect);
}
TEST(LogStoreFaultTest, FailedSyncThenPowerCutAtEachLaterCall) {
  SweepFailedSyncThenCut({});
}
TEST(LogStoreFaultTest, FailedSyncThenPowerCutAtEachLaterCallWithFlusher) {
  SweepFailedSyncThenCut(kFlusher);
}
TEST(LogStoreFaultTest, FailedSyncThenPowerCutAtEachLaterCallDirectIo) {
  SweepFailedSyncThenCut(kDirect);
}

// Concurrent durable writers, then a power cut: four threads call
// SetDurable on keys of their own with increasing values (group commit
// shares their syncs) until the power is cut at a random call, in each of
// the three modes (every third round with direct I/O); every other round a
// flusher thread (RunFlusher) flushes
// the sealed blocks beside them, and in half the rounds another thread
// checkpoints in a loop while they write (X11: the copy races the writers,
// the cut may fall in its flush or its file). After reboot every key holds
// its last acknowledged value or a later one that thread wrote, never an
// older one or a missing key.
TEST(LogStoreFaultTest, ConcurrentSetDurableThenPowerCut) {
  constexpr int kThreads = 4;
  constexpr int kKeysPerThread = 5;
  const int rounds =
      static_cast<int>(60 * testing::StressScale() / kStride) + 1;
  SweepTally tally("LogStore", "concurrent SetDurable, then cut");
  std::mt19937_64 rng(kSeed);
  for (int round = 0; round < rounds; ++round) {
    FaultEnv env(static_cast<std::uint64_t>(round) + 1);
    const CutMode mode = kModes[round % 3];
    std::string failure;
    // acked[t][k]: the index of thread t's last acknowledged write of key
    // k, -1 if none.
    std::vector<std::vector<int>> acked(kThreads,
                                        std::vector<int>(kKeysPerThread, -1));
    const bool with_flusher = round % 2 == 1;
    // Every third round writes with direct I/O (the reopen reads it back
    // buffered, as any later Open may).
    const StoreSetup setup{.flusher = with_flusher, .direct = round % 3 == 2};
    {
      auto opened = LogStore::Open(kStore, Options(&env, true, setup));
      ASSERT_TRUE(opened.ok()) << opened.status().message();
      std::unique_ptr<LogStore> store = std::move(opened).value();
      // Returns the cut's error, or OK once stopped; joined before the
      // store goes.
      std::jthread flusher;
      if (with_flusher) {
        flusher = std::jthread(
            [&store](std::stop_token stop) { (void)store->RunFlusher(stop); });
      }
      env.CutAtCall(20 + rng() % 300, mode);
      std::atomic<bool> writers_done{false};
      std::thread checkpointer;
      if (round % 4 >= 2) {
        checkpointer = std::thread([&] {
          while (!env.dead() && !writers_done.load()) {
            (void)store->Checkpoint();
          }
        });
      }
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          for (int i = 0; i < 400 && !env.dead(); ++i) {
            const int k = i % kKeysPerThread;
            // The value names its writer and index, padded to 100-900 B.
            std::string value = std::to_string(t) + ":" + std::to_string(i) +
                                ":" + std::string(100 + (i * 37) % 800, 'v');
            if (store
                    ->SetDurable(
                        t % kDatabases,
                        "t" + std::to_string(t) + "-" + std::to_string(k),
                        value)
                    .ok()) {
              acked[t][k] = i;
            }
          }
        });
      }
      for (auto& th : threads) th.join();
      writers_done = true;
      if (checkpointer.joinable()) checkpointer.join();
      if (!env.dead()) env.PowerCut(mode);
      if (flusher.joinable()) {
        flusher.request_stop();
        flusher.join();
      }
      store.reset();
    }
    env.Reboot();
    auto reopened = LogStore::Open(kStore, Options(&env, true));
    std::size_t checked = 0;
    if (!reopened.ok()) {
      failure = "Open failed: " + std::string(reopened.status().message());
    } else if (env.misaligned() != 0) {
      failure =
          std::to_string(env.misaligned()) + " misaligned direct I/O calls";
    }
    for (int t = 0; t < kThreads && failure.empty(); ++t) {
      for (int k = 0; k < kKeysPerThread && failure.empty(); ++k) {
        if (acked[t][k] < 0) continue;
        ++checked;
        const std::string key =
            "t" + std::to_string(t) + "-" + std::to_string(k);
        std::string got;
        Status s = (*reopened)->Get(t % kDatabases, key, &got);
        const std::string prefix = std::to_string(t) + ":";
        int index = -1;
        if (s.ok() && got.starts_with(prefix)) {
          index = std::atoi(got.c_str() + prefix.size());
        }
        if (index < acked[t][k] || index % kKeysPerThread != k) {
          failure = key + ": acknowledged write " +
                    std::to_string(acked[t][k]) + ", found " +
                    (s.ok() ? "write " + std::to_string(index)
                            : std::string(s.message()));
        }
      }
    }
    tally.Add("round " + std::to_string(round) + " (" +
                  testing::CutModeName(mode) + ")",
              checked, failure);
  }
  tally.Report();
}

// A full disk: once max_sealed_blocks full blocks wait and their flush
// fails, writes fail with the disk's error (appending nothing) until a
// flush succeeds, so memory stays bounded and no write is acknowledged
// that cannot become durable.
TEST(LogStoreFaultTest, FullDiskFailsWritesPastTheSealedBlockLimit) {
  FaultEnv env;
  const LogStoreOptions options = Options(&env, false);
  auto opened = LogStore::Open(kStore, options);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  std::unique_ptr<LogStore> store = std::move(opened).value();
  ASSERT_TRUE(store->Set(0, "before", "1").ok());
  ASSERT_TRUE(store->Flush().ok());

  env.FailFrom(1, ENOSPC, EnvCall::kWriteAt);
  const std::string value(1000, 'x');
  int accepted = 0;
  Status refused;
  for (int i = 0; i < 1000 && refused.ok(); ++i) {
    refused = store->Set(1, Key(i % kKeys), value);
    if (refused.ok()) ++accepted;
  }
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted)
      << refused.message();
  // At most max_sealed_blocks full blocks and the one being filled.
  const std::size_t per_block = LogDataBytes(options.block_bytes) /
                                LogRecordBytes(Key(0).size(), value.size());
  EXPECT_LE(static_cast<std::size_t>(accepted),
            (options.max_sealed_blocks + 1) * per_block);
  EXPECT_EQ(store->Set(1, "more", value).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(store->Del(0, "before").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(store->FlushDb(0).code(), StatusCode::kResourceExhausted);

  env.ClearFaults();  // space freed
  ASSERT_TRUE(store->Set(1, "after", "2").ok());
  ASSERT_TRUE(store->Close().ok());
  store.reset();
  opened = LogStore::Open(kStore, options);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  std::string got;
  EXPECT_TRUE((*opened)->Get(0, "before", &got).ok());
  EXPECT_TRUE((*opened)->Get(1, "after", &got).ok());
  EXPECT_EQ((*opened)->KeyCount(1), std::min<std::size_t>(accepted, kKeys) + 1);
}

TEST(LogStoreFaultTest, SecondOpenerIsRefused) {
  FaultEnv env;
  auto first = LogStore::Open(kStore, Options(&env, true));
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = LogStore::Open(kStore, Options(&env, true));
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition)
      << second.status().message();
  first->reset();
  EXPECT_TRUE(LogStore::Open(kStore, Options(&env, true)).ok());
}

// The first Open makes the store directory and fails to sync its parent;
// the retry finds the directory there and must still sync the parent, or a
// power cut takes the store, and what its Flush acknowledged, with it. A
// trailing slash names the same store.
TEST(LogStoreFaultTest, RetriedOpenStillSyncsTheNewDirectorysEntry) {
  FaultEnv env;
  env.FailCall(1, EIO, EnvCall::kSyncDir);
  EXPECT_FALSE(LogStore::Open(kStore, Options(&env, true)).ok());
  {
    auto opened =
        LogStore::Open(std::string(kStore) + "/", Options(&env, true));
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    ASSERT_TRUE((*opened)->Set(0, "k", "v").ok());
    ASSERT_TRUE((*opened)->Flush().ok());
    env.PowerCut(CutMode::kDropUnsynced);
  }
  env.Reboot();
  auto reopened = LogStore::Open(kStore, Options(&env, true));
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  std::string value;
  EXPECT_TRUE((*reopened)->Get(0, "k", &value).ok());
  EXPECT_FALSE((*reopened)->recovery().created);
}

// The first write of a new store (the log header) fails: no half-made log
// is left behind, and the next Open makes a good one.
TEST(LogStoreFaultTest, FailedLogHeaderLeavesNoLog) {
  for (int error : kErrors) {
    FaultEnv env;
    env.FailCall(1, error, EnvCall::kWriteAt);
    EXPECT_FALSE(LogStore::Open(kStore, Options(&env, true)).ok());
    auto opened = LogStore::Open(kStore, Options(&env, true));
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    EXPECT_TRUE((*opened)->recovery().created);
  }
}

// Out of memory while the store closes (in its destructor, which is
// noexcept): the first k allocations fail, for every k up to well past the
// number Close makes. Nothing escapes, no lock is left held, and every
// record an earlier Flush acknowledged is there after reopening.
TEST(LogStoreFaultTest, OutOfMemoryInCloseNeverEscapesTheDestructor) {
  for (int k = 1; k <= 60; ++k) {
    FaultEnv env;
    for (bool checkpoint : {true, false}) {
      {
        auto opened = LogStore::Open(kStore, Options(&env, checkpoint));
        ASSERT_TRUE(opened.ok()) << opened.status().message();
        ASSERT_TRUE((*opened)->Set(0, "durable", std::to_string(k)).ok());
        ASSERT_TRUE((*opened)->Flush().ok());
        ASSERT_TRUE((*opened)->Set(1, "pending", "x").ok());
        testing::FailNextAllocationsOnThisThread(k);
        opened->reset();
        testing::FailNextAllocationsOnThisThread(0);
      }
      auto reopened = LogStore::Open(kStore, Options(&env, checkpoint));
      ASSERT_TRUE(reopened.ok()) << reopened.status().message();
      std::string value;
      ASSERT_TRUE((*reopened)->Get(0, "durable", &value).ok()) << k;
      EXPECT_EQ(value, std::to_string(k));
    }
  }
}

}  // namespace
}  // namespace cairn
