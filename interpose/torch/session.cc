// The recording session of one process: opens the run database when the library is loaded,
// writes run metadata, reopens a fresh database in a fork child that runs ops, and closes
// cleanly (with a bounded wait) at exit.
#include "interpose/torch/session.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/Generator.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/ScalarTypeToTypeMeta.h>
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#if __has_include(<torch/version.h>)
#include <torch/version.h>
#endif

#include "base/quiet_thread.h"
#include "interpose/torch/python_frames.h"
#include "interpose/torch/tensor_state.h"
#include "interpose/torch_api.h"

extern char** environ;

namespace tdbg::torchhook {
namespace {

Settings g_settings;
std::atomic<tracer::Writer*> g_writer{nullptr};
std::atomic<uint64_t> g_generation{0};
// The database is opened at the first op: in a fork child, and in a process the hook was
// LD_PRELOADed into by hand (a `nice` or `env` before the program execs it writes nothing).
std::atomic<bool> g_open_lazily{false};
int64_t g_forked_at_step = -1;              // in a fork child: the parent's step at the fork
std::atomic<bool> g_closed{false};
std::mutex g_open_mutex;                    // guards opening and closing
std::atomic<pid_t> g_open_owner{0};         // the thread holding `g_open_mutex`, or 0

pid_t this_thread_id() {
  static thread_local pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  return tid;
}

// Holds `g_open_mutex` and says which thread holds it, so that a signal handler that ends the
// process on that same thread (torch's DataLoader worker handler `_exit`s on SIGTERM) can see
// that waiting for the lock would wait on itself.
struct OpenLock {
  OpenLock() { lock(); }
  ~OpenLock() { unlock(); }
  static void lock() {
    const pid_t id = this_thread_id();  // (before: nothing between the lock and the mark)
    g_open_mutex.lock();
    g_open_owner.store(id, std::memory_order_release);
  }
  // For the close, which a signal handler may run on any thread: a signal that lands between
  // the mutex and its owner's mark (either way) finds it held by no thread it knows, and
  // waiting would wait on itself. Tries for `limit`; false: not taken.
  static bool lock_within(std::chrono::milliseconds limit) {
    const pid_t id = this_thread_id();
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!g_open_mutex.try_lock()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    g_open_owner.store(id, std::memory_order_release);
    return true;
  }
  static void unlock() {
    g_open_owner.store(0, std::memory_order_release);
    g_open_mutex.unlock();
  }
  static bool held_by_this_thread() {
    return g_open_owner.load(std::memory_order_acquire) == this_thread_id();
  }
};

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::string read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `/proc/self/cmdline` as a JSON array of strings.
std::string cmdline_json() {
  std::string raw = read_file("/proc/self/cmdline");
  std::string out = "[";
  size_t start = 0;
  bool first = true;
  while (start < raw.size()) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    if (!first) out += ", ";
    out += json_quote(raw.substr(start, end - start));
    first = false;
    start = end + 1;
  }
  return out + "]";
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "";
}

// The environment variables that can change a run's numerics or tdbg's behaviour, as a JSON
// object. The full environment is deliberately not stored (it holds secrets).
std::string relevant_environment_json() {
  static const char* const kPrefixes[] = {"OMP_",  "MKL_",   "CUDA_", "CUBLAS_", "CUDNN_",
                                          "TORCH_", "TDBG_", "KMP_",  "OPENBLAS_", "NCCL_",
                                          "PYTORCH_"};
  std::vector<std::string> entries;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string key = kv.substr(0, eq);
    bool keep = key == "PYTHONHASHSEED" || key == "LD_PRELOAD";
    for (const char* p : kPrefixes) keep = keep || key.rfind(p, 0) == 0;
    if (keep) entries.push_back(json_quote(key) + ": " + json_quote(kv.substr(eq + 1)));
  }
  std::sort(entries.begin(), entries.end());
  std::string out = "{";
  for (size_t i = 0; i < entries.size(); ++i) out += (i ? ", " : "") + entries[i];
  return out + "}";
}

