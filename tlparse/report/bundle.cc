// Writes and reads bug-report bundles. Databases are rewritten through tracer::Writer (not
// copied byte for byte), so every string passes the redactor and no deleted page of the
// original file can carry a secret along.
#include "tlparse/report/bundle.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <ftw.h>
#include <locale.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <unordered_map>

#include "base/command_line.h"
#include "base/json_text.h"
#include "tlparse/diff/diff.h"
#include "tlparse/diff/ops.h"
#include "tlparse/report/redact.h"
#include "tlparse/report/report.h"
#include "tracer/writer.h"

namespace tdbg::report {
namespace {

// File names are the file system's bytes, UTF-8 in practice. libarchive converts names through
// the thread's locale, and the C locale (a program that never calls setlocale, as tdbg) cannot
// convert "ñ": the bundle was refused. Archive work runs under C.UTF-8 on this thread.
class Utf8Locale {
 public:
  Utf8Locale() : locale_(newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0))) {
    if (locale_ != static_cast<locale_t>(0)) previous_ = uselocale(locale_);
  }
  ~Utf8Locale() {
    if (locale_ == static_cast<locale_t>(0)) return;
    uselocale(previous_);
    freelocale(locale_);
  }
  Utf8Locale(const Utf8Locale&) = delete;
  Utf8Locale& operator=(const Utf8Locale&) = delete;

 private:
  locale_t locale_;
  locale_t previous_ = static_cast<locale_t>(0);
};

using nlohmann::json;

std::string errno_text() { return std::strerror(errno); }

std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string read_small_file(const std::string& path, size_t limit = 1 << 16) {
  std::ifstream in(path, std::ios::binary);
  std::string text(limit, '\0');
  in.read(text.data(), static_cast<std::streamsize>(limit));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// A temporary folder removed (with its contents) when it goes out of scope.
class TempDir {
 public:
  static StatusOr<std::unique_ptr<TempDir>> Create(const std::string& parent) {
    std::string tmpl = parent + "/tdbg-bundle-XXXXXX";
    if (!mkdtemp(tmpl.data())) return Status::Error(parent + ": cannot create a temporary folder: " + errno_text());
    return std::unique_ptr<TempDir>(new TempDir(tmpl));
  }
  ~TempDir() {
    nftw(path_.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); },
         16, FTW_DEPTH | FTW_PHYS);
  }
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Rewrites one process database into `dst`, keeping ops with seq in [from, to) and passing
// every string through `redactor`. Adds the ops kept to `kept`; `last_seq` gets the last seq
// kept (-1 for none).
// `live_at`: when the process was still recording (its database read as it was then), else "".
Status copy_process(const tracer::Reader& r, const std::string& dst, int64_t from, int64_t to,
                    Redactor& redactor, const std::string& live_at, int64_t* kept, int64_t* last_seq) {
  TDBG_ASSIGN_OR_RETURN(auto w, tracer::Writer::Create(dst));
  std::unordered_map<tracer::StringId, tracer::StringId> strings{{0, 0}};
  auto S = [&](tracer::StringId id) -> tracer::StringId {
    auto it = strings.find(id);
    if (it != strings.end()) return it->second;
    tracer::StringId fresh = w->intern(redactor.apply(r.string(id)));
    strings.emplace(id, fresh);
    return fresh;
  };
  std::unordered_map<tracer::FrameId, tracer::FrameId> frames{{0, 0}};
  std::function<tracer::FrameId(tracer::FrameId)> F = [&](tracer::FrameId id) -> tracer::FrameId {
    auto it = frames.find(id);
    if (it != frames.end()) return it->second;
    auto f = r.frame(id);
    tracer::FrameId fresh = 0;
    if (f && f->parent != id) fresh = w->intern_frame(F(f->parent), S(f->file), f->line, S(f->function));
    frames.emplace(id, fresh);
    return fresh;
  };
  for (const auto& [key, value] : r.all_meta()) {
    // The writer owns these (format marker, the time base its `start` column uses, and the
    // check of the names it writes).
    if (key == "format" || key == "time_base_ns" || key == "names_check") continue;
    if (key == "in_flight") {
      // Ids into the strings and frames tables, which this copy numbers afresh.
      json threads = json::parse(value, nullptr, /*allow_exceptions=*/false);
      if (!threads.is_array()) continue;
      for (json& t : threads) {
        if (!t.is_object()) continue;
        if (t.contains("names") && t["names"].is_array())
          for (json& name : t["names"])
            if (name.is_number_unsigned()) name = S(name.get<tracer::StringId>());
        if (t.value("module", json()).is_number_unsigned()) t["module"] = S(t["module"].get<tracer::StringId>());
        for (const char* frame : {"user_frame", "stack"})
          if (t.value(frame, json()).is_number_unsigned()) t[frame] = F(t[frame].get<tracer::FrameId>());
      }
      w->set_meta(key, json_text(threads));
      continue;
    }
    // (A key may name a path too: `source:/home/USER/train.py`.)
    w->set_meta(redactor.apply(key), redactor.meta(key, value));
  }
  // With the last op the process recorded: whether the window left out ops after it.
  json window = {{"from_seq", from}, {"to_seq", to}};
  if (auto held = r.held(); held.ok() && held->any) window["recorded_last_seq"] = held->last_seq;
  w->set_meta("bundle_window", json_text(window));
  // Not "killed or crashed" to whoever opens the bundle: it had not ended yet.
  if (!live_at.empty()) w->set_meta("bundled_while_recording", live_at);
  for (auto t : r.threads()) {
    t.name = redactor.apply(t.name);
    w->add_thread(t);
  }
  int64_t n = 0;
  *last_seq = -1;
  Status scanned = r.scan_ops(std::nullopt, from, to, true, [&](const tracer::OpRecord& op) {
    tracer::OpRecord c = op;
    c.name = S(op.name);
    c.module = S(op.module);
    c.stack = F(op.stack);
    c.user_frame = F(op.user_frame);
    for (auto& t : c.tensors) {
      t.shape = S(t.shape);
      t.device = S(t.device);
      t.reason = S(t.reason);
    }
    for (auto& a : c.args) {
      a.name = S(a.name);
      a.value = S(a.value);
    }
    *last_seq = std::max(*last_seq, op.seq);
    w->append_op(std::move(c));
    ++n;
    return true;
  });
  if (!scanned.ok()) {
    (void)w->close();
    return scanned;
  }
  for (auto g : r.regions()) {
    bool touches = g.start_seq < to && (g.end_seq == tracer::kNoSeq || g.end_seq >= from);
    if (!touches) continue;
    g.name = S(g.name);
    w->append_region(g);
  }
  for (auto m : r.modules()) {
    m.kind = S(m.kind);
    m.name = S(m.name);
    w->append_module(m);
  }
  for (auto k : r.kernels()) {
    if (k.op != tracer::kNoSeq && (k.op < from || k.op >= to)) continue;
    k.name = S(k.name);
    k.grid = S(k.grid);
    k.block = S(k.block);
    w->append_kernel(k);
  }
  TDBG_RETURN_IF_ERROR(w->close());
  *kept += n;
  return Status::Ok();
}

