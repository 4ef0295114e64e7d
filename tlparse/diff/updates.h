// The optimizer's updates of two runs compared step by step, apart from the ops before them:
// after a structural change (a batch split into micro-batches whose gradients accumulate,
// another order of the same sums), whether the training still computes the same parameters up
// to rounding, or from which step it does not.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "tracer/reader.h"

namespace tdbg::diff {

// Pairs the ops inside A's optimizer steps (`Optimizer.step#` regions of thread `thread_a`)
// with B's of the same step (A's step s + `step_offset` with B's s), in order, while each
// step runs the same ops in both; reads at most `max_ops` ops of each run (-1: no limit).
// Returns null where no step could be paired, else {"steps": N paired, "largest": the largest
// relative difference of a step's outputs taken whole (how far their sums and sums of
// magnitudes moved, over their magnitude), "largest_step", "rounding": whether every step's is
// within rounding for its dtypes, "beyond": null or the first step past it {"step", "a", "b"
// (its most different op in each run, as `op_brief_json`), "relative", "steps_agreed": the
// steps paired before it}, "largest_tensor": {"step", "a", "relative"} the one output most
// different (a gradient that is 0 up to rounding, which Adam scales to whole steps, moves its
// tensor far and the whole hardly), "unpaired_step": the first step whose ops differ, or null,
// "complete": false where `max_ops` stopped it before a step both runs hold, with
// "through_step": the last step compared}. Steps before `same_before` (A's numbering: the
// first divergence's step, before which every op is the same) are paired and agreed unread.
nlohmann::json compare_updates(const tracer::Reader& ra, uint32_t thread_a,
                               const tracer::Reader& rb, uint32_t thread_b, int64_t step_offset,
                               int64_t max_ops, int64_t same_before);

// The tensors each run's optimizer writes, as the first in-place op of its step writes them:
// its input 0, made before the step by an op that is not backward's (a parameter's
// initialization or load). A parameter is known by that op's name, line and shape, counted in
// order. Compared in the steps both runs hold (A's step s with B's s - `step_offset`) from A's
// step `from_step` on, where the change is, up to the first whose counts differ, a few steps
// at most (a layer unfrozen at the change's step updates from there, or from the next). Where
// one run's optimizer leaves some the other's updates (no gradient reached them: requires_grad
// False, a detach, a reentrant checkpoint over inputs that do not require grad), {"run": that
// run, "step": A's step, "missing": how many, "updated_a", "updated_b": how many each updated,
// "params": [{"made_by" (as `op_brief_json`), "shape", "module": the module whose op first
// read it in the other run's step, or ""}] (the first three)}; null otherwise. Each step
// compared reads the ops before it (what made each parameter): a step that begins past
// `max_ops` ops (-1: no bound) is not compared.
nlohmann::json parameters_not_updated(const tracer::Reader& ra, uint32_t thread_a,
                                      const tracer::Reader& rb, uint32_t thread_b,
                                      int64_t step_offset, int64_t from_step, int64_t max_ops);

}  // namespace tdbg::diff
