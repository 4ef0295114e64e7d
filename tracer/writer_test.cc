// Tests of the run-database writer through the reader: every field round trips, interning,
// concurrent appends, ring mode, a live reader, and errors.
#include "tracer/writer.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "tracer/db_fds.h"
#include "tracer/reader.h"
#include "tracer/record_checks.h"
#include "tracer/test_dir.h"
#include "tracer/testing.h"

namespace tdbg::tracer {
namespace {

using testing::CheckSameOp;
using testing::TempDir;

std::unique_ptr<Writer> MustCreate(const std::string& path, WriterOptions options = {}) {
  auto w = Writer::Create(path, options);
  INFO(w.status().message());
  REQUIRE(w.ok());
  return std::move(w).value();
}

std::unique_ptr<Reader> MustOpen(const std::string& path) {
  auto r = Reader::Open(path);
  INFO(r.status().message());
  REQUIRE(r.ok());
  return std::move(r).value();
}

// The OS threads of this process (ids of /proc/self/task).
std::set<std::string> process_threads() {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task"))
    out.insert(e.path().filename().string());
  return out;
}

TEST_CASE("the writer's thread takes no signal sent to the process") {
  // A SIGTERM that lands on the writer, whose handler (torch's, in a DataLoader worker) calls
  // _exit, would wait for a close that needs the writer itself.
  TempDir dir;
  const std::set<std::string> before = process_threads();
  auto w = MustCreate(dir.file("s.sqlite"));
  std::vector<std::string> started;
  for (const std::string& tid : process_threads())
    if (!before.count(tid)) started.push_back(tid);
  REQUIRE(started.size() == 1);
  std::ifstream status("/proc/self/task/" + started[0] + "/status");
  std::string line, blocked;
  while (std::getline(status, line))
    if (line.rfind("SigBlk:", 0) == 0) blocked = line.substr(7);
  const unsigned long long mask = std::stoull(blocked, nullptr, 16);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGALRM, SIGCHLD}) {
    INFO("signal " << sig << ", SigBlk " << blocked);
    CHECK((mask >> (sig - 1)) & 1);
  }
  REQUIRE(w->close().ok());
}

