// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// FaultEnv: a simulated disk for durability tests. It is an Env whose files
// and directories live in memory and which remembers, for every file, the
// bytes as of its last successful Sync and, for every directory, its
// entries as of its last successful SyncDir. On that model it can
//
//   - fail the nth call (of any kind, or of one kind) with a chosen errno:
//       env.FailCall(17, EIO);                  // the 17th call from now
//       env.FailCall(2, ENOSPC, EnvCall::kSync);
//   - tear a write: only a prefix of the nth WriteAt/Append reaches the file
//     and the call fails:
//       env.TearWrite(3, /*keep_bytes=*/100);
//   - cut the power, now, right after the nth successful sync, or just
//     before the nth call:
//       env.CutAfterSync(5, CutMode::kDropUnsynced);
//       env.CutAtCall(40, CutMode::kGarbageUnsynced);
//     A cut rolls every file back to its last sync (kDropUnsynced), or
//     replaces every byte written since then with garbage
//     (kGarbageUnsynced; a byte rewritten with the value it held at the
//     last sync stays), or keeps the unsynced writes in order up to a
//     random point, the last one torn at a 512-byte sector (kTearUnsynced);
//     and it undoes every directory entry created, renamed or removed since
//     its directory's last SyncDir. The process that owned the files is then
//     dead: every call fails with EIO, and every handle and lock opened
//     before the cut stays dead, until Reboot().
//
// A test runs a workload once against a healthy FaultEnv to count its calls
// and syncs, then once per case with one fault armed, and after each case
// reboots and reopens to check what survived (tests/flush/fault_sweep_test.cc
// shows the pattern). Paths are plain strings under a root ("/sim" unless
// given) that exists and is durable from the start.
//
// Direct handles (NewDirectFile) hold writes to the rule O_DIRECT does: a
// ReadAt, WriteAt or Append whose offset, length or buffer address is not a
// multiple of kDirectIoAlignment fails with EINVAL and writes nothing, and
// is counted (misaligned()), so a sweep fails on it even where the format
// survives the error. RefuseDirectIo() makes NewDirectFile fail as a
// filesystem without O_DIRECT does.
//
// Env::Default() retries EINTR below the Env interface, so EINTR is never
// seen here; the errnos that reach a format are EIO, ENOSPC, EDQUOT and
// what opening or renaming can return.
//
// Thread-safe: one mutex covers the whole disk.

#ifndef CAIRN_TESTS_TESTING_FAULT_ENV_H_
#define CAIRN_TESTS_TESTING_FAULT_ENV_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/base/env.h"
#include "cairn/base/status.h"
#include "testing/counting_env.h"  // EnvCall

namespace cairn::testing {

enum class CutMode : std::uint8_t {
  kDropUnsynced,     // unsynced bytes vanish
  kGarbageUnsynced,  // unsynced bytes become random bytes
  kTearUnsynced,     // an in-order prefix of the unsynced writes survives
};
const char* CutModeName(CutMode mode);

class FaultEnv final : public Env {
 public:
  explicit FaultEnv(std::uint64_t seed = 1, std::string root = "/sim");
  ~FaultEnv() override;

  const std::string& root() const noexcept { return root_; }

  // --- Faults (each fires once; counting starts at the next call) --------
  // The nth call from now, of `kind` if given (else of any kind), fails
  // with `error` and has no effect.
  void FailCall(std::uint64_t nth, int error,
                std::optional<EnvCall> kind = std::nullopt);
  // As FailCall, but the nth matching call and every one after it fail
  // (a full disk) until ClearFaults() or Reboot().
  void FailFrom(std::uint64_t nth, int error,
                std::optional<EnvCall> kind = std::nullopt);
  // The nth WriteAt or Append from now writes only its first `keep_bytes`
  // and then fails with `error`.
  void TearWrite(std::uint64_t nth, std::size_t keep_bytes, int error = EIO);
  // The power is cut right after the nth successful Sync or SyncDir from
  // now (the sync itself returns OK), or just before the nth call from now
  // (which fails).
  void CutAfterSync(std::uint64_t nth, CutMode mode);
  void CutAtCall(std::uint64_t nth, CutMode mode);
  // Cuts the power now.
  void PowerCut(CutMode mode);
  // The process dies now and the power stays on: every byte written so far
  // stays (as after a SIGKILL) and every call fails until Reboot().
  void Kill();
  // Whether the power is cut or the process killed (calls fail until Reboot).
  bool dead() const;
  // Power back on: calls work again; handles and locks from before the cut
  // stay dead. Also disarms every fault that has not fired.
  void Reboot();
  // Disarms every fault that has not fired.
  void ClearFaults();
  // From now on NewDirectFile fails with kInvalidArgument, as the POSIX Env
  // does where the filesystem refuses O_DIRECT.
  void RefuseDirectIo();

