// `command_line_scripts`: the Python scripts of a recorded command line (meta `cmdline`, a
// JSON array of strings), for `tdbg diff`, which names the programs two runs ran, and `tdbg
// bundle`, which snapshots them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tdbg {

// The arguments that name a `.py` file, in order and as given (relative paths stay relative
// to the process's working directory). Empty when the text is not a JSON array.
inline std::vector<std::string> command_line_scripts(const std::string& cmdline_json) {
  std::vector<std::string> scripts;
  const nlohmann::json argv = nlohmann::json::parse(cmdline_json, nullptr, false);
  if (!argv.is_array()) return scripts;
  for (const nlohmann::json& arg : argv) {
    if (!arg.is_string()) continue;
    const std::string& s = arg.get_ref<const std::string&>();
    if (s.size() > 3 && s.compare(s.size() - 3, 3, ".py") == 0) scripts.push_back(s);
  }
  return scripts;
}

}  // namespace tdbg
