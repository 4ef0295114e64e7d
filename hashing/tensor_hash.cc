// tdbg-hash v1 on the CPU (docs/hash-spec.md): walks a tensor's logical byte stream chunk by
// chunk, summarizes and canonicalizes each chunk while it is hot in cache, hashes it with
// libxxhash (SIMD), and hashes the header and the chunk hashes into the final value.
#include "hashing/tensor_hash.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>
#if defined(TDBG_XXH_DISPATCH)
// libxxhash's run-time dispatch picks AVX2/AVX-512 where the CPU has them (2-5x the SSE2
// baseline); same values, it only changes speed.
#include <xxh_x86dispatch.h>
#define TDBG_XXH3_CHUNK XXH3_64bits_withSeed_dispatch
#define TDBG_XXH3_UPDATE XXH3_64bits_update_dispatch
#else
#define TDBG_XXH3_CHUNK XXH3_64bits_withSeed
#define TDBG_XXH3_UPDATE XXH3_64bits_update
#endif

#include "base/quiet_thread.h"
#include "hashing/canonical.h"
#include "hashing/chunk_scan.h"
#include "hashing/small_hash.h"

#ifndef TDBG_PIECE_BYTES
#define TDBG_PIECE_BYTES 65536
#endif

namespace tdbg::hashing {

using canonical::Unit;
using canonical::unit_of;
using internal::ChunkSummary;

namespace {

constexpr char kMagic[8] = {'t', 'd', 'b', 'g', 'h', 'a', 's', 'h'};
constexpr uint32_t kSpecVersion = 1;
// Chunks a worker claims at a time in the threaded path (1 MiB of stream).
constexpr size_t kChunksPerClaim = 16;
// Bytes scanned and hashed together inside a chunk (see `process_chunk`).
constexpr size_t kPieceBytes = TDBG_PIECE_BYTES;

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}

// Hashes the final stream (header, then chunk hashes) without allocating: bytes collect in a
// stack buffer, and only a stream longer than the buffer goes through XXH3's streaming state,
// which gives the same value as one call over the whole stream.
class FinalHasher {
 public:
  void add(const void* data, size_t size) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    while (size > 0) {
      if (used_ == sizeof(buffer_)) flush();
      size_t n = std::min(size, sizeof(buffer_) - used_);
      std::memcpy(buffer_ + used_, p, n);
      used_ += n;
      p += n;
      size -= n;
    }
  }
  void add_u64(uint64_t v) {
    uint8_t b[8];
    put_u64(b, v);
    add(b, 8);
  }
  uint64_t digest() {
    if (!streaming_) return XXH3_64bits_withSeed(buffer_, used_, 0);
    flush();
    return XXH3_64bits_digest(&state_);
  }

 private:
  void flush() {
    if (!streaming_) {
      XXH3_64bits_reset(&state_);
      streaming_ = true;
    }
    XXH3_64bits_update(&state_, buffer_, used_);
    used_ = 0;
  }
  uint8_t buffer_[2048];
  size_t used_ = 0;
  bool streaming_ = false;
  XXH3_state_t state_;
};

// The tensor after validation: sizes and strides with size-1 dimensions dropped and
// dimensions that are contiguous with each other merged, so that a view which is really one
// run of memory takes the contiguous path, and gathers move long runs.
struct Layout {
  const uint8_t* data = nullptr;
  size_t esize = 0;
  Unit unit = Unit::kRaw;
  bool floating = false;
  uint64_t numel = 0;
  uint64_t total_bytes = 0;
  uint64_t chunks = 0;
  int ndim = 0;  // after coalescing
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];
  bool contiguous = false;
};

