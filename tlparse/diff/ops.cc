// Op-level building blocks of the diff engine: string caches, the windowed op cursor,
// signatures, op comparison and JSON descriptions of ops, frames and tensors.
#include "tlparse/diff/ops.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <functional>

#include "base/cpp_names.h"
#include "tlparse/diff/native_lines.h"

namespace tdbg::diff {

using tracer::OpRecord;
using tracer::TensorRecord;
using tracer::TensorRole;
using tracer::TensorStatus;

const Strings::Entry& Strings::get(tracer::StringId id) {
  auto it = entries_.find(id);
  if (it != entries_.end()) return it->second;
  Entry e;
  if (id != 0) e.text = reader_.string(id);
  e.hash = std::hash<std::string>{}(e.text) * 0x9E3779B97F4A7C15ull + 1;
  const size_t strides = e.text.find(" strides ");
  e.shape_hash = strides == std::string::npos
                     ? e.hash
                     : std::hash<std::string>{}(e.text.substr(0, strides)) * 0x9E3779B97F4A7C15ull + 1;
  return entries_.emplace(id, std::move(e)).first->second;
}

const std::string& Strings::text(tracer::StringId id) { return get(id).text; }
uint64_t Strings::hash(tracer::StringId id) { return get(id).hash; }
uint64_t Strings::shape_hash(tracer::StringId id) { return get(id).shape_hash; }

bool tensor_comparable(const TensorRecord& t) {
  return t.status == TensorStatus::kHashed || t.status == TensorStatus::kKnown ||
         t.status == TensorStatus::kView;
}

static uint64_t mix(uint64_t h, uint64_t v) {
  // A 64-bit multiply-xorshift step: order-sensitive, good enough for in-process equality.
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 31);
}

uint64_t op_signature(const OpRecord& op, Strings& strings) {
  uint64_t h = mix(0x7464626764696666ull, strings.hash(op.name));
  for (const TensorRecord& t : op.tensors) {
    h = mix(h, (static_cast<uint64_t>(t.role) << 8) | static_cast<uint64_t>(t.dtype));
    h = mix(h, strings.shape_hash(t.shape));
  }
  h = mix(h, op.args.size());
  return h == 0 ? 1 : h;
}

uint64_t op_kind(const OpRecord& op, Strings& strings) {
  uint64_t h = mix(0x6b696e646f666f70ull, strings.hash(op.name));
  for (const TensorRecord& t : op.tensors)
    h = mix(h, (static_cast<uint64_t>(t.role) << 8) | static_cast<uint64_t>(t.dtype));
  h = mix(h, op.args.size());
  return h == 0 ? 1 : h;
}

uint64_t op_content(const OpRecord& op, Strings& strings) {
  uint64_t h = op_signature(op, strings);
  for (size_t i = 0; i < op.tensors.size(); ++i) {
    const TensorRecord& t = op.tensors[i];
    if (!tensor_comparable(t) || t.status == TensorStatus::kView) continue;
    h = mix(mix(h, i), t.hash);
  }
  for (const auto& arg : op.args) h = mix(h, strings.hash(arg.value));
  if (op.flags & tracer::kOpRandom) h = mix(h, op.rng);
  return h;
}

bool seed_draw(const OpRecord& op, Strings& strings) {
  if (!(op.flags & tracer::kOpRandom)) return false;
  bool any = false;
  for (const TensorRecord& t : op.tensors) {
    if (t.role != TensorRole::kOutput) continue;
    using hashing::DType;
    const DType d = t.dtype;
    const bool integer = d == DType::kUInt8 || d == DType::kInt8 || d == DType::kInt16 ||
                         d == DType::kInt32 || d == DType::kInt64 || d == DType::kUInt16 ||
                         d == DType::kUInt32 || d == DType::kUInt64;
    const std::string& shape = strings.text(t.shape);
    const std::string dims = shape.substr(0, shape.find(" strides "));
    if (!integer || !(dims.empty() || dims == "1")) return false;
    any = true;
  }
  return any;
}

uint64_t op_args(const OpRecord& op, Strings& strings) {
  if (op.args.empty()) return 0;
  uint64_t h = 0x6172677300000000ull;
  for (const auto& arg : op.args) h = mix(mix(h, strings.hash(arg.name)), strings.hash(arg.value));
  return h == 0 ? 1 : h;
}

static std::string describe_tensor_kind(Strings& s, const TensorRecord& t) {
  std::string shape = s.text(t.shape);
  return std::string(hashing::dtype_name(t.dtype)) + "[" + shape + "]";
}

// Whether B's comparable inputs are A's in another order (each by status, dtype, shape with
// strides and hash) and the ops' outputs include one equal hashed value: operands swapped in a
// commutative op, which changes nothing downstream.
static bool inputs_permuted(const OpRecord& a, Strings& sa, const OpRecord& b, Strings& sb) {
  auto key = [](const TensorRecord& t, Strings& s) {
    return mix(mix(mix(static_cast<uint64_t>(t.status), static_cast<uint64_t>(t.dtype)),
                   s.hash(t.shape)), t.hash);
  };
  std::vector<uint64_t> ka, kb;
  bool equal_output = false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const TensorRecord& ta = a.tensors[i];
    const TensorRecord& tb = b.tensors[i];
    if (ta.role == TensorRole::kOutput) {
      equal_output = equal_output || (ta.status == TensorStatus::kHashed &&
                                      tb.status == TensorStatus::kHashed && ta.hash == tb.hash);
      continue;
    }
    if (tensor_comparable(ta) != tensor_comparable(tb)) return false;
    if (!tensor_comparable(ta)) continue;
    ka.push_back(key(ta, sa));
    kb.push_back(key(tb, sb));
  }
  if (!equal_output) return false;
  std::sort(ka.begin(), ka.end());
  std::sort(kb.begin(), kb.end());
  return ka == kb;
}