TEST_CASE("every field round trips") {
  TempDir dir;
  const std::string path = dir.file("p.sqlite");
  auto w = MustCreate(path);
  const StringId addmm = w->intern("aten::addmm");
  const StringId shape = w->intern("2x3");
  const StringId cpu = w->intern("cpu");
  const StringId cuda = w->intern("cuda:1");
  const StringId why = w->intern("sparse tensor");
  const StringId mod = w->intern("model.fc");
  const StringId file = w->intern("train.py");
  const StringId fn = w->intern("main");
  const StringId alpha = w->intern("alpha");
  const StringId half = w->intern("0.5");
  const FrameId outer = w->intern_frame(0, file, 10, fn);
  const FrameId inner = w->intern_frame(outer, file, -3, alpha);  // odd values on purpose
  w->set_meta("pid", "4242");
  w->set_meta("cmdline", "[\"python\", \"train.py\"]");
  w->set_meta("pid", "4243");  // the last value wins
  w->add_thread(ThreadRecord{0, 777, "MainThread"});
  w->add_thread(ThreadRecord{5, 778, "autograd"});

  std::vector<OpRecord> ops;
  for (int i = 0; i < 6; ++i) {
    OpRecord op;
    op.seq = i;
    op.thread = i < 4 ? 0 : 5;
    op.tidx = i < 4 ? i : i - 4;
    op.parent = i == 0 ? kNoSeq : i - 1;
    op.depth = static_cast<uint16_t>(i);
    op.name = addmm;
    op.step = 1000000007LL * i;
    op.module = i % 2 ? mod : 0;
    op.stack = inner;
    op.user_frame = outer;
    op.fwd = i == 5 ? 1 : kNoSeq;
    op.region = static_cast<uint32_t>(i);
    op.start_ns = 5000000000000LL + i * 100;
    op.end_ns = op.start_ns + 99 * i;
    op.chain = 0xFEDCBA9876543210ull + static_cast<uint64_t>(i);  // high bit set
    op.rng = i == 2 ? 0x8000000000000001ull : 0;
    op.flags = kOpBackward | kOpRandom | kOpInplace | kOpCollective | kOpUninitOutput;
    TensorRecord in;
    in.role = TensorRole::kInput;
    in.index = 1;
    in.dtype = hashing::DType::kBFloat16;
    in.shape = shape;
    in.device = cuda;
    in.status = TensorStatus::kKnown;
    in.hash = ~0ull;
    in.producer = i == 0 ? kNoSeq : 0;
    TensorRecord out;
    out.role = TensorRole::kOutput;
    out.index = 0;
    out.dtype = hashing::DType::kFloat64;
    out.shape = 0;  // 0-dim
    out.device = cpu;
    out.status = TensorStatus::kHashed;
    out.hash = 0x0123456789ABCDEFull;
    out.summary.valid = true;
    out.summary.min = -std::numeric_limits<double>::max();
    out.summary.max = 1e-300;
    out.summary.sum = 3.0;  // integral: SQLite may store it as an integer; must read back the same
    out.summary.abs_sum = 0.1;
    out.summary.nan_count = 7;
    out.summary.inf_count = 1LL << 40;
    TensorRecord nh;
    nh.role = TensorRole::kInput;
    nh.index = 0;
    nh.dtype = hashing::DType::kQInt8;
    nh.status = TensorStatus::kNotHashed;
    nh.reason = why;
    op.tensors = {out, in, nh};  // written out of order; read back sorted
    if (i % 2 == 0) op.args = {ArgRecord{0, alpha, half}, ArgRecord{3, 0, half}};
    ops.push_back(op);
  }
  // Appended children first, as the interposer does when a parent op ends last.
  for (int i = 5; i >= 0; --i) w->append_op(OpRecord(ops[static_cast<size_t>(i)]));
  w->append_region(RegionRecord{1, 0, mod, RegionKind::kModule, 1, 3, 2, 0});
  w->append_region(RegionRecord{2, 5, alpha, RegionKind::kStep, 4, kNoSeq, 0, 1});
  w->append_module(
      ModuleRecord{1, w->intern("cubin"), w->intern("kernels.cubin"), ~1ull, 123456, 99});
  w->append_kernel(
      KernelRecord{2, 1, addmm, w->intern("1,2,3"), w->intern("32,1,1"), 48, ~0ull, 10, 20});
  w->append_kernel(KernelRecord{kNoSeq, 0, addmm, 0, 0, 0, 0, 1, 2});
  REQUIRE(w->close().ok());
  CHECK(w->close().ok());  // idempotent

  auto r = MustOpen(path);
  CHECK(r->schema_version() == kSchemaVersion);
  CHECK(r->meta("format") == "tdbg-run");
  CHECK(r->meta("pid") == "4243");
  CHECK(r->meta("cmdline") == "[\"python\", \"train.py\"]");
  CHECK(r->meta("no such key").empty());
  CHECK(r->string(addmm) == "aten::addmm");
  CHECK(r->string(0).empty());
  CHECK(r->string(99999).empty());
  auto threads = r->threads();
  REQUIRE(threads.size() == 2);
  CHECK(threads[0].id == 0);
  CHECK(threads[0].os_tid == 777);
  CHECK(threads[1].name == "autograd");
  CHECK(r->op_count() == 6);
  CHECK(r->op_count(0) == 4);
  CHECK(r->op_count(5) == 2);

  for (const OpRecord& want : ops) {
    auto by_seq = r->op(want.seq);
    REQUIRE(by_seq);
    CheckSameOp(want, *by_seq);
    auto by_key = r->op_at(want.thread, want.tidx);
    REQUIRE(by_key);
    CheckSameOp(want, *by_key);
    CHECK(r->chain_at(want.thread, want.tidx) == want.chain);
  }
  CHECK_FALSE(r->op(6));
  CHECK_FALSE(r->op(-1));
  CHECK_FALSE(r->op_at(0, 4));
  CHECK_FALSE(r->chain_at(3, 0));

  std::vector<int64_t> seen;
  REQUIRE(r->scan_ops(std::nullopt, 0, 100, true, [&](const OpRecord& op) {
             CheckSameOp(ops[static_cast<size_t>(op.seq)], op);
             seen.push_back(op.seq);
             return true;
           }).ok());
  CHECK(seen == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  seen.clear();
  REQUIRE(r->scan_ops(0, 1, 3, false, [&](const OpRecord& op) {
             CheckSameOp(ops[static_cast<size_t>(op.seq)], op, /*with_details=*/false);
             seen.push_back(op.seq);
             return true;
           }).ok());
  CHECK(seen == std::vector<int64_t>{1, 2});

  auto frame = r->frame(inner);
  REQUIRE(frame);
  CHECK(frame->parent == outer);
  CHECK(frame->line == -3);
  CHECK(frame->function == alpha);
  auto stack = r->stack(inner);
  REQUIRE(stack.size() == 2);
  CHECK(stack[0].id == outer);
  CHECK(stack[0].file == file);
  CHECK(stack[1].id == inner);
  CHECK_FALSE(r->frame(0));

  auto regions = r->regions();
  REQUIRE(regions.size() == 2);
  CHECK(regions[0].kind == RegionKind::kModule);
  CHECK(regions[0].end_seq == 3);
  CHECK(regions[0].step == 2);
  CHECK(regions[1].end_seq == kNoSeq);
  CHECK(regions[1].thread == 5);
  CHECK(regions[1].parent == 1);
  auto modules = r->modules();
  REQUIRE(modules.size() == 1);
  CHECK(modules[0].hash == ~1ull);
  CHECK(modules[0].size == 123456);
  CHECK(r->string(modules[0].kind) == "cubin");
  auto kernels = r->kernels();
  REQUIRE(kernels.size() == 2);
  CHECK(kernels[0].stream == ~0ull);
  CHECK(kernels[0].shared_mem == 48);
  CHECK(r->string(kernels[0].grid) == "1,2,3");
  CHECK(kernels[1].op == kNoSeq);
  CHECK(r->kernels(2).size() == 1);
  CHECK(r->kernels(3).empty());

  // The views decode the stored differences for hand-written queries.
  std::vector<std::vector<std::string>> rows;
  REQUIRE(r->query("SELECT seq, parent, name, fwd, chain, end_ns - start_ns FROM op_view "
                   "WHERE thread = 5 ORDER BY seq",
                   [&](const std::vector<std::string>& row) {
                     rows.push_back(row);
                     return true;
                   })
              .ok());
  REQUIRE(rows.size() == 2);
  CHECK(rows[1] ==
        std::vector<std::string>{"5", "4", "aten::addmm", "1", "fedcba9876543215", "495"});
  rows.clear();
  REQUIRE(r->query("SELECT role, dtype, shape, status, hash, reason FROM tensor_view WHERE op = 1",
                   [&](const std::vector<std::string>& row) {
                     rows.push_back(row);
                     return true;
                   })
              .ok());
  REQUIRE(rows.size() == 3);
  CHECK(rows[0] ==
        std::vector<std::string>{"input", "qint8", "", "not_hashed", "", "sparse tensor"});
  CHECK(rows[1] ==
        std::vector<std::string>{"input", "bfloat16", "2x3", "known", "ffffffffffffffff", ""});
  CHECK(rows[2] ==
        std::vector<std::string>{"output", "float64", "", "hashed", "0123456789abcdef", ""});
  auto bad = r->query("DELETE FROM ops", [](auto&) { return true; });
  CHECK_FALSE(bad.ok());
}

TEST_CASE("the enums table names tensor statuses as the tools do") {
  TempDir dir;
  const std::string path = dir.path() + "/enums.sqlite";
  auto w = MustCreate(path);
  REQUIRE(w->close().ok());
  auto r = MustOpen(path);
  int rows = 0;
  REQUIRE(r->query("SELECT value, name FROM enums WHERE kind = 'status' ORDER BY value",
                   [&](const std::vector<std::string>& row) {
                     auto status = static_cast<TensorStatus>(std::stoi(row[0]));
                     CHECK(row[1] == tensor_status_name(status));
                     ++rows;
                     return true;
                   })
              .ok());
  CHECK(rows == static_cast<int>(TensorStatus::kSkipped) + 1);
}

TEST_CASE("interning gives one id per value, from any thread") {
  TempDir dir;
  auto w = MustCreate(dir.file("i.sqlite"));
  CHECK(w->intern("") == 0);
  const StringId a = w->intern("a");
  CHECK(a != 0);
  CHECK(w->intern("a") == a);
  CHECK(w->intern("b") != a);
  CHECK(w->intern(std::string("a\0b", 3)) != a);  // embedded NUL is part of the text
  std::vector<std::thread> threads;
  std::vector<std::vector<StringId>> ids(4);
  std::vector<std::vector<FrameId>> frames(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        StringId s = w->intern("s" + std::to_string(i));
        ids[static_cast<size_t>(t)].push_back(s);
        frames[static_cast<size_t>(t)].push_back(w->intern_frame(0, s, i, s));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 1; t < 4; ++t) {
    CHECK(ids[static_cast<size_t>(t)] == ids[0]);
    CHECK(frames[static_cast<size_t>(t)] == frames[0]);
  }
  CHECK(std::set<StringId>(ids[0].begin(), ids[0].end()).size() == 2000);
  CHECK(w->intern_frame(0, ids[0][5], 5, ids[0][5]) == frames[0][5]);
  CHECK(w->intern_frame(0, ids[0][5], 6, ids[0][5]) != frames[0][5]);
  REQUIRE(w->close().ok());
  auto r = MustOpen(dir.file("i.sqlite"));
  for (int i = 0; i < 2000; i += 97) {
    CHECK(r->string(ids[0][static_cast<size_t>(i)]) == "s" + std::to_string(i));
    auto f = r->frame(frames[0][static_cast<size_t>(i)]);
    REQUIRE(f);
    CHECK(f->line == i);
  }
  CHECK(r->string(a) == "a");
}

// Appends `per_thread` ops from each of `threads` threads with seq from a shared counter,
// the way the interposer numbers ops.
// Catch2 assertions are not thread-safe: workers report through `flush_failed`.
void AppendConcurrently(Writer& w, int threads, int per_thread, bool flush_while_appending) {
  std::atomic<bool> flush_failed{false};
  std::atomic<int64_t> next_seq{0};
  std::mutex seq_mu;
  std::vector<std::thread> workers;
  const StringId name = w.intern("op");
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      uint64_t chain = 0;
      for (int i = 0; i < per_thread; ++i) {
        OpRecord op;
        {
          // seq and tidx are taken together, so seq grows with tidx in every thread.
          std::lock_guard<std::mutex> lock(seq_mu);
          op.seq = next_seq++;
        }
        op.thread = static_cast<uint32_t>(t);
        op.tidx = i;
        op.name = name;
        chain = testing::SyntheticChain(chain, "op", static_cast<uint64_t>(i));
        op.chain = chain;
        TensorRecord out;
        out.hash = static_cast<uint64_t>(op.seq) * 31;
        op.tensors.push_back(out);
        w.append_op(std::move(op));
        if (flush_while_appending && i % 5000 == 0 && !w.flush().ok()) flush_failed = true;
      }
    });
  }
  for (auto& t : workers) t.join();
  CHECK_FALSE(flush_failed.load());
}

