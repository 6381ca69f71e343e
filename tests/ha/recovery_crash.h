// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// What the recovery crash test's child (recovery_crash_child.cc) and parent
// (recovery_crash_test.cc) share: the payload, the seeded sequence of
// mutations the child runs on a registry, and a model of what each one
// does, so the parent knows the state after any number of acknowledged
// mutations.

#ifndef CAIRN_TESTS_HA_RECOVERY_CRASH_H_
#define CAIRN_TESTS_HA_RECOVERY_CRASH_H_

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "cairn/base/status.h"
#include "cairn/directory/durable_log.h"
#include "cairn/directory/group_directory.h"
#include "cairn/tenant/tenant_registry.h"

namespace cairn::testing {

struct CrashBlob {
  std::string bytes;
};

inline Status EncodeCrashBlob(const CrashBlob& b, std::string* out) {
  out->append(b.bytes);
  return Status::Ok();
}
inline Result<CrashBlob> DecodeCrashBlob(std::string_view bytes) {
  return CrashBlob{std::string(bytes)};
}

inline constexpr const char* kCrashTenants[] = {"default", "t1", "t2"};

struct CrashOp {
  enum Kind {
    kCreate,
    kErase,
    kUpsert,
    kAdjust,       // AdjustCharge: + counted, - counted / 2 (Q4)
    kBatchCreate,  // BatchCreatePending + BatchCommit of `keys` (D10),
                   // each put settled at Settled() of its `counted` (Q4)
    kBatchErase,   // BatchErase of `keys`
    kMakeTenant,
    kRemoveTenant
  } kind;
  std::string tenant;
  std::string key;
  std::string payload;
  std::uint64_t counted = 0;
  std::vector<std::string> keys;  // a batch's keys, distinct

