// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/base/status.h"

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/base/version.h"
#include "testing/alloc_counter.h"

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

TEST(StatusTest, CopySharesTheMessageAndCompareEqual) {
  Status a = ResourceExhaustedError("busy");
  Status b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.message().data(), b.message().data());  // one shared record
  b = Status::Ok();
  EXPECT_FALSE(a.ok());
  EXPECT_EQ(a.message(), "busy");
  EXPECT_TRUE(b.ok());
  Status c = std::move(a);
  EXPECT_TRUE(a.ok());  // NOLINT(bugprone-use-after-move): moved-from is OK
  EXPECT_EQ(c.message(), "busy");
}

TEST(StatusTest, CodeOnlyErrorsNeverAllocate) {
  testing::AllocationCounter allocs;
  Status a(StatusCode::kNotFound);
  Status b = NotFoundError();
  Status c = UnavailableError("");
  Status d = a;
  d = c;
  Status e = std::move(d);
  EXPECT_EQ(allocs.count(), 0u);
  EXPECT_EQ(a.code(), StatusCode::kNotFound);
  EXPECT_EQ(b, a);
  EXPECT_FALSE(a.has_message());
  EXPECT_TRUE(a.message().empty());
  EXPECT_EQ(e.code(), StatusCode::kUnavailable);
  EXPECT_EQ(a.ToString(), "NOT_FOUND");
}

TEST(StatusTest, EveryCodeRoundTripsThroughTheInlineForm) {
  for (int raw = 1; raw <= 15; ++raw) {
    const auto code = static_cast<StatusCode>(raw);
    const Status s(code);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.code(), code);
    EXPECT_EQ(Status(code, "m").code(), code);
  }
}

// A message that cannot be allocated is dropped; the code is kept and
// nothing throws (every Status constructor is noexcept).
TEST(StatusTest, FailedMessageAllocationKeepsTheCode) {
  testing::FailNextAllocationsOnThisThread(1);
  const Status s = DataLossError("checksum mismatch in block 7");
  testing::FailNextAllocationsOnThisThread(0);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_FALSE(s.has_message());
  EXPECT_EQ(s.ToString(), "DATA_LOSS");
}

TEST(StatusTest, CopyingAMessageDoesNotAllocate) {
  const Status a = DataLossError("checksum");
  testing::AllocationCounter allocs;
  Status b = a;
  Status c;
  c = b;
  EXPECT_EQ(allocs.count(), 0u);
  EXPECT_EQ(c.message(), "checksum");
}

TEST(StatusTest, CodeWithAndWithoutMessageDiffer) {
  EXPECT_NE(NotFoundError("x"), NotFoundError());
  EXPECT_EQ(NotFoundError(), Status(StatusCode::kNotFound));
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

// Checks the unit of Clock::Steady(): a sleep of 20 ms reads as at least
// 20'000'000 ns (a clock that returned micro- or milliseconds fails), and
// not more than a minute.
TEST(ClockTest, SteadyClockCountsNanoseconds) {
  const Clock* clock = Clock::Steady();
  const auto a = clock->NowNanos();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto b = clock->NowNanos();
  EXPECT_GE(b - a, 20'000'000);
  EXPECT_LT(b - a, 60'000'000'000);
}

}  // namespace
}  // namespace cairn
