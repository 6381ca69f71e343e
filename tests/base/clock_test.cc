// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/base/clock.h"

#include <gtest/gtest.h>

namespace {

// Built during static initialisation, before the first Clock::Steady() call,
// so it is destroyed after anything Steady() constructs lazily. Its destructor
// reads the clock, as a host's global GroupDirectory does through its epoch
// domain at exit: the steady clock must outlive every static object.
struct ReadsClockAtExit {
  ~ReadsClockAtExit() {
    volatile std::int64_t now = cairn::Clock::Steady()->NowNanos();
    (void)now;
  }
};
ReadsClockAtExit reads_clock_at_exit;

TEST(ClockTest, SteadyNeverGoesBackwards) {
  const cairn::Clock* clock = cairn::Clock::Steady();
  std::int64_t previous = clock->NowNanos();
  for (int i = 0; i < 1000; ++i) {
    const std::int64_t now = clock->NowNanos();
    ASSERT_GE(now, previous);
    previous = now;
  }
}

TEST(ClockTest, SteadyIsOneObject) {
  EXPECT_EQ(cairn::Clock::Steady(), cairn::Clock::Steady());
}

}  // namespace
