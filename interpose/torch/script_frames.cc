// TorchScript source locations: the interpreter's call stack as frames of the run database
// (see script_frames.h).
#include "interpose/torch/script_frames.h"

#include <torch/csrc/jit/runtime/interpreter.h>

#include <algorithm>
#include <string>
#include <vector>

#include "interpose/torch/session.h"
#include "tracer/records.h"

namespace tdbg::torchhook {
namespace {

// The name of the builtin whose source `range` lies in: the last `def NAME(` before it.
std::string builtin_name(const torch::jit::SourceRange& range) {
  const std::shared_ptr<torch::jit::Source>& source = range.source();
  if (!source) return "builtin";
  const std::string text = source->text_str().str();
  const size_t def = text.rfind("def ", std::min(range.start(), text.size()));
  if (def == std::string::npos) return "builtin";
  const size_t open = text.find('(', def);
  if (open == std::string::npos || open - def > 64) return "builtin";
  return text.substr(def + 4, open - def - 4);
}

}  // namespace

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
    // TorchScript's builtins are compiled from source strings ("<string>": `2.0 * x` runs its
    // `def mul(a: float, b: Tensor)`), and inlined where they are called without the line that
    // called them: their frame is named for what it is, as "<TorchScript builtin>" and "mul
    // (in forward)", the scripted function that called it. The user keeps the caller's line.
    if (file == "<string>") {
      parent = w->intern_frame(
          parent, w->intern(tracer::kScriptBuiltinFile), static_cast<int32_t>(std::get<1>(*where)),
          w->intern(builtin_name(entry.range) + " (in " + entry.filename + ")"));
      continue;
    }
    // `filename` is the scripted function's name ("fused", "forward").
    parent = w->intern_frame(parent, w->intern(file), static_cast<int32_t>(std::get<1>(*where)),
                             w->intern(entry.filename));
    if (is_user(file) && file.rfind('<', 0) != 0) loc.user_frame = parent;
  }
  loc.stack = parent;
  return loc;
}

}  // namespace tdbg::torchhook
