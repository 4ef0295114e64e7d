// Runs the GPU hash's kernel bodies (gpu_hash_body.h) on the CPU, one chunk at a time on 32
// threads in lockstep standing in for a warp, and checks hash and summaries against
// `hash_tensor`. This is what tests the GPU's arithmetic on machines without a GPU; the
// device test (cuda_hash_test) then only has launch and memory plumbing left to prove.
#include <catch2/catch.hpp>

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "hashing/gpu_hash_body.h"
#include "hashing/lanes_testing.h"
#include "hashing/tensor_hash.h"

using namespace tdbg::hashing;
namespace gb = tdbg::hashing::gpu_body;

namespace {

using testing::ThreadLanes;

using testing::on_lanes;

// The GPU algorithm end to end on the CPU: what `hash_tensor_async` launches.
HashResult emulate_gpu(const void* data, DType dtype, const std::vector<int64_t>& sizes) {
  uint64_t numel = 1;
  for (int64_t s : sizes) numel *= uint64_t(s);
  gb::Job job;
  job.data = static_cast<const uint8_t*>(data);
  job.total_bytes = numel * dtype_size(dtype);
  job.chunks = (job.total_bytes + kChunkBytes - 1) / kChunkBytes;
  job.unit = gb::unit_of(dtype);
  job.summaries = dtype_is_floating(dtype);
  job.header_bytes = uint32_t(24 + 8 * sizes.size());
  std::vector<uint64_t> stream((job.header_bytes + 8 * job.chunks) / 8 + 1);
  std::vector<gb::Partial> partials(job.chunks + 1);
  job.stream_buf = reinterpret_cast<uint8_t*>(stream.data());
  job.partials = partials.data();
  gb::Header header{};
  header.dtype = uint32_t(dtype);
  header.ndim = uint32_t(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) header.sizes[d] = sizes[d];
  for (uint64_t c = 0; c < job.chunks; ++c) on_lanes([&](ThreadLanes l) { gb::chunk_body(l, job, c); });
  HashResult r;
  on_lanes([&](ThreadLanes l) { gb::final_body(l, [&] { l.group->barrier(); }, job, header, &r); });
  return r;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& v : b) v = uint8_t(rng());
  return b;
}

}  // namespace

TEST_CASE("the GPU kernel bodies, run on 32 CPU lanes, give hash_tensor's hash and summaries") {
  const DType dtypes[] = {DType::kBool, DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat16,
                          DType::kBFloat16, DType::kFloat32, DType::kFloat64, DType::kComplex64,
                          DType::kFloat8E4M3FN, DType::kFloat8E5M2, DType::kComplex128};
  for (DType dt : dtypes) {
    size_t es = dtype_size(dt), per_chunk = kChunkBytes / es;
    for (size_t n : {size_t(1), size_t(3), size_t(61), size_t(300), per_chunk - 1, per_chunk + 1}) {
      INFO(dtype_name(dt) << " n=" << n);
      // Random bits: plenty of NaN/Inf patterns and non-0/1 bools, so canonicalization is hit.
      auto bytes = random_bytes(n * es + es, uint32_t(n) * 13 + uint32_t(dt));
      if (dt == DType::kFloat64 || dt == DType::kComplex128) {
        // Random float64 bits sum to nonsense (±1e308 cancelling in any order); keep values
        // below 2 in magnitude, and a NaN with a payload every 50 values.
        for (size_t i = 7; i < bytes.size(); i += 8) {
          bool nan = (i / 8) % 50 == 0;
          bytes[i] = nan ? 0xff : bytes[i] & 0xbf;
          if (nan) bytes[i - 1] |= 0xf8;  // exponent all ones, mantissa non-zero
        }
      }
      const uint8_t* data = bytes.data() + es;  // element-aligned, not 8-aligned
      std::vector<int64_t> sizes = {int64_t(n)};
      HashResult g = emulate_gpu(data, dt, sizes);
      TensorView v{data, dt, 1, sizes.data(), nullptr};
      HashResult c = hash_tensor(v);
      REQUIRE(g.hashed);
      CHECK(g.hash == c.hash);
      CHECK(g.summary.valid == c.summary.valid);
      if (c.summary.valid) {
        CHECK(g.summary.nan_count == c.summary.nan_count);
        CHECK(g.summary.inf_count == c.summary.inf_count);
        CHECK((g.summary.min == c.summary.min || (std::isnan(g.summary.min) && std::isnan(c.summary.min))));
        CHECK((g.summary.max == c.summary.max || (std::isnan(g.summary.max) && std::isnan(c.summary.max))));
        // Random float64 bits overflow the sums to ±Inf on both sides: equal is fine too.
        CHECK((g.summary.sum == c.summary.sum ||
               std::fabs(g.summary.sum - c.summary.sum) <= 1e-9 * c.summary.abs_sum));
        CHECK((g.summary.abs_sum == c.summary.abs_sum ||
               std::fabs(g.summary.abs_sum - c.summary.abs_sum) <= 1e-9 * c.summary.abs_sum));
      }
    }
  }
  // A 0-dim and a 3-D shape.
  float x = 2.5f;
  CHECK(emulate_gpu(&x, DType::kFloat32, {}).hash == hash_tensor(TensorView{&x, DType::kFloat32, 0, nullptr, nullptr}).hash);
  std::vector<float> t(2 * 3 * 5000, 1.25f);
  std::vector<int64_t> sizes = {2, 3, 5000};
  CHECK(emulate_gpu(t.data(), DType::kFloat32, sizes).hash ==
        hash_tensor(TensorView{t.data(), DType::kFloat32, 3, sizes.data(), nullptr}).hash);
}
