// `tdbg report RUN [RUN_B] -o DIR`: writes a static, self-contained HTML report (DIR/index.html)
// that opens from the file system with no server and no network.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "tlparse/commands.h"
#include "tlparse/diff/diff.h"
#include "tlparse/report/redact.h"
#include "tlparse/report/report.h"

namespace tdbg::cli {

void add_report_command(CLI::App& app) {
  struct Args {
    std::string run_a, run_b, out;
    int64_t window = 1000;
    bool no_diff = false;
    std::string align_steps;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "report", "Write a static HTML report of a run, or of two runs and where they diverge");
  cmd->add_option("RUN", args->run_a, "Run directory or database")->required();
  cmd->add_option("RUN_B", args->run_b, "Second run, to compare with the first");
  cmd->add_option("-o,--output", args->out, "Directory to write index.html into")->required();
  cmd->add_option("--window", args->window,
                  "Ops of each run embedded around the divergence (the report's size bound; 1 "
                  "to 16777216)")
      ->check(whole_number_in(int64_t{1}, int64_t{1} << 24));
  cmd->add_flag("--no-diff", args->no_diff, "Skip the diff engine and the non-finite search");
  add_align_steps_option(cmd, &args->align_steps);
  cmd->callback([args] {
    report::ReportOptions options;
    if (std::string why =
            align_steps_error(args->align_steps, !args->run_b.empty(), &options.align_steps);
        !why.empty())
      return fail("report", why);
    if (const std::string why =
            output_refusal(args->out, {args->run_a, args->run_b}, OutputKind::kDirectory);
        !why.empty())
      return fail("report", args->out + ": not written: " + why);
    auto a = tracer::Run::Open(args->run_a);
    if (!a.ok()) return fail("report", a.status().message());
    note_skipped("report", a->skipped);
    std::optional<tracer::Run> b;
    if (!args->run_b.empty()) {
      auto opened = tracer::Run::Open(args->run_b);
      if (!opened.ok()) return fail("report", opened.status().message());
      note_skipped("report", opened->skipped);
      b = std::move(opened.value());
      options.diff_notes = diff::keep_aligned_phases(*a, *b, &options.align_steps);
      tracer::PairProcesses(*a, *b);  // the same process of the program at each index
    }
    // A run still recording is read as it is now, once: every part of the page tells of
    // the same ops.
    for (tracer::Run* run : {&a.value(), b ? &*b : nullptr})
      if (run)
        if (Status pinned = run->pin_snapshot(); !pinned.ok()) return fail("report", pinned.message());
    options.window_ops = args->window;
    options.with_diff = !args->no_diff;
    auto data = report::build_report_data(a.value(), b ? &*b : nullptr, options);
    if (!data.ok()) return fail("report", data.status().message());
    // Pages are shared too: credentials in a command line or the environment are left out,
    // as a bundle leaves them out (paths stay: the page is read where the runs are).
    report::Redactor redactor(/*redact_paths=*/false, "", "");
    redactor.remember_environment(environ);
    std::error_code ec;
    const bool existed = std::filesystem::exists(args->out, ec);
    auto path = report::write_report(redactor.apply_report(std::move(data.value())), args->out);
    if (!path.ok()) {
      // A folder made for the page and left empty is taken away again.
      if (!existed) std::filesystem::remove(args->out, ec);
      return fail("report", path.status().message());
    }
    std::printf("%s\n", path.value().c_str());
    // A page this large opens slowly, if at all: said, with what to do instead.
    constexpr uintmax_t kLargePage = uintmax_t{64} << 20;
    const uintmax_t bytes = std::filesystem::file_size(path.value(), ec);
    if (!ec && bytes > kLargePage)
      std::fprintf(stderr,
                   "tdbg report: note: the page is %ju MB (--window %lld ops per run): a browser "
                   "may be slow to open it; a smaller --window, or `tdbg view`, which pages "
                   "through the whole run, keeps it light\n",
                   bytes >> 20, static_cast<long long>(args->window));
  });
}

}  // namespace tdbg::cli
