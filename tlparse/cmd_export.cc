// `tdbg export`: placeholder until its owner lands it; says so and exits 2.
#include "tlparse/commands.h"

namespace tdbg::cli {

void add_export_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "(not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("export", "not implemented yet"); });
}

}  // namespace tdbg::cli
