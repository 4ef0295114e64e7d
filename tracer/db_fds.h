// The run database's file descriptors in a program that may close or replace descriptors it
// did not open. They are put at high numbers: a program may dup2 a file of its own onto a low
// descriptor (a launcher's fd table, daemon-style redirection), and SQLite's writes would then
// go into the program's file; they sit where programs do not reach, just under the soft
// descriptor limit (960 of the usual 1024). And they are watched: the writer checks them before
// each commit and stops writing (never into another file) where the program closed them with
// a direct system call or put another file there.
#ifndef TDBG_TRACER_DB_FDS_H_
#define TDBG_TRACER_DB_FDS_H_

#include <string>

namespace tdbg::tracer {

// From now on, SQLite's opens of `db_path` and its -wal, -shm and -journal files in this process
// return a high descriptor (the file opened at its usual one is moved there). Other files, this
// process's own SQLite use included, keep the numbers open() gives them. Call before opening
// the database; a later call names the next database instead (a forked child's own).
void PlaceDatabaseDescriptorsHigh(const std::string& db_path);

// The lowest number the database's descriptors are moved to, or 0 where the limit is too low
// for a high place (they stay where open() put them).
int HighDescriptorFloor();

// "" while every descriptor SQLite opened on `db_path`, its -wal and its -shm file (since
// PlaceDatabaseDescriptorsHigh named it) is still open on that file; else what happened to the
// first that is not ("the program closed descriptor 961, the database's -wal file, or put
// another file there"). "" for a path not named.
std::string DatabaseDescriptorsLost(const std::string& db_path);

}  // namespace tdbg::tracer

#endif  // TDBG_TRACER_DB_FDS_H_
