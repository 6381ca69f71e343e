// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Test-only access to GroupDirectory internals, for tests and benchmarks
// (never for hosts). The directory declares this class its friend; nothing
// in the library uses it.

#ifndef CAIRN_TESTS_TESTING_DIRECTORY_PEER_H_
#define CAIRN_TESTS_TESTING_DIRECTORY_PEER_H_

#include "cairn/directory/group_directory.h"

namespace cairn::directory_internal {

class GroupDirectoryTestPeer {
 public:
  // The directory's route: bucket placement, its epoch domain (Barrier),
  // and the fault switches of a test route.
  template <typename Payload, template <typename> class Route>
  static Route<ObjectEntry<Payload>>& route(
      GroupDirectory<Payload, Route>& dir) noexcept {
    return dir.route_;
  }

  // Whether the directory has made its lifecycle stripe array yet (it does
  // at its first create or erase, never at construction).
  template <typename Payload, template <typename> class Route>
  static bool lifecycle_stripes_allocated(
      const GroupDirectory<Payload, Route>& dir) noexcept {
    return dir.stripes_.IfMade() != nullptr;
  }
};

}  // namespace cairn::directory_internal

#endif  // CAIRN_TESTS_TESTING_DIRECTORY_PEER_H_