TEST_CASE("concurrent appends keep each thread's order") {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  auto w = MustCreate(path, WriterOptions{5, 0});
  const int kThreads = 4, kPerThread = 20000;
  w->set_meta("k", "v");
  AppendConcurrently(*w, kThreads, kPerThread, true);
  // Every record appended before a flush is counted as committed once it returns.
  CHECK(w->appended() == kThreads * kPerThread + 1);
  REQUIRE(w->flush().ok());
  CHECK(w->committed_through() == w->appended());
  REQUIRE(w->close().ok());
  CHECK(w->stats().ops_committed == kThreads * kPerThread);
  auto r = MustOpen(path);
  CHECK(r->op_count() == kThreads * kPerThread);
  for (uint32_t t = 0; t < kThreads; ++t) {
    int64_t expect_tidx = 0, last_seq = -1;
    uint64_t chain = 0;
    REQUIRE(r->scan_ops(t, 0, std::numeric_limits<int64_t>::max(), true, [&](const OpRecord& op) {
               CHECK(op.tidx == expect_tidx);
               CHECK(op.seq > last_seq);
               chain = testing::SyntheticChain(chain, "op", static_cast<uint64_t>(op.tidx));
               CHECK(op.chain == chain);
               REQUIRE(op.tensors.size() == 1);
               CHECK(op.tensors[0].hash == static_cast<uint64_t>(op.seq) * 31);
               ++expect_tidx;
               last_seq = op.seq;
               return true;
             }).ok());
    CHECK(expect_tidx == kPerThread);
  }
  // All threads in seq order: exactly 0..N-1.
  int64_t expect = 0;
  REQUIRE(r->scan_ops(std::nullopt, 0, std::numeric_limits<int64_t>::max(), false,
                      [&](const OpRecord& op) {
                        CHECK(op.seq == expect);
                        ++expect;
                        return true;
                      })
              .ok());
  CHECK(expect == kThreads * kPerThread);
  // A seq range, and stopping early.
  std::vector<int64_t> got;
  REQUIRE(r->scan_ops(std::nullopt, 1000, 1010, false, [&](const OpRecord& op) {
             got.push_back(op.seq);
             return got.size() < 5;
           }).ok());
  CHECK(got == std::vector<int64_t>{1000, 1001, 1002, 1003, 1004});
  // Point lookups by seq in a multi-thread database (binary search per thread).
  for (int64_t seq : {0, 1, 12345, 79999, 40000}) {
    auto op = r->op(seq);
    REQUIRE(op);
    CHECK(op->seq == seq);
    CHECK(r->op_at(op->thread, op->tidx)->seq == seq);
  }
}

