// The run-database reader: opens a database read-only after cheap sanity checks (one-line
// errors), and streams its records with prepared statements.
#include "tracer/reader.h"

#include <dirent.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "tracer/names_check.h"
#include "tracer/op_block.h"
#include "tracer/schema.h"
#include "tracer/sql_functions.h"
#include "tracer/sqlite_util.h"

namespace tdbg::tracer {
namespace {

using internal::Stmt;

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

// Whether the -wal file `wal` lost frames to damage: SQLite ends the log at the first frame
// whose checksum fails, silently, so a flipped bit early in the log of a killed run hides
// every later commit. Frames of this log (the header's salts) after a failing one are what
// only damage leaves (a torn last frame has nothing after it; frames of an earlier log carry
// other salts). "" when the log reads whole; else what was lost. The checksums are SQLite's
// (https://sqlite.org/fileformat2.html#walformat): cumulative over 32-bit word pairs, big
// endian when the magic number's low bit is set.
std::string wal_damage(const std::string& wal) {
  // A live writer appends while the log is read: a frame read half-written, then later ones
  // whole, is a race, not damage. Judged only on a log that did not change while read.
  struct stat before, after;
  if (::stat(wal.c_str(), &before) != 0) return "";
  FILE* f = std::fopen(wal.c_str(), "rb");
  if (!f) return "";
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  std::fclose(f);
  if (::stat(wal.c_str(), &after) != 0 || after.st_size != before.st_size ||
      after.st_mtim.tv_sec != before.st_mtim.tv_sec ||
      after.st_mtim.tv_nsec != before.st_mtim.tv_nsec ||
      static_cast<off_t>(bytes.size()) != after.st_size)
    return "";
  if (bytes.size() < 32) return "";
  const auto* h = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::string db = wal.substr(0, wal.size() - 4);
  const uint32_t magic = be32(h);
  const uint32_t page_size = be32(h + 8);
  const bool header_sane = (magic == 0x377f0682 || magic == 0x377f0683) && page_size >= 512 &&
                           page_size <= 65536 && (page_size & (page_size - 1)) == 0;
  const bool big = magic & 1;
  auto word = [big](const unsigned char* p) {
    return big ? be32(p)
               : uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  };
  uint32_t s0 = 0, s1 = 0;
  auto sum = [&](const unsigned char* p, size_t len) {
    for (size_t i = 0; i + 8 <= len; i += 8) {
      s0 += word(p + i) + s1;
      s1 += word(p + i + 4) + s0;
    }
  };
  if (header_sane) sum(h, 24);
  const bool header_ok = header_sane && s0 == be32(h + 24) && s1 == be32(h + 28);
  if (!header_ok) {
    // SQLite ignores a log whose header fails: only damage leaves one with frames after it (a
    // log is reset by writing its header first). Frames are counted at SQLite's page size.
    const size_t frame = 24 + 16384;
    if (bytes.size() < 32 + frame) return "";
    return db + ": its -wal file is damaged: the write-ahead log's header fails its checksum, and "
                "SQLite reads none of its " + std::to_string((bytes.size() - 32) / frame) +
           " frame(s) (a disk error or a damaged copy)";
  }
  const size_t frame = 24 + page_size;
  size_t bad = 0, valid = 0, lost = 0;
  size_t bad_at = 0;
  for (size_t at = 32; at + frame <= bytes.size(); at += frame) {
    const unsigned char* fh = h + at;
    if (std::memcmp(fh + 8, h + 16, 8) == 0) {
      sum(fh, 8);
      sum(fh + 24, page_size);
      if (s0 == be32(fh + 16) && s1 == be32(fh + 20)) {
        ++valid;
        continue;
      }
    }
    // The end of the log as SQLite reads it: a torn last frame, an earlier log's frames
    // (other salts), a failed transaction's frames (a full disk: the commit frame never
    // written whole), or damage, if frames of this log follow.
    bad = valid + 1;
    bad_at = at;
    break;
  }
  if (bad == 0) return "";
  // Damage leaves the frames after it chained as they were written: their checksums follow on
  // from the one the failing frame stores (a bit of its page or salt flipped) or from the one
  // it should have stored (a bit of its checksum flipped), up to a commit that SQLite would
  // have read. What a failed or rolled-back transaction leaves after the end of the log
  // follows on from neither, or holds no commit: no data of a commit is lost.
  const unsigned char* bh = h + bad_at;
  const std::pair<uint32_t, uint32_t> starts[] = {{be32(bh + 16), be32(bh + 20)}, {s0, s1}};
  for (const auto& [c0, c1] : starts) {
    s0 = c0;
    s1 = c1;
    size_t chained = 0;
    for (size_t at = bad_at + frame; at + frame <= bytes.size(); at += frame) {
      const unsigned char* fh = h + at;
      if (std::memcmp(fh + 8, h + 16, 8) != 0) break;
      sum(fh, 8);
      sum(fh + 24, page_size);
      if (s0 != be32(fh + 16) || s1 != be32(fh + 20)) break;
      ++chained;
      if (be32(fh + 4) != 0) lost = std::max(lost, chained);  // a commit frame
    }
  }
  if (lost == 0) return "";
  return db + ": its -wal file is damaged: frame " +
         std::to_string(bad) + " of the write-ahead log fails its checksum, and SQLite reads "
         "nothing of the " + std::to_string(lost) +
         " later frame(s) of the log (a disk error or a damaged copy)";
}

// The checks that need no SQLite: existence, emptiness, the SQLite magic and the size the
// header promises. O(1) for a closed database: a 10^7-op database opens in milliseconds; a
// -wal log beside it (a live or killed run) is read once, for `wal_damage`.
Status check_file(const std::string& path, bool* has_wal, bool* wal_mode) {
  struct stat st;
  if (!file_exists(path, &st)) return Status::Error(path + ": no such file");
  if (S_ISDIR(st.st_mode)) return Status::Error(path + ": is a directory, not a database file");
  if (!S_ISREG(st.st_mode))  // (a FIFO would block the read below, or read as empty)
    return Status::Error(path + ": not a regular file (a pipe, socket or device), not a tdbg database");
  if (st.st_size == 0) return Status::Error(path + ": empty file, not a tdbg database");
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::Error(path + ": cannot read: " + std::strerror(errno));
  unsigned char header[100] = {};
  size_t n = std::fread(header, 1, sizeof header, f);
  std::fclose(f);
  if (n < sizeof header || std::memcmp(header, "SQLite format 3", 16) != 0) {
    // A bundle (gzip): its runs are inside.
    if (n >= 2 && header[0] == 0x1f && header[1] == 0x8b)
      return Status::Error(path + ": a gzip file (a tdbg bundle?), not a run: unpack it with "
                           "`tdbg bundle --extract " + path + " -o DIR` and use DIR/*/runs/a");
    return Status::Error(path + ": not a SQLite database, so not a tdbg run");
  }
  struct stat wal;
  *has_wal = file_exists(path + "-wal", &wal) && wal.st_size > 0;
  *wal_mode = header[18] == 2 && header[19] == 2;  // file format versions: 2 = WAL
  if (*has_wal) {
    // Pages may live in the WAL: the file alone is partial. A log SQLite would cut short at a
    // damaged frame would make a run read as one that ended early.
    if (std::string damage = wal_damage(path + "-wal"); !damage.empty()) return Status::Error(damage);
    return Status::Ok();
  }
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
    // A size far beyond the file (70 TB for a 3 MB file) is more likely a damaged page-count
    // field than a copy cut short: say both.
    if (want / 16 > st.st_size)
      return Status::Error(path + ": damaged header or truncated: the header says " +
                           std::to_string(want) + " bytes (" + std::to_string(pages) +
                           " pages), the file holds " + std::to_string(st.st_size));
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
    for (Stmt* s : {&block_at_, &block_at_seq_, &block_by_key_, &string_, &frame_}) {
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
                               "-wal file (which holds the data) is missing or empty; copy " +
                               path_ + "-wal with it");
        }
        if (wal_present_) {
          // The schema itself is in the log, which holds no whole commit: not another tool's.
          return Status::Error(path_ + ": incomplete: the writer did not close it and its " +
                               "-wal file holds no complete commit (a copy cut short, or a " +
                               "process stopped before its first commit)");
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
    if (version >= 1 && version < kSchemaVersion) {
      return Status::Error(path_ + ": written by an older tdbg: schema " + std::to_string(version) +
                           ", this tdbg reads schema " + std::to_string(kSchemaVersion) +
                           " only; record the run again");
    }
    if (version < 1) {
      return Status::Error(path_ + ": not a tdbg run database (schema version " +
                           std::to_string(version) + ")");
    }
    schema_version_ = version;
    time_base_ns_ = std::strtoll(meta(internal::kTimeBaseKey).c_str(), nullptr, 10);
    // The block of a thread that holds a tidx (or seq), if any: the last one starting at or
    // before it. Index lookups only: the blob is read once, by `block_by_key_`.
    TDBG_RETURN_IF_ERROR(prepare(block_at_,
                                 "SELECT first_tidx, last_tidx FROM op_blocks WHERE thread = ?1 "
                                 "AND first_tidx <= ?2 ORDER BY first_tidx DESC LIMIT 1"));
    TDBG_RETURN_IF_ERROR(prepare(block_at_seq_,
                                 "SELECT first_tidx, last_seq FROM op_blocks WHERE thread = ?1 "
                                 "AND first_seq <= ?2 ORDER BY first_seq DESC LIMIT 1"));
    TDBG_RETURN_IF_ERROR(prepare(
        block_by_key_, "SELECT ops, count FROM op_blocks WHERE thread = ?1 AND first_tidx = ?2"));
    TDBG_RETURN_IF_ERROR(prepare(string_, "SELECT text FROM strings WHERE id = ?1"));
    TDBG_RETURN_IF_ERROR(
        prepare(frame_, "SELECT parent, file, line, function FROM frames WHERE id = ?1"));
    // Keys and indexes, names and their check, read in one transaction: a live writer's commit
    // between two reads is no damage.
    auto checks = [this]() -> Status {
      TDBG_RETURN_IF_ERROR(check_indexes());
      return check_names();
    };
    if (immutable_) return checks();
    int rc = sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return sql_error(rc, "starting a read transaction");
    Status keys = checks();
    sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    return keys;
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
      int rc;
      while ((rc = s.step()) == SQLITE_ROW) {
        out.push_back(
            ThreadRecord{static_cast<uint32_t>(s.col_int(0)), s.col_int(1), s.col_text(2)});
      }
      // A damaged page ends the list early: an error for `lookup_status`, not a short list.
      if (rc != SQLITE_DONE) read_failed(rc, "reading threads");
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
  bool any_op() const override { return !op_threads().empty(); }

  int64_t op_count(uint32_t thread) const override {
    auto it = count_cache_.find(thread);
    if (it != count_cache_.end()) return it->second;
    Stmt s;
    if (!prepare(s, "SELECT sum(count) FROM op_blocks WHERE thread = ?1").ok()) return 0;
    s.bind_int(1, thread);
    const int rc = s.step();
    int64_t n = rc == SQLITE_ROW ? s.col_int(0) : 0;
    // A damaged op_blocks table reads as no ops; `lookup_status` says it is damage.
    if (rc != SQLITE_ROW) read_failed(rc, "counting ops");
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
    const int rc = string_.step();
    std::string text = rc == SQLITE_ROW ? string_.col_text(0) : std::string();
    string_.reset();
    // The writer commits each string with the first ops that name it: an id with no row is
    // damage, even in a database still being written.
    if (rc != SQLITE_ROW) lookup_failed(rc, "string", id);
    if (!text.empty()) strings_.emplace(id, text);
    return text;
  }

  StatusOr<Held> held() const override {
    Stmt s;
    TDBG_RETURN_IF_ERROR(
        prepare(s, "SELECT min(first_seq), max(last_seq), min(first_tidx) FROM op_blocks"));
    const int rc = s.step();
    if (rc != SQLITE_ROW) return sql_error(rc, "reading which ops are held");
    Held h;
    if (s.col_text(0).empty()) return h;  // no op block: NULLs
    h.any = true;
    h.first_seq = s.col_int(0);
    h.last_seq = s.col_int(1);
    h.dropped_start = s.col_int(2) > 0;
    return h;
  }

  Status lookup_status() const override { return lookup_status_; }

  Status pin_snapshot() override {
    if (!sqlite3_get_autocommit(db_)) return Status::Ok();  // pinned already
    int rc = sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr);
    // BEGIN defers the snapshot to the first read: read now.
    if (rc == SQLITE_OK)
      rc = sqlite3_exec(db_, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return sql_error(rc, "starting a read transaction");
    count_cache_.clear();
    immutable_ = true;  // as far as this reader sees
    return Status::Ok();
  }

  Status verify() const override {
    // The other tables, whole: a damaged page there ends a list early (`read_failed`).
    (void)threads();
    (void)regions();
    (void)modules();
    (void)kernels(std::nullopt);
    TDBG_RETURN_IF_ERROR(lookup_status_);
    // The table, row by row: each block's checksum, and its row's keys against its first op.
    struct Row {
      int64_t id, thread, first_tidx, last_tidx, first_seq;
    };
    Stmt s;
    TDBG_RETURN_IF_ERROR(prepare(
        s, "SELECT id, thread, first_tidx, last_tidx, first_seq, ops FROM op_blocks"));
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      Row row{s.col_int(0), s.col_int(1), s.col_int(2), s.col_int(3), s.col_int(4)};
      auto damaged = [&](const std::string& what) {
        return Status::Error(path_ + ": ops " + std::to_string(row.first_tidx) + "-" +
                             std::to_string(row.last_tidx) + " of thread " +
                             std::to_string(row.thread) + ": " + what);
      };
      const std::string_view blob = s.col_blob(5);
      Status st = CheckOpBlock(blob);
      if (!st.ok()) return damaged(st.message());
      auto head = ReadOpBlockHead(blob);
      if (!head.ok()) return damaged(head.status().message());
      if (head->thread != row.thread || head->tidx != row.first_tidx || head->seq != row.first_seq)
        return damaged("corrupt op block (its row's keys are not its first op's)");
    }
    if (rc != SQLITE_DONE) return sql_error(rc, "checking the op blocks");
    TDBG_RETURN_IF_ERROR(check_indexes());  // again: a live writer may have added blocks
    TDBG_RETURN_IF_ERROR(check_block_keys());
    return lookup_status_;
  }