// Copies the logical bytes [chunk * kChunkBytes, +bytes) of a strided tensor into `out`.
void gather_chunk(const Layout& l, uint64_t chunk, size_t bytes, uint8_t* out) {
  uint64_t first = chunk * (kChunkBytes / l.esize);
  uint64_t count = bytes / l.esize;
  int64_t idx[kMaxDims];
  uint64_t rest = first;
  int64_t offset = 0;  // in elements
  for (int d = l.ndim - 1; d >= 0; --d) {
    idx[d] = int64_t(rest % uint64_t(l.sizes[d]));
    rest /= uint64_t(l.sizes[d]);
    offset += idx[d] * l.strides[d];
  }
  const int last = l.ndim - 1;
  const int64_t inner_size = l.sizes[last], inner_stride = l.strides[last];
  const size_t es = l.esize;
  while (count > 0) {
    uint64_t run = std::min<uint64_t>(count, uint64_t(inner_size - idx[last]));
    const uint8_t* src = l.data + offset * int64_t(es);
    if (inner_stride == 1) {
      std::memcpy(out, src, run * es);
    } else {
      const int64_t step = inner_stride * int64_t(es);
      // Fixed-size copies per element size, so that each is one load and one store.
      switch (es) {
        case 1: for (uint64_t i = 0; i < run; ++i) out[i] = src[int64_t(i) * step]; break;
        case 2: for (uint64_t i = 0; i < run; ++i) std::memcpy(out + 2 * i, src + int64_t(i) * step, 2); break;
        case 4: for (uint64_t i = 0; i < run; ++i) std::memcpy(out + 4 * i, src + int64_t(i) * step, 4); break;
        case 8: for (uint64_t i = 0; i < run; ++i) std::memcpy(out + 8 * i, src + int64_t(i) * step, 8); break;
        default: for (uint64_t i = 0; i < run; ++i) std::memcpy(out + es * i, src + int64_t(i) * step, es); break;
      }
    }
    out += run * es;
    count -= run;
    if (count == 0) break;
    // Carry into the outer dimensions.
    offset += int64_t(run) * inner_stride;
    idx[last] += int64_t(run);
    for (int d = last; d > 0 && idx[d] == l.sizes[d]; --d) {
      offset -= idx[d] * l.strides[d];
      idx[d] = 0;
      idx[d - 1] += 1;
      offset += l.strides[d - 1];
    }
  }
}

// Per-thread scratch of one chunk, for gathers and canonicalized copies. Allocated once per
// thread on first need, so the hot path does not allocate.
uint8_t* thread_scratch() {
  thread_local std::unique_ptr<uint8_t[]> scratch;
  if (!scratch) scratch.reset(new (std::nothrow) uint8_t[kChunkBytes]);
  return scratch.get();
}

struct ChunkResult {
  uint64_t hash = 0;
  ChunkSummary summary;
};

// Everything the spec does to chunk `i`: locate or gather its bytes, summarize, canonicalize
// if needed, hash with seed `i`. `scratch` holds one chunk (needed unless the tensor is
// contiguous and the chunk needs no canonicalizing). Returns false if scratch was needed but
// missing (allocation failure).
bool process_chunk(const Layout& l, uint64_t i, bool summaries, uint8_t* scratch, ChunkResult* r) {
  size_t bytes = size_t(std::min<uint64_t>(kChunkBytes, l.total_bytes - i * kChunkBytes));
  const uint8_t* p;
  if (l.contiguous) {
    p = l.data + i * kChunkBytes;
  } else {
    if (!scratch) return false;
    gather_chunk(l, i, bytes, scratch);
    p = scratch;
  }
  // Floating chunks on AVX2 CPUs: one fused pass computes the hash and the summary (or the
  // NaN check) from the same loads. It declines chunks with NaN/Inf, which take the exact path.
  if (l.floating) {
    uint64_t h;
    ChunkSummary fs;
    if (internal::fused_hash_and_scan(l.unit, p, bytes, i, &h, summaries ? &fs : nullptr)) {
      r->hash = h;
      if (summaries) r->summary = fs;
      return true;
    }
  }
  // The chunk may be scanned and hashed in pieces of `kPieceBytes` (XXH3's streaming form
  // gives the same value as one call), so that the hash reads each piece from L1 right after
  // the scan pulled it from memory. On the shared build machine no piece size measured better
  // than the whole chunk, so the default is one piece; -DTDBG_PIECE_BYTES=8192 tries it.
  XXH3_state_t state;
  const bool pieces = bytes > kPieceBytes;
  if (pieces) XXH3_64bits_reset_withSeed(&state, i);
  ChunkSummary total;
  total.min = std::numeric_limits<double>::infinity();
  total.max = -std::numeric_limits<double>::infinity();
  for (size_t off = 0; off < bytes; off += kPieceBytes) {
    size_t len = std::min(kPieceBytes, bytes - off);
    const uint8_t* q = p + off;
    bool needs_canonical;
    if (l.floating && summaries) {
      ChunkSummary piece = internal::summarize_chunk(l.unit, q, len);
      needs_canonical = piece.nan_count > 0;
      if (piece.finite_count > 0) {
        total.min = std::min(total.min, piece.min);
        total.max = std::max(total.max, piece.max);
      }
      total.sum += piece.sum;
      total.abs_sum += piece.abs_sum;
      total.nan_count += piece.nan_count;
      total.inf_count += piece.inf_count;
      total.finite_count += piece.finite_count;
    } else {
      needs_canonical = l.unit != Unit::kRaw && internal::chunk_needs_canonical(l.unit, q, len);
    }
    if (needs_canonical) {
      if (!scratch) return false;
      // In place when `q` already is in the scratch copy.
      internal::canonicalize_chunk(l.unit, q, len, scratch + off);
      q = scratch + off;
    }
    if (pieces) {
      TDBG_XXH3_UPDATE(&state, q, len);
    } else {
      r->hash = TDBG_XXH3_CHUNK(q, len, i);
    }
  }
  if (pieces) r->hash = XXH3_64bits_digest(&state);
  r->summary = total;
  return true;
}

