// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// VisitHandles' emission step, shared by route implementations. Never
// include directly.

#ifndef CAIRN_ROUTE_INTERNAL_CHUNK_EMITTER_H_
#define CAIRN_ROUTE_INTERNAL_CHUNK_EMITTER_H_

#include <cstddef>
#include <span>
#include <vector>

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN
namespace route_internal {

// Hands fn every full chunk of `staged` and keeps the remainder for the next
// round (flush: emit it too).
template <typename Owner, typename Fn>
void EmitChunks(std::vector<Owner>& staged, std::size_t chunk, bool flush,
                Fn& fn) {
  std::size_t begin = 0;
  while (staged.size() - begin >= chunk) {
    fn(std::span<Owner>(staged.data() + begin, chunk));
    begin += chunk;
  }
  if (flush && begin < staged.size()) {
    fn(std::span<Owner>(staged.data() + begin, staged.size() - begin));
    begin = staged.size();
  }
  staged.erase(staged.begin(), staged.begin() + begin);
}

}  // namespace route_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_ROUTE_INTERNAL_CHUNK_EMITTER_H_
