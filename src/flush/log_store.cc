// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/flush/log_store.h"

#include <algorithm>
#include <iterator>
#include <new>
#include <string>
#include <utility>

#include "cairn/flush/internal/checkpoint.h"

CAIRN_NAMESPACE_BEGIN
namespace {

using flush_internal::CheckpointEncoder;
using flush_internal::CheckpointEntry;
using flush_internal::CheckpointFile;
using flush_internal::CheckpointPath;

constexpr std::uint64_t kPartitionSeed = 0x9e3779b97f4a7c15ull;
// How far the durable boundary runs ahead of a block's header on disk
// before a flush rewrites the header hint (docs/flush.md, Format).
constexpr std::uint32_t kLogHintStride = 256 * 1024;

}  // namespace

Result<std::unique_ptr<LogStore>> LogStore::Open(
    const std::string& store_dir, const LogStoreOptions& options) {
  if (options.partitions == 0 || options.partitions > 65536 ||
      options.databases == 0 || options.databases > 65536) {
    return InvalidArgumentError("partitions and databases must be 1..65536");
  }
  if (options.max_key_bytes == 0 || options.max_key_bytes > kLogMaxKeyBytes ||
      sizeof(RecordLocation) + 2 + options.max_key_bytes >
          RecordIndex::kMaxEntryBytes) {
    return InvalidArgumentError(
        "max_key_bytes must be at least 1 and fit an index entry");
  }
  if (options.pass.slice_receipts == 0 || options.max_sealed_blocks == 0) {
    return InvalidArgumentError(
        "pass.slice_receipts and max_sealed_blocks must be at least 1");
  }
  Env* const env = Env::OrDefault(options.env);
  // "a/s/" and "a/s" name one store, whose parent is "a".
  std::string dir = store_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string log_path = dir + "/log";
  // A new store's block size is fixed by the log it creates: check that a
  // record fits before anything reaches the disk.
  auto check_new_log = [&]() -> Status {
    CAIRN_RETURN_IF_ERROR(BlockLog::CheckBlockBytes(options.block_bytes));
    if (LogRecordBytes(options.max_key_bytes, options.max_value_bytes) >
        LogRecordSpace(options.block_bytes)) {
      return InvalidArgumentError(
          "max_key_bytes + max_value_bytes do not fit one block");
    }
    return Status();
  };
  Result<bool> log_exists = env->FileExists(log_path);
  if (!log_exists.ok()) return log_exists.status();
  if (!*log_exists) CAIRN_RETURN_IF_ERROR(check_new_log());
  if (Status made = env->CreateDir(dir);
      !made.ok() && made.code() != StatusCode::kAlreadyExists) {
    return made;
  }
  // One opener at a time, in this process or another.
  Result<std::unique_ptr<FileLock>> dir_lock = env->LockFile(dir + "/LOCK");
  if (!dir_lock.ok()) {
    if (dir_lock.status().code() == StatusCode::kFailedPrecondition) {
      return FailedPreconditionError("store " + dir +
                                     " is open elsewhere (LOCK is held)");
    }
    return dir_lock.status();
  }
  // Decided under the lock: another opener may have made the log meanwhile.
  log_exists = env->FileExists(log_path);
  if (!log_exists.ok()) return log_exists.status();
  const bool created = !*log_exists;
  if (created) {
    CAIRN_RETURN_IF_ERROR(check_new_log());
    // The store directory's own entry must be durable before anything in it
    // is acknowledged, or a crash can take the whole store with it; synced
    // whenever the log is new, as an earlier Open may have made the
    // directory and failed before its sync.
    if (options.sync) CAIRN_RETURN_IF_ERROR(env->SyncDir(DirectoryOf(dir)));
  }
  BlockLogOptions log_options;
  log_options.block_bytes = options.block_bytes;
  log_options.sync = options.sync;
  log_options.env = env;
  if (created) {
    Result<bool> orphan = env->FileExists(CheckpointPath(dir));
    if (!orphan.ok()) return orphan.status();
    if (*orphan) {
      return DataLossError("store " + dir + " has a checkpoint but no log");
    }
  }
  auto log = created ? BlockLog::Create(log_path, log_options)
                     : BlockLog::Open(log_path, log_options);
  if (!log.ok()) return std::move(log).status();
  if (LogRecordBytes(options.max_key_bytes, options.max_value_bytes) >
      LogRecordSpace((*log)->block_bytes())) {
    return InvalidArgumentError(
        "max_key_bytes + max_value_bytes do not fit one block");
  }
  std::unique_ptr<LogStore> store(new LogStore(
      dir, options, env, std::move(dir_lock).value(), std::move(log).value()));
  store->recovery_.created = created;
  // Until recovery succeeds the store counts as closed, so destroying a
  // store that failed to open writes nothing.
  CAIRN_RETURN_IF_ERROR(store->Recover());
  if (!created && options.sync) {
    // What recovery found may not be synced (an earlier process died
    // between a write and its sync): make it durable before anything is
    // built on it, the log's bytes and both directory entries.
    CAIRN_RETURN_IF_ERROR(store->log_->Sync());
    CAIRN_RETURN_IF_ERROR(env->SyncDir(dir));
    CAIRN_RETURN_IF_ERROR(env->SyncDir(DirectoryOf(dir)));
  }
  store->closed_.store(false, std::memory_order_release);
  return store;
}

LogStore::LogStore(std::string dir, const LogStoreOptions& options, Env* env,
                   std::unique_ptr<FileLock> dir_lock,
                   std::unique_ptr<BlockLog> log)
    : dir_(std::move(dir)),
      options_(options),
      env_(env),
      clock_(options.clock != nullptr ? options.clock : Clock::Steady()),
      lock_(std::move(dir_lock)),
      log_(std::move(log)) {
  ScanHashMapOptions map_options;
  map_options.max_key_bytes = options_.max_key_bytes;
  partitions_.reserve(options_.partitions);
  for (std::size_t p = 0; p < options_.partitions; ++p) {
    auto part = std::make_unique<Partition>();
    MutexLock lock(&part->mu);
    for (std::uint32_t d = 0; d < options_.databases; ++d) {
      part->maps.push_back(std::make_unique<RecordIndex>(map_options));
    }
    partitions_.push_back(std::move(part));
  }
}

LogStore::~LogStore() {
  if (closed_.load(std::memory_order_acquire)) return;
  try {
    (void)Close();
  } catch (const std::bad_alloc&) {
    // Out of memory in the last flush: what earlier flushes acknowledged
    // is durable; the rest is lost, as after a crash.
  }
}

std::size_t LogStore::PartitionOf(std::string_view key) const noexcept {
  return base_internal::KeyedHash(key, kPartitionSeed) % options_.partitions;
}

