// The loss-scaled Graph-mode training step, two ways, in one run (steps alternate, so load spikes
// hit both): the host deciding on overflow (a compiled gradient graph, the host reading its flag,
// then the optimizer step run eagerly: set_decide_on_device(false))
// and the device deciding (the whole step one compiled graph, the update gated in its kernels;
// train/wrappers.h). amp O2 bfloat16 with DynamicLossScaleManager, Momentum, LeNet-5 (batch 64)
// and ResNet-18 CIFAR (batch 32), synthetic data. Prints the median step of each and the ratio,
// and checks that both trained alike (equal losses: the same work, not a skipped one).
//   build/bench/bench_loss_scale_step [rounds]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/micro/bench_util.h"
#include "spore/amp.h"

using namespace spore;

namespace {

std::shared_ptr<train::TrainOneStepWithLossScaleCell> make(const bench::ClassificationJob& job,
                                                           bool on_device) {
  nn::CellPtr net = job.net();
  amp::auto_mixed_precision(*net, amp::Level::O2, kBFloat16);
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  auto cell = std::make_shared<train::TrainOneStepWithLossScaleCell>(
      std::make_shared<train::WithLossCell>(amp::with_float32_output(net), loss),
      std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9),
      std::make_shared<amp::DynamicLossScaleManager>(65536.0, 2, 1000));
  cell->set_decide_on_device(on_device);
  return cell;
}

void run(bool resnet, int rounds) {
  const bench::ClassificationJob job(resnet);
  set_context({.mode = Mode::Graph});
  std::shared_ptr<train::TrainOneStepWithLossScaleCell> cells[2] = {make(job, false),
                                                                    make(job, true)};
  std::vector<double> ms[2];
  double last_loss[2] = {};
  for (int r = -2; r < rounds; ++r)  // two warm-up rounds: trace, compile, first choices
    for (int k = 0; k < 2; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      const Tensor loss = cells[k]->forward({job.x, job.y})[0];
      last_loss[k] = loss.item<double>();  // the step has finished (the device's flag too)
      (void)cells[k]->loss_scale();
      const double t =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r >= 0) ms[k].push_back(t);
    }
  const double host = bench::median(ms[0]), device = bench::median(ms[1]);
  std::printf(
      "%-28s host-decided %8.3f ms | device-decided %8.3f ms = %.3fx  (%s: %d rounds; "
      "decides_on_device %d/%d; last loss %.6f / %.6f)\n",
      resnet ? "ResNet-18 CIFAR, batch 32" : "LeNet-5, batch 64", host, device, host / device,
      "median step", rounds, int(cells[0]->decides_on_device()), int(cells[1]->decides_on_device()),
      last_loss[0], last_loss[1]);
  set_context({.mode = Mode::PyNative});
}

}  // namespace

int main(int argc, char** argv) {
  set_num_threads(2);
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 40;
  std::printf(
      "amp O2 bf16, DynamicLossScaleManager, Momentum, Graph mode (one process, steps "
      "alternating)\n");
  run(false, rounds);
  run(true, std::max(5, rounds / 4));
  return 0;
}
