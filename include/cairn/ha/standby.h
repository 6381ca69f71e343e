// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Standby and recovery (H3, docs/ha.md). A Standby is a registry rebuilt
// from a snapshot (or empty) that follows a primary's durable log
// directory: Poll applies every complete record written since the last
// call, in LSN order (replay.h). It refuses host writes until Promote,
// which takes the log over (its LOCK: the primary must be gone), checks
// that nothing written is left unapplied, and from then on logs every
// change to that log, continuing the primary's LSNs. Recover is a Standby
// that has read the whole log: the state of the primary at its last written
// record.
//
//   auto standby = Standby<P>::Open(options);    // snapshot, or empty
//   while (primary_alive) standby->Poll();       // a hot standby
//   standby->Promote();                          // now the primary
//   standby->registry().GetOrCreate(...);        // writes are logged
//
// A standby may apply a record the primary wrote but had not yet synced (a
// record is readable once written): only a change whose caller had not
// been answered can be affected, and such a change may or may not survive
// a crash either way.
//
// Thread safety: Poll, Promote, VisitMetrics and the accessors are for one
// thread (the host's follower thread); registry() is safe to read from any
// thread, as any registry, and to write once Promote has returned.

#ifndef CAIRN_HA_STANDBY_H_
#define CAIRN_HA_STANDBY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "cairn/base/env.h"
#include "cairn/base/metrics.h"
#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/ha/file_durable_log.h"
#include "cairn/ha/replay.h"
#include "cairn/ha/snapshot.h"
#include "cairn/tenant/tenant_registry.h"

CAIRN_NAMESPACE_BEGIN

template <typename Payload>
struct StandbyOptions {
  // The snapshot to start from (WriteSnapshotAt); empty: an empty registry
  // at LSN 0, which then needs the log from its first record.
  std::string snapshot_path;
  // Decodes the snapshot's payloads (as RestoreRegistrySnapshot).
  SnapshotDecoder<Payload> decode;
  // The primary's FileDurableLog directory.
  std::string log_dir;
  // The replica registry's options. durable_log is replaced by the
  // standby's own log switch; the default tenant must be named as on the
  // primary.
  RegistryOptions registry;
  // Options of each tenant a log record creates (null: defaults; the
  // record's quota limit is applied over them).
  std::function<Result<TenantOptions>(std::string_view name)> tenant_options;
  // Largest record the reader accepts (as FileDurableLogOptions).
  std::size_t max_record_bytes = std::size_t{16} << 20;
  // The file layer for the snapshot, the reader and the promoted log; null:
  // Env::Default(). Not owned.
  Env* env = nullptr;
  // Where the restore of snapshot_path is counted and timed
  // (SnapshotMetrics::TimeRestore); null: nowhere. Not owned.
  SnapshotMetrics* snapshot_metrics = nullptr;
};

template <typename Payload = EmptyPayload,
          template <typename> class Route = ObjectRouteIndex>
class Standby {
 public:
  using Registry = TenantRegistry<Payload, Route>;

  // Restores the snapshot (if any) and opens a reader at the record after
  // its log position. Errors: the restore's (kDataLoss, kNotFound, ...),
  // the reader's (kOutOfRange: the log no longer holds the records after
  // the snapshot, a newer snapshot is needed; kDataLoss).
  static Result<std::unique_ptr<Standby>> Open(
      StandbyOptions<Payload> options) {
    std::unique_ptr<Standby> standby(new Standby(std::move(options)));
    CAIRN_RETURN_IF_ERROR(standby->Start());
    return standby;
  }

  // Applies the complete records readable now, at most `max_records`;
  // returns how many. Records applied before an error stay applied.
  // Errors: the reader's (kDataLoss for damage or a gap, kOutOfRange) or
  // the applier's. After Promote: kFailedPrecondition.
  Result<std::size_t> Poll(
      std::size_t max_records = std::numeric_limits<std::size_t>::max()) {
    if (log_ != nullptr) {
      return FailedPreconditionError("promoted: the standby no longer follows");
    }
    ++polls_;
    std::size_t applied = 0;
    DurableLogEntry entry;
    while (applied < max_records) {
      Result<bool> next = reader_->Next(&entry);
      if (!next.ok()) {
        ++poll_errors_;
        return std::move(next).status();
      }
      if (!next.value()) break;
      if (Status s = applier_->Apply(entry.lsn, entry.body); !s.ok()) {
        ++poll_errors_;
        return s;
      }
      ++applied;
    }
    return applied;
  }

