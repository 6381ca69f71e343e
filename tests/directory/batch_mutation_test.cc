// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Batch mutations (D10): BatchCreatePending, BatchCommit and BatchErase give
// each key the status its single call would have given, in index order
// (duplicates included), share one log reservation and one Finalize, report
// the log's error for every key whose record the log could not make durable
// (H5), and log records a replay cannot tell from the singles'.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/directory/durable_log.h"
#include "cairn/directory/group_directory.h"
#include "cairn/ha/file_durable_log.h"
#include "cairn/ha/replay.h"
#include "directory/durable_log_testing.h"
#include "testing/scratch_dir.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using namespace testing::durable_log_names;
using Put = Dir::PendingPut;

std::vector<StatusCode> Codes(const std::vector<Status>& statuses) {
  std::vector<StatusCode> out;
  for (const Status& s : statuses) out.push_back(s.code());
  return out;
}
std::vector<StatusCode> Codes(const std::vector<Result<Handle>>& results) {
  std::vector<StatusCode> out;
  for (const auto& r : results) out.push_back(r.status().code());
  return out;
}

// key -> (id, version, size, counted, singleton, payload) of every active
// object, and group name -> member ids (a replica numbers its groups in its
// own order, so groups are compared by name).
using Dump =
    std::map<std::string, std::tuple<ObjectId, std::uint64_t, std::uint64_t,
                                     std::uint64_t, bool, std::string>>;
std::pair<Dump, std::map<std::string, std::set<ObjectId>>> DumpOf(
    const Dir& d) {
  Dump out;
  EXPECT_TRUE(d.VisitHandles([&](std::span<const Handle> handles) {
                 for (const Handle& h : handles) {
                   d.WithHandle(h, [&](const View& v) {
                      out[std::string(v.key())] = {
                          v.id(),           v.version(),
                          v.size_bytes(),   v.counted_bytes(),
                          v.is_singleton(), v.payload().bytes};
                    }).IgnoreError();
                 }
               }).ok());
  std::map<std::string, std::set<ObjectId>> groups;
  for (const char* name : {"g", "g0", "g1", "g2"}) {
    auto found = d.FindGroup(name);
    if (!found.ok()) continue;
    for (ObjectId id : found.value()->MemberIds()) groups[name].insert(id);
  }
  return {out, groups};
}

std::vector<Put> Puts(
    std::initializer_list<std::pair<std::string_view, CreateOptions>> puts) {
  std::vector<Put> out;
  for (const auto& [key, options] : puts) {
    out.push_back(Put{key, options, LoggedPayload{std::string(key)}});
  }
  return out;
}

