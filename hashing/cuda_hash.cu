// GPU implementation of tdbg-hash v1 (docs/hash-spec.md): one warp per 64 KiB chunk computes
// the chunk's XXH3-64 cooperatively and its summary; a second, one-warp kernel hashes the
// header and the chunk hashes and reduces the summaries into the caller's mapped slot.
#include "hashing/cuda_hash.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <new>
#include <string>

#include "hashing/canonical.h"
#include "hashing/xxh3_device.h"

namespace tdbg::hashing::gpu {
namespace {

namespace x = ::tdbg::hashing::xxh3;
using canonical::Unit;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpsPerBlock = 4;

// Vendor calls go through one place that turns an error into a one-line `Status`.
#define TDBG_CUDA_RETURN_IF_ERROR(call)                                                      \
  do {                                                                                       \
    cudaError_t tdbg_err_ = (call);                                                          \
    if (tdbg_err_ != cudaSuccess)                                                            \
      return Status::Error(std::string(#call) + " failed: " + cudaGetErrorString(tdbg_err_)); \
  } while (0)

// The default secret as 24 little-endian words, for per-lane aligned reads.
__constant__ uint64_t kSecretWords[24] = {
    0xbe4ba423396cfeb8ull, 0x1cad21f72c81017cull, 0xdb979083e96dd4deull, 0x1f67b3b7a4a44072ull,
    0x78e5c0cc4ee679cbull, 0x2172ffcc7dd05a82ull, 0x8e2443f7744608b8ull, 0x4c263a81e69035e0ull,
    0xcb00c391bb52283cull, 0xa32e531b8b65d088ull, 0x4ef90da297486471ull, 0xd8acdea946ef1938ull,
    0x3f349ce33f76faa8ull, 0x1d4f0bc7c7bbdcf9ull, 0x3159b4cd4be0518aull, 0x647378d9c97e9fc8ull,
    0xc3ebd33483acc5eaull, 0xeb6313faffa081c5ull, 0x49daf0b751dd0d17ull, 0x9e68d429265516d3ull,
    0xfca1477d58be162bull, 0xce31d07ad1b8f88full, 0x280416958f3acb45ull, 0x7e404bbbcafbd7afull,
};

// Word `k` of the seeded secret: the spec adds the seed to the first and subtracts it from the
// second word of every 16-byte lane.
__device__ __forceinline__ uint64_t secret_word(int k, uint64_t seed) {
  return (k & 1) ? kSecretWords[k] - seed : kSecretWords[k] + seed;
}
// 8 bytes of the seeded secret at any byte offset `o` (< 184).
__device__ __forceinline__ uint64_t secret_at(int o, uint64_t seed) {
  int k = o >> 3, sh = (o & 7) * 8;
  uint64_t w0 = secret_word(k, seed);
  if (sh == 0) return w0;
  return (w0 >> sh) | (secret_word(k + 1, seed) << (64 - sh));
}

// 8 bytes at any address: tensor data is only element-aligned. Reads the aligned words that
// hold the bytes; every byte of them is inside the tensor's allocation page. Plain loads, not
// `__ldg`: the final kernel reads the header it has just written.
__device__ __forceinline__ uint64_t load64_any(const uint8_t* p) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint64_t* w = reinterpret_cast<const uint64_t*>(a & ~uintptr_t(7));
  int sh = int(a & 7) * 8;
  uint64_t w0 = w[0];
  if (sh == 0) return w0;
  return (w0 >> sh) | (w[1] << (64 - sh));
}

// Reads of the long path: 8 bytes on a unit boundary, canonicalized while read.
struct LongInput {
  const uint8_t* p;
  Unit unit;
  __device__ __forceinline__ uint64_t le64(size_t i) const {
    uint64_t w = load64_any(p + i);
    return unit == Unit::kRaw ? w : canonical::canonicalize_word(unit, w);
  }
};

// XXH3-64 of `len` (> 240) bytes with `seed`, by a whole warp. Lane = 8 * group + j: lane j
// of each of the four groups owns accumulator j; within a 1 KiB block the 16 stripes are
// split over the groups (stripe s goes to group s % 4) and their contributions summed, which
// is exact because every accumulator update between two scrambles is an addition.
__device__ uint64_t warp_hash_long(const LongInput& in, size_t len, uint64_t seed) {
  const int lane = threadIdx.x & 31, group = lane >> 3, j = lane & 7;
  const uint64_t init[8] = {x::kPrime32_3, x::kPrime64_1, x::kPrime64_2, x::kPrime64_3,
                            x::kPrime64_4, x::kPrime32_2, x::kPrime64_5, x::kPrime32_1};
  uint64_t acc = init[j];
  auto stripe_part = [&](size_t off, int secret_off) -> uint64_t {
    uint64_t data = in.le64(off + 8 * j);
    uint64_t key = data ^ secret_at(secret_off + 8 * j, seed);
    uint64_t other = __shfl_xor_sync(kFullMask, data, 1);  // acc[j] takes data[j ^ 1]
    return other + (key & 0xffffffffu) * (key >> 32);
  };
  auto sum_groups = [&](uint64_t part) {
    part += __shfl_xor_sync(kFullMask, part, 8);
    part += __shfl_xor_sync(kFullMask, part, 16);
    return part;
  };
  const size_t blocks = (len - 1) / x::kBlockLen;
  const uint64_t scramble_key = secret_word(16 + j, seed);  // secret + 192 - 64
  for (size_t b = 0; b < blocks; ++b) {
    uint64_t part = 0;
    for (int s = group; s < int(x::kStripesPerBlock); s += 4)
      part += stripe_part(b * x::kBlockLen + size_t(s) * x::kStripeLen, 8 * s);
    acc += sum_groups(part);
    acc ^= acc >> 47;
    acc ^= scramble_key;
    acc *= x::kPrime32_1;
  }
  // Last partial block, then the last stripe (which may overlap it).
  const size_t base = blocks * x::kBlockLen;
  const int stripes = int(((len - 1) - base) / x::kStripeLen);
  // The same number of rounds in every group (shuffles need the whole warp); a group past
  // the last stripe reads stripe 0 again and drops the result.
  uint64_t part = 0;
  for (int t = 0; 4 * t < stripes; ++t) {
    int s = group + 4 * t;
    bool valid = s < stripes;
    uint64_t v = stripe_part(base + size_t(valid ? s : 0) * x::kStripeLen, valid ? 8 * s : 0);
    part += valid ? v : 0;
  }
  acc += sum_groups(part);
  // Every group computes the last stripe; only group 0's is added (then broadcast).
  uint64_t last = stripe_part(len - x::kStripeLen, int(x::kSecretSize - x::kStripeLen - 7));
  acc += __shfl_sync(kFullMask, last, j);  // lanes 0..7 hold group 0's values
  // Merge: lane 0 collects the eight accumulators.
  x::Acc all;
  for (int k = 0; k < 8; ++k) all.v[k] = __shfl_sync(kFullMask, acc, k);
  uint64_t r = uint64_t(len) * x::kPrime64_1;
  for (int i = 0; i < 4; ++i)
    r += x::mul128_fold64(all.v[2 * i] ^ secret_at(11 + 16 * i, seed), all.v[2 * i + 1] ^ secret_at(11 + 16 * i + 8, seed));
  return x::avalanche(r);
}

// XXH3-64 of any length by a warp: short inputs by lane 0 with the portable code.
__device__ uint64_t warp_hash(const uint8_t* p, size_t len, uint64_t seed, Unit unit) {
  if (len > 240) return warp_hash_long(LongInput{p, unit}, len, seed);
  uint64_t h = 0;
  if ((threadIdx.x & 31) == 0) h = x::hash64_of(canonical::CanonicalInput{p, unit}, len, seed);
  return __shfl_sync(kFullMask, h, 0);
}

struct Partial {
  double min, max, sum, abs_sum;
  long long nan, inf, finite;
};

__device__ __forceinline__ void add_value(Partial& s, double v) {
  if (isnan(v)) {
    ++s.nan;
  } else if (isinf(v)) {
    ++s.inf;
  } else {
    ++s.finite;
    s.min = fmin(s.min, v);
    s.max = fmax(s.max, v);
    s.sum += v;
    s.abs_sum += fabs(v);
  }
}

__device__ void add_unit(Partial& s, Unit unit, const uint8_t* q) {
  switch (unit) {
    case Unit::kF32: add_value(s, canonical::bits_to_float(x::load_le32(q))); break;
    case Unit::kF64: {
      uint64_t b = x::load_le64(q);
      add_value(s, __longlong_as_double((long long)b));
      break;
    }
    case Unit::kF16: add_value(s, canonical::f16_to_float(uint16_t(q[0] | q[1] << 8))); break;
    case Unit::kBF16: add_value(s, canonical::bf16_to_float(uint16_t(q[0] | q[1] << 8))); break;
    case Unit::kF8E4M3FN: add_value(s, canonical::f8e4m3fn_to_float(q[0])); break;
    case Unit::kF8E5M2: add_value(s, canonical::f8e5m2_to_float(q[0])); break;
    default: break;
  }
}

__device__ void add_word(Partial& s, Unit unit, uint64_t w) {
  switch (unit) {
    case Unit::kF32:
      add_value(s, canonical::bits_to_float(uint32_t(w)));
      add_value(s, canonical::bits_to_float(uint32_t(w >> 32)));
      break;
    case Unit::kF64: add_value(s, __longlong_as_double((long long)w)); break;
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

__device__ Partial empty_partial() {
  return Partial{INFINITY, -INFINITY, 0, 0, 0, 0, 0};
}

// Combines the partials of all lanes in a fixed shuffle tree (deterministic).
__device__ Partial warp_reduce(Partial s) {
  for (int d = 16; d > 0; d >>= 1) {
    s.min = fmin(s.min, __shfl_xor_sync(kFullMask, s.min, d));
    s.max = fmax(s.max, __shfl_xor_sync(kFullMask, s.max, d));
    s.sum += __shfl_xor_sync(kFullMask, s.sum, d);
    s.abs_sum += __shfl_xor_sync(kFullMask, s.abs_sum, d);
    s.nan += __shfl_xor_sync(kFullMask, s.nan, d);
    s.inf += __shfl_xor_sync(kFullMask, s.inf, d);
    s.finite += __shfl_xor_sync(kFullMask, s.finite, d);
  }
  return s;
}

struct Job {
  const uint8_t* data;
  unsigned long long total_bytes;
  unsigned long long chunks;
  Unit unit;
  bool summaries;
  uint8_t* stream_buf;  // header, then chunk hashes (the final hash's input)
  unsigned header_bytes;
  Partial* partials;
};

// One warp per chunk: summary pass (coalesced, also warms the cache), then the hash.
__global__ void chunk_kernel(Job job) {
  const unsigned long long chunk = blockIdx.x * (unsigned long long)kWarpsPerBlock + (threadIdx.x >> 5);
  if (chunk >= job.chunks) return;  // whole warps exit together
  const int lane = threadIdx.x & 31;
  const unsigned long long start = chunk * kChunkBytes;
  const size_t len = size_t(min((unsigned long long)kChunkBytes, job.total_bytes - start));
  const uint8_t* p = job.data + start;
  if (job.summaries) {
    Partial s = empty_partial();
    const size_t words = len / 8;
    for (size_t w = lane; w < words; w += 32) add_word(s, job.unit, load64_any(p + 8 * w));
    if (lane == 0) {
      size_t width = canonical::unit_size(job.unit);
      for (size_t o = words * 8; o + width <= len; o += width) add_unit(s, job.unit, p + o);
    }
    s = warp_reduce(s);
    if (lane == 0) job.partials[chunk] = s;
  }
  uint64_t h = warp_hash(p, len, chunk, job.unit);
  if (lane == 0) {
    uint8_t* out = job.stream_buf + job.header_bytes + 8 * chunk;
    *reinterpret_cast<uint64_t*>(out) = h;  // aligned: header_bytes is a multiple of 8
  }
}

struct Header {
  uint32_t dtype, ndim;
  long long sizes[kMaxDims];
};

// One warp: writes the header, hashes header + chunk hashes, reduces the summaries.
__global__ void final_kernel(Job job, Header header, HashResult* slot) {
  const int lane = threadIdx.x & 31;
  if (lane == 0) {
    uint8_t* b = job.stream_buf;
    const char magic[8] = {'t', 'd', 'b', 'g', 'h', 'a', 's', 'h'};
    for (int i = 0; i < 8; ++i) b[i] = uint8_t(magic[i]);
    uint32_t fields[4] = {1u, header.dtype, header.ndim, uint32_t(kChunkBytes)};
    for (int f = 0; f < 4; ++f)
      for (int i = 0; i < 4; ++i) b[8 + 4 * f + i] = uint8_t(fields[f] >> (8 * i));
    for (uint32_t d = 0; d < header.ndim; ++d) x::store_le64(b + 24 + 8 * d, uint64_t(header.sizes[d]));
  }
  __syncwarp();
  __threadfence_block();
  uint64_t h = warp_hash(job.stream_buf, job.header_bytes + 8 * job.chunks, 0, Unit::kRaw);
  Partial s = empty_partial();
  if (job.summaries) {
    // Lane-strided over the chunks, then a fixed tree: deterministic for a given chunk count.
    Partial t = empty_partial();
    for (unsigned long long c = lane; c < job.chunks; c += 32) {
      Partial q = job.partials[c];
      t.min = fmin(t.min, q.min);
      t.max = fmax(t.max, q.max);
      t.sum += q.sum;
      t.abs_sum += q.abs_sum;
      t.nan += q.nan;
      t.inf += q.inf;
      t.finite += q.finite;
    }
    s = warp_reduce(t);
  }
  if (lane == 0) {
    slot->hash = h;
    slot->hashed = true;
    slot->error = nullptr;
    Summary& out = slot->summary;
    out.valid = job.summaries && job.total_bytes > 0;
    if (out.valid) {
      bool any_finite = s.finite > 0;
      out.min = any_finite ? s.min : NAN;
      out.max = any_finite ? s.max : NAN;
      out.sum = s.sum;
      out.abs_sum = s.abs_sum;
      out.nan_count = s.nan;
      out.inf_count = s.inf;
    } else {
      out.min = out.max = out.sum = out.abs_sum = 0;
      out.nan_count = out.inf_count = 0;
    }
    __threadfence_system();  // the slot is host memory
  }
}

Unit unit_of(DType d) {
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

}  // namespace

StatusOr<std::unique_ptr<ResultSlots>> ResultSlots::Create(size_t count) {
  void* p = nullptr;
  size_t bytes = (count == 0 ? 1 : count) * sizeof(HashResult);
  TDBG_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  HashResult* slots = static_cast<HashResult*>(p);
  for (size_t i = 0; i < count; ++i) new (&slots[i]) HashResult();
  return std::unique_ptr<ResultSlots>(new ResultSlots(slots, count));
}

ResultSlots::~ResultSlots() { cudaFreeHost(slots_); }

bool cuda_device_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

Status hash_tensor_async(const TensorView& view, CUstream_st* stream, HashResult* slot,
                         const HashOptions& options) {
  if (slot == nullptr) return Status::Error("hash_tensor_async: no result slot");
  if (!dtype_is_hashable(view.dtype) || view.ndim < 0 || view.ndim > kMaxDims ||
      (view.ndim > 0 && view.sizes == nullptr)) {
    *slot = hash_tensor(view, options);  // the CPU path reports why, without touching data
    return Status::Ok();
  }
  uint64_t numel = 1;
  for (int d = 0; d < view.ndim; ++d) {
    if (view.sizes[d] < 0) {
      *slot = hash_tensor(view, options);
      return Status::Ok();
    }
    numel *= uint64_t(view.sizes[d]);
  }
  if (numel == 0) {
    // Nothing to read: the hash is the header's, computed here.
    TensorView empty = view;
    empty.data = nullptr;
    *slot = hash_tensor(empty, options);
    return Status::Ok();
  }
  if (view.data == nullptr) return Status::Error("hash_tensor_async: tensor has no data pointer");
  if (view.strides != nullptr) {
    int64_t expected = 1;
    for (int d = view.ndim - 1; d >= 0; --d) {
      if (view.sizes[d] != 1 && view.strides[d] != expected)
        return Status::Error("hash_tensor_async: tensor is not contiguous; make it contiguous on its stream first");
      expected *= view.sizes[d];
    }
  }
  cudaStream_t s = stream;
  Job job;
  job.data = static_cast<const uint8_t*>(view.data);
  job.total_bytes = numel * dtype_size(view.dtype);
  job.chunks = (job.total_bytes + kChunkBytes - 1) / kChunkBytes;
  job.unit = unit_of(view.dtype);
  job.summaries = options.summaries && dtype_is_floating(view.dtype);
  job.header_bytes = unsigned(24 + 8 * view.ndim);
  size_t stream_bytes = job.header_bytes + 8 * job.chunks;
  size_t partial_bytes = job.summaries ? sizeof(Partial) * job.chunks : 0;
  void* scratch = nullptr;
  TDBG_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&scratch, stream_bytes + partial_bytes + 64, s));
  job.stream_buf = static_cast<uint8_t*>(scratch);
  // Partials after the stream bytes, 8-aligned (stream_bytes is a multiple of 8).
  job.partials = reinterpret_cast<Partial*>(job.stream_buf + stream_bytes);

  Header header{};
  header.dtype = uint32_t(view.dtype);
  header.ndim = uint32_t(view.ndim);
  for (int d = 0; d < view.ndim; ++d) header.sizes[d] = view.sizes[d];

  HashResult* device_slot = nullptr;
  cudaError_t err = cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_slot), slot, 0);
  if (err != cudaSuccess) {
    cudaFreeAsync(scratch, s);
    return Status::Error(std::string("hash_tensor_async: result slot is not mapped pinned memory: ") +
                         cudaGetErrorString(err));
  }
  unsigned long long blocks = (job.chunks + kWarpsPerBlock - 1) / kWarpsPerBlock;
  chunk_kernel<<<unsigned(blocks), 32 * kWarpsPerBlock, 0, s>>>(job);
  final_kernel<<<1, 32, 0, s>>>(job, header, device_slot);
  err = cudaGetLastError();
  cudaFreeAsync(scratch, s);
  if (err != cudaSuccess)
    return Status::Error(std::string("hash_tensor_async: kernel launch failed: ") + cudaGetErrorString(err));
  return Status::Ok();
}

}  // namespace tdbg::hashing::gpu
