// Copyright 2026 The cairn Authors.

#include "cairn/base/status.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "cairn/base/check.h"
#include "cairn/base/clock.h"
#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

Version LinkedVersion() noexcept { return kVersion; }

namespace base_internal {

void CheckFailed(const char* file, int line, const char* condition,
                 const char* message) noexcept {
  std::fprintf(stderr, "%s:%d: CAIRN_CHECK failed: %s%s%s\n", file, line,
               condition, message != nullptr ? ": " : "",
               message != nullptr ? message : "");
  std::fflush(stderr);
  std::abort();
}

}  // namespace base_internal

namespace {

class SteadyClock final : public Clock {
 public:
  std::int64_t NowNanos() const noexcept override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

const Clock* Clock::Steady() noexcept {
  static const SteadyClock clock;
  return &clock;
}

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

Status::Status(StatusCode code, std::string_view message) {
  if (code != StatusCode::kOk) {
    rep_ = std::make_unique<Rep>(Rep{code, std::string(message)});
  }
}

Status::Status(const Status& other)
    : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) {
    rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
  }
  return *this;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(rep_->code));
  out += ": ";
  out += rep_->message;
  return out;
}

Status InvalidArgumentError(std::string_view message) {
  return Status(StatusCode::kInvalidArgument, message);
}
Status DeadlineExceededError(std::string_view message) {
  return Status(StatusCode::kDeadlineExceeded, message);
}
Status NotFoundError(std::string_view message) {
  return Status(StatusCode::kNotFound, message);
}
Status AlreadyExistsError(std::string_view message) {
  return Status(StatusCode::kAlreadyExists, message);
}
Status ResourceExhaustedError(std::string_view message) {
  return Status(StatusCode::kResourceExhausted, message);
}
Status FailedPreconditionError(std::string_view message) {
  return Status(StatusCode::kFailedPrecondition, message);
}
Status AbortedError(std::string_view message) {
  return Status(StatusCode::kAborted, message);
}
Status OutOfRangeError(std::string_view message) {
  return Status(StatusCode::kOutOfRange, message);
}
Status InternalError(std::string_view message) {
  return Status(StatusCode::kInternal, message);
}
Status UnavailableError(std::string_view message) {
  return Status(StatusCode::kUnavailable, message);
}
Status DataLossError(std::string_view message) {
  return Status(StatusCode::kDataLoss, message);
}

CAIRN_NAMESPACE_END