Status LogStore::Validate(std::uint32_t db, std::string_view key,
                          std::string_view value) const {
  if (db >= options_.databases) {
    return InvalidArgumentError("database " + std::to_string(db) +
                                " out of range");
  }
  if (key.empty()) return InvalidArgumentError("empty key");
  if (key.size() > options_.max_key_bytes) {
    return InvalidArgumentError("key of " + std::to_string(key.size()) +
                                " bytes is over max_key_bytes");
  }
  if (value.size() > options_.max_value_bytes) {
    return InvalidArgumentError("value of " + std::to_string(value.size()) +
                                " bytes is over max_value_bytes");
  }
  return Status();
}

// --- Recovery ---------------------------------------------------------------

Status LogStore::Recover() {
  std::uint64_t start_block = 0;
  std::uint32_t start_offset = 0;
  Result<bool> has_checkpoint = env_->FileExists(CheckpointPath(dir_));
  if (!has_checkpoint.ok()) return has_checkpoint.status();
  if (*has_checkpoint) {
    CAIRN_RETURN_IF_ERROR(LoadCheckpoint(&start_block, &start_offset));
    recovery_.from_checkpoint = true;
  }
  auto file_bytes = log_->FileBytes();
  if (!file_bytes.ok()) return file_bytes.status();
  // Replay from the checkpoint position through every sealed block; the
  // first block without a valid seal is the last one.
  std::uint64_t block = start_block;
  std::uint32_t from = start_offset;
  BlockScan scan;
  for (;; ++block, from = 0) {
    if (block > UINT32_MAX) return ResourceExhaustedError("log is full");
    scan = BlockScan();
    CAIRN_RETURN_IF_ERROR(ScanBlock(block, from, *file_bytes, &scan));
    if (scan.records > 0) ++recovery_.blocks_replayed;
    if (!scan.sealed) break;
  }
  // Past the last block no header may be valid: a header names bytes an
  // earlier sync made durable, and those come after this block's seal, so
  // this block lost durable bytes.
  for (std::uint64_t later = block + 1; log_->BlockOffset(later) < *file_bytes;
       ++later) {
    auto header = log_->ReadHeader(later);
    if (header.ok() || header.status().code() != StatusCode::kNotFound) {
      return DataLossError(
          "block " + std::to_string(block) + " ends at offset " +
          std::to_string(scan.end) + " without a seal but block " +
          std::to_string(later) + " has a header: durable records are damaged");
    }
  }
  // Everything checked: now cut the torn tail (what no valid record
  // covers) and go on filling the last block where its records end.
  std::uint64_t durable_end =
      log_->BlockOffset(block) + kLogBlockDataOffset + scan.end;
  if (*file_bytes<durable_end&& * file_bytes> log_->BlockOffset(block) &&
      scan.end == 0 && scan.header_sequence == 0) {
    // The file ends inside this block's header slots and neither slot
    // holds a valid header: a torn header write (or foreign bytes). Cut
    // them too, or the next write past them would make a stale slot whole,
    // and so readable, again.
    durable_end = log_->BlockOffset(block);
  }
  if (*file_bytes > durable_end) {
    recovery_.torn_tail_bytes = *file_bytes - durable_end;
    CAIRN_RETURN_IF_ERROR(log_->Truncate(durable_end));
  }
  watermark_.store((block << 32) | scan.end, std::memory_order_release);
  {
    MutexLock lock(&log_mu_);
    auto pending = std::make_unique<PendingBlock>();
    pending->buffer = std::make_unique<LogBlockBuffer>(
        block, log_->data_bytes(), log_->log_id());
    if (!pending->buffer->ok()) return ResourceExhaustedError("block buffer");
    pending->buffer->Resume(scan.end, scan.records, scan.chain,
                            scan.header_sequence, scan.header_used);
    blocks_.push_back(std::move(pending));
  }
  return RebuildLive(block + 1);
}

Status LogStore::RebuildLive(std::uint64_t blocks) {
  std::vector<std::uint64_t> live;
  try {
    live.assign(blocks, 0);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("live bytes table");
  }
  std::uint64_t total = 0;
  for (auto& part : partitions_) {
    MutexLock lock(&part->mu);
    for (auto& map : part->maps) {
      bool inside = true;
      (void)map->ForEachUntil([&](const RecordIndex::Entry& e) {
        if (e.value().block >= blocks) {
          inside = false;
          return ScanControl::kStop;
        }
        live[e.value().block] += e.value().length;
        total += e.value().length;
        return ScanControl::kContinue;
      });
      if (!inside) {
        return DataLossError("the index points past the log's last block");
      }
    }
  }
  MutexLock log_lock(&log_mu_);
  live_.swap(live);
  live_total_.store(total, std::memory_order_relaxed);
  log_blocks_.store(blocks, std::memory_order_relaxed);
  return Status();
}

void LogStore::AddLive(const RecordLocation& loc) {
  live_[loc.block] += loc.length;
  live_total_.store(live_total_.load(std::memory_order_relaxed) + loc.length,
                    std::memory_order_relaxed);
}

void LogStore::SubLive(const RecordLocation& loc) {
  CAIRN_CHECK(live_[loc.block] >= loc.length);
  live_[loc.block] -= loc.length;
  live_total_.store(live_total_.load(std::memory_order_relaxed) - loc.length,
                    std::memory_order_relaxed);
}

LogStoreSpace LogStore::Space() const {
  LogStoreSpace out;
  out.block_bytes = log_->block_bytes();
  MutexLock log_lock(&log_mu_);
  out.live_bytes_per_block = live_;
  out.live_bytes = live_total_.load(std::memory_order_relaxed);
  return out;
}

