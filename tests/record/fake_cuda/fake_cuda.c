/* A stand-in CUDA driver for machines without a GPU: the few entry points the preload's GPU
   hooks sit on, with the real ABI, so the interception plumbing (dlsym on a driver handle,
   cuGetProcAddress, kernel names, the sink and its buffer, graph capture) is exercised on a CPU. It counts
   the calls that reach it, so the test can tell that every call was forwarded. */
#include <stddef.h>
#include <string.h>

typedef int CUresult;
typedef struct FakeFunction {
  const char* name;
} FakeFunction;

static FakeFunction g_kernel = {"fake_kernel"};
int fake_cuda_launches = 0;
int fake_cuda_loads = 0;

CUresult cuModuleLoadData(void** module, const void* image) {
  (void)image;
  ++fake_cuda_loads;
  *module = &g_kernel;
  return 0;
}

CUresult cuModuleGetFunction(void** function, void* module, const char* name) {
  (void)module;
  (void)name;
  *function = &g_kernel;
  return 0;
}

CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared;
  (void)stream, (void)params, (void)extra;
  ++fake_cuda_launches;
  return 0;
}

CUresult cuFuncGetName(const char** name, void* f) {
  *name = ((FakeFunction*)f)->name;
  return 0;
}

/* Graph capture of one stream: ending a capture that never began fails, as on a real driver. */
static int g_capturing;

CUresult cuStreamBeginCapture_v2(void* stream, int mode) {
  (void)stream, (void)mode;
  if (g_capturing) return 900; /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
  g_capturing = 1;
  return 0;
}

CUresult cuStreamEndCapture(void* stream, void** graph) {
  (void)stream;
  if (!g_capturing) return 401; /* CUDA_ERROR_ILLEGAL_STATE */
  g_capturing = 0;
  *graph = &g_kernel;
  return 0;
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, unsigned long long flags,
                             int* status) {
  (void)flags;
  if (status) *status = 0;
  if (strcmp(symbol, "cuLaunchKernel") == 0)
    *pfn = (void*)&cuLaunchKernel;
  else if (strcmp(symbol, "cuModuleLoadData") == 0)
    *pfn = (void*)&cuModuleLoadData;
  else if (strcmp(symbol, "cuModuleGetFunction") == 0)
    *pfn = (void*)&cuModuleGetFunction;
  else if (strcmp(symbol, "cuStreamBeginCapture") == 0 && version >= 10010)
    *pfn = (void*)&cuStreamBeginCapture_v2;
  else if (strcmp(symbol, "cuStreamEndCapture") == 0)
    *pfn = (void*)&cuStreamEndCapture;
  else
    return 500; /* CUDA_ERROR_NOT_FOUND */
  return 0;
}
