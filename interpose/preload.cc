// libtdbg_preload.so's core: notices libtorch being loaded (at `import torch`, or at start-up
// for a program linked against it) and then loads libtdbg_torch.so from beside itself. It
// links only libc, so a process that never loads torch runs unchanged, and every failure
// degrades to "not recorded", said once on stderr.
#include "interpose/preload.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "interpose/config.h"
#include "interpose/preload_api.h"

extern "C" {
extern void* tdbg_front_dlopen_direct;
extern void* tdbg_front_dlsym_direct;
extern void* tdbg_front_dlsym_real;
}

namespace tdbg::preload {
namespace {

#define TDBG_TLS __attribute__((tls_model("initial-exec"))) thread_local

// Nesting of dlopen calls on this thread: a dlopen made by a library constructor inside
// another dlopen must not load anything itself (that would run initializers early).
TDBG_TLS int t_dlopen_depth = 0;
// The host's return address for the dlopen/dlsym slow paths (see preload_front.cc).
TDBG_TLS void* t_front_caller = nullptr;

struct DepthGuard {
  DepthGuard() { ++t_dlopen_depth; }
  ~DepthGuard() { --t_dlopen_depth; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;
};

enum TorchState : int { kTorchNotSeen = 0, kTorchLoading = 1, kTorchSettled = 2 };
std::atomic<int> g_torch_state{kTorchNotSeen};
// `dlpi_adds` at the last look: nothing new mapped means nothing to scan.
std::atomic<unsigned long long> g_last_adds{0};
// True once the host's `main` is about to run: before that, loading the hook from a dlopen
// made by some start-up constructor could initialize libtorch ahead of its turn.
std::atomic<bool> g_main_started{false};
tdbg_main_fn g_host_main = nullptr;

bool g_gpu_enabled = true;
bool g_quiet = false;

// Set when libtdbg_torch.so is loaded: flushes its database on exits that skip atexit.
std::atomic<void (*)()> g_torch_shutdown{nullptr};
// Its commit without the close (`tdbg_torch_finish`), for a process a signal is ending, and
// what writes the ops a faulting thread was inside (`tdbg_torch_write_unfinished`).
std::atomic<void (*)()> g_torch_finish{nullptr};
std::atomic<void (*)(int)> g_torch_unfinished{nullptr};
// The process that loaded the hook; a vfork child shares its memory and must not flush.
std::atomic<pid_t> g_recording_pid{0};

int g_said_torch_lib = 0;
int g_said_no_out = 0;
int g_said_no_real = 0;

using dlopen_fn = void* (*)(const char*, int);

dlsym_fn real_dlsym_now() { return real_dlsym_fn(); }

// True if the libtorch that holds the dispatcher (libtorch_cpu, or a monolithic libtorch)
// is mapped into the process.
bool is_torch_library(const char* path) {
  const char* base = strrchr(path, '/');
  base = base == nullptr ? path : base + 1;
  return strncmp(base, "libtorch_cpu.so", 15) == 0 || strncmp(base, "libtorch.so", 11) == 0;
}

struct TorchScan {
  unsigned long long adds = 0;
  bool unchanged = false;
  bool found = false;
};

int scan_object(struct dl_phdr_info* info, size_t, void* data) {
  auto* scan = static_cast<TorchScan*>(data);
  if (scan->adds == 0) {
    scan->adds = info->dlpi_adds;
    if (scan->adds == g_last_adds.load(std::memory_order_relaxed)) {
      scan->unchanged = true;
      return 1;
    }
  }
  if (info->dlpi_name != nullptr && is_torch_library(info->dlpi_name)) {
    scan->found = true;
    return 1;
  }
  return 0;
}

// The directory of this library, for finding libtdbg_torch.so beside it.
bool own_directory(char* out, size_t size) {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&own_directory), &info) == 0 || info.dli_fname == nullptr)
    return false;
  const char* slash = strrchr(info.dli_fname, '/');
  if (slash == nullptr) return false;
  size_t n = static_cast<size_t>(slash - info.dli_fname);
  if (n + 1 > size) return false;
  memcpy(out, info.dli_fname, n);
  out[n] = '\0';
  return true;
}

void after_fork_in_child() {
  if (g_torch_shutdown.load() != nullptr) g_recording_pid.store(getpid());
  forget_watcher_after_fork();
  forget_kept_fds();
}

// Notes in the run directory why the hook could not be loaded into this process
// (`interpose::kHookFailedFile`).
void note_hook_failure(const std::string& out, const char* why) {
  const std::string path = out + "/" + interpose::kHookFailedFile;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char line[600];
  int n = snprintf(line, sizeof(line), "%d\t%s\n", static_cast<int>(getpid()), why);
  if (n > 0) {
    ssize_t written = write(fd, line, std::min(static_cast<size_t>(n), sizeof(line) - 1));
    (void)written;
  }
  close(fd);
}