TEST_CASE("append_ops copies reused records exactly, whatever they held before") {
  // A recorder reuses its records (and their vectors' capacity) from op to op; the writer's
  // own slots are reused across commits. Ops with many tensors followed by ops with few must
  // not keep stale tensors or args on either side.
  TempDir dir;
  const std::string path = dir.file("reuse.sqlite");
  auto w = MustCreate(path, WriterOptions{1, 0});
  const StringId name = w->intern("aten::op");
  std::vector<OpRecord> batch(3);
  std::vector<OpRecord> expected;
  int64_t seq = 0;
  for (int round = 0; round < 3000; ++round) {
    const size_t n = 1 + round % 3;
    for (size_t k = 0; k < n; ++k) {
      OpRecord& op = batch[k];
      op.tensors.clear();
      op.args.clear();
      op.seq = op.tidx = seq;
      op.name = name;
      op.chain = static_cast<uint64_t>(seq) * 7;
      const int tensors = static_cast<int>((seq * 5) % 9);  // 0..8, up and down
      for (int t = 0; t < tensors; ++t) {
        TensorRecord rec;
        const bool input = t < tensors / 2;  // inputs first, as the reader orders them
        rec.role = input ? TensorRole::kInput : TensorRole::kOutput;
        rec.index = static_cast<uint16_t>(input ? t : t - tensors / 2);
        rec.status = TensorStatus::kSkipped;
        op.tensors.push_back(rec);
      }
      for (int a = 0; a < (seq % 4); ++a) op.args.push_back(ArgRecord{uint16_t(a), name, name});
      expected.push_back(op);
      ++seq;
    }
    w->append_ops(batch.data(), n);
    // The caller's records are left as they were.
    CHECK(batch[n - 1].seq == seq - 1);
    CHECK(batch[n - 1].tensors.size() == static_cast<size_t>(((seq - 1) * 5) % 9));
    if (round % 500 == 0) REQUIRE(w->flush().ok());  // commits, so chunks are recycled
  }
  REQUIRE(w->close().ok());
  auto r = MustOpen(path);
  REQUIRE(r->op_count() == seq);
  size_t i = 0;
  REQUIRE(r->scan_ops(0, 0, std::numeric_limits<int64_t>::max(), true, [&](const OpRecord& op) {
             CheckSameOp(op, expected[i++]);
             return true;
           }).ok());
  CHECK(i == expected.size());
}

