// `first_nonfinite`: the first op of a run whose output holds NaN or ±Inf that its inputs and
// arguments do not explain, found from the recorded summaries, descending into nested ops to
// the innermost one that produced it.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tlparse/diff/diff.h"
#include "tlparse/diff/native_lines.h"
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

// True when `t` cannot hold NaN or Inf at all: no elements, or an integer or bool dtype.
bool cannot_be_nonfinite(Strings& strings, const TensorRecord& t) {
  const std::string dtype = hashing::dtype_name(t.dtype);
  if (dtype.find("float") == std::string::npos && dtype.find("half") == std::string::npos &&
      dtype.find("complex") == std::string::npos && dtype != "unknown")
    return true;
  const std::string& shape = strings.text(t.shape);
  const std::string sizes = shape.substr(0, shape.find(' '));
  size_t start = 0;
  while (start <= sizes.size() && !sizes.empty()) {
    size_t end = sizes.find('x', start);
    if (end == std::string::npos) end = sizes.size();
    if (sizes.compare(start, end - start, "0") == 0) return true;
    start = end + 1;
  }
  return false;
}


// The number of elements of a tensor of shape text `shape` ("16x16 strides 1x16"; "" for a
// 0-dim tensor), or -1 when it cannot be read ("nested").
int64_t element_count(const std::string& shape) {
  const std::string sizes = shape.substr(0, shape.find(' '));
  int64_t n = 1;
  size_t start = 0;
  while (start < sizes.size()) {
    size_t end = sizes.find('x', start);
    if (end == std::string::npos) end = sizes.size();
    const std::string size = sizes.substr(start, end - start);
    if (size.empty() || size.find_first_not_of("0123456789") != std::string::npos) return -1;
    n *= std::stoll(size);
    start = end + 1;
  }
  return n;
}

// What the recording tells of an input's values: whether they are all finite (nullopt when
// unknown), and the summary that says so, with whose it is.
struct InputValues {
  std::optional<bool> finite;
  hashing::Summary summary;     // invalid when none was found
  // "input", "producer" (its output), "view" (of a tensor with the same elements: a transpose,
  // a reshape) or "viewed" (the tensor of which the input is a part).
  const char* summary_of = "";
  int64_t viewed_producer = tracer::kNoSeq;  // for "view" and "viewed": who made the tensor
};

