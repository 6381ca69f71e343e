// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Differential test: the same random operation sequences run against a
// directory on the epoch route and one on the locked reference (the oracle),
// first serially, then from several threads at once. Each thread owns a
// disjoint slice of keys and group names, so every operation's outcome is
// deterministic and must match between the two; at each quiescent point the
// whole observable state (VisitHandles: key, group, payload, lease) must
// match too. Phases that mostly create and then mostly erase take the epoch
// route's bucket table through growth and shrink (it starts at 2 buckets
// here), so every comparison also runs while buckets are being moved.

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "directory/directory_testing.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::TestPayload;
using EpochDirectory = testing::TestDirectory<testing::EpochRouteTag>;
using OracleDirectory = testing::TestDirectory<testing::LockedRouteTag>;

// What a user can observe about one object, without its ObjectId (ids are
// issued in arrival order, which concurrent phases do not fix).
using Observed = std::tuple<std::string /*group name*/, std::int64_t /*value*/,
                            std::int64_t /*lease*/, std::uint64_t /*size*/>;

template <typename Directory>
std::map<std::string, Observed> Observe(const Directory& dir) {
  std::map<std::string, Observed> out;
  Status s = dir.VisitHandles([&](auto handles) {
    for (const auto& h : handles) {
      Status read = dir.WithHandle(h, [&](const auto& view) {
        std::string group;
        if (!view.is_singleton()) group = std::string(h.group()->name());
        out[std::string(view.key())] =
            Observed{group, view.payload().value, view.lease_deadline_nanos(),
                     view.size_bytes()};
      });
      EXPECT_TRUE(read.ok() || read.code() == StatusCode::kNotFound);
    }
  });
  EXPECT_TRUE(s.ok());
  return out;
}

DirectoryOptions Options(const Clock* clock) {
  DirectoryOptions options;
  options.clock = clock;
  // Dense buckets (many copies per write); the epoch route grows from here.
  options.route.bucket_count = 2;
  options.lifecycle_stripes = 4;
  return options;
}

// Which way a phase leans: kFill adds creates, kDrain adds erases.
enum class Bias { kMixed, kFill, kDrain };

// One random step on both directories; returns a description on mismatch.
class Driver {
 public:
  Driver(EpochDirectory& epoch, OracleDirectory& oracle, int slice,
         std::uint64_t seed, int keys = 12)
      : epoch_(epoch), oracle_(oracle), rng_(seed) {
    for (int i = 0; i < keys; ++i)
      keys_.push_back(testing::Key("s" + std::to_string(slice) + "/k", i));
    for (int i = 0; i < 3; ++i)
      groups_.push_back(testing::Key("s" + std::to_string(slice) + "/g", i));
  }

  // Returns false (with a message) if the two directories disagreed.
  bool Step(std::string* why, Bias bias = Bias::kMixed) {
    const std::string& key = keys_[rng_() % keys_.size()];
    const std::string& group = groups_[rng_() % groups_.size()];
    const std::int64_t value = static_cast<std::int64_t>(rng_() % 1000);
    StatusCode a = StatusCode::kOk, b = StatusCode::kOk;
    int op = static_cast<int>(rng_() % 16);
    if (op >= 8) {
      // Biased phases turn the extra draws into creates or erases.
      op = bias == Bias::kFill    ? static_cast<int>(op % 2)
           : bias == Bias::kDrain ? 2
                                  : op - 8;
    }
    switch (op) {
      case 0:
      case 1: {
        CreateOptions create;
        if (op == 1) create.group = group;
        create.size_bytes = static_cast<std::uint64_t>(value);
        a = epoch_.Create(key, create, TestPayload{value, 0, 0})
                .status()
                .code();
        b = oracle_.Create(key, create, TestPayload{value, 0, 0})
                .status()
                .code();
        break;
      }
      case 2:
        a = epoch_.Erase(key, EraseOptions{.force = true}).code();
        b = oracle_.Erase(key, EraseOptions{.force = true}).code();
        break;
      case 3:
        a = epoch_.EraseGroup(group, EraseOptions{.force = true}).code();
        b = oracle_.EraseGroup(group, EraseOptions{.force = true}).code();
        break;
      case 4: {
        auto write = [&](auto& access) { access.payload().value = value; };
        a = epoch_.WithObjectExclusive(key, write).code();
        b = oracle_.WithObjectExclusive(key, write).code();
        break;
      }
      case 5: {
        std::vector<std::string_view> batch;
        for (int i = 0; i < 5; ++i)
          batch.push_back(keys_[rng_() % keys_.size()]);
        std::vector<std::int64_t> seen_a, seen_b;
        auto reader = [](std::vector<std::int64_t>* seen) {
          return [seen](std::size_t, StatusCode code, const auto* view) {
            seen->push_back(code == StatusCode::kOk && view != nullptr
                                ? view->payload().value
                                : -1);
          };
        };
        a = epoch_.WithObjects(batch, reader(&seen_a)).code();
        b = oracle_.WithObjects(batch, reader(&seen_b)).code();
        if (seen_a != seen_b) {
          *why = "batch read differs for key " + key;
          return false;
        }
        break;
      }
      case 6: {
        auto ha = epoch_.Pin(key);
        auto hb = oracle_.Pin(key);
        a = ha.status().code();
        b = hb.status().code();
        if (ha.ok() && hb.ok()) {
          // A stale matched erase (wrong id) never unlinks; a right one does.
          const Status stale_a = epoch_.EraseIfMatch(
              key, ha.value()->id() + 1000000, ha.value().get());
          const Status stale_b = oracle_.EraseIfMatch(
              key, hb.value()->id() + 1000000, hb.value().get());
          if (stale_a.code() != StatusCode::kNotFound ||
              stale_b.code() != StatusCode::kNotFound) {
            *why = "stale EraseIfMatch unlinked " + key;
            return false;
          }
          const Status erased_a =
              epoch_.EraseIfMatch(key, ha.value()->id(), ha.value().get());
          const Status erased_b =
              oracle_.EraseIfMatch(key, hb.value()->id(), hb.value().get());
          if (erased_a.code() != erased_b.code()) {
            *why = "EraseIfMatch differs for " + key;
            return false;
          }
        }
        break;
      }
      default: {
        auto ga = epoch_.FindGroup(group);
        auto gb = oracle_.FindGroup(group);
        a = ga.status().code();
        b = gb.status().code();
      }
    }
    if (a != b) {
      *why = "op " + std::to_string(op) + " on " + key + ": epoch " +
             std::string(StatusCodeName(a)) + ", oracle " +
             std::string(StatusCodeName(b));
      return false;
    }
    return true;
  }

