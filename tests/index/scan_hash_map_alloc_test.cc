// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ScanHashMap and memory: an allocation failure on any path returns
// kResourceExhausted and changes nothing; lookups, error outcomes and the
// other calls documented as not allocating make no heap allocation.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/index/scan_hash_map.h"
#include "index/test_util.h"
#include "testing/alloc_counter.h"

namespace cairn::index_test {
namespace {

using Model = std::map<std::string, std::uint64_t>;

ScanHashMapOptions Options(int max_exponent, IndexAllocator* allocator) {
  ScanHashMapOptions options;
  options.seed = 0xa11c;
  options.max_exponent = max_exponent;
  options.max_key_bytes = 65535;
  options.allocator = allocator;
  return options;
}

// Everything a failed call must leave as it was, cheap enough to take
// before every call. Contents and addresses are checked against the model.
struct State {
  std::size_t size;
  int exponent;
  bool rehashing;
  std::uint64_t rehash_index;
  std::size_t chain_buckets;
  std::uint64_t version;
  ScanHashMapMemory memory;
  ScanHashMapStats stats;
  long long allocator_live_bytes;
  StableScanCursor cursor;
};

State Capture(const Map& map, const FailingAllocator& allocator) {
  return {map.size(),
          map.exponent(),
          Peer::IsRehashing(map),
          Peer::RehashIndex(map),
          Peer::ChainBuckets(map),
          Peer::Version(map),
          map.Memory(),
          map.stats(),
          allocator.live_bytes(),
          map.StableScanBegin()};
}

// The entries of the map, with addresses, by exact scan.
std::map<std::string, std::pair<std::uint64_t, std::uintptr_t>> Contents(
    const Map& map) {
  std::map<std::string, std::pair<std::uint64_t, std::uintptr_t>> out;
  StableScanCursor cursor = map.StableScanBegin();
  while (!cursor.done) {
    const Outcome o = map.ScanStable(
        cursor,
        [&](const Map::Entry& e) {
          out[std::string(e.key())] = {e.value().offset, e.address()};
        },
        256);
    if (o != Outcome::kOk) {
      ADD_FAILURE() << o;
      break;
    }
  }
  return out;
}

void ExpectUnchanged(const Map& map, const FailingAllocator& allocator,
                     const State& before, const Model& model,
                     const std::map<std::string, std::uintptr_t>& addresses) {
  const State after = Capture(map, allocator);
  EXPECT_EQ(after.size, before.size);
  EXPECT_EQ(after.exponent, before.exponent);
  EXPECT_EQ(after.rehashing, before.rehashing);
  EXPECT_EQ(after.rehash_index, before.rehash_index);
  EXPECT_EQ(after.chain_buckets, before.chain_buckets);
  EXPECT_EQ(after.version, before.version);
  EXPECT_EQ(after.memory.bucket_bytes, before.memory.bucket_bytes);
  EXPECT_EQ(after.memory.chain_bytes, before.memory.chain_bytes);
  EXPECT_EQ(after.memory.arena_bytes, before.memory.arena_bytes);
  EXPECT_EQ(after.memory.arena_live_bytes, before.memory.arena_live_bytes);
  EXPECT_EQ(after.memory.long_key_bytes, before.memory.long_key_bytes);
  EXPECT_EQ(after.memory.total_bytes, before.memory.total_bytes);
  EXPECT_EQ(after.allocator_live_bytes, before.allocator_live_bytes);
  EXPECT_EQ(after.stats.rehashes_started, before.stats.rehashes_started);
  EXPECT_EQ(after.stats.rehash_steps, before.stats.rehash_steps);
  EXPECT_EQ(after.stats.chain_compactions, before.stats.chain_compactions);
  // A stable scan begun before the call is still valid after it.
  StableScanCursor cursor = before.cursor;
  EXPECT_EQ(map.ScanStable(cursor, [](const Map::Entry&) {}), Outcome::kOk);
  // Same entries, same values, same addresses; each found every way.
  const auto contents = Contents(map);
  ASSERT_EQ(contents.size(), model.size());
  for (const auto& [key, value] : model) {
    auto it = contents.find(key);
    ASSERT_NE(it, contents.end()) << key;
    EXPECT_EQ(it->second.first, value) << key;
    EXPECT_EQ(it->second.second, addresses.at(key)) << key;
    const Map::Entry* e = map.Find(key);
    ASSERT_NE(e, nullptr) << key;
    EXPECT_EQ(e->address(), addresses.at(key));
    const std::uint64_t h = map.HashOf(key);
    EXPECT_EQ(map.FindAddress(e->address(), Map::Hash32(h), Map::TagOf(h)), e);
    EXPECT_EQ(map.FindAddress(e->address(), Map::Hash32(h)), e);
  }
}

// Drives one map and its model; every call goes through Attempt, which
// makes the k-th allocation of the call fail, for k = 0, 1, ... until the
// call succeeds, and checks that each failed attempt changed nothing.
class Harness {
 public:
  explicit Harness(int max_exponent)
      : map_(Options(max_exponent, &allocator_)) {}