  // The names tables (strings, frames) against the check the writer committed with them
  // (`names_check.h`; a database written before it has none). O(names), a few thousand rows.
  Status check_names() const {
    std::string want;
    {
      Stmt q;
      TDBG_RETURN_IF_ERROR(prepare(q, std::string("SELECT value FROM meta WHERE key = '") +
                                          internal::kNamesCheckKey + "'"));
      const int rc = q.step();
      if (rc == SQLITE_ROW) want = q.col_text(0);
      else if (rc != SQLITE_DONE) return sql_error(rc, "reading the names check");
    }
    if (want.empty()) return Status::Ok();
    int64_t rows = 0;
    uint64_t sum = 0;
    {
      Stmt q;
      TDBG_RETURN_IF_ERROR(prepare(q, "SELECT id, text FROM strings"));
      int rc;
      while ((rc = q.step()) == SQLITE_ROW) {
        ++rows;
        sum += internal::string_row_hash(q.col_int(0), q.col_text(1));
      }
      if (rc != SQLITE_DONE) return sql_error(rc, "reading strings");
    }
    {
      Stmt q;
      TDBG_RETURN_IF_ERROR(prepare(q, "SELECT id, parent, file, line, function FROM frames"));
      int rc;
      while ((rc = q.step()) == SQLITE_ROW) {
        ++rows;
        FrameRecord f{static_cast<FrameId>(q.col_int(0)), static_cast<FrameId>(q.col_int(1)),
                      static_cast<StringId>(q.col_int(2)), static_cast<int32_t>(q.col_int(3)),
                      static_cast<StringId>(q.col_int(4))};
        sum += internal::frame_row_hash(f);
      }
      if (rc != SQLITE_DONE) return sql_error(rc, "reading frames");
    }
    if (internal::names_check_text(rows, sum) != want)
      return Status::Error(path_ + ": corrupt database (its strings or frames do not match the "
                           "check written with them: a name or a source line is damaged)");
    return Status::Ok();
  }

