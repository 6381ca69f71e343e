// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Explicit groups, the write side (gate route.W4.group_teardown): creating a
// group of N members and tearing it down with EraseGroup, GroupDirectory
// against the shard-locked directory with a group catalog
// (bench/baselines/shard_group_directory.h), at group sizes 8, 32 and 128.
//
// BM_GroupW4/<impl>/size:<n>: a directory holding `population` singleton
// objects (CAIRN_GROUP_POPULATION, default 100k) and nothing else; each
// iteration creates one group of n members (16-byte keys, a payload of two
// replica descriptors on the heap) and then erases it. Manual time: the
// teardown alone (the EraseGroup call). Counters: create_us (mean group
// creation, all n members), teardown_p99_us, and, for the directory,
// retired_bytes_per_teardown: bytes the teardown hands to the epoch domain
// (route snapshots, records, entries), which an old reader pins until its
// grace period ends and which the retired-bytes cap counts.
//
// BM_GroupEvict/size:<n>: group eviction as a host runs it, through the
// Evictor (census, ranking, one group commit per victim): each iteration
// builds a fresh directory of 256 groups of n members (untimed) and times
// one Evict call whose goal is every byte, which must evict all 256 groups.
// Directory only: the shard-locked baseline has no eviction kernel (its
// nearest equivalent, erasing a chosen group, is BM_GroupW4). Counters:
// us_per_group, us_per_member, retired_bytes_per_group.

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/baselines/shard_group_directory.h"
#include "bench/common/latency.h"
#include "bench/directory/object_payload.h"
#include "cairn/directory/group_directory.h"
#include "cairn/tenant/eviction.h"

namespace cairn::bench {
namespace {

std::size_t Population() {
  const char* env = std::getenv("CAIRN_GROUP_POPULATION");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 100'000;
}

std::string Key(const char* prefix, std::uint64_t i) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%s%013llu", prefix,
                static_cast<unsigned long long>(i));
  return buffer;
}

struct DirectoryImpl {
  static constexpr const char* kName = "directory";
  explicit DirectoryImpl(std::size_t population) : dir(Options(population)) {}
  static DirectoryOptions Options(std::size_t population) {
    DirectoryOptions o;
    o.route.bucket_count = population / 4 + 1;
    return o;
  }
  bool CreateSingleton(const std::string& key, std::uint64_t i) {
    CreateOptions c;
    c.size_bytes = 4096;
    return dir.Create(key, c, MakePayload(i)).ok();
  }
  bool CreateMember(const std::string& group, const std::string& key,
                    std::uint64_t i) {
    CreateOptions c;
    c.size_bytes = 4096;
    c.group = group;
    return dir.Create(key, c, MakePayload(i)).ok();
  }
  bool EraseGroup(const std::string& group) {
    return dir.EraseGroup(group).ok();
  }
  std::uint64_t RetiredBytes() const {
    return dir.Diagnostics().route.retired_bytes_total;
  }
  bool Present(const std::string& key) const { return dir.Pin(key).ok(); }
  GroupDirectory<ObjectPayload> dir;
};

struct ShardImpl {
  static constexpr const char* kName = "shard_directory";
  explicit ShardImpl(std::size_t population) {
    dir.objects().Reserve(population);
  }
  bool CreateSingleton(const std::string& key, std::uint64_t i) {
    return dir.objects().Create(key, 4096, MakePayload(i));
  }
  bool CreateMember(const std::string& group, const std::string& key,
                    std::uint64_t i) {
    return dir.CreateMember(group, key, 4096, MakePayload(i));
  }
  bool EraseGroup(const std::string& group) {
    return dir.EraseGroup(group) != 0;
  }
  std::uint64_t RetiredBytes() const { return 0; }
  bool Present(const std::string& key) {
    return dir.objects().WithObject(key, [](const auto&) {});
  }
  ShardGroupDirectory<ObjectPayload> dir;
};

template <typename Impl>
Impl& Built() {
  static Impl* impl = [] {
    const std::size_t population = Population();
    auto* made = new Impl(population);
    for (std::uint64_t i = 0; i < population; ++i) {
      if (!made->CreateSingleton(Key("s", i), i)) std::abort();
    }
    return made;
  }();
  return *impl;
}

// A fresh small instance: a group created and erased leaves its singletons
// and nothing of the group (members gone, the name free again).
template <typename Impl>
bool CheckImpl(std::string* why) {
  Impl impl(64);
  for (std::uint64_t i = 0; i < 64; ++i) {
    if (!impl.CreateSingleton(Key("s", i), i)) {
      *why = std::string(Impl::kName) + ": singleton create failed";
      return false;
    }
  }
  for (int round = 0; round < 2; ++round) {
    for (std::uint64_t m = 0; m < 32; ++m) {
      if (!impl.CreateMember("g", Key("m", m), m)) {
        *why = std::string(Impl::kName) + ": member create failed";
        return false;
      }
    }
    if (impl.CreateMember("g", Key("s", 3), 3)) {
      *why = std::string(Impl::kName) + ": a routed key joined a group";
      return false;
    }
    if (!impl.EraseGroup("g") || impl.EraseGroup("g")) {
      *why = std::string(Impl::kName) + ": EraseGroup did not erase once";
      return false;
    }
  }
  for (std::uint64_t i = 0; i < 64; ++i) {
    if (!impl.Present(Key("s", i))) {
      *why = std::string(Impl::kName) + ": a singleton was lost";
      return false;
    }
  }
  for (std::uint64_t m = 0; m < 32; ++m) {
    if (impl.Present(Key("m", m))) {
      *why = std::string(Impl::kName) + ": a member outlived its group";
      return false;
    }
  }
  return true;
}