  bool batch() const { return kind == kBatchCreate || kind == kBatchErase; }
  // What a batch create's puts settle at: a third of the reservation's
  // replicas failed.
  std::uint64_t Settled() const { return counted - counted / 3; }
  // The payload of a batch create's i-th key.
  std::string BatchPayload(std::size_t i) const {
    return payload + "/" + std::to_string(i);
  }
};

// The serial-th mutation of the sequence `rng` was seeded for.
inline CrashOp NextCrashOp(std::mt19937_64& rng, std::uint64_t serial) {
  CrashOp op;
  const std::uint64_t dice = rng() % 100;
  op.tenant = kCrashTenants[rng() % 3];
  op.key = "k" + std::to_string(rng() % 40);
  op.payload = "m" + std::to_string(serial);
  op.counted = rng() % 100;
  if (dice < 34) {
    op.kind = CrashOp::kCreate;
  } else if (dice < 38) {
    op.kind = CrashOp::kAdjust;
  } else if (dice < 58) {
    op.kind = CrashOp::kErase;
  } else if (dice < 77) {
    op.kind = CrashOp::kUpsert;
  } else if (dice < 86) {
    op.kind = CrashOp::kBatchCreate;
  } else if (dice < 92) {
    op.kind = CrashOp::kBatchErase;
  } else if (dice < 97) {
    op.kind = CrashOp::kMakeTenant;
  } else {
    op.kind = CrashOp::kRemoveTenant;
  }
  if (op.batch()) {
    const std::size_t n = 2 + rng() % 4;
    std::set<std::string> seen;
    while (op.keys.size() < n) {
      std::string key = "k" + std::to_string(rng() % 40);
      if (seen.insert(key).second) op.keys.push_back(std::move(key));
    }
  }
  return op;
}

struct CrashObject {
  std::string payload;
  std::uint64_t counted = 0;
  friend bool operator==(const CrashObject&, const CrashObject&) = default;
};
// Tenant name -> key -> object, for the tenants that exist.
using CrashState = std::map<std::string, std::map<std::string, CrashObject>>;

inline CrashState InitialCrashState() { return {{"default", {}}}; }

// The steps of `op` a crash may split: a batch logs one record per key, so
// a recovery may keep any prefix of its keys; any other op is one step.
inline std::size_t CrashOpSteps(const CrashOp& op) {
  return op.batch() ? op.keys.size() : 1;
}

// What the first `steps` steps of `op` do to `state`, as the registry does
// it: a create of a routed key, an erase or upsert of a missing one,
// anything on a missing tenant and a removal of the default tenant change
// nothing; a batch changes each of its keys as the single call would.
inline void ApplyCrashOpSteps(const CrashOp& op, std::size_t steps,
                              CrashState* state) {
  auto tenant = state->find(op.tenant);
  if (op.batch()) {
    if (tenant == state->end()) return;
    auto& objects = tenant->second;
    for (std::size_t i = 0; i < steps && i < op.keys.size(); ++i) {
      if (op.kind == CrashOp::kBatchCreate) {
        objects.try_emplace(op.keys[i],
                            CrashObject{op.BatchPayload(i), op.Settled()});
      } else {
        objects.erase(op.keys[i]);
      }
    }
    return;
  }
  if (steps == 0) return;
  switch (op.kind) {
    case CrashOp::kMakeTenant:
      state->try_emplace(op.tenant);
      return;
    case CrashOp::kRemoveTenant:
      if (tenant != state->end() && op.tenant != "default") {
        state->erase(tenant);
      }
      return;
    default:
      break;
  }
  if (tenant == state->end()) return;
  auto& objects = tenant->second;
  auto it = objects.find(op.key);
  switch (op.kind) {
    case CrashOp::kCreate:
      if (it == objects.end()) objects[op.key] = {op.payload, op.counted};
      return;
    case CrashOp::kErase:
      if (it != objects.end()) objects.erase(it);
      return;
    case CrashOp::kUpsert:
      if (it != objects.end()) it->second = {op.payload, op.counted};
      return;
    case CrashOp::kAdjust:
      if (it != objects.end())
        it->second.counted += op.counted - op.counted / 2;
      return;
    default:
      return;
  }
}
inline void ApplyCrashOp(const CrashOp& op, CrashState* state) {
  ApplyCrashOpSteps(op, CrashOpSteps(op), state);
}

// Whether a recovered state holds exactly the first `acked` mutations of
// the sequence `seed` drives, and maybe part (a prefix of the steps) or all
// of the one in flight.
inline bool RecoveredAckedOrInFlight(const CrashState& got, std::uint64_t seed,
                                     std::uint64_t acked) {
  std::mt19937_64 rng(seed);
  CrashState want = InitialCrashState();
  for (std::uint64_t serial = 1; serial <= acked; ++serial) {
    ApplyCrashOp(NextCrashOp(rng, serial), &want);
  }
  const CrashOp next = NextCrashOp(rng, acked + 1);
  for (std::size_t steps = 0; steps <= CrashOpSteps(next); ++steps) {
    CrashState partial = want;
    ApplyCrashOpSteps(next, steps, &partial);
    if (got == partial) return true;
  }
  return false;
}

// Runs `op` on `registry` as the model expects: OK for a mutation that
// finds nothing to do, the registry's or log's error otherwise.
template <typename Registry>
Status RunCrashOp(Registry& registry, const CrashOp& op) {
  if (op.kind == CrashOp::kMakeTenant) {
    return registry
        .GetOrCreate(op.tenant,
                     [](std::string_view) -> Result<TenantOptions> {
                       return TenantOptions{};
                     })
        .status();
  }
  auto tenant = registry.Find(op.tenant);
  if (!tenant.ok()) return Status::Ok();  // the model skips it too
  if (op.kind == CrashOp::kRemoveTenant) {
    if (op.tenant == "default") return Status::Ok();
    return registry.Remove(op.tenant, tenant.value()->instance_id());
  }
  auto& dir = tenant.value()->directory();
  Status s;
  using Directory = std::remove_reference_t<decltype(dir)>;
  switch (op.kind) {
    case CrashOp::kBatchCreate: {
      // A routed key is refused at its pending put and left out of the
      // commit, as the model skips it.
      std::vector<typename Directory::PendingPut> puts(op.keys.size());
      for (std::size_t i = 0; i < op.keys.size(); ++i) {
        puts[i].key = op.keys[i];
        puts[i].options.counted_bytes = op.counted;
        puts[i].payload = CrashBlob{op.BatchPayload(i)};
      }
      auto pending = dir.BatchCreatePending(puts);
      std::vector<std::string_view> keys;
      std::vector<ObjectToken> tokens;
      for (std::size_t i = 0; i < pending.size(); ++i) {
        if (pending[i].ok()) {
          keys.push_back(op.keys[i]);
          tokens.push_back(pending[i].value().token());
        } else if (pending[i].status().code() != StatusCode::kAlreadyExists) {
          s = pending[i].status();
        }
      }
      if (!s.ok()) {
        for (std::size_t i = 0; i < keys.size(); ++i) {
          dir.Abort(keys[i], tokens[i]).IgnoreError();
        }
        return s;
      }
      CommitOptions settle;
      settle.counted_bytes = op.Settled();
      const std::vector<CommitOptions> options(keys.size(), settle);
      for (const Status& committed : dir.BatchCommit(keys, tokens, options)) {
        if (!committed.ok()) return committed;
      }
      return Status::Ok();
    }
    case CrashOp::kBatchErase: {
      std::vector<std::string_view> keys(op.keys.begin(), op.keys.end());
      for (const Status& erased : dir.BatchErase(keys)) {
        if (!erased.ok() && erased.code() != StatusCode::kNotFound) {
          return erased;
        }
      }
      return Status::Ok();
    }
    case CrashOp::kCreate: {
      CreateOptions o;
      o.counted_bytes = op.counted;
      s = dir.Create(op.key, o, CrashBlob{op.payload}).status();
      return s.code() == StatusCode::kAlreadyExists ? Status::Ok() : s;
    }
    case CrashOp::kErase: {
      s = dir.Erase(op.key);
      return s.code() == StatusCode::kNotFound ? Status::Ok() : s;
    }
    case CrashOp::kAdjust: {
      auto pinned = dir.Pin(op.key);
      if (!pinned.ok()) return Status::Ok();
      return dir.AdjustCharge(op.key, pinned->token(),
                              {op.counted, op.counted / 2});
    }
    case CrashOp::kUpsert: {
      auto pinned = dir.Pin(op.key);
      if (!pinned.ok()) return Status::Ok();
      UpsertOptions o;
      o.counted_bytes = op.counted;
      if (s = dir.BeginUpsert(op.key, pinned->token(), o); !s.ok()) return s;
      return dir.CommitUpsertWithPayload(op.key, pinned->token(),
                                         CrashBlob{op.payload});
    }
    default:
      return Status::Ok();
  }
}

}  // namespace cairn::testing

template <>
struct cairn::DurablePayloadCodec<cairn::testing::CrashBlob> {
  static constexpr bool kLogsPayload = true;
  static void Encode(const cairn::testing::CrashBlob& p, std::string* out) {
    out->append(p.bytes);
  }
  static cairn::Result<cairn::testing::CrashBlob> Decode(
      std::string_view bytes) {
    return cairn::testing::CrashBlob{std::string(bytes)};
  }
};

#endif  // CAIRN_TESTS_HA_RECOVERY_CRASH_H_
