// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// GroupEntry: an explicit group. It owns the storage of every member it ever
// had (ObjectEntry addresses stay stable for the group's lifetime), keeps its
// live membership as numeric ObjectIds, one shared group lease (P2), and a
// lifecycle (kActive -> kRemoving). A member's route owner is an aliasing
// shared_ptr whose control block is the group's, so any member handle keeps
// the whole group, and every member's memory, alive (D7).
//
// Membership is fixed for an object's lifetime. When the last member leaves,
// the group is torn down and leaves the catalog; a later join under the same
// name starts a fresh group with a fresh lease. Memory of departed members is
// released with the group, so a group that lives forever while members churn
// grows by one entry per departed member (a known cost of the aliasing
// design; see docs/directory.md).
//
// Thread safety: id(), name(), is_current() and lease_deadline_nanos() are
// safe from any thread without a lock. MemberIds() and member_count() take the
// group lock and may block behind a group transaction (create-join,
// erase-object of a member, erase-group); never call them inside a
// GroupDirectory callback. The group lock itself is private to the directory.

#ifndef CAIRN_DIRECTORY_GROUP_ENTRY_H_
#define CAIRN_DIRECTORY_GROUP_ENTRY_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/base/mutex.h"
#include "cairn/base/thread_annotations.h"
#include "cairn/base/version.h"
#include "cairn/directory/object_entry.h"

CAIRN_NAMESPACE_BEGIN

template <typename Payload = EmptyPayload>
class GroupEntry {
 public:
  GroupEntry(GroupId id, std::string name) : id_(id), name_(std::move(name)) {}
  GroupEntry(const GroupEntry&) = delete;
  GroupEntry& operator=(const GroupEntry&) = delete;

  GroupId id() const noexcept { return id_; }
  std::string_view name() const noexcept { return name_; }
  // False once the group was torn down (last member left, or erase-group).
  bool is_current() const noexcept {
    return lifecycle_.load(std::memory_order_acquire) == Lifecycle::kActive;
  }
  // The single shared lease of all members; 0 if never leased.
  std::int64_t lease_deadline_nanos() const noexcept {
    return lease_deadline_.load(std::memory_order_relaxed);
  }

  // Live members' ids in ascending key order. Locks the group; allocates.
  std::vector<ObjectId> MemberIds() const {
    MutexLock lock(&mu_);
    std::vector<ObjectId> ids;
    ids.reserve(live_.size());
    for (const Member& m : MembersByKey()) ids.push_back(m.id);
    return ids;
  }
  std::size_t member_count() const {
    MutexLock lock(&mu_);
    return live_.size();
  }

 private:
  template <typename P, template <typename> class R>
  friend class GroupDirectory;
  friend class ObjectView<Payload>;

  ObjectEntry<Payload>* AddMember(directory_internal::EntryInit init,
                                  Payload payload) CAIRN_REQUIRES(mu_) {
    entries_.push_back(std::make_unique<ObjectEntry<Payload>>(
        std::move(init), this, std::move(payload)));
    ObjectEntry<Payload>* e = entries_.back().get();
    if (!live_.empty() && e->key() < live_.back().entry->key()) {
      live_sorted_ = false;
    }
    live_.push_back(Member{e->id(), e});
    return e;
  }
  // The live members in ascending key order, the order a group transaction
  // locks them in (L2). Joins append; the first caller after a join out of
  // key order sorts the list, so members that join in key order are never
  // sorted, and a group of n restored in any order is sorted once (not n
  // inserts into the middle).
  struct Member;
  const std::vector<Member>& MembersByKey() const CAIRN_REQUIRES(mu_) {
    if (!live_sorted_) {
      std::sort(live_.begin(), live_.end(),
                [](const Member& a, const Member& b) {
                  return a.entry->key() < b.entry->key();
                });
      live_sorted_ = true;
    }
    return live_;
  }
  void RemoveMember(const ObjectEntry<Payload>* e) CAIRN_REQUIRES(mu_) {
    auto it = std::find_if(live_.begin(), live_.end(),
                           [e](const Member& m) { return m.id == e->id(); });
    if (it != live_.end()) live_.erase(it);
  }
  void SetLifecycle(Lifecycle next) CAIRN_REQUIRES(mu_) {
    lifecycle_.store(next, std::memory_order_release);
  }
  bool active_locked() const CAIRN_REQUIRES(mu_) {
    return lifecycle_.load(std::memory_order_relaxed) == Lifecycle::kActive;
  }

  const GroupId id_;
  const std::string name_;
  // Group lock: membership, lifecycle, the group transaction. Taken before
  // any member's object lock; members then in ascending key order.
  mutable Mutex mu_;
  std::atomic<Lifecycle> lifecycle_{Lifecycle::kActive};
  std::atomic<std::int64_t> lease_deadline_{0};
  // Set with kRemoving by erase-group: joins then fail instead of retrying.
  bool explicit_teardown_ CAIRN_GUARDED_BY(mu_) = false;
  // Every member ever joined; owns their storage until the group dies.
  std::vector<std::unique_ptr<ObjectEntry<Payload>>> entries_
      CAIRN_GUARDED_BY(mu_);
  // Live members with their numeric ObjectId (no second string map);
  // `entry` saves the id -> entry search when the group transaction locks
  // its members. In join order until MembersByKey() sorts them (mutable:
  // the order is a cache; the set changes only under the lock, by joins
  // and departures).
  struct Member {
    ObjectId id;
    ObjectEntry<Payload>* entry;
  };
  mutable std::vector<Member> live_ CAIRN_GUARDED_BY(mu_);
  mutable bool live_sorted_ CAIRN_GUARDED_BY(mu_) = true;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_DIRECTORY_GROUP_ENTRY_H_
