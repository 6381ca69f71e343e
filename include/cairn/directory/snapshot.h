// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Forwarding header (cairn-forwarding-header), kept until cairn 0.2: snapshot.h
// moved to the ha component. Include "cairn/ha/snapshot.h" instead
// (CHANGELOG.md).

#ifndef CAIRN_DIRECTORY_SNAPSHOT_FORWARD_H_
#define CAIRN_DIRECTORY_SNAPSHOT_FORWARD_H_

#include "cairn/ha/snapshot.h"

#endif  // CAIRN_DIRECTORY_SNAPSHOT_FORWARD_H_
