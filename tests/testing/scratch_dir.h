// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// For tests that write files: ScratchDir, a fresh directory under $TMPDIR
// (or /tmp) for one test, removed with everything in it when the test ends,
// and whole-file read and write that bypass the file layer.

#ifndef CAIRN_TESTS_TESTING_SCRATCH_DIR_H_
#define CAIRN_TESTS_TESTING_SCRATCH_DIR_H_

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace cairn::testing {

class ScratchDir {
 public:
  // `prefix` names the directory (cairn_<prefix>_XXXXXX), for the odd
  // one a failed run leaves behind.
  explicit ScratchDir(const std::string& prefix = "test") {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") +
                          "/cairn_" + prefix + "_XXXXXX";
    char* made = ::mkdtemp(pattern.data());
    if (made == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Replaces the file by a new one: truncating a file in place makes ext4
// flush it on close (auto_da_alloc), which costs milliseconds per call.
inline void WriteWholeFile(const std::string& path, const std::string& bytes) {
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_TESTING_SCRATCH_DIR_H_
