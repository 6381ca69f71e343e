// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ScanHashMap::VisitMetrics read back from the Prometheus text, against
// workloads whose sizes are known and the map's own stats() and Memory().

#include <string>

#include <gtest/gtest.h>

#include "cairn/base/metrics.h"
#include "index/test_util.h"
#include "testing/metrics_expect.h"

namespace cairn::index_test {
namespace {

using testing_internal::Labels;
using testing_internal::ParsedExposition;
using testing_internal::RenderAndParse;

ParsedExposition Render(const Map& map) {
  const MetricLabel label[] = {{"index", "records"}};
  return RenderAndParse([&](MetricVisitor& v) { map.VisitMetrics(v, label); });
}

// Every reported value equals the map's own figures.
void ExpectMatches(const ParsedExposition& p, const Map& map) {
  ASSERT_EQ(p.error, "");
  const Labels l = {{"index", "records"}};
  auto part = [](const char* name) -> Labels {
    return {{"index", "records"}, {"part", name}};
  };
  const double slots = map.exponent() < 0
                           ? 0.0
                           : 12.0 * static_cast<double>(1ull << map.exponent());
  const ScanHashMapMemory m = map.Memory();
  const ScanHashMapStats& s = map.stats();
  EXPECT_EQ(p.Value("cairn_index_entries", l), static_cast<double>(map.size()));
  EXPECT_EQ(p.Value("cairn_index_slots", l), slots);
  EXPECT_DOUBLE_EQ(p.Value("cairn_index_load_ratio", l),
                   slots == 0 ? 0.0 : static_cast<double>(map.size()) / slots);
  EXPECT_EQ(p.Value("cairn_index_memory_bytes", part("buckets")),
            static_cast<double>(m.bucket_bytes));
  EXPECT_EQ(p.Value("cairn_index_memory_bytes", part("chains")),
            static_cast<double>(m.chain_bytes));
  EXPECT_EQ(p.Value("cairn_index_memory_bytes", part("arena")),
            static_cast<double>(m.arena_bytes));
  EXPECT_EQ(p.Value("cairn_index_arena_live_bytes", l),
            static_cast<double>(m.arena_live_bytes));
  EXPECT_EQ(p.Value("cairn_index_resizes_started_total", l),
            static_cast<double>(s.rehashes_started));
  EXPECT_EQ(p.Value("cairn_index_rehash_steps_total", l),
            static_cast<double>(s.rehash_steps));
  EXPECT_EQ(p.Value("cairn_index_rehash_step_failures_total", l),
            static_cast<double>(s.rehash_step_failures));
  EXPECT_EQ(p.Value("cairn_index_chain_compactions_total", l),
            static_cast<double>(s.chain_compactions));
}

ScanHashMapOptions Options(int max_exponent = 32,
                           IndexAllocator* allocator = nullptr) {
  ScanHashMapOptions options;
  options.seed = 0x5eed;
  options.max_exponent = max_exponent;
  options.allocator = allocator;
  return options;
}

TEST(ScanHashMapMetricsTest, EmptyMapReportsZeros) {
  Map map(Options());
  const ParsedExposition p = Render(map);
  ExpectMatches(p, map);
  const Labels l = {{"index", "records"}};
  EXPECT_EQ(p.types.at("cairn_index_entries"), "gauge");
  EXPECT_EQ(p.types.at("cairn_index_rehash_steps_total"), "counter");
  EXPECT_EQ(p.Value("cairn_index_entries", l), 0);
  EXPECT_EQ(p.Value("cairn_index_slots", l), 0);
  EXPECT_EQ(p.Value("cairn_index_load_ratio", l), 0);
  EXPECT_EQ(p.Value("cairn_index_rehashing", l), 0);
  EXPECT_EQ(p.Value("cairn_index_resizes_started_total", l), 0);
}

TEST(ScanHashMapMetricsTest, GrowAndShrinkAreCounted) {
  Map map(Options());
  const Labels l = {{"index", "records"}};
  // Presized for 900: inserting 900 keys starts no resize (X9).
  ASSERT_EQ(map.PreallocateForExpectedSize(900), Outcome::kOk);
  for (std::uint64_t i = 0; i < 900; ++i) {
    ASSERT_EQ(map.Insert(Key(i), Loc{i}).outcome, Outcome::kOk);
  }
  ParsedExposition p = Render(map);
  ExpectMatches(p, map);
  EXPECT_EQ(p.Value("cairn_index_entries", l), 900);
  EXPECT_EQ(p.Value("cairn_index_slots", l), 12 * 128);  // 900 <= 9 * 128
  EXPECT_EQ(p.Value("cairn_index_resizes_started_total", l), 0);
  EXPECT_EQ(p.Value("cairn_index_rehash_steps_total", l), 0);
  EXPECT_EQ(p.Value("cairn_index_rehashing", l), 0);
  // 16-byte keys + 8-byte value + 2-byte length, rounded to 8: 32 bytes.
  EXPECT_EQ(p.Value("cairn_index_arena_live_bytes", l), 900 * 32);

  // 253 more cross 9/12 of 1536 slots: one grow to 256 buckets starts and
  // each later insert moves one old chain; Maintain finishes it.
  for (std::uint64_t i = 900; i < 1153; ++i) {
    ASSERT_EQ(map.Insert(Key(i), Loc{i}).outcome, Outcome::kOk);
  }
  p = Render(map);
  ExpectMatches(p, map);
  EXPECT_EQ(p.Value("cairn_index_resizes_started_total", l), 1);
  EXPECT_EQ(p.Value("cairn_index_rehashing", l), 1);
  EXPECT_EQ(p.Value("cairn_index_slots", l), 12 * 256);
  while (map.stats().rehash_steps < 128) {
    ASSERT_EQ(map.Maintain(), Outcome::kOk);
  }
  p = Render(map);
  ExpectMatches(p, map);
  EXPECT_EQ(p.Value("cairn_index_rehashing", l), 0);
  EXPECT_EQ(p.Value("cairn_index_rehash_steps_total", l), 128);

  // Erase down to 100: below 3/12 of the slots the map shrinks.
  for (std::uint64_t i = 100; i < 1153; ++i) {
    ASSERT_EQ(map.Erase(Key(i)), Outcome::kOk);
  }
  ASSERT_EQ(map.Maintain(1 << 20), Outcome::kOk);
  p = Render(map);
  ExpectMatches(p, map);
  EXPECT_EQ(p.Value("cairn_index_entries", l), 100);
  EXPECT_EQ(p.Value("cairn_index_arena_live_bytes", l), 100 * 32);
  EXPECT_GE(p.Value("cairn_index_resizes_started_total", l), 2);
  EXPECT_EQ(p.Value("cairn_index_rehashing", l), 0);
}

TEST(ScanHashMapMetricsTest, ChainCompactionsAreCounted) {
  // One bucket: 30 keys make a chain of three buckets; erasing empties
  // overflow buckets, which compaction releases.
  FailingAllocator allocator;
  Map map(Options(/*max_exponent=*/0, &allocator));
  for (std::uint64_t i = 0; i < 30; ++i) {
    ASSERT_EQ(map.Insert(Key(i), Loc{i}).outcome, Outcome::kOk);
  }
  ParsedExposition p = Render(map);
  ExpectMatches(p, map);
  const Labels l = {{"index", "records"}};
  EXPECT_EQ(p.Value("cairn_index_slots", l), 12);
  EXPECT_DOUBLE_EQ(p.Value("cairn_index_load_ratio", l), 30.0 / 12.0);
  EXPECT_EQ(p.Value("cairn_index_memory_bytes",
                    {{"index", "records"}, {"part", "buckets"}}),
            64);
  for (std::uint64_t i = 0; i < 30; ++i) {
    ASSERT_EQ(map.Erase(Key(i)), Outcome::kOk);
  }
  p = Render(map);
  ExpectMatches(p, map);
  EXPECT_EQ(p.Value("cairn_index_entries", l), 0);
  EXPECT_GE(p.Value("cairn_index_chain_compactions_total", l), 2);
}

TEST(ScanHashMapMetricsTest, ResizeThatCannotAllocateIsCounted) {
  FailingAllocator allocator;
  Map map(Options(32, &allocator));
  ASSERT_EQ(map.PreallocateForExpectedSize(9), Outcome::kOk);
  for (std::uint64_t i = 0; i < 9; ++i) {
    ASSERT_EQ(map.Insert(Key(i), Loc{i}).outcome, Outcome::kOk);
  }
  allocator.FailPerMille(1000);  // every allocation fails from now on
  // The tenth key fits the arena's slab; the grow it calls for cannot
  // allocate its table (counted, the insert still succeeds).
  ASSERT_EQ(map.Insert(Key(9), Loc{9}).outcome, Outcome::kOk);
  EXPECT_EQ(map.Maintain(), Outcome::kResourceExhausted);
  EXPECT_EQ(map.Maintain(), Outcome::kResourceExhausted);
  allocator.Heal();
  const ParsedExposition p = Render(map);
  ExpectMatches(p, map);
  const Labels l = {{"index", "records"}};
  EXPECT_EQ(p.Value("cairn_index_entries", l), 10);
  EXPECT_EQ(p.Value("cairn_index_rehash_step_failures_total", l), 3);
  EXPECT_EQ(p.Value("cairn_index_resizes_started_total", l), 0);
}

}  // namespace
}  // namespace cairn::index_test
