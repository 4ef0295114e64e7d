// The op-block codec: how consecutive ops of one thread, with their tensors and arguments, are
// packed into one BLOB of the `op_blocks` table (docs/schema.md, "Op blocks"), and unpacked.
// One SQLite row per block instead of one per op and tensor is what lets the writer keep up
// with the dispatcher: SQLite costs about a microsecond per row, a block costs that once for
// hundreds of ops. Shared by the writer, the reader and the SQL functions that decode blocks
// for hand-written queries (tracer/sql_functions.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "tracer/records.h"

namespace tdbg::tracer {

// Version of the block encoding, the first byte of every block. Format 2 follows it with an
// XXH3-64 checksum of the rest of the block, so that damage to the file (a zeroed or flipped
// page) is told from data; format 1 (no checksum) is still read. Format 3 adds one tensor
// head bit: summaries as those stored with the same hash earlier in the block (an input that
// is an earlier op's output need not repeat its producer's summaries).
constexpr uint8_t kOpBlockFormat = 3;
// Bytes before the first op of a format-2 or -3 block: the format and the checksum.
constexpr size_t kOpBlockHeaderBytes = 9;

namespace internal {
// What the next op of a block is encoded against (docs/schema.md, "Op blocks"): fields of the
// previous op and of the previous tensor. Shared by the encoder and the decoder.
struct PrevOp {
  int64_t tidx = 0, seq = 0, start = 0, step = 0;
  uint32_t module = 0, stack = 0, region = 0, flags = 0, depth = 0;
  hashing::DType dtype = hashing::DType::kUnknown;
  StringId shape = 0, device = 0;
  // After `op`, whose start relative to the time base is `start`.
  void follow(const OpRecord& op, int64_t relative_start) {
    tidx = op.tidx;
    seq = op.seq;
    start = relative_start;
    step = op.step;
    module = op.module;
    stack = op.stack;
    region = op.region;
    flags = op.flags;
    depth = op.depth;
  }
};
}  // namespace internal

// Builds one block an op at a time, so the writer can end a block when it reaches a size
// (a block that fits in one database page wastes no page space). Ops belong to one thread and
// come in increasing tidx (and so increasing seq). Lossless: the decoder returns exactly the
// ops added, up to the order of tensors (inputs first, then outputs, each by index) and args
// (by index). The encoder keeps pointers to the ops added: they must outlive `finish`.
class OpBlockEncoder {
 public:
  explicit OpBlockEncoder(int64_t time_base_ns) : time_base_ns_(time_base_ns) { clear(); }
  void add(const OpRecord& op);
  // The same, with the op's tensors and args given apart (`op.tensors` and `op.args` unused).
  void add(const OpRecord& op, const TensorRecord* tensors, size_t tensor_count,
           const ArgRecord* args, size_t arg_count);
  size_t ops() const { return ops_; }
  size_t bytes() const { return out_.size(); }
  // The encoded block, its checksum filled in; valid until the next `add` or `clear`.
  std::string_view block();
  // Starts a new, empty block.
  void clear();

 private:
  void add_tensor(const TensorRecord& t, int64_t seq);
  int64_t time_base_ns_;
  std::string out_;
  size_t ops_ = 0;
  internal::PrevOp prev_;
  std::unordered_map<uint64_t, uint32_t> hashes_;  // distinct hashes stored so far: ordinal
  std::vector<hashing::Summary> summaries_;         // by hash ordinal: the last stored with it
  std::vector<TensorRecord> sorted_;
  std::vector<ArgRecord> args_;
};

// Encodes `ops` as one block (a convenience over OpBlockEncoder, for tests).
void EncodeOpBlock(const std::vector<const OpRecord*>& ops, int64_t time_base_ns,
                   std::string* out);

// Whether a block's checksum matches its bytes (formats 2 and 3; a format-1 block has none and
// passes); an error says the block is damaged. Cheaper than decoding (one XXH3 pass).
Status CheckOpBlock(std::string_view block);

// The first op of a (non-empty) block, from its head alone: what a block's row and index
// entries must agree with.
struct OpBlockHead {
  uint32_t thread = 0;
  int64_t tidx = 0, seq = 0;
};
StatusOr<OpBlockHead> ReadOpBlockHead(std::string_view block);

// Decodes a block into `ops` (cleared first). With `with_details` false, tensors and args are
// parsed but not kept (faster). A malformed block, or one whose checksum fails (a damaged
// file), is an error, never a crash.
Status DecodeOpBlock(std::string_view block, int64_t time_base_ns, bool with_details,
                     std::vector<OpRecord>* ops);

}  // namespace tdbg::tracer
