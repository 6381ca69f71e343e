// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/flush/receipt_pass.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "testing/alloc_counter.h"
#include "testing/scan_hash_map_peer.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using index_internal::ScanHashMapTestPeer;

// A set of maps numbered 0..n-1 and the receipts appends to them leave.
struct Universe {
  explicit Universe(int maps, int max_exponent = 32) {
    ScanHashMapOptions options;
    options.max_exponent = max_exponent;
    for (int i = 0; i < maps; ++i) {
      indexes.push_back(std::make_unique<RecordIndex>(options));
    }
  }
  RecordIndex* operator()(std::uint32_t map) {
    return map < indexes.size() ? indexes[map].get() : nullptr;
  }
  // Upserts key -> loc in `map` and returns the receipt the append leaves.
  FlushReceipt Set(std::uint32_t map, const std::string& key,
                   RecordLocation loc) {
    RecordIndex& index = *indexes[map];
    const std::uint64_t hash = index.HashOf(key);
    auto r = index.Upsert(key, loc);
    EXPECT_TRUE(r.ok());
    FlushReceipt receipt;
    receipt.address = r.entry->address();
    receipt.generation = index.generation();
    receipt.hash32 = RecordIndex::Hash32(hash);
    receipt.tag = RecordIndex::TagOf(hash);
    receipt.map = map;
    receipt.block = loc.block;
    receipt.offset = loc.offset;
    receipt.length = loc.length;
    return receipt;
  }
  // Every entry's flags, by (map, key).
  std::map<std::pair<std::uint32_t, std::string>, std::uint32_t> Flags() {
    std::map<std::pair<std::uint32_t, std::string>, std::uint32_t> out;
    for (std::uint32_t m = 0; m < indexes.size(); ++m) {
      auto cursor = indexes[m]->StableScanBegin();
      while (!cursor.done) {
        EXPECT_EQ(indexes[m]->ScanStable(
                      cursor,
                      [&](const RecordIndex::Entry& e) {
                        out[{m, std::string(e.key())}] = e.value().flags;
                      },
                      64),
                  ScanHashMapOutcome::kOk);
      }
    }
    return out;
  }
  void ClearDurable() {
    for (auto& index : indexes) {
      std::vector<std::string> keys;
      auto cursor = index->StableScanBegin();
      while (!cursor.done) {
        (void)index->ScanStable(
            cursor,
            [&](const RecordIndex::Entry& e) { keys.emplace_back(e.key()); },
            64);
      }
      for (const auto& k : keys) {
        index->Find(k)->value().flags &= ~RecordLocation::kDurable;
      }
    }
  }
  std::vector<std::unique_ptr<RecordIndex>> indexes;
};

RecordLocation Loc(std::uint32_t block, std::uint32_t offset,
                   std::uint32_t length = 100) {
  return RecordLocation{block, offset, length, 0};
}

const ReceiptPassOptions kSerial{0, 0, 512};
const ReceiptPassOptions kStaged{16, 8, 512};

TEST(ReceiptPassTest, MarksEntriesBelowTheBoundaryOnly) {
  Universe u(1);
  std::vector<FlushReceipt> receipts;
  receipts.push_back(u.Set(0, "a", Loc(4, 0)));
  receipts.push_back(u.Set(0, "b", Loc(4, 100)));
  receipts.push_back(u.Set(0, "c", Loc(4, 200)));  // ends at 300
  for (const auto& options : {kSerial, kStaged}) {
    u.ClearDurable();
    const ReceiptPassStats s = ApplyReceipts(receipts, u, {4, 250}, options);
    EXPECT_EQ(s.marked, 2u);
    EXPECT_EQ(s.superseded, 1u);
    EXPECT_TRUE(u.indexes[0]->Find("a")->value().durable());
    EXPECT_TRUE(u.indexes[0]->Find("b")->value().durable());
    EXPECT_FALSE(u.indexes[0]->Find("c")->value().durable());
    // Running it again marks nothing new.
    const ReceiptPassStats again =
        ApplyReceipts(receipts, u, {4, 250}, options);
    EXPECT_EQ(again.marked, 0u);
    EXPECT_EQ(again.already_durable, 2u);
  }
}

