// The writer's interned strings (the run database's `strings` table): each distinct text once,
// with its id, kept in memory that the pool maps for itself instead of malloc's heap.
//
// Why not `std::unordered_map<std::string, StringId>`: the recorded program's own threads intern,
// and new texts arrive for as long as the run lasts (argument values: slice bounds, a scheduled
// learning rate, the loss read back by `.item()`). Every map node and string they allocated came
// from the arena of the program's thread, placed between its tensor buffers, where it kept the
// freed buffers around it from merging. glibc then grew the heap for the next buffer: a recorded
// transformer LM's heap grew about 0.6 MB per step without bound (docs/BENCHMARKS.md). The pool
// takes its memory from mmap in large pieces, so it never splits the program's heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tdbg::tracer {

class StringPool {
 public:
  StringPool() = default;
  ~StringPool();
  StringPool(const StringPool&) = delete;
  StringPool& operator=(const StringPool&) = delete;

  // The id of `text`: 1, 2, ... in order of first appearance. `*added` says whether the text is
  // new; `*stored` views the pool's copy, valid for the pool's lifetime. Returns 0 when no
  // memory could be mapped (the caller records the text as missing rather than failing).
  uint32_t intern(std::string_view text, std::string_view* stored, bool* added);

  // Distinct texts interned.
  uint32_t size() const { return count_; }

 private:
  struct Slot {
    uint64_t hash;
    const char* data;  // nullptr: empty slot
    uint32_t size;
    uint32_t id;
  };
  const char* store(std::string_view text);
  bool grow_index();

  Slot* slots_ = nullptr;  // open addressing, linear probing; capacity_ a power of two
  size_t capacity_ = 0;
  uint32_t count_ = 0;
  // Text storage: mapped pieces, each starting with a link to the previous one.
  char* piece_ = nullptr;
  size_t piece_used_ = 0;
  size_t piece_size_ = 0;
};

}  // namespace tdbg::tracer
