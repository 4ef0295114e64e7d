// A libtorch C++ training program that a bad batch stops: for diff:crash (diff_e2e.py). The
// batch of step --bad-step has 7 features where the net takes 8, so fc1's matrix product
// throws a c10::Error that nothing catches: std::terminate aborts the process inside that op.
// Usage: shape_error [--steps N] [--bad-step N] (-1, the default: no bad batch).
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 1));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2->forward(torch::relu(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 6, bad_step = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--bad-step")) bad_step = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--steps N] [--bad-step N]\n", argv[0]);
      return 2;
    }
  }
  torch::manual_seed(0);
  auto net = std::make_shared<Net>();
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05));
  auto gen = at::detail::createCPUGenerator(1234);
  // A lambda: tdbg names its frames after the function it is in, not "operator()".
  auto batch = [&](int64_t features) { return at::randn({32, features}, gen); };
  for (int64_t step = 0; step < steps; ++step) {
    auto x = batch(step == bad_step ? 7 : 8);
    auto y = x.sum(1, /*keepdim=*/true);
    opt.zero_grad();
    auto loss = torch::mse_loss(net->forward(x), y);
    loss.backward();
    opt.step();
    std::printf("step %lld loss %.9g\n", static_cast<long long>(step), loss.item<double>());
    std::fflush(stdout);
  }
  return 0;
}