// Compaction: a key's record was copied from block 4 (block slot 2) to
// block 9, and block slot 2 was then reused by block 11. A receipt left for
// the old record (block 4, slot 2) and one for a record of the reused slot's
// new block at the same offset never mark the entry: the pass compares the
// block's number, which a reused slot's new block does not share, and never
// the slot. The copy's own receipt marks it; the slot bits survive the mark.
// Planted bug: comparing loc.slot() with the receipt's block instead of
// loc.block (a pass that trusted the place in the file) marks the entry on
// the stale receipt; this fails.
TEST(ReceiptPassTest, StaleReceiptForARelocatedOrReusedBlockMarksNothing) {
  Universe u(1);
  RecordLocation old_loc = Loc(4, 128, 64);
  old_loc.set_slot(2);
  const FlushReceipt stale = u.Set(0, "moved", old_loc);
  RecordLocation copy = Loc(9, 0, 64);
  copy.set_slot(5);
  const FlushReceipt fresh = u.Set(0, "moved", copy);
  for (const auto& options : {kSerial, kStaged}) {
    u.ClearDurable();
    ReceiptPassStats s =
        ApplyReceipts(std::span(&stale, 1), u, {4, 4096}, options);
    EXPECT_EQ(s.superseded, 1u);
    // The reused slot's new block, same slot and offset as the old record.
    FlushReceipt reused = stale;
    reused.block = 11;
    s = ApplyReceipts(std::span(&reused, 1), u, {11, 4096}, options);
    EXPECT_EQ(s.marked, 0u);
    EXPECT_FALSE(u.indexes[0]->Find("moved")->value().durable());
    s = ApplyReceipts(std::span(&fresh, 1), u, {9, 4096}, options);
    EXPECT_EQ(s.marked, 1u);
    EXPECT_TRUE(u.indexes[0]->Find("moved")->value().durable());
    EXPECT_EQ(u.indexes[0]->Find("moved")->value().slot(), 5u);
  }
}

// X6: a receipt whose address now names another key's entry (or the same
// key's rewritten entry) marks it only if that entry's own location lies in
// the flushed block below the boundary. Planted bug: dropping the location
// check in ApplyOne marks the rewritten and the reused entries; this fails.
TEST(ReceiptPassTest, X6AddressReuseNeverMarksAnotherRecord) {
  // One bucket chain: every key routes to bucket 0, so a reused address is
  // found whatever its key, provided the tag matches.
  Universe u(1, /*max_exponent=*/0);
  RecordIndex& index = *u.indexes[0];
  const FlushReceipt old_a = u.Set(0, "key-a", Loc(7, 0, 64));
  // The same key rewritten to a later block: the old receipt finds the
  // entry, whose location is elsewhere.
  u.Set(0, "key-a", Loc(8, 0, 64));
  ReceiptPassStats s =
      ApplyReceipts(std::span(&old_a, 1), u, {7, 4096}, kStaged);
  EXPECT_EQ(s.superseded, 1u);
  EXPECT_FALSE(index.Find("key-a")->value().durable());

  // Erase key-a; a key with the same tag and entry size reuses its address.
  const std::uint8_t tag = old_a.tag;
  ASSERT_EQ(index.Erase("key-a"), ScanHashMapOutcome::kOk);
  std::optional<std::string> other;
  for (int i = 0; i < 10000 && !other; ++i) {
    std::string k = std::to_string(10000 + i);  // five bytes, as "key-a"
    if (RecordIndex::TagOf(index.HashOf(k)) == tag) other = k;
  }
  ASSERT_TRUE(other.has_value());
  // In the flushed block but past the boundary: must not be marked.
  const FlushReceipt b1 = u.Set(0, *other, Loc(7, 5000, 64));
  ASSERT_EQ(b1.address, old_a.address) << "the arena reuses a freed block";
  s = ApplyReceipts(std::span(&old_a, 1), u, {7, 4096}, kStaged);
  EXPECT_EQ(s.superseded, 1u);
  EXPECT_FALSE(index.Find(*other)->value().durable());
  // In an unflushed block: must not be marked.
  u.Set(0, *other, Loc(9, 0, 64));
  s = ApplyReceipts(std::span(&old_a, 1), u, {7, 4096}, kSerial);
  EXPECT_EQ(s.superseded, 1u);
  EXPECT_FALSE(index.Find(*other)->value().durable());
  // Its own location is durable: marking it is right whichever receipt
  // led there.
  u.Set(0, *other, Loc(7, 1000, 64));
  s = ApplyReceipts(std::span(&old_a, 1), u, {7, 4096}, kSerial);
  EXPECT_EQ(s.marked, 1u);
  EXPECT_TRUE(index.Find(*other)->value().durable());
}

