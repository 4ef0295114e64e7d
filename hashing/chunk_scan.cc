// SSE2 and scalar implementations of the per-chunk scans declared in chunk_scan.h. The lane
// layout is fixed by the element's position in the chunk (never by its address), so a chunk
// gathered from a strided view summarizes to the same bits as the contiguous one.
#include "hashing/chunk_scan.h"

#include <cmath>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TDBG_HAVE_AVX2_PATH 1
#endif

namespace tdbg::hashing::internal {
namespace {

using canonical::Unit;

constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr double kInfD = std::numeric_limits<double>::infinity();

// Finishes a summary from lane minima/maxima and counts: with no finite value, min and max
// are NaN (there is no meaningful bound), as the spec says.
void finish_bounds(ChunkSummary& s, double mn, double mx) {
  if (s.finite_count == 0) {
    s.min = s.max = std::numeric_limits<double>::quiet_NaN();
  } else {
    s.min = mn;
    s.max = mx;
  }
}

// Float values of every float8 byte, built on first use (a function-local static, so that a
// hash computed during another library's static initialization still sees a ready table).
struct F8Tables {
  float e4m3[256], e5m2[256];
  F8Tables() {
    for (int i = 0; i < 256; ++i) {
      e4m3[i] = canonical::f8e4m3fn_to_float(uint8_t(i));
      e5m2[i] = canonical::f8e5m2_to_float(uint8_t(i));
    }
  }
};
const F8Tables& f8_tables() {
  static const F8Tables tables;
  return tables;
}

float scalar_as_float(Unit unit, const uint8_t* q) {
  switch (unit) {
    case Unit::kF32: {
      float f;
      std::memcpy(&f, q, 4);
      return f;
    }
    case Unit::kF16: return canonical::f16_to_float(uint16_t(q[0] | q[1] << 8));
    case Unit::kBF16: return canonical::bf16_to_float(uint16_t(q[0] | q[1] << 8));
    case Unit::kF8E4M3FN: return f8_tables().e4m3[q[0]];
    default: return f8_tables().e5m2[q[0]];
  }
}

#if defined(__SSE2__)

// Accumulators for float lanes: two independent sets so that the double additions of
// consecutive groups do not wait on each other.
struct F32Lanes {
  __m128 mn[2], mx[2];
  __m128d sum[4], abs[4];
  __m128i nan[2], inf[2];
  F32Lanes() {
    for (int k = 0; k < 2; ++k) {
      mn[k] = _mm_set1_ps(kInfF);
      mx[k] = _mm_set1_ps(-kInfF);
      nan[k] = inf[k] = _mm_setzero_si128();
    }
    for (int k = 0; k < 4; ++k) sum[k] = abs[k] = _mm_setzero_pd();
  }
  // Adds four floats to lane set `k` (0 or 1).
  inline void add(__m128 v, int k) {
    const __m128 absmask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
    const __m128 inf_v = _mm_set1_ps(kInfF);
    __m128 a = _mm_and_ps(v, absmask);
    __m128 fin = _mm_cmplt_ps(a, inf_v);  // false for NaN and ±Inf
    __m128 is_inf = _mm_cmpeq_ps(a, inf_v);
    __m128 is_nan = _mm_cmpunord_ps(v, v);
    __m128 vf = _mm_and_ps(v, fin);
    __m128 af = _mm_and_ps(a, fin);
    __m128 not_fin_inf = _mm_andnot_ps(fin, inf_v);
    mn[k] = _mm_min_ps(mn[k], _mm_or_ps(vf, not_fin_inf));
    mx[k] = _mm_max_ps(mx[k], _mm_or_ps(vf, _mm_andnot_ps(fin, _mm_set1_ps(-kInfF))));
    sum[2 * k] = _mm_add_pd(sum[2 * k], _mm_cvtps_pd(vf));
    sum[2 * k + 1] = _mm_add_pd(sum[2 * k + 1], _mm_cvtps_pd(_mm_movehl_ps(vf, vf)));
    abs[2 * k] = _mm_add_pd(abs[2 * k], _mm_cvtps_pd(af));
    abs[2 * k + 1] = _mm_add_pd(abs[2 * k + 1], _mm_cvtps_pd(_mm_movehl_ps(af, af)));
    nan[k] = _mm_sub_epi32(nan[k], _mm_castps_si128(is_nan));
    inf[k] = _mm_sub_epi32(inf[k], _mm_castps_si128(is_inf));
  }
  ChunkSummary finish(int64_t padding_nans, size_t n) const {
    alignas(16) float mnv[8], mxv[8];
    alignas(16) double sv[8], av[8];
    alignas(16) int32_t nv[8], iv[8];
    for (int k = 0; k < 2; ++k) {
      _mm_store_ps(mnv + 4 * k, mn[k]);
      _mm_store_ps(mxv + 4 * k, mx[k]);
      _mm_store_si128(reinterpret_cast<__m128i*>(nv + 4 * k), nan[k]);
      _mm_store_si128(reinterpret_cast<__m128i*>(iv + 4 * k), inf[k]);
    }
    for (int k = 0; k < 4; ++k) {
      _mm_store_pd(sv + 2 * k, sum[k]);
      _mm_store_pd(av + 2 * k, abs[k]);
    }
    ChunkSummary s;
    double lo = kInfD, hi = -kInfD;
    for (int i = 0; i < 8; ++i) {
      lo = mnv[i] < lo ? mnv[i] : lo;
      hi = mxv[i] > hi ? mxv[i] : hi;
      s.sum += sv[i];
      s.abs_sum += av[i];
      s.nan_count += nv[i];
      s.inf_count += iv[i];
    }
    s.nan_count -= padding_nans;
    s.finite_count = int64_t(n) - s.nan_count - s.inf_count;
    finish_bounds(s, lo, hi);
    return s;
  }
};

// Converts eight float16 (in `h`) to two vectors of float, exactly (subnormals included),
// with integer operations and one multiply: SSE2 has no F16C.
inline void f16x8_to_f32(__m128i h, __m128& lo, __m128& hi) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i nosign = _mm_set1_epi32(0x7fff);
  const __m128 magic = _mm_castsi128_ps(_mm_set1_epi32((254 - 15) << 23));
  const __m128i was_infnan = _mm_set1_epi32(0x7bff);
  const __m128i exp_infnan = _mm_set1_epi32(255 << 23);
  __m128i parts[2] = {_mm_unpacklo_epi16(h, zero), _mm_unpackhi_epi16(h, zero)};
  __m128 out[2];
  for (int k = 0; k < 2; ++k) {
    __m128i expmant = _mm_and_si128(nosign, parts[k]);
    __m128i justsign = _mm_xor_si128(parts[k], expmant);
    __m128 scaled = _mm_mul_ps(_mm_castsi128_ps(_mm_slli_epi32(expmant, 13)), magic);
    __m128i infnan = _mm_and_si128(_mm_cmpgt_epi32(expmant, was_infnan), exp_infnan);
    __m128i sign_inf = _mm_or_si128(_mm_slli_epi32(justsign, 16), infnan);
    out[k] = _mm_or_ps(scaled, _mm_castsi128_ps(sign_inf));
  }
  lo = out[0];
  hi = out[1];
}

// Loads up to 8 trailing values as floats into `tail`, padding with NaN (the padding is
// subtracted from the NaN count afterwards).
template <typename Convert>
int load_tail(const uint8_t* p, size_t count, size_t width, Convert convert, float* tail) {
  for (size_t i = 0; i < 8; ++i) tail[i] = std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 0; i < count; ++i) tail[i] = convert(p + i * width);
  return int(8 - count);
}

