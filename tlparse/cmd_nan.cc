// `tdbg nan RUN`: the first op whose output holds NaN or ±Inf, with its line and inputs.
// Exit status: 0 all finite, 1 non-finite found (a start, or with --from-step values carried
// from a start before it), 2 error or unchecked.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "base/json_text.h"
#include "tlparse/commands.h"
#include "tlparse/diff/diff.h"

namespace tdbg::cli {

void add_nan_command(CLI::App& app) {
  struct Args {
    std::string run;
    bool json = false;
    diff::NonfiniteOptions options;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "nan", "First op whose output holds NaN or Inf (exit 0 finite, 1 non-finite, 2 error or unchecked)");
  cmd->add_option("RUN", args->run, "A run directory or one .sqlite database")->required();
  cmd->add_flag("--json", args->json, "Print one JSON object (docs/cli.md) instead of text");
  cmd->add_flag("--nan-only", args->options.nan_only,
                "Look for NaN only: an Inf the program makes and masks on purpose is passed over");
  cmd->add_option("--from-step", args->options.from_step,
                  "Start at this optimizer step (earlier non-finite values are still followed)")
      ->check(at_least(0));
  cmd->callback([args] {
    auto run = tracer::Run::Open(args->run);
    if (!run.ok()) return fail("nan", run.status().message());
    // A run still recording is read as it is now, once.
    if (Status pinned = run->pin_snapshot(); !pinned.ok()) return fail("nan", pinned.message());
    auto result = diff::first_nonfinite(*run, args->options);
    if (!result.ok()) return fail("nan", result.status().message());
    // One database of a run folder: the run's other processes (DataLoader workers, ranks)
    // may hold where the NaN started.
    std::error_code ec;
    if (std::filesystem::is_regular_file(args->run, ec)) {
      const std::filesystem::path file = std::filesystem::absolute(args->run, ec);
      int others = 0;
      for (const auto& e : std::filesystem::directory_iterator(file.parent_path(), ec))
        if (e.path().extension() == ".sqlite" && e.path().filename() != file.filename()) ++others;
      const std::string folder = std::filesystem::path(args->run).parent_path().string();
      if (others > 0)
        (*result)["notes"].push_back(
            std::to_string(others) + " other database(s) beside it (the run's other processes: "
            "DataLoader workers, ranks) may hold where it started: `tdbg nan " +
            (folder.empty() ? std::string(".") : folder) + "` looks in all of them");
    }
    if (args->json) {
      diff::add_nonfinite_cause(*result);
      std::printf("%s\n", json_text(*result, 2).c_str());
    } else {
      std::fputs(diff::format_nonfinite(*result).c_str(), stdout);
    }
    const std::string status = (*result)["status"];
    exit_code = status == "finite" ? 0 : status == "nonfinite" || status == "carried" ? 1 : 2;
  });
}

}  // namespace tdbg::cli
