// Tests of tdbg-hash v1 on the CPU: golden vectors of docs/hash-spec.md, a naive reference
// implementation written straight from the spec, invariance under layout and thread count,
// NaN canonicalization, every dtype, edge sizes, and the summaries.
#include <catch2/catch.hpp>
#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "hashing/canonical.h"
#include "hashing/chunk_scan.h"
#include "hashing/tensor_hash.h"

using namespace tdbg::hashing;

namespace {

std::string hex(uint64_t h) {
  char b[17];
  return hash_to_hex(h, b);
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> s(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    s[i] = acc;
    acc *= sizes[i];
  }
  return s;
}

// The spec, literally: build the whole logical byte stream element by element, canonicalize
// it, cut it into chunks, hash each with its index as seed, hash header + chunk hashes.
uint64_t reference_hash(const void* data, DType dtype, const std::vector<int64_t>& sizes,
                        const std::vector<int64_t>& strides) {
  size_t es = dtype_size(dtype);
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  std::vector<uint8_t> stream(size_t(numel) * es);
  std::vector<int64_t> idx(sizes.size(), 0);
  for (int64_t e = 0; e < numel; ++e) {
    int64_t off = 0;
    for (size_t d = 0; d < sizes.size(); ++d) off += idx[d] * strides[d];
    std::memcpy(&stream[size_t(e) * es], static_cast<const uint8_t*>(data) + off * int64_t(es), es);
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
  // Canonicalize each component.
  using canonical::Unit;
  Unit unit = Unit::kRaw;
  switch (dtype) {
    case DType::kBool: unit = Unit::kBool; break;
    case DType::kFloat16: case DType::kComplex32: unit = Unit::kF16; break;
    case DType::kBFloat16: unit = Unit::kBF16; break;
    case DType::kFloat32: case DType::kComplex64: unit = Unit::kF32; break;
    case DType::kFloat64: case DType::kComplex128: unit = Unit::kF64; break;
    case DType::kFloat8E4M3FN: unit = Unit::kF8E4M3FN; break;
    case DType::kFloat8E5M2: unit = Unit::kF8E5M2; break;
    default: break;
  }
  if (unit != Unit::kRaw) {
    size_t w = canonical::unit_size(unit);
    for (size_t i = 0; i < stream.size(); i += w) canonical::canonicalize_unit(unit, &stream[i], &stream[i]);
  }
  std::vector<uint8_t> final;
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) final.push_back(uint8_t(v >> (8 * i)));
  };
  for (char ch : std::string("tdbghash")) final.push_back(uint8_t(ch));
  put(1, 4);
  put(uint32_t(dtype), 4);
  put(sizes.size(), 4);
  put(65536, 4);
  for (int64_t s : sizes) put(uint64_t(s), 8);
  for (size_t off = 0, i = 0; off < stream.size(); off += 65536, ++i)
    put(XXH3_64bits_withSeed(&stream[off], std::min<size_t>(65536, stream.size() - off), i), 8);
  return XXH3_64bits_withSeed(final.data(), final.size(), 0);
}

HashResult hash(const void* data, DType dtype, const std::vector<int64_t>& sizes,
                const std::vector<int64_t>& strides, HashOptions opt = {}) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.ndim = int(sizes.size());
  v.sizes = sizes.data();
  v.strides = strides.data();
  return hash_tensor(v, opt);
}
HashResult hash(const void* data, DType dtype, const std::vector<int64_t>& sizes, HashOptions opt = {}) {
  return hash(data, dtype, sizes, contiguous_strides(sizes), opt);
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& v : b) v = uint8_t(rng());
  return b;
}

const DType kAllHashable[] = {
    DType::kBool, DType::kUInt8, DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64,
    DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64, DType::kComplex32,
    DType::kComplex64, DType::kComplex128, DType::kUInt16, DType::kUInt32, DType::kUInt64,
    DType::kFloat8E4M3FN, DType::kFloat8E5M2};

}  // namespace

