// Source lines of native frames, read from the binary's debug info with binutils' addr2line at
// read time: one `addr2line` run per binary and database (every offset of that binary's frames
// at once), checked against the build-id the recorder kept, with a time limit.
#include "tlparse/diff/native_lines.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "base/cpp_names.h"
#include "base/elf_identity.h"

extern char** environ;

namespace tdbg::diff {
namespace {

// How long one `addr2line` run may take before it is killed and the frames are shown without
// lines: a binary with huge debug info takes seconds, a hang must not block `tdbg`.
constexpr int kAddr2lineTimeoutMs = 30000;
// Addresses per run: far below the kernel's limit on the size of a command line.
constexpr size_t kAddressesPerRun = 4096;
// Output read at most (a few hundred bytes per address).
constexpr size_t kMaxOutput = size_t{256} << 20;

bool all_hex(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos;
}

std::optional<uint64_t> parse_hex(std::string_view s) {
  if (!all_hex(s) || s.size() > 16) return std::nullopt;
  return std::strtoull(std::string(s).c_str(), nullptr, 16);
}

// "file:line", "file:line (discriminator 2)", "file:?", "??:0".
NativeLine parse_location(std::string_view text, std::string function) {
  NativeLine l;
  l.function = std::move(function);
  const size_t discriminator = text.find(" (discriminator ");
  if (discriminator != std::string_view::npos) text = text.substr(0, discriminator);
  const size_t colon = text.rfind(':');
  l.file = std::string(text.substr(0, colon));  // all of it without a colon
  if (colon != std::string_view::npos) {
    const std::string_view number = text.substr(colon + 1);
    if (!number.empty() && number.size() < 10 &&
        number.find_first_not_of("0123456789") == std::string_view::npos)
      l.line = std::strtoll(std::string(number).c_str(), nullptr, 10);
  }
  if (l.file.empty()) l.file = "??";
  return l;
}

// Whether an inlined function's code is torch's or the C++ library's rather than the program's:
// by its name, or by its file, since addr2line names inlined functions as the debug info does,
// often without their namespaces (`_Construct<Net>`, `forward`).
bool library_code(const NativeLine& l) {
  if (l.function != "??" && in_library_namespace(l.function)) return true;
  if (l.file.rfind("/usr/include/", 0) == 0) return true;
  for (const char* dir : {"/include/c++/", "/include/ATen/", "/include/c10/", "/include/torch/",
                          "/include/caffe2/", "/include/pybind11/"})
    if (l.file.find(dir) != std::string::npos) return true;
  return false;
}

// The frame's location among addr2line's pairs for its address; nullopt when none has a line.
std::optional<NativeSource> source_of(std::vector<NativeLine> pairs) {
  const NativeLine* chosen = nullptr;
  for (const NativeLine& l : pairs) {
    if (l.known() && !library_code(l)) {
      chosen = &l;
      break;
    }
  }
  for (auto it = pairs.rbegin(); chosen == nullptr && it != pairs.rend(); ++it)
    if (it->known()) chosen = &*it;
  if (chosen == nullptr) return std::nullopt;
  NativeSource s;
  s.line = *chosen;
  s.inlined = std::move(pairs);
  return s;
}

// The executable `name` in a directory of $PATH, or "".
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

// Runs `tool -C -f -i -a -e BINARY ADDRESS...` (no shell) and returns what it printed, or an
// error when it cannot be started, fails, or outlives the time limit (then it is killed).
StatusOr<std::string> run_addr2line(const std::string& tool, const std::string& binary,
                                    const std::vector<uint64_t>& addresses) {
  std::vector<std::string> args = {tool, "-C", "-f", "-i", "-a", "-e", binary};
  for (uint64_t a : addresses) {
    char text[24];
    std::snprintf(text, sizeof(text), "0x%" PRIx64, a);
    args.push_back(text);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Status::Error(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return Status::Error(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  // In a process group of its own, so that a timeout kills whatever it started too.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, tool.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err[1]);
  if (spawned != 0) {
    close(out[0]);
    close(err[0]);
    return Status::Error(tool + ": " + std::strerror(spawned));
  }
  std::string output, errors;
  bool timed_out = false, too_long = false;
  const int64_t deadline = now_ms() + kAddr2lineTimeoutMs;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    const int64_t left = deadline - now_ms();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    const int n = poll(fds, 2, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      char buf[65536];
      const ssize_t got = read(fds[k].fd, buf, sizeof(buf));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
        continue;
      }
      (k == 0 ? output : errors).append(buf, static_cast<size_t>(got));
      if (output.size() + errors.size() > kMaxOutput) too_long = true;
    }
    if (too_long) break;
  }
  for (pollfd& f : fds)
    if (f.fd >= 0) close(f.fd);
  if (timed_out || too_long) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return Status::Error("addr2line did not answer within " + std::to_string(kAddr2lineTimeoutMs / 1000) + " s");
  if (too_long) return Status::Error("addr2line printed more than " + std::to_string(kMaxOutput >> 20) + " MiB");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string why = errors.substr(0, errors.find('\n'));
    if (why.empty())
      why = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                              : "killed by signal " + std::to_string(WTERMSIG(status));
    return Status::Error(why);
  }
  return output;
}

// Lines of one binary (one build of it), by offset from its load address; nullopt where
// addr2line knows no line.
struct BinaryLines {
  std::unordered_map<uint64_t, std::optional<NativeSource>> by_offset;
};

// A binary as the frames of one database see it.
struct DatabaseBinary {
  BinaryLines* lines = nullptr;  // null: its frames keep no lines
  std::string build;             // binary and build-id, the key of `lines`
  uint64_t load_address = 0;
  bool changed = false;          // the file there now is another build than the one that ran
  std::string unavailable;       // why addr2line gave no lines: not found, or it failed
};

struct Database {
  bool frames_read = false;
  std::map<std::string, std::vector<uint64_t>> offsets;  // of each binary's native frames
  std::map<std::string, DatabaseBinary> binaries;
  std::vector<std::string> notes;
};

class NativeLines {
 public:
  std::optional<NativeSource> source(const tracer::Reader& reader, const std::string& binary,
                                     uint64_t offset) {
    std::lock_guard<std::mutex> lock(mu_);
    Database& db = databases_[reader.path()];
    if (!db.frames_read) read_frames(reader, db);
    auto [it, added] = db.binaries.try_emplace(binary);
    DatabaseBinary& b = it->second;
    if (added) open_binary(reader, binary, db, b);
    if (b.lines == nullptr) return std::nullopt;
    auto found = b.lines->by_offset.find(offset);
    if (found == b.lines->by_offset.end()) {  // a frame the first query did not see
      look_up(binary, {offset}, db, b);
      found = b.lines->by_offset.find(offset);
      if (found == b.lines->by_offset.end()) return std::nullopt;
    }
    return found->second;
  }

