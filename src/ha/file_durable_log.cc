// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/ha/file_durable_log.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "cairn/base/check.h"
#include "cairn/base/internal/coding.h"
#include "cairn/ha/internal/durable_log_segment.h"

CAIRN_NAMESPACE_BEGIN
namespace durable_log_internal {

using base_internal::Checksum64;
using base_internal::LoadFixed;
using base_internal::PutFixed;
using base_internal::StoreFixed;

constexpr std::uint64_t kHeaderSeed = kDurableLogHeaderSeed;
constexpr std::uint64_t kRecordSeed = kDurableLogRecordSeed;
constexpr std::size_t kV1HeaderBytes = 16;
constexpr char kSegmentSuffix[] = ".log";
constexpr std::size_t kSegmentDigits = 20;
constexpr std::size_t kOpenReadBytes = std::size_t{1} << 20;
constexpr std::size_t kInitialBuffer = 4096;

// The Env's error, with the prefix every durable-log message carries.
Status InDurableLog(const Status& error) {
  return Status(error.code(), "durable log: " + std::string(error.message()));
}

// XXH64 over the frame's LSN bytes followed by its body, seeded with the
// length. `frame` is a whole frame in a writable buffer: the LSN is copied
// over the checksum field (right before the body) for one contiguous hash,
// and the field is restored.
std::uint64_t FrameChecksum(char* frame, std::uint32_t length) {
  char saved[8];
  std::memcpy(saved, frame + 12, 8);
  std::memcpy(frame + 12, frame + 4, 8);
  const std::uint64_t sum =
      Checksum64(frame + 12, 8 + std::size_t{length}, kRecordSeed ^ length);
  std::memcpy(frame + 12, saved, 8);
  return sum;
}

// The header's checksum is the low half of an XXH64 of the bytes before it.
std::uint32_t HeaderChecksum(const char* header, std::size_t bytes) {
  return static_cast<std::uint32_t>(Checksum64(header, bytes, kHeaderSeed));
}

std::string EncodeHeader(Lsn first) {
  std::string h;
  PutFixed<std::uint64_t>(&h, kDurableLogMagic);
  PutFixed<std::uint32_t>(&h, kDurableLogFormatVersion);
  PutFixed<std::uint32_t>(&h, 0);
  PutFixed<std::uint64_t>(&h, first);
  PutFixed<std::uint32_t>(&h, HeaderChecksum(h.data(), h.size()));
  return h;
}

// Checks a segment header (`n` bytes of it available) and returns its first
// LSN.
Status CheckHeader(const char* p, std::size_t n, const std::string& path,
                   Lsn* first) {
  if (n < 12 || LoadFixed<std::uint64_t>(p) != kDurableLogMagic) {
    return DataLossError(
        "not a cairn durable log segment (short or bad magic): " + path);
  }
  const auto version = LoadFixed<std::uint32_t>(p + 8);
  if (version != kDurableLogFormatVersion) {
    // Another version whose own header checks out (version 1: 16 bytes
    // sealed by a checksum at offset 12; a later one assumed laid out as
    // this one) is a precondition, anything else damage.
    const bool v1 = version == 1 && n >= kV1HeaderBytes &&
                    LoadFixed<std::uint32_t>(p + 12) == HeaderChecksum(p, 12);
    const bool later =
        n >= kDurableLogHeaderBytes &&
        LoadFixed<std::uint32_t>(p + 24) == HeaderChecksum(p, 24);
    if (v1 || later) {
      return FailedPreconditionError(
          "durable log of format version " + std::to_string(version) +
          ", not " + std::to_string(kDurableLogFormatVersion) + ": " + path);
    }
    return DataLossError("durable log header damaged: " + path);
  }
  if (n < kDurableLogHeaderBytes ||
      LoadFixed<std::uint32_t>(p + 24) != HeaderChecksum(p, 24)) {
    return DataLossError("durable log header truncated or damaged: " + path);
  }
  *first = LoadFixed<std::uint64_t>(p + 16);
  return Status::Ok();
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  return dir + "/" + name;
}

// The first LSN a segment file name says, or 0 if it is not one.
Lsn ParseSegmentName(const std::string& name) {
  const std::size_t suffix = sizeof(kSegmentSuffix) - 1;
  if (name.size() != kSegmentDigits + suffix ||
      name.compare(kSegmentDigits, suffix, kSegmentSuffix) != 0) {
    return 0;
  }
  Lsn lsn = 0;
  for (std::size_t i = 0; i < kSegmentDigits; ++i) {
    const char c = name[i];
    if (c < '0' || c > '9') return 0;
    const Lsn digit = static_cast<Lsn>(c - '0');
    if (lsn > (~Lsn{0} - digit) / 10) return 0;
    lsn = lsn * 10 + digit;
  }
  return lsn;
}

// The first LSNs of the segments in `dir`, ascending.
Result<std::vector<Lsn>> ListSegments(Env& env, const std::string& dir) {
  Result<std::vector<std::string>> names = env.List(dir);
  if (!names.ok()) return InDurableLog(names.status());
  std::vector<Lsn> firsts;
  for (const std::string& name : *names) {
    if (const Lsn first = ParseSegmentName(name); first != 0) {
      firsts.push_back(first);
    }
  }
  std::sort(firsts.begin(), firsts.end());
  return firsts;
}

std::string NormalizeDir(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// Creates the segment starting at `first`: header written and synced under
// <name>.tmp, renamed into place, directory synced, whatever options.sync
// says (a segment that is not there after a crash loses every record), so
// a crash leaves no segment or a whole header, never a headerless file.
Status CreateSegment(Env& env, const std::string& dir, Lsn first,
                     std::unique_ptr<FileHandle>* out) {
  const std::string path = JoinPath(dir, DurableLogSegmentName(first));
  const std::string tmp = path + ".tmp";
  // Truncating, not exclusive: a crash may have left a .tmp behind.
  Result<std::unique_ptr<FileHandle>> made =
      env.NewFile(tmp, FileOpenMode::kCreateOrTruncate);
  if (!made.ok()) return made.status();
  FileHandle& file = **made;
  CAIRN_RETURN_IF_ERROR(file.WriteAt(0, EncodeHeader(first)));
  CAIRN_RETURN_IF_ERROR(file.Sync());
  CAIRN_RETURN_IF_ERROR(env.Rename(tmp, path));
  CAIRN_RETURN_IF_ERROR(env.SyncDir(dir));
  *out = std::move(made).value();
  return Status::Ok();
}

Status SegmentStream::Open(Env& env, const std::string& path, FileOpenMode mode,
                           std::size_t max_record_bytes, std::size_t read_bytes,
                           std::unique_ptr<SegmentStream>* out) {
  Result<std::unique_ptr<FileHandle>> file = env.NewFile(path, mode);
  if (!file.ok()) return InDurableLog(file.status());
  std::unique_ptr<SegmentStream> stream(new (std::nothrow) SegmentStream(
      std::move(*file), max_record_bytes, read_bytes));
  if (stream == nullptr) return ResourceExhaustedError("durable log reader");
  CAIRN_RETURN_IF_ERROR(stream->ReadHeader(path));
  *out = std::move(stream);
  return Status::Ok();
}

Status SegmentStream::ReadHeader(const std::string& path) {
  Result<std::size_t> n = Fill(0, kDurableLogHeaderBytes);
  if (!n.ok()) return n.status();
  CAIRN_RETURN_IF_ERROR(CheckHeader(buf_.data(), *n, path, &first_));
  offset_ = kDurableLogHeaderBytes;
  return Status::Ok();
}

Result<FrameRead> SegmentStream::Read(Frame* out) {
  Result<std::size_t> n = Fill(offset_, kDurableLogFrameBytes);
  if (!n.ok()) return n.status();
  if (*n == 0) return FrameRead::kEnd;
  if (*n < kDurableLogFrameBytes) return Unfinished(FrameRead::kIncomplete);
  const auto length = LoadFixed<std::uint32_t>(At(offset_));
  if (length == 0 || length > max_record_bytes_) {
    return Unfinished(FrameRead::kBad);
  }
  const std::size_t want = kDurableLogFrameBytes + length;
  if (want > read_bytes_) {
    // Only grow the buffer for bytes the file has.
    Result<std::uint64_t> size = file_->Size();
    if (!size.ok()) return InDurableLog(size.status());
    if (*size < offset_ + want) return Unfinished(FrameRead::kIncomplete);
  }
  n = Fill(offset_, want);
  if (!n.ok()) return n.status();
  if (*n < want) return Unfinished(FrameRead::kIncomplete);
  char* frame = At(offset_);
  if (FrameChecksum(frame, length) != LoadFixed<std::uint64_t>(frame + 12)) {
    return Unfinished(FrameRead::kBad);
  }
  out->lsn = LoadFixed<std::uint64_t>(frame + 4);
  out->body = std::string_view(frame + kDurableLogFrameBytes, length);
  out->bytes = want;
  return FrameRead::kFrame;
}

Result<bool> SegmentStream::ValidFrameAfter(std::uint64_t damaged) {
  for (std::uint64_t at = damaged + 1;; ++at) {
    Result<std::size_t> n = Fill(at, kDurableLogFrameBytes);
    if (!n.ok()) return n.status();
    if (*n < kDurableLogFrameBytes) break;
    const auto length = LoadFixed<std::uint32_t>(At(at));
    if (length == 0 || length > max_record_bytes_) continue;
    const std::size_t want = kDurableLogFrameBytes + length;
    if (want > read_bytes_) {
      Result<std::uint64_t> size = file_->Size();
      if (!size.ok()) return InDurableLog(size.status());
      if (*size < at + want) continue;
    }
    n = Fill(at, want);
    if (!n.ok()) return n.status();
    if (*n < want) continue;
    char* frame = At(at);
    if (FrameChecksum(frame, length) == LoadFixed<std::uint64_t>(frame + 12)) {
      return true;
    }
  }
  Invalidate(damaged);
  return false;
}

void SegmentStream::Invalidate(std::uint64_t offset) {
  if (offset < buf_at_) {
    buf_len_ = 0;
  } else if (offset - buf_at_ < buf_len_) {
    buf_len_ = static_cast<std::size_t>(offset - buf_at_);
  }
}

Result<std::size_t> SegmentStream::Fill(std::uint64_t at, std::size_t n) {
  const std::uint64_t end = buf_at_ + buf_len_;
  if (at >= buf_at_ && at + n <= end) return n;
  if (at >= buf_at_ && at <= end) {
    const auto keep = static_cast<std::size_t>(end - at);
    if (keep > 0) std::memmove(buf_.data(), At(at), keep);
    buf_len_ = keep;
  } else {
    buf_len_ = 0;
  }
  buf_at_ = at;
  // Grown as reads need it, doubling up to read_bytes (or one frame):
  // a small segment never costs a big buffer.
  const std::size_t size = std::max(
      n, std::min(read_bytes_, std::max(kInitialBuffer, 2 * buf_.size())));
  if (buf_.size() < size) {
    try {
      buf_.reserve(size);  // exactly: resize alone may double
      buf_.resize(size);
    } catch (const std::bad_alloc&) {
      return ResourceExhaustedError("durable log reader buffer");
    }
  }
  Result<std::size_t> read = file_->ReadAt(
      buf_at_ + buf_len_,
      std::span<char>(buf_.data() + buf_len_, buf_.size() - buf_len_));
  if (!read.ok()) return InDurableLog(read.status());
  buf_len_ += *read;
  return std::min(n, buf_len_);
}

// Checks every existing segment in `dir` (streamed, in LSN order) and
// returns the newest one's handle, its size after any cut, and the LSNs.
struct ScannedLog {
  std::unique_ptr<FileHandle> file;
  std::uint64_t end = 0;
  std::deque<Lsn> segments;
  Lsn last_lsn = 0;
};

Status ScanSegments(Env& env, const std::string& dir,
                    const std::vector<Lsn>& firsts,
                    const FileDurableLogOptions& options, ScannedLog* out) {
  Lsn last = 0;
  for (std::size_t i = 0; i < firsts.size(); ++i) {
    const bool newest = i + 1 == firsts.size();
    const std::string path = JoinPath(dir, DurableLogSegmentName(firsts[i]));
    std::unique_ptr<SegmentStream> stream;
    CAIRN_RETURN_IF_ERROR(SegmentStream::Open(
        env, path, newest ? FileOpenMode::kReadWrite : FileOpenMode::kReadOnly,
        options.max_record_bytes, kOpenReadBytes, &stream));
    if (stream->first() != firsts[i]) {
      return DataLossError("durable log segment's header says first LSN " +
                           std::to_string(stream->first()) + ": " + path);
    }
    if (i > 0 && firsts[i] != last + 1) {
      return DataLossError(
          "durable log segments leave a gap: LSNs " + std::to_string(last + 1) +
          " .. " + std::to_string(firsts[i] - 1) + " missing before " + path);
    }
    last = firsts[i] - 1;
    for (;;) {
      Frame frame;
      Result<FrameRead> read = stream->Read(&frame);
      if (!read.ok()) return read.status();
      if (*read == FrameRead::kEnd) break;
      const auto at = [&] {
        return " at offset " + std::to_string(stream->offset()) + ": " + path;
      };
      if (*read == FrameRead::kFrame) {
        if (frame.lsn != last + 1) {
          return DataLossError("durable log LSN " + std::to_string(frame.lsn) +
                               " out of sequence (expected " +
                               std::to_string(last + 1) + ")" + at());
        }
        ++last;
        stream->Advance(frame);
        continue;
      }
      const std::string where = at();
      const std::string what = *read == FrameRead::kIncomplete
                                   ? "durable log record truncated"
                                   : "durable log record damaged";
      if (!newest) {
        std::string message = what;
        message += " in a segment that is not the newest";
        message += where;
        return DataLossError(message);
      }
      if (!options.truncate_damaged_tail) {
        return DataLossError(what + where +
                             " (truncate_damaged_tail drops a torn tail)");
      }
      Result<bool> follows = stream->ValidFrameAfter(stream->offset());
      if (!follows.ok()) return follows.status();
      if (*follows) {
        return DataLossError(what + where +
                             ", and a valid record follows: damage inside "
                             "the log, not a torn tail");
      }
      Status cut = stream->file().Truncate(stream->offset());
      if (cut.ok()) cut = stream->file().Sync();
      if (!cut.ok()) return InDurableLog(cut);
      break;
    }
    if (newest) {
      out->end = stream->offset();
      out->file = stream->TakeFile();
    }
    out->segments.push_back(firsts[i]);
  }
  out->last_lsn = last;
  return Status::Ok();
}

}  // namespace durable_log_internal

using base_internal::StoreFixed;
using durable_log_internal::Frame;
using durable_log_internal::FrameRead;
using durable_log_internal::InDurableLog;
using durable_log_internal::JoinPath;
using durable_log_internal::SegmentStream;

std::string DurableLogSegmentName(Lsn first) {
  std::string digits = std::to_string(first);
  return std::string(durable_log_internal::kSegmentDigits - digits.size(),
                     '0') +
         digits + durable_log_internal::kSegmentSuffix;
}

// ---------------------------------------------------------------------------
// FileDurableLog

struct FileDurableLog::OpenedLog {
  std::unique_ptr<FileLock> lock;
  Env* env = nullptr;
  durable_log_internal::ScannedLog log;
};

Result<std::unique_ptr<FileDurableLog>> FileDurableLog::Open(
    const std::string& path, FileDurableLogOptions options) {
  if (path.empty()) return InvalidArgumentError("durable log path is empty");
  if (options.max_record_bytes == 0 ||
      options.max_record_bytes > kDurableLogMaxRecordBytes) {
    return InvalidArgumentError(
        "durable log max_record_bytes must be in 1 .. 1 GiB");
  }
  if (options.max_pending_bytes <
      options.max_record_bytes + kDurableLogFrameBytes) {
    return InvalidArgumentError(
        "durable log max_pending_bytes must hold one framed record of "
        "max_record_bytes");
  }
  if (options.segment_bytes == 0) {
    return InvalidArgumentError("durable log segment_bytes must be at least 1");
  }
  if (options.clock == nullptr) {
    return InvalidArgumentError("durable log clock is null");
  }
  Env& env = *Env::OrDefault(options.env);
  const std::string dir = durable_log_internal::NormalizeDir(path);
  if (Status made = env.CreateDir(dir);
      !made.ok() && made.code() != StatusCode::kAlreadyExists) {
    return InDurableLog(made);
  }
  // One writer at a time, in this process or another.
  Result<std::unique_ptr<FileLock>> lock = env.LockFile(JoinPath(dir, "LOCK"));
  if (!lock.ok()) {
    if (lock.status().code() == StatusCode::kFailedPrecondition) {
      return FailedPreconditionError("durable log " + dir +
                                     " is open elsewhere (LOCK is held)");
    }
    // A file where the directory should be.
    if (Result<std::unique_ptr<FileHandle>> file =
            env.NewFile(dir, FileOpenMode::kReadOnly);
        file.ok()) {
      return InvalidArgumentError("durable log path is not a directory: " +
                                  dir);
    }
    return InDurableLog(lock.status());
  }
  Result<std::vector<std::string>> names = env.List(dir);
  if (!names.ok()) return InDurableLog(names.status());
  std::vector<Lsn> firsts;
  for (const std::string& name : *names) {
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) {
      // A segment whose creation a crash interrupted: never renamed, so
      // never written to.
      if (Status removed = env.Remove(JoinPath(dir, name)); !removed.ok()) {
        return InDurableLog(removed);
      }
    } else if (const Lsn first = durable_log_internal::ParseSegmentName(name);
               first != 0) {
      firsts.push_back(first);
    }
  }
  std::sort(firsts.begin(), firsts.end());
  OpenedLog opened;
  opened.env = &env;
  durable_log_internal::ScannedLog& log = opened.log;
  if (firsts.empty()) {
    // A new log: the directory's own entry must be durable before anything
    // in it is acknowledged (synced whenever the log is new, as an earlier
    // Open may have made the directory and failed before its sync).
    const Lsn first = options.start_lsn != 0 ? options.start_lsn : 1;
    Status s = env.SyncDir(DirectoryOf(dir));
    if (s.ok())
      s = durable_log_internal::CreateSegment(env, dir, first, &log.file);
    if (!s.ok()) return InDurableLog(s);
    log.end = kDurableLogHeaderBytes;
    log.segments.push_back(first);
    log.last_lsn = first - 1;
  } else {
    CAIRN_RETURN_IF_ERROR(
        durable_log_internal::ScanSegments(env, dir, firsts, options, &log));
    if (options.start_lsn != 0 && options.start_lsn != log.last_lsn + 1) {
      return FailedPreconditionError("durable log " + dir + " ends at LSN " +
                                     std::to_string(log.last_lsn) +
                                     ", start_lsn is " +
                                     std::to_string(options.start_lsn));
    }
    if (options.sync) {
      // What the scan found may not be synced (an earlier writer died
      // between its write and its sync): make it and the segment names
      // durable before anything is appended after them.
      Status synced = log.file->Sync();
      if (synced.ok()) synced = env.SyncDir(dir);
      if (!synced.ok()) return InDurableLog(synced);
    }
  }
  opened.lock = std::move(lock).value();
  std::unique_ptr<FileDurableLog> made(new (std::nothrow) FileDurableLog(
      std::move(opened), dir, std::move(options)));
  if (made == nullptr) return ResourceExhaustedError("FileDurableLog");
  return made;
}

