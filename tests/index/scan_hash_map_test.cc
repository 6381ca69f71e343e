// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ScanHashMap: one test per rule X1-X5, X8, X9 of semantics.md section 10,
// plus layout, chains, address reuse, detach, memory and bad input.

#include "cairn/index/scan_hash_map.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "index/test_util.h"

namespace cairn::index_test {
namespace {

using index_internal::Bucket;

ScanHashMapOptions Options(int max_exponent = 32,
                           IndexAllocator* allocator = nullptr) {
  ScanHashMapOptions options;
  options.seed = 0x5eed;
  options.max_exponent = max_exponent;
  options.allocator = allocator;
  return options;
}

// Keys whose hash has the given tag, found by search.
std::vector<std::string> KeysWithTag(const Map& map, std::uint8_t tag,
                                     std::size_t count,
                                     std::uint64_t start = 0) {
  std::vector<std::string> keys;
  for (std::uint64_t i = start; keys.size() < count; ++i) {
    std::string key = Key(i);
    if (Map::TagOf(map.HashOf(key)) == tag) keys.push_back(std::move(key));
  }
  return keys;
}

// Every entry the map holds, by exact scan.
std::map<std::string, std::uint64_t> Contents(const Map& map) {
  std::map<std::string, std::uint64_t> out;
  StableScanCursor cursor = map.StableScanBegin();
  while (!cursor.done) {
    const Outcome s = map.ScanStable(
        cursor,
        [&](const Map::Entry& e) {
          EXPECT_TRUE(
              out.emplace(std::string(e.key()), e.value().offset).second)
              << "stable scan emitted " << e.key() << " twice";
        },
        64);
    EXPECT_EQ(s, Outcome::kOk);
    if (s != Outcome::kOk) break;
  }
  return out;
}

// Brute force: an address is in the map iff some entry has it.
bool AddressPresent(const Map& map, std::uintptr_t address) {
  bool found = false;
  for (const auto& [key, value] : Contents(map)) {
    if (map.Find(key)->address() == address) found = true;
  }
  return found;
}

void ExpectAllFound(const Map& map,
                    const std::map<std::string, std::uint64_t>& model) {
  ASSERT_EQ(map.size(), model.size());
  for (const auto& [key, value] : model) {
    const Map::Entry* e = map.Find(key);
    ASSERT_NE(e, nullptr) << key;
    EXPECT_EQ(e->value().offset, value);
    const std::uint64_t h = map.HashOf(key);
    EXPECT_EQ(map.FindAddress(e->address(), Map::Hash32(h), Map::TagOf(h)), e)
        << key;
    EXPECT_EQ(map.FindAddress(e->address(), Map::Hash32(h)), e) << key;
  }
}

TEST(ScanHashMapTest, BucketLayoutIsOneCacheLine) {
  EXPECT_EQ(sizeof(Bucket), 64u);
  EXPECT_EQ(alignof(Bucket), 64u);
}

TEST(ScanHashMapTest, SimdTagMatchAgreesWithScalarForAll256Tags) {
  std::mt19937_64 rng(3);
  for (int round = 0; round < 64; ++round) {
    Bucket b;
    for (auto& tag : b.tags)
      tag = static_cast<std::uint8_t>(rng() % (round < 32 ? 4 : 256));
    for (auto& handle : b.handles) handle = static_cast<std::uint32_t>(rng());
    b.child = static_cast<std::uint32_t>(rng());
    for (int tag = 0; tag < 256; ++tag) {
      const auto t = static_cast<std::uint8_t>(tag);
      EXPECT_EQ(index_internal::MatchTags(b, t),
                index_internal::MatchTagsScalar(b, t));
      EXPECT_EQ(
          index_internal::MatchTags(b, t) & ~index_internal::kAllSlotsMask, 0u);
    }
  }
}

// X1: tags are filters only; all 256 values are legal; a stale tag never
// matches.
TEST(ScanHashMapTest, X1TagsAreFiltersOnly) {
  Map map(Options());
  std::map<std::string, std::uint64_t> model;
  for (int tag = 0; tag < 256; ++tag) {
    for (const std::string& key :
         KeysWithTag(map, static_cast<std::uint8_t>(tag), 2)) {
      if (model.count(key) != 0) continue;
      ASSERT_TRUE(map.Insert(key, Loc{model.size()}).ok());
      model.emplace(key, model.size());
    }
  }
  ExpectAllFound(map, model);
  // Holes: erase half; each erased key's stale tag is left in its slot and
  // must never produce a match, by key or by its old address.
  std::vector<std::pair<std::string, std::uintptr_t>> erased;
  for (auto it = model.begin(); it != model.end();) {
    const std::uintptr_t address = map.Find(it->first)->address();
    ASSERT_EQ(map.Erase(it->first), Outcome::kOk);
    erased.emplace_back(it->first, address);
    it = model.erase(it);
    if (it != model.end()) ++it;
  }
  ExpectAllFound(map, model);
  for (const auto& [key, address] : erased) {
    EXPECT_EQ(map.Find(key), nullptr) << key;
    const std::uint64_t h = map.HashOf(key);
    const Map::Entry* e =
        map.FindAddress(address, Map::Hash32(h), Map::TagOf(h));
    EXPECT_EQ(e, map.FindAddress(address, Map::Hash32(h)));
    EXPECT_EQ(e != nullptr, AddressPresent(map, address));
    if (e != nullptr) {
      EXPECT_NE(e->key(), key);
    }
  }
}

TEST(ScanHashMapTest, X1StaleTagInHoleDoesNotMatchAfterReinsertOfOtherTag) {
  Map map(Options(/*max_exponent=*/0));  // one bucket chain: every key collides
  const std::vector<std::string> same = KeysWithTag(map, 0x5a, 3);
  for (const auto& key : same) ASSERT_TRUE(map.Insert(key, Loc{1}).ok());
  const std::uintptr_t address = map.Find(same[1])->address();
  ASSERT_EQ(map.Erase(same[1]), Outcome::kOk);
  EXPECT_EQ(map.Find(same[1]), nullptr);
  const std::uint64_t h = map.HashOf(same[1]);
  EXPECT_EQ(map.FindAddress(address, Map::Hash32(h), 0x5a), nullptr);
  EXPECT_EQ(map.FindAddress(address, Map::Hash32(h)), nullptr);
  EXPECT_NE(map.Find(same[0]), nullptr);
  EXPECT_NE(map.Find(same[2]), nullptr);
}

// X2: for every tag, Find and tagged FindAddress find the entry in a bucket
// full of other tags; tagged, untagged and brute-force searches agree.
TEST(ScanHashMapTest, X2EveryTagFoundAmongOtherTags) {
  for (int tag = 0; tag < 256; ++tag) {
    Map map(Options(/*max_exponent=*/0));
    const auto t = static_cast<std::uint8_t>(tag);
    const auto others =
        KeysWithTag(map, static_cast<std::uint8_t>(tag ^ 0x80), 11);
    for (const auto& key : others) ASSERT_TRUE(map.Insert(key, Loc{0}).ok());
    const std::string key = KeysWithTag(map, t, 1)[0];
    ASSERT_TRUE(map.Insert(key, Loc{42}).ok());
    ASSERT_EQ(Peer::ChainBuckets(map), 0u) << "the 12 keys share one bucket";
    const Map::Entry* e = map.Find(key);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->value().offset, 42u);
    const std::uint64_t h = map.HashOf(key);
    EXPECT_EQ(map.FindAddress(e->address(), Map::Hash32(h), t), e);
    EXPECT_EQ(map.FindAddress(e->address(), Map::Hash32(h)), e);
    EXPECT_TRUE(AddressPresent(map, e->address()));
    // A wrong tag filters it out; the untagged search does not care.
    EXPECT_EQ(map.FindAddress(e->address(), Map::Hash32(h),
                              static_cast<std::uint8_t>(tag ^ 0x80)),
              nullptr);
    for (const auto& other : others) {
      const Map::Entry* o = map.Find(other);
      ASSERT_NE(o, nullptr);
      EXPECT_EQ(
          map.FindAddress(o->address(), Map::Hash32(map.HashOf(other)), t),
          nullptr);
    }
  }
}

// X3: entries in overflow chains are found; compaction keeps addresses.
TEST(ScanHashMapTest, X3OverflowChainsAndCompactionKeepAddresses) {
  FailingAllocator allocator;
  Map map(
      Options(/*max_exponent=*/1, &allocator));  // tiny cap: forced collisions
  std::map<std::string, std::uint64_t> model;
  std::map<std::string, std::uintptr_t> addresses;
  for (int i = 0; i < 400; ++i) {
    ASSERT_TRUE(map.Insert(Key(i), Loc{std::uint64_t(i)}).ok());
    model.emplace(Key(i), i);
  }
  while (Peer::IsRehashing(map)) ASSERT_EQ(map.Maintain(), Outcome::kOk);
  EXPECT_EQ(map.exponent(), 1);
  EXPECT_GT(Peer::ChainBuckets(map), 20u);
  ExpectAllFound(map, model);
  for (const auto& [key, value] : model)
    addresses[key] = map.Find(key)->address();
  const std::size_t chains_before = Peer::ChainBuckets(map);
  std::mt19937_64 rng(9);
  std::vector<std::string> keys;
  for (const auto& [key, value] : model) keys.push_back(key);
  std::shuffle(keys.begin(), keys.end(), rng);
  for (std::size_t i = 0; i < 300; ++i) {
    ASSERT_EQ(map.Erase(keys[i]), Outcome::kOk);
    model.erase(keys[i]);
    if (i % 25 == 0) ExpectAllFound(map, model);
  }
  EXPECT_GT(map.stats().chain_compactions, 0u);
  EXPECT_LT(Peer::ChainBuckets(map), chains_before);
  ExpectAllFound(map, model);
  for (const auto& [key, value] : model)
    EXPECT_EQ(map.Find(key)->address(), addresses[key]);
  EXPECT_EQ(static_cast<long long>(map.Memory().total_bytes),
            allocator.live_bytes());
}

// Records, at one moment, that const calls did not move the rehash.
struct RehashMark {
  explicit RehashMark(const Map& map)
      : index(Peer::RehashIndex(map)),
        steps(map.stats().rehash_steps),
        rehashing(Peer::IsRehashing(map)) {}
  std::uint64_t index;
  std::uint64_t steps;
  bool rehashing;
};

void ExpectConstCallsDoNotStep(
    const Map& map, const std::map<std::string, std::uint64_t>& model) {
  const RehashMark before(map);
  std::vector<std::string_view> keys;
  for (const auto& [key, value] : model) keys.emplace_back(key);
  std::vector<const Map::Entry*> out(keys.size());
  map.FindBatch(keys, out);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_NE(out[i], nullptr);
    EXPECT_EQ(out[i], map.Find(keys[i]));
    map.PrefetchBucket(map.HashOf(keys[i]));
  }
  map.PrefetchMetadata();
  std::uint64_t cursor = 0;
  do {
    cursor = map.Scan(cursor, [](const Map::Entry&) {});
  } while (cursor != 0);
  const RehashMark after(map);
  EXPECT_EQ(before.index, after.index);
  EXPECT_EQ(before.steps, after.steps);
  EXPECT_EQ(before.rehashing, after.rehashing);
}