// The children this process forked (DataLoader workers, each epoch's), and the step it had
// reached at the first: meta `forks`, written at close, where a --steps window that leaves the
// workers out (all their ops are of step 0) tells that data came from them.
std::atomic<int64_t> g_forks{0};
std::atomic<int64_t> g_first_fork_step{-1};

std::atomic<int> g_num_threads{-1};
std::atomic<int> g_num_interop_threads{-1};
// Each intra-op thread count the program ran with and the step it was first read at
// (`note_thread_counts`), for the meta `num_threads_history`: a count set for a few steps
// and set back leaves the final count equal in two runs that computed differently.
std::mutex g_threads_history_mutex;
std::vector<std::pair<int64_t, int>> g_threads_history;  // (step, count), at most kMaxThreadChanges
constexpr size_t kMaxThreadChanges = 64;

// Settings torch reads at run time: taken at open and again at close, because a script
// usually sets seeds, thread counts and determinism after `import torch`.
void write_torch_settings(tracer::Writer* w, bool at_close) {
  try {
    auto& ctx = at::globalContext();
    w->set_meta("deterministic_algorithms", ctx.deterministicAlgorithms() ? "1" : "0");
    w->set_meta("deterministic_algorithms_warn_only",
                ctx.deterministicAlgorithmsWarnOnly() ? "1" : "0");
    w->set_meta("cudnn_deterministic", ctx.deterministicCuDNN() ? "1" : "0");
    w->set_meta("cudnn_benchmark", ctx.benchmarkCuDNN() ? "1" : "0");
    w->set_meta("mkldnn_enabled", ctx.userEnabledMkldnn() ? "1" : "0");
    const at::Float32MatmulPrecision precision = ctx.float32MatmulPrecision();
    w->set_meta("float32_matmul_precision",
                precision == at::Float32MatmulPrecision::HIGHEST ? "highest"
                : precision == at::Float32MatmulPrecision::HIGH  ? "high"
                                                                 : "medium");
#if defined(__x86_64__) || defined(__i386__)
    // torch.set_flush_denormal: the calling thread's MXCSR flush-to-zero and
    // denormals-are-zero bits (this runs on the thread that opens or closes the database,
    // the program's main thread for a script).
    w->set_meta("flush_denormal", (__builtin_ia32_stmxcsr() & 0x8040) == 0x8040 ? "1" : "0");
#endif
    w->set_meta("seed", std::to_string(at::detail::getDefaultCPUGenerator().current_seed()));
    // torch.set_default_dtype: what a float tensor made without a dtype is.
    w->set_meta("default_dtype",
                hashing::dtype_name(to_dtype(c10::typeMetaToScalarType(c10::get_default_dtype()))));
    // Thread counts as last read while ops ran (see `note_thread_counts`): asking torch at
    // load would initialize thread pools the script may still configure, and at exit can
    // deadlock.
    if (at_close && g_num_threads.load() > 0) {
      w->set_meta("num_threads", std::to_string(g_num_threads.load()));
      w->set_meta("num_interop_threads", std::to_string(g_num_interop_threads.load()));
      std::lock_guard<std::mutex> lock(g_threads_history_mutex);
      std::string history;
      for (const auto& [step, count] : g_threads_history)
        history += (history.empty() ? "" : ",") + std::to_string(count) + "@" + std::to_string(step);
      w->set_meta("num_threads_history", history);
    }
    if (at_close && g_forks.load() > 0)
      w->set_meta("forks",
                  std::to_string(g_forks.load()) + "@" + std::to_string(g_first_fork_step.load()));
  } catch (...) {
  }
}

