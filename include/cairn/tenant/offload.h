// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Asynchronous offload (rule V7, docs/tenants.md "Asynchronous offload"):
// the eviction kernel hands the host an OffloadTicket for a candidate (a
// singleton, or every member of a group the census saw, with the version
// each had) and goes on; the host completes the ticket later, from any
// thread, with one of
//
//   Keep(bytes, fn)  the object stays with a new residency: under each
//                    object's exclusive lock, if it is still at the offered
//                    version and evictable, its counted bytes move to the
//                    given value (a growth charged against the quota, a
//                    shrink refunded), its version moves and fn installs
//                    the demoted payload (its record has no payload
//                    bytes);
//   KeepWithPayloads(bytes, payloads)
//                    Keep that installs the given payloads and logs their
//                    bytes, for a log whose codec carries payloads;
//   Remove()         the candidate is evicted as an accepted synchronous
//                    hand-off is, only if every offered object is still at
//                    its offered version and a group has exactly the
//                    offered members (a member added since the offer keeps
//                    the group);
//   Fail()           nothing changes.
//
// A ticket destroyed without a completion fails. Each completion ends the
// hand-off: the Evictor's in-flight count drops and the objects may be
// offered again by a later cycle. A cycle never offers an object that is
// already in flight, and stops offering when Options::max_offloads_in_flight
// tickets are out (EvictionResult::offload_bound_reached).
//
// Thread safety: one ticket is used by one thread at a time (it is a
// move-only value); different tickets may complete concurrently, from any
// thread, also from inside the offload hook itself. A completion takes the
// object locks (Keep: each object's lock in turn; Remove: the locks of
// DirectoryHooks::EvictIfUnchanged) and then the Evictor's in-flight mutex,
// a leaf (docs/concurrency.md); it must not run inside a directory
// callback. The directory the ticket names must outlive the ticket; the
// Evictor need not (the ticket shares the in-flight state and counters).

#ifndef CAIRN_TENANT_OFFLOAD_H_
#define CAIRN_TENANT_OFFLOAD_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cairn/base/check.h"
#include "cairn/base/metrics.h"
#include "cairn/base/mutex.h"
#include "cairn/base/status.h"
#include "cairn/base/thread_annotations.h"
#include "cairn/base/version.h"
#include "cairn/directory/directory_hooks.h"
#include "cairn/directory/group_directory.h"

CAIRN_NAMESPACE_BEGIN

// The envelope a kept object takes: its new size and counted (quota) bytes.
struct KeptBytes {
  std::uint64_t size_bytes = 0;
  std::uint64_t counted_bytes = 0;
};

// What a Keep or Remove completion did. `applied`: objects kept, or
// removed (a group's members). `status`: OK when the whole candidate was
// applied; otherwise why not (kAborted: changed since the offer or not
// evictable now; kNotFound: gone; kResourceExhausted: a kept object's
// growth did not fit the quota; kUnavailable: shut down; the durable log's
// error). A Remove whose eviction was made but could not be made durable
// (H5) has applied > 0 and the log's error.
struct OffloadCompletion {
  Status status;
  std::size_t applied = 0;
};

namespace tenant_internal {

// The hand-offs in flight and the counters their completions move, shared
// by an Evictor and its tickets.
template <typename Payload>
class OffloadFlights {
 public:
  using OnEvicted = std::function<void(std::span<EvictedObject<Payload>>)>;
  enum class Admit : std::uint8_t { kAdmitted, kBusy, kFull };

  OffloadFlights(std::size_t bound, OnEvicted on_evicted)
      : bound_(bound), on_evicted_(std::move(on_evicted)) {}

  // Admits a hand-off of `entries` unless one of them is in flight (kBusy)
  // or `bound` hand-offs are (kFull; 0: no bound). Takes mu_ (a leaf).
  Admit Begin(std::span<const void* const> entries) {
    MutexLock lock(&mu_);
    for (const void* e : entries) {
      if (entries_.contains(e)) return Admit::kBusy;
    }
    if (bound_ != 0 && in_flight_ >= bound_) return Admit::kFull;
    for (const void* e : entries) entries_.insert(e);
    ++in_flight_;
    return Admit::kAdmitted;
  }
  // Ends an admitted hand-off. Takes mu_ (a leaf).
  void End(std::span<const void* const> entries) {
    MutexLock lock(&mu_);
    for (const void* e : entries) entries_.erase(e);
    CAIRN_CHECK(in_flight_ > 0);
    --in_flight_;
  }
  std::size_t in_flight() const {
    MutexLock lock(&mu_);
    return in_flight_;
  }
  const OnEvicted& on_evicted() const { return on_evicted_; }

  // Moved by completions; read by Evictor::VisitMetrics.
  Counter kept;
  Counter removed;
  Counter failed;
  Counter not_applied;
  Counter evicted_objects;
  Counter evicted_groups;
  Counter evicted_size_bytes;
  Counter evicted_counted_bytes;

