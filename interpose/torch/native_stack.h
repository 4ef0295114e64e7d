// Walks the calling thread's native stack for the C++ call sites of native_frames.cc. Internal
// to interpose/torch/.
#pragma once

namespace tdbg::torchhook {

// Picks the stack walker: libunwind's `unw_backtrace` where libunwind.so.8 is installed (it is
// loaded already where torch links glog, as Debian's does; otherwise it is loaded with
// RTLD_LOCAL, so no symbol of the program binds to it). Its walk keeps the unwind rule of each
// return address once found, per thread, where glibc's `backtrace` interprets the DWARF call
// frame information again at every frame of every walk: a C++ program's call sites cost about
// a tenth. Call once, before the first walk; without it walks use glibc's.
void prepare_native_stack();

// Stores up to `max` return addresses of the calling thread's stack, innermost first (the
// first is in this function's caller or in the walker), and returns how many.
int native_backtrace(void** out, int max);

// "libunwind" or "glibc": which walker `native_backtrace` uses now.
const char* native_stack_walker();

// In a fork child: glibc's walker from now on. libunwind's shared cache has a lock that a
// thread of the parent, which the child does not have, may have held at the fork.
void native_stack_after_fork_child();

}  // namespace tdbg::torchhook
