// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The flusher (LogStoreOptions::host_flusher, FlushSealed, RunFlusher):
// sealed blocks wait for the host's flusher instead of the writer that
// filled them; a write waits only at max_sealed_blocks and is counted; the
// flusher's error reaches the writers; and a stress of writers, readers,
// the flusher thread and Compact (run under TSan in CI).

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cairn/base/metrics.h"
#include "cairn/flush/log_store.h"
#include "flush/flush_testing.h"
#include "gtest/gtest.h"
#include "testing/fault_env.h"
#include "testing/metrics_text.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FaultEnv;
using testing::ScratchDir;
using testing::SyncGateEnv;
using testing_internal::ParsedExposition;
using testing_internal::ParseExposition;

constexpr std::size_t kBlock = 64 * 1024;
constexpr std::size_t kValueBytes = 1000;

LogStoreOptions FlusherOptions(Env* env) {
  LogStoreOptions o;
  o.partitions = 4;
  o.databases = 2;
  o.block_bytes = kBlock;
  o.max_value_bytes = 8192;
  o.sync = true;
  o.env = env;
  o.host_flusher = true;
  o.max_sealed_blocks = 2;
  o.checkpoint_on_close = false;
  return o;
}

double Metric(const LogStore& store, const char* name) {
  PrometheusRenderer r;
  store.VisitMetrics(r);
  const ParsedExposition p = ParseExposition(r.Finish());
  EXPECT_TRUE(p.error.empty()) << p.error;
  return p.Value(name, std::vector<std::pair<std::string, std::string>>{});
}

double Sealed(const LogStore& store) {
  return Metric(store, "cairn_logstore_sealed_blocks");
}

std::string Key(int i) { return "key" + std::to_string(i); }

// Writes 1000-byte values under fresh keys from *next on until `sealed`
// full blocks wait (each call returns, so this must never wait for room).
void FillUntilSealed(LogStore& store, int* next, double sealed) {
  const std::string value(kValueBytes, 'v');
  while (Sealed(store) < sealed) {
    ASSERT_TRUE(store.Set(0, Key((*next)++), value).ok());
  }
}

// FlushSealed writes the waiting full blocks and releases them; with none
// waiting it does no I/O. Sealing alone (under the limit) never flushes.
// Planted bug: FlushSealed returning before the flush when blocks wait
// (`== 0` turned into `!= 0`) leaves both blocks sealed and nothing
// written.
TEST(LogStoreFlusherTest, FlushSealedWritesTheWaitingBlocksAndReleasesThem) {
  ScratchDir dir;
  LogStoreOptions o = FlusherOptions(nullptr);
  o.max_sealed_blocks = 4;
  auto opened = LogStore::Open(dir.File("s"), o);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  LogStore& store = **opened;

  const FlushReport start = store.FlushTotals();
  ASSERT_TRUE(store.FlushSealed().ok());  // nothing sealed: no I/O
  EXPECT_EQ(store.FlushTotals().syncs, start.syncs);
  EXPECT_EQ(Metric(store, "cairn_logstore_flusher_flushes_total"), 0);

  int next = 0;
  FillUntilSealed(store, &next, 2);
  // No flusher ran and none was needed: the writes did no I/O.
  EXPECT_EQ(store.FlushTotals().blocks_written, 0u);
  EXPECT_EQ(Metric(store, "cairn_logstore_backpressure_flushes_total"), 0);

  ASSERT_TRUE(store.FlushSealed().ok());
  EXPECT_EQ(Sealed(store), 0);
  EXPECT_GE(store.FlushTotals().blocks_written, 2u);
  EXPECT_EQ(Metric(store, "cairn_logstore_flusher_flushes_total"), 1);
  // Every value is there, from the file or the open block.
  std::string got;
  for (int i = 0; i < next; ++i) {
    ASSERT_TRUE(store.Get(0, Key(i), &got).ok()) << i;
    EXPECT_EQ(got.size(), kValueBytes);
  }
  ASSERT_TRUE(store.Close().ok());
  EXPECT_EQ(store.FlushSealed().code(), StatusCode::kFailedPrecondition);
}