FileDurableLog::FileDurableLog(OpenedLog opened, std::string dir,
                               FileDurableLogOptions options)
    : lock_(std::move(opened.lock)),
      dir_(std::move(dir)),
      options_(std::move(options)),
      env_(*opened.env),
      file_(std::move(opened.log.file)),
      end_(opened.log.end),
      segments_(std::move(opened.log.segments)),
      durable_lsn_(opened.log.last_lsn) {}

FileDurableLog::~FileDurableLog() = default;

Result<LogReservation> FileDurableLog::Reserve(std::size_t bytes) {
  if (bytes > options_.max_record_bytes) {
    return InvalidArgumentError("durable record over max_record_bytes");
  }
  const std::uint64_t charge = bytes + kDurableLogFrameBytes;
  Slot slot;
  slot.frame.reserve(charge);  // allocated here, before any lock
  slot.charged = charge;
  MutexLock lock(&mu_);
  if (!error_.ok()) {
    ++totals_.refused_failed;
    return error_;
  }
  if (pending_bytes_ + charge > options_.max_pending_bytes) {
    ++totals_.refused_pending;
    return ResourceExhaustedError("durable log: max_pending_bytes reached");
  }
  pending_bytes_ += charge;
  const std::uint64_t id = next_id_++;
  slots_.emplace(id, std::move(slot));
  return LogReservation{id, bytes};
}

