// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/base/status.h"

#include <new>

CAIRN_NAMESPACE_BEGIN

std::string_view StatusCodeName(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kCancelled:
      return "CANCELLED";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kAborted:
      return "ABORTED";
    case StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case StatusCode::kInternal:
      return "INTERNAL";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kDataLoss:
      return "DATA_LOSS";
  }
  return "UNKNOWN";
}

Status::Status(StatusCode code, std::string_view message) noexcept {
  if (code == StatusCode::kOk) return;
  rep_ = Inline(code);
  if (message.empty()) return;
  try {
    rep_ = reinterpret_cast<std::uintptr_t>(
        new HeapRep{{1}, code, std::string(message)});
  } catch (const std::bad_alloc&) {
    // Keep the code; the message is what an allocation failure costs.
  }
}

void Status::UnrefHeap(HeapRep* rep) noexcept {
  // acq_rel: the last owner's delete happens after every other owner's reads.
  if (rep->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete rep;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code()));
  if (has_message()) {
    out += ": ";
    out += message();
  }
  return out;
}

Status InvalidArgumentError(std::string_view message) noexcept {
  return Status(StatusCode::kInvalidArgument, message);
}
Status DeadlineExceededError(std::string_view message) noexcept {
  return Status(StatusCode::kDeadlineExceeded, message);
}
Status NotFoundError(std::string_view message) noexcept {
  return Status(StatusCode::kNotFound, message);
}
Status AlreadyExistsError(std::string_view message) noexcept {
  return Status(StatusCode::kAlreadyExists, message);
}
Status ResourceExhaustedError(std::string_view message) noexcept {
  return Status(StatusCode::kResourceExhausted, message);
}
Status FailedPreconditionError(std::string_view message) noexcept {
  return Status(StatusCode::kFailedPrecondition, message);
}
Status AbortedError(std::string_view message) noexcept {
  return Status(StatusCode::kAborted, message);
}
Status OutOfRangeError(std::string_view message) noexcept {
  return Status(StatusCode::kOutOfRange, message);
}
Status InternalError(std::string_view message) noexcept {
  return Status(StatusCode::kInternal, message);
}
Status UnavailableError(std::string_view message) noexcept {
  return Status(StatusCode::kUnavailable, message);
}
Status DataLossError(std::string_view message) noexcept {
  return Status(StatusCode::kDataLoss, message);
}

CAIRN_NAMESPACE_END
