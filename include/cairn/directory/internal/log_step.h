// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// One logged change of a GroupDirectory (the durable-log hook, rule H1 in
// docs/semantics.md; docs/durable_log.md): reserved before any directory
// lock, its record built and appended under the object lock(s), finalized
// (or cancelled) after every lock is released and before any host code
// runs: the route's reclaim (payload destructors) and the removal
// callbacks come after it. Only GroupDirectory uses it; hosts never
// include it.

#ifndef CAIRN_DIRECTORY_INTERNAL_LOG_STEP_H_
#define CAIRN_DIRECTORY_INTERNAL_LOG_STEP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/directory/durable_log.h"
#include "cairn/directory/group_entry.h"
#include "cairn/directory/object_entry.h"

CAIRN_NAMESPACE_BEGIN
namespace directory_internal {

// Which payload bytes a record carries.
enum class LogPayload : std::uint8_t {
  kNone,   // none (removals; CommitUpsert with a callback)
  kEntry,  // the entry's payload, encoded under its lock (Commit)
  kGiven,  // bytes encoded before any lock (Create, CommitUpsertWithPayload)
};

// Declared before a mutation's first lock, so the destructor, which cancels
// a reservation that was not finalized (every failure path), runs off-lock.
// Without a log, or before Reserve, every step is one test of a flag.
template <typename Payload>
class LogStep {
 public:
  using Entry = ObjectEntry<Payload>;
  using Group = GroupEntry<Payload>;

  // `log` may be null (no log): nothing is ever reserved or appended.
  LogStep(DurableLog* log, TenantInstanceId tenant) noexcept
      : log_(log), tenant_(tenant) {}
  LogStep(const LogStep&) = delete;
  LogStep& operator=(const LogStep&) = delete;
  ~LogStep() { Cancel(); }

  bool active() const noexcept { return reserved_; }

  // Reserves a one-object record for `key` (with e's group name, if `e` is
  // known and a member) carrying `payload_bytes` of payload.
  Status Reserve(std::string_view key, const Entry* e,
                 std::size_t payload_bytes = 0) {
    const std::size_t name =
        e != nullptr && e->group() != nullptr ? e->group()->name().size() : 0;
    return ReserveBytes(DurableRecordBytes(key.size(), name, payload_bytes));
  }
  Status ReserveBytes(std::size_t bytes) {
    if (log_ == nullptr) return Status::Ok();
    Result<LogReservation> r = log_->Reserve(bytes);
    if (!r.ok()) return std::move(r).status();
    reservation_ = *r;
    reserved_ = true;
    record_.reserve(bytes);
    return Status::Ok();
  }
  // A batch (DurableLog::ReserveBatch): up to `records` records, about
  // `bytes` in all, each appended by its own Append*, ended by one
  // FinalizeBatch.
  Status ReserveBatch(std::size_t records, std::size_t bytes) {
    if (log_ == nullptr) return Status::Ok();
    Result<LogReservation> r = log_->ReserveBatch(records, bytes);
    if (!r.ok()) return std::move(r).status();
    reservation_ = *r;
    reserved_ = true;
    record_.reserve(bytes / records);
    return Status::Ok();
  }

  // Appends e's post-state as a one-object record. Caller holds e's lock
  // exclusively; nothing has changed yet, so an error changes nothing.
  Status AppendObject(DurableOp op, const Entry* e, std::uint64_t version,
                      std::uint64_t size, std::uint64_t counted,
                      LogPayload payload, std::string_view given = {}) {
    if (!reserved_) return Status::Ok();
    return Encoded([&] {
      Begin(op, e->group(), 1);
      Add(e, version, size, counted, payload, given);
    });
  }
  // The removal of e, with the state it has. Caller holds e's lock
  // exclusively.
  Status AppendRemoval(DurableOp op, const Entry* e) {
    if (!reserved_) return Status::Ok();
    e->mu_.AssertHeld();
    return AppendObject(op, e, e->version_.load(std::memory_order_relaxed),
                        e->size_bytes_, e->counted_bytes(), LogPayload::kNone);
  }
  // The removal of every member, in one record. Caller holds the group lock
  // and every member's lock exclusively.
  Status AppendGroup(DurableOp op, const Group* group,
                     const std::vector<Entry*>& members) {
    if (!reserved_) return Status::Ok();
    return Encoded([&] {
      Begin(op, group, static_cast<std::uint32_t>(members.size()));
      for (const Entry* e : members) {
        e->mu_.AssertHeld();
        Add(e, e->version_.load(std::memory_order_relaxed), e->size_bytes_,
            e->counted_bytes(), LogPayload::kNone, {});
      }
    });
  }

  // The record is complete: OK once it is durable (the log calls back with
  // `tokens`), else the log's error, which the mutation returns: its change
  // is visible but not acknowledged. OK without a log.
  Status Finalize(std::span<const ObjectToken> tokens) {
    if (!std::exchange(reserved_, false)) return Status::Ok();
    return log_->Finalize(reservation_, tokens);
  }
  Status Finalize(ObjectToken token) {
    return Finalize(std::span<const ObjectToken>(&token, 1));
  }
  // A batch's end: OK with no log or no record appended (the reservation
  // is then cancelled), else as Finalize with every changed instance.
  Status FinalizeBatch(std::span<const ObjectToken> tokens) {
    if (appended_ == 0) {
      Cancel();
      return Status::Ok();
    }
    return Finalize(tokens);
  }
  // Voids the reservation (and its record, if appended) unless it was
  // finalized. Caller holds no directory lock.
  void Cancel() noexcept {
    if (std::exchange(reserved_, false)) log_->Cancel(reservation_);
  }

 private:
  Status Appended(Status s) {
    if (s.ok()) ++appended_;
    return s;
  }
  // encode() builds record_, which is then appended. Out of memory while
  // encoding or in the log's Append is an error like any other append
  // error (nothing changed yet), never an exception: the caller holds
  // object locks, and a batch has already made its earlier keys' changes.
  template <typename Encode>
  Status Encoded(Encode&& encode) {
    try {
      encode();
      return Appended(log_->Append(reservation_, record_));
    } catch (const std::bad_alloc&) {
      return ResourceExhaustedError("out of memory appending a durable record");
    }
  }
  void Begin(DurableOp op, const Group* group, std::uint32_t count) {
    record_.clear();
    BeginDurableRecord(op, tenant_, group == nullptr ? kNoGroup : group->id(),
                       group == nullptr ? std::string_view() : group->name(),
                       count, &record_);
  }
  // Caller holds e's lock exclusively.
  void Add(const Entry* e, std::uint64_t version, std::uint64_t size,
           std::uint64_t counted, LogPayload payload, std::string_view given) {
    e->mu_.AssertHeld();
    DurableObjectState state;
    state.object = e->id();
    state.version = version;
    state.size_bytes = size;
    state.counted_bytes = counted;
    state.key = e->key();
    state.payload_logged = DurablePayloadCodec<Payload>::kLogsPayload &&
                           payload != LogPayload::kNone;
    if (state.payload_logged && payload == LogPayload::kEntry) {
      std::string bytes;
      DurablePayloadCodec<Payload>::Encode(e->payload_, &bytes);
      AddDurableObject(state, bytes, &record_);
    } else {
      AddDurableObject(state, given, &record_);
    }
  }

  DurableLog* const log_;
  const TenantInstanceId tenant_;
  bool reserved_ = false;
  std::size_t appended_ = 0;  // records appended under the reservation
  LogReservation reservation_;
  std::string record_;
};

}  // namespace directory_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_DIRECTORY_INTERNAL_LOG_STEP_H_
