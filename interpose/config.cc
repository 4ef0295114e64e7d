// Reads the recording configuration from the `TDBG_*` environment, one variable per line of
// interpose/flags.inc. Runs inside every preloaded process, so it never throws and never
// aborts: a malformed value keeps the default and is reported once on stderr.
#include "interpose/config.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tdbg::interpose {
namespace {

// `TDBG_` + the flag name upper-cased; names are short identifiers from flags.inc.
std::string environment_name(const char* flag) {
  std::string name = "TDBG_";
  for (const char* p = flag; *p; ++p) {
    char c = *p;
    name += (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  }
  return name;
}

void report_malformed(const std::string& variable, const char* value, const char* expected) {
  std::fprintf(stderr, "tdbg: error: %s=%s is not %s; using the default\n", variable.c_str(), value,
               expected);
}

// Puts back the default of an integer option below its least value, reported (if `report`)
// like a typo.
void at_least(const char* flag, int64_t least, int64_t fallback, int64_t* value, bool report,
              std::vector<std::pair<std::string, std::string>>* malformed) {
  if (*value >= least) return;
  const std::string text = std::to_string(*value);
  const std::string expected = least == 0 ? "0 or more" : "at least " + std::to_string(least);
  if (report) report_malformed(environment_name(flag), text.c_str(), expected.c_str());
  if (malformed)
    malformed->emplace_back(flag, environment_name(flag) + "=" + text + ": must be " + expected);
  *value = fallback;
}

// Each parses `value` into `out` and returns nullptr, or leaves `out` and returns what was
// expected.
const char* parse_value(const char* value, std::string* out) {
  *out = value;
  return nullptr;
}

const char* parse_value(const char* value, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  long long parsed = std::strtoll(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0') return "an integer";
  *out = static_cast<int64_t>(parsed);
  return nullptr;
}

const char* parse_value(const char* value, bool* out) {
  static const char* const kTrue[] = {"1", "true", "yes", "on"};
  static const char* const kFalse[] = {"0", "false", "no", "off"};
  for (const char* t : kTrue)
    if (strcasecmp(value, t) == 0) {
      *out = true;
      return nullptr;
    }
  for (const char* f : kFalse)
    if (strcasecmp(value, f) == 0) {
      *out = false;
      return nullptr;
    }
  return "a boolean (1/0, true/false, yes/no, on/off)";
}

}  // namespace

Config config_from_environment(bool report,
                              std::vector<std::pair<std::string, std::string>>* malformed) {
  Config config;
#define FLAG(type, name, def, doc)                                                        \
  {                                                                                       \
    std::string variable = environment_name(#name);                                       \
    if (const char* value = std::getenv(variable.c_str())) {                              \
      const char* expected = parse_value(value, &config.name);                            \
      if (expected != nullptr && report) report_malformed(variable, value, expected);     \
      if (expected != nullptr && malformed)                                               \
        malformed->emplace_back(#name, variable + "=" + value + ": not " + expected);     \
    }                                                                                     \
  }
#include "interpose/flags.inc"
#undef FLAG
  const Config defaults;
  at_least("ring", 0, defaults.ring, &config.ring, report, malformed);
  at_least("hash_threads", 1, defaults.hash_threads, &config.hash_threads, report, malformed);
  at_least("flush_ms", 0, defaults.flush_ms, &config.flush_ms, report, malformed);
  return config;
}

bool parse_step_window(const std::string& text, StepWindow* out) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return false;
  // Empty, or digits only that fit (18 digits: below 2^63).
  auto bound = [](const std::string& digits, int64_t* value) {
    if (digits.empty()) return true;
    if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
      return false;
    *value = std::strtoll(digits.c_str(), nullptr, 10);
    return true;
  };
  StepWindow window;
  if (!bound(text.substr(0, colon), &window.begin) || !bound(text.substr(colon + 1), &window.end) ||
      window.begin >= window.end)
    return false;
  *out = window;
  return true;
}

}  // namespace tdbg::interpose