// X7: receipts of a detached population are skipped by generation and
// nothing of them is dereferenced (ASan builds catch a touch of the freed
// population), in the serial and the staged pass. Planted bug: dropping the
// generation check in LiveMap turns them into `missing` (and, under ASan,
// the staged pass's entry prefetch is harmless but the counts differ).
TEST(ReceiptPassTest, X7StaleGenerationAndZeroAddressChangeNothing) {
  Universe u(2);
  std::vector<FlushReceipt> receipts;
  for (int i = 0; i < 2000; ++i) {
    receipts.push_back(
        u.Set(i % 2, "k" + std::to_string(i), Loc(3, i * 10, 10)));
  }
  FlushReceipt zero;
  zero.block = 3;
  receipts.push_back(zero);
  FlushReceipt unknown_map = receipts[0];
  unknown_map.map = 99;
  receipts.push_back(unknown_map);
  {
    ScanHashMapPopulation dropped = u.indexes[0]->Detach();
    EXPECT_EQ(dropped.size(), 1000u);
  }  // destroyed: its entries' memory is gone
  // Refill map 0 under the new generation at locations the stale receipts
  // would cover.
  for (int i = 0; i < 2000; i += 2) {
    u.Set(0, "k" + std::to_string(i), Loc(3, i * 10, 10));
  }
  Mutex mu;
  for (const auto& options : {kSerial, kStaged, ReceiptPassOptions{4, 0, 512},
                              ReceiptPassOptions{0, 4, 512}}) {
    // The sliced form too: its staged slices prefetch every receipt's entry
    // line before taking the lock, stale ones included (a hint, never a
    // read).
    for (const bool sliced : {false, true}) {
      u.ClearDurable();
      const ReceiptPassStats s =
          sliced ? ApplyReceiptsSliced(receipts, u, {3, 1 << 20}, options, &mu)
                 : ApplyReceipts(receipts, u, {3, 1 << 20}, options);
      EXPECT_EQ(s.stale, 1002u) << sliced;
      EXPECT_EQ(s.marked, 1000u) << sliced;  // map 1's entries
      for (int i = 0; i < 2000; i += 2) {
        EXPECT_FALSE(
            u.indexes[0]->Find("k" + std::to_string(i))->value().durable());
      }
    }
  }
}

// A map in the middle of a rehash: receipts find entries in both tables.
TEST(ReceiptPassTest, FindsEntriesInBothTablesMidRehash) {
  Universe u(1);
  std::vector<FlushReceipt> receipts;
  int i = 0;
  while (!ScanHashMapTestPeer::IsRehashing(*u.indexes[0]) || i < 200) {
    receipts.push_back(u.Set(0, "r" + std::to_string(i), Loc(1, i, 1)));
    ++i;
    ASSERT_LT(i, 100000);
  }
  ASSERT_TRUE(ScanHashMapTestPeer::IsRehashing(*u.indexes[0]));
  const auto steps = u.indexes[0]->stats().rehash_steps;
  const ReceiptPassStats s = ApplyReceipts(receipts, u, {1, 1 << 20}, kStaged);
  EXPECT_EQ(s.marked, receipts.size());
  EXPECT_EQ(u.indexes[0]->stats().rehash_steps, steps)
      << "the pass steps no rehash";
  EXPECT_TRUE(ScanHashMapTestPeer::IsRehashing(*u.indexes[0]));
}

