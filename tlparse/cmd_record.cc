// `tdbg record [options] -o RUN -- PROGRAM ARGS...`: runs PROGRAM with libtdbg_preload.so
// preloaded and the recording options of interpose/flags.inc in its `TDBG_*` environment, and
// ends like `strace` does: with the program's exit status, or killed by the signal that
// killed it.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/json_text.h"
#include "base/status.h"
#include "interpose/config.h"
#include "tlparse/commands.h"
#include "tracer/reader.h"

namespace tdbg::cli {
namespace {

namespace fs = std::filesystem;
using interpose::Config;

using tracer::kRunManifest;

// The command-line spelling of a flags.inc name: `hash_threads` -> `hash-threads`.
std::string option_name(const char* flag) {
  std::string name = flag;
  for (char& c : name)
    if (c == '_') c = '-';
  return name;
}

std::string environment_name(const char* flag) {
  std::string name = "TDBG_";
  for (const char* p = flag; *p; ++p) name += static_cast<char>(std::toupper(*p));
  return name;
}

std::string to_environment(const std::string& value) { return value; }
std::string to_environment(int64_t value) { return std::to_string(value); }
std::string to_environment(bool value) { return value ? "1" : "0"; }

// A file that a recording leaves in its run directory: the manifest, a database or SQLite's
// side files of one.
bool is_run_file(const std::string& name) {
  if (name == kRunManifest) return true;
  for (const char* suffix :
       {".sqlite", ".sqlite-wal", ".sqlite-shm", ".sqlite-journal", ".sqlite-reserve"}) {
    size_t n = std::strlen(suffix);
    if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) return true;
  }
  return false;
}

// Makes `dir` ready to receive a recording and returns its absolute path. A directory that
// holds an earlier recording is only replaced with `force` (its databases are removed), and a
// non-empty directory that is not a run directory is never written into without `force`.
// The program's LD_PRELOAD with ours in front of what was there, except sanitizer runtimes
// (libasan, libclang_rt.asan, ...), which must stay first in the initial library list or the
// sanitized program refuses to start.
std::string preload_list(const std::string& ours, const char* existing) {
  std::vector<std::string> first, rest;
  std::string text = existing ? existing : "";
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find_first_of(": ", at);
    if (end == std::string::npos) end = text.size();
    std::string entry = text.substr(at, end - at);
    if (!entry.empty()) {
      std::string base = entry.substr(entry.rfind('/') == std::string::npos ? 0 : entry.rfind('/') + 1);
      bool sanitizer = base.rfind("libasan", 0) == 0 || base.rfind("libtsan", 0) == 0 ||
                       base.rfind("libclang_rt.", 0) == 0;
      (sanitizer ? first : rest).push_back(entry);
    }
    at = end + 1;
  }
  first.push_back(ours);
  first.insert(first.end(), rest.begin(), rest.end());
  std::string joined;
  for (const std::string& entry : first) joined += (joined.empty() ? "" : ":") + entry;
  return joined;
}

// Removes the full-disk reserve (`<host>-<pid>[-k].sqlite-reserve`) that a recorded process
// of this host left because it never closed its database (SIGKILL, the OOM killer): a process
// that is gone cannot use it, and it would hold 512 KiB of a disk that may be full. The
// database beside it keeps every committed op. Reserves of processes still running (a
// daemonized child) or of other hosts (a shared file system) are left alone.
void remove_orphan_reserves(const std::string& run_dir) {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) return;
  const std::string prefix = std::string(host) + "-";
  const std::string suffix = ".sqlite-reserve";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    size_t at = prefix.size(), end = at;
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    if (end == at || end - at > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name.substr(at, end - at)));
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    fs::remove(entry.path(), ignored);
  }
}

