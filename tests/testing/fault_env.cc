// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "testing/fault_env.h"

#include <algorithm>
#include <cerrno>
#include <utility>

namespace cairn::testing {

const char* CutModeName(CutMode mode) {
  switch (mode) {
    case CutMode::kDropUnsynced:
      return "drop";
    case CutMode::kGarbageUnsynced:
      return "garbage";
    case CutMode::kTearUnsynced:
      return "tear";
  }
  return "?";
}

// A file's bytes now and as of its last Sync, and the writes and truncates
// in between, in order, so that a cut can replay any prefix of them.
struct FaultEnv::Inode {
  struct Op {
    bool truncate = false;
    std::uint64_t offset = 0;  // write offset, or the truncated size
    std::string bytes;
  };
  std::string data;
  std::string synced;
  std::vector<Op> unsynced;

  void Write(std::uint64_t offset, std::string_view bytes) {
    if (bytes.empty()) return;
    Apply(&data, offset, bytes);
    unsynced.push_back(Op{false, offset, std::string(bytes)});
  }
  void Truncate(std::uint64_t size) {
    data.resize(size, '\0');
    unsynced.push_back(Op{true, size, {}});
  }
  void Sync() {
    synced = data;
    unsynced.clear();
  }
  static void Apply(std::string* to, std::uint64_t offset,
                    std::string_view bytes) {
    if (to->size() < offset + bytes.size()) {
      to->resize(offset + bytes.size(), '\0');
    }
    std::copy(bytes.begin(), bytes.end(), to->begin() + offset);
  }
};

struct FaultEnv::Fault {
  enum class Kind : std::uint8_t { kFail, kTear, kCutAtCall, kCutAfterSync };
  Kind kind;
  std::optional<EnvCall> call;  // kFail: only calls of this kind
  std::uint64_t left;           // matching events until it fires
  int error = EIO;
  std::size_t keep_bytes = 0;
  bool persistent = false;  // kFail: fires on every matching call once due
  CutMode mode = CutMode::kDropUnsynced;
};

class FaultEnv::SimFile final : public FileHandle {
 public:
  SimFile(FaultEnv* env, std::string path, std::shared_ptr<Inode> inode,
          std::uint64_t boot, bool read_only, bool direct)
      : FileHandle(std::move(path)),
        env_(env),
        inode_(std::move(inode)),
        boot_(boot),
        read_only_(read_only),
        direct_(direct),
        append_at_(inode_->data.size()) {}

  Result<std::size_t> ReadAt(std::uint64_t offset,
                             std::span<char> out) const override {
    Verdict v = env_->Enter(EnvCall::kReadAt, path(), boot_);
    if (!v.status.ok()) return v.status;
    std::lock_guard<std::mutex> lock(env_->mu_);
    if (closed_) return Closed();
    if (!AlignedLocked(offset, out.data(), out.size())) return Misaligned();
    const std::string& data = inode_->data;
    if (offset >= data.size()) return std::size_t{0};
    const std::size_t n =
        std::min<std::size_t>(out.size(), data.size() - offset);
    std::copy_n(data.begin() + offset, n, out.begin());
    return n;
  }
  Status WriteAt(std::uint64_t offset, std::string_view data) override {
    return Write(EnvCall::kWriteAt, offset, data);
  }
  Status Append(std::string_view data) override {
    CAIRN_RETURN_IF_ERROR(Write(EnvCall::kAppend, append_at_, data));
    append_at_ += data.size();
    return Status::Ok();
  }
  Status Sync() override {
    Verdict v = env_->Enter(EnvCall::kSync, path(), boot_);
    if (!v.status.ok()) return v.status;
    {
      std::lock_guard<std::mutex> lock(env_->mu_);
      if (closed_) return Closed();
      inode_->Sync();
    }
    env_->SyncDone();
    return Status::Ok();
  }
  Status Truncate(std::uint64_t bytes) override {
    Verdict v = env_->Enter(EnvCall::kTruncate, path(), boot_);
    if (!v.status.ok()) return v.status;
    std::lock_guard<std::mutex> lock(env_->mu_);
    if (closed_) return Closed();
    if (read_only_) return IoError("cannot truncate", path(), EBADF);
    inode_->Truncate(bytes);
    append_at_ = bytes;
    return Status::Ok();
  }
  Result<std::uint64_t> Size() const override {
    Verdict v = env_->Enter(EnvCall::kSize, path(), boot_);
    if (!v.status.ok()) return v.status;
    std::lock_guard<std::mutex> lock(env_->mu_);
    if (closed_) return Closed();
    return std::uint64_t{inode_->data.size()};
  }
  Status Close() override {
    Verdict v = env_->Enter(EnvCall::kClose, path(), boot_);
    std::lock_guard<std::mutex> lock(env_->mu_);
    if (closed_) return Closed();
    closed_ = true;  // a failed close still closes, as close(2) does
    return v.status;
  }