// X4: at every rehash_index of one grow and one shrink, every live entry is
// found by key and by (hash, address); const calls never advance the rehash.
TEST(ScanHashMapTest, X4EveryRehashPositionDuringGrowAndShrink) {
  Map map(Options());
  std::map<std::string, std::uint64_t> model;
  ASSERT_EQ(map.PreallocateForExpectedSize(9 * 64), Outcome::kOk);
  ASSERT_EQ(map.exponent(), 6);
  std::uint64_t i = 0;
  while (!Peer::IsRehashing(map)) {
    ASSERT_TRUE(map.Insert(Key(i), Loc{i}).ok());
    model.emplace(Key(i), i);
    ++i;
  }
  EXPECT_EQ(map.exponent(), 7);
  EXPECT_EQ(map.size(), 9u * 64 + 1) << "grow starts just above 9/12 full";
  std::set<std::uint64_t> grow_positions;
  while (Peer::IsRehashing(map)) {
    grow_positions.insert(Peer::RehashIndex(map));
    ExpectAllFound(map, model);
    ExpectConstCallsDoNotStep(map, model);
    ASSERT_EQ(map.Maintain(1), Outcome::kOk);
  }
  EXPECT_EQ(grow_positions.size(), 64u);
  ExpectAllFound(map, model);
  // Shrink: erase until the shrink starts, then step one chain at a time.
  while (!Peer::IsRehashing(map)) {
    const std::string key = model.begin()->first;
    ASSERT_EQ(map.Erase(key), Outcome::kOk);
    model.erase(key);
  }
  EXPECT_EQ(map.exponent(), 6);
  EXPECT_EQ(map.size(), 3u * 128 - 1) << "shrink starts just below 3/12 full";
  std::set<std::uint64_t> shrink_positions;
  while (Peer::IsRehashing(map)) {
    shrink_positions.insert(Peer::RehashIndex(map));
    ExpectAllFound(map, model);
    ExpectConstCallsDoNotStep(map, model);
    ASSERT_EQ(map.Maintain(1), Outcome::kOk);
  }
  EXPECT_EQ(shrink_positions.size(), 128u);
  ExpectAllFound(map, model);
}

