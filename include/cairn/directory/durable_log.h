// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// DurableLog: the hook through which a GroupDirectory writes every change a
// reader can see to a log before any reader can see it (H1,
// docs/durable_log.md). Appended is not durable: other threads see a change
// once its mutation releases its locks, before Finalize makes its record
// durable; only the mutation's caller waits for durability, so a crash can
// lose a change another thread already saw. The directory drives one
// protocol per change:
//
//   Reserve(bytes)          with no directory lock held; may allocate, may
//                           wait for room, may fail (nothing changes then)
//   Append(r, record)       under the changed object's exclusive lock (and,
//                           for a create, its stripe and group), before the
//                           change is visible; copies the record, never
//                           does I/O; may fail (nothing changes then)
//   Finalize(r, tokens)     with no lock held, after the change took effect
//                           and before any removal callback; returns once
//                           the record is durable
//   Cancel(r)               with no lock held, when the change did not take
//                           effect; a record appended under `r` is void and
//                           never becomes durable
//
// A batch mutation (GroupDirectory::BatchCommit, BatchErase) takes one
// ReserveBatch for all its records instead of one Reserve each, appends one
// record per change under that reservation (each inside the critical section
// that makes its change, so per-key order holds), and ends it with one
// Finalize naming every changed instance, or one Cancel if no change took
// effect. The records stay separate records, each the record the single call
// would have appended, so a reader or a replay cannot tell them apart from
// the singles'.
//
// Every successful Reserve or ReserveBatch is ended by exactly one Finalize
// or Cancel.
// Records of one key reach the log in the order their changes became
// visible: each is appended inside the critical section that makes its
// change (docs/concurrency.md, "Durable log").
//
// This header also holds the record body format (a small, versioned,
// little-endian encoding every log stores verbatim), the payload codec a host
// specialises to log its payload bytes, and InMemoryDurableLog, a log for
// tests with failure injection. FileDurableLog (file_durable_log.h) is the
// append-only, checksummed, fdatasync'ed file log.
//
// Thread safety: DurableLog implementations are safe from any thread; the
// encoding functions are pure.

#ifndef CAIRN_DIRECTORY_DURABLE_LOG_H_
#define CAIRN_DIRECTORY_DURABLE_LOG_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/base/internal/coding.h"
#include "cairn/base/mutex.h"
#include "cairn/base/status.h"
#include "cairn/base/thread_annotations.h"
#include "cairn/base/version.h"
#include "cairn/directory/object_entry.h"

CAIRN_NAMESPACE_BEGIN

// A record's log sequence number (FileDurableLog: gapless, from 1).
using Lsn = std::uint64_t;
// Room for one record, from Reserve to Finalize or Cancel. `id` is the log's
// own name for it (never 0 for a granted reservation); `bytes` what was
// asked for.
struct LogReservation {
  std::uint64_t id = 0;
  std::uint64_t bytes = 0;
};

class DurableLog {
 public:
  virtual ~DurableLog() = default;

  // Reserves room for a record of about `bytes` bytes. A record may be
  // longer than reserved: a Commit's payload is encoded under the lock, and
  // EraseGroup and eviction reserve a one-object record for what becomes a
  // whole group's. Called with no directory lock held. An error leaves the
  // directory unchanged and is returned to the caller of the mutation.
  virtual Result<LogReservation> Reserve(std::size_t bytes) = 0;
  // Appends `record` (a body, see EncodeDurableRecord) under `reservation`.
  // Called under object locks: must not do I/O or wait for anything but the
  // log's own leaf lock. An error leaves the directory unchanged (the
  // directory then calls Cancel); so does std::bad_alloc thrown here, which
  // the directory turns into kResourceExhausted: a log that throws must
  // leave no record of the call behind.
  virtual Status Append(const LogReservation& reservation,
                        std::string_view record) = 0;
  // The change logged under `reservation` took effect; `tokens` names the
  // object instances it changed (one, or a group's members). Called with no
  // lock held; returns OK once the record is durable. A log that cannot make
  // it durable returns why (the mutation then returns that error: the change
  // is visible but not acknowledged) and must refuse every later Reserve (a
  // sticky error), so no further change becomes visible.
  virtual Status Finalize(const LogReservation& reservation,
                          std::span<const ObjectToken> tokens) = 0;
  // The change did not take effect: releases the room and voids a record
  // appended under `reservation`. Called with no lock held.
  virtual void Cancel(const LogReservation& reservation) noexcept = 0;
  // Reserves room for a batch: up to `records` records of about `bytes`
  // bytes in all (`records` >= 1). Append may then be called once per
  // record (at most `records` times), each append a record of its own that
  // takes its place in the log's order when it is appended; one Finalize
  // makes every record appended under the reservation durable (returning
  // OK only once all of them are, else the log's error, as Finalize), and
  // one Cancel voids them all. Finalize is only called if at least one
  // record was appended. Errors as Reserve; nothing is reserved then.
  virtual Result<LogReservation> ReserveBatch(std::size_t records,
                                              std::size_t bytes) = 0;
};

