// Sequence alignment of op signatures (Myers' O(ND) difference algorithm) for the diff engine:
// which ops one run inserted, removed or replaced relative to the other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace tdbg::diff {

// One change between sequences `a` and `b`: `a[a_begin, a_end)` was replaced by
// `b[b_begin, b_end)`. An empty range on one side makes it a pure insertion or removal.
struct Hunk {
  int64_t a_begin = 0, a_end = 0;
  int64_t b_begin = 0, b_end = 0;
};

// The shortest edit script from `a` to `b` as hunks in order, or nullopt when it needs more
// than `max_edits` insertions plus removals. Memory is O(max_edits^2) in the worst case, so
// callers bound `max_edits` (the engine aligns a bounded window after the split point, never
// the whole run).
std::optional<std::vector<Hunk>> shortest_edit_script(const uint64_t* a, size_t n,
                                                      const uint64_t* b, size_t m,
                                                      int max_edits);

// The shortest edit script from all of `b` to a prefix of `a`, of any length: `a`'s ops after
// that prefix cost nothing and are in no hunk. For a run that ended early (`b`), whose ops
// are the start of what it would have run. `*a_used` receives the prefix's length.
std::optional<std::vector<Hunk>> edit_script_to_prefix(const uint64_t* a, size_t n,
                                                       const uint64_t* b, size_t m,
                                                       int max_edits, int64_t* a_used);

// The shortest edit script where the ops after a prefix of `a` (where `a_tail_free`) or of `b`
// (where `b_tail_free`) cost nothing: windows cut from longer sequences, whose last ops
// pair with ops past the other window's end. It ends where one sequence is used up, the
// other free; of the ends as short, the one that pairs the most. `*a_used` and `*b_used`
// receive the prefixes' lengths.
std::optional<std::vector<Hunk>> edit_script_free_tails(const uint64_t* a, size_t n,
                                                        const uint64_t* b, size_t m,
                                                        int max_edits, bool a_tail_free,
                                                        bool b_tail_free, int64_t* a_used,
                                                        int64_t* b_used);

}  // namespace tdbg::diff