void load_torch_hook() {
  // Malformed TDBG_* values are said here, once, by a process that loads torch: not by every
  // process the variables reach (a shell, `nice`, `ls`), whose stderr stays its own.
  interpose::Config config = interpose::config_from_environment(/*report=*/true);
  if (config.out.empty()) {
    if (!config.quiet)
      say_once(&g_said_no_out,
               "torch is loaded but TDBG_OUT is not set; not recording (run "
               "the program under `tdbg record`)");
    return;
  }
  char path[PATH_MAX];
  const char* override_path = getenv("TDBG_TORCH_LIB");
  if (override_path != nullptr && *override_path != '\0') {
    snprintf(path, sizeof(path), "%s", override_path);
  } else {
    char dir[PATH_MAX - 32];
    if (!own_directory(dir, sizeof(dir))) {
      say_once(&g_said_torch_lib, "cannot tell where libtdbg_preload.so is; not recording");
      return;
    }
    if (snprintf(path, sizeof(path), "%s/libtdbg_torch.so", dir) >= static_cast<int>(sizeof(path)))
      return;
  }
  auto real_dlopen = reinterpret_cast<dlopen_fn>(resolve_real(kHook_dlopen));
  if (real_dlopen == nullptr) return;
  void* handle = real_dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    say_once(&g_said_torch_lib, "cannot load the torch hook (%s); not recording this process",
             why != nullptr ? why : path);
    note_hook_failure(config.out, why != nullptr ? why : path);
    return;
  }
  if (dlsym_fn real_dlsym = real_dlsym_now()) {
    auto shutdown = reinterpret_cast<void (*)()>(real_dlsym(handle, "tdbg_torch_shutdown"));
    if (shutdown == nullptr) {
      say_once(&g_said_torch_lib, "%s is not tdbg's torch hook (no tdbg_torch_shutdown); not "
               "recording this process", path);
      note_hook_failure(config.out, (std::string(path) + " is not tdbg's torch hook").c_str());
      return;
    }
    g_torch_finish.store(reinterpret_cast<void (*)()>(real_dlsym(handle, "tdbg_torch_finish")));
    g_torch_unfinished.store(
        reinterpret_cast<void (*)(int)>(real_dlsym(handle, "tdbg_torch_write_unfinished")));
    g_recording_pid.store(getpid());
    g_torch_shutdown.store(shutdown);
  }
}

// Looks whether libtorch is mapped now and, the first time it is, loads the torch hook.
// Called only outside any dlopen (depth 0) and once `main` is about to run.
void check_for_torch() {
  if (g_torch_state.load(std::memory_order_acquire) != kTorchNotSeen) return;
  if (!g_main_started.load(std::memory_order_acquire)) return;
  TorchScan scan;
  dl_iterate_phdr(scan_object, &scan);
  if (scan.unchanged) return;
  g_last_adds.store(scan.adds, std::memory_order_relaxed);
  if (!scan.found) return;
  int expected = kTorchNotSeen;
  if (!g_torch_state.compare_exchange_strong(expected, kTorchLoading)) return;
  load_torch_hook();
  g_torch_state.store(kTorchSettled, std::memory_order_release);
  // Nothing is left for dlopen's slow path: from now on the stub jumps straight through.
  tdbg_front_dlopen_direct = resolve_real(kHook_dlopen);
}

bool has_search_path(const struct link_map* map) {
  if (map == nullptr || map->l_ld == nullptr) return false;
  for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d)
    if (d->d_tag == DT_RPATH || d->d_tag == DT_RUNPATH) return true;
  return false;
}

int match_loaded_name(struct dl_phdr_info* info, size_t, void* data) {
  const char* wanted = static_cast<const char*>(data);
  if (info->dlpi_name == nullptr) return 0;
  const char* base = strrchr(info->dlpi_name, '/');
  base = base == nullptr ? info->dlpi_name : base + 1;
  return strcmp(base, wanted) == 0 ? 1 : 0;
}

