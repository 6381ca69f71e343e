// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Compiled twice (CMakeLists.txt: CAIRN_CONSUMER_ENTRY=UseEverythingA, then
// =UseEverythingB, the entry point host.cc calls) into two
// translation units that include every cairn header and instantiate the
// class templates; both link into the host, so a non-inline definition in a
// header fails the link with a duplicate symbol.

#include "all_headers.h"

#include <cstdint>
#include <string_view>

namespace consumer {

int CAIRN_CONSUMER_ENTRY() {
  struct Meta {
    std::uint64_t location = 0;
  };
  cairn::GroupDirectory<Meta> directory;
  if (!directory.Create("k", {}, Meta{7}).ok()) return 1;
  std::uint64_t seen = 0;
  if (!directory
           .WithObject(
               "k", [&](const auto& view) { seen = view.payload().location; })
           .ok()) {
    return 2;
  }
  if (seen != 7) return 3;
  if (!directory.Erase("k").ok()) return 4;

  struct Loc {
    std::uint64_t offset;
  };
  cairn::ScanHashMap<Loc> map;
  if (!map.Insert("r", Loc{9}).ok()) return 5;
  const auto* entry = map.Find("r");
  if (entry == nullptr || entry->value().offset != 9) return 6;
  return 0;
}

}  // namespace consumer
