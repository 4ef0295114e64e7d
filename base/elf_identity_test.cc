// Tests of base/elf_identity.h: the build-id and load address of real and made-up ELF images,
// and that damaged images are errors, never reads out of bounds (run under ASan too).
#include "base/elf_identity.h"

#include <elf.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace {

std::vector<unsigned char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
}

// `readelf -n`'s "Build ID: ..." of `path`, or "" when readelf is not there.
std::string readelf_build_id(const std::string& path) {
  FILE* p = popen(("readelf -n '" + path + "' 2>/dev/null").c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  const size_t at = out.find("Build ID: ");
  if (at == std::string::npos) return "";
  const size_t from = at + 10;
  return out.substr(from, out.find('\n', from) - from);
}

void put(std::vector<unsigned char>& image, size_t offset, const void* data, size_t size) {
  if (image.size() < offset + size) image.resize(offset + size);
  std::memcpy(image.data() + offset, data, size);
}

// A non-PIE executable without section headers: a PT_LOAD at 0x400000 and a PT_NOTE (aligned
// to `align`) holding an ABI note, then the build-id de ad be ef.
std::vector<unsigned char> made_up_executable(uint64_t align) {
  std::vector<unsigned char> image;
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_type = ET_EXEC;
  eh.e_phoff = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 2;
  put(image, 0, &eh, sizeof(eh));
  std::vector<unsigned char> notes;
  auto note = [&](uint32_t type, const char* name, uint32_t namesz, const std::vector<unsigned char>& desc) {
    Elf64_Nhdr h{namesz, static_cast<uint32_t>(desc.size()), type};
    put(notes, notes.size(), &h, sizeof(h));
    const size_t name_at = notes.size();
    put(notes, name_at, name, namesz);
    notes.resize((notes.size() + align - 1) / align * align);
    put(notes, notes.size(), desc.data(), desc.size());
    notes.resize((notes.size() + align - 1) / align * align);
  };
  note(NT_GNU_ABI_TAG, "GNU", 4, {0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0});
  note(NT_GNU_BUILD_ID, "GNU", 4, {0xde, 0xad, 0xbe, 0xef});
  const size_t notes_at = 0x200;
  Elf64_Phdr load{};
  load.p_type = PT_LOAD;
  load.p_vaddr = 0x400000;
  load.p_filesz = load.p_memsz = 0x1000;
  Elf64_Phdr note_segment{};
  note_segment.p_type = PT_NOTE;
  note_segment.p_offset = notes_at;
  note_segment.p_vaddr = 0x400000 + notes_at;
  note_segment.p_filesz = note_segment.p_memsz = notes.size();
  note_segment.p_align = align;
  put(image, eh.e_phoff, &load, sizeof(load));
  put(image, eh.e_phoff + sizeof(Elf64_Phdr), &note_segment, sizeof(note_segment));
  put(image, notes_at, notes.data(), notes.size());
  return image;
}

}  // namespace

std::string self_path() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "/proc/self/exe";
}

TEST_CASE("elf identity of this test's own executable: readelf's build-id, loaded at 0") {
  auto id = tdbg::read_elf_identity_file("/proc/self/exe");
  REQUIRE(id.ok());
  CHECK(id->build_id.size() >= 16);
  CHECK(id->build_id.find_first_not_of("0123456789abcdef") == std::string::npos);
  const std::string readelf = readelf_build_id(self_path());  // readelf's /proc/self is its own
  if (!readelf.empty()) CHECK(id->build_id == readelf);
  CHECK(id->load_address == 0);  // a PIE executable (Debian's default)
  const auto bytes = file_bytes("/proc/self/exe");
  auto same = tdbg::read_elf_identity(bytes.data(), bytes.size(), "self");
  REQUIRE(same.ok());
  CHECK(same->build_id == id->build_id);
}

TEST_CASE("elf identity from PT_NOTE segments of a non-PIE executable without sections") {
  for (uint64_t align : {4, 8}) {
    const auto image = made_up_executable(align);
    auto id = tdbg::read_elf_identity(image.data(), image.size(), "made-up");
    REQUIRE(id.ok());
    CHECK(id->build_id == "deadbeef");
    CHECK(id->load_address == 0x400000);
  }
}

TEST_CASE("elf identity errors are one line naming the file") {
  auto missing = tdbg::read_elf_identity_file("/nonexistent/tdbg-binary");
  REQUIRE(!missing.ok());
  CHECK(missing.status().message() == "/nonexistent/tdbg-binary: No such file or directory");
  const std::string text = "#!/bin/sh\necho not an ELF file, but long enough to hold a header\n";
  auto script = tdbg::read_elf_identity(text.data(), text.size(), "script");
  REQUIRE(!script.ok());
  CHECK(script.status().message() == "script: not an ELF file");
  auto directory = tdbg::read_elf_identity_file("/");
  CHECK(!directory.ok());
}

TEST_CASE("elf identity of truncated and damaged images: an answer or an error, never a crash") {
  const auto self = file_bytes("/proc/self/exe");
  REQUIRE(self.size() > 4096);
  const auto made_up = made_up_executable(4);
  for (const auto* original : {&self, &made_up}) {
    // Every cut within the headers, and a few further on (the section headers sit at the end).
    for (size_t size = 0; size < std::min<size_t>(original->size(), 1200); ++size) {
      std::vector<unsigned char> cut(original->begin(), original->begin() + size);
      (void)tdbg::read_elf_identity(cut.data(), cut.size(), "cut");
    }
    for (size_t size = original->size() - std::min<size_t>(original->size(), 4096); size < original->size(); size += 7) {
      std::vector<unsigned char> cut(original->begin(), original->begin() + size);
      (void)tdbg::read_elf_identity(cut.data(), cut.size(), "cut");
    }
    // Random bytes written over the ELF header, the program headers and the notes.
    std::mt19937 random(42);
    const size_t span = std::min<size_t>(original->size(), 0x400);
    std::vector<unsigned char> damaged = *original;
    for (int trial = 0; trial < 20000; ++trial) {
      size_t at[4];
      for (size_t& k : at) {
        k = random() % span;
        damaged[k] = static_cast<unsigned char>(random());
      }
      (void)tdbg::read_elf_identity(damaged.data(), damaged.size(), "damaged");
      for (size_t k : at) damaged[k] = (*original)[k];
    }
  }
  // Notes whose sizes run past their region.
  const unsigned char huge_name[] = {0xff, 0xff, 0xff, 0xff, 4, 0, 0, 0, 3, 0, 0, 0, 'G', 'N', 'U', 0};
  CHECK(tdbg::gnu_build_id(huge_name, sizeof(huge_name), 4).empty());
  const unsigned char huge_desc[] = {4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 3, 0, 0, 0, 'G', 'N', 'U', 0};
  CHECK(tdbg::gnu_build_id(huge_desc, sizeof(huge_desc), 8).empty());
  CHECK(tdbg::gnu_build_id(huge_desc, 5, 4).empty());
}