void write_start_metadata(tracer::Writer* w) {
  w->set_meta("pid", std::to_string(getpid()));
  w->set_meta("ppid", std::to_string(getppid()));
  if (g_forked_at_step >= 0) w->set_meta("forked_at_step", std::to_string(g_forked_at_step));
  w->set_meta("host", host_name());
  w->set_meta("cmdline", cmdline_json());
  char cwd[4096] = {0};
  if (getcwd(cwd, sizeof(cwd) - 1)) w->set_meta("cwd", cwd);
  w->set_meta("start_time_ns", std::to_string(wall_ns()));
#ifdef TORCH_VERSION
  w->set_meta("torch_version", TORCH_VERSION);
#endif
  try {
    bool has_cuda = at::globalContext().hasCUDA();
    w->set_meta("cuda_available", has_cuda ? "1" : "0");
  } catch (...) {
  }
  // CUDA versions only from libraries the process already loaded (never loads one itself).
  using VersionFn = int (*)(int*);
  if (auto runtime = reinterpret_cast<VersionFn>(dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion"))) {
    int v = 0;
    if (runtime(&v) == 0 && v > 0) w->set_meta("cuda_runtime_version", std::to_string(v));
  }
  if (auto driver = reinterpret_cast<VersionFn>(dlsym(RTLD_DEFAULT, "cuDriverGetVersion"))) {
    int v = 0;
    if (driver(&v) == 0 && v > 0) w->set_meta("cuda_driver_version", std::to_string(v));
  }
  std::string py = python_version();
  if (!py.empty()) w->set_meta("python_version", py);
  w->set_meta("cpu_model", cpu_model());
  w->set_meta("cpu_count", std::to_string(std::thread::hardware_concurrency()));
  w->set_meta("env", relevant_environment_json());
  // torchrun and torch.distributed.launch name each process's rank in its environment; other
  // launchers (mp.spawn) are noted at the first collective op (dispatch_hook.cc).
  const char* rank = std::getenv("RANK");
  const char* world = std::getenv("WORLD_SIZE");
  if (rank && *rank && world && *world) w->set_meta("rank", std::string(rank) + "/" + world);
  w->set_meta("hash_mode", g_settings.config.hash);
  // What the recording selected: `tdbg diff` warns when two runs selected differently.
  w->set_meta("steps", g_settings.config.steps);
  w->set_meta("ops", g_settings.config.ops);
  w->set_meta("ring", std::to_string(g_settings.config.ring));
  w->set_meta("internal_ops", g_settings.config.internal_ops ? "1" : "0");
  w->set_meta("stacks", g_settings.config.stacks ? "1" : "0");
  w->set_meta("modules", g_settings.config.modules ? "1" : "0");
  w->set_meta("recorder", "libtdbg_torch");
  write_torch_settings(w, /*at_close=*/false);
}

void read_settings() {
  // The preload, when it loaded this hook, said what was wrong with the environment already.
  const bool preloaded = dlsym(RTLD_DEFAULT, "tdbg_preload_set_step_sink") != nullptr;
  g_settings.config = interpose::config_from_environment(/*report=*/!preloaded);
  const std::string& h = g_settings.config.hash;
  if (h == "all" || h.empty()) {
    g_settings.hash = HashMode::kAll;
  } else if (h == "outputs") {
    g_settings.hash = HashMode::kOutputs;
  } else if (h == "none") {
    g_settings.hash = HashMode::kNone;
  } else {
    // A value that cannot be used is an error, said even when quiet; the recording goes on
    // with the default, which the run's settings then hold (not the text that was set).
    std::fprintf(stderr, "tdbg: error: TDBG_HASH=%s is not all, outputs or none; hashing all\n",
                 h.c_str());
    g_settings.config.hash = "all";
  }
  // (A window that cannot be read leaves every step recorded.)
  if (!g_settings.config.steps.empty() &&
      !interpose::parse_step_window(g_settings.config.steps, &g_settings.steps)) {
    std::fprintf(stderr, "tdbg: error: TDBG_STEPS=%s is not A:B with A < B; recording all steps\n",
                 g_settings.config.steps.c_str());
    g_settings.config.steps.clear();
  }
  if (!g_settings.config.ops.empty()) {
    try {
      g_settings.op_filter =
          std::make_shared<const std::regex>(g_settings.config.ops, std::regex::ECMAScript);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tdbg: error: TDBG_OPS=%s is not a valid regex (%s); recording all ops\n",
                   g_settings.config.ops.c_str(), e.what());
      g_settings.config.ops.clear();
    }
  }
}

