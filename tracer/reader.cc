// The run-database reader: opens a database read-only after cheap sanity checks (one-line
// errors), and streams its records with prepared statements.
#include "tracer/reader.h"

#include <dirent.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <queue>
#include <unordered_map>

#include "tracer/schema.h"
#include "tracer/sqlite_util.h"

namespace tdbg::tracer {
namespace {

using internal::Stmt;

constexpr const char* kOpColumns =
    "thread, tidx, seq_gap, parent_back, depth, name, step, module, stack, user_frame, "
    "fwd_back, region, start, dur, chain, rng, flags";

bool file_exists(const std::string& path, struct stat* st) { return ::stat(path.c_str(), st) == 0; }

uint32_t be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// "file:" URI for `path` with `query`, escaping what URIs reserve.
std::string sqlite_uri(const std::string& path, const std::string& query) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      uri += buf;
    } else {
      uri += c;
    }
  }
  return uri + "?" + query;
}

// The checks that need no SQLite: existence, emptiness, the SQLite magic and the size the
// header promises. O(1): a 10^7-op database opens in milliseconds.
Status check_file(const std::string& path, bool* has_wal, bool* wal_mode) {
  struct stat st;
  if (!file_exists(path, &st)) return Status::Error(path + ": no such file");
  if (S_ISDIR(st.st_mode)) return Status::Error(path + ": is a directory, not a database file");
  if (st.st_size == 0) return Status::Error(path + ": empty file, not a tdbg database");
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::Error(path + ": cannot read: " + std::strerror(errno));
  unsigned char header[100] = {};
  size_t n = std::fread(header, 1, sizeof header, f);
  std::fclose(f);
  if (n < sizeof header || std::memcmp(header, "SQLite format 3", 16) != 0) {
    return Status::Error(path + ": not a SQLite database, so not a tdbg run");
  }
  struct stat wal;
  *has_wal = file_exists(path + "-wal", &wal) && wal.st_size > 0;
  *wal_mode = header[18] == 2 && header[19] == 2;  // file format versions: 2 = WAL
  if (*has_wal) return Status::Ok();  // pages may live in the WAL: the file alone is partial
  uint32_t page_size = (uint32_t{header[16]} << 8) | header[17];
  if (page_size == 1) page_size = 65536;
  if (page_size < 512 || (page_size & (page_size - 1)) != 0) {
    return Status::Error(path + ": corrupt SQLite header (page size " + std::to_string(page_size) +
                         ")");
  }
  const uint32_t pages = be32(header + 28);
  const bool pages_valid = be32(header + 92) == be32(header + 24) && pages != 0;
  const int64_t want = static_cast<int64_t>(pages) * page_size;
  if (pages_valid && st.st_size < want) {
    return Status::Error(path + ": truncated: " + std::to_string(st.st_size) + " of " +
                         std::to_string(want) + " bytes");
  }
  if (st.st_size % page_size != 0) {
    return Status::Error(path + ": truncated: " + std::to_string(st.st_size) +
                         " bytes is not a whole number of " + std::to_string(page_size) +
                         "-byte pages");
  }
  return Status::Ok();
}