// The inputs of an op that did not finish (`kOpUnfinished`, `kOpRaised`: no outputs) against
// the same op's in the other run, which may have finished: the outputs are left out.
static size_t inputs_count(const OpRecord& op) {
  size_t n = 0;
  while (n < op.tensors.size() && op.tensors[n].role == TensorRole::kInput) ++n;
  return n;
}

// Whether `name` is an argument that counts dimensions of the op's first input (`dim`,
// `dim0`, `start_dim`, `dims`), where a negative value counts from the end.
static bool dimension_argument(const std::string& name) {
  return name.compare(0, 3, "dim") == 0 || (name.size() > 4 && name.compare(name.size() - 4, 4, "_dim") == 0);
}

// The dimensions a dimension argument's text names ("1", "-1", "[0, -1]"), each counted from
// the front of a tensor of `rank` dims; nullopt for other texts or dims out of range.
static std::optional<std::vector<int64_t>> dims_from_front(const std::string& text, int64_t rank) {
  std::vector<int64_t> dims;
  const bool list = !text.empty() && text.front() == '[';
  if (list && text.back() != ']') return std::nullopt;
  size_t at = list ? 1 : 0;
  const size_t end = list ? text.size() - 1 : text.size();
  while (at < end) {
    while (at < end && (text[at] == ' ' || text[at] == ',')) ++at;
    if (at == end) break;
    int64_t d = 0;
    const auto [next, error] = std::from_chars(text.data() + at, text.data() + end, d);
    if (error != std::errc() || d < -rank || d >= std::max<int64_t>(rank, 1)) return std::nullopt;
    dims.push_back(d < 0 ? d + rank : d);
    at = static_cast<size_t>(next - text.data());
    if (at < end && text[at] != ',' && text[at] != ' ') return std::nullopt;
  }
  if (dims.empty() && !list) return std::nullopt;
  return dims;
}

// Whether every argument of `a` and `b` that differs means the same for the op's first
// input another way: a dimension argument naming the same dimensions (`dims_from_front`), or
// a `dtype` of None against the input's own dtype (`log_softmax(x, 1, dtype=float32)` inside
// `cross_entropy` against `log_softmax(x, -1)` of float32 logits).
static bool only_args_spelled(const OpRecord& a, Strings& sa, const OpRecord& b, Strings& sb) {
  const TensorRecord* first = nullptr;
  for (const TensorRecord& t : a.tensors)
    if (t.role == TensorRole::kInput && t.index == 0) first = &t;
  if (first == nullptr) return false;
  const std::string shape = sa.text(first->shape);
  const std::string sizes = shape.substr(0, shape.find(' '));
  const int64_t rank = sizes.empty() ? 0 : 1 + static_cast<int64_t>(std::count(sizes.begin(), sizes.end(), 'x'));
  const std::string own_dtype = hashing::dtype_name(first->dtype);
  bool spelled = false;
  for (size_t i = 0; i < a.args.size(); ++i) {
    const std::string& x = sa.text(a.args[i].value);
    const std::string& y = sb.text(b.args[i].value);
    if (x == y) continue;
    const std::string& name = sa.text(a.args[i].name);
    if (name != sb.text(b.args[i].name)) return false;
    if (dimension_argument(name)) {
      const auto dx = dims_from_front(x, rank), dy = dims_from_front(y, rank);
      if (!dx || !dy || *dx != *dy) return false;
    } else if (name == "dtype") {
      if (!((x == "None" && y == own_dtype) || (y == "None" && x == own_dtype))) return false;
    } else {
      return false;
    }
    spelled = true;
  }
  return spelled;
}

