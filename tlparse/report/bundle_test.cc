// Tests of bug-report bundles: round trip, trimming, redaction down to the archive's bytes, and
// hostile archives that must be rejected without writing anything.
#include <catch2/catch.hpp>

#include <archive.h>
#include <archive_entry.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <set>

#include "tlparse/diff/diff.h"
#include "tlparse/report/bundle.h"
#include "tlparse/report/chrome_trace.h"
#include "tlparse/report/fixture.h"
#include "tlparse/report/report.h"
#include "tlparse/report/test_util.h"
#include "tracer/reader.h"

namespace tdbg::report {
namespace {

using testing::TempDir;

// The whole uncompressed tar stream of a .tar.gz: what a secret must not appear in.
std::string tar_bytes(const std::string& path) {
  struct archive* a = archive_read_new();
  archive_read_support_filter_gzip(a);
  archive_read_support_format_raw(a);
  std::string out;
  archive_entry* e;
  if (archive_read_open_filename(a, path.c_str(), 1 << 16) == ARCHIVE_OK &&
      archive_read_next_header(a, &e) == ARCHIVE_OK) {
    char buf[1 << 16];
    la_ssize_t n;
    while ((n = archive_read_data(a, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  archive_read_free(a);
  return out;
}

bool exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

TEST_CASE("a one-run bundle's README names its first non-finite value and only its files") {
  TempDir dir;
  fixture::FixtureOptions o;
  o.ops = 500;
  o.nonfinite_at = 200;
  REQUIRE(fixture::make_runs(dir.path(), o).ok());
  std::string out = dir.file("nan.tar.gz");
  REQUIRE(write_bundle(dir.file("a"), "", out, BundleOptions{}).ok());
  std::string readme;
  auto entries = inspect_bundle(out, &readme);
  REQUIRE(entries.ok());
  INFO(readme);
  CHECK(readme.find("**First non-finite value in run A**: op #200 ") != std::string::npos);
  // With tdbg nan's whole answer: its cause, not only the op.
  const size_t block =
      readme.find("What `tdbg nan` prints for run A:\n\n```\nnon-finite at aten::addmm");
  CHECK(block != std::string::npos);
  CHECK(readme.find("  cause:    ", block) != std::string::npos);
  CHECK(readme.find("diff.json") == std::string::npos);  // not in a one-run bundle
  CHECK(readme.find("runs/b") == std::string::npos);
  CHECK(readme.find("`tdbg nan runs/a`") != std::string::npos);
}

TEST_CASE("a bundle that cannot be written names the file asked for") {
  TempDir dir;
  fixture::FixtureOptions o;
  o.ops = 100;
  REQUIRE(fixture::make_runs(dir.path(), o).ok());
  const std::string out = dir.file("no_such_dir/bug.tar.gz");
  auto r = write_bundle(dir.file("a"), dir.file("b"), out, BundleOptions{});
  REQUIRE_FALSE(r.ok());
  INFO(r.status().message());
  CHECK(r.status().message().rfind(out + ":", 0) == 0);
  CHECK(r.status().message().find(".partial") == std::string::npos);
}

TEST_CASE("a bundle round-trips: inspect, extract, open the databases") {
  TempDir dir;
  fixture::FixtureOptions o;
  o.ops = 500;
  o.diverge_at = 300;
  REQUIRE(fixture::make_runs(dir.path(), o).ok());
  BundleOptions bo;
  std::string out = dir.file("bug.tar.gz");
  auto r = write_bundle(dir.file("a"), dir.file("b"), out, bo);
  REQUIRE(r.ok());
  CHECK(r.value().ops_kept == 1000);

  std::string readme;
  auto entries = inspect_bundle(out, &readme);
  REQUIRE(entries.ok());
  std::set<std::string> names;
  for (const auto& e : entries.value()) names.insert(e.path);
  for (const char* want : {"bug/README.md", "bug/report/index.html", "bug/runs/a/rank0.sqlite",
                           "bug/runs/b/rank0.sqlite", "bug/facts.json", "bug/commands.txt",
                           "bug/diff.json", "bug/nonfinite.json"}) {
    CHECK(names.count(want) == 1);
  }
  CHECK(names.count("bug/sources" + dir.path() + "/train.py") == 1);
  CHECK(readme.find("First divergence") != std::string::npos);
  // The whole answer as the CLI prints it (arguments, values, growth), in a block.
  CHECK(readme.find("What `tdbg diff` prints for these runs:\n\n```\n") != std::string::npos);
  CHECK(readme.find("\n  growth:   ") != std::string::npos);
  CHECK(readme.find("AWS_SECRET_ACCESS_KEY") != std::string::npos);
  CHECK(readme.find("HF_TOKEN") != std::string::npos);

  std::string x = dir.file("x");
  REQUIRE(extract_bundle(out, x).ok());
  auto a = tracer::Run::Open(x + "/bug/runs/a");
  REQUIRE(a.ok());
  CHECK(a.value().processes[0]->op_count() == 500);
  auto op = a.value().processes[0]->op(300);
  REQUIRE(op);
  CHECK(a.value().processes[0]->string(op->name) ==
        "autograd::engine::evaluate_function: ReluBackward0");  // template index 300 % 22 = 14
  CHECK(a.value().processes[0]->meta("env").find("[REDACTED]") != std::string::npos);
  CHECK(a.value().processes[0]->meta("torch_version") == "1.13.1");
  CHECK(testing::read_file(x + "/bug/sources" + dir.path() + "/train.py") ==
        testing::read_file(dir.file("train.py")));
  // Extracting again into the same folder refuses to overwrite.
  CHECK_FALSE(extract_bundle(out, x).ok());
  // A folder with one file of the bundle in it already: refused before anything is written.
  const std::string y = dir.file("y");
  std::filesystem::create_directories(y + "/bug");
  std::ofstream(y + "/bug/README.md") << "mine\n";
  Status conflict = extract_bundle(out, y);
  CHECK_FALSE(conflict.ok());
  CHECK(conflict.message().find("exists already") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(y + "/bug/runs"));
  CHECK_FALSE(std::filesystem::exists(y + "/bug/report"));
  CHECK(testing::read_file(y + "/bug/README.md") == "mine\n");
}

TEST_CASE("a run whose strings or frames do not resolve gives no report, trace or bundle") {
  for (const char* table : {"frames", "strings"}) {
    TempDir dir;
    fixture::FixtureOptions o;
    o.ops = 500;
    o.diverge_at = 300;
    REQUIRE(fixture::make_runs(dir.path(), o).ok());
    // What a zeroed page of the table leaves: ids the op records hold resolve to nothing.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(dir.file("b/rank0.sqlite").c_str(), &db) == SQLITE_OK);
    const std::string sql = std::string("DELETE FROM ") + table +
                            (std::string(table) == "strings" ? " WHERE text LIKE 'aten::%'" : "");
    REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    INFO(table);
    // Opening checks the names against the check written with them.
    {
      auto damaged = tracer::Run::Open(dir.file("b"));
      REQUIRE_FALSE(damaged.ok());
      CHECK(damaged.status().message().find("corrupt database") != std::string::npos);
    }
    // Without that check (a database written before it), each tool's lookups say so.
    REQUIRE(sqlite3_exec(db, "DELETE FROM meta WHERE key = 'names_check'", nullptr, nullptr, nullptr) ==
            SQLITE_OK);
    sqlite3_close(db);
    const std::string out = dir.file("bug.tar.gz");
    // The damaged run alone (the pair's diff already checks its lookups).
    auto r = write_bundle(dir.file("b"), "", out, BundleOptions{});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("corrupt database") != std::string::npos);
    CHECK_FALSE(std::ifstream(out).good());
    auto b = tracer::Run::Open(dir.file("b"));
    REQUIRE(b.ok());
    ReportOptions no_diff;
    no_diff.with_diff = false;
    for (const ReportOptions& options : {ReportOptions{}, no_diff})
      CHECK_FALSE(build_report_data(*b, nullptr, options).ok());
    // The trace names every op (it shows no source lines).
    if (std::string(table) == "strings") {
      std::FILE* f = std::fopen(dir.file("trace.json").c_str(), "wb");
      REQUIRE(f);
      CHECK_FALSE(write_chrome_trace(*b, nullptr, ChromeTraceOptions{}, f).ok());
      std::fclose(f);
    }
  }
}

TEST_CASE("names outside ASCII bundle, inspect and extract in the C locale") {
  TempDir dir;
  const std::string runs = dir.file("da\xc3\xb1o");  // "daño": the sources' path holds it
  REQUIRE(mkdir(runs.c_str(), 0755) == 0);
  fixture::FixtureOptions o;
  o.ops = 50;
  o.diverge_at = 30;
  REQUIRE(fixture::make_runs(runs, o).ok());
  const std::string out = dir.file("b\xc3\xbcg.tar.gz");  // "büg.tar.gz"
  REQUIRE(write_bundle(runs + "/a", runs + "/b", out, BundleOptions{}).ok());
  CHECK_FALSE(exists(out + ".partial"));
  auto entries = inspect_bundle(out, nullptr);
  REQUIRE(entries.ok());
  std::set<std::string> names;
  for (const auto& e : entries.value()) names.insert(e.path);
  CHECK(names.count("b\xc3\xbcg/sources" + runs + "/train.py") == 1);
  REQUIRE(extract_bundle(out, dir.file("x")).ok());
  CHECK(testing::read_file(dir.file("x") + "/b\xc3\xbcg/sources" + runs + "/train.py") ==
        testing::read_file(runs + "/train.py"));
}

TEST_CASE("no secret reaches any byte of the bundle, the databases included") {
  TempDir dir;
  fixture::FixtureOptions o;
  o.ops = 300;
  o.diverge_at = 100;
  REQUIRE(fixture::make_runs(dir.path(), o).ok());
  // The secret is also in a source file the stacks point into.
  {
    std::ofstream py(dir.file("train.py"), std::ios::app);
    py << "# key = '" << fixture::kFakeAwsSecret << "'\n";
  }
  BundleOptions bo;
  bo.redact_paths = true;
  bo.home = dir.path();
  bo.user = "fixtureuser";
  std::string out = dir.file("bug.tar.gz");
  REQUIRE(write_bundle(dir.file("a"), dir.file("b"), out, bo).ok());
  std::string bytes = tar_bytes(out);
  REQUIRE(bytes.size() > 10000);
  CHECK(bytes.find("rank0.sqlite") != std::string::npos);  // the stream really is the tar
  CHECK(bytes.find(fixture::kFakeAwsSecret) == std::string::npos);
  CHECK(bytes.find(fixture::kFakeHfToken) == std::string::npos);
  CHECK(bytes.find(fixture::kFakeCliToken) == std::string::npos);
  // --redact-paths: the home directory is gone everywhere, including the sqlite strings.
  CHECK(bytes.find(dir.path()) == std::string::npos);
  CHECK(bytes.find("~/train.py") != std::string::npos);
}

// The first divergence `tdbg diff` reports between runs `a` and `b` (directories).
nlohmann::json first_divergence(const std::string& a, const std::string& b) {
  auto ra = tracer::Run::Open(a);
  auto rb = tracer::Run::Open(b);
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  auto d = diff::compare_runs(ra.value(), rb.value());
  REQUIRE(d.ok());
  REQUIRE(d.value()["status"] == "diverged");
  return d.value()["first_divergence"];
}

TEST_CASE("large databases are trimmed to a window around the divergence unless --keep-all") {
  TempDir dir;
  fixture::FixtureOptions o;
  o.ops = 3000;
  o.diverge_at = 2000;
  o.secrets = false;
  REQUIRE(fixture::make_runs(dir.path(), o).ok());
  BundleOptions bo;
  bo.window_ops = 400;
  bo.sources = false;
  REQUIRE(write_bundle(dir.file("a"), dir.file("b"), dir.file("t.tar.gz"), bo).ok());
  REQUIRE(extract_bundle(dir.file("t.tar.gz"), dir.file("t")).ok());
  auto b = tracer::Run::Open(dir.file("t/t/runs/b"));
  REQUIRE(b.ok());
  const auto& reader = *b.value().processes[0];
  CHECK(reader.op_count() == 400);
  CHECK(reader.op(2000));
  CHECK_FALSE(reader.op(1000));
  CHECK_FALSE(exists(dir.file("t/t/sources")));
  // tdbg diff on the trimmed databases (ops 1800..2200) finds the same divergence: it starts
  // where the databases start, not at tidx 0.
  nlohmann::json full = first_divergence(dir.file("a"), dir.file("b"));
  nlohmann::json bundled = first_divergence(dir.file("t/t/runs/a"), dir.file("t/t/runs/b"));
  CHECK(bundled["cause"] == full["cause"]);
  CHECK(bundled["a"]["seq"] == full["a"]["seq"]);
  CHECK(bundled["a"]["op"] == full["a"]["op"]);
  // A trimmed run against itself: identical, with a note that the start was not compared.
  {
    auto ta = tracer::Run::Open(dir.file("t/t/runs/a"));
    REQUIRE(ta.ok());
    auto same = diff::compare_runs(ta.value(), ta.value());
    REQUIRE(same.ok());
    CHECK(same.value()["status"] == "identical");
    INFO(same.value()["notes"].dump());
    CHECK(same.value()["notes"].dump().find("both runs hold ops from ") != std::string::npos);
  }

  bo.keep_all = true;
  REQUIRE(write_bundle(dir.file("a"), dir.file("b"), dir.file("k.tar.gz"), bo).ok());
  REQUIRE(extract_bundle(dir.file("k.tar.gz"), dir.file("k")).ok());
  auto k = tracer::Run::Open(dir.file("k/k/runs/b"));
  REQUIRE(k.ok());
  CHECK(k.value().processes[0]->op_count() == 3000);
}

TEST_CASE("a bundle of runs where B inserts or removes ops keeps the change on both sides") {
  // B inserts 5 `aten::clone` before A's op 6600 (`aten::normal_`), late in a long run, as in
  // the recorded runs this was found with. The side without an op at the divergence used to
  // keep the start of its run, so `tdbg diff` on the bundle reported a made-up divergence.
  // The window is small, so the bundled databases start far from tidx 0 (tdbg diff bisected
  // from tidx 0 and failed on such a database: "no op ... in thread 0").
  TempDir dir;
  fixture::FixtureOptions o;
  o.ops = 8000;
  o.insert_at = 6600;
  o.secrets = false;
  REQUIRE(fixture::make_runs(dir.path(), o).ok());
  BundleOptions bo;
  bo.window_ops = 400;
  bo.sources = false;
  struct Case {
    const char* name;
    std::string a, b;
    const char* side_with_op;  // "a" or "b"
    const char* readme;
  };
  for (const Case& c : {Case{"inserted", dir.file("a"), dir.file("b"), "b",
                             "run B's op #6600 `aten::clone` at step 300"},
                        Case{"removed", dir.file("b"), dir.file("a"), "a",
                             "run A's op #6600 `aten::clone` at step 300"}}) {
    SECTION(c.name) {
      nlohmann::json full = first_divergence(c.a, c.b);
      REQUIRE(full[c.side_with_op].is_object());
      CHECK(full[c.side_with_op]["op"] == "aten::clone");

      std::string out = dir.file(std::string(c.name) + ".tar.gz");
      REQUIRE(write_bundle(c.a, c.b, out, bo).ok());
      std::string readme;
      REQUIRE(inspect_bundle(out, &readme).ok());
      CHECK(readme.find(c.readme) != std::string::npos);
      CHECK(readme.find("identical") == std::string::npos);
      // The clones feed nothing: the README says it changes no result, as the diff does.
      CHECK(readme.find("); the values stay the same to the end (work, not results).") != std::string::npos);

      std::string x = dir.file(std::string("x-") + c.name);
      REQUIRE(extract_bundle(out, x).ok());
      std::string root = x + "/" + c.name + "/runs/";
      // Both windows hold op 6600: the inserted op on one side, the op it precedes on the other.
      for (const char* side : {"a", "b"}) {
        auto run = tracer::Run::Open(root + side);
        REQUIRE(run.ok());
        const auto& reader = *run.value().processes[0];
        auto op = reader.op(6600);
        CHECK(op);
        if (op) {
          bool inserted_side = side == std::string(c.side_with_op);
          CHECK(reader.string(op->name) == (inserted_side ? "aten::clone" : "aten::normal_"));
        }
      }
      nlohmann::json bundled = first_divergence(root + "a", root + "b");
      CHECK(bundled["kind"] == full["kind"]);
      CHECK(bundled["cause"] == full["cause"]);
      CHECK(bundled["detail"] == full["detail"]);
      CHECK(bundled["a"].is_null() == full["a"].is_null());
      CHECK(bundled["b"].is_null() == full["b"].is_null());
      CHECK(bundled[c.side_with_op]["op"] == full[c.side_with_op]["op"]);
      CHECK(bundled[c.side_with_op]["seq"] == full[c.side_with_op]["seq"]);
    }
  }
}

// Writes a .tar.gz holding one entry made by `fill`.
void write_archive(const std::string& path, const std::function<void(archive_entry*)>& fill,
                   const std::string& data = "x") {
  struct archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  REQUIRE(archive_write_open_filename(a, path.c_str()) == ARCHIVE_OK);
  archive_entry* ok = archive_entry_new();
  archive_entry_set_pathname(ok, "b/README.md");
  archive_entry_set_filetype(ok, AE_IFREG);
  archive_entry_set_perm(ok, 0644);
  archive_entry_set_size(ok, 5);
  archive_write_header(a, ok);
  archive_write_data(a, "hello", 5);
  archive_entry_free(ok);
  archive_entry* e = archive_entry_new();
  archive_entry_set_perm(e, 0644);
  fill(e);
  archive_write_header(a, e);
  if (archive_entry_filetype(e) == AE_IFREG) archive_write_data(a, data.data(), data.size());
  archive_entry_free(e);
  archive_write_close(a);
  archive_write_free(a);
}

TEST_CASE("hostile archives are rejected and write nothing") {
  TempDir dir;
  struct Case {
    const char* name;
    std::function<void(archive_entry*)> fill;
    const char* why;
  };
  std::vector<Case> cases = {
      {"dotdot", [](archive_entry* e) {
         archive_entry_set_pathname(e, "b/../../evil");
         archive_entry_set_filetype(e, AE_IFREG);
         archive_entry_set_size(e, 1);
       }, "leaves the folder"},
      {"absolute", [](archive_entry* e) {
         archive_entry_set_pathname(e, "/tmp/tdbg-evil-absolute");
         archive_entry_set_filetype(e, AE_IFREG);
         archive_entry_set_size(e, 1);
       }, "absolute path"},
      {"symlink", [](archive_entry* e) {
         archive_entry_set_pathname(e, "b/link");
         archive_entry_set_filetype(e, AE_IFLNK);
         archive_entry_set_symlink(e, "/etc");
       }, "link"},
      {"hardlink", [](archive_entry* e) {
         archive_entry_set_pathname(e, "b/hard");
         archive_entry_set_filetype(e, AE_IFREG);
         archive_entry_set_hardlink(e, "/etc/passwd");
       }, "link"},
      {"device", [](archive_entry* e) {
         archive_entry_set_pathname(e, "b/dev");
         archive_entry_set_filetype(e, AE_IFCHR);
         archive_entry_set_rdev(e, 0x0103);
       }, "not a regular file"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      std::string path = dir.file(std::string(c.name) + ".tar.gz");
      write_archive(path, c.fill);
      auto listed = inspect_bundle(path, nullptr);
      REQUIRE_FALSE(listed.ok());
      CHECK(listed.status().message().find(c.why) != std::string::npos);
      CHECK(listed.status().message().find('\n') == std::string::npos);
      std::string target = dir.file(std::string("x-") + c.name);
      CHECK_FALSE(extract_bundle(path, target).ok());
      CHECK_FALSE(exists(target + "/b/README.md"));  // checked before anything is written
      CHECK_FALSE(exists(dir.file("evil")));
      CHECK_FALSE(exists("/tmp/tdbg-evil-absolute"));
    }
  }
}

TEST_CASE("truncated and non-archive files give a one-line error") {
  TempDir dir;
  fixture::FixtureOptions o;
  o.ops = 300;
  REQUIRE(fixture::make_runs(dir.path(), o).ok());
  std::string good = dir.file("good.tar.gz");
  REQUIRE(write_bundle(dir.file("a"), "", good, BundleOptions{}).ok());
  std::string bytes = testing::read_file(good);
  std::string cut = dir.file("cut.tar.gz");
  {
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  auto r = inspect_bundle(cut, nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("cut.tar.gz") != std::string::npos);
  CHECK(r.status().message().find('\n') == std::string::npos);
  CHECK_FALSE(extract_bundle(cut, dir.file("cx")).ok());

  std::string junk = dir.file("junk.tar.gz");
  {
    std::ofstream(junk) << "this is not an archive\n";
  }
  CHECK_FALSE(inspect_bundle(junk, nullptr).ok());
  CHECK_FALSE(inspect_bundle(dir.file("missing.tar.gz"), nullptr).ok());

  // An archive, but not one tdbg wrote: no facts.json beside its README.md.
  auto with = [](const char* name) {
    return [name](archive_entry* e) {
      archive_entry_set_pathname(e, name);
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_size(e, 1);
    };
  };
  std::string other = dir.file("other.tar.gz");
  write_archive(other, with("b/notes.txt"));
  auto listed = inspect_bundle(other, nullptr);
  REQUIRE_FALSE(listed.ok());
  CHECK(listed.status().message() == other + ": not a tdbg bundle (no README.md and facts.json in it)");
  CHECK_FALSE(extract_bundle(other, dir.file("ox")).ok());
  write_archive(other, with("b/facts.json"));
  CHECK(inspect_bundle(other, nullptr).ok());
}

}  // namespace
}  // namespace tdbg::report