// What input `t` holds, as far as the recording tells. A known tensor may carry only its hash:
// its summary is then its producer's output's. A view carries no summary; it is followed to
// the tensor it views (through a few views of views). A view with as many elements as that
// tensor (`t()`, `view`, `permute`), or more (`expand`, which repeats them), holds the same
// values, NaN and Inf included; a smaller one (a slice) lies within its range, and is all
// finite when it is, but may leave its NaN out.
InputValues recorded_values(const tracer::Reader& r, Strings& strings, const TensorRecord& t) {
  InputValues v;
  if (cannot_be_nonfinite(strings, t)) v.finite = true;
  bool through_view = false;
  bool whole = true;  // every view on the way has all the elements of the tensor it views
  auto answer = [&](const hashing::Summary& s, const char* whose, int64_t producer) {
    const bool finite = s.nan_count == 0 && s.inf_count == 0;
    v.summary = s;
    v.summary_of = through_view ? (whole ? "view" : "viewed") : whose;
    if (through_view) v.viewed_producer = producer;
    if (!v.finite && !(through_view && !whole && !finite)) v.finite = finite;
    return v;
  };
  TensorRecord cur = t;
  for (int hops = 0; hops < 8 && tensor_comparable(cur); ++hops) {
    if (cur.summary.valid) return answer(cur.summary, "input", cur.producer);
    std::optional<OpRecord> prod;
    if (cur.producer == tracer::kNoSeq || !(prod = r.op(cur.producer))) return v;
    const TensorRecord* out = nullptr;
    for (const TensorRecord& o : prod->tensors)
      if (o.role == TensorRole::kOutput && o.hash == cur.hash) out = &o;
    if (out == nullptr) return v;
    if (out->summary.valid) return answer(out->summary, "producer", prod->seq);
    if (out->status != tracer::TensorStatus::kView) return v;
    through_view = true;
    const TensorRecord* base = viewed_input(*prod, *out, tensor_comparable);
    if (base == nullptr) return v;
    const int64_t view_n = element_count(strings.text(cur.shape));
    whole = whole && view_n >= 0 && view_n >= element_count(strings.text(base->shape));
    cur = *base;
  }
  return v;
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

// Which non-finite values an argument's text holds ("nan", "-inf", "[1.0, inf]").
Nonfinite literal_nonfinite(const std::string& text) {
  return Nonfinite{text.find("nan") != std::string::npos, text.find("inf") != std::string::npos};
}

// Ops that make no NaN from finite inputs of moderate size (|x| < 1e15 in float32 or float64,
// scalar arguments below 1e6: no product of two of them, nor a sum of such products,
// overflows): arithmetic without division, matrix products, copies and activations.
bool makes_no_nan_from_finite(const std::string& name) {
  static const std::set<std::string> kClosed = {
      "aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::mul", "aten::mul_",
      "aten::addmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::linear", "aten::baddbmm",
      "aten::addmv", "aten::mv", "aten::dot", "aten::neg",
      "aten::abs", "aten::relu", "aten::relu_", "aten::tanh", "aten::sigmoid", "aten::gelu",
      "aten::silu", "aten::leaky_relu", "aten::clone", "aten::cat", "aten::stack", "aten::sum",
      "aten::copy_", "aten::_to_copy", "aten::to", "aten::contiguous", "aten::conv2d",
      "aten::convolution", "aten::_convolution", "aten::mkldnn_convolution",
      "aten::embedding", "aten::index_select", "aten::max_pool2d", "aten::square",
      // Softmax subtracts the row's max first: finite rows give finite results.
      "aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax",
      "aten::exp", "aten::sin", "aten::cos", "aten::elu", "aten::softplus", "aten::hardtanh",
      "aten::clamp", "aten::maximum", "aten::minimum", "aten::amax", "aten::amin"};
  return kClosed.count(name) > 0;
}

// Finds where non-finite values *start*. An op whose NaN or Inf output is explained is
// skipped: Inf from an Inf literal argument (`torch.full(..., float('-inf'))`,
// `masked_fill(mask, -inf)`: attention masks) or from an input that already held Inf, NaN
// from a NaN literal or a NaN input. What remains is an op that made a new kind of
// non-finite value out of finite inputs (an overflow, log(0), 0/0) or NaN out of Inf
// (inf - inf in a fully masked row).
//
// NaN that no op made also starts somewhere: at the first op that read it from outside
// recorded ops (an input holding NaN that no recorded op produced: a file, NumPy, a
// DataLoader worker) or that wrote a NaN literal. The answer is whichever start comes first,
// so a run whose loss is NaN never reads as finite, and a NaN from the data is not blamed on
// a later op whose inputs are not known. (Inf that enters is not a start: masks.)
//
// Nested ops see their enclosing ops' non-finite inputs where their own inputs' values are not
// recorded: a kernel may pass them to an op it runs on a buffer of its own (mkldnn's
// convolution restrides its output buffer with as_strided_). A nested op that reads only such
// buffers is never the start: its enclosing kernel's op is.
class Tracker {
 public:
  enum class Verdict { kExplained, kFresh, kEntered };

  // `first_held`: the first seq the database holds (a ring dropped the ops before it).
  Tracker(Strings& strings, const NonfiniteOptions& options, int64_t first_held = 0)
      : strings_(strings), options_(options), first_held_(first_held) {}

  // kFresh when `op` has a non-finite output that its inputs and arguments do not explain;
  // kEntered when its NaN output comes from a NaN literal or from an input holding NaN that no
  // recorded op produced (then `entry()` says which). Remembers the non-finite tensors `op`
  // passes on either way.
  Verdict judge(const OpRecord& op) {
    if (op.flags & tracer::kOpCollective) {
      if (collectives_.size() > (1u << 16)) collectives_.clear();  // bounded
      collectives_.insert(op.seq);
    }
    if (op.flags & tracer::kOpUninitOutput) {
      if (empties_.size() > (1u << 16)) empties_.clear();  // bounded
      empties_.insert(op.seq);
    }
    std::vector<Open>& open = open_[op.thread];
    while (!open.empty() && open.back().depth >= op.depth) open.pop_back();
    Nonfinite enclosing;
    bool inside_start = false;  // an enclosing op was counted as a start already
    bool inside_kernel = false;  // an enclosing op has an output of its own, judged itself
    for (const Open& o : open) {
      enclosing |= o.reaches;
      inside_start = inside_start || o.started;
      inside_kernel = inside_kernel || o.has_output;
    }

    Nonfinite in, external;
    bool from_dropped = false;  // the external NaN's producer is an op the ring dropped
    bool from_uninit = false;   // it was read from memory an `empty` returned uninitialized
    bool from_part = false;     // it was read from memory a recorded op wrote only a part of
    bool reads_uninitialized = false;    // an input is such memory, not hashed (its values unknown)
    int inputs = 0, unknown_inputs = 0;  // unknown: values not recorded (a kernel's buffer)
    // An input whose values were not recorded, made by an op a ring dropped: NaN made before
    // the ring may come in through it.
    bool unknown_from_dropped = false;
    for (const TensorRecord& t : op.tensors) {
      if (t.role != TensorRole::kInput || *never_read(strings_, t) != '\0') continue;
      ++inputs;
      Nonfinite v = of(t);
      in |= v;
      const bool dropped = t.producer != tracer::kNoSeq && t.producer < first_held_;
      const bool unknown = !(t.summary.valid && tensor_comparable(t));
      // (Or a view, made by a held op, of such an input: `aten::t` of a dropped op's output.)
      unknown_from_dropped = unknown_from_dropped ||
                             (unknown && (dropped || (t.hash != 0 && views_of_dropped_.count(t.hash))));
      // A collective's result, hashed where first read: what the other ranks sent, data from
      // outside this process as much as data no recorded op made.
      const bool from_collective =
          t.producer != tracer::kNoSeq && collectives_.count(t.producer) > 0;
      // Hashed where read after a recorded op wrote into it through a view (`buf[:8] = x` into
      // a torch.empty buffer), while no op has passed NaN on yet: that op's output held none,
      // so the NaN is in the part no recorded op wrote.
      const bool in_part = v.nan && !carried_.nan && t.status == tracer::TensorStatus::kHashed &&
                           t.producer != tracer::kNoSeq && !dropped && !from_collective;
      if ((t.producer == tracer::kNoSeq || dropped || in_part || from_collective) && !unknown &&
          seen_.find(t.hash) == seen_.end()) {
        external |= v;
        from_dropped = from_dropped || (dropped && v.nan);
        from_uninit = from_uninit || (v.nan && uninitialized_read(strings_, t));
        from_part = from_part || in_part;
      }
      if (!tensor_comparable(t)) ++unknown_inputs;
      // Memory an `empty` returned that no recorded op wrote, read unhashed by an op that
      // writes it in place (`acc += x` into a torch.empty): its garbage may be NaN.
      // (Made by the empty itself: a view of torch.tensor's buffer, which Python filled, is no
      // garbage.)
      reads_uninitialized =
          reads_uninitialized || (t.status == tracer::TensorStatus::kUninitialized &&
                                  t.producer != tracer::kNoSeq && empties_.count(t.producer) > 0);
    }
    if (unknown_inputs > 0) in |= enclosing;
    Nonfinite literal;
    for (const tracer::ArgRecord& a : op.args) literal |= literal_of(a.value);
    Nonfinite out;
    bool has_output = false;
    for (const TensorRecord& t : op.tensors) {
      has_output = has_output || t.role == TensorRole::kOutput;
      if (t.role != TensorRole::kOutput || !tensor_comparable(t) || !t.summary.valid) continue;
      out.nan |= t.summary.nan_count > 0;
      out.inf |= t.summary.inf_count > 0;
    }
    // NaN out of an op that reads uninitialized memory and no input known to hold NaN: it
    // entered with that memory, most likely.
    if (reads_uninitialized && out.nan && !in.nan && !literal.nan && !carried_.nan) {
      in.nan = external.nan = true;  // the input most likely held it
      from_uninit = true;
    }
    Nonfinite passed = in;
    passed |= literal;
    open.push_back(Open{op.depth, passed, false, has_output});
    // An input whose values were not recorded (autograd's saved tensors, a kernel's buffer)
    // may hold what the run already carries: once NaN (or Inf) was passed on anywhere, say
    // before --from-step, it explains the same kind in an output that reads one.
    const bool may_carry = unknown_inputs > 0;
    const bool made_nan = out.nan && !in.nan && !literal.nan && !(may_carry && carried_.nan) &&
                          !unknown_from_dropped;
    const bool made_inf = out.inf && !in.inf && !literal.inf && !(may_carry && carried_.inf);
    // Inf made where NaN enters (a product overflowing on the garbage of uninitialized memory
    // that also holds NaN): the NaN entering is the answer, not a start of Inf.
    const bool nan_enters = out.nan && external.nan;
    bool fresh = made_nan || (!options_.nan_only && made_inf && !nan_enters);
    // An Inf start that --nan-only looks past: counted as such, not as explained.
    bool ignored = options_.nan_only && made_inf && !made_nan;
    // A nested op that reads nothing but its enclosing kernel's buffers shows what that kernel
    // computed; the kernel's op is the one to judge. Not inside ops without outputs (scopes
    // such as DDP's `reducer::copy_bucket_to_grad`, which copies a collective's result into
    // the gradients): nothing else is judged there.
    if (op.depth > 0 && inputs > 0 && unknown_inputs == inputs && inside_kernel)
      fresh = ignored = false;
    // Before the first step asked for, a start is tracked like an explained op, and counted
    // as skipped (only).
    const bool before_window =
        options_.from_ns >= 0 ? op.start_ns < options_.from_ns : op.step < options_.from_step;
    bool counted = false;
    if (before_window) {
      // One start per op the program called: `torch.full(..., nan)`'s nested `fill_` is the
      // same start.
      if (fresh && !inside_start) ++skipped_;
      counted = fresh;
      fresh = false;
    }
    if (fresh) return Verdict::kFresh;
    // NaN came in here if the op passes on NaN (an output holding it, or a view of the NaN
    // input, which has no summary) that it read from outside or got as a literal.
    // (A bool or integer output holds no NaN: `isnan` reads NaN and passes none on.)
    bool passes_nan = out.nan;
    for (const TensorRecord& t : op.tensors)
      if (t.role == TensorRole::kOutput && t.hash != 0 && !t.summary.valid && passed.nan &&
          hashing::dtype_is_floating(t.dtype))
        passes_nan = true;
    const bool dropped_nan = unknown_from_dropped && out.nan && !in.nan && !literal.nan;
    if (dropped_nan) from_dropped = true;
    const bool enters_nan =
        passes_nan && (external.nan || (literal.nan && !in.nan) || dropped_nan);
    if (enters_nan && before_window && !counted) {
      if (!inside_start) ++skipped_;  // NaN entering is a start too
      counted = true;
    }
    if (counted) open.back().started = true;
    const bool entered_nan = enters_nan && !before_window;
    // Inf passed on from data no recorded op made (a checkpoint, NumPy): a mask's -inf, or a
    // value that went wrong outside; the first such op is named when nothing else starts.
    if (!before_window && !inf_entry_ && external.inf && !entered_nan) {
      bool passes_inf = out.inf;
      for (const TensorRecord& t : op.tensors)
        if (t.role == TensorRole::kOutput && t.hash != 0 && !t.summary.valid &&
            hashing::dtype_is_floating(t.dtype))
          passes_inf = true;  // a view of it (lift_fresh of a NumPy array)
      if (passes_inf) inf_entry_ = op;
    }
    if ((out.nan || out.inf) && !entered_nan && !counted) {
      ++(ignored ? ignored_ : explained_);
      if (!before_window && !ignored) ++carried_in_window_;
    }
    // Remember what is passed on: outputs that hold non-finite values, and outputs without
    // summaries (views) of ops that read some, or that read values a ring dropped.
    for (const TensorRecord& t : op.tensors) {
      if (t.role != TensorRole::kOutput || t.hash == 0) continue;
      if (unknown_from_dropped && !t.summary.valid) {
        if (views_of_dropped_.size() > (1u << 20)) views_of_dropped_.clear();  // bounded
        views_of_dropped_.insert(t.hash);
      }
      Nonfinite v = of(t);
      if (!t.summary.valid) v = hashing::dtype_is_floating(t.dtype) ? passed : Nonfinite{};
      if (v.nan || v.inf) {
        if (seen_.size() > (1u << 20)) seen_.clear();  // bounded
        seen_[t.hash] = v;
        carried_ |= v;
      }
    }
    if (!entered_nan) return Verdict::kExplained;
    entry_ = dropped_nan && !external.nan ? "dropped"
             : !external.nan  ? "argument"
             : from_dropped   ? "dropped"
             : from_uninit    ? "uninitialized"
             : from_part      ? "written_in_part"
                              : "input";
    return Verdict::kEntered;
  }
  // Ops whose NaN or Inf came from their inputs or arguments (not starts).
  int64_t explained() const { return explained_; }
  // Inf starts that --nan-only looks past.
  int64_t ignored() const { return ignored_; }
  // Ops before `from_step` that would have been answers.
  int64_t skipped() const { return skipped_; }
  // Ops from `from_step` on whose NaN or Inf came from their inputs (from a skipped start).
  int64_t carried_in_window() const { return carried_in_window_; }
  // The first op that passed on Inf from data no recorded op made, if any.
  const std::optional<OpRecord>& inf_entry() const { return inf_entry_; }
  // How NaN entered at the last op judged kEntered: "input", "uninitialized" (an input read
  // from memory an `empty` returned), "written_in_part" (read from memory a recorded op wrote
  // only a part of), "dropped" or "argument".
  const std::string& entry() const { return entry_; }

 private:
  struct Open {
    uint16_t depth;
    Nonfinite reaches;  // what the op's inputs and arguments hold
    bool started;       // counted as a start before --from-step
    bool has_output;    // a kernel's op, with outputs judged (not a scope such as DDP's reducer)
  };
  Nonfinite carried_;  // kinds of non-finite value some op has passed on so far
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
    Nonfinite v = literal_nonfinite(strings_.text(value));
    literals_.emplace(value, v);
    return v;
  }
  Strings& strings_;
  const NonfiniteOptions& options_;
  int64_t skipped_ = 0;
  std::unordered_map<uint64_t, Nonfinite> seen_;
  std::unordered_set<int64_t> collectives_;  // the collective ops judged so far (their seqs)
  std::unordered_set<int64_t> empties_;      // the ops of the empty family judged so far
  // Outputs without values recorded (views) of ops that read values a ring dropped.
  std::unordered_set<uint64_t> views_of_dropped_;
  std::unordered_map<tracer::StringId, Nonfinite> literals_;
  std::unordered_map<uint32_t, std::vector<Open>> open_;  // by thread: the enclosing ops
  int64_t explained_ = 0;
  int64_t ignored_ = 0;
  int64_t carried_in_window_ = 0;
  int64_t first_held_ = 0;
  std::string entry_;
  std::optional<OpRecord> inf_entry_;
};