Status LogStore::ScanBlock(std::uint64_t block, std::uint32_t from,
                           std::uint64_t file_bytes, BlockScan* scan) {
  auto header = log_->ReadHeader(block);
  const bool has_header = header.ok();
  if (!has_header && header.status().code() != StatusCode::kNotFound) {
    return header.status();
  }
  const std::string where = "block " + std::to_string(block);
  const std::uint64_t data_begin =
      log_->BlockOffset(block) + kLogBlockDataOffset;
  const std::size_t avail =
      file_bytes > data_begin
          ? static_cast<std::size_t>(std::min<std::uint64_t>(
                file_bytes - data_begin, log_->data_bytes()))
          : 0;
  const std::uint32_t boundary = has_header ? header->used_bytes : 0;
  if (boundary > avail) {
    return DataLossError(where +
                         ": its header names bytes past the file's end");
  }
  std::string data(avail, '\0');
  if (avail > 0) {
    CAIRN_RETURN_IF_ERROR(log_->ReadData(block, 0, avail, data.data()));
  }
  const std::span<const char> bytes(data.data(), data.size());
  std::uint32_t offset = 0;
  bool met_from = false;
  bool met_boundary = !has_header;
  for (;;) {
    if (offset == from) met_from = true;
    if (has_header && offset == boundary) {
      // Below a header's boundary every record was synced before the header
      // was written: they must all be there, matching its chain.
      if (scan->records != header->record_count ||
          scan->chain != header->chain_checksum) {
        return DataLossError(where +
                             " does not match its header's record chain");
      }
      met_boundary = true;
    }
    if (scan->sealed || offset >= avail) break;
    LogRecordView record;
    Status s = DecodeLogRecord(bytes, offset, {log_->log_id(), block, offset},
                               &record);
    if (!s.ok()) {
      if (offset < boundary) {
        return DataLossError(where + ", record at offset " +
                             std::to_string(offset) + ": " +
                             std::string(s.message()));
      }
      break;  // the end of what was written and synced: a torn tail
    }
    scan->chain = LogChainChecksum(scan->chain, record.checksum);
    ++scan->records;
    if (record.type == LogRecordType::kSeal) {
      scan->sealed = true;
    } else if (offset >= from) {
      const RecordLocation loc{static_cast<std::uint32_t>(block), offset,
                               record.bytes, RecordLocation::kDurable};
      CAIRN_RETURN_IF_ERROR(ApplyReplayed(record, loc));
      ++recovery_.records_replayed;
    }
    offset += record.bytes;
  }
  if (!met_boundary) {
    return DataLossError(where + ": a record crosses its header's boundary");
  }
  if (!met_from) {
    return DataLossError(where + " does not reach the checkpoint position " +
                         std::to_string(from) + " at a record boundary");
  }
  scan->end = offset;
  if (has_header) {
    scan->header_sequence = header->sequence;
    scan->header_used = header->used_bytes;
  }
  return Status();
}

Status LogStore::ApplyReplayed(const LogRecordView& record,
                               RecordLocation loc) {
  if (record.db >= options_.databases) {
    return InvalidArgumentError("the log holds database " +
                                std::to_string(record.db) +
                                ", over options.databases");
  }
  if (record.type == LogRecordType::kFlushDb) {
    for (auto& part : partitions_) {
      MutexLock lock(&part->mu);
      (void)part->maps[record.db]->Detach();
    }
    return Status();
  }
  if (record.key.empty() || record.key.size() > options_.max_key_bytes) {
    return InvalidArgumentError("the log holds a key over max_key_bytes");
  }
  Partition& part = *partitions_[PartitionOf(record.key)];
  MutexLock lock(&part.mu);
  RecordIndex& map = *part.maps[record.db];
  if (record.type == LogRecordType::kDelete) {
    (void)map.Erase(record.key);
    return Status();
  }
  auto r = map.Upsert(record.key, loc);
  return r.ok() ? Status() : ToStatus(r.outcome);
}

Status LogStore::LoadCheckpoint(std::uint64_t* block, std::uint32_t* offset) {
  Result<CheckpointFile> read =
      CheckpointFile::Read(*env_, CheckpointPath(dir_));
  if (!read.ok()) return read.status();
  const CheckpointFile& checkpoint = *read;
  const std::uint32_t partitions = checkpoint.partitions();
  const std::uint32_t databases = checkpoint.databases();
  *block = checkpoint.block();
  *offset = checkpoint.offset();
  if (databases > options_.databases) {
    return InvalidArgumentError("the checkpoint holds " +
                                std::to_string(databases) +
                                " databases, over options.databases");
  }
  // Presize every map from the stored counts (X9) when the partitioning
  // is the same; otherwise count the entries first.
  std::vector<std::uint64_t> counts(options_.partitions * options_.databases);
  if (partitions == options_.partitions) {
    const std::uint64_t maps = std::uint64_t{partitions} * databases;
    for (std::uint64_t m = 0; m < maps; ++m) {
      counts[(m / databases) * options_.databases + m % databases] =
          checkpoint.map_count(m);
    }
  }
  // Calls fn(db, key, loc) for every entry, checking each against the
  // options as it goes (the checkpoint checks it against its own header).
  auto for_each_entry = [&](auto&& fn) -> Status {
    return checkpoint.ForEachEntry([&](const CheckpointEntry& e) -> Status {
      if (e.db >= options_.databases || e.key.empty() ||
          e.key.size() > options_.max_key_bytes) {
        return InvalidArgumentError(
            "the checkpoint holds a key or database out of range");
      }
      const RecordLocation& loc = e.location;
      if (loc.length == 0 || loc.offset > log_->data_bytes() ||
          loc.length > log_->data_bytes() - loc.offset) {
        return DataLossError("a checkpoint entry runs past its block");
      }
      return fn(e.db, e.key, e.location);
    });
  };
  if (partitions != options_.partitions) {
    CAIRN_RETURN_IF_ERROR(for_each_entry(
        [&](std::uint32_t db, std::string_view key, const RecordLocation&) {
          ++counts[PartitionOf(key) * options_.databases + db];
          return Status();
        }));
  }
  std::uint64_t rehashes_before = 0;
  for (std::size_t part_index = 0; part_index < options_.partitions;
       ++part_index) {
    Partition& part = *partitions_[part_index];
    MutexLock lock(&part.mu);
    for (std::uint32_t d = 0; d < options_.databases; ++d) {
      const std::uint64_t n = counts[part_index * options_.databases + d];
      if (n != 0 && part.maps[d]->PreallocateForExpectedSize(n) !=
                        ScanHashMapOutcome::kOk) {
        return ResourceExhaustedError("presizing a map");
      }
      rehashes_before += part.maps[d]->stats().rehashes_started;
    }
  }
  CAIRN_RETURN_IF_ERROR(for_each_entry(
      [&](std::uint32_t db, std::string_view key, const RecordLocation& loc) {
        Partition& part = *partitions_[PartitionOf(key)];
        MutexLock lock(&part.mu);
        auto r = part.maps[db]->Insert(key, loc);
        if (r.outcome == ScanHashMapOutcome::kAlreadyExists) {
          return DataLossError("the checkpoint holds a key twice");
        }
        return r.ok() ? Status() : ToStatus(r.outcome);
      }));
  recovery_.checkpoint_entries = checkpoint.entries();
  std::uint64_t rehashes_after = 0;
  for (auto& part : partitions_) {
    MutexLock lock(&part->mu);
    for (auto& map : part->maps)
      rehashes_after += map->stats().rehashes_started;
  }
  recovery_.rehashes_during_load = rehashes_after - rehashes_before;
  return Status();
}

// --- Writes -----------------------------------------------------------------

