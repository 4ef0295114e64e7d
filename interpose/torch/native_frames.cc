// The C++ call site of an op in a program without Python: the native stack (native_stack.h), cut
// down to the program's own frames and named from the dynamic symbols or the ELF symbol table,
// with each binary's build-id in the run's meta for reading its lines later.
#include "interpose/torch/native_frames.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/cpp_names.h"
#include "base/elf_identity.h"
#include "interpose/torch/native_stack.h"
#include "interpose/torch/session.h"

namespace tdbg::torchhook {
namespace {

// Libraries whose frames are never the program's call site. The sanitizer runtimes too: in a
// sanitizer build `backtrace` itself (and allocation) is an interceptor of theirs.
bool is_runtime_library(const char* path) {
  if (!path) return true;
  const char* base = std::strrchr(path, '/');
  base = base ? base + 1 : path;
  static const char* const kSkip[] = {"libtorch", "libc10",     "libtdbg",     "libgomp",
                                      "libc.so",  "libstdc++",  "libgcc_s",    "libpthread",
                                      "libasan",  "libubsan",   "libclang_rt."};
  for (const char* s : kSkip)
    if (std::strncmp(base, s, std::strlen(s)) == 0) return true;
  return false;
}

// A file's function symbols (.symtab), sorted by address.
struct SymbolTable {
  struct Symbol {
    uint64_t start = 0, size = 0;
    std::string name;
  };
  std::vector<Symbol> symbols;
};

// Reads the STT_FUNC symbols of a 64-bit ELF file. Every offset is checked against the file's
// size: a truncated or foreign file gives an empty table, never a crash.
std::unique_ptr<SymbolTable> read_symbol_table(const std::string& path) {
  auto table = std::make_unique<SymbolTable>();
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return table;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    close(fd);
    return table;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return table;
  const char* base = static_cast<const char*>(map);
  auto fits = [&](uint64_t offset, uint64_t length) {
    return offset <= size && length <= size - offset;
  };
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
  const bool elf64 = std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 &&
                     eh->e_ident[EI_CLASS] == ELFCLASS64 && eh->e_ident[EI_DATA] == ELFDATA2LSB &&
                     eh->e_shentsize == sizeof(Elf64_Shdr) &&
                     fits(eh->e_shoff, uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr));
  if (elf64) {
    const auto* sections = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
    for (unsigned k = 0; k < eh->e_shnum; ++k) {
      const Elf64_Shdr& symtab = sections[k];
      if (symtab.sh_type != SHT_SYMTAB || symtab.sh_link >= eh->e_shnum) continue;
      const Elf64_Shdr& strtab = sections[symtab.sh_link];
      if (!fits(symtab.sh_offset, symtab.sh_size) || !fits(strtab.sh_offset, strtab.sh_size))
        continue;
      const auto* syms = reinterpret_cast<const Elf64_Sym*>(base + symtab.sh_offset);
      const size_t n = symtab.sh_size / sizeof(Elf64_Sym);
      const char* names = base + strtab.sh_offset;
      for (size_t i = 0; i < n; ++i) {
        const Elf64_Sym& s = syms[i];
        if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_value == 0 || s.st_shndx == SHN_UNDEF ||
            s.st_name >= strtab.sh_size)
          continue;
        const char* name = names + s.st_name;
        const size_t len = strnlen(name, strtab.sh_size - s.st_name);
        if (len == 0 || len == strtab.sh_size - s.st_name) continue;  // empty or unterminated
        table->symbols.push_back({s.st_value, s.st_size, std::string(name, len)});
      }
    }
  }
  munmap(map, size);
  std::sort(table->symbols.begin(), table->symbols.end(),
            [](const SymbolTable::Symbol& a, const SymbolTable::Symbol& b) { return a.start < b.start; });
  return table;
}

std::mutex g_symbols_mutex;  // guards g_symbol_tables
std::unordered_map<std::string, std::unique_ptr<SymbolTable>> g_symbol_tables;