class ReaderImpl final : public Reader {
 public:
  ReaderImpl(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  ~ReaderImpl() override {
    // Statements first: closing a connection with live statements fails.
    for (Stmt* s : {&op_by_key_, &probe_, &tensors_, &args_, &string_, &frame_, &chain_}) {
      *s = Stmt();
    }
    sqlite3_close(db_);
  }

  Status init() {
    int version = 0;
    {
      Stmt s;
      TDBG_RETURN_IF_ERROR(prepare(s, "PRAGMA user_version"));
      int rc = s.step();
      if (rc != SQLITE_ROW) return sql_error(rc, "reading the schema version");
      version = static_cast<int>(s.col_int(0));
    }
    {
      Stmt s;
      int rc = s.prepare_rc(db_, "SELECT key, value FROM meta");
      if (rc != SQLITE_OK) {
        if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB) return sql_error(rc, "reading meta");
        if (wal_missing_) {
          // A killed writer's data is still in its -wal file: say so rather than "not tdbg".
          return Status::Error(path_ + ": incomplete: the writer did not close it and its " +
                               "-wal file (which holds the data) is missing; copy " + path_ +
                               "-wal with it");
        }
        return Status::Error(path_ + ": SQLite database but not a tdbg run (no meta table)");
      }
      while ((rc = s.step()) == SQLITE_ROW) meta_.emplace_back(s.col_text(0), s.col_text(1));
      if (rc != SQLITE_DONE) return sql_error(rc, "reading meta");
    }
    if (meta("format") != internal::kFormatName) {
      return Status::Error(path_ + ": SQLite database but not a tdbg run (meta.format is not '" +
                           internal::kFormatName + "')");
    }
    if (version > kSchemaVersion) return newer(version);
    if (version < 1) {
      return Status::Error(path_ + ": not a tdbg run database (schema version " +
                           std::to_string(version) + ")");
    }
    schema_version_ = version;
    time_base_ns_ = std::strtoll(meta(internal::kTimeBaseKey).c_str(), nullptr, 10);
    std::string ops_by_key =
        std::string("SELECT ") + kOpColumns + " FROM ops WHERE thread = ?1 AND tidx = ?2";
    TDBG_RETURN_IF_ERROR(prepare(op_by_key_, ops_by_key));
    TDBG_RETURN_IF_ERROR(prepare(
        probe_,
        "SELECT tidx, seq_gap FROM ops WHERE thread = ?1 AND tidx >= ?2 ORDER BY tidx LIMIT 1"));
    TDBG_RETURN_IF_ERROR(prepare(tensors_, std::string("SELECT ") + kTensorColumns +
                                               " FROM tensors WHERE op = ?1 ORDER BY role, idx"));
    TDBG_RETURN_IF_ERROR(
        prepare(args_, "SELECT idx, name, value FROM args WHERE op = ?1 ORDER BY idx"));
    TDBG_RETURN_IF_ERROR(prepare(string_, "SELECT text FROM strings WHERE id = ?1"));
    TDBG_RETURN_IF_ERROR(
        prepare(frame_, "SELECT parent, file, line, function FROM frames WHERE id = ?1"));
    TDBG_RETURN_IF_ERROR(prepare(chain_, "SELECT chain FROM ops WHERE thread = ?1 AND tidx = ?2"));
    return Status::Ok();
  }

  const std::string& path() const override { return path_; }
  int schema_version() const override { return schema_version_; }

  std::string meta(const std::string& key) const override {
    for (auto& [k, v] : meta_) {
      if (k == key) return v;
    }
    return "";
  }
  std::vector<std::pair<std::string, std::string>> all_meta() const override { return meta_; }

  std::vector<ThreadRecord> threads() const override {
    std::vector<ThreadRecord> out;
    Stmt s;
    if (prepare(s, "SELECT id, os_tid, name FROM threads ORDER BY id").ok()) {
      while (s.step() == SQLITE_ROW) {
        out.push_back(
            ThreadRecord{static_cast<uint32_t>(s.col_int(0)), s.col_int(1), s.col_text(2)});
      }
    }
    // Threads that have ops but were never described still count.
    for (uint32_t t : op_threads()) {
      bool known = std::any_of(out.begin(), out.end(), [&](auto& r) { return r.id == t; });
      if (!known) out.push_back(ThreadRecord{t, 0, ""});
    }
    std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
    return out;
  }

  int64_t op_count() const override {
    int64_t n = 0;
    for (uint32_t t : op_threads()) n += op_count(t);
    return n;
  }
  int64_t op_count(uint32_t thread) const override {
    auto it = count_cache_.find(thread);
    if (it != count_cache_.end()) return it->second;
    Stmt s;
    if (!prepare(s, "SELECT count(*) FROM ops WHERE thread = ?1").ok()) return 0;
    s.bind_int(1, thread);
    int64_t n = s.step() == SQLITE_ROW ? s.col_int(0) : 0;
    // Only a finished database is immutable; a live one keeps growing.
    if (immutable_) count_cache_[thread] = n;
    return n;
  }

  std::string string(StringId id) const override {
    if (id == 0) return "";
    auto it = strings_.find(id);
    if (it != strings_.end()) return it->second;
    string_.reset();
    string_.bind_int(1, id);
    std::string text = string_.step() == SQLITE_ROW ? string_.col_text(0) : std::string();
    string_.reset();
    if (!text.empty()) strings_.emplace(id, text);
    return text;
  }

