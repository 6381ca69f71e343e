// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

Version LinkedVersion() noexcept { return kVersion; }

CAIRN_NAMESPACE_END
