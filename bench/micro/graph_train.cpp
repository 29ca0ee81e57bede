// Training steps for bench/peers/graph_train.sh: LeNet-5 (batch 64, 1x28x28) and ResNet-18 with
// the CIFAR stem (batch 32, 3x32x32), Momentum 0.01/0.9, synthetic data, in PyNative and in Graph
// mode (the compiled TrainOneStepCell), plus the memory each needs:
//   Graph:    planned_peak_MB = the compiled step's arena (JitStats::planned_peak_bytes)
//   PyNative: alloc_peak_MB   = the allocator's peak during one step above what was resident
//                               before it (every intermediate, gradient and scratch buffer)
// items/s = images per second. The peer script runs it with --benchmark_repetitions and reads the
// medians.
//
// BM_*_Interleaved: the same steps run one after the other in every iteration (PyNative, Graph,
// Graph compiled without the blocked-layout pass, in rotating order), each timed on its own, and
// the medians of those per-step times reported as counters (ms) with their ratios. This VM's
// speed drifts by up to 1.5x over seconds, so steps timed side by side compare better than
// repetitions run one after another.
#include <benchmark/benchmark.h>

#include "bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/cpu/isa.h"
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
    state.counters["alloc_peak_MB"] =
        double(cpu_allocator().stats().peak_bytes_in_use - resident) / 1e6;
  }
  for (auto _ : state) benchmark::DoNotOptimize((*step)(x, y));
  state.SetItemsProcessed(state.iterations() * n);
  set_context({.mode = Mode::PyNative});
}

using spore::bench::median;

void interleaved(benchmark::State& state, bool resnet) {
  set_num_threads(2);
  const bench::ClassificationJob job(resnet);
  auto net = [&] { return job.net(); };
  const Tensor &x = job.x, &y = job.y;
  struct Run {
    std::shared_ptr<train::TrainOneStepCell> step;
    Mode mode;
    std::vector<double> ms;
  };
  std::vector<Run> runs{{make_step(net()), Mode::PyNative, {}},
                        {make_step(net()), Mode::Graph, {}},
                        {make_step(net()), Mode::Graph, {}}};
  for (size_t k = 0; k < runs.size(); ++k) {  // warm-up; the third compiles without the pass
    if (k == 2) setenv("SPORE_NO_BLOCKED_LAYOUT", "1", 1);
    set_context({.mode = runs[k].mode});
    (*runs[k].step)(x, y);
    unsetenv("SPORE_NO_BLOCKED_LAYOUT");
  }
  size_t turn = 0;
  for (auto _ : state) {
    for (size_t j = 0; j < runs.size(); ++j) {
      Run& r = runs[(turn + j) % runs.size()];
      set_context({.mode = r.mode});
      const auto t0 = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize((*r.step)(x, y));
      r.ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    ++turn;
  }
  set_context({.mode = Mode::PyNative});
  const double p = median(runs[0].ms), g = median(runs[1].ms), gn = median(runs[2].ms);
  state.counters["pynative_ms"] = p;
  state.counters["graph_ms"] = g;
  state.counters["graph_no_blocked_ms"] = gn;
  state.counters["graph_speedup"] = p / g;
  state.counters["blocked_speedup"] = gn / g;
}
}  // namespace

static void BM_LeNet5Step64_Interleaved(benchmark::State& s) { interleaved(s, false); }
static void BM_ResNet18Step32_Interleaved(benchmark::State& s) { interleaved(s, true); }
BENCHMARK(BM_LeNet5Step64_Interleaved)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(400);
BENCHMARK(BM_ResNet18Step32_Interleaved)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(12);

static void BM_LeNet5Step64_PyNative(benchmark::State& s) { run(s, Mode::PyNative, false); }
static void BM_LeNet5Step64_Graph(benchmark::State& s) { run(s, Mode::Graph, false); }
static void BM_ResNet18Step32_PyNative(benchmark::State& s) { run(s, Mode::PyNative, true); }
static void BM_ResNet18Step32_Graph(benchmark::State& s) { run(s, Mode::Graph, true); }
BENCHMARK(BM_LeNet5Step64_PyNative)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
BENCHMARK(BM_LeNet5Step64_Graph)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
BENCHMARK(BM_ResNet18Step32_PyNative)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(4);
BENCHMARK(BM_ResNet18Step32_Graph)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(4);

// --isa prints the CPU backend's ISA decision (backends/cpu/isa.h) for graph_train.sh's header.
int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--isa") {
    std::printf("%s\n", cpu::cpu_isa().str().c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
