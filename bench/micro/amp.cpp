// Mixed precision: a training step under O2 (bfloat16, BatchNorm in float32) vs O0 (float32), in
// PyNative (dispatcher autocast) and Graph mode (the amp_casts pass), for ResNet-18 (CIFAR stem,
// 3x32x32, batch 32) and LeNet-5 (batch 64), Momentum 0.01/0.9. Counters:
//   median_ms      median wall time of one step over the timed iterations
//   cpu_ms         median CPU time (all threads) of one step
//   act_MB         activation memory of one step: PyNative, the allocator's peak above what was
//                  resident before the step; Graph, the planned arena
//                  (JitStats::planned_peak_bytes)
//   alloc_peak_MB  (Graph) what the kernels allocate besides the arena during a step
// bench/peers/amp.sh prints the O2/O0 ratios from these.
#include <benchmark/benchmark.h>

#include "bench_util.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "models/lenet.h"
#include "models/resnet.h"
#include "ops/op.h"
#include "spore/amp.h"
#include "spore/jit.h"
#include "spore/spore.h"

using namespace spore;

namespace {

struct Step {
  nn::CellPtr net;
  std::shared_ptr<train::TrainOneStepCell> step;
  Tensor x, y;
};

Step make(bool resnet, amp::Level level) {
  set_num_threads(2);
  set_seed(0);
  Step s;
  s.net = resnet ? nn::CellPtr(models::resnet18(10, models::ResNetStem::Cifar))
                 : nn::CellPtr(std::make_shared<models::LeNet5>());
  amp::auto_mixed_precision(*s.net, level, kBFloat16);  // O2: BatchNorm cells keep float32
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  // The logits go to the loss in float32 (MindSpore's O2 output cast); no loss scaling (bf16 has
  // float32's exponent range), so both levels run the same plain TrainOneStepCell.
  nn::CellPtr body = level == amp::Level::O0 ? s.net : amp::with_float32_output(s.net);
  s.step = std::make_shared<train::TrainOneStepCell>(
      std::make_shared<train::WithLossCell>(body, loss),
      std::make_shared<optim::Momentum>(s.net->trainable_params(), 0.01, 0.9));
  const int64_t n = resnet ? 32 : 64;
  s.x = resnet ? randn({n, 3, 32, 32}) : randn({n, 1, 28, 28});
  s.y = randint(0, 10, {n}, kInt32);
  return s;
}

// CPU time of the whole process (all threads), in ms.
double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) / 1e6;
}
using spore::bench::median;

// median_ms: wall time; cpu_ms: CPU time of all threads (with OMP_WAIT_POLICY=passive, the work
// itself: on a machine other jobs load, wall time mostly measures waiting for a core).
template <typename F>
void time_steps(benchmark::State& state, F&& step, int64_t batch) {
  std::vector<double> ms, cpu;
  for (auto _ : state) {
    const double c0 = process_cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    step();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(process_cpu_ms() - c0);
  }
  state.counters["median_ms"] = median(ms);
  state.counters["cpu_ms"] = median(cpu);
  state.SetItemsProcessed(state.iterations() * batch);
}

void pynative(benchmark::State& state, bool resnet, amp::Level level) {
  Step s = make(resnet, level);
  (*s.step)(s.x, s.y);  // warm-up (oneDNN primitives, allocator cache)
  cpu_allocator().reset_peak();
  const size_t base = cpu_allocator().stats().bytes_in_use;
  (*s.step)(s.x, s.y);
  state.counters["act_MB"] = double(cpu_allocator().stats().peak_bytes_in_use - base) / 1e6;
  time_steps(
      state, [&] { benchmark::DoNotOptimize((*s.step)(s.x, s.y)); }, s.x.size(0));
}

void graph_mode(benchmark::State& state, bool resnet, amp::Level level) {
  Step s = make(resnet, level);
  // jit over the step's body (the PyNative path, traced) so its JitStats are visible.
  auto f = jit([&](const std::vector<Tensor>& a) { return s.step->forward(a); },
               {.name = resnet ? "resnet18_step" : "lenet_step"});
  f({s.x, s.y});  // trace + compile
  f({s.x, s.y});
  cpu_allocator().reset_peak();
  const size_t base = cpu_allocator().stats().bytes_in_use;
  f({s.x, s.y});
  state.counters["alloc_peak_MB"] = double(cpu_allocator().stats().peak_bytes_in_use - base) / 1e6;
  state.counters["act_MB"] = double(f.stats().planned_peak_bytes) / 1e6;
  state.counters["nodes"] = double(f.stats().nodes);
  time_steps(
      state,
      [&] {
        benchmark::DoNotOptimize(f({s.x, s.y}));
      },
      s.x.size(0));
}

constexpr auto O0 = amp::Level::O0;
constexpr auto O2 = amp::Level::O2;
}  // namespace

#define SPORE_AMP_BENCH(Name, fn, resnet, level, iters)                   \
  static void Name(benchmark::State& state) { fn(state, resnet, level); } \
  BENCHMARK(Name)->Iterations(iters)->Unit(benchmark::kMillisecond)->UseRealTime();

SPORE_AMP_BENCH(BM_ResNet18Step32_PyNative_O0, pynative, true, O0, 5)
SPORE_AMP_BENCH(BM_ResNet18Step32_PyNative_O2, pynative, true, O2, 5)
SPORE_AMP_BENCH(BM_ResNet18Step32_Graph_O0, graph_mode, true, O0, 5)
SPORE_AMP_BENCH(BM_ResNet18Step32_Graph_O2, graph_mode, true, O2, 5)
SPORE_AMP_BENCH(BM_LeNetStep64_PyNative_O0, pynative, false, O0, 30)
SPORE_AMP_BENCH(BM_LeNetStep64_PyNative_O2, pynative, false, O2, 30)
SPORE_AMP_BENCH(BM_LeNetStep64_Graph_O0, graph_mode, false, O0, 30)
SPORE_AMP_BENCH(BM_LeNetStep64_Graph_O2, graph_mode, false, O2, 30)

