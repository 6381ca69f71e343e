// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// libFuzzer harness for the snapshot reader and restore (H2). The first
// input byte picks the mode: raw (the rest is a whole file, so the header,
// trailer and checksum checks are fuzzed) or framed (the rest is a list of
// records, which are framed with valid checksums, so the grammar, lengths
// and counts are fuzzed). A file the reader accepts is planned and loaded
// into a directory; the load must succeed and create what the plan says.
// A rejected file must be kDataLoss or kFailedPrecondition.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "cairn/epoch/epoch_domain.h"
#include "cairn/ha/snapshot.h"

namespace {

using cairn::StatusCode;
using Dir = cairn::GroupDirectory<std::string>;
using Type = cairn::directory_internal::SnapshotRecordType;

void Require(bool condition) {
  if (!condition) std::abort();
}

cairn::EpochDomain& Domain() {
  static cairn::EpochDomain* domain = new cairn::EpochDomain([] {
    cairn::EpochOptions o;
    o.name = "route";
    o.stall_threshold = std::chrono::nanoseconds(0);
    return o;
  }());
  return *domain;
}

template <typename T>
void Put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// A body of `type` whose lengths agree with its bytes: fixed fields from
// the front of `raw` (zero padded), names and keys from the rest; an
// object's id is 1 + `index` (its record's), its version from `raw`.
std::string Shape(Type type, const std::string& raw, std::size_t index) {
  std::string fields = raw;
  fields.resize(raw.size() < 48 ? 48 : raw.size(), '\0');
  const std::string rest = raw.size() > 8 ? raw.substr(8) : std::string("k");
  std::string out;
  switch (type) {
    case Type::kTenant:
      out.append(fields, 0, 16);  // instance, quota limit
      Put<std::uint64_t>(out, 1 + static_cast<std::uint8_t>(fields[16]));
      Put<std::uint32_t>(out, static_cast<std::uint32_t>(rest.size()));
      out.append(rest);
      break;
    case Type::kGroup:
      Put<std::uint32_t>(out, static_cast<std::uint8_t>(fields[0]) % 4);
      Put<std::uint32_t>(out, static_cast<std::uint32_t>(rest.size()));
      out.append(rest);
      break;
    case Type::kObject: {
      fields[31] = static_cast<char>(fields[31] & 0x7f);  // lease >= 0
      fields[39] = static_cast<char>(fields[39] & 0x7f);  // soft pin >= 0
      Put<std::uint64_t>(out, 1 + index);                 // id
      Put<std::uint64_t>(out, 1 + static_cast<std::uint8_t>(fields[43]));
      out.append(fields, 0, 40);  // sizes, lease, soft pin
      Put<std::uint32_t>(out, static_cast<std::uint8_t>(fields[40]) % 2);
      const std::size_t key = 1 + static_cast<std::uint8_t>(fields[41]) % 4;
      const std::string tail = raw.size() > 42 ? raw.substr(42) : "k";
      const std::size_t k = key < tail.size() ? key : tail.size();
      Put<std::uint32_t>(out, static_cast<std::uint32_t>(k));
      Put<std::uint32_t>(out, static_cast<std::uint32_t>(tail.size() - k));
      out.append(tail);
      break;
    }
    case Type::kTenantEnd:
      out.append(fields, 0, 16);
      break;
    default:
      out = raw;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  if (size == 0) return 0;
  const char* in = reinterpret_cast<const char*>(data) + 1;
  const std::size_t n = size - 1;
  std::vector<char> file;
  if ((data[0] & 1) == 0) {
    file.assign(in, in + n);
  } else {
    // Records: type u8 | body length u8 | body. With bit 1 of the mode
    // byte the bodies are taken as field values and laid out with
    // consistent lengths, so restores of many shapes of valid files run.
    const bool shaped = (data[0] & 2) != 0;
    std::vector<std::pair<Type, std::string>> records;
    std::uint64_t groups = 0;
    std::uint64_t objects = 0;
    std::size_t at = 0;
    while (at + 2 <= n) {
      const Type type =
          static_cast<Type>(static_cast<std::uint8_t>(in[at]) % 5);
      const std::size_t len = static_cast<std::uint8_t>(in[at + 1]);
      at += 2;
      const std::size_t take = len < n - at ? len : n - at;
      std::string body(in + at, take);
      at += take;
      if (shaped) {
        body = Shape(type, body, records.size());
        if (type == Type::kTenant) groups = objects = 0;
        if (type == Type::kGroup) ++groups;
        if (type == Type::kObject) ++objects;
        if (type == Type::kTenantEnd && (body[0] & 1) == 0) {
          body.clear();  // usually the true counts
          Put<std::uint64_t>(body, groups);
          Put<std::uint64_t>(body, objects);
        }
      }
      records.emplace_back(type, std::move(body));
    }
    file = cairn::directory_internal::FrameSnapshotForTest(records);
  }
  auto parsed = cairn::directory_internal::ParseSnapshot(std::move(file));
  if (!parsed.ok()) {
    const StatusCode code = parsed.status().code();
    Require(code == StatusCode::kDataLoss ||
            code == StatusCode::kFailedPrecondition);
    return 0;
  }
  auto decode = [](std::string_view bytes) -> cairn::Result<std::string> {
    if (!bytes.empty() && bytes[0] == 'X') {
      return cairn::InvalidArgumentError("refused");
    }
    return std::string(bytes);
  };
  for (const auto& tenant : parsed->tenants) {
    auto plan = cairn::directory_internal::PlanTenantRestore<std::string>(
        tenant, decode, 16);
    if (!plan.ok()) {
      Require(plan.status().code() == StatusCode::kInvalidArgument);
      continue;
    }
    cairn::DirectoryOptions options;
    options.route.epoch_domain = &Domain();
    options.route.bucket_count =
        cairn::directory_internal::PresizedBucketCount(64, plan->objects);
    Dir dir(options);
    std::uint64_t charged = 0;
    Require(cairn::directory_internal::LoadTenant(dir, *plan, &charged).ok());
    Require(dir.object_count() == plan->objects);
    Require(dir.group_count() == plan->groups);
    // The id counter resumed above every stored id and the stored next id.
    const std::uint64_t next = cairn::DirectoryHooks::NextObjectIdPeek(dir);
    Require(next > plan->max_object_id && next >= tenant.tenant.next_object_id);
  }
  return 0;
}
