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

// A tensor's logical layout over host memory. `strides` are in elements, like torch's.
// `data` points at element [0, 0, ...] (storage offset already applied).
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
};

struct HashOptions {
  int threads = 1;         // chunks are hashed on this many threads; the result never depends on it
  bool summaries = true;   // compute `Summary` in the same pass
};

// Bytes in one chunk of the logical byte stream (the spec's C).
constexpr size_t kChunkBytes = 64 * 1024;

// tdbg-hash v1 of `view`. Pure function of dtype, shape and logical element values.
HashResult hash_tensor(const TensorView& view, const HashOptions& options = {});

// XXH3-64 of raw bytes with a seed: for callers that hash non-tensor things (arguments,
// generator states) and for the chain hash in the run database.
uint64_t hash_bytes(const void* data, size_t size, uint64_t seed = 0);
// Mixes `value` into `state` (order matters): used for chain hashes.
uint64_t hash_combine(uint64_t state, uint64_t value);

}  // namespace tdbg::hashing
