// The optimizer's updates of two runs compared step by step (updates.h). The same optimizer
// over the same parameters runs the same ops in every step, whatever the forward and backward
// before it did: pairing them in order needs no alignment, and their outputs (the parameters,
// the optimizer's state) are what the training computes.
#include "tlparse/diff/updates.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "hashing/tensor_hash.h"
#include "tlparse/diff/ops.h"

namespace tdbg::diff {

using nlohmann::json;
using tracer::OpRecord;
using tracer::Reader;
using tracer::TensorRecord;

json compare_updates(const Reader& ra, uint32_t thread_a, const Reader& rb, uint32_t thread_b,
                     int64_t step_offset, int64_t max_ops, int64_t same_before) {
  const auto steps_a = step_regions(ra, thread_a);
  const auto steps_b = step_regions(rb, thread_b);
  Strings sa(ra), sb(rb);
  int64_t paired = 0, read = 0, largest_step = -1, agreed = 0;
  bool agreed_exactly = true;  // every output of the steps agreed was the same
  double largest = 0;
  json beyond, unpaired, largest_tensor = json::object();
  std::vector<OpRecord> ops_a, ops_b;
  bool complete = true;
  int64_t through_step = -1;
  for (const auto& [step, regions_a] : steps_a) {
    const auto found = steps_b.find(step - step_offset);
    if (found == steps_b.end()) continue;
    if (step < same_before) {
      ++paired;
      ++agreed;
      through_step = step;
      continue;
    }
    if (max_ops >= 0 && read > max_ops) {
      complete = false;
      break;
    }
    if (!ops_in_regions(ra, regions_a, &ops_a) || !ops_in_regions(rb, found->second, &ops_b)) break;
    read += static_cast<int64_t>(std::max(ops_a.size(), ops_b.size()));
    // A step whose region a run holds but not its ops (a recording that stopped on a full
    // disk, whose regions reach further than its committed ops): the end of what was recorded,
    // not other ops.
    if (ops_a.empty() || ops_b.empty()) break;
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
    through_step = step;
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
  if (!complete) {
    out["complete"] = false;
    out["through_step"] = through_step;
  }
  return out;
}

namespace {

// A parameter the optimizer writes in a step: its key ("op|line|shape#k": the k-th op of its
// name at its line with an output of its shape made it) and its tensor.
struct Written {
  std::string key;
  uint64_t hash = 0;
  int64_t producer = tracer::kNoSeq;
  std::string shape;
  std::string made;  // "op|line|shape"
  int k = 0;
  std::string module;  // the module of the first op of the step that read it (its forward)
};

// What a step's optimizer writes first, and how many ops of each "op|line|shape" ran before it.
struct StepWrites {
  std::vector<Written> params;
  std::map<std::string, int> made_before;
  // Tensors the step first writes in place that no recorded op made: a parameter whose data
  // the program replaced (`model.to(memory_format=...)` sets `param.data`), or data from
  // outside torch. Any of them may be a parameter the other run's count holds.
  size_t unknown = 0;
};

// The parameters the optimizer first writes in `regions` (one step's), in order. A key counts
// the ops before the step at the same line with the same name: the k-th `uniform_` of
// `nn.Linear(16, 16)` in a ModuleList is the k-th layer's in both runs, whichever a run's
// optimizer leaves.
StepWrites written_in_step(const Reader& r, Strings& strings,
                           const std::vector<tracer::RegionRecord>& regions) {
  StepWrites step;
  std::vector<Written>& out = step.params;
  std::vector<OpRecord> ops;
  if (regions.empty() || !ops_in_regions(r, regions, &ops)) return step;
  const int64_t begin = regions.front().start_seq;
  // A tensor by its values and the op that made it: two parameters of equal values (zeros
  // of two biases, or NaN everywhere after a run went non-finite) are two.
  std::set<std::pair<uint64_t, int64_t>> written;
  std::map<int64_t, size_t> by_producer;  // producer seq -> index in `out`
  for (const OpRecord& o : ops) {
    const std::string& name = strings.text(o.name);
    if (name.empty() || name.back() != '_' || o.tensors.empty()) continue;
    const TensorRecord& t = o.tensors[0];
    if (t.role != tracer::TensorRole::kInput || t.index != 0 || t.producer >= begin ||
        !written.insert({t.hash, t.producer}).second)
      continue;
    if (t.producer == tracer::kNoSeq) {
      ++step.unknown;
      continue;
    }
    by_producer.emplace(t.producer, out.size());
    Written& w = out.emplace_back();
    w.hash = t.hash;
    w.producer = t.producer;
    w.shape = std::string(hashing::dtype_name(t.dtype)) + "[" + strings.text(t.shape) + "]";
  }
  // Each producer's place among the ops of its name and line before the step whose first
  // output has its shape.
  std::map<std::tuple<tracer::StringId, tracer::FrameId, tracer::StringId>, int> count;
  std::unordered_map<uint64_t, size_t> by_hash;  // tensor hash -> index in `out`
  for (size_t k = 0; k < out.size(); ++k) by_hash.emplace(out[k].hash, k);
  const tracer::RegionRecord& at = regions.front();
  const Status st = r.scan_ops(std::nullopt, 0, begin, true, [&](const OpRecord& o) {
    if (o.thread == at.thread && o.step == at.step && o.module != 0)
      for (const TensorRecord& t : o.tensors)
        if (const auto read = by_hash.find(t.hash); t.role == tracer::TensorRole::kInput &&
                                                    read != by_hash.end() &&
                                                    out[read->second].module.empty())
          out[read->second].module = strings.text(o.module);
    tracer::StringId shape = 0;
    for (const TensorRecord& t : o.tensors)
      if (t.role == tracer::TensorRole::kOutput) {
        shape = t.shape;
        break;
      }
    const tracer::FrameId frame = o.user_frame ? o.user_frame : o.stack;
    const int k = count[{o.name, frame, shape}]++;
    if (const auto it = by_producer.find(o.seq);
        it != by_producer.end() && !(o.flags & tracer::kOpBackward)) {
      Written& w = out[it->second];
      w.made = strings.text(o.name) + "|" + frame_source_text(r, strings, frame, true) + "|" +
               strings.text(shape);
      w.k = k;
      w.key = w.made + "#" + std::to_string(k);
    }
    return true;
  });
  if (!st.ok()) return {};
  for (const auto& [op, n] : count)
    step.made_before[strings.text(std::get<0>(op)) + "|" +
                     frame_source_text(r, strings, std::get<1>(op), true) + "|" +
                     strings.text(std::get<2>(op))] += n;
  // (A producer the recording does not hold, or one of backward's, is no parameter's start.)
  out.erase(std::remove_if(out.begin(), out.end(), [](const Written& w) { return w.key.empty(); }),
            out.end());
  return step;
}

}  // namespace

json parameters_not_updated(const Reader& ra, uint32_t thread_a, const Reader& rb,
                            uint32_t thread_b, int64_t step_offset, int64_t from_step,
                            int64_t max_ops) {
  constexpr int kSteps = 3;
  const auto steps_a = step_regions(ra, thread_a);
  const auto steps_b = step_regions(rb, thread_b);
  int compared = 0;
  for (auto it = steps_a.lower_bound(from_step); it != steps_a.end() && compared < kSteps; ++it) {
    const auto& [step, regions_a] = *it;
    const auto found = steps_b.find(step - step_offset);
    if (found == steps_b.end() || regions_a.empty() || found->second.empty()) continue;
    if (max_ops >= 0 &&
        (regions_a.front().start_seq > max_ops || found->second.front().start_seq > max_ops))
      return nullptr;
    ++compared;
    Strings sa(ra), sb(rb);
    const StepWrites step_a = written_in_step(ra, sa, regions_a);
    const StepWrites step_b = written_in_step(rb, sb, found->second);
    const std::vector<Written>& a = step_a.params;
    const std::vector<Written>& b = step_b.params;
    if (a.empty() || b.empty()) return nullptr;
    if (a.size() == b.size()) continue;
    // The run that updates fewer, and those of the other's it leaves.
    const bool b_fewer = b.size() < a.size();
    const std::vector<Written>& more = b_fewer ? a : b;
    const StepWrites& fewer = b_fewer ? step_b : step_a;
    // Parameters the fewer run's step writes but whose making the recording does not show
    // make up the count: none is known to be left.
    if (fewer.params.size() + fewer.unknown >= more.size()) return nullptr;
    // (The run that updates them, where they are named.)
    const Reader& r = b_fewer ? ra : rb;
    Strings& strings = b_fewer ? sa : sb;
    std::set<std::string> keys;
    for (const Written& w : fewer.params) keys.insert(w.key);
    // A tensor last written inside an optimizer step before this one that no module reads
    // in this step: the optimizer's state (made afresh here in the other run, its state not
    // restored), no parameter. A parameter the other run also updates, known by the module
    // that reads it and its shape, where their makings differ (loaded in one run, updated
    // by the last step in the other): not one left.
    const auto& more_steps = b_fewer ? steps_a : steps_b;
    auto written_by_optimizer = [&](int64_t seq) {
      for (const auto& [s, regions] : more_steps)
        for (const tracer::RegionRecord& g : regions)
          if (g.start_seq <= seq && (g.end_seq == tracer::kNoSeq || seq <= g.end_seq)) return true;
      return false;
    };
    std::set<std::pair<std::string, std::string>> read_by;  // (module, shape) of fewer's
    for (const Written& w : fewer.params)
      if (!w.module.empty()) read_by.insert({w.module, w.shape});
    std::vector<const Written*> missing;
    for (const Written& w : more) {
      if (keys.count(w.key) || (!w.module.empty() && read_by.count({w.module, w.shape})) ||
          (w.module.empty() && written_by_optimizer(w.producer)))
        continue;
      // Only a parameter the other run made too (not a layer it does not have) is one it left.
      const auto made = fewer.made_before.find(w.made);
      if (made == fewer.made_before.end() || made->second <= w.k) return nullptr;
      missing.push_back(&w);
    }
    if (missing.empty()) return nullptr;
    json params = json::array(), modules = json::array();
    for (const Written* w : missing)
      if (!w->module.empty() &&
          std::find(modules.begin(), modules.end(), w->module) == modules.end())
        modules.push_back(w->module);
    for (size_t k = 0; k < missing.size() && k < 3; ++k) {
      json param = {{"shape", missing[k]->shape}, {"module", missing[k]->module}};
      if (auto made = r.op(missing[k]->producer))
        param["made_by"] = op_brief_json(r, strings, *made);
      params.push_back(std::move(param));
    }
    return {{"run", b_fewer ? "B" : "A"},   {"step", step},          {"missing", missing.size()},
            {"updated_a", a.size()},        {"updated_b", b.size()}, {"params", std::move(params)},
            {"modules", std::move(modules)}};
  }
  return nullptr;
}

}  // namespace tdbg::diff