 private:
  const std::size_t bound_;
  const OnEvicted on_evicted_;
  mutable Mutex mu_;
  std::unordered_set<const void*> entries_ CAIRN_GUARDED_BY(mu_);
  std::size_t in_flight_ CAIRN_GUARDED_BY(mu_) = 0;
};

}  // namespace tenant_internal

template <typename Payload, template <typename> class Route>
class Evictor;

// One hand-off in flight: move-only; completed once by Keep, Remove or
// Fail, or by its destructor (as Fail). After a completion (or a move
// from) the ticket is empty: pending() is false and every completion is a
// programmer error (CAIRN_CHECK).
template <typename Payload = EmptyPayload,
          template <typename> class Route = ObjectRouteIndex>
class OffloadTicket {
 public:
  using Directory = GroupDirectory<Payload, Route>;
  using Handle = ObjectHandle<Payload>;
  using Access = ObjectAccess<Payload>;

  OffloadTicket(OffloadTicket&& other) noexcept = default;
  OffloadTicket& operator=(OffloadTicket&& other) noexcept {
    if (this != &other) {
      if (pending()) Fail();
      flights_ = std::move(other.flights_);
      dir_ = other.dir_;
      handles_ = std::move(other.handles_);
      versions_ = std::move(other.versions_);
      entries_ = std::move(other.entries_);
      soft_pinned_ = other.soft_pinned_;
      bytes_ = other.bytes_;
    }
    return *this;
  }
  OffloadTicket(const OffloadTicket&) = delete;
  OffloadTicket& operator=(const OffloadTicket&) = delete;
  // A ticket never completed fails: nothing changes, the hand-off ends.
  ~OffloadTicket() {
    if (pending()) Fail();
  }

  // Not yet completed (and not moved from).
  bool pending() const noexcept { return flights_ != nullptr; }
  // The offered objects: one singleton, or every member of a group the
  // census saw; versions()[i] is the version handles()[i] had when offered.
  std::span<const Handle> handles() const noexcept { return handles_; }
  std::span<const std::uint64_t> versions() const noexcept { return versions_; }
  // The candidate's bytes in the measure of the cycle that offered it.
  std::uint64_t bytes() const noexcept { return bytes_; }
  Directory& directory() const noexcept { return *dir_; }

  // "Keep": the objects stay. For each i in order, if handles()[i] is
  // still kActive, routed as itself, at versions()[i] and evictable, its
  // size and counted bytes become kept[i] (the quota moves by the
  // difference: a growth is charged and may be refused, a shrink is
  // refunded), its version moves, a kUpsert record (envelope, no payload
  // bytes) goes to the durable log, and fn(i, ObjectAccess&) runs under its
  // exclusive lock to install the demoted payload (the rules of a
  // WithObjectExclusive callback). Each object is kept or not on its own;
  // nothing is removed (V1 is untouched). kInvalidArgument, nothing
  // changed, if kept.size() != handles().size(). Ends the hand-off.
  // The record has no payload bytes: with a payload-logging
  // DurablePayloadCodec, use KeepWithPayloads, or a standby keeps the
  // payload from before the demotion.
  template <typename Fn>
  OffloadCompletion Keep(std::span<const KeptBytes> kept, Fn&& fn) {
    return KeepEach(kept.size() == handles_.size(), [&](std::size_t i) {
      auto install = [&fn, i](Access& access) { fn(i, access); };
      return DirectoryHooks::KeepIfUnchanged(*dir_, handles_[i], versions_[i],
                                             soft_pinned_, kept[i].size_bytes,
                                             kept[i].counted_bytes, install);
    });
  }
  // A singleton's Keep.
  template <typename Fn>
  OffloadCompletion Keep(KeptBytes kept, Fn&& fn) {
    return Keep(std::span<const KeptBytes>(&kept, 1),
                [&fn](std::size_t, Access& access) { fn(access); });
  }

  // Keep that installs demoted[i] as object i's payload and, with a
  // durable log whose DurablePayloadCodec logs payloads, logs its bytes in
  // the kUpsert record, so a standby or a recovery has the payload readers
  // see. demoted[i] is moved from only if object i is kept; a payload not
  // installed (the object changed) stays there for the host to clean up.
  // kInvalidArgument, nothing changed, if kept, demoted and handles()
  // differ in size. Ends the hand-off.
  OffloadCompletion KeepWithPayloads(std::span<const KeptBytes> kept,
                                     std::span<Payload> demoted) {
    const bool one_each =
        kept.size() == handles_.size() && demoted.size() == handles_.size();
    return KeepEach(one_each, [&](std::size_t i) {
      return DirectoryHooks::KeepWithPayloadIfUnchanged(
          *dir_, handles_[i], versions_[i], soft_pinned_, kept[i].size_bytes,
          kept[i].counted_bytes, demoted[i]);
    });
  }
  // A singleton's KeepWithPayloads.
  OffloadCompletion KeepWithPayload(KeptBytes kept, Payload& demoted) {
    return KeepWithPayloads(std::span<const KeptBytes>(&kept, 1),
                            std::span<Payload>(&demoted, 1));
  }

