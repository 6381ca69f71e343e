// Copyright 2026 The cairn Authors.

#include "cairn/base/status.h"

#include <string>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/base/version.h"

namespace cairn {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(s.message().empty());
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = NotFoundError("no such key");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no such key");
  EXPECT_EQ(s.ToString(), "NOT_FOUND: no such key");
}

TEST(StatusTest, CopyIsDeepAndEqual) {
  Status a = ResourceExhaustedError("busy");
  Status b = a;
  EXPECT_EQ(a, b);
  b = Status::Ok();
  EXPECT_FALSE(a.ok());
  EXPECT_TRUE(b.ok());
}

TEST(StatusTest, OkCodeWithMessageIsOk) {
  Status s(StatusCode::kOk, "ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE(s.message().empty());
}

TEST(StatusTest, EveryCodeHasAName) {
  for (StatusCode c :
       {StatusCode::kCancelled, StatusCode::kInvalidArgument,
        StatusCode::kDeadlineExceeded, StatusCode::kNotFound,
        StatusCode::kAlreadyExists, StatusCode::kResourceExhausted,
        StatusCode::kFailedPrecondition, StatusCode::kAborted,
        StatusCode::kOutOfRange, StatusCode::kInternal,
        StatusCode::kUnavailable, StatusCode::kDataLoss}) {
    EXPECT_NE(StatusCodeName(c), "UNKNOWN");
  }
}

Status FailsThenNotReached(bool* reached) {
  CAIRN_RETURN_IF_ERROR(AbortedError("stop"));
  *reached = true;
  return Status::Ok();
}

TEST(StatusTest, ReturnIfErrorReturnsEarly) {
  bool reached = false;
  Status s = FailsThenNotReached(&reached);
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_FALSE(reached);
}

TEST(ResultTest, HoldsValueOrStatus) {
  Result<std::string> good = std::string("v");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, "v");
  EXPECT_EQ(good->size(), 1u);
  Result<std::string> bad = InvalidArgumentError("empty key");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Result<int> bad = NotFoundError("x");
  EXPECT_DEATH((void)bad.value(), "Result::value\\(\\) on an error");
}

TEST(VersionTest, LinkedVersionMatchesHeaders) {
  const Version linked = LinkedVersion();
  EXPECT_EQ(linked.major, kVersion.major);
  EXPECT_EQ(linked.minor, kVersion.minor);
  EXPECT_EQ(linked.patch, kVersion.patch);
}

TEST(ClockTest, ManualClockAdvancesOnlyWhenTold) {
  ManualClock clock(100);
  EXPECT_EQ(clock.NowNanos(), 100);
  clock.Advance(std::chrono::nanoseconds(50));
  EXPECT_EQ(clock.NowNanos(), 150);
}

TEST(ClockTest, SteadyClockIsMonotonic) {
  const Clock* clock = Clock::Steady();
  const auto a = clock->NowNanos();
  const auto b = clock->NowNanos();
  EXPECT_LE(a, b);
}

}  // namespace
}  // namespace cairn
