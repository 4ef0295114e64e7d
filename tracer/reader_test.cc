// Tests of the reader on bad input: each kind of file that is not a good tdbg database gives
// one line naming the file and the problem, and nothing crashes; plus run directories.
#include "tracer/reader.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "tracer/test_dir.h"
#include "tracer/testing.h"
#include "tracer/writer.h"

namespace tdbg::tracer {
namespace {

using testing::TempDir;

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string RandomBytes(size_t n, uint64_t seed) {
  testing::Rng rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng.next());
  return s;
}

void MakeRun(const std::string& path, int64_t ops, int64_t start_time = 0,
             std::vector<std::pair<std::string, std::string>> meta = {{"pid", "1"}}) {
  testing::SyntheticRun run;
  run.ops = ops;
  run.meta = std::move(meta);
  run.meta.emplace_back("start_time_ns", std::to_string(start_time));
  REQUIRE(testing::WriteSyntheticRun(path, run).ok());
}

void RunSql(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  CHECK(sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
}

// The byte ranges of the root pages of the schema objects that `where` selects from
// sqlite_master (`tbl_name = 'op_blocks'`): where to damage a file.
std::vector<std::pair<size_t, size_t>> RootPages(const std::string& path, const std::string& where) {
  std::vector<std::pair<size_t, size_t>> out;
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  const std::string sql =
      "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM sqlite_master WHERE " + where;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) {
    const size_t size = static_cast<size_t>(sqlite3_column_int64(st, 1));
    const size_t page = static_cast<size_t>(sqlite3_column_int64(st, 0));
    out.emplace_back((page - 1) * size, page * size);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

// Opens `path` expecting an error: one line, naming the file, containing `problem`.
void ExpectOpenError(const std::string& path, const std::string& problem) {
  auto r = Reader::Open(path);
  REQUIRE_FALSE(r.ok());
  const std::string& msg = r.status().message();
  INFO(msg);
  CHECK(msg.rfind(path + ": ", 0) == 0);
  CHECK(msg.find('\n') == std::string::npos);
  CHECK(msg.find(problem) != std::string::npos);
}

TEST_CASE("each bad input gives a one-line error naming the file and the problem") {
  TempDir dir;
  ExpectOpenError(dir.file("missing.sqlite"), "no such file");

  WriteBytes(dir.file("empty.sqlite"), "");
  ExpectOpenError(dir.file("empty.sqlite"), "empty file");

  // A named pipe: not read (that would wait for a writer), and not called empty.
  REQUIRE(mkfifo(dir.file("pipe.sqlite").c_str(), 0600) == 0);
  ExpectOpenError(dir.file("pipe.sqlite"), "not a regular file (a pipe, socket or device)");

  WriteBytes(dir.file("text.sqlite"), "step,loss\n1,0.5\n");
  ExpectOpenError(dir.file("text.sqlite"), "not a SQLite database");

  WriteBytes(dir.file("random.sqlite"), RandomBytes(8192, 1));
  ExpectOpenError(dir.file("random.sqlite"), "not a SQLite database");

  // SQLite's magic followed by garbage: the header itself is wrong.
  WriteBytes(dir.file("magic.sqlite"), std::string("SQLite format 3\0", 16) + RandomBytes(8176, 2));
  auto magic = Reader::Open(dir.file("magic.sqlite"));
  REQUIRE_FALSE(magic.ok());
  CHECK(magic.status().message().find('\n') == std::string::npos);
  CHECK(magic.status().message().rfind(dir.file("magic.sqlite"), 0) == 0);

  // A real SQLite database of something else.
  RunSql(dir.file("other.sqlite"), "CREATE TABLE t(x); INSERT INTO t VALUES(1);");
  ExpectOpenError(dir.file("other.sqlite"), "not a tdbg run");
  RunSql(dir.file("other_meta.sqlite"),
         "CREATE TABLE meta(key, value); INSERT INTO meta VALUES('format','x');");
  ExpectOpenError(dir.file("other_meta.sqlite"), "not a tdbg run");

  // A tdbg database from a newer tdbg.
  MakeRun(dir.file("newer.sqlite"), 10);
  const std::string newer = std::to_string(kSchemaVersion + 1);
  RunSql(dir.file("newer.sqlite"), ("PRAGMA user_version = " + newer).c_str());
  ExpectOpenError(dir.file("newer.sqlite"), "written by a newer tdbg: schema " + newer +
                                                ", this tdbg reads up to " +
                                                std::to_string(kSchemaVersion));
  // And from an older one (schema 1 stored a row per op and per tensor).
  MakeRun(dir.file("older.sqlite"), 10);
  RunSql(dir.file("older.sqlite"), "PRAGMA user_version = 1");
  ExpectOpenError(dir.file("older.sqlite"), "written by an older tdbg: schema 1");

  // A truncated copy of a real database (cut at a page boundary and mid-page).
  MakeRun(dir.file("good.sqlite"), 20000);
  const std::string good = ReadBytes(dir.file("good.sqlite"));
  REQUIRE(good.size() > 65536);
  size_t page_size = (static_cast<size_t>(static_cast<unsigned char>(good[16])) << 8) |
                     static_cast<unsigned char>(good[17]);
  if (page_size == 1) page_size = 65536;
  WriteBytes(dir.file("cut.sqlite"), good.substr(0, good.size() / 2 / page_size * page_size));
  ExpectOpenError(dir.file("cut.sqlite"), "truncated");
  WriteBytes(dir.file("cut_odd.sqlite"), good.substr(0, good.size() / 2 + 100));
  ExpectOpenError(dir.file("cut_odd.sqlite"), "truncated");
  // A copy that kept only the header page.
  WriteBytes(dir.file("header_only.sqlite"), good.substr(0, 100));
  ExpectOpenError(dir.file("header_only.sqlite"), "truncated");
  // A whole file whose page count field says 70 TB: the header may be what is damaged.
  std::string huge = good;
  huge[28] = static_cast<char>(0x40);
  WriteBytes(dir.file("page_count.sqlite"), huge);
  ExpectOpenError(dir.file("page_count.sqlite"), "damaged header or truncated: the header says ");

  ExpectOpenError(dir.path(), "is a directory");
}

TEST_CASE("a corrupt database fails when scanned, with one line, never a crash") {
  TempDir dir;
  MakeRun(dir.file("good.sqlite"), 20000);
  const std::string good = ReadBytes(dir.file("good.sqlite"));
  // Overwrite pages in the middle (where ops and tensors live) with random bytes, in several
  // places and with several seeds: whatever SQLite meets, the reader must answer in one line.
  int failures_seen = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::string bad = good;
    testing::Rng rng(seed);
    for (int k = 0; k < 4; ++k) {
      const size_t page = 2 + rng.below(bad.size() / 8192 - 2);
      const std::string noise = RandomBytes(8192, seed * 100 + static_cast<uint64_t>(k));
      bad.replace(page * 8192, 8192, noise);
    }
    const std::string path = dir.file("bad" + std::to_string(seed) + ".sqlite");
    WriteBytes(path, bad);
    auto r = Reader::Open(path);
    if (!r.ok()) {
      ++failures_seen;
      CHECK(r.status().message().find('\n') == std::string::npos);
      CHECK(r.status().message().rfind(path, 0) == 0);
      continue;
    }
    Status st = (*r)->scan_ops(std::nullopt, 0, std::numeric_limits<int64_t>::max(), true,
                               [](const OpRecord&) { return true; });
    for (uint32_t t : {0u, 1u}) {
      Status s2 = (*r)->scan_ops(t, 0, std::numeric_limits<int64_t>::max(), true,
                                 [](const OpRecord&) { return true; });
      if (!s2.ok() && st.ok()) st = s2;
    }
    (void)(*r)->op_count();
    (void)(*r)->op(10000);
    if (!st.ok()) {
      ++failures_seen;
      INFO(st.message());
      CHECK(st.message().find('\n') == std::string::npos);
      CHECK(st.message().rfind(path, 0) == 0);
      CHECK(st.message().find("corrupt") != std::string::npos);
    }
  }
  CHECK(failures_seen > 0);  // random pages in a 20000-op database cannot all go unnoticed
}

TEST_CASE("a loss noted beside the database counts when it counts more ops than meta's") {
  // A full disk lets a commit of meta through now and then, with the ops lost so far; the
  // -lost note beside the database, rewritten at each failed commit and at close, has the rest.
  TempDir dir;
  const std::string path = dir.file("r.sqlite");
  MakeRun(path, 10);
  RunSql(path,
         "INSERT OR REPLACE INTO meta VALUES ('recording_lost', "
         "'{\"first_seq\":10,\"first_step\":0,\"ops\":100,\"error\":\"cannot commit\"}')");
  auto lost_ops = [&] {
    auto r = Reader::Open(path);
    REQUIRE(r.ok());
    return nlohmann::json::parse((*r)->meta("recording_lost"))["ops"].get<int64_t>();
  };
  CHECK(lost_ops() == 100);
  auto note = [&](int64_t ops) {
    std::ofstream(path + "-lost") << R"({"first_seq":10,"first_step":0,"ops":)" << ops
                                  << R"(,"error":"cannot commit"})"
                                  << "\n";
  };
  note(250);
  CHECK(lost_ops() == 250);
  note(40);  // older than meta's
  CHECK(lost_ops() == 100);
}

TEST_CASE("held: the seqs a database holds, and whether it begins after its first op") {
  TempDir dir;
  MakeRun(dir.file("r.sqlite"), 5000);
  // What the database holds now, as a fresh reader sees it.
  auto held_now = [&] {
    auto r = Reader::Open(dir.file("r.sqlite"));
    REQUIRE(r.ok());
    auto held = (*r)->held();
    REQUIRE(held.ok());
    return *held;
  };
  Reader::Held held = held_now();
  CHECK(held.any);
  CHECK(held.first_seq == 0);
  CHECK(held.last_seq == 4999);
  CHECK_FALSE(held.dropped_start);
  // A ring's database: the first blocks deleted, as the writer's ring trims them.
  RunSql(dir.file("r.sqlite"), "DELETE FROM op_blocks WHERE first_seq < 2000");
  held = held_now();
  CHECK(held.first_seq >= 2000);
  CHECK(held.dropped_start);
  RunSql(dir.file("r.sqlite"), "DELETE FROM op_blocks");
  CHECK_FALSE(held_now().any);
}

TEST_CASE("a damaged op_blocks table never reads as a thread with fewer ops") {
  TempDir dir;
  MakeRun(dir.file("good.sqlite"), 20000);
  const std::string good = ReadBytes(dir.file("good.sqlite"));
  int64_t full = 0;
  {
    auto r = Reader::Open(dir.file("good.sqlite"));
    REQUIRE(r.ok());
    full = (*r)->op_count();
  }
  // The pages of op_blocks' root and its indexes' roots: zeroed, SQLite itself reads an
  // empty table there, which no check short of a full integrity check tells from one.
  const std::vector<std::pair<size_t, size_t>> roots =
      RootPages(dir.file("good.sqlite"), "tbl_name = 'op_blocks' AND rootpage > 0");
  // Zeroed pages (a bad sector, a torn copy) across the file: each op count is the whole
  // count, or the damage is said (`lookup_status`), as tdbg diff checks after comparing.
  int damage_said = 0;
  for (size_t at = 2; at + 3 < good.size() / 4096; at += 7) {
    const size_t from = at * 4096, to = (at + 3) * 4096;
    if (std::any_of(roots.begin(), roots.end(),
                    [&](auto& r) { return from < r.second && r.first < to; }))
      continue;
    std::string bad = good;
    bad.replace(at * 4096, 3 * 4096, std::string(3 * 4096, '\0'));
    const std::string path = dir.file("zeroed.sqlite");
    WriteBytes(path, bad);
    auto r = Reader::Open(path);
    if (!r.ok()) {
      // Opening checks the blocks' keys against their indexes.
      if (r.status().message().find("corrupt") != std::string::npos) ++damage_said;
      continue;
    }
    const int64_t n = (*r)->op_count();
    INFO("zeroed at 4 KiB block " << at << ": " << n << " of " << full << " ops");
    CHECK((n == full || !(*r)->lookup_status().ok()));
    if (!(*r)->lookup_status().ok()) {
      ++damage_said;
      CHECK((*r)->lookup_status().message().find("corrupt") != std::string::npos);
    }
  }
  CHECK(damage_said > 0);
}

TEST_CASE("a damaged regions or threads table is said as damage, never a shorter list") {
  TempDir dir;
  const std::string path = dir.file("good.sqlite");
  constexpr uint32_t kRegions = 20000;
  {
    auto w = Writer::Create(path);
    REQUIRE(w.ok());
    for (uint32_t t = 0; t < 400; ++t) (*w)->add_thread({t, 1000 + t, "worker " + std::to_string(t)});
    const StringId name = (*w)->intern("a region with a name of some length");
    for (uint32_t k = 1; k <= kRegions; ++k) {
      RegionRecord g;
      g.id = k;
      g.name = name;
      g.start_seq = k;
      g.end_seq = k;
      (*w)->append_region(g);
    }
    REQUIRE((*w)->close().ok());
  }
  const std::string good = ReadBytes(path);
  size_t full_threads = 0;
  {
    auto r = Reader::Open(path);
    REQUIRE(r.ok());
    REQUIRE((*r)->regions().size() == kRegions);
    full_threads = (*r)->threads().size();
    CHECK((*r)->verify().ok());
  }
  // Zeroed pages across the file: each list whole, or the damage said by `lookup_status` and
  // by `verify` (which diff runs before it calls two runs identical).
  int damage_said = 0;
  for (size_t at = 2; at + 1 < good.size() / 4096; at += 5) {
    std::string bad = good;
    bad.replace(at * 4096, 4096, std::string(4096, '\0'));
    const std::string zeroed = dir.file("zeroed.sqlite");
    WriteBytes(zeroed, bad);
    auto r = Reader::Open(zeroed);
    if (!r.ok()) continue;
    const size_t regions = (*r)->regions().size(), threads = (*r)->threads().size();
    INFO("zeroed at 4 KiB block " << at << ": " << regions << " regions, " << threads << " threads");
    const bool whole = regions == kRegions && threads == full_threads;
    CHECK((whole || !(*r)->lookup_status().ok()));
    if (!whole) {
      ++damage_said;
      auto again = Reader::Open(zeroed);
      REQUIRE(again.ok());
      CHECK_FALSE((*again)->verify().ok());
    }
  }
  CHECK(damage_said > 0);
}

// Everything a scan of all ops returns, as text: what a reader told from a damaged file
// must never silently differ from.
std::string AllOps(const Reader& r) {
  std::string out;
  Status st = r.scan_ops(std::nullopt, 0, std::numeric_limits<int64_t>::max(), true,
                         [&](const OpRecord& o) {
                           out += std::to_string(o.seq) + " " + std::to_string(o.tidx) + " " +
                                  std::to_string(o.name) + " " + std::to_string(o.chain) + " " +
                                  std::to_string(o.step) + " " + std::to_string(o.parent);
                           for (const TensorRecord& t : o.tensors)
                             out += " " + std::to_string(t.hash) + "/" +
                                    std::to_string(t.summary.sum) + "/" + std::to_string(t.shape);
                           for (const ArgRecord& a : o.args) out += " " + std::to_string(a.value);
                           out += "\n";
                           return true;
                         });
  if (!st.ok()) return "error: " + st.message();
  return out;
}

// Writes `bytes` at `path` (replacing the file) with byte `at` xored with `mask`: the flip a
// bad disk or a torn copy leaves.
void WriteFlipped(const std::string& path, std::string bytes, size_t at, uint8_t mask) {
  bytes[at] = static_cast<char>(static_cast<uint8_t>(bytes[at]) ^ mask);
  std::remove(path.c_str());
  WriteBytes(path, bytes);
}

// A sound run of `ops` ops written at `path`: its bytes and every op as read (`AllOps`), to
// compare damaged copies with.
struct GoodRun {
  std::string bytes, ops;
};
GoodRun MakeGoodRun(const std::string& path, int64_t ops) {
  MakeRun(path, ops);
  GoodRun good{ReadBytes(path), ""};
  auto r = Reader::Open(path);
  REQUIRE(r.ok());
  REQUIRE((*r)->verify().ok());
  good.ops = AllOps(**r);
  REQUIRE(good.ops.rfind("error", 0) != 0);
  return good;
}

TEST_CASE("op blocks missing from the middle of a thread fail verify") {
  // Rows lost from the table (a b-tree page gone, a `.recover`ed copy): the indexes agree with
  // the table, every block left is sound, but ops are missing in between.
  TempDir dir;
  // `verify` of a run whose blocks LIMIT `limit` OFFSET `offset` (in thread order) are gone.
  auto verify_without = [&](const std::string& name, int limit, int offset) {
    const std::string path = dir.file(name);
    MakeRun(path, 20000);
    const std::string sql = "DELETE FROM op_blocks WHERE rowid IN (SELECT rowid FROM op_blocks "
                            "ORDER BY thread, first_tidx LIMIT " + std::to_string(limit) +
                            " OFFSET " + std::to_string(offset) + ")";
    RunSql(path, sql.c_str());
    auto r = Reader::Open(path);
    REQUIRE(r.ok());
    return (*r)->verify();
  };
  const Status verified = verify_without("hole.sqlite", 2, 3);
  CHECK_FALSE(verified.ok());
  CHECK(verified.message().find("are missing: no op block holds them") != std::string::npos);
  // The oldest blocks dropped (as a ring does) are no hole.
  CHECK(verify_without("ring.sqlite", 2, 0).ok());
}

TEST_CASE("a flipped byte anywhere in the file is said as damage or changes nothing read") {
  TempDir dir;
  const GoodRun run = MakeGoodRun(dir.file("good.sqlite"), 20000);
  const std::string& good = run.bytes;
  const std::string& expected = run.ops;
  // One byte every ~2.5 KB: op blocks' bytes (hashes, summaries, deltas), b-tree pages, free
  // space. Each flip is caught by opening, by `verify` (a block's checksum or SQLite's page
  // checks), or it hit bytes nothing reads: the ops read are exactly the good file's.
  int said = 0, harmless = 0;
  for (size_t at = 4096 + 17; at < good.size(); at += 2503) {
    const std::string path = dir.file("flipped.sqlite");
    WriteFlipped(path, good, at, 0x5a);
    auto r = Reader::Open(path);
    if (!r.ok()) {
      ++said;
      continue;
    }
    const Status verified = (*r)->verify();
    INFO("byte " << at << " flipped: " << verified.message());
    if (!verified.ok()) {
      ++said;
      CHECK(verified.message().find(path) == 0);
      continue;
    }
    ++harmless;
    CHECK(AllOps(**r) == expected);
  }
  CHECK(said > 0);
}

TEST_CASE("a flipped bit in an op block index is said as damage when opened, never a shorter run") {
  TempDir dir;
  const GoodRun run = MakeGoodRun(dir.file("good.sqlite"), 20000);
  const std::string& good = run.bytes;
  const std::string& expected = run.ops;
  // The indexes' root pages (the whole index in a run of this size).
  const std::vector<std::pair<size_t, size_t>> pages =
      RootPages(dir.file("good.sqlite"), "type = 'index' AND tbl_name = 'op_blocks'");
  REQUIRE(pages.size() == 2);
  // Each byte of the cells' area (the page's end, where the keys are) and its header: a
  // reader that opens reads every op, as a tool that lists them (show, nan) does without
  // `verify`; a key that a flip broke used to send seeks past a block (ops missing) or the
  // thread walk round in circles.
  int said = 0, same = 0;
  for (auto [from, to] : pages) {
    for (size_t at = from; at < to; ++at) {
      if (at >= from + 64 && at < to - 1024) continue;
      const std::string path = dir.file("flipped.sqlite");
      WriteFlipped(path, good, at, 0x04);
      auto r = Reader::Open(path);
      if (!r.ok()) {
        ++said;
        CHECK(r.status().message().find("corrupt") != std::string::npos);
        continue;
      }
      const std::string ops = AllOps(**r);
      INFO("byte " << at << " flipped");
      if (ops.rfind("error", 0) == 0 || !(*r)->lookup_status().ok()) {
        ++said;
        continue;
      }
      ++same;
      CHECK(ops == expected);
    }
  }
  CHECK(said > 0);
}

TEST_CASE("a changed name or source line is damage when opened, not another op") {
  TempDir dir;
  MakeRun(dir.file("good.sqlite"), 2000);
  const std::string good = ReadBytes(dir.file("good.sqlite"));
  REQUIRE(Reader::Open(dir.file("good.sqlite")).ok());
  // One bit of a stored text or number, as a flipped bit on disk leaves it: SQLite's own
  // checks pass, and the op reads as another op or line.
  for (const char* change : {"UPDATE strings SET text = 'aten:;' || substr(text, 7) WHERE id = "
                             "(SELECT min(id) FROM strings WHERE text LIKE 'aten::%')",
                             "UPDATE frames SET line = line + 4 WHERE id = (SELECT min(id) FROM frames)"}) {
    INFO(change);
    const std::string path = dir.file("changed.sqlite");
    std::remove(path.c_str());
    WriteBytes(path, good);
    RunSql(path, change);
    ExpectOpenError(path, "corrupt database (its strings or frames do not match");
  }
}

TEST_CASE("a block whose checksum fails is damage for every read, named with its ops") {
  TempDir dir;
  MakeRun(dir.file("r.sqlite"), 5000);
  // The third block of thread 0, one byte of its ops changed (a hash bit, as a bad sector
  // or a torn write leaves it).
  int64_t first = 0, last = 0;
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(dir.file("r.sqlite").c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "SELECT id, first_tidx, last_tidx, ops FROM op_blocks "
                               "WHERE thread = 0 ORDER BY first_tidx LIMIT 1 OFFSET 2",
                               -1, &st, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    const int64_t id = sqlite3_column_int64(st, 0);
    first = sqlite3_column_int64(st, 1);
    last = sqlite3_column_int64(st, 2);
    std::string blob(static_cast<const char*>(sqlite3_column_blob(st, 3)),
                     static_cast<size_t>(sqlite3_column_bytes(st, 3)));
    sqlite3_finalize(st);
    blob[blob.size() / 2] ^= 1;
    REQUIRE(sqlite3_prepare_v2(db, "UPDATE op_blocks SET ops = ?1 WHERE id = ?2", -1, &st,
                               nullptr) == SQLITE_OK);
    sqlite3_bind_blob(st, 1, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, id);
    REQUIRE(sqlite3_step(st) == SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
  }
  auto r = Reader::Open(dir.file("r.sqlite"));
  REQUIRE(r.ok());
  const Status verified = (*r)->verify();
  REQUIRE_FALSE(verified.ok());
  CHECK(verified.message() == dir.file("r.sqlite") + ": ops " + std::to_string(first) + "-" +
                                  std::to_string(last) +
                                  " of thread 0: corrupt op block (its checksum does not match: the file is damaged)");
  // A scan through it fails; a lookup in it finds no op and says why.
  CHECK(AllOps(**r).find("checksum does not match") != std::string::npos);
  CHECK_FALSE((*r)->op_at(0, first + 1).has_value());
  CHECK((*r)->lookup_status().message().find("checksum does not match") != std::string::npos);
  // Blocks before it still read.
  CHECK((*r)->op_at(0, 0).has_value());
}

// A writer left open after `ops` realistic ops, flushed every `flush_every` and at the end:
// the files as a killed process leaves them (the -wal log not checkpointed into the database).
std::unique_ptr<Writer> LiveWriter(const std::string& path, int64_t ops, int64_t flush_every) {
  auto w = Writer::Create(path);
  REQUIRE(w.ok());
  testing::RealisticOps gen(**w, 0, 1);
  for (int64_t seq = 0; seq < ops; ++seq) {
    (*w)->append_op(gen.next(seq));
    if (seq % flush_every == flush_every - 1 || seq == ops - 1) REQUIRE((*w)->flush().ok());
  }
  return std::move(*w);
}

TEST_CASE("a killed writer's database copied without its -wal file says what is missing") {
  TempDir dir;
  const std::string path = dir.file("killed.sqlite");
  {
    auto w = LiveWriter(path, 100, 100);
    // Copy the main file alone while the writer is live, as a careless `cp x.sqlite` would.
    WriteBytes(dir.file("copy.sqlite"), ReadBytes(path));
  }
  ExpectOpenError(dir.file("copy.sqlite"), "-wal file (which holds the data) is missing");
}

TEST_CASE("a killed writer's -wal cut to its header or its first frame is an incomplete run") {
  TempDir dir;
  const std::string path = dir.file("killed.sqlite");
  auto w = LiveWriter(path, 100, 100);
  const std::string wal = ReadBytes(path + "-wal");
  const size_t frame = 24 + 16384;
  REQUIRE(wal.size() > 32 + frame);
  const std::string copy = dir.file("copy.sqlite");
  // Cut short, as a copy interrupted: no commit whole, so not even the schema is there; it
  // is a tdbg run that holds nothing yet, not "not a tdbg run".
  for (size_t size : {size_t{32}, size_t{100}, 32 + frame}) {
    INFO("-wal of " << size << " bytes");
    WriteBytes(copy, ReadBytes(path));
    std::remove((copy + "-shm").c_str());
    WriteBytes(copy + "-wal", wal.substr(0, size));
    ExpectOpenError(copy, "incomplete: the writer did not close it and its -wal file holds no "
                          "complete commit");
  }
}

TEST_CASE("a killed writer's -wal damaged early is an error, not a run that ended early") {
  TempDir dir;
  const std::string path = dir.file("live.sqlite");
  auto w = LiveWriter(path, 3000, 300);
  // The files as a SIGKILL leaves them: the log not yet checkpointed into the main file.
  const std::string wal = ReadBytes(path + "-wal");
  REQUIRE(wal.size() > 100000);
  const std::string copy = dir.file("copy.sqlite");
  WriteBytes(copy, ReadBytes(path));
  WriteBytes(copy + "-wal", wal);
  {
    auto r = Reader::Open(copy);
    REQUIRE(r.ok());
    CHECK((*r)->op_count() == 3000);  // whole: no false alarm
  }
  // One bit flipped a third into the log: SQLite would end the log there, silently.
  std::string bad = wal;
  bad[bad.size() / 3] ^= 1;
  std::remove((copy + "-shm").c_str());
  WriteBytes(copy + "-wal", bad);
  ExpectOpenError(copy, "its -wal file is damaged: frame ");
  // One bit of a frame's salt (SQLite takes that frame for the end of the log) or of the
  // log's header (SQLite then ignores the whole log).
  const size_t frame = 24 + 16384;
  REQUIRE(wal.size() > 32 + 6 * frame);
  for (size_t at : {32 + 3 * frame + 9, size_t{5}, size_t{26}}) {
    INFO("byte " << at);
    bad = wal;
    bad[at] ^= 1;
    std::remove((copy + "-shm").c_str());
    WriteBytes(copy + "-wal", bad);
    ExpectOpenError(copy, "its -wal file is damaged: ");
  }
  // A torn last frame (the writer killed inside a write) is no damage: what precedes reads.
  std::remove((copy + "-shm").c_str());
  WriteBytes(copy + "-wal", wal.substr(0, wal.size() - 100));
  CHECK(Reader::Open(copy).ok());
}

TEST_CASE("a failed transaction's frames after the end of a -wal are no damage") {
  // A full disk fails a commit: its frames stay after the log's last commit, one of them
  // written in part, and no commit frame follows. What was committed reads.
  TempDir dir;
  const std::string path = dir.file("live.sqlite");
  auto w = LiveWriter(path, 3000, 300);
  const std::string wal = ReadBytes(path + "-wal");
  const size_t frame = 24 + 16384;
  auto be32_at = [&](size_t at) {
    const auto* p = reinterpret_cast<const unsigned char*>(wal.data() + at);
    return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
  };
  // A commit frame followed by a transaction of at least three frames.
  const size_t frames = (wal.size() - 32) / frame;
  size_t commit = 0;
  for (size_t k = 0; k + 3 < frames && commit == 0; ++k)
    if (be32_at(32 + k * frame + 4) != 0 && be32_at(32 + (k + 1) * frame + 4) == 0 &&
        be32_at(32 + (k + 2) * frame + 4) == 0 && be32_at(32 + (k + 3) * frame + 4) == 0)
      commit = k + 1;  // frames through this one (1-based) are committed
  REQUIRE(commit > 0);
  // The next transaction's first frame torn (its page half written), two more after it.
  std::string failed = wal.substr(0, 32 + (commit + 3) * frame);
  failed[32 + commit * frame + 24 + 8000] ^= 0x55;
  const std::string copy = dir.file("copy.sqlite");
  WriteBytes(copy, ReadBytes(path));
  WriteBytes(copy + "-wal", failed);
  auto r = Reader::Open(copy);
  INFO((r.ok() ? std::string() : r.status().message()));
  CHECK(r.ok());
}

TEST_CASE("a killed run's -wal in a directory that cannot be written says what to do") {
  TempDir dir;
  const std::string path = dir.file("live.sqlite");
  auto w = LiveWriter(path, 500, 500);
  // Copied without its -shm index into a directory the reader cannot write.
  const std::string ro = dir.file("ro");
  REQUIRE(::mkdir(ro.c_str(), 0755) == 0);
  WriteBytes(ro + "/copy.sqlite", ReadBytes(path));
  WriteBytes(ro + "/copy.sqlite-wal", ReadBytes(path + "-wal"));
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  REQUIRE(::chmod(ro.c_str(), 0555) == 0);
  const std::string want = "cannot be created in this read-only directory: copy the run's files";
  if (::geteuid() != 0) {
    ExpectOpenError(ro + "/copy.sqlite", want);
  } else {
    // root writes anywhere: read as an unprivileged user, in a child.
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
      auto r = Reader::Open(ro + "/copy.sqlite");
      ::_exit(!r.ok() && r.status().message().find(want) != std::string::npos ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  ::chmod(ro.c_str(), 0755);
}

TEST_CASE("a run below a folder that cannot be searched says permission denied") {
  TempDir dir;
  const std::string locked = dir.file("locked");
  REQUIRE(::mkdir(locked.c_str(), 0755) == 0);
  REQUIRE(::mkdir((locked + "/run").c_str(), 0755) == 0);
  MakeRun(locked + "/run/a.sqlite", 10, 100);
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  REQUIRE(::chmod(locked.c_str(), 0) == 0);
  const std::string want = locked + "/run: cannot open: Permission denied";
  // As an unprivileged user (root searches any folder), in a child.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    auto r = Run::Open(locked + "/run");
    ::_exit(!r.ok() && r.status().message() == want ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  ::chmod(locked.c_str(), 0755);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("runs: a directory of databases in start order, or one file") {
  TempDir dir;
  auto empty = Run::Open(dir.path());
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().message() ==
        dir.path() + ": no *.sqlite run database in this directory (a recorded program writes"
                     " one per process that loads torch)");
  CHECK_FALSE(Run::Open(dir.file("nothing")).ok());

  MakeRun(dir.file("b.sqlite"), 10, /*start_time=*/100);
  MakeRun(dir.file("a.sqlite"), 20, /*start_time=*/200);
  WriteBytes(dir.file("a.sqlite-wal"), "");  // companions are not databases of the run
  WriteBytes(dir.file("notes.txt"), "hello");
  auto run = Run::Open(dir.path());
  INFO(run.status().message());
  REQUIRE(run.ok());
  REQUIRE(run->processes.size() == 2);
  CHECK(run->processes[0]->op_count() == 10);  // started first
  CHECK(run->processes[1]->op_count() == 20);

  auto single = Run::Open(dir.file("a.sqlite"));
  REQUIRE(single.ok());
  REQUIRE(single->processes.size() == 1);

  // One bad database makes the run fail with that database's line.
  WriteBytes(dir.file("c.sqlite"), "junk");
  auto bad = Run::Open(dir.path());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().rfind(dir.file("c.sqlite") + ": ", 0) == 0);
}

TEST_CASE("runs: a database with nothing committed is left out with a note, not fatal") {
  // A process killed between creating its database and the first commit leaves an empty
  // file, or the first page alone with a -wal that holds no frame: the run's other databases
  // still open.
  TempDir dir;
  MakeRun(dir.file("a.sqlite"), 10, /*start_time=*/100);
  WriteBytes(dir.file("b.sqlite"), "");
  RunSql(dir.file("c.sqlite"), "PRAGMA journal_mode=WAL");
  WriteBytes(dir.file("c.sqlite-wal"), std::string(32, 'w'));  // a WAL header, no frame
  auto run = Run::Open(dir.path());
  INFO(run.status().message());
  REQUIRE(run.ok());
  REQUIRE(run->processes.size() == 1);
  CHECK(run->processes[0]->op_count() == 10);
  REQUIRE(run->skipped.size() == 2);
  CHECK(run->skipped[0].rfind(dir.file("b.sqlite") + ": left out, nothing was committed", 0) == 0);
  CHECK(run->skipped[1].rfind(dir.file("c.sqlite") + ": left out", 0) == 0);
  // Killed while SQLite switched the new file to WAL: pages without tdbg's tables, and the
  // rollback journal of that switch beside them.
  RunSql(dir.file("e.sqlite"), "CREATE TABLE half(x)");
  WriteBytes(dir.file("e.sqlite-journal"), std::string(512, 'j'));
  run = Run::Open(dir.path());
  INFO(run.status().message());
  REQUIRE(run.ok());
  REQUIRE(run->skipped.size() == 3);
  CHECK(run->skipped[2].rfind(dir.file("e.sqlite") + ": left out, nothing was committed", 0) == 0);
  std::remove(dir.file("e.sqlite").c_str());
  std::remove(dir.file("e.sqlite-journal").c_str());
  // Killed in its first transaction: the -wal holds frames but none that commits (a frame's
  // "size after commit" is 0); with it set, the database is not "nothing committed".
  auto wal = [](uint32_t commit_size) {
    std::string bytes(32 + 24 + 512, '\0');
    auto put = [&](size_t at, uint32_t v) {
      for (int k = 0; k < 4; ++k) bytes[at + k] = static_cast<char>(v >> (24 - 8 * k));
    };
    put(0, 0x377f0682u);
    put(8, 512);           // page size
    put(16, 0x11223344u);  // salts
    put(20, 0x55667788u);
    put(32, 1);            // the frame's page
    put(36, commit_size);
    put(40, 0x11223344u);
    put(44, 0x55667788u);
    return bytes;
  };
  RunSql(dir.file("f.sqlite"), "PRAGMA page_size=512; PRAGMA journal_mode=WAL");
  WriteBytes(dir.file("f.sqlite-wal"), wal(0));
  run = Run::Open(dir.path());
  INFO(run.status().message());
  REQUIRE(run.ok());
  REQUIRE(run->skipped.size() == 3);
  CHECK(run->skipped[2].rfind(dir.file("f.sqlite") + ": left out, nothing was committed", 0) == 0);
  WriteBytes(dir.file("f.sqlite-wal"), wal(1));
  CHECK_FALSE(Run::Open(dir.path()).ok());
  std::remove(dir.file("f.sqlite").c_str());
  std::remove(dir.file("f.sqlite-wal").c_str());
  // Created by the writer, then killed before its first flush: the schema alone.
  {
    auto w = Writer::Create(dir.file("d.sqlite"), WriterOptions{});
    REQUIRE(w.ok());
    REQUIRE((*w)->close().ok());
  }
  // Ops committed but no start metadata (not written by tdbg, or lost): kept, ordered last.
  testing::SyntheticRun bare;
  bare.ops = 5;
  REQUIRE(testing::WriteSyntheticRun(dir.file("0.sqlite"), bare).ok());
  auto more = Run::Open(dir.path());
  INFO(more.status().message());
  REQUIRE(more.ok());
  REQUIRE(more->processes.size() == 2);
  CHECK(more->processes[0]->op_count() == 10);
  CHECK(more->processes[1]->op_count() == 5);
  REQUIRE(more->skipped.size() == 3);
  CHECK(more->skipped[2].rfind(dir.file("d.sqlite") + ": left out, it holds no op", 0) == 0);
  // Named alone, such a file is still an error; so is a directory of nothing else.
  CHECK_FALSE(Run::Open(dir.file("b.sqlite")).ok());
  TempDir only;
  WriteBytes(only.file("x.sqlite"), "");
  WriteBytes(only.file("y.sqlite"), "");
  auto none = Run::Open(only.path());
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("no database in this directory holds anything") !=
        std::string::npos);
}

TEST_CASE("a finished database opens from a read-only copy without side files") {
  TempDir dir;
  MakeRun(dir.file("run.sqlite"), 100);
  struct stat st;
  CHECK(::stat(dir.file("run.sqlite-wal").c_str(), &st) != 0);  // closed: no WAL left
  REQUIRE(::chmod(dir.file("run.sqlite").c_str(), 0444) == 0);
  auto r = Reader::Open(dir.file("run.sqlite"));
  INFO(r.status().message());
  REQUIRE(r.ok());
  CHECK((*r)->op_count() == 100);
  CHECK(::stat(dir.file("run.sqlite-shm").c_str(), &st) != 0);  // nothing created beside it
  CHECK(::stat(dir.file("run.sqlite-wal").c_str(), &st) != 0);
}

TEST_CASE("runs: processes in a canonical order, by distributed rank before start time") {
  // Two ranks that started in the opposite order of their ranks, the launcher, and a
  // DataLoader worker of rank 0 (no rank of its own): each database's op count names it.
  TempDir dir;
  MakeRun(dir.file("w.sqlite"), 5, 400, {{"pid", "40"}, {"ppid", "20"}});
  MakeRun(dir.file("r1.sqlite"), 4, 200, {{"pid", "30"}, {"ppid", "10"}, {"rank", "1/2"}});
  MakeRun(dir.file("r0.sqlite"), 3, 300, {{"pid", "20"}, {"ppid", "10"}, {"rank", "0/2"}});
  MakeRun(dir.file("l.sqlite"), 2, 100, {{"pid", "10"}, {"ppid", "1"}});
  auto run = Run::Open(dir.path());
  INFO(run.status().message());
  REQUIRE(run.ok());
  std::vector<int64_t> order;
  for (auto& p : run->processes) order.push_back(p->op_count());
  CHECK(order == std::vector<int64_t>{2, 3, 5, 4});  // launcher, rank 0, its worker, rank 1
}

TEST_CASE("runs: DataLoader workers in order of worker id, whatever order they started in") {
  TempDir dir;
  MakeRun(dir.file("m.sqlite"), 2, 100, {{"pid", "10"}, {"ppid", "1"}});
  MakeRun(dir.file("w1.sqlite"), 4, 200, {{"pid", "11"}, {"ppid", "10"}, {"worker", "1/2"}});
  MakeRun(dir.file("w0.sqlite"), 3, 300, {{"pid", "12"}, {"ppid", "10"}, {"worker", "0/2"}});
  auto run = Run::Open(dir.path());
  REQUIRE(run.ok());
  std::vector<int64_t> order;
  for (auto& p : run->processes) order.push_back(p->op_count());
  CHECK(order == std::vector<int64_t>{2, 3, 4});  // the main process, worker 0, worker 1
}

}  // namespace
}  // namespace tdbg::tracer
