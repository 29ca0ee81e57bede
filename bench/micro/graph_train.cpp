// Training steps for bench/peers/graph_train.sh: LeNet-5 (batch 64, 1x28x28) and ResNet-18 with
// the CIFAR stem (batch 32, 3x32x32), Momentum 0.01/0.9, synthetic data, in PyNative and in Graph
// mode (the compiled TrainOneStepCell), plus the memory each needs:
//   Graph:    planned_peak_MB = the compiled step's arena (JitStats::planned_peak_bytes)
//   PyNative: alloc_peak_MB   = the allocator's peak during one step above what was resident
//                               before it (every intermediate, gradient and scratch buffer)
// items/s = images per second. The peer script runs it with --benchmark_repetitions and reads the
// medians.
#include <benchmark/benchmark.h>

#include "models/lenet.h"
#include "models/recipe.h"
#include "models/resnet.h"
#include "spore/spore.h"

using namespace spore;

namespace {
std::shared_ptr<train::TrainOneStepCell> make_step(nn::CellPtr net) {
  return models::momentum_train_step(std::move(net));
}

void run(benchmark::State& state, Mode mode, bool resnet) {
  set_num_threads(2);
  set_seed(0);
  auto step = make_step(resnet ? nn::CellPtr(models::resnet18(10, models::ResNetStem::Cifar))
                               : nn::CellPtr(std::make_shared<models::LeNet5>()));
  const int64_t n = resnet ? 32 : 64;
  Tensor x = resnet ? randn({n, 3, 32, 32}) : randn({n, 1, 28, 28});
  Tensor y = randint(0, 10, {n}, kInt32);
  set_context({.mode = mode});
  (*step)(x, y);  // warm-up (Graph: trace and compile)
  cpu_allocator().reset_peak();
  const size_t resident = cpu_allocator().stats().bytes_in_use;
  (*step)(x, y);
  if (mode == Mode::Graph) {
    const JitStats js = step->jit_stats();
    state.counters["planned_peak_MB"] = double(js.planned_peak_bytes) / 1e6;
    state.counters["nodes_traced"] = double(js.nodes_traced);
    state.counters["nodes"] = double(js.nodes);
  } else {
    state.counters["alloc_peak_MB"] = double(cpu_allocator().stats().peak_bytes_in_use - resident) / 1e6;
  }
  for (auto _ : state) benchmark::DoNotOptimize((*step)(x, y));
  state.SetItemsProcessed(state.iterations() * n);
  set_context({.mode = Mode::PyNative});
}
}  // namespace

static void BM_LeNet5Step64_PyNative(benchmark::State& s) { run(s, Mode::PyNative, false); }
static void BM_LeNet5Step64_Graph(benchmark::State& s) { run(s, Mode::Graph, false); }
static void BM_ResNet18Step32_PyNative(benchmark::State& s) { run(s, Mode::PyNative, true); }
static void BM_ResNet18Step32_Graph(benchmark::State& s) { run(s, Mode::Graph, true); }
BENCHMARK(BM_LeNet5Step64_PyNative)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
BENCHMARK(BM_LeNet5Step64_Graph)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
BENCHMARK(BM_ResNet18Step32_PyNative)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(4);
BENCHMARK(BM_ResNet18Step32_Graph)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(4);

BENCHMARK_MAIN();
