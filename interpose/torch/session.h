// The recording session of one process inside libtdbg_torch.so: configuration, the run
// database writer (opened at load, reopened lazily in a fork child), run metadata, and a clean
// close at exit. Internal to interpose/torch/.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <regex>
#include <string>

#include "base/json_quote.h"

#include "interpose/config.h"
#include "tracer/writer.h"

namespace tdbg::torchhook {

enum class HashMode { kAll, kOutputs, kNone };

// What the configuration says, parsed once.
struct Settings {
  interpose::Config config;
  HashMode hash = HashMode::kAll;
  interpose::StepWindow steps;      // TDBG_STEPS window (every step where unset)
  // TDBG_OPS compiled (null: every op), once: a pattern that does not compile is said and
  // dropped when the settings are read.
  std::shared_ptr<const std::regex> op_filter;
};

const Settings& settings();

// True while this process records. Cheap (an atomic load).
bool recording();

// The writer of this process: opens `<out>/<host>-<pid>.sqlite` on first use in a fork child.
// Returns nullptr when not recording (no TDBG_OUT, open failed, or closed at exit).
tracer::Writer* writer();
// The writer when this process's database is open, else nullptr: never opens one.
tracer::Writer* open_writer();

// Bumped each time a new database is opened (after fork): interned ids of an older
// generation must not be used with the current writer.
uint64_t writer_generation();

// Called once from the library constructor: reads the configuration, opens the database,
// writes the start metadata, registers exit and fork handlers. Returns false when not recording.
bool session_start();

// Flushes and closes the database, writing the end metadata. Idempotent, never throws.
void session_shutdown();
// Like `session_shutdown` for a process about to be ended by a signal: commits everything and
// the end metadata, but leaves the database open in WAL mode (no checkpoint: SQLite folds the
// WAL in at the next open), so that the program is held up milliseconds, not a checkpoint.
void session_finish();

// Reads torch's intra-op and inter-op thread counts into the values written at close (meta
// `num_threads`, `num_interop_threads`, and each change of the first: `num_threads_history`).
// Only from a thread that is running ops: asking initializes torch's thread settings on the
// calling thread, and at exit that can deadlock in torch's thread pool (a program that set the
// count on its main thread and trained on another never exited).
void note_thread_counts();
// The training steps the program's main thread has completed (dispatch_hook.cc).
int64_t hook_main_step();
// Each seed the default CPU generator had at the recorded random ops when it changed,
// "SEED@SEQ" comma-separated (meta `seed_history`; dispatch_hook.cc).
std::string seed_history();

// Registers the global RecordFunction callback (dispatch_hook.cc).
void install_dispatch_hook();

// Tells libtdbg_preload.so to stop sending GPU events and C++ optimizer steps (at close).
void detach_gpu_sink();

// The fork handlers of the hook (locks it must hold across fork()), registered by the session.
void hook_prepare_fork();
void hook_after_fork_parent();
// Returns the training step the forking thread had reached: the child's count starts again
// from 0 (its ops run no optimizer of the parent's), and its database says where it came from.
int64_t hook_after_fork_child();
// For the close after a fault: writes the ops thread `tid` (stopped in the fault's handler) is
// still inside, with the ops nested in them so far, flagged `kOpUnfinished`. Nothing when it
// stopped inside the hook itself.
void hook_write_unfinished(int tid);
// At the close: the recorded ops each thread is inside, as the meta `in_flight` JSON
// (docs/schema.md), from each thread's own lock-free account; "" when no thread is inside one.
std::string hook_in_flight();

// Monotonic and wall clocks in nanoseconds.
int64_t monotonic_ns();
int64_t wall_ns();

using ::tdbg::json_quote;  // base/json_quote.h

// Prints "tdbg: <message>" on stderr unless quiet.
void say(const std::string& message);

}  // namespace tdbg::torchhook
