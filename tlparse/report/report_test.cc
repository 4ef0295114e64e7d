// Tests of the report model, the HTML page, the Chrome trace export and redaction, on
// synthetic run pairs written with tracer::Writer (tlparse/report/fixture.h).
#include <catch2/catch.hpp>

#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "tlparse/report/chrome_trace.h"
#include "tlparse/report/fixture.h"
#include "tlparse/report/redact.h"
#include "tlparse/report/report.h"
#include "tlparse/report/test_util.h"

namespace tdbg::report {
namespace {

using nlohmann::json;
using testing::TempDir;

struct Pair {
  TempDir dir;
  tracer::Run a, b;
};

std::unique_ptr<Pair> make_pair(const fixture::FixtureOptions& o) {
  auto p = std::make_unique<Pair>();
  REQUIRE(fixture::make_runs(p->dir.path(), o).ok());
  auto a = tracer::Run::Open(p->dir.file("a"));
  REQUIRE(a.ok());
  p->a = std::move(a.value());
  if (o.with_b) {
    auto b = tracer::Run::Open(p->dir.file("b"));
    REQUIRE(b.ok());
    p->b = std::move(b.value());
  }
  return p;
}

TEST_CASE("the report model centres on the first divergence and measures its growth") {
  fixture::FixtureOptions o;
  o.ops = 2000;
  o.diverge_at = 1102;  // an aten::addmm of layer 2 (template index 2)
  auto p = make_pair(o);
  ReportOptions ro;
  ro.window_ops = 200;
  auto data_or = build_report_data(p->a, &p->b, ro);
  REQUIRE(data_or.ok());
  const json& d = data_or.value();

  REQUIRE(d["diff"]["status"] == "diverged");
  const json& fd = d["diff"]["first_divergence"];
  CHECK(fd["a"]["seq"] == 1102);
  CHECK(fd["a"]["op"] == "aten::addmm");
  CHECK(fd["a"]["source"]["line"] == fixture::fixture_line_of("", 1102));

  // The window is bounded and holds the divergent op on both sides.
  for (int side = 0; side < 2; ++side) {
    const json& run = d["runs"][side];
    CHECK(run["op_count"] == 2000);
    CHECK(run["ops"].size() <= 200);
    CHECK(run["window"]["from_seq"].get<int64_t>() <= 1102);
    CHECK(run["window"]["to_seq"].get<int64_t>() >= 1102);
    bool found = false;
    for (const auto& op : run["ops"]) {
      if (op["seq"] == 1102) {
        found = true;
        CHECK(op["name"] == "aten::addmm");
        CHECK(op["kernels"].size() == 1);
        CHECK(run["stacks"].contains(op["stack"].get<std::string>()));
      }
    }
    CHECK(found);
  }
  // Steps: 2000 ops of a 22-op template.
  CHECK(d["runs"][0]["steps"].size() == (2000 + 21) / 22);
  CHECK(d["runs"][0]["steps"][0]["ops"] == 22);

  // The curve starts agreeing, splits at 1102, and the difference grows after it.
  const json& c = d["curve"];
  CHECK(c["first_differing_seq"] == 1102);
  double before = 0, early = -1, late = 0;
  for (const auto& pt : c["points"]) {
    int64_t s = pt["seq"];
    double rel = pt["rel"];
    if (pt["last_seq"].get<int64_t>() < 1102) before = std::max(before, rel);
    if (s > 1102 && early < 0) early = rel;
    late = rel;
  }
  CHECK(before == 0);
  CHECK(early > 0);
  CHECK(late > early * 10);
}

TEST_CASE("without the diff engine, the curve pairs ops by seq and measures them the same") {
  // --no-diff: every pair by seq, the same ops in both runs; a pair whose outputs differ a
  // little is a little apart, not as far as another op (relative 1).
  fixture::FixtureOptions o;
  o.ops = 2000;
  o.diverge_at = 1102;
  auto p = make_pair(o);
  ReportOptions with, without;
  without.with_diff = false;
  auto d_with = build_report_data(p->a, &p->b, with);
  auto d_without = build_report_data(p->a, &p->b, without);
  REQUIRE(d_with.ok());
  REQUIRE(d_without.ok());
  auto first_after = [](const json& d) {
    for (const auto& pt : d["curve"]["points"])
      if (pt["last_seq"].get<int64_t>() >= 1102) return pt["rel"].get<double>();
    return -1.0;
  };
  const double by_seq = first_after(d_without.value());
  CHECK(by_seq > 0);
  CHECK(by_seq < 1);
  CHECK(by_seq == Approx(first_after(d_with.value())));
}

// Whether `run`'s window in the report holds op `seq`, and its name when it does ("" if not).
std::string window_op(const json& run, int64_t seq) {
  for (const auto& op : run["ops"]) {
    if (op["seq"] == seq) return op["name"].get<std::string>();
  }
  return "";
}

TEST_CASE("a side with no op at a structural divergence is centred where the change meets it") {
  // B inserts 5 `aten::clone` before A's op 2200 (an `aten::normal_`, the start of step 100):
  // the divergence has no op in A, so A's window must be centred on A's op 2200, not on 0.
  fixture::FixtureOptions o;
  o.ops = 3000;
  o.insert_at = 2200;
  auto p = make_pair(o);
  ReportOptions ro;
  ro.window_ops = 200;
  SECTION("ops inserted in B") {
    auto data_or = build_report_data(p->a, &p->b, ro);
    REQUIRE(data_or.ok());
    const json& d = data_or.value();
    const json& fd = d["diff"]["first_divergence"];
    REQUIRE(fd.is_object());
    CHECK(fd["a"].is_null());
    CHECK(fd["b"]["seq"] == 2200);
    CHECK(d["runs"][0]["window"]["center_seq"] == 2200);
    CHECK(d["runs"][1]["window"]["center_seq"] == 2200);
    CHECK(window_op(d["runs"][0], 2200) == "aten::normal_");
    CHECK(window_op(d["runs"][1], 2200) == "aten::clone");
    CHECK(window_op(d["runs"][1], 2205) == "aten::normal_");
  }
  SECTION("ops removed in B (the same runs swapped)") {
    auto data_or = build_report_data(p->b, &p->a, ro);
    REQUIRE(data_or.ok());
    const json& d = data_or.value();
    const json& fd = d["diff"]["first_divergence"];
    REQUIRE(fd.is_object());
    CHECK(fd["b"].is_null());
    CHECK(d["runs"][0]["window"]["center_seq"] == 2200);
    CHECK(d["runs"][1]["window"]["center_seq"] == 2200);
    CHECK(window_op(d["runs"][0], 2200) == "aten::clone");
    CHECK(window_op(d["runs"][1], 2200) == "aten::normal_");
  }
}

TEST_CASE("after ops inserted in one run, the curve pairs ops as the diff aligns them") {
  // B inserts 5 ops before A's op 2200 and computes the same values otherwise: paired by
  // number every later op would differ; aligned, only the inserted ones do.
  fixture::FixtureOptions o;
  o.ops = 3000;
  o.insert_at = 2200;
  auto p = make_pair(o);
  for (bool swapped : {false, true}) {
    CAPTURE(swapped);
    auto data_or = swapped ? build_report_data(p->b, &p->a, ReportOptions{})
                           : build_report_data(p->a, &p->b, ReportOptions{});
    REQUIRE(data_or.ok());
    const json& c = data_or.value()["curve"];
    REQUIRE(c.is_object());
    CHECK(c["aligned_from_seq"] == 2200);
    CHECK(c["first_differing_seq"] == 2200);
    int64_t differing = 0, ops = 0;
    for (const auto& pt : c["points"]) {
      differing += pt["differing"].get<int64_t>();
      ops += pt["ops"].get<int64_t>();
      // (Swapped, A's ops 2200 to 2204 are the ones B does not hold.)
      if (pt["last_seq"].get<int64_t>() < 2200 || pt["seq"].get<int64_t>() > (swapped ? 2204 : 2200))
        CHECK(pt["rel"] == 0.0);
    }
    CHECK(differing == 5);
    CHECK(c["to_seq"].get<int64_t>() >= (swapped ? 3004 : 2999));
  }
}

TEST_CASE("with aligned steps the curve starts at the aligned step and pairs nothing before it") {
  // B inserts 5 ops at A's op 1000, then runs as A does: paired by number every later op
  // would differ. Aligned at step 80, long after, the runs are the same from there on.
  fixture::FixtureOptions o;
  o.ops = 3000;
  o.insert_at = 1000;
  auto p = make_pair(o);
  ReportOptions ro;
  ro.align_steps = {80, 80};
  auto data_or = build_report_data(p->a, &p->b, ro);
  REQUIRE(data_or.ok());
  const json& d = data_or.value();
  CHECK(d["diff"]["status"] == "identical");
  const json& start = d["diff"]["aligned_start"];
  REQUIRE(start.is_object());
  CHECK(start["a"]["step"] == 80);
  CHECK(start["b"]["seq"].get<int64_t>() == start["a"]["seq"].get<int64_t>() + 5);
  const json& c = d["curve"];
  REQUIRE(c.is_object());
  CHECK(c["from_seq"] == start["a"]["seq"]);
  CHECK(c["first_differing_seq"] == -1);
  CHECK(c["aligned_steps"]["a"] == 80);
  for (const auto& pt : c["points"]) CHECK(pt["differing"] == 0);
}

TEST_CASE("identical runs give an empty curve of differences") {
  fixture::FixtureOptions o;
  o.ops = 300;
  auto p = make_pair(o);
  auto data_or = build_report_data(p->a, &p->b, ReportOptions{});
  REQUIRE(data_or.ok());
  CHECK(data_or.value()["diff"]["status"] == "identical");
  CHECK(data_or.value()["curve"]["first_differing_seq"] == -1);
}

TEST_CASE("the curve of differences of two rings covers the ops they hold") {
  // Rings that dropped the first 1000 ops: seqs run past the op count.
  fixture::FixtureOptions o;
  o.ops = 2000;
  o.ring_from = 1000;
  o.diverge_at = 1500;
  auto p = make_pair(o);
  auto data_or = build_report_data(p->a, &p->b, ReportOptions{});
  REQUIRE(data_or.ok());
  const json& c = data_or.value()["curve"];
  REQUIRE(c.is_object());
  CHECK(c["first_differing_seq"].get<int64_t>() >= 1500);
  CHECK(!c["points"].empty());
}

TEST_CASE("a single run centres on its first non-finite value") {
  fixture::FixtureOptions o;
  o.ops = 3000;
  o.with_b = false;
  o.nonfinite_at = 2500;
  auto p = make_pair(o);
  ReportOptions ro;
  ro.window_ops = 100;
  auto data_or = build_report_data(p->a, nullptr, ro);
  REQUIRE(data_or.ok());
  const json& d = data_or.value();
  CHECK(d["runs"].size() == 1);
  CHECK(d["nonfinite"][0]["status"] == "nonfinite");
  CHECK(d["nonfinite"][0]["first_nonfinite"]["seq"] == 2500);
  CHECK(d["runs"][0]["window"]["center_seq"] == 2500);
  CHECK(d["curve"].is_null());
}

TEST_CASE("a report of a run whose kernels table is damaged is an error, not ops without kernels") {
  fixture::FixtureOptions o;
  o.ops = 300;
  o.with_b = false;
  TempDir dir;
  REQUIRE(fixture::make_runs(dir.path(), o).ok());
  std::string db;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("a")))
    if (e.path().extension() == ".sqlite") db = e.path().string();
  REQUIRE(!db.empty());
  // A CPU run's kernels table (empty, one page), zeroed (a bad sector): a report that looks up
  // no op's kernels would show it as a run without kernels.
  int64_t page = 0, page_size = 0;
  {
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
    REQUIRE(sqlite3_exec(h, "DELETE FROM kernels; VACUUM", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(h, "SELECT max(pageno), (SELECT page_size FROM pragma_page_size) FROM "
                               "dbstat WHERE name = 'kernels'",
                               -1, &st, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    page = sqlite3_column_int64(st, 0);
    page_size = sqlite3_column_int64(st, 1);
    sqlite3_finalize(st);
    sqlite3_close(h);
  }
  REQUIRE(page > 1);
  {
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((page - 1) * page_size);
    const std::string zeros(static_cast<size_t>(page_size), '\0');
    f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  auto run = tracer::Run::Open(dir.file("a"));
  REQUIRE(run.ok());
  ReportOptions ro;
  ro.window_ops = 100;
  auto data = build_report_data(*run, nullptr, ro);
  REQUIRE_FALSE(data.ok());
  CHECK(data.status().message().find("corrupt") != std::string::npos);
}

TEST_CASE("a single run that a ring cut shows its last ops, not the start it does not hold") {
  fixture::FixtureOptions o;
  o.ops = 3000;
  o.with_b = false;
  o.ring_from = 2000;
  auto p = make_pair(o);
  ReportOptions ro;
  ro.window_ops = 100;
  auto data_or = build_report_data(p->a, nullptr, ro);
  REQUIRE(data_or.ok());
  const json& w = data_or.value()["runs"][0]["window"];
  CHECK(w["ops"] == 100);
  CHECK(w["to_seq"] == 2999);
  // A run that holds its start still opens there.
  o.ring_from = -1;
  auto whole = make_pair(o);
  auto whole_or = build_report_data(whole->a, nullptr, ro);
  REQUIRE(whole_or.ok());
  CHECK(whole_or.value()["runs"][0]["window"]["from_seq"] == 0);
}

TEST_CASE("json_for_script leaves no character that could close the script element") {
  json j = {{"name", "</script><script>alert(1)</script><!--"}, {"x", "a&b>c"}};
  std::string s = json_for_script(j);
  CHECK(s.find('<') == std::string::npos);
  CHECK(s.find('>') == std::string::npos);
  CHECK(s.find('&') == std::string::npos);
  CHECK(json::parse(s) == j);
}

TEST_CASE("sha256_base64 matches the FIPS 180-4 test vectors") {
  CHECK(sha256_base64("abc") == "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
  CHECK(sha256_base64("") == "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
  CHECK(sha256_base64(std::string(1000, 'a')) == "Qe3s5C1j6Nm/UVqbppMuHCDLyfWl0TRkWttdsblzfqM=");
}

TEST_CASE("a hostile run cannot add markup to the page") {
  fixture::FixtureOptions o;
  o.ops = 200;
  o.diverge_at = 100;
  o.hostile = true;
  auto p = make_pair(o);
  auto data_or = build_report_data(p->a, &p->b, ReportOptions{});
  REQUIRE(data_or.ok());
  std::string html = render_html(data_or.value());
  // Exactly the viewer's two script elements (the data and the code), no more.
  CHECK(testing::count(html, "<script") == 2);
  CHECK(testing::count(html, "</script") == 2);
  CHECK(testing::count(html, "<img") == 0);
  CHECK(testing::count(html, "<svg onload") == 0);
  CHECK(html.find("script-src 'sha256-") != std::string::npos);
  // The payload is still there, as data.
  CHECK(html.find("\\u003cscript\\u003ewindow.__pwned=1") != std::string::npos);
}

TEST_CASE("the Chrome trace has one track per thread and marks divergent ops") {
  fixture::FixtureOptions o;
  o.ops = 440;
  o.diverge_at = 300;
  auto p = make_pair(o);
  std::string path = p->dir.file("trace.json");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  REQUIRE(write_chrome_trace(p->a, &p->b, ChromeTraceOptions{}, f).ok());
  std::fclose(f);
  json trace = json::parse(testing::read_file(path));
  int ops_a = 0, ops_b = 0, kernels = 0, steps = 0, divergent = 0;
  int64_t first_marked = -1;
  std::set<std::pair<int, int>> tracks;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && (e["cat"] == "op" || e["cat"] == "backward")) {
      (e["pid"] == 1 ? ops_a : ops_b)++;
      tracks.insert({e["pid"].get<int>(), e["tid"].get<int>()});
      CHECK(e["dur"].get<double>() >= 0);
      if (e["args"].contains("divergent")) {
        ++divergent;
        CHECK(e["args"]["seq"].get<int64_t>() >= 300);
        if (e["cname"] == "terrible") first_marked = e["args"]["seq"];
      }
    }
    if (e["ph"] == "X" && e["cat"] == "kernel") ++kernels;
    if (e["ph"] == "X" && e["cat"] == "step") ++steps;
  }
  CHECK(ops_a == 440);
  CHECK(ops_b == 440);
  CHECK(tracks.size() == 4);  // (A, B) x (main thread, autograd thread)
  CHECK(kernels == 2 * 3 * 20);
  CHECK(steps == 2 * 20);
  CHECK(first_marked == 300);
  CHECK(divergent == 2 * (440 - 300));
}

TEST_CASE("credential-like names are recognized") {
  for (const char* n : {"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "HF_TOKEN", "WANDB_API_KEY",
                        "GOOGLE_APPLICATION_CREDENTIALS", "DB_PASSWORD", "MYSQL_PASSWD",
                        "GITHUB_TOKEN", "AZURE_CLIENT_SECRET", "--hub-token", "api_key"}) {
    CHECK(looks_like_secret_name(n));
  }
  for (const char* n : {"OMP_NUM_THREADS", "PATH", "CUDA_VISIBLE_DEVICES", "PYTHONHASHSEED", "seed",
                        "torch_version", "cwd", "cmdline"}) {
    CHECK_FALSE(looks_like_secret_name(n));
  }
  // Whole words: a credential's name, not a hyperparameter that shares a word's letters.
  for (const char* n :
       {"--token", "ACCESS_TOKEN", "apiKey", "accessToken", "--key", "PRIVATE_KEY", "SESSION_TOKEN",
        "DATABASE_URL", "--auth", "Authorization", "Proxy-Authorization", "BEARER_TOKEN"}) {
    CHECK(looks_like_secret_name(n));
  }
  for (const char* n : {"--max-tokens", "--max-token", "--key-dim", "--tokenizer", "--tokenizer-dir",
                        "--private-eval", "pad_token", "key_padding_mask", "--session-name",
                        "num_keys", "author", "WANDB_PROJECT", "WANDB_NAME", "HF_HOME", "AWS_REGION"}) {
    CHECK_FALSE(looks_like_secret_name(n));
  }
}

TEST_CASE("the redactor scrubs environment, command line and every later string") {
  Redactor r(true, "/home/alice", "alice");
  std::string env = r.meta("env", R"({"AWS_SECRET_ACCESS_KEY": "s3cr3tVALUE", "OMP_NUM_THREADS": "4"})");
  CHECK(env.find("s3cr3tVALUE") == std::string::npos);
  CHECK(env.find("OMP_NUM_THREADS") != std::string::npos);
  std::string cmd = r.meta("cmdline", R"(["python3", "/home/alice/t.py", "--token", "tok12345", "--api-key=k9876"])");
  CHECK(cmd.find("tok12345") == std::string::npos);
  CHECK(cmd.find("k9876") == std::string::npos);
  CHECK(cmd.find("~/t.py") != std::string::npos);
  CHECK(r.meta("HF_TOKEN", "hf_abc") == Redactor::kMark);
  // Learned values are scrubbed anywhere, as are NAME=value pairs never seen in meta.
  CHECK(r.apply("print('s3cr3tVALUE')") == "print('[REDACTED]')");
  CHECK(r.apply("GITHUB_TOKEN=ghp_zzz python x.py") == "GITHUB_TOKEN=[REDACTED] python x.py");
  CHECK(r.apply("/home/alice/x and alicea and alice") == "~/x and alicea and USER");
  CHECK(r.redacted_names().count("AWS_SECRET_ACCESS_KEY") == 1);
  CHECK(r.redacted_names().count("--token") == 1);
  // A session's id, by option or NAME=value, and a JSON object passed as an argument.
  Redactor q(false, "", "");
  cmd =
      q.meta("cmdline", R"(["python3", "t.py", "--session", "sAAAA1111", "session_id=s4AAAA1111", )"
                        R"("--cfg", "{\"api_key\": \"jsonKEYaaaa1111\", \"lr\": 1}"])");
  for (const char* secret : {"sAAAA1111", "s4AAAA1111", "jsonKEYaaaa1111"})
    CHECK(cmd.find(secret) == std::string::npos);
  CHECK(cmd.find("lr") != std::string::npos);
  CHECK(q.apply("ran with jsonKEYaaaa1111") == "ran with [REDACTED]");
  CHECK(q.redacted_names().count("api_key") == 1);
  // A settings list in one argument: the secret only, up to the next setting; a comma inside a
  // password with no setting after it stays in the secret.
  Redactor s(false, "", "");
  cmd = s.meta("cmdline", R"(["t.py", "--opts", "token=tokAAAA1111,lr=1;password=pw2222,x,y", )"
                          R"("password=p,w3333"])");
  INFO(cmd);
  CHECK(cmd.find("token=[REDACTED],lr=1;password=[REDACTED]") != std::string::npos);
  for (const char* secret : {"tokAAAA1111", "pw2222", "p,w3333", "w3333"})
    CHECK(cmd.find(secret) == std::string::npos);
}

TEST_CASE("the redactor scrubs quoted values in source text, and the shell's credential variables") {
  Redactor r(false, "", "");
  // A config file: spaces around =, single or double quotes; the names found are listed.
  CHECK(r.apply("API_KEY = \"v1-spaces-quoted\"\n") == "API_KEY = \"[REDACTED]\"\n");
  CHECK(r.apply("API_KEY=\"v2-quoted\"") == "API_KEY=\"[REDACTED]\"");
  CHECK(r.apply("    api_key: str = \"sk-field\"") == "    api_key: str = \"[REDACTED]\"");
  CHECK(r.apply("    batch: int = 32") == "    batch: int = 32");
  CHECK(r.apply("connect(password='v5lower', user='bob')") == "connect(password='[REDACTED]', user='bob')");
  // An HTTP header written in code: the commonest place for a token in a script.
  CHECK(r.apply("headers = {\"Authorization\": \"Bearer tok-77\"}") ==
        "headers = {\"Authorization\": \"[REDACTED]\"}");
  CHECK(r.redacted_names().count("API_KEY") == 1);
  CHECK(r.redacted_names().count("password") == 1);
  // Code, not a secret: comparisons, and an unquoted expression after a spaced =.
  CHECK(r.apply("if token == \"abc\": pass") == "if token == \"abc\": pass");
  CHECK(r.apply("token = make_token()") == "token = make_token()");
  CHECK(r.apply("key != 'x'") == "key != 'x'");
  // A key the program puts in its own environment, by a quoted name.
  Redactor q(false, "", "");
  CHECK(q.apply("os.environ[\"HF_TOKEN\"] = \"hf_abc123\"") == "os.environ[\"HF_TOKEN\"] = \"[REDACTED]\"");
  CHECK(q.apply("os.environ['WANDB_API_KEY']='w123'") == "os.environ['WANDB_API_KEY']='[REDACTED]'");
  CHECK(q.apply("os.environ.setdefault(\"OPENAI_API_KEY\", \"sk-1\")") ==
        "os.environ.setdefault(\"OPENAI_API_KEY\", \"[REDACTED]\")");
  CHECK(q.apply("os.environ[\"HF_TOKEN\"] = read_token()") == "os.environ[\"HF_TOKEN\"] = read_token()");
  CHECK(q.apply("f(\"mode\", \"train\")") == "f(\"mode\", \"train\")");
  // A keyword argument's default is no secret, and the source stays readable.
  CHECK(q.apply("def login(token=None):") == "def login(token=None):");
  CHECK(q.apply("--hub-token=abc123 --x") == "--hub-token=[REDACTED] --x");
  // A call's keyword argument whose value is a name is code (torch's `key_padding_mask=`), a
  // literal or an unspaced list's entry is not.
  CHECK(q.apply("h = s.enc(h, src_key_padding_mask=pad)") == "h = s.enc(h, src_key_padding_mask=pad)");
  CHECK(q.apply("attn(q, key=self.k, value=v)") == "attn(q, key=self.k, value=v)");
  CHECK(q.apply("mha(key_padding_mask=mask.bool())") == "mha(key_padding_mask=mask.bool())");
  CHECK(q.apply("login(x, token=tok-123)") == "login(x, token=[REDACTED])");
  CHECK(q.apply("user=bob,password=hunter2") == "user=bob,password=[REDACTED]");
  // A value redacted already is left as it is (a command line redacted word by word).
  CHECK(q.apply(R"(["x.py", "--api-key=[REDACTED]"])") == R"(["x.py", "--api-key=[REDACTED]"])");
  Redactor c(false, "", "");
  const std::string line = c.meta("cmdline", R"(["x.py", "--api-key=shortk", "--key-file", "/keys/a.pem"])");
  CHECK(line == R"(["x.py","--api-key=[REDACTED]","--key-file","/keys/a.pem"])");
  // A URL's password, whatever the option is called; and a long secret's start is scrubbed
  // where a string was cut short there, not inside another value that begins alike.
  Redactor u(false, "", "");
  CHECK(u.apply("--db-url postgresql://bob:ConnStrPw9!@pg.example.com/ml") ==
        "--db-url postgresql://bob:[REDACTED]@pg.example.com/ml");
  CHECK(u.apply("see https://example.com/a@b") == "see https://example.com/a@b");
  const char* url_env[] = {"DATABASE_URL=postgresql://mluser:DbS3cretPw77@db.internal/x", nullptr};
  u.remember_environment(url_env);
  CHECK(u.apply("url postgresql://bob@other/y") == "url postgresql://bob@other/y");
  CHECK(u.apply("\"postgresql://mluser:Db\"") == "\"[REDACTED]\"");
  // A path given to a credential-like option is not scrubbed from every other string.
  Redactor d(false, "", "");
  CHECK(d.meta("cmdline", R"(["x.py", "--secret-dir", "/work/run"])").find("[REDACTED]") != std::string::npos);
  CHECK(d.apply("/work/run/train.py:3") == "/work/run/train.py:3");
  // A file name is no credential's name: neither a source's meta key nor a command line's
  // word before an option.
  CHECK_FALSE(looks_like_secret_name("source:/work/secret.py"));
  CHECK(q.apply(R"(["python3", "secret.py", "--lr", "0.1"])") == R"(["python3", "secret.py", "--lr", "0.1"])");
  // A key the program put in a recorded string, from a variable the recording does not keep:
  // the bundling shell's value is scrubbed, and named only once found.
  const char* env[] = {"WANDB_API_KEY=wandbsecret999", "HF_TOKEN=short", "PATH=/usr/bin", nullptr};
  r.remember_environment(env);
  CHECK(r.redacted_names().count("WANDB_API_KEY") == 0);
  CHECK(r.apply("run wandb wandbsecret999 and more") == "run wandb [REDACTED] and more");
  CHECK(r.redacted_names().count("WANDB_API_KEY") == 1);
  CHECK(r.apply("short and /usr/bin") == "short and /usr/bin");  // short values, other names: kept
  // A long key cut short where it was recorded: its start is scrubbed all the same.
  const char* long_key[] = {"OPENAI_API_KEY=sk-proj-0123456789abcdefghij", nullptr};
  r.remember_environment(long_key);
  CHECK(r.apply("run sk-proj-0123456789ab") == "run [REDACTED]");
  CHECK(r.apply("sk-proj-01 is too short to say") == "sk-proj-01 is too short to say");
  const char* home[] = {"HF_HOME=/root/.cache/huggingface", nullptr};
  r.remember_environment(home);
  CHECK(r.apply("/root/.cache/torch/hub/x.py") == "/root/.cache/torch/hub/x.py");
}

}  // namespace
}  // namespace tdbg::report