// The pid of a live process that holds one of `files` open (a recording still writing into
// the directory), or 0. Walks /proc/<pid>/fd of every process this user can see.
pid_t live_writer(const std::vector<fs::path>& files) {
  std::set<fs::path> wanted;
  std::error_code ec;
  for (const fs::path& f : files) {
    fs::path canonical = fs::canonical(f, ec);
    if (!ec) wanted.insert(canonical);
  }
  if (wanted.empty()) return 0;
  for (const auto& proc : fs::directory_iterator("/proc", ec)) {
    const std::string name = proc.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code fd_ec;
    for (const auto& fd : fs::directory_iterator(proc.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      if (wanted.count(fs::read_symlink(fd.path(), link_ec)) != 0)
        return static_cast<pid_t>(std::stol(name));
    }
  }
  return 0;
}

// After the program: processes it left running that still write into the run (a dead rank's
// DataLoader workers, which outlive it by seconds) are waited for, up to `limit`, so that
// what reads the run next sees them closed. True when none is left.
bool wait_for_left_writers(const std::string& run_dir, bool quiet, std::chrono::seconds limit) {
  auto databases = [&] {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(run_dir, ec))
      if (tracer::IsRunDatabaseName(entry.path().filename().string())) files.push_back(entry.path());
    return files;
  };
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool said = false;
  for (pid_t pid = live_writer(databases()); pid != 0; pid = live_writer(databases())) {
    if (std::chrono::steady_clock::now() >= deadline) {
      if (!quiet)
        std::fprintf(stderr,
                     "tdbg record: process %d, which the program left running, still records "
                     "into %s: its database holds what it has committed so far\n",
                     static_cast<int>(pid), run_dir.c_str());
      return false;
    }
    if (!said && !quiet)
      std::fprintf(stderr,
                   "tdbg record: waiting (at most %lld s) for processes the program left running "
                   "(pid %d) to close their databases\n",
                   static_cast<long long>(limit.count()), static_cast<int>(pid));
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return true;
}

StatusOr<std::string> prepare_run_directory(const std::string& dir, bool force) {
  std::error_code ec;
  if (dir.empty()) return Status::Error("-o names no folder: give the run directory's path");
  // A folder inside another run's (its databases' readers would not see this run, and
  // removing that run would take this one with it).
  const fs::path target = fs::weakly_canonical(dir, ec);
  for (fs::path p = target.parent_path(); !ec && !p.empty(); p = p.parent_path()) {
    if (fs::exists(p / kRunManifest, ec))
      return Status::Error(dir + ": is inside the run folder " + p.string() +
                           ": name a folder outside it");
    if (p == p.parent_path()) break;
  }
  ec.clear();
  fs::file_status status = fs::status(dir, ec);
  if (fs::exists(status) && !fs::is_directory(status))
    return Status::Error(dir + ": exists and is not a directory");
  if (!fs::exists(status)) {
    if (!fs::create_directories(dir, ec) && ec)
      return Status::Error(dir + ": cannot create: " + ec.message());
  }
  // Two recordings started into one folder at once: the first to lock the folder (held while
  // this process lives, released by the kernel however it ends; not inherited by the program)
  // records, the other is refused; the checks below, which read the folder, then see no race.
  if (const int lock = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
    return Status::Error(dir +
                         ": a recording is still running into it (another tdbg record); "
                         "choose another -o");
  if (fs::exists(status)) {
    std::vector<fs::path> run_files;
    bool foreign = false;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (is_run_file(entry.path().filename().string()) && entry.is_regular_file())
        run_files.push_back(entry.path());
      else
        foreign = true;
    }
    if (ec) return Status::Error(dir + ": cannot list: " + ec.message());
    if (foreign && !force)
      return Status::Error(dir +
                           ": not empty and not a tdbg run directory (choose another -o, or "
                           "--force to record into it anyway)");
    // A recording still running here is never replaced: removing its files under it would
    // lose what it records and leave another run's metadata beside them.
    if (const pid_t recorder = tracer::LiveRecorder(dir); recorder != 0)
      return Status::Error(dir + ": a recording is still running into it (tdbg record, pid " +
                           std::to_string(recorder) + "); choose another -o");
    if (const pid_t pid = live_writer(run_files); pid != 0)
      return Status::Error(dir + ": a recording is still running into it (pid " +
                           std::to_string(pid) + " holds its database open); choose another -o");
    if (!run_files.empty() && !force)
      return Status::Error(dir + ": holds an earlier recording (--force replaces it)");
    for (const auto& file : run_files) {
      if (!fs::remove(file, ec) && ec)
        return Status::Error(file.string() + ": cannot remove: " + ec.message());
    }
  }
  fs::path absolute = fs::canonical(dir, ec);
  if (ec) return Status::Error(dir + ": " + ec.message());
  // A folder that exists but cannot be written (a read-only mount, another user's): said now,
  // before the program runs unrecorded.
  if (access(absolute.c_str(), W_OK | X_OK) != 0)
    return Status::Error(dir + ": cannot write into it: " + std::strerror(errno));
  return absolute.string();
}

std::string utc_now() {
  char buf[32];
  time_t now = time(nullptr);
  struct tm tm_utc;
  gmtime_r(&now, &tm_utc);
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
  return buf;
}

// Written twice: before the program starts (so a killed `tdbg record` still leaves a run
// directory that says what ran) and after it ends, with its status.
void write_manifest(const std::string& dir, const nlohmann::json& manifest) {
  std::string path = dir + "/" + kRunManifest;
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << json_text(manifest, 2) << "\n";
    out.close();  // a full disk fails here, at the flush, not at the write
    if (!out) {
      // The manifest written before stays (with the program's start, without its status).
      std::fprintf(stderr, "tdbg record: %s: cannot write (disk full?)\n", tmp.c_str());
      std::remove(tmp.c_str());
      return;
    }
  }
  std::rename(tmp.c_str(), path.c_str());
}

