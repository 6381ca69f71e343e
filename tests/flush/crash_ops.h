// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The operation stream of the crash test: the child (crash_child.cc)
// applies it to a LogStore and the parent (log_store_crash_test.cc)
// replays it on a model. Both derive it from the same seed.

#ifndef CAIRN_TESTS_FLUSH_CRASH_OPS_H_
#define CAIRN_TESTS_FLUSH_CRASH_OPS_H_

#include <cstdint>
#include <random>
#include <string>

namespace cairn::testing {

inline constexpr std::uint32_t kCrashDatabases = 4;
inline constexpr int kCrashKeys = 300;

struct CrashOp {
  enum Kind { kSet, kDel, kFlushDb, kFlush, kCheckpoint } kind = kSet;
  std::uint32_t db = 0;
  std::string key;
  std::string value;
  // A kSet the child makes with SetDurable, and acknowledges like a flush.
  bool durable = false;
};

class CrashOpStream {
 public:
  explicit CrashOpStream(std::uint64_t seed) : rng_(seed) {}

  CrashOp Next() {
    CrashOp op;
    const unsigned r = static_cast<unsigned>(rng_() % 1000);
    op.db = static_cast<std::uint32_t>(rng_() % kCrashDatabases);
    op.key = "k" + std::to_string(rng_() % kCrashKeys);
    if (r < 700) {
      op.kind = CrashOp::kSet;
      op.durable = rng_() % 10 == 0;
      // Mostly small values, some up to 6000 bytes (many span blocks).
      const std::size_t size = rng_() % 4 == 0 ? rng_() % 6000 : rng_() % 200;
      op.value.resize(size);
      for (char& c : op.value) c = static_cast<char>(rng_() & 0xff);
    } else if (r < 880) {
      op.kind = CrashOp::kDel;
    } else if (r < 885) {
      op.kind = CrashOp::kFlushDb;
    } else if (r < 990) {
      op.kind = CrashOp::kFlush;
    } else {
      op.kind = CrashOp::kCheckpoint;
    }
    return op;
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_FLUSH_CRASH_OPS_H_
