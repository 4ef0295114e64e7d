// The run-database writer: appends from any thread go into an in-memory batch under a short
// lock; one background thread commits batches to SQLite (WAL) in large transactions.
#include "tracer/writer.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iterator>
#include <limits>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/quiet_thread.h"
#include "tracer/db_fds.h"
#include "tracer/names_check.h"
#include "tracer/op_block.h"
#include "tracer/schema.h"
#include "tracer/sql_functions.h"
#include "tracer/sqlite_util.h"
#include "tracer/string_pool.h"

namespace tdbg::tracer {
namespace {

using internal::Stmt;

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

struct FrameKey {
  FrameId parent;
  StringId file;
  int32_t line;
  StringId function;
  bool operator==(const FrameKey& o) const {
    return parent == o.parent && file == o.file && line == o.line && function == o.function;
  }
};
struct FrameKeyHash {
  size_t operator()(const FrameKey& k) const {
    uint64_t h = k.parent;
    h = h * 0x9E3779B97F4A7C15ull + k.file;
    h = h * 0x9E3779B97F4A7C15ull + static_cast<uint32_t>(k.line);
    h = h * 0x9E3779B97F4A7C15ull + k.function;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

// Ops are buffered in fixed-size chunks that the background thread recycles: one growing
// vector would be reallocated (and its fresh pages faulted in) on the application's threads.
constexpr size_t kChunkOps = 1024;
// An `op_blocks` row ends when its blob reaches kBlockBytes, so that it fits in one 16 KiB
// page (SQLite keeps up to page size - 35 bytes of a row in its leaf page; beyond that the
// row spills to overflow pages, which a rowid table fills whole but the leaf page does not),
// or at kBlockOps ops: a reader decodes a whole block to reach one op, so this bounds the
// cost of a point lookup (bisection).
constexpr size_t kBlockBytes = 15 * 1024;
constexpr size_t kBlockOps = 1024;
// An appended op: its record in a chunk, with its tensors and args in the chunk's flat arrays.
struct Appended {
  const OpRecord* op;
  const TensorRecord* tensors;
  uint32_t tensor_count;
  const ArgRecord* args;
  uint32_t arg_count;
};

// A chunk keeps its records after a commit (`used` drops to 0). The appending thread writes
// only sequential memory: each op's scalar fields into the next record, its tensors and args
// onto the ends of two flat arrays (the records' own vectors stay empty; the encoder reads the
// flat arrays through `Appended`). Once warm nothing is allocated or freed per op, and no
// memory is freed on a thread other than the one that allocated it. (Moving records in and
// freeing them after the commit cost a malloc and a free per op, the frees on the background
// thread down malloc's locked cross-thread path; copying into each record's own vectors cost
// a cache miss per vector: 5-12% of a recorded step of bench/overhead/lm_steps.py.)
struct OpChunk {
  std::vector<OpRecord> records;
  size_t used = 0;
  std::vector<TensorRecord> tensors;  // of records[0..used), in order
  std::vector<ArgRecord> args;
  std::vector<uint32_t> tensor_ends;  // per record, the end of its tensors in `tensors`
  std::vector<uint32_t> arg_ends;

  bool full() const { return used == kChunkOps; }
  // Copies `op` into the chunk; `op` is left as it was.
  void take(OpRecord& op) {
    OpRecord& slot = used < records.size() ? records[used] : records.emplace_back();
    std::vector<TensorRecord> op_tensors = std::move(op.tensors);
    std::vector<ArgRecord> op_args = std::move(op.args);
    slot = op;  // the scalar fields only: op's vectors are moved out for the copy
    tensors.insert(tensors.end(), op_tensors.begin(), op_tensors.end());
    args.insert(args.end(), op_args.begin(), op_args.end());
    tensor_ends.push_back(static_cast<uint32_t>(tensors.size()));
    arg_ends.push_back(static_cast<uint32_t>(args.size()));
    op.tensors = std::move(op_tensors);
    op.args = std::move(op_args);
    ++used;
  }
  void recycle() {
    used = 0;
    tensors.clear();
    args.clear();
    tensor_ends.clear();
    arg_ends.clear();
  }
};

// Everything appended since the last commit.
struct Batch {
  std::vector<OpChunk> ops;
  std::vector<ThreadRecord> threads;
  std::vector<RegionRecord> regions;
  std::vector<ModuleRecord> modules;
  std::vector<KernelRecord> kernels;
  std::vector<std::pair<std::string, std::string>> meta;
  bool empty() const {
    return ops.empty() && threads.empty() && regions.empty() && modules.empty() &&
           kernels.empty() && meta.empty();
  }
  void clear() {
    ops.clear();
    threads.clear();
    regions.clear();
    modules.clear();
    kernels.clear();
    meta.clear();
  }
};

// All state lives in one heap object so that `abandon_after_fork` can leak it whole: in a fork
// child its mutexes may be locked by threads that no longer exist and its SQLite handle belongs
// to the parent, so nothing in it may be touched or destroyed.
struct State {
  std::string path;
  WriterOptions options;
  sqlite3* db = nullptr;
  int64_t time_base_ns = 0;

  // Interning. The texts of `new_strings` are views into `strings`, which never moves them.
  std::mutex intern_mu;
  StringPool strings;
  std::vector<std::pair<StringId, std::string_view>> new_strings;  // not yet written
  std::unordered_map<FrameKey, FrameId, FrameKeyHash> frames;
  std::vector<FrameRecord> new_frames;

  // The batch being filled, and the flush/stop handshake with the background thread.
  std::mutex mu;
  std::condition_variable wake;       // background thread waits on it
  std::condition_variable committed;  // `flush` waits on it
  std::condition_variable space;      // appenders wait on it while `pending` is full
  Batch pending;
  int64_t pending_ops = 0;
  // Committed chunks (used == 0) with their capacity. All are kept: `max_pending_ops` bounds
  // how many there are, and freeing one on the background thread is a cross-thread free (see
  // `writing_strings`).
  std::vector<OpChunk> free_chunks;
  uint64_t flush_requested = 0;      // generation asked for by `flush`
  uint64_t flush_done = 0;           // generation whose records are committed
  bool stop = false;
  Status error;  // first error; sticky
  Writer::Stats stats;
  // Ops lost to a transaction that could not be written (a full disk). From the first loss on
  // no op is written, so that what the database holds is everything up to a point, never a
  // run with a hole; each later commit states the loss in meta `recording_lost` (JSON), and
  // meta and threads of a failed transaction are written again with the next one. Writer
  // thread only (under db_mu).
  bool ops_lost = false;
  bool write_failed = false;  // an insert of the current transaction failed for want of space
  std::string write_error;    // its message
  int64_t lost_first_seq = kNoSeq, lost_first_step = 0, lost_ops = 0;
  std::string lost_error;
  // The program closed or replaced a descriptor of the database (db_fds.h): SQLite is never
  // called again on it (a write would land in whatever file now has that number), and the
  // loss goes to `path`-lost beside it instead of meta, for the readers.
  bool descriptors_lost = false;
  std::vector<std::pair<std::string, std::string>> retry_meta;
  std::vector<ThreadRecord> retry_threads;
  // `path`-reserve: space taken at creation and given back at the first loss, so that the
  // commit saying so (and the close's meta) can still land on a full disk. Removed at close.
  std::string reserve_path;
  std::atomic<int64_t> appended{0};           // see Writer::appended
  std::atomic<int64_t> committed_through{0};  // see Writer::committed_through

  // Held by the background thread while it is inside SQLite (see `prepare_fork`).
  std::mutex db_mu;
  std::thread thread;

  // Statements, used only by the background thread under `db_mu`.
  Stmt ins_string, ins_frame, ins_meta, ins_thread, ins_block, ins_region, ins_module,
      ins_kernel, begin, commit, del_kernels, del_blocks, del_regions, straddling, get_block,
      del_block;
  // The names tables as committed (`names_check.h`): rows and the sum of their hashes.
  int64_t names_rows = 0;
  uint64_t names_sum = 0;
  // Last tidx committed per thread: ops must come in increasing tidx per thread.
  std::unordered_map<uint32_t, int64_t> last_tidx;
  int64_t max_seq = -1;
  int64_t max_seq_step = 0;  // the step of the op `max_seq`
  // The background thread never frees memory another thread allocated until the writer is
  // destroyed: a process that ends on a corrupted heap (glibc's "double free" abort) holds its
  // arena's lock, and a free() into that arena would block the background thread before the
  // commit of the records the ending appends (the op it ended in, the end metadata). So the
  // strings and frames to write are copied into its own vectors, and the few heap-owning
  // records (meta texts, thread names) are moved here once committed; they are bounded (a few
  // per process and thread).
  std::vector<std::pair<StringId, std::string_view>> writing_strings;
  std::vector<FrameRecord> writing_frames;
  std::vector<std::pair<std::string, std::string>> retired_meta;
  std::vector<ThreadRecord> retired_threads;
  // Scratch of the background thread: one thread's ops of a batch, and the block being built.
  std::unordered_map<uint32_t, std::vector<Appended>> by_thread;
  std::vector<const OpRecord*> block_ops;
  OpBlockEncoder encoder{0};
};

class WriterImpl final : public Writer {
 public:
  explicit WriterImpl(State* s) : s_(s) {}
  ~WriterImpl() override {
    if (abandoned_.load()) return;  // leaked on purpose, see `State`
    (void)close();
    delete s_;
  }

  StringId intern(std::string_view text) override {
    if (text.empty() || abandoned_.load(std::memory_order_relaxed)) return 0;
    std::lock_guard<std::mutex> lock(s_->intern_mu);
    std::string_view stored;
    bool added = false;
    const StringId id = s_->strings.intern(text, &stored, &added);
    if (added) s_->new_strings.emplace_back(id, stored);
    return id;
  }

  FrameId intern_frame(FrameId parent, StringId file, int32_t line, StringId function) override {
    if (abandoned_.load(std::memory_order_relaxed)) return 0;
    FrameKey key{parent, file, line, function};
    std::lock_guard<std::mutex> lock(s_->intern_mu);
    auto it = s_->frames.find(key);
    if (it != s_->frames.end()) return it->second;
    FrameId id = static_cast<FrameId>(s_->frames.size() + 1);
    s_->frames.emplace(key, id);
    s_->new_frames.push_back(FrameRecord{id, parent, file, line, function});
    return id;
  }

  void set_meta(std::string_view key, std::string_view value) override {
    append([&](Batch& b) { b.meta.emplace_back(std::string(key), std::string(value)); });
  }
  void add_thread(const ThreadRecord& thread) override {
    append([&](Batch& b) { b.threads.push_back(thread); });
  }
  void append_op(OpRecord&& op) override { append_ops(&op, 1); }
  void append_ops(OpRecord* ops, size_t count) override {
    if (abandoned_.load(std::memory_order_relaxed) || count == 0) return;
    std::unique_lock<std::mutex> lock(s_->mu);
    if (s_->options.max_pending_ops > 0 && s_->pending_ops >= s_->options.max_pending_ops) {
      s_->wake.notify_one();
      s_->space.wait(lock,
                     [&] { return closed_ || s_->pending_ops < s_->options.max_pending_ops; });
    }
    if (closed_) return;
    s_->pending_ops += static_cast<int64_t>(count);
    s_->appended.fetch_add(static_cast<int64_t>(count), std::memory_order_relaxed);
    Batch& b = s_->pending;
    for (size_t i = 0; i < count; ++i) {
      if (b.ops.empty() || b.ops.back().full()) {
        if (!s_->free_chunks.empty()) {
          b.ops.push_back(std::move(s_->free_chunks.back()));
          s_->free_chunks.pop_back();
        } else {
          b.ops.emplace_back().records.reserve(kChunkOps);
        }
      }
      b.ops.back().take(ops[i]);
    }
  }
  void append_region(const RegionRecord& region) override {
    append([&](Batch& b) { b.regions.push_back(region); });
  }
  void append_module(const ModuleRecord& module) override {
    append([&](Batch& b) { b.modules.push_back(module); });
  }
  void append_kernel(const KernelRecord& kernel) override {
    append([&](Batch& b) { b.kernels.push_back(kernel); });
  }

  Status flush() override {
    if (abandoned_.load()) return Status::Error(s_->path + ": writer abandoned after fork");
    std::unique_lock<std::mutex> lock(s_->mu);
    if (closed_) return s_->error;
    uint64_t want = ++s_->flush_requested;
    s_->wake.notify_one();
    s_->committed.wait(lock, [&] { return s_->flush_done >= want || s_->stop; });
    return s_->error;
  }

  Status close() override {
    if (abandoned_.load()) return Status::Ok();
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      if (closed_) return s_->error;
      closed_ = true;
      s_->stop = true;
      s_->wake.notify_one();
      s_->space.notify_all();
    }
    if (s_->thread.joinable()) s_->thread.join();
    give_back_reserve();
    // The background thread committed everything before it returned. Fold the WAL back into
    // the database and leave rollback mode, so the closed file is one self-contained file
    // that opens read-only anywhere (even in a read-only directory).
    std::lock_guard<std::mutex> db_lock(s_->db_mu);
    s_->ins_string = Stmt();
    s_->ins_frame = Stmt();
    s_->ins_meta = Stmt();
    s_->ins_thread = Stmt();
    s_->ins_block = Stmt();
    s_->ins_region = Stmt();
    s_->ins_module = Stmt();
    s_->ins_kernel = Stmt();
    s_->begin = Stmt();
    s_->commit = Stmt();
    s_->del_kernels = Stmt();
    s_->del_blocks = Stmt();
    s_->del_regions = Stmt();
    s_->straddling = Stmt();
    s_->get_block = Stmt();
    s_->del_block = Stmt();
    if (s_->descriptors_lost) {
      // SQLite's descriptors are the program's now: its close would checkpoint into them.
      // The connection is leaked; what was committed stays in the database and its -wal file.
      write_lost_note();  // with the ops lost to the end
      s_->db = nullptr;
      return s_->error;
    }
    // Best effort: a reader that still has the file open keeps it in WAL mode (busy), which
    // loses nothing; the next reader reads through the -wal file.
    sqlite3_exec(s_->db, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr);
    if (sqlite3_close(s_->db) != SQLITE_OK && s_->error.ok()) {
      s_->error = Status::Error(s_->path + ": close failed: " + sqlite3_errmsg(s_->db));
    }
    s_->db = nullptr;
    return s_->error;
  }

  void release_reserve() override {
    std::lock_guard<std::mutex> db_lock(s_->db_mu);
    give_back_reserve();
  }

  void abandon_after_fork() override {
    // Only flags: no lock, no SQLite call, no join (the thread does not exist here). The
    // state, its statements and the parent's connection are leaked on purpose.
    // Never destroyed, the joinable `std::thread` in the state cannot abort the child.
    abandoned_.store(true);
  }

  void prepare_fork() override {
    if (abandoned_.load()) return;
    s_->db_mu.lock();
    s_->mu.lock();
    s_->intern_mu.lock();
  }
  void after_fork_parent() override {
    if (abandoned_.load()) return;
    s_->intern_mu.unlock();
    s_->mu.unlock();
    s_->db_mu.unlock();
  }

  int64_t appended() const override { return s_->appended.load(std::memory_order_relaxed); }
  int64_t committed_through() const override {
    return s_->committed_through.load(std::memory_order_acquire);
  }

  Stats stats() const override {
    if (abandoned_.load()) return {};
    std::lock_guard<std::mutex> lock(s_->mu);
    return s_->stats;
  }

  void start() {
    s_->thread = quiet_thread([this] { run(); });
  }

 private:
  template <typename F>
  void append(F&& f) {
    if (abandoned_.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(s_->mu);
    if (closed_) return;
    f(s_->pending);
    s_->appended.fetch_add(1, std::memory_order_relaxed);
  }

  // The background thread: commits at least every `flush_interval_ms`, or at once when
  // `flush` or `close` asks.
  void run() {
    Batch batch;
    const auto period = std::chrono::milliseconds(std::max(1, s_->options.flush_interval_ms));
    auto next = std::chrono::steady_clock::now() + period;
    for (;;) {
      uint64_t generation;
      bool stopping;
      int64_t cut;  // `appended` when the batch was taken
      {
        std::unique_lock<std::mutex> lock(s_->mu);
        s_->wake.wait_until(lock, next, [&] {
          return s_->stop || s_->flush_requested > s_->flush_done ||
                 (s_->options.max_pending_ops > 0 &&
                  s_->pending_ops >= s_->options.max_pending_ops);
        });
        std::swap(batch, s_->pending);
        cut = s_->appended.load(std::memory_order_relaxed);
        s_->pending_ops = 0;
        s_->space.notify_all();
        generation = s_->flush_requested;
        stopping = s_->stop;
      }
      next = std::chrono::steady_clock::now() + period;
      commit_batch(batch, cut);
      // Recycles the chunks with their records (see `OpChunk`).
      for (OpChunk& chunk : batch.ops) chunk.recycle();
      // Moves out what `clear` would free (see `State::retired_meta`).
      for (auto& m : batch.meta) s_->retired_meta.push_back(std::move(m));
      for (ThreadRecord& t : batch.threads) s_->retired_threads.push_back(std::move(t));
      {
        std::lock_guard<std::mutex> lock(s_->mu);
        s_->flush_done = generation;
        for (OpChunk& chunk : batch.ops) s_->free_chunks.push_back(std::move(chunk));
      }
      batch.clear();
      s_->committed.notify_all();
      if (stopping) break;
    }
  }

  void note_error(const std::string& what) {
    std::lock_guard<std::mutex> lock(s_->mu);
    ++s_->stats.errors;
    if (s_->error.ok()) s_->error = Status::Error(s_->path + ": " + what);
  }

  // Steps an insert; a failure (e.g. a duplicate op) loses that record only, except one for
  // want of space or I/O, which fails the whole transaction (see `State::ops_lost`).
  void step_insert(Stmt& st, const char* what) {
    int rc = st.step();
    if (rc != SQLITE_DONE) {
      const int primary = rc & 0xff;
      if ((primary == SQLITE_FULL || primary == SQLITE_IOERR) && !s_->write_failed) {
        s_->write_failed = true;
        s_->write_error = sqlite3_errmsg(s_->db);
      }
      note_error(std::string("cannot write ") + what + ": " + sqlite3_errmsg(s_->db));
    }
    st.reset();
  }

  // Removes the full-disk reserve (see `State::reserve_path`), once. Under db_mu, or with the
  // writer thread gone.
  void give_back_reserve() {
    if (s_->reserve_path.empty()) return;
    ::unlink(s_->reserve_path.c_str());
    s_->reserve_path.clear();
  }

  // What is lost, `ops` of them, as meta `recording_lost` holds it (JSON).
  std::string lost_text(int64_t ops) const {
    const State& s = *s_;
    return nlohmann::json{{"first_seq", s.lost_first_seq},
                          {"first_step", s.lost_first_step},
                          {"ops", ops},
                          {"error", s.lost_error}}
        .dump();
  }

  // Writes what is lost (as meta `recording_lost` would hold it) to `path`-lost, where a
  // reader finds it: the database itself can no longer be written (`descriptors_lost`).
  void write_lost_note() {
    const State& s = *s_;
    const std::string text = lost_text(s.lost_ops) + "\n";
    const std::string note = s.path + "-lost";
    const int fd = ::open(note.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    (void)!::write(fd, text.data(), text.size());
    ::close(fd);
  }

  static int64_t batch_op_count(const Batch& batch) {
    int64_t n = 0;
    for (const OpChunk& chunk : batch.ops) n += static_cast<int64_t>(chunk.used);
    return n;
  }

  // Records that the ops of `batch` are lost (`why`); the first loss says from where.
  void lose_ops(const Batch& batch, const std::string& why) {
    State& s = *s_;
    const int64_t count = batch_op_count(batch);
    if (count == 0 && !s.ops_lost && !s.descriptors_lost) return;
    if (!s.ops_lost) {
      give_back_reserve();
      for (const OpChunk& chunk : batch.ops) {
        for (size_t i = 0; i < chunk.used; ++i) {
          const OpRecord& op = chunk.records[i];
          // (`<=`: a first seq set before, from the last one written, takes its op's step.)
          if (s.lost_first_seq == kNoSeq || op.seq <= s.lost_first_seq) {
            s.lost_first_seq = op.seq;
            s.lost_first_step = op.step;
          }
        }
      }
      s.ops_lost = true;
      s.lost_error = why;
      std::lock_guard<std::mutex> lock(s.mu);
      // The error a closing program reports says where the recording stopped.
      s.error = Status::Error(s.path + ": recording stopped at seq " +
                              std::to_string(s.lost_first_seq) + " (step " +
                              std::to_string(s.lost_first_step) + "): " + why);
    }
    s.lost_ops += count;
  }

  // Commits `batch`, the records appended up to `cut` (see Writer::committed_through).
  void commit_batch(Batch& batch, int64_t cut) {
    struct Through {
      State& s;
      int64_t cut;
      ~Through() { s.committed_through.store(cut, std::memory_order_release); }
    };
    std::lock_guard<std::mutex> db_lock(s_->db_mu);
    // Taken after the batch: every string or frame an op of `batch` uses was interned before
    // the op was appended, so it is in these lists and lands in the same transaction.
    // Copied, not swapped: the queues keep their capacity (see `State::writing_strings`).
    auto& strings = s_->writing_strings;
    auto& frames = s_->writing_frames;
    {
      std::lock_guard<std::mutex> lock(s_->intern_mu);
      strings.assign(s_->new_strings.begin(), s_->new_strings.end());
      s_->new_strings.clear();
      frames.assign(s_->new_frames.begin(), s_->new_frames.end());
      s_->new_frames.clear();
    }
    Through through{*s_, cut};
    if (batch.empty() && strings.empty() && frames.empty()) return;
    // If this transaction fails, its ops are lost (and counted), but strings and frames go
    // back to the queue: later ops refer to them by id.
    auto requeue = [&](const std::string& why) {
      {
        std::lock_guard<std::mutex> lock(s_->intern_mu);
        s_->new_strings.insert(s_->new_strings.begin(), strings.begin(), strings.end());
        s_->new_frames.insert(s_->new_frames.begin(), frames.begin(), frames.end());
      }
      // Meta (the exit status at close) and threads go again with the next transaction; the
      // ops are lost, and no later op is written.
      s_->retry_meta.insert(s_->retry_meta.end(), batch.meta.begin(), batch.meta.end());
      s_->retry_threads.insert(s_->retry_threads.end(), batch.threads.begin(), batch.threads.end());
      lose_ops(batch, why);
      // Beside the database too: where no later commit gets through (a file-size limit,
      // `ulimit -f`, which freeing the reserve does not lift), a reader still learns that the
      // recording stopped, not that the process was killed.
      if (s_->ops_lost) write_lost_note();
    };
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t cpu0 = thread_cpu_ns();
    State& s = *s_;
    if (!s.descriptors_lost) {
      if (std::string gone = DatabaseDescriptorsLost(s.path); !gone.empty()) {
        s.descriptors_lost = true;
        note_error(gone);
        if (!s.ops_lost && s.lost_first_seq == kNoSeq) {  // from the op after the last written
          s.lost_first_seq = s.max_seq + 1;
          s.lost_first_step = s.max_seq_step;
        }
        lose_ops(batch, gone);
        write_lost_note();
        return;
      }
    }
    if (s.descriptors_lost) {
      lose_ops(batch, s.lost_error);
      return;
    }
    if (s.begin.step() != SQLITE_DONE) {
      const std::string why = std::string("cannot begin a transaction: ") + sqlite3_errmsg(s.db);
      note_error(why);
      s.begin.reset();
      requeue(why);
      return;
    }
    s.begin.reset();
    // The names check as it will be once this transaction commits.
    int64_t names_rows = s.names_rows + static_cast<int64_t>(strings.size() + frames.size());
    uint64_t names_sum = s.names_sum;
    for (auto& [id, text] : strings) {
      s.ins_string.bind_int(1, id);
      s.ins_string.bind_text(2, text);
      step_insert(s.ins_string, "a string");
      names_sum += internal::string_row_hash(id, text);
    }
    for (const FrameRecord& f : frames) {
      names_sum += internal::frame_row_hash(f);
      s.ins_frame.bind_int(1, f.id);
      s.ins_frame.bind_nonzero(2, f.parent);
      s.ins_frame.bind_nonzero(3, f.file);
      s.ins_frame.bind_int(4, f.line);
      s.ins_frame.bind_nonzero(5, f.function);
      step_insert(s.ins_frame, "a frame");
    }
    // Records of a failed transaction first: the batch's own (a later value) replace them.
    std::vector<std::pair<std::string, std::string>> retry_meta;
    std::vector<ThreadRecord> retry_threads;
    retry_meta.swap(s.retry_meta);
    retry_threads.swap(s.retry_threads);
    if (s.ops_lost) {
      // What is lost so far, this batch's ops included (none is written from the first loss).
      retry_meta.emplace_back("recording_lost", lost_text(s.lost_ops + batch_op_count(batch)));
    }
    for (const auto* list : {&retry_meta, &batch.meta}) {
      for (auto& [key, value] : *list) {
        s.ins_meta.bind_text(1, key);
        s.ins_meta.bind_text(2, value);
        step_insert(s.ins_meta, "meta");
      }
    }
    if (!strings.empty() || !frames.empty() || s.names_rows == 0) {
      const std::string check = internal::names_check_text(names_rows, names_sum);
      s.ins_meta.bind_text(1, internal::kNamesCheckKey);
      s.ins_meta.bind_text(2, check);
      step_insert(s.ins_meta, "meta");
    }
    for (const auto* list : {&retry_threads, &batch.threads}) {
      for (const ThreadRecord& t : *list) {
        s.ins_thread.bind_int(1, t.id);
        s.ins_thread.bind_int(2, t.os_tid);
        s.ins_thread.bind_text(3, t.name);
        step_insert(s.ins_thread, "a thread");
      }
    }
    const int64_t op_count = s.ops_lost ? 0 : write_ops(batch);
    for (const RegionRecord& r : batch.regions) {
      s.ins_region.bind_int(1, r.id);
      s.ins_region.bind_int(2, r.thread);
      s.ins_region.bind_nonzero(3, r.name);
      s.ins_region.bind_int(4, static_cast<int64_t>(r.kind));
      s.ins_region.bind_int(5, r.start_seq);
      if (r.end_seq != kNoSeq) {
        s.ins_region.bind_int(6, r.end_seq);
      } else {
        s.ins_region.bind_null(6);
      }
      s.ins_region.bind_int(7, r.step);
      s.ins_region.bind_nonzero(8, r.parent);
      step_insert(s.ins_region, "a region");
    }
    for (const ModuleRecord& m : batch.modules) {
      s.ins_module.bind_int(1, m.id);
      s.ins_module.bind_nonzero(2, m.kind);
      s.ins_module.bind_nonzero(3, m.name);
      s.ins_module.bind_u64(4, m.hash);
      s.ins_module.bind_int(5, m.size);
      s.ins_module.bind_int(6, m.time_ns);
      step_insert(s.ins_module, "a module");
    }
    for (const KernelRecord& k : batch.kernels) {
      if (k.op != kNoSeq) {
        s.ins_kernel.bind_int(1, k.op);
      } else {
        s.ins_kernel.bind_null(1);
      }
      s.ins_kernel.bind_nonzero(2, k.module);
      s.ins_kernel.bind_nonzero(3, k.name);
      s.ins_kernel.bind_nonzero(4, k.grid);
      s.ins_kernel.bind_nonzero(5, k.block);
      s.ins_kernel.bind_int(6, k.shared_mem);
      s.ins_kernel.bind_u64(7, k.stream);
      s.ins_kernel.bind_int(8, k.start_ns);
      s.ins_kernel.bind_int(9, k.end_ns);
      step_insert(s.ins_kernel, "a kernel");
    }
    if (s.options.ring_ops > 0 && !s.ops_lost) trim_ring(batch);
    // An insert that found no space fails the whole transaction, as a failed commit does.
    int rc = s.write_failed ? SQLITE_FULL : s.commit.step();
    s.commit.reset();
    if (rc != SQLITE_DONE) {
      // Read before the rollback replaces it. (A failed insert's message, or the commit's.)
      std::string why = std::string("cannot ") + (s.write_failed ? "write" : "commit") + ": " +
                        (s.write_failed ? s.write_error : sqlite3_errmsg(s.db));
      // A file-size limit (`ulimit -f`) fails a write with EFBIG, which SQLite reports as an
      // I/O error: said, where one is set, as the likelier reason than the disk.
      struct rlimit fsize;
      if ((sqlite3_extended_errcode(s.db) & 0xff) == SQLITE_IOERR &&
          getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY)
        why += " (a file-size limit of " + std::to_string(static_cast<uint64_t>(fsize.rlim_cur)) +
               " bytes is set: ulimit -f)";
      if (!s.write_failed) note_error(why);
      s.write_failed = false;
      sqlite3_exec(s.db, "ROLLBACK", nullptr, nullptr, nullptr);
      s.retry_meta.insert(s.retry_meta.begin(), retry_meta.begin(), retry_meta.end());
      s.retry_threads.insert(s.retry_threads.begin(), retry_threads.begin(), retry_threads.end());
      requeue(why);
      return;
    }
    s.names_rows = names_rows;
    s.names_sum = names_sum;
    if (s.ops_lost) {
      s.lost_ops += batch_op_count(batch);
      // The note beside the database, written at a failed commit, says what meta now says
      // (t144: the -lost file said 6,726 where meta said 21,950).
      write_lost_note();
    }
    const int64_t us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    std::lock_guard<std::mutex> lock(s.mu);
    s.stats.ops_committed += op_count;
    s.stats.commits += 1;
    s.stats.max_commit_us = std::max(s.stats.max_commit_us, us);
    s.stats.commit_cpu_us += (thread_cpu_ns() - cpu0) / 1000;
  }

  // Packs the batch's ops into blocks (per thread, in tidx order, up to kBlockBytes or
  // kBlockOps each) and inserts them. Returns the number of ops written.
  int64_t write_ops(const Batch& batch) {
    State& s = *s_;
    for (auto& [thread, list] : s.by_thread) list.clear();
    for (const OpChunk& chunk : batch.ops) {
      uint32_t t = 0, a = 0;
      for (size_t i = 0; i < chunk.used; ++i) {
        const OpRecord& op = chunk.records[i];
        s.by_thread[op.thread].push_back(Appended{&op, chunk.tensors.data() + t,
                                                  chunk.tensor_ends[i] - t, chunk.args.data() + a,
                                                  chunk.arg_ends[i] - a});
        t = chunk.tensor_ends[i];
        a = chunk.arg_ends[i];
      }
    }
    int64_t written = 0;
    for (auto& [thread, list] : s.by_thread) {
      if (list.empty()) continue;
      // Appends of one thread come in tidx order; ops of different threads may interleave.
      std::stable_sort(list.begin(), list.end(), [](const Appended& a, const Appended& b) {
        return a.op->tidx < b.op->tidx;
      });
      auto last = s.last_tidx.find(thread);
      int64_t floor = last == s.last_tidx.end() ? std::numeric_limits<int64_t>::min() : last->second;
      std::vector<const OpRecord*>& block_ops = s.block_ops;
      block_ops.clear();
      s.encoder.clear();
      int64_t dropped = 0;
      auto emit = [&] {
        if (block_ops.empty()) return;
        insert_block(thread, block_ops, s.encoder.block());
        written += static_cast<int64_t>(block_ops.size());
        block_ops.clear();
        s.encoder.clear();
      };
      int64_t prev_seq = std::numeric_limits<int64_t>::min();
      for (const Appended& appended : list) {
        const OpRecord* op = appended.op;
        // A repeated or late tidx, or a seq that does not grow with tidx, would break the
        // blocks' ordering: such an op is lost and counted (a caller bug, not a data case).
        if (op->tidx <= floor || op->seq <= prev_seq) {
          ++dropped;
          continue;
        }
        floor = op->tidx;
        prev_seq = op->seq;
        if (op->seq > s.max_seq) {
          s.max_seq = op->seq;
          s.max_seq_step = op->step;
        }
        block_ops.push_back(op);
        s.encoder.add(*op, appended.tensors, appended.tensor_count, appended.args,
                      appended.arg_count);
        if (block_ops.size() == kBlockOps || s.encoder.bytes() >= kBlockBytes) emit();
      }
      emit();
      s.last_tidx[thread] = floor;
      if (dropped > 0) {
        note_error("dropped " + std::to_string(dropped) + " op(s) of thread " +
                   std::to_string(thread) + " appended out of tidx order");
      }
    }
    return written;
  }

  // Inserts the row of block `encoded`, which holds `ops`.
  void insert_block(uint32_t thread, const std::vector<const OpRecord*>& ops,
                    std::string_view encoded) {
    Stmt& st = s_->ins_block;
    st.bind_int(1, thread);
    st.bind_int(2, ops.front()->tidx);
    st.bind_int(3, ops.back()->tidx);
    st.bind_int(4, ops.front()->seq);
    st.bind_int(5, ops.back()->seq);
    st.bind_int(6, static_cast<int64_t>(ops.size()));
    st.bind_blob(7, encoded);
    step_insert(st, "an op block");
  }

  // Ring mode: deletes the ops with seq <= max_seq - ring_ops (whole blocks, and the old part
  // of a block that straddles the cutoff), their kernels and the regions that ended before
  // them, in the same transaction as the new ones.
  void trim_ring(const Batch& batch) {
    State& s = *s_;
    if (batch.ops.empty()) return;
    const int64_t cutoff = s.max_seq - s.options.ring_ops;  // delete seq <= cutoff
    if (cutoff < 0) return;
    // Regions that ended before the ring's first op (each step's, each record_function range)
    // hold no op any more: kept, they would grow the database with the run's length.
    for (Stmt* d : {&s.del_blocks, &s.del_kernels, &s.del_regions}) {
      d->bind_int(1, cutoff);
      step_insert(*d, "(ring) deleting old ops");
    }
    // A block that straddles the cutoff (at most one per thread) loses its old ops.
    std::vector<std::pair<uint32_t, int64_t>> straddling;
    s.straddling.bind_int(1, cutoff);
    while (s.straddling.step() == SQLITE_ROW) {
      straddling.emplace_back(static_cast<uint32_t>(s.straddling.col_int(0)),
                              s.straddling.col_int(1));
    }
    s.straddling.reset();
    std::vector<OpRecord> ops;
    for (auto [thread, first_tidx] : straddling) {
      s.get_block.bind_int(1, thread);
      s.get_block.bind_int(2, first_tidx);
      Status st = s.get_block.step() == SQLITE_ROW
                      ? DecodeOpBlock(s.get_block.col_blob(0), s.time_base_ns, true, &ops)
                      : Status::Error("block vanished");
      s.get_block.reset();
      if (!st.ok()) {
        note_error("(ring) cannot trim a block: " + st.message());
        continue;
      }
      std::vector<const OpRecord*> keep;
      for (const OpRecord& op : ops) {
        if (op.seq > cutoff) keep.push_back(&op);
      }
      s.del_block.bind_int(1, thread);
      s.del_block.bind_int(2, first_tidx);
      step_insert(s.del_block, "(ring) trimming a block");
      if (keep.empty()) continue;
      s.encoder.clear();
      for (const OpRecord* op : keep) s.encoder.add(*op);
      insert_block(thread, keep, s.encoder.block());
    }
  }

  State* s_;
  std::atomic<bool> abandoned_{false};
  bool closed_ = false;  // guarded by `s_->mu`
};

}  // namespace

// Room kept for the commits after a full disk: the recording_lost meta, the exit status and
// the close (a few pages of the -wal file).
constexpr off_t kReserveBytes = 512 * 1024;

StatusOr<std::unique_ptr<Writer>> Writer::Create(const std::string& path,
                                                 const WriterOptions& options) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return Status::Error(path + ": already exists");
  PlaceDatabaseDescriptorsHigh(path);  // out of reach of a program's dup2
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = path + ": cannot create: " + (db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return Status::Error(msg);
  }
  // The views need the block-decoding functions to exist when they are created and used.
  if (RegisterSqlFunctions(db) != SQLITE_OK) {
    std::string msg = path + ": cannot register SQL functions: " + sqlite3_errmsg(db);
    sqlite3_close(db);
    ::unlink(path.c_str());
    return Status::Error(msg);
  }
  auto* s = new State();
  s->path = path;
  s->options = options;
  s->db = db;
  {
    // Best effort: without room for it there is no reserve, and nothing else changes.
    s->reserve_path = path + "-reserve";
    const int fd = ::open(s->reserve_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      if (::posix_fallocate(fd, 0, kReserveBytes) != 0) {
        ::unlink(s->reserve_path.c_str());
        s->reserve_path.clear();
      }
      ::close(fd);
    } else {
      s->reserve_path.clear();
    }
  }
  s->time_base_ns = monotonic_ns();
  s->encoder = OpBlockEncoder(s->time_base_ns);
  auto fail = [&](Status status) -> StatusOr<std::unique_ptr<Writer>> {
    if (!s->reserve_path.empty()) ::unlink(s->reserve_path.c_str());
    delete s;  // finalizes the statements first (members are destroyed in reverse order)
    sqlite3_close(db);
    ::unlink(path.c_str());
    ::unlink((path + "-wal").c_str());
    ::unlink((path + "-shm").c_str());
    return status;
  };
  // 16 KiB pages: bigger pages cost less CPU per row (64 KiB: about 15% less than 8 KiB) but
  // every table and index takes at least one page, and a process with few ops (a DataLoader
  // worker) should not leave a 1 MiB file. WAL: a commit is one append to the -wal file, readers
  // never block the writer, and a killed process leaves every committed transaction readable.
  // synchronous=NORMAL skips fsync per commit: the data survives the death of the process (not of
  // the machine). The file is created with synchronous=OFF, NORMAL only after its schema is
  // committed: a DataLoader worker opens its database at its first op, and the creation's four
  // fsyncs (journal, directory, database) took seconds on a busy disk, during which a SIGTERM
  // that ends the worker waits (a machine that dies then leaves a file with nothing in it).
  // An 8 MiB page cache: the writer only appends, so the pages it touches are the right edges of
  // a few B-trees. A larger cache only kept written pages in the recorded process's memory (a
  // 64 MiB cache filled at ~100 KB per step of a small LM, with no gain in the writer benchmark).
  Status status = internal::exec(db,
                                 "PRAGMA synchronous=OFF;"
                                 "PRAGMA page_size=16384;"
                                 "PRAGMA journal_mode=WAL;"
                                 "PRAGMA cache_size=-8192;"
                                 "PRAGMA wal_autocheckpoint=4096;",
                                 path);
  if (!status.ok()) return fail(status);
  // A ring bounds what the database holds, and is chosen for long runs on little disk: the
  // -wal file, which every commit appends to until a checkpoint, must stay bounded too (64 MiB
  // of 16 KiB pages by the default above; 48 MB over a 6,000-step ring run). Checkpoint every
  // 4 MiB and cut the file back to 8 MiB after each.
  if (s->options.ring_ops > 0) {
    status = internal::exec(db, "PRAGMA wal_autocheckpoint=256; PRAGMA journal_size_limit=8388608;",
                            path);
    if (!status.ok()) return fail(status);
  }
  std::string create = std::string("BEGIN;") + internal::kCreateTables + internal::kFillEnums +
                       "INSERT INTO meta VALUES('format','" + internal::kFormatName + "');" +
                       "INSERT INTO meta VALUES('" + internal::kTimeBaseKey + "','" +
                       std::to_string(s->time_base_ns) + "');" +
                       "PRAGMA user_version=" + std::to_string(kSchemaVersion) + ";COMMIT;";
  status = internal::exec(db, create.c_str(), path);
  if (status.ok()) status = internal::exec(db, "PRAGMA synchronous=NORMAL;", path);
  if (!status.ok()) return fail(status);

  struct {
    Stmt* stmt;
    const char* sql;
  } statements[] = {
      {&s->ins_string, "INSERT INTO strings VALUES(?1,?2)"},
      {&s->ins_frame, "INSERT INTO frames VALUES(?1,?2,?3,?4,?5)"},
      {&s->ins_meta, "INSERT OR REPLACE INTO meta VALUES(?1,?2)"},
      {&s->ins_thread, "INSERT OR REPLACE INTO threads VALUES(?1,?2,?3)"},
      {&s->ins_block,
       "INSERT INTO op_blocks(thread, first_tidx, last_tidx, first_seq, last_seq, count, ops) "
       "VALUES(?1,?2,?3,?4,?5,?6,?7)"},
      {&s->ins_region, "INSERT OR REPLACE INTO regions VALUES(?1,?2,?3,?4,?5,?6,?7,?8)"},
      {&s->ins_module, "INSERT OR REPLACE INTO modules VALUES(?1,?2,?3,?4,?5,?6)"},
      {&s->ins_kernel, "INSERT INTO kernels VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9)"},
      {&s->begin, "BEGIN"},
      {&s->commit, "COMMIT"},
      {&s->del_kernels, "DELETE FROM kernels WHERE op <= ?1"},
      {&s->del_blocks, "DELETE FROM op_blocks WHERE last_seq <= ?1"},
      {&s->del_regions, "DELETE FROM regions WHERE end_seq >= 0 AND end_seq <= ?1"},
      {&s->straddling, "SELECT thread, first_tidx FROM op_blocks WHERE first_seq <= ?1"},
      {&s->get_block, "SELECT ops FROM op_blocks WHERE thread = ?1 AND first_tidx = ?2"},
      {&s->del_block, "DELETE FROM op_blocks WHERE thread = ?1 AND first_tidx = ?2"},
  };
  for (auto& st : statements) {
    status = st.stmt->prepare(db, st.sql, path);
    if (!status.ok()) return fail(status);
  }
  auto writer = std::make_unique<WriterImpl>(s);
  writer->start();
  return std::unique_ptr<Writer>(std::move(writer));
}

}  // namespace tdbg::tracer
