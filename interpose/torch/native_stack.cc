// The native stack walker of C++ call sites: libunwind's cached walk where the process can have
// it, glibc's backtrace otherwise (see native_stack.h).
#include "interpose/torch/native_stack.h"

#include <dlfcn.h>
#include <execinfo.h>

#include <atomic>

namespace tdbg::torchhook {
namespace {

using Backtrace = int (*)(void**, int);
std::atomic<Backtrace> g_unw_backtrace{nullptr};

}  // namespace

void prepare_native_stack() {
  // Not loaded a second time where it is loaded already (RTLD_NOLOAD runs no initializer).
  void* lib = dlopen("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) return;
  g_unw_backtrace.store(reinterpret_cast<Backtrace>(dlsym(lib, "unw_backtrace")));
}

int native_backtrace(void** out, int max) {
  if (Backtrace walk = g_unw_backtrace.load(std::memory_order_relaxed)) {
    const int n = walk(out, max);
    if (n > 0) return n;
  }
  return backtrace(out, max);
}

const char* native_stack_walker() {
  return g_unw_backtrace.load(std::memory_order_relaxed) ? "libunwind" : "glibc";
}

void native_stack_after_fork_child() { g_unw_backtrace.store(nullptr); }

}  // namespace tdbg::torchhook
