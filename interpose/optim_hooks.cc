// Steps of libtorch's C++ optimizers, for C++ training programs: torch::optim's step()
// methods open no record-function range (Python's optimizers open "Optimizer.step#..."), so
// the preload interposes them by name (hooks.inc) and tells the dispatch hook when a step
// begins and ends (tdbg_step_sink, preload_api.h). Python programs never call these.
#include <atomic>

#include "interpose/preload.h"
#include "interpose/preload_api.h"

namespace tdbg::preload {
namespace {

// Two slots: the hook may set a new sink while another thread still reads the old one.
tdbg_step_sink g_slots[2];
int g_next_slot = 0;
std::atomic<const tdbg_step_sink*> g_sink{nullptr};

// Tells the sink about one step around the real call, even when the step throws (LBFGS's
// closure may), so that begin and end always pair.
class StepScope {
 public:
  StepScope(const char* optimizer, const void* self)
      : optimizer_(optimizer), sink_(g_sink.load(std::memory_order_acquire)) {
    if (sink_ != nullptr && sink_->on_step_begin != nullptr) {
      sink_->on_step_begin(sink_->ctx, optimizer_, self);
    }
  }
  ~StepScope() {
    if (sink_ != nullptr && sink_->on_step_end != nullptr) sink_->on_step_end(sink_->ctx, optimizer_);
  }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  const char* optimizer_;
  const tdbg_step_sink* sink_;
};

template <typename Fn>
void* step(Fn real, const char* optimizer, void* ret, void* self, void* closure) {
  if (real == nullptr) {
    static int said = 0;
    say_once(&said, "the real torch::optim::%s::step is missing; aborting", optimizer);
    __builtin_trap();
  }
  StepScope scope(optimizer, self);
  return real(ret, self, closure);
}

}  // namespace

#define TDBG_STEP(name, optimizer) \
  void* on_##name(void* ret, void* self, void* closure) { \
    return step(real_##name(), optimizer, ret, self, closure); \
  }
TDBG_STEP(_ZN5torch5optim3SGD4stepESt8functionIFN2at6TensorEvEE, "SGD")
TDBG_STEP(_ZN5torch5optim4Adam4stepESt8functionIFN2at6TensorEvEE, "Adam")
TDBG_STEP(_ZN5torch5optim5AdamW4stepESt8functionIFN2at6TensorEvEE, "AdamW")
TDBG_STEP(_ZN5torch5optim5LBFGS4stepESt8functionIFN2at6TensorEvEE, "LBFGS")
TDBG_STEP(_ZN5torch5optim7Adagrad4stepESt8functionIFN2at6TensorEvEE, "Adagrad")
TDBG_STEP(_ZN5torch5optim7RMSprop4stepESt8functionIFN2at6TensorEvEE, "RMSprop")
#undef TDBG_STEP

}  // namespace tdbg::preload

extern "C" __attribute__((visibility("default"))) void tdbg_preload_set_step_sink(
    const tdbg_step_sink* sink) {
  using namespace tdbg::preload;
  if (sink == nullptr) {
    g_sink.store(nullptr, std::memory_order_release);
    return;
  }
  tdbg_step_sink& slot = g_slots[g_next_slot];
  g_next_slot ^= 1;
  slot = *sink;
  g_sink.store(&slot, std::memory_order_release);
}
