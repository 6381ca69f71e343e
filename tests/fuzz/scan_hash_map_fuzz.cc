// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// libFuzzer harness: the input is a program of map operations, run against
// ScanHashMap and std::unordered_map side by side, with allocation failures
// chosen by the input. Any disagreement aborts.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "cairn/index/scan_hash_map.h"

namespace {

struct Loc {
  std::uint64_t offset;
};
using Map = cairn::ScanHashMap<Loc>;
using Outcome = cairn::ScanHashMapOutcome;

class ScriptedAllocator final : public cairn::IndexAllocator {
 public:
  void* Allocate(std::size_t bytes, std::size_t alignment) noexcept override {
    if (fail_next_) {
      fail_next_ = false;
      return nullptr;
    }
    return cairn::DefaultIndexAllocator()->Allocate(bytes, alignment);
  }
  void Deallocate(void* p, std::size_t bytes,
                  std::size_t alignment) noexcept override {
    cairn::DefaultIndexAllocator()->Deallocate(p, bytes, alignment);
  }
  bool fail_next_ = false;
};

void Require(bool condition) {
  if (!condition) std::abort();
}

class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size)
      : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  std::uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

void Check(const Map& map,
           const std::unordered_map<std::string, std::uint64_t>& model) {
  Require(map.size() == model.size());
  for (const auto& [key, value] : model) {
    const Map::Entry* e = map.Find(key);
    Require(e != nullptr && e->value().offset == value);
    const std::uint64_t h = map.HashOf(key);
    Require(map.FindAddress(e->address(), Map::Hash32(h), Map::TagOf(h)) == e);
    Require(map.FindAddress(e->address(), Map::Hash32(h)) == e);
  }
  std::size_t emitted = 0;
  cairn::StableScanCursor cursor = map.StableScanBegin();
  while (!cursor.done) {
    Require(map.ScanStable(
                cursor,
                [&](const Map::Entry& e) {
                  ++emitted;
                  Require(model.count(std::string(e.key())) == 1);
                },
                64) == Outcome::kOk);
  }
  Require(emitted == model.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  Reader in(data, size);
  ScriptedAllocator allocator;
  cairn::ScanHashMapOptions options;
  options.seed = 0x1234 + in.Byte();
  options.max_exponent = in.Byte() % 12;  // small caps: chains and collisions
  options.max_key_bytes = 64;
  options.allocator = &allocator;
  Map map(options);
  std::unordered_map<std::string, std::uint64_t> model;
  std::uint64_t counter = 0;
  while (!in.done()) {
    const std::uint8_t op = in.Byte();
    const std::uint8_t k = in.Byte();
    // Keys: 0..255 in a few lengths (including empty and over-limit).
    std::string key;
    if ((op & 0x70) != 0x70)
      key = std::string(1 + (k % 4) * 7, static_cast<char>('a' + (k % 26))) +
            std::to_string(k);
    if ((op & 0x70) == 0x70 && (k & 1)) key.assign(65, 'z');
    allocator.fail_next_ = (op & 0x80) != 0;
    const std::uint64_t value = ++counter;
    switch (op & 0x0f) {
      case 0:
      case 1:
      case 2: {
        auto r = map.Insert(key, Loc{value});
        const bool valid = !key.empty() && key.size() <= 64;
        if (r.ok()) {
          Require(valid && model.emplace(key, value).second);
          Require(r.entry == map.Find(key));
        } else if (r.outcome == Outcome::kAlreadyExists) {
          Require(model.count(key) == 1 && r.entry == map.Find(key));
        } else if (r.outcome == Outcome::kInvalidArgument) {
          Require(!valid && r.entry == nullptr);
        } else {
          Require(r.outcome == Outcome::kResourceExhausted);
          Require(model.count(key) == 0 && r.entry == nullptr);
          Require(map.Find(key) == nullptr && map.size() == model.size());
        }
        break;
      }
      case 3:
      case 4: {
        auto r = map.Upsert(key, Loc{value});
        if (r.ok()) {
          model[key] = value;
        } else {
          Require(r.outcome == Outcome::kInvalidArgument ||
                  (r.outcome == Outcome::kResourceExhausted &&
                   model.count(key) == 0 && map.Find(key) == nullptr));
        }
        break;
      }
      case 5:
      case 6:
      case 7: {
        const bool erased = map.Erase(key) == Outcome::kOk;
        Require(erased == (model.erase(key) == 1));
        break;
      }
      case 8: {
        const bool replaced = map.ReplaceValue(key, Loc{value}) == Outcome::kOk;
        auto it = model.find(key);
        Require(replaced == (it != model.end()));
        if (replaced) it->second = value;
        break;
      }
      case 9: {
        const Outcome o = map.Maintain(1 + k % 4);
        Require(o == Outcome::kOk || o == Outcome::kResourceExhausted);
        break;
      }
      case 10: {
        const Outcome o = map.PreallocateForExpectedSize(k * 4);
        Require(o == Outcome::kOk || o == Outcome::kResourceExhausted);
        Require(map.size() == model.size());
        break;
      }
      case 11: {
        std::uint64_t cursor = k;
        for (int i = 0; i < 4; ++i)
          cursor = map.Scan(cursor, [](const Map::Entry&) {});
        break;
      }
      case 12: {
        const Map::Entry* e = map.Find(key);
        auto it = model.find(key);
        Require((e != nullptr) == (it != model.end()));
        break;
      }
      default:
        Check(map, model);
        break;
    }
    allocator.fail_next_ = false;
  }
  Check(map, model);
  return 0;
}