// What a record says happened.
enum class DurableOp : std::uint8_t {
  kCreate = 1,        // one object became kActive (Create)
  kCommit = 2,        // a two-phase put became kActive (Commit)
  kUpsert = 3,        // an active object took its staged state (CommitUpsert)
  kErase = 4,         // one object was removed (Erase, EraseIfMatch)
  kEraseGroup = 5,    // every member of a group was removed (EraseGroup)
  kEvict = 6,         // an eviction commit removed an object or whole group
  kTenantCreate = 7,  // a registry published a tenant instance (GetOrCreate)
  kTenantRemove = 8,  // a registry removed a tenant instance (Remove)
  kAdjust = 9,        // an active object's charge moved (AdjustCharge)
};

// One object's post-state in a record. For removals it is the state the
// object had when it was removed.
struct DurableObjectState {
  ObjectId object = 0;
  std::uint64_t version = 0;
  std::uint64_t size_bytes = 0;
  std::uint64_t counted_bytes = 0;
  std::string_view key;
  // The host's payload bytes (DurablePayloadCodec); empty when
  // payload_logged is false.
  bool payload_logged = false;
  std::string_view payload;
};

// A decoded record; the views point into the decoded bytes.
struct DurableRecordView {
  DurableOp op = DurableOp::kCreate;
  TenantInstanceId tenant = 0;
  GroupId group = kNoGroup;
  std::string_view group_name;  // empty for a singleton
  std::vector<DurableObjectState> objects;
  // kTenantCreate and kTenantRemove only (no objects, no group).
  std::string_view tenant_name;
  std::uint64_t quota_limit_bytes = 0;  // kTenantCreate: the account's limit
};

inline constexpr std::uint32_t kDurableRecordVersion = 2;
// version u8 | op u8 | reserved u16 | count u32 | tenant u64 | group u64 |
// name length u32, then the name: the group's for an object record, the
// tenant's for a tenant record. A kTenantCreate record then holds its quota
// limit u64; a tenant record holds no objects.
inline constexpr std::size_t kDurableRecordHeaderBytes = 28;
// object u64 | version u64 | size u64 | counted u64 | flags u32 | key length
// u32 | payload length u32, then the key and the payload.
inline constexpr std::size_t kDurableObjectHeaderBytes = 44;
inline constexpr std::uint32_t kDurablePayloadLogged = 1;

// Bytes of a one-object record with these variable parts.
constexpr std::size_t DurableRecordBytes(std::size_t key_bytes,
                                         std::size_t group_name_bytes,
                                         std::size_t payload_bytes) noexcept {
  return kDurableRecordHeaderBytes + group_name_bytes +
         kDurableObjectHeaderBytes + key_bytes + payload_bytes;
}

// Specialise for a payload type to log its bytes:
//   template <> struct cairn::DurablePayloadCodec<MyPayload> {
//     static constexpr bool kLogsPayload = true;
//     static void Encode(const MyPayload& p, std::string* out);  // appends
//   };
// Encode must be a pure function of the payload: it may run under the
// object's exclusive lock (Commit), with the rules of a WithObjectExclusive
// callback (no call into the directory, no blocking). The default logs no
// payload bytes.
template <typename Payload>
struct DurablePayloadCodec {
  static constexpr bool kLogsPayload = false;
  static void Encode(const Payload&, std::string*) {}
};
// Replay (cairn/ha/replay.h) rebuilds logged payloads with a Decode the
// specialisation adds:
//   static Result<MyPayload> Decode(std::string_view bytes);
// An error stops the replay at that record (kDataLoss is the usual code).
// Without payload logging a replayed object gets a default-constructed
// payload (an object the snapshot holds keeps the snapshot's).

// Writes a record header for `count` objects to *out (appending).
inline void BeginDurableRecord(DurableOp op, TenantInstanceId tenant,
                               GroupId group, std::string_view group_name,
                               std::uint32_t count, std::string* out) {
  using base_internal::PutFixed;
  PutFixed<std::uint8_t>(out, kDurableRecordVersion);
  PutFixed<std::uint8_t>(out, static_cast<std::uint8_t>(op));
  PutFixed<std::uint16_t>(out, 0);
  PutFixed<std::uint32_t>(out, count);
  PutFixed<std::uint64_t>(out, tenant);
  PutFixed<std::uint64_t>(out, group);
  PutFixed<std::uint32_t>(out, static_cast<std::uint32_t>(group_name.size()));
  out->append(group_name);
}

// Appends one object's state; `payload` is appended only if
// state.payload_logged (state.payload itself is ignored here: the caller
// passes the bytes, already encoded).
inline void AddDurableObject(const DurableObjectState& state,
                             std::string_view payload, std::string* out) {
  using base_internal::PutFixed;
  PutFixed<std::uint64_t>(out, state.object);
  PutFixed<std::uint64_t>(out, state.version);
  PutFixed<std::uint64_t>(out, state.size_bytes);
  PutFixed<std::uint64_t>(out, state.counted_bytes);
  PutFixed<std::uint32_t>(out,
                          state.payload_logged ? kDurablePayloadLogged : 0);
  PutFixed<std::uint32_t>(out, static_cast<std::uint32_t>(state.key.size()));
  const std::string_view bytes = state.payload_logged ? payload : "";
  PutFixed<std::uint32_t>(out, static_cast<std::uint32_t>(bytes.size()));
  out->append(state.key);
  out->append(bytes);
}

