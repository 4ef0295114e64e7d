// Synthetic pairs of recorded runs for the report/view/export/bundle tests and benchmarks: a
// small training loop (linear/relu/loss forward, autograd backward on its own thread, optimizer
// updates) with stacks into a real `train.py`, kernels, regions and meta, where run B starts to
// differ at a chosen op and the difference then grows.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace tdbg::report::fixture {

struct FixtureOptions {
  int64_t ops = 600;            // ops per run (about 22 per step)
  int64_t diverge_at = -1;      // first op whose output differs in run B; -1: B is identical to A
  // Only that op's output differs, and the op after it overwrites it in place with the same
  // values in both runs: the runs agree again after it (a healed divergence).
  bool heal = false;
  bool hostile = false;         // op names, modules, paths and meta holding HTML/script payloads
  bool secrets = true;          // fake credentials in the recorded environment and command line
  bool with_b = true;           // write run B as well
  int64_t nonfinite_at = -1;    // op whose output holds NaN in both runs; -1: none
  // Run B records `inserted_ops` extra ops on the main thread just before the op that A
  // records as seq `insert_at` (a structural change: ops inserted in B, none in A). Those ops'
  // outputs feed nothing, so B's later ops match A's, `inserted_ops` seqs later. -1: none.
  int64_t insert_at = -1;
  int inserted_ops = 5;
  int64_t ring_from = -1;       // ops before this seq are not written (what a ring dropped)
  int64_t lr_from = -1;         // B's in-place updates from this op on take alpha -0.02, not -0.01
  bool killed = false;          // the runs end as if by SIGTERM (exit_status "signal 15")
};

// The fake secrets the fixture records (they must never reach a bundle).
constexpr const char* kFakeAwsSecret = "FAKEawsSecretKey0123456789abcdefGHIJ";
constexpr const char* kFakeHfToken = "hf_FAKEtokenZZZ987654321";
constexpr const char* kFakeCliToken = "cli-FAKE-token-55555";

// Writes `dir`/a/rank0.sqlite, `dir`/b/rank0.sqlite (unless !with_b) and `dir`/train.py (the
// source file the stacks point into). `dir` must exist.
Status make_runs(const std::string& dir, const FixtureOptions& options);

// The train.py line of the op kind that the fixture reports for op `seq` (for assertions):
// the line of the user frame of that op.
int fixture_line_of(const std::string& dir, int64_t seq);

}  // namespace tdbg::report::fixture
