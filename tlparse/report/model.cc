// Builds the viewer's data model from one or two runs: metadata, per-step aggregates, a window
// of ops around the first divergence, the difference curve and the diff engine's findings.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <optional>
#include <unordered_map>

#include "tlparse/diff/diff.h"
#include "tlparse/diff/native_lines.h"
#include "tlparse/diff/ops.h"
#include "tlparse/report/report.h"

namespace tdbg::report {
namespace {

using nlohmann::json;
using tracer::OpRecord;
using tracer::Reader;
using tracer::TensorRecord;
using tracer::TensorStatus;

// JSON cannot hold NaN or infinity; summaries only hold finite values by construction, but a
// corrupt database must not make the report unserializable.
json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// A frame as the viewer shows it: a C++ frame with its source line where the binary's debug
// info gives it (tlparse/diff/native_lines.h).
json source_json(const Reader& reader, tracer::FrameId id) {
  if (id == 0) return nullptr;
  auto frame = reader.frame(id);
  if (!frame) return nullptr;
  return diff::frame_record_json(reader, reader.string(frame->file), frame->line,
                                 reader.string(frame->function));
}

json frames_json(const Reader& reader, tracer::FrameId innermost) {
  json frames = json::array();
  for (const auto& f : reader.stack(innermost))
    frames.push_back(diff::frame_record_json(reader, reader.string(f.file), f.line,
                                             reader.string(f.function)));
  return frames;
}

// True for tensors whose hashes mean something when compared.
bool comparable(TensorStatus s) {
  return s == TensorStatus::kHashed || s == TensorStatus::kKnown || s == TensorStatus::kView;
}

// How far apart two summaries are: the difference of the sums relative to the larger absolute
// sum (so cancellation in `sum` does not blow it up), or 1 when the non-finite counts differ.
double relative_difference(const hashing::Summary& a, const hashing::Summary& b) {
  if (!a.valid || !b.valid) return 0;
  if (a.nan_count != b.nan_count || a.inf_count != b.inf_count) return 1;
  double scale = std::max(std::fabs(a.abs_sum), std::fabs(b.abs_sum));
  if (!(scale > 0)) return a.sum == b.sum ? 0 : 1;
  double rel = std::fabs(a.sum - b.sum) / scale;
  return std::isfinite(rel) ? std::min(rel, 1e6) : 1;
}

// The outputs of one op, as much as the curve needs.
struct OutputSummary {
  uint16_t index;
  uint64_t hash;
  hashing::Summary summary;
};
struct OpOutputs {
  int64_t seq;
  tracer::StringId name;
  std::vector<OutputSummary> outputs;
};

OpOutputs outputs_of(const OpRecord& op) {
  OpOutputs o{op.seq, op.name, {}};
  for (const auto& t : op.tensors) {
    if (t.role == tracer::TensorRole::kOutput && comparable(t.status)) {
      o.outputs.push_back({t.index, t.hash, t.summary});
    }
  }
  return o;
}

Status scan_outputs(const Reader& reader, int64_t from, int64_t to, std::vector<OpOutputs>* out) {
  out->clear();
  return reader.scan_ops(std::nullopt, from, to, true, [&](const OpRecord& op) {
    out->push_back(outputs_of(op));
    return true;
  });
}

// The largest `relative_difference` of the same-numbered outputs of two ops whose hashes
// differ (0 when none does); `*differs` is set when some do.
double outputs_difference(const OpOutputs& x, const OpOutputs& y, bool* differs) {
  double rel = 0;
  for (const auto& ta : x.outputs) {
    for (const auto& tb : y.outputs) {
      if (ta.index != tb.index || ta.hash == tb.hash) continue;
      *differs = true;
      rel = std::max(rel, relative_difference(ta.summary, tb.summary));
    }
  }
  return rel;
}

int process_index(const json& side, size_t processes) {
  if (side.is_object() && side.contains("process") && side["process"].is_number_integer()) {
    int64_t p = side["process"].get<int64_t>();
    if (p >= 0 && static_cast<size_t>(p) < processes) return static_cast<int>(p);
  }
  return 0;
}

int64_t seq_of(const json& side) {
  if (side.is_object() && side.contains("seq") && side["seq"].is_number_integer()) {
    return side["seq"].get<int64_t>();
  }
  return tracer::kNoSeq;
}

// The seq where a structural first divergence meets run `side` ("a" or "b") when that side has
// no op of its own there (ops inserted in the other run, or removed from this one): the op of
// this side right after the split point, else the last op before it (the change is at the end
// of the thread). The split point is the first change's range on this side, in the thread the
// diff engine paired (`threads`), as a tidx. `tracer::kNoSeq` when the result does not say.
int64_t change_seq(const Reader& reader, const json& fd, const char* side) {
  const std::string range_key = std::string(side) + "_range";
  const json& changes = fd.value("structural_changes", json::array());
  const json& threads = fd.value("threads", json());
  if (!changes.is_array() || changes.empty() || !changes[0].is_object() || !threads.is_object()) {
    return tracer::kNoSeq;
  }
  const json& range = changes[0].value(range_key, json());
  const json& thread = threads.value(side, json());
  if (!range.is_array() || range.empty() || !range[0].is_number_integer() ||
      !thread.is_number_integer()) {
    return tracer::kNoSeq;
  }
  auto id = thread.get<uint32_t>();
  int64_t split = range[0].get<int64_t>();
  for (int64_t tidx : {split, split - 1}) {
    if (tidx < 0) continue;
    if (auto op = reader.op_at(id, tidx)) return op->seq;
  }
  return tracer::kNoSeq;
}

json meta_json(const Reader& reader) {
  json meta = json::object();
  for (const auto& [k, v] : reader.all_meta()) meta[k] = v;
  return meta;
}

// Per-step op counts and times, plus the most frequent op names, from one scan without tensors.
Status step_aggregates(const Reader& reader, int max_steps, json* steps_out, json* names_out) {
  struct Step {
    int64_t ops = 0, backward = 0, first_seq = 0, last_seq = 0, start_ns = 0, end_ns = 0;
  };
  std::map<int64_t, Step> steps;
  std::unordered_map<tracer::StringId, int64_t> names;
  TDBG_RETURN_IF_ERROR(reader.scan_ops(std::nullopt, 0, INT64_MAX, false, [&](const OpRecord& op) {
    auto [it, fresh] = steps.try_emplace(op.step);
    Step& s = it->second;
    if (fresh) {
      s.first_seq = op.seq;
      s.start_ns = op.start_ns;
    }
    s.ops++;
    if (op.flags & tracer::kOpBackward) s.backward++;
    s.last_seq = std::max(s.last_seq, op.seq);
    s.start_ns = std::min(s.start_ns, op.start_ns);
    s.end_ns = std::max(s.end_ns, op.end_ns);
    names[op.name]++;
    return true;
  }));
  // Long runs are merged into at most `max_steps` rows so the report stays bounded.
  size_t per_row = steps.empty() ? 1 : (steps.size() + max_steps - 1) / std::max(max_steps, 1);
  json rows = json::array();
  size_t i = 0;
  json row;
  for (const auto& [step, s] : steps) {
    if (i % per_row == 0) {
      if (!row.is_null()) rows.push_back(row);
      row = {{"step", step}, {"last_step", step}, {"ops", 0}, {"backward_ops", 0},
             {"first_seq", s.first_seq}, {"last_seq", s.last_seq},
             {"start_ns", s.start_ns}, {"end_ns", s.end_ns}};
    }
    row["last_step"] = step;
    row["ops"] = row["ops"].get<int64_t>() + s.ops;
    row["backward_ops"] = row["backward_ops"].get<int64_t>() + s.backward;
    row["last_seq"] = std::max(row["last_seq"].get<int64_t>(), s.last_seq);
    row["end_ns"] = std::max(row["end_ns"].get<int64_t>(), s.end_ns);
    ++i;
  }
  if (!row.is_null()) rows.push_back(row);
  *steps_out = std::move(rows);

  std::vector<std::pair<int64_t, tracer::StringId>> sorted;
  for (const auto& [id, n] : names) sorted.emplace_back(n, id);
  std::sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  json top = json::array();
  for (size_t k = 0; k < sorted.size() && k < 40; ++k) {
    top.push_back({{"name", reader.string(sorted[k].second)}, {"count", sorted[k].first}});
  }
  *names_out = std::move(top);
  return Status::Ok();
}

// Everything about one run: its processes, steps and the window of ops of process `p`.
StatusOr<json> run_json(const tracer::Run& run, const std::string& label, size_t p,
                        int64_t center, const ReportOptions& options) {
  json out;
  out["label"] = label;
  out["path"] = run.path;
  json processes = json::array();
  for (const auto& reader : run.processes) {
    json threads = json::array();
    for (const auto& t : reader->threads()) {
      threads.push_back({{"id", t.id}, {"os_tid", t.os_tid}, {"name", t.name},
                         {"ops", reader->op_count(t.id)}});
    }
    json modules = json::array();
    for (const auto& m : reader->modules()) {
      modules.push_back({{"id", m.id}, {"kind", reader->string(m.kind)},
                         {"name", reader->string(m.name)}, {"hash", hex64(m.hash)},
                         {"size", m.size}, {"time_ns", m.time_ns}});
      if (modules.size() >= 2000) break;
    }
    processes.push_back({{"path", reader->path()},
                         {"schema_version", reader->schema_version()},
                         {"meta", meta_json(*reader)},
                         {"op_count", reader->op_count()},
                         {"threads", threads},
                         {"modules", modules}});
  }
  out["processes"] = processes;
  const Reader& reader = *run.processes[p];
  out["process"] = p;
  out["meta"] = meta_json(reader);
  // How the process ended, when not by a normal exit ("was ended by signal 15 (SIGTERM) while
  // thread 0 was inside aten::mm at train.py:27"), as tdbg show and diff say it.
  out["ending"] = diff::process_ending(reader);
  int64_t total = reader.op_count();
  out["op_count"] = total;

  json steps, names;
  TDBG_RETURN_IF_ERROR(step_aggregates(reader, options.max_steps, &steps, &names));
  out["steps"] = steps;
  out["top_ops"] = names;

  // The window: `window_ops` ops centred on `center` (seq), clamped to what the run holds.
  // With no center (a single run), its start; or, where a ring (or a trimmed bundle) dropped
  // the first ops, its end: what a ring is kept for.
  TDBG_ASSIGN_OR_RETURN(const tracer::Reader::Held held, reader.held());
  int64_t half = options.window_ops / 2;
  if (center < 0 && held.dropped_start)
    center = std::max<int64_t>(held.first_seq, held.last_seq - half + 1);
  if (center >= 0 && center < held.first_seq) center = held.first_seq;
  int64_t from = std::max<int64_t>(held.first_seq, (center < 0 ? 0 : center) - half);
  int64_t to = from + options.window_ops;
  StackTable stacks;
  json ops = json::array();
  int64_t first = -1, last = -1;
  TDBG_RETURN_IF_ERROR(reader.scan_ops(std::nullopt, from, to, true, [&](const OpRecord& op) {
    ops.push_back(op_json(reader, op, &stacks, true));
    if (first < 0) first = op.seq;
    last = op.seq;
    return true;
  }));
  out["window"] = {{"from_seq", first}, {"to_seq", last}, {"ops", ops.size()},
                   {"center_seq", center}, {"limit", options.window_ops}};
  out["ops"] = std::move(ops);
  out["stacks"] = stacks.json();

  json regions = json::array();
  int64_t region_count = 0;
  for (const auto& r : reader.regions()) {
    // An optimizer's settings are its step's (`diff` reads them), not a range of their own.
    if (r.kind == tracer::RegionKind::kOptimizer) continue;
    ++region_count;
    // Steps and user ranges that touch the window, plus the first few of the run.
    bool touches = r.start_seq <= last && (r.end_seq == tracer::kNoSeq || r.end_seq >= first);
    if (!touches && regions.size() >= 200) continue;
    if (regions.size() >= 2000) continue;
    regions.push_back({{"id", r.id}, {"thread", r.thread}, {"name", reader.string(r.name)},
                       {"kind", r.kind == tracer::RegionKind::kStep     ? "step"
                                : r.kind == tracer::RegionKind::kModule ? "module"
                                                                        : "user"},
                       {"start_seq", r.start_seq}, {"end_seq", r.end_seq}, {"step", r.step},
                       {"parent", r.parent}});
  }
  out["regions"] = regions;
  out["region_count"] = region_count;
  return out;
}

// One step of the diff engine's walk from the first divergence on, as the curve keeps it: the
// A seqs it covers, its ops, how many of them differ and by how much (1 for changed structure).
struct WalkStep {
  int64_t first_seq, last_seq, ops, differing;
  double rel;
};

// The ops of one run that the diff engine's walk found differing, for the op table: those of
// pairs whose outputs differ (or that pair unrelated work), and the ranges of changed
// structure (`[thread, first seq, last seq]`), from the walk's first op (`from_seq`) on.
struct SideMarks {
  int64_t from_seq = tracer::kNoSeq;
  std::vector<int64_t> seqs;
  std::vector<std::array<int64_t, 3>> ranges;
  void start(int64_t seq) {
    if (from_seq == tracer::kNoSeq) from_seq = seq;
  }
  // Those within [first, last] (the run's window in the report), as JSON.
  json to_json(int64_t first, int64_t last) const {
    json in_window = json::array(), overlapping = json::array();
    for (int64_t s : seqs)
      if (s >= first && s <= last) in_window.push_back(s);
    for (const auto& r : ranges)
      if (r[2] >= first && r[1] <= last) overlapping.push_back(r);
    return {{"from_seq", from_seq}, {"seqs", in_window}, {"ranges", overlapping}};
  }
};

// Collects the diff engine's walk (`diff::DiffOptions::on_aligned`) for the curve, and which
// ops it found differing on each side for the op tables.
void collect_walk(const diff::AlignedStep& s, std::vector<WalkStep>* walk, SideMarks* marks) {
  if (s.restart) {
    walk->clear();
    marks[0] = marks[1] = SideMarks();
  }
  if (s.a == nullptr || s.b == nullptr) {
    const int64_t ops = std::max(s.a_ops, s.b_ops);
    walk->push_back({s.a_first_seq, s.a_last_seq, ops, ops, 1});
    marks[0].start(s.a_first_seq);
    marks[1].start(s.b_first_seq);
    if (s.a_ops > 0) marks[0].ranges.push_back({int64_t{s.a_thread}, s.a_first_seq, s.a_last_seq});
    if (s.b_ops > 0) marks[1].ranges.push_back({int64_t{s.b_thread}, s.b_first_seq, s.b_last_seq});
    return;
  }
  marks[0].start(s.a->seq);
  marks[1].start(s.b->seq);
  bool outputs_differ = s.crossed;
  if (s.crossed) {
    walk->push_back({s.a->seq, s.a->seq, 1, 1, 1});
  } else {
    const double rel = s.differs ? outputs_difference(outputs_of(*s.a), outputs_of(*s.b), &outputs_differ) : 0;
    walk->push_back({s.a->seq, s.a->seq, 1, s.differs ? 1 : 0, rel});
  }
  if (outputs_differ) {
    marks[0].seqs.push_back(s.a->seq);
    marks[1].seqs.push_back(s.b->seq);
  }
}

// The difference curve from `from` for up to `scan_ops` ops, down-sampled to `points` buckets
// (the largest relative difference of output sums in each). Before the diff engine's walk
// (`walk`, from the first divergence on) ops are paired by seq: the runs agree up to there.
// From it on the curve follows the walk, which pairs ops as `tdbg diff` aligns them in the
// thread pair of the divergence: an insertion does not shift every later pair.
// With --align-steps (`aligned_start`, the diff's) the curve starts at A's first compared op,
// and the ops up to the walk are those the diff paired and found the same: by seq, ops of A's
// earlier steps would pair with B's own start.
StatusOr<json> difference_curve(const Reader& a, const Reader& b, int64_t from,
                                const std::vector<WalkStep>& walk, const json& aligned_start,
                                const ReportOptions& options) {
  const bool aligned = aligned_start.is_object();
  if (aligned) from = std::max(from, aligned_start["a"].value("seq", int64_t{0}));
  // By seq, to the last op both hold (a --ring's seqs run past its op count).
  TDBG_ASSIGN_OR_RETURN(const tracer::Reader::Held held_a, a.held());
  TDBG_ASSIGN_OR_RETURN(const tracer::Reader::Held held_b, b.held());
  if (!held_a.any || !held_b.any) return json(nullptr);
  const int64_t walk_from = walk.empty() ? tracer::kNoSeq : walk.front().first_seq;
  int64_t end = std::min(held_a.last_seq, held_b.last_seq) + 1;
  if (walk_from != tracer::kNoSeq) {
    end = walk_from;
    for (const WalkStep& w : walk) end = std::max(end, w.last_seq + 1);
  }
  int64_t to = std::min(end, from + options.curve_scan_ops);
  if (to <= from) return json(nullptr);
  int64_t span = to - from;
  int64_t per_bucket = std::max<int64_t>(1, (span + options.curve_points - 1) / options.curve_points);
  struct Bucket {
    int64_t first_seq = -1, last_seq = -1, ops = 0, differing = 0;
    double rel = 0;
  };
  std::vector<Bucket> buckets((span + per_bucket - 1) / per_bucket);
  int64_t first_differing = tracer::kNoSeq;
  auto add = [&](int64_t seq, int64_t ops, int64_t differing, double rel) {
    if (seq < from || seq >= to) return;
    Bucket& bk = buckets[(seq - from) / per_bucket];
    if (bk.first_seq < 0 || seq < bk.first_seq) bk.first_seq = seq;
    bk.last_seq = std::max(bk.last_seq, seq);
    bk.ops += ops;
    bk.differing += differing;
    bk.rel = std::max(bk.rel, rel);
    if (differing > 0 && (first_differing == tracer::kNoSeq || seq < first_differing))
      first_differing = seq;
  };
  // By seq, up to the walk.
  const int64_t by_seq_to = walk_from == tracer::kNoSeq ? to : std::min(to, walk_from);
  std::vector<OpOutputs> oa, ob;
  constexpr int64_t kChunk = 1 << 15;
  for (int64_t s = from; s < by_seq_to; s += kChunk) {
    int64_t e = std::min(by_seq_to, s + kChunk);
    TDBG_RETURN_IF_ERROR(scan_outputs(a, s, e, &oa));
    if (aligned) {
      for (const auto& x : oa) add(x.seq, 1, 0, 0);
      continue;
    }
    TDBG_RETURN_IF_ERROR(scan_outputs(b, s, e, &ob));
    size_t j = 0;
    for (const auto& x : oa) {
      while (j < ob.size() && ob[j].seq < x.seq) ++j;
      if (j >= ob.size() || ob[j].seq != x.seq) continue;
      const auto& y = ob[j];
      // Another op at the seq is as far apart as can be; the same op, by its outputs. (Two
      // statements: in one call's arguments `differs` could be read after the call set it.)
      const bool renamed = a.string(x.name) != b.string(y.name);
      bool differs = renamed;
      const double by_outputs = outputs_difference(x, y, &differs);
      const double rel = renamed ? 1.0 : by_outputs;
      add(x.seq, 1, differs ? 1 : 0, rel);
    }
  }
  // The walk: a change's ops spread over the A seqs it removes (all at the A op after it for
  // an insertion).
  for (const WalkStep& w : walk) {
    const int64_t span_seqs = w.last_seq - w.first_seq + 1;
    if (w.ops <= 1 || span_seqs <= 1) {
      add(w.first_seq, w.ops, w.differing, w.rel);
      continue;
    }
    for (int64_t k = 0; k < w.ops; ++k)
      add(w.first_seq + k * span_seqs / w.ops, 1, w.differing > 0 ? 1 : 0, w.rel);
  }
  json points = json::array();
  int64_t last = from;
  for (const auto& bk : buckets) {
    if (bk.ops == 0) continue;
    points.push_back({{"seq", bk.first_seq}, {"last_seq", bk.last_seq}, {"ops", bk.ops},
                      {"differing", bk.differing}, {"rel", finite_or_null(bk.rel)}});
    last = bk.last_seq;
  }
  json curve = {{"from_seq", from}, {"to_seq", walk_from == tracer::kNoSeq ? to - 1 : last},
                {"ops_per_point", per_bucket}, {"first_differing_seq", first_differing},
                {"points", points},
                {"measure", "max over outputs of |sum_a - sum_b| / max(abs_sum_a, abs_sum_b)"}};
  if (walk_from != tracer::kNoSeq) curve["aligned_from_seq"] = walk_from;
  if (aligned)
    curve["aligned_steps"] = {{"a", aligned_start["a"].value("step", int64_t{0})},
                              {"b", aligned_start["b"].value("step", int64_t{0})}};
  return curve;
}

}  // namespace

std::string hex64(uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(value));
  return buf;
}

