// Redaction of credentials (and optionally home paths and the user name) for bundles.
#include "tlparse/report/redact.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <vector>

#include "base/json_text.h"
#include "tracer/reader.h"

namespace tdbg::report {
namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

// Where the value that starts at `from` in `arg` ends: at a `,` or `;` followed by another
// setting's `name=` (`token=X,lr=1`), else at the end. A comma inside a value (a password)
// stays in it unless a `name=` follows.
size_t next_setting(const std::string& arg, size_t from) {
  for (size_t at = arg.find_first_of(",;", from); at != std::string::npos;
       at = arg.find_first_of(",;", at + 1)) {
    size_t end = at + 1;
    while (end < arg.size() && name_char(arg[end])) ++end;
    if (end > at + 1 && end < arg.size() && arg[end] == '=' &&
        std::isalpha(static_cast<unsigned char>(arg[at + 1])))
      return at;
  }
  return arg.size();
}

// Replaces every `from`; whether there was one.
bool replace_all(std::string* text, const std::string& from, const std::string& to) {
  if (from.empty()) return false;
  size_t at = 0;
  bool any = false;
  while ((at = text->find(from, at)) != std::string::npos) {
    text->replace(at, from.size(), to);
    at += to.size();
    any = true;
  }
  return any;
}

// Replaces `word` where it is not part of a longer name (so user "al" leaves "alpha" alone).
void replace_word(std::string* text, const std::string& word, const std::string& to) {
  if (word.empty()) return;
  size_t at = 0;
  while ((at = text->find(word, at)) != std::string::npos) {
    bool left = at == 0 || !std::isalnum(static_cast<unsigned char>((*text)[at - 1]));
    size_t end = at + word.size();
    bool right = end >= text->size() || !std::isalnum(static_cast<unsigned char>((*text)[end]));
    if (left && right) {
      text->replace(at, word.size(), to);
      at += to.size();
    } else {
      at = end;
    }
  }
}

// Whether `text[value_at, value_end)`, the unquoted value of the `NAME=` starting at
// `name_start`, is a Python name, attribute or call (`pad`, `self.mask`, `m.bool()`) passed
// as a call's keyword argument: NAME right after `(` or `, `.
bool code_argument(const std::string& text, size_t name_start, size_t value_at, size_t value_end) {
  size_t before = name_start;
  bool spaced = false;
  while (before > 0 && text[before - 1] == ' ') {
    --before;
    spaced = true;
  }
  if (before == 0) return false;
  const char opener = text[before - 1];
  if (!(opener == '(' || (opener == ',' && spaced))) return false;
  const char first = text[value_at];
  if (!(std::isalpha(static_cast<unsigned char>(first)) || first == '_')) return false;
  for (size_t k = value_at; k < value_end; ++k) {
    const char c = text[k];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '(' || c == '[')) return false;
  }
  return true;
}

}  // namespace

bool looks_like_secret_name(std::string_view name) {
  // A path names a file (`source:/work/secret.py`), never a variable or an option.
  if (name.find('/') != std::string_view::npos) return false;
  std::string n = upper(name);
  while (!n.empty() && n[0] == '-') n.erase(0, 1);
  std::replace(n.begin(), n.end(), '-', '_');
  if (n.empty()) return false;
  // Judged by whole words (`--max-tokens`, `--tokenizer`, `--key-dim` and `--private-eval`
  // are hyperparameters): the name's words, split at any other character than a letter or a
  // digit and where a lower-case letter meets an upper-case one (`apiKey`).
  std::vector<std::string> words;
  std::string word;
  for (size_t k = 0; k < name.size(); ++k) {
    const auto c = static_cast<unsigned char>(name[k]);
    const bool camel = k > 0 && std::isupper(c) && std::islower(static_cast<unsigned char>(name[k - 1]));
    if (!std::isalnum(c) || camel) {
      if (!word.empty()) words.push_back(upper(word));
      word.clear();
    }
    if (std::isalnum(c)) word += static_cast<char>(c);
  }
  if (!word.empty()) words.push_back(upper(word));
  auto has = [&words](std::initializer_list<const char*> any) {
    for (const std::string& w : words)
      for (const char* a : any)
        if (w == a) return true;
    return false;
  };
  // Words that are a credential on their own.
  if (has({"SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS",
           "COOKIE", "SIGNATURE", "APIKEY", "SECRETKEY", "ACCESSKEY", "PRIVATEKEY", "AUTH",
           "AUTHORIZATION", "BEARER", "DSN", "CERT"}))
    return true;
  if (n.find("DATABASE_URL") != std::string::npos) return true;
  // A token, but not a count or a kind of tokens (`max_token`, `pad_token`, `token_ids`).
  if (has({"TOKEN"}) && !has({"MAX", "MIN", "NUM", "N", "LEN", "LENGTH", "COUNT", "SIZE", "DIM",
                              "ID", "IDS", "TYPE", "TYPES", "LIMIT", "BUDGET", "PER", "PAD",
                              "BOS", "EOS", "UNK", "SEP", "CLS", "MASK", "SPECIAL", "START", "END"}))
    return true;
  // A key, alone or of an access kind (`API_KEY`, `AWS_ACCESS_KEY_ID`), not `KEY_DIM`.
  if (has({"KEY"}) && (words.size() == 1 || has({"API", "ACCESS", "SECRET", "PRIVATE", "AUTH",
                                                  "SIGNING", "ENCRYPTION", "CLIENT", "LICENSE",
                                                  "MASTER", "SERVICE", "ACCOUNT", "APP", "SSH",
                                                  "GPG", "HMAC", "SESSION"})))
    return true;
  // A session, alone or its id (a session cookie's value), not its name or where it lives.
  if (has({"SESSION", "SESSIONID"}) && !has({"NAME", "DIR", "PATH", "FILE", "TYPE", "TIMEOUT",
                                             "COUNT", "NUM", "LEN", "LENGTH", "SIZE", "MODE"}))
    return true;
  // (A vendor's prefix alone names no credential: WANDB_PROJECT, HF_HOME, AWS_REGION.)
  return has({"WEBHOOK"});
}

