// Tests of the op-sequence alignment (Myers' shortest edit script) used for structural diffs.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "tlparse/diff/align.h"
#include "tlparse/diff/mlp_step_testdata.h"

using tdbg::diff::Hunk;
using tdbg::diff::shortest_edit_script;

namespace {

std::vector<uint64_t> seq(const std::string& s) { return std::vector<uint64_t>(s.begin(), s.end()); }

std::vector<Hunk> diff(const std::string& a, const std::string& b, int max_edits = 1000) {
  auto va = seq(a), vb = seq(b);
  auto r = shortest_edit_script(va.data(), va.size(), vb.data(), vb.size(), max_edits);
  REQUIRE(r);
  return *r;
}

// Applies the hunks to `a` and returns the result: must equal `b` for a correct script.
std::string apply(const std::string& a, const std::string& b, const std::vector<Hunk>& hunks) {
  std::string out;
  int64_t pos = 0;
  for (const Hunk& h : hunks) {
    REQUIRE(h.a_begin >= pos);
    out += a.substr(pos, h.a_begin - pos);
    out += b.substr(h.b_begin, h.b_end - h.b_begin);
    pos = h.a_end;
  }
  out += a.substr(pos);
  return out;
}

int64_t edits(const std::vector<Hunk>& hunks) {
  int64_t n = 0;
  for (const Hunk& h : hunks) n += (h.a_end - h.a_begin) + (h.b_end - h.b_begin);
  return n;
}

}  // namespace

TEST_CASE("identical sequences need no edits") {
  CHECK(diff("abcdef", "abcdef").empty());
  CHECK(diff("", "").empty());
}

TEST_CASE("one inserted op is one insertion hunk at the right place") {
  auto h = diff("abcdef", "abcXdef");
  REQUIRE(h.size() == 1);
  CHECK(h[0].a_begin == 3);
  CHECK(h[0].a_end == 3);
  CHECK(h[0].b_begin == 3);
  CHECK(h[0].b_end == 4);
}

TEST_CASE("an inserted block stays whole when a look-alike of the op after it is inside") {
  // B recomputes "LtagdLtaA" (a checkpointed forward: linear t addmm gelu ... add) before the
  // backward's "tm": one insertion, and A's t pairs with the t after the block.
  auto h = diff("Xtmtm", "XLtagdLtaAtmtm");
  REQUIRE(h.size() == 1);
  CHECK(h[0].a_begin == 1);
  CHECK(h[0].a_end == 1);
  CHECK(h[0].b_begin == 1);
  CHECK(h[0].b_end == 10);
  CHECK(apply("Xtmtm", "XLtagdLtaAtmtm", h) == "XLtagdLtaAtmtm");
  // The same for removals, and a gap of two ops that slides.
  h = diff("XLtagdLtaAtmtm", "Xtmtm");
  REQUIRE(h.size() == 1);
  CHECK(h[0].a_end - h[0].a_begin == 9);
  CHECK(apply("XLtagdLtaAtmtm", "Xtmtm", h) == "Xtmtm");
  // An op replaced by another, before a look-alike of the replaced one: one replacement, and
  // the look-alikes pair with each other.
  h = diff("XMmab", "XAmab");
  REQUIRE(h.size() == 1);
  CHECK(h[0].a_begin == 1);
  CHECK(h[0].a_end == 2);
  CHECK(h[0].b_begin == 1);
  CHECK(h[0].b_end == 2);
  h = diff("Xmmab", "XAmab");
  REQUIRE(h.size() == 1);
  CHECK(h[0].a_end - h[0].a_begin == 1);
  CHECK(h[0].b_end - h[0].b_begin == 1);
  CHECK(apply("Xmmab", "XAmab", h) == "XAmab");
  h = diff("Xtmab", "XtmQtmab");
  REQUIRE(h.size() == 1);
  CHECK(apply("Xtmab", "XtmQtmab", h) == "XtmQtmab");
}

TEST_CASE("one removed op is one removal hunk") {
  auto h = diff("abcdef", "abdef");
  REQUIRE(h.size() == 1);
  CHECK(h[0].a_begin == 2);
  CHECK(h[0].a_end == 3);
  CHECK(h[0].b_begin == h[0].b_end);
}

