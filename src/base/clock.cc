// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/base/clock.h"

#include <chrono>
#include <new>

CAIRN_NAMESPACE_BEGIN
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

// Never destroyed: a host's static objects (a global directory and its epoch
// domain) read the clock from their destructors at exit, after a function-local
// static would already be gone. ClockTest's ReadsClockAtExit checks this.
const Clock* Clock::Steady() noexcept {
  alignas(SteadyClock) static unsigned char storage[sizeof(SteadyClock)];
  static const SteadyClock* const clock = new (storage) SteadyClock();
  return clock;
}

CAIRN_NAMESPACE_END
