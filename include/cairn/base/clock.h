// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The injected monotonic clock (P5). Every cairn component that needs time
// takes a `const Clock*`; tests pass a ManualClock and drive it.
//
// Thread safety: NowNanos() is safe from any thread. ManualClock's setters
// are atomic and may race with readers.

#ifndef CAIRN_BASE_CLOCK_H_
#define CAIRN_BASE_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

class Clock {
 public:
  virtual ~Clock() = default;
  // Nanoseconds on a monotonic time line; only differences are meaningful,
  // but every value must be positive: the directory stores a deadline of 0
  // for "none" (no lease, no soft pin), which only a positive clock reads
  // as passed.
  virtual std::int64_t NowNanos() const noexcept = 0;

  // std::chrono::steady_clock. Stateless, so sharing it hides no state.
  static const Clock* Steady() noexcept;
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::int64_t start_nanos = 1'000'000'000) noexcept
      : now_(start_nanos) {}
  std::int64_t NowNanos() const noexcept override {
    return now_.load(std::memory_order_acquire);
  }
  void Advance(std::chrono::nanoseconds delta) noexcept {
    now_.fetch_add(delta.count(), std::memory_order_acq_rel);
  }

 private:
  std::atomic<std::int64_t> now_;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_BASE_CLOCK_H_
