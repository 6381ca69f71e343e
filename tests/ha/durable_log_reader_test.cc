// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// FileDurableLog format v2: LSNs (gapless across cancels, reopens and
// rotation; start_lsn), Rotate and DropThrough (only covered segments, never
// the current one, appenders not blocked), and DurableLogReader (from any
// LSN, tailing a live writer across segments, incomplete tails, damage,
// dropped segments, bounded memory).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/internal/coding.h"
#include "cairn/directory/durable_log.h"
#include "cairn/ha/file_durable_log.h"
#include "testing/scratch_dir.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::ScratchDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void AppendToFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <typename T>
T ValueOr(const Result<T>& r, T otherwise) {
  return r.ok() ? *r : otherwise;
}

std::string SegmentPath(const std::string& dir, Lsn first) {
  return dir + "/" + DurableLogSegmentName(first);
}

std::string BodyOf(Lsn lsn, std::size_t pad = 0) {
  return "record-" + std::to_string(lsn) + std::string(pad, 'p');
}

// One record through the protocol; false if the log refused it.
bool Write(FileDurableLog& log, const std::string& body) {
  Result<LogReservation> r = log.Reserve(body.size());
  if (!r.ok()) return false;
  if (!log.Append(*r, body).ok()) {
    log.Cancel(*r);
    return false;
  }
  return log.Finalize(*r, {}).ok();
}

struct Read {
  Status status;
  std::vector<Lsn> lsns;
  std::vector<std::string> bodies;
};

Read ReadAll(const std::string& dir) {
  Read out;
  out.status = ReadDurableLog(dir, [&](Lsn lsn, std::string_view body) {
    out.lsns.push_back(lsn);
    out.bodies.emplace_back(body);
  });
  return out;
}

// Reads with a reader until Next returns false or fails.
Status Drain(DurableLogReader& reader, std::vector<Lsn>* lsns,
             std::vector<std::string>* bodies = nullptr) {
  for (;;) {
    DurableLogEntry e;
    Result<bool> next = reader.Next(&e);
    if (!next.ok()) return next.status();
    if (!*next) return Status::Ok();
    lsns->push_back(e.lsn);
    if (bodies != nullptr) bodies->emplace_back(e.body);
  }
}

std::vector<Lsn> Range(Lsn first, Lsn last) {
  std::vector<Lsn> v;
  for (Lsn l = first; l <= last; ++l) v.push_back(l);
  return v;
}

// A log in `dir` whose segments hold LSNs 1-3, 4-6, 7-9 (Rotate after every
// third record), `pad` bytes added to each body.
void WriteThreeSegments(const std::string& dir, std::size_t pad = 0) {
  FileDurableLogOptions options;
  options.sync = false;
  auto log = FileDurableLog::Open(dir, options);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  for (Lsn lsn = 1; lsn <= 9; ++lsn) {
    ASSERT_TRUE(Write(**log, BodyOf(lsn, pad)));
    if (lsn % 3 == 0) {
      ASSERT_TRUE((*log)->Rotate().ok());
    }
  }
  EXPECT_EQ((*log)->segments(), 3u);
}

