// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Differential test: ScanHashMap against std::unordered_map under random
// operations with allocation-failure injection. Seeds are fixed, so a CI
// failure reproduces; iteration counts scale with CAIRN_STRESS_SCALE.

#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/index/scan_hash_map.h"
#include "index/test_util.h"
#include "testing/stress.h"

namespace cairn::index_test {
namespace {

struct Variant {
  int max_exponent;
  int fail_per_mille;
  std::uint64_t key_space;
};

void CheckEqual(const Map& map,
                const std::unordered_map<std::string, std::uint64_t>& model) {
  ASSERT_EQ(map.size(), model.size());
  for (const auto& [key, value] : model) {
    const Map::Entry* e = map.Find(key);
    ASSERT_NE(e, nullptr) << key;
    ASSERT_EQ(e->value().offset, value) << key;
    const std::uint64_t h = map.HashOf(key);
    ASSERT_EQ(map.FindAddress(e->address(), Map::Hash32(h), Map::TagOf(h)), e);
    ASSERT_EQ(map.FindAddress(e->address(), Map::Hash32(h)), e);
  }
  std::size_t emitted = 0;
  StableScanCursor cursor = map.StableScanBegin();
  while (!cursor.done) {
    ASSERT_EQ(map.ScanStable(
                  cursor,
                  [&](const Map::Entry& e) {
                    ++emitted;
                    auto it = model.find(std::string(e.key()));
                    ASSERT_NE(it, model.end()) << e.key();
                    ASSERT_EQ(it->second, e.value().offset);
                  },
                  256),
              Outcome::kOk);
  }
  ASSERT_EQ(emitted, model.size());
}

void RunDifferential(std::uint64_t seed, const Variant& variant, int ops) {
  FailingAllocator allocator(seed);
  {
    ScanHashMapOptions options;
    options.seed = seed * 0x9e3779b97f4a7c15ull + 1;
    options.max_exponent = variant.max_exponent;
    options.max_key_bytes = 80;
    options.allocator = &allocator;
    Map map(options);
    std::unordered_map<std::string, std::uint64_t> model;
    std::mt19937_64 rng(seed);
    // Allocations are rare (slabs, chunks, tables), so instead of failing a
    // random share of them, each op arms "the next allocation fails" with
    // probability fail_per_mille / 1000; whatever allocates next sees it.
    std::vector<const Map::Entry*> batch_out;
    for (int op = 0; op < ops; ++op) {
      const std::uint64_t k = rng() % variant.key_space;
      const std::string key = Key(k, 8 + (k % 5) * 16);  // 5 size classes
      const std::uint64_t value = rng();
      const int kind = static_cast<int>(rng() % 100);
      if (static_cast<int>(rng() % 1000) < variant.fail_per_mille)
        allocator.FailAfter(0);
      if (kind < 30) {
        auto r = map.Insert(key, Loc{value});
        const bool present = model.count(key) != 0;
        if (r.ok()) {
          ASSERT_FALSE(present);
          model.emplace(key, value);
          ASSERT_EQ(r.entry->key(), key);
        } else if (r.outcome == Outcome::kAlreadyExists) {
          ASSERT_TRUE(present);
          ASSERT_EQ(r.entry, map.Find(key));
          ASSERT_EQ(r.entry->value().offset, model[key]);
        } else {
          ASSERT_EQ(r.outcome, Outcome::kResourceExhausted);
          ASSERT_FALSE(present);
          ASSERT_EQ(r.entry, nullptr);
          ASSERT_EQ(map.Find(key), nullptr);
        }
      } else if (kind < 45) {
        auto r = map.Upsert(key, Loc{value});
        if (r.ok()) {
          model[key] = value;
        } else {
          ASSERT_EQ(r.outcome, Outcome::kResourceExhausted);
          ASSERT_EQ(model.count(key), 0u);
        }
      } else if (kind < 75) {
        const Outcome s = map.Erase(key);
        ASSERT_EQ(s == Outcome::kOk, model.erase(key) == 1) << s;
      } else if (kind < 80) {
        const Outcome s = map.ReplaceValue(key, Loc{value});
        auto it = model.find(key);
        ASSERT_EQ(s == Outcome::kOk, it != model.end());
        if (it != model.end()) it->second = value;
      } else if (kind < 95) {
        const Map::Entry* e = map.Find(key);
        auto it = model.find(key);
        ASSERT_EQ(e != nullptr, it != model.end());
        if (e != nullptr) {
          ASSERT_EQ(e->value().offset, it->second);
        }
      } else if (kind < 98) {
        const Outcome s = map.Maintain(1 + rng() % 8);
        ASSERT_TRUE(s == Outcome::kOk || s == Outcome::kResourceExhausted);
      } else {
        std::vector<std::string> keys;
        for (int i = 0; i < 40; ++i) {
          const std::uint64_t j = rng() % variant.key_space;
          keys.push_back(Key(j, 8 + (j % 5) * 16));
        }
        std::vector<std::string_view> views(keys.begin(), keys.end());
        batch_out.assign(views.size(), nullptr);
        map.FindBatch(views, batch_out);
        for (std::size_t i = 0; i < views.size(); ++i) {
          ASSERT_EQ(batch_out[i] != nullptr, model.count(keys[i]) != 0);
        }
      }
      if (op % 2048 == 0) {
        ASSERT_NO_FATAL_FAILURE(CheckEqual(map, model));
        ASSERT_EQ(static_cast<long long>(map.Memory().total_bytes),
                  allocator.live_bytes());
      }
    }
    allocator.Heal();
    ASSERT_NO_FATAL_FAILURE(CheckEqual(map, model));
    while (Peer::IsRehashing(map)) ASSERT_EQ(map.Maintain(), Outcome::kOk);
    ASSERT_NO_FATAL_FAILURE(CheckEqual(map, model));
    // Drain: erase everything; the map shrinks back and stays consistent.
    std::vector<std::string> keys;
    for (const auto& [key, value] : model) keys.push_back(key);
    for (const auto& key : keys) {
      ASSERT_EQ(map.Erase(key), Outcome::kOk);
      model.erase(key);
    }
    ASSERT_NO_FATAL_FAILURE(CheckEqual(map, model));
    // Growing variants allocate often enough that failures must have hit.
    if (variant.fail_per_mille > 0 && variant.max_exponent == 32) {
      EXPECT_GT(allocator.failures(), 0);
    }
  }
  EXPECT_EQ(allocator.live_bytes(), 0);
}

TEST(ScanHashMapStressTest, DifferentialAgainstUnorderedMap) {
  const int ops =
      testing::StressIterations(testing::kUnderTsan ? 15000 : 60000);
  const Variant variants[] = {
      {32, 0, 20000},  // growth and shrink, no failures
      {32, 20, 5000},  // failures everywhere
      {2, 10, 3000},   // capped exponent: long chains, collisions
      {0, 5, 400},     // one bucket chain
  };
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    for (const Variant& v : variants) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " max_exponent " +
                   std::to_string(v.max_exponent) + " fail " +
                   std::to_string(v.fail_per_mille));
      ASSERT_NO_FATAL_FAILURE(RunDifferential(seed, v, ops));
    }
  }
}

