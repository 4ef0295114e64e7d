// XXH3-64's long-input loop computed by a group of 32 cooperating lanes: the GPU runs it with
// one warp per chunk, and the CPU tests run the very same code with 32 threads in lockstep,
// so the GPU's chunk hash is checked against libxxhash on machines without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hashing/xxh3_device.h"

namespace tdbg::hashing::xxh3 {

// The 24 words of the seeded secret (see `fill_secret`), for word-indexed reads.
TDBG_HD void fill_secret_words(uint64_t seed, uint64_t* words) {
  uint8_t bytes[kSecretSize];
  fill_secret(seed, bytes);
  for (int k = 0; k < 24; ++k) words[k] = load_le64(bytes + 8 * k);
}

// 8 bytes of the secret at any byte offset `o` (< 184), from its words.
TDBG_HD uint64_t secret_at(const uint64_t* words, int o) {
  int k = o >> 3, sh = (o & 7) * 8;
  if (sh == 0) return words[k];
  return (words[k] >> sh) | (words[k + 1] << (64 - sh));
}

// XXH3-64 of `len` (> 240) bytes with `seed`, by 32 lanes. `Lanes` provides `lane()` (0..31),
// `shfl_xor(v, mask)` and `shfl(v, src)` over uint64_t, all called by every lane in the same
// order. Lane = 8 * group + j: lane j of each of the four groups owns accumulator j; the 16
// stripes of a 1 KiB block are split over the groups (stripe s to group s % 4) and their
// contributions summed, which is exact because between two scrambles every accumulator update
// is an addition. `Input` reads 8 bytes at an offset (`le64`), as in xxh3_device.h.
template <typename Lanes, typename Input>
TDBG_HD uint64_t lanes_hash_long(const Lanes& lanes, const Input& in, size_t len, uint64_t seed) {
  const int lane = lanes.lane(), group = lane >> 3, j = lane & 7;
  uint64_t secret[24];
  fill_secret_words(seed, secret);
  const Acc init = initial_acc();
  uint64_t acc = init.v[j];
  // This lane's share of one stripe: data[j ^ 1] plus the product of key j's halves.
  auto stripe_part = [&](size_t off, int secret_off) -> uint64_t {
    uint64_t data = in.le64(off + 8 * size_t(j));
    uint64_t key = data ^ secret_at(secret, secret_off + 8 * j);
    uint64_t other = lanes.shfl_xor(data, 1);
    return other + (key & 0xffffffffu) * (key >> 32);
  };
  auto sum_groups = [&](uint64_t part) {
    part += lanes.shfl_xor(part, 8);
    part += lanes.shfl_xor(part, 16);
    return part;
  };
  const size_t blocks = (len - 1) / kBlockLen;
  const uint64_t scramble_key = secret[16 + j];  // secret + 192 - 64
  for (size_t b = 0; b < blocks; ++b) {
    uint64_t part = 0;
    for (int s = group; s < int(kStripesPerBlock); s += 4)
      part += stripe_part(b * kBlockLen + size_t(s) * kStripeLen, 8 * s);
    acc += sum_groups(part);
    acc ^= acc >> 47;
    acc ^= scramble_key;
    acc *= kPrime32_1;
  }
  // The last partial block: the same number of rounds in every group (shuffles need every
  // lane); a group past the last stripe reads stripe 0 again and drops the result.
  const size_t base = blocks * kBlockLen;
  const int stripes = int(((len - 1) - base) / kStripeLen);
  uint64_t part = 0;
  for (int t = 0; 4 * t < stripes; ++t) {
    int s = group + 4 * t;
    bool valid = s < stripes;
    uint64_t v = stripe_part(base + size_t(valid ? s : 0) * kStripeLen, valid ? 8 * s : 0);
    part += valid ? v : 0;
  }
  acc += sum_groups(part);
  // The last stripe (it may overlap the block): every group computes it, group 0's counts.
  uint64_t last = stripe_part(len - kStripeLen, int(kSecretSize - kStripeLen - 7));
  acc += lanes.shfl(last, j);
  Acc all;
  for (int k = 0; k < 8; ++k) all.v[k] = lanes.shfl(acc, k);
  uint64_t r = uint64_t(len) * kPrime64_1;
  for (int i = 0; i < 4; ++i)
    r += mul128_fold64(all.v[2 * i] ^ secret_at(secret, 11 + 16 * i),
                       all.v[2 * i + 1] ^ secret_at(secret, 11 + 16 * i + 8));
  return avalanche(r);
}

}  // namespace tdbg::hashing::xxh3
