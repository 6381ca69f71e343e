// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The payload the directory benches give every object: what a store keeps
// per object, its replica descriptors (two, on the heap).

#ifndef CAIRN_BENCH_DIRECTORY_OBJECT_PAYLOAD_H_
#define CAIRN_BENCH_DIRECTORY_OBJECT_PAYLOAD_H_

#include <cstdint>
#include <vector>

namespace cairn::bench {

struct Replica {
  std::uint64_t segment = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint32_t status = 0;
};

struct ObjectPayload {
  std::vector<Replica> replicas;
};

inline ObjectPayload MakePayload(std::uint64_t i) {
  ObjectPayload p;
  p.replicas.push_back({i % 64, i * 4096, 4096, 1});
  p.replicas.push_back({(i + 1) % 64, i * 8192, 4096, 1});
  return p;
}

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_DIRECTORY_OBJECT_PAYLOAD_H_
