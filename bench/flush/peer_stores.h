// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The stores gate X5 compares LogStore with (docs/flush.md), behind one
// small interface, for durable_set_benchmark.cc and buffered_benchmark.cc:
// LogStore, RocksDB and LevelDB, each loaded with the same `keys` keys
// (16 bytes, uniform and unordered) and 1 KiB values of random bytes, in a
// real directory under $CAIRN_BENCH_DIR or /tmp.
//
// The stores are tuned the same way, as their documentation suggests for a
// write-heavy workload: a 64 MiB write buffer (memtable), no compression
// (the values are random), two background threads (RocksDB; LevelDB has one
// compaction thread), everything else default. LogStore: 8 MiB blocks,
// the default 16 partitions, options given by the bench; logstore_direct
// is the same LogStore with direct_io on (docs/flush.md, "Direct I/O"), a
// variant measured beside it, not a peer: the gates do not run it.
//
// A peer whose Debian package was missing when the bench was configured is
// not built (CAIRN_FLUSH_HAVE_ROCKSDB / CAIRN_FLUSH_HAVE_LEVELDB, set by
// bench/flush/CMakeLists.txt); the gate runner then records its gates as
// skipped.

#ifndef CAIRN_BENCH_FLUSH_PEER_STORES_H_
#define CAIRN_BENCH_FLUSH_PEER_STORES_H_

#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "cairn/flush/log_store.h"

#if CAIRN_FLUSH_HAVE_ROCKSDB
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#endif
#if CAIRN_FLUSH_HAVE_LEVELDB
#include <leveldb/db.h>
#include <leveldb/options.h>
#include <leveldb/write_batch.h>
#endif