OpComparison compare_ops(const OpRecord& a, Strings& sa, const OpRecord& b, Strings& sb) {
  OpComparison c;
  if (sa.text(a.name) != sb.text(b.name)) {
    c.structure = "different ops: " + sa.text(a.name) + " vs " + sb.text(b.name);
    return c;
  }
  constexpr uint32_t kNoOutputs = tracer::kOpUnfinished | tracer::kOpRaised;
  if ((a.flags | b.flags) & kNoOutputs) {
    const size_t na = inputs_count(a), nb = inputs_count(b);
    OpRecord ia = a, ib = b;
    ia.tensors.resize(na);
    ib.tensors.resize(nb);
    // Stopped while its inputs were read: the other's are compared as far as it got.
    for (auto [partial, other] : {std::pair{&ia, &ib}, std::pair{&ib, &ia}}) {
      if (!(partial->flags & tracer::kOpInputsIncomplete)) continue;
      if (other->tensors.size() > partial->tensors.size())
        other->tensors.resize(partial->tensors.size());
      int reached = -1;  // the last argument index it recorded
      for (const auto& t : partial->tensors) reached = std::max<int>(reached, t.index);
      for (const auto& x : partial->args) reached = std::max<int>(reached, x.index);
      std::vector<tracer::ArgRecord> kept;
      for (const auto& x : other->args)
        if (x.index <= reached) kept.push_back(x);
      other->args = std::move(kept);
    }
    ia.flags &= ~(kNoOutputs | tracer::kOpInputsIncomplete);
    ib.flags &= ~(kNoOutputs | tracer::kOpInputsIncomplete);
    OpComparison inputs = compare_ops(ia, sa, ib, sb);
    inputs.unfinished = ((a.flags | b.flags) & tracer::kOpUnfinished) != 0;
    // Same inputs, and an error in one run only: the runs part here (an out-of-memory error,
    // a check on data the hashes do not cover, such as a tensor's device or a pointer).
    const bool raised_a = (a.flags & tracer::kOpRaised) != 0;
    const bool raised_b = (b.flags & tracer::kOpRaised) != 0;
    if (!inputs.differs() && raised_a != raised_b && !inputs.unfinished)
      inputs.structure = std::string("raised an error in ") + (raised_a ? "A" : "B") +
                         " only, with the same inputs and arguments as in " +
                         (raised_a ? "B" : "A");
    return inputs;
  }
  if (a.tensors.size() != b.tensors.size()) {
    c.structure = "different tensor count: " + std::to_string(a.tensors.size()) + " vs " +
                  std::to_string(b.tensors.size());
    // An op over a list of tensors: how many it was given is what differs (DataLoader's
    // collate stacks a batch's items: another batch size).
    auto inputs = [](const OpRecord& op) {
      return std::count_if(op.tensors.begin(), op.tensors.end(), [](const tracer::TensorRecord& t) {
        return t.role == tracer::TensorRole::kInput;
      });
    };
    const std::string name = sa.text(a.name);
    if (name == "aten::stack" || name == "aten::cat")
      c.structure +=
          " (it joins " + std::to_string(inputs(a)) + " tensors in A and " +
          std::to_string(inputs(b)) + " in B" +
          (name == "aten::stack"
               ? ": a batch of other size, where a DataLoader's collate stacks its items)"
               : ")");
    return c;
  }
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const TensorRecord& ta = a.tensors[i];
    const TensorRecord& tb = b.tensors[i];
    if (ta.role != tb.role || ta.dtype != tb.dtype ||
        sa.shape_hash(ta.shape) != sb.shape_hash(tb.shape)) {
      c.structure = std::string(ta.role == TensorRole::kInput ? "input " : "output ") +
                    std::to_string(ta.index) + " differs: " + describe_tensor_kind(sa, ta) +
                    " vs " + describe_tensor_kind(sb, tb);
      // The same sizes in a 16-bit float in one run only: mixed precision.
      auto half = [](hashing::DType d) {
        return d == hashing::DType::kFloat16 || d == hashing::DType::kBFloat16;
      };
      if (sa.shape_hash(ta.shape) == sb.shape_hash(tb.shape) && half(ta.dtype) != half(tb.dtype) &&
          hashing::dtype_is_floating(ta.dtype) && hashing::dtype_is_floating(tb.dtype))
        c.structure += std::string(" (") + (half(ta.dtype) ? "A" : "B") +
                       " computes in 16 bits here: autocast covers this op in one run only "
                       "(torch.autocast or torch.cuda.amp on in one run, or around another "
                       "region), or a .half() or .bfloat16() call)";
      // A factory op given no dtype (`torch.empty(3)`, `torch.zeros`) made floats of another
      // type: the default dtype differs.
      auto no_dtype = [](const OpRecord& op, Strings& s) {
        const bool takes_tensor =
            std::any_of(op.tensors.begin(), op.tensors.end(),
                        [](const TensorRecord& t) { return t.role == TensorRole::kInput; });
        return !takes_tensor && std::any_of(op.args.begin(), op.args.end(), [&](const auto& x) {
          return s.text(x.name) == "dtype" && s.text(x.value) == "None";
        });
      };
      if (ta.role == TensorRole::kOutput && sa.shape_hash(ta.shape) == sb.shape_hash(tb.shape) &&
          hashing::dtype_is_floating(ta.dtype) && hashing::dtype_is_floating(tb.dtype) &&
          no_dtype(a, sa) && no_dtype(b, sb))
        c.structure += std::string(" (made without a dtype: the default dtype is ") +
                       hashing::dtype_name(ta.dtype) + " in A and " +
                       hashing::dtype_name(tb.dtype) +
                       " in B, as torch.set_default_dtype sets it, in the program or in a module "
                       "it imports)";
      return c;
    }
    if (c.layout < 0 && sa.text(ta.shape) != sb.text(tb.shape)) c.layout = static_cast<int>(i);
  }
  if (a.args.size() != b.args.size()) {
    c.structure = "different argument count: " + std::to_string(a.args.size()) + " vs " +
                  std::to_string(b.args.size());
    // The arguments one run passes and the other does not (another overload: randperm with
    // a generator against without), named with their values.
    auto only_in = [](const OpRecord& x, Strings& sx, const OpRecord& y, Strings& sy) {
      std::string names;
      for (const auto& arg : x.args) {
        const std::string& name = sx.text(arg.name);
        const bool shared = std::any_of(y.args.begin(), y.args.end(), [&](const auto& other) {
          return sy.text(other.name) == name;
        });
        if (!shared) names += (names.empty() ? "" : ", ") + name + "=" + sx.text(arg.value);
      }
      return names;
    };
    const std::string in_a = only_in(a, sa, b, sb), in_b = only_in(b, sb, a, sa);
    for (const auto& [names, run, other] :
         {std::tuple{in_a, "A", "B"}, std::tuple{in_b, "B", "A"}}) {
      if (names.empty()) continue;
      c.structure += std::string("; ") + names + " in " + run + " only";
      if (names.rfind("generator=", 0) == 0 && names.find(", ") == std::string::npos)
        c.structure += std::string(": ") + other + " draws from the default generator";
    }
    return c;
  }
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const TensorRecord& ta = a.tensors[i];
    const TensorRecord& tb = b.tensors[i];
    if (!tensor_comparable(ta) || !tensor_comparable(tb) || ta.hash == tb.hash) continue;
    // A view's hash is derived from its base's hash and its memory geometry, not from its
    // values: the same values as a `.contiguous()` copy, or as a view of a base laid out
    // otherwise, hash differently. Views are not compared: every view chain starts at a tensor
    // hashed by its values, and a difference in values shows there first.
    if (ta.status == TensorStatus::kView || tb.status == TensorStatus::kView) {
      if ((ta.status == TensorStatus::kView) != (tb.status == TensorStatus::kView) &&
          ta.role == TensorRole::kInput && c.provenance < 0)
        c.provenance = static_cast<int>(i);
      if (ta.status == TensorStatus::kView && tb.status == TensorStatus::kView &&
          ta.role == TensorRole::kInput && c.view < 0)
        c.view = static_cast<int>(i);
      continue;
    }
    int& slot = ta.role == TensorRole::kInput ? c.input : c.output;
    if (slot < 0) slot = static_cast<int>(i);
  }
  for (size_t i = 0; i < a.args.size(); ++i) {
    if (sa.hash(a.args[i].value) != sb.hash(b.args[i].value) ||
        sa.text(a.args[i].value) != sb.text(b.args[i].value)) {
      c.arg = static_cast<int>(i);
      break;
    }
  }
  c.rng = ((a.flags | b.flags) & tracer::kOpRandom) && a.rng != b.rng;
  if (c.arg >= 0 && c.output < 0 && only_args_spelled(a, sa, b, sb)) {
    c.args_spelled = true;
    c.arg = -1;
  }
  if (c.input >= 0 && c.output < 0 && c.arg < 0 && !c.rng && inputs_permuted(a, sa, b, sb)) {
    c.permuted = true;
    c.input = -1;
    c.layout = -1;
  }
  return c;
}

