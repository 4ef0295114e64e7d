// Public API of the run-database reader: what the CLI (diff, nan, show, report, bundle)
// uses. Streaming: a run is never loaded whole into memory. A run is a directory of
// `*.sqlite` databases, one per recorded process, or a single database file.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "tracer/records.h"

namespace tdbg::tracer {

// One recorded process.
class Reader {
 public:
  // Opens `path` read-only. Errors are one line naming the file and the problem: not a
  // SQLite file, not a tdbg database, truncated/corrupt, or a newer schema version.
  static StatusOr<std::unique_ptr<Reader>> Open(const std::string& path);
  virtual ~Reader() = default;

  virtual const std::string& path() const = 0;
  virtual int schema_version() const = 0;

  // Run metadata (`meta` table); empty string when absent.
  virtual std::string meta(const std::string& key) const = 0;
  virtual std::vector<std::pair<std::string, std::string>> all_meta() const = 0;

  virtual std::vector<ThreadRecord> threads() const = 0;
  // Counts the ops (O(ops): about a second for 10^7; cached for a finished database).
  virtual int64_t op_count() const = 0;
  virtual int64_t op_count(uint32_t thread) const = 0;
  // Whether the database holds any op: one index probe (op_count reads every block's row).
  virtual bool any_op() const = 0;
  // What the database holds of its process's ops: the first and last seq, and whether some
  // thread's ops begin after that thread's first op (a --ring dropped the earlier ones, or a
  // bundle trimmed them). `any` is false for a database without ops.
  struct Held {
    bool any = false;
    int64_t first_seq = 0, last_seq = -1;
    bool dropped_start = false;
  };
  virtual StatusOr<Held> held() const = 0;

  // Interned strings and frames; "" / nullopt for unknown ids.
  virtual std::string string(StringId id) const = 0;
  virtual std::optional<FrameRecord> frame(FrameId id) const = 0;
  // The first failed lookup of a string or frame id that a record holds (an id the database
  // does not resolve: it is corrupt), as a "corrupt database" error; ok when none failed. The
  // lookups above answer ""/nullopt and go on, so a tool checks this before it prints an
  // answer made of their texts (an op with an empty name is a wrong answer, not an answer).
  virtual Status lookup_status() const = 0;
  // Reads every op block and checks it: SQLite's pages on the way and each block's checksum
  // (docs/schema.md, "Op blocks"). O(file size). A lookup reads only the blocks it needs, so
  // a tool that answers from a few (diff's bisection) calls this before it vouches for the
  // rest (two runs called identical). The error names the ops of the damaged block.
  virtual Status verify() const = 0;
  // From now until the reader is closed, every read sees the database as it is now, whatever a
  // live writer commits later: one consistent state for a tool that reads it many times over
  // (a bundle: its report, its diff and its copy agree). A writer's log then grows until the
  // reader closes.
  virtual Status pin_snapshot() = 0;
  // The stack ending at `innermost`, outermost frame first (innermost last).
  virtual std::vector<FrameRecord> stack(FrameId innermost) const = 0;

  // One op by process-wide seq, or by (thread, tidx), with its tensors and args filled in.
  virtual std::optional<OpRecord> op(int64_t seq) const = 0;
  virtual std::optional<OpRecord> op_at(uint32_t thread, int64_t tidx) const = 0;
  // Just the chain hash of (thread, tidx): cheap, for bisection.
  virtual std::optional<uint64_t> chain_at(uint32_t thread, int64_t tidx) const = 0;

  // Streams ops in order. `thread` = nullopt for all threads in seq order, else that thread's
  // ops with tidx in [from, to). With `with_tensors` false, `tensors` and `args` stay empty
  // (much faster). `visit` returns false to stop early. Returns an error on a corrupt file.
  // With `thread` = nullopt, [from, to) is a range of seq. An op's `tensors` come inputs
  // first, then outputs, each by index; its `args` by index. A scan reads one snapshot (a
  // read transaction), so a live writer's later commits are not mixed in. A `Reader` is for
  // one thread at a time; `visit` may call the reader's other methods.
  virtual Status scan_ops(std::optional<uint32_t> thread, int64_t from, int64_t to,
                          bool with_tensors,
                          const std::function<bool(const OpRecord&)>& visit) const = 0;