TEST(DurableLogLsnTest, GaplessAcrossCancelsReopensAndRotation) {
  ScratchDir scratch;
  const std::string dir = scratch.File("log");
  std::vector<Lsn> batches;
  std::vector<std::string> written;
  for (int open = 0; open < 3; ++open) {
    FileDurableLogOptions options;
    options.segment_bytes = 300;  // a new segment every few records
    options.on_batch_durable = [&](Lsn last) { batches.push_back(last); };
    auto log = FileDurableLog::Open(dir, options);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_EQ((*log)->durable_lsn(), written.size());
    for (int i = 0; i < 10; ++i) {
      // Two appended, the first cancelled: it takes no LSN.
      Result<LogReservation> a = (*log)->Reserve(16);
      Result<LogReservation> b = (*log)->Reserve(16);
      ASSERT_TRUE(a.ok() && b.ok());
      ASSERT_TRUE((*log)->Append(*a, "cancelled").ok());
      const std::string body = BodyOf(written.size() + 1, 40);
      ASSERT_TRUE((*log)->Append(*b, body).ok());
      (*log)->Cancel(*a);
      ASSERT_TRUE((*log)->Finalize(*b, {}).ok());
      written.push_back(body);
      EXPECT_EQ((*log)->durable_lsn(), written.size());
    }
    EXPECT_GE((*log)->segments(), static_cast<std::size_t>(open + 2));
    EXPECT_EQ((*log)->first_lsn(), 1u);
  }
  const Read read = ReadAll(dir);
  ASSERT_TRUE(read.status.ok()) << read.status.ToString();
  EXPECT_EQ(read.lsns, Range(1, written.size()));
  EXPECT_EQ(read.bodies, written);
  // One call per batch, each with the batch's last LSN.
  EXPECT_EQ(batches, Range(1, written.size()));
  // Every segment is named by its first LSN, and they follow each other.
  std::vector<Lsn> firsts;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".log") {
      firsts.push_back(std::stoull(entry.path().stem().string()));
    }
  }
  std::sort(firsts.begin(), firsts.end());
  ASSERT_GE(firsts.size(), 6u);
  EXPECT_EQ(firsts.front(), 1u);
  for (std::size_t i = 1; i < firsts.size(); ++i) {
    EXPECT_GT(firsts[i], firsts[i - 1]);
  }
}

TEST(DurableLogLsnTest, StartLsnRules) {
  ScratchDir scratch;
  // A fresh log starts at 1 and holds nothing.
  {
    auto log = FileDurableLog::Open(scratch.File("fresh"));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_EQ((*log)->durable_lsn(), 0u);
    EXPECT_EQ((*log)->first_lsn(), 1u);
    EXPECT_TRUE(std::filesystem::exists(SegmentPath(scratch.File("fresh"), 1)));
  }
  // A promoted follower continues a primary's LSNs in a new directory.
  const std::string dir = scratch.File("promoted");
  FileDurableLogOptions options;
  options.start_lsn = 100;
  {
    auto log = FileDurableLog::Open(dir, options);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_EQ((*log)->durable_lsn(), 99u);
    EXPECT_EQ((*log)->first_lsn(), 100u);
    ASSERT_TRUE(Write(**log, "a"));
    ASSERT_TRUE(Write(**log, "b"));
    EXPECT_EQ((*log)->durable_lsn(), 101u);
  }
  // Non-empty: start_lsn must be the next LSN, or 0.
  options.start_lsn = 100;
  EXPECT_EQ(FileDurableLog::Open(dir, options).status().code(),
            StatusCode::kFailedPrecondition);
  options.start_lsn = 103;
  EXPECT_EQ(FileDurableLog::Open(dir, options).status().code(),
            StatusCode::kFailedPrecondition);
  options.start_lsn = 102;
  {
    auto log = FileDurableLog::Open(dir, options);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    ASSERT_TRUE(Write(**log, "c"));
  }
  options.start_lsn = 0;
  {
    auto log = FileDurableLog::Open(dir, options);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_EQ((*log)->durable_lsn(), 102u);
    EXPECT_EQ((*log)->first_lsn(), 100u);
  }
  const Read read = ReadAll(dir);
  ASSERT_TRUE(read.status.ok()) << read.status.ToString();
  EXPECT_EQ(read.lsns, Range(100, 102));
  EXPECT_EQ(read.bodies, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(DurableLogRotateTest, ANewSegmentStartsOnlyAfterARecord) {
  ScratchDir scratch;
  const std::string dir = scratch.File("log");
  auto log = FileDurableLog::Open(dir);
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE((*log)->Rotate().ok());  // nothing in segment 1 yet
  ASSERT_TRUE(Write(**log, "one"));
  EXPECT_EQ((*log)->segments(), 1u);
  ASSERT_TRUE((*log)->Rotate().ok());
  ASSERT_TRUE((*log)->Rotate().ok());  // one rotation, however many calls
  EXPECT_EQ((*log)->segments(), 1u);   // no I/O until the next write
  ASSERT_TRUE(Write(**log, "two"));
  ASSERT_TRUE(Write(**log, "three"));
  EXPECT_EQ((*log)->segments(), 2u);
  EXPECT_TRUE(std::filesystem::exists(SegmentPath(dir, 2)));
  log->reset();
  const Read read = ReadAll(dir);
  EXPECT_TRUE(read.status.ok());
  EXPECT_EQ(read.lsns, Range(1, 3));
}

TEST(DurableLogDropTest, RemovesOnlyCoveredSegmentsAndNeverTheCurrent) {
  ScratchDir scratch;
  const std::string dir = scratch.File("log");
  WriteThreeSegments(dir);
  FileDurableLogOptions options;
  options.sync = false;
  auto log = FileDurableLog::Open(dir, options);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ((*log)->segments(), 3u);
  // LSN 5 covers segment 1 (1-3) only.
  Result<std::size_t> dropped = (*log)->DropThrough(5);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 1u);
  EXPECT_EQ((*log)->first_lsn(), 4u);
  EXPECT_FALSE(std::filesystem::exists(SegmentPath(dir, 1)));
  EXPECT_TRUE(std::filesystem::exists(SegmentPath(dir, 4)));
  // Far past the end: segment 4 goes, the current one (7-9) never does.
  dropped = (*log)->DropThrough(1000);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 1u);
  EXPECT_EQ((*log)->segments(), 1u);
  EXPECT_EQ((*log)->first_lsn(), 7u);
  EXPECT_EQ(ValueOr((*log)->DropThrough(1000), std::size_t{99}), 0u);
  ASSERT_TRUE(Write(**log, BodyOf(10)));
  log->reset();
  // A reopened log and a reader start at the oldest segment left.
  log = FileDurableLog::Open(dir, options);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ((*log)->first_lsn(), 7u);
  EXPECT_EQ((*log)->durable_lsn(), 10u);
  const Read read = ReadAll(dir);
  EXPECT_TRUE(read.status.ok()) << read.status.ToString();
  EXPECT_EQ(read.lsns, Range(7, 10));
  // Below the oldest segment: the caller needs a newer snapshot.
  EXPECT_EQ(DurableLogReader::Open(dir, 6).status().code(),
            StatusCode::kOutOfRange);
  auto reader = DurableLogReader::Open(dir, 8);
  ASSERT_TRUE(reader.ok());
  std::vector<Lsn> lsns;
  EXPECT_TRUE(Drain(**reader, &lsns).ok());
  EXPECT_EQ(lsns, Range(8, 10));
}