// X4 with mutation: inserts and erases at every position of a grow.
TEST(ScanHashMapTest, X4MutationsDuringRehash) {
  Map map(Options());
  std::map<std::string, std::uint64_t> model;
  std::uint64_t next = 0;
  for (int round = 0; round < 3000; ++round) {
    const std::string key = Key(next++);
    ASSERT_TRUE(map.Insert(key, Loc{next}).ok());
    model.emplace(key, next);
    if (round % 3 == 0) {
      const std::string victim = model.begin()->first;
      ASSERT_EQ(map.Erase(victim), Outcome::kOk);
      model.erase(victim);
    }
    if (Peer::IsRehashing(map) && round % 7 == 0) ExpectAllFound(map, model);
  }
  ExpectAllFound(map, model);
  EXPECT_GT(map.stats().rehashes_started, 3u);
}

// X5: every entry present for the whole scan is emitted at least once,
// through growth and shrink, with mutation between calls.
TEST(ScanHashMapTest, X5ScanThroughGrowAndShrink) {
  for (int variant = 0; variant < 2; ++variant) {
    Map map(Options(variant == 0 ? 32 : 3));
    std::set<std::string> stable;
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(map.Insert(Key(i), Loc{0}).ok());
      stable.insert(Key(i));
    }
    std::set<std::string> emitted;
    std::vector<std::string> transient;
    std::uint64_t cursor = 0, next = 1'000'000;
    int calls = 0;
    bool grew = false, shrank = false;
    do {
      cursor = map.Scan(cursor, [&](const Map::Entry& e) {
        emitted.insert(std::string(e.key()));
      });
      ++calls;
      const int before = map.exponent();
      // Grow for the first part of the scan, then shrink.
      if (calls < 40) {
        for (int k = 0; k < 60; ++k) {
          transient.push_back(Key(next++));
          ASSERT_TRUE(map.Insert(transient.back(), Loc{1}).ok());
        }
      } else {
        for (int k = 0; k < 80 && !transient.empty(); ++k) {
          ASSERT_EQ(map.Erase(transient.back()), Outcome::kOk);
          transient.pop_back();
        }
      }
      if (map.exponent() > before) grew = true;
      if (map.exponent() < before) shrank = true;
      ASSERT_LT(calls, 1'000'000);
    } while (cursor != 0);
    for (const auto& key : stable) EXPECT_EQ(emitted.count(key), 1u) << key;
    if (variant == 0) {
      EXPECT_TRUE(grew);
      EXPECT_TRUE(shrank);
    }
  }
}

