// Human-readable renderings of `compare_runs` and `first_nonfinite` results: the answer to
// "where, and why" in the first lines, then the details a user looks at next.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "base/cpp_names.h"
#include "base/json_text.h"
#include "tlparse/diff/diff.h"
#include "tlparse/diff/native_lines.h"
#include "tlparse/diff/ops.h"

namespace tdbg::diff {
namespace {

// Differing values whose summaries are all equal: what differs is what they do not keep.
constexpr const char* kEqualSummaries =
    "summaries equal though values differ (what differs is not in min, max, sums or counts: "
    "the sign of a zero, as x * 0.0 of a negative x gives -0.0, the sign of an infinity, or "
    "the same values in another order)";

using nlohmann::json;

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  return json_text(*it);
}

std::string source_text(const json& side) {
  const json& src = side.value("source", json());
  if (!src.is_object()) {
    const std::string missing = str(side, "source_missing");
    return missing.empty() ? "(no source)" : "(no source: " + missing + ")";
  }
  std::string s = frame_text(str(src, "file"), src.value("line", int64_t{0}), str(src, "function"), false);
  if (side.value("source_from_forward", false)) s += " (forward op's line)";
  if (const std::string note = str(side, "source_note"); !note.empty()) s += " (" + note + ")";
  return s;
}

// Step 1 that is the loop's first iteration (`first_iteration`), as diff and nan say it.
constexpr char kFirstIterationLine[] =
    "  step:     step 1 here is still the training loop's first iteration: with several "
    "optimizers, the ops after the first optimizer's first step() up to the end of another's "
    "first step() count as step 1; a window holding it is --steps 0:2\n";

// "aten::empty (seq 6) at train.py:7", of an `op_brief_json`.
std::string op_and_source(const json& brief) {
  std::string s = str(brief, "op") + " (seq " + str(brief, "seq") + ")";
  if (!str(brief, "source").empty()) s += " at " + str(brief, "source");
  return s;
}

std::string where_text(const json& side) {
  std::string s = source_text(side);
  std::string module = str(side, "module");
  if (!module.empty()) s += " · module " + module;
  const json& enclosing = side.value("enclosing", json::array());
  if (!enclosing.empty()) {
    // Innermost first, each inside the next: "inside aten::linear < MyFunction".
    s += " · inside ";
    for (auto it = enclosing.rbegin(); it != enclosing.rend(); ++it)
      s += (it == enclosing.rbegin() ? "" : " < ") + str(*it, "op");
  }
  return s;
}

std::string num(const json& v) {
  if (!v.is_number()) return "-";
  // A summary's min and max of a tensor without one finite value (all NaN or infinite).
  if (std::isnan(v.get<double>())) return "(no finite value)";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v.get<double>());
  return buf;
}

void print_side(std::ostringstream& o, const char* label, const json& side) {
  if (side.is_null()) {
    o << "  " << label << ":        (no such op)\n";
    return;
  }
  o << "  " << label << ":        " << str(side, "op") << " seq " << str(side, "seq") << " step "
    << str(side, "step") << " · " << where_text(side) << "\n";
}

// Whether the runs' lines moved by `delta` at an op before the divergence too (the context's
// rows before it, where the runs agree): the file was edited so that its lines moved, and the
// op's other line is the same statement, not another code path.
bool lines_moved(const json& d, int64_t delta) {
  const json& context = d.value("context", json());
  if (delta == 0 || !context.is_object()) return false;
  const json& a = context.value("a", json::array());
  const json& b = context.value("b", json::array());
  auto split = [](const std::string& source, std::string* file, int64_t* line) {
    const size_t colon = source.rfind(':');
    if (colon == std::string::npos) return false;
    *file = source.substr(0, colon);
    *line = std::strtoll(source.c_str() + colon + 1, nullptr, 10);
    return *line > 0;
  };
  for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
    if (a[k].value("here", false) || b[k].value("here", false)) break;
    std::string fa, fb;
    int64_t la = 0, lb = 0;
    if (split(str(a[k], "source"), &fa, &la) && split(str(b[k], "source"), &fb, &lb) && fa == fb &&
        lb - la == delta)
      return true;
  }
  return false;
}

// "; A runs the collective c10d::allreduce_ (seq N, step S), which B does not: ..." where the
// structural changes hold a collective of one run alone (`collective_change`), else "".
std::string collective_change_text(const json& d) {
  const json& c = d.value("collective_change", json());
  if (!c.is_object()) return "";
  const std::string run = str(c, "run");
  return "; " + run + " runs the collective " + str(c, "op") + " (seq " + str(c, "seq") +
         ", step " + str(c, "step") + ") in these changes, which " + (run == "A" ? "B" : "A") +
         " does not: a sync one run skipped, such as DDP's gradient all-reduce under no_sync(), or "
         "a gradient DDP never got (a parameter the loss does not reach, with "
         "find_unused_parameters=False)";
}

// " (the same code in another order: ...)" where the runs part at lines each runs further on
// (`other_order`), else "".
std::string other_order_text(const json& d) {
  const json& order = d.value("other_order", json());
  if (!order.is_object()) return "";
  return " (the same code in another order: A runs " + str(order["a"], "source") +
         " further on (seq " + str(order["a"], "seq") + ") and B runs " +
         str(order["b"], "source") + " further on (seq " + str(order["b"], "seq") +
         "): calls or phases swapped, such as two models' training steps in the other order)";
}

// The input of a non-finite finding with `key`, `written_whole_by` (the op that wrote all of it
// last wrote no NaN) or `written_as_by` (it wrote into it through a view of another dtype):
// {"index", "by"}, else null.
json written_by(const json& f, const char* key) {
  for (const json& in : f.value("inputs", json::array()))
    if (const json& by = in.value(key, json()); by.is_object())
      return {{"index", in.value("index", json())}, {"by", by}};
  return nullptr;
}

void print_value(std::ostringstream& o, const json& d) {
  const json& a = d["a"];
  const json& b = d["b"];
  // The two runs reached the op from different lines (another code path): show both. A run
  // recorded without stacks has no line to differ.
  const bool source_a = a.value("source", json()).is_object();
  const bool source_b = b.is_object() && b.value("source", json()).is_object();
  // Or from another module (a block iterated in another order: the same line in each run).
  const bool other_lines = source_a && source_b &&
                           (source_text(a) != source_text(b) || str(a, "module") != str(b, "module"));
  // The same line of the same function in another file: two copies of one script (the usual
  // way to try a change), not another code path.
  const bool same_source = other_lines && source_text(a) == source_text(b);
  const bool other_file_only =
      other_lines && !same_source &&
      a["source"].value("line", json()) == b["source"].value("line", json()) &&
      a["source"].value("function", json()) == b["source"].value("function", json());
  if (other_lines) {
    o << "  where:    A " << where_text(a) << "\n";
    o << "            B " << where_text(b) << "\n";
  } else {
    o << "  where:    " << where_text(!source_a && source_b ? b : a) << "\n";
  }
  if (d.value("first_iteration", false)) o << kFirstIterationLine;
  // Another line of the same function in the same file (or a copy of it, by name): another
  // path through it, or an edit that moved its lines (then the ops before moved by as much).
  auto base = [](const json& side) {
    const std::string file = str(side["source"], "file");
    return file.substr(file.rfind('/') + 1);
  };
  const bool same_function =
      other_lines && !same_source && !other_file_only && base(a) == base(b) &&
      a["source"].value("function", json()) == b["source"].value("function", json());
  const bool backward = a.value("backward", false) || b.value("backward", false);
  const int64_t delta = same_function ? b["source"].value("line", int64_t{0}) - a["source"].value("line", int64_t{0}) : 0;
  o << "  cause:    " << str(d, "cause") << " — " << str(d, "detail");
  if (other_file_only)
    o << " (the same line of another file in each run)";
  else if (same_source)
    o << " (the same line, in another module in each run)";
  // Lines that moved by as much as the ops before: the same statement, from an edit (of a
  // forward op, only where the file is not known to be the same in both runs: then it is
  // another code path).
  else if (same_function && (backward || !d.value("same_source_file", false)) &&
           lines_moved(d, delta))
    o << " (the same statement: B's file has its lines " << (delta > 0 ? "lower" : "higher")
      << " by " << std::llabs(delta) << ", as the ops before it do, from an edit; not another "
      << "code path)";
  else if (d.contains("other_order"))
    o << other_order_text(d);
  else if (backward && other_lines)
    o << " (a backward op, placed at the line of the forward op whose gradient it computes or, "
         "accumulating a gradient, of the last one to reach it: another line in each run where "
         "the change above made its gradient another way)";
  else if (same_function && d.value("same_source_file", false))
    o << " (reached from another line of the same function in each run, of a file the same in "
         "both runs: another code path)";
  else if (same_function)
    o << " (reached from another line of the same function in each run: another code path, or "
         "an edit that moved the lines)";
  else if (other_lines && a["source"].value("line", int64_t{0}) > 0 &&
           b["source"].value("line", int64_t{0}) > 0)
    o << " (reached from another line in each run: another code path?)";
  o << "\n";
  const json& t = d.value("tensor", json());
  if (t.is_object()) {
    o << "  tensor:   " << str(t, "role") << " " << str(t, "index") << " " << str(t, "dtype") << "["
      << str(t, "shape") << "]  A " << str(t, "hash_a") << "  B " << str(t, "hash_b") << "\n";
    if (t.contains("shape_b") && str(t, "shape_b") != str(t, "shape")) {
      // The same sizes in another memory layout: not why the hashes differ (they are of the
      // values in logical order).
      auto sizes = [](const std::string& shape) { return shape.substr(0, shape.find(" strides")); };
      o << "  layout:   A [" << str(t, "shape") << "]  B [" << str(t, "shape_b") << "]"
        << (sizes(str(t, "shape")) == sizes(str(t, "shape_b"))
                ? " (strides only: hashes are of the values, whatever the layout)"
                : "")
        << "\n";
    }
  }
  // (A layout cause: the input's values are the same; the output's differ.)
  const json& output = d.value("output", json());
  if (output.is_object())
    o << "  output:   " << str(output, "role") << " " << str(output, "index") << " "
      << str(output, "dtype") << "[" << str(output, "shape") << "]  A " << str(output, "hash_a")
      << "  B " << str(output, "hash_b") << " (the summaries below are its)\n";
  const json& arg = d.value("argument", json());
  if (arg.is_object()) {
    o << "  argument: " << str(arg, "name") << " (#" << str(arg, "index") << ")  A "
      << argument_text(str(arg, "name"), str(arg, "value_a")) << "  B "
      << argument_text(str(arg, "name"), str(arg, "value_b")) << "\n";
    if (arg.value("optimizer", json()).is_object())
      o << "            (" << str(arg["optimizer"], "text") << ")\n";
    else if (arg.value("in_optimizer_step", false))
      o << "            (inside optimizer.step(): a scalar made of its hyperparameters, so lr, "
           "momentum, betas, eps or weight decay differs, or the scheduler that sets lr)\n";
    if (arg.value("generator", false))
      o << "            (where the random numbers come from: None is the default generator, which "
           "torch.manual_seed sets; a torch.Generator of its own keeps its own state, so a "
           "generator made or passed in one run only, such as DataLoader(generator=g), differs)\n";
    if (arg.value("module_mode", false))
      o << "            (the module's train/eval mode: it is in training mode in one run and in "
           "eval mode in the other, so model.train() or model.eval() is missing or moved)\n";
  }
  const json& rng = d.value("rng", json());
  if (rng.is_object()) o << "  rng:      A " << str(rng, "a") << "  B " << str(rng, "b") << "\n";
  if (a.is_object() && b.is_object() && str(a, "seq") != str(b, "seq")) {
    o << "  (seq " << str(a, "seq") << " in A, " << str(b, "seq") << " in B)\n";
  }
  const json& shown = output.is_object() ? output : t;
  if (shown.is_object() && shown["summary_a"].is_object() && shown["summary_b"].is_object()) {
    const json& sa = shown["summary_a"];
    const json& sb = shown["summary_b"];
    const json& rel = shown.value("rel_diff", json());
    o << "\n  summary        A                 B                 rel.diff\n";
    for (const char* k : {"min", "max", "sum", "abs_sum"}) {
      char line[160];
      std::snprintf(line, sizeof(line), "  %-8s %17s %17s %12s\n", k, num(sa[k]).c_str(),
                    num(sb[k]).c_str(),
                    rel.is_object() && rel[k].is_number() && !std::isnan(rel[k].get<double>())
                        ? num(rel[k]).c_str()
                        : "-");
      o << line;
    }
    char line[160];
    std::snprintf(line, sizeof(line), "  %-8s %17s %17s\n", "nan/inf",
                  (str(sa, "nan") + "/" + str(sa, "inf")).c_str(),
                  (str(sb, "nan") + "/" + str(sb, "inf")).c_str());
    o << line;
    bool summaries_equal = str(t, "hash_a") != str(t, "hash_b");
    for (const char* k : {"min", "max", "sum", "abs_sum", "nan", "inf"})
      summaries_equal = summaries_equal && sa.value(k, json()) == sb.value(k, json());
    if (summaries_equal) o << "  note:     " << kEqualSummaries << "\n";
  }
}

void print_context(std::ostringstream& o, const json& context) {
  if (!context.is_object()) return;
  o << "\n  context (A | B):\n";
  const json& ca = context["a"];
  const json& cb = context["b"];
  size_t n = std::max(ca.size(), cb.size());
  auto cell = [](const json& c) {
    if (!c.is_object()) return std::string();
    std::string s = (c.value("here", false) ? "> " : "  ") + std::string("#") + str(c, "seq") + " ";
    s += std::string(std::min<int>(8, c.value("depth", 0)) * 2, ' ') + str(c, "op");
    if (c.value("unfinished", false)) s += " (unfinished)";
    if (c.value("raised", false)) s += " (raised an error)";
    std::string src = str(c, "source");
    if (!src.empty()) s += "  " + src;
    return s;
  };
  for (size_t k = 0; k < n; ++k) {
    std::string left = k < ca.size() ? cell(ca[k]) : "";
    std::string right = k < cb.size() ? cell(cb[k]) : "";
    char line[512];
    std::snprintf(line, sizeof(line), "  %-58s | %s\n", left.c_str(), right.c_str());
    o << line;
  }
}

