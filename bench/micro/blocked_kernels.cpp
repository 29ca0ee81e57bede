// Graph mode's blocked (nChw16c, 5-D (N, ceil(C/16), H, W, 16)) batch_norm and max_pool2d kernels
// against the plain NCHW ones, forward + backward through the primitives, float32, 2 threads:
// batch norm at ResNet-18 CIFAR shapes (batch 32), max pool 2x2 stride 2 at LeNet-5's (batch 64).
// Run: build/bench/bench_blocked_kernels --benchmark_repetitions=5
// --benchmark_report_aggregates_only=true SPORE_BENCH_THREADS=n overrides the 2 threads (1 gives
// CPU-bound numbers on a loaded machine).
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "ops/op.h"
#include "spore/spore.h"

namespace {

using spore::Shape;
using spore::Tensor;
using spore::ops::Attrs;
using spore::ops::OpId;

int threads() {
  const char* t = std::getenv("SPORE_BENCH_THREADS");
  return t ? std::atoi(t) : 2;
}

Shape layout(int64_t n, int64_t c, int64_t h, int64_t w, bool blocked) {
  return blocked ? Shape{n, (c + 15) / 16, h, w, 16} : Shape{n, c, h, w};
}

void BM_batch_norm_fwd_bwd(benchmark::State& state, int64_t n, int64_t c, int64_t hw,
                           bool blocked) {
  spore::set_num_threads(threads());
  const Shape s = layout(n, c, hw, hw, blocked);
  Tensor x = spore::randn(s), dy = spore::randn(s), gamma = spore::randn({c}),
         beta = spore::randn({c});
  Attrs a;
  a.set("eps", 1e-5).set("blocked", blocked);
  for (auto _ : state) {
    auto f = spore::ops::call(OpId::BatchNorm, {x, gamma, beta}, a);
    auto b = spore::ops::call(OpId::BatchNormBackward, {dy, x, gamma, f[1], f[2]}, a);
    benchmark::DoNotOptimize(b[0].data_ptr());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * x.nbytes() * 7);  // fwd 3 passes, bwd 4
}

void BM_max_pool_fwd_bwd(benchmark::State& state, int64_t n, int64_t c, int64_t hw, bool blocked) {
  spore::set_num_threads(threads());
  Tensor x = spore::randn(layout(n, c, hw, hw, blocked));
  Attrs a;
  a.set("kernel_size", std::vector<int64_t>{2, 2}).set("stride", std::vector<int64_t>{2, 2});
  a.set("padding", std::vector<int64_t>{0, 0, 0, 0})
      .set("ceil_mode", false)
      .set("blocked", blocked);
  Attrs ab = a;
  ab.set("input_shape", Shape{n, c, hw, hw});
  Tensor dy = spore::randn(layout(n, c, hw / 2, hw / 2, blocked));
  for (auto _ : state) {
    auto f = spore::ops::call(OpId::MaxPool2d, {x}, a);
    benchmark::DoNotOptimize(spore::ops::call1(OpId::MaxPool2dBackward, {dy, f[1]}, ab).data_ptr());
  }
}

#define BN(name, n, c, hw)                                                                \
  BENCHMARK_CAPTURE(BM_batch_norm_fwd_bwd, name##_plain, n, c, hw, false)->UseRealTime(); \
  BENCHMARK_CAPTURE(BM_batch_norm_fwd_bwd, name##_blocked, n, c, hw, true)->UseRealTime();
BN(resnet_32x64x32x32, 32, 64, 32)
BN(resnet_32x128x16x16, 32, 128, 16)
BN(resnet_32x256x8x8, 32, 256, 8)
BN(resnet_32x512x4x4, 32, 512, 4)

#define POOL(name, n, c, hw)                                                            \
  BENCHMARK_CAPTURE(BM_max_pool_fwd_bwd, name##_plain, n, c, hw, false)->UseRealTime(); \
  BENCHMARK_CAPTURE(BM_max_pool_fwd_bwd, name##_blocked, n, c, hw, true)->UseRealTime();
POOL(lenet_64x6x28x28, 64, 6, 28)
POOL(lenet_64x16x10x10, 64, 16, 10)

}  // namespace

BENCHMARK_MAIN();
