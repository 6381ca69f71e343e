// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ScanHashMap traversals beyond Scan/ScanStable: ForEachUntil (a visitor
// that can stop early) and SampleRandom (uniform random sampling).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/index/scan_hash_map.h"
#include "index/test_util.h"

namespace cairn::index_test {
namespace {

ScanHashMapOptions Options(int max_exponent = 32) {
  ScanHashMapOptions options;
  options.seed = 0x5eed;
  options.max_exponent = max_exponent;
  return options;
}

// Key -> times visited by one full ForEachUntil pass; checks it reported
// "not stopped".
std::map<std::string, int> VisitCounts(const Map& map) {
  std::map<std::string, int> counts;
  const bool stopped = map.ForEachUntil([&](const Map::Entry& e) {
    ++counts[std::string(e.key())];
    return ScanControl::kContinue;
  });
  EXPECT_FALSE(stopped);
  return counts;
}

void ExpectEachOnce(const Map& map, const std::set<std::string>& model) {
  const std::map<std::string, int> counts = VisitCounts(map);
  ASSERT_EQ(counts.size(), model.size());
  for (const auto& [key, n] : counts) {
    EXPECT_EQ(n, 1) << key;
    EXPECT_EQ(model.count(key), 1u) << key;
  }
}

// Stops at the k-th entry: fn runs exactly k times, the call says stopped,
// and the k entries are distinct.
void ExpectStopsAfter(const Map& map, std::size_t k) {
  std::set<std::string> seen;
  std::size_t calls = 0;
  const bool stopped = map.ForEachUntil([&](const Map::Entry& e) {
    ++calls;
    seen.emplace(e.key());
    return calls == k ? ScanControl::kStop : ScanControl::kContinue;
  });
  EXPECT_TRUE(stopped) << "k=" << k;
  EXPECT_EQ(calls, k);
  EXPECT_EQ(seen.size(), k);
}

TEST(ScanHashMapVisitTest, ForEachUntilOnEmptyMapCallsNothing) {
  Map map(Options());
  int calls = 0;
  EXPECT_FALSE(map.ForEachUntil([&](const Map::Entry&) {
    ++calls;
    return ScanControl::kStop;
  }));
  EXPECT_EQ(calls, 0);
  // A map emptied by erase still has a table.
  ASSERT_TRUE(map.Insert("a", Loc{1}).ok());
  ASSERT_EQ(map.Erase("a"), Outcome::kOk);
  EXPECT_FALSE(map.ForEachUntil([&](const Map::Entry&) {
    ++calls;
    return ScanControl::kStop;
  }));
  EXPECT_EQ(calls, 0);
}

TEST(ScanHashMapVisitTest, ForEachUntilStopsAfterExactlyKEntries) {
  // max_exponent 2 forces overflow chains, so stops land inside chains.
  for (const int max_exponent : {32, 2}) {
    Map map(Options(max_exponent));
    for (std::uint64_t i = 0; i < 100; ++i) {
      ASSERT_TRUE(map.Insert(Key(i), Loc{i}).ok());
    }
    ASSERT_FALSE(Peer::IsRehashing(map));
    for (const std::size_t k :
         {std::size_t{1}, std::size_t{2}, std::size_t{13}, std::size_t{50},
          std::size_t{99}, std::size_t{100}}) {
      ExpectStopsAfter(map, k);
    }
  }
}

TEST(ScanHashMapVisitTest, ForEachUntilVisitsEachEntryOnceOnFrozenMap) {
  for (const int max_exponent : {32, 2}) {
    Map map(Options(max_exponent));
    std::set<std::string> model;
    for (std::uint64_t i = 0; i < 1000; ++i) {
      ASSERT_TRUE(map.Insert(Key(i), Loc{i}).ok());
      model.insert(Key(i));
    }
    for (std::uint64_t i = 0; i < 1000; i += 3) {
      ASSERT_EQ(map.Erase(Key(i)), Outcome::kOk);
      model.erase(Key(i));
    }
    while (Peer::IsRehashing(map)) ASSERT_EQ(map.Maintain(), Outcome::kOk);
    ExpectEachOnce(map, model);
    // The traversal changed nothing a stable cursor would notice.
    StableScanCursor cursor = map.StableScanBegin();
    ExpectEachOnce(map, model);
    EXPECT_EQ(map.ScanStable(cursor, [](const Map::Entry&) {}), Outcome::kOk);
  }
}

// During a grow and a shrink, at every rehash position: each entry once
// (entries are in the old table's unmoved chains or in the new table), and
// a stop after k entries, including k reaching into the new table.
TEST(ScanHashMapVisitTest, ForEachUntilDuringRehash) {
  Map map(Options());
  std::set<std::string> model;
  ASSERT_EQ(map.PreallocateForExpectedSize(9 * 16), Outcome::kOk);
  std::uint64_t i = 0;
  while (!Peer::IsRehashing(map)) {
    ASSERT_TRUE(map.Insert(Key(i), Loc{i}).ok());
    model.insert(Key(i));
    ++i;
  }
  std::set<std::uint64_t> positions;
  while (Peer::IsRehashing(map)) {
    positions.insert(Peer::RehashIndex(map));
    ExpectEachOnce(map, model);
    ExpectStopsAfter(map, 1);
    ExpectStopsAfter(map, model.size() / 2);
    ExpectStopsAfter(map, model.size());
    ASSERT_EQ(map.Maintain(1), Outcome::kOk);
  }
  EXPECT_EQ(positions.size(), 16u);
  ExpectEachOnce(map, model);
  while (!Peer::IsRehashing(map)) {
    const std::string key = *model.begin();
    ASSERT_EQ(map.Erase(key), Outcome::kOk);
    model.erase(key);
  }
  while (Peer::IsRehashing(map)) {
    ExpectEachOnce(map, model);
    ExpectStopsAfter(map, model.size());
    ASSERT_EQ(map.Maintain(1), Outcome::kOk);
  }
  ExpectEachOnce(map, model);
}

// --- SampleRandom ------------------------------------------------------------

// Upper critical value of chi-squared with `df` degrees of freedom at
// z standard deviations (Wilson-Hilferty); z = 4 is p ~ 3e-5.
double ChiSquaredCritical(double df, double z = 4.0) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Draws `per_entry` * size samples with a fixed seed; returns chi-squared
// of the counts against the uniform distribution over the map's entries.
// Fails if a sample is not an entry of the map.
double SampleChiSquared(const Map& map, std::uint64_t seed, int per_entry) {
  std::map<std::string, std::uint64_t> counts;
  map.ForEachUntil([&](const Map::Entry& e) {
    counts[std::string(e.key())] = 0;
    return ScanControl::kContinue;
  });
  std::mt19937_64 rng(seed);
  const std::size_t draws = map.size() * static_cast<std::size_t>(per_entry);
  std::size_t emitted = 0;
  EXPECT_EQ(map.SampleRandom(rng, draws,
                             [&](const Map::Entry& e) {
                               auto it = counts.find(std::string(e.key()));
                               EXPECT_NE(it, counts.end()) << e.key();
                               if (it != counts.end()) ++it->second;
                               ++emitted;
                             }),
            draws);
  EXPECT_EQ(emitted, draws);
  double chi2 = 0;
  for (const auto& [key, n] : counts) {
    const double d = static_cast<double>(n) - per_entry;
    chi2 += d * d / per_entry;
  }
  return chi2;
}

// Keys of `map` whose hash routes to bucket `bucket` of a 2^bits table.
std::vector<std::string> KeysInBucket(const Map& map, std::uint32_t bucket,
                                      int bits, std::size_t count,
                                      std::uint64_t& next) {
  std::vector<std::string> keys;
  const std::uint32_t mask = (std::uint32_t{1} << bits) - 1;
  while (keys.size() < count) {
    std::string key = Key(next++);
    if ((Map::Hash32(map.HashOf(key)) & mask) == bucket) {
      keys.push_back(std::move(key));
    }
  }
  return keys;
}

TEST(ScanHashMapSampleTest, EmptyMapAndZeroDrawsEmitNothing) {
  Map map(Options());
  std::mt19937_64 rng(1);
  int calls = 0;
  const auto count = [&](const Map::Entry&) { ++calls; };
  EXPECT_EQ(map.SampleRandom(rng, 10, count), 0u);  // no table yet
  ASSERT_EQ(map.PreallocateForExpectedSize(9 << 12), Outcome::kOk);
  EXPECT_EQ(map.SampleRandom(rng, 10, count), 0u);  // large empty table
  ASSERT_TRUE(map.Insert("a", Loc{1}).ok());
  EXPECT_EQ(map.SampleRandom(rng, 0, count), 0u);
  ASSERT_EQ(map.Erase("a"), Outcome::kOk);
  EXPECT_EQ(map.SampleRandom(rng, 10, count), 0u);
  EXPECT_EQ(calls, 0);
}

TEST(ScanHashMapSampleTest, SingleEntryIsAlwaysDrawn) {
  Map map(Options());
  ASSERT_TRUE(map.Insert("only", Loc{7}).ok());
  std::mt19937_64 rng(2);
  std::size_t calls = 0;
  EXPECT_EQ(map.SampleRandom(rng, 100,
                             [&](const Map::Entry& e) {
                               EXPECT_EQ(e.key(), "only");
                               ++calls;
                             }),
            100u);
  EXPECT_EQ(calls, 100u);
}

// A nearly empty large table (4096 buckets, 2 entries): the grid is sparse,
// so every draw takes the fallback, which terminates and finds both.
TEST(ScanHashMapSampleTest, NearlyEmptyLargeTableTerminatesAndFindsAll) {
  Map map(Options());
  ASSERT_EQ(map.PreallocateForExpectedSize(9 << 12), Outcome::kOk);
  ASSERT_EQ(map.exponent(), 12);
  ASSERT_TRUE(map.Insert("first", Loc{1}).ok());
  std::mt19937_64 rng(3);
  std::size_t calls = 0;
  EXPECT_EQ(map.SampleRandom(rng, 50,
                             [&](const Map::Entry& e) {
                               EXPECT_EQ(e.key(), "first");
                               ++calls;
                             }),
            50u);
  EXPECT_EQ(calls, 50u);
  ASSERT_TRUE(map.Insert("second", Loc{2}).ok());
  std::set<std::string> seen;
  EXPECT_EQ(map.SampleRandom(
                rng, 200, [&](const Map::Entry& e) { seen.emplace(e.key()); }),
            200u);
  EXPECT_EQ(seen, (std::set<std::string>{"first", "second"}));
}

// 64 entries in a 4-bucket table: 40 in one chain (4 buckets), 8 in each of
// the others. Picking a chain and then an entry in it would draw the long
// chain's entries 5x less often than the rest.
TEST(ScanHashMapSampleTest, UniformOverSkewedChains) {
  Map map(Options(/*max_exponent=*/2));
  std::uint64_t next = 0;
  std::vector<std::string> keys = KeysInBucket(map, 0, 2, 40, next);
  for (std::uint32_t b = 1; b < 4; ++b) {
    for (std::string& k : KeysInBucket(map, b, 2, 8, next)) {
      keys.push_back(std::move(k));
    }
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(map.Insert(keys[i], Loc{i}).ok());
  }
  while (Peer::IsRehashing(map)) ASSERT_EQ(map.Maintain(), Outcome::kOk);
  ASSERT_EQ(map.exponent(), 2);
  ASSERT_EQ(map.size(), 64u);
  ASSERT_GE(Peer::ChainBuckets(map), 3u) << "the long chain has 4 buckets";
  const double chi2 = SampleChiSquared(map, 0xC0FFEE, 400);
  EXPECT_LT(chi2, ChiSquaredCritical(63)) << "chi2=" << chi2;
}

// During a grow, at every rehash position: entries in the old table's
// unmoved chains (one of them 3 buckets long) and in the new table are
// drawn uniformly.
TEST(ScanHashMapSampleTest, UniformAtEveryRehashPosition) {
  Map map(Options());
  ASSERT_EQ(map.PreallocateForExpectedSize(9 * 4), Outcome::kOk);
  ASSERT_EQ(map.exponent(), 2);
  std::uint64_t next = 0;
  // 28 keys of old bucket 3 (the last to move): a 3-bucket chain.
  std::uint64_t value = 0;
  for (const std::string& k : KeysInBucket(map, 3, 2, 28, next)) {
    ASSERT_TRUE(map.Insert(k, Loc{value++}).ok());
  }
  while (!Peer::IsRehashing(map)) {
    ASSERT_TRUE(map.Insert(Key(next++), Loc{value++}).ok());
  }
  ASSERT_EQ(Peer::RehashIndex(map), 0u);
  std::set<std::uint64_t> positions;
  std::uint64_t seed = 100;
  while (Peer::IsRehashing(map)) {
    positions.insert(Peer::RehashIndex(map));
    const double chi2 = SampleChiSquared(map, seed++, 300);
    EXPECT_LT(chi2, ChiSquaredCritical(static_cast<double>(map.size() - 1)))
        << "chi2=" << chi2 << " at rehash position " << Peer::RehashIndex(map);
    ASSERT_EQ(map.Maintain(1), Outcome::kOk);
  }
  EXPECT_EQ(positions.size(), 4u);
  const double chi2 = SampleChiSquared(map, seed, 300);
  EXPECT_LT(chi2, ChiSquaredCritical(static_cast<double>(map.size() - 1)))
      << "chi2=" << chi2 << " after the rehash";
}

}  // namespace
}  // namespace cairn::index_test