TEST_CASE("golden vectors of docs/hash-spec.md") {
  // Each vector is spelled out in the spec, section "Golden vectors".
  float f[6] = {1, 2, 3, 4, 5, 6};
  CHECK(hex(hash(f, DType::kFloat32, {2, 3}).hash) == "c420a065ca7b98ea");
  float scalar = 1.5f;
  CHECK(hex(hash(&scalar, DType::kFloat32, {}).hash) == "6afdc00d4a773e3e");
  CHECK(hex(hash(nullptr, DType::kFloat32, {0, 4}).hash) == "d7e7665b5241bbdf");
  int64_t ramp[3] = {0, 1, 2};
  CHECK(hex(hash(ramp, DType::kInt64, {3}).hash) == "8ef119af69439908");
  uint8_t bools[4] = {1, 0, 0, 1};
  CHECK(hex(hash(bools, DType::kBool, {4}).hash) == "c92f399482014706");
  // 20000 float32 i * 0.5f: 80000 bytes, two chunks.
  std::vector<float> big(20000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = float(i) * 0.5f;
  CHECK(hex(hash(big.data(), DType::kFloat32, {20000}).hash) == "8b5071703872d534");
  CHECK(hex(hash_bytes("tdbg", 4, 0)) == "a4cb39a5bf32e556");
  CHECK(hex(hash_combine(0, 1)) == "2fbc593564db792e");
}

TEST_CASE("hash equals the naive reference for every dtype and edge sizes") {
  for (DType dt : kAllHashable) {
    size_t es = dtype_size(dt);
    size_t per_chunk = kChunkBytes / es;
    for (size_t n : {size_t(0), size_t(1), size_t(2), size_t(7), per_chunk - 1, per_chunk, per_chunk + 1,
                     3 * per_chunk + 5}) {
      INFO(dtype_name(dt) << " n=" << n);
      auto bytes = random_bytes(n * es + 1, uint32_t(n) * 31 + uint32_t(dt));
      std::vector<int64_t> sizes = {int64_t(n)};
      HashResult r = hash(bytes.data(), dt, sizes);
      REQUIRE(r.hashed);
      CHECK(r.hash == reference_hash(bytes.data(), dt, sizes, {1}));
      // Summaries off gives the same hash.
      HashOptions no_summary;
      no_summary.summaries = false;
      CHECK(hash(bytes.data(), dt, sizes, no_summary).hash == r.hash);
      CHECK(r.summary.valid == (dtype_is_floating(dt) && n > 0));
    }
  }
}

TEST_CASE("dtype and shape are part of the hash") {
  std::vector<uint8_t> bytes(64, 0);
  uint64_t a = hash(bytes.data(), DType::kInt32, {16}).hash;
  CHECK(hash(bytes.data(), DType::kUInt32, {16}).hash != a);
  CHECK(hash(bytes.data(), DType::kInt32, {4, 4}).hash != a);
  CHECK(hash(bytes.data(), DType::kInt32, {1, 16}).hash != a);
  CHECK(hash(bytes.data(), DType::kInt16, {32}).hash != a);
  CHECK(hash(nullptr, DType::kInt32, {0}).hash != hash(nullptr, DType::kInt32, {0, 3}).hash);
  // A 0-dim tensor differs from a one-element 1-dim one.
  CHECK(hash(bytes.data(), DType::kInt32, {}).hash != hash(bytes.data(), DType::kInt32, {1}).hash);
}

TEST_CASE("views, permutations and expands hash like their contiguous copies") {
  // A 3-D base tensor; views are described over its memory with their own strides.
  const int64_t A = 37, B = 45, C = 29;  // 48 KiB of float32: views span several chunks below
  std::vector<float> base(size_t(A * B * C));
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (auto& v : base) v = nd(rng);

  auto check_view = [&](const float* data, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
    // Materialize the view contiguously, the slow obvious way.
    int64_t numel = 1;
    for (int64_t s : sizes) numel *= s;
    std::vector<float> copy(size_t(std::max<int64_t>(numel, 1)));
    std::vector<int64_t> idx(sizes.size(), 0);
    for (int64_t e = 0; e < numel; ++e) {
      int64_t off = 0;
      for (size_t d = 0; d < sizes.size(); ++d) off += idx[d] * strides[d];
      copy[size_t(e)] = data[off];
      for (size_t d = sizes.size(); d-- > 0;) {
        if (++idx[d] < sizes[d]) break;
        idx[d] = 0;
      }
    }
    HashResult v = hash(data, DType::kFloat32, sizes, strides);
    HashResult c = hash(copy.data(), DType::kFloat32, sizes);
    REQUIRE(v.hashed);
    CHECK(v.hash == c.hash);
    CHECK(v.hash == reference_hash(data, DType::kFloat32, sizes, strides));
    CHECK(v.summary.sum == c.summary.sum);  // bit-identical, not just close
    CHECK(v.summary.min == c.summary.min);
    CHECK(v.summary.max == c.summary.max);
  };
  SECTION("permutation") { check_view(base.data(), {C, A, B}, {1, B * C, C}); }
  SECTION("transpose of the last two") { check_view(base.data(), {A, C, B}, {B * C, 1, C}); }
  SECTION("slice with step") { check_view(base.data() + 3, {A, B / 2, C - 3}, {B * C, 2 * C, 1}); }
  SECTION("narrow (contiguous rows inside)") { check_view(base.data() + C, {A, B - 2, C}, {B * C, C, 1}); }
  SECTION("expand of a row") { check_view(base.data(), {A, B, C}, {0, 0, 1}); }
  SECTION("expand in the middle") { check_view(base.data(), {A, 1000, 3}, {B * C, 0, 1}); }
  SECTION("size-1 dims with odd strides") { check_view(base.data(), {1, A * B * C, 1}, {12345, 1, 999}); }
  SECTION("scalar broadcast to a big shape") { check_view(base.data() + 5, {300, 300}, {0, 0}); }
}

TEST_CASE("thread count never changes the hash or the summaries") {
  size_t n = (kParallelMinBytes / 4) * 3 + 12345;  // ~24 MiB float32, past the threshold
  std::vector<float> data(n);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> ud(-1e3f, 1e3f);
  for (auto& v : data) v = ud(rng);
  data[n / 2] = std::numeric_limits<float>::quiet_NaN();
  data[n / 3] = -std::numeric_limits<float>::infinity();
  HashResult one = hash(data.data(), DType::kFloat32, {int64_t(n)});
  for (int t : {2, 3, 8}) {
    HashOptions o;
    o.threads = t;
    HashResult r = hash(data.data(), DType::kFloat32, {int64_t(n)}, o);
    CHECK(r.hash == one.hash);
    CHECK(r.summary.sum == one.summary.sum);
    CHECK(r.summary.abs_sum == one.summary.abs_sum);
    CHECK(r.summary.nan_count == 1);
    CHECK(r.summary.inf_count == 1);
  }
  // Also a strided view on threads.
  HashOptions o;
  o.threads = 2;
  std::vector<int64_t> sizes = {int64_t(n / 2)}, strides = {2};
  CHECK(hash(data.data(), DType::kFloat32, sizes, strides, o).hash ==
        hash(data.data(), DType::kFloat32, sizes, strides).hash);
  CHECK(one.hash == reference_hash(data.data(), DType::kFloat32, {int64_t(n)}, {1}));
}

TEST_CASE("every NaN hashes alike, -0.0 differs from +0.0") {
  auto f32 = [](uint32_t bits) {
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  };
  std::vector<float> a(1000, 1.0f), b(1000, 1.0f);
  a[17] = f32(0x7fc00000u);  // canonical
  b[17] = f32(0xffc00001u);  // negative NaN with payload
  CHECK(hash(a.data(), DType::kFloat32, {1000}).hash == hash(b.data(), DType::kFloat32, {1000}).hash);
  b[17] = f32(0x7f800001u);  // signalling NaN
  CHECK(hash(a.data(), DType::kFloat32, {1000}).hash == hash(b.data(), DType::kFloat32, {1000}).hash);
  b[17] = std::numeric_limits<float>::infinity();
  CHECK(hash(a.data(), DType::kFloat32, {1000}).hash != hash(b.data(), DType::kFloat32, {1000}).hash);
  float pz = 0.0f, nz = -0.0f;
  CHECK(hash(&pz, DType::kFloat32, {}).hash != hash(&nz, DType::kFloat32, {}).hash);

  uint16_t h1[3] = {0x3c00, 0x7e00, 0x0001}, h2[3] = {0x3c00, 0xfd55, 0x0001};
  CHECK(hash(h1, DType::kFloat16, {3}).hash == hash(h2, DType::kFloat16, {3}).hash);
  h2[1] = 0x7c00;  // +inf is not NaN
  CHECK(hash(h1, DType::kFloat16, {3}).hash != hash(h2, DType::kFloat16, {3}).hash);
  uint16_t g1[2] = {0x7fc0, 1}, g2[2] = {0xff81, 1};
  CHECK(hash(g1, DType::kBFloat16, {2}).hash == hash(g2, DType::kBFloat16, {2}).hash);
  uint64_t d1[2] = {0x7ff8000000000000ull, 5}, d2[2] = {0xfff0000000000001ull, 5};
  CHECK(hash(d1, DType::kFloat64, {2}).hash == hash(d2, DType::kFloat64, {2}).hash);
  CHECK(hash(d1, DType::kComplex128, {1}).hash == hash(d2, DType::kComplex128, {1}).hash);
  uint8_t e1[2] = {0x7f, 0x01}, e2[2] = {0xff, 0x01};
  CHECK(hash(e1, DType::kFloat8E4M3FN, {2}).hash == hash(e2, DType::kFloat8E4M3FN, {2}).hash);
  uint8_t m1[2] = {0x7e, 0x01}, m2[2] = {0xfd, 0x01};
  CHECK(hash(m1, DType::kFloat8E5M2, {2}).hash == hash(m2, DType::kFloat8E5M2, {2}).hash);
  m2[0] = 0x7c;  // +inf
  CHECK(hash(m1, DType::kFloat8E5M2, {2}).hash != hash(m2, DType::kFloat8E5M2, {2}).hash);
  // A NaN in the second chunk of a big tensor, summaries on and off.
  std::vector<float> big(40000, 2.0f), big2 = big;
  big[30000] = f32(0x7fc00000u);
  big2[30000] = f32(0x7fffffffu);
  HashOptions off;
  off.summaries = false;
  CHECK(hash(big.data(), DType::kFloat32, {40000}).hash == hash(big2.data(), DType::kFloat32, {40000}).hash);
  CHECK(hash(big.data(), DType::kFloat32, {40000}, off).hash == hash(big2.data(), DType::kFloat32, {40000}).hash);
  // Bools: any nonzero byte is true.
  uint8_t t1[3] = {1, 0, 1}, t2[3] = {0x80, 0, 2};
  CHECK(hash(t1, DType::kBool, {3}).hash == hash(t2, DType::kBool, {3}).hash);
}

TEST_CASE("summaries match a naive reference") {
  // Both the AVX2 and the SSE2 paths (the first is skipped on CPUs without AVX2), with and
  // without NaN/Inf (all-finite chunks take the fast path, others the exact one).
  bool baseline = GENERATE(false, true);
  bool specials = GENERATE(false, true);
  bool avx2_only = GENERATE(false, true);
  internal::force_baseline_simd_for_testing(baseline);
  internal::force_avx2_for_testing(avx2_only);
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kComplex64,
                   DType::kFloat8E4M3FN, DType::kFloat8E5M2, DType::kComplex32}) {
    for (size_t n : {size_t(1), size_t(5), size_t(1000), size_t(70001)}) {
      INFO(dtype_name(dt) << " n=" << n << " baseline=" << baseline << " specials=" << specials);
      size_t es = dtype_size(dt);
      auto bytes = random_bytes(n * es, uint32_t(n) + 100 * uint32_t(dt));
      if (!specials) {
        // Random bits, but no NaN/Inf patterns: clear one exponent bit of every unit.
        size_t w = (dt == DType::kComplex64) ? 4 : (dt == DType::kComplex32) ? 2 : es;
        for (size_t i = w - 1; i < bytes.size(); i += w) bytes[i] &= 0xbf;
      }
      // Random bits make NaN/Inf plentiful for the narrow types; tame float32/64 so sums mean
      // something, keeping a few specials.
      if (dt == DType::kFloat32 || dt == DType::kComplex64) {
        float* f = reinterpret_cast<float*>(bytes.data());
        for (size_t i = 0; i < bytes.size() / 4; ++i) f[i] = float(int(i % 2001) - 1000) * 0.25f;
        if (n > 10 && specials) { f[3] = std::numeric_limits<float>::infinity(); f[9] = std::nanf(""); }
      }
      if (dt == DType::kFloat64) {
        double* d = reinterpret_cast<double*>(bytes.data());
        for (size_t i = 0; i < n; ++i) d[i] = std::sin(double(i)) * 1e6;
        if (n > 10 && specials) { d[2] = -std::numeric_limits<double>::infinity(); d[8] = std::nan(""); }
      }
      // Naive reference in long double.
      size_t comps = (dt == DType::kComplex64 || dt == DType::kComplex32) ? 2 * n : n;
      long double sum = 0, abs_sum = 0;
      double mn = INFINITY, mx = -INFINITY;
      int64_t nan = 0, inf = 0;
      for (size_t i = 0; i < comps; ++i) {
        double v;
        const uint8_t* p = bytes.data();
        switch (dt) {
          case DType::kFloat32: case DType::kComplex64: { float f; std::memcpy(&f, p + 4 * i, 4); v = f; break; }
          case DType::kFloat64: std::memcpy(&v, p + 8 * i, 8); break;
          case DType::kFloat16: case DType::kComplex32: v = canonical::f16_to_float(uint16_t(p[2 * i] | p[2 * i + 1] << 8)); break;
          case DType::kBFloat16: v = canonical::bf16_to_float(uint16_t(p[2 * i] | p[2 * i + 1] << 8)); break;
          case DType::kFloat8E4M3FN: v = canonical::f8e4m3fn_to_float(p[i]); break;
          default: v = canonical::f8e5m2_to_float(p[i]); break;
        }
        if (std::isnan(v)) { ++nan; continue; }
        if (std::isinf(v)) { ++inf; continue; }
        mn = std::min(mn, v);
        mx = std::max(mx, v);
        sum += v;
        abs_sum += std::fabs(v);
      }
      HashResult r = hash(bytes.data(), dt, {int64_t(n)});
      REQUIRE(r.summary.valid);
      CHECK(r.summary.nan_count == nan);
      CHECK(r.summary.inf_count == inf);
      if (nan + inf < int64_t(comps)) {
        CHECK(r.summary.min == mn);
        CHECK(r.summary.max == mx);
      } else {
        CHECK(std::isnan(r.summary.min));
        CHECK(std::isnan(r.summary.max));
      }
      double tol = 1e-12 * double(abs_sum) + 1e-300;
      CHECK(std::fabs(r.summary.sum - double(sum)) <= tol);
      CHECK(std::fabs(r.summary.abs_sum - double(abs_sum)) <= tol);
      if (!specials) CHECK(nan + inf == 0);
      // Hash-only mode runs the NaN check instead of the summaries: same hash.
      HashOptions off;
      off.summaries = false;
      CHECK(hash(bytes.data(), dt, {int64_t(n)}, off).hash == r.hash);
    }
  }
  internal::force_baseline_simd_for_testing(false);
  internal::force_avx2_for_testing(false);
}