  // --- Counters (since construction) --------------------------------------
  std::uint64_t calls() const;
  std::uint64_t writes() const;  // WriteAt and Append calls
  std::uint64_t syncs() const;   // successful Sync and SyncDir calls
  std::uint64_t faults_fired() const;
  // Direct-handle calls refused for misalignment (the class comment).
  std::uint64_t misaligned() const;
  // The kind of every call so far, in order (calls()[i] is call i + 1).
  std::vector<EnvCall> journal() const;

  // --- Inspection ---------------------------------------------------------
  // The current bytes of a file; nullopt if there is none.
  std::optional<std::string> Contents(const std::string& path) const;
  // Replaces a file's bytes (current and durable), creating it if the
  // directory exists: for planting damage.
  Status SetContents(const std::string& path, std::string bytes);

  // --- Env ----------------------------------------------------------------
  Result<std::unique_ptr<FileHandle>> NewFile(const std::string& path,
                                              FileOpenMode mode) override;
  Result<std::unique_ptr<FileHandle>> NewDirectFile(const std::string& path,
                                                    FileOpenMode mode) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status SyncDir(const std::string& dir) override;
  Status Remove(const std::string& path) override;
  Status CreateDir(const std::string& dir) override;
  Result<std::vector<std::string>> List(const std::string& dir) override;
  Result<std::uint64_t> FileSize(const std::string& path) override;
  Result<bool> FileExists(const std::string& path) override;
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override;
  Status UnlockFile(std::unique_ptr<FileLock> lock) override;

 private:
  class SimFile;
  class SimLock;
  struct Inode;
  struct Fault;
  enum class Entry : std::uint8_t { kFile, kDir };

  // What Enter decided for one call.
  struct Verdict {
    Status status;                          // not OK: fail the call
    std::optional<std::size_t> keep_bytes;  // a torn write
  };

  // Env calls belong to whichever boot is current.
  static constexpr std::uint64_t kAnyBoot = 0;
  // Counts the call and applies any fault due on it; `boot` is the boot the
  // handle was opened in (kAnyBoot for Env calls).
  Verdict Enter(EnvCall call, const std::string& path, std::uint64_t boot);
  // After a successful Sync/SyncDir: fires a CutAfterSync that came due.
  void SyncDone();
  void CutLocked(CutMode mode);
  bool DirExistsLocked(const std::string& dir) const;
  Status CheckParentLocked(const std::string& path, const char* what) const;
  std::shared_ptr<Inode> FindFileLocked(const std::string& path) const;
  Result<std::unique_ptr<FileHandle>> Open(const std::string& path,
                                           FileOpenMode mode, bool direct);

  const std::string root_;
  mutable std::mutex mu_;
  std::mt19937_64 rng_;
  std::uint64_t boot_ = 1;
  bool dead_ = false;
  std::uint64_t calls_ = 0;
  std::uint64_t writes_ = 0;
  std::uint64_t syncs_ = 0;
  std::uint64_t faults_fired_ = 0;
  std::uint64_t misaligned_ = 0;
  bool refuse_direct_ = false;
  std::vector<EnvCall> journal_;
  std::vector<Fault> faults_;
  // The namespace now, and as of each directory's last SyncDir.
  std::map<std::string, std::shared_ptr<Inode>> files_;
  std::set<std::string> dirs_;
  std::map<std::string, std::shared_ptr<Inode>> durable_files_;
  std::set<std::string> durable_dirs_;
  std::set<std::string> locks_;  // paths locked in the current boot
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_TESTING_FAULT_ENV_H_
