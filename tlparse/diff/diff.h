// Public API of the diff engine: first divergence between two runs, first non-finite value
// in one run. The JSON shapes are the `--json` outputs of `tdbg diff` and `tdbg nan`
// (documented in docs/cli.md); `tdbg report` and `tdbg bundle` embed the same objects.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "tracer/reader.h"

namespace tdbg::diff {

struct DiffOptions {
  int context_ops = 3;         // ops shown before and after the divergence on each side
  bool progress = false;       // progress bar on stderr (only when it is a terminal)
  // Ops compared after the first divergence, to measure how the difference grows and to find
  // the first value divergence after a structural change. -1 compares to the end of the run
  // (a full comparison); the cost is linear in this number, not in the run's length.
  int64_t scan_limit = 200000;
  // Structural changes (hunks) listed in the result; counting goes on past it.
  int max_hunks = 20;
  // Find the first differing op by bisection over the per-thread chain hash. False compares
  // every op from the start (slow; for benchmarks and for runs with untrustworthy chains).
  bool bisect = true;
};

// {"status": "identical"|"diverged", "first_divergence": null | {...}, ...} as documented.
// Extra keys (context, summaries, growth, structural changes) may be present.
StatusOr<nlohmann::json> compare_runs(const tracer::Run& a, const tracer::Run& b,
                                      const DiffOptions& options = {});

// Which non-finite values `first_nonfinite` looks for.
struct NonfiniteOptions {
  // NaN only: an Inf that the program makes and masks on purpose (`deg.pow(-0.5)` over zero
  // degrees, then `masked_fill(isinf, 0)`) is then not an answer; NaN made out of Inf still is.
  bool nan_only = false;
  // Starts at ops of this optimizer step or later (what earlier ops pass on is still tracked).
  int64_t from_step = 0;
};

// {"status": "finite"|"nonfinite", "first_nonfinite": null | {...}} as documented.
StatusOr<nlohmann::json> first_nonfinite(const tracer::Run& run,
                                         const NonfiniteOptions& options = {});

// How the recorded process of `r` ended, when not by a normal exit, with where its threads
// were: "was ended by signal 6 (SIGABRT) inside aten::addmm at train.cpp:40 (in aten::linear)"
// (the op a fault stopped a thread in), "... while thread 0 was inside aten::mm at x.py:3"
// (from the threads' accounts at the close), "exited with status 3", "did not close its
// database (...)"; "" for exit status 0.
std::string process_ending(const tracer::Reader& r);

// Whether the process that writes `r` still runs on this machine: it holds the database open
// (a run diffed while it is being recorded). Its pid alone could be another process by now.
bool still_recording(const tracer::Reader& r);

// "stopped being recorded at seq 23352 (step 287): cannot commit: database or disk is full;
// 92856 op(s) lost after it (the program went on)" when the recording of `r` lost its ops from
// some point on (meta `recording_lost`, written by a writer that could not write), else "".
std::string recording_lost(const tracer::Reader& r);

// What the recordings `readers` selected, as their flags ("--steps 5:9, --ops addmm|mean"),
// each flag once (the first reader's value that has it), or "" when they recorded everything:
// an op they left out may have made what no recorded op produced.
std::string recorded_selection(std::initializer_list<const tracer::Reader*> readers);

// The first step of the --steps window `r` was recorded with (0 for ":B"), or -1 when it
// recorded every step.
int64_t window_first_step(const tracer::Reader& r);

// Human-readable renderings of the two objects above, as `tdbg diff` and `tdbg nan` print
// them: the answer ("where, and why") in the first lines, then the details.
std::string format_divergence(const nlohmann::json& result);
std::string format_nonfinite(const nlohmann::json& result);

}  // namespace tdbg::diff
