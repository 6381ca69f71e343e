// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Gate X5, durable SETs (docs/flush.md, bench/flush/gates.py):
//   BM_FlushX5Durable/<logstore|rocksdb|leveldb>/<keys>/real_time/threads:<n>
// Each operation is one SET acknowledged durable: LogStore::SetDurable
// (group commit, one fdatasync per group), RocksDB and LevelDB Put with
// WriteOptions::sync = true (their own group commit of the write-ahead
// log). 16-byte keys uniform over `keys` keys that are loaded first (not
// durable per key, one sync at the end), 1 KiB values of random bytes, a
// real file under $CAIRN_BENCH_DIR or /tmp. items = acknowledged SETs.
//
// The stores are tuned the same way, as their documentation suggests for a
// write-heavy workload: a 64 MiB write buffer (memtable), no compression
// (the values are random), two background threads (RocksDB; LevelDB has one
// compaction thread), everything else default. LogStore: 8 MiB blocks,
// fdatasync on, the default 16 partitions.
//
// A peer whose Debian package was missing when the bench was configured is
// not built (CAIRN_FLUSH_HAVE_ROCKSDB / CAIRN_FLUSH_HAVE_LEVELDB); the gate
// runner then records its gates as skipped.

#include <unistd.h>

#include <chrono>
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