Result<LogReservation> FileDurableLog::ReserveBatch(std::size_t records,
                                                    std::size_t bytes) {
  if (records == 0) {
    return InvalidArgumentError("durable log: a batch of no record");
  }
  const std::uint64_t charge =
      bytes + std::uint64_t{records} * kDurableLogFrameBytes;
  if (charge > options_.max_pending_bytes) {
    return InvalidArgumentError("durable log: batch over max_pending_bytes");
  }
  Slot slot;
  // The first record's buffer, allocated here, before any lock.
  slot.frame.reserve(charge / records);
  slot.charged = charge;
  slot.batch = true;
  slot.more.reserve(records - 1);
  MutexLock lock(&mu_);
  if (!error_.ok()) {
    ++totals_.refused_failed;
    return error_;
  }
  if (pending_bytes_ + charge > options_.max_pending_bytes) {
    ++totals_.refused_pending;
    return ResourceExhaustedError("durable log: max_pending_bytes reached");
  }
  pending_bytes_ += charge;
  const std::uint64_t id = next_id_++;
  slots_.emplace(id, std::move(slot));
  return LogReservation{id, bytes};
}

Status FileDurableLog::Append(const LogReservation& reservation,
                              std::string_view record) {
  if (record.empty() || record.size() > options_.max_record_bytes) {
    return InvalidArgumentError(
        "durable record empty or over max_record_bytes");
  }
  MutexLock lock(&mu_);
  if (!error_.ok()) {
    ++totals_.refused_failed;
    return error_;
  }
  auto it = slots_.find(reservation.id);
  CAIRN_CHECK_MSG(
      it != slots_.end() &&
          (it->second.state == SlotState::kReserved ||
           (it->second.batch && it->second.state == SlotState::kAppended)),
      "Append needs a reservation that has no record yet, or a batch's");
  // Everything that allocates comes first, undone if a later step throws
  // (std::bad_alloc): a throwing Append leaves no record behind, as the
  // directory takes it for "nothing changed" (DurableLog::Append).
  std::string frame;
  frame.reserve(kDurableLogFrameBytes + record.size());
  frame.assign(kDurableLogFrameBytes, '\0');
  frame.append(record);
  if (it->second.state == SlotState::kAppended) {
    // A batch's next record: a slot of its own, in append order, charged
    // from what the batch reserved while that lasts.
    Slot& head = it->second;
    const std::uint64_t id = next_id_;
    auto made = slots_.emplace(id, Slot());
    try {
      order_.push_back(id);
      try {
        head.more.push_back(id);
      } catch (...) {
        order_.pop_back();
        throw;
      }
    } catch (...) {
      slots_.erase(made.first);
      throw;
    }
    ++next_id_;
    Slot& more = made.first->second;
    more.state = SlotState::kAppended;
    more.frame = std::move(frame);
    more.charged = more.frame.size();
    const std::uint64_t spare = head.charged - head.frame.size();
    const std::uint64_t taken = std::min<std::uint64_t>(spare, more.charged);
    head.charged -= taken;
    pending_bytes_ += more.charged - taken;
    more.seq = ++appended_seq_;
    ++totals_.appended_records;
    totals_.appended_bytes += record.size();
    return Status::Ok();
  }
  order_.push_back(reservation.id);
  Slot& slot = it->second;
  // The frame's length, LSN and checksum are filled in when it is written
  // (the LSN is assigned then).
  slot.frame = std::move(frame);
  if (slot.frame.size() > slot.charged) {
    pending_bytes_ += slot.frame.size() - slot.charged;
    slot.charged = slot.frame.size();
  }
  slot.state = SlotState::kAppended;
  slot.seq = ++appended_seq_;
  ++totals_.appended_records;
  totals_.appended_bytes += record.size();
  return Status::Ok();
}