  virtual std::vector<RegionRecord> regions() const = 0;
  virtual std::vector<ModuleRecord> modules() const = 0;
  virtual std::vector<KernelRecord> kernels(std::optional<int64_t> op = std::nullopt) const = 0;

  // Runs a read-only SQL query for tools (report statistics); each row as strings, SQL NULL
  // as "". The views of docs/schema.md (`op_view`, `tensor_view`, ...) decode stored values.
  virtual Status query(const std::string& sql,
                       const std::function<bool(const std::vector<std::string>&)>& row) const = 0;
};

// What a run directory holds: one `*.sqlite` database per recorded process (not the "-wal" and
// "-shm" companions, which end otherwise), and the manifest `tdbg record` writes beside them
// (the command line, times and exit status). Either makes a directory a run directory.
constexpr const char* kRunManifest = "tdbg-run.json";

inline bool IsRunDatabaseName(const std::string& name) {
  return name.size() > 7 && name.compare(name.size() - 7, 7, ".sqlite") == 0;
}

// The manifest of the run at `run_path` (a run directory, or a database in one), or null
// where there is none or it does not parse.
nlohmann::json ReadRunManifest(const std::string& run_path);

// The pid of a `tdbg record` still running into the run directory `dir` (its manifest has no
// exit status yet and names a recorder that is alive and is `tdbg record`), else 0. Not this
// process.
pid_t LiveRecorder(const std::string& dir);

// A run: the databases of its processes, in a canonical order that two runs of the same
// program share: by torch.distributed rank (meta `rank`; children inherit their parent's),
// then depth in the process tree, then start time and pid.
struct Run {
  std::string path;
  std::vector<std::unique_ptr<Reader>> processes;
  // One line per database of the directory that was left out because nothing was ever
  // committed to it (a process killed while its database was being created).
  std::vector<std::string> skipped;
  // Opened from one database file, not a directory: the user picked one process.
  bool one_database = false;
  // For each process, its number in the canonical order of Open (`tdbg show --process`),
  // kept when PairProcesses reorders them.
  std::vector<size_t> shown_index;
  size_t shown(size_t p) const { return p < shown_index.size() ? shown_index[p] : p; }
  // Parents by pid where the process tree misleads: a process whose recorded parent began
  // recording only after it ended (`bash -c "train && resume"` runs the last command in the
  // shell's own process, the parent of the first) is taken as its parent's sibling, an
  // earlier phase: pid -> the parent pid it is taken to have.
  std::unordered_map<int64_t, int64_t> phase_parent;
  // The parent pid of process `p` as the run's phases read (meta `ppid` but for those).
  std::string ppid(size_t p) const;

  // Opens a run directory (every `*.sqlite` in it) or a single database file. An empty
  // directory or a directory with no database is an error, as is a database that cannot be
  // read, except one with nothing committed in a directory that holds others (`skipped`).
  static StatusOr<Run> Open(const std::string& path);

  // The first failed lookup of any of its databases (Reader::lookup_status): a tool checks it
  // before it hands out what it read (a report, a trace, a bundle), which would otherwise
  // show ops without names or stacks as if recorded so.
  Status lookup_status() const;

  // Pins every database at its state now (Reader::pin_snapshot): a tool that reads a run many
  // times over (a report, a trace, a bundle) then tells of one moment of a run still recording.
  Status pin_snapshot();
};

// Puts the processes of two runs in an order where the same index is the same process of the
// program in each: processes pair by torch.distributed rank (their own or their nearest
// recorded ancestor's) and DataLoader worker id, and among those alike in both in canonical
// order (depth in the process tree, then start: worker 1 of a DataLoader's second epoch with
// worker 1 of the other run's second epoch). Where one run has more processes alike, processes that hold
// no op (an mp.spawn parent, a launcher that only imported torch) are the ones left unpaired.
// Unpaired processes go last. Runs whose processes already pair by index keep their order
// (and so their `tdbg show --process` numbers).
void PairProcesses(Run& a, Run& b);

}  // namespace tdbg::tracer