TEST_CASE("ring mode keeps the last N ops with their details") {
  TempDir dir;
  const std::string path = dir.file("r.sqlite");
  auto w = MustCreate(path, WriterOptions{5, 1000});
  testing::RealisticOps gen0(*w, 0, 1), gen1(*w, 1, 1);
  // A region per 100 ops (a step, a record_function range), inside one that stays open.
  w->append_region(RegionRecord{1, 0, 0, RegionKind::kUser, 0, kNoSeq, 0, 0});
  for (int64_t seq = 0; seq < 20000; ++seq) {
    w->append_op(seq % 4 == 3 ? gen1.next(seq) : gen0.next(seq));
    if (seq % 100 == 99)
      w->append_region(RegionRecord{static_cast<uint32_t>(2 + seq / 100), 0, 0, RegionKind::kUser,
                                    seq - 99, seq, seq / 100, 1});
    if (seq % 700 == 0) REQUIRE(w->flush().ok());
  }
  REQUIRE(w->close().ok());
  auto r = MustOpen(path);
  CHECK(r->op_count() == 1000);
  // The regions of the ops held, and the open one: not the 200 the run had.
  const std::vector<RegionRecord> regions = r->regions();
  CHECK(regions.size() <= 1 + 1000 / 100 + 8);
  CHECK(std::any_of(regions.begin(), regions.end(), [](const RegionRecord& x) { return x.id == 1; }));
  CHECK(std::any_of(regions.begin(), regions.end(), [](const RegionRecord& x) { return x.end_seq == 19999; }));
  int64_t expect = 19000;
  REQUIRE(r->scan_ops(std::nullopt, 0, std::numeric_limits<int64_t>::max(), true,
                      [&](const OpRecord& op) {
                        CHECK(op.seq == expect);
                        CHECK(op.tensors.size() == 3);
                        ++expect;
                        return true;
                      })
              .ok());
  CHECK(expect == 20000);
  int64_t orphans = -1;
  REQUIRE(r->query("SELECT (SELECT count(*) FROM tensor_view WHERE op < 19000) + "
                   "(SELECT count(*) FROM arg_view WHERE op < 19000)",
                   [&](auto& row) {
                     orphans = std::stoll(row[0]);
                     return true;
                   })
              .ok());
  CHECK(orphans == 0);
}