// Where no output differs after the divergence but inputs do (`inputs_only` of the growth):
// those inputs hold state an op changes in place, which no recorded output carries, or data
// from outside torch's ops.
void print_kept_inputs(std::ostringstream& o, const json& g) {
  const json& kept = g.value("inputs_only", json::array());
  if (kept.empty()) return;
  // Said where no output differs, or before the first step where one does (the running
  // statistics that an evaluation then reads): there the changed state explains the later
  // difference. Once outputs differ, inputs that differ are no news.
  int64_t first_kept = INT64_MAX, first_output = INT64_MAX;
  for (const json& row : kept) first_kept = std::min(first_kept, row.value("first_step", int64_t{0}));
  for (const json& s : g.value("steps", json::array()))
    if (s.value("outputs_differ", int64_t{0}) > 0)
      first_output = std::min(first_output, s.value("step", int64_t{0}));
  if (g.value("outputs_differ", int64_t{0}) > 0 && first_kept >= first_output) return;
  o << "            inputs differ while no output does:";
  size_t shown = 0;
  for (const json& row : kept) {
    if (row.value("first_step", int64_t{0}) >= first_output) continue;  // once outputs differ
    std::string list;
    for (const json& i : row.value("inputs", json::array()))
      list += (list.empty() ? "in " : ", in ") + std::to_string(i.get<int64_t>());
    const int64_t first = row.value("first_step", int64_t{0});
    const int64_t until = row.value("last_step", int64_t{0});
    o << (shown++ ? ";" : "") << " " << list << " of " << str(row, "op") << " (step " << first;
    if (until != first) o << " to " << until;
    o << ")";
  }
  bool all_from_change = true;
  std::string collective;  // the collective that wrote them all, if one did
  bool all_collective = true;
  for (const json& row : kept) {
    if (row.value("first_step", int64_t{0}) >= first_output) continue;
    all_from_change = all_from_change && row.value("from_change", false);
    const std::string c = str(row, "collective");
    all_collective = all_collective && !c.empty() && (collective.empty() || c == collective);
    collective = c;
  }
  if (all_collective && !collective.empty())
    o << "\n            no differing output made them: the collective " << collective
      << " wrote them (its result, hashed where first read): other ranks' values or the "
         "collective's own arguments differ\n";
  else if (all_from_change)
    o << "\n            no differing output made them: the ops only one run ran (the structural "
         "change) made them\n";
  else
    o << "\n            no differing output made them: state changed in place (such as batch "
         "norm's running statistics) or data from outside torch; what reads them later (eval "
         "mode, a saved checkpoint) reads other values\n";
}

// Where one run's values first turn NaN or Inf in the growth walk while the other's stay
// finite (`growth.first_nonfinite`): `tdbg nan` on that run says where it starts and why.
void print_nonfinite_run(std::ostringstream& o, const json& g) {
  const json nf = g.is_object() ? g.value("first_nonfinite", json()) : json();
  if (!nf.is_object()) return;
  const std::string at = str(nf, "source");
  o << "  non-finite: " << str(nf, "run") << "'s values hold NaN or Inf from step "
    << str(nf, "step") << " (first " << str(nf, "op") << (at.empty() ? "" : " at " + at) << ", seq "
    << str(nf, "seq") << "), where the other's stay finite: `tdbg nan` on " << str(nf, "run")
    << " says where they start and why\n";
}

void print_growth(std::ostringstream& o, const json& g, bool recording_stopped) {
  if (!g.is_object()) return;
  o << "\n  growth:   " << str(g, "ops_diverged") << " of " << str(g, "ops_compared")
    << " ops from here on differ";
  // --hash none: ops differ only in structure, shapes or arguments here; values are unknown.
  const bool values = g.value("values_recorded", true);
  if (!values) o << " in structure, shapes or arguments";
  if (g.value("structural_changes", 0) > 0) o << ", " << str(g, "structural_changes") << " structural change(s)";
  // The steps of one run after the other ended early (a crash): not compared, only one ran them.
  if (g.value("past_end_ops", int64_t{0}) > 0) {
    const std::string run = str(g, "past_end_run");
    const std::string other = run == "A" ? "B" : "A";
    o << " (" << str(g, "past_end_ops") << " of the ops in steps only " << run
      << (recording_stopped ? " holds: " + other + "'s recording stopped, not compared)"
                            : " ran: " + other + " ended early)");
  }
  if (!values) {
    o << "; values were not recorded, so how far the difference spread is unknown\n";
    return;
  }
  if (!g.value("complete", true)) o << " (stopped at the scan limit)";
  // No distance: the differing ops are all in structural changes (nothing paired to compare),
  // their outputs differ only in shape or dtype, or only inputs or arguments differ (batch
  // norm's running stats under another momentum).
  auto no_distance = [](const json& row) {
    const int64_t diverged = row.value("diverged", row.value("ops_diverged", int64_t{0}));
    if (diverged > 0 && row.value("structural_ops", int64_t{0}) >= diverged)
      return row.contains("moved_ops_differ")
                 ? "all in structural changes; " + str(row, "moved_ops_differ") +
                       " op(s) that moved compute other values than in the other run"
             : row.value("ops_compared", diverged) > diverged
                 ? "all in structural changes: the " +
                       std::to_string(row.value("ops_compared", diverged) - diverged) +
                       " op(s) paired outside them have the same values"
                 : std::string("all in structural changes, no paired values to compare");
    if (row.value("outputs_differ", int64_t{0}) > 0)
      return std::string(row.value("shapes_differ", int64_t{1}) > 0
                             ? "outputs differ in shape or dtype, no summary distance"
                             : "outputs differ in values without summaries (integer or bool "
                               "tensors), no summary distance");
    if (row.value("structural_ops", int64_t{0}) > 0)
      return std::string("no paired op's output differs (inputs or arguments only; the rest "
                         "are structural changes)");
    return std::string("no output differs (inputs or arguments only)");
  };
  if (g.value("max_distance", json()).is_null())
    o << "; " << no_distance(g) << "\n";
  else if (g["max_distance"].is_number() && g["max_distance"].get<double>() == 0)
    o << "; " << kEqualSummaries << "\n";
  else
    o << "; largest summary distance " << num(g["max_distance"]) << "\n";
  const json& steps = g.value("steps", json::array());
  print_kept_inputs(o, g);
  // Each step's row, and runs of steps whose rows read the same folded into one ("steps 0-7, each":
  // a change that touches the same few ops in every step), so that the steps where it reaches
  // further are among the rows shown.
  std::vector<std::pair<std::string, std::string>> rows;  // (step, what)
  for (const json& s : steps) {
    std::ostringstream r;
    r << str(s, "diverged") << "/" << str(s, "ops") << " ops differ";
    if (s.value("past_end", int64_t{0}) > 0 && s.value("past_end", int64_t{0}) >= s.value("diverged", int64_t{0}))
      r << ", a step only " << str(g, "past_end_run") << " ran";
    else if (s.value("max_distance", json()).is_null()) {
      if (s.value("diverged", 0) == 0) {
        rows.emplace_back(str(s, "step"), r.str());
        continue;
      }
      const int64_t structural = s.value("structural_ops", int64_t{0});
      // The paired ops that differ, after the ops of structural changes (most of them where a
      // dtype is float64 in one run) are counted.
      const std::string paired =
          s.value("outputs_differ", int64_t{0}) > 0
              ? (s.value("shapes_differ", int64_t{1}) > 0
                     ? "outputs differ in shape or dtype"
                     : "outputs differ in integer or bool values")
          : s.value("read_out", int64_t{0}) >= s.value("diverged", int64_t{0}) - structural
              ? "each reading a differing tensor out into Python (.item(), .tolist(), a print "
                "of the loss), no tensor made"
              : "no output among them: arguments or inputs differ (state updated in place, "
                "such as running statistics, or differences the op rounds away)";
      if (structural >= s.value("diverged", int64_t{0}))
        r << ", all in structural changes";
      else if (structural > 0)
        r << ", " << structural << " in structural changes; of the paired ones, " << paired;
      else
        r << ", " << paired;
    } else if (s["max_distance"].is_number() && s["max_distance"].get<double>() == 0)
      r << ", summaries equal";
    else
      r << ", summary distance up to " << num(s["max_distance"]);
    rows.emplace_back(str(s, "step"), r.str());
  }
  size_t shown = 0;
  for (size_t k = 0; k < rows.size();) {
    size_t end = k + 1;
    while (end < rows.size() && rows[end].second == rows[k].second) ++end;
    if (shown++ == 8) {
      o << "            ... " << rows.size() - k << " more step(s)\n";
      break;
    }
    // (Folded steps read alike, each: the counts are one step's, said so.)
    if (end - k > 1)
      o << "            steps " << rows[k].first << "-" << rows[end - 1].first
        << ", each: " << rows[k].second << "\n";
    else
      o << "            step " << rows[k].first << ": " << rows[k].second << "\n";
    k = end;
  }
}

// A stack frame's function as printed: a C++ function's without its parameters and made
// readable (`readable_function_name`: no return type, long templates shortened), as the where
// line gives it; a Python function's as it is.
std::string frame_function(const std::string& file, const std::string& function) {
  const bool python = file.size() >= 3 && file.compare(file.size() - 3, 3, ".py") == 0;
  if (python || function.empty() || (!file.empty() && file[0] == '<')) return function;
  return readable_function_name(std::string(without_parameters(function)));
}

void print_stack(std::ostringstream& o, const char* label, const json& side) {
  if (!side.is_object()) return;
  const json& stack = side.value("stack", json::array());
  if (stack.empty()) return;
  o << "\n  stack (" << label << ", innermost last):\n";
  // The innermost 12 frames, and every frame of the user's own code further out (the line
  // that called `load_state_dict`, `torch.jit.trace`): runs of library frames beyond those
  // (torch, the standard library, shared libraries) are counted, not listed.
  // (A C++ program's own frames in system headers, std::thread's plumbing or a torch header's
  // inline function, are library frames too.)
  auto library = [](const std::string& file) {
    return python_library_path(file) || file.find(".so") != std::string::npos ||
           (!file.empty() && file[0] == '<') || file.rfind("/usr/include/", 0) == 0 ||
           file.find("/include/c++/") != std::string::npos;
  };
  const size_t innermost = stack.size() > 12 ? stack.size() - 12 : 0;
  // Library frames outside the user's outermost one (a thread's entry plumbing) go too, and so
  // do those between two of the user's frames (a DataLoader worker's fork and fetch plumbing
  // between the training loop and `__getitem__`); those inside the innermost one (the op's
  // path through torch) stay.
  size_t first_user = 0;
  while (first_user < stack.size() && library(str(stack[first_user], "file"))) ++first_user;
  if (first_user == stack.size()) first_user = 0;
  size_t last_user = 0;
  for (size_t k = 0; k < stack.size(); ++k)
    if (!library(str(stack[k], "file"))) last_user = k;
  size_t hidden = 0;
  // Native frames still without a line: the `addr2line` command that gives their lines from
  // a -g build.
  std::string native_file, offsets;
  bool native_changed = false;
  std::string native_unavailable;  // why addr2line gave no lines (not on PATH, failed)
  bool own_native = false;  // a C++ frame of the program's own code, with its line
  for (const json& frame : stack)
    for (const json& l : frame.value("inlined", json::array()))
      own_native = own_native || !l.value("library", false);
  for (size_t k = 0; k < stack.size(); ++k) {
    if ((k < innermost || k < first_user || k < last_user) && library(str(stack[k], "file"))) {
      ++hidden;
      continue;
    }
    const int64_t line = stack[k].value("line", int64_t{0});
    const std::string file = str(stack[k], "file"), function = str(stack[k], "function");
    const json& inlined = stack[k].value("inlined", json::array());
    if (line > 0 && inlined.is_array() && inlined.size() > 1) {
      // A C++ call with functions inlined at it: the function it is in first, as stacks read.
      // Library code among them (std::make_shared's plumbing, torch's ModuleHolder, a std::
      // template instantiated for the program's type around its inlined constructor) is left
      // out and counted as library frames are, where the stack has lines of the program's own.
      for (size_t i = inlined.size(); i-- > 0;) {
        const json& l = inlined[i];
        if (own_native && l.value("library", false)) {
          ++hidden;
          continue;
        }
        if (hidden > 0) o << "    ... " << hidden << " library frame(s)\n";
        hidden = 0;
        o << "    " << str(l, "file") << ":" << str(l, "line") << " "
          << frame_function(str(l, "file"), str(l, "function"))
          << (i + 1 < inlined.size() ? " (inlined)" : "") << "\n";
      }
      continue;
    }
    if (hidden > 0) o << "    ... " << hidden << " library frame(s)\n";
    hidden = 0;
    if (line > 0) {
      o << "    " << file << ":" << line << " " << frame_function(file, function) << "\n";
      continue;
    }
    o << "    " << frame_text(file, line, function, false) << "\n";
    const size_t at = function.rfind(" +0x");
    if (at == std::string::npos || (!native_file.empty() && native_file != file)) continue;
    native_file = file;
    native_changed = stack[k].value("binary_changed", false);
    native_unavailable = str(stack[k], "lines_unavailable");
    offsets = " " + function.substr(at + 2) + offsets;  // innermost first
  }
  if (hidden > 0) o << "    ... " << hidden << " library frame(s)\n";  // inlined innermost
  // A file rebuilt since: its lines would be another build's; the offsets are the build's
  // that ran, wherever it is kept.
  if (!offsets.empty() && native_changed)
    o << "    (lines: " << native_file << " is another build now; with the build that ran: "
      << "addr2line -C -f -i -e BUILD" << offsets << ")\n";
  else if (!offsets.empty() && !native_unavailable.empty())
    o << "    (lines: " << native_unavailable << "; with it: addr2line -C -f -i -e " << native_file
      << offsets << ")\n";
  else if (!offsets.empty())
    // (The binary as it is gave no line: built without -g, or stripped; -g changes no code.)
    o << "    (lines: " << native_file << " has no debug info; built again with -g and the same "
      << "flags: addr2line -C -f -i -e BUILD" << offsets << ")\n";
}