// The dynamic loader searches a bare library name in the *caller's* RPATH/RUNPATH, and the
// caller of the real dlopen is now tdbg. For such callers, find the file the way the loader
// would (same directories, same order, up to the system defaults that do not depend on the
// caller) and hand the real dlopen its full path. Returns false to pass `file` unchanged.
bool search_caller_paths(const char* file, void* caller, char* out, size_t size) {
  if (file == nullptr || strchr(file, '/') != nullptr || caller == nullptr) return false;
  Dl_info info;
  struct link_map* map = nullptr;
  if (dladdr1(caller, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0) return false;
  if (!has_search_path(map)) return false;
  // Already loaded under that name: the loader answers from its list, whatever the path.
  if (dl_iterate_phdr(match_loaded_name, const_cast<char*>(file)) != 0) return false;
  Dl_serinfo probe;
  if (dlinfo(map, RTLD_DI_SERINFOSIZE, &probe) != 0) return false;
  auto* serinfo = static_cast<Dl_serinfo*>(malloc(probe.dls_size));
  if (serinfo == nullptr) return false;
  bool found = false;
  if (dlinfo(map, RTLD_DI_SERINFOSIZE, serinfo) == 0 &&
      dlinfo(map, RTLD_DI_SERINFO, serinfo) == 0) {
    for (unsigned i = 0; i < serinfo->dls_cnt && !found; ++i) {
      const Dl_serpath& dir = serinfo->dls_serpath[i];
      if (dir.dls_flags & (LA_SER_CONFIG | LA_SER_DEFAULT)) break;
      if (dir.dls_name == nullptr || dir.dls_name[0] == '\0') continue;
      int n = snprintf(out, size, "%s/%s", dir.dls_name, file);
      if (n > 0 && static_cast<size_t>(n) < size && access(out, F_OK) == 0) found = true;
    }
  }
  free(serinfo);
  // dlinfo may have set a dlerror; the real dlopen below resets it.
  return found;
}

// How the process ends (tdbg_preload_exit_status): 0 unknown, 1 an exit code, 2 a signal.
std::atomic<int> g_ending_kind{0};
std::atomic<int> g_ending_value{0};

void note_ending(int kind, int value) {
  g_ending_value.store(value, std::memory_order_relaxed);
  g_ending_kind.store(kind, std::memory_order_release);
}

// True in the process that loaded the hook; never in a vfork child, which shares its memory
// and may do nothing but exec or exit.
bool recording_here() {
  return static_cast<pid_t>(syscall(SYS_getpid)) == g_recording_pid.load();
}

// Ends this process's recording with `end` (the hook's shutdown or finish), first noting how
// the process ends (`kind` as in note_ending; 0 notes nothing). Nothing in a process that does
// not record.
void end_recording(void (*end)(), int kind, int value) {
  if (end == nullptr || g_torch_shutdown.load() == nullptr || !recording_here()) return;
  if (kind != 0) note_ending(kind, value);
  end();
}

int tdbg_main(int argc, char** argv, char** envp) {
  g_main_started.store(true, std::memory_order_release);
  check_for_torch();
  const int status = g_host_main(argc, argv, envp);
  note_ending(1, status & 0xff);  // __libc_start_main then calls exit() from inside libc
  return status;
}

__attribute__((constructor)) void preload_init() {
  // First, before anything allocates: a sanitizer runtime preloaded ahead of tdbg initializes
  // at the first malloc and then looks up its interceptors through tdbg's dlsym.
  tdbg_front_dlsym_real = resolve_real(kHook_dlsym);
  // A relative TDBG_OUT (LD_PRELOAD by hand) names a folder of the directory the process
  // starts in: made absolute here, in the environment too, so that an os.chdir before torch
  // loads, or a child started from elsewhere, still writes into the same run directory.
  // (`tdbg record` passes an absolute path.)
  const char* out = getenv("TDBG_OUT");
  char cwd[PATH_MAX];
  if (out != nullptr && out[0] != '\0' && out[0] != '/' && getcwd(cwd, sizeof(cwd)) != nullptr) {
    const std::string absolute = std::string(cwd) + "/" + out;
    setenv("TDBG_OUT", absolute.c_str(), 1);
  }
  interpose::Config config = interpose::config_from_environment(/*report=*/false);
  g_gpu_enabled = config.gpu;
  g_quiet = config.quiet;
  // Without GPU interception dlsym has nothing to do: every lookup jumps straight through.
  if (!g_gpu_enabled) tdbg_front_dlsym_direct = tdbg_front_dlsym_real;
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
  // Resolved now, not at a first call from a signal handler or a vfork child.
  (void)real_close();
  (void)real_close_range();
  (void)real_closefrom();
}

}  // namespace

void close_recording(int kind, int value) { end_recording(g_torch_shutdown.load(), kind, value); }

void finish_recording(int signal, int faulting_tid) {
  auto unfinished = g_torch_unfinished.load();
  if (faulting_tid > 0 && unfinished != nullptr && g_torch_shutdown.load() != nullptr &&
      recording_here())
    unfinished(faulting_tid);
  auto finish = g_torch_finish.load();
  end_recording(finish != nullptr ? finish : g_torch_shutdown.load(), 2, signal);
}

