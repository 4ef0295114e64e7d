// Recording configuration, read once from the `TDBG_*` environment (interpose/flags.inc).
// Shared by libtdbg_preload.so, libtdbg_torch.so and `tdbg record`, which turns its flags into
// the same environment variables so a child process sees exactly what the user asked for.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tdbg::interpose {

struct Config {
#define FLAG_TYPE_STRING std::string
#define FLAG_TYPE_INT int64_t
#define FLAG_TYPE_BOOL bool
#define FLAG(type, name, def, doc) FLAG_TYPE_##type name = def;
#include "interpose/flags.inc"
#undef FLAG
#undef FLAG_TYPE_STRING
#undef FLAG_TYPE_INT
#undef FLAG_TYPE_BOOL
};

// The file in the run directory (`out`) where a process notes, a line each ("PID\tREASON"),
// why tdbg's torch hook could not be loaded into it: `tdbg record` says it after the program,
// where no database is there to, and removes the file.
inline constexpr const char* kHookFailedFile = ".tdbg-hook-failed";
// How a reason there begins where the hook loaded but could not create its database (a full
// disk): `tdbg record` says that instead.
inline constexpr const char* kDatabaseFailed = "its database could not be created: ";

// Reads every `TDBG_<NAME>` variable (upper-cased flag name); unset ones keep the default.
// A malformed or out-of-range value (a negative ring or flush interval, hash threads below 1)
// keeps the default and, when `report`, is reported on stderr: one reader per process
// reports, so that a typo is said once.
// `malformed`, when given, gets (flag name, "TDBG_X=value: not what was expected") for each
// such value, for `tdbg record` to refuse.
Config config_from_environment(
    bool report = true, std::vector<std::pair<std::string, std::string>>* malformed = nullptr);

// A `steps` window, "A:B", "A:" or ":B": the optimizer steps [begin, end) that are recorded.
struct StepWindow {
  int64_t begin = 0;
  int64_t end = INT64_MAX;
};

// Parses a `steps` value. False, leaving `out`, for anything but digits around one colon with
// A < B: no sign, no space, at most 18 digits (below 2^63). The one reading of the form, for
// `tdbg record` (which refuses a bad one), the hook (which records all steps instead) and the
// commands that read a recording's window back.
bool parse_step_window(const std::string& text, StepWindow* out);

}  // namespace tdbg::interpose