bool make_dirs(const std::string& path) {
  std::string partial;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!partial.empty() && mkdir(partial.c_str(), 0777) != 0 && errno != EEXIST) return false;
    }
    if (i < path.size()) partial += path[i];
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The descriptors this process holds on the database at `path` and its -wal and -shm files,
// found in /proc/self/fd; told to the preload to keep open (`keep`) or to let close again.
std::vector<int> g_database_fds;
void keep_database_fds(const std::string& path, bool keep) {
  using KeepFd = void (*)(int, int);
  static const auto keep_fd = reinterpret_cast<KeepFd>(dlsym(RTLD_DEFAULT, "tdbg_preload_keep_fd"));
  if (keep_fd == nullptr) return;
  if (!keep) {
    for (int fd : g_database_fds) keep_fd(fd, 0);
    g_database_fds.clear();
    return;
  }
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real) == nullptr) return;
  const std::string db = real;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == own) continue;
    char target[PATH_MAX];
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (db == target || db + "-wal" == target || db + "-shm" == target) {
      keep_fd(static_cast<int>(fd), 1);
      g_database_fds.push_back(static_cast<int>(fd));
    }
  }
  ::closedir(dir);
}

// Opens this process's database and writes the start metadata. Call with `g_open_mutex` held.
bool open_database_locked() {
  const std::string& out = g_settings.config.out;
  if (!make_dirs(out)) {
    std::fprintf(stderr, "tdbg: cannot create run directory %s: %s; not recording\n", out.c_str(),
                 std::strerror(errno));
    return false;
  }
  // A program that execs keeps its pid: the new image writes <host>-<pid>-2.sqlite, and so on.
  const std::string stem = out + "/" + host_name() + "-" + std::to_string(getpid());
  std::string path = stem + ".sqlite";
  struct stat existing;
  for (int k = 2; k < 1000 && ::stat(path.c_str(), &existing) == 0; ++k)
    path = stem + "-" + std::to_string(k) + ".sqlite";
  tracer::WriterOptions options;
  options.flush_interval_ms = static_cast<int>(g_settings.config.flush_ms);
  options.ring_ops = g_settings.config.ring;
  auto created = tracer::Writer::Create(path, options);
  if (!created.ok()) {
    std::fprintf(stderr, "tdbg: %s; not recording\n", created.status().message().c_str());
    // Noted where `tdbg record` looks after the program (a few bytes may still fit where a
    // database did not), so that it says why, not that no process loaded torch.
    if (FILE* note = std::fopen((out + "/" + interpose::kHookFailedFile).c_str(), "ae")) {
      std::fprintf(note, "%d\t%s%s\n", static_cast<int>(getpid()), interpose::kDatabaseFailed,
                   created.status().message().c_str());
      std::fclose(note);
    }
    return false;
  }
  tracer::Writer* w = created.value().release();
  write_start_metadata(w);
  // Its files are open now (the schema committed): kept open against a program that closes
  // descriptors it did not open. A forked child's list starts empty (the preload forgets it).
  g_database_fds.clear();
  keep_database_fds(path, true);
  // After the metadata, which made torch's default generator: exit handlers run last first,
  // so the close still finds it (a fork child inherits the registration).
  static bool at_exit_registered = false;
  if (!at_exit_registered) {
    at_exit_registered = true;
    std::atexit([] { session_shutdown(); });
  }
  g_generation.fetch_add(1);
  g_writer.store(w, std::memory_order_release);
  // Under the preload: a SIGTERM or a crash closes the database before it ends the process.
  using WatchSignals = void (*)();
  if (auto watch = reinterpret_cast<WatchSignals>(dlsym(RTLD_DEFAULT, "tdbg_preload_watch_signals")))
    watch();
  return true;
}

