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
}  // namespace

TEST_CASE("step counter: one optimizer, every step is a training step") {
  CHECK(counts({7, 7, 7, 7}) == std::vector<int64_t>{1, 2, 3, 4});
}

TEST_CASE("step counter: two optimizers stepped each iteration count one step per iteration") {
  // A GAN: D then G every iteration. Only the first iteration's G part cannot be known.
  CHECK(counts({1, 2, 1, 2, 1, 2}) == std::vector<int64_t>{1, 1, 1, 2, 2, 3});
  // Three optimizers, any fixed order; nested wrappers (an inner optimizer's step ends first).
  CHECK(counts({3, 1, 2, 3, 1, 2}) == std::vector<int64_t>{1, 1, 1, 1, 1, 2});
}

TEST_CASE("step counter: a replaced optimizer stops counting, the new one goes on from there") {
  // 3 steps of optimizer 1, then optimizer 2 takes over: 3 + 3 steps in all.
  CHECK(counts({1, 1, 1, 2, 2, 2}) == std::vector<int64_t>{1, 2, 3, 3, 5, 6});
  // A second optimizer stepped from the middle of a round on joins that round.
  CHECK(counts({1, 2, 1, 3, 2, 1, 3, 2}) == std::vector<int64_t>{1, 1, 1, 1, 2, 2, 2, 3});
}

TEST_CASE("step counter: uneven loops never count backwards") {
  // WGAN: the critic steps 5 times per generator step.
  std::vector<uintptr_t> order;
  for (int i = 0; i < 4; ++i) {
    for (int k = 0; k < 5; ++k) order.push_back(1);
    order.push_back(2);
  }
  std::vector<int64_t> c = counts(order);
  for (size_t i = 1; i < c.size(); ++i) CHECK(c[i] >= c[i - 1]);
  CHECK(c.back() == 20);  // counted in critic steps
  // An optimizer used once (a probe), then never again.
  CHECK(counts({9, 1, 1, 1}) == std::vector<int64_t>{1, 1, 3, 4});
}
