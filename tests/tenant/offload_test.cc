// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Asynchronous offload tickets (V7): keep, remove and fail completions,
// stale versions, destroyed tickets, the in-flight bound, groups, and a
// stress of completions racing puts, erases and other eviction passes.

#include "cairn/tenant/offload.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/base/clock.h"
#include "cairn/ha/replay.h"
#include "cairn/tenant/eviction.h"
#include "directory/directory_testing.h"
#include "directory/durable_log_testing.h"
#include "testing/stress.h"

namespace cairn {
namespace {

using testing::Key;
using testing::TestPayload;
using Dir = GroupDirectory<TestPayload>;
using Handle = ObjectHandle<TestPayload>;
using Kernel = Evictor<TestPayload>;
using Ticket = OffloadTicket<TestPayload>;
using Access = ObjectAccess<TestPayload>;

// Metric values by name and one label value ("" for none).
class Capture : public MetricVisitor {
 public:
  void Visit(const MetricSample& s) override {
    values_[{std::string(s.name),
             s.labels.empty() ? std::string()
                              : std::string(s.labels[0].value)}] = s.value;
  }
  double Get(const std::string& name, const std::string& label = {}) const {
    auto it = values_.find({name, label});
    EXPECT_NE(it, values_.end()) << name << " " << label;
    return it == values_.end() ? -1 : it->second;
  }

 private:
  std::map<std::pair<std::string, std::string>, double> values_;
};

double Metric(const Kernel& k, const std::string& name,
              const std::string& label = {}) {
  Capture c;
  k.VisitMetrics(c);
  return c.Get(name, label);
}

struct Fixture {
  explicit Fixture(std::uint64_t limit = QuotaAccount::kUnlimited,
                   DurableLog* log = nullptr)
      : quota(limit) {
    DirectoryOptions o;
    o.clock = &clock;
    o.quota = &quota;
    o.durable_log = log;
    o.route.bucket_count = 64;
    dir = std::make_unique<Dir>(o);
  }
  Handle Make(std::string_view key, std::uint64_t bytes,
              std::string_view group = {}, std::int64_t lease_nanos = 0) {
    CreateOptions c;
    c.size_bytes = bytes;
    c.counted_bytes = bytes;
    c.group = group;
    c.lease_ttl = std::chrono::nanoseconds(lease_nanos);
    Result<Handle> h = dir->Create(key, c, TestPayload{1, bytes, 0});
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? h.value() : Handle();
  }
  bool Present(std::string_view key) { return dir->Pin(key).ok(); }
  EvictionResult Evict(Kernel& k, std::uint64_t target) {
    Dir* d = dir.get();
    return k.Evict(std::span<Dir* const>(&d, 1), target, target,
                   Kernel::Measure::kSizeBytes);
  }
  // Q2: the account equals the sum of the live objects' counted bytes.
  std::uint64_t CountedSum() {
    std::uint64_t sum = 0;
    EXPECT_TRUE(DirectoryHooks::Census(*dir, [&](const Handle&,
                                                 const ObjectMetadata& m) {
                  sum += m.counted_bytes;
                }).ok());
    return sum;
  }
  std::int64_t Value(std::string_view key) {
    std::int64_t v = -1;
    EXPECT_TRUE(dir->WithObject(
                       key, [&](const auto& view) { v = view.payload().value; })
                    .ok());
    return v;
  }

