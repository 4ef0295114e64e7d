// The element rules of tdbg-hash v1 that the CPU and the GPU must apply identically: which
// bit patterns are NaN, what each NaN becomes (one canonical quiet NaN per type), how bool is
// normalized, and how narrow floats widen to float for the summaries. Host and device code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hashing/tensor_hash.h"  // DType
#include "hashing/xxh3_device.h"  // TDBG_HD

namespace tdbg::hashing::canonical {

// The scalar a dtype is made of: complex types are pairs of their component type, and the
// spec canonicalizes (and summarizes) component by component.
enum class Unit : uint8_t {
  kRaw = 0,  // integers: bytes hashed as they are
  kBool,     // one byte, any nonzero value means true and is hashed as 0x01
  kF16,
  kBF16,
  kF32,
  kF64,
  kF8E4M3FN,
  kF8E5M2,
};

// The unit a dtype canonicalizes and summarizes by (shared by the CPU and GPU paths).
TDBG_HD Unit unit_of(DType d) {
  switch (d) {
    case DType::kBool: return Unit::kBool;
    case DType::kFloat16:
    case DType::kComplex32: return Unit::kF16;
    case DType::kBFloat16: return Unit::kBF16;
    case DType::kFloat32:
    case DType::kComplex64: return Unit::kF32;
    case DType::kFloat64:
    case DType::kComplex128: return Unit::kF64;
    case DType::kFloat8E4M3FN: return Unit::kF8E4M3FN;
    case DType::kFloat8E5M2: return Unit::kF8E5M2;
    default: return Unit::kRaw;
  }
}

// Bytes of one `Unit` (1 for kRaw, whose width does not matter).
TDBG_HD size_t unit_size(Unit u) {
  switch (u) {
    case Unit::kF16:
    case Unit::kBF16: return 2;
    case Unit::kF32: return 4;
    case Unit::kF64: return 8;
    default: return 1;
  }
}

// Canonical quiet NaNs, positive sign, payload only the quiet bit.
constexpr uint16_t kNanF16 = 0x7e00;
constexpr uint16_t kNanBF16 = 0x7fc0;
constexpr uint32_t kNanF32 = 0x7fc00000u;
constexpr uint64_t kNanF64 = 0x7ff8000000000000ull;
constexpr uint8_t kNanF8E4M3FN = 0x7f;
constexpr uint8_t kNanF8E5M2 = 0x7e;

TDBG_HD bool is_nan_f16(uint16_t b) { return (b & 0x7fffu) > 0x7c00u; }
TDBG_HD bool is_nan_bf16(uint16_t b) { return (b & 0x7fffu) > 0x7f80u; }
TDBG_HD bool is_nan_f32(uint32_t b) { return (b & 0x7fffffffu) > 0x7f800000u; }
TDBG_HD bool is_nan_f64(uint64_t b) { return (b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull; }
// float8_e4m3fn has no infinities; S.1111.111 is its only NaN.
TDBG_HD bool is_nan_f8e4m3fn(uint8_t b) { return (b & 0x7fu) == 0x7fu; }
TDBG_HD bool is_nan_f8e5m2(uint8_t b) { return (b & 0x7fu) > 0x7cu; }

// The canonical form of the `unit_size(u)` bytes at `p`, written to `out` (may alias `p`).
// Returns true when the bytes changed.
TDBG_HD bool canonicalize_unit(Unit u, const uint8_t* p, uint8_t* out) {
  switch (u) {
    case Unit::kBool: {
      uint8_t v = p[0] != 0;
      bool changed = v != p[0];
      out[0] = v;
      return changed;
    }
    case Unit::kF16:
    case Unit::kBF16: {
      uint16_t b = uint16_t(p[0] | (p[1] << 8));
      bool nan = u == Unit::kF16 ? is_nan_f16(b) : is_nan_bf16(b);
      uint16_t c = nan ? (u == Unit::kF16 ? kNanF16 : kNanBF16) : b;
      out[0] = uint8_t(c);
      out[1] = uint8_t(c >> 8);
      return c != b;
    }
    case Unit::kF32: {
      uint32_t b = xxh3::load_le32(p);
      uint32_t c = is_nan_f32(b) ? kNanF32 : b;
      for (int i = 0; i < 4; ++i) out[i] = uint8_t(c >> (8 * i));
      return c != b;
    }
    case Unit::kF64: {
      uint64_t b = xxh3::load_le64(p);
      uint64_t c = is_nan_f64(b) ? kNanF64 : b;
      xxh3::store_le64(out, c);
      return c != b;
    }
    case Unit::kF8E4M3FN: {
      uint8_t c = is_nan_f8e4m3fn(p[0]) ? kNanF8E4M3FN : p[0];
      bool changed = c != p[0];
      out[0] = c;
      return changed;
    }
    case Unit::kF8E5M2: {
      uint8_t c = is_nan_f8e5m2(p[0]) ? kNanF8E5M2 : p[0];
      bool changed = c != p[0];
      out[0] = c;
      return changed;
    }
    default:
      out[0] = p[0];
      return false;
  }
}

// Canonicalizes the 8 bytes of `word` (little-endian), which must start on a unit boundary:
// every read of the XXH3 long path is such a word when the stream length is a multiple of
// the unit size, which is how the GPU canonicalizes while it reads.
TDBG_HD uint64_t canonicalize_word(Unit u, uint64_t word) {
  if (u == Unit::kRaw) return word;
  uint8_t b[8];
  xxh3::store_le64(b, word);
  size_t w = unit_size(u);
  for (size_t i = 0; i < 8; i += w) canonicalize_unit(u, b + i, b + i);
  return xxh3::load_le64(b);
}

// Widening conversions for the summaries (exact: every value of these types is a float).
TDBG_HD float bits_to_float(uint32_t b) {
  float f;
  memcpy(&f, &b, 4);
  return f;
}
TDBG_HD float f16_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));
  if (exp != 0) return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
  // Subnormal: man * 2^-24, exactly representable in float.
  float f = float(man) * (1.0f / 16777216.0f);
  return sign ? -f : f;
}
TDBG_HD float bf16_to_float(uint16_t b) { return bits_to_float(uint32_t(b) << 16); }
TDBG_HD float f8e4m3fn_to_float(uint8_t b) {
  float sign = (b & 0x80) ? -1.0f : 1.0f;
  uint32_t exp = (b >> 3) & 0xfu, man = b & 0x7u;
  if (exp == 0xf && man == 0x7) return bits_to_float(0x7fc00000u);
  if (exp == 0) return sign * float(man) * (1.0f / 512.0f);  // man * 2^-9
  return sign * bits_to_float(((exp + 120) << 23) | (man << 20));
}
TDBG_HD float f8e5m2_to_float(uint8_t b) { return f16_to_float(uint16_t(b) << 8); }

}  // namespace tdbg::hashing::canonical