  // Whether `binary`, as `source` found it for `reader`, is another build than the one that
  // ran (its lines would be another program's).
  bool changed(const tracer::Reader& reader, const std::string& binary) {
    std::lock_guard<std::mutex> lock(mu_);
    const DatabaseBinary* b = find(reader, binary);
    return b != nullptr && b->changed;
  }

  std::string unavailable(const tracer::Reader& reader, const std::string& binary) {
    std::lock_guard<std::mutex> lock(mu_);
    const DatabaseBinary* b = find(reader, binary);
    return b != nullptr ? b->unavailable : std::string();
  }

  std::vector<std::string> notes(const tracer::Reader& reader) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = databases_.find(reader.path());
    return it == databases_.end() ? std::vector<std::string>() : it->second.notes;
  }

 private:
  const DatabaseBinary* find(const tracer::Reader& reader, const std::string& binary) const {
    auto db = databases_.find(reader.path());
    if (db == databases_.end()) return nullptr;
    auto b = db->second.binaries.find(binary);
    return b == db->second.binaries.end() ? nullptr : &b->second;
  }

  // Every native frame's offset in the database, by binary: one query, and one addr2line run
  // per binary later.
  static void read_frames(const tracer::Reader& reader, Database& db) {
    db.frames_read = true;
    std::map<std::string, std::set<uint64_t>> offsets;
    (void)reader.query(
        "SELECT DISTINCT file.text, function.text FROM frames "
        "JOIN strings AS file ON file.id = frames.file "
        "JOIN strings AS function ON function.id = frames.function "
        "WHERE frames.line = 0 AND function.text LIKE '% +0x%'",
        [&](const std::vector<std::string>& row) {
          if (row.size() == 2)
            if (auto offset = native_frame_offset(0, row[1])) offsets[row[0]].insert(*offset);
          return true;
        });
    for (auto& [binary, set] : offsets) db.offsets[binary].assign(set.begin(), set.end());
  }

