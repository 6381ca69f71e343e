// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/flush/log_store.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <new>
#include <string>
#include <utility>

#include "cairn/flush/internal/checkpoint.h"

CAIRN_NAMESPACE_BEGIN
namespace {

// Leaders that skip the delay after one timed out.
constexpr std::uint32_t kCommitDelayRest = 8;

using flush_internal::CheckpointEncoder;
using flush_internal::CheckpointEntry;
using flush_internal::CheckpointFile;
using flush_internal::CheckpointFiles;
using flush_internal::CheckpointPath;
using flush_internal::ListCheckpoints;

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
  if (options.max_commit_delay.count() < 0) {
    return InvalidArgumentError("max_commit_delay must not be negative");
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
  log_options.direct_io = options.direct_io;
  log_options.env = env;
  if (created) {
    Result<CheckpointFiles> orphan = ListCheckpoints(*env, dir);
    if (!orphan.ok()) return orphan.status();
    if (orphan->any) {
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
  {
    // The head block's number and slot (its first header) are made durable
    // before any of its records is written, and a head recovery sealed in
    // memory gets its seal written: one flush attempt.
    MutexLock flush_lock(&store->flush_mu_);
    FlushReport report;
    bool more = false;
    CAIRN_RETURN_IF_ERROR(store->FlushIo(&report, &more));
    CAIRN_RETURN_IF_ERROR(store->WriteHeaders(/*all=*/false, &report));
    store->ReleaseFlushedBlocks();
    store->opened_ = true;
  }
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
      log_(std::move(log)),
      live_chunks_(std::make_unique<std::atomic<std::atomic<std::uint64_t>*>[]>(
          kLiveChunks)),
      pending_ring_(std::make_unique<PendingRingEntry[]>(kPendingRing)) {
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
  auto file_bytes = log_->FileBytes();
  if (!file_bytes.ok()) return file_bytes.status();
  const std::uint64_t block_bytes = log_->block_bytes();
  // Every block slot the file reaches into, the last one maybe cut short.
  const std::uint64_t file_slots =
      *file_bytes > kLogFileHeaderBytes
          ? (*file_bytes - kLogFileHeaderBytes + block_bytes - 1) / block_bytes
          : 0;
  if (file_slots > RecordLocation::kMaxSlots) {
    return DataLossError("the log file is larger than its format allows");
  }
  // 1. Which block each slot holds: its newest valid header's number.
  struct Found {
    std::uint64_t block;
    std::uint32_t slot;
    bool has_header;
    LogBlockHeader header;
  };
  std::vector<Found> found;
  std::vector<std::uint32_t> headerless;
  for (std::uint32_t slot = 0; slot < file_slots; ++slot) {
    auto header = log_->ReadHeader(slot);
    if (header.ok()) {
      found.push_back({header->block, slot, true, *header});
    } else if (header.status().code() == StatusCode::kNotFound) {
      headerless.push_back(slot);
    } else {
      return header.status();
    }
  }
  auto by_block = [](const Found& a, const Found& b) {
    return a.block < b.block;
  };
  std::sort(found.begin(), found.end(), by_block);
  for (std::size_t i = 1; i < found.size(); ++i) {
    if (found[i].block == found[i - 1].block) {
      return DataLossError("block " + std::to_string(found[i].block) +
                           " is claimed by two slots");
    }
  }
  // A slot whose two header slots are both damaged still holds its block's
  // records, which validate themselves: its block is one of the numbers no
  // header names (or the one after the last named), and its first record
  // tells which (a slot never written, or whose first header was torn,
  // holds no valid record of any).
  const std::uint64_t max_named = found.empty() ? 0 : found.back().block + 1;
  std::vector<std::uint64_t> missing;
  for (std::uint64_t b = 0, i = 0; b <= max_named && missing.size() < 4096;
       ++b) {
    if (i < found.size() && found[i].block == b) {
      ++i;
    } else {
      missing.push_back(b);
    }
  }
  for (std::uint32_t slot : headerless) {
    if (missing.empty()) break;
    const std::uint64_t data_at = log_->BlockOffset(slot) + kLogBlockDataOffset;
    if (*file_bytes < data_at + kLogRecordHeaderBytes) continue;
    char head[kLogRecordHeaderBytes];
    CAIRN_RETURN_IF_ERROR(log_->ReadData(slot, 0, sizeof(head), head));
    const std::size_t bytes = LogRecordBytesFromHeader(head);
    if (bytes > log_->data_bytes() || data_at + bytes > *file_bytes) continue;
    std::string record(bytes, '\0');
    CAIRN_RETURN_IF_ERROR(log_->ReadData(slot, 0, bytes, record.data()));
    for (auto it = missing.begin(); it != missing.end(); ++it) {
      LogRecordView view;
      if (DecodeLogRecord(std::span<const char>(record.data(), record.size()),
                          0, {log_->log_id(), *it, 0}, &view)
              .ok()) {
        found.push_back({*it, slot, false, LogBlockHeader{}});
        missing.erase(it);
        break;
      }
    }
  }
  std::sort(found.begin(), found.end(), by_block);
  std::map<std::uint64_t, std::uint32_t> slot_of;
  for (const Found& f : found) slot_of[f.block] = f.slot;

  // 2. The checkpoint, located through the slots.
  std::uint64_t start_block = 0;
  std::uint32_t start_offset = 0;
  std::uint64_t reach = 0;
  // The newest generation is in force (older ones are left by a crash
  // before the newer's cleanup).
  Result<CheckpointFiles> checkpoints = ListCheckpoints(*env_, dir_);
  if (!checkpoints.ok()) return checkpoints.status();
  const bool has_checkpoint = checkpoints->any;
  {
    MutexLock compact_lock(&compact_mu_);
    checkpoint_generation_ = checkpoints->newest;
  }
  if (has_checkpoint) {
    CAIRN_RETURN_IF_ERROR(
        LoadCheckpoint(CheckpointPath(dir_, checkpoints->newest), slot_of,
                       &start_block, &start_offset, &reach));
    recovery_.from_checkpoint = true;
    // The checkpoint's block may be gone (compacted, or its first header
    // torn while it held no record); records past the position must not.
    if ((found.empty() || found.back().block < start_block) &&
        start_offset > 0) {
      return DataLossError(
          "the log holds no block at or after the checkpoint's position");
    }
  }

  // 3. Replay in block order from the checkpoint's position; the first
  // block without a valid seal is the head (the last block).
  std::size_t head = found.size();
  BlockScan scan;
  std::vector<bool> flushdb(found.size(), false);
  for (std::size_t i = 0; i < found.size(); ++i) {
    const Found& f = found[i];
    if (f.block < start_block) continue;  // before the checkpoint
    scan = BlockScan();
    const std::uint32_t from = f.block == start_block ? start_offset : 0;
    CAIRN_RETURN_IF_ERROR(ScanBlock(f.block, f.slot,
                                    f.has_header ? &f.header : nullptr, from,
                                    *file_bytes, &scan));
    if (scan.records > 0) ++recovery_.blocks_replayed;
    flushdb[i] = scan.flushdb;
    if (!scan.sealed) {
      head = i;
      break;
    }
  }
  // The checkpoint's entries may name records past its position (appended
  // while its copy ran); replay must have reached every one of them, else
  // an entry would name bytes the log lost.
  const std::uint64_t replayed_to =
      head < found.size() ? (found[head].block << 32) | scan.end
      : found.empty()     ? 0
                          : (found.back().block + 1) << 32;
  if (reach > replayed_to) {
    return DataLossError("the checkpoint names a record at block " +
                         std::to_string(reach >> 32) + " offset " +
                         std::to_string(static_cast<std::uint32_t>(reach)) +
                         " past the log's valid records");
  }
  // Past the head no header may name records: a header names bytes an
  // earlier sync made durable, and those came after the head's seal, so the
  // head lost durable bytes. A later block whose header names nothing was
  // opened (its number and slot made durable) before its records were
  // written: those were never acknowledged, and its slot is free.
  for (std::size_t i = head + 1; i < found.size(); ++i) {
    if (found[i].has_header && found[i].header.used_bytes > 0) {
      return DataLossError("block " + std::to_string(found[head].block) +
                           " ends at offset " + std::to_string(scan.end) +
                           " without a seal but block " +
                           std::to_string(found[i].block) +
                           " has a header: durable records are damaged");
    }
  }
  const std::uint64_t max_seen = found.empty() ? 0 : found.back().block + 1;
  const std::size_t accepted = head < found.size() ? head + 1 : found.size();
  std::uint32_t last_slot = 0;  // one past the highest accepted slot
  for (std::size_t i = 0; i < accepted; ++i) {
    last_slot = std::max(last_slot, found[i].slot + 1);
  }
  // 4. Cut the file after the last accepted block, and, when the head is
  // that block, where its valid records end (the torn tail): the bytes
  // past them, a record the crashed process wrote past a torn one
  // included, must not pass again once new records fill the gap. A head
  // that sits before another accepted block cannot be cut: it is sealed
  // where its records end (in memory; the next flush writes the seal) and
  // a new block opens, so recovery never reads past that seal.
  const bool head_found = head < found.size();
  const bool head_last = head_found && found[head].slot + 1 == last_slot;
  std::uint64_t cut = log_->BlockOffset(last_slot);
  if (head_last) {
    cut = log_->BlockOffset(found[head].slot) + kLogBlockDataOffset + scan.end;
  }
  {
    MutexLock lock(&log_mu_);
    slots_ = last_slot;
    for (std::uint32_t slot = 0; slot < last_slot; slot += kLiveChunk) {
      if (!EnsureLiveLocked(slot)) return ResourceExhaustedError("live bytes");
    }
    for (std::size_t i = 0; i < accepted; ++i) {
      table_[found[i].block] = BlockInfo{found[i].slot, flushdb[i]};
    }
  }
  // Every index entry must name a block the log holds (a checkpoint entry
  // of a compacted block is superseded by its copy during replay): checked
  // before the file is touched.
  CAIRN_RETURN_IF_ERROR(RebuildLive());
  if (*file_bytes > cut) {
    recovery_.torn_tail_bytes = *file_bytes - cut;
    CAIRN_RETURN_IF_ERROR(log_->Truncate(cut));
  }
  // The blocks dropped after the head that the cut left: wipe them, so a
  // later recovery never takes one for an unsealed block before the
  // blocks opened from now on (Open syncs this before it returns, so
  // before any new block's records are written).
  for (std::size_t i = head_found ? head + 1 : found.size(); i < found.size();
       ++i) {
    if (found[i].slot < last_slot) {
      CAIRN_RETURN_IF_ERROR(log_->Wipe(found[i].slot));
    }
  }
  MutexLock lock(&log_mu_);
  std::vector<bool> used(last_slot, false);
  for (std::size_t i = 0; i < accepted; ++i) used[found[i].slot] = true;
  for (std::uint32_t slot = last_slot; slot-- > 0;) {
    if (!used[slot]) free_slots_.push_back(slot);
  }
  // Never below the checkpoint's block: replay skips blocks before it.
  next_block_ = std::max<std::uint64_t>(max_seen, start_block);
  has_checkpoint_ = has_checkpoint;
  checkpoint_position_ = (start_block << 32) | start_offset;
  std::uint64_t watermark = 0;
  if (head_found) {
    const Found& f = found[head];
    auto pending = std::make_unique<PendingBlock>();
    pending->buffer = std::make_unique<LogBlockBuffer>(
        f.block, log_->data_bytes(), log_->log_id(), f.slot);
    if (!pending->buffer->ok()) return ResourceExhaustedError("block buffer");
    pending->buffer->Resume(scan.end, scan.records, scan.chain,
                            scan.header_sequence, scan.header_used);
    CAIRN_RETURN_IF_ERROR(pending->buffer->LoadBoundaryPage(*log_));
    watermark = (f.block << 32) | scan.end;
    if (!head_last) {
      pending->buffer->Seal();
      sealed_blocks_.fetch_add(1, std::memory_order_relaxed);
    }
    blocks_.push_back(std::move(pending));
  }
  if (!head_found || !head_last) {
    // A new block after the last one, numbered past every number a header
    // named (a discarded block's included: its stale records must never
    // pass again).
    Result<std::uint32_t> slot = AllocateSlotLocked();
    if (!slot.ok()) return slot.status();
    const std::uint64_t block = next_block_++;
    if (block > UINT32_MAX) return ResourceExhaustedError("log is full");
    auto pending = std::make_unique<PendingBlock>();
    pending->buffer = std::make_unique<LogBlockBuffer>(
        block, log_->data_bytes(), log_->log_id(), *slot);
    if (!pending->buffer->ok()) return ResourceExhaustedError("block buffer");
    table_[block] = BlockInfo{*slot, false};
    if (!head_found) watermark = block << 32;
    blocks_.push_back(std::move(pending));
  } else {
    next_block_ = std::max(next_block_, found[head].block + 1);
  }
  for (auto& pending : blocks_) RingInsertLocked(pending.get());
  open_.store(blocks_.back().get(), std::memory_order_release);
  watermark_.store(watermark, std::memory_order_release);
  log_slots_.store(slots_, std::memory_order_relaxed);
  log_blocks_.store(table_.size(), std::memory_order_relaxed);
  return Status();
}

Result<std::uint32_t> LogStore::AllocateSlotLocked() {
  if (!free_slots_.empty()) {
    const std::uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  if (slots_ >= RecordLocation::kMaxSlots) {
    return ResourceExhaustedError("log is full");
  }
  if (!EnsureLiveLocked(slots_)) return ResourceExhaustedError("live bytes");
  log_slots_.store(slots_ + 1, std::memory_order_relaxed);
  return slots_++;
}

Status LogStore::RebuildLive() {
  std::map<std::uint64_t, std::uint64_t> live;
  std::uint64_t total = 0;
  {
    MutexLock log_lock(&log_mu_);
    for (const auto& [block, info] : table_) live[block] = 0;
  }
  for (auto& part : partitions_) {
    MutexLock lock(&part->mu);
    for (auto& map : part->maps) {
      bool inside = true;
      (void)map->ForEachUntil([&](const RecordIndex::Entry& e) {
        auto it = live.find(e.value().block);
        if (it == live.end()) {
          inside = false;
          return ScanControl::kStop;
        }
        it->second += e.value().length;
        total += e.value().length;
        return ScanControl::kContinue;
      });
      if (!inside) {
        return DataLossError(
            "the index points at a block the log does not hold");
      }
    }
  }
  MutexLock log_lock(&log_mu_);
  for (auto& [block, info] : table_) {
    LiveOf(info.slot).store(live[block], std::memory_order_relaxed);
  }
  live_total_.store(total, std::memory_order_relaxed);
  log_blocks_.store(table_.size(), std::memory_order_relaxed);
  return Status();
}

bool LogStore::EnsureLiveLocked(std::uint32_t slot) {
  const std::size_t chunk = slot / kLiveChunk;
  if (chunk >= kLiveChunks) return false;
  if (live_chunks_[chunk].load(std::memory_order_relaxed) != nullptr) {
    return true;
  }
  std::unique_ptr<std::atomic<std::uint64_t>[]> counters(
      new (std::nothrow) std::atomic<std::uint64_t>[kLiveChunk]());
  if (counters == nullptr) return false;
  try {
    live_storage_.push_back(std::move(counters));
  } catch (const std::bad_alloc&) {
    return false;
  }
  // Release: a writer reaches the slot through a block published after
  // this (open_) or an index entry naming such a block.
  live_chunks_[chunk].store(live_storage_.back().get(),
                            std::memory_order_release);
  return true;
}

std::atomic<std::uint64_t>& LogStore::LiveOf(
    std::uint32_t slot) const noexcept {
  return live_chunks_[slot / kLiveChunk].load(
      std::memory_order_acquire)[slot % kLiveChunk];
}

void LogStore::AddLive(const RecordLocation& loc) noexcept {
  LiveOf(loc.slot()).fetch_add(loc.length, std::memory_order_relaxed);
  live_total_.fetch_add(loc.length, std::memory_order_relaxed);
}

void LogStore::SubLive(const RecordLocation& loc) noexcept {
  const std::uint64_t before =
      LiveOf(loc.slot()).fetch_sub(loc.length, std::memory_order_relaxed);
  CAIRN_CHECK(before >= loc.length);
  live_total_.fetch_sub(loc.length, std::memory_order_relaxed);
}

LogStoreSpace LogStore::Space() const {
  LogStoreSpace out;
  out.block_bytes = log_->block_bytes();
  MutexLock log_lock(&log_mu_);
  out.slots = slots_;
  out.free_slots = free_slots_.size();
  out.live_bytes = live_total_.load(std::memory_order_relaxed);
  out.blocks.reserve(table_.size());
  for (const auto& [block, info] : table_) {
    out.blocks.push_back(
        {block, info.slot, LiveOf(info.slot).load(std::memory_order_relaxed)});
  }
  return out;
}

Status LogStore::ScanBlock(std::uint64_t block, std::uint32_t slot,
                           const LogBlockHeader* header, std::uint32_t from,
                           std::uint64_t file_bytes, BlockScan* scan) {
  const bool has_header = header != nullptr;
  const std::string where = "block " + std::to_string(block);
  const std::uint64_t data_begin =
      log_->BlockOffset(slot) + kLogBlockDataOffset;
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
    CAIRN_RETURN_IF_ERROR(log_->ReadData(slot, 0, avail, data.data()));
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
    } else {
      if (record.type == LogRecordType::kFlushDb) scan->flushdb = true;
      if (offset >= from) {
        RecordLocation loc{static_cast<std::uint32_t>(block), offset,
                           record.bytes, RecordLocation::kDurable};
        loc.set_slot(slot);
        CAIRN_RETURN_IF_ERROR(ApplyReplayed(record, loc));
        ++recovery_.records_replayed;
      }
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

Status LogStore::LoadCheckpoint(
    const std::string& path,
    const std::map<std::uint64_t, std::uint32_t>& slots, std::uint64_t* block,
    std::uint32_t* offset, std::uint64_t* reach) {
  Result<CheckpointFile> read = CheckpointFile::Read(*env_, path);
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
      *reach = std::max(*reach, EndOf(loc));
      RecordLocation located = e.location;
      const auto it = slots.find(located.block);
      // A block compacted away after the checkpoint was written: the
      // record was copied to a later block, which replay applies over this.
      located.set_slot(it != slots.end() ? it->second
                                         : RecordLocation::kMaxSlots - 1);
      return fn(e.db, e.key, located);
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

Result<LogStore::Append> LogStore::Reserve(std::size_t bytes) {
  for (;;) {
    // The block stays valid while the caller holds its partition lock
    // (Reserve's contract), even if it stops being the open one.
    PendingBlock* open = open_.load(std::memory_order_acquire);
    Append append;
    if (open->buffer->TryReserve(bytes, &append.reservation)) {
      append.block = open;
      return append;
    }
    MutexLock log_lock(&log_mu_);
    // Another writer may have opened the next block meanwhile.
    if (open_.load(std::memory_order_relaxed) == open) {
      CAIRN_RETURN_IF_ERROR(OpenNextBlockLocked(open));
    }
  }
}

Status LogStore::OpenNextBlockLocked(PendingBlock* full) {
  // The next block goes in a free slot (one a compaction freed) or a new
  // one at the end of the file. Everything that can fail comes first.
  const std::uint64_t next = next_block_;
  if (next > UINT32_MAX) return ResourceExhaustedError("log is full");
  std::unique_ptr<LogBlockBuffer> buffer;
  if (!spare_buffers_.empty()) {
    buffer = std::move(spare_buffers_.back());
    spare_buffers_.pop_back();
  } else {
    buffer.reset(new (std::nothrow)
                     LogBlockBuffer(next, log_->data_bytes(), log_->log_id()));
    if (buffer == nullptr || !buffer->ok()) {
      return ResourceExhaustedError("block buffer");
    }
  }
  // A buffer not used below goes back to the spares.
  auto keep = [this](std::unique_ptr<LogBlockBuffer> b) {
    log_mu_.AssertHeld();  // held around every call
    try {
      spare_buffers_.push_back(std::move(b));
    } catch (const std::bad_alloc&) {
    }
  };
  std::unique_ptr<PendingBlock> pending(new (std::nothrow) PendingBlock);
  if (pending == nullptr) {
    keep(std::move(buffer));
    return ResourceExhaustedError("pending block");
  }
  try {
    table_.emplace(next, BlockInfo{});
  } catch (const std::bad_alloc&) {
    keep(std::move(buffer));
    return ResourceExhaustedError("block table");
  }
  LogBlockBuffer* const fresh = buffer.get();
  pending->buffer = std::move(buffer);
  try {
    blocks_.push_back(std::move(pending));
  } catch (const std::bad_alloc&) {
    table_.erase(next);
    keep(std::move(pending->buffer));
    return ResourceExhaustedError("pending block");
  }
  Result<std::uint32_t> slot = AllocateSlotLocked();
  if (!slot.ok()) {
    keep(std::move(blocks_.back()->buffer));
    blocks_.pop_back();
    table_.erase(next);
    return slot.status();
  }
  table_[next].slot = *slot;
  fresh->Reset(next, *slot);
  ++next_block_;
  log_blocks_.store(table_.size(), std::memory_order_relaxed);
  // The full block ends with its seal, so recovery goes on to the next; no
  // reservation succeeds in it after this one.
  full->buffer->AppendSeal();
  sealed_blocks_.fetch_add(1, std::memory_order_relaxed);
  RingInsertLocked(blocks_.back().get());
  // Release: a writer that sees the block sees it Reset.
  open_.store(blocks_.back().get(), std::memory_order_release);
  // Its write and sync are the flusher's (the sealed mutex is a leaf).
  if (options_.host_flusher) WakeFlusher();
  return Status();
}

RecordLocation LogStore::FinishAppend(const Append& append, LogRecordType type,
                                      std::uint32_t db, std::string_view key,
                                      std::string_view value) noexcept {
  LogBlockBuffer& buffer = *append.block->buffer;
  buffer.Fill(append.reservation, type, db, key, value);
  buffer.Complete(append.reservation);
  RecordLocation loc{
      static_cast<std::uint32_t>(buffer.block()), append.reservation.offset,
      static_cast<std::uint32_t>(LogRecordBytes(key.size(), value.size())), 0};
  loc.set_slot(buffer.slot());
  return loc;
}

void LogStore::RingInsertLocked(PendingBlock* pending) {
  const std::uint64_t block = pending->buffer->block();
  PendingRingEntry& e = pending_ring_[block % kPendingRing];
  if (e.block_plus_one.load(std::memory_order_relaxed) != 0) return;
  e.pending.store(pending, std::memory_order_relaxed);
  // Release: a Get that reads the number reads the pointer after it.
  e.block_plus_one.store(block + 1, std::memory_order_release);
}

void LogStore::RingEraseLocked(const PendingBlock* pending) {
  PendingRingEntry& e = pending_ring_[pending->buffer->block() % kPendingRing];
  if (e.pending.load(std::memory_order_relaxed) != pending) return;
  e.block_plus_one.store(0, std::memory_order_relaxed);
  e.pending.store(nullptr, std::memory_order_relaxed);
}

void LogStore::PartitionGrace() {
  for (auto& part : partitions_) {
    part->mu.Lock();
    part->mu.Unlock();
  }
}

Status LogStore::MakeRoom() {
  if (sealed_blocks_.load(std::memory_order_relaxed) <
      options_.max_sealed_blocks) {
    return Status();
  }
  if (options_.host_flusher) {
    // A flusher runs: wait for it to release a block rather than write
    // and sync one here. Its failure fails this write (nothing appended),
    // as an inline flush's would.
    std::unique_lock<Mutex> lock(sealed_mu_);
    if (flusher_running_) {
      backpressure_waits_.Add();
      const std::uint64_t failures = room_failures_;
      while (flusher_running_ && room_failures_ == failures &&
             !closed_.load(std::memory_order_acquire) &&
             sealed_blocks_.load(std::memory_order_relaxed) >=
                 options_.max_sealed_blocks) {
        room_cv_.wait(lock);
      }
      if (room_failures_ != failures) return room_status_;
      if (closed_.load(std::memory_order_acquire)) {
        return FailedPreconditionError("store is closed");
      }
      if (sealed_blocks_.load(std::memory_order_relaxed) <
          options_.max_sealed_blocks) {
        return Status();
      }
      // The flusher returned (stopped or failed): make room inline.
    }
  }
  // The writer flushes the waiting blocks itself (a flush attempt of its
  // own, not the group's shortcut: the blocks must also be released). If
  // that fails (a full disk), the write fails with the disk's error before
  // it appends, and so does every later one until a flush succeeds: memory
  // stays bounded.
  return FlushForRoom(/*backpressure=*/true);
}

Status LogStore::FlushForRoom(bool backpressure) {
  Status s;
  {
    MutexLock flush_lock(&flush_mu_);
    // Close flushed everything and later flushes are refused (a racing
    // write's record is the host's to lose, as Close says).
    if (closed_.load(std::memory_order_acquire)) {
      return FailedPreconditionError("store is closed");
    }
    if (backpressure) {
      backpressure_flushes_.Add();
    } else {
      flusher_flushes_.Add();
    }
    try {
      s = FlushLocked(nullptr, /*all_headers=*/false);
    } catch (const std::bad_alloc&) {
      s = ResourceExhaustedError("out of memory flushing the store");
    }
  }
  if (!s.ok() && options_.host_flusher) {
    {
      MutexLock lock(&sealed_mu_);
      ++room_failures_;
      room_status_ = s;
    }
    room_cv_.notify_all();
  }
  return s;
}

void LogStore::WakeFlusher() {
  // Taken and dropped so that a flusher between its check and its wait
  // cannot miss the notification.
  { MutexLock lock(&sealed_mu_); }
  sealed_cv_.notify_all();
}

void LogStore::WakeWriters() {
  { MutexLock lock(&sealed_mu_); }
  room_cv_.notify_all();
}

Status LogStore::FlushSealed() {
  if (closed_.load(std::memory_order_acquire)) {
    return FailedPreconditionError("store is closed");
  }
  if (sealed_blocks_.load(std::memory_order_acquire) == 0) return Status();
  return FlushForRoom(/*backpressure=*/false);
}

Status LogStore::RunFlusher(const std::stop_token& stop) {
  if (!options_.host_flusher) {
    return FailedPreconditionError(
        "RunFlusher needs LogStoreOptions::host_flusher");
  }
  {
    MutexLock lock(&sealed_mu_);
    if (flusher_running_) {
      return FailedPreconditionError("another RunFlusher call is running");
    }
    flusher_running_ = true;
  }
  Status s;
  {
    // Runs on the requesting thread (or here, if stop was already
    // requested): wakes the wait below.
    std::stop_callback on_stop(stop, [this] { WakeFlusher(); });
    for (;;) {
      {
        std::unique_lock<Mutex> lock(sealed_mu_);
        while (!stop.stop_requested() &&
               !closed_.load(std::memory_order_acquire) &&
               sealed_blocks_.load(std::memory_order_acquire) == 0) {
          sealed_cv_.wait(lock);
        }
      }
      if (stop.stop_requested() || closed_.load(std::memory_order_acquire)) {
        break;
      }
      s = FlushForRoom(/*backpressure=*/false);
      if (!s.ok()) {
        // Closed meanwhile: Close flushed everything; not an error.
        if (closed_.load(std::memory_order_acquire)) s = Status();
        break;
      }
    }
  }
  {
    MutexLock lock(&sealed_mu_);
    flusher_running_ = false;
  }
  // Writers waiting for room make it themselves from now on.
  room_cv_.notify_all();
  return s;
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
                         std::string_view value, std::uint64_t* end,
                         const RecordLocation* only_if_at) {
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
    if (only_if_at != nullptr &&
        (previous == nullptr || superseded.block != only_if_at->block ||
         superseded.offset != only_if_at->offset)) {
      return NotFoundError();  // no longer the key's record: dead
    }
    // Everything that can fail comes before the append's reservation,
    // which is final: a receipt's room, and a new key's index entry (an
    // entry inserted here and removed again if the append cannot reserve).
    const bool receipts = options_.mode == FlushMode::kReceipts;
    if (receipts && part.receipts.size() == part.receipts.capacity()) {
      try {
        part.receipts.reserve(
            std::max<std::size_t>(64, 2 * part.receipts.capacity()));
      } catch (const std::bad_alloc&) {
        return ResourceExhaustedError("receipt");
      }
    }
    if (previous == nullptr) {
      auto r = map.Insert(key, RecordLocation{});
      if (!r.ok()) return ToStatus(r.outcome);
    }
    auto append = Reserve(LogRecordBytes(key.size(), value.size()));
    if (!append.ok()) {
      if (previous == nullptr) (void)map.Erase(key);
      return append.status();
    }
    const RecordLocation loc =
        FinishAppend(*append, LogRecordType::kSet, db, key, value);
    // The key is in the map: this neither allocates nor fails.
    auto r = map.Upsert(key, loc);
    CAIRN_CHECK(r.ok());
    AddLive(loc);
    if (previous != nullptr) SubLive(superseded);
    if (receipts) {
      FlushReceipt& receipt = part.receipts.emplace_back();
      receipt.address = r.entry->address();
      receipt.generation = map.generation();
      receipt.hash32 = RecordIndex::Hash32(hash);
      receipt.tag = RecordIndex::TagOf(hash);
      receipt.map = static_cast<std::uint32_t>(
          PartitionOf(key) * options_.databases + db);
      receipt.block = loc.block;
      receipt.offset = loc.offset;
      receipt.length = loc.length;
      if (!part.has_receipts.load(std::memory_order_relaxed)) {
        part.has_receipts.store(true, std::memory_order_relaxed);
      }
    }
    if (end != nullptr) *end = EndOf(loc);
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
    auto append = Reserve(LogRecordBytes(key.size(), 0));
    if (!append.ok()) return append.status();
    const RecordLocation loc =
        FinishAppend(*append, LogRecordType::kDelete, db, key, {});
    CAIRN_CHECK(map.Erase(key) == ScanHashMapOutcome::kOk);
    SubLive(deleted);
    if (end != nullptr) *end = EndOf(loc);
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
  auto append = Reserve(LogRecordBytes(0, 0));
  if (!append.ok()) {
    status = append.status();
  } else {
    const RecordLocation loc =
        FinishAppend(*append, LogRecordType::kFlushDb, db, {}, {});
    {
      // Compact keeps this block while the record may hide an older one.
      MutexLock log_lock(&log_mu_);
      table_[loc.block].flushdb = true;
    }
    // Every record of the database stops being live.
    for (auto& part : partitions_) {
      part->mu.AssertHeld();
      (void)part->maps[db]->ForEachUntil([&](const RecordIndex::Entry& e) {
        SubLive(e.value());
        return ScanControl::kContinue;
      });
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
  v.CounterValue("cairn_logstore_commit_delay_timeouts_total",
                 "Group-commit leaders whose wait for the writers the last "
                 "sync released timed out (the delay then rests for 8 "
                 "leaders).",
                 commit_delay_timeouts_.Value());
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
  v.CounterValue("cairn_logstore_backpressure_waits_total",
                 "Writes that waited for the flusher because "
                 "max_sealed_blocks full blocks were waiting.",
                 backpressure_waits_.Value());
  v.CounterValue("cairn_logstore_flusher_flushes_total",
                 "Flushes run by FlushSealed and RunFlusher.",
                 flusher_flushes_.Value());
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
                   "Time of a checkpoint (its copy, flush and file).",
                   checkpoint_seconds_.Snapshot());
  v.GaugeValue(
      "cairn_logstore_sealed_blocks", "Full blocks waiting for a flush.",
      static_cast<double>(sealed_blocks_.load(std::memory_order_relaxed)));
  v.CounterValue("cairn_logstore_compactions_total", "Compact calls.",
                 compactions_.Value());
  v.CounterValue("cairn_logstore_compaction_failures_total",
                 "Compact calls that returned an error.",
                 compaction_failures_.Value());
  v.CounterValue("cairn_logstore_compacted_blocks_total",
                 "Blocks Compact freed (their slots reused by new blocks).",
                 blocks_freed_.Value());
  v.CounterValue("cairn_logstore_relocated_bytes_total",
                 "Bytes of live records Compact copied to the log's head.",
                 bytes_relocated_.Value());
  v.CounterValue("cairn_logstore_get_retries_total",
                 "Get reads that found their record moved by Compact and "
                 "read the index again.",
                 get_retries_.Value());
  v.GaugeValue("cairn_logstore_log_slots",
               "Block slots in the log file, free ones included.",
               static_cast<double>(log_slots_.load(std::memory_order_relaxed)));
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
  // The whole record is read into *value and the value moved to its front:
  // no buffer of its own to allocate, and the value's bytes copied once.
  value->resize(loc.length);
  Status s = log_->ReadData(loc.slot(), loc.offset, loc.length, value->data());
  LogRecordView record;
  if (s.ok()) {
    s = DecodeLogRecord(std::span<const char>(value->data(), value->size()), 0,
                        {log_->log_id(), loc.block, loc.offset}, &record);
  }
  if (s.ok()) s = CheckRecord(record, key, loc.length);
  if (!s.ok()) {
    value->clear();
    return s;
  }
  const std::size_t at =
      static_cast<std::size_t>(record.value.data() - value->data());
  const std::size_t n = record.value.size();
  std::memmove(value->data(), value->data() + at, n);
  value->resize(n);
  return Status();
}

Status LogStore::Get(std::uint32_t db, std::string_view key,
                     std::string* value) {
  // The record is read into *value's own buffer: a key that lies in it is
  // copied out first.
  std::string key_copy;
  const std::less<> before;
  if (!key.empty() && !before(key.data(), value->data()) &&
      before(key.data(), value->data() + value->size())) {
    key_copy.assign(key);
    key = key_copy;
  }
  Status s = GetUncounted(db, key, value);
  ops_.Add(s.ok()                              ? kGetHit
           : s.code() == StatusCode::kNotFound ? kGetMiss
                                               : kGetFailed);
  return s;
}

LogStore::PendingBlock* LogStore::FindPendingLocked(std::uint64_t block) {
  for (auto& pending : blocks_) {
    if (pending->buffer->block() == block) return pending.get();
  }
  return nullptr;
}

const LogStore::PendingBlock* LogStore::FindPending(std::uint64_t block) {
  const PendingRingEntry& e = pending_ring_[block % kPendingRing];
  if (e.block_plus_one.load(std::memory_order_acquire) == block + 1) {
    return e.pending.load(std::memory_order_relaxed);
  }
  // Another pending block held the entry when this one opened.
  MutexLock log_lock(&log_mu_);
  const PendingBlock* pending = FindPendingLocked(block);
  CAIRN_CHECK(pending != nullptr);
  return pending;
}

Status LogStore::GetUncounted(std::uint32_t db, std::string_view key,
                              std::string* value) {
  CAIRN_RETURN_IF_ERROR(Validate(db, key, {}));
  Partition& part = *partitions_[PartitionOf(key)];
  RecordLocation loc;
  Status failed;
  for (;;) {
    {
      MutexLock partition_lock(&part.mu);
      const RecordIndex::Entry* entry = part.maps[db]->Find(key);
      if (entry == nullptr) return NotFoundError();
      if (!failed.ok() && entry->value().block == loc.block &&
          entry->value().offset == loc.offset) {
        return failed;  // it failed where the index still points: damage
      }
      loc = entry->value();
      if (!loc.durable() && !DurableByWatermark(loc)) {
        // Unflushed: its block is in memory until after this partition
        // lock is released (a block leaves only after the watermark covers
        // it and every partition lock was taken once since: PartitionGrace).
        const PendingBlock* pending = FindPending(loc.block);
        const LogBlockBuffer& buffer = *pending->buffer;
        LogRecordView record;
        // The record's own bytes only: appends fill the bytes past it.
        CAIRN_RETURN_IF_ERROR(DecodeLogRecord(
            std::span<const char>(buffer.data(),
                                  std::size_t{loc.offset} + loc.length),
            loc.offset, {log_->log_id(), loc.block, loc.offset}, &record));
        CAIRN_RETURN_IF_ERROR(CheckRecord(record, key, loc.length));
        value->assign(record.value);
        return Status();
      }
    }
    // Durable records never change on disk while the index points at them:
    // read without locks. Compact may meanwhile move the record and free,
    // even reuse, its slot; the bytes then fail their checksum (seeded with
    // the block's number, which a reused slot's new block does not share),
    // and the read goes back to the index for the new location.
    failed = ReadFromFile(loc, key, value);
    if (failed.ok() || failed.code() != StatusCode::kDataLoss) return failed;
    get_retries_.Add();
  }
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

Status LogStore::FlushIo(FlushReport* report, bool* more) {
  struct BlockWrite {
    PendingBlock* pending = nullptr;
    std::uint32_t from = 0;
    LogBlockHeader snapshot;  // the block's state at the new boundary
    bool hint = false;        // write `header`
    bool identity = false;    // `header` is the block's first
    LogBlockHeader header;    // names bytes an earlier sync made durable
  };
  std::vector<BlockWrite> writes;
  writes.reserve(4);
  *more = false;
  // Everything below the last snapshot taken is durable once this attempt
  // succeeds (it writes every such block's new bytes), also when that block
  // is empty.
  std::uint64_t newest = 0;
  // The blocks in memory (only this flush releases them). Each one's
  // appends in flight below its boundary complete before its bytes are
  // taken (Drain); no lock is held meanwhile, as appends take none.
  std::vector<PendingBlock*> pending_blocks;
  {
    MutexLock log_lock(&log_mu_);
    pending_blocks.reserve(blocks_.size());
    for (auto& pending : blocks_) pending_blocks.push_back(pending.get());
  }
  for (PendingBlock* pending : pending_blocks) {
    LogBlockBuffer& buffer = *pending->buffer;
    if (buffer.sequence == 0) {
      // No header of this block is durable yet: its first one (its
      // number and slot, naming no record) goes first, and its records
      // and every later block's wait for the next attempt, so that a
      // record is never durable where recovery cannot tell its block.
      BlockWrite& w = writes.emplace_back();
      w.pending = pending;
      w.hint = w.identity = true;
      w.header = LogBlockHeader{buffer.block(), 1, 0, 0, 0, buffer.slot()};
      *more = true;
      break;
    }
    buffer.Advance(buffer.Drain());
    newest = (buffer.block() << 32) | buffer.used();
    const bool data = buffer.flushed < buffer.used();
    // The hint is rewritten once the durable boundary is kLogHintStride
    // past the header on disk, so most flushes write one contiguous
    // range; a full block whose bytes are all durable gets its final
    // header here too (or in WriteHeaders).
    const bool hint =
        buffer.durable.used_bytes >= buffer.header_used + kLogHintStride ||
        (buffer.sealed() && buffer.durable.used_bytes == buffer.used() &&
         buffer.header_used < buffer.used());
    if (!data && !hint) continue;
    BlockWrite& w = writes.emplace_back();
    w.pending = pending;
    w.from = buffer.flushed;
    w.snapshot = buffer.HeaderAtUsed(0);
    w.hint = hint;
    // The hint names what an earlier sync made durable, never the bytes
    // this attempt writes (the crash argument in docs/flush.md).
    w.header = buffer.durable;
    w.header.sequence = buffer.sequence + 1;
  }
  if (writes.empty()) {
    // Nothing new: every block is durable up to its used bytes.
    if (newest > watermark_.load(std::memory_order_acquire)) {
      watermark_.store(newest, std::memory_order_release);
    }
    return Status();
  }
  if (newest < watermark_.load(std::memory_order_acquire)) {
    newest = watermark_.load(std::memory_order_acquire);
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
      s = log_->WriteData(w.snapshot.slot, w.from,
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
  // Open's own attempt (the head's first header) is not a flush the host
  // asked for: metrics start at zero when the store is open.
  if (opened_) flush_io_seconds_.Record(static_cast<std::uint64_t>(io));
  last_flush_io_ns_.store(io, std::memory_order_relaxed);
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
        // other slot keeps the last synced header.
        continue;
      }
      if (w.hint) {
        buffer.sequence = w.header.sequence;
        buffer.header_used = w.header.used_bytes;
      }
      if (w.identity) continue;  // no records written
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
    // The durable writers now: those this sync releases come back with
    // their next records, the others wait for the next sync (commit delay).
    expected_group_ = in_wait_;
  }
  group_cv_.notify_all();
  return s;
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

void LogStore::RunPasses(FlushReport* report) {
  if (options_.mode != FlushMode::kReceipts) return;
  try {
    RunPassesOrThrow(report);
  } catch (const std::bad_alloc&) {
    // Out of memory: the entries not marked stay durable by the watermark.
  }
}

void LogStore::RunPassesOrThrow(FlushReport* report) {
  const std::int64_t start = clock_->NowNanos();
  ReceiptPassStats total;
  const std::uint32_t databases = options_.databases;
  // Every record below the watermark is durable: records of earlier blocks
  // whole, of its block up to its boundary.
  const std::uint64_t w = watermark_.load(std::memory_order_acquire);
  const std::uint64_t w_block = w >> 32;
  auto covered = [w](const FlushReceipt& r) {
    return ((std::uint64_t{r.block} << 32) | (r.offset + r.length)) <= w;
  };
  std::vector<FlushReceipt> taken;
  for (auto& part_ptr : partitions_) {
    Partition& part = *part_ptr;
    // Only the partitions with receipts are locked (a store may have
    // thousands).
    if (!part.has_receipts.load(std::memory_order_relaxed)) continue;
    {
      // A partition's receipts are in log order: the covered ones are a
      // prefix.
      MutexLock lock(&part.mu);
      const auto end = std::partition_point(part.receipts.begin(),
                                            part.receipts.end(), covered);
      if (end == part.receipts.begin()) continue;
      taken.assign(part.receipts.begin(), end);
      part.receipts.erase(part.receipts.begin(), end);
      if (part.receipts.empty()) {
        part.has_receipts.store(false, std::memory_order_relaxed);
      }
    }
    auto maps = [&part, databases](std::uint32_t id) -> RecordIndex* {
      part.mu.AssertHeld();  // ApplyReceiptsSliced holds it around calls
      return part.maps[id % databases].get();
    };
    // One pass per block: its durable range.
    for (std::size_t begin = 0; begin < taken.size();) {
      std::size_t end = begin;
      while (end < taken.size() && taken[end].block == taken[begin].block) {
        ++end;
      }
      const std::uint32_t block = taken[begin].block;
      const FlushedRange range{
          block, block < w_block ? UINT32_MAX
                                 : static_cast<std::uint32_t>(w & 0xffffffffu)};
      total.Add(ApplyReceiptsSliced(
          std::span<const FlushReceipt>(taken).subspan(begin, end - begin),
          maps, range, options_.pass, &part.mu));
      begin = end;
    }
  }
  if (report != nullptr) {
    report->pass.Add(total);
    report->pass_nanos +=
        static_cast<std::uint64_t>(clock_->NowNanos() - start);
  }
}

void LogStore::ReleaseFlushedBlocks() {
  // A full block goes once its bytes and its final header are durable (the
  // open block is never released: blocks_ holds more than it), and once
  // every partition lock was taken after that: a Get or an append holding
  // one may still use the block (Reserve, GetUncounted).
  auto releasable = [this]() CAIRN_REQUIRES(log_mu_) {
    std::size_t n = 0;
    while (n + 1 < blocks_.size()) {
      const LogBlockBuffer& b = *blocks_[n]->buffer;
      if (!b.sealed() || b.flushed != b.used() || b.header_used != b.used()) {
        break;
      }
      ++n;
    }
    return n;
  };
  std::size_t count;
  {
    MutexLock log_lock(&log_mu_);
    count = releasable();
  }
  if (count == 0) return;
  PartitionGrace();
  bool released = false;
  {
    MutexLock log_lock(&log_mu_);
    for (; count > 0; --count) {
      RingEraseLocked(blocks_.front().get());
      // Kept for the next blocks, so that their pages are not faulted in
      // again under the writers: two, or as many as may wait for a
      // flusher.
      if (spare_buffers_.size() <
          (options_.host_flusher ? options_.max_sealed_blocks + 1 : 2)) {
        try {
          spare_buffers_.push_back(std::move(blocks_.front()->buffer));
        } catch (const std::bad_alloc&) {
        }
      }
      blocks_.pop_front();
      sealed_blocks_.fetch_sub(1, std::memory_order_relaxed);
      released = true;
    }
  }
  if (released && options_.host_flusher) WakeWriters();
}

Status LogStore::FlushAllIo(FlushReport* report) {
  // An attempt that wrote a new block's first header leaves its records
  // (and later blocks') to the next one; each attempt makes one more block
  // known, so this ends.
  for (;;) {
    bool more = false;
    CAIRN_RETURN_IF_ERROR(FlushIo(report, &more));
    if (!more) return Status();
  }
}

Status LogStore::FlushLocked(FlushReport* report, bool all_headers) {
  FlushReport local;
  Status s = FlushAllIo(&local);
  // The records are durable (the group is already woken); full blocks and,
  // with all_headers, every block then get a final header, one more sync.
  if (s.ok()) s = WriteHeaders(all_headers, &local);
  RunPasses(&local);
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
    // The end of the last record reserved (a flush waits for those in
    // flight): in the newest block that holds one (a block just opened may
    // be empty: the target is then the end of the block before it).
    MutexLock log_lock(&log_mu_);
    target = 0;
    for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
      const LogBlockBuffer& buffer = *(*it)->buffer;
      const std::uint32_t reserved = buffer.reserved();
      if (reserved > 0 || std::next(it) == blocks_.rend()) {
        target = (buffer.block() << 32) | reserved;
        break;
      }
    }
  }
  return TimedWait(target, failures, report);
}

Status LogStore::WaitDurable(std::uint64_t target, std::uint64_t failures,
                             FlushReport* report) {
  std::unique_lock<Mutex> lock(group_mu_);
  // Declared after `lock`, so it leaves while the lock is held (every
  // return below holds it).
  struct InWait {
    LogStore* store;
    ~InWait() CAIRN_NO_THREAD_SAFETY_ANALYSIS { --store->in_wait_; }
  } in_wait{this};
  ++in_wait_;
  ++arrivals_;
  // A leader may be waiting for this many arrivals (it reads the count
  // under the lock, so one wake-up, by the last of them, is enough).
  if (leader_ && arrivals_ == expected_group_) leader_cv_.notify_one();
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
    // Commit delay: the writers the last sync released are on their way
    // back with their next records; waiting for them (at most half a
    // flush's I/O time, at most max_commit_delay) lets one sync serve every
    // concurrent writer rather than the half that arrived during the last
    // one. A wait that times out (writers that pause between writes) turns
    // the delay off for the next kCommitDelayRest leaders.
    if (delay_rest_ > 0) {
      --delay_rest_;
    } else if (arrivals_ < expected_group_ &&
               options_.max_commit_delay.count() > 0) {
      const auto until =
          std::chrono::steady_clock::now() +
          std::chrono::nanoseconds(std::min<std::int64_t>(
              last_flush_io_ns_.load(std::memory_order_relaxed) / 2,
              std::chrono::nanoseconds(options_.max_commit_delay).count()));
      while (arrivals_ < expected_group_) {
        if (leader_cv_.wait_until(lock, until) == std::cv_status::timeout) {
          if (arrivals_ < expected_group_) {
            delay_rest_ = kCommitDelayRest;
            commit_delay_timeouts_.Add();
          }
          break;
        }
      }
      // Another flush may have covered (or failed) the record meanwhile.
      if ((failures_ != failures && failed_upto_ >= target) ||
          watermark_.load(std::memory_order_acquire) >= target) {
        leader_ = false;
        group_cv_.notify_all();
        continue;
      }
    }
    arrivals_ = 0;
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
  FlushReport local;
  Status s;
  try {
    // The position the checkpoint reflects: the append position now. A
    // record before it is in the copy, since its writer held the record's
    // partition lock from before the append to after the index update; a
    // record after it may be in the copy or not, and replay from the
    // position applies it again (docs/flush.md, "Checkpoint").
    std::uint64_t block;
    std::uint32_t offset;
    {
      MutexLock log_lock(&log_mu_);
      block = blocks_.back()->buffer->block();
      offset = blocks_.back()->buffer->reserved();
    }
    std::string bytes = EncodeCheckpoint(block, offset);
    // Every copied entry names a record appended before now: one flush
    // makes them all durable before the file that names them is written.
    {
      MutexLock flush_lock(&flush_mu_);
      s = FlushLocked(&local, /*all_headers=*/true);
    }
    if (s.ok()) {
      // A new generation per attempt: a failed one may have left its file.
      s = flush_internal::WriteCheckpointFile(
          *env_, dir_, ++checkpoint_generation_, bytes, options_.sync);
    }
    if (s.ok()) {
      // Tombstones before this position may now be dropped (Compact).
      MutexLock log_lock(&log_mu_);
      has_checkpoint_ = true;
      checkpoint_position_ = (block << 32) | offset;
    }
  } catch (const std::bad_alloc&) {
    s = ResourceExhaustedError("out of memory writing the checkpoint");
  }
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
  // Records do not move while they are copied; checkpoints take turns.
  MutexLock compact_lock(&compact_mu_);
  if (closed_.load(std::memory_order_acquire)) {
    return FailedPreconditionError("store is closed");  // Close went first
  }
  return CheckpointLocked();
}

Status LogStore::Close() {
  MutexLock compact_lock(&compact_mu_);  // a running Compact finishes first
  {
    MutexLock flush_lock(&flush_mu_);
    if (closed_.exchange(true, std::memory_order_acq_rel)) return Status();
  }
  Status s;
  if (options_.checkpoint_on_close) {
    s = CheckpointLocked();
  } else {
    MutexLock flush_lock(&flush_mu_);
    try {
      s = FlushLocked(nullptr, /*all_headers=*/true);
    } catch (const std::bad_alloc&) {
      s = ResourceExhaustedError("out of memory closing the store");
    }
  }
  if (options_.host_flusher) {
    // The flusher returns; writes waiting for room fail.
    WakeFlusher();
    WakeWriters();
  }
  return s;
}

std::string LogStore::EncodeCheckpoint(std::uint64_t block,
                                       std::uint32_t offset) {
  CheckpointEncoder encoder(static_cast<std::uint32_t>(options_.partitions),
                            options_.databases, block, offset);
  // One partition at a time: writers of the others go on.
  for (std::size_t p = 0; p < partitions_.size(); ++p) {
    Partition& part = *partitions_[p];
    MutexLock partition_lock(&part.mu);
    for (std::uint32_t db = 0; db < options_.databases; ++db) {
      const RecordIndex& map = *part.maps[db];
      encoder.SetMapCount(p * options_.databases + db, map.size());
      StableScanCursor cursor = map.StableScanBegin();
      while (!cursor.done) {
        const ScanHashMapOutcome o = map.ScanStable(
            cursor,
            [&](const RecordIndex::Entry& e) {
              encoder.AddEntry(db, e.key(), e.value());
            },
            1024);
        CAIRN_CHECK(o == ScanHashMapOutcome::kOk);  // the partition is locked
      }
    }
  }
  return std::move(encoder).Finish();
}

// --- Compaction
// ---------------------------------------------------------------

Status LogStore::Compact(const CompactOptions& options, CompactReport* report) {
  if (closed_.load(std::memory_order_acquire)) {
    return FailedPreconditionError("store is closed");
  }
  MutexLock compact_lock(&compact_mu_);
  if (closed_.load(std::memory_order_acquire)) {
    return FailedPreconditionError("store is closed");
  }
  CompactReport local;
  struct Candidate {
    std::uint64_t live;
    std::uint64_t block;
    std::uint32_t slot;
  };
  std::vector<Candidate> candidates;
  Status s;
  try {
    MutexLock log_lock(&log_mu_);
    // Blocks no longer in memory: full, every byte and the final header
    // durable.
    const std::uint64_t first_in_memory = blocks_.front()->buffer->block();
    const double limit =
        options.max_live_fraction *
        static_cast<double>(LogRecordSpace(log_->block_bytes()));
    for (const auto& [block, info] : table_) {
      if (block >= first_in_memory) break;
      const std::uint64_t live =
          LiveOf(info.slot).load(std::memory_order_relaxed);
      if (static_cast<double>(live) > limit) continue;
      // A FlushDb record hides every older record of its database: the
      // block stays while replay could apply those (at or after the
      // checkpoint's position, or with no checkpoint).
      if (info.flushdb &&
          (!has_checkpoint_ || block >= (checkpoint_position_ >> 32))) {
        ++local.blocks_pinned;
        continue;
      }
      candidates.push_back({live, block, info.slot});
    }
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("out of memory choosing blocks to compact");
  }
  std::stable_sort(
      candidates.begin(), candidates.end(),
      [](const Candidate& a, const Candidate& b) { return a.live < b.live; });
  const std::uint64_t failures = FailuresSoFar();
  std::uint64_t end = 0;
  std::vector<Candidate> done;
  try {
    for (const Candidate& c : candidates) {
      if (done.size() >= options.max_blocks) break;
      if (!done.empty() &&
          local.bytes_relocated >= options.max_relocated_bytes) {
        break;
      }
      std::uint64_t e = 0;
      s = CompactBlock(c.block, c.slot, &local, &e);
      if (!s.ok()) break;
      end = std::max(end, e);
      done.push_back(c);
    }
    // Nothing is freed before every copy is durable: until then a crash
    // recovers the records from the old blocks.
    if (s.ok() && end != 0) s = WaitDurable(end, failures, nullptr);
  } catch (const std::bad_alloc&) {
    s = ResourceExhaustedError("out of memory compacting");
  }
  if (s.ok()) {
    MutexLock log_lock(&log_mu_);
    for (const Candidate& c : done) {
      auto it = table_.find(c.block);
      // Every entry that pointed into the block now points at its copy.
      CAIRN_CHECK(it != table_.end() &&
                  LiveOf(c.slot).load(std::memory_order_relaxed) == 0);
      table_.erase(it);
      try {
        free_slots_.push_back(c.slot);
      } catch (const std::bad_alloc&) {
        // The slot stays unused until the next Open finds it free.
      }
      ++local.blocks_freed;
    }
    log_blocks_.store(table_.size(), std::memory_order_relaxed);
  }
  compactions_.Add();
  if (!s.ok()) compaction_failures_.Add();
  blocks_freed_.Add(local.blocks_freed);
  bytes_relocated_.Add(local.bytes_relocated);
  if (report != nullptr) {
    report->blocks_freed += local.blocks_freed;
    report->records_relocated += local.records_relocated;
    report->bytes_relocated += local.bytes_relocated;
    report->tombstones_relocated += local.tombstones_relocated;
    report->tombstones_dropped += local.tombstones_dropped;
    report->blocks_pinned += local.blocks_pinned;
  }
  return s;
}

Status LogStore::CompactBlock(std::uint64_t block, std::uint32_t slot,
                              CompactReport* report, std::uint64_t* end) {
  *end = 0;
  // The block's bytes are durable and nobody writes them until it is freed
  // (only Compact frees, under compact_mu_): read them without a lock.
  // (A slot whose header slots are both damaged has no header; its records
  // still validate themselves, at the block's number.)
  auto header = log_->ReadHeader(slot);
  if (!header.ok() && header.status().code() != StatusCode::kNotFound) {
    return header.status();
  }
  if (header.ok() && header->block != block) {
    return DataLossError("block slot " + std::to_string(slot) +
                         " does not hold block " + std::to_string(block));
  }
  // The whole data area up to the seal: the header may be a hint naming
  // less (a block sealed by a process that crashed before its final
  // header), and the records past it validate themselves.
  auto file_bytes = log_->FileBytes();
  if (!file_bytes.ok()) return file_bytes.status();
  const std::uint64_t data_begin =
      log_->BlockOffset(slot) + kLogBlockDataOffset;
  const std::size_t avail =
      *file_bytes > data_begin
          ? static_cast<std::size_t>(std::min<std::uint64_t>(
                *file_bytes - data_begin, log_->data_bytes()))
          : 0;
  std::string data(avail, '\0');
  if (!data.empty()) {
    CAIRN_RETURN_IF_ERROR(log_->ReadData(slot, 0, data.size(), data.data()));
  }
  bool droppable_before = false;
  std::uint64_t checkpoint_position = 0;
  {
    MutexLock log_lock(&log_mu_);
    droppable_before = has_checkpoint_;
    checkpoint_position = checkpoint_position_;
  }
  const std::span<const char> bytes(data.data(), data.size());
  std::uint32_t offset = 0;
  for (;;) {
    LogRecordView record;
    Status s = DecodeLogRecord(bytes, offset, {log_->log_id(), block, offset},
                               &record);
    if (!s.ok()) {
      return DataLossError("block " + std::to_string(block) +
                           ", record at offset " + std::to_string(offset) +
                           ": " + std::string(s.message()));
    }
    if (record.type == LogRecordType::kSeal) break;
    const std::uint64_t position = (block << 32) | offset;
    // Replay never applies a record before the checkpoint's position, so
    // no tombstone there hides anything a recovery could bring back.
    const bool before_checkpoint =
        droppable_before && position < checkpoint_position;
    std::uint64_t e = 0;
    if (record.type == LogRecordType::kSet) {
      const RecordLocation at{static_cast<std::uint32_t>(block), offset,
                              record.bytes, 0};
      s = SetImpl(record.db, record.key, record.value, &e, &at);
      if (s.ok()) {
        ++report->records_relocated;
        report->bytes_relocated += record.bytes;
      } else if (s.code() != StatusCode::kNotFound) {
        return s;
      }
    } else if (record.type == LogRecordType::kDelete) {
      if (before_checkpoint) {
        ++report->tombstones_dropped;
      } else {
        s = RelocateTombstone(record.db, record.key, &e);
        if (s.ok()) {
          ++report->tombstones_relocated;
        } else if (s.code() == StatusCode::kNotFound) {
          ++report->tombstones_dropped;  // a later Set supersedes it
        } else {
          return s;
        }
      }
    }
    // A FlushDb record here lies before the checkpoint (Compact skips the
    // block otherwise): dropped.
    *end = std::max(*end, e);
    offset += record.bytes;
  }
  return Status();
}

Status LogStore::RelocateTombstone(std::uint32_t db, std::string_view key,
                                   std::uint64_t* end) {
  CAIRN_RETURN_IF_ERROR(Validate(db, key, {}));
  CAIRN_RETURN_IF_ERROR(MakeRoom());
  Partition& part = *partitions_[PartitionOf(key)];
  MutexLock partition_lock(&part.mu);
  // The key set again since: the tombstone hides only records older than
  // that Set, which replay applies before it anyway.
  if (part.maps[db]->Find(key) != nullptr) return NotFoundError();
  auto append = Reserve(LogRecordBytes(key.size(), 0));
  if (!append.ok()) return append.status();
  *end = EndOf(FinishAppend(*append, LogRecordType::kDelete, db, key, {}));
  return Status();
}

CAIRN_NAMESPACE_END
