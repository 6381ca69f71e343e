// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ScanHashMap traversals beyond Scan/ScanStable: ForEachUntil (a visitor
// that can stop early).

#include <cstddef>
#include <cstdint>
#include <map>
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

}  // namespace
}  // namespace cairn::index_test
