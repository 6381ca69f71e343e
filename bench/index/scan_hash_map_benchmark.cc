// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ScanHashMap benchmarks for gates X1-X3 (docs/index.md, bench/index/gates.py).
// Candidate and baselines live in this one binary with stable names:
//   BM_IndexX1FindHit/<impl>/<population>/<key bytes>   impl: cairn, absl,
//       absl_prefetch, std; counters bytes_per_key (heap growth while the map
//       was built, from mallinfo2) and reported_bytes_per_key (cairn's own)
//   BM_IndexX1FindMiss/<impl>/<population>/<key bytes>
//   BM_IndexX2Find/<cairn_batched|cairn_serial>/<population>/<key bytes>
//   BM_IndexX3FindAddress/<tagged|untagged>/<population>/<key bytes>
// Maps are built once per process and shared by the repetitions, so a filter
// that selects candidate and baseline lets random interleaving alternate them.

#include <malloc.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/strings/string_view.h>
#include <benchmark/benchmark.h>

#include "bench/common/random.h"
#include "cairn/index/scan_hash_map.h"
#include "testing/scan_hash_map_peer.h"

namespace {

struct Loc {
  std::uint64_t offset;
};

using CairnMap = cairn::ScanHashMap<Loc>;
using AbslMap = absl::flat_hash_map<std::string, Loc>;
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};
using StdMap =
    std::unordered_map<std::string, Loc, StringHash, std::equal_to<>>;

constexpr int kOpsPerIteration = 256;

