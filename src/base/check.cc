// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/base/check.h"

#include <cstdio>
#include <cstdlib>

CAIRN_NAMESPACE_BEGIN
namespace base_internal {

void CheckFailed(const char* file, int line, const char* condition,
                 const char* message) noexcept {
  std::fprintf(stderr, "%s:%d: CAIRN_CHECK failed: %s%s%s\n", file, line,
               condition, message != nullptr ? ": " : "",
               message != nullptr ? message : "");
  std::fflush(stderr);
  std::abort();
}

}  // namespace base_internal
CAIRN_NAMESPACE_END
