// Bug-report bundles (`tdbg bundle`): one .tar.gz with the run databases (trimmed, redacted),
// the report, environment facts, command lines, source snapshots and a README; and the safe
// reading side (`--inspect`, `--extract`) that never writes outside its target folder.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tdbg::report {

struct BundleOptions {
  // Keep every op. Otherwise a process with more than `window_ops` ops keeps only the
  // `window_ops` ops centred on the first divergence (or the first non-finite value, or the
  // end of the run when neither exists).
  bool keep_all = false;
  int64_t window_ops = 20000;
  bool sources = true;                          // snapshots of the user files the stacks name
  int64_t max_source_bytes = 1 << 20;           // per file; larger files are left out
  int64_t max_sources_total = 16 << 20;         // all snapshots together
  bool redact_paths = false;                    // replace `home` and `user` everywhere
  std::string home;                             // default: $HOME
  std::string user;                             // default: the login name
  std::string tmp_dir;                          // where the databases are rewritten; default $TMPDIR or /tmp
  // `tdbg diff --align-steps`: the steps paired, {-1, -1} for none. A run's earlier phases
  // (`diff::keep_aligned_phases`) are left out of the bundle, as the diff leaves them out.
  std::pair<int64_t, int64_t> align_steps = {-1, -1};
};

struct BundleResult {
  std::vector<std::string> entries;             // paths inside the archive
  std::vector<std::string> redacted_names;
  int64_t ops_kept = 0, ops_total = 0;
  // The processes that were still recording ("run a's vm-12.sqlite (pid 12)"): read as they
  // were when the bundle began.
  std::vector<std::string> still_recording;
};

// Writes `out` (a .tar.gz) from run `run_a` and, when not empty, `run_b`.
StatusOr<BundleResult> write_bundle(const std::string& run_a, const std::string& run_b,
                                    const std::string& out, const BundleOptions& options);

// One entry of a bundle as read back.
struct BundleEntry {
  std::string path;
  int64_t size = 0;
  bool directory = false;
};

// Reads every entry of `path`, rejecting unsafe ones (absolute paths, `..`, links, devices,
// anything but files and folders) and malformed archives with a one-line error. `readme`
// receives README.md's text when present.
StatusOr<std::vector<BundleEntry>> inspect_bundle(const std::string& path, std::string* readme);

// Extracts `path` into `dir` (created; must be empty or absent) after checking every entry as
// `inspect_bundle` does; files are created with O_EXCL|O_NOFOLLOW below `dir` only.
Status extract_bundle(const std::string& path, const std::string& dir);

}  // namespace tdbg::report
