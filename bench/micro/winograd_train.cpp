// Winograd for training against oneDNN, per convolution: ResNet-18's (CIFAR stem) 3x3 stride-1
// geometries at batch 32, blocked activations in the machine's lanes (8 on AVX2, 16 on AVX-512:
// backends/cpu/isa.h; SPORE_BLOCKED_LANES overrides), weights that are not constants (so the
// Winograd side transforms them in every call, as in a training step). Per geometry and pass
// (forward, backward data, backward weight) the two run in turn, each call timed on its own (a load
// spike on this shared VM hits both alike); counters: the medians (ms), GFLOP/s of the direct
// convolution (2 N O OH OW C 9 per second, so the two are comparable) and winograd_speedup. The
// SIMD target: SPORE_BENCH_HWY_TARGET=AVX2 (Highway's name) makes the Spore kernels run AVX2 code
// on an AVX-512 machine; ONEDNN_MAX_CPU_ISA=AVX2 does the same for oneDNN.
//
// BM_ResNet18Step32_WinogradAB: Graph-mode ResNet-18 (CIFAR stem) training steps at batch 32
// (bench/micro/graph_train.cpp's job: Momentum 0.01/0.9, synthetic data) with the convolution
// lists whole (Winograd where it timed faster) and without Winograd (SPORE_CONV_IMPL=-winograd),
// in turn; counters: the median step times, the speed-up, and each step's effective GFLOP/s (the
// direct convolutions' FLOPs, 106.6 GFLOP per step, over the step time).
// Run: OMP_NUM_THREADS=2 build/bench/bench_winograd_train (bench/peers/winograd_train.sh adds
// PyTorch and the AVX2 settings)
#include <benchmark/benchmark.h>

#include "bench_util.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels/conv_direct.h"  // the Highway target hook
#include "backends/cpu/kernels/conv_list.h"
#include "models/recipe.h"
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
  const int64_t pass = state.range(1);  // 0 forward, 1 backward data, 2 backward weight
  const int64_t N = 32;
  spore::set_seed(0);
  const int64_t L = spore::cpu::blocked_lanes();
  const Tensor a = spore::randn({N, g.C / L, g.H, g.H, L});  // x, or dy
  const Tensor w = spore::randn({g.C, g.C, 3, 3}) * 0.05;
  Attrs at;
  at.set("stride", std::vector<int64_t>{1, 1})
      .set("padding", std::vector<int64_t>{1, 1, 1, 1})
      .set("dilation", std::vector<int64_t>{1, 1})
      .set("groups", int64_t(1))
      .set("blocked_x", true)
      .set("blocked_y", true)
      .set("lanes", L);
  if (pass == 1) at.set("input_shape", Shape{N, g.C, g.H, g.H});
  if (pass == 2) at.set("weight_shape", Shape{g.C, g.C, 3, 3});
  const OpId op = pass == 0   ? OpId::Conv2d
                  : pass == 1 ? OpId::Conv2dBackwardData
                              : OpId::Conv2dBackwardWeight;
  const Tensor b = pass == 2 ? a : w;  // (dy, x) for the weight gradient
  auto call = [&](const char* impl) {
    spore::cpu::ScopedConvImpl only(impl);
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(spore::ops::call1(op, {a, b}, at));
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
  state.SetLabel(std::string(g.name) + (pass == 0   ? " forward"
                                        : pass == 1 ? " backward_data"
                                                    : " backward_weight"));
  spore::cpu::direct_conv_use_target("");
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t gi = 0; gi < int64_t(std::size(kGeos)); ++gi)
    for (int64_t pass : {0, 1, 2}) b->Args({gi, pass});
}
BENCHMARK(BM_WinogradTrain)
    ->Apply(Args)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(10);

// The direct convolutions' FLOPs in one ResNet-18 (CIFAR stem) training step at batch n: each conv
// 2 N O OH OW C k k forward, as much again for the weight gradient and (all but the stem, whose
// input needs none) for the data gradient.
double resnet18_cifar_step_flops(int64_t n) {
  auto conv = [&](int64_t C, int64_t O, int64_t OHW, int64_t k) {
    return 2.0 * double(n * O * OHW * OHW * C * k * k);
  };
  const double stem = conv(3, 64, 32, 3);
  double fwd = stem + 4 * conv(64, 64, 32, 3);
  for (int64_t c = 64, hw = 16; c < 512; c *= 2, hw /= 2)  // layers 2-4: downsampling block + 3
    fwd += conv(c, 2 * c, hw, 3) + conv(c, 2 * c, hw, 1) + 3 * conv(2 * c, 2 * c, hw, 3);
  return 3 * fwd - stem;
}

void BM_ResNet18Step32_WinogradAB(benchmark::State& state) {
  using namespace spore;
  set_num_threads(2);
  if (const char* t = std::getenv("SPORE_BENCH_HWY_TARGET")) cpu::direct_conv_use_target(t);
  const bench::ClassificationJob job(true);
  struct Run {
    std::shared_ptr<train::TrainOneStepCell> step;
    const char* impl;
    std::vector<double> ms;
  };
  std::vector<Run> runs{{models::momentum_train_step(job.net()), "", {}},
                        {models::momentum_train_step(job.net()), "-winograd", {}}};
  set_context({.mode = Mode::Graph});
  for (Run& r : runs) {  // warm-up: compile; the first call of each conv geometry times the entries
    cpu::ScopedConvImpl impl(r.impl);
    (*r.step)(job.x, job.y);
  }
  size_t turn = 0;
  for (auto _ : state) {
    for (size_t j = 0; j < runs.size(); ++j) {
      Run& r = runs[(turn + j) % runs.size()];
      cpu::ScopedConvImpl impl(r.impl);
      const auto t0 = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize((*r.step)(job.x, job.y));
      r.ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    ++turn;
  }
  set_context({.mode = Mode::PyNative});
  cpu::direct_conv_use_target("");
  const double w = bench::median(runs[0].ms), o = bench::median(runs[1].ms);
  const double gflop = resnet18_cifar_step_flops(job.batch) * 1e-9;
  state.counters["winograd_ms"] = w;
  state.counters["no_winograd_ms"] = o;
  state.counters["winograd_speedup"] = o / w;
  state.counters["winograd_gflops"] = gflop / w * 1e3;
  state.counters["no_winograd_gflops"] = gflop / o * 1e3;
}
BENCHMARK(BM_ResNet18Step32_WinogradAB)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(8);

}  // namespace

BENCHMARK_MAIN();