Redactor::Redactor(bool redact_paths, std::string home, std::string user)
    : redact_paths_(redact_paths), home_(std::move(home)), user_(std::move(user)) {
  while (home_.size() > 1 && home_.back() == '/') home_.pop_back();
  if (home_ == "/") home_.clear();
}

void Redactor::remember(const std::string& name, const std::string& value) {
  names_.insert(name);
  remember_value(name, value, 4);
}

void Redactor::remember_value(const std::string& name, const std::string& value, size_t shortest) {
  // Short values ("1", "yes") would scrub unrelated text; they are only removed where found.
  // So is a path (a key file's, HF_HOME's): it names where a credential is, and scrubbed
  // everywhere it would take every path below it (stacks, the sources) with it.
  if (value.size() < shortest || value[0] == '/' || value[0] == '~') return;
  for (const auto& known : values_)
    if (known.first == value) return;
  values_.push_back({value, name});
  std::sort(values_.begin(), values_.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

void Redactor::remember_environment(const char* const* environment) {
  for (const char* const* e = environment; e && *e; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || !looks_like_secret_name(entry.substr(0, eq))) continue;
    // Named only where found: the shell's variables are not all in the recording.
    remember_value(entry.substr(0, eq), entry.substr(eq + 1), 8);
  }
}

std::string Redactor::meta(const std::string& key, const std::string& value) {
  if (looks_like_secret_name(key)) {
    remember(key, value);
    return kMark;
  }
  auto doc = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object()) {
    // An environment: {"NAME": "value", ...}.
    for (auto& [name, v] : doc.items()) {
      if (looks_like_secret_name(name)) {
        remember(name, v.is_string() ? v.get<std::string>() : json_text(v));
        v = kMark;
      }
    }
    return apply(std::string_view(json_text(doc)));
  }
  if (doc.is_array()) {
    // A command line: ["python3", "train.py", "--token", "abc", "--api-key=def"].
    for (size_t i = 0; i < doc.size(); ++i) {
      if (!doc[i].is_string()) continue;
      std::string arg = doc[i].get<std::string>();
      // A JSON object passed as an argument (`--cfg '{"api_key": "..."}'`): its entries, whose
      // quotes the command line's own JSON escapes out of `apply`'s sight.
      if (!arg.empty() && arg[0] == '{') {
        nlohmann::json inner = nlohmann::json::parse(arg, nullptr, /*allow_exceptions=*/false);
        if (inner.is_object()) {
          bool changed = false;
          for (auto& [name, v] : inner.items())
            if (looks_like_secret_name(name) && !v.is_null()) {
              remember(name, v.is_string() ? v.get<std::string>() : json_text(v));
              v = kMark;
              changed = true;
            }
          if (changed) doc[i] = json_text(inner);
          continue;
        }
      }
      size_t eq = arg.find('=');
      if (eq != std::string::npos && eq > 0 && looks_like_secret_name(arg.substr(0, eq))) {
        // Up to the next `,name=` or `;name=` of a settings list (`token=X,lr=1`), whose
        // other settings stay readable (and are redacted by their own names).
        const size_t end = next_setting(arg, eq + 1);
        remember(arg.substr(0, eq), arg.substr(eq + 1, end - eq - 1));
        doc[i] = arg.substr(0, eq + 1) + kMark + arg.substr(end);
      } else if (arg.size() > 2 && arg[0] == '-' && eq == std::string::npos &&
                 looks_like_secret_name(arg) && i + 1 < doc.size() && doc[i + 1].is_string()) {
        remember(arg, doc[i + 1].get<std::string>());
        doc[++i] = kMark;
      }
    }
    return apply(std::string_view(json_text(doc)));
  }
  return apply(std::string_view(value));
}

