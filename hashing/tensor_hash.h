// Public API of hashing/: tdbg-hash v1 (docs/hash-spec.md), a deterministic hash of a
// tensor's dtype, shape and logical element values, plus cheap numeric summaries computed
// in the same pass. Nothing here knows about torch: callers describe a tensor with
// `TensorView` (a pointer, a dtype, sizes and strides).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tdbg::hashing {

// Element types. Serialized in the run database and mixed into every hash: the integer
// values are fixed forever; add new ones at the end.
enum class DType : uint8_t {
  kBool = 0,
  kUInt8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat16 = 6,
  kBFloat16 = 7,
  kFloat32 = 8,
  kFloat64 = 9,
  kComplex32 = 10,   // two float16
  kComplex64 = 11,   // two float32
  kComplex128 = 12,  // two float64
  kUInt16 = 13,
  kUInt32 = 14,
  kUInt64 = 15,
  kFloat8E4M3FN = 16,
  kFloat8E5M2 = 17,
  kQInt8 = 18,       // quantized types are never hashed, but are named
  kQUInt8 = 19,
  kQInt32 = 20,
  kUnknown = 255,
};

// "float32", "bfloat16", ... (torch's names without the `torch.` prefix).
const char* dtype_name(DType dtype);
// Bytes per element; 0 for kUnknown.
size_t dtype_size(DType dtype);
// True for the types that get numeric summaries (floating and complex).
bool dtype_is_floating(DType dtype);
// True for the types `hash_tensor` hashes: every type except the quantized ones and kUnknown.
// Callers record the others as "not hashed" with `dtype_not_hashable_reason`.
bool dtype_is_hashable(DType dtype);
// "quantized dtype qint8 is not hashed", ...; nullptr for hashable types.
const char* dtype_not_hashable_reason(DType dtype);

// A tensor's logical layout over host memory. `strides` are in elements, like torch's, and
// may be zero (expanded dimensions); nullptr means contiguous row-major. `data` points at
// element [0, 0, ...] (storage offset already applied). At most `kMaxDims` dimensions.
struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::kUnknown;
  int ndim = 0;
  const int64_t* sizes = nullptr;
  const int64_t* strides = nullptr;
};

// Numeric summaries of a floating tensor, over finite values only (min/max/sum/abs_sum) plus
// counts of the non-finite ones. For complex tensors the real and imaginary parts count as
// separate values. `valid` is false for non-floating dtypes and for empty tensors.
struct Summary {
  bool valid = false;
  double min = 0, max = 0, sum = 0, abs_sum = 0;
  int64_t nan_count = 0;
  int64_t inf_count = 0;
};

struct HashResult {
  uint64_t hash = 0;
  Summary summary;
  // False when the tensor was not hashed (unhashable dtype, or an invalid view: negative
  // size, null data, too many dimensions); `hash` is then 0 and means nothing, and `error`
  // says why in one line. Callers record such tensors as not hashed, never with `hash`.
  bool hashed = false;
  const char* error = nullptr;
};

struct HashOptions {
  int threads = 1;         // chunks are hashed on this many threads; the result never depends on it
  bool summaries = true;   // compute `Summary` in the same pass
};

// Bytes in one chunk of the logical byte stream (the spec's C).
constexpr size_t kChunkBytes = 64 * 1024;
// Most dimensions a `TensorView` may have (torch's own limit).
constexpr int kMaxDims = 64;
// Below this many bytes `hash_tensor` never starts threads, whatever `HashOptions::threads`.
constexpr size_t kParallelMinBytes = 8u << 20;

// tdbg-hash v1 of `view`. Pure function of dtype, shape and logical element values.
HashResult hash_tensor(const TensorView& view, const HashOptions& options = {});

// XXH3-64 of raw bytes with a seed: for callers that hash non-tensor things (arguments,
// generator states) and for the chain hash in the run database.
uint64_t hash_bytes(const void* data, size_t size, uint64_t seed = 0);
// Mixes `value` into `state` (order matters): used for chain hashes. Defined in the spec as
// XXH3-64 of the 8 little-endian bytes of `value` with seed `state`.
uint64_t hash_combine(uint64_t state, uint64_t value);

// "0123456789abcdef": the 16 lower-case hex digits of `hash`, the form the spec, the CLI and
// the database text use. `out` must hold 17 bytes; returns `out`.
char* hash_to_hex(uint64_t hash, char out[17]);

}  // namespace tdbg::hashing