TEST(ScanHashMapTest, StableScanEmitsEachEntryExactlyOnceMidRehash) {
  Map map(Options());
  std::map<std::string, std::uint64_t> model;
  for (std::uint64_t i = 0;
       !Peer::IsRehashing(map) || Peer::RehashIndex(map) < 5; ++i) {
    ASSERT_TRUE(map.Insert(Key(i), Loc{i}).ok());
    model.emplace(Key(i), i);
  }
  ASSERT_TRUE(Peer::IsRehashing(map));
  EXPECT_EQ(Contents(map), model);  // Contents fails on a duplicate
}

// Everything a const call may not change, cheap enough to take per op.
struct Observables {
  explicit Observables(const Map& map)
      : size(map.size()),
        exponent(map.exponent()),
        rehashing(Peer::IsRehashing(map)),
        rehash_index(Peer::RehashIndex(map)),
        chain_buckets(Peer::ChainBuckets(map)),
        version(Peer::Version(map)),
        memory(map.Memory()),
        stats(map.stats()),
        cursor(map.StableScanBegin()) {}
  std::size_t size;
  int exponent;
  bool rehashing;
  std::uint64_t rehash_index;
  std::size_t chain_buckets;
  std::uint64_t version;
  ScanHashMapMemory memory;
  ScanHashMapStats stats;
  StableScanCursor cursor;
};

void ExpectSameObservables(const Map& map, const Observables& before) {
  const Observables after(map);
  EXPECT_EQ(after.size, before.size);
  EXPECT_EQ(after.exponent, before.exponent);
  EXPECT_EQ(after.rehashing, before.rehashing);
  EXPECT_EQ(after.rehash_index, before.rehash_index);
  EXPECT_EQ(after.chain_buckets, before.chain_buckets);
  EXPECT_EQ(after.version, before.version);
  EXPECT_EQ(after.memory.total_bytes, before.memory.total_bytes);
  EXPECT_EQ(after.memory.arena_live_bytes, before.memory.arena_live_bytes);
  EXPECT_EQ(after.stats.rehashes_started, before.stats.rehashes_started);
  EXPECT_EQ(after.stats.rehash_steps, before.stats.rehash_steps);
  EXPECT_EQ(after.stats.rehash_step_failures,
            before.stats.rehash_step_failures);
  EXPECT_EQ(after.stats.chain_compactions, before.stats.chain_compactions);
  StableScanCursor cursor = before.cursor;  // still valid: nothing mutated
  EXPECT_EQ(map.ScanStable(cursor, [](const Map::Entry&) {}), Outcome::kOk);
}