bool FileDurableLog::FrontResolved() const {
  if (order_.empty()) return false;
  const SlotState state = slots_.at(order_.front()).state;
  return state == SlotState::kFinalized || state == SlotState::kCancelled;
}

void FileDurableLog::FlushResolved(std::unique_lock<Mutex>& lock) {
  flushing_ = true;
  std::vector<std::string> frames;
  std::uint64_t last_seq = written_seq_;
  while (FrontResolved()) {
    auto it = slots_.find(order_.front());
    if (it->second.state == SlotState::kFinalized) {
      frames.push_back(std::move(it->second.frame));
    }
    last_seq = it->second.seq;
    pending_bytes_ -= it->second.charged;
    slots_.erase(it);
    order_.pop_front();
  }
  // LSNs in append order, gapless: cancelled records were skipped above.
  const Lsn first = durable_lsn_ + 1;
  const Lsn last = durable_lsn_ + frames.size();
  // A new segment between batches, only once the current one holds a
  // record (its name, its first LSN, is then below `first`).
  const bool rotate = !frames.empty() && segments_.back() < first &&
                      (rotate_requested_ || end_ >= options_.segment_bytes);
  if (rotate) rotate_requested_ = false;
  std::uint64_t offset = end_;
  lock.unlock();

  std::string batch;
  Status s;
  bool rotated = false;
  bool write_failed = false;
  bool sync_failed = false;
  if (!frames.empty()) {
    std::size_t bytes = 0;
    for (const std::string& f : frames) bytes += f.size();
    try {
      batch.reserve(bytes);
    } catch (const std::bad_alloc&) {
      s = ResourceExhaustedError("durable log: batch buffer");
    }
    Lsn lsn = first;
    for (std::string& f : frames) {
      if (!s.ok()) break;
      const auto length =
          static_cast<std::uint32_t>(f.size() - kDurableLogFrameBytes);
      StoreFixed<std::uint32_t>(f.data(), length);
      StoreFixed<std::uint64_t>(f.data() + 4, lsn++);
      StoreFixed<std::uint64_t>(
          f.data() + 12, durable_log_internal::FrameChecksum(f.data(), length));
      batch.append(f);
    }
    if (s.ok() && rotate) {
      // The old segment is complete on disk before its successor exists (a
      // reader or Open that finds segment k + 1 relies on segment k being
      // whole); with sync on, the last batch's sync did that already.
      if (!options_.sync) s = file_->Sync();
      std::unique_ptr<FileHandle> fresh;
      if (s.ok()) {
        s = durable_log_internal::CreateSegment(env_, dir_, first, &fresh);
      }
      if (s.ok()) {
        file_ = std::move(fresh);
        rotated = true;
        offset = kDurableLogHeaderBytes;
      }
    }
    if (s.ok()) {
      s = file_->WriteAt(offset, batch);
      if (!s.ok()) write_failed = true;
    }
    if (s.ok() && options_.sync) {
      const std::int64_t start = options_.clock->NowNanos();
      s = file_->Sync();
      const std::int64_t took = options_.clock->NowNanos() - start;
      sync_nanos_.Record(took > 0 ? static_cast<std::uint64_t>(took) : 0);
      if (!s.ok()) sync_failed = true;
    }
    if (!s.ok() && s.message().rfind("durable log", 0) != 0) {
      s = InDurableLog(s);
    }
    if (s.ok() && options_.on_batch_durable) options_.on_batch_durable(last);
  }

  lock.lock();
  mu_.AssertHeld();
  if (rotated) {
    segments_.push_back(first);
    end_ = kDurableLogHeaderBytes;
    ++totals_.rotations;
  }
  if (write_failed) ++totals_.write_errors;
  if (sync_failed) ++totals_.sync_errors;
  if (s.ok()) {
    end_ += batch.size();
    written_seq_ = last_seq;
    durable_lsn_ = last;
    durable_records_ += frames.size();
    if (!frames.empty()) {
      ++totals_.batches;
      totals_.written_bytes += batch.size();
    }
    if (!frames.empty() && options_.sync) ++syncs_;
  } else if (error_.ok()) {
    error_ = std::move(s);
  }
  flushing_ = false;
  resolved_.notify_all();
}

