// Generates, from interpose/hooks.inc, the exported wrappers of libtdbg_preload.so and the
// table that resolves each one's real function once.
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include <atomic>

#include "interpose/preload.h"

namespace tdbg::preload {
namespace {

struct HookInfo {
  const char* name;
  const char* versions;  // space-separated symbol versions to try with dlvsym
};

constexpr HookInfo kHooks[kHookCount] = {
#define HOOK(ret, name, params, args, versions) {#name, versions},
#define HOOK_FRONT HOOK
#include "interpose/hooks.inc"
#undef HOOK
#undef HOOK_FRONT
};

std::atomic<void*> g_real[kHookCount];

}  // namespace

__attribute__((tls_model("initial-exec"))) thread_local void* t_hook_caller = nullptr;

namespace {

// Any symbol that resolves into this library is tdbg's own wrapper: never "real".
bool is_own(void* function) {
  if (function == nullptr) return false;
  Dl_info mine, theirs;
  if (dladdr(reinterpret_cast<void*>(&is_own), &mine) == 0) return false;
  if (dladdr(function, &theirs) == 0) return false;
  return mine.dli_fbase == theirs.dli_fbase;
}

void* lookup_next(HookId id) {
  const HookInfo& hook = kHooks[id];
  const char* v = hook.versions;
  char version[32];
  while (*v != '\0') {
    while (*v == ' ') ++v;
    size_t n = strcspn(v, " ");
    if (n == 0) break;
    if (n < sizeof(version)) {
      memcpy(version, v, n);
      version[n] = '\0';
      void* f = dlvsym(RTLD_NEXT, hook.name, version);
      if (f != nullptr && !is_own(f)) return f;
    }
    v += n;
  }
  // dlsym is itself interposed; its real definition comes from the versioned lookups above.
  if (id == kHook_dlsym) return nullptr;
  auto real_dlsym = reinterpret_cast<void* (*)(void*, const char*)>(resolve_real(kHook_dlsym));
  if (real_dlsym == nullptr) return nullptr;
  void* f = real_dlsym(RTLD_NEXT, hook.name);
  if (f != nullptr && !is_own(f)) return f;
  f = real_dlsym(RTLD_DEFAULT, hook.name);
  if (f != nullptr && !is_own(f)) return f;
  // A library opened with RTLD_LOCAL (libcudart under torch's extension module) is in
  // neither scope above, yet the host bound to us instead of it. Look where the caller
  // looks: its own dependency scope, whose root is the caller's link map.
  Dl_info info;
  struct link_map* caller_map = nullptr;
  if (t_hook_caller != nullptr &&
      dladdr1(t_hook_caller, &info, reinterpret_cast<void**>(&caller_map), RTLD_DL_LINKMAP) != 0 &&
      caller_map != nullptr) {
    f = real_dlsym(caller_map, hook.name);
    if (f != nullptr && !is_own(f)) return f;
  }
  // Last resort: any loaded object that defines it (a link map is a valid dlsym handle).
  struct link_map* own_map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&is_own), &info, reinterpret_cast<void**>(&own_map),
              RTLD_DL_LINKMAP) != 0 && own_map != nullptr) {
    struct link_map* map = own_map;
    while (map->l_prev != nullptr) map = map->l_prev;
    for (; map != nullptr; map = map->l_next) {
      if (map == own_map) continue;
      f = real_dlsym(map, hook.name);
      if (f != nullptr && !is_own(f)) return f;
    }
  }
  return nullptr;
}

}  // namespace

void* resolve_real(HookId id) {
  void* f = g_real[id].load(std::memory_order_acquire);
  if (f != nullptr) return f;
  f = lookup_next(id);
  // Concurrent resolutions find the same function; the first store wins, later ones agree.
  if (f != nullptr) g_real[id].store(f, std::memory_order_release);
  return f;
}

bool remember_real(HookId id, void* function) {
  if (function == nullptr || is_own(function)) return false;
  void* expected = nullptr;
  if (g_real[id].compare_exchange_strong(expected, function, std::memory_order_acq_rel))
    return true;
  // Already known: wrap only if it is the same function, never redirect to another one.
  return expected == function;
}

HookId hook_by_name(const char* name) {
  for (int i = 0; i < kHookCount; ++i)
    if (strcmp(kHooks[i].name, name) == 0) return static_cast<HookId>(i);
  return kHookCount;
}

}  // namespace tdbg::preload

// The exported wrappers. Their C++ names are `tdbg_wrap_<name>`; the asm label gives each
// its exported name without touching CUDA's macros of the same names.
#define TDBG_EXPORT __attribute__((visibility("default")))
#define HOOK(ret, name, params, args, versions)                               \
  extern "C" TDBG_EXPORT ret tdbg_wrap_##name params __asm__(#name);          \
  extern "C" ret tdbg_wrap_##name params {                                    \
    tdbg::preload::t_hook_caller = __builtin_return_address(0);               \
    return tdbg::preload::on_##name args;                                     \
  }
#define HOOK_FRONT(ret, name, params, args, versions) \
  extern "C" TDBG_EXPORT ret tdbg_wrap_##name params __asm__(#name);
#include "interpose/hooks.inc"
#undef HOOK
#undef HOOK_FRONT

namespace tdbg::preload {

void* wrapper_of(HookId id) {
  static void* const kWrappers[kHookCount] = {
#define HOOK(ret, name, params, args, versions) reinterpret_cast<void*>(&tdbg_wrap_##name),
#define HOOK_FRONT HOOK
#include "interpose/hooks.inc"
#undef HOOK
#undef HOOK_FRONT
  };
  return kWrappers[id];
}

}  // namespace tdbg::preload