// With a flusher held inside its sync, writes go on until max_sealed_blocks
// full blocks wait; the next write waits (counted once, no inline flush)
// and returns once the flusher's sync completes. Planted bugs: waiting one
// block early (`>= max_sealed_blocks - 1`) makes the writes under the limit
// wait (the fill times out); not counting the wait fails the count; the
// write flushing inline instead of waiting fails the back-pressure flush
// count.
TEST(LogStoreFlusherTest, WriteWaitsForTheFlusherOnlyAtTheLimit) {
  ScratchDir dir;
  SyncGateEnv gate(Env::Default());
  auto opened = LogStore::Open(dir.File("s"), FlusherOptions(&gate));
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  LogStore& store = **opened;
  std::promise<Status> flusher_result;
  std::jthread flusher([&](std::stop_token stop) {
    flusher_result.set_value(store.RunFlusher(stop));
  });

  gate.Hold();
  int next = 0;
  // The first sealed block wakes the flusher, which is held in its sync;
  // the writer fills a second one meanwhile.
  auto fill = std::async(std::launch::async, [&] {
    FillUntilSealed(store, &next, 1);
    EXPECT_TRUE(gate.WaitEntered(1));
    FillUntilSealed(store, &next, 2);
  });
  ASSERT_EQ(fill.wait_for(seconds(20)), std::future_status::ready)
      << "a write under max_sealed_blocks waited";
  fill.get();
  EXPECT_EQ(Metric(store, "cairn_logstore_backpressure_waits_total"), 0);

  std::atomic<bool> returned{false};
  auto blocked = std::async(std::launch::async, [&] {
    Status s = store.Set(0, "waits", std::string(kValueBytes, 'w'));
    returned.store(true);
    return s;
  });
  // It is counted when it starts waiting; then it stays blocked.
  const auto until = std::chrono::steady_clock::now() + seconds(20);
  while (Metric(store, "cairn_logstore_backpressure_waits_total") < 1 &&
         !returned.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(returned.load()) << "a write at max_sealed_blocks did not wait";
  EXPECT_EQ(Metric(store, "cairn_logstore_backpressure_waits_total"), 1);
  gate.Release();
  ASSERT_EQ(blocked.wait_for(seconds(20)), std::future_status::ready);
  EXPECT_TRUE(blocked.get().ok());
  EXPECT_EQ(Metric(store, "cairn_logstore_backpressure_waits_total"), 1);
  EXPECT_EQ(Metric(store, "cairn_logstore_backpressure_flushes_total"), 0);
  EXPECT_GE(Metric(store, "cairn_logstore_flusher_flushes_total"), 1);

  // Close: the flusher returns OK by itself.
  ASSERT_TRUE(store.Close().ok());
  auto result = flusher_result.get_future();
  ASSERT_EQ(result.wait_for(seconds(20)), std::future_status::ready);
  EXPECT_TRUE(result.get().ok());
}

// RunFlusher needs the option, runs once at a time, and returns OK on stop.
// The first call is seen running once it flushed a sealed block (nothing
// else flushes here); a second call is then refused. Planted bug: no check
// of a running flusher lets the second call run (it returns OK, its token
// being stopped, instead of kFailedPrecondition).
TEST(LogStoreFlusherTest, RunFlusherNeedsTheOptionAndRunsOnceAtATime) {
  ScratchDir dir;
  {
    LogStoreOptions o = FlusherOptions(nullptr);
    o.host_flusher = false;
    auto opened = LogStore::Open(dir.File("off"), o);
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    std::stop_source never;
    EXPECT_EQ((*opened)->RunFlusher(never.get_token()).code(),
              StatusCode::kFailedPrecondition);
  }
  LogStoreOptions o = FlusherOptions(nullptr);
  o.sync = false;
  auto opened = LogStore::Open(dir.File("on"), o);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  LogStore& store = **opened;
  std::promise<Status> first;
  auto result = first.get_future();
  std::jthread flusher(
      [&](std::stop_token stop) { first.set_value(store.RunFlusher(stop)); });
  int next = 0;
  FillUntilSealed(store, &next, 1);
  const auto until = std::chrono::steady_clock::now() + seconds(20);
  while (Metric(store, "cairn_logstore_flusher_flushes_total") < 1 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_GE(Metric(store, "cairn_logstore_flusher_flushes_total"), 1);
  std::stop_source stopped;
  stopped.request_stop();
  EXPECT_EQ(store.RunFlusher(stopped.get_token()).code(),
            StatusCode::kFailedPrecondition);
  flusher.request_stop();
  ASSERT_EQ(result.wait_for(seconds(20)), std::future_status::ready);
  EXPECT_TRUE(result.get().ok());
  flusher.join();
  // Stopped before it starts: returns OK at once.
  EXPECT_TRUE(store.RunFlusher(stopped.get_token()).ok());
  ASSERT_TRUE(store.Close().ok());
}

// A full disk under a running flusher: its flush fails, RunFlusher returns
// the error, the writes waiting for room and every later one fail with it
// (nothing appended) until a flush succeeds; memory stays bounded and what
// was acknowledged survives. Planted bug: RunFlusher going on after a
// failed flush (`continue` instead of `break`) never returns the error.
TEST(LogStoreFlusherTest, FlusherErrorReachesWritersAndRunFlusher) {
  FaultEnv env;
  LogStoreOptions o = FlusherOptions(&env);
  o.block_bytes = kLogMinBlockBytes;
  o.max_key_bytes = 16;
  o.max_value_bytes = 1500;
  auto opened = LogStore::Open("/sim/store", o);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  std::unique_ptr<LogStore> store = std::move(opened).value();
  ASSERT_TRUE(store->SetDurable(0, "before", "1").ok());

  std::promise<Status> flusher_result;
  auto result = flusher_result.get_future();
  std::jthread flusher([&](std::stop_token stop) {
    flusher_result.set_value(store->RunFlusher(stop));
  });
  env.FailFrom(1, ENOSPC, testing::EnvCall::kWriteAt);
  const std::string value(1000, 'x');
  int accepted = 0;
  Status refused;
  auto writer = std::async(std::launch::async, [&] {
    for (int i = 0; i < 1000 && refused.ok(); ++i) {
      refused = store->Set(1, Key(i % 24), value);
      if (refused.ok()) ++accepted;
    }
  });
  ASSERT_EQ(writer.wait_for(seconds(20)), std::future_status::ready);
  writer.get();
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted)
      << refused.message();
  ASSERT_EQ(result.wait_for(seconds(20)), std::future_status::ready)
      << "RunFlusher did not return its error";
  EXPECT_EQ(result.get().code(), StatusCode::kResourceExhausted);
  flusher.join();
  const std::size_t per_block =
      LogDataBytes(o.block_bytes) / LogRecordBytes(Key(0).size(), value.size());
  EXPECT_LE(static_cast<std::size_t>(accepted),
            (o.max_sealed_blocks + 1) * per_block);
  // No flusher now: writes make room inline and fail with the disk.
  EXPECT_EQ(store->Set(1, "more", value).code(),
            StatusCode::kResourceExhausted);
  EXPECT_FALSE(store->SetDurable(0, "durable", "2").ok());

  env.ClearFaults();
  ASSERT_TRUE(store->Set(1, "after", "3").ok());
  ASSERT_TRUE(store->Close().ok());
  store.reset();
  opened = LogStore::Open("/sim/store", o);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  std::string got;
  EXPECT_TRUE((*opened)->Get(0, "before", &got).ok());
  EXPECT_TRUE((*opened)->Get(1, "after", &got).ok());
}

// Eight writers (each its own keys, increasing versions, one in 40 writes
// durable), two readers (a key's version never goes back), the flusher
// thread and a compactor, for a while; then Close, the flusher returns OK,
// and a reopened store holds every key's last value. Under TSan this is
// the data-race check of the handoff. A run that does not finish within
// 60 s fails (a lost wakeup would hang it). Planted bugs: writers not woken
// when the flusher releases blocks (WakeWriters dropped) hangs the run; a
// flusher that skips the wait's lock handshake (WakeFlusher without taking
// the sealed mutex) was not caught here (a lost wakeup needs a narrow
// window; the next sealed block wakes the flusher anyway).
// The stresses' writers: writer t writes keys StressKey(t, k) of database
// t % 2, each value naming its version (value_of(t, version)).
std::string StressKey(int t, int k) {
  return "w" + std::to_string(t) + "-" + std::to_string(k);
}
using StressValue = std::string (*)(int t, int version);

// A reader's loop until `stop`: random keys of `writers` writers; every
// value must be one its writer wrote, never older than one it saw before.
// Counts a failure and returns at the first that is not.
void ReadWhileWriting(LogStore& store, int seed, int writers, int keys,
                      StressValue value_of, const std::atomic<bool>& stop,
                      std::atomic<int>& failures) {
  std::mt19937_64 rng(seed);
  std::map<std::string, int> seen;
  std::string got;
  while (!stop.load(std::memory_order_relaxed)) {
    const int t = static_cast<int>(rng() % writers);
    const std::string key = StressKey(t, static_cast<int>(rng() % keys));
    const Status s = store.Get(t % 2, key, &got);
    if (s.code() == StatusCode::kNotFound) continue;
    if (!s.ok()) {
      ADD_FAILURE() << "read: " << s.message();
      failures.fetch_add(1);
      return;
    }
    const int version = std::atoi(got.c_str());
    if (got != value_of(t, version) || version < seen[key]) {
      ADD_FAILURE() << key << ": read version " << version << " after "
                    << seen[key];
      failures.fetch_add(1);
      return;
    }
    seen[key] = version;
  }
}

// Reopens the store at `path` and checks every key's last written value
// (last[t][k]: the version writer t last wrote to key k, -1 for none).
void ExpectLastWritesRecovered(const std::string& path,
                               const LogStoreOptions& o,
                               const std::vector<std::vector<int>>& last,
                               StressValue value_of) {
  auto reopened = LogStore::Open(path, o);
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  std::string got;
  for (std::size_t t = 0; t < last.size(); ++t) {
    for (std::size_t k = 0; k < last[t].size(); ++k) {
      if (last[t][k] < 0) continue;
      const std::string key = StressKey(int(t), int(k));
      ASSERT_TRUE((*reopened)->Get(int(t) % 2, key, &got).ok()) << key;
      EXPECT_EQ(got, value_of(int(t), last[t][k])) << key;
    }
  }
}

TEST(LogStoreFlusherTest, StressWritersReadersFlusherAndCompact) {
  constexpr int kWriters = 8;
  constexpr int kKeysPerWriter = 40;
  ScratchDir dir;
  LogStoreOptions o = FlusherOptions(nullptr);
  o.sync = false;
  o.partitions = 8;
  const std::string path = dir.File("s");
  auto opened = LogStore::Open(path, o);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  LogStore& store = **opened;
  std::promise<Status> flusher_result;
  auto flusher_done = flusher_result.get_future();
  std::jthread flusher([&](std::stop_token stop) {
    flusher_result.set_value(store.RunFlusher(stop));
  });

  const auto deadline =
      std::chrono::steady_clock::now() + testing::StressDuration(400);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  // last[t][k]: the version writer t last wrote to key k.
  std::vector<std::vector<int>> last(kWriters,
                                     std::vector<int>(kKeysPerWriter, -1));
  const StressValue value_of = [](int t, int version) {
    return std::to_string(version) + ":" +
           std::string(200 + (version * 53 + t * 7) % 1500, 'a' + t);
  };
  auto work = std::async(std::launch::async, [&] {
    std::vector<std::thread> threads;
    for (int t = 0; t < kWriters; ++t) {
      threads.emplace_back([&, t] {
        for (int version = 0; !stop.load(std::memory_order_relaxed);
             ++version) {
          const int k = version % kKeysPerWriter;
          const std::string value = value_of(t, version);
          const Status s = version % 40 == 39
                               ? store.SetDurable(t % 2, StressKey(t, k), value)
                               : store.Set(t % 2, StressKey(t, k), value);
          if (!s.ok()) {
            ADD_FAILURE() << "write: " << s.message();
            failures.fetch_add(1);
            return;
          }
          last[t][k] = version;
        }
      });
    }
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        ReadWhileWriting(store, r, kWriters, kKeysPerWriter, value_of, stop,
                         failures);
      });
    }
    threads.emplace_back([&] {
      CompactOptions compact;
      compact.max_live_fraction = 0.9;
      compact.max_blocks = 2;
      while (!stop.load(std::memory_order_relaxed)) {
        const Status s = store.Compact(compact);
        if (!s.ok()) {
          ADD_FAILURE() << "compact: " << s.message();
          failures.fetch_add(1);
          return;
        }
        std::this_thread::sleep_for(milliseconds(1));
      }
    });
    while (std::chrono::steady_clock::now() < deadline &&
           failures.load() == 0) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    stop.store(true);
    for (auto& th : threads) th.join();
  });
  if (work.wait_for(seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "the stress did not finish in 60 s: a lost wakeup\n");
    std::abort();
  }
  work.get();
  const double waits = Metric(store, "cairn_logstore_backpressure_waits_total");
  const double flushes = Metric(store, "cairn_logstore_flusher_flushes_total");
  const double freed = Metric(store, "cairn_logstore_compacted_blocks_total");
  ASSERT_TRUE(store.Close().ok());
  ASSERT_EQ(flusher_done.wait_for(seconds(20)), std::future_status::ready);
  EXPECT_TRUE(flusher_done.get().ok());
  flusher.join();
  std::printf(
      "flusher stress: %.0f flusher flushes, %.0f writes waited for room, "
      "%.0f blocks compacted\n",
      flushes, waits, freed);
  EXPECT_GT(flushes, 0);
  opened->reset();
  ExpectLastWritesRecovered(path, o, last, value_of);
}

