// Entry point of the `tdbg` command line: registers every subcommand (tlparse/commands.h)
// and turns CLI11's parse errors into the documented exit status 2.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <string>

#include "tlparse/commands.h"

namespace tdbg::cli {

int exit_code = 0;

std::string executable_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

void fail(const std::string& command, const std::string& message) {
  // One line whatever the message carries: a damaged database's SQLite error quotes its bytes.
  std::string line;
  for (unsigned char c : message) {
    if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      line += escaped;
    } else {
      line.push_back(static_cast<char>(c));
    }
  }
  std::fprintf(stderr, "tdbg %s: %s\n", command.c_str(), line.c_str());
  exit_code = 2;
}

void note_skipped(const std::string& command, const std::vector<std::string>& skipped) {
  for (const std::string& line : skipped)
    std::fprintf(stderr, "tdbg %s: note: %s\n", command.c_str(), line.c_str());
}

// CLI11 shows a negated flag's value beside its name (`--stacks,--no-stacks{false}`), which
// reads as "off by default"; the help's own [on] or [off] says the default.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    std::string name = CLI::Formatter::make_option_name(opt, is_positional);
    for (const std::string value : {"{false}", "{true}"})
      for (size_t at; (at = name.find(value)) != std::string::npos;) name.erase(at, value.size());
    return name;
  }
  // Descriptions wrapped to 80 columns (CLI11 prints each on one line, however long).
  std::string make_option_desc(const CLI::Option* opt) const override {
    const std::string desc = CLI::Formatter::make_option_desc(opt);
    const size_t width = get_column_width() < 60 ? 80 - get_column_width() : 20;
    std::string out, line;
    size_t at = 0;
    while (at < desc.size()) {
      size_t end = desc.find_first_of(" \n", at);
      if (end == std::string::npos) end = desc.size();
      const std::string word = desc.substr(at, end - at);
      if (!line.empty() && line.size() + 1 + word.size() > width) {
        out += line + "\n";
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
      if (end < desc.size() && desc[end] == '\n') {
        out += line + "\n";
        line.clear();
      }
      at = end + 1;
    }
    return out + line;
  }
};

}  // namespace tdbg::cli

int main(int argc, char** argv) {
  CLI::App app{"tdbg: where do two PyTorch runs first differ, and why?"};
  app.formatter(std::make_shared<tdbg::cli::HelpFormatter>());  // before the commands copy it
  app.require_subcommand(1);
  app.set_version_flag("--version", "tdbg 0.1.0");
  tdbg::cli::add_record_command(app);
  tdbg::cli::add_diff_command(app);
  tdbg::cli::add_nan_command(app);
  tdbg::cli::add_show_command(app);
  tdbg::cli::add_report_command(app);
  tdbg::cli::add_view_command(app);
  tdbg::cli::add_export_command(app);
  tdbg::cli::add_bundle_command(app);
  // A first word that names no command (a typo): say which, not "a subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      found = found || sub->get_name() == argv[1];
    }
    if (!found) {
      std::fprintf(stderr, "tdbg: unknown command '%s' (commands: %s; see tdbg --help)\n", argv[1],
                   known.c_str());
      return 2;
    }
  }
  // "tdbg diff": the command line's subcommand, for an error's first words.
  auto command_given = [&app] {
    std::string command = "tdbg";
    for (const CLI::App* sub : app.get_subcommands()) command += " " + sub->get_name();
    return command;
  };
  // `tdbg record [options] -- PROGRAM ARGS...`: CLI11 gets only the words before `--`; the
  // record command reads the program from the command line itself (cmd_record.cc).
  int parsed_argc = argc;
  if (argc > 1 && std::string(argv[1]) == "record") {
    for (int i = 2; i < argc; ++i) {
      if (std::string(argv[i]) == "--") {
        parsed_argc = i;
        break;
      }
    }
  }
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // One line, like every other error of tdbg, naming the subcommand given.
    const std::string command = command_given();
    std::string what = e.what();
    while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
    for (char& c : what)
      if (c == '\n') c = ' ';
    // `tdbg record --stacks 0 -- ...`: an on/off option's value given as a word of its own.
    // `tdbg record --hash -o RUN`: an option that takes a value took the next option as it,
    // which leaves that option's own value stray.
    std::string took_option;
    if (command == "tdbg record" && dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      CLI::App* record = nullptr;
      for (CLI::App* sub : app.get_subcommands({}))
        if (sub->get_name() == "record") record = sub;
      for (int i = 2; record && i + 1 < parsed_argc && took_option.empty(); ++i) {
        const std::string name = argv[i], next = argv[i + 1];
        if (name.rfind("-", 0) != 0 || name.find('=') != std::string::npos ||
            next.rfind("-", 0) != 0)
          continue;
        const CLI::Option* opt = record->get_option_no_throw(name);
        if (opt && opt->get_type_size_min() > 0)
          took_option = name + " took " + next + " as its value: give it a value of its own (" +
                        name + (name.rfind("--", 0) == 0 ? "=" : " ") + "VALUE)";
      }
    }
    if (!took_option.empty()) {
      what += "; " + took_option;
    } else if (command == "tdbg record" && dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr &&
               what.find(": -") == std::string::npos) {
      // Name the option given before the stray word: `--quiet 1` reads `--quiet=1`.
      std::string option = "--stacks", value = "0", example = "e.g. ";
      const size_t colon = what.find(": ");
      const std::string stray = colon == std::string::npos ? "" : what.substr(colon + 2, what.find(' ', colon + 2) - colon - 2);
      for (int i = 3; i < parsed_argc && !stray.empty(); ++i) {
        const std::string before = argv[i - 1];
        if (argv[i] == stray && before.rfind("--", 0) == 0 && before.find('=') == std::string::npos) {
          option = before;
          value = stray;
          example.clear();
          break;
        }
      }
      what += "; on/off options take no separate value (" + example + option + "=" + value +
              " or --no-" + option.substr(2) + ")";
    }
    std::fprintf(stderr, "%s: %s (see %s --help)\n", command.c_str(), what.c_str(),
                 command.c_str());
    return 2;
  } catch (const std::exception& e) {
    // A bug of tdbg's own (an input no check foresaw): one line and exit 2, not an abort.
    std::fprintf(stderr, "%s: internal error: %s (please report it)\n", command_given().c_str(),
                 e.what());
    return 2;
  }
  return tdbg::cli::exit_code;
}
