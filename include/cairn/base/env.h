// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Env: the one file layer every cairn file format goes through (the block
// log, the LogStore checkpoint, FileDurableLog, the snapshot writer and
// reader). It opens files and hands out FileHandles (positional read and
// write, append, fdatasync, truncate, size, close), buffered or direct
// (bypassing the page cache, for the block log's direct_io), and does the
// directory work around them (rename, directory sync, remove, create, list,
// size, existence, lock). docs/env.md has the contract and how a test plugs in.
//
// Env::Default() is the POSIX implementation: every call retries EINTR,
// writes loop over short writes, and a failed system call becomes
// IoError(what, path, errno), whose code says what went wrong (a full disk
// is kResourceExhausted, a missing file kNotFound, ...). A host replaces it
// by passing its own Env through the options of the format it opens
// (BlockLogOptions::env, LogStoreOptions::env, ...); null means Default().
// Every method is virtual so that a test Env can wrap another and fail, or
// tear (write only a prefix of), any single call. A wrapper that does not
// forward NewDirectFile refuses direct I/O (the default), never silently
// turns it into buffered I/O.
//
// Thread safety: an Env's methods may be called from any number of threads
// at once; Default() lives for the whole process. A FileHandle's ReadAt,
// WriteAt (of byte ranges that do not overlap), Sync and Size may be called
// from several threads at once; Append, Truncate and Close need the handle
// to themselves. A handle and a lock are destroyed by one thread once every
// call on them has returned.

#ifndef CAIRN_BASE_ENV_H_
#define CAIRN_BASE_ENV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/base/status.h"
#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

// How Env::NewFile opens a path. Every mode opens for reading too.
enum class FileOpenMode : std::uint8_t {
  kCreateExclusive,   // a new file; kAlreadyExists if the path exists
  kCreateOrTruncate,  // a new file, or an existing one cut to 0 bytes
  kReadWrite,         // an existing file; kNotFound if there is none
  kReadOnly,          // an existing file, writes refused
};

// The alignment a direct handle (Env::NewDirectFile) needs: the offset, the
// length and the buffer address of each of its reads and writes are
// multiples of this. 4096 is a multiple of the logical block size of
// common disks (512 or 4096 bytes), so it is right without asking the
// device (BLKSSZGET).
inline constexpr std::size_t kDirectIoAlignment = 4096;

// An open file. Destroying it closes it and drops any close error; call
// Close() to see that error.
class FileHandle {
 public:
  virtual ~FileHandle() = default;
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;

  // The path it was opened as; error messages name it.
  const std::string& path() const noexcept { return path_; }

  // Reads up to out.size() bytes at `offset`; returns how many were read,
  // fewer only where the file ends.
  virtual Result<std::size_t> ReadAt(std::uint64_t offset,
                                     std::span<char> out) const = 0;
  // Writes all of `data` at `offset` (the file grows if needed) or fails;
  // after a failure any prefix of `data` may have reached the file.
  virtual Status WriteAt(std::uint64_t offset, std::string_view data) = 0;
  // Writes all of `data` at the handle's append position and moves it past
  // them. The position starts at the file's size when it was opened;
  // WriteAt leaves it alone and Truncate pulls it back to the new size.
  virtual Status Append(std::string_view data) = 0;
  // Makes the file's data durable (fdatasync).
  virtual Status Sync() = 0;
  // Cuts (or extends with zeros) the file to `bytes`. Does not sync.
  virtual Status Truncate(std::uint64_t bytes) = 0;
  virtual Result<std::uint64_t> Size() const = 0;
  // Closes the file; every later call fails with kFailedPrecondition.
  virtual Status Close() = 0;

 protected:
  explicit FileHandle(std::string path) : path_(std::move(path)) {}

 private:
  const std::string path_;
};

// A held advisory lock on a file (Env::LockFile). Destroying it releases
// the lock, as Env::UnlockFile does.
class FileLock {
 public:
  virtual ~FileLock() = default;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  const std::string& path() const noexcept { return path_; }

 protected:
  explicit FileLock(std::string path) : path_(std::move(path)) {}

 private:
  const std::string path_;
};

class Env {
 public:
  virtual ~Env() = default;

  // The POSIX file layer; never destroyed.
  static Env* Default();
  // `env`, or Default() when it is null: what an options struct's env
  // field means.
  static Env* OrDefault(Env* env) { return env != nullptr ? env : Default(); }

