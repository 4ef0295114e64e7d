// Reads a binary's GNU build-id and load address from its ELF headers, with every offset
// checked: the recorder runs this inside the user's process and `tdbg` on whatever file now
// sits at a recorded path.
#include "base/elf_identity.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <vector>

namespace tdbg {
namespace {

// The bytes of an image, from memory or from a file (`pread`: a file truncated while it is read
// gives a short read, where a mapping would give SIGBUS). Headers are copied out: in a damaged
// file they need not be aligned.
class Image {
 public:
  Image(const void* data, size_t size) : data_(static_cast<const unsigned char*>(data)), size_(size) {}
  Image(int fd, size_t size) : fd_(fd), size_(size) {}
  bool fits(uint64_t offset, uint64_t length) const {
    return offset <= size_ && length <= size_ - offset;
  }
  bool read(uint64_t offset, uint64_t length, void* out) const {
    if (!fits(offset, length)) return false;
    if (data_ != nullptr) {
      std::memcpy(out, data_ + offset, length);
      return true;
    }
    auto* to = static_cast<char*>(out);
    while (length > 0) {
      const ssize_t n = pread(fd_, to, length, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      to += n;
      offset += static_cast<uint64_t>(n);
      length -= static_cast<uint64_t>(n);
    }
    return true;
  }
  template <typename T>
  bool read(uint64_t offset, T* out) const {
    return read(offset, sizeof(T), out);
  }

 private:
  const unsigned char* data_ = nullptr;
  int fd_ = -1;
  size_t size_;
};

// The build-id among the notes in `image[offset, offset + length)`.
std::string build_id_in_notes(const Image& image, uint64_t offset, uint64_t length, uint64_t align) {
  // Note sections are a few hundred bytes; a huge one is damage, not notes.
  constexpr uint64_t kMaxNotes = uint64_t{1} << 20;
  if (length > kMaxNotes || !image.fits(offset, length)) return "";
  std::string notes(length, '\0');
  if (!image.read(offset, length, notes.data())) return "";
  return gnu_build_id(notes.data(), notes.size(), align);
}

StatusOr<ElfIdentity> read_identity(const Image& image, const std::string& name) {
  Elf64_Ehdr eh;
  if (!image.read(0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return Status::Error(name + ": not an ELF file");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return Status::Error(name + ": not a 64-bit little-endian ELF file");
  // Program headers: the load address, and the notes of a file without section headers.
  if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
      !image.fits(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr)))
    return Status::Error(name + ": damaged ELF file (no readable program headers)");
  std::vector<Elf64_Phdr> segments(eh.e_phnum);
  if (!image.read(eh.e_phoff, segments.size() * sizeof(Elf64_Phdr), segments.data()))
    return Status::Error(name + ": damaged ELF file (no readable program headers)");
  ElfIdentity id;
  uint64_t lowest = std::numeric_limits<uint64_t>::max();
  for (const Elf64_Phdr& ph : segments) {
    // The loader maps each segment from its page: glibc's `l_map_start` is the lowest one.
    if (ph.p_type == PT_LOAD) lowest = std::min<uint64_t>(lowest, ph.p_vaddr & ~uint64_t{0xfff});
  }
  if (lowest == std::numeric_limits<uint64_t>::max())
    return Status::Error(name + ": ELF file with nothing to load (no PT_LOAD segment)");
  id.load_address = lowest;
  if (eh.e_shnum > 0 && eh.e_shentsize == sizeof(Elf64_Shdr) &&
      image.fits(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr))) {
    for (unsigned k = 0; k < eh.e_shnum && id.build_id.empty(); ++k) {
      Elf64_Shdr sh;
      if (!image.read(eh.e_shoff + uint64_t{k} * sizeof(Elf64_Shdr), &sh)) break;
      if (sh.sh_type == SHT_NOTE)
        id.build_id = build_id_in_notes(image, sh.sh_offset, sh.sh_size, sh.sh_addralign);
    }
  }
  for (const Elf64_Phdr& ph : segments) {
    if (!id.build_id.empty()) break;
    if (ph.p_type == PT_NOTE) id.build_id = build_id_in_notes(image, ph.p_offset, ph.p_filesz, ph.p_align);
  }
  return id;
}

}  // namespace

std::string gnu_build_id(const void* data, size_t size, uint64_t align) {
  const auto* notes = static_cast<const unsigned char*>(data);
  const uint64_t mask = (align == 8 ? 8 : 4) - 1;
  auto padded = [mask](uint64_t n) { return (n + mask) & ~mask; };
  uint64_t at = 0;
  while (size - at >= sizeof(Elf64_Nhdr)) {
    Elf64_Nhdr note;
    std::memcpy(&note, notes + at, sizeof(note));
    const uint64_t name_at = at + sizeof(Elf64_Nhdr);
    // As readelf: the descriptor starts at the next aligned offset after the name (for 8-byte
    // alignment, right after a 4-byte name). 32-bit sizes: no overflow.
    const uint64_t desc_at = padded(name_at + note.n_namesz);
    if (desc_at > size || note.n_descsz > size - desc_at) return "";  // runs past the notes
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
        std::memcmp(notes + name_at, "GNU", 4) == 0 && note.n_descsz > 0) {
      static const char kHex[] = "0123456789abcdef";
      std::string hex;
      hex.reserve(2 * note.n_descsz);
      for (uint64_t i = 0; i < note.n_descsz; ++i) {
        hex += kHex[notes[desc_at + i] >> 4];
        hex += kHex[notes[desc_at + i] & 15];
      }
      return hex;
    }
    at = padded(desc_at + note.n_descsz);
    if (at > size) return "";
  }
  return "";
}

StatusOr<ElfIdentity> read_elf_identity(const void* data, size_t size, const std::string& name) {
  return read_identity(Image(data, size), name);
}

StatusOr<ElfIdentity> read_elf_identity_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error(path + ": " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return Status::Error(path + ": not a regular file");
  }
  StatusOr<ElfIdentity> id = read_identity(Image(fd, static_cast<size_t>(st.st_size)), path);
  close(fd);
  return id;
}

}  // namespace tdbg
