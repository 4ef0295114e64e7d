// The `tdbg` subcommands: each file `tlparse/cmd_<name>.cc` defines one `add_<name>_command`,
// which registers its CLI11 subcommand and the callback that runs it. `main.cc` calls them all.
// A command's callback sets `exit_code` (like `cmp`: 0 same/ok, 1 difference found, 2 error)
// and prints errors as one line on stderr: "tdbg <command>: <file>: <problem>".
#pragma once

#include <strings.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

namespace tdbg::cli {

// Where a command's callback leaves the process exit status.
extern int exit_code;

// The directory that holds the running `tdbg` executable (for finding ../lib/*.so and the
// viewer assets relative to it, in a build tree or an install prefix).
std::string executable_dir();

// Prints "tdbg <command>: <message>" on stderr and sets `exit_code` to 2.
void fail(const std::string& command, const std::string& message);

// Prints "tdbg <command>: note: <line>" on stderr for each database that `run` left out
// (tracer::Run::skipped): the command goes on with the others.
void note_skipped(const std::string& command, const std::vector<std::string>& skipped);

// Why `text` is not a whole number that fits in 64 bits ("" when it is; its value in `*value`).
inline std::string whole_number_error(const std::string& text, long long* value) {
  errno = 0;
  char* end = nullptr;
  *value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0') return "want a whole number";
  if (errno == ERANGE) return "too large";
  return "";
}

// A whole number no smaller than `least`: a short message for a wrong value (CLI11's own range
// checks print the bounds of the type, hundreds of digits for a double).
inline CLI::Validator at_least(long long least) {
  return CLI::Validator(
      [least](std::string& text) -> std::string {
        long long value = 0;
        std::string error = whole_number_error(text, &value);
        if (error.empty() && value < least) error = "must be " + std::to_string(least) + " or more";
        return error;
      },
      ">=" + std::to_string(least));
}

// A whole number from `least` to `most` ("want a whole number from 0 to 1000" for "abc", where
// CLI11's Range says "Value abc not in range").
inline CLI::Validator whole_number_in(long long least, long long most) {
  return CLI::Validator(
      [least, most](std::string& text) -> std::string {
        long long value = 0;
        std::string error = whole_number_error(text, &value);
        if (!error.empty() || value < least || value > most)
          error = "want a whole number from " + std::to_string(least) + " to " + std::to_string(most);
        return error;
      },
      std::to_string(least) + ".." + std::to_string(most));
}

// A whole number that fits in 64 bits (the range is checked elsewhere): CLI11 alone clamps
// "99999999999999999999" to the largest value.
inline CLI::Validator whole_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        long long value = 0;
        return whole_number_error(text, &value);
      },
      "");
}

// An on/off flag's value (`--stacks=0`): the words TDBG_* variables take, as the hook reads
// them (CLI11 alone reads any number as on).
inline CLI::Validator boolean_word() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        for (const char* word : {"1", "0", "true", "false", "yes", "no", "on", "off"})
          if (strcasecmp(text.c_str(), word) == 0) return "";
        return "want 1/0, true/false, yes/no or on/off, not " + text;
      },
      "");
}

// `--align-steps A:B` for the commands that compare two runs (diff, report, bundle): the
// option on `cmd`, its text in `*text`.
inline void add_align_steps_option(CLI::App* cmd, std::string* text) {
  cmd->add_option("--align-steps", *text,
                  "A:B pairs A's optimizer step A with B's step B and compares from there (a run "
                  "resumed from a checkpoint counts its steps from 0 again: --align-steps 16:0)");
}

// Why `text` (from --align-steps) is not A:B, or is given with one run only (`two_runs`
// false): "" when it is fine; the steps in `*steps`, and {-1, -1} for an empty text.
inline std::string align_steps_error(const std::string& text, bool two_runs,
                                     std::pair<int64_t, int64_t>* steps) {
  *steps = {-1, -1};
  if (text.empty()) return "";
  const size_t colon = text.find(':');
  long long first = -1, second = -1;
  if (colon == std::string::npos || !whole_number_error(text.substr(0, colon), &first).empty() ||
      !whole_number_error(text.substr(colon + 1), &second).empty() || first < 0 || second < 0)
    return "--align-steps " + text + ": want A:B, a step of each run (whole numbers, 0 or more)";
  if (!two_runs) return "--align-steps pairs the steps of two runs: give RUN_B too";
  *steps = {first, second};
  return "";
}

// What a command writes, as far as `output_refusal` tells an earlier output of it from other
// files it must not replace.
enum class OutputKind { kGzip, kJson, kDirectory };  // kDirectory: a folder to write into

// Why the command must not write `out` ("" when it may): a file of one of the `runs` it reads
// (their databases, a file in a run folder), any existing database, or an existing file that
// is not of `kind` (an earlier bundle is replaced; `train.py` is not). For a kDirectory: any
// run folder or a folder inside one, or one whose index.html is not an earlier report.
std::string output_refusal(const std::string& out, const std::vector<std::string>& runs,
                           OutputKind kind);

void add_record_command(CLI::App& app);   // interpose/: record a program
void add_diff_command(CLI::App& app);     // first divergence between two runs
void add_nan_command(CLI::App& app);      // first non-finite value in a run
void add_show_command(CLI::App& app);     // list ops and tensors by hand
void add_report_command(CLI::App& app);   // static HTML report
void add_view_command(CLI::App& app);     // serve the viewer on 127.0.0.1
void add_export_command(CLI::App& app);   // chrome trace export
void add_bundle_command(CLI::App& app);   // shareable bug-report bundle

}  // namespace tdbg::cli
