// GPU interception in libtdbg_preload.so: CUDA module loads, kernel launches (driver and
// runtime) and NVRTC compilations, forwarded to the sink that libtdbg_torch.so registers
// through interpose/preload_api.h. Nothing is linked against CUDA: the real functions come
// from the hook table (dlsym/cuGetProcAddress hand out these wrappers, see preload.cc).
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "interpose/preload.h"
#include "interpose/preload_api.h"

namespace tdbg::preload {
namespace {

#define TDBG_TLS __attribute__((tls_model("initial-exec"))) thread_local

// ---- Pointer -> name tables ---------------------------------------------------------------
// Open addressing, insert under a mutex, lookup without locks (launches are a hot path).
// Fixed capacity, allocated on first insert; when full, new names are simply not known.
class NameTable {
 public:
  void insert(const void* key, const char* name) {
    if (key == nullptr) return;
    pthread_mutex_lock(&mutex_);
    if (slots_.load(std::memory_order_acquire) == nullptr) {
      auto* fresh = static_cast<Slot*>(calloc(kCapacity, sizeof(Slot)));
      slots_.store(fresh, std::memory_order_release);
    }
    Slot* slots = slots_.load(std::memory_order_acquire);
    if (slots != nullptr && used_ < kCapacity / 2) {
      for (size_t i = hash(key);; i = (i + 1) & (kCapacity - 1)) {
        const void* k = slots[i].key.load(std::memory_order_relaxed);
        if (k == key) {
          slots[i].name.store(name, std::memory_order_release);
          break;
        }
        if (k == nullptr) {
          slots[i].name.store(name, std::memory_order_relaxed);
          slots[i].key.store(key, std::memory_order_release);
          ++used_;
          break;
        }
      }
    }
    pthread_mutex_unlock(&mutex_);
  }

  const char* find(const void* key) const {
    Slot* slots = slots_.load(std::memory_order_acquire);
    if (slots == nullptr || key == nullptr) return nullptr;
    for (size_t i = hash(key);; i = (i + 1) & (kCapacity - 1)) {
      const void* k = slots[i].key.load(std::memory_order_acquire);
      if (k == key) return slots[i].name.load(std::memory_order_acquire);
      if (k == nullptr) return nullptr;
    }
  }

