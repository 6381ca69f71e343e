// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Byte coding shared by cairn's file formats (the block log, the LogStore
// checkpoint, the durable log and its records, the snapshot):
//
//   - fixed-width little-endian integers, appended to a std::string
//     (PutFixed) or stored and loaded at a position in a buffer
//     (StoreFixed, LoadFixed);
//   - the formats' checksum, XXH64 with a per-format seed (Checksum64,
//     StreamingChecksum64); xxHash itself stays in src/base/coding.cc;
//   - sealed regions: a run of fields followed by the u64 checksum of those
//     fields (SealRegion, RegionSealed, AppendSeal), and the check of a
//     sealed header that starts with a magic u64 and a version u32
//     (CheckSealedHeader, UnsupportedVersionError, or both as one status:
//     VerifySealedHeader).
//
// Machinery: hosts never include it. Every component may (base is the
// floor of the dependency order).
//
// Thread safety: pure functions over caller buffers; a StreamingChecksum64
// is a plain object its owner guards.

#ifndef CAIRN_BASE_INTERNAL_CODING_H_
#define CAIRN_BASE_INTERNAL_CODING_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "cairn/base/status.h"
#include "cairn/base/version.h"

// Every integer in every cairn file is little-endian, and so is every
// target cairn builds for, so fixed-width coding is a plain copy.
static_assert(std::endian::native == std::endian::little,
              "cairn's file formats are little-endian");

CAIRN_NAMESPACE_BEGIN
namespace base_internal {

template <typename T>
concept FixedWidthInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Appends `value` as sizeof(T) little-endian bytes.
template <FixedWidthInteger T>
void PutFixed(std::string* out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out->append(bytes, sizeof(T));
}
// Stores `value` at out[0, sizeof(T)).
template <FixedWidthInteger T>
void StoreFixed(char* out, T value) noexcept {
  std::memcpy(out, &value, sizeof(T));
}
// Loads a T from in[0, sizeof(T)).
template <FixedWidthInteger T>
T LoadFixed(const char* in) noexcept {
  T value;
  std::memcpy(&value, in, sizeof(T));
  return value;
}

// XXH64 of `bytes` bytes at `data` with `seed`: the checksum of every
// cairn format (each picks its own seeds).
std::uint64_t Checksum64(const void* data, std::size_t bytes,
                         std::uint64_t seed) noexcept;

// Checksum64 of bytes fed in pieces: Update(a); Update(b) then Digest()
// equals Checksum64 of a followed by b. Allocates its state once.
class StreamingChecksum64 {
 public:
  explicit StreamingChecksum64(std::uint64_t seed);
  ~StreamingChecksum64();
  StreamingChecksum64(const StreamingChecksum64&) = delete;
  StreamingChecksum64& operator=(const StreamingChecksum64&) = delete;

  void Update(const void* data, std::size_t bytes) noexcept;
  std::uint64_t Digest() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Bytes of the checksum that seals a region.
inline constexpr std::size_t kSealBytes = 8;

// Stores Checksum64(region, checked_bytes, seed) at region + checked_bytes.
void SealRegion(char* region, std::size_t checked_bytes,
                std::uint64_t seed) noexcept;
// Whether the u64 at region + checked_bytes is the checksum of the
// checked_bytes before it.
bool RegionSealed(const char* region, std::size_t checked_bytes,
                  std::uint64_t seed) noexcept;
// Appends the checksum of everything in *out so far.
void AppendSeal(std::string* out, std::uint64_t seed);

// What CheckSealedHeader found, in the order it checks.
enum class SealedHeaderCheck : std::uint8_t {
  kValid,
  kTruncated,     // shorter than checked_bytes + kSealBytes
  kWrongMagic,    // the first u64 is not `magic`
  kBadChecksum,   // the seal does not match
  kWrongVersion,  // intact, but the u32 at offset 8 is not `version`
};
// Checks a sealed header laid out as magic u64 | version u32 | ... with its
// seal at checked_bytes. The caller turns the answer into its own status.
SealedHeaderCheck CheckSealedHeader(std::span<const char> in,
                                    std::uint64_t magic, std::uint32_t version,
                                    std::size_t checked_bytes,
                                    std::uint64_t seed) noexcept;
// The kFailedPrecondition for kWrongVersion: "<format> format version <the
// header's> is not supported (this build reads <supported>)".
Status UnsupportedVersionError(std::string_view format,
                               std::span<const char> header,
                               std::uint32_t supported);

// What a format says when its sealed header is not valid: the kDataLoss
// messages of CheckSealedHeader's failures, and the format's name for
// UnsupportedVersionError.
struct SealedHeaderMessages {
  std::string_view format;
  std::string_view truncated;
  std::string_view wrong_magic;
  std::string_view bad_checksum;
};
// CheckSealedHeader as a status: OK, kDataLoss with the matching message,
// or UnsupportedVersionError(messages.format, in, version).
Status VerifySealedHeader(std::span<const char> in, std::uint64_t magic,
                          std::uint32_t version, std::size_t checked_bytes,
                          std::uint64_t seed,
                          const SealedHeaderMessages& messages);

}  // namespace base_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_BASE_INTERNAL_CODING_H_
