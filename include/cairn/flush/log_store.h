// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// LogStore: a small embedded key-value store over the block log. Keys live
// in numbered databases (0 .. databases-1); each key hashes to one of
// `partitions` partitions, and each partition keeps one RecordIndex
// (ScanHashMap) per database, mapping the key to its newest record's
// location in the log.
//
//   Set / Del / FlushDb   append a record to the block being filled (in
//                         memory) and update the index; not yet durable.
//   SetDurable /          Set / Del, then wait until the record is durable;
//   DelDurable            concurrent callers share syncs (group commit).
//   Flush                 makes everything appended so far durable: the
//                         new records and a header hint, then one
//                         fdatasync (format v2: records validate
//                         themselves, log_format.h), and then marks the
//                         flushed entries durable with
//                         the receipt pass (receipt_pass.h), sliced under
//                         each partition's lock; or, in watermark mode,
//                         only advances the durable watermark.
//   FlushSealed /         flush the full blocks waiting, on the host's
//   RunFlusher            flusher thread (options.host_flusher), so that
//                         no write pays for a block's write and sync.
//   Get                   serves a durable record from the file (pread,
//                         checksum verified) and an unflushed one from the
//                         in-memory block.
//   Compact               copies the live records of the emptiest full
//                         blocks to the head, waits until the copies are
//                         durable, then frees those blocks' slots for reuse
//                         (host-driven: nothing runs in the background).
//   Checkpoint / Close    write every map's entries and counts with the log
//                         position they start from, copying one partition
//                         at a time while writers go on; Open presizes each
//                         map from the counts, loads it and replays the log
//                         from that position. A torn tail (bytes past the
//                         last durable header's boundary) is truncated and
//                         reported in recovery().
//
// Durability promise: a record is durable once a Flush (or Checkpoint or
// Close) that began after its Set/Del/FlushDb returned has returned OK, or
// once the SetDurable/DelDurable that made it returned OK (X10). After a crash,
// Open restores exactly a prefix of the operations in log order that contains
// every durable one; a record that fails its checksum below a durable boundary
// makes Open fail with kDataLoss rather than index it.
//
// Thread safety: every method may be called from any thread. Set, Del and
// Get lock the key's partition and no store-wide lock: an append reserves
// its bytes in the open block by compare-and-swap (the log mutex only when
// the block is full, once per block), and an unflushed record is read from
// memory under the partition lock (the log mutex only to find its block if
// more than 64 blocks wait in memory); FlushDb locks every partition, and
// the log mutex to mark its block. Flush,
// SetDurable and DelDurable wait in a group (group mutex and condition
// variable, a leaf lock): one of them at a time leads a flush attempt, the
// others wait for it. Flush attempts are serialised by a flush mutex.
// Flush writes and syncs without partition locks, and its receipt pass
// holds one partition lock for at most `pass.slice_receipts` receipts at a
// time. Checkpoint holds one partition lock at a time while it copies that
// partition's maps, then flushes as Flush does and writes the file with no
// partition lock held, so Set, Get and Del wait at most for one partition's
// copy. Compact and Checkpoint calls are serialised by a compact mutex
// (Close waits for it); Compact takes a partition lock per copied record. Lock
// order: compact mutex, flush mutex, partitions in ascending order, log mutex;
// the group mutex is a leaf (docs/concurrency.md). Set, Del and FlushDb may
// block in Flush when `max_sealed_blocks` full blocks are waiting
// (back-pressure), or, with `host_flusher` and a RunFlusher running, wait for
// the flusher (the sealed mutex, a leaf, guards that handoff). Every method may
// block on I/O or locks; none may be called from a callback of another.

#ifndef CAIRN_FLUSH_LOG_STORE_H_
#define CAIRN_FLUSH_LOG_STORE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/base/clock.h"
#include "cairn/base/env.h"
#include "cairn/base/metrics.h"
#include "cairn/base/mutex.h"
#include "cairn/base/status.h"
#include "cairn/base/thread_annotations.h"
#include "cairn/base/version.h"
#include "cairn/flush/block_log.h"
#include "cairn/flush/receipt_pass.h"

CAIRN_NAMESPACE_BEGIN

enum class FlushMode : std::uint8_t {
  // After the I/O, the receipt pass marks each flushed entry durable.
  kReceipts,
  // The flush touches no index entry: a record is durable iff it lies
  // below the durable watermark (block, boundary).
  kWatermark,
};

