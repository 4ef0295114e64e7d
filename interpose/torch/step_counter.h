// Training steps counted from optimizer steps. With one optimizer each of its steps is a
// training step. With several stepped in the same iteration (a GAN's discriminator and
// generator, actor and critic, SparseAdam beside Adam) the iteration is one step: a step is a
// round in which every optimizer in use has stepped once. Internal to interpose/torch/.
#pragma once

#include <cstdint>
#include <vector>

namespace tdbg::torchhook {

// Not thread-safe: the caller serializes. Optimizers are told apart by an identity (the
// Python object, the C++ `this`); 0 is an identity like any other.
class StepCounter {
 public:
  // Optimizer `id` finished a step; returns the number of training steps completed.
  //
  // - An optimizer stepping for the first time right after a round completed belongs to that
  //   round (the second optimizer of the first iteration); otherwise it joins the round in
  //   progress.
  // - One that steps twice in a row, no other stepping in between, shows the others are no
  //   longer in use (replaced, a warm-up optimizer): they are dropped. If its first step was
  //   counted into the round before, that step is counted as a round of its own after all.
  // - One that steps again before every optimizer of the round has stepped ends the round,
  //   and the optimizers that did not step are dropped.
  // The count never goes down.
  int64_t on_step(uintptr_t id);

  int64_t steps() const { return steps_; }
  void reset() { *this = StepCounter(); }

 private:
  struct Member {
    uintptr_t id;
    bool stepped = false;   // in the round in progress
    bool absorbed = false;  // its first step was counted into the round before
  };
  Member* find(uintptr_t id);
  void drop_unstepped_except(uintptr_t id);
  void finish_round_if_complete();

  std::vector<Member> members_;
  int64_t steps_ = 0;
  uintptr_t last_ = 0;
  bool has_last_ = false;
  bool last_completed_ = false;  // the last step completed a round, or joined it since
};

}  // namespace tdbg::torchhook