// Whether a stack's file is the user's (worth a snapshot), not Python's or a library's.
bool user_source(const std::string& path) {
  if (path.empty() || path[0] != '/' || diff::python_library_path(path)) return false;
  // The system's and libraries' C++ headers (torch's templates, libstdc++), which a C++
  // program's inlined frames point into.
  static const char* const kHeaderRoots[] = {"/usr/include/", "/usr/local/include/", "/usr/lib/gcc/"};
  for (const char* p : kHeaderRoots) {
    if (path.rfind(p, 0) == 0) return false;
  }
  if (path.find("/include/torch/") != std::string::npos ||
      path.find("/include/ATen/") != std::string::npos ||
      path.find("/include/c10/") != std::string::npos)
    return false;
  return path.find("/../") == std::string::npos && path.find("/./") == std::string::npos;
}

void collect_files(const json& j, std::set<std::string>* files) {
  if (j.is_object()) {
    if (j.contains("file") && j["file"].is_string()) files->insert(j["file"].get<std::string>());
    for (const auto& [k, v] : j.items()) {
      if (v.is_structured()) collect_files(v, files);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) collect_files(v, files);
  }
}

// Reads a regular file named by a stack, without following a final symlink, up to `limit`.
bool snapshot(const std::string& path, int64_t limit, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= limit;
  if (ok) {
    out->resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < out->size()) {
      ssize_t got = ::read(fd, out->data() + done, out->size() - done);
      if (got <= 0) break;
      done += static_cast<size_t>(got);
    }
    out->resize(done);
  }
  ::close(fd);
  return ok;
}

std::string iso_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

json machine_facts() {
  json m;
  struct utsname u;
  if (uname(&u) == 0) {
    m["uname"] = {{"sysname", u.sysname}, {"release", u.release}, {"version", u.version},
                  {"machine", u.machine}};
  }
  std::istringstream os(read_small_file("/etc/os-release"));
  for (std::string line; std::getline(os, line);) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      std::string v = line.substr(12);
      v.erase(std::remove(v.begin(), v.end(), '"'), v.end());
      m["os"] = v;
    }
  }
  std::string driver = read_small_file("/proc/driver/nvidia/version", 4096);
  m["nvidia_driver"] = driver.empty() ? json(nullptr) : json(driver.substr(0, driver.find('\n')));
  std::istringstream cpu(read_small_file("/proc/cpuinfo", 1 << 16));
  for (std::string line; std::getline(cpu, line);) {
    if (line.rfind("model name", 0) == 0) {
      m["cpu_model"] = line.substr(line.find(':') + 2);
      break;
    }
  }
  m["cpu_count"] = sysconf(_SC_NPROCESSORS_ONLN);
  return m;
}

// The facts people ask for first, from a run's meta (already redacted).
const char* const kFactKeys[] = {"torch_version", "python_version", "cuda_version", "cudnn_version",
                                 "cuda_available", "gpu_name", "gpu", "driver_version", "cpu_model",
                                 "cpu_count", "num_threads", "num_interop_threads",
                                 "deterministic_algorithms", "deterministic_algorithms_warn_only",
                                 "cudnn_deterministic", "cudnn_benchmark", "seed", "host", "pid",
                                 "rank", "world_size", "hash_mode", "recorder"};