TEST(BatchMutationTest, D10PartialSuccessGivesEachKeyItsSingleCallsStatus) {
  Fixture f;
  Dir& d = *f.dir;
  f.quota.set_limit(100);
  ASSERT_TRUE(d.Create("taken", Sized(10), {"t"}).ok());
  CreateOptions leased = Sized(5);
  leased.lease_ttl = std::chrono::seconds(10);
  ASSERT_TRUE(d.Create("leased", leased, {"l"}).ok());

  // Creates: a fresh key, a routed one, one over the quota, a bad key and
  // two members of one group. The refused put charges nothing (Q1).
  std::vector<Put> puts = Puts({{"a", Sized(20)},
                                {"taken", Sized(1)},
                                {"huge", Sized(1000)},
                                {"", Sized(1)},
                                {"m1", Sized(10, "g")},
                                {"m2", Sized(10, "g")}});
  const std::vector<Result<Handle>> made = d.BatchCreatePending(puts);
  EXPECT_EQ(Codes(made),
            (std::vector<StatusCode>{
                StatusCode::kOk, StatusCode::kAlreadyExists,
                StatusCode::kResourceExhausted, StatusCode::kInvalidArgument,
                StatusCode::kOk, StatusCode::kOk}));
  EXPECT_EQ(f.quota.charged(), 10u + 5u + 20u + 10u + 10u);
  EXPECT_EQ(d.pending_charge_bytes(), 40u);

  // Commits: three good tokens, one of another instance, an absent key and
  // an already active object (its own token); one reservation, one
  // Finalize.
  const std::uint64_t reserves = f.log.reserve_calls();
  const std::uint64_t finalizes = f.log.finalize_calls();
  Result<Handle> taken = d.Pin("taken");
  ASSERT_TRUE(taken.ok());
  const std::vector<std::string_view> keys = {"a",      "taken", "m1",
                                              "absent", "m2",    "m1"};
  const std::vector<ObjectToken> tokens = {made[0]->token(), taken->token(),
                                           made[4]->token(), made[0]->token(),
                                           made[5]->token(), made[0]->token()};
  const std::vector<Status> committed = d.BatchCommit(keys, tokens);
  EXPECT_EQ(
      Codes(committed),
      (std::vector<StatusCode>{StatusCode::kOk, StatusCode::kFailedPrecondition,
                               StatusCode::kOk, StatusCode::kNotFound,
                               StatusCode::kOk, StatusCode::kNotFound}));
  EXPECT_EQ(f.log.reserve_calls(), reserves + 1);
  EXPECT_EQ(f.log.finalize_calls(), finalizes + 1);
  EXPECT_EQ(f.log.open_reservations(), 0u);
  EXPECT_EQ(d.pending_charge_bytes(), 0u);
  EXPECT_EQ(f.quota.charged(), 55u);  // Q2: the committed bytes stay
  // One commit record per committed key, each the single call's.
  std::vector<DurableRecordView> durable = f.Durable();
  ASSERT_GE(durable.size(), 3u);
  for (std::size_t i = durable.size() - 3; i < durable.size(); ++i) {
    EXPECT_EQ(durable[i].op, DurableOp::kCommit);
    ASSERT_EQ(durable[i].objects.size(), 1u);
  }
  EXPECT_EQ(durable[durable.size() - 3].objects[0].key, "a");
  EXPECT_EQ(durable[durable.size() - 1].objects[0].key, "m2");
  EXPECT_EQ(durable.back().group_name, "g");

  // Erases: leased without force (P4), absent, two good ones, a member.
  const std::vector<std::string_view> erase = {"leased", "absent", "a", "taken",
                                               "m1"};
  EXPECT_EQ(Codes(d.BatchErase(erase)),
            (std::vector<StatusCode>{StatusCode::kFailedPrecondition,
                                     StatusCode::kNotFound, StatusCode::kOk,
                                     StatusCode::kOk, StatusCode::kOk}));
  EXPECT_EQ(f.log.reserve_calls(), reserves + 2);
  EXPECT_EQ(f.log.finalize_calls(), finalizes + 2);
  EXPECT_EQ(f.quota.charged(), 5u + 10u);  // "leased" and "m2" remain
  EXPECT_EQ(d.object_count(), 2u);
  EXPECT_EQ(d.group_count(), 1u);
  EXPECT_EQ(f.removed.size(), 3u);
  EXPECT_TRUE(f.removed_before_durable.empty());
  // Forced, the lease does not hold the object (as Erase with force).
  EXPECT_EQ(Codes(d.BatchErase(std::vector<std::string_view>{"leased", "m2"},
                               EraseOptions{true})),
            (std::vector<StatusCode>{StatusCode::kOk, StatusCode::kOk}));
  EXPECT_EQ(f.quota.charged(), 0u);
  EXPECT_EQ(d.group_count(), 0u);
  EXPECT_EQ(f.log.open_reservations(), 0u);
}

