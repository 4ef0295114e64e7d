// Signals that end a recording process: a SIGTERM from a job scheduler, `timeout` or
// multiprocessing.Pool.terminate(), a SIGHUP, a segfault in an extension. Without this, their
// default action ends the process at once and the ops recorded since the writer's last commit
// (--flush-ms, or all of them in a short-lived Pool worker) are lost.
//
// Where a signal is left at its default action, tdbg installs a handler that only wakes a
// watcher thread (the handler itself does nothing that is not async-signal-safe, and never
// touches a lock). The watcher ends the recording (every op recorded so far is committed with
// the end metadata, `exit_status` "signal N"; the database stays in WAL mode, as after a kill,
// to spare the program the close's checkpoint), puts the default action back and sends
// the signal again, so the process ends exactly as it would have without tdbg: same signal,
// same exit status, a core dump where the default makes one.
//
// - Requests to end (SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGUSR1/2, SIGALRM, SIGXCPU,
//   SIGVTALRM): the handler returns at once, the interrupted thread goes on (releasing any
//   lock it holds) until the watcher has closed the database, a few milliseconds. One the
//   program sends itself (`os.kill(os.getpid(), SIGTERM)`, `raise`) is not left to run on:
//   the sending thread closes the recording first and the signal then takes its default
//   action (`end_before_own_request`, from the kill/raise hooks).
// - Faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS): the faulting thread
//   cannot go on; it waits in the handler, at most kFaultWaitMs, for the watcher to close,
//   then ends with the fault's default action. If it held a lock the close needs, the close
//   times out and the process ends as before, later by that bound.
//
// A program that installs its own handler replaces tdbg's (Python's `signal.signal`, which
// also reports a signal's handler from what it saw at start-up, before tdbg). A process that
// inherits the handlers through fork() but records nothing ends at once with the default
// action. exec() resets them.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "base/quiet_thread.h"
#include "interpose/preload.h"

namespace tdbg::preload {
namespace {

constexpr int kRequestSignals[] = {SIGTERM, SIGHUP,  SIGINT,  SIGQUIT,  SIGUSR1,
                                   SIGUSR2, SIGALRM, SIGXCPU, SIGVTALRM};
constexpr int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS};
// How long a faulting thread waits for the close (which bounds itself at 10 s).
constexpr int kFaultWaitMs = 12000;

// The process whose watcher reads `g_wake`; 0 before one runs and in a fork child, where the
// watcher thread does not exist.
std::atomic<pid_t> g_watch_pid{0};
int g_wake[2] = {-1, -1};  // handler -> watcher: a `Wake` (written at once: under PIPE_BUF)
int g_done[2] = {-1, -1};  // watcher -> a faulting thread waiting in its handler
int g_said_no_watcher = 0;

// What the handler tells the watcher: the signal, and for a fault the thread it stopped, whose
// unfinished ops the close writes (the op a crash happened in is the one to see).
struct Wake {
  int32_t sig = 0;  // 0: an `_exit(tid)` waits for the close (`close_on_watcher`)
  int32_t tid = 0;  // 0: a request to end, no thread waits
};

pid_t this_pid() { return static_cast<pid_t>(syscall(SYS_getpid)); }

bool is_fault(int sig) {
  for (int s : kFaultSignals)
    if (s == sig) return true;
  return false;
}

// Puts the default action back (async-signal-safe).
void restore_default(int sig) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
}

// Ends the process with `sig` as its default action would: sent to this thread, unblocked.
void end_with(int sig) {
  restore_default(sig);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  syscall(SYS_tgkill, this_pid(), static_cast<pid_t>(syscall(SYS_gettid)), sig);
}

// Where this thread reads memory behind a tensor that torch did not allocate
// (`tdbg_preload_guarded_read`): a fault there abandons the read instead of ending the
// program. Initial-exec TLS, safe in a signal handler: this library is preloaded.
__attribute__((tls_model("initial-exec"))) thread_local sigjmp_buf* t_read_guard = nullptr;

void on_ending_signal(int sig, siginfo_t* info, void*) {
  if ((sig == SIGSEGV || sig == SIGBUS) && info != nullptr && info->si_code > 0 &&
      t_read_guard != nullptr) {
    sigjmp_buf* guard = t_read_guard;
    t_read_guard = nullptr;
    siglongjmp(*guard, 1);
  }
  const int saved = errno;
  const bool watched = this_pid() == g_watch_pid.load() && g_wake[1] >= 0;
  if (watched) {
    Wake wake;
    wake.sig = sig;
    wake.tid = is_fault(sig) ? static_cast<int32_t>(syscall(SYS_gettid)) : 0;
    ssize_t n = write(g_wake[1], &wake, sizeof(wake));
    (void)n;
    if (!is_fault(sig)) {
      errno = saved;
      return;  // the watcher closes, then ends the process with `sig`
    }
    struct pollfd done = {g_done[0], POLLIN, 0};
    while (poll(&done, 1, kFaultWaitMs) < 0 && errno == EINTR) {
    }
  }
  // A fault the kernel raised for an instruction: returning runs it again, now with the
  // default action. Anything else (kill, abort, a process without a watcher) is sent again.
  if (is_fault(sig) && info != nullptr && info->si_code > 0 && sig != SIGABRT) {
    restore_default(sig);
  } else {
    end_with(sig);
  }
  errno = saved;
}

