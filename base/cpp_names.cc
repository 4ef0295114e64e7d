// Tells torch's and the C++ runtime's functions from the program's by their demangled names:
// the recorder leaves such frames out of a C++ call site, and `tdbg` skips such inlined
// functions when it reads a frame's source line.
#include "base/cpp_names.h"

#include <cctype>
#include <cstring>
#include <vector>

namespace tdbg {

bool in_library_namespace(const std::string& name) {
  // The qualified name: after a template instance's return type ("at::Tensor c10::..."), up
  // to the parameter list.
  size_t start = 0, end = name.size();
  int depth = 0;
  static const std::string kAnonymous = "(anonymous namespace)";
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<') {
      ++depth;
    } else if (c == '>') {
      --depth;
    } else if (c == '(' && depth == 0) {
      if (name.compare(i, kAnonymous.size(), kAnonymous) == 0) {
        i += kAnonymous.size() - 1;
        continue;
      }
      end = i;
      break;
    } else if (c == ' ' && depth == 0) {
      start = i + 1;
    }
  }
  if (start >= end) return false;
  const std::string qualified = name.substr(start, end - start);
  static const char* const kNamespaces[] = {"at::",     "c10::",      "torch::",   "std::",
                                            "caffe2::", "__gnu_cxx::", "pybind11::", "__cxxabiv1::"};
  auto library = [&](const std::string& id) {
    for (const char* ns : kNamespaces)
      if (id.compare(0, std::strlen(ns), ns) == 0) return true;
    return false;
  };
  if (!library(qualified)) return false;
  // A template instantiated for one of the program's types calls back into the program's code,
  // which the compiler may have inlined there: `CppNode<Swish>::apply` runs `Swish::backward`,
  // `AnyModuleHolder<Net>::forward` runs `Net::forward`. Such a frame is the program's.
  const size_t open = qualified.find('<');
  if (open == std::string::npos) return true;
  static const char* const kBuiltins[] = {"void",  "bool",     "char",   "short",  "int",
                                          "long",  "float",    "double", "signed", "unsigned",
                                          "const", "volatile", "auto",   "decltype"};
  // Only what stands between angle brackets: the names between them at the outer level are the
  // template's own members (`ModuleHolder<LinearImpl>::ModuleHolder<int, int>`).
  const std::string arguments = qualified.substr(open);
  int level = 0;
  for (size_t i = 0; i < arguments.size();) {
    const bool anonymous = arguments.compare(i, kAnonymous.size(), kAnonymous) == 0;
    if (arguments[i] == '<' || arguments[i] == '>') {
      level += arguments[i] == '<' ? 1 : -1;
      ++i;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(arguments[i]))) {  // a number: "3ul"
      while (i < arguments.size() && std::isalnum(static_cast<unsigned char>(arguments[i]))) ++i;
      continue;
    }
    if (!anonymous && !std::isalpha(static_cast<unsigned char>(arguments[i])) && arguments[i] != '_') {
      ++i;
      continue;
    }
    if (level <= 0) {  // a member's name between template argument lists
      while (i < arguments.size() && (std::isalnum(static_cast<unsigned char>(arguments[i])) ||
                                      arguments[i] == '_'))
        ++i;
      continue;
    }
    size_t j = i;  // one qualified identifier: letters, digits, '_', "::", "(anonymous namespace)"
    while (j < arguments.size()) {
      if (arguments.compare(j, kAnonymous.size(), kAnonymous) == 0) {
        j += kAnonymous.size();
        continue;
      }
      const char d = arguments[j];
      if (!std::isalnum(static_cast<unsigned char>(d)) && d != '_' && d != ':') break;
      ++j;
    }
    const std::string id = arguments.substr(i, j - i);
    // A member of the template argument before it (`AnyModuleHolder<LinearImpl>::
    // InvokeForward`): that argument was judged already.
    const bool member = i >= 2 && arguments[i - 1] == ':' && arguments[i - 2] == ':';
    i = j;
    if (member) continue;
    if (id.rfind(kAnonymous, 0) == 0) return false;  // a type of the program's own file
    if (library(id) || id.rfind("__", 0) == 0) continue;
    bool builtin = false;
    for (const char* b : kBuiltins) builtin = builtin || id == b;
    if (!builtin) return false;  // a type of the program (global or its own namespace)
  }
  return true;
}

