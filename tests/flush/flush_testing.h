// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Shared by the flush tests: the scratch directory and whole-file helpers
// every file test uses.

#ifndef CAIRN_TESTS_FLUSH_FLUSH_TESTING_H_
#define CAIRN_TESTS_FLUSH_FLUSH_TESTING_H_

#include "testing/scratch_dir.h"

#endif  // CAIRN_TESTS_FLUSH_FLUSH_TESTING_H_
