// `json_text`: a JSON document as text, for every JSON that `tdbg` prints or writes. Text that
// is not UTF-8 (a Latin-1 byte in a program's argument, a working directory or a file name,
// which Linux allows; a damaged database's strings) makes nlohmann::json's `dump` throw; here
// each such byte becomes U+FFFD instead, so the output is valid JSON and nothing aborts.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tdbg {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tdbg
