// Test helpers for tlparse/report's tests: a temporary folder (tracer's), reading files, counting.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "tracer/test_dir.h"

namespace tdbg::report::testing {

using TempDir = tracer::testing::TempDir;

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace tdbg::report::testing
