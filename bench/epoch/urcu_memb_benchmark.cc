// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Peer: liburcu's memb flavour read side (membarrier-based, like cairn's
// asymmetric mode). Its own translation unit: urcu flavours must not share one.

#define _LGPL_SOURCE 1
#include <urcu/urcu-memb.h>

#include <benchmark/benchmark.h>

namespace {

void BM_EpochGuard_urcu_memb(benchmark::State& state) {
  urcu_memb_register_thread();
  for (auto _ : state) {
    urcu_memb_read_lock();
    benchmark::ClobberMemory();
    urcu_memb_read_unlock();
  }
  urcu_memb_unregister_thread();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EpochGuard_urcu_memb)
    ->Name("BM_EpochGuard/urcu_memb")
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

}  // namespace