void say_once(int* flag, const char* format, ...) {
  if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED) != 0) return;
  char line[512];
  int n = snprintf(line, sizeof(line), "tdbg: ");
  va_list args;
  va_start(args, format);
  int m = vsnprintf(line + n, sizeof(line) - n - 1, format, args);
  va_end(args);
  size_t len = static_cast<size_t>(n) + (m < 0 ? 0 : static_cast<size_t>(m));
  if (len > sizeof(line) - 2) len = sizeof(line) - 2;
  line[len++] = '\n';
  int saved = errno;
  ssize_t written = write(STDERR_FILENO, line, len);
  (void)written;
  errno = saved;
}

bool gpu_enabled() { return g_gpu_enabled; }

dlsym_fn real_dlsym_fn() {
  void* f = tdbg_front_dlsym_real;
  if (f == nullptr) f = resolve_real(kHook_dlsym);
  return reinterpret_cast<dlsym_fn>(f);
}

void* on_dlopen(const char* file, int mode) {
  void* caller = t_front_caller;
  auto real = reinterpret_cast<dlopen_fn>(resolve_real(kHook_dlopen));
  if (real == nullptr) {
    say_once(&g_said_no_real, "the real dlopen was not found");
    return nullptr;
  }
  char path[PATH_MAX];
  const char* target = file;
  if (t_dlopen_depth == 0 && search_caller_paths(file, caller, path, sizeof(path))) target = path;
  void* handle;
  {
    DepthGuard guard;
    handle = real(target, mode);
  }
  if (t_dlopen_depth == 0 && handle != nullptr) {
    int saved = errno;
    check_for_torch();
    errno = saved;
  }
  return handle;
}

void* on_dlsym(void* handle, const char* symbol) {
  dlsym_fn real = real_dlsym_now();
  if (real == nullptr) return nullptr;
  void* found = real(handle, symbol);
  // Loader APIs of GPU libraries: hand back the wrapper and keep the real function for it.
  if (found != nullptr && symbol != nullptr && g_gpu_enabled && handle != RTLD_NEXT &&
      handle != RTLD_DEFAULT &&
      (strncmp(symbol, "cu", 2) == 0 || strncmp(symbol, "nvrtc", 5) == 0 ||
       strncmp(symbol, "__cuda", 6) == 0)) {
    HookId id = hook_by_name(symbol);
    if (id != kHookCount && id > kHook__Exit && remember_real(id, found)) return wrapper_of(id);
  }
  return found;
}

int on___libc_start_main(tdbg_main_fn main, int argc, char** argv, void (*init)(void),
                         void (*fini)(void), void (*rtld_fini)(void), void* stack_end) {
  auto real = real___libc_start_main();
  if (real == nullptr) {
    say_once(&g_said_no_real, "the real __libc_start_main was not found");
    _exit(127);
  }
  g_host_main = main;
  return real(tdbg_main, argc, argv, init, fini, rtld_fini, stack_end);
}