// The convolution kernels alone (oneDNN through the registered kernels) in float32 and bfloat16,
// at ResNet-18's CIFAR stage shapes (batch 32, 3x3, stride 1): where a bf16 step's time goes.
// Arg: stage (0: 64x32x32, 1: 128x16x16, 2: 256x8x8, 3: 512x4x4); counter median_ms.
namespace {
enum class ConvPart { Forward, BackwardData, BackwardWeight };
void conv_kernel(benchmark::State& state, DType dt, ConvPart part) {
  set_num_threads(2);
  const int64_t c = 64 << state.range(0), hw = 32 >> state.range(0);
  Tensor x = randn({32, c, hw, hw}).to(dt), w = randn({c, c, 3, 3}).to(dt);
  Tensor dy = randn({32, c, hw, hw}).to(dt);
  ops::Attrs a;
  a.set("stride", std::vector<int64_t>{1, 1});
  a.set("padding", std::vector<int64_t>{1, 1, 1, 1});
  a.set("dilation", std::vector<int64_t>{1, 1});
  a.set("groups", int64_t(1));
  NoGradGuard no_grad;
  auto once = [&] {
    switch (part) {
      case ConvPart::Forward:
        return ops::call1(ops::OpId::Conv2d, {x, w}, a);
      case ConvPart::BackwardData:
        return ops::call1(ops::OpId::Conv2dBackwardData, {dy, w},
                          ops::Attrs(a).set("input_shape", x.shape()));
      case ConvPart::BackwardWeight:
        return ops::call1(ops::OpId::Conv2dBackwardWeight, {dy, x},
                          ops::Attrs(a).set("weight_shape", w.shape()));
    }
    return Tensor();
  };
  once();  // primitive creation
  time_steps(
      state, [&] { benchmark::DoNotOptimize(once()); }, 32);
}
}  // namespace
#define SPORE_CONV_BENCH(Name, dt, part)                                                \
  static void Name(benchmark::State& state) { conv_kernel(state, dt, ConvPart::part); } \
  BENCHMARK(Name)->DenseRange(0, 3)->Iterations(10)->Unit(benchmark::kMillisecond)->UseRealTime();
SPORE_CONV_BENCH(BM_Conv3x3_Forward_f32, kFloat32, Forward)
SPORE_CONV_BENCH(BM_Conv3x3_Forward_bf16, kBFloat16, Forward)
SPORE_CONV_BENCH(BM_Conv3x3_BackwardData_f32, kFloat32, BackwardData)
SPORE_CONV_BENCH(BM_Conv3x3_BackwardData_bf16, kBFloat16, BackwardData)
SPORE_CONV_BENCH(BM_Conv3x3_BackwardWeight_f32, kFloat32, BackwardWeight)
SPORE_CONV_BENCH(BM_Conv3x3_BackwardWeight_bf16, kBFloat16, BackwardWeight)

// Pointwise kernels on a ResNet-18 stage-1 activation (32x64x32x32, 2M elements) in float32 and
// bfloat16, and the casts between them: the non-conv share of a bf16 step.
namespace {
enum class Pointwise { Relu, ReluGrad, Add, CastToLow, CastToF32 };
void pointwise(benchmark::State& state, DType dt, Pointwise op) {
  set_num_threads(2);
  Tensor a = randn({32, 64, 32, 32}).to(dt), b = randn({32, 64, 32, 32}).to(dt);
  NoGradGuard no_grad;
  auto once = [&] {
    switch (op) {
      case Pointwise::Relu:
        return relu(a);
      case Pointwise::ReluGrad:
        return ops::call1(ops::OpId::ReluGrad, {a, b});
      case Pointwise::Add:
        return add(a, b);
      case Pointwise::CastToLow:
        return cast(a, kBFloat16);
      case Pointwise::CastToF32:
        return cast(a, kFloat32);
    }
    return Tensor();
  };
  once();
  time_steps(
      state, [&] { benchmark::DoNotOptimize(once()); }, 1);
}
}  // namespace
#define SPORE_PW_BENCH(Name, dt, op)                                                 \
  static void Name(benchmark::State& state) { pointwise(state, dt, Pointwise::op); } \
  BENCHMARK(Name)->Iterations(20)->Unit(benchmark::kMillisecond)->UseRealTime();
SPORE_PW_BENCH(BM_Pointwise_Relu_f32, kFloat32, Relu)
SPORE_PW_BENCH(BM_Pointwise_Relu_bf16, kBFloat16, Relu)
SPORE_PW_BENCH(BM_Pointwise_ReluGrad_f32, kFloat32, ReluGrad)
SPORE_PW_BENCH(BM_Pointwise_ReluGrad_bf16, kBFloat16, ReluGrad)
SPORE_PW_BENCH(BM_Pointwise_Add_f32, kFloat32, Add)
SPORE_PW_BENCH(BM_Pointwise_Add_bf16, kBFloat16, Add)
SPORE_PW_BENCH(BM_Pointwise_Cast_f32_to_bf16, kFloat32, CastToLow)
SPORE_PW_BENCH(BM_Pointwise_Cast_bf16_to_f32, kBFloat16, CastToF32)

BENCHMARK_MAIN();
