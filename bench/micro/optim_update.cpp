// The optimizer update of one step over a whole network's parameters (Momentum 0.01/0.9,
// float32), three ways: one ApplyMomentum call per parameter (PyNative, and Graph mode without the
// optimizer fusion), one FusedApplyMomentum call over all of them (Graph mode), and a plain scalar
// loop per parameter on one thread (the floor a non-vectorised, single-region kernel would have).
// Arg 0: LeNet-5's 8 parameters (61.7k elements), arg 1: ResNet-18 CIFAR's 62 (11.2M).
#include <benchmark/benchmark.h>

#include "models/lenet.h"
#include "models/resnet.h"
#include "ops/op.h"
#include "spore/spore.h"

using namespace spore;

namespace {
struct Params {
  std::vector<Tensor> p, acc, g;
  int64_t elements = 0;
};
Params make(int which) {
  set_num_threads(2);
  set_seed(0);
  nn::CellPtr net = which == 0 ? nn::CellPtr(std::make_shared<models::LeNet5>())
                               : nn::CellPtr(models::resnet18(10, models::ResNetStem::Cifar));
  Params s;
  for (const Tensor& t : net->trainable_params()) {
    s.p.push_back(t.clone());
    s.acc.push_back(zeros(t.shape()));
    s.g.push_back(randn(t.shape()) * 1e-3);
    s.elements += t.numel();
  }
  return s;
}
const ops::Attrs kAttrs = ops::Attrs()
                              .set("lr", 0.01)
                              .set("momentum", 0.9)
                              .set("nesterov", false)
                              .set("weight_decay", 0.0);

void finish(benchmark::State& state, const Params& s) {
  state.SetItemsProcessed(state.iterations() * s.elements);
  state.SetBytesProcessed(state.iterations() * s.elements * 20);  // p, acc read+write; g read
  state.counters["tensors"] = double(s.p.size());
}
}  // namespace

static void BM_MomentumPerParameter(benchmark::State& state) {
  Params s = make(int(state.range(0)));
  for (auto _ : state)
    for (size_t i = 0; i < s.p.size(); ++i)
      ops::call(ops::OpId::ApplyMomentum, {s.p[i], s.acc[i], s.g[i]}, kAttrs);
  finish(state, s);
}
static void BM_MomentumFused(benchmark::State& state) {
  Params s = make(int(state.range(0)));
  ops::Tensors in;
  for (auto* list : {&s.p, &s.acc, &s.g}) in.insert(in.end(), list->begin(), list->end());
  for (auto _ : state) ops::call(ops::OpId::FusedApplyMomentum, in, kAttrs);
  finish(state, s);
}
static void BM_MomentumScalarLoop1Thread(benchmark::State& state) {
  Params s = make(int(state.range(0)));
  for (auto _ : state)
    for (size_t i = 0; i < s.p.size(); ++i) {
      float *p = s.p[i].data<float>(), *a = s.acc[i].data<float>();
      const float* g = s.g[i].data<float>();
      for (int64_t j = 0, n = s.p[i].numel(); j < n; ++j) {
        a[j] = 0.9f * a[j] + g[j];
        p[j] -= 0.01f * a[j];
      }
      benchmark::ClobberMemory();
    }
  finish(state, s);
}
BENCHMARK(BM_MomentumPerParameter)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MomentumFused)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MomentumScalarLoop1Thread)
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
