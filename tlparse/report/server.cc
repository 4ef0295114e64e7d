// The `tdbg view` HTTP server: a small HTTP/1.1 server on POSIX sockets bound to 127.0.0.1,
// GET only, one thread per connection, serving the embedded viewer and JSON pages of ops read
// through tracer::Reader (never a file from disk).
#include "tlparse/report/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "base/json_text.h"
#include "tlparse/report/redact.h"

namespace tdbg::report {
namespace {

using nlohmann::json;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A parsed GET request: path and decoded query parameters, lower-cased header names.
struct Request {
  std::string method, path;
  std::map<std::string, std::string> params, headers;
  bool has_param(const std::string& k) const { return params.count(k) > 0; }
  std::string param(const std::string& k) const {
    auto it = params.find(k);
    return it == params.end() ? "" : it->second;
  }
  std::string header(const std::string& k) const {
    auto it = headers.find(k);
    return it == headers.end() ? "" : it->second;
  }
};

struct Response {
  int status = 200;
  std::string type = "text/plain; charset=utf-8";
  std::string body;
};

std::string url_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::strtol(s.substr(i + 1, 2).c_str(), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// Parses the request head (up to the blank line); false when it is not HTTP.
bool parse_request(const std::string& head, Request* req) {
  size_t eol = head.find("\r\n");
  std::string line = head.substr(0, eol);
  size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string::npos || sp2 <= sp1 || line.compare(sp2 + 1, 5, "HTTP/") != 0) return false;
  req->method = line.substr(0, sp1);
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  size_t q = target.find('?');
  req->path = url_decode(target.substr(0, q));
  if (q != std::string::npos) {
    std::string query = target.substr(q + 1);
    size_t pos = 0;
    while (pos <= query.size()) {
      size_t amp = query.find('&', pos);
      std::string kv = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
      size_t eq = kv.find('=');
      if (!kv.empty()) {
        req->params[url_decode(kv.substr(0, eq))] =
            eq == std::string::npos ? "" : url_decode(kv.substr(eq + 1));
      }
      if (amp == std::string::npos) break;
      pos = amp + 1;
    }
  }
  size_t pos = eol == std::string::npos ? head.size() : eol + 2;
  while (pos < head.size()) {
    size_t end = head.find("\r\n", pos);
    if (end == std::string::npos) end = head.size();
    std::string h = head.substr(pos, end - pos);
    size_t colon = h.find(':');
    if (colon != std::string::npos) {
      std::string name = lower(h.substr(0, colon));
      size_t v = h.find_first_not_of(" \t", colon + 1);
      req->headers[name] = v == std::string::npos ? "" : h.substr(v);
    }
    pos = end + 2;
  }
  return true;
}

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    default: return "Internal Server Error";
  }
}

bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// One connection: read one request head (bounded size and time), answer, close.
void serve_connection(int fd, const std::function<void(const Request&, Response*)>& handle) {
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  std::string head;
  char buf[4096];
  Response res;
  bool complete = false;
  while (head.size() < 32768) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    head.append(buf, static_cast<size_t>(n));
    size_t end = head.find("\r\n\r\n");
    if (end != std::string::npos) {
      head.resize(end);
      complete = true;
      break;
    }
  }
  Request req;
  if (!complete) {
    if (head.empty()) {
      ::close(fd);
      return;
    }
    res.status = head.size() >= 32768 ? 431 : 400;
  } else if (!parse_request(head, &req)) {
    res.status = 400;
  } else if (req.method != "GET" && req.method != "HEAD") {
    res.status = 405;  // read-only
  } else {
    handle(req, &res);
  }
  if (res.status != 200 && res.body.empty()) res.body = std::string(reason(res.status)) + "\n";
  std::string out = "HTTP/1.1 " + std::to_string(res.status) + " " + reason(res.status) +
                    "\r\nContent-Type: " + res.type +
                    "\r\nContent-Length: " + std::to_string(res.body.size()) +
                    "\r\nConnection: close\r\nCache-Control: no-store\r\n"
                    "X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n\r\n";
  if (req.method != "HEAD") out += res.body;
  write_all(fd, out);
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
}

// An integer query parameter, or `fallback` when absent; false when present but malformed.
bool int_param(const Request& req, const char* name, int64_t fallback, int64_t* out) {
  if (!req.has_param(name)) {
    *out = fallback;
    return true;
  }
  std::string v = req.param(name);
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

void send_json(Response* res, const json& j, int status = 200) {
  res->status = status;
  res->type = "application/json";
  res->body = json_text(j);
}

}  // namespace