TEST_CASE("ring mode bounds the -wal file, not only the database") {
  // A ring is for long runs on little disk: every commit appends to the -wal file until a
  // checkpoint, so that must come often enough to keep it small while recording.
  TempDir dir;
  const std::string path = dir.file("w.sqlite");
  auto w = MustCreate(path, WriterOptions{5, 1000});
  testing::RealisticOps gen(*w, 0, 1);
  std::error_code ec;
  uintmax_t largest = 0;
  for (int64_t seq = 0; seq < 300000; ++seq) {
    w->append_op(gen.next(seq));
    if (seq % 2000 == 1999) {
      REQUIRE(w->flush().ok());
      largest = std::max<uintmax_t>(largest, std::filesystem::file_size(path + "-wal", ec));
    }
  }
  REQUIRE(w->close().ok());
  INFO("largest -wal file: " << largest << " bytes");
  CHECK(largest > 0);
  CHECK(largest < (12u << 20));
}

TEST_CASE("a reader sees committed ops while the writer is live") {
  TempDir dir;
  const std::string path = dir.file("live.sqlite");
  auto w = MustCreate(path);
  testing::RealisticOps gen(*w, 0, 3);
  for (int64_t seq = 0; seq < 100; ++seq) w->append_op(gen.next(seq));
  REQUIRE(w->flush().ok());
  auto r = MustOpen(path);
  CHECK(r->op_count() == 100);
  for (int64_t seq = 100; seq < 300; ++seq) w->append_op(gen.next(seq));
  REQUIRE(w->flush().ok());
  CHECK(r->op_count() == 300);  // a live database is not cached
  auto last = r->op(299);
  REQUIRE(last);
  CHECK(last->tensors.size() == 3);
  REQUIRE(w->close().ok());
  CHECK(MustOpen(path)->op_count() == 300);
}

// The descriptors this process holds on `path`, found in /proc/self/fd.
std::vector<int> DescriptorsOn(const std::string& path) {
  std::vector<int> fds;
  const std::string real = std::filesystem::canonical(path).string();
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (!ec && target.string() == real) fds.push_back(std::stoi(entry.path().filename().string()));
  }
  return fds;
}

TEST_CASE("the database's descriptors sit high, out of reach of a program's dup2") {
  const int floor = HighDescriptorFloor();
  if (floor == 0) {
    WARN("SKIPPED: the descriptor limit is too low for a high place");
    return;
  }
  TempDir dir;
  const std::string path = dir.file("high.sqlite");
  auto w = MustCreate(path);
  testing::RealisticOps gen(*w, 0, 3);
  for (int64_t seq = 0; seq < 100; ++seq) w->append_op(gen.next(seq));
  REQUIRE(w->flush().ok());
  for (const std::string& file : {path, path + "-wal", path + "-shm"}) {
    const auto fds = DescriptorsOn(file);
    INFO(file);
    REQUIRE(!fds.empty());
    for (int fd : fds) CHECK(fd >= floor);
  }
  // The process's own SQLite files keep the numbers open() gives them.
  const std::string own = dir.file("own.sqlite");
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(own.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "create table t(x)", nullptr, nullptr, nullptr) == SQLITE_OK);
  const auto own_fds = DescriptorsOn(own);
  REQUIRE(own_fds.size() == 1);
  CHECK(own_fds[0] < floor);
  sqlite3_close(db);
  REQUIRE(w->close().ok());
  CHECK(MustOpen(path)->op_count() == 100);
}

