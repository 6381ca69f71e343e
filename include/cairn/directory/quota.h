// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// QuotaAccount: one tenant's byte account (Q1-Q3, docs/semantics.md). One
// 64-bit word holds the charged bytes and an admission-closed bit; charges
// and releases are compare-and-swap loops on it, so they never lock, never
// allocate on success and never block (Q3). The limit is a second word.
//
// Which bytes count is the host's policy: the directory charges each
// object's `counted_bytes` (CreateOptions), which by default a host sets to
// the object's size. The per-object ledger (pending, committed, released)
// lives in the ObjectEntry and is kept by GroupDirectory, which also settles
// a put partially and adjusts a committed charge (Q4: a refund is a
// Release, a growth a Charge, each under the object's lock); this class is
// only the account.
//
// Thread safety: every method is safe from any thread, lock-free.

#ifndef CAIRN_DIRECTORY_QUOTA_H_
#define CAIRN_DIRECTORY_QUOTA_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "cairn/base/status.h"
#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

class QuotaAccount {
 public:
  // The charged bytes use 63 bits; bit 63 is the admission-closed bit.
  static constexpr std::uint64_t kClosedBit = std::uint64_t{1} << 63;
  static constexpr std::uint64_t kUnlimited = kClosedBit - 1;

  explicit QuotaAccount(std::uint64_t limit_bytes = kUnlimited) noexcept
      : limit_(limit_bytes > kUnlimited ? kUnlimited : limit_bytes) {}
  QuotaAccount(const QuotaAccount&) = delete;
  QuotaAccount& operator=(const QuotaAccount&) = delete;

  // A charge never passes the limit (Q1): adds `bytes` if admission is open
  // and charged + bytes <= limit.
  // Errors, nothing charged: kResourceExhausted "quota exceeded: deficit N
  // bytes" (N = charged + bytes - limit, also stored in *deficit when not
  // null), kResourceExhausted "admission closed", kInvalidArgument if the
  // sum would overflow 63 bits. Lock-free; allocates only the error message.
  Status Charge(std::uint64_t bytes, std::uint64_t* deficit = nullptr) {
    if (deficit != nullptr) *deficit = 0;
    std::uint64_t state = state_.load(std::memory_order_relaxed);
    for (;;) {
      if ((state & kClosedBit) != 0) {
        return ResourceExhaustedError("quota admission closed");
      }
      const std::uint64_t charged = state;
      if (bytes > kUnlimited - charged) {
        return InvalidArgumentError("quota charge overflows");
      }
      const std::uint64_t limit = limit_.load(std::memory_order_relaxed);
      if (charged + bytes > limit) {
        const std::uint64_t need = charged + bytes - limit;
        if (deficit != nullptr) *deficit = need;
        return ResourceExhaustedError("quota exceeded: deficit " +
                                      std::to_string(need) + " bytes");
      }
      if (state_.compare_exchange_weak(state, state + bytes,
                                       std::memory_order_relaxed,
                                       std::memory_order_relaxed)) {
        return Status::Ok();
      }
    }
  }

  // Charges `bytes` whatever the limit and whether admission is open: for
  // an object the primary already admitted (a snapshot restore, a log
  // replay), which must come back even if it leaves the account over its
  // limit (deficit() then says by how much; the tenant-quota eviction policy
  // frees it). Errors, nothing charged: kInvalidArgument if the sum would
  // overflow 63 bits. Lock-free; allocates only the error message.
  Status ForceCharge(std::uint64_t bytes) {
    std::uint64_t state = state_.load(std::memory_order_relaxed);
    for (;;) {
      if (bytes > kUnlimited - (state & ~kClosedBit)) {
        return InvalidArgumentError("quota charge overflows");
      }
      // The closed bit is kept as it is.
      if (state_.compare_exchange_weak(state, state + bytes,
                                       std::memory_order_relaxed,
                                       std::memory_order_relaxed)) {
        return Status::Ok();
      }
    }
  }

  // Subtracts `bytes`. A release larger than what is charged is a ledger
  // mismatch: kFailedPrecondition, and nothing changes (Q2). Code-only
  // status; lock-free; works while admission is closed.
  Status Release(std::uint64_t bytes) noexcept {
    std::uint64_t state = state_.load(std::memory_order_relaxed);
    for (;;) {
      if ((state & ~kClosedBit) < bytes) {
        return Status(StatusCode::kFailedPrecondition);
      }
      if (state_.compare_exchange_weak(state, state - bytes,
                                       std::memory_order_relaxed,
                                       std::memory_order_relaxed)) {
        return Status::Ok();
      }
    }
  }

  // Later charges fail with "admission closed"; releases still work.
  void CloseAdmission() noexcept {
    state_.fetch_or(kClosedBit, std::memory_order_relaxed);
  }
  void OpenAdmission() noexcept {
    state_.fetch_and(~kClosedBit, std::memory_order_relaxed);
  }
  bool admission_closed() const noexcept {
    return (state_.load(std::memory_order_relaxed) & kClosedBit) != 0;
  }

  // A lower limit never fails: the account may then be over its limit, and
  // deficit() says by how much (the tenant-quota eviction policy frees it).
  void set_limit(std::uint64_t limit_bytes) noexcept {
    limit_.store(limit_bytes > kUnlimited ? kUnlimited : limit_bytes,
                 std::memory_order_relaxed);
  }
  std::uint64_t limit() const noexcept {
    return limit_.load(std::memory_order_relaxed);
  }
  std::uint64_t charged() const noexcept {
    return state_.load(std::memory_order_relaxed) & ~kClosedBit;
  }
  // Bytes over the limit; 0 when within it.
  std::uint64_t deficit() const noexcept {
    const std::uint64_t c = charged();
    const std::uint64_t l = limit();
    return c > l ? c - l : 0;
  }

 private:
  std::atomic<std::uint64_t> state_{0};
  std::atomic<std::uint64_t> limit_;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_DIRECTORY_QUOTA_H_
