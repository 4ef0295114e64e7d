// `tdbg view`: the viewer served from 127.0.0.1 (a small POSIX-socket HTTP server) with a
// read-only JSON API for paging through whole runs (millions of ops). Serves only the embedded
// viewer and the given runs.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"
#include "tlparse/report/report.h"
#include "tracer/reader.h"

namespace tdbg::report {

struct ViewOptions {
  int port = 8765;                       // 0 picks a free port
  ReportOptions report;                  // the model embedded in the page ("server" mode)
  std::function<void(int port)> on_listening;  // called once the socket is bound
};

// Serves until SIGINT or SIGTERM (handled here, on a dedicated thread), then returns Ok.
// Routes (GET only): / (the viewer), /api/info, /api/ops?run=&from=&limit=&filter=&name=
// &module=&step=, /api/op?run=&seq=. Requests whose Host is not this loopback address are
// refused (DNS rebinding).
Status serve(const tracer::Run& a, const tracer::Run* b, const ViewOptions& options);

}  // namespace tdbg::report
