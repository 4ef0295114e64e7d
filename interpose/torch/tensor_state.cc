// Tensors in tdbg's terms: dtype mapping, hashability, host hashing, view hashes, and the
// table of produced tensors keyed by TensorImpl* and version counter.
#include "interpose/torch/tensor_state.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#if __has_include(<torch/version.h>)
#include <torch/version.h>
#endif

#include <dlfcn.h>

#include <algorithm>
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
  if (!t.device().is_cpu() && !copied_to_host(t)) return "device not hashed";
  if (to_dtype(t.scalar_type()) == hashing::DType::kUnknown) return "dtype not hashed";
  if (t.is_conj()) return "lazy conjugate view";
  if (t.is_neg()) return "lazy negative view";
  if (!t.has_storage()) return "no storage";
  if (t.numel() > 0 && t.data_ptr() == nullptr) return "no data";
  return nullptr;
}

namespace {

// Memory that torch's own allocators did not hand out: torch's CPU allocations carry their
// own address as the DataPtr's context, a NumPy array's (`from_numpy`), a file mapping's
// (`from_file`) or a `from_blob` deleter's do not.
bool foreign_memory(const at::Tensor& t) {
  const c10::DataPtr& ptr = t.storage().data_ptr();
  return ptr.get_context() != ptr.get();
}

struct GuardedHash {
  const hashing::TensorView* view;
  hashing::HashOptions options;
  hashing::HashResult result;
};

using GuardedRead = int (*)(void (*)(void*), void*);

GuardedRead guarded_read() {
  static const GuardedRead fn =
      reinterpret_cast<GuardedRead>(dlsym(RTLD_DEFAULT, "tdbg_preload_guarded_read"));
  return fn;
}

// tdbg-hash v1 of `view` over `t`'s memory, read on one thread under the preload's fault
// handlers when the memory is foreign.
hashing::HashResult hash_host_view(const at::Tensor& t, const hashing::TensorView& view,
                                   int threads) {
  hashing::HashOptions options;
  options.threads = threads < 1 ? 1 : threads;
  options.summaries = true;
  GuardedRead guard = t.numel() > 0 && foreign_memory(t) ? guarded_read() : nullptr;
  if (guard == nullptr) return hashing::hash_tensor(view, options);
  // Memory the program may never read, and that may not be readable (a memmap whose file
  // was truncated, an address that is not mapped): a fault there abandons the hash, on this
  // thread alone, and the program goes on as it would have.
  GuardedHash job{&view, options, {}};
  job.options.threads = 1;
  const int rc = guard(
      [](void* arg) {
        auto* j = static_cast<GuardedHash*>(arg);
        j->result = hashing::hash_tensor(*j->view, j->options);
      },
      &job);
  if (rc != 0) {
    hashing::HashResult unreadable;
    unreadable.error = "memory that cannot be read (a file mapping past its file's end, or "
                       "memory not mapped): tdbg stopped reading it";
    return unreadable;
  }
  return job.result;
}

// The hash of a geometry (dtype, offset, sizes, strides) folded into `base_hash`.
uint64_t geometry_hash(uint64_t base_hash, c10::ScalarType dtype, int64_t offset,
                       c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  // On the stack for up to 30 dimensions.
  constexpr size_t kLocal = 2 + 2 * 30;
  const size_t n = 2 + sizes.size() + strides.size();
  int64_t local[kLocal];
  std::vector<int64_t> heap;
  int64_t* geometry = local;
  if (n > kLocal) {
    heap.resize(n);
    geometry = heap.data();
  }
  size_t k = 0;
  geometry[k++] = static_cast<int64_t>(dtype);
  geometry[k++] = offset;
  for (int64_t s : sizes) geometry[k++] = s;
  for (int64_t s : strides) geometry[k++] = s;
  uint64_t h = hashing::hash_bytes(geometry, k * sizeof(int64_t),
                                   /*seed=*/0x7664626776696577ull);  // "tdbgview"
  return hashing::hash_combine(base_hash, h);
}

// `t`'s memory read with `sizes` (its own, or some set to 1: its compact part) and its strides.
hashing::TensorView host_view(const at::Tensor& t, const int64_t* sizes) {
  hashing::TensorView view;
  view.data = t.data_ptr();
  view.dtype = to_dtype(t.scalar_type());
  view.ndim = static_cast<int>(t.dim());
  view.sizes = sizes;
  view.strides = t.strides().data();
  return view;
}

}  // namespace

