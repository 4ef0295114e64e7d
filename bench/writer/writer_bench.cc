// Benchmark of the run-database writer: sustained op records per second and bytes per op on
// disk for a realistic mix, printed beside naive SQLite baselines measured in the same run.
// Usage: writer_bench [ops=1000000] [threads=1] [dir=$TMPDIR or /tmp]
//        writer_bench --replay RUN.sqlite   (the real mix: a recorded database written again,
//                                            then where its encoded bytes go, field by field)
#include <sqlite3.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>
#include <limits>

#include "tracer/reader.h"
#include "tracer/testing.h"
#include "tracer/writer.h"

namespace {

using namespace tdbg::tracer;
using tdbg::Status;
using Clock = std::chrono::steady_clock;

constexpr double kGoalOpsPerSecond = 1e6;
constexpr double kGoalBytesPerOp = 64;

double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

void remove_db(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((path + suffix).c_str());
}

struct Result {
  double ops_per_s = 0;
  double bytes_per_op = 0;
  double append_ns = 0;      // caller-side cost per op
  double cpu_ops_per_s = 0;  // ops per second of CPU time spent committing: the rate one
                             // free core sustains, whatever else loads the machine
};

// Ops are generated before timing starts so that only the writer is measured.
std::vector<std::vector<OpRecord>> make_ops(Writer& w, int64_t n, int threads, bool details) {
  std::vector<std::vector<OpRecord>> per_thread(static_cast<size_t>(threads));
  std::vector<testing::RealisticOps> gens;
  for (int t = 0; t < threads; ++t) gens.emplace_back(w, static_cast<uint32_t>(t), 42);
  for (int64_t seq = 0; seq < n; ++seq) {
    const size_t t = static_cast<size_t>(seq % threads);
    OpRecord op = gens[t].next(seq);
    if (!details) {
      op.tensors.clear();
      op.args.clear();
    }
    per_thread[t].push_back(std::move(op));
  }
  return per_thread;
}

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "writer_bench: %s\n", message.c_str());
  std::exit(1);
}

// Fields a replay can leave out, to measure what each costs in the encoded blocks.
enum Without : unsigned {
  kKeepAll = 0,
  kWithoutSummaries = 1u << 0,
  kWithoutHashes = 1u << 1,
  kWithoutArgs = 1u << 2,
  kWithoutStacks = 1u << 3,
  kWithoutTimes = 1u << 4,
  kWithoutProducers = 1u << 5,
};

void leave_out(unsigned without, OpRecord* op) {
  for (TensorRecord& t : op->tensors) {
    if (without & kWithoutSummaries) t.summary = {};
    if (without & kWithoutHashes) t.hash = 0;
    if (without & kWithoutProducers) t.producer = kNoSeq;
  }
  if (without & kWithoutArgs) op->args.clear();
  if (without & kWithoutStacks) op->stack = op->user_frame = 0;
  if (without & kWithoutTimes) op->start_ns = op->end_ns = 0;
}

// The ops of a recorded database, to be written again: the real mix of a real program. Its
// strings and frames are interned first, in id order, so the ops' ids stay valid.
std::vector<std::vector<OpRecord>> replay_ops(Writer& w, const std::string& source,
                                              unsigned without) {
  auto opened = Reader::Open(source);
  if (!opened.ok()) die(opened.status().message());
  const Reader& r = **opened;
  Status st = r.query("SELECT id, text FROM strings ORDER BY id", [&](auto& row) {
    if (w.intern(row[1]) != static_cast<StringId>(std::stoll(row[0]))) {
      die(source + ": strings are not numbered 1..n; cannot replay");
    }
    return true;
  });
  if (!st.ok()) die(st.message());
  st = r.query("SELECT id, parent, file, line, function FROM frames ORDER BY id", [&](auto& row) {
    auto num = [&](size_t i) { return row[i].empty() ? 0 : std::stoll(row[i]); };
    if (w.intern_frame(static_cast<FrameId>(num(1)), static_cast<StringId>(num(2)),
                       static_cast<int32_t>(num(3)), static_cast<StringId>(num(4))) !=
        static_cast<FrameId>(num(0))) {
      die(source + ": frames are not numbered 1..n; cannot replay");
    }
    return true;
  });
  if (!st.ok()) die(st.message());
  std::vector<std::vector<OpRecord>> per_thread(1);
  st = r.scan_ops(std::nullopt, 0, std::numeric_limits<int64_t>::max(), true,
                  [&](const OpRecord& op) {
                    per_thread[0].push_back(op);
                    leave_out(without, &per_thread[0].back());
                    return true;
                  });
  if (!st.ok()) die(st.message());
  return per_thread;
}