ChunkSummary summarize_f32_like(Unit unit, const uint8_t* p, size_t bytes) {
  F32Lanes lanes;
  size_t width = canonical::unit_size(unit);
  size_t n = bytes / width, i = 0;
  const __m128i zero = _mm_setzero_si128();
  switch (unit) {
    case Unit::kF32:
      for (; i + 8 <= n; i += 8) {
        lanes.add(_mm_loadu_ps(reinterpret_cast<const float*>(p) + i), 0);
        lanes.add(_mm_loadu_ps(reinterpret_cast<const float*>(p) + i + 4), 1);
      }
      break;
    case Unit::kF16:
      for (; i + 8 <= n; i += 8) {
        __m128 lo, hi;
        f16x8_to_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)), lo, hi);
        lanes.add(lo, 0);
        lanes.add(hi, 1);
      }
      break;
    case Unit::kBF16:
      for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i));
        lanes.add(_mm_castsi128_ps(_mm_unpacklo_epi16(zero, h)), 0);
        lanes.add(_mm_castsi128_ps(_mm_unpackhi_epi16(zero, h)), 1);
      }
      break;
    case Unit::kF8E4M3FN:
    case Unit::kF8E5M2: {
      const float* table = unit == Unit::kF8E4M3FN ? f8_tables().e4m3 : f8_tables().e5m2;
      alignas(16) float v[8];
      for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; ++k) v[k] = table[p[i + k]];
        lanes.add(_mm_load_ps(v), 0);
        lanes.add(_mm_load_ps(v + 4), 1);
      }
      break;
    }
    default:
      break;
  }
  int padding = 0;
  if (i < n) {
    alignas(16) float tail[8];
    auto convert = [unit](const uint8_t* q) { return scalar_as_float(unit, q); };
    padding = load_tail(p + i * width, n - i, width, convert, tail);
    lanes.add(_mm_load_ps(tail), 0);
    lanes.add(_mm_load_ps(tail + 4), 1);
  }
  return lanes.finish(padding, n);
}

struct F64Lanes {
  __m128d mn[2], mx[2], sum[2], abs[2];
  __m128i nan[2], inf[2];
  F64Lanes() {
    for (int k = 0; k < 2; ++k) {
      mn[k] = _mm_set1_pd(kInfD);
      mx[k] = _mm_set1_pd(-kInfD);
      sum[k] = abs[k] = _mm_setzero_pd();
      nan[k] = inf[k] = _mm_setzero_si128();
    }
  }
  inline void add(__m128d v, int k) {
    const __m128d absmask = _mm_castsi128_pd(_mm_set1_epi64x(0x7fffffffffffffffll));
    const __m128d inf_v = _mm_set1_pd(kInfD);
    __m128d a = _mm_and_pd(v, absmask);
    __m128d fin = _mm_cmplt_pd(a, inf_v);
    __m128d is_inf = _mm_cmpeq_pd(a, inf_v);
    __m128d is_nan = _mm_cmpunord_pd(v, v);
    __m128d vf = _mm_and_pd(v, fin);
    __m128d not_fin_inf = _mm_andnot_pd(fin, inf_v);
    mn[k] = _mm_min_pd(mn[k], _mm_or_pd(vf, not_fin_inf));
    mx[k] = _mm_max_pd(mx[k], _mm_or_pd(vf, _mm_andnot_pd(fin, _mm_set1_pd(-kInfD))));
    sum[k] = _mm_add_pd(sum[k], vf);
    abs[k] = _mm_add_pd(abs[k], _mm_and_pd(a, fin));
    nan[k] = _mm_sub_epi64(nan[k], _mm_castpd_si128(is_nan));
    inf[k] = _mm_sub_epi64(inf[k], _mm_castpd_si128(is_inf));
  }
};

ChunkSummary summarize_f64(const uint8_t* p, size_t bytes) {
  F64Lanes lanes;
  size_t n = bytes / 8, i = 0;
  const double* d = reinterpret_cast<const double*>(p);
  for (; i + 4 <= n; i += 4) {
    lanes.add(_mm_loadu_pd(d + i), 0);
    lanes.add(_mm_loadu_pd(d + i + 2), 1);
  }
  int64_t padding = 0;
  if (i < n) {
    alignas(16) double tail[4];
    for (int k = 0; k < 4; ++k) tail[k] = std::numeric_limits<double>::quiet_NaN();
    std::memcpy(tail, d + i, (n - i) * 8);
    padding = int64_t(4 - (n - i));
    lanes.add(_mm_load_pd(tail), 0);
    lanes.add(_mm_load_pd(tail + 2), 1);
  }
  alignas(16) double mnv[4], mxv[4], sv[4], av[4];
  alignas(16) int64_t nv[4], iv[4];
  for (int k = 0; k < 2; ++k) {
    _mm_store_pd(mnv + 2 * k, lanes.mn[k]);
    _mm_store_pd(mxv + 2 * k, lanes.mx[k]);
    _mm_store_pd(sv + 2 * k, lanes.sum[k]);
    _mm_store_pd(av + 2 * k, lanes.abs[k]);
    _mm_store_si128(reinterpret_cast<__m128i*>(nv + 2 * k), lanes.nan[k]);
    _mm_store_si128(reinterpret_cast<__m128i*>(iv + 2 * k), lanes.inf[k]);
  }
  ChunkSummary s;
  double lo = kInfD, hi = -kInfD;
  for (int k = 0; k < 4; ++k) {
    lo = mnv[k] < lo ? mnv[k] : lo;
    hi = mxv[k] > hi ? mxv[k] : hi;
    s.sum += sv[k];
    s.abs_sum += av[k];
    s.nan_count += nv[k];
    s.inf_count += iv[k];
  }
  s.nan_count -= padding;
  s.finite_count = int64_t(n) - s.nan_count - s.inf_count;
  finish_bounds(s, lo, hi);
  return s;
}


// ---- Fast paths -------------------------------------------------------------------------
// Almost every chunk is all finite. For those, min/max need no masking and the sums need no
// masking either, so the fast paths only convert, add and compare. Any NaN or ±Inf makes a
// lane sum non-finite (finite float values never overflow a double sum over one chunk; a
// float64 sum that overflows is sent to the exact path too), and then the caller reruns the
// chunk through the exact, masked path. Which path runs depends only on the chunk's values.