namespace tdbg::hashing::canonical {

// An XXH3 `Input` that reads `p` as if every unit had been canonicalized first: the GPU hashes
// NaN-bearing chunks through it without a copy, and the CPU tests check it against the copy.
// 8-byte reads on a unit boundary (all reads of the long path) cost one word rewrite; other
// reads (short inputs only) go byte by byte.
struct CanonicalInput {
  const uint8_t* p;
  Unit unit;
  TDBG_HD uint8_t byte(size_t i) const {
    size_t w = unit_size(unit);
    size_t start = i - i % w;
    uint8_t u[8];
    canonicalize_unit(unit, p + start, u);
    return u[i - start];
  }
  TDBG_HD uint32_t le32(size_t i) const {
    return uint32_t(byte(i)) | uint32_t(byte(i + 1)) << 8 | uint32_t(byte(i + 2)) << 16 |
           uint32_t(byte(i + 3)) << 24;
  }
  TDBG_HD uint64_t le64(size_t i) const {
    if (i % unit_size(unit) == 0) return canonicalize_word(unit, xxh3::load_le64(p + i));
    uint64_t v = 0;
    for (int k = 7; k >= 0; --k) v = (v << 8) | byte(i + size_t(k));
    return v;
  }
};

}  // namespace tdbg::hashing::canonical
