// Unit tests of the native stack walker (native_stack.h): libunwind's walk finds the same
// frames as glibc's backtrace, at any depth, again and again (its cache of unwind rules must
// not go stale), and from another thread.
#include "interpose/torch/native_stack.h"

#include <execinfo.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using tdbg::torchhook::native_backtrace;

struct Walks {
  std::vector<void*> ours, glibc;
};

// Both walks from the same function: they differ in this function's own frame (each returns to
// a different call in it) and in the walker's frames, and must agree on every frame outside.
__attribute__((noinline)) Walks walk_both() {
  Walks w;
  void* buf[256];
  int n = native_backtrace(buf, 256);
  w.ours.assign(buf, buf + n);
  n = backtrace(buf, 256);
  w.glibc.assign(buf, buf + n);
  return w;
}

// `depth` nested frames below the caller (not tail calls: each adds a frame).
__attribute__((noinline)) Walks nested(int depth) {
  Walks w = depth == 0 ? walk_both() : nested(depth - 1);
  asm volatile("" : : "r"(&w) : "memory");
  return w;
}

size_t common_suffix(const std::vector<void*>& a, const std::vector<void*>& b) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[a.size() - 1 - k] == b[b.size() - 1 - k]) ++k;
  return k;
}

// Checks a walk `depth` frames deep: glibc's differs from the common part in walk_both's frame
// only; ours in walk_both's frame and at most one of the walker's own.
void check_depth(int depth) {
  const Walks w = nested(depth);
  const size_t common = common_suffix(w.ours, w.glibc);
  INFO("depth " << depth << ": ours " << w.ours.size() << " frames, glibc's "
                << w.glibc.size() << ", " << common << " in common");
  CHECK(common >= static_cast<size_t>(depth) + 2);  // the nested frames and the test's own
  CHECK(w.glibc.size() - common == 1);
  CHECK(w.ours.size() - common >= 1);
  CHECK(w.ours.size() - common <= 2);
}

}  // namespace

TEST_CASE("native stack: glibc's walker before prepare_native_stack") {
  CHECK(std::strcmp(tdbg::torchhook::native_stack_walker(), "glibc") == 0);
  check_depth(3);
}

TEST_CASE("native stack: libunwind's walker finds glibc's frames") {
  tdbg::torchhook::prepare_native_stack();
  // scripts/apt-packages.txt installs libunwind8 (Debian's libtorch needs it too).
  REQUIRE(std::strcmp(tdbg::torchhook::native_stack_walker(), "libunwind") == 0);
  for (int round = 0; round < 3; ++round)  // the second and third walks come from its cache
    for (int depth : {0, 1, 7, 40, 150}) check_depth(depth);

  // Truncated at `max`: the innermost frames, as many as asked.
  void* buf[8];
  CHECK(native_backtrace(buf, 8) == 8);

  // Another thread: its own stack, down to the thread's start.
  std::thread([] { check_depth(5); }).join();
}

TEST_CASE("native stack: a fork child walks with glibc's") {
  tdbg::torchhook::prepare_native_stack();
  tdbg::torchhook::native_stack_after_fork_child();
  CHECK(std::strcmp(tdbg::torchhook::native_stack_walker(), "glibc") == 0);
  check_depth(2);
}
