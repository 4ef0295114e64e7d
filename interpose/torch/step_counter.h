// Training steps counted from optimizer steps. With one optimizer each of its steps is a
// training step. With several (a GAN's discriminator and generator, a WGAN critic stepping
// n times per generator step, actor and critic, SparseAdam beside Adam, a wrapper optimizer
// around an inner one) a training step is an iteration of the loop: the count follows the
// optimizer in use that has stepped least. Internal to interpose/torch/.
#pragma once

#include <cstdint>
#include <vector>

namespace tdbg::torchhook {

// Not thread-safe: the caller serializes. Optimizers are told apart by an identity (the
// Python object, the C++ `this`); 0 is an identity like any other.
class StepCounter {
 public:
  // Optimizer `id` finished a step; returns the number of training steps completed: the least
  // step count among the optimizers in use, never going down.
  //
  // - An optimizer stepping for the first time right after the count moved belongs to the
  //   iteration just counted (the second optimizer of the first iteration); otherwise it
  //   joins the iteration in progress.
  // - One that has not stepped while the others stepped many times (16, or 4 times its
  //   longest gap so far) is out of use: replaced by a new optimizer, a warm-up one. It no
  //   longer holds the count back, which then catches up. If the newcomer's first step had
  //   been counted into the iteration before, it counts as an iteration of its own after all.
  // - So is one that has not stepped since a newcomer joined, when the newcomer steps a second
  //   time: a new stage of training with another optimizer (SGD, then Adam to fine-tune), at
  //   once rather than 16 steps later. A companion (a GAN's other optimizer, a critic) steps
  //   between the newcomer's first two steps.
  int64_t on_step(uintptr_t id);

  int64_t steps() const { return steps_; }
  void reset() { *this = StepCounter(); }

 private:
  struct Member {
    uintptr_t id = 0;
    int64_t count = 0;       // its steps, offset so that it lines up with the others
    int64_t since_last = 0;  // steps of other optimizers since its last step
    int64_t gap_max = 0;     // the most steps of others between two of its steps so far
    bool absorbed = false;   // its first step was counted into the iteration before
    int64_t own = 0;         // its own steps
    int64_t joined_at = 0;   // `calls_` at its first step
    int64_t last_at = 0;     // `calls_` at its last step
  };
  void update_steps();

  std::vector<Member> members_;
  int64_t steps_ = 0;
  int64_t calls_ = 0;   // optimizer steps of all members
  bool moved_ = false;  // the last step moved the count, or joined the iteration just counted
};

}  // namespace tdbg::torchhook