TEST_CASE("float16 conversion is exact for all 65536 values") {
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = canonical::f16_to_float(uint16_t(b));
    uint32_t exp = (b >> 10) & 0x1f, man = b & 0x3ff;
    double expect = exp == 0 ? std::ldexp(double(man), -24)
                  : exp == 31 ? (man ? NAN : INFINITY)
                              : std::ldexp(1.0 + double(man) / 1024.0, int(exp) - 15);
    if (b & 0x8000) expect = -expect;
    if (std::isnan(expect)) {
      CHECK(std::isnan(f));
    } else if (f != expect) {
      FAIL("float16 bits " << b << " gave " << f << " expected " << expect);
    }
  }
  // The SSE2 path of the summaries converts float16 separately: check it via min/max.
  std::vector<uint16_t> all(65536);
  std::iota(all.begin(), all.end(), uint16_t(0));
  HashResult r = hash(all.data(), DType::kFloat16, {65536});
  CHECK(r.summary.max == 65504.0);
  CHECK(r.summary.min == -65504.0);
  CHECK(r.summary.nan_count == 2 * 1023);
  CHECK(r.summary.inf_count == 2);
  CHECK(r.summary.sum == 0.0);  // symmetric values cancel exactly
}

TEST_CASE("unhashable dtypes and invalid views are reported, never hashed") {
  int8_t q[4] = {};
  int64_t size = 4;
  TensorView v{q, DType::kQInt8, 1, &size, nullptr};
  HashResult r = hash_tensor(v);
  CHECK_FALSE(r.hashed);
  CHECK(std::string(r.error) == "quantized dtype qint8 is not hashed");
  CHECK_FALSE(dtype_is_hashable(DType::kQUInt8));
  CHECK_FALSE(dtype_is_hashable(DType::kUnknown));
  for (DType dt : kAllHashable) CHECK(dtype_is_hashable(dt));
  int64_t neg = -1;
  TensorView bad{q, DType::kInt8, 1, &neg, nullptr};
  CHECK_FALSE(hash_tensor(bad).hashed);
  TensorView null_data{nullptr, DType::kInt8, 1, &size, nullptr};
  CHECK_FALSE(hash_tensor(null_data).hashed);
  TensorView too_many{q, DType::kInt8, kMaxDims + 1, &size, nullptr};
  CHECK_FALSE(hash_tensor(too_many).hashed);
}

