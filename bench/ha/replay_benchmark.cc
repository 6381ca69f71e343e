// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Replay, recovery and standby benchmarks (docs/ha.md), driven as a host
// drives them: a TenantRegistry logging to a FileDurableLog, then Recover /
// Standby over the files it wrote. One iteration each (the gate runner
// repeats them and takes medians).
//
//   BM_HaReplay/<records>/real_time
//       one primary thread makes <records> logged mutations (60% creates,
//       20% upserts with a payload, 20% erases, over <records>/2 keys) with
//       fdatasync off (the fastest a primary thread appends), then Recover
//       rebuilds the registry from the log alone. Counters append_rate and
//       replay_rate (records/s).
//   BM_HaRecover/<objects>/real_time
//       <objects> creates, a synced snapshot at a log position, then a tail
//       of <objects> more mutations (half upserts, half creates of new
//       keys); timed: Recover from the snapshot and the tail, and, beside
//       it, building the same final objects by Create calls on a fresh
//       registry. Counters recover_s, create_s.
//   BM_HaFollowerLag/<writers>/real_time
//       <writers> threads make mutations (fdatasync off) for 2 s while a
//       Standby polls the log on another thread; after each poll the lag is
//       the primary's durable LSN minus the standby's applied LSN. Counters
//       lag_p50, lag_p99, lag_max (LSNs), records.
//
// Files go to $CAIRN_BENCH_DIR, else /tmp, and are removed at the end.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/common/keys.h"
#include "cairn/directory/durable_log.h"
#include "cairn/ha/file_durable_log.h"
#include "cairn/ha/replay.h"
#include "cairn/ha/snapshot.h"
#include "cairn/ha/standby.h"
#include "cairn/tenant/tenant_registry.h"

namespace cairn::bench::replay {

// A 32-byte payload the log carries and replay decodes.
struct Payload32 {
  std::string bytes;
};

}  // namespace cairn::bench::replay

template <>
struct cairn::DurablePayloadCodec<cairn::bench::replay::Payload32> {
  static constexpr bool kLogsPayload = true;
  static void Encode(const cairn::bench::replay::Payload32& p,
                     std::string* out) {
    out->append(p.bytes);
  }
  static cairn::Result<cairn::bench::replay::Payload32> Decode(
      std::string_view bytes) {
    return cairn::bench::replay::Payload32{std::string(bytes)};
  }
};

namespace cairn::bench::replay {
namespace {

using Registry = TenantRegistry<Payload32>;
using Clock = std::chrono::steady_clock;

Payload32 PayloadOf(std::uint64_t i) {
  return Payload32{std::string(32, static_cast<char>('a' + i % 26))};
}
Status Encode(const Payload32& p, std::string* out) {
  out->append(p.bytes);
  return Status::Ok();
}
Result<Payload32> Decode(std::string_view bytes) {
  return Payload32{std::string(bytes)};
}

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

class Files {
 public:
  Files() {
    const char* env = std::getenv("CAIRN_BENCH_DIR");
    dir_ = std::string(env != nullptr ? env : "/tmp") +
           "/cairn_replay_bench_XXXXXX";
    if (::mkdtemp(dir_.data()) == nullptr) std::abort();
  }
  ~Files() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  Files(const Files&) = delete;
  Files& operator=(const Files&) = delete;
  std::string File(std::string_view name) const {
    return dir_ + "/" + std::string(name);
  }

 private:
  std::string dir_;
};

void Check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::abort();
  }
}

// A primary: a registry whose default tenant logs to a FileDurableLog.
struct Primary {
  std::unique_ptr<FileDurableLog> log;
  std::unique_ptr<Registry> registry;

  Primary(const std::string& dir, bool sync) {
    FileDurableLogOptions o;
    o.sync = sync;
    auto opened = FileDurableLog::Open(dir, o);
    Check(opened.status(), "open log");
    log = std::move(opened).value();
    RegistryOptions r;
    r.durable_log = log.get();
    registry = std::make_unique<Registry>(r);
  }
  void Close() {
    registry.reset();
    log.reset();
  }
  GroupDirectory<Payload32>& dir() {
    return registry->default_tenant()->directory();
  }
};

// One mutation of the W2-shaped write mix over `keys`: 60% create, 20%
// upsert with a payload, 20% erase. Returns whether it logged a record.
bool Mutate(GroupDirectory<Payload32>& dir,
            const std::vector<std::string>& keys, std::mt19937_64& rng,
            std::uint64_t i) {
  const std::string& key = keys[rng() % keys.size()];
  const std::uint64_t dice = rng() % 10;
  if (dice < 6) {
    CreateOptions o;
    o.size_bytes = o.counted_bytes = 4096;
    return dir.Create(key, o, PayloadOf(i)).ok();
  }
  if (dice < 8) {
    auto pinned = dir.Pin(key);
    if (!pinned.ok()) return false;
    if (!dir.BeginUpsert(key, pinned->token(), {4096, 4096}).ok()) {
      return false;
    }
    return dir.CommitUpsertWithPayload(key, pinned->token(), PayloadOf(i)).ok();
  }
  EraseOptions o;
  o.force = true;
  return dir.Erase(key, o).ok();
}

StandbyOptions<Payload32> FromLog(const std::string& log_dir,
                                  const std::string& snapshot = {}) {
  StandbyOptions<Payload32> o;
  o.log_dir = log_dir;
  o.snapshot_path = snapshot;
  o.decode = Decode;
  return o;
}

