// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Shared by the durable-log tests of the directory (the hook, through
// InMemoryDurableLog) and of ha (FileDurableLog): a payload the log carries,
// a directory wired to an in-memory log, one run of every logged mutation,
// and the names both suites use.

#ifndef CAIRN_TESTS_DIRECTORY_DURABLE_LOG_TESTING_H_
#define CAIRN_TESTS_DIRECTORY_DURABLE_LOG_TESTING_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/directory/durable_log.h"
#include "cairn/directory/group_directory.h"
#include "cairn/directory/quota.h"
#include "directory/directory_testing.h"

// A payload whose bytes the log carries.
struct LoggedPayload {
  std::string bytes;
};

template <>
struct cairn::DurablePayloadCodec<LoggedPayload> {
  static constexpr bool kLogsPayload = true;
  static void Encode(const LoggedPayload& p, std::string* out) {
    out->append(p.bytes);
  }
  static cairn::Result<LoggedPayload> Decode(std::string_view bytes) {
    return LoggedPayload{std::string(bytes)};
  }
};

namespace cairn::testing {

using LoggedDir = GroupDirectory<LoggedPayload>;

inline constexpr std::chrono::seconds kDeadlockBound{60};

struct Fixture {
  explicit Fixture(std::size_t stripes = 256) {
    DirectoryOptions o;
    o.clock = &clock;
    o.quota = &quota;
    o.durable_log = &log;
    o.lifecycle_stripes = stripes;
    o.route.bucket_count = 64;
    o.on_removed = [this](const RemovedObject& r) {
      std::lock_guard<std::mutex> lock(removed_mu);
      removed.push_back(r.token);
      // The record of a removal is durable before its callback runs.
      bool durable = false;
      for (const auto& rec : log.records()) {
        DurableRecordView v;
        if (rec.state != InMemoryDurableLog::RecordState::kDurable ||
            !DecodeDurableRecord(rec.body, &v).ok() ||
            v.op == DurableOp::kCreate || v.op == DurableOp::kCommit ||
            v.op == DurableOp::kUpsert || v.op == DurableOp::kAdjust) {
          continue;
        }
        for (const ObjectToken& t : rec.tokens) durable |= t == r.token;
      }
      if (!durable) removed_before_durable.push_back(r.token);
    };
    dir = std::make_unique<LoggedDir>(o);
  }
  std::vector<DurableRecordView> Durable() const {
    durable_bodies = log.durable_bodies();
    std::vector<DurableRecordView> out;
    for (const std::string& body : durable_bodies) {
      DurableRecordView v;
      EXPECT_TRUE(DecodeDurableRecord(body, &v).ok());
      out.push_back(v);
    }
    return out;
  }
  std::uint64_t Version(std::string_view key) const {
    std::uint64_t version = 0;
    EXPECT_TRUE(dir->WithObject(key,
                                [&](const ObjectView<LoggedPayload>& v) {
                                  version = v.version();
                                })
                    .ok());
    return version;
  }

  ManualClock clock;
  QuotaAccount quota;
  InMemoryDurableLog log;
  std::mutex removed_mu;
  std::vector<ObjectToken> removed;
  std::vector<ObjectToken> removed_before_durable;
  mutable std::vector<std::string> durable_bodies;
  std::unique_ptr<LoggedDir> dir;
};

// Runs every mutation the log covers once, on fresh keys under `tag`.
// Each step checks its own status.
inline void RunEveryLoggedMutation(Fixture& f, std::string_view tag) {
  LoggedDir& d = *f.dir;
  const std::string single = Key(tag, 1);
  const std::string group = Key(tag, 100);
  ASSERT_TRUE(d.Create(single, Sized(10), LoggedPayload{"one"}).ok());
  ASSERT_TRUE(d.Create(Key(tag, 2), Sized(10, group), {"m2"}).ok());
  ASSERT_TRUE(d.Create(Key(tag, 3), Sized(10, group), {"m3"}).ok());
  Result<ObjectHandle<LoggedPayload>> pending =
      d.CreatePending(Key(tag, 4), Sized(7), {"p"});
  ASSERT_TRUE(pending.ok());
  ASSERT_TRUE(d.Commit(Key(tag, 4), pending->token()).ok());
  Result<ObjectHandle<LoggedPayload>> h = d.Pin(single);
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(d.BeginUpsert(single, h->token(), {20, 20}).ok());
  ASSERT_TRUE(
      d.CommitUpsert(single, h->token(), [](ObjectAccess<LoggedPayload>& a) {
         a.payload().bytes = "two";
       }).ok());
  ASSERT_TRUE(d.Erase(single).ok());
  Result<ObjectHandle<LoggedPayload>> p4 = d.Pin(Key(tag, 4));
  ASSERT_TRUE(p4.ok());
  ASSERT_TRUE(d.EraseIfMatch(Key(tag, 4), (*p4)->id(), p4->get()).ok());
  ASSERT_TRUE(d.EraseGroup(group).ok());
  ASSERT_TRUE(d.Create(Key(tag, 5), Sized(5)).ok());
  Result<ObjectHandle<LoggedPayload>> victim = d.Pin(Key(tag, 5));
  ASSERT_TRUE(victim.ok());
  // A replica added (Q4): a kAdjust post-state.
  ASSERT_TRUE(d.AdjustCharge(Key(tag, 5), victim->token(), {3, 0}).ok());
  std::vector<EvictedObject<LoggedPayload>> out;
  ASSERT_EQ(DirectoryHooks::EvictIfUnchanged(d, *victim, f.Version(Key(tag, 5)),
                                             false, &out),
            StatusCode::kOk);
}

// The names both durable-log suites write unqualified, in one place: a suite
// brings them in with `using namespace testing::durable_log_names;` at the
// top of its unnamed namespace.
namespace durable_log_names {
using Dir = LoggedDir;
using Handle = ObjectHandle<LoggedPayload>;
using View = ObjectView<LoggedPayload>;
using Access = ObjectAccess<LoggedPayload>;
using testing::Fixture;
using testing::kDeadlockBound;
using testing::Key;
using testing::RunEveryLoggedMutation;
using testing::Sized;
using testing::Watchdog;
}  // namespace durable_log_names

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_DIRECTORY_DURABLE_LOG_TESTING_H_