TEST(BatchMutationTest, D10DuplicateKeysInOneBatchActAsTheSinglesInOrder) {
  Fixture f;
  Dir& d = *f.dir;
  std::vector<Put> puts = Puts({{"a", Sized(3)}, {"a", Sized(4)}});
  const std::vector<Result<Handle>> made = d.BatchCreatePending(puts);
  EXPECT_EQ(Codes(made), (std::vector<StatusCode>{StatusCode::kOk,
                                                  StatusCode::kAlreadyExists}));
  EXPECT_EQ(f.quota.charged(), 3u);  // the second put charged nothing
  const std::vector<std::string_view> twice = {"a", "a"};
  const std::vector<ObjectToken> tokens = {made[0]->token(), made[0]->token()};
  EXPECT_EQ(Codes(d.BatchCommit(twice, tokens)),
            (std::vector<StatusCode>{StatusCode::kOk,
                                     StatusCode::kFailedPrecondition}));
  EXPECT_EQ(f.Version("a"), 2u);  // committed once
  EXPECT_EQ(Codes(d.BatchErase(twice)),
            (std::vector<StatusCode>{StatusCode::kOk, StatusCode::kNotFound}));
  // One record per change that happened: the commit and the erase.
  const std::vector<DurableRecordView> durable = f.Durable();
  ASSERT_EQ(durable.size(), 2u);
  EXPECT_EQ(durable[0].op, DurableOp::kCommit);
  EXPECT_EQ(durable[1].op, DurableOp::kErase);
  EXPECT_EQ(f.removed.size(), 1u);
  EXPECT_EQ(f.quota.charged(), 0u);
  // Erase then create of one key in one pending batch is not expressible
  // (creates and erases are separate batches), but a key pending twice in
  // separate batches meets the first: kAlreadyExists.
  std::vector<Put> again = Puts({{"b", Sized(1)}});
  ASSERT_TRUE(d.BatchCreatePending(again)[0].ok());
  std::vector<Put> dup = Puts({{"b", Sized(1)}});
  EXPECT_EQ(d.BatchCreatePending(dup)[0].status().code(),
            StatusCode::kAlreadyExists);
}

// A log that refuses one record in the middle of a batch fails that key
// only; a log that cannot make the batch durable fails every key whose
// record was in it, whose changes are then made but not acknowledged (H5);
// a refused reservation fails every checked key with nothing changed.
TEST(BatchMutationTest, D10LogFailureInTheMiddleOfABatch) {
  Fixture f;
  Dir& d = *f.dir;
  std::vector<Put> puts = Puts(
      {{"a", Sized(1)}, {"b", Sized(2)}, {"c", Sized(3)}, {"d", Sized(4)}});
  const std::vector<Result<Handle>> made = d.BatchCreatePending(puts);
  for (const auto& r : made) ASSERT_TRUE(r.ok());
  const std::vector<std::string_view> keys = {"a", "b", "c"};
  const std::vector<ObjectToken> tokens = {made[0]->token(), made[1]->token(),
                                           made[2]->token()};

  // The reservation refused: nothing changes, every key gets the error.
  f.log.FailReserve(ResourceExhaustedError("log full"));
  EXPECT_EQ(Codes(d.BatchCommit(keys, tokens)),
            (std::vector<StatusCode>(3, StatusCode::kResourceExhausted)));
  EXPECT_EQ(d.pending_charge_bytes(), 10u);
  EXPECT_EQ(f.log.open_reservations(), 0u);

  // The second key's append refused: it stays pending, the others commit.
  int appends = 0;
  f.log.set_on_append([&](std::string_view) {
    if (++appends == 2) f.log.FailAppend(InternalError("append refused"));
  });
  const std::vector<Status> partial = d.BatchCommit(keys, tokens);
  f.log.set_on_append(nullptr);
  EXPECT_EQ(Codes(partial),
            (std::vector<StatusCode>{StatusCode::kOk, StatusCode::kInternal,
                                     StatusCode::kOk}));
  EXPECT_EQ(partial[1].message(), "append refused");
  EXPECT_TRUE(d.Pin("a").ok());
  EXPECT_FALSE(d.Pin("b").ok());  // still kCreating
  EXPECT_TRUE(d.Pin("c").ok());
  EXPECT_EQ(d.pending_charge_bytes(), 2u + 4u);
  EXPECT_EQ(f.quota.charged(), 10u);
  EXPECT_EQ(f.log.open_reservations(), 0u);

  // The batch's Finalize fails: "b" and "d" were appended and committed
  // (visible, charged as committed) but report the log's error; "a" (no
  // longer pending) keeps its own error.
  f.log.FailFinalize(InternalError("sync failed"));
  const std::vector<std::string_view> rest = {"b", "a", "d"};
  const std::vector<ObjectToken> rest_tokens = {
      made[1]->token(), made[0]->token(), made[3]->token()};
  const std::vector<Status> failed = d.BatchCommit(rest, rest_tokens);
  EXPECT_EQ(Codes(failed),
            (std::vector<StatusCode>{StatusCode::kInternal,
                                     StatusCode::kFailedPrecondition,
                                     StatusCode::kInternal}));
  EXPECT_EQ(failed[0].message(), "sync failed");
  EXPECT_TRUE(d.Pin("b").ok());
  EXPECT_TRUE(d.Pin("d").ok());
  EXPECT_EQ(d.pending_charge_bytes(), 0u);
  EXPECT_EQ(f.quota.charged(), 10u);
  // The log is now sticky: a batch erase changes nothing.
  EXPECT_EQ(Codes(d.BatchErase(keys)),
            (std::vector<StatusCode>(3, StatusCode::kInternal)));
  EXPECT_EQ(d.object_count(), 4u);
  EXPECT_EQ(f.log.open_reservations(), 0u);
}

