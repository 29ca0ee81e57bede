// ResNet-18 inference (CIFAR stem, 3x32x32, 10 classes, eval mode) through Model::predict at
// batch 1 and 128: Graph mode (spore::jit; BatchNorm folded into the convs, conv + bias +
// residual + relu as oneDNN post-ops) vs PyNative. bench/peers/resnet_infer.sh compares these with
// PyTorch eager and TorchScript. Also LeNet-5 inference at batch 256 the same way.
// SPORE_NO_DNNL_FUSION=1 measures Graph mode without the fusions.
#include <benchmark/benchmark.h>

#include "models/lenet.h"
#include "models/resnet.h"
#include "spore/spore.h"

using namespace spore;

namespace {
void run(benchmark::State& state, Mode mode, bool lenet = false) {
  set_num_threads(2);
  set_seed(0);
  const int64_t n = state.range(0);
  nn::CellPtr net = lenet ? nn::CellPtr(std::make_shared<models::LeNet5>())
                          : nn::CellPtr(models::resnet18(10, models::ResNetStem::Cifar));
  train::Model model(net);
  Tensor x = lenet ? randn({n, 1, 28, 28}) : randn({n, 3, 32, 32});
  set_context({.mode = mode});
  for (int i = 0; i < 2; ++i) benchmark::DoNotOptimize(model.predict(x));  // Graph: compiles
  for (auto _ : state) benchmark::DoNotOptimize(model.predict(x));
  state.SetItemsProcessed(state.iterations() * n);
  set_context({.mode = Mode::PyNative});
}
}  // namespace

static void BM_ResNet18Infer_Graph(benchmark::State& state) { run(state, Mode::Graph); }
static void BM_ResNet18Infer_PyNative(benchmark::State& state) { run(state, Mode::PyNative); }
BENCHMARK(BM_ResNet18Infer_Graph)->Arg(1)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ResNet18Infer_PyNative)
    ->Arg(1)
    ->Arg(128)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

static void BM_LeNetInfer_Graph(benchmark::State& state) { run(state, Mode::Graph, true); }
static void BM_LeNetInfer_PyNative(benchmark::State& state) { run(state, Mode::PyNative, true); }
BENCHMARK(BM_LeNetInfer_Graph)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LeNetInfer_PyNative)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