// Entry addresses in scan order: shows any slot that moved.
std::vector<std::uintptr_t> ScanOrder(const Map& map) {
  std::vector<std::uintptr_t> order;
  std::uint64_t cursor = 0;
  do {
    cursor = map.Scan(
        cursor, [&](const Map::Entry& e) { order.push_back(e.address()); });
  } while (cursor != 0);
  return order;
}

// X8: prefetch helpers are pure. Each hint leaves every observable of the
// map as it was (rehash position, mutation count, stats, memory, slot
// order), and a map given hints behaves exactly like one given none.
TEST(ScanHashMapTest, X8PrefetchHelpersArePure) {
  Map plain(Options(/*max_exponent=*/6));  // capped: chains that compact
  Map hinted(Options(/*max_exponent=*/6));
  std::mt19937_64 rng(8);
  for (int op = 0; op < 20000; ++op) {
    const std::string key = Key(rng() % 3000);
    const std::uint64_t h = hinted.HashOf(key);
    {
      const Observables before(hinted);
      const std::vector<std::uintptr_t> order =
          op % 500 == 0 ? ScanOrder(hinted) : std::vector<std::uintptr_t>{};
      hinted.PrefetchMetadata();
      hinted.PrefetchBucket(h);
      hinted.PrefetchBucket(hinted.HashOf(Key(rng() % 3000)));
      ASSERT_NO_FATAL_FAILURE(ExpectSameObservables(hinted, before));
      if (op % 500 == 0) {
        ASSERT_EQ(ScanOrder(hinted), order);
      }
      if (::testing::Test::HasFailure()) return;
    }
    const int kind = static_cast<int>(rng() % 4);
    if (kind == 0 || kind == 1) {
      const auto a = plain.Upsert(key, Loc{std::uint64_t(op)});
      hinted.PrefetchBucket(h);
      const auto b = hinted.Upsert(key, Loc{std::uint64_t(op)});
      ASSERT_EQ(a.outcome, b.outcome);
    } else if (kind == 2) {
      ASSERT_EQ(plain.Erase(key), hinted.Erase(key));
    } else {
      const Map::Entry* a = plain.Find(key);
      const Map::Entry* b = hinted.Find(key);
      ASSERT_EQ(a == nullptr, b == nullptr);
      if (a != nullptr) {
        ASSERT_EQ(a->value(), b->value());
      }
    }
    ASSERT_EQ(Peer::IsRehashing(plain), Peer::IsRehashing(hinted));
    ASSERT_EQ(Peer::RehashIndex(plain), Peer::RehashIndex(hinted));
    ASSERT_EQ(Peer::Version(plain), Peer::Version(hinted));
  }
  EXPECT_GT(hinted.stats().chain_compactions, 0u);
  EXPECT_GT(hinted.stats().rehash_steps, 0u);
  EXPECT_EQ(Contents(plain), Contents(hinted));
  EXPECT_EQ(plain.stats().rehash_steps, hinted.stats().rehash_steps);
  EXPECT_EQ(plain.stats().chain_compactions, hinted.stats().chain_compactions);
  EXPECT_EQ(plain.Memory().total_bytes, hinted.Memory().total_bytes);
  EXPECT_EQ(plain.exponent(), hinted.exponent());
  // FindBatch (which prefetches internally) agrees with Find, hits and misses.
  std::vector<std::string> keys;
  for (int i = 0; i < 5000; ++i) keys.push_back(Key(i));
  std::vector<std::string_view> views(keys.begin(), keys.end());
  std::vector<const Map::Entry*> out(views.size());
  const Observables before(hinted);
  hinted.FindBatch(views, out);
  ExpectSameObservables(hinted, before);
  for (std::size_t i = 0; i < views.size(); ++i)
    EXPECT_EQ(out[i], hinted.Find(views[i]));
}