std::string StackTable::add(const Reader& reader, tracer::FrameId innermost) {
  if (innermost == 0) return "";
  std::string key = std::to_string(innermost);
  if (!stacks_.contains(key)) stacks_[key] = frames_json(reader, innermost);
  return key;
}

namespace {

// A backward op has no stack of its own (autograd's thread runs no Python): the forward op
// it, or the autograd node it runs in, differentiates, where the run holds it and it has one.
std::optional<OpRecord> forward_with_stack(const Reader& reader, const OpRecord& op) {
  if (op.stack != 0 || op.user_frame != 0) return std::nullopt;
  const int64_t fwd = diff::forward_seq_of(reader, op);
  if (fwd == tracer::kNoSeq) return std::nullopt;
  auto forward = reader.op(fwd);
  if (!forward || (forward->stack == 0 && forward->user_frame == 0)) return std::nullopt;
  return forward;
}

// An op's row, with the source of `forward` (`forward_with_stack`) for a backward op.
json row_json(const Reader& reader, const OpRecord& op, const std::optional<OpRecord>& forward) {
  json j = {{"seq", op.seq}, {"thread", op.thread}, {"tidx", op.tidx}, {"depth", op.depth},
            {"name", reader.string(op.name)}, {"step", op.step},
            {"module", reader.string(op.module)}, {"flags", op.flags},
            {"backward", (op.flags & tracer::kOpBackward) != 0}, {"fwd", op.fwd},
            {"parent", op.parent}, {"start_ns", op.start_ns}, {"end_ns", op.end_ns},
            {"source", source_json(reader, op.user_frame ? op.user_frame : op.stack)}};
  if (forward) {
    j["source"] = source_json(reader, forward->user_frame ? forward->user_frame : forward->stack);
    j["source_from_forward"] = true;
  }
  return j;
}

}  // namespace

