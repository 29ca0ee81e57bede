// The roofline view of the ResNet-18 (CIFAR stem) training step, float32, 2 threads, in one run:
//   1. the machine's sgemm rate (oneDNN's dnnl_sgemm, 1024^3, median of 7), the peak the convs are
//      compared with;
//   2. every convolution geometry of the step (forward, data gradient, weight gradient) called on
//      its own through ops::call (the kernels Graph mode runs, plain NCHW tensors), its GFLOP/s and
//      the share of sgemm's rate;
//   3. the compiled Graph-mode step itself under the profiler: its time, its GFLOP/s, and the
//      share of the step each op kind takes (the profiler's per-node spans).
// Run: OMP_NUM_THREADS=2 build/bench/bench_resnet_roofline [batch=32] [steps=5]
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "models/recipe.h"
#include "models/resnet.h"
#include "ops/op.h"
#include "spore/profiler.h"
#include "spore/spore.h"

using namespace spore;
using ops::Attrs;
using ops::OpId;

namespace {
double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <class F>
double median_ms(F&& f, int reps) {
  f();  // warm-up (primitive creation, layout choice)
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_ms();
    f();
    t.push_back(now_ms() - t0);
  }
  return bench::median(t);
}

double sgemm_gflops() {
  const int64_t n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  const double ms = median_ms(
      [&] { dnnl_sgemm('N', 'N', n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n); }, 7);
  return 2.0 * n * n * n / ms / 1e6;
}

struct ConvGeom {
  int64_t C, O, HW, k, s,
      count;  // input channels, outputs, input size, kernel, stride, uses per step
};

// ResNet-18, CIFAR stem (3x3 conv1, no max pool): the convolutions of one forward pass.
std::vector<ConvGeom> resnet18_convs() {
  return {{3, 64, 32, 3, 1, 1},    {64, 64, 32, 3, 1, 4},   {64, 128, 32, 3, 2, 1},
          {128, 128, 16, 3, 1, 3}, {64, 128, 32, 1, 2, 1},  {128, 256, 16, 3, 2, 1},
          {256, 256, 8, 3, 1, 3},  {128, 256, 16, 1, 2, 1}, {256, 512, 8, 3, 2, 1},
          {512, 512, 4, 3, 1, 3},  {256, 512, 8, 1, 2, 1}};
}
}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 32;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 5;
  set_num_threads(2);
  set_seed(0);
  const double peak = sgemm_gflops();
  std::printf("sgemm (dnnl_sgemm 1024^3, 2 threads): %.1f GFLOP/s\n\n", peak);

  std::printf("ResNet-18 CIFAR convolutions at batch %lld (ops::call, NCHW, medians of 5):\n",
              (long long)batch);
  std::printf("%-26s %5s | %9s %7s %5s | %9s %7s %5s | %9s %7s %5s\n", "geometry (C->O, HxW, k/s)",
              "uses", "fwd ms", "GFLOP/s", "peak", "dgrad ms", "GFLOP/s", "peak", "wgrad ms",
              "GFLOP/s", "peak");
  double conv_ms_total = 0, conv_flop_total = 0;
  for (const ConvGeom& g : resnet18_convs()) {
    const int64_t pad = g.k / 2, OH = (g.HW + 2 * pad - g.k) / g.s + 1;
    Attrs a;
    a.set("stride", std::vector<int64_t>{g.s, g.s})
        .set("padding", std::vector<int64_t>{pad, pad, pad, pad});
    a.set("dilation", std::vector<int64_t>{1, 1}).set("groups", int64_t(1));
    Tensor x = randn({batch, g.C, g.HW, g.HW}), w = randn({g.O, g.C, g.k, g.k}) * 0.05;
    Tensor dy = randn({batch, g.O, OH, OH});
    const double flop = 2.0 * batch * g.O * OH * OH * g.C * g.k * g.k;
    const double f = median_ms([&] { ops::call1(OpId::Conv2d, {x, w}, a); }, 5);
    const double d = median_ms(
        [&] {
          ops::call1(OpId::Conv2dBackwardData, {dy, w}, Attrs(a).set("input_shape", x.shape()));
        },
        5);
    const double wg = median_ms(
        [&] {
          ops::call1(OpId::Conv2dBackwardWeight, {dy, x}, Attrs(a).set("weight_shape", w.shape()));
        },
        5);
    char name[64];
    std::snprintf(name, sizeof name, "%lld->%lld, %lldx%lld, %lld/%lld", (long long)g.C,
                  (long long)g.O, (long long)g.HW, (long long)g.HW, (long long)g.k, (long long)g.s);
    auto col = [&](double ms) { return flop / ms / 1e6; };
    std::printf("%-26s %5lld | %9.2f %7.1f %4.0f%% | %9.2f %7.1f %4.0f%% | %9.2f %7.1f %4.0f%%\n",
                name, (long long)g.count, f, col(f), 100 * col(f) / peak, d, col(d),
                100 * col(d) / peak, wg, col(wg), 100 * col(wg) / peak);
    conv_ms_total += g.count * (f + (g.C == 3 ? 0 : d) + wg);  // the stem has no data gradient
    conv_flop_total += g.count * flop * (g.C == 3 ? 2 : 3);
  }
  std::printf(
      "all convolutions of one step, called alone: %.1f ms, %.1f GFLOP, %.1f GFLOP/s (%.0f%% of "
      "sgemm)\n\n",
      conv_ms_total, conv_flop_total / 1e9, conv_flop_total / conv_ms_total / 1e6,
      100 * conv_flop_total / conv_ms_total / 1e6 / peak);

  // The compiled step under the profiler.
  auto step = models::momentum_train_step(models::resnet18(10, models::ResNetStem::Cifar));
  Tensor x = randn({batch, 3, 32, 32});
  Tensor y = randint(0, 10, {batch}, kInt32);
  set_context({.mode = Mode::Graph});
  (*step)(x, y);
  const double step_ms = median_ms([&] { (*step)(x, y); }, steps);
  const std::string dir =
      (std::filesystem::temp_directory_path() / "spore_resnet_roofline").string();
  std::string summary;
  {
    Profiler prof({.output_path = dir});
    for (int i = 0; i < 2; ++i) (*step)(x, y);
    summary = prof.analyse();
  }
  set_context({.mode = Mode::PyNative});
  std::printf(
      "Graph-mode training step, batch %lld: %.1f ms (median of %d), %.1f GFLOP of convolutions"
      " = %.1f GFLOP/s (%.0f%% of sgemm)\n",
      (long long)batch, step_ms, steps, conv_flop_total / 1e9, conv_flop_total / step_ms / 1e6,
      100 * conv_flop_total / step_ms / 1e6 / peak);
  std::printf("Profiled (2 steps) share of the step by op (the profiler's summary):\n%s\n",
              summary.c_str());
  return 0;
}