// Scalar remainder of a fast path: adds the last few values; false on a non-finite one.
inline bool fast_tail(double v, double& mn, double& mx, double& sum, double& abs) {
  if (!std::isfinite(v)) return false;
  mn = v < mn ? v : mn;
  mx = v > mx ? v : mx;
  sum += v;
  abs += std::fabs(v);
  return true;
}

inline bool fast_finish(const double* mnv, const double* mxv, const double* sv, const double* av, int lanes,
                        double tmn, double tmx, double tsum, double tabs, size_t n, ChunkSummary* out) {
  ChunkSummary s;
  double lo = tmn, hi = tmx;
  for (int i = 0; i < lanes; ++i) {
    lo = mnv[i] < lo ? mnv[i] : lo;
    hi = mxv[i] > hi ? mxv[i] : hi;
    s.sum += sv[i];
    s.abs_sum += av[i];
  }
  s.sum += tsum;
  s.abs_sum += tabs;
  if (!std::isfinite(s.sum) || !std::isfinite(s.abs_sum)) return false;
  s.finite_count = int64_t(n);
  s.min = lo;
  s.max = hi;
  *out = s;
  return true;
}


// SSE2 fast path for the float-like units (float32, float16, bfloat16).
bool fast_f32_like_sse2(Unit unit, const uint8_t* p, size_t bytes, ChunkSummary* out) {
  const size_t width = canonical::unit_size(unit);
  const size_t n = bytes / width;
  const __m128d absmask = _mm_castsi128_pd(_mm_set1_epi64x(0x7fffffffffffffffll));
  const __m128i zero = _mm_setzero_si128();
  __m128 mn = _mm_set1_ps(kInfF), mx = _mm_set1_ps(-kInfF);
  __m128d s[4], a[4];
  for (int k = 0; k < 4; ++k) s[k] = a[k] = _mm_setzero_pd();
  auto add4 = [&](__m128 v, int k) {
    mn = _mm_min_ps(v, mn);
    mx = _mm_max_ps(v, mx);
    __m128d lo = _mm_cvtps_pd(v), hi = _mm_cvtps_pd(_mm_movehl_ps(v, v));
    s[k] = _mm_add_pd(s[k], lo);
    s[k + 1] = _mm_add_pd(s[k + 1], hi);
    a[k] = _mm_add_pd(a[k], _mm_and_pd(lo, absmask));
    a[k + 1] = _mm_add_pd(a[k + 1], _mm_and_pd(hi, absmask));
  };
  size_t i = 0;
  if (unit == Unit::kF32) {
    for (; i + 8 <= n; i += 8) {
      add4(_mm_loadu_ps(reinterpret_cast<const float*>(p) + i), 0);
      add4(_mm_loadu_ps(reinterpret_cast<const float*>(p) + i + 4), 2);
    }
  } else if (unit == Unit::kBF16) {
    for (; i + 8 <= n; i += 8) {
      __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i));
      add4(_mm_castsi128_ps(_mm_unpacklo_epi16(zero, h)), 0);
      add4(_mm_castsi128_ps(_mm_unpackhi_epi16(zero, h)), 2);
    }
  } else if (unit == Unit::kF16) {
    for (; i + 8 <= n; i += 8) {
      __m128 lo, hi;
      f16x8_to_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)), lo, hi);
      add4(lo, 0);
      add4(hi, 2);
    }
  } else {
    return false;
  }
  double tmn = kInfD, tmx = -kInfD, tsum = 0, tabs = 0;
  for (; i < n; ++i)
    if (!fast_tail(scalar_as_float(unit, p + i * width), tmn, tmx, tsum, tabs)) return false;
  alignas(16) float mnf[4], mxf[4];
  alignas(16) double mnv[4], mxv[4], sv[8], av[8];
  _mm_store_ps(mnf, mn);
  _mm_store_ps(mxf, mx);
  for (int k = 0; k < 4; ++k) {
    mnv[k] = mnf[k];
    mxv[k] = mxf[k];
    _mm_store_pd(sv + 2 * k, s[k]);
    _mm_store_pd(av + 2 * k, a[k]);
  }
  double s8[4], a8[4];
  for (int k = 0; k < 4; ++k) {
    s8[k] = sv[k] + sv[k + 4];
    a8[k] = av[k] + av[k + 4];
  }
  return fast_finish(mnv, mxv, s8, a8, 4, tmn, tmx, tsum, tabs, n, out);
}

bool fast_f64_sse2(const uint8_t* p, size_t bytes, ChunkSummary* out) {
  const size_t n = bytes / 8;
  const double* d = reinterpret_cast<const double*>(p);
  const __m128d absmask = _mm_castsi128_pd(_mm_set1_epi64x(0x7fffffffffffffffll));
  __m128d mn[2], mx[2], s[2], a[2];
  for (int k = 0; k < 2; ++k) {
    mn[k] = _mm_set1_pd(kInfD);
    mx[k] = _mm_set1_pd(-kInfD);
    s[k] = a[k] = _mm_setzero_pd();
  }
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int k = 0; k < 2; ++k) {
      __m128d v = _mm_loadu_pd(d + i + 2 * k);
      mn[k] = _mm_min_pd(v, mn[k]);
      mx[k] = _mm_max_pd(v, mx[k]);
      s[k] = _mm_add_pd(s[k], v);
      a[k] = _mm_add_pd(a[k], _mm_and_pd(v, absmask));
    }
  }
  double tmn = kInfD, tmx = -kInfD, tsum = 0, tabs = 0;
  for (; i < n; ++i) {
    double v;
    std::memcpy(&v, p + 8 * i, 8);
    if (!fast_tail(v, tmn, tmx, tsum, tabs)) return false;
  }
  alignas(16) double mnv[4], mxv[4], sv[4], av[4];
  for (int k = 0; k < 2; ++k) {
    _mm_store_pd(mnv + 2 * k, mn[k]);
    _mm_store_pd(mxv + 2 * k, mx[k]);
    _mm_store_pd(sv + 2 * k, s[k]);
    _mm_store_pd(av + 2 * k, a[k]);
  }
  return fast_finish(mnv, mxv, sv, av, 4, tmn, tmx, tsum, tabs, n, out);
}

