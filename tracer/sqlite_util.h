// Internal to tracer/: small RAII wrappers over the SQLite C API shared by the writer and the
// reader. Not a public header: nothing outside tracer/ includes it.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tdbg::tracer::internal {

// A prepared statement, finalized on destruction. Bind helpers store "none" values (id 0,
// `kNoSeq`) as SQL NULL so that hand-written queries read naturally.
class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt(Stmt&& other) noexcept : stmt_(other.stmt_) { other.stmt_ = nullptr; }
  Stmt& operator=(Stmt&& other) noexcept {
    if (this != &other) {
      finalize();
      stmt_ = other.stmt_;
      other.stmt_ = nullptr;
    }
    return *this;
  }
  ~Stmt() { finalize(); }

  // Prepares `sql` on `db`; the error names `what` (usually the database path).
  Status prepare(sqlite3* db, std::string_view sql, const std::string& what) {
    finalize();
    int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                                SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
    if (rc != SQLITE_OK) {
      return Status::Error(what + ": " + sqlite3_errmsg(db) +
                           " (preparing: " + std::string(sql.substr(0, 60)) + ")");
    }
    return Status::Ok();
  }

  // Prepares `sql` on `db` and returns SQLite's result code (for callers that classify it).
  int prepare_rc(sqlite3* db, std::string_view sql) {
    finalize();
    int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
    if (rc != SQLITE_OK) finalize();
    return rc;
  }

  sqlite3_stmt* get() const { return stmt_; }
  explicit operator bool() const { return stmt_ != nullptr; }

  void bind_int(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void bind_null(int i) { sqlite3_bind_null(stmt_, i); }
  // 0 means "none" for ids and flags: NULL on disk (costs the same as 0, reads better).
  void bind_nonzero(int i, int64_t v) {
    if (v == 0) {
      sqlite3_bind_null(stmt_, i);
    } else {
      sqlite3_bind_int64(stmt_, i, v);
    }
  }
  void bind_u64(int i, uint64_t v) {
    int64_t s;
    std::memcpy(&s, &v, sizeof s);  // stored bit-cast: SQLite integers are signed 64-bit
    sqlite3_bind_int64(stmt_, i, s);
  }
  void bind_double(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void bind_text(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  }
  // `v` must stay valid until the statement is stepped.
  void bind_blob(int i, std::string_view v) {
    sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  }

  // Steps once; SQLITE_ROW, SQLITE_DONE or an error code.
  int step() { return sqlite3_step(stmt_); }
  // Keeps the bindings: every caller binds every parameter before each step.
  void reset() { sqlite3_reset(stmt_); }

  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t col_int(int col) const { return sqlite3_column_int64(stmt_, col); }
  uint64_t col_u64(int col) const {
    int64_t s = sqlite3_column_int64(stmt_, col);
    uint64_t v;
    std::memcpy(&v, &s, sizeof v);
    return v;
  }
  double col_double(int col) const { return sqlite3_column_double(stmt_, col); }
  // Valid until the next step or reset.
  std::string_view col_blob(int col) const {
    const void* p = sqlite3_column_blob(stmt_, col);
    return p ? std::string_view(static_cast<const char*>(p),
                                static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string_view();
  }
  std::string col_text(int col) const {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }

 private:
  void finalize() {
    if (stmt_) sqlite3_finalize(stmt_);
    stmt_ = nullptr;
  }
  sqlite3_stmt* stmt_ = nullptr;
};

// Runs `sql` (one or more statements without results).
inline Status exec(sqlite3* db, const char* sql, const std::string& what) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = what + ": " + (err ? err : sqlite3_errmsg(db));
    sqlite3_free(err);
    return Status::Error(msg);
  }
  return Status::Ok();
}

}  // namespace tdbg::tracer::internal