// Writes `n` ops of the synthetic realistic mix (`threads` appending threads), or with
// `replay` the ops of that recorded database, and measures the writer.
Result run_writer(const std::string& path, int64_t n, int threads, bool details,
                  const std::string& replay = "", unsigned without = kKeepAll) {
  remove_db(path);
  auto created = Writer::Create(path);
  if (!created.ok()) die(created.status().message());
  auto w = std::move(created).value();
  auto ops = replay.empty() ? make_ops(*w, n, threads, details) : replay_ops(*w, replay, without);
  if (!replay.empty()) {
    threads = 1;
    n = static_cast<int64_t>(ops[0].size());
  }
  if (!w->flush().ok()) std::exit(1);
  const auto t0 = Clock::now();
  std::vector<double> append_s(static_cast<size_t>(threads));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const auto a0 = Clock::now();
      for (OpRecord& op : ops[static_cast<size_t>(t)]) w->append_op(std::move(op));
      append_s[static_cast<size_t>(t)] = seconds_since(a0);
    });
  }
  for (auto& t : workers) t.join();
  Status st = w->flush();
  const double total = seconds_since(t0);
  Status closed = w->close();
  if (!st.ok() || !closed.ok()) {
    std::fprintf(stderr, "%s\n", (st.ok() ? closed : st).message().c_str());
    std::exit(1);
  }
  Result r;
  r.ops_per_s = static_cast<double>(n) / total;
  r.bytes_per_op = static_cast<double>(file_size(path)) / static_cast<double>(n);
  r.cpu_ops_per_s = static_cast<double>(n) / (static_cast<double>(w->stats().commit_cpu_us) * 1e-6);
  double worst = 0;
  for (double s : append_s) worst = std::max(worst, s);
  r.append_ns = worst * 1e9 / (static_cast<double>(n) / threads);
  return r;
}

void check(int rc, sqlite3* db, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    std::fprintf(stderr, "baseline: %s: %s\n", what, sqlite3_errmsg(db));
    std::exit(1);
  }
}