struct LogStoreOptions {
  std::size_t partitions = 16;
  std::uint32_t databases = 16;                     // maps per partition
  std::size_t block_bytes = kLogDefaultBlockBytes;  // for a new log only
  std::size_t max_key_bytes = 1024;                 // <= kLogMaxKeyBytes
  std::size_t max_value_bytes = std::size_t{1} << 20;
  // fdatasync at each sync point (BlockLogOptions::sync).
  bool sync = true;
  // The log's writes bypass the page cache (BlockLogOptions::direct_io:
  // O_DIRECT, whole aligned pages); kInvalidArgument from Open if the
  // filesystem refuses it. Off by default: measured here, it ran bulk
  // (non-durable) SETs about 2.3x faster, left durable SETs where they
  // were and made GETs about 18% slower (docs/flush.md, "Direct I/O
  // against buffered writes").
  bool direct_io = false;
  FlushMode mode = FlushMode::kReceipts;
  ReceiptPassOptions pass;
  // Full (sealed) blocks that may wait for a flush. A write that finds
  // this many waiting makes room first (back-pressure): without a flusher
  // it flushes them itself; with one it waits for it (host_flusher). If
  // that flush fails, the write fails with its error and appends nothing,
  // so memory holds at most this many full blocks plus one per concurrent
  // writer.
  std::size_t max_sealed_blocks = 4;
  // Whether the host runs a flusher: LogStore::RunFlusher on a thread of
  // its own (cairn starts none). false (the default): a write that finds
  // max_sealed_blocks full blocks waiting flushes them inline, and
  // RunFlusher is refused. true: sealing a block wakes the flusher, which
  // writes and syncs it while writes go on into the next block; a write
  // waits only when max_sealed_blocks full blocks wait, until the flusher
  // (or any flush) releases one, and is counted in
  // cairn_logstore_backpressure_waits_total. While no RunFlusher call runs
  // (before the host starts it, after it returned), writes make room
  // inline as with false: nothing ever waits for a flusher that does not
  // run.
  bool host_flusher = false;
  // Group commit's commit delay (docs/flush.md, "Group commit"): the
  // longest a new leader waits for the durable writers the last sync
  // released before it flushes, never more than half the last flush's I/O
  // time. Zero turns the delay off.
  std::chrono::microseconds max_commit_delay{1000};
  bool checkpoint_on_close = true;
  // The file layer the log and the checkpoint go through; null means
  // Env::Default(). Not owned: it must outlive the store.
  Env* env = nullptr;
  // Times flushes, checkpoints and durable waits (the report's nanoseconds
  // and the metrics' histograms); null means Clock::Steady(). Not owned.
  const Clock* clock = nullptr;
};

// What Open found and did.
struct LogStoreRecovery {
  bool created = false;          // a new, empty store
  bool from_checkpoint = false;  // a checkpoint was loaded
  std::uint64_t checkpoint_entries = 0;
  std::uint64_t blocks_replayed = 0;
  std::uint64_t records_replayed = 0;
  // Bytes past the last durable boundary, cut off (a flush the crash
  // interrupted). 0 after a clean shutdown.
  std::uint64_t torn_tail_bytes = 0;
  std::uint64_t rehashes_during_load = 0;  // 0 expected after presizing
};

// Where the log's space goes (LogStore::Space). A record is live while the
// index points at it; a record superseded by a later Set, deleted, or
// dropped by FlushDb is dead, and so are tombstones (Del and FlushDb
// records) and seals. Every block takes block_bytes of the file whatever
// its records hold, so a block's dead bytes are block_bytes minus its live
// bytes; Compact relocates the live records of the emptiest blocks and
// frees their slots for reuse.
struct LogBlockSpace {
  std::uint64_t block = 0;       // the block's number (log order)
  std::uint32_t slot = 0;        // its place in the file
  std::uint64_t live_bytes = 0;  // bytes of its live records
};
struct LogStoreSpace {
  std::uint64_t block_bytes = 0;  // each block's size in the file
  std::uint64_t slots = 0;        // block slots in the file, free ones included
  std::uint64_t free_slots = 0;   // slots a new block will reuse
  std::uint64_t live_bytes = 0;   // the sum over blocks
  // Every block in the log, in log order; the last is the one being filled.
  std::vector<LogBlockSpace> blocks;
  // Bytes the log file takes: its header and every slot.
  std::uint64_t file_bytes() const noexcept {
    return kLogFileHeaderBytes + slots * block_bytes;
  }
};

// What Compact may do in one call.
struct CompactOptions {
  // Blocks whose live bytes are at most this fraction of a block's record
  // space are candidates; the emptiest go first.
  double max_live_fraction = 0.5;
  // Stops taking more blocks once it relocated this many bytes (it always
  // takes at least one candidate, if there is one).
  std::uint64_t max_relocated_bytes = std::uint64_t{32} << 20;
  // At most this many blocks per call.
  std::size_t max_blocks = 8;
};

