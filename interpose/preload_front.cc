// The exported entry points of `dlopen` and `dlsym` (HOOK_FRONT in hooks.inc). The dynamic
// loader decides what RTLD_NEXT, RTLD_DEFAULT and a bare library name mean from the return
// address of whoever called it, so a C wrapper that calls on would make every such call look
// like it came from tdbg. These stubs jump (not call) to the real function whenever tdbg has
// nothing to do, which keeps the host's return address; only the remaining cases go to the C
// slow path (`on_dlopen`, `on_dlsym`).
#include <dlfcn.h>

#include "interpose/preload.h"

extern "C" {
// Set to the real function once the slow path has nothing left to do (dlopen: after the torch
// check is final; dlsym: when GPU interception is off). Read by the stubs below.
__attribute__((visibility("hidden"))) void* tdbg_front_dlopen_direct = nullptr;
__attribute__((visibility("hidden"))) void* tdbg_front_dlsym_direct = nullptr;
// The real dlsym, for the RTLD_NEXT / RTLD_DEFAULT lookups that always go straight through.
__attribute__((visibility("hidden"))) void* tdbg_front_dlsym_real = nullptr;

void tdbg_front_set_caller(void* caller);

// Reached by a jump from the stub, so its return address is the host's dlopen call site.
__attribute__((visibility("hidden"), used, noinline)) void* tdbg_front_slow_dlopen(const char* file,
                                                                                   int mode) {
  tdbg_front_set_caller(__builtin_return_address(0));
  return tdbg::preload::on_dlopen(file, mode);
}
__attribute__((visibility("hidden"), used)) void* tdbg_front_slow_dlsym(void* handle,
                                                                        const char* symbol) {
  return tdbg::preload::on_dlsym(handle, symbol);
}
}

#if defined(__x86_64__)
asm(R"(
  .text
  .globl dlopen
  .type dlopen, @function
  .p2align 4
dlopen:
  .cfi_startproc
  endbr64
  movq tdbg_front_dlopen_direct(%rip), %rax
  testq %rax, %rax
  jz 1f
  jmp *%rax
1:
  jmp tdbg_front_slow_dlopen
  .cfi_endproc
  .size dlopen, .-dlopen

  .globl dlsym
  .type dlsym, @function
  .p2align 4
dlsym:
  .cfi_startproc
  endbr64
  cmpq $-1, %rdi
  je 2f
  testq %rdi, %rdi
  je 2f
  movq tdbg_front_dlsym_direct(%rip), %rax
  testq %rax, %rax
  jnz 3f
  jmp tdbg_front_slow_dlsym
2:
  movq tdbg_front_dlsym_real(%rip), %rax
  testq %rax, %rax
  jz 4f
3:
  jmp *%rax
4:
  jmp tdbg_front_slow_dlsym
  .cfi_endproc
  .size dlsym, .-dlsym
)");
#elif defined(__aarch64__)
asm(R"(
  .text
  .globl dlopen
  .type dlopen, %function
  .p2align 4
dlopen:
  adrp x16, tdbg_front_dlopen_direct
  ldr x16, [x16, :lo12:tdbg_front_dlopen_direct]
  cbz x16, 1f
  br x16
1:
  b tdbg_front_slow_dlopen
  .size dlopen, .-dlopen

  .globl dlsym
  .type dlsym, %function
  .p2align 4
dlsym:
  cmn x0, #1
  b.eq 2f
  cbz x0, 2f
  adrp x16, tdbg_front_dlsym_direct
  ldr x16, [x16, :lo12:tdbg_front_dlsym_direct]
  cbz x16, 4f
  br x16
2:
  adrp x16, tdbg_front_dlsym_real
  ldr x16, [x16, :lo12:tdbg_front_dlsym_real]
  cbz x16, 4f
  br x16
4:
  b tdbg_front_slow_dlsym
  .size dlsym, .-dlsym
)");
#else
// Elsewhere: plain C wrappers (the host's return address is lost for RTLD_NEXT lookups).
extern "C" __attribute__((visibility("default"))) void* dlopen(const char* file, int mode) {
  tdbg_front_set_caller(__builtin_return_address(0));
  return tdbg::preload::on_dlopen(file, mode);
}
extern "C" __attribute__((visibility("default"))) void* dlsym(void* handle, const char* symbol) {
  return tdbg::preload::on_dlsym(handle, symbol);
}
#endif
