// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ha benchmarks: the durable log and snapshots, driven the way a host
// drives them (docs/durable_log.md, docs/snapshot.md).
//
//   BM_HaLogRecord/<bytes>/<sync|nosync>/real_time/threads:<n>
//       FileDurableLog alone, called as a GroupDirectory mutation calls it:
//       each thread reserves, appends and finalizes one record of <bytes>
//       per iteration. With n writers in flight one group commit (one write,
//       one fdatasync) covers at most n records: n is the batch size.
//       items = records, bytes = record bytes; counter records_per_sync.
//   BM_HaLoggedCreate/<sync|nosync>/real_time/threads:<n>
//       the whole host path: GroupDirectory::Create of a new 64-byte key
//       with a 32-byte payload, logged (H1) to a FileDurableLog. items =
//       creates; counters records_per_sync and record_bytes (mean body).
//   BM_HaSnapshotWrite/<tenants>/<objects>/real_time
//       WriteSnapshot of a TenantRegistry, sync on: <objects> spread evenly
//       over <tenants> tenants, 30% of them in groups of 3, 32-byte payloads.
//       items = objects, bytes = file bytes; counter file_mb.
//   BM_HaSnapshotRestore/<tenants>/<objects>/real_time
//       RestoreRegistrySnapshot of that file (the restored registry is
//       destroyed outside the timed region). items = objects, bytes = file
//       bytes.
//
// Flags after Google Benchmark's own: --tenants=T (default 1000) and
// --objects=N (default 100000), the snapshot population; for example
// --objects=1000000. Files go to $CAIRN_BENCH_DIR, else /tmp, and are
// removed at the end.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/common/driver.h"  // Progress
#include "bench/common/flags.h"
#include "bench/common/keys.h"
#include "cairn/directory/durable_log.h"
#include "cairn/directory/group_directory.h"
#include "cairn/ha/file_durable_log.h"
#include "cairn/ha/snapshot.h"
#include "cairn/tenant/tenant_registry.h"

// A host payload of 32 bytes that the durable log carries.
struct Blob {
  std::string bytes;
};

template <>
struct cairn::DurablePayloadCodec<Blob> {
  static constexpr bool kLogsPayload = true;
  static void Encode(const Blob& blob, std::string* out) {
    out->append(blob.bytes);
  }
};

namespace cairn::bench {
namespace {

constexpr std::size_t kPayloadBytes = 32;

Blob PayloadOf(std::uint64_t i) {
  Blob blob;
  blob.bytes.assign(kPayloadBytes, static_cast<char>('a' + i % 26));
  return blob;
}

// A fresh directory under $CAIRN_BENCH_DIR (default /tmp), removed by
// ~ScratchFiles.
class ScratchFiles {
 public:
  ScratchFiles() {
    const char* env = std::getenv("CAIRN_BENCH_DIR");
    dir_ =
        std::string(env != nullptr ? env : "/tmp") + "/cairn_ha_bench_XXXXXX";
    if (::mkdtemp(dir_.data()) == nullptr) std::abort();
  }
  ~ScratchFiles() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  ScratchFiles(const ScratchFiles&) = delete;
  ScratchFiles& operator=(const ScratchFiles&) = delete;

  std::string File(std::string_view name) const {
    return dir_ + "/" + std::string(name);
  }

