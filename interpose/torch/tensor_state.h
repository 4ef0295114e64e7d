// What the hook knows about tensors: torch dtypes in tdbg's terms, whether and how a tensor
// can be hashed, and the table of tensors produced by recorded ops (so an unchanged input is
// recorded as "known" instead of being hashed again). Internal to interpose/torch/.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "hashing/tensor_hash.h"
#include "tracer/records.h"

namespace tdbg::torchhook {

hashing::DType to_dtype(c10::ScalarType type);

// Why `t` cannot be hashed ("sparse layout", "quantized", "meta tensor", ...), or nullptr
// when it can: on the host directly, or from a host copy (`copied_to_host`).
const char* unhashable_reason(const at::Tensor& t);

// The StorageImpl under `t` (shared by all its views and aliases), or nullptr.
const void* storage_key(const at::Tensor& t);

// tdbg-hash v1 of a hashable host tensor (see `unhashable_reason`).
hashing::HashResult hash_host_tensor(const at::Tensor& t, int threads);

// How many times a stride-0 (expanded) tensor repeats each value it holds: the product of its
// sizes above 1 with stride 0; 1 for a tensor without such dimensions.
int64_t expanded_repeats(const at::Tensor& t);

// The hash of a host tensor with stride-0 dimensions from the values it holds once: its
// compact part (those dimensions at size 1) hashed by tdbg-hash v1, folded with `t`'s geometry
// like a view's (`view_hash`). Not a hash of the logical values, so it costs the memory read,
// never the logical size (`from_numpy(a).expand(10**9, 8)`). The summary is the whole's:
// sums and non-finite counts scaled by `expanded_repeats`.
hashing::HashResult hash_expanded_host_tensor(const at::Tensor& t, int threads);

// Whether `t` lives in accelerator memory (CUDA, XPU, MPS) and is hashed from a host copy.
bool copied_to_host(const at::Tensor& t);

// tdbg-hash v1 of a hashable tensor in any device's memory, from a synchronous copy to the
// host made below autograd and any Python dispatch mode. The same value as the host hash of
// the same values (the hash does not depend on the device or the layout). Throws what the
// copy throws (a device error).
hashing::HashResult hash_host_copy(const at::Tensor& t, int threads);

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
  // A view whose contents were not hashed when it was taken (its base was written in place
  // since, in part maybe): hashed by the first op that reads it, which names `producer`, the
  // recorded op that last wrote into the base, as where its contents came from.
  bool pending = false;
};

// Tensors by TensorImpl*, valid while their version counter is unchanged and no recorded op
// wrote into their storage since. Each entry holds a weak reference, so the TensorImpl's
// memory (and therefore its address) cannot be reused while the entry exists.
//
// An entry also records the tensor's storage, dtype, element count and offset: assigning
// `p.data = other` swaps them under the same TensorImpl and version counter.
//
// The version counter misses writes through an alias with a counter of its own: `p.data`
// (`p.data.mul_(0.9)`, an EMA, a hand-written optimizer) shares p's storage but not its
// counter. So the table also keeps, per storage that a recorded op wrote into, the time of the
// last write (a counter that every write and every entry takes a value of), and an entry
// older than its storage's last write is stale.
//
// One flat open-addressing array (linear probing), allocated when it grows and never per
// entry: a node per tensor cost an allocation and a free per recorded op, and small
// long-lived nodes between the program's tensor buffers fragment the heap. Entries of dead
// tensors are swept incrementally: each insertion looks at the next kSweep entries of a cursor
// that walks the array, so dead entries stay at about 1/kSweep of all entries.
class TensorTable {
 public:
  TensorTable() = default;
  TensorTable(const TensorTable&) = delete;
  TensorTable& operator=(const TensorTable&) = delete;
  // Leaves the weak references held: the process-wide table is destroyed at exit, when
  // releasing the last reference to a TensorImpl could reach torch or Python already gone.
  // Call `clear` first to release them.
  ~TensorTable();