 private:
  static constexpr size_t kCapacity = size_t{1} << 17;
  struct Slot {
    std::atomic<const void*> key;
    std::atomic<const char*> name;
  };
  static size_t hash(const void* key) {
    uint64_t x = reinterpret_cast<uintptr_t>(key);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return static_cast<size_t>(x) & (kCapacity - 1);
  }
  std::atomic<Slot*> slots_{nullptr};
  size_t used_ = 0;
  pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;
};

NameTable g_function_names;     // CUfunction -> kernel name (copied)
NameTable g_host_stub_names;    // runtime host stub -> device name (static in the binary)
NameTable g_registered_images;  // fatbins registered by the runtime (reported once)
NameTable g_nvrtc_programs;     // nvrtcProgram -> program name (copied)

const char* copy_name(const char* name) {
  if (name == nullptr) return nullptr;
  return strdup(name);
}

// ---- Sink and the bounded buffer before it ------------------------------------------------
tdbg_gpu_sink g_sink_slots[2];
int g_sink_next_slot = 0;
std::atomic<const tdbg_gpu_sink*> g_sink{nullptr};

constexpr int kMaxPendingModules = 4096;
constexpr int kMaxPendingKernels = 8192;
constexpr size_t kMaxPendingImageBytes = size_t{64} << 20;

struct PendingModule {
  const char* kind;  // a string literal
  char* name;        // owned
  const void* image;
  size_t size;
  bool owns_image;
};
struct PendingKernel {
  char* name;  // owned
  uint32_t grid[3], block[3], shared;
  uint64_t stream;
};
pthread_mutex_t g_pending_mutex = PTHREAD_MUTEX_INITIALIZER;
PendingModule g_pending_modules[kMaxPendingModules];
PendingKernel g_pending_kernels[kMaxPendingKernels];
int g_pending_module_count = 0;
int g_pending_kernel_count = 0;
size_t g_pending_image_bytes = 0;
size_t g_dropped = 0;
// Once a buffer is full, later events skip the lock (a process that never records).
std::atomic<bool> g_modules_full{false};
std::atomic<bool> g_kernels_full{false};
int g_said_dropped = 0;
int g_said_no_cuda = 0;

// `image_persists`: the image lives in a mapped library (registered fatbins), so buffering
// keeps the pointer; otherwise the caller may free it after the load and it is copied.
void emit_module(const char* kind, const char* name, const void* image, size_t size,
                 bool image_persists) {
  if (const tdbg_gpu_sink* sink = g_sink.load(std::memory_order_acquire)) {
    if (sink->on_module != nullptr) sink->on_module(sink->ctx, kind, name, image, size);
    return;
  }
  if (g_modules_full.load(std::memory_order_relaxed)) return;
  pthread_mutex_lock(&g_pending_mutex);
  if (const tdbg_gpu_sink* sink = g_sink.load(std::memory_order_acquire)) {
    // The sink arrived while we waited: deliver directly.
    pthread_mutex_unlock(&g_pending_mutex);
    if (sink->on_module != nullptr) sink->on_module(sink->ctx, kind, name, image, size);
    return;
  }
  bool kept = false;
  if (g_pending_module_count < kMaxPendingModules) {
    PendingModule& m = g_pending_modules[g_pending_module_count];
    m.kind = kind;
    m.name = name != nullptr ? strdup(name) : nullptr;
    m.size = size;
    m.owns_image = !image_persists;
    m.image = image;
    if (!image_persists && image != nullptr) {
      void* copy = g_pending_image_bytes + size <= kMaxPendingImageBytes ? malloc(size) : nullptr;
      if (copy != nullptr) {
        memcpy(copy, image, size);
        g_pending_image_bytes += size;
        m.image = copy;
      } else {
        m.image = nullptr;
      }
    }
    if (image == nullptr || m.image != nullptr) {
      ++g_pending_module_count;
      kept = true;
    } else {
      free(m.name);
    }
  }
  if (!kept) ++g_dropped;
  if (g_pending_module_count >= kMaxPendingModules) g_modules_full.store(true);
  pthread_mutex_unlock(&g_pending_mutex);
}

void emit_kernel(const char* name, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by,
                 uint32_t bz, uint32_t shared, uint64_t stream) {
  if (name == nullptr) name = "?";
  if (const tdbg_gpu_sink* sink = g_sink.load(std::memory_order_acquire)) {
    if (sink->on_kernel != nullptr)
      sink->on_kernel(sink->ctx, name, gx, gy, gz, bx, by, bz, shared, stream);
    return;
  }
  if (g_kernels_full.load(std::memory_order_relaxed)) return;
  pthread_mutex_lock(&g_pending_mutex);
  if (const tdbg_gpu_sink* sink = g_sink.load(std::memory_order_acquire)) {
    pthread_mutex_unlock(&g_pending_mutex);
    if (sink->on_kernel != nullptr)
      sink->on_kernel(sink->ctx, name, gx, gy, gz, bx, by, bz, shared, stream);
    return;
  }
  if (g_pending_kernel_count < kMaxPendingKernels) {
    PendingKernel& k = g_pending_kernels[g_pending_kernel_count++];
    k.name = strdup(name);
    k.grid[0] = gx, k.grid[1] = gy, k.grid[2] = gz;
    k.block[0] = bx, k.block[1] = by, k.block[2] = bz;
    k.shared = shared;
    k.stream = stream;
  } else {
    ++g_dropped;
    g_kernels_full.store(true);
  }
  pthread_mutex_unlock(&g_pending_mutex);
}

// ---- Images --------------------------------------------------------------------------------
constexpr uint32_t kFatbinMagic = 0xBA55ED50u;
constexpr uint32_t kFatbinWrapperMagic = 0x466243B1u;

// What a module image is and how many bytes it spans: a fatbin (its header says), a cubin
// (an ELF: its section headers end it) or PTX (text up to its NUL).
size_t image_size(const void* image, const char** kind) {
  *kind = "ptx";
  if (image == nullptr) return 0;
  const auto* bytes = static_cast<const unsigned char*>(image);
  uint32_t magic;
  memcpy(&magic, bytes, sizeof(magic));
  if (magic == kFatbinWrapperMagic) {
    const void* data;
    memcpy(&data, bytes + 8, sizeof(data));
    return image_size(data, kind);
  }
  if (magic == kFatbinMagic) {
    uint16_t header_size;
    uint64_t fat_size;
    memcpy(&header_size, bytes + 6, sizeof(header_size));
    memcpy(&fat_size, bytes + 8, sizeof(fat_size));
    *kind = "fatbin";
    return header_size + fat_size;
  }
  if (memcmp(bytes,
             "\x7f"
             "ELF",
             4) == 0 &&
      bytes[4] == 2 /* ELFCLASS64 */) {
    ElfW(Ehdr) header;
    memcpy(&header, bytes, sizeof(header));
    size_t end = header.e_shoff + size_t{header.e_shnum} * header.e_shentsize;
    size_t ph_end = header.e_phoff + size_t{header.e_phnum} * header.e_phentsize;
    *kind = "cubin";
    return end > ph_end ? end : ph_end;
  }
  return strlen(reinterpret_cast<const char*>(bytes)) + 1;
}

// The inner fatbin of a runtime registration wrapper (or the image itself).
const void* fatbin_data(const void* image) {
  if (image == nullptr) return nullptr;
  uint32_t magic;
  memcpy(&magic, image, sizeof(magic));
  if (magic != kFatbinWrapperMagic) return image;
  const void* data;
  memcpy(&data, static_cast<const char*>(image) + 8, sizeof(data));
  return data;
}

void report_loaded_image(const void* image) {
  if (!gpu_enabled() || image == nullptr) return;
  // The runtime loads what it registered earlier: that module was reported at registration.
  if (g_registered_images.find(fatbin_data(image)) != nullptr) return;
  const char* kind;
  size_t size = image_size(image, &kind);
  emit_module(kind, "", image, size, false);
}

// A function exported by the same library as `known` (e.g. cuFuncGetName beside the real
// cuLaunchKernel), without depending on how that library was opened.
void* sibling(void* known, const char* name) {
  if (known == nullptr) return nullptr;
  Dl_info info;
  struct link_map* map = nullptr;
  if (dladdr1(known, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 || map == nullptr)
    return nullptr;
  auto real_dlsym = real_dlsym_fn();
  return real_dlsym != nullptr ? real_dlsym(map, name) : nullptr;
}

// ---- Kernel names ---------------------------------------------------------------------------
using FuncGetName = CUresult (*)(const char**, CUfunction);
std::atomic<FuncGetName> g_func_get_name{nullptr};
std::atomic<bool> g_func_get_name_looked{false};

const char* kernel_name(CUfunction function, void* real_launch) {
  if (const char* known = g_function_names.find(function)) return known;
  if (!g_func_get_name_looked.load(std::memory_order_acquire)) {
    g_func_get_name.store(reinterpret_cast<FuncGetName>(sibling(real_launch, "cuFuncGetName")));
    g_func_get_name_looked.store(true, std::memory_order_release);
  }
  FuncGetName get_name = g_func_get_name.load();
  const char* name = nullptr;
  if (get_name != nullptr && get_name(&name, function) == CUDA_SUCCESS && name != nullptr) {
    // Cached as a copy: the driver's string lives only as long as its module.
    const char* copy = copy_name(name);
    g_function_names.insert(function, copy);
    return copy;
  }
  return nullptr;
}

// Set while a runtime launch that was already reported calls into the driver.
TDBG_TLS bool t_runtime_reported = false;

struct RuntimeLaunchScope {
  explicit RuntimeLaunchScope(bool reported) : previous(t_runtime_reported) {
    t_runtime_reported = reported;
  }
  ~RuntimeLaunchScope() { t_runtime_reported = previous; }
  bool previous;
};

void report_driver_launch(CUfunction f, void* real_launch, unsigned gx, unsigned gy, unsigned gz,
                          unsigned bx, unsigned by, unsigned bz, unsigned shared, CUstream stream) {
  if (!gpu_enabled() || t_runtime_reported) return;
  emit_kernel(kernel_name(f, real_launch), gx, gy, gz, bx, by, bz, shared,
              reinterpret_cast<uint64_t>(stream));
}

CUresult no_cuda(const char* what) {
  say_once(&g_said_no_cuda, "%s called but the CUDA driver was not found", what);
  return CUDA_ERROR_NOT_FOUND;
}

// Streams capturing a CUDA graph now: begun and not yet ended (see tdbg_preload_gpu_capturing).
std::atomic<int> g_captures{0};

CUresult count_capture_begin(CUresult result) {
  if (result == CUDA_SUCCESS) g_captures.fetch_add(1, std::memory_order_acq_rel);
  return result;
}

// An end call leaves capture mode also when it reports the capture broken; a call on a stream
// that was not capturing (or from the wrong thread) changes nothing.
CUresult count_capture_end(CUresult result) {
  if (result == CUDA_SUCCESS || result == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
      result == CUDA_ERROR_STREAM_CAPTURE_UNJOINED) {
    int n = g_captures.load(std::memory_order_acquire);
    while (n > 0 && !g_captures.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel)) {
    }
  }
  return result;
}

// The wrapper for what cuGetProcAddress returned for `symbol`, or `function` itself when it
// is not hooked or not the function the wrapper already forwards to.
void* wrap_proc(const char* symbol, void* function, int cuda_version, cuuint64_t flags) {
  if (!gpu_enabled() || symbol == nullptr || function == nullptr) return function;
  HookId id = hook_by_name(symbol);
  if (id == kHook_cuGetProcAddress && cuda_version >= 12000) id = kHook_cuGetProcAddress_v2;
  // Versioned names: since CUDA 10.1, "cuStreamBeginCapture" is the entry with a mode.
  if (id == kHook_cuStreamBeginCapture && cuda_version >= 10010) id = kHook_cuStreamBeginCapture_v2;
  if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
    if (id == kHook_cuLaunchKernel) id = kHook_cuLaunchKernel_ptsz;
    if (id == kHook_cuLaunchKernelEx) id = kHook_cuLaunchKernelEx_ptsz;
    if (id == kHook_cuStreamBeginCapture) id = kHook_cuStreamBeginCapture_ptsz;
    if (id == kHook_cuStreamBeginCapture_v2) id = kHook_cuStreamBeginCapture_v2_ptsz;
    if (id == kHook_cuStreamBeginCaptureToGraph) id = kHook_cuStreamBeginCaptureToGraph_ptsz;
    if (id == kHook_cuStreamEndCapture) id = kHook_cuStreamEndCapture_ptsz;
  }
  if (id == kHookCount || id <= kHook__Exit) return function;
  return remember_real(id, function) ? wrapper_of(id) : function;
}

}  // namespace