namespace {

constexpr std::size_t kKeyBytes = 16;
constexpr std::size_t kValueBytes = 1024;
constexpr std::size_t kWriteBufferBytes = std::size_t{64} << 20;

std::uint64_t Mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Key i: 16 bytes, "k" and 15 hex digits of a mix of i (distinct for
// i < 2^60, so uniform and unordered).
std::string KeyOf(std::uint64_t i) {
  char buf[kKeyBytes + 1];
  std::snprintf(buf, sizeof(buf), "k%015llx",
                static_cast<unsigned long long>(Mix(i) >> 4));
  return std::string(buf, kKeyBytes);
}

// 4 MiB of random bytes; a value is 1 KiB of it at a random offset.
const std::string& RandomBytes() {
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
std::string_view ValueAt(std::uint64_t r) {
  const std::string& bytes = RandomBytes();
  return std::string_view(bytes).substr(r % (bytes.size() - kValueBytes),
                                        kValueBytes);
}

std::string BenchDir(const std::string& what) {
  const char* env = std::getenv("CAIRN_BENCH_DIR");
  std::string base = env != nullptr ? env : "/tmp";
  std::string pattern = base + "/cairn_durable_" + what + "_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) std::abort();
  return pattern;
}

// One store of one implementation, loaded with `keys` keys.
class Store {
 public:
  virtual ~Store() = default;
  // One SET, acknowledged durable; false on error.
  virtual bool PutDurable(std::string_view key, std::string_view value) = 0;
  // LogStore only: its flush totals so far (syncs and I/O time).
  virtual cairn::FlushReport Totals() { return {}; }
};

class LogStoreStore final : public Store {
 public:
  explicit LogStoreStore(std::size_t keys) : dir_(BenchDir("logstore")) {
    cairn::LogStoreOptions o;
    o.checkpoint_on_close = false;
    o.sync = true;
    auto store = cairn::LogStore::Open(dir_, o);
    if (!store.ok()) std::abort();
    store_ = std::move(store).value();
    for (std::uint64_t i = 0; i < keys; ++i) {
      if (!store_->Set(0, KeyOf(i), ValueAt(Mix(i))).ok()) std::abort();
    }
    if (!store_->Flush().ok()) std::abort();
  }
  ~LogStoreStore() override {
    store_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  bool PutDurable(std::string_view key, std::string_view value) override {
    return store_->SetDurable(0, key, value).ok();
  }
  cairn::FlushReport Totals() override { return store_->FlushTotals(); }

 private:
  const std::string dir_;
  std::unique_ptr<cairn::LogStore> store_;
};

#if CAIRN_FLUSH_HAVE_ROCKSDB
class RocksDbStore final : public Store {
 public:
  explicit RocksDbStore(std::size_t keys) : dir_(BenchDir("rocksdb")) {
    rocksdb::Options o;
    o.create_if_missing = true;
    o.IncreaseParallelism(2);
    o.write_buffer_size = kWriteBufferBytes;
    o.compression = rocksdb::kNoCompression;
    rocksdb::DB* db = nullptr;
    if (!rocksdb::DB::Open(o, dir_, &db).ok()) std::abort();
    db_.reset(db);
    rocksdb::WriteOptions load;
    for (std::uint64_t i = 0; i < keys;) {
      rocksdb::WriteBatch batch;
      for (int n = 0; n < 1000 && i < keys; ++n, ++i) {
        const std::string key = KeyOf(i);
        const std::string_view value = ValueAt(Mix(i));
        if (!batch.Put(key, rocksdb::Slice(value.data(), value.size())).ok())
          std::abort();
      }
      if (!db_->Write(load, &batch).ok()) std::abort();
    }
    if (!db_->FlushWAL(/*sync=*/true).ok()) std::abort();
    sync_.sync = true;
  }
  ~RocksDbStore() override {
    db_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  bool PutDurable(std::string_view key, std::string_view value) override {
    return db_
        ->Put(sync_, rocksdb::Slice(key.data(), key.size()),
              rocksdb::Slice(value.data(), value.size()))
        .ok();
  }

 private:
  const std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::WriteOptions sync_;
};
#endif

#if CAIRN_FLUSH_HAVE_LEVELDB
class LevelDbStore final : public Store {
 public:
  explicit LevelDbStore(std::size_t keys) : dir_(BenchDir("leveldb")) {
    leveldb::Options o;
    o.create_if_missing = true;
    o.write_buffer_size = kWriteBufferBytes;
    o.compression = leveldb::kNoCompression;
    leveldb::DB* db = nullptr;
    if (!leveldb::DB::Open(o, dir_, &db).ok()) std::abort();
    db_.reset(db);
    leveldb::WriteOptions load;
    for (std::uint64_t i = 0; i < keys;) {
      leveldb::WriteBatch batch;
      for (int n = 0; n < 1000 && i < keys; ++n, ++i) {
        const std::string key = KeyOf(i);
        const std::string_view value = ValueAt(Mix(i));
        batch.Put(key, leveldb::Slice(value.data(), value.size()));
      }
      if (!db_->Write(load, &batch).ok()) std::abort();
    }
    // One synced write makes the loaded log durable too.
    sync_.sync = true;
    const std::string_view first = ValueAt(0);
    if (!db_->Put(sync_, KeyOf(0), leveldb::Slice(first.data(), first.size()))
             .ok()) {
      std::abort();
    }
  }
  ~LevelDbStore() override {
    db_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  bool PutDurable(std::string_view key, std::string_view value) override {
    return db_
        ->Put(sync_, leveldb::Slice(key.data(), key.size()),
              leveldb::Slice(value.data(), value.size()))
        .ok();
  }

 private:
  const std::string dir_;
  std::unique_ptr<leveldb::DB> db_;
  leveldb::WriteOptions sync_;
};
#endif

// Stores are built once per process (loading is slow) and shared by the
// repetitions and thread counts, so interleaved runs alternate them. Every
// benchmark thread asks; the first builds it.
std::mutex worlds_mu;
// Never destroyed by exit: main clears it, before RocksDB's own statics go.
auto& worlds = *new std::map<std::string, std::unique_ptr<Store>>;

Store& World(const std::string& impl, std::size_t keys) {
  std::lock_guard<std::mutex> lock(worlds_mu);
  auto& slot = worlds[impl + "/" + std::to_string(keys)];
  if (slot == nullptr) {
    std::fprintf(stderr, "[durable] loading %s with %zu keys\n", impl.c_str(),
                 keys);
    if (impl == "logstore") slot = std::make_unique<LogStoreStore>(keys);
#if CAIRN_FLUSH_HAVE_ROCKSDB
    if (impl == "rocksdb") slot = std::make_unique<RocksDbStore>(keys);
#endif
#if CAIRN_FLUSH_HAVE_LEVELDB
    if (impl == "leveldb") slot = std::make_unique<LevelDbStore>(keys);
#endif
    if (slot == nullptr) std::abort();
  }
  return *slot;
}

void RunDurable(benchmark::State& state, const std::string& impl,
                std::size_t keys) {
  Store& store = World(impl, keys);
  std::mt19937_64 rng(
      Mix(static_cast<std::uint64_t>(state.thread_index()) +
          static_cast<std::uint64_t>(
              std::chrono::steady_clock::now().time_since_epoch().count())));
  const cairn::FlushReport before = store.Totals();
  for (auto _ : state) {
    if (!store.PutDurable(KeyOf(rng() % keys), ValueAt(rng()))) std::abort();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  const cairn::FlushReport after = store.Totals();
  if (state.thread_index() == 0 && after.syncs > before.syncs) {
    // LogStore: how many SETs one fdatasync served (all threads; the
    // others finish with thread 0 within one sync), and the time per sync.
    const double syncs = static_cast<double>(after.syncs - before.syncs);
    state.counters["sets_per_sync"] =
        static_cast<double>(state.iterations()) * state.threads() / syncs;
    state.counters["io_ns_per_sync"] =
        static_cast<double>(after.io_nanos - before.io_nanos) / syncs;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> impls = {"logstore"};
#if CAIRN_FLUSH_HAVE_ROCKSDB
  impls.push_back("rocksdb");
#endif
#if CAIRN_FLUSH_HAVE_LEVELDB
  impls.push_back("leveldb");
#endif
  for (std::size_t keys : {std::size_t{100000}, std::size_t{1000000}}) {
    for (const std::string& impl : impls) {
      benchmark::RegisterBenchmark(
          ("BM_FlushX5Durable/" + impl + "/" + std::to_string(keys)).c_str(),
          [impl, keys](benchmark::State& s) { RunDurable(s, impl, keys); })
          ->Threads(1)
          ->Threads(8)
          ->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  worlds.clear();
  return 0;
}
