// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// EpochDomain costs: guard enter+leave (both read-side modes, 1 and 2
// threads, nested), retire+reclaim, grace-period latency, and W9 (a stalled
// reader while a writer retires at a fixed rate). The urcu peers live in
// urcu_*_benchmark.cc in the same binary so the runner interleaves them.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "cairn/epoch/epoch_domain.h"

namespace cairn {
namespace {

EpochOptions Options(const char* name, ReadSideMode mode) {
  EpochOptions options;
  options.name = name;
  options.read_side_mode = mode;
  return options;
}

EpochDomain& SharedDomain(ReadSideMode mode) {
  // Leaked on purpose: benchmark threads register against it in any order.
  static EpochDomain* seq_cst =
      new EpochDomain(Options("bench", ReadSideMode::kSeqCst));
  static EpochDomain* asymmetric =
      new EpochDomain(Options("bench-asym", ReadSideMode::kAsymmetric));
  return mode == ReadSideMode::kSeqCst ? *seq_cst : *asymmetric;
}

template <ReadSideMode kMode>
void BM_EpochGuard(benchmark::State& state) {
  Participant p = std::move(SharedDomain(kMode).RegisterParticipant()).value();
  for (auto _ : state) {
    Guard g = p.Enter();
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EpochGuard<ReadSideMode::kSeqCst>)
    ->Name("BM_EpochGuard/cairn_seq_cst")
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_EpochGuard<ReadSideMode::kAsymmetric>)
    ->Name("BM_EpochGuard/cairn_asymmetric")
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

// The same through the implicit per-thread participant (the route's path).
template <ReadSideMode kMode>
void BM_EpochThreadGuard(benchmark::State& state) {
  EpochDomain& domain = SharedDomain(kMode);
  for (auto _ : state) {
    Guard g = domain.EnterOnThisThread();
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EpochThreadGuard<ReadSideMode::kSeqCst>)
    ->Name("BM_EpochThreadGuard/cairn_seq_cst")
    ->UseRealTime();
BENCHMARK(BM_EpochThreadGuard<ReadSideMode::kAsymmetric>)
    ->Name("BM_EpochThreadGuard/cairn_asymmetric")
    ->UseRealTime();

template <ReadSideMode kMode>
void BM_EpochGuardNested(benchmark::State& state) {
  Participant p = std::move(SharedDomain(kMode).RegisterParticipant()).value();
  Guard outer = p.Enter();
  for (auto _ : state) {
    Guard inner = p.Enter();
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EpochGuardNested<ReadSideMode::kSeqCst>)
    ->Name("BM_EpochGuardNested/cairn_seq_cst")
    ->UseRealTime();
BENCHMARK(BM_EpochGuardNested<ReadSideMode::kAsymmetric>)
    ->Name("BM_EpochGuardNested/cairn_asymmetric")
    ->UseRealTime();

struct Node {
  char bytes[64];
};

// Retire one 64-byte node per iteration; the domain reclaims every 64
// retirements, so the figure includes the amortised advance and free.
template <ReadSideMode kMode>
void BM_EpochRetireReclaim(benchmark::State& state) {
  EpochDomain domain(Options("retire", kMode));
  Participant reader = std::move(domain.RegisterParticipant()).value();
  for (auto _ : state) {
    if (!domain.Retire(new Node).ok()) state.SkipWithError("retire refused");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EpochRetireReclaim<ReadSideMode::kSeqCst>)
    ->Name("BM_EpochRetireReclaim/cairn_seq_cst")
    ->UseRealTime();
BENCHMARK(BM_EpochRetireReclaim<ReadSideMode::kAsymmetric>)
    ->Name("BM_EpochRetireReclaim/cairn_asymmetric")
    ->UseRealTime();

// Retire throughput as a host calls it: every benchmark thread retires one
// 64-byte node per iteration into one shared kSeqCst domain (default
// reclaim_every, so the figure includes the amortised advance and free).
// items_per_second is the total over all threads; the gate
// epoch.retire.scaling_2t compares 2 threads with 1.
EpochDomain& SharedRetireDomain() {
  // Leaked on purpose: benchmark threads retire into it in any order.
  static EpochDomain* domain =
      new EpochDomain(Options("retire-mt", ReadSideMode::kSeqCst));
  return *domain;
}

// glibc's malloc skips its atomic instructions (fastbin CAS, arena lock)
// while the process has never started a thread, and the benchmark runs its
// 1-thread case on the main thread, first: that baseline would allocate
// and free each node more cheaply than any multi-threaded host can, and the
// scaling gates would measure glibc's single-thread mode. One thread
// started and joined before the first case puts glibc in the mode every
// host that shares a domain between threads runs in (docs/epoch.md,
// "Measured costs").
void LeaveSingleThreadedMalloc() {
  static const bool once = [] {
    std::thread([] {}).join();
    return true;
  }();
  (void)once;
}

void BM_EpochRetireThreads(benchmark::State& state) {
  LeaveSingleThreadedMalloc();
  EpochDomain& domain = SharedRetireDomain();
  for (auto _ : state) {
    if (!domain.Retire(new Node).ok()) state.SkipWithError("retire refused");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EpochRetireThreads)
    ->Name("BM_EpochRetire/cairn_seq_cst")
    ->Threads(1)
    ->Threads(2)
    ->Threads(8)
    ->UseRealTime();

// Grace-period latency: Barrier() for one node with 8 registered, idle
// participants (two epoch advances and one free).
template <ReadSideMode kMode>
void BM_EpochGracePeriod(benchmark::State& state) {
  EpochDomain domain(Options("grace", kMode));
  std::vector<Participant> idle;
  for (int i = 0; i < 8; ++i)
    idle.push_back(std::move(domain.RegisterParticipant()).value());
  for (auto _ : state) {
    if (!domain.Retire(new Node).ok() || !domain.Barrier().ok()) {
      state.SkipWithError("barrier failed");
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EpochGracePeriod<ReadSideMode::kSeqCst>)
    ->Name("BM_EpochGracePeriod/cairn_seq_cst")
    ->UseRealTime();
BENCHMARK(BM_EpochGracePeriod<ReadSideMode::kAsymmetric>)
    ->Name("BM_EpochGracePeriod/cairn_asymmetric")
    ->UseRealTime();

// W9: a reader holds one guard for the whole run while a writer retires a
// 4 KiB snapshot every 20 us (~200 MB/s). The cap is 8 MiB and the deadline
// 1 ms, so the writer hits back-pressure and gets busy answers; retired bytes
// must never cross the cap. Duration: CAIRN_W9_SECONDS (default 1.5).
// With CAIRN_BENCH_TRACE_DIR set, writes retired bytes over time there.
void BM_EpochW9StalledReader(benchmark::State& state) {
  const char* env_seconds = std::getenv("CAIRN_W9_SECONDS");
  const double seconds = env_seconds ? std::atof(env_seconds) : 1.5;
  constexpr std::size_t kCap = std::size_t{8} << 20;
  constexpr std::size_t kSnapshot = 4096;
  std::atomic<std::uint64_t> stall_reports{0};
  for (auto _ : state) {
    EpochOptions options;
    options.name = "w9";
    options.retired_bytes_cap = kCap;
    options.reclaim_deadline = std::chrono::milliseconds(1);
    options.stall_threshold = std::chrono::milliseconds(100);
    options.stall_hook = [&](const StallReport&) {
      stall_reports.fetch_add(1);
    };
    EpochDomain domain(options);
    Participant stalled =
        std::move(domain.RegisterParticipant("stalled-reader")).value();
    std::atomic<bool> release{false}, entered{false};
    std::thread reader([&] {
      Guard g = stalled.Enter();
      entered.store(true);
      while (!release.load(std::memory_order_acquire)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
    while (!entered.load()) std::this_thread::yield();

    std::vector<std::pair<double, std::size_t>> trace;
    std::uint64_t accepted = 0, refused = 0;
    const auto start = std::chrono::steady_clock::now();
    auto next = start;
    auto next_sample = start;
    while (true) {
      const auto now = std::chrono::steady_clock::now();
      const double t = std::chrono::duration<double>(now - start).count();
      if (t >= seconds) break;
      if (now >= next_sample) {
        trace.emplace_back(t, domain.Diagnostics().retired_bytes);
        next_sample += std::chrono::milliseconds(20);
      }
      if (now < next) {
        std::this_thread::sleep_until(next);
        continue;
      }
      next += std::chrono::microseconds(20);
      auto* snapshot = new char[kSnapshot];
      Status s = domain.Retire(snapshot, kSnapshot,
                               [](void* p) { delete[] static_cast<char*>(p); });
      if (s.ok()) {
        ++accepted;
      } else {
        delete[] snapshot;
        ++refused;
      }
    }
    EpochDiagnostics during = domain.Diagnostics();
    release.store(true, std::memory_order_release);
    reader.join();
    const Status barrier = domain.Barrier();
    EpochDiagnostics after = domain.Diagnostics();
    trace.emplace_back(seconds, after.retired_bytes);
    state.counters["cap_bytes"] = static_cast<double>(kCap);
    state.counters["peak_retired_bytes"] =
        static_cast<double>(after.peak_retired_bytes);
    state.counters["busy_count"] = static_cast<double>(during.busy_count);
    state.counters["refused"] = static_cast<double>(refused);
    state.counters["accepted"] = static_cast<double>(accepted);
    state.counters["stall_reports"] = static_cast<double>(stall_reports.load());
    state.counters["retired_bytes_after_release"] =
        static_cast<double>(after.retired_bytes);
    state.counters["barrier_ok"] = barrier.ok() ? 1 : 0;
    if (const char* dir = std::getenv("CAIRN_BENCH_TRACE_DIR")) {
      std::ofstream out(std::string(dir) + "/w9_trace.json");
      out << "[";
      for (std::size_t i = 0; i < trace.size(); ++i) {
        out << (i ? "," : "") << "[" << trace[i].first << "," << trace[i].second
            << "]";
      }
      out << "]\n";
    }
  }
}
BENCHMARK(BM_EpochW9StalledReader)
    ->Name("BM_EpochW9/stalled_reader")
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace cairn

BENCHMARK_MAIN();
