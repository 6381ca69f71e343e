// Copyright 2026 The cairn Authors.

#include "cairn/base/clock.h"

#include <chrono>

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

const Clock* Clock::Steady() noexcept {
  static const SteadyClock clock;
  return &clock;
}

CAIRN_NAMESPACE_END