TEST_CASE("null strides mean contiguous, and hash_combine is ordered") {
  std::vector<int32_t> d(1000);
  std::iota(d.begin(), d.end(), 0);
  std::vector<int64_t> sizes = {10, 100};
  TensorView v{d.data(), DType::kInt32, 2, sizes.data(), nullptr};
  CHECK(hash_tensor(v).hash == hash(d.data(), DType::kInt32, sizes).hash);
  CHECK(hash_combine(hash_combine(0, 1), 2) != hash_combine(hash_combine(0, 2), 1));
  CHECK(hash_bytes(d.data(), 40, 0) == XXH3_64bits_withSeed(d.data(), 40, 0));
}

TEST_CASE("hash_bytes and hash_combine equal libxxhash at every length around the inline cutoff") {
  std::vector<uint8_t> bytes(600);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + 7);
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}, uint64_t{0x9E3779B97F4A7C15}}) {
    for (size_t n = 0; n <= bytes.size(); ++n) {
      INFO("size " << n << " seed " << seed);
      REQUIRE(hash_bytes(bytes.data(), n, seed) == XXH3_64bits_withSeed(bytes.data(), n, seed));
    }
    uint8_t le[8];
    const uint64_t value = 0x0123456789ABCDEFull;
    for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(value >> (8 * i));
    CHECK(hash_combine(seed, value) == XXH3_64bits_withSeed(le, 8, seed));
  }
}