// Warnings about how the runs were recorded (different --steps or --ops, no hashes): right
// under the headline, since they change how the answer reads.
void print_warnings(std::ostringstream& o, const json& result) {
  for (const json& w : result.value("warnings", json::array()))
    if (w.is_string()) o << "  warning:  " << w.get<std::string>() << "\n";
  // Settings that differ between the runs, on one line: often the cause itself.
  const json& settings = result.value("settings", json::array());
  if (!settings.is_array() || settings.empty()) return;
  o << "  settings: differ:";
  size_t shown = 0;
  for (const json& s : settings) {
    if (!s.is_object()) continue;
    if (shown == 6) {
      o << " (" << settings.size() - shown << " more in --json)";
      break;
    }
    auto value = [](const std::string& v) { return v.empty() ? std::string("(unset)") : v; };
    o << (shown++ ? ";" : "") << " " << str(s, "key") << " A " << value(str(s, "a")) << ", B "
      << value(str(s, "b"));
    if (s.contains("note")) o << " (" << str(s, "note") << ")";
  }
  o << "\n";
}

// An input's recorded values, as `tdbg nan` shows them: the range of its finite values and
// its NaN and Inf counts (" (3 NaN), min 0, max 2"), so the zero, the negative or the huge
// value that made NaN or Inf is in sight. A view of part of a tensor is shown with that
// tensor's values, said so.
// A value of a tensor's range to read: six significant digits, or as many as tell it apart
// where six would round it onto a whole number it is not (an acos input of 1.0000001, shown
// as 1, would hide why acos made NaN).
std::string range_value(double x) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.6g", x);
  const double shown = std::strtod(buf, nullptr);
  // (Past 1e15 every double is whole: nothing to tell apart there.)
  if (shown == x || shown != std::nearbyint(shown) || std::fabs(shown) >= 1e15) return buf;
  for (int digits = 7; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, x);
    const double back = std::strtod(buf, nullptr);
    // (A float32 tensor's bound reads back as that float: 1.0000001, not 1.00000011920928955.)
    if (back == x || static_cast<float>(back) == x) break;
  }
  return buf;
}

void print_values(std::ostringstream& o, const json& in) {
  const json& v = in.value("values", json());
  if (!v.is_object()) return;
  const std::string of = str(in, "values_of");
  const bool viewed = of == "viewed";
  const int64_t nan = v.value("nan", int64_t{0}), inf = v.value("inf", int64_t{0});
  std::string counts;
  if (nan > 0) counts = std::to_string(nan) + " NaN";
  if (inf > 0) counts += (counts.empty() ? "" : ", ") + std::to_string(inf) + " Inf";
  if (of == "view" || viewed) {
    const json& viewed_op = in.value("viewed_producer_op", json());
    o << (of == "view" ? ", a view of all of " : ", a view of part of ")
      << (viewed_op.is_object() ? "the output of " + op_and_source(viewed_op)
                                : "seq " + str(in, "viewed_producer") + "'s output")
      << ":" << (counts.empty() ? "" : " " + counts + ",");
  } else if (!counts.empty()) {
    o << " (" << counts << ")";
  }
  // NaN bounds (null once the JSON was written out): the tensor has no finite value at all.
  auto bound = [&](const char* key) { return v[key].is_number() && std::isfinite(v[key].get<double>()); };
  if (!bound("min") || !bound("max")) {
    o << (of == "view" || viewed ? "" : ",") << " no finite value";
  } else {
    // (The bounds of the finite values: summaries leave NaN and Inf out of them.)
    const char* finite = counts.empty() ? "" : " finite";
    o << (of == "view" || viewed ? "" : ",") << finite << " min "
      << range_value(v["min"].get<double>()) << ", max " << range_value(v["max"].get<double>());
  }
}

// An argument's text read as a number where the whole of it is one ("1.5", "0"), else nullopt.
std::optional<double> number_argument(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0') return std::nullopt;
  return v;
}

// Which operation on finite values most likely made the NaN or Inf of start `f`, from its op
// and its inputs' ranges ("log(0) = -inf: input min 0"), or "" when they do not tell.
std::string nonfinite_reason(const json& f) {
  std::string op = str(f, "op");
  if (op.rfind("aten::", 0) == 0) op = op.substr(6);
  while (!op.empty() && op.back() == '_') op.pop_back();  // the in-place form
  const json& inputs = f.value("inputs", json::array());
  auto range = [&](size_t k, double* lo, double* hi) {
    if (k >= inputs.size()) return false;
    // A view of part of a tensor: the range is the whole's, not the part's (a column of zeros
    // in a tensor whose min is -1).
    if (str(inputs[k], "values_of") == "viewed") return false;
    const json& v = inputs[k].value("values", json());
    if (!v.is_object() || !v.value("min", json()).is_number() || !v.value("max", json()).is_number())
      return false;
    *lo = v["min"].get<double>();
    *hi = v["max"].get<double>();
    return true;
  };
  // The largest magnitude among the inputs' recorded ranges, -1 where none has one.
  auto input_magnitude = [&] {
    double magnitude = -1, lo = 0, hi = 0;
    for (size_t k = 0; k < inputs.size(); ++k)
      if (range(k, &lo, &hi)) magnitude = std::max({magnitude, std::fabs(lo), std::fabs(hi)});
    return magnitude;
  };
  auto num = range_value;
  const json& out = f.value("tensor", json()).value("summary", json());  // the output's
  double lo = 0, hi = 0;
  // Reductions that divide by a count: over no element, by n - correction of 0 (a variance
  // of one sample), or by a loss's total weight of 0 (every target ignored).
  auto arg = [&](const char* name) -> std::optional<std::string> {
    for (const json& a : f.value("args", json::array()))
      if (str(a, "name") == name) return str(a, "value");
    return std::nullopt;
  };
  std::vector<int64_t> sizes;  // input 0's, "1x32"
  if (!inputs.empty())
    for (std::istringstream shape(str(inputs[0], "shape"));;) {
      std::string size;
      if (!std::getline(shape, size, 'x')) break;
      sizes.push_back(std::strtoll(size.c_str(), nullptr, 10));
    }
  static const std::set<std::string> kCounted = {"mean", "nanmean",  "var",
                                                 "std",  "var_mean", "std_mean"};
  if (kCounted.count(op) && !inputs.empty() && !str(inputs[0], "shape").empty() &&
      std::find(sizes.begin(), sizes.end(), 0) != sizes.end())
    return op + " of 0 elements (input " + str(inputs[0], "shape") +
           ": an empty selection or batch): 0/0";
  if (op == "var" || op == "std" || op == "var_mean" || op == "std_mean") {
    const std::optional<std::string> unbiased = arg("unbiased");
    const std::optional<std::string> correction_text = arg("correction");
    const int64_t correction = correction_text && correction_text != "None"
                                   ? std::strtoll(correction_text->c_str(), nullptr, 10)
                               : unbiased == "False" ? 0
                                                     : 1;
    const std::optional<std::string> dims = arg("dim");
    int64_t n = 1;
    if (!dims || *dims == "None" || *dims == "[]") {
      for (int64_t size : sizes) n *= size;
    } else {
      for (std::istringstream list(
               dims->substr(std::min(dims->find_first_not_of('['), dims->size())));
           ;) {
        std::string d;
        if (!std::getline(list, d, ',')) break;
        int64_t k = std::strtoll(d.c_str(), nullptr, 10);
        if (k < 0) k += static_cast<int64_t>(sizes.size());
        if (k >= 0 && k < static_cast<int64_t>(sizes.size())) n *= sizes[static_cast<size_t>(k)];
      }
    }
    if (correction > 0 && n - correction <= 0 && !sizes.empty())
      return op + " with correction " + std::to_string(correction) + " over " + std::to_string(n) +
             " element(s)" + (dims && *dims != "None" ? " along dim " + *dims : std::string()) +
             " (input " + str(inputs[0], "shape") + "): it divides by n - " +
             std::to_string(correction) + " = " + std::to_string(n - correction) +
             ", 0/0 (a batch of one sample?)";
  }
  if (op == "nll_loss_forward" || op == "nll_loss2d_forward") {
    const json& outputs = f.value("outputs", json::array());
    for (const json& o : outputs)
      if (o.value("index", -1) == 1 && o.value("summary", json()).is_object() &&
          o["summary"].value("max", json()) == 0 && o["summary"].value("min", json()) == 0 &&
          arg("reduction") == "1")
        return "the loss's total weight is 0: every target is ignore_index (" +
               arg("ignore_index").value_or("?") +
               ") or has weight 0, and the mean divides by it: 0/0";
  }
  // An op with a domain reading a view of part of a tensor: the part's values are not
  // recorded, only the whole's range, which says what the part may hold.
  static const std::map<std::string, std::string> kOutside = {{"log", "0 or a negative value"},
                                                              {"log2", "0 or a negative value"},
                                                              {"log10", "0 or a negative value"},
                                                              {"log1p", "-1 or below"},
                                                              {"sqrt", "a negative value"},
                                                              {"rsqrt", "0 or a negative value"},
                                                              {"reciprocal", "0"},
                                                              {"acos", "a value outside [-1, 1]"},
                                                              {"asin", "a value outside [-1, 1]"}};
  if (auto d = kOutside.find(op);
      d != kOutside.end() && !inputs.empty() && str(inputs[0], "values_of") == "viewed") {
    const json& v = inputs[0].value("values", json());
    if (v.is_object() && v.value("min", json()).is_number() && v.value("max", json()).is_number())
      return op + " of " + d->second +
             ", most likely: its input is a view of part of a tensor whose values range from " +
             num(v["min"].get<double>()) + " to " + num(v["max"].get<double>()) +
             ", and the part's own were not recorded";
  }
  if ((op == "acos" || op == "asin") && range(0, &lo, &hi) && (lo < -1 || hi > 1))
    return op + " of a value outside [-1, 1]: input min " + num(lo) + ", max " + num(hi) +
           "; a cosine or a normalized dot product rounded past 1 (clamp it to [-1, 1] first)";
  if (op == "acosh" && range(0, &lo, &hi) && lo < 1)
    return "acosh of a value below 1: input min " + num(lo);
  if (op == "atanh" && range(0, &lo, &hi) && (lo <= -1 || hi >= 1))
    return "atanh of a value at or beyond ±1: input min " + num(lo) + ", max " + num(hi);
  // pow's exponent, where it is a number argument (pow(x, 1.5)), with its text.
  std::optional<std::pair<double, std::string>> exponent;
  for (const json& a : f.value("args", json::array())) {
    const std::string v = a.value("value", std::string());
    if (const std::optional<double> e = number_argument(v); e && std::isfinite(*e)) {
      exponent = std::make_pair(*e, v);
      break;
    }
  }
  if (op == "pow" && range(0, &lo, &hi) && lo < 0 && exponent &&
      exponent->first != std::nearbyint(exponent->first))
    return "a negative base to a fractional power: input min " + num(lo) + ", exponent " +
           exponent->second;
  if ((op == "log" || op == "log2" || op == "log10") && range(0, &lo, &hi) && lo <= 0)
    return lo < 0 ? "log of a negative value: input min " + num(lo) : "log(0) = -inf: input min 0";
  if (op == "log1p" && range(0, &lo, &hi) && lo <= -1)
    return "log1p of a value at or below -1: input min " + num(lo);
  if (op == "sqrt" && range(0, &lo, &hi) && lo < 0) return "sqrt of a negative value: input min " + num(lo);
  if (op == "rsqrt" && range(0, &lo, &hi) && lo <= 0)
    return "rsqrt of 0 or of a negative value: input min " + num(lo);
  if (op == "reciprocal" && range(0, &lo, &hi) && lo <= 0 && hi >= 0)
    return "reciprocal of 0: input min " + num(lo) + ", max " + num(hi);
  if (op == "div" && range(1, &lo, &hi) && lo <= 0 && hi >= 0) {
    double nlo = 0, nhi = 0;
    const bool zero_over_zero = range(0, &nlo, &nhi) && nlo <= 0 && nhi >= 0;
    return std::string("division by a divisor that holds 0 (min ") + num(lo) + ", max " + num(hi) +
           (zero_over_zero ? "): 0/0 where the dividend is 0 too, x/0 elsewhere" : "): x/0");
  }
  // By the number 0 (`x / 0.0`, `div_(0.0)`): an argument, not a tensor.
  if (op == "div" || op == "true_divide" || op == "floor_divide" || op == "remainder" ||
      op == "fmod")
    for (const json& a : f.value("args", json::array()))
      if (str(a, "name") == "other" && number_argument(str(a, "value")) == 0.0)
        return "division by the number 0 (argument other = " + str(a, "value") +
               "): x/0, and 0/0 where x is 0";
  if (op == "div" && inputs.size() > 1 && inputs[1].value("finite", false) &&
      !inputs[1].value("values", json()).is_object()) {
    // A divisor whose values tdbg does not summarize (an integer tensor: a count, a mask's
    // sum). A true division of finite numbers makes NaN only as 0/0, and Inf, by an integer,
    // only as x/0 (a float divisor may also be small enough to overflow).
    const bool nan = out.is_object() && out.value("nan", int64_t{0}) > 0;
    const std::string dtype = str(inputs[1], "dtype");
    const bool integer = dtype.find("int") != std::string::npos || dtype == "bool";
    const std::string divisor = "divisor input 1 (" + dtype +
                                (integer ? "; tdbg keeps no summary of integer tensors)"
                                         : "; its values were not recorded)");
    const bool zero_dividend = range(0, &lo, &hi) && lo == 0 && hi == 0;
    if (nan)
      return "0/0: dividing finite numbers makes NaN only as 0/0, so " + divisor +
             " is 0 where the dividend is 0" +
             (zero_dividend ? ", and the dividend is 0 throughout" : "") +
             ": an empty count or mask, such as x.sum() / mask.sum() with nothing selected";
    if (integer)
      return "x/0: dividing by an integer makes Inf only as x/0, so " + divisor + " holds 0";
    return "x/0, or a divisor small enough to overflow: " + divisor;
  }
  const std::string dtype = f.value("tensor", json()).is_object() ? str(f["tensor"], "dtype") : "";
  const double largest = dtype == "float16"    ? 65504.0
                         : dtype == "bfloat16" ? 3.3895e38
                         : dtype == "float64"  ? std::numeric_limits<double>::max()
                                               : 3.4028e38;
  if (op == "exp" && range(0, &lo, &hi) && hi > std::log(largest))
    return "exp overflow: input max " + num(hi) + " is above " + num(std::log(largest)) +
           ", past which " + (dtype.empty() ? std::string("the dtype") : dtype) + "'s exp is Inf";
  if ((op == "_to_copy" || op == "to" || op == "copy") && (dtype == "float16" || dtype == "bfloat16") &&
      range(0, &lo, &hi) && std::max(std::fabs(lo), std::fabs(hi)) > largest)
    return "beyond " + dtype + "'s range (largest " + num(largest) + "): input min " + num(lo) +
           ", max " + num(hi);
  if (op == "addcdiv" && range(2, &lo, &hi) && lo <= 0 && hi >= 0)
    // self + value * tensor1 / tensor2: Adam's update divides by sqrt(v) + eps.
    return "tensor2, the divisor, holds 0: min " + num(lo) + ", max " + num(hi) +
           "; x/0, or 0/0 where tensor1 is 0 too; in Adam, a denominator sqrt(v) + eps with eps 0";
  // A product of finite inputs this large (float32's largest square root is 1.8e19): Inf, and
  // inf - inf in the sums a matrix product makes is NaN.
  static const std::set<std::string> kProducts = {
      "mm", "bmm", "addmm",  "baddbmm", "matmul",      "linear",       "addmv",
      "mv", "dot", "einsum", "conv2d",  "convolution", "_convolution", "mkldnn_convolution"};
  if (kProducts.count(op) && (dtype == "float32" || dtype == "float64") && out.is_object() &&
      out.value("inf", int64_t{0}) + out.value("nan", int64_t{0}) > 0) {
    const double magnitude = input_magnitude();
    if (magnitude >= std::sqrt(largest) / 16)
      return "an overflow: products of inputs up to " + num(magnitude) + " in magnitude pass " +
             dtype + "'s largest value, " + num(largest) + " (Inf; inf - inf in a sum is NaN)";
  }
  const bool inf_only =
      out.is_object() && out.value("inf", int64_t{0}) > 0 && out.value("nan", int64_t{0}) == 0;
  if (inf_only && (dtype == "float16" || dtype == "bfloat16"))
    return "a result beyond " + dtype + "'s range, whose largest value is " + num(largest);
  if (inf_only && (dtype == "float32" || dtype == "float64")) {
    // Inf alone from finite values: a result too large, or x/0 inside the op.
    const double magnitude = input_magnitude();
    const std::string from =
        magnitude >= 0 ? " from inputs up to " + num(magnitude) + " in magnitude" : std::string();
    if (op == "pow" && magnitude >= 0 && exponent && exponent->first > 1)
      return "overflow: inputs up to " + num(magnitude) + " in magnitude to the power " +
             exponent->second + " are beyond " + dtype + "'s largest value, " + num(largest);
    return "an overflow: a result beyond " + dtype + "'s largest value, " + num(largest) + from +
           " (or x/0 inside the op)";
  }
  return "";
}

