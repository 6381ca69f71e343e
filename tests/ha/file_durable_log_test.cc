// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// FileDurableLog: the durable-log hook's records in checksummed append-only
// segment files with group commit; a torn or damaged tail is kDataLoss with
// the valid prefix reported; a failed write is sticky. LSNs, rotation,
// DropThrough and DurableLogReader: durable_log_reader_test.cc.

#include "cairn/ha/file_durable_log.h"

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/directory/durable_log.h"
#include "cairn/directory/group_directory.h"
#include "directory/directory_testing.h"
#include "directory/durable_log_testing.h"
#include "flush/flush_testing.h"
#include "testing/alloc_counter.h"
#include "testing/counting_env.h"
#include "testing/stress.h"

namespace cairn {
namespace {

// Dir, Handle, View, Access, Fixture, Sized and the other shared names.
using namespace testing::durable_log_names;

using testing::ReadWholeFile;
using testing::ScratchDir;
using testing::WriteWholeFile;

std::vector<std::string> ReadBodies(const std::string& path, Status* status,
                                    DurableLogScan* scan = nullptr) {
  std::vector<std::string> bodies;
  *status = ReadDurableLog(
      path, [&](Lsn, std::string_view body) { bodies.emplace_back(body); },
      scan);
  return bodies;
}

// A one-object erase record's body for `key`.
std::string EraseRecordBody(std::string_view key) {
  std::string b;
  BeginDurableRecord(DurableOp::kErase, 1, kNoGroup, "", 1, &b);
  DurableObjectState st;
  st.key = key;
  AddDurableObject(st, "", &b);
  return b;
}

// The first segment of the log in `dir` (every test here has one).
std::string Segment1(const std::string& dir) {
  return dir + "/" + DurableLogSegmentName(1);
}

// Writes `n` one-object records straight through the log's protocol; each
// must become durable unless `expect_durable` is false.
void AppendRecords(FileDurableLog* log, int n, std::string_view tag,
                   bool expect_durable = true) {
  for (int i = 0; i < n; ++i) {
    std::string body;
    BeginDurableRecord(DurableOp::kCreate, 1, kNoGroup, "", 1, &body);
    DurableObjectState st;
    st.object = static_cast<ObjectId>(i + 1);
    const std::string key = Key(tag, i);
    st.key = key;
    AddDurableObject(st, "", &body);
    Result<LogReservation> r = log->Reserve(body.size());
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(log->Append(*r, body).ok());
    const ObjectToken token{1, st.object};
    const Status durable =
        log->Finalize(*r, std::span<const ObjectToken>(&token, 1));
    ASSERT_EQ(durable.ok(), expect_durable) << durable.ToString();
  }
}

TEST(FileDurableLogTest, H1DirectoryChangesRoundTripThroughTheFile) {
  ScratchDir dir;
  const std::string path = dir.File("h1.log");
  std::vector<ObjectToken> durable_tokens;
  FileDurableLogOptions options;
  options.on_durable = [&](std::span<const ObjectToken> tokens) {
    durable_tokens.insert(durable_tokens.end(), tokens.begin(), tokens.end());
  };
  Result<std::unique_ptr<FileDurableLog>> log =
      FileDurableLog::Open(path, options);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  // The in-memory log records the same calls, for comparison.
  Fixture f;
  DirectoryOptions o;
  o.durable_log = log->get();
  o.route.bucket_count = 64;
  Fixture g;
  g.dir = std::make_unique<Dir>(o);
  RunEveryLoggedMutation(g, "t");
  RunEveryLoggedMutation(f, "t");
  EXPECT_TRUE((*log)->status().ok());
  EXPECT_EQ((*log)->durable_records(), 11u);
  EXPECT_GE((*log)->syncs(), 1u);
  log->reset();  // closed; the file alone must hold every record

  Status s;
  DurableLogScan scan;
  const std::vector<std::string> bodies = ReadBodies(path, &s, &scan);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(scan.records, 11u);
  EXPECT_EQ(scan.valid_bytes, ReadWholeFile(Segment1(path)).size());
  EXPECT_EQ(scan.first_lsn, 1u);
  EXPECT_EQ(scan.last_lsn, 11u);
  // Same records as the in-memory log saw (same ids: fresh directories).
  EXPECT_EQ(bodies, f.log.durable_bodies());
  // on_durable got every record's tokens, in order: 12 objects (a group
  // erase names two).
  ASSERT_EQ(durable_tokens.size(), 12u);
  DurableRecordView v;
  ASSERT_TRUE(DecodeDurableRecord(bodies[0], &v).ok());
  EXPECT_EQ(durable_tokens[0], (ObjectToken{1, v.objects[0].object}));

  // Reopened, the log appends after the existing records.
  log = FileDurableLog::Open(path);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  AppendRecords(log->get(), 2, "again");
  log->reset();
  EXPECT_EQ(ReadBodies(path, &s).size(), 13u);
  EXPECT_TRUE(s.ok());
}

TEST(FileDurableLogTest, TornTailIsDataLossAndReportsTheValidPrefix) {
  ScratchDir dir;
  const std::string path = dir.File("torn.log");
  {
    Result<std::unique_ptr<FileDurableLog>> log = FileDurableLog::Open(path);
    ASSERT_TRUE(log.ok());
    AppendRecords(log->get(), 3, "k");
  }
  const std::string segment = Segment1(path);
  const std::string whole = ReadWholeFile(segment);
  Status s;
  DurableLogScan full;
  ASSERT_EQ(ReadBodies(path, &s, &full).size(), 3u);
  ASSERT_TRUE(s.ok());
  // Every cut inside the last record (its frame or its body) is torn.
  DurableLogScan two;
  WriteWholeFile(segment, whole.substr(0, whole.size() - 1));
  std::vector<std::string> bodies = ReadBodies(path, &s, &two);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(bodies.size(), 2u);
  EXPECT_EQ(two.records, 2u);
  const std::size_t last = full.valid_bytes - two.valid_bytes;
  for (std::size_t cut = 1; cut < last; ++cut) {
    WriteWholeFile(segment, whole.substr(0, whole.size() - cut));
    DurableLogScan scan;
    EXPECT_EQ(ReadBodies(path, &s, &scan).size(), 2u) << cut;
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << cut;
    EXPECT_EQ(scan.valid_bytes, two.valid_bytes) << cut;
  }
  // Open refuses the damaged file unless told to cut the tail off.
  WriteWholeFile(segment, whole.substr(0, whole.size() - 5));
  Result<std::unique_ptr<FileDurableLog>> refused = FileDurableLog::Open(path);
  EXPECT_EQ(refused.status().code(), StatusCode::kDataLoss);
  FileDurableLogOptions repair;
  repair.truncate_damaged_tail = true;
  Result<std::unique_ptr<FileDurableLog>> log =
      FileDurableLog::Open(path, repair);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  AppendRecords(log->get(), 1, "after");
  log->reset();
  bodies = ReadBodies(path, &s);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(bodies.size(), 3u);
}

TEST(FileDurableLogTest, FlippedByteIsDataLoss) {
  ScratchDir dir;
  const std::string path = dir.File("flip.log");
  {
    Result<std::unique_ptr<FileDurableLog>> log = FileDurableLog::Open(path);
    ASSERT_TRUE(log.ok());
    AppendRecords(log->get(), 3, "k");
  }
  const std::string segment = Segment1(path);
  const std::string whole = ReadWholeFile(segment);
  Status s;
  // Flip each byte of the records (not the header) in turn: every flip is
  // caught, and the records before the damaged one still read.
  std::size_t caught = 0;
  for (std::size_t i = kDurableLogHeaderBytes; i < whole.size(); ++i) {
    std::string bad = whole;
    bad[i] ^= 0x20;
    WriteWholeFile(segment, bad);
    DurableLogScan scan;
    const std::vector<std::string> bodies = ReadBodies(path, &s, &scan);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << i;
    EXPECT_LT(bodies.size(), 3u) << i;
    EXPECT_LE(scan.valid_bytes, i) << i;
    caught += s.code() == StatusCode::kDataLoss;
  }
  EXPECT_EQ(caught, whole.size() - kDurableLogHeaderBytes);
  // A damaged header: not a durable log, or another version.
  std::string bad_magic = whole;
  bad_magic[0] ^= 0x01;
  WriteWholeFile(segment, bad_magic);
  ReadBodies(path, &s);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(FileDurableLog::Open(path).status().code(), StatusCode::kDataLoss);
}

TEST(FileDurableLogTest, CancelledRecordsNeverReachTheFile) {
  // B is appended after A; A is cancelled after its append (as when the
  // route refuses a create's publish). B's Finalize waits for A to be
  // resolved and the file holds B only.
  ScratchDir dir;
  const std::string path = dir.File("cancel.log");
  Result<std::unique_ptr<FileDurableLog>> log = FileDurableLog::Open(path);
  ASSERT_TRUE(log.ok());
  FileDurableLog& l = **log;
  Result<LogReservation> a = l.Reserve(64);
  Result<LogReservation> b = l.Reserve(64);
  Result<LogReservation> c = l.Reserve(64);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_TRUE(l.Append(*a, EraseRecordBody("a")).ok());
  ASSERT_TRUE(l.Append(*b, EraseRecordBody("b")).ok());
  l.Cancel(*c);  // never appended
  std::atomic<bool> finalized{false};
  std::thread finalizer([&] {
    const ObjectToken t{1, 2};
    EXPECT_TRUE(l.Finalize(*b, std::span<const ObjectToken>(&t, 1)).ok());
    finalized.store(true, std::memory_order_release);
  });
  // B cannot be durable while A is unresolved (A is ahead of it).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(finalized.load(std::memory_order_acquire));
  l.Cancel(*a);
  finalizer.join();
  EXPECT_EQ(l.durable_records(), 1u);
  Status s;
  const std::vector<std::string> bodies = ReadBodies(path, &s);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(bodies.size(), 1u);
  EXPECT_EQ(bodies[0], EraseRecordBody("b"));
}

// An Append that runs out of memory (std::bad_alloc) leaves no record
// behind (DurableLog::Append: the directory takes it as "nothing changed"):
// a batch's earlier record still finalizes, a single reservation can be
// cancelled, and a later record becomes durable without waiting on the
// failed one. Each allocation of the Append is failed in turn. Real bug
// this caught: a batch's next record was charged and numbered before its
// slot and its place in the append order were allocated, so a throw there
// left a slot the batch named but the map did not hold, or one finalized
// but never written (its Finalize would wait for good).
TEST(FileDurableLogTest, H1AppendOutOfMemoryLeavesNoRecord) {
  const ObjectToken token{1, 1};
  const std::span<const ObjectToken> tokens(&token, 1);
  Watchdog watchdog(kDeadlockBound, "append out of memory");
  for (bool batch : {true, false}) {
    int threw = 0;
    int n = 1;
    for (; n <= 50; ++n) {
      SCOPED_TRACE(std::string(batch ? "batch " : "single ") +
                   std::to_string(n));
      ScratchDir dir;
      const std::string path = dir.File("oom.log");
      Result<std::unique_ptr<FileDurableLog>> log = FileDurableLog::Open(path);
      ASSERT_TRUE(log.ok());
      FileDurableLog& l = **log;
      Result<LogReservation> r = batch ? l.ReserveBatch(2, 128) : l.Reserve(64);
      ASSERT_TRUE(r.ok());
      if (batch) {
        ASSERT_TRUE(l.Append(*r, EraseRecordBody("first")).ok());
      }
      const std::string second = EraseRecordBody("second");
      const int threw_before = threw;
      const bool reached = testing::FailNthAllocationDuring(
          n, &threw, [&] { ASSERT_TRUE(l.Append(*r, second).ok()); });
      if (HasFatalFailure()) return;  // the Append refused: stop here
      const bool failed = threw != threw_before;
      std::vector<std::string> want;
      if (batch) {
        want.push_back(EraseRecordBody("first"));
        if (!failed) want.push_back(second);
        EXPECT_TRUE(l.Finalize(*r, tokens).ok());
      } else if (failed) {
        l.Cancel(*r);
      } else {
        want.push_back(second);
        EXPECT_TRUE(l.Finalize(*r, tokens).ok());
      }
      Result<LogReservation> later = l.Reserve(64);
      ASSERT_TRUE(later.ok());
      ASSERT_TRUE(l.Append(*later, EraseRecordBody("later")).ok());
      EXPECT_TRUE(l.Finalize(*later, tokens).ok());
      want.push_back(EraseRecordBody("later"));
      Status s;
      EXPECT_EQ(ReadBodies(path, &s), want);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!reached) break;  // the Append made fewer than n allocations
    }
    EXPECT_GT(threw, 0) << (batch ? "batch" : "single");
    EXPECT_LE(n, 50) << "the call made more allocations than the bound";
  }
}

// A write that fails is sticky (durable_log.h, Finalize): the record it
// carried is not reported durable, status() keeps the error, and every later
// mutation is refused with it, so nothing more becomes visible. The write is
// made to fail with RLIMIT_FSIZE (ctest runs each test in its own process;
// the limit is restored before the test ends).
TEST(FileDurableLogTest, FailedWriteIsStickyAndRefusesLaterChanges) {
  ScratchDir dir;
  const std::string path = dir.File("sticky.log");
  std::atomic<int> durable{0};
  FileDurableLogOptions options;
  options.on_durable = [&](std::span<const ObjectToken>) { ++durable; };
  Result<std::unique_ptr<FileDurableLog>> log =
      FileDurableLog::Open(path, options);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  DirectoryOptions o;
  o.durable_log = log->get();
  Dir d(o);
  ASSERT_TRUE(d.Create("before", Sized(1), {"x"}).ok());
  ASSERT_EQ(durable.load(), 1);
  const std::size_t size = ReadWholeFile(Segment1(path)).size();

  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  void (*saved_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = size + 8;  // less than one more record
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  // Visible (the change cannot be undone) but not durable: the create
  // fails with the log's error, so it was never acknowledged (H5).
  const Status lost = d.Create("lost", Sized(1), {"y"}).status();
  const Status sticky = (*log)->status();
  EXPECT_EQ(lost, sticky);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  std::signal(SIGXFSZ, saved_handler);

  EXPECT_FALSE(sticky.ok());
  EXPECT_EQ(durable.load(), 1) << "a failed record was reported durable";
  EXPECT_EQ((*log)->durable_records(), 1u);
  // With room again, the log still refuses: the error is sticky.
  EXPECT_EQ(d.Create("after", Sized(1), {"z"}).status().code(), sticky.code());
  EXPECT_EQ(d.Pin("after").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.Erase("before").code(), sticky.code());
  EXPECT_TRUE(d.Pin("before").ok());
  EXPECT_EQ((*log)->status().code(), sticky.code());
  // The file holds the durable prefix (and perhaps a torn tail).
  Status s;
  DurableLogScan scan;
  ReadBodies(path, &s, &scan);
  EXPECT_EQ(scan.records, 1u);
}

TEST(FileDurableLogTest, BadOptionsAndPathsAreRejected) {
  ScratchDir dir;
  EXPECT_EQ(FileDurableLog::Open("").status().code(),
            StatusCode::kInvalidArgument);
  WriteWholeFile(dir.File("file"), "x");
  EXPECT_EQ(FileDurableLog::Open(dir.File("file")).status().code(),
            StatusCode::kInvalidArgument);  // not a directory
  EXPECT_EQ(FileDurableLog::Open(dir.File("no/such/dir.log")).status().code(),
            StatusCode::kNotFound);
  FileDurableLogOptions no_segment;
  no_segment.segment_bytes = 0;
  EXPECT_EQ(FileDurableLog::Open(dir.File("a.log"), no_segment).status().code(),
            StatusCode::kInvalidArgument);
  FileDurableLogOptions zero;
  zero.max_record_bytes = 0;
  EXPECT_EQ(FileDurableLog::Open(dir.File("a.log"), zero).status().code(),
            StatusCode::kInvalidArgument);
  FileDurableLogOptions tight;
  tight.max_record_bytes = 100;
  tight.max_pending_bytes = 100;
  EXPECT_EQ(FileDurableLog::Open(dir.File("a.log"), tight).status().code(),
            StatusCode::kInvalidArgument);
  // A segment that is not a durable log segment (here: empty) is refused.
  std::filesystem::create_directory(dir.File("empty"));
  WriteWholeFile(Segment1(dir.File("empty")), "");
  EXPECT_EQ(FileDurableLog::Open(dir.File("empty")).status().code(),
            StatusCode::kDataLoss);
  Status s;
  EXPECT_EQ(ReadBodies(dir.File("missing.log"), &s).size(), 0u);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  // Limits: a record over max_record_bytes, and the pending-bytes budget.
  FileDurableLogOptions small;
  small.max_record_bytes = 128;
  small.max_pending_bytes = 300;
  Result<std::unique_ptr<FileDurableLog>> log =
      FileDurableLog::Open(dir.File("small.log"), small);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ((*log)->Reserve(129).status().code(), StatusCode::kInvalidArgument);
  Result<LogReservation> r1 = (*log)->Reserve(128);
  Result<LogReservation> r2 = (*log)->Reserve(128);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ((*log)->Reserve(128).status().code(),
            StatusCode::kResourceExhausted);
  (*log)->Cancel(*r1);
  Result<LogReservation> r3 = (*log)->Reserve(128);
  EXPECT_TRUE(r3.ok());
  EXPECT_EQ((*log)->Append(*r2, std::string(129, 'x')).code(),
            StatusCode::kInvalidArgument);
  (*log)->Cancel(*r2);
  (*log)->Cancel(*r3);
}

TEST(FileDurableLogTest, H1ConcurrentWritersKeepPerKeyOrderInTheFile) {
  // Four threads create and erase their own keys and race on shared ones
  // through one file log (group commit). Every change returned OK is in the
  // file, and each key's records alternate create, erase, as the changes
  // happened.
  ScratchDir dir;
  const std::string path = dir.File("race.log");
  Result<std::unique_ptr<FileDurableLog>> log = FileDurableLog::Open(path);
  ASSERT_TRUE(log.ok());
  DirectoryOptions o;
  o.durable_log = log->get();
  o.route.bucket_count = 64;
  Dir d(o);
  const int rounds = testing::StressIterations(150);
  std::atomic<std::uint64_t> changes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        const std::string key = Key("shared", i % 3);
        if (d.Create(key, Sized(1), {"x"}).ok()) {
          changes.fetch_add(1, std::memory_order_relaxed);
        }
        if (d.Erase(key).ok()) changes.fetch_add(1, std::memory_order_relaxed);
        const std::string own = Key(std::to_string(t) + "-", i % 5);
        if (d.Create(own, Sized(1)).ok()) {
          changes.fetch_add(1, std::memory_order_relaxed);
        }
        if (d.Erase(own).ok()) changes.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_TRUE((*log)->status().ok());
  Status s;
  const std::vector<std::string> bodies = ReadBodies(path, &s);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(bodies.size(), changes.load());
  std::unordered_map<std::string, DurableOp> last;
  for (const std::string& body : bodies) {
    DurableRecordView v;
    ASSERT_TRUE(DecodeDurableRecord(body, &v).ok());
    const std::string key(v.objects[0].key);
    auto it = last.find(key);
    const DurableOp expect = it == last.end() || it->second == DurableOp::kErase
                                 ? DurableOp::kCreate
                                 : DurableOp::kErase;
    EXPECT_EQ(v.op, expect) << key;
    last[key] = v.op;
  }
}

// The log's files go through FileDurableLogOptions::env: the directory and
// its first segment's creation (header, sync, rename, directory syncs), one
// write and one sync per group commit, the reads of ReadDurableLog and of a
// reopen, and the cut of a damaged tail. A sync the Env fails makes the
// log's error sticky; a write it tears leaves a tail that a reopen cuts back
// to the durable records.
TEST(FileDurableLogTest, IoGoesThroughTheEnvAndAFailedSyncIsSticky) {
  ScratchDir dir;
  testing::CountingEnv env;
  using testing::EnvCall;
  const std::string path = dir.File("env");
  const std::string segment = Segment1(path);
  FileDurableLogOptions options;
  options.env = &env;
  {
    Result<std::unique_ptr<FileDurableLog>> log =
        FileDurableLog::Open(path, options);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_EQ(env.count(EnvCall::kCreateDir, path), 1u);
    EXPECT_EQ(env.count(EnvCall::kNewFile, segment), 1u);  // <segment>.tmp
    EXPECT_EQ(env.count(EnvCall::kWriteAt, segment), 1u);  // the header
    EXPECT_EQ(env.count(EnvCall::kSync, segment), 1u);
    EXPECT_EQ(env.count(EnvCall::kRename, segment), 1u);
    // The parent (a new log) and the log's directory (the new segment).
    EXPECT_EQ(env.count(EnvCall::kSyncDir, dir.path()), 2u);
    EXPECT_EQ(env.count(EnvCall::kSyncDir, path), 1u);
    AppendRecords(log->get(), 3, "a");
    EXPECT_EQ(env.count(EnvCall::kWriteAt, segment), 4u);
    EXPECT_EQ(env.count(EnvCall::kSync, segment), 4u);
    EXPECT_EQ((*log)->syncs(), 3u);
    EXPECT_EQ((*log)->durable_lsn(), 3u);

    env.FailNth(EnvCall::kSync, 1, InternalError("injected sync failure"));
    std::string body;
    BeginDurableRecord(DurableOp::kCreate, 1, kNoGroup, "", 0, &body);
    Result<LogReservation> r = (*log)->Reserve(body.size());
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE((*log)->Append(*r, body).ok());
    // Finalize says the record is not durable, and why (H5).
    EXPECT_EQ((*log)->Finalize(*r, {}).code(), StatusCode::kInternal);
    const Status sticky = (*log)->status();
    EXPECT_EQ(sticky.code(), StatusCode::kInternal);
    EXPECT_EQ(sticky.message(), "durable log: injected sync failure");
    EXPECT_EQ((*log)->durable_records(), 3u);
    EXPECT_EQ((*log)->durable_lsn(), 3u);
    EXPECT_EQ((*log)->Reserve(body.size()).status(), sticky);
    EXPECT_EQ((*log)->Rotate(), sticky);
  }
  // The failed sync's record reached the file but never became durable;
  // here it reads back whole (the Env dropped only the sync).
  Status s;
  DurableLogScan scan;
  ReadBodies(path, &s, &scan);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(scan.records, 4u);
  env.FailNth(EnvCall::kReadAt, 1, InternalError("injected read failure"));
  EXPECT_EQ(ReadDurableLog(path, nullptr, &scan, &env).message(),
            "durable log: injected read failure");

  // A torn write leaves a damaged tail; reopening cuts it through the Env.
  {
    Result<std::unique_ptr<FileDurableLog>> log =
        FileDurableLog::Open(path, options);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_EQ((*log)->durable_lsn(), 4u);
    env.TearNth(EnvCall::kWriteAt, 1, 5);
    AppendRecords(log->get(), 1, "torn", /*expect_durable=*/false);
    EXPECT_FALSE((*log)->status().ok());
  }
  EXPECT_EQ(FileDurableLog::Open(path, options).status().code(),
            StatusCode::kDataLoss);
  options.truncate_damaged_tail = true;
  const std::uint64_t truncates = env.count(EnvCall::kTruncate, segment);
  ASSERT_TRUE(FileDurableLog::Open(path, options).ok());
  EXPECT_EQ(env.count(EnvCall::kTruncate, segment), truncates + 1);
  EXPECT_TRUE(ReadDurableLog(path, nullptr, &scan, &env).ok());
  EXPECT_EQ(scan.records, 4u);
}

}  // namespace
}  // namespace cairn