// `name` with each byte that is not part of valid UTF-8 written as "%XX": a Latin-1 source
// file's path (which Linux allows) cannot be stored as a pax name under any UTF-8 locale.
std::string utf8_name(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size();) {
    const auto c = static_cast<unsigned char>(name[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool valid = n > 0 && i + n <= name.size() && !(n == 2 && c < 0xc2);
    for (size_t k = 1; valid && k < n; ++k)
      valid = (static_cast<unsigned char>(name[i + k]) & 0xc0) == 0x80;
    if (valid) {
      out.append(name, i, n);
      i += n;
    } else {
      char escaped[4];
      std::snprintf(escaped, sizeof(escaped), "%%%02X", c);
      out += escaped;
      ++i;
    }
  }
  return out;
}

class ArchiveWriter {
 public:
  ArchiveWriter() : a_(archive_write_new()) {}
  ~ArchiveWriter() {
    if (a_) archive_write_free(a_);
  }
  Status open(const std::string& path) {
    if (archive_write_add_filter_gzip(a_) != ARCHIVE_OK ||
        archive_write_set_format_pax_restricted(a_) != ARCHIVE_OK ||
        archive_write_open_filename(a_, path.c_str()) != ARCHIVE_OK) {
      return error(path);
    }
    return Status::Ok();
  }
  Status add(const std::string& name, const std::string& data) {
    TDBG_RETURN_IF_ERROR(header(name, static_cast<int64_t>(data.size())));
    if (!data.empty() && archive_write_data(a_, data.data(), data.size()) < 0) return error(name);
    return Status::Ok();
  }
  Status add_file(const std::string& name, const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return Status::Error(path + ": " + errno_text());
    TDBG_RETURN_IF_ERROR(header(name, st.st_size));
    std::ifstream in(path, std::ios::binary);
    std::vector<char> buf(1 << 20);
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      if (in.gcount() > 0 && archive_write_data(a_, buf.data(), static_cast<size_t>(in.gcount())) < 0) {
        return error(name);
      }
    }
    return Status::Ok();
  }
  Status close(const std::string& path) {
    if (archive_write_close(a_) != ARCHIVE_OK) return error(path);
    return Status::Ok();
  }

 private:
  Status header(const std::string& name, int64_t size) {
    std::unique_ptr<archive_entry, void (*)(archive_entry*)> e(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(e.get(), utf8_name(name).c_str());
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), 0644);
    archive_entry_set_size(e.get(), size);
    archive_entry_set_mtime(e.get(), std::time(nullptr), 0);
    if (archive_write_header(a_, e.get()) != ARCHIVE_OK) return error(name);
    return Status::Ok();
  }
  Status error(const std::string& what) {
    const char* msg = archive_error_string(a_);
    // libarchive's "Failed to open 'x'" leaves out why: the system's reason, where it has one.
    const int err = archive_errno(a_);
    std::string text = msg ? msg : "archive error";
    if (err > 0 && text.find(std::strerror(err)) == std::string::npos) text += ": " + std::string(std::strerror(err));
    return Status::Error(what + ": " + text);
  }
  struct archive* a_;
};

std::string meta_summary_line(const json& meta, const char* key) {
  return meta.contains(key) ? meta[key].get<std::string>() : "";
}