Result<RecordLocation> LogStore::AppendLocked(LogRecordType type,
                                              std::uint32_t db,
                                              std::string_view key,
                                              std::string_view value,
                                              LogBlockBuffer::Mark* mark) {
  const std::size_t bytes = LogRecordBytes(key.size(), value.size());
  PendingBlock* current = blocks_.back().get();
  if (!current->buffer->Fits(bytes)) {
    // Seal the current block and open the next one.
    const std::uint64_t next = current->buffer->block() + 1;
    if (next > UINT32_MAX) return ResourceExhaustedError("log is full");
    std::unique_ptr<LogBlockBuffer> buffer;
    if (!spare_buffers_.empty()) {
      buffer = std::move(spare_buffers_.back());
      spare_buffers_.pop_back();
      buffer->Reset(next);
    } else {
      buffer.reset(new (std::nothrow) LogBlockBuffer(next, log_->data_bytes(),
                                                     log_->log_id()));
      if (buffer == nullptr || !buffer->ok()) {
        return ResourceExhaustedError("block buffer");
      }
    }
    std::unique_ptr<PendingBlock> pending(new (std::nothrow) PendingBlock);
    if (pending == nullptr) return ResourceExhaustedError("pending block");
    try {
      if (live_.size() <= next) live_.resize(next + 1, 0);
    } catch (const std::bad_alloc&) {
      return ResourceExhaustedError("live bytes table");
    }
    pending->buffer = std::move(buffer);
    try {
      blocks_.push_back(std::move(pending));
    } catch (const std::bad_alloc&) {
      return ResourceExhaustedError("pending block");
    }
    // The full block ends with its seal, so recovery goes on to the next.
    current->buffer->Seal();
    sealed_blocks_.fetch_add(1, std::memory_order_relaxed);
    log_blocks_.store(live_.size(), std::memory_order_relaxed);
    current = blocks_.back().get();
  }
  *mark = current->buffer->mark();
  const std::uint32_t offset = current->buffer->Append(type, db, key, value);
  return RecordLocation{static_cast<std::uint32_t>(current->buffer->block()),
                        offset, static_cast<std::uint32_t>(bytes), 0};
}

Status LogStore::MakeRoom() {
  if (sealed_blocks_.load(std::memory_order_relaxed) <
      options_.max_sealed_blocks) {
    return Status();
  }
  // The writer flushes the waiting blocks itself (a flush attempt of its
  // own, not the group's shortcut: the blocks must also be released). If
  // that fails (a full disk), the write fails with the disk's error before
  // it appends, and so does every later one until a flush succeeds: memory
  // stays bounded.
  MutexLock flush_lock(&flush_mu_);
  backpressure_flushes_.Add();
  try {
    return FlushLocked(nullptr, /*all_headers=*/false);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("out of memory flushing the store");
  }
}

Status LogStore::Set(std::uint32_t db, std::string_view key,
                     std::string_view value) {
  Status s = SetImpl(db, key, value, nullptr);
  ops_.Add(s.ok() ? kSetOk : kSetFailed);
  return s;
}

Status LogStore::SetDurable(std::uint32_t db, std::string_view key,
                            std::string_view value) {
  const std::uint64_t failures = FailuresSoFar();
  std::uint64_t end = 0;
  Status s = SetImpl(db, key, value, &end);
  ops_.Add(s.ok() ? kSetOk : kSetFailed);
  if (!s.ok()) return s;
  return TimedWait(end, failures, nullptr);
}

Status LogStore::Del(std::uint32_t db, std::string_view key) {
  return DelImpl(db, key, nullptr);
}

Status LogStore::DelImpl(std::uint32_t db, std::string_view key,
                         std::uint64_t* end) {
  Status s = DelUncounted(db, key, end);
  ops_.Add(s.ok()                              ? kDelOk
           : s.code() == StatusCode::kNotFound ? kDelMissing
                                               : kDelFailed);
  return s;
}

Status LogStore::TimedWait(std::uint64_t target, std::uint64_t failures,
                           FlushReport* report) {
  const std::int64_t start = clock_->NowNanos();
  Status s = WaitDurable(target, failures, report);
  durable_wait_seconds_.Record(
      static_cast<std::uint64_t>(clock_->NowNanos() - start));
  durable_waits_.Add();
  if (!s.ok()) durable_wait_failures_.Add();
  return s;
}

Status LogStore::DelDurable(std::uint32_t db, std::string_view key) {
  const std::uint64_t failures = FailuresSoFar();
  std::uint64_t end = 0;
  CAIRN_RETURN_IF_ERROR(DelImpl(db, key, &end));
  return TimedWait(end, failures, nullptr);
}

Status LogStore::SetImpl(std::uint32_t db, std::string_view key,
                         std::string_view value, std::uint64_t* end) {
  if (closed_.load(std::memory_order_acquire)) {
    return FailedPreconditionError("store is closed");
  }
  CAIRN_RETURN_IF_ERROR(Validate(db, key, value));
  CAIRN_RETURN_IF_ERROR(MakeRoom());
  Partition& part = *partitions_[PartitionOf(key)];
  {
    MutexLock partition_lock(&part.mu);
    RecordIndex& map = *part.maps[db];
    const std::uint64_t hash = map.HashOf(key);
    // The record this Set supersedes, if any: its bytes stop being live.
    const RecordIndex::Entry* previous = map.Find(key, hash);
    const RecordLocation superseded =
        previous != nullptr ? previous->value() : RecordLocation{};
    MutexLock log_lock(&log_mu_);
    LogBlockBuffer::Mark mark;
    auto loc = AppendLocked(LogRecordType::kSet, db, key, value, &mark);
    if (!loc.ok()) return loc.status();
    PendingBlock& block = *blocks_.back();
    const bool receipts = options_.mode == FlushMode::kReceipts;
    if (receipts) {
      try {
        block.receipts.emplace_back();
      } catch (const std::bad_alloc&) {
        block.buffer->Rollback(mark);
        return ResourceExhaustedError("receipt");
      }
    }
    auto r = map.Upsert(key, *loc);
    if (!r.ok()) {
      block.buffer->Rollback(mark);
      if (receipts) block.receipts.pop_back();
      return ToStatus(r.outcome);
    }
    AddLive(*loc);
    if (previous != nullptr) SubLive(superseded);
    if (receipts) {
      FlushReceipt& receipt = block.receipts.back();
      receipt.address = r.entry->address();
      receipt.generation = map.generation();
      receipt.hash32 = RecordIndex::Hash32(hash);
      receipt.tag = RecordIndex::TagOf(hash);
      receipt.map = static_cast<std::uint32_t>(
          PartitionOf(key) * options_.databases + db);
      receipt.block = loc->block;
      receipt.offset = loc->offset;
      receipt.length = loc->length;
    }
    if (end != nullptr) *end = EndOf(*loc);
  }
  return Status();
}

