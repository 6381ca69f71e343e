// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The checksums of cairn/base/internal/coding.h. xxHash stays here, out of
// the headers.

#include "cairn/base/internal/coding.h"

// The streaming state is allocated here, so its layout is needed.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

CAIRN_NAMESPACE_BEGIN
namespace base_internal {

std::uint64_t Checksum64(const void* data, std::size_t bytes,
                         std::uint64_t seed) noexcept {
  return XXH64(data, bytes, seed);
}

struct StreamingChecksum64::State {
  XXH64_state_t xxh;
};

StreamingChecksum64::StreamingChecksum64(std::uint64_t seed)
    : state_(std::make_unique<State>()) {
  XXH64_reset(&state_->xxh, seed);
}

StreamingChecksum64::~StreamingChecksum64() = default;

void StreamingChecksum64::Update(const void* data, std::size_t bytes) noexcept {
  XXH64_update(&state_->xxh, data, bytes);
}

std::uint64_t StreamingChecksum64::Digest() const noexcept {
  return XXH64_digest(&state_->xxh);
}

void SealRegion(char* region, std::size_t checked_bytes,
                std::uint64_t seed) noexcept {
  StoreFixed<std::uint64_t>(region + checked_bytes,
                            Checksum64(region, checked_bytes, seed));
}

bool RegionSealed(const char* region, std::size_t checked_bytes,
                  std::uint64_t seed) noexcept {
  return LoadFixed<std::uint64_t>(region + checked_bytes) ==
         Checksum64(region, checked_bytes, seed);
}

void AppendSeal(std::string* out, std::uint64_t seed) {
  PutFixed<std::uint64_t>(out, Checksum64(out->data(), out->size(), seed));
}

SealedHeaderCheck CheckSealedHeader(std::span<const char> in,
                                    std::uint64_t magic, std::uint32_t version,
                                    std::size_t checked_bytes,
                                    std::uint64_t seed) noexcept {
  if (in.size() < checked_bytes + kSealBytes || checked_bytes < 12) {
    return SealedHeaderCheck::kTruncated;
  }
  const char* p = in.data();
  if (LoadFixed<std::uint64_t>(p) != magic) {
    return SealedHeaderCheck::kWrongMagic;
  }
  if (!RegionSealed(p, checked_bytes, seed)) {
    return SealedHeaderCheck::kBadChecksum;
  }
  if (LoadFixed<std::uint32_t>(p + 8) != version) {
    return SealedHeaderCheck::kWrongVersion;
  }
  return SealedHeaderCheck::kValid;
}

Status UnsupportedVersionError(std::string_view format,
                               std::span<const char> header,
                               std::uint32_t supported) {
  const std::uint32_t found = LoadFixed<std::uint32_t>(header.data() + 8);
  return FailedPreconditionError(
      std::string(format) + " format version " + std::to_string(found) +
      " is not supported (this build reads " + std::to_string(supported) + ")");
}

Status VerifySealedHeader(std::span<const char> in, std::uint64_t magic,
                          std::uint32_t version, std::size_t checked_bytes,
                          std::uint64_t seed,
                          const SealedHeaderMessages& messages) {
  switch (CheckSealedHeader(in, magic, version, checked_bytes, seed)) {
    case SealedHeaderCheck::kValid:
      return Status::Ok();
    case SealedHeaderCheck::kTruncated:
      return DataLossError(messages.truncated);
    case SealedHeaderCheck::kWrongMagic:
      return DataLossError(messages.wrong_magic);
    case SealedHeaderCheck::kBadChecksum:
      return DataLossError(messages.bad_checksum);
    case SealedHeaderCheck::kWrongVersion:
      return UnsupportedVersionError(messages.format, in, version);
  }
  return InternalError("unknown sealed header check");
}

}  // namespace base_internal
CAIRN_NAMESPACE_END