pid_t g_child = -1;

// Forwards a signal sent to `tdbg record` alone (kill, a supervisor) to the program. A signal
// the terminal sent (Ctrl-C) reached the whole foreground process group, program included,
// so it is not sent twice. SIGABRT only when another process sent it (`kill -ABRT`, for a core
// dump of a hung job): tdbg's own abort() returns from here and ends tdbg as it would.
void forward_signal(int sig, siginfo_t* info, void*) {
  if (g_child <= 0) return;
  if (info != nullptr && info->si_code == SI_KERNEL) return;
  if (sig == SIGABRT && (info == nullptr || info->si_code != SI_USER || info->si_pid == getpid()))
    return;
  kill(g_child, sig);
}

// Ends this process by `sig`, the signal that killed the program, so that a parent sees what
// it would without tdbg (a shell's 128+N, Python's returncode -N, a launcher's "killed by
// signal"); without a second core dump. Returns only where `sig` does not end it.
void end_by_signal(int sig) {
  std::fflush(nullptr);
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  signal(sig, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  sigprocmask(SIG_UNBLOCK, &only, nullptr);
  raise(sig);
}

// Checks the values that have a fixed form, so that a typo fails here with one line instead of
// silently recording something else in every process.
Status validate(const Config& config, const std::set<std::string>& on_command_line) {
  // Where the value came from, as the user wrote it: "--steps 10:5" or "TDBG_STEPS=10:5".
  auto given = [&](const char* flag, const std::string& value) {
    if (on_command_line.count(flag)) return "--" + option_name(flag) + " " + value;
    return environment_name(flag) + "=" + value;
  };
  if (config.hash != "all" && config.hash != "outputs" && config.hash != "none")
    return Status::Error(given("hash", config.hash) + ": want all, outputs or none");
  if (interpose::StepWindow window;
      !config.steps.empty() && !interpose::parse_step_window(config.steps, &window))
    return Status::Error(given("steps", config.steps) +
                         ": want A:B with A < B (either may be empty), steps below 10^18");
  if (!config.ops.empty()) {
    try {
      std::regex check(config.ops, std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      return Status::Error(given("ops", config.ops) + ": not a valid regular expression");
    }
  }
  if (config.ring < 0) return Status::Error(given("ring", std::to_string(config.ring)) + ": must be 0 or more");
  if (config.hash_threads < 1)
    return Status::Error(given("hash_threads", std::to_string(config.hash_threads)) + ": must be 1 or more");
  if (config.flush_ms < 0)
    return Status::Error(given("flush_ms", std::to_string(config.flush_ms)) + ": must be 0 or more");
  return Status::Ok();
}

struct Options {
  Config config;
  bool force = false;
  std::set<std::string> on_command_line;  // flags.inc names given as options, not by TDBG_*
  // TDBG_* values that do not parse or are out of range: (flag name, message). Refused unless
  // the option is given on the command line, which replaces them.
  std::vector<std::pair<std::string, std::string>> malformed;
};

// Whether `run_dir` holds a run database (a process that loaded torch wrote one).
bool any_database(const std::string& run_dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    if (tracer::IsRunDatabaseName(entry.path().filename().string())) return true;
  }
  return false;
}

// Why nothing was recorded in `run_dir` after the program ended ("" where a process wrote a
// database): no process loaded torch, the hook could not be loaded into one, or its database
// could not be created. Kept in the manifest (`not_recorded`), which the readers say.
std::string nothing_recorded(const std::string& run_dir) {
  if (any_database(run_dir)) return "";
  // A hook library named by hand that is not there: no process could be recorded, whether it
  // loaded torch or not (the preload said so in each).
  const char* hook = std::getenv("TDBG_TORCH_LIB");
  std::error_code ec;
  if (hook != nullptr && *hook != '\0' && !fs::exists(hook, ec))
    return std::string("TDBG_TORCH_LIB=") + hook +
           " names no file, so tdbg's torch hook could not be loaded into any process";
  // Torch was loaded, but the hook was not (a library built against another torch), or its
  // database could not be created: the preload or the hook left why.
  std::ifstream failed(fs::path(run_dir) / interpose::kHookFailedFile);
  std::string line;
  if (failed && std::getline(failed, line) && line.find('\t') != std::string::npos) {
    const std::string why = line.substr(line.find('\t') + 1);
    const std::string database = interpose::kDatabaseFailed;
    if (why.rfind(database, 0) == 0)
      return "the program loaded torch, but tdbg could not create its database there (" +
             why.substr(database.size()) + ")";
    return "the program loaded torch, but tdbg's torch hook could not be loaded into it (" + why +
           ")";
  }
  // A disk with no space left: neither a database nor that note could be written, so whether
  // a process loaded torch is unknown (t143: said as "no process loaded torch").
  struct statvfs disk {};
  if (statvfs(run_dir.c_str(), &disk) == 0 &&
      static_cast<uint64_t>(disk.f_bavail) * disk.f_frsize < (uint64_t{64} << 10))
    return "its disk is full: a process that loaded torch could not have created its database "
           "there (nor said so); free space, or record into another folder with -o";
  return "";  // no process loaded torch
}

// Said once after the program: that nothing was recorded (`why`, or no process loaded torch),
// or that a --steps window or an --ops pattern recorded nothing (steps are counted from
// torch.optim optimizers' step(), and a loop that updates its weights by hand, or a script
// shorter than the window, never reaches it; a pattern may match no op's name). Silent where
// any process recorded an op, and under --quiet.
void warn_empty_selection(const interpose::Config& config, const std::string& run_dir,
                          const std::string& why) {
  if (config.quiet) return;
  if (!why.empty()) {
    std::fprintf(stderr, "tdbg record: nothing was recorded in %s: %s\n", run_dir.c_str(),
                 why.c_str());
    return;
  }
  if (!any_database(run_dir)) {
    std::fprintf(stderr,
                 "tdbg record: no process of the program loaded torch: nothing was recorded in "
                 "%s (tdbg records the processes that load libtorch; a process that loaded it but "
                 "not tdbg's hook says why in a line of its own)\n",
                 run_dir.c_str());
    return;
  }
  if (config.steps.empty() && config.ops.empty()) return;
  StatusOr<tracer::Run> run = tracer::Run::Open(run_dir);
  if (!run.ok()) return;
  int64_t ops = 0;
  for (const auto& process : run->processes) ops += process->op_count();
  if (ops > 0) return;
  if (!config.steps.empty()) {
    std::fprintf(stderr,
                 "tdbg record: --steps %s recorded no op: no process reached those steps (steps "
                 "count torch.optim optimizer steps; a loop that updates its weights by hand "
                 "stays at step 0)\n",
                 config.steps.c_str());
  } else {
    std::fprintf(stderr,
                 "tdbg record: --ops %s recorded no op: it matches no op's name (names such as "
                 "aten::addmm; a regular expression searched in each name)\n",
                 config.ops.c_str());
  }
}

// Edit distance of two short names (for "did you mean").
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// A `TDBG_*` variable of the environment that no part of tdbg reads (`TDBG_HAHS=none`) would
// be ignored without a word, and the recording made with the defaults: said once.
void note_unknown_variables(const interpose::Config& config) {
  if (config.quiet) return;
  std::vector<std::string> known = {"TDBG_TORCH_LIB"};
#define FLAG(type, name, def, doc) known.push_back(environment_name(#name));
#include "interpose/flags.inc"
#undef FLAG
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    if (entry.rfind("TDBG_", 0) != 0) continue;
    const std::string name = entry.substr(0, entry.find('='));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string closest;
    size_t best = 3;  // only a near miss is suggested
    for (const std::string& k : known) {
      const size_t d = edit_distance(name, k);
      if (d < best) {
        best = d;
        closest = k;
      }
    }
    std::fprintf(stderr, "tdbg record: note: %s is set but is no tdbg setting%s; it is ignored\n",
                 name.c_str(), closest.empty() ? "" : (" (did you mean " + closest + "?)").c_str());
  }
}