// Baseline: a row per op, per tensor and per argument, the layout a first version would use
// (and tdbg's own schema 1 did, more compactly): rowid tables, absolute values, an index per
// lookup path, written with prepared statements on the caller's thread, committing every
// `commit_every` ops (50,000: large transactions; 1: a transaction per op, no batching).
Result run_plain_schema(const std::string& path, int64_t n, int64_t commit_every) {
  remove_db(path);
  auto scratch = Writer::Create(path + ".ids");  // only to intern ids for the generator
  auto ops = make_ops(**scratch, n, 1, true);
  (void)(*scratch)->close();
  remove_db(path + ".ids");
  sqlite3* db = nullptr;
  check(sqlite3_open(path.c_str(), &db), db, "open");
  check(
      sqlite3_exec(db,
                   "PRAGMA page_size=8192; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                   "CREATE TABLE ops(seq INTEGER PRIMARY KEY, thread INT, tidx INT, parent INT,"
                   " depth INT, name INT, step INT, module INT, stack INT, user_frame INT,"
                   " fwd INT, region INT, start_ns INT, end_ns INT, chain INT, rng INT, flags INT);"
                   "CREATE INDEX ops_thread ON ops(thread, tidx);"
                   "CREATE TABLE tensors(op INT, role INT, idx INT, dtype INT, shape INT,"
                   " device INT, status INT, hash INT, producer INT, min REAL, max REAL,"
                   " sum REAL, abs_sum REAL, nan INT, inf INT, reason INT);"
                   "CREATE INDEX tensors_op ON tensors(op);"
                   "CREATE TABLE args(op INT, idx INT, name INT, value INT);"
                   "CREATE INDEX args_op ON args(op);",
                   nullptr, nullptr, nullptr),
      db, "schema");
  sqlite3_stmt *op_st, *t_st, *a_st;
  sqlite3_prepare_v2(db, "INSERT INTO ops VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &op_st,
                     nullptr);
  sqlite3_prepare_v2(db, "INSERT INTO tensors VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &t_st,
                     nullptr);
  sqlite3_prepare_v2(db, "INSERT INTO args VALUES(?,?,?,?)", -1, &a_st, nullptr);
  const auto t0 = Clock::now();
  const double cpu0 = thread_cpu_s();
  sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
  int64_t i = 0;
  for (const OpRecord& op : ops[0]) {
    const int64_t v[] = {op.seq,
                         op.thread,
                         op.tidx,
                         op.parent,
                         op.depth,
                         op.name,
                         op.step,
                         op.module,
                         op.stack,
                         op.user_frame,
                         op.fwd,
                         op.region,
                         op.start_ns,
                         op.end_ns,
                         static_cast<int64_t>(op.chain),
                         static_cast<int64_t>(op.rng),
                         op.flags};
    for (int c = 0; c < 17; ++c) sqlite3_bind_int64(op_st, c + 1, v[c]);
    check(sqlite3_step(op_st), db, "op");
    sqlite3_reset(op_st);
    for (const TensorRecord& t : op.tensors) {
      const int64_t tv[] = {op.seq,
                            static_cast<int64_t>(t.role),
                            t.index,
                            static_cast<int64_t>(t.dtype),
                            t.shape,
                            t.device,
                            static_cast<int64_t>(t.status),
                            static_cast<int64_t>(t.hash),
                            t.producer};
      for (int c = 0; c < 9; ++c) sqlite3_bind_int64(t_st, c + 1, tv[c]);
      sqlite3_bind_double(t_st, 10, t.summary.min);
      sqlite3_bind_double(t_st, 11, t.summary.max);
      sqlite3_bind_double(t_st, 12, t.summary.sum);
      sqlite3_bind_double(t_st, 13, t.summary.abs_sum);
      sqlite3_bind_int64(t_st, 14, t.summary.nan_count);
      sqlite3_bind_int64(t_st, 15, t.summary.inf_count);
      sqlite3_bind_int64(t_st, 16, t.reason);
      check(sqlite3_step(t_st), db, "tensor");
      sqlite3_reset(t_st);
    }
    for (const ArgRecord& a : op.args) {
      const int64_t av[] = {op.seq, a.index, a.name, a.value};
      for (int c = 0; c < 4; ++c) sqlite3_bind_int64(a_st, c + 1, av[c]);
      check(sqlite3_step(a_st), db, "arg");
      sqlite3_reset(a_st);
    }
    if (++i % commit_every == 0) {
      sqlite3_exec(db, "COMMIT; BEGIN", nullptr, nullptr, nullptr);
    }
  }
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  const double total = seconds_since(t0);
  const double cpu = thread_cpu_s() - cpu0;
  sqlite3_finalize(op_st);
  sqlite3_finalize(t_st);
  sqlite3_finalize(a_st);
  sqlite3_exec(db, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  Result r;
  r.ops_per_s = static_cast<double>(n) / total;
  r.cpu_ops_per_s = static_cast<double>(n) / cpu;
  r.bytes_per_op = static_cast<double>(file_size(path)) / static_cast<double>(n);
  return r;
}

// Encoded bytes per op of a database's op blocks, or -1.
double encoded_bytes_per_op(const std::string& path) {
  auto reader = Reader::Open(path);
  double bytes = -1;
  if (!reader.ok()) return bytes;
  (void)(*reader)->query("SELECT sum(length(ops)), sum(count) FROM op_blocks",
                         [&](const std::vector<std::string>& row) {
                           bytes = std::stod(row[0]) / std::stod(row[1]);
                           return false;
                         });
  return bytes;
}

// Bytes per op of each table and index, from SQLite's dbstat (when compiled in).
void print_table_sizes(const std::string& path, int64_t n) {
  auto reader = Reader::Open(path);
  if (!reader.ok()) return;
  std::printf("  per table (bytes/op):");
  Status st = (*reader)->query(
      "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 6",
      [&](const std::vector<std::string>& row) {
        std::printf(" %s %.1f", row[0].c_str(), std::stod(row[1]) / static_cast<double>(n));
        return true;
      });
  std::printf("%s\n", st.ok() ? "" : " (dbstat not available)");
  (void)(*reader)->query("SELECT sum(length(ops)), sum(count), count(*) FROM op_blocks",
                         [&](const std::vector<std::string>& row) {
                           std::printf("  encoded op blocks: %.1f bytes/op, %.0f ops/block\n",
                                       std::stod(row[0]) / std::stod(row[1]),
                                       std::stod(row[1]) / std::stod(row[2]));
                           return false;
                         });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--replay") {
    // The real mix: a recorded database written again through the writer.
    const char* tmp = getenv("TMPDIR");
    const std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/tdbg_writer_replay_" +
                             std::to_string(getpid()) + ".sqlite";
    const Result r = run_writer(path, 0, 1, true, argv[2]);
    auto reader = Reader::Open(path);
    const int64_t n = reader.ok() ? (*reader)->op_count() : 0;
    std::printf("writer_bench --replay %s: %lld ops of a real recording\n", argv[2],
                static_cast<long long>(n));
    print_table_sizes(path, n);
    remove_db(path);
    std::printf("  %.0f ops/s (wall), %.0f ops/s per core, %.1f bytes/op on disk\n",
                r.ops_per_s, r.cpu_ops_per_s, r.bytes_per_op);
    std::printf("ratios (>= 1 meets the goal): ops/s / 1e6 = %.2f (per core %.2f), "
                "64 B / bytes per op = %.2f\n",
                r.ops_per_s / kGoalOpsPerSecond, r.cpu_ops_per_s / kGoalOpsPerSecond,
                kGoalBytesPerOp / r.bytes_per_op);
    // Where the encoded bytes go: the same replay without one field at a time. Hashes are
    // measured with the summaries already left out: an input's summaries cost nothing when
    // its hash was stored earlier in the block, so without hashes they would cost more.
    auto encoded_without = [&](unsigned without) {
      (void)run_writer(path, 0, 1, true, argv[2], without);
      const double bytes = encoded_bytes_per_op(path);
      remove_db(path);
      return bytes;
    };
    const double all = encoded_without(kKeepAll);
    const double no_summaries = encoded_without(kWithoutSummaries);
    std::printf(
        "encoded bytes/op that each field takes (replayed without it): summaries %.1f "
        "hashes %.1f",
        all - no_summaries, no_summaries - encoded_without(kWithoutSummaries | kWithoutHashes));
    const std::pair<unsigned, const char*> fields[] = {{kWithoutProducers, "producers"},
                                                       {kWithoutArgs, "arguments"},
                                                       {kWithoutStacks, "stacks"},
                                                       {kWithoutTimes, "times"}};
    for (const auto& [without, name] : fields)
      std::printf(" %s %.1f", name, all - encoded_without(without));
    std::printf(" (of %.1f)\n", all);
    return 0;
  }
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 1000000;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  const char* tmp = getenv("TMPDIR");
  const std::string dir = argc > 3 ? argv[3] : (tmp && *tmp ? tmp : "/tmp");
  const std::string path = dir + "/tdbg_writer_bench_" + std::to_string(getpid()) + ".sqlite";
  const int64_t naive_n = std::max<int64_t>(1000, n / 50);

  std::printf(
      "writer_bench: %lld ops, %d appending thread(s), realistic mix (per op 2 inputs,\n"
      "mostly known; 1 float32 output with summaries; an argument on 30%% of ops)\n\n",
      static_cast<long long>(n), threads);
  const Result full = run_writer(path, n, threads, true);
  print_table_sizes(path, n);
  remove_db(path);
  const Result bare = run_writer(path, n, threads, false);
  print_table_sizes(path, n);
  remove_db(path);
  const Result plain = run_plain_schema(path, n, 50000);
  remove_db(path);
  const Result per_op = run_plain_schema(path, naive_n, 1);
  remove_db(path);

  std::printf("\n%-48s %10s %14s %9s %12s\n", "", "ops/s", "ops/s per core", "bytes/op",
              "append ns/op");
  auto row = [](const char* name, const Result& r, bool size, bool append) {
    std::printf("%-48s %10.0f %14.0f ", name, r.ops_per_s, r.cpu_ops_per_s);
    if (size) {
      std::printf("%9.1f ", r.bytes_per_op);
    } else {
      std::printf("%9s ", "-");
    }
    if (append) {
      std::printf("%12.0f\n", r.append_ns);
    } else {
      std::printf("%12s\n", "(inline)");
    }
  };
  row("tdbg Writer, ops with tensors and args", full, true, true);
  row("tdbg Writer, ops only", bare, true, true);
  row("baseline: plain rowid schema + indexes, batched", plain, true, false);
  row("baseline: plain schema, 1 transaction per op", per_op, false, false);
  std::printf(
      "\n(ops/s: wall clock, append to durable, on this machine as loaded now; ops/s per\n"
      "core: ops per CPU-second of the committing thread, what one free core sustains)\n");
  std::printf("\nratios (>= 1 meets the goal):\n");
  std::printf("  full mix: ops/s / 1e6 goal             = %.2f (per core %.2f)\n",
              full.ops_per_s / kGoalOpsPerSecond, full.cpu_ops_per_s / kGoalOpsPerSecond);
  std::printf("  ops only: ops/s / 1e6 goal             = %.2f (per core %.2f)\n",
              bare.ops_per_s / kGoalOpsPerSecond, bare.cpu_ops_per_s / kGoalOpsPerSecond);
  std::printf("  ops only: 64 B goal / bytes per op     = %.2f\n",
              kGoalBytesPerOp / bare.bytes_per_op);
  std::printf("  full mix: 64 B goal / bytes per op     = %.2f\n",
              kGoalBytesPerOp / full.bytes_per_op);
  std::printf("  tdbg Writer vs plain schema: %.2fx the ops/s per core, %.2fx smaller\n",
              full.cpu_ops_per_s / plain.cpu_ops_per_s, plain.bytes_per_op / full.bytes_per_op);
  std::printf("  tdbg Writer vs 1 transaction per op: %.1fx the ops/s (wall), %.1fx per core\n",
              full.ops_per_s / per_op.ops_per_s, full.cpu_ops_per_s / per_op.cpu_ops_per_s);
  return 0;
}
