// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// RemoveAllObjects: removes every object of one tenant's directory, with or
// without force (docs/tenants.md, "Removing a tenant's objects"), through the
// directory's own erase paths, so every removal is logged (H1) and releases
// its quota charge (Q2) as a single erase would. TenantRegistry::RemoveAll
// calls it for a tenant by name.
//
// Without force an object is kept, and reported with the reason, when its
// lease has not expired (P4), it is hard- or soft-pinned, it has a task in
// flight, it has a staged upsert, or it is a pending put; a group is kept
// whole when one member is (the erase-group transaction decides under the
// member locks). With force everything goes: leased, pinned and busy
// objects and staged upserts are erased, pending puts aborted.
//
// Thread safety: safe from any thread, concurrently with every directory
// call. The walk is VisitHandlesWithPending (D9): objects present for the
// whole call are removed or reported exactly once; objects created during
// the call may or may not be. Each removal takes the locks of the erase it
// runs (Erase, EraseGroup, Abort); no lock is held between them. Not for use
// inside a directory callback.

#ifndef CAIRN_TENANT_REMOVE_ALL_H_
#define CAIRN_TENANT_REMOVE_ALL_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/directory/group_directory.h"

CAIRN_NAMESPACE_BEGIN

struct RemoveAllOptions {
  // Also remove leased, pinned and busy objects, staged upserts (the object
  // goes with them) and pending puts (aborted).
  bool force = false;
};

// An object (or a whole group) RemoveAll kept.
struct KeptObject {
  std::string key;    // the object's key; empty for a group
  std::string group;  // the group's name; empty for a singleton
  Status reason;      // kFailedPrecondition, its message says why
};

struct RemoveAllResult {
  // OK, or the error that stopped the call (the durable log refused a
  // record, the route stayed busy, the directory shut down); the counts
  // then say what was removed before it.
  Status status;
  // Singletons erased, plus the members of erased groups as each group held
  // them just before its erase (a member joining or leaving a group at that
  // moment may be counted or not).
  std::uint64_t removed_objects = 0;
  std::uint64_t removed_groups = 0;
  // Pending puts aborted (force only); not in removed_objects.
  std::uint64_t aborted_puts = 0;
  // What was kept (never with force): one entry per singleton or group.
  std::vector<KeptObject> kept;
};

// Removes every object of `dir` as described above. Allocates the walk's
// chunks and the report.
template <typename Directory>
RemoveAllResult RemoveAllObjects(Directory& dir,
                                 const RemoveAllOptions& options = {}) {
  using Handle = typename Directory::Handle;
  RemoveAllResult result;
  EraseOptions erase;
  erase.force = options.force;
  erase.only_if_idle = !options.force;
  std::unordered_set<GroupId> groups_seen;
  // One step per visited handle; false stops the walk.
  auto step = [&](const Handle& h) -> bool {
    const Lifecycle lc = h->lifecycle_hint();
    if (lc == Lifecycle::kRemoving) return true;
    if (h->group() != nullptr) {
      const GroupHandle<typename Directory::PayloadType> g = h.group();
      if (!groups_seen.insert(g->id()).second || !g->is_current()) return true;
      const std::size_t members = g->member_count();
      const Status s = dir.EraseGroup(g->name(), erase);
      if (s.ok()) {
        ++result.removed_groups;
        result.removed_objects += members;
      } else if (s.code() == StatusCode::kFailedPrecondition) {
        result.kept.push_back({std::string(), std::string(g->name()), s});
      } else if (s.code() != StatusCode::kNotFound) {
        result.status = s;
        return false;
      }
      return true;
    }
    if (lc == Lifecycle::kCreating) {
      if (!options.force) {
        result.kept.push_back({std::string(h->key()), std::string(),
                               FailedPreconditionError("object is a pending "
                                                       "put")});
        return true;
      }
      const Status s = dir.Abort(h->key(), h.token());
      if (s.ok()) {
        ++result.aborted_puts;
        return true;
      }
      if (s.code() == StatusCode::kNotFound) return true;
      if (s.code() != StatusCode::kFailedPrecondition) {
        result.status = s;
        return false;
      }
      // Committed meanwhile: erased below as an active object.
    }
    const Status s = dir.EraseIfMatch(h->key(), h->id(), h.get(), erase);
    if (s.ok()) {
      ++result.removed_objects;
    } else if (s.code() == StatusCode::kFailedPrecondition) {
      result.kept.push_back({std::string(h->key()), std::string(), s});
    } else if (s.code() != StatusCode::kNotFound) {
      result.status = s;
      return false;
    }
    return true;
  };
  const Status visited =
      dir.VisitHandlesWithPending([&](std::span<const Handle> handles) {
        for (const Handle& h : handles) {
          if (!result.status.ok() || !step(h)) return;
        }
      });
  if (result.status.ok() && !visited.ok()) result.status = visited;
  return result;
}

CAIRN_NAMESPACE_END

#endif  // CAIRN_TENANT_REMOVE_ALL_H_