// The note for a database that does not hold its threads' first ops (`held.dropped_start`: a
// ring kept the last ones, or a trimmed bundle a window): a start may lie in what was dropped.
std::string dropped_note(const tracer::Reader& r, const tracer::Reader::Held& held) {
  return r.path() + " holds ops from seq " + std::to_string(held.first_seq) +
         " on (a ring kept the last ones, or a bundle trimmed the earlier ones): NaN or Inf may "
         "have started in the ops it dropped";
}

json options_json(const NonfiniteOptions& options) {
  return json{{"nan_only", options.nan_only}, {"from_step", options.from_step}};
}

// Contained starts named, at most.
constexpr size_t kContainedShown = 5;

// What a process's ops before its start (or all of them) passed over, each op counted once.
struct Counts {
  int64_t explained = 0;  // NaN or Inf from their inputs or arguments
  int64_t skipped = 0;    // starts before --from-step
  int64_t ignored = 0;    // Inf starts that --nan-only looks past
  int64_t carried = 0;    // ops from --from-step on holding NaN or Inf they read (explained)
  int64_t max_step = -1;  // the last step of any op
  int64_t contained = 0;  // made and cleaned inside one top-level op
  int64_t masked = 0;     // starts whose NaN or Inf no op passed on (`masked_by`)
  // The first contained or masked starts, each an op brief with its step (and "masked_by").
  json contained_ops = json::array();
  json inf_entered = nullptr;  // the first op that passed on Inf from outside (`Tracker::inf_entry`)
  Counts& operator+=(const Counts& o) {
    contained += o.contained;
    masked += o.masked;
    for (const json& c : o.contained_ops)
      if (contained_ops.size() < kContainedShown) contained_ops.push_back(c);
    explained += o.explained;
    skipped += o.skipped;
    ignored += o.ignored;
    carried += o.carried;
    max_step = std::max(max_step, o.max_step);
    if (inf_entered.is_null()) inf_entered = o.inf_entered;
    return *this;
  }
};

// Whether the non-finite values nested op `start` made were cleaned before its top-level op
// ended: every tensor inside it that holds them (its outputs, copies and non-finite results
// made from them) was written over in place with finite values (`masked_fill_`) by then. A
// top-level start, or one whose values outlive its top-level op, is a start.
StatusOr<bool> cleaned_inside(const tracer::Reader& r, const OpRecord& start) {
  if (start.depth == 0) return false;
  // The non-finite tensors made inside and not yet cleaned, by hash, with how many tensors
  // hold it: a copy (`clone`, `x * 1`) has its original's hash, and cleaning one leaves the
  // other.
  std::map<uint64_t, int64_t> live;
  for (const TensorRecord& t : start.tensors)
    if (t.role == TensorRole::kOutput && t.summary.valid && tensor_comparable(t) &&
        (t.summary.nan_count > 0 || t.summary.inf_count > 0))
      ++live[t.hash];
  if (live.empty()) return false;
  constexpr int64_t kLookAhead = 4096;  // ops inside one top-level op, at most
  bool ended = false, escaped = false;
  // (A thread's tidx run past its op count where a --ring dropped its first ops.)
  Status st = r.scan_ops(start.thread, start.tidx + 1, start.tidx + 1 + kLookAhead, true,
                         [&](const OpRecord& o) {
    if (o.depth == 0) {
      ended = true;
      return false;
    }
    bool reads = false;
    for (const TensorRecord& t : o.tensors)
      if (t.role == TensorRole::kInput && live.count(t.hash)) reads = true;
    if (!reads) return true;
    // In place: input 0's old values are gone (first: an in-place op that leaves NaN as it
    // was, `clamp_`, writes the same hash back below).
    if (o.flags & tracer::kOpInplace)
      for (const TensorRecord& t : o.tensors)
        if (t.role == TensorRole::kInput && t.index == 0)
          if (auto it = live.find(t.hash); it != live.end() && --it->second == 0) live.erase(it);
    for (const TensorRecord& t : o.tensors) {
      if (t.role != TensorRole::kOutput) continue;
      // A view of a live tensor holds its values: not followed, so not cleaned.
      if (!t.summary.valid || !tensor_comparable(t)) {
        escaped = true;
        return false;
      }
      if (t.summary.nan_count > 0 || t.summary.inf_count > 0) ++live[t.hash];
    }
    return true;
  });
  TDBG_RETURN_IF_ERROR(st);
  return ended && !escaped && live.empty();
}

// Whether op `name` reads only its input's shape, dtype and device, never its values
// (`ones_like`: the seed of `loss.backward()`; `new_zeros`): no reader that could mask them.
bool reads_only_metadata(std::string_view name) {
  if (name.rfind("aten::", 0) == 0) name.remove_prefix(6);
  const size_t like = name.size() >= 5 ? name.size() - 5 : std::string_view::npos;
  return (like != std::string_view::npos && name.substr(like) == "_like") ||
         name.rfind("new_", 0) == 0 || name == "size" || name == "sym_size" || name == "stride" ||
         name == "numel" || name == "dim";
}

