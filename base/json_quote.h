// `json_quote`: a string as a JSON string literal, for the few places that write JSON text by
// hand on a hot or dependency-free path (the dispatch hook's metadata, the chrome-trace export).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace tdbg {

// `text` in double quotes with `"`, `\` and control characters escaped; other bytes (UTF-8
// included) are copied as they are.
inline std::string json_quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace tdbg
