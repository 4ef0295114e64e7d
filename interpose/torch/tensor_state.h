// What the hook knows about tensors: torch dtypes in tdbg's terms, whether and how a tensor
// can be hashed, and the table of tensors produced by recorded ops (so an unchanged input is
// recorded as "known" instead of being hashed again). Internal to interpose/torch/.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "hashing/tensor_hash.h"
#include "tracer/records.h"

namespace tdbg::torchhook {

hashing::DType to_dtype(c10::ScalarType type);

// Why `t` cannot be hashed on the host ("sparse layout", "quantized", "meta tensor",
// "cuda hashing unavailable", ...), or nullptr when it can.
const char* unhashable_reason(const at::Tensor& t);

// tdbg-hash v1 of a hashable host tensor (see `unhashable_reason`).
hashing::HashResult hash_host_tensor(const at::Tensor& t, int threads);

// The hash of a view of a tensor whose hash is `base_hash`: derived from the base's hash and
// the view's geometry (sizes, strides, offset relative to the base), never from the data.
// A view with the base's own geometry gets the base's hash.
uint64_t view_hash(uint64_t base_hash, const at::Tensor& view, const at::Tensor& base);

// The state of a tensor that a recorded op produced (or hashed as an input).
struct TrackedTensor {
  uint64_t hash = 0;
  tracer::TensorStatus status = tracer::TensorStatus::kHashed;  // kHashed, kView or kUninitialized
  int64_t producer = tracer::kNoSeq;
  hashing::Summary summary;
};

// Tensors by TensorImpl*, valid while their version counter is unchanged. Each entry holds a
// weak reference, so the TensorImpl's memory (and therefore its address) cannot be reused
// while the entry exists. Expired entries are purged incrementally: each insertion looks at
// the two oldest entries, so dead TensorImpls are released a few at a time (a bulk purge
// frees thousands at once, and the allocator's churn then costs page faults).
class TensorTable {
 public:
  // The entry of `t` if it is still the same tensor with the same contents.
  std::optional<TrackedTensor> find(const at::Tensor& t);
  // Remembers `t` with its current version. Inference tensors (no version counter) are not
  // tracked: they are hashed each time they are used.
  void remember(const at::Tensor& t, const TrackedTensor& state);
  void forget(const at::Tensor& t);
  void clear();

  std::mutex& mutex() { return mutex_; }
  void reset_mutex_after_fork() { new (&mutex_) std::mutex(); }

 private:
  struct Entry {
    Entry(c10::weak_intrusive_ptr<c10::TensorImpl> w, uint32_t v, const TrackedTensor& s)
        : weak(std::move(w)), version(v), state(s) {}
    c10::weak_intrusive_ptr<c10::TensorImpl> weak;
    uint32_t version = 0;
    TrackedTensor state;
  };
  void purge_some_locked();

  std::mutex mutex_;
  std::unordered_map<const c10::TensorImpl*, Entry> entries_;
  std::deque<const c10::TensorImpl*> order_;  // keys of `entries_`, oldest first
};

}  // namespace tdbg::torchhook
