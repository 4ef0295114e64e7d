// Public API of the run-database writer: what the interposer calls, from any thread, to
// record a process. Appends are cheap (a move into a buffer under a short lock); a background
// thread writes them to SQLite (WAL) in large transactions. See docs/schema.md for the
// tables and the crash-safety bound.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "tracer/records.h"

namespace tdbg::tracer {

struct WriterOptions {
  // Longest time between a record being appended and it being durable against a SIGKILL of
  // the process (committed to the WAL). Also the background thread's commit period.
  int flush_interval_ms = 50;
  // When > 0, only the last `ring_ops` ops (with their tensors and args) are kept: older ones
  // are deleted as new ones are committed. For long runs that crash after hours.
  int64_t ring_ops = 0;
  // Most ops buffered and not yet committed. An append that finds the buffer full waits until
  // the background thread takes it: this bounds memory and, with it, the time from append to
  // commit (the crash-safety bound) when ops come faster than SQLite can commit them.
  int64_t max_pending_ops = 65536;
};

class Writer {
 public:
  // Creates `path` (which must not exist) with the current schema.
  static StatusOr<std::unique_ptr<Writer>> Create(const std::string& path,
                                                  const WriterOptions& options = {});
  virtual ~Writer() = default;

  // Returns the id of `text`, the same id for the same text; thread-safe, never blocks on I/O.
  virtual StringId intern(std::string_view text) = 0;
  // Returns the id of the frame (`parent`, `file`, `line`, `function`); the same id for the
  // same four values. Thread-safe.
  virtual FrameId intern_frame(FrameId parent, StringId file, int32_t line, StringId function) = 0;

  virtual void set_meta(std::string_view key, std::string_view value) = 0;
  virtual void add_thread(const ThreadRecord& thread) = 0;
  virtual void append_op(OpRecord&& op) = 0;
  // Appends copies of `ops[0..count)` in order, taking the lock once. The records are left as
  // they were, for the caller to reuse: once warm, appending allocates nothing.
  virtual void append_ops(OpRecord* ops, size_t count) = 0;
  // Regions are appended when they close (or with end_seq = kNoSeq at close of the database).
  virtual void append_region(const RegionRecord& region) = 0;
  virtual void append_module(const ModuleRecord& module) = 0;
  virtual void append_kernel(const KernelRecord& kernel) = 0;

  // Blocks until everything appended so far is committed.
  virtual Status flush() = 0;
  // Flushes, stops the background thread and closes the database. Idempotent.
  virtual Status close() = 0;

  // Call in the child right after fork(): forgets the parent's connection and buffers without
  // touching them (no SQLite call on an inherited handle), leaving a closed writer.
  virtual void abandon_after_fork() = 0;

  // Fork safety, for the interposer's pthread_atfork handlers. `prepare_fork` (atfork
  // "prepare") waits until the background thread is outside SQLite and takes the writer's
  // locks, so that the child never inherits a lock (of tdbg or of SQLite) held by a thread
  // that does not exist in it; `after_fork_parent` (atfork "parent") releases them. In the
  // child, call `abandon_after_fork` as before (it neither takes nor releases those locks).
  // Without these calls a fork while the background thread commits can leave SQLite's global
  // mutexes locked in the child, and the child's own `Writer::Create` may then hang.
  // Gives back the space kept in reserve for a full disk (the `<path>-reserve` file), as
  // close() does: for a process that ends with a flush and no close (a signal).
  virtual void release_reserve() {}
  virtual void prepare_fork() {}
  virtual void after_fork_parent() {}

  // Counters for tests and benchmarks; cheap, thread-safe.
  struct Stats {
    int64_t ops_committed = 0;   // ops written by committed transactions
    int64_t commits = 0;         // transactions committed
    int64_t max_commit_us = 0;   // longest commit, microseconds
    int64_t commit_cpu_us = 0;   // CPU time the background thread spent committing
    int64_t errors = 0;          // records that could not be written (the first error is sticky)
  };
  virtual Stats stats() const { return {}; }

  // Records appended so far (ops, metadata, threads, regions, ...), and how many of the first
  // of them a commit has dealt with (written, or lost to an error). A flush asked for when
  // `appended()` was N has committed once `committed_through()` reaches N, even if the
  // writer's thread has not returned (in a process that broke its heap, freeing memory after
  // the commit can block forever). Lock-free: safe to call while the writer is stuck.
  virtual int64_t appended() const { return 0; }
  virtual int64_t committed_through() const { return 0; }
};

}  // namespace tdbg::tracer
