// Renders the viewer page: the embedded viewer files with the data model inline, locked down by
// a Content-Security-Policy that lets only the viewer's own script (by its SHA-256) run.
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "base/json_text.h"
#include "tlparse/report/report.h"
#include "viewer/assets.h"

namespace tdbg::report {
namespace {

// SHA-256 (FIPS 180-4), only for the CSP hash of the inline script.
class Sha256 {
 public:
  std::array<uint8_t, 32> digest(const std::string& data) {
    uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
    std::string msg = data;
    msg.push_back(static_cast<char>(0x80));
    while (msg.size() % 64 != 56) msg.push_back(0);
    for (int i = 7; i >= 0; --i) msg.push_back(static_cast<char>((bits >> (i * 8)) & 0xff));
    for (size_t off = 0; off < msg.size(); off += 64) block(reinterpret_cast<const uint8_t*>(msg.data() + off));
    std::array<uint8_t, 32> out;
    for (int i = 0; i < 8; ++i) {
      for (int k = 0; k < 4; ++k) out[i * 4 + k] = static_cast<uint8_t>(h_[i] >> (24 - 8 * k));
    }
    return out;
  }

 private:
  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void block(const uint8_t* p) {
    static constexpr uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      w[i] = (uint32_t(p[i * 4]) << 24) | (uint32_t(p[i * 4 + 1]) << 16) |
             (uint32_t(p[i * 4 + 2]) << 8) | uint32_t(p[i * 4 + 3]);
    }
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g, h_[7] += h;
  }
  uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
};

std::string base64(const uint8_t* data, size_t n) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = uint32_t(data[i]) << 16;
    if (i + 1 < n) v |= uint32_t(data[i + 1]) << 8;
    if (i + 2 < n) v |= data[i + 2];
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back(i + 2 < n ? kAlphabet[v & 63] : '=');
  }
  return out;
}

// Replaces each `@NAME@` marker of `page` by its value in one pass over the template, so a
// value (which may hold a run's strings) is never searched for markers itself.
std::string fill_template(const std::string& page,
                          const std::vector<std::pair<std::string, std::string>>& values) {
  std::string out;
  size_t pos = 0;
  while (pos < page.size()) {
    size_t best = std::string::npos;
    const std::pair<std::string, std::string>* hit = nullptr;
    for (const auto& v : values) {
      size_t at = page.find(v.first, pos);
      if (at < best) best = at, hit = &v;
    }
    if (!hit) break;
    out.append(page, pos, best - pos);
    out += hit->second;
    pos = best + hit->first.size();
  }
  if (pos < page.size()) out.append(page, pos, std::string::npos);
  return out;
}

Status make_dirs(const std::string& dir) {
  std::string partial;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!partial.empty() && mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        return Status::Error(partial + ": " + std::strerror(errno));
      }
    }
    if (i < dir.size()) partial.push_back(dir[i]);
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::Error(dir + ": not a directory");
  }
  return Status::Ok();
}

}  // namespace

std::string sha256_base64(const std::string& text) {
  auto d = Sha256().digest(text);
  return base64(d.data(), d.size());
}

std::string json_for_script(const nlohmann::json& data) {
  // Invalid UTF-8 from a database becomes U+FFFD instead of an exception.
  std::string text = json_text(data);
  std::string out;
  out.reserve(text.size() + text.size() / 50);
  // These characters only occur inside JSON strings, where \uXXXX means the same thing.
  for (char c : text) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string render_html(const nlohmann::json& data) {
  std::string page(viewer::asset("index.html"));
  std::string script(viewer::asset("viewer.js"));
  std::string style(viewer::asset("viewer.css"));
  // The inline script is allowed by its hash, nothing else may run: no inline handlers, no
  // injected <script>, no eval. Data is fetched only from the serving origin (`tdbg view`).
  std::string csp = "default-src 'none'; script-src 'sha256-" + sha256_base64(script) +
                    "'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; "
                    "base-uri 'none'; form-action 'none'";
  return fill_template(page, {{"@TDBG_CSP@", csp},
                              {"@TDBG_CSS@", style},
                              {"@TDBG_DATA@", json_for_script(data)},
                              {"@TDBG_JS@", script}});
}

StatusOr<std::string> write_report(const nlohmann::json& data, const std::string& dir) {
  TDBG_RETURN_IF_ERROR(make_dirs(dir));
  std::string path = dir + "/index.html";
  std::string html = render_html(data);
  // Written aside and renamed: a full disk leaves the earlier page (or none), never a page cut
  // short that opens as if whole.
  const std::string partial = path + ".partial";
  std::FILE* out = std::fopen(partial.c_str(), "wb");
  if (!out) return Status::Error(path + ": cannot write: " + std::strerror(errno));
  const bool written = std::fwrite(html.data(), 1, html.size(), out) == html.size();
  int error = written ? 0 : errno;
  if (std::fclose(out) != 0 && error == 0) error = errno;
  if (!written || error != 0 || std::rename(partial.c_str(), path.c_str()) != 0) {
    if (error == 0) error = errno;
    std::remove(partial.c_str());
    return Status::Error(path + ": cannot write: " + std::strerror(error));
  }
  return path;
}

}  // namespace tdbg::report