hashing::HashResult hash_host_tensor(const at::Tensor& t, int threads) {
  return hash_host_view(t, host_view(t, t.sizes().data()), threads);
}

int64_t expanded_repeats(const at::Tensor& t) {
  int64_t repeats = 1;
  const c10::IntArrayRef sizes = t.sizes(), strides = t.strides();
  for (size_t d = 0; d < sizes.size(); ++d)
    if (strides[d] == 0 && sizes[d] > 1) repeats *= sizes[d];  // at most numel: no overflow
  return t.numel() == 0 ? 1 : repeats;
}

hashing::HashResult hash_expanded_host_tensor(const at::Tensor& t, int threads) {
  const int64_t repeats = expanded_repeats(t);
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  for (size_t d = 0; d < sizes.size(); ++d)
    if (t.strides()[d] == 0) sizes[d] = 1;
  hashing::HashResult r = hash_host_view(t, host_view(t, sizes.data()), threads);
  if (!r.hashed) return r;
  r.hash = geometry_hash(r.hash, t.scalar_type(), 0, t.sizes(), t.strides());
  // Every value the compact part holds appears `repeats` times in the whole (counts stay at
  // most numel).
  r.summary.sum *= static_cast<double>(repeats);
  r.summary.abs_sum *= static_cast<double>(repeats);
  r.summary.nan_count *= repeats;
  r.summary.inf_count *= repeats;
  return r;
}

bool copied_to_host(const at::Tensor& t) {
  // Devices whose tensors hold their values in device memory that a copy can read. Not lazy
  // devices (XLA, lazy tensors): copying one would run the program's pending graph.
  return t.is_cuda() || t.is_xpu() || t.is_mps();
}

hashing::HashResult hash_host_copy(const at::Tensor& t, int threads) {
  // The copy must be invisible to the program: no autograd node, no version bump on `t`, and
  // never seen by a Python dispatch mode the program has active.
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  c10::impl::ExcludeDispatchKeyGuard no_python(c10::DispatchKeySet(
      {c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot,
       c10::DispatchKey::PythonDispatcher}));
  // A synchronous copy: ordered after the work queued on the tensor's stream, so it reads the
  // values the op wrote (and, for a collective, what the wait made visible).
  at::Tensor host = t.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
  return hash_host_tensor(host, threads);
}

uint64_t view_hash(uint64_t base_hash, const at::Tensor& view, const at::Tensor& base) {
  int64_t offset = view.storage_offset() - base.storage_offset();
  if (offset == 0 && view.sizes() == base.sizes() && view.strides() == base.strides() &&
      view.scalar_type() == base.scalar_type())
    return base_hash;
  return geometry_hash(base_hash, view.scalar_type(), offset, view.sizes(), view.strides());
}

const void* storage_key(const at::Tensor& t) {
  return t.has_storage() ? static_cast<const void*>(t.storage().unsafeGetStorageImpl()) : nullptr;
}

namespace {
// The home slot of a pointer key in a table of `mask + 1` slots (a power of two): both tables
// of TensorTable probe linearly from it.
size_t home_slot(const void* key, size_t mask) {
  return static_cast<size_t>((reinterpret_cast<uintptr_t>(key) * 0x9E3779B97F4A7C15ull) >> 20) &
         mask;
}

// The version counter of `t`, or nullopt for tensors that have none (inference tensors).
std::optional<uint32_t> version_of(const at::Tensor& t) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->is_inference()) return std::nullopt;
  const c10::VariableVersion& v = impl->version_counter();
  if (!v.enabled()) return std::nullopt;
  return v.current_version();
}
}  // namespace

TensorTable::~TensorTable() {
  // Static destruction at exit: the weak references are left to the process's end (torch's
  // own statics may already be gone).
}

size_t TensorTable::index_of(const c10::TensorImpl* key) const {
  return home_slot(key, slots_.size() - 1);
}