Status LogStore::DelUncounted(std::uint32_t db, std::string_view key,
                              std::uint64_t* end) {
  if (closed_.load(std::memory_order_acquire)) {
    return FailedPreconditionError("store is closed");
  }
  CAIRN_RETURN_IF_ERROR(Validate(db, key, {}));
  CAIRN_RETURN_IF_ERROR(MakeRoom());
  Partition& part = *partitions_[PartitionOf(key)];
  {
    MutexLock partition_lock(&part.mu);
    RecordIndex& map = *part.maps[db];
    const RecordIndex::Entry* entry = map.Find(key);
    if (entry == nullptr) return NotFoundError();
    const RecordLocation deleted = entry->value();
    MutexLock log_lock(&log_mu_);
    LogBlockBuffer::Mark mark;
    auto loc = AppendLocked(LogRecordType::kDelete, db, key, {}, &mark);
    if (!loc.ok()) return loc.status();
    CAIRN_CHECK(map.Erase(key) == ScanHashMapOutcome::kOk);
    SubLive(deleted);
    if (end != nullptr) *end = EndOf(*loc);
  }
  return Status();
}

Status LogStore::FlushDb(std::uint32_t db) {
  if (closed_.load(std::memory_order_acquire)) {
    return FailedPreconditionError("store is closed");
  }
  if (db >= options_.databases) {
    return InvalidArgumentError("database " + std::to_string(db) +
                                " out of range");
  }
  CAIRN_RETURN_IF_ERROR(MakeRoom());
  std::vector<ScanHashMapPopulation> dropped;
  try {
    dropped.reserve(partitions_.size());
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("FlushDb");
  }
  LockAllPartitions();
  Status status;
  {
    MutexLock log_lock(&log_mu_);
    LogBlockBuffer::Mark mark;
    auto loc = AppendLocked(LogRecordType::kFlushDb, db, {}, {}, &mark);
    if (!loc.ok()) {
      status = loc.status();
    } else {
      // Every record of the database stops being live.
      for (auto& part : partitions_) {
        part->mu.AssertHeld();
        (void)part->maps[db]->ForEachUntil([&](const RecordIndex::Entry& e) {
          SubLive(e.value());
          return ScanControl::kContinue;
        });
      }
    }
  }
  if (status.ok()) {
    for (auto& part : partitions_) {
      part->mu.AssertHeld();
      dropped.push_back(part->maps[db]->Detach());
    }
  }
  UnlockAllPartitions();
  dropped.clear();  // frees the populations outside the locks
  if (status.ok()) flushdbs_.Add();
  return status;
}

void LogStore::VisitMetrics(MetricVisitor& visitor,
                            std::span<const MetricLabel> labels) const {
  LabelScope v(visitor, labels);
  auto op = [&](std::string_view name, std::string_view help, Op a,
                std::string_view a_result, Op b, std::string_view b_result,
                Op c, std::string_view c_result) {
    const MetricLabel la[] = {{"result", a_result}};
    const MetricLabel lb[] = {{"result", b_result}};
    const MetricLabel lc[] = {{"result", c_result}};
    v.CounterValue(name, help, ops_.Value(a), la);
    v.CounterValue(name, help, ops_.Value(b), lb);
    if (c != kOps) v.CounterValue(name, help, ops_.Value(c), lc);
  };
  op("cairn_logstore_sets_total", "Set and SetDurable calls, by result.",
     kSetOk, "ok", kSetFailed, "error", kOps, "");
  op("cairn_logstore_deletes_total", "Del and DelDurable calls, by result.",
     kDelOk, "ok", kDelMissing, "not_found", kDelFailed, "error");
  op("cairn_logstore_gets_total", "Get calls, by result.", kGetHit, "hit",
     kGetMiss, "miss", kGetFailed, "error");
  v.CounterValue("cairn_logstore_flushdbs_total",
                 "FlushDb calls that dropped a database.", flushdbs_.Value());
  v.CounterValue("cairn_logstore_durable_waits_total",
                 "SetDurable, DelDurable and Flush waits for durability.",
                 durable_waits_.Value());
  v.CounterValue("cairn_logstore_durable_wait_failures_total",
                 "Durable waits that returned an error (a failed sync).",
                 durable_wait_failures_.Value());
  v.HistogramValue("cairn_logstore_durable_wait_seconds",
                   "Time from the append to the acknowledgement of a durable "
                   "wait (its group's writes and sync included).",
                   durable_wait_seconds_.Snapshot());
  v.CounterValue("cairn_logstore_flushes_total",
                 "Flushes run (by a group leader, back-pressure, checkpoint "
                 "or close).",
                 flushes_.Value());
  v.CounterValue("cairn_logstore_flush_failures_total",
                 "Flushes that returned an error.", flush_failures_.Value());
  v.CounterValue("cairn_logstore_backpressure_flushes_total",
                 "Flushes a writer ran because max_sealed_blocks full blocks "
                 "were waiting.",
                 backpressure_flushes_.Value());
  v.CounterValue("cairn_logstore_syncs_total", "fdatasync calls on the log.",
                 syncs_.Value());
  v.CounterValue("cairn_logstore_written_bytes_total",
                 "Record bytes written to the log by flushes.",
                 bytes_written_.Value());
  v.HistogramValue("cairn_logstore_flush_io_seconds",
                   "Time of a flush's writes and its one sync.",
                   flush_io_seconds_.Snapshot());
  v.CounterValue("cairn_logstore_checkpoints_total",
                 "Checkpoints written or attempted.", checkpoints_.Value());
  v.CounterValue("cairn_logstore_checkpoint_failures_total",
                 "Checkpoints that returned an error.",
                 checkpoint_failures_.Value());
  v.HistogramValue("cairn_logstore_checkpoint_seconds",
                   "Time of a checkpoint, while every writer waits.",
                   checkpoint_seconds_.Snapshot());
  v.GaugeValue(
      "cairn_logstore_sealed_blocks", "Full blocks waiting for a flush.",
      static_cast<double>(sealed_blocks_.load(std::memory_order_relaxed)));
  v.GaugeValue(
      "cairn_logstore_log_blocks",
      "Blocks in the log, the one being filled included.",
      static_cast<double>(log_blocks_.load(std::memory_order_relaxed)));
  v.GaugeValue(
      "cairn_logstore_live_bytes",
      "Bytes of the records the index points at, summed over blocks.",
      static_cast<double>(live_total_.load(std::memory_order_relaxed)));
  const std::uint64_t mark = watermark_.load(std::memory_order_acquire);
  v.GaugeValue("cairn_logstore_durable_block",
               "Block of the durable watermark.",
               static_cast<double>(mark >> 32));
  v.GaugeValue("cairn_logstore_recovered_records",
               "Records replayed from the log by Open.",
               static_cast<double>(recovery_.records_replayed));
  v.GaugeValue("cairn_logstore_recovered_torn_tail_bytes",
               "Bytes past the last valid record that Open cut off.",
               static_cast<double>(recovery_.torn_tail_bytes));
}

