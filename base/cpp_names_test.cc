// Unit tests of in_library_namespace: which demangled names are torch's or the C++ runtime's,
// and which templates of theirs are instantiated for the program's own types.
#include "base/cpp_names.h"

#include <catch2/catch.hpp>

using tdbg::in_library_namespace;
using tdbg::readable_function_name;

TEST_CASE("library namespaces, with and without a return type") {
  CHECK(in_library_namespace("at::Tensor c10::Dispatcher::call<at::Tensor>(c10::TypedOperatorHandle const&) const"));
  CHECK(in_library_namespace("std::function<void ()>::operator()() const"));
  CHECK(in_library_namespace("torch::nn::LinearImpl::forward(at::Tensor const&)"));
  CHECK_FALSE(in_library_namespace("Net::forward(at::Tensor)"));
  CHECK_FALSE(in_library_namespace("main"));
  CHECK_FALSE(in_library_namespace("(anonymous namespace)::train(int, double)"));
  CHECK_FALSE(in_library_namespace("train(int, double, int, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&, int)"));
}

TEST_CASE("a torch template is the program's only when instantiated for a type of the program") {
  CHECK_FALSE(in_library_namespace("torch::autograd::CppNode<Swish>::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"));
  CHECK_FALSE(in_library_namespace("torch::nn::AnyModuleHolder<Net, at::Tensor>::forward(std::vector<torch::nn::AnyValue>&&)"));
  CHECK_FALSE(in_library_namespace("torch::autograd::CppNode<(anonymous namespace)::Swish>::apply(int)"));
  CHECK(in_library_namespace("std::vector<float, std::allocator<float> >::push_back(float const&)"));
  CHECK(in_library_namespace("c10::ArrayRef<long>::size() const"));
  // A member template of a class template: the member's name between the argument lists is
  // no type of the program (torch::nn::Linear(8, 16) in a module's constructor).
  CHECK(in_library_namespace(
      "torch::nn::ModuleHolder<torch::nn::LinearImpl>::ModuleHolder<int, int, void>(int&&, int&&)"));
  CHECK_FALSE(in_library_namespace("torch::nn::ModuleHolder<NetImpl>::ModuleHolder<int, void>(int&&)"));
  // A member of a template argument (`AnyModuleHolder<...>::InvokeForward`): Sequential's
  // plumbing for torch's own modules is torch's; for the program's module it is the program's.
  CHECK(in_library_namespace(
      "torch::nn::AnyValue torch::unpack<torch::nn::AnyValue, at::Tensor const&, "
      "torch::nn::AnyModuleHolder<torch::nn::TanhImpl, at::Tensor const&>::InvokeForward, "
      "torch::nn::AnyModuleHolder<torch::nn::TanhImpl, at::Tensor const&>::CheckedGetter, 0ul>("
      "torch::nn::AnyModuleHolder<torch::nn::TanhImpl, at::Tensor const&>::InvokeForward, "
      "torch::nn::AnyModuleHolder<torch::nn::TanhImpl, at::Tensor const&>::CheckedGetter, "
      "torch::Indices<0ul>)"));
  CHECK_FALSE(in_library_namespace(
      "torch::nn::AnyValue torch::unpack<torch::nn::AnyValue, at::Tensor const&, "
      "torch::nn::AnyModuleHolder<NetImpl, at::Tensor const&>::InvokeForward, 0ul>(int)"));
}

TEST_CASE("function names made readable: no return type, lambda parameters or long templates") {
  CHECK(readable_function_name("Net::forward") == "Net::forward");
  CHECK(readable_function_name("at::Tensor mylib::weird_loss<bool>") == "mylib::weird_loss<bool>");
  CHECK(readable_function_name("main::{lambda(at::Tensor, at::Tensor, int)#2}::operator()") ==
        "main::{lambda#2}::operator()");
  CHECK(readable_function_name(
            "std::enable_if<std::is_same<ScaleFn, ScaleFn>::value, decltype (ScaleFn::forward("
            "decltype(nullptr), (declval<at::Tensor&>)(), (declval<double&>)()))>::type "
            "torch::autograd::Function<ScaleFn>::apply<ScaleFn, at::Tensor&, double&>") ==
        "torch::autograd::Function<ScaleFn>::apply<...>");
  CHECK(readable_function_name("operator() inlined in main") == "operator() inlined in main");
  CHECK(readable_function_name("operator() inlined in at::Tensor train<float>") ==
        "operator() inlined in train<float>");
  // Operators keep their angle brackets, and their names.
  CHECK(readable_function_name("std::ostream& operator<< <Foo>") == "operator<< <Foo>");
  CHECK(readable_function_name("Vec::operator<") == "Vec::operator<");
  // Still too long: outer scopes go, whole names at a time.
  const std::string deep = "a_very_long_namespace_name::another_long_namespace::Inner::compute_loss";
  CHECK(readable_function_name(deep) == "...::another_long_namespace::Inner::compute_loss");
  CHECK(readable_function_name(deep, 30) == "...::Inner::compute_loss");
  CHECK(readable_function_name("(anonymous namespace)::train") == "(anonymous namespace)::train");
}