// Appenders keep going while another thread rotates and drops; every
// record is written once, gapless, and the drops never block them (TSan:
// no race between the flusher's segment switch and DropThrough).
TEST(DurableLogDropTest, ConcurrentAppendersRotationAndDrops) {
  ScratchDir scratch;
  const std::string dir = scratch.File("log");
  FileDurableLogOptions options;
  options.sync = false;
  options.segment_bytes = 2048;
  auto opened = FileDurableLog::Open(dir, options);
  ASSERT_TRUE(opened.ok());
  FileDurableLog& log = **opened;
  const int per_thread = testing::StressIterations(400);
  std::atomic<bool> done{false};
  std::atomic<std::size_t> dropped{0};
  std::thread dropper([&] {
    while (!done.load(std::memory_order_acquire)) {
      EXPECT_TRUE(log.Rotate().ok());
      Result<std::size_t> n = log.DropThrough(log.durable_lsn());
      EXPECT_TRUE(n.ok());
      dropped.fetch_add(ValueOr(n, std::size_t{0}), std::memory_order_relaxed);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        EXPECT_TRUE(Write(log, "w" + std::to_string(t) + "-" +
                                   std::to_string(i) + std::string(50, 'x')));
      }
    });
  }
  for (std::thread& w : writers) w.join();
  done.store(true, std::memory_order_release);
  dropper.join();
  const Lsn last = static_cast<Lsn>(3 * per_thread);
  EXPECT_EQ(log.durable_lsn(), last);
  EXPECT_GT(dropped.load(), 0u);
  const Lsn first = log.first_lsn();
  opened->reset();
  const Read read = ReadAll(dir);
  ASSERT_TRUE(read.status.ok()) << read.status.ToString();
  EXPECT_EQ(read.lsns, Range(first, last));
}

