// StepCounter: rounds of optimizer steps (see step_counter.h).
#include "interpose/torch/step_counter.h"

#include <algorithm>

namespace tdbg::torchhook {

StepCounter::Member* StepCounter::find(uintptr_t id) {
  for (Member& m : members_)
    if (m.id == id) return &m;
  return nullptr;
}

void StepCounter::drop_unstepped_except(uintptr_t id) {
  members_.erase(std::remove_if(members_.begin(), members_.end(),
                                [&](const Member& m) { return m.id != id && !m.stepped; }),
                 members_.end());
}

void StepCounter::finish_round_if_complete() {
  last_completed_ = false;
  for (const Member& m : members_)
    if (!m.stepped) return;
  ++steps_;
  for (Member& m : members_) m.stepped = false;
  last_completed_ = true;
}

int64_t StepCounter::on_step(uintptr_t id) {
  const bool again = has_last_ && last_ == id;
  last_ = id;
  has_last_ = true;
  Member* self = find(id);
  if (self == nullptr) {
    members_.push_back({id});
    if (last_completed_) {
      // Another optimizer of the round that just completed (the first iteration's).
      members_.back().absorbed = true;
      return steps_;
    }
    self = &members_.back();
  } else if (again) {
    // Twice in a row: every other optimizer is out of use.
    members_.erase(std::remove_if(members_.begin(), members_.end(),
                                  [&](const Member& m) { return m.id != id; }),
                   members_.end());
    self = &members_.front();
    if (self->absorbed) ++steps_;  // its first step was a round of its own after all
  }
  self->absorbed = false;
  if (self->stepped) {
    // Steps again before the round completed: the round ends, without those that did not step.
    drop_unstepped_except(id);
    finish_round_if_complete();
    self = find(id);
  }
  self->stepped = true;
  finish_round_if_complete();
  return steps_;
}

}  // namespace tdbg::torchhook