// ---- Driver ---------------------------------------------------------------------------------
CUresult on_cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  auto real = real_cuGetProcAddress();
  if (real == nullptr) return no_cuda("cuGetProcAddress");
  CUresult result = real(symbol, pfn, cuda_version, flags);
  if (result == CUDA_SUCCESS && pfn != nullptr) *pfn = wrap_proc(symbol, *pfn, cuda_version, flags);
  return result;
}

CUresult on_cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                                CUdriverProcAddressQueryResult* status) {
  auto real = real_cuGetProcAddress_v2();
  if (real == nullptr) return no_cuda("cuGetProcAddress_v2");
  CUresult result = real(symbol, pfn, cuda_version, flags, status);
  if (result == CUDA_SUCCESS && pfn != nullptr) *pfn = wrap_proc(symbol, *pfn, cuda_version, flags);
  return result;
}

CUresult on_cuModuleLoadData(CUmodule* module, const void* image) {
  auto real = real_cuModuleLoadData();
  if (real == nullptr) return no_cuda("cuModuleLoadData");
  CUresult result = real(module, image);
  if (result == CUDA_SUCCESS) report_loaded_image(image);
  return result;
}

CUresult on_cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int n,
                               CUjit_option* options, void** values) {
  auto real = real_cuModuleLoadDataEx();
  if (real == nullptr) return no_cuda("cuModuleLoadDataEx");
  CUresult result = real(module, image, n, options, values);
  if (result == CUDA_SUCCESS) report_loaded_image(image);
  return result;
}

