// Whether one run resumes the other's training from a checkpoint, found from the values alone:
// a resumed process begins by copying in the tensors torch.load read (load_state_dict's
// `copy_`), and those are, bit for bit, the other run's parameters after one of its optimizer
// steps. The diff then pairs that step with the resumed run's step 0, as --align-steps would,
// instead of pairing both steps 0 and blaming the seed.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <unordered_set>

#include "tlparse/diff/diff.h"
#include "tlparse/diff/ops.h"

namespace tdbg::diff {
namespace {

using tracer::OpRecord;
using tracer::Reader;
using tracer::TensorRecord;

// Ops looked at for loaded tensors before the resumed run's first optimizer step: a start-up
// that builds and loads a model runs a few thousand.
constexpr int64_t kStartOps = 200000;

// The thread a process's training ran in: the one whose id is the process's.
std::optional<uint32_t> main_thread(const Reader& r) {
  const std::vector<tracer::ThreadRecord> threads = r.threads();
  if (threads.empty()) return std::nullopt;
  for (const tracer::ThreadRecord& t : threads)
    if (is_main_thread(r, t)) return t.id;
  return threads.front().id;
}

// The values a process copied in from outside before its first optimizer step: the source of
// a top-level `copy_` that no recorded op made (what torch.load read, copied into a parameter
// or a buffer by load_state_dict), by hash, with the first such op.
struct Loaded {
  std::unordered_set<uint64_t> hashes;
  std::optional<OpRecord> first;
  const Reader* reader = nullptr;  // the process of `first`
  // The parameters autograd accumulated a gradient into in the first backward (one
  // AccumulateGrad each): what a resumption loads, most of them at least.
  int64_t parameters = 0;
};

void add_loaded(const Reader& r, Loaded* loaded) {
  const auto thread = main_thread(r);
  if (!thread) return;
  Strings strings(r);
  int64_t parameters = 0;
  bool counted = false;  // the first backward ended (micro-batches run more than one a step)
  // Every diff looks: the start-up's ops without their tensors, then the copies' alone.
  std::vector<int64_t> copies;
  // (A scan that fails leaves the count as far as it got: no resumption is then said.)
  (void)r.scan_ops(*thread, 0, kStartOps, false, [&](const OpRecord& op) {
    if (op.step > 0) return false;
    if (strings.text(op.name) == "torch::autograd::AccumulateGrad" && !counted) ++parameters;
    counted = counted || (parameters > 0 && op.depth == 0 && !(op.flags & tracer::kOpBackward));
    if (op.depth == 0 && strings.text(op.name) == "aten::copy_") copies.push_back(op.seq);
    return true;
  });
  for (int64_t seq : copies) {
    const std::optional<OpRecord> op = r.op(seq);
    if (!op) continue;
    for (const TensorRecord& t : op->tensors) {
      // (Not a scalar or a one-element tensor: a step count of 4 says nothing of whose.)
      if (t.role != tracer::TensorRole::kInput || t.index != 1 || t.producer != tracer::kNoSeq ||
          t.status != tracer::TensorStatus::kHashed || t.shape == 0 || strings.text(t.shape) == "1")
        continue;
      loaded->hashes.insert(t.hash);
      if (!loaded->first) {
        loaded->first = op;
        loaded->reader = &r;
      }
    }
  }
  loaded->parameters = std::max(loaded->parameters, parameters);
}

// Of every process of `run`: a training resumed in the same run folder (`bash -c "train &&
// resume"`) loads in its second process.
Loaded loaded_at_start(const tracer::Run& run) {
  Loaded loaded;
  for (const auto& process : run.processes) add_loaded(*process, &loaded);
  return loaded;
}

// The optimizer step of `r` after which it held the most of `hashes` (distinct ones, as
// outputs of the step's ops), with that step's first such op: where a resumption took its
// values. By count, not the first step that holds one: a parameter whose gradient is 0 (a dead
// unit, a frozen layer under Adam without weight decay) holds its value at every step. Nothing
// where no step holds more than every other one (all of them frozen: no step to tell).
std::optional<OpRecord> made_in_a_step(const Reader& r, const std::unordered_set<uint64_t>& hashes) {
  // By step: the hashes held, and the first op that held one.
  std::map<int64_t, std::pair<std::unordered_set<uint64_t>, OpRecord>> held;
  std::vector<OpRecord> ops;
  for (const auto& [step, regions] : step_regions(r)) {
    if (!ops_in_regions(r, regions, &ops)) return std::nullopt;
    for (const OpRecord& op : ops)
      for (const TensorRecord& t : op.tensors) {
        if (t.role != tracer::TensorRole::kOutput || t.status != tracer::TensorStatus::kHashed ||
            hashes.count(t.hash) == 0)
          continue;
        auto [at, fresh] = held.try_emplace(step, std::unordered_set<uint64_t>{}, op);
        at->second.first.insert(t.hash);
      }
  }
  const std::pair<std::unordered_set<uint64_t>, OpRecord>* best = nullptr;
  size_t runner_up = 0;
  for (const auto& [step, found] : held) {
    if (best == nullptr || found.first.size() > best->first.size()) {
      runner_up = best ? best->first.size() : 0;
      best = &found;
    } else {
      runner_up = std::max(runner_up, found.first.size());
    }
  }
  if (best == nullptr || best->first.size() <= runner_up) return std::nullopt;
  return best->second;
}

// "aten::copy_ at resume.py:17 (seq 118, step 0)".
std::string where(const Reader& r, const OpRecord& op) {
  Strings strings(r);
  return op_at_source(r, strings, op) + " (seq " + std::to_string(op.seq) + ", step " +
         std::to_string(op.step) + ")";
}

}  // namespace

std::string guess_resumed_steps(const tracer::Run& a, const tracer::Run& b,
                                std::pair<int64_t, int64_t>* align_steps) {
  if (align_steps->first >= 0 || a.processes.empty() || b.processes.empty()) return "";
  const Reader& ra = *a.processes[0];
  const Reader& rb = *b.processes[0];
  const Loaded loaded_a = loaded_at_start(a);
  const Loaded loaded_b = loaded_at_start(b);
  // `resumed` loaded what `trained` had after its step K (and did not load it too: both
  // starting from one checkpoint is no resumption).
  auto resumes = [](const Reader& trained, const Loaded& loaded_t,
                    const Loaded& loaded) -> std::optional<OpRecord> {
    if (loaded.hashes.empty()) return std::nullopt;
    for (uint64_t h : loaded.hashes)
      if (loaded_t.hashes.count(h) > 0) return std::nullopt;
    // Most of the model loaded, not one layer (pretrained embeddings taken from it).
    if (2 * static_cast<int64_t>(loaded.hashes.size()) < loaded.parameters) return std::nullopt;
    return made_in_a_step(trained, loaded.hashes);
  };
  std::optional<OpRecord> made = resumes(ra, loaded_a, loaded_b);
  const bool b_side = made.has_value();
  if (!made) made = resumes(rb, loaded_b, loaded_a);
  if (!made) return "";
  // Made in the step that `made->step` steps preceded: the values after one more.
  const int64_t k = made->step + 1;
  const Reader& trained = b_side ? ra : rb;
  const Loaded& loaded = b_side ? loaded_b : loaded_a;
  *align_steps = b_side ? std::make_pair(k, int64_t{0}) : std::make_pair(int64_t{0}, k);
  const std::string ks = std::to_string(k);
  const std::string kr = b_side ? "B" : "A", kt = b_side ? "A" : "B";
  return kr + " begins by copying in values (" + where(*loaded.reader, *loaded.first) + ") that " +
         kt + " held after " + ks + " optimizer step(s) (" + where(trained, *made) + "): " + kr +
         " resumes " + kt + "'s training from a checkpoint, so " + kt + "'s step " + ks +
         " is compared with " + kr + "'s step 0, as --align-steps " +
         (b_side ? ks + ":0" : "0:" + ks) + " does (--align-steps 0:0 pairs the steps by number)";
}

}  // namespace tdbg::diff