void run_record(const Options& options, std::vector<std::string> command, bool out_given) {
  if (!command.empty() && command.front() == "--") command.erase(command.begin());
  if (command.empty()) {
    fail("record", "no program given (usage: tdbg record [options] -o RUN -- PROGRAM ARGS...)");
    return;
  }

  for (const auto& [flag, message] : options.malformed) {
    if (options.on_command_line.count(flag)) continue;
    fail("record", message);
    return;
  }
  if (Status valid = validate(options.config, options.on_command_line); !valid.ok()) {
    fail("record", valid.message());
    return;
  }
  std::string preload = executable_dir() + "/../lib/libtdbg_preload.so";
  if (access(preload.c_str(), R_OK) != 0) {
    fail("record", preload + ": not found (build the tdbg_preload target, or install tdbg)");
    return;
  }
  std::error_code ec;
  preload = fs::canonical(preload, ec).string();

  Config config = options.config;
  if (!out_given && config.out.empty()) {
    char name[64];
    time_t now = time(nullptr);
    struct tm tm_utc;
    gmtime_r(&now, &tm_utc);
    strftime(name, sizeof(name), "tdbg-run-%Y%m%d-%H%M%S", &tm_utc);
    config.out = name;
    if (!config.quiet) std::fprintf(stderr, "tdbg record: recording into %s\n", name);
  }
  std::error_code exists_ec;
  const bool dir_existed = fs::exists(config.out, exists_ec);
  StatusOr<std::string> run_dir = prepare_run_directory(config.out, options.force);
  if (!run_dir.ok()) {
    fail("record", run_dir.status().message());
    return;
  }
  config.out = *run_dir;

  note_unknown_variables(config);
  // The child sees exactly the resolved configuration, whatever the environment held before.
#define FLAG(type, name, def, doc) \
  setenv(environment_name(#name).c_str(), to_environment(config.name).c_str(), 1);
#include "interpose/flags.inc"
#undef FLAG
  setenv("LD_PRELOAD", preload_list(preload, getenv("LD_PRELOAD")).c_str(), 1);

  nlohmann::json manifest = {{"tdbg_version", "0.1.0"},
                             {"command", command},
                             {"started", utc_now()},
                             {"exit_status", nullptr},
                             {"recorder_pid", static_cast<int64_t>(getpid())}};
  {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) manifest["cwd"] = cwd;
  }
  write_manifest(*run_dir, manifest);

  std::vector<char*> argv;
  for (auto& arg : command) argv.push_back(arg.data());
  argv.push_back(nullptr);

  // A close-on-exec pipe tells the parent whether exec succeeded: it reads EOF on success and
  // the child's errno on failure, so "no such program" is our one-line error, not the child's.
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    fail("record", std::string("pipe: ") + std::strerror(errno));
    return;
  }
  std::fflush(nullptr);
  // The signals forwarded to the program are blocked from before the fork until the child's
  // pid is known, so that one sent as soon as the program runs (it printed "ready") is
  // forwarded, not taken by tdbg itself (SIGABRT ended tdbg, not the program).
  constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGABRT};
  sigset_t forwarded, before;
  sigemptyset(&forwarded);
  for (int sig : kForwarded) sigaddset(&forwarded, sig);
  sigprocmask(SIG_BLOCK, &forwarded, &before);
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_sigaction = forward_signal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  struct sigaction kept[std::size(kForwarded)];
  for (size_t k = 0; k < std::size(kForwarded); ++k) sigaction(kForwarded[k], &action, &kept[k]);
  const pid_t recorder = getpid();
  pid_t child = fork();
  if (child < 0) {
    sigprocmask(SIG_SETMASK, &before, nullptr);
    fail("record", std::string("fork: ") + std::strerror(errno));
    return;
  }
  if (child == 0) {
    // The program starts with the dispositions and mask tdbg was given.
    for (size_t k = 0; k < std::size(kForwarded); ++k) sigaction(kForwarded[k], &kept[k], nullptr);
    sigprocmask(SIG_SETMASK, &before, nullptr);
    close(exec_pipe[0]);
    // SIGKILL to `tdbg record` (a scheduler, `timeout -s KILL`) must end the program as it
    // would without tdbg, not leave it running under init; signals that can be caught are
    // forwarded instead. Survives the exec; checked after, in case the recorder is gone.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != recorder) _exit(137);
    execvp(argv[0], argv.data());
    int err = errno;
    ssize_t written = write(exec_pipe[1], &err, sizeof(err));
    (void)written;
    _exit(err == ENOENT ? 127 : 126);
  }
  g_child = child;
  sigprocmask(SIG_SETMASK, &before, nullptr);  // one sent meanwhile is forwarded now
  close(exec_pipe[1]);

  int exec_errno = 0;
  ssize_t got;
  do {
    got = read(exec_pipe[0], &exec_errno, sizeof(exec_errno));
  } while (got < 0 && errno == EINTR);
  close(exec_pipe[0]);

  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      fail("record", std::string("waitpid: ") + std::strerror(errno));
      return;
    }
  }
  g_child = -1;

  if (got == static_cast<ssize_t>(sizeof(exec_errno))) {
    fail("record", command.front() + ": " + std::strerror(exec_errno));
    exit_code = exec_errno == ENOENT ? 127 : 126;
    // Nothing ran: no run directory is left behind for the next try to need --force.
    std::error_code ec;
    fs::remove(fs::path(*run_dir) / kRunManifest, ec);
    if (!dir_existed) fs::remove(*run_dir, ec);  // only if empty
    return;
  } else if (WIFEXITED(status)) {
    exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit_code = 128 + WTERMSIG(status);
    manifest["signal"] = WTERMSIG(status);
  }
  wait_for_left_writers(*run_dir, options.config.quiet, std::chrono::seconds(15));
  remove_orphan_reserves(*run_dir);
  manifest["exit_status"] = exit_code;
  manifest["ended"] = utc_now();
  const std::string not_recorded = nothing_recorded(*run_dir);
  if (!not_recorded.empty()) manifest["not_recorded"] = not_recorded;
  write_manifest(*run_dir, manifest);
  warn_empty_selection(options.config, *run_dir, not_recorded);
  std::error_code removed;
  fs::remove(fs::path(*run_dir) / interpose::kHookFailedFile, removed);
  if (WIFSIGNALED(status)) end_by_signal(WTERMSIG(status));
}