// X8: the staged pass (any distances) leaves exactly the serial pass's
// index state and counts, on random batches with missing addresses,
// duplicates, stale generations and maps mid-rehash. Planted bug: letting
// the bucket stage mark entries (or skipping the generation check there)
// changes the state; so does an off-by-one that drops the last receipts.
TEST(ReceiptPassTest, X8StagedPassEqualsSerialOnRandomBatches) {
  std::mt19937_64 rng(20261204);
  const int rounds = testing::StressIterations(12);
  for (int round = 0; round < rounds; ++round) {
    Universe u(1 + static_cast<int>(rng() % 8));
    const std::uint32_t maps = static_cast<std::uint32_t>(u.indexes.size());
    std::vector<FlushReceipt> receipts;
    const int ops = 500 + static_cast<int>(rng() % 3000);
    const std::uint32_t block = 5;
    for (int op = 0; op < ops; ++op) {
      const std::uint32_t m = static_cast<std::uint32_t>(rng() % maps);
      const std::string key = "key" + std::to_string(rng() % 1500);
      const int what = static_cast<int>(rng() % 100);
      if (what < 70) {
        const std::uint32_t b =
            block - 1 + static_cast<std::uint32_t>(rng() % 3);
        receipts.push_back(u.Set(
            m, key, Loc(b, static_cast<std::uint32_t>(rng() % 9000), 64)));
      } else if (what < 85) {
        (void)u.indexes[m]->Erase(key);  // its receipts become missing
      } else if (what < 95 && !receipts.empty()) {
        receipts.push_back(receipts[rng() % receipts.size()]);  // duplicate
      } else if (what < 97) {
        FlushReceipt bogus =
            receipts.empty() ? FlushReceipt{} : receipts.back();
        bogus.address += 8;  // names no entry
        receipts.push_back(bogus);
      } else if (rng() % 8 == 0) {
        (void)u.indexes[m]->Detach();  // stale generation for earlier ones
      }
    }
    std::shuffle(receipts.begin(), receipts.end(), rng);
    const FlushedRange range{block,
                             4000 + static_cast<std::uint32_t>(rng() % 5000)};
    u.ClearDurable();
    const ReceiptPassStats serial = ApplyReceipts(receipts, u, range, kSerial);
    const auto serial_flags = u.Flags();
    const std::uint64_t probes[][2] = {{16, 8},  {1, 1}, {0, 8},      {16, 0},
                                       {64, 32}, {3, 7}, {1000, 1000}};
    for (const auto& p : probes) {
      u.ClearDurable();
      const ReceiptPassOptions options{p[0], p[1], 512};
      const ReceiptPassStats staged =
          ApplyReceipts(receipts, u, range, options);
      EXPECT_TRUE(staged.SameOutcome(serial))
          << "distances " << p[0] << "/" << p[1];
      EXPECT_EQ(u.Flags(), serial_flags) << "distances " << p[0] << "/" << p[1];
    }
    EXPECT_GT(serial.marked + serial.missing + serial.stale + serial.superseded,
              0u);
  }
}

TEST(ReceiptPassTest, SlicedPassHoldsTheLockPerSliceOnly) {
  Universe u(1);
  std::vector<FlushReceipt> receipts;
  for (int i = 0; i < 1000; ++i) {
    receipts.push_back(u.Set(0, "s" + std::to_string(i), Loc(2, i, 1)));
  }
  Mutex mu;
  ReceiptPassOptions options = kStaged;
  options.slice_receipts = 128;
  const ReceiptPassStats s =
      ApplyReceiptsSliced(receipts, u, {2, 1 << 20}, options, &mu);
  EXPECT_EQ(s.marked, 1000u);
  EXPECT_EQ(s.slices, 8u);
  EXPECT_GE(s.locked_nanos, s.max_slice_nanos);
  // The lock is free again.
  const bool free_again = [&mu] {
    if (!mu.TryLock()) return false;
    mu.Unlock();
    return true;
  }();
  EXPECT_TRUE(free_again);
}

// The header's contract: the pass functions never allocate.
TEST(ReceiptPassTest, PassDoesNotAllocate) {
  Universe u(2);
  std::vector<FlushReceipt> receipts;
  for (int i = 0; i < 500; ++i) {
    receipts.push_back(u.Set(i % 2, "n" + std::to_string(i), Loc(2, i, 1)));
  }
  Mutex mu;
  const std::uint64_t before = testing::AllocationsOnThisThread();
  const ReceiptPassStats a = ApplyReceipts(receipts, u, {2, 1 << 20}, kSerial);
  const ReceiptPassStats b = ApplyReceipts(receipts, u, {2, 1 << 20}, kStaged);
  const ReceiptPassStats c =
      ApplyReceiptsSliced(receipts, u, {2, 1 << 20}, kStaged, &mu);
  EXPECT_EQ(testing::AllocationsOnThisThread(), before);
  EXPECT_EQ(a.marked, 500u);
  EXPECT_EQ(b.already_durable + c.already_durable, 1000u);
}

}  // namespace
}  // namespace cairn
