// Copyright 2026 The cairn Authors.

#include "cairn/base/version.h"

CAIRN_NAMESPACE_BEGIN

Version LinkedVersion() noexcept { return kVersion; }

CAIRN_NAMESPACE_END
