// The three ways Graph mode can run a constant-weight convolution between blocked activations (in
// the machine's lanes: nChw16c, or nChw8c on AVX2), on ResNet-18's (CIFAR stem) geometries at
// batch 1 and 64 and YOLOv5s's (320 px) at batch 1, float32, BatchNorm scale and shift + relu in
// the epilogue:
//   onednn    conv2d_fused (the oneDNN primitive Graph mode runs on weights that are parameters)
//   winograd  conv2d_winograd on weights prepared once (3x3 stride-1 convs only), F(2x2, 3x3)
//   winograd4x4  the same, F(4x4, 3x3)
//   packed    conv2d_packed, the direct kernel on packed weights
// Each goes through the op dispatcher into a preallocated-by-the-op output, like a graph step.
// Counters: gflops (the direct convolution's 2 * N * O * OH * OW * C * kh * kw per second, so the
// three are comparable; Winograd does fewer multiplies for the same count). The constant_convs pass
// (backends/cpu/passes/constant_convs.cpp) chooses by these numbers.
// Run: OMP_NUM_THREADS=2 build/bench/bench_constant_conv --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/ops/ops.h"
#include "ops/op.h"
#include "spore/spore.h"

namespace {
using spore::Shape;
using spore::Tensor;
using spore::ops::Attrs;
using spore::ops::OpId;

struct Geo {
  const char* name;
  int64_t C, H, O, k, stride, pad;
};
constexpr Geo kGeos[] = {
    {"l1_64c_32x32", 64, 32, 64, 3, 1, 1},
    {"l2_128c_16x16", 128, 16, 128, 3, 1, 1},
    {"l3_256c_8x8", 256, 8, 256, 3, 1, 1},
    {"l4_512c_4x4", 512, 4, 512, 3, 1, 1},
    {"down_64to128_s2", 64, 32, 128, 3, 2, 1},
    {"down_256to512_s2", 256, 8, 512, 3, 2, 1},
    {"shortcut_1x1_s2", 128, 16, 256, 1, 2, 0},
    // YOLOv5s at 320 px: the stride-2 downsampling convs (the same FLOPs at every stage) and the
    // 1x1 convs of its C3 blocks.
    {"yolo_down_32to64", 32, 160, 64, 3, 2, 1},
    {"yolo_down_128to256", 128, 40, 256, 3, 2, 1},
    {"yolo_1x1_64to32_80", 64, 80, 32, 1, 1, 0},
    {"yolo_1x1_64to64_80", 64, 80, 64, 1, 1, 0},
    {"yolo_1x1_128to64_40", 128, 40, 64, 1, 1, 0},
};
constexpr int64_t kFirstYolo = 7;  // YOLOv5s's geometries run at batch 1 only
enum Way { kOneDnn, kWinograd, kPacked, kWinograd4 };

void BM_ConstantConv(benchmark::State& state) {
  const Geo& g = kGeos[state.range(0)];
  const int64_t N = state.range(1);
  const Way way = Way(state.range(2));
  spore::set_seed(0);
  const int64_t OH = (g.H + 2 * g.pad - g.k) / g.stride + 1;
  const int64_t L = spore::cpu::blocked_lanes();
  const Tensor x = spore::randn({N, g.C / L, g.H, g.H, L});
  const Tensor w = spore::randn({g.O, g.C, g.k, g.k}) * 0.05, scale = spore::rand({g.O}) + 0.5,
               shift = spore::randn({g.O}) * 0.1;
  const std::vector<int64_t> pads{g.pad, g.pad, g.pad, g.pad}, stride{g.stride, g.stride};
  spore::ops::Tensors ins;
  Attrs a;
  a.set("padding", pads).set("act", "relu").set("has_residual", false);
  OpId op = spore::cpu::op::Conv2dFused();
  if (way == kOneDnn) {
    ins = {x, w, scale, shift};
    a.set("stride", stride).set("dilation", std::vector<int64_t>{1, 1}).set("groups", int64_t(1));
    a.set("blocked_x", true).set("blocked_y", true).set("has_bias", false).set("has_scale", true);
    a.set("lanes", L);
  } else {
    const bool wino = way == kWinograd || way == kWinograd4;
    const auto prepared = spore::ops::call(
        wino ? spore::cpu::op::WinogradWeights() : spore::cpu::op::PackConvWeights(),
        {w, scale, shift}, Attrs().set("has_scale", true).set("tile", way == kWinograd4 ? 4 : 2));
    ins = {x, prepared[0], prepared[1]};
    if (!wino) a.set("stride", stride);
    op = wino ? spore::cpu::op::Conv2dWinograd() : spore::cpu::op::Conv2dPacked();
  }
  spore::ops::call(op, ins, a);  // warm-up (oneDNN builds and times its primitive here)
  for (auto _ : state) benchmark::DoNotOptimize(spore::ops::call(op, ins, a));
  const double flops = 2.0 * double(N * g.O * OH * OH * g.C * g.k * g.k);
  state.counters["gflops"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(g.name) + (way == kOneDnn      ? " onednn"
                                        : way == kWinograd  ? " winograd"
                                        : way == kWinograd4 ? " winograd4x4"
                                                            : " packed"));
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t gi = 0; gi < int64_t(std::size(kGeos)); ++gi)
    for (int64_t n : {1, 64})
      for (int64_t way : {kOneDnn, kWinograd, kWinograd4, kPacked}) {
        const Geo& g = kGeos[gi];
        if (gi >= kFirstYolo && n != 1) continue;
        if ((way == kWinograd || way == kWinograd4) && (g.k != 3 || g.stride != 1)) continue;
        b->Args({gi, n, way});
      }
}
BENCHMARK(BM_ConstantConv)->Apply(Args)->Unit(benchmark::kMillisecond)->MinTime(0.3);

}  // namespace

BENCHMARK_MAIN();