  std::optional<FrameRecord> frame(FrameId id) const override {
    if (id == 0) return std::nullopt;
    frame_.reset();
    frame_.bind_int(1, id);
    std::optional<FrameRecord> out;
    if (frame_.step() == SQLITE_ROW) {
      out = FrameRecord{
          id, static_cast<FrameId>(frame_.col_int(0)), static_cast<StringId>(frame_.col_int(1)),
          static_cast<int32_t>(frame_.col_int(2)), static_cast<StringId>(frame_.col_int(3))};
    }
    frame_.reset();
    return out;
  }

  std::vector<FrameRecord> stack(FrameId innermost) const override {
    std::vector<FrameRecord> out;
    // Bounded: a corrupt file with a parent cycle must not hang the reader.
    for (FrameId id = innermost; id != 0 && out.size() < 100000;) {
      auto f = frame(id);
      if (!f) break;
      out.push_back(*f);
      id = f->parent;
    }
    std::reverse(out.begin(), out.end());
    return out;
  }

  std::optional<OpRecord> op(int64_t seq) const override {
    for (uint32_t t : op_threads()) {
      auto tidx = tidx_of_seq(t, seq, /*exact=*/true);
      if (tidx) return op_at(t, *tidx);
    }
    return std::nullopt;
  }

  std::optional<OpRecord> op_at(uint32_t thread, int64_t tidx) const override {
    op_by_key_.reset();
    op_by_key_.bind_int(1, thread);
    op_by_key_.bind_int(2, tidx);
    std::optional<OpRecord> out;
    if (op_by_key_.step() == SQLITE_ROW) {
      out.emplace();
      decode_op(op_by_key_, *out);
    }
    op_by_key_.reset();
    if (out) (void)fill_details(*out);
    return out;
  }

  std::optional<uint64_t> chain_at(uint32_t thread, int64_t tidx) const override {
    chain_.reset();
    chain_.bind_int(1, thread);
    chain_.bind_int(2, tidx);
    std::optional<uint64_t> out;
    if (chain_.step() == SQLITE_ROW) out = chain_.col_u64(0);
    chain_.reset();
    return out;
  }

  Status scan_ops(std::optional<uint32_t> thread, int64_t from, int64_t to, bool with_tensors,
                  const std::function<bool(const OpRecord&)>& visit) const override {
    ReadTransaction txn(db_);  // one snapshot for the whole scan, even while a writer runs
    const std::string sql =
        std::string("SELECT ") + kOpColumns +
        " FROM ops WHERE thread = ?1 AND tidx >= ?2 AND tidx < ?3 ORDER BY tidx";
    if (thread) {
      Stmt s;
      TDBG_RETURN_IF_ERROR(prepare(s, sql));
      s.bind_int(1, *thread);
      s.bind_int(2, from);
      s.bind_int(3, to);
      // Streaming the details skips other threads' rows: worth it unless there are others.
      const bool stream = op_threads().size() <= 1;
      DetailStream details(*this);
      OpRecord op;
      int rc;
      while ((rc = s.step()) == SQLITE_ROW) {
        op = OpRecord();
        decode_op(s, op);
        if (with_tensors) TDBG_RETURN_IF_ERROR(stream ? details.fill(op) : fill_details(op));
        if (!visit(op)) return Status::Ok();
      }
      if (rc != SQLITE_DONE) return sql_error(rc, "reading ops");
      return Status::Ok();
    }
    // All threads in seq order: merge one cursor per thread (each is in seq order already,
    // since within a thread seq and tidx grow together).
    struct Cursor {
      Stmt stmt;
      OpRecord op;
    };
    std::vector<std::unique_ptr<Cursor>> cursors;
    auto later = [](const Cursor* a, const Cursor* b) { return a->op.seq > b->op.seq; };
    std::priority_queue<Cursor*, std::vector<Cursor*>, decltype(later)> heap(later);
    auto advance = [&](Cursor* c) -> Status {
      int rc = c->stmt.step();
      if (rc == SQLITE_ROW) {
        c->op = OpRecord();
        decode_op(c->stmt, c->op);
        if (c->op.seq < to) heap.push(c);
        return Status::Ok();
      }
      if (rc != SQLITE_DONE) return sql_error(rc, "reading ops");
      return Status::Ok();
    };
    for (uint32_t t : op_threads()) {
      auto first = tidx_of_seq(t, from, /*exact=*/false);
      if (!first) continue;
      auto c = std::make_unique<Cursor>();
      TDBG_RETURN_IF_ERROR(prepare(c->stmt, sql));
      c->stmt.bind_int(1, t);
      c->stmt.bind_int(2, *first);
      c->stmt.bind_int(3, std::numeric_limits<int64_t>::max());
      TDBG_RETURN_IF_ERROR(advance(c.get()));
      cursors.push_back(std::move(c));
    }
    DetailStream details(*this);
    while (!heap.empty()) {
      Cursor* c = heap.top();
      heap.pop();
      if (with_tensors) TDBG_RETURN_IF_ERROR(details.fill(c->op));
      if (!visit(c->op)) return Status::Ok();
      TDBG_RETURN_IF_ERROR(advance(c));
    }
    return Status::Ok();
  }

