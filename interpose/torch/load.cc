// The entry point of libtdbg_torch.so. It is linked last (after the hashing and tracer
// libraries) so that its initializer runs after every other static initializer of the
// library: .init_array entries run in link order.
#include <cstdio>

#include "interpose/torch/session.h"

namespace {

struct Load {
  // Runs when the preload dlopens the library (torch already loaded) or when the library is
  // itself LD_PRELOADed (after libtorch's constructors, since it depends on libtorch).
  Load() {
    try {
      if (tdbg::torchhook::session_start()) tdbg::torchhook::install_dispatch_hook();
    } catch (...) {
      std::fprintf(stderr, "tdbg: the dispatch hook failed to start; not recording\n");
    }
  }
} g_load;

}  // namespace
