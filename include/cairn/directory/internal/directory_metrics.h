// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// GroupDirectory's counters (docs/metrics.md, "Directory"). Machinery; not
// included by users.
//
// Two parts, sized for a host with very many directories (one per tenant):
//   ReadCounters   lookups' hits and misses, StripedCounters (one cache
//                  line per thread stripe, 4 stripes: 256 bytes), inline in
//                  the directory, so a lookup adds on its own stripe's line
//                  and never on a line other readers share.
//   WriteCounters  per-operation outcomes, evictions and reaps, plain
//                  Counters in one block allocated by the directory's first
//                  counted write (LazyWriteCounters), so a directory never
//                  written to holds one null pointer. The allocation never
//                  throws: if it fails, that write's count is lost and the
//                  next write tries again (a counter never fails a write).
//
// Thread safety: every counter is a relaxed atomic, updated and read from
// any thread; LazyWriteCounters::Get() installs the block with one
// compare-and-swap (racing first writes each build one, the loser frees
// its own).

#ifndef CAIRN_DIRECTORY_INTERNAL_DIRECTORY_METRICS_H_
#define CAIRN_DIRECTORY_INTERNAL_DIRECTORY_METRICS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string_view>

#include "cairn/base/metrics.h"
#include "cairn/base/status.h"
#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

namespace directory_internal {

// The write operations counted, each one public method (or a pair:
// Erase and EraseIfMatch are both `erase`); the op label.
enum class MetricOp : std::uint8_t {
  kCreate,
  kCreatePending,
  kCommit,
  kAbort,
  kBeginUpsert,
  kCommitUpsert,
  kAbortUpsert,
  kErase,
  kEraseGroup,
  kAdjustCharge,
};
inline constexpr std::size_t kMetricOps = 10;
inline constexpr std::array<std::string_view, kMetricOps> kMetricOpNames = {
    "create",       "create_pending", "commit",       "abort",
    "begin_upsert", "commit_upsert",  "abort_upsert", "erase",
    "erase_group",  "adjust_charge"};

// An operation's outcome; the result label.
enum class MetricOutcome : std::uint8_t {
  kOk,            // OK
  kExists,        // kAlreadyExists
  kNotFound,      // kNotFound
  kPrecondition,  // kFailedPrecondition (lease, pending state, teardown)
  kQuota,         // the tenant's quota refused the charge
  kBusy,          // other kResourceExhausted: route back-pressure, log full
  kError,         // anything else: bad argument, shut down, log I/O
};
inline constexpr std::size_t kMetricOutcomes = 7;
inline constexpr std::array<std::string_view, kMetricOutcomes>
    kMetricOutcomeNames = {"ok",    "exists", "not_found", "precondition",
                           "quota", "busy",   "error"};

constexpr MetricOutcome OutcomeOf(StatusCode code,
                                  bool quota_refused) noexcept {
  if (quota_refused) return MetricOutcome::kQuota;
  switch (code) {
    case StatusCode::kOk:
      return MetricOutcome::kOk;
    case StatusCode::kAlreadyExists:
      return MetricOutcome::kExists;
    case StatusCode::kNotFound:
      return MetricOutcome::kNotFound;
    case StatusCode::kFailedPrecondition:
      return MetricOutcome::kPrecondition;
    case StatusCode::kResourceExhausted:
      return MetricOutcome::kBusy;
    default:
      return MetricOutcome::kError;
  }
}

// Read-path slots: a point lookup adds one, a batch at most three (the
// batch, its hit keys, its missed keys if any).
enum ReadSlot : std::size_t {
  kGetHit,     // WithObject*, WithToken*, WithHandle*: fn ran
  kGetMiss,    // ... kNotFound
  kPinHit,     // Pin: a handle
  kPinMiss,    // Pin: kNotFound
  kBatchHits,  // WithObjects*: keys whose fn ran
  kBatchMisses,
  kBatches,  // WithObjects* calls
  kReadSlots,
};
using ReadCounters = StripedCounters<kReadSlots, 4>;

struct WriteCounters {
  std::array<Counter, kMetricOps * kMetricOutcomes> ops;
  Counter evicted_objects;
  Counter evicted_groups;
  Counter evicted_size_bytes;
  Counter evicted_counted_bytes;
  Counter reaped;

  void CountOp(MetricOp op, MetricOutcome outcome) noexcept {
    ops[static_cast<std::size_t>(op) * kMetricOutcomes +
        static_cast<std::size_t>(outcome)]
        .Add();
  }
  std::uint64_t OpValue(std::size_t op, std::size_t outcome) const noexcept {
    return ops[op * kMetricOutcomes + outcome].Value();
  }
};

class LazyWriteCounters {
 public:
  LazyWriteCounters() = default;
  LazyWriteCounters(const LazyWriteCounters&) = delete;
  LazyWriteCounters& operator=(const LazyWriteCounters&) = delete;
  ~LazyWriteCounters() { delete block_.load(std::memory_order_acquire); }

  // The block, allocated on the first call; null only if that allocation
  // failed (the caller then skips its count).
  WriteCounters* Get() noexcept {
    WriteCounters* block = block_.load(std::memory_order_acquire);
    if (block != nullptr) [[likely]]
      return block;
    return Install();
  }
  // Null until the first counted write.
  const WriteCounters* Peek() const noexcept {
    return block_.load(std::memory_order_acquire);
  }

 private:
  WriteCounters* Install() noexcept {
    auto* fresh = new (std::nothrow) WriteCounters();
    if (fresh == nullptr) return nullptr;
    WriteCounters* installed = nullptr;
    if (block_.compare_exchange_strong(installed, fresh,
                                       std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
      return fresh;
    }
    delete fresh;  // a racing first write installed its block
    return installed;
  }

  std::atomic<WriteCounters*> block_{nullptr};
};

// What GroupDirectory::VisitMetrics reads, as plain values; rendered by
// VisitDirectoryMetrics (src/directory/directory_metrics.cc).
struct DirectoryMetricValues {
  std::uint64_t objects = 0;
  std::uint64_t groups = 0;
  std::uint64_t pending_unlinks = 0;
  std::uint64_t lifecycle_stripe_waits = 0;
  std::uint64_t pending_charge_bytes = 0;
  std::array<std::uint64_t, kReadSlots> reads{};
  const WriteCounters* writes = nullptr;  // null: nothing written yet
};

// Reports every cairn_directory_* metric of `v` to `visitor`.
void VisitDirectoryMetrics(const DirectoryMetricValues& v,
                           MetricVisitor& visitor);

}  // namespace directory_internal

CAIRN_NAMESPACE_END

#endif  // CAIRN_DIRECTORY_INTERNAL_DIRECTORY_METRICS_H_
