// `first_nonfinite`: the first op of a run whose output holds NaN or ±Inf that its inputs and
// arguments do not explain, found from the recorded summaries, descending into nested ops to
// the innermost one that produced it.
#include <limits>
#include <optional>
#include <unordered_map>

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

// Which kinds of non-finite value a tensor or an op's arguments hold.
struct Nonfinite {
  bool nan = false, inf = false;
  Nonfinite& operator|=(const Nonfinite& o) {
    nan |= o.nan;
    inf |= o.inf;
    return *this;
  }
};

// Finds where non-finite values *start*. An op whose NaN or Inf output is explained is
// skipped: Inf from an Inf literal argument (`torch.full(..., float('-inf'))`,
// `masked_fill(mask, -inf)`: attention masks) or from an input that already held Inf, NaN
// from a NaN literal or a NaN input. What remains is an op that made a new kind of
// non-finite value out of finite inputs (an overflow, log(0), 0/0) or NaN out of Inf
// (inf - inf in a fully masked row).
class Tracker {
 public:
  explicit Tracker(Strings& strings) : strings_(strings) {}

  // True when `op` has a non-finite output that its inputs and arguments do not explain.
  // Remembers the non-finite tensors `op` passes on either way.
  bool unexplained(const OpRecord& op) {
    Nonfinite in;
    for (const TensorRecord& t : op.tensors) {
      if (t.role == TensorRole::kInput) in |= of(t);
    }
    Nonfinite literal;
    for (const tracer::ArgRecord& a : op.args) literal |= literal_of(a.value);
    Nonfinite out;
    for (const TensorRecord& t : op.tensors) {
      if (t.role != TensorRole::kOutput || !tensor_comparable(t) || !t.summary.valid) continue;
      out.nan |= t.summary.nan_count > 0;
      out.inf |= t.summary.inf_count > 0;
    }
    const bool fresh = (out.nan && !in.nan && !literal.nan) || (out.inf && !in.inf && !literal.inf);
    if (fresh) return true;
    if (out.nan || out.inf) ++explained_;
    // Remember what is passed on: outputs that hold non-finite values, and outputs without
    // summaries (views) of ops that read some.
    Nonfinite passed = in;
    passed |= literal;
    for (const TensorRecord& t : op.tensors) {
      if (t.role != TensorRole::kOutput || t.hash == 0) continue;
      Nonfinite v = of(t);
      if (!t.summary.valid) v = passed;
      if (v.nan || v.inf) {
        if (seen_.size() > (1u << 20)) seen_.clear();  // bounded
        seen_[t.hash] = v;
      }
    }
    return false;
  }
  int64_t explained() const { return explained_; }

 private:
  Nonfinite of(const TensorRecord& t) const {
    if (t.summary.valid && tensor_comparable(t)) {
      return Nonfinite{t.summary.nan_count > 0, t.summary.inf_count > 0};
    }
    auto it = seen_.find(t.hash);
    return it == seen_.end() || t.hash == 0 ? Nonfinite{} : it->second;
  }
  Nonfinite literal_of(tracer::StringId value) {
    auto it = literals_.find(value);
    if (it != literals_.end()) return it->second;
    const std::string& text = strings_.text(value);
    Nonfinite v{text.find("nan") != std::string::npos, text.find("inf") != std::string::npos};
    literals_.emplace(value, v);
    return v;
  }
  Strings& strings_;
  std::unordered_map<uint64_t, Nonfinite> seen_;
  std::unordered_map<tracer::StringId, Nonfinite> literals_;
  int64_t explained_ = 0;
};

}  // namespace

StatusOr<json> first_nonfinite(const tracer::Run& run) {
  int64_t explained = 0;
  for (size_t p = 0; p < run.processes.size(); ++p) {
    const tracer::Reader& r = *run.processes[p];
    Strings strings(r);
    Tracker tracker(strings);
    std::optional<OpRecord> found;
    Status st = r.scan_ops(std::nullopt, 0, std::numeric_limits<int64_t>::max(), true,
                           [&](const OpRecord& op) {
                             if (!tracker.unexplained(op)) return true;
                             found = op;
                             return false;
                           });
    TDBG_RETURN_IF_ERROR(st);
    if (!found) {
      explained += tracker.explained();
      continue;
    }
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
        if (!tracker.unexplained(o)) return true;
        child = o;
        return false;
      });
      TDBG_RETURN_IF_ERROR(st);
      if (child) {
        op = std::move(*child);
        descended = true;
      }
    }
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
    j["explained_before"] = tracker.explained();
    return json{{"status", "nonfinite"}, {"first_nonfinite", std::move(j)}, {"run", run.path}};
  }
  return json{{"status", "finite"},
              {"first_nonfinite", nullptr},
              {"explained", explained},
              {"run", run.path}};
}

}  // namespace tdbg::diff
