// `tdbg view`: placeholder until its owner lands it; says so and exits 2.
#include "tlparse/commands.h"

namespace tdbg::cli {

void add_view_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("view", "(not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("view", "not implemented yet"); });
}

}  // namespace tdbg::cli
