// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// What the durable-log crash test's child (durable_log_crash_child.cc) and
// parent (durable_log_crash_test.cc) share: the payload whose bytes the log
// carries and the acknowledgement the child sends for every durable record.

#ifndef CAIRN_TESTS_HA_DURABLE_LOG_CRASH_H_
#define CAIRN_TESTS_HA_DURABLE_LOG_CRASH_H_

#include <cstdint>
#include <string>

#include "cairn/directory/durable_log.h"

namespace cairn::testing {

struct CrashPayload {
  std::string bytes;
};

// One record on_durable reported: the mutation's op (DurableOp), its
// serial (the payload of a create, commit or upsert is "m<serial>"), and
// the first object's id with the number of objects.
struct DurableAck {
  std::uint8_t op = 0;
  std::uint8_t reserved[3] = {};
  std::uint32_t objects = 0;
  std::uint64_t object = 0;
  std::uint64_t serial = 0;
};

}  // namespace cairn::testing

template <>
struct cairn::DurablePayloadCodec<cairn::testing::CrashPayload> {
  static constexpr bool kLogsPayload = true;
  static void Encode(const cairn::testing::CrashPayload& p, std::string* out) {
    out->append(p.bytes);
  }
};

#endif  // CAIRN_TESTS_HA_DURABLE_LOG_CRASH_H_
