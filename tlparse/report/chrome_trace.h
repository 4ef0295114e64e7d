// Chrome trace-event export of one or two runs (`tdbg export --chrome-trace`): what Perfetto and
// chrome://tracing open as a timeline.
#pragma once

#include <cstdio>

#include "base/status.h"
#include "tracer/reader.h"

namespace tdbg::report {

struct ChromeTraceOptions {
  bool kernels = true;   // GPU kernels, one track per stream
  bool regions = true;   // steps, module calls and user ranges, on their thread's track
  // Only the ops of optimizer steps [first_step, end_step), with their regions and kernels
  // (`--steps A:B`): a long run's trace small enough for a viewer to open.
  int64_t first_step = 0, end_step = INT64_MAX;
};

// Writes {"traceEvents": [...]} to `out`: ops as complete events ("ph": "X") on one track per
// (process, thread), nested by time; regions and kernels. With `b`, both runs are written (as
// separate processes) and ops whose outputs differ between the runs (compared by seq) carry
// `args.divergent` and the color name "bad" ("terrible" for the first one), plus an instant event
// at the first divergent op.
Status write_chrome_trace(const tracer::Run& a, const tracer::Run* b,
                          const ChromeTraceOptions& options, std::FILE* out);

}  // namespace tdbg::report
