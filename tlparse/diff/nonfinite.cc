// `first_nonfinite`: the first op of a run whose output holds NaN or ±Inf, found from the
// recorded summaries, descending into nested ops to the innermost one that produced it.
#include <limits>
#include <optional>

#include "tlparse/diff/diff.h"
#include "tlparse/diff/ops.h"

namespace tdbg::diff {
namespace {

using nlohmann::json;
using tracer::OpRecord;
using tracer::TensorRecord;
using tracer::TensorRole;

// Index into `op.tensors` of the first output with NaN or Inf, or -1.
int nonfinite_output(const OpRecord& op) {
  for (size_t k = 0; k < op.tensors.size(); ++k) {
    const TensorRecord& t = op.tensors[k];
    if (t.role != TensorRole::kOutput || !tensor_comparable(t) || !t.summary.valid) continue;
    if (t.summary.nan_count > 0 || t.summary.inf_count > 0) return static_cast<int>(k);
  }
  return -1;
}

}  // namespace

StatusOr<json> first_nonfinite(const tracer::Run& run) {
  for (size_t p = 0; p < run.processes.size(); ++p) {
    const tracer::Reader& r = *run.processes[p];
    std::optional<OpRecord> found;
    Status st = r.scan_ops(std::nullopt, 0, std::numeric_limits<int64_t>::max(), true,
                           [&](const OpRecord& op) {
                             if (nonfinite_output(op) < 0) return true;
                             found = op;
                             return false;
                           });
    TDBG_RETURN_IF_ERROR(st);
    if (!found) continue;
    // A parent op (aten::linear) starts before the child (aten::addmm) that computed the
    // value: go down to the first child with a non-finite output, level by level.
    OpRecord op = std::move(*found);
    bool descended = true;
    while (descended) {
      descended = false;
      std::optional<OpRecord> child;
      uint16_t depth = op.depth;
      st = r.scan_ops(op.thread, op.tidx + 1, r.op_count(op.thread), true, [&](const OpRecord& o) {
        if (o.depth <= depth) return false;
        if (nonfinite_output(o) < 0) return true;
        child = o;
        return false;
      });
      TDBG_RETURN_IF_ERROR(st);
      if (child) {
        op = std::move(*child);
        descended = true;
      }
    }
    Strings strings(r);
    json j = op_json(r, strings, op);
    j["process"] = p;
    j["tensor"] = tensor_json(strings, op.tensors[static_cast<size_t>(nonfinite_output(op))]);
    json inputs = json::array();
    for (const TensorRecord& t : op.tensors) {
      if (t.role != TensorRole::kInput) continue;
      json in = tensor_json(strings, t);
      hashing::Summary summary = t.summary;
      if (t.producer != tracer::kNoSeq) {
        if (auto prod = r.op(t.producer)) {
          in["producer"] = op_brief_json(r, strings, *prod);
          // A known tensor may carry only its hash: its summary is the producer's output's.
          for (const TensorRecord& out : prod->tensors) {
            if (!summary.valid && out.role == TensorRole::kOutput && out.hash == t.hash) {
              summary = out.summary;
            }
          }
        }
      }
      in["finite"] = summary.valid && tensor_comparable(t)
                         ? json(summary.nan_count == 0 && summary.inf_count == 0)
                         : json(nullptr);
      inputs.push_back(std::move(in));
    }
    j["inputs"] = std::move(inputs);
    return json{{"status", "nonfinite"}, {"first_nonfinite", std::move(j)}, {"run", run.path}};
  }
  return json{{"status", "finite"}, {"first_nonfinite", nullptr}, {"run", run.path}};
}

}  // namespace tdbg::diff