#if defined(TDBG_HAVE_AVX2_PATH)
// AVX2 (+F16C) versions, chosen at run time: twice the width, and float16 converts in one
// instruction instead of eight.
__attribute__((target("avx2,f16c"))) bool fast_f32_like_avx2(Unit unit, const uint8_t* p, size_t bytes,
                                                            ChunkSummary* out) {
  const size_t width = canonical::unit_size(unit);
  const size_t n = bytes / width;
  const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll));
  __m256 mn = _mm256_set1_ps(kInfF), mx = _mm256_set1_ps(-kInfF);
  __m256d s[4], a[4];
  for (int k = 0; k < 4; ++k) s[k] = a[k] = _mm256_setzero_pd();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 v[2];
    if (unit == Unit::kF32) {
      v[0] = _mm256_loadu_ps(reinterpret_cast<const float*>(p) + i);
      v[1] = _mm256_loadu_ps(reinterpret_cast<const float*>(p) + i + 8);
    } else if (unit == Unit::kF16) {
      v[0] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
      v[1] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i + 16)));
    } else if (unit == Unit::kBF16) {
      __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
      __m256i g = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i + 16)));
      v[0] = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
      v[1] = _mm256_castsi256_ps(_mm256_slli_epi32(g, 16));
    } else {
      return false;
    }
    for (int k = 0; k < 2; ++k) {
      mn = _mm256_min_ps(v[k], mn);
      mx = _mm256_max_ps(v[k], mx);
      __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v[k]));
      __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v[k], 1));
      s[2 * k] = _mm256_add_pd(s[2 * k], lo);
      s[2 * k + 1] = _mm256_add_pd(s[2 * k + 1], hi);
      a[2 * k] = _mm256_add_pd(a[2 * k], _mm256_and_pd(lo, absmask));
      a[2 * k + 1] = _mm256_add_pd(a[2 * k + 1], _mm256_and_pd(hi, absmask));
    }
  }
  double tmn = kInfD, tmx = -kInfD, tsum = 0, tabs = 0;
  for (; i < n; ++i)
    if (!fast_tail(scalar_as_float(unit, p + i * width), tmn, tmx, tsum, tabs)) return false;
  alignas(32) float mnf[8], mxf[8];
  alignas(32) double mnv[8], mxv[8], sv[16], av[16];
  _mm256_store_ps(mnf, mn);
  _mm256_store_ps(mxf, mx);
  for (int k = 0; k < 8; ++k) {
    mnv[k] = mnf[k];
    mxv[k] = mxf[k];
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_store_pd(sv + 4 * k, s[k]);
    _mm256_store_pd(av + 4 * k, a[k]);
  }
  double s4[8], a4[8];
  for (int k = 0; k < 8; ++k) {
    s4[k] = sv[k] + sv[k + 8];
    a4[k] = av[k] + av[k + 8];
  }
  return fast_finish(mnv, mxv, s4, a4, 8, tmn, tmx, tsum, tabs, n, out);
}

__attribute__((target("avx2"))) bool fast_f64_avx2(const uint8_t* p, size_t bytes, ChunkSummary* out) {
  const size_t n = bytes / 8;
  const double* d = reinterpret_cast<const double*>(p);
  const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll));
  __m256d mn[2], mx[2], s[2], a[2];
  for (int k = 0; k < 2; ++k) {
    mn[k] = _mm256_set1_pd(kInfD);
    mx[k] = _mm256_set1_pd(-kInfD);
    s[k] = a[k] = _mm256_setzero_pd();
  }
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 2; ++k) {
      __m256d v = _mm256_loadu_pd(d + i + 4 * k);
      mn[k] = _mm256_min_pd(v, mn[k]);
      mx[k] = _mm256_max_pd(v, mx[k]);
      s[k] = _mm256_add_pd(s[k], v);
      a[k] = _mm256_add_pd(a[k], _mm256_and_pd(v, absmask));
    }
  }
  double tmn = kInfD, tmx = -kInfD, tsum = 0, tabs = 0;
  for (; i < n; ++i) {
    double v;
    std::memcpy(&v, p + 8 * i, 8);
    if (!fast_tail(v, tmn, tmx, tsum, tabs)) return false;
  }
  alignas(32) double mnv[8], mxv[8], sv[8], av[8];
  for (int k = 0; k < 2; ++k) {
    _mm256_store_pd(mnv + 4 * k, mn[k]);
    _mm256_store_pd(mxv + 4 * k, mx[k]);
    _mm256_store_pd(sv + 4 * k, s[k]);
    _mm256_store_pd(av + 4 * k, a[k]);
  }
  return fast_finish(mnv, mxv, sv, av, 8, tmn, tmx, tsum, tabs, n, out);
}

// NaN / non-0/1-bool detection with AVX2.
__attribute__((target("avx2"))) bool needs_canonical_avx2(Unit unit, const uint8_t* p, size_t bytes, size_t* done) {
  size_t i = 0;
  __m256i any = _mm256_setzero_si256();
  switch (unit) {
    case Unit::kF32:
      for (; i + 64 <= bytes; i += 64) {
        __m256 v = _mm256_loadu_ps(reinterpret_cast<const float*>(p + i));
        __m256 w = _mm256_loadu_ps(reinterpret_cast<const float*>(p + i + 32));
        any = _mm256_or_si256(any, _mm256_castps_si256(_mm256_or_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q),
                                                                     _mm256_cmp_ps(w, w, _CMP_UNORD_Q))));
      }
      break;
    case Unit::kF64:
      for (; i + 64 <= bytes; i += 64) {
        __m256d v = _mm256_loadu_pd(reinterpret_cast<const double*>(p + i));
        __m256d w = _mm256_loadu_pd(reinterpret_cast<const double*>(p + i + 32));
        any = _mm256_or_si256(any, _mm256_castpd_si256(_mm256_or_pd(_mm256_cmp_pd(v, v, _CMP_UNORD_Q),
                                                                     _mm256_cmp_pd(w, w, _CMP_UNORD_Q))));
      }
      break;
    case Unit::kF16:
    case Unit::kBF16: {
      const __m256i mask = _mm256_set1_epi16(0x7fff);
      const __m256i limit = _mm256_set1_epi16(unit == Unit::kF16 ? 0x7c00 : 0x7f80);
      for (; i + 32 <= bytes; i += 32) {
        __m256i v = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), mask);
        any = _mm256_or_si256(any, _mm256_cmpgt_epi16(v, limit));
      }
      break;
    }
    default:
      *done = 0;
      return false;
  }
  *done = i;
  return !_mm256_testz_si256(any, any);
}
#endif  // TDBG_HAVE_AVX2_PATH


#if defined(TDBG_HAVE_AVX2_PATH)
// ---- Fused hash + scan (AVX2) -------------------------------------------------------------
// XXH3-64's long loop, written from the specification with AVX2 (the same steps as
// xxh3_device.h, eight 64-bit accumulators in two registers), with the summary or NaN check
// of the very same loaded vectors folded in.

struct FusedSummary {
  __m256 mn, mx;
  __m256d s[4], a[4];
  __m256 nonfinite;  // any lane NaN or ±Inf (hash-only mode)
};

