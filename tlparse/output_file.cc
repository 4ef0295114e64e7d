// Why a command must not write its output file where the user pointed it: over a recording
// (a run's database, its log, a file in the run folder it reads) or over a file that is no
// output of the command (`tdbg bundle run -o train.py`). A refused write loses nothing; an
// accepted one replaces the file whole (written beside it, then renamed).
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "tlparse/commands.h"
#include "tlparse/report/bundle.h"
#include "tracer/reader.h"

namespace tdbg::cli {
namespace {

namespace fs = std::filesystem;

// The file's first bytes ("" when it cannot be read).
std::string head(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes(n, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(n));
  bytes.resize(static_cast<size_t>(in.gcount()));
  return bytes;
}

bool is_database(const std::string& bytes) {
  static const char kSqlite[] = "SQLite format 3";  // with its NUL: 16 bytes
  if (bytes.size() >= sizeof(kSqlite) && std::memcmp(bytes.data(), kSqlite, sizeof(kSqlite)) == 0)
    return true;
  // A write-ahead log (big-endian magic 0x377f0682 or 0x377f0683).
  return bytes.size() >= 4 && static_cast<unsigned char>(bytes[0]) == 0x37 &&
         static_cast<unsigned char>(bytes[1]) == 0x7f && static_cast<unsigned char>(bytes[2]) == 0x06 &&
         (static_cast<unsigned char>(bytes[3]) & 0xfe) == 0x82;
}

}  // namespace

std::string output_refusal(const std::string& out, const std::vector<std::string>& runs,
                           OutputKind kind) {
  if (out == "-") return "";
  std::error_code ec;
  const fs::path target = fs::weakly_canonical(out, ec);
  if (ec) return "";  // the write says why it fails
  // A run's manifest, wherever it is.
  if (target.filename() == tracer::kRunManifest)
    return "it is a run folder's manifest: name another file";
  for (const std::string& run : runs) {
    if (run.empty()) continue;
    fs::path from = fs::weakly_canonical(run, ec);
    if (ec) continue;
    // One database of a run folder given: the folder is the run's all the same.
    if (!fs::is_directory(from, ec) && fs::exists(from.parent_path() / tracer::kRunManifest, ec))
      from = from.parent_path();
    if (fs::is_directory(from, ec)) {
      const fs::path rel = target.lexically_relative(from);
      if (!rel.empty() && *rel.begin() != "..")
        return std::string(rel == "." ? "it is the run folder " : "it is inside the run folder ") +
               run + " that it is made from: name a " +
               (kind == OutputKind::kDirectory ? "folder" : "file") +
               " outside it, so that the recording stays as it is";
    } else if (target == from || target.string() == from.string() + "-wal" ||
               target.string() == from.string() + "-shm" ||
               target.string() == from.string() + "-journal") {
      return "it is a file of the run " + run + ": name another file";
    }
  }
  // Another run's folder, or a folder inside one: the output would mix into that recording.
  for (fs::path p = kind == OutputKind::kDirectory ? target : target.parent_path(); !p.empty();
       p = p.parent_path()) {
    if (fs::exists(p / tracer::kRunManifest, ec))
      return "it is " + std::string(p == target ? "" : "inside ") + "the run folder " + p.string() +
             ": name a " + (kind == OutputKind::kDirectory ? "folder" : "file") +
             " outside it, so that the recording stays as it is";
    if (p == p.parent_path()) break;
  }
  // A symbolic link, even one that leads nowhere: the output is renamed over the name, which
  // would replace the link rather than write where it points.
  // (A report's folder given as a link is written into, not replaced.)
  struct stat link;
  if (kind != OutputKind::kDirectory && ::lstat(out.c_str(), &link) == 0 && S_ISLNK(link.st_mode))
    return "it is a symbolic link, which writing would replace: name the file itself";
  if (kind == OutputKind::kDirectory) {
    // A folder of run databases without a manifest (recorded with LD_PRELOAD and TDBG_OUT,
    // or a bundle's runs/a): the output would mix into that recording too.
    for (const auto& entry : fs::directory_iterator(target, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.size() > 7 && name.compare(name.size() - 7, 7, ".sqlite") == 0 &&
          is_database(head(entry.path().string(), 16)))
        return "it holds run databases (" + name +
               "): name a folder outside it, so that the recording stays as it is";
    }
    // A page of someone else's where the report's would go.
    const std::string index = (target / "index.html").string();
    struct stat st;
    if (::stat(index.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        head(index, 256).find("The tdbg viewer page") == std::string::npos)
      return index + " exists and is not a tdbg report: remove it first, or name another folder";
    return "";
  }
  struct stat st;
  if (::stat(out.c_str(), &st) != 0) return "";
  // A device, a pipe or a socket (`-o /dev/stdout`): the file is written aside and renamed
  // over the name, which would replace the device itself (as root, /dev/full).
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    return "it is not a regular file (a device, a pipe or a socket), which writing would "
           "replace: name a file";
  if (!S_ISREG(st.st_mode) || st.st_size == 0) return "";
  const std::string bytes = head(out, 32);
  if (is_database(bytes))
    return "it is a database (a recording?), which writing would replace: name another file";
  if (kind == OutputKind::kGzip) {
    // An earlier bundle: a .tar.gz whose entries are a bundle's (its README and facts).
    bool bundle = false;
    if (bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
        static_cast<unsigned char>(bytes[1]) == 0x8b) {
      auto entries = report::inspect_bundle(out, nullptr);
      if (entries.ok()) {
        bool readme = false, facts = false;
        for (const report::BundleEntry& e : *entries) {
          const fs::path name(e.path);
          readme = readme || name.filename() == "README.md";
          facts = facts || name.filename() == "facts.json";
        }
        bundle = readme && facts;
      }
    }
    if (!bundle)
      return "it exists and is not a tdbg bundle: remove it first, or name another file";
  } else if (kind == OutputKind::kJson) {
    // An earlier trace: JSON with trace events near its start.
    const std::string start = head(out, 4096);
    if (start.find("\"traceEvents\"") == std::string::npos)
      return "it exists and is not a Chrome trace: remove it first, or name another file";
  }
  return "";
}

}  // namespace tdbg::cli
