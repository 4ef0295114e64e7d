// Internals of the diff engine shared by `compare_runs`, `first_nonfinite` and the tests:
// interned-string caches, a windowed op cursor over one thread, op signatures and op-to-op
// comparison, and the JSON pieces that describe ops and tensors.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tracer/reader.h"

namespace tdbg::diff {

// Text and a process-local hash of a database's interned strings, memoized: string ids are
// private to one database, so two runs are compared through the text, never the id.
class Strings {
 public:
  explicit Strings(const tracer::Reader& reader) : reader_(reader) {}
  const std::string& text(tracer::StringId id);
  uint64_t hash(tracer::StringId id);
  // For a tensor's shape text ("16x16" or "16x16 strides 1x16"): the hash of the sizes alone.
  uint64_t shape_hash(tracer::StringId id);

 private:
  struct Entry {
    std::string text;
    uint64_t hash = 0;
    uint64_t shape_hash = 0;  // of the text before " strides "
  };
  const Entry& get(tracer::StringId id);
  const tracer::Reader& reader_;
  std::unordered_map<tracer::StringId, Entry> entries_;
};

// True when a tensor record's hash stands for its contents (uninitialized, skipped and
// unhashable tensors never count as a difference).
bool tensor_comparable(const tracer::TensorRecord& t);

// The structural identity of an op: its name and, for every tensor, role, dtype and shape,
// and the number of non-tensor arguments. Equal signatures mean "the same op at this place";
// values (hashes, argument values, generator state) and memory layouts (strides) are compared
// separately.
uint64_t op_signature(const tracer::OpRecord& op, Strings& strings);

// The kind of an op: its signature without the tensors' shapes. Ops of one kind that differ
// in signature ran the same code on other sizes (a batch split into more micro-batches, a
// longer sequence).
uint64_t op_kind(const tracer::OpRecord& op, Strings& strings);

// What an op did, wherever it ran: its signature, the hashes of its comparable tensors that are
// not views (as `compare_ops` compares them), its argument texts and its generator state. For
// comparing sets of ops whose order is not the program's (work handed to a pool of workers).
uint64_t op_content(const tracer::OpRecord& op, Strings& strings);

// A random op whose outputs are single integers (`torch.empty((), dtype=torch.int64).random_()`,
// DataLoader's base seed for its workers): a seed drawn for the program to read, not data.
bool seed_draw(const tracer::OpRecord& op, Strings& strings);

// An op's scalar arguments (names and texts), 0 where it has none.
uint64_t op_args(const tracer::OpRecord& op, Strings& strings);

// How two ops at aligned positions differ. Indices point into each op's `tensors`/`args`.
struct OpComparison {
  std::string structure;  // non-empty: why the two are different ops (name, dtype, shape...)
  int input = -1;         // first differing comparable input tensor
  int output = -1;        // first differing comparable output tensor
  int arg = -1;           // first differing non-tensor argument
  bool rng = false;       // random op whose generator state differs
  int layout = -1;        // first tensor with the same shape and other strides
  // First input that is a view in one run and hashed data in the other: made another way.
  // Views are not compared by hash, so this alone does not make the ops differ.
  int provenance = -1;
  // First input that is a view in both runs with another view hash: a view of other memory
  // (another slice or offset, or a view of another tensor). Not a difference by itself either.
  int view = -1;
  // The inputs are the same tensors in another order (`x + f(x)` against `f(x) + x`) and every
  // comparable output is equal: not a difference (`input` and `layout` are cleared).
  bool permuted = false;
  // Every argument that differs means the same for the op's first input another way
  // (`dim=-1` against `dim=1` of a 2-D tensor, `dtype=None` against the input's own dtype),
  // and no comparable output differs: not a difference (`arg` is cleared).
  bool args_spelled = false;
  // One of the two did not finish (the process ended inside it): only inputs and arguments
  // were compared.
  bool unfinished = false;
  bool differs() const {
    return !structure.empty() || input >= 0 || output >= 0 || arg >= 0 || rng || layout >= 0;
  }
};
OpComparison compare_ops(const tracer::OpRecord& a, Strings& sa, const tracer::OpRecord& b,
                         Strings& sb);

// The ops of one thread of one database, read in batches through `Reader::scan_ops` and kept
// in a sliding window: random access near the current position without loading the run.
class OpCursor {
 public:
  // Ops with tidx in [begin, count).
  OpCursor(const tracer::Reader& reader, Strings& strings, uint32_t thread, int64_t count,
           int64_t begin = 0);
  int64_t count() const { return count_; }
  // The op at `tidx`, or nullptr past the end or on a read error (see `status`). The pointer
  // stays valid until `release_before` passes it.
  const tracer::OpRecord* at(int64_t tidx);
  uint64_t signature_at(int64_t tidx);  // 0 past the end
  // Frees ops before `tidx`: the caller will not ask for them again (it may, at a reload).
  void release_before(int64_t tidx);
  // True when `tidx` is in the window (or past the end: nothing to read).
  bool has(int64_t tidx) const {
    return tidx >= count_ || (tidx >= base_ && tidx < base_ + static_cast<int64_t>(ops_.size()));
  }
  // Reads the next batch after the window (the one holding `tidx` after a jump).
  void read_ahead(int64_t tidx) { load(std::max(tidx, base_ + static_cast<int64_t>(ops_.size()))); }
  const Status& status() const { return status_; }