std::string command_line_text(const std::string& cmdline_json) {
  auto doc = json::parse(cmdline_json, nullptr, false);
  if (!doc.is_array()) return cmdline_json;
  std::string out;
  for (const auto& a : doc) {
    std::string s = a.is_string() ? a.get<std::string>() : json_text(a);
    bool plain = !s.empty() && s.find_first_of(" \t'\"$\\`*?;&|<>()") == std::string::npos;
    if (!out.empty()) out += ' ';
    if (plain) {
      out += s;
    } else {
      out += '\'';
      for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

// One word for a shell command line: `text` quoted where it needs it.
std::string shell_word(const std::string& text) {
  return command_line_text(json_text(json::array({text})));
}

// `j[key]` as text: strings as they are, other values as JSON, `fallback` when absent or null.
std::string text_of(const json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->is_string() ? it->get<std::string>() : json_text(*it);
}

// "op #S `name` at step N, file:line" for one side of a divergence; of a process (`process_json`)
// that is a DataLoader worker, "in DataLoader worker W" (whose step is always 0), and of one
// the program forked, the step it was forked at, as `tdbg diff` and `tdbg nan` say.
std::string op_text(const json& side, const json& process = json()) {
  const std::string worker = process.is_object() ? text_of(process, "worker", "") : "";
  std::string s = "op #" + text_of(side, "seq", "?") + " `" + text_of(side, "op", "?") + "` " +
                  (worker.empty() ? "at step " + text_of(side, "step", "?") : "in DataLoader worker " + worker);
  if (process.is_object() && process.contains("forked_at_step"))
    s += " (forked at step " + text_of(process, "forked_at_step", "?") + ")";
  // Op numbers count per process: which one (rank, or the rank whose worker it is).
  const std::string rank = process.is_object() ? text_of(process, "rank", text_of(process, "parent_rank", "")) : "";
  if (!rank.empty()) s += " of rank " + rank;
  auto source = side.find("source");
  if (source != side.end() && source->is_object()) {
    s += ", " + text_of(*source, "file", "?") + ":" + text_of(*source, "line", "?");
  }
  return s;
}

// The README's one-line account of a first divergence. Either side may be missing: ops
// inserted in B have no op in A, ops removed in B none in B, and a process recorded by one
// run only has neither; the engine's `detail` sentence then says what changed.
std::string divergence_text(const json& fd) {
  const json& a = fd.value("a", json());
  const json& b = fd.value("b", json());
  std::string s;
  const json& pa = fd.value("process_a", json());
  const json& pb = fd.value("process_b", json());
  if (a.is_object() && b.is_object()) {
    s = op_text(a, pa);
    // Reached from another line in B (another code path, an edit): said, as the diff says it.
    auto line = [](const json& side) {
      const auto source = side.find("source");
      return source != side.end() && source->is_object()
                 ? text_of(*source, "file", "?") + ":" + text_of(*source, "line", "?")
                 : std::string();
    };
    if (line(b) != line(a) && !line(b).empty()) s += " (in B from " + line(b) + ")";
  } else if (a.is_object()) {
    s = "run A's " + op_text(a, pa) + ", which run B does not have";
  } else if (b.is_object()) {
    s = "run B's " + op_text(b, pb) + ", which run A does not have";
  } else {
    s = "a structural change";
  }
  s += " (cause: " + text_of(fd, "cause", "?");
  std::string detail = text_of(fd, "detail", "");
  if (!detail.empty()) s += " — " + detail;
  // With what the diff's headline adds: whether it changes results, whether it healed.
  s += ")" + diff::headline_verdict(fd);
  // After a structural change (a resumed run's own start, ops inserted), the first value
  // difference, which is often the finding: as `tdbg diff` prints it under the change.
  const json& after = fd.value("value_after_structure", json());
  if (after.is_object() && after.value("a", json()).is_object())
    s += "; first value difference after it: " + op_text(after["a"], pa) + " (cause: " +
         text_of(after, "cause", "?") + " — " + text_of(after, "detail", "") + ")";
  return s + ".";
}

}  // namespace

StatusOr<BundleResult> write_bundle(const std::string& run_a, const std::string& run_b,
                                    const std::string& out, const BundleOptions& options_in) {
  Utf8Locale utf8;
  BundleOptions options = options_in;
  if (options.home.empty() && std::getenv("HOME")) options.home = std::getenv("HOME");
  if (options.user.empty()) {
    if (struct passwd* pw = getpwuid(getuid())) options.user = pw->pw_name;
  }
  if (options.tmp_dir.empty()) options.tmp_dir = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";

  TDBG_ASSIGN_OR_RETURN(tracer::Run a, tracer::Run::Open(run_a));
  std::optional<tracer::Run> b;
  if (!run_b.empty()) {
    TDBG_ASSIGN_OR_RETURN(tracer::Run opened, tracer::Run::Open(run_b));
    b = std::move(opened);
  }
  ReportOptions report_options;
  // Each run's processes' command lines and folders as recorded, for those a phase left out
  // (below): commands.txt still says how the whole run was started.
  struct Started {
    std::string pid, cwd, cmdline;
  };
  auto started = [](const tracer::Run& run) {
    std::vector<Started> out;
    for (const auto& p : run.processes)
      out.push_back({p->meta("pid"), p->meta("cwd"), p->meta("cmdline")});
    return out;
  };
  std::vector<Started> started_a = started(a), started_b;
  if (b) started_b = started(*b);
  if (b) {
    report_options.align_steps = options.align_steps;
    report_options.diff_notes = diff::keep_aligned_phases(a, *b, &report_options.align_steps);
    tracer::PairProcesses(a, *b);  // the same process of the program at each index
  }
  // A process still being recorded is read as it is now, once: the report, the diff and the
  // databases of the bundle then tell of the same ops. Each is said to be still recording.
  const std::string read_at = iso_now();
  std::set<const tracer::Reader*> live;
  for (tracer::Run* run : {&a, b ? &*b : nullptr}) {
    if (!run) continue;
    for (const auto& p : run->processes)
      if (diff::still_recording(*p)) live.insert(p.get());
    TDBG_RETURN_IF_ERROR(run->pin_snapshot());
  }
  TDBG_ASSIGN_OR_RETURN(json data, build_report_data(a, b ? &*b : nullptr, report_options));

  // Learn every secret first, so that each is scrubbed wherever it appears afterwards.
  Redactor redactor(options.redact_paths, options.home, options.user);
  redactor.remember_environment(environ);
  std::vector<const tracer::Run*> runs = {&a};
  if (b) runs.push_back(&*b);
  for (const auto* run : runs) {
    redactor.remember_manifest(run->path);
    for (const auto& p : run->processes) {
      for (const auto& [k, v] : p->all_meta()) (void)redactor.meta(k, v);
    }
  }

  TDBG_ASSIGN_OR_RETURN(auto tmp, TempDir::Create(options.tmp_dir));
  BundleResult result;
  std::string top = base_name(out);
  for (const char* ext : {".tar.gz", ".tgz"}) {
    size_t n = std::strlen(ext);
    if (top.size() > n && top.compare(top.size() - n, n, ext) == 0) top.resize(top.size() - n);
  }
  if (top.empty() || top == "." || top == "..") top = "tdbg-bundle";
  const std::string root = top + "/";

  std::string out_tmp = out + ".partial";
  ArchiveWriter archive;
  // Whatever fails from here leaves no partial file behind.
  struct RemovePartial {
    const std::string& path;
    bool done = false;
    ~RemovePartial() {
      if (!done) std::remove(path.c_str());
    }
  } remove_partial{out_tmp};
  if (Status opened = archive.open(out_tmp); !opened.ok()) {
    // Named as the user gave it, not as the file written aside.
    std::string why = opened.message();
    for (size_t at = why.find(out_tmp); at != std::string::npos; at = why.find(out_tmp, at + out.size()))
      why.replace(at, out_tmp.size(), out);
    return Status::Error(why);
  }
  auto add = [&](const std::string& name, const std::string& text) -> Status {
    result.entries.push_back(root + name);
    return archive.add(root + name, text);
  };

  // Databases: trimmed to a window unless small or --keep-all.
  json trimmed = json::array();
  for (size_t ri = 0; ri < runs.size(); ++ri) {
    const tracer::Run& run = *runs[ri];
    const json& rj = data["runs"][ri];
    std::string label = ri == 0 ? "a" : "b";
    ::mkdir((tmp->path() + "/" + label).c_str(), 0700);
    std::set<std::string> used;
    for (size_t p = 0; p < run.processes.size(); ++p) {
      const tracer::Reader& reader = *run.processes[p];
      int64_t total = reader.op_count();
      result.ops_total += total;
      int64_t from = 0, to = INT64_MAX;
      const bool trim = !options.keep_all && total > options.window_ops;
      if (trim) {
        bool has_center = (data["diff"].is_object() && !data["diff"]["first_divergence"].is_null()) ||
                          std::any_of(data["nonfinite"].begin(), data["nonfinite"].end(), [](const json& n) {
                            return n.is_object() && !n["first_nonfinite"].is_null();
                          });
        if (has_center && rj["process"].get<size_t>() == p) {
          from = std::max<int64_t>(0, rj["window"]["center_seq"].get<int64_t>() - options.window_ops / 2);
        } else {
          // Nothing pointed at: the end of the run (the last op included), where a crash or a
          // blow-up usually is.
          int64_t last = 0;
          TDBG_RETURN_IF_ERROR(reader.scan_ops(std::nullopt, 0, INT64_MAX, false, [&](const tracer::OpRecord& op) {
            last = std::max(last, op.seq);
            return true;
          }));
          from = std::max<int64_t>(0, last + 1 - options.window_ops);
        }
        to = from + options.window_ops;
      }
      std::string name = base_name(reader.path());
      if (name.size() < 7 || name.compare(name.size() - 7, 7, ".sqlite") != 0) name += ".sqlite";
      while (!used.insert(name).second) name = "p" + std::to_string(p) + "-" + name;
      std::string dst = tmp->path() + "/" + label + "/" + name;
      int64_t last_kept = -1;
      const std::string live_at = live.count(&reader) ? read_at : "";
      if (!live_at.empty())
        result.still_recording.push_back("run " + label + "'s " + base_name(reader.path()) + " (pid " +
                                          reader.meta("pid") + ")");
      TDBG_RETURN_IF_ERROR(
          copy_process(reader, dst, from, to, redactor, live_at, &result.ops_kept, &last_kept));
      if (trim) {
        // The window near the end of a run is shorter: list the ops it really kept.
        trimmed.push_back({{"run", label}, {"process", base_name(reader.path())},
                           {"ops_total", total}, {"from_seq", from},
                           {"to_seq", std::max(from, std::min(to - 1, last_kept))}});
      }
      std::string entry = root + "runs/" + label + "/" + name;
      result.entries.push_back(entry);
      TDBG_RETURN_IF_ERROR(archive.add_file(entry, dst));
    }
  }

  // Sources named by the stacks in the report (original paths: the files are read here), and
  // each recorded process's script (a `python3 x.py` that a recorded parent started: its ops
  // may all be outside the report's window).
  std::set<std::string> files;
  collect_files(data, &files);
  for (const auto& rj : data["runs"]) {
    for (const auto& pj : rj["processes"]) {
      const json& meta = pj.value("meta", json::object());
      if (!meta.contains("cmdline") || !meta["cmdline"].is_string()) continue;
      const std::string cwd = meta.value("cwd", std::string());
      for (std::string path : command_line_scripts(meta["cmdline"].get<std::string>())) {
        if (path[0] != '/' && !cwd.empty()) path = cwd + "/" + path;
        files.insert(std::filesystem::path(path).lexically_normal().string());
      }
    }
  }
  json sources = json::array();
  if (options.sources) {
    int64_t total = 0;
    for (const auto& f : files) {
      if (!user_source(f)) continue;
      std::string text;
      if (!snapshot(f, options.max_source_bytes, &text)) continue;
      if (total + static_cast<int64_t>(text.size()) > options.max_sources_total) break;
      total += static_cast<int64_t>(text.size());
      // Edited since it ran (its size or time differs from the recording's): said, since the
      // snapshot is then not the code the stacks point into.
      bool changed = false;
      for (const auto& rj : data["runs"])
        for (const auto& pj : rj["processes"]) {
          const json& meta = pj.value("meta", json::object());
          if (const auto it = meta.find("source:" + f); it != meta.end() && it->is_string())
            changed = changed || diff::source_changed(f, it->get<std::string>());
        }
      std::string shown = redactor.apply(f);
      std::string name = shown;
      if (name.rfind("~", 0) == 0) name = "HOME" + name.substr(1);
      while (!name.empty() && name[0] == '/') name.erase(0, 1);
      if (name.empty() || name.find("..") != std::string::npos) continue;
      TDBG_RETURN_IF_ERROR(add("sources/" + name, redactor.apply(text)));
      sources.push_back({{"path", shown}, {"entry", "sources/" + name}, {"bytes", text.size()}});
      if (changed) sources.back()["changed_since_recording"] = true;
    }
  }

  // The report and the machine-readable findings, redacted as a whole.
  data = redactor.apply_report(std::move(data));
  data["bundle"] = {{"sources", sources}, {"trimmed", trimmed}};
  TDBG_RETURN_IF_ERROR(add("report/index.html", render_html(data)));
  if (!data["diff"].is_null()) TDBG_RETURN_IF_ERROR(add("diff.json", json_text(data["diff"], 2) + "\n"));
  TDBG_RETURN_IF_ERROR(add("nonfinite.json", json_text(data["nonfinite"], 2) + "\n"));

  // Facts and command lines.
  json facts;
  facts["tdbg"] = "0.1.0";
  facts["bundled_at"] = iso_now();
  facts["bundling_machine"] = redactor.apply_json(machine_facts());
  json run_facts = json::array();
  std::string commands;
  for (const auto& rj : data["runs"]) {
    json procs = json::array();
    // How the run was started: the command `tdbg record` ran (a launcher, a shell running
    // phases one after the other), then each process's own.
    if (const json manifest = tracer::ReadRunManifest(rj["path"].get<std::string>());
        manifest.is_object() && manifest.value("command", json()).is_array()) {
      commands += "# run " + rj["label"].get<std::string>() + ", recorded with tdbg record:\n";
      if (manifest.value("cwd", json()).is_string())
        commands += "cd " + shell_word(redactor.meta("cwd", manifest["cwd"])) + "\n";
      commands += "tdbg record -o " + shell_word(redactor.meta("cwd", rj["path"])) + " -- " +
                  command_line_text(redactor.meta("cmdline", manifest["command"].dump())) + "\n\n";
    }
    for (const auto& pj : rj["processes"]) {
      json f = json::object();
      for (const char* k : kFactKeys) {
        if (pj["meta"].contains(k)) f[k] = pj["meta"][k];
      }
      procs.push_back({{"database", base_name(pj["path"].get<std::string>())}, {"facts", f},
                       {"meta", pj["meta"]}});
      commands += "# run " + rj["label"].get<std::string>() + ", " +
                  base_name(pj["path"].get<std::string>()) + "\n";
      std::string cwd = meta_summary_line(pj["meta"], "cwd");
      if (!cwd.empty()) commands += "cd " + shell_word(cwd) + "\n";
      std::string cmd = meta_summary_line(pj["meta"], "cmdline");
      commands += (cmd.empty() ? "(command line not recorded)" : command_line_text(cmd)) + "\n\n";
    }
    // Processes of the run that this bundle leaves out (another phase of a resumed run,
    // compared apart, and what it started): how the whole run was started.
    const tracer::Run& run = rj["label"] == "A" ? a : *b;
    for (const Started& st : rj["label"] == "A" ? started_a : started_b) {
      if (std::any_of(run.processes.begin(), run.processes.end(),
                      [&](const auto& p) { return p->meta("pid") == st.pid; }))
        continue;
      commands += "# run " + rj["label"].get<std::string>() + ", pid " + st.pid +
                  ": not in this bundle (another phase of the run, left out of the comparison)\n";
      if (!st.cwd.empty()) commands += "cd " + shell_word(redactor.meta("cwd", st.cwd)) + "\n";
      commands += (st.cmdline.empty() ? "(command line not recorded)"
                                      : command_line_text(redactor.meta("cmdline", st.cmdline))) +
                  "\n\n";
    }
    run_facts.push_back({{"label", rj["label"]}, {"path", rj["path"]}, {"processes", procs}});
  }
  facts["runs"] = run_facts;
  TDBG_RETURN_IF_ERROR(add("facts.json", json_text(facts, 2) + "\n"));
  TDBG_RETURN_IF_ERROR(add("commands.txt", commands));

  // README last: it describes everything above.
  std::ostringstream md;
  md << "# tdbg bug-report bundle\n\n"
     << "Written by tdbg 0.1.0 on " << facts["bundled_at"].get<std::string>() << " from "
     << (runs.size() == 2 ? "two runs" : "one run") << ".\n\n";
  if (data["diff"].is_object()) {
    const json& fd = data["diff"]["first_divergence"];
    if (fd.is_object()) {
      md << "**First divergence**: " << divergence_text(fd) << "\n\n";
      // The whole answer as `tdbg diff` prints it: the argument and its values, whether the
      // values stay the same, the optimizer's updates, the growth step by step.
      md << "What `tdbg diff` prints for these runs:\n\n```\n"
         << diff::format_divergence(data["diff"]) << "```\n\n";
    } else if (text_of(data["diff"], "status", "") == "identical") {
      md << "**The runs are identical** on every compared op.\n\n";
    } else {
      md << "**The runs diverge**; see `diff.json`.\n\n";
    }
    // How the runs were recorded or paired changes how that reads (a later phase not
    // compared, a window, no hashes, the same recording twice): as `tdbg diff` says it under
    // its headline.
    for (const json& w : data["diff"].value("warnings", json::array()))
      if (w.is_string()) md << "Warning: " << w.get<std::string>() << "\n\n";
    // How the steps were paired: a resumption found, and (--align-steps) the phases of a run
    // left out of the comparison ("B: compared its phase ..."), which this bundle leaves out too.
    for (const std::string& note : report_options.diff_notes) {
      const bool phase = note.rfind("A: ", 0) == 0 || note.rfind("B: ", 0) == 0;
      md << "Note: " << note << (phase ? "; they are not in this bundle either" : "") << ".\n\n";
    }
  }
  // How each run was recorded, where it holds only a part of what ran: every statement below
  // is about that part.
  for (size_t k = 0; k < runs.size(); ++k) {
    const tracer::Run& run = *runs[k];
    if (run.processes.empty()) continue;
    std::string selection = diff::recorded_selection({run.processes[0].get()});
    const std::string ring = run.processes[0]->meta("ring");
    if (!ring.empty() && ring != "0")
      selection += (selection.empty() ? "" : ", ") + std::string("--ring ") + ring +
                   " (only each process's last " + ring + " ops)";
    if (!selection.empty())
      md << "Run " << (k == 0 ? "A" : "B") << " was recorded with " << selection
         << ": it holds only those ops, and what is said of it is said of them.\n\n";
  }
  // Where each run first holds NaN or Inf (`nonfinite.json`): often why the bundle was made.
  for (size_t k = 0; k < data["nonfinite"].size() && k < data["runs"].size(); ++k) {
    const json& n = data["nonfinite"][k];
    const std::string label = text_of(data["runs"][k], "label", "?");
    const std::string status = text_of(n, "status", "");
    if (status == "nonfinite" && n.value("first_nonfinite", json()).is_object()) {
      md << "**First non-finite value in run " << label << "**: "
         << op_text(n["first_nonfinite"], n["first_nonfinite"].value("process_info", json()))
         << " (see `nonfinite.json`).\n\n";
      // The whole answer as `tdbg nan` prints it: the cause, the masks it set aside and why,
      // what to do; its notes (a ring's dropped ops) with it.
      md << "What `tdbg nan` prints for run " << label << ":\n\n```\n"
         << diff::format_nonfinite(n) << "```\n\n";
      continue;
    } else if (status == "finite") {
      // NaN or Inf that no op started, in `tdbg nan`'s sense: passed on, made on purpose (an
      // attention mask's -inf), or contained.
      const int64_t carried = diff::nonfinite_passed_over(n);
      if (carried == 0)
        md << "Run " << label << " holds no NaN or Inf.\n\n";
      else
        md << "No NaN or Inf starts in run " << label << "; " << carried
           << " op(s) hold NaN or Inf that tdbg nan does not count as a start (made on purpose, "
              "as a mask's -inf, or passed on; see `nonfinite.json`).\n\n";
    }
    // What bounds that answer (ops a ring dropped, a process that did not close), as
    // `tdbg nan` says it under its headline.
    if (status == "nonfinite" || status == "finite")
      for (const json& note : n.value("notes", json::array()))
        if (note.is_string()) md << "Note on run " << label << ": " << note.get<std::string>() << "\n\n";
  }
  if (!result.still_recording.empty()) {
    md << "**Still recording when bundled** (" << read_at << "): ";
    for (size_t k = 0; k < result.still_recording.size(); ++k)
      md << (k ? ", " : "") << result.still_recording[k];
    md << ". The bundle holds what had been committed then; the program went on.\n\n";
  }
  const std::string align_text =
      report_options.align_steps.first >= 0
          ? " --align-steps " + std::to_string(report_options.align_steps.first) + ":" +
                std::to_string(report_options.align_steps.second)
          : "";
  md << "## What is inside\n\n"
     << "- `report/index.html`: the report; open it in a browser (no server or network needed).\n"
     << "- `runs/a/`" << (runs.size() == 2 ? ", `runs/b/`" : "")
     << ": the run databases (SQLite, schema in tdbg's docs/schema.md). Look around with\n"
     << "  `tdbg show runs/a`, "
     << (runs.size() == 2 ? "compare with `tdbg diff runs/a runs/b" + align_text + "`, "
                          : std::string("look for NaN with `tdbg nan runs/a`, "))
     << "page through with `tdbg view`.\n"
     << "- `facts.json`: versions and settings of each recorded process (torch, CUDA, Python, "
        "CPU,\n"
     << "  thread counts, determinism flags, seed, environment) and of the machine that bundled "
        "it.\n"
     << "- `commands.txt`: how each run was started (the command `tdbg record` ran) and each "
        "process's command line and working directory, those of phases left out too.\n"
     << (data["diff"].is_null()
             ? "- `nonfinite.json`: the finding as `tdbg nan --json` prints it.\n"
             : "- `diff.json`, `nonfinite.json`: the findings as `tdbg diff --json` / `tdbg nan "
               "--json` print them.\n");
  if (options.sources) {
    md << "- `sources/`: snapshots of " << sources.size()
       << " user source file(s) that the recorded stacks point into.\n";
    for (const json& s : sources)
      if (s.value("changed_since_recording", false))
        md << "  - `" << s["path"].get<std::string>() << "` changed after it was recorded (another "
              "size or modification time): its snapshot may not be the code that ran.\n";
  } else {
    md << "- No source snapshots (bundled with `--no-sources`).\n";
  }
  md << "\n## Trimming\n\n";
  if (trimmed.empty()) {
    md << "Every recorded op is included.\n";
  } else {
    md << "Large databases keep only a window of " << options.window_ops
       << " ops around the point of interest (re-run `tdbg bundle --keep-all` to keep all):\n\n";
    for (const auto& t : trimmed) {
      md << "- run " << t["run"].get<std::string>() << ", " << t["process"].get<std::string>()
         << ": ops #" << json_text(t["from_seq"]) << "–#" << json_text(t["to_seq"]) << " of "
         << json_text(t["ops_total"]) << "\n";
    }
  }
  md << "\n## Redaction\n\n";
  if (redactor.redacted_names().empty()) {
    md << "No credential-like environment variable or argument was found.\n";
  } else {
    md << "The values of these credential-like names were replaced by `" << Redactor::kMark
       << "` everywhere in the bundle (databases, report, facts, source snapshots):\n\n";
    const std::set<std::string> names = redactor.redacted_names();  // (apply may add to it)
    for (const auto& n : names) md << "- `" << redactor.apply(n) << "`\n";
  }
  if (options.redact_paths) md << "\nThe home directory and user name were replaced in every path (`--redact-paths`).\n";
  result.redacted_names.assign(redactor.redacted_names().begin(), redactor.redacted_names().end());
  TDBG_RETURN_IF_ERROR(add("README.md", md.str()));
  // Damage met while copying (a frame or string that does not resolve) would leave a clean-
  // looking database without it: no bundle.
  TDBG_RETURN_IF_ERROR(a.lookup_status());
  if (b) TDBG_RETURN_IF_ERROR(b->lookup_status());

  Status closed = archive.close(out_tmp);
  if (!closed.ok() || std::rename(out_tmp.c_str(), out.c_str()) != 0)
    return closed.ok() ? Status::Error(out + ": " + errno_text()) : closed;
  remove_partial.done = true;
  return result;
}

namespace {

// An entry's name as written (UTF-8), whatever the locale; the locale's form otherwise; ""
// for an entry without one.
std::string entry_name(archive_entry* e) {
  const char* raw = archive_entry_pathname_utf8(e);
  if (raw == nullptr) raw = archive_entry_pathname(e);
  return raw != nullptr ? raw : "";
}

// Checks one entry's name and type; a bundle holds only plain files and folders under one root.
Status check_entry(const std::string& bundle, archive_entry* e) {
  const std::string name = entry_name(e);
  auto bad = [&](const std::string& why) {
    return Status::Error(bundle + ": unsafe entry '" + name + "' (" + why + ")");
  };
  if (name.empty()) return bad("empty name");
  if (name[0] == '/') return bad("absolute path");
  std::string part;
  std::istringstream parts(name);
  while (std::getline(parts, part, '/')) {
    if (part == "..") return bad("path leaves the folder");
  }
  if (name.find('\0') != std::string::npos) return bad("NUL in name");
  if (archive_entry_hardlink(e) || archive_entry_symlink(e)) return bad("link");
  mode_t type = archive_entry_filetype(e);
  if (type != AE_IFREG && type != AE_IFDIR) return bad("not a regular file or folder");
  return Status::Ok();
}

// Reads every entry; `visit` gets each checked entry and may read its data.
Status read_archive(const std::string& path,
                    const std::function<Status(struct archive*, archive_entry*)>& visit) {
  Utf8Locale utf8;
  std::unique_ptr<struct archive, int (*)(struct archive*)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_gzip(a.get());
  archive_read_support_format_tar(a.get());
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return Status::Error(path + ": " + errno_text());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK) {
    const char* msg = archive_error_string(a.get());
    return Status::Error(path + ": not a tdbg bundle (" + (msg ? msg : "unreadable") + ")");
  }
  archive_entry* e = nullptr;
  int entries = 0;
  while (true) {
    int rc = archive_read_next_header(a.get(), &e);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK) {
      const char* msg = archive_error_string(a.get());
      return Status::Error(path + ": malformed bundle (" + (msg ? msg : "bad header") + ")");
    }
    ++entries;
    TDBG_RETURN_IF_ERROR(check_entry(path, e));
    TDBG_RETURN_IF_ERROR(visit(a.get(), e));
  }
  if (entries == 0) return Status::Error(path + ": empty bundle");
  return Status::Ok();
}

Status read_data(const std::string& path, struct archive* a, const std::function<void(const char*, size_t)>& sink) {
  char buf[1 << 16];
  while (true) {
    la_ssize_t n = archive_read_data(a, buf, sizeof(buf));
    if (n == 0) return Status::Ok();
    if (n < 0) {
      const char* msg = archive_error_string(a);
      return Status::Error(path + ": malformed bundle (" + (msg ? msg : "truncated data") + ")");
    }
    sink(buf, static_cast<size_t>(n));
  }
}

}  // namespace