// What a return address resolves to; kept for the life of the process (code does not move
// while it is mapped).
struct Address {
  bool program = false;  // in the program's own code: a candidate frame
  bool library_namespace = false;  // ... but in a function of torch's or std's namespaces
  std::string file;
  std::string function;  // "NAME +0xOFFSET", "? +0xOFFSET" without a symbol
};

// Native call sites; guarded by `g_native_mutex`.
std::mutex g_native_mutex;
std::unordered_map<void*, Address> g_addresses;
std::unordered_map<void*, tracer::FrameId> g_native_frames;  // by (address, parent)
uint64_t g_native_generation = 0;
// The GNU build-id of each binary with program frames ("" when it has none), read once per
// process; and the binaries whose build-id the current writer has been given (meta
// `build_id:<path>`), so that a fork child's database gets them too.
std::unordered_map<std::string, std::string> g_build_ids;
std::unordered_set<std::string> g_build_ids_written;

// The build-id of the loaded object whose code holds `address`, from its notes in memory: the
// binary that runs, even when the file at its path was rebuilt after it was loaded. A note
// segment is read only where a loaded segment covers it.
std::string loaded_build_id(const void* address) {
  struct Search {
    uintptr_t address;
    std::string build_id;
  } search{reinterpret_cast<uintptr_t>(address), {}};
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        auto loaded = [info](uintptr_t from, uint64_t size) {
          for (int k = 0; k < info->dlpi_phnum; ++k) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[k];
            const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
            if (ph.p_type == PT_LOAD && from >= start && size <= ph.p_memsz &&
                from - start <= ph.p_memsz - size)
              return true;
          }
          return false;
        };
        if (!loaded(s->address, 1)) return 0;  // not this object
        for (int k = 0; k < info->dlpi_phnum && s->build_id.empty(); ++k) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[k];
          const uintptr_t notes = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type == PT_NOTE && loaded(notes, ph.p_memsz))
            s->build_id = gnu_build_id(reinterpret_cast<const void*>(notes), ph.p_memsz, ph.p_align);
        }
        return 1;
      },
      &search);
  return search.build_id;
}

// The main executable's path, absolute (dladdr names it as it was started, maybe relative).
const std::string& executable_path() {
  static const std::string path = [] {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }();
  return path;
}

// The load address of the main executable (its ELF header), or nullptr.
void* executable_base() {
  static void* base = [] {
    Dl_info info;
    const auto phdr = getauxval(AT_PHDR);
    return phdr && dladdr(reinterpret_cast<void*>(phdr), &info) ? info.dli_fbase : nullptr;
  }();
  return base;
}

std::string demangle(const std::string& name) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && demangled ? demangled : name;
  std::free(demangled);
  return out;
}

Address resolve(void* return_address) {
  Address a;
  // A return address points after its call: one byte back is inside the call itself, so the
  // function and `addr2line` name the calling line (and a call that ends a function is not
  // taken for the next one).
  void* call = static_cast<char*>(return_address) - 1;
  Dl_info info;
  if (!dladdr(call, &info) || is_runtime_library(info.dli_fname)) return a;
  a.program = true;
  const bool executable = info.dli_fbase != nullptr && info.dli_fbase == executable_base();
  a.file = executable && !executable_path().empty() ? executable_path()
                                                    : (info.dli_fname ? info.dli_fname : "?");
  if (g_build_ids.find(a.file) == g_build_ids.end()) g_build_ids.emplace(a.file, loaded_build_id(call));
  const uint64_t offset =
      static_cast<uint64_t>(static_cast<char*>(call) - static_cast<char*>(info.dli_fbase));
  // The symbol table first: without -rdynamic, the nearest dynamic symbol dladdr finds is
  // some other function. A non-PIE executable's symbols hold absolute addresses.
  const bool absolute = [&] {
    const auto* eh = static_cast<const Elf64_Ehdr*>(info.dli_fbase);
    return eh != nullptr && eh->e_type == ET_EXEC;
  }();
  std::string name = symbol_table_function(a.file, absolute ? reinterpret_cast<uintptr_t>(call) : offset);
  if (name.empty() && info.dli_sname) name = info.dli_sname;
  if (name == "_start") {  // the C runtime's entry, linked into the program
    a.program = false;
    return a;
  }
  std::string function = name.empty() ? "?" : demangle(name);
  a.library_namespace = !name.empty() && in_library_namespace(function);
  char text[32];
  std::snprintf(text, sizeof(text), " +0x%llx", static_cast<unsigned long long>(offset));
  a.function = function + text;
  return a;
}

}  // namespace

