// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// cairn-inspect: identify, verify, dump and stat cairn's files
// (docs/inspect.md). The logic is in inspect.cc.

#include <iostream>
#include <span>
#include <vector>

#include "inspect/inspect.h"

int main(int argc, char** argv) {
  const std::vector<const char*> args(argv, argv + argc);
  return cairn::inspect::InspectMain(
      std::span<const char* const>(args.data(), args.size()), std::cout,
      std::cerr);
}