// The words of this process's command line after the first `--` that follows the word
// `record` (the program and its arguments), or nothing if there is no such `--`.
std::optional<std::vector<std::string>> words_after_separator() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string word;
  bool after_record = false;
  std::optional<std::vector<std::string>> after;
  while (std::getline(in, word, '\0')) {
    if (after) after->push_back(word);
    else if (after_record && word == "--") after.emplace();
    else if (word == "record") after_record = true;
  }
  return after;
}

}  // namespace

void add_record_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "record",
      "Run a program with tdbg preloaded and record every process that loads torch\n"
      "  usage: tdbg record [options] -o RUN -- PROGRAM ARGS...\n"
      "  Exits with the program's status, or is killed by the signal that killed it.\n"
      "  Each option is also the TDBG_<NAME> environment variable (e.g. --hash-threads =\n"
      "  TDBG_HASH_THREADS).");
  auto options = std::make_shared<Options>();
  // Defaults come from the environment so that `TDBG_HASH=none tdbg record ...` works too;
  // the flags override it.
  options->config = interpose::config_from_environment(/*report=*/false, &options->malformed);
  auto* out_option = cmd->add_option("-o,--out", options->config.out,
                                     "Run directory; each recorded process writes "
                                     "<dir>/<host>-<pid>.sqlite (default: ./tdbg-run-<time>)");
