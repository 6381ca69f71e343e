// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// cairn_calibrate: the machine record of a gate run. Measures, over one
// 512 MiB buffer (4 KiB pages unless the kernel backs it with huge pages on
// its own; the THP setting is recorded beside the figures):
//   dependent-load latency     a pointer chase through a random cyclic
//                              permutation of 64-byte lines (Sattolo), so
//                              every load waits for the previous one
//   independent-load throughput random loads whose addresses do not depend
//                              on loaded data, so many misses overlap
// Each phase runs for --seconds (default 1, so 2 seconds in all) after the
// buffer is built and warmed up. Prints one JSON object on stdout;
// CAIRN_CALIBRATE_TRACE=1 also prints every slice on stderr.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/flags.h"
#include "bench/common/random.h"

namespace {

constexpr std::size_t kLine = 64;

struct alignas(kLine) Line {
  Line* next;
  std::uint64_t pad[7];
};

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::size_t start = colon + 1;
        while (start < line.size() && line[start] == ' ') ++start;
        return line.substr(start);
      }
    }
  }
  return "unknown";
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  cairn::bench::Flags flags(argc, argv, "[--seconds=S] [--mib=N]");
  const double seconds = flags.Double("seconds", 1.0);
  const std::size_t mib = flags.Unsigned("mib", 512);
  if (!flags.Ok()) return 2;
  if (seconds <= 0 || mib == 0) {
    std::fprintf(stderr, "--seconds and --mib must be positive\n");
    return 2;
  }
  const std::size_t lines = mib * (std::size_t{1} << 20) / kLine;
  std::fprintf(stderr, "[calibrate] building a %zu MiB pointer-chase cycle\n",
               mib);
  std::unique_ptr<Line[]> buffer(new Line[lines]);
  // Sattolo's algorithm: one cycle through every line, random order.
  std::unique_ptr<std::uint32_t[]> order(new std::uint32_t[lines]);
  for (std::size_t i = 0; i < lines; ++i) {
    order[i] = static_cast<std::uint32_t>(i);
  }
  cairn::bench::Rng rng{0x9e3779b97f4a7c15ULL};
  for (std::size_t i = lines - 1; i > 0; --i) {
    const std::size_t j = rng.Next() % i;
    std::swap(order[i], order[j]);
  }
  for (std::size_t i = 0; i < lines; ++i) {
    buffer[order[i]].next = &buffer[order[(i + 1) % lines]];
    buffer[order[i]].pad[0] = i;
  }
  order.reset();

  // Each phase is timed in slices of about 50 ms; the figure is the median
  // slice (a neighbour's burst on a shared machine moves a few slices, not
  // the median) and the spread is recorded beside it.
  constexpr std::size_t kStep = 1 << 14;
  auto run_phase = [&](auto&& body, std::vector<double>* ns_per_load) {
    const auto phase_start = std::chrono::steady_clock::now();
    while (Seconds(phase_start) < seconds) {
      std::size_t done = 0;
      const auto slice_start = std::chrono::steady_clock::now();
      double slice_s = 0;
      do {
        body();
        done += kStep;
        slice_s = Seconds(slice_start);
      } while (slice_s < 0.05);
      ns_per_load->push_back(slice_s * 1e9 / static_cast<double>(done));
    }
    if (std::getenv("CAIRN_CALIBRATE_TRACE") != nullptr) {
      for (double v : *ns_per_load) std::fprintf(stderr, "%.0f ", v);
      std::fprintf(stderr, "\n");
    }
    std::sort(ns_per_load->begin(), ns_per_load->end());
  };
  // Warm-up: on a VM the first pass over fresh memory runs far slower (here
  // 5 us per load falling to 300 ns over about 0.7 s, as the host backs the
  // pages), so chase until three consecutive slices agree within 15% (at
  // least 0.5 s, at most 4 s) before measuring.
  Line* p = &buffer[0];
  std::fprintf(stderr, "[calibrate] warming up the buffer\n");
  const auto warm_start = std::chrono::steady_clock::now();
  {
    double previous = 0;
    int stable = 0;
    while ((stable < 3 || Seconds(warm_start) < 0.5) &&
           Seconds(warm_start) < 4.0) {
      const auto slice_start = std::chrono::steady_clock::now();
      for (std::size_t i = 0; i < (std::size_t{1} << 15); ++i) p = p->next;
      const double ns = Seconds(slice_start) * 1e9 / (1 << 15);
      stable = previous > 0 && ns < previous * 1.15 && ns > previous * 0.85
                   ? stable + 1
                   : 0;
      previous = ns;
    }
  }
  const double warmup_s = Seconds(warm_start);
  std::fprintf(stderr, "[calibrate] dependent loads for %.1f s\n", seconds);
  std::vector<double> dependent;
  run_phase(
      [&] {
        for (std::size_t i = 0; i < kStep; ++i) p = p->next;
      },
      &dependent);

  std::fprintf(stderr, "[calibrate] independent loads for %.1f s\n", seconds);
  std::uint64_t sum = reinterpret_cast<std::uintptr_t>(p);
  cairn::bench::Rng s{0x123456789ULL};
  std::vector<double> independent;
  run_phase(
      [&] {
        for (std::size_t i = 0; i < kStep; ++i) {
          sum += buffer[s.Below(lines)].pad[0];
        }
      },
      &independent);
  const double dependent_ns = dependent[dependent.size() / 2];
  const double independent_ns = independent[independent.size() / 2];

  std::ostringstream json;
  json << "{\"cpu_model\": \"" << JsonEscape(CpuModel()) << "\", "
       << "\"cores\": " << std::thread::hardware_concurrency() << ", "
       << "\"buffer_mib\": " << mib << ", "
       << "\"page_size\": 4096, "
       << "\"thp\": \""
       << JsonEscape(
              ReadFirstLine("/sys/kernel/mm/transparent_hugepage/enabled"))
       << "\", "
       << "\"dependent_load_ns\": " << dependent_ns << ", "
       << "\"dependent_load_ns_min\": " << dependent.front() << ", "
       << "\"dependent_load_ns_max\": " << dependent.back() << ", "
       << "\"independent_load_ns\": " << independent_ns << ", "
       << "\"independent_load_ns_min\": " << independent.front() << ", "
       << "\"independent_load_ns_max\": " << independent.back() << ", "
       << "\"independent_loads_per_s\": " << 1e9 / independent_ns << ", "
       << "\"mlp\": " << dependent_ns / independent_ns << ", "
       << "\"seconds_per_phase\": " << seconds << ", "
       << "\"warmup_seconds\": " << warmup_s << ", "
       << "\"checksum\": " << (sum & 0xffff) << "}";
  std::printf("%s\n", json.str().c_str());
  return 0;
}
