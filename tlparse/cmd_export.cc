// `tdbg export --chrome-trace RUN [RUN_B] -o trace.json`: a timeline for Perfetto and
// chrome://tracing, with the ops that differ between two runs marked.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "interpose/config.h"
#include "tlparse/commands.h"
#include "tlparse/report/chrome_trace.h"

namespace tdbg::cli {

void add_export_command(CLI::App& app) {
  struct Args {
    std::string run_a, run_b, out, steps;
    bool chrome_trace = false, no_kernels = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("export", "Export a run (or two) to another tool's format");
  cmd->add_flag("--chrome-trace", args->chrome_trace,
                "Chrome trace-event JSON (Perfetto, chrome://tracing)")
      ->required();
  cmd->add_option("RUN", args->run_a, "Run directory or database")->required();
  cmd->add_option("RUN_B", args->run_b, "Second run: written too, divergent ops are marked");
  cmd->add_option("-o,--output", args->out, "Output file ('-' for stdout)")->required();
  cmd->add_flag("--no-kernels", args->no_kernels, "Leave GPU kernels out");
  cmd->add_option("--steps", args->steps,
                  "Only the ops of optimizer steps A:B (A to B-1; 'A:' or ':B'), for a trace of a "
                  "long run that a viewer opens");
  cmd->callback([args] {
    interpose::StepWindow window;
    if (!args->steps.empty() && !interpose::parse_step_window(args->steps, &window))
      return fail("export", "--steps " + args->steps + ": want A:B, A: or :B with A < B");
    if (const std::string why = output_refusal(args->out, {args->run_a, args->run_b}, OutputKind::kJson);
        !why.empty())
      return fail("export", args->out + ": not written: " + why);
    auto a = tracer::Run::Open(args->run_a);
    if (!a.ok()) return fail("export", a.status().message());
    note_skipped("export", a->skipped);
    std::optional<tracer::Run> b;
    if (!args->run_b.empty()) {
      auto opened = tracer::Run::Open(args->run_b);
      if (!opened.ok()) return fail("export", opened.status().message());
      note_skipped("export", opened->skipped);
      b = std::move(opened.value());
      tracer::PairProcesses(*a, *b);  // the same process of the program at each index
    }
    // A run still recording is read as it is now, once: every part of the trace tells of
    // the same ops.
    for (tracer::Run* run : {&a.value(), b ? &*b : nullptr})
      if (run)
        if (Status pinned = run->pin_snapshot(); !pinned.ok())
          return fail("export", pinned.message());
    bool to_stdout = args->out == "-";
    std::string tmp = args->out + ".partial";
    std::FILE* out = to_stdout ? stdout : std::fopen(tmp.c_str(), "wb");
    if (!out) return fail("export", args->out + ": " + std::strerror(errno));
    report::ChromeTraceOptions options;
    options.kernels = !args->no_kernels;
    options.first_step = window.begin;
    options.end_step = window.end;
    Status status = report::write_chrome_trace(a.value(), b ? &*b : nullptr, options, out);
    if (!to_stdout) {
      if (std::fclose(out) != 0 && status.ok()) status = Status::Error("write error");
      // Written aside and renamed, so a failed export never leaves a half trace under the name.
      if (status.ok() && std::rename(tmp.c_str(), args->out.c_str()) != 0) {
        status = Status::Error(std::strerror(errno));
      }
      if (!status.ok()) std::remove(tmp.c_str());
    }
    if (!status.ok()) {
      // A read error names its database; a write error, the trace it could not write.
      const std::string& why = status.message();
      const bool of_a_run = why.rfind(a->path, 0) == 0 || (b && why.rfind(b->path, 0) == 0);
      return fail("export", of_a_run ? why : args->out + ": " + why);
    }
  });
}

}  // namespace tdbg::cli