// For a start whose NaN or Inf the program masks (`torch.where(x > 0, torch.log(x), 0)`): the
// op that read it and made only finite floating values from it (aten::where), when every op
// that read it, or a view of it, did so up to the end of the next step (Python reads a loss
// after `optimizer.step()`, in the next step's count) or a look-ahead's end; "" otherwise. An
// op that reads only the shape (`ones_like`, backward's seed) is no reader. It is a start to
// report when an op reads it and makes NaN or Inf or integers (`.long()`), when Python reads
// it or a test of it (`item`, `if torch.isnan(x).any()`: a guard or a log line saw it; a
// count, `isnan(x).sum()`, is a test too), or when an op makes NaN or Inf from values not
// recorded (autograd's saved tensors, which may hold it) before any other op made NaN or Inf.
// `undone_by_backward`, when the start is a start because a backward op made NaN or Inf from
// saved values after an op had masked it (the where-over-sqrt trap), gets that masking op.
// `rejected`, when an op masked them and they are a start all the same for another reason, gets
// {"by": the masking op, "why": the reason, "op": the op that read them or made what kept
// them}: a user who wrote the mask asks why it did not count.
StatusOr<std::string> masked_after(const tracer::Reader& r, Strings& strings, const OpRecord& start,
                                   std::string* undone_by_backward, json* rejected) {
  static constexpr char kPassedOn[] =
      "an op passed them on (made NaN or Inf of them), and what it made was not masked in turn";
  std::set<uint64_t> live;    // the start's non-finite tensors, views of them and what forward
                              // ops made of them
  std::set<uint64_t> unread;  // those no op has read yet: held on, they may reach anything
  std::set<uint64_t> tests;   // non-floating results of reading them (`isnan(x)`, `x > 0`)
  for (const TensorRecord& t : start.tensors)
    if (t.role == TensorRole::kOutput && t.summary.valid && tensor_comparable(t) &&
        (t.summary.nan_count > 0 || t.summary.inf_count > 0))
      live.insert(t.hash);
  if (live.empty()) return std::string();
  unread = live;
  // For each live tensor made after the start, the first op in the chain that passed the
  // start's values on to it (`logged.sum()` of `logged.sum() + x`): the one to name if it
  // stays unread.
  std::map<uint64_t, OpRecord> passed_on_by;
  // The earliest such op behind `o`'s inputs, or null where `o` reads none of their tensors.
  auto passed_on_to = [&](const OpRecord& o) -> const OpRecord* {
    const OpRecord* first = nullptr;
    for (const TensorRecord& t : o.tensors)
      if (const auto by = passed_on_by.find(t.hash);
          t.role == TensorRole::kInput && by != passed_on_by.end() &&
          (first == nullptr || by->second.seq < first->seq))
        first = &by->second;
    return first;
  };
  // `o`'s floating outputs that may hold NaN or Inf become live and unread, passed on by
  // `root` (the first forward op in the chain), or by backward where there is none.
  auto pass_on = [&](const OpRecord& o, const std::optional<OpRecord>& root) {
    for (const TensorRecord& t : o.tensors)
      if (t.role == TensorRole::kOutput && t.hash != 0 && hashing::dtype_is_floating(t.dtype) &&
          (!(t.summary.valid && tensor_comparable(t)) || t.summary.nan_count > 0 ||
           t.summary.inf_count > 0)) {
        live.insert(t.hash);
        unread.insert(t.hash);
        if (root) passed_on_by.emplace(t.hash, *root);
      }
  };
  constexpr int64_t kLookAhead = 1 << 16;
  std::string masked_by;
  bool masked_in_forward = false;  // by the program's own op, not one autograd ran
  std::string backward_made;       // `masked_by`, once backward made NaN or Inf of them after it
  bool spread = false, inside_start = true, other_source = false;
  // Why a mask did not count, and the op that says so.
  std::string why;
  std::optional<OpRecord> why_op;
  // Spread: a start. The scan goes on only to find a mask that comes after (`if
  // torch.isinf(y).any()` before `torch.where`), to say why it does not count. Where `o`
  // reads what a forward op passed on unmasked (the loss Python reads, the gradient backward
  // makes of it), that op is why.
  auto spread_by = [&](const OpRecord& o, std::string reason) {
    if (!spread) {
      const OpRecord* passed_on = passed_on_to(o);
      why = passed_on ? std::string(kPassedOn) : std::move(reason);
      why_op = passed_on ? *passed_on : o;
    }
    spread = true;
    return masked_by.empty();
  };
  // The start's own values: its outputs and views of them. After a spread, only a mask of
  // those is one the program wrote for them (an `if torch.isnan(y).any()` before `where(.., y,
  // ..)`), not one that reads what they reached later (weights made NaN, read next step).
  std::set<uint64_t> own = live;
  // Every thread's ops, in the order they ran: backward may run on autograd's device threads.
  Status st = r.scan_ops(std::nullopt, start.seq + 1, start.seq + 1 + kLookAhead, true,
                         [&](const OpRecord& o) {
    if (o.thread == start.thread) {
      if (inside_start && o.depth > start.depth) return true;  // the start's own nested ops
      inside_start = false;
    }
    if (o.step > start.step + 1 || (spread && !masked_by.empty())) return false;
    if (reads_only_metadata(strings.text(o.name))) return true;
    bool reads = false, reads_test = false, unknown = false;
    for (const TensorRecord& t : o.tensors) {
      if (t.role != TensorRole::kInput || *never_read(strings, t) != '\0') continue;
      reads = reads || live.count(t.hash) > 0;
      reads_test = reads_test || tests.count(t.hash) > 0;
      // (An integer or bool input, a mask, holds no NaN: it has no summary to miss.)
      unknown = unknown ||
                (hashing::dtype_is_floating(t.dtype) && !(t.summary.valid && tensor_comparable(t)));
      unread.erase(t.hash);
    }
    bool nonfinite = false, any_output = false;
    for (const TensorRecord& t : o.tensors) {
      if (t.role != TensorRole::kOutput) continue;
      any_output = true;
      if (t.summary.valid && tensor_comparable(t))
        nonfinite = nonfinite || t.summary.nan_count > 0 || t.summary.inf_count > 0;
    }
    // A forward op that makes NaN or Inf of them (`1.0 / x` runs reciprocal, then mul; `log(x)
    // * 2`) passes them on: what it made must be masked in turn.
    if (nonfinite && reads && !(o.flags & tracer::kOpBackward)) {
      const OpRecord* passed_on = passed_on_to(o);
      pass_on(o, passed_on ? *passed_on : o);
      return true;
    }
    // Backward made NaN or Inf of them after the forward masked them: from the values saved
    // for it, or from the start's output itself (sqrt's backward divides by its result). A
    // later backward op may mask that in turn (the backward of a masked_fill before a softmax
    // zeroes the gradient of a fully masked row), so it is passed on, as a forward op's is;
    // where nothing masks it, the mask was undone by backward (the where-over-sqrt trap).
    // (Not where it reads what a forward op passed on unmasked: `spread_by` names that op.)
    // (Only after a mask of the program's forward: one of backward's, `nll_loss_backward` whose
    // gradient does not read a NaN loss's values, masks nothing the program wrote.)
    if (nonfinite && (reads || (unknown && !other_source)) && (o.flags & tracer::kOpBackward) &&
        !masked_by.empty() && masked_in_forward && !spread && passed_on_to(o) == nullptr) {
      if (backward_made.empty()) backward_made = masked_by;
      pass_on(o, std::nullopt);
      return true;
    }
    if (nonfinite && (reads || (unknown && !other_source)))
      return spread_by(o, "an op made NaN or Inf from them");
    if (nonfinite) {
      other_source = true;  // NaN or Inf of another start
      return true;
    }
    // An autograd node's record (`ReluBackward0`, `evaluate_function: ...`) hands the gradient
    // to the ops nested in it, which read it (`threshold_backward` masks it): not a reader.
    if (!any_output && (o.flags & tracer::kOpBackward) &&
        strings.text(o.name).rfind("aten::", 0) != 0)
      return true;
    // Python read it, or a test of it (`item()`, `bool(torch.isnan(x).any())`).
    if ((reads || reads_test) && !any_output) {
      return spread_by(o, reads ? "Python read them"
                                : "Python read a test of them (an if or a log line saw them)");
    }
    if (!reads && !reads_test) return true;
    // Whether it made finite values of its own from them: a reader that only passes a view on
    // (`resolve_conj` before `.tolist()`, `flatten`) masks nothing; the view's readers may.
    bool made_finite = false;
    for (const TensorRecord& t : o.tensors) {
      if (t.role != TensorRole::kOutput || t.hash == 0) continue;
      const bool floating = hashing::dtype_is_floating(t.dtype);
      if (reads && floating && !(t.summary.valid && tensor_comparable(t))) {
        live.insert(t.hash);  // a view of it holds its values
        if (std::any_of(o.tensors.begin(), o.tensors.end(), [&](const TensorRecord& in) {
              return in.role == TensorRole::kInput && own.count(in.hash) > 0;
            }))
          own.insert(t.hash);
      } else if (reads && floating) {
        made_finite = true;
      } else if (t.dtype == hashing::DType::kBool || (reads_test && !floating)) {
        tests.insert(t.hash);  // a test, or a count of one (`isnan(x).sum()`)
      } else if (reads && !floating) {
        // NaN made integers (`.long()`): numbers no later op can tell
        return spread_by(o,
                         "an op made integers of them (NaN as a number no later op can tell "
                         "from others)");
      }
    }
    const bool reads_own =
        std::any_of(o.tensors.begin(), o.tensors.end(), [&](const TensorRecord& t) {
          return t.role == TensorRole::kInput && own.count(t.hash) > 0;
        });
    if (reads && made_finite && masked_by.empty() &&
        (!spread || (reads_own && o.step == start.step))) {
      masked_by = strings.text(o.name) + " (seq " + std::to_string(o.seq) + ")";
      masked_in_forward = !(o.flags & tracer::kOpBackward);
    }
    return true;
  });
  TDBG_RETURN_IF_ERROR(st);
  // Masked only where every tensor holding them was read, and no reader spread them.
  if (!spread && unread.empty()) return masked_by;
  *undone_by_backward = backward_made;
  if (masked_by.empty() || !masked_in_forward || !undone_by_backward->empty()) return std::string();
  if (!spread) {
    // Kept where nothing read it by then (`dbg = y.sum()`, a loss made of them): it may reach
    // anything. Name the first op that passed them on to such a tensor, or the start itself.
    why_op = start;
    for (uint64_t h : unread)
      if (const auto by = passed_on_by.find(h);
          by != passed_on_by.end() && (why_op->seq == start.seq || by->second.seq < why_op->seq))
        why_op = by->second;
    why = why_op->seq == start.seq
              ? "its output was kept and no op read it by the end of the next step (it may reach "
                "anything later)"
              : kPassedOn;
  }
  *rejected = {{"by", masked_by}, {"why", why}, {"op", op_json(r, strings, *why_op)}};
  return std::string();
}

// The largest magnitude among `o`'s inputs' values (as `recorded_values` finds them), -1 where
// none is known or one holds NaN or Inf.
double input_magnitude(const tracer::Reader& r, Strings& strings, const OpRecord& o) {
  double m = -1;
  for (const TensorRecord& t : o.tensors) {
    if (t.role != TensorRole::kInput) continue;
    const InputValues v = recorded_values(r, strings, t);
    if (!v.summary.valid) continue;
    if (v.summary.nan_count > 0 || v.summary.inf_count > 0) return -1;
    m = std::max({m, std::fabs(v.summary.min), std::fabs(v.summary.max)});
  }
  return m;
}