TensorTable::Slot* TensorTable::lookup_locked(const c10::TensorImpl* key) {
  if (slots_.empty()) return nullptr;
  const size_t mask = slots_.size() - 1;
  for (size_t i = index_of(key);; i = (i + 1) & mask) {
    if (slots_[i].key == key) return &slots_[i];
    if (slots_[i].key == nullptr) return nullptr;
  }
}

TensorTable::Slot* TensorTable::insert_locked(c10::TensorImpl* key) {
  if ((size_ + 1) * 2 > slots_.size()) grow_locked();
  const size_t mask = slots_.size() - 1;
  size_t i = index_of(key);
  while (slots_[i].key != nullptr) i = (i + 1) & mask;
  c10::raw::weak_intrusive_ptr::incref(key);
  slots_[i].key = key;
  ++size_;
  return &slots_[i];
}

void TensorTable::erase_at_locked(size_t i) {
  c10::raw::weak_intrusive_ptr::decref(slots_[i].key);
  const size_t mask = slots_.size() - 1;
  // Backward-shift deletion: move later entries of the probe run into the hole when their
  // home slot does not lie (cyclically) between the hole and them.
  size_t hole = i;
  for (size_t j = (i + 1) & mask; slots_[j].key != nullptr; j = (j + 1) & mask) {
    size_t home = index_of(slots_[j].key);
    bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
    if (movable) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  slots_[hole] = Slot();
  --size_;
}

void TensorTable::grow_locked() {
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot());
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.key == nullptr) continue;
    size_t i = index_of(s.key);
    while (slots_[i].key != nullptr) i = (i + 1) & mask;
    slots_[i] = s;  // the weak reference moves with it
  }
  cursor_ = 0;
}

void TensorTable::sweep_locked() {
  // Looks at kSweep entries (empty slots are skipped, up to a bound): with one insertion per
  // call, dead entries then settle at about 1/kSweep of the table's entries.
  if (slots_.empty()) return;
  const size_t mask = slots_.size() - 1;
  size_t entries = 0;
  for (size_t visits = 0; entries < kSweep && visits < 8 * kSweep; ++visits) {
    cursor_ &= mask;
    c10::TensorImpl* key = slots_[cursor_].key;
    if (key == nullptr) {
      ++cursor_;
      continue;
    }
    ++entries;
    if (c10::raw::weak_intrusive_ptr::use_count(key) == 0)
      erase_at_locked(cursor_);  // the slot is looked at again: an entry may have shifted into it
    else
      ++cursor_;
  }
}

const TensorTable::WriteTime* TensorTable::last_write_locked(const void* storage) const {
  if (storage == nullptr || writes_.empty()) return nullptr;
  const size_t mask = writes_.size() - 1;
  for (size_t i = home_slot(storage, mask);; i = (i + 1) & mask) {
    if (writes_[i].storage == storage) return &writes_[i];
    if (writes_[i].storage == nullptr) return nullptr;
  }
}

void TensorTable::grow_writes_locked() {
  if (writes_.size() >= kMaxWrites) {
    // Forget every write time; entries remembered until now can no longer be checked.
    std::fill(writes_.begin(), writes_.end(), WriteTime());
    write_count_ = 0;
    floor_ = clock_;
    return;
  }
  std::vector<WriteTime> old;
  old.swap(writes_);
  writes_.assign(old.empty() ? 256 : old.size() * 2, WriteTime());
  const size_t mask = writes_.size() - 1;
  for (const WriteTime& w : old) {
    if (w.storage == nullptr) continue;
    size_t i = home_slot(w.storage, mask);
    while (writes_[i].storage != nullptr) i = (i + 1) & mask;
    writes_[i] = w;
  }
}

