// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/ha/file_durable_log.h"

#include <new>
#include <string>
#include <utility>

#include "cairn/base/check.h"
#include "cairn/base/internal/coding.h"

CAIRN_NAMESPACE_BEGIN
namespace {

using base_internal::Checksum64;
using base_internal::LoadFixed;
using base_internal::PutFixed;
using base_internal::StoreFixed;

constexpr std::uint64_t kHeaderSeed = 0x44555241424c4548ull;
constexpr std::uint64_t kRecordSeed = 0x44555241424c5245ull;

// The Env's error, with the prefix every durable-log message carries.
Status InDurableLog(const Status& error) {
  return Status(error.code(), "durable log: " + std::string(error.message()));
}

std::uint64_t RecordChecksum(std::string_view body) {
  return Checksum64(body.data(), body.size(), kRecordSeed ^ body.size());
}

// The header's checksum is the low half of an XXH64 of its first 12 bytes.
std::uint32_t HeaderChecksum(const char* header) {
  return static_cast<std::uint32_t>(
      Checksum64(header, kDurableLogHeaderBytes - 4, kHeaderSeed));
}

std::string EncodeHeader() {
  std::string h;
  PutFixed<std::uint64_t>(&h, kDurableLogMagic);
  PutFixed<std::uint32_t>(&h, kDurableLogFormatVersion);
  PutFixed<std::uint32_t>(&h, HeaderChecksum(h.data()));
  return h;
}

// Whether a whole, checksummed record of at most `max_record_bytes` starts
// at `at`.
bool ValidRecordAt(std::string_view file, std::size_t at,
                   std::size_t max_record_bytes) {
  if (file.size() - at < kDurableLogFrameBytes) return false;
  const auto length = LoadFixed<std::uint32_t>(file.data() + at);
  if (length == 0 || length > max_record_bytes ||
      length > file.size() - at - kDurableLogFrameBytes) {
    return false;
  }
  return RecordChecksum(file.substr(at + kDurableLogFrameBytes, length)) ==
         LoadFixed<std::uint64_t>(file.data() + at + 4);
}

// The offset of the first valid record after `damaged`, or npos: a torn
// tail (nothing valid after it) may be cut; damage before a valid record
// may not, since that record's on_durable may have fired.
std::size_t NextValidRecord(std::string_view file, std::size_t damaged,
                            std::size_t max_record_bytes) {
  for (std::size_t at = damaged + 1; at + kDurableLogFrameBytes <= file.size();
       ++at) {
    if (ValidRecordAt(file, at, max_record_bytes)) return at;
  }
  return std::string_view::npos;
}

Status Scan(std::string_view file, const std::string& path,
            const std::function<void(std::string_view)>& fn,
            DurableLogScan* scan) {
  *scan = DurableLogScan();
  if (file.size() < kDurableLogHeaderBytes) {
    return DataLossError("durable log header truncated: " + path);
  }
  if (LoadFixed<std::uint64_t>(file.data()) != kDurableLogMagic ||
      LoadFixed<std::uint32_t>(file.data() + 12) !=
          HeaderChecksum(file.data())) {
    return DataLossError("not a cairn durable log (bad magic or checksum): " +
                         path);
  }
  if (LoadFixed<std::uint32_t>(file.data() + 8) != kDurableLogFormatVersion) {
    return FailedPreconditionError("durable log of another format version: " +
                                   path);
  }
  std::size_t at = kDurableLogHeaderBytes;
  scan->valid_bytes = at;
  while (at < file.size()) {
    const std::string where = " at offset " + std::to_string(at) + ": " + path;
    if (file.size() - at < kDurableLogFrameBytes) {
      return DataLossError("durable log record header truncated" + where);
    }
    const auto length = LoadFixed<std::uint32_t>(file.data() + at);
    const auto checksum = LoadFixed<std::uint64_t>(file.data() + at + 4);
    if (length > file.size() - at - kDurableLogFrameBytes) {
      return DataLossError("durable log record truncated" + where);
    }
    const std::string_view body =
        file.substr(at + kDurableLogFrameBytes, length);
    if (length == 0 || RecordChecksum(body) != checksum) {
      return DataLossError("durable log record checksum mismatch" + where);
    }
    if (fn) fn(body);
    at += kDurableLogFrameBytes + length;
    ++scan->records;
    scan->valid_bytes = at;
  }
  return Status::Ok();
}

// Creates the log file: its header written and synced, and its directory
// entry synced, whatever options.sync says (a log that is not there after
// a crash loses every record).
// It is written under `path`.tmp and renamed into place once its header is
// durable, so a crash leaves no log or a whole one, never a headerless file
// that every later Open refuses.
Status CreateLogFile(Env& env, const std::string& path,
                     std::unique_ptr<FileHandle>* out) {
  const std::string tmp = path + ".tmp";
  // Truncating, not exclusive: a crash may have left a .tmp behind.
  Result<std::unique_ptr<FileHandle>> made =
      env.NewFile(tmp, FileOpenMode::kCreateOrTruncate);
  if (!made.ok()) return made.status();
  FileHandle& file = **made;
  CAIRN_RETURN_IF_ERROR(file.WriteAt(0, EncodeHeader()));
  CAIRN_RETURN_IF_ERROR(file.Sync());
  CAIRN_RETURN_IF_ERROR(env.Rename(tmp, path));
  CAIRN_RETURN_IF_ERROR(env.SyncDir(DirectoryOf(path)));
  *out = std::move(made).value();
  return Status::Ok();
}

// Checks an existing log to its end and returns where the next record
// goes; a damaged tail is cut (and the cut synced) if `truncate` says so.
Status OpenLogFile(FileHandle& file, const std::string& path, bool truncate,
                   std::size_t max_record_bytes, std::uint64_t* end) {
  std::string bytes;
  if (Status read = ReadAll(file, &bytes); !read.ok()) {
    return InDurableLog(read);
  }
  DurableLogScan scan;
  Status s = Scan(bytes, path, nullptr, &scan);
  if (s.code() == StatusCode::kDataLoss &&
      scan.valid_bytes >= kDurableLogHeaderBytes) {
    if (!truncate) {
      return DataLossError(std::string(s.message()) + " (valid prefix " +
                           std::to_string(scan.valid_bytes) +
                           " bytes; truncate_damaged_tail drops a torn tail)");
    }
    // Probes every offset after the damage, hashing only where a plausible
    // length starts: about one pass over the tail.
    const std::size_t next =
        NextValidRecord(bytes, scan.valid_bytes, max_record_bytes);
    if (next != std::string::npos) {
      return DataLossError(
          std::string(s.message()) + ", and a valid record follows at offset " +
          std::to_string(next) + ": damage inside the log, not a torn tail");
    }
    Status cut = file.Truncate(scan.valid_bytes);
    if (cut.ok()) cut = file.Sync();
    if (!cut.ok()) return InDurableLog(cut);
  } else if (!s.ok()) {
    return s;
  }
  *end = scan.valid_bytes;
  return Status::Ok();
}

}  // namespace