OpCursor::OpCursor(const tracer::Reader& reader, Strings& strings, uint32_t thread, int64_t count,
                   int64_t begin)
    : reader_(reader), strings_(strings), thread_(thread), count_(count), begin_(begin),
      base_(begin) {}

// Ops per `scan_ops` call: a jump (the op found by bisection) starts with a small batch, as
// often only a few ops around it are read; sequential reading doubles it up to `kBatchOps`.
constexpr int64_t kFirstBatchOps = 16;
constexpr int64_t kBatchOps = 2048;

bool OpCursor::load(int64_t tidx) {
  if (!status_.ok() || tidx < begin_ || tidx >= count_) return false;
  if (tidx < base_ || tidx > base_ + static_cast<int64_t>(ops_.size()) + kBatchOps) {
    // A jump: start a fresh window at `tidx`.
    ops_.clear();
    signatures_.clear();
    base_ = tidx;
    batch_ = kFirstBatchOps;
  }
  while (tidx >= base_ + static_cast<int64_t>(ops_.size())) {
    int64_t from = base_ + static_cast<int64_t>(ops_.size());
    int64_t to = std::min(count_, std::max(from + batch_, tidx + 1));
    batch_ = std::min(kBatchOps, batch_ * 2);
    int64_t expected = from;
    bool gap = false;
    Status st = reader_.scan_ops(thread_, from, to, true, [&](const OpRecord& op) {
      if (op.tidx != expected) {
        gap = true;
        return false;
      }
      ++expected;
      signatures_.push_back(op_signature(op, strings_));
      ops_.push_back(op);
      return true;
    });
    if (!st.ok()) {
      status_ = st;
      return false;
    }
    if (gap || expected != to) {
      status_ = Status::Error(reader_.path() + ": ops of thread " + std::to_string(thread_) +
                              " are not numbered " + std::to_string(begin_) + ".." +
                              std::to_string(count_ - 1) +
                              " (missing op " + std::to_string(expected) + ")");
      return false;
    }
  }
  return true;
}

const OpRecord* OpCursor::at(int64_t tidx) {
  if (tidx < base_ || tidx >= base_ + static_cast<int64_t>(ops_.size())) {
    if (!load(tidx)) return nullptr;
  }
  return &ops_[static_cast<size_t>(tidx - base_)];
}

uint64_t OpCursor::signature_at(int64_t tidx) {
  if (!at(tidx)) return 0;
  return signatures_[static_cast<size_t>(tidx - base_)];
}

void OpCursor::release_before(int64_t tidx) {
  while (!ops_.empty() && base_ < tidx) {
    ops_.pop_front();
    signatures_.pop_front();
    ++base_;
  }
  if (ops_.empty() && base_ < tidx) base_ = tidx;
}

std::string hex64(uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, value);
  return buf;
}

std::string argument_text(const std::string& name, const std::string& value) {
  // at::Reduction: the loss functions' `reduction`, an int in the ATen schema.
  if (name == "reduction") {
    if (value == "0") return "0 (none)";
    if (value == "1") return "1 (mean)";
    if (value == "2") return "2 (sum)";
  }
  return number_text(value);
}

std::string number_text(const std::string& text) {
  if (text.empty() || text.find_first_of(".eE") == std::string::npos) return text;
  double value = 0;
  const char* end = text.data() + text.size();
  const auto parsed = std::from_chars(text.data(), end, value);
  if (parsed.ec != std::errc() || parsed.ptr != end) return text;
  char buf[32];
  const auto written = std::to_chars(buf, buf + sizeof(buf), value);
  if (written.ec != std::errc()) return text;
  std::string shortest(buf, written.ptr);
  // Keep it a float to the eye: "1" was "1.0000000000000000".
  if (shortest.find_first_of(".eEn") == std::string::npos) shortest += ".0";
  return shortest;
}