// For a start made here from finite inputs of large magnitude (an overflow): the largest input
// magnitude of the same op at the same place in each step up to it, where that grew over the
// steps before its own (weights that blow up: a learning rate too large, gradients not
// clipped), or jumped in the step after the first that ran it ("jumped": one update, or that
// step's data), as
// {"steps": [{"step", "magnitude"}...], "steps_seen"}: the first two and the last six. Null
// where it did not grow, or too few steps ran it.
StatusOr<json> input_growth(const tracer::Reader& r, Strings& strings, const OpRecord& start) {
  constexpr double kLarge = 1e4, kGrowth = 10;
  const double here = input_magnitude(r, strings, start);
  if (here < kLarge) return json(nullptr);
  std::map<int64_t, double> by_step;
  Status st = r.scan_ops(start.thread, 0, start.tidx, true, [&](const OpRecord& o) {
    if (o.name != start.name || o.user_frame != start.user_frame || o.depth != start.depth)
      return true;
    if (const double m = input_magnitude(r, strings, o); m >= 0)
      by_step[o.step] = std::max(by_step[o.step], m);
    return true;
  });
  TDBG_RETURN_IF_ERROR(st);
  by_step[start.step] = std::max(by_step[start.step], here);
  if (by_step.size() < 2) return json(nullptr);
  const double first = by_step.begin()->second;
  // In the step after the first that ran it: a jump after one update (a learning rate far too
  // large), or this step's data; that cannot be told apart.
  const bool jumped = by_step.size() == 2 && here >= kGrowth * kGrowth * first;
  // Grown already before its step: an input scaled at one step only is no growth.
  if (!jumped && (by_step.size() < 3 || std::prev(by_step.end(), 2)->second < kGrowth * first))
    return json(nullptr);
  // Where it began to grow: the first step from which it stays above 10x its first step's
  // size (a warmup's end, a schedule's step up), shown among the steps listed.
  int64_t grew_from = -1;
  for (const auto& [step, magnitude] : by_step)
    if (magnitude < kGrowth * first)
      grew_from = -1;
    else if (grew_from < 0)
      grew_from = step;
  json steps = json::array();
  size_t k = 0;
  int64_t before = -1;  // the step listed before this one
  for (const auto& [step, magnitude] : by_step) {
    if (k < 2 || k + 6 >= by_step.size() || step == grew_from || (k > 0 && before == grew_from))
      steps.push_back({{"step", step}, {"magnitude", magnitude}});
    before = step;
    ++k;
  }
  json out{{"steps", std::move(steps)}, {"steps_seen", by_step.size()}, {"jumped", jumped}};
  if (grew_from >= 0 && !jumped) out["grew_from"] = grew_from;
  return out;
}