  void open_binary(const tracer::Reader& reader, const std::string& binary, Database& db,
                   DatabaseBinary& b) {
    // Recorded before tdbg kept build-ids, or a binary without one: nothing says the file
    // there now is the one that ran.
    const std::string recorded = reader.meta("build_id:" + binary);
    if (recorded.empty()) return;
    if (addr2line_.empty()) addr2line_ = find_on_path("addr2line");
    if (addr2line_.empty()) {  // the addr2line hint stays, with why
      b.unavailable = "addr2line (binutils) is not on PATH";
      return;
    }
    auto known = identities_.find(binary);
    if (known == identities_.end()) known = identities_.emplace(binary, read_elf_identity_file(binary)).first;
    const StatusOr<ElfIdentity>& now = known->second;
    if (!now.ok()) {
      db.notes.push_back(now.status().message() + ": C++ frames shown without lines");
      return;
    }
    if (now->build_id != recorded) {
      b.changed = true;
      db.notes.push_back(binary + " changed since the recording: C++ frames shown without lines");
      return;
    }
    b.build = binary + '\n' + recorded;
    if (auto failed = failures_.find(b.build); failed != failures_.end()) {
      db.notes.push_back(failed->second);  // not run again: a hang would cost its time again
      b.unavailable = "addr2line failed on it (see the note)";
      return;
    }
    b.lines = &lines_[b.build];
    b.load_address = now->load_address;
    std::vector<uint64_t> wanted;
    for (uint64_t offset : db.offsets[binary])
      if (b.lines->by_offset.find(offset) == b.lines->by_offset.end()) wanted.push_back(offset);
    look_up(binary, wanted, db, b);
  }

  // Runs addr2line for `offsets` of `binary` and keeps what it says (nothing for an offset it
  // does not answer, so that it is not asked again).
  void look_up(const std::string& binary, const std::vector<uint64_t>& offsets, Database& db,
               DatabaseBinary& b) {
    for (size_t from = 0; from < offsets.size() && b.lines != nullptr; from += kAddressesPerRun) {
      const size_t to = std::min(offsets.size(), from + kAddressesPerRun);
      std::vector<uint64_t> addresses;
      for (size_t k = from; k < to; ++k) {
        addresses.push_back(offsets[k] + b.load_address);
        b.lines->by_offset.emplace(offsets[k], std::nullopt);
      }
      StatusOr<std::string> output = run_addr2line(addr2line_, binary, addresses);
      if (!output.ok()) {
        const std::string note = addr2line_ + " -e " + binary + ": " + output.status().message() +
                                 ": C++ frames shown without lines";
        db.notes.push_back(note);
        failures_.emplace(b.build, note);
        b.lines = nullptr;
        b.unavailable = "addr2line failed on it (see the note)";
        return;
      }
      for (auto& [address, pairs] : parse_addr2line(*output)) {
        if (address < b.load_address) continue;
        auto slot = b.lines->by_offset.find(address - b.load_address);
        if (slot != b.lines->by_offset.end() && !slot->second) slot->second = source_of(std::move(pairs));
      }
    }
  }

  std::mutex mu_;
  std::string addr2line_;
  std::map<std::string, StatusOr<ElfIdentity>> identities_;  // of the files now at each path
  std::unordered_map<std::string, BinaryLines> lines_;        // by binary and build-id
  std::unordered_map<std::string, std::string> failures_;     // addr2line's, by the same key
  std::unordered_map<std::string, Database> databases_;       // by database path
};

NativeLines& native_lines() {
  static NativeLines* lines = new NativeLines();  // never destroyed: safe at exit
  return *lines;
}

}  // namespace

