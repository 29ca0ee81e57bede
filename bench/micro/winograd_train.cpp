// Winograd for training against oneDNN, per convolution: ResNet-18's (CIFAR stem) 3x3 stride-1
// geometries at batch 32, blocked activations, weights that are not constants (so the Winograd
// side transforms them in every call, as in a training step). Per geometry and pass (forward,
// backward data) the two run in turn, each call timed on its own (a load spike on this shared VM
// hits both alike); counters: the medians (ms), GFLOP/s of the direct convolution
// (2 N O OH OW C 9 per second, so the two are comparable) and winograd_speedup.
// The SIMD target: SPORE_BENCH_HWY_TARGET=AVX2 (Highway's name) makes the Spore kernels run
// AVX2 code on an AVX-512 machine; ONEDNN_MAX_CPU_ISA=AVX2 does the same for oneDNN.
// Run: OMP_NUM_THREADS=2 build/bench/bench_winograd_train
#include <benchmark/benchmark.h>

#include "bench_util.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/kernels/conv_direct.h"  // the Highway target hook
#include "backends/cpu/kernels/conv_list.h"
#include "ops/op.h"
#include "spore/spore.h"

namespace {
using spore::Shape;
using spore::Tensor;
using spore::ops::Attrs;
using spore::ops::OpId;

struct Geo {
  const char* name;
  int64_t C, H;
};
constexpr Geo kGeos[] = {
    {"l1_64c_32x32", 64, 32},
    {"l2_128c_16x16", 128, 16},
    {"l3_256c_8x8", 256, 8},
    {"l4_512c_4x4", 512, 4},
};

void BM_WinogradTrain(benchmark::State& state) {
  spore::set_num_threads(2);
  if (const char* t = std::getenv("SPORE_BENCH_HWY_TARGET")) spore::cpu::direct_conv_use_target(t);
  const Geo& g = kGeos[state.range(0)];
  const bool bwd = state.range(1) == 1;
  const int64_t N = 32;
  spore::set_seed(0);
  const Tensor a = spore::randn({N, g.C / 16, g.H, g.H, 16});  // x, or dy
  const Tensor w = spore::randn({g.C, g.C, 3, 3}) * 0.05;
  Attrs at;
  at.set("stride", std::vector<int64_t>{1, 1})
      .set("padding", std::vector<int64_t>{1, 1, 1, 1})
      .set("dilation", std::vector<int64_t>{1, 1})
      .set("groups", int64_t(1))
      .set("blocked_x", true)
      .set("blocked_y", true);
  if (bwd) at.set("input_shape", Shape{N, g.C, g.H, g.H});
  const OpId op = bwd ? OpId::Conv2dBackwardData : OpId::Conv2d;
  auto call = [&](const char* impl) {
    spore::cpu::ScopedConvImpl only(impl);
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(spore::ops::call1(op, {a, w}, at));
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  call("onednn"), call("winograd");  // warm-up (oneDNN builds and times its primitive)
  std::vector<double> tw, to;
  for (auto _ : state) {
    to.push_back(call("onednn"));
    tw.push_back(call("winograd"));
  }
  const double mo = spore::bench::median(to), mw = spore::bench::median(tw);
  const double gflop = 2.0 * double(N * g.C * g.H * g.H * g.C * 9) * 1e-9;
  state.counters["onednn_ms"] = mo;
  state.counters["winograd_ms"] = mw;
  state.counters["onednn_gflops"] = gflop / mo * 1e3;
  state.counters["winograd_gflops"] = gflop / mw * 1e3;
  state.counters["winograd_speedup"] = mo / mw;
  state.SetLabel(std::string(g.name) + (bwd ? " backward_data" : " forward"));
  spore::cpu::direct_conv_use_target("");
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t gi = 0; gi < int64_t(std::size(kGeos)); ++gi)
    for (int64_t bwd : {0, 1}) b->Args({gi, bwd});
}
BENCHMARK(BM_WinogradTrain)
    ->Apply(Args)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(10);

}  // namespace

BENCHMARK_MAIN();
