// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Bench baseline `owning`: the locked reference route. It is the test
// oracle itself (tests/testing/locked_route.h), so the baseline the benches
// measure is the one the tests check; the bench's include path has tests/.

#ifndef CAIRN_BENCH_BASELINES_LOCKED_ROUTE_H_
#define CAIRN_BENCH_BASELINES_LOCKED_ROUTE_H_

#include "testing/locked_route.h"

#endif  // CAIRN_BENCH_BASELINES_LOCKED_ROUTE_H_
