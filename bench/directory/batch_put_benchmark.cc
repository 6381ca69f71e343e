// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Gate directory.batch_put: a two-phase put of 32 keys (the shape of
// Mooncake's BatchPutStart + BatchPutEnd) through a GroupDirectory whose
// durable log is a FileDurableLog that syncs (fdatasync before Finalize
// returns), on a real file in $CAIRN_BENCH_DIR (default /tmp):
//   BM_BatchPut/batch   BatchCreatePending of 32 keys, then BatchCommit of
//                       them: one log reservation, 32 records, one sync
//   BM_BatchPut/single  the same 32 puts by CreatePending + Commit each:
//                       32 reservations and 32 syncs
// items = keys committed (each acknowledged durable). Every iteration puts
// 32 fresh keys into one directory, one thread. BM_BatchPutSelfCheck checks
// that both paths leave the same objects and the same number of records on
// disk, and that the batch path synced once per batch.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/common/driver.h"
#include "cairn/directory/group_directory.h"
#include "cairn/ha/file_durable_log.h"

namespace cairn::bench {
namespace {

constexpr std::size_t kBatch = 32;
constexpr std::uint64_t kObjectBytes = 4096;

// A fresh directory under $CAIRN_BENCH_DIR (default /tmp) holding one
// syncing FileDurableLog and a GroupDirectory that logs to it; the files are
// removed at the end.
class LoggedDirectory {
 public:
  LoggedDirectory() {
    const char* env = std::getenv("CAIRN_BENCH_DIR");
    path_ =
        std::string(env != nullptr ? env : "/tmp") + "/cairn_batch_put_XXXXXX";
    if (::mkdtemp(path_.data()) == nullptr) std::abort();
    FileDurableLogOptions options;
    options.sync = true;
    auto log = FileDurableLog::Open(path_ + "/log", options);
    if (!log.ok()) {
      std::fprintf(stderr, "open %s/log: %s\n", path_.c_str(),
                   log.status().ToString().c_str());
      std::abort();
    }
    log_ = std::move(log).value();
    DirectoryOptions dir_options;
    dir_options.durable_log = log_.get();
    dir_ = std::make_unique<GroupDirectory<>>(dir_options);
  }
  ~LoggedDirectory() {
    dir_.reset();
    log_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  LoggedDirectory(const LoggedDirectory&) = delete;
  LoggedDirectory& operator=(const LoggedDirectory&) = delete;

  GroupDirectory<>& dir() { return *dir_; }
  FileDurableLog& log() { return *log_; }

  // The next 32 fresh keys.
  std::vector<std::string> NextKeys() {
    std::vector<std::string> keys;
    keys.reserve(kBatch);
    for (std::size_t i = 0; i < kBatch; ++i) {
      keys.push_back("object/" + std::to_string(next_++));
    }
    return keys;
  }

 private:
  std::string path_;
  std::unique_ptr<FileDurableLog> log_;
  std::unique_ptr<GroupDirectory<>> dir_;
  std::uint64_t next_ = 0;
};

CreateOptions PutOptions() {
  CreateOptions o;
  o.size_bytes = kObjectBytes;
  o.counted_bytes = kObjectBytes;
  return o;
}

// Both return how many keys were committed OK.
std::size_t PutBatch(GroupDirectory<>& dir,
                     const std::vector<std::string>& keys) {
  std::vector<GroupDirectory<>::PendingPut> puts(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    puts[i].key = keys[i];
    puts[i].options = PutOptions();
  }
  const auto made = dir.BatchCreatePending(puts);
  std::vector<std::string_view> commit;
  std::vector<ObjectToken> tokens;
  commit.reserve(keys.size());
  tokens.reserve(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!made[i].ok()) continue;
    commit.push_back(keys[i]);
    tokens.push_back(made[i]->token());
  }
  std::size_t ok = 0;
  for (const Status& s : dir.BatchCommit(commit, tokens)) ok += s.ok();
  return ok;
}

std::size_t PutSingles(GroupDirectory<>& dir,
                       const std::vector<std::string>& keys) {
  std::size_t ok = 0;
  for (const std::string& key : keys) {
    auto made = dir.CreatePending(key, PutOptions());
    if (!made.ok()) continue;
    ok += dir.Commit(key, made->token()).ok();
  }
  return ok;
}

template <bool kBatched>
void BM_BatchPut(benchmark::State& state) {
  LoggedDirectory logged;
  std::size_t committed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::vector<std::string> keys = logged.NextKeys();
    state.ResumeTiming();
    const std::size_t ok = kBatched ? PutBatch(logged.dir(), keys)
                                    : PutSingles(logged.dir(), keys);
    if (ok != kBatch) {
      state.SkipWithError("a put was not acknowledged");
      break;
    }
    committed += ok;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(committed));
  const double syncs = static_cast<double>(logged.log().syncs());
  if (syncs > 0) {
    state.counters["records_per_sync"] =
        static_cast<double>(logged.log().durable_records()) / syncs;
  }
}

void BM_BatchPutSelfCheck(benchmark::State& state) {
  std::string why;
  for (auto _ : state) {
    LoggedDirectory batched;
    LoggedDirectory singles;
    const std::uint64_t syncs = batched.log().syncs();
    if (PutBatch(batched.dir(), batched.NextKeys()) != kBatch ||
        PutSingles(singles.dir(), singles.NextKeys()) != kBatch) {
      why = "a put failed";
    } else if (batched.log().syncs() != syncs + 1) {
      why = "the batch did not sync exactly once";
    } else if (batched.log().durable_records() != kBatch ||
               singles.log().durable_records() != kBatch) {
      why = "a path did not write one record per key";
    } else if (batched.dir().object_count() != kBatch ||
               singles.dir().object_count() != kBatch) {
      why = "a path did not leave 32 objects";
    } else {
      for (std::size_t i = 0; i < kBatch; ++i) {
        const std::string key = "object/" + std::to_string(i);
        if (!batched.dir().Pin(key).ok() || !singles.dir().Pin(key).ok()) {
          why = "a committed key is not visible";
        }
      }
    }
  }
  if (!why.empty()) state.SkipWithError(why.c_str());
}
BENCHMARK(BM_BatchPutSelfCheck)->Iterations(1);

BENCHMARK_TEMPLATE(BM_BatchPut, true)->Name("BM_BatchPut/batch")->UseRealTime();
BENCHMARK_TEMPLATE(BM_BatchPut, false)
    ->Name("BM_BatchPut/single")
    ->UseRealTime();

}  // namespace
}  // namespace cairn::bench

int main(int argc, char** argv) {
  return cairn::bench::RunBenchmarksThenTearDown(argc, argv);
}