template <Unit U, bool kSummaries>
__attribute__((target("avx2,f16c"), always_inline)) inline void fused_scan_vectors(FusedSummary& f, __m256i d0,
                                                                                 __m256i d1) {
  const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll));
  if constexpr (U == Unit::kF64) {
    __m256d v[2] = {_mm256_castsi256_pd(d0), _mm256_castsi256_pd(d1)};
    for (int k = 0; k < 2; ++k) {
      if constexpr (kSummaries) {
        f.s[k] = _mm256_add_pd(f.s[k], v[k]);
        f.a[k] = _mm256_add_pd(f.a[k], _mm256_and_pd(v[k], absmask));
        // min/max kept in the float slots would lose precision: use s[2..3]/a[2..3] as bounds.
        f.s[2 + k] = _mm256_min_pd(v[k], f.s[2 + k]);
        f.a[2 + k] = _mm256_max_pd(v[k], f.a[2 + k]);
      } else {
        // x - x is NaN exactly for NaN and ±Inf.
        f.nonfinite = _mm256_or_ps(f.nonfinite, _mm256_castpd_ps(_mm256_sub_pd(v[k], v[k])));
      }
    }
  } else {
    __m256 v[4];
    int count;
    if constexpr (U == Unit::kF32) {
      v[0] = _mm256_castsi256_ps(d0);
      v[1] = _mm256_castsi256_ps(d1);
      count = 2;
    } else if constexpr (U == Unit::kF16) {
      v[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(d0));
      v[1] = _mm256_cvtph_ps(_mm256_extracti128_si256(d0, 1));
      v[2] = _mm256_cvtph_ps(_mm256_castsi256_si128(d1));
      v[3] = _mm256_cvtph_ps(_mm256_extracti128_si256(d1, 1));
      count = 4;
    } else {  // bfloat16
      v[0] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(d0)), 16));
      v[1] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(d0, 1)), 16));
      v[2] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(d1)), 16));
      v[3] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(d1, 1)), 16));
      count = 4;
    }
    for (int k = 0; k < count; ++k) {
      if constexpr (kSummaries) {
        f.mn = _mm256_min_ps(v[k], f.mn);
        f.mx = _mm256_max_ps(v[k], f.mx);
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v[k]));
        __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v[k], 1));
        int slot = 2 * (k & 1);
        f.s[slot] = _mm256_add_pd(f.s[slot], lo);
        f.s[slot + 1] = _mm256_add_pd(f.s[slot + 1], hi);
        f.a[slot] = _mm256_add_pd(f.a[slot], _mm256_and_pd(lo, absmask));
        f.a[slot + 1] = _mm256_add_pd(f.a[slot + 1], _mm256_and_pd(hi, absmask));
      } else {
        f.nonfinite = _mm256_or_ps(f.nonfinite, _mm256_sub_ps(v[k], v[k]));
      }
    }
  }
}

// One 64-byte stripe into the accumulators (and, if `scan`, into the summary).
template <Unit U, bool kSummaries>
__attribute__((target("avx2,f16c"), always_inline)) inline void fused_stripe(__m256i* acc, FusedSummary& f,
                                                                           const uint8_t* q, const uint8_t* key,
                                                                           bool scan) {
  __m256i d[2] = {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)),
                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32))};
  for (int k = 0; k < 2; ++k) {
    __m256i dk = _mm256_xor_si256(d[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(key + 32 * k)));
    __m256i prod = _mm256_mul_epu32(dk, _mm256_srli_epi64(dk, 32));
    __m256i swapped = _mm256_shuffle_epi32(d[k], _MM_SHUFFLE(1, 0, 3, 2));  // acc[j] += data[j ^ 1]
    acc[k] = _mm256_add_epi64(acc[k], _mm256_add_epi64(swapped, prod));
  }
  if (scan) fused_scan_vectors<U, kSummaries>(f, d[0], d[1]);
}

// XXH3's scramble of the accumulators after every 1 KiB block.
__attribute__((target("avx2"), always_inline)) inline void fused_scramble(__m256i* acc, const uint8_t* key,
                                                                        __m256i prime32) {
  for (int k = 0; k < 2; ++k) {
    __m256i a = _mm256_xor_si256(acc[k], _mm256_srli_epi64(acc[k], 47));
    a = _mm256_xor_si256(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(key + 32 * k)));
    __m256i lo = _mm256_mul_epu32(a, prime32);
    __m256i hi = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), prime32);
    acc[k] = _mm256_add_epi64(lo, _mm256_slli_epi64(hi, 32));
  }
}

template <Unit U, bool kSummaries>
__attribute__((target("avx2,f16c"))) bool fused_avx2(const uint8_t* p, size_t len, uint64_t seed, uint64_t* hash,
                                                     ChunkSummary* out) {
  uint8_t secret[xxh3::kSecretSize];
  xxh3::fill_secret(seed, secret);
  __m256i acc[2] = {
      _mm256_setr_epi64x(int64_t(xxh3::kPrime32_3), int64_t(xxh3::kPrime64_1), int64_t(xxh3::kPrime64_2),
                         int64_t(xxh3::kPrime64_3)),
      _mm256_setr_epi64x(int64_t(xxh3::kPrime64_4), int64_t(xxh3::kPrime32_2), int64_t(xxh3::kPrime64_5),
                         int64_t(xxh3::kPrime32_1))};
  FusedSummary f;
  f.mn = _mm256_set1_ps(kInfF);
  f.mx = _mm256_set1_ps(-kInfF);
  for (int k = 0; k < 4; ++k) f.s[k] = f.a[k] = _mm256_setzero_pd();
  if constexpr (U == Unit::kF64) {
    f.s[2] = f.s[3] = _mm256_set1_pd(kInfD);  // bounds, see fused_scan_vectors
    f.a[2] = f.a[3] = _mm256_set1_pd(-kInfD);
  }
  f.nonfinite = _mm256_setzero_ps();

  const __m256i prime32 = _mm256_set1_epi32(int32_t(xxh3::kPrime32_1));
  const uint8_t* scramble_key = secret + xxh3::kSecretSize - xxh3::kStripeLen;
  const size_t blocks = (len - 1) / xxh3::kBlockLen;
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* q = p + b * xxh3::kBlockLen;
    for (size_t s = 0; s < xxh3::kStripesPerBlock; ++s)
      fused_stripe<U, kSummaries>(acc, f, q + s * xxh3::kStripeLen, secret + 8 * s, true);
    fused_scramble(acc, scramble_key, prime32);
  }
  const size_t base = blocks * xxh3::kBlockLen;
  const size_t stripes = ((len - 1) - base) / xxh3::kStripeLen;
  for (size_t s = 0; s < stripes; ++s)
    fused_stripe<U, kSummaries>(acc, f, p + base + s * xxh3::kStripeLen, secret + 8 * s, true);
  // The last stripe overlaps bytes already scanned: hashed, not scanned; the bytes after the
  // scanned stripes are scanned one by one below.
  fused_stripe<U, kSummaries>(acc, f, p + len - xxh3::kStripeLen,
                              secret + xxh3::kSecretSize - xxh3::kStripeLen - 7, false);
  const size_t scanned = base + stripes * xxh3::kStripeLen;

  ChunkSummary s;
  double tmn = kInfD, tmx = -kInfD, tsum = 0, tabs = 0;
  const size_t width = canonical::unit_size(U);
  for (size_t o = scanned; o + width <= len; o += width) {
    double v;
    if constexpr (U == Unit::kF64) {
      std::memcpy(&v, p + o, 8);
    } else {
      v = scalar_as_float(U, p + o);
    }
    if (!fast_tail(v, tmn, tmx, tsum, tabs)) return false;
  }
  if constexpr (kSummaries) {
    alignas(32) double sv[16], av[16], mnv[8], mxv[8];
    for (int k = 0; k < 4; ++k) {
      _mm256_store_pd(sv + 4 * k, f.s[k]);
      _mm256_store_pd(av + 4 * k, f.a[k]);
    }
    double s4[8], a4[8];
    int lanes;
    if constexpr (U == Unit::kF64) {
      for (int k = 0; k < 8; ++k) {
        s4[k] = sv[k];    // s[0], s[1]
        a4[k] = av[k];
        mnv[k] = sv[8 + k];  // s[2], s[3] hold minima
        mxv[k] = av[8 + k];  // a[2], a[3] hold maxima
      }
      lanes = 8;
    } else {
      alignas(32) float mnf[8], mxf[8];
      _mm256_store_ps(mnf, f.mn);
      _mm256_store_ps(mxf, f.mx);
      for (int k = 0; k < 8; ++k) {
        s4[k] = sv[k] + sv[k + 8];
        a4[k] = av[k] + av[k + 8];
        mnv[k] = mnf[k];
        mxv[k] = mxf[k];
      }
      lanes = 8;
    }
    if (!fast_finish(mnv, mxv, s4, a4, lanes, tmn, tmx, tsum, tabs, len / width, &s)) return false;
  } else {
    if (_mm256_movemask_ps(_mm256_cmp_ps(f.nonfinite, f.nonfinite, _CMP_UNORD_Q)) != 0) return false;
  }
  alignas(32) xxh3::Acc a;
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.v), acc[0]);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.v + 4), acc[1]);
  *hash = xxh3::merge_accs(a, secret + 11, uint64_t(len) * xxh3::kPrime64_1);
  if (out) *out = s;
  return true;
}