// X5 under random churn: entries present for a whole scan are emitted.
TEST(ScanHashMapStressTest, ScanUnderChurnEmitsStableEntries) {
  const int rounds = testing::StressIterations(testing::kUnderTsan ? 3 : 10);
  for (int round = 0; round < rounds; ++round) {
    ScanHashMapOptions options;
    options.seed = 100 + round;
    Map map(options);
    std::mt19937_64 rng(round);
    std::vector<std::string> stable;
    for (int i = 0; i < 500; ++i) {
      stable.push_back("stable" + std::to_string(i));
      ASSERT_TRUE(map.Insert(stable.back(), Loc{0}).ok());
    }
    std::unordered_map<std::string, int> seen;
    std::vector<std::string> churn;
    std::uint64_t cursor = 0;
    int calls = 0;
    do {
      cursor = map.Scan(
          cursor, [&](const Map::Entry& e) { ++seen[std::string(e.key())]; });
      const int grow = (calls / 50) % 2 == 0;
      for (int k = 0; k < 30; ++k) {
        if (grow || churn.empty()) {
          churn.push_back("churn" + std::to_string(rng()));
          ASSERT_TRUE(map.Upsert(churn.back(), Loc{1}).ok());
        } else {
          const std::size_t victim = rng() % churn.size();
          ASSERT_EQ(map.Erase(churn[victim]), Outcome::kOk);
          churn[victim] = churn.back();
          churn.pop_back();
        }
      }
      ++calls;
    } while (cursor != 0 && calls < 100000);
    ASSERT_EQ(cursor, 0u);
    for (const auto& key : stable) ASSERT_GE(seen[key], 1) << key;
  }
}

}  // namespace
}  // namespace cairn::index_test
