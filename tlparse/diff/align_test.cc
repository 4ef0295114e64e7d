// Tests of the op-sequence alignment (Myers' shortest edit script) used for structural diffs.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "tlparse/diff/align.h"

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
