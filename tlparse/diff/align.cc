// Myers' greedy O((N+M)D) shortest edit script, with the per-round frontier kept so that the
// path can be walked back into hunks.
#include "tlparse/diff/align.h"

#include <algorithm>

namespace tdbg::diff {
namespace {

// Among scripts of the same length, the one with fewer hunks: the matched ops between two
// hunks slide past the second one when they repeat on the side it consumes, and the hunks
// become one. A block that one run inserts (the forward that activation checkpointing
// recomputes, `linear t addmm ... t`) then stays whole, and an op replaced by another (Adam's
// `add` of the weight decay for AdamW's `mul_`) is one replacement: the ops after it pair with
// their real counterparts, not with a look-alike (`mul_` of the parameter against `mul_` of
// the moment). Keeps the edit count, so the script stays minimal.
std::vector<Hunk> merge_slid(std::vector<Hunk> hunks, const uint64_t* a, const uint64_t* b) {
  std::vector<Hunk> out;
  for (const Hunk& h : hunks) {
    const int64_t len_a = h.a_end - h.a_begin, len_b = h.b_end - h.b_begin;
    if (!out.empty() && (len_a == 0 || len_b == 0)) {
      Hunk& prev = out.back();
      // The gap slides by the second hunk's length, on its side.
      const bool insertion = len_a == 0;
      const uint64_t* side = insertion ? b : a;
      const int64_t gap_begin = insertion ? prev.b_end : prev.a_end;
      const int64_t gap = h.a_begin - prev.a_end;
      const int64_t shift = insertion ? len_b : len_a;
      bool slides = true;
      for (int64_t t = 0; t < gap && slides; ++t)
        slides = side[gap_begin + t] == side[gap_begin + shift + t];
      if (slides) {
        prev.a_end += len_a;
        prev.b_end += len_b;
        continue;
      }
    }
    out.push_back(h);
  }
  return out;
}

}  // namespace

std::optional<std::vector<Hunk>> edit_script_free_tails(const uint64_t* a, size_t n,
                                                        const uint64_t* b, size_t m,
                                                        int max_edits, bool a_tail_free,
                                                        bool b_tail_free, int64_t* a_used,
                                                        int64_t* b_used) {
  const int64_t N = static_cast<int64_t>(n), M = static_cast<int64_t>(m);
  const int64_t max_d = std::min<int64_t>(max_edits, N + M);
  if (max_d < 0) return std::nullopt;
  // `v[k + offset]` is the furthest x reached on diagonal k = x - y. Diagonals -d-1..d+1 are
  // touched in round d.
  const int64_t offset = max_d + 1;
  std::vector<int64_t> v(static_cast<size_t>(2 * max_d + 3), 0);
  // Round d's frontier, v[-d-1 .. d+1] as it was before round d (what the walk back needs),
  // is `frontiers[d * d + 2 * d ...]`, 2d + 3 entries: all rounds in one buffer, reused by
  // the next call on this thread (a failed search of 2048 rounds fills 4 M entries; one
  // allocation per round, zeroed pages each call, cost more than the search).
  thread_local std::vector<int32_t> frontiers;
  frontiers.clear();
  int64_t final_d = -1, end_x = N, end_y = M;
  for (int64_t d = 0; d <= max_d && final_d < 0; ++d) {
    frontiers.insert(frontiers.end(), v.begin() + (offset - d - 1), v.begin() + (offset + d + 2));
    for (int64_t k = -d; k <= d; k += 2) {
      int64_t x;
      if (k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1])) {
        x = v[offset + k + 1];  // step down: take b[y]
      } else {
        x = v[offset + k - 1] + 1;  // step right: drop a[x]
      }
      int64_t y = x - k;
      while (x < N && y < M && a[x] == b[y]) ++x, ++y;
      v[offset + k] = x;
      // Of the diagonals that end in this round, the one furthest along pairs the most ops
      // (pairs are (x + y - d) / 2).
      const bool ends = (x >= N && y >= M) || (y >= M && a_tail_free) || (x >= N && b_tail_free);
      if (ends && (final_d < 0 || x + y > end_x + end_y)) {
        final_d = d;
        end_x = x;
        end_y = y;
      }
    }
  }
  if (final_d < 0) return std::nullopt;

  if (a_used) *a_used = end_x;
  if (b_used) *b_used = end_y;
  // Walk back from (end_x, end_y), collecting the edit steps (x, y, is_removal) in reverse.
  struct Step { int64_t x, y; bool removal; };
  std::vector<Step> steps;
  int64_t x = end_x, y = end_y;
  for (int64_t d = final_d; d > 0; --d) {
    const int32_t* f = frontiers.data() + d * d + 2 * d;
    auto at = [&](int64_t k) -> int64_t { return f[k + d + 1]; };
    int64_t k = x - y;
    int64_t prev_k = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? k + 1 : k - 1;
    int64_t prev_x = at(prev_k);
    int64_t prev_y = prev_x - prev_k;
    // Undo the snake, then the single edit that led into it.
    while (x > prev_x && y > prev_y) --x, --y;
    if (x == prev_x) {
      steps.push_back({prev_x, prev_y, false});  // inserted b[prev_y]
    } else {
      steps.push_back({prev_x, prev_y, true});   // removed a[prev_x]
    }
    x = prev_x;
    y = prev_y;
  }
  std::reverse(steps.begin(), steps.end());

  // Adjacent edits (no match between them) form one hunk.
  std::vector<Hunk> hunks;
  for (const Step& s : steps) {
    int64_t ax = s.x, by = s.y;
    if (!hunks.empty() && hunks.back().a_end == ax && hunks.back().b_end == by) {
      if (s.removal) ++hunks.back().a_end; else ++hunks.back().b_end;
      continue;
    }
    Hunk h{ax, ax, by, by};
    if (s.removal) ++h.a_end; else ++h.b_end;
    hunks.push_back(h);
  }
  return merge_slid(std::move(hunks), a, b);
}

std::optional<std::vector<Hunk>> shortest_edit_script(const uint64_t* a, size_t n,
                                                      const uint64_t* b, size_t m,
                                                      int max_edits) {
  return edit_script_free_tails(a, n, b, m, max_edits, false, false, nullptr, nullptr);
}

std::optional<std::vector<Hunk>> edit_script_to_prefix(const uint64_t* a, size_t n,
                                                       const uint64_t* b, size_t m,
                                                       int max_edits, int64_t* a_used) {
  return edit_script_free_tails(a, n, b, m, max_edits, true, false, a_used, nullptr);
}

}  // namespace tdbg::diff
