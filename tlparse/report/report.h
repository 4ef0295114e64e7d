// Public API of tlparse/report: the data model that the web viewer shows (one JSON object
// built from one or two runs), the static HTML report that embeds it, and the op JSON that
// `tdbg view` pages through. Bounded: a report holds a window of ops, per-step aggregates and
// a down-sampled difference curve, never a whole run.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "tracer/reader.h"

namespace tdbg::report {

struct ReportOptions {
  // Ops of each run embedded in the report: a window centred on the first divergence (or on the
  // first non-finite value, or the start of the run). This is the report's size bound.
  int64_t window_ops = 1000;
  // Ops scanned (with tensors) for the difference curve, from the window start onwards.
  int64_t curve_scan_ops = 200000;
  // Points of the difference curve after down-sampling (max of each bucket).
  int curve_points = 1000;
  // Steps listed individually; longer runs are merged into this many buckets of steps.
  int max_steps = 2000;
  // Run the diff engine (`tdbg::diff`) and the non-finite search. Off for tests of the model.
  bool with_diff = true;
  // The diff's `--align-steps` (`diff::DiffOptions::align_steps`), and the notes that go with
  // the diff (`diff::keep_aligned_phases`: the phase of a run that was compared).
  std::pair<int64_t, int64_t> align_steps = {-1, -1};
  std::vector<std::string> diff_notes;
  // "static" (everything embedded) or "server" (the viewer pages ops through the JSON API).
  std::string mode = "static";
};

// Shared frames of the ops in one run's window, keyed by innermost frame id, so that an op
// carries a stack id instead of its own copy of the frames.
class StackTable {
 public:
  // Records the stack ending at `innermost` (once) and returns its key ("" for none).
  std::string add(const tracer::Reader& reader, tracer::FrameId innermost);
  const nlohmann::json& json() const { return stacks_; }

 private:
  nlohmann::json stacks_ = nlohmann::json::object();
};

// An op as the viewer shows it: names resolved, hashes as 16 hex digits, the user's source line,
// tensors with summaries, args and (with `with_kernels`) the kernels it launched. When `stacks`
// is null the stack frames are inlined under "stack_frames".
nlohmann::json op_json(const tracer::Reader& reader, const tracer::OpRecord& op,
                       StackTable* stacks, bool with_kernels);
// The light form used in tables: no tensors, args, stack or kernels.
nlohmann::json op_row_json(const tracer::Reader& reader, const tracer::OpRecord& op);

// "0123456789abcdef".
std::string hex64(uint64_t value);

// The viewer's data model for run `a` and, when given, run `b` (documented in docs/cli.md).
StatusOr<nlohmann::json> build_report_data(const tracer::Run& a, const tracer::Run* b,
                                           const ReportOptions& options);

// Serializes `data` for a `<script type="application/json">` element: every `<` becomes
// \u003c (and `>`/`&` likewise), so no string from a run can close the element.
std::string json_for_script(const nlohmann::json& data);

// The viewer page with `data` embedded: one self-contained HTML file (style, script and data
// inline) with a Content-Security-Policy that allows only the viewer's own script.
std::string render_html(const nlohmann::json& data);

// Writes `dir`/index.html (creating `dir`); returns the path written.
StatusOr<std::string> write_report(const nlohmann::json& data, const std::string& dir);

// Base64 of the SHA-256 of `text`, as a CSP source expression uses it.
std::string sha256_base64(const std::string& text);

}  // namespace tdbg::report