// X9: after PreallocateForExpectedSize(n), inserting n entries triggers no
// rehash.
TEST(ScanHashMapTest, X9PreallocateAvoidsRehash) {
  for (std::size_t n : {1u, 9u, 10u, 100u, 1000u, 4609u, 20000u}) {
    Map map(Options());
    ASSERT_EQ(map.PreallocateForExpectedSize(n), Outcome::kOk);
    const std::uint64_t started = map.stats().rehashes_started;
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_TRUE(map.Insert(Key(i), Loc{i}).ok());
    EXPECT_EQ(map.stats().rehashes_started, started) << n;
    EXPECT_EQ(map.stats().rehash_steps, 0u) << n;
    EXPECT_FALSE(Peer::IsRehashing(map));
  }
  // On a populated map: n counts the final size.
  Map map(Options());
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(map.Insert(Key(i), Loc{0}).ok());
  ASSERT_EQ(map.PreallocateForExpectedSize(10000), Outcome::kOk);
  EXPECT_FALSE(Peer::IsRehashing(map));
  const std::uint64_t started = map.stats().rehashes_started;
  for (int i = 500; i < 10000; ++i)
    ASSERT_TRUE(map.Insert(Key(i), Loc{0}).ok());
  EXPECT_EQ(map.stats().rehashes_started, started);
  EXPECT_EQ(map.size(), 10000u);
}

TEST(ScanHashMapTest, AddressReuseNeverMatchesTheOldKey) {
  Map map(Options(/*max_exponent=*/0));
  ASSERT_TRUE(map.Insert(Key(1), Loc{1}).ok());
  const std::uintptr_t old_address = map.Find(Key(1))->address();
  const std::uint64_t old_hash = map.HashOf(Key(1));
  ASSERT_EQ(map.Erase(Key(1)), Outcome::kOk);
  auto inserted =
      map.Insert(Key(2), Loc{2});  // same size class: reuses the block
  ASSERT_TRUE(inserted.ok());
  EXPECT_EQ(inserted.entry->address(), old_address);
  const std::uint64_t new_hash = map.HashOf(Key(2));
  EXPECT_EQ(
      map.FindAddress(old_address, Map::Hash32(new_hash), Map::TagOf(new_hash)),
      inserted.entry);
  // The old receipt names the same address; if it matches at all it is the
  // new key's entry, never the erased key.
  const Map::Entry* e =
      map.FindAddress(old_address, Map::Hash32(old_hash), Map::TagOf(old_hash));
  if (Map::TagOf(old_hash) != Map::TagOf(new_hash)) {
    EXPECT_EQ(e, nullptr);
  } else {
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->key(), Key(2));
  }
  EXPECT_EQ(map.Find(Key(1)), nullptr);
}

TEST(ScanHashMapTest, DetachEmptiesMapAndAdvancesGeneration) {
  FailingAllocator allocator;
  {
    Map map(Options(32, &allocator));
    for (int i = 0; i < 1000; ++i)
      ASSERT_TRUE(map.Insert(Key(i), Loc{std::uint64_t(i)}).ok());
    const Map::Entry* e = map.Find(Key(5));
    const std::uintptr_t address = e->address();
    const std::uint64_t h = map.HashOf(Key(5));
    StableScanCursor cursor = map.StableScanBegin();
    ScanHashMapPopulation population = map.Detach();
    EXPECT_EQ(map.generation(), 1u);
    EXPECT_EQ(map.size(), 0u);
    EXPECT_EQ(population.size(), 1000u);
    EXPECT_GT(population.memory_bytes(), 0u);
    EXPECT_EQ(e->key(), Key(5));  // still owned by the population
    EXPECT_EQ(map.Find(Key(5)), nullptr);
    EXPECT_EQ(map.FindAddress(address, Map::Hash32(h), Map::TagOf(h)), nullptr);
    EXPECT_EQ(map.ScanStable(cursor, [](const Map::Entry&) {}),
              Outcome::kFailedPrecondition);
    EXPECT_EQ(map.Scan(12345, [](const Map::Entry&) { ADD_FAILURE(); }), 0u);
    ASSERT_TRUE(map.Insert(Key(5), Loc{7}).ok());
    EXPECT_EQ(map.Find(Key(5))->value().offset, 7u);
  }
  EXPECT_EQ(allocator.live_bytes(), 0);
}

TEST(ScanHashMapTest, MemoryAccountingMatchesAllocator) {
  FailingAllocator allocator;
  {
    Map map(Options(32, &allocator));
    for (int i = 0; i < 50000; ++i) {
      ASSERT_TRUE(map.Insert(Key(i, i % 2 ? 16 : 64), Loc{0}).ok());
      if (i % 997 == 0) {
        EXPECT_EQ(static_cast<long long>(map.Memory().total_bytes),
                  allocator.live_bytes());
      }
    }
    const ScanHashMapMemory m = map.Memory();
    EXPECT_EQ(static_cast<long long>(m.total_bytes), allocator.live_bytes());
    EXPECT_EQ(m.arena_slack_bytes, m.arena_bytes - m.arena_live_bytes);
    EXPECT_EQ(m.arena_live_bytes, 25000u * 32 + 25000u * 80);
    EXPECT_GT(m.bucket_bytes, 0u);
  }
  EXPECT_EQ(allocator.live_bytes(), 0);
}

