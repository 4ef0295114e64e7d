// The hyperparameters a Python optimizer stepped with (the recorder keeps them per step, a region
// of kind `optimizer` inside the step's region): where the first divergence is a scalar inside
// optimizer.step(), which of lr, betas, eps, weight decay ... differs, and in which optimizer
// and param group.
#pragma once

#include <nlohmann/json.hpp>

#include "tracer/reader.h"

namespace tdbg::diff {

// The settings of the optimizer whose step `op` ran in, as recorded ({"optimizer": class,
// "index": which of the process's optimizers, "groups": [{hyperparameter: value, "params":
// count}]}), or null where none was recorded (a C++ optimizer, an older database).
nlohmann::json optimizer_settings_at(const tracer::Reader& reader, const tracer::OpRecord& op);

// The two runs' settings at a pair of ops inside optimizer steps compared: null where either
// run recorded none; else {"a", "b": {"optimizer", "index", "count": the run's optimizers},
// "differs": [{"group", "name", "a", "b"}] (values as JSON; a group or a setting one run lacks
// reads null), "text": what differs or, where nothing does, what is left (the optimizer's state)
// in a sentence for the CLI and the viewer}.
nlohmann::json compare_optimizer_settings(const tracer::Reader& ra, const tracer::OpRecord& a,
                                          const tracer::Reader& rb, const tracer::OpRecord& b);

}  // namespace tdbg::diff