 private:
  Status Closed() const {
    return FailedPreconditionError("file is closed: " + path());
  }
  // O_DIRECT's rule on a direct handle; counts a call that breaks it.
  bool AlignedLocked(std::uint64_t offset, const char* buffer,
                     std::size_t bytes) const {
    if (!direct_ ||
        (offset % kDirectIoAlignment == 0 && bytes % kDirectIoAlignment == 0 &&
         reinterpret_cast<std::uintptr_t>(buffer) % kDirectIoAlignment == 0)) {
      return true;
    }
    ++env_->misaligned_;
    return false;
  }
  Status Misaligned() const {
    return IoError("misaligned direct I/O on", path(), EINVAL);
  }
  Status Write(EnvCall call, std::uint64_t offset, std::string_view data) {
    Verdict v = env_->Enter(call, path(), boot_);
    if (!v.status.ok() && !v.keep_bytes.has_value()) return v.status;
    std::lock_guard<std::mutex> lock(env_->mu_);
    if (closed_) return Closed();
    if (read_only_) return IoError("cannot write", path(), EBADF);
    if (!AlignedLocked(offset, data.data(), data.size())) return Misaligned();
    if (v.keep_bytes.has_value()) data = data.substr(0, *v.keep_bytes);
    inode_->Write(offset, data);
    return v.status;
  }

  FaultEnv* const env_;
  const std::shared_ptr<Inode> inode_;
  const std::uint64_t boot_;
  const bool read_only_;
  const bool direct_;
  std::uint64_t append_at_;
  bool closed_ = false;  // guarded by env_->mu_
};

class FaultEnv::SimLock final : public FileLock {
 public:
  SimLock(FaultEnv* env, std::string path, std::uint64_t boot)
      : FileLock(std::move(path)), env_(env), boot_(boot) {}
  ~SimLock() override {
    std::lock_guard<std::mutex> lock(env_->mu_);
    if (boot_ == env_->boot_) env_->locks_.erase(path());
  }

