// Benchmark of the diff engine: on synthetic runs of 10^5, 10^6 (and with --large 10^7) ops,
// the time to the first divergence by chain bisection and by a linear scan, the throughput of
// a full comparison with alignment, and the text-dump + GNU diff approach, all in one run.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "hashing/tensor_hash.h"
#include "tlparse/diff/diff.h"
#include "tracer/op_block.h"
#include "tracer/reader.h"
#include "tracer/writer.h"

namespace fs = std::filesystem;
using namespace tdbg;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

enum class Variant { kBase, kValue, kInsert };

// Writes a synthetic run of `n` ops: a training-like loop of 10 ops per step (nested
// linear/addmm, a random op, an optimizer update), each with 2-3 tensors and a few arguments.
// kValue perturbs one output at op 0.7n (everything downstream differs, as in a real run);
// kInsert inserts one op at 0.5n that changes no value (the rest must be aligned and compared).
Status generate(const std::string& path, int64_t n, Variant variant) {
  fs::remove(path);
  fs::remove(path + "-wal");
  fs::remove(path + "-shm");
  TDBG_ASSIGN_OR_RETURN(auto w, tracer::Writer::Create(path + ".tmp"));
  w->add_thread({0, 1, "main"});
  const char* names[] = {"aten::to", "aten::linear", "aten::t", "aten::addmm", "aten::gelu",
                         "aten::bernoulli_", "aten::mul", "aten::sum", "aten::mse_loss", "aten::add_"};
  tracer::StringId name_ids[10];
  for (int k = 0; k < 10; ++k) name_ids[k] = w->intern(names[k]);
  tracer::StringId shapes[3] = {w->intern("64x128"), w->intern("128x128"), w->intern("")};
  tracer::StringId cpu = w->intern("cpu"), file = w->intern("train.py"), fn = w->intern("forward");
  tracer::StringId module = w->intern("model.fc1"), alpha = w->intern("alpha"), lr = w->intern("-0.05");
  tracer::FrameId frames[10];
  for (int k = 0; k < 10; ++k) frames[k] = w->intern_frame(0, file, 20 + k, fn);
  uint64_t chain = 0, taint = 0;
  int64_t seq = 0;
  int64_t value_at = variant == Variant::kValue ? n * 7 / 10 : -1;
  int64_t insert_at = variant == Variant::kInsert ? n / 2 : -1;
  int64_t parent = tracer::kNoSeq;
  for (int64_t i = 0; i < n; ++i) {
    bool inserted = seq == insert_at;
    int kind = inserted ? 6 : static_cast<int>(i % 10);
    if (inserted) --i;  // the inserted op is extra: the base op i still follows
    tracer::OpRecord op;
    op.seq = seq;
    op.thread = 0;
    op.tidx = seq;
    op.name = name_ids[kind];
    op.step = i / 10;
    op.module = module;
    op.stack = op.user_frame = frames[kind];
    if (kind == 1) parent = seq;
    op.depth = (kind == 2 || kind == 3) ? 1 : 0;
    op.parent = op.depth ? parent : tracer::kNoSeq;
    if (kind == 5) {
      op.flags |= tracer::kOpRandom;
      op.rng = hashing::hash_combine(1234, static_cast<uint64_t>(i));
    }
    if (seq == value_at) taint = 0x5eed;
    uint64_t item = hashing::hash_combine(name_ids[kind], op.rng);
    for (int t = 0; t < 3 - (kind % 2); ++t) {
      tracer::TensorRecord r;
      r.role = t == 0 ? tracer::TensorRole::kOutput : tracer::TensorRole::kInput;
      r.index = static_cast<uint16_t>(t == 0 ? 0 : t - 1);
      r.dtype = hashing::DType::kFloat32;
      r.shape = shapes[t];
      r.device = cpu;
      r.hash = hashing::hash_combine(static_cast<uint64_t>(i * 3 + t), t == 0 || i > value_at ? taint : 0);
      r.status = t == 0 ? tracer::TensorStatus::kHashed : tracer::TensorStatus::kKnown;
      r.producer = t == 0 || seq == 0 ? tracer::kNoSeq : seq - 1;
      r.summary.valid = true;
      r.summary.min = -1;
      r.summary.max = 1;
      r.summary.sum = double(r.hash % 1000);
      r.summary.abs_sum = r.summary.sum + 10;
      item = hashing::hash_combine(item, r.hash);
      op.tensors.push_back(r);
    }
    if (kind == 9 || kind == 3) {
      op.args.push_back({2, alpha, lr});
      item = hashing::hash_combine(item, lr);
    }
    chain = hashing::hash_combine(chain, item);
    op.chain = chain;
    w->append_op(std::move(op));
    ++seq;
  }
  TDBG_RETURN_IF_ERROR(w->close());
  fs::rename(path + ".tmp", path);
  return Status::Ok();
}

