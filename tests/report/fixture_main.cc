// `tdbg-report-fixture DIR [--ops N] [--diverge-at S [--heal]] [--nonfinite-at S] [--insert-at S]
// [--inserted-ops N] [--lr-from S] [--killed] [--hostile] [--no-secrets] [--single]`: writes a synthetic pair of runs
// (DIR/a, DIR/b, DIR/train.py) for the end-to-end and browser tests of report, view, export
// and bundle.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tlparse/report/fixture.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s DIR [--ops N] [--diverge-at S [--heal]] [--nonfinite-at S] [--insert-at S] "
                 "[--inserted-ops N] [--lr-from S] [--killed] [--hostile] [--no-secrets] [--single]\n",
                 argv[0]);
    return 2;
  }
  tdbg::report::fixture::FixtureOptions o;
  std::string dir = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> long long {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::atoll(argv[++i]);
    };
    if (a == "--ops") o.ops = next();
    else if (a == "--diverge-at") o.diverge_at = next();
    else if (a == "--nonfinite-at") o.nonfinite_at = next();
    else if (a == "--insert-at") o.insert_at = next();
    else if (a == "--inserted-ops") o.inserted_ops = static_cast<int>(next());
    else if (a == "--heal") o.heal = true;
    else if (a == "--lr-from") o.lr_from = next();
    else if (a == "--killed") o.killed = true;
    else if (a == "--hostile") o.hostile = true;
    else if (a == "--no-secrets") o.secrets = false;
    else if (a == "--single") o.with_b = false;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  ::mkdir(dir.c_str(), 0755);  // may exist already
  tdbg::Status st = tdbg::report::fixture::make_runs(dir, o);
  if (!st.ok()) {
    std::fprintf(stderr, "tdbg-report-fixture: %s\n", st.message().c_str());
    return 2;
  }
  return 0;
}
