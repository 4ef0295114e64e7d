// `tdbg diff`: placeholder until its owner lands it; says so and exits 2.
#include "tlparse/commands.h"

namespace tdbg::cli {

void add_diff_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("diff", "(not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("diff", "not implemented yet"); });
}

}  // namespace tdbg::cli