#define FLAG_ADD_STRING(name, doc) \
  cmd->add_option("--" + option_name(#name), options->config.name, doc)->capture_default_str();
// A number past int64 is refused ("too large"), not clamped; ranges are checked with the
// configuration (config.h).
#define FLAG_ADD_INT(name, doc)                                                   \
  cmd->add_option("--" + option_name(#name), options->config.name, doc)          \
      ->check(whole_number())                                                    \
      ->capture_default_str();
// `-q` as well for --quiet, as people type it.
#define FLAG_ADD_BOOL(name, doc)                                                    \
  cmd->add_flag(std::string(std::strcmp(#name, "quiet") == 0 ? "-q," : "") + "--" + \
                    option_name(#name) + ",!--no-" + option_name(#name),            \
                options->config.name,                                               \
                std::string(doc) + (options->config.name ? " [on]" : " [off]"))     \
      ->check(boolean_word());
#define FLAG(type, name, def, doc)      \
  if (std::strcmp(#name, "out") != 0) { \
    FLAG_ADD_##type(name, doc)          \
  }
#include "interpose/flags.inc"
#undef FLAG
#undef FLAG_ADD_STRING
#undef FLAG_ADD_INT
#undef FLAG_ADD_BOOL
  cmd->add_flag("--force", options->force,
                "Reuse RUN even if it holds an earlier recording or other files");
  // Everything from the program name on belongs to the program, options included. CLI11
  // gives the words after `--` only to a positional, but a positional would also swallow the
  // program's name in `tdbg record ls -l` and let our options steal the program's. So the
  // mode is chosen by whether this command line has a `--` after `record`.
  // With a `--`, main() hands CLI11 only the words before it (so a stray word there is named
  // as such, not blamed on the program's words), and the program is read back from the
  // command line here.
  auto program = std::make_shared<std::vector<std::string>>();
  if (std::optional<std::vector<std::string>> after = words_after_separator()) {
    *program = std::move(*after);
  } else {
    cmd->prefix_command();
  }
  cmd->callback([cmd, options, out_option, program] {
    std::vector<std::string> command = *program;
    for (const std::string& word : cmd->remaining()) {
      if (!program->empty() && word == "--") continue;  // CLI11 leaves the separator here
      if (!program->empty()) {
        fail("record", "unknown option " + word + " (see tdbg record --help)");
        return;
      }
      command.push_back(word);
    }
    // `--stacks --no-stacks`: which one was meant is not ours to guess.
    std::string contradicted;
#define FLAG(type, name, def, doc)                                                              \
  if (const CLI::Option* given = cmd->get_option_no_throw("--" + option_name(#name));          \
      given != nullptr && given->count() > 0) {                                                  \
    options->on_command_line.insert(#name);                                                      \
    const std::vector<std::string>& said = given->results();                                     \
    if (std::strcmp(#type, "BOOL") == 0 && contradicted.empty() &&                               \
        std::adjacent_find(said.begin(), said.end(), std::not_equal_to<>()) != said.end())       \
      contradicted = option_name(#name);                                                         \
  }
#include "interpose/flags.inc"
#undef FLAG
    if (!contradicted.empty()) {
      fail("record", "--" + contradicted + " and --no-" + contradicted + " both given: give one");
      return;
    }
    run_record(*options, command, out_option->count() > 0);
  });
}

}  // namespace tdbg::cli
