/* Checks that the dynamic-loader calls a program makes mean the same with
   libtdbg_preload.so loaded: RTLD_NEXT from a library, a bare-name dlopen found through the
   caller's RUNPATH, and a nested dlopen from a library constructor. Prints what it saw. */
#include <dlfcn.h>
#include <stdio.h>

int main(void) {
  /* libdlprobe.so is found only through this program's RUNPATH ($ORIGIN/dlprobe). */
  void* probe = dlopen("libdlprobe.so", RTLD_NOW | RTLD_LOCAL);
  if (probe == NULL) {
    printf("bare-name dlopen through RUNPATH failed: %s\n", dlerror());
    return 1;
  }
  int (*scope_ok)(void) = (int (*)(void))dlsym(probe, "dlprobe_scope_ok");
  int (*nested_ok)(void) = (int (*)(void))dlsym(probe, "dlprobe_nested_ok");
  if (scope_ok == NULL || nested_ok == NULL) {
    printf("dlsym on a handle failed\n");
    return 1;
  }
  printf("RTLD_DEFAULT/RTLD_NEXT from an RTLD_LOCAL library see its scope: %d\n", scope_ok());
  printf("dlopen from a constructor inside dlopen worked: %d\n", nested_ok());
  return scope_ok() && nested_ok() ? 0 : 1;
}