Status FileDurableLog::Finalize(const LogReservation& reservation,
                                std::span<const ObjectToken> tokens)
    CAIRN_NO_THREAD_SAFETY_ANALYSIS {
  bool durable = false;
  Status error;
  {
    std::unique_lock<Mutex> lock(mu_);
    auto it = slots_.find(reservation.id);
    CAIRN_CHECK_MSG(
        it != slots_.end() && it->second.state == SlotState::kAppended,
        "Finalize needs an appended record");
    it->second.state = SlotState::kFinalized;
    std::uint64_t seq = it->second.seq;
    for (const std::uint64_t more : it->second.more) {
      Slot& slot = slots_.at(more);
      slot.state = SlotState::kFinalized;
      seq = std::max(seq, slot.seq);
    }
    for (;;) {
      if (written_seq_ >= seq) {
        durable = true;
        break;
      }
      if (!error_.ok()) {
        error = error_;
        break;
      }
      if (!flushing_ && FrontResolved()) {
        FlushResolved(lock);
        continue;
      }
      resolved_.wait(lock);
    }
  }
  if (!durable) return error;
  if (options_.on_durable) options_.on_durable(tokens);
  return Status::Ok();
}

void FileDurableLog::Cancel(const LogReservation& reservation) noexcept {
  MutexLock lock(&mu_);
  auto it = slots_.find(reservation.id);
  CAIRN_CHECK_MSG(
      it != slots_.end() && (it->second.state == SlotState::kReserved ||
                             it->second.state == SlotState::kAppended),
      "Cancel needs an open reservation");
  if (it->second.state == SlotState::kReserved) {
    pending_bytes_ -= it->second.charged;
    slots_.erase(it);
    return;
  }
  // Appended: void it (and a batch's later records) in place; the next
  // flush drops them from the prefix.
  for (const std::uint64_t more : it->second.more) {
    Slot& slot = slots_.at(more);
    ++totals_.cancelled_records;
    slot.state = SlotState::kCancelled;
    slot.frame.clear();
  }
  ++totals_.cancelled_records;
  it->second.state = SlotState::kCancelled;
  it->second.frame.clear();
  resolved_.notify_all();
}

