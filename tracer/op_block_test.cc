// Tests of the op-block codec (tracer/op_block.h): lossless round trips of every field,
// including the compact cases (hash references to a producer in the block, summary values
// stored as float32 only when exact), and one-line errors, never a crash, on damaged blocks.
#include "tracer/op_block.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>

#include "tracer/record_checks.h"
#include "tracer/testing.h"

namespace tdbg::tracer {
namespace {

using testing::CheckSameOp;

std::vector<OpRecord> RandomOps(size_t n, uint64_t seed) {
  testing::Rng rng(seed);
  std::vector<OpRecord> ops;
  int64_t seq = 1000, tidx = 10, clock = 5'000'000;
  for (size_t i = 0; i < n; ++i) {
    OpRecord op;
    seq += 1 + static_cast<int64_t>(rng.below(3));  // other threads' ops in between
    tidx += 1 + (rng.below(10) == 0 ? static_cast<int64_t>(rng.below(5)) : 0);  // filtered ops
    op.seq = seq;
    op.tidx = tidx;
    op.thread = 3;
    if (rng.below(2)) op.parent = seq - 1 - static_cast<int64_t>(rng.below(4));
    op.depth = static_cast<uint16_t>(rng.below(4));
    op.name = static_cast<StringId>(1 + rng.below(300));
    op.step = static_cast<int64_t>(i / 7);
    op.module = static_cast<StringId>(rng.below(3) ? 7 : rng.below(1000));
    op.stack = static_cast<FrameId>(rng.below(4) ? 11 : rng.below(100000));
    op.user_frame = rng.below(2) ? op.stack : static_cast<FrameId>(rng.below(50));
    if (rng.below(3) == 0) op.fwd = seq - 1 - static_cast<int64_t>(rng.below(100000));
    op.region = static_cast<uint32_t>(rng.below(3));
    clock += static_cast<int64_t>(rng.below(100000));
    op.start_ns = clock - (rng.below(5) == 0 ? 3000 : 0);  // starts may go backwards
    op.end_ns = op.start_ns + static_cast<int64_t>(rng.below(1u << 30));
    op.chain = rng.next();
    op.rng = rng.below(5) == 0 ? rng.next() : 0;
    op.flags = static_cast<uint32_t>(rng.below(32));
    const size_t tensors = rng.below(6);
    for (size_t k = 0; k < tensors; ++k) {
      TensorRecord t;
      t.role = rng.below(2) ? TensorRole::kOutput : TensorRole::kInput;
      t.index = static_cast<uint16_t>(rng.below(4) == 0 ? rng.below(70000) : k);
      t.dtype = static_cast<hashing::DType>(rng.below(20));
      t.shape = static_cast<StringId>(rng.below(3) ? 5 : rng.below(9999));
      t.device = static_cast<StringId>(rng.below(2));
      t.status = static_cast<TensorStatus>(rng.below(6));
      t.hash = rng.below(4) == 0 ? 0 : rng.next();
      if (rng.below(2) && !ops.empty()) {
        // Often the output of an earlier op of the block, with its hash: a back reference.
        const OpRecord& p = ops[rng.below(ops.size())];
        t.producer = p.seq;
        for (const TensorRecord& pt : p.tensors) {
          if (pt.role == TensorRole::kOutput && pt.hash != 0 && rng.below(2)) {
            t.hash = pt.hash;
            // Mostly with its producer's summaries, as the hook records a known input.
            if (rng.below(4)) t.summary = pt.summary;
          }
        }
      } else if (rng.below(4) == 0) {
        t.producer = seq - 5000;  // outside the block
      }
      if (t.producer == kNoSeq && rng.below(2)) {
        t.summary.valid = true;
        const double specials[] = {0.0, -0.0, 1.5, -2.25e-3, 1e300, 3.0 / 7.0,
                                   std::numeric_limits<double>::infinity(),
                                   std::numeric_limits<double>::quiet_NaN(),
                                   static_cast<double>(0.1f)};
        t.summary.min = specials[rng.below(9)];
        t.summary.max = specials[rng.below(9)];
        t.summary.sum = specials[rng.below(9)];
        t.summary.abs_sum = static_cast<double>(rng.next()) / 3.0;
        t.summary.nan_count = static_cast<int64_t>(rng.below(3) == 0 ? rng.next() >> 1 : 0);
        t.summary.inf_count = static_cast<int64_t>(rng.below(100));
      }
      t.reason = static_cast<StringId>(rng.below(4) == 0 ? 1 + rng.below(10) : 0);
      // Unique (role, index) per op, as the hook records them.
      bool dup = false;
      for (const TensorRecord& o : op.tensors) dup |= o.role == t.role && o.index == t.index;
      if (!dup) op.tensors.push_back(t);
    }
    for (size_t k = 0, n_args = rng.below(4); k < n_args; ++k) {
      op.args.push_back(ArgRecord{static_cast<uint16_t>(k * 2), static_cast<StringId>(rng.below(99)),
                                  static_cast<StringId>(rng.below(100000))});
    }
    ops.push_back(std::move(op));
  }
  return ops;
}

std::vector<const OpRecord*> Pointers(const std::vector<OpRecord>& ops) {
  std::vector<const OpRecord*> out;
  for (const OpRecord& op : ops) out.push_back(&op);
  return out;
}

TEST_CASE("op blocks round trip every field, bit for bit") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const auto ops = RandomOps(1 + seed * 13, seed);
    std::string block;
    EncodeOpBlock(Pointers(ops), 1'000'000, &block);
    std::vector<OpRecord> back;
    Status st = DecodeOpBlock(block, 1'000'000, true, &back);
    INFO(st.message());
    REQUIRE(st.ok());
    REQUIRE(back.size() == ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      CheckSameOp(ops[i], back[i]);
    }
    // Without details: the same ops, no tensors or args.
    REQUIRE(DecodeOpBlock(block, 1'000'000, false, &back).ok());
    REQUIRE(back.size() == ops.size());
    for (size_t i = 0; i < ops.size(); ++i) CheckSameOp(ops[i], back[i], false);
  }
}