nlohmann::json summary_json(const hashing::Summary& s) {
  if (!s.valid) return nullptr;
  return {{"min", s.min}, {"max", s.max}, {"sum", s.sum}, {"abs_sum", s.abs_sum},
          {"nan", s.nan_count}, {"inf", s.inf_count}};
}

double relative_difference(double x, double y, double scale) {
  if (x == y) return 0;
  scale = std::max({std::fabs(x), std::fabs(y), std::isfinite(scale) ? std::fabs(scale) : 0.0});
  if (!(scale > 0) || !std::isfinite(scale)) return 2;
  return std::min(2.0, std::fabs(x - y) / scale);
}

SummaryDifferences summary_differences(const hashing::Summary& a, const hashing::Summary& b) {
  const double magnitude =
      std::max({std::fabs(a.min), std::fabs(a.max), std::fabs(b.min), std::fabs(b.max)});
  return {relative_difference(a.min, b.min, magnitude), relative_difference(a.max, b.max, magnitude),
          relative_difference(a.sum, b.sum, std::max(a.abs_sum, b.abs_sum)),
          relative_difference(a.abs_sum, b.abs_sum)};
}

double rounding_limit(std::string_view dtype) {
  return dtype == "float32" || dtype == "complex64"    ? 1e-5
         : dtype == "float64" || dtype == "complex128" ? 1e-12
         : dtype == "float16" || dtype == "bfloat16"   ? 1e-2
                                                       : -1;
}

double dtype_epsilon(std::string_view dtype) {
  return dtype == "float32" || dtype == "complex64"    ? 0x1p-23
         : dtype == "float64" || dtype == "complex128" ? 0x1p-52
         : dtype == "bfloat16"                         ? 0x1p-7
         : dtype == "float16"                          ? 0x1p-10
                                                       : 0;
}

double reorder_limit(std::string_view dtype) {
  const double limit = rounding_limit(dtype);
  // (16-bit floats: 16 roundings are over rounding_limit's 1e-2 already.)
  return dtype_epsilon(dtype) > 0 ? std::min(limit, 16 * dtype_epsilon(dtype)) : limit;
}

double summary_distance(const hashing::Summary& a, const hashing::Summary& b) {
  if (!a.valid || !b.valid) return -1;
  if (a.nan_count != b.nan_count || a.inf_count != b.inf_count) return 2;
  const SummaryDifferences d = summary_differences(a, b);
  return std::max({d.min, d.max, d.sum, d.abs_sum});
}

// A recorded frame as JSON, with a native frame's source line (native_lines.h).
static nlohmann::json record_json(const tracer::Reader& reader, Strings& strings,
                                  const tracer::FrameRecord& f) {
  return frame_record_json(reader, strings.text(f.file), f.line, strings.text(f.function));
}

nlohmann::json frame_json(const tracer::Reader& reader, Strings& strings, tracer::FrameId id) {
  if (id == 0) return nullptr;
  auto f = reader.frame(id);
  if (!f) return nullptr;
  return record_json(reader, strings, *f);
}

std::string frame_source_text(const tracer::Reader& reader, Strings& strings, tracer::FrameId id,
                              bool brief) {
  if (id == 0) return "";
  auto f = reader.frame(id);
  if (!f) return "";
  const std::string& file = strings.text(f->file);
  const std::string& function = strings.text(f->function);
  if (auto native = native_source(reader, file, f->line, function))
    return frame_text(native->line.file, native->line.line, native->line.function, brief);
  return frame_text(file, f->line, function, brief);
}

// A C++ function's name without what makes it long: " +0x4adb", the parameter list and
// " const", a return type, long template arguments (`readable_function_name`).
static std::string short_function_name(const std::string& function) {
  return readable_function_name(std::string(
      without_parameters(std::string_view(function).substr(0, function.rfind(" +0x")))));
}

bool python_library_path(const std::string& path) {
  static const char* const kLibraryParts[] = {"/site-packages/", "/dist-packages/", "/usr/lib/python",
                                              "/usr/local/lib/python", "/lib/python3"};
  return std::any_of(std::begin(kLibraryParts), std::end(kLibraryParts),
                     [&](const char* part) { return path.find(part) != std::string::npos; });
}

std::string frame_text(const std::string& file, int64_t line, const std::string& function,
                       bool brief) {
  const std::string base = file.substr(file.rfind('/') + 1);  // npos + 1 is 0
  if (line > 0 || function.empty() || function == "?") {
    const std::string where = (brief ? base : file) + (line > 0 ? ":" + std::to_string(line) : "");
    // A C++ function read from debug info has its parameters: "Net::forward(at::Tensor)".
    return brief || function.empty() || function == "??" ? where : where + " in " + short_function_name(function);
  }
  if (!brief) {
    const size_t offset = function.rfind(" +0x");
    return file + " in " + short_function_name(function) +
           (offset == std::string::npos ? std::string() : function.substr(offset));
  }
  // The name alone: without " +0x4adb" and without the parameter list "(at::Tensor) const".
  const std::string name = short_function_name(function);
  if (name == "?") return base;
  return name + " (" + base + ")";
}