// A BatchErase whose Finalize fails: every erased key reports the error,
// is gone (its charge released, its callback run), the rest keep theirs.
TEST(BatchMutationTest, D10EraseWhoseBatchIsNotDurableReportsTheLogError) {
  Fixture f;
  Dir& d = *f.dir;
  ASSERT_TRUE(d.Create("a", Sized(1)).ok());
  ASSERT_TRUE(d.Create("b", Sized(2)).ok());
  f.log.FailFinalize(InternalError("sync failed"));
  const std::vector<std::string_view> keys = {"a", "absent", "b"};
  EXPECT_EQ(
      Codes(d.BatchErase(keys)),
      (std::vector<StatusCode>{StatusCode::kInternal, StatusCode::kNotFound,
                               StatusCode::kInternal}));
  EXPECT_EQ(d.object_count(), 0u);
  EXPECT_EQ(f.quota.charged(), 0u);
  EXPECT_EQ(f.removed.size(), 2u);
  EXPECT_EQ(f.log.open_reservations(), 0u);
}

// The records of a batch are the records its singles write: the same ops,
// keys, ids, versions, sizes and payloads, in the same order; replaying
// them onto a fresh directory gives the primary's state.
TEST(BatchMutationTest, D10BatchRecordsAreTheSinglesRecordsAndReplayTheSame) {
  Fixture batched;
  Fixture singles;
  Dir& b = *batched.dir;
  Dir& s = *singles.dir;
  std::vector<Put> puts = Puts({{"x", Sized(5)},
                                {"m1", Sized(6, "g")},
                                {"y", Sized(7)},
                                {"m2", Sized(8, "g")}});
  const std::vector<Result<Handle>> made = b.BatchCreatePending(puts);
  std::vector<std::string_view> keys;
  std::vector<ObjectToken> tokens;
  for (std::size_t i = 0; i < puts.size(); ++i) {
    ASSERT_TRUE(made[i].ok());
    keys.push_back(puts[i].key);
    tokens.push_back(made[i]->token());
  }
  for (const Status& st : b.BatchCommit(keys, tokens)) ASSERT_TRUE(st.ok());
  const std::vector<std::string_view> erase = {"y", "m1"};
  for (const Status& st : b.BatchErase(erase)) ASSERT_TRUE(st.ok());

  for (std::size_t i = 0; i < puts.size(); ++i) {
    Result<Handle> p = s.CreatePending(puts[i].key, puts[i].options,
                                       LoggedPayload{std::string(keys[i])});
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(s.Commit(keys[i], p->token()).ok());
  }
  ASSERT_TRUE(s.Erase("y").ok());
  ASSERT_TRUE(s.Erase("m1").ok());

  EXPECT_EQ(batched.log.durable_bodies(), singles.log.durable_bodies());
  const std::vector<std::string> bodies = batched.log.durable_bodies();
  ASSERT_EQ(bodies.size(), 6u);
  Dir replica;
  for (const std::string& body : bodies) {
    DurableRecordView record;
    ASSERT_TRUE(DecodeDurableRecord(body, &record).ok());
    ASSERT_TRUE(ApplyDurableRecord(replica, record).ok());
  }
  EXPECT_EQ(DumpOf(replica), DumpOf(b));
  EXPECT_EQ(DumpOf(b).first.size(), 2u);
}