namespace cairn::bench {

inline constexpr std::size_t kPeerKeyBytes = 16;
inline constexpr std::size_t kPeerValueBytes = 1024;
inline constexpr std::size_t kPeerWriteBufferBytes = std::size_t{64} << 20;

inline std::uint64_t PeerMix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Key i: 16 bytes, "k" and 15 hex digits of a mix of i (distinct for
// i < 2^60, so uniform and unordered).
inline std::string PeerKey(std::uint64_t i) {
  char buf[kPeerKeyBytes + 1];
  std::snprintf(buf, sizeof(buf), "k%015llx",
                static_cast<unsigned long long>(PeerMix(i) >> 4));
  return std::string(buf, kPeerKeyBytes);
}

// 4 MiB of random bytes; a value is 1 KiB of it at a random offset.
inline const std::string& PeerRandomBytes() {
  static const std::string bytes = [] {
    std::string b(std::size_t{4} << 20, '\0');
    std::mt19937_64 rng(11);
    for (std::size_t i = 0; i + 8 <= b.size(); i += 8) {
      const std::uint64_t r = rng();
      std::memcpy(b.data() + i, &r, 8);
    }
    return b;
  }();
  return bytes;
}
inline std::string_view PeerValue(std::uint64_t r) {
  const std::string& bytes = PeerRandomBytes();
  return std::string_view(bytes).substr(r % (bytes.size() - kPeerValueBytes),
                                        kPeerValueBytes);
}

// A generator of its own for each benchmark thread and run.
inline std::mt19937_64 PeerThreadRng(int thread_index) {
  return std::mt19937_64(PeerMix(
      static_cast<std::uint64_t>(thread_index) +
      static_cast<std::uint64_t>(
          std::chrono::steady_clock::now().time_since_epoch().count())));
}

// A new directory $CAIRN_BENCH_DIR/cairn_<bench>_<what>_XXXXXX (else /tmp).
inline std::string PeerBenchDir(const std::string& bench,
                                const std::string& what) {
  const char* env = std::getenv("CAIRN_BENCH_DIR");
  std::string base = env != nullptr ? env : "/tmp";
  std::string pattern = base + "/cairn_" + bench + "_" + what + "_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) std::abort();
  return pattern;
}

// How a SET is acknowledged. kBuffered: LogStore Set (durable with its
// block's flush), a peer's Put with WriteOptions::sync = false (the
// write-ahead log is written, not synced). kDurable: LogStore SetDurable, a
// peer's Put with WriteOptions::sync = true.
enum class PeerWrite { kBuffered, kDurable };

// One store of one implementation, loaded with `keys` keys. Operations
// return false on error (Get also for a missing key).
class PeerStore {
 public:
  explicit PeerStore(std::string dir) : dir_(std::move(dir)) {}
  PeerStore(const PeerStore&) = delete;
  PeerStore& operator=(const PeerStore&) = delete;
  // Runs after a subclass's members (its store) are closed.
  virtual ~PeerStore() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  virtual bool Put(PeerWrite how, std::string_view key,
                   std::string_view value) = 0;
  virtual bool Get(std::string_view key, std::string* value) = 0;
  // LogStore only: its flush totals so far (syncs and I/O time).
  virtual cairn::FlushReport Totals() { return {}; }

 protected:
  const std::string& dir() const { return dir_; }

 private:
  const std::string dir_;
};

class LogStorePeer final : public PeerStore {
 public:
  LogStorePeer(std::string dir, std::size_t keys,
               const cairn::LogStoreOptions& options)
      : PeerStore(std::move(dir)) {
    auto store = cairn::LogStore::Open(this->dir(), options);
    if (!store.ok()) std::abort();
    store_ = std::move(store).value();
    for (std::uint64_t i = 0; i < keys; ++i) {
      if (!store_->Set(0, PeerKey(i), PeerValue(PeerMix(i))).ok()) {
        std::abort();
      }
    }
    if (!store_->Flush().ok()) std::abort();
  }
  bool Put(PeerWrite how, std::string_view key,
           std::string_view value) override {
    return (how == PeerWrite::kDurable ? store_->SetDurable(0, key, value)
                                       : store_->Set(0, key, value))
        .ok();
  }
  bool Get(std::string_view key, std::string* value) override {
    return store_->Get(0, key, value).ok();
  }
  cairn::FlushReport Totals() override { return store_->FlushTotals(); }

 private:
  std::unique_ptr<cairn::LogStore> store_;
};

// RocksDB and LevelDB share their API's shape: the template takes one's
// types, and its constructor that store's tuned Options.
template <typename DB, typename WriteBatch, typename Slice,
          typename ReadOptions, typename WriteOptions>
class LsmPeer final : public PeerStore {
 public:
  template <typename Options>
  LsmPeer(std::string dir, std::size_t keys, const Options& options)
      : PeerStore(std::move(dir)) {
    DB* db = nullptr;
    if (!DB::Open(options, this->dir(), &db).ok()) std::abort();
    db_.reset(db);
    for (std::uint64_t i = 0; i < keys;) {
      WriteBatch batch;
      for (int n = 0; n < 1000 && i < keys; ++n, ++i) {
        const std::string key_bytes = PeerKey(i);
        const Slice key = SliceOf(key_bytes);
        const Slice value = SliceOf(PeerValue(PeerMix(i)));
        // RocksDB's batch Put returns a Status, LevelDB's nothing.
        if constexpr (std::is_void_v<decltype(batch.Put(key, value))>) {
          batch.Put(key, value);
        } else if (!batch.Put(key, value).ok()) {
          std::abort();
        }
      }
      if (!db_->Write(buffered_, &batch).ok()) std::abort();
    }
    // One synced write makes the loaded log durable too.
    durable_.sync = true;
    if (!Put(PeerWrite::kDurable, PeerKey(0), PeerValue(0))) std::abort();
  }
  bool Put(PeerWrite how, std::string_view key,
           std::string_view value) override {
    return db_
        ->Put(how == PeerWrite::kDurable ? durable_ : buffered_, SliceOf(key),
              SliceOf(value))
        .ok();
  }
  bool Get(std::string_view key, std::string* value) override {
    return db_->Get(ReadOptions(), SliceOf(key), value).ok();
  }

 private:
  static Slice SliceOf(std::string_view s) { return Slice(s.data(), s.size()); }

  std::unique_ptr<DB> db_;
  WriteOptions buffered_;  // sync = false
  WriteOptions durable_;
};

// The tuning both peers share (RocksDB adds two background threads).
template <typename Options, typename Compression>
Options LsmTuned(Compression none) {
  Options o;
  o.create_if_missing = true;
  o.write_buffer_size = kPeerWriteBufferBytes;
  o.compression = none;
  return o;
}

#if CAIRN_FLUSH_HAVE_ROCKSDB
using RocksDbPeer = LsmPeer<rocksdb::DB, rocksdb::WriteBatch, rocksdb::Slice,
                            rocksdb::ReadOptions, rocksdb::WriteOptions>;
#endif

#if CAIRN_FLUSH_HAVE_LEVELDB
using LevelDbPeer = LsmPeer<leveldb::DB, leveldb::WriteBatch, leveldb::Slice,
                            leveldb::ReadOptions, leveldb::WriteOptions>;
#endif

// LogStore's options both benches start from: fdatasync on, no checkpoint
// when the store closes (the run's end is not measured).
inline cairn::LogStoreOptions PeerLogStoreOptions() {
  cairn::LogStoreOptions o;
  o.checkpoint_on_close = false;
  o.sync = true;
  return o;
}

// The loop of a SET benchmark: SETs acknowledged `how`, keys uniform over
// the `keys` loaded ones, random values; items = SETs. Returns the store's
// flush totals before and after it (LogStore; zero for a peer).
inline std::pair<cairn::FlushReport, cairn::FlushReport> TimePeerSets(
    benchmark::State& state, PeerStore& store, std::size_t keys,
    PeerWrite how) {
  std::mt19937_64 rng = PeerThreadRng(state.thread_index());
  const cairn::FlushReport before = store.Totals();
  for (auto _ : state) {
    if (!store.Put(how, PeerKey(rng() % keys), PeerValue(rng()))) {
      std::abort();
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  return {before, store.Totals()};
}

// The implementations this binary was built with: logstore and
// logstore_direct, then the peers whose packages were found.
inline std::vector<std::string> PeerImpls() {
  std::vector<std::string> impls = {"logstore", "logstore_direct"};
#if CAIRN_FLUSH_HAVE_ROCKSDB
  impls.push_back("rocksdb");
#endif
#if CAIRN_FLUSH_HAVE_LEVELDB
  impls.push_back("leveldb");
#endif
  return impls;
}

// Registers <name>/<impl>/<keys> for every implementation built, over 100k
// and 1M keys, with 1 and 8 threads, in real time (waits for I/O and locks
// are the cost); `run(state, impl, keys)` is its body.
template <typename Run>
void RegisterPeerBenchmarks(const std::string& name, Run run) {
  for (std::size_t keys : {std::size_t{100000}, std::size_t{1000000}}) {
    for (const std::string& impl : PeerImpls()) {
      benchmark::RegisterBenchmark(
          (name + "/" + impl + "/" + std::to_string(keys)).c_str(),
          [run, impl, keys](benchmark::State& s) { run(s, impl, keys); })
          ->Threads(1)
          ->Threads(8)
          ->UseRealTime();
    }
  }
}

// Stores are built once per process (loading is slow) and shared by the
// repetitions and thread counts, so interleaved runs alternate them. Every
// benchmark thread asks; the first builds the store.
class PeerStores {
 public:
  // `bench` names the directories and the progress lines; `logstore`
  // configures LogStore.
  PeerStores(std::string bench, const cairn::LogStoreOptions& logstore)
      : bench_(std::move(bench)), logstore_(logstore) {}

  PeerStore& Get(const std::string& impl, std::size_t keys) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = stores_[impl + "/" + std::to_string(keys)];
    if (slot == nullptr) {
      std::fprintf(stderr, "[%s] loading %s with %zu keys\n", bench_.c_str(),
                   impl.c_str(), keys);
      std::string dir = PeerBenchDir(bench_, impl);
      if (impl == "logstore" || impl == "logstore_direct") {
        cairn::LogStoreOptions options = logstore_;
        options.direct_io = impl == "logstore_direct";
        slot = std::make_unique<LogStorePeer>(std::move(dir), keys, options);
      }
#if CAIRN_FLUSH_HAVE_ROCKSDB
      if (impl == "rocksdb") {
        auto o = LsmTuned<rocksdb::Options>(rocksdb::kNoCompression);
        o.IncreaseParallelism(2);
        slot = std::make_unique<RocksDbPeer>(std::move(dir), keys, o);
      }
#endif
#if CAIRN_FLUSH_HAVE_LEVELDB
      if (impl == "leveldb") {
        slot = std::make_unique<LevelDbPeer>(
            std::move(dir), keys,
            LsmTuned<leveldb::Options>(leveldb::kNoCompression));
      }
#endif
      if (slot == nullptr) std::abort();
    }
    return *slot;
  }

  // Closes the stores and removes their files. RunPeerBenchmarks calls it
  // before main returns, since at exit RocksDB's own statics may already be
  // gone; so a bench allocates this object and never destroys it.
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    stores_.clear();
  }

 private:
  const std::string bench_;
  const cairn::LogStoreOptions logstore_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<PeerStore>> stores_;
};

// main's body once the benchmarks are registered: runs them, then closes
// the stores (see Clear).
inline int RunPeerBenchmarks(int argc, char** argv, PeerStores& stores) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  stores.Clear();
  return 0;
}

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_FLUSH_PEER_STORES_H_