struct CompactReport {
  std::uint64_t blocks_freed = 0;
  std::uint64_t records_relocated = 0;  // Set records copied to the head
  std::uint64_t bytes_relocated = 0;
  std::uint64_t tombstones_relocated = 0;  // Del records kept (copied)
  std::uint64_t tombstones_dropped = 0;
  std::uint64_t blocks_pinned = 0;  // candidates skipped: a FlushDb record
};

struct FlushReport {
  std::uint64_t blocks_written = 0;  // blocks whose data was written
  std::uint64_t bytes_written = 0;   // data bytes
  std::uint64_t io_nanos = 0;        // writing and syncing the data
  std::uint64_t syncs = 0;           // fdatasync calls (Sync)
  std::uint64_t pass_nanos = 0;      // the whole receipt pass
  ReceiptPassStats pass;             // counts and lock hold times
};

class LogStore {
 public:
  // Opens the store in directory `dir` (created if missing), recovering
  // from its checkpoint and log. kInvalidArgument for bad options (or a
  // checkpoint holding a database >= options.databases); kDataLoss for a
  // damaged log or checkpoint (a record failing its checksum below a
  // durable boundary, a missing block followed by present ones, a log
  // shorter than the checkpoint names, not a cairn log);
  // kFailedPrecondition for another format version or when another opener
  // holds `dir`/LOCK; the Env's error for I/O (kInternal with errno text,
  // kResourceExhausted for a full disk, kNotFound if the parent of `dir`
  // does not exist). On error no record was changed, but `dir`, its LOCK
  // file and an empty new log (or log.tmp) may have been made, and a torn
  // tail may have been cut.
  static Result<std::unique_ptr<LogStore>> Open(const std::string& dir,
                                                const LogStoreOptions& options);

  LogStore(const LogStore&) = delete;
  LogStore& operator=(const LogStore&) = delete;
  // Close() unless already closed; its error, if any, is dropped.
  ~LogStore();

  // kInvalidArgument (nothing applied) for a db out of range, an empty key,
  // a key over max_key_bytes or a value over max_value_bytes;
  // kResourceExhausted if memory ran out (nothing applied); the error of
  // the back-pressure flush (max_sealed_blocks) if it failed, such as
  // kResourceExhausted for a full disk (nothing applied); kFailedPrecondition
  // after Close. Not durable until the next Flush.
  Status Set(std::uint32_t db, std::string_view key, std::string_view value);
  // Set, then waits until its record is durable: OK means a sync that
  // began after the append returned OK (the record survives a power cut).
  // Concurrent callers share syncs (group commit): the first waiter with no
  // flush in progress leads one (everything appended so far, one fdatasync)
  // while the others wait on it; a waiter whose record an in-progress or
  // completed sync covered issues none. If a sync that covered the record
  // fails, every waiter it covered gets its error (the record may or may
  // not survive a crash); the record stays appended and a later flush
  // retries it. Errors as Set, plus the flush's (kInternal,
  // kResourceExhausted). Blocks on the group's sync; locks as Set, then the
  // group mutex, and as leader the flush mutex and what Flush locks.
  Status SetDurable(std::uint32_t db, std::string_view key,
                    std::string_view value);
  // kNotFound if absent (nothing logged); else as Set.
  Status Del(std::uint32_t db, std::string_view key);
  // Del, then waits as SetDurable does.
  Status DelDurable(std::uint32_t db, std::string_view key);
  // Drops every key of `db` (each partition's map is detached, so receipts
  // still in flight for it are skipped, X7).
  Status FlushDb(std::uint32_t db);
  // The value into *value. kNotFound if absent; kDataLoss if the record
  // read back fails its checksum; kInternal on a read error. After an error
  // *value's contents are unspecified. `key` may point into *value.
  Status Get(std::uint32_t db, std::string_view key, std::string* value);

  // Makes everything appended before the call durable: when it returns OK,
  // a sync that began after the call covered it. It joins the group of
  // SetDurable waiters (it may return without I/O if another caller's sync
  // already covered its position, or wait for one in progress); as the
  // leader it writes every block's new records and one fdatasync, then
  // marks the index (FlushMode). A block that became full and durable gets
  // its final header with one more sync. *report, if given, gets what this
  // call's own flush did (nothing when another caller's sync served it).
  Status Flush(FlushReport* report = nullptr);
  // Copies the index one partition at a time (writers of the other
  // partitions go on), flushes (everything appended so far, so every
  // record the copy names, becomes durable), then writes the checkpoint
  // file (temp file, fdatasync, rename, directory fsync) with no partition
  // lock held. The copy reflects the log position taken before it began,
  // plus some records after it, which replay applies again (X11). Errors:
  // the flush's or the file layer's (the previous checkpoint stays in
  // force); kResourceExhausted if memory ran out; kFailedPrecondition after
  // Close.
  Status Checkpoint();
  // Flush and, if options.checkpoint_on_close, Checkpoint; later calls
  // except Get return kFailedPrecondition. The host stops its writers
  // first: a Set that races with Close may return OK after the last flush
  // and so never become durable. A second Close returns OK. A running
  // RunFlusher returns OK once Close has flushed, and writes waiting for
  // room return kFailedPrecondition. The host joins its flusher thread
  // before it destroys the store.
  Status Close();