  std::vector<RegionRecord> regions() const override {
    std::vector<RegionRecord> out;
    Stmt s;
    if (!prepare(s,
                 "SELECT id, thread, name, kind, start_seq, end_seq, step, parent FROM "
                 "regions ORDER BY id")
             .ok()) {
      return out;
    }
    while (s.step() == SQLITE_ROW) {
      RegionRecord r;
      r.id = static_cast<uint32_t>(s.col_int(0));
      r.thread = static_cast<uint32_t>(s.col_int(1));
      r.name = static_cast<StringId>(s.col_int(2));
      r.kind = static_cast<RegionKind>(s.col_int(3));
      r.start_seq = s.col_int(4);
      r.end_seq = s.is_null(5) ? kNoSeq : s.col_int(5);
      r.step = s.col_int(6);
      r.parent = static_cast<uint32_t>(s.col_int(7));
      out.push_back(r);
    }
    return out;
  }

  std::vector<ModuleRecord> modules() const override {
    std::vector<ModuleRecord> out;
    Stmt s;
    if (!prepare(s, "SELECT id, kind, name, hash, size, time_ns FROM modules ORDER BY id").ok()) {
      return out;
    }
    while (s.step() == SQLITE_ROW) {
      ModuleRecord m;
      m.id = static_cast<uint32_t>(s.col_int(0));
      m.kind = static_cast<StringId>(s.col_int(1));
      m.name = static_cast<StringId>(s.col_int(2));
      m.hash = s.col_u64(3);
      m.size = s.col_int(4);
      m.time_ns = s.col_int(5);
      out.push_back(m);
    }
    return out;
  }

  std::vector<KernelRecord> kernels(std::optional<int64_t> op) const override {
    std::vector<KernelRecord> out;
    Stmt s;
    const char* cols =
        "SELECT op, module, name, grid, block, shared_mem, stream, start_ns, end_ns FROM kernels";
    Status st = op ? prepare(s, std::string(cols) + " WHERE op = ?1 ORDER BY rowid")
                   : prepare(s, std::string(cols) + " ORDER BY rowid");
    if (!st.ok()) return out;
    if (op) s.bind_int(1, *op);
    while (s.step() == SQLITE_ROW) {
      KernelRecord k;
      k.op = s.is_null(0) ? kNoSeq : s.col_int(0);
      k.module = static_cast<uint32_t>(s.col_int(1));
      k.name = static_cast<StringId>(s.col_int(2));
      k.grid = static_cast<StringId>(s.col_int(3));
      k.block = static_cast<StringId>(s.col_int(4));
      k.shared_mem = s.col_int(5);
      k.stream = s.col_u64(6);
      k.start_ns = s.col_int(7);
      k.end_ns = s.col_int(8);
      out.push_back(k);
    }
    return out;
  }