// Runs `what(w)` (the writer's close, or a flush) on a helper thread and waits a bounded
// time, so that a wedged writer can never hang the program's exit; the WAL keeps what was
// committed either way. With `until_committed`, the wait also ends shortly after the writer
// has committed everything appended before the call, even if it has not returned: a process
// ending on a corrupted heap (glibc's "double free" abort holds malloc's lock) blocks the
// writer in free() after its commit, and the data is already safe.
void run_bounded(tracer::Writer* w, Status (*what)(tracer::Writer*), const char* doing,
                 bool until_committed) {
  struct Shared {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
  };
  const int64_t target = w->appended();
  auto shared = std::make_shared<Shared>();
  try {
    quiet_thread([w, what, doing, shared] {
      Status s = what(w);
      if (!s.ok()) std::fprintf(stderr, "tdbg: %s the run database: %s\n", doing, s.message().c_str());
      std::lock_guard<std::mutex> lock(shared->m);
      shared->done = true;
      shared->cv.notify_all();
    }).detach();
  } catch (...) {
    (void)what(w);
    return;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
  Clock::time_point committed_at{};
  std::unique_lock<std::mutex> lock(shared->m);
  while (!shared->cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return shared->done; })) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      std::fprintf(stderr, "tdbg: %s the run database did not finish within 10 s; what was "
                   "committed before stays readable\n", doing);
      return;
    }
    if (!until_committed || w->committed_through() < target) continue;
    if (committed_at == Clock::time_point{}) {
      committed_at = now;
    } else if (now - committed_at >= std::chrono::milliseconds(200)) {
      say("the run database holds everything recorded; its writer did not return after the "
          "commit (the process may have damaged its heap)");
      return;
    }
  }
}

// Lock order across fork: the hook's tables, then the session, then the writer (which waits
// for its background thread to leave SQLite), so the child inherits no lock held elsewhere.
void at_fork_prepare() {
  hook_prepare_fork();
  OpenLock::lock();
  if (tracer::Writer* w = g_writer.load()) w->prepare_fork();
}

void at_fork_parent() {
  if (tracer::Writer* w = g_writer.load()) w->after_fork_parent();
  OpenLock::unlock();
  hook_after_fork_parent();
  if (g_forks.fetch_add(1) == 0) g_first_fork_step.store(hook_main_step());
}

void at_fork_child() {
  // The child must not touch the parent's SQLite handle or threads: forget them, and open a
  // database of its own only if it runs ops (DataLoader workers do).
  new (&g_open_mutex) std::mutex();
  g_open_owner.store(0);
  tracer::Writer* inherited = g_writer.exchange(nullptr);
  if (inherited) {
    inherited->abandon_after_fork();  // leaked on purpose: its destructor would join threads
    g_open_lazily.store(!g_closed.load());
  }
  g_forked_at_step = hook_after_fork_child();
  g_forks.store(0);
  g_first_fork_step.store(-1);
}

// Fallback for exits that skip atexit (e.g. a static destructor order we did not expect).
struct ShutdownAtStaticDestruction {
  ~ShutdownAtStaticDestruction() { session_shutdown(); }
} g_shutdown_guard;

}  // namespace

const Settings& settings() { return g_settings; }

bool recording() {
  return g_writer.load(std::memory_order_relaxed) != nullptr ||
         g_open_lazily.load(std::memory_order_relaxed);
}

tracer::Writer* writer() {
  tracer::Writer* w = g_writer.load(std::memory_order_acquire);
  if (w || !g_open_lazily.load(std::memory_order_relaxed)) return w;
  OpenLock lock;
  w = g_writer.load(std::memory_order_acquire);
  if (w) return w;
  // Cleared only once the writer is there: a thread that meets neither would not record.
  if (g_open_lazily.load() && !g_closed.load()) open_database_locked();
  g_open_lazily.store(false);  // opened, or failed and not tried again
  return g_writer.load(std::memory_order_acquire);
}

tracer::Writer* open_writer() { return g_writer.load(std::memory_order_acquire); }

uint64_t writer_generation() { return g_generation.load(std::memory_order_relaxed); }

bool session_start() {
  read_settings();
  if (g_settings.config.out.empty()) {
    say("TDBG_OUT is not set; this process is not recorded");
    return false;
  }
  // Without the preload (which closes the database before an exec), a process that runs no op
  // before it execs its program would leave an empty database, and the program another.
  if (dlsym(RTLD_DEFAULT, "tdbg_preload_watch_signals") == nullptr) {
    g_open_lazily.store(true);
  } else {
    OpenLock lock;
    if (!open_database_locked()) return false;
  }
  pthread_atfork(at_fork_prepare, at_fork_parent, at_fork_child);
  watch_files_read();
  return true;
}