TEST_CASE("the fused AVX2 hash+scan equals libxxhash and the exact summaries") {
  using canonical::Unit;
  // The AVX-512 loop where the CPU has it, then the AVX2 one.
  bool avx2_only = GENERATE(false, true);
  internal::force_avx2_for_testing(avx2_only);
  struct Case {
    Unit unit;
    size_t width;
  };
  for (Case k : {Case{Unit::kF32, 4}, Case{Unit::kF64, 8}, Case{Unit::kF16, 2}, Case{Unit::kBF16, 2}}) {
    auto bytes = random_bytes(70000, 99 + unsigned(k.unit));
    // Finite values only (clear the top exponent bit of every unit), else the path declines.
    for (size_t i = k.width - 1; i < bytes.size(); i += k.width) bytes[i] &= 0xbf;
    int declined = 0;
    for (size_t len = 0; len <= 65536; len += (len < 3000 ? k.width : 1021 * k.width)) {
      uint64_t h = 0;
      internal::ChunkSummary fused;
      if (!internal::fused_hash_and_scan(k.unit, bytes.data() + 1, len, 77, &h, &fused)) {
        ++declined;  // too short, or no AVX2 on this CPU
        continue;
      }
      INFO("unit " << int(k.unit) << " len " << len);
      CHECK(h == XXH3_64bits_withSeed(bytes.data() + 1, len, 77));
      internal::force_baseline_simd_for_testing(true);
      internal::ChunkSummary exact = internal::summarize_chunk(k.unit, bytes.data() + 1, len);
      internal::force_baseline_simd_for_testing(false);
      CHECK(fused.min == exact.min);
      CHECK(fused.max == exact.max);
      CHECK(fused.finite_count == exact.finite_count);
      CHECK(std::fabs(fused.sum - exact.sum) <= 1e-12 * exact.abs_sum);
      uint64_t h2 = 0;
      CHECK(internal::fused_hash_and_scan(k.unit, bytes.data() + 1, len, 77, &h2, nullptr));
      CHECK(h2 == h);
    }
    CHECK(declined > 0);  // the short lengths always decline
    // A NaN makes it decline, with and without summaries.
    std::vector<uint8_t> nan_bytes(bytes.begin(), bytes.begin() + 4096);
    if (k.unit == Unit::kF32) { uint32_t q = 0x7fc00000u; std::memcpy(&nan_bytes[400], &q, 4); }
    if (k.unit == Unit::kF64) { uint64_t q = 0x7ff8000000000000ull; std::memcpy(&nan_bytes[400], &q, 8); }
    if (k.unit == Unit::kF16) { uint16_t q = 0x7e00; std::memcpy(&nan_bytes[400], &q, 2); }
    if (k.unit == Unit::kBF16) { uint16_t q = 0x7fc0; std::memcpy(&nan_bytes[400], &q, 2); }
    uint64_t h = 0;
    internal::ChunkSummary s;
    CHECK_FALSE(internal::fused_hash_and_scan(k.unit, nan_bytes.data(), 4096, 1, &h, &s));
    CHECK_FALSE(internal::fused_hash_and_scan(k.unit, nan_bytes.data(), 4096, 1, &h, nullptr));
  }
  internal::force_avx2_for_testing(false);
}
