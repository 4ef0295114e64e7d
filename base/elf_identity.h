// What identifies a native binary across runs and where its code sits: the GNU build-id and
// the address its offsets count from. The recorder writes the build-id of each binary its C++
// frames are in; `tdbg` checks it before it reads source lines from the binary on disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace tdbg {

struct ElfIdentity {
  // The GNU build-id (note `NT_GNU_BUILD_ID`, owner "GNU") in lowercase hex; empty when the
  // binary has none (linked with `--build-id=none`).
  std::string build_id;
  // The lowest page-aligned virtual address of its loadable segments: where the dynamic loader
  // puts the binary's "load address" (`dladdr`'s `dli_fbase`). An offset from that address,
  // plus this, is the address in the file's own terms, the one `addr2line` takes: 0 for a
  // shared library or a PIE executable, 0x400000 for a typical non-PIE x86-64 executable.
  uint64_t load_address = 0;
};

// Reads the identity of the 64-bit little-endian ELF image `image[0..size)` (a whole file in
// memory). The build-id is taken from the first `SHT_NOTE` section that holds one, else
// from the `PT_NOTE` segments. Every offset and length is checked against `size`: a truncated,
// damaged or foreign image is an error naming `name`, never a read out of bounds.
StatusOr<ElfIdentity> read_elf_identity(const void* image, size_t size, const std::string& name);

// The same for the file at `path`, read with `pread` (only its headers and notes).
StatusOr<ElfIdentity> read_elf_identity_file(const std::string& path);

// The GNU build-id among the ELF notes `notes[0..size)` (a `SHT_NOTE` section or a `PT_NOTE`
// segment, in a file or loaded in memory), whose entries are aligned to `align` (4, or 8 as in
// some `PT_NOTE` segments), in lowercase hex; empty when there is none or the notes are damaged.
std::string gnu_build_id(const void* notes, size_t size, uint64_t align);

}  // namespace tdbg