  // The flusher (docs/flush.md, "Flusher"). FlushSealed flushes the full
  // blocks waiting, if any, and returns: one flush attempt (every block's
  // new records, the open one's included, one sync for them, the full
  // blocks' final headers with one more, then the receipt pass), after
  // which those blocks are released and waiting writers go on. No I/O if no
  // full block waits. kFailedPrecondition after Close; the flush's error
  // (kInternal, kResourceExhausted), which writes waiting for room also
  // return. Locks as Flush's leader (the flush mutex and what Flush
  // locks).
  Status FlushSealed();
  // The host's flusher thread: loops waiting for a sealed block (or stop,
  // or Close) and flushing it as FlushSealed does. Returns OK once `stop`
  // is requested or the store is closed, or the first flush error (the
  // flusher stops; writes waiting for room get the same error, and later
  // writes make room inline until the host runs a flusher again).
  // kFailedPrecondition without options.host_flusher, or while another
  // RunFlusher call runs. The host owns the thread: e.g.
  //   std::jthread flusher([&](std::stop_token st) { s = store->RunFlusher(st);
  //   });
  // Shutdown: stop the writers, Close (RunFlusher then returns OK), join
  // the thread, destroy the store; or request_stop and join, then Close.
  Status RunFlusher(const std::stop_token& stop) CAIRN_EXCLUDES(sealed_mu_)
      CAIRN_NO_THREAD_SAFETY_ANALYSIS;  // std::unique_lock for the condvar

  // What every flush since Open did, summed (explicit, back-pressure,
  // checkpoint and close flushes). Waits for a flush in progress.
  FlushReport FlushTotals() CAIRN_EXCLUDES(flush_mu_);

  // Reports the store's metrics (docs/metrics.md, "LogStore"):
  // cairn_logstore_* operation counts by result, durable waits, flushes,
  // syncs, bytes, checkpoints, their latency histograms and gauges of the
  // recovery and the sealed blocks waiting, each with `labels` first. Takes
  // no lock; the counts are relaxed sums (docs/metrics.md). The operation
  // counters sit on per-thread stripes, so Get and Set write no line that
  // other threads' counters share.
  void VisitMetrics(MetricVisitor& visitor,
                    std::span<const MetricLabel> labels = {}) const;

  // Live bytes per block (see LogStoreSpace). Kept on the write path: a Set
  // adds its record to its block and takes the record it supersedes off
  // that one's, Del and FlushDb take off what they drop; Open rebuilds it
  // from the recovered index. Locks the log mutex while it copies.
  LogStoreSpace Space() const CAIRN_EXCLUDES(log_mu_);

  // Reclaims space (docs/flush.md, "Compaction"); the host calls it when it
  // wants, nothing runs in the background. Picks the emptiest blocks that
  // are full, durable and no longer in memory, copies each one's live
  // records to the head of the log (a Set record per live key, a Del record
  // per tombstone that must outlive the block), waits until the copies are
  // durable (a group-commit flush), and only then frees the block's slot,
  // which the next block opened reuses. Writers and readers go on
  // meanwhile: each copy takes the key's partition lock for its append and
  // index update only. kFailedPrecondition after Close; the flush's error
  // (nothing freed); kDataLoss if a block's durable records fail their
  // checksums. Serialised with other Compact calls and Close by the compact
  // mutex; locks as Set, then as Flush.
  Status Compact(const CompactOptions& options = {},
                 CompactReport* report = nullptr) CAIRN_EXCLUDES(compact_mu_);

  const LogStoreRecovery& recovery() const noexcept { return recovery_; }
  const LogStoreOptions& options() const noexcept { return options_; }
  std::size_t block_bytes() const noexcept { return log_->block_bytes(); }
  // Keys in `db`, summed over partitions (locks each partition in turn).
  std::size_t KeyCount(std::uint32_t db);
  // Whether the index marks db/key durable (receipt mode); for tests.
  bool IndexSaysDurable(std::uint32_t db, std::string_view key);

