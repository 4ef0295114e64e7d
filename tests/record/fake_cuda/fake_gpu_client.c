/* Drives the stand-in driver (fake_cuda.c) the way the CUDA runtime drives a real one —
   dlopen, dlsym of cuGetProcAddress_v2 on the handle, entry points from it — under
   libtdbg_preload.so, and checks what reached the GPU sink: the module and both launches (the
   first from before the sink existed, replayed from the buffer), with the kernel's name.
   Usage: fake_gpu_client PATH_TO_FAKE_DRIVER [expect-none]   (the latter under TDBG_GPU=0) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "interpose/preload_api.h"

typedef int (*GetProc)(const char*, void**, int, unsigned long long, int*);
typedef int (*Load)(void**, const void*);
typedef int (*Launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                      void*, void**, void**);

static int g_modules, g_kernels, g_named;

static void on_module(void* ctx, const char* kind, const char* name, const void* image,
                      size_t size) {
  (void)ctx, (void)name;
  if (strcmp(kind, "ptx") == 0 && size == strlen((const char*)image) + 1) ++g_modules;
}

static void on_kernel(void* ctx, const char* name, uint32_t gx, uint32_t gy, uint32_t gz,
                      uint32_t bx, uint32_t by, uint32_t bz, uint32_t shared, uint64_t stream) {
  (void)ctx, (void)gy, (void)gz, (void)by, (void)bz, (void)shared, (void)stream;
  ++g_kernels;
  if (strcmp(name, "fake_kernel") == 0 && gx == 4 && bx == 32) ++g_named;
}

#define CHECK(cond, what)       \
  if (!(cond)) {                \
    printf("FAIL: %s\n", what); \
    return 1;                   \
  }

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int expect_none = argc > 2 && strcmp(argv[2], "expect-none") == 0;
  void (*set_sink)(const struct tdbg_gpu_sink*) =
      (void (*)(const struct tdbg_gpu_sink*))dlsym(RTLD_DEFAULT, "tdbg_preload_set_gpu_sink");
  CHECK(set_sink != NULL, "not running under libtdbg_preload.so");

  void* driver = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  CHECK(driver != NULL, dlerror());
  GetProc get_proc = (GetProc)dlsym(driver, "cuGetProcAddress_v2");
  CHECK(get_proc != NULL, "cuGetProcAddress_v2");
  Dl_info info;
  CHECK(dladdr((void*)get_proc, &info) && info.dli_fname != NULL, "dladdr");
  int wrapped = strstr(info.dli_fname, "libtdbg_preload") != NULL;
  CHECK(wrapped != expect_none,
        expect_none ? "wrapped although TDBG_GPU=0" : "dlsym on the driver handle was not wrapped");

  Load load = NULL;
  Launch launch = NULL;
  CHECK(get_proc("cuModuleLoadData", (void**)&load, 12000, 0, NULL) == 0, "get load");
  CHECK(get_proc("cuLaunchKernel", (void**)&launch, 12000, 0, NULL) == 0, "get launch");
  void* module = NULL;
  CHECK(load(&module, "// PTX\n.version 8.0\n") == 0, "load");
  CHECK(launch(module, 4, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == 0, "launch before sink");

  struct tdbg_gpu_sink sink = {on_module, on_kernel, NULL};
  set_sink(&sink);
  CHECK(launch(module, 4, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == 0, "launch after sink");
  set_sink(NULL);
  CHECK(launch(module, 4, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == 0, "launch after detach");

  /* Graph capture: the preload must see it begin and end (a failed end changes nothing), so
     that the torch hook never synchronizes with the GPU inside a capture. */
  typedef int (*BeginCapture)(void*, int);
  typedef int (*EndCapture)(void*, void**);
  int (*capturing)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "tdbg_preload_gpu_capturing");
  BeginCapture begin_capture = NULL;
  EndCapture end_capture = NULL;
  void* graph = NULL;
  CHECK(capturing != NULL, "tdbg_preload_gpu_capturing is not exported");
  CHECK(get_proc("cuStreamBeginCapture", (void**)&begin_capture, 12000, 0, NULL) == 0, "get begin");
  CHECK(get_proc("cuStreamEndCapture", (void**)&end_capture, 12000, 0, NULL) == 0, "get end");
  CHECK(capturing() == (expect_none ? -1 : 0), "capturing before any capture");
  CHECK(begin_capture(NULL, 0) == 0, "begin capture");
  CHECK(capturing() == (expect_none ? -1 : 1), "a begun capture was not seen");
  CHECK(end_capture(NULL, &graph) == 0 && graph != NULL, "end capture");
  CHECK(capturing() == (expect_none ? -1 : 0), "an ended capture was still counted");
  CHECK(end_capture(NULL, &graph) != 0, "ending twice must fail");
  CHECK(capturing() == (expect_none ? -1 : 0), "a failed end changed the count");
  CHECK(begin_capture(NULL, 0) == 0 && capturing() == (expect_none ? -1 : 1), "capture again");
  CHECK(end_capture(NULL, &graph) == 0, "end capture again");

  int* launches = (int*)dlsym(driver, "fake_cuda_launches");
  int* loads = (int*)dlsym(driver, "fake_cuda_loads");
  CHECK(launches && *launches == 3 && loads && *loads == 1, "calls did not reach the driver");
  printf("modules %d kernels %d named %d\n", g_modules, g_kernels, g_named);
  if (expect_none) {
    CHECK(g_modules == 0 && g_kernels == 0, "events recorded although TDBG_GPU=0");
  } else {
    CHECK(g_modules == 1, "want the one module load");
    CHECK(g_kernels == 2 && g_named == 2, "want both launches (one replayed), by name");
  }
  printf("ok\n");
  return 0;
}