StatusOr<std::string> cached_run(const std::string& dir, int64_t n, Variant v) {
  const char* tag = v == Variant::kBase ? "base" : v == Variant::kValue ? "value" : "insert";
  // The block format in the name: a cached run of an older format would be measured without
  // what the current one costs (format 2's checksums).
  std::string path = dir + "/run_" + std::to_string(n) + "_" + tag + "_f" +
                     std::to_string(tracer::kOpBlockFormat) + ".sqlite";
  if (fs::exists(path)) return path;
  auto t = Clock::now();
  TDBG_RETURN_IF_ERROR(generate(path, n, v));
  std::fprintf(stderr, "  generated %s in %.1f s\n", path.c_str(), seconds_since(t));
  return path;
}

// CPU seconds used so far by this process (all threads) or by its waited-for children: on a
// shared machine wall time includes waiting for a core, CPU time does not.
double cpu_seconds(int who) {
  struct rusage u;
  getrusage(who, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Timed {
  double seconds = 0;  // wall
  double cpu = 0;
  nlohmann::json result;
};

// Opens both runs and compares them: what `tdbg diff` does, minus printing.
StatusOr<Timed> time_compare(const std::string& a, const std::string& b, const diff::DiffOptions& o) {
  auto t = Clock::now();
  double c = cpu_seconds(RUSAGE_SELF);
  TDBG_ASSIGN_OR_RETURN(auto ra, tracer::Run::Open(a));
  TDBG_ASSIGN_OR_RETURN(auto rb, tracer::Run::Open(b));
  TDBG_ASSIGN_OR_RETURN(auto result, diff::compare_runs(ra, rb, o));
  return Timed{seconds_since(t), cpu_seconds(RUSAGE_SELF) - c, std::move(result)};
}

// Runs a shell command; wall and CPU time, or seconds = -1 on failure (diff may exit 1).
Timed time_shell(const std::string& cmd) {
  auto t = Clock::now();
  double c = cpu_seconds(RUSAGE_CHILDREN);
  int rc = std::system(cmd.c_str());
  if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) > 1) return Timed{-1, -1, {}};
  return Timed{seconds_since(t), cpu_seconds(RUSAGE_CHILDREN) - c, {}};
}

}  // namespace