 private:
  struct Partition {
    Mutex mu;
    std::vector<std::unique_ptr<RecordIndex>> maps CAIRN_GUARDED_BY(mu);
    // The receipts of this partition's appends not yet handed to a pass,
    // in log order (each append reserves its bytes under this lock), and
    // whether there are any (set and cleared under mu; the pass reads it
    // without mu to skip the partition: a stale false only leaves the
    // receipts for the next pass).
    std::vector<FlushReceipt> receipts CAIRN_GUARDED_BY(mu);
    std::atomic<bool> has_receipts{false};
  };
  struct PendingBlock {
    std::unique_ptr<LogBlockBuffer> buffer;
  };
  // An append in progress: the block and the bytes reserved in it.
  struct Append {
    PendingBlock* block = nullptr;
    LogBlockBuffer::Reservation reservation;
  };

  LogStore(std::string dir, const LogStoreOptions& options, Env* env,
           std::unique_ptr<FileLock> dir_lock, std::unique_ptr<BlockLog> log);

  Status Recover();
  // `slots`: block number -> slot of the blocks the log holds, to locate
  // the entries (an entry naming another block gets no slot; replay must
  // supersede it, else RebuildLive fails). *block, *offset: the position
  // replay starts from; *reach: the end of the furthest record an entry
  // names (block << 32 | end), which the log must reach.
  Status LoadCheckpoint(const std::string& path,
                        const std::map<std::uint64_t, std::uint32_t>& slots,
                        std::uint64_t* block, std::uint32_t* offset,
                        std::uint64_t* reach);
  // What ScanBlock found in one block.
  struct BlockScan {
    std::uint32_t end = 0;              // where its valid records end
    std::uint32_t records = 0;          // valid records, the seal included
    std::uint64_t chain = 0;            // their chain checksum
    bool sealed = false;                // ends with a valid seal record
    bool flushdb = false;               // holds a FlushDb record
    std::uint32_t header_sequence = 0;  // its newest valid header, if any
    std::uint32_t header_used = 0;
  };
  // Replays the records of block `block` in slot `slot` from `from`
  // (recovery), checking them against `header` (null: the block's header
  // slots are both damaged).
  Status ScanBlock(std::uint64_t block, std::uint32_t slot,
                   const LogBlockHeader* header, std::uint32_t from,
                   std::uint64_t file_bytes, BlockScan* scan);
  Status ApplyReplayed(const LogRecordView& record, RecordLocation loc);
  // The checkpoint file's bytes for position (block, offset): each
  // partition's maps copied under that partition's lock alone. May throw
  // std::bad_alloc.
  std::string EncodeCheckpoint(std::uint64_t block, std::uint32_t offset);

  Status Validate(std::uint32_t db, std::string_view key,
                  std::string_view value) const;
  // Set and Del; *end (if not null) gets the record's end position,
  // block << 32 | offset + length, comparable with watermark_.
  // With `only_if_at` (compaction), the Set happens only while the key's
  // entry points at that record (else kNotFound, nothing applied).
  Status SetImpl(std::uint32_t db, std::string_view key, std::string_view value,
                 std::uint64_t* end,
                 const RecordLocation* only_if_at = nullptr);
  Status DelImpl(std::uint32_t db, std::string_view key, std::uint64_t* end);
  Status DelUncounted(std::uint32_t db, std::string_view key,
                      std::uint64_t* end);
  Status GetUncounted(std::uint32_t db, std::string_view key,
                      std::string* value);
  static std::uint64_t EndOf(const RecordLocation& loc) noexcept;
  // Group commit: the failures counted so far (read before an append), and
  // the wait until `target` is durable or a sync covering it failed after
  // `failures` (see SetDurable). Takes group_mu_, and as leader flush_mu_.
  std::uint64_t FailuresSoFar() CAIRN_EXCLUDES(group_mu_);
  Status WaitDurable(std::uint64_t target, std::uint64_t failures,
                     FlushReport* report) CAIRN_EXCLUDES(group_mu_, flush_mu_)
      CAIRN_NO_THREAD_SAFETY_ANALYSIS;  // std::unique_lock for the condvar
  std::size_t PartitionOf(std::string_view key) const noexcept;
  // Reserves `bytes` in the open block with no lock; when they do not fit,
  // opens the next block under log_mu_ (sealing the full one). The caller
  // holds the partition lock of the record's key (FlushDb: every one) until
  // it has called FinishAppend, which it must, whatever else fails: a block
  // leaves memory only after each partition lock was taken once after the
  // block stopped being the open one (ReleaseFlushedBlocks), and a flush
  // waits for every reservation below its boundary (docs/concurrency.md,
  // "LogStore appends").
  Result<Append> Reserve(std::size_t bytes) CAIRN_EXCLUDES(log_mu_);
  // Seals `full` (the open block) and opens the next one. Nothing changes
  // if it fails.
  Status OpenNextBlockLocked(PendingBlock* full) CAIRN_REQUIRES(log_mu_);
  // Encodes the record into the reservation, completes it and returns its
  // location (flags 0). Cannot fail.
  static RecordLocation FinishAppend(const Append& append, LogRecordType type,
                                     std::uint32_t db, std::string_view key,
                                     std::string_view value) noexcept;
  bool DurableByWatermark(const RecordLocation& loc) const noexcept;
  Status ReadFromFile(const RecordLocation& loc, std::string_view key,
                      std::string* value) const;
  // Back-pressure: when max_sealed_blocks full blocks wait, waits for the
  // flusher if one runs (host_flusher), else flushes; the flush's error if
  // it fails.
  Status MakeRoom() CAIRN_EXCLUDES(sealed_mu_)
      CAIRN_NO_THREAD_SAFETY_ANALYSIS;  // std::unique_lock for the condvar
  // One flush attempt that releases the full blocks waiting (FlushSealed,
  // RunFlusher, inline back-pressure); a failure is recorded for the
  // writers waiting for room. kFailedPrecondition after Close.
  Status FlushForRoom(bool backpressure) CAIRN_EXCLUDES(sealed_mu_, flush_mu_);
  // Wakes the flusher (a block was sealed, or the store closed), and the
  // writers waiting for room (blocks were released).
  void WakeFlusher() CAIRN_EXCLUDES(sealed_mu_);
  void WakeWriters() CAIRN_EXCLUDES(sealed_mu_);