Status FileDurableLog::status() const {
  MutexLock lock(&mu_);
  return error_;
}

Lsn FileDurableLog::durable_lsn() const {
  MutexLock lock(&mu_);
  return durable_lsn_;
}

Lsn FileDurableLog::first_lsn() const {
  MutexLock lock(&mu_);
  return segments_.front();
}

Status FileDurableLog::Rotate() {
  MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  rotate_requested_ = true;
  return Status::Ok();
}

Result<std::size_t> FileDurableLog::DropThrough(Lsn lsn) {
  MutexLock drop(&drop_mu_);
  std::vector<Lsn> victims;
  {
    MutexLock lock(&mu_);
    // Segment i holds LSNs segments_[i] .. segments_[i + 1] - 1; the last
    // one is being written to and is never dropped.
    for (std::size_t i = 0; i + 1 < segments_.size(); ++i) {
      if (segments_[i + 1] - 1 > lsn) break;
      victims.push_back(segments_[i]);
    }
  }
  std::size_t removed = 0;
  for (const Lsn first : victims) {
    // Oldest first, the directory synced after each: a crash leaves the
    // newest segments as a contiguous run.
    Status s = env_.Remove(JoinPath(dir_, DurableLogSegmentName(first)));
    if (!s.ok() && s.code() != StatusCode::kNotFound) return InDurableLog(s);
    s = env_.SyncDir(dir_);
    {
      // Dropped from the list once its removal is durable (DropThrough
      // calls are serialized, so the front is `first`).
      MutexLock lock(&mu_);
      if (s.ok()) {
        segments_.pop_front();
        ++totals_.dropped_segments;
      }
    }
    if (!s.ok()) return InDurableLog(s);
    ++removed;
  }
  return removed;
}

std::uint64_t FileDurableLog::durable_records() const {
  MutexLock lock(&mu_);
  return durable_records_;
}

std::uint64_t FileDurableLog::syncs() const {
  MutexLock lock(&mu_);
  return syncs_;
}

std::size_t FileDurableLog::segments() const {
  MutexLock lock(&mu_);
  return segments_.size();
}

