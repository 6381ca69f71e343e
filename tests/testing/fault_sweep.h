// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// SweepTally: the bookkeeping of a durability sweep on FaultEnv
// (fault_env.h). Each case adds its label, how many acknowledged operations
// it checked and its failure (empty if none); Report() prints one summary
// line and fails the test with the first few failures.

#ifndef CAIRN_TESTS_TESTING_FAULT_SWEEP_H_
#define CAIRN_TESTS_TESTING_FAULT_SWEEP_H_

#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace cairn::testing {

class SweepTally {
 public:
  // Printed as "<component> <sweep>: ...".
  SweepTally(std::string component, std::string sweep)
      : name_(std::move(component) + " " + std::move(sweep)) {}

  void Add(const std::string& label, std::size_t acknowledged_checked,
           const std::string& failure) {
    ++cases_;
    acknowledged_checked_ += acknowledged_checked;
    if (!failure.empty()) failures_.push_back(label + ": " + failure);
  }

  void Report() const {
    std::printf(
        "[ sweep    ] %s: %zu cases, %zu acknowledged operations checked, %zu "
        "lost or unopenable\n",
        name_.c_str(), cases_, acknowledged_checked_, failures_.size());
    for (std::size_t i = 0; i < failures_.size() && i < 8; ++i) {
      ADD_FAILURE() << failures_[i];
    }
    EXPECT_TRUE(failures_.empty())
        << name_ << ": " << failures_.size() << " of " << cases_;
  }

 private:
  const std::string name_;
  std::size_t cases_ = 0;
  std::size_t acknowledged_checked_ = 0;
  std::vector<std::string> failures_;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_TESTING_FAULT_SWEEP_H_
