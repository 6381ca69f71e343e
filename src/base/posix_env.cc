// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Env::Default(): the file layer on POSIX system calls. Every call retries
// EINTR; reads and writes loop until the whole range is done (or, for a
// read, the file ends).

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

#include "cairn/base/env.h"

CAIRN_NAMESPACE_BEGIN
namespace {

// Opens with open(2) flags, retrying EINTR; -1 with errno set on failure.
int OpenRetrying(const std::string& path, int flags) {
  for (;;) {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EINTR) return fd;
  }
}

class PosixFile final : public FileHandle {
 public:
  PosixFile(std::string path, int fd, std::uint64_t append_at)
      : FileHandle(std::move(path)), fd_(fd), append_at_(append_at) {}
  ~PosixFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Result<std::size_t> ReadAt(std::uint64_t offset,
                             std::span<char> out) const override {
    if (fd_ < 0) return Closed();
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::pread(fd_, out.data() + done, out.size() - done,
                                static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return IoError("cannot read", path(), errno);
      }
      if (n == 0) break;  // the end of the file
      done += static_cast<std::size_t>(n);
    }
    return done;
  }

  Status WriteAt(std::uint64_t offset, std::string_view data) override {
    if (fd_ < 0) return Closed();
    std::size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done,
                                 static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return IoError("cannot write", path(), errno);
      }
      // pwrite of a nonzero count never returns 0; guard the loop anyway.
      if (n == 0) return IoError("cannot write", path(), EIO);
      done += static_cast<std::size_t>(n);
    }
    return Status::Ok();
  }

  Status Append(std::string_view data) override {
    CAIRN_RETURN_IF_ERROR(WriteAt(append_at_, data));
    append_at_ += data.size();
    return Status::Ok();
  }

  Status Sync() override {
    if (fd_ < 0) return Closed();
    while (::fdatasync(fd_) != 0) {
      if (errno != EINTR) return IoError("cannot sync", path(), errno);
    }
    return Status::Ok();
  }

  Status Truncate(std::uint64_t bytes) override {
    if (fd_ < 0) return Closed();
    while (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
      if (errno != EINTR) return IoError("cannot truncate", path(), errno);
    }
    append_at_ = std::min(append_at_, bytes);
    return Status::Ok();
  }

  Result<std::uint64_t> Size() const override {
    if (fd_ < 0) return Closed();
    struct stat st;
    if (::fstat(fd_, &st) != 0) return IoError("cannot stat", path(), errno);
    return static_cast<std::uint64_t>(st.st_size);
  }

  Status Close() override {
    if (fd_ < 0) return Closed();
    // Not retried on EINTR: Linux releases the descriptor either way.
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return IoError("cannot close", path(), errno);
    return Status::Ok();
  }

 private:
  Status Closed() const {
    return FailedPreconditionError("file is closed: " + path());
  }

  int fd_;
  std::uint64_t append_at_;
};

class PosixFileLock final : public FileLock {
 public:
  PosixFileLock(std::string path, int fd)
      : FileLock(std::move(path)), fd_(fd) {}
  // Closing the descriptor releases its flock.
  ~PosixFileLock() override { ::close(fd_); }

  Status Unlock() {
    while (::flock(fd_, LOCK_UN) != 0) {
      if (errno != EINTR) return IoError("cannot unlock", path(), errno);
    }
    return Status::Ok();
  }

 private:
  const int fd_;
};

class PosixEnv final : public Env {
 public:
  Result<std::unique_ptr<FileHandle>> NewFile(const std::string& path,
                                              FileOpenMode mode) override {
    return Open(path, mode, /*direct=*/false);
  }

