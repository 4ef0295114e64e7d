// A portable XXH3-64 (with seed), written from the public XXH3 specification, usable from
// host C++ and from CUDA device code. The CPU path uses libxxhash (SIMD); this version exists
// so that the GPU computes the very same chunk hashes, and its tests run on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TDBG_HD __host__ __device__ __forceinline__
#else
#define TDBG_HD inline
#endif

namespace tdbg::hashing::xxh3 {

constexpr uint64_t kPrime32_1 = 0x9E3779B1u;
constexpr uint64_t kPrime32_2 = 0x85EBCA77u;
constexpr uint64_t kPrime32_3 = 0xC2B2AE3Du;
constexpr uint64_t kPrime64_1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime64_2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime64_3 = 0x165667B19E3779F9ull;
constexpr uint64_t kPrime64_4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kPrime64_5 = 0x27D4EB2F165667C5ull;
constexpr uint64_t kPrimeMx1 = 0x165667919E3779F9ull;
constexpr uint64_t kPrimeMx2 = 0x9FB21C651E98DF25ull;

constexpr size_t kSecretSize = 192;
constexpr size_t kStripeLen = 64;
constexpr size_t kStripesPerBlock = (kSecretSize - kStripeLen) / 8;  // 16
constexpr size_t kBlockLen = kStripeLen * kStripesPerBlock;         // 1024

// Loads and stores in little-endian order whatever the host's order, byte by byte: the
// compiler turns these into single moves on little-endian machines.
TDBG_HD uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
TDBG_HD uint32_t load_le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
TDBG_HD void store_le64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}

// Writes the specification's default 192-byte secret ("kSecret"), with `seed` added to the
// first and subtracted from the second 8 bytes of every 16-byte lane (the seeded secret of the
// long path; seed 0 gives the default secret itself). The words live in code rather than in a
// global array so that the same function works in host and device code.
TDBG_HD void fill_secret(uint64_t seed, uint8_t* out) {
  const uint64_t words[24] = {
      0xbe4ba423396cfeb8ull, 0x1cad21f72c81017cull, 0xdb979083e96dd4deull,
      0x1f67b3b7a4a44072ull, 0x78e5c0cc4ee679cbull, 0x2172ffcc7dd05a82ull,
      0x8e2443f7744608b8ull, 0x4c263a81e69035e0ull, 0xcb00c391bb52283cull,
      0xa32e531b8b65d088ull, 0x4ef90da297486471ull, 0xd8acdea946ef1938ull,
      0x3f349ce33f76faa8ull, 0x1d4f0bc7c7bbdcf9ull, 0x3159b4cd4be0518aull,
      0x647378d9c97e9fc8ull, 0xc3ebd33483acc5eaull, 0xeb6313faffa081c5ull,
      0x49daf0b751dd0d17ull, 0x9e68d429265516d3ull, 0xfca1477d58be162bull,
      0xce31d07ad1b8f88full, 0x280416958f3acb45ull, 0x7e404bbbcafbd7afull,
  };
  for (int i = 0; i < 24; i += 2) {
    store_le64(out + 8 * i, words[i] + seed);
    store_le64(out + 8 * i + 8, words[i + 1] - seed);
  }
}

TDBG_HD uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
TDBG_HD uint32_t swap32(uint32_t x) {
  return ((x << 24) & 0xff000000u) | ((x << 8) & 0x00ff0000u) | ((x >> 8) & 0x0000ff00u) |
         ((x >> 24) & 0x000000ffu);
}
TDBG_HD uint64_t swap64(uint64_t x) {
  return (uint64_t(swap32(uint32_t(x))) << 32) | swap32(uint32_t(x >> 32));
}

// Low and high halves of the 128-bit product, folded with xor.
TDBG_HD uint64_t mul128_fold64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return (a * b) ^ __umul64hi(a, b);
#elif defined(__SIZEOF_INT128__)
  unsigned __int128 p = (unsigned __int128)a * b;
  return uint64_t(p) ^ uint64_t(p >> 64);
#else
  uint64_t lo_lo = (a & 0xffffffffu) * (b & 0xffffffffu);
  uint64_t hi_lo = (a >> 32) * (b & 0xffffffffu);
  uint64_t lo_hi = (a & 0xffffffffu) * (b >> 32);
  uint64_t hi_hi = (a >> 32) * (b >> 32);
  uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffu) + lo_hi;
  uint64_t upper = (hi_lo >> 32) + (cross >> 32) + hi_hi;
  uint64_t lower = (cross << 32) | (lo_lo & 0xffffffffu);
  return lower ^ upper;
