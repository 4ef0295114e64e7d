// Test helper: 32 CPU threads that exchange values in lockstep, a stand-in for a warp's
// shuffles, so the GPU's warp-cooperative code (xxh3_warp.h, gpu_hash_body.h) runs unchanged
// in the CPU tests and is checked against the CPU path.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace tdbg::hashing::testing {

struct Lockstep {
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  uint64_t slots[32] = {};
  void barrier() {
    std::unique_lock<std::mutex> lock(m);
    uint64_t gen = generation;
    if (++arrived == 32) {
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != gen; });
    }
  }
};

// One lane of the 32: what the warp code calls for its lane id and shuffles.
struct ThreadLanes {
  Lockstep* group;
  int id;
  int lane() const { return id; }
  uint64_t exchange(uint64_t v, int src) const {
    group->slots[id] = v;
    group->barrier();
    uint64_t r = group->slots[src];
    group->barrier();
    return r;
  }
  uint64_t shfl_xor(uint64_t v, int mask) const { return exchange(v, id ^ mask); }
  uint64_t shfl(uint64_t v, int src) const { return exchange(v, src); }
};

// Runs `body(lanes)` on 32 threads in lockstep.
template <typename Body>
void on_lanes(Body body) {
  Lockstep group;
  std::vector<std::thread> threads;
  for (int i = 0; i < 32; ++i) threads.emplace_back([&, i] { body(ThreadLanes{&group, i}); });
  for (auto& t : threads) t.join();
}

}  // namespace tdbg::hashing::testing
