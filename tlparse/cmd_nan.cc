// `tdbg nan`: placeholder until its owner lands it; says so and exits 2.
#include "tlparse/commands.h"

namespace tdbg::cli {

void add_nan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("nan", "(not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("nan", "not implemented yet"); });
}

}  // namespace tdbg::cli
