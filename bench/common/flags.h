// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// --name=value flags for the bench tools that are not Google Benchmark
// binaries (cairn_calibrate, cairn_lookup_cost). Declare each flag by
// reading it, then ask Ok(): an argument no flag claimed, or a value that
// does not parse whole, prints the usage line and fails.
//
//   bench::Flags flags(argc, argv, "[--seconds=S]");
//   const double seconds = flags.Double("seconds", 1.0);
//   if (!flags.Ok()) return 2;

#ifndef CAIRN_BENCH_COMMON_FLAGS_H_
#define CAIRN_BENCH_COMMON_FLAGS_H_

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace cairn::bench {

class Flags {
 public:
  Flags(int argc, char** argv, const char* usage)
      : program_(argc > 0 ? argv[0] : "bench"),
        usage_(usage),
        args_(argv + (argc > 0 ? 1 : 0), argv + argc),
        claimed_(args_.size(), false) {}

  double Double(const char* name, double default_value) {
    const char* text = Find(name);
    if (text == nullptr) return default_value;
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || errno != 0) Bad(name);
    return v;
  }

  std::uint64_t Unsigned(const char* name, std::uint64_t default_value) {
    const char* text = Find(name);
    if (text == nullptr) return default_value;
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || text[0] == '-') Bad(name);
    return v;
  }

  // True if every argument was a declared flag with a valid value;
  // otherwise prints what is wrong and the usage line on stderr.
  bool Ok() const {
    bool ok = bad_.empty();
    for (const std::string& b : bad_) {
      std::fprintf(stderr, "%s: bad value for --%s\n", program_, b.c_str());
    }
    for (std::size_t i = 0; i < args_.size(); ++i) {
      if (claimed_[i]) continue;
      std::fprintf(stderr, "%s: unknown argument %s\n", program_, args_[i]);
      ok = false;
    }
    if (!ok) std::fprintf(stderr, "usage: %s %s\n", program_, usage_);
    return ok;
  }

 private:
  // The text after "--name=", or null if no argument sets the flag (the
  // last one wins).
  const char* Find(const char* name) {
    const std::string prefix = std::string("--") + name + "=";
    const char* found = nullptr;
    for (std::size_t i = 0; i < args_.size(); ++i) {
      if (std::string(args_[i]).rfind(prefix, 0) == 0) {
        claimed_[i] = true;
        found = args_[i] + prefix.size();
      }
    }
    return found;
  }
  void Bad(const char* name) { bad_.emplace_back(name); }

  const char* program_;
  const char* usage_;
  std::vector<const char*> args_;
  std::vector<bool> claimed_;
  std::vector<std::string> bad_;
};

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_COMMON_FLAGS_H_