  ManualClock clock;
  QuotaAccount quota;
  std::unique_ptr<Dir> dir;
};

// A hook that keeps every ticket for the test to complete.
struct Holder {
  std::vector<Ticket> tickets;
  Kernel::Options Options(std::size_t bound = 256) {
    Kernel::Options o;
    o.offload_async = [this](Ticket t) { tickets.push_back(std::move(t)); };
    o.max_offloads_in_flight = bound;
    return o;
  }
};

TEST(OffloadTicketTest, V7KeepInstallsThePayloadAndMovesTheCharge) {
  Fixture f(1000);
  f.Make("a", 100);
  f.Make("b", 60);
  Holder held;
  Kernel k(held.Options());
  EvictionResult r = f.Evict(k, 50);
  // One ticket covers the goal (larger first); nothing is freed yet.
  ASSERT_EQ(r.offload_handed_off, 1u);
  EXPECT_EQ(r.offload_handed_off_bytes, 100u);
  EXPECT_EQ(r.freed_bytes, 0u);
  EXPECT_EQ(r.evicted_objects, 0u);
  EXPECT_EQ(Metric(k, "cairn_eviction_offloads_in_flight"), 1);
  Ticket& t = held.tickets[0];
  ASSERT_EQ(t.handles().size(), 1u);
  EXPECT_EQ(t.handles()[0]->key(), "a");
  const std::uint64_t offered_version = t.versions()[0];

  // Demote: counted bytes 100 -> 10 (refunded), payload rewritten.
  OffloadCompletion done =
      t.Keep(KeptBytes{100, 10}, [](Access& a) { a.payload().value = 7; });
  EXPECT_TRUE(done.status.ok()) << done.status.ToString();
  EXPECT_EQ(done.applied, 1u);
  EXPECT_FALSE(t.pending());
  EXPECT_TRUE(f.Present("a"));
  EXPECT_EQ(f.Value("a"), 7);
  ObjectMetadata m;
  ASSERT_TRUE(
      f.dir->WithObject("a", [&](const auto& v) { m = v.metadata(); }).ok());
  EXPECT_EQ(m.counted_bytes, 10u);
  EXPECT_EQ(m.version, offered_version + 1);
  EXPECT_EQ(f.quota.charged(), 70u);
  EXPECT_EQ(f.CountedSum(), f.quota.charged()) << "Q2";
  EXPECT_EQ(Metric(k, "cairn_eviction_offloads_in_flight"), 0);
  EXPECT_EQ(Metric(k, "cairn_eviction_offload_tickets_total", "kept"), 1);
  EXPECT_EQ(Metric(k, "cairn_eviction_offload_tickets_total", "handed_off"), 1);

  // A growth past the limit is refused by the quota: nothing changes.
  held.tickets.clear();
  r = f.Evict(k, 1);
  ASSERT_EQ(held.tickets.size(), 1u);
  const std::string key(held.tickets[0].handles()[0]->key());
  const std::uint64_t before = f.quota.charged();
  done = held.tickets[0].Keep(KeptBytes{1, 2000},
                              [](Access& a) { a.payload().value = 9; });
  EXPECT_EQ(done.status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(done.applied, 0u);
  EXPECT_EQ(f.quota.charged(), before);
  EXPECT_NE(f.Value(key), 9);
  EXPECT_EQ(f.CountedSum(), f.quota.charged()) << "Q2";
  EXPECT_EQ(Metric(k, "cairn_eviction_offload_tickets_total", "not_applied"),
            1);
  EXPECT_EQ(Metric(k, "cairn_eviction_offloads_in_flight"), 0);
}

// A staged upsert's commit replaces the charge and the envelope, so a Keep
// while one is staged is refused (kAborted) and changes nothing, and the
// upsert then commits as staged. Planted bug: without the check, Keep
// applied (payload 7, 10 counted bytes) and CommitUpsert then set 300
// counted bytes over the demoted payload.
TEST(OffloadTicketTest, V7KeepIsRefusedWhileAnUpsertIsStaged) {
  Fixture f(1000);
  Handle h = f.Make("a", 100);
  Holder held;
  Kernel k(held.Options());
  f.Evict(k, 50);
  ASSERT_EQ(held.tickets.size(), 1u);
  UpsertOptions u;
  u.size_bytes = 300;
  u.counted_bytes = 300;
  ASSERT_TRUE(f.dir->BeginUpsert("a", h.token(), u).ok());
  OffloadCompletion done = held.tickets[0].Keep(
      KeptBytes{30, 10}, [](Access& a) { a.payload().value = 7; });
  EXPECT_EQ(done.status.code(), StatusCode::kAborted);
  EXPECT_EQ(done.applied, 0u);
  EXPECT_NE(f.Value("a"), 7);
  ASSERT_TRUE(f.dir->CommitUpsert("a", h.token()).ok());
  ObjectMetadata m;
  ASSERT_TRUE(
      f.dir->WithObject("a", [&](const auto& v) { m = v.metadata(); }).ok());
  EXPECT_EQ(m.counted_bytes, 300u);
  EXPECT_EQ(f.quota.charged(), 300u);
  EXPECT_EQ(f.CountedSum(), f.quota.charged()) << "Q2";
}

// With a durable log a Keep appends a kUpsert record with the new envelope
// (a replica's replay takes the same charge); a refused reservation or
// append changes nothing, the quota included.
TEST(OffloadTicketTest, V7KeepIsLoggedAndALogRefusalChangesNothing) {
  InMemoryDurableLog log;
  Fixture f(QuotaAccount::kUnlimited, &log);
  f.Make("a", 100);
  Holder held;
  Kernel k(held.Options());
  auto keep_once = [&] {
    held.tickets.clear();
    f.Evict(k, 1);
    EXPECT_EQ(held.tickets.size(), 1u);
    return held.tickets[0].Keep(KeptBytes{30, 10},
                                [](Access& a) { a.payload().value = 7; });
  };
  log.FailReserve(UnavailableError("log down"));
  OffloadCompletion done = keep_once();
  EXPECT_EQ(done.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(done.applied, 0u);
  EXPECT_EQ(f.quota.charged(), 100u);
  EXPECT_EQ(f.Value("a"), 1);
  log.FailAppend(UnavailableError("write failed"));
  done = keep_once();
  EXPECT_EQ(done.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(f.quota.charged(), 100u);
  EXPECT_EQ(f.CountedSum(), 100u);
  EXPECT_EQ(f.Value("a"), 1);

  const std::uint64_t offered = [&] {
    held.tickets.clear();
    f.Evict(k, 1);
    return held.tickets.at(0).versions()[0];
  }();
  done = held.tickets[0].Keep(KeptBytes{30, 10},
                              [](Access& a) { a.payload().value = 7; });
  ASSERT_TRUE(done.status.ok()) << done.status.ToString();
  EXPECT_EQ(f.quota.charged(), 10u);
  EXPECT_EQ(f.Value("a"), 7);
  const std::vector<InMemoryDurableLog::Record> records = log.records();
  ASSERT_FALSE(records.empty());
  const InMemoryDurableLog::Record& last = records.back();
  EXPECT_EQ(last.state, InMemoryDurableLog::RecordState::kDurable);
  DurableRecordView view;
  ASSERT_TRUE(DecodeDurableRecord(last.body, &view).ok());
  EXPECT_EQ(view.op, DurableOp::kUpsert);
  ASSERT_EQ(view.objects.size(), 1u);
  EXPECT_EQ(view.objects[0].key, "a");
  EXPECT_EQ(view.objects[0].version, offered + 1);
  EXPECT_EQ(view.objects[0].size_bytes, 30u);
  EXPECT_EQ(view.objects[0].counted_bytes, 10u);
}

// KeepWithPayload logs the demoted payload's bytes (a payload-logging
// codec), so a standby built from the log has the payload readers of the
// primary see; Keep with a callback logs none. Mismatched argument counts
// change nothing.
TEST(OffloadTicketTest, V7KeepWithPayloadLogsTheDemotedPayloadForAStandby) {
  using LoggedKernel = Evictor<LoggedPayload>;
  ManualClock clock;
  QuotaAccount quota;
  InMemoryDurableLog log;
  DirectoryOptions o;
  o.clock = &clock;
  o.quota = &quota;
  o.durable_log = &log;
  testing::LoggedDir dir(o);
  CreateOptions c;
  c.size_bytes = 100;
  c.counted_bytes = 100;
  ASSERT_TRUE(dir.Create("a", c, LoggedPayload{"in memory"}).ok());
  std::vector<OffloadTicket<LoggedPayload>> tickets;
  LoggedKernel::Options ko;
  ko.offload_async = [&](OffloadTicket<LoggedPayload> t) {
    tickets.push_back(std::move(t));
  };
  LoggedKernel k(ko);
  auto offer = [&] {
    tickets.clear();
    testing::LoggedDir* d = &dir;
    k.Evict(std::span<testing::LoggedDir* const>(&d, 1), 1, 1,
            LoggedKernel::Measure::kSizeBytes);
    EXPECT_EQ(tickets.size(), 1u);
  };
  offer();
  std::vector<LoggedPayload> none;
  OffloadCompletion done = tickets[0].KeepWithPayloads(
      std::vector<KeptBytes>{{30, 10}}, std::span<LoggedPayload>(none));
  EXPECT_EQ(done.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(done.applied, 0u);
  EXPECT_EQ(quota.charged(), 100u);
  offer();
  // The object changed since the offer: not kept, and the demoted payload
  // stays with the caller.
  offer();
  ASSERT_TRUE(
      dir.WithObjectExclusive(
             "a", [](ObjectAccess<LoggedPayload>& a) { a.set_size_bytes(100); })
          .ok());
  LoggedPayload demoted{"on disk at 0x40"};
  done = tickets[0].KeepWithPayload(KeptBytes{30, 10}, demoted);
  EXPECT_EQ(done.status.code(), StatusCode::kAborted);
  EXPECT_EQ(demoted.bytes, "on disk at 0x40");
  offer();
  done = tickets[0].KeepWithPayload(KeptBytes{30, 10}, demoted);
  ASSERT_TRUE(done.status.ok()) << done.status.ToString();
  EXPECT_EQ(done.applied, 1u);
  EXPECT_EQ(quota.charged(), 10u);
  struct Seen {
    std::string payload;
    std::uint64_t version = 0;
    std::uint64_t counted = 0;
  };
  auto seen_in = [](testing::LoggedDir& d) {
    Seen seen;
    EXPECT_TRUE(
        d.WithObject("a", [&](const ObjectView<LoggedPayload>& v) {
           seen = Seen{v.payload().bytes, v.version(), v.counted_bytes()};
         }).ok());
    return seen;
  };
  auto payload_of = [&](testing::LoggedDir& d) { return seen_in(d).payload; };
  EXPECT_EQ(payload_of(dir), "on disk at 0x40");
  // A standby from the log: the same payload, charge and version.
  auto standby_of_log = [&] {
    auto standby = std::make_unique<testing::LoggedDir>(DirectoryOptions{});
    for (const std::string& body : log.durable_bodies()) {
      DurableRecordView v;
      EXPECT_TRUE(DecodeDurableRecord(body, &v).ok());
      EXPECT_TRUE(ApplyDurableRecord(*standby, v).ok());
    }
    return standby;
  };
  std::unique_ptr<testing::LoggedDir> standby = standby_of_log();
  EXPECT_EQ(payload_of(*standby), "on disk at 0x40");
  EXPECT_EQ(seen_in(*standby).version, seen_in(dir).version);
  EXPECT_EQ(seen_in(*standby).counted, 10u);
  // Keep with a callback logs no payload bytes: the standby keeps the
  // payload it had (what KeepWithPayload is for).
  offer();
  done = tickets[0].Keep(KeptBytes{20, 5}, [](ObjectAccess<LoggedPayload>& a) {
    a.payload().bytes = "elsewhere";
  });
  ASSERT_TRUE(done.status.ok()) << done.status.ToString();
  EXPECT_EQ(payload_of(dir), "elsewhere");
  standby = standby_of_log();
  EXPECT_EQ(payload_of(*standby), "on disk at 0x40");
  EXPECT_EQ(seen_in(*standby).counted, 5u);
}

// A candidate kept (here, inside the hook) is not offered again by a later
// census round of the same call; objects in flight from an earlier call
// are passed over.
TEST(OffloadTicketTest, V7KeptObjectIsNotOfferedAgainByThatHandOff) {
  Fixture f;
  // Lease deadlines fix the ranking: o0 first, o39 last.
  for (int i = 0; i < 40; ++i) f.Make(Key("o", i), 10, {}, i + 1);
  f.clock.Advance(std::chrono::seconds(1));
  Holder held;
  bool keep_inline = false;
  std::map<std::string, int> offers;
  Kernel::Options o;
  o.offload_async = [&](Ticket t) {
    ++offers[std::string(t.handles()[0]->key())];
    if (!keep_inline) {
      held.tickets.push_back(std::move(t));
      return;
    }
    EXPECT_TRUE(t.Keep(KeptBytes{10, 1}, [](Access& a) {
                   a.payload().value = 2;
                 }).status.ok());
  };
  Kernel k(o);
  EvictionResult r = f.Evict(k, 150);  // o0..o14 in flight
  ASSERT_EQ(r.offload_handed_off, 15u);
  keep_inline = true;
  // Round one ranks o0..o15: fifteen are in flight, o15 is kept (10 of the
  // 20 bytes); round two must find o16, not o15 again.
  r = f.Evict(k, 20);
  EXPECT_EQ(r.census_rounds, 2u);
  EXPECT_EQ(r.offload_handed_off, 2u);
  for (const auto& [key, n] : offers) EXPECT_EQ(n, 1) << key;
  EXPECT_EQ(offers.count(Key("o", 16)), 1u);
  for (Ticket& t : held.tickets) t.Fail();
  EXPECT_EQ(Metric(k, "cairn_eviction_offload_tickets_total", "failed"), 15);
  EXPECT_EQ(Metric(k, "cairn_eviction_offload_tickets_total", "kept"), 2);
  EXPECT_EQ(f.CountedSum(), f.quota.charged()) << "Q2";
}

TEST(OffloadTicketTest, V7RemoveEvictsOnlyAtTheOfferedVersion) {
  Fixture f;
  f.Make("a", 100);
  f.Make("b", 60);
  Holder held;
  std::vector<std::string> evicted;
  Kernel::Options o = held.Options();
  o.on_evicted = [&](std::span<EvictedObject<TestPayload>> out) {
    for (const auto& x : out) evicted.push_back(x.key);
  };
  Kernel k(o);
  f.Evict(k, 1000);
  ASSERT_EQ(held.tickets.size(), 2u);
  EXPECT_EQ(held.tickets[0].handles()[0]->key(), "a");
  EXPECT_EQ(held.tickets[1].handles()[0]->key(), "b");

  // "a" unchanged: removed, its charge released, on_evicted called.
  OffloadCompletion done = held.tickets[0].Remove();
  EXPECT_TRUE(done.status.ok()) << done.status.ToString();
  EXPECT_EQ(done.applied, 1u);
  EXPECT_FALSE(f.Present("a"));
  EXPECT_EQ(evicted, std::vector<std::string>{"a"});
  EXPECT_EQ(f.quota.charged(), 60u);

  // "b" changed after the offer (a write moved its version): a remove
  // completion leaves it, and so does a keep.
  ASSERT_TRUE(f.dir
                  ->WithObjectExclusive("b",
                                        [](Access& a) {
                                          a.payload().value = 5;
                                          a.set_size_bytes(60);
                                        })
                  .ok());
  Ticket stale = std::move(held.tickets[1]);
  EXPECT_FALSE(held.tickets[1].pending());  // moved from
  done = stale.Remove();
  EXPECT_EQ(done.status.code(), StatusCode::kAborted);
  EXPECT_EQ(done.applied, 0u);
  EXPECT_TRUE(f.Present("b"));
  EXPECT_EQ(f.Value("b"), 5);
  EXPECT_EQ(f.quota.charged(), 60u);
  EXPECT_EQ(evicted.size(), 1u);

  held.tickets.clear();
  f.Evict(k, 1);  // b's new version offered
  ASSERT_EQ(held.tickets.size(), 1u);
  ASSERT_TRUE(
      f.dir->WithObjectExclusive("b", [](Access& a) { a.set_size_bytes(60); })
          .ok());
  done = held.tickets[0].Keep(KeptBytes{60, 1},
                              [](Access& a) { a.payload().value = 8; });
  EXPECT_EQ(done.status.code(), StatusCode::kAborted);
  EXPECT_EQ(f.Value("b"), 5);
  EXPECT_EQ(f.quota.charged(), 60u);
  EXPECT_EQ(f.CountedSum(), f.quota.charged()) << "Q2";

  EXPECT_EQ(Metric(k, "cairn_eviction_offload_tickets_total", "removed"), 1);
  EXPECT_EQ(Metric(k, "cairn_eviction_offload_tickets_total", "not_applied"),
            2);
  EXPECT_EQ(Metric(k, "cairn_eviction_evicted_objects_total"), 1);
  EXPECT_EQ(Metric(k, "cairn_eviction_evicted_bytes_total", "size"), 100);
  EXPECT_EQ(Metric(k, "cairn_eviction_offloads_in_flight"), 0);
}

TEST(OffloadTicketTest, V7FailedOrDestroyedTicketChangesNothingAndEnds) {
  Fixture f;
  f.Make("a", 100);
  f.Make("b", 60);
  Holder held;
  Kernel k(held.Options());
  f.Evict(k, 1000);
  ASSERT_EQ(held.tickets.size(), 2u);
  held.tickets[0].Fail();
  EXPECT_FALSE(held.tickets[0].pending());
  EXPECT_EQ(Metric(k, "cairn_eviction_offloads_in_flight"), 1);
  held.tickets.clear();  // "b"'s ticket destroyed without a completion
  EXPECT_EQ(Metric(k, "cairn_eviction_offloads_in_flight"), 0);
  EXPECT_EQ(Metric(k, "cairn_eviction_offload_tickets_total", "failed"), 2);
  EXPECT_TRUE(f.Present("a") && f.Present("b"));
  EXPECT_EQ(f.quota.charged(), 160u);

  // A ticket dropped inside the hook fails too; nothing is stuck: the next
  // cycle offers both objects again.
  Kernel::Options drop;
  int dropped = 0;
  drop.offload_async = [&](Ticket) { ++dropped; };
  Kernel d(drop);
  EvictionResult r = f.Evict(d, 1000);
  EXPECT_EQ(r.offload_handed_off, 2u);
  EXPECT_EQ(dropped, 2);
  EXPECT_EQ(Metric(d, "cairn_eviction_offloads_in_flight"), 0);
  r = f.Evict(k, 1000);
  EXPECT_EQ(r.offload_handed_off, 2u);
  EXPECT_EQ(held.tickets.size(), 2u);
  EXPECT_TRUE(f.Present("a") && f.Present("b"));
}

TEST(OffloadTicketTest, V7InFlightBoundStopsOfferingAndSaysSo) {
  Fixture f;
  for (int i = 0; i < 10; ++i) f.Make(Key("o", i), 10);
  Holder held;
  Kernel k(held.Options(/*bound=*/3));
  EvictionResult r = f.Evict(k, 100);
  EXPECT_EQ(r.offload_handed_off, 3u);
  EXPECT_TRUE(r.offload_bound_reached);
  EXPECT_EQ(Metric(k, "cairn_eviction_offloads_in_flight"), 3);
  EXPECT_EQ(Metric(k, "cairn_eviction_offload_bound_stops_total"), 1);
  r = f.Evict(k, 100);  // still three out: nothing offered
  EXPECT_EQ(r.offload_handed_off, 0u);
  EXPECT_TRUE(r.offload_bound_reached);
  EXPECT_EQ(held.tickets.size(), 3u);
  EXPECT_TRUE(held.tickets[0].Remove().status.ok());
  r = f.Evict(k, 100);  // one slot free
  EXPECT_EQ(r.offload_handed_off, 1u);
  EXPECT_TRUE(r.offload_bound_reached);
  EXPECT_EQ(held.tickets.size(), 4u);
  EXPECT_EQ(Metric(k, "cairn_eviction_offload_bound_stops_total"), 3);
  held.tickets.clear();
  EXPECT_EQ(Metric(k, "cairn_eviction_offloads_in_flight"), 0);
  EXPECT_EQ(f.dir->object_count(), 9u);
}

// A group's members are offered together; a member added after the offer
// (and not offered) keeps the whole group from a "remove" completion, also
// when another member left meanwhile so the count is unchanged.
TEST(OffloadTicketTest, V7RemoveNeverTakesAGroupMemberItDidNotOffer) {
  Fixture f;
  f.Make("g-a", 10, "g");
  f.Make("g-b", 10, "g");
  Holder held;
  Kernel k(held.Options());
  f.Evict(k, 1);
  ASSERT_EQ(held.tickets.size(), 1u);
  EXPECT_EQ(held.tickets[0].handles().size(), 2u);
  f.Make("g-c", 10, "g");  // joins between offer and completion
  OffloadCompletion done = held.tickets[0].Remove();
  EXPECT_EQ(done.status.code(), StatusCode::kAborted);
  EXPECT_TRUE(f.Present("g-a") && f.Present("g-b") && f.Present("g-c"));

  // Same count, other members: g-c joins as g-a leaves.
  held.tickets.clear();
  f.Evict(k, 1);
  ASSERT_EQ(held.tickets.size(), 1u);
  ASSERT_EQ(held.tickets[0].handles().size(), 3u);
  ASSERT_TRUE(f.dir->Erase("g-a").ok());
  f.Make("g-d", 10, "g");
  done = held.tickets[0].Remove();
  EXPECT_EQ(done.status.code(), StatusCode::kAborted);
  EXPECT_TRUE(f.Present("g-b") && f.Present("g-c") && f.Present("g-d"));
  EXPECT_EQ(f.quota.charged(), 30u);

  // Unchanged since the offer: removed whole (V1).
  held.tickets.clear();
  f.Evict(k, 1);
  ASSERT_EQ(held.tickets.size(), 1u);
  done = held.tickets[0].Remove();
  EXPECT_TRUE(done.status.ok()) << done.status.ToString();
  EXPECT_EQ(done.applied, 3u);
  EXPECT_FALSE(f.Present("g-b") || f.Present("g-c") || f.Present("g-d"));
  EXPECT_EQ(f.quota.charged(), 0u);
  EXPECT_EQ(Metric(k, "cairn_eviction_evicted_groups_total"), 1);

  // A group's keep: each member kept at its offered version.
  f.Make("h-a", 10, "h");
  f.Make("h-b", 20, "h");
  held.tickets.clear();
  f.Evict(k, 1);
  ASSERT_EQ(held.tickets.size(), 1u);
  Ticket& t = held.tickets[0];
  ASSERT_EQ(t.handles().size(), 2u);
  const KeptBytes kept[] = {{10, 1}, {20, 2}};
  done = t.Keep(kept, [](std::size_t i, Access& a) {
    a.payload().value = 100 + static_cast<std::int64_t>(i);
  });
  EXPECT_TRUE(done.status.ok()) << done.status.ToString();
  EXPECT_EQ(done.applied, 2u);
  EXPECT_EQ(f.quota.charged(), 3u);
  EXPECT_EQ(f.CountedSum(), f.quota.charged()) << "Q2";
  EXPECT_TRUE(f.Present("h-a") && f.Present("h-b"));
}

// Eight threads: two evict (async hand-offs into a queue; one of them
// also runs a plain eviction now and then), two complete
// tickets at random (keep with a new charge, remove, fail, drop), four put,
// upsert and erase singletons and group members. Q2 at the end, no ticket
// stuck, and every group whole or gone per V1 is kept by the commit.
TEST(OffloadTicketStressTest, V7CompletionsRacePutsErasesAndEvictionPasses) {
  Fixture f;
  std::mutex mu;
  std::deque<Ticket> queue;  // guarded by mu
  Kernel::Options o;
  o.offload_async = [&](Ticket t) {
    std::lock_guard<std::mutex> lock(mu);
    queue.push_back(std::move(t));
  };
  o.max_offloads_in_flight = 32;
  Kernel k(o);
  Kernel plain;  // evicts the same objects with no hand-off
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> completions{0};
  const auto deadline =
      std::chrono::steady_clock::now() + testing::StressDuration(600);
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      Dir* d = f.dir.get();
      for (int round = 0; !stop.load(std::memory_order_relaxed); ++round) {
        Kernel& kernel = t == 1 && round % 4 == 0 ? plain : k;
        EvictionResult r = kernel.Evict(std::span<Dir* const>(&d, 1), 200, 200,
                                        Kernel::Measure::kCountedBytes);
        EXPECT_TRUE(r.status.ok());
        std::this_thread::yield();
      }
    });
  }
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      while (!stop.load(std::memory_order_relaxed)) {
        std::optional<Ticket> ticket;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!queue.empty()) {
            ticket.emplace(std::move(queue.front()));
            queue.pop_front();
          }
        }
        if (!ticket) {
          std::this_thread::yield();
          continue;
        }
        switch (rng() % 4) {
          case 0: {
            std::vector<KeptBytes> kept;
            for (std::size_t i = 0; i < ticket->handles().size(); ++i) {
              kept.push_back(KeptBytes{8, rng() % 24});
            }
            ticket->Keep(kept, [](std::size_t, Access& a) {
              a.payload().value = -a.payload().value;
            });
            break;
          }
          case 1:
            ticket->Remove();
            break;
          case 2:
            ticket->Fail();
            break;
          default:
            ticket.reset();  // destroyed without a completion
        }
        completions.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      while (std::chrono::steady_clock::now() < deadline) {
        const int i = static_cast<int>(rng() % 64);
        const bool member = i % 4 == 0;
        const std::string key = Key(member ? "m" : "s", i);
        const std::string group = "g" + std::to_string(i % 16);
        switch (rng() % 4) {
          case 0:
          case 1: {
            CreateOptions c;
            c.size_bytes = 8;
            c.counted_bytes = 1 + rng() % 16;
            if (member) c.group = group;
            f.dir->Create(key, c, TestPayload{1, 0, 0}).status().IgnoreError();
            break;
          }
          case 2: {
            Result<Handle> h = f.dir->Pin(key);
            if (!h.ok()) break;
            UpsertOptions u;
            u.size_bytes = 8;
            u.counted_bytes = 1 + rng() % 16;
            if (f.dir->BeginUpsert(key, h.value()->token(), u).ok()) {
              f.dir->CommitUpsert(key, h.value()->token()).IgnoreError();
            }
            break;
          }
          default:
            f.dir->Erase(key).IgnoreError();
        }
      }
    });
  }
  for (std::size_t t = 2 + 2; t < threads.size(); ++t) threads[t].join();
  stop.store(true);
  for (std::size_t t = 0; t < 4; ++t) threads[t].join();
  {
    std::lock_guard<std::mutex> lock(mu);
    queue.clear();  // the rest fail on destruction
  }
  EXPECT_GT(completions.load(), 0u);
  EXPECT_EQ(Metric(k, "cairn_eviction_offloads_in_flight"), 0);
  const double handed =
      Metric(k, "cairn_eviction_offload_tickets_total", "handed_off");
  const double ended =
      Metric(k, "cairn_eviction_offload_tickets_total", "kept") +
      Metric(k, "cairn_eviction_offload_tickets_total", "removed") +
      Metric(k, "cairn_eviction_offload_tickets_total", "failed") +
      Metric(k, "cairn_eviction_offload_tickets_total", "not_applied");
  EXPECT_EQ(handed, ended);
  EXPECT_GT(Metric(k, "cairn_eviction_offload_tickets_total", "kept"), 0);
  EXPECT_GT(Metric(k, "cairn_eviction_offload_tickets_total", "removed"), 0);
  EXPECT_GT(Metric(k, "cairn_eviction_offload_tickets_total", "not_applied"),
            0);
  EXPECT_EQ(f.CountedSum(), f.quota.charged()) << "Q2";
}

}  // namespace
}  // namespace cairn
