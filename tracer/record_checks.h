// Test-only: Catch2 checks that two op records (as written, as read back) are the same,
// field by field. Shared by the writer's and the op-block codec's tests.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <utility>
#include <vector>

#include "tracer/records.h"

namespace tdbg::tracer::testing {

// Doubles compared bit for bit: NaN equals NaN, and -0.0 differs from 0.0.
inline bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

inline void CheckSameTensor(const TensorRecord& a, const TensorRecord& b) {
  CHECK(static_cast<int>(a.role) == static_cast<int>(b.role));
  CHECK(a.index == b.index);
  CHECK(static_cast<int>(a.dtype) == static_cast<int>(b.dtype));
  CHECK(a.shape == b.shape);
  CHECK(a.device == b.device);
  CHECK(static_cast<int>(a.status) == static_cast<int>(b.status));
  CHECK(a.hash == b.hash);
  CHECK(a.producer == b.producer);
  CHECK(a.summary.valid == b.summary.valid);
  if (a.summary.valid && b.summary.valid) {
    CHECK(SameBits(a.summary.min, b.summary.min));
    CHECK(SameBits(a.summary.max, b.summary.max));
    CHECK(SameBits(a.summary.sum, b.summary.sum));
    CHECK(SameBits(a.summary.abs_sum, b.summary.abs_sum));
    CHECK(a.summary.nan_count == b.summary.nan_count);
    CHECK(a.summary.inf_count == b.summary.inf_count);
  }
  CHECK(a.reason == b.reason);
}

// `b` as read back; `a` as written. Tensors come back inputs first, then outputs, by index.
inline void CheckSameOp(const OpRecord& a, const OpRecord& b, bool with_details = true) {
  CHECK(a.seq == b.seq);
  CHECK(a.thread == b.thread);
  CHECK(a.tidx == b.tidx);
  CHECK(a.parent == b.parent);
  CHECK(a.depth == b.depth);
  CHECK(a.name == b.name);
  CHECK(a.step == b.step);
  CHECK(a.module == b.module);
  CHECK(a.stack == b.stack);
  CHECK(a.user_frame == b.user_frame);
  CHECK(a.fwd == b.fwd);
  CHECK(a.region == b.region);
  CHECK(a.start_ns == b.start_ns);
  CHECK(a.end_ns == b.end_ns);
  CHECK(a.chain == b.chain);
  CHECK(a.rng == b.rng);
  CHECK(a.flags == b.flags);
  if (!with_details) {
    CHECK(b.tensors.empty());
    CHECK(b.args.empty());
    return;
  }
  std::vector<TensorRecord> want = a.tensors;
  std::sort(want.begin(), want.end(), [](auto& x, auto& y) {
    return std::make_pair(x.role, x.index) < std::make_pair(y.role, y.index);
  });
  REQUIRE(want.size() == b.tensors.size());
  for (size_t i = 0; i < want.size(); ++i) CheckSameTensor(want[i], b.tensors[i]);
  REQUIRE(a.args.size() == b.args.size());
  for (size_t i = 0; i < a.args.size(); ++i) {
    CHECK(a.args[i].index == b.args[i].index);
    CHECK(a.args[i].name == b.args[i].name);
    CHECK(a.args[i].value == b.args[i].value);
  }
}

}  // namespace tdbg::tracer::testing
