// conv2d_backward_weight_pooled (LeNet-5 conv1's weight gradient straight from the pooled gradient
// and the pool's argmax indices) vs the unfused pair it replaces, max_pool2d_backward then
// conv2d_backward_weight, on LeNet's geometry at batch 64: x (64, 1, 28, 28), w (6, 1, 5, 5),
// pad 2, conv output (64, 6, 28, 28), 2x2 pool -> (64, 6, 14, 14). float32, 2 threads, through
// ops::call (same dispatch and output allocation). The unfused weight gradient runs with the direct
// kernel forced (the path the graph pass fuses) and with oneDNN ("off").
// BM_AB alternates the three call by call (this VM's speed drifts) and reports medians of the
// per-call times as counters: fused_us, unfused_direct_us, unfused_onednn_us and the ratios.
// On a loaded machine the plain BM_fused / BM_unfused lines can jump to milliseconds (a preempted
// OpenMP thread stalls the parallel region); the BM_AB medians are the numbers to quote.
// Run: OMP_NUM_THREADS=2 build/bench/bench_conv_pool_grad --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "bench_util.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "backends/cpu/kernels/conv_direct.h"
#include "backends/cpu/kernels/conv_list.h"
#include "backends/cpu/ops/ops.h"
#include "ops/op.h"
#include "spore/spore.h"

namespace {
using spore::Tensor;
using spore::ops::Attrs;
using spore::ops::OpId;

struct Setup {
  Attrs conv, pooled, pool_bwd;
  Tensor x, idx, dy;
  Setup() {
    conv.set("stride", std::vector<int64_t>{1, 1}).set("padding", std::vector<int64_t>{2, 2, 2, 2});
    conv.set("dilation", std::vector<int64_t>{1, 1}).set("groups", int64_t(1));
    conv.set("weight_shape", spore::Shape{6, 1, 5, 5});
    pooled = Attrs(conv).set("conv_output_shape", spore::Shape{64, 6, 28, 28});
    pool_bwd.set("kernel_size", std::vector<int64_t>{2, 2})
        .set("stride", std::vector<int64_t>{2, 2});
    pool_bwd.set("padding", std::vector<int64_t>{0, 0, 0, 0}).set("ceil_mode", false);
    Attrs pool = pool_bwd;
    pool_bwd.set("input_shape", spore::Shape{64, 6, 28, 28});
    x = spore::randn({64, 1, 28, 28});
    idx = spore::ops::call(OpId::MaxPool2d, {spore::randn({64, 6, 28, 28})}, pool)[1];
    dy = spore::randn({64, 6, 14, 14});
  }
  Tensor fused() const {
    return spore::ops::call1(spore::cpu::op::Conv2dBackwardWeightPooled(), {dy, idx, x}, pooled);
  }
  Tensor unfused() const {
    const Tensor dconv = spore::ops::call1(OpId::MaxPool2dBackward, {dy, idx}, pool_bwd);
    return spore::ops::call1(OpId::Conv2dBackwardWeight, {dconv, x}, conv);
  }
};

void BM_fused(benchmark::State& state) {
  spore::set_num_threads(2);
  spore::NoGradGuard ng;
  const Setup s;
  for (auto _ : state) benchmark::DoNotOptimize(s.fused());
}
void BM_unfused(benchmark::State& state, const char* m) {
  spore::set_num_threads(2);
  spore::NoGradGuard ng;
  spore::cpu::set_conv_impl_override(m);
  const Setup s;
  for (auto _ : state) benchmark::DoNotOptimize(s.unfused());
  spore::cpu::set_conv_impl_override("");
}

using spore::bench::median;

void BM_AB(benchmark::State& state) {
  spore::set_num_threads(2);
  spore::NoGradGuard ng;
  const Setup s;
  std::vector<double> tf, td, to;
  auto time_us = [](auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(f());
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  for (auto _ : state) {
    tf.push_back(time_us([&] { return s.fused(); }));
    spore::cpu::set_conv_impl_override("direct_nchw,onednn,onednn_via_f32,reference");
    td.push_back(time_us([&] { return s.unfused(); }));
    spore::cpu::set_conv_impl_override("-direct_nchw");
    to.push_back(time_us([&] { return s.unfused(); }));
  }
  spore::cpu::set_conv_impl_override("");
  const double f = median(tf), d = median(td), o = median(to);
  state.counters["fused_us"] = f;
  state.counters["unfused_direct_us"] = d;
  state.counters["unfused_onednn_us"] = o;
  state.counters["speedup_vs_direct"] = d / f;
  state.counters["speedup_vs_onednn"] = o / f;
}

}  // namespace

BENCHMARK(BM_fused)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_unfused, direct, "direct_nchw,onednn,onednn_via_f32,reference")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_unfused, onednn, "-direct_nchw")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AB)->Unit(benchmark::kMicrosecond)->Iterations(400);
BENCHMARK_MAIN();
