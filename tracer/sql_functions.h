// SQL table-valued functions that unpack op blocks, so that a run database stays queryable by
// hand: `tdbg_ops(block)`, `tdbg_tensors(block)` and `tdbg_args(block)` give one row per op,
// tensor and argument of an `op_blocks.ops` BLOB, and the views of docs/schema.md (`op_view`,
// `tensor_view`, `arg_view`) are built on them. The reader registers them on its connection;
// `lib/libtdbg_sqlite.so` is the same code as a loadable extension for the `sqlite3` shell
// (`.load .../libtdbg_sqlite`) and Python's sqlite3 module (`load_extension`).
#pragma once

#include <sqlite3.h>

namespace tdbg::tracer {

// Registers the functions on `db`; returns SQLite's result code.
int RegisterSqlFunctions(sqlite3* db);

}  // namespace tdbg::tracer
