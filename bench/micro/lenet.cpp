// LeNet-5 step timings (PyNative): one training step at batch 64 (forward, loss, backward,
// Momentum update) and inference at batch 256 (no gradients). items/s = images per second.
#include <benchmark/benchmark.h>

#include "models/lenet.h"
#include "models/recipe.h"
#include "spore/spore.h"

using namespace spore;

static void BM_LeNetTrainStep64(benchmark::State& state) {
  set_num_threads(2);
  set_seed(0);
  auto net = std::make_shared<models::LeNet5>();
  auto step_ptr = models::momentum_train_step(net);
  train::TrainOneStepCell& step = *step_ptr;
  Tensor x = randn({64, 1, 28, 28}), y = randint(0, 10, {64}, kInt32);
  for (auto _ : state) benchmark::DoNotOptimize(step(x, y));
  state.SetItemsProcessed(state.iterations() * 64);
}
BENCHMARK(BM_LeNetTrainStep64)->Unit(benchmark::kMillisecond)->UseRealTime();

static void BM_LeNetInfer256(benchmark::State& state) {
  set_num_threads(2);
  models::LeNet5 net;
  net.set_train(false);
  Tensor x = randn({256, 1, 28, 28});
  NoGradGuard ng;
  for (auto _ : state) benchmark::DoNotOptimize(net(x));
  state.SetItemsProcessed(state.iterations() * 256);
}
BENCHMARK(BM_LeNetInfer256)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
