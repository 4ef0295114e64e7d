// StringPool: interned texts in memory mapped for the pool (see string_pool.h for why).
#include "tracer/string_pool.h"

#include <sys/mman.h>

#include <cstring>

#include "hashing/tensor_hash.h"

namespace tdbg::tracer {
namespace {

constexpr size_t kPieceSize = size_t{1} << 20;  // virtual; pages are touched as texts arrive
constexpr size_t kFirstCapacity = 4096;         // index slots (96 KiB)

void* map_bytes(size_t size) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

struct PieceHeader {
  char* previous;
  size_t size;
};

}  // namespace

StringPool::~StringPool() {
  if (slots_) ::munmap(slots_, capacity_ * sizeof(Slot));
  for (char* piece = piece_; piece != nullptr;) {
    PieceHeader header;
    std::memcpy(&header, piece, sizeof(header));
    ::munmap(piece, header.size);
    piece = header.previous;
  }
}

const char* StringPool::store(std::string_view text) {
  if (piece_ == nullptr || piece_used_ + text.size() > piece_size_) {
    // A text longer than a quarter piece gets a piece of its own.
    const size_t size = text.size() + sizeof(PieceHeader) > kPieceSize / 4
                            ? text.size() + sizeof(PieceHeader)
                            : kPieceSize;
    auto* piece = static_cast<char*>(map_bytes(size));
    if (piece == nullptr) return nullptr;
    const PieceHeader header{piece_, size};
    std::memcpy(piece, &header, sizeof(header));
    piece_ = piece;
    piece_used_ = sizeof(PieceHeader);
    piece_size_ = size;
  }
  char* copy = piece_ + piece_used_;
  if (!text.empty()) std::memcpy(copy, text.data(), text.size());
  piece_used_ += text.size();
  return copy;
}

bool StringPool::grow_index() {
  const size_t capacity = capacity_ ? capacity_ * 2 : kFirstCapacity;
  auto* slots = static_cast<Slot*>(map_bytes(capacity * sizeof(Slot)));  // zeroed: all empty
  if (slots == nullptr) return false;
  for (size_t i = 0; i < capacity_; ++i) {
    if (slots_[i].data == nullptr) continue;
    size_t j = slots_[i].hash & (capacity - 1);
    while (slots[j].data != nullptr) j = (j + 1) & (capacity - 1);
    slots[j] = slots_[i];
  }
  if (slots_) ::munmap(slots_, capacity_ * sizeof(Slot));
  slots_ = slots;
  capacity_ = capacity;
  return true;
}

uint32_t StringPool::intern(std::string_view text, std::string_view* stored, bool* added) {
  *added = false;
  if (text.size() > UINT32_MAX) return 0;
  if ((count_ + 1) * size_t{2} > capacity_ && !grow_index()) return 0;
  const uint64_t hash = hashing::hash_bytes(text.data(), text.size());
  size_t i = hash & (capacity_ - 1);
  for (; slots_[i].data != nullptr; i = (i + 1) & (capacity_ - 1)) {
    const Slot& s = slots_[i];
    if (s.hash == hash && s.size == text.size() && std::memcmp(s.data, text.data(), s.size) == 0) {
      *stored = std::string_view(s.data, s.size);
      return s.id;
    }
  }
  const char* copy = store(text);
  if (copy == nullptr) return 0;
  slots_[i] = Slot{hash, copy, static_cast<uint32_t>(text.size()), ++count_};
  *stored = std::string_view(copy, text.size());
  *added = true;
  return count_;
}

}  // namespace tdbg::tracer
