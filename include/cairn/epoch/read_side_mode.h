// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ReadSideMode: how an EpochDomain's readers publish the epoch they pin.
// Chosen in EpochOptions::read_side_mode; EpochDomain::read_side_mode()
// reports the mode in effect. Measured costs are in docs/epoch.md.

#ifndef CAIRN_EPOCH_READ_SIDE_MODE_H_
#define CAIRN_EPOCH_READ_SIDE_MODE_H_

#include <cstdint>

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

enum class ReadSideMode : std::uint8_t {
  // Enter publishes with a seq_cst exchange (`xchg` on x86). Always
  // available and visible to ThreadSanitizer.
  kSeqCst,
  // Enter publishes with a plain store and a compiler barrier; the thread
  // that advances the epoch pays for the ordering with
  // membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED). Falls back to kSeqCst
  // where membarrier is not available.
  kAsymmetric,
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_EPOCH_READ_SIDE_MODE_H_
