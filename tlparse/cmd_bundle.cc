// `tdbg bundle`: placeholder until its owner lands it; says so and exits 2.
#include "tlparse/commands.h"

namespace tdbg::cli {

void add_bundle_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bundle", "(not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("bundle", "not implemented yet"); });
}

}  // namespace tdbg::cli
