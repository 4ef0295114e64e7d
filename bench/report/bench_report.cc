// bench/report: size and time of `tdbg report`, `tdbg export --chrome-trace` and a trimmed
// `tdbg bundle` on synthetic diverging run pairs of 10^4..10^6 ops (10^7 with --large), printed
// side by side so the size bound shows as a ratio to the smallest run. Runs are cached in
// --data DIR. Never asserts a speed.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tlparse/report/bundle.h"
#include "tlparse/report/chrome_trace.h"
#include "tlparse/report/fixture.h"
#include "tlparse/report/report.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
int64_t file_size(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 ? st.st_size : -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = TDBG_BENCH_DATA;
  bool large = false, quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--large")) large = true;
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
  }
  std::vector<int64_t> sizes = quick ? std::vector<int64_t>{2000}
                                     : std::vector<int64_t>{10000, 100000, 1000000};
  if (large) sizes.push_back(10000000);
  for (size_t i = 1; i <= data.size(); ++i) {  // mkdir -p
    if (i == data.size() || data[i] == '/') ::mkdir(data.substr(0, i).c_str(), 0755);
  }
  std::printf("%10s %8s %9s %10s %7s %9s %10s %9s %10s\n", "ops/run", "gen s", "report s",
              "report KB", "x 1st", "export s", "export MB", "bundle s", "bundle KB");
  double first_kb = 0;
  for (int64_t n : sizes) {
    std::string dir = data + "/n" + std::to_string(n);
    double gen = 0;
    if (file_size(dir + "/b/rank0.sqlite") <= 0) {
      ::mkdir(dir.c_str(), 0755);
      tdbg::report::fixture::FixtureOptions o;
      o.ops = n;
      o.diverge_at = n * 7 / 10;
      o.secrets = false;
      auto t = Clock::now();
      tdbg::Status st = tdbg::report::fixture::make_runs(dir, o);
      if (!st.ok()) {
        std::fprintf(stderr, "bench_report: %s\n", st.message().c_str());
        return 2;
      }
      gen = seconds_since(t);
    }
    auto a = tdbg::tracer::Run::Open(dir + "/a");
    auto b = tdbg::tracer::Run::Open(dir + "/b");
    if (!a.ok() || !b.ok()) {
      std::fprintf(stderr, "bench_report: cannot open %s\n", dir.c_str());
      return 2;
    }
    auto t = Clock::now();
    auto model = tdbg::report::build_report_data(a.value(), &b.value(), tdbg::report::ReportOptions{});
    if (!model.ok()) {
      std::fprintf(stderr, "bench_report: %s\n", model.status().message().c_str());
      return 2;
    }
    auto written = tdbg::report::write_report(model.value(), dir + "/report");
    double report_s = seconds_since(t);
    double kb = file_size(dir + "/report/index.html") / 1024.0;
    if (first_kb == 0) first_kb = kb;

    double export_s = -1, export_mb = -1;
    if (n <= 1000000) {  // the trace of 10^7 ops is a few GB: not worth the disk here
      std::string trace = dir + "/trace.json";
      std::FILE* f = std::fopen(trace.c_str(), "wb");
      t = Clock::now();
      (void)tdbg::report::write_chrome_trace(a.value(), &b.value(), {}, f);
      std::fclose(f);
      export_s = seconds_since(t);
      export_mb = file_size(trace) / 1048576.0;
      std::remove(trace.c_str());
    }
    tdbg::report::BundleOptions bo;
    bo.sources = false;
    t = Clock::now();
    auto bundled = tdbg::report::write_bundle(dir + "/a", dir + "/b", dir + "/bug.tar.gz", bo);
    double bundle_s = seconds_since(t);
    double bundle_kb = bundled.ok() ? file_size(dir + "/bug.tar.gz") / 1024.0 : -1;
    std::printf("%10lld %8.1f %9.2f %10.0f %7.2f %9.2f %10.1f %9.2f %10.0f\n",
                static_cast<long long>(n), gen, report_s, kb, kb / first_kb, export_s, export_mb,
                bundle_s, bundle_kb);
    std::fflush(stdout);
  }
  return 0;
}
