// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Handles and callback-scoped access objects.
//
// ObjectHandle: a strong owner of one ObjectEntry instance (D2). For a
// singleton it is a plain owner; for a member it is an aliasing owner whose
// control block is the group's, so it keeps the whole GroupEntry alive (D7).
// A handle keeps memory alive, not validity: work done later must go back
// through the directory (WithHandle / WithToken), which revalidates lifecycle
// and identity under the object lock.
//
// GroupHandle: a strong owner of a GroupEntry, reached from a member handle
// in O(1) (same control block; no hash, no lock).
//
// ObjectView / ObjectAccess: what a GroupDirectory callback receives while
// the object's lock is held, shared or exclusive. Neither can be copied or
// moved, so the lock scope cannot be smuggled out of the callback (D1).
// ObjectView (shared lock) reads the envelope and the payload and may grant a
// lease: an atomic max that never moves it earlier (P1), the group's lease for
// a member (P2). ObjectAccess (exclusive lock) also changes the envelope and
// the payload; every envelope change bumps the version.
//
// Thread safety: handles are values (copy = shared_ptr copy: one atomic
// increment on the control block). Access objects exist only inside a
// callback on the calling thread.

#ifndef CAIRN_DIRECTORY_HANDLES_H_
#define CAIRN_DIRECTORY_HANDLES_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "cairn/base/clock.h"
#include "cairn/base/thread_annotations.h"
#include "cairn/base/version.h"
#include "cairn/directory/group_entry.h"
#include "cairn/directory/object_entry.h"

CAIRN_NAMESPACE_BEGIN

namespace directory_internal {

// What every handle shares: a strong owner of one entry (`Entry` is
// GroupEntry<Payload> or ObjectEntry<Payload>).
template <typename Entry>
class EntryHandle {
 public:
  EntryHandle() = default;
  explicit EntryHandle(std::shared_ptr<Entry> owner) noexcept
      : owner_(std::move(owner)) {}

  Entry* get() const noexcept { return owner_.get(); }
  Entry* operator->() const noexcept { return owner_.get(); }
  Entry& operator*() const noexcept { return *owner_; }
  explicit operator bool() const noexcept { return owner_ != nullptr; }
  // The owner itself (the route stores these).
  const std::shared_ptr<Entry>& owner() const noexcept { return owner_; }

 private:
  std::shared_ptr<Entry> owner_;
};

}  // namespace directory_internal

template <typename Payload = EmptyPayload>
class GroupHandle
    : public directory_internal::EntryHandle<GroupEntry<Payload>> {
 public:
  using directory_internal::EntryHandle<GroupEntry<Payload>>::EntryHandle;

  bool is_current() const noexcept {
    return this->get() != nullptr && this->get()->is_current();
  }
};

template <typename Payload = EmptyPayload>
class ObjectHandle
    : public directory_internal::EntryHandle<ObjectEntry<Payload>> {
 public:
  using directory_internal::EntryHandle<ObjectEntry<Payload>>::EntryHandle;

  ObjectToken token() const noexcept {
    return this->get() == nullptr ? ObjectToken{} : this->get()->token();
  }
  // A hint outside a callback (D2).
  bool is_current() const noexcept {
    return this->get() != nullptr &&
           this->get()->lifecycle_hint() == Lifecycle::kActive;
  }
  // The member's group in O(1) through the same control block; empty for a
  // singleton or an empty handle. No lock, no hash; one refcount increment.
  GroupHandle<Payload> group() const noexcept {
    ObjectEntry<Payload>* entry = this->get();
    if (entry == nullptr || entry->group() == nullptr) return {};
    return GroupHandle<Payload>(
        std::shared_ptr<GroupEntry<Payload>>(this->owner(), entry->group()));
  }
};

// Shared (read) access: the object's lock is held shared for this object's
// whole life.
template <typename Payload = EmptyPayload>
class ObjectView {
 public:
  ObjectView(const ObjectView&) = delete;
  ObjectView& operator=(const ObjectView&) = delete;
  ObjectView(ObjectView&&) = delete;
  ObjectView& operator=(ObjectView&&) = delete;

  ObjectId id() const noexcept { return entry_.id(); }
  std::string_view key() const noexcept { return entry_.key(); }
  ObjectToken token() const noexcept { return entry_.token(); }
  bool is_singleton() const noexcept { return entry_.is_singleton(); }
  GroupId group_id() const noexcept {
    return entry_.group() == nullptr ? kNoGroup : entry_.group()->id();
  }
  // Always kActive inside a callback (D1); kept for completeness.
  Lifecycle lifecycle() const noexcept {
    return entry_.lifecycle_.load(std::memory_order_relaxed);
  }

