// XXH3-64 of short inputs (hash_combine's 8 bytes, shape keys, argument texts), compiled
// inline from xxhash.h: the same values as libxxhash, without its run-time dispatch, whose
// call overhead is larger than the hash itself for a few bytes (about 1% of a recorded step).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "hashing/small_hash.h"

namespace tdbg::hashing::internal {

uint64_t xxh3_small(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

}  // namespace tdbg::hashing::internal
