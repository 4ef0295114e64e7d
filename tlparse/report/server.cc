// The `tdbg view` HTTP server: cpp-httplib bound to 127.0.0.1, GET only, serving the embedded
// viewer and JSON pages of ops read through tracer::Reader (never a file from disk).
#include "tlparse/report/server.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <httplib.h>

namespace tdbg::report {
namespace {

using nlohmann::json;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// An integer query parameter, or `fallback` when absent; false when present but malformed.
bool int_param(const httplib::Request& req, const char* name, int64_t fallback, int64_t* out) {
  if (!req.has_param(name)) {
    *out = fallback;
    return true;
  }
  std::string v = req.get_param_value(name);
  if (v.empty() || v.size() > 19) return false;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (*end != '\0') return false;
  *out = x;
  return true;
}

struct Filter {
  std::string any, name, module;  // lower-case substrings
  std::optional<int64_t> step;
  bool empty() const { return any.empty() && name.empty() && module.empty() && !step; }
  std::string key() const {
    return any + '\x1f' + name + '\x1f' + module + '\x1f' + (step ? std::to_string(*step) : "");
  }
};

// One side of the comparison: the process shown and the seqs that match recent filters.
class RunIndex {
 public:
  RunIndex(const tracer::Reader& reader) : reader_(reader) {
    total_ = reader.op_count();
    // Dense seqs (no ring buffer): row i of the unfiltered table is seq i, no index needed.
    dense_ = total_ == 0 || (reader.op(0) && reader.op(total_ - 1) && !reader.op(total_));
  }
  const tracer::Reader& reader() const { return reader_; }

  // The seqs shown for `filter`: all of them in seq order, filtered by name/module/step.
  StatusOr<std::shared_ptr<const std::vector<int64_t>>> matching(const Filter& filter) {
    std::string key = filter.key();
    auto it = cache_.find(key);
    if (it != cache_.end()) return std::shared_ptr<const std::vector<int64_t>>(it->second);
    auto seqs = std::make_shared<std::vector<int64_t>>();
    std::unordered_map<tracer::StringId, bool> name_ok, module_ok;
    auto contains = [&](std::unordered_map<tracer::StringId, bool>& memo, tracer::StringId id,
                        const std::string& needle) {
      if (needle.empty()) return true;
      auto [m, fresh] = memo.try_emplace(id, false);
      if (fresh) m->second = lower(reader_.string(id)).find(needle) != std::string::npos;
      return m->second;
    };
    std::unordered_map<tracer::StringId, bool> any_name, any_module;
    TDBG_RETURN_IF_ERROR(reader_.scan_ops(
        std::nullopt, 0, INT64_MAX, false, [&](const tracer::OpRecord& op) {
          if (filter.step && op.step != *filter.step) return true;
          if (!contains(name_ok, op.name, filter.name)) return true;
          if (!contains(module_ok, op.module, filter.module)) return true;
          if (!filter.any.empty() && !contains(any_name, op.name, filter.any) &&
              !contains(any_module, op.module, filter.any)) {
            return true;
          }
          seqs->push_back(op.seq);
          return true;
        }));
    // A handful of recent filters is enough for a person typing; bound the memory.
    if (cache_.size() >= 8) cache_.clear();
    cache_[key] = seqs;
    return std::shared_ptr<const std::vector<int64_t>>(seqs);
  }

  StatusOr<json> page(const Filter& filter, int64_t from, int64_t limit) {
    json rows = json::array();
    int64_t total;
    if (filter.empty() && dense_) {
      total = total_;
      TDBG_RETURN_IF_ERROR(reader_.scan_ops(std::nullopt, from, from + limit, false,
                                            [&](const tracer::OpRecord& op) {
                                              rows.push_back(op_row_json(reader_, op));
                                              return true;
                                            }));
    } else {
      TDBG_ASSIGN_OR_RETURN(auto seqs, matching(filter));
      total = static_cast<int64_t>(seqs->size());
      for (int64_t i = from; i < std::min(total, from + limit); ++i) {
        auto op = reader_.op((*seqs)[i]);
        if (op) rows.push_back(op_row_json(reader_, *op));
      }
    }
    return json{{"total", total}, {"from", from}, {"ops", rows}};
  }