std::string Redactor::apply(std::string_view text_in) const {
  std::string text(text_in);
  for (const auto& [value, name] : values_) {
    if (replace_all(&text, value, kMark)) names_.insert(name);
    // A long secret cut short where it was recorded (a record_function name, truncated): its
    // first kPrefix characters and as many more as match.
    constexpr size_t kPrefix = 12;
    // (Not a path, such as HF_HOME's, whose start is every path below it.)
    if (value.size() < 16 || value[0] == '/' || value[0] == '~' ||
        value.find_first_of(" \t") != std::string::npos)
      continue;
    // Only where the text there ends with it (a string cut short), not inside a longer value
    // that begins alike (another URL after `postgresql://`).
    const std::string prefix = value.substr(0, kPrefix);
    for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at)) {
      size_t n = kPrefix;
      while (at + n < text.size() && n < value.size() && text[at + n] == value[n]) ++n;
      const bool cut_short = at + n == text.size() || std::string_view("\"' \t\n").find(text[at + n]) != std::string_view::npos;
      if (!cut_short) {
        at += n;
        continue;
      }
      text.replace(at, n, kMark);
      names_.insert(name);
      at += std::char_traits<char>::length(kMark);
    }
  }
  // NAME=value, NAME = "value", NAME='value' and "NAME": "value" where NAME looks secret (a
  // command line, an environment dump, a keyword argument or a config line in some other
  // string or a source file).
  for (size_t i = 0; i < text.size(); ++i) {
    size_t value_at = std::string::npos;
    size_t name_end = i;
    char quote = 0;
    if (text[i] == '=') {
      // Not a comparison (==, !=, <=, >=) or an augmented assignment's operator.
      if ((i + 1 < text.size() && text[i + 1] == '=') ||
          (i > 0 && std::string_view("=!<>+-*/%&|^:").find(text[i - 1]) != std::string_view::npos))
        continue;
      value_at = i + 1;
      while (name_end > 0 && text[name_end - 1] == ' ') --name_end;  // NAME = value
      while (value_at < text.size() && text[value_at] == ' ') ++value_at;
      if (value_at < text.size() && (text[value_at] == '"' || text[value_at] == '\'')) {
        quote = text[value_at];
        ++value_at;
      }
    } else if (text.compare(i, 4, "\": \"") == 0 || text.compare(i, 3, "\":\"") == 0) {
      value_at = i + (text[i + 2] == ' ' ? 4 : 3);
      quote = '"';
    } else if (text[i] == ',') {
      // "NAME", "value": os.environ.setdefault("NAME", "value"), os.putenv, a settings tuple.
      while (name_end > 0 && text[name_end - 1] == ' ') --name_end;
      value_at = i + 1;
      while (value_at < text.size() && text[value_at] == ' ') ++value_at;
      if (value_at >= text.size() || (text[value_at] != '"' && text[value_at] != '\'')) continue;
      quote = text[value_at];
      ++value_at;
    } else {
      continue;
    }
    // A quoted name: os.environ["NAME"] = "value", or "NAME", "value".
    std::string quoted_name;
    {
      size_t end = name_end;
      if (text[i] == '=' && end > 0 && text[end - 1] == ']') --end;
      if (end >= 2 && (text[end - 1] == '"' || text[end - 1] == '\'') && (text[i] != '=' || end < name_end)) {
        const size_t open = text.rfind(text[end - 1], end - 2);
        if (open != std::string::npos && open + 1 < end - 1)
          quoted_name = text.substr(open + 1, end - 2 - open);
      }
    }
    // A quoted name pairs with a quoted value only (not `os.environ["NAME"] = value_of(...)`);
    // a comma pairs nothing else, and only a variable's name (not `"secret.py", "--lr"`, two
    // words of a command line).
    if (quoted_name.empty() ? text[i] == ',' : !quote) continue;
    if (text[i] == ',' && !std::all_of(quoted_name.begin(), quoted_name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        }))
      continue;
    size_t name_start = name_end;
    while (name_start > 0 && name_char(text[name_start - 1])) --name_start;
    if (name_start == name_end && quoted_name.empty()) continue;
    std::string name = quoted_name.empty() ? text.substr(name_start, name_end - name_start) : quoted_name;
    if (text[i] == '=' && !looks_like_secret_name(name)) {
      // An annotated assignment, `api_key: str = "..."` (a dataclass field): the name is
      // before the colon.
      size_t colon = name_start;
      while (colon > 0 && text[colon - 1] == ' ') --colon;
      if (colon > 0 && text[colon - 1] == ':') {
        size_t end = colon - 1;
        while (end > 0 && text[end - 1] == ' ') --end;
        size_t start = end;
        while (start > 0 && name_char(text[start - 1])) --start;
        if (start < end) name = text.substr(start, end - start);
      }
    }
    if (!looks_like_secret_name(name)) continue;
    size_t value_end = value_at;
    while (value_end < text.size()) {
      char c = text[value_end];
      if (quote ? (c == quote && text[value_end - 1] != '\\') || c == '\n'
                : (std::isspace(static_cast<unsigned char>(c)) || c == '"' || c == '\'' ||
                   c == '&' || c == ';' || c == ',' || c == ')' || c == ']' || c == '}')) {
        break;
      }
      ++value_end;
    }
    if (value_end == value_at) continue;
    // Redacted already (`--api-key=[REDACTED]` in a command line redacted word by word).
    if (text.compare(value_at, std::char_traits<char>::length(kMark), kMark) == 0) continue;
    // An unquoted expression (`token = make_token()`, `key=args.key`) names no secret: only a
    // quoted value, or an unquoted one in a command line or environment text (no space
    // before the =).
    if (!quote && name_end != i) continue;
    // A call's keyword argument whose value is a name (`enc(h, src_key_padding_mask=pad)`,
    // `attn(q, key=k)`): code, not a literal.
    if (!quote && code_argument(text, name_start, value_at, value_end)) continue;
    // A keyword argument's default or a flag (`token=None)`): no secret, and the source stays
    // readable.
    if (!quote) {
      const std::string_view literal(text.data() + value_at, value_end - value_at);
      if (literal == "None" || literal == "True" || literal == "False" || literal == "null") continue;
    }
    text.replace(value_at, value_end - value_at, kMark);
    names_.insert(name);
    i = value_at + std::char_traits<char>::length(kMark) - 1;
  }
  // A URL's password, whatever names it: scheme://user:PASSWORD@host.
  for (size_t at = text.find("://"); at != std::string::npos; at = text.find("://", at + 3)) {
    const size_t user = at + 3;
    size_t end = user;
    while (end < text.size() && std::string_view("/@ \t\n\"'").find(text[end]) == std::string_view::npos) ++end;
    if (end >= text.size() || text[end] != '@') continue;
    const size_t colon = text.find(':', user);
    if (colon == std::string::npos || colon >= end || colon + 1 == end) continue;
    if (text.compare(colon + 1, std::char_traits<char>::length(kMark), kMark) == 0) continue;
    text.replace(colon + 1, end - colon - 1, kMark);
    names_.insert("a URL's password");
  }
  if (redact_paths_) {
    if (!home_.empty()) replace_all(&text, home_, "~");
    if (user_.size() >= 2) replace_word(&text, user_, "USER");
  }
  return text;
}

