// The web viewer's files (viewer/src), compiled into tdbg by viewer/CMakeLists.txt so that
// `tdbg report` and `tdbg view` need no files beside the executable and no npm at run time.
#pragma once

#include <string_view>

namespace tdbg::viewer {

// The contents of viewer/src/`name` ("index.html", "viewer.js", "viewer.css"); empty if unknown.
std::string_view asset(std::string_view name);

}  // namespace tdbg::viewer
