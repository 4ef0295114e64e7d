// End-to-end tests of the diff engine on synthetic runs written with the real tracer::Writer
// and read back with tracer::Run: a tiny simulated training loop whose ops pass values along,
// so that one change (a seed, a learning rate, a data value, an extra op) spreads like it
// does in a real run.
#include "tlparse/diff/diff.h"

#include <dlfcn.h>
#include <sqlite3.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "base/elf_identity.h"
#include "tlparse/diff/mlp_step_testdata.h"
#include "tlparse/diff/native_lines.h"
#include "tlparse/diff/ops.h"
#include "tlparse/diff/optimizer_settings.h"
#include "tlparse/diff/updates.h"
#include "tracer/reader.h"
#include "tracer/test_dir.h"
#include "tracer/writer.h"

namespace fs = std::filesystem;
using nlohmann::json;
using tdbg::hashing::DType;
using tdbg::tracer::kNoSeq;
using tdbg::tracer::OpRecord;
using tdbg::tracer::TensorRecord;
using tdbg::tracer::TensorRole;
using tdbg::tracer::TensorStatus;

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 29);
}

// A fresh directory inside one temporary root that is removed, with every run in it, when the
// test program exits.
fs::path temp_dir() {
  static tdbg::tracer::testing::TempDir root;
  static int counter = 0;
  fs::path p = fs::path(root.path()) / std::to_string(counter++);
  fs::create_directories(p);
  return p;
}

// What differs in the simulated run, relative to the default.
struct Variation {
  int steps = 60;
  uint64_t seed = 1;
  int seed_change_step = -1;        // from this step on the generator is reseeded (rng)
  int lr_change_step = -1;          // learning rate differs from this step (arguments)
  int data_change_step = -1;        // one input batch differs (external_input)
  int nondeterministic_step = -1;   // addmm's output differs, inputs equal (nondeterministic)
  double nondeterministic_sum = 1;  // the sum of that differing output (the other run's is 1)
  bool inputs_known = false;        // linear's inputs carry their producer's hash (status known)
  int other_algorithm_step = -1;    // addmm runs extra nested ops and its output differs
  int insert_step = -1;             // an extra op after linear (structure)
  bool insert_changes_values = true;
  int remove_step = -1;             // the gelu op is missing (structure)
  int replace_step = -1;            // relu instead of gelu (structure)
  int batch_change_step = -1;       // the batch has another shape (structure)
  int layout_change_step = -1;      // gelu's input is laid out otherwise, its output differs
  int inf_step = -1;                // the loss becomes Inf
  int nan_in_child_step = -1;       // addmm (inside linear) produces NaN
  int uninitialized_noise = 0;      // aten::empty outputs with random contents, never compared
  bool chain_covers_uninitialized = false;
  int extra_steps = 0;              // more steps at the end (trailing ops)
};

// Writes one thread's ops, computing what the tracer computes: seq, tidx, the chain hash.
class Recorder {
 public:
  // `os_tid`: the thread's OS id (-1: 1000 + thread).
  Recorder(tdbg::tracer::Writer& w, uint32_t thread, int64_t* next_seq, int64_t os_tid = -1)
      : w_(w), thread_(thread), next_seq_(next_seq) {
    w_.add_thread({thread, os_tid >= 0 ? os_tid : 1000 + thread, thread == 0 ? "main" : "worker"});
  }

  struct T {
    uint64_t hash;
    int64_t producer = kNoSeq;
    std::string shape = "32x8";
    TensorStatus status = TensorStatus::kHashed;
    double sum = 1.0;
    int64_t inf = 0, nan = 0;
    bool summary = true;  // false: a view, recorded with its hash only
    double min = -1, max = 1;
    std::string reason = {};  // why not hashed (kNotHashed), as the tracer words it
    DType dtype = DType::kFloat32;
  };

  std::string root_module = "model";  // the module path ops run in ("model.fc1" nested)

  // Ops that a ring dropped: the next op's seq and thread index come `n` later.
  void skip(int64_t n) {
    *next_seq_ += n;
    tidx_ += n;
  }

  int64_t op(const std::string& name, const std::vector<T>& ins, const std::vector<T>& outs,
             std::vector<std::pair<std::string, std::string>> args = {}, uint64_t rng = 0,
             int depth = 0, int64_t parent = kNoSeq, int line = 0) {
    OpRecord op;
    op.seq = (*next_seq_)++;
    op.thread = thread_;
    op.tidx = tidx_++;
    op.parent = parent;
    op.depth = static_cast<uint16_t>(depth);
    op.name = w_.intern(name);
    op.step = step;
    op.module = w_.intern(depth == 0 ? root_module : root_module + ".fc1");
    auto file = w_.intern("train.py");
    auto fn = w_.intern("forward");
    const tdbg::tracer::FrameId caller =
        caller_line ? w_.intern_frame(0, file, caller_line, w_.intern("<module>")) : 0;
    op.stack = w_.intern_frame(caller, file, line ? line : 100, fn);
    op.user_frame = op.stack;
    if (next_fwd != kNoSeq) {
      // A backward op on autograd's thread: no stack of its own, the forward op it
      // differentiates.
      op.fwd = next_fwd;
      op.stack = op.user_frame = 0;
      next_fwd = kNoSeq;
    }
    if (next_no_stack) op.stack = op.user_frame = 0;  // a backward op of no forward op
    next_no_stack = false;
    op.rng = rng;
    op.start_ns = clock_ns;
    op.end_ns = clock_ns + 500;
    clock_ns += 1000;
    if (rng) op.flags |= tdbg::tracer::kOpRandom;
    op.flags |= next_flags;
    next_flags = 0;
    uint64_t chain_item = mix(std::hash<std::string>{}(name), rng);
    auto add = [&](const T& t, TensorRole role, uint16_t index) {
      TensorRecord r;
      r.role = role;
      r.index = index;
      r.dtype = t.dtype;
      r.shape = w_.intern(t.shape);
      r.device = w_.intern("cpu");
      r.status = t.status;
      r.hash = t.hash;
      r.producer = t.producer;
      r.summary.valid = t.summary;
      r.summary.min = t.min;
      r.summary.max = t.max;
      r.summary.sum = t.sum;
      r.summary.abs_sum =
          t.min == 0 && t.max == 0 && t.sum == 0 ? 0 : std::abs(t.sum) + 3;  // zeros: 0
      r.summary.inf_count = t.inf;
      r.summary.nan_count = t.nan;
      if (!t.reason.empty()) r.reason = w_.intern(t.reason);
      op.tensors.push_back(r);
      bool counts = t.status != TensorStatus::kUninitialized || chain_covers_uninitialized;
      chain_item = mix(chain_item, std::hash<std::string>{}(t.shape));
      if (counts) chain_item = mix(chain_item, t.hash);
    };
    for (size_t i = 0; i < ins.size(); ++i) add(ins[i], TensorRole::kInput, static_cast<uint16_t>(i));
    for (size_t i = 0; i < outs.size(); ++i) add(outs[i], TensorRole::kOutput, static_cast<uint16_t>(i));
    for (size_t i = 0; i < args.size(); ++i) {
      op.args.push_back({static_cast<uint16_t>(i + ins.size()), w_.intern(args[i].first),
                         w_.intern(args[i].second)});
      chain_item = mix(chain_item, std::hash<std::string>{}(args[i].second));
    }
    chain_ = mix(chain_, chain_item);
    op.chain = chain_;
    int64_t seq = op.seq;
    w_.append_op(std::move(op));
    return seq;
  }

  int64_t step = 0;
  int caller_line = 0;      // nonzero: ops run in a function called from this line
  uint32_t next_flags = 0;  // added to the next op's flags only
  int64_t next_fwd = kNoSeq;  // the next op is a backward op of this forward op
  bool next_no_stack = false; // the next op has no stack (AccumulateGrad's ops)
  bool chain_covers_uninitialized = false;
  int64_t clock_ns = 1000000;  // CLOCK_MONOTONIC of the next op's start, 1 us apart

 private:
  tdbg::tracer::Writer& w_;
  uint32_t thread_;
  int64_t* next_seq_;
  int64_t tidx_ = 0;
  uint64_t chain_ = 0;
};

// The simulated training loop, one step at a time (so several threads can interleave).
class Trainer {
 public:
  Trainer(tdbg::tracer::Writer& w, uint32_t thread, int64_t* next_seq, const Variation& v)
      : r_(w, thread, next_seq), v_(v), param_(mix(42, thread)) {
    r_.chain_covers_uninitialized = v.chain_covers_uninitialized;
  }

  void step(int s) {
    using T = Recorder::T;
    r_.step = s;
    std::string shape = s == v_.batch_change_step ? "16x8" : "32x8";
    uint64_t data = mix(7, s) ^ (s == v_.data_change_step ? 1 : 0);
    // The batch comes from NumPy: no recorded op produced it.
    T x{mix(data, 1)};
    x.shape = shape;
    int64_t to = r_.op("aten::to", {T{data, kNoSeq, shape}}, {x}, {{"dtype", "float32"}}, 0, 0, kNoSeq, 10);
    x.producer = to;
    if (v_.inputs_known) x.status = TensorStatus::kKnown;
    for (int k = 0; k < v_.uninitialized_noise; ++k) {
      T e{static_cast<uint64_t>(std::rand()) * 7919u + 1, kNoSeq, "4", TensorStatus::kUninitialized};
      r_.op("aten::empty", {}, {e}, {{"size", "[4]"}}, 0, 0, kNoSeq, 11);
    }
    uint64_t seed = (v_.seed_change_step >= 0 && s >= v_.seed_change_step) ? v_.seed + 100 : v_.seed;
    uint64_t rng = mix(seed, s);
    T noise{mix(rng, 2)};
    noise.shape = shape;
    noise.producer = r_.op("aten::bernoulli", {}, {noise}, {{"p", "0.9"}}, rng, 0, kNoSeq, 12);
    // linear (parent) and its children t and addmm; the parent's output is addmm's.
    uint64_t y = mix(mix(x.hash, param_), s == v_.nondeterministic_step ? 99 : 0);
    T out{y};
    out.shape = shape;
    if (s == v_.nondeterministic_step) out.sum = v_.nondeterministic_sum;
    bool nan_here = s == v_.nan_in_child_step;
    if (nan_here) out.nan = 3;
    int64_t linear = r_.op("aten::linear", {x, T{param_, param_seq_, "8x8"}}, {out}, {}, 0, 0, kNoSeq, 20);
    T pt{mix(param_, 3), kNoSeq, "8x8"};
    pt.producer = r_.op("aten::t", {T{param_, param_seq_, "8x8"}}, {pt}, {}, 0, 1, linear, 20);
    if (s == v_.other_algorithm_step) out.hash = mix(out.hash, 77);
    int64_t addmm = r_.op("aten::addmm", {x, pt}, {out}, {{"beta", "1"}, {"alpha", "1"}}, 0, 1, linear, 20);
    if (s == v_.other_algorithm_step) {
      // A parallel kernel splits the work: nested ops the other run does not have.
      for (int k = 0; k < 3; ++k) {
        r_.op("aten::select", {x}, {T{mix(x.hash, 100 + k), kNoSeq, "8"}}, {{"dim", "0"}}, 0, 2, addmm, 20);
      }
    }
    out.producer = addmm;
    if (s == v_.insert_step) {
      T scaled{v_.insert_changes_values ? mix(out.hash, 5) : out.hash, kNoSeq, shape};
      int64_t ins = r_.op("aten::mul", {out}, {scaled}, {{"other", "1.0001"}}, 0, 0, kNoSeq, 21);
      scaled.producer = ins;
      out = scaled;
    }
    if (s != v_.remove_step) {
      T in = out;
      if (s == v_.layout_change_step) in.shape = shape + " strides 1x32";
      T act{mix(out.hash, s == v_.layout_change_step ? 55 : 4), kNoSeq, shape};
      act.nan = out.nan;  // NaN passes on (a NaN no op passes on is a masked one)
      act.producer = r_.op(s == v_.replace_step ? "aten::relu" : "aten::gelu", {in}, {act}, {}, 0, 0,
                           kNoSeq, 22);
      out = act;
    }
    T z{mix(out.hash, noise.hash), kNoSeq, shape};
    z.nan = out.nan;
    z.producer = r_.op("aten::mul", {out, noise}, {z}, {}, 0, 0, kNoSeq, 23);
    T loss{mix(z.hash, 6), kNoSeq, ""};
    if (z.nan > 0) loss.nan = 1;
    loss.sum = 0.5 + double(z.hash % 1000) / 1000.0;
    if (s == v_.inf_step) loss.inf = 1;
    loss.producer = r_.op("aten::sum", {z}, {loss}, {}, 0, 0, kNoSeq, 24);
    // As the hook writes doubles: 17 significant digits.
    std::string lr = (v_.lr_change_step >= 0 && s >= v_.lr_change_step) ? "0.10000000000000001"
                                                                          : "0.050000000000000003";
    uint64_t next_param = mix(mix(param_, z.hash), std::hash<std::string>{}(lr));
    param_seq_ = r_.op("aten::add_", {T{param_, param_seq_, "8x8"}, z},
                       {T{next_param, kNoSeq, "8x8"}}, {{"alpha", "-" + lr}}, 0, 0, kNoSeq, 30);
    param_ = next_param;
  }

 private:
  Recorder r_;
  Variation v_;
  uint64_t param_;
  int64_t param_seq_ = kNoSeq;
};

// Writes a run (one database) with `threads` threads interleaved step by step; thread k > 0
// uses `variations[k]` when given, else the default.
std::string write_run(const Variation& v, int threads = 1,
                      std::map<int, Variation> per_thread = {}) {
  fs::path dir = temp_dir();
  std::string path = (dir / "run.sqlite").string();
  auto w = tdbg::tracer::Writer::Create(path);
  REQUIRE(w.ok());
  (*w)->set_meta("cmdline", "python3 train.py");
  int64_t seq = 0;
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<Variation> vs;
  for (int t = 0; t < threads; ++t) {
    vs.push_back(per_thread.count(t) ? per_thread[t] : (t == 0 ? v : Variation{}));
    trainers.push_back(std::make_unique<Trainer>(**w, static_cast<uint32_t>(t), &seq, vs.back()));
  }
  int steps = v.steps + v.extra_steps;
  for (int s = 0; s < steps; ++s) {
    for (int t = 0; t < threads; ++t) {
      if (s < vs[static_cast<size_t>(t)].steps + vs[static_cast<size_t>(t)].extra_steps) trainers[t]->step(s);
    }
  }
  REQUIRE((*w)->close().ok());
  return path;
}

json compare(const std::string& a, const std::string& b, tdbg::diff::DiffOptions options = {}) {
  auto ra = tdbg::tracer::Run::Open(a);
  REQUIRE(ra.ok());
  auto rb = tdbg::tracer::Run::Open(b);
  REQUIRE(rb.ok());
  auto result = tdbg::diff::compare_runs(*ra, *rb, options);
  if (!result.ok()) FAIL(result.status().message());
  return *result;
}

json first(const json& r) {
  REQUIRE(r["status"] == "diverged");
  REQUIRE(r["first_divergence"].is_object());
  return r["first_divergence"];
}

}  // namespace

TEST_CASE("identical runs are identical, found with a handful of chain probes") {
  Variation v;
  auto a = write_run(v), b = write_run(v);
  json r = compare(a, b);
  CHECK(r["status"] == "identical");
  CHECK(r["first_divergence"].is_null());
  CHECK(r["chain_probes"].get<int64_t>() <= 2);
  CHECK(r["ops_compared"].get<int64_t>() == 0);
  CHECK(tdbg::diff::format_divergence(r).rfind("identical", 0) == 0);
  CHECK(r["warnings"].empty());
  // One recording named twice: identical, and said to be the same one.
  json self = compare(a, (fs::path(a).parent_path() / "." / fs::path(a).filename()).string());
  CHECK(self["status"] == "identical");
  REQUIRE(self["warnings"].size() == 1);
  CHECK(self["warnings"][0].get<std::string>().rfind("A and B are the same recording", 0) == 0);
  // A run directory and its only database.
  json dir = compare(fs::path(a).parent_path().string(), a);
  REQUIRE(dir["warnings"].size() == 1);
  CHECK(dir["warnings"][0].get<std::string>().rfind("A and B are the same recording", 0) == 0);
}

TEST_CASE("a copy damaged between the ops bisection reads is never called identical") {
  Variation v;
  auto a = write_run(v), b = write_run(v);
  REQUIRE(compare(a, b)["status"] == "identical");
  // One bit of a block in the middle of B changed (a bad sector): bisection probes only the
  // last op's chain, which still agrees.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(b.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT id, ops FROM op_blocks ORDER BY first_seq LIMIT 1 "
                             "OFFSET (SELECT count(*) / 2 FROM op_blocks)", -1, &st, nullptr) ==
          SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  const int64_t id = sqlite3_column_int64(st, 0);
  std::string blob(static_cast<const char*>(sqlite3_column_blob(st, 1)),
                   static_cast<size_t>(sqlite3_column_bytes(st, 1)));
  sqlite3_finalize(st);
  blob[blob.size() - 3] ^= 4;
  REQUIRE(sqlite3_prepare_v2(db, "UPDATE op_blocks SET ops = ?1 WHERE id = ?2", -1, &st, nullptr) ==
          SQLITE_OK);
  sqlite3_bind_blob(st, 1, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 2, id);
  REQUIRE(sqlite3_step(st) == SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(db);
  auto ra = tdbg::tracer::Run::Open(a);
  auto rb = tdbg::tracer::Run::Open(b);
  REQUIRE((ra.ok() && rb.ok()));
  auto result = tdbg::diff::compare_runs(*ra, *rb, {});
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().message().find("checksum does not match") != std::string::npos);
  CHECK(result.status().message().find("not called identical") != std::string::npos);
  CHECK(result.status().message().find('\n') == std::string::npos);
}

TEST_CASE("a nondeterministic op is found by bisection, innermost, inside its parent") {
  Variation va, vb;
  vb.nondeterministic_step = 37;
  json r = compare(write_run(va), write_run(vb));
  json d = first(r);
  CHECK(d["kind"] == "value");
  CHECK(d["cause"] == "nondeterministic");
  CHECK(d["a"]["op"] == "aten::addmm");
  CHECK(d["a"]["step"] == 37);
  CHECK(d["a"]["source"]["file"] == "train.py");
  CHECK(d["a"]["source"]["line"] == 20);
  CHECK(d["a"]["module"] == "model.fc1");
  REQUIRE(d["a"]["enclosing"].size() == 1);
  CHECK(d["a"]["enclosing"][0]["op"] == "aten::linear");
  CHECK(d["tensor"]["role"] == "output");
  CHECK(d["tensor"]["hash_a"] != d["tensor"]["hash_b"]);
  // O(log n) probes, and only the ops around the split compared field by field.
  CHECK(r["chain_probes"].get<int64_t>() <= 2 + 2 * 12);
  CHECK(d["growth"]["ops_diverged"].get<int64_t>() > 10);
  CHECK(d["context"]["a"].size() == 7);
  std::string text = tdbg::diff::format_divergence(r);
  CHECK(text.find("aten::addmm") != std::string::npos);
  CHECK(text.find("train.py:20") != std::string::npos);
  // Inputs hashed at this op: nothing else explains the difference.
  CHECK(d["detail"].get<std::string>().find(".numpy()") == std::string::npos);
}

TEST_CASE("a nondeterministic verdict over an input with a carried hash names the other explanation") {
  // A write through `.numpy()` changes a tensor without an op: its next use carries the old
  // hash, and the op's output differs from identical-looking inputs.
  Variation va, vb;
  va.inputs_known = vb.inputs_known = true;
  vb.nondeterministic_step = 37;
  json d = first(compare(write_run(va), write_run(vb)));
  // On the CPU with the same settings a kernel repeats exactly: the carried input is the
  // likelier explanation, and leads.
  CHECK(d["cause"] == "external_input");
  const std::string detail = d["detail"];
  CHECK(detail.find("changed outside torch's ops") != std::string::npos);
  CHECK(detail.find("input 0") != std::string::npos);
  CHECK_FALSE(d.contains("carried_input"));
}

TEST_CASE("a carried input with an output that differs at rounding level reads as another kernel") {
  // mkldnn switched off by the program (torch.backends.mkldnn.flags): the conv's output
  // differs in the last bits. A write from outside torch's ops would bring other data.
  Variation va, vb;
  va.inputs_known = vb.inputs_known = true;
  vb.nondeterministic_step = 37;
  vb.nondeterministic_sum = 1.00000006;
  json d = first(compare(write_run(va), write_run(vb)));
  CHECK(d["cause"] == "nondeterministic");
  const std::string detail = d["detail"];
  // 6e-8 of a sum whose abs_sum is 4: relative to the tensor's size, 1.5e-8.
  CHECK(detail.find("differs at rounding level (relative 1e-08)") != std::string::npos);
  CHECK(detail.find("torch.backends.mkldnn.flags") != std::string::npos);
  CHECK(detail.find("Less likely, input 0 changed outside torch's ops") != std::string::npos);
  // A larger difference: the carried input leads again.
  vb.nondeterministic_sum = 1.5;
  CHECK(first(compare(write_run(va), write_run(vb)))["cause"] == "external_input");
}

TEST_CASE("an op that ran other nested ops (another algorithm) is a value divergence at that op") {
  Variation va, vb;
  vb.other_algorithm_step = 19;
  auto a = write_run(va), b = write_run(vb);
  for (bool swap : {false, true}) {
    json d = first(swap ? compare(b, a) : compare(a, b));
    CHECK(d["kind"] == "value");
    CHECK(d["cause"] == "nondeterministic");
    CHECK(d["a"]["op"] == "aten::addmm");
    CHECK(d["a"]["step"] == 19);
    // The nested ops show up as a structural change in what follows.
    CHECK(d["growth"]["structural_changes"].get<int64_t>() >= 1);
  }
}

TEST_CASE("a different seed is an rng divergence at the random op") {
  Variation va, vb;
  vb.seed_change_step = 23;
  json d = first(compare(write_run(va), write_run(vb)));
  CHECK(d["cause"] == "rng");
  CHECK(d["a"]["op"] == "aten::bernoulli");
  CHECK(d["a"]["step"] == 23);
  CHECK(d["rng"]["a"] != d["rng"]["b"]);
}

TEST_CASE("a changed learning rate is an arguments divergence naming the argument") {
  Variation va, vb;
  vb.lr_change_step = 12;
  json d = first(compare(write_run(va), write_run(vb)));
  CHECK(d["cause"] == "arguments");
  CHECK(d["a"]["op"] == "aten::add_");
  CHECK(d["a"]["step"] == 12);
  CHECK(d["argument"]["name"] == "alpha");
  CHECK(d["argument"]["value_a"] == "-0.05");
  CHECK(d["argument"]["value_b"] == "-0.1");
}

TEST_CASE("another memory layout of the same values is a layout divergence, not a structural one") {
  Variation va, vb;
  va.layout_change_step = 17;
  json r = compare(write_run(va), write_run(vb));
  json d = first(r);
  CHECK(d["kind"] == "value");
  CHECK(d["cause"] == "layout");
  CHECK(d["a"]["op"] == "aten::gelu");
  CHECK(d["a"]["step"] == 17);
  CHECK(d["tensor"]["role"] == "input");
  CHECK(d["tensor"]["shape"] == "32x8 strides 1x32");
  CHECK(d["tensor"]["shape_b"] == "32x8");
}

TEST_CASE("changed data from outside torch is an external_input divergence") {
  Variation va, vb;
  vb.data_change_step = 41;
  json d = first(compare(write_run(va), write_run(vb)));
  CHECK(d["cause"] == "external_input");
  CHECK(d["a"]["op"] == "aten::to");
  CHECK(d["a"]["step"] == 41);
  CHECK(d["tensor"]["role"] == "input");
  CHECK(d["tensor"]["producer_a"].is_null());
}

TEST_CASE("an inserted op is a structural change, values are compared again after it") {
  Variation va, vb;
  vb.insert_step = 9;
  json d = first(compare(write_run(va), write_run(vb)));
  CHECK(d["kind"] == "structure");
  CHECK(d["cause"] == "structure");
  CHECK(d["a"].is_null());
  CHECK(d["b"]["op"] == "aten::mul");
  CHECK(d["b"]["step"] == 9);
  CHECK(d["b"]["source"]["line"] == 21);
  REQUIRE(d["structural_changes"].size() >= 1);
  json h = d["structural_changes"][0];
  CHECK(h["type"] == "inserted");
  CHECK(h["b_range"][1].get<int64_t>() - h["b_range"][0].get<int64_t>() == 1);
  CHECK(d["growth"]["structural_changes"] == 1);
  // The extra op changed the values that flow on: the next aligned op sees a changed input.
  REQUIRE(d["value_after_structure"].is_object());
  CHECK(d["value_after_structure"]["a"]["op"] == "aten::gelu");
  CHECK(d["value_after_structure"]["cause"] == "structure");
}

TEST_CASE("after a harmless inserted op, the next real value divergence is reported") {
  Variation va, vb;
  vb.insert_step = 5;
  vb.insert_changes_values = false;
  vb.nondeterministic_step = 30;
  json d = first(compare(write_run(va), write_run(vb)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["value_after_structure"].is_object());
  CHECK(d["value_after_structure"]["cause"] == "nondeterministic");
  // The innermost op that differs, as bisection finds it without a structural change.
  CHECK(d["value_after_structure"]["a"]["op"] == "aten::addmm");
  CHECK(d["value_after_structure"]["a"]["step"] == 30);
}

// A one-thread run written op by op by `ops`, then given the metadata `meta` writes; returns
// its database path.
std::string write_ops(const std::function<void(Recorder&)>& ops,
                      const std::function<void(tdbg::tracer::Writer&)>& meta = {}) {
  fs::path dir = temp_dir();
  std::string path = (dir / "run.sqlite").string();
  auto w = tdbg::tracer::Writer::Create(path);
  REQUIRE(w.ok());
  int64_t seq = 0;
  Recorder r(**w, 0, &seq);
  ops(r);
  if (meta) meta(**w);
  REQUIRE((*w)->close().ok());
  return path;
}

// An optimizer step's region (`Optimizer.step#...`) over seqs [start, end] of thread 0.
void add_step_region(tdbg::tracer::Writer& w, uint32_t id, int64_t start, int64_t end,
                     const char* name = "Optimizer.step#AdamW.step", int64_t step_count = -1) {
  tdbg::tracer::RegionRecord step;
  step.id = id;
  step.name = w.intern(name);
  step.kind = tdbg::tracer::RegionKind::kStep;
  step.start_seq = start;
  step.end_seq = end;
  step.step = step_count >= 0 ? step_count : id - 1;  // (several optimizers share a count)
  w.append_region(step);
}

// `write_ops`'s meta for a process (pid 42) that ended with `status` ("0", "1", "signal 11").
std::function<void(tdbg::tracer::Writer&)> ended_with(const std::string& status) {
  return [status](tdbg::tracer::Writer& w) {
    w.set_meta("pid", "42");
    w.set_meta("exit_status", status);
    w.set_meta("end_time_ns", "1");
  };
}

TEST_CASE("the optimizer's steps pair op for op, their outputs taken whole") {
  using T = Recorder::T;
  // A run of two steps: `forward` ops, then the optimizer's op in a step region, whose output
  // sums to each of `sums` (its hash the sum's bits), named `update`.
  auto run = [](std::vector<double> sums, int forward, std::vector<std::string> update,
                DType dtype = DType::kFloat32) {
    auto steps = std::make_shared<std::vector<int64_t>>();
    return write_ops(
        [=](Recorder& r) {
          for (size_t s = 0; s < sums.size(); ++s) {
            r.step = static_cast<int64_t>(s);
            for (int k = 0; k < forward; ++k) r.op("aten::mul", {T{1}}, {T{50u + k}});
            T out{std::hash<double>{}(sums[s]) ^ static_cast<uint64_t>(dtype)};
            out.sum = sums[s];
            out.dtype = dtype;
            steps->push_back(r.op(update[s], {T{2}}, {out}));
          }
        },
        [=](tdbg::tracer::Writer& w) {
          for (size_t s = 0; s < steps->size(); ++s)
            add_step_region(w, static_cast<uint32_t>(s + 1), (*steps)[s], (*steps)[s]);
        });
  };
  auto updates = [](const std::string& a, const std::string& b, int64_t max_ops = -1,
                    int64_t same_before = 0) {
    auto ra = tdbg::tracer::Reader::Open(a);
    auto rb = tdbg::tracer::Reader::Open(b);
    REQUIRE(ra.ok());
    REQUIRE(rb.ok());
    return tdbg::diff::compare_updates(**ra, 0, **rb, 0, 0, max_ops, same_before);
  };
  const std::vector<std::string> add = {"aten::add_", "aten::add_"};
  const std::string a = run({1.0, 2.0}, 1, add);
  // Two micro-batches a step, the same updates up to rounding: 1e-8 over |2| + 3.
  json u = updates(a, run({1.0, 2.0 + 1e-8}, 2, add));
  CHECK(u["steps"] == 2);
  CHECK(u["rounding"] == true);
  CHECK(u["largest_step"] == 1);
  CHECK(u["largest"].get<double>() == Approx(2e-9).epsilon(0.01));
  // Another update in step 1, after a step the same: beyond from step 1, one step agreed.
  u = updates(a, run({1.0, 3.0}, 2, add));
  CHECK(u["rounding"] == false);
  CHECK(u["beyond"]["step"] == 1);
  CHECK(u["beyond"]["steps_agreed"] == 1);
  CHECK(u["beyond"]["agreed_exactly"] == true);  // step 0's outputs are the same: said so
  CHECK(u["beyond"]["a"]["op"] == "aten::add_");
  u = updates(a, run({1.0 + 1e-8, 3.0}, 2, add));
  CHECK(u["beyond"]["steps_agreed"] == 1);
  CHECK(u["beyond"]["agreed_exactly"] == false);
  // The model in float64 in one run: the updates' values compared across dtypes (zeros are
  // the same zeros; a float32 run strays from a float64 one by float32's rounding), not called
  // as far apart as can be.
  u = updates(a, run({1.0, 2.0 + 1e-8}, 2, add, DType::kFloat64));
  CHECK(u["rounding"] == true);
  CHECK(u["largest"].get<double>() < 1e-6);
  u = updates(a, run({1.0, 2.5}, 2, add, DType::kFloat64));
  CHECK(u["beyond"]["step"] == 1);
  CHECK(u["beyond"]["relative"].get<double>() < 1);
  // Read up to a bound that ends before step 1, whose update differs: not complete, and no
  // word on step 1 (a late divergence once read as "the same in every step", t150 F1).
  const std::vector<std::string> add4(4, "aten::add_");
  const std::string four = run({1.0, 2.0, 3.0, 4.0}, 1, add4);
  const std::string late = run({1.0, 2.0, 3.0, 5.0}, 1, add4);
  u = updates(four, late, 0);
  CHECK(u["rounding"] == true);
  CHECK(u["complete"] == false);
  CHECK(u["through_step"] == 0);
  // From the divergence's step on: steps before it are agreed unread, and the bound is spent
  // where the runs part.
  u = updates(four, late, 0, 3);
  CHECK(u["steps"] == 4);
  CHECK(u["beyond"]["step"] == 3);
  CHECK(u["beyond"]["steps_agreed"] == 3);
  CHECK_FALSE(u.contains("complete"));
  // Another optimizer op in step 1: paired up to step 0 only.
  u = updates(a, run({1.0, 2.0}, 1, {"aten::add_", "aten::sub_"}));
  CHECK(u["steps"] == 1);
  CHECK(u["unpaired_step"] == 1);
  // A run whose recording stopped (a full disk) holds a step region past its last op: the
  // end of what it recorded, not other ops from there.
  const std::string stopped = write_ops(
      [](Recorder& r) {
        T out{std::hash<double>{}(1.0) ^ static_cast<uint64_t>(DType::kFloat32)};
        out.sum = 1.0;
        r.op("aten::mul", {T{1}}, {T{50u}});
        r.op("aten::add_", {T{2}}, {out});
      },
      [](tdbg::tracer::Writer& w) {
        add_step_region(w, 1, 1, 1);
        add_step_region(w, 2, 5, 6);  // its ops were never committed
      });
  u = updates(stopped, a);
  CHECK(u["steps"] == 1);
  CHECK(u["unpaired_step"].is_null());
}

TEST_CASE("the optimizer's settings at a step name the hyperparameter, group and optimizer") {
  using T = Recorder::T;
  // One AdamW step: its op inside the step's region, and the settings region (kind 3) in it.
  auto run = [](const std::string& settings) {
    return write_ops(
        [](Recorder& r) {
          r.op("aten::mul_", {T{1}}, {T{2}}, {{"other", "0.99"}});
        },
        [settings](tdbg::tracer::Writer& w) {
          add_step_region(w, 1, 0, 0);
          tdbg::tracer::RegionRecord s;
          s.id = 2;
          s.name = w.intern(settings);
          s.kind = tdbg::tracer::RegionKind::kOptimizer;
          s.start_seq = s.end_seq = 0;
          s.parent = 1;
          w.append_region(s);
        });
  };
  auto compare_at = [](const std::string& a, const std::string& b) {
    auto ra = tdbg::tracer::Reader::Open(a);
    auto rb = tdbg::tracer::Reader::Open(b);
    REQUIRE(ra.ok());
    REQUIRE(rb.ok());
    return tdbg::diff::compare_optimizer_settings(**ra, {0, 0}, **rb, {0, 0});
  };
  const std::string one =
      R"({"optimizer": "AdamW", "index": 1, "groups": [{"lr": 0.001, "weight_decay": 0.01, "params": 4}]})";
  const std::string decay =
      R"({"optimizer": "AdamW", "index": 1, "groups": [{"lr": 0.001, "weight_decay": 0.05, "params": 4}]})";
  const std::string two =
      R"({"optimizer": "AdamW", "index": 1, "groups": [{"lr": 0.001, "weight_decay": 0.01, "params": 4}, )"
      R"({"lr": 0.001, "weight_decay": 0.0, "params": 2}]})";
  json c = compare_at(run(one), run(decay));
  REQUIRE(c["differs"].size() == 1);
  CHECK(c["differs"][0]["name"] == "weight_decay");
  CHECK(c["text"].get<std::string>().find("weight_decay is 0.01 in A and 0.05 in B") !=
        std::string::npos);
  // A group added: said as a count, with the settings in which it differs from B's group 0
  // (its own weight decay: the ops it adds or leaves out).
  c = compare_at(run(one), run(two));
  REQUIRE(c["differs"].size() == 1);
  CHECK(c["text"].get<std::string>().find("A has 1 param group(s) and B 2") != std::string::npos);
  CHECK(c["text"].get<std::string>().find(
            "; B's param group 1 has weight_decay 0.0 (group 0: 0.01)") != std::string::npos);
  CHECK(c["differs"][0]["added"].size() == 1);
  // A scheduler's own setting that one run's group lacks; a frozen layer's parameters left out.
  const std::string scheduled =
      R"({"optimizer": "AdamW", "index": 1, "groups": [{"lr": 0.001, "weight_decay": 0.01, "params": 4, )"
      R"("initial_lr": 0.001}]})";
  c = compare_at(run(one), run(scheduled));
  REQUIRE(c["differs"].size() == 1);
  CHECK(c["differs"][0]["unset"] == "a");
  CHECK(c["text"].get<std::string>().find(
            "initial_lr is unset in A and 0.001 in B (an LR scheduler in B only)") !=
        std::string::npos);
  const std::string frozen =
      R"({"optimizer": "AdamW", "index": 1, "groups": [{"lr": 0.001, "weight_decay": 0.01, "params": 2}]})";
  c = compare_at(run(one), run(frozen));
  CHECK(c["text"].get<std::string>().find(
            "parameter count is 4 in A and 2 in B (the optimizer was given other parameters") !=
        std::string::npos);
  // A weight tied in one run only is among the reasons: the count is one less there.
  CHECK(c["text"].get<std::string>().find("a weight tied in one run only") != std::string::npos);
  // And a weight split in two by a reparametrization (weight_norm) in one run only.
  CHECK(c["text"].get<std::string>().find("weight_norm splits it into weight_g and weight_v") !=
        std::string::npos);
  c = compare_at(run(one), run(one));
  CHECK(c["differs"].empty());
  CHECK(c["text"].get<std::string>().find("are the same in both runs") != std::string::npos);
  // None recorded (a C++ optimizer, an older database): nothing to say.
  CHECK(compare_at(run(one), write_ops([](Recorder& r) { r.op("aten::mul_", {T{1}}, {T{2}}); }))
            .is_null());
}

TEST_CASE("a scalar of the optimizer's step is named by its settings, a scheduler's by its steps") {
  using T = Recorder::T;
  // Steps 0..n-1 of one AdamW with two param groups, each step one op and its settings, with
  // lr `lrs[k]` in both groups at step k.
  auto run = [](const std::vector<double>& lrs) {
    return write_ops(
        [&](Recorder& r) {
          for (size_t k = 0; k < lrs.size(); ++k) {
            r.step = static_cast<int64_t>(k);
            r.op("aten::mul_", {T{1}}, {T{2}}, {{"other", std::to_string(1 - lrs[k] * 0.01)}});
          }
        },
        [lrs](tdbg::tracer::Writer& w) {
          for (size_t k = 0; k < lrs.size(); ++k) {
            const auto id = static_cast<uint32_t>(2 * k + 1);
            const auto seq = static_cast<int64_t>(k);
            add_step_region(w, id, seq, seq, "Optimizer.step#AdamW.step", seq);
            tdbg::tracer::RegionRecord s;
            s.id = id + 1;
            const json group = {{"lr", lrs[k]}, {"weight_decay", 0.01}, {"params", 2}};
            s.name = w.intern(
                json{{"optimizer", "AdamW"}, {"index", 1}, {"groups", {group, group}}}.dump());
            s.kind = tdbg::tracer::RegionKind::kOptimizer;
            s.start_seq = s.end_seq = seq;
            s.parent = id;
            w.append_region(s);
          }
        });
  };
  auto compare_at = [](const std::string& a, const std::string& b, int64_t seq,
                       std::optional<std::pair<double, double>> scalar = std::nullopt) {
    auto ra = tdbg::tracer::Reader::Open(a);
    auto rb = tdbg::tracer::Reader::Open(b);
    REQUIRE(ra.ok());
    REQUIRE(rb.ok());
    return tdbg::diff::compare_optimizer_settings(**ra, {0, seq}, **rb, {0, seq}, scalar);
  };
  // A linear warmup; B's scheduler stepped before the optimizer (one step ahead), or twice.
  const std::vector<double> warmup = {0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008};
  const std::vector<double> ahead = {0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009};
  const std::vector<double> twice = {0.001, 0.003, 0.005, 0.007, 0.009, 0.011, 0.013, 0.015};
  json c = compare_at(run(warmup), run(ahead), 0, std::pair{1 - 0.001 * 0.01, 1 - 0.002 * 0.01});
  REQUIRE(c.is_object());
  CHECK(c["scalar"].get<std::string>().rfind("1 - lr * weight_decay", 0) == 0);
  const std::string text = c["text"];
  CHECK(text.rfind("the argument is 1 - lr * weight_decay", 0) == 0);
  // Said once for both groups.
  CHECK(text.find("lr is 0.001 in A and 0.002 in B in every param group") != std::string::npos);
  CHECK(text.find("param group 1") == std::string::npos);
  CHECK(c["schedule"] == json{{"run", "B"}, {"setting", "lr"}, {"ahead", 1}});
  CHECK(text.find("scheduler.step() called before optimizer.step() in B") != std::string::npos);
  // The other way round: A is ahead.
  CHECK(compare_at(run(ahead), run(warmup), 0)["schedule"]["run"] == "A");
  c = compare_at(run(warmup), run(twice), 1);
  CHECK(c["schedule"] == json{{"run", "B"}, {"setting", "lr"}, {"rate", 2}});
  CHECK(c["text"].get<std::string>().find("scheduler.step() called twice per step in B") !=
        std::string::npos);
  // A constant lr set higher from step 4 in B: no schedule (before, the steps where both
  // runs have 0.01 matched B's step k to A's step 2k; t143 F3).
  const std::vector<double> constant(8, 0.01);
  const std::vector<double> raised = {0.01, 0.01, 0.01, 0.01, 0.02, 0.02, 0.02, 0.02};
  c = compare_at(run(constant), run(raised), 4);
  REQUIRE(c.is_object());
  CHECK_FALSE(c.contains("schedule"));
  CHECK(c["text"].get<std::string>().find("moves two steps") == std::string::npos);
  // Another base rate is no shift: the generic reason, and no expression for a scalar that
  // is none of the settings'.
  const std::vector<double> other = {0.0015, 0.0025, 0.0035, 0.0045,
                                     0.0055, 0.0065, 0.0075, 0.0085};
  c = compare_at(run(warmup), run(other), 0, std::pair{0.5, 0.25});
  CHECK_FALSE(c.contains("schedule"));
  CHECK_FALSE(c.contains("scalar"));
  CHECK(c["text"].get<std::string>().find("as a scheduler or the program set it") !=
        std::string::npos);
  // Settings the same in both runs, the parameter in another group in each (groups built from
  // a set): said, not blamed on the optimizer's state.
  auto groups_run = [] {
    return write_ops(
        [](Recorder& r) {
          r.op("aten::add_", {T{1}}, {T{2}}, {{"alpha", "-0.1"}});
        },
        [](tdbg::tracer::Writer& w) {
          add_step_region(w, 1, 0, 0);
          tdbg::tracer::RegionRecord s;
          s.id = 2;
          s.name =
              w.intern(R"({"optimizer": "SGD", "index": 1, "groups": [{"lr": 0.1, "params": 1}, )"
                       R"({"lr": 0.05, "params": 1}]})");
          s.kind = tdbg::tracer::RegionKind::kOptimizer;
          s.start_seq = s.end_seq = 0;
          s.parent = 1;
          w.append_region(s);
        });
  };
  c = compare_at(groups_run(), groups_run(), 0, std::pair{-0.1, -0.05});
  CHECK(c["differs"].empty());
  CHECK(c["group_a"] == 0);
  CHECK(c["group_b"] == 1);
  CHECK(c["text"].get<std::string>().find("-lr of param group 0 in A and of param group 1 in B") !=
        std::string::npos);
  CHECK(c["text"].get<std::string>().find("given the parameters in another order") !=
        std::string::npos);
  // The same group in both: the optimizer's state, as before.
  c = compare_at(groups_run(), groups_run(), 0, std::pair{-0.1, -0.1});
  CHECK_FALSE(c.contains("group_a"));
  CHECK(c["text"].get<std::string>().find("the scalar comes from the optimizer's state") !=
        std::string::npos);
  // A schedule of another shape that parts from A's at step 2 and then matches A's next
  // step: no shift, which would have differed from step 0.
  const std::vector<double> parts = {0.001, 0.002, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009};
  CHECK_FALSE(compare_at(run(warmup), run(parts), 2).contains("schedule"));
  // A shift that holds for one step only (B's schedule then parts from A's) is none either.
  const std::vector<double> once = {0.002, 0.0025, 0.0025, 0.0025, 0.0025, 0.0025, 0.0025, 0.0025};
  CHECK_FALSE(compare_at(run(warmup), run(once), 0).contains("schedule"));
}

TEST_CASE("after a structural change, an input made another way is named, not blamed on the op") {
  // A takes a view of x where B computes new data: the next shared op (tanh) reads a view in
  // A and hashed data in B. Views are not compared by value, so the op's differing output
  // must not read as a nondeterministic op.
  using T = Recorder::T;
  auto write = [](bool b_side) {
    return write_ops([&](Recorder& r) {
      T x{11};
      x.producer = r.op("aten::relu", {T{10}}, {x}, {}, 0, 0, kNoSeq, 5);
      T in{21, kNoSeq, "32x8", TensorStatus::kView};
      if (b_side) {
        in = T{22};
        in.producer = r.op("aten::mul", {x}, {in}, {{"other", "2"}}, 0, 0, kNoSeq, 6);
      } else {
        in.summary = false;
        in.producer = r.op("aten::view", {x}, {in}, {{"size", "[32, 8]"}}, 0, 0, kNoSeq, 6);
      }
      T out{b_side ? 32u : 31u};
      r.op("aten::tanh", {in}, {out}, {}, 0, 0, kNoSeq, 7);
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["value_after_structure"].is_object());
  CHECK(d["value_after_structure"]["a"]["op"] == "aten::tanh");
  CHECK(d["value_after_structure"]["cause"] == "structure");
  CHECK(d["value_after_structure"]["detail"].get<std::string>().find("a view in one run") !=
        std::string::npos);
}

TEST_CASE("a view laid out otherwise whose op makes NaN in one run only is no layout cause") {
  // A masks x into new data (torch.where); B reads a slice of it (a view, other strides) and
  // sqrt makes NaN of its negatives. The layout differs, but no other rounding makes NaN: the
  // view holds other values. With equal outputs' summaries the layout stays the cause.
  using T = Recorder::T;
  auto write = [](bool b_side, bool nan) {
    return write_ops([&](Recorder& r) {
      T x{11};
      x.producer = r.op("aten::addmm", {T{10}}, {x}, {}, 0, 0, kNoSeq, 5);
      T in{21, kNoSeq, "8x1", TensorStatus::kView};
      if (b_side) {
        in.shape = "8x1 strides 4x1";
        in.summary = false;
        in.producer = r.op("aten::slice", {x}, {in}, {{"end", "1"}}, 0, 0, kNoSeq, 6);
      } else {
        in = T{22, kNoSeq, "8x1"};
        in.producer = r.op("aten::where", {x}, {in}, {}, 0, 0, kNoSeq, 7);
      }
      T out{b_side ? 32u : 31u, kNoSeq, "8x1"};
      if (b_side && nan) out.nan = 7;
      r.op("aten::sqrt", {in}, {out}, {}, 0, 0, kNoSeq, 8);
    });
  };
  json d = first(compare(write(false, true), write(true, true)));
  REQUIRE(d["value_after_structure"].is_object());
  CHECK(d["value_after_structure"]["a"]["op"] == "aten::sqrt");
  CHECK(d["value_after_structure"]["cause"] == "structure");
  CHECK(d["value_after_structure"]["detail"].get<std::string>().find(
            "output 0 differs beyond rounding") != std::string::npos);
  d = first(compare(write(false, false), write(true, false)));
  REQUIRE(d["value_after_structure"].is_object());
  CHECK(d["value_after_structure"]["cause"] == "layout");
}

TEST_CASE("an input a view in one run and new data in the other is named, not a matching input") {
  // --hash outputs: A slices a tensor tdbg knows (a view); B slices data it never hashed (new
  // data at the slice). The next op's other input (a bias, carried from the optimizer's add_)
  // matches: it must not be blamed on a write outside torch.
  using T = Recorder::T;
  auto write = [](bool b_side) {
    return write_ops([&](Recorder& r) {
      T bias{5};
      bias.producer = r.op("aten::add_", {T{4}}, {bias}, {}, 0, 0, kNoSeq, 39);
      bias.status = TensorStatus::kKnown;
      T base{11, kNoSeq, "64x8", b_side ? TensorStatus::kSkipped : TensorStatus::kKnown};
      T batch = b_side ? T{22, kNoSeq, "8x8"} : T{21, kNoSeq, "8x8", TensorStatus::kView};
      batch.summary = b_side;
      batch.producer = r.op("aten::slice", {base}, {batch}, {{"start", "32"}}, 0, 0, kNoSeq, 17);
      if (b_side) batch.status = TensorStatus::kKnown;
      r.op("aten::addmm", {bias, batch}, {T{b_side ? 32u : 31u, kNoSeq, "8x16"}}, {}, 0, 0, kNoSeq, 28);
    }, [](tdbg::tracer::Writer& w) { w.set_meta("hash_mode", "outputs"); });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["a"]["op"] == "aten::addmm");
  CHECK(d["cause"] == "external_input");
  const std::string detail = d["detail"];
  CHECK(detail.find("input 1 was made another way in each run") != std::string::npos);
  CHECK(detail.find("from the data aten::slice at") != std::string::npos);
  CHECK(detail.find("input 0") == std::string::npos);
}

TEST_CASE("an op reached from another line in each run shows both lines") {
  using T = Recorder::T;
  auto write = [](int line, const char* index, int before = 5) {
    return write_ops([&](Recorder& r) {
      T x{11};
      x.producer = r.op("aten::relu", {T{10}}, {x}, {}, 0, 0, kNoSeq, before);
      r.op("aten::select", {x}, {T{20, kNoSeq, "32x8", TensorStatus::kView}},
           {{"dim", "0"}, {"index", index}}, 0, 0, kNoSeq, line);
    });
  };
  json r = compare(write(30, "1"), write(32, "0"));
  CHECK(first(r)["cause"] == "arguments");
  std::string text = tdbg::diff::format_divergence(r);
  CHECK(text.find("A train.py:30") != std::string::npos);
  CHECK(text.find("B train.py:32") != std::string::npos);
  CHECK(text.find("another code path, or an edit that moved the lines") != std::string::npos);
  // The op before moved by as much: an edit moved the file's lines, the statement is the same.
  const std::string moved = tdbg::diff::format_divergence(compare(write(30, "1"), write(32, "0", 7)));
  INFO(moved);
  CHECK(moved.find("(the same statement: B's file has its lines lower by 2, as the ops before it do, "
                   "from an edit; not another code path)") != std::string::npos);
}

TEST_CASE("a step whose differing ops only read a tensor into Python says so") {
  using T = Recorder::T;
  // The loss of the last step read by `.item()` after the last optimizer step: a step of one
  // op with no tensor out, not state updated in place.
  auto run = [](const char* lr) {
    return write_ops([lr](Recorder& r) {
      r.op("aten::mul", {T{1}}, {T{lr[2] == '1' ? 10u : 11u}}, {{"other", lr}});
      r.step = 1;
      r.op("aten::item", {T{lr[2] == '1' ? 10u : 11u}}, {});
    });
  };
  const std::string text = tdbg::diff::format_divergence(compare(run("0.1"), run("0.2")));
  INFO(text);
  CHECK(text.find("step 1: 1/1 ops differ, each reading a differing tensor out into Python (.item(), "
                  ".tolist(), a print of the loss), no tensor made") != std::string::npos);
}

TEST_CASE("a rank's process fed by the worker where the runs part is no collective's consequence") {
  // Rank 1's DataLoader worker differs first; rank 1's own process, which gets its batches,
  // differs later: a consequence through the DataLoader, not through a collective.
  json r = {
      {"status", "diverged"},
      {"first_divergence",
       {{"kind", "value"},
        {"cause", "external_input"},
        {"detail", "input 0 differs"},
        {"a", {{"op", "aten::div"}, {"seq", 5}, {"step", 0}}},
        {"b", {{"op", "aten::div"}, {"seq", 5}, {"step", 0}}},
        {"process_a",
         {{"worker", "0/2"}, {"parent_rank", "1/2"}, {"who", "DataLoader worker 0/2 of rank 1/2"}}},
        {"other_processes",
         {{{"process", 2},
           {"rank", "1/2"},
           {"who", "rank 1/2"},
           {"kind", "value"},
           {"op", "aten::linear"},
           {"seq", 40},
           {"step", 3}}}}}}};
  const std::string text = tdbg::diff::format_divergence(r);
  INFO(text);
  CHECK(text.find("most likely a consequence (the DataLoader worker where the runs part sends this "
                  "process its batches)") != std::string::npos);
  CHECK(text.find("through a collective") == std::string::npos);
}

TEST_CASE("another rank that runs other ops too is no collective's consequence alone") {
  // Both ranks under DDP's no_sync(): rank 1 differs first, rank 0 structurally later.
  json r = {{"status", "diverged"},
            {"first_divergence",
             {{"kind", "structure"},
              {"cause", "structure"},
              {"detail", "1 op(s) of A removed in B"},
              {"a", {{"op", "aten::mul"}, {"seq", 5}, {"step", 0}}},
              {"b", nullptr},
              {"process_a", {{"rank", "1/2"}, {"who", "rank 1/2"}}},
              {"other_processes",
               {{{"process", 1},
                 {"rank", "0/2"},
                 {"who", "rank 0/2"},
                 {"kind", "structure"},
                 {"op", "aten::mul"},
                 {"seq", 5},
                 {"step", 0}}}}}}};
  const std::string text = tdbg::diff::format_divergence(r);
  INFO(text);
  CHECK(text.find("it runs other ops there too: the same change in this rank") !=
        std::string::npos);
  CHECK(text.find("through a collective") == std::string::npos);
}

TEST_CASE("structural changes beyond the five listed are counted") {
  json changes = json::array();
  for (int k = 0; k < 7; ++k)
    changes.push_back({{"type", "inserted"},
                       {"a_range", {10 * k, 10 * k}},
                       {"b_range", {10 * k, 10 * k + 1}},
                       {"removed", json::array()},
                       {"inserted", {{{"op", "aten::clamp"}}}}});
  json r = {{"status", "diverged"},
            {"first_divergence",
             {{"kind", "structure"},
              {"cause", "structure"},
              {"detail", "1 op(s) inserted in B"},
              {"a", nullptr},
              {"b", nullptr},
              {"structural_changes", changes}}}};
  const std::string text = tdbg::diff::format_divergence(r);
  INFO(text);
  CHECK(text.find("  change:   (2 more in --json") != std::string::npos);
  r["first_divergence"]["structural_changes"].erase(5);
  r["first_divergence"]["structural_changes"].erase(5);
  CHECK(tdbg::diff::format_divergence(r).find("more in --json") == std::string::npos);
}

TEST_CASE("runs that never step an optimizer are said to be all at step 0") {
  using T = Recorder::T;
  auto write = [](const char* alpha, bool stepped) {
    return write_ops(
        [&](Recorder& r) {
          r.op("aten::add_", {T{1}}, {T{2}}, {{"alpha", alpha}});
        },
        [stepped](tdbg::tracer::Writer& w) {
          if (stepped) add_step_region(w, 1, 0, 0);
        });
  };
  auto step_note = [](const json& r) {
    for (const json& n : r["notes"])
      if (n.get<std::string>().find("every op is at step 0") != std::string::npos) return true;
    return false;
  };
  CHECK(step_note(compare(write("-0.1", false), write("-0.2", false))));
  CHECK_FALSE(step_note(compare(write("-0.1", true), write("-0.2", true))));
  CHECK_FALSE(step_note(compare(write("-0.1", false), write("-0.1", false))));  // identical
}

TEST_CASE("a seed taken from the process id or the clock is said to be one") {
  using T = Recorder::T;
  auto write = [](const std::string& pid, const std::string& seed, uint64_t out, uint64_t rng = 0) {
    return write_ops([&](Recorder& r) { r.op("aten::randn", {}, {T{out}}, {}, rng ? rng : out); },
                     [=](tdbg::tracer::Writer& w) {
                       w.set_meta("pid", pid);
                       w.set_meta("seed", seed);
                       w.set_meta("start_time_ns", "1796644900000000000");
                       w.set_meta("end_time_ns", "1796644910000000000");
                     });
  };
  auto seed_note = [](const json& r) {
    for (const json& s : r["settings"])
      if (s["key"] == "seed") return s.value("note", std::string());
    return std::string("(no seed setting)");
  };
  CHECK(seed_note(compare(write("23637", "23637", 1), write("23643", "23643", 2))) ==
        "each is its process id: seeded from os.getpid(), different in every run");
  // A worker's pid plus its index; a time in seconds near the start; milliseconds.
  CHECK(seed_note(compare(write("100", "101", 1), write("200", "201", 2))) ==
        "each is its process id: seeded from os.getpid(), different in every run");
  CHECK(seed_note(compare(write("100", "1796644909", 1), write("200", "1796644912", 2))) ==
        "each is a time near its start: seeded from the clock (time.time()), different in every "
        "run");
  CHECK(seed_note(compare(write("100", "1796644909123", 1), write("200", "7", 2))) ==
        "A's is a time near its start, in milliseconds (the clock (time.time())): a seed "
        "different in every run");
  // Chosen seeds: nothing to add.
  CHECK(seed_note(compare(write("100", "0", 1), write("200", "1", 2))).empty());
  // Where no random op differs, that is said after it.
  CHECK(seed_note(compare(write("100", "100", 1, 9), write("200", "200", 2, 9))) ==
        "each is its process id: seeded from os.getpid(), different in every run; no random op "
        "differs up to the divergence");
}

TEST_CASE("two copies of one script: the same line in another file is no other code path") {
  // `tdbg diff` of a script against an edited copy: only the file differs at the op. The
  // argument's float text prints as Python writes it.
  auto side = [](const char* file) {
    return json{{"op", "aten::clamp_"}, {"seq", 7}, {"step", 4},
                {"source", {{"file", file}, {"line", 21}, {"function", "<module>"}}}};
  };
  json r = {{"status", "diverged"},
            {"first_divergence",
             {{"kind", "value"}, {"cause", "arguments"}, {"detail", "a non-tensor argument differs"},
              {"a", side("/w/rw.py")}, {"b", side("/w/rw_cl.py")},
              {"argument", {{"name", "min"}, {"index", 1}, {"value_a", "-0.5"},
                            {"value_b", "-0.40000000000000002"}}}}}};
  const std::string text = tdbg::diff::format_divergence(r);
  INFO(text);
  CHECK(text.find("A /w/rw.py:21") != std::string::npos);
  CHECK(text.find("B /w/rw_cl.py:21") != std::string::npos);
  CHECK(text.find("another code path") == std::string::npos);
  CHECK(text.find("(the same line of another file in each run)") != std::string::npos);
  CHECK(text.find("argument: min (#1)  A -0.5  B -0.4\n") != std::string::npos);
  // A backward op (AccumulateGrad) is placed at a forward op's line, which the change may make
  // another one in each run: no code path or edit is claimed.
  json backward = r;
  for (const char* run : {"a", "b"}) backward["first_divergence"][run]["backward"] = true;
  backward["first_divergence"]["b"]["source"]["file"] = "/w/rw.py";
  backward["first_divergence"]["b"]["source"]["line"] = 25;
  const std::string placed = tdbg::diff::format_divergence(backward);
  INFO(placed);
  CHECK(placed.find("another code path") == std::string::npos);
  CHECK(placed.find("(a backward op, placed at the line of the forward op whose gradient it "
                    "computes") != std::string::npos);
  CHECK(tdbg::diff::number_text("0.050000000000000003") == "0.05");
  CHECK(tdbg::diff::number_text("1.0000000000000000") == "1.0");
  CHECK(tdbg::diff::number_text("1e-08") == "1e-08");
  CHECK(tdbg::diff::number_text("[0.10000000000000001, 2]") == "[0.10000000000000001, 2]");
  CHECK(tdbg::diff::number_text("3") == "3");
  CHECK(tdbg::diff::number_text("nan") == "nan");
}

TEST_CASE("operands swapped: an input from another op, or another of an op's outputs or views") {
  // A computes h - g, B computes g - h: sub's input 0 comes from another op in each run. Then
  // a chunk's two views passed the other way round: the same producer, other views.
  using T = Recorder::T;
  auto write = [](bool swap_ops, bool swap_views) {
    return write_ops([&](Recorder& r) {
      T h{11}, g{12};
      h.producer = r.op("aten::tanh", {T{10}}, {h}, {}, 0, 0, kNoSeq, 5);
      g.producer = r.op("aten::sigmoid", {T{10}}, {g}, {}, 0, 0, kNoSeq, 6);
      T y{swap_ops ? 14u : 13u};
      r.op("aten::sub", {swap_ops ? g : h, swap_ops ? h : g}, {y}, {}, 0, 0, kNoSeq, 7);
      T first{21, kNoSeq, "32x4", TensorStatus::kView}, second{22, kNoSeq, "32x4", TensorStatus::kView};
      first.summary = second.summary = false;
      int64_t chunk = r.op("aten::chunk", {T{13}}, {first, second}, {}, 0, 0, kNoSeq, 8);
      first.producer = second.producer = chunk;
      r.op("aten::add", {swap_views ? second : first}, {T{swap_views ? 32u : 31u, kNoSeq, "32x4"}},
           {{"other", "2"}}, 0, 0, kNoSeq, 9);
    });
  };
  json ops = first(compare(write(false, false), write(true, false)));
  CHECK(ops["cause"] == "structure");
  CHECK(ops["a"]["op"] == "aten::sub");
  CHECK(ops["detail"].get<std::string>().find("comes from another op in each run (A: op 0, B: op 1)") !=
        std::string::npos);
  // Which ops, and where, without a trip to `tdbg show`.
  CHECK(ops["detail"].get<std::string>().find("A's is aten::tanh at train.py:5, B's is "
                                              "aten::sigmoid at train.py:6") != std::string::npos);
  // Both made by the same line (a loop over a set): the text names it once, and why.
  auto write_loop = [](bool swap_ops) {
    return write_ops([&](Recorder& r) {
      T h{11}, g{12};
      h.producer = r.op("aten::tanh", {T{10}}, {h}, {}, 0, 0, kNoSeq, 5);
      g.producer = r.op("aten::tanh", {T{9}}, {g}, {}, 0, 0, kNoSeq, 5);
      r.op("aten::sub", {swap_ops ? g : h, swap_ops ? h : g}, {T{swap_ops ? 14u : 13u}}, {}, 0, 0,
           kNoSeq, 7);
    });
  };
  json loop = first(compare(write_loop(false), write_loop(true)));
  CHECK(loop["cause"] == "structure");
  CHECK(loop["detail"].get<std::string>().find("; in both runs aten::tanh at train.py:5, which ran "
                                               "more than once, in another order") != std::string::npos);
  // Another variable: a view of x in A, new data in B, each made by another op.
  auto write_var = [](bool b_side) {
    return write_ops([&](Recorder& r) {
      T x{11}, y{12};
      x.producer = r.op("aten::relu", {T{10}}, {x}, {}, 0, 0, kNoSeq, 5);
      y.producer = r.op("aten::tanh", {T{10}}, {y}, {}, 0, 0, kNoSeq, 6);
      T v{21, kNoSeq, "32x8", TensorStatus::kView};
      v.summary = false;
      v.producer = r.op("aten::view", {x}, {v}, {{"size", "[32, 8]"}}, 0, 0, kNoSeq, 7);
      r.op("aten::mul", {b_side ? y : v}, {T{b_side ? 32u : 31u}}, {{"other", "2"}}, 0, 0,
           kNoSeq, 8);
    });
  };
  json var = first(compare(write_var(false), write_var(true)));
  CHECK(var["cause"] == "structure");
  CHECK(var["a"]["op"] == "aten::mul");
  CHECK(var["detail"].get<std::string>().find("a view in one, new data in the other") !=
        std::string::npos);
  json views = first(compare(write(false, false), write(false, true)));
  CHECK(views["cause"] == "structure");
  CHECK(views["a"]["op"] == "aten::add");
  CHECK(views["detail"].get<std::string>().find("a view of other memory") != std::string::npos);
}

TEST_CASE("an input whose values are not recorded: named, and after a structural change the cause") {
  // A sparse gradient (not hashed) made by an op inserted in B, then read by `_values`.
  using T = Recorder::T;
  auto write = [](bool inserted) {
    return write_ops([&](Recorder& r) {
      T grad{11, kNoSeq, "32x8", TensorStatus::kNotHashed};
      grad.summary = false;
      grad.producer = r.op("aten::embedding_dense_backward", {T{10}}, {grad}, {}, 0, 0, kNoSeq, 5);
      if (inserted) {
        grad.producer = r.op("aten::mul", {grad}, {grad}, {{"other", "1.0001"}}, 0, 0, kNoSeq, 6);
      }
      r.op("aten::_values", {grad}, {T{inserted ? 32u : 31u}}, {}, 0, 0, kNoSeq, 7);
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["value_after_structure"].is_object());
  CHECK(d["value_after_structure"]["a"]["op"] == "aten::_values");
  CHECK(d["value_after_structure"]["cause"] == "structure");
  CHECK(d["value_after_structure"]["detail"].get<std::string>().find("was not hashed") !=
        std::string::npos);
  // Without a structural change before it: still nondeterministic, but never "identical inputs".
  auto same_ops = [](uint64_t out) {
    return write_ops([&](Recorder& r) {
      T grad{11, kNoSeq, "32x8", TensorStatus::kNotHashed};
      grad.summary = false;
      grad.producer = r.op("aten::embedding_dense_backward", {T{10}}, {grad}, {}, 0, 0, kNoSeq, 5);
      r.op("aten::_values", {grad}, {T{out}}, {}, 0, 0, kNoSeq, 7);
    });
  };
  json n = first(compare(same_ops(31), same_ops(32)));
  CHECK(n["cause"] == "nondeterministic");
  CHECK(n["detail"].get<std::string>().find("input 0 was not hashed") != std::string::npos);
  CHECK(n["detail"].get<std::string>().find("identical inputs") == std::string::npos);
}

TEST_CASE("every carried input is named as possibly changed outside torch, the longest first") {
  // A NumPy buffer wrapped once (hashed at op 0) and a bias the optimizer updated just before.
  using T = Recorder::T;
  auto write = [](uint64_t out) {
    return write_ops([&](Recorder& r) {
      T data{11, kNoSeq, "32x8", TensorStatus::kKnown};
      data.producer = r.op("aten::lift_fresh", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 3);
      r.op("aten::relu", {T{40}}, {T{41}}, {}, 0, 0, kNoSeq, 4);
      T bias{12, kNoSeq, "32", TensorStatus::kKnown};
      bias.producer = r.op("aten::add_", {T{42}}, {T{12, kNoSeq, "32"}}, {}, 0, 0, kNoSeq, 5);
      r.op("aten::addmm", {bias, data}, {T{out}}, {}, 0, 0, kNoSeq, 7);
    });
  };
  json d = first(compare(write(31), write(32)));
  CHECK(d["cause"] == "external_input");
  // A batch cloned then written through .numpy() is carried for a short while only: both are
  // named, each with the op that made it.
  CHECK(d["detail"].get<std::string>().find(
            "so input 1 (made by aten::lift_fresh at train.py:3, op 0) or input 0 (made by "
            "aten::add_ at train.py:5, op 2) most likely changed outside torch's ops after it was "
            "made") != std::string::npos);
}

TEST_CASE("an input carried in one run only, hashed in the other, is named first") {
  // B writes a buffer through .numpy() (a view the next op reads with its carried hash); A
  // reads the buffer hashed. A's other input, made just before, is carried in both.
  using T = Recorder::T;
  auto write = [](bool numpy_write) {
    return write_ops([&](Recorder& r) {
      T buffer{11, kNoSeq, "32"};
      if (numpy_write) {
        buffer.status = TensorStatus::kView;
        buffer.producer = r.op("aten::detach", {T{10, kNoSeq, "32"}}, {T{11, kNoSeq, "32"}}, {}, 0, 0,
                               kNoSeq, 45);
      } else {
        r.op("aten::relu", {T{40}}, {T{41}}, {}, 0, 0, kNoSeq, 44);
      }
      T ema{12, kNoSeq, "32", TensorStatus::kKnown};
      ema.producer = r.op("aten::mul_", {T{42, kNoSeq, "32"}}, {T{12, kNoSeq, "32"}}, {}, 0, 0, kNoSeq, 52);
      r.op("aten::add_", {ema, buffer}, {T{numpy_write ? 32u : 31u, kNoSeq, "32"}}, {}, 0, 0, kNoSeq, 52);
    });
  };
  json d = first(compare(write(false), write(true)));
  REQUIRE(d["value_after_structure"].is_object());
  const std::string detail = d["value_after_structure"]["detail"];
  INFO(detail);
  CHECK(detail.find("input 1 (made by aten::detach at train.py:45, B's op 0) or input 0") != std::string::npos);
}

TEST_CASE("runs with other thread counts: a differing output is the kernels', not a carried input") {
  using T = Recorder::T;
  auto write = [](uint64_t out, const std::string& threads, const std::string& history = "") {
    return write_ops(
        [&](Recorder& r) {
          T index{11, kNoSeq, "8", TensorStatus::kKnown};
          index.producer = r.op("aten::randint", {}, {T{11, kNoSeq, "8"}}, {}, 0x5, 0, kNoSeq, 3);
          r.op("aten::index_put_", {T{40}, index}, {T{out}}, {{"accumulate", "True"}}, 0, 0, kNoSeq, 7);
        },
        [&](tdbg::tracer::Writer& w) {
          w.set_meta("num_threads", threads);
          w.set_meta("num_threads_history", history.empty() ? threads + "@0" : history);
          w.set_meta("end_time_ns", "1");
        });
  };
  json d = first(compare(write(31, "1"), write(32, "2")));
  CHECK(d["cause"] == "nondeterministic");
  const std::string detail = d["detail"];
  CHECK(detail.find("num_threads (A 1, B 2)") != std::string::npos);
  CHECK(detail.find("changed outside torch's ops") == std::string::npos);
  // The same 2 threads in both runs: an accumulating CPU kernel races; no carried-input story.
  json same = first(compare(write(31, "2"), write(32, "2")));
  CHECK(same["cause"] == "nondeterministic");
  CHECK(same["detail"].get<std::string>().find("accumulates in the order its 2 threads race in") !=
        std::string::npos);
  CHECK(same["detail"].get<std::string>().find("changed outside torch's ops") == std::string::npos);
  // With one thread it repeats exactly: the carried input is the explanation.
  json one = first(compare(write(31, "1"), write(32, "1")));
  CHECK(one["cause"] == "external_input");
  // One thread at the end of both, but B ran two for a while: that is said, with the steps.
  json r = compare(write(31, "1"), write(32, "1", "1@0,2@3,1@4"));
  json set_back = first(r);
  CHECK(set_back["cause"] == "nondeterministic");
  CHECK(set_back["detail"].get<std::string>().find("num_threads (A 1, B 1; 2 from step 3; 1 from step 4)") !=
        std::string::npos);
  CHECK(r["settings"][0] == json({{"key", "num_threads"}, {"a", "1"}, {"b", "1; 2 from step 3; 1 from step 4"}}));
}

TEST_CASE("the same ops in another order are named as such, not only as inserts and removals") {
  using T = Recorder::T;
  auto write = [](bool swapped, bool in_step = false) {
    return write_ops(
        [&](Recorder& r) {
          r.op("aten::neg", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
          auto first = [&] { r.op("aten::relu", {T{12}}, {T{13}}, {}, 0, 0, kNoSeq, 5);
                             r.op("aten::tanh", {T{14}}, {T{15}}, {}, 0, 0, kNoSeq, 6); };
          auto second = [&] { r.op("aten::exp", {T{16}}, {T{17}}, {}, 0, 0, kNoSeq, 7);
                              r.op("aten::sin", {T{18}}, {T{19}}, {}, 0, 0, kNoSeq, 8); };
          if (swapped) { second(); first(); } else { first(); second(); }
          r.op("aten::cos", {T{20}}, {T{21}}, {}, 0, 0, kNoSeq, 9);
        },
        [&](tdbg::tracer::Writer& w) {
          if (in_step) add_step_region(w, 1, 1, 4);  // the moved ops inside optimizer.step()
        });
  };
  // Inside optimizer.step(): the parameters in another order (param groups built another way).
  const std::string stepped = first(compare(write(false, true), write(true, true)))["detail"];
  CHECK(stepped.find("inside optimizer.step(): the parameters updated in another order") != std::string::npos);
  json d = first(compare(write(false), write(true)));
  CHECK(d["detail"].get<std::string>().find("inside optimizer.step()") == std::string::npos);
  CHECK(d["kind"] == "structure");
  CHECK(d.value("reordered", false));
  CHECK(d["detail"].get<std::string>().find("the same ops ran in another order") != std::string::npos);
  // Each op from its own line in both runs: the order was chosen at run time (or the line
  // rewritten), which is where to look.
  CHECK(d["reordered_lines"] == "same");
  CHECK(d["detail"].get<std::string>().find("such as iterating a set") != std::string::npos);
  // The moved ops computed the same as in A: nothing differs.
  CHECK_FALSE(d.contains("moved_ops_differ"));
  CHECK(d["value_after_structure"].is_null());
  // The statements moved in the code (layers created in another order): each op runs from
  // another line in B, and no set or dict is to blame.
  auto moved_code = write_ops([&](Recorder& r) {
    r.op("aten::neg", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
    r.op("aten::exp", {T{16}}, {T{17}}, {}, 0, 0, kNoSeq, 5);
    r.op("aten::sin", {T{18}}, {T{19}}, {}, 0, 0, kNoSeq, 6);
    r.op("aten::relu", {T{12}}, {T{13}}, {}, 0, 0, kNoSeq, 7);
    r.op("aten::tanh", {T{14}}, {T{15}}, {}, 0, 0, kNoSeq, 8);
    r.op("aten::cos", {T{20}}, {T{21}}, {}, 0, 0, kNoSeq, 9);
  });
  json m = first(compare(write(false), moved_code));
  CHECK(m.value("reordered", false));
  CHECK(m["reordered_lines"] == "other");
  CHECK(m["detail"].get<std::string>().find("set or a dict") == std::string::npos);
  CHECK(m["detail"].get<std::string>().find("statements of the code in another order") !=
        std::string::npos);
  // An inserted op is no reorder.
  auto inserted = write_ops([&](Recorder& r) {
    r.op("aten::neg", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
    r.op("aten::relu", {T{12}}, {T{13}}, {}, 0, 0, kNoSeq, 5);
    r.op("aten::tanh", {T{14}}, {T{15}}, {}, 0, 0, kNoSeq, 6);
    r.op("aten::abs", {T{14}}, {T{30}}, {}, 0, 0, kNoSeq, 6);
    r.op("aten::exp", {T{16}}, {T{17}}, {}, 0, 0, kNoSeq, 7);
    r.op("aten::sin", {T{18}}, {T{19}}, {}, 0, 0, kNoSeq, 8);
    r.op("aten::cos", {T{20}}, {T{21}}, {}, 0, 0, kNoSeq, 9);
  });
  json i = first(compare(write(false), inserted));
  CHECK(i["kind"] == "structure");
  CHECK_FALSE(i.value("reordered", false));
}

TEST_CASE("after a structural change, an input made before it by another op in each run names both ops") {
  // Weight tying: the head reads the embedding's weight in B, its own in A. Both were made
  // before the change (an op A runs and B does not), so "made by the change" would be false.
  using T = Recorder::T;
  auto write = [](bool tied) {
    return write_ops([&](Recorder& r) {
      r.op("aten::normal_", {T{1}}, {T{10}}, {}, 0, 0, kNoSeq, 56);
      r.op("aten::uniform_", {T{2}}, {T{20}}, {}, 0, 0, kNoSeq, 59);
      if (!tied) r.op("aten::detach", {T{20}}, {T{21}}, {}, 0, 0, kNoSeq, 68);
      auto from = [](uint64_t hash, int64_t seq) {
        T t{hash};
        t.producer = seq;
        return t;
      };
      r.op("aten::linear", {T{30}, tied ? from(10, 0) : from(20, 1)}, {T{tied ? 41u : 40u}}, {}, 0, 0,
           kNoSeq, 65);
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["value_after_structure"].is_object());
  const std::string detail = d["value_after_structure"]["detail"];
  CHECK(detail.find("input 1 comes from another op in each run, both before the change (A: op 1, "
                    "aten::uniform_ at train.py:59; B: op 0, aten::normal_ at train.py:56)") !=
        std::string::npos);
  CHECK(detail.find("changed by the structural change") == std::string::npos);
}

TEST_CASE("ops that moved are compared with their counterparts: an EMA updated before the optimizer step") {
  using T = Recorder::T;
  // Each step: a forward op, the optimizer's in-place update of the weight, and the EMA's
  // update from the weight (a function at line 11, called from line 21 after the step in A,
  // from line 18 before it in B). B's EMA reads the weight before its update: other values.
  auto write = [](bool before, int steps = 3) {
    return write_ops([&](Recorder& r) {
      uint64_t weight = 100, ema = 200;
      for (int s = 0; s < steps; ++s) {
        r.step = s;
        r.op("aten::mm", {T{weight}}, {T{uint64_t(300 + s)}}, {}, 0, 0, kNoSeq, 15);
        auto ema_update = [&](int caller) {
          r.caller_line = caller;
          const uint64_t next = ema * 31 + weight;
          r.op("aten::add_", {T{ema}, T{weight}}, {T{next}}, {{"alpha", "0.1"}}, 0, 0, kNoSeq, 11);
          ema = next;
          r.caller_line = 0;
        };
        if (before) ema_update(18);
        // The optimizer's step, more ops than the EMA's (which the alignment then moves).
        r.op("aten::mul", {T{uint64_t(300 + s)}}, {T{uint64_t(400 + s)}}, {}, 0, 0, kNoSeq, 19);
        r.op("aten::sqrt", {T{uint64_t(400 + s)}}, {T{uint64_t(500 + s)}}, {}, 0, 0, kNoSeq, 19);
        r.next_flags = tdbg::tracer::kOpInplace;
        r.op("aten::sub_", {T{weight}, T{uint64_t(500 + s)}}, {T{weight + 1}}, {}, 0, 0, kNoSeq, 19);
        ++weight;
        if (!before) ema_update(21);
      }
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  CHECK(d.value("reordered", false));
  // The same line, called from other lines: a call moved, not a set iterated in another order.
  CHECK(d["reordered_lines"] == "calls");
  CHECK(d["detail"].get<std::string>().find("called from other lines") != std::string::npos);
  // Not "the change added or moved work, not results": the EMA differs.
  CHECK(d["values_same"].is_null());
  CHECK(d["moved_ops_differ"] == 3);
  REQUIRE(d["value_after_structure"].is_object());
  const json& v = d["value_after_structure"];
  CHECK(v.value("moved", false));
  CHECK(v["a"]["op"] == "aten::add_");
  CHECK(v["a"]["step"] == 0);
  CHECK(v["cause"] == "structure");
  CHECK(v["detail"].get<std::string>().find("input 1 differs") != std::string::npos);
  const std::string text = tdbg::diff::format_divergence(compare(write(false), write(true)));
  CHECK(text.find("first value difference after the change, in an op that moved: aten::add_") !=
        std::string::npos);
  CHECK(text.find("every op paired has the same values") == std::string::npos);
  // More moved ops than are compared (65536): nothing is said of their values, and values
  // are not called the same.
  json many = first(compare(write(false, 33000), write(true, 33000)));
  CHECK(many["kind"] == "structure");
  CHECK(many["values_same"].is_null());
}

TEST_CASE("a replacement that leaves other values no later op reads is no 'work, not results'") {
  using T = Recorder::T;
  // Each step trains (mm, sub_) and updates an EMA of the weight that nothing reads: in A with
  // mul_ and add_, in B with one lerp_ (`ema_b`: the value it leaves; 0: A's).
  auto write = [](bool lerp, uint64_t ema_b) {
    return write_ops([&](Recorder& r) {
      for (uint64_t s = 0; s < 6; ++s) {
        r.step = static_cast<int32_t>(s);
        r.op("aten::mm", {T{100 + s}}, {T{200 + s}}, {}, 0, 0, kNoSeq, 10);
        r.op("aten::relu", {T{200 + s}}, {T{250 + s}}, {}, 0, 0, kNoSeq, 10);
        r.op("aten::mse_loss", {T{250 + s}}, {T{270 + s}}, {}, 0, 0, kNoSeq, 10);
        r.op("aten::sub_", {T{300 + s}, T{200 + s}}, {T{301 + s}}, {}, 0, 0, kNoSeq, 11);
        if (lerp) {
          r.op("aten::lerp_", {T{500 + 10 * s}, T{301 + s}}, {T{(ema_b ? ema_b : 502) + 10 * s}},
               {{"weight", "0.1"}}, 0, 0, kNoSeq, 13);
        } else {
          r.op("aten::mul_", {T{500 + 10 * s}}, {T{501 + 10 * s}}, {{"other", "0.9"}}, 0, 0, kNoSeq, 13);
          r.op("aten::add_", {T{501 + 10 * s}, T{301 + s}}, {T{502 + 10 * s}}, {{"alpha", "0.1"}}, 0, 0,
               kNoSeq, 14);
        }
      }
      // An evaluation at the end, which reads the weight (not the EMA).
      for (uint64_t k = 0; k < 3; ++k) r.op("aten::linear", {T{306}}, {T{700 + k}}, {}, 0, 0, kNoSeq, 20);
    });
  };
  const std::string a = write(false, 0);
  json r = compare(a, write(true, 900));
  json d = first(r);
  CHECK(d["kind"] == "structure");
  CHECK(d["values_same"].is_null());
  REQUIRE(d["values_left_differ"].is_object());
  CHECK(d["values_left_differ"]["a"]["op"] == "aten::add_");
  CHECK(d["values_left_differ"]["b"]["op"] == "aten::lerp_");
  const std::string text = tdbg::diff::format_divergence(r);
  CHECK(text.find("the changed ops leave other values, which no later op compared reads") != std::string::npos);
  CHECK(text.find("not results") == std::string::npos);
  // The same EMA written another way: the same values, work and not results.
  d = first(compare(a, write(true, 0)));
  CHECK(d["values_same"].is_object());
  CHECK(d["values_left_differ"].is_null());
  // Zeros left are no result: A zeroes a gradient where B has none yet (`zero_grad()` before a
  // resumed run's first backward, which makes its gradients afresh), and B's stretch leaves
  // only a profiler handle of zeros.
  auto zeroing = [](bool zero) {
    return write_ops([&](Recorder& r) {
      for (uint64_t s = 0; s < 6; ++s) {
        r.step = static_cast<int32_t>(s);
        if (s == 2) {
          T zeros{zero ? 800u : 810u, kNoSeq, zero ? "32x8" : "1"};
          zeros.sum = 0;
          zeros.min = zeros.max = 0;
          if (zero)
            r.op("aten::zero_", {T{799}}, {zeros}, {}, 0, 0, kNoSeq, 9);
          else
            r.op("aten::zeros", {}, {zeros}, {}, 0, 0, kNoSeq, 8);
        }
        r.op("aten::mm", {T{100 + s}}, {T{200 + s}}, {}, 0, 0, kNoSeq, 10);
        r.op("aten::sub_", {T{300 + s}, T{200 + s}}, {T{301 + s}}, {}, 0, 0, kNoSeq, 11);
      }
    });
  };
  d = first(compare(zeroing(true), zeroing(false)));
  CHECK(d["kind"] == "structure");
  CHECK(d["values_left_differ"].is_null());
  CHECK(d["values_same"].is_object());
}

TEST_CASE("two ops of a kind swapped are compared where they stand, not a structural change") {
  using T = Recorder::T;
  // `l.mul_(0.5); a.mul_(0.5)` in A, the other way round in B: each op is the other's next,
  // no insertion; the first pair reads another tensor in each run.
  auto swapped = [](bool b_first) {
    return write_ops([&](Recorder& r) {
      const int64_t l = r.op("aten::clone", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 9);
      const int64_t a = r.op("aten::clone", {T{20}}, {T{21}}, {}, 0, 0, kNoSeq, 9);
      const T lin{11, l}, ain{21, a};
      r.op("aten::mul_", {b_first ? ain : lin}, {T{b_first ? 22u : 12u}}, {{"other", "0.5"}}, 0, 0, kNoSeq,
           b_first ? 13 : 11);
      r.op("aten::mul_", {b_first ? lin : ain}, {T{b_first ? 12u : 22u}}, {{"other", "0.5"}}, 0, 0, kNoSeq,
           b_first ? 13 : 11);
      r.op("aten::add", {T{12}, T{22}}, {T{30}}, {}, 0, 0, kNoSeq, 14);
    });
  };
  json r = compare(swapped(false), swapped(true));
  json d = first(r);
  CHECK(d["a"]["op"] == "aten::mul_");
  CHECK(d["b"]["op"] == "aten::mul_");
  CHECK(d["cause"] == "structure");
  const std::string text = tdbg::diff::format_divergence(r);
  INFO(text);
  CHECK(text.rfind("diverged at aten::mul_ (seq 2", 0) == 0);
}

TEST_CASE("ops replaced on another code path print both stacks and paired ops one") {
  using T = Recorder::T;
  // The same user line updates the weight by another function in each run (AdamW's against
  // Adam's): B's stack is printed too, since the frames that differ are the answer.
  auto update = [](const std::string& op, int line) {
    return write_ops([&](Recorder& r) {
      r.op("aten::linear", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      r.op(op, {T{11}}, {T{12}}, {}, 0, 0, kNoSeq, line);
      r.op("aten::relu", {T{12}}, {T{13}}, {}, 0, 0, kNoSeq, 6);
    });
  };
  const std::string text = tdbg::diff::format_divergence(compare(update("aten::mul_", 270), update("aten::add", 354)));
  INFO(text);
  CHECK(text.find("stack (A, innermost last):\n    train.py:270 forward") != std::string::npos);
  CHECK(text.find("stack (B, innermost last):\n    train.py:354 forward") != std::string::npos);
  const std::string same = tdbg::diff::format_divergence(compare(update("aten::mul_", 270), update("aten::add", 270)));
  CHECK(same.find("stack (A") != std::string::npos);
  CHECK(same.find("stack (B") == std::string::npos);
}

TEST_CASE("a replacement whose values are read on, or made by an outer op, is work, not results") {
  using T = Recorder::T;
  // A mask made in two ways: A fills a zeroed buffer in place (masked_fill_); B reshapes an
  // expanded view, whose reshape returns the value and nests a clone of another shape. The
  // value both leave is the reshape's, not the clone's.
  auto mask = [](bool reshape) {
    return write_ops([&](Recorder& r) {
      r.op("aten::linear", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      for (uint64_t s = 0; s < 3; ++s) {
        r.step = static_cast<int32_t>(s);
        if (reshape) {
          const int64_t outer = r.op("aten::reshape", {T{20}}, {T{50}}, {}, 0, 0, kNoSeq, 5);
          r.op("aten::clone", {T{20}}, {T{60, kNoSeq, "4x2x1x8"}}, {}, 0, 1, outer, 5);
        } else {
          r.op("aten::zero_", {T{30}}, {T{40}}, {}, 0, 0, kNoSeq, 6);
          r.op("aten::masked_fill_", {T{40}}, {T{50}}, {}, 0, 0, kNoSeq, 6);
        }
        r.op("aten::baddbmm", {T{11}, T{50}}, {T{70 + s}}, {}, 0, 0, kNoSeq, 7);
        r.op("aten::softmax", {T{70 + s}}, {T{80 + s}}, {}, 0, 0, kNoSeq, 7);
        r.op("aten::bmm", {T{80 + s}}, {T{90 + s}}, {}, 0, 0, kNoSeq, 7);
      }
    });
  };
  json d = first(compare(mask(false), mask(true)));
  CHECK(d["kind"] == "structure");
  CHECK(d["values_left_differ"].is_null());
  CHECK(d["values_same"].is_object());
  // Two augmentations swapped: A flips the image, then crops it (a slice: a view, no value);
  // B crops (narrow), then flips the crop. A's flip leaves a value B never makes, but the op
  // after the change reads it, through the crop, in both runs, with the same values.
  auto augment = [](bool crop_first) {
    return write_ops([&](Recorder& r) {
      r.op("aten::linear", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      for (uint64_t s = 0; s < 3; ++s) {
        r.step = static_cast<int32_t>(s);
        const uint64_t image = 100 + 10 * s;
        int64_t last;
        if (crop_first) {
          const int64_t crop = r.op("aten::narrow", {T{image}}, {T{image + 1, kNoSeq, "24x8", TensorStatus::kView}},
                                    {}, 0, 0, kNoSeq, 8);
          last = r.op("aten::where", {T{image + 1, crop, "24x8", TensorStatus::kView}},
                      {T{image + 3, kNoSeq, "24x8"}}, {}, 0, 0, kNoSeq, 9);
        } else {
          const int64_t flip = r.op("aten::where", {T{image}}, {T{image + 2}}, {}, 0, 0, kNoSeq, 9);
          last = r.op("aten::slice", {T{image + 2, flip}}, {T{image + 4, kNoSeq, "24x8", TensorStatus::kView}},
                      {}, 0, 0, kNoSeq, 8);
        }
        r.op("aten::clone", {T{crop_first ? image + 3 : image + 4, last, "24x8",
                               crop_first ? TensorStatus::kHashed : TensorStatus::kView}},
             {T{image + 5, kNoSeq, "24x8"}}, {}, 0, 0, kNoSeq, 10);
        r.op("aten::mm", {T{image + 5, kNoSeq, "24x8"}}, {T{image + 6}}, {}, 0, 0, kNoSeq, 11);
        r.op("aten::mean", {T{image + 6}}, {T{image + 7}}, {}, 0, 0, kNoSeq, 11);
      }
    });
  };
  d = first(compare(augment(false), augment(true)));
  CHECK(d["kind"] == "structure");
  CHECK(d["values_left_differ"].is_null());
  CHECK(d["values_same"].is_object());
}

TEST_CASE("micro-batches that moved into other optimizer steps name the step call, not a set's order") {
  using T = Recorder::T;
  // Gradient accumulation over 16 micro-batches: A steps after micro-batches 3, 7, 11, 15, B
  // (off by one) after 0, 4, 8, 12, and not after its last three.
  auto write = [](bool off_by_one) {
    return write_ops([&](Recorder& r) {
      uint64_t weight = 900;
      for (uint64_t i = 0; i < 16; ++i) {
        r.op("aten::linear", {T{100 + i}, T{weight}}, {T{200 + i}}, {}, 0, 0, kNoSeq, 17);
        r.op("aten::mse_loss", {T{200 + i}}, {T{300 + i}}, {}, 0, 0, kNoSeq, 17);
        r.next_flags = tdbg::tracer::kOpBackward;  // the micro-batch's backward
        r.op("aten::mm", {T{300 + i}}, {T{400 + i}}, {}, 0, 0, kNoSeq, 18);
        if (off_by_one ? i % 4 == 0 : (i + 1) % 4 == 0) {
          r.next_flags = tdbg::tracer::kOpInplace;
          r.op("aten::sub_", {T{weight}, T{400 + i}}, {T{weight + 1}}, {}, 0, 0, kNoSeq, 21);
          r.op("aten::zero_", {T{400 + i}}, {T{0}}, {}, 0, 0, kNoSeq, 21);
          ++weight;
          ++r.step;
        }
      }
    });
  };
  json d = first(compare(write(false), write(true)));
  INFO(d.dump());
  CHECK(d["kind"] == "structure");
  CHECK(d.value("reordered", false));
  CHECK(d.value("reordered_steps", false));
  CHECK(d["detail"].get<std::string>().find("into other optimizer steps: optimizer.step() is called "
                                            "after another number of iterations") != std::string::npos);
}

TEST_CASE("an input made by an op inside the change names that op, not only the change") {
  using T = Recorder::T;
  // B clamps the activation (a hook inserted at line 64) before the gelu reads it.
  auto write = [](bool hook) {
    return write_ops([&](Recorder& r) {
      T h{20};
      h.producer = r.op("aten::mm", {T{10}}, {h}, {}, 0, 0, kNoSeq, 50);
      if (hook) {
        T clamped{21};
        clamped.producer = r.op("aten::clamp", {h}, {clamped}, {{"max", "1.0"}}, 0, 0, kNoSeq, 64);
        h = clamped;
      }
      r.op("aten::gelu", {h}, {T{hook ? 31u : 30u}}, {}, 0, 0, kNoSeq, 51);
      for (uint64_t k = 0; k < 4; ++k) r.op("aten::relu", {T{40 + k}}, {T{50 + k}}, {}, 0, 0, kNoSeq, 52);
    });
  };
  json d = first(compare(write(false), write(true)));
  REQUIRE(d["value_after_structure"].is_object());
  const std::string detail = d["value_after_structure"]["detail"];
  INFO(detail);
  CHECK(detail.find("comes from ops changed by the structural change") != std::string::npos);
  CHECK(detail.find("B: made by op 1, aten::clamp at train.py:64") != std::string::npos);
}

TEST_CASE("an extra optimizer.step() call: the next iteration's first op that reads other weights") {
  using T = Recorder::T;
  // Each iteration: a forward op reading the weight, then `optimizer.step()` (line 30): the
  // record_function handle made before the step region opens, a momentum update and the
  // weight's in-place update inside it. B calls the step twice per iteration (`kExtraStep`),
  // or once more after another op (`kExtraForward`), which no longer pairs iterations.
  enum Variant { kBase, kExtraStep, kExtraForward };
  auto write = [](Variant v) {
    std::vector<std::pair<int64_t, int64_t>> regions;
    std::string path = write_ops(
        [&](Recorder& r) {
          uint64_t weight = 100;
          int64_t weight_seq = kNoSeq, grad_seq = kNoSeq;
          uint64_t grad = 0;
          auto forward = [&](uint64_t data, int line) {
            const uint64_t out = weight * 7 + data;
            const int64_t mm = r.op("aten::mm", {T{data}, T{weight, weight_seq}}, {T{out}}, {}, 0, 0,
                                    kNoSeq, line);
            const int64_t relu = r.op("aten::relu", {T{out, mm}}, {T{out * 3}}, {}, 0, 0, kNoSeq, line);
            const int64_t loss = r.op("aten::mse_loss", {T{out * 3, relu}}, {T{out * 5}}, {}, 0, 0, kNoSeq, line + 1);
            const int64_t seed = r.op("aten::ones_like", {T{out * 5, loss}}, {T{1}}, {}, 0, 0, kNoSeq, line + 2);
            const int64_t back = r.op("aten::mse_loss_backward", {T{1, seed}, T{out * 3, relu}}, {T{out * 9}}, {},
                                      0, 0, kNoSeq, line + 2);
            grad = out * 11;
            grad_seq = r.op("aten::threshold_backward", {T{out * 9, back}}, {T{grad}}, {}, 0, 0, kNoSeq, line + 2);
          };
          auto step_call = [&]() {
            r.op("aten::zeros", {}, {T{7}}, {{"size", "[1]"}}, 0, 0, kNoSeq, 30);
            const int64_t begin =
                r.op("aten::mul", {T{grad, grad_seq}}, {T{grad * 3}}, {}, 0, 0, kNoSeq, 30);
            r.next_flags = tdbg::tracer::kOpInplace;
            weight_seq = r.op("aten::sub_", {T{weight, weight_seq}, T{grad * 3, begin}},
                              {T{weight * 13 + grad}}, {}, 0, 0, kNoSeq, 30);
            weight = weight * 13 + grad;
            regions.emplace_back(begin, weight_seq);
            ++r.step;
          };
          for (int s = 0; s < 12; ++s) {
            forward(900 + s, 20);
            step_call();
            if (v == kExtraStep) step_call();
            if (v == kExtraForward && s == 0) {
              r.op("aten::dropout", {T{grad, grad_seq}}, {T{grad * 17}}, {}, 0, 0, kNoSeq, 26);
              step_call();
            }
          }
        },
        [&](tdbg::tracer::Writer& w) {
          uint32_t id = 1;
          for (auto [begin, end] : regions) {
            tdbg::tracer::RegionRecord region;
            region.id = id++;
            region.name = w.intern("Optimizer.step#SGD.step");
            region.kind = tdbg::tracer::RegionKind::kStep;
            region.start_seq = begin;
            region.end_seq = end;
            w.append_region(region);
          }
        });
    return path;
  };
  json d = first(compare(write(kBase), write(kExtraStep)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["value_after_structure"].is_object());
  const json& v = d["value_after_structure"];
  CHECK(v["a"]["op"] == "aten::mm");
  CHECK(v["a"]["step"] == 1);
  CHECK(v["b"]["step"] == 2);
  CHECK(v["cause"] == "structure");
  // Ops other than the step's shifted the steps: other iterations pair from there.
  d = first(compare(write(kBase), write(kExtraForward)));
  CHECK(d["kind"] == "structure");
  CHECK(d["value_after_structure"].is_null());
}

TEST_CASE("an op with no tensor input that makes other data with equal arguments read it from outside") {
  using T = Recorder::T;
  // `torch.from_file` of a file one run changed: no tensor input, no generator, the same
  // arguments; not a nondeterministic kernel.
  auto run = [](uint64_t data) {
    return write_ops([&](Recorder& r) {
      r.op("aten::from_file", {}, {T{data}}, {{"filename", "'x.bin'"}, {"size", "16"}}, 0, 0, kNoSeq, 7);
      r.op("aten::sin", {T{data, 0}}, {T{data * 3}}, {}, 0, 0, kNoSeq, 8);
    });
  };
  json d = first(compare(run(5), run(6)));
  CHECK(d["kind"] == "value");
  CHECK(d["a"]["op"] == "aten::from_file");
  CHECK(d["cause"] == "external_input");
  CHECK(d["detail"].get<std::string>().find("outside torch's ops") != std::string::npos);
}

TEST_CASE("a block called once more is the inserted call, not a value difference in the next block") {
  using T = Recorder::T;
  // `for b in blocks: x = b(x)` with B calling blocks.0 twice: each call a norm (no weight:
  // the same output for the same input) and a linear that reads the block's own weight. B's
  // second call of blocks.0 takes the same input A's blocks.1 does.
  auto run = [](bool twice) {
    return write_ops([&](Recorder& r) {
      uint64_t x = 7;
      int64_t made = kNoSeq;
      auto call = [&](int block) {
        r.root_module = "Net.blocks." + std::to_string(block);
        const uint64_t normed = x * 3 + 1;
        const int64_t norm = r.op("aten::layer_norm", {T{x, made}}, {T{normed}}, {}, 0, 0, kNoSeq, 13);
        const uint64_t weight = 1000 + uint64_t(block);
        x = normed * 5 + weight;
        made = r.op("aten::linear", {T{normed, norm}, T{weight, kNoSeq, "8x8"}}, {T{x}}, {}, 0, 0, kNoSeq, 14);
        r.op("aten::relu", {T{x, made}}, {T{x + 1}}, {}, 0, 0, kNoSeq, 15);
        x = x + 1;
      };
      r.root_module = "Net";
      r.op("aten::embedding", {T{3}}, {T{x}}, {}, 0, 0, kNoSeq, 10);
      call(0);
      if (twice) call(0);
      call(1);
      r.root_module = "Net.head";
      r.op("aten::linear", {T{x, made}, T{2000, kNoSeq, "8x8"}}, {T{x * 11}}, {}, 0, 0, kNoSeq, 20);
    });
  };
  json d = first(compare(run(false), run(true)));
  INFO(d.dump().substr(0, 2000));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["structural_changes"].size() >= 1);
  const json& c = d["structural_changes"][0];
  CHECK(c["type"] == "inserted");
  CHECK(c["a_range"] == json::array({4, 4}));
  CHECK(c["b_range"] == json::array({4, 7}));
  REQUIRE(d["b"].is_object());
  CHECK(d["b"]["module"] == "Net.blocks.0");
}

TEST_CASE("after a structural change, another layout of the same values is no value difference") {
  using T = Recorder::T;
  // `W.t()` against `W.t().contiguous()`: B copies, and the matmul reads the same values in
  // another layout and makes the same output.
  auto run = [](bool contiguous) {
    return write_ops([&](Recorder& r) {
      r.op("aten::neg", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      T in{12};
      in.shape = "32x8 strides 1x32";
      if (contiguous) {
        r.op("aten::contiguous", {in}, {T{12}}, {}, 0, 0, kNoSeq, 5);
        in.shape = "32x8";
      }
      r.op("aten::mm", {T{11}, in}, {T{13}}, {}, 0, 0, kNoSeq, 6);
      for (int k = 0; k < 4; ++k) r.op("aten::relu", {T{13u + k}}, {T{14u + k}}, {}, 0, 0, kNoSeq, 7);
    });
  };
  json d = first(compare(run(false), run(true)));
  CHECK(d["kind"] == "structure");
  CHECK(d["value_after_structure"].is_null());
  CHECK(d["values_same"].is_object());
}

TEST_CASE(
    "after a structural change, token ids laid out otherwise with other values are no layout "
    "cause") {
  using T = Recorder::T;
  // A embeds a slice of a token buffer (a view, strided); B first copies it and rewrites one
  // token (new data). Integers read in another layout are the same numbers: an output that
  // moved by more than rounding (here 1e-4 of its size, below float data's 1e-3) read other
  // ones.
  auto run = [](bool rewritten) {
    return write_ops([&](Recorder& r) {
      r.op("aten::neg", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      T tokens{12, kNoSeq, "8x64 strides 65x1", TensorStatus::kView};
      tokens.summary = false;
      tokens.dtype = DType::kInt64;
      tokens.producer = r.op("aten::slice", {T{9}}, {tokens}, {{"end", "64"}}, 0, 0, kNoSeq, 5);
      if (rewritten) {
        T copy{20, kNoSeq, "8x64"};
        copy.dtype = DType::kInt64;
        copy.producer = r.op("aten::clone", {tokens}, {copy}, {}, 0, 0, kNoSeq, 5);
        tokens = copy;
      }
      T out{rewritten ? 31u : 30u, kNoSeq, "8x64x16"};
      out.sum = rewritten ? 100.01 : 100.0;
      r.op("aten::embedding", {T{11}, tokens}, {out}, {}, 0, 0, kNoSeq, 6);
    });
  };
  json d = first(compare(run(false), run(true)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["value_after_structure"].is_object());
  INFO(d["value_after_structure"]["detail"]);
  CHECK(d["value_after_structure"]["cause"] == "structure");
  CHECK(d["value_after_structure"]["detail"].get<std::string>().find(
            "the input holds other values") != std::string::npos);
}

TEST_CASE("a rewrite whose values differ at rounding level after it says so") {
  using T = Recorder::T;
  // `x / 3` against `x * (1 / 3)`: another op, and values that differ in the last bits.
  auto run = [](bool mul, double sum) {
    return write_ops([&](Recorder& r) {
      r.op("aten::neg", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      T out{mul ? 13u : 12u};
      out.sum = sum;
      const int64_t made = r.op(mul ? "aten::mul" : "aten::div", {T{11}}, {out}, {}, 0, 0, kNoSeq, 5);
      T in = out;
      in.producer = made;
      T loss{mul ? 15u : 14u};
      loss.sum = sum;
      r.op("aten::relu", {in}, {loss}, {}, 0, 0, kNoSeq, 6);
    });
  };
  json d = first(compare(run(false, 1.0), run(true, 1.00000003)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["value_after_structure"].is_object());
  CHECK(d["value_after_structure"].value("rounding_level", false));
  CHECK(d["value_after_structure"]["detail"].get<std::string>().find("rounding level") !=
        std::string::npos);
  // A real difference is no rounding.
  json e = first(compare(run(false, 1.0), run(true, 1.5)));
  REQUIRE(e["value_after_structure"].is_object());
  CHECK_FALSE(e["value_after_structure"].value("rounding_level", false));
  // Nor a real difference made small: the input differs by 1e-3, the output (a mean, an
  // EMA's 0.01 of it) by 1e-6. `out * 1.0001` inserted before a loss was "the same values
  // with float operations in another order".
  auto scaled = [](bool mul, double in_sum, double out_sum) {
    return write_ops([&](Recorder& r) {
      r.op("aten::neg", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      T out{mul ? 13u : 12u};
      out.sum = in_sum;
      const int64_t made = r.op(mul ? "aten::mul" : "aten::div", {T{11}}, {out}, {}, 0, 0, kNoSeq, 5);
      T in = out;
      in.producer = made;
      T loss{mul ? 15u : 14u};
      loss.sum = out_sum;
      r.op("aten::mean", {in}, {loss}, {}, 0, 0, kNoSeq, 6);
    });
  };
  // Nor a difference of more than 16 roundings where the change carries it in: one element
  // of a hundred moved by 5e-4 moves the sum of values near 1 by 5e-6.
  json g = first(compare(run(false, 100.0), run(true, 100.0005)));
  REQUIRE(g["value_after_structure"].is_object());
  CHECK_FALSE(g["value_after_structure"].value("rounding_level", false));
  json f = first(compare(scaled(false, 1.0, 1.0), scaled(true, 1.001, 1.000001)));
  REQUIRE(f["value_after_structure"].is_object());
  CHECK_FALSE(f["value_after_structure"].value("rounding_level", false));
  CHECK(f["value_after_structure"]["detail"].get<std::string>().find("rounding level") ==
        std::string::npos);
  CHECK(f["value_after_structure"]["input_beyond_rounding"] == 0);
}

TEST_CASE("a sum regrouped pairs the outer sums, whose outputs agree, not outer with inner") {
  using T = Recorder::T;
  // A: `(h + x) + 0.3 * x`; B: `h + (x + 0.3 * x)`. Either extra add is one edit; the outer
  // sums make the same values up to rounding, the inner sum something else.
  auto out = [](uint64_t hash, double sum) {
    T t{hash};
    t.sum = sum;
    return t;
  };
  auto run = [&](bool regrouped) {
    return write_ops([&](Recorder& r) {
      auto from = [](uint64_t hash, int64_t seq) {
        T t{hash};
        t.producer = seq;
        return t;
      };
      const int64_t h = r.op("aten::neg", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      const int64_t x = r.op("aten::exp", {T{9}}, {T{12}}, {}, 0, 0, kNoSeq, 5);
      int64_t last;
      if (!regrouped) {
        const int64_t s = r.op("aten::add", {from(11, h), from(12, x)}, {out(20, 3.0)}, {}, 0, 0, kNoSeq, 6);
        const int64_t m = r.op("aten::mul", {from(12, x)}, {out(21, 0.6)}, {}, 0, 0, kNoSeq, 6);
        last = r.op("aten::add", {from(20, s), from(21, m)}, {out(22, 3.6)}, {}, 0, 0, kNoSeq, 6);
      } else {
        const int64_t m = r.op("aten::mul", {from(12, x)}, {out(21, 0.6)}, {}, 0, 0, kNoSeq, 6);
        const int64_t s = r.op("aten::add", {from(12, x), from(21, m)}, {out(30, 2.6)}, {}, 0, 0, kNoSeq, 6);
        last = r.op("aten::add", {from(11, h), from(30, s)}, {out(31, 3.6000001)}, {}, 0, 0, kNoSeq, 6);
      }
      r.op("aten::relu", {from(regrouped ? 31u : 22u, last)}, {T{40}}, {}, 0, 0, kNoSeq, 7);
    });
  };
  json d = first(compare(run(false), run(true)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["value_after_structure"].is_object());
  const json& v = d["value_after_structure"];
  CHECK(v["a"]["seq"] == 4);  // A's outer add
  CHECK(v["b"]["seq"] == 4);  // B's outer add, not its inner one (seq 3)
  CHECK(v.value("rounding_level", false));
  CHECK(v["tensor"]["role"] == "output");
}

// `(a + b) + c` against `a + (b + c)`, same op sequence: the first add takes other operands
// (a real difference), the second makes the same sum up to rounding (B's sums times `tail`),
// and so on after.
std::function<void(Recorder&)> regrouped_sums(bool regrouped, double tail) {
  using T = Recorder::T;
  auto out = [](uint64_t hash, double sum) {
    T t{hash};
    t.sum = sum;
    return t;
  };
  return [=](Recorder& r) {
    r.op("aten::neg", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
    r.op("aten::add", {T{11}, T{regrouped ? 13u : 12u}}, {out(regrouped ? 21 : 20, regrouped ? 2.5 : 3.0)}, {}, 0, 0, kNoSeq, 6);
    r.op("aten::add", {T{regrouped ? 21u : 20u}, T{14}}, {out(regrouped ? 23 : 22, 3.6 * tail)}, {}, 0, 0, kNoSeq, 6);
    r.op("aten::relu", {T{regrouped ? 23u : 22u}}, {out(regrouped ? 25 : 24, 3.6 * tail)}, {}, 0, 0, kNoSeq, 7);
  };
}

TEST_CASE("a first difference after which every output differs at rounding level says so") {
  auto run = [&](bool regrouped, double tail) { return write_ops(regrouped_sums(regrouped, tail)); };
  json r = compare(run(false, 1.0), run(true, 1.0000001));
  json d = first(r);
  REQUIRE(d["later_rounding_level"].is_number());
  CHECK(tdbg::diff::format_divergence(r).find("differs only at rounding level") != std::string::npos);
  // A later difference beyond rounding: not said.
  CHECK_FALSE(first(compare(run(false, 1.0), run(true, 1.5))).contains("later_rounding_level"));
}

TEST_CASE("equal summaries of differing values, and infinities, vouch for no rounding level") {
  using T = Recorder::T;
  // A flips the sign of an infinity ([+inf, 1] against [-inf, 1]): every summary is equal (the
  // counts keep no sign) while the hashes differ. `tail`: B's later sums move by that much too.
  auto out = [](uint64_t hash, double sum) {
    T t{hash};
    t.sum = sum;
    t.inf = 1;
    return t;
  };
  auto run = [&](bool flipped, double tail) {
    return write_ops([&](Recorder& r) {
      r.op("aten::lift_fresh", {T{flipped ? 11u : 10u}}, {out(flipped ? 21 : 20, 1.0)}, {}, 0, 0, kNoSeq, 4);
      r.op("aten::mul", {T{flipped ? 21u : 20u}}, {out(flipped ? 23 : 22, 2.0 * tail)}, {}, 0, 0, kNoSeq, 5);
      r.op("aten::add", {T{flipped ? 23u : 22u}}, {out(flipped ? 25 : 24, 3.0 * tail)}, {}, 0, 0, kNoSeq, 6);
    });
  };
  json r = compare(run(false, 1.0), run(true, 1.0));
  json d = first(r);
  CHECK_FALSE(d.contains("later_rounding_level"));
  std::string text = tdbg::diff::format_divergence(r);
  CHECK(text.find("summaries equal though values differ") != std::string::npos);
  CHECK(text.find("largest summary distance 0\n") == std::string::npos);
  // Under the first difference's summaries too, which are all equal (the sign of a zero is
  // the usual reason: x * 0.0 of a negative x).
  const size_t table = text.find("  nan/inf");
  REQUIRE(table != std::string::npos);
  CHECK(text.find("\n  note:     summaries equal though values differ", table) ==
        text.find('\n', table));
  CHECK(text.find("the sign of a zero") != std::string::npos);
  // A last-bit change besides: the rounding level is said, with the infinities it cannot vouch for.
  r = compare(run(false, 1.0), run(true, 1.0000001));
  d = first(r);
  REQUIRE(d["later_rounding_level"].is_number());
  CHECK(d.value("later_rounding_level_infinities", false));
  text = tdbg::diff::format_divergence(r);
  CHECK(text.find("some hold infinities, whose signs the summaries do not keep") != std::string::npos);
}

TEST_CASE("a sum that cancels to about 0 and a view without a summary are no drift") {
  using T = Recorder::T;
  // Another thread count: the first op differs at rounding level; later a gradient of
  // softmax - onehot sums to -6e-9 in one run and +6e-9 in the other (abs_sum 2.0), and a
  // view of it (flatten) carries no summary of its own.
  auto run = [](bool other_threads) {
    return write_ops([&](Recorder& r) {
      T conv{other_threads ? 11u : 10u};
      conv.sum = other_threads ? 1.00000001 : 1.0;
      r.op("aten::convolution", {T{1}}, {conv}, {}, 0, 0, kNoSeq, 4);
      T grad{other_threads ? 21u : 20u};
      grad.sum = other_threads ? 6.5e-9 : -6.3e-9;
      grad.min = -0.5;
      grad.max = 0.5;
      r.op("aten::_softmax_backward_data", {conv}, {grad}, {}, 0, 0, kNoSeq, 5);
      T flat{other_threads ? 31u : 30u, kNoSeq, "256", TensorStatus::kView};
      flat.summary = false;
      r.op("aten::flatten", {grad}, {flat}, {}, 0, 0, kNoSeq, 6);
    });
  };
  json r = compare(run(false), run(true));
  json d = first(r);
  CHECK(d["growth"]["max_distance"].get<double>() < 1e-5);
  REQUIRE(d["later_rounding_level"].is_number());
  CHECK(d["later_rounding_level"].get<double>() < 1e-8);
}

TEST_CASE("a replacement whose first ops differ names the first op both sides run") {
  using T = Recorder::T;
  // A DataLoader's collate with a batch of 2 against 3: B selects once more, then both stack.
  auto run = [](int batch) {
    return write_ops([&](Recorder& r) {
      r.op("aten::neg", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      std::vector<T> rows;
      for (int k = 0; k < batch; ++k) {
        T row{uint64_t(20 + k)};
        row.shape = "8";
        r.op("aten::select", {T{11}}, {row}, {{"index", std::to_string(k)}}, 0, 0, kNoSeq, 5);
        rows.push_back(row);
      }
      T stacked{30};
      stacked.shape = std::to_string(batch) + "x8";
      r.op("aten::stack", rows, {stacked}, {}, 0, 0, kNoSeq, 6);
      r.op("aten::relu", {stacked}, {T{31}}, {}, 0, 0, kNoSeq, 7);
    });
  };
  json r = compare(run(2), run(3));
  json d = first(r);
  CHECK(d["kind"] == "structure");
  CHECK(d["detail"].get<std::string>().find("where both run aten::stack") != std::string::npos);
  // How many items were stacked: the batch size, in the user's terms.
  CHECK(d["detail"].get<std::string>().find(
            "it joins 2 tensors in A and 3 in B: a batch of other size") != std::string::npos);
  // An op of that name at another line is other work: B's new `torch.zeros(3, 7)` (line 8)
  // is not A's zeros of line 9 on another shape.
  auto zeros = [](bool b_side) {
    return write_ops([&](Recorder& r) {
      r.op("aten::neg", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      if (b_side) {
        T z{40};
        z.shape = "3x7";
        r.op("aten::zeros", {}, {z}, {}, 0, 0, kNoSeq, 8);
      } else {
        r.op("aten::cross_entropy_loss", {T{11}}, {T{41}}, {}, 0, 0, kNoSeq, 7);
        T handle{42};
        handle.shape = "1";
        r.op("aten::zeros", {}, {handle}, {}, 0, 0, kNoSeq, 9);
      }
    });
  };
  d = first(compare(zeros(false), zeros(true)));
  CHECK(d["kind"] == "structure");
  CHECK(d["detail"].get<std::string>().find("where both run") == std::string::npos);
}

TEST_CASE("the same op on other shapes is a replacement, with the argument that differs") {
  using T = Recorder::T;
  auto write = [](const std::string& k, const std::string& shape) {
    return write_ops([&](Recorder& r) {
      r.op("aten::neg", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      T out{12};
      out.shape = shape;
      r.op("aten::topk", {T{11}}, {out}, {{"k", k}}, 0, 0, kNoSeq, 5);
      r.op("aten::cos", {T{20}}, {T{21}}, {}, 0, 0, kNoSeq, 9);
    });
  };
  json d = first(compare(write("43", "43"), write("58", "58")));
  CHECK(d["kind"] == "structure");
  CHECK_FALSE(d.value("reordered", false));  // it was counted as a move by name alone
  CHECK(d["detail"].get<std::string>().find("argument k A 43, B 58") != std::string::npos);
}

TEST_CASE("a divergence inside a DataLoader worker names the worker, not its step 0") {
  Variation va, vb;
  vb.nondeterministic_step = 5;
  json r = compare(write_run(va), write_run(vb));
  REQUIRE(r["first_divergence"].is_object());
  r["first_divergence"]["process_a"] = {{"index", 1}, {"path", "a/w.sqlite"}, {"pid", "7"},
                                        {"worker", "1/2"}, {"text", "process 1 of 3"}};
  const std::string text = tdbg::diff::format_divergence(r);
  CHECK(text.find("in DataLoader worker 1/2)") != std::string::npos);
  CHECK(text.find(", step ") == std::string::npos);
}

TEST_CASE("after a structural change, the value difference descends into the op holding its reason") {
  // B draws a randperm first (a logging helper); the next dropout's bernoulli_ then draws from
  // another generator state: the difference is rng at bernoulli_, not a nondeterministic dropout.
  using T = Recorder::T;
  auto write = [](bool extra_draw) {
    return write_ops([&](Recorder& r) {
      r.op("aten::relu", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      if (extra_draw) r.op("aten::randperm", {}, {T{12, kNoSeq, "8"}}, {{"n", "8"}}, 0x77, 0, kNoSeq, 5);
      int64_t drop = r.op("aten::dropout", {T{11}}, {T{extra_draw ? 22u : 21u}}, {{"p", "0.5"}}, 0,
                          0, kNoSeq, 6);
      r.op("aten::bernoulli_", {T{13}}, {T{extra_draw ? 24u : 23u}}, {{"p", "0.5"}},
           extra_draw ? 0x99 : 0x88, 1, drop, 6);
      r.op("aten::mul", {T{11}, T{extra_draw ? 24u : 23u}}, {T{extra_draw ? 22u : 21u}}, {}, 0, 1,
           drop, 6);
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["value_after_structure"].is_object());
  CHECK(d["value_after_structure"]["a"]["op"] == "aten::bernoulli_");
  CHECK(d["value_after_structure"]["cause"] == "rng");
}

TEST_CASE("after a structural change, data from outside written by an inserted op is structure") {
  // B writes one value of a NumPy batch (`xb[5, 7] = 3.0`, an inserted copy_) before the
  // layer reads it: in A the batch came from outside, in B that op made it.
  using T = Recorder::T;
  auto write = [](bool poke) {
    return write_ops([&](Recorder& r) {
      r.op("aten::lift_fresh", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 3);
      T batch{poke ? 13u : 12u};
      if (poke) batch.producer = r.op("aten::copy_", {T{12}}, {T{13}}, {}, 0, 0, kNoSeq, 4);
      r.op("aten::linear", {batch}, {T{poke ? 15u : 14u}}, {}, 0, 0, kNoSeq, 5);
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["value_after_structure"].is_object());
  CHECK(d["value_after_structure"]["cause"] == "structure");
  CHECK(d["value_after_structure"]["detail"].get<std::string>().find("was written by op 1 in B") !=
        std::string::npos);
}

TEST_CASE("settings that differ are listed, a database never closed gets a note instead") {
  using T = Recorder::T;
  auto write = [](const std::string& threads, bool closed) {
    return write_ops([](Recorder& r) { r.op("aten::relu", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 5); },
                     [&](tdbg::tracer::Writer& w) {
                       w.set_meta("pid", "42");
                       w.set_meta("num_threads", threads);
                       w.set_meta("torch_version", "1.13.0");
                       w.set_meta("seed", threads);  // a seed the program never set: drawn per run
                       w.set_meta("env", threads == "1" ? R"({"OMP_NUM_THREADS": "1"})" : "{}");
                       if (closed) w.set_meta("end_time_ns", "1");
                     });
  };
  json r = compare(write("1", true), write("2", true));
  CHECK(r["status"] == "identical");
  CHECK(r["settings"] == json::parse(R"([{"key": "num_threads", "a": "1", "b": "2"},
                                         {"key": "$OMP_NUM_THREADS", "a": "1", "b": ""}])"));
  std::string text = tdbg::diff::format_divergence(r);
  CHECK(text.find("settings: differ: num_threads A 1, B 2; $OMP_NUM_THREADS A 1, B (unset)") !=
        std::string::npos);
  CHECK(r["notes"].empty());  // nor the seed: the runs are identical, it did not matter

  json killed = compare(write("1", true), write("2", false));
  // A killed process holds the thread count read at load: not compared.
  CHECK(killed["settings"] == json::parse(R"([{"key": "$OMP_NUM_THREADS", "a": "1", "b": ""}])"));
  REQUIRE(killed["notes"].size() == 1);
  CHECK(killed["notes"][0].get<std::string>().rfind("B's process 0 (pid 42) did not close", 0) == 0);
}

TEST_CASE(
    "a seed the program set may have seeded Python's random: said where a Python value differs") {
  using T = Recorder::T;
  auto write = [](const std::string& seed, const std::string& scale) {
    return write_ops(
        [=](Recorder& r) {
          r.op("aten::mul", {T{10}}, {T{mix(10, scale == "1.07" ? 1 : 2)}}, {{"other", scale}}, 0,
               0, kNoSeq, 5);
        },
        [&](tdbg::tracer::Writer& w) {
          w.set_meta("seed", seed);
          w.set_meta("end_time_ns", "1");
        });
  };
  auto seed_note = [](const json& r) {
    for (const json& st : r["settings"])
      if (st["key"] == "seed") return st.value("note", std::string());
    return std::string("(no seed line)");
  };
  json r = compare(write("1000", "1.07"), write("1005", "1.04"));
  CHECK(first(r)["cause"] == "arguments");
  CHECK(seed_note(r) ==
        "no torch random op differs up to the divergence; Python's random or NumPy, "
        "where the program seeds them with it, may have drawn what differs");
  // Seeds torch drew (the program set none): nothing else was seeded from them.
  r = compare(write("67280421310721", "1.07"), write("9218172912731273", "1.04"));
  CHECK(seed_note(r) == "no random op differs up to the divergence");
}

TEST_CASE(
    "with two optimizers, a divergence in step 1 before the second's first step ends is the first "
    "iteration's") {
  using T = Recorder::T;
  // A GAN: iteration k steps D, then G. D's first step ends step 0, so iteration 0's G update
  // counts as step 1, with all of iteration 1. `lr_at`: the op whose lr differs in B.
  auto write = [](int lr_at, bool gan, bool b) {
    return write_ops(
        [=](Recorder& r) {
          const int64_t steps[] = {0, 1, 1, 1, 2};
          for (int k = 0; k < 5; ++k) {
            r.step = gan ? steps[k] : k;
            const std::string lr = b && k == lr_at ? "0.002" : "0.001";
            r.op("aten::addcdiv_", {T{uint64_t(10 + k)}},
                 {T{uint64_t(b && k >= lr_at ? 40 + k : 20 + k)}}, {{"value", lr}}, 0, 0, kNoSeq,
                 31);
          }
        },
        [=](tdbg::tracer::Writer& w) {
          // One step region per op: D, G, D, G, D with a GAN; one optimizer's otherwise.
          const int64_t steps[] = {0, 1, 1, 1, 2};
          for (uint32_t k = 0; k < 5; ++k)
            add_step_region(w, k + 1, k, k, "Optimizer.step#Adam.step", gan ? steps[k] : k);
        });
  };
  json r = compare(write(1, true, false), write(1, true, true));
  CHECK(first(r)["a"]["step"] == 1);
  CHECK(first(r)["first_iteration"] == true);
  CHECK(tdbg::diff::format_divergence(r).find(
            "  step:     step 1 here is still the training loop's first "
            "iteration") != std::string::npos);
  // Iteration 1's G update, after the second optimizer's first step: step 1 as it reads.
  CHECK_FALSE(
      first(compare(write(3, true, false), write(3, true, true))).contains("first_iteration"));
  // One optimizer: step 1 is the second iteration.
  CHECK_FALSE(
      first(compare(write(1, false, false), write(1, false, true))).contains("first_iteration"));
}

TEST_CASE("a run ended by a signal, differing command lines and --internal-ops are named") {
  using T = Recorder::T;
  auto write = [](const std::string& arg, const std::string& ending) {
    return write_ops([](Recorder& r) { r.op("aten::relu", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 5); },
                     [&](tdbg::tracer::Writer& w) {
                       w.set_meta("pid", "42");
                       w.set_meta("cmdline", R"(["python3", "train.py", ")" + arg + R"("])");
                       w.set_meta("exit_status", ending);
                       w.set_meta("end_time_ns", "1");
                       w.set_meta("internal_ops", arg == "a.pt" ? "0" : "1");
                     });
  };
  json r = compare(write("a.pt", "0"), write("b.pt", "signal 15"));
  REQUIRE(r["warnings"].size() == 2);
  CHECK(r["warnings"][0].get<std::string>().rfind("only B was recorded with --internal-ops", 0) == 0);
  // The same ops, and only B ended by a signal: "identical" is not all there is to say.
  CHECK(r["status"] == "identical");
  CHECK(r["ended_differently"] == true);
  CHECK(r["warnings"][1].get<std::string>().rfind(
            "the runs ran the same ops but ended differently: A's process 0 exited normally, B's "
            "was ended by signal 15 (SIGTERM)", 0) == 0);
  // Both ended by it: nothing to warn of.
  json both = compare(write("a.pt", "signal 15"), write("b.pt", "signal 15"));
  CHECK(both.find("ended_differently") == both.end());
  CHECK(r["settings"] == json::parse(R"([{"key": "cmdline", "a": "[\"python3\", \"train.py\", \"a.pt\"]",
                                         "b": "[\"python3\", \"train.py\", \"b.pt\"]"}])"));
  REQUIRE(r["notes"].size() == 1);
  CHECK(r["notes"][0].get<std::string>().rfind(
            "B's process 0 (pid 42) was ended by signal 15 (SIGTERM)", 0) == 0);
}

TEST_CASE("the headline gives both steps where they differ, and a thread other than the first") {
  json result = json::parse(R"({"status": "diverged", "run_a": "a", "run_b": "b", "first_divergence": {
      "kind": "value", "cause": "arguments", "detail": "d", "threads": {"a": 2, "b": 2},
      "a": {"op": "aten::to", "seq": 182, "step": 2}, "b": {"op": "aten::to", "seq": 262, "step": 3}}})");
  std::string text = tdbg::diff::format_divergence(result);
  CHECK(text.rfind("diverged at aten::to (seq 182, step A 2, B 3, thread 2): arguments\n", 0) == 0);
  result["first_divergence"]["b"]["step"] = 2;
  result["first_divergence"]["threads"] = {{"a", 0}, {"b", 0}};
  text = tdbg::diff::format_divergence(result);
  CHECK(text.rfind("diverged at aten::to (seq 182, step 2): arguments\n", 0) == 0);
}

TEST_CASE("an input not hashed (sparse) made by another op in each run is the answer") {
  using T = Recorder::T;
  // Two sparse matrices (not hashed), then a matmul of one of them with dense data.
  auto write = [](bool second) {
    return write_ops([&](Recorder& r) {
      const int64_t s1 = r.op("aten::coalesce", {T{1}}, {T{0, kNoSeq, "6x6", TensorStatus::kNotHashed}}, {}, 0, 0, kNoSeq, 5);
      const int64_t s2 = r.op("aten::mul", {T{1}}, {T{0, kNoSeq, "6x6", TensorStatus::kNotHashed}}, {}, 0, 0, kNoSeq, 9);
      const int64_t x = r.op("aten::relu", {T{2}}, {T{3, kNoSeq, "6x4"}}, {}, 0, 0, kNoSeq, 10);
      r.op("aten::_sparse_mm", {T{0, second ? s2 : s1, "6x6", TensorStatus::kNotHashed}, T{3, x, "6x4", TensorStatus::kKnown}},
           {T{second ? 5u : 4u, kNoSeq, "6x4"}}, {}, 0, 0, kNoSeq, 15);
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["a"]["op"] == "aten::_sparse_mm");
  CHECK(d["cause"] == "structure");
  CHECK(d["detail"].get<std::string>().rfind("input 0 comes from another op in each run (A: op 0, B: op 1; not hashed", 0) == 0);
}

TEST_CASE("a backward skipped in gradient accumulation is one removal, not a chain of shifts") {
  using T = Recorder::T;
  // Steps of 4 micro-batches, each a forward (13 ops) and a backward (55 ops), then the
  // optimizer (40 ops). B skips the backward of micro-batch 2 in step 1. Every op of a kind
  // has the same signature and values, so only the window of the alignment decides.
  auto write = [](bool skip) {
    return write_ops([&](Recorder& r) {
      auto block = [&](const char* kind, int n) {
        for (int k = 0; k < n; ++k)
          r.op(std::string("aten::") + kind + std::to_string(k), {T{1}}, {T{2}}, {}, 0, 0, kNoSeq, 5);
      };
      for (int step = 0; step < 3; ++step) {
        for (int micro = 0; micro < 4; ++micro) {
          block("fwd", 13);
          if (!(skip && step == 1 && micro == 2)) block("bwd", 55);
        }
        block("opt", 40);
      }
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["structural_changes"].size() == 1);
  const json& h = d["structural_changes"][0];
  CHECK(h["type"] == "removed");
  const int64_t removed_at = (13 + 55) * 4 + 40 + (13 + 55) * 2 + 13;
  CHECK(h["a_range"] == json::array({removed_at, removed_at + 55}));
  CHECK(d["a"]["op"] == "aten::bwd0");
}

TEST_CASE("operands swapped with the same outputs are no divergence, with other outputs they are") {
  using T = Recorder::T;
  // add(x, y) in A; in B add(y, x) with output `out`, then a relu that both runs share.
  auto write = [](bool swap, uint64_t out) {
    return write_ops([&](Recorder& r) {
      r.op("aten::relu", {T{1}}, {T{10}}, {}, 0, 0, kNoSeq, 5);
      r.op("aten::relu", {T{2}}, {T{20}}, {}, 0, 0, kNoSeq, 6);
      if (swap)
        r.op("aten::add", {T{20, 1}, T{10, 0}}, {T{out}}, {{"alpha", "1"}}, 0, 0, kNoSeq, 7);
      else
        r.op("aten::add", {T{10, 0}, T{20, 1}}, {T{out}}, {{"alpha", "1"}}, 0, 0, kNoSeq, 7);
      r.op("aten::relu", {T{out, 2}}, {T{out + 1}}, {}, 0, 0, kNoSeq, 8);
    });
  };
  const std::string a = write(false, 30);
  json r = compare(a, write(true, 30));
  CHECK(r["status"] == "identical");
  // (The other notes say the fixture's databases were never closed.)
  REQUIRE(r["notes"].size() >= 1);
  CHECK(r["notes"][0].get<std::string>().rfind(
            "process 0, thread 0: 1 op(s) take the same inputs in another order and make the "
            "same outputs", 0) == 0);
  // Another output (a non-commutative op: sub, cat) is a divergence at that op.
  json d = first(compare(a, write(true, 31)));
  CHECK(d["a"]["op"] == "aten::add");
  CHECK(d["cause"] != "ended");
}

TEST_CASE("arguments that mean the same another way with the same outputs are no divergence") {
  using T = Recorder::T;
  // log_softmax(x, dim) of a 32x8 x, then its backward with the same dim, then a relu.
  auto write = [](const std::string& dim, const std::string& dtype, uint64_t out) {
    return write_ops([&](Recorder& r) {
      r.op("aten::relu", {T{1}}, {T{10}}, {}, 0, 0, kNoSeq, 5);
      r.op("aten::log_softmax", {T{10, 0}}, {T{out}}, {{"dim", dim}, {"dtype", dtype}}, 0, 0, kNoSeq, 6);
      r.op("aten::_log_softmax_backward_data", {T{out, 1}, T{out, 1}}, {T{out + 1}},
           {{"dim", dim}, {"input_dtype", "float32"}}, 0, 0, kNoSeq, 6);
      r.op("aten::relu", {T{out + 1, 2}}, {T{out + 2}}, {}, 0, 0, kNoSeq, 7);
    });
  };
  const std::string a = write("1", "None", 30);
  for (const auto& [dim, dtype] : {std::pair<std::string, std::string>{"-1", "None"}, {"1", "float32"}, {"-1", "float32"}}) {
    INFO(dim << " " << dtype);
    json r = compare(a, write(dim, dtype, 30));
    CHECK(r["status"] == "identical");
    REQUIRE(r["notes"].size() >= 1);
    CHECK(r["notes"][0].get<std::string>().find(
              " op(s) pass arguments that mean the same another way") != std::string::npos);
  }
  // Other dimensions (dim 0 of a 2-D tensor), another dtype, or other outputs: a divergence.
  for (const auto& [dim, dtype] : {std::pair<std::string, std::string>{"0", "None"}, {"-2", "None"}, {"1", "float64"}}) {
    INFO(dim << " " << dtype);
    json d = first(compare(a, write(dim, dtype, 30)));
    CHECK(d["a"]["op"] == "aten::log_softmax");
    CHECK(d["cause"] == "arguments");
  }
  json d = first(compare(a, write("-1", "None", 31)));
  CHECK(d["a"]["op"] == "aten::log_softmax");
}

TEST_CASE("a native program rebuilt between the runs is warned of, and unknown lines infer no code path") {
  // A ran build "aaaa" of /w/prog, B build "bbbb": B's binary is the one there now, so only B's
  // frame has a line (A's reads "+0x..." with line 0). The lines do not say another path.
  using T = Recorder::T;
  auto run = [](const std::string& build, double alpha) {
    return write_ops(
        [&](Recorder& r) { r.op("aten::add", {T{1}}, {T{uint64_t(alpha * 10)}}, {{"alpha", std::to_string(alpha)}}); },
        [&](tdbg::tracer::Writer& w) { w.set_meta("build_id:/w/prog", build); });
  };
  json r = compare(run("aaaa1111222233334444", 1), run("bbbb1111222233334444", 2));
  bool warned = false;
  for (const json& w : r["warnings"])
    warned = warned || w.get<std::string>() ==
                           "/w/prog: A and B ran different builds of it (build-id aaaa11112222 and "
                           "bbbb11112222): every difference may come from the code";
  CHECK(warned);
  CHECK(first(compare(run("same", 1), run("same", 2))).is_object());
  for (const json& w : compare(run("same", 1), run("same", 2))["warnings"])
    CHECK(w.get<std::string>().find("different builds") == std::string::npos);
  // The text: A's frame unresolved, B's with a line: no "another code path?".
  json d = first(r);
  d["a"]["source"] = {{"file", "/w/prog"}, {"line", 0}, {"function", "main +0x7016"}};
  d["b"]["source"] = {{"file", "/w/prog.cc"}, {"line", 35}, {"function", "main"}};
  json text_input = r;
  text_input["first_divergence"] = d;
  const std::string text = tdbg::diff::format_divergence(text_input);
  CHECK(text.find("another code path") == std::string::npos);
  CHECK(text.find("A /w/prog in main +0x7016") != std::string::npos);
}

TEST_CASE("an AccumulateGrad inside a checkpoint's backward has the line of the op that made its gradient") {
  // Reentrant checkpointing: CheckpointFunctionBackward (the checkpoint call's line, 40) runs
  // the block's addmm again (line 20) and a backward of its own, whose AccumulateGrad adds the
  // gradient AddmmBackward0 made. B's add_ gives another value: named at the addmm's line,
  // not at the checkpoint call's.
  using T = Recorder::T;
  auto write = [](uint64_t grad) {
    return write_ops([&](Recorder& r) {
      const int64_t call = r.op("CheckpointFunction", {T{1}}, {T{2}}, {}, 0, 0, kNoSeq, 40);
      r.next_flags = tdbg::tracer::kOpBackward;
      r.next_fwd = call;
      const int64_t node = r.op("autograd::engine::evaluate_function: CheckpointFunctionBackward",
                                {}, {}, {}, 0, 0, kNoSeq, 0);
      r.next_flags = tdbg::tracer::kOpBackward;
      const int64_t addmm = r.op("aten::addmm", {T{3}}, {T{4}}, {}, 0, 1, node, 20);
      r.next_flags = tdbg::tracer::kOpBackward;
      r.next_fwd = addmm;
      const int64_t made = r.op("AddmmBackward0", {T{5}}, {T{6}}, {}, 0, 1, node, 0);
      r.next_flags = tdbg::tracer::kOpBackward;
      r.next_no_stack = true;
      const int64_t acc = r.op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
                               {}, {}, {}, 0, 1, node, 0);
      r.next_flags = tdbg::tracer::kOpBackward;
      r.next_no_stack = true;
      r.op("aten::add_", {T{6, made}}, {T{grad}}, {}, 0, 2, acc, 0);
    });
  };
  json d = first(compare(write(7), write(8)));
  CHECK(d["a"]["op"] == "aten::add_");
  CHECK(d["a"]["source"]["line"] == 20);
  CHECK(d["a"]["source_from_forward"] == true);
}

TEST_CASE("after a structural change, a forward op paired with an op inside a backward function is no value difference") {
  // A detaches a tensor before its `mul`; B forgot to, so its backward runs a MulBackward0
  // (with a `mul` of other tensors inside) and dies with an error in AddmmBackward0. The
  // aligner pairs A's forward `mul` with B's backward one: unrelated tensors, no cause.
  using T = Recorder::T;
  auto write = [](bool b_side) {
    return write_ops(
        [&](Recorder& r) {
          const int64_t fwd = r.op("aten::addmm", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 17);
          if (!b_side) {
            r.op("aten::detach", {T{11}}, {T{12}}, {}, 0, 0, kNoSeq, 31);
            r.op("aten::mul", {T{12}}, {T{13}}, {{"other", "0.5"}}, 0, 0, kNoSeq, 24);
            return;
          }
          r.next_flags = tdbg::tracer::kOpBackward;
          const int64_t node = r.op("MulBackward0", {T{50}}, {T{51}}, {}, 0, 0, kNoSeq, 29);
          r.next_flags = tdbg::tracer::kOpBackward;
          r.op("aten::mul", {T{50}}, {T{52}}, {{"other", "0.1"}}, 0, 1, node, 29);
          r.next_flags = tdbg::tracer::kOpBackward | tdbg::tracer::kOpRaised;
          r.next_fwd = fwd;
          r.op("AddmmBackward0", {T{52}}, {}, {}, 0, 0, kNoSeq, 0);
        },
        ended_with(b_side ? "1" : "0"));
  };
  json r = compare(write(false), write(true));
  json d = first(r);
  CHECK(d["kind"] == "structure");
  CHECK(d["value_after_structure"].is_null());
  CHECK(d["growth"]["max_distance"].is_null());
  const std::string text = tdbg::diff::format_divergence(r);
  CHECK(text.find("first value difference") == std::string::npos);
  CHECK(text.find("all in structural changes, no paired values to compare") != std::string::npos);
  // Where B's error came from: the backward function it was raised in, at its forward op's line.
  bool noted = false;
  for (const json& n : r["notes"])
    noted = noted || n.get<std::string>().find(
                         "exited with status 1 (an uncaught Python exception exits with 1), after an "
                         "error raised inside AddmmBackward0 at train.py:17 (its forward op's line) at "
                         "step 0") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("a run that a fault ended inside an op names that op, compared by its inputs") {
  using T = Recorder::T;
  // relu, mul, relu; B's mul did not finish (no outputs), its input hash is `mul_input`.
  auto write = [](bool crashed, uint64_t mul_input) {
    return write_ops(
        [&](Recorder& r) {
          r.op("aten::relu", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 5);
          if (!crashed) {
            r.op("aten::mul", {T{mul_input}}, {T{12}}, {{"other", "2"}}, 0, 0, kNoSeq, 6);
            r.op("aten::relu", {T{12}}, {T{13}}, {}, 0, 0, kNoSeq, 7);
            return;
          }
          r.next_flags = tdbg::tracer::kOpUnfinished;
          r.op("aten::mul", {T{mul_input}}, {}, {{"other", "2"}}, 0, 0, kNoSeq, 6);
        },
        [&](tdbg::tracer::Writer& w) {
          w.set_meta("pid", "42");
          w.set_meta("exit_status", crashed ? "signal 11" : "0");
          w.set_meta("end_time_ns", "1");
        });
  };
  const std::string full = write(false, 11);
  json r = compare(full, write(true, 11));
  json d = first(r);
  CHECK(d["cause"] == "ended");
  CHECK(d["detail"] == "B's process was ended by signal 11 (SIGSEGV) inside aten::mul at train.py:6 after 2 "
                       "op(s) of this thread, all as in A; A runs 1 more op(s) from here, first "
                       "aten::relu");
  CHECK(d["context"]["b"][1]["unfinished"] == true);
  CHECK(tdbg::diff::format_divergence(r).find("aten::mul (unfinished)") != std::string::npos);
  bool noted = false;
  for (const json& n : r["notes"])
    noted = noted || n.get<std::string>().find("by signal 11 (SIGSEGV) inside aten::mul at train.py:6") !=
                         std::string::npos;
  CHECK(noted);
  // Swapped sides: A is the run that crashed.
  CHECK(first(compare(write(true, 11), full))["detail"].get<std::string>().rfind(
            "A's process was ended by signal 11 (SIGSEGV) inside aten::mul", 0) == 0);
  // Another input: the unfinished op is where the runs differ, by value.
  d = first(compare(full, write(true, 99)));
  CHECK(d["kind"] == "value");
  CHECK(d["a"]["op"] == "aten::mul");
  CHECK(d["b"]["unfinished"] == true);
  CHECK(d["tensor"]["role"] == "input");
}

TEST_CASE(
    "after a structural change, an op that makes the same result from other inputs is no value "
    "difference") {
  using T = Recorder::T;
  // B takes the log of the loss (inserted): `ones_like` reads only its shape and makes the
  // same ones in both runs, as do the ops nested in it; the first op whose result differs is
  // the `mul` after it.
  auto write = [](bool b_side) {
    return write_ops([&](Recorder& r) {
      r.op("aten::relu", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 5);
      if (b_side) r.op("aten::log", {T{11}}, {T{12}}, {}, 0, 0, kNoSeq, 6);
      const T loss{b_side ? 12u : 11u};
      const int64_t ones = r.op("aten::ones_like", {loss}, {T{20}}, {}, 0, 0, kNoSeq, 7);
      // Nested in it: `empty_like`, whose output is not hashed (uninitialized memory).
      T empty{21};
      empty.status = tdbg::tracer::TensorStatus::kNotHashed;
      r.op("aten::empty_like", {loss}, {empty}, {}, 0, 1, ones, 7);
      r.op("aten::fill_", {T{21}}, {T{20}}, {{"value", "1"}}, 0, 1, ones, 7);
      r.op("aten::mul", {T{20}, loss}, {T{b_side ? 31u : 30u}}, {}, 0, 0, kNoSeq, 8);
      r.op("aten::sum", {T{b_side ? 31u : 30u}}, {T{b_side ? 41u : 40u}}, {}, 0, 0, kNoSeq, 9);
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["value_after_structure"].is_object());
  CHECK(d["value_after_structure"]["a"]["op"] == "aten::mul");
}

TEST_CASE("ops inserted that convert to another float dtype are said as a conversion") {
  using T = Recorder::T;
  // `self.head.double()` in B only: its first inserted op converts float32 to float64.
  auto write = [](bool b_side) {
    return write_ops([&](Recorder& r) {
      r.op("aten::relu", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 5);
      if (b_side) {
        T wide{12};
        wide.dtype = tdbg::hashing::DType::kFloat64;
        r.op("aten::to", {T{11}}, {wide}, {{"dtype", "float64"}}, 0, 0, kNoSeq, 6);
      }
      r.op("aten::sum", {T{11}}, {T{20}}, {}, 0, 0, kNoSeq, 7);
    });
  };
  json r = compare(write(false), write(true));
  const std::string text = tdbg::diff::format_divergence(r);
  INFO(text);
  CHECK(text.find("1 op(s) inserted in B, first aten::to (a conversion of float32 to float64 in B "
                  "only: a .double(), .float(), .half() or .to(dtype) call") != std::string::npos);
  const json& d = first(r);
  CHECK(d["conversion"] == json({{"run", "B"}, {"from", "float32"}, {"to", "float64"}}));
  // The other way round: removed in B, said of A.
  const std::string swapped = tdbg::diff::format_divergence(compare(write(true), write(false)));
  CHECK(swapped.find("(a conversion of float32 to float64 in A only") != std::string::npos);
}

TEST_CASE(
    "a recording that stopped (a full disk, its descriptors taken) is no process that ended") {
  using T = Recorder::T;
  // B's writer could not write from seq 12 on (step 3); its program went on and exited 0.
  auto write = [](bool b_side) {
    return write_ops(
        [&](Recorder& r) {
          for (uint64_t s = 0; s < (b_side ? 3u : 6u); ++s) {
            r.step = static_cast<int32_t>(s);
            for (uint64_t k = 0; k < 4; ++k)
              r.op("aten::mul", {T{100 + 10 * s + k}}, {T{200 + 10 * s + k}}, {}, 0, 0, kNoSeq, 9);
          }
        },
        [&](tdbg::tracer::Writer& w) {
          ended_with("0")(w);
          if (b_side)
            w.set_meta(
                "recording_lost",
                R"({"first_seq": 12, "first_step": 3, "ops": 12, "error": "cannot commit: database or disk is full"})");
        });
  };
  json r = compare(write(false), write(true));
  json d = first(r);
  const std::string text = tdbg::diff::format_divergence(r);
  INFO(text);
  CHECK(d["cause"] == "ended");
  CHECK(d["recording_stopped"] == "B");
  CHECK(d["ended_step"] == 3);
  CHECK(
      text.rfind(
          "recording stopped at step 3: B's recording stopped after 12 op(s) of this thread, all "
          "as in A: cannot commit: database or disk is full; 12 op(s) of B from seq 12 on were not "
          "recorded (the program went on)",
          0) == 0);
  CHECK(text.find("ops in steps only A holds: B's recording stopped, not compared)") !=
        std::string::npos);
  CHECK(text.find("ended early") == std::string::npos);
}

TEST_CASE("a resumed run found by the aligner: the headline goes past its start-up to the cause") {
  // B's first ops (its start-up) inserted, then A's step 4 paired with B's step 0, where B's
  // optimizer made its state afresh: said on the headline, as for steps aligned by hand.
  json r = {{"status", "diverged"},
            {"run_a", "a"},
            {"run_b", "b"},
            {"first_divergence",
             {{"kind", "structure"},
              {"cause", "structure"},
              {"detail", "128 op(s) inserted in B, first aten::randn"},
              {"a", nullptr},
              {"b", {{"op", "aten::randn"}, {"seq", 0}, {"step", 0}}},
              {"value_after_structure",
               {{"cause", "structure"},
                {"optimizer_fresh", "B"},
                {"a", {{"op", "aten::add_"}, {"seq", 665}, {"step", 4}}},
                {"b", {{"op", "aten::add_"}, {"seq", 263}, {"step", 0}}}}}}}};
  const std::string headline =
      tdbg::diff::format_divergence(r).substr(0, tdbg::diff::format_divergence(r).find('\n'));
  CHECK(headline ==
        "diverged structurally at step 0: 128 op(s) inserted in B, first aten::randn; that is B's "
        "start-up (a resumed run builds its model and loads its checkpoint); the first value "
        "difference after it: aten::add_ (seq A 665, B 263, step A 4, B 0): B's optimizer started "
        "afresh (its state was not restored: optimizer.load_state_dict missing?)");
  // Not a resumption: the value difference is at the same step in both runs.
  r["first_divergence"]["value_after_structure"]["a"]["step"] = 0;
  CHECK(tdbg::diff::format_divergence(r).find("start-up") == std::string::npos);
}

TEST_CASE("a run that ended inside ops the other never ran says so in the headline") {
  using T = Recorder::T;
  // A new loss in B raised (a shape error) where A goes on with its own ops: the change is the
  // structure, and the headline says B's process ended there, and how.
  auto write = [](bool b_side) {
    return write_ops(
        [&](Recorder& r) {
          r.op("aten::relu", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 5);
          if (!b_side) {
            for (int k = 0; k < 6; ++k) r.op("aten::mul", {T{11u + k}}, {T{12u + k}}, {}, 0, 0, kNoSeq, 6);
            return;
          }
          r.op("aten::zeros", {}, {T{50}}, {}, 0, 0, kNoSeq, 8);
          r.next_flags = tdbg::tracer::kOpRaised;
          r.op("aten::broadcast_tensors", {T{11}, T{50}}, {}, {}, 0, 0, kNoSeq, 9);
        },
        ended_with(b_side ? "1" : "0"));
  };
  json r = compare(write(false), write(true));
  json d = first(r);
  CHECK(d["kind"] == "structure");
  CHECK(d["ended_in_change"] == "B");
  const std::string detail = d["detail"];
  INFO(detail);
  CHECK(detail.find("then B's process exited with status 1") != std::string::npos);
  CHECK(detail.find("after an error raised inside aten::broadcast_tensors at train.py:9") != std::string::npos);
  // Swapped: A is the run that ended.
  const std::string swapped = first(compare(write(true), write(false)))["detail"];
  CHECK(swapped.find("then A's process exited with status 1") != std::string::npos);

  // Where the ops the ended run added are like some the other ran after them (aligned as a
  // prefix of them: an insertion, then the rest of the other run removed): the same ending.
  auto longer = [](bool b_side) {
    return write_ops(
        [&](Recorder& r) {
          r.op("aten::relu", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 5);
          if (!b_side) {
            for (int k = 0; k < 6; ++k) r.op("aten::mul", {T{11u + k}}, {T{12u + k}}, {}, 0, 0, kNoSeq, 6);
            return;
          }
          r.op("aten::ones", {}, {T{50}}, {}, 0, 0, kNoSeq, 8);
          r.op("aten::mul", {T{50}}, {T{51}}, {}, 0, 0, kNoSeq, 8);
          r.next_flags = tdbg::tracer::kOpRaised;
          r.op("aten::mm", {T{11}, T{50}}, {}, {}, 0, 0, kNoSeq, 8);
        },
        ended_with(b_side ? "1" : "0"));
  };
  d = first(compare(longer(false), longer(true)));
  CHECK(d["structural_changes"][0]["type"] == "inserted");
  CHECK(d["structural_changes"][1]["b_range"][1] == 4);  // B's last op
  CHECK(d["ended_in_change"] == "B");
  CHECK(d["detail"].get<std::string>().find("after an error raised inside aten::mm at train.py:8") !=
        std::string::npos);
}

TEST_CASE("work added, then one run raised: the values stay the same only up to its end") {
  using T = Recorder::T;
  // B copies a tensor nothing reads (a harmless refactor), and its process raises (exit status
  // 1) after `b_steps` of A's `a_steps`: what both ran agrees, but B has no results past its
  // end, which the headline says. Near the first change, B ended in the change (the detail
  // says how); far from it, the headline's "up to where B ended" says how.
  auto write = [](uint64_t steps, bool clone, const char* status) {
    return write_ops(
        [&](Recorder& r) {
          for (uint64_t s = 0; s < steps; ++s) {
            r.step = static_cast<int32_t>(s);
            r.op("aten::mm", {T{100 + s}}, {T{200 + s}}, {}, 0, 0, kNoSeq, 10);
            if (clone) r.op("aten::clone", {T{200 + s}}, {T{900 + s}}, {}, 0, 0, kNoSeq, 11);
            r.op("aten::relu", {T{200 + s}}, {T{250 + s}}, {}, 0, 0, kNoSeq, 12);
            r.op("aten::sub_", {T{300 + s}, T{250 + s}}, {T{301 + s}}, {}, 0, 0, kNoSeq, 13);
          }
        },
        ended_with(status));
  };
  for (const auto& [a_steps, b_steps, in_change] :
       {std::tuple{6u, 4u, true}, std::tuple{30u, 25u, false}}) {
    json r = compare(write(a_steps, false, "0"), write(b_steps, true, "1"));
    json d = first(r);
    const std::string text = tdbg::diff::format_divergence(r);
    INFO(text);
    CHECK(d["kind"] == "structure");
    CHECK(d["values_same"].is_object());
    CHECK(r["ended_differently"] == true);
    CHECK(d.contains("ended_in_change") == in_change);
    REQUIRE(d["run_ended"].is_object());
    CHECK(d["run_ended"]["run"] == "B");
    CHECK(d["run_ended"]["step"] == b_steps - 1);
    CHECK(text.find("; the values stay the same up to where B ended") != std::string::npos);
    CHECK(text.find("B's process exited with status 1") != std::string::npos);
    CHECK(text.find("not results") == std::string::npos);
  }
  // B's recording stopped (a full disk) while its program went on: said as such.
  const std::string stopped = write_ops(
      [&](Recorder& r) {
        for (uint64_t s = 0; s < 25; ++s) {
          r.step = static_cast<int32_t>(s);
          r.op("aten::mm", {T{100 + s}}, {T{200 + s}}, {}, 0, 0, kNoSeq, 10);
          r.op("aten::clone", {T{200 + s}}, {T{900 + s}}, {}, 0, 0, kNoSeq, 11);
          r.op("aten::relu", {T{200 + s}}, {T{250 + s}}, {}, 0, 0, kNoSeq, 12);
          r.op("aten::sub_", {T{300 + s}, T{250 + s}}, {T{301 + s}}, {}, 0, 0, kNoSeq, 13);
        }
      },
      [&](tdbg::tracer::Writer& w) {
        ended_with("0")(w);
        w.set_meta("recording_lost",
                   R"({"first_seq": 100, "first_step": 25, "ops": 20, "error": "disk full"})");
      });
  json lost = compare(write(30, false, "0"), stopped);
  const std::string lost_text = tdbg::diff::format_divergence(lost);
  INFO(lost_text);
  REQUIRE(first(lost)["run_ended"].is_object());
  CHECK(first(lost)["run_ended"]["recording_stopped"] == true);
  CHECK(lost_text.find(
            "; the values stay the same up to where B's recording stopped: B's process stopped "
            "being recorded at seq 100 (step 25)") != std::string::npos);
  CHECK(lost_text.find("after its last op") == std::string::npos);
  // The values line words the stop as the headline does: B's process went on unrecorded.
  CHECK(lost_text.find("pairs, up to where B's recording stopped): the change added or moved "
                       "work up to there; B's recording holds nothing after it") !=
        std::string::npos);
  // Both ended the same way: the answer holds to the end.
  json both = compare(write(6, false, "0"), write(6, true, "0"));
  CHECK(first(both)["run_ended"].is_null());
  CHECK(both.value("ended_differently", false) == false);
  CHECK(tdbg::diff::format_divergence(both).find(
            "; the values stay the same to the end (work, not results)") != std::string::npos);
}

TEST_CASE("a fault deep inside an op, or on another thread, still reads as the run ending there") {
  using T = Recorder::T;
  // An extension op that runs 300 ops and then faults inside a nested op of its own.
  auto nested = [](bool crashed) {
    return write_ops(
        [&](Recorder& r) {
          r.step = 2;
          r.op("aten::relu", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 5);
          if (crashed) r.next_flags = tdbg::tracer::kOpUnfinished;
          const int64_t outer = r.op("ext::outer", {T{11}}, crashed ? std::vector<T>{} : std::vector<T>{T{12}},
                                     {}, 0, 0, kNoSeq, 6);
          for (int k = 0; k < 300; ++k)
            r.op("aten::add", {T{100u + k}}, {T{101u + k}}, {}, 0, 1, outer, 6);
          if (crashed) r.next_flags = tdbg::tracer::kOpUnfinished;
          r.op("ext::inner", {T{400}}, crashed ? std::vector<T>{} : std::vector<T>{T{401}}, {}, 0, 1,
               outer, 6);
          r.step = 3;  // A's next op (--ops recorded none of the ops between)
          if (!crashed) r.op("aten::relu", {T{12}}, {T{13}}, {}, 0, 0, kNoSeq, 7);
        },
        [&](tdbg::tracer::Writer& w) {
          w.set_meta("pid", "42");
          w.set_meta("exit_status", crashed ? "signal 11" : "0");
          w.set_meta("end_time_ns", "1");
        });
  };
  json r = compare(nested(false), nested(true));
  json d = first(r);
  CHECK(d["cause"] == "ended");
  // The headline says the step B ended in, not A's next op's.
  CHECK(d["ended_step"] == 2);
  CHECK(tdbg::diff::format_divergence(r).rfind("ended early at step 2:", 0) == 0);
  CHECK(d["detail"].get<std::string>().rfind(
            "B's process was ended by signal 11 (SIGSEGV) inside ext::inner at train.py:6 (in ext::outer) after ", 0) == 0);

  // Two threads: the main thread is inside an op that never got written when a worker
  // thread faults inside another; both threads' ends are where the process stopped.
  // `worker_later`: the worker finishes one more op after the main thread's last one.
  auto threads = [](bool crashed, bool worker_later = false) {
    fs::path dir = temp_dir();
    auto w = tdbg::tracer::Writer::Create((dir / "run.sqlite").string());
    REQUIRE(w.ok());
    int64_t seq = 0;
    Recorder main(**w, 0, &seq), worker(**w, 1, &seq);
    main.op("aten::relu", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 5);
    worker.op("aten::mul", {T{20}}, {T{21}}, {}, 0, 0, kNoSeq, 30);
    main.op("aten::relu", {T{11}}, {T{12}}, {}, 0, 0, kNoSeq, 6);
    if (worker_later) worker.op("aten::add", {T{21}}, {T{21}}, {}, 0, 0, kNoSeq, 29);
    if (!crashed) {
      main.op("ext::slow", {T{12}}, {T{13}}, {}, 0, 0, kNoSeq, 7);
      worker.op("ext::scale", {T{21}}, {T{22}}, {}, 0, 0, kNoSeq, 31);
      worker.op("aten::relu", {T{22}}, {T{23}}, {}, 0, 0, kNoSeq, 32);
    } else {
      ++seq;  // ext::slow started, and never ended
      worker.next_flags = tdbg::tracer::kOpUnfinished;
      worker.op("ext::scale", {T{21}}, {}, {}, 0, 0, kNoSeq, 31);
    }
    (*w)->set_meta("pid", "42");
    (*w)->set_meta("exit_status", crashed ? "signal 11" : "0");
    (*w)->set_meta("end_time_ns", "1");
    REQUIRE((*w)->close().ok());
    return dir.string();
  };
  r = compare(threads(false), threads(true));
  d = first(r);
  CHECK(d["cause"] == "ended");
  CHECK(d["detail"] == "B's process was ended by signal 11 (SIGSEGV) after 2 op(s) of this thread, all as in A "
                       "(thread 1 was inside ext::scale at train.py:31); A runs 1 more op(s) from "
                       "here, first ext::slow");
  CHECK(tdbg::diff::format_divergence(r).rfind("ended early at step", 0) == 0);
  // The worker's last finished op came after the main thread's: still the crash's doing.
  d = first(compare(threads(false, true), threads(true, true)));
  CHECK(d["cause"] == "ended");
  CHECK(d["detail"].get<std::string>().find("(thread 1 was inside ext::scale at train.py:31)") !=
        std::string::npos);
}

TEST_CASE("a run that stopped early (a signal, a crash, an error exit) ended, it did not change") {
  using T = Recorder::T;
  // Two ops, and a third one where `ops` is 3; `ending` is the exit status, "" for a database
  // never closed.
  auto write = [](int ops, const std::string& ending) {
    return write_ops(
        [&](Recorder& r) {
          for (int k = 0; k < ops; ++k)
            r.op(k == 2 ? "aten::mul" : "aten::relu", {T{10u + k}}, {T{11u + k}}, {}, 0, 0, kNoSeq, 5);
        },
        [&](tdbg::tracer::Writer& w) {
          w.set_meta("pid", "42");
          if (ending.empty()) return;
          w.set_meta("exit_status", ending);
          w.set_meta("end_time_ns", "1");
        });
  };
  const std::string full = write(3, "0");
  json d = first(compare(full, write(2, "signal 15")));
  CHECK(d["kind"] == "structure");
  CHECK(d["cause"] == "ended");
  CHECK(d["detail"] == "B's process was ended by signal 15 (SIGTERM) after 2 op(s) of this thread, "
                       "all as in A; A runs 1 more op(s) from here, first aten::mul");
  CHECK(d.find("ended") == d.end());
  CHECK(tdbg::diff::format_divergence(compare(full, write(2, "signal 15"))).rfind("ended early at step", 0) == 0);
  // Ended before any op ran at all.
  d = first(compare(full, write(0, "signal 6")));
  CHECK(d["cause"] == "ended");
  CHECK(d["detail"].get<std::string>().rfind(
            "B's process was ended by signal 6 (SIGABRT) before this thread's first op; A runs 3 more", 0) == 0);
  d = first(compare(write(2, ""), full));
  CHECK(d["cause"] == "ended");
  CHECK(d["detail"].get<std::string>().rfind("A's process did not close its database", 0) == 0);
  d = first(compare(full, write(2, "1")));
  CHECK(d["cause"] == "ended");
  CHECK(d["detail"].get<std::string>().rfind("B's process exited with status 1", 0) == 0);
  // A normal exit with fewer ops is the program going another way.
  d = first(compare(full, write(2, "0")));
  CHECK(d["cause"] == "structure");
  CHECK(d["detail"] == "1 op(s) of A removed in B, first aten::mul; B's thread ends here");
}

TEST_CASE("growth says which steps only one run ran when the other ended early") {
  using T = Recorder::T;
  // A trains 6 steps; B drops the detach of step 1 and raises in that step's backward.
  auto write = [](bool b_side) {
    return write_ops(
        [&](Recorder& r) {
          for (uint64_t s = 0; s < 6; ++s) {
            r.step = static_cast<int64_t>(s);
            if (!(b_side && s == 1)) r.op("aten::detach", {T{10 * s}}, {T{10 * s}}, {}, 0, 0, kNoSeq, 4);
            r.op("aten::mm", {T{10 * s}}, {T{10 * s + 1}}, {}, 0, 0, kNoSeq, 5);
            if (b_side && s == 1) break;
            r.op("aten::add_", {T{10 * s + 1}}, {T{10 * s + 2}}, {}, 0, 0, kNoSeq, 6);
          }
        },
        ended_with(b_side ? "1" : "0"));
  };
  json r = compare(write(false), write(true));
  json d = first(r);
  CHECK(d["kind"] == "structure");
  const json& g = d["growth"];
  CHECK(g["past_end_run"] == "A");
  CHECK(g["past_end_ops"] == 12);  // steps 2 to 5
  const std::string text = tdbg::diff::format_divergence(r);
  INFO(text);
  CHECK(text.find("(12 of the ops in steps only A ran: B ended early)") != std::string::npos);
  // Steps whose rows read the same are one row.
  CHECK(text.find("steps 2-5, each: 3/3 ops differ, a step only A ran") != std::string::npos);
}

TEST_CASE("a run that ended early after extra work lines up with the start of the other's steps") {
  using T = Recorder::T;
  // A GAN step: the critic's forward and backward, its optimizer, the generator's forward and
  // backward, its optimizer. B forgot a detach: the critic's backward also runs the
  // generator's backward (4 extra ops), the generator's optimizer zeroes 2 more grads, and the
  // generator's backward raises (B exits with status 1). B's ops after the extra ones look
  // like A's of the next step too; pairing them there would call A's critic optimizer step
  // removed although B ran it, and compare ops of other steps.
  auto write = [](bool b_side) {
    return write_ops(
        [&](Recorder& r) {
          auto block = [&](const char* kind, int n, const std::string& shape = "32x8") {
            for (int k = 0; k < n; ++k) {
              T out{mix(std::hash<std::string>{}(kind), uint64_t(r.step * 16 + k))};
              out.shape = shape;
              r.op(std::string("aten::") + kind + std::to_string(k), {T{1}}, {out}, {}, 0, 0,
                   kNoSeq, 5);
            }
          };
          for (int step = 0; step < 3; ++step) {
            block("fwd", 6);
            block("dbwd", 5);
            if (b_side && step == 0) block("gbwd", 4, "8x4");
            block("dopt", 4, "4x4");
            ++r.step;
            block("fwd", 3);
            if (b_side && step == 0) block("zero", 2, "8x4");
            if (b_side && step == 0) {
              block("dbwd", 2);
              return;  // raised inside the generator's backward
            }
            block("dbwd", 5);
            block("gbwd", 4, "8x4");
            block("gopt", 4, "8x4");
            ++r.step;
          }
        },
        ended_with(b_side ? "1" : "0"));
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  const json& changes = d["structural_changes"];
  REQUIRE(changes.size() >= 1);
  CHECK(changes[0]["type"] == "inserted");
  CHECK(changes[0]["b_range"] == json::array({11, 15}));
  // A's critic optimizer step and the generator's forward (A's 11..17) pair with B's: no
  // change before A's 18 removes an op.
  for (const json& c : changes) {
    INFO(c.dump());
    if (c["a_range"][0].get<int64_t>() < 18) CHECK(c["a_range"][0] == c["a_range"][1]);
  }
  // The zeroed grads are B's, inserted after A's forward of the generator step.
  REQUIRE(changes.size() >= 2);
  CHECK(changes[1]["type"] == "inserted");
  CHECK(changes[1]["a_range"] == json::array({18, 18}));
  CHECK(changes[1]["b_range"] == json::array({22, 24}));
  CHECK(d["value_after_structure"].is_null());  // no value difference: B's ops all agree
}

TEST_CASE("a change repeated in every step of a long run is a few inserted ops per step") {
  using T = Recorder::T;
  // A small model's step (20 ops, several of one kind), 800 steps; from step 100 on B adds a
  // term to the loss (3 ops) whose values change nothing. Dense changes (fewer than 32 ops
  // apart over 16,000 ops) once made the alignment give up: "everything replaced".
  auto write = [](bool b_side) {
    return write_ops([&](Recorder& r) {
      for (int step = 0; step < 800; ++step) {
        r.step = step;
        auto op = [&](const char* name, uint64_t value, const std::string& shape = "32x8") {
          T out{mix(value, uint64_t(step))};
          out.shape = shape;
          r.op(name, {T{1}}, {out}, {}, 0, 0, kNoSeq, 5);
        };
        op("aten::linear", 1);
        op("aten::relu", 2);
        op("aten::linear", 3);
        op("aten::mse_loss", 4, "");
        if (b_side && step >= 100) {
          op("aten::abs", 5);
          op("aten::mean", 6, "");
          op("aten::add", 7, "");
        }
        for (int k = 0; k < 8; ++k) op("aten::mm", 10 + k, k % 2 ? "8x8" : "32x8");
        for (int k = 0; k < 8; ++k) op("aten::add_", 20 + k, k % 2 ? "8x8" : "32x8");
      }
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  const json& changes = d["structural_changes"];
  REQUIRE(changes.size() >= 3);
  for (size_t k = 0; k < 3; ++k) {
    INFO(changes[k].dump());
    CHECK(changes[k]["type"] == "inserted");
    CHECK(changes[k]["b_range"][1].get<int64_t>() - changes[k]["b_range"][0].get<int64_t>() == 3);
  }
  CHECK(changes[0]["a_range"][0] == 100 * 20 + 4);
  CHECK(d["values_same"].is_object());
}

TEST_CASE("a block inserted before a copy of itself is the copy at the new line") {
  using T = Recorder::T;
  // B runs the forward twice (`with torch.no_grad(): model(x)` at line 29, then the training
  // forward at line 30), with the same values: the inserted block is line 29's, not line 30's.
  auto write = [](bool b_side) {
    return write_ops([&](Recorder& r) {
      auto forward = [&](int line) {
        for (int k = 0; k < 3; ++k) r.op("aten::linear", {T{1}}, {T{uint64_t(40 + k)}}, {}, 0, 0, kNoSeq, line);
      };
      r.op("aten::randn", {}, {T{2}}, {}, 0, 0, kNoSeq, 20);
      if (b_side) forward(29);
      forward(30);
      r.op("aten::mse_loss", {T{43}}, {T{44, kNoSeq, ""}}, {}, 0, 0, kNoSeq, 31);
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  INFO(d["structural_changes"].dump());
  REQUIRE(d["structural_changes"].size() == 1);
  const json& h = d["structural_changes"][0];
  CHECK(h["type"] == "inserted");
  CHECK(h["b_range"] == json::array({1, 4}));
  CHECK(d["b"]["source"]["line"] == 29);
  CHECK(d["context"]["b"][3]["source"].get<std::string>().find(":29") != std::string::npos);
}

TEST_CASE("a call inserted before a change it empties is an insertion at its own line") {
  using T = Recorder::T;
  // At step 3, B calls `opt.zero_grad(set_to_none=True)` (line 97) between the backward and
  // the clip (98): the clip and `opt.step()` (99) find no gradients. The zero_grad's profiler
  // ops (`zeros empty zero_ empty`) are those that `opt.step()` opens with, and as short an
  // alignment pairs them with A's step's; the clip (300 ops) is larger than a region once was.
  auto write = [](bool b_side) {
    return write_ops([&](Recorder& r) {
      auto profiler = [&](int line) {
        T handle{7};
        handle.shape = "1";
        r.op("aten::zeros", {}, {handle}, {}, 0, 0, kNoSeq, line);
        r.op("aten::empty", {}, {T{8, kNoSeq, "1", TensorStatus::kUninitialized}}, {}, 0, 0, kNoSeq, line);
        r.op("aten::zero_", {handle}, {handle}, {}, 0, 0, kNoSeq, line);
        r.op("aten::empty", {}, {T{8, kNoSeq, "1", TensorStatus::kUninitialized}}, {}, 0, 0, kNoSeq, line);
      };
      for (uint64_t s = 0; s < 6; ++s) {
        r.step = static_cast<int64_t>(s);
        const uint64_t base = 1000 * (s + 1);
        r.op("aten::mm", {T{base}}, {T{base + 1}}, {}, 0, 0, kNoSeq, 90);
        r.op("aten::mse_loss", {T{base + 1}}, {T{base + 2, kNoSeq, ""}}, {}, 0, 0, kNoSeq, 91);
        r.op("aten::mm", {T{base + 2}}, {T{base + 3}}, {}, 0, 0, kNoSeq, 93);
        const bool empties = b_side && s == 3;
        if (empties) profiler(97);
        if (empties) {
          r.op("aten::lift_fresh", {}, {T{base + 4, kNoSeq, ""}}, {}, 0, 0, kNoSeq, 98);
        } else {
          for (uint64_t k = 0; k < 150; ++k) {
            r.op("aten::norm", {T{base + 3}}, {T{base + 100 + k, kNoSeq, ""}}, {}, 0, 0, kNoSeq, 98);
            r.op("aten::mul_", {T{base + 3}}, {T{base + 300 + k}}, {}, 0, 0, kNoSeq, 98);
          }
        }
        profiler(99);
        if (!empties)
          for (uint64_t k = 0; k < 150; ++k)
            r.op("aten::add_", {T{base + 300 + k}}, {T{base + 500 + k}}, {}, 0, 0, kNoSeq, 99);
      }
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  CHECK(d["b"]["step"] == 3);
  INFO(d["structural_changes"].dump());
  REQUIRE(d["structural_changes"].size() >= 3);
  const json& h = d["structural_changes"][0];
  CHECK(h["type"] == "inserted");
  CHECK(h["b_range"][1].get<int64_t>() - h["b_range"][0].get<int64_t>() == 4);
  CHECK(d["b"]["op"] == "aten::zeros");
  CHECK(d["b"]["source"]["line"] == 97);
  // Then the clip is replaced by what it does without gradients, and the update removed.
  CHECK(d["structural_changes"][1]["type"] == "replaced");
  CHECK(d["structural_changes"][2]["type"] == "removed");
}

TEST_CASE("of equally short alignments, the one pairing ops that computed the same values wins") {
  using T = Recorder::T;
  // `z * scale + shift` rewritten as `addcmul(shift, z, scale)`: the backward of the add
  // (sum for shift's gradient) and of the mul (two muls, sum for scale's gradient) become
  // one node (four muls, both sums). Every alignment that pairs the sums with sums is as
  // short; only one pairs each sum with the sum that computed the same gradient.
  auto write = [](bool fused) {
    return write_ops([&](Recorder& r) {
      r.op("aten::mm", {T{1}}, {T{2}}, {}, 0, 0, kNoSeq, 11);
      auto sum_view = [&](uint64_t in, uint64_t out) {
        T s{out};
        s.shape = "16";
        r.op("aten::sum", {T{in}}, {s}, {}, 0, 0, kNoSeq, 15);
        T v{out + 1};
        v.shape = "16";
        r.op("aten::view", {s}, {v}, {}, 0, 0, kNoSeq, 15);
      };
      if (fused) {
        r.op("AddcmulBackward0", {T{5}}, {}, {}, 0, 0, kNoSeq, 13);
        for (uint64_t k = 0; k < 4; ++k) r.op("aten::mul", {T{5}}, {T{60 + k}}, {}, 0, 0, kNoSeq, 13);
        sum_view(5, 70);   // shift's gradient
        sum_view(61, 80);  // scale's gradient
      } else {
        r.op("AddBackward0", {T{5}}, {}, {}, 0, 0, kNoSeq, 15);
        sum_view(5, 70);
        r.op("MulBackward0", {T{5}}, {}, {}, 0, 0, kNoSeq, 15);
        r.op("aten::mul", {T{5}}, {T{60}}, {}, 0, 0, kNoSeq, 15);
        r.op("aten::mul", {T{5}}, {T{61}}, {}, 0, 0, kNoSeq, 15);
        sum_view(61, 80);
      }
      r.op("aten::add_", {T{2}, T{71}}, {T{90}}, {}, 0, 0, kNoSeq, 17);
      r.op("aten::add_", {T{2}, T{81}}, {T{91}}, {}, 0, 0, kNoSeq, 17);
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  INFO(d["structural_changes"].dump());
  CHECK(d["value_after_structure"].is_null());  // each sum paired with its own
}

TEST_CASE("a nested op whose enclosing op was replaced is no value difference") {
  using T = Recorder::T;
  // `loss.mean()` for `loss.sum() / n`: MeanBackward0 expands the loss's gradient, then
  // divides; B's DivBackward0 divides first and SumBackward0 expands what it divided. The two
  // `expand`s pair, with other values, but the gradients that come out are the same.
  auto write = [](bool sum_div) {
    return write_ops([&](Recorder& r) {
      r.op("aten::mse", {T{1}}, {T{2, kNoSeq, ""}}, {}, 0, 0, kNoSeq, 20);
      T grad{3, kNoSeq, ""};
      T expanded{sum_div ? 5u : 4u};
      T divided{6};
      if (sum_div) {
        const int64_t node = r.op("DivBackward0", {grad}, {}, {}, 0, 0, kNoSeq, 21);
        r.op("aten::div", {grad}, {T{7, kNoSeq, ""}}, {}, 0, 1, node, 21);
        const int64_t sum = r.op("SumBackward0", {T{7, kNoSeq, ""}}, {}, {}, 0, 0, kNoSeq, 21);
        r.op("aten::expand", {T{7, kNoSeq, ""}}, {divided}, {}, 0, 1, sum, 21);
      } else {
        const int64_t node = r.op("MeanBackward0", {grad}, {}, {}, 0, 0, kNoSeq, 21);
        r.op("aten::expand", {grad}, {expanded}, {}, 0, 1, node, 21);
        r.op("aten::div", {expanded}, {divided}, {}, 0, 1, node, 21);
      }
      r.op("aten::mm", {divided}, {T{8}}, {}, 0, 0, kNoSeq, 22);
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  INFO(d["structural_changes"].dump());
  CHECK(d["value_after_structure"].is_null());
}

TEST_CASE("a change in every step up to the end lines up to the end") {
  using T = Recorder::T;
  // Op kinds of one training step of a 2-layer MLP (96 ops, from a recording) and of the same
  // step with `loss + 0.0 * out.abs().mean()` (114 ops), B's from step 100 of 300. Near the
  // end, a window reaches the end of A's thread but not of B's (B's steps are longer): A's
  // end was fixed there and the script paired B's steps with A's step after next.
  auto write = [](bool b_side) {
    return write_ops([&](Recorder& r) {
      for (int step = 0; step < 300; ++step) {
        r.step = step;
        for (int kind : b_side && step >= 100 ? tdbg::diff::testdata::kMlpStepWithAbs
                                              : tdbg::diff::testdata::kMlpStep)
          r.op("op" + std::to_string(kind), {T{1}}, {T{mix(uint64_t(kind), uint64_t(step))}}, {}, 0,
               0, kNoSeq, 5);
      }
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  CHECK(d["value_after_structure"].is_null());
  CHECK(d["values_same"].is_object());
}

TEST_CASE("an op inserted at the end of a step shifts no step's pairing") {
  using T = Recorder::T;
  // Steps of 10 ops (as diff_bench's synthetic runs), one op inserted in B at the end of a
  // step: the walk starts there, with the first ops of each side in other steps. The pairs
  // after it are all of the same step in both runs (no drift of whole steps to correct):
  // one op inserted, every pair after it the same.
  auto write = [](bool b_side) {
    return write_ops([&](Recorder& r) {
      for (int k = 0; k < 3000; ++k) {
        if (b_side && k == 1500) {
          r.step = (k - 1) / 10;
          r.op("aten::mul", {T{5}}, {T{6}}, {}, 0, 0, kNoSeq, 7);
        }
        r.step = k / 10;
        r.op(k % 2 ? "aten::add" : "aten::relu", {T{1}}, {T{mix(uint64_t(k), 3)}}, {}, 0, 0, kNoSeq, 5);
      }
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["structural_changes"].size() == 1);
  CHECK(d["structural_changes"][0]["type"] == "inserted");
  CHECK(d["values_same"].is_object());
}

TEST_CASE("a call inserted before a copy of itself in every step is the new line in every step") {
  using T = Recorder::T;
  // B calls `opt.step()` at line 19 and again at line 20, A only at line 20, for 150 steps.
  // The first step makes the optimizer's state (`zeros`) in its first call; from then on,
  // every step's inserted ops are line 19's, also past the alignment's first window (where
  // the ops of both calls look alike, the walk follows the window's script).
  auto write = [](bool b_side) {
    return write_ops([&](Recorder& r) {
      for (int step = 0; step < 150; ++step) {
        r.step = step;
        for (int k = 0; k < 8; ++k)  // the forward: longer than the optimizer's step
          r.op("aten::linear", {T{1}}, {T{mix(uint64_t(k), uint64_t(step))}}, {}, 0, 0, kNoSeq, 10);
        bool first_call = step == 0;
        auto opt = [&](int line, uint64_t salt) {
          if (first_call) r.op("aten::zeros", {}, {T{7}}, {}, 0, 0, kNoSeq, line);
          first_call = false;
          for (int k = 0; k < 4; ++k)
            r.op("aten::add_", {T{2}}, {T{mix(uint64_t(k) + salt, uint64_t(step))}}, {}, 0, 0, kNoSeq, line);
        };
        if (b_side) opt(19, step == 0 ? 0 : 100);  // its first step computes A's
        opt(20, b_side ? 200 : 0);
      }
    });
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["kind"] == "structure");
  const json& changes = d["structural_changes"];
  REQUIRE(changes.size() >= 10);
  for (size_t k = 1; k < changes.size(); ++k) {
    INFO(changes[k].dump());
    CHECK(changes[k]["type"] == "inserted");
    for (const json& o : changes[k]["inserted"]) CHECK(o["source"] == "train.py:19");
  }
}

TEST_CASE(
    "identical runs recorded with the same --steps or --ops say they were compared there only") {
  using T = Recorder::T;
  auto write = [](const std::string& key, const std::string& value) {
    return write_ops(
        [](Recorder& r) {
          r.step = 2;
          r.op("aten::relu", {T{10}}, {T{110}}, {}, 0, 0, kNoSeq, 5);
        },
        [=](tdbg::tracer::Writer& w) {
          if (!key.empty()) w.set_meta(key, value);
        });
  };
  json r = compare(write("steps", "1:3"), write("steps", "1:3"));
  CHECK(r["status"] == "identical");
  CHECK(r["recorded_part"] == "--steps 1:3");
  std::string text = tdbg::diff::format_divergence(r);
  INFO(text);
  CHECK(text.rfind("identical over what both recorded (--steps 1:3): ", 0) == 0);
  CHECK(text.find("next:     only that part of the runs was compared; they may differ outside "
                  "it: record both again with a --steps window further on (or none)") !=
        std::string::npos);
  r = compare(write("ops", "relu"), write("ops", "relu"));
  CHECK(r["recorded_part"] == "--ops relu");
  CHECK(tdbg::diff::format_divergence(r).find("other --ops (or none)") != std::string::npos);
  // Other windows: compared over the steps both hold, which the headline says.
  r = compare(write("steps", "1:3"), write("steps", "2:4"));
  CHECK(r["recorded_part"] == "the steps both hold of A's --steps 1:3 and B's --steps 2:4");
  text = tdbg::diff::format_divergence(r);
  CHECK(text.rfind("identical over what both recorded (the steps both hold of A's --steps 1:3 and "
                   "B's --steps 2:4): ",
                   0) == 0);
  CHECK(text.find("a --steps window further on (or none)") != std::string::npos);
  r = compare(write("steps", "1:3"), write("", ""));
  CHECK(r["recorded_part"] == "the steps both hold of A's --steps 1:3 and B's all steps");
  // Whole runs: a plain "identical".
  r = compare(write("", ""), write("", ""));
  CHECK_FALSE(r.contains("recorded_part"));
  CHECK(tdbg::diff::format_divergence(r).rfind("identical: ", 0) == 0);
}

TEST_CASE(
    "other --steps windows: an input made where only one run was recorded is not called matched") {
  using T = Recorder::T;
  // A holds steps 2:5, B 3:6: the first step both hold is 3. The embedding's table was made by
  // an op of A's step 2, which B did not record.
  auto write = [](bool b_side) {
    return write_ops(
        [&](Recorder& r) {
          int64_t made = kNoSeq;
          if (!b_side) {
            r.step = 2;
            made = r.op("aten::mul", {T{1}}, {T{50}}, {}, 0, 0, kNoSeq, 5);
          }
          r.step = 3;
          T table{b_side ? 51u : 50u};
          table.producer = made;
          r.op("aten::embedding", {table}, {T{b_side ? 61u : 60u}}, {}, 0, 0, kNoSeq, 8);
        },
        [&](tdbg::tracer::Writer& w) { w.set_meta("steps", b_side ? "3:6" : "2:5"); });
  };
  json d = first(compare(write(false), write(true)));
  const std::string detail = d["detail"];
  INFO(detail);
  CHECK(d["cause"] == "external_input");
  CHECK(detail.find("matched") == std::string::npos);
  CHECK(detail.find("no op B holds made it in B") != std::string::npos);
  CHECK(detail.find("this is the first step both recordings hold") != std::string::npos);
}

TEST_CASE("data from outside a --steps window may come from before it") {
  using T = Recorder::T;
  auto write = [](uint64_t input, int64_t step) {
    return write_ops(
        [&](Recorder& r) {
          r.step = step;
          r.op("aten::relu", {T{input}}, {T{input + 100}}, {}, 0, 0, kNoSeq, 5);
        },
        [](tdbg::tracer::Writer& w) { w.set_meta("steps", "1:100"); });
  };
  json d = first(compare(write(10, 2), write(11, 2)));
  CHECK(d["cause"] == "external_input");
  const std::string detail = d["detail"];
  CHECK(detail.find("or an op the recording left out made it (recorded with --steps 1:100)") != std::string::npos);
  CHECK(detail.find("window's first step") == std::string::npos);
  // In the window's first step: most likely the runs differed before it.
  d = first(compare(write(10, 1), write(11, 1)));
  CHECK(d["detail"].get<std::string>().find("this is the window's first step: most likely the runs "
                                            "differed already when it began") != std::string::npos);
}

TEST_CASE("a run whose --steps window selected no op is an error, not identical or all removed") {
  using T = Recorder::T;
  auto empty = [] {
    return write_ops([](Recorder&) {}, [](tdbg::tracer::Writer& w) { w.set_meta("steps", "5000:5010"); });
  };
  const std::string full = write_ops([](Recorder& r) { r.op("aten::relu", {T{1}}, {T{2}}); });
  for (auto [x, y] : {std::pair{empty(), empty()}, std::pair{full, empty()}}) {
    auto ra = tdbg::tracer::Run::Open(x);
    auto rb = tdbg::tracer::Run::Open(y);
    REQUIRE((ra.ok() && rb.ok()));
    auto result = tdbg::diff::compare_runs(*ra, *rb, {});
    REQUIRE_FALSE(result.ok());
    CHECK(result.status().message().find("holds no op: its recording selected none (--steps 5000:5010") !=
          std::string::npos);
  }
}

TEST_CASE("two runs that hold no op at all are an error that says how each ended, not identical") {
  auto empty = [](const std::string& status) {
    return write_ops([](Recorder&) {}, [&](tdbg::tracer::Writer& w) {
      w.set_meta("exit_status", status);
      w.set_meta("end_time_ns", "1");
    });
  };
  auto ra = tdbg::tracer::Run::Open(empty("2"));
  auto rb = tdbg::tracer::Run::Open(empty("0"));
  REQUIRE((ra.ok() && rb.ok()));
  auto result = tdbg::diff::compare_runs(*ra, *rb, {});
  REQUIRE_FALSE(result.ok());
  const std::string message = result.status().message();
  INFO(message);
  CHECK(message.find("neither run holds any op, nothing to compare") != std::string::npos);
  CHECK(message.find("; A's process exited with status 2") != std::string::npos);
  CHECK(message.find("B's process") == std::string::npos);
}

TEST_CASE("hash mode none: after a change, nothing is said of values it did not record") {
  using T = Recorder::T;
  auto write = [](bool extra) {
    return write_ops(
        [extra](Recorder& r) {
          for (int k = 0; k < 6; ++k) {
            if (extra && k == 2) r.op("aten::mul", {T{7}}, {T{8}});
            r.op("aten::relu", {T{uint64_t(10 + k)}}, {T{uint64_t(20 + k)}});
          }
        },
        [](tdbg::tracer::Writer& w) { w.set_meta("hash_mode", "none"); });
  };
  json r = compare(write(false), write(true));
  json d = first(r);
  CHECK(d["kind"] == "structure");
  CHECK_FALSE(d.contains("values_same"));
  CHECK(d["growth"]["values_recorded"] == false);
  const std::string text = tdbg::diff::format_divergence(r);
  CHECK(text.find("values:   every op paired") == std::string::npos);
  CHECK(text.find("values were not recorded, so how far the difference spread is unknown") !=
        std::string::npos);
}

TEST_CASE("an inserted op like its neighbour is an insertion, not a value pair and a heal") {
  using T = Recorder::T;
  // AdamW with weight_decay 0 against Adam: param.mul_(1) before exp_avg.mul_(0.9), the same
  // op on a tensor of the same shape; every value is the same.
  auto run = [](bool adamw) {
    return write_ops([adamw](Recorder& r) {
      for (int step = 0; step < 3; ++step) {
        r.step = step;
        const uint64_t base = 100 * static_cast<uint64_t>(step);
        r.op("aten::add", {T{base + 1}}, {T{base + 2}}, {}, 0, 0, kNoSeq, 10);
        T param{base + 3};
        param.sum = 7;  // another tensor than exp_avg: other values
        if (adamw) r.op("aten::mul_", {param}, {param}, {{"other", "1"}}, 0, 0, kNoSeq, 22);
        r.op("aten::mul_", {T{base + 4}}, {T{base + 5}}, {{"other", "0.9"}}, 0, 0, kNoSeq, 23);
        r.op("aten::add_", {T{base + 5}}, {T{base + 6}}, {}, 0, 0, kNoSeq, 24);
      }
    });
  };
  json r = compare(run(false), run(true));
  INFO(tdbg::diff::format_divergence(r));
  json d = first(r);
  CHECK(d["kind"] == "structure");
  CHECK(d["b"]["op"] == "aten::mul_");
  CHECK(d["b"]["seq"] == 1);
  CHECK(d["healed"].is_null());
  CHECK(d["values_same"].is_object());
}

TEST_CASE("two rings line up where one run ran a few ops more before its ring and in it") {
  using T = Recorder::T;
  // The same program's ops (content index c); B ran 6 more before (its tidx = c + 6) and
  // 2 more inside its ring (after c = 250). A's ring holds c 100..399, B's from c 102 (its
  // tidx 108): neither the same tidx (0) nor each side's first op (8) lines them up; 6 does.
  auto run = [](bool b_side) {
    return write_ops(
        [=](Recorder& r) {
          const int64_t extra_before = b_side ? 6 : 0, first_held = b_side ? 102 : 100;
          r.skip(first_held + extra_before);
          for (int64_t c = first_held; c < 400; ++c) {
            const std::string name = "aten::op" + std::to_string(c % 97);
            r.op(name, {T{uint64_t(10 + c)}}, {T{uint64_t(5000 + c)}});
            if (b_side && c == 250) {
              r.op("aten::mul", {T{77}}, {T{78}});
              r.op("aten::mul", {T{78}}, {T{79}});
            }
          }
        },
        [=](tdbg::tracer::Writer& w) { w.set_meta("pid", "42"); });
  };
  json d = first(compare(run(false), run(true)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["structural_changes"].size() >= 1);
  const json& c = d["structural_changes"][0];
  // A's tidx 251 (content 251) meets B's two extra muls (its tidx 257, 258).
  CHECK(c["type"] == "inserted");
  CHECK(c["a_range"] == json::array({251, 251}));
  CHECK(c["b_range"] == json::array({257, 259}));
}

TEST_CASE("a ring that ended early counts the ops both rings hold, not its own") {
  using T = Recorder::T;
  // A's ring (killed at op 100) kept ops 0-99, B's ops 20-119: 80 are compared.
  auto run = [](int64_t dropped, int64_t until, const char* ending) {
    return write_ops(
        [=](Recorder& r) {
          r.skip(dropped);
          static const char* const kNames[] = {"aten::relu", "aten::add", "aten::mul",
                                               "aten::tanh", "aten::exp", "aten::neg", "aten::abs"};
          for (int64_t k = dropped; k < until; ++k)
            r.op(kNames[k % 7], {T{uint64_t(10 + k)}}, {T{uint64_t(1000 + k)}});
        },
        [=](tdbg::tracer::Writer& w) {
          w.set_meta("pid", "42");
          w.set_meta("exit_status", ending);
          w.set_meta("end_time_ns", "1");
        });
  };
  json r = compare(run(0, 100, "signal 9"), run(20, 120, "0"));
  INFO(tdbg::diff::format_divergence(r));
  json d = first(r);
  CHECK(d["cause"] == "ended");
  // A ran 100 ops; the 80 compared are those both hold.
  CHECK(d["detail"].get<std::string>().rfind(
            "A's process was ended by signal 9 (SIGKILL) after 100 op(s) of this thread; the last 80, "
            "which both runs hold", 0) == 0);
}

TEST_CASE("a removed op and a replaced op") {
  Variation va, vr, vp;
  vr.remove_step = 14;
  vp.replace_step = 14;
  auto a = write_run(va);
  json d = first(compare(a, write_run(vr)));
  CHECK(d["kind"] == "structure");
  CHECK(d["a"]["op"] == "aten::gelu");
  CHECK(d["b"].is_null());
  CHECK(d["structural_changes"][0]["type"] == "removed");
  CHECK(d["a"]["step"] == 14);

  d = first(compare(a, write_run(vp)));
  CHECK(d["structural_changes"][0]["type"] == "replaced");
  CHECK(d["a"]["op"] == "aten::gelu");
  CHECK(d["b"]["op"] == "aten::relu");
  CHECK(d["structural_changes"].size() == 1);
}

TEST_CASE("a different batch shape is a structural change naming the tensor") {
  Variation va, vb;
  vb.batch_change_step = 8;
  json d = first(compare(write_run(va), write_run(vb)));
  CHECK(d["kind"] == "structure");
  CHECK(d["a"]["op"] == "aten::to");
  CHECK(d["tensor"]["shape"] == "32x8");
  CHECK(d["tensor"]["shape_b"] == "16x8");
}

TEST_CASE("a change that reshapes every later op is no 'added work, not results'") {
  using T = Recorder::T;
  // Batch 32 against 16 from the first batch on, to the end: the ops paired are the two that
  // made the weights after it, and every other op is in the change.
  auto run = [](const std::string& batch) {
    return write_ops([&](Recorder& r) {
      T x{9};
      x.shape = batch;
      r.op("aten::randn", {}, {x}, {}, 0, 0, kNoSeq, 2);
      r.op("aten::ones", {}, {T{10}}, {}, 0, 0, kNoSeq, 3);
      r.op("aten::mul", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      for (int k = 0; k < 6; ++k) {
        T in{uint64_t(20 + k)}, out{uint64_t(21 + k)};
        in.shape = out.shape = batch;
        r.op(k % 2 ? "aten::tanh" : "aten::mm", {in, T{11}}, {out}, {}, 0, 0, kNoSeq, 6 + k % 2);
      }
    });
  };
  json d = first(compare(run("32x8"), run("16x8")));
  CHECK(d["kind"] == "structure");
  CHECK(d["values_same"].is_null());
}

TEST_CASE("extra steps at the end are trailing inserted ops") {
  Variation va, vb;
  vb.extra_steps = 2;
  json d = first(compare(write_run(va), write_run(vb)));
  CHECK(d["kind"] == "structure");
  CHECK(d["a"].is_null());
  CHECK(d["b"]["step"] == va.steps);
}

TEST_CASE("uninitialized outputs never count, even when the chain covers them") {
  Variation va, vb;
  va.uninitialized_noise = vb.uninitialized_noise = 1;
  json r = compare(write_run(va), write_run(vb));
  CHECK(r["status"] == "identical");
  va.chain_covers_uninitialized = vb.chain_covers_uninitialized = true;
  vb.nondeterministic_step = 50;
  json d = first(compare(write_run(va), write_run(vb)));
  CHECK(d["cause"] == "nondeterministic");
  CHECK(d["a"]["step"] == 50);
}

TEST_CASE("several threads: the divergent thread is found, and the earliest one wins") {
  Variation v, late, early;
  late.nondeterministic_step = 40;
  early.lr_change_step = 20;
  auto a = write_run(v, 3);
  json d = first(compare(a, write_run(v, 3, {{2, late}})));
  CHECK(d["threads"]["a"] == 2);
  CHECK(d["a"]["step"] == 40);
  d = first(compare(a, write_run(v, 3, {{1, late}, {2, early}})));
  CHECK(d["threads"]["a"] == 2);
  CHECK(d["cause"] == "arguments");
  CHECK(d["a"]["step"] == 20);
}

TEST_CASE("a linear comparison finds what bisection finds") {
  Variation va, vb;
  vb.data_change_step = 33;
  auto a = write_run(va), b = write_run(vb);
  tdbg::diff::DiffOptions linear;
  linear.bisect = false;
  json fast = first(compare(a, b));
  json slow = first(compare(a, b, linear));
  CHECK(fast["a"]["seq"] == slow["a"]["seq"]);
  CHECK(fast["cause"] == slow["cause"]);
}

TEST_CASE("first_nonfinite names the op, step and line, and where its inputs came from") {
  Variation v;
  v.inf_step = 17;
  auto path = write_run(v);
  auto run = tdbg::tracer::Run::Open(path);
  REQUIRE(run.ok());
  auto r = tdbg::diff::first_nonfinite(*run);
  REQUIRE(r.ok());
  json f = (*r)["first_nonfinite"];
  CHECK((*r)["status"] == "nonfinite");
  CHECK(f["op"] == "aten::sum");
  CHECK(f["step"] == 17);
  CHECK(f["source"]["line"] == 24);
  REQUIRE(f["inputs"].size() == 1);
  CHECK(f["inputs"][0]["finite"] == true);
  CHECK(f["inputs"][0]["producer"]["op"] == "aten::mul");

  Variation child;
  child.nan_in_child_step = 6;
  run = tdbg::tracer::Run::Open(write_run(child));
  REQUIRE(run.ok());
  r = tdbg::diff::first_nonfinite(*run);
  REQUIRE(r.ok());
  CHECK((*r)["first_nonfinite"]["op"] == "aten::addmm");
  CHECK((*r)["first_nonfinite"]["enclosing"][0]["op"] == "aten::linear");

  run = tdbg::tracer::Run::Open(write_run(Variation{}));
  REQUIRE(run.ok());
  r = tdbg::diff::first_nonfinite(*run);
  REQUIRE(r.ok());
  CHECK((*r)["status"] == "finite");
}

// One process of a run directory written op by op: its metadata and its ops, which start at
// `clock_ns` (CLOCK_MONOTONIC, shared by the processes of one host).
struct Process {
  std::string pid, ppid, worker;
  int64_t clock_ns;
  std::function<void(Recorder&)> ops;
  std::string exit_status = {};  // as the hook words it ("0", "1", "signal 11"); none: unset
  std::vector<std::pair<std::string, std::string>> meta = {};  // more meta (seed, ...)
  std::function<void(tdbg::tracer::Writer&)> more = {};  // more records (regions, ...)
};

std::string write_processes(const std::vector<Process>& processes) {
  fs::path dir = temp_dir();
  for (const Process& p : processes) {
    auto w = tdbg::tracer::Writer::Create((dir / ("vm-" + p.pid + ".sqlite")).string());
    REQUIRE(w.ok());
    (*w)->set_meta("pid", p.pid);
    (*w)->set_meta("ppid", p.ppid);
    (*w)->set_meta("host", "vm");
    (*w)->set_meta("start_time_ns", std::to_string(p.clock_ns));
    if (!p.worker.empty()) (*w)->set_meta("worker", p.worker);
    if (!p.exit_status.empty()) (*w)->set_meta("exit_status", p.exit_status);
    for (const auto& [key, value] : p.meta) (*w)->set_meta(key, value);
    int64_t seq = 0;
    Recorder r(**w, 0, &seq);
    r.clock_ns = p.clock_ns;
    p.ops(r);
    if (p.more) p.more(**w);
    REQUIRE((*w)->close().ok());
  }
  return dir.string();
}

json nonfinite_of(const std::string& path, tdbg::diff::NonfiniteOptions options = {}) {
  auto run = tdbg::tracer::Run::Open(path);
  REQUIRE(run.ok());
  auto result = tdbg::diff::first_nonfinite(*run, options);
  if (!result.ok()) FAIL(result.status().message());
  return *result;
}

TEST_CASE(
    "tdbg nan says a start in step 1 before the second optimizer's first step ends is the first "
    "iteration's") {
  using T = Recorder::T;
  // A GAN's G update of iteration 0 overflowing: counted as step 1 (D's first step ended step 0).
  const std::string gan = write_ops(
      [](Recorder& r) {
        const int64_t steps[] = {0, 1, 1};
        for (int k = 0; k < 3; ++k) {
          r.step = steps[k];
          T out{uint64_t(20 + k)};
          if (k == 1) out.inf = 1;
          r.op("aten::addcdiv_", {T{uint64_t(10 + k)}}, {out}, {{"value", "0.001"}}, 0, 0, kNoSeq,
               31);
        }
      },
      [](tdbg::tracer::Writer& w) {
        const int64_t steps[] = {0, 1, 1};
        for (uint32_t k = 0; k < 3; ++k)
          add_step_region(w, k + 1, k, k, "Optimizer.step#Adam.step", steps[k]);
      });
  json n = nonfinite_of(gan);
  CHECK(n["first_nonfinite"]["first_iteration"] == true);
  CHECK(tdbg::diff::format_nonfinite(n).find(
            "  step:     step 1 here is still the training loop's first "
            "iteration") != std::string::npos);
}

TEST_CASE("a main process that raised comes before the workers it stopped short") {
  using T = Recorder::T;
  // A trains 6 steps from a DataLoader worker's batches; B raises at step 3, and its worker,
  // shut down, loads fewer items. The worker closes its database before the main process,
  // which waits for it at shutdown.
  auto write = [](bool raised) {
    const int64_t steps = raised ? 3 : 6;
    auto main_ops = [steps](Recorder& r) {
      for (int64_t s = 0; s < steps; ++s) {
        r.step = s;
        r.op("aten::mm", {T{uint64_t(100 + s)}}, {T{uint64_t(200 + s)}}, {}, 0, 0, kNoSeq, 30);
      }
    };
    auto worker_ops = [steps](Recorder& r) {
      for (int64_t k = 0; k < steps + 2; ++k)
        r.op("aten::lift_fresh", {}, {T{uint64_t(100 + k)}}, {}, 0, 0, kNoSeq, 21);
    };
    return write_processes(
        {Process{"100", "1", "", 1000, main_ops, raised ? "1" : "0", {{"end_time_ns", "90000"}}},
         Process{"101", "100", "0/1", 2000, worker_ops, "", {{"end_time_ns", "50000"}}}});
  };
  json d = first(compare(write(false), write(true)));
  CHECK(d["cause"] == "ended");
  CHECK(d["process"] == 0);
  // B ran all of step 2 and raised before its first op of step 3, which A's next op is in: it
  // ended in step 3.
  CHECK(d["ended_step"] == 3);
}

TEST_CASE("a child its parent terminated in one run only is no ending that differs") {
  using T = Recorder::T;
  // A pool of one worker (pid 101, a child of 100) that `Pool.__exit__` terminated in B
  // before it exited by itself.
  auto write = [](const std::string& worker_end, const std::string& worker_ppid) {
    auto ops = [](uint64_t base) {
      return [base](Recorder& r) { r.op("aten::relu", {T{base}}, {T{base + 1}}, {}, 0, 0, kNoSeq, 5); };
    };
    return write_processes({Process{"100", "1", "", 1000, ops(10), "0", {{"end_time_ns", "9"}}},
                            Process{"101", worker_ppid, "", 2000, ops(20), worker_end, {{"end_time_ns", "9"}}}});
  };
  json r = compare(write("0", "100"), write("signal 15", "100"));
  CHECK(r["status"] == "identical");
  CHECK_FALSE(r.contains("ended_differently"));
  bool noted = false;
  for (const json& n : r["notes"])
    noted = noted || n.get<std::string>().find("a child that its parent terminates at shutdown") != std::string::npos;
  CHECK(noted);
  // Not a child of a recorded process: the ending is said to differ.
  r = compare(write("0", "7"), write("signal 15", "7"));
  CHECK(r["ended_differently"] == true);
}

TEST_CASE("a value difference from the same line in another module shows both modules") {
  using T = Recorder::T;
  // Blocks iterated in another order: the same line runs in blocks.2 in B where A ran blocks.0.
  auto run = [](const std::string& module, uint64_t in) {
    return write_ops([&](Recorder& r) {
      r.root_module = module;
      r.op("aten::relu", {T{in}}, {T{in + 100}}, {}, 0, 0, kNoSeq, 7);
    });
  };
  const std::string text = tdbg::diff::format_divergence(compare(run("Net.blocks.0", 1), run("Net.blocks.2", 2)));
  CHECK(text.find("where:    A ") != std::string::npos);
  CHECK(text.find("Net.blocks.0") != std::string::npos);
  CHECK(text.find("Net.blocks.2") != std::string::npos);
  // The same file and line: not "another file".
  CHECK(text.find("(the same line, in another module in each run)") != std::string::npos);
  CHECK(text.find("another file") == std::string::npos);
}

TEST_CASE("a view of other memory in each run names the ops that made what it views") {
  using T = Recorder::T;
  // `h @ W.t()` with W the embedding's weight in B (tied), a separate weight in A. Each
  // parameter is an alias of what its init op made (a view, compared by what it views).
  auto run = [](bool tied) {
    return write_ops([&](Recorder& r) {
      auto param = [&](uint64_t hash, const char* init, int line) {
        T made{hash, r.op(init, {T{hash - 9}}, {T{hash}}, {}, 0, 0, kNoSeq, line)};
        T alias{hash + 1, kNoSeq, "16x6", TensorStatus::kView};
        alias.summary = false;
        alias.producer = r.op("aten::alias", {made}, {alias}, {}, 0, 0, kNoSeq, line);
        return alias;
      };
      const T emb = param(10, "aten::mul", 6);
      const T out = param(20, "aten::normal_", 7);
      T view{tied ? 12u : 22u, kNoSeq, "6x16", TensorStatus::kView};
      view.summary = false;
      view.producer = r.op("aten::t", {tied ? emb : out}, {view}, {}, 0, 0, kNoSeq, 15);
      r.op("aten::mm", {T{5}, view}, {T{tied ? 41u : 40u}}, {}, 0, 0, kNoSeq, 15);
    });
  };
  json d = first(compare(run(false), run(true)));
  CHECK(d["cause"] == "structure");
  INFO(d["detail"].get<std::string>());
  CHECK(d["detail"].get<std::string>().find(
            "it views what aten::normal_ at train.py:7 (op 2) made in A, what aten::mul at train.py:6 (op 0) made in B") !=
        std::string::npos);
}

TEST_CASE("a command line written with other spacing is no setting that differs") {
  using T = Recorder::T;
  auto run = [](const std::string& cmdline) {
    return write_ops([&](Recorder& r) { r.op("aten::relu", {T{1}}, {T{2}}); },
                     [&](tdbg::tracer::Writer& w) { w.set_meta("cmdline", cmdline); });
  };
  json r = compare(run(R"(["python3", "train.py"])"), run(R"(["python3","train.py"])"));
  for (const json& st : r["settings"]) CHECK(st["key"] != "cmdline");
  r = compare(run(R"(["python3", "train.py"])"), run(R"(["python3", "train2.py"])"));
  bool named = false;
  for (const json& st : r["settings"]) named = named || st["key"] == "cmdline";
  CHECK(named);
}

TEST_CASE("an AccumulateGrad op is placed at the forward op that used the parameter") {
  using T = Recorder::T;
  int64_t addmm = -1, accumulate_add = -1;
  const std::string path = write_ops([&](Recorder& r) {
    addmm = r.op("aten::addmm", {T{1}}, {T{2}}, {}, 0, 0, kNoSeq, 12);
    r.next_flags = tdbg::tracer::kOpBackward;
    r.next_fwd = addmm;
    const int64_t node = r.op("AddmmBackward0", {T{3}}, {}, {}, 0, 0, kNoSeq, 0);
    r.next_flags = tdbg::tracer::kOpBackward;
    T grad{4};
    const int64_t mm = r.op("aten::mm", {T{3}}, {grad}, {}, 0, 1, node, 0);
    grad.producer = mm;
    r.next_flags = tdbg::tracer::kOpBackward;
    const int64_t acc = r.op("torch::autograd::AccumulateGrad", {grad}, {}, {}, 0, 0, kNoSeq, 0);
    r.next_flags = tdbg::tracer::kOpBackward | tdbg::tracer::kOpInplace;
    accumulate_add = r.op("aten::add_", {T{5}, grad}, {T{6}}, {}, 0, 1, acc, 0);
  });
  auto run = tdbg::tracer::Run::Open(path);
  REQUIRE(run.ok());
  const auto& reader = *run->processes[0];
  auto op = reader.op(accumulate_add);
  REQUIRE(op);
  CHECK(tdbg::diff::forward_seq_of(reader, *op) == addmm);
}

TEST_CASE(
    "data from outside torch in DataLoader workers of another count: the count is the cause") {
  using T = Recorder::T;
  // One worker's database each, of 2 workers in A and 3 in B (as a NumPy augmentation in the
  // dataset, which torch seeds per worker): no unseeded generator is blamed.
  auto write = [](const std::string& worker, uint64_t data) {
    return write_ops(
        [&](Recorder& r) { r.op("aten::lift_fresh", {T{data}}, {T{data}}, {}, 0, 0, kNoSeq, 7); },
        [&](tdbg::tracer::Writer& w) {
          w.set_meta("worker", worker);
          w.set_meta("python_version", "3.11");
          w.set_meta("seed", "0");
          w.set_meta("end_time_ns", "1");
        });
  };
  json d = first(compare(write("0/2", 10), write("0/3", 11)));
  CHECK(d["cause"] == "external_input");
  const std::string detail = d.value("detail", "");
  CHECK(detail.find("num_workers is 2 in A and 3 in B, so another worker loads this item") !=
        std::string::npos);
  CHECK(detail.find("not seeded alike") == std::string::npos);
  // The same count: unseeded generators stay the likely cause.
  d = first(compare(write("0/2", 10), write("0/2", 11)));
  CHECK(d.value("detail", "").find("not seeded alike") != std::string::npos);
}

TEST_CASE("first_nonfinite in one DataLoader worker's database opened alone names the worker") {
  using T = Recorder::T;
  const std::string path = write_ops(
      [](Recorder& r) {
        T nan{10};
        nan.nan = 1;
        r.op("aten::log", {T{1}}, {nan}, {}, 0, 0, kNoSeq, 7);
      },
      [](tdbg::tracer::Writer& w) { w.set_meta("worker", "0/2"); });
  json r = nonfinite_of(path);
  REQUIRE(r["status"] == "nonfinite");
  CHECK(tdbg::diff::format_nonfinite(r).rfind("non-finite at aten::log (seq 0, in DataLoader worker 0/2)", 0) == 0);
}

TEST_CASE("first_nonfinite never calls cleaned what an in-place op left NaN, or a copy kept") {
  using T = Recorder::T;
  // Inside a backward function: a div makes NaN (hash 30); then either `clamp_` writes it back
  // unchanged (the same hash, NaN still in it), or a `clone` keeps a copy (the same hash) before
  // `nan_to_num_` cleans the original. Both pass NaN on: the div is the start.
  auto run = [](bool clone) {
    return write_ops([&](Recorder& r) {
      r.next_flags = tdbg::tracer::kOpBackward;
      const int64_t node = r.op("autograd::engine::evaluate_function: FBackward", {}, {}, {}, 0, 0, kNoSeq, 9);
      T nan{30};
      nan.nan = 2;
      r.next_flags = tdbg::tracer::kOpBackward;
      r.op("aten::div", {T{2}}, {nan}, {}, 0, 1, node, 9);
      if (clone) {
        r.next_flags = tdbg::tracer::kOpBackward;
        r.op("aten::clone", {nan}, {nan}, {}, 0, 1, node, 10);
        r.next_flags = tdbg::tracer::kOpBackward | tdbg::tracer::kOpInplace;
        r.op("aten::nan_to_num_", {nan}, {T{31}}, {}, 0, 1, node, 11);
      } else {
        r.next_flags = tdbg::tracer::kOpBackward | tdbg::tracer::kOpInplace;
        r.op("aten::clamp_", {nan}, {nan}, {{"min", "-1"}, {"max", "1"}}, 0, 1, node, 10);
      }
      r.op("aten::add_", {T{40}}, {T{41}}, {}, 0, 0, kNoSeq, 12);
    });
  };
  for (bool clone : {false, true}) {
    INFO((clone ? "clone, then nan_to_num_ of the original" : "clamp_ leaves the NaN"));
    json r = nonfinite_of(run(clone));
    CHECK(r["status"] == "nonfinite");
    CHECK(r["first_nonfinite"]["op"] == "aten::div");
  }
}

TEST_CASE("first_nonfinite follows an expand of a tensor holding Inf as all of it") {
  using T = Recorder::T;
  // Inf in a [4] gradient, expanded (stride 0) to [4x3], times a row of zeros: NaN from
  // Inf * 0, the expand's values are the whole gradient's.
  const std::string path = write_ops([](Recorder& r) {
    T inf{10};
    inf.shape = "4";
    inf.inf = 1;
    const int64_t div = r.op("aten::div", {T{1}}, {inf}, {}, 0, 0, kNoSeq, 9);
    inf.producer = div;
    T view{11, div, "4x3 strides 1x0", TensorStatus::kView};
    view.summary = false;
    const int64_t expand = r.op("aten::expand", {inf}, {view}, {}, 0, 0, kNoSeq, 9);
    view.producer = expand;
    T nan{12};
    nan.nan = 3;
    nan.shape = "4x3";
    r.op("aten::mul", {view, T{2}}, {nan}, {}, 0, 0, kNoSeq, 9);
  });
  tdbg::diff::NonfiniteOptions nan_only;
  nan_only.nan_only = true;
  json r = nonfinite_of(path, nan_only);
  REQUIRE(r["status"] == "nonfinite");
  CHECK(r["first_nonfinite"]["op"] == "aten::mul");
  const json& in = r["first_nonfinite"]["inputs"][0];
  CHECK(in["values_of"] == "view");
  CHECK(in["finite"] == false);
}

TEST_CASE("NaN made from Inf inputs says so: a softmax of a row masked to -inf throughout") {
  using T = Recorder::T;
  const std::string path = write_ops([](Recorder& r) {
    T masked{10};
    masked.inf = 12;
    masked.producer = r.op("aten::masked_fill", {T{1}, T{2}}, {masked}, {{"value", "-inf"}}, 0, 0, kNoSeq, 9);
    T nan{11};
    nan.nan = 4;
    r.op("aten::_softmax", {masked}, {nan}, {{"dim", "-1"}}, 0, 0, kNoSeq, 10);
  });
  json r = nonfinite_of(path);
  REQUIRE(r["status"] == "nonfinite");
  CHECK(r["first_nonfinite"]["op"] == "aten::_softmax");
  const std::string text = tdbg::diff::format_nonfinite(r);
  INFO(text);
  CHECK(text.find("cause:    made here: NaN from inputs that hold Inf (inf - inf, inf / inf, 0 * inf; in a "
                  "softmax, a row that is -inf throughout") != std::string::npos);
  CHECK(text.find("an overflow, log or sqrt") == std::string::npos);
}

TEST_CASE("Inf alone from finite float32 inputs is an overflow, with pow's exponent") {
  using T = Recorder::T;
  // out ** 2 with out near 5e36: past float32's largest value.
  const std::string path = write_ops([](Recorder& r) {
    T big{10};
    big.min = -4.9e36;
    big.max = 3e36;
    big.producer = r.op("aten::mul", {T{1}, T{2}}, {big}, {}, 0, 0, kNoSeq, 8);
    T inf{11};
    inf.inf = 8;
    r.op("aten::pow", {big}, {inf}, {{"exponent", "2"}}, 0, 0, kNoSeq, 9);
    T inf2{12};
    inf2.inf = 8;
    r.op("aten::mul", {inf, T{3}}, {inf2}, {}, 0, 0, kNoSeq, 10);
  });
  const std::string text = tdbg::diff::format_nonfinite(nonfinite_of(path));
  INFO(text);
  CHECK(text.find("overflow: inputs up to 4.9e+36 in magnitude to the power 2 are beyond "
                  "float32's largest value, 3.4028e+38") != std::string::npos);
  CHECK(text.find("0 * inf") == std::string::npos);
}

TEST_CASE("first_nonfinite passes over NaN made and cleaned inside one top-level op") {
  using T = Recorder::T;
  // torch's norm backward for a zero vector: a nested div makes 0/0, the next nested op masks
  // it in place, and nothing outside the backward function ever reads a NaN. `cleaned`: the
  // masked_fill_ is there; without it the NaN is passed on.
  auto run = [](bool cleaned) {
    return write_ops([&](Recorder& r) {
      r.op("aten::sub", {T{1}}, {T{2}}, {}, 0, 0, kNoSeq, 9);
      r.next_flags = tdbg::tracer::kOpBackward;
      const int64_t node = r.op("autograd::engine::evaluate_function: NormBackward1", {}, {}, {}, 0, 0, kNoSeq, 9);
      r.next_flags = tdbg::tracer::kOpBackward;
      const int64_t fn = r.op("NormBackward1", {T{2}}, {}, {}, 0, 1, node, 9);
      T nan{30};
      nan.nan = 3;
      r.next_flags = tdbg::tracer::kOpBackward;
      r.op("aten::div", {T{2}}, {nan}, {}, 0, 2, fn, 9);
      if (cleaned) {
        r.next_flags = tdbg::tracer::kOpBackward | tdbg::tracer::kOpInplace;
        r.op("aten::masked_fill_", {nan}, {T{31}}, {{"value", "0"}}, 0, 2, fn, 9);
      }
      r.next_flags = tdbg::tracer::kOpBackward;
      r.op("aten::mul", {cleaned ? T{31} : nan}, {cleaned ? T{32} : nan}, {}, 0, 2, fn, 9);
      r.op("aten::add_", {T{40}}, {T{41}}, {}, 0, 0, kNoSeq, 12);
    });
  };
  json clean = nonfinite_of(run(true));
  CHECK(clean["status"] == "finite");
  CHECK(clean["contained"] == 1);
  const std::string text = tdbg::diff::format_nonfinite(clean);
  CHECK(text.find("1 NaN/Inf start(s) cleaned inside the op that ran them") != std::string::npos);
  CHECK(text.find("  contained: aten::div (seq 3, step 0)") != std::string::npos);
  // Passed on (the mul reads it and returns NaN): the div is the start.
  json passed = nonfinite_of(run(false));
  CHECK(passed["status"] == "nonfinite");
  CHECK(passed["first_nonfinite"]["op"] == "aten::div");
}

TEST_CASE("first_nonfinite on a recording that selected ops says only those were looked at") {
  using T = Recorder::T;
  const std::string path =
      write_ops([](Recorder& r) { r.op("aten::mean", {T{1}}, {T{2}}); },
                [](tdbg::tracer::Writer& w) { w.set_meta("ops", "^aten::mean$"); });
  json r = nonfinite_of(path);
  CHECK(r["status"] == "finite");
  CHECK(r["notes"].dump().find("only the ops the recording selected were looked at (--ops "
                               "^aten::mean$)") != std::string::npos);
}

TEST_CASE("a process that ended on an error exit yields to another process's divergence") {
  using T = Recorder::T;
  // A DataLoader worker faults inside an op; the main process, waiting for its batch, dies of
  // the exception that follows (exit status 1). By the clock the main process stops first
  // (the worker prefetched), yet the worker's fault is the divergence and the main process's
  // end its consequence.
  auto main_ops = [](bool cut) {
    return [cut](Recorder& r) {
      for (int k = 0; k < 6; ++k) {
        if (cut && k == 2) return;
        r.op("aten::linear", {T{uint64_t(10 + k)}}, {T{uint64_t(20 + k)}}, {}, 0, 0, kNoSeq, 30);
      }
    };
  };
  auto worker_ops = [](bool crashed) {
    return [crashed](Recorder& r) {
      r.op("aten::stack", {T{50}}, {T{51}}, {}, 0, 0, kNoSeq, 9);
      if (crashed) r.next_flags = tdbg::tracer::kOpUnfinished;
      r.op("ext::scale", {T{51}}, crashed ? std::vector<T>{} : std::vector<T>{T{52}}, {}, 0, 0,
           kNoSeq, 10);
      if (!crashed) r.op("aten::stack", {T{52}}, {T{53}}, {}, 0, 0, kNoSeq, 9);
    };
  };
  auto run = [&](bool broken, const std::string& main_status) {
    return write_processes(
        {{"100", "1", "", 1000000, main_ops(broken), broken ? main_status : "0"},
         {"101", "100", "0/1", 9000000, worker_ops(broken), broken ? "signal 11" : "0"}});
  };
  const std::string a = run(false, "0");
  json d = first(compare(a, run(true, "1")));
  CHECK(d["process_a"]["index"] == 1);
  CHECK(d["cause"] == "ended");
  CHECK(d["detail"].get<std::string>().find("signal 11 (SIGSEGV) inside ext::scale") !=
        std::string::npos);
  // Swapped sides too.
  CHECK(first(compare(run(true, "1"), a))["process_a"]["index"] == 1);
  // Where the main process ended without an error of its own (exit status 0), nothing says
  // it is a consequence: the earlier divergence by the clock is first.
  CHECK(first(compare(a, run(true, "0")))["process_a"]["index"] == 0);
}

// The ops of a pair run: `n` linear ops (step k / 3), from `clock_ns` on; op `differ` (if any)
// makes another output, and the process stops before op `stop` (if any).
std::function<void(Recorder&)> linear_ops(int n, int differ = -1, int stop = -1) {
  return [=](Recorder& r) {
    using T = Recorder::T;
    for (int k = 0; k < n && k != stop; ++k) {
      r.step = k / 3;
      r.op("aten::linear", {T{uint64_t(10 + k)}}, {T{uint64_t(k == differ ? 999 : 20 + k)}}, {}, 0,
           0, kNoSeq, 30 + k);
    }
  };
}

TEST_CASE("ranks pair by rank when one run has an extra process without ops (a launcher)") {
  // A: a launcher that imported torch (no rank, no op) started rank 0 and rank 1; B: the same
  // ranks started from a shell. Ranks hold other ops (rank 1 draws other data).
  auto rank = [](const std::string& pid, const std::string& ppid, const char* r, uint64_t base,
                 int64_t clock) {
    Process p{pid, ppid, "", clock, [base](Recorder& rec) {
                using T = Recorder::T;
                for (int k = 0; k < 4; ++k)
                  rec.op("aten::mm", {T{base + k}}, {T{base + 100 + k}}, {}, 0, 0, kNoSeq, 40);
              }};
    p.meta = {{"rank", r}, {"end_time_ns", "5"}};
    return p;
  };
  Process launcher{"10", "1", "", 1000, [](Recorder&) {}};
  const std::string a = write_processes(
      {launcher, rank("11", "10", "0/2", 100, 2000), rank("12", "10", "1/2", 500, 2000)});
  const std::string b =
      write_processes({rank("21", "1", "0/2", 100, 2000), rank("22", "1", "1/2", 500, 2000)});
  auto ra = tdbg::tracer::Run::Open(a);
  auto rb = tdbg::tracer::Run::Open(b);
  REQUIRE((ra.ok() && rb.ok()));
  REQUIRE(ra->processes[0]->meta("pid") == "10");  // canonical order: the launcher first
  tdbg::tracer::PairProcesses(*ra, *rb);
  CHECK(ra->processes[0]->meta("rank") == "0/2");
  CHECK(ra->processes[1]->meta("rank") == "1/2");
  CHECK(ra->processes[2]->meta("pid") == "10");  // unpaired: last
  auto result = tdbg::diff::compare_runs(*ra, *rb, {});
  REQUIRE(result.ok());
  CHECK((*result)["status"] == "identical");
  const std::string notes = (*result)["notes"].dump();
  CHECK(notes.find("exist only in A and hold no op (pid 10") != std::string::npos);
  // Already paired runs keep their order (and `tdbg show --process` numbers).
  auto rc = tdbg::tracer::Run::Open(a), rd = tdbg::tracer::Run::Open(a);
  REQUIRE((rc.ok() && rd.ok()));
  tdbg::tracer::PairProcesses(*rc, *rd);
  CHECK(rc->processes[0]->meta("pid") == "10");
}

TEST_CASE("DataLoader workers pair by worker id and epoch, whichever run ran more epochs") {
  // A main process and a DataLoader whose two workers start anew each epoch: A runs 2 epochs,
  // B 3. Worker 1 of A's epoch 1 must pair with worker 1 of B's epoch 1 (by canonical order,
  // worker id then start, B's epoch-2 worker 0 sits where A's epoch-0 worker 1 does).
  auto worker = [](const std::string& pid, const char* id, int64_t clock, uint64_t base) {
    Process p{pid, "100", id, clock, [base](Recorder& rec) {
                using T = Recorder::T;
                for (int k = 0; k < 4; ++k)
                  rec.op("aten::normal_", {T{base + k}}, {T{base + 50 + k}}, {}, 0, 0, kNoSeq, 9);
              }};
    p.meta = {{"end_time_ns", std::to_string(clock + 500)}};
    return p;
  };
  auto main_process = [](int epochs) {
    return Process{"100", "1", "", 1000, [epochs](Recorder& rec) {
                     using T = Recorder::T;
                     for (int k = 0; k < 4 * epochs; ++k)
                       rec.op("aten::linear", {T{uint64_t(10 + k)}}, {T{uint64_t(20 + k)}}, {}, 0, 0,
                              kNoSeq, 30);
                   }};
  };
  const std::string a = write_processes({main_process(2), worker("101", "0/2", 2000, 100),
                                         worker("102", "1/2", 2100, 200),
                                         worker("103", "0/2", 3000, 300),
                                         worker("104", "1/2", 3100, 400)});
  const std::string b = write_processes({main_process(3), worker("201", "0/2", 2000, 100),
                                         worker("202", "1/2", 2100, 200),
                                         worker("203", "0/2", 3000, 300),
                                         worker("204", "1/2", 3100, 400),
                                         worker("205", "0/2", 4000, 500),
                                         worker("206", "1/2", 4100, 600)});
  auto ra = tdbg::tracer::Run::Open(a);
  auto rb = tdbg::tracer::Run::Open(b);
  REQUIRE((ra.ok() && rb.ok()));
  tdbg::tracer::PairProcesses(*ra, *rb);
  REQUIRE(rb->processes.size() == 7);
  for (size_t p = 1; p < 5; ++p) {
    const int64_t pa = std::stoll(ra->processes[p]->meta("pid")), pb = std::stoll(rb->processes[p]->meta("pid"));
    CHECK(pb - pa == 100);  // the same worker of the same epoch
  }
  // The first divergence: B's main process goes on into a third epoch. B's workers of the
  // third epoch are compared with the others, as one set.
  auto result = tdbg::diff::compare_runs(*ra, *rb, {});
  REQUIRE(result.ok());
  json d = first(*result);
  CHECK(d["process"] == 0);
  CHECK(d["kind"] == "structure");
  CHECK(d["b"]["tidx"] == 8);
}

TEST_CASE("runs recorded with --ops are not said to differ only at rounding level") {
  // Their few outputs (a loss, the updates) say nothing of the ops not recorded: a small data
  // change reads as rounding there.
  auto selected = [](bool regrouped, double tail) {
    Process p{"1", "0", "", 1000, regrouped_sums(regrouped, tail)};
    p.meta = {{"ops", "aten::(add|relu|neg)"}};
    return write_processes({p});
  };
  json d = first(compare(selected(false, 1.0), selected(true, 1.0000001)));
  CHECK_FALSE(d.contains("later_rounding_level"));
}

TEST_CASE("a later rank whose own argument or seed differs is not called a consequence") {
  using T = Recorder::T;
  // Both ranks given another lr (an argument of the update over the same inputs), or another
  // seed (a random op's generator state): neither comes through a collective.
  auto rank = [](const std::string& pid, const char* r, int64_t clock, const char* alpha, uint64_t rng) {
    Process p{pid, "1", "", clock, [=](Recorder& rec) {
                rec.op("aten::uniform_", {T{5}}, {T{rng == 0 ? 6u : 7u}}, {}, rng == 0 ? 1 : rng);
                rec.op("aten::add_", {T{10}, T{11}}, {T{12}}, {{"alpha", alpha}}, 0, 0, kNoSeq, 7);
              }};
    p.meta = {{"rank", r}, {"end_time_ns", "5"}};
    return p;
  };
  const std::string a = write_processes({rank("11", "0/2", 1000, "-0.1", 0), rank("12", "1/2", 1000, "-0.1", 0)});
  const std::string lr = write_processes({rank("21", "0/2", 2000, "-0.2", 0), rank("22", "1/2", 1000, "-0.2", 0)});
  json r = compare(a, lr);
  json d = first(r);
  REQUIRE(d["other_processes"].size() == 1);
  CHECK(d["other_processes"][0]["own_cause"] == "arguments");
  CHECK(tdbg::diff::format_divergence(r).find("a cause of its own: an argument differs") != std::string::npos);
  const std::string seed = write_processes({rank("31", "0/2", 2000, "-0.1", 9), rank("32", "1/2", 1000, "-0.1", 8)});
  d = first(compare(a, seed));
  REQUIRE(d["other_processes"].size() == 1);
  CHECK(d["other_processes"][0]["own_cause"] == "rng");
}

TEST_CASE("in a worker set, A's first difference is compared with B's of the same task") {
  using T = Recorder::T;
  // Pool workers load items (the same values in both runs), then draw noise. Items 2 and 3
  // draw other noise in B. A reaches item 3's noise first, B item 2's: B's counterpart of
  // A's item 3 is B's item 3, found after the item both loaded alike.
  auto task = [](Recorder& r, int item, bool other) {
    r.op("aten::select", {T{uint64_t(100 + item)}}, {T{uint64_t(200 + item)}}, {{"index", std::to_string(item)}});
    r.op("aten::normal_", {T{uint64_t(200 + item)}}, {T{uint64_t((other ? 400 : 300) + item)}}, {},
         uint64_t((other ? 40 : 30) + item));
  };
  auto worker = [&](const std::string& pid, int64_t clock, std::vector<std::pair<int, bool>> items) {
    Process p{pid, "100", "", clock, [=](Recorder& r) {
                for (auto [item, other] : items) task(r, item, other);
              }};
    p.meta = {{"end_time_ns", "900000"}};
    return p;
  };
  // A: worker 11 runs items 1, 2 (item 2's noise at 3000); worker 12 item 3 (its noise at 2500).
  const std::string a = write_processes({worker("11", 0, {{1, false}, {2, false}}), worker("12", 1500, {{3, false}})});
  // B: worker 21 runs item 2 (its noise at 1000, first), worker 22 items 1, 3 (item 3's at 4000).
  const std::string b = write_processes({worker("21", 0, {{2, true}}), worker("22", 1000, {{1, false}, {3, true}})});
  json d = first(compare(a, b));
  INFO(d.dump());
  CHECK(d["cause"] == "rng");
  CHECK(d["a"]["op"] == "aten::normal_");
  // A's item 3 (worker 12) against B's item 3 (worker 22's last op), not B's item 2.
  CHECK(d["process_a"]["pid"] == "12");
  CHECK(d["process_b"]["pid"] == "22");
  CHECK(d["b"]["tidx"] == 3);
  // The text names both processes, each with its database (for `tdbg show`).
  const std::string text = tdbg::diff::format_divergence(compare(a, b));
  CHECK(text.find("  process:  A process") != std::string::npos);
  CHECK(text.find("\n            B process") != std::string::npos);
}

TEST_CASE("in a worker set, an item's counterpart is the same item, not the same random draw") {
  using T = Recorder::T;
  // Each worker loads items (arange, the same for all; mul by the item) and adds noise drawn
  // from its own generator (randn holding normal_). Batches go to the workers in turn: A's two
  // workers load items 1, 3 and 2, 4; B's three load 1, 4 and 2 and 3. So B's item 4 has the
  // noise A's item 3 has, and B's item 3 noise no worker of A's drew.
  auto task = [](Recorder& r, int item, int generator, int draw) {
    const uint64_t noise = uint64_t(generator * 10 + draw);
    const int64_t range = r.op("aten::arange", {}, {T{50}});
    const int64_t scaled = r.op("aten::mul", {T{50, range}}, {T{uint64_t(200 + item)}},
                                {{"other", std::to_string(item)}});
    const int64_t randn = r.op("aten::randn", {}, {T{300 + noise}});
    r.op("aten::normal_", {}, {T{300 + noise}}, {}, 30 + noise, 1, randn);
    const int64_t small = r.op("aten::mul", {T{300 + noise, randn}}, {T{400 + noise}}, {{"other", "0.1"}});
    r.op("aten::add", {T{uint64_t(200 + item), scaled}, T{400 + noise, small}},
         {T{uint64_t(1000 + 100 * item) + noise}});
  };
  auto worker = [&](const std::string& pid, int64_t clock, int generator, std::vector<int> items) {
    Process p{pid, "100", "", clock, [=](Recorder& r) {
                for (size_t d = 0; d < items.size(); ++d) task(r, items[d], generator, int(d));
              }};
    p.meta = {{"end_time_ns", "900000"}};
    return p;
  };
  const std::string b = write_processes({worker("21", 0, 1, {1, 4}), worker("22", 0, 2, {2}),
                                         worker("23", 0, 3, {3})});
  // A's first op that B's set does not run alike: item 4's draw (no worker of B's drew it),
  // when A's second worker gets there first; item 3's add of a draw B added to item 4, when
  // the first one does. Either way, B's same item, whose draw differs.
  for (int64_t second_worker_clock : {0, 6000}) {
    const std::string a = write_processes({worker("11", 0, 1, {1, 3}),
                                           worker("12", second_worker_clock, 2, {2, 4})});
    json d = first(compare(a, b));
    INFO(d.dump());
    CHECK(d["cause"] == "rng");
    CHECK(d["a"]["op"] == "aten::normal_");
    CHECK(d["process_a"]["pid"] == (second_worker_clock == 0 ? "12" : "11"));
    CHECK(d["process_b"]["pid"] == (second_worker_clock == 0 ? "21" : "23"));
    CHECK(d["b"]["tidx"] == (second_worker_clock == 0 ? 9 : 3));
  }
}

TEST_CASE("of ranks that ended early, the one that ended first is named, not the one it took down") {
  // Rank 1 raises (exit status 1); mp.spawn then terminates rank 0 (SIGTERM) later, although
  // rank 0 stopped at an earlier op of A's clock.
  auto rank = [](const std::string& pid, const char* r, int stop, const std::string& status,
                 const char* ended) {
    Process p{pid, "1", "", 1000, linear_ops(12, -1, stop), status};
    p.meta = {{"rank", r}, {"end_time_ns", ended}};
    return p;
  };
  const std::string a = write_processes({rank("11", "0/2", -1, "0", "900000"),
                                         rank("12", "1/2", -1, "0", "900000")});
  const std::string b = write_processes({rank("21", "0/2", 5, "signal 15", "800000"),
                                         rank("22", "1/2", 8, "1", "700000")});
  json d = first(compare(a, b));
  CHECK(d["cause"] == "ended");
  CHECK(d["process_a"]["index"] == 1);
  CHECK(d["detail"].get<std::string>().find("status 1") != std::string::npos);
  // Rank 0 terminated first (it was the one that failed): rank 0.
  const std::string c = write_processes({rank("31", "0/2", 5, "signal 15", "600000"),
                                         rank("32", "1/2", 8, "1", "700000")});
  CHECK(first(compare(a, c))["process_a"]["index"] == 0);
}

TEST_CASE("a DataLoader worker's difference after the main process's earlier one is not first") {
  // The main process draws another sampler permutation at step 3 (op 9); its worker, whose
  // ops all count as step 0, then loads other items (later by the clock).
  auto run = [](bool forgot_set_epoch) {
    return write_processes({{"100", "1", "", 1000, linear_ops(12, forgot_set_epoch ? 9 : -1)},
                            {"101",
                             "100",
                             "0/1",
                             50000,
                             linear_ops(3, forgot_set_epoch ? 1 : -1),
                             "",
                             {{"forked_at_step", "3"}}}});
  };
  json r = compare(run(false), run(true));
  json d = first(r);
  CHECK(d["process_a"]["index"] == 0);
  CHECK(d["a"]["step"] == 3);
  // The worker's own difference is still said, in brief, as a later one.
  REQUIRE(d["other_processes"].size() == 1);
  CHECK(d["other_processes"][0]["process"] == 1);
  CHECK(d["other_processes"][0]["worker"] == "0/1");
  CHECK(tdbg::diff::format_divergence(r).find(
            "also:     process 1 (DataLoader worker 0/1, forked at step 3) differs later, from "
            "aten::linear (seq 1): most likely a consequence (a DataLoader worker loads the items "
            "its parent's "
            "sampler picks, with a seed from its parent's generator)") != std::string::npos);
}

TEST_CASE(
    "a run with DataLoader workers against another program is not said to load in its main "
    "process") {
  using T = Recorder::T;
  auto ops = [](Recorder& r) { r.op("aten::mm", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 30); };
  auto one = [&](const std::string& script) {
    return write_processes({Process{
        "100", "1", "", 1000, ops, "0", {{"cmdline", "[\"python3\", \"" + script + "\"]"}}}});
  };
  const std::string loading = write_processes(
      {Process{"100", "1", "", 1000, ops, "0", {{"cmdline", R"(["python3", "dl.py"])"}}},
       Process{"101", "100", "0/2", 2000, ops, "0", {{"cmdline", R"(["python3", "dl.py"])"}}}});
  auto said = [](const json& r) {
    for (const json& w : r.value("warnings", json::array()))
      if (w.get<std::string>().find("loads its DataLoader's batches in its main process") !=
          std::string::npos)
        return true;
    return false;
  };
  CHECK(said(compare(one("dl.py"), loading)));
  const json other = compare(one("ddp.py"), loading);
  CHECK_FALSE(said(other));
  CHECK(other["warnings"].dump().find("different programs") != std::string::npos);
}

TEST_CASE("DataLoader workers as many in both runs are not said to load other batches each") {
  // Two workers in both runs; B's second worker loads another item (a data bug, a dropped
  // last batch): the workers load the same batches in both, so no note says otherwise.
  auto run = [](int differ) {
    std::vector<Process> processes = {{"100", "1", "", 1000, linear_ops(12)}};
    for (int w = 0; w < 2; ++w) {
      Process p{std::to_string(101 + w), "100", std::to_string(w) + "/2", 50000 + 100 * w,
                linear_ops(6, w == 1 ? differ : -1)};
      p.meta = {{"end_time_ns", "900000"}};
      processes.push_back(p);
    }
    return write_processes(processes);
  };
  json r = compare(run(-1), run(3));
  const std::string notes = r["notes"].dump();
  INFO(notes);
  CHECK(notes.find("DataLoader worker") != std::string::npos);
  CHECK(notes.find("load other batches each") == std::string::npos);
  CHECK(notes.find("compared as one set, their ops differ") != std::string::npos);
}

TEST_CASE("siblings that ran one after the other are phases, not a pool taking tasks in any order") {
  // A shell script trains, saves, then a second python process resumes (both children of the
  // unrecorded shell); B's resume forgets to load the optimizer state (another op at 2).
  auto phase = [](const std::string& pid, int64_t start, int64_t end, int differ) {
    Process p{pid, "1", "", start, linear_ops(6, differ)};
    p.meta = {{"end_time_ns", std::to_string(end)}};
    return p;
  };
  const std::string a = write_processes({phase("10", 1000, 5000, -1), phase("11", 6000, 9000, -1)});
  const std::string b = write_processes({phase("20", 1000, 5000, -1), phase("21", 6000, 9000, 2)});
  json r = compare(a, b);
  json d = first(r);
  CHECK(d["process_a"]["index"] == 1);
  CHECK(r["notes"].dump().find("multiprocessing Pool") == std::string::npos);
  // Workers that overlap in time are still a pool.
  const std::string c = write_processes({phase("30", 1000, 9000, -1), phase("31", 2000, 9000, -1)});
  const std::string e = write_processes({phase("40", 1000, 9000, -1), phase("41", 2000, 9000, 2)});
  CHECK(compare(c, e)["notes"].dump().find("multiprocessing Pool") != std::string::npos);
}

TEST_CASE("processes left out of the comparison are named with their pid and command line") {
  auto phase = [](const std::string& pid, int64_t start, const char* argv) {
    Process p{pid, "1", "", start, linear_ops(6)};
    p.meta = {{"cmdline", argv}};
    return p;
  };
  const std::string a = write_processes({phase("10", 1000, R"(["/usr/bin/python3", "train.py"])")});
  const std::string b = write_processes(
      {phase("20", 1000, R"(["/usr/bin/python3", "train.py", "--phase", "first"])"),
       phase("21", 9000, R"(["/usr/bin/python3", "train.py", "--phase", "second"])")});
  json r = compare(a, b);
  CHECK(r["notes"].dump().find("not compared, B's process 1 (pid 21: python3 train.py --phase "
                               "second)") != std::string::npos);
}

TEST_CASE(
    "an output that differs from equal inputs inside DDP's all-reduce is another rank's values") {
  using T = Recorder::T;
  // One rank's database: DDP's reducer copies the all-reduced bucket (written by the
  // collective, not recorded) into a gradient; the other rank's data differed.
  auto write = [](uint64_t reduced, const std::string& scope_name) {
    return write_ops(
        [=](Recorder& r) {
          const int64_t scope = r.op(scope_name, {T{10}}, {}, {}, 0, 0, kNoSeq, 17);
          r.op("aten::copy_", {T{11}, T{12}}, {T{reduced}}, {}, 0, 1, scope, 17);
        },
        [](tdbg::tracer::Writer& w) { w.set_meta("rank", "0/2"); });
  };
  json d = first(compare(write(20, "torch.distributed.ddp.reducer::copy_bucket_to_grad"),
                         write(21, "torch.distributed.ddp.reducer::copy_bucket_to_grad")));
  CHECK(d["a"]["op"] == "aten::copy_");
  CHECK(d["cause"] == "external_input");
  const std::string detail = d["detail"];
  CHECK(detail.rfind("every recorded input is the same but the output differs, inside DDP's "
                     "gradient all-reduce (torch.distributed.ddp.reducer::copy_bucket_to_grad "
                     "around it): the values come from the other ranks",
                     0) == 0);
  // Not inside a collective: a kernel computing otherwise.
  d = first(compare(write(20, "my_scope"), write(21, "my_scope")));
  CHECK(d["cause"] == "nondeterministic");
}

TEST_CASE("a collective's result, hashed where read, is named where it differs or holds NaN") {
  using T = Recorder::T;
  // A metric all-reduced (SUM in A, MAX in B), then read by item: the reader's input is the
  // collective's result, its producer.
  auto write = [](const std::string& op, uint64_t reduced, int64_t nan) {
    return write_ops([=](Recorder& r) {
      r.next_flags = tdbg::tracer::kOpCollective;
      T result{0, kNoSeq, "", TensorStatus::kNotHashed};
      result.reason = "collective result: hashed when next used";
      const int64_t all_reduce =
          r.op("c10d::allreduce_", {T{10, kNoSeq, ""}}, {result}, {{"op", op}}, 0, 0, kNoSeq, 42);
      T read{reduced, all_reduce, ""};
      read.nan = nan;
      r.op("aten::item", {read}, {}, {}, 0, 0, kNoSeq, 44);
      if (nan > 0) {
        T mean{40, kNoSeq, ""};
        mean.nan = nan;
        r.op("aten::div", {read}, {mean}, {{"other", "2"}}, 0, 0, kNoSeq, 45);
      }
      for (int k = 0; k < 4; ++k)
        r.op("aten::mul", {T{20u + k}}, {T{30u + k}}, {}, 0, 0, kNoSeq, 45);
    });
  };
  const std::string text =
      tdbg::diff::format_divergence(compare(write("SUM", 11, 0), write("MAX", 12, 0)));
  INFO(text);
  CHECK(text.find("no differing output made them: the collective c10d::allreduce_ wrote them") !=
        std::string::npos);
  // NaN in what the other ranks sent: it came in through the collective.
  auto run = tdbg::tracer::Run::Open(write("SUM", 11, 1));
  REQUIRE(run.ok());
  auto found = tdbg::diff::first_nonfinite(*run, {});
  REQUIRE(found.ok());
  const json& r = *found;
  REQUIRE(r["status"] == "nonfinite");
  CHECK(r["first_nonfinite"]["op"] == "aten::div");
  CHECK(r["first_nonfinite"]["entered"] == "input");
  CHECK(r["first_nonfinite"]["collective"]["op"] == "c10d::allreduce_");
}

TEST_CASE("a collective that overwrites a differing tensor heals it, views of it included") {
  using T = Recorder::T;
  // DDP: rank 1 inits its parameters from another seed; the parameters are flattened (views,
  // then a cat) and broadcast from rank 0, which overwrites them with rank 0's values; from
  // there the runs are the same.
  auto rank1 = [](uint64_t seed_rng) {
    return write_ops([=](Recorder& r) {
      const uint64_t init = mix(seed_rng, 1);
      T w{init};
      w.producer = r.op("aten::uniform_", {T{1}}, {w}, {}, seed_rng, 0, kNoSeq, 12);
      T flat_view{mix(init, 2), w.producer, "48", TensorStatus::kView};
      flat_view.producer = r.op("aten::view", {w}, {flat_view}, {}, 0, 0, kNoSeq, 13);
      T buffer{mix(init, 3)};
      buffer.producer = r.op("aten::cat", {flat_view}, {buffer}, {}, 0, 0, kNoSeq, 13);
      r.next_flags = tdbg::tracer::kOpCollective;
      r.op("c10d::broadcast_", {buffer}, {}, {}, 0, 0, kNoSeq, 13);
      // The received values (the same in both runs) go back into the parameter.
      r.next_flags = tdbg::tracer::kOpInplace;
      r.op("aten::copy_", {T{0, kNoSeq, "32x8", TensorStatus::kNotHashed}, T{500}}, {T{501}}, {}, 0,
           0, kNoSeq, 14);
      for (int k = 0; k < 12; ++k)
        r.op("aten::mul", {T{501u + k}}, {T{502u + k}}, {}, 0, 0, kNoSeq, 20);
    });
  };
  json d = first(compare(rank1(7), rank1(8)));
  CHECK(d["cause"] == "rng");
  REQUIRE(d["healed"].is_object());
  CHECK(d["healed"]["to_end"] == true);
  // The copy of the received values into the parameter overwrote the last differing tensor.
  CHECK(d["healed"]["by"]["op"] == "aten::copy_");
  CHECK(d["healed"]["by"]["seq"] == 4);
  const std::string text = tdbg::diff::format_divergence(compare(rank1(7), rank1(8)));
  CHECK(text.find("healed by aten::copy_ at ") != std::string::npos);
}

TEST_CASE("an argument difference against a run without hashes does not vouch for the inputs") {
  using T = Recorder::T;
  // B recorded with --hash none: its inputs hold no values, so nothing says they are the same.
  auto run = [](const char* alpha, TensorStatus status) {
    return write_ops([=](Recorder& r) {
      r.op("aten::add_", {T{10, kNoSeq, "32x8", status}, T{11, kNoSeq, "32x8", status}},
           {T{12, kNoSeq, "32x8", status}}, {{"alpha", alpha}}, 0, 0, kNoSeq, 7);
    });
  };
  const std::string hashed = run("0.1", TensorStatus::kHashed);
  const std::string none = run("0.2", TensorStatus::kNotHashed);
  json d = first(compare(hashed, none));
  CHECK(d["cause"] == "arguments");
  CHECK(d["detail"] == "a non-tensor argument differs; tensor inputs were not hashed in B");
  CHECK(first(compare(none, hashed))["detail"] ==
        "a non-tensor argument differs; tensor inputs were not hashed in A");
  CHECK(first(compare(hashed, run("0.2", TensorStatus::kHashed)))["detail"] ==
        "a non-tensor argument differs; tensor inputs are identical");
}

TEST_CASE("an argument that differs inside optimizer.step() says it is made of hyperparameters") {
  using T = Recorder::T;
  // AdamW's decay: mul_(1 - lr * weight_decay), inside the step's region (seq 1..1).
  auto run = [](const char* other, bool region) {
    return write_ops(
        [=](Recorder& r) {
          r.op("aten::mm", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 5);
          r.op("aten::mul_", {T{12}}, {T{13}}, {{"other", other}}, 0, 0, kNoSeq, 9);
        },
        [=](tdbg::tracer::Writer& w) {
          if (region) add_step_region(w, 1, 1, 1);
        });
  };
  json r = compare(run("0.9999", true), run("0.9998", true));
  json d = first(r);
  CHECK(d["argument"]["in_optimizer_step"] == true);
  CHECK(tdbg::diff::format_divergence(r).find("(inside optimizer.step(): a scalar made of its hyperparameters") !=
        std::string::npos);
  CHECK_FALSE(first(compare(run("0.9999", false), run("0.9998", false)))["argument"].contains("in_optimizer_step"));
}

TEST_CASE("an argument that changed no value is not said to have been overwritten") {
  using T = Recorder::T;
  // A gradient clamp with another bound that no value reaches: the op's tensors are the same.
  auto run = [](const std::string& bound) {
    return write_ops([&](Recorder& r) {
      r.op("aten::clamp", {T{10}}, {T{11}}, {{"min", bound}}, 0, 0, kNoSeq, 5);
      for (int k = 0; k < 12; ++k) r.op("aten::mul", {T{11u + k}}, {T{12u + k}}, {}, 0, 0, kNoSeq, 6);
    });
  };
  json r = compare(run("-1"), run("-0.5"));
  json d = first(r);
  CHECK(d["cause"] == "arguments");
  REQUIRE(d["healed"].is_object());
  const std::string text = tdbg::diff::format_divergence(r);
  CHECK(text.find("changed no value") != std::string::npos);
  CHECK(text.find("was overwritten with the same values") == std::string::npos);
  // The same hook at the next step: the same argument again is no new divergence; it changes
  // no value there either, to the end, and the headline says so.
  auto twice = [](const std::string& bound) {
    return write_ops([&](Recorder& r) {
      for (int step = 0; step < 2; ++step) {
        r.step = step;
        r.op("aten::clamp", {T{10}}, {T{11}}, {{"min", bound}}, 0, 0, kNoSeq, 5);
        for (int k = 0; k < 12; ++k) r.op("aten::mul", {T{11u + k}}, {T{12u + k}}, {}, 0, 0, kNoSeq, 6);
      }
    });
  };
  json again = compare(twice("-1"), twice("-0.5"));
  REQUIRE(first(again)["healed"].is_object());
  CHECK_FALSE(first(again).contains("next"));
  CHECK(first(again)["healed"]["to_end"] == true);
  CHECK(first(again)["healed"]["repeats"] == 1);
  const std::string again_text = tdbg::diff::format_divergence(again);
  INFO(again_text);
  CHECK(again_text.rfind("diverged at aten::clamp (seq 0, step 0): arguments; it changes no value: every "
                         "tensor is the same in both runs to the end", 0) == 0);
  CHECK(again_text.find("the same argument differs again at 1 later call(s)") != std::string::npos);
  CHECK(again_text.find("was overwritten with the same values") == std::string::npos);
  // Another argument at the later call is a divergence of its own.
  auto other = [](const std::string& bound, const std::string& later) {
    return write_ops([&](Recorder& r) {
      for (int step = 0; step < 2; ++step) {
        r.step = step;
        r.op("aten::clamp", {T{10}}, {T{11}}, {{"min", step == 0 ? bound : later}}, 0, 0, kNoSeq, 5);
        for (int k = 0; k < 12; ++k) r.op("aten::mul", {T{11u + k}}, {T{12u + k}}, {}, 0, 0, kNoSeq, 6);
      }
    });
  };
  CHECK(first(compare(other("-1", "-1"), other("-0.5", "-0.7")))["next"].is_object());
}

TEST_CASE("identical runs whose module paths differ get a note") {
  using T = Recorder::T;
  auto run = [](const std::string& root) {
    return write_ops([=](Recorder& r) {
      r.root_module = root;
      for (int k = 0; k < 5; ++k) r.op("aten::relu", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 7);
    });
  };
  json r = compare(run("model"), run("Wrapper.model"));
  REQUIRE(r["status"] == "identical");
  bool noted = false;
  for (const json& n : r["notes"])
    noted = noted || n.get<std::string>().find("module paths differ although every op is the same") !=
                         std::string::npos;
  CHECK(noted);
  for (const json& n : compare(run("model"), run("model"))["notes"])
    CHECK(n.get<std::string>().find("module paths differ") == std::string::npos);
  // A --ring run (its last ops only) against the whole run: the paths compared are those of
  // the same ops, not the ring's first against the other's first.
  auto ring = [](bool dropped) {
    return write_ops([=](Recorder& r) {
      r.root_module = "M.l";
      if (dropped) {
        r.skip(20);
      } else {
        for (int k = 0; k < 20; ++k) r.op("aten::relu", {T{uint64_t(10 + k)}}, {T{uint64_t(11 + k)}}, {}, 0, 0, kNoSeq, 7);
      }
      r.root_module = "";
      for (int k = 0; k < 30; ++k) r.op("aten::mul", {T{uint64_t(40 + k)}}, {T{uint64_t(41 + k)}}, {}, 0, 0, kNoSeq, 9);
    });
  };
  json rr = compare(ring(true), ring(false));
  REQUIRE(rr["status"] == "identical");
  for (const json& n : rr["notes"]) CHECK(n.get<std::string>().find("module paths differ") == std::string::npos);
  // Two rings, B's 4 ops later (it ran 4 more before them): the paths compared are those of
  // the ops the rings pair, not those at the same index.
  auto shifted = [](int64_t dropped) {
    return write_ops([=](Recorder& r) {
      r.skip(dropped);
      r.root_module = "M.l";
      for (int k = 0; k < 10; ++k) r.op("aten::relu", {T{uint64_t(10 + k)}}, {T{uint64_t(11 + k)}}, {}, 0, 0, kNoSeq, 7);
      r.root_module = "";
      for (int k = 0; k < 30; ++k) r.op("aten::mul", {T{uint64_t(40 + k)}}, {T{uint64_t(41 + k)}}, {}, 0, 0, kNoSeq, 9);
    });
  };
  json rs = compare(shifted(20), shifted(24));
  REQUIRE(rs["status"] == "identical");
  for (const json& n : rs["notes"]) CHECK(n.get<std::string>().find("module paths differ") == std::string::npos);
}

TEST_CASE("a difference found in a ring says the runs may have differed before it") {
  using T = Recorder::T;
  // A's ring holds ops 20 on; B holds them all. The argument of every op differs: the first
  // A holds is where the diff finds it, though the runs differed from op 0.
  auto run = [](int64_t dropped, const char* alpha) {
    return write_ops([=](Recorder& r) {
      r.skip(dropped);
      for (int64_t k = dropped; k < 60; ++k)
        r.op("aten::add", {T{uint64_t(10 + k)}}, {T{uint64_t(1000 + k)}}, {{"alpha", alpha}});
    });
  };
  json r = compare(run(20, "1"), run(0, "2"));
  json d = first(r);
  REQUIRE(d["compared_from"].is_object());
  CHECK(d["compared_from"]["tidx"] == 20);
  CHECK(d["compared_from"]["in_first_step"] == true);
  CHECK(tdbg::diff::format_divergence(r).find("compared: from A's op 20 of the thread (step 0) on") !=
        std::string::npos);
  CHECK_FALSE(first(compare(run(0, "1"), run(0, "2"))).contains("compared_from"));
  // A bundle's window (cut around the divergence of the whole runs): not said to be likely
  // earlier.
  auto window = [](const char* alpha, const char* meta) {
    return write_ops(
        [=](Recorder& r) {
          r.skip(20);
          for (int64_t k = 20; k < 60; ++k)
            r.op("aten::add", {T{uint64_t(10 + k)}}, {T{uint64_t(1000 + k)}}, {{"alpha", alpha}});
        },
        [=](tdbg::tracer::Writer& w) { w.set_meta("bundle_window", meta); });
  };
  const char* cut = R"({"from_seq":20,"to_seq":59})";
  r = compare(window("1", cut), window("2", cut));
  d = first(r);
  CHECK(d["compared_from"]["bundle_window"] == true);
  CHECK(d["compared_from"]["in_first_step"] == false);
  CHECK(tdbg::diff::format_divergence(r).find("a bundle holds this window of the runs") != std::string::npos);
  // Data from before a bundle's cut: not "record a longer --ring", the cut being around the
  // divergence the whole runs showed.
  auto data = [=](uint64_t input) {
    return write_ops(
        [=](Recorder& r) {
          r.skip(20);
          r.op("aten::relu", {T{input}}, {T{input + 1}}, {}, 0, 0, kNoSeq, 5);
        },
        [=](tdbg::tracer::Writer& w) { w.set_meta("bundle_window", cut); });
  };
  d = first(compare(data(10), data(20)));
  CHECK(d["cause"] == "external_input");
  CHECK(d["detail"].get<std::string>().find("--ring") == std::string::npos);
  // A bundle of whole runs (its window from seq 0) of runs a ring cut: the ring is named.
  const char* whole = R"({"from_seq":0,"to_seq":9223372036854775807})";
  r = compare(window("1", whole), window("2", whole));
  d = first(r);
  CHECK(d["compared_from"]["bundle_window"] == false);
  CHECK(tdbg::diff::format_divergence(r).find("a --ring or a trimmed bundle dropped the earlier ones") !=
        std::string::npos);
}

TEST_CASE("runs recorded with other --steps windows are compared from the first step both hold") {
  using T = Recorder::T;
  // Steps [from, to) of a loop of 3 ops per step; `changed`: the step whose mm differs.
  auto run = [](int64_t from, int64_t to, const std::string& window, int64_t changed) {
    return write_ops(
        [=](Recorder& r) {
          for (int64_t s = from; s < to; ++s) {
            r.step = s;
            const uint64_t x = 10 * static_cast<uint64_t>(s);
            r.op("aten::relu", {T{x}}, {T{x + 1}}, {}, 0, 0, kNoSeq, 5);
            r.op("aten::mm", {T{x + 1}}, {T{s == changed ? x + 7 : x + 2}}, {}, 0, 0, kNoSeq, 6);
            r.op("aten::add_", {T{x + 2}}, {T{x + 3}}, {}, 0, 0, kNoSeq, 7);
          }
        },
        [=](tdbg::tracer::Writer& w) {
          if (!window.empty()) w.set_meta("steps", window);
        });
  };
  for (const auto& [a, b] : {std::pair{run(0, 8, "", -1), run(2, 6, "2:6", 5)},
                             std::pair{run(2, 6, "2:6", 5), run(0, 8, "", -1)},
                             std::pair{run(1, 7, "1:7", -1), run(3, 8, "3:8", 5)}}) {
    json r = compare(a, b);
    json d = first(r);
    INFO(tdbg::diff::format_divergence(r));
    CHECK(d["kind"] == "value");
    CHECK(d["a"]["op"] == "aten::mm");
    CHECK(d["a"]["step"] == 5);
    bool noted = false;
    for (const json& n : r["notes"])
      noted = noted || n.get<std::string>().find(", the first both runs hold") != std::string::npos;
    CHECK(noted);
  }
  // No difference in the steps both hold: identical, whatever only one run holds.
  json r = compare(run(0, 8, "", -1), run(2, 6, "2:6", -1));
  CHECK(r["status"] == "identical");
  // A ring that begins inside step 2 (its first op dropped) against a window from step 2: the
  // ring's step 2 is not whole, so the steps compared begin at 3, not at a "removed" op.
  const std::string ring = write_ops(
      [](Recorder& r) {
        r.skip(7);
        for (int64_t s = 2; s < 6; ++s) {
          r.step = s;
          const uint64_t x = 10 * static_cast<uint64_t>(s);
          if (s > 2) r.op("aten::relu", {T{x}}, {T{x + 1}}, {}, 0, 0, kNoSeq, 5);
          r.op("aten::mm", {T{x + 1}}, {T{x + 2}}, {}, 0, 0, kNoSeq, 6);
          r.op("aten::add_", {T{x + 2}}, {T{x + 3}}, {}, 0, 0, kNoSeq, 7);
        }
      },
      [](tdbg::tracer::Writer& w) { w.set_meta("ring", "11"); });
  for (const auto& [a, b] : {std::pair{run(2, 6, "2:6", -1), ring}, std::pair{ring, run(2, 6, "2:6", -1)}}) {
    json ringed = compare(a, b);
    INFO(tdbg::diff::format_divergence(ringed));
    CHECK(ringed["status"] == "identical");
    CHECK(ringed["warnings"].dump().find("all, a --ring of the last 11 ops") != std::string::npos);
  }
  // No step in common: nothing to compare, an error that names the steps each run holds.
  auto ra = tdbg::tracer::Run::Open(run(0, 3, "0:3", -1));
  auto rb = tdbg::tracer::Run::Open(run(5, 8, "5:8", 6));
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  auto none = tdbg::diff::compare_runs(*ra, *rb, {});
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("(steps 0..2) of the thread and B ops 0..8 (steps 5..7)") !=
        std::string::npos);
  CHECK(none.status().message().find("record B again with --steps 0:3") != std::string::npos);
  // A's steps start at 0, as a resumed run's count does again: --align-steps is offered too.
  CHECK(none.status().message().find("or, if A resumed from a checkpoint (its steps count from 0 "
                                     "again), pair the steps with --align-steps 0:5") != std::string::npos);
}

TEST_CASE("inputs that differ because ops were inserted are said to come from the change") {
  using T = Recorder::T;
  // B adds to the loss (an inserted op) before ones_like reads it: ones_like's input differs,
  // its output not, and the inserted add made it, not state changed in place.
  auto run = [](bool insert) {
    return write_ops([=](Recorder& r) {
      const int64_t loss = r.op("aten::mse_loss", {T{1}}, {T{5}}, {}, 0, 0, kNoSeq, 10);
      int64_t made = loss;
      uint64_t value = 5;
      if (insert) {
        made = r.op("aten::add", {T{5, loss}}, {T{6}}, {}, 0, 0, kNoSeq, 11);
        value = 6;
      }
      r.op("aten::ones_like", {T{value, made}}, {T{7}}, {}, 0, 0, kNoSeq, 12);
      r.op("aten::mul", {T{7}}, {T{8}}, {}, 0, 0, kNoSeq, 13);
    });
  };
  json r = compare(run(false), run(true));
  REQUIRE(r["first_divergence"].is_object());
  const json& kept = r["first_divergence"]["growth"]["inputs_only"];
  REQUIRE(kept.size() == 1);
  CHECK(kept[0]["from_change"] == true);
  const std::string text = tdbg::diff::format_divergence(r);
  INFO(text);
  CHECK(text.find("the ops only one run ran (the structural change) made them") != std::string::npos);
  CHECK(text.find("batch norm") == std::string::npos);
}

TEST_CASE("growth where only inputs differ says so, not a distance of '-'") {
  using T = Recorder::T;
  // Batch norm under another momentum: the running stats (inputs) differ, the outputs not.
  auto run = [](uint64_t stats) {
    return write_ops([=](Recorder& r) {
      for (int k = 0; k < 4; ++k)
        r.op("aten::batch_norm", {T{10}, T{stats + uint64_t(k)}}, {T{20}}, {}, 0, 0, kNoSeq, 7);
    });
  };
  json r = compare(run(100), run(200));
  REQUIRE(r["first_divergence"].is_object());
  const std::string text = tdbg::diff::format_divergence(r);
  CHECK(text.find("no output differs (inputs or arguments only)") != std::string::npos);
  CHECK(text.find("distance up to -") == std::string::npos);
  // The inputs that differ are named: state changed in place that later readers see.
  INFO(text);
  CHECK(text.find("inputs differ while no output does: in 1 of aten::batch_norm (step 0)") !=
        std::string::npos);
  CHECK(text.find("what reads them later (eval mode, a saved checkpoint) reads other values") !=
        std::string::npos);
  const json& kept = r["first_divergence"]["growth"]["inputs_only"];
  REQUIRE(kept.size() == 1);
  CHECK(kept[0]["inputs"] == json::array({1}));
  CHECK(kept[0]["pairs"] == 4);
  // Training steps where only the running stats differ, then an evaluation whose output they
  // change: said too, as what explains the later difference; not the ops after it.
  auto eval_later = [](uint64_t stats) {
    return write_ops([=](Recorder& r) {
      for (int k = 0; k < 3; ++k) {
        r.step = k;
        r.op("aten::batch_norm", {T{10}, T{stats + uint64_t(k)}}, {T{20}}, {}, 0, 0, kNoSeq, 7);
      }
      r.step = 3;
      r.op("aten::batch_norm", {T{10}, T{stats + 3}}, {T{stats + 50}}, {}, 0, 0, kNoSeq, 9);
      r.op("aten::relu", {T{stats + 50}}, {T{60}}, {}, 0, 0, kNoSeq, 10);
    });
  };
  const std::string later = tdbg::diff::format_divergence(compare(eval_later(100), eval_later(200)));
  INFO(later);
  CHECK(later.find("inputs differ while no output does: in 1 of aten::batch_norm (step 0 to 2)") !=
        std::string::npos);
  CHECK(later.find("of aten::relu") == std::string::npos);
  // Each such step says its ops differ in what they read, not in what they made.
  CHECK(later.find(
            "steps 0-2, each: 1/1 ops differ, no output among them: arguments or inputs differ") !=
        std::string::npos);
}

TEST_CASE("growth where every differing op is structural, or outputs differ in shape, says so") {
  // Another batch size at step 8: the ops of that step are structural changes, and the ops
  // paired around them have the same values. "No output differs" would be false.
  Variation va, vb;
  vb.batch_change_step = 8;
  const std::string text = tdbg::diff::format_divergence(compare(write_run(va), write_run(vb)));
  CHECK(text.find("all in structural changes: the ") != std::string::npos);
  CHECK(text.find(" op(s) paired outside them have the same values") != std::string::npos);
  CHECK(text.find("no output differs") == std::string::npos);
  CHECK(text.find("no output among them") == std::string::npos);
  // The same op paired, with another output shape (an argument changed): outputs differ.
  using T = Recorder::T;
  auto run = [](const std::string& shape) {
    return write_ops([&](Recorder& r) {
      r.op("aten::neg", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      for (int k = 0; k < 3; ++k) {
        T out{uint64_t(12 + k)};
        out.shape = shape;
        r.op("aten::relu", {T{11}}, {out}, {}, 0, 0, kNoSeq, 5);
      }
    });
  };
  const std::string shaped = tdbg::diff::format_divergence(compare(run("4x8"), run("4x9")));
  CHECK(shaped.find("no output differs") == std::string::npos);
  CHECK(shaped.find("no output among them") == std::string::npos);
}

TEST_CASE("an input from no recorded op, in a selective recording, may come from an op left out") {
  using T = Recorder::T;
  auto run = [](uint64_t input, const std::string& ops) {
    return write_ops(
        [=](Recorder& r) {
          r.step = 7;
          r.op("aten::addmm", {T{input}}, {T{mix(input, 1)}}, {}, 0, 0, kNoSeq, 7);
        },
        [=](tdbg::tracer::Writer& w) { w.set_meta("ops", ops); });
  };
  json d = first(compare(run(10, "addmm|mean"), run(11, "addmm|mean")));
  CHECK(d["cause"] == "external_input");
  CHECK(d["detail"].get<std::string>().find("or an op the recording left out made it (recorded "
                                            "with --ops addmm|mean): to see which, record both "
                                            "again without --ops, with --steps 6:8") !=
        std::string::npos);
  CHECK(first(compare(run(10, ""), run(11, "")))["detail"].get<std::string>().find("left out") ==
        std::string::npos);
}

TEST_CASE("a ring that dropped what made a differing input or view says the runs parted before") {
  using T = Recorder::T;
  // Both rings hold seqs 100..; an op reads a tensor (or a view of one) that op 50 made.
  auto ring = [](uint64_t made, TensorStatus status) {
    return write_ops([=](Recorder& r) {
      r.skip(100);
      r.op("aten::relu", {T{1}}, {T{2}}, {}, 0, 0, kNoSeq, 4);
      T in{made, 50, "1x16", status};
      r.op("aten::add_", {T{3}, in}, {T{mix(made, 9)}}, {}, 0, 0, kNoSeq, 5);
    });
  };
  for (TensorStatus status : {TensorStatus::kView, TensorStatus::kKnown}) {
    json d = first(compare(ring(10, status), ring(11, status)));
    INFO(d["detail"].get<std::string>());
    CHECK(d["cause"] == "external_input");
    CHECK(d["detail"].get<std::string>().find("op 50 of A") != std::string::npos);
    CHECK(d["detail"].get<std::string>().find("not in the recording (a --ring") != std::string::npos);
  }
}

TEST_CASE("rings that kept other amounts line up the ops both hold") {
  using T = Recorder::T;
  // Op k of a step loop; `shift` ops ran before it (B ran one op more before the rings
  // started); `dropped` ops before the ring's first.
  auto run = [](int shift, int dropped, int total) {
    return write_ops([=](Recorder& r) {
      r.skip(dropped);
      for (int k = dropped - shift; k < total; ++k) {
        static const char* names[] = {"aten::mm", "aten::relu", "aten::add", "aten::sum", "aten::mul"};
        r.op(names[k % 5], {T{uint64_t(1000 + k)}}, {T{uint64_t(2000 + k)}}, {}, 0, 0, kNoSeq, 5 + k % 5);
      }
    });
  };
  // B holds the same ops one tidx further on: the same ops, not an op inserted in B.
  json shifted = compare(run(0, 100, 140), run(1, 101, 140));
  INFO(tdbg::diff::format_divergence(shifted));
  CHECK(shifted["status"] == "identical");
  bool lined_up = false;
  for (const json& n : shifted["notes"])
    lined_up = lined_up || n.get<std::string>().find("where the ops both hold line up") != std::string::npos;
  CHECK(lined_up);
  // The same program, rings that dropped other amounts: the same tidx is the same op.
  json same = compare(run(0, 100, 140), run(0, 105, 140));
  CHECK(same["status"] == "identical");
}

TEST_CASE("settings are those of the processes that diverged, not the launcher's") {
  using T = Recorder::T;
  // mp.spawn: the launcher never seeds (torch drew its seed), each rank seeds 0 in A, 1 in B.
  auto run = [](const std::string& launcher_seed, const std::string& rank_seed, uint64_t rng) {
    auto ended = [](std::vector<std::pair<std::string, std::string>> m) {
      m.emplace_back("end_time_ns", "1");
      return m;
    };
    return write_processes(
        {{"100", "1", "", 1000000, [](Recorder& r) { r.op("aten::ones", {}, {T{5}}, {}, 0, 0, kNoSeq, 3); },
          "0", ended({{"seed", launcher_seed}})},
         {"101", "100", "", 2000000,
          [rng](Recorder& r) { r.op("aten::randn", {}, {T{rng}}, {}, rng, 0, kNoSeq, 9); }, "0",
          ended({{"seed", rank_seed}, {"rank", "0/1"}})}});
  };
  json r = compare(run("13922693882361319467", "0", 7), run("12454558674892371621", "1", 8));
  json d = first(r);
  CHECK(d["cause"] == "rng");
  CHECK(d["process_a"]["index"] == 1);
  REQUIRE(r["settings"].size() == 1);
  CHECK(r["settings"][0]["key"] == "seed");
  CHECK(r["settings"][0]["a"] == "0");
  CHECK(r["settings"][0]["b"] == "1");
  CHECK(r["settings_of"]["b"] == 1);
}

TEST_CASE("first_nonfinite looks at every process: a DataLoader worker's earlier start wins") {
  using T = Recorder::T;
  // The main process reads a batch holding NaN from shared memory (no recorded producer).
  auto consumer = [](Recorder& r) {
    r.step = 3;
    T batch{11};
    batch.nan = 1;
    T y{12};
    y.nan = 4;
    r.op("aten::linear", {batch, T{13}}, {y}, {}, 0, 0, kNoSeq, 18);
  };
  auto finite_worker = [](Recorder& r) { r.op("aten::randn", {}, {T{21}}, {}, 7, 0, kNoSeq, 9); };
  // Worker 1 divides by zero (Inf from finite values), then multiplies by 0 (NaN).
  auto bad_worker = [](Recorder& r) {
    T inf{31};
    inf.inf = 4;
    inf.producer = r.op("aten::div", {T{30}, T{29}}, {inf}, {}, 0, 0, kNoSeq, 11);
    T nan{32};
    nan.nan = 4;
    r.op("aten::mul", {inf}, {nan}, {{"other", "0"}}, 0, 0, kNoSeq, 11);
  };

  SECTION("the earliest start by op start time, with its process named") {
    json r = nonfinite_of(write_processes({{"100", "1", "", 5000000, consumer},
                                           {"101", "100", "0/2", 1000000, finite_worker},
                                           {"102", "100", "1/2", 2000000, bad_worker}}));
    REQUIRE(r["status"] == "nonfinite");
    json f = r["first_nonfinite"];
    CHECK(f["op"] == "aten::div");
    CHECK(f["process"] == 2);
    CHECK(f["process_info"]["worker"] == "1/2");
    CHECK(f["process_info"]["pid"] == "102");
    CHECK(f["processes"] == 3);
    CHECK(f["chosen_because"] == "earliest");
    REQUIRE(f["other_starts"].size() == 1);
    CHECK(f["other_starts"][0]["op"] == "aten::linear");
    CHECK(f["other_starts"][0]["process"]["index"] == 0);
    CHECK(f["other_starts"][0]["entered"] == "input");
    const std::string text = tdbg::diff::format_nonfinite(r);
    CHECK(text.find("non-finite at aten::div (seq 0, in DataLoader worker 1/2)") != std::string::npos);
    CHECK(text.find("process:  process 2 of 0-2 (DataLoader worker 1/2, pid 102)") != std::string::npos);
    CHECK(text.find("also:     process 0: aten::linear (seq 0, step 3) at train.py:18, NaN entered "
                    "from an input") != std::string::npos);
  }

  SECTION("a process the program forked says the step its parent had reached") {
    // An evaluation forked at step 20 (not a DataLoader worker) that divides by zero.
    json r = nonfinite_of(write_processes(
        {{"100", "1", "", 5000000, finite_worker},
         {"103", "100", "", 2000000, bad_worker, "", {{"forked_at_step", "20"}}}}));
    json f = r["first_nonfinite"];
    CHECK(f["op"] == "aten::div");
    CHECK(f["process_info"]["forked_at_step"] == 20);
    const std::string text = tdbg::diff::format_nonfinite(r);
    CHECK(text.find("non-finite at aten::div (seq 0, step 0, process 1, forked at step 20)") !=
          std::string::npos);
    CHECK(text.find("process:  process 1 of 0-1 (forked at step 20, pid 103)") != std::string::npos);
  }

  SECTION("a consumer's NaN from outside yields to its worker's made-here start") {
    // The consumer's clock reads earlier than the worker's start (it cannot have read the
    // batch before the worker made it, but clocks and prefetching blur it), and the worker
    // was running by then: the worker's made-here start is the answer.
    auto late_bad_worker = [&](Recorder& r) {
      finite_worker(r);
      r.clock_ns += 2000000;
      bad_worker(r);
    };
    json r = nonfinite_of(write_processes(
        {{"100", "1", "", 1000000, consumer}, {"102", "100", "1/2", 500000, late_bad_worker}}));
    json f = r["first_nonfinite"];
    CHECK(f["op"] == "aten::div");
    CHECK(f["process_info"]["worker"] == "1/2");
    CHECK(f["chosen_because"].get<std::string>().find("process 0 read NaN earlier") != std::string::npos);
    CHECK(f["other_starts"][0]["op"] == "aten::linear");
  }

  SECTION("NaN that entered the main process before its workers ran is its own") {
    // Written into the dataset before the DataLoader forked (`self.x[i] = nan` in __init__):
    // no worker existed to make it; the workers that read it later inherited it.
    json r = nonfinite_of(write_processes(
        {{"100", "1", "", 1000000, consumer}, {"102", "100", "1/2", 2000000, bad_worker}}));
    json f = r["first_nonfinite"];
    CHECK(f["op"] == "aten::linear");
    CHECK(f["process"] == 0);
    CHECK(f["chosen_because"] == "earliest");
  }

  SECTION("a start made in the main process before any worker's is the answer") {
    auto made = [](Recorder& r) {
      T y{12};
      y.nan = 1;
      r.op("aten::log", {T{11}}, {y}, {}, 0, 0, kNoSeq, 5);
    };
    json r = nonfinite_of(write_processes({{"100", "1", "", 1000000, made},
                                           {"102", "100", "1/2", 2000000, bad_worker}}));
    CHECK(r["first_nonfinite"]["op"] == "aten::log");
    CHECK(r["first_nonfinite"]["process"] == 0);
    CHECK(r["first_nonfinite"]["other_starts"][0]["op"] == "aten::div");
  }
}

TEST_CASE("first_nonfinite: NaN made before what a ring kept enters where the ring begins") {
  using T = Recorder::T;
  // The ring holds seqs 100.. of a run whose weights went NaN before: every op it holds reads
  // NaN that an op it dropped (seq 40) made. That is no finite run.
  json r = nonfinite_of(write_ops([](Recorder& r) {
    r.skip(100);
    T w{11, 40};
    w.nan = 8;
    T y{12};
    y.nan = 4;
    r.op("aten::linear", {T{10}, w}, {y}, {}, 0, 0, kNoSeq, 18);
  }));
  REQUIRE(r["status"] == "nonfinite");
  CHECK(r["first_nonfinite"]["op"] == "aten::linear");
  CHECK(r["first_nonfinite"]["entered"] == "dropped");
  const std::string text = tdbg::diff::format_nonfinite(r);
  CHECK(text.rfind("non-finite already where the recording begins (it started in ops it no longer "
                   "holds: a --ring's or a trimmed bundle's), first at aten::linear (seq ",
                   0) == 0);
  CHECK(text.find("NaN entered the recording here") != std::string::npos);
  CHECK(text.find("(a ring kept the last ones, or a bundle trimmed") != std::string::npos);
  // Where the ring begins, and what to record to reach before it.
  CHECK(r["first_nonfinite"]["first_held_step"] == 0);
  CHECK(text.find("the database begins in step 0, so record again with a larger --ring") != std::string::npos);
  // Begun at a later step: a window from before it, or first a cheap pass over the loss's op
  // (--hash outputs keeps nearly all the size: no cheap pass).
  json later = r;
  later["first_nonfinite"]["first_held_step"] = 3164;
  const std::string advice = tdbg::diff::format_nonfinite(later);
  INFO(advice);
  CHECK(advice.find("--steps K:3165 with K < 3164, or from 0 with --ops matching the ops that "
                    "compute the loss") != std::string::npos);
  CHECK(advice.find("--hash outputs") == std::string::npos);

  // The same through an input whose values were not recorded (a view: no summary), made by an
  // op the ring dropped, into an op whose other inputs are finite: AccumulateGrad's add_ of a
  // NaN gradient. Not "made here".
  json v = nonfinite_of(write_ops([](Recorder& r) {
    r.skip(100);
    T grad{21, 40};
    grad.summary = false;
    T sum{22};
    sum.nan = 4;
    r.next_flags = tdbg::tracer::kOpInplace;
    r.op("aten::add_", {T{20}, grad}, {sum}, {{"alpha", "1"}}, 0, 0, kNoSeq, 0);
  }));
  REQUIRE(v["status"] == "nonfinite");
  CHECK(v["first_nonfinite"]["op"] == "aten::add_");
  CHECK(v["first_nonfinite"]["entered"] == "dropped");

  // Likewise through a view that a held op made of such an input (`aten::t` of the dropped
  // op's gradient, then AccumulateGrad's add_).
  json vv = nonfinite_of(write_ops([](Recorder& r) {
    r.skip(100);
    T grad{21, 40};
    grad.summary = false;
    T view{23};
    view.summary = false;
    const int64_t t = r.op("aten::t", {grad}, {view}, {}, 0, 0, kNoSeq, 0);
    T in{23, t};
    in.summary = false;
    T sum{22};
    sum.nan = 4;
    r.next_flags = tdbg::tracer::kOpInplace;
    r.op("aten::add_", {T{20}, in}, {sum}, {{"alpha", "1"}}, 0, 0, kNoSeq, 0);
  }));
  REQUIRE(vv["status"] == "nonfinite");
  CHECK(vv["first_nonfinite"]["op"] == "aten::add_");
  CHECK(vv["first_nonfinite"]["entered"] == "dropped");

  // NaN made in a nested op of what the ring kept: the innermost op, as in a full run (the
  // thread's tidx run past its op count).
  json nested = nonfinite_of(write_ops([](Recorder& r) {
    r.skip(100);
    T y{32};
    y.nan = 4;
    const int64_t linear = r.op("aten::linear", {T{30}, T{31}}, {y}, {}, 0, 0, kNoSeq, 18);
    r.op("aten::addmm", {T{30}, T{31}}, {y}, {}, 0, 1, linear, 18);
  }));
  REQUIRE(nested["status"] == "nonfinite");
  CHECK(nested["first_nonfinite"]["op"] == "aten::addmm");

  // A backward op whose forward op the ring dropped: no line, and why.
  json b = nonfinite_of(write_ops([](Recorder& r) {
    r.skip(100);
    T g{21, 40};
    g.nan = 8;
    T y{22};
    y.nan = 4;
    r.next_fwd = 30;
    r.op("aten::threshold_backward", {g}, {y}, {}, 0, 0, kNoSeq, 18);
  }));
  REQUIRE(b["status"] == "nonfinite");
  CHECK(tdbg::diff::format_nonfinite(b).find(
            "(no source: its forward op (seq 30) is not in the recording") != std::string::npos);

  // A --steps window: an input no recorded op produced may come from before the window.
  auto windowed = [](const std::string& steps) {
    return nonfinite_of(write_ops(
        [](Recorder& r) {
          T w{11};
          w.nan = 8;
          T y{12};
          y.nan = 4;
          r.op("aten::linear", {T{10}, w}, {y}, {}, 0, 0, kNoSeq, 18);
        },
        [&](tdbg::tracer::Writer& w) { w.set_meta("steps", steps); }));
  };
  json in_window = windowed("5:9");
  CHECK(in_window["first_nonfinite"]["entered"] == "input");
  CHECK(in_window["first_nonfinite"]["recorded_only"] == "--steps 5:9");
  CHECK(tdbg::diff::format_nonfinite(in_window).find("it holds only --steps 5:9") != std::string::npos);
  CHECK(in_window["first_nonfinite"]["window_first_step"] == false);
  CHECK_FALSE(windowed("")["first_nonfinite"].contains("recorded_only"));
  // In the window's first step (the op is of step 0): most likely made before it.
  json at_start = windowed("0:9");
  CHECK(at_start["first_nonfinite"]["window_first_step"] == true);
  CHECK(tdbg::diff::format_nonfinite(at_start).find(
            "this is the --steps window's first step: most likely an op before the window made it") !=
        std::string::npos);
}

TEST_CASE("first_nonfinite: an op whose output is bool passes no NaN on") {
  using T = Recorder::T;
  // `torch.isnan(x)` reads NaN data from outside first; its bool output (no summary) holds
  // none. NaN enters where an op passes it on: the `mul` that reads the same data.
  json r = nonfinite_of(write_ops([](Recorder& r) {
    T x{10};
    x.nan = 1;
    T mask{11};
    mask.summary = false;
    mask.dtype = DType::kBool;
    r.op("aten::isnan", {x}, {mask}, {}, 0, 0, kNoSeq, 6);
    T y{12};
    y.nan = 1;
    r.op("aten::mul", {x, T{13}}, {y}, {}, 0, 0, kNoSeq, 7);
  }));
  REQUIRE(r["status"] == "nonfinite");
  CHECK(r["first_nonfinite"]["op"] == "aten::mul");
  CHECK(r["first_nonfinite"]["entered"] == "input");
  CHECK(tdbg::diff::format_nonfinite(r).find("a view of its NaN input") == std::string::npos);
}

TEST_CASE("threads pair in the order they were made, the main one first, when thread ids wrap") {
  using T = Recorder::T;
  // The model is made on the main thread (pid 1000); B trains in a Python thread. Its OS id
  // comes after the pid, or, the pid counter having wrapped around (a busy machine), below it.
  auto run = [](bool in_thread, int64_t worker_tid) {
    fs::path dir = temp_dir();
    auto w = tdbg::tracer::Writer::Create((dir / "run.sqlite").string());
    REQUIRE(w.ok());
    (*w)->set_meta("pid", "1000");
    int64_t seq = 0;
    Recorder main(**w, 0, &seq);
    for (uint64_t k = 0; k < 4; ++k) main.op("aten::uniform_", {T{k}}, {T{10 + k}}, {}, 0, 0, kNoSeq, 18);
    std::optional<Recorder> worker;
    if (in_thread) {
      worker.emplace(**w, 1, &seq, worker_tid);
      worker->clock_ns = main.clock_ns;
    }
    Recorder& train = in_thread ? *worker : main;
    for (uint64_t step = 0; step < 40; ++step) {
      train.step = static_cast<int32_t>(step);
      train.op("aten::mm", {T{100 + step}}, {T{200 + step}}, {}, 0, 0, kNoSeq, 114);
      train.op("aten::add_", {T{200 + step}}, {T{300 + step}}, {{"alpha", "-0.1"}}, 0, 0, kNoSeq, 120);
    }
    REQUIRE((*w)->close().ok());
    return dir.string();
  };
  const std::string a = run(false, 0);
  for (int64_t tid : {1001, 300}) {
    INFO("the training thread's OS id: " << tid);
    json d = first(compare(a, run(true, tid)));
    const json& m = d["thread_move"];
    REQUIRE(m.is_object());
    CHECK(m["side"] == "A");
    CHECK(m["to_thread"] == 1);
    CHECK(m["ops_compared"] == 80);
    CHECK(m["first_difference"].is_null());
  }
}

TEST_CASE("first_nonfinite names the thread in the headline when it is not the first one") {
  using T = Recorder::T;
  fs::path dir = temp_dir();
  auto w = tdbg::tracer::Writer::Create((dir / "run.sqlite").string());
  REQUIRE(w.ok());
  int64_t seq = 0;
  Recorder main(**w, 0, &seq), other(**w, 1, &seq);  // os tids 1000 and 1001
  main.op("aten::mul", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
  other.step = 2;
  other.clock_ns = main.clock_ns;
  T y{13};
  y.nan = 1;
  other.op("aten::log", {T{12}}, {y}, {}, 0, 0, kNoSeq, 7);
  REQUIRE((*w)->close().ok());
  json r = nonfinite_of(dir.string());
  REQUIRE(r["first_nonfinite"]["op"] == "aten::log");
  CHECK(r["first_nonfinite"]["os_tid"] == 1001);
  CHECK(tdbg::diff::format_nonfinite(r).find("non-finite at aten::log (seq 1, step 2, thread 1, tid "
                                             "1001): output 0") != std::string::npos);
}

TEST_CASE("first_nonfinite: a string id that does not resolve is a corrupt database, not an answer") {
  using T = Recorder::T;
  const std::string path = write_ops([](Recorder& r) {
    T y{12};
    y.nan = 1;
    r.op("aten::log", {T{11}}, {y}, {}, 0, 0, kNoSeq, 7);
  });
  REQUIRE(nonfinite_of(path)["first_nonfinite"]["op"] == "aten::log");
  // Damage the strings table as overwritten pages do: the op's name no longer resolves.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "DELETE FROM strings WHERE text = 'aten::log'", nullptr, nullptr, nullptr) ==
          SQLITE_OK);
  // Opening checks the names against the check written with them.
  {
    auto damaged = tdbg::tracer::Run::Open(path);
    REQUIRE_FALSE(damaged.ok());
    CHECK(damaged.status().message().find("corrupt database (its strings or frames") != std::string::npos);
  }
  // Without that check (a database written before it), the lookup that fails says so.
  REQUIRE(sqlite3_exec(db, "DELETE FROM meta WHERE key = 'names_check'", nullptr, nullptr, nullptr) ==
          SQLITE_OK);
  sqlite3_close(db);
  auto run = tdbg::tracer::Run::Open(path);
  REQUIRE(run.ok());
  auto result = tdbg::diff::first_nonfinite(*run);
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().message().find("corrupt database (string id ") != std::string::npos);
  CHECK(result.status().message().find('\n') == std::string::npos);
}

TEST_CASE("process_ending names every thread a signal stopped inside ops, the main thread first") {
  using T = Recorder::T;
  int64_t seq = 0;
  const std::string path = write_ops(
      [&](Recorder& r) { r.op("aten::relu", {T{1}}, {T{2}}, {}, 0, 0, kNoSeq, 0); },
      [&](tdbg::tracer::Writer& w) {
        Recorder worker(w, 1, &seq);  // a second thread (os tid 1001); thread 0 is os tid 1000
        const auto mm = w.intern("aten::mm"), matmul = w.intern("aten::matmul");
        const auto file = w.intern("train.py"), fn = w.intern("<module>");
        const auto at8 = w.intern_frame(0, file, 8, fn), at15 = w.intern_frame(0, file, 15, fn);
        w.set_meta("pid", "1001");
        w.set_meta("exit_status", "signal 15");
        w.set_meta("in_flight",
                   "[{\"thread\":0,\"depth\":1,\"names\":[" + std::to_string(mm) +
                       "],\"seq\":5,\"step\":0,\"fwd\":-1,\"user_frame\":" + std::to_string(at8) +
                       ",\"stack\":" + std::to_string(at8) + ",\"module\":0,\"flags\":0},"
                       "{\"thread\":1,\"depth\":2,\"names\":[" + std::to_string(matmul) + "," +
                       std::to_string(mm) + "],\"seq\":6,\"step\":0,\"fwd\":-1,\"user_frame\":" +
                       std::to_string(at15) + ",\"stack\":" + std::to_string(at15) +
                       ",\"module\":0,\"flags\":0}]");
      });
  auto run = tdbg::tracer::Run::Open(path);
  REQUIRE(run.ok());
  CHECK(tdbg::diff::process_ending(*run->processes[0]) ==
        "was ended by signal 15 (SIGTERM) while thread 1 (main) was inside aten::mm at train.py:15 "
        "(in aten::matmul); thread 0 was inside aten::mm at train.py:8");
}

TEST_CASE("first_nonfinite: a run without any op is unchecked, not finite") {
  // A recording whose disk filled up before its first commit, or a process killed before its
  // first op: nothing says its values were finite.
  json r = nonfinite_of(write_ops([](Recorder&) {}));
  CHECK(r["status"] == "unchecked");
  CHECK(r["reason"].get<std::string>().find("holds no op (none was recorded") != std::string::npos);
  CHECK(tdbg::diff::format_nonfinite(r).rfind("unchecked: ", 0) == 0);
  // Its disk full before the first commit: that is said as the reason.
  r = nonfinite_of(write_ops(
      [](Recorder&) {},
      [](tdbg::tracer::Writer& w) {
        w.set_meta(
            "recording_lost",
            R"({"error": "cannot commit: database or disk is full", "first_seq": 0, "first_step": 0, "ops": 40})");
      }));
  CHECK(r["status"] == "unchecked");
  CHECK(r["reason"].get<std::string>().find(
            "holds no op: process 0 stopped being recorded at seq 0 (step 0): cannot commit: "
            "database or disk is full") != std::string::npos);
  // A --steps window the program never reached: that is said, as diff says it.
  r = nonfinite_of(
      write_ops([](Recorder&) {}, [](tdbg::tracer::Writer& w) { w.set_meta("steps", "30:40"); }));
  CHECK(r["status"] == "unchecked");
  CHECK(r["reason"].get<std::string>().find(
            "holds no op: its recording selected none (--steps 30:40; steps "
            "count torch.optim optimizer steps)") != std::string::npos);
  // One finite op is enough to answer.
  using T = Recorder::T;
  r = nonfinite_of(write_ops([](Recorder& rec) { rec.op("aten::relu", {T{1}}, {T{2}}, {}, 0, 0, kNoSeq, 0); }));
  CHECK(r["status"] == "finite");
}

// A run written op by op, for the rules of first_nonfinite on where NaN starts.
TEST_CASE("first_nonfinite: NaN that comes in starts where it enters, kernels' buffers never start it") {
  using T = Recorder::T;
  auto nonfinite = [](const std::function<void(Recorder&)>& ops,
                      tdbg::diff::NonfiniteOptions options = {}) {
    auto run = tdbg::tracer::Run::Open(write_ops(ops));
    REQUIRE(run.ok());
    auto result = tdbg::diff::first_nonfinite(*run, options);
    REQUIRE(result.ok());
    return *result;
  };

  auto view = [](uint64_t hash, int64_t producer) {
    T v{hash, producer, "32x8", TensorStatus::kView};
    v.summary = false;
    return v;
  };

  SECTION("an input holding NaN that no recorded op produced") {
    json r = nonfinite([&](Recorder& r) {
      T x{11};
      x.nan = 1;  // hashed where it entered: from NumPy
      int64_t lift = r.op("aten::lift_fresh", {x}, {view(11, kNoSeq)}, {}, 0, 0, kNoSeq, 5);
      T y{12, lift};
      y.nan = 4;
      r.op("aten::relu", {view(11, lift)}, {y}, {}, 0, 0, kNoSeq, 6);
    });
    CHECK(r["status"] == "nonfinite");
    CHECK(r["first_nonfinite"]["op"] == "aten::lift_fresh");
    CHECK(r["first_nonfinite"]["entered"] == "input");
  }

  SECTION("an input that views a finite tensor reads as finite; one viewing part of NaN as unknown") {
    json r = nonfinite([&](Recorder& r) {
      T finite{11};  // summary valid, no NaN
      int64_t mul = r.op("aten::mul", {T{10}}, {finite}, {}, 0, 0, kNoSeq, 5);
      T known{11, mul};
      known.summary = false;  // carried by hash only: its summary is the producer's
      int64_t t1 = r.op("aten::t", {known}, {view(21, kNoSeq)}, {}, 0, 0, kNoSeq, 6);
      int64_t t2 = r.op("aten::unsqueeze", {view(21, t1)}, {view(22, kNoSeq)}, {}, 0, 0, kNoSeq, 7);
      T y{12};
      y.nan = 1;
      r.op("aten::log", {view(22, t2)}, {y}, {}, 0, 0, kNoSeq, 8);
    });
    REQUIRE(r["first_nonfinite"]["op"] == "aten::log");
    CHECK(r["first_nonfinite"]["inputs"][0]["finite"] == true);

    json u = nonfinite([&](Recorder& r) {
      T x{11};
      x.inf = 1;  // Inf that came in is no start
      int64_t mul = r.op("aten::mul", {T{10}}, {x}, {{"other", "inf"}}, 0, 0, kNoSeq, 5);
      x.producer = mul;
      T row = view(21, kNoSeq);
      row.shape = "8";  // one row: it may leave the Inf out
      int64_t select = r.op("aten::select", {x}, {row}, {{"index", "3"}}, 0, 0, kNoSeq, 6);
      T y{12};
      y.nan = 1;
      row.producer = select;
      r.op("aten::sub", {row, row}, {y}, {}, 0, 0, kNoSeq, 8);
    });
    REQUIRE(u["first_nonfinite"]["op"] == "aten::sub");
    CHECK(u["first_nonfinite"]["inputs"][0]["finite"].is_null());
    CHECK(u["first_nonfinite"]["inputs"][0]["values_of"] == "viewed");
  }

  SECTION("a view of all of a tensor holding Inf (a transpose) holds its Inf") {
    tdbg::diff::NonfiniteOptions nan_only;  // the Inf gradient is then no start
    nan_only.nan_only = true;
    // Autograd's `mm` for addmm's backward reads `t()` of an Inf gradient: NaN from Inf * 0.
    json r = nonfinite([&](Recorder& r) {
      T grad{11};
      grad.inf = 727;
      grad.producer = r.op("aten::threshold_backward", {T{9}, T{10}}, {grad}, {}, 0, 0, kNoSeq, 5);
      T gt = view(21, kNoSeq);
      gt.shape = "8x32 strides 1x8";
      gt.producer = r.op("aten::t", {grad}, {gt}, {}, 0, 0, kNoSeq, 5);
      T y{12};
      y.nan = 256;
      r.op("aten::mm", {gt, T{13}}, {y}, {}, 0, 0, kNoSeq, 5);
    }, nan_only);
    REQUIRE(r["first_nonfinite"]["op"] == "aten::mm");
    json in = r["first_nonfinite"]["inputs"][0];
    CHECK(in["finite"] == false);
    CHECK(in["values_of"] == "view");
    CHECK(in["viewed_producer"] == 0);
    const std::string text = tdbg::diff::format_nonfinite(r);
    CHECK(text.find("brought in") == std::string::npos);
    // The op that made the values, by name and line, not only the view's op.
    CHECK(in["viewed_producer_op"]["op"] == "aten::threshold_backward");
    CHECK(text.find(
              "input 0:  float32[8x32 strides 1x8] NON-FINITE, a view of all of the output of "
              "aten::threshold_backward (seq 0) at train.py:5: 727 Inf, finite min -1, max 1, from "
              "aten::t (seq 1)") != std::string::npos);
  }

  SECTION("an input whose values are not recorded may have brought it in: said so") {
    json r = nonfinite([&](Recorder& r) {
      T sparse{11, kNoSeq, "3", TensorStatus::kNotHashed};
      sparse.summary = false;
      sparse.producer = r.op("aten::div", {T{10, kNoSeq, "3", TensorStatus::kNotHashed}}, {sparse},
                             {{"other", "0"}}, 0, 0, kNoSeq, 2);
      T y{12};
      y.nan = 1;
      r.op("aten::to_dense", {sparse}, {y}, {}, 0, 0, kNoSeq, 3);
    });
    REQUIRE(r["first_nonfinite"]["op"] == "aten::to_dense");
    const std::string text = tdbg::diff::format_nonfinite(r);
    CHECK(text.find("brought in by input 0, whose values were not recorded (made by aten::div") !=
          std::string::npos);
    CHECK(text.find("made here from inputs without NaN") == std::string::npos);

    // An empty tensor cannot hold NaN, recorded or not: never named as where it came from.
    json e = nonfinite([&](Recorder& r) {
      T empty{11, kNoSeq, "0", TensorStatus::kNotHashed};
      empty.summary = false;
      T y{12, kNoSeq, ""};
      y.nan = 1;
      r.op("aten::mean", {empty}, {y}, {}, 0, 0, kNoSeq, 3);
    });
    REQUIRE(e["first_nonfinite"]["op"] == "aten::mean");
    CHECK(e["first_nonfinite"]["inputs"][0]["finite"] == true);
    CHECK(tdbg::diff::format_nonfinite(e).find("brought in") == std::string::npos);
  }

  SECTION("an out= buffer and an undefined optional tensor bring nothing in, and carry nothing") {
    // `torch.log(p, out=buf)`: buf's old values are never read.
    T buf{0, kNoSeq, "32x8", TensorStatus::kNotHashed};
    buf.summary = false;
    buf.reason = "overwritten by the op without being read";
    auto log_out = [&](Recorder& r) {
      T x{11};
      x.nan = 1;  // NaN enters at step 0 and is passed on
      r.op("aten::mul", {x, T{12}}, {T{13, kNoSeq, "32x8", TensorStatus::kHashed, 1.0, 0, 8}}, {},
           0, 0, kNoSeq, 4);
      r.step = 1;
      T y{15};
      y.inf = 3;
      r.op("aten::log", {T{14}, buf}, {y}, {}, 0, 0, kNoSeq, 7);
    };
    json r = nonfinite(log_out);
    REQUIRE(r["first_nonfinite"]["op"] == "aten::mul");  // where NaN entered, at step 0
    tdbg::diff::NonfiniteOptions later;
    later.from_step = 1;
    r = nonfinite(log_out, later);
    // The buffer is no input whose unrecorded values may carry the NaN passed on before.
    REQUIRE(r["status"] == "nonfinite");
    REQUIRE(r["first_nonfinite"]["op"] == "aten::log");
    CHECK(r["first_nonfinite"]["inputs"][1]["not_read"] == "overwritten");
    std::string text = tdbg::diff::format_nonfinite(r);
    CHECK(text.find("brought in") == std::string::npos);
    CHECK(text.find("cause:    made here from finite inputs") != std::string::npos);
    CHECK(text.find("input 1:  float32[32x8] overwritten without being read (an out= buffer)") !=
          std::string::npos);

    // `cross_entropy(x, y, weight=None)` with every label ignored: 0/0, total_weight is 0.
    json u = nonfinite([&](Recorder& r) {
      T weight{0, kNoSeq, "", TensorStatus::kNotHashed};
      weight.summary = false;
      weight.reason = "undefined tensor";
      T loss{21, kNoSeq, ""};
      loss.nan = 1;
      T total{22, kNoSeq, ""};
      total.min = total.max = 0;
      r.op("aten::nll_loss_forward", {T{20}, T{19}, weight}, {loss, total},
           {{"reduction", "1"}, {"ignore_index", "-100"}}, 0, 0, kNoSeq, 11);
    });
    REQUIRE(u["first_nonfinite"]["op"] == "aten::nll_loss_forward");
    text = tdbg::diff::format_nonfinite(u);
    CHECK(text.find("brought in") == std::string::npos);
    CHECK(text.find("input 2:  None") != std::string::npos);
    CHECK(text.find("output 1: float32[] finite, min 0, max 0") != std::string::npos);
  }

  SECTION("a NaN literal argument") {
    json r = nonfinite([&](Recorder& r) {
      T y{12};
      y.nan = 32;
      r.op("aten::full", {}, {y}, {{"fill_value", "nan"}}, 0, 0, kNoSeq, 7);
    });
    CHECK(r["first_nonfinite"]["op"] == "aten::full");
    CHECK(r["first_nonfinite"]["entered"] == "argument");
  }

  SECTION("the text shows each input's range and the op's arguments, and names a NaN argument") {
    json r = nonfinite([&](Recorder& r) {
      T deg{11};
      deg.min = 0;  // a node of degree zero
      deg.max = 2;
      deg.producer = r.op("aten::sum", {T{10}}, {deg}, {{"dim", "[1]"}}, 0, 0, kNoSeq, 10);
      T known{11, deg.producer, "32x8", TensorStatus::kKnown};
      known.summary = false;  // carried by hash only: the range is its producer's output's
      T inv{12};
      inv.inf = 1;
      r.op("aten::pow", {known}, {inv}, {{"exponent", "-0.5"}}, 0, 0, kNoSeq, 11);
    });
    REQUIRE(r["first_nonfinite"]["op"] == "aten::pow");
    CHECK(r["first_nonfinite"]["inputs"][0]["values"]["min"] == 0);
    CHECK(r["first_nonfinite"]["inputs"][0]["values_of"] == "producer");
    CHECK(r["first_nonfinite"]["args"][0]["name"] == "exponent");
    std::string text = tdbg::diff::format_nonfinite(r);
    CHECK(text.find("input 0:  float32[32x8] finite, min 0, max 2, from aten::sum") != std::string::npos);
    CHECK(text.find("args:     exponent = -0.5") != std::string::npos);

    json a = nonfinite([&](Recorder& r) {
      T y{12};
      y.nan = 32;
      T grad{13};
      grad.nan = 2;
      grad.min = std::numeric_limits<double>::quiet_NaN();  // no finite value
      r.op("aten::add_", {T{11}, T{10}}, {y}, {{"alpha", "nan"}}, 0, 0, kNoSeq, 14);
      r.op("aten::mul", {y}, {T{14}}, {}, 0, 0, kNoSeq, 15);
    });
    REQUIRE(a["first_nonfinite"]["entered"] == "argument");
    CHECK(a["first_nonfinite"]["argument"]["name"] == "alpha");
    text = tdbg::diff::format_nonfinite(a);
    CHECK(text.find("cause:    NaN entered here: a NaN argument, alpha = nan;") != std::string::npos);
  }

  SECTION("an input with no finite value says so, with its NaN and Inf counts") {
    json r = nonfinite([&](Recorder& r) {
      T x{11};
      x.nan = 3;
      x.inf = 1;
      x.min = std::numeric_limits<double>::quiet_NaN();
      x.max = std::numeric_limits<double>::quiet_NaN();
      T y{12};
      y.nan = 4;
      r.op("aten::relu", {x}, {y}, {}, 0, 0, kNoSeq, 6);
    });
    REQUIRE(r["first_nonfinite"]["op"] == "aten::relu");
    CHECK(tdbg::diff::format_nonfinite(r).find("input 0:  float32[32x8] NON-FINITE (3 NaN, 1 Inf), no "
                                               "finite value") != std::string::npos);
  }

  SECTION("Inf that comes in is not a start, NaN made from it is, by the kernel's op") {
    json r = nonfinite([&](Recorder& r) {
      T x{11};
      x.inf = 2;  // Inf beside -Inf, from NumPy
      T y{12};
      y.nan = 1;
      int64_t conv = r.op("aten::mkldnn_convolution", {x}, {y}, {}, 0, 0, kNoSeq, 8);
      // The kernel restrides its own buffer: the nested op's only input is that buffer.
      r.op("aten::as_strided_", {T{13, kNoSeq, "32x8", TensorStatus::kUninitialized}}, {y}, {}, 0, 1,
           conv, 8);
    });
    CHECK(r["first_nonfinite"]["op"] == "aten::mkldnn_convolution");
    CHECK(r["first_nonfinite"]["entered"].is_null());
  }

  SECTION("a nested op reading a buffer inside a scope with no output of its own is judged") {
    // DDP's reducer copies a gradient bucket (the all-reduce result, not recorded) into a
    // gradient inside `copy_bucket_to_grad`, a scope with no output: NaN from another rank
    // shows first in that copy_, which is then the start, not explained by nothing.
    json r = nonfinite([&](Recorder& r) {
      const int64_t scope =
          r.op("torch.distributed.ddp.reducer::copy_bucket_to_grad", {T{10}}, {}, {}, 0, 0, kNoSeq, 17);
      T grad{uint64_t(11), kNoSeq, "32x8", TensorStatus::kNotHashed};
      grad.reason = tdbg::tracer::kReasonOverwritten;
      T bucket{uint64_t(12), kNoSeq, "32x8", TensorStatus::kNotHashed};
      bucket.reason = "internal buffer of the enclosing op";
      bucket.summary = false;
      T out{13};
      out.nan = 8;
      r.op("aten::copy_", {grad, bucket}, {out}, {}, 0, 1, scope, 17);
      r.op("aten::mul", {out}, {T{14, kNoSeq, "32x8", TensorStatus::kHashed, 1.0, 0, 8}}, {}, 0, 0, kNoSeq, 18);
    });
    REQUIRE(r["status"] == "nonfinite");
    CHECK(r["first_nonfinite"]["op"] == "aten::copy_");
    CHECK(tdbg::diff::format_nonfinite(r).find(
              "this is DDP copying the gradients' all-reduce result") != std::string::npos);
  }

  SECTION("a nested op reading a kernel's buffer inherits the kernel's NaN input") {
    json r = nonfinite([&](Recorder& r) {
      T x{11};
      x.nan = 1;
      T y{12};
      y.nan = 3;
      // NaN entered earlier, through an op of its own.
      int64_t to = r.op("aten::to", {x}, {view(14, kNoSeq)}, {}, 0, 0, kNoSeq, 4);
      int64_t conv = r.op("aten::mkldnn_convolution", {view(14, to)}, {y}, {}, 0, 0, kNoSeq, 8);
      r.op("aten::as_strided_", {T{13, kNoSeq, "32x8", TensorStatus::kUninitialized}}, {y}, {}, 0, 1,
           conv, 8);
      T z{15};
      z.inf = 1;  // a real overflow later
      r.op("aten::exp", {T{16}}, {z}, {}, 0, 0, kNoSeq, 9);
    });
    // The first start is where NaN entered (aten::to), not the nested op or the convolution.
    CHECK(r["first_nonfinite"]["op"] == "aten::to");
  }

  SECTION("Inf passed on by a forward op, then masked, is masked; passed on and left, is not") {
    // `torch.where(x != 0, 1.0 / x, 0)`: Python's 1.0 / x runs reciprocal, then mul.
    auto chain = [&](bool masked) {
      return nonfinite([&](Recorder& r) {
        T rec{31};
        rec.inf = 2;
        rec.producer = r.op("aten::reciprocal", {T{30}}, {rec}, {}, 0, 0, kNoSeq, 5);
        T scaled{32};
        scaled.inf = 2;
        scaled.producer = r.op("aten::mul", {rec}, {scaled}, {{"other", "1"}}, 0, 0, kNoSeq, 5);
        if (masked)
          r.op("aten::where", {T{29}, scaled, T{28}}, {T{33}}, {}, 0, 0, kNoSeq, 5);
        else
          r.op("aten::where", {T{29}, rec, T{28}}, {T{33}}, {}, 0, 0, kNoSeq, 5);
      });
    };
    json r = chain(true);
    CHECK(r["status"] == "finite");
    CHECK(r["masked"] == 1);
    // The mask reads the reciprocal; the mul's Inf is held and never read: it may reach
    // anything, so nothing is masked.
    r = chain(false);
    CHECK(r["status"] == "nonfinite");
    CHECK(r["first_nonfinite"]["op"] == "aten::reciprocal");
  }

  SECTION("the cause of an op with a domain reading part of a tensor, and of x / 0.0") {
    json r = nonfinite([&](Recorder& r) {
      T col{41, kNoSeq, "3 strides 4", TensorStatus::kView};
      col.summary = false;
      T whole{40, kNoSeq, "3x4"};
      whole.min = -1;
      whole.max = 2;
      whole.producer = r.op("aten::detach_", {T{39}}, {whole}, {}, 0, 0, kNoSeq, 6);
      col.producer = r.op("aten::select", {whole}, {col}, {{"dim", "1"}}, 0, 0, kNoSeq, 31);
      T out{42, kNoSeq, "3"};
      out.inf = 3;
      r.op("aten::log", {col}, {out}, {}, 0, 0, kNoSeq, 31);
    });
    std::string text = tdbg::diff::format_nonfinite(r);
    INFO(text);
    CHECK(text.find(
              "log of 0 or a negative value, most likely: its input is a view of part of a tensor "
              "whose values range from -1 to 2") != std::string::npos);
    CHECK(text.find("log of a negative value") ==
          std::string::npos);  // the whole's min, not the part's
    r = nonfinite([&](Recorder& r) {
      T out{52};
      out.inf = 8;
      r.op("aten::div_", {T{51}}, {out}, {{"other", "0"}}, 0, 0, kNoSeq, 12);
    });
    text = tdbg::diff::format_nonfinite(r);
    CHECK(text.find("division by the number 0 (argument other = 0)") != std::string::npos);
  }

  SECTION("NaN in a gradient that ReLU's backward masks, handed on by autograd's node, is masked") {
    // A custom Function's backward makes 0/0 where ReLU's output was 0; `ReluBackward0` (no
    // outputs of its own) hands the gradient to threshold_backward, which zeroes those entries.
    json r = nonfinite([&](Recorder& r) {
      T g{21};
      g.nan = 4;
      r.next_flags = tdbg::tracer::kOpBackward;
      g.producer = r.op("aten::div", {T{19}, T{20}}, {g}, {}, 0, 0, kNoSeq, 17);
      r.next_flags = tdbg::tracer::kOpBackward;
      const int64_t node = r.op("ReluBackward0", {g}, {}, {}, 0, 0, kNoSeq, 20);
      r.next_flags = tdbg::tracer::kOpBackward;
      r.op("aten::threshold_backward", {g, T{22}}, {T{23}}, {{"threshold", "0"}}, 0, 1, node, 20);
    });
    CHECK(r["status"] == "finite");
    CHECK(r["masked"] == 1);
  }

  SECTION("an Inf read only through a view Python reads (.tolist()) is no masked start") {
    // y = x * 10 overflows; `y.tolist()` reads it through resolve_conj's view: the program
    // saw the Inf, no op made finite values of it.
    json r = nonfinite([&](Recorder& r) {
      T y{uint64_t(12)};
      y.inf = 1;
      const int64_t mul = r.op("aten::mul", {T{11}}, {y}, {{"other", "10"}}, 0, 0, kNoSeq, 3);
      y.producer = mul;
      r.op("aten::resolve_conj", {y}, {view(13, mul)}, {}, 0, 0, kNoSeq, 4);
    });
    CHECK(r["status"] == "nonfinite");
    CHECK(r["first_nonfinite"]["op"] == "aten::mul");
  }

  SECTION("an Inf masked on purpose is passed over and so are Inf starts under --nan-only") {
    // Each step: `deg.pow(-0.5)` makes Inf of zero degrees, `masked_fill` removes it; at
    // step 2 a division makes NaN of finite values, which no later op reads.
    auto ops = [&](Recorder& r) {
      for (int step = 0; step < 4; ++step) {
        r.step = step;
        T inv{uint64_t(100 + step)};
        inv.inf = 2;
        int64_t pow = r.op("aten::pow", {T{uint64_t(200 + step)}}, {inv}, {{"exponent", "-0.5"}},
                           0, 0, kNoSeq, 25);
        T clean{uint64_t(300 + step)};
        inv.producer = pow;
        r.op("aten::masked_fill", {inv, T{uint64_t(400 + step)}}, {clean}, {{"value", "0"}}, 0, 0,
             kNoSeq, 26);
        if (step == 2) {
          T q{500};
          q.nan = 5;
          r.op("aten::div", {T{501}, T{502}}, {q}, {}, 0, 0, kNoSeq, 30);
        }
      }
    };
    // masked_fill makes finite values of every pow's Inf: masked by the program, passed over.
    json all = nonfinite(ops);
    CHECK(all["first_nonfinite"]["op"] == "aten::div");
    CHECK(all["first_nonfinite"]["step"] == 2);
    CHECK(all["first_nonfinite"]["masked_before"] == 3);
    CHECK(tdbg::diff::format_nonfinite(all).find("  masked:   aten::pow (seq 0, step 0)") != std::string::npos);
    tdbg::diff::NonfiniteOptions nan_only;
    nan_only.nan_only = true;
    json n = nonfinite(ops, nan_only);
    CHECK(n["first_nonfinite"]["op"] == "aten::div");
    CHECK(n["first_nonfinite"]["step"] == 2);
    tdbg::diff::NonfiniteOptions later;
    later.from_step = 2;
    json l = nonfinite(ops, later);
    CHECK(l["first_nonfinite"]["op"] == "aten::div");
    CHECK(l["first_nonfinite"]["step"] == 2);
    CHECK(l["first_nonfinite"]["skipped_before"] == 2);
    CHECK(l["first_nonfinite"]["masked_before"] == 1);
    later.nan_only = true;
    later.from_step = 3;
    json none = nonfinite(ops, later);
    CHECK(none["status"] == "finite");  // the NaN skipped at step 2 reaches no later op
    CHECK(tdbg::diff::format_nonfinite(none).find("from step 3") != std::string::npos);

    // Each op passed over is counted once, as what it is: the Inf starts --nan-only ignores are
    // no masks, and a start before --from-step is skipped, not also explained.
    CHECK(n["first_nonfinite"]["ignored_before"] == 3);
    CHECK(n["first_nonfinite"]["explained_before"] == 0);
    CHECK(l["first_nonfinite"]["explained_before"] == 0);
    CHECK(none["ignored"] == 4);
    CHECK(none["skipped"] == 1);  // the div at step 2
    CHECK(none["explained"] == 0);
    const std::string text = tdbg::diff::format_nonfinite(none);
    CHECK(text.find("4 Inf start(s) ignored by --nan-only") != std::string::npos);
    CHECK(text.find("attention masks") == std::string::npos);
    CHECK(tdbg::diff::format_nonfinite(l).find("; 2 start(s) before step 2 skipped)\n") !=
          std::string::npos);
  }

  SECTION("a start with a nested op that does the work counts once before --from-step") {
    // `torch.full(..., nan)` at steps 0 and 1 runs a nested `fill_` with the same literal.
    auto ops = [&](Recorder& r) {
      for (int step = 0; step < 3; ++step) {
        r.step = step;
        T filled{uint64_t(100 + step)};
        filled.nan = 4;
        int64_t full = r.op("aten::full", {}, {filled}, {{"fill_value", "nan"}}, 0, 0, kNoSeq, 5);
        // The `empty` it fills: overwritten without being read, as the hook records it.
        T buffer{uint64_t(200 + step), kNoSeq, "32x8", TensorStatus::kNotHashed};
        buffer.reason = tdbg::tracer::kReasonOverwritten;
        r.op("aten::fill_", {buffer}, {filled}, {{"value", "nan"}}, 0, 1, full, 5);
      }
    };
    tdbg::diff::NonfiniteOptions later;
    later.from_step = 2;
    json l = nonfinite(ops, later);
    CHECK(l["first_nonfinite"]["op"] == "aten::full");
    CHECK(l["first_nonfinite"]["skipped_before"] == 2);
  }

  SECTION("--from-step after NaN came in: an op reading unrecorded values carries it") {
    // NaN enters with the data at step 1 and spreads; at step 2 a backward op reads a saved
    // tensor (unrecorded values) and its output holds NaN: carried, not a new start, and the
    // run is not finite from step 2 on.
    auto ops = [&](Recorder& r) {
      r.step = 1;
      T x{11};
      x.nan = 1;
      T y{12};
      y.nan = 8;
      y.producer = r.op("aten::mul", {x, T{13}}, {y}, {}, 0, 0, kNoSeq, 7);
      r.step = 2;
      T saved{14, kNoSeq, "32x8", TensorStatus::kNotHashed};
      T g{15};
      g.nan = 8;
      r.op("aten::_log_softmax_backward_data", {T{16}, saved}, {g}, {}, 0, 1, kNoSeq, 9);
    };
    tdbg::diff::NonfiniteOptions later;
    later.from_step = 2;
    json r = nonfinite(ops, later);
    CHECK(r["status"] == "carried");
    CHECK(r["carried"] == 1);
    CHECK(r["skipped"] == 1);  // the entry at step 1
    CHECK(tdbg::diff::format_nonfinite(r).find("non-finite from before step 2") !=
          std::string::npos);
    json all = nonfinite(ops);
    CHECK(all["first_nonfinite"]["op"] == "aten::mul");
    CHECK(all["first_nonfinite"]["entered"] == "input");
  }
}

TEST_CASE("source frames read as text: Python lines, and C++ frames by function and binary") {
  using tdbg::diff::frame_text;
  CHECK(frame_text("/w/train.py", 12, "<module>", true) == "train.py:12");
  CHECK(frame_text("/w/train.py", 12, "<module>", false) == "/w/train.py:12 in <module>");
  CHECK(frame_text("/w/train_cpp", 0, "(anonymous namespace)::train(long, double) +0x4fa5", true) ==
        "(anonymous namespace)::train (train_cpp)");
  CHECK(frame_text("/w/train_cpp", 0, "Net::forward(at::Tensor) const +0x10", true) ==
        "Net::forward (train_cpp)");
  CHECK(frame_text("/w/train_cpp", 0, "main +0x4adb", false) == "/w/train_cpp in main +0x4adb");
  CHECK(frame_text("/w/train_cpp", 0, "? +0x4adb", true) == "train_cpp");
  CHECK(frame_text("/w/train_cpp", 0, "", true) == "train_cpp");
  CHECK(frame_text("train_cpp", 0, "main::{lambda()#1}::operator()() const +0x8", true) ==
        "main::{lambda#1}::operator() (train_cpp)");
  // A template's return type and arguments left out, the offset kept (t148 F4).
  CHECK(frame_text("/w/conv", 0,
                   "std::enable_if<std::is_same<F, F>::value, decltype (F::forward(decltype(nullptr), "
                   "(declval<at::Tensor&>)()))>::type torch::autograd::Function<F>::apply<F, "
                   "at::Tensor&>(at::Tensor&) +0x17595",
                   false) == "/w/conv in torch::autograd::Function<F>::apply<...> +0x17595");
}

TEST_CASE("addr2line output: each address's function/location pairs, innermost inlined first") {
  using tdbg::diff::parse_addr2line;
  // `addr2line -C -f -i -a` as binutils 2.40 prints it, with what may surround it.
  const std::string output =
      "junk before the first address\n"
      "0x0000000000004adb\n"
      "at::randn(c10::ArrayRef<long>, c10::optional<at::Generator>, c10::TensorOptions)\n"
      "/usr/include/ATen/ops/randn.h:37\n"
      "main\n"
      "/w/tests/diff/cpp/shape_error.cpp:39\n"
      "0x0000000000004b35\n"
      "main\n"
      "/w/tests/diff/cpp/shape_error.cpp:41 (discriminator 10)\n"
      "0x0000000000000010\n"
      "??\n"
      "??:0\n"
      "0x0000000000004c9f\n"
      "(anonymous namespace)::Net::forward(at::Tensor)\n"
      "/w/a:b/net.cpp:?\r\n"
      "0x0000000000400500\n"
      "main\n";  // cut off before its location
  const auto groups = parse_addr2line(output);
  REQUIRE(groups.size() == 5);
  CHECK(groups[0].first == 0x4adb);
  REQUIRE(groups[0].second.size() == 2);
  CHECK(groups[0].second[0].function ==
        "at::randn(c10::ArrayRef<long>, c10::optional<at::Generator>, c10::TensorOptions)");
  CHECK(groups[0].second[0].file == "/usr/include/ATen/ops/randn.h");
  CHECK(groups[0].second[0].line == 37);
  CHECK(groups[0].second[1].function == "main");
  CHECK(groups[0].second[1].file == "/w/tests/diff/cpp/shape_error.cpp");
  CHECK(groups[0].second[1].line == 39);
  REQUIRE(groups[1].second.size() == 1);
  CHECK(groups[1].second[0].file == "/w/tests/diff/cpp/shape_error.cpp");
  CHECK(groups[1].second[0].line == 41);
  REQUIRE(groups[2].second.size() == 1);
  CHECK(groups[2].second[0].function == "??");
  CHECK(!groups[2].second[0].known());
  REQUIRE(groups[3].second.size() == 1);
  CHECK(groups[3].second[0].file == "/w/a:b/net.cpp");  // a colon in a path, no line
  CHECK(groups[3].second[0].line == 0);
  CHECK(groups[4].first == 0x400500);
  CHECK(groups[4].second.empty());
  CHECK(parse_addr2line("").empty());
  CHECK(parse_addr2line("0x\n0xZZ\nmain\n").empty());
}

TEST_CASE("native frames: the offset from the recorded function, and their text with a line") {
  using tdbg::diff::frame_text;
  using tdbg::diff::native_frame_offset;
  CHECK(native_frame_offset(0, "main +0x4b86") == 0x4b86u);
  CHECK(native_frame_offset(0, "Net::forward(at::Tensor) const +0x10") == 0x10u);
  CHECK(native_frame_offset(0, "? +0x4adb") == 0x4adbu);
  CHECK(!native_frame_offset(12, "main +0x4b86"));  // a frame with a line is no native frame
  CHECK(!native_frame_offset(0, "<module>"));
  CHECK(!native_frame_offset(0, "main +0x"));
  CHECK(!native_frame_offset(0, "main +0x12zz"));
  CHECK(!native_frame_offset(0, "main +0x11112222333344445"));  // more than 64 bits
  CHECK(frame_text("/w/shape_error.cpp", 18, "(anonymous namespace)::Net::forward(at::Tensor)", false) ==
        "/w/shape_error.cpp:18 in (anonymous namespace)::Net::forward");
  CHECK(frame_text("/w/shape_error.cpp", 18, "forward", true) == "shape_error.cpp:18");
  CHECK(frame_text("/w/shape_error.cpp", 39, "??", false) == "/w/shape_error.cpp:39");
}

namespace {

// A function of this binary whose line `native_source` must find through addr2line.
const int kMarkerLine = __LINE__ + 1;
__attribute__((noinline)) int native_lines_marker(int x) {
  asm volatile("" : "+r"(x));
  return x + 1;
}

// A database holding one native frame: `binary` at `offset`, with `build_id` recorded for it.
std::string write_native_frame(const std::string& binary, uint64_t offset, const std::string& build_id) {
  fs::path dir = temp_dir();
  std::string path = (dir / "native.sqlite").string();
  auto w = tdbg::tracer::Writer::Create(path);
  REQUIRE(w.ok());
  char function[64];
  std::snprintf(function, sizeof(function), "marker +0x%llx", static_cast<unsigned long long>(offset));
  (*w)->intern_frame(0, (*w)->intern(binary), 0, (*w)->intern(function));
  if (!build_id.empty()) (*w)->set_meta("build_id:" + binary, build_id);
  REQUIRE((*w)->close().ok());
  return path;
}

}  // namespace

TEST_CASE("native frames get their line from the binary's debug info while it is the binary recorded") {
  // (native_lines.cc looks on PATH; binutils is in /usr/bin wherever it is installed.)
  if (access("/usr/bin/addr2line", X_OK) != 0) {
    WARN("no addr2line: native lines not tested");
    return;
  }
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  REQUIRE(n > 0);
  const std::string binary(self, static_cast<size_t>(n));
  Dl_info info;
  REQUIRE(dladdr(reinterpret_cast<void*>(&native_lines_marker), &info) != 0);
  const uint64_t offset = static_cast<uint64_t>(reinterpret_cast<const char*>(&native_lines_marker) -
                                                static_cast<const char*>(info.dli_fbase));
  auto identity = tdbg::read_elf_identity_file(binary);
  REQUIRE(identity.ok());
  REQUIRE(!identity->build_id.empty());
  const int64_t called = native_lines_marker(1);  // keeps the marker
  CHECK(called == 2);

  auto open = [](const std::string& db) {
    auto r = tdbg::tracer::Reader::Open(db);
    REQUIRE(r.ok());
    return std::move(r).value();
  };
  auto same = open(write_native_frame(binary, offset, identity->build_id));
  const std::string function = "marker +0x" + [&] {
    char hex[24];
    std::snprintf(hex, sizeof(hex), "%llx", static_cast<unsigned long long>(offset));
    return std::string(hex);
  }();
  auto source = tdbg::diff::native_source(*same, binary, 0, function);
  REQUIRE(source.has_value());
  const std::string suffix = "/tlparse/diff/diff_test.cc";
  CHECK(source->line.file.size() > suffix.size());
  CHECK(source->line.file.compare(source->line.file.size() - suffix.size(), suffix.size(), suffix) == 0);
  CHECK(source->line.line >= kMarkerLine);
  CHECK(source->line.line <= kMarkerLine + 2);
  CHECK(source->line.function.find("native_lines_marker") != std::string::npos);
  CHECK(tdbg::diff::native_line_notes(*same).empty());
  // The frame's JSON keeps where it was recorded.
  tdbg::diff::Strings strings(*same);
  const json frame = tdbg::diff::frame_json(*same, strings, 1);
  CHECK(frame["line"] == source->line.line);
  CHECK(frame["binary"] == binary);
  CHECK(frame["offset"] == function.substr(function.rfind(" +0x") + 2));

  // Another build at the path: no line, and a note that says why.
  auto stale = open(write_native_frame(binary, offset, "00112233"));
  CHECK(!tdbg::diff::native_source(*stale, binary, 0, function));
  const auto notes = tdbg::diff::native_line_notes(*stale);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == binary + " changed since the recording: C++ frames shown without lines");
  const json unresolved = tdbg::diff::frame_json(*stale, strings, 1);
  CHECK(unresolved["line"] == 0);
  CHECK(unresolved["function"] == function);
  // Said on the frame, so that no addr2line command is offered for the other build.
  CHECK(unresolved.value("binary_changed", false));
  CHECK_FALSE(frame.contains("binary_changed"));
  // Recorded before build-ids were kept: no line, no note.
  auto old = open(write_native_frame(binary, offset, ""));
  CHECK(!tdbg::diff::native_source(*old, binary, 0, function));
  CHECK(tdbg::diff::native_line_notes(*old).empty());
  CHECK_FALSE(tdbg::diff::frame_json(*old, strings, 1).contains("binary_changed"));
}

TEST_CASE("arguments read as the user wrote them: shortest floats, named reductions") {
  using tdbg::diff::argument_text;
  CHECK(argument_text("other", "0.98999999999999999") == "0.99");
  CHECK(argument_text("reduction", "1") == "1 (mean)");
  CHECK(argument_text("reduction", "2") == "2 (sum)");
  CHECK(argument_text("reduction", "0") == "0 (none)");
  CHECK(argument_text("dim", "1") == "1");  // another int stays a number
}

// A whole diff result (the renderer reads every key a result has, some with operator[]) of
// one op whose output differs, for tests that set some of its fields to render them.
json one_op_divergence() {
  using T = Recorder::T;
  auto run = [](uint64_t out) {
    return write_ops([&](Recorder& r) { r.op("aten::mul", {T{10}}, {T{out}}, {}, 0, 0, kNoSeq, 5); });
  };
  json r = compare(run(11), run(12));
  REQUIRE(first(r)["tensor"].is_object());
  return r;
}

TEST_CASE("a tensor of the same sizes in another layout is said not to be why hashes differ") {
  json r = one_op_divergence();
  r["first_divergence"]["tensor"]["shape"] = "4x10x16 strides 16x64x1";
  r["first_divergence"]["tensor"]["shape_b"] = "4x10x16";
  std::string text = tdbg::diff::format_divergence(r);
  CHECK(text.find("layout:   A [4x10x16 strides 16x64x1]  B [4x10x16] (strides only") !=
        std::string::npos);
  // Other sizes are a difference of their own.
  r["first_divergence"]["tensor"]["shape_b"] = "4x10x17";
  text = tdbg::diff::format_divergence(r);
  CHECK(text.find("layout:   A [4x10x16 strides 16x64x1]  B [4x10x17]\n") != std::string::npos);
}

TEST_CASE("a difference that reaches no other op's output is said to change no result") {
  using T = Recorder::T;
  // Each step, a clipping coefficient computed with another threshold (an argument), then
  // clamped to the same value in both runs. `leaks`: the clamp's output differs too, or
  // `item`: the coefficient is read into Python; `hash_mode`: the recording's.
  // `through`: the coefficient passes through an op before the clamp (libtorch's
  // clip_grad_norm_ fills a tensor with the threshold and divides it in place by the norm).
  struct Variant {
    bool leaks = false, item = false, view_item = false, through = false;
    std::string hash_mode = "all";
  };
  auto run = [](const std::string& threshold, const Variant& v) {
    const bool b = threshold != "1";
    return write_ops(
        [&](Recorder& r) {
          for (int step = 0; step < 3; ++step) {
            r.step = step;
            const int64_t coef = r.op("aten::mul", {T{10}}, {T{b ? 21u : 20u}}, {{"other", threshold}}, 0, 0, kNoSeq, 5);
            T clamped{b ? 21u : 20u, coef};
            if (v.through)
              clamped = T{b ? 23u : 22u, r.op("aten::div_", {clamped, T{70}}, {T{b ? 23u : 22u}},
                                              {}, 0, 0, kNoSeq, 5)};
            r.op("aten::clamp", {clamped}, {T{v.leaks && b ? 31u : 30u}}, {{"max", "1"}}, 0, 0,
                 kNoSeq, 5);
            if (v.item) r.op("aten::_local_scalar_dense", {T{b ? 21u : 20u, coef}}, {}, {}, 0, 0, kNoSeq, 6);
            if (v.view_item) {  // coef[0].item(): read through a view
              T view{b ? 61u : 60u, kNoSeq, "", TensorStatus::kView};
              view.summary = false;
              const int64_t select =
                  r.op("aten::select", {T{b ? 21u : 20u, coef}}, {view}, {}, 0, 0, kNoSeq, 6);
              view.producer = select;
              r.op("aten::_local_scalar_dense", {view}, {}, {}, 0, 0, kNoSeq, 6);
            }
            for (int k = 0; k < 10; ++k) r.op("aten::add", {T{40u + k}}, {T{50u + k}}, {}, 0, 0, kNoSeq, 7);
          }
        },
        [&](tdbg::tracer::Writer& w) { w.set_meta("hash_mode", v.hash_mode); });
  };
  json r = compare(run("1", {}), run("2", {}));
  json d = first(r);
  CHECK(d["cause"] == "arguments");
  REQUIRE(d["contained"].is_object());
  const std::string text = tdbg::diff::format_divergence(r);
  CHECK(text.find("arguments; it reaches no other op's output (work, not results)\n") != std::string::npos);
  CHECK(text.find("the difference reaches no other op's output (what Python reads of a tensor "
                  "without an op, such as .numpy() or torch.save, is not seen)") !=
        std::string::npos);
  // Through an op first, then absorbed: contained as well.
  Variant through;
  through.through = true;
  CHECK(first(compare(run("1", through), run("2", through))).contains("contained"));
  Variant leaks, item, view_item, outputs, through_leaks;
  through_leaks.through = through_leaks.leaks = true;
  leaks.leaks = true;
  item.item = true;
  view_item.view_item = true;
  outputs.hash_mode = "outputs";
  for (const Variant& v : {leaks, item, view_item, outputs, through_leaks}) {
    CAPTURE(v.leaks, v.item, v.hash_mode);
    json other = compare(run("1", v), run("2", v));
    CHECK_FALSE(first(other).contains("contained"));
    CHECK(tdbg::diff::format_divergence(other).find("reaches no other op's output") == std::string::npos);
  }
}

TEST_CASE("a divergence in a forked process says the step its parent had reached") {
  using T = Recorder::T;
  // An evaluation forked at step 20 that scales by another factor in B.
  auto write = [](const std::string& factor) {
    auto parent = [](Recorder& r) { r.op("aten::mm", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 30); };
    auto child = [factor](Recorder& r) {
      r.op("aten::mul", {T{20}}, {T{factor == "2" ? 21u : 22u}}, {{"other", factor}}, 0, 0, kNoSeq, 40);
    };
    return write_processes({Process{"100", "1", "", 1000, parent, "0"},
                            Process{"101", "100", "", 2000, child, "0", {{"forked_at_step", "20"}}}});
  };
  json r = compare(write("2"), write("3"));
  json d = first(r);
  CHECK(d["process_a"]["forked_at_step"] == 20);
  CHECK(tdbg::diff::format_divergence(r).rfind(
            "diverged at aten::mul (seq 0, step 0 of a process forked at step 20): arguments", 0) == 0);
}

TEST_CASE("a resumed run is compared with --align-steps from the step it resumed at") {
  using T = Recorder::T;
  // A trains steps 0..5 straight; B is the process that resumed at step 3: it builds the model
  // and loads the checkpoint (ops of its own), then runs A's steps 3..5 as its steps 0..2.
  // `lr_b`: B's learning rate at its step 1 (A's step 4), as a scheduler not restored gives.
  auto step_ops = [](Recorder& r, int64_t step, const std::string& lr) {
    r.op("aten::mm", {T{uint64_t(100 + step)}}, {T{uint64_t(200 + step)}}, {}, 0, 0, kNoSeq, 30);
    r.op("aten::add_", {T{uint64_t(300 + step)}}, {T{uint64_t(lr == "0.1" ? 400 + step : 500 + step)}},
         {{"alpha", lr}}, 0, 0, kNoSeq, 31);
  };
  const std::string straight = write_ops([&](Recorder& r) {
    for (int64_t s = 0; s < 6; ++s) {
      r.step = s;
      step_ops(r, s, "0.1");
    }
  });
  auto resumed = [&](const std::string& lr_b) {
    return write_ops([&](Recorder& r) {
      r.op("aten::randn", {}, {T{900}}, {}, 7, 0, kNoSeq, 10);     // the model's init
      r.op("aten::copy_", {T{900}}, {T{901}}, {}, 0, 0, kNoSeq, 11);  // load_state_dict
      for (int64_t s = 0; s < 3; ++s) {
        r.step = s;
        step_ops(r, 3 + s, s == 1 ? lr_b : "0.1");
      }
    });
  };
  tdbg::diff::DiffOptions aligned;
  aligned.align_steps = {3, 0};
  // A correct resume: B's own ops, then the same values to the end.
  json r = compare(straight, resumed("0.1"), aligned);
  json d = first(r);
  CHECK(d["kind"] == "structure");
  CHECK(d["values_same"].is_object());
  CHECK(r["notes"].dump().find("compared from A's step 3 (its op 6) and B's step 0 (its op 0) on (--align-steps)") !=
        std::string::npos);
  CHECK(r["aligned_start"]["a"]["seq"] == 6);
  CHECK(r["aligned_start"]["b"]["seq"] == 0);
  CHECK(r["aligned_start"]["b"]["step"] == 0);
  // Not restored: named at B's step 1, A's step 4, as an argument.
  d = first(compare(straight, resumed("0.01"), aligned));
  REQUIRE(d["value_after_structure"].is_object());
  CHECK(d["value_after_structure"]["cause"] == "arguments");
  CHECK(d["value_after_structure"]["a"]["step"] == 4);
  CHECK(d["value_after_structure"]["b"]["step"] == 1);
  // Without it, A's step 0 pairs with B's resumed step 0: every value differs.
  d = first(compare(straight, resumed("0.1")));
  CHECK_FALSE(d.contains("values_same"));
  // A step a run does not hold: an error that says which steps each holds.
  aligned.align_steps = {9, 0};
  auto ra = tdbg::tracer::Run::Open(straight);
  auto rb = tdbg::tracer::Run::Open(resumed("0.1"));
  REQUIRE((ra.ok() && rb.ok()));
  auto bad = tdbg::diff::compare_runs(*ra, *rb, aligned);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("--align-steps 9:0, but A holds steps 0..5 and B steps 0..2") !=
        std::string::npos);
}

TEST_CASE("with hashing off a random op after a change that drew from another state is named") {
  using T = Recorder::T;
  // --hash none: tensors skipped. B inserts ops (a resume's setup), then its dropouts draw
  // from other generator states: the first of them is the value difference after the change.
  auto run = [](bool b) {
    return write_ops([&](Recorder& r) {
      const T skipped{0, kNoSeq, "32x8", TensorStatus::kSkipped};
      r.op("aten::linear", {skipped}, {skipped}, {}, 0, 0, kNoSeq, 4);
      if (b)
        for (int k = 0; k < 3; ++k) r.op("aten::zero_", {skipped}, {skipped}, {}, 0, 0, kNoSeq, 5);
      for (uint64_t s = 0; s < 4; ++s) {
        r.op("aten::linear", {skipped}, {skipped}, {}, 0, 0, kNoSeq, 6);
        r.op("aten::bernoulli_", {skipped}, {skipped}, {{"p", "0.5"}}, (b ? 900 : 100) + s, 0, kNoSeq, 7);
      }
    });
  };
  json d = first(compare(run(false), run(true)));
  CHECK(d["kind"] == "structure");
  REQUIRE(d["value_after_structure"].is_object());
  CHECK(d["value_after_structure"]["a"]["op"] == "aten::bernoulli_");
  CHECK(d["value_after_structure"]["cause"] == "rng");
  // Its stack is printed as well as the change's.
  const std::string text = tdbg::diff::format_divergence(compare(run(false), run(true)));
  INFO(text);
  CHECK(text.find("stack (A, first value difference after the change, innermost last):\n    "
                  "train.py:7 forward") != std::string::npos);
}

TEST_CASE("a DataLoader worker is named with the rank that started it") {
  using T = Recorder::T;
  auto ops = [](Recorder& r) { r.op("aten::mm", {T{100}}, {T{200}}, {}, 0, 0, kNoSeq, 30); };
  const std::string run_dir = write_processes(
      {Process{"20", "1", "", 1000, ops, "0", {{"rank", "1/2"}}},
       Process{"21", "20", "0/2", 2000, ops, "0"}});
  auto run = tdbg::tracer::Run::Open(run_dir);
  REQUIRE(run.ok());
  REQUIRE(run->processes.size() == 2);
  const json worker = tdbg::diff::process_json(*run, 1);
  CHECK(worker["parent_rank"] == "1/2");
  CHECK(worker["text"].get<std::string>().find("(DataLoader worker 0/2 of rank 1/2, pid 21)") !=
        std::string::npos);
  CHECK_FALSE(tdbg::diff::process_json(*run, 0).contains("parent_rank"));
}

TEST_CASE("tdbg nan on a run that crashed says its answer covers what ran until then") {
  using T = Recorder::T;
  auto ops = [](Recorder& r) { r.op("aten::mm", {T{100}}, {T{200}}, {}, 0, 0, kNoSeq, 30); };
  const std::string crashed =
      write_processes({Process{"20", "1", "", 1000, ops, "signal 11", {{"end_time_ns", "2000"}}}});
  auto run = tdbg::tracer::Run::Open(crashed);
  REQUIRE(run.ok());
  auto r = tdbg::diff::first_nonfinite(*run);
  REQUIRE(r.ok());
  CHECK((*r)["status"] == "finite");
  const std::string text = tdbg::diff::format_nonfinite(*r);
  INFO(text);
  CHECK(text.find("process 0 (pid 20) was ended by signal 11 (SIGSEGV): only what it ran until then "
                  "is looked at") != std::string::npos);
}

TEST_CASE("a later phase left out of the comparison is said under the headline, with the command") {
  using T = Recorder::T;
  auto steps = [](int64_t from, int64_t to) {
    return [from, to](Recorder& r) {
      for (int64_t s = from; s < to; ++s) {
        r.step = s - from;
        r.op("aten::mm", {T{uint64_t(100 + s)}}, {T{uint64_t(200 + s)}}, {}, 0, 0, kNoSeq, 30);
      }
    };
  };
  // The earlier phase ran 3 optimizer steps (its step regions) and saved a checkpoint.
  auto three_steps = [](tdbg::tracer::Writer& w) {
    for (uint32_t k = 0; k < 3; ++k) add_step_region(w, k + 1, k, k, "Optimizer.step#SGD.step");
  };
  const std::string straight = write_processes({Process{"10", "1", "", 1000, steps(0, 6), "0"}});
  const std::string phases = write_processes(
      {Process{"20", "1", "", 1000, steps(0, 3), "0", {{"end_time_ns", "2000"}}, three_steps},
       Process{"21", "1", "", 3000, steps(3, 6), "0", {{"end_time_ns", "4000"}}}});
  json r = compare(straight, phases);
  const std::string warnings = r["warnings"].dump();
  CHECK(warnings.find("B's process 1 (pid 21) started after its process 0 ended, as a later phase "
                      "does") != std::string::npos);
  CHECK(warnings.find("vm-21.sqlite --align-steps 3:0 (3: the optimizer steps process 0 ran)") !=
        std::string::npos);
  CHECK(tdbg::diff::format_divergence(r).find("\n  warning:  B's process 1 (pid 21) started after") !=
        std::string::npos);
  // With --align-steps 3:0 on the run directory: the phase that resumed at step 3 is compared,
  // and it ran A's steps 3..5 alike.
  auto ra = tdbg::tracer::Run::Open(straight);
  auto rb = tdbg::tracer::Run::Open(phases);
  REQUIRE((ra.ok() && rb.ok()));
  CHECK(tdbg::diff::keep_resumed_phase(*ra, 3).empty());  // one process: no phases
  CHECK(tdbg::diff::keep_resumed_phase(*rb, 3) ==
        "compared its phase pid 21, which resumed at step 3 (--align-steps); the 1 other phase(s) "
        "of the run, and the processes they started, were left out");
  REQUIRE(rb->processes.size() == 1);
  CHECK(rb->shown(0) == 1);
  tdbg::diff::DiffOptions aligned;
  aligned.align_steps = {3, 0};
  auto result = tdbg::diff::compare_runs(*ra, *rb, aligned);
  REQUIRE(result.ok());
  CHECK((*result)["status"] == "identical");
  // `bash -c "train && resume"`: the shell runs the resume in its own process, the recorded
  // parent of the first phase, which it started (and which ended) before: the same phases.
  const std::string exec_phases = write_processes(
      {Process{"20", "21", "", 1000, steps(0, 3), "0", {{"end_time_ns", "2000"}}, three_steps},
       Process{"21", "1", "", 3000, steps(3, 6), "0", {{"end_time_ns", "4000"}}}});
  const std::string exec_warnings = compare(straight, exec_phases)["warnings"].dump();
  CHECK(exec_warnings.find("B's process 1 (pid 21) started after its process 0 ended, as a later "
                           "phase does") != std::string::npos);
  auto re = tdbg::tracer::Run::Open(exec_phases);
  REQUIRE(re.ok());
  CHECK(re->processes[0]->meta("pid") == "20");
  CHECK(tdbg::diff::keep_resumed_phase(*re, 3).find("compared its phase pid 21") == 0);
  // A step no phase resumed at: the last phase, and the step it did resume at.
  auto wrong = tdbg::tracer::Run::Open(phases);
  REQUIRE(wrong.ok());
  CHECK(tdbg::diff::keep_resumed_phase(*wrong, 5) ==
        "no phase resumed at step 5 (--align-steps): compared the last phase, pid 21, which resumed "
        "at step 3 (the optimizer steps the phases before it ran; is 3 the step meant?); the 1 other "
        "phase(s) of the run, and the processes they started, were left out");
}

TEST_CASE("after a change, a view of other memory is said to come from the changed ops") {
  using T = Recorder::T;
  // B slices its batch again (an op inserted) and the layer reads that other slice: views are
  // not compared by value, and the layer's inputs are not "identical".
  auto run = [](bool again) {
    return write_ops([&](Recorder& r) {
      T batch{10};
      batch.producer = r.op("aten::randn", {}, {batch}, {}, 7, 0, kNoSeq, 40);
      T slice{11, kNoSeq, "16x8", TensorStatus::kView};
      slice.summary = false;
      slice.producer = r.op("aten::slice", {batch}, {slice}, {{"start", "0"}}, 0, 0, kNoSeq, 46);
      if (again) {
        slice.hash = 12;
        slice.producer = r.op("aten::slice", {batch}, {slice}, {{"start", "1"}}, 0, 0, kNoSeq, 48);
      }
      r.op("aten::linear", {slice, T{20}}, {T{again ? 31u : 30u}}, {}, 0, 0, kNoSeq, 18);
    });
  };
  json d = first(compare(run(false), run(true)));
  CHECK(d["kind"] == "structure");
  const json& v = d["value_after_structure"];
  REQUIRE(v.is_object());
  CHECK(v["cause"] == "structure");
  CHECK(v["detail"] ==
        "input 0 comes from ops changed by the structural change (a view of other memory in each "
        "run; not compared by value) (A: made by op 1, aten::slice at train.py:46; B: made by op 2, "
        "aten::slice at train.py:48)");
}

TEST_CASE("a DataLoader worker loading other items is no cause of its own") {
  using T = Recorder::T;
  // The main process's sampler draws another permutation; its worker then selects other
  // indices (arguments) of the same dataset: what its parent sent it.
  auto worker = [](bool other) {
    return [other](Recorder& r) {
      r.op("aten::select", {T{10}}, {T{other ? 12u : 11u}}, {{"index", other ? "7" : "3"}}, 0, 0, kNoSeq, 21);
    };
  };
  auto run = [&](bool other) {
    return write_processes({{"100", "1", "", 1000, linear_ops(12, other ? 2 : -1)},
                            {"101", "100", "0/1", 50000, worker(other)}});
  };
  json d = first(compare(run(false), run(true)));
  REQUIRE(d["other_processes"].size() == 1);
  CHECK_FALSE(d["other_processes"][0].contains("own_cause"));
}

TEST_CASE("a long stack keeps the user's outer frames and counts the library frames it leaves out") {
  json r = one_op_divergence();
  REQUIRE(first(r)["a"].is_object());
  // train.py:122 calls load_state_dict, which deep-copies through 16 frames of the library.
  json stack = json::array();
  stack.push_back({{"file", "/w/train.py"}, {"line", 122}, {"function", "<module>"}});
  stack.push_back({{"file", "/usr/lib/python3/dist-packages/torch/optim/optimizer.py"}, {"line", 200},
                   {"function", "Optimizer.load_state_dict"}});
  for (int k = 0; k < 16; ++k)
    stack.push_back({{"file", "/usr/lib/python3.11/copy.py"}, {"line", 100 + k}, {"function", "deepcopy"}});
  r["first_divergence"]["a"]["stack"] = stack;
  const std::string text = tdbg::diff::format_divergence(r);
  CHECK(text.find("stack (A, innermost last):\n    /w/train.py:122 <module>\n    ... 5 library frame(s)\n"
                  "    /usr/lib/python3.11/copy.py:104 deepcopy\n") != std::string::npos);
}

TEST_CASE("a C++ frame's function is printed readable in the stack, a Python one as it is") {
  json r = one_op_divergence();
  REQUIRE(first(r)["a"].is_object());
  json stack = json::array();
  stack.push_back({{"file", "/w/tr.cpp"}, {"line", 40}, {"function", "main"}});
  stack.push_back({{"file", "/w/tr.cpp"},
                   {"line", 18},
                   {"function",
                    "app::Trainer<torch::optim::SGD, main::{lambda(at::Tensor const&, at::Tensor "
                    "const&)#2}>::step(at::Tensor const&, at::Tensor const&)"}});
  stack.push_back(
      {{"file", "/w/train.py"},
       {"line", 5},
       {"function", "Optimizer._hook_for_profile.<locals>.profile_hook_step.<locals>.wrapper"}});
  r["first_divergence"]["a"]["stack"] = stack;
  const std::string text = tdbg::diff::format_divergence(r);
  INFO(text);
  CHECK(text.find("    /w/tr.cpp:18 app::Trainer<...>::step\n") != std::string::npos);
  CHECK(
      text.find("    /w/train.py:5 Optimizer._hook_for_profile.<locals>.profile_hook_step.<locals>."
                "wrapper\n") != std::string::npos);
}

TEST_CASE("library frames between two of the user's frames are counted, not listed") {
  json r = one_op_divergence();
  REQUIRE(first(r)["a"].is_object());
  // A DataLoader worker: the training loop, the fork and fetch plumbing, then `__getitem__`,
  // which calls into torch.
  json stack = json::array();
  stack.push_back({{"file", "/w/train.py"}, {"line", 27}, {"function", "<module>"}});
  for (const char* f : {"/usr/lib/python3.11/multiprocessing/process.py",
                        "/usr/lib/python3.11/multiprocessing/popen_fork.py",
                        "/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py"})
    stack.push_back({{"file", f}, {"line", 10}, {"function", "plumbing"}});
  stack.push_back({{"file", "/w/train.py"}, {"line", 18}, {"function", "Imgs.__getitem__"}});
  stack.push_back({{"file", "/usr/lib/python3/dist-packages/torch/nn/functional.py"},
                   {"line", 300},
                   {"function", "pad"}});
  r["first_divergence"]["a"]["stack"] = stack;
  const std::string text = tdbg::diff::format_divergence(r);
  INFO(text);
  CHECK(text.find(
            "stack (A, innermost last):\n    /w/train.py:27 <module>\n    ... 3 library frame(s)\n"
            "    /w/train.py:18 Imgs.__getitem__\n"
            "    /usr/lib/python3/dist-packages/torch/nn/functional.py:300 pad\n") !=
        std::string::npos);
}

TEST_CASE("a C++ thread's stack counts std::thread's plumbing in system headers as library frames") {
  json r = one_op_divergence();
  REQUIRE(first(r)["a"].is_object());
  json stack = json::array();
  const char* plumbing[] = {"std::thread::_State_impl<...>::_M_run()", "std::thread::_Invoker<...>::operator()()",
                            "std::__invoke<...>", "void std::__invoke_impl<...>"};
  for (const char* f : plumbing)
    stack.push_back({{"file", "/usr/include/c++/12/bits/std_thread.h"}, {"line", 211}, {"function", f}});
  stack.push_back({{"file", "/w/train.cc"}, {"line", 40}, {"function", "worker(int)"}});
  for (int k = 0; k < 2; ++k)
    stack.push_back({{"file", "/usr/include/ATen/core/TensorBody.h"}, {"line", 2929}, {"function", "at::Tensor::mul"}});
  r["first_divergence"]["a"]["stack"] = stack;
  const std::string text = tdbg::diff::format_divergence(r);
  INFO(text);
  // (Short: the innermost frames are kept, torch's header ones too; the plumbing outside the
  // user's frame is not.)
  CHECK(text.find(
            "stack (A, innermost last):\n    ... 4 library frame(s)\n    /w/train.cc:40 worker\n"
            "    /usr/include/ATen/core/TensorBody.h:2929 at::Tensor::mul\n") != std::string::npos);
}

TEST_CASE("a carried view names the op that made its base, which a .numpy() write reaches") {
  using T = Recorder::T;
  // The data is shuffled in place through .numpy() of the base (no op), then sliced: the
  // slice's carried hash hides it, and the base's maker is where to look.
  auto write = [](uint64_t out) {
    return write_ops([&](Recorder& r) {
      T data{11, kNoSeq, "32x8", TensorStatus::kKnown};
      data.producer = r.op("aten::randint", {}, {T{11}}, {}, 7, 0, kNoSeq, 31);
      T slice{12, kNoSeq, "16x8", TensorStatus::kView};
      slice.summary = false;
      slice.producer = r.op("aten::slice", {data}, {slice}, {{"start", "0"}}, 0, 0, kNoSeq, 34);
      r.op("aten::flip", {slice}, {T{out}}, {}, 0, 0, kNoSeq, 35);
    });
  };
  json d = first(compare(write(31), write(32)));
  CHECK(d["detail"].get<std::string>().find(
            "after op 1 made it (a view of what op 0, aten::randint at train.py:31, made: a write "
            "into that tensor, as through its .numpy(), reaches the view)") != std::string::npos);
}

TEST_CASE("runs whose DataLoaders have other worker counts say so under the headline") {
  using T = Recorder::T;
  auto worker = [](uint64_t item) {
    return [item](Recorder& r) { r.op("aten::stack", {T{item}}, {T{item + 100}}, {}, 0, 0, kNoSeq, 21); };
  };
  const std::string two = write_processes({{"100", "1", "", 1000, linear_ops(6)},
                                           {"101", "100", "0/2", 2000, worker(1)},
                                           {"102", "100", "1/2", 2000, worker(2)}});
  const std::string one = write_processes({{"200", "1", "", 1000, linear_ops(6, 3)},
                                           {"201", "200", "0/1", 2000, worker(1)}});
  json r = compare(two, one);
  CHECK(r["warnings"].dump().find("with another num_workers (A 2, B 1)") != std::string::npos);
  CHECK(tdbg::diff::format_divergence(r).find("\n  warning:  the runs load their DataLoader's batches "
                                              "with another num_workers (A 2, B 1)") != std::string::npos);
}

TEST_CASE("a reason's distance back to the op that returned uninitialized memory reads as that op's seq") {
  const std::string words = "memory returned uninitialized by an empty-family op; no recorded op wrote it";
  CHECK(tdbg::diff::reason_text(words + " (seq -6)", 12) == words + " (seq 6)");
  CHECK(tdbg::diff::reason_text(words, 12) == words);
  // Not a distance this op can have: left as recorded.
  CHECK(tdbg::diff::reason_text(words + " (seq -20)", 12) == words + " (seq -20)");
  CHECK(tdbg::diff::reason_text("sparse layout", 3) == "sparse layout");
}

TEST_CASE("a module's train/eval mode is named: dropout only one run runs, or a training argument") {
  using T = Recorder::T;
  // B forgot model.eval(): its forward runs dropout (train=True) where A runs none.
  auto run = [](bool training) {
    return write_ops([&](Recorder& r) {
      r.op("aten::linear", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      if (training) r.op("aten::dropout", {T{11}}, {T{12}}, {{"p", "0.1"}, {"train", "True"}}, 0, 0, kNoSeq, 5);
      r.op("aten::relu", {T{training ? 12u : 11u}}, {T{training ? 13u : 14u}}, {}, 0, 0, kNoSeq, 6);
    });
  };
  json r = compare(run(false), run(true));
  json d = first(r);
  REQUIRE(d["mode_change"].is_object());
  CHECK(d["mode_change"]["run"] == "B");
  CHECK(d["mode_change"]["op"]["op"] == "aten::dropout");
  const std::string text = tdbg::diff::format_divergence(r);
  INFO(text);
  CHECK(text.find("a module is in training mode in B and in eval mode in the other") != std::string::npos);
  // Another structural change, without a mode: nothing said.
  auto other = [](bool extra) {
    return write_ops([&](Recorder& r) {
      r.op("aten::linear", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      if (extra) r.op("aten::dropout", {T{11}}, {T{12}}, {{"p", "0.1"}, {"train", "False"}}, 0, 0, kNoSeq, 5);
      r.op("aten::relu", {T{11}}, {T{13}}, {}, 0, 0, kNoSeq, 6);
    });
  };
  CHECK_FALSE(first(compare(other(false), other(true))).contains("mode_change"));
  // A whole extra forward in B (a gradient-accumulation condition, or the rest of a run the
  // other ended): dropout in training mode among other work, which A does not run at all.
  auto extra_forward = [](bool extra) {
    return write_ops([&](Recorder& r) {
      r.op("aten::linear", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      if (extra) {
        r.op("aten::linear", {T{10}}, {T{21}}, {}, 0, 0, kNoSeq, 4);
        r.op("aten::dropout", {T{21}}, {T{22}}, {{"p", "0.1"}, {"train", "True"}}, 0, 0, kNoSeq, 5);
        r.op("aten::relu", {T{22}}, {T{23}}, {}, 0, 0, kNoSeq, 6);
      }
      r.op("aten::relu", {T{11}}, {T{13}}, {}, 0, 0, kNoSeq, 6);
    });
  };
  CHECK_FALSE(first(compare(extra_forward(false), extra_forward(true))).contains("mode_change"));
  // Other work in its place: A saves a checkpoint (no module) where B goes on training; or
  // A's eval fast path in the same module, which is a mode change.
  auto in_place_of_training = [](bool training, const std::string& other_module) {
    return write_ops([&](Recorder& r) {
      r.op("aten::linear", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      if (training) {
        r.op("aten::dropout", {T{11}}, {T{12}}, {{"p", "0.1"}, {"train", "True"}}, 0, 0, kNoSeq, 5);
      } else {
        r.root_module = other_module;
        r.op("aten::_transformer_encoder_layer_fwd", {T{11}}, {T{12}}, {}, 0, 0, kNoSeq, 7);
        r.root_module = "model";
      }
      r.op("aten::relu", {T{12}}, {T{13}}, {}, 0, 0, kNoSeq, 6);
    });
  };
  CHECK_FALSE(first(compare(in_place_of_training(false, ""), in_place_of_training(true, "")))
                  .contains("mode_change"));
  CHECK(first(compare(in_place_of_training(false, "model"), in_place_of_training(true, "")))
            .contains("mode_change"));
  // A forward run again by autograd (checkpointing's recomputation): training in both runs.
  auto recomputed = [](bool again) {
    return write_ops([&](Recorder& r) {
      r.op("aten::linear", {T{10}}, {T{11}}, {}, 0, 0, kNoSeq, 4);
      if (again) {
        r.next_flags = tdbg::tracer::kOpBackward;
        r.op("aten::batch_norm", {T{11}}, {T{12}}, {{"training", "True"}}, 0, 0, kNoSeq, 5);
      }
      r.op("aten::relu", {T{11}}, {T{13}}, {}, 0, 0, kNoSeq, 6);
    });
  };
  CHECK_FALSE(first(compare(recomputed(false), recomputed(true))).contains("mode_change"));
  // The same batch norm with training False in A, True in B: the argument says what it means.
  auto norm = [](const std::string& training) {
    return write_ops([&](Recorder& r) {
      r.op("aten::batch_norm", {T{10}}, {T{11}}, {{"training", training}, {"momentum", "0.1"}}, 0, 0, kNoSeq, 4);
    });
  };
  json n = compare(norm("False"), norm("True"));
  CHECK(first(n)["argument"]["module_mode"] == true);
  CHECK(tdbg::diff::format_divergence(n).find("the module's train/eval mode") != std::string::npos);
}

TEST_CASE("a change holding an optimizer step and a zero_grad names both, the step first") {
  using T = Recorder::T;
  // Gradient accumulation: A steps and zeroes after each micro-batch, B after every second,
  // so A's first update (its step range, then zero_grad's) is a change of A alone.
  auto run = [](bool every) {
    auto ranges = std::make_shared<std::vector<std::tuple<int64_t, int64_t, bool>>>();
    return write_ops(
        [=](Recorder& r) {
          for (uint64_t s = 0; s < 2; ++s) {
            r.op("aten::mm", {T{1}, T{2 + s}}, {T{10 + s}}, {}, 0, 0, kNoSeq, 5);
            if (!every && s == 0) continue;
            r.op("aten::zeros", {}, {T{30 + s}}, {}, 0, 0, kNoSeq, 16);
            const int64_t step =
                r.op("aten::add_", {T{40 + s}, T{10 + s}}, {T{41 + s}}, {}, 0, 0, kNoSeq, 16);
            ranges->push_back({step, step, true});
            r.op("aten::zeros", {}, {T{50 + s}}, {}, 0, 0, kNoSeq, 17);
            const int64_t zero =
                r.op("aten::zero_", {T{60 + s}}, {T{60 + s}}, {}, 0, 0, kNoSeq, 17);
            ranges->push_back({zero, zero, false});
          }
        },
        [=](tdbg::tracer::Writer& w) {
          uint32_t id = 1;
          for (const auto& [first, last, step] : *ranges) {
            tdbg::tracer::RegionRecord g;
            g.id = id++;
            g.name =
                w.intern(step ? "Optimizer.step#SGD.step" : "Optimizer.zero_grad#SGD.zero_grad");
            g.kind = step ? tdbg::tracer::RegionKind::kStep : tdbg::tracer::RegionKind::kUser;
            g.start_seq = first;
            g.end_seq = last;
            w.append_region(g);
          }
        });
  };
  json d = first(compare(run(true), run(false)));
  INFO(d.dump());
  CHECK(d["detail"].get<std::string>().find(
            "4 op(s) of A removed in B, first aten::zeros (all of an optimizer.step() call and an "
            "optimizer.zero_grad() call)") == 0);
}

TEST_CASE("a change that is a whole user range names it: a missing optimizer.zero_grad()") {
  using T = Recorder::T;
  // A calls optimizer.zero_grad() before each update (record_function makes a tensor, then its
  // range holds the gradients' zero_); B forgets it.
  auto run = [](bool zero_grad) {
    auto ranges = std::make_shared<std::vector<std::pair<int64_t, int64_t>>>();
    return write_ops(
        [=](Recorder& r) {
          for (uint64_t s = 0; s < 3; ++s) {
            r.op("aten::mm", {T{1}, T{2 + s}}, {T{10 + s}}, {}, 0, 0, kNoSeq, 5);
            if (zero_grad) {
              r.op("aten::zeros", {}, {T{30 + s}}, {}, 0, 0, kNoSeq, 7);
              const int64_t first =
                  r.op("aten::zero_", {T{40 + s}}, {T{40 + s}}, {}, 0, 0, kNoSeq, 7);
              const int64_t last =
                  r.op("aten::zero_", {T{50 + s}}, {T{50 + s}}, {}, 0, 0, kNoSeq, 7);
              ranges->push_back({first, last});
            }
            r.op("aten::add_", {T{60 + s}, T{10 + s}}, {T{70 + s}}, {}, 0, 0, kNoSeq, 9);
          }
        },
        [=](tdbg::tracer::Writer& w) {
          uint32_t id = 1;
          for (const auto& [first, last] : *ranges) {
            tdbg::tracer::RegionRecord g;
            g.id = id++;
            g.name = w.intern("Optimizer.zero_grad#SGD.zero_grad");
            g.kind = tdbg::tracer::RegionKind::kUser;
            g.start_seq = first;
            g.end_seq = last;
            w.append_region(g);
          }
        });
  };
  json d = first(compare(run(true), run(false)));
  INFO(d.dump());
  CHECK(d["detail"].get<std::string>().rfind(
            "3 op(s) of A removed in B, first aten::zeros (all of an optimizer.zero_grad() call)",
            0) == 0);
}