  // "Remove": evicts the candidate as an accepted synchronous hand-off does
  // (DirectoryHooks::EvictIfUnchanged: every member evictable now, the
  // quota released, kEvict logged), only if every offered object is still
  // at its offered version and a group has exactly the offered members; a
  // group is removed whole or not at all (V1). The Evictor's on_evicted
  // gets the removed objects, on this thread, with no lock held. Ends the
  // hand-off.
  OffloadCompletion Remove() {
    CAIRN_CHECK_MSG(pending(), "offload ticket already completed");
    OffloadCompletion done;
    const bool group = handles_.front()->group() != nullptr;
    std::vector<OfferedMember> offered;
    if (group) {
      offered.reserve(handles_.size());
      for (std::size_t i = 0; i < handles_.size(); ++i) {
        offered.push_back(OfferedMember{handles_[i].get(), versions_[i]});
      }
    }
    std::vector<EvictedObject<Payload>> out;
    Status log_error;
    const StatusCode code = DirectoryHooks::EvictIfUnchanged(
        *dir_, handles_.front(), versions_.front(), soft_pinned_, &out,
        group ? handles_.size() : 0, &log_error, offered);
    if (code == StatusCode::kOk) {
      done.applied = out.size();
      done.status = std::move(log_error);  // H5: evicted, not durable
      tenant_internal::OffloadFlights<Payload>& f = *flights_;
      f.evicted_objects.Add(out.size());
      if (group) f.evicted_groups.Add();
      std::uint64_t size = 0;
      std::uint64_t counted = 0;
      for (const EvictedObject<Payload>& x : out) {
        size += x.size_bytes;
        counted += x.counted_bytes;
      }
      f.evicted_size_bytes.Add(size);
      f.evicted_counted_bytes.Add(counted);
      if (f.on_evicted()) {
        f.on_evicted()(
            std::span<EvictedObject<Payload>>(out.data(), out.size()));
      }
      Finish(&f.removed);
      return done;
    }
    done.status = !log_error.ok() ? std::move(log_error) : Status(code);
    Finish(&flights_->not_applied);
    return done;
  }

  // Failure: nothing changes. Ends the hand-off.
  void Fail() {
    CAIRN_CHECK_MSG(pending(), "offload ticket already completed");
    Finish(&flights_->failed);
  }

 private:
  friend class Evictor<Payload, Route>;

  OffloadTicket(std::shared_ptr<tenant_internal::OffloadFlights<Payload>> f,
                Directory* dir, std::vector<Handle> handles,
                std::vector<std::uint64_t> versions,
                std::vector<const void*> entries, bool soft_pinned,
                std::uint64_t bytes)
      : flights_(std::move(f)),
        dir_(dir),
        handles_(std::move(handles)),
        versions_(std::move(versions)),
        entries_(std::move(entries)),
        soft_pinned_(soft_pinned),
        bytes_(bytes) {}

  // Keep's frame: keep(i) for each offered object, the first error
  // reported; kInvalidArgument, nothing kept, unless the caller gave one
  // of each argument per offered object (`one_each`). Ends the hand-off.
  template <typename KeepOne>
  OffloadCompletion KeepEach(bool one_each, KeepOne&& keep) {
    CAIRN_CHECK_MSG(pending(), "offload ticket already completed");
    OffloadCompletion done;
    if (!one_each) {
      done.status = InvalidArgumentError("one argument per offered object");
    } else {
      for (std::size_t i = 0; i < handles_.size(); ++i) {
        Status s = keep(i);
        if (s.ok()) {
          ++done.applied;
        } else if (done.status.ok()) {
          done.status = std::move(s);
        }
      }
    }
    Finish(done.status.ok() ? &flights_->kept : &flights_->not_applied);
    return done;
  }

  // Counts the outcome, ends the hand-off and empties the ticket.
  void Finish(Counter* outcome) {
    outcome->Add();
    std::shared_ptr<tenant_internal::OffloadFlights<Payload>> f =
        std::move(flights_);
    f->End(entries_);
  }

  std::shared_ptr<tenant_internal::OffloadFlights<Payload>> flights_;
  Directory* dir_ = nullptr;
  std::vector<Handle> handles_;
  std::vector<std::uint64_t> versions_;
  std::vector<const void*> entries_;  // handles_[i].get(), for the flights
  bool soft_pinned_ = false;
  std::uint64_t bytes_ = 0;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_TENANT_OFFLOAD_H_
