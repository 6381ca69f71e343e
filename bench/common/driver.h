// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// What a Google Benchmark driver of the gate suite needs around its
// workloads: the population size, progress lines the gate runner passes
// through, teardown before static destruction, and the process's RSS.

#ifndef CAIRN_BENCH_COMMON_DRIVER_H_
#define CAIRN_BENCH_COMMON_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

namespace cairn::bench {

// Objects per population: CAIRN_SUITE_POPULATION (the runner sets it),
// default 1M.
inline std::size_t PopulationSize() {
  static const std::size_t n = [] {
    const char* env = std::getenv("CAIRN_SUITE_POPULATION");
    const long long v = env == nullptr ? 0 : std::atoll(env);
    return v > 0 ? static_cast<std::size_t>(v) : std::size_t{1'000'000};
  }();
  return n;
}

// One "[bench] ..." line on stderr (scripts/gates.py shows these while a
// long population build runs); `fmt` takes a string and a size.
inline void Progress(const char* fmt, const char* what, std::size_t n) {
  std::fprintf(stderr, "[bench] ");
  std::fprintf(stderr, fmt, what, n);
  std::fprintf(stderr, "\n");
}

// Teardown of the structures a driver builds once per process: run by
// RunBenchmarksThenTearDown after the benchmarks, in reverse order, before
// static destruction starts (so nothing they call at destruction has been
// destroyed yet).
inline std::mutex& AtEndMutex() {
  static std::mutex mu;
  return mu;
}
inline std::vector<std::function<void()>>& AtEndList() {
  static std::vector<std::function<void()>> fns;
  return fns;
}
inline void AtEnd(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(AtEndMutex());
  AtEndList().push_back(std::move(fn));
}
inline int RunBenchmarksThenTearDown(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::vector<std::function<void()>> fns;
  {
    std::lock_guard<std::mutex> lock(AtEndMutex());
    fns.swap(AtEndList());
  }
  for (auto it = fns.rbegin(); it != fns.rend(); ++it) (*it)();
  return 0;
}

// VmRSS of this process in bytes, from /proc/self/status (0 if unreadable).
inline std::uint64_t RssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
    }
  }
  return 0;
}

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_COMMON_DRIVER_H_
