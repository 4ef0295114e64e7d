// `compare_runs`: the first divergence between two runs. Per aligned thread pair, bisection
// over the chain hash finds the first differing op in O(log n) probes; ops are then compared
// field by field to find the innermost op that introduced the difference and its cause, and a
// streaming alignment (Myers on a bounded window) handles inserted, removed or replaced ops.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/command_line.h"
#include "base/json_text.h"
#include "interpose/config.h"
#include "tlparse/diff/align.h"
#include "tlparse/diff/diff.h"
#include "tlparse/diff/native_lines.h"
#include "tlparse/diff/ops.h"
#include "tlparse/diff/optimizer_settings.h"
#include "tlparse/diff/updates.h"

namespace tdbg::diff {
namespace {

using nlohmann::json;
using tracer::OpRecord;
using tracer::Reader;
using tracer::TensorRecord;
using tracer::TensorRole;

// A progress bar on stderr, redrawn at most ten times a second; silent when disabled.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled) {}
  ~Progress() { finish(); }
  void update(int64_t done, int64_t total, const char* what) {
    if (!enabled_ || total <= 0) return;
    auto now = std::chrono::steady_clock::now();
    if (shown_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    shown_ = true;
    int width = 30;
    int filled = static_cast<int>(width * std::min<double>(1.0, double(done) / double(total)));
    std::fprintf(stderr, "\rtdbg diff: %s [%s%s] %3d%%", what, std::string(filled, '#').c_str(),
                 std::string(width - filled, ' ').c_str(),
                 static_cast<int>(100.0 * std::min<double>(1.0, double(done) / double(total))));
    std::fflush(stderr);
  }
  void finish() {
    if (!shown_) return;
    std::fprintf(stderr, "\r%*s\r", 70, "");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_;
};

// The tidx range [begin, end) of a thread's ops (see `thread_tidx_range`).
struct TidxRange {
  int64_t begin = 0, end = 0;
};

// One side of a thread pair: the thread's ops have tidx in [begin, count). `begin` is 0 but in
// a database that keeps only part of a run (a bundle's window, a `--ring`).
struct Side {
  Side(const Reader& r, uint32_t t, TidxRange range)
      : reader(&r),
        strings(r),
        thread(t),
        count(range.end),
        begin(range.begin),
        cursor(r, strings, t, range.end, range.begin) {}
  const Reader* reader;
  Strings strings;
  uint32_t thread;
  int64_t count;
  int64_t begin;
  OpCursor cursor;
  // The step of the thread's last op (optimizer steps the thread saw end), -1 where it has
  // no op or it cannot be read. Read apart from `cursor`, whose window it would move.
  int64_t last_step() {
    if (last_step_ == kUnread) {
      last_step_ = -1;
      if (count > begin)
        (void)reader->scan_ops(thread, count - 1, count, /*with_tensors=*/false,
                               [&](const OpRecord& op) {
                                 last_step_ = op.step;
                                 return false;
                               });
    }
    return last_step_;
  }

 private:
  static constexpr int64_t kUnread = -2;
  int64_t last_step_ = kUnread;
};

bool ended_early(const Reader& r);

struct Pair {
  Pair(const Reader& ra, uint32_t ta, TidxRange na, const Reader& rb, uint32_t tb, TidxRange nb)
      : a(ra, ta, na), b(rb, tb, nb), a_cut_short(ended_early(ra)), b_cut_short(ended_early(rb)) {}
  Side a, b;
  // Each run's process ended early (`abnormal_ending`): its threads' last ops are not where
  // the program would have ended, and the alignment treats them as a prefix.
  bool a_cut_short, b_cut_short;
  // Ops that took the same inputs in another order with equal outputs (`OpComparison::
  // permuted`), met while locating: how many, and A's first (-1: none).
  int64_t permuted = 0;
  int64_t first_permuted = -1;
  // The same for ops whose arguments mean the same another way (`OpComparison::
  // args_spelled`).
  int64_t args_spelled = 0;
  int64_t first_args_spelled = -1;
  // B's tidx of the op compared with A's tidx t is t + b_offset: 0, unless rings that kept
  // other amounts of two runs line up their ops at another distance (`ring_offset`).
  int64_t b_offset = 0;
  // A's step of the iteration B counts as step s is s + step_offset: 0, unless the steps were
  // paired by hand (`DiffOptions::align_steps`: a resumed run counts from 0 again).
  int64_t step_offset = 0;
  // Two threads of a pool, which take any task at any step (three threads, four tasks: which
  // thread runs two at a step, and which runs the last task, is chance): neither one's rest
  // of a step nor its end pairs with the other's.
  bool pool = false;
  Status status() const {
    if (!a.cursor.status().ok()) return a.cursor.status();
    return b.cursor.status();
  }
};

// Makes sure ops `i` of A and `j` of B are in their windows. When either needs reading, both
// read their next batch, each on its own thread: the two databases are independent, so a
// linear comparison runs at the speed of one reader, not the sum of two. Nothing else
// touches the readers while this runs.
void read_ahead_both(Pair& p, int64_t i, int64_t j) {
  if (p.a.cursor.has(i) && p.b.cursor.has(j)) return;
  if (i >= p.a.count || j >= p.b.count) {
    if (!p.a.cursor.has(i)) p.a.cursor.read_ahead(i);
    if (!p.b.cursor.has(j)) p.b.cursor.read_ahead(j);
    return;
  }
  std::thread other([&] { p.b.cursor.read_ahead(j); });
  p.a.cursor.read_ahead(i);
  other.join();
}

// Bounds of the structural alignment: the window after a split point grows from
// `kFirstWindow` ops until the first hunk is followed by `kResyncOps` matching ops. The first
// window holds several training micro-steps: in a window barely longer than the change, the
// shortest script of the window is not the run's (a skipped backward of 55 ops, in a window of
// 64, aligned as the next micro-batch's forward inserted, then a chain of shifts).
constexpr int64_t kFirstWindow = 1024;
constexpr int64_t kMaxWindow = 1 << 16;
constexpr int kMaxEdits = 2048;
constexpr int64_t kResyncOps = 32;
// A run that ended early is aligned with a prefix of the other unless that pairs less than this
// share of the ops that aligning whole windows pairs (see `prefer_prefix_script`).
constexpr double kPrefixShare = 0.5;

// Walks two threads' ops in alignment from (i, j): pairs of ops with equal signatures, and
// hunks where one side inserted, removed or replaced ops.
class Aligner {
 public:
  struct Event {
    bool is_hunk = false;
    Hunk hunk;              // absolute tidx ranges
    int64_t i = 0, j = 0;   // a matched pair
    const OpRecord* a = nullptr;
    const OpRecord* b = nullptr;
    OpComparison cmp;
  };
  // `steps_paired`: the walk starts where steps paired by hand or by a resumption begin, not
  // where the runs' ops stopped being alike: one run may begin with start-up code the other
  // ran long before (building and loading a model), which a window's shortest script pairs
  // with look-alikes of the other's training.
  Aligner(Pair& p, int64_t i, int64_t j, bool steps_paired = false)
      : p_(p), i_(i), j_(j), steps_paired_(steps_paired) {}
  int64_t i() const { return i_; }
  int64_t j() const { return j_; }

  // Where the ops here look alike, plans them by a window's script before any is paired (see
  // `describe`); where they differ, `align_at` does when the walk reaches them.
  void plan_here() {
    if (started_ || i_ >= p_.a.count || j_ >= p_.b.count) return;
    if (p_.a.cursor.signature_at(i_) == p_.b.cursor.signature_at(j_)) refill_cache();
  }

  // Fills `e` with the next event; false at the end of both threads or on a read error.
  bool next(Event* e) {
    Side& a = p_.a;
    Side& b = p_.b;
    a.cursor.release_before(i_ - 16);
    b.cursor.release_before(j_ - 16);
    if (i_ >= a.count && j_ >= b.count) return false;
    read_ahead_both(p_, i_, j_);
    e->is_hunk = false;
    if (i_ < a.count && j_ < b.count) {
      uint64_t sa = a.cursor.signature_at(i_), sb = b.cursor.signature_at(j_);
      const OpRecord* oa = a.cursor.at(i_);
      const OpRecord* ob = b.cursor.at(j_);
      if (!oa || !ob) return false;
      if (sa == sb && active_ && i_ >= cached_a_limit_) refill_cache();
      // The script of the last window puts a hunk here although the ops look alike: it chose
      // another copy of them (`refine_regions`), which pairing the next alike ops would undo.
      if (sa == sb && next_cached_here()) {
        const Hunk h = cached_.front();
        cached_.pop_front();
        e->is_hunk = true;
        e->hunk = h;
        i_ = h.a_end;
        j_ = h.b_end;
        started_ = true;
        return true;
      }
      if (sa == sb) {
        e->cmp = compare_ops(*oa, a.strings, *ob, b.strings);
        if (e->cmp.structure.empty()) {
          if (e->cmp.output >= 0) {
            if (std::optional<Hunk> h = closer_neighbour(*oa, *ob, sa)) {
              e->is_hunk = true;
              e->hunk = *h;
              i_ = h->a_end;
              j_ = h->b_end;
              return true;
            }
          }
          started_ = true;
          e->i = i_++;
          e->j = j_++;
          e->a = oa;
          e->b = ob;
          return true;
        }
      }
      std::optional<Hunk> h = align_at();
      if (!h) return false;
      if (!started_) slide_up_to_lines(*h);
      e->is_hunk = true;
      e->hunk = *h;
    } else {
      // One side ended: the rest of the other is one trailing insertion or removal; in a
      // pool, other tasks, which the other run's other threads ran (`Pair::pool`).
      if (p_.pool && started_) return false;
      e->is_hunk = true;
      e->hunk = Hunk{i_, a.count, j_, b.count};
    }
    i_ = e->hunk.a_end;
    j_ = e->hunk.b_end;
    started_ = true;
    return true;
  }

 private:
  // The largest summary distance between the outputs of `x` and `y` (0 where hashes agree),
  // or -1 when an output's values cannot be compared.
  static double output_distance(const OpRecord& x, const OpRecord& y) {
    double d = 0;
    for (size_t k = 0; k < x.tensors.size() && k < y.tensors.size(); ++k) {
      const TensorRecord& tx = x.tensors[k];
      const TensorRecord& ty = y.tensors[k];
      if (tx.role != TensorRole::kOutput || tx.hash == ty.hash) continue;
      if (!tensor_comparable(tx) || !tensor_comparable(ty)) return -1;
      const double s = summary_distance(tx.summary, ty.summary);
      if (s < 0) return -1;
      d = std::max(d, s);
    }
    return d;
  }

  // A's op i_ and B's op j_ have one signature and other outputs. When the op next to one of
  // them has that signature too, and pairing with it keeps the edit count (the ops after
  // pair up at once), the two alignments are equally short: the one whose outputs are much
  // closer is the one the program meant (`(h + x) + 0.3 * x` against `h + (x + 0.3 * x)`: the
  // outer sums pair, not the outer with the inner). Returns the one-op hunk that the closer
  // pairing needs first, or nothing to pair i_ with j_. Ops with nested ops are left alone.
  std::optional<Hunk> closer_neighbour(const OpRecord& oa, const OpRecord& ob, uint64_t sig) {
    Side& a = p_.a;
    Side& b = p_.b;
    const double here = output_distance(oa, ob);
    if (here <= 0) return std::nullopt;
    auto leaf = [](Side& s, int64_t t, const OpRecord& op) {
      const OpRecord* next = s.cursor.at(t + 1);
      return next == nullptr || next->depth <= op.depth;
    };
    auto closer = [&](const OpRecord& x, const OpRecord& y) {
      if (x.depth != y.depth || !compare_ops(x, a.strings, y, b.strings).structure.empty())
        return false;
      const double there = output_distance(x, y);
      return there >= 0 && there * 10 < here;
    };
    if (!leaf(a, i_, oa) || !leaf(b, j_, ob)) return std::nullopt;
    // B ran an op of this kind first: B's j_ is inserted, A's i_ pairs with B's j_ + 1.
    if (j_ + 2 < b.count && i_ + 1 < a.count) {
      const uint64_t a1 = a.cursor.signature_at(i_ + 1), b1 = b.cursor.signature_at(j_ + 1);
      if (b1 == sig && a1 != b1 && a1 == b.cursor.signature_at(j_ + 2)) {
        const OpRecord* nb = b.cursor.at(j_ + 1);
        if (nb && leaf(b, j_ + 1, *nb) && closer(oa, *nb)) return Hunk{i_, i_, j_, j_ + 1};
      }
    }
    // A ran it first: A's i_ is removed, A's i_ + 1 pairs with B's j_.
    if (i_ + 2 < a.count && j_ + 1 < b.count) {
      const uint64_t a1 = a.cursor.signature_at(i_ + 1), b1 = b.cursor.signature_at(j_ + 1);
      if (a1 == sig && a1 != b1 && b1 == a.cursor.signature_at(i_ + 2)) {
        const OpRecord* na = a.cursor.at(i_ + 1);
        if (na && leaf(a, i_ + 1, *na) && closer(*na, ob)) return Hunk{i_, i_ + 1, j_, j_};
      }
    }
    return std::nullopt;
  }

  // The module an op ran in, 0 where it has none (or cannot be read).
  uint64_t module_key(Side& s, int64_t tidx) {
    const OpRecord* op = s.cursor.at(tidx);
    return op ? module_key_of(s, *op) : 0;
  }
  static uint64_t module_key_of(Side& s, const OpRecord& op) {
    return op.module != 0 ? std::hash<std::string>{}(s.strings.text(op.module)) | 1 : 0;
  }

  // Where an op ran in the user's code, 0 where it has no line (ops autograd runs): for
  // telling apart ops of one signature that ran at other places.
  uint64_t line_key(Side& s, int64_t tidx) {
    const OpRecord* op = s.cursor.at(tidx);
    return op ? line_key_of(s, *op) : 0;
  }
  static uint64_t line_key_of(Side& s, const OpRecord& op) {
    if (op.user_frame == 0) return 0;
    // The user's line and its callers' (the same forward called from line 29 and from line
    // 30 runs the same innermost lines), and the module the op ran in (`blocks.0` called
    // twice against `blocks.1`), by file name, not path.
    uint64_t key = module_key_of(s, op) | 1;
    tracer::FrameId id = op.user_frame;
    for (int depth = 0; depth < 8 && id != 0; ++depth) {
      auto frame = s.reader->frame(id);
      if (!frame) break;
      const std::string& file = s.strings.text(frame->file);
      const size_t slash = file.rfind('/');
      const uint64_t h = std::hash<std::string>{}(slash == std::string::npos ? file : file.substr(slash + 1));
      key = (key * 0x9E3779B97F4A7C15ull) ^ h ^ static_cast<uint64_t>(frame->line);
      id = frame->parent;
    }
    return key == 0 ? 1 : key;
  }

  // In a stretch of changes, where the walk reaches the end of what the last window's script
  // is trusted for, a window from here (where the ops are alike) plans the next hunks: its
  // regions then see the ops before each hunk. A window begun only where the ops first differ
  // has already paired them, and its hunk cannot move onto the earlier copy of a block (an
  // `opt.step()` inserted before the original, in every step).
  void refill_cache() {
    active_ = false;
    cached_.clear();
    const int64_t wa = std::min(kFirstWindow, p_.a.count - i_), wb = std::min(kFirstWindow, p_.b.count - j_);
    std::vector<uint64_t> sa, sb;
    if (!window_signatures(wa, wb, &sa, &sb)) return;
    int64_t a_used = wa, b_used = wb;
    bool too_short = false;
    auto script = step_script(sa, sb, &a_used, &b_used, &too_short);
    if (!script || script->empty() || too_short) return;
    refine_regions(*script, sa, sb, a_used, b_used);
    plan(*script, 0, wa, wb);
  }

  // The signatures of A's ops [i_, i_ + wa) and B's [j_, j_ + wb); false on a read error.
  bool window_signatures(int64_t wa, int64_t wb, std::vector<uint64_t>* sa, std::vector<uint64_t>* sb) {
    sa->clear();
    sb->clear();
    for (int64_t k = 0; k < wa; ++k) sa->push_back(p_.a.cursor.signature_at(i_ + k));
    for (int64_t k = 0; k < wb; ++k) sb->push_back(p_.b.cursor.signature_at(j_ + k));
    return p_.status().ok();
  }

  // The shortest script of the window of `sa` and `sb` at (i_, j_). A window that stops
  // before its thread's end stops at an arbitrary op: what follows it is free, or the script
  // would rather pair ops early than leave the longer run's window end unpaired (runs whose
  // steps differ in length drift a step apart). Where one window is cut, the other's last ops
  // may pair past its end: both tails are free (the runs' ends are fixed only when both
  // windows reach them).
  std::optional<std::vector<Hunk>> window_script(const std::vector<uint64_t>& sa,
                                                 const std::vector<uint64_t>& sb,
                                                 int64_t* a_used, int64_t* b_used) const {
    const bool cut = i_ + static_cast<int64_t>(sa.size()) < p_.a.count ||
                     j_ + static_cast<int64_t>(sb.size()) < p_.b.count || p_.pool;
    return edit_script_free_tails(sa.data(), sa.size(), sb.data(), sb.size(), kMaxEdits, cut,
                                  cut, a_used, b_used);
  }

  // The step offset (A's step less B's) of the pairs before (i_, j_): the most common one of
  // the last 16 the cursors still hold (never read again: the caller holds pointers into their
  // windows), since where a step's first op pairs with the other's last, one pair in a step is
  // off by one; nullopt where nothing was paired before.
  std::optional<int64_t> reference_offset() {
    std::map<int64_t, int> offsets;
    for (int64_t k = 1; k <= 16 && i_ - k >= p_.a.begin && j_ - k >= p_.b.begin &&
                        p_.a.cursor.has(i_ - k) && p_.b.cursor.has(j_ - k);
         ++k) {
      const OpRecord* oa = p_.a.cursor.at(i_ - k);
      const OpRecord* ob = p_.b.cursor.at(j_ - k);
      if (!oa || !ob) break;
      ++offsets[oa->step - ob->step];
    }
    if (offsets.empty()) {
      // The walk began here (the split point, found by bisection): read the ops before it
      // apart from the cursors.
      auto steps_before = [](Side& s, int64_t at) {
        std::vector<int64_t> steps;
        const int64_t from = std::max(s.begin, at - 16);
        if (from < at)
          (void)s.reader->scan_ops(s.thread, from, at, /*with_tensors=*/false,
                                   [&](const OpRecord& o) {
                                     steps.push_back(o.step);
                                     return true;
                                   });
        return steps;
      };
      const std::vector<int64_t> before_a = steps_before(p_.a, i_), before_b = steps_before(p_.b, j_);
      for (size_t k = 1; k <= before_a.size() && k <= before_b.size(); ++k)
        ++offsets[before_a[before_a.size() - k] - before_b[before_b.size() - k]];
    }
    std::optional<int64_t> reference;
    int most = 0;
    for (const auto& [offset, n] : offsets)
      if (n > most) {
        most = n;
        reference = offset;
      }
    return reference;
  }

  // `window_script`, unless it pairs ops of other steps than the window's first ops are of
  // each other while both threads end at the same step: then the script of the rest of the
  // step each window starts in, ends fixed. Runs that step alike but differ in what a step
  // holds (gradient accumulated over two micro-batches instead of one: A `F B O F B O`, B
  // `F B F B O`) have a cheaper script that pairs B's second micro-batch with A's next step
  // and calls one of A's optimizer steps in two removed; counted in steps, B inserted a
  // micro-batch in each. (Ops keyed by step in a window cut mid-step would still prefer that
  // removal once the insertions outgrow what the window holds.) Threads that end at other
  // steps (an extra `opt.step()`) keep the script that shifts their steps. `*too_short`: a
  // step runs past its window, which a larger window may hold.
  std::optional<std::vector<Hunk>> step_script(const std::vector<uint64_t>& sa,
                                               const std::vector<uint64_t>& sb, int64_t* a_used,
                                               int64_t* b_used, bool* too_short = nullptr) {
    if (too_short) *too_short = false;
    step_end_a_ = step_end_b_ = -1;
    auto script = window_script(sa, sb, a_used, b_used);
    if (!script || p_.pool || p_.a.last_step() < 0 || p_.a.last_step() != p_.b.last_step())
      return script;
    const int64_t wa = static_cast<int64_t>(sa.size()), wb = static_cast<int64_t>(sb.size());
    // Pairs across steps, a run of them at least, are the drift above; a few are none (an op
    // whose step is counted otherwise, at a step's edge).
    const std::optional<int64_t> reference = reference_offset();
    if (shifted_pairs(*script, wa, wb, reference) < kResyncOps) return script;
    // Where each window's first step ends.
    auto step_end = [](Side& s, int64_t from, int64_t n) -> int64_t {
      const OpRecord* first = s.cursor.at(from);
      if (!first) return -1;
      const int64_t step = first->step;
      for (int64_t k = 1; k < n; ++k) {
        const OpRecord* op = s.cursor.at(from + k);
        if (!op) return -1;
        if (op->step != step) return k;
      }
      return n;
    };
    const int64_t ea = step_end(p_.a, i_, wa), eb = step_end(p_.b, j_, wb);
    if (ea <= 0 || eb <= 0) return script;
    const int64_t step_a = p_.a.cursor.at(i_)->step, step_b = p_.b.cursor.at(j_)->step;
    // A step of one run that the other has passed (the pairs before left its last ops
    // over): those ops pair with nothing of the same step.
    const bool a_behind = step_a < step_b, b_behind = step_b < step_a;
    if (((ea == wa && i_ + wa < p_.a.count) && !b_behind) ||
        ((eb == wb && j_ + wb < p_.b.count) && !a_behind)) {
      if (too_short) *too_short = true;
      return script;
    }
    if (a_behind || b_behind) {
      *a_used = a_behind ? ea : 0;
      *b_used = b_behind ? eb : 0;
      step_end_a_ = i_ + *a_used;
      step_end_b_ = j_ + *b_used;
      return std::vector<Hunk>{Hunk{0, *a_used, 0, *b_used}};
    }
    // A step's script may hold more edits than a window's (three micro-batches inserted in
    // each step): its ends are fixed, so the edits are the step's, not the window edge's.
    constexpr int kStepEdits = 2 * kMaxEdits;
    auto by_step = shortest_edit_script(sa.data(), static_cast<size_t>(ea), sb.data(),
                                        static_cast<size_t>(eb), kStepEdits);
    if (!by_step) return script;
    int64_t paired = ea;
    for (const Hunk& h : *by_step) paired -= h.a_end - h.a_begin;
    if (paired == 0) return script;
    *a_used = ea;
    *b_used = eb;
    step_end_a_ = i_ + ea;
    step_end_b_ = j_ + eb;
    return by_step;
  }

  // Keeps the hunks of a window's script from `from` on (window coordinates, the window at
  // (i_, j_), `wa` and `wb` long) as the plan of the walk: trusted up to three quarters of the
  // window (past that a hunk may be the window's edge, not the runs'), or to the threads' ends
  // where the window reaches both.
  void plan(const std::vector<Hunk>& script, size_t from, int64_t wa, int64_t wb) {
    for (size_t k = from; k < script.size(); ++k) {
      const Hunk& r = script[k];
      cached_.push_back(Hunk{i_ + r.a_begin, i_ + r.a_end, j_ + r.b_begin, j_ + r.b_end});
    }
    const bool whole = i_ + wa == p_.a.count && j_ + wb == p_.b.count;
    cached_a_limit_ = whole ? p_.a.count : i_ + wa - wa / 4;
    cached_b_limit_ = whole ? p_.b.count : j_ + wb - wb / 4;
    // A script of one step (`step_script`) plans that step only: the next is planned where
    // it starts, before its alike ops are paired one by one.
    if (step_end_a_ >= 0) {
      cached_a_limit_ = std::min(cached_a_limit_, step_end_a_);
      cached_b_limit_ = std::min(cached_b_limit_, step_end_b_);
    }
    active_ = true;
  }

  // Whether the next hunk of the last window's script starts at (i_, j_) and lies well
  // inside that window; hunks the walk has passed are dropped.
  bool next_cached_here() {
    while (!cached_.empty() && (cached_.front().a_begin < i_ || cached_.front().b_begin < j_))
      cached_.pop_front();
    return !cached_.empty() && cached_.front().a_begin == i_ && cached_.front().b_begin == j_ &&
           cached_.front().a_end <= cached_a_limit_ && cached_.front().b_end <= cached_b_limit_;
  }

  // What an op computed (`op_content`: its tensors' hashes, arguments, generator state), or 0
  // where it cannot be read.
  uint64_t content_key(Side& s, int64_t tidx) {
    const OpRecord* op = s.cursor.at(tidx);
    return op ? op_content(*op, s.strings) : 0;
  }
  // An op's scalar arguments, 0 where it has none: for telling apart ops of one signature at
  // one line whose values all differ (an optimizer's `buf.add_(grad)` and `p.add_(buf,
  // alpha=-lr)` after one run's momentum started afresh).
  uint64_t args_key(Side& s, int64_t tidx) {
    const OpRecord* op = s.cursor.at(tidx);
    return op ? op_args(*op, s.strings) : 0;
  }

  // Shortest scripts are many where ops repeat, and Myers' picks one without looking at what
  // the ops computed or where they ran: a block inserted next to a copy of itself
  // (`with no_grad(): model(x)` before the training forward: `linear t addmm` at line 29 or
  // line 30), `a * b + c` rewritten as `addcmul` (the sum for one gradient paired with the sum
  // for the other). Each region of the window's script (hunks less than kRegionGap ops apart,
  // with matched ops around them) is aligned again by dynamic programming: as many pairs as
  // before, then as many pairs that computed the same values, then as many that ran at the
  // same source line. The edit count stays; regions larger than kRegionOps stay as they are,
  // but for regions whose hunks leave ops between them paired with ops of other lines
  // (`paired_elsewhere`): up to kWideRegionOps.
  static constexpr int64_t kRegionOps = 400, kWideRegionOps = 1536;
  void refine_regions(std::vector<Hunk>& script, const std::vector<uint64_t>& sa,
                      const std::vector<uint64_t>& sb, int64_t a_used, int64_t b_used) {
    constexpr int64_t kRegionGap = 16;
    std::vector<Hunk> out;
    size_t k = 0;
    int64_t done_a = 0;  // window ops before this are settled (A side; B is at the same gap)
    while (k < script.size()) {
      size_t last = k;
      // Dense changes (one every few ops, in every step) make regions of a few hunks each,
      // small enough to align again; so do a large change and the few ops it left paired
      // with look-alikes of other lines before the next (`zero_grad(set_to_none=True)` makes
      // clipping a no-op: its profiler ops pair with those of `opt.step()`), in a wide region.
      bool wide = false;
      while (last + 1 < script.size() && script[last + 1].a_begin - script[last].a_end < kRegionGap) {
        const bool elsewhere = wide || paired_elsewhere(script[last], script[last + 1]);
        const int64_t limit = elsewhere ? kWideRegionOps / 2 : kRegionOps / 4;
        if (script[last + 1].a_end - script[k].a_begin >= limit ||
            script[last + 1].b_end - script[k].b_begin >= limit)
          break;
        wide = elsewhere;
        ++last;
      }
      const int64_t cap = wide ? kWideRegionOps : kRegionOps;
      const Hunk& first = script[k];
      const Hunk& end = script[last];
      const int64_t size = std::max(end.a_end - first.a_begin, end.b_end - first.b_begin);
      // Matched ops taken in on each side: as many as the region holds (16 at least), but not
      // past the previous region, nor past half the gap to the next one.
      const int64_t gap_before = first.a_begin - done_a;
      const int64_t gap_after = (last + 1 < script.size() ? script[last + 1].a_begin : a_used) - end.a_end;
      const int64_t gap_after_b = (last + 1 < script.size() ? script[last + 1].b_begin : b_used) - end.b_end;
      // Both shrink to fit a region of `cap` ops.
      const int64_t reach = std::min(std::max<int64_t>(16, size), std::max<int64_t>(0, (cap - size) / 2));
      const int64_t before = std::min({reach, gap_before, first.b_begin});
      const int64_t after = std::min({reach, last + 1 < script.size() ? gap_after / 2 : gap_after, gap_after_b});
      const int64_t ra0 = first.a_begin - before, rb0 = first.b_begin - before;
      const int64_t ra1 = end.a_end + after, rb1 = end.b_end + after;
      std::vector<Hunk> redone;
      if (ra1 - ra0 <= cap && rb1 - rb0 <= cap && realign(sa, sb, ra0, ra1, rb0, rb1, &redone)) {
        out.insert(out.end(), redone.begin(), redone.end());
      } else {
        out.insert(out.end(), script.begin() + static_cast<long>(k), script.begin() + static_cast<long>(last) + 1);
      }
      done_a = ra1;
      k = last + 1;
    }
    script = std::move(out);
  }

  // Whether the ops that the script pairs between hunk `h` and the next (window coordinates)
  // ran at other lines in each run: look-alikes paired across a change.
  bool paired_elsewhere(const Hunk& h, const Hunk& next) {
    for (int64_t t = 0; t < next.a_begin - h.a_end; ++t) {
      const uint64_t la = line_key(p_.a, i_ + h.a_end + t), lb = line_key(p_.b, j_ + h.b_end + t);
      if (la != 0 && lb != 0 && la != lb) return true;
    }
    return false;
  }

  // The alignment of window ops A[ra0, ra1) and B[rb0, rb1) (both ends matched) with the most
  // pairs, then the most pairs of equal content, then of equal lines, as hunks; false when an
  // op cannot be read.
  bool realign(const std::vector<uint64_t>& sa, const std::vector<uint64_t>& sb, int64_t ra0,
               int64_t ra1, int64_t rb0, int64_t rb1, std::vector<Hunk>* hunks) {
    const int64_t n = ra1 - ra0, m = rb1 - rb0;
    std::vector<uint64_t> ca(static_cast<size_t>(n)), cb(static_cast<size_t>(m));
    std::vector<uint64_t> la(static_cast<size_t>(n)), lb(static_cast<size_t>(m));
    std::vector<uint64_t> ma(static_cast<size_t>(n)), mb(static_cast<size_t>(m));
    std::vector<uint64_t> ga(static_cast<size_t>(n)), gb(static_cast<size_t>(m));
    for (int64_t x = 0; x < n; ++x) {
      ca[static_cast<size_t>(x)] = content_key(p_.a, i_ + ra0 + x);
      la[static_cast<size_t>(x)] = line_key(p_.a, i_ + ra0 + x);
      ma[static_cast<size_t>(x)] = module_key(p_.a, i_ + ra0 + x);
      ga[static_cast<size_t>(x)] = args_key(p_.a, i_ + ra0 + x);
    }
    for (int64_t y = 0; y < m; ++y) {
      cb[static_cast<size_t>(y)] = content_key(p_.b, j_ + rb0 + y);
      lb[static_cast<size_t>(y)] = line_key(p_.b, j_ + rb0 + y);
      mb[static_cast<size_t>(y)] = module_key(p_.b, j_ + rb0 + y);
      gb[static_cast<size_t>(y)] = args_key(p_.b, j_ + rb0 + y);
    }
    if (!p_.status().ok()) return false;
    // Each weight above the sum of the lower ones over a region (kWideRegionOps pairs): the same
    // module first (a block called twice: its second call is the inserted one, whatever its
    // first ops computed), then the same values, then the same line, then the same arguments.
    static_assert(kWideRegionOps < (1 << 11));
    constexpr int64_t kPair = int64_t{1} << 44, kSameModule = int64_t{1} << 33,
                      kSameContent = int64_t{1} << 22, kSameLine = int64_t{1} << 11;
    auto weight = [&](int64_t x, int64_t y) -> int64_t {
      if (sa[static_cast<size_t>(ra0 + x)] != sb[static_cast<size_t>(rb0 + y)]) return -1;
      int64_t w = kPair;
      if (ma[static_cast<size_t>(x)] != 0 && ma[static_cast<size_t>(x)] == mb[static_cast<size_t>(y)]) w += kSameModule;
      if (ca[static_cast<size_t>(x)] != 0 && ca[static_cast<size_t>(x)] == cb[static_cast<size_t>(y)]) w += kSameContent;
      if (la[static_cast<size_t>(x)] != 0 &&
          la[static_cast<size_t>(x)] == lb[static_cast<size_t>(y)])
        w += kSameLine;
      if (ga[static_cast<size_t>(x)] != 0 &&
          ga[static_cast<size_t>(x)] == gb[static_cast<size_t>(y)])
        w += 1;
      return w;
    };
    // best[x][y]: the best score of A's first x ops against B's first y.
    std::vector<int64_t> best(static_cast<size_t>((n + 1) * (m + 1)), 0);
    auto at = [&](int64_t x, int64_t y) -> int64_t& { return best[static_cast<size_t>(x * (m + 1) + y)]; };
    for (int64_t x = 1; x <= n; ++x)
      for (int64_t y = 1; y <= m; ++y) {
        int64_t v = std::max(at(x - 1, y), at(x, y - 1));
        const int64_t w = weight(x - 1, y - 1);
        if (w > 0) v = std::max(v, at(x - 1, y - 1) + w);
        at(x, y) = v;
      }
    // Walk back, collecting the pairs.
    std::vector<std::pair<int64_t, int64_t>> pairs;
    for (int64_t x = n, y = m; x > 0 && y > 0;) {
      const int64_t w = weight(x - 1, y - 1);
      if (w > 0 && at(x, y) == at(x - 1, y - 1) + w) {
        pairs.push_back({x - 1, y - 1});
        --x;
        --y;
      } else if (at(x, y) == at(x - 1, y)) {
        --x;
      } else {
        --y;
      }
    }
    std::reverse(pairs.begin(), pairs.end());
    int64_t x = 0, y = 0;
    auto gap_to = [&](int64_t px, int64_t py) {
      if (px > x || py > y) split_by_lines(la, lb, x, px, y, py, ra0, rb0, hunks);
      x = px + 1;
      y = py + 1;
    };
    for (const auto& [px, py] : pairs) gap_to(px, py);
    if (x < n || y < m) split_by_lines(la, lb, x, n, y, m, ra0, rb0, hunks);
    return true;
  }

  // Appends the hunk of region ops A[x0, x1) and B[y0, y1) (`la`, `lb`: the line keys of the
  // region, which starts at window ops ra0 and rb0). A replacement whose one side starts with
  // ops at lines that the other run does not reach in the region nor in the 32 ops before
  // it, and goes on at a line the other side's ops run, is an insertion (removal) there and
  // a replacement after it: `opt.zero_grad(set_to_none=True)` added before a clip whose work
  // it empties reads "inserted at the zero_grad line", not "the clip replaced by zero_grad";
  // a batch of 3 collated against 2 keeps its third `select` in the replacement of `stack`,
  // since the other run selected at that line just before. Where both sides start so, which
  // came first is unknown and the hunk stays whole. The end of a hunk is not split: two lines
  // rewritten as one (`mul_` and `add_` as one `lerp_`) end so.
  void split_by_lines(const std::vector<uint64_t>& la, const std::vector<uint64_t>& lb,
                      int64_t x0, int64_t x1, int64_t y0, int64_t y1, int64_t ra0, int64_t rb0,
                      std::vector<Hunk>* hunks) {
    auto runs = [](const std::vector<uint64_t>& keys, int64_t from, int64_t to, uint64_t k) {
      return k != 0 && std::find(keys.begin() + from, keys.begin() + to, k) != keys.begin() + to;
    };
    // The line keys of the 32 ops of `s` before window op `at`, read apart from the cursor
    // (its callers hold pointers into its window).
    auto lines_before = [&](Side& s, int64_t at) {
      std::vector<uint64_t> keys;
      const int64_t from = std::max(s.begin, at - 32);
      if (from < at)
        (void)s.reader->scan_ops(s.thread, from, at, /*with_tensors=*/false,
                                 [&](const OpRecord& o) {
                                   keys.push_back(line_key_of(s, o));
                                   return true;
                                 });
      return keys;
    };
    // How many of `mine`'s ops from `from` on are at lines that `other` (and `before` it)
    // lacks, where an op at a line of other's [o0, o1) follows them before `to`.
    auto foreign = [&](const std::vector<uint64_t>& mine, int64_t from, int64_t to,
                       const std::vector<uint64_t>& other, const std::vector<uint64_t>& before,
                       int64_t o0, int64_t o1) {
      const auto region = static_cast<int64_t>(other.size());
      const auto earlier = static_cast<int64_t>(before.size());
      int64_t t = from;
      for (; t < to; ++t) {
        const uint64_t k = mine[static_cast<size_t>(t)];
        if (k == 0 || runs(other, 0, region, k) || runs(before, 0, earlier, k)) break;
      }
      return t > from && t < to && runs(other, o0, o1, mine[static_cast<size_t>(t)]) ? t - from
                                                                                      : int64_t{0};
    };
    if (x1 > x0 && y1 > y0) {
      const std::vector<uint64_t> none;
      // Whether a side starts with foreign lines at all, before reading what precedes.
      const bool maybe_a = foreign(la, x0, x1, lb, none, y0, y1) > 0;
      const bool maybe_b = foreign(lb, y0, y1, la, none, x0, x1) > 0;
      int64_t lead_a = 0, lead_b = 0;
      if (maybe_a != maybe_b) {
        if (maybe_a) lead_a = foreign(la, x0, x1, lb, lines_before(p_.b, j_ + rb0), y0, y1);
        if (maybe_b) lead_b = foreign(lb, y0, y1, la, lines_before(p_.a, i_ + ra0), x0, x1);
      }
      if (lead_a > 0 || lead_b > 0) {
        hunks->push_back(Hunk{ra0 + x0, ra0 + x0 + lead_a, rb0 + y0, rb0 + y0 + lead_b});
        x0 += lead_a;
        y0 += lead_b;
      }
    }
    hunks->push_back(Hunk{ra0 + x0, ra0 + x1, rb0 + y0, rb0 + y1});
  }

  // For the first hunk, upwards into the ops before where the aligner
  // started (the split point, before which both runs paired op for op): the inserted block
  // found at the split may be the copy after the one the program added.
  void slide_up_to_lines(Hunk& h) {
    const bool insertion = h.a_begin == h.a_end && h.b_begin < h.b_end;
    const bool removal = h.b_begin == h.b_end && h.a_begin < h.a_end;
    if (!insertion && !removal) return;
    Side& mine = insertion ? p_.b : p_.a;
    Side& other = insertion ? p_.a : p_.b;
    const int64_t begin = insertion ? h.b_begin : h.a_begin;
    const int64_t end = insertion ? h.b_end : h.a_end;
    const int64_t at = insertion ? h.a_begin : h.b_begin;
    constexpr int64_t kLookback = 256;
    int64_t up = 0;
    while (up < kLookback && begin - up - 1 >= mine.begin && at - up - 1 >= other.begin) {
      const uint64_t before = mine.cursor.signature_at(begin - up - 1);
      if (before == 0 || before != mine.cursor.signature_at(end - up - 1) ||
          before != other.cursor.signature_at(at - up - 1))
        break;
      ++up;
    }
    if (up == 0) return;
    // Shifted up by `shift`, the other side's op at - t pairs with mine's begin - t where
    // t > shift, else with end - t.
    int64_t best_shift = 0, best_score = -1;
    for (int64_t shift = 0; shift <= up; ++shift) {
      int64_t score = 0;
      for (int64_t t = 1; t <= up; ++t) {
        const uint64_t ko = line_key(other, at - t);
        score += ko != 0 && ko == line_key(mine, t > shift ? begin - t : end - t) ? 1 : 0;
      }
      if (score > best_score) {
        best_score = score;
        best_shift = shift;
      }
    }
    if (best_shift == 0) return;
    h.a_begin -= best_shift;
    h.a_end -= best_shift;
    h.b_begin -= best_shift;
    h.b_end -= best_shift;
  }

  // How many ops a script of the window at (i_, j_) (wa ops of A, wb of B) pairs with an op of
  // another step than the ops at i_ and j_ are of each other (the window's own step offset).
  // `reference`: the step offset to count against, else the window's first ops'.
  int64_t shifted_pairs(const std::vector<Hunk>& script, int64_t wa, int64_t wb,
                        std::optional<int64_t> reference = std::nullopt) const {
    Side& a = p_.a;
    Side& b = p_.b;
    const OpRecord* first_a = a.cursor.at(i_);
    const OpRecord* first_b = b.cursor.at(j_);
    if (!first_a || !first_b) return 0;
    const int64_t offset = reference ? *reference : first_a->step - first_b->step;
    int64_t shifted = 0, x = 0, y = 0;
    auto count = [&](int64_t len) {
      for (int64_t t = 0; t < len; ++t) {
        const OpRecord* oa = a.cursor.at(i_ + x + t);
        const OpRecord* ob = b.cursor.at(j_ + y + t);
        if (!oa || !ob) return;
        if (oa->step - ob->step != offset) ++shifted;
      }
    };
    for (const Hunk& h : script) {
      count(h.a_begin - x);
      x = h.a_end;
      y = h.b_end;
    }
    count(std::min(wa - x, wb - y));
    return shifted;
  }

  // Where the window holds the rest of a thread of a run that ended early (a crash, an error,
  // a kill), that thread's ops are the start of what it would have run. Aligning all of the
  // other run's window with them pairs its last ops with whatever looks like them further on
  // (a step later, in another backward) and calls what it did run removed; aligning them with
  // a prefix of the other's window does not. That script replaces `*script` when it is
  // cheaper than `*script` without what that does after the cut run's last op (see below for
  // how much), and it does not pair less than kPrefixShare of the
  // ops that `*script` pairs and kResyncOps fewer (then it only inserts what the whole script
  // pairs after a removal: a warm-up that the cut run skipped). Where both runs ended early,
  // the one with fewer edits. `*a_used` is how much of A's window the chosen script covers.
  void prefer_prefix_script(const std::vector<uint64_t>& sa, const std::vector<uint64_t>& sb,
                            bool a_ends, bool b_ends, std::vector<Hunk>* script,
                            int64_t* a_used) const {
    const int64_t wa = static_cast<int64_t>(sa.size()), wb = static_cast<int64_t>(sb.size());
    int64_t whole_paired = wa, whole_edits = 0;
    for (const Hunk& h : *script) {
      whole_paired -= h.a_end - h.a_begin;
      whole_edits += (h.a_end - h.a_begin) + (h.b_end - h.b_begin);
    }
    // What the whole script's last hunk does after one run's last op: free in a prefix script.
    int64_t free_removed = 0, free_inserted = 0;
    if (!script->empty() && script->back().a_end == wa && script->back().b_end == wb) {
      free_removed = script->back().a_end - script->back().a_begin;
      free_inserted = script->back().b_end - script->back().b_begin;
    }
    if (!(b_ends && p_.b_cut_short) && !(a_ends && p_.a_cut_short)) return;
    const int64_t whole_shifted = shifted_pairs(*script, wa, wb);
    int64_t best_edits = -1;
    auto consider = [&](const std::vector<uint64_t>& whole, const std::vector<uint64_t>& cut,
                        bool swapped) {
      int64_t used = 0;
      auto candidate = edit_script_to_prefix(whole.data(), whole.size(), cut.data(), cut.size(),
                                             kMaxEdits, &used);
      if (!candidate) return;
      int64_t edits = 0, paired = static_cast<int64_t>(cut.size());
      for (Hunk& h : *candidate) {
        edits += (h.a_end - h.a_begin) + (h.b_end - h.b_begin);
        paired -= h.b_end - h.b_begin;
        if (swapped) {
          std::swap(h.a_begin, h.b_begin);
          std::swap(h.a_end, h.b_end);
        }
      }
      if (paired == 0 && whole_paired == 0) return;  // nothing pairs: all replaced
      if (static_cast<double>(paired) < kPrefixShare * static_cast<double>(whole_paired) &&
          whole_paired - paired >= kResyncOps)
        return;
      // Only a script cheaper than the whole one on the same ops tells something new: one
      // that pairs fewer ops of other steps (the cut run's ops paired with the other's a step
      // later), or as few and much cheaper (kResyncOps edits fewer). A cut run's last steps
      // paired a step early are cheaper too, what the other runs after them being free, but
      // wrong; a cut run's last op left unpaired is a little cheaper than an insertion the
      // other made before it.
      const int64_t whole_cost = whole_edits - (swapped ? free_inserted : free_removed);
      if (edits >= whole_cost) return;
      const int64_t shifted = shifted_pairs(*candidate, wa, wb);
      if (shifted > whole_shifted) return;
      if (shifted == whole_shifted && whole_cost - edits < kResyncOps) return;
      if (best_edits >= 0 && edits >= best_edits) return;
      best_edits = edits;
      *script = std::move(*candidate);
      *a_used = swapped ? static_cast<int64_t>(sa.size()) : used;
    };
    if (b_ends && p_.b_cut_short) consider(sa, sb, false);
    if (a_ends && p_.a_cut_short) consider(sb, sa, true);
  }

  // The first hunk of the shortest edit script of a window starting at (i_, j_), where the
  // two signatures differ. The window grows until the hunk is clearly followed by a match, or
  // is the same in two windows in a row: a change repeated in every step of a small model
  // leaves fewer than kResyncOps ops between its hunks, and a window of many steps holds
  // more edits than kMaxEdits. When a window is too different, the previous window's first
  // hunk stands; with none, the windows are all replaced.
  std::optional<Hunk> align_at() {
    Side& a = p_.a;
    Side& b = p_.b;
    // The script of an earlier window, where it reaches here: its next hunk, when it lies
    // well inside that window, is what this window would find (dense changes otherwise cost
    // a script of a large window per hunk).
    if (next_cached_here()) {
      const Hunk h = cached_.front();
      cached_.pop_front();
      return h;
    }
    cached_.clear();
    std::vector<uint64_t> sa, sb;
    std::optional<Hunk> previous;
    auto same = [](const Hunk& x, const Hunk& y) {
      return x.a_begin == y.a_begin && x.a_end == y.a_end && x.b_begin == y.b_begin &&
             x.b_end == y.b_end;
    };
    // Too different by signature: a change mostly one run's, larger than a window's script
    // holds, else aligned by kind, else the window is replaced.
    auto by_kind_or = [this](const Hunk& replaced) -> std::optional<Hunk> {
      if (std::optional<Hunk> h = anchored()) return h;
      if (!p_.status().ok()) return std::nullopt;
      if (std::optional<Hunk> h = align_by_kind()) return h;
      if (!p_.status().ok()) return std::nullopt;
      return replaced;
    };
    // After a hunk aligned by kind, the next change is most likely the same one a step later:
    // one small window by signature before aligning by kind again.
    const int64_t max_window = by_kind_ ? kFirstWindow : kMaxWindow;
    for (int64_t w = kFirstWindow;; w *= 4) {
      int64_t wa = std::min(w, a.count - i_), wb = std::min(w, b.count - j_);
      if (!window_signatures(wa, wb, &sa, &sb)) return std::nullopt;
      bool whole = i_ + wa == a.count && j_ + wb == b.count;
      bool last_try = whole || w >= max_window;
      const bool a_cut = i_ + wa < a.count, b_cut = j_ + wb < b.count;
      int64_t a_used = wa, b_used = wb;
      bool too_short = false;
      auto script = step_script(sa, sb, &a_used, &b_used, &too_short);
      if (too_short && !last_try) continue;
      // More than kMaxEdits here: a larger window has at least as many (its ends are free
      // too), so growing it only costs time (minutes, where every step differs in shape).
      if (!script && !previous && (a_cut || b_cut))
        return by_kind_or(Hunk{i_, i_ + wa, j_, j_ + wb});  // too different: this window replaced
      if (script && (a_cut || b_cut)) {
        int64_t paired = a_used;
        for (const Hunk& h : *script) paired -= h.a_end - h.a_begin;
        if (paired == 0) script.reset();  // nothing pairs: too different
      }
      if (script) prefer_prefix_script(sa, sb, !a_cut, !b_cut, &*script, &a_used);
      if (script) refine_regions(*script, sa, sb, a_used, b_used);
      if (script && !script->empty()) {
        const Hunk& h = script->front();
        int64_t next = script->size() > 1 ? (*script)[1].a_begin : a_used;
        if (h.a_begin == 0 && h.b_begin == 0) {
          const Hunk found{i_ + h.a_begin, i_ + h.a_end, j_ + h.b_begin, j_ + h.b_end};
          if (last_try || next - h.a_end >= kResyncOps || (previous && same(*previous, found))) {
            // The rest of the script serves the hunks after this one.
            if (!last_try || whole) plan(*script, 1, wa, wb);
            by_kind_ = false;
            return found;
          }
          previous = found;
        }
      } else if (script && script->empty()) {
        // Equal signatures but different structure (a hash collision of signatures or a
        // field the signature leaves out): one replaced op.
        return Hunk{i_, i_ + 1, j_, j_ + 1};
      }
      // A larger window too different: the smaller one's hunk is a guess, unless a change of
      // one run (`align_by_anchor`) explains it.
      if (!script && previous) {
        if (std::optional<Hunk> h = anchored()) return h;
        if (!p_.status().ok()) return std::nullopt;
        return *previous;
      }
      if (last_try) return previous ? *previous : by_kind_or(Hunk{i_, i_ + wa, j_, j_ + wb});  // too different: all replaced
    }
  }

  // Where no window's script by signature pairs ops, the runs may still run the same code on
  // other sizes: a batch split into more micro-batches, a longer sequence, so that no op of
  // the forward and backward has the same shapes in both. Aligned by kind (`op_kind`, and
  // the step: ops of one step pair only with ops of the step at the same distance from the
  // window's start, so that a cut window does not pair a step's ops with the next step's),
  // the runs of pairs whose signatures differ are replaced ops, and the optimizer's ops (of
  // the parameters' shapes) pair again. The first hunk, or nullopt when no window pairs
  // kResyncOps ops by kind (or on a read error); the rest of the script is planned.
  std::optional<Hunk> align_by_kind() {
    Side& a = p_.a;
    Side& b = p_.b;
    const OpRecord* first_a = a.cursor.at(i_);
    const OpRecord* first_b = b.cursor.at(j_);
    if (!first_a || !first_b) return std::nullopt;
    const int64_t step_a = first_a->step, step_b = first_b->step;
    std::vector<uint64_t> sa, sb, ka, kb;
    auto kinds = [](Side& s, int64_t from, int64_t n, int64_t step0, std::vector<uint64_t>& out) {
      out.clear();
      for (int64_t k = 0; k < n; ++k) {
        const OpRecord* op = s.cursor.at(from + k);
        out.push_back(op ? op_kind(*op, s.strings) ^ (static_cast<uint64_t>(op->step - step0) *
                                                      0x9E3779B97F4A7C15ull)
                         : 0);
      }
    };
    for (int64_t w = kFirstWindow; w <= kMaxWindow; w *= 4) {
      const int64_t wa = std::min(w, a.count - i_), wb = std::min(w, b.count - j_);
      if (!window_signatures(wa, wb, &sa, &sb)) return std::nullopt;
      kinds(a, i_, wa, step_a, ka);
      kinds(b, j_, wb, step_b, kb);
      if (!p_.status().ok()) return std::nullopt;
      int64_t a_used = wa, b_used = wb;
      auto script = window_script(ka, kb, &a_used, &b_used);
      if (!script) return std::nullopt;  // a larger window has as many edits
      std::vector<Hunk> hunks;
      int64_t x = 0, y = 0, paired = 0;
      std::optional<Hunk> open;  // pairs of one kind whose signatures differ
      auto close = [&] {
        if (open) hunks.push_back(*open);
        open.reset();
      };
      auto pairs = [&](int64_t len) {
        for (int64_t t = 0; t < len; ++t, ++x, ++y) {
          ++paired;
          if (sa[static_cast<size_t>(x)] == sb[static_cast<size_t>(y)]) {
            close();
          } else if (open) {
            open->a_end = x + 1;
            open->b_end = y + 1;
          } else {
            open = Hunk{x, x + 1, y, y + 1};
          }
        }
      };
      for (const Hunk& h : *script) {
        pairs(h.a_begin - x);
        close();
        hunks.push_back(h);
        x = h.a_end;
        y = h.b_end;
      }
      pairs(std::min(a_used - x, b_used - y));
      close();
      const bool whole = i_ + wa == a.count && j_ + wb == b.count;
      if (hunks.empty() || hunks.front().a_begin != 0 || hunks.front().b_begin != 0) return std::nullopt;
      if (paired < kResyncOps && !whole) continue;
      const Hunk& h = hunks.front();
      step_end_a_ = step_end_b_ = -1;  // (a script of the window, not of one step)
      plan(hunks, 1, wa, wb);
      by_kind_ = true;
      return Hunk{i_ + h.a_begin, i_ + h.a_end, j_ + h.b_begin, j_ + h.b_end};
    }
    return std::nullopt;
  }

  // `align_by_anchor` where windows fail: a change of one run, or, where the walk starts at
  // steps paired by hand or by a resumption, of both (the other's start-up against the end of
  // a step), pairing the steps paired there.
  std::optional<Hunk> anchored() {
    if (!steps_paired_ || i_ != p_.a.begin || j_ != p_.b.begin)
      return align_by_anchor(kResyncOps, std::nullopt);
    const OpRecord* x = p_.a.cursor.at(i_);
    const OpRecord* y = p_.b.cursor.at(j_);
    if (!x || !y) return std::nullopt;
    std::optional<int64_t> offset;
    if (p_.a.last_step() >= 0 && p_.b.last_step() >= 0) offset = x->step - y->step;
    return align_by_anchor(kMaxWindow, offset);
  }

  // A change that holds more ops than a window's script has edits (an evaluation pass one run
  // inserts) or that a window's script pairs with look-alikes (the start-up of a run resumed
  // from the other's checkpoint): where the ops after it are alike, it ends at the nearest
  // stretch of kAnchorOps equal signatures, the fewest ops of both runs before it, with at
  // most `short_side` ops on one side, whose ops are of steps as far apart as `offset` says
  // where it is known (a run that lacks a few ops in its first step, `zero_grad` of gradients
  // not yet made, is alike from its second step on: not where it pairs). The hunk up to
  // there, in windows growing to kMaxWindow, or nullopt (on a read error too). Where
  // `short_side` is small, a change of both runs alike in size (another batch size) is left to
  // `align_by_kind`.
  std::optional<Hunk> align_by_anchor(int64_t short_side, std::optional<int64_t> offset) {
    constexpr int64_t kAnchorOps = 4 * kResyncOps;
    // Hashes of the kAnchorOps signatures from each position (polynomial, rolling).
    auto grams = [](const std::vector<uint64_t>& s) {
      constexpr uint64_t kBase = 0x100000001B3ull;
      uint64_t top = 1;  // kBase^(kAnchorOps - 1)
      for (int64_t k = 1; k < kAnchorOps; ++k) top *= kBase;
      std::vector<uint64_t> out;
      if (static_cast<int64_t>(s.size()) < kAnchorOps) return out;
      uint64_t h = 0;
      for (int64_t k = 0; k < kAnchorOps; ++k) h = h * kBase + s[static_cast<size_t>(k)];
      out.push_back(h);
      for (size_t k = kAnchorOps; k < s.size(); ++k) {
        h = (h - s[k - kAnchorOps] * top) * kBase + s[k];
        out.push_back(h);
      }
      return out;
    };
    std::vector<uint64_t> sa, sb;
    for (int64_t w = 4 * kFirstWindow; w <= kMaxWindow; w *= 4) {
      const int64_t wa = std::min(w, p_.a.count - i_), wb = std::min(w, p_.b.count - j_);
      if (!window_signatures(wa, wb, &sa, &sb)) return std::nullopt;
      const std::vector<uint64_t> ga = grams(sa), gb = grams(sb);
      if (ga.empty() || gb.empty()) return std::nullopt;
      // The positions of each stretch in `g`, in order.
      auto positions = [](const std::vector<uint64_t>& g) {
        std::unordered_map<uint64_t, std::vector<int64_t>> at;
        for (size_t k = 0; k < g.size(); ++k) at[g[k]].push_back(static_cast<int64_t>(k));
        return at;
      };
      const auto at_a = positions(ga), at_b = positions(gb);
      std::optional<Hunk> best;
      // Whether to stop at A's stretch at `s` against B's at `t`: they pair (the best so far),
      // or they and B's later ones are no nearer than the best.
      auto consider = [&](int64_t s, int64_t t) {
        if (best && best->a_end + best->b_end <= s + t) return true;
        if (!std::equal(sa.begin() + s, sa.begin() + s + kAnchorOps, sb.begin() + t)) return false;
        if (offset) {
          const OpRecord* x = p_.a.cursor.at(i_ + s);
          const OpRecord* y = p_.b.cursor.at(j_ + t);
          if (!x || !y || x->step - y->step != *offset) return false;
        }
        best = Hunk{0, s, 0, t};
        return true;
      };
      for (int64_t k = 0; k <= short_side && (!best || k < best->a_end + best->b_end); ++k) {
        if (k < static_cast<int64_t>(ga.size()))
          if (auto it = at_b.find(ga[static_cast<size_t>(k)]); it != at_b.end())
            for (int64_t t : it->second)
              if (consider(k, t)) break;
        if (k < static_cast<int64_t>(gb.size()))
          if (auto it = at_a.find(gb[static_cast<size_t>(k)]); it != at_a.end())
            for (int64_t s : it->second)
              if (consider(s, k)) break;
      }
      if (!p_.status().ok()) return std::nullopt;
      // A stretch at (0, 0) is no change (the window scripts found none: the ops after it
      // differ).
      if (best && best->a_end + best->b_end > 0) {
        step_end_a_ = step_end_b_ = -1;
        by_kind_ = false;
        return Hunk{i_, i_ + best->a_end, j_, j_ + best->b_end};
      }
      if (i_ + wa == p_.a.count && j_ + wb == p_.b.count) break;
    }
    return std::nullopt;
  }

  Pair& p_;
  int64_t i_, j_;
  bool started_ = false;     // an event was returned (ops before i_, j_ are no longer free)
  bool active_ = false;      // the walk is in a stretch of changes that `cached_` plans
  bool by_kind_ = false;     // the last hunk was found by `align_by_kind`
  bool steps_paired_;        // the walk starts at steps paired by hand or by a resumption
  int64_t step_end_a_ = -1, step_end_b_ = -1;  // where the last `step_script`'s step ends
  std::deque<Hunk> cached_;  // the rest of the last accepted window's script (absolute tidx)
  int64_t cached_a_limit_ = 0, cached_b_limit_ = 0;  // its hunks are trusted up to here
};

// Where a thread pair first differs.
struct Located {
  enum Kind { kNone, kValue, kStructure } kind = kNone;
  int64_t i = 0, j = 0;  // tidx on each side (for kStructure: the split point)
};

struct Stats {
  int64_t probes = 0;        // chain hash probes by bisection
  int64_t ops_compared = 0;  // op pairs compared field by field
};

// First tidx < n where the chains differ (n when they agree at n - 1): O(log n) probes.
// The first tidx in [lo, n) where the chains differ (n when they never do), by bisection.
StatusOr<int64_t> bisect_chains(Side& a, Side& b, int64_t lo, int64_t n, Stats& stats) {
  if (n <= lo) return lo;
  auto chain = [&](Side& s, int64_t t) -> StatusOr<uint64_t> {
    ++stats.probes;
    auto c = s.reader->chain_at(s.thread, t);
    if (!c) {
      TDBG_RETURN_IF_ERROR(s.reader->lookup_status());  // a damaged block, named as such
      // Inside the thread's range of ops, which its blocks' keys gave: a block its index lost.
      return Status::Error(s.reader->path() + ": corrupt database (op " + std::to_string(t) +
                           " of thread " + std::to_string(s.thread) +
                           " missing from where its index leads)");
    }
    return *c;
  };
  TDBG_ASSIGN_OR_RETURN(uint64_t last_a, chain(a, n - 1));
  TDBG_ASSIGN_OR_RETURN(uint64_t last_b, chain(b, n - 1));
  if (last_a == last_b) return n;
  int64_t hi = n - 1;  // the chains differ at hi
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    TDBG_ASSIGN_OR_RETURN(uint64_t ca, chain(a, mid));
    TDBG_ASSIGN_OR_RETURN(uint64_t cb, chain(b, mid));
    if (ca == cb) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// From differing ops at A's `i` and B's `j` (the same op), the innermost op under them that
// differs: each level's first differing child, until an op has no differing child. Their nested
// ops are compared at the same offsets.
Located descend(Pair& p, int64_t i, int64_t j, Stats& stats) {
  const OpRecord* top = p.a.cursor.at(i);
  if (!top) return {Located::kValue, i, j};
  int64_t cur = 0;
  uint16_t depth = top->depth;
  for (int64_t s = 1; i + s < p.a.count && j + s < p.b.count; ++s) {
    const OpRecord* a = p.a.cursor.at(i + s);
    const OpRecord* b = p.b.cursor.at(j + s);
    if (!a || !b || a->depth <= depth || b->depth != a->depth) break;
    ++stats.ops_compared;
    OpComparison c = compare_ops(*a, p.a.strings, *b, p.b.strings);
    // Nested ops that differ in structure under an op whose values differ: the op ran another
    // algorithm (a thread count, a kernel choice). The op itself is the answer; the alignment
    // of what follows lists the nested changes.
    if (!c.structure.empty()) break;
    if (c.differs()) {
      cur = s;
      depth = a->depth;
    }
  }
  return {Located::kValue, i + cur, j + cur};
}

// `descend` for the ops of a set comparison (A's `i`, B's `j`, the same signature), but, as
// `locate` does, an op whose arguments differ over the same inputs, or that reads data from
// outside, is the answer as it stands.
Located innermost_pair(Pair& p, int64_t i, int64_t j, Stats& stats) {
  const OpRecord* top = p.a.cursor.at(i);
  const OpRecord* top_b = p.b.cursor.at(j);
  if (!top || !top_b) return {Located::kValue, i, j};
  const OpComparison c = compare_ops(*top, p.a.strings, *top_b, p.b.strings);
  if (c.differs() && c.input < 0 && (c.arg >= 0 || c.layout >= 0)) return {Located::kValue, i, j};
  if (c.input >= 0 &&
      top->tensors[static_cast<size_t>(c.input)].status == tracer::TensorStatus::kHashed)
    return {Located::kValue, i, j};
  return descend(p, i, j, stats);
}

// Whether some op of the 256 before A's t and B's u ran in the same module in both runs (a
// non-empty path): the runs name their modules alike.
bool modules_agreed_before(Pair& p, int64_t t, int64_t u) {
  for (int64_t k = 1; k <= 256 && t - k >= p.a.begin && u - k >= p.b.begin; ++k) {
    const OpRecord* a = p.a.cursor.at(t - k);
    const OpRecord* b = p.b.cursor.at(u - k);
    if (!a || !b) return false;
    if (a->module != 0 && b->module != 0 && p.a.strings.text(a->module) == p.b.strings.text(b->module))
      return true;
  }
  return false;
}

// Whether the ops from A's `t` and B's `u` on have the same signatures, op for op, for
// kAgreeOps ops or to both threads' ends: no op inserted or removed near here. Blocks run in
// another order (`for b in blocks[::-1]`) run the same ops in other modules: a value
// difference, not other work.
bool signatures_agree(Pair& p, int64_t t, int64_t u) {
  constexpr int64_t kAgreeOps = 16384;
  for (int64_t k = 0; k < kAgreeOps; ++k) {
    const bool a_ends = t + k >= p.a.count, b_ends = u + k >= p.b.count;
    if (a_ends || b_ends) return a_ends && b_ends;
    read_ahead_both(p, t + k, u + k);
    // (Nothing is released: the caller holds pointers to the ops at t and u.)
    if (p.a.cursor.signature_at(t + k) != p.b.cursor.signature_at(u + k)) return false;
  }
  return true;
}

StatusOr<Located> locate(Pair& p, const DiffOptions& options, Stats& stats, Progress& progress) {
  const int64_t off = p.b_offset;
  int64_t n = std::min(p.a.count, p.b.count - off);
  // Ops both databases hold (a trimmed bundle may start each side at another op).
  int64_t k = std::max(p.a.begin, p.b.begin - off);
  // Chains hash each thread's history: they agree only for ops at the same tidx.
  if (options.bisect && off == 0) {
    TDBG_ASSIGN_OR_RETURN(k, bisect_chains(p.a, p.b, k, n, stats));
  }
  // The chains say where the streams stop being equal; the fields say whether that is a
  // difference the engine counts (a chain may cover fields it ignores), so confirm here.
  for (int64_t t = k; t < n; ++t) {
    const int64_t u = t + off;  // B's op compared with A's t
    read_ahead_both(p, t, u);
    const OpRecord* a = p.a.cursor.at(t);
    const OpRecord* b = p.b.cursor.at(u);
    if (!a || !b) return p.status();
    ++stats.ops_compared;
    progress.update(t, n, "comparing");
    OpComparison c = compare_ops(*a, p.a.strings, *b, p.b.strings);
    if (!c.structure.empty()) return Located{Located::kStructure, t, u};
    if (c.permuted && p.permuted++ == 0) p.first_permuted = t;
    if (c.args_spelled && p.args_spelled++ == 0) p.first_args_spelled = t;
    if (c.differs()) {
      // The same op, exactly, a few further on in the other run: ops inserted (or removed)
      // here whose first has the same name and shapes as this one (AdamW's param.mul_(1)
      // before Adam's exp_avg.mul_(0.9); a linear layer unfrozen, whose AddmmBackward0 runs
      // `t(weight) mm` for its input's gradient before `t(grad) mm t` for its weight's, as
      // before): a structural change, which the alignment lays out.
      auto identical = [&](Side& x, int64_t i, Side& y, int64_t j) {
        const OpRecord* ox = x.cursor.at(i);
        const OpRecord* oy = y.cursor.at(j);
        if (!ox || !oy || ox->depth != oy->depth) return false;
        const OpComparison k = compare_ops(*ox, x.strings, *oy, y.strings);
        return k.structure.empty() && !k.differs();
      };
      // Not where each is the other's next op: two ops of a kind swapped (`a.mul_(s);
      // l.mul_(s)` the other way round), which no alignment of names lays out; their values
      // are compared as they stand.
      // Further than the next op, the ops after the two identical ones pair by signature too:
      // an op on zeros (Adam's state at its first step) has look-alikes a few ops away.
      auto followed_alike = [&](int64_t i, int64_t j) {
        constexpr int64_t kFollowing = 2;
        for (int64_t f = 1; f <= kFollowing; ++f)
          if (i + f >= p.a.count || j + f >= p.b.count ||
              p.a.cursor.signature_at(i + f) != p.b.cursor.signature_at(j + f))
            return false;
        return true;
      };
      constexpr int64_t kNearOps = 4;
      bool later_in_b = false, later_in_a = false;
      for (int64_t d = 1; d <= kNearOps && !later_in_b && !later_in_a; ++d) {
        later_in_b = identical(p.a, t, p.b, u + d) && (d == 1 || followed_alike(t, u + d));
        later_in_a = identical(p.a, t + d, p.b, u) && (d == 1 || followed_alike(t + d, u));
      }
      if (later_in_b != later_in_a) {
        TDBG_RETURN_IF_ERROR(p.status());
        return Located{Located::kStructure, t, u};
      }
      // The same op in another module in each run, where the runs named the modules alike so
      // far: other work at this point (a block called once more, `x = b(x)` twice), whose
      // reads of other weights are no value difference; the alignment lays it out. (A model
      // wrapped or renamed in one run differs in every module path from the start.)
      if (a->module != 0 && b->module != 0 &&
          p.a.strings.text(a->module) != p.b.strings.text(b->module) &&
          modules_agreed_before(p, t, u) && !signatures_agree(p, t, u)) {
        // From where the modules part: the ops before this one in the other work computed the
        // same values (a LayerNorm initialized alike in every block).
        int64_t back = 0;
        for (; back < 4096 && t - back - 1 >= p.a.begin && u - back - 1 >= p.b.begin; ++back) {
          const OpRecord* pa = p.a.cursor.at(t - back - 1);
          const OpRecord* pb = p.b.cursor.at(u - back - 1);
          if (!pa || !pb || p.a.strings.text(pa->module) == p.b.strings.text(pb->module)) break;
        }
        TDBG_RETURN_IF_ERROR(p.status());
        return Located{Located::kStructure, t - back, u - back};
      }
    }
    // An op whose inputs match and whose arguments (or inputs' memory layouts) differ is the
    // answer as it stands: the ops nested in it only pass the argument on (`mul` with another
    // Python number reaches `copy_` through `to`), and the user called this one.
    if (c.differs() && c.input < 0 && (c.arg >= 0 || c.layout >= 0))
      return Located{Located::kValue, t, u};
    // Likewise an input read and hashed at this op (data from outside, or written since by a
    // collective or through an alias): the data enters here; nested ops only carry its hash.
    if (c.input >= 0 && a->tensors[static_cast<size_t>(c.input)].status == tracer::TensorStatus::kHashed)
      return Located{Located::kValue, t, u};
    if (c.differs()) {
      Located l = descend(p, t, u, stats);
      TDBG_RETURN_IF_ERROR(p.status());
      return l;
    }
    p.a.cursor.release_before(t - 16);
    p.b.cursor.release_before(u - 16);
  }
  if (p.a.count != p.b.count - off) return Located{Located::kStructure, n, n + off};
  return Located{};
}

// The first tidx of `range` whose op's step is `step` or later (`range.end` if none; steps
// never decrease along a thread, so found by bisection); nullopt where an op cannot be read.
std::optional<int64_t> seek_step(const Reader& r, uint32_t t, const TidxRange& range, int64_t step) {
  int64_t lo = range.begin, hi = range.end;  // the answer is in [lo, hi]
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    const auto op = r.op_at(t, mid);
    if (!op) return std::nullopt;
    if (op->step < step) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// Recorded with --ring N (meta `ring`, "0" or absent: every op kept).
bool kept_as_ring(const Reader& r) {
  const std::string ring = r.meta("ring");
  return !ring.empty() && ring != "0";
}

// Whether a recording whose thread's last op is at `last_step` stops there because its
// --steps window ended (the run may have gone on unrecorded), not because the thread did.
bool window_ended(const Reader& r, int64_t last_step) {
  interpose::StepWindow window;
  return interpose::parse_step_window(r.meta("steps"), &window) &&
         window.end != std::numeric_limits<int64_t>::max() && last_step + 1 >= window.end;
}

// For threads recorded with other --steps windows: cuts each range to the steps both threads
// hold, from the first op of the first such step to the last op of the last (steps never
// decrease along a thread, so found by bisection), and returns the first step; nullopt where
// a thread holds no op, an op cannot be read, or (`*none_in_common`) the threads hold no step
// in common (the ranges are left as they were).
std::optional<int64_t> first_common_step(const Reader& ra, uint32_t ta, TidxRange* range_a,
                                         const Reader& rb, uint32_t tb, TidxRange* range_b,
                                         bool* none_in_common) {
  *none_in_common = false;
  if (range_a->begin >= range_a->end || range_b->begin >= range_b->end) return std::nullopt;
  const auto first_a = ra.op_at(ta, range_a->begin), first_b = rb.op_at(tb, range_b->begin);
  const auto last_a = ra.op_at(ta, range_a->end - 1), last_b = rb.op_at(tb, range_b->end - 1);
  if (!first_a || !first_b || !last_a || !last_b) return std::nullopt;
  // A ring that dropped ops begins most likely inside a step: its first step is not whole.
  auto partial_first = [](const Reader& r, const TidxRange& range) {
    return range.begin > 0 && kept_as_ring(r) ? 1 : 0;
  };
  const int64_t from = std::max(first_a->step + partial_first(ra, *range_a),
                                first_b->step + partial_first(rb, *range_b));
  // A side's last step ends what is compared only where its --steps window ended there (the
  // run may have gone on unrecorded). A whole recording or a ring holds its thread's end: the
  // other side's later steps are ops it never ran (a run killed at step 1500, against a window
  // of another that went on).
  const bool cut_a = window_ended(ra, last_a->step), cut_b = window_ended(rb, last_b->step);
  const int64_t to = cut_a && cut_b ? std::min(last_a->step, last_b->step) + 1
                     : cut_a        ? last_a->step + 1
                     : cut_b        ? last_b->step + 1
                                    : std::max(last_a->step, last_b->step) + 1;
  if (from >= to) {
    *none_in_common = true;
    return std::nullopt;
  }
  const auto begin_a = seek_step(ra, ta, *range_a, from), end_a = seek_step(ra, ta, *range_a, to);
  const auto begin_b = seek_step(rb, tb, *range_b, from), end_b = seek_step(rb, tb, *range_b, to);
  if (!begin_a || !end_a || !begin_b || !end_b) return std::nullopt;
  *range_a = TidxRange{*begin_a, std::max(*begin_a, *end_a)};
  *range_b = TidxRange{*begin_b, std::max(*begin_b, *end_b)};
  return from;
}

// Two rings (or trimmed bundles) that start each side at another op: B's offset against A
// that lines up most of the first ops they hold: the same tidx (0), each side's first op held
// (a run that ran one op more before the rings started holds the same later ops one tidx
// further on), or an offset near either.
int64_t ring_offset(Pair& p) {
  const int64_t own = p.b.begin - p.a.begin;
  // An offset's score: first, how many ops from the start of what both hold are alike, up
  // to kPrefix (by signature: values may differ already; the alignment takes any change
  // after them); then the share of the first 256 alike, values counting too (a loop's ops
  // repeat their signatures every step; their values tell the steps apart). A share, not a
  // count: each offset overlaps the other run by another number of ops.
  constexpr int64_t kPrefix = 64;
  struct Score {
    int64_t prefix = 0;
    double share = 0;
    bool operator>(const Score& o) const {
      return prefix != o.prefix ? prefix > o.prefix : share > o.share;
    }
    bool operator==(const Score& o) const { return prefix == o.prefix && share == o.share; }
  };
  auto matches = [&](int64_t off) -> Score {
    const int64_t from = std::max(p.a.begin, p.b.begin - off);
    int64_t same = 0, n = 0;
    Score score;
    bool in_prefix = true;
    for (int64_t t = from; t < from + 256 && t < p.a.count && t + off < p.b.count; ++t, ++n) {
      read_ahead_both(p, t, t + off);
      const uint64_t sa = p.a.cursor.signature_at(t), sb = p.b.cursor.signature_at(t + off);
      const OpRecord* oa = sa != 0 && sa == sb ? p.a.cursor.at(t) : nullptr;
      const OpRecord* ob = oa ? p.b.cursor.at(t + off) : nullptr;
      const bool alike = oa && ob && op_content(*oa, p.a.strings) == op_content(*ob, p.b.strings);
      in_prefix = in_prefix && sa != 0 && sa == sb;
      score.prefix += in_prefix && score.prefix < kPrefix;
      same += (sa != 0 && sa == sb) + alike;
    }
    score.share = n < 8 ? 0.0 : static_cast<double>(same) / static_cast<double>(2 * n);
    return score;
  };
  // The same tidx, each side's first op held, and near either (one run ran a few ops more
  // before its ring began and a few more inside it: neither lines the rings up). The best
  // score wins; a tie keeps the same tidx, then the first ops held, then the nearer offset.
  int64_t best = 0, best_distance = 0;
  Score best_same = matches(0);
  auto consider = [&](int64_t off, int64_t distance) {
    const Score same = matches(off);
    if (same > best_same || (same == best_same && distance < best_distance)) {
      best = off;
      best_same = same;
      best_distance = distance;
    }
  };
  consider(own, 1);
  constexpr int64_t kNear = 32;
  for (int64_t d = 1; d <= kNear; ++d) {
    for (int64_t base : {int64_t{0}, own}) {
      consider(base - d, 1 + d);
      consider(base + d, 1 + d);
    }
  }
  return best;
}

// `producer_text(in_b, seq)`, when given, describes a producing op of A's or B's run ("aten::
// uniform_ at train.py:11", or "" when unknown), so that inputs made by another op in each run
// name those ops, not only their numbers.
// `inputs_hashed`: the runs were recorded with --hash all, which hashes memory an `empty`
// returned where an op reads it (under --hash outputs such an input is not hashed, and may
// be a tensor filled from Python data). `written_in_part(t)`, when given, names the `empty`
// whose memory input `t`'s last writer filled only in part ("" when it did not).
// `*uninitialized`, when given, is set where the cause is memory an `empty` returned, read
// unwritten.
const char* cause_of(const OpComparison& c, const OpRecord& a, const OpRecord& b,
                     bool after_structure, std::string* detail,
                     const std::function<std::string(bool, int64_t)>& producer_text = {},
                     const std::function<bool(const TensorRecord&)>& carries_nothing = {},
                     bool inputs_hashed = true,
                     const std::function<std::string(const TensorRecord&)>& written_in_part = {},
                     bool* uninitialized = nullptr) {
  auto tensor_at = [&](int i) -> const TensorRecord& { return a.tensors[static_cast<size_t>(i)]; };
  // B's tensor `i` when A's and B's were made by other ops: the same producer sits at the same
  // distance before the op (the streams are equal up to here). Another distance: the program
  // passed another tensor (operands swapped, another variable). Else nullptr.
  auto made_by_other_op = [&](int i) -> const TensorRecord* {
    const size_t k = static_cast<size_t>(i);
    if (k >= b.tensors.size()) return nullptr;
    const TensorRecord& ta = a.tensors[k];
    const TensorRecord& tb = b.tensors[k];
    if (ta.producer == tracer::kNoSeq || tb.producer == tracer::kNoSeq ||
        a.seq - ta.producer == b.seq - tb.producer)
      return nullptr;
    return &tb;
  };
  auto other_op_text = [&](const TensorRecord& ta, const TensorRecord& tb) {
    return "input " + std::to_string(ta.index) + " comes from another op in each run (A: op " +
           std::to_string(ta.producer) + ", B: op " + std::to_string(tb.producer);
  };
  // "; A's is aten::uniform_ at c.py:11, B's is ..." when both ops can be described, else "".
  auto which_ops = [&](const TensorRecord& ta, const TensorRecord& tb) -> std::string {
    if (!producer_text) return "";
    const std::string in_a = producer_text(false, ta.producer);
    const std::string in_b = producer_text(true, tb.producer);
    if (in_a.empty() || in_b.empty()) return "";
    // The same op at the same line in both: the line ran for several tensors, in another
    // order in each run (a loop over a set or a dict).
    if (in_a == in_b)
      return "; in both runs " + in_a + ", which ran more than once, in another order";
    // Each a random initialization at another line (a module's reset_parameters): this op
    // reads another module's parameter in one run, as tied weights do.
    auto init = [](const std::string& text) {
      return text.rfind("aten::normal_ ", 0) == 0 || text.rfind("aten::uniform_ ", 0) == 0;
    };
    return "; A's is " + in_a + ", B's is " + in_b +
           (init(in_a) && init(in_b)
                ? " (each a parameter's random initialization: in one run this reads another "
                  "module's parameter, as tied weights do, self.out.weight = self.emb.weight in "
                  "one run only, or another parameter passed)"
                : "");
  };
  // Tensor `k`'s producer when one run's recording no longer holds it (a --ring kept only the
  // last ops, a bundle trimmed the earlier ones), as "op N of A" (A's first), else "".
  auto dropped_producer = [&](int k) -> std::string {
    if (!producer_text) return "";
    const TensorRecord& ta = tensor_at(k);
    if (ta.producer != tracer::kNoSeq && producer_text(false, ta.producer).empty())
      return "op " + std::to_string(ta.producer) + " of A";
    if (static_cast<size_t>(k) >= b.tensors.size()) return "";
    const TensorRecord& tb = b.tensors[static_cast<size_t>(k)];
    if (tb.producer != tracer::kNoSeq && producer_text(true, tb.producer).empty())
      return "op " + std::to_string(tb.producer) + " of B";
    return "";
  };
  if (!c.structure.empty()) {
    *detail = c.structure;
    return "structure";
  }
  if (c.input >= 0) {
    const TensorRecord& t = tensor_at(c.input);
    const size_t k = static_cast<size_t>(c.input);
    const bool b_made = k < b.tensors.size() && b.tensors[k].producer != tracer::kNoSeq;
    if (t.producer == tracer::kNoSeq && b_made && after_structure) {
      // Data from outside in A, written by an op of the change in B (`xb[5, 7] = 3.0`).
      *detail = "input " + std::to_string(t.index) + " was written by op " +
                std::to_string(b.tensors[k].producer) +
                " in B, one of the ops of the structural change";
      return "structure";
    }
    // Made by a recorded op in B, by none A holds: A's recording began after it, as the
    // mirror case below says for B.
    if (t.producer == tracer::kNoSeq && b_made) {
      *detail = "input " + std::to_string(t.index) + " differs; op " +
                std::to_string(b.tensors[k].producer) +
                " made it in B, and no op A holds made it in A (A's recording begins later, "
                "or A's came from outside torch's ops): where it came to differ was not compared";
      return "external_input";
    }
    if (t.producer == tracer::kNoSeq) {
      *detail = "input " + std::to_string(t.index) +
                " differs and no recorded op produced it (data from outside torch ops: Python "
                "data, NumPy, a file, a DataLoader worker)";
      return "external_input";
    }
    if (after_structure) {
      *detail = "input " + std::to_string(t.index) + " comes from ops changed by the structural change";
      return "structure";
    }
    // Made by an op the recording no longer holds (a --ring kept only the last ops, a bundle
    // trimmed the earlier ones): the difference was made there, before the compared ops.
    if (const std::string dropped = dropped_producer(c.input); !dropped.empty()) {
      *detail = "input " + std::to_string(t.index) + " differs and " + dropped +
                ", which made it, is not in the recording (a --ring kept only the last ops, or "
                "a bundle trimmed the earlier ones): the runs differed before the recorded ops "
                "begin (record a longer --ring, or with --steps around the step)";
      return "external_input";
    }
    if (const TensorRecord* other = made_by_other_op(c.input)) {
      *detail = other_op_text(t, *other) +
                "): the code passes another tensor here (operands swapped, another variable, "
                "tensors created in another order, or an order chosen at run time such as a "
                "shuffle)" + which_ops(t, *other);
      return "structure";
    }
    const TensorRecord* tb = static_cast<size_t>(c.input) < b.tensors.size()
                                 ? &b.tensors[static_cast<size_t>(c.input)]
                                 : nullptr;
    // A hash carried from the same producer (not read again) that differs, while that op's
    // outputs matched: another of its outputs (`a, b = x.chunk(2)`, then `b + a`).
    const bool carried = t.status == tracer::TensorStatus::kKnown ||
                         t.status == tracer::TensorStatus::kView;
    if (tb && carried && tb->status == t.status && tb->producer != tracer::kNoSeq) {
      *detail = "input " + std::to_string(t.index) + " is another of op " +
                std::to_string(t.producer) +
                "'s outputs (or views) in each run: the code passes another tensor here "
                "(operands swapped, another variable, or an order chosen at run time)";
      return "structure";
    }
    // The op wrote only a part of it (a row of a padding buffer) into memory an `empty`
    // returned: the rest was never written.
    if (const std::string maker = written_in_part ? written_in_part(t) : std::string(); !maker.empty()) {
      *detail = "input " + std::to_string(t.index) + " differs although op " +
                std::to_string(t.producer) + ", which wrote it last, matched: that op wrote only "
                "a part of it, into memory that " + maker + " returned uninitialized; the rest, "
                "which no recorded op wrote, is uninitialized memory, different in every run "
                "(a buffer from torch.empty filled in part, such as padding, where zeros were "
                "meant), unless the program filled it outside torch's ops";
      if (uninitialized) *uninitialized = true;
      return "external_input";
    }
    // Made by a recorded op in A, by none B holds: B's recording began after it (another
    // --steps window), or B's came from outside torch's ops. Nothing of its making was compared.
    if (tb && tb->producer == tracer::kNoSeq) {
      *detail = "input " + std::to_string(t.index) + " differs; op " + std::to_string(t.producer) +
                " made it in A, and no op B holds made it in B (B's recording begins later, "
                "or B's came from outside torch's ops): where it came to differ was not compared";
      return "external_input";
    }
    *detail = "input " + std::to_string(t.index) + " differs although op " +
              std::to_string(t.producer) +
              ", which made it, matched: its contents were filled or changed outside torch's "
              "ops (a tensor built from Python data, a write through .numpy() or a data "
              "pointer), or by another thread";
    return "external_input";
  }
  // After a structural change, an input made another way in each run comes from the changed
  // ops. Views are not compared by value, so say how it differs. One exception stays `layout`:
  // a view in one run and new data laid out otherwise in the other (a `.contiguous()` copy
  // inserted), where the values are likely the same and the layout is what changed.
  if (after_structure && c.provenance >= 0 && c.layout < 0) {
    *detail = "input " + std::to_string(tensor_at(c.provenance).index) +
              " comes from ops changed by the structural change (recorded as a view in one "
              "run and as new data in the other, so its values were not compared)";
    return "structure";
  }
  // A view in both runs, of other memory (another slice of the batch, taken by an op the
  // change inserted): the values it reads were not compared, and likely differ.
  if (after_structure && c.view >= 0 && c.provenance < 0 && c.layout < 0) {
    *detail = "input " + std::to_string(tensor_at(c.view).index) +
              " comes from ops changed by the structural change (a view of other memory in each "
              "run; not compared by value)";
    return "structure";
  }
  // Unless the op's output differs beyond what another path's rounding makes (NaN in one run
  // only, a large distance): then the view read other values.
  if (after_structure && c.provenance >= 0 && c.layout >= 0 && c.output >= 0 &&
      static_cast<size_t>(c.output) < b.tensors.size()) {
    const hashing::Summary& sa = tensor_at(c.output).summary;
    const hashing::Summary& sb = b.tensors[static_cast<size_t>(c.output)].summary;
    // Integers (token ids, indices) read in another layout are the same numbers, whatever
    // path the kernel takes: the output may differ only by another order of float sums over
    // them. Float data in another layout may send the kernel down another path, with rounding
    // of its own.
    const std::string layout_dtype = hashing::dtype_name(tensor_at(c.layout).dtype);
    const bool integers = layout_dtype.rfind("int", 0) == 0 || layout_dtype.rfind("uint", 0) == 0 ||
                          layout_dtype == "bool";
    const double beyond_rounding =
        integers ? std::max(1e-5, reorder_limit(hashing::dtype_name(tensor_at(c.output).dtype)))
                 : 1e-3;
    if (sa.valid && sb.valid &&
        (sa.nan_count != sb.nan_count || sa.inf_count != sb.inf_count ||
         summary_distance(sa, sb) > beyond_rounding)) {
      *detail = "input " + std::to_string(tensor_at(c.provenance).index) +
                " comes from ops changed by the structural change (recorded as a view in one "
                "run and as new data in the other, so its values were not compared), and output " +
                std::to_string(tensor_at(c.output).index) +
                " differs beyond rounding: the input holds other values";
      return "structure";
    }
  }
  if (after_structure && c.provenance < 0 && c.layout >= 0 &&
      tensor_at(c.layout).role == TensorRole::kInput &&
      tensor_at(c.layout).status == tracer::TensorStatus::kView) {
    *detail = "input " + std::to_string(tensor_at(c.layout).index) +
              " comes from ops changed by the structural change (a view laid out otherwise in "
              "each run; not compared by value)";
    return "structure";
  }
  if (c.layout >= 0) {
    const TensorRecord& t = tensor_at(c.layout);
    *detail = std::string(t.role == TensorRole::kInput ? "input " : "output ") +
              std::to_string(t.index) +
              " has the same shape and another memory layout (strides): a kernel may take "
              "another path, with other rounding";
    return "layout";
  }
  if (c.arg >= 0) {
    // Identical only where both runs hashed them (a run recorded with --hash none holds no
    // values to compare).
    bool inputs_compared = false, has_inputs = false, hashed_a = false, hashed_b = false;
    for (size_t k = 0; k < a.tensors.size(); ++k) {
      const TensorRecord& t = a.tensors[k];
      if (t.role != TensorRole::kInput) continue;
      has_inputs = true;
      const bool in_a = tensor_comparable(t);
      const bool in_b = k < b.tensors.size() && tensor_comparable(b.tensors[k]);
      hashed_a = hashed_a || in_a;
      hashed_b = hashed_b || in_b;
      inputs_compared = inputs_compared || (in_a && in_b);
    }
    *detail = !has_inputs || inputs_compared
                  ? "a non-tensor argument differs; tensor inputs are identical"
                  : std::string("a non-tensor argument differs; tensor inputs were not hashed") +
                        (hashed_a ? " in B" : hashed_b ? " in A" : "");
    return "arguments";
  }
  if (c.rng) {
    *detail = after_structure
                  ? "random op whose generator state differs (random numbers drawn by the changed "
                    "ops before it, or a different seed)"
                  : "random op whose generator state differs (a different seed, a generator "
                    "state set or restored differently, or random numbers drawn where no "
                    "recorded op shows it)";
    return "rng";
  }
  if (c.view >= 0 && !after_structure) {
    // A view whose producer the recording no longer holds (a ring, a trimmed bundle): its
    // hash comes from a base made before the compared ops, whose values may be what differs.
    if (const std::string dropped = dropped_producer(c.view); !dropped.empty()) {
      *detail = "input " + std::to_string(tensor_at(c.view).index) + " is a view of a tensor that " +
                dropped +
                " made, which is not in the recording (a --ring kept only the last ops, or a "
                "bundle trimmed the earlier ones), and differs (its values or which memory it "
                "views): the runs differed before the recorded ops begin (record a longer "
                "--ring, or with --steps around the step)";
      return "external_input";
    }
    *detail = "input " + std::to_string(tensor_at(c.view).index) +
              " is a view of other memory in each run (another slice or offset, or a view of "
              "another tensor): the code passes another tensor here (operands swapped, another "
              "index)";
    return "structure";
  }
  // A view in one run, new data in the other, with the streams equal up to here: made by
  // other ops, so the code passes another tensor.
  if (c.provenance >= 0 && !after_structure) {
    if (const TensorRecord* other = made_by_other_op(c.provenance)) {
      *detail = other_op_text(tensor_at(c.provenance), *other) +
                "; a view in one, new data in the other): the code passes another tensor here "
                "(another variable, or an order chosen at run time)" +
                which_ops(tensor_at(c.provenance), *other);
      return "structure";
    }
  }
  // An input whose values were not recorded (a sparse tensor, an internal buffer) may carry
  // the difference in: after a structural change it comes from the changed ops.
  const TensorRecord* unhashed = nullptr;
  for (size_t k = 0; k < a.tensors.size(); ++k) {
    const TensorRecord& t = a.tensors[k];
    if (t.role != TensorRole::kInput) continue;
    if (tensor_comparable(t) && (k >= b.tensors.size() || tensor_comparable(b.tensors[k])))
      continue;
    // An input that brings no values in (a buffer the op overwrites unread, a None).
    if (carries_nothing && carries_nothing(t)) continue;
    // One made by another op in each run (a sparse matrix swapped for another) is the answer.
    if (const TensorRecord* other = after_structure ? nullptr : made_by_other_op(static_cast<int>(k))) {
      *detail = other_op_text(t, *other) + "; not hashed, so its values were not compared): the "
                "code passes another tensor here (operands swapped, another variable, or an "
                "order chosen at run time)" + which_ops(t, *other);
      return "structure";
    }
    if (unhashed == nullptr) unhashed = &t;
  }
  if (unhashed != nullptr && after_structure) {
    *detail = "input " + std::to_string(unhashed->index) +
              " was not hashed (its values are not recorded) and comes after the structural "
              "change: it carries the change in";
    return "structure";
  }
  // An input `--hash outputs` left out that no recorded op made, or whose memory an
  // `empty`-family op returned and no recorded op wrote (`torch.tensor(1.001)`: filled from
  // Python numbers, then read unhashed): data from outside torch's ops, which is a likelier
  // reason than a kernel that computes otherwise from equal inputs, or than another input
  // written through `.numpy()`.
  const bool unwritten = unhashed != nullptr && unhashed->status == tracer::TensorStatus::kUninitialized;
  if (unwritten && inputs_hashed) {
    // Read uninitialized by an op that also writes it (`acc += g` into a torch.empty_like):
    // garbage that differs in every run, unless the program filled it outside torch's ops.
    std::string maker = producer_text && unhashed->producer != tracer::kNoSeq
                            ? producer_text(false, unhashed->producer)
                            : std::string();
    maker = maker.empty() ? "an op of the empty family"
                          : maker + " (seq " + std::to_string(unhashed->producer) + ")";
    *detail = "identical arguments, generator state and hashed inputs, different output; input " +
              std::to_string(unhashed->index) + " is memory that " + maker +
              " returned uninitialized, which no recorded op wrote since: uninitialized memory, "
              "different in every run, read here by an op that writes it in place (torch.empty "
              "where zeros or ones were meant, then +=, mul_), unless the program filled it "
              "outside torch's ops (.numpy(), data_ptr)";
    if (uninitialized) *uninitialized = true;
    return "external_input";
  }
  if (unhashed != nullptr && (unwritten || (unhashed->status == tracer::TensorStatus::kSkipped &&
                                            unhashed->producer == tracer::kNoSeq))) {
    *detail = "identical arguments, generator state and hashed inputs, different output; input " +
              std::to_string(unhashed->index) + " was not hashed (--hash outputs) and " +
              (unwritten ? "no recorded op wrote its memory (an empty-family op returned it)"
                         : "no recorded op produced it") +
              ": data from outside torch's ops (Python numbers, NumPy, a file, a DataLoader "
              "worker) that most likely differs (--hash all would tell)";
    return "external_input";
  }
  *detail = unhashed == nullptr
                ? "identical inputs, arguments and generator state, different output"
                : "identical arguments, generator state and hashed inputs, different output; input " +
                      std::to_string(unhashed->index) +
                      " was not hashed (its values are not recorded) and may differ";
  if (c.provenance >= 0) {
    // The same op made it in both runs, a view in one and new data in the other: its own
    // input was a tensor tdbg knew in one run and data it had not hashed in the other (from
    // outside torch's ops, or left out by --hash outputs). That input, not a kernel or another
    // input whose hash matched, most likely brings the difference in.
    const TensorRecord& t = tensor_at(c.provenance);
    const std::string maker = producer_text ? producer_text(false, t.producer) : std::string();
    if (unhashed == nullptr) *detail = "identical arguments, generator state and compared inputs, different output";
    *detail += "; input " + std::to_string(t.index) +
               " was made another way in each run (a view of an earlier tensor in one, new data "
               "in the other), so its values were not compared: it most likely brings the "
               "difference in" +
               (maker.empty() ? std::string()
                              : ", from the data " + maker + " took it from, which tdbg knew "
                                "as a recorded tensor in one run and had not hashed in the other "
                                "(data from outside torch's ops, or not hashed under --hash outputs)");
    return "external_input";
  }
  // An op that takes no tensor and draws no random numbers computes from its arguments alone
  // (`zeros`, `arange`): other data with equal arguments came from outside torch's ops, which
  // it read (`torch.from_file`, memory it wraps).
  if (c.output >= 0 && !(a.flags & tracer::kOpRandom) &&
      std::none_of(a.tensors.begin(), a.tensors.end(),
                   [](const TensorRecord& t) { return t.role == TensorRole::kInput; })) {
    *detail = "identical arguments and no tensor input, different output: the op reads data "
              "from outside torch's ops (a file such as torch.from_file's, or memory it wraps), "
              "which differs";
    return "external_input";
  }
  // The other explanation, an input changed outside torch's ops since its hash was carried, is
  // weighed by `compare_runs` against the runs' settings (see `carried_input`).
  return "nondeterministic";
}

// The largest relative difference of a differing tensor's summaries (`tensor_pair_json`) when
// it is of the size rounding makes for its dtype (`reorder_limit` with `reorder`); -1 when
// larger, or when there are no summaries to tell.
double rounding_level_difference(const json& tensor, bool reorder = false) {
  if (!tensor.is_object() || !tensor.value("rel_diff", json()).is_object()) return -1;
  const std::string dtype = tensor.value("dtype", std::string());
  const double limit = reorder ? reorder_limit(dtype) : rounding_limit(dtype);
  if (limit < 0) return -1;
  double largest = 0;
  for (const auto& [name, value] : tensor["rel_diff"].items()) {
    if (!value.is_number()) return -1;
    largest = std::max(largest, value.get<double>());
  }
  return largest > 0 && largest <= limit ? largest : -1;
}

// Whether the pair has an output compared by its values (hashed or known, not a view).
bool has_value_output(const OpRecord& a, const OpRecord& b) {
  for (size_t k = 0; k < a.tensors.size() && k < b.tensors.size(); ++k)
    if (a.tensors[k].role == TensorRole::kOutput && tensor_comparable(a.tensors[k]) &&
        tensor_comparable(b.tensors[k]) && a.tensors[k].status != tracer::TensorStatus::kView &&
        b.tensors[k].status != tracer::TensorStatus::kView)
      return true;
  return false;
}

// Whether the pair computed the same result from inputs that differ: only inputs differ and
// it has outputs compared by value, every one equal (`ones_like` of another loss, which reads
// its shape; `relu` of other negatives). The difference goes no further through this op, so
// it is not where the values after a structural change first differ.
bool same_result_of_other_inputs(const OpRecord& a, const OpRecord& b, const OpComparison& c) {
  return c.input >= 0 && c.output < 0 && c.arg < 0 && !c.rng && c.structure.empty() &&
         !c.unfinished && has_value_output(a, b);
}

// Why ops that moved into other optimizer steps moved, most often (`describe`); where the runs
// load with another num_workers, `compare_runs` puts the DataLoader's prefetching instead.
constexpr char kStepsMoved[] =
    "optimizer.step() is called after another number of iterations in each run, such as a "
    "gradient-accumulation condition (i % N == 0 against (i + 1) % N == 0), so each update sees "
    "other batches";

// Why ops without backward or optimizer ops moved into other optimizer steps, most often.
constexpr char kBlockMoved[] =
    "a block without backward or optimizer ops (an evaluation pass, logging, a checkpoint) runs "
    "after another optimizer step in each run";

// Whether an optimizer's step() (a region of kind 1) of `thread` ran over any of the seqs
// `first` to `last` of `reader`.
bool optimizer_step_within(const Reader& reader, int64_t thread, int64_t first, int64_t last) {
  bool in_step = false;
  (void)reader.query("SELECT 1 FROM regions WHERE kind = 1 AND thread = " + std::to_string(thread) +
                         " AND start_seq <= " + std::to_string(last) +
                         " AND (end_seq IS NULL OR end_seq >= " + std::to_string(first) +
                         ") LIMIT 1",
                     [&](const std::vector<std::string>&) {
                       in_step = true;
                       return false;
                     });
  return in_step;
}

// Whether `op` of `reader` ran inside an optimizer's step().
bool in_optimizer_step(const Reader& reader, const OpRecord& op) {
  return optimizer_step_within(reader, op.thread, op.seq, op.seq);
}

// An argument that says whether the module calling the op is in training mode (dropout's
// `train`, batch norm's `training`).
bool is_mode_argument(const std::string& name) { return name == "train" || name == "training"; }

// A structural change inside optimizer.step() in both runs, whose optimizers stepped with other
// settings there (nesterov, amsgrad, maximize, a weight decay from 0, a param group added,
// another class): those settings, which add or remove the ops, compared
// (`compare_optimizer_settings`); null where the settings are the same.
// Where the change lies outside the steps (Adagrad makes its state as it is made; backward
// skips a frozen layer), only optimizers of other classes or with other parameters, at each
// run's first step after it, say why.
json optimizer_change(Pair& p, const Hunk& h) {
  // The op inside a step where the change begins in each run: the first of its part, or the
  // one before it (ops inserted at a step's end, the other run's part empty there).
  auto op_at_change = [](Side& s, int64_t begin) -> std::optional<OpRecord> {
    for (int64_t at : {begin, begin - 1}) {
      std::optional<OpRecord> op = at >= 0 ? s.reader->op_at(s.thread, at) : std::nullopt;
      if (op && in_optimizer_step(*s.reader, *op)) return op;
    }
    return std::nullopt;
  };
  // The first op of the first step at or after the change, where it lies outside the steps.
  auto first_step_after = [](Side& s, int64_t begin) -> std::optional<OpRecord> {
    const auto op = s.reader->op_at(s.thread, begin);
    if (!op) return std::nullopt;
    int64_t seq = -1;
    (void)s.reader->query(
        "SELECT start_seq FROM regions WHERE kind = 1 AND thread = " + std::to_string(op->thread) +
            " AND start_seq >= " + std::to_string(op->seq) + " ORDER BY start_seq LIMIT 1",
        [&](const std::vector<std::string>& row) {
          seq = std::atoll(row[0].c_str());
          return false;
        });
    return seq >= 0 ? s.reader->op(seq) : std::nullopt;
  };
  auto a = op_at_change(p.a, h.a_begin);
  auto b = op_at_change(p.b, h.b_begin);
  const bool inside = a && b;
  if (!inside) {
    a = first_step_after(p.a, h.a_begin);
    b = first_step_after(p.b, h.b_begin);
    if (!a || !b) return nullptr;
  }
  json settings = compare_optimizer_settings(*p.a.reader, {a->thread, a->seq}, *p.b.reader,
                                             {b->thread, b->seq});
  if (!settings.is_object()) return nullptr;
  const bool classes = settings["a"]["optimizer"] != settings["b"]["optimizer"];
  // Other parameters to update (a layer frozen in one run, its parameters left out of the
  // optimizer), wherever the change lies: backward computes no gradient for them.
  const bool parameters =
      std::any_of(settings["differs"].begin(), settings["differs"].end(), [](const json& d) {
        return d.value("name", std::string()) == "params" ||
               d.value("name", std::string()) == "param groups";
      });
  if (!classes && !parameters && (!inside || settings["differs"].empty())) return nullptr;
  settings["step"] = a->step;
  return settings;
}

// A change only one run has that holds whole optimizer steps, in a run that steps more often
// (optimizer.step() called once more): {"run": "A" | "B", "steps": how many, "steps_a", "steps_b":
// each thread's step count}; null otherwise.
json extra_steps(Pair& p, const Hunk& h) {
  const bool in_a = h.a_end > h.a_begin, in_b = h.b_end > h.b_begin;
  if (in_a == in_b) return nullptr;
  Side& side = in_a ? p.a : p.b;
  const auto first = side.reader->op_at(side.thread, in_a ? h.a_begin : h.b_begin);
  const auto last = side.reader->op_at(side.thread, (in_a ? h.a_end : h.b_end) - 1);
  if (!first || !last) return nullptr;
  auto count = [](Side& s, const std::string& where) {
    int64_t n = 0;
    (void)s.reader->query("SELECT COUNT(*) FROM regions WHERE kind = 1 AND thread = " +
                              std::to_string(s.thread) + where,
                          [&](const std::vector<std::string>& row) {
                            n = std::atoll(row[0].c_str());
                            return false;
                          });
    return n;
  };
  const int64_t whole = count(side, " AND start_seq >= " + std::to_string(first->seq) +
                                        " AND end_seq <= " + std::to_string(last->seq));
  // (Moved steps, a gradient-accumulation condition, leave both runs as many.)
  const int64_t steps_a = count(p.a, ""), steps_b = count(p.b, "");
  if (whole == 0 || (in_a ? steps_a <= steps_b : steps_b <= steps_a)) return nullptr;
  return {{"run", in_a ? "A" : "B"}, {"steps", whole}, {"steps_a", steps_a}, {"steps_b", steps_b}};
}

// A structural change where one side runs an op in training mode (dropout, batch norm with
// `train`/`training` True) and the other side's part runs none: a module is in training mode
// in one run and in eval mode in the other (`model.eval()` forgotten runs dropout, and the
// transformer's slow path, where the other run has its eval fast path); ops autograd runs
// (a checkpointed forward run again in backward) do not count. {"run": "A" | "B",
// "op": the first such op (`op_brief_json`) with its "argument"}; null otherwise. Reads at
// most 4,096 ops of each side.
json mode_change(Pair& p, const Hunk& h) {
  auto first_training = [](Side& s, int64_t begin, int64_t end, std::string* argument) {
    std::optional<OpRecord> found;
    (void)s.reader->scan_ops(s.thread, begin, std::min(end, begin + 4096), /*with_tensors=*/true,
                             [&](const OpRecord& op) {
                               // Not a forward that autograd runs again (checkpointing's
                               // recomputation, in training mode in both runs).
                               if (op.flags & tracer::kOpBackward) return true;
                               for (const tracer::ArgRecord& a : op.args) {
                                 if (!is_mode_argument(s.strings.text(a.name)) ||
                                     s.strings.text(a.value) != "True")
                                   continue;
                                 *argument = s.strings.text(a.name);
                                 found = op;
                                 return false;
                               }
                               return true;
                             });
    return found;
  };
  // Where the other side runs nothing, the side's outermost ops must all be such ops (`if
  // self.training: x = dropout(x)`): a whole extra iteration (a gradient-accumulation
  // condition) or the rest of a run that the other ended before runs dropout and batch norm
  // in training mode too, with everything else.
  auto only_mode_ops = [](Side& s, int64_t begin, int64_t end) {
    bool only = true;
    int depth = -1;
    (void)s.reader->scan_ops(s.thread, begin, std::min(end, begin + 4096), /*with_tensors=*/true,
                             [&](const OpRecord& op) {
                               if (op.flags & tracer::kOpBackward) return true;
                               if (depth >= 0 && op.depth > depth) return true;  // nested
                               depth = op.depth;
                               only = std::any_of(op.args.begin(), op.args.end(),
                                                  [&](const tracer::ArgRecord& a) {
                                                    return is_mode_argument(s.strings.text(a.name));
                                                  });
                               return only;
                             });
    return only;
  };
  std::string arg_a, arg_b;
  const auto in_a = first_training(p.a, h.a_begin, h.a_end, &arg_a);
  const auto in_b = first_training(p.b, h.b_begin, h.b_end, &arg_b);
  if (in_a.has_value() == in_b.has_value()) return nullptr;
  // Where it runs something, that must include the training op's module (the transformer's
  // eval fast path against its training path), not other work (a checkpoint saved where the
  // other run goes on training).
  auto runs_module = [](Side& s, int64_t begin, int64_t end, const std::string& module) {
    bool found = false;
    (void)s.reader->scan_ops(s.thread, begin, std::min(end, begin + 4096), /*with_tensors=*/false,
                             [&](const OpRecord& op) {
                               found = s.strings.text(op.module) == module;
                               return !found;
                             });
    return found;
  };
  Side& trained = in_a ? p.a : p.b;
  Side& other = in_a ? p.b : p.a;
  const int64_t t_begin = in_a ? h.a_begin : h.b_begin, t_end = in_a ? h.a_end : h.b_end;
  const int64_t o_begin = in_a ? h.b_begin : h.a_begin, o_end = in_a ? h.b_end : h.a_end;
  const std::string module = trained.strings.text((in_a ? *in_a : *in_b).module);
  if (o_begin == o_end ? !only_mode_ops(trained, t_begin, t_end)
                       : module.empty() || !runs_module(other, o_begin, o_end, module))
    return nullptr;
  json op = op_brief_json(*trained.reader, trained.strings, in_a ? *in_a : *in_b);
  op["argument"] = in_a ? arg_a : arg_b;
  return {{"run", in_a ? "A" : "B"}, {"op", std::move(op)}};
}

// Tracks how a difference spreads over the ops after it, at bounded cost.
class Growth {
 public:
  // `read_out`: the op reads a differing value into Python (`reads_into_python`).
  void add_pair(const OpRecord& a, const OpRecord& b, const OpComparison& c, bool read_out) {
    ++compared_;
    note_noise_views(a);
    if (first_nonfinite_.run == 0 && c.output >= 0) note_nonfinite(a, b);
    double distance = -1;
    // In values, or in shape or dtype (`structure`: the pair's tensors are not alike).
    const bool output_differs = c.output >= 0 || !c.structure.empty();
    if (c.differs()) {
      ++diverged_;
      for (size_t k = 0; k < a.tensors.size() && k < b.tensors.size(); ++k) {
        const TensorRecord& ta = a.tensors[k];
        const TensorRecord& tb = b.tensors[k];
        if (ta.role != TensorRole::kOutput || !tensor_comparable(ta) || !tensor_comparable(tb) ||
            ta.hash == tb.hash)
          continue;
        const double d = output_distance(a, b, k);
        distance = std::max(distance, d);
        // After the first pair: whether every later difference is of rounding's size.
        if (compared_ > 1) {
          const double limit = rounding_limit(hashing::dtype_name(ta.dtype));
          // A float view without a summary of its own says nothing (its base's output does);
          // other values of a dtype that does not round are beyond rounding.
          // Equal summaries of differing values (the sign of a zero or of an infinity, which
          // the summaries do not keep; elements in another order) vouch for nothing either.
          if (limit < 0 || d > limit || d == 0) later_beyond_rounding_ = true;
          later_max_ = std::max(later_max_, d);
          if (ta.summary.inf_count > 0 || tb.summary.inf_count > 0) later_infinities_ = true;
        }
      }
    }
    if (compared_ > 1 && output_differs && c.output < 0) later_beyond_rounding_ = true;
    // Whether the difference went on through this op: an output differs that its inputs made
    // differ (not its own arguments or generator alone), or differing inputs leave the
    // recording through an op with no output compared (`.item()` into Python), or pass on as
    // views (`a[0].item()`: a view's hash is not its values, its readers are not compared).
    // A differing input that an op with equal outputs absorbs ends the chain that made it:
    // libtorch's clip_grad_norm_ fills a tensor with max_norm (the argument that differs),
    // divides it in place by the norm and clamps the quotient to 1, which absorbs it.
    if (!unabsorbed_.empty())
      for (const TensorRecord& t : a.tensors)
        if (t.role == TensorRole::kInput && t.producer != tracer::kNoSeq &&
            unabsorbed_.count(t.producer) &&
            (output_differs || has_value_output(a, b)))  // carried on below, or absorbed
          unabsorbed_.erase(t.producer);
    if (output_differs && c.input >= 0) {
      // Made from differing inputs: the difference goes on, unless what it made is absorbed.
      if (unabsorbed_.size() < kMaxUnabsorbed)
        unabsorbed_.insert(a.seq);
      else
        ++carried_;
    } else if ((output_differs && c.arg < 0 && !c.rng) ||
               ((c.input >= 0 || c.view >= 0) && !has_value_output(a, b))) {
      ++carried_;
    }
    StepRow& row = step_row(a.step);
    ++row.ops;
    if (c.differs()) ++row.diverged;
    if (read_out) {
      ++row.read_out;
      if (first_read_out_.first < 0) first_read_out_ = {a.seq, b.seq};
    }
    if (output_differs) {
      ++row.outputs_differ;
      ++outputs_differ_;
      if (!c.structure.empty()) {
        ++row.shapes_differ;
        ++shapes_differ_;
      }
    }
    if (distance > row.max_distance) row.max_distance = distance;
    if (distance > max_distance_) max_distance_ = distance;
    window_max_ = std::max(window_max_, distance);
    mark_point();
  }
  // A pair the aligner made of a forward op and an op autograd ran: unrelated work, which
  // counts as changed structure, not as values.
  void add_crossed_pair(const OpRecord& a) {
    ++compared_;
    ++carried_;
    ++diverged_;
    ++structural_ops_;
    ++structural_a_;
    ++structural_b_;
    StepRow& row = step_row(a.step);
    ++row.ops;
    ++row.diverged;
    ++row.structural;
    mark_point();
  }
  // `by_step`: the hunk's ops per step (of its longer side), as far as they were read; the
  // rest count in the last step read. `past_end`: the hunk ends both threads and the run of
  // the other side ended early (a crash) at step `other_last_step`: the ops of later steps
  // are only in `past_end`'s run ('A' or 'B'), not a change the other made.
  void add_hunk(const Hunk& h, const std::map<int64_t, int64_t>& by_step, char past_end = 0,
                int64_t other_last_step = 0) {
    ++hunks_;
    int64_t ops = std::max(h.a_end - h.a_begin, h.b_end - h.b_begin);
    compared_ += ops;
    diverged_ += ops;
    structural_ops_ += ops;
    structural_a_ += h.a_end - h.a_begin;
    structural_b_ += h.b_end - h.b_begin;
    int64_t left = ops;
    for (auto it = by_step.begin(); it != by_step.end() && left > 0; ++it) {
      const int64_t n = std::next(it) == by_step.end() ? left : std::min(left, it->second);
      StepRow& row = step_row(it->first);
      row.ops += n;
      row.diverged += n;
      row.structural += n;
      if (past_end != 0 && it->first > other_last_step) {
        row.past_end += n;
        past_end_ops_ += n;
        past_end_run_ = past_end;
      }
      left -= n;
    }
    if (left > 0) {
      StepRow& row = step_row(0);
      row.ops += left;
      row.diverged += left;
      row.structural += left;
    }
    mark_point();
  }
  json to_json(bool complete) const {
    json steps = json::array();
    for (const auto& [step, row] : steps_) {
      steps.push_back(
          {{"step", step},
           {"ops", row.ops},
           {"diverged", row.diverged},
           {"structural_ops", row.structural},
           {"outputs_differ", row.outputs_differ},
           {"shapes_differ", row.shapes_differ},
           {"read_out", row.read_out},
           {"max_distance", row.max_distance < 0 ? json(nullptr) : json(row.max_distance)}});
      if (row.past_end > 0) steps.back()["past_end"] = row.past_end;
    }
    return {{"ops_compared", compared_},
            {"ops_diverged", diverged_},
            {"structural_changes", hunks_},
            {"structural_ops", structural_ops_},
            {"outputs_differ", outputs_differ_},
            {"shapes_differ", shapes_differ_},
            {"complete", complete},
            {"max_distance", max_distance_ < 0 ? json(nullptr) : json(max_distance_)},
            {"points", points_},
            {"steps", steps},
            {"steps_truncated", steps_truncated_},
            {"past_end_ops", past_end_ops_},
            {"past_end_run", past_end_run_ ? json(std::string(1, past_end_run_)) : json(nullptr)},
            {"inputs_only", kept_json()}};
  }
  // A pair with an input of other values and every output equal: `name`'s inputs that
  // differ are state written in place, which no recorded output carries (batch norm's
  // running statistics under another momentum), or values absorbed (`relu` of other negative
  // numbers). Kept for a few ops, with the steps where they differ.
  void add_kept_inputs(const OpRecord& a, const OpRecord& b, const std::string& name,
                       bool from_change, const std::string& collective) {
    // Nested in an op kept already (`batch_norm` → `native_batch_norm`): the same inputs.
    const bool nested = std::find(kept_seqs_.begin(), kept_seqs_.end(), a.parent) != kept_seqs_.end();
    kept_seqs_.push_back(a.seq);
    if (kept_seqs_.size() > 16) kept_seqs_.pop_front();
    if (nested) return;
    auto it = std::find_if(kept_.begin(), kept_.end(),
                           [&](const KeptInputs& k) { return k.name == name; });
    if (it == kept_.end()) {
      if (kept_.size() == kMaxKept) return;
      kept_.push_back({name, {}, a.step, a.step, 0, true, collective});
      it = std::prev(kept_.end());
    }
    ++it->pairs;
    it->from_change = it->from_change && from_change;
    if (it->collective != collective) it->collective.clear();
    it->last_step = a.step;
    for (size_t k = 0; k < a.tensors.size() && k < b.tensors.size(); ++k) {
      const TensorRecord& ta = a.tensors[k];
      const TensorRecord& tb = b.tensors[k];
      if (ta.role == TensorRole::kInput && ta.status != tracer::TensorStatus::kView &&
          tensor_comparable(ta) && tensor_comparable(tb) && ta.hash != tb.hash)
        it->inputs.insert(ta.index);
    }
  }
  int64_t compared() const { return compared_; }
  // The first pair where one run's output holds NaN or Inf and the other's none: 'A' or 'B'
  // (0: none), and its seqs.
  struct NonFinite {
    char run = 0;
    int64_t seq_a = -1, seq_b = -1;
  };
  NonFinite first_nonfinite() const { return first_nonfinite_; }
  // The seqs (A, B) of the first pair that read differing values into Python, or -1s.
  std::pair<int64_t, int64_t> first_read_out() const { return first_read_out_; }
  // Ops in the structural changes added so far.
  int64_t structural_ops() const { return structural_ops_; }
  // The ops in structural changes of the run that has fewer (none where the other run only
  // inserted: an evaluation pass of its own).
  int64_t structural_ops_fewer_side() const { return std::min(structural_a_, structural_b_); }
  // The largest relative difference of the outputs after the first pair, when every one of
  // them is of rounding's size for its dtype (another summation order); -1 otherwise.
  // Whether some of those outputs hold infinities, whose signs the summaries do not keep.
  bool later_infinities() const { return later_infinities_; }
  // Every output that differs was made from equal inputs by an op whose own arguments or
  // generator differ, and no differing input left the recording: the difference reached no
  // other op's output (a clipping threshold never reached). Only of a walk with no structural
  // change and an output that differs.
  bool contained() const {
    return carried_ == 0 && unabsorbed_.empty() && hunks_ == 0 && outputs_differ_ > 0;
  }
  double later_rounding_level() const {
    return !later_beyond_rounding_ && later_max_ > 0 && hunks_ == 0 ? later_max_ : -1;
  }

 private:
  // The summary distance of output `k` of paired ops `a` and `b`, except for an output far
  // smaller than the op's inputs (below 64 ulps of the largest input: a bias gradient that is
  // zero in exact arithmetic, a difference of nearly equal values), which is rounding noise
  // whatever its own relative difference: its values' difference is measured against the
  // inputs' magnitude instead. Such an output is noise to the ops that read it too (a
  // gradient accumulated from it), with the same magnitude to be measured against.
  double output_distance(const OpRecord& a, const OpRecord& b, size_t k) {
    const TensorRecord& ta = a.tensors[k];
    const TensorRecord& tb = b.tensors[k];
    const hashing::Summary& sa = ta.summary;
    const hashing::Summary& sb = tb.summary;
    const double d = summary_distance(sa, sb);
    const std::string_view dtype = hashing::dtype_name(ta.dtype);
    const double limit = rounding_limit(dtype);
    if (d <= limit || limit < 0 || ta.dtype != tb.dtype || sa.nan_count + sa.inf_count > 0)
      return d;
    double inputs = 0;
    for (const OpRecord* op : {&a, &b})
      for (const TensorRecord& t : op->tensors) {
        if (t.role != TensorRole::kInput || t.dtype != ta.dtype) continue;
        if (const auto noise = op == &a ? noise_.find(t.hash) : noise_.end(); noise != noise_.end())
          inputs = std::max(inputs, noise->second);
        if (tensor_comparable(t) && t.summary.valid &&
            t.summary.nan_count + t.summary.inf_count == 0)
          inputs = std::max({inputs, std::fabs(t.summary.min), std::fabs(t.summary.max)});
      }
    const double output =
        std::max({std::fabs(sa.min), std::fabs(sa.max), std::fabs(sb.min), std::fabs(sb.max)});
    if (inputs <= 0 || output >= 64 * dtype_epsilon(dtype) * inputs) return d;
    if (noise_.size() < kMaxNoise) noise_[ta.hash] = inputs;
    return std::max(std::fabs(sa.min - sb.min), std::fabs(sa.max - sb.max)) / inputs;
  }
  // A view of a noise tensor (a momentum buffer, `clone(grad).detach()`) is noise: views have
  // no values of their own to measure, and the ops that read one see the noise.
  void note_noise_views(const OpRecord& a) {
    if (noise_.empty() || noise_.size() >= kMaxNoise) return;
    double base = -1;
    for (const TensorRecord& t : a.tensors)
      if (t.role == TensorRole::kInput && t.index == 0)
        if (const auto it = noise_.find(t.hash); it != noise_.end()) base = it->second;
    if (base < 0) return;
    for (const TensorRecord& t : a.tensors)
      if (t.role == TensorRole::kOutput && t.status == tracer::TensorStatus::kView)
        noise_.emplace(t.hash, base);
  }
  void note_nonfinite(const OpRecord& a, const OpRecord& b) {
    for (size_t k = 0; k < a.tensors.size() && k < b.tensors.size(); ++k) {
      const TensorRecord& ta = a.tensors[k];
      const TensorRecord& tb = b.tensors[k];
      if (ta.role != TensorRole::kOutput || !ta.summary.valid || !tb.summary.valid) continue;
      const bool in_a = ta.summary.nan_count + ta.summary.inf_count > 0;
      const bool in_b = tb.summary.nan_count + tb.summary.inf_count > 0;
      if (in_a == in_b) continue;
      first_nonfinite_ = {in_a ? 'A' : 'B', a.seq, b.seq};
      return;
    }
  }
  NonFinite first_nonfinite_;
  static constexpr size_t kMaxNoise = 1 << 16;
  std::unordered_map<uint64_t, double> noise_;  // A's noise outputs: the magnitude they are of

  struct StepRow {
    int64_t ops = 0, diverged = 0;
    int64_t structural = 0;      // ops in structural changes (counted as diverged, unpaired)
    int64_t outputs_differ = 0;  // paired ops with an output of other values, shape or dtype
    int64_t shapes_differ = 0;   // of those, the ops with an output of another shape or dtype
    int64_t read_out = 0;        // differing ops with no tensor output (`.item()`)
    int64_t past_end = 0;        // structural ops of steps the other run ended before
    double max_distance = -1;
  };
  StepRow& step_row(int64_t step) {
    auto it = steps_.find(step);
    if (it != steps_.end()) return it->second;
    if (steps_.size() >= kMaxSteps) {
      steps_truncated_ = true;
      return overflow_;
    }
    return steps_[step];
  }
  // Samples at 1, 10, 100, ... ops after the divergence: how many diverged so far and the
  // largest summary distance seen since the previous sample.
  void mark_point() {
    if (compared_ < next_point_) return;
    points_.push_back({{"ops_after", compared_}, {"diverged", diverged_},
                       {"max_distance", window_max_ < 0 ? json(nullptr) : json(window_max_)}});
    window_max_ = -1;
    next_point_ *= 10;
  }
  struct KeptInputs {
    std::string name;
    std::set<int> inputs;  // tensor input indices that differ in some pair
    int64_t first_step = 0, last_step = 0, pairs = 0;
    bool from_change = true;  // every differing input was made by a structural change's ops
    std::string collective;   // the collective that wrote every differing input, if one did
  };
  json kept_json() const {
    json out = json::array();
    for (const KeptInputs& k : kept_) {
      out.push_back({{"op", k.name}, {"inputs", k.inputs}, {"first_step", k.first_step},
                     {"last_step", k.last_step}, {"pairs", k.pairs},
                     {"from_change", k.from_change}});
      if (!k.collective.empty()) out.back()["collective"] = k.collective;
    }
    return out;
  }
  static constexpr size_t kMaxSteps = 1000;
  static constexpr size_t kMaxKept = 4;
  std::vector<KeptInputs> kept_;
  std::deque<int64_t> kept_seqs_;  // the last pairs added to `kept_` (A's seq)
  int64_t compared_ = 0, diverged_ = 0, hunks_ = 0, structural_ops_ = 0, outputs_differ_ = 0;
  std::pair<int64_t, int64_t> first_read_out_{-1, -1};
  int64_t structural_a_ = 0, structural_b_ = 0;  // each run's ops in structural changes
  int64_t shapes_differ_ = 0;
  int64_t carried_ = 0;  // pairs through which the difference went on (see `add_pair`)
  // Ops (A's seq) whose outputs differ from differing inputs, until an op with equal outputs
  // reads them: a difference absorbed a few ops on went on through none (see `add_pair`).
  std::unordered_set<int64_t> unabsorbed_;
  static constexpr size_t kMaxUnabsorbed = 4096;
  int64_t past_end_ops_ = 0;
  char past_end_run_ = 0;
  double later_max_ = 0;
  bool later_beyond_rounding_ = false;
  bool later_infinities_ = false;
  double max_distance_ = -1, window_max_ = -1;
  int64_t next_point_ = 1;
  json points_ = json::array();
  std::map<int64_t, StepRow> steps_;
  StepRow overflow_;
  bool steps_truncated_ = false;
};

json tensor_pair_json(Pair& p, const OpRecord& a, const OpRecord& b, int index) {
  const TensorRecord& ta = a.tensors[static_cast<size_t>(index)];
  const TensorRecord& tb = b.tensors[static_cast<size_t>(index)];
  json j = {{"role", ta.role == TensorRole::kInput ? "input" : "output"},
            {"index", ta.index},
            {"dtype", hashing::dtype_name(ta.dtype)},
            {"shape", p.a.strings.text(ta.shape)},
            {"shape_b", p.b.strings.text(tb.shape)},
            {"hash_a", hex64(ta.hash)},
            {"hash_b", hex64(tb.hash)},
            {"status_a", tracer::tensor_status_name(ta.status)},
            {"status_b", tracer::tensor_status_name(tb.status)},
            {"producer_a", ta.producer == tracer::kNoSeq ? json(nullptr) : json(ta.producer)},
            {"producer_b", tb.producer == tracer::kNoSeq ? json(nullptr) : json(tb.producer)},
            {"summary_a", summary_json(ta.summary)},
            {"summary_b", summary_json(tb.summary)}};
  if (ta.summary.valid && tb.summary.valid) {
    const SummaryDifferences d = summary_differences(ta.summary, tb.summary);
    j["rel_diff"] = {{"min", d.min}, {"max", d.max}, {"sum", d.sum}, {"abs_sum", d.abs_sum}};
  } else {
    j["rel_diff"] = nullptr;
  }
  return j;
}

// The differing parts of an aligned op pair: cause, tensor, argument, generator state.
// An input whose hash was carried from its producer (not read again) matches by what torch's
// ops did to it: a write from outside them (through `.numpy()`, a data pointer) is not seen.
// The one carried longest (the oldest producer) is the likeliest to be stale; nullptr if none.
const TensorRecord* carried_longest(const OpRecord& a) {
  const TensorRecord* carried = nullptr;
  for (const TensorRecord& t : a.tensors) {
    if (t.role != TensorRole::kInput || t.producer == tracer::kNoSeq) continue;
    if (t.status != tracer::TensorStatus::kKnown && t.status != tracer::TensorStatus::kView)
      continue;
    if (carried == nullptr || t.producer < carried->producer) carried = &t;
  }
  return carried;
}

// `op_at_source` with the op's seq: "aten::empty at pad.py:10 (seq 96)".
std::string op_at_source_seq(const Reader& r, Strings& strings, const OpRecord& op) {
  return op_at_source(r, strings, op) + " (seq " + std::to_string(op.seq) + ")";
}

// The op that made the memory `view` looks at: up the chain of view ops (`slice` of `t` of
// ...), each the op whose output is that tensor, to the first whose output is not a view;
// nullopt where the chain cannot be followed (an op not held, more than 6 views).
std::optional<OpRecord> view_base(const Reader& r, const TensorRecord& view) {
  TensorRecord cur = view;
  for (int hops = 0; hops < 6 && cur.producer != tracer::kNoSeq; ++hops) {
    auto prod = r.op(cur.producer);
    if (!prod) return std::nullopt;
    const TensorRecord* out = nullptr;
    for (const TensorRecord& t : prod->tensors)
      if (t.role == TensorRole::kOutput && t.hash == cur.hash) out = &t;
    if (out == nullptr || out->status != tracer::TensorStatus::kView) return prod;
    const TensorRecord* base =
        viewed_input(*prod, *out, [](const TensorRecord& t) { return t.hash != 0; });
    if (base == nullptr) return std::nullopt;
    cur = *base;
  }
  return std::nullopt;
}

// Where the runs reach an op from other lines of their code, each run's line reached by the
// other run too, further on (the next 50,000 ops of its thread), by an op of the same name: the
// same calls in another order in each run (a GAN's discriminator and generator steps swapped),
// not other code. Gives out["other_order"] = {"a", "b"}: each {"seq", "source"}, the op of A
// at B's line and the op of B at A's line. Forward ops only (a backward op has its forward op's
// line).
void note_other_order(Pair& p, const OpRecord& a, const OpRecord& b, json& out) {
  if (a.user_frame == 0 || b.user_frame == 0) return;
  // "gan.py:16 in d_step": the file's base name, so that copies of one script compare.
  auto line = [](Side& side, tracer::FrameId id) -> std::string {
    auto f = side.reader->frame(id);
    if (!f) return "";
    const std::string& file = side.strings.text(f->file);
    return file.substr(file.rfind('/') + 1) + ":" + std::to_string(f->line) + " in " +
           side.strings.text(f->function);
  };
  const std::string line_a = line(p.a, a.user_frame), line_b = line(p.b, b.user_frame);
  if (line_a.empty() || line_b.empty() || line_a == line_b) return;
  // The first op of `side`'s thread after `from` named `name` at line `wanted`.
  auto find = [&line](Side& side, const OpRecord& from, const std::string& name,
                      const std::string& wanted) -> std::optional<OpRecord> {
    constexpr int64_t kLook = 50000;
    std::unordered_map<tracer::FrameId, bool> at_line;  // frame id: its line is `wanted`
    std::optional<OpRecord> found;
    (void)side.reader->scan_ops(
        side.thread, from.tidx + 1, from.tidx + 1 + kLook, false, [&](const OpRecord& o) {
          if (o.user_frame == 0 || side.strings.text(o.name) != name) return true;
          auto it = at_line.find(o.user_frame);
          if (it == at_line.end())
            it = at_line.emplace(o.user_frame, line(side, o.user_frame) == wanted).first;
          if (it->second) found = o;
          return !found;
        });
    return found;
  };
  const auto later_a = find(p.a, a, p.b.strings.text(b.name), line_b);
  if (!later_a) return;
  const auto later_b = find(p.b, b, p.a.strings.text(a.name), line_a);
  if (!later_b) return;
  // A loop runs each line again, so a run that skipped a part of an iteration (B's forward of
  // step 3) reaches each other's line further on too: an order is only said where both runs
  // run each of the two ops as often, over their whole threads (up to a million ops each: the
  // ops the alignment paired before here may be of other lines, G(z) in A's d_step and in
  // B's g_step).
  const std::string name_a = p.a.strings.text(a.name), name_b = p.b.strings.text(b.name);
  auto counts = [&](Side& side) -> std::optional<std::pair<int64_t, int64_t>> {
    constexpr int64_t kCounted = 1000000;
    if (side.count > kCounted) return std::nullopt;
    // Bits: 1 the op (or line) of A's, 2 of B's.
    std::unordered_map<tracer::StringId, int> names;
    std::unordered_map<tracer::FrameId, int> lines;
    std::pair<int64_t, int64_t> n{0, 0};
    const Status st =
        side.reader->scan_ops(side.thread, 0, side.count, false, [&](const OpRecord& o) {
          if (o.user_frame == 0) return true;
          auto name = names.find(o.name);
          if (name == names.end()) {
            const std::string& text = side.strings.text(o.name);
            name = names.emplace(o.name, (text == name_a ? 1 : 0) | (text == name_b ? 2 : 0)).first;
          }
          if (name->second == 0) return true;
          auto at = lines.find(o.user_frame);
          if (at == lines.end()) {
            const std::string text = line(side, o.user_frame);
            at = lines.emplace(o.user_frame, (text == line_a ? 1 : 0) | (text == line_b ? 2 : 0))
                     .first;
          }
          const int both = name->second & at->second;
          n.first += both & 1;
          n.second += (both >> 1) & 1;
          return true;
        });
    if (!st.ok()) return std::nullopt;
    return n;
  };
  const auto in_a = counts(p.a);
  if (!in_a) return;
  const auto in_b = counts(p.b);
  if (!in_b || *in_a != *in_b) return;
  out["other_order"] = {{"a", {{"seq", later_a->seq}, {"source", line_b}}},
                        {"b", {{"seq", later_b->seq}, {"source", line_a}}}};
}

void describe_value(Pair& p, const OpRecord& a, const OpRecord& b, const OpComparison& c,
                    bool after_structure, json& out) {
  std::string detail;
  out["kind"] = "value";
  auto producer_text = [&p](bool in_b, int64_t seq) -> std::string {
    Side& side = in_b ? p.b : p.a;
    auto op = side.reader->op(seq);
    return op ? op_at_source(*side.reader, side.strings, *op) : "";
  };
  auto carries_nothing = [&p](const TensorRecord& t) {
    return *never_read(p.a.strings, t) != '\0';
  };
  // The op that wrote input `t` last, when all its outputs are of another shape than `t` (it
  // wrote a part, through a view), and the empty-family op that returned `t`'s memory: "aten::
  // empty at pad.py:10 (seq 96)", or "".
  auto written_in_part = [&p, &a](const TensorRecord& t) -> std::string {
    const auto writer = p.a.reader->op(t.producer);
    if (!writer) return "";
    for (const TensorRecord& out : writer->tensors)
      if (out.role == TensorRole::kOutput && out.shape == t.shape) return "";
    const auto maker = uninitialized_maker(*p.a.reader, p.a.strings, a, t);
    if (!maker || maker->seq > t.producer) return "";
    return op_at_source_seq(*p.a.reader, p.a.strings, *maker);
  };
  bool uninitialized = false;
  out["cause"] =
      cause_of(c, a, b, after_structure, &detail, producer_text, carries_nothing,
               p.a.reader->meta("hash_mode") != "outputs", written_in_part, &uninitialized);
  // An input that differs by more than rounding: a small difference in the output is that
  // input's, made smaller (an EMA's 0.01 of the weights, a mean), not float operations in
  // another order.
  for (size_t k = 0; k < a.tensors.size() && k < b.tensors.size(); ++k) {
    const TensorRecord& ta = a.tensors[k];
    const TensorRecord& tb = b.tensors[k];
    if (ta.role != TensorRole::kInput || tb.role != TensorRole::kInput || ta.hash == tb.hash ||
        !tensor_comparable(ta) || !tensor_comparable(tb) || !ta.summary.valid ||
        !tb.summary.valid)
      continue;
    const double limit = reorder_limit(hashing::dtype_name(ta.dtype));
    const double d = summary_distance(ta.summary, tb.summary);
    if (limit >= 0 && d > limit) {
      out["input_beyond_rounding"] = ta.index;
      break;
    }
  }
  // A view of other memory in each run: the tensors it views, by the ops that made them (a
  // weight tied to another: `W.t()` of the embedding's weight in one run, of its own in the
  // other).
  if (c.view >= 0 && out["cause"] == "structure" && static_cast<size_t>(c.view) < a.tensors.size() &&
      static_cast<size_t>(c.view) < b.tensors.size()) {
    auto base_maker = [](Side& side, const TensorRecord& view) -> std::string {
      const std::optional<OpRecord> base = view_base(*side.reader, view);
      return base ? op_at_source(*side.reader, side.strings, *base) + " (op " + std::to_string(base->seq) + ")"
                  : "";
    };
    const std::string in_a = base_maker(p.a, a.tensors[static_cast<size_t>(c.view)]);
    const std::string in_b = base_maker(p.b, b.tensors[static_cast<size_t>(c.view)]);
    if (!in_a.empty() && !in_b.empty() && in_a != in_b)
      detail += "; it views what " + in_a + " made in A, what " + in_b + " made in B";
  }
  if (out["cause"] == "external_input" && c.input >= 0 &&
      static_cast<size_t>(c.input) < a.tensors.size() &&
      uninitialized_read(p.a.strings, a.tensors[static_cast<size_t>(c.input)])) {
    // Read from memory an `empty` returned and nothing recorded wrote: garbage that differs
    // from run to run, more likely than data from outside (which would have filled it).
    uninitialized = true;
    const TensorRecord& t = a.tensors[static_cast<size_t>(c.input)];
    std::string maker = "an op of the empty family";
    if (auto m = uninitialized_maker(*p.a.reader, p.a.strings, a, t)) {
      maker = op_at_source_seq(*p.a.reader, p.a.strings, *m);
      out["uninitialized_from"] = op_brief_json(*p.a.reader, p.a.strings, *m);
    }
    detail = "input " + std::to_string(t.index) + " differs and was read from memory that " +
             maker +
             " returned uninitialized, which no recorded op wrote since: uninitialized memory, "
             "different in every run (torch.empty where zeros or ones were meant), unless the "
             "program filled it outside torch's ops (.numpy(), data_ptr)";
    // Inside DDP: its C++ reducer fills its bucket tensors (the bucket assignment it
    // broadcasts) through data pointers, so another bucket layout reads as this.
    if (a.module != 0 && p.a.strings.text(a.module).find("DistributedDataParallel") != std::string::npos)
      detail += "; inside DistributedDataParallel, whose C++ reducer fills its bucket tensors "
                "that way: another bucket layout (bucket_cap_mb, find_unused_parameters, "
                "static_graph, gradient_as_bucket_view) reads so too";
  }
  if (uninitialized) out["uninitialized_memory"] = true;
  if (detail.find("no recorded op produced it") != std::string::npos) {
    // An op the recording left out may have made it: before a --steps window, or not
    // selected by --ops.
    const std::string selection = recorded_selection({p.a.reader, p.b.reader});
    if (!selection.empty())
      detail += "; or an op the recording left out made it (recorded with " + selection + ")";
    // Which op, a pass recording every op of the step (and of the one before, whose optimizer
    // update this step reads) tells.
    if (selection.find("--ops") != std::string::npos)
      detail += ": to see which, record both again without --ops, with --steps " +
                std::to_string(std::max<int64_t>(a.step - 1, 0)) + ":" + std::to_string(a.step + 1);
  }
  out["detail"] = detail;
  if (out["cause"] == "nondeterministic") {
    // For `explain_nondeterministic`, which removes these: the input that may have changed
    // unseen, and whether the op ran on the CPU, whose kernels repeat exactly. An input not
    // hashed at all (sparse) is likelier to differ than one whose hash matched: none is named.
    // (An `out=` buffer the op overwrites carries nothing in.)
    const bool unhashed_input = std::any_of(a.tensors.begin(), a.tensors.end(), [&](const TensorRecord& t) {
      return t.role == TensorRole::kInput && t.status == tracer::TensorStatus::kNotHashed &&
             p.a.strings.text(t.reason) != tracer::kReasonOverwritten;
    });
    // An input carried in one run and hashed in the other (a view of a buffer written
    // through .numpy() in B only) is the likeliest to hold what the hash does not say.
    auto carried_in = [](const TensorRecord& t) {
      return t.role == TensorRole::kInput && t.producer != tracer::kNoSeq &&
             (t.status == tracer::TensorStatus::kKnown || t.status == tracer::TensorStatus::kView);
    };
    const TensorRecord* carried = unhashed_input ? nullptr : carried_longest(a);
    const TensorRecord* carried_b = nullptr;
    if (!unhashed_input && a.tensors.size() == b.tensors.size())
      for (size_t k = 0; k < b.tensors.size(); ++k)
        if (carried_in(b.tensors[k]) && !carried_in(a.tensors[k]) && carried_b == nullptr)
          carried_b = &b.tensors[k];
    if (carried_b) carried = carried_b;
    if (carried) {
      // Every input whose hash was carried may be the one written outside torch's ops: with
      // several (a bias from the optimizer, a batch cloned then written through .numpy()),
      // each is named with the op that made it, not the oldest alone.
      // The one carried longest first (data wrapped once, long ago). (true: B's.)
      std::vector<std::pair<const TensorRecord*, bool>> all = {{carried, carried_b != nullptr}};
      for (const TensorRecord& t : (carried_b ? b : a).tensors)
        if (&t != carried && carried_in(t)) all.push_back({&t, carried_b != nullptr});
      if (carried_b)  // A's carried inputs that B hashed
        for (const TensorRecord& t : a.tensors)
          if (carried_in(t) && std::none_of(all.begin(), all.end(), [&](const auto& x) {
                return x.first->index == t.index;
              }))
            all.push_back({&t, false});
      const std::string whose = carried_b ? "B's " : "";
      std::string subject = "input " + std::to_string(carried->index);
      std::string after = "after " + whose + "op " + std::to_string(carried->producer) + " made it";
      // A view: its memory is its base's, which a write through `.numpy()` of the base (a
      // shuffle in place) changes before the view is taken. Name the op that made the base.
      if (carried->status == tracer::TensorStatus::kView) {
        Side& side = carried_b ? p.b : p.a;
        const std::optional<OpRecord> base = view_base(*side.reader, *carried);
        const std::string maker = base && base->seq != carried->producer
                                      ? op_at_source(*side.reader, side.strings, *base)
                                      : "";
        if (!maker.empty())
          after += " (a view of what op " + std::to_string(base->seq) + ", " + maker +
                   ", made: a write into that tensor, as through its .numpy(), reaches the view)";
      }
      if (all.size() > 1) {
        subject.clear();
        for (const auto& [t, in_b] : all) {
          const std::string maker = producer_text(in_b, t->producer);
          subject += (subject.empty() ? "" : " or ") + std::string("input ") +
                     std::to_string(t->index) + " (made by " + (maker.empty() ? "" : maker + ", ") +
                     (carried_b ? (in_b ? "B's " : "A's ") : "") + "op " +
                     std::to_string(t->producer) + ")";
        }
        after = "after it was made";
      }
      out["carried_input"] = {{"index", carried->index}, {"producer", carried->producer},
                              {"subject", subject}, {"after", after}};
    }
    // (An absent optional tensor, a conv's bias of None, has no device.)
    bool cpu = true, any = false;
    for (const TensorRecord& t : a.tensors) {
      const std::string& device = p.a.strings.text(t.device);
      if (device.empty()) continue;
      any = true;
      cpu = cpu && device == "cpu";
    }
    out["on_cpu"] = cpu && any;
  }
  out["a"] = op_json(*p.a.reader, p.a.strings, a);
  out["b"] = op_json(*p.b.reader, p.b.strings, b);
  int tensor = c.input >= 0 ? c.input : c.layout >= 0 ? c.layout : c.output;
  out["tensor"] = tensor >= 0 ? tensor_pair_json(p, a, b, tensor) : json(nullptr);
  // Another layout of the same values: the output is what differs, and how much.
  if (tensor == c.layout && c.layout >= 0 && c.output >= 0)
    out["output"] = tensor_pair_json(p, a, b, c.output);
  // After a structural change the inputs may differ by construction (`(h + x) + y` against
  // `h + (x + y)`: the outer sums add other terms) while the output is the same sum up to
  // rounding: the output is what tells whether the change changed results.
  if (after_structure && c.input >= 0 && c.output >= 0 && out["cause"] == "structure") {
    json output = tensor_pair_json(p, a, b, c.output);
    if (rounding_level_difference(output) >= 0) out["tensor"] = std::move(output);
  }
  if (c.arg >= 0) {
    const auto& aa = a.args[static_cast<size_t>(c.arg)];
    const auto& ab = b.args[static_cast<size_t>(c.arg)];
    out["argument"] = {{"index", aa.index}, {"name", p.a.strings.text(aa.name)},
                       {"value_a", number_text(p.a.strings.text(aa.value))},
                       {"value_b", number_text(p.b.strings.text(ab.value))}};
    // Inside an optimizer's step(): the scalar is made of its hyperparameters (AdamW's decay
    // multiplies by 1 - lr * weight_decay, its update adds -lr / bias correction), so the
    // user's question is which of them, or the scheduler that sets lr, differs.
    if (in_optimizer_step(*p.a.reader, a)) {
      out["argument"]["in_optimizer_step"] = true;
      // Which of them, where the runs recorded the optimizer's settings.
      const std::string va = p.a.strings.text(aa.value), vb = p.b.strings.text(ab.value);
      char *end_a = nullptr, *end_b = nullptr;
      const double xa = std::strtod(va.c_str(), &end_a), xb = std::strtod(vb.c_str(), &end_b);
      std::optional<std::pair<double, double>> scalar;
      if (!va.empty() && !vb.empty() && *end_a == '\0' && *end_b == '\0') scalar = {xa, xb};
      if (json settings = compare_optimizer_settings(*p.a.reader, {a.thread, a.seq}, *p.b.reader,
                                                     {b.thread, b.seq}, scalar);
          !settings.is_null())
        out["argument"]["optimizer"] = std::move(settings);
    }
    if (is_mode_argument(p.a.strings.text(aa.name))) out["argument"]["module_mode"] = true;
    if (p.a.strings.text(aa.name) == "generator") out["argument"]["generator"] = true;
  } else {
    out["argument"] = nullptr;
  }
  if ((a.flags | b.flags) & tracer::kOpRandom) {
    out["rng"] = {{"a", hex64(a.rng)}, {"b", hex64(b.rng)}};
  } else {
    out["rng"] = nullptr;
  }
  note_other_order(p, a, b, out);
}

// CPU kernels that may add up in a racing order when several threads run them (accumulating
// index and scatter ops): the only ones that differ between runs with the same settings.
bool racy_on_cpu(const std::string& op) {
  for (const char* name : {"index_put", "index_add", "index_reduce", "scatter", "put_",
                           "embedding", "bincount", "histc", "segment_reduce", "_unsafe"})
    if (op.find(name) != std::string::npos) return true;
  return false;
}

// Weighs the explanations of a "nondeterministic" value difference `d` (identical recorded
// inputs, arguments and generator state, different output):
// - runs that differ in settings that change how kernels compute (`kernel_settings`): those;
// - on the CPU, with one thread or an op that does not accumulate across threads, a kernel
//   repeats exactly: an output that differs at rounding level came from another kernel (a
//   backend switched at run time, another build or CPU); otherwise an input whose hash was
//   carried (not read again) most likely changed outside torch's ops: `external_input`;
// - a CPU op that accumulates on `threads` threads: its racing order;
// - else (an accelerator) a nondeterministic kernel, or that carried input.
void explain_nondeterministic(json& d,
                              const std::vector<std::pair<std::string, std::string>>& settings,
                              const std::string& threads, bool after_structure = false) {
  const json carried = d.value("carried_input", json());
  const bool on_cpu = d.value("on_cpu", false);
  d.erase("carried_input");
  d.erase("on_cpu");
  if (d.value("cause", "") != "nondeterministic") return;
  std::string detail = d.value("detail", "");
  const std::string op = d.value("a", json()).is_object() ? d["a"].value("op", std::string()) : "";
  // Only the settings that bear on a kernel of the op's device: cuDNN's and cuBLAS's not on
  // the CPU, nor the determinism switch for a CPU op that does not accumulate across threads
  // (it changes no CPU kernel but those).
  std::string kernel_settings;
  for (const auto& [key, text] : settings) {
    if (on_cpu && (key.rfind("cudnn_", 0) == 0 || key.rfind("$CUBLAS_", 0) == 0 ||
                   key.rfind("$CUDA", 0) == 0 || key == "cuda_runtime_version" ||
                   key == "cuda_driver_version" ||
                   (key.rfind("deterministic_", 0) == 0 && !racy_on_cpu(op))))
      continue;
    if (!on_cpu && (key == "mkldnn_enabled" || key == "flush_denormal")) continue;
    // TF32 on CUDA; torch 1.13's CPU kernels ignore it.
    if (on_cpu && key == "float32_matmul_precision") continue;
    kernel_settings += (kernel_settings.empty() ? "" : ", ") + text;
  }
  if (!kernel_settings.empty()) {
    // Right after "different output", ahead of what follows.
    const std::string why = "; the runs differ in settings that change how kernels compute: " +
                            kernel_settings;
    const std::string anchor = "different output";
    const size_t at = detail.find(anchor);
    detail.insert(at == std::string::npos ? detail.size() : at + anchor.size(), why);
    d["detail"] = detail;
    return;
  }
  const bool racy = on_cpu && threads != "1" && racy_on_cpu(op);
  if (racy) {
    d["detail"] = detail + "; this CPU kernel accumulates in the order its " +
                  (threads.empty() ? std::string("several") : threads) +
                  " threads race in (torch.set_num_threads(1) or "
                  "torch.use_deterministic_algorithms(True) makes it repeat)";
    return;
  }
  if (!carried.is_object()) return;
  const std::string input = carried.value("subject", "input " + json_text(carried["index"]));
  const std::string after = carried.value("after", "after op " + json_text(carried["producer"]) + " made it");
  const std::string producer = "op " + json_text(carried["producer"]);
  if (after_structure) {
    // After a structural change, the ops it added or removed are the likelier writers of an
    // input whose hash was carried (a view, or a tensor not read again) than code outside
    // torch's ops.
    d["cause"] = "structure";
    d["detail"] = detail + "; " + input + "'s hash was carried " + after + " (not read again), "
                  "and the ops the change added or removed may have written it since";
    return;
  }
  if (on_cpu) {
    const std::string same = "identical inputs";
    if (detail.rfind(same, 0) == 0) detail.replace(0, same.size(), "identical recorded inputs");
    const double rounding = rounding_level_difference(d.value("tensor", json()));
    if (rounding >= 0) {
      // Another algorithm gives results that differ in the last bits; a write from outside
      // torch's ops (new data) seldom does.
      char size[32];
      std::snprintf(size, sizeof(size), "%.1g", rounding);
      d["detail"] = detail + "; the output differs at rounding level (relative " + size +
                    "), as another kernel or summation order gives: a backend the program "
                    "switched (torch.backends.mkldnn.flags, torch.backends.mkl), a thread count "
                    "set while it ran (torch.set_num_threads after its last recorded read), "
                    "another build of torch or its math libraries, or another CPU's instruction "
                    "set. Less likely, " +
                    input + " changed outside torch's ops " + after +
                    " (a write through .numpy() or a data pointer; its hash was carried, "
                    "not read again)";
      return;
    }
    d["cause"] = "external_input";
    d["detail"] = detail + "; a CPU kernel repeats exactly with the same settings, so " + input +
                  " most likely changed outside torch's ops " + after +
                  " (a write through .numpy() or a data pointer): the hash was carried "
                  "from there, not read again";
  } else {
    d["detail"] = detail + "; or " + input + " was changed outside torch's ops (through a data "
                  "pointer, or .numpy() in Python): its hash is " + producer + "'s, not read again";
  }
}

// With several optimizers, a divergence among the ops counted as step 1 that ran in the
// training loop's first iteration is said to be there (`in_first_iteration`): the first, and
// the first value difference after its change, a next one, where the first is not; and
// updates that differ from step 1, which begins in that iteration (the step's largest
// difference, named, may be of a later one).
void note_first_iteration_step(json& d, const tracer::Run& run) {
  const size_t p = d.value("process", size_t{0});
  if (p >= run.processes.size()) return;
  auto in_first = [&](const json& side) {
    return side.is_object() &&
           in_first_iteration(*run.processes[p], side.value("step", int64_t{-1}),
                              side.value("seq", int64_t{-1}));
  };
  if (in_first(d.value("a", json()))) {
    d["first_iteration"] = true;
    return;
  }
  for (const char* key : {"value_after_structure", "next"})
    if (d.contains(key) && d[key].is_object() && in_first(d[key].value("a", json())))
      d[key]["first_iteration"] = true;
  if (d.contains("updates") && d["updates"].is_object() &&
      d["updates"].value("beyond", json()).is_object() &&
      d["updates"]["beyond"].value("step", int64_t{-1}) == 1 &&
      in_first_iteration(*run.processes[p], 1, 0))
    d["updates"]["beyond"]["first_iteration"] = true;
}

// Random ops on several threads of one process that draw from one generator (the default
// one, shared by every thread): which thread draws first changes from run to run, so with the
// same seed an op gets other numbers. Told by the generator states recorded: where threads
// take turns in another order, both runs hold the same states, at other ops (or most of them:
// a draw another thread made while an op drew changes that op's numbers after its state was
// read). With another seed no state repeats. Said in `d`'s detail, when its op is random and
// its cause is its generator state ("rng") or a different output from the same state.
void explain_shared_generator(json& d, const tracer::Run& a, const tracer::Run& b) {
  const std::string cause = d.value("cause", "");
  const json& op = d.value("a", json());
  if ((cause != "rng" && cause != "nondeterministic") || !op.is_object() ||
      !op.value("random", false))
    return;
  const size_t p = d.value("process", size_t{0});
  if (p >= a.processes.size() || p >= b.processes.size()) return;
  struct Draws {
    std::unordered_map<uint64_t, int64_t> states;  // generator state hash: random ops drawing at it
    std::set<uint32_t> threads;
    int64_t ops = 0;
  };
  auto draws_of = [](const Reader& r, Draws* out) {
    return r.scan_ops(std::nullopt, 0, std::numeric_limits<int64_t>::max(), false,
                      [&](const OpRecord& o) {
                        if ((o.flags & tracer::kOpRandom) && o.rng != 0) {
                          ++out->states[o.rng];
                          out->threads.insert(o.thread);
                          ++out->ops;
                        }
                        return true;
                      });
  };
  Draws da, db;
  if (!draws_of(*a.processes[p], &da).ok() || !draws_of(*b.processes[p], &db).ok()) return;
  if (da.threads.size() < 2 || db.threads.size() < 2) return;
  int64_t shared = 0;
  for (const auto& [state, n] : da.states) {
    auto it = db.states.find(state);
    if (it != db.states.end()) shared += std::min(n, it->second);
  }
  const int64_t most = std::max(da.ops, db.ops);
  if (shared * 2 < most) return;
  const std::string why =
      "threads that share a random generator: random ops run on " +
      std::to_string(std::min(da.threads.size(), db.threads.size())) +
      " threads of this process, and the runs recorded the same generator states (" +
      std::to_string(shared) + " of " + std::to_string(most) +
      " random ops), held by other ops, so the seed is the same and the threads took their "
      "turns drawing in another order. Give each thread its own torch.Generator (passed as "
      "generator=), or draw the random numbers in one thread, to make the runs repeat";
  d["detail"] = cause == "rng"
                    ? "random op whose generator state differs, most likely from " + why
                    : d.value("detail", std::string()) +
                          "; the same generator state, other numbers: another thread drew from "
                          "that generator while this op drew, most likely " +
                          why;
  d["shared_generator"] = true;
}

json hunk_ops_json(Side& s, int64_t begin, int64_t end, int limit) {
  json ops = json::array();
  for (int64_t t = begin; t < end && t < begin + limit; ++t) {
    auto op = s.reader->op_at(s.thread, t);
    if (op) ops.push_back(op_brief_json(*s.reader, s.strings, *op));
  }
  return ops;
}

json hunk_json(Pair& p, const Hunk& h) {
  int64_t removed = h.a_end - h.a_begin, inserted = h.b_end - h.b_begin;
  const char* type = removed == 0 ? "inserted" : inserted == 0 ? "removed" : "replaced";
  return {{"type", type},
          {"a_range", {h.a_begin, h.a_end}},
          {"b_range", {h.b_begin, h.b_end}},
          {"removed", hunk_ops_json(p.a, h.a_begin, h.a_end, 8)},
          {"inserted", hunk_ops_json(p.b, h.b_begin, h.b_end, 8)}};
}

// The first op that draws random numbers in the changes (`hunks`) of the run that draws more
// of them there, with "run"; null where both draw as many.
json random_in_changes(Pair& p, const json& hunks) {
  int64_t drawn[2] = {0, 0};
  std::optional<OpRecord> first[2];
  for (const json& h : hunks) {
    int side = 0;
    for (Side* s : {&p.a, &p.b}) {
      const json& range = h[side == 0 ? "a_range" : "b_range"];
      for (int64_t t = range[0].get<int64_t>(); t < range[1].get<int64_t>(); ++t) {
        auto op = s->reader->op_at(s->thread, t);
        if (!op || !(op->flags & tracer::kOpRandom)) continue;
        if (drawn[side]++ == 0) first[side] = std::move(op);
      }
      ++side;
    }
  }
  if (drawn[0] == drawn[1]) return nullptr;
  const int more = drawn[1] > drawn[0] ? 1 : 0;
  json j = op_brief_json(*(more ? p.b : p.a).reader, (more ? p.b : p.a).strings, *first[more]);
  j["run"] = more ? "B" : "A";
  return j;
}

json context_json(Side& s, int64_t center, int n) {
  json ops = json::array();
  for (int64_t t = std::max<int64_t>(0, center - n); t <= center + n && t < s.count; ++t) {
    auto op = s.reader->op_at(s.thread, t);
    if (!op) continue;
    json j = op_brief_json(*s.reader, s.strings, *op);
    j["here"] = t == center;
    if (op->flags & tracer::kOpUnfinished) j["unfinished"] = true;
    if (op->flags & tracer::kOpRaised) j["raised"] = true;
    ops.push_back(std::move(j));
  }
  return ops;
}

// In a process of a distributed job, data that "no recorded op produced" or an output that
// differs from equal inputs may be another rank's: a collective brought it in (an in-place
// all_reduce's result has no producer; DDP's reducer runs its collectives inside C++). Names
// the last collective before the op, within a bounded look back, or DDP's reducer around it.
void note_collective(Pair& p, const OpRecord& a, json& out) {
  const std::string cause = out.value("cause", std::string());
  if (cause != "external_input" && cause != "nondeterministic") return;
  if (p.a.reader->meta("rank").empty() && p.a.reader->meta("world_size").empty()) return;
  std::string via;
  for (const json& e : out["a"].value("enclosing", json::array())) {
    const std::string name = e.value("op", std::string());
    if (name.find("ddp.reducer") != std::string::npos) {
      via = "DDP's gradient all-reduce (" + name + " around it)";
      break;
    }
    if (name.rfind("c10d::", 0) == 0) {
      via = "the collective " + name + " around it";
      break;
    }
  }
  // Inside the collective's own work (DDP copying its all-reduced bucket into the gradients):
  // what it reads the collective wrote, outside the recorded ops. Another rank's values, far
  // likelier than a kernel of this one computing otherwise.
  if (!via.empty() && cause == "nondeterministic") {
    out["cause"] = "external_input";
    out["collective"] = via;
    out["detail"] = "every recorded input is the same but the output differs, inside " + via +
                    ": the values come from the other ranks, written outside the recorded ops; "
                    "another rank that differs is the cause (diff the whole run directories to "
                    "compare every rank); if none does: " +
                    out.value("detail", std::string());
    return;
  }
  if (via.empty())
    if (auto o = last_collective_before(*p.a.reader, p.a.strings, p.a.thread, a.tidx))
      via = "the collective " + p.a.strings.text(o->name) + " (op " + std::to_string(o->seq) +
            ", step " + std::to_string(o->step) + ")";
  if (via.empty()) return;
  out["collective"] = via;
  out["detail"] = out.value("detail", std::string()) +
                  "; or another rank's values came in through " + via +
                  ": when another rank differs, that is the cause (diff the whole run "
                  "directories to compare every rank)";
}

// Data from outside torch that differs at an op (`external_input`) may be the same data in
// another order: B's batch here is A's batch of another step (a file list from os.listdir or
// a set, a shuffle seeded otherwise). Looks for each run's differing tensor among the other
// run's same op at the same line (its first `kLook` ops), and says where it is:
// "data_elsewhere": {"b_in_a": {"seq", "step"}, "a_in_b": ...}.
void note_data_elsewhere(Pair& p, const OpRecord& a, const OpRecord& b, const OpComparison& c,
                         json& out) {
  if (out.value("cause", std::string()) != "external_input") return;
  const int k = c.input >= 0 ? c.input : c.output;
  if (k < 0 || static_cast<size_t>(k) >= a.tensors.size() ||
      static_cast<size_t>(k) >= b.tensors.size())
    return;
  const TensorRecord& ta = a.tensors[static_cast<size_t>(k)];
  const TensorRecord& tb = b.tensors[static_cast<size_t>(k)];
  if (!tensor_comparable(ta) || !tensor_comparable(tb) ||
      ta.status == tracer::TensorStatus::kView || tb.status == tracer::TensorStatus::kView ||
      ta.hash == tb.hash)
    return;
  constexpr int64_t kLook = 500000;
  // The op of `side` at `op`'s line with `op`'s name whose tensor k has `hash`.
  auto find = [&](Side& side, const OpRecord& op, uint64_t hash) -> json {
    const tracer::FrameId frame = op.user_frame ? op.user_frame : op.stack;
    json found;
    (void)side.reader->scan_ops(
        side.thread, 0, std::min(side.count, kLook), true, [&](const OpRecord& o) {
          if (o.seq == op.seq || o.name != op.name ||
              (o.user_frame ? o.user_frame : o.stack) != frame || o.tensors.size() <= size_t(k))
            return true;
          const TensorRecord& t = o.tensors[static_cast<size_t>(k)];
          if (t.role != ta.role || t.index != ta.index || t.hash != hash || !tensor_comparable(t))
            return true;
          found = {{"seq", o.seq}, {"step", o.step}};
          return false;
        });
    return found;
  };
  const json b_in_a = find(p.a, a, tb.hash), a_in_b = find(p.b, b, ta.hash);
  if (b_in_a.is_null() && a_in_b.is_null()) return;
  json elsewhere = json::object();
  const std::string what =
      std::string(ta.role == TensorRole::kInput ? "input " : "output ") + std::to_string(ta.index);
  std::string text;
  if (!b_in_a.is_null()) {
    elsewhere["b_in_a"] = b_in_a;
    text = "B's " + what + " here is A's at this line in step " +
           std::to_string(b_in_a["step"].get<int64_t>()) + " (seq " +
           std::to_string(b_in_a["seq"].get<int64_t>()) + ")";
  }
  if (!a_in_b.is_null()) {
    elsewhere["a_in_b"] = a_in_b;
    text += (text.empty() ? "A's " + what + " here is B's" : std::string(", and A's is B's")) +
            " at this line in step " + std::to_string(a_in_b["step"].get<int64_t>()) + " (seq " +
            std::to_string(a_in_b["seq"].get<int64_t>()) + ")";
  }
  out["data_elsewhere"] = std::move(elsewhere);
  out["detail"] = out.value("detail", std::string()) + "; " + text +
                  ": the same data in another order (a file list from os.listdir, glob or a "
                  "set, a shuffle or a sampler seeded otherwise)";
}

// Whether a seed (its decimal text) is one the program set: below 2^32. Where the program sets
// none, torch draws a 64-bit one.
bool seed_set_by_program(const std::string& text) {
  return !text.empty() && text.size() <= 10 &&
         std::strtoull(text.c_str(), nullptr, 10) < (1ull << 32);
}

// PYTHONHASHSEED as the run's recorded environment (meta `env`) holds it: "" where unset,
// nullopt where no environment was recorded.
std::optional<std::string> python_hash_seed(const Reader& r) {
  const json env = json::parse(r.meta("env"), nullptr, /*allow_exceptions=*/false);
  if (!env.is_object()) return std::nullopt;
  const auto it = env.find("PYTHONHASHSEED");
  return it != env.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The seed the default CPU generator had at op `seq` (meta `seed_history`, "SEED@SEQ,...": each
// seed from the first random op that drew with it), the seq it has had it since, or nullopt.
std::optional<std::pair<std::string, int64_t>> seed_at(const Reader& r, int64_t seq) {
  std::optional<std::pair<std::string, int64_t>> found;
  const std::string history = r.meta("seed_history");
  for (size_t begin = 0; begin < history.size();) {
    size_t end = history.find(',', begin);
    if (end == std::string::npos) end = history.size();
    const std::string entry = history.substr(begin, end - begin);
    const size_t at = entry.find('@');
    if (at != std::string::npos) {
      const int64_t from = std::atoll(entry.c_str() + at + 1);
      if (from > seq) break;
      found = std::pair{entry.substr(0, at), from};
    }
    begin = end + 1;
  }
  return found;
}

// Whether an op that encloses `op` (its parent, its parent's, up to 64 levels) has a name that
// `matches`.
bool enclosed_by(Side& side, const OpRecord& op,
                 const std::function<bool(const std::string&)>& matches) {
  int64_t parent = op.parent;
  for (int up = 0; up < 64 && parent != tracer::kNoSeq; ++up) {
    const auto o = side.reader->op(parent);
    if (!o) return false;
    if (matches(side.strings.text(o->name))) return true;
    parent = o->parent;
  }
  return false;
}

// A random op of activation checkpointing's recompute in backward (a forward op, inside
// CheckpointFunctionBackward or another backward node): its generator state is
// the forward's only with preserve_rng_state=True (the default); with False the recompute
// draws from the state at backward time, other dropout masks than the forward's. Said after
// the detail.
void note_checkpoint_rng(Pair& p, const OpRecord& a, json& out) {
  if (out.value("cause", std::string()) != "rng") return;
  // (Reentrant: inside CheckpointFunctionBackward; non-reentrant: inside the backward node
  // whose saved tensor it unpacks, ReluBackward0, where no other forward op runs.)
  if (!enclosed_by(p.a, a, [](const std::string& name) {
        return name.find("CheckpointFunctionBackward") != std::string::npos ||
               name.rfind("autograd::engine::evaluate_function: ", 0) == 0;
      }))
    return;
  out["detail"] = out.value("detail", std::string()) +
                  "; it runs during backward, as activation checkpointing's recompute does "
                  "(torch.utils.checkpoint), which draws the forward's random numbers again "
                  "only with preserve_rng_state=True, the default: False in one run makes other "
                  "dropout masks there (or a backward that draws numbers of its own)";
}

// A random op whose generator state differs (`rng`), drawing from the default generator: the
// seed each run's had there, where they differ, and the seed it was given later ("torch.
// manual_seed called after this op": a model built before the program seeds).
void note_seed_at(Pair& p, const OpRecord& a, const OpRecord& b, json& out) {
  if (out.value("cause", std::string()) != "rng") return;
  for (const auto& x : a.args)
    if (p.a.strings.text(x.name) == "generator" && p.a.strings.text(x.value) != "None") return;
  const auto sa = seed_at(*p.a.reader, a.seq), sb = seed_at(*p.b.reader, b.seq);
  if (!sa || !sb || sa->first == sb->first) return;
  auto later = [](const Reader& r, int64_t seq) {
    const auto next = seed_at(r, std::numeric_limits<int64_t>::max());
    return next && next->second > seq ? next : std::nullopt;
  };
  std::string text =
      "; here the default generator's seed is " + sa->first + " in A and " + sb->first + " in B";
  // In DataLoader workers, torch's worker loop seeds each with base_seed + its id, base_seed
  // drawn from the main process's generator for each iterator: not torch's own start seed.
  const std::string worker_a = p.a.reader->meta("worker"), worker_b = p.b.reader->meta("worker");
  if (!worker_a.empty() && !worker_b.empty()) {
    const uint64_t seed_a = std::strtoull(sa->first.c_str(), nullptr, 10);
    const uint64_t seed_b = std::strtoull(sb->first.c_str(), nullptr, 10);
    const uint64_t id_a = std::strtoull(worker_a.c_str(), nullptr, 10);
    const uint64_t id_b = std::strtoull(worker_b.c_str(), nullptr, 10);
    text +=
        " (DataLoader seeds each worker with base_seed + its id, base_seed drawn from the "
        "main process's generator for each iterator";
    text += seed_a - id_a == seed_b - id_b
                ? ": the same base_seed in both, and worker " + worker_a + " in A against " +
                      worker_b + " in B: the items went to other workers)"
                : ": another base_seed, the main process's generator in another state)";
    out["detail"] = out.value("detail", std::string()) + text;
    return;
  }
  // A seed set again in the run (after a checkpoint load: torch.manual_seed where the saved
  // generator state was to be restored): said, with where, for the run or runs that did.
  {
    std::string again;
    int count = 0;
    for (const auto& [run, seed, reader] :
         {std::tuple{"A", *sa, p.a.reader}, std::tuple{"B", *sb, p.b.reader}}) {
      const auto before = seed.second > 0 ? seed_at(*reader, seed.second - 1) : std::nullopt;
      if (!before) continue;
      const auto from = reader->op(seed.second);
      again += std::string(again.empty() ? "" : "; ") + run + " set it again to " + seed.first +
               " from op " + std::to_string(seed.second) +
               (from ? " (step " + std::to_string(from->step) + ")" : std::string()) + ", after " +
               before->first;
      ++count;
    }
    if (count == 1)
      text += " (" + again +
              ", and the other run did not: a torch.manual_seed where the generator's saved "
              "state was to be restored, torch.set_rng_state, after a checkpoint load?)";
    else if (count == 2)
      text += " (" + again + ")";
  }
  // Torch's own in both, seeded later in neither: said once.
  if (!seed_set_by_program(sa->first) && !seed_set_by_program(sb->first) &&
      !later(*p.a.reader, a.seq) && !later(*p.b.reader, b.seq)) {
    out["detail"] = out.value("detail", std::string()) + text +
                    " (both are torch's own random seed, drawn at start: no torch.manual_seed "
                    "before this op in either run)";
    return;
  }
  for (const auto& [run, seed, op, reader] :
       {std::tuple{"A", *sa, &a, p.a.reader}, std::tuple{"B", *sb, &b, p.b.reader}}) {
    if (seed_set_by_program(seed.first)) continue;  // else torch's own, drawn at start
    text += std::string(" (") + run +
            "'s is torch's own random seed: no torch.manual_seed before this op";
    if (const auto set = later(*reader, op->seq))
      text += ", which " + std::string(run) + " calls later (seed " + set->first + " from op " +
              std::to_string(set->second) +
              "): seeded after this op, such as after "
              "the model is built";
    text += ")";
  }
  out["detail"] = out.value("detail", std::string()) + text;
}

// N of a DataLoader worker's "ID/N" (meta `worker`), "" for another process.
std::string worker_count(const Reader& r) {
  const std::string worker = r.meta("worker");
  const size_t slash = worker.find('/');
  return slash == std::string::npos ? "" : worker.substr(slash + 1);
}

// A data file both runs read (meta `read:<path>`, SIZE:MTIME_NS[:HASH] at its first open)
// that was another version in each: "its contents differ" where both hashed it (a file saved
// again with the same bytes is none), else by its size or modification time alone.
struct FileRead {
  std::string path, a, b, reason;
  bool contents_differ = false;  // known to, by the hashes or the sizes
};
// The data files `r` read (meta `read:<path>`), each with its identity SIZE:MTIME_NS[:HASH].
std::map<std::string, std::string> files_read(const Reader& r) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : r.all_meta())
    if (key.rfind("read:", 0) == 0) out[key.substr(5)] = value;
  return out;
}

// Field `k` of a file's identity (0 size, 1 modification time, 2 hash), "" where it has none.
std::string identity_field(const std::string& identity, int k) {
  size_t begin = 0;
  for (int i = 0; i < k && begin != std::string::npos; ++i) {
    begin = identity.find(':', begin);
    if (begin != std::string::npos) ++begin;
  }
  return begin == std::string::npos ? std::string()
                                    : identity.substr(begin, identity.find(':', begin) - begin);
}

std::vector<FileRead> files_read_that_differ(const Reader& ra, const Reader& rb) {
  const std::map<std::string, std::string> read_a = files_read(ra);
  std::vector<FileRead> out;
  for (const auto& [path, value] : files_read(rb)) {
    const auto it = read_a.find(path);
    if (it == read_a.end() || it->second == value) continue;
    FileRead f{path, it->second, value, "", false};
    const std::string hash_a = identity_field(f.a, 2), hash_b = identity_field(f.b, 2);
    if (!hash_a.empty() && !hash_b.empty()) {
      if (hash_a == hash_b) continue;  // saved again, the same bytes
      f.reason = "its contents differ";
      f.contents_differ = true;
    } else if (identity_field(f.a, 0) != identity_field(f.b, 0)) {
      f.reason = "its size differs";
      f.contents_differ = true;
    } else {
      f.reason =
          "its modification time differs; its contents were not hashed (over 64 MiB, or "
          "an older recording) and may be the same";
    }
    out.push_back(std::move(f));
  }
  return out;
}

// Data from outside torch that differs (`external_input`) in Python runs whose torch seed is
// the same: what draws it is most likely Python's random or NumPy, which tdbg does not record,
// left unseeded ("torch seeded, NumPy not"). Said after the detail.
void note_other_generators(Pair& p, json& out) {
  if (out.value("cause", std::string()) != "external_input" || out.contains("data_elsewhere") ||
      out.value("uninitialized_memory", false))
    return;
  const Reader& ra = *p.a.reader;
  const Reader& rb = *p.b.reader;
  // A data file both read whose contents differ: the likelier source.
  for (const FileRead& f : files_read_that_differ(ra, rb))
    if (f.contents_differ) {
      out["detail"] = out.value("detail", std::string()) + "; " + f.path +
                      ", which both runs read, is another version in each (" + f.reason +
                      "): most likely where this data comes from";
      return;
    }
  // Data files one run read and the other did not (a path from an environment variable or an
  // argument): most likely where the data comes from when both runs read one.
  // Files of the same contents under other names (a checkpoint named by the process id) are
  // the same data, not a source.
  {
    auto paths = [](const Reader& r) {
      std::map<std::string, std::string> out;  // path -> "SIZE:HASH", or "" unhashed
      for (const auto& [path, identity] : files_read(r)) {
        const std::string hash = identity_field(identity, 2);
        out[path] = hash.empty() ? "" : identity_field(identity, 0) + ":" + hash;
      }
      return out;
    };
    const std::map<std::string, std::string> pa = paths(ra), pb = paths(rb);
    auto only = [](const std::map<std::string, std::string>& mine,
                   const std::map<std::string, std::string>& other) {
      std::set<std::string> other_contents;
      for (const auto& [path, contents] : other)
        if (!contents.empty() && !mine.count(path)) other_contents.insert(contents);
      std::string text;
      int n = 0;
      for (const auto& [path, contents] : mine) {
        if (other.count(path) || (!contents.empty() && other_contents.count(contents))) continue;
        if (n++ < 2) text += (text.empty() ? "" : ", ") + path;
      }
      return n > 2 ? text + " and " + std::to_string(n - 2) + " more" : text;
    };
    const std::string only_a = only(pa, pb), only_b = only(pb, pa);
    // Names alike but for their numbers (ckpt_24432.pt, ckpt_396.pt): each run's own file, a
    // checkpoint it wrote named by its process id or the time, less likely another data set.
    auto numbers_out = [](const std::string& text) {
      std::string out;
      for (size_t k = 0; k < text.size(); ++k)
        if (!std::isdigit(static_cast<unsigned char>(text[k])) || out.empty() || out.back() != '#')
          out += std::isdigit(static_cast<unsigned char>(text[k])) ? '#' : text[k];
      return out;
    };
    if (!only_a.empty() && !only_b.empty()) {
      out["detail"] =
          out.value("detail", std::string()) + "; A read " + only_a + " and B read " + only_b +
          (numbers_out(only_a) == numbers_out(only_b)
               ? ", files named alike but for a number (each run's own, such as a checkpoint "
                 "named by its process id or the time): where this data comes from if they hold "
                 "other data"
               : ", each a file the other run did not read: most likely where this data comes "
                 "from (a path from an argument or environment variable)");
      return;
    }
  }
  // DataLoader workers of another count: which worker loads an item differs, and with it the
  // seeds of the generators that draw for it.
  if (const std::string wa = worker_count(ra), wb = worker_count(rb);
      !wa.empty() && !wb.empty() && wa != wb) {
    out["detail"] = out.value("detail", std::string()) + "; num_workers is " + wa + " in A and " +
                    wb +
                    " in B, so another worker loads this item: each worker's generators "
                    "are seeded base_seed + worker id, and what a random op of the dataset "
                    "draws for an item depends on the worker that loads it";
    return;
  }
  // (Other command lines may give the data themselves: the settings line shows them.)
  if (ra.meta("python_version").empty() || rb.meta("python_version").empty() ||
      ra.meta("end_time_ns").empty() || rb.meta("end_time_ns").empty() || ra.meta("seed").empty() ||
      ra.meta("seed") != rb.meta("seed") || ra.meta("cmdline") != rb.meta("cmdline"))
    return;
  // A set of strings iterates in another order under another hash seed (a vocabulary built
  // from set(text)): with PYTHONHASHSEED unset in both, or set otherwise in each.
  const std::string seed_a = python_hash_seed(ra).value_or(""),
                    seed_b = python_hash_seed(rb).value_or("");
  const std::string generators =
      "where Python's random or NumPy draws this data (an augmentation, a shuffle, noise), "
      "their generators, which tdbg does not record, were not seeded alike (random.seed, "
      "np.random.seed, np.random.default_rng(seed))";
  std::string text = "; torch's seed is the same in both runs (" + ra.meta("seed") + "): ";
  if (seed_a != seed_b)  // the likelier: said first
    text += "PYTHONHASHSEED differs (A " + (seed_a.empty() ? std::string("unset") : seed_a) +
            ", B " + (seed_b.empty() ? std::string("unset") : seed_b) +
            "), so a set or dict of strings iterates in another order (a vocabulary from "
            "set(text)) and may make other data; or " +
            generators;
  else if (seed_a.empty() || seed_a == "random")
    text += generators +
            "; or a set or dict of strings iterated in another order (a vocabulary from "
            "set(text)): PYTHONHASHSEED is unset in both runs, which orders them otherwise in "
            "every run";
  else
    text += generators;
  out["detail"] = out.value("detail", std::string()) + text;
}

// Of a replacement whose first ops differ (B's 17th `select` where A, with a batch of 16,
// stacks): the first op both sides of it run, within its first 64 ops, and what differs there
// ("; where both run aten::stack (A seq 82, B seq 114): different tensor count: 17 vs 33"),
// or "" when none is found or nothing differs there.
std::string first_shared_op(Pair& p, const Hunk& h) {
  constexpr int64_t kLook = 64;
  auto read = [](Side& side, int64_t begin, int64_t end, std::vector<OpRecord>& into) {
    return side.reader->scan_ops(side.thread, begin, std::min(end, begin + kLook), true,
                                 [&](const OpRecord& o) {
                                   into.push_back(o);
                                   return true;
                                 });
  };
  std::vector<OpRecord> ops_a, ops_b;
  if (!read(p.a, h.a_begin, h.a_end, ops_a).ok() || !read(p.b, h.b_begin, h.b_end, ops_b).ok())
    return "";
  // The op's user source line (function and line, not file): an op of the same name at other
  // lines is other work (B's `torch.zeros(3, 7)` and the handle tensor `zero_grad`'s
  // record_function makes), not the same op on other shapes.
  auto line = [](Side& side, const OpRecord& o) -> std::string {
    if (o.user_frame == 0) return "";
    auto f = side.reader->frame(o.user_frame);
    return f ? side.strings.text(f->function) + ":" + std::to_string(f->line) : std::string();
  };
  for (const OpRecord& oa : ops_a) {
    for (const OpRecord& ob : ops_b) {
      if (oa.depth != ob.depth || p.a.strings.text(oa.name) != p.b.strings.text(ob.name) ||
          line(p.a, oa) != line(p.b, ob))
        continue;
      const std::string there = compare_ops(oa, p.a.strings, ob, p.b.strings).structure;
      if (there.empty()) return "";
      return "; where both run " + p.a.strings.text(oa.name) + " (A seq " +
             std::to_string(oa.seq) + ", B seq " + std::to_string(ob.seq) + "): " + there;
    }
  }
  return "";
}

// For a backward op whose `output_mask` (which gradients it computes) differs: "; B computes
// no gradient for its input 0 ...", the plain reason (a parameter frozen in one run); "" else.
std::string grad_mask_note(const OpRecord& a, Strings& sa, const OpRecord& b, Strings& sb) {
  auto mask = [](const OpRecord& o, Strings& strings) -> std::string {
    for (const tracer::ArgRecord& arg : o.args)
      if (strings.text(arg.name) == "output_mask") return strings.text(arg.value);
    return "";
  };
  const std::string ma = mask(a, sa), mb = mask(b, sb);
  if (ma.empty() || mb.empty() || ma == mb) return "";
  // "[True, False, True]": the entries in order.
  auto entries = [](const std::string& text) {
    std::vector<bool> out;
    for (size_t at = 0; (at = text.find_first_of("TF", at)) != std::string::npos; ++at)
      out.push_back(text[at] == 'T');
    return out;
  };
  const std::vector<bool> ea = entries(ma), eb = entries(mb);
  if (ea.size() != eb.size()) return "";
  for (size_t k = 0; k < ea.size(); ++k) {
    if (ea[k] == eb[k]) continue;
    const char* without = ea[k] ? "B" : "A";
    return std::string("; ") + without + " computes no gradient for this backward op's input " +
           std::to_string(k) + " (output_mask): what feeds that input requires no grad in " +
           without + ", such as a parameter frozen there (requires_grad_(False)), or torch.no_grad "
           "or .detach() upstream";
  }
  return "";
}

// Where `op` converts a floating tensor to another floating dtype of the same sizes (`.double()`,
// `.half()`, `.to(torch.float64)`: its input 0 and output 0), {"run", "from", "to"} for the run
// that has it only; else null.
json conversion_of(const OpRecord& op, const std::string& run) {
  const TensorRecord* in = nullptr;
  const TensorRecord* out = nullptr;
  for (const TensorRecord& t : op.tensors) {
    if (t.role == TensorRole::kInput && t.index == 0) in = &t;
    if (t.role == TensorRole::kOutput && t.index == 0) out = &t;
  }
  if (in == nullptr || out == nullptr || in->dtype == out->dtype || in->shape != out->shape ||
      !hashing::dtype_is_floating(in->dtype) || !hashing::dtype_is_floating(out->dtype))
    return nullptr;
  return {{"run", run},
          {"from", hashing::dtype_name(in->dtype)},
          {"to", hashing::dtype_name(out->dtype)}};
}

// " (a conversion of float32 to float64 in B only: ...)" for a conversion_of, else "".
std::string conversion_note(const json& c) {
  if (c.is_null()) return "";
  return " (a conversion of " + c["from"].get<std::string>() + " to " + c["to"].get<std::string>() +
         " in " + c["run"].get<std::string>() +
         " only: a .double(), .float(), .half() or .to(dtype) call, which computes what follows "
         "in that dtype)";
}

// " (the DataLoader's draw of a base seed for a new iterator ...)" where ops [begin, end) of
// `side` are that draw alone (`torch.empty((), dtype=torch.int64).random_().item()` in
// torch/utils/data/dataloader.py): each new iterator over the loader (each epoch) draws one
// unless persistent_workers keeps the first; else "".
std::string base_seed_note(Side& side, int64_t begin, int64_t end) {
  if (end - begin > 8) return "";
  bool random = false, in_loader = false;
  for (int64_t t = begin; t < end; ++t) {
    const auto op = side.reader->op_at(side.thread, t);
    if (!op) return "";
    const std::string name = side.strings.text(op->name);
    if (name != "aten::empty" && name != "aten::random_" && name != "aten::item" &&
        name != "aten::_local_scalar_dense")
      return "";
    random = random || name == "aten::random_";
    if (t == begin)
      for (const tracer::FrameRecord& f : side.reader->stack(op->stack))
        in_loader = in_loader || side.strings.text(f.file).find("torch/utils/data/dataloader.py") !=
                                     std::string::npos;
  }
  return random && in_loader
             ? " (the DataLoader's draw of a base seed for a new iterator over it: each epoch "
               "draws one, unless persistent_workers=True (with num_workers > 0) keeps the "
               "first iterator and its workers; persistent_workers or the number of epochs "
               "differs)"
             : "";
}

// The calls whose ranges begin and end inside ops [begin, end) of `side`'s thread, outermost
// only, said: " (all of an optimizer.zero_grad() call)", " (all of an optimizer.step() call
// and an optimizer.zero_grad() call)", " (all of the range \"fetch\")"; "" where none does.
// The ranges are the user's (`record_function`, the one zero_grad() opens) and optimizer steps.
// A hunk's first op may be a range's own plumbing (record_function makes a tensor before it
// opens), which names no call.
std::string whole_range_note(Side& side, int64_t begin, int64_t end) {
  const auto first = side.reader->op_at(side.thread, begin);
  const auto last = side.reader->op_at(side.thread, end - 1);
  if (!first || !last) return "";
  constexpr int kSaid = 3;
  std::vector<std::string> calls;
  std::set<std::string> inside;  // ids of the ranges taken, whose children are not said again
  int64_t more = 0;
  (void)side.reader->query(
      "SELECT id, name, kind, parent FROM regions WHERE kind IN (0, 1) AND thread = " +
          std::to_string(side.thread) + " AND start_seq >= " + std::to_string(first->seq) +
          " AND end_seq IS NOT NULL AND end_seq <= " + std::to_string(last->seq) +
          " ORDER BY start_seq, end_seq DESC, id DESC",
      [&](const std::vector<std::string>& row) {
        if (row.size() < 4 || row[1].empty()) return true;
        if (!row[3].empty() && inside.count(row[3])) {
          inside.insert(row[0]);
          return true;
        }
        inside.insert(row[0]);
        if (calls.size() == kSaid) {
          ++more;
          return true;
        }
        const std::string name =
            side.strings.text(static_cast<tracer::StringId>(std::stoull(row[1])));
        calls.push_back(row[2] == "1" ? "an optimizer.step() call"
                        : name.rfind("Optimizer.zero_grad#", 0) == 0
                            ? "an optimizer.zero_grad() call"
                            : "the range \"" + name + "\"");
        return true;
      });
  if (calls.empty()) return "";
  std::string text = " (all of ";
  for (size_t k = 0; k < calls.size(); ++k)
    text += (k == 0 ? "" : k + 1 == calls.size() && more == 0 ? " and " : ", ") + calls[k];
  if (more > 0) text += " and " + std::to_string(more) + " more";
  return text + ")";
}

// " (the gradients' zeroing in optimizer.zero_grad(), which B does not do: ...)" where ops
// [begin, end) of `side` are `aten::zero_` alone, inside an optimizer's zero_grad() range: the
// other run sets the gradients to None instead (set_to_none=True, torch 2.0's default), and
// its backward then makes them afresh; else "".
std::string set_to_none_note(Side& side, int64_t begin, int64_t end, const std::string& other) {
  if (end - begin > 4096) return "";
  int64_t first_seq = -1, last_seq = -1, zeroes = 0;
  if (!side.reader
           ->scan_ops(side.thread, begin, end, false,
                      [&](const OpRecord& o) {
                        if (side.strings.text(o.name) != "aten::zero_") return false;
                        if (zeroes++ == 0) first_seq = o.seq;
                        last_seq = o.seq;
                        return true;
                      })
           .ok() ||
      zeroes != end - begin)
    return "";
  bool inside = false;
  (void)side.reader->query(
      "SELECT name FROM regions WHERE kind = 0 AND thread = " + std::to_string(side.thread) +
          " AND start_seq <= " + std::to_string(first_seq) +
          " AND end_seq >= " + std::to_string(last_seq),
      [&](const std::vector<std::string>& row) {
        if (!row.empty() && !row[0].empty() &&
            side.strings.text(static_cast<tracer::StringId>(std::stoull(row[0])))
                    .rfind("Optimizer.zero_grad#", 0) == 0)
          inside = true;
        return !inside;
      });
  return inside ? " (the gradients' zeroing in optimizer.zero_grad(), which " + other +
                      " does not do: it sets them to None instead, set_to_none=True, the "
                      "default from torch 2.0, and its backward makes them afresh)"
                : "";
}

// Whether `o` is in-place arithmetic that wrote its tensor's values back as they were (input 0
// and output 0 hash the same): a clip whose threshold no norm reached multiplies by 1. Moved or
// added, it changes nothing in this run, and may with other values.
bool unchanged_write(const OpRecord& o, Strings& strings) {
  static const std::set<std::string> kArithmetic = {
      "aten::mul_",     "aten::div_",       "aten::add_",       "aten::sub_",
      "aten::clamp_",   "aten::clamp_min_", "aten::clamp_max_", "aten::masked_fill_",
      "aten::addcmul_", "aten::addcdiv_",   "aten::lerp_",      "aten::where_"};
  if (!kArithmetic.count(strings.text(o.name))) return false;
  const TensorRecord* in = nullptr;
  const TensorRecord* out = nullptr;
  for (const TensorRecord& t : o.tensors)
    if (t.index == 0) (t.role == TensorRole::kInput ? in : out) = &t;
  // (Zeros stay zeros under a scale, whatever its factor: an optimizer's state at its first
  // step, `exp_avg.mul_(beta1)`, is no write that other data would make otherwise.)
  const bool zeros = in && in->summary.valid && in->summary.min == 0 && in->summary.max == 0;
  return in && out && in->hash != 0 && in->hash == out->hash && tensor_comparable(*in) &&
         tensor_comparable(*out) && !zeros;
}

// Whether hunk `h` replaces ops with as many of the same names, in the same order, each
// called with another number of arguments (another overload: randperm with a generator and
// without). At most 64 ops: a longer change is taken as other work. (Ops of the same names
// on other tensors are not: a set iterated in another order runs them so.)
bool same_names_in_place(Pair& p, const Hunk& h) {
  const int64_t n = h.a_end - h.a_begin;
  if (n == 0 || n != h.b_end - h.b_begin || n > 64) return false;
  bool other_arguments = false;
  for (int64_t k = 0; k < n; ++k) {
    auto oa = p.a.reader->op_at(p.a.thread, h.a_begin + k);
    auto ob = p.b.reader->op_at(p.b.thread, h.b_begin + k);
    if (!oa || !ob || p.a.strings.text(oa->name) != p.b.strings.text(ob->name)) return false;
    other_arguments = other_arguments || oa->args.size() != ob->args.size();
  }
  return other_arguments;
}

// The first ops of hunk `h` on each side (none where it takes none), and the change in one
// sentence: "3 op(s) inserted in B, first aten::linear".
struct HunkStart {
  std::optional<OpRecord> a, b;
  std::string text;
  json conversion;  // conversion_of the first op the change adds or removes, where it is one
};
HunkStart hunk_start(Pair& p, const Hunk& h) {
  HunkStart s;
  if (h.a_end > h.a_begin) s.a = p.a.reader->op_at(p.a.thread, h.a_begin);
  if (h.b_end > h.b_begin) s.b = p.b.reader->op_at(p.b.thread, h.b_begin);
  const int64_t removed = h.a_end - h.a_begin, inserted = h.b_end - h.b_begin;
  if (s.a && s.b) {
    const std::string first = compare_ops(*s.a, p.a.strings, *s.b, p.b.strings).structure;
    s.text = std::to_string(removed) + " op(s) of A replaced by " + std::to_string(inserted) +
             " op(s) in B; first: " + first + grad_mask_note(*s.a, p.a.strings, *s.b, p.b.strings);
    // Other ops first: the first op both sides run, with what differs there, says more.
    if (first.rfind("different ops", 0) == 0) {
      s.conversion = conversion_of(*s.b, "B");
      if (s.conversion.is_null()) s.conversion = conversion_of(*s.a, "A");
      s.text += conversion_note(s.conversion) + first_shared_op(p, h);
    }
  } else if (s.b) {
    s.conversion = conversion_of(*s.b, "B");
    s.text = std::to_string(inserted) + " op(s) inserted in B, first " +
             p.b.strings.text(s.b->name) + conversion_note(s.conversion) +
             whole_range_note(p.b, h.b_begin, h.b_end) + base_seed_note(p.b, h.b_begin, h.b_end) +
             set_to_none_note(p.b, h.b_begin, h.b_end, "A");
  } else if (s.a) {
    s.conversion = conversion_of(*s.a, "A");
    s.text = std::to_string(removed) + " op(s) of A removed in B, first " +
             p.a.strings.text(s.a->name) + conversion_note(s.conversion) +
             whole_range_note(p.a, h.a_begin, h.a_end) + base_seed_note(p.a, h.a_begin, h.a_end) +
             set_to_none_note(p.a, h.a_begin, h.a_end, "B");
  }
  return s;
}

// Whether a hunk changes how the two runs count steps only by calls of the optimizer's step: an
// extra or missing `optimizer.step()` (every op the advancing side ran there is inside an
// optimizer step region), after which the step numbers differ but each run's next iteration
// still pairs with the other's. Any other hunk that moves one run's step count ahead (a step's
// forward and backward lost, a step run on half the batches) pairs other iterations from there.
class StepCalls {
 public:
  explicit StepCalls(Pair& p) : p_(p) {}

  // False once a hunk has shifted the step numbers by more than optimizer step calls.
  bool steps_comparable() const { return comparable_; }

  void add_hunk(const Hunk& h) {
    if (!comparable_ || h.a_end >= p_.a.count || h.b_end >= p_.b.count) return;
    const int64_t advance_a = advance(p_.a, h.a_begin, h.a_end);
    const int64_t advance_b = advance(p_.b, h.b_begin, h.b_end);
    if (advance_a == advance_b) return;
    if (advance_a < 0 || advance_b < 0) {
      comparable_ = false;
      return;
    }
    // The side whose steps advance more ran only optimizer steps there; the other none.
    const bool a_ahead = advance_a > advance_b;
    comparable_ = (a_ahead ? advance_b : advance_a) == 0 &&
                  (a_ahead ? inside_steps(p_.a, regions_a_, h.a_begin, h.a_end)
                           : inside_steps(p_.b, regions_b_, h.b_begin, h.b_end));
  }

 private:
  using Regions = std::optional<std::vector<std::pair<int64_t, int64_t>>>;

  // Steps completed over [begin, end): the step of the op at `end` less that at `begin`; -1
  // when they cannot be read.
  static int64_t advance(Side& s, int64_t begin, int64_t end) {
    if (begin == end) return 0;
    auto first = s.reader->op_at(s.thread, begin);
    auto after = s.reader->op_at(s.thread, end);
    if (!first || !after) return -1;
    return after->step - first->step;
  }

  // Whether every op of the thread in [begin, end) ran inside an optimizer step region, up to
  // a bound of ops read (a hunk larger than an optimizer step of a large model is no step).
  static bool inside_steps(Side& s, Regions& regions, int64_t begin, int64_t end) {
    constexpr int64_t kMaxOps = 1 << 16;
    if (end - begin > kMaxOps) return false;
    if (!regions) {
      regions.emplace();
      Status st = s.reader->query(
          "SELECT start_seq, end_seq FROM regions WHERE kind = 1 AND thread = " +
              std::to_string(s.thread) + " ORDER BY start_seq",
          [&](const std::vector<std::string>& row) {
            if (row.size() < 2 || row[0].empty()) return true;
            const int64_t last = row[1].empty() ? std::numeric_limits<int64_t>::max()
                                                : std::stoll(row[1]);
            regions->emplace_back(std::stoll(row[0]), last);
            return true;
          });
      if (!st.ok()) regions->clear();
    }
    if (regions->empty()) return false;
    // Ops outside the regions that the same call ran (Python's `record_function` makes its
    // handle tensor before the range opens) are its ops too: those of the calls' source lines.
    std::unordered_set<tracer::FrameId> calls;
    std::vector<tracer::FrameId> outside;
    Status st = s.reader->scan_ops(s.thread, begin, end, false, [&](const OpRecord& o) {
      // The last region starting at or before the op; step regions do not nest.
      auto it = std::upper_bound(regions->begin(), regions->end(), o.seq,
                                 [](int64_t seq, const auto& r) { return seq < r.first; });
      if (it != regions->begin() && o.seq <= std::prev(it)->second) {
        calls.insert(o.user_frame);
      } else {
        outside.push_back(o.user_frame);
      }
      return true;
    });
    if (!st.ok() || calls.empty()) return false;
    return std::all_of(outside.begin(), outside.end(),
                       [&](tracer::FrameId f) { return f != 0 && calls.count(f) > 0; });
  }

  Pair& p_;
  bool comparable_ = true;
  Regions regions_a_, regions_b_;
};

// For an order chosen at run time in a Python program: ", and PYTHONHASHSEED is unset in both
// runs, ..." where neither run fixed it (meta `env`), which makes a set of strings iterate in
// another order in every run; "" otherwise (a differing PYTHONHASHSEED is a setting that
// differs, said with the settings).
std::string hash_seed_note(const Pair& p) {
  auto unset = [](const Reader& r) {
    if (r.meta("python_version").empty()) return false;
    const std::optional<std::string> seed = python_hash_seed(r);
    return seed && (seed->empty() || *seed == "random");
  };
  return unset(*p.a.reader) && unset(*p.b.reader)
             ? "; PYTHONHASHSEED is unset in both runs, so the order of a set of strings (and "
               "hash() of a string) changes in every run: set PYTHONHASHSEED=0, or sort"
             : "";
}

// Whether a tensor of shape text `shape` ("64x8", "0x8 strides 8x1") has no elements.
bool no_elements(const std::string& shape) {
  const std::string sizes = shape.substr(0, shape.find(' '));
  size_t begin = 0;
  while (begin <= sizes.size() && !sizes.empty()) {
    const size_t end = std::min(sizes.find('x', begin), sizes.size());
    if (sizes.compare(begin, end - begin, "0") == 0) return true;
    begin = end + 1;
  }
  return false;
}

// Full description of where a thread pair diverges, with what follows it.
StatusOr<json> describe(Pair& p, const Located& where, const DiffOptions& options,
                        Stats& stats, Progress& progress) {
  json out;
  Growth growth;
  int64_t budget = options.scan_limit < 0 ? std::numeric_limits<int64_t>::max() : options.scan_limit;
  bool restart = true;  // the walk's first step said to `options.on_aligned`
  // With steps paired by hand (--align-steps), the seq of each side's first op compared: ops
  // before it were left out. (Read only then.)
  auto first_seq = [&](const Side& side) {
    const auto op = options.align_steps.first >= 0 && side.count > side.begin
                        ? side.reader->op_at(side.thread, side.begin)
                        : std::nullopt;
    return op ? op->seq : int64_t{0};
  };
  const int64_t first_seq_a = first_seq(p.a), first_seq_b = first_seq(p.b);
  auto say_step = [&](AlignedStep step) {
    step.restart = std::exchange(restart, false);
    options.on_aligned(step);
  };
  Aligner aligner(p, where.i, where.j, options.align_steps.first >= 0);
  Aligner::Event e;
  json hunks = json::array();
  bool found_value_after = false;
  // The depth of a pair passed over for making the same result, while inside it.
  int same_result_depth = -1;
  int64_t total = std::max(p.a.count - where.i, p.b.count - where.j);
  bool complete = true;
  if (where.kind == Located::kValue) {
    const OpRecord* a = p.a.cursor.at(where.i);
    const OpRecord* b = p.b.cursor.at(where.j);
    if (!a || !b) return p.status();
    OpComparison c = compare_ops(*a, p.a.strings, *b, p.b.strings);
    describe_value(p, *a, *b, c, false, out);
    note_collective(p, *a, out);
    note_data_elsewhere(p, *a, *b, c, out);
    note_other_generators(p, out);
    note_seed_at(p, *a, *b, out);
    note_checkpoint_rng(p, *a, out);
    // Tensors the same line made, taken in another order (parameters of the same shape
    // collected through a set): where that is the optimizer's, its parameter order; and an
    // unset PYTHONHASHSEED, which orders a set of strings otherwise in every run.
    if (std::string detail = out.value("detail", std::string());
        out.value("cause", std::string()) == "structure" &&
        detail.find("which ran more than once, in another order") != std::string::npos) {
      if (in_optimizer_step(*p.a.reader, *a))
        detail +=
            ": inside optimizer.step(), the parameters are updated in another order (param "
            "groups built from a set or a dict iterated in another order, or sorted otherwise)";
      out["detail"] = detail + hash_seed_note(p);
    }
  } else {
    out["kind"] = "structure";
    out["cause"] = "structure";
    out["value_after_structure"] = nullptr;
  }
  // Ops (name and tensor kinds) removed minus inserted over every hunk, up to a budget of ops
  // read: all zero means the same ops ran in another order (parameter groups built from a set).
  std::unordered_map<std::string, int64_t> moved;
  // The same, with each op's user source line: balanced too when the same lines ran their
  // ops in another order (a loop over a set), not when the ops moved to other lines (layers
  // created in another order in the code).
  std::unordered_map<std::string, int64_t> moved_lines;
  // The same, with the user's whole call chain (function and line of each frame, up to
  // kCallFrames): balanced when the same calls ran in another order, not when the same
  // function was called from other places (an update moved before another call).
  std::unordered_map<std::string, int64_t> moved_calls;
  constexpr int kCallFrames = 8;
  // Each moved op, by its key with line, in order: its thread index and what it computed (its
  // tensors' hashes and its arguments), to compare the ops that moved with their
  // counterparts.
  struct MovedOp {
    int64_t tidx;
    uint64_t values;
  };
  std::unordered_map<std::string, std::vector<MovedOp>> moved_a, moved_b;
  int64_t moved_budget = 65536, moved_ops = 0;
  // The recent pairs (A's seq to B's), to tell whether a nested pair's enclosing ops were
  // paired with each other.
  std::unordered_map<int64_t, int64_t> paired_seq;
  std::deque<int64_t> paired_order;
  // The enclosing op of each op that one run inserted where the other ran nothing (seq to
  // parent seq), for the smaller such changes: an op nested in one is compared as if nested
  // where that op is (reentrant checkpointing wraps a block's forward in a CheckpointFunction
  // the other run never ran; the block's ops inside are still the same work).
  std::unordered_map<int64_t, int64_t> inserted_parent_a, inserted_parent_b;
  auto note_inserted = [](Side& s, int64_t begin, int64_t end,
                          std::unordered_map<int64_t, int64_t>& parents) {
    constexpr int64_t kLargest = 4096;  // ops of a change read for this
    if (end - begin > kLargest || begin >= end) return;
    if (parents.size() > (1u << 18)) parents.clear();  // bounded
    (void)s.reader->scan_ops(s.thread, begin, end, /*with_tensors=*/false, [&](const OpRecord& o) {
      parents[o.seq] = o.parent;
      return true;
    });
  };
  auto outside_inserted = [](const std::unordered_map<int64_t, int64_t>& parents, int64_t seq) {
    for (int k = 0; k < 64 && seq != tracer::kNoSeq; ++k) {
      auto it = parents.find(seq);
      if (it == parents.end()) break;
      seq = it->second;
    }
    return seq;
  };
  int64_t split_seq_a = std::numeric_limits<int64_t>::max(), split_seq_b = split_seq_a;
  if (const OpRecord* at_a = p.a.cursor.at(where.i)) split_seq_a = at_a->seq;
  if (const OpRecord* at_b = p.b.cursor.at(where.j)) split_seq_b = at_b->seq;
  bool moved_known = true;
  // An op as the reordering sees it: by name and tensor kinds (an op replaced by the same op
  // on other shapes, `topk` with another k, is a change, not a move), with its user source
  // line and call chain (function and line, not file: two copies of a script, train.py and
  // train_v2.py, are the same lines), and what it computed (its tensors' hashes and its
  // arguments).
  struct Identity {
    std::string key, line, calls;
    uint64_t values = 0;
  };
  auto identity = [&](Side& side, const OpRecord& o) {
    Identity id;
    id.key = side.strings.text(o.name);
    for (const TensorRecord& t : o.tensors)
      id.key += "|" + std::to_string(static_cast<int>(t.dtype)) + ":" + side.strings.text(t.shape);
    tracer::FrameId frame = o.user_frame;
    for (int k = 0; k < kCallFrames && frame != 0; ++k) {
      auto f = side.reader->frame(frame);
      if (!f) break;
      const std::string at = side.strings.text(f->function) + ":" + std::to_string(f->line);
      if (k == 0) id.line = at;
      id.calls += "<" + at;
      frame = f->parent;
    }
    auto combine = [&id](uint64_t v) {
      id.values ^= v + 0x9e3779b97f4a7c15ull + (id.values << 6) + (id.values >> 2);
    };
    for (const TensorRecord& t : o.tensors) combine(t.hash);
    for (const tracer::ArgRecord& arg : o.args)
      combine(std::hash<std::string>{}(side.strings.text(arg.value)));
    // What a random op drew from: with --hash none all that tells its values apart.
    combine(o.rng);
    return id;
  };
  // The optimizer steps where the changes start, in A and in B: ops that moved to other steps
  // ran before another optimizer step in each run.
  std::set<int32_t> change_steps[2];
  // Whether any stretch that moved ran ops in backward or an optimizer's step(): training
  // work, as against a block without either (an evaluation pass under no_grad, logging).
  bool moved_training = false;
  // The value each replacement leaves (the outputs of its last op that hashed one) is one the
  // other run's changes also made (in any of its changed stretches: ops may have moved);
  // else the change may have changed results that no later op reads (an EMA of the weights
  // kept another way, saved at the end). `left_differ_json`: the first replacement's last op,
  // in each run, whose value the other run's changes never made ({a, b}).
  std::unordered_set<uint64_t> changed_outputs[2];  // in A's changes, in B's
  struct Replacement {
    OpRecord last_a, last_b;  // the last ops of each (see `count_moved`)
    Hunk hunk;
  };
  std::vector<Replacement> replacements_left;
  constexpr size_t kReplacementsKept = 4096;
  // Reads the ops of a change's stretch in one run (sign +1: A's, -1: B's) once, for all of
  // the above; returns its last op with a hashed output, not counting ops nested in it (a
  // reshape's result, not the clone inside it that made another shape).
  // The first op of the changes that wrote its tensor back as it was (`unchanged_write`), and
  // its run (0: A).
  std::optional<std::pair<int, OpRecord>> kept_values;
  json collective_change;  // the first collective in a change, of one run alone
  bool hunk_at_end = false;  // the change being counted reaches the end of a thread
  // Every change so far replaces ops with as many of the same names, in the same order, with
  // other argument counts: the same calls of another overload, which moved nowhere.
  bool replaced_in_place = true;
  auto count_moved = [&](Side& side, int64_t begin, int64_t end, int64_t sign) {
    const int run = sign > 0 ? 0 : 1;
    std::optional<OpRecord> last;
    bool inside_last = false;  // the ops since `last` are nested in it
    int64_t first_seq = -1, last_seq = -1;  // the stretch's, for an optimizer step within it
    for (int64_t t = begin; moved_known && t < end; ++t) {
      auto o = side.reader->op_at(side.thread, t);
      if (!o || --moved_budget < 0) {
        moved_known = false;
        return last;
      }
      if (t == begin) {
        change_steps[run].insert(o->step);
        first_seq = o->seq;
      }
      last_seq = o->seq;
      if (o->flags & tracer::kOpBackward) moved_training = true;
      // (Not in a change that is a run's end: the ops the other ran on after it stopped.)
      if (!kept_values && !hunk_at_end && unchanged_write(*o, side.strings))
        kept_values.emplace(run, *o);
      // A collective one run alone runs (DDP's gradient all-reduce skipped in the other); not
      // in a change that is the other's end (it ended early, and ran nothing more).
      if (collective_change.is_null() && !hunk_at_end &&
          side.strings.text(o->name).rfind("c10d::", 0) == 0)
        collective_change = {{"run", run == 0 ? "A" : "B"},
                             {"op", side.strings.text(o->name)},
                             {"seq", o->seq},
                             {"step", o->step}};
      const Identity id = identity(side, *o);
      moved[id.key] += sign;
      moved_lines[id.key + "@" + id.line] += sign;
      moved_calls[id.key + "@" + id.calls] += sign;
      (sign > 0 ? moved_a : moved_b)[id.key + "@" + id.line].push_back({t, id.values});
      ++moved_ops;
      bool made = false;
      for (const TensorRecord& x : o->tensors)
        if (x.role == TensorRole::kOutput && x.status == tracer::TensorStatus::kHashed) {
          changed_outputs[run].insert(x.hash);
          // (A tensor of no elements holds no value: torch.load's placeholder before set_.)
          made = made || !no_elements(side.strings.text(x.shape));
        }
      if (last && o->depth <= last->depth) inside_last = false;
      if (made && !inside_last) {
        last = std::move(o);
        inside_last = true;
      }
    }
    if (first_seq >= 0 && !moved_training &&
        optimizer_step_within(*side.reader, side.thread, first_seq, last_seq))
      moved_training = true;
    return last;
  };
  auto left_differ_json = [&]() -> json {
    // Zeros left are no result (`zero_grad()` zeroing gradients that a resumed run's first
    // backward makes afresh): only values other than 0 count.
    auto made_by_other = [](const OpRecord& last, const std::unordered_set<uint64_t>& other) {
      for (const TensorRecord& x : last.tensors) {
        const bool zeros = x.summary.valid && x.summary.abs_sum == 0 && x.summary.nan_count == 0 &&
                           x.summary.inf_count == 0;
        if (x.role == TensorRole::kOutput && x.status == tracer::TensorStatus::kHashed && !zeros &&
            !other.count(x.hash))
          return false;
      }
      return true;
    };
    // Whether an op of the next 64 after the stretch [begin, end) of `side` reads what an op
    // of the stretch made (a crop's slices of a flip the other run does after the crop): then
    // the values it leaves are read by compared ops, which all have the same values.
    auto read_after = [](Side& side, int64_t begin, int64_t end) {
      auto first = side.reader->op_at(side.thread, begin);
      auto last_op = side.reader->op_at(side.thread, end - 1);
      if (!first || !last_op) return false;
      bool read = false;
      (void)side.reader->scan_ops(side.thread, end, end + 64, /*with_tensors=*/true,
                                  [&](const OpRecord& op) {
                                    for (const TensorRecord& t : op.tensors)
                                      if (t.role == TensorRole::kInput && t.producer >= first->seq &&
                                          t.producer <= last_op->seq)
                                        read = true;
                                    return !read;
                                  });
      return read;
    };
    for (const Replacement& r : replacements_left) {
      if (made_by_other(r.last_a, changed_outputs[1]) && made_by_other(r.last_b, changed_outputs[0]))
        continue;
      if (read_after(p.a, r.hunk.a_begin, r.hunk.a_end) &&
          read_after(p.b, r.hunk.b_begin, r.hunk.b_end))
        continue;
      return {{"a", op_json(*p.a.reader, p.a.strings, r.last_a)},
              {"b", op_json(*p.b.reader, p.b.strings, r.last_b)}};
    }
    return nullptr;
  };
  // Paired ops whose values differ, by key with line as for moved ops: with the moved ops of
  // their key, what each run computed there. When the two runs computed the same values at
  // a key, only in another order (parameters in other optimizer groups: the alignment pairs
  // one weight's `zeros_like` with another's of the same shape), its pairs that differ are
  // mispaired work, not values that differ. The first pairs that differ are kept, to name
  // the first whose key is not so balanced.
  std::unordered_map<std::string, std::vector<uint64_t>> unequal_a, unequal_b;
  std::unordered_map<std::string, int64_t> unequal_count;
  struct DifferingPair {
    int64_t ta, tb;
    std::string key_a, key_b;
    bool eligible;  // of one iteration in both runs: may be named (see below)
  };
  std::vector<DifferingPair> differing_pairs;
  constexpr size_t kDifferingPairsKept = 256;
  // Its own budget: a run whose values differ everywhere after the change keeps the moved
  // ops' count (the reorder) and loses only this.
  int64_t unequal_budget = 65536;
  bool unequal_known = true;
  auto note_unequal = [&](const OpRecord& a, const OpRecord& b, bool eligible) {
    if (!unequal_known || --unequal_budget < 0) {
      unequal_known = false;
      return;
    }
    const Identity ia = identity(p.a, a), ib = identity(p.b, b);
    const std::string ka = ia.key + "@" + ia.line, kb = ib.key + "@" + ib.line;
    unequal_a[ka].push_back(ia.values);
    unequal_b[kb].push_back(ib.values);
    ++unequal_count[ka];
    if (differing_pairs.size() < kDifferingPairsKept)
      differing_pairs.push_back({a.tidx, b.tidx, ka, kb, eligible});
  };
  int value_after_depth = -1;  // depth of the value difference after a structural change
  bool value_after_takes_no_tensor = false;  // ... of an op that takes no tensor input
  // The seq of the first op at or after the first structural change, in each run.
  int64_t change_seq_a = std::numeric_limits<int64_t>::max(), change_seq_b = change_seq_a;
  std::optional<OpRecord> change_at_a, change_at_b;  // the ops at those seqs
  // Inside an optimizer step, an input one run made in this very step and the other carried
  // from an earlier one: optimizer state created afresh (a resumed run whose optimizer's state
  // was not loaded, a new optimizer made mid-training) against state that went on.
  auto fresh_optimizer_state = [&](const OpRecord& a, const OpRecord& b, const TensorRecord& ta,
                                   const TensorRecord& tb, std::string* run) -> std::string {
    // Optimizers whose settings differ there run other ops (`optimizer_change`), which is why.
    if (out.contains("optimizer_settings")) return "";
    // (State from outside torch's ops in one run, a checkpoint's, is carried, not made.)
    if ((ta.producer == tracer::kNoSeq && tb.producer == tracer::kNoSeq) ||
        !in_optimizer_step(*p.a.reader, a) || !in_optimizer_step(*p.b.reader, b))
      return "";
    std::optional<OpRecord> pa, pb;
    if (ta.producer != tracer::kNoSeq && !(pa = p.a.reader->op(ta.producer))) return "";
    if (tb.producer != tracer::kNoSeq && !(pb = p.b.reader->op(tb.producer))) return "";
    // Made in this step: the tensor's writes in place (`buf.mul_(momentum)` before
    // `buf.add_(grad)`) followed back to the op that made it, inside this step's optimizer
    // (SGD's `clone` of the first gradient, Adam's `zeros_like`), not carried from before.
    // `*from` receives the step of the op found where it was not (carried state's origin).
    auto made_in_step = [](Side& s, const OpRecord& op, std::optional<OpRecord> made,
                           int64_t* from) {
      for (int hops = 0; hops < 16 && made; ++hops) {
        *from = made->step;
        if (made->step != op.step || !in_optimizer_step(*s.reader, *made)) return false;
        const std::string& name = s.strings.text(made->name);
        const TensorRecord* in0 = nullptr;
        for (const TensorRecord& t : made->tensors)
          if (t.role == TensorRole::kInput && t.index == 0) in0 = &t;
        // (An op that makes its output, or writes into memory just allocated; not one that
        // writes into values no recorded op made, a state loaded from a checkpoint.)
        if (in0 && in0->producer == tracer::kNoSeq && tensor_comparable(*in0) && !name.empty() &&
            name.back() == '_') {
          *from = -1;
          return false;
        }
        if (name.empty() || name.back() != '_' || !in0 || in0->producer == tracer::kNoSeq)
          return true;
        made = s.reader->op(in0->producer);
      }
      return false;
    };
    int64_t from_a = a.step, from_b = b.step;
    const bool a_fresh = pa && made_in_step(p.a, a, pa, &from_a);
    const bool b_fresh = pb && made_in_step(p.b, b, pb, &from_b);
    if (a_fresh == b_fresh) return "";
    const char* fresh = b_fresh ? "B" : "A";
    const char* carried = b_fresh ? "A" : "B";
    const int64_t from = b_fresh ? from_a : from_b;
    const bool outside = !(b_fresh ? pa : pb) || from < 0;
    *run = fresh;
    return std::string(": ") + fresh + " made this optimizer state in this step and " + carried +
           (outside ? std::string(" had it from outside torch's ops (loaded from a checkpoint)")
            : from < (b_fresh ? a.step : b.step)
                ? " carried it from its step " + std::to_string(from)
                : std::string(" made it before this optimizer step")) +
           ", so " + fresh +
           "'s optimizer started afresh here (in a resumed run: its state was not "
           "restored, optimizer.load_state_dict missing?)";
  };
  // The same op making the input in each run, one in the forward and one run by autograd: a
  // forward recomputed in backward (activation checkpointing), whose values differ.
  auto recomputed_in_backward = [&](const TensorRecord& ta, const TensorRecord& tb) -> std::string {
    if (ta.producer == tracer::kNoSeq || tb.producer == tracer::kNoSeq) return "";
    auto pa = p.a.reader->op(ta.producer);
    auto pb = p.b.reader->op(tb.producer);
    if (!pa || !pb || p.a.strings.text(pa->name) != p.b.strings.text(pb->name)) return "";
    const bool a_backward = (pa->flags & tracer::kOpBackward) != 0;
    if (a_backward == ((pb->flags & tracer::kOpBackward) != 0)) return "";
    // A forward op, not an optimizer's (backward accumulating a gradient with add_ against an
    // optimizer's add_ of its momentum is other work, not a recomputation).
    if (in_optimizer_step(a_backward ? *p.b.reader : *p.a.reader, a_backward ? *pb : *pa))
      return "";
    // Nor a gradient's writing (autograd's AccumulateGrad, DDP's reducer copying its
    // all-reduced bucket): a gradient made another way, as where one run skips DDP's sync.
    auto gradient_write = [](const std::string& name) {
      return name.find("AccumulateGrad") != std::string::npos ||
             name.find("ddp.reducer") != std::string::npos;
    };
    if (enclosed_by(p.a, *pa, gradient_write) || enclosed_by(p.b, *pb, gradient_write)) return "";
    const char* again = a_backward ? "A" : "B";
    return std::string(": ") + again + "'s " + p.a.strings.text(pa->name) +
           " was computed again in backward (activation checkpointing) and made other values "
           "than the forward's: a random op in it drew other numbers the second time "
           "(torch.utils.checkpoint with preserve_rng_state=False), or what it reads changed "
           "in between";
  };
  // An input that "comes from ops changed by the structural change" but was made in each run by
  // another op from before the change (a head's weight tied to the embedding's in one run):
  // the op reads another tensor; say which ops made it.
  auto made_before_change = [&](const OpRecord& a, const OpRecord& b, const OpComparison& c,
                                json& v) {
    // (Or a view in one run and new data in the other, or a view of other memory in each run,
    // which have no value hashes to differ.)
    const int which = c.input >= 0 ? c.input : c.provenance >= 0 ? c.provenance : c.view;
    if (v.value("cause", "") != "structure" || which < 0) return;
    const size_t k = static_cast<size_t>(which);
    if (k >= a.tensors.size() || k >= b.tensors.size()) return;
    const TensorRecord& ta = a.tensors[k];
    const TensorRecord& tb = b.tensors[k];
    // Made in the changes (by an op a hook inserted, say): name the ops that made it.
    if ((ta.producer != tracer::kNoSeq && ta.producer >= change_seq_a) ||
        (tb.producer != tracer::kNoSeq && tb.producer >= change_seq_b)) {
      const std::string detail = v.value("detail", std::string());
      // Written by an op of the change in one run, from outside in the other (a state loaded
      // in one run only): optimizer state made afresh, or not.
      if (detail.find(", one of the ops of the structural change") != std::string::npos) {
        std::string fresh_run;
        const std::string fresh = fresh_optimizer_state(a, b, ta, tb, &fresh_run);
        if (!fresh_run.empty()) {
          v["optimizer_fresh"] = fresh_run;
          v["detail"] = detail + fresh;
        }
        return;
      }
      if (detail.find("comes from ops changed by the structural change") == std::string::npos ||
          detail.find("made by op") != std::string::npos)
        return;
      std::string made;
      auto name = [&](const char* side, Side& s, const OpRecord& reader_op, const TensorRecord& t) {
        if (t.producer == tracer::kNoSeq) {
          // Read from memory an `empty` returned that nothing wrote (zeros made empty).
          if (!uninitialized_read(s.strings, t)) return;
          const auto maker = uninitialized_maker(*s.reader, s.strings, reader_op, t);
          made += std::string(made.empty() ? "" : "; ") + side + ": read from memory that " +
                  (maker ? op_at_source_seq(*s.reader, s.strings, *maker)
                         : std::string("an op of the empty family")) +
                  " returned uninitialized, which no recorded op wrote";
          return;
        }
        auto op = s.reader->op(t.producer);
        if (!op) return;
        made += std::string(made.empty() ? "" : "; ") + side + ": made by op " +
                std::to_string(t.producer) + ", " + op_at_source(*s.reader, s.strings, *op);
      };
      name("A", p.a, a, ta);
      name("B", p.b, b, tb);
      if (!made.empty()) {
        std::string fresh_run;  // (for the headline: which run's optimizer started afresh)
        const std::string fresh = fresh_optimizer_state(a, b, ta, tb, &fresh_run);
        if (!fresh_run.empty()) v["optimizer_fresh"] = fresh_run;
        v["detail"] = detail + " (" + made + ")" + fresh + recomputed_in_backward(ta, tb);
      }
      return;
    }
    if (ta.producer == tracer::kNoSeq || tb.producer == tracer::kNoSeq) return;
    auto pa = p.a.reader->op(ta.producer);
    auto pb = p.b.reader->op(tb.producer);
    if (!pa || !pb) return;
    const std::string in_a = op_at_source(*p.a.reader, p.a.strings, *pa);
    const std::string in_b = op_at_source(*p.b.reader, p.b.strings, *pb);
    if (in_a == in_b) return;  // the same op: its values changed later
    v["detail"] = "input " + std::to_string(ta.index) + " comes from another op in each run, both " +
                  "before the change (A: op " + std::to_string(ta.producer) + ", " + in_a + "; B: op " +
                  std::to_string(tb.producer) + ", " + in_b + "): the op reads another tensor (a " +
                  "weight tied to another, or another variable passed)";
  };
  // Healing: every tensor whose values differ has been overwritten with the same values in
  // both runs (a random init that a checkpoint load replaces), and the ops compared since are
  // all the same. `live` holds the tensors whose values differ and that no in-place op has
  // since overwritten with equal values; a tensor only left unused (a model
  // no longer trained, numbers read into Python) stays live, so a few equal ops at the end of
  // a run heal nothing. After healing, a difference of its own (an argument or a generator
  // state differing while every tensor input is the same) is a new divergence, likely the one
  // that matters. Only after a value divergence: the ops a structural change inserts recur
  // every iteration (a checkpointed forward recomputed), and `values_same` below says what
  // matters there.
  const bool track_healing = where.kind == Located::kValue;
  constexpr int64_t kHealedOps = 8;  // fewer same ops after healing say nothing
  // Live tensors by their value in A (the hash of a differing output): a later op that reads
  // the same values reads the same tensor, whichever view or alias it goes through. An in-place
  // `copy_` called by the program (not nested), which overwrites its input 0 without reading
  // it (not hashed), replaces a live tensor of its dtype and shape (a checkpoint load): the
  // recording does not say which one, and a wrong guess only matters if the tensor is read
  // later, which makes the ops after it differ.
  std::unordered_map<uint64_t, std::pair<hashing::DType, tracer::StringId>> live;
  // A collective writes its first tensor argument in place (broadcast_, allreduce_: what it
  // receives; allgather_: its outputs), whatever its schema says.
  constexpr uint32_t kWritesInput0 = tracer::kOpInplace | tracer::kOpCollective;
  // The op that overwrote the last live tensor: what healed the difference (in A).
  json healed_by;
  // A's seeds drawn (`seed_draw`) by their hashes: numbers for the program to read (DataLoader's
  // base seed, unused without workers), whose differing values are not live; where the
  // program seeds a generator with one, the ops that draw from it differ on their own.
  std::unordered_set<uint64_t> seed_hashes;
  auto note_seed = [&](const OpRecord& a) {
    if (!seed_draw(a, p.a.strings)) return;
    for (const TensorRecord& t : a.tensors)
      if (t.role == TensorRole::kOutput) seed_hashes.insert(t.hash);
  };
  auto reads_seed = [&](const OpRecord& a, const OpComparison& c) {
    return c.input >= 0 && static_cast<size_t>(c.input) < a.tensors.size() &&
           seed_hashes.count(a.tensors[static_cast<size_t>(c.input)].hash) > 0;
  };
  // Whether paired op `a` reads differing values into Python (other values, not the same
  // ones made another way): an op with no tensor out at all (`.item()`'s
  // _local_scalar_dense; not backward's nodes, which record none), or the resolve_conj
  // (resolve_neg) called at the top before `.tolist()` reads the data without an op. Not a
  // seed drawn for the program (`seed_draw`), which is no result of its training.
  auto reads_into_python = [&](const OpRecord& a, const OpComparison& c) {
    if (c.input < 0 || (a.flags & tracer::kOpBackward) || reads_seed(a, c)) return false;
    if (std::none_of(a.tensors.begin(), a.tensors.end(),
                     [](const TensorRecord& t) { return t.role == TensorRole::kOutput; }))
      return true;
    const std::string& name = p.a.strings.text(a.name);
    return a.depth == 0 && (name == "aten::resolve_conj" || name == "aten::resolve_neg");
  };
  auto track_live = [&](const OpRecord& a, const OpRecord& b, const OpComparison& c) {
    if ((a.flags & kWritesInput0) && !live.empty()) {
      for (const TensorRecord& t : a.tensors) {
        if (t.role != TensorRole::kInput || t.index != 0) continue;
        if (tensor_comparable(t)) {
          live.erase(t.hash);
        } else if (t.status == tracer::TensorStatus::kNotHashed && t.producer == tracer::kNoSeq &&
                   a.depth == 0 && p.a.strings.text(a.name) == "aten::copy_") {
          // (Nested in a factory op, `zeros` or `full`, it fills a tensor made there; a
          // `zero_` at the top is most often zero_grad's.)
          for (auto it = live.begin(); it != live.end(); ++it) {
            if (it->second.first != t.dtype || it->second.second != t.shape) continue;
            live.erase(it);
            break;
          }
        }
      }
      if (live.empty()) {
        healed_by = op_brief_json(*p.a.reader, p.a.strings, a);
      }
    }
    // Differing outputs, and differing inputs no compared op made (data from outside, a
    // collective's result): tensors whose values differ from here on. Input 0 of an in-place
    // op is its output's old version, replaced above.
    if (c.output < 0 && c.input < 0) return;
    if (seed_draw(a, p.a.strings)) return;
    const bool in_place = (a.flags & kWritesInput0) != 0;
    for (size_t k = 0; k < a.tensors.size() && k < b.tensors.size(); ++k) {
      const TensorRecord& ta = a.tensors[k];
      const TensorRecord& tb = b.tensors[k];
      if (ta.role == TensorRole::kInput && in_place && ta.index == 0) continue;
      // A view holds its base's values: the base is what is live (and overwritten). Views
      // taken of a differing tensor (DDP flattening its parameters to broadcast them) would
      // otherwise stay live after the base is written with equal values.
      if (ta.status == tracer::TensorStatus::kView || tb.status == tracer::TensorStatus::kView)
        continue;
      if (tensor_comparable(ta) && tensor_comparable(tb) && ta.hash != tb.hash &&
          !(ta.role == TensorRole::kInput && seed_hashes.count(ta.hash)))
        live[ta.hash] = {ta.dtype, ta.shape};
    }
  };
  int64_t same_run = 0, same_from_seq = -1, same_from_step = 0;
  // Where the runs are the same again, and the op that made them so.
  auto healed_json = [&] {
    json h = {{"seq_a", same_from_seq}, {"step", same_from_step}, {"ops_same", same_run}};
    if (!healed_by.is_null()) h["by"] = healed_by;
    return h;
  };
  int64_t pairs_compared = 0, pairs_differing = 0;
  // Whether the last structural change replaced ops up to both ends (every later op changed
  // shape: another batch size), where "no paired value differs" says little.
  bool ends_replaced = false;
  json next_divergence;
  // The first divergence's argument difference again, alone, at a later call (of the op, or
  // of the ops nested in it that take the argument on: batch norm's momentum in eval mode,
  // every step): no new divergence, and no value differs there either. Counted (`repeats` of
  // `healed`).
  int64_t repeats = 0;
  auto repeats_first_argument = [&](const OpRecord& a, const OpRecord& b, const OpComparison& c) {
    if (c.arg < 0 || c.input >= 0 || c.output >= 0 || c.rng || !c.structure.empty()) return false;
    const auto found = out.find("argument");
    if (found == out.end() || !found->is_object()) return false;
    const json& arg = *found;
    auto text = [](const json& j, const char* key) {
      const auto it = j.find(key);
      return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    const tracer::ArgRecord& aa = a.args[static_cast<size_t>(c.arg)];
    const tracer::ArgRecord& ab = b.args[static_cast<size_t>(c.arg)];
    const bool same = p.a.strings.text(aa.name) == text(arg, "name") &&
                      number_text(p.a.strings.text(aa.value)) == text(arg, "value_a") &&
                      number_text(p.b.strings.text(ab.value)) == text(arg, "value_b");
    repeats += same ? 1 : 0;
    return same;
  };
  auto note_difference = [&](const OpRecord* a, const OpRecord* b, const OpComparison* c) {
    // (A random op drawing otherwise after an `rng` first cause that healed is the same
    // unseeded generator, but where it matters now: an unseeded shuffle after the init a
    // checkpoint replaced. A seed drawn for the program to read never comes here.)
    // (Where an op overwrote the last tensor that differed, a checkpoint load, the runs are
    // the same again from there: one op after it says so; an end of differences nothing
    // overwrote needs kHealedOps.)
    if (next_divergence.is_null() && live.empty() &&
        same_run >= (healed_by.is_null() ? kHealedOps : 1) && a && b && c && c->structure.empty() &&
        c->input < 0 && c->view < 0 && c->provenance < 0 && (c->arg >= 0 || c->rng)) {
      json v;
      describe_value(p, *a, *b, *c, where.kind == Located::kStructure, v);
      v["healed"] = healed_json();
      next_divergence = std::move(v);
    }
    if (next_divergence.is_null()) {
      same_run = 0;
      if (a && b && c) track_live(*a, *b, *c);
    }
  };
  StepCalls step_calls(p);
  bool first_event = true;
  // A structural split where the ops look alike (the same op in another module in each run:
  // a block called once more): the window's script, refined, says which copy is the change;
  // pairing the alike ops first would make the later copy the inserted one.
  if (where.kind == Located::kStructure) aligner.plan_here();
  bool first_hunk = true;  // the change the answer names: the first hunk, after any pairs
  Hunk first_change;       // that hunk, once met
  while (true) {
    // The first change of a structural divergence is read whatever the budget: it is the
    // answer (`--scan-limit 0` limits only what follows).
    const bool answer_pending = first_hunk && where.kind == Located::kStructure;
    if (growth.compared() >= budget && !answer_pending) {
      complete = false;
      break;
    }
    if (!aligner.next(&e)) break;
    progress.update(aligner.i() - where.i, total, "aligning");
    if (e.is_hunk) {
      ends_replaced = e.hunk.a_end == p.a.count && e.hunk.b_end == p.b.count &&
                      e.hunk.a_end > e.hunk.a_begin && e.hunk.b_end > e.hunk.b_begin;
      // Its ops per step (a run that ended early leaves the other's remaining steps in one
      // trailing hunk), read up to a bound.
      std::map<int64_t, int64_t> by_step;
      {
        const bool a_longer = e.hunk.a_end - e.hunk.a_begin >= e.hunk.b_end - e.hunk.b_begin;
        Side& side = a_longer ? p.a : p.b;
        const int64_t begin = a_longer ? e.hunk.a_begin : e.hunk.b_begin;
        const int64_t end = a_longer ? e.hunk.a_end : e.hunk.b_end;
        constexpr int64_t kStepsRead = 1 << 17;
        int64_t read = 0;
        // In A's numbering, as the pairs count their steps (B's step s is A's s + step_offset
        // where the steps were paired: a resumed run's start-up is A's step K, not step 0).
        const int64_t offset = a_longer ? 0 : p.step_offset;
        Status st = side.reader->scan_ops(side.thread, begin, std::min(end, begin + kStepsRead),
                                          false, [&](const OpRecord& o) {
                                            ++by_step[o.step + offset];
                                            return ++read < kStepsRead;
                                          });
        if (!st.ok()) by_step.clear();
      }
      // The rest of one run past the end of the other, which ended early.
      char past_end = 0;
      int64_t other_last_step = 0;
      if (e.hunk.a_end == p.a.count && e.hunk.b_end == p.b.count && p.a_cut_short != p.b_cut_short) {
        past_end = p.b_cut_short ? 'A' : 'B';
        other_last_step = p.b_cut_short ? p.b.last_step() : p.a.last_step();
      }
      growth.add_hunk(e.hunk, by_step, past_end, other_last_step);
      if (options.on_aligned) {
        // A's ops the change removes, or the A op after an insertion (the last at the end).
        const Hunk& h = e.hunk;
        auto seq_at = [&](Side& side, int64_t tidx) {
          auto op = side.reader->op_at(side.thread, std::min(tidx, side.count - 1));
          return op ? op->seq : tracer::kNoSeq;
        };
        AlignedStep change;
        change.a_first_seq = seq_at(p.a, h.a_begin);
        change.a_last_seq = h.a_end > h.a_begin ? seq_at(p.a, h.a_end - 1) : change.a_first_seq;
        change.b_first_seq = seq_at(p.b, h.b_begin);
        change.b_last_seq = h.b_end > h.b_begin ? seq_at(p.b, h.b_end - 1) : change.b_first_seq;
        change.a_ops = h.a_end - h.a_begin;
        change.b_ops = h.b_end - h.b_begin;
        change.a_thread = p.a.thread;
        change.b_thread = p.b.thread;
        say_step(change);
      }
      // After healing, ops inserted or removed are a new divergence too (gradient clipping
      // added in one run).
      if (!first_event && track_healing && next_divergence.is_null() && live.empty() &&
          same_run >= kHealedOps) {
        const HunkStart hs = hunk_start(p, e.hunk);
        next_divergence = {{"kind", "structure"},
                           {"cause", "structure"},
                           {"detail", hs.text},
                           {"a", hs.a ? op_json(*p.a.reader, p.a.strings, *hs.a) : json(nullptr)},
                           {"b", hs.b ? op_json(*p.b.reader, p.b.strings, *hs.b) : json(nullptr)},
                           {"tensor", nullptr},
                           {"argument", nullptr},
                           {"rng", nullptr},
                           {"healed", healed_json()}};
      }
      if (!first_event) note_difference(nullptr, nullptr, nullptr);
      if (e.hunk.a_begin == e.hunk.a_end) note_inserted(p.b, e.hunk.b_begin, e.hunk.b_end, inserted_parent_b);
      if (e.hunk.b_begin == e.hunk.b_end) note_inserted(p.a, e.hunk.a_begin, e.hunk.a_end, inserted_parent_a);
      step_calls.add_hunk(e.hunk);
      hunk_at_end = e.hunk.a_end >= p.a.count || e.hunk.b_end >= p.b.count;
      if (replaced_in_place) replaced_in_place = same_names_in_place(p, e.hunk);
      std::optional<OpRecord> last_a = count_moved(p.a, e.hunk.a_begin, e.hunk.a_end, +1);
      std::optional<OpRecord> last_b = count_moved(p.b, e.hunk.b_begin, e.hunk.b_end, -1);
      if (last_a && last_b && replacements_left.size() < kReplacementsKept)
        replacements_left.push_back({std::move(*last_a), std::move(*last_b), e.hunk});
      if (static_cast<int>(hunks.size()) < options.max_hunks) hunks.push_back(hunk_json(p, e.hunk));
      if (first_hunk && where.kind == Located::kStructure) {
        // Where the change begins in each run (the first op at or after it).
        change_at_a = p.a.reader->op_at(p.a.thread, e.hunk.a_begin);
        change_at_b = p.b.reader->op_at(p.b.thread, e.hunk.b_begin);
        if (change_at_a) change_seq_a = change_at_a->seq;
        if (change_at_b) change_seq_b = change_at_b->seq;
        const Hunk& h = e.hunk;
        const HunkStart hs = hunk_start(p, h);
        const std::optional<OpRecord>& oa = hs.a;
        const std::optional<OpRecord>& ob = hs.b;
        out["a"] = oa ? op_json(*p.a.reader, p.a.strings, *oa) : json(nullptr);
        out["b"] = ob ? op_json(*p.b.reader, p.b.strings, *ob) : json(nullptr);
        out["tensor"] = nullptr;
        if (!hs.conversion.is_null()) out["conversion"] = hs.conversion;
        std::string detail = hs.text;
        if (oa && ob) {
          // The same op on other shapes: an argument that differs is often why (`topk`'s k).
          if (p.a.strings.text(oa->name) == p.b.strings.text(ob->name) &&
              oa->args.size() == ob->args.size()) {
            for (size_t k = 0; k < oa->args.size(); ++k) {
              const std::string va = p.a.strings.text(oa->args[k].value);
              const std::string vb = p.b.strings.text(ob->args[k].value);
              if (va == vb) continue;
              detail += "; argument " + p.a.strings.text(oa->args[k].name) + " A " + va + ", B " + vb;
              break;
            }
          }
          // Same op, different dtype or shape: name the tensor.
          if (p.a.strings.text(oa->name) == p.b.strings.text(ob->name) &&
              oa->tensors.size() == ob->tensors.size()) {
            for (size_t k = 0; k < oa->tensors.size(); ++k) {
              const TensorRecord& ta = oa->tensors[k];
              const TensorRecord& tb = ob->tensors[k];
              if (ta.dtype != tb.dtype || p.a.strings.text(ta.shape) != p.b.strings.text(tb.shape)) {
                out["tensor"] = {{"role", ta.role == TensorRole::kInput ? "input" : "output"},
                                 {"index", ta.index},
                                 {"dtype", hashing::dtype_name(ta.dtype)},
                                 {"shape", p.a.strings.text(ta.shape)},
                                 {"dtype_b", hashing::dtype_name(tb.dtype)},
                                 {"shape_b", p.b.strings.text(tb.shape)},
                                 {"hash_a", hex64(ta.hash)},
                                 {"hash_b", hex64(tb.hash)}};
                break;
              }
            }
          }
        }
        // One side's thread ends here while the other's goes on: where that run stopped
        // (`explain_ending` says why, from how its process ended).
        if (oa && !ob && h.b_end == p.b.count) out["ended"] = "B";
        if (ob && !oa && h.a_end == p.a.count) out["ended"] = "A";
        // Both ran other ops here, up to the end of a run that ended early: it ended in the
        // change (a shape error in a new loss, a new op that faulted), which the headline says.
        // Ops inserted up to the end of a run that ended early (`h @ torch.ones(3, 3)` added,
        // raising) are such a change too, the other run's ops after them removed.
        if (ob && h.b_end == p.b.count && (oa || h.a_end < p.a.count) && p.b_cut_short &&
            !p.a_cut_short)
          out["ended_in_change"] = "B";
        if (oa && h.a_end == p.a.count && (ob || h.b_end < p.b.count) && p.a_cut_short &&
            !p.b_cut_short)
          out["ended_in_change"] = "A";
        out["detail"] = detail;
        first_change = e.hunk;
        if (json mode = mode_change(p, e.hunk); !mode.is_null()) out["mode_change"] = std::move(mode);
        if (json settings = optimizer_change(p, e.hunk); !settings.is_null())
          out["optimizer_settings"] = std::move(settings);
        if (json extra = extra_steps(p, e.hunk); !extra.is_null()) {
          const std::string run = extra["run"];
          out["detail"] =
              detail + "; " + run + " calls optimizer.step() " +
              (extra["steps"] == 1 ? std::string("once more here, an update")
                                   : extra["steps"].dump() + " more times here, updates") +
              " the other run does not make (" + std::to_string(extra["steps_a"].get<int64_t>()) +
              " optimizer steps in A, " + std::to_string(extra["steps_b"].get<int64_t>()) +
              " in B)";
          out["extra_steps"] = std::move(extra);
        }
      } else if (where.kind == Located::kStructure && !out.contains("ended_in_change")) {
        // A run that ended a few ops after the first change, in a change of its own (the
        // added ops that raised aligned after a few alike ones), ended in that change too.
        constexpr int64_t kNear = 64;
        const Hunk& h = e.hunk;
        if (h.b_end == p.b.count && h.b_begin - first_change.b_end <= kNear && p.b_cut_short &&
            !p.a_cut_short && h.a_begin < p.a.count)
          out["ended_in_change"] = "B";
        if (h.a_end == p.a.count && h.a_begin - first_change.a_end <= kNear && p.a_cut_short &&
            !p.b_cut_short && h.b_begin < p.b.count)
          out["ended_in_change"] = "A";
      }
      first_hunk = false;
    } else {
      ++stats.ops_compared;
      // A pair the aligner made across the change of a forward op with an op autograd ran (a
      // `mul` of one run's forward and a `mul` inside the other's MulBackward0) compares
      // unrelated tensors: no value difference to name.
      // Likewise a nested op whose enclosing op is not paired with the other's: the ops it
      // is nested in were replaced (`x.mean()` for `x.sum() / n`: MeanBackward0's `expand` of
      // the loss's gradient, paired with SumBackward0's `expand` of that gradient already
      // divided), so it computes a part of other work.
      // Enclosing ops from before the split point paired op for op.
      bool same_parent = e.a->depth == e.b->depth;
      const int64_t parent_a = outside_inserted(inserted_parent_a, e.a->parent);
      const int64_t parent_b = outside_inserted(inserted_parent_b, e.b->parent);
      if (parent_a != e.a->parent || parent_b != e.b->parent) {
        // Nested in ops only one run ran: compared where those ops are nested.
        if (parent_a == tracer::kNoSeq || parent_b == tracer::kNoSeq) {
          same_parent = parent_a == parent_b;
        } else if (parent_a < split_seq_a && parent_b < split_seq_b) {
          same_parent = true;
        } else {
          auto it = paired_seq.find(parent_a);
          same_parent = it != paired_seq.end() && it->second == parent_b;
        }
      } else if (e.a->parent != tracer::kNoSeq && e.b->parent != tracer::kNoSeq &&
                 !(e.a->parent < split_seq_a && e.b->parent < split_seq_b)) {
        // (At another depth in each run, below enclosing ops paired with each other: the
        // same work, nested in a wrapper the other run did not run further up.)
        auto it = paired_seq.find(e.a->parent);
        same_parent = it != paired_seq.end() && it->second == e.b->parent;
      }
      paired_seq[e.a->seq] = e.b->seq;
      paired_order.push_back(e.a->seq);
      if (paired_order.size() > 4096) {
        paired_seq.erase(paired_order.front());
        paired_order.pop_front();
      }
      const bool same_pass =
          ((e.a->flags ^ e.b->flags) & tracer::kOpBackward) == 0 && same_parent;
      if (same_pass) {
        note_seed(*e.a);
        growth.add_pair(*e.a, *e.b, e.cmp, reads_into_python(*e.a, e.cmp));
        if (e.cmp.input >= 0 && e.cmp.output < 0 && e.cmp.structure.empty()) {
          // Inputs made after the divergence by ops not paired with each other: the
          // structural change's ops made them (not state changed in place).
          bool from_change = false;
          // The collective that wrote a differing input (an all_reduce's result, hashed by its
          // first reader): another rank's values, or the collective's own arguments.
          std::string collective;
          bool all_collective = true;
          for (size_t k = 0; k < e.a->tensors.size() && k < e.b->tensors.size(); ++k) {
            const TensorRecord& ta = e.a->tensors[k];
            const TensorRecord& tb = e.b->tensors[k];
            if (ta.role != TensorRole::kInput || ta.hash == tb.hash) continue;
            // (Looked up only for an input hashed where read with a producer, as a collective's
            // result is: a carried input, most of them, needs no read of the database.)
            const std::optional<OpRecord> writer =
                ta.producer == tracer::kNoSeq || ta.status != tracer::TensorStatus::kHashed
                    ? std::nullopt
                    : p.a.reader->op(ta.producer);
            if (writer && (writer->flags & tracer::kOpCollective))
              collective = p.a.strings.text(writer->name);
            else
              all_collective = false;
            if (ta.producer == tracer::kNoSeq || tb.producer == tracer::kNoSeq) continue;
            const bool before_a = ta.producer < split_seq_a, before_b = tb.producer < split_seq_b;
            if (before_a && before_b) continue;
            if (before_a != before_b) {
              from_change = true;  // one made before the divergence, the other after
              continue;
            }
            // (A producer older than the pairs kept is not known either way.)
            if (paired_order.empty() || ta.producer < paired_order.front()) continue;
            auto made = paired_seq.find(ta.producer);
            if (made == paired_seq.end() || made->second != tb.producer) from_change = true;
          }
          growth.add_kept_inputs(*e.a, *e.b, p.a.strings.text(e.a->name), from_change,
                                 all_collective ? collective : std::string());
        }
        ++pairs_compared;
      } else {
        growth.add_crossed_pair(*e.a);
      }
      if (options.on_aligned) {
        AlignedStep pair;
        pair.a = e.a;
        pair.b = e.b;
        pair.differs = e.cmp.differs() || !same_pass;
        pair.crossed = !same_pass;
        say_step(pair);
      }
      // After a structural change, the same values in another memory layout (`W.t()` against
      // `W.t().contiguous()`) with the same outputs are no value difference: the change
      // added work, not results.
      const OpComparison& c = e.cmp;
      const bool layout_only = c.layout >= 0 && c.structure.empty() && c.input < 0 &&
                               c.output < 0 && c.arg < 0 && !c.rng;
      // Steps paired by hand (--align-steps): an op whose only difference is an input made,
      // on one side, before the compared ops began (a resumed run's first iteration against
      // the tail of the other's previous one: `loss.item()` of another loss) compares values
      // whose making was never seen; nothing to name.
      auto made_before_start = [&](const OpRecord& op, const Side& side, int64_t first_seq) {
        return c.input >= 0 && static_cast<size_t>(c.input) < op.tensors.size() &&
               op.tensors[static_cast<size_t>(c.input)].producer != tracer::kNoSeq &&
               op.tensors[static_cast<size_t>(c.input)].producer < first_seq && side.begin > 0;
      };
      const bool unseen_input =
          options.align_steps.first >= 0 && c.output < 0 && c.arg < 0 && !c.rng &&
          c.structure.empty() &&
          (made_before_start(*e.a, p.a, first_seq_a) || made_before_start(*e.b, p.b, first_seq_b));
      const bool value_differs = same_pass && c.differs() && !unseen_input &&
                                 !(where.kind == Located::kStructure && layout_only);
      // A pair of two iterations (A's step 2 with B's step 1, after B lost a step's ops) compares
      // other data, whatever the ops: no value difference to name either. Unless the step
      // numbers differ only by optimizer steps one run called more often (`StepCalls`).
      const bool one_iteration =
          e.a->step == e.b->step + p.step_offset || step_calls.steps_comparable();
      if (value_differs) {
        ++pairs_differing;
        if (where.kind == Located::kStructure) note_unequal(*e.a, *e.b, one_iteration);
      }
      if (track_healing) {
        if (first_event) {
          track_live(*e.a, *e.b, e.cmp);
        } else if (e.cmp.differs() && !repeats_first_argument(*e.a, *e.b, e.cmp) &&
                   // (A seed drawn for the program, and its read, are no difference that
                   // matters: they heal nothing less, nor diverge again.)
                   !seed_draw(*e.a, p.a.strings) && !reads_seed(*e.a, e.cmp)) {
          note_difference(e.a, e.b, &e.cmp);
        } else if (next_divergence.is_null()) {
          // An equal in-place write through a view may still replace a live tensor's values.
          if (!live.empty()) track_live(*e.a, *e.b, e.cmp);
          if (live.empty() && same_run++ == 0) {
            same_from_seq = e.a->seq;
            same_from_step = e.a->step;
          }
        }
      }
      // An op that made the same result from other inputs is passed over, and so are the ops
      // nested in it (`ones_like`'s `empty_like`, which reads the same shape).
      if (same_result_depth >= 0 && e.a->depth <= same_result_depth) same_result_depth = -1;
      const bool candidate = where.kind == Located::kStructure && !found_value_after &&
                             value_differs && one_iteration && same_result_depth < 0;
      const bool passed_over = candidate && same_result_of_other_inputs(*e.a, *e.b, c);
      if (passed_over) same_result_depth = e.a->depth;
      if (candidate && !passed_over) {
        found_value_after = true;
        value_after_depth = e.a->depth;
        // (An op of no tensor input, `randn`, whose nested `normal_` drew from another
        // generator state: its reason is nested too.)
        value_after_takes_no_tensor =
            std::none_of(e.a->tensors.begin(), e.a->tensors.end(),
                         [](const TensorRecord& t) { return t.role == TensorRole::kInput; });
        json v;
        describe_value(p, *e.a, *e.b, e.cmp, true, v);
        made_before_change(*e.a, *e.b, e.cmp, v);
        out["value_after_structure"] = std::move(v);
      } else if (found_value_after && value_after_depth >= 0) {
        // An op whose output differs for no reason of its own ("nondeterministic": dropout)
        // may hold the reason in a nested op (its bernoulli_ drew from another generator
        // state): descend to the first nested pair that differs, as bisection does.
        if (e.a->depth <= value_after_depth) {
          value_after_depth = -1;
        } else if (e.cmp.differs() &&
                   (out["value_after_structure"].value("cause", "") == "nondeterministic" ||
                    value_after_takes_no_tensor)) {
          json v;
          describe_value(p, *e.a, *e.b, e.cmp, true, v);
          out["value_after_structure"] = std::move(v);
          value_after_depth = e.a->depth;
        }
      }
    }
    first_event = false;
  }
  TDBG_RETURN_IF_ERROR(p.status());
  // Keys at which both runs computed the same values, in another order or paired otherwise.
  auto balanced_values = [&](const std::string& key) {
    std::vector<uint64_t> va, vb;
    if (unequal_known) {
      va = unequal_a[key];
      vb = unequal_b[key];
    }
    for (const MovedOp& m : moved_a[key]) va.push_back(m.values);
    for (const MovedOp& m : moved_b[key]) vb.push_back(m.values);
    std::sort(va.begin(), va.end());
    std::sort(vb.begin(), vb.end());
    return va == vb;
  };
  if (where.kind == Located::kStructure && complete && moved_known && unequal_known &&
      !differing_pairs.empty()) {
    std::unordered_map<std::string, bool> balanced;
    auto mispaired = [&](const DifferingPair& d) {
      if (d.key_a != d.key_b) return false;
      auto it = balanced.find(d.key_a);
      if (it == balanced.end()) it = balanced.emplace(d.key_a, balanced_values(d.key_a)).first;
      return it->second;
    };
    const bool all_kept = static_cast<int64_t>(differing_pairs.size()) == pairs_differing;
    const DifferingPair* named = nullptr;
    const DifferingPair* first_real = nullptr;
    int64_t real = 0;
    for (const DifferingPair& d : differing_pairs) {
      if (d.eligible && !named) named = &d;
      if (mispaired(d)) continue;
      ++real;
      if (d.eligible && !first_real) first_real = &d;
    }
    if (all_kept) pairs_differing = real;
    if (named && named != first_real && (first_real || all_kept)) {
      if (first_real) {
        auto oa = p.a.reader->op_at(p.a.thread, first_real->ta);
        auto ob = p.b.reader->op_at(p.b.thread, first_real->tb);
        if (oa && ob) {
          const OpComparison c = compare_ops(*oa, p.a.strings, *ob, p.b.strings);
          json v;
          describe_value(p, *oa, *ob, c, true, v);
          made_before_change(*oa, *ob, c, v);
          out["value_after_structure"] = std::move(v);
        }
      } else {
        out["value_after_structure"] = nullptr;
      }
    }
  }
  if (where.kind == Located::kStructure && out.find("a") == out.end()) {
    out["a"] = nullptr;
    out["b"] = nullptr;
    out["tensor"] = nullptr;
  }
  if (where.kind == Located::kStructure && complete && moved_known && moved_ops > 0 &&
      !replaced_in_place &&
      std::all_of(moved.begin(), moved.end(), [](const auto& kv) { return kv.second == 0; })) {
    auto balanced = [](const std::unordered_map<std::string, int64_t>& m) {
      return std::all_of(m.begin(), m.end(), [](const auto& kv) { return kv.second == 0; });
    };
    const bool same_lines = balanced(moved_lines);
    const bool same_calls = same_lines && balanced(moved_calls);
    // Moved from one optimizer step to another (removed where A's step 0 holds them, inserted
    // in B's last): the steps split the same work otherwise.
    bool other_steps = !change_steps[0].empty() && !change_steps[1].empty();
    for (int32_t step : change_steps[0]) other_steps = other_steps && !change_steps[1].count(step);
    // Inside optimizer.step(): the parameters were updated in another order.
    bool in_step = false;
    if (same_calls) {
      const bool removes = first_change.a_end > first_change.a_begin;
      Side& side = removes ? p.a : p.b;
      const auto op = side.reader->op_at(side.thread, removes ? first_change.a_begin : first_change.b_begin);
      in_step = op && in_optimizer_step(*side.reader, *op);
    }
    out["detail"] =
        out.value("detail", std::string()) + "; the same ops ran in another order (" +
        std::to_string(moved_ops / 2) + " op(s) moved" +
        (other_steps && !moved_training
             ? std::string(", into other optimizer steps: ") + kBlockMoved + ": from step " +
                   std::to_string(*change_steps[0].begin()) + " in A, step " +
                   std::to_string(*change_steps[1].begin()) + " in B)"
         : other_steps ? std::string(", into other optimizer steps: ") + kStepsMoved + ")"
         : same_calls && in_step
             ? ", each from the same source line in both runs, inside "
               "optimizer.step(): the parameters updated in another order, such as "
               "parameter groups built another way (a weight-decay group split or "
               "merged) or from a set or a dict iterated in another order)"
         : same_calls ? ", each from the same source line in both runs: an order "
                        "chosen at run time, such as iterating a set or a dict built "
                        "in another order, or an expression on those lines rewritten" +
                            hash_seed_note(p) + ")"
         : same_lines ? ", each from the same source line, called from other lines "
                        "in each run: calls of the code in another order, such as "
                        "an update moved before or after another call)"
                      : ", from other source lines in each run: statements of the "
                        "code in another order, such as layers created in another "
                        "order)");
    out["reordered"] = true;
    out["reordered_lines"] = same_calls ? "same" : same_lines ? "calls" : "other";
    if (other_steps) out["reordered_steps"] = true;
    // Ops that moved are compared with their counterparts, which the alignment left unpaired,
    // line by line: when the ops of a line computed the same values in both runs, in whatever
    // order (a set iterated in another order), nothing differs; otherwise they are paired in
    // the order they ran, and the first pair that differs computed other values (an EMA of the
    // weights updated before the optimizer step instead of after: the same ops on other
    // inputs).
    std::optional<std::pair<int64_t, int64_t>> moved_differs;  // tidx in A, in B
    int64_t moved_differing = 0;
    for (auto& [key, in_a] : moved_a) {
      std::vector<MovedOp>& in_b = moved_b[key];
      if (balanced_values(key)) continue;
      for (size_t k = 0; k < in_a.size() && k < in_b.size(); ++k) {
        if (in_a[k].values == in_b[k].values) continue;
        ++moved_differing;
        if (!moved_differs || in_a[k].tidx < moved_differs->first)
          moved_differs = std::make_pair(in_a[k].tidx, in_b[k].tidx);
      }
    }
    if (moved_differs) {
      out["moved_ops_differ"] = moved_differing;
      auto ma = p.a.reader->op_at(p.a.thread, moved_differs->first);
      auto mb = p.b.reader->op_at(p.b.thread, moved_differs->second);
      // Named when no paired op differs, or only steps later (the EMA read at the end): a
      // paired op that differs in the same step is nearer the change (an expression
      // regrouped, whose moved inner sums compute other values by design).
      const json& after = out.value("value_after_structure", json());
      const bool after_first =
          after.is_object() && after.value("a", json()).is_object() && ma &&
          (after["a"].value("step", int64_t{0}) < ma->step ||
           (after["a"].value("step", int64_t{0}) == ma->step &&
            (after["a"].value("seq", int64_t{0}) < ma->seq ||
             rounding_level_difference(after.value("tensor", json())) >= 0)));
      if (ma && mb && !after_first) {
        const OpComparison c = compare_ops(*ma, p.a.strings, *mb, p.b.strings);
        json v;
        describe_value(p, *ma, *mb, c, true, v);
        v["moved"] = true;
        // Its producers were not paired (they moved too, or are the ops it now runs after):
        // the inputs as recorded, views included, say what it read.
        for (size_t k = 0; k < ma->tensors.size() && k < mb->tensors.size(); ++k) {
          const TensorRecord& ta = ma->tensors[k];
          const TensorRecord& tb = mb->tensors[k];
          if (ta.role != TensorRole::kInput || tb.role != TensorRole::kInput || ta.hash == tb.hash ||
              ta.status == tracer::TensorStatus::kNotHashed || tb.status == tracer::TensorStatus::kNotHashed)
            continue;
          v["cause"] = "structure";
          v["detail"] = "the op ran at another point of each run (it moved with the change) and "
                        "read other values: input " + std::to_string(ta.index) + " differs";
          break;
        }
        out["value_after_structure"] = std::move(v);
      }
    }
  }
  if (!next_divergence.is_null()) {
    out["next"] = std::move(next_divergence);
    out["healed"] = out["next"]["healed"];
  } else if (track_healing && live.empty() && same_run >= kHealedOps && complete) {
    // Every op from there to the end of both threads is the same.
    out["healed"] = healed_json();
    out["healed"]["to_end"] = true;
    if (repeats > 0) out["healed"]["repeats"] = repeats;
  } else {
    out["healed"] = nullptr;
  }
  if (where.kind == Located::kStructure && !collective_change.is_null())
    out["collective_change"] = collective_change;
  // A change not found to be the same ops moved: each run's code where it begins, which the
  // other run may run further on (two training phases swapped).
  if (where.kind == Located::kStructure && !out.contains("reordered") && change_at_a && change_at_b)
    note_other_order(p, *change_at_a, *change_at_b, out);
  // A structural change after which every aligned op has the same values (activation
  // checkpointing, a reordering): the change moved or added work, not results.
  // Not when the changes are most of what both runs ran, or replaced everything to the end: the
  // few ops paired (a weight made before the loop) then say nothing of the results. (A block
  // one run inserts, however large, leaves the other's ops all paired.)
  // Nor when the ops in the changes were too many to tell whether they only moved: moved ops
  // (an EMA updated before the optimizer step) may have computed other values.
  if (where.kind == Located::kStructure && complete && pairs_compared > 0 && pairs_differing == 0 &&
      growth.structural_ops_fewer_side() <= pairs_compared && !ends_replaced &&
      !out.contains("moved_ops_differ") && moved_known) {
    json left_differ = left_differ_json();
    if (left_differ.is_null()) {
      out["values_same"] = {{"pairs", pairs_compared}};
      // An in-place op of the changes that left its tensor as it was (a gradient clip whose
      // threshold no norm reached: a mul_ by 1): the same values here, not with other data.
      if (kept_values)
        out["values_same"]["unchanged_write"] = {
            {"run", kept_values->first == 0 ? "A" : "B"},
            {"op",
             op_brief_json(*(kept_values->first == 0 ? p.a : p.b).reader,
                           (kept_values->first == 0 ? p.a : p.b).strings, kept_values->second)}};
    } else {
      left_differ["pairs"] = pairs_compared;
      out["values_left_differ"] = std::move(left_differ);
    }
  }
  // After a structural change that changed values: parameters one run's optimizer leaves,
  // which the other's updates (the change cut them off from their gradient). Not for an --ops
  // selection, whose steps hold what it matched.
  if (where.kind == Located::kStructure && !out.contains("values_same") &&
      p.a.reader->meta("ops").empty() && p.b.reader->meta("ops").empty()) {
    const auto a = p.a.reader->op_at(p.a.thread, where.i);
    const auto b = p.b.reader->op_at(p.b.thread, where.j);
    const int64_t step = a ? a->step : b ? b->step + p.step_offset : 0;
    json missing = parameters_not_updated(*p.a.reader, p.a.thread, *p.b.reader, p.b.thread,
                                          p.step_offset, step, options.scan_limit);
    if (!missing.is_null()) {
      // Where the runs first differ inside an optimizer's step, forward and backward ran the
      // same ops before it: the parameters got their gradients in both runs, and the
      // optimizer was not given them (or their .grad was set to None before the step).
      missing["skipped_by_optimizer"] =
          (a && in_optimizer_step(*p.a.reader, *a)) || (b && in_optimizer_step(*p.b.reader, *b));
      out["not_updated"] = std::move(missing);
    }
  }
  // The optimizer's updates can be compared step by step where both runs hold their values
  // and every op of each step (not an --ops selection, whose steps hold what it matched).
  const bool updates_comparable =
      p.a.reader->meta("hash_mode") != "none" && p.b.reader->meta("hash_mode") != "none" &&
      p.a.reader->meta("ops").empty() && p.b.reader->meta("ops").empty();
  // After a structural change that changed values: whether the optimizer's updates still
  // agree up to rounding step by step (a batch split into micro-batches), or from which step
  // they do not.
  // (From the step where the runs part: every op before it is the same, and so its updates.)
  const std::optional<OpRecord> parting = p.a.reader->op_at(p.a.thread, where.i);
  const int64_t same_before = parting ? parting->step : 0;
  if (where.kind == Located::kStructure && !out.contains("values_same") &&
      !out.contains("values_left_differ") && !out.contains("optimizer_settings") &&
      updates_comparable) {
    json updates = compare_updates(*p.a.reader, p.a.thread, *p.b.reader, p.b.thread, p.step_offset,
                                   options.scan_limit, same_before);
    // Steps paired only before the change (the optimizer's ops differ from its step on: a
    // param group added) tell nothing of it; what differs in the optimizer's settings there
    // does.
    const json unpaired = updates.is_null() ? json() : updates.value("unpaired_step", json());
    const std::optional<OpRecord>& change = parting;
    if (unpaired.is_number() && change && unpaired.get<int64_t>() <= change->step) {
      const auto steps_a = step_regions(*p.a.reader, p.a.thread);
      const auto steps_b = step_regions(*p.b.reader, p.b.thread);
      const auto sa = steps_a.find(unpaired.get<int64_t>());
      const auto sb = steps_b.find(unpaired.get<int64_t>() - p.step_offset);
      if (sa != steps_a.end() && sb != steps_b.end() && !sa->second.empty() &&
          !sb->second.empty()) {
        // At each step region's first op.
        json settings = compare_optimizer_settings(
            *p.a.reader, {sa->second[0].thread, sa->second[0].start_seq}, *p.b.reader,
            {sb->second[0].thread, sb->second[0].start_seq});
        if (settings.is_object() && !settings["differs"].empty()) {
          settings["step"] = unpaired;
          out["optimizer_settings"] = std::move(settings);
        }
      }
    } else if (!updates.is_null()) {
      // Rounding-sized taken whole, yet the changes draw random numbers one run alone draws
      // (noise added to a batch): what is trained changed, by less than summaries can tell.
      if (updates.value("rounding", false) && updates.value("largest", 0.0) > 0)
        if (json drawn = random_in_changes(p, hunks); !drawn.is_null())
          updates["random_change"] = std::move(drawn);
      out["updates"] = std::move(updates);
    }
  }
  // The first value difference after the change is a random op's whose generator state
  // differs, and the change draws random numbers one run alone draws (a model built again in
  // the same process, whose initialization draws from the default generator; a dropout
  // added): those moved the generator, the first is named.
  if (where.kind == Located::kStructure && out.value("value_after_structure", json()).is_object() &&
      out["value_after_structure"].value("cause", "") == "rng")
    if (json drawn = random_in_changes(p, hunks); !drawn.is_null()) {
      json& v = out["value_after_structure"];
      v["detail"] =
          "random op whose generator state differs: " + drawn["run"].get<std::string>() +
          "'s changed ops drew random numbers before it, first " + drawn["op"].get<std::string>() +
          (drawn.value("source", "").empty() ? "" : " at " + drawn["source"].get<std::string>()) +
          " (seq " + std::to_string(drawn["seq"].get<int64_t>()) +
          "): the numbers drawn after them differ from the other run's unless the "
          "generator's state is restored after them (torch.set_rng_state)";
      v["drawn_in_change"] = std::move(drawn);
    }
  // Around the first change: it may start before the split point, on the copy of a repeated
  // block that ran at the other line (`slide_up_to_lines`).
  int64_t context_a = where.i, context_b = where.j;
  if (where.kind == Located::kStructure && !hunks.empty()) {
    context_a = std::min(context_a, hunks[0]["a_range"][0].get<int64_t>());
    context_b = std::min(context_b, hunks[0]["b_range"][0].get<int64_t>());
  }
  out["structural_changes"] = std::move(hunks);
  // A value difference after which every optimizer step's outputs are the same bit for bit
  // (the loss summed, then divided by the batch size: `reduction='sum'` against 'mean'): the
  // work differs, not the results. Said only then; otherwise the values growth lists say it.
  if (where.kind == Located::kValue && updates_comparable) {
    json updates = compare_updates(*p.a.reader, p.a.thread, *p.b.reader, p.b.thread, p.step_offset,
                                   options.scan_limit, same_before);
    // (Only whole: steps the scan limit left unread say nothing.)
    if (updates.is_object() && updates.value("rounding", false) &&
        updates.value("largest", 1.0) == 0 && updates["unpaired_step"].is_null() &&
        updates.value("complete", true))
      out["updates"] = std::move(updates);
  }
  out["context"] = {{"a", context_json(p.a, context_a, options.context_ops)},
                    {"b", context_json(p.b, context_b, options.context_ops)}};
  out["growth"] = growth.to_json(complete);
  // One run gone NaN or Inf where the other stays finite: where, and `tdbg nan` for why.
  if (const Growth::NonFinite nf = growth.first_nonfinite(); nf.run != 0) {
    Side& side = nf.run == 'A' ? p.a : p.b;
    if (auto op = side.reader->op(nf.run == 'A' ? nf.seq_a : nf.seq_b)) {
      json brief = op_brief_json(*side.reader, side.strings, *op);
      out["growth"]["first_nonfinite"] = {{"run", std::string(1, nf.run)},
                                          {"seq", op->seq},
                                          {"step", op->step},
                                          {"op", brief.value("op", std::string())},
                                          {"source", brief.value("source", std::string())}};
    }
  }
  if (const auto [read_a, read_b] = growth.first_read_out(); read_a >= 0)
    if (auto op = p.a.reader->op(read_a)) {
      json read = op_brief_json(*p.a.reader, p.a.strings, *op);
      out["growth"]["first_read_out"] = {{"seq_a", read_a},
                                         {"seq_b", read_b},
                                         {"op", read.value("op", std::string())},
                                         {"source", read.value("source", std::string())}};
    }
  // A value divergence that reached no other op's output to the end of both runs, recorded
  // whole (every op, every tensor hashed): the change alters no result.
  if (where.kind == Located::kValue && complete && growth.contained() &&
      recorded_selection({p.a.reader, p.b.reader}).empty() &&
      p.a.reader->meta("hash_mode") == "all" && p.b.reader->meta("hash_mode") == "all")
    out["contained"] = {{"pairs", growth.compared()}};
  if (out.contains("moved_ops_differ")) out["growth"]["moved_ops_differ"] = out["moved_ops_differ"];
  // `(a + b) + c` against `a + (b + c)`: the first pair takes other operands, and every output
  // after it agrees up to rounding. Said, so the first difference's figures do not read as
  // results that moved; not where the first difference is an argument or a seed (however
  // small its effect, it is no other order of the same computation), nor where the runs hold
  // an --ops selection, whose few outputs say nothing of the rest.
  const std::string cause = out.value("cause", std::string());
  const bool of_order = cause != "arguments" && cause != "rng";
  const bool selected = !p.a.reader->meta("ops").empty() || !p.b.reader->meta("ops").empty();
  if (const double later = growth.later_rounding_level(); complete && later > 0 && of_order && !selected) {
    out["later_rounding_level"] = later;
    if (growth.later_infinities()) out["later_rounding_level_infinities"] = true;
  }
  return out;
}

uint32_t thread_at(const std::vector<tracer::ThreadRecord>& threads, size_t k) {
  return threads[k].id;
}

// The tidx range of a thread's ops: [0, n) for a whole run, a window of it in a bundle or a
// `--ring` database. From the first and the last op block (primary-key lookups, O(log n):
// `Reader::op_count` may count rows, linear in the run); [0, op_count) when the query is not
// available.
TidxRange thread_tidx_range(const Reader& r, uint32_t thread) {
  auto edge = [&](const char* column, const char* key, const char* order,
                  int64_t add) -> std::optional<int64_t> {
    std::optional<int64_t> value;
    Status st = r.query(std::string("SELECT ") + column + " FROM op_blocks INDEXED BY op_blocks_by_" +
                            key + " WHERE thread = " + std::to_string(thread) + " ORDER BY first_" +
                            key + " " + order + " LIMIT 1",
                        [&](const std::vector<std::string>& row) {
                          if (!row.empty() && !row[0].empty()) value = std::stoll(row[0]) + add;
                          return false;
                        });
    return st.ok() ? value : std::nullopt;
  };
  // Through each index: where one is damaged, the other's wider range makes the ops it lost
  // missing ops (the reader's error), not a thread that ends early.
  std::optional<int64_t> end = edge("last_tidx", "tidx", "DESC", 1);
  const std::optional<int64_t> end_by_seq = edge("last_tidx", "seq", "DESC", 1);
  if (end && end_by_seq) end = std::max(*end, *end_by_seq);
  if (!end) return TidxRange{0, r.op_count(thread)};
  return TidxRange{std::min({*end, edge("first_tidx", "tidx", "ASC", 0).value_or(0),
                             edge("first_tidx", "seq", "ASC", 0).value_or(0)}),
                   *end};
}

// Worker pools. The processes of a multiprocessing Pool (or a ProcessPoolExecutor) take their
// tasks from a shared queue, and so do the threads of a ThreadPoolExecutor: which worker runs
// which task changes from run to run, so worker k of A and worker k of B may hold different
// tasks in identical runs. A DataLoader's workers load batches in turn, so with another number
// of workers (2 in A, 3 in B) worker k loads other batches, though the main process receives
// the same ones in the same order. Sibling processes without a rank that run at the same time
// form a group, and so do a DataLoader's workers (the same parent and worker count) over the
// whole run, all epochs together (`same_pool`), and the threads of a process other than its
// main one; where a pair of them differs, the group is compared as a whole: the same ops with
// the same values, in whichever worker and order, is no divergence.

// One stream of ops work may be handed to: a thread of a process.
struct Unit {
  size_t process = 0;
  uint32_t thread = 0;
};

// The parent pid of process `p` (with the worker count, for a DataLoader worker), for a
// process a pool could have started; "" otherwise.
std::string pool_key(const tracer::Run& run, size_t p) {
  const Reader& r = *run.processes[p];
  if (!r.meta("rank").empty()) return "";
  const std::string ppid = run.ppid(p);
  return r.meta("worker").empty() ? ppid : ppid + " workers of " + worker_count(r);
}

bool dataloader_workers(const tracer::Run& run, size_t p) {
  return !run.processes[p]->meta("worker").empty();
}

// From start to end (CLOCK_MONOTONIC), unbounded where not recorded.
std::pair<int64_t, int64_t> lifetime(const tracer::Run& run, size_t p) {
  const Reader& r = *run.processes[p];
  const std::string start = r.meta("start_time_ns"), end = r.meta("end_time_ns");
  return {start.empty() ? std::numeric_limits<int64_t>::min() : std::strtoll(start.c_str(), nullptr, 10),
          end.empty() ? std::numeric_limits<int64_t>::max() : std::strtoll(end.c_str(), nullptr, 10)};
}

// The optimizer steps a process ran (its step regions), -1 where it recorded none.
int64_t optimizer_steps(const Reader& r) {
  int64_t steps = -1;
  for (const tracer::RegionRecord& region : r.regions())
    if (region.kind == tracer::RegionKind::kStep) steps = std::max(steps, region.step + 1);
  return steps;
}

// Whether processes `p` and `q` of `run` are workers of one pool: siblings of one kind that
// ran at the same time (siblings that ran one after the other, as a shell script's train, then
// resume, are phases, compared process by process). The DataLoader workers of one parent and
// worker count are one set over the whole run: they start anew each epoch, or once for all
// epochs (persistent_workers), which a run may do otherwise than the other.
bool same_pool(const tracer::Run& run, size_t p, size_t q) {
  const std::string key = pool_key(run, p);
  if (key.empty() || key != pool_key(run, q)) return false;
  if (dataloader_workers(run, p)) return true;
  const auto [start, end] = lifetime(run, p);
  const auto [q_start, q_end] = lifetime(run, q);
  return start < q_end && q_start < end;
}

// Whether process `later` of `run` is a later phase of process `earlier`: siblings of one kind,
// neither a rank nor a DataLoader worker, the one started after the other ended (a training,
// then its resumption from a checkpoint by the same script).
bool later_phase(const tracer::Run& run, size_t earlier, size_t later) {
  const std::string key = pool_key(run, earlier);
  return !key.empty() && !dataloader_workers(run, earlier) && key == pool_key(run, later) &&
         lifetime(run, earlier).second <= lifetime(run, later).first;
}

// For each process index below `processes`: its group's id (the group's first index), where two
// or more processes are siblings in A or in B, transitively (two pools started by two processes
// that record nothing themselves pair up either way); -1 otherwise.
std::vector<int> pool_groups(const tracer::Run& a, const tracer::Run& b, size_t processes) {
  std::vector<int> parent(processes);
  for (size_t p = 0; p < processes; ++p) parent[p] = static_cast<int>(p);
  std::function<int(int)> root = [&](int x) { return parent[x] == x ? x : parent[x] = root(parent[x]); };
  std::vector<bool> eligible(processes);
  for (size_t p = 0; p < processes; ++p)
    eligible[p] = !pool_key(a, p).empty() && !pool_key(b, p).empty() &&
                  dataloader_workers(a, p) == dataloader_workers(b, p);
  for (const tracer::Run* run : {&a, &b}) {
    std::map<std::string, std::vector<int>> siblings;
    for (size_t p = 0; p < processes; ++p) {
      if (!eligible[p]) continue;
      std::vector<int>& earlier = siblings[pool_key(*run, p)];
      for (int q : earlier) {
        if (!same_pool(*run, p, static_cast<size_t>(q))) continue;
        const int x = root(q), y = root(static_cast<int>(p));
        parent[std::max(x, y)] = std::min(x, y);
      }
      earlier.push_back(static_cast<int>(p));
    }
  }
  std::vector<int> group(processes, -1);
  std::map<int, int> members;
  for (size_t p = 0; p < processes; ++p)
    if (eligible[p]) ++members[root(static_cast<int>(p))];
  for (size_t p = 0; p < processes; ++p) {
    // A pair of DataLoader workers alone is a group too where the worker counts differ.
    const bool split_otherwise = eligible[p] && dataloader_workers(a, p) &&
                                 worker_count(*a.processes[p]) != worker_count(*b.processes[p]);
    if (eligible[p] && (members[root(static_cast<int>(p))] >= 2 || split_otherwise))
      group[p] = root(static_cast<int>(p));
  }
  return group;
}

// Every thread of the processes of `run` in group `g` of `groups`, and of its processes past
// the other run's count in the same pool as one of them (a pool with more workers).
std::vector<Unit> pool_units(const tracer::Run& run, const std::vector<int>& groups, int g,
                             std::string* pids) {
  std::vector<Unit> units;
  std::vector<size_t> members;
  auto add = [&](size_t q) {
    *pids += (pids->empty() ? "" : ", ") + run.processes[q]->meta("pid");
    for (const tracer::ThreadRecord& t : run.processes[q]->threads()) units.push_back({q, t.id});
  };
  for (size_t q = 0; q < groups.size(); ++q) {
    if (groups[q] != g) continue;
    members.push_back(q);
    add(q);
  }
  for (size_t q = groups.size(); q < run.processes.size(); ++q)
    if (std::any_of(members.begin(), members.end(), [&](size_t m) { return same_pool(run, m, q); }))
      add(q);
  return units;
}

// Who group `g` is, in a note: "the DataLoader workers (A: 2 worker(s), pids 11, 12; B: 3,
// pids 21, 22, 23)".
std::string pool_who(const tracer::Run& a, const std::vector<int>& groups, int g,
                     const std::string& pids_a, const std::string& pids_b) {
  size_t first = 0;
  while (first < groups.size() && groups[first] != g) ++first;
  if (first == groups.size() || !dataloader_workers(a, first))
    return "the processes started by one parent (a multiprocessing Pool or the like; pids A: " +
           pids_a + "; B: " + pids_b + ")";
  auto count = [](const std::string& pids) {
    return std::to_string(std::count(pids.begin(), pids.end(), ',') + 1);
  };
  return "the DataLoader worker processes (A: " + count(pids_a) + ", pids " + pids_a + "; B: " +
         count(pids_b) + ", pids " + pids_b + ")";
}

// "; num_workers is 2 in A and 3 in B" for DataLoader workers of group `g` whose worker counts
// differ ("" if they are the same), and where their ops differ (`differ`), why that matters:
// batches go to the workers in turn, and each worker draws random numbers from its own
// generator.
std::string pool_worker_counts(const tracer::Run& a, const tracer::Run& b,
                               const std::vector<int>& groups, int g, bool differ,
                               bool iterable = false) {
  for (size_t p = 0; p < groups.size(); ++p) {
    if (groups[p] != g || !dataloader_workers(a, p)) continue;
    const std::string na = worker_count(*a.processes[p]), nb = worker_count(*b.processes[p]);
    if (na == nb) return "";
    return "; num_workers is " + na + " in A and " + nb + " in B" +
           (!differ   ? std::string()
            : iterable ? std::string(": each worker of an IterableDataset yields its own share "
                                     "of the items (as get_worker_info() splits them), so with "
                                     "another number of workers the batches hold other items")
                       : std::string(": batches go to the workers in turn, and each worker draws "
                                     "random numbers from its own generator (seeded base_seed + "
                                     "worker id), so a random op in the dataset (an "
                                     "augmentation) gets other numbers for most batches"));
  }
  return "";
}

// The threads of `r` in the order they were created: by OS thread id, which Linux hands out
// in increasing order from the main thread's (the pid), wrapping around at pid_max on a busy
// machine (ids below the pid came later).
std::vector<tracer::ThreadRecord> threads_by_creation(const Reader& r) {
  std::vector<tracer::ThreadRecord> threads = r.threads();
  const int64_t pid = std::strtoll(r.meta("pid").c_str(), nullptr, 10);
  constexpr int64_t kWrapped = int64_t{1} << 32;  // above any pid_max (at most 2^22)
  auto order = [pid](const tracer::ThreadRecord& t) {
    return std::make_pair(t.os_tid >= pid ? t.os_tid - pid : kWrapped + t.os_tid, t.id);
  };
  std::sort(threads.begin(), threads.end(),
            [&](const tracer::ThreadRecord& x, const tracer::ThreadRecord& y) { return order(x) < order(y); });
  return threads;
}

// The threads of `r` that take tasks of a pool: not the main thread, nor autograd's engine
// thread for a device (its first op a backward one), whose steps and end are the training's.
std::set<uint32_t> pool_threads(const Reader& r) {
  std::set<uint32_t> ids;
  for (const tracer::ThreadRecord& t : r.threads()) {
    if (is_main_thread(r, t)) continue;
    const auto first = r.op_at(t.id, thread_tidx_range(r, t.id).begin);
    if (first && !(first->flags & tracer::kOpBackward)) ids.insert(t.id);
  }
  return ids;
}

// The threads of process `p` other than its main one.
std::vector<Unit> thread_units(const tracer::Run& run, size_t p) {
  std::vector<Unit> units;
  const Reader& r = *run.processes[p];
  for (const tracer::ThreadRecord& t : r.threads())
    if (!is_main_thread(r, t)) units.push_back({p, t.id});
  return units;
}

// Calls `fn(op, strings)` for every op of `unit`; stops when it returns false.
template <typename Fn>
void for_each_op(const tracer::Run& run, const Unit& unit, Fn fn) {
  const Reader& r = *run.processes[unit.process];
  Strings strings(r);
  const TidxRange range = thread_tidx_range(r, unit.thread);
  OpCursor cursor(r, strings, unit.thread, range.end, range.begin);
  for (int64_t i = range.begin; i < range.end; ++i) {
    const OpRecord* op = cursor.at(i);
    if (!op) break;  // a read error: the diff of the pair reports it
    if (!fn(*op, strings)) return;
    cursor.release_before(i);
  }
}

// Calls `fn(unit, op, strings)` for every op of `units`, all merged in the order they started
// (by clock; each unit's own ops in their order); stops when it returns false.
template <typename Fn>
void for_each_op_by_start(const tracer::Run& run, const std::vector<Unit>& units, Fn fn) {
  struct Stream {
    const Unit* unit;
    std::unique_ptr<Strings> strings;
    std::unique_ptr<OpCursor> cursor;
    int64_t i, end;
  };
  std::vector<Stream> streams;
  for (const Unit& u : units) {
    const Reader& r = *run.processes[u.process];
    const TidxRange range = thread_tidx_range(r, u.thread);
    auto strings = std::make_unique<Strings>(r);
    auto cursor = std::make_unique<OpCursor>(r, *strings, u.thread, range.end, range.begin);
    streams.push_back({&u, std::move(strings), std::move(cursor), range.begin, range.end});
  }
  using Head = std::pair<int64_t, size_t>;  // (start_ns, stream)
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
  auto push = [&](size_t k) {
    Stream& st = streams[k];
    if (st.i >= st.end) return;
    if (const OpRecord* op = st.cursor->at(st.i)) heads.emplace(op->start_ns, k);
  };
  for (size_t k = 0; k < streams.size(); ++k) push(k);
  while (!heads.empty()) {
    const size_t k = heads.top().second;
    heads.pop();
    Stream& st = streams[k];
    const OpRecord* op = st.cursor->at(st.i);
    if (!fn(*st.unit, *op, *st.strings)) return;
    st.cursor->release_before(st.i);
    ++st.i;
    push(k);
  }
}

// Where one op of a group is.
struct PoolOp {
  size_t process = 0;
  uint32_t thread = 0;
  int64_t tidx = -1;  // -1: none
  int64_t start_ns = 0;
  uint64_t signature = 0;
  int64_t seq = 0;
};

struct PoolVerdict {
  int same = -1;     // 1 the same ops with the same values, 0 not, -1 too many ops to tell
  size_t ops = 0;    // ops of the group in A
  // Where they differ (same == 0): the earliest op of A's units that B's do not run with the
  // same values; the earliest such op of B's with the same signature (`b`), else the earliest
  // (`b`), and the earliest whatever its signature (`b_any`: an op only B runs before `b`).
  PoolOp a, b, b_any;
  // Op contents A runs more often than B (> 0) or less (< 0), where same == 0.
  std::unordered_map<uint64_t, int64_t> surplus;
  // `same_before` of `a` and `b`, found when `b` was chosen (-1 where there is none).
  int64_t same_before = -1;
};

// Whether `op` has a tensor whose value was hashed: equal contents of two such ops say the
// same data went through them; ops without one (an `empty`, a `resize_`) are alike for any data.
bool has_value(const OpRecord& op) {
  for (const TensorRecord& t : op.tensors)
    if (t.status == tracer::TensorStatus::kHashed || t.status == tracer::TensorStatus::kKnown) return true;
  return false;
}

// How far before A's op `x` and B's op `y` (of one kind) their threads ran an op with the same
// values, going back over ops of the same kinds, op for op, at most 256: the last op with a
// value both ran alike before the difference (the item a worker loaded). -1 where there is none.
int64_t same_before(const tracer::Run& a, const PoolOp& x, const tracer::Run& b, const PoolOp& y) {
  constexpr int64_t kBack = 256;
  const Reader& xa = *a.processes[x.process];
  const Reader& xb = *b.processes[y.process];
  Strings sa(xa), sb(xb);
  const int64_t from_a = thread_tidx_range(xa, x.thread).begin;
  const int64_t from_b = thread_tidx_range(xb, y.thread).begin;
  for (int64_t k = 1; k <= kBack && x.tidx - k >= from_a && y.tidx - k >= from_b; ++k) {
    const auto oa = xa.op_at(x.thread, x.tidx - k);
    const auto ob = xb.op_at(y.thread, y.tidx - k);
    if (!oa || !ob || op_signature(*oa, sa) != op_signature(*ob, sb)) return -1;
    if (has_value(*oa) && op_content(*oa, sa) == op_content(*ob, sb)) return k;
  }
  return -1;
}

// An op as far as telling whether two threads ran alike before a difference.
struct Alike {
  uint64_t signature = 0, content = 0;
  bool value = false;   // `has_value`
  bool random = false;  // a random op
  int64_t seq = 0, parent = tracer::kNoSeq;
  std::vector<int64_t> from;  // the producers of its inputs (seq)
};

Alike alike_of(const OpRecord& op, Strings& strings) {
  Alike x{op_signature(op, strings), op_content(op, strings), has_value(op),
          (op.flags & tracer::kOpRandom) != 0, op.seq, op.parent, {}};
  for (const TensorRecord& t : op.tensors)
    if (t.role != TensorRole::kOutput && t.producer != tracer::kNoSeq) x.from.push_back(t.producer);
  return x;
}

constexpr size_t kNearBack = 16;

// The ops of `x`'s thread just before it, nearest first, at most `n`.
std::vector<Alike> ops_before(const tracer::Run& run, const PoolOp& x, size_t n) {
  std::vector<Alike> before;
  if (x.tidx < 0) return before;
  const Reader& r = *run.processes[x.process];
  Strings strings(r);
  const int64_t from = thread_tidx_range(r, x.thread).begin;
  for (int64_t t = x.tidx - 1; t >= from && before.size() < n; --t) {
    const auto op = r.op_at(x.thread, t);
    if (!op) break;
    before.push_back(alike_of(*op, strings));
  }
  return before;
}

// Which of the first `n` of `ops` (nearest first) are random or made from a random op's
// output among them (an op holding a random op, as `randn` holds `normal_`, makes random
// numbers).
template <typename Ops>
std::vector<bool> random_made(const Ops& ops, size_t n) {
  std::vector<bool> made(n, false);
  std::unordered_map<int64_t, size_t> at;  // seq -> index, of the ops met (older ones)
  for (size_t k = n; k-- > 0;) {
    bool m = ops[k].random;
    for (int64_t f : ops[k].from)
      if (auto it = at.find(f); it != at.end()) m = m || made[it->second];
    at[ops[k].seq] = k;
    if (!m) continue;
    made[k] = true;
    for (auto it = at.find(ops[k].parent); it != at.end() && !made[it->second];
         it = at.find(ops[it->second].parent))
      made[it->second] = true;
  }
  return made;
}

// How far back `a` and `b` (the ops before two ops, nearest first) are of the same kinds, op
// for op, to one with a value that is the same in both: 1 for the op just before; -1 for none.
// `.first` counts only ops not made from random numbers among them: two workers that drew the
// same random numbers for other items are alike after the draw, where the same item loaded
// with other draws is alike before it; the item is the task.
std::pair<int64_t, int64_t> nearest_alike(const std::vector<Alike>& a,
                                          const std::vector<bool>& a_random,
                                          const std::deque<Alike>& b) {
  std::pair<int64_t, int64_t> near{-1, -1};
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n].signature == b[n].signature) ++n;
  const std::vector<bool> b_random = random_made(b, n);
  for (size_t k = 0; k < n; ++k) {
    if (!a[k].value || a[k].content != b[k].content) continue;
    if (near.second < 0) near.second = static_cast<int64_t>(k) + 1;
    if (!a_random[k] && !b_random[k]) {
      near.first = static_cast<int64_t>(k) + 1;
      break;
    }
  }
  return near;
}

// How many times `key` is in sorted `keys`.
int64_t count_of(const std::vector<uint64_t>& keys, uint64_t key) {
  const auto [lo, hi] = std::equal_range(keys.begin(), keys.end(), key);
  return hi - lo;
}

// Whether A's op `x` of a worker set ran in an IterableDataset's iterator (its fetcher is
// on the Python stack), not a map-style dataset's __getitem__.
bool from_iterable_dataset(const tracer::Run& a, const PoolOp& x) {
  if (x.tidx < 0) return false;
  const Reader& r = *a.processes[x.process];
  const auto op = r.op_at(x.thread, x.tidx);
  if (!op || op->stack == 0) return false;
  Strings strings(r);
  for (const tracer::FrameRecord& f : r.stack(op->stack))
    if (strings.text(f.function).find("_IterableDatasetFetcher") != std::string::npos) return true;
  return false;
}

// Compares the ops of units `ua` of run `a` and `ub` of run `b` as two multisets of contents.
PoolVerdict compare_sets(const tracer::Run& a, const std::vector<Unit>& ua, const tracer::Run& b,
                         const std::vector<Unit>& ub) {
  constexpr size_t kMaxOps = size_t{1} << 24;  // 16M op keys, 128 MiB a side
  PoolVerdict v;
  std::vector<uint64_t> keys[2];
  bool within = true;
  // A ring or a trimmed bundle holds part of each thread: sets of parts cannot be compared.
  for (int side = 0; side < 2; ++side)
    for (const Unit& u : side == 0 ? ua : ub) {
      const Reader& r = *(side == 0 ? a : b).processes[u.process];
      if (thread_tidx_range(r, u.thread).begin > 0) return v;
    }
  // How often each side runs an op of each content at each optimizer step (a thread pool's
  // tasks repeat the same work at other steps: the one that differs is at the step where the
  // counts part, not the last one run).
  auto at_step = [](uint64_t content, int64_t step) {
    return content ^ (static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull);
  };
  std::unordered_map<uint64_t, int64_t> step_count[2];
  int64_t first_step = std::numeric_limits<int64_t>::max(), last_step = -1;  // A's units'
  for (int side = 0; side < 2; ++side) {
    for (const Unit& u : side == 0 ? ua : ub) {
      for_each_op(side == 0 ? a : b, u, [&](const OpRecord& op, Strings& strings) {
        within = within && keys[side].size() < kMaxOps;
        if (within) {
          keys[side].push_back(op_content(op, strings));
          ++step_count[side][at_step(keys[side].back(), op.step)];
          if (side == 0) {
            first_step = std::min(first_step, op.step);
            last_step = std::max(last_step, op.step);
          }
        }
        return within;
      });
    }
    std::sort(keys[side].begin(), keys[side].end());
  }
  v.ops = keys[0].size();
  v.same = !within ? -1 : keys[0] == keys[1] ? 1 : 0;
  if (v.same != 0) return v;
  // Ops one side runs (with these values) more often than the other: surplus > 0 in A.
  std::unordered_map<uint64_t, int64_t>& surplus = v.surplus;
  for (uint64_t k : keys[0]) ++surplus[k];
  for (uint64_t k : keys[1]) --surplus[k];
  // Of ops run n times in A and m < n times in B, the first m in A's order of starting have
  // their counterpart and the later ones are the difference (the same worker seeded alike at
  // each epoch repeats its random numbers: the repeat is what differs, not the first), and
  // the reverse in B. `matched` counts the first ones, met in order.
  std::unordered_map<uint64_t, int64_t> quota, matched;
  constexpr size_t kCandidates = 64;
  std::vector<PoolOp> candidates;  // B's first ops of A's op's kind that A does not run alike
  for (auto [k, more] : surplus)
    if (more != 0) quota[k] = more > 0 ? count_of(keys[1], k) : count_of(keys[0], k);
  // Where an op's content runs at other steps too, the quota is its step's (`step_count`).
  auto count = [&](int side, uint64_t k, int64_t step) {
    const auto it = step_count[side].find(at_step(k, step));
    return it == step_count[side].end() ? int64_t{0} : it->second;
  };
  auto other_steps = [&](uint64_t k, int64_t step) {
    return count(0, k, step) < count_of(keys[0], k);
  };
  std::unordered_map<uint64_t, int64_t> matched_at_step;
  int64_t a_step = 0;
  bool a_other_steps = false;
  // A's pass: its first op past the quota is the difference.
  for_each_op_by_start(a, ua, [&](const Unit& u, const OpRecord& op, Strings& strings) {
    const uint64_t k = op_content(op, strings);
    if (surplus[k] <= 0) return true;
    const bool elsewhere = other_steps(k, op.step);
    if (elsewhere) {
      if (matched_at_step[at_step(k, op.step)]++ < count(1, k, op.step)) return true;
    } else if (matched[k]++ < quota[k]) {
      return true;
    }
    v.a = PoolOp{u.process, op.thread, op.tidx, op.start_ns, op_signature(op, strings), op.seq};
    a_step = op.step;
    a_other_steps = elsewhere;
    return false;
  });
  matched.clear();
  matched_at_step.clear();
  PoolOp same_step;  // B's first op of A's op's kind past its step's quota, at A's op's step
  // Threads of one process (a pool) step with it: their tasks pair by step, where A's op's
  // content runs at other steps too, or in a pool whose ops span steps. (DataLoader workers,
  // processes of their own, count no steps; nor do threads of a program without an
  // optimizer: their items pair by what was loaded, below.)
  const bool pool =
      std::all_of(ua.begin(), ua.end(), [&](const Unit& u) { return u.process == ua[0].process; });
  const bool by_step = a_other_steps || (pool && last_step > first_step);
  // Workers run at the same time and reach their differences in any order, and an item A's
  // worker loads may be loaded by another of B's, whose random draws B's set also runs for
  // another item. A's op's counterpart is B's op of its kind nearest after an op with a value
  // run alike in both (the item loaded), over ops of the same kinds, op for op: found in B's
  // pass from each thread's last few ops (the earliest of those equally near; one just after
  // such an op ends the search), else among B's first ops past the quota of A's op's kind,
  // going back further.
  const std::vector<Alike> a_before = ops_before(a, v.a, kNearBack);
  const std::vector<bool> a_random = random_made(a_before, a_before.size());
  std::vector<std::deque<Alike>> last(ub.size());
  PoolOp near[2];  // nearest by ops not made from random numbers, by any op
  int64_t near_back[2] = {-1, -1};
  for_each_op_by_start(b, ub, [&](const Unit& u, const OpRecord& op, Strings& strings) {
    Alike x = alike_of(op, strings);
    const PoolOp here{u.process, op.thread, op.tidx, op.start_ns, x.signature, op.seq};
    std::deque<Alike>& before = last[static_cast<size_t>(&u - ub.data())];
    if (x.signature == v.a.signature) {
      const auto [data, any] = nearest_alike(a_before, a_random, before);
      for (int m = 0; m < 2; ++m)
        if (const int64_t back = m == 0 ? data : any;
            back > 0 && (near_back[m] < 0 || back < near_back[m])) {
          near[m] = here;
          near_back[m] = back;
        }
    }
    const uint64_t k = x.content;
    before.push_front(std::move(x));
    if (before.size() > kNearBack) before.pop_back();
    if (surplus[k] < 0 && matched[k]++ >= quota[k]) {
      if (v.b_any.tidx < 0) v.b_any = here;
      if (here.signature == v.a.signature && candidates.size() < kCandidates)
        candidates.push_back(here);
    }
    if (by_step && same_step.tidx < 0 && here.signature == v.a.signature && op.step == a_step &&
        count(1, k, op.step) > count(0, k, op.step) &&
        matched_at_step[at_step(k, op.step)]++ >= count(0, k, op.step))
      same_step = here;
    return !(near_back[0] == 1 && v.b_any.tidx >= 0) || (by_step && same_step.tidx < 0);
  });
  // A pool's task: its counterpart is B's op of its kind at the same step that B runs with
  // values A does not (a task's work runs at its step, on whichever thread).
  if (same_step.tidx >= 0) {
    v.b = same_step;
    v.same_before = same_before(a, v.a, b, same_step);
    return v;
  }
  for (int m = 0; m < 2 && v.same_before < 0; ++m)
    if (near_back[m] > 0) {
      v.b = near[m];
      v.same_before = near_back[m];
    }
  for (const PoolOp& c : candidates) {
    if (v.same_before > 0) break;
    if (const int64_t k = same_before(a, v.a, b, c); k > 0) {
      v.b = c;
      v.same_before = k;
    }
  }
  if (v.b.tidx < 0 && !candidates.empty()) v.b = candidates.front();
  if (v.b.tidx < 0) v.b = v.b_any;
  return v;
}

// "was ended by signal 15 (SIGTERM)" for a process whose `exit_status` is "signal N", else "".
// SIGINT (2) is also how Python ends an uncaught KeyboardInterrupt. Linux's numbers (the
// recording machine's), named here for the common ones.
std::string signal_ending(const Reader& r) {
  const std::string ending = r.meta("exit_status");
  if (ending.rfind("signal ", 0) != 0) return "";
  const std::string sig = ending.substr(7);
  static const std::pair<const char*, const char*> kNames[] = {
      {"1", "SIGHUP"},  {"3", "SIGQUIT"}, {"4", "SIGILL"},  {"6", "SIGABRT"},  {"7", "SIGBUS"},
      {"8", "SIGFPE"},  {"9", "SIGKILL"}, {"11", "SIGSEGV"}, {"13", "SIGPIPE"}, {"14", "SIGALRM"},
      {"10", "SIGUSR1"}, {"12", "SIGUSR2"}, {"15", "SIGTERM"}, {"24", "SIGXCPU"},
      {"26", "SIGVTALRM"}, {"31", "SIGSYS"}};
  if (sig == "2") return "was ended by signal 2 (Ctrl-C or KeyboardInterrupt)";
  for (const auto& [number, name] : kNames)
    if (sig == number) return "was ended by signal " + sig + " (" + name + ")";
  return "was ended by signal " + sig;
}

}  // namespace

bool still_recording(const tracer::Reader& r) {
  const std::string pid = r.meta("pid");
  if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) return false;
  std::error_code ec;
  const std::filesystem::path db = std::filesystem::canonical(r.path(), ec);
  if (ec) return false;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/" + pid + "/fd", ec)) {
    std::error_code link_ec;
    if (std::filesystem::read_symlink(fd.path(), link_ec) == db) return true;
  }
  return false;
}

namespace {

// How a recorded process ended, when not by a normal exit: "" for exit status 0 (or a run
// recorded before the status was kept, which closed its database).
std::string abnormal_ending(const Reader& r) {
  // A recording that stopped short (a full disk) ends there, however the program ended later.
  if (std::string lost = recording_lost(r); !lost.empty()) return lost;
  const std::string ending = r.meta("exit_status");
  if (std::string by_signal = signal_ending(r); !by_signal.empty()) return by_signal;
  if (r.meta("end_time_ns").empty() && still_recording(r))
    return "is still running (pid " + r.meta("pid") + " holds its database open): read as far "
           "as it has committed (every --flush-ms)";
  if (r.meta("end_time_ns").empty() && !r.meta("bundled_while_recording").empty())
    return "was still recording when it was bundled (" + r.meta("bundled_while_recording") +
           "): the bundle holds what it had committed then";
  if (r.meta("end_time_ns").empty())
    return "did not close its database (killed with SIGKILL or by the out-of-memory killer, or "
           "crashed; its last ops, up to --flush-ms, may be missing)";
  if (!ending.empty() && ending != "0")
    return "exited with status " + ending + (ending == "1" ? " (an uncaught Python exception exits with 1)" : "");
  return "";
}

bool ended_early(const Reader& r) { return !abnormal_ending(r).empty(); }

// Whether `child`'s process was started by `parent`'s (its recorded parent pid).
bool child_of(const Reader& child, const Reader& parent) {
  const std::string ppid = child.meta("ppid");
  return !ppid.empty() && ppid == parent.meta("pid");
}

// A thread's last top-level op: its tidx (-1 when the thread has no op), with the ops nested
// in it (itself first, then in tidx order; without tensors), and the thread's first tidx.
// Reads back from the thread's end only as far as that op, however many ops it holds.
struct LastTopLevel {
  int64_t tidx = -1;
  int64_t first_tidx = 0;
  std::vector<OpRecord> ops;
};

LastTopLevel last_top_level(const Reader& r, uint32_t thread) {
  const TidxRange range = thread_tidx_range(r, thread);
  LastTopLevel last;
  last.first_tidx = range.begin;
  constexpr int64_t kChunk = 1024;
  for (int64_t hi = range.end; hi > range.begin && last.tidx < 0;) {
    const int64_t lo = std::max(range.begin, hi - kChunk);
    if (!r.scan_ops(thread, lo, hi, /*with_tensors=*/false, [&](const OpRecord& op) {
           if (op.depth == 0) last.tidx = op.tidx;
           return true;
         }).ok())
      return {};
    hi = lo;
  }
  if (last.tidx < 0) return last;
  if (!r.scan_ops(thread, last.tidx, range.end, /*with_tensors=*/false, [&](const OpRecord& op) {
         last.ops.push_back(op);
         return true;
       }).ok())
    return {};
  return last;
}

// "aten::mm at train.cpp:40 (in aten::matmul, in aten::linear)": the ops of `last` that carry
// `flag` (`kOpUnfinished`: a fault or an abort stopped the thread in them; `kOpRaised`: an error
// ended them), innermost first; "" unless the top-level op itself carries it.
std::string flagged_ops(const Reader& r, const LastTopLevel& last, uint32_t flag) {
  if (last.ops.empty() || !(last.ops[0].flags & flag)) return "";
  // The chain of flagged ops, one per depth: each inside the one before.
  std::vector<const OpRecord*> chain;
  for (const OpRecord& op : last.ops) {
    if (!(op.flags & flag) || op.depth > static_cast<int32_t>(chain.size())) continue;
    chain.resize(static_cast<size_t>(op.depth));
    chain.push_back(&op);
  }
  Strings strings(r);
  OpRecord op = *chain.back();
  bool forward_line = false;
  if (const int64_t fwd_seq = op.user_frame == 0 && op.stack == 0 ? forward_seq_of(r, op)
                                                                     : tracer::kNoSeq;
      fwd_seq != tracer::kNoSeq)  // a backward op: where its forward op ran
    if (auto fwd = r.op(fwd_seq); fwd) {
      op.user_frame = fwd->user_frame;
      op.stack = fwd->stack;
      forward_line = op.user_frame != 0 || op.stack != 0;
    }
  // (A backward function's own line is not recorded: autograd runs it with no Python stack.)
  std::string text = op_at_source(r, strings, op) + (forward_line ? " (its forward op's line)" : "");
  if (chain.size() > 1) {
    text += " (";
    for (size_t k = chain.size() - 1; k-- > 0;)
      text += (k + 2 == chain.size() ? "in " : ", in ") + strings.text(chain[k]->name);
    text += ")";
  }
  return text;
}

// " inside aten::mm at train.cpp:40 (in aten::matmul, in aten::linear)": the ops a fault or an
// abort stopped the thread in (`kOpUnfinished`, written at the close), innermost first; "" when
// there are none (a signal from outside, or a thread stopped inside tdbg's hook).
std::string unfinished_ops(const Reader& r, uint32_t thread) {
  const std::string ops = flagged_ops(r, last_top_level(r, thread), tracer::kOpUnfinished);
  return ops.empty() ? "" : " inside " + ops;
}

// "aten::mm at train.py:40 (in aten::matmul)": the recorded ops `thread` was inside when its
// process closed its database (meta `in_flight`, each thread's own account at the close: a
// thread that another thread's abort or a signal from outside stopped, which no flag marks),
// innermost first; "" when it was inside none. `*step` becomes the step of its top-level op.
std::string in_flight_ops(const Reader& r, uint32_t thread, int64_t* step = nullptr) {
  const json all = json::parse(r.meta("in_flight"), nullptr, /*allow_exceptions=*/false);
  if (!all.is_array()) return "";
  for (const json& t : all) {
    if (!t.is_object() || t.value("thread", -1) != static_cast<int64_t>(thread)) continue;
    const json& names = t.contains("names") ? t["names"] : json();
    if (!names.is_array() || names.empty() || !names[0].is_number_unsigned()) return "";
    Strings strings(r);
    OpRecord op;  // the innermost op, placed where its top-level op is
    op.name = names.back().is_number_unsigned() ? names.back().get<tracer::StringId>() : 0;
    op.user_frame = t.value("user_frame", tracer::FrameId{0});
    op.stack = t.value("stack", tracer::FrameId{0});
    if (op.user_frame == 0 && op.stack == 0) {  // a backward op: where its forward op ran
      if (auto fwd = r.op(t.value("fwd", tracer::kNoSeq)); fwd) {
        op.user_frame = fwd->user_frame;
        op.stack = fwd->stack;
      }
    }
    std::string text = op_at_source(r, strings, op);
    if (names.size() > 1) {
      text += " (";
      for (size_t k = names.size() - 1; k-- > 0;)
        text += std::string(k + 2 == names.size() ? "in " : ", in ") +
                (names[k].is_number_unsigned() ? strings.text(names[k].get<tracer::StringId>()) : "?");
      text += ")";
    }
    if (step) *step = t.value("step", int64_t{0});
    return text;
  }
  return "";
}

// The seq of the last op the thread finished: the ops a fault stopped it in are written at
// the close, after every other thread's, and do not count. -1 when none.
int64_t last_finished_seq(const Reader& r, uint32_t thread, const LastTopLevel& last) {
  if (last.ops.empty()) return -1;
  if (!(last.ops[0].flags & tracer::kOpUnfinished)) return last.ops.back().seq;
  if (last.tidx <= last.first_tidx) return -1;
  auto before = r.op_at(thread, last.tidx - 1);
  return before ? before->seq : -1;
}

// A structural divergence that is one run's thread ending while the other's goes on, where
// that run's process ended abnormally (a signal, a crash, an error exit) with this thread's op
// as its last: the run stopped there, which is no change of the program. The cause becomes
// `ended`. `matched` ops of the thread came before it and agree with the other run's. The
// caller erases the "ended" mark `describe` left.
// Where a thread that ended early stopped: " inside aten::x at t.py:3" (in an op that never
// ended), ", after an error raised inside aten::x at t.py:3", or "".
std::string ending_place(const Reader& r, uint32_t thread) {
  const LastTopLevel last = last_top_level(r, thread);
  const std::string inside = flagged_ops(r, last, tracer::kOpUnfinished);
  if (!inside.empty()) return " inside " + inside;
  const std::string raised = flagged_ops(r, last, tracer::kOpRaised);
  return raised.empty() ? "" : ", after an error raised inside " + raised;
}

// `ran`: the ops the ended thread ran before its end (its tidx there), more than `matched`
// where a --ring dropped its first ones.
// A number of meta `recording_lost` (`first_seq`, `first_step`, `ops`), or -1 where absent.
int64_t lost_number(const json& lost, const char* key) {
  const json& v = lost.value(key, json());
  return v.is_number_integer() ? v.get<int64_t>() : int64_t{-1};
}

void explain_ending(json& d, const Reader& r, uint32_t thread, int64_t matched, int64_t ran) {
  const std::string side = d.value("ended", "");
  if (side.empty()) return;
  const std::string other = side == "A" ? "B" : "A";
  // A recording that stopped (a full disk, its descriptors taken) while the program went on:
  // the process did not end, its later ops were not recorded (`recording_stopped`).
  const json lost = json::parse(r.meta("recording_lost"), nullptr, /*allow_exceptions=*/false);
  if (lost.is_object()) {
    auto number = [&](const char* key) { return lost_number(lost, key); };
    d["cause"] = "ended";
    d["recording_stopped"] = side;
    if (number("first_step") >= 0) d["ended_step"] = number("first_step");
    d["detail"] = side + "'s recording stopped after " + std::to_string(matched) +
                  " op(s) of this thread, all as in " + other + ": " +
                  lost.value("error", std::string("a write failed")) + "; " +
                  std::to_string(std::max<int64_t>(number("ops"), 0)) + " op(s) of " + side +
                  " from seq " + std::to_string(number("first_seq")) +
                  " on were not recorded (the program went on)";
    return;
  }
  const std::string how = abnormal_ending(r);
  if (how.empty()) {
    d["detail"] = d.value("detail", std::string()) + "; " + side + "'s thread ends here";
    return;
  }
  // The thread stopped inside an op, another thread did, or its last finished op is its
  // process's last one (a thread that finished long before the process was stopped ended for
  // reasons of the program).
  const LastTopLevel last = last_top_level(r, thread);
  const std::string inside = flagged_ops(r, last, tracer::kOpUnfinished);
  int64_t in_flight_step = -1;
  const std::string in_flight = inside.empty() ? in_flight_ops(r, thread, &in_flight_step) : "";
  // Where another thread stopped inside an op: " (thread 1 was inside ext::scale at x.py:3)".
  std::string elsewhere;
  if (inside.empty() && in_flight.empty()) {
    const int64_t mine = last_finished_seq(r, thread, last);
    int64_t process_last = mine;
    for (const tracer::ThreadRecord& t : r.threads()) {
      if (t.id == thread) continue;
      const LastTopLevel theirs = last_top_level(r, t.id);
      process_last = std::max(process_last, last_finished_seq(r, t.id, theirs));
      const std::string stopped = flagged_ops(r, theirs, tracer::kOpUnfinished);
      if (elsewhere.empty() && !stopped.empty())
        elsewhere = " (thread " + std::to_string(t.id) + " was inside " + stopped + ")";
    }
    // (No op in the whole process: it ended before its first, which ends every thread. A
    // fault stopped another thread inside an op: this one ran on, maybe inside an op that
    // never ended, until the process died there.)
    if (elsewhere.empty() && process_last >= 0 && mine != process_last) return;
  }
  const json& change = d.value("structural_changes", json::array());
  std::string rest;
  if (change.is_array() && !change.empty()) {
    const json& h = change[0];
    const json& range = h[side == "A" ? "b_range" : "a_range"];
    const json& ops = h[side == "A" ? "inserted" : "removed"];
    if (range.is_array() && range.size() == 2 && ops.is_array() && !ops.empty())
      rest = "; " + other + " runs " + std::to_string(range[1].get<int64_t>() - range[0].get<int64_t>()) +
             " more op(s) from here, first " + ops[0].value("op", "");
  }
  d["cause"] = "ended";
  // Not ended at all: a run still being recorded, read up to its last commit.
  if (r.meta("end_time_ns").empty() && still_recording(r)) d["still_recording"] = side;
  if (!last.ops.empty()) {
    // Ended between ops (inside none): the other run's next op is of a later step when this
    // one ended after an optimizer step (a raise at the top of the loop). The runs agree up to
    // there, so this one had reached that step too.
    const json& next = d.value(other == "A" ? "a" : "b", json());
    const int64_t next_step = inside.empty() && in_flight.empty() && next.is_object()
                                  ? next.value("step", int64_t{-1})
                                  : -1;
    d["ended_step"] = std::max({last.ops.back().step, in_flight_step, next_step});
  }
  std::string where = !inside.empty()      ? " inside " + inside
                      : !in_flight.empty() ? " while this thread was inside " + in_flight + ","
                                           : "";
  if (where.empty()) {
    const std::string raised = flagged_ops(r, last, tracer::kOpRaised);
    if (!raised.empty()) where = ", an error raised inside " + raised + ",";
  }
  d["detail"] = side + "'s process " + how + where +
                (matched == 0 && where.empty() && ran <= 0
                     ? " before this thread's first op" + elsewhere
                     : ran > matched
                           ? " after " + std::to_string(ran) + " op(s) of this thread; the last " +
                                 std::to_string(matched) + ", which both runs hold (" +
                                 (r.meta("bundle_window").empty()
                                      ? "a --ring kept the others in one run at most"
                                      : "the others are outside the window a bundle kept") +
                                 "), are all as in " + other + elsewhere
                           : " after " + std::to_string(matched) + " op(s) of this thread, all as in " +
                                 other + elsewhere) +
                rest;
}

// Ops compared to recognise work that moved to another thread.
constexpr int64_t kMovedOps = 32;

// When the ops of `side` from tidx `from` to its end begin like the ops of `there` (their first
// kMovedOps ops, or all there are, have equal signatures): the same work runs on another
// thread there (a training loop moved into a thread).
bool moved_ops(Side& side, int64_t from, Side& there) {
  const int64_t n = std::min({kMovedOps, side.count - from, there.count - there.begin});
  if (n <= 0) return false;
  for (int64_t k = 0; k < n; ++k) {
    const uint64_t mine = side.cursor.signature_at(from + k);
    if (mine == 0 || mine != there.cursor.signature_at(there.begin + k)) return false;
  }
  return true;
}

// Of the threads `candidates` of `there_reader`, the first whose ops begin as `side`'s from
// tidx `from` on (`moved_ops`): where that work runs in the other run.
std::optional<uint32_t> thread_carrying_on(Side& side, int64_t from, const Reader& there_reader,
                                           const std::vector<uint32_t>& candidates) {
  for (uint32_t other : candidates) {
    Side there(there_reader, other, thread_tidx_range(there_reader, other));
    if (moved_ops(side, from, there)) return other;
  }
  return std::nullopt;
}

// Compares the moved ops with the ops of `there` pair by pair, in order, up to `limit` pairs
// (negative: all): the first pair that differs, with its cause, or null. `side_is_a`: `side`
// belongs to run A. A plain walk: no chains (their prefixes differ), no descent into nested
// ops.
json compare_moved(Side& side, bool side_is_a, int64_t from, Side& there, int64_t limit,
                   int64_t* compared) {
  int64_t n = std::min(side.count - from, there.count - there.begin);
  if (limit >= 0) n = std::min(n, limit);
  Side& sa = side_is_a ? side : there;
  Side& sb = side_is_a ? there : side;
  for (int64_t k = 0; k < n; ++k) {
    const OpRecord* mine = side.cursor.at(from + k);
    const OpRecord* theirs = there.cursor.at(there.begin + k);
    if (!mine || !theirs) break;
    *compared = k + 1;
    const OpRecord& a = side_is_a ? *mine : *theirs;
    const OpRecord& b = side_is_a ? *theirs : *mine;
    OpComparison c = compare_ops(a, sa.strings, b, sb.strings);
    if (c.differs()) {
      std::string detail;
      const char* cause = cause_of(c, a, b, /*after_structure=*/false, &detail, {}, {},
                                   sa.reader->meta("hash_mode") != "outputs");
      return {{"cause", cause}, {"detail", detail},
              {"a", op_json(*sa.reader, sa.strings, a)},
              {"b", op_json(*sb.reader, sb.strings, b)}};
    }
    side.cursor.release_before(from + k - 16);
    there.cursor.release_before(there.begin + k - 16);
  }
  return nullptr;
}

// For a divergence where one side's thread ends and the other's goes on: the thread that
// exists only on the other side and carries on the same ops, as JSON (with the first
// difference between the moved ops, compared pair by pair), or null.
json thread_move(Pair& p, const Located& at, const Reader& ra, const Reader& rb,
                 const std::vector<uint32_t>& only_a, const std::vector<uint32_t>& only_b,
                 int64_t limit) {
  if (at.kind != Located::kStructure) return nullptr;
  const bool a_goes_on = at.j >= p.b.count && at.i < p.a.count;
  const bool b_goes_on = at.i >= p.a.count && at.j < p.b.count;
  if (!a_goes_on && !b_goes_on) return nullptr;
  Side& side = a_goes_on ? p.a : p.b;
  const int64_t from = a_goes_on ? at.i : at.j;
  const Reader& there_reader = a_goes_on ? rb : ra;
  if (const auto other = thread_carrying_on(side, from, there_reader, a_goes_on ? only_b : only_a)) {
    Side there_side(there_reader, *other, thread_tidx_range(there_reader, *other));
    int64_t compared = 0;
    json first = compare_moved(side, a_goes_on, from, there_side, limit, &compared);
    const char* there = a_goes_on ? "B" : "A";
    std::string text = std::string("the same ops run on thread ") + std::to_string(*other) +
                       " in " + there + ": the work moved to another thread; ";
    if (compared == 0)
      text += "their values are not compared (--scan-limit 0)";
    else if (first.is_null())
      text += "the " + std::to_string(compared) + " ops compared there match";
    else
      text += "compared there op by op, they first differ at " +
              first["a"].value("op", std::string()) + " (seq A " +
              std::to_string(first["a"].value("seq", int64_t(-1))) + ", B " +
              std::to_string(first["b"].value("seq", int64_t(-1))) + "): " +
              first["cause"].get<std::string>() + ", " + first["detail"].get<std::string>();
    return {{"side", a_goes_on ? "A" : "B"}, {"thread", side.thread}, {"from_tidx", from},
            {"to_thread", *other}, {"ops_compared", compared}, {"first_difference", first},
            {"text", text}};
  }
  return nullptr;
}

// For a structural divergence where neither thread ends: the ops one side runs there that the
// other side runs from the start of a thread only it has (the dataset's ops a C++ DataLoader's
// worker threads run): {"side", "thread", "text"}, or null.
json ops_elsewhere(Pair& p, const Located& at, const Reader& ra, const Reader& rb,
                   const std::vector<uint32_t>& only_a, const std::vector<uint32_t>& only_b) {
  if (at.kind != Located::kStructure || at.i >= p.a.count || at.j >= p.b.count) return nullptr;
  for (const bool a_has : {true, false}) {
    const auto other = thread_carrying_on(a_has ? p.a : p.b, a_has ? at.i : at.j,
                                          a_has ? rb : ra, a_has ? only_b : only_a);
    if (!other) continue;
    const std::string here = a_has ? "A" : "B", elsewhere = a_has ? "B" : "A";
    return {{"side", here}, {"thread", *other},
            {"text", "the ops " + here + " runs here run in " + elsewhere + " on thread " +
                         std::to_string(*other) + ", which only " + elsewhere +
                         " has: the work moved to other threads (a data loader's worker "
                         "threads, say), not removed"}};
  }
  return nullptr;
}

// Warnings on how the two recordings selected what they hold (meta `hash_mode`, `steps` and
// `ops` of the first process of each): a comparison of runs recorded otherwise can only be
// read with them in mind. `*values_compared` is false when either run has no tensor hashes.
// `*part` is what both recordings hold of their runs when that is a part selected alike
// ("--steps 100:103", "--ops RE", a --ring's last ops), else empty: "identical" holds for it only.
void note_recording_settings(const tracer::Run& a, const tracer::Run& b, json& warnings,
                             bool* values_compared, std::string* part) {
  *values_compared = true;
  part->clear();
  if (a.processes.empty() || b.processes.empty()) return;
  const Reader& ra = *a.processes[0];
  const Reader& rb = *b.processes[0];
  if (ra.meta("steps") == rb.meta("steps") && ra.meta("ops") == rb.meta("ops")) {
    *part = recorded_selection({&ra});
  } else if (ra.meta("ops") == rb.meta("ops")) {
    // Other --steps windows (or one run whole): compared over the steps both hold.
    auto steps = [](const Reader& r) {
      const std::string window = r.meta("steps");
      return window.empty() ? std::string("all steps") : "--steps " + window;
    };
    *part = "the steps both hold of A's " + steps(ra) + " and B's " + steps(rb);
    if (!ra.meta("ops").empty()) *part += ", --ops " + ra.meta("ops");
  }
  auto dropped = [](const Reader& r) {
    auto held = r.held();
    return held.ok() && held->dropped_start;
  };
  if (kept_as_ring(ra) && kept_as_ring(rb) && (dropped(ra) || dropped(rb)))
    *part += (part->empty() ? "" : ", ") + std::string("the last ops a --ring kept");
  const std::string hash_a = ra.meta("hash_mode"), hash_b = rb.meta("hash_mode");
  if (hash_a == "none" || hash_b == "none") {
    *values_compared = false;
    warnings.push_back(std::string("tensor values were not recorded in ") +
                    (hash_a == "none" && hash_b == "none" ? "either run"
                     : hash_a == "none"                   ? "A"
                                                          : "B") +
                    " (--hash none): only ops, shapes, arguments and generator states were compared");
  }
  // All steps, of which a ring keeps the last ops (from inside a step: compared from the next).
  auto all_of = [](const Reader& r) {
    return kept_as_ring(r) ? "all, a --ring of the last " + r.meta("ring") + " ops" : std::string("all");
  };
  for (const char* key : {"steps", "ops"}) {
    const std::string va = ra.meta(key), vb = rb.meta(key);
    if (va == vb) continue;
    warnings.push_back(std::string("the runs were recorded with different --") + key + " (A " +
                    (va.empty() ? all_of(ra) : va) + ", B " + (vb.empty() ? all_of(rb) : vb) +
                    (std::string(key) == "steps"
                         ? "): ops are compared from the first step both hold; one that only one "
                           "run holds reads as inserted or removed"
                         : "): ops are paired from the start of what each holds, so differences "
                           "may only reflect the selection"));
  }
  // (Recordings older than these keys had both on.)
  for (const char* key : {"stacks", "modules"}) {
    const bool off_a = ra.meta(key) == "0", off_b = rb.meta(key) == "0";
    if (off_a != off_b)
      warnings.push_back(std::string("only ") + (off_a ? "A" : "B") + " was recorded with --no-" +
                         key + ": its ops have no " +
                         (std::string(key) == "stacks" ? "source lines" : "module paths") +
                         ", so where the runs differ is shown from " + (off_a ? "B" : "A") +
                         " alone, and a missing one is no change of code");
  }
  const std::string internal_a = ra.meta("internal_ops"), internal_b = rb.meta("internal_ops");
  if ((internal_a == "1") != (internal_b == "1"))
    warnings.push_back(std::string("only ") + (internal_a == "1" ? "A" : "B") +
                       " was recorded with --internal-ops (the ops kernels run inside "
                       "themselves): its extra nested ops are no divergence of the program");
}

// The meta `num_threads_history` (`1@0,2@3,1@4`) as text: "1; 2 from step 3; 1 from step 4".
std::string thread_counts_text(const std::string& history) {
  std::string out;
  std::stringstream in(history);
  for (std::string item; std::getline(in, item, ',');) {
    const size_t at = item.find('@');
    if (at == std::string::npos) return history;
    const std::string count = item.substr(0, at), step = item.substr(at + 1);
    out += out.empty() ? count : "; " + count + " from step " + step;
  }
  return out;
}

// The settings that can change a run's numbers and differ between the runs (their first
// processes): thread counts, determinism switches and the seed torch reported (when both were
// closed), library versions, the machine, and the environment variables recorded (tdbg's own
// left out). Each is
// {"key", "a", "b"}; a different thread count or determinism setting often is the answer.
// Of processes `pa` of A and `pb` of B: those of the first divergence, whose settings (a
// rank's seed, a worker's threads) are the ones that bear on it, not the launcher's.
// What a process's seed looks like where it is no chosen number: its process id (plus a
// worker's index: `torch.manual_seed(os.getpid() + worker_id)`), or a time near the
// process's start in seconds, milliseconds, microseconds or nanoseconds
// (`torch.manual_seed(int(time.time()))`); "" otherwise.
std::string seed_origin(const Reader& r, const std::string& seed) {
  char* end = nullptr;
  const unsigned long long value = std::strtoull(seed.c_str(), &end, 10);
  if (seed.empty() || *end != '\0') return "";
  const long long pid = std::atoll(r.meta("pid").c_str());
  if (pid > 0 && value >= static_cast<unsigned long long>(pid) &&
      value - static_cast<unsigned long long>(pid) < 64)
    return value == static_cast<unsigned long long>(pid)
               ? "its process id"
               : "its process id plus " + std::to_string(value - pid);
  const double start_s = std::atof(r.meta("start_time_ns").c_str()) / 1e9;
  constexpr double kDay = 86400;
  for (const double scale : {1.0, 1e3, 1e6, 1e9})
    if (start_s > 0 && std::fabs(static_cast<double>(value) / scale - start_s) < kDay)
      return "a time near its start, in " + std::string(scale == 1.0   ? "seconds"
                                                        : scale == 1e3 ? "milliseconds"
                                                        : scale == 1e6 ? "microseconds"
                                                                       : "nanoseconds");
  return "";
}

json settings_that_differ(const tracer::Run& a, const tracer::Run& b, size_t pa = 0, size_t pb = 0) {
  json out = json::array();
  if (a.processes.empty() || b.processes.empty()) return out;
  const Reader& ra = *a.processes[pa < a.processes.size() ? pa : 0];
  const Reader& rb = *b.processes[pb < b.processes.size() ? pb : 0];
  // Settings the program may still change are final only when the database was closed: a
  // killed process holds the values read when torch loaded.
  const bool both_closed = !ra.meta("end_time_ns").empty() && !rb.meta("end_time_ns").empty();
  for (const char* key :
       {"num_threads", "num_interop_threads", "deterministic_algorithms",
        "deterministic_algorithms_warn_only", "cudnn_deterministic", "cudnn_benchmark",
        "mkldnn_enabled", "float32_matmul_precision", "flush_denormal", "seed", "default_dtype"}) {
    std::string va = ra.meta(key), vb = rb.meta(key);
    // A thread count set for a while and set back (the same count at the close): the counts
    // each run had, with their steps.
    const std::string ha = ra.meta("num_threads_history"), hb = rb.meta("num_threads_history");
    if (std::string_view(key) == "num_threads" && va == vb && !ha.empty() && !hb.empty() && ha != hb) {
      va = thread_counts_text(ha);
      vb = thread_counts_text(hb);
    }
    if (!both_closed || va == vb) continue;
    json setting = {{"key", key}, {"a", va}, {"b", vb}};
    // A seed taken from the process id or the clock: different in every run.
    if (std::string_view(key) == "seed") {
      const std::string oa = seed_origin(ra, va), ob = seed_origin(rb, vb);
      auto kind = [](const std::string& origin) {
        return origin.empty() ? std::string()
               : origin.find("time") == 0 || origin.find(" time") != std::string::npos
                   ? std::string("the clock (time.time())")
                   : std::string("os.getpid()");
      };
      if (!oa.empty() && kind(oa) == kind(ob))
        setting["note"] = "each is " +
                          (kind(oa) == "os.getpid()" ? std::string("its process id")
                                                     : oa.substr(0, oa.find(','))) +
                          ": seeded from " + kind(oa) + ", different in every run";
      else if (!oa.empty() || !ob.empty())
        setting["note"] = (oa.empty() ? "" : "A's is " + oa + " (" + kind(oa) + ")") +
                          (!oa.empty() && !ob.empty() ? "; " : "") +
                          (ob.empty() ? "" : "B's is " + ob + " (" + kind(ob) + ")") +
                          ": a seed different in every run";
    }
    out.push_back(std::move(setting));
  }
  // The program's command line and directory first: another argument or input file is the
  // likeliest reason two runs of "the same" program differ.
  for (const char* key : {"cmdline", "cwd", "torch_version", "python_version",
                          "cuda_runtime_version", "cuda_driver_version", "cpu_model", "cpu_count",
                          "host"}) {
    std::string va = ra.meta(key), vb = rb.meta(key);
    if (std::string(key) == "cmdline") {
      // A multiprocessing child started by spawn or forkserver (mp.spawn's ranks) runs
      // `python -c 'from multiprocessing.spawn import spawn_main; ...'`: the program's own
      // command line is its launcher's, the run's first process.
      auto program = [](const tracer::Run& run, const std::string& own) {
        const bool child = own.find("spawn_main") != std::string::npos ||
                           own.find("multiprocessing.forkserver") != std::string::npos;
        return child ? run.processes[0]->meta("cmdline") : own;
      };
      va = program(a, va);
      vb = program(b, vb);
    }
    if (va == vb) continue;
    // The same command line written with other spacing (a bundle's copy rewrites its JSON).
    if (std::string(key) == "cmdline") {
      const json ja = json::parse(va, nullptr, false), jb = json::parse(vb, nullptr, false);
      if (!ja.is_discarded() && ja == jb) continue;
    }
    out.push_back({{"key", key}, {"a", va}, {"b", vb}});
  }
  const json env_a = json::parse(ra.meta("env"), nullptr, /*allow_exceptions=*/false);
  const json env_b = json::parse(rb.meta("env"), nullptr, /*allow_exceptions=*/false);
  if (env_a.is_object() && env_b.is_object()) {
    std::set<std::string> names;
    for (const auto& [k, v] : env_a.items()) names.insert(k);
    for (const auto& [k, v] : env_b.items()) names.insert(k);
    for (const std::string& k : names) {
      if (k == "LD_PRELOAD" || k.rfind("TDBG_", 0) == 0) continue;
      const std::string va = env_a.contains(k) && env_a[k].is_string() ? env_a[k].get<std::string>() : "";
      const std::string vb = env_b.contains(k) && env_b[k].is_string() ? env_b[k].get<std::string>() : "";
      if (va != vb) out.push_back({{"key", "$" + k}, {"a", va}, {"b", vb}});
    }
  }
  // Data files both runs read, another version in each.
  for (const FileRead& f : files_read_that_differ(ra, rb)) {
    // "4736 bytes, modified 2026-12-07 12:05:29 UTC"
    auto version = [](const std::string& identity) {
      const size_t colon = identity.find(':');
      if (colon == std::string::npos) return identity;
      const time_t seconds =
          static_cast<time_t>(std::atoll(identity.c_str() + colon + 1) / 1000000000);
      struct tm utc;
      char when[40] = "";
      if (gmtime_r(&seconds, &utc)) strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &utc);
      return identity.substr(0, colon) + " bytes, modified " + when;
    };
    out.push_back({{"key", "file " + f.path},
                   {"a", version(f.a)},
                   {"b", version(f.b)},
                   {"note", f.reason + ": another version of the file each run read"},
                   {"contents_differ", f.contents_differ}});
  }
  return out;
}

}  // namespace

std::string recording_lost(const tracer::Reader& r) {
  const std::string text = r.meta("recording_lost");
  if (text.empty()) return "";
  const json lost = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!lost.is_object()) return "stopped being recorded early (" + text + ")";
  auto number = [&](const char* key) {
    const int64_t n = lost_number(lost, key);
    return n >= 0 ? std::to_string(n) : std::string("?");
  };
  return "stopped being recorded at seq " + number("first_seq") + " (step " +
         number("first_step") + "): " + lost.value("error", std::string("a write failed")) + "; " +
         number("ops") + " op(s) lost after it (the program went on)";
}

std::string recorded_selection(std::initializer_list<const tracer::Reader*> readers) {
  std::string steps, ops;
  for (const tracer::Reader* r : readers) {
    if (steps.empty()) steps = r->meta("steps");
    if (ops.empty()) ops = r->meta("ops");
  }
  std::string selection = steps.empty() ? "" : "--steps " + steps;
  if (!ops.empty()) selection += (selection.empty() ? "" : ", ") + std::string("--ops ") + ops;
  return selection;
}

std::string selected_none(const tracer::Run& run) {
  std::string selection, reached;
  for (const auto& r : run.processes) {
    if (selection.empty()) selection = recorded_selection({r.get()});
    if (reached.empty()) reached = r->meta("steps_reached");
  }
  if (selection.empty()) return "";
  const bool steps = selection.find("--steps") != std::string::npos;
  return "its recording selected none (" + selection +
         (steps ? "; steps count torch.optim optimizer steps" +
                      (reached.empty() ? std::string()
                                       : ", of which the program completed " + reached)
                : "; a regular expression searched in each op's name") +
         ")";
}

int64_t window_first_step(const tracer::Reader& r) {
  interpose::StepWindow window;
  return interpose::parse_step_window(r.meta("steps"), &window) ? window.begin : -1;
}

std::string process_ending(const tracer::Reader& r) {
  std::string how = abnormal_ending(r);
  if (how.empty()) return how;
  std::string inside;
  for (const tracer::ThreadRecord& t : r.threads())
    if (inside.empty()) inside = unfinished_ops(r, t.id);
  if (!inside.empty()) return how + inside;
  // None stopped by a fault of its own: where each thread was, the main thread (the process's
  // own id) first.
  std::vector<tracer::ThreadRecord> threads = r.threads();
  auto is_main = [&r](const tracer::ThreadRecord& t) { return is_main_thread(r, t); };
  std::stable_partition(threads.begin(), threads.end(), is_main);
  constexpr int kNamed = 4;
  int named = 0, more = 0;
  for (const tracer::ThreadRecord& t : threads) {
    const std::string ops = in_flight_ops(r, t.id);
    if (ops.empty()) continue;
    if (named == kNamed) {
      ++more;
      continue;
    }
    inside += std::string(named++ == 0 ? " while " : "; ") + "thread " + std::to_string(t.id) +
              (is_main(t) ? " (main)" : "") + " was inside " + ops;
  }
  if (more > 0) inside += "; " + std::to_string(more) + " more thread(s) were inside ops";
  if (!inside.empty()) return how + inside;
  // Inside no op at the end: where an error was raised last (the exception that ended a Python
  // program, raised in a backward function, say), when a thread's last op ended by one.
  for (const tracer::ThreadRecord& t : threads) {
    const LastTopLevel last = last_top_level(r, t.id);
    const std::string raised = flagged_ops(r, last, tracer::kOpRaised);
    if (raised.empty()) continue;
    return how + ", after an error raised inside " + raised + " at step " +
           std::to_string(last.ops[0].step) +
           (is_main(t) ? "" : " (thread " + std::to_string(t.id) + ")");
  }
  return how;
}

std::vector<std::string> keep_aligned_phases(tracer::Run& a, tracer::Run& b,
                                             std::pair<int64_t, int64_t>* align) {
  std::vector<std::string> notes;
  if (std::string guessed = guess_resumed_steps(a, b, align); !guessed.empty())
    notes.push_back(std::move(guessed));
  const std::pair<int64_t, int64_t> align_steps = *align;
  if (align_steps.first > 0 && align_steps.second == 0) {
    if (std::string kept = keep_resumed_phase(b, align_steps.first); !kept.empty())
      notes.push_back("B: " + kept);
  } else if (align_steps.first == 0 && align_steps.second > 0) {
    if (std::string kept = keep_resumed_phase(a, align_steps.second); !kept.empty())
      notes.push_back("A: " + kept);
  }
  return notes;
}

std::string keep_resumed_phase(tracer::Run& run, int64_t resumed_at) {
  // The phases: sibling processes with neither a rank nor a worker id that ran one after the
  // other, in start order.
  std::map<std::string, std::vector<size_t>> siblings;
  for (size_t p = 0; p < run.processes.size(); ++p)
    if (!pool_key(run, p).empty() && !dataloader_workers(run, p) && run.processes[p]->any_op())
      siblings[pool_key(run, p)].push_back(p);
  std::vector<size_t> phases;
  for (auto& [ppid, list] : siblings) {
    if (list.size() < 2) continue;
    std::sort(list.begin(), list.end(),
              [&](size_t x, size_t y) { return lifetime(run, x).first < lifetime(run, y).first; });
    bool one_after_another = true;
    for (size_t k = 1; k < list.size(); ++k)
      one_after_another = one_after_another && later_phase(run, list[k - 1], list[k]);
    if (one_after_another) {
      phases = list;
      break;
    }
  }
  if (phases.empty()) return "";
  // The phase that resumed at that step: the earlier ones ran that many optimizer steps
  // together; else the last one.
  size_t keep = phases.back();
  bool matched = false;
  int64_t before = 0, before_last = 0;  // optimizer steps of the phases before the one kept / last
  for (size_t k = 0; k < phases.size(); ++k) {
    if (before == resumed_at && k > 0) {
      keep = phases[k];
      matched = true;
      break;
    }
    if (k + 1 == phases.size()) before_last = before;
    const int64_t steps = optimizer_steps(*run.processes[phases[k]]);
    before += std::max<int64_t>(steps, 0);
  }
  // Left out: the other phases and the processes they started.
  std::set<std::string> dropped;
  for (size_t p : phases)
    if (p != keep) dropped.insert(run.processes[p]->meta("pid"));
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t p = 0; p < run.processes.size(); ++p)
      if (dropped.count(run.ppid(p)) && dropped.insert(run.processes[p]->meta("pid")).second) grew = true;
  }
  const std::string pid = run.processes[keep]->meta("pid");
  std::vector<std::unique_ptr<Reader>> kept;
  std::vector<size_t> shown;
  for (size_t p = 0; p < run.processes.size(); ++p) {
    if (dropped.count(run.processes[p]->meta("pid"))) continue;
    shown.push_back(run.shown(p));
    kept.push_back(std::move(run.processes[p]));
  }
  run.processes = std::move(kept);
  run.shown_index = std::move(shown);
  const std::string others = "; the " + std::to_string(phases.size() - 1) +
                             " other phase(s) of the run, and the processes they started, were left out";
  if (!matched)
    return "no phase resumed at step " + std::to_string(resumed_at) +
           " (--align-steps): compared the last phase, pid " + pid + ", which resumed at step " +
           std::to_string(before_last) + " (the optimizer steps the phases before it ran; is " +
           std::to_string(before_last) + " the step meant?)" + others;
  return "compared its phase pid " + pid + ", which resumed at step " + std::to_string(resumed_at) +
         " (--align-steps)" + others;
}

StatusOr<json> compare_runs(const tracer::Run& a, const tracer::Run& b, const DiffOptions& options) {
  auto started = std::chrono::steady_clock::now();
  // A run whose --steps window or --ops pattern selected no op holds nothing to compare: not
  // "identical" to another such run, nor every op "removed" against a full one.
  for (const tracer::Run* run : {&a, &b}) {
    bool any = false;
    for (const auto& r : run->processes) any = any || r->any_op();
    if (const std::string why = selected_none(*run); !any && !why.empty())
      return Status::Error(run->path + " holds no op: " + why + ": nothing to compare");
  }
  Progress progress(options.progress);
  Stats stats;
  json result = {{"status", "identical"}, {"first_divergence", nullptr}};
  size_t processes = std::min(a.processes.size(), b.processes.size());
  int64_t threads_compared = 0;
  json notes = json::array();
  json warnings = json::array();
  bool values_compared = true;
  std::string recorded_part;
  note_recording_settings(a, b, warnings, &values_compared, &recorded_part);
  int64_t pairs_with_ops = 0, pairs_disjoint = 0;
  std::string disjoint_advice;  // how to record runs whose threads hold no op in common
  std::string disjoint_text;
  // Every process pair is compared; the first divergence is the earliest by start time: in
  // data-parallel training a rank whose data changed diverges first, and the other ranks only
  // after the collective that brings them its gradients; a DataLoader worker (whose ops are
  // all at step 0) only after the main process's sampler handed it other indices. Start times
  // are CLOCK_MONOTONIC, comparable between the processes of one host; across hosts the step
  // comes first.
  std::set<std::string> hosts;
  for (const auto& r : a.processes) hosts.insert(r->meta("host"));
  const bool one_host = hosts.size() <= 1;
  auto key_of = [one_host](const OpRecord& o) {
    return one_host ? std::make_pair(o.start_ns, o.step) : std::make_pair(o.step, o.start_ns);
  };
  std::pair<int64_t, int64_t> first_key{std::numeric_limits<int64_t>::max(),
                                        std::numeric_limits<int64_t>::max()};
  // Processes that ended early in the same run: the one that ended first (by the time its
  // recording closed, at exit or on the fatal signal) is the cause; the others were stopped
  // because of it (mp.spawn terminates the other ranks when one raises; a collective's peer
  // fails; a DataLoader's main process raises when a worker dies).
  struct End {
    int side = 0;  // 0: not an end; 1: A stopped short; 2: B did
    int64_t ns = 0;
  } first_end;
  auto end_of = [](Pair& pair, const Located& at) {
    End e;
    if (at.kind != Located::kStructure) return e;
    Side* shorter = nullptr;
    if (at.j >= pair.b.count && at.i < pair.a.count) {
      e.side = 2;
      shorter = &pair.b;
    } else if (at.i >= pair.a.count && at.j < pair.b.count) {
      e.side = 1;
      shorter = &pair.a;
    }
    const std::string ended = shorter ? shorter->reader->meta("end_time_ns") : std::string();
    if (ended.empty()) return End{};  // killed before it could close: no time to go by
    e.ns = std::strtoll(ended.c_str(), nullptr, 10);
    return e;
  };
  // A process that stopped on an error exit (an exception: a DataLoader worker's death seen
  // by the main process) is most often the consequence of a divergence elsewhere, which it may
  // reach first by the clock: such a structural end comes after any other process's.
  bool first_is_error_exit = false;
  size_t first_index_a = 0, first_index_b = 0;  // the processes of the first divergence
  auto error_exit = [](const Reader& r) {
    const std::string status = r.meta("exit_status");
    return !status.empty() && status != "0" && status.rfind("signal", 0) != 0;
  };
  // Unless the other process is a child of the one that erred which ended quietly in both
  // runs (closed its database with no error status, or SIGTERM): a DataLoader's workers,
  // stopped short when the main process raised and shut them down, follow that error (a
  // worker that died first ends otherwise).
  auto stopped_by_parent = [&](size_t child_a, size_t child_b, size_t parent_a, size_t parent_b) {
    auto quiet_child = [](const tracer::Run& run, size_t child, size_t parent) {
      const Reader& c = *run.processes[child];
      const std::string status = c.meta("exit_status");
      const bool quiet = status == "0" || status == "signal 15" ||
                         (status.empty() && !c.meta("end_time_ns").empty());
      return child != parent && quiet && child_of(c, *run.processes[parent]);
    };
    return quiet_child(a, child_a, parent_a) && quiet_child(b, child_b, parent_b);
  };
  const std::vector<int> pool = pool_groups(a, b, processes);
  std::map<int, PoolVerdict> pool_verdicts;
  // B's op paired with A's op t of the first threads of the first processes is t + this
  // (rings that kept other windows: `ring_offset`).
  int64_t main_thread_offset = 0;
  // With --align-steps: where each side's compared ops begin (the first pair of threads).
  json aligned_start = nullptr;
  json others = json::array(), first_brief;  // the other processes' divergences, in brief
  for (size_t p = 0; p < processes; ++p) {
    const Reader& ra = *a.processes[p];
    const Reader& rb = *b.processes[p];
    // Threads pair up in the order they were created, not by which ran its first op first
    // (their tdbg ids), which races between threads started together.
    auto ta = threads_by_creation(ra);
    auto tb = threads_by_creation(rb);
    size_t nthreads = std::max(ta.size(), tb.size());
    std::unique_ptr<Pair> best;
    Located best_at;
    int64_t best_seq = std::numeric_limits<int64_t>::max();
    std::pair<int64_t, int64_t> best_key = first_key;
    End best_end;
    std::vector<uint32_t> only_a, only_b;  // threads without a counterpart
    // Threads that take a pool's tasks, several in each run (`Pair::pool`).
    const std::set<uint32_t> pool_a = pool_threads(*a.processes[p]);
    const std::set<uint32_t> pool_b = pool_threads(*b.processes[p]);
    const bool in_pools = pool_a.size() >= 2 && pool_b.size() >= 2;
    for (size_t k = 0; k < nthreads; ++k) {
      if (k >= ta.size() || k >= tb.size()) {
        bool in_a = k < ta.size();
        const Reader& r = in_a ? ra : rb;
        uint32_t id = in_a ? thread_at(ta, k) : thread_at(tb, k);
        const TidxRange range = thread_tidx_range(r, id);
        if (range.end == 0) continue;
        (in_a ? only_a : only_b).push_back(id);
        // A thread whose first op pickles a tensor for another process: a multiprocessing
        // queue's feeder thread moving it into shared memory.
        std::string why;
        if (auto first_op = r.op_at(id, range.begin)) {
          Strings strings(r);
          const tracer::FrameId frame = first_op->user_frame != 0 ? first_op->user_frame : first_op->stack;
          const auto f = frame != 0 ? r.frame(frame) : std::nullopt;
          const std::string file = f ? strings.text(f->file) : std::string();
          constexpr std::string_view kPickling = "multiprocessing/reductions.py";
          if (file.size() >= kPickling.size() &&
              file.compare(file.size() - kPickling.size(), kPickling.size(), kPickling) == 0)
            why = ": it moves tensors into shared memory to send them to another process (a "
                  "multiprocessing queue's feeder thread; in a DataLoader worker, a batch that a "
                  "collate_fn made outside shared memory), which changes no value";
        }
        notes.push_back("process " + std::to_string((in_a ? a : b).shown(p)) + ": thread " +
                        std::to_string(id) + " exists only in " + (in_a ? "A" : "B") + why);
        if (best) continue;
        // A whole thread of ops on one side only: compare it against an empty thread.
        auto pair = std::make_unique<Pair>(ra, id, in_a ? range : TidxRange{}, rb, id,
                                           in_a ? TidxRange{} : range);
        best = std::move(pair);
        best_at = Located{Located::kStructure, 0, 0};
        continue;
      }
      ++threads_compared;
      uint32_t ida = thread_at(ta, k), idb = thread_at(tb, k);
      TidxRange range_a = thread_tidx_range(ra, ida), range_b = thread_tidx_range(rb, idb);
      // Recorded with other --steps windows (or one whole), or one a ring that dropped the
      // thread's first ops against a thread held from its start (the ring of a run that
      // crashed, against a whole run): ops pair from the first step both hold, not from the
      // start of each, nor by their positions (other code may run more ops per step).
      bool no_common_step = false;
      const bool aligned = options.align_steps.first >= 0;
      auto ring_dropped = [](const Reader& r, const TidxRange& range) {
        return range.begin > 0 && kept_as_ring(r);
      };
      const std::optional<int64_t> from_step =
          !aligned && (ra.meta("steps") != rb.meta("steps") ||
                       ring_dropped(ra, range_a) != ring_dropped(rb, range_b))
              ? first_common_step(ra, ida, &range_a, rb, idb, &range_b, &no_common_step)
              : std::nullopt;
      // Steps paired by hand: each side from the first op of its step.
      if (aligned) {
        const auto begin_a = seek_step(ra, ida, range_a, options.align_steps.first);
        const auto begin_b = seek_step(rb, idb, range_b, options.align_steps.second);
        range_a.begin = begin_a.value_or(range_a.end);
        range_b.begin = begin_b.value_or(range_b.end);
        no_common_step = range_a.begin >= range_a.end || range_b.begin >= range_b.end;
      }
      // A ring keeps the last ops of a run and a trimmed bundle a window: each side may start
      // later. Ops are compared where both hold them; none in common leaves nothing to say.
      if (range_a.end > range_a.begin || range_b.end > range_b.begin) ++pairs_with_ops;
      if (no_common_step || (!from_step && !aligned && range_a.end > range_a.begin && range_b.end > range_b.begin &&
                             (range_a.begin >= range_b.end || range_b.begin >= range_a.end))) {
        ++pairs_disjoint;
        if (aligned) {
          // A step asked for that a thread does not reach: which steps each holds.
          auto steps_held = [](const Reader& r, uint32_t id) {
            const TidxRange all = thread_tidx_range(r, id);
            const auto first = all.end > all.begin ? r.op_at(id, all.begin) : std::nullopt;
            const auto last = all.end > all.begin ? r.op_at(id, all.end - 1) : std::nullopt;
            return first && last ? "steps " + std::to_string(first->step) + ".." + std::to_string(last->step)
                                 : std::string("no op");
          };
          disjoint_text = "process " + std::to_string(p) + ", thread " + std::to_string(k) +
                          ": --align-steps " + std::to_string(options.align_steps.first) + ":" +
                          std::to_string(options.align_steps.second) + ", but A holds " +
                          steps_held(ra, ida) + " and B " + steps_held(rb, idb);
          disjoint_advice = "give --align-steps a step of each run that it holds";
          notes.push_back(disjoint_text + ": not compared");
          continue;
        }
        // What each holds, in ops and in steps (how --steps counts them).
        auto held = [](const Reader& r, uint32_t id, const TidxRange& range, int64_t* first_step,
                       int64_t* last_step) {
          const auto first = r.op_at(id, range.begin), last = r.op_at(id, range.end - 1);
          std::string text = "ops " + std::to_string(range.begin) + ".." + std::to_string(range.end - 1);
          if (first && last) {
            *first_step = first->step;
            *last_step = last->step;
            text += " (steps " + std::to_string(first->step) + ".." + std::to_string(last->step) + ")";
          }
          return text;
        };
        int64_t first_a = -1, last_a = -1, first_b = -1, last_b = -1;
        const std::string held_a = held(ra, ida, range_a, &first_a, &last_a);
        const std::string held_b = held(rb, idb, range_b, &first_b, &last_b);
        disjoint_text = "process " + std::to_string(p) + ", thread " + std::to_string(k) +
                        ": A holds " + held_a + " of the thread and B " + held_b;
        // Recording the run that holds the later steps again over the other's: what a ring
        // of a run that stopped early and of one that went on need; and one step more where
        // the other's recording holds its thread's end (the step where one went on and the
        // other did not).
        if (first_a >= 0 && first_b >= 0 && last_a != last_b) {
          const bool a_later = last_a > last_b;
          const bool ended = !window_ended(a_later ? rb : ra, a_later ? last_b : last_a);
          disjoint_advice = std::string("record ") + (a_later ? "A" : "B") + " again with --steps " +
                            std::to_string(a_later ? first_b : first_a) + ":" +
                            std::to_string((a_later ? last_b : last_a) + (ended ? 2 : 1)) +
                            ", the steps " + (a_later ? "B" : "A") + " holds" +
                            (ended ? " and the next" : "") +
                            (kept_as_ring(ra) || kept_as_ring(rb) ? " (the ring of a run that stopped early holds "
                                                    "other steps than one that went on)"
                                                  : "") +
                            // A run resumed from a checkpoint counts its steps from 0 again:
                            // its step 0 is the other's later one.
                            ((a_later ? first_b : first_a) == 0
                                 ? "; or, if " + std::string(a_later ? "B" : "A") +
                                       " resumed from a checkpoint (its steps count from 0 "
                                       "again), pair the steps with --align-steps " +
                                       (a_later ? std::to_string(first_a) + ":0" : "0:" + std::to_string(first_b))
                                 : "");
        }
        notes.push_back(disjoint_text + ": no op in common (rings or --steps windows that kept "
                                        "other parts of the runs), not compared");
        continue;
      }
      if (!aligned && range_a.begin == range_b.begin && range_a.begin > 0)
        notes.push_back("process " + std::to_string(p) + ", thread " + std::to_string(k) +
                        ": both runs hold ops from " + std::to_string(range_a.begin) +
                        " of the thread only (a ring or a trimmed bundle dropped the earlier "
                        "ones): what came before was not compared");
      auto pair = std::make_unique<Pair>(ra, ida, range_a, rb, idb, range_b);
      pair->pool = in_pools && pool_a.count(ida) && pool_b.count(idb);
      if (aligned) {
        pair->b_offset = range_b.begin - range_a.begin;
        pair->step_offset = options.align_steps.first - options.align_steps.second;
        if (p == 0 && k == 0) {
          main_thread_offset = pair->b_offset;
          auto start = [](const Reader& r, uint32_t id, int64_t tidx, int64_t step) {
            const auto op = r.op_at(id, tidx);
            return json{{"step", step}, {"seq", op ? json(op->seq) : json(nullptr)}};
          };
          aligned_start = {{"a", start(ra, ida, range_a.begin, options.align_steps.first)},
                           {"b", start(rb, idb, range_b.begin, options.align_steps.second)}};
          notes.push_back("compared from A's step " + std::to_string(options.align_steps.first) +
                          " (its op " + std::to_string(range_a.begin) + ") and B's step " +
                          std::to_string(options.align_steps.second) + " (its op " +
                          std::to_string(range_b.begin) + ") on (--align-steps); the ops before "
                          "them were not compared");
        }
      } else if (from_step) {
        pair->b_offset = range_b.begin - range_a.begin;
        if (p == 0 && k == 0) main_thread_offset = pair->b_offset;
        notes.push_back("process " + std::to_string(p) + ", thread " + std::to_string(k) +
                        ": compared from step " + std::to_string(*from_step) +
                        ", the first both runs hold, to the last both hold (A's ops " +
                        std::to_string(range_a.begin) + ".." + std::to_string(range_a.end - 1) +
                        ", B's " + std::to_string(range_b.begin) + ".." +
                        std::to_string(range_b.end - 1) + ")");
      } else if (range_a.begin != range_b.begin) {
        pair->b_offset = ring_offset(*pair);
        if (p == 0 && k == 0) main_thread_offset = pair->b_offset;
        TDBG_RETURN_IF_ERROR(pair->status());
        const std::string from =
            pair->b_offset == 0
                ? "compared from " + std::to_string(std::max(range_a.begin, range_b.begin))
                : "compared from there, A's op " +
                      std::to_string(std::max(range_a.begin, range_b.begin - pair->b_offset)) +
                      " with B's " +
                      std::to_string(std::max(range_a.begin + pair->b_offset, range_b.begin)) +
                      ", where the ops both hold line up (B ran " +
                      std::to_string(pair->b_offset < 0 ? -pair->b_offset : pair->b_offset) +
                      " op(s) " + (pair->b_offset > 0 ? "more" : "fewer") + " before the rings)";
        notes.push_back("process " + std::to_string(p) + ", thread " + std::to_string(k) +
                        ": A holds ops from " + std::to_string(range_a.begin) + " of the thread, B from " +
                        std::to_string(range_b.begin) + " (a ring or a trimmed bundle dropped the "
                        "earlier ones): " + from);
      }
      TDBG_ASSIGN_OR_RETURN(Located at, locate(*pair, options, stats, progress));
      // Ops whose fields differ in a way that changes no value.
      auto note_alike = [&](int64_t count, int64_t first, const std::string& how) {
        if (count == 0) return;
        std::string first_op;
        if (auto o = ra.op_at(ida, first)) first_op = ", first " + op_at_source(ra, pair->a.strings, *o);
        notes.push_back("process " + std::to_string(p) + ", thread " + std::to_string(k) + ": " +
                        std::to_string(count) + " op(s) " + how + first_op + ": not a divergence");
      };
      note_alike(pair->permuted, pair->first_permuted,
                 "take the same inputs in another order and make the same outputs (operands "
                 "swapped, as in x + f(x) against f(x) + x)");
      note_alike(pair->args_spelled, pair->first_args_spelled,
                 "pass arguments that mean the same another way (dim=-1 against dim=1 of a 2-D "
                 "tensor, dtype=None against the input's own) and make the same outputs");
      if (at.kind == Located::kNone) continue;
      // The earliest divergence in the process (by A's start order, B's where A has no op).
      const OpRecord* o = pair->a.cursor.at(at.i);
      if (!o) o = pair->b.cursor.at(at.j);
      int64_t seq = o ? o->seq : std::numeric_limits<int64_t>::max() - 1;
      if (seq < best_seq || !best) {
        best_seq = seq;
        best_at = at;
        best_key = o ? key_of(*o) : first_key;
        best_end = end_of(*pair, at);
        best = std::move(pair);
      }
    }
    // The processes whose ops are described: p in both runs, but where a group of workers is
    // compared as one set (below), the processes of the ops that differ.
    size_t index_a = p, index_b = p;
    auto describe_set_divergence = [&](const PoolVerdict& v) {
      index_a = v.a.process;
      index_b = v.b.process;
      const Reader& xa = *a.processes[index_a];
      const Reader& xb = *b.processes[index_b];
      int64_t ia = v.a.tidx, jb = v.b.tidx;
      bool structure = v.a.signature != v.b.signature;
      // The set's first difference may follow from ops just before it whose values the other
      // run also has, elsewhere (the same random draw, taken by another worker for another
      // item): where the ops before A's and B's are of the same kinds, op for op, back to one
      // with the same values in both (the item, loaded alike), the ops compared start after
      // that one.
      const int64_t back = structure ? -1 : v.same_before - 1;
      if (back > 0) {
        ia -= back;
        jb -= back;
      } else if (v.b_any.tidx >= 0 && v.b_any.process == v.b.process &&
                 v.b_any.thread == v.b.thread && v.b_any.tidx < v.b.tidx) {
        // Ops only B runs just before B's counterpart, in its thread: start there, so that
        // the alignment names them as inserted.
        jb = v.b_any.tidx;
        structure = true;
      }
      if (!structure) {
        // An input of the pair that differs came from an op of the same kind in both, in the
        // same threads, whose own values differ (the item's `self.x[i]` with another index,
        // before the equal augmentation noise the stretch stopped at): that op is first.
        Strings sa(xa), sb(xb);
        for (int hops = 0; hops < 16; ++hops) {
          auto oa = xa.op_at(v.a.thread, ia), ob = xb.op_at(v.b.thread, jb);
          if (!oa || !ob) break;
          std::optional<OpRecord> pa, pb;
          for (size_t k = 0; k < oa->tensors.size() && k < ob->tensors.size() && !pa; ++k) {
            const TensorRecord& ta = oa->tensors[k];
            const TensorRecord& tb = ob->tensors[k];
            if (ta.role != TensorRole::kInput || tb.role != TensorRole::kInput || ta.hash == tb.hash ||
                ta.producer == tracer::kNoSeq || tb.producer == tracer::kNoSeq)
              continue;
            pa = xa.op(ta.producer);
            pb = xb.op(tb.producer);
            if (!pa || !pb || pa->thread != v.a.thread || pb->thread != v.b.thread ||
                sa.text(pa->name) != sb.text(pb->name) ||
                op_content(*pa, sa) == op_content(*pb, sb))
              pa.reset();
          }
          if (!pa) break;
          ia = pa->tidx;
          jb = pb->tidx;
        }
      }
      best = std::make_unique<Pair>(
          xa, v.a.thread, TidxRange{ia, thread_tidx_range(xa, v.a.thread).end}, xb,
          v.b.thread, TidxRange{jb, thread_tidx_range(xb, v.b.thread).end});
      best->pool = true;  // two units of a set, paired at a task
      // The first op of the stretch whose values differ (the ops are of the same kinds, op for
      // op, up to A's set difference).
      for (int64_t k = 0; k < back; ++k) {
        const OpRecord* oa = best->a.cursor.at(ia + k);
        const OpRecord* ob = best->b.cursor.at(jb + k);
        if (oa && ob && op_content(*oa, best->a.strings) != op_content(*ob, best->b.strings)) {
          ia += k;
          jb += k;
          break;
        }
      }
      best_at = structure ? Located{Located::kStructure, ia, jb} : innermost_pair(*best, ia, jb, stats);
      const OpRecord* o = best->a.cursor.at(ia);
      best_key = o ? key_of(*o) : first_key;
      best_end = End{};
      only_a.clear();
      only_b.clear();
    };
    // Whether the pair's own divergence is one of the set's differences (an op of A's that B's
    // units do not run with these values, or the reverse): then the pair says it best, and
    // the set is not needed. Otherwise it is an artifact of work that moved.
    auto pair_differs_in_set = [&](const PoolVerdict& v) {
      auto in_surplus = [&](Side& side, int64_t t, int sign) {
        const OpRecord* o = side.cursor.at(t);
        if (!o) return false;
        auto it = v.surplus.find(op_content(*o, side.strings));
        return it != v.surplus.end() && it->second * sign > 0;
      };
      return in_surplus(best->a, best_at.i, +1) || in_surplus(best->b, best_at.j, -1);
    };
    const bool workers = dataloader_workers(a, p);
    // DataLoader workers load other batches each only where their number differs: with as
    // many in both runs, worker k loads the same batches in both.
    const bool other_batches =
        workers && pool[p] >= 0 && !pool_worker_counts(a, b, pool, pool[p], false).empty();
    auto same_set = [workers, other_batches](size_t ops) {
      return std::string(!workers        ? " took their tasks in another order in A than in B"
                         : other_batches ? " loaded other batches each in A than in B"
                                         : "") +
             "; compared as one set, they ran the same " + std::to_string(ops) +
             " ops with the same values";
    };
    const std::string tasks = !workers        ? " may take their tasks in any order: "
                              : other_batches ? " load other batches each in A than in B: "
                                              : ": ";
    const std::string as_set = "compared as one set, their ops differ; the first op of A's that "
                               "B's did not run with the same values is compared with B's op of "
                               "the same kind after the same item or task, wherever each ran";
    bool handled = false;
    if (best && pool[p] >= 0) {
      // The workers of a process pool.
      handled = true;
      auto found = pool_verdicts.find(pool[p]);
      const bool first_of_group = found == pool_verdicts.end();
      if (first_of_group) {
        std::string pids_a, pids_b;
        auto units_a = pool_units(a, pool, pool[p], &pids_a);
        auto units_b = pool_units(b, pool, pool[p], &pids_b);
        found = pool_verdicts.emplace(pool[p], compare_sets(a, units_a, b, units_b)).first;
        const PoolVerdict& v = found->second;
        const std::string who = pool_who(a, pool, pool[p], pids_a, pids_b);
        if (v.same == 1)
          notes.push_back(who + same_set(v.ops) + pool_worker_counts(a, b, pool, pool[p], false));
        else if (v.same == 0)
          notes.push_back(who + tasks + as_set +
                          pool_worker_counts(a, b, pool, pool[p], true, from_iterable_dataset(a, v.a)));
        else
          notes.push_back(who + tasks + "they hold too many ops to compare as one set and are "
                          "compared in start order, process by process");
      }
      const PoolVerdict& v = found->second;
      if (v.same == 1 || (v.same == 0 && !first_of_group && v.a.tidx >= 0 && v.b.tidx >= 0))
        best.reset();  // no divergence, or the group's, described once
      else if (v.same == 0 && v.a.tidx >= 0 && v.b.tidx >= 0 && !pair_differs_in_set(v))
        describe_set_divergence(v);
    }
    if (best && !handled) {
      // The threads of a thread pool (ThreadPoolExecutor): every thread but the main one.
      auto units_a = thread_units(a, p), units_b = thread_units(b, p);
      const bool in_units = std::any_of(units_a.begin(), units_a.end(),
                                        [&](const Unit& u) { return u.thread == best->a.thread; });
      if (in_units && units_a.size() >= 2 && units_b.size() >= 2) {
        const PoolVerdict v = compare_sets(a, units_a, b, units_b);
        const std::string who = "process " + std::to_string(p) + ": its threads other than the "
                                "main one (a thread pool or the like)";
        if (v.same == 1) {
          notes.push_back(who + same_set(v.ops));
          best.reset();
        } else if (v.same == 0 && v.a.tidx >= 0 && v.b.tidx >= 0 && !pair_differs_in_set(v)) {
          notes.push_back(who + tasks + as_set);
          describe_set_divergence(v);
        }
      }
    }
    // (Only where the erring run has no op of its own there: it stopped. Ops it ran instead,
    // then raised, are a change of its own, the cause.)
    const bool error_end = best && best_at.kind == Located::kStructure &&
                           ((error_exit(*a.processes[index_a]) && !best->a.cursor.at(best_at.i)) ||
                            (error_exit(*b.processes[index_b]) && !best->b.cursor.at(best_at.j)));
    const bool both_end = best_end.side != 0 && best_end.side == first_end.side;
    // (A quiet child's end, by the clock, comes before its erring parent's, which waited
    // for it at shutdown.)
    const bool follows_error = first_is_error_exit && !error_end &&
                               stopped_by_parent(index_a, index_b, first_index_a, first_index_b);
    const bool earlier = result["first_divergence"].is_null() ||
                         (!follows_error && (both_end ? best_end.ns < first_end.ns
                                             : error_end != first_is_error_exit ? !error_end
                                                                                : best_key < first_key));
    // The other processes' divergences, in brief: a rank that received the first one's
    // values through a collective, a process a signal stopped (what the user asks next).
    json brief;
    if (best) {
      const OpRecord* in_a = best->a.cursor.at(best_at.i);
      const OpRecord* o = in_a ? in_a : best->b.cursor.at(best_at.j);
      Strings& strings = in_a ? best->a.strings : best->b.strings;
      const json named = process_json(a, index_a);
      brief = {{"process", a.shown(index_a)},  // as `tdbg show --process` numbers it
               {"rank", a.processes[index_a]->meta("rank")},
               {"worker", a.processes[index_a]->meta("worker")},
               {"who", named.value("who", std::string())},
               {"forked_at_step", named.value("forked_at_step", json())},
               {"kind", best_at.kind == Located::kStructure ? "structure" : "value"},
               {"op", o ? json(strings.text(o->name)) : json(nullptr)},
               {"seq", o ? json(o->seq) : json(nullptr)},
               {"step", o ? json(o->step) : json(nullptr)}};
      // Everything before was the same in this process, so an argument that differs over the
      // same inputs, or a generator state, did not come from another process (a collective
      // brings tensors): a cause of its own (both ranks given another lr or seed).
      const OpRecord* in_b = best->b.cursor.at(best_at.j);
      // (Not in a DataLoader worker: the indices it loads come from its parent's sampler
      // through a queue, and its seed from its parent's generator.)
      if (best_at.kind != Located::kStructure && in_a && in_b &&
          a.processes[index_a]->meta("worker").empty()) {
        const OpComparison c = compare_ops(*in_a, best->a.strings, *in_b, best->b.strings);
        if (c.rng) brief["own_cause"] = "rng";
        else if (c.arg >= 0 && c.input < 0) brief["own_cause"] = "arguments";
      }
    }
    if (best && !earlier) others.push_back(std::move(brief));
    if (best && earlier) {
      if (!first_brief.is_null()) others.push_back(std::move(first_brief));
      first_brief = std::move(brief);
      first_key = best_key;
      first_end = best_end;
      first_is_error_exit = error_end;
      first_index_a = index_a;
      first_index_b = index_b;
      const Reader& da = *a.processes[index_a];
      const Reader& db = *b.processes[index_b];
      json moved = thread_move(*best, best_at, da, db, only_a, only_b, options.scan_limit);
      const json elsewhere = moved.is_null() ? ops_elsewhere(*best, best_at, da, db, only_a, only_b)
                                             : json(nullptr);
      TDBG_ASSIGN_OR_RETURN(json d, describe(*best, best_at, options, stats, progress));
      // Two threads of a pool or two workers (paired from where the set differs, or
      // directly): what each runs next are other tasks or items, and what a task made goes
      // on in the main thread, so nothing said of the rest of the pair (the same values to
      // the end, a difference contained, how far it grows) speaks for the run.
      if (best->pool) {
        d.erase("growth");
        d.erase("values_same");
        d.erase("values_left_differ");
        d.erase("contained");
        if (d.value("healed", json()).is_object() && d["healed"].value("to_end", false))
          d["healed"] = nullptr;
      }
      if (!elsewhere.is_null()) {
        d["detail"] = d.value("detail", std::string()) + "; " + elsewhere["text"].get<std::string>();
        d["ops_elsewhere"] = elsewhere;
      }
      if (!moved.is_null()) {
        d["detail"] = d.value("detail", std::string()) + "; " + moved["text"].get<std::string>();
        const bool a_goes_on = moved["side"] == "A";
        notes.push_back("process " + std::to_string(p) + ": thread " +
                        std::to_string(moved["thread"].get<uint32_t>()) + " of " +
                        (a_goes_on ? "B" : "A") + " stops at tidx " +
                        std::to_string(moved["from_tidx"].get<int64_t>()) + " where " +
                        (a_goes_on ? "A" : "B") + "'s goes on; " + moved["text"].get<std::string>());
      }
      // (Other --steps windows start at the first step both hold, and --align-steps where it
      // says: a note says so.)
      if (da.meta("steps") == db.meta("steps") && options.align_steps.first < 0) {
        // Compared from after the threads' first ops (a ring, a trimmed bundle): the runs may
        // have differed before, unseen; likelier where this difference is in the first step
        // held (an argument found at the ring's first update differed since an earlier step).
        // (The threads' own first ops: a pair of a worker set starts where its ops differ.)
        const int64_t held_from =
            std::max(thread_tidx_range(da, best->a.thread).begin,
                     thread_tidx_range(db, best->b.thread).begin - best->b_offset);
        const auto first_held = held_from > 0 ? da.op_at(best->a.thread, held_from) : std::nullopt;
        const OpRecord* here = best->a.cursor.at(best_at.i);
        if (first_held) {
          // A bundle's window was cut around the divergence found in the whole runs (its
          // diff.json): not a ring that may have missed an earlier one. A bundle of whole
          // runs holds the window from seq 0: what is missing, a ring dropped.
          auto cut = [](const Reader& r) {
            const json w = json::parse(r.meta("bundle_window"), nullptr, /*allow_exceptions=*/false);
            return w.is_object() && w.value("from_seq", json()).is_number_integer() &&
                   w["from_seq"].get<int64_t>() > 0;
          };
          const bool window = cut(da) || cut(db);
          d["compared_from"] = {{"tidx", held_from}, {"step", first_held->step},
                                {"in_first_step", !window && here != nullptr && here->step == first_held->step},
                                {"bundle_window", window}};
        }
      }
      if (moved.is_null()) {
        const bool b_ended = d.value("ended", "") == "B";
        // The ops compared before the end: from where both runs hold ops (rings that kept
        // other windows), not from the ended side's first op.
        const int64_t a_from = std::max(best->a.begin, best->b.begin - best->b_offset);
        explain_ending(d, b_ended ? db : da, b_ended ? best->b.thread : best->a.thread,
                       b_ended ? best_at.j - (a_from + best->b_offset) : best_at.i - a_from,
                       b_ended ? best_at.j : best_at.i);
      }
      d.erase("ended");
      if (d.contains("ended_in_change")) {
        const bool b_ended = d["ended_in_change"] == "B";
        const Reader& r = b_ended ? db : da;
        d["detail"] = d.value("detail", std::string()) + "; then " + (b_ended ? "B" : "A") +
                      "'s process " + abnormal_ending(r) +
                      ending_place(r, b_ended ? best->b.thread : best->a.thread);
      }
      d["thread_move"] = std::move(moved);
      d["process"] = index_a;
      if (a.processes.size() > 1) {
        d["process_a"] = process_json(a, index_a);
        d["process_b"] = process_json(b, index_b);
      }
      // The op's file, as each run recorded it (meta `source:<path>`, size and modification
      // time): the same in both, a different line of it is another code path, not an edit.
      {
        const std::string file_a = d["a"].is_object() && d["a"].value("source", json()).is_object()
                                       ? d["a"]["source"].value("file", std::string())
                                       : std::string();
        const std::string file_b = d["b"].is_object() && d["b"].value("source", json()).is_object()
                                       ? d["b"]["source"].value("file", std::string())
                                       : std::string();
        if (!file_a.empty() && file_a == file_b) {
          const std::string seen_a = a.processes[index_a]->meta("source:" + file_a);
          const std::string seen_b = b.processes[index_b]->meta("source:" + file_b);
          if (!seen_a.empty() && !seen_b.empty()) d["same_source_file"] = seen_a == seen_b;
        }
      }
      d["threads"] = {{"a", best->a.thread}, {"b", best->b.thread}};
      result["status"] = "diverged";
      result["first_divergence"] = std::move(d);
    }
  }
  if (result["first_divergence"].is_object() && !others.empty())
    result["first_divergence"]["other_processes"] = std::move(others);
  // The group of workers an unpaired process `x` of `run` belongs with (a pool with more
  // workers in one run, a DataLoader with more workers per epoch), or -1.
  auto extra_pool = [&](const tracer::Run& run, size_t x) {
    for (size_t g = 0; g < processes; ++g)
      if (pool[g] >= 0 && same_pool(run, g, x)) return pool[g];
    return -1;
  };
  // Processes of one run only that hold no op (an mp.spawn parent, a launcher that imported
  // torch): nothing to compare, said once.
  size_t extra_at = processes;
  {
    const tracer::Run& more = a.processes.size() > b.processes.size() ? a : b;
    std::string pids;
    while (extra_at < more.processes.size() && !more.processes[extra_at]->any_op())
      pids += (pids.empty() ? "" : ", ") + more.processes[extra_at++]->meta("pid");
    if (!pids.empty())
      notes.push_back(std::to_string(extra_at - processes) + " recorded process(es) exist only in " +
                      (&more == &a ? "A" : "B") + " and hold no op (pid " + pids +
                      "; a launcher or an mp.spawn parent that imported torch): not compared");
  }
  if (result["first_divergence"].is_null() && a.processes.size() != b.processes.size() &&
      extra_at < std::max(a.processes.size(), b.processes.size())) {
    bool in_a = a.processes.size() > b.processes.size();
    const Reader& extra = in_a ? *a.processes[extra_at] : *b.processes[extra_at];
    const tracer::Run& fewer = in_a ? b : a;
    const tracer::Run& more = in_a ? a : b;
    // A pool with more workers in one run (or a DataLoader with more workers per epoch): the
    // extra processes are no divergence when each one's group, compared as one set, ran the
    // same ops.
    int same_pool = -1;
    for (size_t x = extra_at; x < more.processes.size() && same_pool != 0; ++x) {
      const int g = extra_pool(more, x);
      if (g < 0) {
        same_pool = 0;
        break;
      }
      auto found = pool_verdicts.find(g);
      if (found == pool_verdicts.end()) {
        std::string pids_a, pids_b;
        auto units_a = pool_units(a, pool, g, &pids_a);
        auto units_b = pool_units(b, pool, g, &pids_b);
        found = pool_verdicts.emplace(g, compare_sets(a, units_a, b, units_b)).first;
        if (found->second.same == 1)
          notes.push_back(pool_who(a, pool, g, pids_a, pids_b) + " are more in " +
                          (in_a ? "A" : "B") + "; compared as one set, they ran the same ops "
                          "with the same values" + pool_worker_counts(a, b, pool, g, false));
      }
      same_pool = found->second.same == 1 ? 1 : 0;
    }
    if (same_pool == 1) {
      // identical: noted above
    } else if (fewer.one_database) {
      notes.push_back(std::string(in_a ? "B" : "A") + " is one database: it is compared with " +
                      (in_a ? "A" : "B") + "'s process of its rank (or its first); the other " +
                      std::to_string(more.processes.size() - processes) +
                      " process(es) of " + (in_a ? "A" : "B") + " are not compared");
    } else if (fewer.processes.size() + fewer.skipped.size() >=
               more.processes.size() - (extra_at - processes)) {
      // The other run left out databases its processes never got to write (killed within their
      // first flush interval): the extra process may well be their counterpart.
      notes.push_back(std::string("a recorded process exists only in ") + (in_a ? "A" : "B") +
                      " (" + extra.path() + "); " + (in_a ? "B" : "A") +
                      " left out a database with nothing recorded, probably its counterpart: "
                      "not compared");
    } else {
      result["status"] = "diverged";
      result["first_divergence"] = {
          {"kind", "structure"}, {"cause", "structure"},
          {"detail", std::string("a recorded process exists only in ") + (in_a ? "A" : "B") + ": " +
                         extra.path()},
          {"process", extra_at}, {"a", nullptr}, {"b", nullptr}, {"tensor", nullptr}};
    }
  }
  // Bisection read only the blocks it probed; before two runs are called identical, every
  // block of both is read and checked, so a damaged database is never vouched for.
  if (result["first_divergence"].is_null()) {
    const int64_t total = static_cast<int64_t>(a.processes.size() + b.processes.size());
    int64_t done = 0;
    for (const tracer::Run* run : {&a, &b}) {
      for (const auto& r : run->processes) {
        progress.update(done++, total, "checking");
        Status st = r->verify();
        if (!st.ok())
          return Status::Error(st.message() + "; not called identical while a database is damaged");
      }
    }
  }
  progress.finish();
  if (pairs_disjoint > 0 && pairs_disjoint == pairs_with_ops && result["first_divergence"].is_null())
    return Status::Error("no op in common to compare (" + disjoint_text + "): " +
                         (disjoint_advice.empty()
                              ? std::string("record both runs with the same --steps window, or "
                                            "rings large enough to reach back to where they differ")
                              : disjoint_advice));
  // Nothing was compared: "identical" (exit 0) would pass a check of two programs that both
  // failed before their first op.
  if (pairs_with_ops == 0 && result["first_divergence"].is_null()) {
    std::string endings;
    for (const auto& [name, run] : {std::pair{"A", &a}, std::pair{"B", &b}})
      if (!run->processes.empty())
        if (const std::string ending = abnormal_ending(*run->processes[0]); !ending.empty())
          endings += std::string("; ") + name + "'s process " + ending;
    // One run holds ops in processes the other has no counterpart for: a launcher's database
    // given alone (mp.spawn's parent records none), against a whole run.
    auto ops_of = [](const tracer::Run& run) {
      int64_t n = 0;
      for (const auto& r : run.processes) n += r->op_count();
      return n;
    };
    const int64_t ops_a = ops_of(a), ops_b = ops_of(b);
    if ((ops_a == 0) != (ops_b == 0))
      return Status::Error(std::string(ops_a == 0 ? "A (" + a.path : "B (" + b.path) +
                           ") holds no op, and its process pairs with one of " +
                           (ops_a == 0 ? "B" : "A") + " that holds none either (" +
                           (ops_a == 0 ? "B" : "A") + "'s ops are in its other processes): a "
                           "launcher (mp.spawn's parent, torchrun) records none; compare a rank's "
                           "database with a rank's, or the two run folders" + endings);
    return Status::Error("neither run holds any op, nothing to compare (an --ops pattern that "
                         "matched nothing, a --steps window the program never reached: steps "
                         "count torch.optim optimizer steps, or a program that ran no torch "
                         "op)" + endings);
  }
  result["values_compared"] = values_compared;
  if (!recorded_part.empty()) result["recorded_part"] = recorded_part;
  if (!aligned_start.is_null()) result["aligned_start"] = std::move(aligned_start);
  // Without hashes every op "is the same": nothing can be said to heal.
  if (!values_compared && result["first_divergence"].is_object()) {
    result["first_divergence"]["healed"] = nullptr;
    // Nor can paired ops be said to hold the same values, nor growth measure any.
    result["first_divergence"].erase("values_same");
    if (result["first_divergence"].value("growth", json()).is_object())
      result["first_divergence"]["growth"]["values_recorded"] = false;
    result["first_divergence"].erase("next");
  }
  // Two different programs (a run compared with the wrong one): the first process's script
  // (the first .py argument, else the program) differs, by file name.
  auto program_of = [](const Reader& r) {
    const std::string cmdline = r.meta("cmdline");
    std::vector<std::string> scripts = command_line_scripts(cmdline);
    std::string path;
    if (!scripts.empty()) {
      path = scripts.front();
    } else if (const json argv = json::parse(cmdline, nullptr, false);
               argv.is_array() && !argv.empty() && argv[0].is_string()) {
      path = argv[0].get<std::string>();
    }
    return path.substr(path.find_last_of('/') + 1);  // npos + 1 == 0: the whole path
  };
  bool different_programs = false;
  if (!a.processes.empty() && !b.processes.empty()) {
    const std::string pa = program_of(*a.processes[0]), pb = program_of(*b.processes[0]);
    auto known = [](const std::string& p) { return !p.empty() && p.rfind("python", 0) != 0; };
    different_programs = known(pa) && known(pb) && pa != pb;
    // Files of other names that hold the same text (a script copied to try a change), each as
    // it was recorded (meta `source:<path>`, size and modification time): the same program.
    auto recorded_file = [](const Reader& r, const std::string& name) {
      for (const auto& [path, identity] : recorded_sources(r)) {
        if (path.substr(path.find_last_of('/') + 1) != name) continue;
        std::error_code ec;
        return !identity.empty() && std::filesystem::exists(path, ec) &&
                       !source_changed(path, identity)
                   ? path
                   : std::string();
      }
      return std::string();
    };
    if (different_programs) {
      const std::string fa = recorded_file(*a.processes[0], pa),
                        fb = recorded_file(*b.processes[0], pb);
      auto text_of = [](const std::string& path) {
        std::ifstream in(path, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      };
      if (!fa.empty() && !fb.empty() && text_of(fa) == text_of(fb)) {
        different_programs = false;
        notes.push_back("the runs' scripts have other names (A " + pa + ", B " + pb +
                        ") and hold the same text, as each was recorded");
      }
    }
    if (different_programs)
      warnings.push_back("the runs are of different programs (A " + pa + ", B " + pb +
                         "): every difference may come from the programs being other code");
  }
  // Other world sizes (torch.distributed, meta rank "R/W"): every collective differs.
  auto world_size = [](const tracer::Run& run) {
    for (const auto& r : run.processes) {
      const std::string rank = r->meta("rank");
      const size_t slash = rank.find('/');
      if (slash != std::string::npos) return rank.substr(slash + 1);
    }
    return std::string();
  };
  if (const std::string wa = world_size(a), wb = world_size(b); wa != wb) {
    auto ranks = [](const std::string& w) { return w.empty() ? std::string("no ranks") : w + " rank(s)"; };
    warnings.push_back("the runs have other torch.distributed world sizes (A " + ranks(wa) +
                       ", B " + ranks(wb) + "): ranks are compared with the same rank of the "
                       "other run, and every collective differs");
  }
  // A child of another recorded process ended by SIGTERM: terminated by its parent at
  // shutdown (multiprocessing's Pool.__exit__ and Process.terminate, a DataLoader's workers
  // not yet gone), which races with its own exit in every run.
  auto terminated_child = [](const tracer::Run& run, const Reader& r, const std::string& how) {
    if (how.empty()) return true;
    return r.meta("exit_status") == "signal 15" &&
           std::any_of(run.processes.begin(), run.processes.end(),
                       [&r](const auto& other) { return child_of(r, *other); });
  };
  // The same ops, and endings that differ (one run aborted or raised after its last op, the
  // other exited normally): the ops say nothing of why, but "identical" alone would hide it.
  if (result["first_divergence"].is_null()) {
    auto ending = [](const std::string& how) {
      return how.empty() ? std::string("exited normally") : how;
    };
    for (size_t p = 0; p < processes; ++p) {
      const Reader& ra = *a.processes[p];
      const Reader& rb = *b.processes[p];
      const std::string ea = abnormal_ending(ra), eb = abnormal_ending(rb);
      if (ea == eb) continue;
      if (terminated_child(a, ra, ea) && terminated_child(b, rb, eb)) {
        notes.push_back("process " + std::to_string(p) + " " + ending(ea) + " in A and " +
                        ending(eb) + " in B, a child that its parent terminates at shutdown "
                        "(multiprocessing's Pool.__exit__, Process.terminate) if it has not "
                        "exited yet, which races: not a difference");
        continue;
      }
      warnings.push_back("the runs ran the same ops but ended differently: A's process " +
                         std::to_string(p) + " " + ending(ea) + ", B's " + ending(eb) +
                         " (after their last op: outside torch's ops, or at exit)");
      result["ended_differently"] = true;
    }
  } else {
    // A divergence, and one run's process ended early (an exception, a signal, a kill) where
    // the other's ran to its end: what both ran may agree (a change that added work), but the
    // run that ended has no results past its end. Said on the headline (`run_ended`) where
    // the divergence is not that end; never "the same results" (--results).
    json& d = result["first_divergence"];
    // The process of the divergence shown first (where every rank raised, the one whose
    // change is shown), then the processes that ran ops: a launcher (torchrun, mp.spawn's
    // parent) that exits with status 1 because a rank raised is not the process to name.
    std::vector<size_t> order(std::min(a.processes.size(), b.processes.size()));
    std::iota(order.begin(), order.end(), size_t{0});
    const json shown = d.value("process", json());
    auto rank_of = [&](size_t p) {
      if (shown.is_number() && a.shown(p) == shown.get<size_t>()) return 0;
      return a.processes[p]->op_count() + b.processes[p]->op_count() > 0 ? 1 : 2;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return rank_of(x) < rank_of(y); });
    for (const size_t p : order) {
      const Reader& ra = *a.processes[p];
      const Reader& rb = *b.processes[p];
      const std::string ea = abnormal_ending(ra), eb = abnormal_ending(rb);
      if (ea.empty() == eb.empty()) continue;
      const bool b_ended = !eb.empty();
      if (terminated_child(b_ended ? b : a, b_ended ? rb : ra, b_ended ? eb : ea)) continue;
      result["ended_differently"] = true;
      if (d.value("cause", "") == "ended" || d.contains("run_ended")) continue;
      const Reader& r = b_ended ? rb : ra;
      int64_t step = -1;
      if (auto held = r.held(); held.ok() && held->any)
        if (auto last = r.op(held->last_seq)) step = last->step;
      const tracer::Run& side = b_ended ? b : a;
      const std::string label = process_json(side, p).value("who", std::string());
      const std::string who =
          std::string(b_ended ? "B" : "A") + "'s process" +
          (side.processes.size() > 1 ? " " + std::to_string(side.shown(p)) : "") +
          (label.empty() ? "" : " (" + label + ")");
      // (A recording that stopped says where itself; its program went on.) Where the process
      // was inside an op, or an op raised the error it ended on, that op is named (t144 F5).
      const bool stopped = !recording_lost(r).empty();
      const std::string how = b_ended ? eb : ea;
      const std::string where = stopped ? how : process_ending(r);
      std::string text = who + " " + where;
      if (step >= 0 && !stopped)
        text += where == how ? " after its last op, in step " + std::to_string(step)
                : where.find(" at step ") == std::string::npos ? ", in step " + std::to_string(step)
                                                               : "";
      d["run_ended"] = {
          {"run", b_ended ? "B" : "A"}, {"process", side.shown(p)}, {"step", step}, {"text", text}};
      if (stopped) d["run_ended"]["recording_stopped"] = true;
    }
  }
  result["warnings"] = warnings;
  {
    // The processes of the first divergence (in a multi-process run the launcher, process 0,
    // seeds nothing the ranks use).
    size_t pa = 0, pb = 0;
    const json& d = result["first_divergence"];
    if (d.is_object()) {
      auto index = [&](const char* key) -> size_t {
        const json& p = d.value(key, json());
        return p.is_object() && p.value("index", json()).is_number_unsigned()
                   ? p["index"].get<size_t>()
                   : 0;
      };
      pa = index("process_a");
      pb = index("process_b");
    }
    result["settings"] = settings_that_differ(a, b, pa, pb);
    if (pa != 0 || pb != 0) result["settings_of"] = {{"a", pa}, {"b", pb}};
  }
  // Identical runs whose module paths differ (the model wrapped or restructured; the same
  // values): said, since the paths are how a later divergence would be named. Only the first
  // ops of each main thread are looked at (a few milliseconds).
  if (result["first_divergence"].is_null() && !a.processes.empty() && !b.processes.empty()) {
    // From the first op both hold (a --ring run holds its thread's last ops only).
    const Reader& ra = *a.processes[0];
    const Reader& rb = *b.processes[0];
    const auto threads_a = ra.threads(), threads_b = rb.threads();
    std::vector<std::pair<int64_t, std::string>> ma, mb;
    if (!threads_a.empty() && !threads_b.empty()) {
      const uint32_t ta = threads_a.front().id, tb = threads_b.front().id;
      const int64_t from = std::max(thread_tidx_range(ra, ta).begin,
                                    thread_tidx_range(rb, tb).begin - main_thread_offset);
      auto modules = [](const Reader& r, uint32_t thread, int64_t first,
                        std::vector<std::pair<int64_t, std::string>>* out) {
        (void)r.scan_ops(thread, first, first + 4096, false, [&](const OpRecord& op) {
          out->emplace_back(op.seq, op.module ? r.string(op.module) : std::string());
          return true;
        });
      };
      modules(ra, ta, from, &ma);
      modules(rb, tb, from + main_thread_offset, &mb);
    }
    for (size_t k = 0; k < ma.size() && k < mb.size(); ++k) {
      if (ma[k].second == mb[k].second) continue;
      notes.push_back("module paths differ although every op is the same (the model is "
                      "wrapped or its modules renamed): first at seq " +
                      std::to_string(ma[k].first) + ", A " +
                      (ma[k].second.empty() ? "(none)" : ma[k].second) + ", B " +
                      (mb[k].second.empty() ? "(none)" : mb[k].second));
      break;
    }
  }
  // Identical runs: a seed the program never set (torch draws one per run) did not matter.
  if (result["first_divergence"].is_null()) {
    json kept = json::array();
    for (const json& st : result["settings"])
      if (st.value("key", "") != "seed") kept.push_back(st);
    result["settings"] = kept;
  } else {
    // A divergence of another cause: no random op differed before it, so another seed (one
    // the program never set, torch draws one per run) is not why. Kept, but said so.
    const json& d = result["first_divergence"];
    auto cause = [&](const char* key) {
      const json& v = d.value(key, json());
      return v.is_object() ? v.value("cause", std::string()) : std::string();
    };
    if (d.value("cause", std::string()) != "rng" && cause("value_after_structure") != "rng" &&
        cause("next") != "rng") {
      // A seed the program set (torch draws a 64-bit one where it sets none) often seeds
      // Python's random and NumPy too (worker_init_fn, seed_everything): what they draw is a
      // Python number or NumPy data, an argument or an input, a branch taken.
      auto set_by_program = [](const json& v) {
        return v.is_string() && seed_set_by_program(v.get<std::string>());
      };
      const std::string c = d.value("cause", std::string());
      // A run recorded from a later step (--steps, a --ring's last ops) holds none of the random
      // ops before: they may be where the runs came to differ.
      auto begins_late = [](const tracer::Run& run) {
        return std::any_of(run.processes.begin(), run.processes.end(), [](const auto& r) {
          return !r->meta("steps").empty() || kept_as_ring(*r);
        });
      };
      const bool late_a = begins_late(a), late_b = begins_late(b);
      for (json& st : result["settings"]) {
        if (st.value("key", "") != "seed") continue;
        const std::string origin = st.value("note", std::string());  // (`seed_origin`)
        st["note"] = "no random op differs up to the divergence";
        if (late_a || late_b)
          st["note"] = std::string("no random op differs in what both runs recorded; ") +
                       (late_a && late_b ? "both recordings begin"
                        : late_a         ? "A's recording begins"
                                         : "B's recording begins") +
                       " after the program's start (--steps, --ring), and the random ops before "
                       "were not compared: they may be where the runs came to differ";
        else if ((c == "arguments" || c == "external_input" || c == "structure") &&
                 set_by_program(st.value("a", json())) && set_by_program(st.value("b", json())))
          st["note"] =
              "no torch random op differs up to the divergence; Python's random or "
              "NumPy, where the program seeds them with it, may have drawn what differs";
        if (!origin.empty()) st["note"] = origin + "; " + st["note"].get<std::string>();
      }
    }
  }
  for (const auto* run : {&a, &b})
    for (const std::string& line : run->skipped) notes.push_back(line);
  // A process that never closed its database (killed, crashed) lost its last ops: an ending
  // there is where it was stopped, not where the program went another way.
  for (const auto* side : {&a, &b}) {
    for (size_t p = 0; p < side->processes.size(); ++p) {
      const Reader& r = *side->processes[p];
      // Numbered as `tdbg show --process` numbers it.
      const std::string who = std::string(side == &a ? "A" : "B") + "'s process " +
                              std::to_string(side->shown(p)) + " (pid " + r.meta("pid") + ")";
      if (!signal_ending(r).empty()) {
        notes.push_back(who + " " + process_ending(r) +
                        ": it stops where the signal came, and ops the other run has after that "
                        "point are no divergence of the program");
      } else if (const std::string status = r.meta("exit_status"); !status.empty() && status != "0") {
        // An error exit (a DataLoader timeout, an exception), wherever the first divergence
        // is: often why the run stopped. Also where both runs exit with it: they may raise
        // in other places.
        notes.push_back(who + " " + process_ending(r));
      }
      if (!r.meta("end_time_ns").empty()) continue;
      if (still_recording(r)) {
        notes.push_back(who + " is still running: compared as far as it "
                        "has committed, it ends there for now");
        continue;
      }
      notes.push_back(who + " did not close its database (killed or "
                      "crashed): it ends where it was stopped, its last ops (up to --flush-ms) "
                      "may be missing");
    }
  }
  // Settings that change how kernels compute, where the runs differ in them.
  std::vector<std::pair<std::string, std::string>> kernel_settings;  // key, "key (A x, B y)"
  for (const json& st : result["settings"]) {
    const std::string key = st.value("key", "");
    if (key.rfind("num_", 0) != 0 && key.find("determinis") == std::string::npos &&
        key.find("version") == std::string::npos && key != "cudnn_benchmark" &&
        key != "mkldnn_enabled" && key != "float32_matmul_precision" && key != "flush_denormal" &&
        key != "cpu_model" && key.rfind("$OMP_", 0) != 0 && key.rfind("$MKL_", 0) != 0 &&
        key.rfind("$OPENBLAS_", 0) != 0 && key.rfind("$CUBLAS_", 0) != 0)
      continue;
    auto value = [](const std::string& v) { return v.empty() ? std::string("(unset)") : v; };
    kernel_settings.push_back({key, key + " (A " + value(st.value("a", "")) + ", B " +
                                        value(st.value("b", "")) + ")"});
  }
  json& first = result["first_divergence"];
  if (first.is_object()) {
    // The thread count both runs' process used, when they agree and it is known.
    std::string threads;
    const size_t p = first.value("process", size_t{0});
    if (p < a.processes.size() && p < b.processes.size()) {
      const std::string ta = a.processes[p]->meta("num_threads");
      if (ta == b.processes[p]->meta("num_threads")) threads = ta;
    }
    explain_nondeterministic(first, kernel_settings, threads);
    explain_shared_generator(first, a, b);
    note_first_iteration_step(first, a);
    if (first.contains("value_after_structure") && first["value_after_structure"].is_object()) {
      json& v = first["value_after_structure"];
      // A structural change whose first value difference is a module's train/eval mode (a
      // BatchNorm's running-statistics update runs in training mode only): the mode is the
      // answer, said in the headline.
      const json& arg = v.value("argument", json());
      if (first.value("kind", "") == "structure" && arg.is_object() &&
          arg.value("module_mode", false)) {
        auto mode = [&](const char* key) {
          return arg.value(key, std::string()) == "True" ? "training" : "eval";
        };
        const std::string module =
            v.value("a", json()).is_object() ? v["a"].value("module", std::string()) : "";
        first["detail"] = first.value("detail", std::string()) + "; " +
                          (module.empty() ? std::string("a module") : module) + " runs in " +
                          mode("value_a") + " mode in A and in " + mode("value_b") +
                          " mode in B (model.train() or model.eval() is missing or moved)";
      }
      explain_nondeterministic(v, kernel_settings, threads, /*after_structure=*/true);
      // An "equivalent" rewrite (x / 3 for x * (1 / 3), a sum regrouped): the values that the
      // change carries in differ only in the last bits.
      if (v.value("cause", "") == "structure" && !v.contains("input_beyond_rounding")) {
        const double rounding = rounding_level_difference(v.value("tensor", json()), true);
        if (rounding >= 0) {
          char size[32];
          std::snprintf(size, sizeof(size), "%.1g", rounding);
          v["detail"] = v.value("detail", std::string()) +
                        "; the values differ at rounding level only (relative " + size +
                        "): likely the change computes the same values with float operations "
                        "in another order (a tiny edit of a few elements would read the same)";
          v["rounding_level"] = true;
        }
      }
    }
    // Recorded with a --steps window: "no recorded op produced it" may only mean an op before
    // the window made it.
    const std::string window = a.processes.empty() ? "" : a.processes[0]->meta("steps");
    if (!window.empty()) {
      json* after = first.contains("value_after_structure") ? &first["value_after_structure"] : nullptr;
      // The first step both runs hold: the later of the two windows' starts.
      const int64_t window_start =
          b.processes.empty()
              ? window_first_step(*a.processes[0])
              : std::max(window_first_step(*a.processes[0]), window_first_step(*b.processes[0]));
      for (json* d : {&first, after}) {
        if (d == nullptr || !d->is_object() || d->value("cause", "") != "external_input") continue;
        const json& op = d->value("a", json());
        const bool at_start = op.is_object() && op.value("step", int64_t{-1}) == window_start;
        std::string detail = d->value("detail", std::string());
        // (The cause may have said so already, of the recording's selection.)
        const bool other_windows = b.processes.empty() || window != b.processes[0]->meta("steps");
        if (detail.find("(recorded with --steps") == std::string::npos &&
            detail.find("no op B holds made it") == std::string::npos)
          detail += "; or an op before the recorded --steps window " + window +
                    " made it (ops outside it are not recorded)";
        if (at_start)
          detail += other_windows
                        ? "; this is the first step both recordings hold: most likely the runs "
                          "differed already before it (record both with the same window, "
                          "starting earlier)"
                        : "; this is the window's first step: most likely the runs differed "
                          "already when it began (record both with a window that starts "
                          "earlier)";
        (*d)["detail"] = detail;
      }
    }
    // A run whose earlier ops a ring dropped (or a bundle trimmed): a difference that can come
    // in through the inputs may have been made before the first op held, which the cause
    // alone would pin on this op (a view "of other memory", data "from outside").
    const json& side = first.value("a", json()).is_object() ? first["a"] : first.value("b", json());
    const std::string cause = first.value("cause", std::string());
    // (Not for a bundle's window, cut around the divergence that the whole runs showed.)
    const json& from = first.value("compared_from", json());
    const bool bundle_cut = from.is_object() && from.value("bundle_window", false);
    if (side.is_object() && p < a.processes.size() && first.value("kind", "") == "value" &&
        cause != "arguments" && cause != "rng" && !bundle_cut &&
        first.value("detail", std::string()).find("--ring") == std::string::npos) {
      const TidxRange held = thread_tidx_range(*a.processes[p], side.value("thread", uint32_t{0}));
      if (held.begin > 0)
        first["detail"] = first.value("detail", std::string()) +
                          "; but this thread's recording begins at its op " +
                          std::to_string(held.begin) +
                          " (a --ring kept only the last ops, or a bundle trimmed the earlier "
                          "ones): the runs may have differed before it, in ops not recorded "
                          "(record a longer --ring, or with --steps around the step)";
    }
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (a.processes.size() != b.processes.size() &&
      extra_at < std::max(a.processes.size(), b.processes.size())) {
    // Which processes were left out, by pid and command line (a resumed training's second
    // phase is another process: the user needs to see it was not looked at).
    const bool more_a = a.processes.size() > b.processes.size();
    const tracer::Run& more = more_a ? a : b;
    std::string left;
    size_t listed = 0, unlisted = 0;
    // DataLoader workers left out whose parent is the first process: with num_workers 0 on the
    // other side, that one loads the batches itself.
    size_t loader_workers = 0;
    std::string worker_count;
    const std::string first_pid = more.processes.empty() ? "" : more.processes[0]->meta("pid");
    for (size_t p = extra_at; p < more.processes.size(); ++p) {
      // Compared in its group, as one set.
      const int g = extra_pool(more, p);
      if (g >= 0 && pool_verdicts.count(g)) continue;
      const std::string worker = more.processes[p]->meta("worker");
      if (!worker.empty() && more.processes[p]->meta("ppid") == first_pid) {
        ++loader_workers;
        worker_count = worker.substr(worker.find('/') + 1);
      }
      if (listed == 3) {
        ++unlisted;
        continue;
      }
      ++listed;
      const Reader& r = *more.processes[p];
      std::string command;
      const json argv = json::parse(r.meta("cmdline"), nullptr, false);
      if (argv.is_array())
        for (size_t k = 0; k < argv.size() && k < 6; ++k) {
          if (!argv[k].is_string()) continue;
          const std::string word = argv[k].get<std::string>();
          command += (command.empty() ? "" : " ") + word.substr(word.find_last_of('/') + 1);
        }
      left += (left.empty() ? "" : "; ") + std::string("process ") + std::to_string(more.shown(p)) +
              " (" + (worker.empty() ? "" : "DataLoader worker " + worker + ", ") + "pid " +
              r.meta("pid") + (command.empty() ? "" : ": " + command) + ")";
    }
    if (unlisted > 0) left += "; " + std::to_string(unlisted) + " more";
    // The other run's first process has no DataLoader worker: its loader ran with
    // num_workers 0, loading each batch in the process itself.
    const tracer::Run& fewer = more_a ? b : a;
    bool fewer_has_workers = false;
    for (const auto& r : fewer.processes) fewer_has_workers = fewer_has_workers || !r->meta("worker").empty();
    // The worker count of a run's first process's DataLoader ("" where it started no worker).
    auto first_loader_workers = [](const tracer::Run& run) {
      const std::string pid = run.processes.empty() ? "" : run.processes[0]->meta("pid");
      for (const auto& r : run.processes)
        if (r->meta("ppid") == pid && !r->meta("worker").empty()) return ::tdbg::diff::worker_count(*r);
      return std::string();
    };
    // Both load in workers, but with other worker counts: a DataLoader prefetches
    // prefetch_factor batches per worker, so the sampler's next permutation is drawn at another
    // step (ops that move between optimizer steps, which is no change of the training), and a
    // random op in the dataset draws from each worker's own generator.
    const std::string fewer_count = first_loader_workers(fewer), more_count = first_loader_workers(more);
    const bool other_counts = !fewer_count.empty() && !more_count.empty() && fewer_count != more_count;
    if (other_counts) {
      result["warnings"].push_back(
          std::string("the runs load their DataLoader's batches with another num_workers (") +
          (more_a ? "A " + more_count + ", B " + fewer_count : "A " + fewer_count + ", B " + more_count) +
          "): the loader prefetches batches per worker, so its sampler draws the next epoch's "
          "order at another step, and a random op in the dataset draws from each worker's own "
          "generator (seeded base_seed + worker id); ops that move between optimizer steps are "
          "that, not a change of the training. Record both with the same num_workers to compare "
          "the training");
      // Then ops moved into other optimizer steps are the loader's, not a gradient
      // accumulation condition.
      json& fd = result["first_divergence"];
      if (fd.is_object() && fd.value("detail", json()).is_string()) {
        std::string detail = fd["detail"].get<std::string>();
        const char* loader = "the DataLoader's own ops, with another num_workers (see the warning)";
        if (const size_t at = detail.find(kStepsMoved); at != std::string::npos) {
          detail.replace(at, std::strlen(kStepsMoved), loader);
          fd["detail"] = detail;
        } else if (const size_t at = detail.find(kBlockMoved); at != std::string::npos) {
          // With its steps (": from step 4 in A, step 6 in B"), up to the parenthesis' end.
          const size_t end = detail.find(')', at + std::strlen(kBlockMoved));
          detail.replace(at, end == std::string::npos ? std::string::npos : end - at, loader);
          fd["detail"] = detail;
        }
      }
    }
    // (Not when that run is one database given alone: its workers may just not be given; nor
    // for another program, which may have no DataLoader at all.)
    const bool loaded_elsewhere = loader_workers > 0 && !fewer_has_workers &&
                                  !fewer.processes.empty() && !fewer.one_database &&
                                  !different_programs;
    // Either way the changes are the dataset's ops, run in another process: what they leave
    // differs by where it ran, and a pair of "values left" from them compares unrelated tensors.
    if ((loaded_elsewhere || other_counts) && result["first_divergence"].is_object())
      result["first_divergence"].erase("values_left_differ");
    // A warning, under the headline: it explains the divergence that the headline names.
    if (loaded_elsewhere)
      result["warnings"].push_back(std::string(more_a ? "B" : "A") + " loads its DataLoader's batches in its "
                      "main process (num_workers 0), " + (more_a ? "A" : "B") + " in worker "
                      "processes (num_workers " + worker_count + ", " +
                      std::to_string(loader_workers) + " recorded): the dataset's ops (__getitem__, "
                      "collate) that " + (more_a ? "B" : "A") + "'s main process runs are not in " +
                      (more_a ? "A" : "B") + "'s, which is no divergence of the training itself; "
                      "a random op in the dataset draws from the main process's generator in " +
                      (more_a ? "B" : "A") + " and from each worker's own (seeded base_seed + "
                      "worker id) in " + (more_a ? "A" : "B") + ", so its numbers differ. Record "
                      "both with the same num_workers to compare the training");
    // A later phase left out (a sibling that started after a compared one ended, as a
    // training resumed from a checkpoint by the same script does): this answer says nothing
    // about it, which belongs under the headline, with the command that compares it.
    for (size_t p = extra_at; p < more.processes.size(); ++p) {
      const Reader& later = *more.processes[p];
      for (size_t q = 0; q < extra_at; ++q) {
        if (!later_phase(more, q, p)) continue;
        const Reader& earlier = *more.processes[q];
        // The step it resumed at: the optimizer steps the earlier phase ran.
        const int64_t steps = optimizer_steps(earlier);
        const std::string side = more_a ? "A" : "B", other = more_a ? "B" : "A";
        const std::string k = steps >= 0 ? std::to_string(steps) : "K";
        result["warnings"].push_back(
            side + "'s process " + std::to_string(more.shown(p)) + " (pid " + later.meta("pid") +
            ") started after its process " + std::to_string(more.shown(q)) +
            " ended, as a later phase does (a training resumed from a checkpoint), and was not "
            "compared: this answer is about the earlier phase only. To compare the later phase "
            "with " + other + " from the step it resumed at (it counts its steps from 0 again): "
            "tdbg diff " + (more_a ? later.path() + " " + b.path : a.path + " " + later.path()) +
            " --align-steps " + (more_a ? "0:" + k : k + ":0") +
            (steps >= 0 ? " (" + std::to_string(steps) + ": the optimizer steps process " +
                              std::to_string(more.shown(q)) + " ran)"
                        : " (K: the step it resumed at)"));
        break;
      }
    }
    if (!left.empty())
      notes.push_back("A has " + std::to_string(a.processes.size()) + " recorded process(es), B has " +
                      std::to_string(b.processes.size()) + ": " + std::to_string(processes) +
                      " pair(s) compared (by rank, depth in the process tree, DataLoader worker "
                      "id and start order); not compared, " + (more_a ? "A" : "B") + "'s " + left +
                      " (compare one database with another to pick the pair)");
  }
  {
    // The same recording named twice (a typo in a script's second path): identical, as it
    // must be, but not a comparison of two runs.
    // Also a run directory and its only database (`RUN` and `RUN/vm-1.sqlite`): the same
    // databases on each side.
    auto databases = [](const tracer::Run& run) {
      std::set<std::filesystem::path> paths;
      for (const auto& r : run.processes) {
        std::error_code ec;
        paths.insert(std::filesystem::weakly_canonical(r->path(), ec));
        if (ec) return std::set<std::filesystem::path>();
      }
      return paths;
    };
    std::error_code ec_a, ec_b;
    const std::filesystem::path pa = std::filesystem::weakly_canonical(a.path, ec_a);
    const std::filesystem::path pb = std::filesystem::weakly_canonical(b.path, ec_b);
    const std::set<std::filesystem::path> da = databases(a);
    if ((!ec_a && !ec_b && pa == pb) || (!da.empty() && da == databases(b)))
      result["warnings"].push_back("A and B are the same recording (" + a.path +
                                   "): it is compared with itself");
  }
  result["run_a"] = a.path;
  result["run_b"] = b.path;
  result["processes"] = {{"a", a.processes.size()}, {"b", b.processes.size()}};
  result["threads_compared"] = threads_compared;
  result["chain_probes"] = stats.probes;
  result["ops_compared"] = stats.ops_compared;
  result["elapsed_ms"] = ms;
  // The source lines shown: C++ frames without the lines their binary could have given, and
  // Python files edited since the recording: warnings, under the headline, where the where:
  // line they explain is read (the lines it names may be other statements, or none).
  std::set<std::string> line_notes;
  // Each Python file as each run recorded it (meta `source:<path>`, size:mtime; the first
  // process that has it), to say which run ran another version than the file there now.
  std::map<std::string, std::pair<std::string, std::string>> sources;
  // Likewise each native program's GNU build-id (meta `build_id:<path>`).
  std::map<std::string, std::pair<std::string, std::string>> builds;
  for (const auto* run : {&a, &b})
    for (const auto& r : run->processes) {
      for (const std::string& note : native_line_notes(*r))
        if (line_notes.insert(note).second) result["warnings"].push_back(note);
      for (const auto& [path, identity] : recorded_sources(*r)) {
        std::string& seen = run == &a ? sources[path].first : sources[path].second;
        if (seen.empty()) seen = identity;
      }
      for (const auto& [key, value] : r->all_meta()) {
        if (key.rfind("build_id:", 0) != 0 || value.empty()) continue;
        std::string& seen = run == &a ? builds[key.substr(9)].first : builds[key.substr(9)].second;
        if (seen.empty()) seen = value;
      }
    }
  // Native programs rebuilt between the runs: the same path, other code.
  for (const auto& [path, ids] : builds)
    if (!ids.first.empty() && !ids.second.empty() && ids.first != ids.second)
      result["warnings"].push_back(path + ": A and B ran different builds of it (build-id " +
                                   ids.first.substr(0, 12) + " and " + ids.second.substr(0, 12) +
                                   "): every difference may come from the code");
  for (const auto& [path, seen] : sources) {
    const bool in_a = source_changed(path, seen.first), in_b = source_changed(path, seen.second);
    const bool versions = !seen.first.empty() && !seen.second.empty() && seen.first != seen.second;
    if (in_a || in_b) {
      const std::string which = in_a && in_b ? "the recording of A and of B"
                                : in_a       ? "the recording of A"
                                             : "the recording of B";
      result["warnings"].push_back(
          path + " changed since " + which + ": the source lines shown from it" +
          (in_a && in_b ? "" : in_a ? " for A" : " for B") + " may not be the code that ran" +
          (versions ? " (A and B ran different versions of it)" : ""));
    } else if (versions) {
      notes.push_back(path + ": A and B ran different versions of it (its size or modification "
                      "time differ)");
    }
  }
  // Steps count optimizer.step() calls: in a loop that updates its weights by hand every op is
  // at step 0, which would read as the first iteration.
  auto steps_recorded = [](const tracer::Run& run) {
    bool any = false;
    for (const auto& r : run.processes)
      (void)r->query("SELECT 1 FROM regions WHERE kind = 1 LIMIT 1",
                     [&](const std::vector<std::string>&) { return !(any = true); });
    return any;
  };
  if (result.value("status", std::string()) == "diverged" && !steps_recorded(a) &&
      !steps_recorded(b))
    notes.push_back(
        "neither run called a torch.optim optimizer's step(), which is what tdbg counts as a "
        "step: every op is at step 0 (a loop that updates its weights by hand, or no training), "
        "and the seq numbers place the divergence");
  result["notes"] = notes;
  // A damaged database can read as a thread that ends early, or a text that differs: the
  // answer would be about the damage.
  TDBG_RETURN_IF_ERROR(a.lookup_status());
  TDBG_RETURN_IF_ERROR(b.lookup_status());
  return result;
}

}  // namespace tdbg::diff