json op_row_json(const Reader& reader, const OpRecord& op) {
  return row_json(reader, op, forward_with_stack(reader, op));
}

json op_json(const Reader& reader, const OpRecord& op, StackTable* stacks, bool with_kernels) {
  // A backward op's source and stack are its forward op's, as `tdbg diff` and `show` give them.
  const std::optional<OpRecord> forward = forward_with_stack(reader, op);
  json j = row_json(reader, op, forward);
  j["region"] = op.region;
  j["chain"] = hex64(op.chain);
  j["rng"] = op.rng ? json(hex64(op.rng)) : json(nullptr);
  const tracer::FrameId stack = forward ? forward->stack : op.stack;
  if (stacks) {
    j["stack"] = stacks->add(reader, stack);
  } else {
    j["stack_frames"] = frames_json(reader, stack);
  }
  json tensors = json::array();
  for (const TensorRecord& t : op.tensors) {
    json tj = {{"role", t.role == tracer::TensorRole::kInput ? "input" : "output"},
               {"index", t.index},
               {"dtype", hashing::dtype_name(t.dtype)},
               {"shape", reader.string(t.shape)},
               {"device", reader.string(t.device)},
               {"status", tracer::tensor_status_name(t.status)},
               {"hash", comparable(t.status) ? json(hex64(t.hash)) : json(nullptr)},
               {"producer", t.producer}};
    if (t.summary.valid) {
      tj["summary"] = {{"min", finite_or_null(t.summary.min)},
                       {"max", finite_or_null(t.summary.max)},
                       {"sum", finite_or_null(t.summary.sum)},
                       {"abs_sum", finite_or_null(t.summary.abs_sum)},
                       {"nan", t.summary.nan_count},
                       {"inf", t.summary.inf_count}};
    }
    if (t.reason) tj["reason"] = diff::reason_text(reader.string(t.reason), op.seq);
    tensors.push_back(std::move(tj));
  }
  j["tensors"] = std::move(tensors);
  json args = json::array();
  for (const auto& a : op.args) {
    args.push_back({{"index", a.index}, {"name", reader.string(a.name)},
                    {"value", diff::number_text(reader.string(a.value))}});
  }
  j["args"] = std::move(args);
  if (with_kernels) {
    json kernels = json::array();
    for (const auto& k : reader.kernels(op.seq)) {
      kernels.push_back({{"name", reader.string(k.name)}, {"module", k.module},
                         {"grid", reader.string(k.grid)}, {"block", reader.string(k.block)},
                         {"shared_mem", k.shared_mem}, {"stream", k.stream},
                         {"start_ns", k.start_ns}, {"end_ns", k.end_ns}});
    }
    j["kernels"] = std::move(kernels);
  }
  return j;
}