// The forward op of `op`'s autograd node: its own, or an enclosing op's, up to the engine's
// range of the node (a node that runs a backward of its own, as reentrant checkpointing's
// does, encloses other nodes: an AccumulateGrad inside it is not its forward op's work).
static int64_t node_forward_seq(const tracer::Reader& reader, const OpRecord& op,
                                std::vector<OpRecord>* chain) {
  int64_t fwd = op.fwd;
  if (chain) chain->push_back(op);
  tracer::StringId below = op.name;  // the op whose parent is next
  for (int64_t up = op.parent, k = 0; fwd == tracer::kNoSeq && up != tracer::kNoSeq && k < 8; ++k) {
    if ((op.flags & tracer::kOpBackward) &&
        reader.string(below).rfind("autograd::engine::evaluate_function", 0) == 0)
      break;
    auto parent = reader.op(up);
    if (!parent) break;
    fwd = parent->fwd;
    up = parent->parent;
    below = parent->name;
    if (chain) chain->push_back(*parent);
  }
  return fwd;
}

int64_t forward_seq_of(const tracer::Reader& reader, const OpRecord& op) {
  std::vector<OpRecord> chain;
  const int64_t fwd = node_forward_seq(reader, op, &chain);
  if (fwd != tracer::kNoSeq || !(op.flags & tracer::kOpBackward)) return fwd;
  // A node with no forward op (AccumulateGrad, which adds a parameter's gradient into .grad):
  // the forward op of the node that made the gradient it takes, which used the parameter.
  for (const OpRecord& o : chain)
    for (const tracer::TensorRecord& t : o.tensors) {
      if (t.role != tracer::TensorRole::kInput || t.producer == tracer::kNoSeq) continue;
      auto made = reader.op(t.producer);
      if (!made || !(made->flags & tracer::kOpBackward)) continue;
      const int64_t from = node_forward_seq(reader, *made, nullptr);
      if (from != tracer::kNoSeq) return from;
    }
  return tracer::kNoSeq;
}

static void add_source(const tracer::Reader& reader, Strings& strings, const OpRecord& op,
                       nlohmann::json& j) {
  tracer::FrameId user = op.user_frame, stack = op.stack;
  bool from_forward = false;
  // A backward op, or an op inside an autograd node: the forward op that node differentiates.
  const int64_t fwd_seq = user == 0 && stack == 0 ? forward_seq_of(reader, op) : op.fwd;
  if (user == 0 && stack == 0 && fwd_seq != tracer::kNoSeq) {
    if (auto fwd = reader.op(fwd_seq)) {
      user = fwd->user_frame;
      stack = fwd->stack;
      from_forward = true;
    } else {
      // A ring (or a trimmed bundle) kept only later ops: say why there is no line.
      j["source_missing"] = "its forward op (seq " + std::to_string(fwd_seq) +
                            ") is not in the recording (a --ring kept only the last ops)";
    }
  }
  if (user == 0) user = stack;
  j["source"] = frame_json(reader, strings, user);
  nlohmann::json frames = nlohmann::json::array();
  std::string builtin;  // the innermost frame's function, where it is TorchScript builtin code
  if (stack != 0) {
    for (const tracer::FrameRecord& f : reader.stack(stack)) {
      frames.push_back(record_json(reader, strings, f));
      builtin = strings.text(f.file) == tracer::kScriptBuiltinFile ? strings.text(f.function) : "";
    }
  }
  j["stack"] = std::move(frames);
  // The line is the scripted caller's: TorchScript kept none for its builtin's call.
  if (!builtin.empty())
    j["source_note"] = "in TorchScript's builtin " + builtin +
                       ", whose line there TorchScript does not keep: an operator with a number "
                       "on its left, such as `2.0 * x` or `1 - x`";
  j["source_from_forward"] = from_forward;
}

nlohmann::json op_json(const tracer::Reader& reader, Strings& strings, const OpRecord& op) {
  nlohmann::json j = {{"seq", op.seq},
                      {"thread", op.thread},
                      {"tidx", op.tidx},
                      {"op", strings.text(op.name)},
                      {"step", op.step},
                      {"depth", op.depth},
                      {"module", strings.text(op.module)},
                      {"backward", (op.flags & tracer::kOpBackward) != 0},
                      {"random", (op.flags & tracer::kOpRandom) != 0},
                      {"unfinished", (op.flags & tracer::kOpUnfinished) != 0},
                      {"raised", (op.flags & tracer::kOpRaised) != 0}};
  add_source(reader, strings, op, j);
  j["forward_seq"] = op.fwd == tracer::kNoSeq ? nlohmann::json(nullptr) : nlohmann::json(op.fwd);
  // The ops this one runs inside, outermost first: "aten::addmm inside aten::linear".
  nlohmann::json enclosing = nlohmann::json::array();
  int64_t parent = op.parent;
  for (int guard = 0; parent != tracer::kNoSeq && guard < 256; ++guard) {
    auto p = reader.op(parent);
    if (!p) break;
    enclosing.insert(enclosing.begin(), nlohmann::json{{"seq", p->seq}, {"op", strings.text(p->name)}});
    parent = p->parent;
  }
  j["enclosing"] = std::move(enclosing);
  return j;
}

nlohmann::json op_brief_json(const tracer::Reader& reader, Strings& strings, const OpRecord& op) {
  nlohmann::json j = {{"seq", op.seq}, {"tidx", op.tidx}, {"op", strings.text(op.name)},
                      {"depth", op.depth}, {"step", op.step}, {"module", strings.text(op.module)}};
  // The file's base name keeps context lines short; `source` of the op itself has the path.
  tracer::FrameId frame = op.user_frame != 0 ? op.user_frame : op.stack;
  if (frame == 0) {
    // An op autograd ran (a checkpointed forward recomputed in backward, say): the line of the
    // forward op its node differentiates, as `op_json` gives it.
    const int64_t fwd_seq = forward_seq_of(reader, op);
    if (fwd_seq != tracer::kNoSeq)
      if (auto fwd = reader.op(fwd_seq); fwd && (fwd->user_frame != 0 || fwd->stack != 0)) {
        frame = fwd->user_frame != 0 ? fwd->user_frame : fwd->stack;
        j["source_from_forward"] = true;
      }
  }
  j["source"] = frame_source_text(reader, strings, frame, true);
  return j;
}