StatusOr<std::vector<BundleEntry>> inspect_bundle(const std::string& path, std::string* readme) {
  std::vector<BundleEntry> entries;
  TDBG_RETURN_IF_ERROR(read_archive(path, [&](struct archive* a, archive_entry* e) -> Status {
    BundleEntry be;
    be.path = entry_name(e);
    be.directory = archive_entry_filetype(e) == AE_IFDIR;
    be.size = archive_entry_size(e);
    std::string name = be.path;
    bool is_readme = readme && name.size() >= 9 && name.compare(name.size() - 9, 9, "README.md") == 0 &&
                     std::count(name.begin(), name.end(), '/') <= 1;
    int64_t read_bytes = 0;
    // Read every entry's data: a truncated archive is found here, not later by the user.
    TDBG_RETURN_IF_ERROR(read_data(path, a, [&](const char* d, size_t n) {
      read_bytes += static_cast<int64_t>(n);
      if (is_readme && readme->size() < (1 << 20)) readme->append(d, n);
    }));
    if (!be.directory && read_bytes != be.size) {
      return Status::Error(path + ": malformed bundle (truncated entry '" + name + "')");
    }
    entries.push_back(be);
    return Status::Ok();
  }));
  // What `tdbg bundle` writes: a README.md and a facts.json at the top of its folder.
  auto holds = [&](const std::string& file) {
    return std::any_of(entries.begin(), entries.end(), [&](const BundleEntry& be) {
      const std::string& name = be.path;
      return !be.directory && std::count(name.begin(), name.end(), '/') <= 1 &&
             (name == file || (name.size() > file.size() &&
                               name.compare(name.size() - file.size() - 1, std::string::npos, "/" + file) == 0));
    });
  };
  if (!holds("README.md") || !holds("facts.json"))
    return Status::Error(path + ": not a tdbg bundle (no README.md and facts.json in it)");
  return entries;
}

