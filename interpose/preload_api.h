// The C ABI between libtdbg_preload.so (no torch dependency; sees dlopen and the CUDA
// driver/runtime/NVRTC calls) and libtdbg_torch.so (the dispatch hook, which owns the run
// database). The torch hook finds `tdbg_preload_set_gpu_sink` with dlsym(RTLD_DEFAULT) and
// registers where GPU events and C++ optimizer steps go; without the preload it simply is not
// found.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tdbg_gpu_sink {
  // A compiled module was loaded or built: kind is "cubin", "fatbin", "ptx" or "nvrtc".
  void (*on_module)(void* ctx, const char* kind, const char* name, const void* image, size_t size);
  // A kernel was launched on `stream`.
  void (*on_kernel)(void* ctx, const char* name, uint32_t grid_x, uint32_t grid_y, uint32_t grid_z,
                    uint32_t block_x, uint32_t block_y, uint32_t block_z, uint32_t shared_mem,
                    uint64_t stream);
  void* ctx;
};

// Exported by libtdbg_preload.so. Events before a sink is set are kept (bounded) and replayed
// to it; NULL detaches (e.g. at exit). Thread-safe.
void tdbg_preload_set_gpu_sink(const struct tdbg_gpu_sink* sink);

// Exported by libtdbg_preload.so when it was built with CUDA's headers: 1 while any stream of
// the process captures a CUDA graph (begun and not yet ended, through the driver, which the
// CUDA runtime also goes through), 0 otherwise, and -1 when GPU interception is off
// (TDBG_GPU=0), so that captures cannot be seen. While a capture runs, nothing may
// synchronize with the GPU: the torch hook does not copy GPU tensors to the host then.
int tdbg_preload_gpu_capturing(void);

// Exported by libtdbg_preload.so: how this process is ending, when it is (it exits with a
// status, returns from main, or kills itself with a signal): sets `*status` (an exit code) or
// `*signal` and returns 1; 0 while not known.
int tdbg_preload_exit_status(int* status, int* signal);

// Exported by libtdbg_preload.so; called by the torch hook when it opens this process's
// database. Where a terminating signal (SIGTERM, SIGHUP, a segfault, ...) is left at its
// default action, the recording is closed before the signal ends the process, which then
// ends as it would have (interpose/ending_signals.cc). Once per process; thread-safe.
void tdbg_preload_watch_signals(void);

// Exported by libtdbg_preload.so: runs `read(arg)` on this thread, returning 0 when it
// completes, or -1 when it touched memory that cannot be read (SIGSEGV or SIGBUS: a file
// mapping past a truncated file's end, unmapped memory) and was abandoned there. For reading
// memory that torch did not allocate and the program may never read (a tensor over a NumPy
// memmap): the read must take no lock and allocate nothing it would leak. Without tdbg's
// fault handlers (the program installed its own), `read` runs unguarded.
int tdbg_preload_guarded_read(void (*read)(void*), void* arg);

// Exported by libtdbg_preload.so: `keep` 1 keeps `fd` (one of the run database's) open when
// the program closes descriptors it did not open (close, close_range, closefrom: os.closerange
// in daemonizing code), which then report success; 0 lets it close again, before the database
// closes its files itself. At most 16 at once. Forgotten in a forked child, which has its own
// database. Thread- and async-signal-safe.
void tdbg_preload_keep_fd(int fd, int keep);

// Steps of libtorch's C++ optimizers (torch::optim::SGD::step, Adam, AdamW, LBFGS, Adagrad,
// RMSprop), which open no record-function range: called on the stepping thread before and
// after the real step; `optimizer` is a static string such as "SGD", `self` the optimizer
// object (its identity tells several optimizers apart).
struct tdbg_step_sink {
  void (*on_step_begin)(void* ctx, const char* optimizer, const void* self);
  void (*on_step_end)(void* ctx, const char* optimizer);
  void* ctx;
};

// Exported by libtdbg_preload.so. NULL detaches. Thread-safe; steps before a sink is set are
// not counted (a C++ program's hook is installed before main).
void tdbg_preload_set_step_sink(const struct tdbg_step_sink* sink);

#ifdef __cplusplus
}
#endif
