// Synthetic run databases: see tracer/testing.h.
#include "tracer/testing.h"

#include <time.h>

#include <unordered_map>

namespace tdbg::tracer::testing {
namespace {

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t string_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable, and enough for a test chain
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

const char* const kOpNames[] = {"aten::addmm",
                                "aten::relu",
                                "aten::mm",
                                "aten::add",
                                "aten::mul",
                                "aten::t",
                                "aten::view",
                                "aten::linear",
                                "aten::layer_norm",
                                "aten::softmax",
                                "aten::gelu",
                                "aten::native_layer_norm",
                                "aten::native_layer_norm_backward",
                                "aten::mm_backward",
                                "aten::threshold_backward",
                                "aten::sum",
                                "aten::mean",
                                "aten::div",
                                "aten::sub",
                                "aten::copy_",
                                "aten::empty",
                                "aten::zeros_like",
                                "aten::add_",
                                "aten::mul_",
                                "aten::addcmul_",
                                "aten::addcdiv_",
                                "aten::sqrt",
                                "aten::transpose",
                                "aten::reshape",
                                "aten::expand",
                                "aten::cat",
                                "aten::embedding",
                                "aten::dropout",
                                "aten::bmm",
                                "aten::baddbmm",
                                "aten::log_softmax",
                                "aten::nll_loss_forward",
                                "aten::nll_loss_backward",
                                "aten::_to_copy",
                                "aten::detach"};

}  // namespace

uint64_t SyntheticChain(uint64_t previous, const std::string& name, uint64_t output_hash) {
  return mix(mix(previous, string_hash(name)), output_hash);
}

RealisticOps::RealisticOps(Writer& writer, uint32_t thread, uint64_t seed)
    : writer_(writer), thread_(thread), rng_(seed * 7919 + thread) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  clock_ns_ = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  for (const char* n : kOpNames) names_.push_back(writer.intern(n));
  for (int i = 0; i < 24; ++i) {
    modules_.push_back(
        writer.intern("model.blocks." + std::to_string(i / 4) + ".layer" + std::to_string(i % 4)));
  }
  for (int i = 0; i < 32; ++i) {
    shapes_.push_back(
        writer.intern(std::to_string(32 << (i % 4)) + "x" + std::to_string(64 * (1 + i / 4))));
  }
  for (const char* a : {"alpha", "beta", "dim", "keepdim", "p", "eps"}) {
    arg_names_.push_back(writer.intern(a));
  }
  for (const char* v : {"1", "0.5", "-1", "True", "False", "1e-05", "0.1", "[1]"}) {
    arg_values_.push_back(writer.intern(v));
  }
  device_ = writer.intern("cpu");
  StringId file = writer.intern("/home/user/train.py");
  StringId torch_file = writer.intern("/usr/lib/python3/dist-packages/torch/nn/modules/linear.py");
  for (int i = 0; i < 64; ++i) {
    FrameId outer = writer.intern_frame(0, file, 100 + i, writer.intern("train_step"));
    FrameId inner = writer.intern_frame(outer, torch_file, 114, writer.intern("forward"));
    stacks_.push_back(inner);
  }
}