  // Becomes the primary: applies what is left, opens the log directory as
  // its writer (kFailedPrecondition while the primary still holds it; a
  // torn tail is cut unless options.truncate_damaged_tail is false),
  // applies what the primary wrote meanwhile, and attaches the log, so the
  // registry's writes are logged from LSN applied_lsn() + 1 on. options.env
  // defaults to the standby's. Errors leave the standby following.
  Result<FileDurableLog*> Promote(FileDurableLogOptions options = {}) {
    if (log_ != nullptr) return log_.get();
    CAIRN_RETURN_IF_ERROR(Poll().status());
    if (options.env == nullptr) options.env = env_;
    auto opened = FileDurableLog::Open(log_dir_, std::move(options));
    if (!opened.ok()) return std::move(opened).status();
    std::unique_ptr<FileDurableLog> log = std::move(opened).value();
    // Nobody writes now; what the log holds past our position was written
    // before the primary stopped.
    CAIRN_RETURN_IF_ERROR(Poll().status());
    if (log->durable_lsn() != applier_->applied_lsn()) {
      return DataLossError("the log holds records up to LSN " +
                           std::to_string(log->durable_lsn()) +
                           " and the standby applied " +
                           std::to_string(applier_->applied_lsn()));
    }
    log_ = std::move(log);
    switch_.Attach(log_.get());
    return log_.get();
  }

  Registry& registry() noexcept { return *registry_; }
  const Registry& registry() const noexcept { return *registry_; }
  // The last LSN the registry reflects.
  Lsn applied_lsn() const noexcept { return applier_->applied_lsn(); }
  // The snapshot's log position (0 without one).
  Lsn snapshot_lsn() const noexcept { return snapshot_lsn_; }
  const ApplyStats& apply_stats() const noexcept { return applier_->stats(); }
  // Log bytes consumed since Open (for lag in bytes against the primary's
  // log size).
  std::uint64_t bytes_read() const noexcept { return reader_->bytes_read(); }
  // The promoted log; null before Promote.
  FileDurableLog* log() const noexcept { return log_.get(); }

  // Reports the cairn_standby_* metrics (docs/metrics.md, "Snapshots and
  // standby"), each with `labels` first: applied and snapshot LSNs, apply
  // stats, log bytes read, polls and their errors, whether promoted. The
  // lag behind the primary is its cairn_durable_log_durable_lsn minus
  // cairn_standby_applied_lsn (the standby does not know the former). On
  // the follower thread, as Poll. Allocates nothing itself.
  void VisitMetrics(MetricVisitor& visitor,
                    std::span<const MetricLabel> labels = {}) const {
    LabelScope v(visitor, labels);
    const ApplyStats& a = applier_->stats();
    v.GaugeValue("cairn_standby_applied_lsn",
                 "The last durable-log LSN the standby's registry reflects.",
                 static_cast<double>(applier_->applied_lsn()));
    v.GaugeValue("cairn_standby_snapshot_lsn",
                 "The log position of the snapshot the standby started from "
                 "(0 without one).",
                 static_cast<double>(snapshot_lsn_));
    v.CounterValue("cairn_standby_applied_records_total",
                   "Log records applied to the registry.", a.applied);
    v.CounterValue("cairn_standby_already_applied_records_total",
                   "Log records skipped as already reflected (at or below "
                   "the applied LSN).",
                   a.already_applied);
    v.CounterValue("cairn_standby_removed_tenant_records_total",
                   "Object records skipped because their tenant was removed "
                   "before the snapshot.",
                   a.removed_tenant);
    v.CounterValue("cairn_standby_read_bytes_total",
                   "Log bytes (segment headers and frames) read since Open.",
                   reader_->bytes_read());
    v.CounterValue("cairn_standby_polls_total", "Poll calls while following.",
                   polls_);
    v.CounterValue("cairn_standby_poll_errors_total",
                   "Poll calls that returned an error (damage, a dropped "
                   "segment, an apply error).",
                   poll_errors_);
    v.GaugeValue("cairn_standby_promoted",
                 "1 once Promote succeeded (the standby is the primary), "
                 "else 0.",
                 log_ != nullptr ? 1.0 : 0.0);
  }

