// GPU tdbg-hash against the CPU's, for every dtype, edge sizes, NaNs, misaligned data and a
// batch synchronized once. Runs only where a CUDA device is visible; elsewhere every case
// prints "SKIPPED: no CUDA device" and exits with 77, which CTest reports as skipped.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "hashing/cuda_hash.h"
#include "hashing/tensor_hash.h"

using namespace tdbg::hashing;

namespace {

void require_device() {
  if (!gpu::cuda_device_available()) {
    std::printf("SKIPPED: no CUDA device\n");
    std::fflush(stdout);
    std::exit(77);
  }
}

// Copies `bytes` to the device at `offset` bytes past a fresh allocation (to test unaligned
// tensor starts), returning the device pointer; `base` receives the allocation to free.
const void* to_device(const std::vector<uint8_t>& bytes, size_t offset, void** base) {
  REQUIRE(cudaMalloc(base, bytes.size() + offset + 16) == cudaSuccess);
  uint8_t* p = static_cast<uint8_t*>(*base) + offset;
  REQUIRE(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice) == cudaSuccess);
  return p;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& v : b) v = uint8_t(rng());
  return b;
}

const DType kAll[] = {DType::kBool, DType::kUInt8, DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64,
                      DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64, DType::kComplex32,
                      DType::kComplex64, DType::kComplex128, DType::kUInt16, DType::kUInt32, DType::kUInt64,
                      DType::kFloat8E4M3FN, DType::kFloat8E5M2};

}  // namespace

TEST_CASE("GPU hash equals the CPU hash for every dtype and edge size") {
  require_device();
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  struct Pending {
    std::vector<uint8_t> bytes;
    DType dtype;
    std::vector<int64_t> sizes;
    void* base;
    size_t misalign;
    size_t slot;
  };
  std::vector<Pending> pending;
  for (DType dt : kAll) {
    size_t es = dtype_size(dt), per_chunk = kChunkBytes / es;
    for (size_t n : {size_t(0), size_t(1), size_t(3), size_t(17), size_t(31), size_t(61), per_chunk - 1, per_chunk,
                     per_chunk + 1, 5 * per_chunk + 7})
      for (size_t misalign : {size_t(0), es})
        pending.push_back({random_bytes(n * es, uint32_t(n * 7 + es)), dt, {int64_t(n)}, nullptr, misalign, 0});
  }
  // A 0-dim tensor and a 2-D one.
  pending.push_back({random_bytes(4, 1), DType::kFloat32, {}, nullptr, 0, 0});
  pending.push_back({random_bytes(4 * 300 * 7, 2), DType::kFloat32, {300, 7}, nullptr, 0, 0});
  auto slots = gpu::ResultSlots::Create(pending.size());
  REQUIRE(slots.ok());
  // Enqueue everything, then synchronize once: the asynchronous contract.
  for (size_t i = 0; i < pending.size(); ++i) {
    Pending& p = pending[i];
    const void* d = to_device(p.bytes, p.misalign, &p.base);
    TensorView v{d, p.dtype, int(p.sizes.size()), p.sizes.data(), nullptr};
    tdbg::Status st = gpu::hash_tensor_async(v, stream, &(**slots)[i]);
    INFO(st.message());
    REQUIRE(st.ok());
    p.slot = i;
  }
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  for (Pending& p : pending) {
    TensorView v{p.bytes.data(), p.dtype, int(p.sizes.size()), p.sizes.data(), nullptr};
    HashResult cpu = hash_tensor(v);
    const HashResult& g = (**slots)[p.slot];
    INFO(dtype_name(p.dtype) << " numel " << (p.sizes.empty() ? 1 : p.sizes[0]));
    CHECK(g.hashed);
    CHECK(g.hash == cpu.hash);
    CHECK(g.summary.valid == cpu.summary.valid);
    if (cpu.summary.valid) {
      CHECK(g.summary.nan_count == cpu.summary.nan_count);
      CHECK(g.summary.inf_count == cpu.summary.inf_count);
      CHECK((g.summary.min == cpu.summary.min || (std::isnan(g.summary.min) && std::isnan(cpu.summary.min))));
      CHECK((g.summary.max == cpu.summary.max || (std::isnan(g.summary.max) && std::isnan(cpu.summary.max))));
      CHECK(std::fabs(g.summary.sum - cpu.summary.sum) <= 1e-9 * cpu.summary.abs_sum + 1e-300);
    }
    cudaFree(p.base);
  }
  cudaStreamDestroy(stream);
}

TEST_CASE("GPU hash canonicalizes NaNs like the CPU") {
  require_device();
  std::vector<float> a(100000, 1.0f);
  a[5] = std::nanf("");
  std::vector<uint8_t> bytes(a.size() * 4);
  std::memcpy(bytes.data(), a.data(), bytes.size());
  uint32_t odd_nan = 0xffc01234u;
  std::memcpy(&bytes[4 * 70000], &odd_nan, 4);
  void* base;
  const void* d = to_device(bytes, 0, &base);
  int64_t n = int64_t(a.size());
  auto slots = gpu::ResultSlots::Create(1);
  REQUIRE(slots.ok());
  TensorView v{d, DType::kFloat32, 1, &n, nullptr};
  REQUIRE(gpu::hash_tensor_async(v, nullptr, &(**slots)[0]).ok());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  TensorView h{bytes.data(), DType::kFloat32, 1, &n, nullptr};
  CHECK((**slots)[0].hash == hash_tensor(h).hash);
  CHECK((**slots)[0].summary.nan_count == 2);
  cudaFree(base);
}

TEST_CASE("GPU hash rejects non-contiguous views and reports unhashable dtypes") {
  require_device();
  auto slots = gpu::ResultSlots::Create(2);
  REQUIRE(slots.ok());
  int64_t sizes[2] = {4, 4}, strides[2] = {1, 4};
  void* base;
  REQUIRE(cudaMalloc(&base, 64) == cudaSuccess);
  TensorView t{base, DType::kFloat32, 2, sizes, strides};
  CHECK_FALSE(gpu::hash_tensor_async(t, nullptr, &(**slots)[0]).ok());
  TensorView q{base, DType::kQInt8, 2, sizes, nullptr};
  REQUIRE(gpu::hash_tensor_async(q, nullptr, &(**slots)[1]).ok());
  CHECK_FALSE((**slots)[1].hashed);
  cudaFree(base);
}
