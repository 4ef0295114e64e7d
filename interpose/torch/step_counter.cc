// StepCounter: training iterations from optimizer steps (see step_counter.h).
#include "interpose/torch/step_counter.h"

#include <algorithm>

namespace tdbg::torchhook {
namespace {
constexpr int64_t kOutOfUse = 16;  // steps of others without one of its own, at least
}  // namespace

void StepCounter::update_steps() {
  if (members_.empty()) return;
  int64_t least = members_.front().count;
  for (const Member& m : members_) least = std::min(least, m.count);
  steps_ = std::max(steps_, least);
}

int64_t StepCounter::on_step(uintptr_t id) {
  const int64_t before = steps_;
  const int64_t call = ++calls_;
  Member* self = nullptr;
  for (Member& m : members_) {
    if (m.id == id) {
      self = &m;
    } else {
      ++m.since_last;
    }
  }
  if (self == nullptr) {
    Member joined;
    joined.id = id;
    joined.count = steps_;
    joined.own = 1;
    joined.joined_at = joined.last_at = call;
    if (!members_.empty() && moved_) {
      // Part of the iteration just counted: after this step it lines up with the count.
      joined.absorbed = true;
      members_.push_back(joined);
      return steps_;  // `moved_` stays: a third optimizer of that iteration may follow
    }
    // Stepping in the iteration in progress: one ahead of the count, like those that stepped.
    members_.push_back(joined);
    self = &members_.back();
  } else {
    self->gap_max = std::max(self->gap_max, self->since_last);
    self->since_last = 0;
    ++self->own;
    self->last_at = call;
  }
  ++self->count;
  // A newcomer's second step with an older optimizer silent since it joined: replaced.
  const bool second = self->own == 2;
  const int64_t self_joined = self->joined_at;
  // A member that stepped after the newcomers joined shows they were its companions (one
  // of the newcomers stepping again shows nothing: they may all be a new stage).
  if (!self->absorbed)
    for (Member& m : members_)
      if (m.id != id && m.absorbed && m.since_last > 0) m.absorbed = false;
  // Optimizers out of use no longer hold the count back.
  bool dropped = false, switched = false;
  members_.erase(std::remove_if(members_.begin(), members_.end(),
                                [&](const Member& m) {
                                  if (m.id == id) return false;
                                  const bool idle =
                                      m.since_last > std::max(kOutOfUse, 4 * m.gap_max + 1);
                                  const bool replaced = second && m.last_at < self_joined;
                                  dropped = dropped || idle || replaced;
                                  switched = switched || (replaced && !idle);
                                  return idle || replaced;
                                }),
                 members_.end());
  if (dropped) {
    for (Member& m : members_) {
      if (!m.absorbed) continue;
      // Its first step began an iteration of its own (it replaced the dropped one): counted
      // when the count catches up after many steps, but not at a stage switch, where the
      // count would skip a number (the iteration after that first step already has one).
      if (!switched) ++m.count;
      m.absorbed = false;
    }
  }
  update_steps();
  moved_ = steps_ != before;
  return steps_;
}

}  // namespace tdbg::torchhook