 private:
  explicit Standby(StandbyOptions<Payload> options)
      : options_(std::move(options)),
        env_(options_.env != nullptr ? options_.env : Env::Default()),
        log_dir_(options_.log_dir) {}

  Status Start() {
    RegistryOptions registry_options = options_.registry;
    registry_options.durable_log = &switch_;
    if (options_.snapshot_path.empty()) {
      registry_ = std::make_unique<Registry>(std::move(registry_options));
    } else {
      SnapshotStats stats;
      auto restore = [&] {
        return RestoreRegistrySnapshot<Payload, Route>(
            options_.snapshot_path, options_.decode,
            std::move(registry_options), &stats, env_);
      };
      auto restored =
          options_.snapshot_metrics != nullptr
              ? options_.snapshot_metrics->TimeRestore(stats, restore)
              : restore();
      if (!restored.ok()) return std::move(restored).status();
      registry_ = std::move(restored).value();
      snapshot_lsn_ = stats.log_position;
    }
    applier_ = std::make_unique<LogApplier<Payload, Route>>(
        registry_.get(), snapshot_lsn_, options_.tenant_options);
    DurableLogReaderOptions reader_options;
    reader_options.env = env_;
    reader_options.max_record_bytes = options_.max_record_bytes;
    auto reader =
        DurableLogReader::Open(log_dir_, snapshot_lsn_ + 1, reader_options);
    if (!reader.ok()) return std::move(reader).status();
    reader_ = std::move(reader).value();
    return Status::Ok();
  }

  const StandbyOptions<Payload> options_;
  Env* const env_;
  const std::string log_dir_;
  // Declared before the registry, which logs through it.
  StandbyLog switch_;
  std::unique_ptr<FileDurableLog> log_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<LogApplier<Payload, Route>> applier_;
  std::unique_ptr<DurableLogReader> reader_;
  Lsn snapshot_lsn_ = 0;
  std::uint64_t polls_ = 0;
  std::uint64_t poll_errors_ = 0;
};

// Rebuilds the primary's state after a crash: a Standby that has applied
// every complete record of the log and is promoted (its registry takes
// writes, logged to `log_options`' log over the same directory). A torn
// record at the log's end (a crash mid-write: never an acknowledged one) is
// cut: log_options.truncate_damaged_tail is set. Errors: as Standby::Open,
// Poll and Promote.
template <typename Payload = EmptyPayload,
          template <typename> class Route = ObjectRouteIndex>
Result<std::unique_ptr<Standby<Payload, Route>>> Recover(
    StandbyOptions<Payload> options, FileDurableLogOptions log_options = {}) {
  log_options.truncate_damaged_tail = true;
  auto standby = Standby<Payload, Route>::Open(std::move(options));
  if (!standby.ok()) return std::move(standby).status();
  auto promoted = standby.value()->Promote(std::move(log_options));
  if (!promoted.ok()) return std::move(promoted).status();
  return std::move(standby).value();
}

// Writes a snapshot of `registry` at a position of `log`: the log's
// durable LSN read before the first unit is, so every record at or below
// it is reflected (its change was visible before the snapshot began) and
// replay applies the records above it (docs/ha.md). With `truncate`, the
// log then starts a new segment and drops every segment at or below the
// position once the snapshot is written (durable unless options.sync is
// off, which only a host without power cuts to fear may use with truncate),
// never blocking appenders. Errors:
// WriteSnapshot's; a failed drop is returned after the snapshot is safely
// written (the segments stay; a later call drops them).
template <typename Payload, template <typename> class Route>
Status WriteSnapshotAt(
    const TenantRegistry<Payload, Route>& registry, FileDurableLog& log,
    const std::string& path,
    const std::type_identity_t<SnapshotEncoder<Payload>>& encode,
    SnapshotWriteOptions options = {}, bool truncate = false,
    SnapshotStats* stats = nullptr) {
  if (truncate) CAIRN_RETURN_IF_ERROR(log.Rotate());
  options.log_position = log.durable_lsn();
  CAIRN_RETURN_IF_ERROR(WriteSnapshot(registry, path, encode, options, stats));
  if (truncate) {
    auto dropped = log.DropThrough(options.log_position);
    if (!dropped.ok()) return std::move(dropped).status();
  }
  return Status::Ok();
}

CAIRN_NAMESPACE_END

#endif  // CAIRN_HA_STANDBY_H_
