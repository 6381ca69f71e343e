// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Test-only access to EpochDomain internals. The library classes declare
// this peer a friend; only tests and benches include this header.

#ifndef CAIRN_TESTS_TESTING_EPOCH_PEER_H_
#define CAIRN_TESTS_TESTING_EPOCH_PEER_H_

#include "cairn/epoch/epoch_domain.h"

CAIRN_NAMESPACE_BEGIN
namespace epoch_internal {

class EpochTestPeer {
 public:
  static const ReadSide& read_side(const EpochDomain& domain) {
    return *domain.read_side_;
  }
  static const Slot& slot(const Participant& participant) {
    return *participant.slot_;
  }
};

}  // namespace epoch_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_TESTS_TESTING_EPOCH_PEER_H_