void FileDurableLog::VisitMetrics(MetricVisitor& visitor,
                                  std::span<const MetricLabel> labels) const {
  Totals t;
  std::uint64_t durable_records = 0;
  std::uint64_t syncs = 0;
  Lsn durable_lsn = 0;
  Lsn first_lsn = 0;
  std::size_t segments = 0;
  std::uint64_t pending_bytes = 0;
  std::size_t pending_records = 0;
  bool failed = false;
  {
    MutexLock lock(&mu_);
    t = totals_;
    durable_records = durable_records_;
    syncs = syncs_;
    durable_lsn = durable_lsn_;
    first_lsn = segments_.front();
    segments = segments_.size();
    pending_bytes = pending_bytes_;
    pending_records = slots_.size();
    failed = !error_.ok();
  }
  const HistogramSnapshot sync_time = sync_nanos_.Snapshot();
  LabelScope v(visitor, labels);
  const auto n = [](auto x) { return static_cast<double>(x); };
  v.CounterValue("cairn_durable_log_appended_records_total",
                 "Records appended (copied in, not yet written).",
                 t.appended_records);
  v.CounterValue("cairn_durable_log_appended_bytes_total",
                 "Bytes of record bodies appended.", t.appended_bytes);
  v.CounterValue("cairn_durable_log_cancelled_records_total",
                 "Appended records cancelled before they were written (they "
                 "never get an LSN).",
                 t.cancelled_records);
  v.CounterValue("cairn_durable_log_written_records_total",
                 "Records written and synced (with sync off: written).",
                 durable_records);
  v.CounterValue("cairn_durable_log_written_bytes_total",
                 "Frame bytes (20-byte frame header and body) written to "
                 "segments.",
                 t.written_bytes);
  v.CounterValue("cairn_durable_log_batches_total",
                 "Group-commit batches written (one write and one sync "
                 "each).",
                 t.batches);
  v.CounterValue("cairn_durable_log_syncs_total",
                 "Batch fdatasync calls that succeeded.", syncs);
  v.HistogramValue("cairn_durable_log_sync_seconds",
                   "Time of each batch fdatasync, failed ones included.",
                   sync_time);
  v.GaugeValue("cairn_durable_log_durable_lsn",
               "Highest LSN written and synced.", n(durable_lsn));
  v.GaugeValue("cairn_durable_log_first_lsn",
               "Lowest LSN the log still holds (durable_lsn + 1 when it "
               "holds none).",
               n(first_lsn));
  v.GaugeValue("cairn_durable_log_segments", "Segment files the log holds.",
               n(segments));
  v.CounterValue("cairn_durable_log_rotations_total",
                 "New segments started after the first (segment_bytes "
                 "reached, or Rotate()).",
                 t.rotations);
  v.CounterValue("cairn_durable_log_dropped_segments_total",
                 "Segments removed by DropThrough.", t.dropped_segments);
  v.GaugeValue("cairn_durable_log_pending_bytes",
               "Bytes reserved or appended and not yet written (bounded by "
               "max_pending_bytes).",
               n(pending_bytes));
  v.GaugeValue("cairn_durable_log_pending_records",
               "Reservations and records not yet written or cancelled.",
               n(pending_records));
  const MetricLabel pending[] = {{"reason", "pending_bytes"}};
  const MetricLabel failed_label[] = {{"reason", "failed"}};
  constexpr std::string_view kRefusedHelp =
      "Reserve and Append calls refused: max_pending_bytes reached, or the "
      "log failed.";
  v.CounterValue("cairn_durable_log_refused_total", kRefusedHelp,
                 t.refused_pending, pending);
  v.CounterValue("cairn_durable_log_refused_total", kRefusedHelp,
                 t.refused_failed, failed_label);
  v.CounterValue("cairn_durable_log_write_errors_total",
                 "Batch writes that failed (the first failure is sticky).",
                 t.write_errors);
  v.CounterValue("cairn_durable_log_sync_errors_total",
                 "Batch fdatasync calls that failed (the first failure is "
                 "sticky).",
                 t.sync_errors);
  v.GaugeValue("cairn_durable_log_failed",
               "1 once a write or sync failed: status() is the sticky error "
               "and every later append is refused; else 0.",
               failed ? 1.0 : 0.0);
}

// ---------------------------------------------------------------------------
// DurableLogReader

class DurableLogReader::Segment final : public SegmentStream {
 public:
  using SegmentStream::SegmentStream;
};

DurableLogReader::DurableLogReader(std::string dir, Lsn from,
                                   DurableLogReaderOptions options, Env& env)
    : dir_(std::move(dir)), options_(options), env_(env), next_lsn_(from) {}

DurableLogReader::~DurableLogReader() = default;

std::size_t DurableLogReader::buffer_capacity() const noexcept {
  return segment_ == nullptr ? 0 : segment_->capacity();
}

Result<std::unique_ptr<DurableLogReader>> DurableLogReader::Open(
    const std::string& dir, Lsn from, DurableLogReaderOptions options) {
  if (dir.empty()) return InvalidArgumentError("durable log path is empty");
  if (options.max_record_bytes == 0 ||
      options.max_record_bytes > kDurableLogMaxRecordBytes ||
      options.read_bytes == 0) {
    return InvalidArgumentError(
        "durable log reader: max_record_bytes must be in 1 .. 1 GiB and "
        "read_bytes at least 1");
  }
  Env& env = *Env::OrDefault(options.env);
  const std::string normal = durable_log_internal::NormalizeDir(dir);
  Result<std::vector<Lsn>> firsts =
      durable_log_internal::ListSegments(env, normal);
  if (!firsts.ok()) return firsts.status();
  if (firsts->empty()) {
    return NotFoundError("durable log " + normal + " holds no segment");
  }
  if (from == 0) from = firsts->front();
  // The newest segment starting at or before `from`.
  auto it = std::upper_bound(firsts->begin(), firsts->end(), from);
  if (it == firsts->begin()) {
    return OutOfRangeError("durable log " + normal + " starts at LSN " +
                           std::to_string(firsts->front()) + ", after " +
                           std::to_string(from) + " (dropped)");
  }
  std::unique_ptr<DurableLogReader> reader(
      new (std::nothrow) DurableLogReader(normal, from, options, env));
  if (reader == nullptr) return ResourceExhaustedError("DurableLogReader");
  CAIRN_RETURN_IF_ERROR(reader->OpenSegment(*std::prev(it)));
  return reader;
}

