// `tdbg diff RUN_A RUN_B`: where two runs first differ, and why (tlparse/diff/diff.h).
// Exit status like cmp: 0 identical, 1 diverged, 2 error.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "base/json_text.h"
#include "tlparse/commands.h"
#include "tlparse/diff/diff.h"
#include "tlparse/report/redact.h"

namespace tdbg::cli {

namespace {

// Rejects a negative `--scan-limit` (a typo, not "no limit": that is `--full`). Anything else
// is left to the conversion, which reports what is not a number.
CLI::Validator non_negative_scan_limit() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        long long n = 0;
        if (!whole_number_error(value, &n).empty())
          return "want a whole number of ops (0 or more), or --full to compare to the end";
        if (n >= 0) return "";
        return "Value " + value + " is negative; give 0 or more ops, or --full to compare to the end";
      },
      "NON-NEGATIVE");
}

// Whether a divergence changes no result (for --results): every op paired outside a
// structural change has the same values, a value difference reaches no other op's output,
// every tensor that differed was overwritten with the same values and all after is the same,
// or every optimizer step's outputs are the same in both runs and the program reads no value
// that differs (an EMA of the weights, updated outside the optimizer, whose evaluation loss
// it prints). Never where one run ended early and the other did not: it has no results past
// its end.
bool same_results(const nlohmann::json& result) {
  const nlohmann::json& d = result.value("first_divergence", nlohmann::json());
  if (!d.is_object() || result.value("ended_differently", false)) return false;
  const nlohmann::json& healed = d.value("healed", nlohmann::json());
  const nlohmann::json& updates = d.value("updates", nlohmann::json());
  const bool read_out = !diff::first_read_out_step(d).empty();
  return d.value("values_same", nlohmann::json()).is_object() ||
         d.value("contained", nlohmann::json()).is_object() ||
         (healed.is_object() && healed.value("to_end", false)) ||
         // Every optimizer step's outputs the same, bit for bit: the training's results.
         (updates.is_object() && updates.value("rounding", false) &&
          updates.value("largest", 1.0) == 0 &&
          updates.value("unpaired_step", nlohmann::json()).is_null() && !read_out);
}

}  // namespace

void add_diff_command(CLI::App& app) {
  struct Args {
    std::string run_a, run_b;
    bool json = false;
    int context = 3;
    int64_t scan_limit = 200000;
    bool full = false;
    bool linear = false;
    std::string align_steps;
    bool results = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "diff", "Where two runs first differ, and why (exit 0 identical, 1 diverged, 2 error)");
  cmd->add_option("RUN_A", args->run_a, "First run: a run directory or one .sqlite database")->required();
  cmd->add_option("RUN_B", args->run_b, "Second run")->required();
  cmd->add_flag("--json", args->json, "Print one JSON object (docs/cli.md) instead of text");
  cmd->add_option("--context", args->context,
                  "Ops shown before and after the divergence (0 to 1000)")
      ->check(whole_number_in(0, 1000))
      ->capture_default_str();
  CLI::Option* scan_limit =
      cmd->add_option("--scan-limit", args->scan_limit,
                      "Ops compared after the divergence, for growth and the first value "
                      "difference after a structural change")
          ->check(non_negative_scan_limit())
          ->capture_default_str();
  cmd->add_flag("--full", args->full, "Compare every op after the divergence (no scan limit)")
      ->excludes(scan_limit);
  cmd->add_flag("--linear", args->linear,
                "Compare op by op from the start instead of bisecting the chain hash");
  add_align_steps_option(cmd, &args->align_steps);
  cmd->add_flag("--results", args->results,
                "Exit 0 also when the runs differ in work but not in results: the values stay "
                "the same, the difference reaches no other op, it healed to the end, or every "
                "optimizer step's outputs are the same (not: the same up to rounding)");
  cmd->callback([args] {
    diff::DiffOptions options;
    if (std::string why = align_steps_error(args->align_steps, true, &options.align_steps);
        !why.empty())
      return fail("diff", why);
    auto a = tracer::Run::Open(args->run_a);
    if (!a.ok()) return fail("diff", a.status().message());
    auto b = tracer::Run::Open(args->run_b);
    if (!b.ok()) return fail("diff", b.status().message());
    // A run still recording is read as it is now, once: the headline, the ending it names
    // and the ops around it tell of the same moment.
    for (tracer::Run* run : {&a.value(), &b.value()})
      if (Status pinned = run->pin_snapshot(); !pinned.ok()) return fail("diff", pinned.message());
    const std::vector<std::string> phases = diff::keep_aligned_phases(*a, *b, &options.align_steps);
    tracer::PairProcesses(*a, *b);  // the same process of the program at each index
    options.context_ops = args->context;
    options.progress = isatty(STDERR_FILENO) != 0;
    options.scan_limit = args->full ? -1 : args->scan_limit;
    options.bisect = !args->linear;
    auto result = diff::compare_runs(*a, *b, options);
    if (!result.ok()) return fail("diff", result.status().message());
    for (const std::string& note : phases) (*result)["notes"].push_back(note);
    // Diff output is pasted into issues: credentials in a command line or the environment
    // (`--token=...`, $HF_TOKEN, as settings that differ) are left out, as a report leaves
    // them out.
    report::Redactor redactor(/*redact_paths=*/false, "", "");
    redactor.remember_environment(environ);
    for (tracer::Run* run : {&a.value(), &b.value()})
      for (const auto& process : run->processes)
        for (const char* key : {"cmdline", "env"}) (void)redactor.meta(key, process->meta(key));
    *result = redactor.apply_json(*result);
    // What --results exits on, for a script that reads the JSON: "same" where the training's
    // results are the same (identical runs, or work but not results differs), else "differ".
    (*result)["results"] =
        (*result)["status"] == "identical" || same_results(*result) ? "same" : "differ";
    if (args->json) {
      std::printf("%s\n", json_text(*result, 2).c_str());
    } else {
      std::fputs(diff::format_divergence(*result).c_str(), stdout);
    }
    exit_code =
        (*result)["status"] == "identical" || (args->results && same_results(*result)) ? 0 : 1;
  });
}

}  // namespace tdbg::cli
