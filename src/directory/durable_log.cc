// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/directory/durable_log.h"

#include <algorithm>
#include <utility>

#include "cairn/base/check.h"

CAIRN_NAMESPACE_BEGIN

Status DecodeDurableRecord(std::string_view body, DurableRecordView* out) {
  using base_internal::LoadFixed;
  *out = DurableRecordView();
  if (body.size() < kDurableRecordHeaderBytes) {
    return DataLossError("durable record shorter than its header");
  }
  const char* p = body.data();
  const auto version = LoadFixed<std::uint8_t>(p);
  if (version != kDurableRecordVersion) {
    return FailedPreconditionError("durable record of another format version");
  }
  const auto op = LoadFixed<std::uint8_t>(p + 1);
  if (op < static_cast<std::uint8_t>(DurableOp::kCreate) ||
      op > static_cast<std::uint8_t>(DurableOp::kAdjust) ||
      LoadFixed<std::uint16_t>(p + 2) != 0) {
    return DataLossError("durable record with an unknown op");
  }
  out->op = static_cast<DurableOp>(op);
  const auto count = LoadFixed<std::uint32_t>(p + 4);
  out->tenant = LoadFixed<std::uint64_t>(p + 8);
  out->group = LoadFixed<std::uint64_t>(p + 16);
  const auto name_bytes = LoadFixed<std::uint32_t>(p + 24);
  std::size_t at = kDurableRecordHeaderBytes;
  if (name_bytes > body.size() - at) {
    return DataLossError("durable record group name past its end");
  }
  const std::string_view name = body.substr(at, name_bytes);
  at += name_bytes;
  if (out->op == DurableOp::kTenantCreate ||
      out->op == DurableOp::kTenantRemove) {
    if (count != 0 || out->group != kNoGroup || name.empty()) {
      return DataLossError("durable tenant record with objects or no name");
    }
    out->tenant_name = name;
    if (out->op == DurableOp::kTenantCreate) {
      if (body.size() - at < sizeof(std::uint64_t)) {
        return DataLossError("durable tenant record past its end");
      }
      out->quota_limit_bytes = LoadFixed<std::uint64_t>(body.data() + at);
      at += sizeof(std::uint64_t);
    }
    if (at != body.size()) {
      return DataLossError("durable record with trailing bytes");
    }
    return Status::Ok();
  }
  out->group_name = name;
  // Every object takes at least its header: a count that cannot fit is
  // damage, caught before reserving memory for it.
  if (count > (body.size() - at) / kDurableObjectHeaderBytes) {
    return DataLossError("durable record object count past its end");
  }
  out->objects.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    if (body.size() - at < kDurableObjectHeaderBytes) {
      return DataLossError("durable record object past its end");
    }
    const char* o = body.data() + at;
    DurableObjectState state;
    state.object = LoadFixed<std::uint64_t>(o);
    state.version = LoadFixed<std::uint64_t>(o + 8);
    state.size_bytes = LoadFixed<std::uint64_t>(o + 16);
    state.counted_bytes = LoadFixed<std::uint64_t>(o + 24);
    const auto flags = LoadFixed<std::uint32_t>(o + 32);
    const auto key_bytes = LoadFixed<std::uint32_t>(o + 36);
    const auto payload_bytes = LoadFixed<std::uint32_t>(o + 40);
    if ((flags & ~kDurablePayloadLogged) != 0 ||
        (flags == 0 && payload_bytes != 0)) {
      return DataLossError("durable record object with unknown flags");
    }
    at += kDurableObjectHeaderBytes;
    if (key_bytes > body.size() - at ||
        payload_bytes > body.size() - at - key_bytes) {
      return DataLossError("durable record key or payload past its end");
    }
    state.key = body.substr(at, key_bytes);
    at += key_bytes;
    state.payload_logged = flags == kDurablePayloadLogged;
    state.payload = body.substr(at, payload_bytes);
    at += payload_bytes;
    out->objects.push_back(state);
  }
  if (at != body.size()) {
    return DataLossError("durable record with trailing bytes");
  }
  return Status::Ok();
}