  Map& map() { return map_; }
  FailingAllocator& allocator() { return allocator_; }
  const Model& model() const { return model_; }
  // Failed attempts so far (allocations that the map saw fail).
  int failed_attempts() const { return failed_attempts_; }
  int failed_while_rehashing() const { return failed_while_rehashing_; }

  // Runs `op` (returning an Outcome) until it succeeds; returns the number
  // of failed attempts. An attempt that fails must fail with
  // kResourceExhausted and leave the map unchanged.
  template <typename Op>
  int Attempt(Op op) {
    for (long k = 0;; ++k) {
      const State before = Capture(map_, allocator_);
      const long failures = allocator_.failures();
      allocator_.FailAfter(k);
      const Outcome outcome = op();
      const bool injected = allocator_.failures() > failures;
      allocator_.Heal();
      if (outcome == Outcome::kOk) {
        // The failure, if it hit at all, hit the call's side work (a grow
        // or a rehash step), which is deferred: do it now.
        if (injected) {
          EXPECT_EQ(map_.Maintain(1), Outcome::kOk);
        }
        return static_cast<int>(k);
      }
      EXPECT_EQ(outcome, Outcome::kResourceExhausted);
      EXPECT_TRUE(injected) << "failed without an allocation failure";
      ++failed_attempts_;
      if (before.rehashing) ++failed_while_rehashing_;
      ExpectUnchanged(map_, allocator_, before, model_, addresses_);
      if (::testing::Test::HasFatalFailure() || k > 64) {
        ADD_FAILURE() << "giving up after attempt " << k;
        return -1;
      }
    }
  }

  void Insert(const std::string& key, std::uint64_t value, bool upsert) {
    Map::Entry* entry = nullptr;
    Attempt([&] {
      const Map::InsertResult r =
          upsert ? map_.Upsert(key, Loc{value}) : map_.Insert(key, Loc{value});
      if (!r.ok()) {
        EXPECT_EQ(r.entry, nullptr);
      }
      entry = r.entry;
      return r.outcome;
    });
    ASSERT_NE(entry, nullptr);
    ASSERT_EQ(entry->key(), key);
    model_[key] = value;
    addresses_[key] = entry->address();
  }

  // Adds an entry inserted outside Attempt to the model.
  void Record(const std::string& key, std::uint64_t value,
              const Map::Entry* entry) {
    ASSERT_NE(entry, nullptr);
    model_[key] = value;
    addresses_[key] = entry->address();
  }

  // Every entry of the model is found at its recorded address.
  void Refresh() {
    for (const auto& [key, value] : model_) {
      ASSERT_EQ(map_.Find(key)->address(), addresses_[key]) << key;
    }
  }

