// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Version of the cairn library and the inline ABI namespace that carries it.
// Every public symbol lives in cairn::CAIRN_ABI_NAMESPACE, so two cairn builds
// of different versions linked into one host cannot silently mix layouts.

#ifndef CAIRN_BASE_VERSION_H_
#define CAIRN_BASE_VERSION_H_

#define CAIRN_VERSION_MAJOR 0
#define CAIRN_VERSION_MINOR 1
#define CAIRN_VERSION_PATCH 0

#define CAIRN_ABI_NAMESPACE v0_1

#define CAIRN_NAMESPACE_BEGIN \
  namespace cairn {           \
  inline namespace CAIRN_ABI_NAMESPACE {
#define CAIRN_NAMESPACE_END \
  }                         \
  }

CAIRN_NAMESPACE_BEGIN

struct Version {
  int major;
  int minor;
  int patch;
};

inline constexpr Version kVersion{CAIRN_VERSION_MAJOR, CAIRN_VERSION_MINOR,
                                  CAIRN_VERSION_PATCH};

// The version the compiled part of the library was built with; a host can
// compare it with kVersion to detect a header/library mismatch.
Version LinkedVersion() noexcept;

CAIRN_NAMESPACE_END

#endif  // CAIRN_BASE_VERSION_H_