  Status query(const std::string& sql,
               const std::function<bool(const std::vector<std::string>&)>& row) const override {
    Stmt s;
    TDBG_RETURN_IF_ERROR(prepare(s, sql));
    if (!sqlite3_stmt_readonly(s.get())) {
      return Status::Error(path_ + ": query is not read-only: " + sql.substr(0, 60));
    }
    const int n = sqlite3_column_count(s.get());
    std::vector<std::string> values(static_cast<size_t>(n));
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      for (int i = 0; i < n; ++i) values[static_cast<size_t>(i)] = s.col_text(i);
      if (!row(values)) return Status::Ok();
    }
    if (rc != SQLITE_DONE) return sql_error(rc, "running the query");
    return Status::Ok();
  }

  bool immutable_ = false;
  bool wal_missing_ = false;  // the header says WAL mode but there is no -wal file

 private:
  // A read transaction for the lifetime of the object unless one is already open.
  class ReadTransaction {
   public:
    explicit ReadTransaction(sqlite3* db) : db_(db) {
      if (sqlite3_get_autocommit(db_)) {
        owns_ = sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr) == SQLITE_OK;
      }
    }
    ~ReadTransaction() {
      if (owns_) sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    }

   private:
    sqlite3* db_;
    bool owns_ = false;
  };

  Status prepare(Stmt& s, std::string_view sql) const {
    int rc = s.prepare_rc(db_, sql);
    if (rc != SQLITE_OK) return sql_error(rc, "preparing a query");
    return Status::Ok();
  }

  Status sql_error(int rc, const char* doing) const {
    const char* msg = sqlite3_errmsg(db_);
    int primary = rc & 0xff;
    if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) {
      return Status::Error(path_ + ": corrupt database (" + msg + ") while " + doing);
    }
    if (primary == SQLITE_IOERR) {
      return Status::Error(path_ + ": read error (" + msg + ") while " + doing +
                           "; the file may be truncated");
    }
    return Status::Error(path_ + ": " + msg + " while " + doing);
  }

  Status newer(int version) const {
    return Status::Error(path_ + ": written by a newer tdbg: schema " + std::to_string(version) +
                         ", this tdbg reads up to " + std::to_string(kSchemaVersion));
  }

  void decode_op(const Stmt& s, OpRecord& op) const {
    op.thread = static_cast<uint32_t>(s.col_int(0));
    op.tidx = s.col_int(1);
    op.seq = op.tidx + s.col_int(2);
    op.parent = s.is_null(3) ? kNoSeq : op.seq - s.col_int(3);
    op.depth = static_cast<uint16_t>(s.col_int(4));
    op.name = static_cast<StringId>(s.col_int(5));
    op.step = s.col_int(6);
    op.module = static_cast<StringId>(s.col_int(7));
    op.stack = static_cast<FrameId>(s.col_int(8));
    op.user_frame = static_cast<FrameId>(s.col_int(9));
    op.fwd = s.is_null(10) ? kNoSeq : op.seq - s.col_int(10);
    op.region = static_cast<uint32_t>(s.col_int(11));
    op.start_ns = s.col_int(12) + time_base_ns_;
    op.end_ns = op.start_ns + s.col_int(13);
    op.chain = s.col_u64(14);
    op.rng = s.col_u64(15);
    op.flags = static_cast<uint32_t>(s.col_int(16));
  }

  static constexpr const char* kTensorColumns =
      "role, idx, dtype, shape, device, status, hash, producer_back, min, max, sum, abs_sum, "
      "nan, inf, reason";

  // A `tensors` row from column `c` on (in `kTensorColumns` order) of op `seq`.
  static TensorRecord decode_tensor(const Stmt& s, int c, int64_t seq) {
    TensorRecord t;
    t.role = static_cast<TensorRole>(s.col_int(c + 0));
    t.index = static_cast<uint16_t>(s.col_int(c + 1));
    t.dtype = static_cast<hashing::DType>(s.col_int(c + 2));
    t.shape = static_cast<StringId>(s.col_int(c + 3));
    t.device = static_cast<StringId>(s.col_int(c + 4));
    t.status = static_cast<TensorStatus>(s.col_int(c + 5));
    t.hash = s.col_u64(c + 6);
    t.producer = s.is_null(c + 7) ? kNoSeq : seq - s.col_int(c + 7);
    if (!s.is_null(c + 12)) {
      t.summary.valid = true;
      t.summary.min = s.col_double(c + 8);
      t.summary.max = s.col_double(c + 9);
      t.summary.sum = s.col_double(c + 10);
      t.summary.abs_sum = s.col_double(c + 11);
      t.summary.nan_count = s.col_int(c + 12);
      t.summary.inf_count = s.col_int(c + 13);
    }
    t.reason = static_cast<StringId>(s.col_int(c + 14));
    return t;
  }

  // Point queries: an op's tensors and args.
  Status fill_details(OpRecord& op) const {
    tensors_.reset();
    tensors_.bind_int(1, op.seq);
    int rc;
    while ((rc = tensors_.step()) == SQLITE_ROW)
      op.tensors.push_back(decode_tensor(tensors_, 0, op.seq));
    tensors_.reset();
    if (rc != SQLITE_DONE) return sql_error(rc, "reading tensors");
    args_.reset();
    args_.bind_int(1, op.seq);
    while ((rc = args_.step()) == SQLITE_ROW) {
      op.args.push_back(ArgRecord{static_cast<uint16_t>(args_.col_int(0)),
                                  static_cast<StringId>(args_.col_int(1)),
                                  static_cast<StringId>(args_.col_int(2))});
    }
    args_.reset();
    if (rc != SQLITE_DONE) return sql_error(rc, "reading args");
    return Status::Ok();
  }

  // Tensors and args of a scan whose ops come in increasing seq, read in one pass over each
  // table (both are ordered by op) instead of two point queries per op: several times
  // faster for whole-run scans.
  class DetailStream {
   public:
    explicit DetailStream(const ReaderImpl& reader) : r_(reader) {}

    Status fill(OpRecord& op) {
      if (!started_) {
        started_ = true;
        TDBG_RETURN_IF_ERROR(
            r_.prepare(tensors_, std::string("SELECT op, ") + kTensorColumns +
                                     " FROM tensors WHERE op >= ?1 ORDER BY op, role, idx"));
        TDBG_RETURN_IF_ERROR(r_.prepare(
            args_, "SELECT op, idx, name, value FROM args WHERE op >= ?1 ORDER BY op, idx"));
        tensors_.bind_int(1, op.seq);
        args_.bind_int(1, op.seq);
        TDBG_RETURN_IF_ERROR(step(tensors_, tensor_row_, "reading tensors"));
        TDBG_RETURN_IF_ERROR(step(args_, arg_row_, "reading args"));
      }
      while (tensor_row_ && tensors_.col_int(0) <= op.seq) {
        if (tensors_.col_int(0) == op.seq) op.tensors.push_back(decode_tensor(tensors_, 1, op.seq));
        TDBG_RETURN_IF_ERROR(step(tensors_, tensor_row_, "reading tensors"));
      }
      while (arg_row_ && args_.col_int(0) <= op.seq) {
        if (args_.col_int(0) == op.seq) {
          op.args.push_back(ArgRecord{static_cast<uint16_t>(args_.col_int(1)),
                                      static_cast<StringId>(args_.col_int(2)),
                                      static_cast<StringId>(args_.col_int(3))});
        }
        TDBG_RETURN_IF_ERROR(step(args_, arg_row_, "reading args"));
      }
      return Status::Ok();
    }

   private:
    Status step(Stmt& s, bool& row, const char* doing) {
      int rc = s.step();
      row = rc == SQLITE_ROW;
      if (!row && rc != SQLITE_DONE) return r_.sql_error(rc, doing);
      return Status::Ok();
    }
    const ReaderImpl& r_;
    bool started_ = false, tensor_row_ = false, arg_row_ = false;
    Stmt tensors_, args_;
  };

  // Threads that have ops, by walking the primary key: O(threads · log ops).
  std::vector<uint32_t> op_threads() const {
    if (immutable_ && threads_cached_) return op_threads_;
    std::vector<uint32_t> out;
    Stmt s;
    if (!prepare(s, "SELECT thread FROM ops WHERE thread > ?1 ORDER BY thread LIMIT 1").ok()) {
      return out;
    }
    int64_t last = -1;
    for (;;) {
      s.reset();
      s.bind_int(1, last);
      if (s.step() != SQLITE_ROW) break;
      last = s.col_int(0);
      out.push_back(static_cast<uint32_t>(last));
    }
    op_threads_ = out;
    threads_cached_ = true;
    return out;
  }

  // First op of `thread` at or after tidx `x`: (tidx, seq), or nullopt.
  std::optional<std::pair<int64_t, int64_t>> probe(uint32_t thread, int64_t x) const {
    probe_.reset();
    probe_.bind_int(1, thread);
    probe_.bind_int(2, x);
    std::optional<std::pair<int64_t, int64_t>> out;
    if (probe_.step() == SQLITE_ROW)
      out.emplace(probe_.col_int(0), probe_.col_int(0) + probe_.col_int(1));
    probe_.reset();
    return out;
  }

  // The tidx of `thread`'s op with seq `seq` (exact), or of its first op with seq >= `seq`.
  // Binary search over tidx: within a thread seq grows with tidx, and tidx <= seq.
  std::optional<int64_t> tidx_of_seq(uint32_t thread, int64_t seq, bool exact) const {
    // Fast path: the gap seen last time on this thread (single-threaded runs: always 0).
    auto hint = gap_hint_.find(thread);
    if (hint != gap_hint_.end() && seq - hint->second >= 0) {
      auto p = probe(thread, seq - hint->second);
      if (p && p->second == seq) return p->first;
    }
    auto first = probe(thread, std::numeric_limits<int64_t>::min());
    if (!first) return std::nullopt;
    int64_t lo = first->first;           // f(lo) = first op
    int64_t hi = std::max(lo, seq) + 1;  // tidx <= seq, so an op with seq >= `seq` ...
    if (first->second >= seq) {
      if (exact && first->second != seq) return std::nullopt;
      gap_hint_[thread] = first->second - first->first;
      return first->first;
    }
    // Invariant: probe(lo).seq < seq; the answer's tidx is in (lo, hi].
    while (hi - lo > 1) {
      int64_t mid = lo + (hi - lo) / 2;
      auto p = probe(thread, mid);
      if (!p || p->second >= seq) {
        hi = mid;
      } else {
        lo = p->first;  // jump over holes
        if (lo >= hi) break;
      }
    }
    auto p = probe(thread, hi);
    if (!p) return std::nullopt;
    if (exact && p->second != seq) return std::nullopt;
    gap_hint_[thread] = p->second - p->first;
    return p->first;
  }

  std::string path_;
  sqlite3* db_;
  int schema_version_ = 0;
  int64_t time_base_ns_ = 0;
  std::vector<std::pair<std::string, std::string>> meta_;
  mutable Stmt op_by_key_, probe_, tensors_, args_, string_, frame_, chain_;
  mutable std::unordered_map<StringId, std::string> strings_;
  mutable std::unordered_map<uint32_t, int64_t> count_cache_;
  mutable std::unordered_map<uint32_t, int64_t> gap_hint_;
  mutable std::vector<uint32_t> op_threads_;
  mutable bool threads_cached_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<Reader>> Reader::Open(const std::string& path) {
  bool has_wal = false, wal_mode = false;
  TDBG_RETURN_IF_ERROR(check_file(path, &has_wal, &wal_mode));
  // Without a -wal file the database is finished (or was copied): `immutable=1` reads it
  // with no locking and no -shm file, so a read-only directory works. With one, a writer may
  // still be live (or was killed): read through the WAL to see every committed transaction.
  const std::string uri = sqlite_uri(path, has_wal ? "mode=ro" : "immutable=1");
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = path + ": cannot open: " + (db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return Status::Error(msg);
  }
  sqlite3_busy_timeout(db, 2000);
  auto reader = std::make_unique<ReaderImpl>(path, db);
  reader->immutable_ = !has_wal;
  reader->wal_missing_ = wal_mode && !has_wal;
  TDBG_RETURN_IF_ERROR(reader->init());
  return std::unique_ptr<Reader>(std::move(reader));
}