// A reader keeps reading a segment DropThrough removed under it (its open
// handle stays valid), and gets kOutOfRange for a next segment that was
// dropped too.
TEST(DurableLogReaderTest, DroppedSegmentsUnderAReader) {
  for (const Lsn drop : {Lsn{3}, Lsn{6}}) {
    ScratchDir scratch;
    const std::string dir = scratch.File("log");
    WriteThreeSegments(dir);
    auto reader = DurableLogReader::Open(dir, 1);
    ASSERT_TRUE(reader.ok());
    DurableLogEntry e;
    ASSERT_EQ(ValueOr((*reader)->Next(&e), false), true);
    EXPECT_EQ(e.lsn, 1u);
    {
      auto log = FileDurableLog::Open(dir);
      ASSERT_TRUE(log.ok());
      ASSERT_TRUE((*log)->DropThrough(drop).ok());
    }
    std::vector<Lsn> lsns;
    const Status s = Drain(**reader, &lsns);
    if (drop == 3) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(lsns, Range(2, 9));
    } else {
      EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
      EXPECT_EQ(lsns, Range(2, 3));  // the rest of the open segment
      EXPECT_EQ((*reader)->next_lsn(), 4u);
    }
  }
}

TEST(DurableLogReaderTest, StartsAtAnyLsnAndCountsBytes) {
  ScratchDir scratch;
  const std::string dir = scratch.File("log");
  WriteThreeSegments(dir);
  for (Lsn from = 1; from <= 11; ++from) {
    auto reader = DurableLogReader::Open(dir, from);
    ASSERT_TRUE(reader.ok()) << from;
    EXPECT_EQ((*reader)->next_lsn(), from);
    std::vector<Lsn> lsns;
    std::vector<std::string> bodies;
    ASSERT_TRUE(Drain(**reader, &lsns, &bodies).ok());
    EXPECT_EQ(lsns, from <= 9 ? Range(from, 9) : std::vector<Lsn>{}) << from;
    for (std::size_t i = 0; i < lsns.size(); ++i) {
      EXPECT_EQ(bodies[i], BodyOf(lsns[i]));
    }
    EXPECT_FALSE((*reader)->stopped_at_damaged_tail());
  }
  auto reader = DurableLogReader::Open(dir, 1);
  ASSERT_TRUE(reader.ok());
  std::vector<Lsn> lsns;
  ASSERT_TRUE(Drain(**reader, &lsns).ok());
  EXPECT_EQ((*reader)->bytes_read(), ReadFile(SegmentPath(dir, 1)).size() +
                                         ReadFile(SegmentPath(dir, 4)).size() +
                                         ReadFile(SegmentPath(dir, 7)).size());
  EXPECT_EQ(DurableLogReader::Open(scratch.File("none"), 1).status().code(),
            StatusCode::kNotFound);
}

