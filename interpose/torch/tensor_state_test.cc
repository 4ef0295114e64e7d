// Tests of the hook's tensor table on real torch tensors: lookups by identity and version,
// writes through aliases, forgetting, the incremental sweep of dead tensors, and probe runs
// that survive deletions; hashing through a host copy, the path of accelerator tensors.
#include "interpose/torch/tensor_state.h"

#include <ATen/ATen.h>
#include <limits>

#include <catch2/catch.hpp>
#include <vector>

namespace tdbg::torchhook {
namespace {

TrackedTensor state_with(uint64_t hash) {
  TrackedTensor s;
  s.hash = hash;
  return s;
}

TEST_CASE("a remembered tensor is found until its contents change") {
  TensorTable table;
  at::Tensor t = at::ones({4, 4});
  table.remember(t, state_with(42));
  auto found = table.find(t);
  REQUIRE(found);
  CHECK(found->hash == 42);
  at::Tensor other = at::ones({4, 4});
  CHECK_FALSE(table.find(other));  // same values, another tensor
  t.add_(1);                       // bumps the version counter
  CHECK_FALSE(table.find(t));
  table.remember(t, state_with(43));
  CHECK(table.find(t)->hash == 43);
  table.forget(t);
  CHECK_FALSE(table.find(t));
  table.clear();  // the destructor leaves weak references to the process's end (see there)
}

TEST_CASE("a write through an alias with a counter of its own (p.data) makes the entry stale") {
  TensorTable table;
  at::Tensor p = at::ones({4});
  at::Tensor q = at::ones({4});
  table.remember(p, state_with(7));
  table.remember(q, state_with(9));
  at::Tensor d = p.variable_data();  // Python's `p.data`: p's storage, a version counter of its own
  d.mul_(2);
  CHECK(table.find(p));  // the version counter alone misses the write
  table.note_write(d, /*writer=*/123);
  int64_t writer = tracer::kNoSeq;
  CHECK_FALSE(table.find(p, &writer));
  CHECK(writer == 123);
  CHECK(table.find(q)->hash == 9);  // another storage: untouched
  table.remember(p, state_with(8));  // hashed again after the write
  CHECK(table.find(p)->hash == 8);
  table.clear();
}

TEST_CASE("an alias made afresh after a write is made by the writer where it holds what it left") {
  // A C++ optimizer steps `p.data()`, a new alias each step, which the table never saw.
  TensorTable table;
  at::Tensor p = at::ones({4});
  at::Tensor d = p.variable_data();
  d.mul_(2);
  table.note_write(d, /*writer=*/123);
  table.note_written_contents(d, /*writer=*/123, /*hash=*/77);
  const at::Tensor next = p.variable_data();
  CHECK_FALSE(table.find(next));
  CHECK(table.writer_of_contents(next, 77) == 123);
  CHECK(table.writer_of_contents(next, 78) == tracer::kNoSeq);  // other contents: written since
  CHECK(table.writer_of_contents(p.narrow(0, 1, 2), 77) == tracer::kNoSeq);  // other elements
  CHECK(table.writer_of_contents(at::ones({4}), 77) == tracer::kNoSeq);      // other memory
  table.note_write(p, /*writer=*/124);  // a later write, contents unknown: no one's
  CHECK(table.writer_of_contents(next, 77) == tracer::kNoSeq);
  table.note_written_contents(d, /*writer=*/123, /*hash=*/77);  // not the last writer's: ignored
  CHECK(table.writer_of_contents(next, 77) == tracer::kNoSeq);
  table.clear();
}

TEST_CASE("entries of dead tensors are swept, live ones stay") {
  TensorTable table;
  std::vector<at::Tensor> live;
  for (int i = 0; i < 2000; ++i) {
    live.push_back(at::empty({1}));
    table.remember(live.back(), state_with(uint64_t(i)));
  }
  // Many short-lived tensors, as a training step makes: the table must not keep them all.
  for (int i = 0; i < 200000; ++i) {
    at::Tensor temp = at::empty({1});
    table.remember(temp, state_with(1));
  }
  CHECK(table.size() < 2 * 2000 + 500);  // about 1.5x the live ones
  for (int i = 0; i < 2000; ++i) {
    auto found = table.find(live[i]);
    REQUIRE(found);
    CHECK(found->hash == uint64_t(i));
  }
  table.clear();
}

TEST_CASE("deleting from probe runs keeps every other entry reachable") {
  TensorTable table;
  std::vector<at::Tensor> tensors;
  for (int i = 0; i < 20000; ++i) {
    tensors.push_back(at::empty({0}));
    table.remember(tensors.back(), state_with(uint64_t(i) * 3));
  }
  for (int i = 0; i < 20000; i += 3) table.forget(tensors[i]);
  // Dying tensors make the sweep delete entries (and shift probe runs) as well.
  for (int i = 1; i < 20000; i += 7) tensors[i] = at::Tensor();
  for (int i = 0; i < 30000; ++i) table.remember(at::empty({0}), state_with(7));
  for (int i = 0; i < 20000; ++i) {
    if (!tensors[i].defined()) continue;
    auto found = table.find(tensors[i]);
    if (i % 3 == 0) {
      CHECK_FALSE(found);
    } else {
      REQUIRE(found);
      CHECK(found->hash == uint64_t(i) * 3);
    }
  }
  table.clear();
  CHECK(table.size() == 0);
  CHECK_FALSE(table.find(tensors[1]));
}

// The copy path runs here on CPU tensors (this machine has no GPU): `hash_host_copy` always
// copies, so its copy, guards and hashing are what a CUDA tensor goes through, less the
// device-to-host transfer itself.
TEST_CASE("a tensor hashed from a host copy gets its host hash and is left untouched") {
  at::Tensor base = at::arange(24, at::kFloat).reshape({4, 6});
  base.index_put_({0, 0}, std::numeric_limits<float>::quiet_NaN());
  at::Tensor t = base.t();  // not contiguous: the copy is laid out otherwise
  hashing::HashResult direct = hash_host_tensor(t, 1);
  hashing::HashResult copied = hash_host_copy(t, 1);
  REQUIRE(direct.hashed);
  REQUIRE(copied.hashed);
  CHECK(copied.hash == direct.hash);
  CHECK(copied.summary.nan_count == 1);
  CHECK(copied.summary.max == direct.summary.max);
  CHECK(copied.summary.sum == direct.summary.sum);

  at::Tensor leaf = at::randn({3, 5}).requires_grad_(true);
  at::Tensor made = leaf * 2;  // has a grad_fn
  const auto version = made._version();
  CHECK(hash_host_copy(made, 1).hash == hash_host_tensor(made, 1).hash);
  CHECK(made._version() == version);
  CHECK(made.grad_fn() != nullptr);
  made.sum().backward();  // the graph still works: the copy added nothing to it
  CHECK(leaf.grad().defined());
}

TEST_CASE("tensors on the host are never copied, lazy and meta devices are not hashed") {
  CHECK_FALSE(copied_to_host(at::ones({2})));
  CHECK(unhashable_reason(at::ones({2})) == nullptr);
  CHECK(std::string(unhashable_reason(at::empty({2}, at::device(at::kMeta)))) == "meta tensor");
}

}  // namespace
}  // namespace tdbg::torchhook