 private:
  EpochDirectory& epoch_;
  OracleDirectory& oracle_;
  std::mt19937_64 rng_;
  std::vector<std::string> keys_;
  std::vector<std::string> groups_;
};

TEST(RouteDifferentialTest, SerialSequencesMatchTheOracle) {
  const int seeds = testing::StressIterations(testing::kUnderTsan ? 6 : 20);
  for (int seed = 0; seed < seeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ManualClock clock;
    EpochDirectory epoch(Options(&clock));
    OracleDirectory oracle(Options(&clock));
    Driver driver(epoch, oracle, 0, seed, /*keys=*/60);
    std::size_t max_buckets = 0;
    for (int step = 0; step < 600; ++step) {
      std::string why;
      const Bias bias = step < 250   ? Bias::kFill
                        : step < 500 ? Bias::kDrain
                                     : Bias::kMixed;
      ASSERT_TRUE(driver.Step(&why, bias)) << "step " << step << ": " << why;
      max_buckets =
          std::max(max_buckets, epoch.Diagnostics().route.bucket_count);
      if (step % 25 == 0) {
        ASSERT_EQ(Observe(epoch), Observe(oracle)) << step;
      }
      clock.Advance(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(Observe(epoch), Observe(oracle));
    const RouteDiagnostics route = epoch.Diagnostics().route;
    EXPECT_GT(route.publications, 50u) << "the sequence barely wrote anything";
    EXPECT_GE(max_buckets, 8u) << "the route never grew";
    EXPECT_LT(route.bucket_count, max_buckets) << "the route never shrank";
    EXPECT_EQ(epoch.object_count(), oracle.object_count());
    EXPECT_EQ(epoch.group_count(), oracle.group_count());
  }
}

TEST(RouteDifferentialTest, ConcurrentPhasesMatchAtQuiescentPoints) {
  ManualClock clock;
  EpochDirectory epoch(Options(&clock));
  OracleDirectory oracle(Options(&clock));
  constexpr int kThreads = 8;  // oversubscribed on 2 cores
  std::vector<Driver> drivers;
  for (int t = 0; t < kThreads; ++t)
    drivers.emplace_back(epoch, oracle, t, 1000 + t);
  const int phases = testing::StressIterations(testing::kUnderTsan ? 4 : 10);
  for (int phase = 0; phase < phases; ++phase) {
    std::vector<std::string> failures(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      const Bias bias = phase % 3 == 0   ? Bias::kFill
                        : phase % 3 == 1 ? Bias::kDrain
                                         : Bias::kMixed;
      threads.emplace_back([&, t, bias] {
        for (int step = 0; step < 300 && failures[t].empty(); ++step) {
          drivers[t].Step(&failures[t], bias);
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_TRUE(failures[t].empty())
          << "phase " << phase << " thread " << t << ": " << failures[t];
    }
    const auto observed = Observe(epoch);
    ASSERT_EQ(observed, Observe(oracle)) << "phase " << phase;
    if (phase % 3 != 1) {
      EXPECT_FALSE(observed.empty()) << "phase " << phase;
    }
    clock.Advance(std::chrono::milliseconds(100));
  }
  EXPECT_GE(epoch.Diagnostics().route.resizes, 2u)
      << "the phases never resized the route";
}

}  // namespace
}  // namespace cairn
