// `tdbg bundle`: one .tar.gz to attach to an issue (databases, report, facts, sources, README,
// secrets redacted); `--inspect` lists a bundle and `--extract` unpacks one, both safely.
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "tlparse/commands.h"
#include "tlparse/report/bundle.h"

namespace tdbg::cli {

void add_bundle_command(CLI::App& app) {
  struct Args {
    std::string run_a, run_b, out, inspect, extract;
    report::BundleOptions options;
    bool no_sources = false;
    std::string align_steps;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("bundle", "Write a shareable bug-report bundle (.tar.gz), or inspect one");
  cmd->add_option("RUN", args->run_a, "Run directory or database");
  cmd->add_option("RUN_B", args->run_b, "Second run, to compare with the first");
  cmd->add_option("-o,--output", args->out, "Bundle to write (bug.tar.gz), or folder for --extract");
  cmd->add_flag("--keep-all", args->options.keep_all, "Keep every op (no trimming of large databases)");
  cmd->add_option("--window", args->options.window_ops,
                  "Ops kept around the divergence when trimming (1 or more)")
      ->check(whole_number_in(int64_t{1}, int64_t{1} << 40));
  cmd->add_flag("--no-sources", args->no_sources, "Leave out snapshots of the user's source files");
  cmd->add_flag("--redact-paths", args->options.redact_paths,
                "Replace the home directory and user name in every path and string");
  add_align_steps_option(cmd, &args->align_steps);
  cmd->add_option("--inspect", args->inspect, "List and summarize a bundle");
  cmd->add_option("--extract", args->extract, "Unpack a bundle into the folder given with -o");
  cmd->callback([args] {
    if (!args->inspect.empty() || !args->extract.empty()) {
      // `--inspect B.tar.gz extra`: a run given too is not read; say so, not ignore it.
      if (!args->run_a.empty() || !args->inspect.empty() == !args->extract.empty())
        return fail("bundle", !args->run_a.empty()
                                  ? "--inspect and --extract take only the bundle (unexpected '" +
                                        args->run_a + "')"
                                  : "give --inspect or --extract, not both");
      const std::string& path = args->inspect.empty() ? args->extract : args->inspect;
      if (!args->extract.empty()) {
        if (args->out.empty()) return fail("bundle", "--extract needs -o FOLDER");
        // Not into a run folder (its recording would gain another run's files).
        if (const std::string why = output_refusal(args->out, {}, OutputKind::kDirectory);
            !why.empty())
          return fail("bundle", args->out + ": not extracted there: " + why);
        // A folder this made is removed again where the extraction fails half way (a name too
        // long for the file system, a full disk): nothing half written is left.
        std::error_code ec;
        const bool existed = std::filesystem::exists(args->out, ec);
        Status st = report::extract_bundle(path, args->out);
        if (!st.ok()) {
          if (!existed) std::filesystem::remove_all(args->out, ec);
          return fail("bundle", st.message());
        }
        std::printf("%s\n", args->out.c_str());
        return;
      }
      std::string readme;
      auto entries = report::inspect_bundle(path, &readme);
      if (!entries.ok()) return fail("bundle", entries.status().message());
      int64_t total = 0;
      for (const auto& e : entries.value()) {
        std::printf("%12lld  %s%s\n", static_cast<long long>(e.size), e.path.c_str(),
                    e.directory ? "/" : "");
        total += e.size;
      }
      std::printf("%zu entries, %lld bytes\n", entries.value().size(), static_cast<long long>(total));
      if (!readme.empty()) std::printf("\n%s", readme.c_str());
      return;
    }
    if (args->run_a.empty() || args->out.empty()) return fail("bundle", "needs RUN [RUN_B] -o bug.tar.gz");
    if (const std::string why = output_refusal(args->out, {args->run_a, args->run_b}, OutputKind::kGzip);
        !why.empty())
      return fail("bundle", args->out + ": not written: " + why);
    if (std::string why = align_steps_error(args->align_steps, !args->run_b.empty(),
                                            &args->options.align_steps);
        !why.empty())
      return fail("bundle", why);
    args->options.sources = !args->no_sources;
    auto result = report::write_bundle(args->run_a, args->run_b, args->out, args->options);
    if (!result.ok()) return fail("bundle", result.status().message());
    const auto& r = result.value();
    std::printf("%s: %zu files, %lld of %lld ops kept", args->out.c_str(), r.entries.size(),
                static_cast<long long>(r.ops_kept), static_cast<long long>(r.ops_total));
    if (!r.redacted_names.empty()) std::printf(", %zu secret(s) redacted", r.redacted_names.size());
    std::printf("\n");
    for (const std::string& p : r.still_recording)
      std::fprintf(stderr, "tdbg bundle: note: %s was still recording: the bundle holds what it had "
                           "committed when bundling began\n", p.c_str());
  });
}

}  // namespace tdbg::cli
