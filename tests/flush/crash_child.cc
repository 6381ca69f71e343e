// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The crash test's child: applies the operation stream of `seed` to the
// store in `dir` and, after every successful Flush or Checkpoint, writes the
// number of operations made durable (8 bytes) to file descriptor `ack_fd`.
// The parent kills it with SIGKILL at a random moment.
//   flush_crash_child <dir> <seed> <ack_fd> <receipts|watermark> <sync 0|1>
//                     <flusher 0|1>
// With flusher 1 the store runs with host_flusher and a thread calls
// RunFlusher, so sealed blocks are written beside the operations.

#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <chrono>
#include <stop_token>
#include <thread>

#include "cairn/flush/log_store.h"
#include "flush/crash_ops.h"

int main(int argc, char** argv) {
  // Dies with the test that started it, whatever happens to that test.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s dir seed ack_fd mode sync flusher\n",
                 argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const std::uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  const int ack_fd = std::atoi(argv[3]);
  cairn::LogStoreOptions options;
  options.partitions = 4;
  options.databases = cairn::testing::kCrashDatabases;
  options.block_bytes = 64 * 1024;
  options.max_value_bytes = 8192;
  options.max_sealed_blocks = 2;
  options.sync = std::string(argv[5]) == "1";
  options.mode = std::string(argv[4]) == "watermark"
                     ? cairn::FlushMode::kWatermark
                     : cairn::FlushMode::kReceipts;
  const bool flusher = std::string(argv[6]) == "1";
  options.host_flusher = flusher;
  auto store = cairn::LogStore::Open(dir, options);
  if (!store.ok()) {
    std::fprintf(stderr, "child: open: %s\n",
                 std::string(store.status().message()).c_str());
    return 3;
  }
  // Compaction runs beside the operations the whole time (the host's
  // thread, as a host would run it): blocks are freed and their slots
  // reused while the parent may kill the child at any point.
  cairn::LogStore* const compacted = store->get();
  std::thread compactor([compacted] {
    cairn::CompactOptions compact;
    compact.max_live_fraction = 0.8;
    compact.max_blocks = 2;
    for (;;) {
      const cairn::Status s = compacted->Compact(compact);
      if (!s.ok()) {
        std::fprintf(stderr, "child: compact: %s\n",
                     std::string(s.message()).c_str());
        std::_Exit(6);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  compactor.detach();
  if (flusher) {
    std::thread flusher_thread([compacted] {
      const cairn::Status s = compacted->RunFlusher(std::stop_token());
      std::fprintf(stderr, "child: flusher: %s\n",
                   std::string(s.message()).c_str());
      std::_Exit(7);  // it never stops: the parent kills the child
    });
    flusher_thread.detach();
  }
  cairn::testing::CrashOpStream ops(seed);
  for (std::uint64_t i = 0;; ++i) {
    const cairn::testing::CrashOp op = ops.Next();
    cairn::Status s;
    switch (op.kind) {
      case cairn::testing::CrashOp::kSet:
        if (!op.durable) {
          s = (*store)->Set(op.db, op.key, op.value);
          break;
        }
        s = (*store)->SetDurable(op.db, op.key, op.value);
        if (s.ok()) {
          const std::uint64_t durable = i + 1;
          if (::write(ack_fd, &durable, sizeof(durable)) != sizeof(durable)) {
            return 4;
          }
        }
        break;
      case cairn::testing::CrashOp::kDel:
        s = (*store)->Del(op.db, op.key);
        if (s.code() == cairn::StatusCode::kNotFound) s = cairn::Status();
        break;
      case cairn::testing::CrashOp::kFlushDb:
        s = (*store)->FlushDb(op.db);
        break;
      case cairn::testing::CrashOp::kFlush:
      case cairn::testing::CrashOp::kCheckpoint:
        s = op.kind == cairn::testing::CrashOp::kFlush ? (*store)->Flush()
                                                       : (*store)->Checkpoint();
        if (s.ok()) {
          const std::uint64_t durable = i + 1;
          if (::write(ack_fd, &durable, sizeof(durable)) != sizeof(durable)) {
            return 4;
          }
        }
        break;
    }
    if (!s.ok()) {
      std::fprintf(stderr, "child: op %llu: %s\n",
                   static_cast<unsigned long long>(i),
                   std::string(s.message()).c_str());
      return 5;
    }
  }
}