  // The entry of `t` if it is still the same tensor with the same contents. When it is not
  // and a recorded op wrote into its storage since the entry was made, `*writer` (if given)
  // is set to that op's seq. `*written` (if given) is set when its contents changed in place
  // since it was remembered, by whatever tensor over its storage.
  std::optional<TrackedTensor> find(const at::Tensor& t, int64_t* writer = nullptr,
                                    bool* written = nullptr);
  // Remembers `t` with its current version. Inference tensors (no version counter) are not
  // tracked: they are hashed each time they are used.
  void remember(const at::Tensor& t, const TrackedTensor& state);
  void forget(const at::Tensor& t);
  // Recorded op `writer` wrote into `t`'s storage: entries of every tensor over it are stale.
  void note_write(const at::Tensor& t, int64_t writer);
  // What recorded op `writer`, the last to write into `t`'s storage, left there: `t` (its
  // output, hashed) holds contents with hash `hash`.
  void note_written_contents(const at::Tensor& t, int64_t writer, uint64_t hash);
  // The recorded op that made the contents of `t`, a tensor the table has no entry for (an
  // alias made afresh, such as `p.data()` in each step of a C++ optimizer): the last op that
  // wrote into its storage, where what it left there covers the same elements as `t` with the
  // same hash `hash`; kNoSeq otherwise (the memory was reused, or written past the ops since).
  int64_t writer_of_contents(const at::Tensor& t, uint64_t hash);
  void clear();
  // In a fork child: the entries stay (the child holds the same tensors with the same
  // contents), but the ops that made or wrote them are in the parent's database, not this
  // process's, whose seqs start again from 0.
  void forget_producers();
  // Entries held, live or not yet swept (for tests).
  size_t size();

  std::mutex& mutex() { return mutex_; }
  void reset_mutex_after_fork() { new (&mutex_) std::mutex(); }

 private:
  struct Slot {
    c10::TensorImpl* key = nullptr;  // holds a weak reference while set
    uint32_t version = 0;
    const void* storage = nullptr;   // the StorageImpl, for `note_write`
    // What `p.data = other` (set_data) replaces in the same TensorImpl without touching its
    // version counter: `Module.to(torch.float64)` converts every parameter that way.
    int64_t numel = 0;
    int64_t storage_offset = 0;
    int8_t dtype = 0;
    uint64_t time = 0;               // when remembered (see `clock_`)
    TrackedTensor state;
  };
  // The time of the last recorded write into a storage, by StorageImpl address (flat, linear
  // probing, never erased: a dead storage's time only makes a later storage at its address
  // look written earlier, which invalidates nothing wrongly). Cleared when it grows past
  // kMaxWrites; `floor_` then invalidates every entry older than the clearing.
  struct WriteTime {
    const void* storage = nullptr;
    uint64_t time = 0;
    int64_t writer = tracer::kNoSeq;
    // What `writer` left (`note_written_contents`): the hash of `numel` elements of `dtype` at
    // `offset`; numel -1 while unknown.
    uint64_t hash = 0;
    int64_t numel = -1;
    int64_t offset = 0;
    int8_t dtype = 0;
  };
  static constexpr size_t kSweep = 3;
  static constexpr size_t kMaxWrites = size_t(1) << 20;

  size_t index_of(const c10::TensorImpl* key) const;
  Slot* lookup_locked(const c10::TensorImpl* key);
  Slot* insert_locked(c10::TensorImpl* key);  // a new entry for `key`, fields for the caller
  void erase_at_locked(size_t i);  // releases the weak reference, shifts the probe run back
  void grow_locked();
  void sweep_locked();
  void grow_writes_locked();  // or, at kMaxWrites, forget every write time
  const WriteTime* last_write_locked(const void* storage) const;

  std::mutex mutex_;
  std::vector<Slot> slots_;  // size is 0 or a power of two
  size_t size_ = 0;
  size_t cursor_ = 0;
  uint64_t clock_ = 0;  // ticks at every remember and every write
  uint64_t floor_ = 0;  // entries remembered at or before it are stale
  std::vector<WriteTime> writes_;  // size is 0 or a power of two
  size_t write_count_ = 0;
};

}  // namespace tdbg::torchhook
