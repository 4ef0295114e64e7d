// What a bug-report bundle or a report page must not carry: credential-like environment values
// (and, on request, the home directory and user name). One `Redactor` scrubs every string that
// goes into a bundle or a page.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tdbg::report {

// True for names that look like they hold a credential: TOKEN, KEY, SECRET, PASSWORD, PASSWD,
// CREDENTIAL, AUTH, COOKIE, PRIVATE, SESSION, SIGNATURE, and cloud prefixes (AWS_, AZURE_,
// GCP_, GOOGLE_APPLICATION_CREDENTIALS, ...), case-insensitive. Errs on the side of redacting.
bool looks_like_secret_name(std::string_view name);

class Redactor {
 public:
  static constexpr const char* kMark = "[REDACTED]";

  // `home` and `user` are replaced in every string when `redact_paths` is set.
  Redactor(bool redact_paths, std::string home, std::string user);

  // Redacts a run's `meta` value for `key`: the whole value when the key looks secret, the
  // secret entries of a JSON object ("env") or of a command line (JSON array), and remembers
  // every secret value it removed so that `apply` scrubs it from every other string too.
  std::string meta(const std::string& key, const std::string& value);

  // Also scrubs the values (8 characters or more) of the credential-like variables of
  // `environment` (the bundling shell's `environ`): a recording keeps only the variables that
  // change how torch computes, yet the program may have put a key in a string it recorded.
  void remember_environment(const char* const* environment);

  // Learns the secrets of the command `tdbg record` ran (its manifest beside the databases of
  // `run_path`, a run folder or one of its databases): `env API_KEY=... python train.py`
  // gives the program a variable that its own command line does not hold.
  void remember_manifest(const std::string& run_path);

  // Scrubs `text`: known secret values, `NAME=value` and `NAME = "value"` pairs whose NAME
  // looks secret, and (with `redact_paths`) the home directory and user name. The names whose
  // values it removed join `redacted_names`.
  std::string apply(std::string_view text) const;
  // `apply` on every string (keys and values) of a JSON document.
  nlohmann::json apply_json(const nlohmann::json& doc) const;

  // A report's data model (`build_report_data`): each run's and process's meta by key, then
  // every string.
  nlohmann::json apply_report(nlohmann::json data);

  // Names whose values were redacted, sorted.
  const std::set<std::string>& redacted_names() const { return names_; }
  bool redact_paths() const { return redact_paths_; }

 private:
  std::string redact_json_value(const std::string& key, const std::string& value);
  void remember(const std::string& name, const std::string& value);
  void remember_value(const std::string& name, const std::string& value, size_t shortest);

  bool redact_paths_;
  std::string home_, user_;
  mutable std::set<std::string> names_;  // grows as `apply` finds secrets
  std::vector<std::pair<std::string, std::string>> values_;  // secret values and their names, longest first
};

}  // namespace tdbg::report
