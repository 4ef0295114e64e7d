// Canonical, run-independent text of non-tensor op arguments.
#include "interpose/torch/arg_text.h"

#include <ATen/Context.h>
#include <ATen/core/jit_type.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include <cstdio>
#if __has_include(<torch/version.h>)
#include <torch/version.h>
#endif

#if __has_include(<torch/csrc/distributed/c10d/Types.hpp>)
#include <torch/csrc/distributed/c10d/Types.hpp>
#define TDBG_HAVE_C10D_TYPES 1
#endif

#include "interpose/torch/tensor_state.h"

namespace tdbg::torchhook {
namespace {

c10::TypePtr unwrap_optional(const c10::TypePtr& type) {
  if (auto opt = type->cast<c10::OptionalType>()) return opt->getElementType();
  return type;
}

std::string double_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string dtype_text(int64_t v) {
  auto st = static_cast<c10::ScalarType>(v);
  hashing::DType d = to_dtype(st);
  if (d != hashing::DType::kUnknown) return hashing::dtype_name(d);
  return c10::toString(st);
}

std::string layout_text(int64_t v) {
  switch (static_cast<c10::Layout>(v)) {
    case c10::Layout::Strided: return "strided";
    case c10::Layout::Sparse: return "sparse_coo";
    case c10::Layout::SparseCsr: return "sparse_csr";
    case c10::Layout::Mkldnn: return "_mkldnn";
    case c10::Layout::SparseCsc: return "sparse_csc";
    case c10::Layout::SparseBsr: return "sparse_bsr";
    case c10::Layout::SparseBsc: return "sparse_bsc";
    default: return "layout(" + std::to_string(v) + ")";
  }
}

std::string memory_format_text(int64_t v) {
  switch (static_cast<c10::MemoryFormat>(v)) {
    case c10::MemoryFormat::Contiguous: return "contiguous_format";
    case c10::MemoryFormat::Preserve: return "preserve_format";
    case c10::MemoryFormat::ChannelsLast: return "channels_last";
    case c10::MemoryFormat::ChannelsLast3d: return "channels_last_3d";
    default: return "memory_format(" + std::to_string(v) + ")";
  }
}

// A TorchScript object (a custom class such as c10d's ReduceOp or ProcessGroup): its class
// name, and for a collective's reduce op which one ("ReduceOp.MAX"), so that a changed
// reduction is an argument difference at the collective. Nothing is called on the object: a
// custom class's methods are the program's code.
std::string object_text(const c10::ivalue::Object& object) {
  const auto name = object.type()->name();
  const std::string short_name = name ? name->name() : std::string("Object");
#if defined(TDBG_HAVE_C10D_TYPES)
  if (short_name == "ReduceOp" && object.slots().size() == 1 && object.getSlot(0).isCapsule()) {
    const auto capsule = object.getSlot(0).toCapsule();
    if (const auto* op = dynamic_cast<const c10d::ReduceOp*>(capsule.get())) {
      static const char* const kNames[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX",
                                           "BAND", "BOR", "BXOR", "PREMUL_SUM"};
      const unsigned k = static_cast<unsigned>(op->op_);
      return "ReduceOp." + (k < std::size(kNames) ? std::string(kNames[k]) : std::to_string(k));
    }
  }
#endif
  return "<" + short_name + ">";
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

}  // namespace

ArgKind arg_kind(const c10::Argument& argument) {
  c10::TypePtr type = unwrap_optional(argument.real_type());
  switch (type->kind()) {
    case c10::TypeKind::TensorType: return ArgKind::kTensorLike;
    case c10::TypeKind::ScalarTypeType: return ArgKind::kScalarType;
    case c10::TypeKind::LayoutType: return ArgKind::kLayout;
    case c10::TypeKind::MemoryFormatType: return ArgKind::kMemoryFormat;
    case c10::TypeKind::GeneratorType: return ArgKind::kGenerator;
    case c10::TypeKind::ListType: {
      c10::TypePtr element = unwrap_optional(type->castRaw<c10::ListType>()->getElementType());
      if (element->kind() == c10::TypeKind::TensorType) return ArgKind::kTensorLike;
      return ArgKind::kOther;
    }
    default: return ArgKind::kOther;
  }
}

std::string arg_text(const c10::IValue& v, ArgKind kind) {
  if (v.isNone()) return "None";
  if (v.isInt()) {
    int64_t i = v.toInt();
    switch (kind) {
      case ArgKind::kScalarType: return dtype_text(i);
      case ArgKind::kLayout: return layout_text(i);
      case ArgKind::kMemoryFormat: return memory_format_text(i);
      default: return std::to_string(i);
    }
  }
  if (v.isDouble()) return double_text(v.toDouble());
  if (v.isBool()) return v.toBool() ? "True" : "False";
  if (v.isComplexDouble()) {
    auto c = v.toComplexDouble();
    return "(" + double_text(c.real()) + "+" + double_text(c.imag()) + "j)";
  }
  if (v.isSymInt()) {
    auto s = v.toSymInt();
#if defined(TORCH_VERSION_MAJOR) && TORCH_VERSION_MAJOR >= 2
    auto concrete = s.maybe_as_int();
    return concrete ? std::to_string(*concrete) : "<symint>";
#else
    return s.is_symbolic() ? "<symint>" : std::to_string(s.as_int_unchecked());
#endif
  }
  if (v.isString()) return quoted(v.toStringRef());
  if (v.isDevice()) return v.toDevice().str();
  if (v.isGenerator()) {
    // The default generator of its device means what `None` means (torch draws from it then):
    // said alike, so that passing it explicitly is no difference. Another generator is named
    // by its device; which state it holds is the op's `rng`.
    const at::Generator& g = v.toGenerator();
    try {
      if (g.defined() && g == at::globalContext().defaultGenerator(g.device())) return "None";
    } catch (...) {
    }
    return g.defined() ? "torch.Generator(device='" + g.device().str() + "')" : "None";
  }
  if (v.isIntList()) {
    std::string out = "[";
    bool first = true;
    for (int64_t i : v.toIntList()) {
      out += (first ? "" : ", ") + std::to_string(i);
      first = false;
    }
    return out + "]";
  }
  if (v.isDoubleList()) {
    std::string out = "[";
    bool first = true;
    for (double d : v.toDoubleList()) {
      out += (first ? "" : ", ") + double_text(d);
      first = false;
    }
    return out + "]";
  }
  if (v.isBoolList()) {
    std::string out = "[";
    bool first = true;
    for (bool b : v.toBoolList()) {
      out += std::string(first ? "" : ", ") + (b ? "True" : "False");
      first = false;
    }
    return out + "]";
  }
  if (v.isList()) {
    std::string out = "[";
    bool first = true;
    for (const c10::IValue& e : v.toListRef()) {
      out += (first ? "" : ", ") + (e.isTensor() ? std::string("<tensor>") : arg_text(e, kind));
      first = false;
    }
    return out + "]";
  }
  if (v.isTuple()) {
    std::string out = "(";
    bool first = true;
    for (const c10::IValue& e : v.toTupleRef().elements()) {
      out += (first ? "" : ", ") + (e.isTensor() ? std::string("<tensor>") : arg_text(e, kind));
      first = false;
    }
    return out + ")";
  }
  if (v.isScalar()) return double_text(v.toScalar().toDouble());
  if (v.isObject()) return object_text(v.toObjectRef());
  return "<" + v.tagKind() + ">";
}

}  // namespace tdbg::torchhook