TEST_CASE("a replaced op is one hunk with both ranges") {
  auto h = diff("abcdef", "abXdef");
  REQUIRE(h.size() == 1);
  CHECK(h[0].a_end - h[0].a_begin == 1);
  CHECK(h[0].b_end - h[0].b_begin == 1);
  CHECK(h[0].a_begin == 2);
}

TEST_CASE("one side empty") {
  auto h = diff("", "abc");
  REQUIRE(h.size() == 1);
  CHECK(h[0].b_end == 3);
  h = diff("abc", "");
  REQUIRE(h.size() == 1);
  CHECK(h[0].a_end == 3);
}

TEST_CASE("the script is minimal and reproduces the target on random sequences") {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::string a;
    int n = static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) a += static_cast<char>('a' + rng() % 4);
    std::string b = a;
    int changes = static_cast<int>(rng() % 5);
    int expected_max = 0;
    for (int c = 0; c < changes; ++c) {
      size_t pos = b.empty() ? 0 : rng() % (b.size() + 1);
      if (rng() % 2 || b.empty() || pos == b.size()) {
        b.insert(pos, 1, static_cast<char>('e' + rng() % 3));  // letters not in `a`
        expected_max += 1;
      } else {
        b.erase(pos, 1);
        expected_max += 1;
      }
    }
    auto h = diff(a, b);
    CHECK(apply(a, b, h) == b);
    CHECK(edits(h) <= expected_max);
  }
}

TEST_CASE("a script longer than the bound is refused") {
  auto va = seq("aaaaaaaaaa"), vb = seq("bbbbbbbbbb");
  CHECK_FALSE(shortest_edit_script(va.data(), va.size(), vb.data(), vb.size(), 5));
  CHECK(shortest_edit_script(va.data(), va.size(), vb.data(), vb.size(), 20));
}

namespace {

// The least edits to turn a prefix of `a` (all of it unless `a_free`) into a prefix of `b`
// (all of it unless `b_free`), by dynamic programming.
int64_t least_free_tail_edits(const std::string& a, const std::string& b, bool a_free, bool b_free) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int64_t>> d(n + 1, std::vector<int64_t>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int64_t>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j)
      d[i][j] = a[i - 1] == b[j - 1] ? d[i - 1][j - 1] : 1 + std::min(d[i - 1][j], d[i][j - 1]);
  int64_t best = d[n][m];
  if (a_free) for (size_t i = 0; i <= n; ++i) best = std::min(best, d[i][m]);
  if (b_free) for (size_t j = 0; j <= m; ++j) best = std::min(best, d[n][j]);
  return best;
}

}  // namespace

TEST_CASE("a run cut short aligns with a prefix of the other, its extra ops inserted") {
  // B inserted "XY" and then stopped; the rest of A costs nothing. The whole-window script
  // would rather pair B's ops with a later look-alike in A ("XYcd" further on).
  const std::string a = "abcdefghijXYcdZZ", b = "abXYcde";
  auto va = seq(a), vb = seq(b);
  int64_t used = -1;
  auto h = tdbg::diff::edit_script_to_prefix(va.data(), va.size(), vb.data(), vb.size(), 100, &used);
  REQUIRE(h);
  REQUIRE(h->size() == 1);
  CHECK((*h)[0].a_begin == 2);
  CHECK((*h)[0].a_end == 2);
  CHECK((*h)[0].b_begin == 2);
  CHECK((*h)[0].b_end == 4);
  CHECK(used == 5);
  CHECK(apply(a.substr(0, used), b, *h) == b);
  auto whole = diff(a, b);
  CHECK(whole.front().a_end - whole.front().a_begin > 0);  // the whole-window script differs
  // Nothing of B left: no edits, nothing of A used.
  auto empty_b = tdbg::diff::edit_script_to_prefix(va.data(), va.size(), vb.data(), 0, 100, &used);
  REQUIRE(empty_b);
  CHECK(empty_b->empty());
  CHECK(used == 0);
}