 private:
  std::string dir_;
};

std::unique_ptr<FileDurableLog> OpenLog(const std::string& path, bool sync) {
  FileDurableLogOptions options;
  options.sync = sync;
  auto log = FileDurableLog::Open(path, options);
  if (!log.ok()) {
    std::fprintf(stderr, "open %s: %s\n", path.c_str(),
                 log.status().ToString().c_str());
    std::abort();
  }
  return std::move(log).value();
}

void ReportGroupCommit(benchmark::State& state, const FileDurableLog& log) {
  if (!log.status().ok()) state.SkipWithError("the log's write failed");
  const double syncs = static_cast<double>(log.syncs());
  if (syncs > 0) {
    state.counters["records_per_sync"] =
        static_cast<double>(log.durable_records()) / syncs;
  }
}

// ---- the log alone -------------------------------------------------------

struct LogRun {
  ScratchFiles files;
  std::unique_ptr<FileDurableLog> log;
};
LogRun* log_run = nullptr;  // thread 0 sets it up before the timed loop

void BM_HaLogRecord(benchmark::State& state, std::size_t bytes, bool sync) {
  // Google Benchmark starts the threads' loops together, after thread 0's
  // setup, and ends them together, before its teardown.
  if (state.thread_index() == 0) {
    log_run = new LogRun;
    log_run->log = OpenLog(log_run->files.File("log"), sync);
  }
  const std::string record(bytes, 'r');
  for (auto _ : state) {
    FileDurableLog& log = *log_run->log;
    Result<LogReservation> reserved = log.Reserve(record.size());
    if (!reserved.ok() || !log.Append(*reserved, record).ok()) {
      state.SkipWithError("reserve or append failed");
      break;
    }
    if (!log.Finalize(*reserved, {}).ok()) {
      state.SkipWithError("finalize failed");
      break;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.SetBytesProcessed(
      static_cast<std::int64_t>(state.iterations() * bytes));
  if (state.thread_index() == 0) {
    ReportGroupCommit(state, *log_run->log);
    delete log_run;
    log_run = nullptr;
  }
}

// ---- a logged directory --------------------------------------------------

struct CreateRun {
  ScratchFiles files;
  std::unique_ptr<FileDurableLog> log;
  std::unique_ptr<GroupDirectory<Blob>> directory;
};
CreateRun* create_run = nullptr;

void BM_HaLoggedCreate(benchmark::State& state, bool sync) {
  if (state.thread_index() == 0) {
    create_run = new CreateRun;
    create_run->log = OpenLog(create_run->files.File("log"), sync);
    DirectoryOptions options;
    options.durable_log = create_run->log.get();
    create_run->directory = std::make_unique<GroupDirectory<Blob>>(options);
  }
  // Keys of this thread: its index in the top bits, so threads never meet.
  const std::uint64_t base =
      static_cast<std::uint64_t>(1 + state.thread_index()) << 40;
  std::uint64_t i = 0;
  for (auto _ : state) {
    const std::string key = MakeKey(base + i, "ha/object/");
    if (!create_run->directory->Create(key, {}, PayloadOf(i)).ok()) {
      state.SkipWithError("create failed");
      break;
    }
    ++i;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  if (state.thread_index() == 0) {
    ReportGroupCommit(state, *create_run->log);
    const FileDurableLog& log = *create_run->log;
    if (log.durable_records() > 0) {
      // The mean record on disk, frame included, past the segments'
      // headers.
      std::error_code error;
      std::uintmax_t file_bytes = 0;
      for (const auto& entry :
           std::filesystem::directory_iterator(log.path(), error)) {
        if (entry.path().extension() != ".log") continue;
        file_bytes += entry.file_size() - kDurableLogHeaderBytes;
      }
      if (!error) {
        state.counters["record_bytes"] =
            static_cast<double>(file_bytes) /
            static_cast<double>(log.durable_records());
      }
    }
    create_run->directory.reset();  // before the log it points to
    delete create_run;
    create_run = nullptr;
  }
}

// ---- snapshots -------------------------------------------------------------

using Registry = TenantRegistry<Blob>;

struct SnapshotWorld {
  ScratchFiles files;
  std::unique_ptr<Registry> registry;
  std::string written;  // a file restores read
  std::uint64_t file_bytes = 0;
};

Status EncodeBlob(const Blob& blob, std::string* out) {
  out->append(blob.bytes);
  return Status::Ok();
}
Result<Blob> DecodeBlob(std::string_view bytes) {
  return Blob{std::string(bytes)};
}

// Every snapshot world built, by (tenants, objects); main clears it after
// the benchmarks, before static destruction.
std::map<std::pair<std::size_t, std::size_t>, std::unique_ptr<SnapshotWorld>>&
SnapshotWorlds() {
  static auto* worlds = new std::map<std::pair<std::size_t, std::size_t>,
                                     std::unique_ptr<SnapshotWorld>>;
  return *worlds;
}

// `objects` objects over `tenants` tenants, object i in tenant i % tenants;
// per tenant, of each 10 consecutive objects the first 3 form a group (30%
// of objects in groups of 3). Built once per size and kept, so repetitions
// do not rebuild it.
SnapshotWorld& Snapshots(std::size_t tenants, std::size_t objects) {
  auto& world = SnapshotWorlds()[{tenants, objects}];
  if (world != nullptr) return *world;
  Progress("populating %s: %zu objects", "snapshot registry", objects);
  world = std::make_unique<SnapshotWorld>();
  world->registry = std::make_unique<Registry>();
  std::vector<Registry::Handle> handles;
  handles.reserve(tenants);
  for (std::size_t t = 0; t < tenants; ++t) {
    auto made = world->registry->GetOrCreate(
        "tenant-" + std::to_string(t),
        [](std::string_view) -> Result<TenantOptions> {
          return TenantOptions{};
        });
    if (!made.ok()) std::abort();
    handles.push_back(std::move(made).value());
  }
  const std::vector<std::string>& keys = Keys(objects);
  for (std::size_t i = 0; i < objects; ++i) {
    const std::size_t t = i % tenants;
    const std::size_t local = i / tenants;  // the object's index in its tenant
    CreateOptions c;
    c.size_bytes = c.counted_bytes = 4096;
    const std::string group = "group-" + std::to_string(local / 10);
    if (local % 10 < 3) c.group = group;
    if (!handles[t]->directory().Create(keys[i], c, PayloadOf(i)).ok()) {
      std::abort();
    }
  }
  world->written = world->files.File("restore.snap");
  SnapshotStats stats;
  if (!WriteSnapshot(*world->registry, world->written, EncodeBlob, {}, &stats)
           .ok()) {
    std::abort();
  }
  world->file_bytes = stats.file_bytes;
  return *world;
}

void BM_HaSnapshotWrite(benchmark::State& state, std::size_t tenants,
                        std::size_t objects) {
  SnapshotWorld& world = Snapshots(tenants, objects);
  const std::string path = world.files.File("write.snap");
  SnapshotStats stats;
  for (auto _ : state) {
    if (!WriteSnapshot(*world.registry, path, EncodeBlob, {}, &stats).ok()) {
      state.SkipWithError("snapshot failed");
      break;
    }
  }
  state.SetItemsProcessed(
      static_cast<std::int64_t>(state.iterations() * stats.objects));
  state.SetBytesProcessed(
      static_cast<std::int64_t>(state.iterations() * stats.file_bytes));
  state.counters["file_mb"] = static_cast<double>(stats.file_bytes) / 1e6;
}

void BM_HaSnapshotRestore(benchmark::State& state, std::size_t tenants,
                          std::size_t objects) {
  SnapshotWorld& world = Snapshots(tenants, objects);
  SnapshotStats stats;
  for (auto _ : state) {
    auto restored =
        RestoreRegistrySnapshot<Blob>(world.written, DecodeBlob, {}, &stats);
    if (!restored.ok()) {
      state.SkipWithError("restore failed");
      break;
    }
    std::unique_ptr<Registry> registry = std::move(restored).value();
    state.PauseTiming();
    registry.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(
      static_cast<std::int64_t>(state.iterations() * stats.objects));
  state.SetBytesProcessed(
      static_cast<std::int64_t>(state.iterations() * world.file_bytes));
}

void Register(std::size_t tenants, std::size_t objects) {
  for (std::size_t bytes : {std::size_t{128}, std::size_t{1024}}) {
    for (bool sync : {true, false}) {
      const std::string name = "BM_HaLogRecord/" + std::to_string(bytes) +
                               (sync ? "/sync" : "/nosync");
      benchmark::RegisterBenchmark(name.c_str(),
                                   [bytes, sync](benchmark::State& s) {
                                     BM_HaLogRecord(s, bytes, sync);
                                   })
          ->Threads(1)
          ->Threads(4)
          ->Threads(16)
          ->UseRealTime();
    }
  }
  for (bool sync : {true, false}) {
    const std::string name =
        std::string("BM_HaLoggedCreate") + (sync ? "/sync" : "/nosync");
    benchmark::RegisterBenchmark(
        name.c_str(),
        [sync](benchmark::State& s) { BM_HaLoggedCreate(s, sync); })
        ->Threads(1)
        ->Threads(4)
        ->Threads(16)
        ->UseRealTime();
  }
  const std::string size =
      "/" + std::to_string(tenants) + "/" + std::to_string(objects);
  benchmark::RegisterBenchmark(("BM_HaSnapshotWrite" + size).c_str(),
                               [tenants, objects](benchmark::State& s) {
                                 BM_HaSnapshotWrite(s, tenants, objects);
                               })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("BM_HaSnapshotRestore" + size).c_str(),
                               [tenants, objects](benchmark::State& s) {
                                 BM_HaSnapshotRestore(s, tenants, objects);
                               })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

}  // namespace
}  // namespace cairn::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // What Google Benchmark left: this bench's own flags.
  cairn::bench::Flags flags(argc, argv, "[--tenants=T] [--objects=N]");
  const std::uint64_t tenants = flags.Unsigned("tenants", 1000);
  const std::uint64_t objects = flags.Unsigned("objects", 100000);
  if (!flags.Ok() || tenants == 0) return 2;
  cairn::bench::Register(tenants, objects);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  cairn::bench::SnapshotWorlds().clear();
  return 0;
}
