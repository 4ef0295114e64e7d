// Puts the run database's descriptors at high numbers. A program may dup2 a file of its own
// onto a low descriptor it did not open (a launcher's fd table, daemon-style redirection), and
// SQLite's writes would then go into the program's file. The writer's files sit where programs
// do not reach: just under the soft descriptor limit (960 of the usual 1024).
#ifndef TDBG_TRACER_HIGH_FDS_H_
#define TDBG_TRACER_HIGH_FDS_H_

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

}  // namespace tdbg::tracer

#endif  // TDBG_TRACER_HIGH_FDS_H_