nlohmann::json Redactor::apply_json(const nlohmann::json& doc) const {
  if (doc.is_string()) return apply(std::string_view(doc.get_ref<const std::string&>()));
  if (doc.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : doc) out.push_back(apply_json(v));
    return out;
  }
  if (doc.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : doc.items()) out[apply(std::string_view(k))] = apply_json(v);
    return out;
  }
  return doc;
}

void Redactor::remember_manifest(const std::string& run_path) {
  const nlohmann::json manifest = tracer::ReadRunManifest(run_path);
  if (manifest.is_object() && manifest.value("command", nlohmann::json()).is_array())
    (void)meta("cmdline", manifest["command"].dump());
}

nlohmann::json Redactor::apply_report(nlohmann::json data) {
  for (const auto& rj : data["runs"])
    if (rj.value("path", nlohmann::json()).is_string())
      remember_manifest(rj["path"].get<std::string>());
  auto redact_meta = [&](nlohmann::json& meta) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : meta.items()) out[k] = v.is_string() ? nlohmann::json(this->meta(k, v.get<std::string>())) : v;
    meta = std::move(out);
  };
  for (auto& rj : data["runs"]) {
    redact_meta(rj["meta"]);
    for (auto& pj : rj["processes"]) redact_meta(pj["meta"]);
  }
  return apply_json(data);
}

}  // namespace tdbg::report