 private:
  bool load(int64_t tidx);
  const tracer::Reader& reader_;
  Strings& strings_;
  uint32_t thread_;
  int64_t count_;
  int64_t begin_;     // the first tidx the database holds
  int64_t base_ = 0;  // tidx of ops_.front()
  int64_t batch_ = 16;  // ops read by the next `scan_ops` call
  std::deque<tracer::OpRecord> ops_;
  std::deque<uint64_t> signatures_;
  Status status_;
};

// JSON pieces (documented in docs/cli.md).
std::string hex64(uint64_t value);
// A recorded argument's text as people write it: a floating-point number, recorded with 17
// significant digits so that it reads back exactly ("-0.40000000000000002"), in the shortest
// form that reads back the same ("-0.4", as Python prints it); any other text as it is.
std::string number_text(const std::string& text);
// An argument's value as the tools print it: `number_text`, with the name of an enum that
// torch passes as a number ("reduction" 1 reads "1 (mean)").
std::string argument_text(const std::string& name, const std::string& value);
nlohmann::json summary_json(const hashing::Summary& s);
// Relative difference |x - y| / max(|x|, |y|, scale), 0 when equal: in [0, 2]. `scale`, the
// size of what x and y are part of, keeps values near 0 from reading as large differences.
double relative_difference(double x, double y, double scale = 0);
// The relative differences of two tensors' summaries, each against the tensors' own size (a
// sum that cancels to about 0, a gradient of softmax - onehot, is not a large difference when
// it moves by 1e-8): min and max against the largest magnitude of either tensor, sum against
// the larger abs_sum, abs_sum against itself.
struct SummaryDifferences {
  double min = 0, max = 0, sum = 0, abs_sum = 0;
};
SummaryDifferences summary_differences(const hashing::Summary& a, const hashing::Summary& b);
// Largest of `summary_differences`; 2 when non-finite counts differ; -1 when either summary
// is invalid.
double summary_distance(const hashing::Summary& a, const hashing::Summary& b);

// The largest relative difference that rounding makes (another kernel, another summation
// order) in a tensor of `dtype` (its name, as `hashing::dtype_name` gives it); -1 for a dtype
// that does not round (integers, bool).
double rounding_limit(std::string_view dtype);

// The machine epsilon of `dtype` (its name): the distance from 1 to the next value, 2^-23 for
// float32; 0 for a dtype that does not round.
double dtype_epsilon(std::string_view dtype);

// The largest relative difference that the same values computed with float operations in
// another order make where a change carries them in, in a tensor of `dtype`: 16 roundings
// (float32: 1.9e-6), at most `rounding_limit`. Tighter than what another kernel makes after
// many ops: one element of a hundred moved by 5e-4 moves the sum of values near 1 by 5e-6,
// and summaries cannot tell that from rounding below it.
double reorder_limit(std::string_view dtype);

// A frame as {file, line, function}. A native frame of a C++ program whose line its binary's
// debug info gives (native_lines.h) is {file: the source file, line, function, binary, offset,
// inlined?}: "binary" and "offset" are what was recorded, "inlined" the functions inlined at
// that call, innermost first.
nlohmann::json frame_json(const tracer::Reader& reader, Strings& strings, tracer::FrameId id);
// A source frame as text. Python frames: "train.py:12" ("/path/train.py:12 in <module>" with
// `brief` false). Native frames of a C++ program are read with their line where the
// binary gives it: "shape_error.cpp:18" ("/path/shape_error.cpp:18 in Net::forward"), else
// they have no line (0) and a function "NAME +0xOFFSET": "Net::forward (train_cpp)" in brief
// (the parameters and offset left out), else "/path/train_cpp in Net::forward(at::Tensor) +0x4adb".
std::string frame_text(const std::string& file, int64_t line, const std::string& function,
                       bool brief);
// Whether `path` is Python's own or an installed package's (torch, the standard library,
// site- and dist-packages): not the user's code.
bool python_library_path(const std::string& path);
// The text of frame `id` of `reader`'s database (`frame_text`, with the native line where
// there is one); "" for no frame.
std::string frame_source_text(const tracer::Reader& reader, Strings& strings, tracer::FrameId id,
                              bool brief);
// {seq, thread, tidx, op, step, depth, module, backward, random, source, stack, enclosing}.
// Backward ops without a stack borrow their forward op's (`source_from_forward`).
nlohmann::json op_json(const tracer::Reader& reader, Strings& strings, const tracer::OpRecord& op);
// One line of context: {seq, tidx, op, depth, step, module, source: "file:line"}.
nlohmann::json op_brief_json(const tracer::Reader& reader, Strings& strings,
                             const tracer::OpRecord& op);
nlohmann::json tensor_json(Strings& strings, const tracer::TensorRecord& t);

// The seq of the forward op that a backward op differentiates: its own `fwd`, else that of the
// autograd node it runs inside (up to 8 enclosing ops); kNoSeq if none.
int64_t forward_seq_of(const tracer::Reader& reader, const tracer::OpRecord& op);

// An op named with its line, "aten::add at train.py:7" (its name alone where it has none, and
// "(forward op's line)" for an op autograd ran): op numbers alone would send the user to
// `tdbg show`.
std::string op_at_source(const tracer::Reader& reader, Strings& strings, const tracer::OpRecord& op);

// With several optimizers, the ops of the first iteration after the first optimizer's first
// step() count as step 1 (docs/recording.md, steps): whether op `seq` of step `step` is one of
// them, for a user who reads "step 1" as the loop's second pass (a GAN's generator update of
// iteration 0). Several optimizers show as more step regions in step 1 (the other's first
// step, then a step of each) than in step 0.
bool in_first_iteration(const tracer::Reader& reader, int64_t step, int64_t seq);

// The optimizer-step regions (`Optimizer.step#...`) that ended, of `thread` or of every thread,
// by the step they ran in (several optimizers: several regions a step), each step's in the
// order they began.
std::map<int64_t, std::vector<tracer::RegionRecord>> step_regions(
    const tracer::Reader& reader, std::optional<uint32_t> thread = std::nullopt);

// The ops of `regions` (one step's), each region's own thread's, in order, with their tensors;
// false when reading fails.
bool ops_in_regions(const tracer::Reader& reader, const std::vector<tracer::RegionRecord>& regions,
                    std::vector<tracer::OpRecord>* ops);

// The input that output `view` of view op `op` looks at: the input at the view's index where
// the op has one there of the view's dtype (`broadcast_tensors(a, b)` and `meshgrid` return a
// view of each input, in order), else its first (`split`, `t`, `view_as(other)`: views of input 0);
// only inputs `usable` accepts count. nullptr when none does.
const tracer::TensorRecord* viewed_input(const tracer::OpRecord& op,
                                         const tracer::TensorRecord& view,
                                         bool (*usable)(const tracer::TensorRecord&));

// Why input `t` brings no values into its op although they were not recorded, or "":
// "undefined" (an optional tensor passed as None, such as a loss's `weight` or a conv's bias),
// or "overwritten" (a buffer the op writes without reading it: an `out=` argument, `self` of
// `fill_`). Neither is one of the op's inputs in the sense of where values come from.
const char* never_read(Strings& strings, const tracer::TensorRecord& t);

// An input hashed where it was read from memory an op of the `empty` family returned
// uninitialized, that no recorded op wrote since (`tracer::kReasonUninitializedRead`).
bool uninitialized_read(Strings& strings, const tracer::TensorRecord& t);
// The op that returned that memory, as the hook recorded it; for a record without it, the
// last `empty`-family op before `op` on its thread, within 65,536 ops, with an output of `t`'s
// dtype and shape.
std::optional<tracer::OpRecord> uninitialized_maker(const tracer::Reader& r, Strings& strings,
                                                    const tracer::OpRecord& op,
                                                    const tracer::TensorRecord& t);

// Whether `t` is its process's main thread: the one whose OS id is the process's pid.
bool is_main_thread(const tracer::Reader& r, const tracer::ThreadRecord& t);

// The last collective op (`c10d::`) of `thread` before its op `tidx`, at most 4,096 ops back:
// in a rank's process, what brought in values that no recorded op made there.
std::optional<tracer::OpRecord> last_collective_before(const tracer::Reader& r, Strings& strings,
                                                       uint32_t thread, int64_t tidx);

// One line for each Python source file the recorded stacks point into that changed since the
// recording (meta `source:<path>`: its size and modification time then): the lines shown from
// it may not be the code that ran.
std::vector<std::string> changed_source_notes(const tracer::Reader& reader);
// Each Python file the process recorded a frame of, with its identity then (meta
// `source:<path>`: "size:mtime_ns"), by path.
std::vector<std::pair<std::string, std::string>> recorded_sources(const tracer::Reader& reader);
// The notes on the source lines shown from `reader`'s frames: `native_line_notes` (C++ binaries
// without lines) and `changed_source_notes` (Python files edited since).
std::vector<std::string> source_line_notes(const tracer::Reader& reader);
// Whether the file at `path` is no longer the one recorded as `identity` (a `source:<path>`
// meta value, "SIZE:MTIME_NS"); false when the file is gone or nothing was recorded.
bool source_changed(const std::string& path, const std::string& identity);

// A tensor's recorded `reason` as a user reads it: the hook names the op that returned
// uninitialized memory by its distance back from the reading op `op_seq` (" (seq -6)", so that
// the text interns once for every read); this gives that op's own seq (" (seq 6)").
std::string reason_text(const std::string& reason, int64_t op_seq);

// Which process of `run` is number `p`, for a run of several: {index, path, pid, rank, worker,
// text} (rank and worker where the process has them).
nlohmann::json process_json(const tracer::Run& run, size_t p);

}  // namespace tdbg::diff