TEST(ScanHashMapTest, BadInputIsRejectedWithoutChange) {
  ScanHashMapOptions options = Options();
  options.max_key_bytes = 100;
  Map map(options);
  ASSERT_TRUE(map.Insert("a", Loc{1}).ok());
  EXPECT_EQ(map.Insert("", Loc{1}).outcome, Outcome::kInvalidArgument);
  EXPECT_EQ(map.Insert(std::string(101, 'x'), Loc{1}).outcome,
            Outcome::kInvalidArgument);
  EXPECT_EQ(map.Upsert(std::string(101, 'x'), Loc{1}).outcome,
            Outcome::kInvalidArgument);
  EXPECT_TRUE(map.Insert(std::string(100, 'x'), Loc{1}).ok());
  EXPECT_EQ(map.Insert("a", Loc{2}).outcome, Outcome::kAlreadyExists);
  EXPECT_EQ(map.Find("a")->value().offset, 1u);
  EXPECT_EQ(map.Erase("b"), Outcome::kNotFound);
  EXPECT_EQ(map.ReplaceValue("b", Loc{3}), Outcome::kNotFound);
  EXPECT_EQ(map.ReplaceValue("a", Loc{3}), Outcome::kOk);
  EXPECT_EQ(map.Find("a")->value().offset, 3u);
  EXPECT_EQ(map.size(), 2u);
  ScanHashMapOptions big = Options();
  big.max_key_bytes = 1'000'000;  // clamped to 65535
  Map wide(big);
  EXPECT_EQ(wide.max_key_bytes(), 65535u);
  EXPECT_EQ(wide.Insert(std::string(65536, 'y'), Loc{1}).outcome,
            Outcome::kInvalidArgument);
  EXPECT_EQ(wide.size(), 0u);
}

// Keys too long for an arena block live out of line and behave as any
// other key (lavik stores long keys the same way): found, replaced,
// erased, scanned, sampled, detached, and their memory given back.
TEST(ScanHashMapTest, KeysLongerThanAnArenaBlockAreStoredOutOfLine) {
  FailingAllocator allocator;  // never told to fail: counts live bytes
  {
    ScanHashMapOptions options = Options();
    options.max_key_bytes = 65535;
    options.allocator = &allocator;
    Map map(options);
    // Around the inline limit, far past it, and the largest key; long keys
    // sharing a prefix with each other and with short ones.
    std::vector<std::string> keys;
    for (std::size_t size :
         {Map::kMaxEntryBytes - 16, Map::kMaxEntryBytes,
          Map::kMaxEntryBytes + 1, std::size_t{20000}, std::size_t{65535}}) {
      keys.push_back(std::string(size, 'k'));
      keys.push_back(std::string(size - 1, 'k') + 'z');
    }
    keys.push_back("k");
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const Map::InsertResult r = map.Insert(keys[i], Loc{i});
      ASSERT_TRUE(r.ok()) << keys[i].size();
      EXPECT_EQ(r.entry->key(), keys[i]);
    }
    EXPECT_GT(map.Memory().long_key_bytes, std::size_t{2} * (65535 + 20000));
    EXPECT_EQ(map.Memory().total_bytes,
              static_cast<std::size_t>(allocator.live_bytes()));
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const Map::Entry* e = map.Find(keys[i]);
      ASSERT_NE(e, nullptr) << keys[i].size();
      EXPECT_EQ(e->key(), keys[i]);
      EXPECT_EQ(e->value().offset, i);
      EXPECT_EQ(map.Insert(keys[i], Loc{0}).outcome, Outcome::kAlreadyExists);
    }
    EXPECT_EQ(map.Find(std::string(30000, 'k')), nullptr);
    EXPECT_EQ(map.ReplaceValue(keys[7], Loc{70}), Outcome::kOk);
    EXPECT_EQ(map.Upsert(keys[8], Loc{80}).entry->value().offset, 80u);
    // Batched lookups (which prefetch by entry size) find them too.
    std::vector<std::string_view> views(keys.begin(), keys.end());
    std::vector<const Map::Entry*> batch(keys.size());
    map.FindBatch(views, batch);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      ASSERT_NE(batch[i], nullptr);
      EXPECT_EQ(batch[i]->key(), keys[i]);
    }
    std::set<std::string> scanned;
    EXPECT_FALSE(map.ForEachUntil([&](const Map::Entry& e) {
      scanned.insert(std::string(e.key()));
      return ScanControl::kContinue;
    }));
    EXPECT_EQ(scanned, std::set<std::string>(keys.begin(), keys.end()));
    std::mt19937_64 rng(7);
    EXPECT_EQ(map.SampleRandom(rng, 64,
                               [&](const Map::Entry& e) {
                                 EXPECT_EQ(scanned.count(std::string(e.key())),
                                           1u);
                               }),
              64u);
    // Erasing a long key gives its allocation back; a new one can take the
    // same key again.
    const std::size_t with_all = map.Memory().long_key_bytes;
    EXPECT_EQ(map.Erase(keys[6]), Outcome::kOk);
    EXPECT_EQ(map.Find(keys[6]), nullptr);
    EXPECT_LT(map.Memory().long_key_bytes, with_all);
    EXPECT_EQ(map.Memory().total_bytes,
              static_cast<std::size_t>(allocator.live_bytes()));
    ASSERT_TRUE(map.Insert(keys[6], Loc{6}).ok());
    EXPECT_EQ(map.Memory().long_key_bytes, with_all);
    // A detached population keeps its long keys until it is destroyed.
    {
      ScanHashMapPopulation old = map.Detach();
      EXPECT_EQ(map.size(), 0u);
      EXPECT_EQ(map.Memory().long_key_bytes, 0u);
      EXPECT_GE(old.memory_bytes(), with_all);
      ASSERT_TRUE(map.Insert(keys[9], Loc{9}).ok());
    }
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (i != 9) {
        EXPECT_EQ(map.Find(keys[i]), nullptr);
      }
    }
    EXPECT_EQ(map.Find(keys[9])->key(), keys[9]);
  }
  EXPECT_EQ(allocator.live_bytes(), 0) << "every long key freed";
}

