// The C++ call site of an op in a program without Python (a libtorch program): its stack of
// native frames in the program's own code, named from the dynamic symbols or, for a binary
// linked without -rdynamic, from the ELF symbol table on disk. Internal to interpose/torch/.
#pragma once

#include <cstdint>
#include <string>

#include "interpose/torch/python_frames.h"

namespace tdbg::torchhook {

// Captures the calling thread's native stack, up to 8 frames of the program's own code:
// frames in torch's, the C++ runtime's and tdbg's libraries are left out, and so are frames
// of functions in the at::, c10::, torch::, std:: (and a few more) namespaces, which are
// torch's templates instantiated in the program's binary. `user_frame` is the innermost kept
// frame. Each frame's function is "NAME +0xOFFSET" (the offset in its binary, the same in
// every run: `addr2line -e FILE OFFSET` gives the line of a -g build), its file the binary's
// absolute path. Addresses are resolved once per process. The GNU build-id of each binary with
// a kept frame is written to the run's meta (`build_id:<path>`) once per database, so that
// `tdbg` reads source lines only from that very binary. Empty when unavailable.
SourceLocation capture_native_call_site();

// The function containing `offset` (from the file's load address; the absolute address for a
// non-PIE executable) in the ELF symbol table (.symtab) of the file at `path`, mangled, or ""
// when the file has no symbol table (stripped) or no function covers it. Tables are read once
// per file and kept.
std::string symbol_table_function(const std::string& path, uint64_t offset);

// Forgets the caches that hold ids of the current writer (called in a fork child).
void native_frames_after_fork_child();

}  // namespace tdbg::torchhook
