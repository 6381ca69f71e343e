// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The keyed hash, compiled here so xxHash stays out of public headers.

#include "cairn/base/internal/hash.h"

#include <xxhash.h>

CAIRN_NAMESPACE_BEGIN
namespace base_internal {

std::uint64_t RouteHash(std::string_view key) noexcept {
  return XXH3_64bits(key.data(), key.size());
}

std::uint64_t KeyedHash(std::string_view key, std::uint64_t seed) noexcept {
  return XXH3_64bits_withSeed(key.data(), key.size(), seed);
}

}  // namespace base_internal
CAIRN_NAMESPACE_END
