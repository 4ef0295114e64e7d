// Writes runs as Chrome trace-event JSON, streaming (a run is never held in memory): ops as
// complete events per thread, regions around them, kernels per stream, divergent ops marked.
#include "tlparse/report/chrome_trace.h"

#include <algorithm>
#include <cinttypes>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/json_quote.h"
#include "tlparse/diff/diff.h"

namespace tdbg::report {
namespace {

using tracer::OpRecord;
using tracer::Reader;

// Emits events separated by commas.
class EventSink {
 public:
  explicit EventSink(std::FILE* out) : out_(out) {}
  void event(const std::string& json) {
    std::fputs(first_ ? "\n" : ",\n", out_);
    std::fputs(json.c_str(), out_);
    first_ = false;
  }

 private:
  std::FILE* out_;
  bool first_ = true;
};

std::string micros(int64_t ns) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.3f", static_cast<double>(ns) / 1000.0);
  return buf;
}

bool comparable(tracer::TensorStatus s) {
  return s == tracer::TensorStatus::kHashed || s == tracer::TensorStatus::kKnown ||
         s == tracer::TensorStatus::kView;
}

struct Outputs {
  int64_t seq;
  std::string name;
  std::vector<std::pair<uint16_t, uint64_t>> hashes;
};

// Which seqs of process `a` differ from the op with the same seq in `b` (name or an output hash).
Status divergent_seqs(const Reader& a, const Reader& b, std::vector<bool>* out) {
  out->clear();
  constexpr int64_t kChunk = 1 << 15;
  // Seqs may have gaps (ring buffers keep only the last ops), so walk to the largest seq.
  int64_t end = 0;
  for (const Reader* r : {&a, &b}) {
    TDBG_RETURN_IF_ERROR(r->scan_ops(std::nullopt, 0, INT64_MAX, false, [&](const OpRecord& op) {
      end = std::max(end, op.seq + 1);
      return true;
    }));
  }
  std::vector<Outputs> xa, xb;
  auto collect = [](const Reader& r, int64_t from, int64_t to, std::vector<Outputs>* v) {
    v->clear();
    return r.scan_ops(std::nullopt, from, to, true, [&](const OpRecord& op) {
      Outputs o{op.seq, r.string(op.name), {}};
      for (const auto& t : op.tensors) {
        if (t.role == tracer::TensorRole::kOutput && comparable(t.status)) {
          o.hashes.emplace_back(t.index, t.hash);
        }
      }
      v->push_back(std::move(o));
      return true;
    });
  };
  for (int64_t from = 0; from < end; from += kChunk) {
    TDBG_RETURN_IF_ERROR(collect(a, from, from + kChunk, &xa));
    TDBG_RETURN_IF_ERROR(collect(b, from, from + kChunk, &xb));
    size_t j = 0;
    for (const auto& x : xa) {
      while (j < xb.size() && xb[j].seq < x.seq) ++j;
      bool differs;
      if (j >= xb.size() || xb[j].seq != x.seq) {
        differs = true;  // no op with this seq in the other run
      } else {
        differs = x.name != xb[j].name;
        for (const auto& [index, hash] : x.hashes) {
          for (const auto& [index_b, hash_b] : xb[j].hashes) {
            if (index == index_b && hash != hash_b) differs = true;
          }
        }
      }
      if (differs) {
        if (out->size() <= static_cast<size_t>(x.seq)) out->resize(x.seq + 1, false);
        (*out)[x.seq] = true;
      }
    }
  }
  return Status::Ok();
}

bool in_steps(const ChromeTraceOptions& options, int64_t step) {
  return step >= options.first_step && step < options.end_step;
}

// The start of the first op written (of the steps chosen).
int64_t first_start_ns(const Reader& r, const ChromeTraceOptions& options) {
  int64_t t = INT64_MAX;
  (void)r.scan_ops(std::nullopt, 0, INT64_MAX, false, [&](const OpRecord& op) {
    if (!in_steps(options, op.step)) return true;
    t = op.start_ns;
    return false;
  });
  return t;
}

// `first_seq`: the op `tdbg diff` names as the first divergence in this process (-1: none
// here), marked "terrible" with an instant event "first divergence" carrying the cause.
Status write_process(const Reader& r, const std::string& label, int pid, int64_t t0,
                     const std::vector<bool>* divergent, int64_t first_seq,
                     const std::string& cause, const ChromeTraceOptions& options,
                     EventSink* sink) {
  std::string pid_s = std::to_string(pid);
  std::string pname = label + ": " + r.path();
  std::string meta_pid = r.meta("pid");
  std::string rank = r.meta("rank");
  if (!meta_pid.empty()) pname += " (pid " + meta_pid + ")";
  if (!rank.empty()) pname += " rank " + rank;
  sink->event(R"({"ph":"M","name":"process_name","pid":)" + pid_s +
              R"(,"tid":0,"args":{"name":)" + json_quote(pname) + "}}");
  sink->event(R"({"ph":"M","name":"process_sort_index","pid":)" + pid_s +
              R"(,"tid":0,"args":{"sort_index":)" + pid_s + "}}");
  for (const auto& t : r.threads()) {
    std::string name = t.name.empty() ? "thread " + std::to_string(t.id) : t.name;
    name += " (tid " + std::to_string(t.os_tid) + ")";
    sink->event(R"({"ph":"M","name":"thread_name","pid":)" + pid_s + R"(,"tid":)" +
                std::to_string(t.id) + R"(,"args":{"name":)" + json_quote(name) + "}}");
  }

  // Op times that regions need, and the last op end per thread for regions left open.
  std::vector<tracer::RegionRecord> regions = options.regions ? r.regions() : std::vector<tracer::RegionRecord>{};
  std::unordered_map<int64_t, std::pair<int64_t, int64_t>> times;
  for (const auto& g : regions) {
    times[g.start_seq];
    if (g.end_seq != tracer::kNoSeq) times[g.end_seq];
  }
  std::unordered_map<uint32_t, int64_t> thread_end;
  std::unordered_map<tracer::StringId, std::string> names;
  auto name_of = [&](tracer::StringId id) -> const std::string& {
    auto it = names.find(id);
    if (it == names.end()) it = names.emplace(id, json_quote(r.string(id))).first;
    return it->second;
  };
  const bool some_steps = options.first_step > 0 || options.end_step != INT64_MAX;
  std::unordered_set<int64_t> written;  // with some steps only: the ops written, for kernels
  TDBG_RETURN_IF_ERROR(r.scan_ops(std::nullopt, 0, INT64_MAX, false, [&](const OpRecord& op) {
    if (!in_steps(options, op.step)) return true;
    if (some_steps && options.kernels) written.insert(op.seq);
    auto it = times.find(op.seq);
    if (it != times.end()) it->second = {op.start_ns, op.end_ns};
    int64_t& te = thread_end[op.thread];
    te = std::max(te, op.end_ns);
    const bool first = op.seq == first_seq;
    bool diverged = first || (divergent && static_cast<size_t>(op.seq) < divergent->size() &&
                              (*divergent)[op.seq]);
    std::string e = R"({"ph":"X","pid":)" + pid_s + R"(,"tid":)" + std::to_string(op.thread) +
                    R"(,"name":)" + name_of(op.name) + R"(,"cat":")" +
                    ((op.flags & tracer::kOpBackward) ? "backward" : "op") + R"(","ts":)" +
                    micros(op.start_ns - t0) + R"(,"dur":)" +
                    micros(std::max<int64_t>(0, op.end_ns - op.start_ns)) +
                    R"(,"args":{"seq":)" + std::to_string(op.seq) +
                    R"(,"step":)" + std::to_string(op.step);
    if (op.module) e += R"(,"module":)" + name_of(op.module);
    if (op.fwd != tracer::kNoSeq) e += R"(,"forward_seq":)" + std::to_string(op.fwd);
    if (diverged) e += R"(,"divergent":true)";
    // An op the process ended inside (its span runs to the last time recorded) or left by an
    // exception says so, as the viewer and `tdbg show` do.
    if (op.flags & tracer::kOpUnfinished) e += R"(,"unfinished":true)";
    if (op.flags & tracer::kOpRaised) e += R"(,"raised":true)";
    e += "}";
    if (diverged) e += first ? R"(,"cname":"terrible")" : R"(,"cname":"bad")";
    e += "}";
    sink->event(e);
    if (first) {
      sink->event(R"({"ph":"i","s":"p","pid":)" + pid_s + R"(,"tid":)" +
                  std::to_string(op.thread) + R"(,"name":"first divergence","ts":)" +
                  micros(op.start_ns - t0) + R"(,"args":{"seq":)" + std::to_string(op.seq) +
                  R"(,"op":)" + name_of(op.name) + R"(,"cause":)" + json_quote(cause) + "}}");
    }
    return true;
  }));

  for (const auto& g : regions) {
    if (g.kind == tracer::RegionKind::kOptimizer) continue;  // the step's settings, not a range
    if (!in_steps(options, g.step)) continue;
    auto s = times.find(g.start_seq);
    if (s == times.end() || (s->second.first == 0 && s->second.second == 0)) continue;
    int64_t end = thread_end[g.thread];
    if (g.end_seq != tracer::kNoSeq) {
      auto e = times.find(g.end_seq);
      if (e != times.end() && e->second.second) end = e->second.second;
    }
    const char* cat = g.kind == tracer::RegionKind::kStep     ? "step"
                      : g.kind == tracer::RegionKind::kModule ? "module"
                                                              : "user";
    sink->event(R"({"ph":"X","pid":)" + pid_s + R"(,"tid":)" + std::to_string(g.thread) +
                R"(,"name":)" + json_quote(r.string(g.name)) + R"(,"cat":")" + cat + R"(","ts":)" +
                micros(s->second.first - t0) + R"(,"dur":)" +
                micros(std::max<int64_t>(0, end - s->second.first)) + R"(,"args":{"step":)" +
                std::to_string(g.step) + "}}");
  }

  if (options.kernels) {
    std::map<uint64_t, int> streams;
    for (const auto& k : r.kernels()) {
      if (some_steps && !written.count(k.op)) continue;
      auto [it, fresh] = streams.try_emplace(k.stream, static_cast<int>(streams.size()));
      int tid = 1000000 + it->second;
      if (fresh) {
        char name[64];
        std::snprintf(name, sizeof(name), "GPU stream 0x%" PRIx64, k.stream);
        sink->event(R"({"ph":"M","name":"thread_name","pid":)" + pid_s + R"(,"tid":)" +
                    std::to_string(tid) + R"(,"args":{"name":)" + json_quote(name) + "}}");
      }
      sink->event(R"({"ph":"X","pid":)" + pid_s + R"(,"tid":)" + std::to_string(tid) +
                  R"(,"name":)" + json_quote(r.string(k.name)) + R"(,"cat":"kernel","ts":)" +
                  micros(k.start_ns - t0) + R"(,"dur":)" +
                  micros(std::max<int64_t>(0, k.end_ns - k.start_ns)) + R"(,"args":{"op_seq":)" +
                  std::to_string(k.op) + R"(,"grid":)" + json_quote(r.string(k.grid)) +
                  R"(,"block":)" + json_quote(r.string(k.block)) + "}}");
    }
  }
  return Status::Ok();
}

}  // namespace