CUresult on_cuModuleLoadFatBinary(CUmodule* module, const void* fatbin) {
  auto real = real_cuModuleLoadFatBinary();
  if (real == nullptr) return no_cuda("cuModuleLoadFatBinary");
  CUresult result = real(module, fatbin);
  if (result == CUDA_SUCCESS) report_loaded_image(fatbin);
  return result;
}

CUresult on_cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jit_options,
                              void** jit_values, unsigned int n_jit,
                              CUlibraryOption* library_options, void** library_values,
                              unsigned int n_library) {
  auto real = real_cuLibraryLoadData();
  if (real == nullptr) return no_cuda("cuLibraryLoadData");
  CUresult result = real(library, code, jit_options, jit_values, n_jit, library_options,
                         library_values, n_library);
  if (result == CUDA_SUCCESS) report_loaded_image(code);
  return result;
}

CUresult on_cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  auto real = real_cuModuleGetFunction();
  if (real == nullptr) return no_cuda("cuModuleGetFunction");
  CUresult result = real(function, module, name);
  if (result == CUDA_SUCCESS && function != nullptr && gpu_enabled() &&
      g_function_names.find(*function) == nullptr)
    g_function_names.insert(*function, copy_name(name));
  return result;
}

CUresult on_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                           unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                           CUstream stream, void** params, void** extra) {
  auto real = real_cuLaunchKernel();
  if (real == nullptr) return no_cuda("cuLaunchKernel");
  report_driver_launch(f, reinterpret_cast<void*>(real), gx, gy, gz, bx, by, bz, shared, stream);
  return real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

CUresult on_cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                unsigned int bx, unsigned int by, unsigned int bz,
                                unsigned int shared, CUstream stream, void** params, void** extra) {
  auto real = real_cuLaunchKernel_ptsz();
  if (real == nullptr) return no_cuda("cuLaunchKernel_ptsz");
  report_driver_launch(f, reinterpret_cast<void*>(real), gx, gy, gz, bx, by, bz, shared, stream);
  return real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

CUresult on_cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                             void** extra) {
  auto real = real_cuLaunchKernelEx();
  if (real == nullptr) return no_cuda("cuLaunchKernelEx");
  if (config != nullptr)
    report_driver_launch(f, reinterpret_cast<void*>(real), config->gridDimX, config->gridDimY,
                         config->gridDimZ, config->blockDimX, config->blockDimY, config->blockDimZ,
                         config->sharedMemBytes, config->hStream);
  return real(config, f, params, extra);
}