void BM_HaReplay(benchmark::State& state) {
  const auto records = static_cast<std::uint64_t>(state.range(0));
  const std::vector<std::string>& keys = Keys(records / 2);
  double append_rate = 0;
  double replay_rate = 0;
  for (auto _ : state) {
    Files files;
    Primary primary(files.File("log"), /*sync=*/false);
    std::mt19937_64 rng(42);
    const auto start = Clock::now();
    std::uint64_t logged = 0;
    for (std::uint64_t i = 0; logged < records; ++i) {
      if (Mutate(primary.dir(), keys, rng, i)) ++logged;
    }
    const double append_s = Seconds(Clock::now() - start);
    primary.Close();
    const auto replay_start = Clock::now();
    auto recovered = Recover<Payload32>(FromLog(files.File("log")));
    Check(recovered.status(), "recover");
    const double replay_s = Seconds(Clock::now() - replay_start);
    if (recovered.value()->applied_lsn() != logged) {
      state.SkipWithError("recovery applied a different record count");
      break;
    }
    state.PauseTiming();
    recovered.value().reset();
    state.ResumeTiming();
    append_rate = static_cast<double>(logged) / append_s;
    replay_rate = static_cast<double>(logged) / replay_s;
  }
  state.counters["append_rate"] = append_rate;
  state.counters["replay_rate"] = replay_rate;
}

void BM_HaRecover(benchmark::State& state) {
  const auto objects = static_cast<std::uint64_t>(state.range(0));
  const std::vector<std::string>& keys = Keys(objects + objects / 2);
  double recover_s = 0;
  double create_s = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Files files;
    {
      Primary primary(files.File("log"), /*sync=*/false);
      CreateOptions o;
      o.size_bytes = o.counted_bytes = 4096;
      for (std::uint64_t i = 0; i < objects; ++i) {
        Check(primary.dir().Create(keys[i], o, PayloadOf(i)).status(),
              "create");
      }
      Check(WriteSnapshotAt(*primary.registry, *primary.log,
                            files.File("snapshot"), Encode),
            "snapshot");
      // The tail: half upserts of snapshotted objects, half new objects.
      for (std::uint64_t i = 0; i < objects; ++i) {
        auto& dir = primary.dir();
        if (i % 2 == 0) {
          const std::string& key = keys[i];
          auto pinned = dir.Pin(key);
          Check(pinned.status(), "pin");
          Check(dir.BeginUpsert(key, pinned->token(), {4096, 4096}),
                "begin upsert");
          Check(dir.CommitUpsertWithPayload(key, pinned->token(),
                                            PayloadOf(i + 1)),
                "upsert");
        } else {
          Check(dir.Create(keys[objects + i / 2], o, PayloadOf(i)).status(),
                "create");
        }
      }
      primary.Close();
    }
    state.ResumeTiming();
    const auto start = Clock::now();
    auto recovered =
        Recover<Payload32>(FromLog(files.File("log"), files.File("snapshot")));
    Check(recovered.status(), "recover");
    recover_s = Seconds(Clock::now() - start);
    state.PauseTiming();
    const std::size_t count = recovered.value()
                                  ->registry()
                                  .default_tenant()
                                  ->directory()
                                  .object_count();
    recovered.value().reset();
    // The same objects built by Create calls (no log: what a host does
    // without recovery, e.g. reloading from its own store).
    {
      Registry fresh;
      CreateOptions o;
      o.size_bytes = o.counted_bytes = 4096;
      const auto build = Clock::now();
      for (std::size_t i = 0; i < count; ++i) {
        Check(fresh.default_tenant()
                  ->directory()
                  .Create(keys[i], o, PayloadOf(i))
                  .status(),
              "create");
      }
      create_s = Seconds(Clock::now() - build);
    }
    state.ResumeTiming();
  }
  state.counters["recover_s"] = recover_s;
  state.counters["create_s"] = create_s;
}

void BM_HaFollowerLag(benchmark::State& state) {
  const int writers = static_cast<int>(state.range(0));
  std::vector<std::uint64_t> lags;
  std::uint64_t records = 0;
  for (auto _ : state) {
    Files files;
    Primary primary(files.File("log"), /*sync=*/false);
    auto standby = Standby<Payload32>::Open(FromLog(files.File("log")));
    Check(standby.status(), "standby");
    const std::vector<std::string>& keys = Keys(100000);
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int w = 0; w < writers; ++w) {
      threads.emplace_back([&, w] {
        std::mt19937_64 rng(static_cast<std::uint64_t>(w) + 1);
        for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
          Mutate(primary.dir(), keys, rng, i);
        }
      });
    }
    const auto until = Clock::now() + std::chrono::seconds(2);
    lags.clear();
    while (Clock::now() < until) {
      Check(standby.value()->Poll().status(), "poll");
      const Lsn written = primary.log->durable_lsn();
      const Lsn applied = standby.value()->applied_lsn();
      lags.push_back(written > applied ? written - applied : 0);
    }
    stop.store(true);
    for (auto& t : threads) t.join();
    records = primary.log->durable_lsn();
    standby.value().reset();
    primary.Close();
  }
  std::sort(lags.begin(), lags.end());
  auto at = [&](double q) {
    return lags.empty() ? 0.0
                        : static_cast<double>(lags[static_cast<std::size_t>(
                              q * static_cast<double>(lags.size() - 1))]);
  };
  state.counters["lag_p50"] = at(0.50);
  state.counters["lag_p99"] = at(0.99);
  state.counters["lag_max"] = at(1.0);
  state.counters["records"] = static_cast<double>(records);
}

BENCHMARK(BM_HaReplay)
    ->Arg(200000)
    ->Arg(1000000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_HaRecover)
    ->Arg(200000)
    ->Arg(1000000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_HaFollowerLag)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace cairn::bench::replay