// The first start in process `p` of `run`, as the "first_nonfinite" object, or null when the
// process has none; `counts` says what its ops passed over when it has none.
// `first_held`: the first seq its database holds (a ring's or a trimmed bundle's first op).
StatusOr<json> process_start(const tracer::Run& run, size_t p, const NonfiniteOptions& options,
                             int64_t first_held, Counts* counts) {
  const tracer::Reader& r = *run.processes[p];
  Strings strings(r);
  Tracker tracker(strings, options, first_held);
  std::optional<OpRecord> found;
  Tracker::Verdict verdict = Tracker::Verdict::kExplained;
  int64_t max_step = -1;
  int64_t resume = 0;      // the seq the search goes on from
  int64_t contained = 0;   // starts made and cleaned inside one top-level op, passed over
  int64_t masked = 0;      // starts whose NaN or Inf the program masked, passed over
  json contained_ops = json::array();
  Counts before;
  std::string entry;  // how NaN entered at `op`, when no op made it
  std::string mask_undone;  // the op that masked `op`'s NaN or Inf before backward used it
  json mask_rejected;       // why a mask of `op`'s NaN or Inf did not count (`masked_after`)
  OpRecord op;
  // A start that turns out to be contained is passed over, and the search goes on after it.
  while (true) {
    found.reset();
    Status st = r.scan_ops(std::nullopt, resume, std::numeric_limits<int64_t>::max(), true,
                           [&](const OpRecord& op) {
                             max_step = std::max(max_step, op.step);
                             verdict = tracker.judge(op);
                             if (verdict == Tracker::Verdict::kExplained) return true;
                             found = op;
                             return false;
                           });
    TDBG_RETURN_IF_ERROR(st);
    if (!found) {
      TDBG_RETURN_IF_ERROR(r.lookup_status());  // an argument's text may have been misread
      *counts = Counts{tracker.explained(), tracker.skipped(), tracker.ignored(),
                       tracker.carried_in_window(), max_step, contained, masked, contained_ops};
      if (const auto& entry = tracker.inf_entry()) {
        counts->inf_entered = op_json(r, strings, *entry);
        counts->inf_entered["process"] = p;
      }
      return json(nullptr);
    }
    // Before the descent below judges the start's nested ops, which come after it.
    before = Counts{tracker.explained(), tracker.skipped(), tracker.ignored(), 0, -1, contained,
                    masked, contained_ops};
    op = std::move(*found);
    if (verdict == Tracker::Verdict::kFresh) {
      // A parent op (aten::linear) starts before the child (aten::addmm) that computed the
      // value: go down to the first child with a non-finite output, level by level.
      bool descended = true;
      while (descended) {
        descended = false;
        std::optional<OpRecord> child;
        uint16_t depth = op.depth;
        st = r.scan_ops(op.thread, op.tidx + 1, std::numeric_limits<int64_t>::max(), true,
                        [&](const OpRecord& o) {
                          if (o.depth <= depth) return false;
                          if (tracker.judge(o) != Tracker::Verdict::kFresh) return true;
                          child = o;
                          return false;
                        });
        TDBG_RETURN_IF_ERROR(st);
        if (child) {
          op = std::move(*child);
          descended = true;
        }
      }
      // Made inside a top-level op and cleaned there before anything outside it read it: no
      // start of the run's (torch's norm backward divides by a zero norm, then masks the 0/0).
      // Or masked by the program (a safe log): its NaN reaches nothing, and a start that does
      // may come later.
      TDBG_ASSIGN_OR_RETURN(const bool cleaned, cleaned_inside(r, op));
      std::string masked_by;
      if (!cleaned) {
        mask_rejected = nullptr;
        TDBG_ASSIGN_OR_RETURN(masked_by,
                              masked_after(r, strings, op, &mask_undone, &mask_rejected));
      }
      if (cleaned || !masked_by.empty()) {
        ++(cleaned ? contained : masked);
        if (contained_ops.size() < kContainedShown) {
          contained_ops.push_back(op_json(r, strings, op));
          if (!cleaned) contained_ops.back()["masked_by"] = masked_by;
        }
        resume = op.seq + 1;
        continue;
      }
    } else {
      // The op where NaN entered is the answer as it stands: its nested ops read the same data.
      entry = tracker.entry();
    }
    break;
  }
  json j = op_json(r, strings, op);
  j["process"] = p;
  j["start_ns"] = op.start_ns;
  // The OS thread id, to tell a thread other than the first one (a Python thread, a pool).
  for (const tracer::ThreadRecord& t : r.threads())
    if (t.id == op.thread) j["os_tid"] = t.os_tid;
  j["entered"] = entry.empty() ? json(nullptr) : json(entry);
  if (!mask_undone.empty()) j["masked_then_backward"] = mask_undone;
  if (entry.empty()) {
    TDBG_ASSIGN_OR_RETURN(json growth, input_growth(r, strings, op));
    if (!growth.is_null()) j["input_growth"] = std::move(growth);
  }
  if (mask_rejected.is_object()) j["mask_rejected"] = std::move(mask_rejected);
  // Step 1 that is still the loop's first iteration (several optimizers), as diff says it.
  if (in_first_iteration(r, op.step, op.seq)) j["first_iteration"] = true;
  if (entry == "input" || entry == "written_in_part") {
    // What the recording left out may have made it: the ops before a --steps window, or the
    // ops --ops did not select.
    if (std::string selection = recorded_selection({&r}); !selection.empty())
      j["recorded_only"] = selection;
    // In a --steps window's first step, made before the window most likely.
    if (const int64_t first = window_first_step(r); first >= 0)
      j["window_first_step"] = op.step == first;
    // Children this process forked (DataLoader workers: meta `forks`, "N@STEP"), which a
    // --steps window leaves out, their ops being all of their own step 0.
    const std::string forks = r.meta("forks");
    if (const size_t at = forks.find('@'); !r.meta("steps").empty() && at != std::string::npos)
      j["forks_left_out"] = {{"count", std::atoll(forks.c_str())},
                             {"first_step", std::atoll(forks.c_str() + at + 1)}};
  }
  if (entry == "dropped") {
    // Where the database begins: the NaN was made before that step.
    auto held = r.held();
    if (held.ok() && held->any)
      if (auto first = r.op(held->first_seq)) j["first_held_step"] = first->step;
  }
  // The non-finite output; where NaN entered through a view, the view.
  int out = nonfinite_output(op);
  for (size_t k = 0; out < 0 && k < op.tensors.size(); ++k)
    if (op.tensors[k].role == TensorRole::kOutput) out = static_cast<int>(k);
  j["tensor"] = out < 0 ? json(nullptr) : tensor_json(strings, op.tensors[static_cast<size_t>(out)]);
  // All outputs: another one may say why (a loss's total weight of 0 makes its 0/0).
  json outputs = json::array();
  for (const TensorRecord& t : op.tensors)
    if (t.role == TensorRole::kOutput) outputs.push_back(tensor_json(strings, t));
  j["outputs"] = std::move(outputs);
  json inputs = json::array();
  bool uninitialized_part = false;  // NaN read from the unwritten part of an `empty`'s memory
  for (const TensorRecord& t : op.tensors) {
    if (t.role != TensorRole::kInput) continue;
    json in = tensor_json(strings, t);
    const char* unread = never_read(strings, t);
    if (*unread != '\0') {
      in["not_read"] = unread;  // no producer, no values: nothing more to say
      in["finite"] = nullptr;
      inputs.push_back(std::move(in));
      continue;
    }
    if (entry == "written_in_part" && t.status == tracer::TensorStatus::kHashed &&
        t.producer != tracer::kNoSeq && t.summary.valid && t.summary.nan_count > 0) {
      // Its NaN is in the part the op that wrote into it did not write: memory from the
      // `empty` family, most likely. Unless that op wrote all of it (an output of its sizes
      // and dtype, finite): then the NaN was written after it, where the recording does not
      // follow this tensor (`.numpy()`, a data pointer). Or it wrote into it through a view
      // of another dtype (`a.view(torch.int32)[0] = bits`): the NaN is the bits it wrote.
      const auto prod = r.op(t.producer);
      bool whole = false, same_dtype = false;
      std::optional<hashing::DType> other;
      if (prod)
        for (const TensorRecord& o : prod->tensors) {
          if (o.role != TensorRole::kOutput) continue;
          whole = whole || (o.shape == t.shape && o.dtype == t.dtype);
          same_dtype = same_dtype || o.dtype == t.dtype;
          other = o.dtype;
        }
      if (prod && whole) {
        in["written_whole_by"] = op_brief_json(r, strings, *prod);
      } else if (prod && other && !same_dtype) {
        in["written_as_by"] = op_brief_json(r, strings, *prod);
        in["written_as_by"]["dtype"] = hashing::dtype_name(*other);
      } else {
        if (prod) in["written_in_part_by"] = op_brief_json(r, strings, *prod);
        if (auto maker = uninitialized_maker(r, strings, op, t)) {
          in["uninitialized_from"] = op_brief_json(r, strings, *maker);
          uninitialized_part = true;
        }
      }
    } else if (t.producer != tracer::kNoSeq) {
      const auto prod = r.op(t.producer);  // (none where a ring dropped it)
      if (prod && t.status == tracer::TensorStatus::kUninitialized &&
          (prod->flags & tracer::kOpUninitOutput)) {
        // Memory the `empty` that made it returned, unwritten since.
        in["uninitialized_from"] = op_brief_json(r, strings, *prod);
      } else if (prod) {
        in["producer"] = op_brief_json(r, strings, *prod);
        // A view of other bits as this dtype (`x.view(torch.float32)` of int32 data): its
        // NaN may be bits written as integers.
        if (strings.text(prod->name) == "aten::view")
          for (const TensorRecord& base : prod->tensors)
            if (base.role == TensorRole::kInput && base.index == 0 && base.dtype != t.dtype)
              in["reinterprets"] = hashing::dtype_name(base.dtype);
      }
    } else if (uninitialized_read(strings, t)) {
      auto maker = uninitialized_maker(r, strings, op, t);
      in["uninitialized_from"] = maker ? op_brief_json(r, strings, *maker) : json(true);
    }
    const InputValues values = recorded_values(r, strings, t);
    in["finite"] = values.finite ? json(*values.finite) : json(nullptr);
    if (values.summary.valid) {
      in["values"] = summary_json(values.summary);
      in["values_of"] = values.summary_of;
      if (values.viewed_producer != tracer::kNoSeq) {
        in["viewed_producer"] = values.viewed_producer;
        // By name and line: the op that made the values, not only the view taken of them.
        if (auto viewed = r.op(values.viewed_producer))
          in["viewed_producer_op"] = op_brief_json(r, strings, *viewed);
      }
    } else if (t.producer == tracer::kNoSeq && (op.flags & tracer::kOpBackward)) {
      // Values a backward op reads that no recorded op made: most likely a tensor autograd
      // saved from the forward op (exp saves its result, sqrt its output, mul its operands),
      // unpacked as a new tensor. The forward op's tensors of its dtype and shape are the
      // candidates, with what the recording holds of their values.
      const int64_t fwd = forward_seq_of(r, op);
      if (auto forward = fwd == tracer::kNoSeq ? std::nullopt : r.op(fwd)) {
        json candidates = json::array();
        for (const TensorRecord& ft : forward->tensors) {
          if (ft.dtype != t.dtype || ft.shape != t.shape) continue;
          json c = {{"role", ft.role == TensorRole::kOutput ? "output" : "input"},
                    {"index", ft.index}};
          const InputValues fv = recorded_values(r, strings, ft);
          c["finite"] = fv.finite ? json(*fv.finite) : json(nullptr);
          if (fv.summary.valid) c["values"] = summary_json(fv.summary);
          candidates.push_back(std::move(c));
        }
        if (!candidates.empty())
          in["saved_from"] = {{"op", op_brief_json(r, strings, *forward)},
                              {"tensors", std::move(candidates)}};
      }
    }
    inputs.push_back(std::move(in));
  }
  // NaN in an input no recorded op made, of the shape and dtype a collective returned shortly
  // before (a hand-written dist.all_reduce, whose result is hashed only when next read): it
  // came in with the values of the ranks that collective gathered.
  // (Recordings since 2026-12-06 name the collective as the producer of its result.)
  if (entry == "input") {
    const TensorRecord* held = nullptr;
    std::optional<OpRecord> collective;
    for (const TensorRecord& t : op.tensors) {
      if (t.role != TensorRole::kInput || !t.summary.valid || t.summary.nan_count == 0) continue;
      if (t.producer == tracer::kNoSeq) {
        held = &t;
      } else if (auto made = r.op(t.producer); made && (made->flags & tracer::kOpCollective)) {
        collective = made;
      }
    }
    if (held && !collective)
      (void)r.scan_ops(std::nullopt, std::max<int64_t>(0, op.seq - 4096), op.seq, true,
                       [&](const OpRecord& o) {
                         if (strings.text(o.name).rfind("c10d::", 0) != 0) return true;
                         for (const TensorRecord& t : o.tensors)
                           if (t.role == TensorRole::kOutput && t.shape == held->shape &&
                               t.dtype == held->dtype &&
                               strings.text(t.reason).rfind("collective result", 0) == 0)
                             collective = o;
                         return true;
                       });
    if (collective) j["collective"] = op_brief_json(r, strings, *collective);
  }
  // Read from memory a recorded op wrote only a part of: said as uninitialized memory where
  // an `empty` returned it, else as data from outside torch's ops (the input says which op
  // wrote the rest).
  if (entry == "written_in_part") j["entered"] = uninitialized_part ? "uninitialized" : "input";
  // NaN "made" by an op that cannot make it from finite inputs this small (a matmul, an add):
  // the values recorded for an input are stale. It was changed outside torch's ops after it
  // was hashed (a write through .numpy() or a data pointer), which the recording cannot see.
  if (entry.empty() && j["tensor"].is_object() && makes_no_nan_from_finite(strings.text(op.name))) {
    const json& out = j["tensor"];
    const json& sum = out.value("summary", json());
    const std::string dtype = out.value("dtype", std::string());
    bool all_small = sum.is_object() && sum.value("nan", int64_t{0}) > 0 &&
                     (dtype == "float32" || dtype == "float64");
    for (const tracer::ArgRecord& a : op.args) {
      const std::string& text = strings.text(a.value);
      char* end = nullptr;
      const double value = std::strtod(text.c_str(), &end);
      if (end != text.c_str() && !(std::fabs(value) < 1e6)) all_small = false;  // alpha=1e30
    }
    json stale = json::array();
    for (const json& in : inputs) {
      if (in.contains("not_read")) continue;
      const json& v = in.value("values", json());
      const json& finite = in.value("finite", json());
      if (!finite.is_boolean() || !finite.get<bool>() || !v.is_object() ||
          std::max(std::fabs(v.value("min", 0.0)), std::fabs(v.value("max", 0.0))) >= 1e15) {
        all_small = false;
        break;
      }
      // A carried hash (not read again at this op), made by a recorded op.
      if (in.value("status", "") != "hashed" && in.value("producer", json()).is_object())
        stale.push_back({{"index", in["index"]}, {"producer", in["producer"]}});
    }
    if (all_small && !stale.empty()) j["stale_inputs"] = std::move(stale);
  }
  // NaN "made" inside a collective's own work (DDP's reducer copying its all-reduced bucket
  // into the gradients) by an op reading an input whose values were not recorded: the
  // collective wrote that input, with what the other ranks sent. Named as the collective the
  // thread ran last (DDP's allreduce_), else the op around it.
  if (entry.empty() && !r.meta("rank").empty() &&
      std::any_of(inputs.begin(), inputs.end(), [](const json& in) {
        return !in.value("finite", json()).is_boolean() && !in.contains("not_read");
      })) {
    json via;
    for (const json& e : j.value("enclosing", json::array())) {
      const std::string name = e.value("op", std::string());
      if (name.find("ddp.reducer") == std::string::npos && name.rfind("c10d::", 0) != 0) continue;
      if (auto collective = last_collective_before(r, strings, op.thread, op.tidx))
        via = op_brief_json(r, strings, *collective);
      else if (auto around = r.op(e.value("seq", tracer::kNoSeq)))
        via = op_brief_json(r, strings, *around);
      break;
    }
    if (!via.is_null()) {
      j["entered"] = "input";
      j["collective"] = std::move(via);
    }
  }
  j["inputs"] = std::move(inputs);
  // The non-tensor arguments (an exponent, a learning rate, a fill value): they explain as
  // much as the inputs do.
  json args = json::array();
  for (const tracer::ArgRecord& a : op.args) {
    json arg = {{"index", a.index}, {"name", strings.text(a.name)}, {"value", strings.text(a.value)}};
    if (entry == "argument" && !j.contains("argument") && literal_nonfinite(strings.text(a.value)).nan)
      j["argument"] = arg;
    args.push_back(std::move(arg));
  }
  j["args"] = std::move(args);
  // An id that did not resolve: the names above are wrong (empty), and so may be the answer.
  TDBG_RETURN_IF_ERROR(r.lookup_status());
  j["explained_before"] = before.explained;
  j["skipped_before"] = before.skipped;
  j["ignored_before"] = before.ignored;
  // Inf the start may have read, from data no recorded op made (a batch with an Inf).
  if (const auto& entry = tracker.inf_entry(); entry && entry->seq < op.seq)
    j["inf_entered"] = op_json(r, strings, *entry);
  j["contained_before"] = before.contained;
  j["masked_before"] = before.masked;
  j["contained_starts_before"] = before.contained_ops;
  return j;
}