// GCC 12's AVX-512 headers start some intrinsics from `_mm512_undefined_*`, which
// -Wmaybe-uninitialized reports as a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The same fused loop with AVX-512F: the eight accumulators fill one register and every
// stripe is one load. Its sums add in a different lane order from the AVX2 loop's (same
// values to the last bits or so; the spec allows that between CPUs).
template <Unit U, bool kSummaries>
__attribute__((target("avx512f,f16c"))) bool fused_avx512(const uint8_t* p, size_t len, uint64_t seed,
                                                          uint64_t* hash, ChunkSummary* out) {
  uint8_t secret[xxh3::kSecretSize];
  xxh3::fill_secret(seed, secret);
  __m512i acc = _mm512_setr_epi64(int64_t(xxh3::kPrime32_3), int64_t(xxh3::kPrime64_1), int64_t(xxh3::kPrime64_2),
                                  int64_t(xxh3::kPrime64_3), int64_t(xxh3::kPrime64_4), int64_t(xxh3::kPrime32_2),
                                  int64_t(xxh3::kPrime64_5), int64_t(xxh3::kPrime32_1));
  const __m512i prime32 = _mm512_set1_epi32(int32_t(xxh3::kPrime32_1));
  const __m512i scramble_key = _mm512_loadu_si512(secret + xxh3::kSecretSize - xxh3::kStripeLen);
  __m512 mn = _mm512_set1_ps(kInfF), mx = _mm512_set1_ps(-kInfF), nonfinite = _mm512_setzero_ps();
  __m512d dmn = _mm512_set1_pd(kInfD), dmx = _mm512_set1_pd(-kInfD);
  __m512d sum[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()}, abs[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()};

  // Macros rather than lambdas: GCC does not pass a function's target to lambdas inside it.
  // (`_mm512_or_ps` needs AVX512DQ; the integer `or` is plain AVX512F.)
#define TDBG_OR512(A, B) _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(A), _mm512_castps_si512(B)))
#define TDBG_FUSED512_STRIPE(Q, KEY, SCAN)                                                          \
  do {                                                                                             \
    __m512i d = _mm512_loadu_si512(Q);                                                             \
    __m512i dk = _mm512_xor_si512(d, _mm512_loadu_si512(KEY));                                     \
    __m512i prod = _mm512_mul_epu32(dk, _mm512_srli_epi64(dk, 32));                                \
    acc = _mm512_add_epi64(acc, _mm512_add_epi64(_mm512_shuffle_epi32(d, _MM_PERM_BADC), prod));    \
    if (SCAN) {                                                                                    \
      if constexpr (U == Unit::kF64) {                                                             \
        __m512d v = _mm512_castsi512_pd(d);                                                        \
        if constexpr (kSummaries) {                                                                \
          dmn = _mm512_min_pd(v, dmn);                                                             \
          dmx = _mm512_max_pd(v, dmx);                                                             \
          sum[0] = _mm512_add_pd(sum[0], v);                                                       \
          abs[0] = _mm512_add_pd(abs[0], _mm512_abs_pd(v));                                        \
        } else {                                                                                   \
          nonfinite = TDBG_OR512(nonfinite, _mm512_castpd_ps(_mm512_sub_pd(v, v)));              \
        }                                                                                          \
      } else if constexpr (U == Unit::kF32) {                                                      \
        TDBG_FUSED512_FLOATS(_mm512_castsi512_ps(d));                                              \
      } else if constexpr (U == Unit::kF16) {                                                      \
        TDBG_FUSED512_FLOATS(_mm512_cvtph_ps(_mm512_castsi512_si256(d)));                          \
        TDBG_FUSED512_FLOATS(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(d, 1)));                    \
      } else {                                                                                     \
        TDBG_FUSED512_FLOATS(_mm512_castsi512_ps(                                                  \
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(d)), 16)));             \
        TDBG_FUSED512_FLOATS(_mm512_castsi512_ps(                                                  \
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(d, 1)), 16)));       \
      }                                                                                            \
    }                                                                                              \
  } while (0)
