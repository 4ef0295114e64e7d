// A libtorch C++ training program (no Python): a two-layer regression net trained with SGD.
// The example for recording a C++ process with tdbg: `tdbg record -o RUN -- build/bin/train_cpp`.
// Usage: train_cpp [--seed N] [--steps N] [--lr X] [--threads N] [--in-thread 1] [--swish 1]
// [--scale-step N]; prints the loss of every step. --threads sets torch's intra-op thread count
// on the main thread; --in-thread 1 trains on a std::thread while the main thread waits;
// --swish 1 uses a custom autograd Function (Swish, with its own backward) as the activation
// instead of tanh; --scale-step N halves the first layer's weight in place between step N's
// backward and its optimizer step, as a hand-written weight constraint would.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

// x * sigmoid(x), with the gradient written by hand.
struct Swish : torch::autograd::Function<Swish> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x) {
    ctx->save_for_backward({x});
    return x * torch::sigmoid(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto x = ctx->get_saved_variables()[0];
    auto s = torch::sigmoid(x);
    // torch::ones_like runs below autograd (as every C++ factory does): still the backward's op.
    return {grad[0] * (s + x * s * (torch::ones_like(s) - s))};
  }
};

struct Net : torch::nn::Module {
  explicit Net(bool swish) : swish(swish) {
    fc1 = register_module("fc1", torch::nn::Linear(8, 32));
    fc2 = register_module("fc2", torch::nn::Linear(32, 1));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto h = fc1->forward(x);
    return fc2->forward(swish ? Swish::apply(h) : torch::tanh(h));
  }
  bool swish;
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

void train(int64_t seed, int64_t steps, double lr, bool swish, int64_t scale_step) {
  torch::manual_seed(seed);
  auto net = std::make_shared<Net>(swish);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(lr).momentum(0.9));
  // Fixed data, independent of the seed: y = sum(sin(x)).
  auto gen = at::detail::createCPUGenerator(1234);
  auto x = at::randn({64, 8}, gen);
  auto y = x.sin().sum(1, /*keepdim=*/true);
  for (int64_t step = 0; step < steps; ++step) {
    opt.zero_grad();
    auto loss = torch::mse_loss(net->forward(x), y);
    loss.backward();
    if (step == scale_step) {
      torch::NoGradGuard no_grad;
      net->fc1->weight.mul_(0.5);
    }
    opt.step();
    std::printf("step %lld loss %.9g\n", static_cast<long long>(step), loss.item<double>());
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t seed = 0, steps = 10, threads = 0, in_thread = 0, swish = 0, scale_step = -1;
  double lr = 0.05;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seed")) seed = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--steps")) steps = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--lr")) lr = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--in-thread")) in_thread = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--swish")) swish = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--scale-step"))
      scale_step = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr,
                   "usage: %s [--seed N] [--steps N] [--lr X] [--threads N] [--in-thread 1] "
                   "[--swish 1] [--scale-step N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (threads > 0) at::set_num_threads(static_cast<int>(threads));
  if (in_thread) {
    std::thread worker([&] { train(seed, steps, lr, swish != 0, scale_step); });
    worker.join();
  } else {
    train(seed, steps, lr, swish != 0, scale_step);
  }
  return 0;
}
