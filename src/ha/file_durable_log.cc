// Copyright 2026 The cairn Authors.

#include "cairn/ha/file_durable_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "cairn/base/check.h"

CAIRN_NAMESPACE_BEGIN
namespace {

constexpr std::uint64_t kHeaderSeed = 0x44555241424c4548ull;
constexpr std::uint64_t kRecordSeed = 0x44555241424c5245ull;

using directory_internal::GetLe;
using directory_internal::PutLe;

Status IoError(const char* what, const std::string& path, int error) {
  const std::string message = std::string("durable log: ") + what + " " + path +
                              ": " + std::strerror(error);
  if (error == ENOSPC || error == EDQUOT) {
    return ResourceExhaustedError(message);
  }
  if (error == ENOENT) return NotFoundError(message);
  if (error == EISDIR) return InvalidArgumentError(message);
  return InternalError(message);
}

std::uint64_t RecordChecksum(std::string_view body) {
  return XXH64(body.data(), body.size(), kRecordSeed ^ body.size());
}

std::string EncodeHeader() {
  std::string h;
  PutLe<std::uint64_t>(&h, kDurableLogMagic);
  PutLe<std::uint32_t>(&h, kDurableLogFormatVersion);
  PutLe<std::uint32_t>(
      &h, static_cast<std::uint32_t>(XXH64(h.data(), h.size(), kHeaderSeed)));
  return h;
}

// The whole file, or an errno.
int ReadAll(int fd, std::string* out) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return errno;
  if (S_ISDIR(st.st_mode)) return EISDIR;
  out->resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < out->size()) {
    const ssize_t n = ::pread(fd, out->data() + done, out->size() - done,
                              static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  out->resize(done);
  return 0;
}

Status Scan(std::string_view file, const std::string& path,
            const std::function<void(std::string_view)>& fn,
            DurableLogScan* scan) {
  *scan = DurableLogScan();
  if (file.size() < kDurableLogHeaderBytes) {
    return DataLossError("durable log header truncated: " + path);
  }
  const std::uint32_t header_sum = static_cast<std::uint32_t>(
      XXH64(file.data(), kDurableLogHeaderBytes - 4, kHeaderSeed));
  if (GetLe<std::uint64_t>(file.data()) != kDurableLogMagic ||
      GetLe<std::uint32_t>(file.data() + 12) != header_sum) {
    return DataLossError("not a cairn durable log (bad magic or checksum): " +
                         path);
  }
  if (GetLe<std::uint32_t>(file.data() + 8) != kDurableLogFormatVersion) {
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
    const auto length = GetLe<std::uint32_t>(file.data() + at);
    const auto checksum = GetLe<std::uint64_t>(file.data() + at + 4);
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

Status SyncFd(int fd, const std::string& path) {
  while (::fdatasync(fd) != 0) {
    if (errno != EINTR) return IoError("cannot sync", path, errno);
  }
  return Status::Ok();
}

// Makes a new file's directory entry durable.
Status SyncParent(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot open directory of", path, errno);
  Status s;
  while (::fsync(fd) != 0) {
    if (errno != EINTR) {
      s = IoError("cannot sync directory of", path, errno);
      break;
    }
  }
  ::close(fd);
  return s;
}

}  // namespace

Status ReadDurableLog(const std::string& path,
                      const std::function<void(std::string_view)>& fn,
                      DurableLogScan* scan) {
  DurableLogScan local;
  if (scan == nullptr) scan = &local;
  *scan = DurableLogScan();
  if (path.empty()) return InvalidArgumentError("durable log path is empty");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot open", path, errno);
  std::string file;
  const int error = ReadAll(fd, &file);
  ::close(fd);
  if (error != 0) return IoError("cannot read", path, error);
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
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  std::uint64_t end = 0;
  if (fd < 0 && errno == ENOENT) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return IoError("cannot create", path, errno);
    const std::string header = EncodeHeader();
    Status s;
    if (::pwrite(fd, header.data(), header.size(), 0) !=
        static_cast<ssize_t>(header.size())) {
      s = IoError("cannot write", path, errno);
    }
    if (s.ok()) s = SyncFd(fd, path);
    if (s.ok()) s = SyncParent(path);
    if (!s.ok()) {
      ::close(fd);
      return s;
    }
    end = header.size();
  } else if (fd < 0) {
    return IoError("cannot open", path, errno);
  } else {
    std::string file;
    const int error = ReadAll(fd, &file);
    if (error != 0) {
      ::close(fd);
      return IoError("cannot read", path, error);
    }
    DurableLogScan scan;
    Status s = Scan(file, path, nullptr, &scan);
    if (s.code() == StatusCode::kDataLoss &&
        scan.valid_bytes >= kDurableLogHeaderBytes &&
        options.truncate_damaged_tail) {
      s = Status::Ok();
      if (::ftruncate(fd, static_cast<off_t>(scan.valid_bytes)) != 0) {
        s = IoError("cannot truncate", path, errno);
      }
      if (s.ok()) s = SyncFd(fd, path);
    } else if (s.code() == StatusCode::kDataLoss &&
               scan.valid_bytes >= kDurableLogHeaderBytes) {
      s = DataLossError(std::string(s.message()) + " (valid prefix " +
                        std::to_string(scan.valid_bytes) +
                        " bytes; truncate_damaged_tail drops the rest)");
    }
    if (!s.ok()) {
      ::close(fd);
      return s;
    }
    end = scan.valid_bytes;
  }
  std::unique_ptr<FileDurableLog> log(
      new (std::nothrow) FileDurableLog(fd, path, std::move(options), end));
  if (log == nullptr) {
    ::close(fd);
    return ResourceExhaustedError("FileDurableLog");
  }
  return log;
}

FileDurableLog::FileDurableLog(int fd, std::string path,
                               FileDurableLogOptions options, std::uint64_t end)
    : fd_(fd),
      path_(std::move(path)),
      options_(std::move(options)),
      end_(end) {}

FileDurableLog::~FileDurableLog() { ::close(fd_); }

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
  std::memcpy(frame, &length, 4);
  std::memcpy(frame + 4, &checksum, 8);
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
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done,
                               static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("cannot write", path_, errno);
    }
    done += static_cast<std::size_t>(n);
  }
  if (!options_.sync) return Status::Ok();
  return SyncFd(fd_, path_);
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
