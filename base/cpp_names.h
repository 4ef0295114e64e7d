// Which demangled C++ function names belong to torch or to the C++ runtime rather than to the
// program: shared by the recorder (which frames are a C++ op's call site) and `tdbg` (which of
// the functions inlined at a call site is the program's line).
#pragma once

#include <string>

namespace tdbg {

// Whether a demangled function name belongs to torch's or the C++ runtime's namespaces
// ("at::Tensor c10::Dispatcher::call<...>(...)", "std::function<...>::operator()() const"): at::,
// c10::, torch::, std::, caffe2::, __gnu_cxx::, pybind11::, __cxxabiv1::. A template of those
// namespaces instantiated for one of the program's types (`torch::autograd::CppNode<Swish>::
// apply`, `AnyModuleHolder<Net>::forward`) counts as the program's: its code may have been
// inlined there.
bool in_library_namespace(const std::string& demangled);

// A demangled function name, without its parameter list, made short enough to read in one
// line (at most `width` characters where it can be): without a template instance's return
// type ("at::Tensor mylib::loss<bool>" is "mylib::loss<bool>"), a lambda's parameters
// ("main::{lambda(at::Tensor, int)#2}::operator()" is "main::{lambda#2}::operator()"), and,
// where still too long, template arguments ("Function<ScaleFn>::apply<...>"), then the
// outer scopes ("...::Inner::f"), cut only between names.
std::string readable_function_name(const std::string& name_without_parameters, size_t width = 48);

}  // namespace tdbg
