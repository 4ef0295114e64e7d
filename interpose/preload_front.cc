// The exported entry points of `dlopen` and `dlsym` (HOOK_FRONT in hooks.inc). The dynamic
// loader decides what RTLD_NEXT, RTLD_DEFAULT and a bare library name mean from the return
// address of whoever called it, so a C wrapper that calls on would make every such call look
// like it came from tdbg. These stubs jump (not call) to the real function whenever tdbg has
// nothing to do, which keeps the host's return address; only the remaining cases go to the C
// slow path (`on_dlopen`, `on_dlsym`). RTLD_NEXT and RTLD_DEFAULT lookups never take the slow
// path while a real dlsym exists: one made before tdbg's constructor resolves it first.
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

// Called by the dlsym stub for an RTLD_NEXT / RTLD_DEFAULT lookup made before
// `tdbg_front_dlsym_real` is known, which happens when another library's start-up code runs
// before tdbg's constructor: AddressSanitizer's runtime, preloaded ahead of tdbg, initializes
// at the first malloc (tdbg's constructor makes it) and resolves every one of its interceptors
// with dlsym(RTLD_NEXT, name). The stub keeps the caller's return address around this call and
// then jumps to the real dlsym, so RTLD_NEXT still means "after the caller". The lookup uses
// only functions the sanitizers do not intercept: during ASan's initialization its
// interceptors call through pointers it has not set yet. Returns nullptr if there is none.
__attribute__((visibility("hidden"), used)) void* tdbg_front_resolve_dlsym() {
  void* real = tdbg::preload::resolve_real(tdbg::preload::kHook_dlsym);
  if (real != nullptr) __atomic_store_n(&tdbg_front_dlsym_real, real, __ATOMIC_RELEASE);
  return real;
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
  jnz 3f
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  call tdbg_front_resolve_dlsym
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
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
  cbnz x16, 3f
  stp x29, x30, [sp, #-32]!
  mov x29, sp
  stp x0, x1, [sp, #16]
  bl tdbg_front_resolve_dlsym
  mov x16, x0
  ldp x0, x1, [sp, #16]
  ldp x29, x30, [sp], #32
  cbz x16, 4f
3:
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
