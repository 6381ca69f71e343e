// Copyright 2026 The cairn Authors.
//
// Shared by the flush tests: a scratch directory removed at the end, and
// whole-file reads and writes that bypass the file layer.

#ifndef CAIRN_TESTS_FLUSH_FLUSH_TESTING_H_
#define CAIRN_TESTS_FLUSH_FLUSH_TESTING_H_

#include <fstream>
#include <iterator>
#include <string>

#include "testing/scratch_dir.h"

namespace cairn::testing {

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void WriteWholeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_FLUSH_FLUSH_TESTING_H_
