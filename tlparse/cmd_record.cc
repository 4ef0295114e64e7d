// `tdbg record`: placeholder until its owner lands it; says so and exits 2.
#include "tlparse/commands.h"

namespace tdbg::cli {

void add_record_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("record", "(not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("record", "not implemented yet"); });
}

}  // namespace tdbg::cli
