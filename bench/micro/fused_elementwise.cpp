// Elementwise fusion: the same small graphs run unfused (one kernel per op) and after
// graph::fuse_elementwise (one fused_elementwise kernel), at shapes of ResNet-18's training step:
// residual add + relu (forward), gradient sum + relu_grad (backward), a per-channel affine
// (x - m) * s + y, and the 9-op tanh-GELU chain. Nodes run through ops::call on fixed inputs
// (kernels and the caching allocator only: no executor argument copies), on one thread, so the
// CPU column is the kernels' own time even on a loaded machine; compare it between the pairs.
#include <benchmark/benchmark.h>

#include <unordered_map>

#include "graph/passes.h"
#include "graph/trace.h"
#include "spore/spore.h"

using namespace spore;

namespace {
void run(benchmark::State& state, const graph::TracedFn& fn, std::vector<Tensor> args, bool fuse) {
  set_num_threads(int(state.range(0)));
  auto g = graph::trace(fn, args);
  if (fuse) graph::fuse_elementwise(*g);
  state.counters["nodes"] = double(g->num_nodes());
  std::unordered_map<const graph::Value*, Tensor> env;
  for (const graph::Value* v : g->inputs)
    env[v] = v->kind == graph::ValueKind::kPlaceholder ? args[size_t(v->arg_index)] : v->tensor;
  for (auto _ : state) {
    for (const auto& n : g->nodes) {
      ops::Tensors ins;
      for (const graph::Value* v : n->inputs) ins.push_back(env.at(v));
      ops::Tensors outs = ops::call(n->op, ins, n->attrs);
      for (size_t k = 0; k < outs.size(); ++k) env[n->outputs[k]] = outs[k];
    }
  }
  int64_t bytes = 0;  // the fused kernel's traffic: inputs read once, the output written once
  for (const Tensor& a : args) bytes += a.numel() * int64_t(itemsize(a.dtype()));
  bytes += env.at(g->outputs[0]).numel() * 4;
  state.SetBytesProcessed(state.iterations() * bytes);
}

const Shape kAct = {32, 64, 32, 32};  // ResNet-18 CIFAR stage-1 activation, 8 MB float32

std::vector<Tensor> add_relu(const std::vector<Tensor>& a) { return {relu(a[0] + a[1])}; }
std::vector<Tensor> add_relu_grad(const std::vector<Tensor>& a) {
  return {ops::call1(ops::OpId::ReluGrad, {a[0] + a[1], a[2]})};
}
std::vector<Tensor> affine(const std::vector<Tensor>& a) { return {(a[0] - a[1]) * a[2] + a[3]}; }
std::vector<Tensor> gelu_tanh(const std::vector<Tensor>& a) {
  const Tensor& x = a[0];
  return {0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))};
}
std::vector<Tensor> affine_args(const Shape& s) {
  return {randn(s), randn({s[1], 1, 1}), randn({s[1], 1, 1}), randn(s)};
}

#define SPORE_FUSION_BENCH(Name, fn, args)                                          \
  static void BM_##Name##_Unfused(benchmark::State& s) { run(s, fn, args, false); } \
  static void BM_##Name##_Fused(benchmark::State& s) { run(s, fn, args, true); }    \
  BENCHMARK(BM_##Name##_Unfused)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);    \
  BENCHMARK(BM_##Name##_Fused)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
}  // namespace

SPORE_FUSION_BENCH(AddRelu, add_relu, (std::vector<Tensor>{randn(kAct), randn(kAct)}))
SPORE_FUSION_BENCH(AddReluGrad, add_relu_grad,
                   (std::vector<Tensor>{randn(kAct), randn(kAct), randn(kAct)}))
SPORE_FUSION_BENCH(ChannelAffine64x32x32, affine, affine_args(kAct))
SPORE_FUSION_BENCH(ChannelAffine512x4x4, affine, affine_args({32, 512, 4, 4}))
SPORE_FUSION_BENCH(GeluTanh, gelu_tanh, (std::vector<Tensor>{randn(kAct)}))
SPORE_FUSION_BENCH(GeluTanhSmall, gelu_tanh, (std::vector<Tensor>{randn({256, 256})}))

BENCHMARK_MAIN();