Status ReadDurableLog(const std::string& path,
                      const std::function<void(std::string_view)>& fn,
                      DurableLogScan* scan, Env* env) {
  DurableLogScan local;
  if (scan == nullptr) scan = &local;
  *scan = DurableLogScan();
  if (path.empty()) return InvalidArgumentError("durable log path is empty");
  std::string file;
  Status read = ReadWholeFile(*Env::OrDefault(env), path, &file);
  if (!read.ok()) return InDurableLog(read);
  return Scan(file, path, fn, scan);
}

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
  Env& env = *Env::OrDefault(options.env);
  // One writer at a time, in this process or another.
  Result<std::unique_ptr<FileLock>> lock = env.LockFile(path + ".lock");
  if (!lock.ok()) {
    if (lock.status().code() == StatusCode::kFailedPrecondition) {
      return FailedPreconditionError("durable log " + path +
                                     " is open elsewhere (" + path +
                                     ".lock is held)");
    }
    return InDurableLog(lock.status());
  }
  std::unique_ptr<FileHandle> file;
  std::uint64_t end = 0;
  Result<std::unique_ptr<FileHandle>> existing =
      env.NewFile(path, FileOpenMode::kReadWrite);
  if (existing.ok()) {
    file = std::move(existing).value();
    CAIRN_RETURN_IF_ERROR(OpenLogFile(*file, path,
                                      options.truncate_damaged_tail,
                                      options.max_record_bytes, &end));
    if (options.sync) {
      // What the scan found may not be synced (an earlier writer died
      // between its write and its sync): make it and the log's name durable
      // before anything is appended after it.
      Status synced = file->Sync();
      if (synced.ok()) synced = env.SyncDir(DirectoryOf(path));
      if (!synced.ok()) return InDurableLog(synced);
    }
  } else if (existing.status().code() == StatusCode::kNotFound) {
    Status s = CreateLogFile(env, path, &file);
    if (!s.ok()) return InDurableLog(s);
    end = kDurableLogHeaderBytes;
  } else {
    return InDurableLog(existing.status());
  }
  std::unique_ptr<FileDurableLog> log(new (std::nothrow) FileDurableLog(
      std::move(lock).value(), std::move(file), path, std::move(options), end));
  if (log == nullptr) return ResourceExhaustedError("FileDurableLog");
  return log;
}