namespace {
// How long `_exit` waits for the watcher's close: milliseconds when nothing blocks it; the
// bound only matters when the caller interrupted itself holding a lock the close needs.
constexpr int kExitCloseWaitMs = 3000;

[[noreturn]] void exit_now(void (*real)(int), int status) {
  // atexit handlers, where it would close, are skipped.
  if (!close_on_watcher(status, kExitCloseWaitMs)) close_recording(1, status & 0xff);
  if (real != nullptr) real(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}
}  // namespace

void on__exit(int status) { exit_now(real__exit(), status); }
void on__Exit(int status) { exit_now(real__Exit(), status); }

void on_exit(int status) {
  if (recording_here()) note_ending(1, status & 0xff);  // the database closes at atexit
  if (auto real = real_exit()) real(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

namespace {
// Whether `sig`, sent to this process now, ends it: its default action terminates (every
// signal but the ignored and stopping ones), it is left at that action (or at tdbg's handler,
// which ends the process the same way) and not blocked.
bool kills_this_process(int sig) {
  switch (sig) {
    case 0: case SIGCHLD: case SIGCONT: case SIGSTOP: case SIGTSTP: case SIGTTIN: case SIGTTOU:
    case SIGURG: case SIGWINCH:
      return false;
    case SIGKILL:
      return true;
    default:
      break;
  }
  struct sigaction action;
  if (sigaction(sig, nullptr, &action) != 0) return false;
  const bool by_default = (action.sa_flags & SA_SIGINFO) == 0 && action.sa_handler == SIG_DFL;
  if (!by_default && !ending_handler_installed(sig)) return false;
  sigset_t blocked;
  return pthread_sigmask(SIG_BLOCK, nullptr, &blocked) == 0 && sigismember(&blocked, sig) == 0;
}
}  // namespace

int on_kill(pid_t pid, int sig) {
  auto real = real_kill();
  if (real == nullptr) return static_cast<int>(syscall(SYS_kill, pid, sig));
  const pid_t self = static_cast<pid_t>(syscall(SYS_getpid));
  // Where tdbg's handler takes the signal, it closes (a fault also keeps the ops the thread
  // that takes it is inside: `os.kill(os.getpid(), SIGABRT)` inside an op); else close now.
  if (pid == self && kills_this_process(sig) && !end_before_own_request(sig) &&
      !ending_handler_installed(sig))
    close_recording(2, sig);
  return real(pid, sig);
}

int on_raise(int sig) {
  auto real = real_raise();
  if (real == nullptr)
    return static_cast<int>(syscall(SYS_tgkill, syscall(SYS_getpid), syscall(SYS_gettid), sig));
  // tdbg's own handler, where it takes the signal, does the close; else a fault raised with
  // the default action (torch's worker handlers): the ops this thread is inside and a commit.
  if (recording_here() && kills_this_process(sig)) {
    const int saved = errno;
    if (!end_before_own_request(sig) && !ending_handler_installed(sig) && !finish_before_fault(sig))
      close_recording(2, sig);
    errno = saved;
  }
  return real(sig);
}

namespace {
// Closes this process's recording before an exec that will replace it. Only in the recording
// process itself: a vfork child (subprocess) shares its memory and may do nothing but exec.
// Only when the target can be run: a PATH search tries names that cannot, and a program goes
// on when no exec succeeds.
template <typename WillReplace>
void close_before_exec(WillReplace will_replace) {
  // `will_replace` allocates: only asked in the recording process.
  if (g_torch_shutdown.load() != nullptr && recording_here() && will_replace())
    close_recording(0, 0);
}

bool runnable(const char* path) { return path != nullptr && access(path, X_OK) == 0; }

// `file` as execvp finds it: a name with a slash as is, else the first runnable entry of PATH.
bool runnable_on_path(const char* file) {
  if (file == nullptr || *file == '\0') return false;
  if (strchr(file, '/') != nullptr) return runnable(file);
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/bin:/usr/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (runnable(((dir.empty() ? std::string(".") : dir) + "/" + file).c_str())) return true;
    start = end + 1;
  }
  return false;
}

template <typename Real, typename... Args>
int exec_with(Real real, Args... args) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return real(args...);
}
}  // namespace

int on_execve(const char* path, char* const* argv, char* const* envp) {
  close_before_exec([&] { return runnable(path); });
  return exec_with(real_execve(), path, argv, envp);
}
int on_execv(const char* path, char* const* argv) {
  close_before_exec([&] { return runnable(path); });
  return exec_with(real_execv(), path, argv);
}
int on_execvp(const char* file, char* const* argv) {
  close_before_exec([&] { return runnable_on_path(file); });
  return exec_with(real_execvp(), file, argv);
}
int on_execvpe(const char* file, char* const* argv, char* const* envp) {
  close_before_exec([&] { return runnable_on_path(file); });
  return exec_with(real_execvpe(), file, argv, envp);
}
int on_fexecve(int fd, char* const* argv, char* const* envp) {
  close_before_exec([&] { return fd >= 0; });
  return exec_with(real_fexecve(), fd, argv, envp);
}

}  // namespace tdbg::preload

extern "C" __attribute__((visibility("default"))) int tdbg_preload_exit_status(int* status,
                                                                            int* signal) {
  using namespace tdbg::preload;
  const int kind = g_ending_kind.load(std::memory_order_acquire);
  if (kind == 1 && status != nullptr) *status = g_ending_value.load(std::memory_order_relaxed);
  if (kind == 2 && signal != nullptr) *signal = g_ending_value.load(std::memory_order_relaxed);
  return kind != 0 ? 1 : 0;
}

#ifndef TDBG_PRELOAD_GPU
// Built without the CUDA toolkit: there are no GPU events, but the torch hook may still
// register its sink.
extern "C" __attribute__((visibility("default"))) void tdbg_preload_set_gpu_sink(
    const struct tdbg_gpu_sink*) {}
#endif

extern "C" __attribute__((visibility("hidden"), used, noinline)) void tdbg_front_set_caller(
    void* caller) {
  tdbg::preload::t_front_caller = caller;
}