// Through a FileDurableLog that syncs: a batch of 32 commits is one sync
// and 32 records with consecutive LSNs; the file replays to the primary's
// state.
TEST(BatchMutationTest, D10FileLogSyncsABatchOnceAndReplaysIt) {
  testing::ScratchDir scratch("batch_file_log");
  const std::string path = scratch.path() + "/log";
  QuotaAccount quota;
  auto opened = FileDurableLog::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<FileDurableLog> log = std::move(opened).value();
  DirectoryOptions options;
  options.durable_log = log.get();
  options.quota = &quota;
  Dir d(options);
  std::vector<std::string> names;
  for (int i = 0; i < 32; ++i) names.push_back(Key("k", i));
  std::vector<Put> puts;
  for (const std::string& n : names) {
    puts.push_back(Put{n, Sized(10, n < "k2" ? "g" : ""), {n}});
  }
  const std::vector<Result<Handle>> made = d.BatchCreatePending(puts);
  std::vector<std::string_view> keys(names.begin(), names.end());
  std::vector<ObjectToken> tokens;
  for (const auto& r : made) {
    ASSERT_TRUE(r.ok());
    tokens.push_back(r->token());
  }
  const std::uint64_t syncs = log->syncs();
  for (const Status& st : d.BatchCommit(keys, tokens)) ASSERT_TRUE(st.ok());
  EXPECT_EQ(log->syncs(), syncs + 1);
  EXPECT_EQ(log->durable_records(), 32u);
  const std::vector<std::string_view> erase(keys.begin(), keys.begin() + 8);
  for (const Status& st : d.BatchErase(erase)) ASSERT_TRUE(st.ok());
  EXPECT_EQ(log->syncs(), syncs + 2);
  EXPECT_EQ(log->durable_lsn(), 40u);
  EXPECT_EQ(quota.charged(), 24u * 10u);

  Dir replica;
  Lsn expect = 1;
  ASSERT_TRUE(ReadDurableLog(path, [&](Lsn lsn, std::string_view body) {
                EXPECT_EQ(lsn, expect++);
                DurableRecordView record;
                ASSERT_TRUE(DecodeDurableRecord(body, &record).ok());
                ASSERT_TRUE(ApplyDurableRecord(replica, record).ok());
              }).ok());
  EXPECT_EQ(DumpOf(replica), DumpOf(d));
}

