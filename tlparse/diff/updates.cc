// The optimizer's updates of two runs compared step by step (updates.h). The same optimizer
// over the same parameters runs the same ops in every step, whatever the forward and backward
// before it did: pairing them in order needs no alignment, and their outputs (the parameters,
// the optimizer's state) are what the training computes.
#include "tlparse/diff/updates.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "hashing/tensor_hash.h"
#include "tlparse/diff/ops.h"

namespace tdbg::diff {

using nlohmann::json;
using tracer::OpRecord;
using tracer::Reader;
using tracer::TensorRecord;

json compare_updates(const Reader& ra, uint32_t thread_a, const Reader& rb, uint32_t thread_b,
                     int64_t step_offset, int64_t max_ops) {
  const auto steps_a = step_regions(ra, thread_a);
  const auto steps_b = step_regions(rb, thread_b);
  Strings sa(ra), sb(rb);
  int64_t paired = 0, read = 0, largest_step = -1, agreed = 0;
  bool agreed_exactly = true;  // every output of the steps agreed was the same
  double largest = 0;
  json beyond, unpaired, largest_tensor = json::object();
  std::vector<OpRecord> ops_a, ops_b;
  for (const auto& [step, regions_a] : steps_a) {
    const auto found = steps_b.find(step - step_offset);
    if (found == steps_b.end()) continue;
    if (max_ops >= 0 && read > max_ops) break;
    if (!ops_in_regions(ra, regions_a, &ops_a) || !ops_in_regions(rb, found->second, &ops_b)) break;
    read += static_cast<int64_t>(std::max(ops_a.size(), ops_b.size()));
    bool same_ops = ops_a.size() == ops_b.size() && !ops_a.empty();
    for (size_t k = 0; same_ops && k < ops_a.size(); ++k)
      same_ops = sa.text(ops_a[k].name) == sb.text(ops_b[k].name) &&
                 ops_a[k].tensors.size() == ops_b[k].tensors.size();
    if (!same_ops) {
      // Another optimizer, other parameters, state made afresh: nothing to pair from here.
      unpaired = step;
      break;
    }
    ++paired;
    // The step's outputs as a whole: how far their sums and sums of magnitudes moved, over
    // their magnitude. A tensor alone may move far where its values are rounding's (a gradient
    // that is 0 up to rounding, which Adam scales to whole steps); the whole then hardly moves.
    double moved = 0, magnitude = 0, limit = 0, worst = -1;
    bool exact = true;  // integer or NaN/Inf counts differ: beyond rounding whatever the size
    size_t worst_op = 0;
    for (size_t k = 0; k < ops_a.size(); ++k) {
      for (size_t t = 0; t < ops_a[k].tensors.size(); ++t) {
        const TensorRecord& ta = ops_a[k].tensors[t];
        const TensorRecord& tb = ops_b[k].tensors[t];
        if (ta.role != tracer::TensorRole::kOutput || !tensor_comparable(ta) ||
            !tensor_comparable(tb) || !ta.summary.valid || !tb.summary.valid)
          continue;
        magnitude += std::max(ta.summary.abs_sum, tb.summary.abs_sum);
        if (ta.hash == tb.hash) continue;
        // The same sums in another order, carried through the steps: reordering's size. Of
        // another dtype (a model in float64 in one run), the coarser's: the summaries are
        // numbers whatever the dtype, and a float32 run's updates stray from a float64 run's by
        // float32's rounding.
        const double own_a = reorder_limit(hashing::dtype_name(ta.dtype));
        const double own_b = reorder_limit(hashing::dtype_name(tb.dtype));
        const double own = own_a < 0 || own_b < 0 ? -1 : std::max(own_a, own_b);
        const double d = summary_distance(ta.summary, tb.summary);
        if (own < 0 || d >= 2) exact = false;
        limit = std::max(limit, own);
        moved += std::max(std::fabs(ta.summary.sum - tb.summary.sum),
                          std::fabs(ta.summary.abs_sum - tb.summary.abs_sum));
        if (d > worst) {
          worst = d;
          worst_op = k;
        }
      }
    }
    if (worst < 0) {  // every output the same
      if (beyond.is_null()) ++agreed;
      continue;
    }
    const double whole = !exact ? 2 : magnitude > 0 ? std::min(2.0, moved / magnitude) : 2;
    if (whole > largest) {
      largest = whole;
      largest_step = step;
    }
    if (worst > largest_tensor.value("relative", 0.0))
      largest_tensor = {
          {"step", step}, {"a", op_brief_json(ra, sa, ops_a[worst_op])}, {"relative", worst}};
    if (beyond.is_null() && whole > limit) {
      beyond = {{"step", step},
                {"a", op_brief_json(ra, sa, ops_a[worst_op])},
                {"b", op_brief_json(rb, sb, ops_b[worst_op])},
                {"relative", whole},
                {"steps_agreed", agreed}};
    }
    if (beyond.is_null()) {
      ++agreed;
      agreed_exactly = false;
    }
  }
  if (paired == 0) return nullptr;
  if (beyond.is_object()) beyond["agreed_exactly"] = agreed_exactly;
  json out = {{"steps", paired},
              {"largest", largest},
              {"largest_step", largest_step},
              {"rounding", beyond.is_null()},
              {"beyond", beyond},
              {"unpaired_step", unpaired}};
  if (!largest_tensor.empty()) out["largest_tensor"] = std::move(largest_tensor);
  return out;
}

}  // namespace tdbg::diff
