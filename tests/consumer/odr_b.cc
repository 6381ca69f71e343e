// Copyright 2026 The cairn Authors.
//
// One of two translation units that include every cairn header and
// instantiate the class templates; both link into the host, so a
// non-inline definition in a header or an ODR-violating template would fail
// the link (or, for templates, be caught by -Werror=odr under LTO builds).

#include "all_headers.h"

#include <cstdint>
#include <string_view>

namespace consumer {

int UseEverything_b() {
  struct Meta {
    std::uint64_t location = 0;
  };
  cairn::GroupDirectory<Meta> directory;
  if (!directory.Create("k-b", {}, Meta{7}).ok()) return 1;
  std::uint64_t seen = 0;
  if (!directory.WithObject("k-b", [&](const auto& view) {
        seen = view.payload().location;
      }).ok()) {
    return 2;
  }
  if (seen != 7) return 3;
  if (!directory.Erase("k-b").ok()) return 4;

  struct Loc {
    std::uint64_t offset;
  };
  cairn::ScanHashMap<Loc> map;
  if (!map.Insert("r-b", Loc{9}).ok()) return 5;
  const auto* entry = map.Find("r-b");
  if (entry == nullptr || entry->value().offset != 9) return 6;
  return 0;
}

}  // namespace consumer
