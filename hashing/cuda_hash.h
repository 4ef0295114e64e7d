// tdbg-hash v1 of tensors in GPU memory, computed on the GPU on the tensor's own stream with
// no host synchronization per tensor: results land in pinned, host-mapped `HashResult` slots
// that the caller reads after synchronizing once for a whole batch. Same values as the CPU's
// `hash_tensor` (docs/hash-spec.md); the summaries' sums may differ in the last bits.
// Built only where the CUDA toolkit is found (target `tdbg_hashing_cuda`). This header does
// not include CUDA headers: a stream is passed as `CUstream_st*`, which is what `cudaStream_t`
// and `CUstream` are.
#pragma once

#include <cstddef>
#include <memory>

#include "base/status.h"
#include "hashing/tensor_hash.h"

struct CUstream_st;

namespace tdbg::hashing::gpu {

// Pinned host memory that kernels write directly (zero-copy): one `HashResult` per slot.
// A slot's contents are valid once the stream that `hash_tensor_async` was given has passed
// that call (`cudaStreamSynchronize`, an event, or a later synchronous copy). Create one
// buffer per batch of tensors and synchronize once per batch.
class ResultSlots {
 public:
  // Allocates `count` slots (cudaHostAlloc, mapped). Errors name the CUDA error.
  static StatusOr<std::unique_ptr<ResultSlots>> Create(size_t count);
  ~ResultSlots();
  ResultSlots(const ResultSlots&) = delete;
  ResultSlots& operator=(const ResultSlots&) = delete;

  size_t size() const { return count_; }
  // Host view of slot `i`; read it only after the synchronization described above.
  HashResult& operator[](size_t i) { return slots_[i]; }
  HashResult* data() { return slots_; }

 private:
  ResultSlots(HashResult* slots, size_t count) : slots_(slots), count_(count) {}
  HashResult* slots_;
  size_t count_;
};

// True when the CUDA runtime sees at least one device (false, not an error, otherwise).
bool cuda_device_available();

// Enqueues the hash of `view` on `stream` (nullptr: the legacy default stream) and returns at
// once; the result is written to `slot`, which must point into a `ResultSlots` buffer.
// `view.data` is a device pointer of the current device and the view must be contiguous
// (strides null or row-major; size-1 dimensions may have any stride). A non-contiguous
// tensor is the caller's to make contiguous first on the same stream (torch:
// `t.contiguous()`, then keep the copy alive until the stream has passed the hash), or to
// copy to the host and use `hash_tensor`. Scratch memory comes from the stream-ordered
// allocator (cudaMallocAsync), so nothing synchronizes. Unhashable dtypes are written to the
// slot at once as not hashed, with the reason, like `hash_tensor`.
// Errors (returned, slot untouched): a non-contiguous view, a CUDA launch or allocation error.
Status hash_tensor_async(const TensorView& view, CUstream_st* stream, HashResult* slot,
                         const HashOptions& options = {});

}  // namespace tdbg::hashing::gpu