  std::uint64_t size_bytes() const {
    entry_.mu_.AssertReaderHeld();  // held for the view's whole life
    return entry_.size_bytes_;
  }
  std::uint64_t counted_bytes() const noexcept {
    return entry_.counted_bytes();
  }
  std::uint64_t retained_bytes() const noexcept {
    return entry_.retained_bytes();
  }
  bool hard_pinned() const noexcept { return entry_.hard_pinned(); }
  std::uint64_t version() const noexcept {
    return entry_.version_.load(std::memory_order_relaxed);
  }
  std::uint32_t tasks() const {
    entry_.mu_.AssertReaderHeld();  // held for the view's whole life
    return entry_.tasks_;
  }
  std::int64_t soft_pin_deadline_nanos() const {
    entry_.mu_.AssertReaderHeld();  // held for the view's whole life
    return entry_.soft_pin_deadline_;
  }
  // Effective lease: the group's shared lease for a member (P2).
  std::int64_t lease_deadline_nanos() const noexcept {
    return LeaseCell().load(std::memory_order_relaxed);
  }
  bool lease_expired() const noexcept {
    return lease_deadline_nanos() <= clock_->NowNanos();
  }
  bool soft_pinned() const {
    entry_.mu_.AssertReaderHeld();  // held for the view's whole life
    return entry_.soft_pin_deadline_ > clock_->NowNanos();
  }
  ObjectMetadata metadata() const {
    ObjectMetadata m;
    m.size_bytes = size_bytes();
    m.lease_deadline_nanos = lease_deadline_nanos();
    m.soft_pin_deadline_nanos = soft_pin_deadline_nanos();
    m.hard_pinned = hard_pinned();
    m.version = version();
    m.tasks = tasks();
    m.counted_bytes = counted_bytes();
    return m;
  }

  const Payload& payload() const {
    entry_.mu_.AssertReaderHeld();  // held for the view's whole life
    return entry_.payload_;
  }

  // A lease never moves earlier (P1): deadline = max(current, now + ttl); for a
  // member the group's single lease moves (P2). Never touches the soft pin
  // (P3). Returns the effective deadline. An atomic max on this object's (or
  // its group's) line: no other shared write.
  std::int64_t GrantLease(std::chrono::nanoseconds ttl) const noexcept {
    const std::int64_t target = clock_->NowNanos() + ttl.count();
    std::atomic<std::int64_t>& cell = LeaseCell();
    if (directory_internal::AtomicMax(cell, target)) {
      entry_.version_.fetch_add(1, std::memory_order_relaxed);
    }
    return cell.load(std::memory_order_relaxed);
  }

 protected:
  ObjectView(ObjectEntry<Payload>& entry, const Clock* clock) noexcept
      : entry_(entry), clock_(clock) {}

  void BumpVersion() const noexcept {
    entry_.version_.fetch_add(1, std::memory_order_relaxed);
  }
  std::atomic<std::int64_t>& LeaseCell() const noexcept {
    return entry_.group() == nullptr ? entry_.lease_deadline_
                                     : entry_.group()->lease_deadline_;
  }

  ObjectEntry<Payload>& entry_;
  const Clock* const clock_;

 private:
  template <typename P, template <typename> class R>
  friend class GroupDirectory;
};

// Exclusive (write) access: the object's lock is held exclusively.
template <typename Payload = EmptyPayload>
class ObjectAccess : public ObjectView<Payload> {
 public:
  using ObjectView<Payload>::payload;

  Payload& payload() {
    this->entry_.mu_.AssertHeld();  // held for the access's whole life
    return this->entry_.payload_;
  }
  void set_size_bytes(std::uint64_t bytes) {
    this->entry_.mu_.AssertHeld();  // held for the access's whole life
    this->entry_.size_bytes_ = bytes;
    this->BumpVersion();
  }
  // Soft pin deadline on the injected clock's time line; 0 clears it. Only
  // this call moves a soft pin (P3).
  void set_soft_pin_deadline_nanos(std::int64_t deadline) {
    this->entry_.mu_.AssertHeld();  // held for the access's whole life
    this->entry_.soft_pin_deadline_ = deadline;
    this->BumpVersion();
  }
  void set_task(TaskFlag task) {
    this->entry_.mu_.AssertHeld();  // held for the access's whole life
    this->entry_.tasks_ |= task;
    this->BumpVersion();
  }
  void clear_task(TaskFlag task) {
    this->entry_.mu_.AssertHeld();  // held for the access's whole life
    this->entry_.tasks_ &= ~static_cast<std::uint32_t>(task);
    this->BumpVersion();
  }

 private:
  template <typename P, template <typename> class R>
  friend class GroupDirectory;

  ObjectAccess(ObjectEntry<Payload>& entry, const Clock* clock) noexcept
      : ObjectView<Payload>(entry, clock) {}
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_DIRECTORY_HANDLES_H_