  Result<std::unique_ptr<FileHandle>> NewDirectFile(
      const std::string& path, FileOpenMode mode) override {
    return Open(path, mode, /*direct=*/true);
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return IoError("cannot rename", from, errno);
    }
    return Status::Ok();
  }

  Status SyncDir(const std::string& dir) override {
    const int fd = OpenRetrying(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return IoError("cannot open", dir, errno);
    Status status;
    while (::fsync(fd) != 0) {
      if (errno != EINTR) {
        status = IoError("cannot sync", dir, errno);
        break;
      }
    }
    ::close(fd);
    return status;
  }

  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) {
      return IoError("cannot remove", path, errno);
    }
    return Status::Ok();
  }

  Status CreateDir(const std::string& dir) override {
    if (::mkdir(dir.c_str(), 0755) != 0) {
      return IoError("cannot create directory", dir, errno);
    }
    return Status::Ok();
  }

  Result<std::vector<std::string>> List(const std::string& dir) override {
    DIR* stream = ::opendir(dir.c_str());
    if (stream == nullptr) return IoError("cannot list", dir, errno);
    std::vector<std::string> names;
    Status status;
    try {
      for (;;) {
        errno = 0;
        const dirent* entry = ::readdir(stream);
        if (entry == nullptr) {
          if (errno != 0) status = IoError("cannot list", dir, errno);
          break;
        }
        const std::string_view name(entry->d_name);
        if (name != "." && name != "..") names.emplace_back(name);
      }
    } catch (const std::bad_alloc&) {
      status = ResourceExhaustedError("listing " + dir);
    }
    ::closedir(stream);
    if (!status.ok()) return status;
    std::sort(names.begin(), names.end());
    return names;
  }

  Result<std::uint64_t> FileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      return IoError("cannot stat", path, errno);
    }
    return static_cast<std::uint64_t>(st.st_size);
  }

  Result<bool> FileExists(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) return true;
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return IoError("cannot stat", path, errno);
  }

  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override {
    const int fd = OpenRetrying(path, O_RDWR | O_CREAT);
    if (fd < 0) return IoError("cannot open", path, errno);
    // flock locks belong to the open file description, so a second
    // LockFile in this process conflicts too (fcntl locks would not).
    while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      if (error == EWOULDBLOCK) {
        return FailedPreconditionError("file is locked by another holder: " +
                                       path);
      }
      return IoError("cannot lock", path, error);
    }
    std::unique_ptr<FileLock> lock(new (std::nothrow) PosixFileLock(path, fd));
    if (lock == nullptr) {
      ::close(fd);
      return ResourceExhaustedError("file lock for " + path);
    }
    return lock;
  }

  Status UnlockFile(std::unique_ptr<FileLock> lock) override {
    if (lock == nullptr) return InvalidArgumentError("no lock to release");
    return static_cast<PosixFileLock&>(*lock).Unlock();
  }

 private:
  // NewFile and NewDirectFile: open(2) with O_DIRECT when `direct`.
  static Result<std::unique_ptr<FileHandle>> Open(const std::string& path,
                                                  FileOpenMode mode,
                                                  bool direct) {
    int flags = O_RDWR;
    const char* verb = "cannot open";
    switch (mode) {
      case FileOpenMode::kCreateExclusive:
        flags = O_RDWR | O_CREAT | O_EXCL;
        verb = "cannot create";
        break;
      case FileOpenMode::kCreateOrTruncate:
        flags = O_RDWR | O_CREAT | O_TRUNC;
        verb = "cannot create";
        break;
      case FileOpenMode::kReadWrite:
        break;
      case FileOpenMode::kReadOnly:
        flags = O_RDONLY;
        break;
    }
    if (direct) flags |= O_DIRECT;
    const int fd = OpenRetrying(path, flags);
    if (fd < 0) {
      // open(2) says EINVAL for O_DIRECT on a filesystem without it (the
      // other flags here are always valid).
      if (direct && errno == EINVAL) {
        return InvalidArgumentError(
            "the filesystem refuses direct I/O (O_DIRECT) for " + path);
      }
      return IoError(verb, path, errno);
    }
    // A read-only open of a directory succeeds; a FileHandle is a file.
    struct stat st;
    int error = 0;
    if (::fstat(fd, &st) != 0) {
      error = errno;
    } else if (S_ISDIR(st.st_mode)) {
      error = EISDIR;
    }
    if (error != 0) {
      ::close(fd);
      return IoError(verb, path, error);
    }
    std::unique_ptr<FileHandle> file(new (std::nothrow) PosixFile(
        path, fd, static_cast<std::uint64_t>(st.st_size)));
    if (file == nullptr) {
      ::close(fd);
      return ResourceExhaustedError("file handle for " + path);
    }
    return file;
  }
};

}  // namespace

Env* Env::Default() {
  // Never destroyed: files may still be closed by static destructors.
  static PosixEnv* const env = new PosixEnv();
  return env;
}

CAIRN_NAMESPACE_END