Status serve(const tracer::Run& a, const tracer::Run* b, const ViewOptions& options) {
  ReportOptions model_options = options.report;
  model_options.mode = "server";
  TDBG_ASSIGN_OR_RETURN(json model, build_report_data(a, b, model_options));
  // Credentials in a command line, the environment or a recorded string are left out, as the
  // report and the bundle leave them out: of the page and of every answer of the API.
  Redactor redactor(/*redact_paths=*/false, "", "");
  redactor.remember_environment(environ);
  model = redactor.apply_report(std::move(model));
  const std::string page = render_html(model);

  std::vector<std::unique_ptr<RunIndex>> runs;
  runs.push_back(std::make_unique<RunIndex>(*a.processes[model["runs"][0]["process"].get<size_t>()]));
  if (b) runs.push_back(std::make_unique<RunIndex>(*b->processes[model["runs"][1]["process"].get<size_t>()]));
  std::mutex mu;  // readers are not shared across threads: one request reads at a time
  int port = 0;

  auto run_of = [&](const Request& req, Response* res) -> RunIndex* {
    int64_t i;
    if (!int_param(req, "run", 0, &i) || i < 0 || i >= static_cast<int64_t>(runs.size())) {
      send_json(res, {{"error", "bad run"}}, 400);
      return nullptr;
    }
    return runs[i].get();
  };
  auto handle = [&](const Request& req, Response* res) {
    // Only the loopback names of this port: a page on another site that rebinds its DNS name
    // to 127.0.0.1 would send its own Host and is refused.
    std::string host = req.header("host");
    std::string p = ":" + std::to_string(port);
    if (host != "127.0.0.1" + p && host != "localhost" + p) {
      res->status = 403;
      return;
    }
    if (req.path == "/" || req.path == "/index.html") {
      res->type = "text/html; charset=utf-8";
      res->body = page;
    } else if (req.path == "/api/info") {
      json info = json::array();
      for (const auto& r : model["runs"]) {
        info.push_back({{"label", r["label"]}, {"path", r["path"]}, {"op_count", r["op_count"]},
                        {"process", r["process"]}});
      }
      send_json(res, {{"runs", info}});
    } else if (req.path == "/api/ops") {
      RunIndex* run = run_of(req, res);
      if (!run) return;
      int64_t from, limit, step;
      if (!int_param(req, "from", 0, &from) || !int_param(req, "limit", 200, &limit) ||
          !int_param(req, "step", INT64_MIN, &step) || from < 0 || limit < 1 || limit > 5000) {
        return send_json(res, {{"error", "bad from/limit/step"}}, 400);
      }
      Filter filter;
      filter.any = lower(req.param("filter"));
      filter.name = lower(req.param("name"));
      filter.module = lower(req.param("module"));
      if (step != INT64_MIN) filter.step = step;
      std::lock_guard<std::mutex> lock(mu);
      auto page_or = run->page(filter, from, limit);
      if (!page_or.ok()) return send_json(res, {{"error", page_or.status().message()}}, 500);
      send_json(res, redactor.apply_json(page_or.value()));
    } else if (req.path == "/api/op") {
      RunIndex* run = run_of(req, res);
      if (!run) return;
      int64_t seq;
      if (!int_param(req, "seq", -1, &seq) || seq < 0) {
        return send_json(res, {{"error", "bad seq"}}, 400);
      }
      std::lock_guard<std::mutex> lock(mu);
      auto op = run->reader().op(seq);
      if (!op) return send_json(res, {{"error", "no such op"}}, 404);
      send_json(res, redactor.apply_json(op_json(run->reader(), *op, nullptr, true)));
    } else {
      res->status = 404;
    }
  };

  // Loopback only, explicitly: never INADDR_ANY.
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return Status::Error(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(options.port));
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener, 64) != 0) {
    std::string why = std::strerror(errno);
    ::close(listener);
    return Status::Error("cannot listen on 127.0.0.1:" + std::to_string(options.port) + ": " + why);
  }
  socklen_t len = sizeof addr;
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);

  // SIGINT/SIGTERM are taken by a thread with sigwait, blocked everywhere else (connection
  // threads inherit the mask), so stopping is a write to a pipe, not work in a signal handler.
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    ::close(listener);
    return Status::Error(std::string("pipe: ") + std::strerror(errno));
  }
  // A shell starts background jobs with SIGINT ignored, and an ignored signal is discarded
  // even while blocked: restore the default so that `kill -INT` reaches sigwait.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  struct sigaction old_int, old_term;
  sigaction(SIGINT, &default_action, &old_int);
  sigaction(SIGTERM, &default_action, &old_term);
  sigset_t stop_signals, old_mask;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    char c = 1;
    (void)!::write(wake[1], &c, 1);
  });
  if (options.on_listening) options.on_listening(port);

  std::atomic<int> active{0};
  while (true) {
    pollfd fds[2] = {{listener, POLLIN, 0}, {wake[0], POLLIN, 0}};
    int n = ::poll(fds, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (fds[1].revents & POLLIN)) break;
    if (!(fds[0].revents & POLLIN)) continue;
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    // A browser keeps idle sockets open; each connection gets its own (bounded) thread.
    if (active.load() >= 64) {
      ::close(fd);
      continue;
    }
    ++active;
    std::thread([fd, &handle, &active] {
      serve_connection(fd, handle);
      --active;
    }).detach();
  }
  ::close(listener);
  // Connections in flight finish first: they use `handle` and the readers on this stack (each
  // is bounded by its 5 s socket timeouts plus one request's work).
  while (active.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  pthread_kill(stopper.native_handle(), SIGTERM);  // wakes it if the loop ended otherwise
  stopper.join();
  ::close(wake[0]);
  ::close(wake[1]);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return Status::Ok();
}

}  // namespace tdbg::report
