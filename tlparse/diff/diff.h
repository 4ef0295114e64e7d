// Public API of the diff engine: first divergence between two runs, first non-finite value
// in one run. The JSON shapes are the `--json` outputs of `tdbg diff` and `tdbg nan`
// (documented in docs/cli.md); `tdbg report` and `tdbg bundle` embed the same objects.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "tracer/reader.h"

namespace tdbg::diff {

// One step of the alignment `compare_runs` walks from the first divergence on, in the thread
// pair it names, for a caller that draws it (the report's difference curve).
struct AlignedStep {
  // A pair of ops compared op for op: both set. `differs`: their comparison found a
  // difference; `crossed`: unrelated work paired across the change (a forward op and an op
  // autograd ran), which counts as changed structure.
  const tracer::OpRecord* a = nullptr;
  const tracer::OpRecord* b = nullptr;
  bool differs = false;
  bool crossed = false;
  // A structural change (neither op set): the `a_ops` ops of A it removes, from A's seq
  // `a_first_seq` to `a_last_seq`, and the `b_ops` ops of B it inserts. With no A op removed,
  // both seqs are of the A op right after the change (the last one at the end of the thread).
  int64_t a_first_seq = tracer::kNoSeq, a_last_seq = tracer::kNoSeq;
  int64_t a_ops = 0, b_ops = 0;
  // Likewise B's: the ops it inserts, or the B op after a removal; and the thread of each side.
  int64_t b_first_seq = tracer::kNoSeq, b_last_seq = tracer::kNoSeq;
  uint32_t a_thread = 0, b_thread = 0;
  // The first step of a divergence's walk: the steps before were of a divergence found, later,
  // not to be the first (another process's); drop them.
  bool restart = false;
};

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
  // Pairs A's optimizer step `first` with B's step `second` and compares each thread from
  // there (ops before them are left out): a run resumed from a checkpoint counts its steps
  // from 0 again. {-1, -1}: from the start (or from the first step both hold, for runs
  // recorded with other --steps windows).
  std::pair<int64_t, int64_t> align_steps = {-1, -1};
  // Called with each step of the walk after the first divergence, as far as `scan_limit`.
  std::function<void(const AlignedStep&)> on_aligned;
};

// For --align-steps: where `run` holds a training and its resumptions as sibling processes
// that ran one after the other (phases), keeps only the phase that resumed at step
// `resumed_at` (the optimizer steps the earlier phases ran together; the last phase where
// none matches) and the processes it started. Returns a note naming the phase kept, or ""
// (and leaves `run` as it was) where the run has no phases.
std::string keep_resumed_phase(tracer::Run& run, int64_t resumed_at);

// Where `*align_steps` is unset ({-1, -1}): whether one run resumes the other's training from
// a checkpoint, told by its values (resume.cc): it begins by copying in tensors that the other
// held after its optimizer step K. Then sets `*align_steps` to K:0 (or 0:K) and returns a note
// that says so; "" otherwise.
std::string guess_resumed_steps(const tracer::Run& a, const tracer::Run& b,
                                std::pair<int64_t, int64_t>* align_steps);

// `guess_resumed_steps` where `*align_steps` is unset; then, for K:0 (or 0:K),
// `keep_resumed_phase` on the run that counts from 0 again. Returns the notes to show with
// the diff ("B: compared the phase ..."), none without a guess or phases.
std::vector<std::string> keep_aligned_phases(tracer::Run& a, tracer::Run& b,
                                             std::pair<int64_t, int64_t>* align_steps);

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
  // In a process that counts no steps (a DataLoader worker, all of whose ops are step 0):
  // starts at ops from this time on (CLOCK_MONOTONIC ns), where from_step begins in the
  // processes that count steps; -1: by step. `first_nonfinite` sets it.
  int64_t from_ns = -1;
};

// {"status": "finite"|"nonfinite", "first_nonfinite": null | {...}} as documented.
StatusOr<nlohmann::json> first_nonfinite(const tracer::Run& run,
                                         const NonfiniteOptions& options = {});

// The ops holding NaN or Inf that a "finite" `first_nonfinite` result passed over as no start
// (explained by their inputs or arguments, skipped before --from-step, ignored by --nan-only,
// or contained); 0 where no op holds any.
int64_t nonfinite_passed_over(const nlohmann::json& result);

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
// Why a run holds no op, where its recording selected some: "its recording selected none
// (--steps 30:40; steps count torch.optim optimizer steps)"; "" for a run of every op.
std::string selected_none(const tracer::Run& run);

// The first step of the --steps window `r` was recorded with (0 for ":B"), or -1 when it
// recorded every step.
int64_t window_first_step(const tracer::Reader& r);

// What the headline of `tdbg diff` adds after a first divergence `d` ("; healed: ...", "; the
// values stay the same to the end (work, not results)", "; the optimizer's updates agree at
// rounding level ..."), or "".
std::string headline_verdict(const nlohmann::json& d);

// Human-readable renderings of the two objects above, as `tdbg diff` and `tdbg nan` print
// them: the answer ("where, and why") in the first lines, then the details.
std::string format_divergence(const nlohmann::json& result);

// The first step at which the program reads a value that differs into Python, by a
// divergence's growth (`read_out`: `.item()` of another value), or "".
std::string first_read_out_step(const nlohmann::json& divergence);
std::string format_nonfinite(const nlohmann::json& result);

// Puts the cause `format_nonfinite` prints ("log(0) = -inf: input min 0", its "cause:" line
// and the lines that continue it) into `result`'s first_nonfinite as "cause", for scripts
// that read the JSON; nothing where there is no first non-finite op or no cause line.
void add_nonfinite_cause(nlohmann::json& result);

}  // namespace tdbg::diff
