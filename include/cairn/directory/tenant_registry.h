// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Forwarding header (cairn-forwarding-header), kept until cairn 0.2:
// tenant_registry.h moved to the tenant component. Include
// "cairn/tenant/tenant_registry.h" instead (CHANGELOG.md).

#ifndef CAIRN_DIRECTORY_TENANT_REGISTRY_FORWARD_H_
#define CAIRN_DIRECTORY_TENANT_REGISTRY_FORWARD_H_

#include "cairn/tenant/tenant_registry.h"

#endif  // CAIRN_DIRECTORY_TENANT_REGISTRY_FORWARD_H_