  // The op block indexes alone (no table page read: O(index pages), a few ms for 10^7 ops):
  // each in its keys' order, both over the same blocks. Every reader checks it when it opens;
  // `BlockCursor` checks that the blocks its seeks find follow each other, and `verify` the
  // indexes against the table.
  Status check_indexes() const {
    std::vector<int64_t> ids[2];
    const char* names[2] = {"op_blocks_by_tidx", "op_blocks_by_seq"};
    const char* keys[2] = {"first_tidx", "first_seq"};
    for (int k = 0; k < 2; ++k) {
      Stmt q;
      TDBG_RETURN_IF_ERROR(prepare(q, std::string("SELECT rowid, thread, ") + keys[k] +
                                          " FROM op_blocks INDEXED BY " + names[k] +
                                          " ORDER BY thread, " + keys[k]));
      int rc;
      std::pair<int64_t, int64_t> last{std::numeric_limits<int64_t>::min(), 0};
      while ((rc = q.step()) == SQLITE_ROW) {
        const std::pair<int64_t, int64_t> key{q.col_int(1), q.col_int(2)};
        // by_tidx is unique; by_seq too in a sound file (a seq belongs to one op).
        if (!ids[k].empty() && !(last < key))
          return Status::Error(path_ + ": corrupt database (index " + names[k] + " is out of order)");
        last = key;
        ids[k].push_back(q.col_int(0));
      }
      if (rc != SQLITE_DONE) return sql_error(rc, "checking the op block indexes");
      std::sort(ids[k].begin(), ids[k].end());
    }
    if (ids[0] != ids[1])
      return Status::Error(path_ + ": corrupt database (the op block indexes list other blocks)");
    return Status::Ok();
  }

