// Puts the run database's descriptors at high numbers (high_fds.h), through SQLite's
// replaceable "open" of the unix VFS: the one SQLite calls for a database, its -wal, -shm and
// -journal files.
#include "tracer/high_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>

namespace tdbg::tracer {
namespace {

using OpenFn = int (*)(const char*, int, int);  // the unix VFS's "open": path, flags, mode

std::atomic<OpenFn> g_next_open{nullptr};
// The database's absolute path (a copy, never freed: a process names one or two).
std::atomic<const char*> g_db_path{nullptr};

bool is_database_file(const char* name) {
  const char* db = g_db_path.load(std::memory_order_acquire);
  if (db == nullptr || name == nullptr) return false;
  const size_t n = strlen(db);
  if (strncmp(name, db, n) != 0) return false;
  const char* rest = name + n;
  return *rest == '\0' || strcmp(rest, "-wal") == 0 || strcmp(rest, "-shm") == 0 ||
         strcmp(rest, "-journal") == 0;
}

int open_high(const char* name, int flags, int mode) {
  const int fd = g_next_open.load(std::memory_order_acquire)(name, flags, mode);
  if (fd < 0 || !is_database_file(name)) return fd;
  const int floor = HighDescriptorFloor();
  if (floor == 0 || fd >= floor) return fd;
  const int saved = errno;
  const int moved = fcntl(fd, (flags & O_CLOEXEC) != 0 ? F_DUPFD_CLOEXEC : F_DUPFD, floor);
  if (moved < 0) {  // every high number taken: the usual one serves
    errno = saved;
    return fd;
  }
  ::close(fd);
  errno = saved;
  return moved;
}

// The absolute form SQLite gives its opens: the real directory and the file's name.
std::string absolute(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  char real[PATH_MAX];
  if (::realpath(dir.c_str(), real) == nullptr) return path;
  const std::string out = real;
  return out == "/" ? out + base : out + "/" + base;
}

}  // namespace

int HighDescriptorFloor() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  const rlim_t soft = limit.rlim_cur == RLIM_INFINITY ? 1024 : limit.rlim_cur;
  if (soft < 256) return 0;  // too few numbers to set some aside
  return static_cast<int>(std::min<rlim_t>(soft, 1024) - 64);
}

void PlaceDatabaseDescriptorsHigh(const std::string& db_path) {
  g_db_path.store(strdup(absolute(db_path).c_str()), std::memory_order_release);
  static std::once_flag installed;
  std::call_once(installed, [] {
    sqlite3_vfs* vfs = sqlite3_vfs_find("unix");
    if (vfs == nullptr || vfs->iVersion < 3 || vfs->xGetSystemCall == nullptr) return;
    auto next = reinterpret_cast<OpenFn>(vfs->xGetSystemCall(vfs, "open"));
    if (next == nullptr) return;
    g_next_open.store(next, std::memory_order_release);
    vfs->xSetSystemCall(vfs, "open", reinterpret_cast<sqlite3_syscall_ptr>(open_high));
  });
}

}  // namespace tdbg::tracer