Status DurableLogReader::OpenSegment(Lsn first) {
  const std::string path = JoinPath(dir_, DurableLogSegmentName(first));
  Result<std::unique_ptr<FileHandle>> file =
      env_.NewFile(path, FileOpenMode::kReadOnly);
  if (!file.ok()) {
    if (file.status().code() == StatusCode::kNotFound) {
      return OutOfRangeError("durable log segment " + path +
                             " was dropped before it was read (LSN " +
                             std::to_string(first) + ")");
    }
    return InDurableLog(file.status());
  }
  std::unique_ptr<Segment> segment(new (std::nothrow) Segment(
      std::move(*file), options_.max_record_bytes, options_.read_bytes));
  if (segment == nullptr) return ResourceExhaustedError("DurableLogReader");
  // The header, read through the stream's buffer.
  CAIRN_RETURN_IF_ERROR(segment->ReadHeader(path));
  if (segment->first() != first) {
    return DataLossError("durable log segment's header says first LSN " +
                         std::to_string(segment->first()) + ": " + path);
  }
  segment_ = std::move(segment);
  cursor_ = first;
  bytes_read_ += kDurableLogHeaderBytes;
  return Status::Ok();
}

Result<bool> DurableLogReader::NextSegmentExists() {
  // A segment with no record yet is named cursor_ itself.
  const bool empty = cursor_ == segment_->first();
  if (!empty) {
    Result<bool> named =
        env_.FileExists(JoinPath(dir_, DurableLogSegmentName(cursor_)));
    if (!named.ok()) return InDurableLog(named.status());
    if (*named) return true;
  }
  // Any later segment: the writer may have finished this one and moved on
  // since it was read (the caller reads it again before deciding).
  Result<std::vector<Lsn>> firsts =
      durable_log_internal::ListSegments(env_, dir_);
  if (!firsts.ok()) return firsts.status();
  return !firsts->empty() && firsts->back() > segment_->first();
}

Status DurableLogReader::OpenNextSegment() {
  const Lsn current = segment_->first();
  if (cursor_ != current) {
    Status s = OpenSegment(cursor_);
    if (s.code() != StatusCode::kOutOfRange) return s;
  }
  // No segment starts where this one ends: a gap if this one is still
  // there (a writer creates the next one only after this one's last
  // record), else both were dropped (DropThrough drops oldest first).
  Result<std::vector<Lsn>> firsts =
      durable_log_internal::ListSegments(env_, dir_);
  if (!firsts.ok()) return firsts.status();
  if (std::find(firsts->begin(), firsts->end(), current) != firsts->end()) {
    return DataLossError("durable log " + dir_ + " has no segment for LSN " +
                         std::to_string(cursor_) +
                         " but a later one: a gap between segments");
  }
  return OutOfRangeError("durable log segment for LSN " +
                         std::to_string(cursor_) + " in " + dir_ +
                         " was dropped before it was read");
}

Result<bool> DurableLogReader::Next(DurableLogEntry* out) {
  damaged_tail_ = false;
  // Set once the next segment is known to exist: the current one is then
  // read to its end once more before moving on.
  bool successor = false;
  for (;;) {
    Frame frame;
    Result<FrameRead> read = segment_->Read(&frame);
    if (!read.ok()) return read.status();
    const auto where = [&] {
      return " at offset " + std::to_string(segment_->offset()) + " of " +
             JoinPath(dir_, DurableLogSegmentName(segment_->first()));
    };
    if (*read == FrameRead::kFrame) {
      if (frame.lsn != cursor_) {
        return DataLossError("durable log LSN " + std::to_string(frame.lsn) +
                             " out of sequence (expected " +
                             std::to_string(cursor_) + ")" + where());
      }
      segment_->Advance(frame);
      bytes_read_ += frame.bytes;
      ++cursor_;
      if (frame.lsn < next_lsn_) continue;  // before `from`: skipped
      out->lsn = frame.lsn;
      out->body = frame.body;
      next_lsn_ = frame.lsn + 1;
      return true;
    }
    if (successor) {
      if (*read != FrameRead::kEnd) {
        return DataLossError(
            "durable log record truncated or damaged in a segment that has "
            "a successor" +
            where());
      }
      CAIRN_RETURN_IF_ERROR(OpenNextSegment());
      successor = false;
      continue;
    }
    Result<bool> exists = NextSegmentExists();
    if (!exists.ok()) return exists.status();
    if (*exists) {
      // Its last bytes were written before its successor was created.
      successor = true;
      continue;
    }
    if (*read == FrameRead::kBad) {
      Result<bool> follows = segment_->ValidFrameAfter(segment_->offset());
      if (!follows.ok()) return follows.status();
      if (*follows) {
        return DataLossError("durable log record damaged" + where() +
                             ", and a valid record follows");
      }
    }
    damaged_tail_ = *read != FrameRead::kEnd;
    return false;
  }
}

Status ReadDurableLog(const std::string& dir,
                      const std::function<void(Lsn, std::string_view)>& fn,
                      DurableLogScan* scan, Env* env) {
  DurableLogScan local;
  if (scan == nullptr) scan = &local;
  *scan = DurableLogScan();
  DurableLogReaderOptions options;
  options.env = env;
  Result<std::unique_ptr<DurableLogReader>> reader =
      DurableLogReader::Open(dir, 0, options);
  if (!reader.ok()) return reader.status();
  for (;;) {
    DurableLogEntry entry;
    Result<bool> next = (*reader)->Next(&entry);
    if (!next.ok()) return next.status();
    if (!*next) break;
    if (fn) fn(entry.lsn, entry.body);
    if (scan->records++ == 0) scan->first_lsn = entry.lsn;
    scan->last_lsn = entry.lsn;
  }
  scan->valid_bytes = (*reader)->bytes_read();
  if ((*reader)->stopped_at_damaged_tail()) {
    return DataLossError("durable log " + dir +
                         ": torn or damaged tail after LSN " +
                         std::to_string((*reader)->next_lsn() - 1));
  }
  return Status::Ok();
}

CAIRN_NAMESPACE_END
