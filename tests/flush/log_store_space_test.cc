// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// LogStore's live bytes per block (LogStore::Space, the live-bytes gauges)
// against a model, through overwrites, deletes, FlushDb and reopens.

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cairn/base/metrics.h"
#include "cairn/flush/log_store.h"
#include "flush/flush_testing.h"
#include "testing/metrics_text.h"

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
  EXPECT_EQ(std::accumulate(space.live_bytes_per_block.begin(),
                            space.live_bytes_per_block.end(), std::uint64_t{0}),
            space.live_bytes)
      << "step " << step;
  EXPECT_EQ(space.block_bytes, kBlock);
  for (std::uint64_t live : space.live_bytes_per_block) {
    EXPECT_LE(live, LogRecordSpace(kBlock)) << "step " << step;
  }
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
  for (int step = 0; step < 3000; ++step) {
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
      const std::vector<std::uint64_t> before =
          (*store)->Space().live_bytes_per_block;
      o.checkpoint_on_close = (op % 2) == 0;
      ASSERT_TRUE((*store)->Close().ok());
      store->reset();
      store = LogStore::Open(dir.path(), o);
      ASSERT_TRUE(store.ok()) << store.status().message();
      EXPECT_EQ((*store)->Space().live_bytes_per_block, before)
          << "step " << step;
      ++reopens;
    }
    ExpectSpace(**store, model, step);
    if (HasFailure()) return;
  }
  EXPECT_GT(reopens, 50);
  EXPECT_GT((*store)->Space().live_bytes_per_block.size(), 20u);
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
  ASSERT_GE(space.live_bytes_per_block.size(), 3u);
  EXPECT_EQ(space.live_bytes_per_block[0], 0u);
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
            static_cast<double>(space.live_bytes_per_block.size()));
}

}  // namespace
}  // namespace cairn