TEST_CASE("an empty block and a block of one op") {
  std::string block;
  EncodeOpBlock({}, 0, &block);
  std::vector<OpRecord> back{OpRecord()};
  REQUIRE(DecodeOpBlock(block, 0, true, &back).ok());
  CHECK(back.empty());
  OpRecord op;
  op.seq = 0;
  op.tidx = 0;
  block.clear();
  EncodeOpBlock({&op}, 0, &block);
  REQUIRE(DecodeOpBlock(block, 0, true, &back).ok());
  REQUIRE(back.size() == 1);
  CheckSameOp(op, back[0]);
}

// A chain of 100 ops, each reading the previous op's output as a known input (its hash, and
// its summaries when `summaries`).
std::vector<OpRecord> ChainOps(testing::Rng& rng, bool summaries) {
  std::vector<OpRecord> ops(100);
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i].seq = ops[i].tidx = static_cast<int64_t>(i);
    ops[i].chain = rng.next();
    TensorRecord out;
    out.hash = rng.next();
    if (summaries) {
      out.summary.valid = true;
      out.summary.min = -static_cast<double>(rng.next()) / 7.0;
      out.summary.max = std::numeric_limits<double>::quiet_NaN();
      out.summary.sum = static_cast<double>(rng.next()) / 3.0;
      out.summary.abs_sum = static_cast<double>(rng.next()) / 5.0;
      out.summary.nan_count = 3;
    }
    ops[i].tensors.push_back(out);
    if (i > 0) {
      TensorRecord in = ops[i - 1].tensors.back();
      in.role = TensorRole::kInput;
      in.status = TensorStatus::kKnown;
      in.producer = ops[i - 1].seq;
      ops[i].tensors.insert(ops[i].tensors.begin(), in);
    }
  }
  return ops;
}