 private:
  FailingAllocator allocator_;
  Map map_;
  Model model_;
  std::map<std::string, std::uintptr_t> addresses_;
  int failed_attempts_ = 0;
  int failed_while_rehashing_ = 0;
};

// Keys whose low `bits` hash bits are zero: they share one chain in every
// table up to 2^bits buckets.
std::vector<std::string> CollidingKeys(const Map& map, std::size_t count,
                                       int bits) {
  std::vector<std::string> keys;
  const std::uint32_t mask = (1u << bits) - 1;
  for (std::uint64_t i = 0; keys.size() < count; ++i) {
    std::string key = Key(i);
    if ((Map::Hash32(map.HashOf(key)) & mask) == 0) {
      keys.push_back(std::move(key));
    }
  }
  return keys;
}

// Insert and Upsert of new keys, with every allocation of every call failed
// in turn: the first table, arena slabs one by one and in 2 MiB groups, the
// arena's directory as it grows, overflow buckets and the pool's directory.
TEST(ScanHashMapAllocTest, InsertAllocationFailuresChangeNothing) {
  struct Case {
    int max_exponent;
    int count;
    std::size_t (*width)(int);
  };
  const Case cases[] = {
      // Growing map, mostly 4000-byte keys: 17+ slabs (small, grouped,
      // directory growth).
      {32, 1800, [](int i) -> std::size_t { return i % 3 == 0 ? 16 : 4000; }},
      // Sixteen long chains: the overflow pool grows past its first
      // directory.
      {4, 28000, [](int i) -> std::size_t { return 8 + (i % 4) * 8; }},
      // Keys stored out of line (over the arena's largest block) among
      // short ones: the key's own allocation fails first, then the rest.
      {32, 600,
       [](int i) -> std::size_t {
         return i % 3 == 0 ? 5000 + static_cast<std::size_t>(i) * 97 : 16;
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.max_exponent);
    Harness h(c.max_exponent);
    for (int i = 0; i < c.count; ++i) {
      ASSERT_NO_FATAL_FAILURE(h.Insert(Key(i, c.width(i)),
                                       static_cast<std::uint64_t>(i),
                                       /*upsert=*/i % 2 == 1));
    }
    EXPECT_GT(h.failed_attempts(), 12);
    EXPECT_EQ(h.map().size(), static_cast<std::size_t>(c.count));
    EXPECT_EQ(static_cast<long long>(h.map().Memory().total_bytes),
              h.allocator().live_bytes());
    if (c.count == 600) {
      EXPECT_GT(h.map().Memory().long_key_bytes, std::size_t{200} * 5000);
    } else if (c.max_exponent == 32) {
      EXPECT_GT(h.map().Memory().arena_bytes, std::size_t{4} << 20);
    } else {
      EXPECT_GT(h.map().Memory().chain_bytes, std::size_t{4} * 32768);
    }
  }
}

// Inserts during a grow go to the new table, and arena slabs run out while
// both tables are live: each failed insert still changes nothing.
TEST(ScanHashMapAllocTest, InsertDuringRehashChangesNothingOnFailure) {
  Harness h(32);
  for (std::uint64_t i = 0;
       !Peer::IsRehashing(h.map()) || h.map().exponent() < 10; ++i) {
    const Map::InsertResult r = h.map().Insert(Key(i), Loc{i});
    ASSERT_TRUE(r.ok());
    h.Record(Key(i), i, r.entry);
  }
  for (std::uint64_t i = 0; i < 300; ++i) {
    ASSERT_NO_FATAL_FAILURE(h.Insert(Key(i, 4000), i, /*upsert=*/i % 2 == 0));
  }
  EXPECT_GE(h.failed_while_rehashing(), 3);
}

// One insert that needs both a new slab group and a new overflow chunk:
// when the chunk fails, the slab memory already in hand is given back.
TEST(ScanHashMapAllocTest, InsertNeedingSlabAndChunkGivesBackTheSlab) {
  Harness h(
      /*max_exponent=*/0);  // one chain: chunk 1 at entry 12 + 511 * 12 + 1
  // One 32-byte entry, then 4096-byte ones: slab 0 holds 63 of them, every
  // later slab 64, so entry 64k + 1 opens a slab; slab 96 starts a group.
  const std::size_t kEntries = 12 + 511 * 12;
  for (std::uint64_t i = 0; i < kEntries; ++i) {
    const std::string key = Key(i, i == 0 ? 16 : 4086);
    const Map::InsertResult r = h.map().Insert(key, Loc{i});
    ASSERT_TRUE(r.ok());
    h.Record(key, i, r.entry);
  }
  const std::size_t arena = h.map().Memory().arena_bytes;
  const std::size_t chains = h.map().Memory().chain_bytes;
  EXPECT_EQ(h.Attempt([&] {
    return h.map().Insert(Key(kEntries, 4086), Loc{0}).outcome;
  }),
            2)
      << "slab group, then overflow chunk";
  EXPECT_GT(h.map().Memory().arena_bytes, arena);
  EXPECT_GT(h.map().Memory().chain_bytes, chains);
}

// A grow the insert triggers but cannot allocate: the insert succeeds, the
// grow is counted and deferred, nothing else changes. Maintain reports
// kResourceExhausted for it (changing nothing) and starts it once memory is
// back.
TEST(ScanHashMapAllocTest, FailedGrowIsDeferredAndMaintainReportsIt) {
  Harness h(32);
  for (int i = 0; i < 9; ++i) {
    ASSERT_NO_FATAL_FAILURE(h.Insert(Key(i), i, /*upsert=*/false));
  }
  ASSERT_EQ(h.map().exponent(), 0);
  const ScanHashMapMemory before = h.map().Memory();
  const long long live = h.allocator().live_bytes();
  h.allocator().FailAfter(0);  // the 10th entry fits; its grow does not
  const Map::InsertResult r = h.map().Insert(Key(9), Loc{9});
  h.allocator().Heal();
  ASSERT_TRUE(r.ok());
  h.Record(Key(9), 9, r.entry);
  EXPECT_EQ(h.map().size(), 10u);
  EXPECT_EQ(h.map().exponent(), 0);
  EXPECT_FALSE(Peer::IsRehashing(h.map()));
  EXPECT_EQ(h.map().stats().rehashes_started, 0u);
  EXPECT_EQ(h.map().stats().rehash_step_failures, 1u);
  EXPECT_EQ(h.map().Memory().bucket_bytes, before.bucket_bytes);
  EXPECT_EQ(h.map().Memory().arena_bytes, before.arena_bytes);
  EXPECT_EQ(h.allocator().live_bytes(), live);
  // Maintain(0) only starts the resize: its table is the one allocation.
  EXPECT_EQ(h.Attempt([&] { return h.map().Maintain(0); }), 1);
  EXPECT_EQ(h.map().exponent(), 1);
  EXPECT_EQ(h.map().stats().rehashes_started, 1u);
  EXPECT_EQ(h.Attempt([&] { return h.map().Maintain(); }), 0);
  EXPECT_FALSE(Peer::IsRehashing(h.map()));
  h.Refresh();
}

// Rehash steps whose destination chains need new overflow buckets: each
// failed step changes nothing, including the memory held.
TEST(ScanHashMapAllocTest, RehashStepAllocationFailuresChangeNothing) {
  Harness h(32);
  // 9 * 512 + 1 keys in two chains of ~190 buckets: the grow to exponent 10
  // must split each chain into fresh overflow buckets.
  const auto keys = CollidingKeys(h.map(), 9 * 512 + 1, 8);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const Map::InsertResult r = h.map().Insert(keys[i], Loc{i});
    ASSERT_TRUE(r.ok()) << keys[i];
    h.Record(keys[i], i, r.entry);
  }
  ASSERT_TRUE(Peer::IsRehashing(h.map()));
  const int before = h.failed_attempts();
  while (Peer::IsRehashing(h.map())) {
    ASSERT_GE(h.Attempt([&] { return h.map().Maintain(1); }), 0);
  }
  EXPECT_GT(h.failed_attempts() - before, 0)
      << "no rehash step needed to allocate";
  h.Refresh();
}

// PreallocateForExpectedSize on an empty map, a populated one with long
// chains (the new table and the overflow buckets of its chains) and one in
// the middle of a grow.
TEST(ScanHashMapAllocTest, PreallocateAllocationFailuresChangeNothing) {
  {
    Harness h(32);
    EXPECT_EQ(
        h.Attempt([&] { return h.map().PreallocateForExpectedSize(100000); }),
        1);
    EXPECT_EQ(h.map().exponent(), 14);
  }
  for (bool mid_rehash : {false, true}) {
    SCOPED_TRACE(mid_rehash);
    Harness h(32);
    // Long chains (low 9 hash bits zero), grown to exponent 10 and filled
    // to just below the next grow: the new chains need more overflow
    // buckets than the pool has free.
    const auto keys = CollidingKeys(h.map(), 9300, 9);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (i == 9000 && (!mid_rehash || Peer::IsRehashing(h.map()))) break;
      ASSERT_NO_FATAL_FAILURE(h.Insert(keys[i], i, /*upsert=*/false));
      if (i < 9000 || !mid_rehash) {
        while (Peer::IsRehashing(h.map())) {
          ASSERT_EQ(h.map().Maintain(), Outcome::kOk);
        }
      } else if (Peer::IsRehashing(h.map())) {
        break;
      }
    }
    ASSERT_EQ(Peer::IsRehashing(h.map()), mid_rehash);
    ASSERT_GT(Peer::ChainBuckets(h.map()), 100u);
    const int failures =
        h.Attempt([&] { return h.map().PreallocateForExpectedSize(9 << 12); });
    EXPECT_GE(failures, mid_rehash ? 1 : 2)
        << "the table, then overflow buckets";
    EXPECT_FALSE(Peer::IsRehashing(h.map()));
    EXPECT_EQ(h.map().exponent(), 12);
    h.Refresh();
    // And it holds what it promised: no rehash up to the expected size.
    const std::uint64_t started = h.map().stats().rehashes_started;
    for (std::uint64_t i = 0; h.map().size() < (9u << 12); ++i) {
      ASSERT_TRUE(h.map().Insert(Key(100'000'000 + i), Loc{i}).ok());
    }
    EXPECT_EQ(h.map().stats().rehashes_started, started);
    EXPECT_EQ(static_cast<long long>(h.map().Memory().total_bytes),
              h.allocator().live_bytes());
  }
}

// The pool's reservation and the arena's growth are all or nothing on
// their own: a failure at any of their allocations leaves them as they
// were, however many allocations the request needed.
TEST(ScanHashMapAllocTest, PoolAndArenaAcquisitionsAreAllOrNothing) {
  FailingAllocator allocator;
  {
    index_internal::BucketPool pool(&allocator);
    ASSERT_TRUE(pool.Reserve(10));
    const std::uint32_t held = pool.Acquire();
    ASSERT_NE(held, 0u);
    // 5000 buckets: nine chunks and a directory of 16.
    for (long k = 0;; ++k) {
      const std::size_t reserved = pool.reserved_bytes();
      const long long live = allocator.live_bytes();
      allocator.FailAfter(k);
      const bool ok = pool.Reserve(5000);
      allocator.Heal();
      if (ok) {
        EXPECT_EQ(k, 10);
        break;
      }
      EXPECT_EQ(pool.reserved_bytes(), reserved);
      EXPECT_EQ(allocator.live_bytes(), live);
      EXPECT_EQ(pool.used_count(), 1u);
      ASSERT_LT(k, 64);
    }
    EXPECT_EQ(static_cast<long long>(pool.reserved_bytes()),
              allocator.live_bytes());
    // Every reserved bucket is there without another allocation.
    const long calls = allocator.calls();
    for (int i = 0; i < 5000; ++i) ASSERT_NE(pool.Acquire(), 0u);
    EXPECT_EQ(allocator.calls(), calls);
  }
  {
    index_internal::EntryArena arena(&allocator);
    const std::size_t bytes = 4000;
    int failed = 0;
    // 600 blocks of 4000 bytes: 10 slabs, the first group, a directory.
    for (int i = 0; i < 600; ++i) {
      for (long k = 0;; ++k) {
        const std::size_t reserved = arena.reserved_bytes();
        const long long live = allocator.live_bytes();
        index_internal::EntryArena::Growth growth;
        allocator.FailAfter(k);
        const bool ok = arena.Prepare(bytes, growth);
        allocator.Heal();
        if (ok) {
          arena.Commit(growth);
          ASSERT_NE(arena.Allocate(bytes), 0u);
          break;
        }
        ++failed;
        EXPECT_EQ(arena.reserved_bytes(), reserved);
        EXPECT_EQ(allocator.live_bytes(), live);
        ASSERT_LT(k, 8);
      }
    }
    EXPECT_GE(failed, 10);
    EXPECT_EQ(static_cast<long long>(arena.reserved_bytes()),
              allocator.live_bytes());
    // A prepared growth that is abandoned gives its memory back.
    index_internal::EntryArena::Growth growth;
    std::size_t reserved = arena.reserved_bytes();
    while (true) {
      ASSERT_TRUE(arena.Prepare(bytes, growth));
      if (growth.slabs != nullptr) break;
      arena.Commit(growth);
      ASSERT_NE(arena.Allocate(bytes), 0u);
      reserved = arena.reserved_bytes();
    }
    arena.Abandon(growth);
    EXPECT_EQ(arena.reserved_bytes(), reserved);
    EXPECT_EQ(static_cast<long long>(reserved), allocator.live_bytes());
  }
  EXPECT_EQ(allocator.live_bytes(), 0);
}

// --- No heap allocation where the header promises none --------------------

// A map in the middle of a grow, so lookups search both tables.
void Populate(Map& map, std::vector<std::string>& keys) {
  for (std::uint64_t i = 0;
       !Peer::IsRehashing(map) || Peer::RehashIndex(map) < 40; ++i) {
    keys.push_back(Key(i, 8 + (i % 3) * 24));
    ASSERT_TRUE(map.Insert(keys.back(), Loc{i}).ok());
  }
}

TEST(ScanHashMapAllocTest, LookupsDoNotAllocate) {
  FailingAllocator allocator;  // passes every call through, and counts it
  Map map(Options(32, &allocator));
  std::vector<std::string> keys;
  ASSERT_NO_FATAL_FAILURE(Populate(map, keys));
  std::vector<std::string_view> views(keys.begin(), keys.end());
  for (std::size_t i = 0; i < 200; ++i) views.emplace_back("absent-key");
  std::vector<const Map::Entry*> out(views.size());
  struct Receipt {
    std::uintptr_t address;
    std::uint64_t hash;
  };
  std::vector<Receipt> receipts;
  for (const auto& key : keys) {
    receipts.push_back({map.Find(key)->address(), map.HashOf(key)});
  }
  std::uint64_t sink = 0;
  auto run = [&] {
    for (const auto& key : views) {
      const Map::Entry* e = map.Find(key);
      sink += e != nullptr ? e->value().offset : 1;
    }
    for (const Receipt& r : receipts) {
      sink += map.FindAddress(r.address, Map::Hash32(r.hash),
                              Map::TagOf(r.hash)) != nullptr;
      sink += map.FindAddress(r.address, Map::Hash32(r.hash)) != nullptr;
      map.PrefetchBucket(r.hash);
    }
    map.PrefetchMetadata();
    map.FindBatch(views, out);
    sink += out[0] != nullptr;
    map.FindBatchStaged<4, 2>(views, out);
    sink += out[1] != nullptr;
    std::uint64_t cursor = 0;
    do {
      cursor = map.Scan(cursor,
                        [&](const Map::Entry& e) { sink += e.value().offset; });
    } while (cursor != 0);
    StableScanCursor stable = map.StableScanBegin();
    while (!stable.done) {
      sink +=
          map.ScanStable(
              stable, [&](const Map::Entry&) { ++sink; }, 64) == Outcome::kOk;
    }
  };
  run();  // warm-up on this thread
  const long calls = allocator.calls();
  testing::AllocationCounter allocs;
  run();
  EXPECT_EQ(allocs.count(), 0u);
  EXPECT_EQ(allocator.calls(), calls);
  EXPECT_NE(sink, 0u);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(out[i], map.Find(keys[i]));
  }
}

