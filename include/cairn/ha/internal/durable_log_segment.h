// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// One durable log segment read front to back through a bounded buffer, and
// the segment names of a log directory: the machinery FileDurableLog::Open,
// DurableLogReader and cairn-inspect share (docs/durable_log.md has the
// format). Hosts use DurableLogReader (cairn/ha/file_durable_log.h).
//
// Thread safety: a SegmentStream is used by one thread at a time; the
// functions may run on any thread.

#ifndef CAIRN_HA_INTERNAL_DURABLE_LOG_SEGMENT_H_
#define CAIRN_HA_INTERNAL_DURABLE_LOG_SEGMENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/base/env.h"
#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/directory/durable_log.h"

CAIRN_NAMESPACE_BEGIN
namespace durable_log_internal {

// The first LSN a segment file name ("<20 digits>.log") says, or 0 if it is
// not one.
Lsn ParseSegmentName(const std::string& name);
// The first LSNs of the segments in `dir`, ascending.
Result<std::vector<Lsn>> ListSegments(Env& env, const std::string& dir);

enum class FrameRead : std::uint8_t {
  kFrame,       // a whole, checksum-valid frame
  kEnd,         // the segment ends exactly here
  kIncomplete,  // fewer bytes than the frame needs
  kBad,         // a length of 0 or over the limit, or a checksum mismatch
};

struct Frame {
  Lsn lsn = 0;
  std::string_view body;    // valid until the stream's next call
  std::uint64_t bytes = 0;  // frame header + body
};

// One segment read front to back through a bounded buffer (at most
// max(read_bytes, frame + max_record_bytes) bytes).
class SegmentStream {
 public:
  SegmentStream(std::unique_ptr<FileHandle> file, std::size_t max_record_bytes,
                std::size_t read_bytes)
      : file_(std::move(file)),
        max_record_bytes_(max_record_bytes),
        read_bytes_(read_bytes) {}
  virtual ~SegmentStream() = default;
  SegmentStream(const SegmentStream&) = delete;
  SegmentStream& operator=(const SegmentStream&) = delete;

  // Opens the segment at `path` and checks its header: kDataLoss for a
  // file that is not a segment or a damaged header, kFailedPrecondition for
  // another format version, the Env's error.
  static Status Open(Env& env, const std::string& path, FileOpenMode mode,
                     std::size_t max_record_bytes, std::size_t read_bytes,
                     std::unique_ptr<SegmentStream>* out);

  // Reads and checks the header; the first frame follows it.
  Status ReadHeader(const std::string& path);
  // Reads the frame at offset() (does not move past it: Advance does).
  Result<FrameRead> Read(Frame* out);
  void Advance(const Frame& frame) { offset_ += frame.bytes; }
  // Whether a whole, checksum-valid frame starts anywhere after `damaged`
  // (probing every offset, hashing only where a plausible length starts).
  Result<bool> ValidFrameAfter(std::uint64_t damaged);

  std::uint64_t offset() const noexcept { return offset_; }
  Lsn first() const noexcept { return first_; }
  FileHandle& file() noexcept { return *file_; }
  std::unique_ptr<FileHandle> TakeFile() noexcept { return std::move(file_); }
  std::size_t capacity() const noexcept { return buf_.capacity(); }

 private:
  char* At(std::uint64_t offset) {
    return buf_.data() + static_cast<std::size_t>(offset - buf_at_);
  }
  // Forgets buffered bytes from `offset` on: a frame found unfinished is
  // read from the file again next time (a writer may finish it, or Open
  // may cut and rewrite it).
  void Invalidate(std::uint64_t offset);
  FrameRead Unfinished(FrameRead what) {
    Invalidate(offset_);
    return what;
  }
  // Makes the buffer hold [at, at + n) as far as the file has it; returns
  // how many of those bytes it holds (fewer only where the file ends).
  Result<std::size_t> Fill(std::uint64_t at, std::size_t n);

  std::unique_ptr<FileHandle> file_;
  const std::size_t max_record_bytes_;
  const std::size_t read_bytes_;
  Lsn first_ = 0;
  std::uint64_t offset_ = 0;
  std::vector<char> buf_;
  std::uint64_t buf_at_ = 0;  // file offset of buf_[0]
  std::size_t buf_len_ = 0;   // valid bytes in buf_
};

}  // namespace durable_log_internal
CAIRN_NAMESPACE_END

#endif  // CAIRN_HA_INTERNAL_DURABLE_LOG_SEGMENT_H_