  // Flush steps, under flush_mu_. FlushIo writes every block's new records
  // and its header hint, then one sync; it wakes the group with the result.
  // *more: it stopped before a block whose header (its identity: number
  // and slot) was not yet durable, after writing that header; the caller
  // runs another attempt for that block's records.
  Status FlushIo(FlushReport* report, bool* more) CAIRN_REQUIRES(flush_mu_);
  // FlushIo until no block waits for its first header.
  Status FlushAllIo(FlushReport* report) CAIRN_REQUIRES(flush_mu_);
  // Writes the header of every block whose durable state is ahead of it
  // (`all`), or only of full blocks whose bytes are all durable, then syncs.
  Status WriteHeaders(bool all, FlushReport* report) CAIRN_REQUIRES(flush_mu_);
  // The receipt pass over every partition's receipts that the watermark
  // covers; out of memory skips the rest of it (the watermark still says
  // which records are durable).
  void RunPasses(FlushReport* report) CAIRN_REQUIRES(flush_mu_);
  void RunPassesOrThrow(FlushReport* report) CAIRN_REQUIRES(flush_mu_);
  void ReleaseFlushedBlocks() CAIRN_REQUIRES(flush_mu_);
  static void AddReport(FlushReport& into, const FlushReport& r);
  // The metrics of one flush (a checkpoint's included).
  void CountFlush(const FlushReport& report, const Status& s);
  Status FlushLocked(FlushReport* report, bool all_headers)
      CAIRN_REQUIRES(flush_mu_);
  // Checkpoint's body: copy, flush, write the file.
  Status CheckpointLocked() CAIRN_REQUIRES(compact_mu_)
      CAIRN_EXCLUDES(flush_mu_);
  void LockAllPartitions() CAIRN_NO_THREAD_SAFETY_ANALYSIS;
  void UnlockAllPartitions() CAIRN_NO_THREAD_SAFETY_ANALYSIS;

  // Operation counters (metrics), indices into ops_.
  enum Op : std::size_t {
    kSetOk,
    kSetFailed,
    kDelOk,
    kDelMissing,
    kDelFailed,
    kGetHit,
    kGetMiss,
    kGetFailed,
    kOps,
  };
  // Counts and times a SetDurable/DelDurable/Flush wait.
  Status TimedWait(std::uint64_t target, std::uint64_t failures,
                   FlushReport* report) CAIRN_EXCLUDES(group_mu_, flush_mu_);

  const std::string dir_;
  const LogStoreOptions options_;
  Env* const env_;                        // options_.env, or Env::Default()
  const Clock* const clock_;              // options_.clock, or Steady()
  const std::unique_ptr<FileLock> lock_;  // dir_/LOCK, held while open
  const std::unique_ptr<BlockLog> log_;
  std::vector<std::unique_ptr<Partition>> partitions_;
  LogStoreRecovery recovery_;

