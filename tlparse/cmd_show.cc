// `tdbg show`: placeholder until its owner lands it; says so and exits 2.
#include "tlparse/commands.h"

namespace tdbg::cli {

void add_show_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("show", "(not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("show", "not implemented yet"); });
}

}  // namespace tdbg::cli
