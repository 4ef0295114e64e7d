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

// Reads every `TDBG_<NAME>` variable (upper-cased flag name); unset ones keep the default.
// A malformed or out-of-range value (a negative ring or flush interval, hash threads below 1)
// keeps the default and, when `report`, is reported on stderr: one reader per process
// reports, so that a typo is said once.
// `malformed`, when given, gets (flag name, "TDBG_X=value: not what was expected") for each
// such value, for `tdbg record` to refuse.
Config config_from_environment(
    bool report = true, std::vector<std::pair<std::string, std::string>>* malformed = nullptr);

}  // namespace tdbg::interpose