// FileDurableLog::ReserveBatch: each record takes its own place (and LSN)
// in append order among other writers' records, one Finalize makes them
// all durable, one Cancel voids them all (a later writer does not wait on
// them), and a batch that could never fit is refused. StandbyLog forwards
// a batch once attached.
TEST(BatchMutationTest, D10FileLogBatchKeepsAppendOrderAndCancelsWhole) {
  Watchdog watchdog(std::chrono::seconds(30), "file log batch");
  testing::ScratchDir scratch("batch_log_order");
  const std::string path = scratch.path() + "/log";
  FileDurableLogOptions options;
  options.max_record_bytes = 1024;
  options.max_pending_bytes = 4096;
  auto opened = FileDurableLog::Open(path, options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<FileDurableLog> log = std::move(opened).value();

  EXPECT_EQ(log->ReserveBatch(0, 10).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(log->ReserveBatch(8, 8192).status().code(),
            StatusCode::kInvalidArgument);

  Result<LogReservation> batch = log->ReserveBatch(3, 30);
  ASSERT_TRUE(batch.ok());
  ASSERT_TRUE(log->Append(*batch, "a1").ok());
  Result<LogReservation> other = log->Reserve(10);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(log->Append(*other, "b").ok());
  ASSERT_TRUE(log->Append(*batch, "a2").ok());
  ASSERT_TRUE(log->Append(*batch, "a3").ok());
  // The batch waits for "b", appended between its records.
  std::thread finalizer([&] { EXPECT_TRUE(log->Finalize(*batch, {}).ok()); });
  ASSERT_TRUE(log->Finalize(*other, {}).ok());
  finalizer.join();
  EXPECT_EQ(log->durable_lsn(), 4u);

  // A cancelled batch leaves nothing, and holds no later writer back.
  Result<LogReservation> cancelled = log->ReserveBatch(2, 20);
  ASSERT_TRUE(cancelled.ok());
  ASSERT_TRUE(log->Append(*cancelled, "c1").ok());
  ASSERT_TRUE(log->Append(*cancelled, "c2").ok());
  Result<LogReservation> later = log->Reserve(10);
  ASSERT_TRUE(later.ok());
  ASSERT_TRUE(log->Append(*later, "d").ok());
  log->Cancel(*cancelled);
  ASSERT_TRUE(log->Finalize(*later, {}).ok());
  EXPECT_EQ(log->durable_lsn(), 5u);
  // Nothing is left pending: a batch of the whole budget fits again.
  Result<LogReservation> whole =
      log->ReserveBatch(1, options.max_pending_bytes - kDurableLogFrameBytes);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  log->Cancel(*whole);

  std::vector<std::pair<Lsn, std::string>> read;
  ASSERT_TRUE(ReadDurableLog(path, [&](Lsn lsn, std::string_view body) {
                read.emplace_back(lsn, std::string(body));
              }).ok());
  EXPECT_EQ(read, (std::vector<std::pair<Lsn, std::string>>{
                      {1, "a1"}, {2, "b"}, {3, "a2"}, {4, "a3"}, {5, "d"}}));

  StandbyLog standby;
  EXPECT_EQ(standby.ReserveBatch(2, 10).status().code(),
            StatusCode::kFailedPrecondition);
  InMemoryDurableLog memory;
  standby.Attach(&memory);
  Result<LogReservation> forwarded = standby.ReserveBatch(2, 10);
  ASSERT_TRUE(forwarded.ok());
  ASSERT_TRUE(standby.Append(*forwarded, "x").ok());
  ASSERT_TRUE(standby.Append(*forwarded, "y").ok());
  ASSERT_TRUE(standby.Finalize(*forwarded, {}).ok());
  EXPECT_EQ(memory.durable_bodies(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(memory.reserve_calls(), 1u);
}

// Batch writers (create pending, commit, erase, over shared keys and
// groups), eviction commits and batch readers, 8 threads, through a
// FileDurableLog. Checks: every removal emitted once; at quiescence Q2
// (charged bytes equal the live objects' counted bytes) and V1 (a group an
// eviction took has no member left, every live group's members all
// routed); no reservation left open; and the log file, replayed onto a
// fresh directory, gives the primary's state (the batches' records kept
// per-key order among the other writers').
TEST(BatchMutationStressTest, BatchesRacingEvictionKeepQ2AndV1) {
  testing::ScratchDir scratch("batch_stress");
  const std::string path = scratch.path() + "/log";
  FileDurableLogOptions log_options;
  log_options.sync = false;
  auto opened = FileDurableLog::Open(path, log_options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<FileDurableLog> log = std::move(opened).value();
  QuotaAccount quota;
  std::mutex removed_mu;
  std::map<ObjectId, int> removed;
  DirectoryOptions options;
  options.durable_log = log.get();
  options.quota = &quota;
  options.route.bucket_count = 8;
  options.lifecycle_stripes = 4;
  options.on_removed = [&](const RemovedObject& r) {
    std::lock_guard<std::mutex> lock(removed_mu);
    ++removed[r.token.object];
  };
  Dir d(options);
  Watchdog watchdog(testing::kWatchdogBound, "batch stress");

  constexpr int kKeys = 48;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(Key("s", i));
  const std::vector<std::string> groups = {"", "", "g0", "g1", "g2"};
  std::mutex evicted_mu;
  std::set<GroupId> evicted_groups;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> commits{0};
  std::atomic<std::uint64_t> evictions{0};
  auto writer = [&](int id) {
    std::mt19937_64 rng(id * 7907 + 1);
    while (!stop.load(std::memory_order_relaxed)) {
      std::vector<std::string> names;
      std::vector<Put> puts;
      for (int i = 0; i < 8; ++i) names.push_back(keys[rng() % kKeys]);
      for (const std::string& n : names) {
        const std::uint64_t bytes = 1 + rng() % 50;
        puts.push_back(Put{n, Sized(bytes, groups[rng() % groups.size()]),
                           LoggedPayload{n}});
      }
      const std::vector<Result<Handle>> made = d.BatchCreatePending(puts);
      std::vector<std::string_view> commit;
      std::vector<ObjectToken> tokens;
      for (std::size_t i = 0; i < made.size(); ++i) {
        if (!made[i].ok()) continue;
        commit.push_back(names[i]);
        tokens.push_back(made[i]->token());
      }
      for (const Status& st : d.BatchCommit(commit, tokens)) {
        // Our own pending tokens: nothing else can commit or erase them.
        EXPECT_TRUE(st.ok()) << st.ToString();
        commits.fetch_add(1, std::memory_order_relaxed);
      }
      std::vector<std::string_view> erase;
      for (int i = 0; i < 6; ++i) erase.push_back(keys[rng() % kKeys]);
      for (const Status& st : d.BatchErase(erase, EraseOptions{true})) {
        EXPECT_TRUE(st.ok() || st.code() == StatusCode::kNotFound)
            << st.ToString();
      }
    }
  };
  auto evictor = [&](int id) {
    std::mt19937_64 rng(id * 31 + 5);
    while (!stop.load(std::memory_order_relaxed)) {
      Result<Handle> h = d.Pin(keys[rng() % kKeys]);
      if (!h.ok()) continue;
      std::uint64_t version = 0;
      if (!d.WithHandle(*h, [&](const View& v) {
              version = v.version();
            }).ok()) {
        continue;
      }
      std::vector<EvictedObject<LoggedPayload>> out;
      const StatusCode code =
          DirectoryHooks::EvictIfUnchanged(d, *h, version, false, &out);
      EXPECT_TRUE(code == StatusCode::kOk || code == StatusCode::kAborted ||
                  code == StatusCode::kNotFound)
          << static_cast<int>(code);
      if (code != StatusCode::kOk) continue;
      evictions.fetch_add(1, std::memory_order_relaxed);
      if (out.front().group != kNoGroup) {
        for (const auto& x : out) EXPECT_EQ(x.group, out.front().group);
        std::lock_guard<std::mutex> lock(evicted_mu);
        evicted_groups.insert(out.front().group);
      }
    }
  };
  auto reader = [&] {
    std::vector<std::string_view> all(keys.begin(), keys.end());
    while (!stop.load(std::memory_order_relaxed)) {
      EXPECT_TRUE(
          d.WithObjects(all, [](std::size_t, StatusCode, const View*) {}).ok());
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) threads.emplace_back(writer, i);
  for (int i = 0; i < 2; ++i) threads.emplace_back(evictor, i);
  threads.emplace_back(reader);
  std::this_thread::sleep_for(testing::StressDuration(1500));
  stop.store(true);
  for (std::thread& t : threads) t.join();
  EXPECT_GT(commits.load(), 0u);

  ASSERT_TRUE(log->status().ok()) << log->status().ToString();
  for (const auto& [id, count] : removed) EXPECT_EQ(count, 1) << id;
  // Q2 at quiescence: every object is committed (each writer committed
  // its own pending puts), so the account holds their counted bytes.
  std::uint64_t live = 0;
  std::size_t active = 0;
  std::map<GroupId, std::size_t> routed_members;
  ASSERT_TRUE(d.VisitHandles([&](std::span<const Handle> handles) {
                 for (const Handle& h : handles) {
                   ++active;
                   d.WithHandle(h, [&](const View& v) {
                      live += v.counted_bytes();
                      if (!v.is_singleton()) ++routed_members[v.group_id()];
                    }).IgnoreError();
                 }
               }).ok());
  EXPECT_EQ(active, d.object_count());
  EXPECT_EQ(quota.charged(), live);
  EXPECT_EQ(d.pending_charge_bytes(), 0u);
  // V1: a group an eviction took has no member left; a live group's
  // members are all routed.
  for (GroupId g : evicted_groups) EXPECT_EQ(routed_members.count(g), 0u) << g;
  for (const char* name : {"g0", "g1", "g2"}) {
    auto found = d.FindGroup(name);
    if (!found.ok()) continue;
    EXPECT_EQ(found.value()->member_count(),
              routed_members[found.value()->id()])
        << name;
  }
  // The file replays to the primary's state.
  Dir replica;
  ASSERT_TRUE(ReadDurableLog(path, [&](Lsn, std::string_view body) {
                DurableRecordView record;
                ASSERT_TRUE(DecodeDurableRecord(body, &record).ok());
                ASSERT_TRUE(ApplyDurableRecord(replica, record).ok());
              }).ok());
  EXPECT_EQ(DumpOf(replica), DumpOf(d));
  std::printf("batch stress: %llu commits, %llu evictions, %zu live\n",
              static_cast<unsigned long long>(commits.load()),
              static_cast<unsigned long long>(evictions.load()), active);
}

}  // namespace
}  // namespace cairn
