// TorchScript source locations: an op that the TorchScript interpreter runs (inside a
// `@torch.jit.script` function, a scripted module, a `torch::jit::load`ed model) gets the
// script's frames below its caller's, so that a divergence names the line inside the scripted
// code rather than the call of it. Internal to interpose/torch/.
#pragma once

#include <string>

#include "interpose/torch/python_frames.h"

namespace tdbg::torchhook {

// `loc` (the Python or C++ caller's location) with the interpreter's call stack on this thread
// appended below `loc.stack` (outermost nearest it); `loc` itself outside the interpreter. The
// innermost script frame whose file `is_user` accepts becomes the user frame.
SourceLocation add_script_frames(SourceLocation loc, bool (*is_user)(const std::string& file));

}  // namespace tdbg::torchhook
