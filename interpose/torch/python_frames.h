// The Python side of the hook, through the CPython API resolved at run time (no compile-time
// dependency on Python): the source stack of an op, the user's frame, and the injected
// nn.Module forward hooks that report the module path. Internal to interpose/torch/.
#pragma once

#include <cstdint>
#include <string>

#include "tracer/records.h"

namespace tdbg::torchhook {

// "3.11.2 (main, ...)" when the process has a Python interpreter, else "".
std::string python_version();

// Starts noting the files the program opens for reading (meta `read:<path>`: size,
// modification time, and the hash of files up to 64 MiB) through Python's audit hooks: once, where this thread holds the GIL
// (`import torch` loading the hook) or later when the module hooks are installed. Nothing in
// a process without Python.
void watch_files_read();

// True when this thread can have a Python stack: Python is loaded and initialized, not
// finalizing, and this thread has a Python thread state. Cheap after the first call.
bool thread_has_python();

// The code object of this thread's innermost Python frame (an identity, not to be used), or
// nullptr; takes the GIL for the read. Call only when `thread_has_python()`.
const void* python_innermost_code();

// Whether this thread holds the GIL with a Python exception set: a custom autograd Function
// whose Python forward raised ends its range normally, before the error propagates (torch
// returns NULL to Python rather than throwing). False without the GIL (it is never taken).
// Call only when `thread_has_python()`.
bool python_error_set();

// The identity of the optimizer whose `step` opened the record-function range starting now
// (the Python object torch's profiling wrapper got as `args[0]`), or 0 when not found. Takes
// the GIL. Call only when `thread_has_python()`.
uintptr_t python_optimizer_identity();

// The settings of the Python optimizer `identity` (from `python_optimizer_identity`, while it
// steps) as a JSON object: its class, `index` (which of the process's optimizers, 1 for the
// first to step) and each param group's hyperparameters (numbers, bools, strings, tuples of
// numbers) with its parameter count. "" where they cannot be read. Runs no torch op.
std::string python_optimizer_settings(uintptr_t identity, int index);

struct SourceLocation {
  tracer::FrameId stack = 0;       // innermost frame
  tracer::FrameId user_frame = 0;  // innermost frame outside torch and the standard library
  // `user_frame` runs inside torch's (or the standard library's) code: the program's code
  // called back from torch, as in a backward pass (a hook, checkpointing's recomputation).
  bool user_inside_library = false;
};

// Captures the current thread's Python stack into interned frames of the current writer,
// taking the GIL for the duration (PyGILState_Ensure). Also injects the Python hooks once
// torch is fully imported (the module path hooks only `with_module_hooks`).
// Call only when `thread_has_python()`.
SourceLocation capture_python_stack(bool want_stack, bool with_module_hooks);

// The interned writer string of a module path id (from `tdbg_torch_module_id`), 0 for none.
tracer::StringId module_string(uint32_t module_id);

// The module path id the current thread runs in (set by the injected hooks).
uint32_t current_module_id();

// "RANK/WORLD_SIZE" of this process in torch.distributed's default process group when one is
// initialized (however it was launched: torchrun, mp.spawn, by hand), else "". Takes the GIL;
// call only when `thread_has_python()`. Never imports anything.
std::string distributed_rank();

// "ID/NUM_WORKERS" when this process is a torch DataLoader worker, else "". Takes the GIL;
// call only when `thread_has_python()`. Never imports anything.
std::string dataloader_worker();

// True while the thread rebuilds a tensor received from another process (inside
// torch.multiprocessing.reductions' rebuild_* functions, which the injected hooks wrap).
bool in_ipc_rebuild();

// Forgets every cache that holds ids of the current writer (called in a fork child).
void python_frames_after_fork_child();

}  // namespace tdbg::torchhook
