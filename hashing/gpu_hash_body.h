// The per-warp work of the GPU hash (hashing/cuda_hash.cu), written over the 32-lane
// abstraction of xxh3_warp.h so that the CPU tests run the same code on 32 threads in
// lockstep: a chunk's summary and hash, then the final hash and the summary reduction.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hashing/canonical.h"
#include "hashing/tensor_hash.h"
#include "hashing/xxh3_device.h"
#include "hashing/xxh3_warp.h"

namespace tdbg::hashing::gpu_body {

using canonical::Unit;
using canonical::unit_of;

// 8 bytes at any address. Device: tensor data is only element-aligned and 8-byte loads must
// be aligned, so read the aligned words that hold the bytes (every byte of them lies in the
// tensor's allocation page). Plain loads, not `__ldg`: the final kernel reads what it wrote.
TDBG_HD uint64_t load64_any(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint64_t* w = reinterpret_cast<const uint64_t*>(a & ~uintptr_t(7));
  int sh = int(a & 7) * 8;
  uint64_t w0 = w[0];
  if (sh == 0) return w0;
  return (w0 >> sh) | (w[1] << (64 - sh));
#else
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
#endif
}

// Reads of the long path: 8 bytes on a unit boundary, canonicalized while read.
struct LongInput {
  const uint8_t* p;
  Unit unit;
  TDBG_HD uint64_t le64(size_t i) const {
    uint64_t w = load64_any(p + i);
    return unit == Unit::kRaw ? w : canonical::canonicalize_word(unit, w);
  }
};

// XXH3-64 of any length by 32 lanes; every lane returns the hash.
template <typename Lanes>
TDBG_HD uint64_t lanes_hash(const Lanes& lanes, const uint8_t* p, size_t len, uint64_t seed, Unit unit) {
  if (len > 240) return xxh3::lanes_hash_long(lanes, LongInput{p, unit}, len, seed);
  uint64_t h = 0;
  if (lanes.lane() == 0) h = xxh3::hash64_of(canonical::CanonicalInput{p, unit}, len, seed);
  return lanes.shfl(h, 0);
}

struct Partial {
  double min, max, sum, abs_sum;
  int64_t nan, inf, finite;
};

TDBG_HD Partial empty_partial() {
  return Partial{double(INFINITY), -double(INFINITY), 0, 0, 0, 0, 0};
}

TDBG_HD void add_value(Partial& s, double v) {
  if (v != v) {
    ++s.nan;
  } else if (v == double(INFINITY) || v == -double(INFINITY)) {
    ++s.inf;
  } else {
    ++s.finite;
    s.min = v < s.min ? v : s.min;
    s.max = v > s.max ? v : s.max;
    s.sum += v;
    s.abs_sum += v < 0 ? -v : v;
  }
}

TDBG_HD double bits_to_double(uint64_t b) {
  double d;
  memcpy(&d, &b, 8);
  return d;
}

// Adds the units of one 8-byte word (unit-aligned) to `s`.
TDBG_HD void add_word(Partial& s, Unit unit, uint64_t w) {
  switch (unit) {
    case Unit::kF32:
      add_value(s, canonical::bits_to_float(uint32_t(w)));
      add_value(s, canonical::bits_to_float(uint32_t(w >> 32)));
      break;
    case Unit::kF64: add_value(s, bits_to_double(w)); break;
    case Unit::kF16:
      for (int k = 0; k < 4; ++k) add_value(s, canonical::f16_to_float(uint16_t(w >> (16 * k))));
      break;
    case Unit::kBF16:
      for (int k = 0; k < 4; ++k) add_value(s, canonical::bf16_to_float(uint16_t(w >> (16 * k))));
      break;
    case Unit::kF8E4M3FN:
      for (int k = 0; k < 8; ++k) add_value(s, canonical::f8e4m3fn_to_float(uint8_t(w >> (8 * k))));
      break;
    case Unit::kF8E5M2:
      for (int k = 0; k < 8; ++k) add_value(s, canonical::f8e5m2_to_float(uint8_t(w >> (8 * k))));
      break;
    default: break;
  }
}

// Adds one unit at `q` (for the bytes after the last whole word).
TDBG_HD void add_unit(Partial& s, Unit unit, const uint8_t* q) {
  uint64_t w = 0;
  size_t width = canonical::unit_size(unit);
  for (size_t i = 0; i < width; ++i) w |= uint64_t(q[i]) << (8 * i);
  Partial one = empty_partial();
  switch (unit) {
    case Unit::kF32: add_value(one, canonical::bits_to_float(uint32_t(w))); break;
    case Unit::kF64: add_value(one, bits_to_double(w)); break;
    case Unit::kF16: add_value(one, canonical::f16_to_float(uint16_t(w))); break;
    case Unit::kBF16: add_value(one, canonical::bf16_to_float(uint16_t(w))); break;
    case Unit::kF8E4M3FN: add_value(one, canonical::f8e4m3fn_to_float(uint8_t(w))); break;
    case Unit::kF8E5M2: add_value(one, canonical::f8e5m2_to_float(uint8_t(w))); break;
    default: return;
  }
  s.nan += one.nan;
  s.inf += one.inf;
  s.finite += one.finite;
  if (one.finite) {
    s.min = one.min < s.min ? one.min : s.min;
    s.max = one.max > s.max ? one.max : s.max;
    s.sum += one.sum;
    s.abs_sum += one.abs_sum;
  }
}

template <typename Lanes>
TDBG_HD double shfl_xor_double(const Lanes& lanes, double v, int mask) {
  uint64_t b;
  memcpy(&b, &v, 8);
  return bits_to_double(lanes.shfl_xor(b, mask));
}

// Combines the partials of all lanes in a fixed butterfly (deterministic).
template <typename Lanes>
TDBG_HD Partial lanes_reduce(const Lanes& lanes, Partial s) {
  for (int d = 16; d > 0; d >>= 1) {
    double mn = shfl_xor_double(lanes, s.min, d), mx = shfl_xor_double(lanes, s.max, d);
    s.min = mn < s.min ? mn : s.min;
    s.max = mx > s.max ? mx : s.max;
    s.sum += shfl_xor_double(lanes, s.sum, d);
    s.abs_sum += shfl_xor_double(lanes, s.abs_sum, d);
    s.nan += int64_t(lanes.shfl_xor(uint64_t(s.nan), d));
    s.inf += int64_t(lanes.shfl_xor(uint64_t(s.inf), d));
    s.finite += int64_t(lanes.shfl_xor(uint64_t(s.finite), d));
  }
  return s;
}

// What both kernels need to know about one tensor.
struct Job {
  const uint8_t* data;
  uint64_t total_bytes;
  uint64_t chunks;
  Unit unit;
  bool summaries;
  uint8_t* stream_buf;  // the final hash's input: header, then chunk hashes (u64 LE)
  uint32_t header_bytes;
  Partial* partials;    // one per chunk when `summaries`
};

struct Header {
  uint32_t dtype, ndim;
  int64_t sizes[kMaxDims];
};

// Chunk `chunk` by 32 lanes: summary pass (lane-strided words, coalesced on the GPU), then
// the hash with seed `chunk`.
template <typename Lanes>
TDBG_HD void chunk_body(const Lanes& lanes, const Job& job, uint64_t chunk) {
  const int lane = lanes.lane();
  const uint64_t start = chunk * kChunkBytes;
  const uint64_t left = job.total_bytes - start;
  const size_t len = size_t(left < kChunkBytes ? left : kChunkBytes);
  const uint8_t* p = job.data + start;
  if (job.summaries) {
    Partial s = empty_partial();
    const size_t words = len / 8;
    for (size_t w = size_t(lane); w < words; w += 32) add_word(s, job.unit, load64_any(p + 8 * w));
    if (lane == 0) {
      size_t width = canonical::unit_size(job.unit);
      for (size_t o = words * 8; o + width <= len; o += width) add_unit(s, job.unit, p + o);
    }
    s = lanes_reduce(lanes, s);
    if (lane == 0) job.partials[chunk] = s;
  }
  uint64_t h = lanes_hash(lanes, p, len, chunk, job.unit);
  if (lane == 0) xxh3::store_le64(job.stream_buf + job.header_bytes + 8 * chunk, h);
}

// The header, the final hash over header + chunk hashes, and the summary reduction, by 32
// lanes; lane 0 writes `slot`. `sync()` must make lane 0's header writes visible to all lanes.
template <typename Lanes, typename Sync>
TDBG_HD void final_body(const Lanes& lanes, Sync sync, const Job& job, const Header& header, HashResult* slot) {
  const int lane = lanes.lane();
  if (lane == 0) {
    uint8_t* b = job.stream_buf;
    const char magic[8] = {'t', 'd', 'b', 'g', 'h', 'a', 's', 'h'};
    for (int i = 0; i < 8; ++i) b[i] = uint8_t(magic[i]);
    uint32_t fields[4] = {1u, header.dtype, header.ndim, uint32_t(kChunkBytes)};
    for (int f = 0; f < 4; ++f)
      for (int i = 0; i < 4; ++i) b[8 + 4 * f + i] = uint8_t(fields[f] >> (8 * i));
    for (uint32_t d = 0; d < header.ndim; ++d) xxh3::store_le64(b + 24 + 8 * d, uint64_t(header.sizes[d]));
  }
  sync();
  uint64_t h = lanes_hash(lanes, job.stream_buf, job.header_bytes + 8 * job.chunks, 0, Unit::kRaw);
  Partial s = empty_partial();
  if (job.summaries) {
    // Lane-strided over the chunks, then the fixed butterfly.
    Partial t = empty_partial();
    for (uint64_t c = uint64_t(lane); c < job.chunks; c += 32) {
      const Partial& q = job.partials[c];
      t.min = q.min < t.min ? q.min : t.min;
      t.max = q.max > t.max ? q.max : t.max;
      t.sum += q.sum;
      t.abs_sum += q.abs_sum;
      t.nan += q.nan;
      t.inf += q.inf;
      t.finite += q.finite;
    }
    s = lanes_reduce(lanes, t);
  }
  if (lane == 0) {
    slot->hash = h;
    slot->hashed = true;
    slot->error = nullptr;
    Summary& out = slot->summary;
    out.valid = job.summaries && job.total_bytes > 0;
    if (out.valid) {
      const double nan = double(NAN);
      bool any_finite = s.finite > 0;
      out.min = any_finite ? s.min : nan;
      out.max = any_finite ? s.max : nan;
      out.sum = s.sum;
      out.abs_sum = s.abs_sum;
      out.nan_count = s.nan;
      out.inf_count = s.inf;
    } else {
      out.min = out.max = out.sum = out.abs_sum = 0;
      out.nan_count = out.inf_count = 0;
    }
  }
}


}  // namespace tdbg::hashing::gpu_body
