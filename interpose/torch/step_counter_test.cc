// Unit tests of StepCounter: training steps from the optimizer steps of typical loops.
#include "interpose/torch/step_counter.h"

#include <catch2/catch.hpp>
#include <vector>

using tdbg::torchhook::StepCounter;

namespace {
// The count after each optimizer step of `order`.
std::vector<int64_t> counts(const std::vector<uintptr_t>& order) {
  StepCounter c;
  std::vector<int64_t> out;
  for (uintptr_t id : order) out.push_back(c.on_step(id));
  return out;
}

std::vector<uintptr_t> repeat(const std::vector<uintptr_t>& pattern, int times) {
  std::vector<uintptr_t> out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), pattern.begin(), pattern.end());
  return out;
}

bool never_down(const std::vector<int64_t>& c) {
  for (size_t i = 1; i < c.size(); ++i)
    if (c[i] < c[i - 1]) return false;
  return true;
}
}  // namespace

TEST_CASE("step counter: one optimizer, every step is a training step") {
  CHECK(counts({7, 7, 7, 7}) == std::vector<int64_t>{1, 2, 3, 4});
}

TEST_CASE("step counter: two optimizers stepped each iteration count one step per iteration") {
  // A GAN: D then G every iteration. Only the first iteration's G part cannot be known.
  CHECK(counts({1, 2, 1, 2, 1, 2}) == std::vector<int64_t>{1, 1, 1, 2, 2, 3});
  // Three optimizers, any fixed order; nested wrappers (an inner optimizer's step ends first).
  CHECK(counts({3, 1, 2, 3, 1, 2}) == std::vector<int64_t>{1, 1, 1, 1, 1, 2});
  // A second optimizer stepped from the middle of the run on joins the iteration in progress.
  CHECK(counts({1, 2, 1, 3, 2, 1, 3, 2}) == std::vector<int64_t>{1, 1, 1, 1, 2, 2, 2, 3});
}

TEST_CASE("step counter: a critic stepping n times per generator step counts iterations") {
  // WGAN with 2 and 5 critic steps: the first iteration, before the generator is known,
  // counts in critic steps; from then on one step per iteration, at the generator's step.
  std::vector<int64_t> two = counts(repeat({1, 1, 2}, 5));
  CHECK(never_down(two));
  CHECK(two == std::vector<int64_t>{1, 2, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6});
  std::vector<int64_t> five = counts(repeat({1, 1, 1, 1, 1, 2}, 4));
  CHECK(never_down(five));
  CHECK(five.back() == 5 + 3);
}

TEST_CASE("step counter: a replaced optimizer stops holding the count back") {
  // 3 steps of optimizer 1, then optimizer 2 takes over for 20: 23 iterations, numbered
  // without a gap, the one after optimizer 2's first step sharing a number (22 in all).
  std::vector<uintptr_t> order = {1, 1, 1};
  for (int i = 0; i < 20; ++i) order.push_back(2);
  std::vector<int64_t> c = counts(order);
  CHECK(never_down(c));
  CHECK(c.back() == 22);
  for (size_t i = 1; i < c.size(); ++i) CHECK(c[i] - c[i - 1] <= 1);
  // A short second stage (SGD for 3 steps, then a new Adam for 3): the old optimizer is
  // replaced at the newcomer's second step, not 16 steps later. The newcomer's first step
  // cannot be told from a GAN's second optimizer: the iteration after it shares the number of
  // the one before, and no number is skipped.
  CHECK(counts({1, 1, 1, 2, 2, 2}) == std::vector<int64_t>{1, 2, 3, 3, 4, 5});
  // A third stage, and a stage of two optimizers stepped together.
  CHECK(counts({1, 1, 2, 2, 3, 3}) == std::vector<int64_t>{1, 2, 2, 3, 3, 4});
  c = counts({1, 1, 1, 2, 3, 2, 3, 2, 3});
  CHECK(never_down(c));
  CHECK(c.back() == 5);
  // An optimizer used once (a probe), then never again.
  order = {9};
  for (int i = 0; i < 20; ++i) order.push_back(1);
  c = counts(order);
  CHECK(never_down(c));
  CHECK(c.back() == 20);
  // One that stops while another steps on with it: caught up after 16 steps of the other.
  order = {1, 2, 1, 2, 1, 2};
  for (int i = 0; i < 20; ++i) order.push_back(2);
  c = counts(order);
  CHECK(never_down(c));
  CHECK(c.back() >= 22);
}
