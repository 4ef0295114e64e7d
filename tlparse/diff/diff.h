// Public API of the diff engine: first divergence between two runs, first non-finite value
// in one run. The JSON shapes are the `--json` outputs of `tdbg diff` and `tdbg nan`
// (documented in docs/cli.md); `tdbg report` and `tdbg bundle` embed the same objects.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "tracer/reader.h"

namespace tdbg::diff {

struct DiffOptions {
  int context_ops = 3;         // ops shown before and after the divergence on each side
  bool progress = false;       // progress bar on stderr (only when it is a terminal)
};

// {"status": "identical"|"diverged", "first_divergence": null | {...}, ...} as documented.
// Extra keys (context, summaries, growth, structural changes) may be present.
StatusOr<nlohmann::json> compare_runs(const tracer::Run& a, const tracer::Run& b,
                                      const DiffOptions& options = {});

// {"status": "finite"|"nonfinite", "first_nonfinite": null | {...}} as documented.
StatusOr<nlohmann::json> first_nonfinite(const tracer::Run& run);

}  // namespace tdbg::diff