void BM_GroupSelfCheck(benchmark::State& state) {
  std::string why;
  bool ok = true;
  for (auto _ : state) {
    ok = CheckImpl<DirectoryImpl>(&why) && CheckImpl<ShardImpl>(&why);
  }
  if (!ok) state.SkipWithError(why.c_str());
}
BENCHMARK(BM_GroupSelfCheck)->Iterations(1);

template <typename Impl>
void BM_GroupW4(benchmark::State& state) {
  const std::size_t size = static_cast<std::size_t>(state.range(0));
  Impl& impl = Built<Impl>();
  static std::uint64_t next_group = 0;
  Histogram teardowns;
  double create_seconds = 0;
  std::uint64_t groups = 0;
  const std::uint64_t retired_before = impl.RetiredBytes();
  std::vector<std::string> keys(size);
  for (auto _ : state) {
    const std::uint64_t g = next_group++;
    const std::string group = Key("g", g);
    for (std::size_t m = 0; m < size; ++m) keys[m] = Key("m", g * 256 + m);
    const auto created = std::chrono::steady_clock::now();
    for (std::size_t m = 0; m < size; ++m) {
      if (!impl.CreateMember(group, keys[m], g)) std::abort();
    }
    const auto start = std::chrono::steady_clock::now();
    if (!impl.EraseGroup(group)) std::abort();
    const auto stop = std::chrono::steady_clock::now();
    create_seconds += std::chrono::duration<double>(start - created).count();
    const double t = std::chrono::duration<double>(stop - start).count();
    state.SetIterationTime(t);
    teardowns.Add(static_cast<std::uint64_t>(t * 1e9));
    ++groups;
  }
  if (groups != 0) {
    state.counters["create_us"] = create_seconds * 1e6 / groups;
    state.counters["teardown_p99_us"] = teardowns.Quantile(0.99) / 1e3;
    state.counters["retired_bytes_per_teardown"] =
        static_cast<double>(impl.RetiredBytes() - retired_before) / groups;
  }
  state.counters["members"] = static_cast<double>(size);
  state.SetItemsProcessed(state.iterations());
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->ArgName("size")->Arg(8)->Arg(32)->Arg(128)->UseManualTime()->Unit(
      benchmark::kMicrosecond);
}

void BM_GroupEvict(benchmark::State& state) {
  constexpr std::size_t kGroups = 256;
  const std::size_t size = static_cast<std::size_t>(state.range(0));
  const std::uint64_t bytes = kGroups * size * 4096;
  double seconds = 0;
  std::uint64_t retired = 0;
  std::uint64_t cycles = 0;
  for (auto _ : state) {
    auto impl = std::make_unique<DirectoryImpl>(kGroups * size);
    for (std::uint64_t g = 0; g < kGroups; ++g) {
      const std::string group = Key("g", g);
      for (std::uint64_t m = 0; m < size; ++m) {
        if (!impl->CreateMember(group, Key("m", g * 256 + m), g)) std::abort();
      }
    }
    const std::uint64_t retired_before = impl->RetiredBytes();
    Evictor<ObjectPayload> evictor;
    GroupDirectory<ObjectPayload>* dirs[] = {&impl->dir};
    const auto start = std::chrono::steady_clock::now();
    const EvictionResult result = evictor.Evict(
        dirs, bytes, 0, Evictor<ObjectPayload>::Measure::kSizeBytes);
    const auto stop = std::chrono::steady_clock::now();
    if (result.evicted_groups != kGroups) {
      state.SkipWithError("Evict left groups behind");
      break;
    }
    const double t = std::chrono::duration<double>(stop - start).count();
    state.SetIterationTime(t);
    seconds += t;
    retired += impl->RetiredBytes() - retired_before;
    ++cycles;
  }
  if (cycles != 0) {
    const double groups = static_cast<double>(cycles * kGroups);
    state.counters["us_per_group"] = seconds * 1e6 / groups;
    state.counters["us_per_member"] =
        seconds * 1e6 / (groups * static_cast<double>(size));
    state.counters["retired_bytes_per_group"] =
        static_cast<double>(retired) / groups;
  }
  state.counters["members"] = static_cast<double>(size);
}
BENCHMARK(BM_GroupEvict)
    ->ArgName("size")
    ->Arg(8)
    ->Arg(32)
    ->Arg(128)
    ->Iterations(5)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK_TEMPLATE(BM_GroupW4, DirectoryImpl)
    ->Name("BM_GroupW4/directory")
    ->Apply(Sizes);
BENCHMARK_TEMPLATE(BM_GroupW4, ShardImpl)
    ->Name("BM_GroupW4/shard_directory")
    ->Apply(Sizes);

}  // namespace
}  // namespace cairn::bench

BENCHMARK_MAIN();