std::string op_at_source(const tracer::Reader& reader, Strings& strings, const OpRecord& op) {
  const nlohmann::json j = op_brief_json(reader, strings, op);
  std::string text = j.value("op", std::string());
  const std::string src = j.value("source", std::string());
  if (src.empty()) return text;
  return text + " at " + src +
         (j.value("source_from_forward", false) ? " (forward op's line)" : "");
}

bool in_first_iteration(const tracer::Reader& reader, int64_t step, int64_t seq) {
  if (step != 1) return false;
  int64_t at0 = 0, at1 = 0, first_start = INT64_MAX, first_end = tracer::kNoSeq;
  for (const tracer::RegionRecord& g : reader.regions()) {
    if (g.kind != tracer::RegionKind::kStep || g.step > 1) continue;
    if (g.step == 0) {
      ++at0;
      continue;
    }
    ++at1;
    if (g.start_seq < first_start) {
      first_start = g.start_seq;
      first_end = g.end_seq;
    }
  }
  return at1 >= 2 && at1 > at0 && first_end != tracer::kNoSeq && seq >= 0 && seq <= first_end;
}

std::map<int64_t, std::vector<tracer::RegionRecord>> step_regions(
    const tracer::Reader& reader, std::optional<uint32_t> thread) {
  std::map<int64_t, std::vector<tracer::RegionRecord>> steps;
  for (const tracer::RegionRecord& g : reader.regions())
    if (g.kind == tracer::RegionKind::kStep && g.end_seq != tracer::kNoSeq &&
        (!thread || g.thread == *thread))
      steps[g.step].push_back(g);
  for (auto& [step, regions] : steps)
    std::sort(regions.begin(), regions.end(),
              [](const auto& x, const auto& y) { return x.start_seq < y.start_seq; });
  return steps;
}

bool ops_in_regions(const tracer::Reader& reader, const std::vector<tracer::RegionRecord>& regions,
                    std::vector<OpRecord>* ops) {
  ops->clear();
  for (const tracer::RegionRecord& g : regions) {
    const Status st = reader.scan_ops(std::nullopt, g.start_seq, g.end_seq + 1, true,
                                      [&](const OpRecord& op) {
                                        if (op.thread == g.thread) ops->push_back(op);
                                        return true;
                                      });
    if (!st.ok()) return false;
  }
  return true;
}

const tracer::TensorRecord* viewed_input(const OpRecord& op, const tracer::TensorRecord& view,
                                         bool (*usable)(const tracer::TensorRecord&)) {
  const tracer::TensorRecord* base = nullptr;
  for (const tracer::TensorRecord& in : op.tensors) {
    if (in.role != tracer::TensorRole::kInput || !usable(in)) continue;
    // (Of its dtype: `tensor_split(x, indices)`'s second view is of x, not of the indices.)
    if (in.index == view.index && in.dtype == view.dtype) return &in;
    if (base == nullptr) base = &in;
  }
  return base;
}

const char* never_read(Strings& strings, const tracer::TensorRecord& t) {
  if (t.status != tracer::TensorStatus::kNotHashed || t.reason == 0) return "";
  const std::string& reason = strings.text(t.reason);  // the tracer's words, fixed
  if (reason == "undefined tensor") return "undefined";
  if (reason == tracer::kReasonOverwritten) return "overwritten";
  return "";
}

// An input hashed where it was read, from memory an op of the `empty` family returned
// uninitialized and no recorded op wrote since (the hook says so in its reason).
bool uninitialized_read(Strings& strings, const tracer::TensorRecord& t) {
  return t.status == tracer::TensorStatus::kHashed && t.reason != 0 &&
         strings.text(t.reason).rfind(tracer::kReasonUninitializedRead, 0) == 0;
}

// The op that most likely returned the memory input `t` of `op` read uninitialized: the last
// op of the `empty` family before it on its thread, within 65,536 ops, with an output of the
// same dtype and shape.
std::optional<tracer::OpRecord> uninitialized_maker(const tracer::Reader& r, Strings& strings,
                                                    const tracer::OpRecord& op,
                                                    const tracer::TensorRecord& t) {
  // The hook says which op: " (seq -N)" after the reason's fixed words.
  const std::string& reason = strings.text(t.reason);
  if (const size_t at = reason.rfind("(seq -"); at != std::string::npos) {
    const int64_t back = std::strtoll(reason.c_str() + at + 6, nullptr, 10);
    if (back > 0 && back <= op.seq) {
      auto made = r.op(op.seq - back);
      if (made && (made->flags & tracer::kOpUninitOutput) != 0) return made;
    }
  }
  std::optional<tracer::OpRecord> maker;
  const int64_t from = std::max<int64_t>(0, op.tidx - 65536);
  tdbg::Status st = r.scan_ops(op.thread, from, op.tidx, true, [&](const tracer::OpRecord& o) {
    if ((o.flags & tracer::kOpUninitOutput) == 0) return true;
    for (const tracer::TensorRecord& out : o.tensors)
      if (out.role == tracer::TensorRole::kOutput && out.dtype == t.dtype && out.shape == t.shape)
        maker = o;
    return true;
  });
  if (!st.ok()) return std::nullopt;
  return maker;
}