// A writer thread appends (rotating often) while a reader thread tails:
// the reader sees every record once, in LSN order, with its body.
TEST(DurableLogReaderTest, TailsALiveWriter) {
  ScratchDir scratch;
  const std::string dir = scratch.File("log");
  FileDurableLogOptions options;
  options.sync = false;
  options.segment_bytes = 1500;
  auto log = FileDurableLog::Open(dir, options);
  ASSERT_TRUE(log.ok());
  const Lsn total = static_cast<Lsn>(testing::StressIterations(2000));
  std::thread writer([&] {
    for (Lsn lsn = 1; lsn <= total; ++lsn) {
      ASSERT_TRUE(Write(**log, BodyOf(lsn, lsn % 97)));
    }
  });
  DurableLogReaderOptions reader_options;
  reader_options.read_bytes = 512;  // many refills, partial frames seen
  auto reader = DurableLogReader::Open(dir, 1, reader_options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  Lsn expect = 1;
  std::uint64_t empty_polls = 0;
  while (expect <= total) {
    DurableLogEntry e;
    Result<bool> next = (*reader)->Next(&e);
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    if (!*next) {
      ++empty_polls;
      std::this_thread::yield();
      continue;
    }
    ASSERT_EQ(e.lsn, expect);
    ASSERT_EQ(e.body, BodyOf(expect, expect % 97));
    ++expect;
  }
  writer.join();
  DurableLogEntry e;
  EXPECT_EQ(ValueOr((*reader)->Next(&e), true), false);
  EXPECT_GT((*log)->segments(), 10u);
  std::printf("tailed %llu records across %zu segments, %llu empty polls\n",
              static_cast<unsigned long long>(total), (*log)->segments(),
              static_cast<unsigned long long>(empty_polls));
}

// Env::Default() with a hook run before each FileExists.
class HookEnv final : public Env {
 public:
  std::function<void()> on_exists;

  Result<std::unique_ptr<FileHandle>> NewFile(const std::string& path,
                                              FileOpenMode mode) override {
    return base_->NewFile(path, mode);
  }
  Status Rename(const std::string& from, const std::string& to) override {
    return base_->Rename(from, to);
  }
  Status SyncDir(const std::string& dir) override {
    return base_->SyncDir(dir);
  }
  Status Remove(const std::string& path) override {
    return base_->Remove(path);
  }
  Status CreateDir(const std::string& dir) override {
    return base_->CreateDir(dir);
  }
  Result<std::vector<std::string>> List(const std::string& dir) override {
    return base_->List(dir);
  }
  Result<std::uint64_t> FileSize(const std::string& path) override {
    return base_->FileSize(path);
  }
  Result<bool> FileExists(const std::string& path) override {
    if (on_exists) std::exchange(on_exists, nullptr)();
    return base_->FileExists(path);
  }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override {
    return base_->LockFile(path);
  }
  Status UnlockFile(std::unique_ptr<FileLock> lock) override {
    return base_->UnlockFile(std::move(lock));
  }

 private:
  Env* const base_ = Env::Default();
};

// The writer appends LSN 3 to segment 1 and creates segment 4 right after
// the reader found segment 1's (old) end: the reader finds a later segment,
// reads segment 1 again, returns LSN 3, then moves on.
TEST(DurableLogReaderTest, ReadsTheOldSegmentAgainBeforeMovingOn) {
  ScratchDir scratch;
  const std::string dir = scratch.File("log");
  WriteThreeSegments(dir);
  const std::string one = ReadFile(SegmentPath(dir, 1));
  const std::string four = ReadFile(SegmentPath(dir, 4));
  const std::size_t last = kDurableLogFrameBytes + BodyOf(3).size();
  std::filesystem::remove(SegmentPath(dir, 7));
  std::filesystem::remove(SegmentPath(dir, 4));
  WriteFile(SegmentPath(dir, 1), one.substr(0, one.size() - last));
  HookEnv env;
  DurableLogReaderOptions options;
  options.env = &env;
  auto reader = DurableLogReader::Open(dir, 1, options);
  ASSERT_TRUE(reader.ok());
  std::vector<Lsn> lsns;
  ASSERT_TRUE(Drain(**reader, &lsns).ok());
  EXPECT_EQ(lsns, Range(1, 2));
  EXPECT_FALSE((*reader)->stopped_at_damaged_tail());  // a clean end
  env.on_exists = [&] {
    AppendToFile(SegmentPath(dir, 1), one.substr(one.size() - last));
    WriteFile(SegmentPath(dir, 4), four);
  };
  const Status s = Drain(**reader, &lsns);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(lsns, Range(1, 6));
}

// The newest segment ends inside a frame (being written, or torn): the
// reader returns false at every cut, then the record once the rest arrives.
TEST(DurableLogReaderTest, IncompleteTailThenTheRestArrives) {
  ScratchDir scratch;
  const std::string dir = scratch.File("log");
  {
    auto log = FileDurableLog::Open(dir);
    ASSERT_TRUE(log.ok());
    for (Lsn lsn = 1; lsn <= 3; ++lsn) ASSERT_TRUE(Write(**log, BodyOf(lsn)));
  }
  const std::string segment = SegmentPath(dir, 1);
  const std::string whole = ReadFile(segment);
  const std::size_t last = kDurableLogFrameBytes + BodyOf(3).size();
  for (std::size_t keep = 0; keep < last; ++keep) {
    WriteFile(segment, whole.substr(0, whole.size() - last + keep));
    auto reader = DurableLogReader::Open(dir, 1);
    ASSERT_TRUE(reader.ok());
    std::vector<Lsn> lsns;
    ASSERT_TRUE(Drain(**reader, &lsns).ok()) << keep;
    EXPECT_EQ(lsns, Range(1, 2)) << keep;
    EXPECT_EQ((*reader)->stopped_at_damaged_tail(), keep > 0) << keep;
    DurableLogEntry e;
    EXPECT_EQ(ValueOr((*reader)->Next(&e), true), false);  // still
    AppendToFile(segment, whole.substr(whole.size() - last + keep));
    ASSERT_EQ(ValueOr((*reader)->Next(&e), false), true) << keep;
    EXPECT_EQ(e.lsn, 3u);
    EXPECT_EQ(e.body, BodyOf(3));
  }
  // A garbage last frame (checksum fails, nothing valid after it): false.
  std::string torn = whole;
  torn[torn.size() - 2] ^= 0x40;
  WriteFile(segment, torn);
  auto reader = DurableLogReader::Open(dir, 1);
  ASSERT_TRUE(reader.ok());
  std::vector<Lsn> lsns;
  ASSERT_TRUE(Drain(**reader, &lsns).ok());
  EXPECT_EQ(lsns, Range(1, 2));
  EXPECT_TRUE((*reader)->stopped_at_damaged_tail());
  EXPECT_EQ(ReadAll(dir).status.code(), StatusCode::kDataLoss);
}

TEST(DurableLogReaderTest, DamageIsDataLoss) {
  // A flipped byte mid-segment (a valid frame follows it).
  {
    ScratchDir scratch;
    const std::string dir = scratch.File("log");
    WriteThreeSegments(dir);
    std::string bytes = ReadFile(SegmentPath(dir, 4));
    bytes[bytes.find(BodyOf(5))] ^= 0x01;
    WriteFile(SegmentPath(dir, 4), bytes);
    auto reader = DurableLogReader::Open(dir, 1);
    ASSERT_TRUE(reader.ok());
    std::vector<Lsn> lsns;
    EXPECT_EQ(Drain(**reader, &lsns).code(), StatusCode::kDataLoss);
    EXPECT_EQ(lsns, Range(1, 4));
  }
  // A flipped byte in the newest segment, a valid frame after it: not a
  // tail a writer may still be writing.
  {
    ScratchDir scratch;
    const std::string dir = scratch.File("log");
    WriteThreeSegments(dir);
    std::string bytes = ReadFile(SegmentPath(dir, 7));
    bytes[bytes.find(BodyOf(8))] ^= 0x01;
    WriteFile(SegmentPath(dir, 7), bytes);
    auto reader = DurableLogReader::Open(dir, 1);
    ASSERT_TRUE(reader.ok());
    std::vector<Lsn> lsns;
    EXPECT_EQ(Drain(**reader, &lsns).code(), StatusCode::kDataLoss);
    EXPECT_EQ(lsns, Range(1, 7));
  }
  // The last frame of a segment that has a successor is torn.
  {
    ScratchDir scratch;
    const std::string dir = scratch.File("log");
    WriteThreeSegments(dir);
    const std::string bytes = ReadFile(SegmentPath(dir, 1));
    WriteFile(SegmentPath(dir, 1), bytes.substr(0, bytes.size() - 3));
    auto reader = DurableLogReader::Open(dir, 1);
    ASSERT_TRUE(reader.ok());
    std::vector<Lsn> lsns;
    EXPECT_EQ(Drain(**reader, &lsns).code(), StatusCode::kDataLoss);
    EXPECT_EQ(lsns, Range(1, 2));
  }
  // A gap between segments.
  {
    ScratchDir scratch;
    const std::string dir = scratch.File("log");
    WriteThreeSegments(dir);
    std::filesystem::remove(SegmentPath(dir, 4));
    auto reader = DurableLogReader::Open(dir, 1);
    ASSERT_TRUE(reader.ok());
    std::vector<Lsn> lsns;
    EXPECT_EQ(Drain(**reader, &lsns).code(), StatusCode::kDataLoss);
    EXPECT_EQ(lsns, Range(1, 3));
    EXPECT_EQ(FileDurableLog::Open(dir).status().code(), StatusCode::kDataLoss);
  }
  // An LSN out of sequence: a checksum-valid frame of LSN 5 right after
  // LSN 3 (taken from another log).
  {
    ScratchDir scratch;
    const std::string dir = scratch.File("log");
    const std::string other = scratch.File("other");
    WriteThreeSegments(dir);
    WriteThreeSegments(other);
    const std::string donor = ReadFile(SegmentPath(other, 4));
    const std::size_t frame4 = kDurableLogHeaderBytes;
    const std::size_t frame5 =
        frame4 + kDurableLogFrameBytes + BodyOf(4).size();
    const std::string frame =
        donor.substr(frame5, kDurableLogFrameBytes + BodyOf(5).size());
    ASSERT_EQ(base_internal::LoadFixed<std::uint64_t>(frame.data() + 4), 5u);
    AppendToFile(SegmentPath(dir, 7), frame);  // 7, 8, 9, then 5
    auto reader = DurableLogReader::Open(dir, 7);
    ASSERT_TRUE(reader.ok());
    std::vector<Lsn> lsns;
    EXPECT_EQ(Drain(**reader, &lsns).code(), StatusCode::kDataLoss);
    EXPECT_EQ(lsns, Range(7, 9));
    FileDurableLogOptions repair;
    repair.truncate_damaged_tail = true;  // a valid frame is not a torn tail
    EXPECT_EQ(FileDurableLog::Open(dir, repair).status().code(),
              StatusCode::kDataLoss);
  }
  // A segment of format version 1 (its own 16-byte sealed header).
  {
    ScratchDir scratch;
    const std::string dir = scratch.File("log");
    std::filesystem::create_directory(dir);
    std::string v1;
    base_internal::PutFixed<std::uint64_t>(&v1, kDurableLogMagic);
    base_internal::PutFixed<std::uint32_t>(&v1, 1);
    base_internal::PutFixed<std::uint32_t>(
        &v1, static_cast<std::uint32_t>(base_internal::Checksum64(
                 v1.data(), v1.size(), kDurableLogHeaderSeed)));
    WriteFile(SegmentPath(dir, 1), v1);
    EXPECT_EQ(DurableLogReader::Open(dir, 1).status().code(),
              StatusCode::kFailedPrecondition);
    EXPECT_EQ(FileDurableLog::Open(dir).status().code(),
              StatusCode::kFailedPrecondition);
    v1[13] ^= 0x01;  // its checksum broken: damage, not a version
    WriteFile(SegmentPath(dir, 1), v1);
    EXPECT_EQ(FileDurableLog::Open(dir).status().code(), StatusCode::kDataLoss);
  }
}

// A log many times the reader's buffer: the buffer never grows past
// read_bytes + one frame.
TEST(DurableLogReaderTest, MemoryIsBoundedByTheBuffer) {
  ScratchDir scratch;
  const std::string dir = scratch.File("log");
  constexpr std::size_t kRecord = 60000;
  const int records = 400;  // 24 MB
  {
    FileDurableLogOptions options;
    options.sync = false;
    options.max_record_bytes = 64 << 10;
    auto log = FileDurableLog::Open(dir, options);
    ASSERT_TRUE(log.ok());
    for (int i = 1; i <= records; ++i) {
      ASSERT_TRUE(Write(**log, BodyOf(static_cast<Lsn>(i), kRecord)));
    }
    EXPECT_EQ((*log)->segments(), 1u);  // one 24 MB segment
  }
  DurableLogReaderOptions options;
  options.max_record_bytes = 64 << 10;
  options.read_bytes = 32 << 10;
  const std::size_t bound =
      options.read_bytes + options.max_record_bytes + kDurableLogFrameBytes;
  auto reader = DurableLogReader::Open(dir, 1, options);
  ASSERT_TRUE(reader.ok());
  std::size_t peak = 0;
  Lsn n = 0;
  for (;;) {
    DurableLogEntry e;
    Result<bool> next = (*reader)->Next(&e);
    ASSERT_TRUE(next.ok());
    if (!*next) break;
    ASSERT_EQ(e.lsn, ++n);
    ASSERT_EQ(e.body.size(), BodyOf(n).size() + kRecord);
    peak = std::max(peak, (*reader)->buffer_capacity());
  }
  EXPECT_EQ(n, static_cast<Lsn>(records));
  EXPECT_LE(peak, bound);
  EXPECT_LT(peak * 100, (*reader)->bytes_read());
}

}  // namespace
}  // namespace cairn