TEST_CASE("a descriptor of the database closed or replaced by the program stops the writes there") {
  // The program (this test) puts a file of its own on the database's descriptor, as dup2 or a
  // direct close and a new open do: nothing more goes into SQLite, so the program's file keeps
  // what it holds, and what was committed reads with the loss noted beside it.
  TempDir dir;
  const std::string path = dir.file("replaced.sqlite");
  auto w = MustCreate(path);
  testing::RealisticOps gen(*w, 0, 3);
  for (int64_t seq = 0; seq < 100; ++seq) w->append_op(gen.next(seq));
  REQUIRE(w->flush().ok());
  CHECK(DatabaseDescriptorsLost(path).empty());
  const auto fds = DescriptorsOn(path);
  REQUIRE(fds.size() == 1);
  const std::string mine = dir.file("mine.txt");
  { std::ofstream(mine) << "mine\n"; }
  const int own = ::open(mine.c_str(), O_RDWR);
  REQUIRE(own >= 0);
  REQUIRE(::dup2(own, fds[0]) == fds[0]);
  ::close(own);
  CHECK(DatabaseDescriptorsLost(path).find("descriptor " + std::to_string(fds[0]) +
                                           " (the database") != std::string::npos);
  for (int64_t seq = 100; seq < 300; ++seq) w->append_op(gen.next(seq));
  const Status flushed = w->flush();
  CHECK(flushed.message().find("recording stopped at seq 100") != std::string::npos);
  const Status closed = w->close();
  CHECK(!closed.ok());
  std::ifstream back(mine);
  std::string text((std::istreambuf_iterator<char>(back)), std::istreambuf_iterator<char>());
  CHECK(text == "mine\n");
  ::close(fds[0]);
  auto r = MustOpen(path);
  CHECK(r->op_count() == 100);
  const auto lost = nlohmann::json::parse(r->meta("recording_lost"));
  CHECK(lost["first_seq"] == 100);
  CHECK(lost["ops"] == 200);
}

TEST_CASE("write errors are reported, other records survive") {
  TempDir dir;
  const std::string path = dir.file("e.sqlite");
  CHECK_FALSE(Writer::Create(dir.file("no/such/dir.sqlite")).ok());
  auto w = MustCreate(path);
  auto again = Writer::Create(path);
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().message() == path + ": already exists");
  OpRecord op;
  op.seq = 0;
  w->append_op(OpRecord(op));
  w->append_op(OpRecord(op));  // same (thread, tidx): a caller bug
  op.seq = 1;
  op.tidx = 1;
  w->append_op(OpRecord(op));
  Status st = w->flush();
  CHECK_FALSE(st.ok());
  CHECK(st.message().find(path) == 0);
  CHECK(st.message().find('\n') == std::string::npos);
  CHECK(w->stats().errors == 1);
  CHECK_FALSE(w->close().ok());
  CHECK(MustOpen(path)->op_count() == 2);
}

