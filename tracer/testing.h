// Synthetic run databases for tests and benchmarks (tracer's own and other folders'): a
// realistic op mix, or ops with names and output hashes chosen by the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "tracer/records.h"
#include "tracer/writer.h"

namespace tdbg::tracer::testing {

// A deterministic pseudo-random stream (splitmix64).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n).
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }

 private:
  uint64_t state_;
};

// Makes the ops of one thread with the mix the writer benchmark and `docs/schema.md` talk
// about: per op 2 inputs (mostly `kKnown`, i.e. outputs of earlier ops or parameters), 1
// float32 output with summaries, an argument on 30 % of ops, nesting, steps, stacks, modules,
// a third of ops in backward. Strings and frames are interned in the writer it is given.
class RealisticOps {
 public:
  RealisticOps(Writer& writer, uint32_t thread, uint64_t seed);
  // The next op of this thread, with process-wide `seq`.
  OpRecord next(int64_t seq);
  // The name of the op `next` returned last.
  const char* last_name() const { return last_name_; }

 private:
  Writer& writer_;
  uint32_t thread_;
  Rng rng_;
  int64_t tidx_ = 0;
  int64_t last_seq_ = kNoSeq;
  uint64_t last_hash_ = 0;
  uint64_t chain_ = 0;
  int64_t clock_ns_ = 0;
  std::vector<StringId> names_, modules_, shapes_, arg_names_, arg_values_;
  std::vector<FrameId> stacks_;
  StringId device_ = 0;
  const char* last_name_ = "";
};

// What `WriteSyntheticRun` writes. Every callback is optional.
struct SyntheticRun {
  int64_t ops = 1000;
  uint32_t threads = 1;  // ops are dealt round-robin to threads 0..threads-1
  uint64_t seed = 1;
  // Op name of each seq; default: the realistic mix's names.
  std::function<std::string(int64_t seq)> name;
  // Hash of output `index` (0) of op `seq`; default: the realistic mix (pseudo-random).
  std::function<uint64_t(int64_t seq)> output_hash;
  // Tensor records per op: 3 = the realistic mix (2 inputs, 1 output), 1 = the output only,
  // 0 = none. Fewer tensors write faster (10^7 ops: use 1 or 0); the output hash always
  // enters the chain.
  int tensors = 3;
  bool args = true;  // an argument on 30 % of ops, as in the realistic mix
  // Extra meta (e.g. {"pid", "42"}); `format` and the schema are always written.
  std::vector<std::pair<std::string, std::string>> meta;
  WriterOptions writer;
};

// Creates the database `path` (which must not exist) and writes `run` into it. The chain
// hash of each op mixes its name and output hash with the previous chain of its thread, so
// runs that differ from some op on differ in their chains from that op on.
Status WriteSyntheticRun(const std::string& path, const SyntheticRun& run);

// The chain step used above: exposed so tests can predict chain values.
uint64_t SyntheticChain(uint64_t previous, const std::string& name, uint64_t output_hash);

}  // namespace tdbg::tracer::testing