// For each process of `run`, the index of the process whose DataLoader worker it is (its
// parent among the run's processes), or -1.
std::vector<int> worker_parents(const tracer::Run& run) {
  std::unordered_map<std::string, int> by_pid;
  for (size_t p = 0; p < run.processes.size(); ++p) {
    const std::string pid = run.processes[p]->meta("pid");
    if (!pid.empty()) by_pid.emplace(pid, static_cast<int>(p));
  }
  std::vector<int> parent(run.processes.size(), -1);
  for (size_t p = 0; p < run.processes.size(); ++p) {
    const tracer::Reader& r = *run.processes[p];
    if (r.meta("worker").empty()) continue;
    auto it = by_pid.find(r.meta("ppid"));
    if (it != by_pid.end() && it->second != static_cast<int>(p)) parent[p] = it->second;
  }
  return parent;
}

// Which of the processes' starts to report (indices into `starts`, each a "first_nonfinite"
// object): the earliest by op start time, CLOCK_MONOTONIC, which processes on one host share.
// One exception: NaN that entered a process through an input no recorded op produced, where a
// DataLoader worker of that process has a start of its own, came from the worker most likely
// (a batch arrives through shared memory, unrecorded): the worker's start is the answer, its
// made-here start first, and `why` says so. Only a worker that was running then (its first op
// before the entry): NaN that entered before the workers were forked (written into the
// dataset by the main process) is the main process's own.
size_t choose_start(const tracer::Run& run, const std::vector<json>& starts, std::string* why) {
  auto earliest = [&](const std::function<bool(const json&)>& eligible) {
    int best = -1;
    for (size_t k = 0; k < starts.size(); ++k) {
      if (!eligible(starts[k])) continue;
      if (best < 0 || starts[k]["start_ns"].get<int64_t>() <
                          starts[static_cast<size_t>(best)]["start_ns"].get<int64_t>())
        best = static_cast<int>(k);
    }
    return best;
  };
  const size_t first = static_cast<size_t>(earliest([](const json&) { return true; }));
  const json& f = starts[first];
  if (f["entered"] != "input") return first;
  const std::vector<int> parents = worker_parents(run);
  const int consumer = f["process"].get<int>();
  const int64_t entered_ns = f["start_ns"].get<int64_t>();
  auto running_by_then = [&](size_t p) {
    const tracer::Reader& w = *run.processes[p];
    const auto held = w.held();
    if (!held.ok() || !held->any) return false;
    const auto first_op = w.op(held->first_seq);
    return first_op && first_op->start_ns <= entered_ns;
  };
  auto of_worker = [&](const json& s) {
    const size_t p = s["process"].get<size_t>();
    return parents[p] == consumer && running_by_then(p);
  };
  int pick = earliest([&](const json& s) { return of_worker(s) && s["entered"].is_null(); });
  if (pick < 0) pick = earliest(of_worker);
  if (pick < 0) return first;
  *why = "process " + std::to_string(consumer) + " read NaN earlier, at " +
         f["op"].get<std::string>() + " (seq " + std::to_string(f["seq"].get<int64_t>()) +
         "), through an input no recorded op produced: a batch from this DataLoader worker, most "
         "likely";
  return static_cast<size_t>(pick);
}

}  // namespace

int64_t nonfinite_passed_over(const json& result) {
  int64_t ops = 0;
  for (const char* key : {"explained", "skipped", "ignored", "contained", "masked"})
    ops += result.value(key, int64_t{0});
  return ops;
}

// Where step `step` begins in time in the processes that count steps (the end of the last
// optimizer step before it): CLOCK_MONOTONIC ns, or -1 where none tells.
int64_t step_begins_ns(const tracer::Run& run, int64_t step) {
  int64_t ns = -1;
  for (const auto& r : run.processes) {
    if (!r->meta("worker").empty()) continue;
    const auto steps = step_regions(*r);
    const auto before = steps.find(step - 1);
    if (before == steps.end()) continue;
    for (const tracer::RegionRecord& g : before->second)
      if (const auto op = g.end_seq == tracer::kNoSeq ? std::nullopt : r->op(g.end_seq);
          op && op->start_ns > ns)
        ns = op->start_ns;
  }
  return ns;
}

