// `tdbg report`: placeholder until its owner lands it; says so and exits 2.
#include "tlparse/commands.h"

namespace tdbg::cli {

void add_report_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "(not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("report", "not implemented yet"); });
}

}  // namespace tdbg::cli