bool is_main_thread(const tracer::Reader& r, const tracer::ThreadRecord& t) {
  return std::to_string(t.os_tid) == r.meta("pid");
}

std::optional<tracer::OpRecord> last_collective_before(const tracer::Reader& r, Strings& strings,
                                                       uint32_t thread, int64_t tidx) {
  constexpr int64_t kLookBack = 4096;
  for (int64_t t = tidx - 1; t >= 0 && t >= tidx - kLookBack; --t) {
    auto o = r.op_at(thread, t);
    if (!o) break;
    if (strings.text(o->name).rfind("c10d::", 0) == 0) return o;
  }
  return std::nullopt;
}

bool source_changed(const std::string& path, const std::string& identity) {
  struct stat st;
  if (identity.empty() || stat(path.c_str(), &st) != 0) return false;
  const int64_t mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return identity != std::to_string(st.st_size) + ":" + std::to_string(mtime_ns);
}

std::vector<std::pair<std::string, std::string>> recorded_sources(const tracer::Reader& reader) {
  std::vector<std::pair<std::string, std::string>> sources;
  (void)reader.query("SELECT key, value FROM meta WHERE key LIKE 'source:%' ORDER BY key",
                     [&](const std::vector<std::string>& row) {
                       sources.emplace_back(row[0].substr(7), row[1]);
                       return true;
                     });
  return sources;
}

std::vector<std::string> changed_source_notes(const tracer::Reader& reader) {
  std::vector<std::string> notes;
  for (const auto& [path, identity] : recorded_sources(reader))
    if (source_changed(path, identity))
      notes.push_back(path + " changed since the recording: the source lines shown from it may "
                      "not be the code that ran");
  return notes;
}

std::vector<std::string> source_line_notes(const tracer::Reader& reader) {
  std::vector<std::string> notes = native_line_notes(reader);
  for (std::string& note : changed_source_notes(reader)) notes.push_back(std::move(note));
  return notes;
}

std::string reason_text(const std::string& reason, int64_t op_seq) {
  const size_t at = reason.rfind("(seq -");
  if (at == std::string::npos) return reason;
  char* end = nullptr;
  const int64_t back = std::strtoll(reason.c_str() + at + 6, &end, 10);
  if (end == reason.c_str() + at + 6 || back <= 0 || back > op_seq) return reason;
  return reason.substr(0, at) + "(seq " + std::to_string(op_seq - back) + std::string(end);
}

nlohmann::json tensor_json(Strings& strings, const TensorRecord& t) {
  return {{"role", t.role == TensorRole::kInput ? "input" : "output"},
          {"index", t.index},
          {"dtype", hashing::dtype_name(t.dtype)},
          {"shape", strings.text(t.shape)},
          {"device", strings.text(t.device)},
          {"status", tracer::tensor_status_name(t.status)},
          {"hash", hex64(t.hash)},
          {"producer", t.producer == tracer::kNoSeq ? nlohmann::json(nullptr) : nlohmann::json(t.producer)},
          {"summary", summary_json(t.summary)}};
}

// Which process of run `run` is number `p` (in the canonical order), for a run of several:
// its database, pid and, where it has them, its torch.distributed rank and DataLoader worker id.
nlohmann::json process_json(const tracer::Run& run, size_t p) {
  const tracer::Reader& r = *run.processes[p];
  const std::string pid = r.meta("pid"), rank = r.meta("rank"), worker = r.meta("worker");
  nlohmann::json j = {{"index", p}, {"path", r.path()}, {"pid", pid}};
  std::string what;
  if (!rank.empty()) {
    j["rank"] = rank;
    what += "rank " + rank;
  }
  if (!worker.empty()) {
    j["worker"] = worker;
    what += std::string(what.empty() ? "" : ", ") + "DataLoader worker " + worker;
    // Which rank's: its nearest recorded ancestor's (each rank starts its own workers).
    std::string ppid = run.ppid(p);
    for (int hops = 0; rank.empty() && hops < 8 && !ppid.empty(); ++hops) {
      size_t q = 0;
      while (q < run.processes.size() && run.processes[q]->meta("pid") != ppid) ++q;
      if (q == run.processes.size() || q == p) break;
      if (const std::string parent_rank = run.processes[q]->meta("rank"); !parent_rank.empty()) {
        j["parent_rank"] = parent_rank;
        what += " of rank " + parent_rank;
        break;
      }
      ppid = run.ppid(q);
    }
  }
  // What the process is, as every command names it: "rank 1", "DataLoader worker 0/2 of rank 1/2".
  if (!what.empty()) j["who"] = what;
  // A fork child counts its steps from 0: the parent's step at the fork says which one it is
  // (the evaluation forked at step 20, a DataLoader's workers of an epoch).
  if (const std::string forked = r.meta("forked_at_step"); !forked.empty()) {
    j["forked_at_step"] = std::strtoll(forked.c_str(), nullptr, 10);
    what += std::string(what.empty() ? "" : ", ") + "forked at step " + forked;
  }
  if (what.empty() && p == 0) what = "the first process";
  // Numbered from 0, as `tdbg show --process` numbers them (not as the diff paired them).
  j["text"] = "process " + std::to_string(run.shown(p)) + " of 0-" + std::to_string(run.processes.size() - 1) +
              " (" + (what.empty() ? "" : what + ", ") + "pid " + pid + "): " + r.path();
  return j;
}

}  // namespace tdbg::diff