#endif
}

TDBG_HD uint64_t xxh64_avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kPrime64_2;
  h ^= h >> 29;
  h *= kPrime64_3;
  h ^= h >> 32;
  return h;
}
TDBG_HD uint64_t avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= kPrimeMx1;
  h ^= h >> 32;
  return h;
}
TDBG_HD uint64_t rrmxmx(uint64_t h, uint64_t len) {
  h ^= rotl64(h, 49) ^ rotl64(h, 24);
  h *= kPrimeMx2;
  h ^= (h >> 35) + len;
  h *= kPrimeMx2;
  return h ^ (h >> 28);
}

// `Input` abstracts how bytes are read, so that device code can read through a canonicalizing
// view (NaNs rewritten on the fly) instead of copying. `PlainInput` reads memory as is.
struct PlainInput {
  const uint8_t* p;
  TDBG_HD uint8_t byte(size_t i) const { return p[i]; }
  TDBG_HD uint32_t le32(size_t i) const { return load_le32(p + i); }
  TDBG_HD uint64_t le64(size_t i) const { return load_le64(p + i); }
};

template <typename Input>
TDBG_HD uint64_t mix16(const Input& in, size_t off, const uint8_t* secret, uint64_t seed) {
  uint64_t lo = in.le64(off), hi = in.le64(off + 8);
  return mul128_fold64(lo ^ (load_le64(secret) + seed), hi ^ (load_le64(secret + 8) - seed));
}

template <typename Input>
TDBG_HD uint64_t hash_0to16(const Input& in, size_t len, const uint8_t* secret, uint64_t seed) {
  if (len > 8) {
    uint64_t flip1 = (load_le64(secret + 24) ^ load_le64(secret + 32)) + seed;
    uint64_t flip2 = (load_le64(secret + 40) ^ load_le64(secret + 48)) - seed;
    uint64_t lo = in.le64(0) ^ flip1;
    uint64_t hi = in.le64(len - 8) ^ flip2;
    uint64_t acc = len + swap64(lo) + hi + mul128_fold64(lo, hi);
    return avalanche(acc);
  }
  if (len >= 4) {
    seed ^= uint64_t(swap32(uint32_t(seed))) << 32;
    uint32_t in1 = in.le32(0), in2 = in.le32(len - 4);
    uint64_t flip = (load_le64(secret + 8) ^ load_le64(secret + 16)) - seed;
    uint64_t v = uint64_t(in2) + (uint64_t(in1) << 32);
    return rrmxmx(v ^ flip, len);
  }
  if (len > 0) {
    uint32_t c1 = in.byte(0), c2 = in.byte(len >> 1), c3 = in.byte(len - 1);
    uint32_t combined = (c1 << 16) | (c2 << 24) | c3 | (uint32_t(len) << 8);
    uint64_t flip = uint64_t(load_le32(secret) ^ load_le32(secret + 4)) + seed;
    return xxh64_avalanche(uint64_t(combined) ^ flip);
  }
  return xxh64_avalanche(seed ^ load_le64(secret + 56) ^ load_le64(secret + 64));
}

template <typename Input>
TDBG_HD uint64_t hash_17to128(const Input& in, size_t len, const uint8_t* secret, uint64_t seed) {
  uint64_t acc = len * kPrime64_1;
  if (len > 32) {
    if (len > 64) {
      if (len > 96) {
        acc += mix16(in, 48, secret + 96, seed);
        acc += mix16(in, len - 64, secret + 112, seed);
      }
      acc += mix16(in, 32, secret + 64, seed);
      acc += mix16(in, len - 48, secret + 80, seed);
    }
    acc += mix16(in, 16, secret + 32, seed);
    acc += mix16(in, len - 32, secret + 48, seed);
  }
  acc += mix16(in, 0, secret, seed);
  acc += mix16(in, len - 16, secret + 16, seed);
  return avalanche(acc);
}