StatusOr<json> first_nonfinite(const tracer::Run& run, const NonfiniteOptions& options) {
  Counts counts;
  json notes = json::array();
  for (const std::string& line : run.skipped) notes.push_back(line);
  // A recording that selected ops (--steps, --ops) holds only those: said once.
  for (const auto& r : run.processes) {
    const std::string selection = recorded_selection({r.get()});
    if (selection.empty()) continue;
    notes.push_back("only the ops the recording selected were looked at (" + selection +
                    "): NaN or Inf may have started in ops it left out");
    break;
  }
  // Every process has its own first start (a DataLoader worker's ops come before the main
  // process reads the batch they made); each is found, then one is chosen.
  std::vector<json> starts;
  std::set<std::string> hosts;
  std::string lost_text;  // a process whose recording stopped short: nothing can be finite
  std::string lost_first;  // the first such process and where it stopped, as `recording_lost` says
  std::optional<int64_t> worker_from_ns;  // where --from-step begins, for DataLoader workers
  for (size_t p = 0; p < run.processes.size(); ++p) {
    const tracer::Reader& r = *run.processes[p];
    TDBG_ASSIGN_OR_RETURN(const tracer::Reader::Held held, r.held());
    // A bundle's window: the ops it holds of those its process recorded.
    const json window = json::parse(r.meta("bundle_window"), nullptr, /*allow_exceptions=*/false);
    // (Its end, where the window reaches past the run's last op: that op.)
    const int64_t last_seq = window.is_object() ? window.value("recorded_last_seq", int64_t{0}) : 0;
    const std::string window_text =
        window.is_object()
            ? r.path() + " holds a bundle's window of ops #" +
                  std::to_string(window.value("from_seq", int64_t{0})) + " to #" +
                  std::to_string(std::min(window.value("to_seq", int64_t{0}) - 1, last_seq)) +
                  " of the " + std::to_string(last_seq + 1) + " its process recorded"
            : std::string();
    if (held.dropped_start)
      notes.push_back(window_text.empty()
                          ? dropped_note(r, held)
                          : window_text +
                                ": NaN or Inf may have started in the ops before it (the "
                                "bundle's README and nonfinite.json say where the whole "
                                "run's first one was)");
    // A process whose recording stopped short (a full disk), or one still recording or
    // killed before it closed its database: the answer covers what it holds. One note each
    // (a short recording may also have failed to close).
    const std::string lost = recording_lost(r);
    const std::string who = "process " + std::to_string(p) + " (pid " + r.meta("pid") + ") ";
    if (!lost.empty())
      notes.push_back(who + lost + ": only what it holds is looked at");
    else if (r.meta("end_time_ns").empty())
      notes.push_back(who + process_ending(r) + ": only what it committed is looked at");
    else if (const std::string status = r.meta("exit_status"); !status.empty() && status != "0")
      // A crash or an error exit: a NaN the program would have made later was never made.
      notes.push_back(who + process_ending(r) + ": only what it ran until then is looked at");
    if (!lost.empty() && lost_text.empty()) {
      lost_text = "recorded only in part: process " + std::to_string(p) + " " + lost +
                  "; no NaN or Inf starts in what it holds";
      lost_first = "process " + std::to_string(p) + " " + lost;
    }
    hosts.insert(r.meta("host"));
    Counts c;
    // A DataLoader worker counts no steps: --from-step is the time the step begins (found
    // once, for the first worker).
    NonfiniteOptions own = options;
    if (options.from_step > 0 && !r.meta("worker").empty()) {
      if (!worker_from_ns) worker_from_ns = step_begins_ns(run, options.from_step);
      own.from_ns = *worker_from_ns;
    }
    TDBG_ASSIGN_OR_RETURN(json start, process_start(run, p, own, held.first_seq, &c));
    // A bundle's window that left out the ops after it, and holds no start: a later start is
    // not in the bundle (one it holds comes before any after it).
    if (start.is_null() && window.is_object() &&
        window.value("to_seq", INT64_MAX) <= window.value("recorded_last_seq", int64_t{-1})) {
      const std::string cut = window_text +
                              ": NaN or Inf may have started in the ops after it (the "
                              "bundle's README and nonfinite.json say where the "
                              "whole run's first one was)";
      notes.push_back(cut);
      if (lost_text.empty()) lost_text = "a bundle's window: " + cut;
    }
    if (start.is_null()) {
      counts += c;
    } else {
      starts.push_back(std::move(start));
    }
  }
  // Without tensor summaries (--hash none) nothing can be found: not "finite".
  const bool any_values = std::any_of(run.processes.begin(), run.processes.end(),
                                      [](const auto& r) { return r->meta("hash_mode") != "none"; });
  // Nor in a run that holds no op (a recording whose disk was full, a program killed before
  // its first op).
  const bool any_ops = std::any_of(run.processes.begin(), run.processes.end(),
                                   [](const auto& r) { return r->op_count() > 0; });
  if (starts.empty() && (!any_values || !any_ops)) {
    // A disk full before the first commit, or a --steps window or --ops pattern that
    // selected nothing (as diff says it): that is why.
    const std::string none_why = !lost_first.empty() ? lost_first : selected_none(run);
    return json{
        {"status", "unchecked"},
        {"first_nonfinite", nullptr},
        {"reason", !any_ops && !none_why.empty()
                       ? "holds no op: " + none_why + "; there are no values to look in"
                   : !any_ops ? std::string("holds no op (none was recorded, or none yet "
                                            "where a process is still recording): there are "
                                            "no values to look in")
                              : std::string("was recorded with --hash none: it holds no tensor "
                                            "values to look in (record with --hash outputs "
                                            "or all)")},
        {"run", run.path},
        {"options", options_json(options)},
        {"notes", notes}};
  }
  // Ops the recording lost may hold the start: not "finite".
  if (starts.empty() && !lost_text.empty()) {
    return json{{"status", "unchecked"},
                {"first_nonfinite", nullptr},
                {"reason", lost_text},
                {"run", run.path},
                {"options", options_json(options)},
                {"notes", notes}};
  }
  // A --from-step past the run's last step looks at nothing: not "finite".
  if (starts.empty() && options.from_step > 0 && counts.max_step < options.from_step) {
    return json{{"status", "unchecked"},
                {"first_nonfinite", nullptr},
                {"reason", "recorded up to step " + std::to_string(counts.max_step) +
                               ": no op is at step " + std::to_string(options.from_step) +
                               " or later to look in"},
                {"run", run.path},
                {"options", options_json(options)},
                {"notes", notes}};
  }
  if (starts.empty()) {
    json none{{"status", "finite"},
              {"first_nonfinite", nullptr},
              {"explained", counts.explained},
              {"skipped", counts.skipped},
              {"ignored", counts.ignored},
              {"contained", counts.contained},
              {"masked", counts.masked},
              {"inf_entered", counts.inf_entered},
              {"contained_starts", counts.contained_ops},
              {"run", run.path},
              {"options", options_json(options)},
              {"notes", notes}};
    // NaN or Inf from step N on that a start before it passed on: not finite, only not new.
    if (counts.skipped > 0 && counts.carried > 0) {
      none["status"] = "carried";
      none["carried"] = counts.carried;
    }
    return none;
  }
  // Starts --from-step skipped in processes that hold none from it: a DataLoader worker's,
  // most likely, whose batch the answer may have read (workers count no steps: a start counts
  // as before the step by the time it ran, and a worker loads batches ahead of the step that
  // reads them).
  if (options.from_step > 0 && counts.skipped > 0)
    notes.push_back(std::to_string(counts.skipped) + " start(s) before step " +
                    std::to_string(options.from_step) +
                    " were skipped in processes that hold none from it (a DataLoader worker "
                    "loads batches ahead of the step that reads them): run without --from-step "
                    "to see them");
  if (starts.size() > 1 && hosts.size() > 1)
    notes.push_back("the processes ran on " + std::to_string(hosts.size()) +
                    " hosts, whose clocks differ: which start came first is uncertain");
  std::string why;
  const size_t chosen = choose_start(run, starts, &why);
  json j = std::move(starts[chosen]);
  // One DataLoader worker's database opened alone: still a worker, whose step says nothing.
  if (run.processes.size() == 1 && !run.processes[0]->meta("worker").empty())
    j["worker"] = run.processes[0]->meta("worker");
  if (run.processes.size() > 1) {
    j["process_info"] = process_json(run, j["process"].get<size_t>());
    j["processes"] = run.processes.size();
    // The other processes' starts, earliest first: where else NaN or Inf began.
    const std::vector<int> parents = worker_parents(run);
    std::vector<const json*> others;
    for (size_t k = 0; k < starts.size(); ++k)
      if (k != chosen) others.push_back(&starts[k]);
    std::stable_sort(others.begin(), others.end(), [](const json* a, const json* b) {
      return (*a)["start_ns"].get<int64_t>() < (*b)["start_ns"].get<int64_t>();
    });
    json other_starts = json::array();
    for (const json* s : others) {
      const json& src = (*s)["source"];
      std::string file = src.is_object() ? src["file"].get<std::string>() : "";
      file = file.substr(file.rfind('/') + 1);  // the base name, as in BRIEF; npos + 1 is 0
      other_starts.push_back(
          {{"process", process_json(run, (*s)["process"].get<size_t>())},
           {"seq", (*s)["seq"]}, {"op", (*s)["op"]}, {"step", (*s)["step"]},
           {"thread", (*s)["thread"]}, {"start_ns", (*s)["start_ns"]}, {"entered", (*s)["entered"]},
           {"source", src.is_object() ? json(frame_text(file, src["line"].get<int64_t>(),
                                                        src.value("function", std::string()), true))
                                      : json("")}});
      if (s->contains("collective")) other_starts.back()["collective"] = (*s)["collective"];
      // Inputs whose values were not recorded (--hash outputs, a sparse tensor): NaN may have
      // come in through them (a batch from a DataLoader worker), not been made there.
      int64_t unknown = 0;
      for (const json& in : s->value("inputs", json::array()))
        if (!in.value("finite", json()).is_boolean() && !in.contains("not_read")) ++unknown;
      if (unknown > 0) other_starts.back()["inputs_unknown"] = unknown;
      // NaN that entered a process with DataLoader workers (or may have, through inputs whose
      // values were not recorded), one of which has a start: its batches come from that
      // worker (the earliest such start; `choose_start` picked it where it was the consumer's).
      if ((*s)["entered"] == "input" || (unknown > 0 && (*s)["entered"].is_null())) {
        const int consumer = (*s)["process"].get<int>();
        const json* from = nullptr;
        for (size_t k = 0; k < starts.size(); ++k)
          if (const json& w = k == chosen ? j : starts[k];  // (the chosen one moved to j)
              parents[w["process"].get<size_t>()] == consumer &&
              (!from || w["start_ns"].get<int64_t>() < (*from)["start_ns"].get<int64_t>()))
            from = &w;
        if (from)
          other_starts.back()["batches_from"] = process_json(run, (*from)["process"].get<size_t>());
      }
    }
    j["other_starts"] = std::move(other_starts);
    j["chosen_because"] = why.empty() ? json("earliest") : json(why);
  }
  // The source lines shown: C++ frames without the lines their binary could have given,
  // Python files edited since the recording.
  std::set<std::string> line_notes;
  for (const auto& r : run.processes)
    for (const std::string& note : source_line_notes(*r))
      if (line_notes.insert(note).second) notes.push_back(note);
  return json{{"status", "nonfinite"}, {"first_nonfinite", std::move(j)}, {"run", run.path},
              {"options", options_json(options)}, {"notes", notes}};
}

}  // namespace tdbg::diff