TEST(ScanHashMapTest, ForeignAndStaleCursorsAreSafe) {
  Map a(Options());
  Map b(Options());
  for (int i = 0; i < 3000; ++i) ASSERT_TRUE(a.Insert(Key(i), Loc{0}).ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(b.Insert(Key(i), Loc{0}).ok());
  // A Scan cursor from a bigger map just continues over b and terminates.
  std::uint64_t cursor = a.Scan(0, [](const Map::Entry&) {});
  for (int i = 0; i < 5; ++i) cursor = a.Scan(cursor, [](const Map::Entry&) {});
  int calls = 0;
  std::set<std::string> seen;
  while (cursor != 0 && calls < 1000) {
    cursor = b.Scan(cursor, [&](const Map::Entry& e) {
      seen.insert(std::string(e.key()));
    });
    ++calls;
  }
  EXPECT_EQ(cursor, 0u);
  EXPECT_LE(seen.size(), 10u);
  // A stable cursor from another map, or one outliving a mutation, is refused.
  StableScanCursor foreign = a.StableScanBegin();
  EXPECT_EQ(b.ScanStable(foreign, [](const Map::Entry&) { ADD_FAILURE(); }),
            Outcome::kFailedPrecondition);
  StableScanCursor mine = b.StableScanBegin();
  ASSERT_TRUE(b.Insert("new", Loc{0}).ok());
  EXPECT_EQ(b.ScanStable(mine, [](const Map::Entry&) { ADD_FAILURE(); }),
            Outcome::kFailedPrecondition);
}

// Const calls from several threads on a map no one mutates (run under TSan).
TEST(ScanHashMapTest, ConcurrentConstReadersOnFrozenMap) {
  Map map(Options());
  for (int i = 0; i < 20000; ++i)
    ASSERT_TRUE(map.Insert(Key(i), Loc{std::uint64_t(i)}).ok());
  while (map.stats().rehash_steps == 0 || !Peer::IsRehashing(map)) {
    // Stop mid-rehash so readers exercise both tables.
    ASSERT_TRUE(map.Insert(Key(map.size() + 100000), Loc{0}).ok());
    if (map.size() > 200000) break;
  }
  std::vector<std::thread> threads;
  std::vector<int> misses(3, 0);
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        const Map::Entry* e = map.Find(Key(i));
        if (e == nullptr || e->value().offset != std::uint64_t(i)) ++misses[t];
        const std::uint64_t h = map.HashOf(Key(i));
        if (e != nullptr &&
            map.FindAddress(e->address(), Map::Hash32(h), Map::TagOf(h)) != e)
          ++misses[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 3; ++t) EXPECT_EQ(misses[t], 0);
}

}  // namespace
}  // namespace cairn::index_test