Status write_chrome_trace(const tracer::Run& a, const tracer::Run* b,
                          const ChromeTraceOptions& options, std::FILE* out) {
  std::vector<std::vector<bool>> divergent;
  // The first divergence as `tdbg diff` finds it (the op it names in each run's process).
  size_t first_process = SIZE_MAX;
  int64_t first_a = -1, first_b = -1;
  std::string cause;
  if (b) {
    size_t n = std::min(a.processes.size(), b->processes.size());
    divergent.resize(n);
    for (size_t p = 0; p < n; ++p) {
      TDBG_RETURN_IF_ERROR(divergent_seqs(*a.processes[p], *b->processes[p], &divergent[p]));
    }
    TDBG_ASSIGN_OR_RETURN(nlohmann::json diffed, diff::compare_runs(a, *b, diff::DiffOptions{}));
    const nlohmann::json& fd = diffed.value("first_divergence", nlohmann::json());
    if (fd.is_object()) {
      first_process = fd.value("process", size_t{0});
      auto seq_of = [&fd](const char* side) {
        const nlohmann::json& op = fd.value(side, nlohmann::json());
        return op.is_object() ? op.value("seq", int64_t{-1}) : int64_t{-1};
      };
      first_a = seq_of("a");
      first_b = seq_of("b");
      cause = fd.value("cause", std::string());
    }
  }
  std::fputs(R"({"displayTimeUnit":"ns","otherData":{"generator":"tdbg export"},"traceEvents":[)",
             out);
  EventSink sink(out);
  int run_index = 0;
  for (const tracer::Run* run : {&a, b}) {
    if (!run) continue;
    // One clock for all processes of a run (CLOCK_MONOTONIC is system-wide); each run starts at 0.
    int64_t t0 = INT64_MAX;
    for (const auto& p : run->processes) t0 = std::min(t0, first_start_ns(*p, options));
    if (t0 == INT64_MAX) t0 = 0;
    for (size_t p = 0; p < run->processes.size(); ++p) {
      const std::vector<bool>* marks = p < divergent.size() ? &divergent[p] : nullptr;
      const int64_t first = p == first_process ? (run_index == 0 ? first_a : first_b) : -1;
      TDBG_RETURN_IF_ERROR(write_process(*run->processes[p], run_index == 0 ? "A" : "B",
                                         run_index * 1000 + static_cast<int>(p) + 1, t0, marks,
                                         first, cause, options, &sink));
    }
    ++run_index;
  }
  std::fputs("\n]}\n", out);
  if (std::ferror(out)) return Status::Error("write error");
  // Damage met on the way (a string or frame that does not resolve): not a trace to keep.
  TDBG_RETURN_IF_ERROR(a.lookup_status());
  if (b) TDBG_RETURN_IF_ERROR(b->lookup_status());
  return Status::Ok();
}

}  // namespace tdbg::report
