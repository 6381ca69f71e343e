// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ScanHashMap<Value>: the record index. Keys are byte strings, values small
// trivially copyable records (a log location, say). Entries live in an arena
// and never move, so an entry's address is a durable name for it: a flush
// receipt that remembers (address, 32-bit hash, tag) can find the entry again
// with FindAddress, even after the map has rehashed.
//
// Layout. Each table is 2^e 64-byte buckets of 12 slots (12 one-byte tags,
// 12 four-byte arena handles, one four-byte overflow child id). A slot is
// occupied iff its handle is non-zero; a tag is only a filter, so every tag
// value 0..255 is legal and a stale tag in an erased slot never matches. The
// tag is the top 8 bits of a keyed 64-bit XXH3 hash, the bucket index its low
// e bits, with e capped at 32 so index bits and tag bits never overlap. A full
// bucket chains to overflow buckets from a pool; erase compacts the chain.
//
// Results. No call throws, and none allocates to report an outcome. Every
// mutator returns a ScanHashMapOutcome, a one-byte enum (kOk, kNotFound,
// kAlreadyExists, kInvalidArgument, kResourceExhausted); Insert and Upsert
// return it with the entry (ScanHashMapInsertResult); ScanStable returns
// one too (kFailedPrecondition for a stale cursor). ToStatus(outcome) gives
// the code-only cairn::Status of the same code for hosts that want one. An
// error outcome means the call changed nothing: same size, same entries at
// the same addresses, same scan order, same memory held, and stable scan
// cursors stay valid (only stats().rehash_step_failures may count a failed
// Maintain). For an allocation failure this holds because each call
// acquires all the memory it needs before it changes anything, and gives it
// back if a later acquisition fails (tests/index/scan_hash_map_alloc_test.cc
// fails every allocation of every call in turn).
//
// Resizing. The map grows x2 when more than 9/12 of its slots are used and
// shrinks by half below 3/12. A resize is incremental: the old and the new
// table coexist, and each successful Insert/Upsert/Erase moves one old bucket
// chain (Maintain() moves more during idle time). A step first plans and
// reserves the overflow buckets it needs and only then moves handles, so a
// step that cannot allocate changes nothing. Such side work never fails the
// mutation that triggered it: it is counted (stats().rehash_step_failures)
// and retried by the next mutation; Maintain() reports it as
// kResourceExhausted. A map whose grow keeps failing stays correct, with
// longer chains. Lookups never step the rehash.
//
// Thread safety. A map is owned by one thread (the owner). Every mutating call
// (Insert, Upsert, Erase, ReplaceValue, Maintain, PreallocateForExpectedSize,
// Detach) is owner-only. Const calls (Find, FindBatch, FindAddress, Scan,
// ScanStable, ForEachUntil, SampleRandom, prefetch hints, size and memory
// queries) touch no state, so any number of threads may run them
// concurrently with each other while no mutating call runs (tested under
// TSan); a const call concurrent with a mutating call is a data race.
// Callbacks passed to Scan, ScanStable, ForEachUntil and SampleRandom must
// not call mutating methods of the same map. The map has no locks and no
// synchronisation of its own. A map is neither copyable nor movable
// (entries and cursors refer to it); hold it by value or through a pointer.
//
// Memory. All of it comes from the IndexAllocator in the options
// (cairn/index/index_allocator.h). Const calls allocate nothing, from it or
// from the heap. Tables of 2 MiB or more and, past the first 2 MiB, arena
// slabs are requested 2 MiB-aligned; DefaultIndexAllocator maps those directly
// and advises transparent huge pages (MADV_HUGEPAGE), which removes most TLB
// misses from random lookups at millions of entries.
//
// Complexity. Find, Insert, Erase: O(1) expected (one bucket line plus one
// entry line for a hit); a rehash step adds O(chain length). Scan: O(chain
// length) per call. Memory: 64 bytes per 12 slots at 25-75% load, plus each
// entry rounded to 8 bytes (value, 2-byte key length, key bytes).

#ifndef CAIRN_INDEX_SCAN_HASH_MAP_H_
#define CAIRN_INDEX_SCAN_HASH_MAP_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <random>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

#include "cairn/base/check.h"
#include "cairn/base/internal/hash.h"
#include "cairn/base/metrics.h"
#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/index/index_allocator.h"
#include "cairn/index/internal/arena.h"
#include "cairn/index/internal/bucket.h"

CAIRN_NAMESPACE_BEGIN

