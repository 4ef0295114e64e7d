// The hyperparameters a Python optimizer stepped with (the recorder keeps them per step, a region
// of kind `optimizer` inside the step's region): where the first divergence is a scalar inside
// optimizer.step(), which of lr, betas, eps, weight decay ... differs, and in which optimizer
// and param group.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "tracer/reader.h"

namespace tdbg::diff {

// Where to read an optimizer's settings: an op of `thread` with seq `seq` inside its step (a
// step region's own start is one).
struct StepAt {
  uint32_t thread = 0;
  int64_t seq = 0;
};

// The settings of the optimizer whose step the op at `at` ran in, as recorded ({"optimizer":
// class, "index": which of the process's optimizers, "groups": [{hyperparameter: value,
// "params": count}]}), or null where none was recorded (a C++ optimizer, an older database).
nlohmann::json optimizer_settings_at(const tracer::Reader& reader, StepAt at);

// The two runs' settings at a pair of places inside optimizer steps compared: null where either
// run recorded none; else {"a", "b": {"optimizer", "index", "count": the run's optimizers},
// "differs": [{"group", "name", "a", "b"}] (values as JSON; a group or a setting one run lacks
// reads null), "text": what differs or, where nothing does, what is left (the optimizer's state)
// in a sentence for the CLI and the viewer, "schedule": where the first setting that differs
// is one run's schedule ahead of the other's or moving twice as fast ({"run", "setting",
// "ahead": 1 | "rate": 2}: scheduler.step() before optimizer.step(), or twice per step),
// "scalar": where `scalar` (the two runs' values of an argument that differs inside the step)
// is the same expression of a param group's settings in both, that expression ("1 - lr *
// weight_decay ...")}.
nlohmann::json compare_optimizer_settings(
    const tracer::Reader& ra, StepAt a, const tracer::Reader& rb, StepAt b,
    std::optional<std::pair<double, double>> scalar = std::nullopt);

}  // namespace tdbg::diff