void TensorTable::note_write(const at::Tensor& t, int64_t writer) {
  if (!t.defined()) return;
  const void* storage = storage_key(t);
  if (storage == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if ((write_count_ + 1) * 2 > writes_.size()) grow_writes_locked();
  const size_t mask = writes_.size() - 1;
  size_t i = home_slot(storage, mask);
  while (writes_[i].storage != nullptr && writes_[i].storage != storage) i = (i + 1) & mask;
  if (writes_[i].storage == nullptr) {
    writes_[i].storage = storage;
    ++write_count_;
  }
  writes_[i].time = ++clock_;
  writes_[i].writer = writer;
  writes_[i].numel = -1;
}

void TensorTable::note_written_contents(const at::Tensor& t, int64_t writer, uint64_t hash) {
  if (!t.defined()) return;
  const void* storage = storage_key(t);
  if (storage == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const WriteTime* found = last_write_locked(storage);
  if (found == nullptr || found->writer != writer) return;
  WriteTime& w = const_cast<WriteTime&>(*found);
  w.hash = hash;
  w.numel = t.numel();
  w.offset = t.storage_offset();
  w.dtype = static_cast<int8_t>(t.scalar_type());
}

int64_t TensorTable::writer_of_contents(const at::Tensor& t, uint64_t hash) {
  if (!t.defined()) return tracer::kNoSeq;
  const void* storage = storage_key(t);
  if (storage == nullptr) return tracer::kNoSeq;
  std::lock_guard<std::mutex> lock(mutex_);
  const WriteTime* w = last_write_locked(storage);
  if (w == nullptr || w->numel < 0 || w->hash != hash || w->numel != t.numel() ||
      w->offset != t.storage_offset() || w->dtype != static_cast<int8_t>(t.scalar_type()))
    return tracer::kNoSeq;
  return w->writer;
}

std::optional<TrackedTensor> TensorTable::find(const at::Tensor& t, int64_t* writer,
                                               bool* written) {
  if (!t.defined()) return std::nullopt;
  auto version = version_of(t);
  if (!version) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  const Slot* slot = lookup_locked(t.unsafeGetTensorImpl());
  if (slot == nullptr) return std::nullopt;
  if (slot->storage != storage_key(t) || slot->numel != t.numel() ||
      slot->storage_offset != t.storage_offset() ||
      slot->dtype != static_cast<int8_t>(t.scalar_type()))
    return std::nullopt;  // replaced through `.data =`
  if (slot->time <= floor_) return std::nullopt;
  const WriteTime* w = last_write_locked(slot->storage);
  const bool by_other = w != nullptr && w->time > slot->time;
  if (slot->version != *version || by_other) {
    // Written in place since: through itself or a view sharing its version counter, or
    // through another tensor over its storage. A recorded op that wrote the storage since is
    // named (the version counter alone does not tell which op bumped it).
    if (by_other && writer) *writer = w->writer;
    if (written) *written = true;
    return std::nullopt;
  }
  return slot->state;
}

void TensorTable::remember(const at::Tensor& t, const TrackedTensor& state) {
  if (!t.defined()) return;
  auto version = version_of(t);
  if (!version) return;
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  const void* storage = storage_key(t);
  std::lock_guard<std::mutex> lock(mutex_);
  Slot* slot = lookup_locked(impl);
  if (slot == nullptr) {
    sweep_locked();  // first: erasing shifts entries, the new one included
    slot = insert_locked(impl);
  }
  slot->version = *version;
  slot->state = state;
  slot->storage = storage;
  slot->numel = t.numel();
  slot->storage_offset = t.storage_offset();
  slot->dtype = static_cast<int8_t>(t.scalar_type());
  slot->time = ++clock_;
}

void TensorTable::forget(const at::Tensor& t) {
  if (!t.defined()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (Slot* slot = lookup_locked(t.unsafeGetTensorImpl()))
    erase_at_locked(static_cast<size_t>(slot - slots_.data()));
}

size_t TensorTable::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return size_;
}

void TensorTable::forget_producers() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Slot& s : slots_) s.state.producer = tracer::kNoSeq;
  for (WriteTime& w : writes_) w.writer = tracer::kNoSeq;
}

void TensorTable::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Slot& s : slots_)
    if (s.key != nullptr) c10::raw::weak_intrusive_ptr::decref(s.key);
  std::vector<Slot>().swap(slots_);
  size_ = 0;
  cursor_ = 0;
  std::vector<WriteTime>().swap(writes_);
  write_count_ = 0;
  floor_ = clock_;
}

}  // namespace tdbg::torchhook