Result<LogReservation> InMemoryDurableLog::ReserveBatch(std::size_t records,
                                                        std::size_t bytes) {
  CAIRN_CHECK_MSG(records >= 1, "ReserveBatch of no record");
  return Reserve(bytes);
}

Result<LogReservation> InMemoryDurableLog::Reserve(std::size_t bytes) {
  std::function<void()> hook;
  {
    MutexLock lock(&mu_);
    hook = on_reserve_;
  }
  if (hook) hook();
  MutexLock lock(&mu_);
  ++reserve_calls_;
  if (!sticky_error_.ok()) return sticky_error_;
  if (reserve_failures_ > 0) {
    --reserve_failures_;
    return reserve_error_;
  }
  ++open_;
  return LogReservation{next_id_++, bytes};
}

Status InMemoryDurableLog::Append(const LogReservation& reservation,
                                  std::string_view record) {
  std::function<void(std::string_view)> hook;
  {
    MutexLock lock(&mu_);
    hook = on_append_;
  }
  if (hook) hook(record);
  MutexLock lock(&mu_);
  if (append_failures_ > 0) {
    --append_failures_;
    return append_error_;
  }
  Record r;
  r.reservation = reservation.id;
  r.reserved_bytes = reservation.bytes;
  r.body = std::string(record);
  records_.push_back(std::move(r));
  return Status::Ok();
}

Status InMemoryDurableLog::Finalize(const LogReservation& reservation,
                                    std::span<const ObjectToken> tokens) {
  MutexLock lock(&mu_);
  CAIRN_CHECK_MSG(open_ > 0, "Finalize without an open reservation");
  --open_;
  ++finalize_calls_;
  const bool any = std::any_of(
      records_.begin(), records_.end(),
      [&](const Record& r) { return r.reservation == reservation.id; });
  CAIRN_CHECK_MSG(any, "Finalize of a reservation with no record");
  if (!finalize_error_.ok()) {
    sticky_error_ = std::exchange(finalize_error_, Status::Ok());
    return sticky_error_;
  }
  for (Record& r : records_) {
    if (r.reservation != reservation.id) continue;
    r.state = RecordState::kDurable;
    r.tokens.assign(tokens.begin(), tokens.end());
  }
  return Status::Ok();
}

void InMemoryDurableLog::Cancel(const LogReservation& reservation) noexcept {
  MutexLock lock(&mu_);
  CAIRN_CHECK_MSG(open_ > 0, "Cancel without an open reservation");
  --open_;
  for (Record& r : records_) {
    if (r.reservation == reservation.id) r.state = RecordState::kCancelled;
  }
}

void InMemoryDurableLog::FailReserve(Status status, int count) {
  MutexLock lock(&mu_);
  reserve_error_ = std::move(status);
  reserve_failures_ = count;
}

void InMemoryDurableLog::FailAppend(Status status, int count) {
  MutexLock lock(&mu_);
  append_error_ = std::move(status);
  append_failures_ = count;
}

void InMemoryDurableLog::FailFinalize(Status status) {
  MutexLock lock(&mu_);
  finalize_error_ = std::move(status);
}

void InMemoryDurableLog::set_on_reserve(std::function<void()> hook) {
  MutexLock lock(&mu_);
  on_reserve_ = std::move(hook);
}

void InMemoryDurableLog::set_on_append(
    std::function<void(std::string_view)> hook) {
  MutexLock lock(&mu_);
  on_append_ = std::move(hook);
}

std::vector<InMemoryDurableLog::Record> InMemoryDurableLog::records() const {
  MutexLock lock(&mu_);
  return records_;
}

std::vector<std::string> InMemoryDurableLog::durable_bodies() const {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const Record& r : records_) {
    if (r.state == RecordState::kDurable) out.push_back(r.body);
  }
  return out;
}

std::size_t InMemoryDurableLog::open_reservations() const {
  MutexLock lock(&mu_);
  return open_;
}

std::uint64_t InMemoryDurableLog::reserve_calls() const {
  MutexLock lock(&mu_);
  return reserve_calls_;
}

std::uint64_t InMemoryDurableLog::finalize_calls() const {
  MutexLock lock(&mu_);
  return finalize_calls_;
}

CAIRN_NAMESPACE_END