void LogStore::LockAllPartitions() {
  for (auto& part : partitions_) part->mu.Lock();
}
void LogStore::UnlockAllPartitions() {
  for (auto it = partitions_.rbegin(); it != partitions_.rend(); ++it) {
    (*it)->mu.Unlock();
  }
}

// --- Reads ------------------------------------------------------------------

bool LogStore::DurableByWatermark(const RecordLocation& loc) const noexcept {
  const std::uint64_t w = watermark_.load(std::memory_order_acquire);
  const std::uint64_t block = w >> 32;
  const std::uint64_t boundary = w & 0xffffffffu;
  return loc.block < block ||
         (loc.block == block &&
          loc.offset + std::uint64_t{loc.length} <= boundary);
}

namespace {
Status CheckRecord(const LogRecordView& record, std::string_view key,
                   std::uint32_t length) {
  if (record.type != LogRecordType::kSet || record.key != key ||
      record.bytes != length) {
    return DataLossError("the index points at a record of another key");
  }
  return Status();
}
}  // namespace

Status LogStore::ReadFromFile(const RecordLocation& loc, std::string_view key,
                              std::string* value) const {
  std::string record_bytes(loc.length, '\0');
  CAIRN_RETURN_IF_ERROR(
      log_->ReadData(loc.block, loc.offset, loc.length, record_bytes.data()));
  LogRecordView record;
  CAIRN_RETURN_IF_ERROR(DecodeLogRecord(
      std::span<const char>(record_bytes.data(), record_bytes.size()), 0,
      {log_->log_id(), loc.block, loc.offset}, &record));
  CAIRN_RETURN_IF_ERROR(CheckRecord(record, key, loc.length));
  value->assign(record.value);
  return Status();
}

Status LogStore::Get(std::uint32_t db, std::string_view key,
                     std::string* value) {
  Status s = GetUncounted(db, key, value);
  ops_.Add(s.ok()                              ? kGetHit
           : s.code() == StatusCode::kNotFound ? kGetMiss
                                               : kGetFailed);
  return s;
}

Status LogStore::GetUncounted(std::uint32_t db, std::string_view key,
                              std::string* value) {
  CAIRN_RETURN_IF_ERROR(Validate(db, key, {}));
  Partition& part = *partitions_[PartitionOf(key)];
  RecordLocation loc;
  {
    MutexLock partition_lock(&part.mu);
    const RecordIndex::Entry* entry = part.maps[db]->Find(key);
    if (entry == nullptr) return NotFoundError();
    loc = entry->value();
    if (!loc.durable()) {
      MutexLock log_lock(&log_mu_);
      if (!DurableByWatermark(loc)) {
        // Unflushed: its block is still in memory (a block is released only
        // once the watermark covers it, under log_mu_).
        const std::uint64_t first = blocks_.front()->buffer->block();
        CAIRN_CHECK(loc.block >= first && loc.block - first < blocks_.size());
        const LogBlockBuffer& buffer = *blocks_[loc.block - first]->buffer;
        LogRecordView record;
        CAIRN_RETURN_IF_ERROR(DecodeLogRecord(
            std::span<const char>(buffer.data(), buffer.used()), loc.offset,
            {log_->log_id(), loc.block, loc.offset}, &record));
        CAIRN_RETURN_IF_ERROR(CheckRecord(record, key, loc.length));
        value->assign(record.value);
        return Status();
      }
    }
  }
  // Durable records never change on disk: read without locks.
  return ReadFromFile(loc, key, value);
}

std::size_t LogStore::KeyCount(std::uint32_t db) {
  std::size_t n = 0;
  if (db >= options_.databases) return 0;
  for (auto& part : partitions_) {
    MutexLock lock(&part->mu);
    n += part->maps[db]->size();
  }
  return n;
}

bool LogStore::IndexSaysDurable(std::uint32_t db, std::string_view key) {
  if (db >= options_.databases || key.empty()) return false;
  Partition& part = *partitions_[PartitionOf(key)];
  MutexLock lock(&part.mu);
  const RecordIndex::Entry* entry = part.maps[db]->Find(key);
  return entry != nullptr && entry->value().durable();
}

// --- Flush, checkpoint, close -----------------------------------------------