TEST_CASE("a full disk stops the recording at a point, and the database says where") {
  // A file size limit stands for the full disk: writes past it fail (EFBIG; SIGXFSZ ignored).
  TempDir dir;
  const std::string path = dir.file("full.sqlite");
  auto w = MustCreate(path, WriterOptions{5, 0});
  // Room taken now, for the commits that say what was lost once the disk is full.
  CHECK(std::filesystem::exists(path + "-reserve"));
  testing::RealisticOps gen(*w, 0, 1);
  struct sigaction ignore {}, old_action {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &ignore, &old_action);
  struct rlimit old_limit {};
  getrlimit(RLIMIT_FSIZE, &old_limit);
  struct rlimit limit = old_limit;
  int64_t seq = 0;
  for (; seq < 2000; ++seq) w->append_op(gen.next(seq));
  REQUIRE(w->flush().ok());
  limit.rlim_cur = 2u << 20;  // the -wal file stops growing at 2 MiB
  setrlimit(RLIMIT_FSIZE, &limit);
  Status st = Status::Ok();
  for (; seq < 200000 && st.ok(); ++seq) {
    w->append_op(gen.next(seq));
    if (seq % 1000 == 999) st = w->flush();
  }
  const int64_t failed_by = seq;
  // Space again (files deleted elsewhere): later ops must not be written after the hole.
  setrlimit(RLIMIT_FSIZE, &old_limit);
  for (int k = 0; k < 3000; ++k, ++seq) w->append_op(gen.next(seq));
  sigaction(SIGXFSZ, &old_action, nullptr);
  REQUIRE_FALSE(st.ok());
  Status closed = w->close();
  CHECK(closed.message().find(": recording stopped at seq ") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(path + "-reserve"));

  auto r = MustOpen(path);
  const nlohmann::json lost = nlohmann::json::parse(r->meta("recording_lost"));
  const int64_t first = lost["first_seq"];
  CHECK(first >= 2000);
  CHECK(first < failed_by);
  // The note beside the database, written at the failed commits, says what meta says.
  std::ifstream note(path + "-lost");
  std::string note_text;
  REQUIRE(std::getline(note, note_text));
  CHECK(nlohmann::json::parse(note_text)["ops"] == lost["ops"]);
  CHECK(lost["ops"] == seq - first);
  CHECK(lost["error"].get<std::string>().find("cannot ") == 0);
  // Every op up to the loss, in order, and none after it.
  CHECK(r->op_count() == first);
  int64_t expect = 0;
  REQUIRE(r->scan_ops(std::nullopt, 0, std::numeric_limits<int64_t>::max(), false,
                      [&](const OpRecord& op) {
                        CHECK(op.seq == expect++);
                        return true;
                      })
              .ok());
  CHECK(expect == first);
}

TEST_CASE("synthetic runs for other folders' tests") {
  TempDir dir;
  testing::SyntheticRun run;
  run.ops = 5000;
  run.threads = 2;
  run.name = [](int64_t seq) {
    return seq % 2 ? std::string("aten::mul") : std::string("aten::add");
  };
  run.output_hash = [](int64_t seq) { return static_cast<uint64_t>(seq) * 3; };
  run.meta = {{"pid", "7"}};
  REQUIRE(testing::WriteSyntheticRun(dir.file("a.sqlite"), run).ok());
  run.output_hash = [](int64_t seq) { return static_cast<uint64_t>(seq) * 3 + (seq >= 4000); };
  REQUIRE(testing::WriteSyntheticRun(dir.file("b.sqlite"), run).ok());
  auto a = MustOpen(dir.file("a.sqlite"));
  auto b = MustOpen(dir.file("b.sqlite"));
  CHECK(a->meta("pid") == "7");
  CHECK(a->op_count() == 5000);
  auto op = a->op(4001);
  REQUIRE(op);
  CHECK(a->string(op->name) == "aten::mul");
  CHECK(op->tensors.back().hash == 12003);
  // Chains agree before seq 4000 and differ from it on, in both threads.
  CHECK(a->chain_at(0, 1999) == b->chain_at(0, 1999));
  CHECK(a->chain_at(0, 2000) != b->chain_at(0, 2000));
  CHECK(a->chain_at(1, 1999) == b->chain_at(1, 1999));
  CHECK(a->chain_at(1, 2000) != b->chain_at(1, 2000));
  // The lean form for big benchmarks: the output only, same chains.
  run.tensors = 1;
  run.args = false;
  REQUIRE(testing::WriteSyntheticRun(dir.file("c.sqlite"), run).ok());
  auto c = MustOpen(dir.file("c.sqlite"));
  auto lean = c->op(4001);
  REQUIRE(lean);
  REQUIRE(lean->tensors.size() == 1);
  CHECK(lean->tensors[0].role == TensorRole::kOutput);
  CHECK(lean->tensors[0].hash == 12004);
  CHECK(lean->args.empty());
  CHECK(c->chain_at(1, 2400) == b->chain_at(1, 2400));
}

}  // namespace
}  // namespace tdbg::tracer
