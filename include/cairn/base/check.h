// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// CAIRN_CHECK aborts on a programmer error in every build; CAIRN_DCHECK only in
// debug builds. Neither is for host input: bad input gets a Status.

#ifndef CAIRN_BASE_CHECK_H_
#define CAIRN_BASE_CHECK_H_

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN
namespace base_internal {

[[noreturn]] void CheckFailed(const char* file, int line, const char* condition,
                              const char* message) noexcept;

}  // namespace base_internal
CAIRN_NAMESPACE_END

#define CAIRN_CHECK_MSG(condition, message)                               \
  do {                                                                    \
    if (__builtin_expect(!(condition), 0)) {                              \
      ::cairn::base_internal::CheckFailed(__FILE__, __LINE__, #condition, \
                                          (message));                     \
    }                                                                     \
  } while (false)

#define CAIRN_CHECK(condition) CAIRN_CHECK_MSG(condition, nullptr)

#ifdef NDEBUG
#define CAIRN_DCHECK(condition) \
  do {                          \
    if (false && (condition)) { \
    }                           \
  } while (false)
#else
#define CAIRN_DCHECK(condition) CAIRN_CHECK(condition)
#endif

#endif  // CAIRN_BASE_CHECK_H_
