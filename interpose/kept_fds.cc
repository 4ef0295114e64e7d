// The run database's file descriptors, kept open against a program that closes descriptors
// it did not open: `os.closerange(3, ...)` and `closefrom` in daemonizing code and launchers.
// SQLite would otherwise find its database, -wal and -shm closed (or worse, their numbers
// reused by the program's own files), lose everything not yet committed and spin retrying
// its locks at exit. The torch hook names the descriptors (`tdbg_preload_keep_fd`); close,
// close_range and closefrom leave those open and report success, as if the program had closed
// them, which it never opened. Each wrapper is async-signal-safe: a fixed table of atomics.
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "interpose/preload.h"
#include "interpose/preload_api.h"

namespace tdbg::preload {
namespace {

constexpr int kKeptMax = 16;
std::atomic<int> g_kept[kKeptMax] = {};  // fd + 1; 0 is a free slot
std::atomic<int> g_kept_count{0};        // slots ever used: a bound for the scans

bool kept(int fd) {
  if (fd < 0) return false;
  const int n = g_kept_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i)
    if (g_kept[i].load(std::memory_order_relaxed) == fd + 1) return true;
  return false;
}

// The smallest kept fd in [first, last], or -1.
long first_kept(unsigned first, unsigned last) {
  long found = -1;
  const int n = g_kept_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    const int fd = g_kept[i].load(std::memory_order_relaxed) - 1;
    if (fd >= 0 && static_cast<unsigned>(fd) >= first && static_cast<unsigned>(fd) <= last &&
        (found < 0 || fd < found))
      found = fd;
  }
  return found;
}

int close_range_now(unsigned first, unsigned last, int flags) {
  if (auto real = real_close_range()) return real(first, last, flags);
  return static_cast<int>(syscall(SYS_close_range, first, last, flags));
}

}  // namespace

void forget_kept_fds() {
  for (auto& slot : g_kept) slot.store(0, std::memory_order_relaxed);
  g_kept_count.store(0, std::memory_order_release);
}

int on_close(int fd) {
  if (kept(fd)) return 0;
  if (auto real = real_close()) return real(fd);
  return static_cast<int>(syscall(SYS_close, fd));
}

int on_close_range(unsigned first, unsigned last, int flags) {
  // The stretches between kept descriptors, each closed as asked.
  while (first <= last) {
    const long k = first_kept(first, last);
    if (k < 0) return close_range_now(first, last, flags);
    if (static_cast<unsigned>(k) > first && close_range_now(first, static_cast<unsigned>(k) - 1, flags) != 0)
      return -1;
    if (static_cast<unsigned>(k) == last) return 0;
    first = static_cast<unsigned>(k) + 1;
  }
  return 0;
}

void on_closefrom(int lowfd) {
  if (lowfd < 0) lowfd = 0;
  if (first_kept(static_cast<unsigned>(lowfd), ~0U) < 0) {
    if (auto real = real_closefrom()) return real(lowfd);
  }
  const int saved = errno;  // closefrom reports nothing
  if (on_close_range(static_cast<unsigned>(lowfd), ~0U, 0) != 0) {
    // No close_range (a kernel before 5.9): every descriptor up to the limit, one by one.
    const long limit = sysconf(_SC_OPEN_MAX);
    for (long fd = lowfd; fd < (limit > 0 ? limit : 1024); ++fd) on_close(static_cast<int>(fd));
  }
  errno = saved;
}

}  // namespace tdbg::preload

extern "C" __attribute__((visibility("default"))) void tdbg_preload_keep_fd(int fd, int keep) {
  using tdbg::preload::g_kept;
  using tdbg::preload::g_kept_count;
  if (fd < 0) return;
  if (!keep) {
    for (auto& slot : g_kept) {
      int expected = fd + 1;
      slot.compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
    }
    return;
  }
  for (int i = 0; i < tdbg::preload::kKeptMax; ++i) {
    if (g_kept[i].load(std::memory_order_relaxed) == fd + 1) return;
    int expected = 0;
    if (g_kept[i].compare_exchange_strong(expected, fd + 1, std::memory_order_acq_rel)) {
      int count = g_kept_count.load(std::memory_order_relaxed);
      while (count < i + 1 &&
             !g_kept_count.compare_exchange_weak(count, i + 1, std::memory_order_acq_rel)) {
      }
      return;
    }
  }
}
