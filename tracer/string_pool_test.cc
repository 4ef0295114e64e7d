// Tests of the writer's string pool (tracer/string_pool.h): one id per distinct text, in order
// of first appearance, views that stay valid while the index grows, and texts of any length.
#include "tracer/string_pool.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace tdbg::tracer {
namespace {

TEST_CASE("string pool: one id per text, numbered in order of first appearance") {
  StringPool pool;
  std::string_view stored;
  bool added = false;
  CHECK(pool.intern("aten::add", &stored, &added) == 1);
  CHECK(added);
  CHECK(stored == "aten::add");
  CHECK(pool.intern("aten::mul", &stored, &added) == 2);
  CHECK(pool.intern("aten::add", &stored, &added) == 1);
  CHECK_FALSE(added);
  CHECK(stored == "aten::add");
  // Texts that differ only in length or in their last byte are different strings.
  CHECK(pool.intern("aten::ad", &stored, &added) == 3);
  CHECK(pool.intern("aten::adD", &stored, &added) == 4);
  CHECK(pool.intern("", &stored, &added) == 5);
  CHECK(stored.empty());
  CHECK(pool.intern(std::string_view("a\0b", 3), &stored, &added) == 6);
  CHECK(pool.intern(std::string_view("a\0c", 3), &stored, &added) == 7);
  CHECK(pool.size() == 7);
}

TEST_CASE("string pool: views of earlier texts survive the index growing and new pieces") {
  StringPool pool;
  std::vector<std::string> texts;
  std::vector<std::string_view> views;
  // 200,000 texts (about 3 MB): the index doubles several times and texts fill several pieces.
  for (int i = 0; i < 200000; ++i) {
    texts.push_back("value " + std::to_string(i * 7919));
    std::string_view stored;
    bool added = false;
    REQUIRE(pool.intern(texts.back(), &stored, &added) == static_cast<uint32_t>(i + 1));
    REQUIRE(added);
    views.push_back(stored);
  }
  for (size_t i = 0; i < texts.size(); i += 997) {
    CHECK(views[i] == texts[i]);
    std::string_view stored;
    bool added = true;
    CHECK(pool.intern(texts[i], &stored, &added) == i + 1);
    CHECK_FALSE(added);
    CHECK(stored.data() == views[i].data());
  }
}

TEST_CASE("string pool: a text longer than a piece is kept whole") {
  StringPool pool;
  const std::string big(3 << 20, 'x');
  const std::string small = "after the big one";
  std::string_view big_view, small_view;
  bool added = false;
  CHECK(pool.intern(small, &small_view, &added) == 1);
  CHECK(pool.intern(big, &big_view, &added) == 2);
  CHECK(big_view == big);
  CHECK(pool.intern(big + "y", &big_view, &added) == 3);
  CHECK(big_view.size() == big.size() + 1);
  CHECK(pool.intern(small, &small_view, &added) == 1);
  CHECK(small_view == small);
  CHECK(pool.intern("next", &small_view, &added) == 4);
}

}  // namespace
}  // namespace tdbg::tracer