 private:
  FaultEnv* const env_;
  const std::uint64_t boot_;
};

FaultEnv::FaultEnv(std::uint64_t seed, std::string root)
    : root_(std::move(root)), rng_(seed) {}

FaultEnv::~FaultEnv() = default;

void FaultEnv::FailCall(std::uint64_t nth, int error,
                        std::optional<EnvCall> kind) {
  std::lock_guard<std::mutex> lock(mu_);
  faults_.push_back(
      Fault{Fault::Kind::kFail, kind, std::max<std::uint64_t>(nth, 1), error});
}

void FaultEnv::FailFrom(std::uint64_t nth, int error,
                        std::optional<EnvCall> kind) {
  std::lock_guard<std::mutex> lock(mu_);
  Fault fault{Fault::Kind::kFail, kind, std::max<std::uint64_t>(nth, 1), error};
  fault.persistent = true;
  faults_.push_back(fault);
}

void FaultEnv::TearWrite(std::uint64_t nth, std::size_t keep_bytes, int error) {
  std::lock_guard<std::mutex> lock(mu_);
  Fault fault{Fault::Kind::kTear, std::nullopt, std::max<std::uint64_t>(nth, 1),
              error};
  fault.keep_bytes = keep_bytes;
  faults_.push_back(fault);
}

void FaultEnv::CutAfterSync(std::uint64_t nth, CutMode mode) {
  std::lock_guard<std::mutex> lock(mu_);
  faults_.push_back(Fault{Fault::Kind::kCutAfterSync, std::nullopt,
                          std::max<std::uint64_t>(nth, 1), EIO, 0, false,
                          mode});
}

void FaultEnv::CutAtCall(std::uint64_t nth, CutMode mode) {
  std::lock_guard<std::mutex> lock(mu_);
  faults_.push_back(Fault{Fault::Kind::kCutAtCall, std::nullopt,
                          std::max<std::uint64_t>(nth, 1), EIO, 0, false,
                          mode});
}

void FaultEnv::PowerCut(CutMode mode) {
  std::lock_guard<std::mutex> lock(mu_);
  CutLocked(mode);
}

void FaultEnv::Kill() {
  std::lock_guard<std::mutex> lock(mu_);
  dead_ = true;
}

bool FaultEnv::dead() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dead_;
}

void FaultEnv::Reboot() {
  std::lock_guard<std::mutex> lock(mu_);
  dead_ = false;
  ++boot_;
  locks_.clear();
  faults_.clear();
}

void FaultEnv::ClearFaults() {
  std::lock_guard<std::mutex> lock(mu_);
  faults_.clear();
}

void FaultEnv::RefuseDirectIo() {
  std::lock_guard<std::mutex> lock(mu_);
  refuse_direct_ = true;
}

std::uint64_t FaultEnv::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}
std::uint64_t FaultEnv::writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_;
}
std::uint64_t FaultEnv::syncs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return syncs_;
}
std::uint64_t FaultEnv::faults_fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return faults_fired_;
}

std::uint64_t FaultEnv::misaligned() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misaligned_;
}

std::vector<EnvCall> FaultEnv::journal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return journal_;
}

std::optional<std::string> FaultEnv::Contents(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Inode> inode = FindFileLocked(path);
  if (inode == nullptr) return std::nullopt;
  return inode->data;
}

Status FaultEnv::SetContents(const std::string& path, std::string bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  CAIRN_RETURN_IF_ERROR(CheckParentLocked(path, "cannot create"));
  std::shared_ptr<Inode>& inode = files_[path];
  if (inode == nullptr) inode = std::make_shared<Inode>();
  inode->data = std::move(bytes);
  inode->Sync();
  durable_files_[path] = inode;
  return Status::Ok();
}

FaultEnv::Verdict FaultEnv::Enter(EnvCall call, const std::string& path,
                                  std::uint64_t boot) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  journal_.push_back(call);
  const bool write = call == EnvCall::kWriteAt || call == EnvCall::kAppend;
  if (write) ++writes_;
  if (dead_ || (boot != kAnyBoot && boot != boot_)) {
    return Verdict{IoError("power is cut:", path, EIO), std::nullopt};
  }
  // Every armed fault sees the call; one fires per call, the others that
  // come due wait for the next.
  auto due = faults_.end();
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    bool counts = false;
    switch (it->kind) {
      case Fault::Kind::kFail:
        counts = !it->call.has_value() || *it->call == call;
        break;
      case Fault::Kind::kTear:
        counts = write;
        break;
      case Fault::Kind::kCutAtCall:
        counts = true;
        break;
      case Fault::Kind::kCutAfterSync:
        break;
    }
    if (!counts || --it->left > 0) continue;
    if (due == faults_.end()) {
      due = it;
    } else {
      it->left = 1;
    }
  }
  if (due == faults_.end()) return Verdict{};
  const Fault fired = *due;
  if (fired.persistent) {
    due->left = 1;
  } else {
    faults_.erase(due);
  }
  ++faults_fired_;
  switch (fired.kind) {
    case Fault::Kind::kCutAtCall:
      CutLocked(fired.mode);
      return Verdict{IoError("power is cut:", path, EIO), std::nullopt};
    case Fault::Kind::kTear:
      return Verdict{IoError("injected torn write to", path, fired.error),
                     fired.keep_bytes};
    default:
      return Verdict{IoError("injected failure on", path, fired.error),
                     std::nullopt};
  }
}

