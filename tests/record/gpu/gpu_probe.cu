// Exercises libtdbg_preload.so's GPU hooks on a real device: registers its own sink through
// interpose/preload_api.h, then launches a kernel through the runtime, compiles one with NVRTC
// and launches it through the driver, and checks that every step reached the sink.
// Exits 77 (CTest's skip) when no CUDA device is present.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "interpose/preload_api.h"

namespace {

struct Seen {
  std::mutex mutex;
  std::vector<std::string> module_kinds;
  std::vector<std::string> kernel_names;
};

void on_module(void* ctx, const char* kind, const char*, const void* image, size_t size) {
  auto* seen = static_cast<Seen*>(ctx);
  std::lock_guard<std::mutex> lock(seen->mutex);
  if (image != nullptr && size > 0) seen->module_kinds.push_back(kind);
}

void on_kernel(void* ctx, const char* name, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t,
               uint32_t, uint32_t, uint64_t) {
  auto* seen = static_cast<Seen*>(ctx);
  std::lock_guard<std::mutex> lock(seen->mutex);
  seen->kernel_names.push_back(name);
}

__global__ void tdbg_probe_kernel(float* out) { out[threadIdx.x] = 2.0f * threadIdx.x; }

const char* kNvrtcSource =
    "extern \"C\" __global__ void tdbg_nvrtc_kernel(float* out) { out[threadIdx.x] += 1.0f; }\n";

bool contains(const std::vector<std::string>& items, const char* part) {
  for (const auto& item : items)
    if (item.find(part) != std::string::npos) return true;
  return false;
}

#define CHECK(cond, what)              \
  do {                                 \
    if (!(cond)) {                     \
      std::printf("FAIL: %s\n", what); \
      return 1;                        \
    }                                  \
  } while (0)

}  // namespace

int main() {
  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device (%s)\n", cudaGetErrorString(status));
    return 77;
  }
  auto set_sink = reinterpret_cast<void (*)(const tdbg_gpu_sink*)>(
      dlsym(RTLD_DEFAULT, "tdbg_preload_set_gpu_sink"));
  CHECK(set_sink != nullptr, "not running under libtdbg_preload.so");
  static Seen seen;
  tdbg_gpu_sink sink{on_module, on_kernel, &seen};
  set_sink(&sink);

  float* out = nullptr;
  CHECK(cudaMalloc(&out, 32 * sizeof(float)) == cudaSuccess, "cudaMalloc");
  tdbg_probe_kernel<<<1, 32>>>(out);
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "runtime launch");

  nvrtcProgram program;
  CHECK(
      nvrtcCreateProgram(&program, kNvrtcSource, "probe.cu", 0, nullptr, nullptr) == NVRTC_SUCCESS,
      "nvrtcCreateProgram");
  CHECK(nvrtcCompileProgram(program, 0, nullptr) == NVRTC_SUCCESS, "nvrtcCompileProgram");
  size_t ptx_size = 0;
  CHECK(nvrtcGetPTXSize(program, &ptx_size) == NVRTC_SUCCESS, "nvrtcGetPTXSize");
  std::vector<char> ptx(ptx_size);
  CHECK(nvrtcGetPTX(program, ptx.data()) == NVRTC_SUCCESS, "nvrtcGetPTX");
  nvrtcDestroyProgram(&program);

  // The driver as a library loader sees it (dlopen + dlsym on its handle), which is also
  // how the program runs on a machine without a driver at all: it skips above instead of
  // failing to start.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  CHECK(driver != nullptr, "libcuda.so.1 not found although a device is present");
  auto cuModuleLoadData =
      reinterpret_cast<CUresult (*)(CUmodule*, const void*)>(dlsym(driver, "cuModuleLoadData"));
  auto cuModuleGetFunction = reinterpret_cast<CUresult (*)(CUfunction*, CUmodule, const char*)>(
      dlsym(driver, "cuModuleGetFunction"));
  auto cuLaunchKernel =
      reinterpret_cast<CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void**, void**)>(
          dlsym(driver, "cuLaunchKernel"));
  auto cuCtxSynchronize = reinterpret_cast<CUresult (*)()>(dlsym(driver, "cuCtxSynchronize"));
  CHECK(cuModuleLoadData && cuModuleGetFunction && cuLaunchKernel && cuCtxSynchronize,
        "driver entry points");
  CUmodule module;
  CUfunction function;
  CHECK(cuModuleLoadData(&module, ptx.data()) == CUDA_SUCCESS, "cuModuleLoadData");
  CHECK(cuModuleGetFunction(&function, module, "tdbg_nvrtc_kernel") == CUDA_SUCCESS,
        "cuModuleGetFunction");
  void* args[] = {&out};
  CHECK(cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS,
        "cuLaunchKernel");
  CHECK(cuCtxSynchronize() == CUDA_SUCCESS, "driver launch");
  float host[32];
  CHECK(cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost) == cudaSuccess, "copy");
  CHECK(host[5] == 11.0f, "the kernels computed a wrong value under tdbg");
  set_sink(nullptr);

  std::lock_guard<std::mutex> lock(seen.mutex);
  std::printf("modules:");
  for (const auto& k : seen.module_kinds) std::printf(" %s", k.c_str());
  std::printf("\nkernels:");
  for (const auto& k : seen.kernel_names) std::printf(" %s", k.c_str());
  std::printf("\n");
  CHECK(contains(seen.module_kinds, "fatbin"), "the program's registered fatbin was not seen");
  CHECK(contains(seen.module_kinds, "nvrtc"), "the NVRTC source was not seen");
  CHECK(contains(seen.module_kinds, "ptx"), "the NVRTC output was not seen");
  CHECK(contains(seen.kernel_names, "tdbg_probe_kernel"), "the runtime launch was not seen");
  CHECK(contains(seen.kernel_names, "tdbg_nvrtc_kernel"), "the driver launch was not seen");
  std::printf("ok\n");
  return 0;
}
