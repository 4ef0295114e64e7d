// `tdbg show RUN`: lists a run's ops (seq, step, nesting, module, source) with their tensors
// and arguments, for looking around by hand; `--plain` prints one line per op without seq
// numbers or times, for text tools such as `diff`.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>

#include "tlparse/commands.h"
#include "tlparse/diff/diff.h"
#include "tlparse/diff/native_lines.h"
#include "tlparse/diff/ops.h"

namespace tdbg::cli {
namespace {

struct ShowArgs {
  std::string run;
  std::optional<int64_t> op;
  std::optional<int64_t> step;
  std::optional<uint32_t> thread;
  int64_t limit = 100;
  std::optional<size_t> process;  // unset: the first process that holds ops
  bool plain = false;
};

std::string short_summary(const hashing::Summary& s) {
  if (!s.valid) return "";
  char buf[160];
  if (std::isnan(s.min) || std::isnan(s.max)) {
    // No finite value to take a min and max of (all NaN or infinite): not a NaN min.
    std::snprintf(buf, sizeof(buf), " min/max (no finite value) sum %.6g abs %.6g", s.sum, s.abs_sum);
  } else {
    std::snprintf(buf, sizeof(buf), " min %.6g max %.6g sum %.6g abs %.6g", s.min, s.max, s.sum,
                  s.abs_sum);
  }
  std::string out = buf;
  if (s.nan_count || s.inf_count) {
    out += " nan " + std::to_string(s.nan_count) + " inf " + std::to_string(s.inf_count);
  }
  return out;
}

void print_op(const tracer::Reader& r, diff::Strings& strings, const tracer::OpRecord& op, bool plain) {
  std::string name = strings.text(op.name);
  if (plain) {
    std::string line = std::string(op.depth * 2, ' ') + name + " step=" + std::to_string(op.step);
    for (const auto& t : op.tensors) {
      line += t.role == tracer::TensorRole::kInput ? " in:" : " out:";
      line += std::string(hashing::dtype_name(t.dtype)) + "[" + strings.text(t.shape) + "]";
      if (diff::tensor_comparable(t)) line += "=" + diff::hex64(t.hash);
    }
    for (const auto& a : op.args)
      line += " " + strings.text(a.name) + "=" + diff::argument_text(strings.text(a.name), strings.text(a.value));
    if (op.flags & tracer::kOpRandom) line += " rng=" + diff::hex64(op.rng);
    if (op.flags & tracer::kOpUnfinished) line += " unfinished";
    if (op.flags & tracer::kOpRaised) line += " raised";
    std::printf("%s\n", line.c_str());
    return;
  }
  // A C++ frame with its source line where the binary's debug info gives it.
  std::string source = diff::frame_source_text(r, strings, op.user_frame ? op.user_frame : op.stack, false);
  // A backward op has no stack of its own: the line of the forward op it (or the autograd
  // node it runs in) differentiates, as `tdbg diff` and `tdbg nan` give it.
  const int64_t fwd_seq =
      source.empty() && op.user_frame == 0 && op.stack == 0 ? diff::forward_seq_of(r, op) : tracer::kNoSeq;
  if (fwd_seq != tracer::kNoSeq) {
    if (auto fwd = r.op(fwd_seq)) {
      const std::string line =
          diff::frame_source_text(r, strings, fwd->user_frame ? fwd->user_frame : fwd->stack, false);
      if (!line.empty()) source = line + " (forward op's line)";
    } else {
      source = "(its forward op, seq " + std::to_string(fwd_seq) + ", is not in the recording)";
    }
  } else if (source.empty() && op.user_frame == 0 && op.stack == 0 && op.parent != tracer::kNoSeq &&
             !r.op(op.parent)) {
    // The first ops a ring (or a trimmed bundle) holds may be nested in one it dropped, which
    // held the line they ran for.
    source = "(its enclosing op, seq " + std::to_string(op.parent) + ", is not in the recording)";
  }
  std::string label = std::string(std::min<int>(op.depth, 16) * 2, ' ') + name;
  std::printf("%8" PRId64 " t%-2u step %-5" PRId64 " %-40s %-24s %s\n", op.seq, op.thread, op.step,
              label.c_str(), strings.text(op.module).c_str(), source.c_str());
  for (const auto& t : op.tensors) {
    std::string status = tracer::tensor_status_name(t.status);
    // Why it was not hashed ("sparse layout", "overwritten by the op without being read"), and
    // where a tensor lives other than the CPU.
    const std::string reason = diff::reason_text(strings.text(t.reason), op.seq);
    const std::string& device = strings.text(t.device);
    std::string extra = reason.empty() ? "" : "(" + reason + ")";
    if (!device.empty() && device != "cpu") extra += (extra.empty() ? "" : " ") + std::string("on ") + device;
    std::printf("%22s %s%u %s[%s] %s %s%s%s\n", "", t.role == tracer::TensorRole::kInput ? "in " : "out",
                t.index, hashing::dtype_name(t.dtype), strings.text(t.shape).c_str(),
                status.c_str(), diff::tensor_comparable(t) ? diff::hex64(t.hash).c_str() : "",
                short_summary(t.summary).c_str(), extra.empty() ? "" : (" " + extra).c_str());
  }
  for (const auto& a : op.args) {
    std::printf("%22s arg %s = %s\n", "", strings.text(a.name).c_str(),
                diff::argument_text(strings.text(a.name), strings.text(a.value)).c_str());
  }
  if (op.flags & tracer::kOpUnfinished)
    std::printf("%22s unfinished: the process ended (a crash or an abort) while inside this op%s\n", "",
                (op.flags & tracer::kOpInputsIncomplete)
                    ? ", as tdbg read its inputs (a fault in tdbg's own reading: where the "
                      "program installed its own SIGSEGV/SIGBUS handler, tdbg cannot step over "
                      "memory that cannot be read, such as a truncated mmap): later inputs missing"
                    : "");
  if (op.flags & tracer::kOpRaised)
    std::printf("%22s raised: an error (an exception) ended this op; it has no outputs\n", "");
}

// What the database holds when that is not the whole run (a ring's last ops, a bundle's window),
// and, for a process that ended abnormally, its last op: where it was when it ended. A line,
// or "".
std::string held_line(const tracer::Reader& r, diff::Strings& strings, bool ended_abnormally) {
  auto held = r.held();
  if (!held.ok() || !held->any || (!held->dropped_start && !ended_abnormally)) return "";
  const auto first = r.op(held->first_seq);
  const auto last = r.op(held->last_seq);
  if (!first || !last) return "";
  std::string line;
  if (held->dropped_start) {
    const std::string ring = r.meta("ring");
    line = "holds ops " + std::to_string(first->seq) + " to " + std::to_string(last->seq) +
           " (steps " + std::to_string(first->step) + " to " + std::to_string(last->step) + "): " +
           (ring.empty() || ring == "0"
                ? "the earlier ones were trimmed (a bundle's window)"
                : "--ring " + ring + " kept the last ops, the earlier ones were dropped");
  }
  if (ended_abnormally) {
    // Named by its top-level op: the line the program was at.
    tracer::OpRecord top = *last;
    for (int up = 0; up < 64 && top.parent != tracer::kNoSeq; ++up) {
      const auto parent = r.op(top.parent);
      if (!parent) break;
      top = *parent;
    }
    const nlohmann::json brief = diff::op_brief_json(r, strings, top);
    const std::string source = brief.value("source", std::string());
    line += std::string(line.empty() ? "" : "; ") + "the last op recorded: seq " +
            std::to_string(top.seq) + " " + brief.value("op", std::string()) + " in step " +
            std::to_string(top.step) + (source.empty() ? "" : " at " + source);
  }
  return line + "\n";
}

}  // namespace

void add_show_command(CLI::App& app) {
  auto args = std::make_shared<ShowArgs>();
  auto* cmd = app.add_subcommand("show", "List a run's ops with their tensors, for looking around by hand");
  cmd->add_option("RUN", args->run, "A run directory or one .sqlite database")->required();
  cmd->add_option("--op", args->op, "Start at the op with this seq number")
      ->check(at_least(0));
  cmd->add_option("--step", args->step, "Only ops of this optimizer step")->check(at_least(0));
  cmd->add_option("--thread", args->thread, "Only ops of this thread (tdbg thread id)")
      ->check(at_least(0));
  cmd->add_option("--limit", args->limit, "Ops listed at most (0: all)")->check(at_least(0));
  cmd->add_option("--process", args->process,
                  "Which recorded process of a run directory (default: the first that holds ops)")
      ->check(at_least(0));
  cmd->add_flag("--plain", args->plain, "One line per op without seq numbers, for text diff tools");
  cmd->callback([args] {
    auto run = tracer::Run::Open(args->run);
    if (!run.ok()) return fail("show", run.status().message());
    note_skipped("show", run->skipped);
    // A launcher (torchrun, mp.spawn's parent) records no op: by default the first process
    // that holds ops is shown, its ranks' or workers', and the header says which.
    std::string picked;
    if (!args->process) {
      args->process = 0;
      for (size_t k = 0; k < run->processes.size(); ++k)
        if (run->processes[k]->op_count() > 0) {
          args->process = k;
          if (k > 0)
            picked = "(process 0 holds no op, as a launcher's: process " + std::to_string(k) +
                     " shown; --process N shows another)\n";
          break;
        }
    }
    if (*args->process >= run->processes.size()) {
      return fail("show", args->run + ": no process " + std::to_string(*args->process) +
                              " (the run has " + std::to_string(run->processes.size()) + ")");
    }
    const tracer::Reader& r = *run->processes[*args->process];
    diff::Strings strings(r);
    // The header, printed with the first op shown or once the selection is known to be valid:
    // an error (no such step) goes to stderr alone, with nothing on stdout.
    std::string head;
    auto print_head = [&head] {
      std::fputs(head.c_str(), stdout);
      head.clear();
    };
    if (!args->plain) {
      // Numbered from 0, as --process and `tdbg diff` number them.
      // As `tdbg diff` names it: a worker with the rank that started it.
      const nlohmann::json named = diff::process_json(*run, *args->process);
      const std::string label = named.value("who", std::string());
      const std::string who = label.empty() ? "" : " (" + label + ")";
      const std::string process = run->processes.size() == 1
                                      ? "one process" + who
                                      : "process " + std::to_string(*args->process) + " of 0-" +
                                            std::to_string(run->processes.size() - 1) + who;
      head = r.path() + ": " + std::to_string(r.op_count()) + " ops, " +
             std::to_string(r.threads().size()) + " thread(s), " + process + "\n" + picked;
      const std::string ending = diff::process_ending(r);
      if (!ending.empty()) head += "the process " + ending + "\n";
      // No op, by a --steps window or --ops pattern that selected none: why.
      if (r.op_count() == 0)
        if (const std::string why = diff::selected_none(*run); !why.empty())
          head += "no op: " + why + "\n";
      head += held_line(r, strings, !ending.empty());
    }
    int64_t shown = 0;
    const int64_t limit = args->limit == 0 ? std::numeric_limits<int64_t>::max() : args->limit;
    std::optional<uint32_t> thread = args->thread;
    int64_t from = 0, to = std::numeric_limits<int64_t>::max();
    if (thread) {
      // A thread's scan is by tidx (to its end: a --ring's tidx start after its first ops):
      // start at the tidx of the requested op.
      if (args->op) {
        auto op = r.op(*args->op);
        if (!op) return fail("show", args->run + ": no op " + std::to_string(*args->op));
        from = op->thread == *thread ? op->tidx : 0;
      }
    } else if (args->op) {
      from = *args->op;
    }
    bool first = true;
    // For --step: the last step held before it, and the first after it (the scan stops there).
    int64_t step_before = -1, step_after = -1;
    Status st = r.scan_ops(thread, from, to, true, [&](const tracer::OpRecord& op) {
      if (args->step && op.step < *args->step) step_before = std::max(step_before, op.step);
      if (args->step && op.step > *args->step && step_after < 0) step_after = op.step;
      if (args->op && op.seq < *args->op) return true;
      if (args->step && op.step != *args->step) return op.step < *args->step;  // steps only grow
      print_head();
      // The op asked for is not in the database (a ring dropped it, or --ops skipped it).
      if (first && args->op && op.seq != *args->op && !args->plain)
        std::printf("(op %" PRId64 " is not in this database; the next one held is %" PRId64 ")\n",
                    *args->op, op.seq);
      first = false;
      print_op(r, strings, op, args->plain);
      return ++shown < limit;
    });
    if (!st.ok()) return fail("show", st.message());
    // A string or frame that could not be read was printed as empty: say so, as diff does.
    if (Status lookups = r.lookup_status(); !lookups.ok()) return fail("show", lookups.message());
    // Nothing at or after the op asked for: say so, not a bare header.
    if (shown == 0 && args->op && !args->step)
      return fail("show", args->run + ": no op " + std::to_string(*args->op) +
                              " or later in this process");
    if (shown == 0 && thread && r.op_count(*thread) == 0) {
      std::string ids;
      for (const tracer::ThreadRecord& t : r.threads())
        ids += (ids.empty() ? "" : ", ") + std::to_string(t.id);
      return fail("show", args->run + ": no op of thread " + std::to_string(*thread) +
                              " in this process (its threads: " + (ids.empty() ? "none" : ids) + ")");
    }
    if (shown == 0 && args->step && !args->op) {
      return fail("show", args->run + ": no op of step " + std::to_string(*args->step) +
                              (thread ? " on thread " + std::to_string(*thread) : std::string()) +
                              (step_after >= 0
                                   ? (step_before >= 0
                                          ? " (the steps held around it are " +
                                                std::to_string(step_before) + " and " +
                                                std::to_string(step_after) + ")"
                                          : " (the first step held is " +
                                                std::to_string(step_after) + ")")
                               : step_before >= 0
                                   ? " (the last step held is " + std::to_string(step_before) + ")"
                                   : std::string(" (no op held)")));
    }
    print_head();
    if (!args->plain && shown == limit) std::printf("... (--limit %" PRId64 "; --limit 0 lists all)\n", limit);
    // The source lines listed: C++ frames without the lines their binary could have given,
    // Python files edited since the recording.
    std::fflush(stdout);
    note_skipped("show", diff::source_line_notes(r));
  });
}

}  // namespace tdbg::cli