// Error outcomes, ReplaceValue, Detach and ToStatus allocate nothing: not on
// the heap, and not from the map's allocator (except where noted).
TEST(ScanHashMapAllocTest, OutcomesReplaceValueAndDetachDoNotAllocate) {
  FailingAllocator allocator;
  ScanHashMapOptions options = Options(32, &allocator);
  options.max_key_bytes = 64;
  Map map(options);
  std::vector<std::string> keys;
  ASSERT_NO_FATAL_FAILURE(Populate(map, keys));
  const std::string too_long(65, 'x');
  std::vector<std::string> fresh;
  for (int i = 0; i < 100; ++i) fresh.push_back(Key(100'000'000 + i, 60));
  auto run = [&] {
    EXPECT_EQ(map.Insert(keys[0], Loc{1}).outcome, Outcome::kAlreadyExists);
    EXPECT_EQ(map.Insert("", Loc{1}).outcome, Outcome::kInvalidArgument);
    EXPECT_EQ(map.Upsert(too_long, Loc{1}).outcome, Outcome::kInvalidArgument);
    EXPECT_EQ(map.Erase("absent"), Outcome::kNotFound);
    EXPECT_EQ(map.ReplaceValue("absent", Loc{1}), Outcome::kNotFound);
    EXPECT_EQ(map.ReplaceValue(keys[1], Loc{2}), Outcome::kOk);
    EXPECT_EQ(ToStatus(Outcome::kResourceExhausted).code(),
              StatusCode::kResourceExhausted);
    EXPECT_TRUE(ToStatus(Outcome::kOk).ok());
    // Out of memory: the outcome itself costs nothing.
    allocator.FailPerMille(1000);
    for (int i = 0; i < 100; ++i) {
      const Map::InsertResult r = map.Insert(fresh[i], Loc{0});
      EXPECT_TRUE(r.ok() || r.outcome == Outcome::kResourceExhausted);
      if (r.ok()) {
        EXPECT_EQ(map.Erase(fresh[i]), Outcome::kOk);
      }
    }
    allocator.Heal();
  };
  run();  // warm-up on this thread
  {
    testing::AllocationCounter allocs;
    run();
    EXPECT_EQ(allocs.count(), 0u);
  }
  testing::AllocationCounter allocs;
  const long calls = allocator.calls();
  ScanHashMapPopulation population = map.Detach();
  EXPECT_EQ(allocs.count(), 0u);
  EXPECT_EQ(allocator.calls(), calls);
  EXPECT_EQ(population.size(), keys.size());
}

}  // namespace
}  // namespace cairn::index_test