// Appends and unflushed GETs take no store-wide lock: a GET copies its
// record from a block in memory while flushes release blocks and recycle or
// free their buffers. Blocks of a few records turn over constantly; with
// max_sealed_blocks 100 more blocks wait in memory than the GET's lookup
// ring has entries, so some GETs take its fallback under the log mutex.
// Each writer reads back what it just wrote (usually unflushed); readers
// read the others' keys, and every value must be one its writer wrote, never
// older than one seen before. Then everything recovers.
// Planted bug: ReleaseFlushedBlocks without PartitionGrace() failed under
// TSan (an append still using a released block raced with its release).
TEST(LogStoreFlusherTest, UnflushedGetsRaceBlockRelease) {
  for (int run = 0; run < 4; ++run) {
    const std::size_t max_sealed = run % 2 == 0 ? 1 : 100;
    // Watermark mode: no receipt pass, whose partition locks would order a
    // release after the reads as the grace does.
    const FlushMode mode =
        run < 2 ? FlushMode::kReceipts : FlushMode::kWatermark;
    SCOPED_TRACE("max_sealed_blocks " + std::to_string(max_sealed) +
                 (run < 2 ? ", receipts" : ", watermark"));
    constexpr int kWriters = 6;
    constexpr int kKeysPerWriter = 16;
    ScratchDir dir;
    LogStoreOptions o = FlusherOptions(nullptr);
    o.sync = false;
    o.host_flusher = false;  // writers flush inline at the limit
    o.block_bytes = kLogMinBlockBytes;
    o.max_value_bytes = 1200;
    o.max_sealed_blocks = max_sealed;
    o.mode = mode;
    const std::string path = dir.File("s");
    auto opened = LogStore::Open(path, o);
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    LogStore& store = **opened;
    const StressValue value_of = [](int t, int version) {
      return std::to_string(version) + ":" +
             std::string(600 + (version * 31 + t) % 500, 'a' + t);
    };
    std::vector<std::vector<int>> last(kWriters,
                                       std::vector<int>(kKeysPerWriter, -1));
    std::atomic<bool> stop{false};
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kWriters; ++t) {
      threads.emplace_back([&, t] {
        std::string got;
        for (int version = 0; !stop.load(std::memory_order_relaxed);
             ++version) {
          const std::string key = StressKey(t, version % kKeysPerWriter);
          const std::string value = value_of(t, version);
          Status s = store.Set(t % 2, key, value);
          if (s.ok()) s = store.Get(t % 2, key, &got);
          if (!s.ok() || got != value) {
            ADD_FAILURE() << key << ": " << s.message() << ", read "
                          << got.substr(0, 8);
            failures.fetch_add(1);
            return;
          }
          last[t][version % kKeysPerWriter] = version;
        }
      });
    }
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        ReadWhileWriting(store, r, kWriters, kKeysPerWriter, value_of, stop,
                         failures);
      });
    }
    const auto deadline =
        std::chrono::steady_clock::now() + testing::StressDuration(300);
    while (std::chrono::steady_clock::now() < deadline &&
           failures.load() == 0) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    stop.store(true);
    for (auto& th : threads) th.join();
    ASSERT_EQ(failures.load(), 0);
    ASSERT_TRUE(store.Close().ok());
    opened->reset();
    ExpectLastWritesRecovered(path, o, last, value_of);
  }
}

}  // namespace
}  // namespace cairn
