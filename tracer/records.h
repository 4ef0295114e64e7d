// The records of a run database, as the writer takes them and the reader returns them.
// Shared by tracer/writer.h and tracer/reader.h; the on-disk form is in docs/schema.md.
// Enum values are stored in the database: they are fixed forever, add new ones at the end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hashing/tensor_hash.h"

namespace tdbg::tracer {

// Version of the database schema, stored as `PRAGMA user_version`. A reader rejects a newer one.
constexpr int kSchemaVersion = 2;

// Ids of interned strings (`strings` table). 0 means "none".
using StringId = uint32_t;
// Ids of interned frames (`frames` table); a stack is named by its innermost frame. 0 is none.
using FrameId = uint32_t;
constexpr int64_t kNoSeq = -1;

enum class TensorRole : uint8_t { kInput = 0, kOutput = 1 };

// What the `hash` of a tensor record means.
enum class TensorStatus : uint8_t {
  kHashed = 0,         // hashed now (tdbg-hash v1); summaries valid for floating dtypes
  kKnown = 1,          // the same tensor, unchanged, as `producer`'s output: hash copied, not recomputed
  kView = 2,           // a view/alias of a known tensor: hash derived from the base's hash and the view geometry
  kUninitialized = 3,  // memory with no defined contents (aten::empty...): never compared
  kNotHashed = 4,      // cannot be hashed (sparse, quantized, meta, ...): `reason` says why
  kSkipped = 5,        // hashing turned off by configuration
};

// `TensorRecord::reason` of an input the op overwrites without reading it (an `out=` buffer):
// its old contents carry nothing into the op.
inline constexpr char kReasonOverwritten[] = "overwritten by the op without being read";

// `TensorRecord::reason` of an input hashed where it was read (`kHashed`, no producer) whose
// memory an op of the `empty` family returned uninitialized, and that no recorded op wrote
// since: garbage, unless the program filled it outside torch's ops (a write through
// `.numpy()` or `data_ptr`). The text goes on with " (seq -N)": that op is N ops (by seq)
// before the reading one, a distance that repeats from step to step, so the texts stay few.
inline constexpr char kReasonUninitializedRead[] =
    "memory returned uninitialized by an empty-family op; no recorded op wrote it";

// The name of a `TensorStatus` as the tools print it and the `enums` table stores it
// (tracer_test checks that the two agree).
inline const char* tensor_status_name(TensorStatus status) {
  switch (status) {
    case TensorStatus::kHashed: return "hashed";
    case TensorStatus::kKnown: return "known";
    case TensorStatus::kView: return "view";
    case TensorStatus::kUninitialized: return "uninitialized";
    case TensorStatus::kNotHashed: return "not_hashed";
    case TensorStatus::kSkipped: return "skipped";
  }
  return "unknown";
}

enum class RegionKind : uint8_t {
  kUser = 0,       // torch.autograd.profiler.record_function("...") and other user ranges
  kStep = 1,       // an optimizer step (Optimizer.step#... ranges)
  kModule = 2,     // an nn.Module forward call
  kOptimizer = 3,  // a Python optimizer's settings at a step: a child of the step region whose
                   // name is a JSON object (docs/schema.md)
};

// Bits of `OpRecord::flags`.
enum OpFlags : uint32_t {
  kOpBackward = 1u << 0,       // run by autograd (a backward function or an op inside one)
  kOpRandom = 1u << 1,         // draws from a random generator; `rng` is its state's hash
  kOpInplace = 1u << 2,        // mutates an input
  kOpCollective = 1u << 3,     // a collective communication op
  kOpUninitOutput = 1u << 4,   // returns uninitialized memory by contract
  kOpUnfinished = 1u << 5,     // the process ended (a crash, an abort) while inside it: no outputs
  kOpRaised = 1u << 6,         // ended by an exception (an error raised inside it): no outputs
  // With kOpUnfinished: the process ended while tdbg read the op's inputs (their memory could
  // not be read); the inputs and arguments after those recorded are missing.
  kOpInputsIncomplete = 1u << 7,
};

struct TensorRecord {
  TensorRole role = TensorRole::kOutput;
  uint16_t index = 0;          // position among the op's tensor inputs or outputs (tensor lists flattened)
  hashing::DType dtype = hashing::DType::kUnknown;
  StringId shape = 0;          // interned "2x3x4"; "" for 0-dim
  StringId device = 0;         // interned "cpu", "cuda:0", ...
  TensorStatus status = TensorStatus::kHashed;
  uint64_t hash = 0;
  int64_t producer = kNoSeq;   // seq of the op whose output this input is, if recorded
  hashing::Summary summary;
  StringId reason = 0;         // why not hashed (kNotHashed)
};

struct ArgRecord {
  uint16_t index = 0;          // position in the op's schema
  StringId name = 0;           // schema argument name, e.g. "alpha"
  StringId value = 0;          // canonical text, e.g. "0.01", "[2, 3]", "float32", "None"
};

struct OpRecord {
  int64_t seq = 0;             // process-wide order of op start, from 0
  uint32_t thread = 0;         // tdbg thread id (order of first op), see `ThreadRecord`
  int64_t tidx = 0;            // ordinal of the op within its thread, from 0
  int64_t parent = kNoSeq;     // seq of the enclosing op
  uint16_t depth = 0;          // 0 for top-level ops
  StringId name = 0;           // "aten::addmm"
  int64_t step = 0;            // optimizer steps completed before this op started
  StringId module = 0;         // nn.Module path, "model.blocks.1.attn"
  FrameId stack = 0;           // innermost frame of the Python (or C++) stack
  FrameId user_frame = 0;      // innermost frame outside torch and the standard library
  int64_t fwd = kNoSeq;        // for backward ops: seq of the forward op they differentiate
  uint32_t region = 0;         // innermost user region (`RegionRecord::id`), 0 if none
  int64_t start_ns = 0;        // CLOCK_MONOTONIC
  int64_t end_ns = 0;
  uint64_t chain = 0;          // running chain hash of this thread's ops up to and including this one
  uint64_t rng = 0;            // hash of the generator state before a random op, 0 otherwise
  uint32_t flags = 0;          // `OpFlags`
  std::vector<TensorRecord> tensors;
  std::vector<ArgRecord> args;
};

struct ThreadRecord {
  uint32_t id = 0;
  int64_t os_tid = 0;
  std::string name;
};

// `FrameRecord::file` of a frame in TorchScript's builtin code (`2.0 * x` runs its `def
// mul(a: float, b: Tensor)`), which TorchScript inlines without the line that called it; the
// frame's function is "mul (in forward)": the builtin, and the scripted function that called it.
inline constexpr char kScriptBuiltinFile[] = "<TorchScript builtin>";

struct FrameRecord {
  FrameId id = 0;
  FrameId parent = 0;          // the caller's frame, 0 at the outermost
  StringId file = 0;
  int32_t line = 0;
  StringId function = 0;
};

struct RegionRecord {
  uint32_t id = 0;
  uint32_t thread = 0;
  StringId name = 0;
  RegionKind kind = RegionKind::kUser;
  int64_t start_seq = 0;       // first op seq inside the region
  int64_t end_seq = kNoSeq;    // last op seq inside, kNoSeq while open
  int64_t step = 0;
  uint32_t parent = 0;
};

// A compiled GPU module seen by the interposer (cubin, fatbin, PTX, NVRTC program).
struct ModuleRecord {
  uint32_t id = 0;
  StringId kind = 0;           // "cubin", "fatbin", "ptx", "nvrtc"
  StringId name = 0;
  uint64_t hash = 0;           // XXH3 of the image
  int64_t size = 0;
  int64_t time_ns = 0;
};

struct KernelRecord {
  int64_t op = kNoSeq;         // seq of the op that launched it
  uint32_t module = 0;
  StringId name = 0;
  StringId grid = 0;           // "x,y,z"
  StringId block = 0;
  int64_t shared_mem = 0;
  uint64_t stream = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

}  // namespace tdbg::tracer
