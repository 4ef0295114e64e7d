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
};

}  // namespace tdbg::tracer