// Running totals over chunk summaries, added in chunk order.
struct SummaryTotal {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double sum = 0, abs_sum = 0;
  int64_t nan = 0, inf = 0, finite = 0;
  void add(const ChunkSummary& c) {
    if (c.finite_count > 0) {
      min = std::min(min, c.min);
      max = std::max(max, c.max);
    }
    sum += c.sum;
    abs_sum += c.abs_sum;
    nan += c.nan_count;
    inf += c.inf_count;
    finite += c.finite_count;
  }
  Summary result() const {
    Summary s;
    s.valid = true;
    if (finite > 0) {
      s.min = min;
      s.max = max;
    } else {
      s.min = s.max = std::numeric_limits<double>::quiet_NaN();
    }
    s.sum = sum;
    s.abs_sum = abs_sum;
    s.nan_count = nan;
    s.inf_count = inf;
    return s;
  }
};

HashResult not_hashed(const char* why) {
  HashResult r;
  r.error = why;
  return r;
}

}  // namespace

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "bool";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kComplex32: return "complex32";
    case DType::kComplex64: return "complex64";
    case DType::kComplex128: return "complex128";
    case DType::kUInt16: return "uint16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kFloat8E4M3FN: return "float8_e4m3fn";
    case DType::kFloat8E5M2: return "float8_e5m2";
    case DType::kQInt8: return "qint8";
    case DType::kQUInt8: return "quint8";
    case DType::kQInt32: return "qint32";
    case DType::kUnknown: break;
  }
  return "unknown";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
    case DType::kQInt8:
    case DType::kQUInt8: return 1;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kFloat32:
    case DType::kComplex32:
    case DType::kQInt32: return 4;
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kFloat64:
    case DType::kComplex64: return 8;
    case DType::kComplex128: return 16;
    case DType::kUnknown: break;
  }
  return 0;
}

bool dtype_is_floating(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kComplex32:
    case DType::kComplex64:
    case DType::kComplex128:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2: return true;
    default: return false;
  }
}

bool dtype_is_hashable(DType dtype) { return dtype_not_hashable_reason(dtype) == nullptr; }

const char* dtype_not_hashable_reason(DType dtype) {
  switch (dtype) {
    case DType::kQInt8: return "quantized dtype qint8 is not hashed";
    case DType::kQUInt8: return "quantized dtype quint8 is not hashed";
    case DType::kQInt32: return "quantized dtype qint32 is not hashed";
    default: break;
  }
  if (dtype_size(dtype) == 0) return "unknown dtype is not hashed";
  return nullptr;
}

