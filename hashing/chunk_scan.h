// Per-chunk work of the CPU path: NaN/bool detection and the numeric summaries of one chunk
// of the logical byte stream, vectorized with SSE2 (the x86-64 baseline, so no run-time
// dispatch is needed) with a portable scalar version elsewhere. Internal to hashing/.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hashing/canonical.h"

namespace tdbg::hashing::internal {

// Summary of one chunk. `sum`/`abs_sum` are combined across chunks in chunk order, which
// makes the totals independent of thread count and memory layout.
struct ChunkSummary {
  double min = 0, max = 0, sum = 0, abs_sum = 0;
  int64_t nan_count = 0, inf_count = 0, finite_count = 0;
};

// Summarizes `bytes` bytes of `unit` values at `p` (a floating unit; `bytes` a multiple of
// its size). Also tells, through `nan_count`, whether the chunk needs canonicalizing.
ChunkSummary summarize_chunk(canonical::Unit unit, const uint8_t* p, size_t bytes);

// True when the chunk holds a byte pattern the spec rewrites (a NaN, a bool other than 0/1).
bool chunk_needs_canonical(canonical::Unit unit, const uint8_t* p, size_t bytes);

// Copies `bytes` bytes from `p` to `out`, canonicalizing every unit.
void canonicalize_chunk(canonical::Unit unit, const uint8_t* p, size_t bytes, uint8_t* out);

// One pass over a chunk that both hashes it (XXH3-64 with `seed`) and, when `summary` is not
// null, summarizes it: each 64-byte stripe is loaded once for both, so memory streams without
// the pause that a scan-then-hash pair leaves. Handles float32, float64, float16 and bfloat16
// chunks of more than 240 bytes on CPUs with AVX2 (AVX-512 where present). Returns false, having written nothing,
// when it does not apply or when the chunk holds a NaN or an infinity (the caller then takes
// the exact path, which canonicalizes and counts).
bool fused_hash_and_scan(canonical::Unit unit, const uint8_t* p, size_t bytes, uint64_t seed,
                         uint64_t* hash, ChunkSummary* summary);

// Tests only: true restricts the scans to the SSE2 baseline even where AVX2 is available, so
// that both vector paths are tested on one machine. Not thread-safe; not for production use.
void force_baseline_simd_for_testing(bool on);
// Tests only: true keeps the fused loop at AVX2 on CPUs that have AVX-512.
void force_avx2_for_testing(bool on);

}  // namespace tdbg::hashing::internal