StatusOr<json> build_report_data(const tracer::Run& a, const tracer::Run* b,
                                 const ReportOptions& options) {
  if (a.processes.empty()) return Status::Error(a.path + ": no process databases");
  if (b && b->processes.empty()) return Status::Error(b->path + ": no process databases");
  json data;
  data["format"] = "tdbg-report";
  data["version"] = 1;
  data["generator"] = "tdbg 0.1.0";
  data["mode"] = options.mode;
  data["bound"] = {{"window_ops", options.window_ops},
                   {"curve_scan_ops", options.curve_scan_ops},
                   {"curve_points", options.curve_points},
                   {"max_steps", options.max_steps}};

  json diff = nullptr;
  std::vector<WalkStep> walk;  // the diff's walk from the first divergence on
  SideMarks marks[2];          // and the ops it found differing in A and in B
  json nonfinite = json::array();
  if (options.with_diff) {
    if (b) {
      diff::DiffOptions diff_options;
      diff_options.align_steps = options.align_steps;
      diff_options.on_aligned = [&walk, &marks](const diff::AlignedStep& s) {
        collect_walk(s, &walk, marks);
      };
      auto d = diff::compare_runs(a, *b, diff_options);
      if (!d.ok()) return d.status();
      diff = std::move(d.value());
      for (const std::string& note : options.diff_notes) diff["notes"].push_back(note);
    }
    for (const tracer::Run* run : {&a, b}) {
      if (!run) continue;
      auto n = diff::first_nonfinite(*run);
      if (!n.ok()) return n.status();
      diff::add_nonfinite_cause(n.value());
      nonfinite.push_back(std::move(n.value()));
    }
  }
  data["diff"] = diff;
  data["nonfinite"] = nonfinite;
  // The command line's own words, which the page shows as they are: the page never says less
  // than `tdbg diff` and `tdbg nan` would.
  data["diff_text"] = diff.is_object() ? json(diff::format_divergence(diff)) : json(nullptr);
  json nonfinite_text = json::array();
  for (const json& n : nonfinite) nonfinite_text.push_back(diff::format_nonfinite(n));
  data["nonfinite_text"] = std::move(nonfinite_text);

  // Centre of each window: the divergence on that side, else the first non-finite, else 0.
  // A side with no op at a structural divergence (ops inserted in the other run, or removed
  // from this one) is centred where the change meets it, so that both windows hold the
  // change and `tdbg diff` on a bundle's trimmed databases finds the same divergence; the
  // other side's seq is the fallback (before the first divergence the runs agree).
  json fd = diff.is_object() && diff.contains("first_divergence") ? diff["first_divergence"]
                                                                  : json(nullptr);
  auto center_for = [&](size_t side) -> std::pair<int64_t, size_t> {
    const char* key = side == 0 ? "a" : "b";
    const tracer::Run& run = side == 0 ? a : *b;
    if (fd.is_object()) {
      // The diff engine names the process on the divergence, not on each side.
      size_t p = process_index(fd, run.processes.size());
      int64_t s = seq_of(fd.value(key, json()));
      if (s == tracer::kNoSeq) s = change_seq(*run.processes[p], fd, key);
      if (s == tracer::kNoSeq) s = seq_of(fd.value(side == 0 ? "b" : "a", json()));
      if (s != tracer::kNoSeq) return {s, p};
    }
    if (side < nonfinite.size() && nonfinite[side].is_object() &&
        nonfinite[side].contains("first_nonfinite")) {
      const json& nf = nonfinite[side]["first_nonfinite"];
      int64_t s = seq_of(nf);
      if (s != tracer::kNoSeq) return {s, process_index(nf, run.processes.size())};
    }
    return {-1, 0};  // none: run_json picks the start, or a ring's end
  };

  json runs = json::array();
  auto [ca, pa] = center_for(0);
  TDBG_ASSIGN_OR_RETURN(json ja, run_json(a, "A", pa, ca, options));
  runs.push_back(std::move(ja));
  if (b) {
    auto [cb, pb] = center_for(1);
    TDBG_ASSIGN_OR_RETURN(json jb, run_json(*b, "B", pb, cb, options));
    runs.push_back(std::move(jb));
    // The op tables mark differing ops as the diff paired them from its walk on (by seq
    // before it, where the runs agree): an insertion does not shift every later pair.
    if (marks[0].from_seq != tracer::kNoSeq) {
      json aligned = json::array();
      for (size_t side = 0; side < 2; ++side) {
        const json& window = runs[side]["window"];
        aligned.push_back(marks[side].to_json(window.value("from_seq", int64_t{-1}),
                                              window.value("to_seq", int64_t{-1})));
      }
      data["aligned"] = std::move(aligned);
    }
    int64_t from = std::max<int64_t>(0, ca - options.window_ops / 2);
    TDBG_ASSIGN_OR_RETURN(json curve,
                          difference_curve(*a.processes[pa], *b->processes[pb], from, walk,
                                           pa == 0 && pb == 0 && diff.is_object()
                                               ? diff.value("aligned_start", json())
                                               : json(),
                                           options));
    data["curve"] = std::move(curve);
  } else {
    data["curve"] = nullptr;
  }
  data["runs"] = std::move(runs);
  // The kernels table read whole: the window's ops looked up theirs through its index, which a
  // damaged table page may leave answering "none" (a report that shows no kernels).
  for (const tracer::Run* run : {&a, b}) {
    if (!run) continue;
    for (const auto& r : run->processes) (void)r->kernels(std::nullopt);
  }
  // Damage met on the way (a string or frame that does not resolve): not a report to show.
  TDBG_RETURN_IF_ERROR(a.lookup_status());
  if (b) TDBG_RETURN_IF_ERROR(b->lookup_status());
  return data;
}

}  // namespace tdbg::report
