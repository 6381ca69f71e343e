// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/base/status.h"

#include <new>

CAIRN_NAMESPACE_BEGIN

namespace {

struct CodeName {
  StatusCode code;
  std::string_view name;
};
constexpr CodeName kCodeNames[] = {
    {StatusCode::kOk, "OK"},
    {StatusCode::kCancelled, "CANCELLED"},
    {StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
    {StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
    {StatusCode::kNotFound, "NOT_FOUND"},
    {StatusCode::kAlreadyExists, "ALREADY_EXISTS"},
    {StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
    {StatusCode::kFailedPrecondition, "FAILED_PRECONDITION"},
    {StatusCode::kAborted, "ABORTED"},
    {StatusCode::kOutOfRange, "OUT_OF_RANGE"},
    {StatusCode::kInternal, "INTERNAL"},
    {StatusCode::kUnavailable, "UNAVAILABLE"},
    {StatusCode::kDataLoss, "DATA_LOSS"},
};

}  // namespace

std::string_view StatusCodeName(StatusCode code) noexcept {
  // A name is wanted on error paths only: a scan of 13 rows is cheap enough.
  for (const CodeName& row : kCodeNames) {
    if (row.code == code) return row.name;
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

// One line per code: each constructor is Status(code, message).
#define CAIRN_DEFINE_ERROR_CONSTRUCTOR(Name, code)        \
  Status Name##Error(std::string_view message) noexcept { \
    return Status(StatusCode::code, message);             \
  }
CAIRN_DEFINE_ERROR_CONSTRUCTOR(InvalidArgument, kInvalidArgument)
CAIRN_DEFINE_ERROR_CONSTRUCTOR(DeadlineExceeded, kDeadlineExceeded)
CAIRN_DEFINE_ERROR_CONSTRUCTOR(NotFound, kNotFound)
CAIRN_DEFINE_ERROR_CONSTRUCTOR(AlreadyExists, kAlreadyExists)
CAIRN_DEFINE_ERROR_CONSTRUCTOR(ResourceExhausted, kResourceExhausted)
CAIRN_DEFINE_ERROR_CONSTRUCTOR(FailedPrecondition, kFailedPrecondition)
CAIRN_DEFINE_ERROR_CONSTRUCTOR(Aborted, kAborted)
CAIRN_DEFINE_ERROR_CONSTRUCTOR(OutOfRange, kOutOfRange)
CAIRN_DEFINE_ERROR_CONSTRUCTOR(Internal, kInternal)
CAIRN_DEFINE_ERROR_CONSTRUCTOR(Unavailable, kUnavailable)
CAIRN_DEFINE_ERROR_CONSTRUCTOR(DataLoss, kDataLoss)
#undef CAIRN_DEFINE_ERROR_CONSTRUCTOR

CAIRN_NAMESPACE_END