// What the search passed over before its answer, each op counted once, "; "-separated with a
// leading separator: ops that only carried NaN or Inf (from an input, or an Inf argument: a
// mask), Inf starts that --nan-only ignores, and starts before --from-step.
std::string passed_over(int64_t explained, int64_t skipped, int64_t ignored, int64_t from_step,
                        int64_t contained, int64_t masked) {
  const char* sep = "; ";
  std::ostringstream o;
  if (masked > 0)
    o << sep << masked << " NaN/Inf start(s) the program masked (every op that read it made "
      << "finite values, as torch.where(x > 0, torch.log(x), 0) does; listed under masked:)";
  if (contained > 0)
    o << sep << contained << " NaN/Inf start(s) cleaned inside the op that ran them (a nested op's "
      << "NaN or Inf that the next nested ops wrote over with finite values before it returned, "
      << "such as torch's norm backward for a zero vector; listed under contained:)";
  if (ignored > 0)
    o << sep << ignored << " Inf start(s) ignored by --nan-only (Inf made from finite values:"
      << " an overflow, x/0, log(0))";
  if (skipped > 0) o << sep << skipped << " start(s) before step " << from_step << " skipped";
  if (explained > 0)
    o << sep << explained << " op(s) whose NaN/Inf came from their inputs or an Inf/NaN argument"
      << " (such as attention masks)";
  return o.str();
}

// "aten::log (seq 31, step 0) at train.py:7 in f": an op brief where it ran.
std::string op_step_source(const json& x) {
  return str(x, "op") + " (seq " + str(x, "seq") + ", step " + str(x, "step") + ") at " +
         source_text(x);
}

// The starts passed over as cleaned inside the op that ran them or masked by the program,
// where each was: the first ones of `total`, and how many more.
void print_contained(std::ostringstream& o, const json& starts, int64_t total) {
  if (!starts.is_array()) return;
  if (total > static_cast<int64_t>(starts.size()) && !starts.empty())
    o << "  (the first " << starts.size() << " of " << total << ":)\n";
  for (const json& c : starts) {
    if (!c.is_object()) continue;
    if (c.contains("masked_by")) {
      o << "  masked:   " << op_step_source(c) << " · read by " << str(c, "masked_by") << "\n";
      continue;
    }
    o << "  contained: " << op_step_source(c);
    const json& enclosing = c.value("enclosing", json::array());
    if (enclosing.is_array() && !enclosing.empty())
      o << " · inside " << str(enclosing[enclosing.size() - 1], "op");
    o << "\n";
  }
}

void print_notes(std::ostringstream& o, const json& result) {
  for (const json& n : result.value("notes", json::array()))
    if (n.is_string()) o << "  note:     " << n.get<std::string>() << "\n";
}

}  // namespace

// " by OP at FILE:LINE (seq N)": the op that overwrote the last tensor that differed, when
// the diff knows it.
std::string healed_by_text(const json& healed) {
  const json& by = healed.value("by", json());
  if (!by.is_object()) return "";
  const std::string source = str(by, "source");
  return " by " + str(by, "op") + (source.empty() ? "" : " at " + source) + " (seq " +
         str(by, "seq") + ")";
}

// Whether two divergences are the same argument difference: its name and both values.
bool same_argument(const json& first, const json& next) {
  const json& a = first.value("argument", json());
  const json& b = next.value("argument", json());
  return str(first, "cause") == "arguments" && str(next, "cause") == "arguments" && a.is_object() &&
         b.is_object() && str(a, "name") == str(b, "name") &&
         str(a, "value_a") == str(b, "value_a") && str(a, "value_b") == str(b, "value_b");
}

// The headline's ending when the first difference healed: what it made was overwritten.
std::string healed_suffix(const json& d) {
  const json& healed = d.value("healed", json());
  if (!healed.is_object()) return "";
  const json& next = d.value("next", json());
  if (next.is_object()) {
    const json& side = next["a"].is_object() ? next["a"] : next["b"];
    const std::string where = str(side, "op") + " (seq " + str(side, "seq") +
                              (next["a"].is_object() ? "" : " of B") + ", step " +
                              str(side, "step") + ")";
    // The same argument again (a weight decay, first applied to a tensor of zeros): one cause,
    // which changed no value at its first op and does at the next.
    if (same_argument(d, next))
      return "; it changed no value there, and the same argument changes values from " + where;
    return "; healed, then diverged again at " + where + ": " + str(next, "cause");
  }
  // An argument that changed no tensor of its op, nor any op after it.
  if (str(d, "kind") != "structure" && !d.value("tensor", json()).is_object())
    return "; it changes no value: every tensor is the same in both runs to the end";
  return "; healed" + healed_by_text(healed) + ": the same again from seq " + str(healed, "seq_a") +
         " to the end";
}

// "up to where B ended", or "... B's recording stopped" where the process went on unrecorded.
std::string up_to_where_ended(const json& ended) {
  return "up to where " + str(ended, "run") +
         (ended.value("recording_stopped", false) ? "'s recording stopped" : " ended");
}

std::string work_not_results(const json& d) {
  // The answer to "does this change my results?" belongs on the headline. A run that ended
  // early (`run_ended`) has none past its end: the answer holds up to there.
  // (Where it ended in the change, the detail already said how.)
  const json& ended = d.value("run_ended", json());
  if (ended.is_object()) {
    const bool said = d.contains("ended_in_change");
    const std::string until =
        " " + up_to_where_ended(ended) + (said ? "" : ": " + str(ended, "text"));
    if (d.value("contained", json()).is_object())
      return "; it reaches no other op's output" + until;
    if (d.value("values_same", json()).is_object()) return "; the values stay the same" + until;
    return said ? "" : "; then " + str(ended, "text");
  }
  if (d.value("contained", json()).is_object())
    return "; it reaches no other op's output (work, not results)";
  if (d.value("values_same", json()).is_object())
    return "; the values stay the same to the end (work, not results)";
  return "";
}

std::string relative_text(const json& v) {
  char size[32];
  std::snprintf(size, sizeof(size), "%.2g", v.is_number() ? v.get<double>() : 0.0);
  return size;
}

// The run whose process ended early, where the other's did not ("A", "B" or ""): the
// divergence is that end, the change ended there, or it came later (`run_ended`).
std::string run_that_ended(const json& d) {
  if (const json& ended = d.value("run_ended", json()); ended.is_object()) return str(ended, "run");
  if (d.contains("ended_in_change")) return str(d, "ended_in_change");
  if (str(d, "cause") == "ended") return d.value("a", json()).is_object() ? "B" : "A";
  return "";
}

// Where the first differing value read into Python was read (`growth.first_read_out`), as
// " (first aten::item at train.py:39)", or "".
static std::string read_out_where(const json& d) {
  const json growth = d.value("growth", json());
  const json read = growth.is_object() ? growth.value("first_read_out", json()) : json();
  if (!read.is_object()) return "";
  std::string op = str(read, "op");
  const std::string at = str(read, "source");
  // (What `.tolist()` runs before it reads the data without an op.)
  if (op == "aten::resolve_conj" || op == "aten::resolve_neg") op = ".tolist() (" + op + ")";
  return " (first " + op + (at.empty() ? "" : " at " + at) + ")";
}

std::string first_read_out_step(const json& d) {
  const json growth = d.value("growth", json());
  const json steps = growth.is_object() ? growth.value("steps", json()) : json();
  if (steps.is_array())
    for (const json& s : steps)
      if (s.value("read_out", int64_t{0}) > 0) return str(s, "step");
  return "";
}

// The headline's word on the optimizer's updates after a structural change (`updates`).
std::string updates_suffix(const json& d) {
  const json& u = d.value("updates", json());
  if (!u.is_object()) return "";
  // Where the optimizer's ops differ from a step on (a param group added), only the steps
  // before it were compared; where a run ended early, the steps up to its end.
  const std::string scope =
      !u.value("unpaired_step", json()).is_null()
          ? " in the steps before step " + str(u, "unpaired_step") +
                " (from there the optimizer runs other ops)"
      : !u.value("complete", true)
          ? " up to step " + str(u, "through_step") + " (--scan-limit stopped the comparison there)"
      : run_that_ended(d).empty() ? " in every step"
                                  : " in every step both ran";
  if (const json& drawn = u.value("random_change", json()); drawn.is_object())
    return "; the optimizer's updates differ by no more than rounding's size taken whole" + scope +
           " (largest relative difference " + relative_text(u["largest"]) + "), but " +
           str(drawn, "run") + " draws random numbers in the change: a real difference, small";
  // The same updates, and values the program reads into Python that differ (what it keeps
  // outside the optimizer: an average of the weights it evaluates): other results.
  const std::string read_step = first_read_out_step(d);
  const std::string read_out =
      read_step.empty() ? ""
                        : ", but values the program reads into Python (.item(), .tolist()) differ "
                          "from step " +
                              read_step + read_out_where(d) +
                              ": what it computes besides the updates (the loss it prints, a "
                              "metric, running statistics, an average of the weights)";
  if (u.value("rounding", false))
    return u.value("largest", 0.0) == 0
               ? "; the optimizer's updates are the same" + scope + read_out
               : "; the optimizer's updates agree at rounding level" + scope +
                     " (largest relative difference " + relative_text(u["largest"]) + ")";
  return "; the optimizer's updates differ beyond rounding from step " + str(u["beyond"], "step") +
         (u["beyond"].value("first_iteration", false)
              ? " (which begins in the loop's first iteration)"
              : "");
}

