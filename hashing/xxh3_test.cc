// Checks the portable XXH3-64 of xxh3_device.h (the GPU's hash) against libxxhash, and the
// properties the GPU kernel relies on: stripes within a block may be accumulated in any order,
// and the canonicalizing reader equals hashing a canonicalized copy.
#include <catch2/catch.hpp>
#include <xxhash.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "hashing/canonical.h"
#include "hashing/lanes_testing.h"
#include "hashing/xxh3_device.h"
#include "hashing/xxh3_warp.h"

namespace x = tdbg::hashing::xxh3;
namespace c = tdbg::hashing::canonical;

namespace {
std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& v : b) v = uint8_t(rng());
  return b;
}
}  // namespace

TEST_CASE("portable XXH3-64 equals libxxhash for every length up to 2048 and several seeds") {
  auto data = random_bytes(2048 + 64, 1);
  const uint64_t seeds[] = {0, 1, 2, 0x9E3779B97F4A7C15ull, ~0ull, 16383};
  int mismatches = 0;
  for (size_t len = 0; len <= 2048; ++len)
    for (uint64_t seed : seeds)
      // Offset 3: unaligned input must work too.
      if (x::hash64(data.data() + 3, len, seed) != XXH3_64bits_withSeed(data.data() + 3, len, seed))
        ++mismatches;
  CHECK(mismatches == 0);
}

TEST_CASE("portable XXH3-64 equals libxxhash on large inputs around block and chunk sizes") {
  auto data = random_bytes((1 << 20) + 100, 2);
  for (size_t len : {4095, 4096, 4097, 65535, 65536, 65537, 1 << 20}) {
    for (uint64_t seed : {0ull, 7ull, 123456789ull}) {
      INFO("len " << len << " seed " << seed);
      CHECK(x::hash64(data.data(), len, seed) == XXH3_64bits_withSeed(data.data(), len, seed));
    }
  }
}

TEST_CASE("stripes of a block accumulate in any order (the GPU's parallel accumulation)") {
  auto data = random_bytes(65536, 3);
  x::PlainInput in{data.data()};
  uint8_t secret[x::kSecretSize];
  x::fill_secret(42, secret);
  x::Acc forward = x::initial_acc(), parallel = x::initial_acc();
  for (size_t b = 0; b < 64 - 1; ++b) {
    for (size_t s = 0; s < x::kStripesPerBlock; ++s)
      x::accumulate_stripe(forward, in, b * x::kBlockLen + s * x::kStripeLen, secret + 8 * s);
    x::scramble(forward, secret + x::kSecretSize - x::kStripeLen);
    // Four groups of four stripes, each from zero, then summed: what the warp does.
    x::Acc group[4];
    for (int g = 0; g < 4; ++g) {
      group[g] = x::Acc{{0, 0, 0, 0, 0, 0, 0, 0}};
      for (size_t s = size_t(g); s < x::kStripesPerBlock; s += 4)
        x::accumulate_stripe(group[g], in, b * x::kBlockLen + s * x::kStripeLen, secret + 8 * s);
    }
    for (int i = 0; i < 8; ++i)
      parallel.v[i] += group[3].v[i] + group[1].v[i] + group[2].v[i] + group[0].v[i];
    x::scramble(parallel, secret + x::kSecretSize - x::kStripeLen);
  }
  for (int i = 0; i < 8; ++i) CHECK(forward.v[i] == parallel.v[i]);
  CHECK(x::finish_long(parallel, in, data.size(), secret) == XXH3_64bits_withSeed(data.data(), data.size(), 42));
}

TEST_CASE("the canonicalizing reader hashes like a canonicalized copy") {
  struct Case {
    c::Unit unit;
    size_t width;
  };
  for (Case k : {Case{c::Unit::kF32, 4}, Case{c::Unit::kF64, 8}, Case{c::Unit::kF16, 2},
                 Case{c::Unit::kBF16, 2}, Case{c::Unit::kF8E4M3FN, 1}, Case{c::Unit::kF8E5M2, 1},
                 Case{c::Unit::kBool, 1}}) {
    // Random bytes hit NaN patterns often for the narrow types; force some for the wide ones.
    auto data = random_bytes(5000, 4 + unsigned(k.unit));
    for (size_t i = 0; i + k.width <= data.size(); i += 7 * k.width) {
      if (k.unit == c::Unit::kF32) { uint32_t nan = 0xffc01234u; std::memcpy(&data[i], &nan, 4); }
      if (k.unit == c::Unit::kF64) { uint64_t nan = 0x7ff0000000000001ull; std::memcpy(&data[i], &nan, 8); }
    }
    std::vector<uint8_t> copy(data.size());
    for (size_t i = 0; i + k.width <= data.size(); i += k.width) c::canonicalize_unit(k.unit, &data[i], &copy[i]);
    REQUIRE(copy != data);
    for (size_t len = 0; len <= data.size(); len += (len < 300 ? k.width : 97 * k.width)) {
      INFO("unit " << int(k.unit) << " len " << len);
      CHECK(x::hash64_of(c::CanonicalInput{data.data(), k.unit}, len, 5) ==
            XXH3_64bits_withSeed(copy.data(), len, 5));
    }
  }
}

namespace {

using tdbg::hashing::testing::Lockstep;
using tdbg::hashing::testing::ThreadLanes;

template <typename Input>
std::vector<uint64_t> run_lanes(const Input& in, size_t len, uint64_t seed) {
  Lockstep group;
  std::vector<uint64_t> out(32);
  std::vector<std::thread> threads;
  for (int i = 0; i < 32; ++i)
    threads.emplace_back([&, i] { out[size_t(i)] = x::lanes_hash_long(ThreadLanes{&group, i}, in, len, seed); });
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace

TEST_CASE("the GPU's 32-lane XXH3 (run by 32 CPU threads in lockstep) equals libxxhash") {
  auto data = random_bytes(65536 + 8, 5);
  for (size_t len : {241, 255, 256, 257, 1023, 1024, 1025, 1088, 1089, 2047, 3000, 4096, 65535, 65536}) {
    for (uint64_t seed : {0ull, 3ull, 0x123456789ull}) {
      INFO("len " << len << " seed " << seed);
      auto lanes = run_lanes(x::PlainInput{data.data() + 1}, len, seed);
      uint64_t expect = XXH3_64bits_withSeed(data.data() + 1, len, seed);
      for (uint64_t h : lanes) REQUIRE(h == expect);  // every lane ends with the hash
    }
  }
  // Through the canonicalizing reader, as the GPU reads NaN-bearing float chunks.
  std::vector<uint8_t> f(4096 * 4);
  for (size_t i = 0; i < 4096; ++i) {
    uint32_t bits = (i % 97 == 0) ? 0xffc00123u : 0x3f800000u + uint32_t(i);
    std::memcpy(&f[4 * i], &bits, 4);
  }
  std::vector<uint8_t> copy(f.size());
  for (size_t i = 0; i < f.size(); i += 4) c::canonicalize_unit(c::Unit::kF32, &f[i], &copy[i]);
  auto lanes = run_lanes(c::CanonicalInput{f.data(), c::Unit::kF32}, f.size(), 9);
  CHECK(lanes[0] == XXH3_64bits_withSeed(copy.data(), copy.size(), 9));
}
