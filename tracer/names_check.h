// Internal to tracer/: the check of the names tables (`strings`, `frames`), which op blocks
// refer to by id and which no block checksum covers. The writer keeps it in meta
// `names_check` in every transaction, the reader checks it when it opens: a flipped bit in an
// op's name or a frame's line would otherwise read as another op or line (docs/schema.md).
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "tracer/records.h"

namespace tdbg::tracer::internal {

// `meta` key the writer owns: "<rows>:<sum>", the number of rows of both tables and the sum
// (mod 2^64) of their rows' hashes: a sum, so rows committed in any order and transactions
// add up alike.
constexpr const char* kNamesCheckKey = "names_check";

inline uint64_t string_row_hash(int64_t id, std::string_view text) {
  return XXH3_64bits_withSeed(text.data(), text.size(), static_cast<uint64_t>(id) * 2 + 1);
}

inline uint64_t frame_row_hash(const FrameRecord& f) {
  const int64_t fields[5] = {static_cast<int64_t>(f.id), static_cast<int64_t>(f.parent),
                             static_cast<int64_t>(f.file), static_cast<int64_t>(f.line),
                             static_cast<int64_t>(f.function)};
  return XXH3_64bits_withSeed(fields, sizeof fields, 2);
}

inline std::string names_check_text(int64_t rows, uint64_t sum) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%lld:%016llx", static_cast<long long>(rows),
                static_cast<unsigned long long>(sum));
  return buf;
}

}  // namespace tdbg::tracer::internal
