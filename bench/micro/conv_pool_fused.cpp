// conv2d_pool_fused (backends/cpu/kernels/conv_pool_fused.cpp) vs the unfused pair it replaces:
// conv2d_fused (bias + relu) then max_pool2d, both through ops::call, on LeNet-5's conv1 (batch 64,
// 1 -> 6 channels, 5x5 pad 2, 2x2 pool), float32, OMP_NUM_THREADS threads (2 when unset). The
// unfused conv runs with the direct conv forced ("unfused_direct": the same conv arithmetic, so the
// difference is the conv output's round trip through memory and the second pass) and in the timed
// automatic mode
// ("unfused_auto": what a plain graph runs). BM_ab alternates fused / unfused(direct) call by call
// (this VM's speed drifts) and reports the medians as counters: fused_us, unfused_us and
// speedup = unfused / fused, and the unfused pair's halves alone (conv_us, pool_us).
// conv2d_fused_direct_only / max_pool2d_only: the pair's halves alone.
// Run: OMP_NUM_THREADS=2 build/bench/bench_conv_pool_fused --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "backends/cpu/kernels/conv_direct.h"
#include "backends/cpu/kernels/conv_list.h"
#include "backends/cpu/ops/ops.h"
#include "ops/op.h"
#include "spore/spore.h"

namespace {
using spore::ops::Attrs;
using spore::ops::OpId;

// OMP_NUM_THREADS, 2 when unset.
int threads() {
  const char* e = std::getenv("OMP_NUM_THREADS");
  return e && std::atoi(e) > 0 ? std::atoi(e) : 2;
}

struct Setup {
  spore::Tensor x, w, b;
  Attrs conv, pool, fused;
};

Setup lenet() {
  Setup s;
  spore::set_seed(0);
  s.x = spore::randn({64, 1, 28, 28});
  s.w = spore::randn({6, 1, 5, 5});
  s.b = spore::randn({6});
  s.conv.set("stride", std::vector<int64_t>{1, 1}).set("padding", std::vector<int64_t>{2, 2, 2, 2});
  s.conv.set("dilation", std::vector<int64_t>{1, 1}).set("groups", int64_t(1));
  s.conv.set("has_bias", true).set("act", "relu");
  s.pool.set("kernel_size", std::vector<int64_t>{2, 2}).set("stride", std::vector<int64_t>{2, 2});
  s.pool.set("padding", std::vector<int64_t>{0, 0, 0, 0}).set("ceil_mode", false);
  s.fused = s.conv;
  s.fused.set("pool_kernel_size", std::vector<int64_t>{2, 2})
      .set("pool_stride", std::vector<int64_t>{2, 2});
  s.fused.set("pool_padding", std::vector<int64_t>{0, 0, 0, 0}).set("pool_ceil_mode", false);
  return s;
}

void run_fused(const Setup& s) {
  auto r = spore::ops::call(spore::cpu::op::Conv2dPoolFused(), {s.x, s.w, s.b}, s.fused);
  benchmark::DoNotOptimize(r[0].data_ptr());
}
void run_unfused(const Setup& s) {
  spore::Tensor c = spore::ops::call1(spore::cpu::op::Conv2dFused(), {s.x, s.w, s.b}, s.conv);
  auto r = spore::ops::call(OpId::MaxPool2d, {c}, s.pool);
  benchmark::DoNotOptimize(r[0].data_ptr());
}

enum class Impl { kFused, kUnfusedDirect, kUnfusedAuto, kConvOnly, kPoolOnly };

void BM_one(benchmark::State& state, Impl impl) {
  spore::set_num_threads(threads());
  spore::NoGradGuard ng;
  spore::cpu::set_conv_impl_override(
      impl == Impl::kUnfusedAuto ? "" : "direct_nchw,onednn,onednn_via_f32,reference");
  const Setup s = lenet();
  const spore::Tensor c = spore::ops::call1(spore::cpu::op::Conv2dFused(), {s.x, s.w, s.b}, s.conv);
  auto once = [&] {
    switch (impl) {
      case Impl::kFused:
        return run_fused(s);
      case Impl::kConvOnly:  // the unfused pair's two halves alone
        return benchmark::DoNotOptimize(
            spore::ops::call1(spore::cpu::op::Conv2dFused(), {s.x, s.w, s.b}, s.conv).data_ptr());
      case Impl::kPoolOnly:
        return benchmark::DoNotOptimize(
            spore::ops::call(OpId::MaxPool2d, {c}, s.pool)[0].data_ptr());
      default:
        return run_unfused(s);
    }
  };
  for (int i = 0; i < 3; ++i) once();  // primitives, scratch buffers, the auto mode's timing
  for (auto _ : state) once();
  spore::cpu::set_conv_impl_override("");
}

using spore::bench::median;

void BM_ab(benchmark::State& state) {
  spore::set_num_threads(threads());
  spore::NoGradGuard ng;
  spore::cpu::set_conv_impl_override("direct_nchw,onednn,onednn_via_f32,reference");
  const Setup s = lenet();
  for (int i = 0; i < 3; ++i) run_fused(s), run_unfused(s);
  const spore::Tensor c = spore::ops::call1(spore::cpu::op::Conv2dFused(), {s.x, s.w, s.b}, s.conv);
  std::vector<double> tf, tu, tc, tp;
  auto timed = [](auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  for (auto _ : state) {
    tf.push_back(timed([&] { run_fused(s); }));
    tu.push_back(timed([&] { run_unfused(s); }));
    tc.push_back(timed([&] {
      benchmark::DoNotOptimize(
          spore::ops::call1(spore::cpu::op::Conv2dFused(), {s.x, s.w, s.b}, s.conv).data_ptr());
    }));
    tp.push_back(timed([&] {
      benchmark::DoNotOptimize(spore::ops::call(OpId::MaxPool2d, {c}, s.pool)[0].data_ptr());
    }));
  }
  spore::cpu::set_conv_impl_override("");
  state.counters["fused_us"] = median(tf);
  state.counters["unfused_us"] = median(tu);
  state.counters["conv_us"] = median(tc);
  state.counters["pool_us"] = median(tp);
  state.counters["speedup"] = median(tu) / std::max(median(tf), 1e-9);
}

int reg = [] {
  for (auto [impl, name] :
       {std::pair{Impl::kFused, "fused"}, std::pair{Impl::kUnfusedDirect, "unfused_direct"},
        std::pair{Impl::kUnfusedAuto, "unfused_auto"},
        std::pair{Impl::kConvOnly, "conv2d_fused_direct_only"},
        std::pair{Impl::kPoolOnly, "max_pool2d_only"}}) {
    const std::string n = std::string("lenet_conv1_pool_b64/") + name;
    benchmark::RegisterBenchmark(n.c_str(), BM_one, impl)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("lenet_conv1_pool_b64/ab", BM_ab)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
