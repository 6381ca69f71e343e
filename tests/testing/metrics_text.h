// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// A small parser of the Prometheus text exposition format, for tests: reads
// what PrometheusRenderer wrote back into samples, and checks the rules a
// scraper relies on (HELP/TYPE before a family's samples, one TYPE per
// family, families contiguous, label values escaped, numbers parse).

#ifndef CAIRN_TESTS_TESTING_METRICS_TEXT_H_
#define CAIRN_TESTS_TESTING_METRICS_TEXT_H_

#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn::testing_internal {

struct ParsedSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // unescaped
  double value = 0;
};

struct ParsedExposition {
  std::string error;  // empty when the text is well formed
  std::map<std::string, std::string> helps;  // as written (escaped)
  std::map<std::string, std::string> types;
  std::vector<ParsedSample> samples;

  // The value of the sample with exactly these labels (in order); NaN if
  // there is none.
  double Value(
      std::string_view name,
      const std::vector<std::pair<std::string, std::string>>& labels) const {
    for (const ParsedSample& s : samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    return std::numeric_limits<double>::quiet_NaN();
  }
  // Sum over every sample of `name` whose labels include `label`.
  double Sum(std::string_view name,
             const std::pair<std::string, std::string>& label) const {
    double total = 0;
    for (const ParsedSample& s : samples) {
      if (s.name != name) continue;
      for (const auto& l : s.labels) {
        if (l == label) total += s.value;
      }
    }
    return total;
  }
};

inline std::string_view FamilyOf(
    std::string_view name, const std::map<std::string, std::string>& types) {
  for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (name.size() > suffix.size() &&
        name.substr(name.size() - suffix.size()) == suffix) {
      const std::string_view base = name.substr(0, name.size() - suffix.size());
      auto it = types.find(std::string(base));
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return name;
}

inline ParsedExposition ParseExposition(std::string_view text) {
  ParsedExposition out;
  std::string current;  // the family whose samples may follow
  std::set<std::string> closed;
  auto fail = [&](std::string why, std::string_view line) {
    if (out.error.empty()) out.error = why + ": " + std::string(line);
  };
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    if (nl == std::string_view::npos) {
      fail("last line has no newline", text);
      break;
    }
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
      const std::string_view rest = line.substr(7);
      const std::size_t sp = rest.find(' ');
      if (sp == std::string_view::npos) {
        fail("comment without text", line);
        continue;
      }
      const std::string name(rest.substr(0, sp));
      const std::string value(rest.substr(sp + 1));
      if (name != current) {
        if (!current.empty()) closed.insert(current);
        if (closed.count(name) != 0) fail("family split", line);
        current = name;
      }
      auto& slot = line[2] == 'H' ? out.helps[name] : out.types[name];
      if (!slot.empty()) fail("repeated HELP or TYPE", line);
      slot = value;
      continue;
    }
    ParsedSample s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = std::string(line.substr(0, i));
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const std::size_t eq = line.find('=', i);
        if (eq == std::string_view::npos || eq + 1 >= line.size() ||
            line[eq + 1] != '"') {
          fail("bad label", line);
          break;
        }
        std::string key(line.substr(i, eq - i));
        std::string value;
        std::size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) {
            ++j;
            value += line[j] == 'n' ? '\n' : line[j];
          } else {
            value += line[j];
          }
        }
        if (j >= line.size()) {
          fail("unterminated label value", line);
          break;
        }
        s.labels.emplace_back(std::move(key), std::move(value));
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // the '}'
    }
    if (i >= line.size() || line[i] != ' ') {
      fail("no value", line);
      continue;
    }
    const std::string number(line.substr(i + 1));
    if (number == "+Inf") {
      s.value = std::numeric_limits<double>::infinity();
    } else {
      char* end = nullptr;
      s.value = std::strtod(number.c_str(), &end);
      if (end == number.c_str() || *end != '\0') fail("bad number", line);
    }
    if (FamilyOf(s.name, out.types) != current) {
      fail("sample outside its family", line);
    }
    out.samples.push_back(std::move(s));
  }
  return out;
}

}  // namespace cairn::testing_internal

#endif  // CAIRN_TESTS_TESTING_METRICS_TEXT_H_
