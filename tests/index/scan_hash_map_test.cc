#include "cairn/index/scan_hash_map.h"
#include <gtest/gtest.h>
#include "index/test_util.h"
namespace cairn::index_test { namespace {
TEST(ScanHashMapTest, Smoke) {
  Map map(ScanHashMapOptions{.seed = 7});
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(map.Insert(Key(i), Loc{std::uint64_t(i)}).ok());
  for (int i = 0; i < 10000; ++i) { auto* e = map.Find(Key(i)); ASSERT_NE(e, nullptr); EXPECT_EQ(e->value().offset, std::uint64_t(i)); }
  for (int i = 0; i < 10000; i += 2) ASSERT_TRUE(map.Erase(Key(i)).ok());
  for (int i = 0; i < 10000; ++i) EXPECT_EQ(map.Find(Key(i)) != nullptr, i % 2 == 1);
}
}}