  Mutex compact_mu_ CAIRN_ACQUIRED_BEFORE(flush_mu_);
  Mutex flush_mu_ CAIRN_ACQUIRED_BEFORE(log_mu_);
  mutable Mutex log_mu_;
  // Group commit (a leaf: taken after any other lock, never held while
  // taking one): whether a waiter leads a flush, and the last failed sync
  // that covered records, up to which position.
  Mutex group_mu_;
  std::condition_variable_any group_cv_;
  bool leader_ CAIRN_GUARDED_BY(group_mu_) = false;
  std::uint64_t failures_ CAIRN_GUARDED_BY(group_mu_) = 0;
  std::uint64_t failed_upto_ CAIRN_GUARDED_BY(group_mu_) = 0;
  Status failed_status_ CAIRN_GUARDED_BY(group_mu_);
  // Commit delay (docs/flush.md, "Group commit"): threads inside
  // WaitDurable, those that entered since the last leader started, the
  // number of durable waiters a leader expects (the threads inside
  // WaitDurable when the last sync ended), leaders left that skip the
  // delay after one timed out, and the last flush attempt's I/O time,
  // which bounds the delay (on the store's clock: a fake clock's figure
  // only shortens the wait, and max_commit_delay caps it).
  std::uint32_t in_wait_ CAIRN_GUARDED_BY(group_mu_) = 0;
  std::uint32_t arrivals_ CAIRN_GUARDED_BY(group_mu_) = 0;
  std::uint32_t expected_group_ CAIRN_GUARDED_BY(group_mu_) = 0;
  std::uint32_t delay_rest_ CAIRN_GUARDED_BY(group_mu_) = 0;
  std::condition_variable_any leader_cv_;
  std::atomic<std::int64_t> last_flush_io_ns_{0};
  FlushReport totals_ CAIRN_GUARDED_BY(flush_mu_);
  bool opened_ CAIRN_GUARDED_BY(flush_mu_) = false;  // Open's attempt done
  // Blocks not yet released, oldest first; the last is being filled.
  std::deque<std::unique_ptr<PendingBlock>> blocks_ CAIRN_GUARDED_BY(log_mu_);
  std::vector<std::unique_ptr<LogBlockBuffer>> spare_buffers_
      CAIRN_GUARDED_BY(log_mu_);
  // The block table: every block in the log (number -> slot, live bytes,
  // whether it holds a FlushDb record), the free slots, the slots in the
  // file and the number the next block gets. Blocks leave it when Compact
  // frees them. live_total_ and log_blocks_ mirror it for VisitMetrics.
  struct BlockInfo {
    std::uint32_t slot = 0;
    bool flushdb = false;
  };
  std::map<std::uint64_t, BlockInfo> table_ CAIRN_GUARDED_BY(log_mu_);
  std::vector<std::uint32_t> free_slots_ CAIRN_GUARDED_BY(log_mu_);
  std::uint32_t slots_ CAIRN_GUARDED_BY(log_mu_) = 0;
  std::uint64_t next_block_ CAIRN_GUARDED_BY(log_mu_) = 0;
  // The position the newest durable checkpoint reflects (block << 32 |
  // offset), if there is one: tombstones before it may be dropped.
  bool has_checkpoint_ CAIRN_GUARDED_BY(log_mu_) = false;
  // The newest checkpoint generation found or attempted; the next
  // checkpoint writes the one after it.
  std::uint64_t checkpoint_generation_ CAIRN_GUARDED_BY(compact_mu_) = 0;
  std::uint64_t checkpoint_position_ CAIRN_GUARDED_BY(log_mu_) = 0;
  std::atomic<std::uint64_t> live_total_{0};
  std::atomic<std::uint64_t> log_blocks_{0};
  std::atomic<std::uint64_t> log_slots_{0};
  // Live bytes per block slot (of the block now in it). Writers add and
  // take off with relaxed atomics under their key's partition lock only, so
  // a record's addition comes before its removal in the counter's order;
  // the counters come in chunks, allocated under log_mu_ when a slot is
  // first given out and kept while the store is open.
  static constexpr std::size_t kLiveChunk = 1024;
  static constexpr std::size_t kLiveChunks =
      RecordLocation::kMaxSlots / kLiveChunk;
  std::unique_ptr<std::atomic<std::atomic<std::uint64_t>*>[]> live_chunks_;
  std::vector<std::unique_ptr<std::atomic<std::uint64_t>[]>> live_storage_
      CAIRN_GUARDED_BY(log_mu_);
  // The counter of `slot`, which AllocateSlotLocked gave out.
  std::atomic<std::uint64_t>& LiveOf(std::uint32_t slot) const noexcept;
  // Makes LiveOf(slot) valid; false if out of memory.
  bool EnsureLiveLocked(std::uint32_t slot) CAIRN_REQUIRES(log_mu_);
  // Adds a record to, or takes it off, its block's live bytes.
  void AddLive(const RecordLocation& loc) noexcept;
  void SubLive(const RecordLocation& loc) noexcept;
  // Recomputes every block's live bytes from the recovered index (Open);
  // kDataLoss if an entry names a block the log does not hold.
  Status RebuildLive();
  // Compaction of one block (Compact); adds what it did to *report and, in
  // *end, the end of the last record it appended (0 if none).
  Status CompactBlock(std::uint64_t block, std::uint32_t slot,
                      CompactReport* report, std::uint64_t* end);
  // Appends a Del record for db/key if the key is absent (kNotFound, and
  // nothing appended, if it is present); *end as SetImpl's.
  Status RelocateTombstone(std::uint32_t db, std::string_view key,
                           std::uint64_t* end);
  // A block slot for a new block: a free one, else a new one at the end.
  Result<std::uint32_t> AllocateSlotLocked() CAIRN_REQUIRES(log_mu_);
  // The pending block holding `block`, or null.
  PendingBlock* FindPendingLocked(std::uint64_t block) CAIRN_REQUIRES(log_mu_);
  // The pending block holding `block`, which must be in memory (the caller
  // holds a partition lock after seeing the watermark below it): from the
  // ring, else under log_mu_.
  const PendingBlock* FindPending(std::uint64_t block) CAIRN_EXCLUDES(log_mu_);
  // The block being filled: appends reserve in it without a lock. Set under
  // log_mu_ (release) once the block is ready.
  std::atomic<PendingBlock*> open_{nullptr};
  // Pending blocks by number, for Get without log_mu_: entry block % size
  // holds (block + 1, its PendingBlock) while that block is in memory, if
  // no other pending block had the entry when it opened (else Get looks
  // the block up under log_mu_). Written under log_mu_.
  struct PendingRingEntry {
    std::atomic<std::uint64_t> block_plus_one{0};
    std::atomic<PendingBlock*> pending{nullptr};
  };
  static constexpr std::size_t kPendingRing = 64;
  std::unique_ptr<PendingRingEntry[]> pending_ring_;
  void RingInsertLocked(PendingBlock* pending) CAIRN_REQUIRES(log_mu_);
  void RingEraseLocked(const PendingBlock* pending) CAIRN_REQUIRES(log_mu_);
  // Takes and drops every partition lock in turn: whoever held one before
  // has left it (ReleaseFlushedBlocks).
  void PartitionGrace() CAIRN_NO_THREAD_SAFETY_ANALYSIS;
  // Durable up to (block << 32 | boundary): records of earlier blocks, and
  // of that block ending at or below boundary.
  std::atomic<std::uint64_t> watermark_{0};
  std::atomic<std::size_t> sealed_blocks_{0};
  // The flusher handoff (a leaf like group_mu_, never held with it): the
  // flusher waits on sealed_cv_ for a sealed block, stop or Close; writes
  // waiting for room wait on room_cv_ until blocks are released, a flush
  // for room fails, the flusher returns or the store closes.
  Mutex sealed_mu_;
  std::condition_variable_any sealed_cv_;
  std::condition_variable_any room_cv_;
  bool flusher_running_ CAIRN_GUARDED_BY(sealed_mu_) = false;
  std::uint64_t room_failures_ CAIRN_GUARDED_BY(sealed_mu_) = 0;
  Status room_status_ CAIRN_GUARDED_BY(sealed_mu_);
  std::atomic<bool> closed_{true};  // false once Open recovered

  // Metrics (VisitMetrics). Operations on per-thread stripes; the rest are
  // counted where a lock or I/O is taken anyway.
  StripedCounters<kOps> ops_;
  Counter durable_waits_;
  Counter durable_wait_failures_;
  Counter commit_delay_timeouts_;
  Counter flushes_;  // FlushLocked and checkpoint flushes
  Counter flush_failures_;
  Counter backpressure_flushes_;
  Counter backpressure_waits_;
  Counter flusher_flushes_;  // FlushSealed and RunFlusher flushes
  Counter syncs_;
  Counter bytes_written_;
  Counter checkpoints_;
  Counter checkpoint_failures_;
  Counter flushdbs_;
  Counter compactions_;
  Counter compaction_failures_;
  Counter blocks_freed_;
  Counter bytes_relocated_;
  Counter get_retries_;
  Histogram flush_io_seconds_{1e-9};  // writes + the one sync of a flush
  Histogram checkpoint_seconds_{1e-9};
  Histogram durable_wait_seconds_{1e-9};
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_FLUSH_LOG_STORE_H_