// The optimizer's updates after a structural change, step by step: the same training computed
// another way (micro-batches), or another result from a step on.
void print_updates(std::ostringstream& o, const json& d) {
  const json& u = d.value("updates", json());
  if (!u.is_object()) return;
  const std::string steps = str(u, "steps");
  const json& unpaired = u.value("unpaired_step", json());
  const std::string paired =
      !u.value("complete", true)
          ? "in the " + steps + " step(s) up to step " + str(u, "through_step") +
                " (--scan-limit stopped the comparison there)"
      : unpaired.is_null()
          ? "in all " + steps + " step(s) both ran"
          : "in the " + steps + " step(s) paired (from step " + str(u, "unpaired_step") +
                " on, the optimizer ran other ops in each run)";
  o << "  updates:  the outputs of the optimizer's steps (parameters, optimizer state), paired op "
       "for op ";
  if (u.value("rounding", false)) {
    if (u.value("largest", 0.0) == 0) {
      o << paired
        << (!unpaired.is_null()
                ? ", are the same; what the optimizer computes from there is not compared\n"
            : !first_read_out_step(d).empty()
                ? ", are the same; values the program reads into Python differ" +
                      read_out_where(d) + " (what it computes besides the updates)\n"
            : run_that_ended(d).empty()
                ? ", are the same: the change did not alter what the training computed\n"
                : ", are the same; " + run_that_ended(d) + " has no results after its end\n");
      return;
    }
    if (const json& drawn = u.value("random_change", json()); drawn.is_object()) {
      const std::string at = str(drawn, "source");
      o << paired << ", differ by no more than rounding's size taken whole (largest relative "
        << "difference " << relative_text(u["largest"]) << ", step " << str(u, "largest_step")
        << "), but " << str(drawn, "run") << " draws random numbers in the change that the other "
        << "run does not (" << str(drawn, "op") << (at.empty() ? "" : " at " + at)
        << "): noise added to the data or the weights, which changes what is trained however "
           "small its effect on these sums\n";
      return;
    }
    o << paired << ", agree at rounding level taken whole (largest relative difference "
      << relative_text(u["largest"]) << ", step " << str(u, "largest_step")
      << "): the change computes the same training up to rounding: ";
    // Why only rounding differs, where the change itself says: a conversion to another
    // dtype, another memory layout (channels_last); else the usual reasons.
    const json& after = d.value("value_after_structure", json());
    if (d.value("conversion", json()).is_object())
      o << "in another precision, which the conversion above brings, with its own rounding";
    else if (after.is_object() && str(after, "cause") == "layout")
      o << "with tensors in another memory layout (channels_last, a transpose made contiguous), "
           "whose kernels add in another order";
    else
      o << "in another order of float operations (a batch split into micro-batches whose "
           "gradients accumulate, another reduction order), or with a constant factor on the "
           "loss or the gradients that the optimizer undoes (Adam's normalization, gradient "
           "clipping; with plain SGD it would not)";
    // One tensor beyond rounding in a whole that is not: said, with its likely reason.
    const json& one = u.value("largest_tensor", json());
    if (one.is_object() && one.value("relative", 0.0) > 1e-5) {
      const std::string at = str(one["a"], "source");
      o << "; one output alone differs more, " << str(one["a"], "op")
        << (at.empty() ? "" : " at " + at) << " (seq A " << str(one["a"], "seq") << ", step "
        << str(one, "step") << ", relative " << relative_text(one["relative"]) << ")";
      // Adam's update divides by the gradient's size: a gradient 0 up to rounding (a parameter
      // the loss does not depend on, such as attention's key bias) becomes a whole step.
      if (str(one["a"], "op") == "aten::addcdiv_")
        o << ": Adam's update of a parameter whose gradient is 0 up to rounding (one the loss "
             "does not depend on, such as attention's key bias), which it scales to a whole step";
    }
    o << "\n";
    return;
  }
  const json& beyond = u["beyond"];
  const int64_t agreed = beyond.value("steps_agreed", int64_t{0});
  const std::string source = str(beyond["a"], "source");
  o << paired << ", differ beyond rounding from step " << str(beyond, "step")
    << (beyond.value("first_iteration", false)
            ? " (which begins in the training loop's first iteration, as several optimizers "
              "count steps)"
            : "")
    << ": " << str(beyond["a"], "op") << (source.empty() ? "" : " at " + source) << " (seq A "
    << str(beyond["a"], "seq") << ", B " << str(beyond["b"], "seq") << ", relative "
    << relative_text(beyond["relative"]) << ")"
    << (agreed > 0 && beyond.value("agreed_exactly", false)
            ? "; the " + std::to_string(agreed) +
                  " step(s) before it compute the same updates (a change that begins there)"
        // Measured against the parameters' own size: a change to the gradients too small
        // against it to tell from rounding (the first steps' updates are) is no rounding.
        : agreed > 0 ? "; in the " + std::to_string(agreed) +
                           " step(s) before it, the parameters and optimizer state differ by no "
                           "more than rounding of their own size (a difference in the updates "
                           "too small against the parameters to tell from rounding, which grew, "
                           "or a change that begins there)"
                     : ": the change alters what the training computes")
    << "\n";
}

// A resumed run compared from its step 0 (--align-steps, or a resumption the diff found) begins
// with its start-up, building the model and loading the checkpoint, where the other run ends its
// previous step: a change every resumption has. When that is the first change, the headline goes
// on to the first value difference after it, which is the answer.
std::string resumed_startup_suffix(const json& result) {
  const json& d = result.value("first_divergence", json());
  if (!d.is_object() || str(d, "kind") != "structure") return "";
  const json& after = d.value("value_after_structure", json());
  if (!after.is_object() || !after["a"].is_object() || !after["b"].is_object()) return "";
  const char* resumed = nullptr;
  const json& start = result.value("aligned_start", json());
  if (start.is_object() && d["a"].is_object() && d["b"].is_object()) {
    // Steps paired by hand (--align-steps) from the first ops.
    for (const char* side : {"a", "b"})
      if (!start[side].is_object() || str(d[side], "seq") != str(start[side], "seq")) return "";
    resumed = str(start["b"], "step") == "0" && str(start["b"], "seq") == "0"   ? "B"
              : str(start["a"], "step") == "0" && str(start["a"], "seq") == "0" ? "A"
                                                                                : nullptr;
  } else {
    // Found by the aligner: one run's first ops (seq 0) inserted, and the first value
    // difference after them pairs a later step of the other run with its step 0.
    const std::string step_a = str(after["a"], "step"), step_b = str(after["b"], "step");
    if (!d["a"].is_object() && d["b"].is_object() && str(d["b"], "seq") == "0" && step_b == "0" &&
        step_a != "0")
      resumed = "B";
    else if (!d["b"].is_object() && d["a"].is_object() && str(d["a"], "seq") == "0" &&
             step_a == "0" && step_b != "0")
      resumed = "A";
  }
  if (!resumed) return "";
  const std::string step_a = str(after["a"], "step"), step_b = str(after["b"], "step");
  const std::string fresh = str(after, "optimizer_fresh");
  return std::string("; that is ") + resumed +
         "'s start-up (a resumed run builds its model and loads "
         "its checkpoint); the first value difference after it: " +
         str(after["a"], "op") + " (seq A " + str(after["a"], "seq") + ", B " +
         str(after["b"], "seq") +
         (step_a == step_b ? ", step " + step_a : ", step A " + step_a + ", B " + step_b) + "): " +
         (!fresh.empty() ? fresh +
                               "'s optimizer started afresh (its state was not restored: "
                               "optimizer.load_state_dict missing?)"
          : str(after, "cause") == "rng"
              ? std::string("rng, a random op drew from another generator state (in a resumed "
                            "run: the generators' state was not restored, torch.set_rng_state "
                            "missing?)")
              : str(after, "cause"));
}

// After a structural change whose first value difference is optimizer state one run made
// afresh (`optimizer_fresh`: a model and optimizer built again in the same process and the
// checkpoint's optimizer state not loaded), or a random op whose generator the change's own
// draws moved: the answer, in the headline as for a resumed run.
std::string value_after_change_suffix(const json& d) {
  const json& after = d.value("value_after_structure", json());
  if (str(d, "kind") != "structure" || !after.is_object()) return "";
  // Or a random op whose numbers the change's own draws moved (`drawn_in_change`).
  if (const json& drawn = after.value("drawn_in_change", json()); drawn.is_object())
    return "; then a random op draws other numbers (" + str(after["a"], "op") + ", step " +
           str(after["a"], "step") + "): " + str(drawn, "run") +
           "'s changed ops drew from the generator first, " + op_and_source(drawn);
  if (str(after, "optimizer_fresh").empty()) return "";
  const json& side = after.value("a", json()).is_object() ? after["a"] : after.value("b", json());
  return "; " + str(after, "optimizer_fresh") + "'s optimizer started afresh" +
         (side.is_object() ? " at step " + str(side, "step") : std::string()) +
         " (its state was not restored: optimizer.load_state_dict missing?)";
}

// After a structural change, parameters one run's optimizer leaves that the other's updates
// (`not_updated`): the change cut them off from their gradient, the answer, which the change's
// own name (a CheckpointFunction inserted) may not suggest.
std::string not_updated_suffix(const json& d) {
  const json& n = d.value("not_updated", json());
  if (!n.is_object()) return "";
  // The modules of all of them (`modules`), else of the first few.
  std::string modules;
  const bool all = n.value("modules", json()).is_array();
  for (const json& m : all ? n["modules"] : n.value("params", json::array()))
    if (const std::string name = m.is_string() ? m.get<std::string>() : str(m, "module");
        !name.empty() && modules.find(name) == std::string::npos)
      modules += (modules.empty() ? "" : ", ") + name;
  const std::string run = str(n, "run");
  const bool more = !all && n.value("missing", size_t{0}) > n.value("params", json::array()).size();
  return "; " + run + "'s optimizer leaves " + str(n, "missing") + " parameter(s) the other's " +
         "updates" + (modules.empty() ? "" : " (in " + modules + (more ? ", ...)" : ")")) +
         (n.value("skipped_by_optimizer", false)
              ? ": backward ran the same ops in both runs, so " + run +
                    "'s optimizer was not given them (or their .grad was None at its step)"
              : ": no gradient reaches them in " + run);
}

// The parameters one run's optimizer leaves (`not_updated`), and why that happens.
void print_not_updated(std::ostringstream& o, const json& d) {
  const json& n = d.value("not_updated", json());
  if (!n.is_object()) return;
  const std::string run = str(n, "run");
  o << "  params:   in step " << str(n, "step") << " A's optimizer updates " << str(n, "updated_a")
    << " tensor(s), B's " << str(n, "updated_b") << "; " << run << "'s leaves";
  const json& params = n.value("params", json::array());
  for (size_t k = 0; k < params.size(); ++k) {
    const json& param = params[k];
    o << (k == 0 ? " " : "; ") << str(param, "shape");
    if (param["made_by"].is_object()) o << " made by " << op_and_source(param["made_by"]);
    if (!str(param, "module").empty()) o << ", read in " << str(param, "module");
  }
  const int64_t more = n.value("missing", int64_t{0}) - static_cast<int64_t>(params.size());
  if (more > 0) o << " (and " << more << " more)";
  if (n.value("skipped_by_optimizer", false))
    o << ": the runs first differ inside optimizer.step(), so backward computed their gradients "
      << "in both; " << run << "'s optimizer was not given them (a layer left out of its "
      << "parameters or param groups), or their .grad was set to None before the step\n";
  else
    o << ": no gradient reached them in " << run << " (requires_grad False, a .detach() or "
      << "torch.no_grad() on their way, a reentrant torch.utils.checkpoint over inputs that do "
      << "not require grad), or " << run << "'s optimizer was not given them\n";
}

std::string headline_verdict(const json& d) {
  return healed_suffix(d) + work_not_results(d) + updates_suffix(d) + not_updated_suffix(d);
}

// What healing means, and the new divergence after it with its cause.
void print_healing(std::ostringstream& o, const json& d) {
  const json& healed = d.value("healed", json());
  if (!healed.is_object()) return;
  const json& next = d.value("next", json());
  // The same argument again (a weight decay on a tensor of zeros first): one cause, not a
  // healing and a second divergence.
  const bool again = next.is_object() && same_argument(d, next);
  o << (again ? "  same:     " : "  healed:   ") << "from seq " << str(healed, "seq_a") << " (step "
    << str(healed, "step") << ") ";
  // An argument that differs while every tensor of the op is the same (a clamp bound no value
  // reaches): no value ever differed, so none was overwritten.
  const bool no_value_differed = str(d, "kind") != "structure" && !d.value("tensor", json()).is_object();
  const std::string by = healed_by_text(healed);
  const std::string last_by = by.empty() ? "" : ", the last" + by;
  if (healed.value("to_end", false)) {
    o << "to the end, all " << str(healed, "ops_same") << " op(s) compared are the same in both "
      << "runs: "
      << (no_value_differed
              ? "the op's tensors are the same in both runs, so what differs changed no value"
              : "every tensor that differed was overwritten with the same values (as when "
                "loaded weights replace a random init)" +
                    last_by + ", and it changed nothing after");
    if (healed.value("repeats", int64_t{0}) > 0)
      o << "; the same argument differs again at " << str(healed, "repeats")
        << " later call(s) of the op, changing no value there either";
    o << "\n";
    return;
  }
  o << "on, " << str(healed, "ops_same") << " op(s) were the same in both runs: "
    << (no_value_differed
            ? "the op's tensors are the same in both runs, so what differs changed no value"
            : "what this difference made was overwritten with the same values" + last_by)
    << (again ? " (its tensor is one the argument leaves as it is, such as zeros)" : "") << "\n";
  if (!next.is_object()) return;
  if (again) {
    o << "\n  the same argument changes values at: " << str(next["a"], "op") << " (seq A "
      << str(next["a"], "seq") << ", B " << str(next["b"], "seq") << ", step "
      << str(next["a"], "step") << ")\n";
    print_value(o, next);
    return;
  }
  if (str(next, "kind") == "structure") {
    o << "\n  next divergence, structural: " << str(next, "detail") << "\n";
    if (next["a"].is_object()) print_side(o, "A", next["a"]);
    if (next["b"].is_object()) print_side(o, "B", next["b"]);
    return;
  }
  o << "\n  next divergence, of its own (every tensor input the same in both runs): "
    << str(next["a"], "op") << " (seq A " << str(next["a"], "seq") << ", B "
    << str(next["b"], "seq") << ", step " << str(next["a"], "step") << "): "
    << str(next, "cause") << "\n";
  print_value(o, next);
}

