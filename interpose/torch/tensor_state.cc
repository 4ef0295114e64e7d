// Tensors in tdbg's terms: dtype mapping, hashability, host hashing, view hashes, and the
// table of produced tensors keyed by TensorImpl* and version counter.
#include "interpose/torch/tensor_state.h"

#include <c10/core/TensorImpl.h>
#if __has_include(<torch/version.h>)
#include <torch/version.h>
#endif

#include <vector>

namespace tdbg::torchhook {

hashing::DType to_dtype(c10::ScalarType type) {
  using hashing::DType;
  switch (type) {
    case c10::ScalarType::Bool: return DType::kBool;
    case c10::ScalarType::Byte: return DType::kUInt8;
    case c10::ScalarType::Char: return DType::kInt8;
    case c10::ScalarType::Short: return DType::kInt16;
    case c10::ScalarType::Int: return DType::kInt32;
    case c10::ScalarType::Long: return DType::kInt64;
    case c10::ScalarType::Half: return DType::kFloat16;
    case c10::ScalarType::BFloat16: return DType::kBFloat16;
    case c10::ScalarType::Float: return DType::kFloat32;
    case c10::ScalarType::Double: return DType::kFloat64;
    case c10::ScalarType::ComplexHalf: return DType::kComplex32;
    case c10::ScalarType::ComplexFloat: return DType::kComplex64;
    case c10::ScalarType::ComplexDouble: return DType::kComplex128;
    case c10::ScalarType::QInt8: return DType::kQInt8;
    case c10::ScalarType::QUInt8: return DType::kQUInt8;
    case c10::ScalarType::QInt32: return DType::kQInt32;
#if defined(TORCH_VERSION_MAJOR) && TORCH_VERSION_MAJOR >= 2 && \
    (TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 3)
    case c10::ScalarType::UInt16: return DType::kUInt16;
    case c10::ScalarType::UInt32: return DType::kUInt32;
    case c10::ScalarType::UInt64: return DType::kUInt64;
#endif
#if defined(TORCH_VERSION_MAJOR) && TORCH_VERSION_MAJOR >= 2 && \
    (TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 1)
    case c10::ScalarType::Float8_e4m3fn: return DType::kFloat8E4M3FN;
    case c10::ScalarType::Float8_e5m2: return DType::kFloat8E5M2;
#endif
    default: return DType::kUnknown;
  }
}

const char* unhashable_reason(const at::Tensor& t) {
  if (!t.defined()) return "undefined tensor";
  if (t.is_nested()) return "nested tensor";
  if (t.layout() != c10::kStrided) {
    if (t.is_sparse()) return "sparse layout";
    if (t.is_mkldnn()) return "mkldnn layout";
    return "non-strided layout";
  }
  if (t.is_quantized()) return "quantized";
  if (t.is_meta()) return "meta tensor";
  if (t.device().is_cuda()) return "cuda hashing unavailable";
  if (!t.device().is_cpu()) return "device not hashed on the host";
  if (to_dtype(t.scalar_type()) == hashing::DType::kUnknown) return "dtype not hashed";
  if (t.is_conj()) return "lazy conjugate view";
  if (t.is_neg()) return "lazy negative view";
  if (!t.has_storage()) return "no storage";
  if (t.numel() > 0 && t.data_ptr() == nullptr) return "no data";
  return nullptr;
}

hashing::HashResult hash_host_tensor(const at::Tensor& t, int threads) {
  hashing::TensorView view;
  view.data = t.data_ptr();
  view.dtype = to_dtype(t.scalar_type());
  view.ndim = static_cast<int>(t.dim());
  view.sizes = t.sizes().data();
  view.strides = t.strides().data();
  hashing::HashOptions options;
  options.threads = threads < 1 ? 1 : threads;
  options.summaries = true;
  return hashing::hash_tensor(view, options);
}

uint64_t view_hash(uint64_t base_hash, const at::Tensor& view, const at::Tensor& base) {
  int64_t offset = view.storage_offset() - base.storage_offset();
  if (offset == 0 && view.sizes() == base.sizes() && view.strides() == base.strides() &&
      view.scalar_type() == base.scalar_type())
    return base_hash;
  std::vector<int64_t> geometry;
  geometry.reserve(2 + 2 * view.dim());
  geometry.push_back(static_cast<int64_t>(view.scalar_type()));
  geometry.push_back(offset);
  for (int64_t s : view.sizes()) geometry.push_back(s);
  for (int64_t s : view.strides()) geometry.push_back(s);
  uint64_t h = hashing::hash_bytes(geometry.data(), geometry.size() * sizeof(int64_t),
                                   /*seed=*/0x7664626776696577ull);  // "tdbgview"
  return hashing::hash_combine(base_hash, h);
}

namespace {
// The version counter of `t`, or nullopt for tensors that have none (inference tensors).
std::optional<uint32_t> version_of(const at::Tensor& t) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->is_inference()) return std::nullopt;
  const c10::VariableVersion& v = impl->version_counter();
  if (!v.enabled()) return std::nullopt;
  return v.current_version();
}
}  // namespace

std::optional<TrackedTensor> TensorTable::find(const at::Tensor& t) {
  if (!t.defined()) return std::nullopt;
  auto version = version_of(t);
  if (!version) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(t.unsafeGetTensorImpl());
  if (it == entries_.end()) return std::nullopt;
  if (it->second.version != *version) return std::nullopt;
  return it->second.state;
}

void TensorTable::remember(const at::Tensor& t, const TrackedTensor& state) {
  if (!t.defined()) return;
  auto version = version_of(t);
  if (!version) return;
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(impl);
  if (it != entries_.end()) {
    it->second.version = *version;
    it->second.state = state;
    return;
  }
  entries_.emplace(impl, Entry(c10::weak_intrusive_ptr<c10::TensorImpl>(t.getIntrusivePtr()),
                               *version, state));
  order_.push_back(impl);
  purge_some_locked();
}

void TensorTable::forget(const at::Tensor& t) {
  if (!t.defined()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.erase(t.unsafeGetTensorImpl());
}

void TensorTable::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
  order_.clear();
}

void TensorTable::purge_some_locked() {
  // Two checks per insertion keep the dead entries to about the number of live ones.
  for (int i = 0; i < 2 && !order_.empty(); ++i) {
    const c10::TensorImpl* key = order_.front();
    order_.pop_front();
    auto it = entries_.find(key);
    if (it == entries_.end()) continue;  // forgotten already
    if (it->second.weak.expired())
      entries_.erase(it);
    else
      order_.push_back(key);
  }
}

}  // namespace tdbg::torchhook