// Bytes of a tenant record for a name of `name_bytes`.
constexpr std::size_t DurableTenantRecordBytes(
    std::size_t name_bytes) noexcept {
  return kDurableRecordHeaderBytes + name_bytes + sizeof(std::uint64_t);
}

// Writes a whole tenant record to *out (appending): kTenantCreate carries
// `quota_limit_bytes`, kTenantRemove ignores it.
inline void EncodeDurableTenantRecord(DurableOp op, TenantInstanceId instance,
                                      std::string_view name,
                                      std::uint64_t quota_limit_bytes,
                                      std::string* out) {
  BeginDurableRecord(op, instance, kNoGroup, name, 0, out);
  if (op == DurableOp::kTenantCreate) {
    base_internal::PutFixed<std::uint64_t>(out, quota_limit_bytes);
  }
}

// Decodes a record body. kDataLoss if it is truncated, has trailing bytes,
// an unknown op or flags; kFailedPrecondition for another format version.
Status DecodeDurableRecord(std::string_view body, DurableRecordView* out);

// A log kept in memory, for tests and hosts that replicate elsewhere.
// Records become "durable" at Finalize. Failure injection: the next Reserve
// or Append can be made to fail, and hooks run inside Reserve and Append
// (with the caller's locks held, so a hook may probe which locks those
// are). Thread safety: every method is safe from any thread; the log's own
// lock is a leaf, released before a hook runs.
class InMemoryDurableLog final : public DurableLog {
 public:
  enum class RecordState : std::uint8_t { kAppended, kDurable, kCancelled };
  struct Record {
    std::uint64_t reservation = 0;
    std::uint64_t reserved_bytes = 0;  // what its Reserve asked for
    std::string body;
    RecordState state = RecordState::kAppended;
    std::vector<ObjectToken> tokens;  // set by Finalize
  };

  InMemoryDurableLog() = default;
  InMemoryDurableLog(const InMemoryDurableLog&) = delete;
  InMemoryDurableLog& operator=(const InMemoryDurableLog&) = delete;

  Result<LogReservation> Reserve(std::size_t bytes) override;
  Status Append(const LogReservation& reservation,
                std::string_view record) override;
  Status Finalize(const LogReservation& reservation,
                  std::span<const ObjectToken> tokens) override;
  void Cancel(const LogReservation& reservation) noexcept override;
  // Counted as one Reserve call (reserve_calls) and failed by FailReserve
  // as Reserve is. Each record of the batch is one Record; Finalize gives
  // every one of them the whole token list.
  Result<LogReservation> ReserveBatch(std::size_t records,
                                      std::size_t bytes) override;

  // The next `count` Reserve (or Append) calls fail with `status`.
  void FailReserve(Status status, int count = 1);
  void FailAppend(Status status, int count = 1);
  // The next Finalize returns `status` and its record stays kAppended (not
  // durable); from then on every Reserve fails with it (sticky, as a log
  // that lost a write must be).
  void FailFinalize(Status status);
  // Run at the start of Reserve / Append, before the failure check, with
  // no log lock held (but with the caller's locks). Null: none.
  void set_on_reserve(std::function<void()> hook);
  void set_on_append(std::function<void(std::string_view record)> hook);

  // Appended records in append order (cancelled ones included, marked).
  std::vector<Record> records() const;
  // Bodies of the durable records, in append order.
  std::vector<std::string> durable_bodies() const;
  // Reservations neither finalized nor cancelled.
  std::size_t open_reservations() const;
  std::uint64_t reserve_calls() const;
  // Finalize calls made (each one wait for durability).
  std::uint64_t finalize_calls() const;

 private:
  mutable Mutex mu_;
  std::uint64_t next_id_ CAIRN_GUARDED_BY(mu_) = 1;
  std::uint64_t reserve_calls_ CAIRN_GUARDED_BY(mu_) = 0;
  std::uint64_t finalize_calls_ CAIRN_GUARDED_BY(mu_) = 0;
  std::size_t open_ CAIRN_GUARDED_BY(mu_) = 0;
  Status reserve_error_ CAIRN_GUARDED_BY(mu_);
  int reserve_failures_ CAIRN_GUARDED_BY(mu_) = 0;
  Status append_error_ CAIRN_GUARDED_BY(mu_);
  int append_failures_ CAIRN_GUARDED_BY(mu_) = 0;
  Status finalize_error_ CAIRN_GUARDED_BY(mu_);  // for the next Finalize
  Status sticky_error_ CAIRN_GUARDED_BY(mu_);    // a Finalize failed
  std::function<void()> on_reserve_ CAIRN_GUARDED_BY(mu_);
  std::function<void(std::string_view)> on_append_ CAIRN_GUARDED_BY(mu_);
  std::vector<Record> records_ CAIRN_GUARDED_BY(mu_);
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_DIRECTORY_DURABLE_LOG_H_