  // The op blocks' keys, without their ops: a thread's blocks do not overlap, and the indexes
  // that lookups go through hold exactly the table's keys (a damaged index entry sends a
  // lookup to another block, or none: ops missing, or a walk that never ends). O(blocks) page
  // reads of the table: for `verify`.
  Status check_block_keys() const {
    struct Row {
      int64_t id, thread, first_tidx, last_tidx, first_seq;
    };
    std::vector<Row> rows;
    {
      Stmt s;
      TDBG_RETURN_IF_ERROR(
          prepare(s, "SELECT id, thread, first_tidx, last_tidx, first_seq FROM op_blocks"));
      int rc;
      while ((rc = s.step()) == SQLITE_ROW)
        rows.push_back({s.col_int(0), s.col_int(1), s.col_int(2), s.col_int(3), s.col_int(4)});
      if (rc != SQLITE_DONE) return sql_error(rc, "checking the op blocks");
    }
    for (const Row& r : rows) {
      if (r.first_tidx < 0 || r.last_tidx < r.first_tidx || r.first_seq < 0)
        return Status::Error(path_ + ": corrupt database (op block " + std::to_string(r.id) +
                             " of thread " + std::to_string(r.thread) + " has keys out of range)");
    }
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      return std::tie(a.thread, a.first_tidx) < std::tie(b.thread, b.first_tidx);
    });
    for (size_t i = 1; i < rows.size(); ++i) {
      if (rows[i].thread != rows[i - 1].thread) continue;
      if (rows[i].first_tidx <= rows[i - 1].last_tidx)
        return Status::Error(path_ + ": corrupt database (op blocks of thread " +
                             std::to_string(rows[i].thread) + " overlap at op " +
                             std::to_string(rows[i].first_tidx) + ")");
      // A thread's blocks follow each other (a ring drops the oldest ones, never others): rows
      // missing from the table (a lost b-tree page, a `.recover`ed copy) leave a hole.
      if (rows[i].first_tidx != rows[i - 1].last_tidx + 1)
        return Status::Error(path_ + ": corrupt database (ops " +
                             std::to_string(rows[i - 1].last_tidx + 1) + "-" +
                             std::to_string(rows[i].first_tidx - 1) + " of thread " +
                             std::to_string(rows[i].thread) + " are missing: no op block holds them)");
    }
    auto index_matches = [&](const char* index, const char* key, int64_t Row::*field) -> Status {
      std::vector<std::tuple<int64_t, int64_t, int64_t>> want, got;
      for (const Row& r : rows) want.emplace_back(r.id, r.thread, r.*field);
      Stmt q;
      TDBG_RETURN_IF_ERROR(prepare(q, std::string("SELECT id, thread, ") + key +
                                          " FROM op_blocks INDEXED BY " + index));
      int qrc;
      while ((qrc = q.step()) == SQLITE_ROW) got.emplace_back(q.col_int(0), q.col_int(1), q.col_int(2));
      if (qrc != SQLITE_DONE) return sql_error(qrc, "checking the op block indexes");
      std::sort(want.begin(), want.end());
      std::sort(got.begin(), got.end());
      if (want != got)
        return Status::Error(path_ + ": corrupt database (index " + index +
                             " does not match the op blocks)");
      return Status::Ok();
    };
    TDBG_RETURN_IF_ERROR(index_matches("op_blocks_by_tidx", "first_tidx", &Row::first_tidx));
    TDBG_RETURN_IF_ERROR(index_matches("op_blocks_by_seq", "first_seq", &Row::first_seq));
    // Their inner pages: each block found by the seeks that lookups make (a damaged divider
    // key sends a seek past the block, though a scan of the leaves sees every entry).
    for (const Row& r : rows) {
      const uint32_t thread = static_cast<uint32_t>(r.thread);
      auto by_tidx = block_before(block_at_, thread, r.first_tidx);
      auto by_seq = block_before(block_at_seq_, thread, r.first_seq);
      if (!by_tidx || by_tidx->first != r.first_tidx || !by_seq || by_seq->first != r.first_tidx)
        return Status::Error(path_ + ": corrupt database (the op block indexes do not find ops " +
                             std::to_string(r.first_tidx) + "-" + std::to_string(r.last_tidx) +
                             " of thread " + std::to_string(r.thread) + ")");
    }
    return Status::Ok();
  }

  std::optional<FrameRecord> frame(FrameId id) const override {
    if (id == 0) return std::nullopt;
    frame_.reset();
    frame_.bind_int(1, id);
    std::optional<FrameRecord> out;
    const int rc = frame_.step();
    if (rc != SQLITE_ROW) lookup_failed(rc, "frame", id);
    if (rc == SQLITE_ROW) {
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
      if (const OpRecord* op = find_op(block_at_seq_, &OpRecord::seq, t, seq)) return *op;
    }
    return std::nullopt;
  }

  std::optional<OpRecord> op_at(uint32_t thread, int64_t tidx) const override {
    const OpRecord* op = find_op(block_at_, &OpRecord::tidx, thread, tidx);
    if (!op) return std::nullopt;
    return *op;
  }

  std::optional<uint64_t> chain_at(uint32_t thread, int64_t tidx) const override {
    const OpRecord* op = find_op(block_at_, &OpRecord::tidx, thread, tidx);
    if (!op) return std::nullopt;
    return op->chain;
  }

  Status scan_ops(std::optional<uint32_t> thread, int64_t from, int64_t to, bool with_tensors,
                  const std::function<bool(const OpRecord&)>& visit) const override {
    ReadTransaction txn(db_);  // one snapshot for the whole scan, even while a writer runs
    if (thread) {
      BlockCursor c(*this, *thread, with_tensors);
      TDBG_RETURN_IF_ERROR(c.start_at_tidx(from));
      while (const OpRecord* op = c.peek()) {
        if (op->tidx >= to) break;
        if (!visit(*op)) return Status::Ok();
        TDBG_RETURN_IF_ERROR(c.advance());
      }
      return c.status();
    }
    // All threads in seq order: merge one cursor per thread (each is in seq order already,
    // since within a thread seq and tidx grow together).
    std::vector<std::unique_ptr<BlockCursor>> cursors;
    auto later = [](const BlockCursor* a, const BlockCursor* b) {
      return a->peek()->seq > b->peek()->seq;
    };
    std::priority_queue<BlockCursor*, std::vector<BlockCursor*>, decltype(later)> heap(later);
    for (uint32_t t : op_threads()) {
      auto c = std::make_unique<BlockCursor>(*this, t, with_tensors);
      TDBG_RETURN_IF_ERROR(c->start_at_seq(from));
      if (c->peek() && c->peek()->seq < to) heap.push(c.get());
      cursors.push_back(std::move(c));
    }
    while (!heap.empty()) {
      BlockCursor* c = heap.top();
      heap.pop();
      if (!visit(*c->peek())) return Status::Ok();
      TDBG_RETURN_IF_ERROR(c->advance());
      if (c->peek() && c->peek()->seq < to) heap.push(c);
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
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
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
    // A damaged page ends the list early: an error for `lookup_status`, not a short list.
    if (rc != SQLITE_DONE) read_failed(rc, "reading regions");
    return out;
  }

  std::vector<ModuleRecord> modules() const override {
    std::vector<ModuleRecord> out;
    Stmt s;
    if (!prepare(s, "SELECT id, kind, name, hash, size, time_ns FROM modules ORDER BY id").ok()) {
      return out;
    }
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      ModuleRecord m;
      m.id = static_cast<uint32_t>(s.col_int(0));
      m.kind = static_cast<StringId>(s.col_int(1));
      m.name = static_cast<StringId>(s.col_int(2));
      m.hash = s.col_u64(3);
      m.size = s.col_int(4);
      m.time_ns = s.col_int(5);
      out.push_back(m);
    }
    // A damaged page ends the list early: an error for `lookup_status`, not a short list.
    if (rc != SQLITE_DONE) read_failed(rc, "reading modules");
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
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
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
    // A damaged page ends the list early: an error for `lookup_status`, not a short list.
    if (rc != SQLITE_DONE) read_failed(rc, "reading kernels");
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

  // What the writer could not put in meta: the loss of a database whose descriptors the
  // program closed or replaced, or whose later commits failed, in `path`-lost beside it
  // (writer.cc), read as meta `recording_lost`. Where meta holds one too, the one that counts
  // more lost ops is the later: a full disk lets a commit of meta through now and then, and
  // the note is rewritten at each failed one and at close (t143: meta said 98,393 of 178,024).
  void adopt_lost_note() {
    std::ifstream note(path_ + "-lost");
    std::string text;
    if (!note || !std::getline(note, text) || text.empty()) return;
    auto lost_ops = [](const std::string& json_text) {
      const nlohmann::json j =
          nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
      return j.is_object() && j.value("ops", nlohmann::json()).is_number_integer()
                 ? j["ops"].get<int64_t>()
                 : int64_t{-1};
    };
    for (auto& [key, value] : meta_) {
      if (key != "recording_lost") continue;
      if (lost_ops(text) > lost_ops(value)) value = text;
      return;
    }
    meta_.emplace_back("recording_lost", text);
  }

  bool immutable_ = false;
  bool wal_missing_ = false;  // the header says WAL mode but there is no -wal file
  bool wal_present_ = false;  // the header says WAL mode and there is a -wal file

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

  // Keeps the first failed lookup of `id` as a "corrupt database" error (`lookup_status`).
  void lookup_failed(int rc, const char* what, uint32_t id) const {
    if (!lookup_status_.ok()) return;
    lookup_status_ =
        rc == SQLITE_DONE
            ? Status::Error(path_ + ": corrupt database (" + what + " id " + std::to_string(id) +
                            ", named by a record, is not in the " + what + "s table)")
            : sql_error(rc, (std::string("looking up a ") + what).c_str());
  }

  // Keeps the first failed read that answers as if nothing were there (a count of 0, no more
  // threads) as `lookup_status`.
  void read_failed(int rc, const char* doing) const {
    if (lookup_status_.ok()) lookup_status_ = sql_error(rc, doing);
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

  // Decodes a block that should hold `count` ops; errors name the file.
  Status decode_block(std::string_view blob, int64_t count, bool details,
                      std::vector<OpRecord>* ops) const {
    Status st = DecodeOpBlock(blob, time_base_ns_, details, ops);
    if (!st.ok()) return Status::Error(path_ + ": " + st.message());
    if (static_cast<int64_t>(ops->size()) != count) {
      return Status::Error(path_ + ": corrupt op block (" + std::to_string(ops->size()) +
                           " ops where its row says " + std::to_string(count) + ")");
    }
    return Status::Ok();
  }

  // The decoded block of `thread` that starts at `first_tidx` (with tensors and args), kept
  // while the next lookups fall in it (bisection and context views hit the same blocks).
  const std::vector<OpRecord>* cached_block(uint32_t thread, int64_t first_tidx) const {
    for (CachedBlock& c : cache_) {
      if (c.valid && c.thread == thread && c.first_tidx == first_tidx) return &c.ops;
    }
    Stmt& s = block_by_key_;
    s.reset();
    s.bind_int(1, thread);
    s.bind_int(2, first_tidx);
    CachedBlock& slot = cache_[next_slot_++ % cache_.size()];
    const int rc = s.step();
    slot.valid = false;
    if (rc == SQLITE_ROW) {
      // A block that fails to decode is damage: `lookup_status` says so (the lookup itself
      // answers "no such op").
      Status st = decode_block(s.col_blob(0), s.col_int(1), true, &slot.ops);
      if (st.ok() && (slot.ops.empty() || slot.ops.front().tidx != first_tidx ||
                      slot.ops.front().thread != thread))
        st = Status::Error(path_ + ": corrupt database (the op block at op " +
                           std::to_string(first_tidx) + " of thread " + std::to_string(thread) +
                           " holds other ops)");
      slot.valid = st.ok();
      if (!st.ok() && lookup_status_.ok()) lookup_status_ = st;
    } else if (rc != SQLITE_DONE) {
      read_failed(rc, "reading an op block");
    }
    s.reset();
    if (!slot.valid) return nullptr;
    slot.thread = thread;
    slot.first_tidx = first_tidx;
    return &slot.ops;
  }

  // The first_tidx of the block of `thread` that may hold key `value` (a tidx or a seq, as
  // `lookup` is `block_at_` or `block_at_seq_`): the last block starting at or before it, and
  // whether `value` is within its range.
  std::optional<std::pair<int64_t, bool>> block_before(Stmt& lookup, uint32_t thread,
                                                       int64_t value) const {
    lookup.reset();
    lookup.bind_int(1, thread);
    lookup.bind_int(2, value);
    std::optional<std::pair<int64_t, bool>> out;
    if (lookup.step() == SQLITE_ROW) out.emplace(lookup.col_int(0), lookup.col_int(1) >= value);
    lookup.reset();
    return out;
  }

  // The op of `thread` whose `key` (&OpRecord::tidx or &OpRecord::seq, with the matching
  // `lookup`) is `value`, inside its cached block; nullptr if there is none.
  const OpRecord* find_op(Stmt& lookup, int64_t OpRecord::*key, uint32_t thread,
                          int64_t value) const {
    auto block = block_before(lookup, thread, value);
    if (!block || !block->second) return nullptr;
    const std::vector<OpRecord>* ops = cached_block(thread, block->first);
    if (!ops) return nullptr;
    auto it = std::lower_bound(ops->begin(), ops->end(), value,
                               [key](const OpRecord& o, int64_t v) { return o.*key < v; });
    return it != ops->end() && (*it).*key == value ? &*it : nullptr;
  }

  // Streams one thread's ops in tidx order, a block at a time.
  class BlockCursor {
   public:
    BlockCursor(const ReaderImpl& r, uint32_t thread, bool details)
        : r_(r), thread_(thread), details_(details) {}

    // Positions on the first op with tidx >= `tidx`.
    Status start_at_tidx(int64_t tidx) {
      TDBG_RETURN_IF_ERROR(open(r_.block_start(r_.block_at_, thread_, tidx)));
      while (peek() && peek()->tidx < tidx) TDBG_RETURN_IF_ERROR(advance());
      return Status::Ok();
    }
    // Positions on the first op with seq >= `seq`.
    Status start_at_seq(int64_t seq) {
      TDBG_RETURN_IF_ERROR(open(r_.block_start(r_.block_at_seq_, thread_, seq)));
      while (peek() && peek()->seq < seq) TDBG_RETURN_IF_ERROR(advance());
      return Status::Ok();
    }
    const OpRecord* peek() const { return pos_ < ops_.size() ? &ops_[pos_] : nullptr; }
    Status advance() {
      if (++pos_ < ops_.size()) return Status::Ok();
      return next_block();
    }
    Status status() const { return status_; }

   private:
    Status open(int64_t first_tidx) {
      TDBG_RETURN_IF_ERROR(r_.prepare(
          stmt_, "SELECT ops, count FROM op_blocks WHERE thread = ?1 AND first_tidx >= ?2 "
                 "ORDER BY first_tidx"));
      stmt_.bind_int(1, thread_);
      stmt_.bind_int(2, first_tidx);
      start_ = first_tidx;
      last_tidx_ = std::numeric_limits<int64_t>::min();
      return next_block();
    }
    Status next_block() {
      ops_.clear();
      pos_ = 0;
      while (ops_.empty()) {
        int rc = stmt_.step();
        if (rc == SQLITE_DONE) return ended();
        if (rc != SQLITE_ROW) return status_ = r_.sql_error(rc, "reading ops");
        Status st = r_.decode_block(stmt_.col_blob(0), stmt_.col_int(1), details_, &ops_);
        if (!st.ok()) return status_ = st;
        // Blocks come in tidx order, of this thread; anything else is a damaged index.
        if (!ops_.empty() && (ops_.front().thread != thread_ || ops_.front().tidx <= last_tidx_)) {
          return status_ = Status::Error(r_.path_ + ": corrupt database (op " +
                                         std::to_string(ops_.front().tidx) + " of thread " +
                                         std::to_string(ops_.front().thread) +
                                         " found where thread " + std::to_string(thread_) +
                                         "'s ops after " + std::to_string(last_tidx_) +
                                         " should be)");
        }
        // A thread's blocks follow each other (a ring drops the oldest whole): a gap is a seek
        // that a damaged index sent past blocks.
        if (!ops_.empty() && last_tidx_ != std::numeric_limits<int64_t>::min() &&
            ops_.front().tidx != last_tidx_ + 1)
          return status_ = missing(ops_.front().tidx - 1);
        if (!ops_.empty()) last_tidx_ = ops_.back().tidx;
      }
      return Status::Ok();
    }
    // The scan's end: the thread's last block read, unless a damaged index ended it early.
    Status ended() {
      // Through each index: one that is damaged may end where the scan did.
      for (const char* sql : {"SELECT last_tidx FROM op_blocks INDEXED BY op_blocks_by_tidx "
                              "WHERE thread = ?1 ORDER BY first_tidx DESC LIMIT 1",
                              "SELECT last_tidx FROM op_blocks INDEXED BY op_blocks_by_seq "
                              "WHERE thread = ?1 ORDER BY first_seq DESC LIMIT 1"}) {
        Stmt last;
        TDBG_RETURN_IF_ERROR(r_.prepare(last, sql));
        last.bind_int(1, thread_);
        // (No block read: any block at or after the start is missing.)
        constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
        const int64_t read_to = last_tidx_ != kNone ? last_tidx_ : start_ == kNone ? kNone : start_ - 1;
        if (last.step() == SQLITE_ROW && last.col_int(0) > read_to && last.col_int(0) >= start_)
          return status_ = missing(last.col_int(0));
      }
      return Status::Ok();
    }
    Status missing(int64_t to) const {
      const int64_t from = last_tidx_ == std::numeric_limits<int64_t>::min() ? std::max<int64_t>(start_, 0)
                                                                           : last_tidx_ + 1;
      return Status::Error(r_.path_ + ": corrupt database (ops " + std::to_string(from) +
                           "-" + std::to_string(to) + " of thread " + std::to_string(thread_) +
                           " missing from where its index leads)");
    }
    const ReaderImpl& r_;
    uint32_t thread_;
    bool details_;
    Stmt stmt_;
    std::vector<OpRecord> ops_;
    size_t pos_ = 0;
    int64_t start_ = 0;  // the scan's first block begins at or after this tidx
    int64_t last_tidx_ = std::numeric_limits<int64_t>::min();
    Status status_;
  };

  // Where a scan of `thread` from key `value` starts: the first_tidx of the block that may
  // hold it, or of the first block (the lowest first_tidx) when none starts before it.
  int64_t block_start(Stmt& lookup, uint32_t thread, int64_t value) const {
    auto block = block_before(lookup, thread, value);
    return block ? block->first : std::numeric_limits<int64_t>::min();
  }

  // Threads that have ops, by walking the primary key: O(threads · log ops).
  std::vector<uint32_t> op_threads() const {
    if (immutable_ && threads_cached_) return op_threads_;
    // Through each index: a damaged one may skip threads, or answer none.
    std::vector<uint32_t> out[2];
    const char* names[2] = {"op_blocks_by_tidx", "op_blocks_by_seq"};
    for (int k = 0; k < 2; ++k) {
      Stmt s;
      if (!prepare(s, std::string("SELECT thread FROM op_blocks INDEXED BY ") + names[k] +
                          " WHERE thread > ?1 ORDER BY thread LIMIT 1")
               .ok()) {
        return {};
      }
      int64_t last = -1;
      for (;;) {
        s.reset();
        s.bind_int(1, last);
        const int rc = s.step();
        if (rc != SQLITE_ROW) {
          if (rc != SQLITE_DONE) read_failed(rc, "listing threads");
          break;
        }
        if (s.col_int(0) <= last) {
          // A damaged index answers a thread not after the last: the walk would never end.
          corrupt_index(std::string(names[k]) + " lists thread " + std::to_string(s.col_int(0)) +
                        " after thread " + std::to_string(last));
          break;
        }
        last = s.col_int(0);
        out[k].push_back(static_cast<uint32_t>(last));
      }
    }
    if (out[0] != out[1]) corrupt_index("the op block indexes list other threads");
    op_threads_ = out[0];
    threads_cached_ = true;
    return out[0];
  }

  void corrupt_index(const std::string& what) const {
    if (lookup_status_.ok()) lookup_status_ = Status::Error(path_ + ": corrupt database (" + what + ")");
  }

  std::string path_;
  sqlite3* db_;
  int schema_version_ = 0;
  int64_t time_base_ns_ = 0;
  std::vector<std::pair<std::string, std::string>> meta_;
  mutable Stmt block_at_, block_at_seq_, block_by_key_, string_, frame_;
  struct CachedBlock {
    bool valid = false;
    uint32_t thread = 0;
    int64_t first_tidx = 0;
    std::vector<OpRecord> ops;
  };
  mutable std::array<CachedBlock, 4> cache_;
  mutable size_t next_slot_ = 0;
  mutable std::unordered_map<StringId, std::string> strings_;
  mutable Status lookup_status_;  // the first failed string, frame or op-block lookup
  mutable std::unordered_map<uint32_t, int64_t> count_cache_;
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
  // NOMUTEX: a Reader is used by one thread at a time, so SQLite's per-call locking is waste.
  int rc = sqlite3_open_v2(uri.c_str(), &db,
                           SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc == SQLITE_OK) rc = RegisterSqlFunctions(db);  // for the views (query())
  if (rc != SQLITE_OK) {
    std::string msg = path + ": cannot open: " + (db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return Status::Error(msg);
  }
  sqlite3_busy_timeout(db, 2000);
  auto reader = std::make_unique<ReaderImpl>(path, db);
  reader->immutable_ = !has_wal;
  reader->wal_missing_ = wal_mode && !has_wal;
  reader->wal_present_ = wal_mode && has_wal;
  Status init = reader->init();
  if (!init.ok() && has_wal) {
    // Reading through a -wal file needs its -shm index beside it, which SQLite creates when
    // it is missing (a killed run copied without it): not in a directory it cannot write.
    const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
    struct stat shm;
    if (!file_exists(path + "-shm", &shm) && ::access(dir.c_str(), W_OK) != 0)
      return Status::Error(path + ": its -wal file (a process that did not close its database) "
                           "needs a -shm index beside it, which cannot be created in this "
                           "read-only directory: copy the run's files to a writable one");
  }
  TDBG_RETURN_IF_ERROR(init);
  reader->adopt_lost_note();
  return std::unique_ptr<Reader>(std::move(reader));
}

// Whether the -wal file at `path` holds a commit: a frame that ends a transaction (its
// "database size after commit" is not 0) with the salts of the header. A process killed in its
// first transaction leaves frames without one, or the 32-byte header alone.
bool wal_has_commit(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  unsigned char header[32] = {};
  bool committed = false;
  if (std::fread(header, 1, sizeof header, f) == sizeof header) {
    const uint32_t page_size = be32(header + 8);
    unsigned char frame[24];
    for (long at = 32; !committed && page_size >= 512 && page_size <= 65536 &&
                       std::fseek(f, at, SEEK_SET) == 0 &&
                       std::fread(frame, 1, sizeof frame, f) == sizeof frame;
         at += 24 + static_cast<long>(page_size))
      committed = be32(frame + 4) != 0 && std::memcmp(frame + 8, header + 16, 8) == 0;
  }
  std::fclose(f);
  return committed;
}

// Whether nothing was ever committed to the database at `path`, which does not open: an empty
// file, a file of at most its first page (no table yet) whose -wal holds no commit, or one
// with a hot rollback journal and no meta table (killed while the writer switched the new file
// to WAL, which SQLite does under a rollback journal). What a process leaves when it is killed
// between creating its database and the first commit (a few ms).
bool nothing_committed(const std::string& path) {
  struct stat st;
  if (!file_exists(path, &st)) return false;
  if (st.st_size == 0) return true;
  struct stat wal;
  if (file_exists(path + "-wal", &wal) && wal_has_commit(path + "-wal")) return false;
  struct stat journal;
  if (file_exists(path + "-journal", &journal) && journal.st_size > 0) return true;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  unsigned char header[100] = {};
  const size_t n = std::fread(header, 1, sizeof header, f);
  std::fclose(f);
  if (n < sizeof header || std::memcmp(header, "SQLite format 3", 16) != 0) return false;
  uint32_t page_size = (uint32_t{header[16]} << 8) | header[17];
  if (page_size == 1) page_size = 65536;
  return be32(header + 28) <= 1 && st.st_size <= static_cast<int64_t>(page_size);
}

namespace {

// What orders and pairs the processes of a run (Run::Open, PairProcesses).
struct ProcessKey {
  bool unknown = false;  // no process metadata committed: after every known process
  int64_t rank = -1, depth = 0, worker = -1, start = 0, pid = 0, ppid = 0;
  bool has_rank = false;  // its own torch.distributed rank, or its nearest recorded ancestor's
  bool phase = false;     // `ppid` is its recorded parent's parent (see Run::phase_parent)
};

std::vector<ProcessKey> process_keys(const std::vector<std::unique_ptr<Reader>>& processes) {
  std::unordered_map<int64_t, size_t> by_pid;
  std::vector<ProcessKey> keys(processes.size());
  for (size_t i = 0; i < processes.size(); ++i) {
    const Reader& r = *processes[i];
    ProcessKey& k = keys[i];
    k.unknown = r.meta("start_time_ns").empty();
    k.start = std::strtoll(r.meta("start_time_ns").c_str(), nullptr, 10);
    k.pid = std::strtoll(r.meta("pid").c_str(), nullptr, 10);
    k.ppid = std::strtoll(r.meta("ppid").c_str(), nullptr, 10);
    const std::string rank = r.meta("rank");
    if (!rank.empty()) {
      k.rank = std::strtoll(rank.c_str(), nullptr, 10);
      k.has_rank = true;
    }
    const std::string worker = r.meta("worker");
    if (!worker.empty()) k.worker = std::strtoll(worker.c_str(), nullptr, 10);
    by_pid[k.pid] = i;
  }
  // A parent that began recording only after its child ended ran another program since (a
  // shell's exec of the last command of `bash -c "train && resume"`): the child is an
  // earlier phase beside it, not below it.
  for (size_t i = 0; i < processes.size(); ++i) {
    const std::string end = processes[i]->meta("end_time_ns");
    auto it = by_pid.find(keys[i].ppid);
    if (end.empty() || it == by_pid.end() || it->second == i || keys[it->second].unknown) continue;
    if (keys[it->second].start >= std::strtoll(end.c_str(), nullptr, 10)) {
      keys[i].ppid = keys[it->second].ppid;
      keys[i].phase = true;
    }
  }
  for (ProcessKey& k : keys) {
    // Walk up to the nearest ancestor recorded in this run (bounded: pids can be reused).
    int64_t ppid = k.ppid;
    for (size_t hops = 0; hops < keys.size(); ++hops) {
      auto it = by_pid.find(ppid);
      if (it == by_pid.end() || it->second >= keys.size() || ppid == k.pid) break;
      const ProcessKey& parent = keys[it->second];
      ++k.depth;
      if (!k.has_rank && parent.has_rank) {
        k.rank = parent.rank;
        k.has_rank = true;
      }
      ppid = parent.ppid;
    }
  }
  return keys;
}

}  // namespace

nlohmann::json ReadRunManifest(const std::string& run_path) {
  std::error_code ec;
  std::filesystem::path dir = run_path;
  if (!std::filesystem::is_directory(dir, ec)) dir = dir.parent_path();
  std::ifstream in(dir / kRunManifest);
  if (!in) return nullptr;
  nlohmann::json manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return manifest.is_discarded() ? nlohmann::json() : manifest;
}

pid_t LiveRecorder(const std::string& dir) {
  const nlohmann::json manifest = ReadRunManifest(dir);
  if (!manifest.is_object() || !manifest.value("exit_status", nlohmann::json()).is_null() ||
      !manifest.value("recorder_pid", nlohmann::json()).is_number_integer())
    return 0;
  const pid_t recorder = static_cast<pid_t>(manifest["recorder_pid"].get<int64_t>());
  std::ifstream cmdline("/proc/" + std::to_string(recorder) + "/cmdline");
  const std::string argv((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  const bool live = recorder > 0 && recorder != getpid() && ::kill(recorder, 0) == 0 &&
                    argv.find(std::string("record") + '\0') != std::string::npos;
  return live ? recorder : 0;
}

StatusOr<Run> Run::Open(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    // (A folder above it that cannot be searched says "Permission denied".)
    if (errno == ENOENT || errno == ENOTDIR) return Status::Error(path + ": no such file or directory");
    return Status::Error(path + ": cannot open: " + std::strerror(errno));
  }
  Run run;
  run.path = path;
  if (!S_ISDIR(st.st_mode)) {
    TDBG_ASSIGN_OR_RETURN(auto reader, Reader::Open(path));
    run.processes.push_back(std::move(reader));
    run.one_database = true;
    return run;
  }
  DIR* dir = ::opendir(path.c_str());
  if (!dir) return Status::Error(path + ": cannot list directory: " + std::strerror(errno));
  std::vector<std::string> files;
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (IsRunDatabaseName(name)) files.push_back(path + "/" + name);
  }
  ::closedir(dir);
  if (files.empty()) {
    struct stat manifest;
    if (::stat((path + "/" + kRunManifest).c_str(), &manifest) == 0) {
      if (const pid_t recorder = LiveRecorder(path); recorder != 0)
        return Status::Error(path + ": still being recorded (tdbg record, pid " +
                             std::to_string(recorder) + "), and no process of the program has "
                             "loaded torch yet: nothing to read so far");
      // `tdbg record` said why, where it was not that no process loaded torch.
      std::ifstream in(path + "/" + kRunManifest);
      const nlohmann::json m = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (m.is_object() && m.value("not_recorded", nlohmann::json()).is_string())
        return Status::Error(path +
                             ": nothing was recorded: " + m["not_recorded"].get<std::string>() +
                             " (" + kRunManifest + " names the program)");
      return Status::Error(path + ": no process of the recorded program loaded torch, so nothing "
                                  "was recorded (" + kRunManifest + " names the program)");
    }
    return Status::Error(path + ": no *.sqlite run database in this directory (a recorded program"
                                " writes one per process that loads torch)");
  }
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    auto reader = Reader::Open(f);
    if (!reader.ok() && files.size() > 1 && nothing_committed(f)) {
      run.skipped.push_back(f + ": left out, nothing was committed to it (its process was "
                                "killed while creating it)");
      continue;
    }
    if (!reader.ok()) return reader.status();
    if (files.size() > 1 && (*reader)->meta("pid").empty() && (*reader)->op_count() == 0) {
      // Created, then killed before its first flush: nothing of the process but the schema.
      // Kept, it would pair as a root process with another run's main process.
      run.skipped.push_back(f + ": left out, it holds no op and no process metadata (its "
                                "process was killed within its first flush interval)");
      continue;
    }
    run.processes.push_back(std::move(*reader));
  }
  if (run.processes.empty())
    return Status::Error(path + ": no database in this directory holds anything (" +
                         std::to_string(run.skipped.size()) + " with nothing committed)");
  // A canonical order, so that the same process of two runs has the same index (the diff,
  // the report and the trace export pair processes by index): processes whose metadata was
  // never committed last, then by torch.distributed rank
  // (meta `rank`, "R/W"; a process without one inherits its parent's, so DataLoader workers
  // follow their rank), then by depth in the process tree, then by DataLoader worker id
  // (meta `worker`, "ID/N"), then by start time and pid. Start order alone swaps ranks, or
  // workers, that start at the same moment.
  const std::vector<ProcessKey> keys = process_keys(run.processes);
  std::vector<size_t> order(run.processes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const ProcessKey& x = keys[a];
    const ProcessKey& y = keys[b];
    return std::tie(x.unknown, x.rank, x.depth, x.worker, x.start, x.pid) <
           std::tie(y.unknown, y.rank, y.depth, y.worker, y.start, y.pid);
  });
  std::vector<std::unique_ptr<Reader>> sorted;
  for (size_t i : order) sorted.push_back(std::move(run.processes[i]));
  run.processes = std::move(sorted);
  for (size_t i = 0; i < run.processes.size(); ++i) run.shown_index.push_back(i);
  for (const ProcessKey& k : keys)
    if (k.phase) run.phase_parent[k.pid] = k.ppid;
  return run;
}

