// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// LogStore's live bytes per block (LogStore::Space, the live-bytes gauges)
// against a model, through overwrites, deletes, FlushDb and reopens.

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cairn/base/metrics.h"
#include "cairn/flush/log_store.h"
#include "flush/flush_testing.h"
#include "testing/metrics_text.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::ScratchDir;

constexpr std::size_t kBlock = 16 * 1024;

LogStoreOptions Options() {
  LogStoreOptions o;
  o.partitions = 4;
  o.databases = 3;
  o.block_bytes = kBlock;
  o.max_value_bytes = 2000;
  o.sync = false;
  o.max_sealed_blocks = 2;
  return o;
}

using Model = std::map<std::pair<std::uint32_t, std::string>, std::string>;

// Every block's (number, slot, live bytes), in log order.
std::vector<std::tuple<std::uint64_t, std::uint32_t, std::uint64_t>> Blocks(
    const LogStoreSpace& space) {
  std::vector<std::tuple<std::uint64_t, std::uint32_t, std::uint64_t>> out;
  for (const LogBlockSpace& b : space.blocks) {
    out.emplace_back(b.block, b.slot, b.live_bytes);
  }
  return out;
}

std::uint64_t ModelLiveBytes(const Model& model) {
  std::uint64_t n = 0;
  for (const auto& [key, value] : model) {
    n += LogRecordBytes(key.second.size(), value.size());
  }
  return n;
}

// The store's live bytes equal the model's records, and the per-block
// figures sum to the total.
void ExpectSpace(const LogStore& store, const Model& model, int step) {
  const LogStoreSpace space = store.Space();
  EXPECT_EQ(space.live_bytes, ModelLiveBytes(model)) << "step " << step;
  std::uint64_t sum = 0;
  for (const LogBlockSpace& b : space.blocks) {
    sum += b.live_bytes;
    EXPECT_LE(b.live_bytes, LogRecordSpace(kBlock)) << "step " << step;
  }
  EXPECT_EQ(sum, space.live_bytes) << "step " << step;
  EXPECT_EQ(space.block_bytes, kBlock);
  EXPECT_LE(space.blocks.size() + space.free_slots, space.slots);
}

// Random sets (overwrites of a small key set), deletes, FlushDb, flushes and
// reopens (with and without a checkpoint). After every step the live bytes
// match the model; at every reopen the per-block figures Open rebuilds from
// the recovered index equal the ones the write path kept. Planted bugs:
// not taking a superseded record off its block in Set (the totals drift on
// the first overwrite), and not taking FlushDb's records off (they drift
// at the first FlushDb); both fail here.
TEST(LogStoreSpaceTest, LiveBytesFollowTheModelAndSurviveReopen) {
  ScratchDir dir("logstore_space_model");
  LogStoreOptions o = Options();
  std::mt19937 rng(7);
  Model model;
  auto store = LogStore::Open(dir.path(), o);
  ASSERT_TRUE(store.ok()) << store.status().message();
  int reopens = 0;
  // TSan runs this single-threaded test about 50 times slower.
  const int steps = testing::kUnderTsan ? 500 : 3000;
  for (int step = 0; step < steps; ++step) {
    const int op = static_cast<int>(rng() % 100);
    const std::uint32_t db = rng() % 3;
    const std::string key = "k" + std::to_string(rng() % 60);
    if (op < 70) {
      const std::string value(rng() % 1500, static_cast<char>('a' + step % 26));
      ASSERT_TRUE((*store)->Set(db, key, value).ok());
      model[{db, key}] = value;
    } else if (op < 88) {
      const Status s = (*store)->Del(db, key);
      EXPECT_EQ(s.ok(), model.erase({db, key}) == 1) << s.message();
    } else if (op < 90) {
      ASSERT_TRUE((*store)->FlushDb(db).ok());
      std::erase_if(model,
                    [&](const auto& kv) { return kv.first.first == db; });
    } else if (op < 96) {
      ASSERT_TRUE((*store)->Flush().ok());
    } else {
      const auto before = Blocks((*store)->Space());
      o.checkpoint_on_close = (op % 2) == 0;
      ASSERT_TRUE((*store)->Close().ok());
      store->reset();
      store = LogStore::Open(dir.path(), o);
      ASSERT_TRUE(store.ok()) << store.status().message();
      EXPECT_EQ(Blocks((*store)->Space()), before) << "step " << step;
      ++reopens;
    }
    ExpectSpace(**store, model, step);
    if (HasFailure()) return;
  }
  EXPECT_GT(reopens, steps / 60);
  EXPECT_GT((*store)->Space().blocks.size(),
            static_cast<std::size_t>(steps / 150));
}

// A block whose every record was overwritten holds no live bytes; the
// gauges report the total and the block count.
TEST(LogStoreSpaceTest, OverwrittenBlockHoldsNothingLiveAndGaugesReport) {
  ScratchDir dir("logstore_space_gauges");
  auto opened = LogStore::Open(dir.path(), Options());
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  LogStore& store = **opened;
  const std::string value(1000, 'v');
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(store.Set(0, "key" + std::to_string(i), value).ok());
  }
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(store.Set(0, "key" + std::to_string(i), value).ok());
    }
  }
  const LogStoreSpace space = store.Space();
  ASSERT_GE(space.blocks.size(), 3u);
  EXPECT_EQ(space.blocks[0].block, 0u);
  EXPECT_EQ(space.blocks[0].live_bytes, 0u);
  EXPECT_EQ(space.live_bytes, 10 * LogRecordBytes(4, 1000));

  PrometheusRenderer r;
  store.VisitMetrics(r);
  const testing_internal::ParsedExposition p =
      testing_internal::ParseExposition(r.Finish());
  ASSERT_TRUE(p.error.empty()) << p.error;
  EXPECT_EQ(p.types.at("cairn_logstore_live_bytes"), "gauge");
  EXPECT_EQ(p.Value("cairn_logstore_live_bytes", {}),
            static_cast<double>(space.live_bytes));
  EXPECT_EQ(p.Value("cairn_logstore_log_blocks", {}),
            static_cast<double>(space.blocks.size()));
  EXPECT_EQ(p.Value("cairn_logstore_log_slots", {}),
            static_cast<double>(space.slots));
}

}  // namespace
}  // namespace cairn
