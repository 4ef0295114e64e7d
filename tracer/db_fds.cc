// The run database's file descriptors (db_fds.h), placed through SQLite's replaceable "open"
// of the unix VFS: the one SQLite calls for a database, its -wal, -shm and -journal files. The
// same wrapper notes each one opened (its number, device and inode) for the watch.
#include "tracer/db_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace tdbg::tracer {
namespace {

using OpenFn = int (*)(const char*, int, int);  // the unix VFS's "open": path, flags, mode

std::atomic<OpenFn> g_next_open{nullptr};
// The database's absolute path (a copy, never freed: a process names one or two).
std::atomic<const char*> g_db_path{nullptr};

// The files the watch covers: the database, -wal and -shm stay open while the connection
// lives (a -journal comes and goes, and is not watched).
enum class DbFile { kNone, kMain, kWal, kShm, kJournal };

DbFile database_file(const char* name) {
  const char* db = g_db_path.load(std::memory_order_acquire);
  if (db == nullptr || name == nullptr) return DbFile::kNone;
  const size_t n = strlen(db);
  if (strncmp(name, db, n) != 0) return DbFile::kNone;
  const char* rest = name + n;
  if (*rest == '\0') return DbFile::kMain;
  if (strcmp(rest, "-wal") == 0) return DbFile::kWal;
  if (strcmp(rest, "-shm") == 0) return DbFile::kShm;
  if (strcmp(rest, "-journal") == 0) return DbFile::kJournal;
  return DbFile::kNone;
}

// The watched descriptors of the database named last, as opened. Written by whichever thread
// opens the database (under `g_watch_mu`), read by its writer's thread.
struct Watched {
  int fd;
  DbFile file;
  dev_t dev;
  ino_t ino;
};
std::mutex g_watch_mu;
std::string g_watch_path;        // as PlaceDatabaseDescriptorsHigh was given it
std::vector<Watched> g_watched;  // a few: the database, -wal and -shm

int open_high(const char* name, int flags, int mode) {
  int fd = g_next_open.load(std::memory_order_acquire)(name, flags, mode);
  const DbFile file = fd < 0 ? DbFile::kNone : database_file(name);
  if (file == DbFile::kNone) return fd;
  const int saved = errno;
  const int floor = HighDescriptorFloor();
  if (floor != 0 && fd < floor) {
    const int moved = fcntl(fd, (flags & O_CLOEXEC) != 0 ? F_DUPFD_CLOEXEC : F_DUPFD, floor);
    if (moved >= 0) {  // else every high number is taken: the usual one serves
      ::close(fd);
      fd = moved;
    }
  }
  struct stat st;
  if (file != DbFile::kJournal && fstat(fd, &st) == 0) {
    std::lock_guard<std::mutex> lock(g_watch_mu);
    g_watched.push_back({fd, file, st.st_dev, st.st_ino});
  }
  errno = saved;
  return fd;
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
  {
    std::lock_guard<std::mutex> lock(g_watch_mu);
    g_watch_path = db_path;
    g_watched.clear();
  }
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

std::string DatabaseDescriptorsLost(const std::string& db_path) {
  std::lock_guard<std::mutex> lock(g_watch_mu);
  if (db_path != g_watch_path) return "";
  for (const Watched& w : g_watched) {
    struct stat st;
    if (fstat(w.fd, &st) == 0 && st.st_dev == w.dev && st.st_ino == w.ino) continue;
    const char* which = w.file == DbFile::kMain  ? "the database"
                        : w.file == DbFile::kWal ? "its -wal file"
                                                 : "its -shm file";
    return "the program closed tdbg's descriptor " + std::to_string(w.fd) + " (" + which +
           ") with a direct system call or put another file there (dup2), before these ops "
           "were committed: tdbg wrote nothing more, so that no record landed in the "
           "program's file";
  }
  return "";
}

}  // namespace tdbg::tracer