// Tells the thread waiting in `wake_and_wait` or in the fault handler that the watcher is done.
void tell_done() {
  const unsigned char done = 1;
  ssize_t w = write(g_done[1], &done, 1);
  (void)w;
}

void* watch(void*) {
  for (;;) {
    Wake wake;
    ssize_t n = read(g_wake[0], &wake, sizeof(wake));
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(wake))) return nullptr;
    const int sig = wake.sig;
    if (sig == 0) {
      close_recording(1, wake.tid & 0xff);
      tell_done();
      continue;
    }
    finish_recording(sig, wake.tid);
    if (is_fault(sig)) {
      // The faulting thread ends the process itself, with the fault's own details.
      tell_done();
      continue;
    }
    end_with(sig);
  }
}

void close_pair(int* fds) {
  for (int i = 0; i < 2; ++i) {
    if (fds[i] >= 0) close(fds[i]);
    fds[i] = -1;
  }
}

bool is_ours(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) != 0 && action.sa_sigaction == on_ending_signal;
}

void install(int sig) {
  struct sigaction current;
  if (sigaction(sig, nullptr, &current) != 0) return;
  const bool by_default = (current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_DFL;
  if (!by_default && !is_ours(current)) return;
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_sigaction = on_ending_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(sig, &action, nullptr);
}

}  // namespace

void watch_ending_signals() {
  const pid_t pid = this_pid();
  if (g_watch_pid.load() == pid) return;
  // In a fork child the pipes are the parent's: its handler must not wake the parent.
  close_pair(g_wake);
  close_pair(g_done);
  if (pipe2(g_wake, O_CLOEXEC) != 0 || pipe2(g_done, O_CLOEXEC) != 0) {
    close_pair(g_wake);
    close_pair(g_done);
    return;
  }
  bool started = false;
  {
    SignalsBlocked blocked;  // the watcher takes no signal itself
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    // The default stack: a fixed small one fails (EINVAL) where the program's static TLS is
    // large (a libtorch C++ program), and the close runs torch and SQLite code on it.
    pthread_t thread;
    started = pthread_create(&thread, &attr, watch, nullptr) == 0;
    pthread_attr_destroy(&attr);
  }
  if (!started) {
    close_pair(g_wake);
    close_pair(g_done);
    say_once(&g_said_no_watcher, "cannot start the signal watcher; a signal that ends this "
             "process loses the ops of its last --flush-ms");
    return;
  }
  g_watch_pid.store(pid);
  for (int sig : kRequestSignals) install(sig);
  for (int sig : kFaultSignals) install(sig);
}

namespace {
// Wakes the watcher with `wake` and waits at most `wait_ms` for it to say it is done. False
// when this process has no watcher.
bool wake_and_wait(const Wake& wake, int wait_ms) {
  if (this_pid() != g_watch_pid.load() || g_wake[1] < 0) return false;
  if (write(g_wake[1], &wake, sizeof(wake)) != static_cast<ssize_t>(sizeof(wake))) return false;
  struct pollfd done = {g_done[0], POLLIN, 0};
  while (poll(&done, 1, wait_ms) < 0 && errno == EINTR) {
  }
  return true;
}
}  // namespace

bool finish_before_fault(int sig) {
  if (!is_fault(sig)) return false;
  Wake wake;
  wake.sig = sig;
  wake.tid = static_cast<int32_t>(syscall(SYS_gettid));
  return wake_and_wait(wake, kFaultWaitMs);
}

bool close_on_watcher(int status, int wait_ms) {
  Wake wake;
  wake.sig = 0;
  wake.tid = status;
  return wake_and_wait(wake, wait_ms);
}

void forget_watcher_after_fork() {
  g_watch_pid.store(0);
  close_pair(g_wake);
  close_pair(g_done);
}

bool ending_handler_installed(int sig) {
  struct sigaction current;
  return sigaction(sig, nullptr, &current) == 0 && is_ours(current);
}

bool end_before_own_request(int sig) {
  if (is_fault(sig) || !ending_handler_installed(sig)) return false;
  close_recording(2, sig);
  restore_default(sig);
  return true;
}

}  // namespace tdbg::preload

extern "C" __attribute__((visibility("default"))) int tdbg_preload_guarded_read(
    void (*read)(void*), void* arg) {
  using tdbg::preload::t_read_guard;
  // Only where the fault handlers are tdbg's: a program's own handler sees its faults as
  // before, and so does a process whose handlers tdbg never installed.
  if (t_read_guard != nullptr || !tdbg::preload::ending_handler_installed(SIGSEGV) ||
      !tdbg::preload::ending_handler_installed(SIGBUS)) {
    read(arg);
    return 0;
  }
  sigjmp_buf guard;
  if (sigsetjmp(guard, 1) != 0) return -1;  // the handler cleared t_read_guard
  t_read_guard = &guard;
  read(arg);
  t_read_guard = nullptr;
  return 0;
}

extern "C" __attribute__((visibility("default"))) void tdbg_preload_watch_signals(void) {
  tdbg::preload::watch_ending_signals();
}