std::vector<std::pair<uint64_t, std::vector<NativeLine>>> parse_addr2line(std::string_view output) {
  std::vector<std::pair<uint64_t, std::vector<NativeLine>>> groups;
  std::optional<std::string> function;  // a function line waiting for its location line
  size_t start = 0;
  while (start < output.size()) {
    size_t end = output.find('\n', start);
    if (end == std::string_view::npos) end = output.size();
    std::string_view text = output.substr(start, end - start);
    start = end + 1;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    // An address line starts a group: "0x0000000000004b86". No function name starts so: a C++
    // name starts with a letter, '_', '(' or '~', and "??" stands for an unknown one.
    if (text.size() > 2 && text[0] == '0' && text[1] == 'x' && all_hex(text.substr(2))) {
      if (auto address = parse_hex(text.substr(2))) {
        groups.emplace_back(*address, std::vector<NativeLine>());
        function.reset();
        continue;
      }
    }
    if (groups.empty()) continue;
    if (!function) {
      function = std::string(text);
    } else {
      groups.back().second.push_back(parse_location(text, std::move(*function)));
      function.reset();
    }
  }
  return groups;
}

std::optional<uint64_t> native_frame_offset(int64_t line, const std::string& function) {
  if (line != 0) return std::nullopt;
  const size_t at = function.rfind(" +0x");
  if (at == std::string::npos) return std::nullopt;
  return parse_hex(std::string_view(function).substr(at + 4));
}

std::string_view without_parameters(std::string_view name) {
  if (name.size() > 6 && name.substr(name.size() - 6) == " const") name.remove_suffix(6);
  if (name.empty() || name.back() != ')') return name;
  int depth = 0;
  for (size_t i = name.size(); i-- > 0;) {
    if (name[i] == ')') ++depth;
    if (name[i] == '(' && --depth == 0) {
      std::string_view rest = name.substr(0, i);
      return rest.empty() || (rest.size() >= 8 && rest.substr(rest.size() - 8) == "operator") ? name
                                                                                                : rest;
    }
  }
  return name;
}

std::optional<NativeSource> native_source(const tracer::Reader& reader, const std::string& binary,
                                          int64_t line, const std::string& function) {
  const std::optional<uint64_t> offset = native_frame_offset(line, function);
  if (!offset || binary.empty() || binary[0] != '/') return std::nullopt;
  std::optional<NativeSource> found = native_lines().source(reader, binary, *offset);
  // The debug info names a lambda's body "operator()" and may name a method without its
  // class: the symbol's name, recorded, says whose it is.
  if (found && !found->line.function.empty()) {
    const std::string symbol = function.substr(0, function.rfind(" +0x"));
    const std::string_view qualified = without_parameters(symbol);
    const std::string tail = "::" + found->line.function;
    if (qualified.size() > tail.size() && qualified.substr(qualified.size() - tail.size()) == tail)
      found->line.function = symbol;
    else if (found->line.function == "operator()" && !qualified.empty() && qualified != "?")
      found->line.function = "operator() inlined in " + std::string(qualified);
  }
  return found;
}

nlohmann::json frame_record_json(const tracer::Reader& reader, const std::string& file,
                                 int64_t line, const std::string& function) {
  if (auto native = native_source(reader, file, line, function)) {
    nlohmann::json j = {{"file", native->line.file},
                        {"line", native->line.line},
                        {"function", native->line.function},
                        {"binary", file},
                        {"offset", function.substr(function.rfind(" +0x") + 2)}};
    if (native->inlined.size() > 1) {
      nlohmann::json chain = nlohmann::json::array();
      for (const NativeLine& l : native->inlined) {
        nlohmann::json entry = {{"file", l.file}, {"line", l.line}, {"function", l.function}};
        if (library_code(l)) entry["library"] = true;  // torch's or std's, not the program's
        chain.push_back(std::move(entry));
      }
      j["inlined"] = std::move(chain);
    }
    return j;
  }
  nlohmann::json j = {{"file", file}, {"line", line}, {"function", function}};
  // No addr2line hint for it: the binary there now would give another build's lines.
  if (native_frame_offset(line, function) && native_lines().changed(reader, file)) j["binary_changed"] = true;
  // Nor "no debug info" where addr2line was not there to ask, or failed.
  if (native_frame_offset(line, function))
    if (std::string why = native_lines().unavailable(reader, file); !why.empty())
      j["lines_unavailable"] = why;
  return j;
}

std::vector<std::string> native_line_notes(const tracer::Reader& reader) {
  return native_lines().notes(reader);
}

}  // namespace tdbg::diff
