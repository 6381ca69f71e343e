// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Bench-only baseline `shard_directory`: a directory shaped like Mooncake's
// main when the read-path RFC was written. 1024 shards, each a
// std::shared_mutex over an unordered_map<string, shared_ptr<Object>> with
// heterogeneous lookup. The shard lock is the only lock: a read holds it
// shared and a write holds it exclusive for the whole per-object callback,
// so there is no per-object lock to take (the best honest version of this
// shape: one lock acquisition per key, no owner copy, no key copy, shards
// cache-line aligned and pre-sized). Batches run key by key, one shard lock
// at a time, as a host's batch loop over this shape does.
//
// The callbacks get the same kind of view as GroupDirectory's: size, version,
// payload; the exclusive one may change the size (bumping the version) and
// the payload.

#ifndef CAIRN_BENCH_BASELINES_SHARD_DIRECTORY_H_
#define CAIRN_BENCH_BASELINES_SHARD_DIRECTORY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "cairn/base/internal/hash.h"

namespace cairn::bench {

template <typename Payload>
class ShardDirectory {
 public:
  static constexpr std::size_t kShards = 1024;
  static constexpr std::size_t kMaxKeyBytes = 1024;

  struct Object {
    Object(std::uint64_t id_in, std::string key_in, std::uint64_t size,
           Payload payload_in)
        : id(id_in),
          key(std::move(key_in)),
          size_bytes(size),
          payload(std::move(payload_in)) {}
    const std::uint64_t id;
    const std::string key;
    bool active = true;
    std::uint64_t size_bytes;
    std::uint64_t version = 1;  // a new object's version, as in cairn
    Payload payload;
  };

  // Shared access (the shard lock is held shared).
  class View {
   public:
    explicit View(const Object& o) : o_(o) {}
    std::uint64_t size_bytes() const { return o_.size_bytes; }
    std::uint64_t version() const { return o_.version; }
    const Payload& payload() const { return o_.payload; }

   private:
    const Object& o_;
  };

  // Exclusive access (the shard lock is held exclusive).
  class Access {
   public:
    explicit Access(Object& o) : o_(o) {}
    std::uint64_t size_bytes() const { return o_.size_bytes; }
    std::uint64_t version() const { return o_.version; }
    const Payload& payload() const { return o_.payload; }
    Payload& payload() { return o_.payload; }
    void set_size_bytes(std::uint64_t bytes) {
      o_.size_bytes = bytes;
      ++o_.version;
    }

   private:
    Object& o_;
  };

  void Reserve(std::size_t total) {
    for (Shard& s : shards_) s.map.reserve(total / kShards + 1);
  }

  // False if the key exists (nothing changes) or is empty or too long.
  bool Create(std::string_view key, std::uint64_t size, Payload payload) {
    if (!KeyOk(key)) return false;
    auto object = std::make_shared<Object>(
        next_id_.fetch_add(1, std::memory_order_relaxed), std::string(key),
        size, std::move(payload));
    Shard& s = ShardFor(key);
    std::unique_lock lock(s.mu);
    return s.map.try_emplace(object->key, std::move(object)).second;
  }

  // Removes the object; false if absent.
  bool Erase(std::string_view key) {
    if (!KeyOk(key)) return false;
    Shard& s = ShardFor(key);
    std::shared_ptr<Object> gone;  // freed after the shard lock
    std::unique_lock lock(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end()) return false;
    gone = std::move(it->second);
    s.map.erase(it);
    return true;
  }

  // fn(View&) under the shard lock held shared; false if absent.
  template <typename Fn>
  bool WithObject(std::string_view key, Fn&& fn) const {
    if (!KeyOk(key)) return false;
    const Shard& s = ShardFor(key);
    std::shared_lock lock(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end() || !it->second->active) return false;
    View view(*it->second);
    fn(view);
    return true;
  }

  // fn(Access&) under the shard lock held exclusive; false if absent.
  template <typename Fn>
  bool WithObjectExclusive(std::string_view key, Fn&& fn) {
    if (!KeyOk(key)) return false;
    Shard& s = ShardFor(key);
    std::unique_lock lock(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end() || !it->second->active) return false;
    Access access(*it->second);
    fn(access);
    return true;
  }

  // fn(index, View*) per key, in order (nullptr when absent); one shard
  // lock at a time.
  template <typename Fn>
  void WithObjects(std::span<const std::string_view> keys, Fn&& fn) const {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!WithObject(keys[i], [&](View& v) { fn(i, &v); })) {
        fn(i, static_cast<View*>(nullptr));
      }
    }
  }
  template <typename Fn>
  void WithObjectsExclusive(std::span<const std::string_view> keys, Fn&& fn) {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!WithObjectExclusive(keys[i], [&](Access& a) { fn(i, &a); })) {
        fn(i, static_cast<Access*>(nullptr));
      }
    }
  }

 private:
  struct alignas(64) Shard {
    mutable std::shared_mutex mu;
    std::unordered_map<std::string, std::shared_ptr<Object>,
                       base_internal::KeyHash, base_internal::KeyEq>
        map;
  };
  static bool KeyOk(std::string_view key) {
    return !key.empty() && key.size() <= kMaxKeyBytes;
  }
  const Shard& ShardFor(std::string_view key) const {
    return shards_[base_internal::KeyHash{}(key) % kShards];
  }
  Shard& ShardFor(std::string_view key) {
    return shards_[base_internal::KeyHash{}(key) % kShards];
  }

  Shard shards_[kShards];
  std::atomic<std::uint64_t> next_id_{1};
};

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_BASELINES_SHARD_DIRECTORY_H_
