// Blocked-activation convolutions vs today's plain ones: conv2d forward, backward data and
// backward weight (one training step's conv work) with NCHW activations (each call reorders in
// and out as oneDNN's choice) and with nChw16c activations held blocked (blocked_x / blocked_y:
// no activation reorder where the user-layout candidate wins). float32, 2 threads.
// Run: build/bench/bench_blocked_conv --benchmark_repetitions=7
// --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

#include "backends/cpu/ops/ops.h"
#include "ops/op.h"
#include "spore/spore.h"

namespace {
using spore::ops::Attrs;
using spore::ops::OpId;

struct Geo {
  const char* name;
  int64_t n, c, h, w, o, k, stride, pad;
  bool bx;  // the input-side activation blocked too (false for a network's first conv)
};
constexpr Geo kGeos[] = {
    {"lenet_conv2_6x14x14_16_5x5", 64, 6, 14, 14, 16, 5, 1, 0, true},
    {"lenet_conv1_1x28x28_6_5x5_p2", 64, 1, 28, 28, 6, 5, 1, 2, false},
    {"resnet_64x32x32_64_3x3", 32, 64, 32, 32, 64, 3, 1, 1, true},
    {"resnet_128x16x16_128_3x3", 32, 128, 16, 16, 128, 3, 1, 1, true},
};

spore::Shape blocked(const spore::Shape& s) { return {s[0], (s[1] + 15) / 16, s[2], s[3], 16}; }

void BM_step(benchmark::State& state, Geo g, bool use_blocked) {
  spore::set_num_threads(2);
  spore::NoGradGuard ng;
  Attrs a;
  a.set("stride", std::vector<int64_t>{g.stride, g.stride})
      .set("padding", std::vector<int64_t>{g.pad, g.pad, g.pad, g.pad});
  a.set("dilation", std::vector<int64_t>{1, 1}).set("groups", int64_t(1));
  const bool bx = use_blocked && g.bx, by = use_blocked;
  a.set("blocked_x", bx).set("blocked_y", by);
  const spore::Shape xs{g.n, g.c, g.h, g.w}, ws{g.o, g.c, g.k, g.k};
  spore::Tensor x = spore::randn(bx ? blocked(xs) : xs), w = spore::randn(ws);
  spore::Tensor y = spore::ops::call1(OpId::Conv2d, {x, w}, a);
  spore::Tensor dy = spore::randn(y.shape());
  Attrs ad = a, aw = a;
  ad.set("input_shape", xs);
  aw.set("weight_shape", ws);
  for (auto _ : state) {
    benchmark::DoNotOptimize(spore::ops::call1(OpId::Conv2d, {x, w}, a).data_ptr());
    benchmark::DoNotOptimize(spore::ops::call1(OpId::Conv2dBackwardData, {dy, w}, ad).data_ptr());
    benchmark::DoNotOptimize(spore::ops::call1(OpId::Conv2dBackwardWeight, {dy, x}, aw).data_ptr());
  }
}

// Both ways in one run, alternating step by step (a load spike from other processes hits both
// alike); counters: the median step of each in microseconds and their ratio.
struct Step {
  Attrs a, ad, aw;
  spore::Tensor x, w, dy;
  bool dx = true;  // a network's first conv (bx false) needs no data gradient, as in training
  int only = -1;   // run only pass 0 (forward), 1 (backward data) or 2 (backward weight)
  void run() const {
    if (only < 0 || only == 0)
      benchmark::DoNotOptimize(spore::ops::call1(OpId::Conv2d, {x, w}, a).data_ptr());
    if ((only < 0 && dx) || only == 1)
      benchmark::DoNotOptimize(spore::ops::call1(OpId::Conv2dBackwardData, {dy, w}, ad).data_ptr());
    if (only < 0 || only == 2)
      benchmark::DoNotOptimize(
          spore::ops::call1(OpId::Conv2dBackwardWeight, {dy, x}, aw).data_ptr());
  }
};
Step make_step(const Geo& g, bool use_blocked, const spore::Tensor& x_plain,
               const spore::Tensor& w) {
  Step s;
  s.a.set("stride", std::vector<int64_t>{g.stride, g.stride})
      .set("padding", std::vector<int64_t>{g.pad, g.pad, g.pad, g.pad});
  s.a.set("dilation", std::vector<int64_t>{1, 1}).set("groups", int64_t(1));
  const bool bx = use_blocked && g.bx, by = use_blocked;
  s.a.set("blocked_x", bx).set("blocked_y", by);
  s.x = bx ? spore::ops::call1(spore::cpu::op::ToBlocked(), {x_plain}) : x_plain;
  s.w = w;
  s.dx = g.bx;
  s.dy = spore::randn(spore::ops::call1(OpId::Conv2d, {s.x, w}, s.a).shape());
  s.ad = s.a;
  s.ad.set("input_shape", x_plain.shape());
  s.aw = s.a;
  s.aw.set("weight_shape", w.shape());
  return s;
}
void BM_step_ab(benchmark::State& state, Geo g, int only) {
  spore::set_num_threads(2);
  spore::NoGradGuard ng;
  const spore::Tensor x = spore::randn({g.n, g.c, g.h, g.w}),
                      w = spore::randn({g.o, g.c, g.k, g.k});
  Step plain = make_step(g, false, x, w), blk = make_step(g, true, x, w);
  plain.only = blk.only = only;
  plain.run(), blk.run();  // first calls choose the primitives
  // Wall time, and the process's CPU time (all threads; less sensitive to other processes on a
  // shared machine; run with OMP_WAIT_POLICY=passive so idle spinning is not counted).
  std::vector<double> tp, tb, cp, cb;
  auto cpu_us = [] {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) * 1e6 + double(t.tv_nsec) * 1e-3;
  };
  auto us = [&](const Step& s, std::vector<double>& wall, std::vector<double>& cpu) {
    const double c0 = cpu_us();
    const auto t0 = std::chrono::steady_clock::now();
    s.run();
    wall.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(cpu_us() - c0);
  };
  for (auto _ : state) {
    us(plain, tp, cp);
    us(blk, tb, cb);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  state.counters["plain_us"] = median(tp);
  state.counters["blocked_us"] = median(tb);
  state.counters["blocked/plain"] = median(tb) / std::max(median(tp), 1e-9);
  state.counters["plain_cpu_us"] = median(cp);
  state.counters["blocked_cpu_us"] = median(cb);
  state.counters["cpu_blocked/plain"] = median(cb) / std::max(median(cp), 1e-9);
}

const bool kRegistered = [] {
  for (const Geo& g : kGeos) {
    benchmark::RegisterBenchmark((std::string("conv_step_ab/") + g.name).c_str(), BM_step_ab, g, -1)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime()
        ->MinTime(2.0);
    const char* passes[] = {"/fwd", "/bwd_data", "/bwd_weight"};
    for (int p = 0; p < 3; ++p)
      benchmark::RegisterBenchmark((std::string("conv_pass_ab/") + g.name + passes[p]).c_str(),
                                   BM_step_ab, g, p)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime()
          ->MinTime(1.0);
  }
  for (const Geo& g : kGeos)
    for (bool b : {false, true})
      benchmark::RegisterBenchmark(
          (std::string("conv_step/") + g.name + (b ? "/blocked" : "/plain")).c_str(), BM_step, g, b)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
