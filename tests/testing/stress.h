// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Shared by stress tests: how hard to push, from CAIRN_STRESS_SCALE.

#ifndef CAIRN_TESTS_TESTING_STRESS_H_
#define CAIRN_TESTS_TESTING_STRESS_H_

#include <chrono>
#include <cstdlib>
#include <string>

namespace cairn::testing {

// 1.0 unless CAIRN_STRESS_SCALE says otherwise (0.1 .. 100).
inline double StressScale() {
  const char* env = std::getenv("CAIRN_STRESS_SCALE");
  if (env == nullptr) return 1.0;
  const double scale = std::atof(env);
  if (scale < 0.1) return 0.1;
  if (scale > 100) return 100;
  return scale;
}

inline std::chrono::milliseconds StressDuration(int base_millis) {
  return std::chrono::milliseconds(
      static_cast<long>(base_millis * StressScale()));
}

inline int StressIterations(int base) {
  return static_cast<int>(base * StressScale()) + 1;
}

constexpr bool kUnderTsan =
#if defined(__SANITIZE_THREAD__)
    true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_TESTING_STRESS_H_