#define TDBG_FUSED512_FLOATS(V)                                                                     \
  do {                                                                                             \
    __m512 v_ = (V);                                                                               \
    if constexpr (kSummaries) {                                                                    \
      mn = _mm512_min_ps(v_, mn);                                                                  \
      mx = _mm512_max_ps(v_, mx);                                                                  \
      __m512d lo_ = _mm512_cvtps_pd(_mm512_castps512_ps256(v_));                                   \
      __m512d hi_ = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v_), 1))); \
      sum[0] = _mm512_add_pd(sum[0], lo_);                                                         \
      sum[1] = _mm512_add_pd(sum[1], hi_);                                                         \
      abs[0] = _mm512_add_pd(abs[0], _mm512_abs_pd(lo_));                                          \
      abs[1] = _mm512_add_pd(abs[1], _mm512_abs_pd(hi_));                                          \
    } else {                                                                                       \
      nonfinite = TDBG_OR512(nonfinite, _mm512_sub_ps(v_, v_));                                  \
    }                                                                                              \
  } while (0)

  const size_t blocks = (len - 1) / xxh3::kBlockLen;
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* q = p + b * xxh3::kBlockLen;
    for (size_t s = 0; s < xxh3::kStripesPerBlock; ++s)
      TDBG_FUSED512_STRIPE(q + s * xxh3::kStripeLen, secret + 8 * s, true);
    __m512i a = _mm512_xor_si512(acc, _mm512_srli_epi64(acc, 47));
    a = _mm512_xor_si512(a, scramble_key);
    acc = _mm512_add_epi64(_mm512_mul_epu32(a, prime32),
                           _mm512_slli_epi64(_mm512_mul_epu32(_mm512_srli_epi64(a, 32), prime32), 32));
  }
  const size_t base = blocks * xxh3::kBlockLen;
  const size_t stripes = ((len - 1) - base) / xxh3::kStripeLen;
  for (size_t s = 0; s < stripes; ++s) TDBG_FUSED512_STRIPE(p + base + s * xxh3::kStripeLen, secret + 8 * s, true);
  TDBG_FUSED512_STRIPE(p + len - xxh3::kStripeLen, secret + xxh3::kSecretSize - xxh3::kStripeLen - 7, false);
#undef TDBG_FUSED512_STRIPE
#undef TDBG_FUSED512_FLOATS
#undef TDBG_OR512
  const size_t scanned = base + stripes * xxh3::kStripeLen;

  ChunkSummary s;
  double tmn = kInfD, tmx = -kInfD, tsum = 0, tabs = 0;
  const size_t width = canonical::unit_size(U);
  for (size_t o = scanned; o + width <= len; o += width) {
    double v;
    if constexpr (U == Unit::kF64) {
      std::memcpy(&v, p + o, 8);
    } else {
      v = scalar_as_float(U, p + o);
    }
    if (!fast_tail(v, tmn, tmx, tsum, tabs)) return false;
  }
  if constexpr (kSummaries) {
    alignas(64) double s0[8], s1[8], a0[8], a1[8], mnv[16], mxv[16];
    _mm512_store_pd(s0, sum[0]);
    _mm512_store_pd(s1, sum[1]);
    _mm512_store_pd(a0, abs[0]);
    _mm512_store_pd(a1, abs[1]);
    double s8[8], a8[8];
    for (int k = 0; k < 8; ++k) {
      s8[k] = s0[k] + s1[k];
      a8[k] = a0[k] + a1[k];
    }
    int lanes;
    if constexpr (U == Unit::kF64) {
      _mm512_store_pd(mnv, dmn);
      _mm512_store_pd(mxv, dmx);
      lanes = 8;
    } else {
      alignas(64) float mnf[16], mxf[16];
      _mm512_store_ps(mnf, mn);
      _mm512_store_ps(mxf, mx);
      for (int k = 0; k < 16; ++k) {
        mnv[k] = mnf[k];
        mxv[k] = mxf[k];
      }
      lanes = 16;
    }
    // fast_finish reads `lanes` entries of every array: pad the sums for the 16-lane case.
    double sp[16] = {}, ap[16] = {};
    for (int k = 0; k < 8; ++k) {
      sp[k] = s8[k];
      ap[k] = a8[k];
    }
    if (!fast_finish(mnv, mxv, sp, ap, lanes, tmn, tmx, tsum, tabs, len / width, &s)) return false;
  } else {
    if (_mm512_cmp_ps_mask(nonfinite, nonfinite, _CMP_UNORD_Q) != 0) return false;
  }
  alignas(64) xxh3::Acc a;
  _mm512_storeu_si512(a.v, acc);
  *hash = xxh3::merge_accs(a, secret + 11, uint64_t(len) * xxh3::kPrime64_1);
  if (out) *out = s;
  return true;
}
#pragma GCC diagnostic pop
#endif  // TDBG_HAVE_AVX2_PATH

bool g_force_baseline = false;

bool g_force_avx2 = false;

bool cpu_has_avx512() {
#if defined(TDBG_HAVE_AVX2_PATH)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("f16c");
  }();
  return has && !g_force_baseline && !g_force_avx2;
#else
  return false;
#endif
}

bool cpu_has_avx2() {
#if defined(TDBG_HAVE_AVX2_PATH)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  }();
  return has && !g_force_baseline;
#else
  return false;
#endif
}

#endif  // __SSE2__

// Portable summaries: eight lanes by element position, like the SSE2 version's layout (its
// sums may still round differently from the SSE2 build; they are never compared across
// builds bit for bit).
template <typename Load>
ChunkSummary summarize_scalar(size_t n, Load load) {
  double mn[8], mx[8], sum[8] = {}, abs[8] = {};
  int64_t nan = 0, inf = 0;
  for (int k = 0; k < 8; ++k) {
    mn[k] = kInfD;
    mx[k] = -kInfD;
  }
  for (size_t i = 0; i < n; ++i) {
    double v = load(i);
    int k = int(i & 7);
    if (std::isnan(v)) {
      ++nan;
    } else if (std::isinf(v)) {
      ++inf;
    } else {
      mn[k] = v < mn[k] ? v : mn[k];
      mx[k] = v > mx[k] ? v : mx[k];
      sum[k] += v;
      abs[k] += std::fabs(v);
    }
  }
  ChunkSummary s;
  double lo = kInfD, hi = -kInfD;
  for (int k = 0; k < 8; ++k) {
    lo = mn[k] < lo ? mn[k] : lo;
    hi = mx[k] > hi ? mx[k] : hi;
    s.sum += sum[k];
    s.abs_sum += abs[k];
  }
  s.nan_count = nan;
  s.inf_count = inf;
  s.finite_count = int64_t(n) - nan - inf;
  finish_bounds(s, lo, hi);
  return s;
}

}  // namespace

