// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The 64-byte bucket of ScanHashMap and its tag matcher. The layout is fixed
// and does not depend on ISA flags: SSE2 only changes how tags are compared.
//
//   bytes  0..11  tags[12]      one-byte filters, top 8 bits of the hash
//   bytes 12..59  handles[12]   arena handles; a slot is occupied iff != 0
//   bytes 60..63  child         overflow bucket id, 0 = end of chain

#ifndef CAIRN_INDEX_INTERNAL_BUCKET_H_
#define CAIRN_INDEX_INTERNAL_BUCKET_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN
namespace index_internal {

inline constexpr int kSlotsPerBucket = 12;
inline constexpr std::uint32_t kAllSlotsMask = (1u << kSlotsPerBucket) - 1;

struct alignas(64) Bucket {
  std::uint8_t tags[kSlotsPerBucket];
  std::uint32_t handles[kSlotsPerBucket];
  std::uint32_t child;
};
static_assert(sizeof(Bucket) == 64, "a bucket is one cache line");
static_assert(offsetof(Bucket, handles) == 12, "handles follow the tags");
static_assert(offsetof(Bucket, child) == 60, "child id is the last word");

// Bit i set iff tags[i] == tag. A filter only: the caller checks the handle.
inline std::uint32_t MatchTagsScalar(const Bucket& bucket,
                                     std::uint8_t tag) noexcept {
  std::uint32_t mask = 0;
  for (int i = 0; i < kSlotsPerBucket; ++i) {
    mask |= static_cast<std::uint32_t>(bucket.tags[i] == tag) << i;
  }
  return mask;
}

inline std::uint32_t MatchTags(const Bucket& bucket,
                               std::uint8_t tag) noexcept {
#if defined(__SSE2__)
  // One 16-byte load covers the 12 tags and the first handle; bits 12-15 of
  // the movemask belong to that handle and are masked off.
  const __m128i bytes =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(&bucket));
  const __m128i hits =
      _mm_cmpeq_epi8(bytes, _mm_set1_epi8(static_cast<char>(tag)));
  return static_cast<std::uint32_t>(_mm_movemask_epi8(hits)) & kAllSlotsMask;
#else
  return MatchTagsScalar(bucket, tag);
#endif
}

// Bit i set iff handles[i] != 0.
inline std::uint32_t OccupiedSlots(const Bucket& bucket) noexcept {
  std::uint32_t mask = 0;
  for (int i = 0; i < kSlotsPerBucket; ++i) {
    mask |= static_cast<std::uint32_t>(bucket.handles[i] != 0) << i;
  }
  return mask;
}

inline void ClearBucket(Bucket& bucket) noexcept {
  std::memset(static_cast<void*>(&bucket), 0, sizeof(Bucket));
}

inline void PrefetchRead(const void* address) noexcept {
  __builtin_prefetch(address, 0, 3);
}

}  // namespace index_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_INDEX_INTERNAL_BUCKET_H_
