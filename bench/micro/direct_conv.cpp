// The direct NCHW convolution for few input channels (backends/cpu/kernels/conv_direct.cpp) vs the
// oneDNN path it replaces (blocked primitive + reorders, or oneDNN's plain-layout choice), on
// LeNet's first conv and ResNet's CIFAR stem: the forward with bias (Conv2d) and the weight
// gradient (Conv2dBackwardWeight), float32, 2 threads. "direct" and "onednn" go through the op
// (same dispatch and output allocation), with the direct path forced on / off; "kernel" calls the
// direct kernel alone into a preallocated output.
// BM_*Step_DirectAB: whole training steps (LeNet-5 batch 64, ResNet-18 CIFAR batch 32; Graph and
// PyNative) with the direct path off and automatic, alternating step by step (this VM's speed
// drifts), medians of the per-step times as counters: off_ms, auto_ms, speedup = off / auto.
// "min" is reported besides the median: on a shared, loaded machine it is the steadier number.
// Keep OpenMP's default (active) wait policy: with OMP_WAIT_POLICY=passive every one of oneDNN's
// parallel regions (reorders, then the conv) pays a wake-up, which makes it look several times
// slower than it runs in a training step.
// Run: OMP_NUM_THREADS=2 build/bench/bench_direct_conv --benchmark_repetitions=7
//        --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "bench_util.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "backends/cpu/kernels/conv_direct.h"
#include "backends/cpu/kernels/conv_list.h"
#include "models/lenet.h"
#include "models/recipe.h"
#include "models/resnet.h"
#include "ops/op.h"
#include "spore/spore.h"

namespace {
using spore::ops::Attrs;
using spore::ops::OpId;

struct Geo {
  const char* name;
  int64_t n, c, h, w, o, k, pad;
};
constexpr Geo kGeos[] = {
    {"lenet_conv1_64x1x28x28_6_5x5_p2", 64, 1, 28, 28, 6, 5, 2},
    {"resnet_stem_32x3x32x32_64_3x3_p1", 32, 3, 32, 32, 64, 3, 1},
};

enum class Impl { kOneDnn, kDirect, kKernel };

void BM_conv(benchmark::State& state, Geo g, bool wgrad, Impl impl) {
  spore::set_num_threads(2);
  spore::NoGradGuard ng;
  spore::cpu::set_conv_impl_override(
      impl == Impl::kOneDnn ? "-direct_nchw" : "direct_nchw,onednn,onednn_via_f32,reference");
  Attrs a;
  a.set("stride", std::vector<int64_t>{1, 1})
      .set("padding", std::vector<int64_t>{g.pad, g.pad, g.pad, g.pad});
  a.set("dilation", std::vector<int64_t>{1, 1}).set("groups", int64_t(1));
  const spore::Shape xs{g.n, g.c, g.h, g.w}, ws{g.o, g.c, g.k, g.k};
  spore::Tensor x = spore::randn(xs), w = spore::randn(ws), b = spore::randn({g.o});
  spore::Tensor y = spore::ops::call1(OpId::Conv2d, {x, w, b}, a);  // (N, O, H, W): same padding
  spore::Tensor dy = spore::randn(y.shape()), dw = spore::Tensor::empty(ws);
  const Attrs aw = Attrs(a).set("weight_shape", ws);
  const spore::cpu::DirectConvGeom d{g.n, g.c, g.h, g.w,   g.o,   g.k, g.k, g.h,
                                     g.w, 1,   1,   g.pad, g.pad, 1,   1};
  auto once = [&] {
    if (impl == Impl::kKernel) {
      if (wgrad)
        spore::cpu::conv2d_direct_backward_weight(d, dy.data<float>(), x.data<float>(),
                                                  dw.data<float>());
      else
        spore::cpu::conv2d_direct_forward(d, x.data<float>(), w.data<float>(), b.data<float>(),
                                          false, y.data<float>());
      benchmark::ClobberMemory();
    } else if (wgrad) {
      benchmark::DoNotOptimize(
          spore::ops::call1(OpId::Conv2dBackwardWeight, {dy, x}, aw).data_ptr());
    } else {
      benchmark::DoNotOptimize(spore::ops::call1(OpId::Conv2d, {x, w, b}, a).data_ptr());
    }
  };
  for (int i = 0; i < 3; ++i) once();  // builds the primitives, grows the scratch buffers
  for (auto _ : state) once();
  spore::cpu::set_conv_impl_override("");
  const double macs = double(g.n * g.o * g.h * g.w * g.c * g.k * g.k);
  state.counters["GMAC/s"] =
      benchmark::Counter(macs, benchmark::Counter::kIsIterationInvariantRate);
}

int reg = [] {
  for (const Geo& g : kGeos)
    for (bool wgrad : {false, true})
      for (auto [impl, iname] :
           {std::pair{Impl::kOneDnn, "onednn"}, std::pair{Impl::kDirect, "direct"},
            std::pair{Impl::kKernel, "kernel"}}) {
        const std::string name =
            std::string(g.name) + (wgrad ? "/weight_grad/" : "/forward_bias/") + iname;
        benchmark::RegisterBenchmark(name.c_str(), BM_conv, g, wgrad, impl)
            ->MeasureProcessCPUTime()  // all threads' CPU time: the work, less the load's effect
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond)
            ->ComputeStatistics("min", [](const std::vector<double>& v) {
              return *std::min_element(v.begin(), v.end());
            });
      }
  return 0;
}();

using spore::bench::median;

void BM_step_ab(benchmark::State& state, bool resnet, spore::Mode mode) {
  using namespace spore;
  set_num_threads(2);
  const bench::ClassificationJob job(resnet);
  auto net = [&] { return job.net(); };
  const Tensor &x = job.x, &y = job.y;
  const int64_t n = job.batch;
  set_context({.mode = mode});
  auto off = models::momentum_train_step(net()), on = models::momentum_train_step(net());
  std::vector<double> ms[2];
  auto timed = [&](int k) {
    cpu::set_conv_impl_override(k == 0 ? "-direct_nchw" : "");
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize((*(k == 0 ? off : on))(x, y));
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int k = 0; k < 2; ++k) timed(k), timed(k);  // compile, first-call timings
  int turn = 0;
  for (auto _ : state) {
    for (int j = 0; j < 2; ++j) {
      const int k = (turn + j) % 2;
      ms[k].push_back(timed(k));
    }
    ++turn;
  }
  cpu::set_conv_impl_override("");
  set_context({.mode = Mode::PyNative});
  state.counters["off_ms"] = median(ms[0]);
  state.counters["auto_ms"] = median(ms[1]);
  state.counters["speedup"] = median(ms[0]) / median(ms[1]);
}

int reg_steps = [] {
  for (auto [resnet, iters] : {std::pair{false, 400}, std::pair{true, 16}})
    for (auto mode : {spore::Mode::Graph, spore::Mode::PyNative}) {
      const std::string name = std::string(resnet ? "ResNet18CifarStep32" : "LeNet5Step64") +
                               "_DirectAB/" + (mode == spore::Mode::Graph ? "graph" : "pynative");
      benchmark::RegisterBenchmark(name.c_str(), BM_step_ab, resnet, mode)
          ->Iterations(iters)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
