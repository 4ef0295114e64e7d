// The C ABI of libtdbg_torch.so (the dispatch hook): what the Python module hooks it injects
// call through ctypes, and what libtdbg_preload.so may call with dlsym(RTLD_DEFAULT) (e.g. from
// an `_exit` hook, where no atexit handler runs). All functions are safe to call at any time,
// from any thread, before or after recording started; none of them throws.
#pragma once

#include <stdint.h>

#if defined(__GNUC__)
#define TDBG_TORCH_API __attribute__((visibility("default")))
#else
#define TDBG_TORCH_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

// Returns a small id for an nn.Module path ("TinyLM.blocks.1.attn"); the same id for the
// same text for the life of the process (across fork). 0 means "no module".
TDBG_TORCH_API uint32_t tdbg_torch_module_id(const char* path);

// Sets the nn.Module path (an id from `tdbg_torch_module_id`, 0 for none) of the ops this
// thread runs from now on, and the Python frame of that module's call (its `_call_impl`):
// once an op's stack no longer holds that frame, the call has ended (a forward that raised
// runs no post hook) and the ops are in no module. Called by the injected forward hooks.
TDBG_TORCH_API void tdbg_torch_set_module(uint32_t id, const void* call_frame);

// Enters (+1) or leaves (-1) the rebuilding of a tensor received from another process on this
// thread: ops run meanwhile are not recorded. Called by the injected wrappers of
// torch.multiprocessing.reductions' rebuild_* functions.
TDBG_TORCH_API void tdbg_torch_ipc(int delta);

// Reads torch's thread counts for the run's metadata now. Called by the injected wrappers of
// torch.set_num_threads and torch.set_num_interop_threads, after they set them.
TDBG_TORCH_API void tdbg_torch_note_threads(void);

// Flushes everything recorded so far and closes the run database (writing `end_time_ns`).
// Idempotent; ops after it are not recorded. For exits that skip atexit handlers.
TDBG_TORCH_API void tdbg_torch_shutdown(void);

// Like `tdbg_torch_shutdown` for a process a signal is about to end: commits everything
// recorded and the end metadata without the close's WAL checkpoint (a database left in WAL
// mode, as after a kill, with nothing lost). Idempotent; ops after it are not recorded.
TDBG_TORCH_API void tdbg_torch_finish(void);

// For a process a fault is ending (called before `tdbg_torch_finish`): writes the ops that
// thread `tid`, stopped in the fault's handler, is still inside, flagged unfinished, with the
// ops nested in them so far. Nothing when the thread stopped inside the hook itself.
TDBG_TORCH_API void tdbg_torch_write_unfinished(int tid);

// 1 while this process records into a database, else 0.
TDBG_TORCH_API int tdbg_torch_recording(void);

#ifdef __cplusplus
}
#endif