std::string format_divergence(const json& result) {
  std::ostringstream o;
  const json& d = result.value("first_divergence", json());
  if (!d.is_object()) {
    const std::string part = str(result, "recorded_part");
    o << (result.value("values_compared", true)
              ? "identical"
              : "identical in ops, shapes and arguments (tensor values not recorded)")
      << (part.empty() ? "" : " over what both recorded (" + part + ")") << ": "
      << str(result, "run_a") << " and " << str(result, "run_b") << " ("
      << str(result, "threads_compared") << " thread(s)";
    // Of several processes each (ranks, DataLoader workers, a launcher): how many.
    const json& processes = result.value("processes", json());
    if (processes.is_object() && processes.value("a", 0) > 1)
      o << " of " << str(processes, "a") << " processes";
    o << " compared)\n";
    print_warnings(o, result);
    print_notes(o, result);
    // Only a part of each run was recorded: the runs may differ in the rest.
    if (!part.empty())
      o << "  next:     only that part of the runs was compared; they may differ outside it: "
           "record both again with "
        << (part.find("--steps") != std::string::npos ? "a --steps window further on (or none)"
            : part.find("--ops") != std::string::npos ? "other --ops (or none)"
                                                      : "a larger --ring (or none)")
        << " to look there\n";
    // Values not compared: the runs may still differ in them, which the next pass can tell.
    if (!result.value("values_compared", true)) {
      // A data file both read, another version in each: the likely difference in the values.
      std::string file;
      for (const json& st : result.value("settings", json::array()))
        if (str(st, "key").rfind("file ", 0) == 0 && st.value("contents_differ", false)) {
          file = str(st, "key").substr(5);
          break;
        }
      o << "  next:     the values were not compared"
        << (file.empty() ? ""
                         : " (and " + file +
                               ", which both runs read, has other contents in each: their "
                               "values most likely differ from where it is read)")
        << "; to compare them, record both again with hashing on (without --hash none), over "
           "a --steps window around the step where the runs' losses first differ, or with --ops "
           "set to the loss's op\n";
    }
    return o.str();
  }
  const json& a = d.value("a", json());
  const json& b = d.value("b", json());
  const json& process = d.value("process_a", json());
  // A DataLoader worker runs no optimizer: its ops' step (0) says nothing; name the worker.
  const std::string worker = process.is_object() ? str(process, "worker") : "";
  // The step (both runs' where they differ: the same op an iteration later), and the thread
  // where it is not the first one.
  const json& threads = d.value("threads", json());
  const std::string worker_rank = process.is_object() ? str(process, "parent_rank") : "";
  auto where_in_run = [&](const json& side) {
    std::string where = "in DataLoader worker " + worker + (worker_rank.empty() ? "" : " of rank " + worker_rank);
    if (worker.empty()) {
      // A run that ended: the step it ended in (the other's next op may be a step later, when
      // --ops recorded none of the ops between).
      where = "step " + (d.contains("ended_step") ? str(d, "ended_step") : str(side, "step"));
      if (a.is_object() && b.is_object() && str(a, "step") != str(b, "step"))
        where = "step A " + str(a, "step") + ", B " + str(b, "step");
    }
    if (process.is_object() && process.contains("forked_at_step"))
      where += (worker.empty() ? " of a process forked at step " : " forked at step ") +
               str(process, "forked_at_step");
    if (threads.is_object() && (str(threads, "a") != "0" || str(threads, "b") != "0")) {
      where += str(threads, "a") == str(threads, "b")
                   ? ", thread " + str(threads, "a")
                   : ", thread A " + str(threads, "a") + ", B " + str(threads, "b");
    }
    return where;
  };
  // B's process too, where it reads otherwise (its database, for `tdbg show`; another process
  // where a pool's workers are compared as one set).
  const json& process_b = d.value("process_b", json());
  auto print_process = [&] {
    if (process.is_object())
      o << "  process:  "
        << (process_b.is_object() && str(process_b, "text") != str(process, "text")
                ? "A " + str(process, "text") + "\n            B " + str(process_b, "text")
                : str(process, "text"))
        << "\n";
    // Compared from after the threads' first ops: said by the headline, not in a note below.
    const json& from = d.value("compared_from", json());
    if (from.is_object() && from.value("bundle_window", false))
      o << "  compared: from A's op " << str(from, "tidx") << " of the thread (step " << str(from, "step")
        << ") on: a bundle holds this window of the runs, cut around the divergence found when "
        << "they were compared whole (its diff.json)\n";
    else if (from.is_object())
      o << "  compared: from A's op " << str(from, "tidx") << " of the thread (step " << str(from, "step")
        << ") on: a --ring or a trimmed bundle dropped the earlier ones, and the runs may have "
        << "differed before"
        << (from.value("in_first_step", false)
                ? "; this difference is in the first step held, so they likely did: record "
                  "again with a longer --ring, or with --steps from an earlier step"
                : "")
        << "\n";
  };
  if (str(d, "kind") == "value") {
    o << "diverged at " << str(a, "op") << " (seq " << str(a, "seq") << ", " << where_in_run(a)
      << "): " << str(d, "cause") << healed_suffix(d);
    const json& contained = d.value("contained", json());
    o << work_not_results(d) << updates_suffix(d) << "\n";
    print_warnings(o, result);
    print_process();
    print_value(o, d);
    print_healing(o, d);
    print_updates(o, d);
    if (contained.is_object())
      o << "  values:   every output that differs, to the end (" << str(contained, "pairs")
        << " pairs compared), was made from the same inputs by an op whose own argument or "
           "generator differs: the difference reaches no other op's output (what Python reads "
           "of a tensor without an op, such as .numpy() or torch.save, is not seen)\n";
  } else {
    const json& side = a.is_object() ? a : b;
    // One run stopped early (a signal, a crash): say so first, it is the answer.
    if (d.contains("still_recording"))
      o << str(d, "still_recording") << " is still being recorded, read up to its last commit";
    else
      o << (d.contains("recording_stopped") ? "recording stopped"
            : str(d, "cause") == "ended"    ? "ended early"
                                            : "diverged structurally");
    if (side.is_object()) o << (worker.empty() ? " at " : " ") << where_in_run(side);
    o << ": " << str(d, "detail") << other_order_text(d) << collective_change_text(d)
      << healed_suffix(d);
    const std::string resumed = resumed_startup_suffix(result);
    o << work_not_results(d) << updates_suffix(d) << not_updated_suffix(d) << resumed
      << (resumed.empty() ? value_after_change_suffix(d) : "") << "\n";
    print_warnings(o, result);
    print_process();
    print_side(o, "A", a);
    print_side(o, "B", b);
    if (d.value("first_iteration", false)) o << kFirstIterationLine;
    const json& t = d.value("tensor", json());
    if (t.is_object()) {
      o << "  tensor:   " << str(t, "role") << " " << str(t, "index") << "  A " << str(t, "dtype") << "["
        << str(t, "shape") << "]  B " << str(t, "dtype_b") << "[" << str(t, "shape_b") << "]\n";
    }
    const json& changes = d.value("structural_changes", json::array());
    for (size_t k = 0; k < changes.size() && k < 5; ++k) {
      const json& h = changes[k];
      // Ranges of the thread's op indices (tidx, as `tdbg show --thread` counts them), not seqs.
      auto range = [](const json& r) {
        return r.is_array() && r.size() == 2 ? "[" + json_text(r[0]) + ", " + json_text(r[1]) + ")"
                                             : json_text(r);
      };
      o << "  change:   " << str(h, "type") << "  thread op index A" << range(h["a_range"]) << "  B"
        << range(h["b_range"]);
      // The lists hold the first ops of each side only: say how many more the range has.
      auto more = [](const json& r, size_t listed) -> std::string {
        if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() ||
            !r[1].is_number_integer())
          return "";
        const int64_t n = r[1].get<int64_t>() - r[0].get<int64_t>() - static_cast<int64_t>(listed);
        return n > 0 ? " (" + std::to_string(n) + " more)" : "";
      };
      std::string names;
      for (const json& op : h["removed"]) names += " -" + str(op, "op");
      names += more(h["a_range"], h["removed"].size());
      for (const json& op : h["inserted"]) names += " +" + str(op, "op");
      names += more(h["b_range"], h["inserted"].size());
      o << " " << names << "\n";
    }
    // The JSON holds up to --max-hunks; the growth line counts them all.
    if (changes.size() > 5)
      o << "  change:   (" << changes.size() - 5 << " more in --json; growth below counts them)\n";
    if (const json& mode = d.value("mode_change", json()); mode.is_object()) {
      const std::string run = str(mode, "run");
      o << "  mode:     " << run << "'s part runs " << op_and_source(mode["op"]) << " with "
        << str(mode["op"], "argument") << "=True, " << (run == "A" ? "B" : "A")
        << "'s none: a module is in training mode in " << run << " and in eval mode in the other "
           "(model.eval() or model.train() missing or moved)\n";
    }
    // Where the optimizer's ops change with the change (the updates are then not compared):
    // what differs in its settings from that step.
    if (const json& s = d.value("optimizer_settings", json()); s.is_object())
      o << "  optimizer: from step " << str(s, "step") << ", " << str(s, "text") << "\n";
    const json& after = d.value("value_after_structure", json());
    if (after.is_object()) {
      const std::string step_a = str(after["a"], "step"), step_b = str(after["b"], "step");
      o << "\n  first value difference after the change"
        << (after.value("moved", false) ? ", in an op that moved" : "") << ": " << str(after["a"], "op") << " (seq A "
        << str(after["a"], "seq") << ", B " << str(after["b"], "seq")
        << (step_a == step_b ? ", step " + step_a : ", step A " + step_a + ", B " + step_b) << ")\n";
      print_value(o, after);
    }
    // Every pair outside the changes the same: the change added or moved work (`values_same`),
    // unless it left other values that nothing compared reads (`values_left_differ`).
    const json& same = d.value("values_same", json());
    const json& left = d.value("values_left_differ", json());
    const json& paired = same.is_object() ? same : left;
    if (paired.is_object()) {
      const json& ended = d.value("run_ended", json());
      o << "  values:   every op paired outside the changes has the same values in both runs ("
        << str(paired, "pairs") << " pairs, "
        << (ended.is_object() ? up_to_where_ended(ended) : "to the end") << ")";
      if (same.is_object() && ended.is_object())
        o << ": the change added or moved work up to there; " << str(ended, "run")
          << (ended.value("recording_stopped", false) ? "'s recording holds nothing after it\n"
                                                      : " has no results after it\n");
      else if (same.is_object())
        o << ": the change added or moved work, not results\n";
      else
        o << ", but the changed ops leave other values, which no later op compared reads (state "
          << "kept to the end or saved, such as an EMA of the weights): A's " << str(left["a"], "op")
          << " (seq " << str(left["a"], "seq") << ") at " << source_text(left["a"]) << ", B's "
          << str(left["b"], "op") << " (seq " << str(left["b"], "seq") << ") at "
          << source_text(left["b"]) << "\n";
      // Same values because a changed in-place op wrote its tensor back as it was.
      if (const json& kept = same.is_object() ? same.value("unchanged_write", json()) : json();
          kept.is_object())
        o << "  unchanged: " << str(kept, "run") << "'s " << op_and_source(kept["op"])
          << " wrote its tensor's values back as they were (a gradient clip whose threshold no "
             "norm reached multiplies by 1): the same values in these runs, but with other data "
             "the change may alter results\n";
    }
    print_updates(o, d);
    print_not_updated(o, d);
  }
  if (const json& later = d.value("later_rounding_level", json()); later.is_number()) {
    char size[32];
    std::snprintf(size, sizeof(size), "%.1g", later.get<double>());
    if (d.value("later_rounding_level_infinities", false))
      o << "  values:   every output after this op differs only at rounding level in its finite "
        << "values (largest relative " << size << "); some hold infinities, whose signs the "
        << "summaries do not keep: compare them with tdbg show before taking the runs as the same\n";
    else
      o << "  values:   every output after this op differs only at rounding level (largest relative "
        << size << "): the runs compute the same values, in another order of float operations\n";
  }
  // The other processes that differ: later by the clock (a rank that got the first one's values
  // through a collective, a process stopped because of it).
  const json& others = d.value("other_processes", json::array());
  for (size_t k = 0; k < others.size() && k < 4; ++k) {
    const json& x = others[k];
    const std::string rank = str(x, "rank"), worker = str(x, "worker"), who = str(x, "who");
    // A fork child counts its steps from 0: the parent's step at the fork says which one it is
    // (a DataLoader's workers of an epoch), and its own step says nothing.
    const std::string forked = str(x, "forked_at_step");
    std::string label = who;
    if (!forked.empty())
      label += (label.empty() ? "" : ", ") + std::string("forked at step ") + forked;
    o << "  also:     process " << str(x, "process") << (label.empty() ? "" : " (" + label + ")")
      << " differs later, " << (str(x, "kind") == "structure" ? "structurally " : "") << "from "
      << str(x, "op") << " (seq " << str(x, "seq")
      << (forked.empty() && worker.empty() ? ", step " + str(x, "step") : "");
    const std::string own = str(x, "own_cause");
    if (own == "arguments")
      o << "): a cause of its own: an argument differs over the same inputs, which no other "
           "process's values bring\n";
    else if (own == "rng")
      o << "): a cause of its own: a random op's generator state differs (its own seed or "
           "generator), which no other process's values bring\n";
    else if (!worker.empty())
      o << "): most likely a consequence (a DataLoader worker loads the items its parent's "
           "sampler picks, with a seed from its parent's generator)\n";
    else if (const json& first = d.value("process_a", json());
             worker.empty() && !str(first, "worker").empty() &&
             (rank.empty() || rank == str(first, "rank") || rank == str(first, "parent_rank")))
      o << "): most likely a consequence (the DataLoader worker where the runs part sends this "
           "process its batches)\n";
    else if (!rank.empty() && worker.empty() &&
             !str(d.value("process_a", json()), "rank").empty() && str(x, "kind") == "structure")
      o << "): it runs other ops there too: the same change in this rank (code every rank "
           "runs, such as DDP's no_sync()), or a consequence of this difference\n";
    else if (!rank.empty() && worker.empty() && !str(d.value("process_a", json()), "rank").empty())
      o << "): most likely a consequence (the values of this rank reach it through a "
           "collective, or it was stopped because of it)\n";
    else
      o << "): it may follow from this difference or have a cause of its own\n";
  }
  if (others.size() > 4) o << "  also:     " << others.size() - 4 << " more process(es) differ later\n";
  print_context(o, d.value("context", json()));
  print_growth(o, d.value("growth", json()), d.contains("recording_stopped"));
  print_nonfinite_run(o, d.value("growth", json()));
  print_stack(o, a.is_object() ? "A" : "B", a.is_object() ? a : b);
  // B's too where it reached the op another way (AdamW's update against Adam's, below the
  // same user line): the frames that differ are the answer.
  if (a.is_object() && b.is_object() && a.value("stack", json::array()) != b.value("stack", json::array()))
    print_stack(o, "B", b);
  // After a structural change, the op whose values first differ is often the answer (a
  // dropout whose generator state was not restored): its stack too.
  const json& after = d.value("value_after_structure", json());
  if (after.is_object() && after.value("a", json()).is_object())
    print_stack(o, "A, first value difference after the change", after["a"]);
  if (!result.value("notes", json::array()).empty()) o << "\n";
  print_notes(o, result);
  return o.str();
}