OpRecord RealisticOps::next(int64_t seq) {
  OpRecord op;
  op.seq = seq;
  op.thread = thread_;
  op.tidx = tidx_++;
  const uint64_t r = rng_.next();
  op.depth = static_cast<uint16_t>(r % 3);
  if (op.depth > 0 && last_seq_ != kNoSeq) op.parent = last_seq_ - static_cast<int64_t>(r % 2);
  const size_t name = rng_.below(names_.size());
  op.name = names_[name];
  last_name_ = kOpNames[name];
  op.step = op.tidx / 2000;
  op.module = modules_[(op.tidx / 50) % modules_.size()];
  const size_t frame = rng_.below(stacks_.size());
  op.stack = stacks_[frame];
  op.user_frame = stacks_[frame];
  const bool backward = (op.tidx % 3) == 2;
  if (backward) {
    op.flags |= kOpBackward;
    op.fwd = seq - 1 - static_cast<int64_t>(rng_.below(600));
    if (op.fwd < 0) op.fwd = kNoSeq;
  }
  clock_ns_ += 1000 + static_cast<int64_t>(rng_.below(4000));
  op.start_ns = clock_ns_;
  op.end_ns = clock_ns_ + 500 + static_cast<int64_t>(rng_.below(30000));
  const StringId shape = shapes_[rng_.below(shapes_.size())];
  // Input 0: the previous op's output, known by its hash. Input 1: a parameter (known, made
  // long ago) or, one time in three, a tensor hashed here.
  TensorRecord in0;
  in0.role = TensorRole::kInput;
  in0.index = 0;
  in0.dtype = hashing::DType::kFloat32;
  in0.shape = shape;
  in0.device = device_;
  in0.status = last_seq_ == kNoSeq ? TensorStatus::kHashed : TensorStatus::kKnown;
  in0.hash = last_hash_ ? last_hash_ : rng_.next();
  in0.producer = last_seq_;
  op.tensors.push_back(in0);
  TensorRecord in1 = in0;
  in1.index = 1;
  in1.shape = shapes_[rng_.below(shapes_.size())];
  if (rng_.below(3) == 0) {
    in1.status = TensorStatus::kHashed;
    in1.hash = rng_.next();
    in1.producer = kNoSeq;
    in1.summary.valid = true;
    // A float32 tensor's min and max are float32 values; its sums are accumulated in double.
    in1.summary.min = static_cast<float>(-1.0 - static_cast<double>(rng_.below(1000)) / 997.0);
    in1.summary.max = static_cast<float>(1.0 + static_cast<double>(rng_.below(1000)) / 991.0);
    in1.summary.sum = static_cast<double>(static_cast<int64_t>(rng_.below(200000)) - 100000) / 7.0;
    in1.summary.abs_sum = static_cast<double>(rng_.below(1000000)) / 3.0;
  } else {
    in1.status = TensorStatus::kKnown;
    in1.hash = mix(0x5EED, rng_.below(64));  // one of 64 parameters
    in1.producer = static_cast<int64_t>(rng_.below(64));
    if (in1.producer >= seq) in1.producer = kNoSeq;
  }
  op.tensors.push_back(in1);
  TensorRecord out;
  out.role = TensorRole::kOutput;
  out.index = 0;
  out.dtype = hashing::DType::kFloat32;
  out.shape = shape;
  out.device = device_;
  out.status = TensorStatus::kHashed;
  out.hash = rng_.next();
  out.summary.valid = true;
  out.summary.min = static_cast<float>(-static_cast<double>(rng_.below(100000)) / 1013.0);
  out.summary.max = static_cast<float>(static_cast<double>(rng_.below(100000)) / 1009.0);
  out.summary.sum = static_cast<double>(static_cast<int64_t>(rng_.below(2000000)) - 1000000) / 17.0;
  out.summary.abs_sum = static_cast<double>(rng_.below(20000000)) / 13.0;
  op.tensors.push_back(out);
  if (rng_.below(10) < 3) {
    op.args.push_back(ArgRecord{static_cast<uint16_t>(1 + rng_.below(3)),
                                arg_names_[rng_.below(arg_names_.size())],
                                arg_values_[rng_.below(arg_values_.size())]});
  }
  chain_ = mix(mix(chain_, op.name), out.hash);
  op.chain = chain_;
  last_seq_ = seq;
  last_hash_ = out.hash;
  return op;
}

Status WriteSyntheticRun(const std::string& path, const SyntheticRun& run) {
  TDBG_ASSIGN_OR_RETURN(auto writer, Writer::Create(path, run.writer));
  for (auto& [k, v] : run.meta) writer->set_meta(k, v);
  const uint32_t threads = run.threads == 0 ? 1 : run.threads;
  std::vector<RealisticOps> gens;
  std::vector<uint64_t> chains(threads, 0);
  gens.reserve(threads);
  for (uint32_t t = 0; t < threads; ++t) {
    gens.emplace_back(*writer, t, run.seed);
    writer->add_thread(
        ThreadRecord{t, 1000 + t, t == 0 ? "MainThread" : "thread" + std::to_string(t)});
  }
  std::unordered_map<std::string, StringId> name_ids;
  for (int64_t seq = 0; seq < run.ops; ++seq) {
    const uint32_t t = static_cast<uint32_t>(seq % threads);
    OpRecord op = gens[t].next(seq);
    if (run.name || run.output_hash) {
      std::string name;
      if (run.name) {
        name = run.name(seq);
        auto it = name_ids.find(name);
        op.name = it != name_ids.end() ? it->second : name_ids[name] = writer->intern(name);
      } else {
        name = gens[t].last_name();
      }
      if (run.output_hash) op.tensors.back().hash = run.output_hash(seq);
      chains[t] = SyntheticChain(chains[t], name, op.tensors.back().hash);
      op.chain = chains[t];
    }
    if (run.tensors <= 0) {
      op.tensors.clear();
    } else if (run.tensors < static_cast<int>(op.tensors.size())) {
      op.tensors.erase(op.tensors.begin(), op.tensors.end() - run.tensors);
    }
    if (!run.args) op.args.clear();
    writer->append_op(std::move(op));
  }
  return writer->close();
}

}  // namespace tdbg::tracer::testing