template <typename Input>
TDBG_HD uint64_t hash_129to240(const Input& in, size_t len, const uint8_t* secret, uint64_t seed) {
  uint64_t acc = len * kPrime64_1;
  size_t rounds = len / 16;
  for (size_t i = 0; i < 8; ++i) acc += mix16(in, 16 * i, secret + 16 * i, seed);
  acc = avalanche(acc);
  for (size_t i = 8; i < rounds; ++i) acc += mix16(in, 16 * i, secret + 16 * (i - 8) + 3, seed);
  acc += mix16(in, len - 16, secret + 136 - 17, seed);
  return avalanche(acc);
}

// The eight accumulators of the long-input loop.
struct Acc {
  uint64_t v[8];
};

TDBG_HD Acc initial_acc() {
  return Acc{{kPrime32_3, kPrime64_1, kPrime64_2, kPrime64_3, kPrime64_4, kPrime32_2, kPrime64_5,
              kPrime32_1}};
}

// One 64-byte stripe at `off` with the secret at `secret`: every lane's update is a sum, so the
// stripes between two scrambles may be accumulated in any order or in parallel (the GPU kernel
// relies on this; `xxh3_test` checks it).
template <typename Input>
TDBG_HD void accumulate_stripe(Acc& acc, const Input& in, size_t off, const uint8_t* secret) {
  uint64_t data[8];
  for (int i = 0; i < 8; ++i) data[i] = in.le64(off + 8 * i);
  for (int i = 0; i < 8; ++i) {
    uint64_t key = data[i] ^ load_le64(secret + 8 * i);
    acc.v[i ^ 1] += data[i];
    acc.v[i] += (key & 0xffffffffu) * (key >> 32);
  }
}

TDBG_HD void scramble(Acc& acc, const uint8_t* secret) {
  for (int i = 0; i < 8; ++i) {
    uint64_t a = acc.v[i];
    a ^= a >> 47;
    a ^= load_le64(secret + 8 * i);
    a *= kPrime32_1;
    acc.v[i] = a;
  }
}

TDBG_HD uint64_t merge_accs(const Acc& acc, const uint8_t* secret, uint64_t start) {
  uint64_t r = start;
  for (int i = 0; i < 4; ++i) {
    r += mul128_fold64(acc.v[2 * i] ^ load_le64(secret + 16 * i),
                       acc.v[2 * i + 1] ^ load_le64(secret + 16 * i + 8));
  }
  return avalanche(r);
}

// Accumulates the last partial block and the final stripe, then merges: the tail of the long
// path, shared by the sequential and the cooperative (GPU) versions.
template <typename Input>
TDBG_HD uint64_t finish_long(Acc acc, const Input& in, size_t len, const uint8_t* secret) {
  size_t blocks = (len - 1) / kBlockLen;
  size_t base = blocks * kBlockLen;
  size_t stripes = ((len - 1) - base) / kStripeLen;
  for (size_t s = 0; s < stripes; ++s) accumulate_stripe(acc, in, base + s * kStripeLen, secret + 8 * s);
  accumulate_stripe(acc, in, len - kStripeLen, secret + kSecretSize - kStripeLen - 7);
  return merge_accs(acc, secret + 11, uint64_t(len) * kPrime64_1);
}

template <typename Input>
TDBG_HD uint64_t hash_long(const Input& in, size_t len, uint64_t seed) {
  uint8_t secret[kSecretSize];
  fill_secret(seed, secret);
  Acc acc = initial_acc();
  size_t blocks = (len - 1) / kBlockLen;
  for (size_t b = 0; b < blocks; ++b) {
    for (size_t s = 0; s < kStripesPerBlock; ++s)
      accumulate_stripe(acc, in, b * kBlockLen + s * kStripeLen, secret + 8 * s);
    scramble(acc, secret + kSecretSize - kStripeLen);
  }
  return finish_long(acc, in, len, secret);
}

// XXH3_64bits_withSeed(input, len, seed) over any `Input`.
template <typename Input>
TDBG_HD uint64_t hash64_of(const Input& in, size_t len, uint64_t seed) {
  if (len > 240) return hash_long(in, len, seed);
  uint8_t k[kSecretSize];
  fill_secret(0, k);
  if (len <= 16) return hash_0to16(in, len, k, seed);
  if (len <= 128) return hash_17to128(in, len, k, seed);
  return hash_129to240(in, len, k, seed);
}

TDBG_HD uint64_t hash64(const void* data, size_t len, uint64_t seed) {
  return hash64_of(PlainInput{static_cast<const uint8_t*>(data)}, len, seed);
}

}  // namespace tdbg::hashing::xxh3