 private:
  const tracer::Reader& reader_;
  int64_t total_ = 0;
  bool dense_ = true;
  std::map<std::string, std::shared_ptr<std::vector<int64_t>>> cache_;
};

void send_json(httplib::Response& res, const json& j, int status = 200) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

}  // namespace

Status serve(const tracer::Run& a, const tracer::Run* b, const ViewOptions& options) {
  ReportOptions model_options = options.report;
  model_options.mode = "server";
  TDBG_ASSIGN_OR_RETURN(json model, build_report_data(a, b, model_options));
  const std::string page = render_html(model);

  std::vector<std::unique_ptr<RunIndex>> runs;
  runs.push_back(std::make_unique<RunIndex>(*a.processes[model["runs"][0]["process"].get<size_t>()]));
  if (b) runs.push_back(std::make_unique<RunIndex>(*b->processes[model["runs"][1]["process"].get<size_t>()]));
  std::mutex mu;  // readers are not shared across threads: one request reads at a time

  httplib::Server server;
  int port = 0;
  server.set_default_headers({{"X-Content-Type-Options", "nosniff"},
                              {"Cache-Control", "no-store"},
                              {"Referrer-Policy", "no-referrer"}});
  server.set_payload_max_length(1 << 16);
  server.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    // Only the loopback names of this port: a page on another site that rebinds its DNS name
    // to 127.0.0.1 would send its own Host and is refused.
    std::string host = req.get_header_value("Host");
    std::string p = ":" + std::to_string(port);
    if (host != "127.0.0.1" + p && host != "localhost" + p) {
      res.status = 403;
      res.set_content("forbidden host\n", "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server.Get("/", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(page, "text/html; charset=utf-8");
  });
  server.Get("/api/info", [&](const httplib::Request&, httplib::Response& res) {
    json info = json::array();
    for (const auto& r : model["runs"]) {
      info.push_back({{"label", r["label"]}, {"path", r["path"]}, {"op_count", r["op_count"]},
                      {"process", r["process"]}});
    }
    send_json(res, {{"runs", info}});
  });
  auto run_of = [&](const httplib::Request& req, httplib::Response& res) -> RunIndex* {
    int64_t i;
    if (!int_param(req, "run", 0, &i) || i < 0 || i >= static_cast<int64_t>(runs.size())) {
      send_json(res, {{"error", "bad run"}}, 400);
      return nullptr;
    }
    return runs[i].get();
  };
  server.Get("/api/ops", [&](const httplib::Request& req, httplib::Response& res) {
    RunIndex* run = run_of(req, res);
    if (!run) return;
    int64_t from, limit, step;
    if (!int_param(req, "from", 0, &from) || !int_param(req, "limit", 200, &limit) ||
        !int_param(req, "step", INT64_MIN, &step) || from < 0 || limit < 1 || limit > 5000) {
      return send_json(res, {{"error", "bad from/limit/step"}}, 400);
    }
    Filter filter;
    filter.any = lower(req.get_param_value("filter"));
    filter.name = lower(req.get_param_value("name"));
    filter.module = lower(req.get_param_value("module"));
    if (step != INT64_MIN) filter.step = step;
    std::lock_guard<std::mutex> lock(mu);
    auto page_or = run->page(filter, from, limit);
    if (!page_or.ok()) return send_json(res, {{"error", page_or.status().message()}}, 500);
    send_json(res, page_or.value());
  });
  server.Get("/api/op", [&](const httplib::Request& req, httplib::Response& res) {
    RunIndex* run = run_of(req, res);
    if (!run) return;
    int64_t seq;
    if (!int_param(req, "seq", -1, &seq) || seq < 0) {
      return send_json(res, {{"error", "bad seq"}}, 400);
    }
    std::lock_guard<std::mutex> lock(mu);
    auto op = run->reader().op(seq);
    if (!op) return send_json(res, {{"error", "no such op"}}, 404);
    send_json(res, op_json(run->reader(), *op, nullptr, true));
  });

  // SIGINT/SIGTERM are taken by a thread with sigwait, blocked everywhere else (the server's
  // worker threads inherit the mask), so stopping is an ordinary call, not a signal handler.
  sigset_t stop_signals, old_mask;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);

  // Loopback only, explicitly: never 0.0.0.0.
  if (options.port == 0) {
    port = server.bind_to_any_port("127.0.0.1");
  } else {
    port = server.bind_to_port("127.0.0.1", options.port) ? options.port : -1;
  }
  if (port <= 0) {
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    return Status::Error("cannot listen on 127.0.0.1:" + std::to_string(options.port) +
                         " (port in use?)");
  }
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server.stop();
  });
  if (options.on_listening) options.on_listening(port);
  bool ok = server.listen_after_bind();
  // Wake the stopper if the server ended on its own; it is blocked in sigwait.
  pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  (void)ok;
  return Status::Ok();
}

}  // namespace tdbg::report
