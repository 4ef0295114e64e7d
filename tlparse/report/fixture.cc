// Synthetic runs for tlparse/report's tests and benchmarks (see fixture.h).
#include "tlparse/report/fixture.h"

#include <cmath>
#include <fstream>
#include <sys/stat.h>
#include <vector>

#include "tracer/writer.h"

namespace tdbg::report::fixture {
namespace {

using tracer::OpRecord;
using tracer::TensorRecord;

// One op of the step template.
struct Kind {
  const char* name;
  int line;             // train.py line of the user frame
  uint32_t thread;      // 0 forward/optimizer, 1 autograd
  int depth;
  int parent_offset;    // template index of the parent, -1 none
  int fwd_offset;       // template index of the forward op (backward ops), -1 none
  int layer;            // module layer, -1 none
  uint32_t flags;
};

const std::vector<Kind>& step_template() {
  static const std::vector<Kind> k = {
      {"aten::normal_", 19, 0, 0, -1, -1, -1, tracer::kOpRandom | tracer::kOpInplace},
      {"aten::linear", 21, 0, 0, -1, -1, 0, 0},
      {"aten::addmm", 21, 0, 1, 1, -1, 0, 0},
      {"aten::relu", 22, 0, 0, -1, -1, 0, 0},
      {"aten::linear", 21, 0, 0, -1, -1, 1, 0},
      {"aten::addmm", 21, 0, 1, 4, -1, 1, 0},
      {"aten::relu", 22, 0, 0, -1, -1, 1, 0},
      {"aten::linear", 21, 0, 0, -1, -1, 2, 0},
      {"aten::addmm", 21, 0, 1, 7, -1, 2, 0},
      {"aten::relu", 22, 0, 0, -1, -1, 2, 0},
      {"aten::mse_loss", 24, 0, 0, -1, -1, -1, 0},
      {"autograd::engine::evaluate_function: MseLossBackward0", 25, 1, 0, -1, 10, -1, tracer::kOpBackward},
      {"autograd::engine::evaluate_function: ReluBackward0", 25, 1, 0, -1, 9, 2, tracer::kOpBackward},
      {"autograd::engine::evaluate_function: AddmmBackward0", 25, 1, 0, -1, 8, 2, tracer::kOpBackward},
      {"autograd::engine::evaluate_function: ReluBackward0", 25, 1, 0, -1, 6, 1, tracer::kOpBackward},
      {"autograd::engine::evaluate_function: AddmmBackward0", 25, 1, 0, -1, 5, 1, tracer::kOpBackward},
      {"autograd::engine::evaluate_function: ReluBackward0", 25, 1, 0, -1, 3, 0, tracer::kOpBackward},
      {"autograd::engine::evaluate_function: AddmmBackward0", 25, 1, 0, -1, 2, 0, tracer::kOpBackward},
      {"aten::add_", 26, 0, 0, -1, -1, 0, tracer::kOpInplace},
      {"aten::add_", 26, 0, 0, -1, -1, 1, tracer::kOpInplace},
      {"aten::add_", 26, 0, 0, -1, -1, 2, tracer::kOpInplace},
      {"aten::zero_", 27, 0, 0, -1, -1, -1, tracer::kOpInplace},
  };
  return k;
}

const char* kTrainPy = R"py(# A tiny training script: the recorded stacks of the tdbg report fixture point into it.
import torch
import torch.nn.functional as F


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(64, 64) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def train_step(model, opt, data, target):
    # One optimizer step.
    noise = torch.randn_like(data)
    x = data + noise
    out = model.layers[0](x)
    out = torch.relu(out)
    # loss
    loss = F.mse_loss(out, target)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def main():
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(100):
        train_step(model, opt, torch.ones(8, 64), torch.zeros(8, 64))


if __name__ == "__main__":
    main()
)py";

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Status write_run(const std::string& path, const std::string& dir, const FixtureOptions& o, bool is_b) {
  TDBG_ASSIGN_OR_RETURN(auto w, tracer::Writer::Create(path));
  const auto& tmpl = step_template();
  const int64_t k = static_cast<int64_t>(tmpl.size());
  std::string hostile_script = "<script>window.__pwned=1;alert(1)</script>";
  std::string hostile_img = "\"><img src=x onerror=\"window.__pwned=1;alert(1)\">";

  w->set_meta("torch_version", "1.13.1");
  w->set_meta("python_version", "3.11.2");
  w->set_meta("cpu_model", "Synthetic CPU @ 3.0GHz");
  w->set_meta("cpu_count", "2");
  w->set_meta("num_threads", is_b ? "2" : "4");
  w->set_meta("deterministic_algorithms", "0");
  w->set_meta("cudnn_benchmark", "0");
  w->set_meta("seed", "0");
  w->set_meta("host", "fixture-host");
  w->set_meta("pid", is_b ? "4243" : "4242");
  w->set_meta("cwd", dir);
  // As the hook notes each Python file it records a frame of (size and modification time).
  w->set_meta("source:" + dir + "/train.py", "1:1");
  std::string env = "{\"OMP_NUM_THREADS\": \"4\", \"TORCH_HOME\": \"" + dir + "/cache\"";
  std::string cmd = "[\"/usr/bin/python3\", \"" + dir + "/train.py\", \"--lr\", \"0.01\"";
  if (o.secrets) {
    env += std::string(", \"AWS_SECRET_ACCESS_KEY\": \"") + kFakeAwsSecret + "\", \"HF_TOKEN\": \"" +
           kFakeHfToken + "\"";
    cmd += std::string(", \"--hub-token\", \"") + kFakeCliToken + "\"";
  }
  w->set_meta("env", env + "}");
  w->set_meta("cmdline", cmd + "]");
  if (o.hostile) w->set_meta("note", "</script>" + hostile_script + hostile_img);

  w->add_thread({0, 1000, o.hostile ? hostile_img : "MainThread"});
  w->add_thread({1, 1001, "autograd"});

  std::string file = dir + "/train.py";
  auto f_file = w->intern(file);
  auto f_torch = w->intern("/usr/lib/python3/dist-packages/torch/nn/modules/module.py");
  auto f_main = w->intern_frame(0, f_file, 38, w->intern("<module>"));
  auto f_loop = w->intern_frame(f_main, f_file, 35, w->intern("main"));
  std::vector<tracer::FrameId> user_frames(40), stacks(40);
  for (const auto& kind : tmpl) {
    if (user_frames[kind.line]) continue;
    auto fn = w->intern(o.hostile && kind.line == 22 ? "<svg onload=\"window.__pwned=1\">" : "train_step");
    user_frames[kind.line] = w->intern_frame(f_loop, f_file, kind.line, fn);
    stacks[kind.line] = w->intern_frame(user_frames[kind.line], f_torch, 1194, w->intern("_call_impl"));
  }
  auto s_float = w->intern("8x64");
  auto s_cpu = w->intern("cpu");
  auto s_alpha = w->intern("alpha");
  auto s_lr = w->intern("-0.01");
  auto s_lr_b = w->intern("-0.02");  // B's learning rate from `lr_from` on
  std::vector<tracer::StringId> names;
  for (const auto& kind : tmpl) {
    std::string n = kind.name;
    if (o.hostile && n == "aten::relu") n = hostile_script;
    names.push_back(w->intern(n));
  }
  std::vector<tracer::StringId> modules = {
      w->intern("model.layers.0"),
      w->intern(o.hostile ? "model.layers.1" + hostile_img : "model.layers.1"),
      w->intern("model.layers.2")};
  tracer::ModuleRecord mod{1, w->intern("cubin"), w->intern("libcublasLt.so.12:sm90"), 0x1234abcd5678ef00ull, 1 << 20, 1000};
  w->append_module(mod);
  auto k_name = w->intern("ampere_sgemm_128x64_nn");
  auto k_grid = w->intern("4,1,1");
  auto k_block = w->intern("256,1,1");
  // Interned in both runs (string ids must agree: the chain hashes mix them in), and only when
  // used, so the ids of the other fixtures stay as they were.
  tracer::StringId inserted_name = o.insert_at >= 0 ? w->intern("aten::clone") : 0;

  // `pos` numbers the template's ops as run A records them (A's seq); run B's seqs are later
  // by `inserted_ops` from `insert_at` on. Values follow `pos`, so B's ops after the inserted
  // ones match A's.
  const bool inserts = is_b && o.insert_at >= 0;
  auto seq_of = [&](int64_t pos) {
    return inserts && pos >= o.insert_at ? pos + o.inserted_ops : pos;
  };
  uint64_t chain[2] = {0, 0};
  int64_t tidx[2] = {0, 0};
  int64_t last_output[2] = {-1, -1};      // seq
  int64_t last_output_pos[2] = {-1, -1};  // pos
  bool last_output_nan[2] = {false, false};  // it holds NaN (from `nonfinite_at` on, passed on)
  int64_t t = 1'000'000'000;
  for (int64_t pos = 0; pos < o.ops; ++pos) {
    int64_t step = pos / k, i = pos % k;
    if (inserts && pos == o.insert_at) {
      for (int n = 0; n < o.inserted_ops; ++n) {
        OpRecord extra;
        extra.seq = pos + n;
        extra.thread = 0;
        extra.tidx = tidx[0]++;
        extra.parent = tracer::kNoSeq;
        extra.fwd = tracer::kNoSeq;
        extra.name = inserted_name;
        extra.step = step;
        extra.user_frame = user_frames[19];
        extra.stack = stacks[19];
        extra.region = static_cast<uint32_t>(step + 1);
        extra.start_ns = t;
        extra.end_ns = t + 1000;
        t = extra.end_ns + 500;
        TensorRecord x;
        x.role = tracer::TensorRole::kOutput;
        x.dtype = hashing::DType::kFloat32;
        x.shape = s_float;
        x.device = s_cpu;
        x.status = tracer::TensorStatus::kHashed;
        x.hash = mix(0xc10e, static_cast<uint64_t>(n));
        x.producer = tracer::kNoSeq;
        extra.tensors.push_back(x);
        chain[0] = mix(chain[0], mix(extra.name, x.hash));
        extra.chain = chain[0];
        w->append_op(std::move(extra));
      }
    }
    const int64_t seq = seq_of(pos);
    const Kind& kind = tmpl[i];
    OpRecord op;
    op.seq = seq;
    op.thread = kind.thread;
    op.tidx = tidx[kind.thread]++;
    op.depth = static_cast<uint16_t>(kind.depth);
    op.parent = kind.parent_offset >= 0 ? seq_of(step * k + kind.parent_offset) : tracer::kNoSeq;
    op.fwd = kind.fwd_offset >= 0 ? seq_of(step * k + kind.fwd_offset) : tracer::kNoSeq;
    op.name = names[i];
    op.step = step;
    op.module = kind.layer >= 0 ? modules[kind.layer] : 0;
    // Autograd's engine thread runs no Python: its backward ops have no stack, as in torch.
    const bool engine = (kind.flags & tracer::kOpBackward) && kind.fwd_offset >= 0;
    op.user_frame = engine ? 0 : user_frames[kind.line];
    op.stack = engine ? 0 : stacks[kind.line];
    op.region = static_cast<uint32_t>(step + 1);
    op.start_ns = t;
    op.end_ns = t + 2000 + (pos % 7) * 300;
    t = kind.depth == 0 ? op.end_ns + 500 : t + 200;
    op.flags = kind.flags;
    if (kind.flags & tracer::kOpRandom) op.rng = mix(0x5eed, step);

    // Values: the same in both runs until `diverge_at`; then B drifts and the drift grows.
    double base = std::sin(static_cast<double>(pos) * 0.37) * 100.0 + 1.0;
    bool drifted = is_b && o.diverge_at >= 0 && (o.heal ? pos == o.diverge_at : pos >= o.diverge_at);
    double rel = drifted ? std::min(1e-7 * std::pow(1.05, static_cast<double>(pos - o.diverge_at)), 0.5) : 0;
    double sum = base * (1 + rel);
    uint64_t out_hash = mix(0xa11ce, static_cast<uint64_t>(pos)) ^ (drifted ? mix(0xb0b, pos) : 0);

    TensorRecord in;
    in.role = tracer::TensorRole::kInput;
    in.index = 0;
    in.dtype = hashing::DType::kFloat32;
    in.shape = s_float;
    in.device = s_cpu;
    in.status = tracer::TensorStatus::kKnown;
    in.producer = last_output[kind.thread];
    const int64_t producer_pos = last_output_pos[kind.thread];
    bool input_drifted = is_b && o.diverge_at >= 0 &&
                         (o.heal ? producer_pos == o.diverge_at : producer_pos >= o.diverge_at);
    // Healing: the op after the one that differs overwrites its output in place (a checkpoint
    // load over a random init), with the same values in both runs.
    if (o.heal && o.diverge_at >= 0 && producer_pos == o.diverge_at) op.flags |= tracer::kOpInplace;
    in.hash = producer_pos >= 0 ? mix(0xa11ce, static_cast<uint64_t>(producer_pos)) ^
                                      (input_drifted ? mix(0xb0b, producer_pos) : 0)
                                : 0x1badcafe;
    in.summary.valid = true;
    in.summary.sum =
        producer_pos >= 0 ? std::sin(static_cast<double>(producer_pos) * 0.37) * 100.0 + 1.0 : 3.0;
    in.summary.abs_sum = std::fabs(in.summary.sum) * 1.5 + 1;
    in.summary.min = -1;
    in.summary.max = 1;
    const bool input_nan = producer_pos >= 0 && last_output_nan[kind.thread];
    if (input_nan) in.summary.nan_count = 3;
    op.tensors.push_back(in);

    TensorRecord out;
    out.role = tracer::TensorRole::kOutput;
    out.index = 0;
    out.dtype = hashing::DType::kFloat32;
    out.shape = s_float;
    out.device = s_cpu;
    out.status = tracer::TensorStatus::kHashed;
    out.hash = out_hash;
    out.producer = tracer::kNoSeq;
    out.summary.valid = true;
    out.summary.sum = sum;
    out.summary.abs_sum = std::fabs(base) * 1.5 + 1;
    out.summary.min = -1 - rel;
    out.summary.max = 1 + rel;
    // NaN made at `nonfinite_at` is passed on by every later op of its thread, as a real
    // NaN spreads (a NaN no op passes on is one the program masked, which `tdbg nan` passes
    // over).
    if (pos == o.nonfinite_at || input_nan) out.summary.nan_count = 3;
    op.tensors.push_back(out);
    last_output[kind.thread] = seq;
    last_output_pos[kind.thread] = pos;
    last_output_nan[kind.thread] = out.summary.nan_count > 0;

    bool other_lr = false;
    if (kind.flags & tracer::kOpInplace && kind.layer >= 0) {
      other_lr = is_b && o.lr_from >= 0 && pos >= o.lr_from;
      op.args.push_back({1, s_alpha, other_lr ? s_lr_b : s_lr});
    }
    chain[kind.thread] = mix(chain[kind.thread], mix(op.name, out_hash));
    if (other_lr) chain[kind.thread] = mix(chain[kind.thread], 0x1e5);  // the argument differs
    op.chain = chain[kind.thread];
    if (std::string(kind.name) == "aten::addmm") {
      tracer::KernelRecord kr;
      kr.op = seq;
      kr.module = 1;
      kr.name = k_name;
      kr.grid = k_grid;
      kr.block = k_block;
      kr.stream = 7;
      kr.start_ns = op.start_ns + 100;
      kr.end_ns = op.start_ns + 900;
      w->append_kernel(kr);
    }
    int64_t end_ns = op.end_ns;
    if (o.ring_from < 0 || op.seq >= o.ring_from) w->append_op(std::move(op));
    if (i == k - 1 || pos == o.ops - 1) {
      tracer::RegionRecord r;
      r.id = static_cast<uint32_t>(step + 1);
      r.thread = 0;
      r.name = w->intern("Optimizer.step#SGD.step");
      r.kind = tracer::RegionKind::kStep;
      r.start_seq = seq_of(step * k);
      r.end_seq = seq;
      r.step = step;
      w->append_region(r);
      (void)end_ns;
    }
  }
  w->set_meta("exit_status", o.killed ? "signal 15" : "0");
  w->set_meta("end_time_ns", "1");
  return w->close();
}

}  // namespace

Status make_runs(const std::string& dir, const FixtureOptions& options) {
  {
    std::ofstream py(dir + "/train.py");
    py << kTrainPy;
    if (!py) return Status::Error(dir + "/train.py: cannot write");
  }
  for (const char* side : {"a", "b"}) {
    bool is_b = side[1] == 0 && side[0] == 'b';
    if (is_b && !options.with_b) continue;
    std::string run_dir = dir + "/" + side;
    ::mkdir(run_dir.c_str(), 0755);
    TDBG_RETURN_IF_ERROR(write_run(run_dir + "/rank0.sqlite", dir, options, is_b));
  }
  return Status::Ok();
}

int fixture_line_of(const std::string&, int64_t seq) {
  const auto& tmpl = step_template();
  return tmpl[seq % static_cast<int64_t>(tmpl.size())].line;
}

}  // namespace tdbg::report::fixture
