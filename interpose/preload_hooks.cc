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

// Any symbol that resolves into this library is tdbg's own wrapper: never "real".
bool is_own(void* function) {
  if (function == nullptr) return false;
  Dl_info mine, theirs;
  if (dladdr(reinterpret_cast<void*>(&is_own), &mine) == 0) return false;
  if (dladdr(function, &theirs) == 0) return false;
  return mine.dli_fbase == theirs.dli_fbase;
}

uint32_t gnu_hash(const char* name) {
  uint32_t h = 5381;
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(name); *p; ++p)
    h = h * 33 + *p;
  return h;
}

struct DefinitionSearch {
  const char* name;
  uint32_t hash;
  uintptr_t own_base;
  void* found;
};

// Looks `search->name` up in one loaded object's GNU hash table: a defined function or object
// symbol of its default version. Objects without a GNU hash table are skipped.
int search_object(struct dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<DefinitionSearch*>(data);
  if (info->dlpi_addr == search->own_base) return 0;
  const ElfW(Dyn)* dynamic = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dynamic = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (dynamic == nullptr) return 0;
  // The loader relocates these in place for most objects, not for all (the vDSO): an
  // address below the load base is still relative.
  auto absolute = [&](ElfW(Addr) p) { return p < info->dlpi_addr ? p + info->dlpi_addr : p; };
  const ElfW(Sym)* symbols = nullptr;
  const char* strings = nullptr;
  const uint32_t* gnu = nullptr;
  const ElfW(Half)* versions = nullptr;
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_SYMTAB)
      symbols = reinterpret_cast<const ElfW(Sym)*>(absolute(d->d_un.d_ptr));
    if (d->d_tag == DT_STRTAB) strings = reinterpret_cast<const char*>(absolute(d->d_un.d_ptr));
    if (d->d_tag == DT_GNU_HASH) gnu = reinterpret_cast<const uint32_t*>(absolute(d->d_un.d_ptr));
    if (d->d_tag == DT_VERSYM)
      versions = reinterpret_cast<const ElfW(Half)*>(absolute(d->d_un.d_ptr));
  }
  if (symbols == nullptr || strings == nullptr || gnu == nullptr) return 0;
  uint32_t n_buckets = gnu[0], sym_offset = gnu[1], bloom_size = gnu[2];
  if (n_buckets == 0) return 0;
  const auto* bloom = reinterpret_cast<const ElfW(Addr)*>(gnu + 4);
  const auto* buckets = reinterpret_cast<const uint32_t*>(bloom + bloom_size);
  const uint32_t* chain = buckets + n_buckets;
  uint32_t index = buckets[search->hash % n_buckets];
  if (index < sym_offset) return 0;
  for (;; ++index) {
    uint32_t entry = chain[index - sym_offset];
    const ElfW(Sym)& sym = symbols[index];
    int type = sym.st_info & 0xf;  // ELF{32,64}_ST_TYPE
    if ((entry | 1) == (search->hash | 1) && sym.st_shndx != SHN_UNDEF &&
        (type == STT_FUNC || type == STT_OBJECT) &&
        (versions == nullptr || (versions[index] & 0x8000) == 0) &&
        strcmp(strings + sym.st_name, search->name) == 0) {
      search->found = reinterpret_cast<void*>(info->dlpi_addr + sym.st_value);
      return 1;
    }
    if (entry & 1) return 0;
  }
}

void* find_definition(const char* name) {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&find_definition), &info) == 0) return nullptr;
  DefinitionSearch search{name, gnu_hash(name), 0, nullptr};
  // dlpi_addr is the load bias; for a shared object it equals dli_fbase.
  search.own_base = reinterpret_cast<uintptr_t>(info.dli_fbase);
  dl_iterate_phdr(search_object, &search);
  return search.found;
}

// Copies the next space-separated word of `list` into `out` (at most `size` - 1 characters)
// and returns where the word after it starts, or nullptr when `list` holds no more words; a
// word too long for `out` comes back empty. Written without libc's string functions on
// purpose: `lookup_next(kHook_dlsym)` runs inside AddressSanitizer's initialization (see
// `tdbg_front_resolve_dlsym` in preload_front.cc), where ASan's interceptors of `strcspn`
// and friends would call through pointers that are not set yet.
const char* next_word(const char* list, char* out, size_t size) {
  while (*list == ' ') ++list;
  if (*list == '\0') return nullptr;
  size_t n = 0;
  for (; list[n] != '\0' && list[n] != ' '; ++n)
    if (n + 1 < size) out[n] = list[n];
  out[n + 1 < size ? n : 0] = '\0';
  return list + n;
}

void* lookup_next(HookId id) {
  const HookInfo& hook = kHooks[id];
  char version[32];
  for (const char* v = next_word(hook.versions, version, sizeof(version)); v != nullptr;
       v = next_word(v, version, sizeof(version))) {
    if (version[0] == '\0') continue;
    // dlvsym and dladdr (in `is_own`) are not intercepted by the sanitizers.
    void* f = dlvsym(RTLD_NEXT, hook.name, version);
    if (f != nullptr && !is_own(f)) return f;
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
  // neither scope above, yet the host bound to us instead of it: find the definition in the
  // loaded objects' own symbol tables (no loader call, so this is safe even inside a library
  // constructor running within dlopen).
  return find_definition(hook.name);
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
#define HOOK(ret, name, params, args, versions)                      \
  extern "C" TDBG_EXPORT ret tdbg_wrap_##name params __asm__(#name); \
  extern "C" ret tdbg_wrap_##name params { return tdbg::preload::on_##name args; }
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