TEST_CASE("a hash seen earlier in the block costs a byte or two, not eight") {
  // Each hash of the chain is stored once.
  testing::Rng rng(7);
  auto ops = ChainOps(rng, false);
  std::string repeated;
  EncodeOpBlock(Pointers(ops), 0, &repeated);
  for (auto& op : ops) {
    if (op.tensors.size() > 1) op.tensors.front().hash = rng.next();  // now all distinct
  }
  std::string distinct;
  EncodeOpBlock(Pointers(ops), 0, &distinct);
  CHECK(distinct.size() - repeated.size() >= 99 * 6);
  std::vector<OpRecord> back;
  REQUIRE(DecodeOpBlock(repeated, 0, true, &back).ok());
  REQUIRE(back.size() == ops.size());
  for (size_t i = 1; i < back.size(); ++i) {
    CHECK(back[i].tensors.front().hash == back[i - 1].tensors.back().hash);
  }
}

TEST_CASE(
    "an input's summaries, as stored with its hash earlier in the block, are not stored again") {
  // Each input with its producer's summaries.
  testing::Rng rng(11);
  const auto ops = ChainOps(rng, true);
  std::string shared;
  EncodeOpBlock(Pointers(ops), 0, &shared);
  std::vector<OpRecord> back;
  REQUIRE(DecodeOpBlock(shared, 0, true, &back).ok());
  REQUIRE(back.size() == ops.size());
  for (size_t i = 0; i < ops.size(); ++i) CheckSameOp(ops[i], back[i]);

  // An input whose summaries differ from those stored with its hash keeps its own.
  auto changed = ops;
  for (auto& op : changed) {
    if (op.tensors.size() > 1) op.tensors.front().summary.sum = 0.5;
  }
  std::string own;
  EncodeOpBlock(Pointers(changed), 0, &own);
  CHECK(own.size() - shared.size() >= 99 * 20);
  REQUIRE(DecodeOpBlock(own, 0, true, &back).ok());
  for (size_t i = 0; i < changed.size(); ++i) CheckSameOp(changed[i], back[i]);

  // Format 2 has no such reference: a block that holds one is damaged there; one that holds
  // none reads as before.
  std::string as_format2 = shared;
  as_format2[0] = 2;
  Status st = DecodeOpBlock(as_format2, 0, true, &back);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("summary reference") != std::string::npos);
  as_format2 = own;
  as_format2[0] = 2;
  REQUIRE(DecodeOpBlock(as_format2, 0, true, &back).ok());
  for (size_t i = 0; i < changed.size(); ++i) CheckSameOp(changed[i], back[i]);
}

TEST_CASE("a damaged block is an error, never a crash") {
  const auto ops = RandomOps(60, 99);
  std::string block;
  EncodeOpBlock(Pointers(ops), 0, &block);
  std::vector<OpRecord> back;
  // Every truncation: an error, or (cut at an op boundary) fewer ops, which the reader
  // catches against the row's `count`.
  for (size_t n = 0; n < block.size(); ++n) {
    Status st = DecodeOpBlock(std::string_view(block.data(), n), 0, true, &back);
    if (st.ok()) {
      CHECK(back.size() < ops.size());
    } else {
      CHECK(st.message().find('\n') == std::string::npos);
    }
  }
  // Flipped bytes decode or fail, but stay in bounds (run under ASan to see it).
  testing::Rng rng(5);
  for (int i = 0; i < 2000; ++i) {
    std::string bad = block;
    bad[rng.below(bad.size())] ^= static_cast<char>(1 + rng.below(255));
    (void)DecodeOpBlock(bad, 0, true, &back);
  }
  // Another format version.
  std::string future = block;
  future[0] = static_cast<char>(kOpBlockFormat + 1);
  Status st = DecodeOpBlock(future, 0, true, &back);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("format") != std::string::npos);
}

}  // namespace
}  // namespace tdbg::tracer