StatusOr<Run> Run::Open(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::Error(path + ": no such file or directory");
  Run run;
  run.path = path;
  if (!S_ISDIR(st.st_mode)) {
    TDBG_ASSIGN_OR_RETURN(auto reader, Reader::Open(path));
    run.processes.push_back(std::move(reader));
    return run;
  }
  DIR* dir = ::opendir(path.c_str());
  if (!dir) return Status::Error(path + ": cannot list directory: " + std::strerror(errno));
  std::vector<std::string> files;
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    // Only "*.sqlite": the "-wal" and "-shm" companions end differently.
    if (name.size() > 7 && name.compare(name.size() - 7, 7, ".sqlite") == 0) {
      files.push_back(path + "/" + name);
    }
  }
  ::closedir(dir);
  if (files.empty()) return Status::Error(path + ": no *.sqlite run database in this directory");
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    TDBG_ASSIGN_OR_RETURN(auto reader, Reader::Open(f));
    run.processes.push_back(std::move(reader));
  }
  auto key = [](const std::unique_ptr<Reader>& r) {
    return std::make_pair(std::strtoll(r->meta("start_time_ns").c_str(), nullptr, 10),
                          std::strtoll(r->meta("pid").c_str(), nullptr, 10));
  };
  std::stable_sort(run.processes.begin(), run.processes.end(),
                   [&](auto& a, auto& b) { return key(a) < key(b); });
  return run;
}

}  // namespace tdbg::tracer
