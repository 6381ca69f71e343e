// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Peer: liburcu's QSBR flavour read side (near free; the cost moves to
// explicit quiescent-state announcements, here one per 1024 reads).

#define _LGPL_SOURCE 1
#include <urcu/urcu-qsbr.h>

#include <benchmark/benchmark.h>

namespace {

void BM_EpochGuard_urcu_qsbr(benchmark::State& state) {
  urcu_qsbr_register_thread();
  unsigned n = 0;
  for (auto _ : state) {
    urcu_qsbr_read_lock();
    benchmark::ClobberMemory();
    urcu_qsbr_read_unlock();
    if ((++n & 1023) == 0) urcu_qsbr_quiescent_state();
  }
  urcu_qsbr_unregister_thread();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EpochGuard_urcu_qsbr)
    ->Name("BM_EpochGuard/urcu_qsbr")
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

}  // namespace