Status extract_bundle(const std::string& path, const std::string& dir) {
  // Check everything first, so a hostile archive writes nothing at all.
  TDBG_RETURN_IF_ERROR(inspect_bundle(path, nullptr).status());
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Status::Error(dir + ": " + errno_text());
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return Status::Error(dir + ": not a folder");
  auto components = [](archive_entry* e) {
    std::istringstream parts(entry_name(e));
    std::vector<std::string> comps;
    for (std::string part; std::getline(parts, part, '/');) {
      if (!part.empty() && part != ".") comps.push_back(part);
    }
    return comps;
  };
  // A file that is there already (an earlier extraction) is named before anything is written:
  // no half-extracted tree.
  TDBG_RETURN_IF_ERROR(read_archive(path, [&](struct archive*, archive_entry* e) -> Status {
    const std::vector<std::string> comps = components(e);
    if (archive_entry_filetype(e) == AE_IFDIR || comps.empty()) return Status::Ok();
    std::string target = dir;
    for (const std::string& c : comps) target += "/" + c;
    if (lstat(target.c_str(), &st) == 0)
      return Status::Error(target + ": exists already (extract into a new or empty folder); nothing was written");
    return Status::Ok();
  }));
  return read_archive(path, [&](struct archive* a, archive_entry* e) -> Status {
    std::string target = dir;
    const std::vector<std::string> comps = components(e);
    bool is_dir = archive_entry_filetype(e) == AE_IFDIR;
    for (size_t i = 0; i < comps.size(); ++i) {
      target += "/" + comps[i];
      bool last = i + 1 == comps.size();
      if (!last || is_dir) {
        if (::mkdir(target.c_str(), 0755) != 0 && errno != EEXIST) return Status::Error(target + ": " + errno_text());
        // A folder on the way must be a real folder, never a link placed there before.
        if (lstat(target.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return Status::Error(target + ": not a folder");
      }
    }
    if (is_dir || comps.empty()) return Status::Ok();
    int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return Status::Error(target + ": " + errno_text());
    Status written = read_data(path, a, [&](const char* d, size_t n) {
      while (n > 0) {
        ssize_t w = ::write(fd, d, n);
        if (w <= 0) break;
        d += w;
        n -= static_cast<size_t>(w);
      }
    });
    ::close(fd);
    return written;
  });
}

}  // namespace tdbg::report