Status LogStore::FlushIo(std::vector<FlushedBatch>* batches,
                         FlushReport* report) {
  struct BlockWrite {
    PendingBlock* pending = nullptr;
    std::uint32_t from = 0;
    LogBlockHeader snapshot;  // the block's state at the new boundary
    bool hint = false;        // write `header`
    LogBlockHeader header;    // names bytes an earlier sync made durable
    std::vector<FlushReceipt> receipts;
  };
  std::vector<BlockWrite> writes;
  writes.reserve(4);
  // Everything below the newest block's snapshot is durable once this
  // attempt succeeds (it writes every block's new bytes), also when that
  // block is empty.
  std::uint64_t newest = 0;
  {
    MutexLock log_lock(&log_mu_);
    const LogBlockBuffer& back = *blocks_.back()->buffer;
    newest = (back.block() << 32) | back.used();
    for (auto& pending : blocks_) {
      LogBlockBuffer& buffer = *pending->buffer;
      const bool data = buffer.flushed < buffer.used();
      // The hint is rewritten once the durable boundary is kLogHintStride
      // past the header on disk, so most flushes write one contiguous
      // range (full blocks, Checkpoint and Close write final headers).
      const bool hint =
          buffer.durable.used_bytes >= buffer.header_used + kLogHintStride;
      if (!data && !hint) continue;
      BlockWrite& w = writes.emplace_back();
      w.pending = pending.get();
      w.from = buffer.flushed;
      w.snapshot = buffer.HeaderAtUsed(0);
      w.hint = hint;
      // The hint names what an earlier sync made durable, never the bytes
      // this attempt writes (the crash argument in docs/flush.md).
      w.header = buffer.durable;
      w.header.sequence = buffer.sequence + 1;
      w.receipts.swap(pending->receipts);
    }
  }
  if (writes.empty()) {
    // Nothing new: every block is durable up to its used bytes.
    if (newest > watermark_.load(std::memory_order_acquire)) {
      watermark_.store(newest, std::memory_order_release);
    }
    return Status();
  }
  // The bytes below each snapshot never change again: no lock. Every write,
  // then one sync: the records are the commit point, the headers hints.
  const std::int64_t start = clock_->NowNanos();
  Status s;
  std::uint64_t position = 0;  // the furthest record end attempted
  for (BlockWrite& w : writes) {
    if (w.hint) {
      s = log_->WriteHeader(w.header);
      if (!s.ok()) break;
    }
    if (w.from < w.snapshot.used_bytes) {
      s = log_->WriteData(w.snapshot.block, w.from,
                          w.pending->buffer->data() + w.from,
                          w.snapshot.used_bytes - w.from);
      if (!s.ok()) break;
    }
  }
  if (s.ok()) {
    s = log_->Sync();
    if (report != nullptr) ++report->syncs;
  }
  const std::int64_t io = clock_->NowNanos() - start;
  flush_io_seconds_.Record(static_cast<std::uint64_t>(io));
  // Attempted positions cover every record below the last snapshot, also
  // those of blocks a failed write never reached.
  for (const BlockWrite& w : writes) {
    if (w.from < w.snapshot.used_bytes) {
      position = (w.snapshot.block << 32) | w.snapshot.used_bytes;
    }
  }
  {
    MutexLock log_lock(&log_mu_);
    for (BlockWrite& w : writes) {
      LogBlockBuffer& buffer = *w.pending->buffer;
      if (!s.ok()) {
        // Nothing advances: the retry rewrites these bytes from the buffer
        // and writes its hint into the same slot (same sequence), so the
        // other slot keeps the last synced header. Hand the receipts back.
        try {
          w.pending->receipts.insert(w.pending->receipts.begin(),
                                     w.receipts.begin(), w.receipts.end());
        } catch (const std::bad_alloc&) {
          // Those entries stay unmarked; Get still finds them in memory or,
          // once a later flush covers them, by the watermark.
        }
        continue;
      }
      if (w.hint) {
        buffer.sequence = w.header.sequence;
        buffer.header_used = w.header.used_bytes;
      }
      if (report != nullptr && w.from < w.snapshot.used_bytes) {
        ++report->blocks_written;
        report->bytes_written += w.snapshot.used_bytes - w.from;
      }
      buffer.flushed = w.snapshot.used_bytes;
      buffer.durable = w.snapshot;
    }
    if (s.ok()) watermark_.store(newest, std::memory_order_release);
  }
  if (report != nullptr) report->io_nanos += static_cast<std::uint64_t>(io);
  {
    // Wake the group: those whose records the sync covered, or its failure.
    MutexLock group_lock(&group_mu_);
    if (!s.ok() && position != 0) {
      ++failures_;
      failed_upto_ = position;
      failed_status_ = s;
    }
  }
  group_cv_.notify_all();
  if (!s.ok()) return s;
  for (BlockWrite& w : writes) {
    if (w.receipts.empty()) continue;
    try {
      batches->push_back({{static_cast<std::uint32_t>(w.snapshot.block),
                           w.snapshot.used_bytes},
                          std::move(w.receipts)});
    } catch (const std::bad_alloc&) {
      // As above: the watermark covers these records.
    }
  }
  return Status();
}

Status LogStore::WriteHeaders(bool all, FlushReport* report) {
  std::vector<std::pair<LogBlockBuffer*, LogBlockHeader>> headers;
  {
    MutexLock log_lock(&log_mu_);
    for (auto& pending : blocks_) {
      LogBlockBuffer& buffer = *pending->buffer;
      if (buffer.durable.used_bytes <= buffer.header_used) continue;
      // Without `all`, only blocks whose last bytes are durable: their
      // header is final.
      if (!all && !(buffer.sealed() && buffer.flushed == buffer.used())) {
        continue;
      }
      LogBlockHeader header = buffer.durable;
      header.sequence = buffer.sequence + 1;
      headers.emplace_back(pending->buffer.get(), header);
    }
  }
  if (headers.empty()) return Status();
  Status s;
  for (const auto& [buffer, header] : headers) {
    s = log_->WriteHeader(header);
    if (!s.ok()) return s;  // the sequence stays: the retry uses this slot
  }
  s = log_->Sync();
  if (report != nullptr) ++report->syncs;
  if (!s.ok()) return s;
  MutexLock log_lock(&log_mu_);
  for (const auto& [buffer, header] : headers) {
    buffer->sequence = header.sequence;
    buffer->header_used = header.used_bytes;
  }
  return Status();
}

void LogStore::RunPasses(std::vector<FlushedBatch>& batches,
                         FlushReport* report) {
  if (options_.mode != FlushMode::kReceipts) return;
  try {
    RunPassesOrThrow(batches, report);
  } catch (const std::bad_alloc&) {
    // Out of memory: the entries not marked stay durable by the watermark.
  }
}

void LogStore::RunPassesOrThrow(std::vector<FlushedBatch>& batches,
                                FlushReport* report) {
  const std::int64_t start = clock_->NowNanos();
  ReceiptPassStats total;
  const std::uint32_t databases = options_.databases;
  std::vector<FlushReceipt> sorted;
  std::vector<std::size_t> begin(partitions_.size() + 1);
  for (FlushedBatch& batch : batches) {
    // Group by partition (counting sort, stable), outside every lock.
    std::fill(begin.begin(), begin.end(), 0);
    for (const FlushReceipt& r : batch.receipts) ++begin[r.map / databases + 1];
    for (std::size_t p = 1; p < begin.size(); ++p) begin[p] += begin[p - 1];
    sorted.resize(batch.receipts.size());
    std::vector<std::size_t> next(begin.begin(), begin.end() - 1);
    for (const FlushReceipt& r : batch.receipts)
      sorted[next[r.map / databases]++] = r;
    for (std::size_t p = 0; p < partitions_.size(); ++p) {
      if (begin[p] == begin[p + 1]) continue;
      Partition& part = *partitions_[p];
      auto maps = [&part, databases](std::uint32_t id) -> RecordIndex* {
        part.mu.AssertHeld();  // ApplyReceiptsSliced holds it around calls
        return part.maps[id % databases].get();
      };
      total.Add(
          ApplyReceiptsSliced(std::span<const FlushReceipt>(sorted).subspan(
                                  begin[p], begin[p + 1] - begin[p]),
                              maps, batch.range, options_.pass, &part.mu));
    }
  }
  if (report != nullptr) {
    report->pass.Add(total);
    report->pass_nanos +=
        static_cast<std::uint64_t>(clock_->NowNanos() - start);
  }
}

void LogStore::ReleaseFlushedBlocks() {
  MutexLock log_lock(&log_mu_);
  // A full block goes once its bytes and its final header are durable.
  while (blocks_.size() > 1 &&
         blocks_.front()->buffer->flushed == blocks_.front()->buffer->used() &&
         blocks_.front()->buffer->header_used ==
             blocks_.front()->buffer->used()) {
    if (spare_buffers_.size() < 2) {
      try {
        spare_buffers_.push_back(std::move(blocks_.front()->buffer));
      } catch (const std::bad_alloc&) {
      }
    }
    blocks_.pop_front();
    sealed_blocks_.fetch_sub(1, std::memory_order_relaxed);
  }
}

