// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Status and Result<T>: how cairn reports errors. No exception crosses the
// API. A Status is one machine word:
//   - 0 is OK, so returning and testing success costs a register;
//   - a code with no message is kept inline in the word (tagged), so it
//     never allocates: every read-path miss and every hot-path error in
//     cairn uses this form;
//   - a code with a message points to a shared, reference-counted heap
//     record; copies share it. If that allocation fails the message is
//     dropped and the code is kept inline, so no constructor throws.
//
// Thread safety: value types. Distinct objects may be used from distinct
// threads, including copies that share one message record; one object is
// not synchronised.

#ifndef CAIRN_BASE_STATUS_H_
#define CAIRN_BASE_STATUS_H_

#include <atomic>
#include <cstdint>
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
  // Code only: never allocates. kOk gives OK.
  explicit Status(StatusCode code) noexcept
      : rep_(code == StatusCode::kOk ? 0 : Inline(code)) {}
  // With a message: allocates one shared record if `message` is not empty
  // (code only if it is, or if the allocation fails).
  Status(StatusCode code, std::string_view message) noexcept;

  Status(const Status& other) noexcept : rep_(other.rep_) { Ref(); }
  Status& operator=(const Status& other) noexcept {
    if (rep_ != other.rep_) {
      other.Ref();
      Unref();
      rep_ = other.rep_;
    }
    return *this;
  }
  Status(Status&& other) noexcept : rep_(other.rep_) { other.rep_ = 0; }
  Status& operator=(Status&& other) noexcept {
    if (this != &other) {
      Unref();
      rep_ = other.rep_;
      other.rep_ = 0;
    }
    return *this;
  }
  ~Status() { Unref(); }

  static Status Ok() noexcept { return Status(); }

  bool ok() const noexcept { return rep_ == 0; }
  StatusCode code() const noexcept {
    if (rep_ == 0) return StatusCode::kOk;
    if (IsInline()) return static_cast<StatusCode>(rep_ >> kCodeShift);
    return heap()->code;
  }
  // Empty for OK and for code-only errors.
  std::string_view message() const noexcept {
    if (rep_ == 0 || IsInline()) return {};
    return heap()->message;
  }
  // True when the error carries a heap message record.
  bool has_message() const noexcept { return rep_ != 0 && !IsInline(); }
  // "OK", "<code name>" or "<code name>: <message>".
  std::string ToString() const;

  // Explicitly drops an error the caller has decided not to act on.
  void IgnoreError() const noexcept {}

  friend bool operator==(const Status& a, const Status& b) noexcept {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  // The message record. Aligned to at least 4, so bit 0 of its address is
  // free for the inline tag.
  struct HeapRep {
    std::atomic<std::uint32_t> refs;
    StatusCode code;
    std::string message;
  };
  static constexpr std::uintptr_t kInlineTag = 1;
  static constexpr int kCodeShift = 1;

  static constexpr std::uintptr_t Inline(StatusCode code) noexcept {
    return (static_cast<std::uintptr_t>(code) << kCodeShift) | kInlineTag;
  }
  bool IsInline() const noexcept { return (rep_ & kInlineTag) != 0; }
  const HeapRep* heap() const noexcept {
    return reinterpret_cast<const HeapRep*>(rep_);
  }
  void Ref() const noexcept {
    if (rep_ != 0 && !IsInline()) {
      reinterpret_cast<HeapRep*>(rep_)->refs.fetch_add(
          1, std::memory_order_relaxed);
    }
  }
  void Unref() noexcept {
    if (rep_ != 0 && !IsInline()) UnrefHeap(reinterpret_cast<HeapRep*>(rep_));
  }
  static void UnrefHeap(HeapRep* rep) noexcept;

  std::uintptr_t rep_ = 0;
};

// Factories. Without a message (or with an empty one) they give the
// code-only form and never allocate.
Status InvalidArgumentError(std::string_view message = {}) noexcept;
Status DeadlineExceededError(std::string_view message = {}) noexcept;
Status NotFoundError(std::string_view message = {}) noexcept;
Status AlreadyExistsError(std::string_view message = {}) noexcept;
Status ResourceExhaustedError(std::string_view message = {}) noexcept;
Status FailedPreconditionError(std::string_view message = {}) noexcept;
Status AbortedError(std::string_view message = {}) noexcept;
Status OutOfRangeError(std::string_view message = {}) noexcept;
Status InternalError(std::string_view message = {}) noexcept;
Status UnavailableError(std::string_view message = {}) noexcept;
Status DataLossError(std::string_view message = {}) noexcept;

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
