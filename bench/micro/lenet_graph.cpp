// LeNet-5 training step at batch 64, Graph mode vs PyNative (the same step as
// bench/micro/lenet.cpp), with memory: the Graph arena (planned peak) and PyNative's allocator peak
// for one step.
#include <benchmark/benchmark.h>

#include "models/lenet.h"
#include "models/recipe.h"
#include "models/resnet.h"
#include "spore/jit.h"
#include "spore/spore.h"

using namespace spore;

namespace {
std::shared_ptr<train::TrainOneStepCell> make_step() {
  set_num_threads(2);
  set_seed(0);
  auto net = std::make_shared<models::LeNet5>();
  return models::momentum_train_step(net);
}

std::shared_ptr<train::TrainOneStepCell> make_resnet_step() {
  set_num_threads(2);
  set_seed(0);
  auto net = models::resnet18(10, models::ResNetStem::Cifar);
  return models::momentum_train_step(net);
}

// alloc_peak_MB: the allocator's peak above what was resident before one step (PyNative: every
// intermediate; Graph: the kernels' own scratch, the arena being resident already).
void run(benchmark::State& state, Mode mode, bool resnet = false) {
  auto step = resnet ? make_resnet_step() : make_step();
  const int64_t n = resnet ? 32 : 64;
  Tensor x = resnet ? randn({n, 3, 32, 32}) : randn({n, 1, 28, 28});
  Tensor y = randint(0, 10, {n}, kInt32);
  set_context({.mode = mode});
  (*step)(x, y);  // warm-up (Graph: traces and compiles)
  cpu_allocator().reset_peak();
  const size_t base = cpu_allocator().stats().bytes_in_use;
  (*step)(x, y);
  state.counters["alloc_peak_MB"] = double(cpu_allocator().stats().peak_bytes_in_use - base) / 1e6;
  for (auto _ : state) benchmark::DoNotOptimize((*step)(x, y));
  state.SetItemsProcessed(state.iterations() * n);
  set_context({.mode = Mode::PyNative});
}
}  // namespace

static void BM_LeNetTrainStep64_PyNative(benchmark::State& state) { run(state, Mode::PyNative); }
static void BM_LeNetTrainStep64_Graph(benchmark::State& state) { run(state, Mode::Graph); }
BENCHMARK(BM_LeNetTrainStep64_PyNative)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LeNetTrainStep64_Graph)->Unit(benchmark::kMillisecond)->UseRealTime();
static void BM_ResNet18TrainStep32_PyNative(benchmark::State& state) {
  run(state, Mode::PyNative, true);
}
static void BM_ResNet18TrainStep32_Graph(benchmark::State& state) { run(state, Mode::Graph, true); }
BENCHMARK(BM_ResNet18TrainStep32_PyNative)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_ResNet18TrainStep32_Graph)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

static void BM_ResNet18GraphPlannedPeak(benchmark::State& state) {
  auto step = make_resnet_step();
  auto f = jit([&](const std::vector<Tensor>& a) { return step->forward(a); });
  Tensor x = randn({32, 3, 32, 32}), y = randint(0, 10, {32}, kInt32);
  for (auto _ : state) f({x, y});
  state.counters["planned_peak_MB"] = double(f.stats().planned_peak_bytes) / 1e6;
  state.counters["unplanned_MB"] = double(f.stats().unplanned_bytes) / 1e6;
  state.counters["nodes_traced"] = double(f.stats().nodes_traced);
  state.counters["nodes"] = double(f.stats().nodes);
}
BENCHMARK(BM_ResNet18GraphPlannedPeak)->Iterations(1)->Unit(benchmark::kMillisecond);

// The Graph arena size (printed once): the planned peak of the compiled step.
static void BM_LeNetGraphPlannedPeak(benchmark::State& state) {
  set_num_threads(2);
  set_seed(0);
  auto net = std::make_shared<models::LeNet5>();
  auto step_ptr = models::momentum_train_step(net);
  train::TrainOneStepCell& step = *step_ptr;
  auto f = jit([&](const std::vector<Tensor>& a) { return step.forward(a); });
  Tensor x = randn({64, 1, 28, 28}), y = randint(0, 10, {64}, kInt32);
  for (auto _ : state) f({x, y});
  state.counters["planned_peak_MB"] = double(f.stats().planned_peak_bytes) / 1e6;
  state.counters["unplanned_MB"] = double(f.stats().unplanned_bytes) / 1e6;
  state.counters["nodes_traced"] = double(f.stats().nodes_traced);
  state.counters["nodes"] = double(f.stats().nodes);
}
BENCHMARK(BM_LeNetGraphPlannedPeak)->Iterations(3)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