Status LogStore::FlushLocked(FlushReport* report, bool all_headers) {
  std::vector<FlushedBatch> batches;
  FlushReport local;
  Status s = FlushIo(&batches, &local);
  // The records are durable (the group is already woken); full blocks and,
  // with all_headers, every block then get a final header, one more sync.
  if (s.ok()) s = WriteHeaders(all_headers, &local);
  RunPasses(batches, &local);
  ReleaseFlushedBlocks();
  AddReport(totals_, local);
  if (report != nullptr) AddReport(*report, local);
  CountFlush(local, s);
  return s;
}

void LogStore::CountFlush(const FlushReport& report, const Status& s) {
  flushes_.Add();
  if (!s.ok()) flush_failures_.Add();
  syncs_.Add(report.syncs);
  bytes_written_.Add(report.bytes_written);
}

void LogStore::AddReport(FlushReport& into, const FlushReport& r) {
  into.blocks_written += r.blocks_written;
  into.bytes_written += r.bytes_written;
  into.io_nanos += r.io_nanos;
  into.syncs += r.syncs;
  into.pass_nanos += r.pass_nanos;
  into.pass.Add(r.pass);
}

FlushReport LogStore::FlushTotals() {
  MutexLock flush_lock(&flush_mu_);
  return totals_;
}

std::uint64_t LogStore::FailuresSoFar() {
  MutexLock group_lock(&group_mu_);
  return failures_;
}

std::uint64_t LogStore::EndOf(const RecordLocation& loc) noexcept {
  return (std::uint64_t{loc.block} << 32) | (loc.offset + loc.length);
}

Status LogStore::Flush(FlushReport* report) {
  if (closed_.load(std::memory_order_acquire)) {
    return FailedPreconditionError("store is closed");
  }
  const std::uint64_t failures = FailuresSoFar();
  std::uint64_t target;
  {
    // The end of the last record appended: the newest block that holds one
    // (a block just opened may be empty, its append rolled back; the
    // watermark never names an empty block's start).
    MutexLock log_lock(&log_mu_);
    target = 0;
    for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
      const LogBlockBuffer& buffer = *(*it)->buffer;
      if (buffer.used() > 0 || std::next(it) == blocks_.rend()) {
        target = (buffer.block() << 32) | buffer.used();
        break;
      }
    }
  }
  return TimedWait(target, failures, report);
}

Status LogStore::WaitDurable(std::uint64_t target, std::uint64_t failures,
                             FlushReport* report) {
  std::unique_lock<Mutex> lock(group_mu_);
  for (;;) {
    // A sync that covered the target and failed fails it (F2), even if a
    // later one succeeded.
    if (failures_ != failures && failed_upto_ >= target) return failed_status_;
    if (watermark_.load(std::memory_order_acquire) >= target) return Status();
    if (leader_) {
      // A flush is in progress: it covers the target if its snapshot was
      // taken after the append; if not, the next leader's will.
      group_cv_.wait(lock);
      continue;
    }
    leader_ = true;
    lock.unlock();
    Status s;
    {
      MutexLock flush_lock(&flush_mu_);
      try {
        s = FlushLocked(report, /*all_headers=*/false);
      } catch (const std::bad_alloc&) {
        s = ResourceExhaustedError("out of memory flushing the store");
      }
    }
    lock.lock();
    leader_ = false;
    group_cv_.notify_all();
    if (failures_ != failures && failed_upto_ >= target) return failed_status_;
    if (watermark_.load(std::memory_order_acquire) >= target) return Status();
    // The attempt failed before it wrote the target (out of memory): its
    // error, rather than another attempt.
    if (!s.ok()) return s;
  }
}

Status LogStore::CheckpointLocked() {
  const std::int64_t start = clock_->NowNanos();
  std::vector<FlushedBatch> batches;
  FlushReport local;
  LockAllPartitions();
  Status s;
  try {
    s = FlushIo(&batches, &local);
    if (s.ok()) s = WriteHeaders(/*all=*/true, &local);
    if (s.ok()) {
      std::uint64_t block;
      std::uint32_t offset;
      {
        MutexLock log_lock(&log_mu_);
        block = blocks_.back()->buffer->block();
        offset = blocks_.back()->buffer->used();
      }
      s = WriteCheckpoint(block, offset);
    }
  } catch (...) {
    UnlockAllPartitions();  // out of memory in the file layer
    throw;
  }
  UnlockAllPartitions();
  RunPasses(batches, &local);
  ReleaseFlushedBlocks();
  AddReport(totals_, local);
  CountFlush(local, s);
  checkpoints_.Add();
  if (!s.ok()) checkpoint_failures_.Add();
  checkpoint_seconds_.Record(
      static_cast<std::uint64_t>(clock_->NowNanos() - start));
  return s;
}

Status LogStore::Checkpoint() {
  if (closed_.load(std::memory_order_acquire)) {
    return FailedPreconditionError("store is closed");
  }
  MutexLock flush_lock(&flush_mu_);
  try {
    return CheckpointLocked();
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("out of memory writing the checkpoint");
  }
}

Status LogStore::Close() {
  MutexLock flush_lock(&flush_mu_);
  if (closed_.exchange(true, std::memory_order_acq_rel)) return Status();
  try {
    return options_.checkpoint_on_close
               ? CheckpointLocked()
               : FlushLocked(nullptr, /*all_headers=*/true);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("out of memory closing the store");
  }
}

Status LogStore::WriteCheckpoint(std::uint64_t block, std::uint32_t offset) {
  std::string bytes;
  try {
    CheckpointEncoder encoder(static_cast<std::uint32_t>(options_.partitions),
                              options_.databases, block, offset);
    for (auto& part : partitions_) {
      for (auto& map : part->maps) encoder.AddMapCount(map->size());
    }
    for (auto& part : partitions_) {
      for (std::uint32_t db = 0; db < options_.databases; ++db) {
        const RecordIndex& map = *part->maps[db];
        StableScanCursor cursor = map.StableScanBegin();
        while (!cursor.done) {
          const ScanHashMapOutcome o = map.ScanStable(
              cursor,
              [&](const RecordIndex::Entry& e) {
                encoder.AddEntry(db, e.key(), e.value());
              },
              1024);
          CAIRN_CHECK(o == ScanHashMapOutcome::kOk);  // partitions are locked
        }
      }
    }
    bytes = std::move(encoder).Finish();
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("checkpoint buffer");
  }
  return flush_internal::WriteCheckpointFile(*env_, dir_, bytes, options_.sync);
}

CAIRN_NAMESPACE_END
