// XXH3-64 for short inputs without libxxhash's dispatch (see small_hash.cc). Internal to
// hashing/: callers use hash_bytes and hash_combine (tensor_hash.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tdbg::hashing::internal {

// Inputs up to this many bytes take xxh3_small in hash_bytes.
constexpr size_t kSmallHashBytes = 240;

// XXH3_64bits_withSeed(data, size, seed), bit for bit.
uint64_t xxh3_small(const void* data, size_t size, uint64_t seed);

}  // namespace tdbg::hashing::internal