CUresult on_cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                                  void** extra) {
  auto real = real_cuLaunchKernelEx_ptsz();
  if (real == nullptr) return no_cuda("cuLaunchKernelEx_ptsz");
  if (config != nullptr)
    report_driver_launch(f, reinterpret_cast<void*>(real), config->gridDimX, config->gridDimY,
                         config->gridDimZ, config->blockDimX, config->blockDimY, config->blockDimZ,
                         config->sharedMemBytes, config->hStream);
  return real(config, f, params, extra);
}

// ---- Runtime --------------------------------------------------------------------------------
void** on___cudaRegisterFatBinary(void* fatbin_wrapper) {
  auto real = real___cudaRegisterFatBinary();
  if (real == nullptr) {
    no_cuda("__cudaRegisterFatBinary");
    return nullptr;
  }
  void** handle = real(fatbin_wrapper);
  if (gpu_enabled() && fatbin_wrapper != nullptr) {
    const void* data = fatbin_data(fatbin_wrapper);
    g_registered_images.insert(data, "registered");
    const char* kind;
    size_t size = image_size(data, &kind);
    // Name the module after the library or program that carries it.
    Dl_info info;
    const char* owner =
        dladdr(fatbin_wrapper, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "";
    emit_module(kind, owner, data, size, /*image_persists=*/true);
  }
  return handle;
}

void on___cudaRegisterFunction(void** handle, const char* host_function, char* device_function,
                               const char* device_name, int thread_limit, uint3* tid, uint3* bid,
                               dim3* block, dim3* grid, int* warp_size) {
  auto real = real___cudaRegisterFunction();
  if (real == nullptr) {
    no_cuda("__cudaRegisterFunction");
    return;
  }
  if (gpu_enabled()) {
    // The mangled name lives in the registering binary for as long as the stub does.
    const char* name = device_name != nullptr ? device_name : device_function;
    g_host_stub_names.insert(host_function, name);
  }
  real(handle, host_function, device_function, device_name, thread_limit, tid, bid, block, grid,
       warp_size);
}

namespace {
template <typename Real>
cudaError_t runtime_launch(Real real, const void* function, dim3 grid, dim3 block, void** args,
                           size_t shared, cudaStream_t stream) {
  if (real == nullptr) {
    no_cuda("cudaLaunchKernel");
    return cudaErrorInitializationError;
  }
  const char* name = gpu_enabled() ? g_host_stub_names.find(function) : nullptr;
  // Unknown stubs are left to the driver hook, which asks the driver for the name.
  if (name != nullptr)
    emit_kernel(name, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                static_cast<uint32_t>(shared), reinterpret_cast<uint64_t>(stream));
  RuntimeLaunchScope scope(name != nullptr);
  return real(function, grid, block, args, shared, stream);
}
}  // namespace

cudaError_t on_cudaLaunchKernel(const void* function, dim3 grid, dim3 block, void** args,
                                size_t shared, cudaStream_t stream) {
  return runtime_launch(real_cudaLaunchKernel(), function, grid, block, args, shared, stream);
}

cudaError_t on_cudaLaunchKernel_ptsz(const void* function, dim3 grid, dim3 block, void** args,
                                     size_t shared, cudaStream_t stream) {
  return runtime_launch(real_cudaLaunchKernel_ptsz(), function, grid, block, args, shared, stream);
}

// ---- NVRTC ----------------------------------------------------------------------------------
nvrtcResult on_nvrtcCreateProgram(nvrtcProgram* program, const char* source, const char* name,
                                  int n_headers, const char* const* headers,
                                  const char* const* include_names) {
  auto real = real_nvrtcCreateProgram();
  if (real == nullptr) return NVRTC_ERROR_INTERNAL_ERROR;
  nvrtcResult result = real(program, source, name, n_headers, headers, include_names);
  if (result == NVRTC_SUCCESS && program != nullptr && gpu_enabled()) {
    g_nvrtc_programs.insert(*program, copy_name(name != nullptr ? name : "default_program"));
    // The source is what was asked for; the compiled PTX/CUBIN follow when fetched.
    if (source != nullptr)
      emit_module("nvrtc", name != nullptr ? name : "default_program", source, strlen(source) + 1,
                  false);
  }
  return result;
}

nvrtcResult on_nvrtcCompileProgram(nvrtcProgram program, int n_options,
                                   const char* const* options) {
  auto real = real_nvrtcCompileProgram();
  if (real == nullptr) return NVRTC_ERROR_INTERNAL_ERROR;
  return real(program, n_options, options);
}

nvrtcResult on_nvrtcGetPTX(nvrtcProgram program, char* ptx) {
  auto real = real_nvrtcGetPTX();
  if (real == nullptr) return NVRTC_ERROR_INTERNAL_ERROR;
  nvrtcResult result = real(program, ptx);
  if (result == NVRTC_SUCCESS && ptx != nullptr && gpu_enabled()) {
    const char* name = g_nvrtc_programs.find(program);
    emit_module("ptx", name != nullptr ? name : "", ptx, strlen(ptx) + 1, false);
  }
  return result;
}

nvrtcResult on_nvrtcGetCUBIN(nvrtcProgram program, char* cubin) {
  auto real = real_nvrtcGetCUBIN();
  if (real == nullptr) return NVRTC_ERROR_INTERNAL_ERROR;
  nvrtcResult result = real(program, cubin);
  if (result == NVRTC_SUCCESS && cubin != nullptr && gpu_enabled()) {
    size_t size = 0;
    if (auto get_size = reinterpret_cast<nvrtcResult (*)(nvrtcProgram, size_t*)>(
            sibling(reinterpret_cast<void*>(real), "nvrtcGetCUBINSize"))) {
      if (get_size(program, &size) != NVRTC_SUCCESS) size = 0;
    }
    if (size == 0) {
      const char* kind;
      size = image_size(cubin, &kind);
    }
    const char* name = g_nvrtc_programs.find(program);
    emit_module("cubin", name != nullptr ? name : "", cubin, size, false);
  }
  return result;
}

// ---- Graph capture ----------------------------------------------------------------------------
#define TDBG_CAPTURE_BEGIN(name, params, args)                          \
  CUresult on_##name params {                                          \
    auto real = real_##name();                                         \
    if (real == nullptr) return no_cuda(#name);                        \
    return count_capture_begin(real args);                             \
  }
#define TDBG_CAPTURE_END(name)                                         \
  CUresult on_##name(CUstream stream, CUgraph* graph) {                \
    auto real = real_##name();                                         \
    if (real == nullptr) return no_cuda(#name);                        \
    return count_capture_end(real(stream, graph));                     \
  }
TDBG_CAPTURE_BEGIN(cuStreamBeginCapture, (CUstream s, CUstreamCaptureMode m), (s, m))
TDBG_CAPTURE_BEGIN(cuStreamBeginCapture_ptsz, (CUstream s, CUstreamCaptureMode m), (s, m))
TDBG_CAPTURE_BEGIN(cuStreamBeginCapture_v2, (CUstream s, CUstreamCaptureMode m), (s, m))
TDBG_CAPTURE_BEGIN(cuStreamBeginCapture_v2_ptsz, (CUstream s, CUstreamCaptureMode m), (s, m))
TDBG_CAPTURE_BEGIN(cuStreamBeginCaptureToGraph,
                   (CUstream s, CUgraph g, const CUgraphNode* d, const CUgraphEdgeData* e,
                    size_t n, CUstreamCaptureMode m),
                   (s, g, d, e, n, m))
TDBG_CAPTURE_BEGIN(cuStreamBeginCaptureToGraph_ptsz,
                   (CUstream s, CUgraph g, const CUgraphNode* d, const CUgraphEdgeData* e,
                    size_t n, CUstreamCaptureMode m),
                   (s, g, d, e, n, m))
TDBG_CAPTURE_END(cuStreamEndCapture)
TDBG_CAPTURE_END(cuStreamEndCapture_ptsz)
#undef TDBG_CAPTURE_BEGIN
#undef TDBG_CAPTURE_END

}  // namespace tdbg::preload

