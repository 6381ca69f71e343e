// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Shared by the directory test files: the route type list every suite is
// parameterised over, the test payload, and a watchdog that fails the test
// (by aborting with a message) if a scenario does not finish within a
// generous bound. The bound is a deadlock detector, not a timing assertion.

#ifndef CAIRN_TESTS_DIRECTORY_DIRECTORY_TESTING_H_
#define CAIRN_TESTS_DIRECTORY_DIRECTORY_TESTING_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "cairn/directory/group_directory.h"
#include "cairn/route/object_route_index.h"
#include "testing/locked_route.h"

namespace cairn::testing {

// The payload every directory test uses: `value` is written by tests, `stamp`
// must always equal the object's size_bytes (writers change both together),
// `last_writer` names the ObjectId of whoever last wrote it.
struct TestPayload {
  std::int64_t value = 0;
  std::uint64_t stamp = 0;
  ObjectId last_writer = 0;
};

// Create options for an object of `bytes` (size and counted bytes alike),
// a member of `group` if it is not empty.
inline CreateOptions Sized(std::uint64_t bytes, std::string_view group = {}) {
  CreateOptions o;
  o.size_bytes = bytes;
  o.counted_bytes = bytes;
  o.group = group;
  return o;
}

// One tag per route implementation: the library's epoch route, and the
// locked reference that stays as the test oracle. The epoch route's unlinked
// owners live on in a retired snapshot until a grace period passes (E1), so
// "the last handle dropped frees the group" holds only after reclamation.
struct EpochRouteTag {
  template <typename Entry>
  using Route = ObjectRouteIndex<Entry>;
  static constexpr const char* kName = "Epoch";
  static constexpr bool kUnlinkFreesImmediately = false;
};

struct LockedRouteTag {
  template <typename Entry>
  using Route = LockedRoute<Entry>;
  static constexpr const char* kName = "Locked";
  static constexpr bool kUnlinkFreesImmediately = true;
};

using RouteTypes = ::testing::Types<EpochRouteTag, LockedRouteTag>;

struct RouteTypeNames {
  template <typename T>
  static std::string GetName(int) {
    return T::kName;
  }
};

template <typename Tag>
using TestDirectory = GroupDirectory<TestPayload, Tag::template Route>;

// prefix + decimal i. (Spelled out: GCC 12 at -O3 raises a false -Wrestrict
// on `"literal" + std::to_string(i)`.)
inline std::string Key(std::string_view prefix, long long i) {
  std::string key(prefix);
  key.append(std::to_string(i));
  return key;
}

inline CreateOptions InGroup(std::string_view group) {
  CreateOptions options;
  options.group = group;
  return options;
}

// Aborts the process (failing the test) if not disarmed within `bound`.
class Watchdog {
 public:
  Watchdog(std::chrono::seconds bound, std::string what)
      : what_(std::move(what)), thread_([this, bound] { Run(bound); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void Run(std::chrono::seconds bound) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, bound, [this] { return done_; })) {
      std::fprintf(stderr,
                   "watchdog: '%s' did not finish within %llds "
                   "(deadlock?)\n",
                   what_.c_str(), static_cast<long long>(bound.count()));
      std::fflush(stderr);
      std::abort();
    }
  }

  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

inline constexpr std::chrono::seconds kWatchdogBound{240};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_DIRECTORY_DIRECTORY_TESTING_H_
