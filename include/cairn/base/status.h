// Copyright 2026 The cairn Authors.
//
// Status and Result<T>: how cairn reports errors. No exception crosses the
// API. A successful Status is a null pointer, so returning and testing one on
// a hot path costs a register; an error carries a code and a message.
//
// Thread safety: value types. Distinct objects may be used from distinct
// threads; one object is not synchronised.

#ifndef CAIRN_BASE_STATUS_H_
#define CAIRN_BASE_STATUS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "cairn/base/check.h"
#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

// Code names follow absl::StatusCode so hosts can map them one to one.
enum class StatusCode : std::uint8_t {
  kOk = 0,
  kCancelled = 1,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
};

std::string_view StatusCodeName(StatusCode code) noexcept;

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;  // OK
  Status(StatusCode code, std::string_view message);

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;
  ~Status() = default;

  static Status Ok() noexcept { return Status(); }

  bool ok() const noexcept { return rep_ == nullptr; }
  StatusCode code() const noexcept {
    return rep_ == nullptr ? StatusCode::kOk : rep_->code;
  }
  std::string_view message() const noexcept {
    return rep_ == nullptr ? std::string_view() : rep_->message;
  }
  // "OK" or "<code name>: <message>".
  std::string ToString() const;

  // Explicitly drops an error the caller has decided not to act on.
  void IgnoreError() const noexcept {}

  friend bool operator==(const Status& a, const Status& b) noexcept {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

Status InvalidArgumentError(std::string_view message);
Status DeadlineExceededError(std::string_view message);
Status NotFoundError(std::string_view message);
Status AlreadyExistsError(std::string_view message);
Status ResourceExhaustedError(std::string_view message);
Status FailedPreconditionError(std::string_view message);
Status AbortedError(std::string_view message);
Status OutOfRangeError(std::string_view message);
Status InternalError(std::string_view message);
Status UnavailableError(std::string_view message);
Status DataLossError(std::string_view message);

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  // Implicit on purpose, like absl::StatusOr: `return value;` and
  // `return NotFoundError(...);` both read naturally.
  Result(T value) : value_(std::move(value)) {}         // NOLINT
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    CAIRN_CHECK_MSG(!status_.ok(), "Result built from an OK Status");
  }

  bool ok() const noexcept { return value_.has_value(); }
  const Status& status() const& noexcept { return status_; }
  Status status() && noexcept { return std::move(status_); }

  T& value() & {
    CAIRN_CHECK_MSG(ok(), "Result::value() on an error");
    return *value_;
  }
  const T& value() const& {
    CAIRN_CHECK_MSG(ok(), "Result::value() on an error");
    return *value_;
  }
  T&& value() && {
    CAIRN_CHECK_MSG(ok(), "Result::value() on an error");
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

CAIRN_NAMESPACE_END

// Returns from the enclosing function if `expr` is a non-OK Status.
#define CAIRN_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::cairn::Status cairn_status_ = (expr);        \
    if (!cairn_status_.ok()) return cairn_status_; \
  } while (false)

#endif  // CAIRN_BASE_STATUS_H_