void FaultEnv::SyncDone() {
  std::lock_guard<std::mutex> lock(mu_);
  ++syncs_;
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (it->kind != Fault::Kind::kCutAfterSync || --it->left > 0) continue;
    const CutMode mode = it->mode;
    faults_.erase(it);
    ++faults_fired_;
    CutLocked(mode);
    return;
  }
}

void FaultEnv::CutLocked(CutMode mode) {
  // Files: back to their last sync, then whatever the mode lets through.
  std::set<Inode*> done;
  auto cut_file = [&](Inode& inode) {
    if (!done.insert(&inode).second) return;
    std::string data = inode.synced;
    std::size_t keep_ops = 0;
    if (mode == CutMode::kGarbageUnsynced) keep_ops = inode.unsynced.size();
    if (mode == CutMode::kTearUnsynced) {
      keep_ops = std::uniform_int_distribution<std::size_t>(
          0, inode.unsynced.size())(rng_);
    }
    for (std::size_t i = 0; i < inode.unsynced.size(); ++i) {
      const Inode::Op& op = inode.unsynced[i];
      if (op.truncate) {
        if (i < keep_ops) data.resize(op.offset, '\0');
        continue;
      }
      if (mode == CutMode::kGarbageUnsynced) {
        // A byte rewritten with the value it held at the last sync stays:
        // a direct write rewrites the durable head of its first page, as
        // the page cache's writeback of that page does unseen; a disk that
        // garbled such a byte would garble it under buffered I/O too.
        std::string garbage(op.bytes.size(), '\0');
        for (std::size_t j = 0; j < garbage.size(); ++j) {
          const char random = static_cast<char>(rng_());
          const std::uint64_t at = op.offset + j;
          const bool same =
              at < inode.synced.size() && inode.synced[at] == op.bytes[j];
          garbage[j] = same ? op.bytes[j] : random;
        }
        Inode::Apply(&data, op.offset, garbage);
      } else if (i < keep_ops) {
        Inode::Apply(&data, op.offset, op.bytes);
      } else if (mode == CutMode::kTearUnsynced && i == keep_ops) {
        // The write in flight: a prefix up to a sector boundary.
        const std::uint64_t end = op.offset + op.bytes.size();
        const std::uint64_t first_sector = (op.offset / 512 + 1) * 512;
        std::uint64_t cut = op.offset;
        if (first_sector < end) {
          const std::uint64_t sectors = (end - first_sector) / 512 + 1;
          cut =
              first_sector + 512 * std::uniform_int_distribution<std::uint64_t>(
                                       0, sectors - 1)(rng_);
          cut = std::min(cut, end);
        }
        Inode::Apply(&data, op.offset,
                     std::string_view(op.bytes).substr(0, cut - op.offset));
      }
    }
    inode.data = std::move(data);
    inode.Sync();
  };
  // Names: as of their directory's last sync, if that directory survives.
  auto reachable = [&](const std::string& path) {
    for (std::string dir = DirectoryOf(path); dir != root_;
         dir = DirectoryOf(dir)) {
      if (durable_dirs_.count(dir) == 0 || dir == "/" || dir == ".") {
        return false;
      }
    }
    return true;
  };
  dirs_.clear();
  for (const std::string& dir : durable_dirs_) {
    if (reachable(dir)) dirs_.insert(dir);
  }
  durable_dirs_ = dirs_;
  files_.clear();
  for (auto& [path, inode] : durable_files_) {
    if (reachable(path)) files_[path] = inode;
  }
  durable_files_ = files_;
  for (auto& [path, inode] : files_) cut_file(*inode);
  dead_ = true;
}

