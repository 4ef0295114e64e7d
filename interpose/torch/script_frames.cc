// TorchScript source locations: the interpreter's call stack as frames of the run database
// (see script_frames.h).
#include "interpose/torch/script_frames.h"

#include <torch/csrc/jit/runtime/interpreter.h>

#include <vector>

#include "interpose/torch/session.h"

namespace tdbg::torchhook {

SourceLocation add_script_frames(SourceLocation loc, bool (*is_user)(const std::string& file)) {
  std::vector<torch::jit::StackEntry> stack;
  try {
    stack = torch::jit::currentCallstack();  // empty outside the interpreter
  } catch (...) {
    return loc;
  }
  if (stack.empty()) return loc;
  tracer::Writer* w = writer();
  if (!w) return loc;
  tracer::FrameId parent = loc.stack;
  // Innermost first (an inlined call adds its caller's frame after the callee's).
  for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
    const torch::jit::StackEntry& entry = *it;
    const auto where = entry.range.file_line_col();  // none for code without a source file
    if (!where) continue;
    const std::string& file = std::get<0>(*where);
    // `filename` is the scripted function's name ("fused", "forward").
    parent = w->intern_frame(parent, w->intern(file), static_cast<int32_t>(std::get<1>(*where)),
                             w->intern(entry.filename));
    // TorchScript's builtins are compiled from source strings ("<string>", `float * Tensor`
    // runs its `mul(float, Tensor)`): no line of the user's, who keeps the caller's.
    if (is_user(file) && file.rfind('<', 0) != 0) loc.user_frame = parent;
  }
  loc.stack = parent;
  return loc;
}

}  // namespace tdbg::torchhook