std::uint64_t Mix(std::uint64_t x) {  // splitmix64 finaliser: a bijection
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Key i: `width` bytes (width >= 8, a multiple of 8); the first word is a
// bijection of i, so keys are distinct.
inline void MakeKey(std::uint64_t i, std::size_t width, char* out) {
  const std::uint64_t head = Mix(i);
  std::memcpy(out, &head, 8);
  for (std::size_t o = 8; o < width; o += 8) {
    const std::uint64_t word = head * (o + 1) + o;
    std::memcpy(out + o, &word, 8);
  }
}

using cairn::bench::Rng;

// Heap bytes in use, plus what cairn's default allocator maps directly
// (huge-page candidates bypass malloc).
std::size_t HeapBytes() {
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd +
         cairn::index_internal::DefaultAllocatorMappedBytes();
}

template <typename M>
struct Fixture {
  std::unique_ptr<M> map;
  double bytes_per_key = 0;
  double reported_bytes_per_key = 0;
};

template <typename M>
Fixture<M>& GetFixture(std::size_t population, std::size_t width,
                       int max_exponent = 32) {
  static std::map<std::tuple<std::size_t, std::size_t, int>, Fixture<M>> cache;
  auto [it, fresh] = cache.try_emplace({population, width, max_exponent});
  Fixture<M>& f = it->second;
  if (!fresh) return f;
  std::fprintf(stderr, "building %zu entries, %zu-byte keys...\n", population,
               width);
  char key[64];
  // Also tells the compiler the keys fit the buffer (GCC's -Warray-bounds
  // otherwise sees a long-key copy reading past it).
  if (width > sizeof(key)) std::abort();
  const std::size_t before = HeapBytes();
  if constexpr (std::is_same_v<M, CairnMap>) {
    cairn::ScanHashMapOptions options;
    options.seed = 0x1dea;
    options.max_exponent = max_exponent;
    f.map = std::make_unique<CairnMap>(options);
    for (std::uint64_t i = 0; i < population; ++i) {
      MakeKey(i, width, key);
      if (!f.map->Insert(std::string_view(key, width), Loc{i}).ok())
        std::abort();
    }
    while (cairn::index_internal::ScanHashMapTestPeer::IsRehashing(*f.map)) {
      if (f.map->Maintain() != cairn::ScanHashMapOutcome::kOk) std::abort();
    }
    f.reported_bytes_per_key =
        static_cast<double>(f.map->Memory().total_bytes) / population;
  } else {
    f.map = std::make_unique<M>();
    for (std::uint64_t i = 0; i < population; ++i) {
      MakeKey(i, width, key);
      f.map->emplace(std::string(key, width), Loc{i});
    }
  }
  f.bytes_per_key = static_cast<double>(HeapBytes() - before) / population;
  return f;
}

template <typename M>
const Loc* Lookup(const M& map, std::string_view key) {
  if constexpr (std::is_same_v<M, CairnMap>) {
    const CairnMap::Entry* e = map.Find(key);
    return e == nullptr ? nullptr : &e->value();
  } else if constexpr (std::is_same_v<M, AbslMap>) {
    // Debian's absl has its own string_view type.
    auto it = map.find(absl::string_view(key.data(), key.size()));
    return it == map.end() ? nullptr : &it->second;
  } else {
    auto it = map.find(key);
    return it == map.end() ? nullptr : &it->second;
  }
}

// Finds random keys; `miss` shifts them past the population.
template <typename M>
void FindLoop(benchmark::State& state, std::size_t population,
              std::size_t width, bool miss) {
  Fixture<M>& f = GetFixture<M>(population, width);
  const M& map = *f.map;
  Rng rng{0x5eedull + population};
  char key[64];
  std::uint64_t found = 0;
  for (auto _ : state) {
    for (int k = 0; k < kOpsPerIteration; ++k) {
      MakeKey(rng.Below(population) + (miss ? population : 0), width, key);
      const Loc* loc = Lookup(map, std::string_view(key, width));
      found += loc != nullptr ? loc->offset | 1 : 0;
    }
  }
  benchmark::DoNotOptimize(found);
  if ((found != 0) == miss) state.SkipWithError("unexpected hit/miss");
  state.SetItemsProcessed(state.iterations() * kOpsPerIteration);
  state.counters["bytes_per_key"] = f.bytes_per_key;
  if constexpr (std::is_same_v<M, CairnMap>) {
    state.counters["reported_bytes_per_key"] = f.reported_bytes_per_key;
  }
}

// absl with its own prefetch, kDepth keys ahead.
void AbslPrefetchLoop(benchmark::State& state, std::size_t population,
                      std::size_t width) {
  constexpr int kDepth = 8;
  Fixture<AbslMap>& f = GetFixture<AbslMap>(population, width);
  const AbslMap& map = *f.map;
  Rng rng{0x5eedull + population};
  char ring[kDepth][64];
  std::uint64_t found = 0;
  for (auto _ : state) {
    for (int k = 0; k < kDepth; ++k) {
      MakeKey(rng.Below(population), width, ring[k]);
      map.prefetch(absl::string_view(ring[k], width));
    }
    for (int k = 0; k < kOpsPerIteration; ++k) {
      char* slot = ring[k % kDepth];
      auto it = map.find(absl::string_view(slot, width));
      found += it->second.offset | 1;
      if (k + kDepth < kOpsPerIteration) {
        MakeKey(rng.Below(population), width, slot);
        map.prefetch(absl::string_view(slot, width));
      }
    }
  }
  benchmark::DoNotOptimize(found);
  state.SetItemsProcessed(state.iterations() * kOpsPerIteration);
  state.counters["bytes_per_key"] = f.bytes_per_key;
}

// X2: the same random keys, one FindBatch per 64 vs 64 Find calls.
template <std::size_t kBucketAhead = CairnMap::kBatchBucketAhead,
          std::size_t kEntryAhead = CairnMap::kBatchEntryAhead>
void BatchLoop(benchmark::State& state, std::size_t population,
               std::size_t width, bool batched) {
  constexpr int kBatch = 64;
  Fixture<CairnMap>& f = GetFixture<CairnMap>(population, width);
  const CairnMap& map = *f.map;
  Rng rng{0xba7cull + population};
  std::vector<char> storage(kBatch * width);
  std::string_view keys[kBatch];
  const CairnMap::Entry* out[kBatch];
  for (int k = 0; k < kBatch; ++k)
    keys[k] = std::string_view(&storage[k * width], width);
  std::uint64_t found = 0;
  for (auto _ : state) {
    for (int round = 0; round < kOpsPerIteration / kBatch; ++round) {
      for (int k = 0; k < kBatch; ++k)
        MakeKey(rng.Below(population), width, &storage[k * width]);
      if (batched) {
        map.FindBatchStaged<kBucketAhead, kEntryAhead>(keys, out);
      } else {
        for (int k = 0; k < kBatch; ++k) out[k] = map.Find(keys[k]);
      }
      for (int k = 0; k < kBatch; ++k) found += out[k]->value().offset | 1;
    }
  }
  benchmark::DoNotOptimize(found);
  state.SetItemsProcessed(state.iterations() * kOpsPerIteration);
}

// X3: receipts (address, hash32, tag) of random entries in a map whose head
// buckets are full and chained (exponent capped).
void FindAddressLoop(benchmark::State& state, std::size_t population,
                     std::size_t width, int max_exponent, bool tagged) {
  Fixture<CairnMap>& f = GetFixture<CairnMap>(population, width, max_exponent);
  const CairnMap& map = *f.map;
  struct Receipt {
    std::uintptr_t address;
    std::uint32_t hash32;
    std::uint8_t tag;
  };
  static std::map<std::tuple<std::size_t, std::size_t, int>,
                  std::vector<Receipt>>
      receipts_cache;
  std::vector<Receipt>& receipts =
      receipts_cache[{population, width, max_exponent}];
  if (receipts.empty()) {
    Rng rng{0xadd7ull};
    char key[64];
    for (int i = 0; i < (1 << 16); ++i) {
      MakeKey(rng.Below(population), width, key);
      const std::string_view k(key, width);
      const std::uint64_t h = map.HashOf(k);
      receipts.push_back(
          {map.Find(k)->address(), CairnMap::Hash32(h), CairnMap::TagOf(h)});
    }
  }
  std::size_t pos = 0;
  std::uint64_t found = 0;
  for (auto _ : state) {
    for (int k = 0; k < kOpsPerIteration; ++k) {
      const Receipt& r = receipts[pos++ & 0xffff];
      const CairnMap::Entry* e =
          tagged ? map.FindAddress(r.address, r.hash32, r.tag)
                 : map.FindAddress(r.address, r.hash32);
      found += e != nullptr;
    }
  }
  benchmark::DoNotOptimize(found);
  if (found !=
      static_cast<std::uint64_t>(state.iterations()) * kOpsPerIteration)
    state.SkipWithError("receipt missed");
  state.SetItemsProcessed(state.iterations() * kOpsPerIteration);
  state.counters["chain_buckets_per_head"] =
      static_cast<double>(
          cairn::index_internal::ScanHashMapTestPeer::ChainBuckets(map)) /
      (1u << max_exponent);
}

// "<prefix>/<population>/<width>" without std::string operator+ (GCC 12
// -Wrestrict false positive under -Werror).
std::string Name(const char* prefix, std::size_t population,
                 std::size_t width) {
  char buffer[128];
  std::snprintf(buffer, sizeof(buffer), "%s/%zu/%zu", prefix, population,
                width);
  return buffer;
}

void RegisterAll() {
  const std::size_t populations[] = {1'000'000, 16'000'000};
  const std::size_t widths[] = {16, 64};
  for (std::size_t pop : populations) {
    for (std::size_t width : widths) {
      auto reg = [](const std::string& name, auto fn) {
        benchmark::RegisterBenchmark(name.c_str(), fn)
            ->Unit(benchmark::kNanosecond);
      };
      reg(Name("BM_IndexX1FindHit/cairn", pop, width),
          [=](benchmark::State& s) {
            FindLoop<CairnMap>(s, pop, width, false);
          });
      reg(Name("BM_IndexX1FindHit/absl", pop, width), [=](benchmark::State& s) {
        FindLoop<AbslMap>(s, pop, width, false);
      });
      reg(Name("BM_IndexX1FindHit/absl_prefetch", pop, width),
          [=](benchmark::State& s) { AbslPrefetchLoop(s, pop, width); });
      reg(Name("BM_IndexX1FindHit/std", pop, width),
          [=](benchmark::State& s) { FindLoop<StdMap>(s, pop, width, false); });
      reg(Name("BM_IndexX1FindMiss/cairn", pop, width),
          [=](benchmark::State& s) {
            FindLoop<CairnMap>(s, pop, width, true);
          });
      reg(Name("BM_IndexX1FindMiss/absl", pop, width),
          [=](benchmark::State& s) { FindLoop<AbslMap>(s, pop, width, true); });
      reg(Name("BM_IndexX1FindMiss/std", pop, width),
          [=](benchmark::State& s) { FindLoop<StdMap>(s, pop, width, true); });
      reg(Name("BM_IndexX2Find/cairn_batched", pop, width),
          [=](benchmark::State& s) { BatchLoop(s, pop, width, true); });
      reg(Name("BM_IndexX2Find/cairn_serial", pop, width),
          [=](benchmark::State& s) { BatchLoop(s, pop, width, false); });
      // Distance sweep (bucket ahead, entry ahead), reported, not gated.
      reg(Name("BM_IndexX2Sweep/d8_8", pop, width),
          [=](benchmark::State& s) { BatchLoop<8, 8>(s, pop, width, true); });
      reg(Name("BM_IndexX2Sweep/d12_12", pop, width),
          [=](benchmark::State& s) { BatchLoop<12, 12>(s, pop, width, true); });
      reg(Name("BM_IndexX2Sweep/d16_8", pop, width),
          [=](benchmark::State& s) { BatchLoop<16, 8>(s, pop, width, true); });
      reg(Name("BM_IndexX2Sweep/d24_8", pop, width),
          [=](benchmark::State& s) { BatchLoop<24, 8>(s, pop, width, true); });
      reg(Name("BM_IndexX2Sweep/d16_16", pop, width),
          [=](benchmark::State& s) { BatchLoop<16, 16>(s, pop, width, true); });
    }
  }
  // X3: 1M entries under 2^15 head buckets: ~30 entries per chain (full head
  // bucket plus two overflow buckets).
  for (std::size_t width : widths) {
    benchmark::RegisterBenchmark(
        Name("BM_IndexX3FindAddress/tagged", 1'000'000, width).c_str(),
        [=](benchmark::State& s) {
          FindAddressLoop(s, 1'000'000, width, 15, true);
        });
    benchmark::RegisterBenchmark(
        Name("BM_IndexX3FindAddress/untagged", 1'000'000, width).c_str(),
        [=](benchmark::State& s) {
          FindAddressLoop(s, 1'000'000, width, 15, false);
        });
  }
}

}  // namespace

int main(int argc, char** argv) {
  RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