std::string format_nonfinite(const json& result) {
  std::ostringstream o;
  // Where Inf came in from no recorded op: in a recording that selected ops (--ops, --steps),
  // most likely an op it left out.
  bool selected = false;
  for (const json& n : result.value("notes", json::array()))
    selected = selected || (n.is_string() && n.get<std::string>().rfind(
                                                 "only the ops the recording selected", 0) == 0);
  const std::string inf_source =
      selected ? "from an op the recording's selection left out, or data no recorded op made "
                 "(NumPy, a file, a checkpoint)"
               : "from data no recorded op made (NumPy, a file, a checkpoint)";
  const json& f = result.value("first_nonfinite", json());
  const json options = result.value("options", json::object());
  const bool nan_only = options.value("nan_only", false);
  const int64_t from_step = options.value("from_step", int64_t{0});
  const char* what = nan_only ? "NaN" : "NaN or Inf";
  if (str(result, "status") == "unchecked") {
    o << "unchecked: " << str(result, "run") << " " << str(result, "reason") << "\n";
    return o.str();
  }
  if (str(result, "status") == "carried") {
    o << "non-finite from before step " << from_step << ": " << str(result, "carried")
      << " op(s) from step " << from_step << " on hold " << what << " passed on from before "
      << "it, and none starts there; " << str(result, "skipped") << " start(s) before step "
      << from_step << " were skipped (each op that made NaN or Inf from finite values, or where "
      << "it entered, counts as one); run without --from-step for the first of them\n";
    print_notes(o, result);
    return o.str();
  }
  if (!f.is_object()) {
    const int64_t explained = result.value("explained", int64_t{0});
    const int64_t skipped = result.value("skipped", int64_t{0});
    const int64_t ignored = result.value("ignored", int64_t{0});
    const int64_t contained = result.value("contained", int64_t{0});
    const int64_t masked = result.value("masked", int64_t{0});
    if (nonfinite_passed_over(result) == 0) {
      o << "finite: no op output holds " << what << " in " << str(result, "run") << "\n";
    } else {
      o << "finite: no " << what << " starts in " << str(result, "run");
      if (from_step > 0) o << " from step " << from_step;
      o << passed_over(explained, skipped, ignored, from_step, contained, masked) << "\n";
      print_contained(o, result.value("contained_starts", json()), contained + masked);
      // Inf from outside counts as a mask's: said where it first came in, for the Inf that is
      // none (a checkpoint's optimizer state).
      const json& inf = result.value("inf_entered", json());
      if (inf.is_object())
        o << "  Inf came in: " << op_step_source(inf) << ", " << inf_source
          << ": not counted as a start, as a mask's -inf is not; if it is not a mask, this is "
             "where it started\n";
    }
    print_notes(o, result);  // ops a ring dropped: under the headline, they change how it reads
    return o.str();
  }
  const json& t = f.value("tensor", json());
  const json s = t.is_object() ? t.value("summary", json()) : json();
  // A DataLoader worker runs no optimizer: its ops' step (0) says nothing; name the worker.
  const json& process = f.value("process_info", json());
  const std::string worker = process.is_object() ? str(process, "worker") : str(f, "worker");
  // Held from the first op of a ring or a trimmed bundle: not where it started, said first.
  const bool held_already = f.value("entered", json()) == "dropped";
  o << (held_already ? "non-finite already where the recording begins (it started in ops it no "
                       "longer holds: a --ring's or a trimmed bundle's), first at "
                     : "non-finite at ")
    << str(f, "op")
    // (An op no user calls by its name: where torch.tensor or torch.from_numpy wraps data.)
    << (str(f, "op") == "aten::lift_fresh" ? " (torch.tensor or torch.from_numpy's tensor)" : "")
    << " (seq " << str(f, "seq") << ", "
    << (worker.empty() ? "step " + str(f, "step") : "in DataLoader worker " + worker);
  // The first thread of a process runs its main program; name any other one.
  if (f.value("thread", 0) != 0) {
    o << ", thread " << str(f, "thread");
    if (f.contains("os_tid")) o << ", tid " << str(f, "os_tid");
  }
  if (process.is_object() && worker.empty()) o << ", process " << str(process, "index");
  if (process.is_object() && process.contains("forked_at_step"))
    o << ", forked at step " << str(process, "forked_at_step");
  o << ")";
  if (t.is_object()) {
    o << ": output " << str(t, "index") << " " << str(t, "dtype") << "[" << str(t, "shape") << "]";
    // A complex tensor's counts are of its real and imaginary parts.
    const bool complex = str(t, "dtype").rfind("complex", 0) == 0;
    if (s.is_object())
      o << " has " << str(s, "nan") << " NaN, " << str(s, "inf") << " Inf"
        << (complex ? " (real and imaginary parts counted apart)" : "");
    else
      o << " (a view of its NaN input)";
  }
  o << "\n";
  print_notes(o, result);
  if (process.is_object()) o << "  process:  " << str(process, "text") << "\n";
  o << "  where:    " << where_text(f) << "\n";
  if (f.value("first_iteration", false)) o << kFirstIterationLine;
  const std::string entered = f.value("entered", json()).is_string() ? str(f, "entered") : "";
  if (entered == "input" && f.value("collective", json()).is_object()) {
    o << "  cause:    NaN came in through " << op_and_source(f["collective"])
      << ": a collective's result, which holds what the other ranks sent; run tdbg nan on the "
         "whole run to find the rank that made it\n";
  } else if (const json as = written_by(f, "written_as_by"); entered == "input" && as.is_object()) {
    o << "  cause:    NaN entered here: input " << str(as, "index") << " holds NaN that "
      << op_and_source(as["by"]) << " wrote into it through a view of another dtype ("
      << str(as["by"], "dtype") << "): the bits it wrote read as NaN (a bit reinterpretation, "
      << ".view(dtype)); no op made NaN from finite values\n";
  } else if (const json whole = written_by(f, "written_whole_by");
             entered == "input" && whole.is_object()) {
    o << "  cause:    NaN entered here: input " << str(whole, "index") << " holds NaN although "
      << op_and_source(whole["by"]) << ", which wrote all of it last, wrote none: it was changed "
      << "after, where the recording does not follow it (through .numpy() or a data pointer); "
         "no op made NaN from finite values\n";
  } else if (entered == "input") {
    o << "  cause:    NaN entered here: an input holds NaN that no recorded op produced (data"
      << " from outside torch ops: Python data, a file, NumPy, a DataLoader worker";
    if (f.value("recorded_only", json()).is_string())
      o << "; or an op the recording left out: it holds only " << str(f, "recorded_only");
    o << "); no op made NaN from finite values";
    if (const json& forks = f.value("forks_left_out", json()); forks.is_object())
      o << "; this process forked " << str(forks, "count") << " child process(es) (first in step "
        << str(forks, "first_step")
        << "), such as DataLoader workers, which the --steps window "
           "leaves out (a worker's ops are all of its own step 0): a batch a worker made comes "
           "in as such data; record without --steps to see the workers' ops";
    if (f.value("window_first_step", false))
      o << "; this is the --steps window's first step: most likely an op before the window made "
           "it (record again with a window that starts earlier)";
    o << "\n";
  } else if (entered == "uninitialized") {
    // The input that read it names the `empty` (below); the cause says what that means.
    std::string maker = "an op of the empty family", written = "no recorded op wrote since";
    for (const json& in : f.value("inputs", json::array())) {
      const json& from = in.value("uninitialized_from", json());
      if (!from.is_object()) continue;
      maker = op_and_source(from);
      if (const json& part = in.value("written_in_part_by", json()); part.is_object())
        written = op_and_source(part) + " wrote finite values into a part of it only";
      break;
    }
    o << "  cause:    NaN entered here from uninitialized memory: an input holds NaN read from "
         "memory that "
      << maker << " returned uninitialized and " << written
      << " (torch.empty where zeros or ones were meant), unless the program filled it outside "
         "torch's ops (.numpy(), data_ptr); no op made NaN from finite values\n";
  } else if (entered == "dropped") {
    o << "  cause:    NaN entered the recording here: an input holds NaN made by an op before the"
      << " first one this database holds (a --ring kept the last ops, or a bundle was trimmed);"
      << " it started earlier: ";
    const json& first = f.value("first_held_step", json());
    if (first.is_number_integer() && first.get<int64_t>() == 0) {
      o << "the database begins in step 0, so record again with a larger --ring (or none) to keep "
           "the ops before\n";
    } else if (first.is_number_integer()) {
      const int64_t step = first.get<int64_t>();
      o << "the database begins in step " << step << ", so record again with a --steps window "
        << "that starts before it (--steps K:" << step + 1 << " with K < " << step
        << ", or from 0 with --ops matching the ops that compute the loss, for a cheap pass "
           "that finds the step: --ops loss matches torch's loss functions (mse_loss, nll_loss, "
           "cross_entropy_loss), and a loss written by hand needs its own ops' names, such as "
           "--ops 'exp|mean'; tdbg show RUN lists the ops a step ran) to find where\n";
    } else {
      o << "record again with --steps around an earlier step to find where\n";
    }
  } else if (entered == "argument") {
    const json& arg = f.value("argument", json());
    o << "  cause:    NaN entered here: a NaN argument";
    if (arg.is_object()) o << ", " << str(arg, "name") << " = " << str(arg, "value");
    o << "; no op made NaN from finite values\n";
  } else if (s.is_object()) {
    // An input whose values were not recorded (a sparse tensor) may have brought it in.
    json unknown;
    std::string indices;
    int unknowns = 0;
    for (const json& in : f.value("inputs", json::array())) {
      // Known values, or none that could reach the output (None, an out= buffer).
      if (in.value("finite", json()).is_boolean() || in.contains("not_read")) continue;
      if (unknown.is_null()) unknown = in;
      indices += (indices.empty() ? "" : ", ") + str(in, "index");
      ++unknowns;
    }
    // A known input that holds Inf explains a NaN made here (0 * inf in a backward op) better
    // than an input whose values were not recorded.
    // So does an input not recorded that a backward op reads as saved by a forward op one of
    // whose tensors held Inf (the Inf of a data file, times 0 in the weight's gradient).
    bool inf_input = false;
    std::string saved_inf;
    for (const json& in : f.value("inputs", json::array())) {
      if (const json& v = in.value("values", json());
          v.is_object() && v.value("inf", int64_t{0}) > 0)
        inf_input = true;
      const json& saved = in.value("saved_from", json());
      if (!saved_inf.empty() || !saved.is_object() || in.value("finite", json()).is_boolean())
        continue;
      for (const json& t : saved.value("tensors", json::array()))
        if (const json& v = t.value("values", json());
            v.is_object() && v.value("inf", int64_t{0}) > 0) {
          const json& by = saved.value("op", json());
          saved_inf = "; input " + str(in, "index") + ", saved for backward by " + str(by, "op") +
                      (str(by, "source").empty() ? "" : " at " + str(by, "source")) +
                      ", most likely holds the Inf of that op's " + str(t, "role") + " " +
                      str(t, "index");
          break;
        }
    }
    const bool nan_from_inf = s.value("nan", int64_t{0}) > 0 && (inf_input || !saved_inf.empty());
    // NaN out, and one input whose values were not recorded: where it came from, when that
    // input says so.
    const bool nan_in_one_unknown =
        !unknown.is_null() && unknowns == 1 && s.value("nan", int64_t{0}) > 0;
    // Ops that only move values (a NumPy array made a tensor, a copy): NaN, which no copy
    // makes, came in with the input, from outside torch where no recorded op made it.
    static const std::set<std::string> kMoves = {
        "aten::lift_fresh", "aten::lift",         "aten::clone",    "aten::copy_",
        "aten::contiguous", "aten::detach",       "aten::alias",    "aten::cat",
        "aten::stack",      "aten::index_select", "aten::_to_copy", "aten::to"};
    // (Of the program's own call: nested in another op, the input may be that op's buffer,
    // such as DDP's all-reduced bucket, said below.)
    if (nan_in_one_unknown && !unknown.value("producer", json()).is_object() &&
        kMoves.count(str(f, "op")) && f.value("enclosing", json::array()).empty()) {
      o << "  cause:    NaN entered here: " << str(f, "op") << " only moves values, and input "
        << indices << ", which it moves, is data no recorded op made (Python data, NumPy, a "
        << "file, a DataLoader worker), whose values were not recorded\n";
    } else if (nan_in_one_unknown && !nan_from_inf && unknown.contains("reinterprets")) {
      o << "  cause:    NaN entered here, most likely with input " << indices << ": a view of "
        << str(unknown, "reinterprets") << " data as " << str(unknown, "dtype") << " ("
        << op_and_source(unknown["producer"]) << ", .view(dtype)), whose bits, written as "
        << str(unknown, "reinterprets") << ", read as NaN; its values were not recorded\n";
    } else if (const json& from = unknown.is_null() ? json() : unknown.value("producer", json());
               nan_in_one_unknown && !nan_from_inf && from.is_object() &&
               (str(from, "op") == "aten::lift_fresh" || str(from, "op") == "aten::detach_")) {
      // torch.tensor's data: Python filled the buffer, lift_fresh and detach_ made it a leaf.
      o << "  cause:    NaN entered here, most likely with input " << indices << ": data "
        << "torch.tensor took from Python at " << str(from, "source") << " (" << str(from, "op")
        << ", seq " << str(from, "seq")
        << "), whose values were not recorded; the other inputs "
           "and the arguments hold no NaN\n";
    } else if (!unknown.is_null() && !nan_from_inf) {
      o << "  cause:    made here, or brought in by input" << (unknowns > 1 ? "s " : " ") << indices
        << ", whose values were not recorded";
      const json prod = unknown.value("producer", json());
      if (prod.is_object()) {
        o << " (made by " << str(prod, "op") << ", seq " << str(prod, "seq");
        std::string src = str(prod, "source");
        if (!src.empty()) o << ", at " << src;
        o << ")";
      }
      o << "; the other inputs and the arguments hold no " << (s.value("nan", int64_t{0}) > 0 ? "NaN" : "NaN or Inf");
      // DDP copies each gradient bucket's all-reduce result into the gradients here: the
      // values came from every rank.
      for (const json& e : f.value("enclosing", json::array()))
        if (str(e, "op").find("ddp.reducer::copy_bucket_to_grad") != std::string::npos) {
          o << "; this is DDP copying the gradients' all-reduce result, which every rank adds "
               "to: the NaN may come from another rank (run tdbg nan on the whole run)";
          break;
        }
      o << "\n";
    } else if (const json& stale = f.value("stale_inputs", json());
               stale.is_array() && !stale.empty()) {
      o << "  cause:    " << str(f, "op") << " makes no NaN from finite inputs this small: an "
        << "input most likely changed outside torch's ops after it was made (a write through "
           ".numpy() or a data pointer), and the values shown for it are from then, not read "
           "again: ";
      for (size_t k = 0; k < stale.size(); ++k) {
        const json& prod = stale[k].value("producer", json());
        o << (k == 0 ? "" : k + 1 == stale.size() ? " or " : ", ") << "input "
          << str(stale[k], "index") << " (from " << str(prod, "op");
        if (!str(prod, "source").empty()) o << " at " << str(prod, "source");
        o << ")";
      }
      o << "\n";
    } else {
      // NaN made from inputs that hold Inf: only the operations on infinities make it.
      if (nan_from_inf) {
        o << "  cause:    made here: NaN from inputs that hold Inf (inf - inf, inf / inf, 0 * inf";
        if (str(f, "op").find("softmax") != std::string::npos &&
            str(f, "op").find("backward") == std::string::npos)
          o << "; in a softmax, a row that is -inf throughout, such as a fully masked attention row, "
               "is 0/0";
        o << ")" << (inf_input ? "" : saved_inf) << "\n";
      } else {
        const std::string reason = nonfinite_reason(f);
        o << "  cause:    made here from " << (s.value("nan", int64_t{0}) > 0 ? "inputs without NaN" : "finite inputs")
          << " and arguments ("
          << (reason.empty() ? "an overflow, log or sqrt of a value out of range, 0/0, inf - inf, 0 * inf"
                             : reason)
          << ")\n";
      }
    }
  }
  // Its inputs grew over the steps before it (weights that blow up), or jumped after one.
  if (const json& grew = f.value("input_growth", json()); grew.is_object()) {
    o << "  grew:     the largest input magnitude of " << str(f, "op") << " here, by step:";
    int64_t last = -1;
    for (const json& s2 : grew.value("steps", json::array())) {
      char magnitude[32];
      std::snprintf(magnitude, sizeof(magnitude), "%.3g", s2.value("magnitude", 0.0));
      const int64_t step = s2.value("step", int64_t{0});
      o << (last < 0 ? " " : step > last + 1 ? ", ..., " : ", ") << step << ": " << magnitude;
      last = step;
    }
    if (grew.value("jumped", false))
      o << ". The values jumped after one optimizer step: a learning rate far too large (a "
           "warmup skipped?), or this step's data\n";
    else
      o << ". The values grew over the steps before it, as when weights blow up: a learning rate "
           "too large, or gradients not clipped (torch.nn.utils.clip_grad_norm_); the first step "
           "it grew in is where to look"
        << (grew.contains("grew_from") ? ": step " + str(grew, "grew_from") +
                                             ", from which it stays above 10x its first "
                                             "step's size (record --steps around it)"
                                       : std::string())
        << "\n";
  }
  // Masked in the forward, yet a start: backward made NaN from the values saved for it.
  if (const std::string by = str(f, "masked_then_backward"); !by.empty())
    o << "  masked:   by " << by << " in the forward, but backward then made NaN or Inf from "
      << "the values saved for it: a masked element's gradient is 0, and 0 times the op's NaN "
      << "or Inf derivative is NaN. Keep the op's input in its domain inside the mask, as "
      << "torch.sqrt(torch.where(x > 0, x, 1)) does, rather than masking its output\n";
  // Masked, yet a start for another reason: which, so that the user sees the mask was seen.
  if (const json& no = f.value("mask_rejected", json()); no.is_object())
    o << "  masked:   by " << str(no, "by") << ", yet a start: " << str(no, "why") << ": "
      << str(no["op"], "op") << " (seq " << str(no["op"], "seq") << ") at " << source_text(no["op"])
      << "\n";
  // The other processes' starts: the run has several, and the user may look at either.
  const std::string because = str(f, "chosen_because");
  if (!because.empty() && because != "earliest") o << "  chosen:   " << because << "\n";
  const json& others = f.value("other_starts", json::array());
  for (size_t k = 0; k < others.size() && k < 5; ++k) {
    const json& s2 = others[k];
    const json& p2 = s2.value("process", json());
    const std::string w2 = p2.is_object() ? str(p2, "worker") : "";
    const std::string who = p2.is_object() ? str(p2, "who") : "";
    o << "  also:     process " << str(p2, "index") << (who.empty() ? "" : " (" + who + ")") << ": "
      << str(s2, "op") << " (seq " << str(s2, "seq")
      << (w2.empty() ? ", step " + str(s2, "step") : "") << ")";
    const std::string src = str(s2, "source");
    if (!src.empty()) o << " at " << src;
    const std::string e2 = str(s2, "entered");
    if (e2 == "input" && s2.value("collective", json()).is_object())
      o << ", NaN came in through " << op_and_source(s2["collective"]) << " from another rank";
    else
      o << (e2 == "input"      ? ", NaN entered from an input"
            : e2 == "dropped"  ? ", NaN entered from before the ops held"
            : e2 == "argument" ? ", NaN entered from an argument"
            : s2.value("inputs_unknown", int64_t{0}) > 0
                ? ", made there, or brought in by an input whose values were not recorded"
                : ", made there");
    if (const json& from = s2.value("batches_from", json()); from.is_object())
      o << ": a batch from its " << str(from, "who") << " (process " << str(from, "index")
        << "), where NaN starts, most likely";
    o << "\n";
  }
  if (others.size() > 5) o << "  also:     " << others.size() - 5 << " more process(es) with a start\n";
  const std::string before =
      passed_over(f.value("explained_before", int64_t{0}), f.value("skipped_before", int64_t{0}),
                  f.value("ignored_before", int64_t{0}), from_step,
                  f.value("contained_before", int64_t{0}), f.value("masked_before", int64_t{0}));
  if (!before.empty()) o << "  (after: " << before.substr(2) << ")\n";
  print_contained(o, f.value("contained_starts_before", json()),
                  f.value("contained_before", int64_t{0}) + f.value("masked_before", int64_t{0}));
  if (const json& inf = f.value("inf_entered", json()); inf.is_object())
    o << "  Inf came in earlier: " << op_step_source(inf) << ", " << inf_source << "\n";
  // An Inf made from finite values is often meant: `deg.pow(-0.5)` over zero degrees, then
  // `masked_fill(isinf, 0)`. Say how to look past it.
  if (!nan_only && s.is_object() && s.value("nan", int64_t{0}) == 0 && entered.empty()) {
    o << "  hint:     if the program masks this Inf on purpose, `tdbg nan --nan-only` looks for NaN"
      << " only; `--from-step N` starts at step N (no help where this op makes Inf at every "
         "step)\n";
  }
  for (const json& in : f.value("inputs", json::array())) {
    const std::string not_read = str(in, "not_read");
    if (not_read == "undefined") {
      o << "  input " << str(in, "index") << ":  None (an optional tensor not given)\n";
      continue;
    }
    o << "  input " << str(in, "index") << ":  " << str(in, "dtype") << "[" << str(in, "shape") << "] ";
    if (!not_read.empty()) {
      o << "overwritten without being read (an out= buffer): its old values never reach the output\n";
      continue;
    }
    const json& fin = in.value("finite", json());
    o << (fin.is_boolean() ? (fin.get<bool>() ? "finite" : "NON-FINITE") : "finiteness unknown");
    print_values(o, in);
    const json& prod = in.value("producer", json());
    if (const json& by = in.value("written_whole_by", json()); by.is_object()) {
      o << ", written whole by " << op_and_source(by) << " without NaN, changed since";
    } else if (const json& as = in.value("written_as_by", json()); as.is_object()) {
      o << ", written by " << op_and_source(as) << " through a view of dtype " << str(as, "dtype");
    } else if (const json& part = in.value("written_in_part_by", json()); part.is_object()) {
      o << ", written in part by " << op_and_source(part) << ", finite; the NaN is in the rest, ";
      const json& from = in.value("uninitialized_from", json());
      o << (from.is_object() ? "memory returned uninitialized by " + op_and_source(from)
                             : std::string("which no recorded op wrote"));
    } else if (prod.is_object()) {
      o << ", from " << op_and_source(prod);
    } else if (prod.is_number() && !in.value("uninitialized_from", json()).is_object()) {
      o << ", from op seq " << json_text(prod);
    } else if (const json& from = in.value("uninitialized_from", json()); from.is_object()) {
      o << ", memory returned uninitialized by " << op_and_source(from) << ", written by no recorded op";
    } else if (from.is_boolean()) {
      o << ", memory returned uninitialized by an empty-family op, written by no recorded op";
    } else if (const json& saved = in.value("saved_from", json()); saved.is_object()) {
      // A backward op's input that autograd saved from the forward op: which of that op's
      // tensors it may be, and what they held.
      o << ", most likely saved for backward by " << op_and_source(saved["op"]) << ", whose ";
      const json& cands = saved.value("tensors", json::array());
      for (size_t k = 0; k < cands.size(); ++k) {
        const json& c = cands[k];
        o << (k == 0                  ? ""
              : k + 1 == cands.size() ? " or "
                                      : ", ")
          << str(c, "role") << " " << str(c, "index");
        const json& v = c.value("values", json());
        const int64_t nan = v.is_object() ? v.value("nan", int64_t{0}) : 0;
        const int64_t inf = v.is_object() ? v.value("inf", int64_t{0}) : 0;
        if (nan > 0 || inf > 0)
          o << " holds " << (nan > 0 ? std::to_string(nan) + " NaN" : "")
            << (nan > 0 && inf > 0 ? ", " : "") << (inf > 0 ? std::to_string(inf) + " Inf" : "");
        else
          o << (c.value("finite", json()).is_boolean() ? " is finite"
                                                       : " is of unknown finiteness");
      }
    } else {
      o << ", not produced by a recorded op";
    }
    o << "\n";
  }
  // The op's other outputs: a loss's total weight of 0 says why the loss is 0/0.
  for (const json& out : f.value("outputs", json::array())) {
    const json& sum = out.value("summary", json());
    if (!sum.is_object() || (t.is_object() && str(out, "index") == str(t, "index"))) continue;
    const bool finite = sum.value("nan", int64_t{0}) == 0 && sum.value("inf", int64_t{0}) == 0;
    o << "  output " << str(out, "index") << ": " << str(out, "dtype") << "[" << str(out, "shape")
      << "] " << (finite ? "finite" : "NON-FINITE");
    print_values(o, json{{"values", sum}});
    o << "\n";
  }
  // The other arguments: an exponent, a learning rate or a fill value is often the why.
  std::string args;
  for (const json& a : f.value("args", json::array())) {
    std::string value = argument_text(str(a, "name"), str(a, "value"));
    if (value.size() > 60) value = value.substr(0, 57) + "...";  // a long list of sizes
    args += (args.empty() ? "" : ", ") + str(a, "name") + " = " + value;
  }
  if (!args.empty()) o << "  args:     " << args << "\n";
  print_stack(o, "op", f);
  return o.str();
}

void add_nonfinite_cause(json& result) {
  if (!result.value("first_nonfinite", json()).is_object()) return;
  std::istringstream text(format_nonfinite(result));
  std::string line, cause;
  constexpr std::string_view kCause = "  cause:    ", kGoesOn = "            ";
  while (std::getline(text, line)) {
    if (cause.empty() && line.rfind(kCause, 0) == 0) {
      cause = line.substr(kCause.size());
    } else if (!cause.empty()) {
      if (line.rfind(kGoesOn, 0) != 0 || line.size() == kGoesOn.size()) break;
      cause += " " + line.substr(kGoesOn.size());
    }
  }
  if (!cause.empty()) result["first_nonfinite"]["cause"] = cause;
}

}  // namespace tdbg::diff
