// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The crash test (X10): a child process (crash_child.cc) applies a random
// operation stream to a LogStore on a real file and is killed with SIGKILL
// at a random moment, often inside a flush. The parent then opens the
// store, which recovers, and checks that its whole state equals the model's
// state after some prefix of the stream that contains every operation the
// child acknowledged as durable: no acknowledged record is lost, every
// value is exact, and no torn or corrupt record is indexed. Each round
// continues from the recovered state.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cairn/flush/log_store.h"
#include "flush/crash_ops.h"
#include "flush/flush_testing.h"
#include "testing/child_process.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::CrashOp;
using testing::CrashOpStream;
using testing::kCrashDatabases;
using testing::kCrashKeys;

using State = std::map<std::pair<std::uint32_t, std::string>, std::string>;

LogStoreOptions ParentOptions() {
  LogStoreOptions o;
  o.partitions = 3;  // recovery re-partitions; the child uses 4
  o.databases = kCrashDatabases;
  o.block_bytes = 64 * 1024;
  o.max_value_bytes = 8192;
  o.sync = false;
  return o;
}

State ReadAll(LogStore& store) {
  State out;
  for (std::uint32_t db = 0; db < kCrashDatabases; ++db) {
    for (int k = 0; k < kCrashKeys; ++k) {
      const std::string key = "k" + std::to_string(k);
      std::string value;
      Status s = store.Get(db, key, &value);
      if (s.ok()) {
        out[{db, key}] = value;
      } else {
        EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.message();
      }
    }
  }
  return out;
}

// Finds n >= acked such that `start` with the first n operations of `seed`
// applied equals `recovered`; returns -1 if none up to `limit`. Keeps a
// count of differing keys so each operation costs O(keys it touches).
std::int64_t MatchPrefix(const State& start, const State& recovered,
                         std::uint64_t seed, std::uint64_t acked,
                         std::uint64_t limit) {
  State model = start;
  auto differs = [&](const std::pair<std::uint32_t, std::string>& k) {
    auto a = model.find(k);
    auto b = recovered.find(k);
    if (a == model.end() || b == recovered.end()) {
      return (a == model.end()) != (b == recovered.end());
    }
    return a->second != b->second;
  };
  std::int64_t diff = 0;
  for (std::uint32_t db = 0; db < kCrashDatabases; ++db) {
    for (int k = 0; k < kCrashKeys; ++k)
      diff += differs({db, "k" + std::to_string(k)});
  }
  CrashOpStream ops(seed);
  for (std::uint64_t n = 0;; ++n) {
    if (n >= acked && diff == 0) return static_cast<std::int64_t>(n);
    if (n >= limit) return -1;
    const CrashOp op = ops.Next();
    auto change = [&](const std::pair<std::uint32_t, std::string>& k,
                      auto&& fn) {
      diff -= differs(k);
      fn();
      diff += differs(k);
    };
    switch (op.kind) {
      case CrashOp::kSet:
        change({op.db, op.key}, [&] { model[{op.db, op.key}] = op.value; });
        break;
      case CrashOp::kDel:
        change({op.db, op.key}, [&] { model.erase({op.db, op.key}); });
        break;
      case CrashOp::kFlushDb:
        for (int k = 0; k < kCrashKeys; ++k) {
          change({op.db, "k" + std::to_string(k)}, [&] {
            model.erase({op.db, "k" + std::to_string(k)});
          });
        }
        break;
      case CrashOp::kFlush:
      case CrashOp::kCheckpoint:
        break;
    }
  }
}

TEST(LogStoreCrashTest, X10AcknowledgedRecordsSurviveSigkill) {
  testing::ScratchDir dir;
  const std::string store_dir = dir.File("store");
  std::mt19937_64 rng(std::random_device{}());
  const std::uint64_t base_seed = rng();
  const int rounds = testing::StressIterations(10);
  State state;
  int torn = 0;
  int reused = 0;
  int flusher_rounds = 0;
  std::uint64_t acked_total = 0;
  for (int round = 0; round < rounds; ++round) {
    const std::uint64_t seed = base_seed + static_cast<std::uint64_t>(round);
    SCOPED_TRACE("round " + std::to_string(round) + " seed " +
                 std::to_string(seed));
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const std::string seed_arg = std::to_string(seed);
    const std::string fd_arg = std::to_string(fds[1]);
    const char* mode = round % 3 == 2 ? "watermark" : "receipts";
    const char* sync = round % 2 == 0 ? "1" : "0";
    // A flusher thread in the child every other pair of rounds.
    const char* flusher = round % 4 >= 2 ? "1" : "0";
    flusher_rounds += round % 4 >= 2;
    testing::ChildProcess child(
        CAIRN_FLUSH_CRASH_CHILD,
        {store_dir, seed_arg, fd_arg, mode, sync, flusher}, fds[0]);
    ASSERT_TRUE(child.started());
    ::close(fds[1]);
    // Let it run a random while (often mid-flush), then kill it. Most
    // rounds first wait for its first acknowledged flush, so that slow
    // (sanitizer) builds make progress too; every fourth round may kill
    // it before that, even while it recovers.
    std::uint64_t acked = 0;
    if (round % 4 != 3) {
      pollfd poll_fd{fds[0], POLLIN, 0};
      ASSERT_EQ(::poll(&poll_fd, 1, 60000), 1) << "no flush within 60 s";
      ASSERT_EQ(::read(fds[0], &acked, sizeof(acked)),
                static_cast<ssize_t>(sizeof(acked)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 120));
    int wstatus = 0;
    ASSERT_TRUE(child.Kill(&wstatus))
        << "the child failed on its own, status " << wstatus;
    std::uint64_t ack;
    while (::read(fds[0], &ack, sizeof(ack)) == sizeof(ack))
      acked = std::max(acked, ack);
    ::close(fds[0]);

    // Every other round the parent closes without a checkpoint, so the
    // next recovery replays more of the log.
    LogStoreOptions options = ParentOptions();
    options.checkpoint_on_close = round % 2 == 0;
    auto store = LogStore::Open(store_dir, options);
    ASSERT_TRUE(store.ok()) << store.status().message();
    torn += (*store)->recovery().torn_tail_bytes > 0;
    {
      // The child's compaction thread freed blocks whose slots later
      // blocks reused: more blocks were opened than the file has slots.
      const LogStoreSpace space = (*store)->Space();
      reused += space.blocks.back().block + 1 > space.slots;
    }
    const State recovered = ReadAll(**store);
    const std::int64_t n =
        MatchPrefix(state, recovered, seed, acked, acked + 5'000'000);
    ASSERT_GE(n, 0) << "recovered state is no prefix of the stream holding the "
                    << acked << " acknowledged operations";
    acked_total += acked;
    state = recovered;
  }
  std::printf(
      "crash test: %d rounds (%d with a flusher thread), %d with a torn "
      "tail, %d with reused block slots, %llu operations acknowledged\n",
      rounds, flusher_rounds, torn, reused,
      static_cast<unsigned long long>(acked_total));
  // A child that acknowledged this much filled blocks enough for its
  // compaction to free some (10 of 11 rounds reuse slots in a release
  // build); a TSan child, about 50 times slower, may not get that far.
  if (acked_total > 3000) {
    EXPECT_GT(reused, 0) << "compaction in the child never reused a slot";
  }
  EXPECT_GT(acked_total, 0u) << "the child never acknowledged a flush";
}

}  // namespace
}  // namespace cairn