HashResult hash_tensor(const TensorView& view, const HashOptions& options) {
  if (const char* why = dtype_not_hashable_reason(view.dtype)) return not_hashed(why);
  if (view.ndim < 0 || view.ndim > kMaxDims) return not_hashed("tensor has too many dimensions");
  if (view.ndim > 0 && view.sizes == nullptr) return not_hashed("tensor view has no sizes");

  Layout l;
  l.esize = dtype_size(view.dtype);
  l.unit = unit_of(view.dtype);
  l.floating = dtype_is_floating(view.dtype);
  l.data = static_cast<const uint8_t*>(view.data);
  l.numel = 1;
  for (int d = 0; d < view.ndim; ++d) {
    int64_t s = view.sizes[d];
    if (s < 0) return not_hashed("tensor has a negative size");
    if (s != 0 && l.numel > std::numeric_limits<uint64_t>::max() / 32 / uint64_t(s))
      return not_hashed("tensor is too large to hash");
    l.numel *= uint64_t(s);
  }
  l.total_bytes = l.numel * l.esize;
  l.chunks = (l.total_bytes + kChunkBytes - 1) / kChunkBytes;
  if (l.numel > 0 && l.data == nullptr) return not_hashed("tensor has no data pointer");

  // Coalesce: drop size-1 dimensions, merge a dimension into the next when the pair is one
  // evenly strided run. Contiguous row-major when strides are absent.
  for (int d = 0; d < view.ndim && l.numel > 1; ++d) {
    int64_t size = view.sizes[d];
    if (size == 1) continue;
    int64_t stride = view.strides ? view.strides[d] : 0;
    if (!view.strides) {
      stride = 1;
      for (int e = d + 1; e < view.ndim; ++e) stride *= view.sizes[e];
    }
    if (l.ndim > 0 && l.strides[l.ndim - 1] == stride * size) {
      l.sizes[l.ndim - 1] *= size;
      l.strides[l.ndim - 1] = stride;
    } else {
      l.sizes[l.ndim] = size;
      l.strides[l.ndim] = stride;
      ++l.ndim;
    }
  }
  l.contiguous = l.ndim == 0 || (l.ndim == 1 && l.strides[0] == 1);

  // Header: magic, version, dtype, ndim, chunk size, sizes.
  FinalHasher final_hash;
  uint8_t head[24];
  std::memcpy(head, kMagic, 8);
  put_u32(head + 8, kSpecVersion);
  put_u32(head + 12, uint32_t(view.dtype));
  put_u32(head + 16, uint32_t(view.ndim));
  put_u32(head + 20, uint32_t(kChunkBytes));
  final_hash.add(head, sizeof(head));
  for (int d = 0; d < view.ndim; ++d) final_hash.add_u64(uint64_t(view.sizes[d]));

  const bool summaries = options.summaries && l.floating;
  SummaryTotal total;
  int threads = std::max(1, options.threads);
  uint64_t max_useful = std::max<uint64_t>(1, l.chunks / kChunksPerClaim);
  threads = int(std::min<uint64_t>(uint64_t(std::min(threads, 256)), max_useful));

  if (threads <= 1 || l.total_bytes < kParallelMinBytes) {
    // Sequential path: chunk hashes stream straight into the final hash.
    uint8_t* scratch = nullptr;
    for (uint64_t i = 0; i < l.chunks; ++i) {
      ChunkResult r;
      if (!process_chunk(l, i, summaries, scratch, &r)) {
        scratch = thread_scratch();
        if (!scratch) return not_hashed("out of memory for the hashing scratch buffer");
        process_chunk(l, i, summaries, scratch, &r);
      }
      final_hash.add_u64(r.hash);
      if (summaries) total.add(r.summary);
    }
  } else {
    // Threaded path: workers claim runs of chunks; results land in per-chunk slots and are
    // combined in chunk order, so nothing depends on which thread did what.
    std::vector<ChunkResult> results;
    try {
      results.resize(l.chunks);
    } catch (...) {
      return not_hashed("out of memory for chunk results");
    }
    std::atomic<uint64_t> next{0};
    std::atomic<bool> failed{false};
    auto work = [&] {
      std::unique_ptr<uint8_t[]> scratch(new (std::nothrow) uint8_t[kChunkBytes]);
      for (;;) {
        uint64_t begin = next.fetch_add(kChunksPerClaim, std::memory_order_relaxed);
        if (begin >= l.chunks) return;
        uint64_t end = std::min<uint64_t>(l.chunks, begin + kChunksPerClaim);
        for (uint64_t i = begin; i < end; ++i)
          if (!process_chunk(l, i, summaries, scratch.get(), &results[i])) failed = true;
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) {
      try {
        pool.push_back(quiet_thread(work));
      } catch (...) {
        break;  // fewer threads: the claims loop still covers every chunk
      }
    }
    work();
    for (auto& t : pool) t.join();
    if (failed) return not_hashed("out of memory for the hashing scratch buffer");
    for (const ChunkResult& r : results) {
      final_hash.add_u64(r.hash);
      if (summaries) total.add(r.summary);
    }
  }

  HashResult result;
  result.hash = final_hash.digest();
  result.hashed = true;
  if (summaries && l.numel > 0) result.summary = total.result();
  return result;
}

uint64_t hash_bytes(const void* data, size_t size, uint64_t seed) {
  if (size <= internal::kSmallHashBytes) return internal::xxh3_small(data, size, seed);
  return XXH3_64bits_withSeed(data, size, seed);
}

uint64_t hash_combine(uint64_t state, uint64_t value) {
  uint8_t b[8];
  put_u64(b, value);
  return internal::xxh3_small(b, 8, state);
}

char* hash_to_hex(uint64_t hash, char out[17]) {
  static const char kDigits[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i) {
    out[i] = kDigits[hash & 0xf];
    hash >>= 4;
  }
  out[16] = '\0';
  return out;
}

}  // namespace tdbg::hashing
