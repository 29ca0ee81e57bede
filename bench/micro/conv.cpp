// conv2d forward and forward+backward (data and weight gradients) through Spore's primitives,
// float32, 2 threads, at LeNet-5 shapes (batch 64) and ResNet-18 CIFAR shapes (batch 32).
// Counter GFLOP/s counts 2 * N * O * OH * OW * C/groups * kh * kw per pass (x3 with backward).
// Run: build/bench/bench_conv --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include "ops/op.h"
#include "spore/spore.h"

namespace {

struct Shape4 {
  const char* name;
  int64_t n, c, h, w, o, k, pad;
};
constexpr Shape4 kShapes[] = {
    {"lenet_conv1_1x28x28_6_5x5_p2", 64, 1, 28, 28, 6, 5, 2},
    {"lenet_conv2_6x14x14_16_5x5", 64, 6, 14, 14, 16, 5, 0},
    {"resnet_64x32x32_64_3x3", 32, 64, 32, 32, 64, 3, 1},
    {"resnet_128x16x16_128_3x3", 32, 128, 16, 16, 128, 3, 1},
    {"resnet_256x8x8_256_3x3", 32, 256, 8, 8, 256, 3, 1},
    {"resnet_512x4x4_512_3x3", 32, 512, 4, 4, 512, 3, 1},
};

double conv_flops(const Shape4& s) {
  const int64_t oh = s.h + 2 * s.pad - s.k + 1, ow = s.w + 2 * s.pad - s.k + 1;
  return 2.0 * double(s.n * s.o * oh * ow * s.c * s.k * s.k);
}

void BM_conv_forward(benchmark::State& state, Shape4 s) {
  spore::set_num_threads(2);
  spore::Tensor x = spore::randn({s.n, s.c, s.h, s.w}), w = spore::randn({s.o, s.c, s.k, s.k});
  const spore::Conv2dOptions opt{.padding = {s.pad, s.pad}};
  for (auto _ : state) benchmark::DoNotOptimize(spore::conv2d(x, w, opt).data_ptr());
  state.counters["GFLOP/s"] = benchmark::Counter(
      conv_flops(s), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// Forward, then both backward primitives with a ones cotangent (what autograd runs).
void BM_conv_forward_backward(benchmark::State& state, Shape4 s) {
  using spore::ops::Attrs;
  using spore::ops::OpId;
  spore::set_num_threads(2);
  spore::Tensor x = spore::randn({s.n, s.c, s.h, s.w}), w = spore::randn({s.o, s.c, s.k, s.k});
  const spore::Conv2dOptions opt{.padding = {s.pad, s.pad}};
  spore::Tensor dy = spore::ones_like(spore::conv2d(x, w, opt));
  Attrs a;
  a.set("stride", std::vector<int64_t>{1, 1})
      .set("padding", std::vector<int64_t>{s.pad, s.pad, s.pad, s.pad});
  a.set("dilation", std::vector<int64_t>{1, 1}).set("groups", int64_t(1));
  Attrs ad = a, aw = a;
  ad.set("input_shape", x.shape());
  aw.set("weight_shape", w.shape());
  for (auto _ : state) {
    benchmark::DoNotOptimize(spore::conv2d(x, w, opt).data_ptr());
    benchmark::DoNotOptimize(spore::ops::call1(OpId::Conv2dBackwardData, {dy, w}, ad).data_ptr());
    benchmark::DoNotOptimize(spore::ops::call1(OpId::Conv2dBackwardWeight, {dy, x}, aw).data_ptr());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(3 * conv_flops(s), benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}

const bool kRegistered = [] {
  for (const Shape4& s : kShapes) {
    benchmark::RegisterBenchmark((std::string("conv_fwd/") + s.name).c_str(), BM_conv_forward, s)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((std::string("conv_fwd_bwd/") + s.name).c_str(),
                                 BM_conv_forward_backward, s)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