std::string Run::ppid(size_t p) const {
  const Reader& r = *processes[p];
  auto it = phase_parent.find(std::strtoll(r.meta("pid").c_str(), nullptr, 10));
  return it == phase_parent.end() ? r.meta("ppid") : std::to_string(it->second);
}

Status Run::pin_snapshot() {
  for (auto& p : processes) TDBG_RETURN_IF_ERROR(p->pin_snapshot());
  return Status::Ok();
}

Status Run::lookup_status() const {
  for (const auto& r : processes) TDBG_RETURN_IF_ERROR(r->lookup_status());
  return Status::Ok();
}

void PairProcesses(Run& a, Run& b) {
  const std::vector<ProcessKey> ka = process_keys(a.processes), kb = process_keys(b.processes);
  // What pairs: the rank (own or inherited) and the DataLoader worker id, and among the
  // processes of a run alike in both, the canonical order (depth in the process tree, then
  // start): a DataLoader starts its workers anew each epoch, and worker 1 of epoch 2 pairs
  // with worker 1 of epoch 2, whichever run ran more epochs or more workers.
  using Bucket = std::pair<int64_t, int64_t>;
  auto bucket = [](const ProcessKey& k) { return Bucket{k.has_rank ? k.rank : -1, k.worker}; };
  // Indices of each run by bucket, in canonical order.
  std::map<Bucket, std::vector<size_t>> ga, gb;
  for (size_t i = 0; i < ka.size(); ++i) ga[bucket(ka[i])].push_back(i);
  for (size_t i = 0; i < kb.size(); ++i) gb[bucket(kb[i])].push_back(i);
  std::vector<std::pair<size_t, size_t>> pairs;
  std::vector<size_t> extra_a, extra_b;
  auto without_ops = [](const Run& run, size_t i) { return !run.processes[i]->any_op(); };
  // The longer side leaves out its processes without ops first (an mp.spawn parent, a
  // launcher that only imported torch, a process killed before its first op).
  auto trim = [&](std::vector<size_t>& longer, size_t to, const Run& run, std::vector<size_t>& extra) {
    for (size_t i = 0; i < longer.size() && longer.size() > to;) {
      if (without_ops(run, longer[i])) {
        extra.push_back(longer[i]);
        longer.erase(longer.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  };
  for (auto& [g, list_a] : ga) {
    std::vector<size_t> list_b = gb.count(g) ? gb[g] : std::vector<size_t>{};
    if (list_a.size() > list_b.size()) trim(list_a, list_b.size(), a, extra_a);
    if (list_b.size() > list_a.size()) trim(list_b, list_a.size(), b, extra_b);
    const size_t n = std::min(list_a.size(), list_b.size());
    for (size_t i = 0; i < n; ++i) pairs.emplace_back(list_a[i], list_b[i]);
    extra_a.insert(extra_a.end(), list_a.begin() + static_cast<std::ptrdiff_t>(n), list_a.end());
    extra_b.insert(extra_b.end(), list_b.begin() + static_cast<std::ptrdiff_t>(n), list_b.end());
  }
  for (auto& [g, list_b] : gb) {
    if (!ga.count(g)) extra_b.insert(extra_b.end(), list_b.begin(), list_b.end());
  }
  std::sort(pairs.begin(), pairs.end());
  std::sort(extra_a.begin(), extra_a.end());
  std::sort(extra_b.begin(), extra_b.end());
  // Already paired by index (the common case): keep the order, and `tdbg show --process`
  // numbers with it.
  bool in_place = true;
  for (size_t k = 0; k < pairs.size() && in_place; ++k)
    in_place = pairs[k].first == k && pairs[k].second == k;
  if (in_place) return;
  auto reorder = [](Run& run, const std::vector<size_t>& order) {
    std::vector<std::unique_ptr<Reader>> out;
    std::vector<size_t> shown;
    for (size_t i : order) {
      out.push_back(std::move(run.processes[i]));
      shown.push_back(run.shown(i));
    }
    run.processes = std::move(out);
    run.shown_index = std::move(shown);
  };
  std::vector<size_t> order_a, order_b;
  for (auto [i, j] : pairs) {
    order_a.push_back(i);
    order_b.push_back(j);
  }
  order_a.insert(order_a.end(), extra_a.begin(), extra_a.end());
  order_b.insert(order_b.end(), extra_b.begin(), extra_b.end());
  reorder(a, order_a);
  reorder(b, order_b);
}

}  // namespace tdbg::tracer