bool FaultEnv::DirExistsLocked(const std::string& dir) const {
  return dir == root_ || dirs_.count(dir) != 0;
}

Status FaultEnv::CheckParentLocked(const std::string& path,
                                   const char* what) const {
  if (dirs_.count(path) != 0 || path == root_) {
    return IoError(what, path, EISDIR);
  }
  if (!DirExistsLocked(DirectoryOf(path))) return IoError(what, path, ENOENT);
  return Status::Ok();
}

std::shared_ptr<FaultEnv::Inode> FaultEnv::FindFileLocked(
    const std::string& path) const {
  auto it = files_.find(path);
  return it == files_.end() ? nullptr : it->second;
}

Result<std::unique_ptr<FileHandle>> FaultEnv::NewFile(const std::string& path,
                                                      FileOpenMode mode) {
  return Open(path, mode, /*direct=*/false);
}

Result<std::unique_ptr<FileHandle>> FaultEnv::NewDirectFile(
    const std::string& path, FileOpenMode mode) {
  return Open(path, mode, /*direct=*/true);
}

Result<std::unique_ptr<FileHandle>> FaultEnv::Open(const std::string& path,
                                                   FileOpenMode mode,
                                                   bool direct) {
  Verdict v = Enter(EnvCall::kNewFile, path, kAnyBoot);
  if (!v.status.ok()) return v.status;
  std::lock_guard<std::mutex> lock(mu_);
  if (direct && refuse_direct_) {
    return InvalidArgumentError(
        "the filesystem refuses direct I/O (O_DIRECT) for " + path);
  }
  CAIRN_RETURN_IF_ERROR(CheckParentLocked(path, "cannot open"));
  std::shared_ptr<Inode> inode = FindFileLocked(path);
  switch (mode) {
    case FileOpenMode::kCreateExclusive:
      if (inode != nullptr) return IoError("cannot create", path, EEXIST);
      break;
    case FileOpenMode::kCreateOrTruncate:
      if (inode != nullptr && !inode->data.empty()) inode->Truncate(0);
      break;
    case FileOpenMode::kReadWrite:
    case FileOpenMode::kReadOnly:
      if (inode == nullptr) return IoError("cannot open", path, ENOENT);
      break;
  }
  if (inode == nullptr) {
    inode = std::make_shared<Inode>();
    files_[path] = inode;
  }
  return std::unique_ptr<FileHandle>(
      new SimFile(this, path, std::move(inode), boot_,
                  mode == FileOpenMode::kReadOnly, direct));
}

Status FaultEnv::Rename(const std::string& from, const std::string& to) {
  Verdict v = Enter(EnvCall::kRename, from, kAnyBoot);
  if (!v.status.ok()) return v.status;
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Inode> inode = FindFileLocked(from);
  if (inode == nullptr) return IoError("cannot rename", from, ENOENT);
  CAIRN_RETURN_IF_ERROR(CheckParentLocked(to, "cannot rename to"));
  files_.erase(from);
  files_[to] = std::move(inode);
  return Status::Ok();
}

Status FaultEnv::SyncDir(const std::string& dir) {
  Verdict v = Enter(EnvCall::kSyncDir, dir, kAnyBoot);
  if (!v.status.ok()) return v.status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!DirExistsLocked(dir)) return IoError("cannot sync", dir, ENOENT);
    std::erase_if(durable_files_,
                  [&](const auto& e) { return DirectoryOf(e.first) == dir; });
    std::erase_if(durable_dirs_,
                  [&](const std::string& d) { return DirectoryOf(d) == dir; });
    for (const auto& [path, inode] : files_) {
      if (DirectoryOf(path) == dir) durable_files_[path] = inode;
    }
    for (const std::string& d : dirs_) {
      if (DirectoryOf(d) == dir) durable_dirs_.insert(d);
    }
  }
  SyncDone();
  return Status::Ok();
}