ChunkSummary summarize_chunk(Unit unit, const uint8_t* p, size_t bytes) {
#if defined(__SSE2__)
  ChunkSummary fast;
  if (unit == Unit::kF64) {
#if defined(TDBG_HAVE_AVX2_PATH)
    if (cpu_has_avx2() ? fast_f64_avx2(p, bytes, &fast) : fast_f64_sse2(p, bytes, &fast)) return fast;
#else
    if (fast_f64_sse2(p, bytes, &fast)) return fast;
#endif
    return summarize_f64(p, bytes);
  }
  if (unit == Unit::kF32 || unit == Unit::kF16 || unit == Unit::kBF16) {
#if defined(TDBG_HAVE_AVX2_PATH)
    if (cpu_has_avx2() ? fast_f32_like_avx2(unit, p, bytes, &fast) : fast_f32_like_sse2(unit, p, bytes, &fast))
      return fast;
#else
    if (fast_f32_like_sse2(unit, p, bytes, &fast)) return fast;
#endif
  }
  if (unit == Unit::kF32 || unit == Unit::kF16 || unit == Unit::kBF16 || unit == Unit::kF8E4M3FN ||
      unit == Unit::kF8E5M2)
    return summarize_f32_like(unit, p, bytes);
  return ChunkSummary{};
#else
  switch (unit) {
    case Unit::kF64:
      return summarize_scalar(bytes / 8, [p](size_t i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        return d;
      });
    case Unit::kF32:
      return summarize_scalar(bytes / 4, [p](size_t i) {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        return double(f);
      });
    case Unit::kF16:
      return summarize_scalar(bytes / 2, [p](size_t i) {
        return double(canonical::f16_to_float(uint16_t(p[2 * i] | p[2 * i + 1] << 8)));
      });
    case Unit::kBF16:
      return summarize_scalar(bytes / 2, [p](size_t i) {
        return double(canonical::bf16_to_float(uint16_t(p[2 * i] | p[2 * i + 1] << 8)));
      });
    case Unit::kF8E4M3FN:
      return summarize_scalar(bytes, [p](size_t i) { return double(f8_tables().e4m3[p[i]]); });
    case Unit::kF8E5M2:
      return summarize_scalar(bytes, [p](size_t i) { return double(f8_tables().e5m2[p[i]]); });
    default:
      return ChunkSummary{};
  }
#endif
}

bool chunk_needs_canonical(Unit unit, const uint8_t* p, size_t bytes) {
  size_t i = 0;
#if defined(TDBG_HAVE_AVX2_PATH)
  if (cpu_has_avx2()) {
    if (needs_canonical_avx2(unit, p, bytes, &i)) return true;
  }
#endif
#if defined(__SSE2__)
  // Vector part: OR together per-lane "needs rewriting" masks, test once at the end.
  __m128i any = _mm_setzero_si128();
  switch (unit) {
    case Unit::kF32:
      for (; i + 16 <= bytes; i += 16) {
        __m128 v = _mm_loadu_ps(reinterpret_cast<const float*>(p + i));
        any = _mm_or_si128(any, _mm_castps_si128(_mm_cmpunord_ps(v, v)));
      }
      break;
    case Unit::kF64:
      for (; i + 16 <= bytes; i += 16) {
        __m128d v = _mm_loadu_pd(reinterpret_cast<const double*>(p + i));
        any = _mm_or_si128(any, _mm_castpd_si128(_mm_cmpunord_pd(v, v)));
      }
      break;
    case Unit::kF16:
    case Unit::kBF16: {
      const __m128i mask = _mm_set1_epi16(0x7fff);
      const __m128i limit = _mm_set1_epi16(unit == Unit::kF16 ? 0x7c00 : 0x7f80);
      for (; i + 16 <= bytes; i += 16) {
        __m128i v = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)), mask);
        any = _mm_or_si128(any, _mm_cmpgt_epi16(v, limit));
      }
      break;
    }
    case Unit::kF8E4M3FN:
    case Unit::kF8E5M2:
    case Unit::kBool: {
      const __m128i mask = _mm_set1_epi8(unit == Unit::kBool ? char(0xfe) : char(0x7f));
      const __m128i target = _mm_set1_epi8(unit == Unit::kF8E5M2 ? 0x7c : 0x7f);
      for (; i + 16 <= bytes; i += 16) {
        __m128i v = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)), mask);
        __m128i hit = unit == Unit::kBool     ? _mm_xor_si128(_mm_cmpeq_epi8(v, _mm_setzero_si128()), _mm_set1_epi8(-1))
                      : unit == Unit::kF8E5M2 ? _mm_cmpgt_epi8(v, target)
                                              : _mm_cmpeq_epi8(v, target);
        any = _mm_or_si128(any, hit);
      }
      break;
    }
    default:
      return false;
  }
  if (_mm_movemask_epi8(any) != 0) return true;
#endif
  if (unit == Unit::kRaw) return false;
  size_t w = canonical::unit_size(unit);
  uint8_t scratch[8];
  for (; i + w <= bytes; i += w)
    if (canonical::canonicalize_unit(unit, p + i, scratch)) return true;
  return false;
}

void force_baseline_simd_for_testing(bool on) { g_force_baseline = on; }
void force_avx2_for_testing(bool on) { g_force_avx2 = on; }

bool fused_hash_and_scan(Unit unit, const uint8_t* p, size_t bytes, uint64_t seed, uint64_t* hash,
                         ChunkSummary* summary) {
#if defined(TDBG_HAVE_AVX2_PATH)
  if (bytes <= 240 || !cpu_has_avx2()) return false;
  // AVX-512 only with summaries: there it doubles the in-cache rate (18 -> 40 GB/s, compute
  // bound) and wins from memory too; hash-only, the AVX2 loop already outruns memory, and
  // the AVX-512 one measured at half the AVX2 rate on DRAM-resident data (Zen 5 VM).
  if (summary && cpu_has_avx512()) {
    switch (unit) {
      case Unit::kF32:
        return fused_avx512<Unit::kF32, true>(p, bytes, seed, hash, summary);
      case Unit::kF64:
        return fused_avx512<Unit::kF64, true>(p, bytes, seed, hash, summary);
      case Unit::kF16:
        return fused_avx512<Unit::kF16, true>(p, bytes, seed, hash, summary);
      case Unit::kBF16:
        return fused_avx512<Unit::kBF16, true>(p, bytes, seed, hash, summary);
      default:
        return false;
    }
  }
  switch (unit) {
    case Unit::kF32:
      return summary ? fused_avx2<Unit::kF32, true>(p, bytes, seed, hash, summary)
                     : fused_avx2<Unit::kF32, false>(p, bytes, seed, hash, nullptr);
    case Unit::kF64:
      return summary ? fused_avx2<Unit::kF64, true>(p, bytes, seed, hash, summary)
                     : fused_avx2<Unit::kF64, false>(p, bytes, seed, hash, nullptr);
    case Unit::kF16:
      return summary ? fused_avx2<Unit::kF16, true>(p, bytes, seed, hash, summary)
                     : fused_avx2<Unit::kF16, false>(p, bytes, seed, hash, nullptr);
    case Unit::kBF16:
      return summary ? fused_avx2<Unit::kBF16, true>(p, bytes, seed, hash, summary)
                     : fused_avx2<Unit::kBF16, false>(p, bytes, seed, hash, nullptr);
    default:
      return false;
  }
#else
  (void)unit, (void)p, (void)bytes, (void)seed, (void)hash, (void)summary;
  return false;
#endif
}

void canonicalize_chunk(Unit unit, const uint8_t* p, size_t bytes, uint8_t* out) {
  size_t w = canonical::unit_size(unit);
  for (size_t i = 0; i + w <= bytes; i += w) canonical::canonicalize_unit(unit, p + i, out + i);
}

}  // namespace tdbg::hashing::internal