std::string symbol_table_function(const std::string& path, uint64_t offset) {
  std::lock_guard<std::mutex> lock(g_symbols_mutex);
  auto it = g_symbol_tables.find(path);
  if (it == g_symbol_tables.end()) it = g_symbol_tables.emplace(path, read_symbol_table(path)).first;
  const auto& symbols = it->second->symbols;
  auto after = std::upper_bound(symbols.begin(), symbols.end(), offset,
                                [](uint64_t v, const SymbolTable::Symbol& s) { return v < s.start; });
  if (after == symbols.begin()) return "";
  // The nearest symbol at or before `offset` that covers it (aliases share a start).
  const uint64_t start = (after - 1)->start;
  for (auto s = after; s != symbols.begin() && (s - 1)->start == start;) {
    --s;
    if (offset < s->start + std::max<uint64_t>(s->size, 1)) return s->name;
  }
  return "";
}

SourceLocation capture_native_call_site() {
  SourceLocation loc;
  constexpr int kMaxNativeFrames = 8;  // frames of the program's own code kept
  void* addresses[64];
  const int n = native_backtrace(addresses, 64);
  tracer::Writer* w = writer();
  if (!w || n <= 0) return loc;
  std::lock_guard<std::mutex> lock(g_native_mutex);
  // The program's frames, innermost first; torch's templates in the program's binary only
  // where nothing else is there (an op run from torch's own thread).
  void* kept[kMaxNativeFrames];
  void* templates[kMaxNativeFrames];
  int count = 0, template_count = 0;
  for (int i = 0; i < n && count < kMaxNativeFrames; ++i) {
    auto it = g_addresses.find(addresses[i]);
    if (it == g_addresses.end()) it = g_addresses.emplace(addresses[i], resolve(addresses[i])).first;
    const Address& a = it->second;
    if (!a.program) continue;
    if (!a.library_namespace)
      kept[count++] = addresses[i];
    else if (template_count < kMaxNativeFrames)
      templates[template_count++] = addresses[i];
  }
  if (count == 0) {
    std::copy(templates, templates + template_count, kept);
    count = template_count;
  }
  if (count == 0) return loc;
  uint64_t gen = writer_generation();
  if (g_native_generation != gen) {
    g_native_frames.clear();
    g_build_ids_written.clear();
    g_native_generation = gen;
  }
  // Interned outermost first, keyed by (address, parent) so that one address reached from
  // different callers gets different frames.
  tracer::FrameId parent = 0;
  for (int i = count - 1; i >= 0; --i) {
    void* key = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(kept[i]) ^
                                        (uintptr_t(parent) << 48));
    auto it = g_native_frames.find(key);
    if (it == g_native_frames.end()) {
      const Address& a = g_addresses.at(kept[i]);
      tracer::FrameId id = w->intern_frame(parent, w->intern(a.file), 0, w->intern(a.function));
      it = g_native_frames.emplace(key, id).first;
      // What `tdbg` checks before it reads this binary's source lines: that the file at the
      // path is still the binary that ran. `set_meta` is a short append under the writer's
      // lock, from any thread; once per binary and database.
      if (g_build_ids_written.insert(a.file).second) {
        const std::string& build_id = g_build_ids[a.file];
        if (!build_id.empty() && !a.file.empty() && a.file[0] == '/')
          w->set_meta("build_id:" + a.file, build_id);
      }
    }
    parent = it->second;
  }
  loc.stack = loc.user_frame = parent;
  return loc;
}

void native_frames_after_fork_child() {
  new (&g_native_mutex) std::mutex();
  new (&g_symbols_mutex) std::mutex();
  native_stack_after_fork_child();
}

}  // namespace tdbg::torchhook