Status FaultEnv::Remove(const std::string& path) {
  Verdict v = Enter(EnvCall::kRemove, path, kAnyBoot);
  if (!v.status.ok()) return v.status;
  std::lock_guard<std::mutex> lock(mu_);
  if (files_.erase(path) == 0) return IoError("cannot remove", path, ENOENT);
  return Status::Ok();
}

Status FaultEnv::CreateDir(const std::string& dir) {
  Verdict v = Enter(EnvCall::kCreateDir, dir, kAnyBoot);
  if (!v.status.ok()) return v.status;
  std::lock_guard<std::mutex> lock(mu_);
  if (DirExistsLocked(dir) || files_.count(dir) != 0) {
    return IoError("cannot create directory", dir, EEXIST);
  }
  if (!DirExistsLocked(DirectoryOf(dir))) {
    return IoError("cannot create directory", dir, ENOENT);
  }
  dirs_.insert(dir);
  return Status::Ok();
}

Result<std::vector<std::string>> FaultEnv::List(const std::string& dir) {
  Verdict v = Enter(EnvCall::kList, dir, kAnyBoot);
  if (!v.status.ok()) return v.status;
  std::lock_guard<std::mutex> lock(mu_);
  if (!DirExistsLocked(dir)) return IoError("cannot list", dir, ENOENT);
  std::set<std::string> names;
  const std::size_t prefix = dir.size() + 1;
  for (const auto& [path, inode] : files_) {
    if (DirectoryOf(path) == dir) names.insert(path.substr(prefix));
  }
  for (const std::string& d : dirs_) {
    if (DirectoryOf(d) == dir) names.insert(d.substr(prefix));
  }
  return std::vector<std::string>(names.begin(), names.end());
}

Result<std::uint64_t> FaultEnv::FileSize(const std::string& path) {
  Verdict v = Enter(EnvCall::kFileSize, path, kAnyBoot);
  if (!v.status.ok()) return v.status;
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Inode> inode = FindFileLocked(path);
  if (inode == nullptr) return IoError("cannot stat", path, ENOENT);
  return std::uint64_t{inode->data.size()};
}

Result<bool> FaultEnv::FileExists(const std::string& path) {
  Verdict v = Enter(EnvCall::kFileExists, path, kAnyBoot);
  if (!v.status.ok()) return v.status;
  std::lock_guard<std::mutex> lock(mu_);
  return files_.count(path) != 0 || DirExistsLocked(path);
}

Result<std::unique_ptr<FileLock>> FaultEnv::LockFile(const std::string& path) {
  Verdict v = Enter(EnvCall::kLockFile, path, kAnyBoot);
  if (!v.status.ok()) return v.status;
  std::lock_guard<std::mutex> lock(mu_);
  if (FindFileLocked(path) == nullptr) {
    CAIRN_RETURN_IF_ERROR(CheckParentLocked(path, "cannot lock"));
    files_[path] = std::make_shared<Inode>();
  }
  if (!locks_.insert(path).second) {
    return FailedPreconditionError("lock is held: " + path);
  }
  return std::unique_ptr<FileLock>(new SimLock(this, path, boot_));
}

Status FaultEnv::UnlockFile(std::unique_ptr<FileLock> lock) {
  const std::string path = lock != nullptr ? lock->path() : std::string();
  Verdict v = Enter(EnvCall::kUnlockFile, path, kAnyBoot);
  lock.reset();  // released whatever the verdict: the process lets go
  return v.status;
}

}  // namespace cairn::testing
