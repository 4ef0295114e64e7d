/* The library half of dl_semantics.c. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

static int g_nested_ok = 0;

int dlprobe_symbol(void) { return 1; }

/* Opened RTLD_LOCAL, this library is outside the global scope: RTLD_DEFAULT still finds
   its own symbol (the loader searches the caller's scope), RTLD_NEXT finds nothing after it.
   Both answers change if the loader takes tdbg's preload for the caller. */
int dlprobe_scope_ok(void) {
  return dlsym(RTLD_DEFAULT, "dlprobe_symbol") != NULL &&
         dlsym(RTLD_NEXT, "dlprobe_symbol") == NULL;
}

int dlprobe_nested_ok(void) { return g_nested_ok; }

__attribute__((constructor)) static void dlprobe_init(void) {
  void* libm = dlopen("libm.so.6", RTLD_NOW);
  g_nested_ok = libm != NULL && dlsym(libm, "cos") != NULL;
}
