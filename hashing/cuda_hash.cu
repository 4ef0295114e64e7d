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
#include "hashing/gpu_hash_body.h"

namespace tdbg::hashing::gpu {
namespace {

using canonical::Unit;
using gpu_body::Header;
using gpu_body::Job;
using gpu_body::Partial;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpsPerBlock = 4;

// Vendor calls go through one place that turns an error into a one-line `Status`.
#define TDBG_CUDA_RETURN_IF_ERROR(call)                                                      \
  do {                                                                                       \
    cudaError_t tdbg_err_ = (call);                                                          \
    if (tdbg_err_ != cudaSuccess)                                                            \
      return Status::Error(std::string(#call) + " failed: " + cudaGetErrorString(tdbg_err_)); \
  } while (0)

// The warp as the `Lanes` of xxh3_warp.h / gpu_hash_body.h.
struct WarpLanes {
  __device__ __forceinline__ int lane() const { return int(threadIdx.x & 31); }
  __device__ __forceinline__ uint64_t shfl_xor(uint64_t v, int mask) const {
    return __shfl_xor_sync(kFullMask, v, mask);
  }
  __device__ __forceinline__ uint64_t shfl(uint64_t v, int src) const { return __shfl_sync(kFullMask, v, src); }
};

struct WarpSync {
  __device__ __forceinline__ void operator()() const {
    __threadfence_block();
    __syncwarp();
  }
};

// One warp per chunk.
__global__ void chunk_kernel(Job job) {
  const uint64_t chunk = uint64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (chunk >= job.chunks) return;  // whole warps exit together
  gpu_body::chunk_body(WarpLanes{}, job, chunk);
}

// One warp: header, final hash, summary reduction, into the mapped host slot.
__global__ void final_kernel(Job job, Header header, HashResult* slot) {
  gpu_body::final_body(WarpLanes{}, WarpSync{}, job, header, slot);
  if ((threadIdx.x & 31) == 0) __threadfence_system();  // the slot is host memory
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
  job.unit = gpu_body::unit_of(view.dtype);
  job.summaries = options.summaries && dtype_is_floating(view.dtype);
  job.header_bytes = uint32_t(24 + 8 * view.ndim);
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
