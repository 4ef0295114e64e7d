// Internals of libtdbg_preload.so shared by its files: the hook table as C++ declarations
// (`on_<name>` handlers, `real_<name>()` accessors) and the few services the hooks use.
// Nothing here is visible outside the library (it is built with hidden visibility and a
// version script).
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef TDBG_PRELOAD_GPU
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>
#endif

extern "C" {
typedef int (*tdbg_main_fn)(int, char**, char**);
}

namespace tdbg::preload {

enum HookId : int {
#define HOOK(ret, name, params, args, versions) kHook_##name,
#define HOOK_FRONT HOOK
#include "interpose/hooks.inc"
#undef HOOK
#undef HOOK_FRONT
  kHookCount
};

// The real (next) definition of hook `id`, resolved on first use; nullptr if none exists
// (e.g. a CUDA function in a process without CUDA). Never tdbg's own wrapper.
void* resolve_real(HookId id);

// Stores a real definition handed out by a loader API (dlsym on a handle, cuGetProcAddress)
// for hook `id`, unless it is tdbg's own wrapper. Returns false if it was tdbg's own.
bool remember_real(HookId id, void* function);

// The exported wrapper of hook `id` (its address as seen by the host).
void* wrapper_of(HookId id);

// The hook id for an exported name, or kHookCount when `name` is not hooked.
HookId hook_by_name(const char* name);

#define HOOK(ret, name, params, args, versions)                     \
  using name##_fn = ret(*) params;                                  \
  inline name##_fn real_##name() {                                  \
    return reinterpret_cast<name##_fn>(resolve_real(kHook_##name)); \
  }                                                                 \
  ret on_##name params;
#define HOOK_FRONT HOOK
#include "interpose/hooks.inc"
#undef HOOK
#undef HOOK_FRONT

// kept_fds.cc: forgets the descriptors kept open (a forked child's database is its own).
void forget_kept_fds();

// Prints "tdbg: <message>" on stderr once per `flag` (async-signal-safe, no allocation).
void say_once(int* flag, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Closes this process's recording (flushes and closes the torch hook's database), first
// noting how the process ends: `kind` 1 an exit code, 2 a signal (`value`), 0 notes nothing.
// Nothing in a process that does not record.
void close_recording(int kind, int value);
// For a process that signal `signal` is about to end: commits what was recorded and the end
// metadata without closing the database (no WAL checkpoint to wait for). For a fault,
// `faulting_tid` is the thread it stopped (waiting in the handler): the ops it was still
// inside are written first, marked unfinished.
void finish_recording(int signal, int faulting_tid = 0);

// ending_signals.cc: starts the watcher that closes the recording before a terminating signal
// ends the process, and installs its handlers where signals are left at their default action.
// Once per process; called by the torch hook when it opens a database.
void watch_ending_signals();
// In a fork child: the parent's watcher thread is gone, its pipes are the parent's.
void forget_watcher_after_fork();
// For `_exit(status)`: has the watcher close the recording and waits for it, at most
// `wait_ms`. False (nothing done) when this process has no watcher. `_exit` is often called
// from a signal handler (torch's DataLoader worker ends so on SIGTERM) that may have
// interrupted this thread inside malloc or SQLite; closing on this thread would then wait on
// itself forever, while the watcher waits at most `wait_ms`.
bool close_on_watcher(int status, int wait_ms);
// For a fault signal about to take its default action without tdbg's handler (a program's
// own handler that raises it again): the watcher writes the ops this thread is inside,
// flagged unfinished, and commits, as for tdbg's handler; waits for it (bounded). False when
// this process has no watcher.
bool finish_before_fault(int sig);
// Whether tdbg's handler is what `sig` does now.
bool ending_handler_installed(int sig);
// For a request to end (not a fault) that the program sends itself while tdbg's handler
// takes it: closes the recording now, on the sending thread, and puts the default action
// back, so that the signal ends the process at once, as without tdbg (no thread runs on
// while the watcher closes). False, doing nothing, for a fault or another handler.
bool end_before_own_request(int sig);

// Whether GPU events are wanted (TDBG_GPU), read once at load.
bool gpu_enabled();

// The real dlsym (tdbg's own is interposed), for lookups in a known library.
using dlsym_fn = void* (*)(void*, const char*);
dlsym_fn real_dlsym_fn();

}  // namespace tdbg::preload
