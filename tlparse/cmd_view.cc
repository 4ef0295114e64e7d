// `tdbg view RUN [RUN_B] [--port P]`: serves the viewer and the whole runs from 127.0.0.1,
// read-only, until Ctrl-C.
#include <cstdio>

#include "tlparse/commands.h"
#include "tlparse/report/server.h"

namespace tdbg::cli {

void add_view_command(CLI::App& app) {
  struct Args {
    std::string run_a, run_b;
    int port = 8765;
    int64_t window = 1000;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "view", "Serve the viewer for a run (or two) on 127.0.0.1, paging through every op");
  cmd->add_option("RUN", args->run_a, "Run directory or database")->required();
  cmd->add_option("RUN_B", args->run_b, "Second run, to compare with the first");
  cmd->add_option("--port", args->port, "TCP port on 127.0.0.1 (0 picks a free one; to 65535)")
      ->check(whole_number_in(0, 65535));
  cmd->add_option("--window", args->window,
                  "Ops around the divergence embedded in the page (1 to 16777216)")
      ->check(whole_number_in(int64_t{1}, int64_t{1} << 24));
  cmd->callback([args] {
    auto a = tracer::Run::Open(args->run_a);
    if (!a.ok()) return fail("view", a.status().message());
    note_skipped("view", a->skipped);
    std::optional<tracer::Run> b;
    if (!args->run_b.empty()) {
      auto opened = tracer::Run::Open(args->run_b);
      if (!opened.ok()) return fail("view", opened.status().message());
      note_skipped("view", opened->skipped);
      b = std::move(opened.value());
      tracer::PairProcesses(*a, *b);  // the same process of the program at each index
    }
    report::ViewOptions options;
    options.port = args->port;
    options.report.window_ops = args->window;
    options.on_listening = [](int port) {
      std::printf("tdbg view: serving http://127.0.0.1:%d/ (Ctrl-C to stop)\n", port);
      std::fflush(stdout);
    };
    Status status = report::serve(a.value(), b ? &*b : nullptr, options);
    if (!status.ok()) return fail("view", status.message());
  });
}

}  // namespace tdbg::cli