int main(int argc, char** argv) {
  bool large = false;
  std::string data = TDBG_BENCH_DATA;
  std::string tdbg_exe;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--large") large = true;
    else if (a == "--data" && i + 1 < argc) data = argv[++i];
    else if (a == "--tdbg" && i + 1 < argc) tdbg_exe = argv[++i];
    else {
      std::fprintf(stderr, "usage: diff_bench [--large] [--data DIR] [--tdbg PATH]\n");
      return 2;
    }
  }
  if (tdbg_exe.empty()) {
    // Beside this executable in <build>/bin.
    tdbg_exe = (fs::read_symlink("/proc/self/exe").parent_path() / "tdbg").string();
  }
  fs::create_directories(data);
  std::vector<int64_t> sizes = {100000, 1000000};
  if (large) sizes.push_back(10000000);
  std::printf("diff_bench: synthetic runs, 10 ops/step, 2-3 tensors/op; data cached in %s\n", data.c_str());
  for (int64_t n : sizes) {
    // Above 10^6 ops only the bisection is measured: the linear methods are linear in n and
    // their rate is known from 10^6, while generating and scanning 10^7-op runs takes minutes.
    const bool linear_too = n <= 1000000;
    auto base = cached_run(data, n, Variant::kBase);
    auto value = cached_run(data, n, Variant::kValue);
    if (!base.ok() || !value.ok()) {
      std::fprintf(stderr, "diff_bench: generating runs failed: %s\n",
                   (!base.ok() ? base : value).status().message().c_str());
      return 2;
    }
    diff::DiffOptions first_only;
    first_only.scan_limit = 0;
    auto bis = time_compare(*base, *value, first_only);
    if (!linear_too) {
      if (!bis.ok() || bis->result["first_divergence"]["a"]["seq"] != n * 7 / 10) {
        std::fprintf(stderr, "diff_bench: compare failed\n");
        return 2;
      }
      // Again, with the files in the page cache as in the smaller sizes' second runs.
      auto again = time_compare(*base, *value, first_only);
      std::printf("ops %" PRId64 " per run (wall s / CPU s)\n", n);
      std::printf("  first divergence, chain bisection   %9.4f / %9.4f   %" PRId64 " probes (cold)\n",
                  bis->seconds, bis->cpu, bis->result["chain_probes"].get<int64_t>());
      if (again.ok()) {
        std::printf("  first divergence, chain bisection   %9.4f / %9.4f   (warm)\n", again->seconds, again->cpu);
      }
      std::printf("  (linear scan, full comparison and text: linear in n, see 10^6)\n");
      std::fflush(stdout);
      continue;
    }
    auto insert = cached_run(data, n, Variant::kInsert);
    if (!insert.ok()) {
      std::fprintf(stderr, "diff_bench: generating runs failed: %s\n", insert.status().message().c_str());
      return 2;
    }
    diff::DiffOptions linear = first_only;
    linear.bisect = false;
    auto lin = time_compare(*base, *value, linear);
    diff::DiffOptions full;
    full.scan_limit = -1;
    auto all = time_compare(*base, *insert, full);
    if (!bis.ok() || !lin.ok() || !all.ok()) {
      std::fprintf(stderr, "diff_bench: compare failed\n");
      return 2;
    }
    // Sanity: the engine found what was planted.
    const auto& fd = bis->result["first_divergence"];
    if (fd["a"]["seq"] != n * 7 / 10 || lin->result["first_divergence"]["a"]["seq"] != n * 7 / 10 ||
        all->result["first_divergence"]["kind"] != "structure") {
      std::fprintf(stderr, "diff_bench: wrong divergence found: %s\n", fd.dump().c_str());
      return 2;
    }
    // Identical runs: bisection answers in two probes, then every block of both is read and
    // checked before the verdict (Reader::verify).
    auto same = time_compare(*base, *base, first_only);
    if (!same.ok() || same->result["status"] != "identical") {
      std::fprintf(stderr, "diff_bench: identical runs not called identical\n");
      return 2;
    }
    // The text approach: dump both runs one line per op, then GNU diff.
    std::string ta = data + "/dump_a.txt", tb = data + "/dump_b.txt";
    Timed dump_a = time_shell("'" + tdbg_exe + "' show --plain --limit 0 '" + *base + "' > '" + ta + "'");
    Timed dump_b = time_shell("'" + tdbg_exe + "' show --plain --limit 0 '" + *value + "' > '" + tb + "'");
    Timed gnu = time_shell("diff '" + ta + "' '" + tb + "' > /dev/null");
    fs::remove(ta);
    fs::remove(tb);
    bool text_ok = dump_a.seconds >= 0 && dump_b.seconds >= 0 && gnu.seconds >= 0;
    double text_wall = dump_a.seconds + dump_b.seconds + gnu.seconds;
    double text_cpu = dump_a.cpu + dump_b.cpu + gnu.cpu;
    int64_t aligned = all->result["first_divergence"]["growth"]["ops_compared"].get<int64_t>();
    std::printf("ops %" PRId64 " per run (wall s / CPU s; the machine may be shared: CPU is the fairer figure)\n", n);
    std::printf("  first divergence, chain bisection   %9.4f / %9.4f   %" PRId64 " probes\n", bis->seconds,
                bis->cpu, bis->result["chain_probes"].get<int64_t>());
    std::printf("  first divergence, linear scan       %9.4f / %9.4f   bisection %.0fx faster (CPU)\n",
                lin->seconds, lin->cpu, lin->cpu / std::max(bis->cpu, 1e-6));
    std::printf("  identical runs, every block checked %9.4f / %9.4f   %.1f M ops/s CPU (both runs read whole)\n",
                same->seconds, same->cpu, 2.0 * double(n) / std::max(same->cpu, 1e-6) / 1e6);
    std::printf("  full comparison with alignment      %9.4f / %9.4f   %.2f M ops/s wall, %.2f M ops/s CPU "
                "(n ops per run; bisection skips the equal first half, the %" PRId64 " op pairs after "
                "the insertion at n/2 are aligned and compared one by one: %.2f M pairs/s CPU)\n",
                all->seconds, all->cpu, double(n) / all->seconds / 1e6, double(n) / all->cpu / 1e6, aligned,
                double(aligned) / all->cpu / 1e6);
    if (text_ok) {
      std::printf("  text: tdbg show --plain, both runs  %9.4f / %9.4f\n", dump_a.seconds + dump_b.seconds,
                  dump_a.cpu + dump_b.cpu);
      std::printf("  text: GNU diff of the two dumps     %9.4f / %9.4f\n", gnu.seconds, gnu.cpu);
      std::printf("  text approach total                 %9.4f / %9.4f   %.0fx the bisection, %.1fx the full comparison (CPU)\n",
                  text_wall, text_cpu, text_cpu / std::max(bis->cpu, 1e-6), text_cpu / std::max(all->cpu, 1e-6));
    } else {
      std::printf("  text approach: could not run %s show / diff\n", tdbg_exe.c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}