void note_thread_counts() {
  try {
    const int threads = at::get_num_threads();
    if (g_num_threads.exchange(threads) != threads) {
      std::lock_guard<std::mutex> lock(g_threads_history_mutex);
      if (g_threads_history.size() < kMaxThreadChanges)
        g_threads_history.emplace_back(hook_main_step(), threads);
    }
    g_num_interop_threads.store(at::get_num_interop_threads());
  } catch (...) {
  }
}

namespace {
// Ends the recording: the metadata known at the end, then `finish` (close or flush).
void end_recording(bool close) {
  if (OpenLock::held_by_this_thread()) {
    // A signal handler ending the process interrupted this thread while it opened the
    // database: the open cannot finish, so leave the database as it is (it has no ops yet;
    // `tdbg diff` reads it as a process that did not close its database).
    return;
  }
  // (Another thread opening takes milliseconds; a close that cannot have the lock in 5 s
  // leaves the database as committed, as a kill would.)
  if (!OpenLock::lock_within(std::chrono::seconds(5))) return;
  struct Unlock {
    ~Unlock() { OpenLock::unlock(); }
  } unlock_at_end;
  if (g_closed.exchange(true)) return;
  g_open_lazily.store(false);
  tracer::Writer* w = g_writer.exchange(nullptr);
  if (!w) return;
  try {
    detach_gpu_sink();
  } catch (...) {
  }
  write_torch_settings(w, /*at_close=*/true);
  // How the process ends, when the preload saw it (exit, return from main, a signal it sent
  // itself or caught): "3", "signal 2".
  using ExitStatus = int (*)(int*, int*);
  if (auto ending = reinterpret_cast<ExitStatus>(dlsym(RTLD_DEFAULT, "tdbg_preload_exit_status"))) {
    int status = -1, signal = -1;
    if (ending(&status, &signal) == 1)
      w->set_meta("exit_status", signal >= 0 ? "signal " + std::to_string(signal)
                                             : std::to_string(status));
  }
  // Where each thread was at the end: a thread that another thread's abort or a signal from
  // outside stopped inside an op (a hang a watchdog ended) has no other record of it.
  if (const std::string in_flight = hook_in_flight(); !in_flight.empty())
    w->set_meta("in_flight", in_flight);
  // How far the program got, recorded or not: a --steps window it never reached says so.
  w->set_meta("steps_reached", std::to_string(hook_main_step()));
  w->set_meta("seed_history", seed_history());
  w->set_meta("end_time_ns", std::to_string(wall_ns()));
  if (close) {
    keep_database_fds("", false);  // SQLite closes them now
    run_bounded(w, [](tracer::Writer* x) { return x->close(); }, "closing", false);
  } else
    run_bounded(
        w,
        [](tracer::Writer* x) {
          Status st = x->flush();
          x->release_reserve();
          return st;
        },
        "committing", true);
  // `w` is not deleted: a thread still inside an op may hold the pointer.
}
}  // namespace

void session_shutdown() { end_recording(/*close=*/true); }

void session_finish() { end_recording(/*close=*/false); }

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t wall_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void say(const std::string& message) {
  if (!g_settings.config.quiet) std::fprintf(stderr, "tdbg: %s\n", message.c_str());
}

}  // namespace tdbg::torchhook

extern "C" void tdbg_torch_shutdown(void) {
  try {
    tdbg::torchhook::session_shutdown();
  } catch (...) {
  }
}

extern "C" void tdbg_torch_finish(void) {
  try {
    tdbg::torchhook::session_finish();
  } catch (...) {
  }
}

extern "C" void tdbg_torch_write_unfinished(int tid) {
  try {
    tdbg::torchhook::hook_write_unfinished(tid);
  } catch (...) {
  }
}

extern "C" int tdbg_torch_recording(void) { return tdbg::torchhook::recording() ? 1 : 0; }