extern "C" __attribute__((visibility("default"))) int tdbg_preload_gpu_capturing(void) {
  using namespace tdbg::preload;
  if (!gpu_enabled()) return -1;
  return g_captures.load(std::memory_order_acquire) > 0 ? 1 : 0;
}

// ---- The sink ABI (interpose/preload_api.h) ---------------------------------------------------
extern "C" __attribute__((visibility("default"))) void tdbg_preload_set_gpu_sink(
    const struct tdbg_gpu_sink* sink) {
  using namespace tdbg::preload;
  pthread_mutex_lock(&g_pending_mutex);
  if (sink == nullptr) {
    g_sink.store(nullptr, std::memory_order_release);
    pthread_mutex_unlock(&g_pending_mutex);
    return;
  }
  // Two slots: a caller still reading the previous sink keeps valid memory.
  tdbg_gpu_sink* slot = &g_sink_slots[g_sink_next_slot];
  g_sink_next_slot ^= 1;
  *slot = *sink;
  for (int i = 0; i < g_pending_module_count; ++i) {
    PendingModule& m = g_pending_modules[i];
    if (slot->on_module != nullptr)
      slot->on_module(slot->ctx, m.kind, m.name != nullptr ? m.name : "", m.image, m.size);
    free(m.name);
    if (m.owns_image) free(const_cast<void*>(m.image));
  }
  for (int i = 0; i < g_pending_kernel_count; ++i) {
    PendingKernel& k = g_pending_kernels[i];
    if (slot->on_kernel != nullptr)
      slot->on_kernel(slot->ctx, k.name, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1],
                      k.block[2], k.shared, k.stream);
    free(k.name);
  }
  size_t dropped = g_dropped;
  g_pending_module_count = g_pending_kernel_count = 0;
  g_pending_image_bytes = 0;
  g_dropped = 0;
  g_modules_full.store(false);
  g_kernels_full.store(false);
  g_sink.store(slot, std::memory_order_release);
  pthread_mutex_unlock(&g_pending_mutex);
  if (dropped != 0)
    say_once(&g_said_dropped, "%zu GPU events from before recording started were not kept",
             dropped);
}