FileDurableLog::FileDurableLog(std::unique_ptr<FileLock> lock,
                               std::unique_ptr<FileHandle> file,
                               std::string path, FileDurableLogOptions options,
                               std::uint64_t end)
    : lock_(std::move(lock)),
      file_(std::move(file)),
      path_(std::move(path)),
      options_(std::move(options)),
      end_(end) {}

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
  if (!error_.ok()) return error_;
  if (pending_bytes_ + charge > options_.max_pending_bytes) {
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
  char frame[kDurableLogFrameBytes];
  const auto length = static_cast<std::uint32_t>(record.size());
  const std::uint64_t checksum = RecordChecksum(record);
  StoreFixed<std::uint32_t>(frame, length);
  StoreFixed<std::uint64_t>(frame + 4, checksum);
  MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  auto it = slots_.find(reservation.id);
  CAIRN_CHECK_MSG(
      it != slots_.end() && it->second.state == SlotState::kReserved,
      "Append needs a reservation that has no record yet");
  Slot& slot = it->second;
  slot.frame.append(frame, sizeof(frame));
  slot.frame.append(record);
  if (slot.frame.size() > slot.charged) {
    pending_bytes_ += slot.frame.size() - slot.charged;
    slot.charged = slot.frame.size();
  }
  slot.state = SlotState::kAppended;
  slot.seq = ++appended_seq_;
  order_.push_back(reservation.id);
  return Status::Ok();
}

bool FileDurableLog::FrontResolved() const {
  if (order_.empty()) return false;
  const SlotState state = slots_.at(order_.front()).state;
  return state == SlotState::kFinalized || state == SlotState::kCancelled;
}

void FileDurableLog::FlushResolved(std::unique_lock<Mutex>& lock) {
  flushing_ = true;
  std::string batch;
  std::uint64_t last = written_seq_;
  std::uint64_t records = 0;
  while (FrontResolved()) {
    auto it = slots_.find(order_.front());
    if (it->second.state == SlotState::kFinalized) {
      batch.append(it->second.frame);
      ++records;
    }
    last = it->second.seq;
    pending_bytes_ -= it->second.charged;
    slots_.erase(it);
    order_.pop_front();
  }
  const std::uint64_t offset = end_;
  Status s;
  lock.unlock();
  if (!batch.empty()) s = WriteAndSync(batch, offset);
  lock.lock();
  mu_.AssertHeld();
  if (s.ok()) {
    end_ += batch.size();
    written_seq_ = last;
    durable_records_ += records;
    if (!batch.empty() && options_.sync) ++syncs_;
  } else if (error_.ok()) {
    error_ = std::move(s);
  }
  flushing_ = false;
  resolved_.notify_all();
}

Status FileDurableLog::WriteAndSync(const std::string& bytes,
                                    std::uint64_t offset) {
  Status s = file_->WriteAt(offset, bytes);
  if (s.ok() && options_.sync) s = file_->Sync();
  return s.ok() ? s : InDurableLog(s);
}

void FileDurableLog::Finalize(const LogReservation& reservation,
                              std::span<const ObjectToken> tokens)
    CAIRN_NO_THREAD_SAFETY_ANALYSIS {
  bool durable = false;
  {
    std::unique_lock<Mutex> lock(mu_);
    auto it = slots_.find(reservation.id);
    CAIRN_CHECK_MSG(
        it != slots_.end() && it->second.state == SlotState::kAppended,
        "Finalize needs an appended record");
    it->second.state = SlotState::kFinalized;
    const std::uint64_t seq = it->second.seq;
    for (;;) {
      if (written_seq_ >= seq) {
        durable = true;
        break;
      }
      if (!error_.ok()) break;
      if (!flushing_ && FrontResolved()) {
        FlushResolved(lock);
        continue;
      }
      resolved_.wait(lock);
    }
  }
  if (durable && options_.on_durable) options_.on_durable(tokens);
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
  // Appended: void it in place; the next flush drops it from the prefix.
  it->second.state = SlotState::kCancelled;
  it->second.frame.clear();
  resolved_.notify_all();
}

Status FileDurableLog::status() const {
  MutexLock lock(&mu_);
  return error_;
}

std::uint64_t FileDurableLog::durable_records() const {
  MutexLock lock(&mu_);
  return durable_records_;
}

std::uint64_t FileDurableLog::syncs() const {
  MutexLock lock(&mu_);
  return syncs_;
}

CAIRN_NAMESPACE_END