  // Opens `path` as `mode` says. A path that names a directory is
  // kInvalidArgument.
  virtual Result<std::unique_ptr<FileHandle>> NewFile(const std::string& path,
                                                      FileOpenMode mode) = 0;
  // Opens `path` as NewFile does, for direct I/O: the handle's reads and
  // writes bypass the page cache (POSIX: O_DIRECT), so each one's offset,
  // length and buffer address must be multiples of kDirectIoAlignment (most
  // filesystems fail one that is not: kInternal, "Invalid argument").
  // Sync is still what makes writes durable (the device's cache, the file's
  // size). kInvalidArgument naming the path if the filesystem refuses
  // direct I/O (tmpfs on older kernels, some FUSE and network filesystems);
  // a create mode may have made the file by then. This default refuses with
  // kInvalidArgument too: an Env without direct I/O says so rather than
  // handing out a buffered handle.
  virtual Result<std::unique_ptr<FileHandle>> NewDirectFile(
      const std::string& path, FileOpenMode mode);
  // Renames `from` over `to` (atomically replacing it, as rename(2)).
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Makes the directory's entries durable (a created, renamed or removed
  // name survives a crash once this returns OK).
  virtual Status SyncDir(const std::string& dir) = 0;
  // Removes a file (not a directory).
  virtual Status Remove(const std::string& path) = 0;
  // Creates one directory (its parent must exist); kAlreadyExists if the
  // path exists, whatever it is.
  virtual Status CreateDir(const std::string& dir) = 0;
  // The names in a directory, without "." and "..", sorted.
  virtual Result<std::vector<std::string>> List(const std::string& dir) = 0;
  virtual Result<std::uint64_t> FileSize(const std::string& path) = 0;
  // Whether anything exists at `path` (false if a component is missing).
  virtual Result<bool> FileExists(const std::string& path) = 0;
  // Takes an exclusive advisory lock on `path` (created if missing) without
  // waiting: kFailedPrecondition if another holder has it, in this process
  // or another.
  virtual Result<std::unique_ptr<FileLock>> LockFile(
      const std::string& path) = 0;
  // Releases a lock LockFile returned.
  virtual Status UnlockFile(std::unique_ptr<FileLock> lock) = 0;

 protected:
  Env() = default;
};

// A failed system call as a Status: "<what> <path>: <strerror(error)>",
// with the code chosen by `error`: ENOSPC and EDQUOT (a full disk or quota)
// kResourceExhausted, ENOENT kNotFound, EEXIST kAlreadyExists, EISDIR
// kInvalidArgument, anything else kInternal. For Env implementations.
Status IoError(std::string_view what, std::string_view path, int error);

// The directory part of `path`: "." for a bare name, "/" for "/name".
std::string DirectoryOf(const std::string& path);

// Reads the whole of `file` into *out (a std::string or std::vector<char>):
// as many bytes as Size() said, and kDataLoss if the file grew or shrank
// meanwhile; kResourceExhausted if it does not fit in memory.
template <typename Buffer>
Status ReadAll(const FileHandle& file, Buffer* out) {
  Result<std::uint64_t> size = file.Size();
  if (!size.ok()) return size.status();
  try {
    out->resize(static_cast<std::size_t>(*size));
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError(file.path() + " does not fit in memory");
  }
  Result<std::size_t> read =
      file.ReadAt(0, std::span<char>(out->data(), out->size()));
  if (!read.ok()) return read.status();
  // One byte more must find the end, or the file is not what Size() said.
  char past_end;
  Result<std::size_t> more = file.ReadAt(*size, std::span<char>(&past_end, 1));
  if (!more.ok()) return more.status();
  if (*read != out->size() || *more != 0) {
    return DataLossError(file.path() + " changed size while it was read");
  }
  return Status::Ok();
}

// Opens `path` read-only and reads all of it (ReadAll).
template <typename Buffer>
Status ReadWholeFile(Env& env, const std::string& path, Buffer* out) {
  Result<std::unique_ptr<FileHandle>> file =
      env.NewFile(path, FileOpenMode::kReadOnly);
  if (!file.ok()) return file.status();
  return ReadAll(**file, out);
}

CAIRN_NAMESPACE_END

#endif  // CAIRN_BASE_ENV_H_
