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
#include <string>
#include <string_view>
#include <utility>

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
  enum Kind { kCreate, kErase, kUpsert, kMakeTenant, kRemoveTenant } kind;
  std::string tenant;
  std::string key;
  std::string payload;
  std::uint64_t counted = 0;
};

// The serial-th mutation of the sequence `rng` was seeded for.
inline CrashOp NextCrashOp(std::mt19937_64& rng, std::uint64_t serial) {
  CrashOp op;
  const std::uint64_t dice = rng() % 100;
  op.tenant = kCrashTenants[rng() % 3];
  op.key = "k" + std::to_string(rng() % 40);
  op.payload = "m" + std::to_string(serial);
  op.counted = rng() % 100;
  if (dice < 45) {
    op.kind = CrashOp::kCreate;
  } else if (dice < 70) {
    op.kind = CrashOp::kErase;
  } else if (dice < 92) {
    op.kind = CrashOp::kUpsert;
  } else if (dice < 97) {
    op.kind = CrashOp::kMakeTenant;
  } else {
    op.kind = CrashOp::kRemoveTenant;
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

// What `op` does to `state`, as the registry does it: a create of a routed
// key, an erase or upsert of a missing one, anything on a missing tenant
// and a removal of the default tenant change nothing.
inline void ApplyCrashOp(const CrashOp& op, CrashState* state) {
  auto tenant = state->find(op.tenant);
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
    default:
      return;
  }
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
  switch (op.kind) {
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
