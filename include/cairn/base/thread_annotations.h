// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Clang thread-safety analysis attributes (-Wthread-safety). They expand to
// nothing on other compilers. The `tsa` preset turns the analysis on for
// cairn's own targets.

#ifndef CAIRN_BASE_THREAD_ANNOTATIONS_H_
#define CAIRN_BASE_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define CAIRN_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define CAIRN_THREAD_ANNOTATION_(x)
#endif

#define CAIRN_CAPABILITY(x) CAIRN_THREAD_ANNOTATION_(capability(x))
#define CAIRN_SCOPED_CAPABILITY CAIRN_THREAD_ANNOTATION_(scoped_lockable)
#define CAIRN_GUARDED_BY(x) CAIRN_THREAD_ANNOTATION_(guarded_by(x))
#define CAIRN_PT_GUARDED_BY(x) CAIRN_THREAD_ANNOTATION_(pt_guarded_by(x))
#define CAIRN_ACQUIRED_BEFORE(...) \
  CAIRN_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#define CAIRN_ACQUIRED_AFTER(...) \
  CAIRN_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#define CAIRN_REQUIRES(...) \
  CAIRN_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define CAIRN_REQUIRES_SHARED(...) \
  CAIRN_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
#define CAIRN_ACQUIRE(...) \
  CAIRN_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define CAIRN_ACQUIRE_SHARED(...) \
  CAIRN_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#define CAIRN_RELEASE(...) \
  CAIRN_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define CAIRN_RELEASE_SHARED(...) \
  CAIRN_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
#define CAIRN_RELEASE_GENERIC(...) \
  CAIRN_THREAD_ANNOTATION_(release_generic_capability(__VA_ARGS__))
#define CAIRN_TRY_ACQUIRE(...) \
  CAIRN_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#define CAIRN_TRY_ACQUIRE_SHARED(...) \
  CAIRN_THREAD_ANNOTATION_(try_acquire_shared_capability(__VA_ARGS__))
#define CAIRN_EXCLUDES(...) \
  CAIRN_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#define CAIRN_ASSERT_CAPABILITY(x) \
  CAIRN_THREAD_ANNOTATION_(assert_capability(x))
#define CAIRN_ASSERT_SHARED_CAPABILITY(x) \
  CAIRN_THREAD_ANNOTATION_(assert_shared_capability(x))
#define CAIRN_RETURN_CAPABILITY(x) CAIRN_THREAD_ANNOTATION_(lock_returned(x))
#define CAIRN_NO_THREAD_SAFETY_ANALYSIS \
  CAIRN_THREAD_ANNOTATION_(no_thread_safety_analysis)

#endif  // CAIRN_BASE_THREAD_ANNOTATIONS_H_
