// Source lines of native frames, read from the binary's debug info with binutils' addr2line at
// read time. The recorder stores a C++ frame as (binary, "NAME +0xOFFSET", line 0) and the
// binary's build-id (meta `build_id:<path>`); here the first frame asked for in a binary has
// every offset of that binary in the database looked up by one `addr2line` run, when the file
// at the path is still the binary that ran (same build-id). Display only: ops are compared by
// what was recorded, never by these lines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tracer/reader.h"

namespace tdbg::diff {

// One function/location pair of `addr2line -f` output. Unknowns are as addr2line prints them:
// function "??", file "??", line 0.
struct NativeLine {
  std::string function;
  std::string file;
  int64_t line = 0;
  bool known() const { return file != "??" && line > 0; }
};

// The output of `addr2line -a -f -i [-C]`, parsed: for each address in order, its pairs,
// innermost inlined function first (the last is the function the address is in). Lines that
// fit no group (before the first address, a function without its location) are left out.
std::vector<std::pair<uint64_t, std::vector<NativeLine>>> parse_addr2line(std::string_view output);

// The offset of a native frame, from its recorded function "NAME +0xOFFSET" (line 0), or
// nullopt for any other frame.
std::optional<uint64_t> native_frame_offset(int64_t line, const std::string& function);

// A demangled name without its parameter list and " const": "ns::f(int) const" is "ns::f";
// an operator's own parentheses stay ("X::operator()(long)" is "X::operator()").
std::string_view without_parameters(std::string_view name);

// Where a native frame is in the program's source.
struct NativeSource {
  // The frame's location: the innermost of the functions inlined at that call whose code is
  // the program's (not torch's or the C++ library's, by name and by file), else the function
  // the call is in.
  NativeLine line;
  // Every pair addr2line gave, innermost first.
  std::vector<NativeLine> inlined;
};

// The source of native frame (`binary`, `function`, `line`) of `reader`'s database, or nullopt
// when it is no native frame, or its lines cannot be read: no `addr2line` on PATH, the binary
// is gone or is no longer the one recorded (another build-id, or none was recorded), or it
// has no debug info there. Thread-safe; results are kept for the life of the process.
std::optional<NativeSource> native_source(const tracer::Reader& reader, const std::string& binary,
                                          int64_t line, const std::string& function);

// A frame recorded as (`file`, `line`, `function`) as JSON: {file, line, function}, and for a
// native frame whose line its binary gives, that source line with "binary" and "offset" where
// it was recorded, and "inlined" (every function addr2line named at that call, innermost
// first) where there are several.
nlohmann::json frame_record_json(const tracer::Reader& reader, const std::string& file,
                                 int64_t line, const std::string& function);

// One line for each binary of `reader`'s database whose frames were asked for and could not be
// given lines for a reason the user should hear ("BIN changed since the recording: C++ frames
// shown without lines", or addr2line failing on it).
std::vector<std::string> native_line_notes(const tracer::Reader& reader);

}  // namespace tdbg::diff