namespace index_internal {

// A fresh seed from the OS random source.
std::uint64_t RandomSeed() noexcept;
// A process-unique map id (never 0).
std::uint64_t NextMapId() noexcept;

// Test-only access to a map's rehash position and chain count; defined in
// the tests (tests/testing/scan_hash_map_peer.h), not part of the API.
class ScanHashMapTestPeer;

inline std::uint64_t ReverseBits(std::uint64_t v) noexcept {
  v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
  v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
  v = ((v >> 4) & 0x0F0F0F0F0F0F0F0Full) | ((v & 0x0F0F0F0F0F0F0F0Full) << 4);
  return __builtin_bswap64(v);
}

// Keys too long for an arena block (ScanHashMapEntry::kMaxInlineKeyBytes),
// each in an allocation of its own: a header, then the key bytes. The
// headers form a doubly linked list, so a population frees every long key
// when it is destroyed without visiting its entries.
class LongKeys {
 public:
  explicit LongKeys(IndexAllocator* allocator) noexcept
      : allocator_(allocator) {}
  LongKeys(const LongKeys&) = delete;
  LongKeys& operator=(const LongKeys&) = delete;
  LongKeys(LongKeys&& other) noexcept
      : allocator_(other.allocator_),
        head_(std::exchange(other.head_, nullptr)),
        bytes_(std::exchange(other.bytes_, 0)) {}
  LongKeys& operator=(LongKeys&& other) noexcept {
    if (this != &other) {
      Release();
      allocator_ = other.allocator_;
      head_ = std::exchange(other.head_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ~LongKeys() { Release(); }

  // A copy of `key`, or null if the allocator refused.
  const char* Add(std::string_view key) noexcept {
    const std::size_t bytes = sizeof(Header) + key.size();
    void* memory = allocator_->Allocate(bytes, alignof(Header));
    if (memory == nullptr) return nullptr;
    auto* header = new (memory) Header{nullptr, head_, bytes};
    if (head_ != nullptr) head_->prev = header;
    head_ = header;
    bytes_ += bytes;
    char* copy = reinterpret_cast<char*>(header + 1);
    std::memcpy(copy, key.data(), key.size());
    return copy;
  }
  // Frees a copy Add returned.
  void Remove(const char* key) noexcept {
    Header* header = reinterpret_cast<Header*>(const_cast<char*>(key)) - 1;
    if (header->prev != nullptr) {
      header->prev->next = header->next;
    } else {
      head_ = header->next;
    }
    if (header->next != nullptr) header->next->prev = header->prev;
    bytes_ -= header->bytes;
    allocator_->Deallocate(header, header->bytes, alignof(Header));
  }
  // Bytes held from the allocator, headers included.
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  struct Header {
    Header* prev;
    Header* next;
    std::size_t bytes;  // this allocation's, header included
  };
  void Release() noexcept {
    while (head_ != nullptr) {
      Header* next = head_->next;
      allocator_->Deallocate(head_, head_->bytes, alignof(Header));
      head_ = next;
    }
    bytes_ = 0;
  }

  IndexAllocator* allocator_;
  Header* head_ = nullptr;
  std::size_t bytes_ = 0;
};

// Everything a population owns: both tables, the overflow pool, the arena,
// the long keys.
struct Storage {
  explicit Storage(IndexAllocator* allocator_in) noexcept
      : allocator(allocator_in),
        pool(allocator_in),
        arena(allocator_in),
        long_keys(allocator_in) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  Storage(Storage&& other) noexcept
      : allocator(other.allocator),
        pool(std::move(other.pool)),
        arena(std::move(other.arena)),
        long_keys(std::move(other.long_keys)) {
    TakeTables(other);
  }
  Storage& operator=(Storage&& other) noexcept {
    if (this != &other) {
      FreeTables();
      allocator = other.allocator;
      pool = std::move(other.pool);
      arena = std::move(other.arena);
      long_keys = std::move(other.long_keys);
      TakeTables(other);
    }
    return *this;
  }
  ~Storage() { FreeTables(); }

  void FreeTable(Table& table) noexcept {
    if (table.buckets != nullptr) {
      allocator->Deallocate(table.buckets, table.bytes(),
                            TableAlignment(table.bytes()));
    }
    table = Table{};
  }
  void FreeTables() noexcept {
    FreeTable(tables[0]);
    FreeTable(tables[1]);
  }
  void TakeTables(Storage& other) noexcept {
    tables[0] = std::exchange(other.tables[0], Table{});
    tables[1] = std::exchange(other.tables[1], Table{});
    rehashing = std::exchange(other.rehashing, false);
    rehash_index = std::exchange(other.rehash_index, 0);
    size = std::exchange(other.size, 0);
  }

  // What every lookup reads first, together (PrefetchMetadata): the
  // tables and the rehash position; the arena's slab directory pointer
  // follows the pool.
  IndexAllocator* allocator;
  Table tables[2];
  bool rehashing = false;
  std::uint64_t rehash_index = 0;  // next bucket of tables[0] to move
  std::size_t size = 0;
  BucketPool pool;
  EntryArena arena;
  LongKeys long_keys;
};

}  // namespace index_internal

// What a ScanHashMap call did: one byte, never allocates. Each value equals
// the StatusCode of the same name, so ToStatus() is a cast.
// (clang-format misreads the attribute and mangles the braces.)
// clang-format off
enum class [[nodiscard]] ScanHashMapOutcome : std::uint8_t {
  kOk = static_cast<std::uint8_t>(StatusCode::kOk),
  // An empty key, or a key over max_key_bytes.
  kInvalidArgument = static_cast<std::uint8_t>(StatusCode::kInvalidArgument),
  // Erase, ReplaceValue: the key is absent.
  kNotFound = static_cast<std::uint8_t>(StatusCode::kNotFound),
  // Insert: the key is present.
  kAlreadyExists = static_cast<std::uint8_t>(StatusCode::kAlreadyExists),
  // The IndexAllocator returned null; the call changed nothing.
  kResourceExhausted =
      static_cast<std::uint8_t>(StatusCode::kResourceExhausted),
  // ScanStable: the cursor is of another map or generation, or stale.
  kFailedPrecondition =
      static_cast<std::uint8_t>(StatusCode::kFailedPrecondition),
};
// clang-format on

constexpr StatusCode ToStatusCode(ScanHashMapOutcome outcome) noexcept {
  return static_cast<StatusCode>(outcome);
}
// A code-only Status (never allocates), for hosts that want one.
inline Status ToStatus(ScanHashMapOutcome outcome) noexcept {
  return Status(ToStatusCode(outcome));
}

struct ScanHashMapOptions {
  // Longest accepted key (at most 65535); longer keys get kInvalidArgument.
  // A key that does not fit one arena block with its value (about 4 KiB)
  // is stored out of line, in an allocation of its own.
  std::size_t max_key_bytes = 1024;
  // Cap on the bucket-index bits (0..32). A small cap forces collisions.
  int max_exponent = 32;
  // Hash seed; 0 draws one from the OS random source.
  std::uint64_t seed = 0;
  // Memory source for buckets, chains and arena; null = DefaultIndexAllocator.
  IndexAllocator* allocator = nullptr;
};

// Bytes the map holds from its allocator, by purpose.
struct ScanHashMapMemory {
  std::size_t bucket_bytes = 0;       // both tables' bucket arrays
  std::size_t chain_bytes = 0;        // overflow bucket pool (used and free)
  std::size_t arena_bytes = 0;        // arena slabs and directory
  std::size_t arena_live_bytes = 0;   // live entries, rounded to 8 bytes
  std::size_t arena_slack_bytes = 0;  // arena_bytes - arena_live_bytes
  std::size_t long_key_bytes = 0;     // keys stored out of line
  std::size_t total_bytes = 0;        // bucket + chain + arena + long keys
};

struct ScanHashMapStats {
  std::uint64_t rehashes_started = 0;
  std::uint64_t rehash_steps = 0;
  // Resize work (starting a resize, or one rehash step) that could not
  // allocate. Such work changes nothing and is retried by a later mutation
  // or Maintain().
  std::uint64_t rehash_step_failures = 0;
  std::uint64_t chain_compactions = 0;
};

namespace index_internal {
// What ScanHashMap::VisitMetrics reports, read from the map; the reporting
// itself is compiled once (scan_hash_map.cc), not per Value type.
struct ScanHashMapMetricsInput {
  std::size_t entries = 0;
  std::uint64_t slots = 0;  // slots of the table new entries go to
  bool rehashing = false;
  ScanHashMapMemory memory;
  ScanHashMapStats stats;
};
void VisitScanHashMapMetrics(const ScanHashMapMetricsInput& in,
                             MetricVisitor& visitor,
                             std::span<const MetricLabel> labels);
}  // namespace index_internal

// Position of an exact scan (ScanStable). Valid only for the map, generation
// and mutation count it was started at.
struct StableScanCursor {
  std::uint64_t map_id = 0;
  std::uint64_t generation = 0;
  std::uint64_t version = 0;
  int table = 0;
  std::uint64_t bucket = 0;
  bool done = false;
};

// What a ForEachUntil callback returns: go on to the next entry, or stop
// the traversal there.
enum class ScanControl : std::uint8_t { kContinue, kStop };

template <typename Value>
class ScanHashMap;

// An entry in the arena: the value, then the key bytes, or, for a key longer
// than kMaxInlineKeyBytes, a pointer to the key stored out of line. Its
// address is stable until it is erased or its population is destroyed.
template <typename Value>
class ScanHashMapEntry {
 public:
  ScanHashMapEntry(const ScanHashMapEntry&) = delete;
  ScanHashMapEntry& operator=(const ScanHashMapEntry&) = delete;

  Value& value() noexcept { return value_; }
  const Value& value() const noexcept { return value_; }
  std::string_view key() const noexcept { return {KeyBytes(), key_size_}; }
  std::uintptr_t address() const noexcept {
    return reinterpret_cast<std::uintptr_t>(this);
  }

 private:
  friend class ScanHashMap<Value>;
  static constexpr std::size_t kKeyOffset =
      (sizeof(Value) + alignof(std::uint16_t) - 1) / alignof(std::uint16_t) *
          alignof(std::uint16_t) +
      sizeof(std::uint16_t);

  ScanHashMapEntry(const Value& value, std::uint16_t key_size) noexcept
      : value_(value), key_size_(key_size) {}

  // Longer keys live out of line (one allocation each), so a key's length
  // is bounded by ScanHashMapOptions::max_key_bytes only.
  static constexpr std::size_t kMaxInlineKeyBytes =
      index_internal::EntryArena::kLargestClassBytes - kKeyOffset;
  static constexpr bool IsLong(std::size_t key_size) noexcept {
    return key_size > kMaxInlineKeyBytes;
  }

  static constexpr std::size_t BytesFor(std::size_t key_size) noexcept {
    const std::size_t stored =
        IsLong(key_size) ? sizeof(const char*) : key_size;
    return kKeyOffset + stored < sizeof(ScanHashMapEntry)
               ? sizeof(ScanHashMapEntry)
               : kKeyOffset + stored;
  }
  const char* KeyBytes() const noexcept {
    const char* bytes = reinterpret_cast<const char*>(this) + kKeyOffset;
    if (!IsLong(key_size_)) [[likely]]
      return bytes;
    const char* out_of_line;
    std::memcpy(&out_of_line, bytes, sizeof(out_of_line));
    return out_of_line;
  }
  bool KeyEquals(std::string_view key) const noexcept {
    return key.size() == key_size_ &&
           std::memcmp(KeyBytes(), key.data(), key.size()) == 0;
  }
  std::size_t bytes() const noexcept { return BytesFor(key_size_); }

  Value value_;
  std::uint16_t key_size_;
};

// What Insert and Upsert return. `entry` is the entry written (kOk), the
// entry already holding the key (Insert's kAlreadyExists), else null.
template <typename Value>
struct [[nodiscard]] ScanHashMapInsertResult {
  ScanHashMapEntry<Value>* entry = nullptr;
  ScanHashMapOutcome outcome = ScanHashMapOutcome::kOk;

  bool ok() const noexcept { return outcome == ScanHashMapOutcome::kOk; }
};

// A population taken out of a map by Detach(). It keeps every entry address
// valid until destroyed, so receipts of the old generation can still be
// compared (never dereferenced through the map). Thread safety: a plain
// object; may be destroyed on any thread.
class ScanHashMapPopulation {
 public:
  ScanHashMapPopulation(ScanHashMapPopulation&&) noexcept = default;
  ScanHashMapPopulation& operator=(ScanHashMapPopulation&&) noexcept = default;

  std::size_t size() const noexcept { return storage_.size; }
  std::size_t memory_bytes() const noexcept {
    return storage_.tables[0].bytes() + storage_.tables[1].bytes() +
           storage_.pool.reserved_bytes() + storage_.arena.reserved_bytes() +
           storage_.long_keys.bytes();
  }

 private:
  template <typename>
  friend class ScanHashMap;
  explicit ScanHashMapPopulation(index_internal::Storage&& storage) noexcept
      : storage_(std::move(storage)) {}
  index_internal::Storage storage_;
};

template <typename Value>
class ScanHashMap {
  static_assert(std::is_trivially_copyable_v<Value> &&
                    std::is_trivially_destructible_v<Value>,
                "ScanHashMap values are plain records");
  static_assert(alignof(Value) <= index_internal::EntryArena::kGranule,
                "the arena aligns entries to 8 bytes");
  static_assert(sizeof(Value) + 64 <=
                    index_internal::EntryArena::kLargestClassBytes,
                "a value over the arena's largest class (less room for a "
                "64-byte key) is rejected at compile time");

 public:
  using Entry = ScanHashMapEntry<Value>;
  using Outcome = ScanHashMapOutcome;
  using InsertResult = ScanHashMapInsertResult<Value>;

  // Largest entry (value, key size and inline key) the arena holds in one
  // block; a longer key is stored out of line.
  static constexpr std::size_t kMaxEntryBytes =
      index_internal::EntryArena::kLargestClassBytes;

  explicit ScanHashMap(const ScanHashMapOptions& options = {}) noexcept
      : max_key_bytes_(options.max_key_bytes > 65535 ? 65535
                                                     : options.max_key_bytes),
        max_exponent_(options.max_exponent < 0    ? 0
                      : options.max_exponent > 32 ? 32
                                                  : options.max_exponent),
        seed_(options.seed != 0 ? options.seed : index_internal::RandomSeed()),
        map_id_(index_internal::NextMapId()),
        allocator_(options.allocator != nullptr ? options.allocator
                                                : DefaultIndexAllocator()),
        storage_(allocator_) {}

  ScanHashMap(const ScanHashMap&) = delete;
  ScanHashMap& operator=(const ScanHashMap&) = delete;
  ~ScanHashMap() = default;

  // --- Hashing (any thread, no state) ---------------------------------------

  std::uint64_t HashOf(std::string_view key) const noexcept {
    return base_internal::KeyedHash(key, seed_);
  }
  static std::uint32_t Hash32(std::uint64_t hash) noexcept {
    return static_cast<std::uint32_t>(hash);
  }
  static std::uint8_t TagOf(std::uint64_t hash) noexcept {
    return static_cast<std::uint8_t>(hash >> 56);
  }

  // --- Lookups (const: never allocate, never step the rehash) ---------------

  // The entry for `key`, or null.
  const Entry* Find(std::string_view key) const noexcept {
    return Find(key, HashOf(key));
  }
  Entry* Find(std::string_view key) noexcept {
    return const_cast<Entry*>(std::as_const(*this).Find(key));
  }
  // As Find, with the hash from HashOf(key).
  const Entry* Find(std::string_view key, std::uint64_t hash) const noexcept {
    const Table* tables[2];
    const int count = Route(Hash32(hash), tables);
    for (int t = 0; t < count; ++t) {
      if (const Entry* e = FindInTable(*tables[t], hash, key)) return e;
    }
    return nullptr;
  }

  // Finds each keys[i] into out[i] (null on a miss; out.size() >= keys.size()).
  // Stages the work across the batch: key i is hashed and its bucket
  // prefetched kBucketAhead keys before its tags are matched and every
  // candidate entry prefetched (each line the key compare will read), which
  // happens kEntryAhead keys before the key compare, so about
  // kBucketAhead + kEntryAhead misses are in flight. The
  // distances are tunables per CPU (FindBatchStaged); FindBatch uses the
  // defaults measured on this project's bench machine.
  static constexpr std::size_t kBatchBucketAhead = 16;
  static constexpr std::size_t kBatchEntryAhead = 8;
  void FindBatch(std::span<const std::string_view> keys,
                 std::span<const Entry*> out) const noexcept {
    FindBatchStaged<kBatchBucketAhead, kBatchEntryAhead>(keys, out);
  }
  template <std::size_t kBucketAhead, std::size_t kEntryAhead>
  void FindBatchStaged(std::span<const std::string_view> keys,
                       std::span<const Entry*> out) const noexcept {
    constexpr std::size_t kRing = 64;
    static_assert(kBucketAhead >= 1 && kEntryAhead >= 1 &&
                  kBucketAhead + kEntryAhead < kRing);
    CAIRN_CHECK(out.size() >= keys.size());
    std::uint64_t hashes[kRing];
    const Bucket* heads[kRing];
    const std::size_t n = keys.size();
    for (std::size_t i = 0; i < n + kBucketAhead + kEntryAhead; ++i) {
      if (i < n) {
        const std::uint64_t h = HashOf(keys[i]);
        hashes[i % kRing] = h;
        heads[i % kRing] = PrefetchRoutes(h);
      }
      if (i >= kBucketAhead && i - kBucketAhead < n) {
        const std::size_t j = i - kBucketAhead;
        if (const Bucket* b = heads[j % kRing]) {
          // Every candidate (a false tag match costs one prefetch), and the
          // entry's second line when its key crosses into it.
          const std::size_t entry_bytes = Entry::BytesFor(keys[j].size());
          std::uint32_t m =
              index_internal::MatchTags(*b, TagOf(hashes[j % kRing]));
          while (m != 0) {
            const std::uint32_t handle = b->handles[std::countr_zero(m)];
            m &= m - 1;
            if (handle != 0) PrefetchEntry(handle, entry_bytes);
          }
        }
      }
      if (i >= kBucketAhead + kEntryAhead) {
        const std::size_t k = i - kBucketAhead - kEntryAhead;
        out[k] = Find(keys[k], hashes[k % kRing]);
      }
    }
  }

  // The entry whose address is `address` among the entries with this hash,
  // or null. Tagged: checks only slots whose tag matches (SIMD filter), then
  // occupancy and the exact address; untagged: every occupied slot. Both
  // search the bucket chains of both tables during a rehash. `address` is
  // only compared, never dereferenced, so stale receipts are safe.
  const Entry* FindAddress(std::uintptr_t address, std::uint32_t hash32,
                           std::uint8_t tag) const noexcept {
    const Table* tables[2];
    const int count = Route(hash32, tables);
    for (int t = 0; t < count; ++t) {
      for (const Bucket* b = &HeadBucket(*tables[t], hash32); b != nullptr;
           b = Child(*b)) {
        std::uint32_t m = index_internal::MatchTags(*b, tag);
        while (m != 0) {
          const std::uint32_t handle = b->handles[std::countr_zero(m)];
          m &= m - 1;
          if (handle != 0 && AddressOf(handle) == address)
            return EntryAt(handle);
        }
      }
    }
    return nullptr;
  }
  // Owner-only forms for a flush pass that updates the found entry's value
  // (cairn/flush/receipt_pass.h); same search, no side effects.
  Entry* FindAddress(std::uintptr_t address, std::uint32_t hash32,
                     std::uint8_t tag) noexcept {
    return const_cast<Entry*>(
        std::as_const(*this).FindAddress(address, hash32, tag));
  }
  const Entry* FindAddress(std::uintptr_t address,
                           std::uint32_t hash32) const noexcept {
    const Table* tables[2];
    const int count = Route(hash32, tables);
    for (int t = 0; t < count; ++t) {
      for (const Bucket* b = &HeadBucket(*tables[t], hash32); b != nullptr;
           b = Child(*b)) {
        for (int i = 0; i < index_internal::kSlotsPerBucket; ++i) {
          const std::uint32_t handle = b->handles[i];
          if (handle != 0 && AddressOf(handle) == address)
            return EntryAt(handle);
        }
      }
    }
    return nullptr;
  }

  // --- Prefetch hints (const, pure: no observable effect) -------------------

  // Prefetches the lines of the map object a lookup reads (generation,
  // tables, rehash position, arena header), for hosts that touch many small
  // maps. Issues prefetches only: it loads nothing, so it never waits for
  // a miss (the map object is over 2 KiB, most of it free lists).
  void PrefetchMetadata() const noexcept {
    index_internal::PrefetchRead(&generation_);
    index_internal::PrefetchRead(&storage_.tables[0]);
    index_internal::PrefetchRead(&storage_.size);
    index_internal::PrefetchRead(&storage_.arena);
  }
  // Prefetches the head bucket(s) `hash` routes to and the first line of
  // the arena's slab directory (for a small map, all of it). Reads the
  // map's tables and arena header, which PrefetchMetadata brings in. Only
  // the low 32 bits route, so a receipt's 32-bit hash may be passed as is.
  void PrefetchBucket(std::uint64_t hash) const noexcept {
    PrefetchRoutes(hash);
    storage_.arena.PrefetchDirectory();
  }

  // --- Mutations (owner-only) -----------------------------------------------
  //
  // An error outcome means the call changed nothing (see the top of this
  // file). A successful Insert, Upsert or Erase then moves one bucket chain
  // of a resize in progress, or starts a resize the new size calls for;
  // that side work, if it cannot allocate, is left for later and does not
  // change the call's outcome.

  // Inserts key -> value. kAlreadyExists (with the present entry) if the key
  // is present, kInvalidArgument for an empty key or a key over
  // max_key_bytes, kResourceExhausted if an allocation failed (nothing
  // changed). May allocate.
  InsertResult Insert(std::string_view key, const Value& value) noexcept {
    if (const Outcome invalid = ValidateKey(key); invalid != Outcome::kOk) {
      return {nullptr, invalid};
    }
    const std::uint64_t hash = HashOf(key);
    if (const Entry* found = Find(key, hash)) {
      return {const_cast<Entry*>(found), Outcome::kAlreadyExists};
    }
    return InsertNew(key, hash, value);
  }

  // Inserts or replaces the value. Same outcomes as Insert except
  // kAlreadyExists. May allocate (only for a new key).
  InsertResult Upsert(std::string_view key, const Value& value) noexcept {
    if (const Outcome invalid = ValidateKey(key); invalid != Outcome::kOk) {
      return {nullptr, invalid};
    }
    const std::uint64_t hash = HashOf(key);
    if (const Entry* found = Find(key, hash)) {
      Entry* entry = const_cast<Entry*>(found);
      entry->value_ = value;
      ++version_;
      StepRehash();
      return {entry, Outcome::kOk};
    }
    return InsertNew(key, hash, value);
  }

  // Erases `key`; kNotFound if absent. Frees its arena block (the address may
  // be reused by a later insert) and compacts the chain; may start a shrink.
  // Never fails for lack of memory.
  Outcome Erase(std::string_view key) noexcept {
    const std::uint64_t hash = HashOf(key);
    const std::uint32_t h32 = Hash32(hash);
    const std::uint8_t tag = TagOf(hash);
    int which[2];
    const int count = RouteIndices(h32, which);
    for (int t = 0; t < count; ++t) {
      Table* table = &storage_.tables[which[t]];
      Bucket* head = &HeadBucket(*table, h32);
      for (Bucket* b = head; b != nullptr; b = MutableChild(*b)) {
        std::uint32_t m = index_internal::MatchTags(*b, tag);
        while (m != 0) {
          const int slot = std::countr_zero(m);
          m &= m - 1;
          const std::uint32_t handle = b->handles[slot];
          if (handle == 0 || !EntryAt(handle)->KeyEquals(key)) continue;
          // The tag stays behind as a stale filter byte (X1).
          b->handles[slot] = 0;
          const Entry* erased = EntryAt(handle);
          if (Entry::IsLong(erased->key_size_)) {
            storage_.long_keys.Remove(erased->KeyBytes());
          }
          storage_.arena.Free(handle, erased->bytes());
          --table->used;
          --storage_.size;
          ++version_;
          CompactChain(*head);
          StepRehash();
          MaybeStartResize();
          return Outcome::kOk;
        }
      }
    }
    return Outcome::kNotFound;
  }

  // Replaces the value of an existing key; kNotFound if absent. Never
  // allocates, never steps the rehash.
  Outcome ReplaceValue(std::string_view key, const Value& value) noexcept {
    Entry* entry = Find(key);
    if (entry == nullptr) return Outcome::kNotFound;
    entry->value_ = value;
    ++version_;
    return Outcome::kOk;
  }

  // Idle-time work: starts a resize the size calls for, then moves up to
  // `max_steps` bucket chains. Each unit of work is all or nothing; at the
  // first that cannot allocate, Maintain stops and returns
  // kResourceExhausted (that unit changed nothing; earlier ones are kept).
  Outcome Maintain(std::size_t max_steps = 64) noexcept {
    if (!MaybeStartResize()) return Outcome::kResourceExhausted;
    for (std::size_t i = 0; i < max_steps && storage_.rehashing; ++i) {
      if (!RehashStep()) {
        ++stats_.rehash_step_failures;
        return Outcome::kResourceExhausted;
      }
    }
    return Outcome::kOk;
  }

  // Sizes the table so that inserting entries up to a size of `expected`
  // triggers no rehash (X9). May allocate. On a populated map it moves every
  // entry into the new table at once (O(size)), finishing any resize in
  // progress. kResourceExhausted if an allocation failed: the map changed
  // nothing (all memory is acquired before anything moves).
  Outcome PreallocateForExpectedSize(std::size_t expected) noexcept {
    int target = 0;
    while (target < max_exponent_ && expected > (std::uint64_t{9} << target)) {
      ++target;
    }
    Table& t0 = storage_.tables[0];
    if (!t0.present()) {
      return AllocateTable(t0, target) ? Outcome::kOk
                                       : Outcome::kResourceExhausted;
    }
    if (!storage_.rehashing && t0.exponent >= target) return Outcome::kOk;
    return MigrateAll(std::max(target, exponent()))
               ? Outcome::kOk
               : Outcome::kResourceExhausted;
  }

  // Takes the whole population out of the map; the map is empty afterwards
  // and its generation advances. Never allocates.
  [[nodiscard]] ScanHashMapPopulation Detach() noexcept {
    ScanHashMapPopulation out(std::move(storage_));
    storage_ = index_internal::Storage(allocator_);
    chain_bound_[0] = chain_bound_[1] = 1;
    ++generation_;
    ++version_;
    return out;
  }

  // --- Scans (const) ---------------------------------------------------------

  // Emits the entries of one cursor position to fn(const Entry&) and returns
  // the next cursor (0: the scan is complete). Start with 0. Every entry
  // present for the whole scan is emitted at least once, across grows,
  // shrinks and mutations between calls (X5); an entry may be emitted more
  // than once. Any cursor value is safe: a cursor from another map or an
  // older generation just continues over the current population without the
  // guarantee.
  template <typename Fn>
  std::uint64_t Scan(std::uint64_t cursor, Fn&& fn) const {
    const Table& t0 = storage_.tables[0];
    if (!t0.present()) return 0;
    if (!storage_.rehashing) {
      EmitChain(t0, cursor, fn);
      return NextCursor(cursor, t0.mask());
    }
    const Table& t1 = storage_.tables[1];
    const Table& small = t0.exponent <= t1.exponent ? t0 : t1;
    const Table& large = t0.exponent <= t1.exponent ? t1 : t0;
    EmitChain(small, cursor, fn);
    const std::uint64_t extra = std::uint64_t{small.mask()} ^ large.mask();
    do {
      EmitChain(large, cursor, fn);
      cursor = NextCursor(cursor, large.mask());
    } while ((cursor & extra) != 0);
    return cursor;
  }

  StableScanCursor StableScanBegin() const noexcept {
    StableScanCursor cursor;
    cursor.map_id = map_id_;
    cursor.generation = generation_;
    cursor.version = version_;
    return cursor;
  }
  // Exact scan of a frozen map: emits up to `max_buckets` bucket chains and
  // advances `cursor`; cursor.done once every entry was emitted exactly once.
  // kFailedPrecondition (nothing emitted) if the cursor belongs to another
  // map or generation, or the map was mutated since StableScanBegin.
  template <typename Fn>
  Outcome ScanStable(StableScanCursor& cursor, Fn&& fn,
                     std::size_t max_buckets = 1) const {
    if (cursor.map_id != map_id_ || cursor.generation != generation_ ||
        cursor.version != version_) {
      return Outcome::kFailedPrecondition;
    }
    for (std::size_t n = 0; n < max_buckets && !cursor.done;) {
      const Table& table = storage_.tables[cursor.table];
      if (cursor.bucket >= table.bucket_count()) {
        if (cursor.table == 1 || !storage_.rehashing) {
          cursor.done = true;
        } else {
          cursor.table = 1;
          cursor.bucket = 0;
        }
        continue;
      }
      EmitChain(table, cursor.bucket, fn);
      ++cursor.bucket;
      ++n;
    }
    return Outcome::kOk;
  }

  // Visits every entry once, in table order, calling fn(const Entry&), which
  // returns ScanControl::kStop to end the traversal at that entry or
  // kContinue to go on. Returns true if fn stopped it, false if every entry
  // was visited (an empty map: false, fn never called). Both tables are
  // walked during a rehash; each entry lives in exactly one of them, so
  // every entry is visited exactly once. One call is one pass: there is no
  // cursor to resume from (use Scan or ScanStable for that). Const: never
  // allocates, never steps the rehash; fn must not mutate the map. O(size +
  // buckets) for a full pass, less when stopped early.
  template <typename Fn>
  bool ForEachUntil(Fn&& fn) const {
    static_assert(
        std::is_same_v<std::invoke_result_t<Fn&, const Entry&>, ScanControl>,
        "ForEachUntil: fn(const Entry&) returns ScanControl");
    const int tables = storage_.rehashing ? 2 : 1;
    for (int t = 0; t < tables; ++t) {
      const Table& table = storage_.tables[t];
      for (std::uint64_t i = 0; i < table.bucket_count(); ++i) {
        for (const Bucket* b = &table.buckets[i]; b != nullptr; b = Child(*b)) {
          for (int slot = 0; slot < index_internal::kSlotsPerBucket; ++slot) {
            const std::uint32_t handle = b->handles[slot];
            if (handle == 0) continue;
            if (fn(static_cast<const Entry&>(*EntryAt(handle))) ==
                ScanControl::kStop) {
              return true;
            }
          }
        }
      }
    }
    return false;
  }

  // Uniform random sampling, with replacement: emits n entries to
  // fn(const Entry&), each drawn independently and uniformly at random over
  // the map's entries (so an entry may come more than once), using
  // `rng`, a uniform random bit generator (std::mt19937_64, say) that the
  // caller owns and seeds. Returns the number emitted: n, or 0 on an empty
  // map (fn never called). For eviction sampling and a RANDOMKEY.
  //
  // Method: rejection over a virtual grid. Each table contributes its
  // buckets (during a rehash, the old table only from the rehash position
  // on: the chains before it are empty) times chain_bound * 12 slot
  // positions, where chain_bound is an upper bound on the length, in
  // buckets, of any chain of that table. A probe draws one grid position
  // uniformly and accepts it if that slot of that chain exists and is
  // occupied. Every entry occupies exactly one position, so every accepted
  // probe is uniform over the entries whatever the chain lengths, across
  // both tables during a rehash.
  //
  // Bounds. A draw gives up after kSampleMaxProbes probes; and when the grid
  // has more than kSampleSparseRatio positions per entry (a nearly empty
  // large table: after a Preallocate, or mass erases outrunning the shrink)
  // every draw skips the probes. Such a draw takes the first non-empty chain
  // at or after a uniformly random grid bucket (wrapping around) and a
  // uniformly random entry of that chain. That fallback is NOT uniform: a
  // chain is chosen in proportion to the run of empty buckets before it
  // plus one, and an entry of a long chain less often than one of a short
  // chain. It costs up to one pass over the buckets. When probes are used
  // (at most 64 positions per entry) a draw falls back with probability
  // below 1e-7; at the map's normal load (3/12 to 9/12 of the slots used,
  // chains of one or two buckets) a draw takes about 1.3 to 8 probes and
  // falls back with probability below 1e-50.
  //
  // Const: reads only; never allocates, never steps the rehash. fn must not
  // mutate the map. Safe concurrently with other const calls if each thread
  // uses its own rng.
  static constexpr std::size_t kSampleMaxProbes = 1024;
  static constexpr std::uint64_t kSampleSparseRatio = 64;
  template <typename Rng, typename Fn>
  std::size_t SampleRandom(Rng& rng, std::size_t n, Fn&& fn) const {
    if (storage_.size == 0 || n == 0) return 0;
    const SampleGrid grid = MakeSampleGrid();
    const bool sparse = grid.positions == 0 ||
                        grid.positions / storage_.size > kSampleSparseRatio;
    for (std::size_t drawn = 0; drawn < n; ++drawn) {
      std::uint32_t handle = 0;
      for (std::size_t probe = 0; !sparse && probe < kSampleMaxProbes;
           ++probe) {
        handle = ProbeSampleGrid(grid, UniformBelow(rng, grid.positions));
        if (handle != 0) break;
      }
      if (handle == 0) handle = SampleFromRandomChain(grid, rng);
      fn(static_cast<const Entry&>(*EntryAt(handle)));
    }
    return n;
  }

  // --- Introspection (const) ------------------------------------------------

  std::size_t size() const noexcept { return storage_.size; }
  bool empty() const noexcept { return storage_.size == 0; }
  std::uint64_t generation() const noexcept { return generation_; }
  std::uint64_t seed() const noexcept { return seed_; }
  // Exponent of the table new entries go to (-1: no table yet).
  int exponent() const noexcept {
    return storage_.tables[storage_.rehashing ? 1 : 0].exponent;
  }
  std::size_t max_key_bytes() const noexcept { return max_key_bytes_; }
  const ScanHashMapStats& stats() const noexcept { return stats_; }
  // Reports size, capacity, load, memory and resize counts as cairn_index_*
  // metrics (docs/metrics.md, "Index"), each with `labels` first (at most
  // LabelScope::kMaxLabels - 1 of them). A const call: on the owner thread,
  // or while no mutating call runs (see Thread safety). Reads the map's
  // own fields only; allocates nothing itself (the visitor may).
  void VisitMetrics(MetricVisitor& visitor,
                    std::span<const MetricLabel> labels = {}) const {
    index_internal::ScanHashMapMetricsInput in;
    in.entries = storage_.size;
    const int e = exponent();
    in.slots = e < 0 ? 0
                     : (std::uint64_t{1} << e) *
                           std::uint64_t{index_internal::kSlotsPerBucket};
    in.rehashing = storage_.rehashing;
    in.memory = Memory();
    in.stats = stats_;
    index_internal::VisitScanHashMapMetrics(in, visitor, labels);
  }
  ScanHashMapMemory Memory() const noexcept {
    ScanHashMapMemory m;
    m.bucket_bytes = storage_.tables[0].bytes() + storage_.tables[1].bytes();
    m.chain_bytes = storage_.pool.reserved_bytes();
    m.arena_bytes = storage_.arena.reserved_bytes();
    m.arena_live_bytes = storage_.arena.live_bytes();
    m.arena_slack_bytes = m.arena_bytes - m.arena_live_bytes;
    m.long_key_bytes = storage_.long_keys.bytes();
    m.total_bytes =
        m.bucket_bytes + m.chain_bytes + m.arena_bytes + m.long_key_bytes;
    return m;
  }

 private:
  using Bucket = index_internal::Bucket;
  using Table = index_internal::Table;

  friend class index_internal::ScanHashMapTestPeer;

  Outcome ValidateKey(std::string_view key) const noexcept {
    if (key.empty() || key.size() > max_key_bytes_) {
      return Outcome::kInvalidArgument;
    }
    return Outcome::kOk;
  }

  std::uintptr_t AddressOf(std::uint32_t handle) const noexcept {
    return reinterpret_cast<std::uintptr_t>(storage_.arena.Address(handle));
  }
  Entry* EntryAt(std::uint32_t handle) const noexcept {
    return std::launder(static_cast<Entry*>(storage_.arena.Address(handle)));
  }
  Bucket& HeadBucket(const Table& table, std::uint32_t hash32) const noexcept {
    return table.buckets[hash32 & table.mask()];
  }
  const Bucket* Child(const Bucket& b) const noexcept {
    return b.child == 0 ? nullptr : &storage_.pool.Get(b.child);
  }
  Bucket* MutableChild(const Bucket& b) noexcept {
    return b.child == 0 ? nullptr : &storage_.pool.Get(b.child);
  }

  // Tables that may hold an entry with this hash, in search order. During a
  // rehash an old bucket not yet moved may still hold it; entries inserted
  // during the rehash are in the new table.
  int Route(std::uint32_t hash32, const Table** out) const noexcept {
    int which[2];
    const int count = RouteIndices(hash32, which);
    for (int t = 0; t < count; ++t) out[t] = &storage_.tables[which[t]];
    return count;
  }
  int RouteIndices(std::uint32_t hash32, int* out) const noexcept {
    const Table& t0 = storage_.tables[0];
    if (!storage_.rehashing) {
      if (!t0.present()) return 0;
      out[0] = 0;
      return 1;
    }
    int count = 0;
    if ((hash32 & t0.mask()) >= storage_.rehash_index) out[count++] = 0;
    out[count++] = 1;
    return count;
  }

  // The sampling grid of SampleRandom: the old table's buckets from
  // `first0` on (all of them when not rehashing), then, during a rehash, the
  // new table's; each bucket spans its table's chain bound * 12 positions.
  // positions == 0 if the product would overflow (never for a map that
  // fits in memory; the fallback then serves every draw).
  struct SampleGrid {
    std::uint64_t first0 = 0;
    std::uint64_t buckets0 = 0;  // old-table buckets in the grid
    std::uint64_t buckets1 = 0;  // new-table buckets (rehash only)
    std::uint64_t span0 = 0;     // positions per old-table bucket
    std::uint64_t span1 = 0;     // positions per new-table bucket
    std::uint64_t positions = 0;
  };
  SampleGrid MakeSampleGrid() const noexcept {
    SampleGrid g;
    g.first0 = storage_.rehashing ? storage_.rehash_index : 0;
    g.buckets0 = storage_.tables[0].bucket_count() - g.first0;
    g.buckets1 = storage_.rehashing ? storage_.tables[1].bucket_count() : 0;
    g.span0 = std::uint64_t{chain_bound_[0]} * index_internal::kSlotsPerBucket;
    g.span1 = std::uint64_t{chain_bound_[1]} * index_internal::kSlotsPerBucket;
    constexpr std::uint64_t kMax = ~std::uint64_t{0};
    if (g.buckets0 > kMax / g.span0 || g.buckets1 > kMax / g.span1 ||
        g.buckets0 * g.span0 > kMax - g.buckets1 * g.span1) {
      return g;
    }
    g.positions = g.buckets0 * g.span0 + g.buckets1 * g.span1;
    return g;
  }
  // The handle at grid position `v`, or 0 (past the chain's end, or empty).
  std::uint32_t ProbeSampleGrid(const SampleGrid& g,
                                std::uint64_t v) const noexcept {
    const Table* table = &storage_.tables[0];
    std::uint64_t bucket;
    std::uint64_t slot;
    if (v < g.buckets0 * g.span0) {
      bucket = g.first0 + v / g.span0;
      slot = v % g.span0;
    } else {
      v -= g.buckets0 * g.span0;
      table = &storage_.tables[1];
      bucket = v / g.span1;
      slot = v % g.span1;
    }
    const Bucket* b = &table->buckets[bucket];
    for (std::uint64_t depth = slot / index_internal::kSlotsPerBucket;
         depth > 0; --depth) {
      b = Child(*b);
      if (b == nullptr) return 0;
    }
    return b->handles[slot % index_internal::kSlotsPerBucket];
  }
  // The fallback draw: a uniformly random entry of the first non-empty
  // chain at or after a uniformly random grid bucket. The map is not empty.
  template <typename Rng>
  std::uint32_t SampleFromRandomChain(const SampleGrid& g, Rng& rng) const {
    const std::uint64_t total = g.buckets0 + g.buckets1;
    std::uint64_t at = UniformBelow(rng, total);
    for (std::uint64_t walked = 0; walked < total; ++walked) {
      const Bucket* head = at < g.buckets0
                               ? &storage_.tables[0].buckets[g.first0 + at]
                               : &storage_.tables[1].buckets[at - g.buckets0];
      std::uint64_t count = 0;
      for (const Bucket* b = head; b != nullptr; b = Child(*b)) {
        count += static_cast<std::uint64_t>(
            std::popcount(index_internal::OccupiedSlots(*b)));
      }
      if (count != 0) {
        std::uint64_t pick = UniformBelow(rng, count);
        for (const Bucket* b = head; b != nullptr; b = Child(*b)) {
          for (int slot = 0; slot < index_internal::kSlotsPerBucket; ++slot) {
            if (b->handles[slot] != 0 && pick-- == 0) return b->handles[slot];
          }
        }
      }
      at = at + 1 == total ? 0 : at + 1;
    }
    CAIRN_CHECK_MSG(false, "ScanHashMap: sample of a non-empty map found none");
    return 0;
  }
  template <typename Rng>
  static std::uint64_t UniformBelow(Rng& rng, std::uint64_t bound) {
    return std::uniform_int_distribution<std::uint64_t>(0, bound - 1)(rng);
  }

  // Prefetches every cache line of an entry of `bytes` bytes.
  void PrefetchEntry(std::uint32_t handle, std::size_t bytes) const noexcept {
    const char* entry =
        static_cast<const char*>(storage_.arena.Address(handle));
    index_internal::PrefetchRead(entry);
    const std::uintptr_t line_offset =
        reinterpret_cast<std::uintptr_t>(entry) & 63;
    for (std::size_t next = 64 - line_offset; next < bytes; next += 64) {
      index_internal::PrefetchRead(entry + next);
    }
  }

  // Prefetches the routed head buckets; returns the first (null if none).
  const Bucket* PrefetchRoutes(std::uint64_t hash) const noexcept {
    const Table* tables[2];
    const int count = Route(Hash32(hash), tables);
    const Bucket* first = nullptr;
    for (int t = 0; t < count; ++t) {
      const Bucket* b = &HeadBucket(*tables[t], Hash32(hash));
      index_internal::PrefetchRead(b);
      if (first == nullptr) first = b;
    }
    return first;
  }

  const Entry* FindInTable(const Table& table, std::uint64_t hash,
                           std::string_view key) const noexcept {
    const std::uint8_t tag = TagOf(hash);
    const Bucket* b = &HeadBucket(table, Hash32(hash));
    for (;;) {
      std::uint32_t m = index_internal::MatchTags(*b, tag);
      while (m != 0) {
        const std::uint32_t handle = b->handles[std::countr_zero(m)];
        m &= m - 1;
        if (handle != 0) {
          const Entry* e = EntryAt(handle);
          if (e->KeyEquals(key)) return e;
        }
      }
      if (b->child == 0) return nullptr;
      b = &storage_.pool.Get(b->child);
    }
  }

  template <typename Fn>
  void EmitChain(const Table& table, std::uint64_t cursor, Fn& fn) const {
    for (const Bucket* b = &table.buckets[cursor & table.mask()]; b != nullptr;
         b = Child(*b)) {
      for (int i = 0; i < index_internal::kSlotsPerBucket; ++i) {
        if (b->handles[i] != 0)
          fn(static_cast<const Entry&>(*EntryAt(b->handles[i])));
      }
    }
  }

  static std::uint64_t NextCursor(std::uint64_t cursor,
                                  std::uint32_t mask) noexcept {
    cursor |= ~std::uint64_t{mask};
    cursor = index_internal::ReverseBits(cursor);
    ++cursor;
    return index_internal::ReverseBits(cursor);
  }

  bool AllocateTable(Table& table, int exponent) noexcept {
    const std::size_t bytes = (std::size_t{1} << exponent) * sizeof(Bucket);
    void* memory =
        allocator_->Allocate(bytes, index_internal::TableAlignment(bytes));
    if (memory == nullptr) return false;
    std::memset(memory, 0, bytes);
    table.buckets = static_cast<Bucket*>(memory);
    table.exponent = exponent;
    table.used = 0;
    return true;
  }

  // True if the chain at `index` has a free slot (Place needs no bucket).
  bool ChainHasRoom(const Table& table, std::uint32_t index) const noexcept {
    for (const Bucket* b = &table.buckets[index]; b != nullptr; b = Child(*b)) {
      if (index_internal::OccupiedSlots(*b) != index_internal::kAllSlotsMask) {
        return true;
      }
    }
    return false;
  }

  // Puts (tag, handle) in the first free slot of the chain at `index`,
  // extending the chain by one pool bucket if it is full. The caller has
  // reserved that bucket (checked). Returns the 1-based position, in
  // buckets, of the bucket it wrote (for chain_bound_).
  std::uint32_t Place(Table& table, std::uint32_t index, std::uint8_t tag,
                      std::uint32_t handle) noexcept {
    Bucket* b = &table.buckets[index];
    for (std::uint32_t depth = 1;; ++depth) {
      const std::uint32_t free =
          ~index_internal::OccupiedSlots(*b) & index_internal::kAllSlotsMask;
      if (free != 0) {
        const int slot = std::countr_zero(free);
        b->tags[slot] = tag;
        b->handles[slot] = handle;
        return depth;
      }
      if (b->child == 0) {
        const std::uint32_t id = storage_.pool.Acquire();
        CAIRN_CHECK_MSG(id != 0, "ScanHashMap: overflow bucket not reserved");
        b->child = id;  // Acquire may not move existing buckets: chunked pool
      }
      b = &storage_.pool.Get(b->child);
    }
  }

  // Inserts a key known to be absent. Acquires everything first (the first
  // table, arena memory, an overflow bucket), each all or nothing, and gives
  // back what it got if a later one fails; only then changes the map.
  InsertResult InsertNew(std::string_view key, std::uint64_t hash,
                         const Value& value) noexcept {
    const bool first_table = !storage_.tables[0].present();
    Table fresh;
    if (first_table && !AllocateTable(fresh, 0)) {
      return {nullptr, Outcome::kResourceExhausted};
    }
    const int target = storage_.rehashing ? 1 : 0;
    const Table& route = first_table ? fresh : storage_.tables[target];
    const std::uint32_t index = Hash32(hash) & route.mask();
    const std::size_t bytes = Entry::BytesFor(key.size());
    const char* long_key = nullptr;
    if (Entry::IsLong(key.size())) {
      long_key = storage_.long_keys.Add(key);
      if (long_key == nullptr) {
        storage_.FreeTable(fresh);
        return {nullptr, Outcome::kResourceExhausted};
      }
    }
    index_internal::EntryArena::Growth growth;
    if (!storage_.arena.Prepare(bytes, growth)) {
      if (long_key != nullptr) storage_.long_keys.Remove(long_key);
      storage_.FreeTable(fresh);
      return {nullptr, Outcome::kResourceExhausted};
    }
    if (!ChainHasRoom(route, index) && !storage_.pool.Reserve(1)) {
      storage_.arena.Abandon(growth);
      if (long_key != nullptr) storage_.long_keys.Remove(long_key);
      storage_.FreeTable(fresh);
      return {nullptr, Outcome::kResourceExhausted};
    }
    // Nothing below can fail.
    if (first_table) storage_.tables[0] = std::exchange(fresh, Table{});
    storage_.arena.Commit(growth);
    const std::uint32_t handle = storage_.arena.Allocate(bytes);
    void* memory = storage_.arena.Address(handle);
    Entry* entry =
        new (memory) Entry(value, static_cast<std::uint16_t>(key.size()));
    if (long_key != nullptr) {
      std::memcpy(static_cast<char*>(memory) + Entry::kKeyOffset, &long_key,
                  sizeof(long_key));
    } else {
      std::memcpy(static_cast<char*>(memory) + Entry::kKeyOffset, key.data(),
                  key.size());
    }
    Table& table = storage_.tables[target];
    RaiseChainBound(target, Place(table, index, TagOf(hash), handle));
    ++table.used;
    ++storage_.size;
    ++version_;
    StepRehash();
    MaybeStartResize(/*grow_only=*/true);
    return {entry, Outcome::kOk};
  }

  // The side work of a successful mutation: one rehash step.
  void StepRehash() noexcept {
    if (storage_.rehashing && !RehashStep()) ++stats_.rehash_step_failures;
  }

  // Starts the resize the size calls for, if any and none is running (an
  // insert only grows: a preallocated map must not shrink while it fills).
  // False (counted, nothing changed) if its table could not be allocated.
  bool MaybeStartResize(bool grow_only = false) noexcept {
    if (storage_.rehashing) return true;
    const Table& t0 = storage_.tables[0];
    if (!t0.present()) return true;
    const int e = t0.exponent;
    int target = e;
    if (storage_.size > (std::uint64_t{9} << e) && e < max_exponent_) {
      target = e + 1;
    } else if (!grow_only && e > 0 && storage_.size < (std::uint64_t{3} << e)) {
      target = e - 1;
    }
    if (target == e || StartRehash(target)) return true;
    ++stats_.rehash_step_failures;
    return false;
  }

  bool StartRehash(int exponent) noexcept {
    CAIRN_DCHECK(!storage_.rehashing);
    Table fresh;
    if (!AllocateTable(fresh, exponent)) return false;
    ++stats_.rehashes_started;
    ++version_;
    Table& t0 = storage_.tables[0];
    if (t0.used == 0) {  // nothing to move: switch at once
      storage_.FreeTable(t0);
      t0 = fresh;
      chain_bound_[0] = 1;
      return true;
    }
    storage_.tables[1] = fresh;
    chain_bound_[1] = 1;
    storage_.rehashing = true;
    storage_.rehash_index = 0;
    return true;
  }

  // Moves the chain at rehash_index from the old table to the new one. Plans
  // first: counts, per destination chain, the slots it needs and reserves
  // the overflow buckets (all or nothing); only then moves handles, which
  // cannot fail. False, with nothing changed, if the reservation failed.
  bool RehashStep() noexcept {
    Table& from = storage_.tables[0];
    Table& to = storage_.tables[1];
    Bucket* head = &from.buckets[storage_.rehash_index];
    struct Destination {
      std::uint32_t index;
      std::uint32_t free_slots;
      std::uint32_t incoming;
    };
    constexpr int kPlanned = 16;
    Destination plan[kPlanned];
    int planned = 0;
    bool conservative = false;
    std::size_t moving = 0;
    for (const Bucket* b = head; b != nullptr; b = Child(*b)) {
      for (int i = 0; i < index_internal::kSlotsPerBucket; ++i) {
        if (b->handles[i] == 0) continue;
        ++moving;
        if (conservative) continue;
        const std::uint32_t index =
            Hash32(HashOf(EntryAt(b->handles[i])->key())) & to.mask();
        int d = 0;
        while (d < planned && plan[d].index != index) ++d;
        if (d == planned) {
          if (planned == kPlanned) {
            conservative = true;
            continue;
          }
          plan[planned++] = {index, FreeSlots(to, index), 0};
        }
        ++plan[d].incoming;
      }
    }
    std::size_t needed = moving;  // one bucket per entry: always enough
    if (!conservative) {
      needed = 0;
      for (int d = 0; d < planned; ++d) {
        if (plan[d].incoming > plan[d].free_slots) {
          needed += (plan[d].incoming - plan[d].free_slots +
                     index_internal::kSlotsPerBucket - 1) /
                    index_internal::kSlotsPerBucket;
        }
      }
    }
    if (!storage_.pool.Reserve(needed)) return false;
    for (Bucket* b = head; b != nullptr; b = MutableChild(*b)) {
      for (int i = 0; i < index_internal::kSlotsPerBucket; ++i) {
        const std::uint32_t handle = b->handles[i];
        if (handle == 0) continue;
        const std::uint32_t index =
            Hash32(HashOf(EntryAt(handle)->key())) & to.mask();
        RaiseChainBound(1, Place(to, index, b->tags[i], handle));
      }
    }
    // `head` is a bucket of the live old table, never null (the analyzer
    // assumes the table's bucket array may be).
    // NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker)
    ReleaseOverflow(*head);
    index_internal::ClearBucket(*head);
    from.used -= moving;
    to.used += moving;
    ++stats_.rehash_steps;
    ++version_;
    if (++storage_.rehash_index == from.bucket_count()) {
      storage_.FreeTable(from);
      from = std::exchange(to, Table{});
      chain_bound_[0] = std::exchange(chain_bound_[1], 1);
      storage_.rehashing = false;
      storage_.rehash_index = 0;
    }
    return true;
  }

  void RaiseChainBound(int table, std::uint32_t depth) noexcept {
    chain_bound_[table] = std::max(chain_bound_[table], depth);
  }

  // Returns the overflow buckets of the chain at `head` to the pool.
  void ReleaseOverflow(Bucket& head) noexcept {
    std::uint32_t child = head.child;
    while (child != 0) {
      const std::uint32_t next = storage_.pool.Get(child).child;
      storage_.pool.Release(child);
      child = next;
    }
    head.child = 0;
  }

  // Moves every entry into a fresh table of 2^exponent buckets at once
  // (PreallocateForExpectedSize). Acquires the table and exactly the
  // overflow buckets the new chains need before moving anything; false,
  // with nothing changed, if either allocation failed.
  bool MigrateAll(int exponent) noexcept {
    Table fresh;
    if (!AllocateTable(fresh, exponent)) return false;
    const int tables = storage_.rehashing ? 2 : 1;
    // Count the entries each new chain receives; the child words of the
    // zeroed new table serve as counters.
    for (int t = 0; t < tables; ++t) {
      ForEachHandle(storage_.tables[t], [&](const Bucket&, int,
                                            std::uint32_t h) {
        ++fresh.buckets[Hash32(HashOf(EntryAt(h)->key())) & fresh.mask()].child;
      });
    }
    std::size_t needed = 0;
    for (std::uint64_t i = 0; i < fresh.bucket_count(); ++i) {
      const std::uint32_t incoming = fresh.buckets[i].child;
      // A fresh chain of n entries takes ceil(n / 12) - 1 overflow buckets.
      if (incoming > index_internal::kSlotsPerBucket) {
        needed += (incoming - 1) / index_internal::kSlotsPerBucket;
      }
      fresh.buckets[i].child = 0;
    }
    if (!storage_.pool.Reserve(needed)) {
      storage_.FreeTable(fresh);
      return false;
    }
    // Nothing below can fail.
    std::uint32_t bound = 1;
    for (int t = 0; t < tables; ++t) {
      ForEachHandle(
          storage_.tables[t], [&](const Bucket& b, int slot, std::uint32_t h) {
            bound = std::max(
                bound,
                Place(fresh, Hash32(HashOf(EntryAt(h)->key())) & fresh.mask(),
                      b.tags[slot], h));
          });
      Table& old = storage_.tables[t];
      for (std::uint64_t i = 0; i < old.bucket_count(); ++i) {
        ReleaseOverflow(old.buckets[i]);
      }
      storage_.FreeTable(old);
    }
    fresh.used = storage_.size;
    storage_.tables[0] = fresh;
    chain_bound_[0] = bound;
    chain_bound_[1] = 1;
    storage_.rehashing = false;
    storage_.rehash_index = 0;
    ++stats_.rehashes_started;
    ++version_;
    return true;
  }

  // fn(bucket, slot, handle) for every occupied slot of `table`.
  template <typename Fn>
  void ForEachHandle(const Table& table, Fn&& fn) const noexcept {
    for (std::uint64_t i = 0; i < table.bucket_count(); ++i) {
      for (const Bucket* b = &table.buckets[i]; b != nullptr; b = Child(*b)) {
        for (int slot = 0; slot < index_internal::kSlotsPerBucket; ++slot) {
          if (b->handles[slot] != 0) fn(*b, slot, b->handles[slot]);
        }
      }
    }
  }

  std::uint32_t FreeSlots(const Table& table,
                          std::uint32_t index) const noexcept {
    std::uint32_t free = 0;
    for (const Bucket* b = &table.buckets[index]; b != nullptr; b = Child(*b)) {
      free += index_internal::kSlotsPerBucket -
              std::popcount(index_internal::OccupiedSlots(*b));
    }
    return free;
  }

  // If the last overflow bucket's entries fit in the holes of the earlier
  // buckets, moves them there and frees the last bucket. Moves handles only.
  void CompactChain(Bucket& head) noexcept {
    if (head.child == 0) return;
    Bucket* prev = &head;
    std::uint32_t last_id = head.child;
    while (storage_.pool.Get(last_id).child != 0) {
      prev = &storage_.pool.Get(last_id);
      last_id = prev->child;
    }
    Bucket& last = storage_.pool.Get(last_id);
    const std::uint32_t occupied = index_internal::OccupiedSlots(last);
    std::uint32_t holes = 0;
    for (Bucket* b = &head; b != &last; b = MutableChild(*b)) {
      holes += index_internal::kSlotsPerBucket -
               std::popcount(index_internal::OccupiedSlots(*b));
    }
    if (static_cast<std::uint32_t>(std::popcount(occupied)) > holes) return;
    Bucket* b = &head;
    for (std::uint32_t m = occupied; m != 0; m &= m - 1) {
      const int slot = std::countr_zero(m);
      for (;;) {
        const std::uint32_t free =
            ~index_internal::OccupiedSlots(*b) & index_internal::kAllSlotsMask;
        if (free != 0) {
          const int to = std::countr_zero(free);
          b->tags[to] = last.tags[slot];
          b->handles[to] = last.handles[slot];
          break;
        }
        b = MutableChild(*b);
      }
    }
    prev->child = 0;
    storage_.pool.Release(last_id);
    ++stats_.chain_compactions;
  }

  const std::size_t max_key_bytes_;
  const int max_exponent_;
  const std::uint64_t seed_;
  const std::uint64_t map_id_;
  IndexAllocator* const allocator_;
  std::uint64_t generation_ = 0;
  std::uint64_t version_ = 0;  // bumped by every mutation (ScanStable)
  // Per table, an upper bound on any chain's length in buckets: raised by
  // every Place, reset when the table is replaced, never lowered while it
  // lives (erase only shortens chains). SampleRandom's grid height.
  std::uint32_t chain_bound_[2] = {1, 1};
  ScanHashMapStats stats_;
  index_internal::Storage storage_;
};

CAIRN_NAMESPACE_END

#endif  // CAIRN_INDEX_SCAN_HASH_MAP_H_