TEST_CASE("the prefix script is minimal and reproduces the target on random sequences") {
  std::mt19937 rng(11);
  for (int round = 0; round < 300; ++round) {
    std::string a, b;
    const int n = static_cast<int>(rng() % 40), m = static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) a += static_cast<char>('a' + rng() % 3);
    for (int i = 0; i < m; ++i) b += static_cast<char>('a' + rng() % 4);
    auto va = seq(a), vb = seq(b);
    int64_t used = -1;
    auto h = tdbg::diff::edit_script_to_prefix(va.data(), va.size(), vb.data(), vb.size(), 200,
                                               &used);
    REQUIRE(h);
    REQUIRE(used >= 0);
    REQUIRE(used <= n);
    CHECK(apply(a.substr(0, static_cast<size_t>(used)), b, *h) == b);
    CHECK(edits(*h) == least_free_tail_edits(a, b, true, false));
  }
}


TEST_CASE("windows cut from runs whose steps differ in length do not drift a step apart") {
  // Op signatures of one training step of a 2-layer MLP (96 ops, from a recording), and of
  // the same step with `loss = loss + 0.0 * out.abs().mean()` (114 ops: 4 forward ops, the
  // backward's 13 and one `add` more). Over windows of equal length, the whole-window script
  // pairs each of B's first steps with A's step after next: it leaves less of A's longer
  // window unpaired at the end, and removes 87 ops of A per step that B ran. With the
  // windows' ends free, every step pairs with its counterpart.
  using tdbg::diff::testdata::kMlpStep;
  using tdbg::diff::testdata::kMlpStepWithAbs;
  std::vector<uint64_t> a, b;
  for (int step = 0; step < 13; ++step) {
    a.insert(a.end(), kMlpStep.begin(), kMlpStep.end());
    b.insert(b.end(), kMlpStepWithAbs.begin(), kMlpStepWithAbs.end());
  }
  a.resize(1200);
  b.resize(1200);
  auto whole = shortest_edit_script(a.data(), a.size(), b.data(), b.size(), 2048);
  REQUIRE(whole);
  int64_t longest_removal = 0;
  for (const Hunk& x : *whole) longest_removal = std::max(longest_removal, x.a_end - x.a_begin);
  CHECK(longest_removal >= 80);  // the drift this guards against
  int64_t a_used = -1, b_used = -1;
  auto h = tdbg::diff::edit_script_free_tails(a.data(), a.size(), b.data(), b.size(), 2048, true,
                                              true, &a_used, &b_used);
  REQUIRE(h);
  CHECK(b_used == 1200);
  int64_t inserted = 0;
  for (const Hunk& x : *h) {
    INFO(x.a_begin << " " << x.a_end << " " << x.b_begin << " " << x.b_end);
    CHECK(x.a_end - x.a_begin <= 1);  // at most an op replaced, never a step's ops removed
    inserted += x.b_end - x.b_begin;
  }
  CHECK(inserted == b_used - a_used + [&] {
    int64_t removed = 0;
    for (const Hunk& x : *h) removed += x.a_end - x.a_begin;
    return removed;
  }());
  CHECK(a_used >= 1200 * 96 / 114 - 18);  // one A step per B step (give or take its extra ops)
}

TEST_CASE("the free-tail script is minimal and reproduces the target on random sequences") {
  std::mt19937 rng(23);
  for (int round = 0; round < 400; ++round) {
    std::string a, b;
    const int n = static_cast<int>(rng() % 40), m = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) a += static_cast<char>('a' + rng() % 3);
    for (int i = 0; i < m; ++i) b += static_cast<char>('a' + rng() % 3);
    const bool a_free = rng() % 2, b_free = rng() % 2;
    auto va = seq(a), vb = seq(b);
    int64_t a_used = -1, b_used = -1;
    auto h = tdbg::diff::edit_script_free_tails(va.data(), va.size(), vb.data(), vb.size(), 200,
                                                a_free, b_free, &a_used, &b_used);
    REQUIRE(h);
    CHECK((a_used == n || (a_free && b_used == m)) | (b_free && a_used == n));
    CHECK(apply(a.substr(0, static_cast<size_t>(a_used)), b.substr(0, static_cast<size_t>(b_used)), *h) ==
          b.substr(0, static_cast<size_t>(b_used)));
    CHECK(edits(*h) == least_free_tail_edits(a, b, a_free, b_free));
  }
}