namespace {

// Whether `name[i]` opens or closes a bracket: '<' and '>' of an operator's name
// ("operator<<", "operator->") are not brackets.
int bracket(const std::string& name, size_t i) {
  const char c = name[i];
  if (c != '<' && c != '>' && c != '(' && c != ')' && c != '{' && c != '}') return 0;
  if (c == '<' || c == '>') {
    const size_t op = name.rfind("operator", i);
    if (op != std::string::npos && i - op <= 10 && name.find_first_of("(<", op + 8) >= i) return 0;
  }
  return c == '<' || c == '(' || c == '{' ? 1 : -1;
}

// Splits `name` at the "::" that stand outside any brackets.
std::vector<std::string> scopes(const std::string& name) {
  std::vector<std::string> out;
  int depth = 0;
  size_t begin = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    depth += bracket(name, i);
    if (depth == 0 && name.compare(i, 2, "::") == 0) {
      out.push_back(name.substr(begin, i - begin));
      begin = i + 2;
      ++i;
    }
  }
  out.push_back(name.substr(begin));
  return out;
}

}  // namespace

std::string readable_function_name(const std::string& full, size_t width) {
  // "operator() inlined in main" (a lambda's body that debug info names without its class):
  // each name made readable.
  static const std::string kInlined = " inlined in ";
  if (const size_t at = full.find(kInlined); at != std::string::npos)
    return readable_function_name(full.substr(0, at), width) + kInlined +
           readable_function_name(full.substr(at + kInlined.size()), width);
  std::string name = full;
  // A lambda's parameters: "{lambda(at::Tensor, int)#2}" is "{lambda#2}".
  for (size_t at = name.find("{lambda("); at != std::string::npos;
       at = name.find("{lambda(", at + 1)) {
    int depth = 0;
    size_t close = at + 7;
    for (; close < name.size(); ++close) {
      if (name[close] == '(') ++depth;
      if (name[close] == ')' && --depth == 0) break;
    }
    if (close < name.size()) name.erase(at + 7, close - (at + 7) + 1);
  }
  // A return type: what stands before the last space outside brackets ("at::Tensor f<bool>",
  // "std::enable_if<...>::type Function<F>::apply<...>").
  {
    int depth = 0;
    size_t start = 0;
    for (size_t i = 0; i < name.size(); ++i) {
      depth += bracket(name, i);
      if (depth == 0 && name[i] == ' ' && name.compare(0, i, "operator") != 0 &&
          !(i >= 8 && name.compare(i - 8, 8, "operator") == 0))
        start = i + 1;
    }
    name = name.substr(start);
  }
  if (name.size() <= width) return name;
  // Template arguments, innermost scopes' last: "Function<ScaleFn>::apply<ScaleFn, at::Tensor&>"
  // keeps "Function<ScaleFn>" if it can.
  std::vector<std::string> parts = scopes(name);
  auto joined = [&](size_t from) {
    std::string out;
    for (size_t k = from; k < parts.size(); ++k) out += (k > from ? "::" : "") + parts[k];
    return out;
  };
  for (size_t k = parts.size(); k-- > 0 && joined(0).size() > width;) {
    const size_t open = parts[k].find('<');
    if (open != std::string::npos && parts[k].compare(0, 8, "operator") != 0 &&
        parts[k].size() > open + 5)
      parts[k] = parts[k].substr(0, open) + "<...>";
  }
  // The outer scopes, whole names at a time; the innermost stays whole.
  if (joined(0).size() <= width || parts.size() == 1) return joined(0);
  size_t from = 1;
  while (from + 1 < parts.size() && joined(from).size() + 5 > width) ++from;
  return "...::" + joined(from);
}

}  // namespace tdbg
