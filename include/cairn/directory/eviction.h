// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Forwarding header (cairn-forwarding-header), kept until cairn 0.2: eviction.h
// moved to the tenant component. Include "cairn/tenant/eviction.h" instead
// (CHANGELOG.md).

#ifndef CAIRN_DIRECTORY_EVICTION_FORWARD_H_
#define CAIRN_DIRECTORY_EVICTION_FORWARD_H_

#include "cairn/tenant/eviction.h"

#endif  // CAIRN_DIRECTORY_EVICTION_FORWARD_H_
