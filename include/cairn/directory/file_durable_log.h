// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Forwarding header (cairn-forwarding-header), kept until cairn 0.2:
// file_durable_log.h moved to the ha component. Include
// "cairn/ha/file_durable_log.h" instead (CHANGELOG.md).

#ifndef CAIRN_DIRECTORY_FILE_DURABLE_LOG_FORWARD_H_
#define CAIRN_DIRECTORY_FILE_DURABLE_LOG_FORWARD_H_

#include "cairn/ha/file_durable_log.h"

#endif  // CAIRN_DIRECTORY_FILE_DURABLE_LOG_FORWARD_H_
