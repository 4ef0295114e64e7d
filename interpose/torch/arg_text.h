// Canonical text of an op's non-tensor arguments (scalars, lists, dtypes, devices, ...), so a
// changed learning rate or shape shows up as a changed argument. Internal to interpose/torch/.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <string>

namespace tdbg::torchhook {

// How an argument should be rendered, decided once per schema argument.
enum class ArgKind : uint8_t {
  kTensorLike,    // a tensor or list of tensors: recorded as tensors, not as text
  kScalarType,    // an int that means a dtype
  kLayout,        // an int that means a layout
  kMemoryFormat,  // an int that means a memory format
  kGenerator,     // a random generator (recorded through `rng`)
  kOther,         // anything else: rendered from the IValue
};

ArgKind arg_kind(const c10::Argument& argument);

// Canonical text of `value`: "0.01", "3", "True", "None", "[2, 3]", "float32", "cpu",
// "strided", "contiguous_format", "'mean'". Doubles use the shortest exact form (%.17g).
std::string arg_text(const c10::IValue& value, ArgKind kind);

}  // namespace tdbg::torchhook
