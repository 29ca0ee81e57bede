// Does Winograd change training? ResNet-18 (CIFAR stem, batch 32, Momentum 0.01/0.9, Graph mode)
// trained from one initialisation on the same batches three ways, step by step in turn:
//   A  winograd: SPORE_CONV_IMPL=winograd,onednn (Winograd F(2x2, 3x3) forced on every 3x3
//      stride-1 conv's forward and data gradient, oneDNN for the rest), 2 threads
//   B  onednn:   SPORE_CONV_IMPL=onednn, 2 threads (the reference path)
//   C  onednn on the batch in reverse order: the same math as B (a batch mean, batch statistics)
//      summed in another order, i.e. what float32 rounding alone does to the curve (oneDNN gives
//      bit-identical results on 1 and 2 threads, so that is no measure of it)
// The batches: 8 synthetic batches taken in turn (images from seed 1000 + step % 8, labelled by a
// fixed random linear map: the argmax of 10 projections), which the network learns, so the loss
// falls.
// Prints each step's three losses and the summary: max over steps of |A - B| against max |C - B|
// (Winograd is within float32 noise when the first is of the order of the second).
// Run: OMP_NUM_THREADS=2 build/bench/bench_winograd_loss_curve [steps, default 100]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernels/conv_list.h"
#include "models/recipe.h"
#include "models/resnet.h"
#include "spore/spore.h"

using namespace spore;

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 100;
  const int64_t n = 32;
  set_seed(99);
  const Tensor proj = randn({3 * 32 * 32, 10});  // the labelling map
  struct Run {
    const char* name;
    const char* impl;
    bool reversed;
    std::shared_ptr<train::TrainOneStepCell> step;
    std::vector<double> loss;
  };
  std::vector<Run> runs{{"winograd", "winograd,onednn", false, nullptr, {}},
                        {"onednn", "onednn", false, nullptr, {}},
                        {"onednn_reversed", "onednn", true, nullptr, {}}};
  std::vector<int32_t> rev(n);
  for (int64_t i = 0; i < n; ++i) rev[size_t(i)] = int32_t(n - 1 - i);
  const Tensor reverse = from_vector(rev, {n});
  for (Run& r : runs) {
    set_seed(0);  // one initialisation for all three
    r.step = models::momentum_train_step(models::resnet18(10, models::ResNetStem::Cifar));
  }
  set_context({.mode = Mode::Graph});
  std::printf(
      "step  loss: winograd  onednn  onednn_reversed   |winograd-onednn|  |reversed-onednn|\n");
  double worst_ab = 0, worst_cb = 0;
  for (int k = 0; k < steps; ++k) {
    set_seed(uint64_t(1000 + k % 8));
    const Tensor x = randn({n, 3, 32, 32});
    const Tensor y = argmax(matmul(x.reshape({n, -1}), proj), 1).to(kInt32);
    const Tensor xr = index_select(x, 0, reverse), yr = index_select(y, 0, reverse);
    for (Run& r : runs) {
      cpu::ScopedConvImpl impl(r.impl);
      r.loss.push_back((*r.step)(r.reversed ? xr : x, r.reversed ? yr : y).item<double>());
    }
    const double a = runs[0].loss.back(), b = runs[1].loss.back(), c = runs[2].loss.back();
    worst_ab = std::max(worst_ab, std::fabs(a - b));
    worst_cb = std::max(worst_cb, std::fabs(c - b));
    std::printf("%4d  %.7f  %.7f  %.7f   %.2e  %.2e\n", k, a, b, c, std::fabs(a - b),
                std::fabs(c - b));
    std::fflush(stdout);
  }
  set_context({.mode = Mode::PyNative});
  double first = 0, last = 0;  // mean loss of the first and last 10 steps (onednn)
  for (int k = 0; k < steps && k < 10; ++k) first += runs[1].loss[size_t(k)] / std::min(steps, 10);
  for (int k = std::max(0, steps - 10); k < steps; ++k)
    last += runs[1].loss[size_t(k)] / std::min(steps, 10);
  std::printf(
      "%d steps: max |winograd - onednn| %.2e, max |onednn reversed batch - onednn| %.2e (float32 "
      "noise); "
      "onednn loss %.4f (first 10 steps) -> %.4f (last 10)\n",
      steps, worst_ab, worst_cb, first, last);
  return 0;
}
