// The optimizer fusion pass (graph/passes/optimizer_fusion.cpp) and the fused update kernels:
// node counts on traced training steps, parameters after N steps bit-equal to the unfused graph
// and to PyNative (the fused kernel runs every element through the same vector code as the
// per-parameter kernel, so the split across threads cannot change a bit; the full Graph-mode
// pipeline, whose other fusions round differently, is compared to float32 rounding), Momentum with
// nesterov and weight decay, Adam, parameter groups with different attributes kept apart,
// learning-rate schedules (one graph: the lr is a hyper input), and the ordering rule (an update is
// never moved past a read of its parameter).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "graph/executor.h"
#include "graph/passes.h"
#include "graph/trace.h"
#include "models/lenet.h"
#include "models/resnet.h"
#include "spore/spore.h"

#include "graph/graph_test_util.h"

using namespace spore;
using graph::Graph;
using ops::OpId;

namespace {

struct PyNativeAfter {
  ~PyNativeAfter() { set_context({.mode = Mode::PyNative}); }
};

using MakeOpt = std::function<optim::OptimizerPtr(nn::Cell& net)>;

// A LeNet-5 training step from seed 0 with the given optimizer.
struct Rig {
  std::shared_ptr<models::LeNet5> net;
  std::shared_ptr<train::TrainOneStepCell> step;
};
Rig make_rig(const MakeOpt& make_opt) {
  set_seed(0);
  Rig s;
  s.net = std::make_shared<models::LeNet5>();
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  s.step = std::make_shared<train::TrainOneStepCell>(
      std::make_shared<train::WithLossCell>(s.net, loss), make_opt(*s.net));
  return s;
}

struct Batches {
  std::vector<Tensor> x, y;
};
Batches make_batches(int n = 3) {
  set_seed(7);
  Batches b;
  for (int i = 0; i < n; ++i) {
    b.x.push_back(randn({8, 1, 28, 28}));
    b.y.push_back(randint(0, 10, {8}, kInt32));
  }
  return b;
}

std::vector<std::vector<float>> params_of(const nn::Cell& net) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : net.trainable_params()) out.push_back(p.to_vector<float>());
  return out;
}

// Bitwise equality of every parameter element; the message names the first difference.
void expect_bit_equal(const std::vector<std::vector<float>>& a,
                      const std::vector<std::vector<float>>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t p = 0; p < a.size(); ++p) {
    ASSERT_EQ(a[p].size(), b[p].size()) << what;
    for (size_t i = 0; i < a[p].size(); ++i)
      ASSERT_EQ(std::memcmp(&a[p][i], &b[p][i], sizeof(float)), 0)
          << what << ": parameter " << p << " element " << i << ": " << a[p][i] << " vs "
          << b[p][i];
  }
}

// The production path (Graph-mode TrainOneStepCell: the full pipeline, whose other fusions --
// conv + bias post-ops, softmax + cross-entropy, elementwise chains -- round differently from the
// op-by-op kernels) against PyNative: equal to float32 rounding, not bitwise.

// Traces one step of s (the step function runs its PyNative body under the tracer), then DCE and
// optionally the fusion; the executor runs `steps` steps on the batches. Returns the graph's
// counts of (single updates, fused updates) for the caller's checks.
std::pair<size_t, size_t> run_traced(Rig& s, const Batches& b, int steps, bool fuse, OpId single,
                                     OpId fused) {
  auto g = graph::trace([&](const std::vector<Tensor>& a) { return s.step->forward(a); },
                        {b.x[0], b.y[0]}, "train_step");
  graph::dead_code_elimination(*g);
  if (fuse) graph::fuse_optimizer(*g);
  graph::verify(*g);
  const std::pair<size_t, size_t> counts{g->count(single), g->count(fused)};
  graph::Executor ex(std::shared_ptr<Graph>(std::move(g)));
  for (int i = 0; i < steps; ++i) ex.run({b.x[size_t(i % 3)], b.y[size_t(i % 3)]});
  return counts;
}

MakeOpt momentum(double lr, double mom, optim::MomentumOptions o = {}) {
  return [=](nn::Cell& net) {
    return std::make_shared<optim::Momentum>(net.trainable_params(), lr, mom, o);
  };
}

}  // namespace

// LeNet-5's step: 8 apply_momentum nodes become one fused node holding all 24 operands (params,
// accumulators, gradients) and the optimizer's hyper input (lr, read at run time), and nothing else
// changes.
TEST(OptimizerFusion, LeNetMomentumBecomesOneNode) {
  Rig s = make_rig(momentum(0.01, 0.9));
  Batches b = make_batches();
  auto g = graph::trace([&](const std::vector<Tensor>& a) { return s.step->forward(a); },
                        {b.x[0], b.y[0]});
  graph::dead_code_elimination(*g);
  const size_t params = s.net->trainable_params().size();
  ASSERT_EQ(params, 8u);  // MindSpore's LeNet-5: conv layers without bias
  EXPECT_EQ(g->count(OpId::ApplyMomentum), params);
  const size_t before = g->num_nodes();
  EXPECT_EQ(graph::fuse_optimizer(*g), params);
  EXPECT_EQ(g->num_nodes(), before - params + 1);
  EXPECT_EQ(g->count(OpId::ApplyMomentum), 0u);
  ASSERT_EQ(g->count(OpId::FusedApplyMomentum), 1u);
  const graph::Node* f = nullptr;
  for (const auto& n : g->nodes)
    if (n->op == OpId::FusedApplyMomentum) f = n.get();
  ASSERT_EQ(f->inputs.size(), 3 * params + 1);
  // Layout: params in trainable_params() order (the optimizer's), then accumulators, then grads,
  // then the one hyper tensor [lr, momentum] every update read (a capture: its value at run time).
  for (size_t i = 0; i < params; ++i)
    EXPECT_TRUE(f->inputs[i]->tensor.is_same(s.net->trainable_params()[i])) << i;
  EXPECT_TRUE(f->attrs.get_bool("hyper_input", false));
  EXPECT_FALSE(f->attrs.has("lr"));
  EXPECT_FALSE(f->attrs.has("momentum"));
  EXPECT_EQ(f->inputs.back()->kind, graph::ValueKind::kCapture);
  EXPECT_EQ(f->inputs.back()->tensor.to_vector<double>(), (std::vector<double>{0.01, 0.9}));
  graph::verify(*g);
  // Idempotent: a second run finds nothing more.
  EXPECT_EQ(graph::fuse_optimizer(*g), 0u);
}

// ResNet-18: 62 updates (20 convs, 20 BatchNorm gamma/beta pairs, the Dense) -> one node through
// the full pipeline, with BatchNorm's moving-statistics Assign effects earlier in the step.
TEST(OptimizerFusion, ResNet18MomentumBecomesOneNode) {
  set_seed(0);
  auto net = models::resnet18(10, models::ResNetStem::Cifar);
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  train::TrainOneStepCell step(
      std::make_shared<train::WithLossCell>(net, loss),
      std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9));
  Tensor x = randn({2, 3, 32, 32}), y = randint(0, 10, {2}, kInt32);
  auto g = graph::trace([&](const std::vector<Tensor>& a) { return step.forward(a); }, {x, y});
  ASSERT_EQ(net->trainable_params().size(), 62u);
  EXPECT_EQ(g->count(OpId::ApplyMomentum), 62u);
  EXPECT_GT(g->count(OpId::Assign), 0u);
  graph::run_pipeline(*g);
  EXPECT_EQ(g->count(OpId::ApplyMomentum), 0u);
  EXPECT_EQ(g->count(OpId::FusedApplyMomentum), 1u);
}

// Parameters after 5 steps: fused graph == unfused graph == PyNative, bit for bit.
TEST(OptimizerFusion, MomentumParametersBitEqualToUnfusedAndPyNative) {
  Batches b = make_batches();
  Rig fused = make_rig(momentum(0.01, 0.9)), plain = make_rig(momentum(0.01, 0.9)),
      eager = make_rig(momentum(0.01, 0.9));
  auto cf = run_traced(fused, b, 5, true, OpId::ApplyMomentum, OpId::FusedApplyMomentum);
  auto cp = run_traced(plain, b, 5, false, OpId::ApplyMomentum, OpId::FusedApplyMomentum);
  EXPECT_EQ(cf, std::make_pair(size_t(0), size_t(1)));
  EXPECT_EQ(cp, std::make_pair(size_t(8), size_t(0)));
  for (int i = 0; i < 5; ++i) (*eager.step)(b.x[size_t(i % 3)], b.y[size_t(i % 3)]);
  const auto pf = params_of(*fused.net), pp = params_of(*plain.net), pe = params_of(*eager.net);
  expect_bit_equal(pf, pp, "fused vs unfused graph");
  expect_bit_equal(pf, pe, "fused graph vs PyNative");
  // The update really ran: the parameters moved from their initial values.
  const auto p0 = params_of(*make_rig(momentum(0.01, 0.9)).net);
  EXPECT_NE(pf[0], p0[0]);
}

// Nesterov momentum with weight decay: fused == unfused == PyNative bitwise after 6 steps; then
// the production path (Graph-mode TrainOneStepCell, one compilation, cache hits).
TEST(OptimizerFusion, NesterovWeightDecayBitEqualAndGraphMode) {
  Batches b = make_batches();
  const MakeOpt opt = momentum(0.02, 0.8, {.weight_decay = 1e-3, .nesterov = true});
  Rig fused = make_rig(opt), plain = make_rig(opt), e = make_rig(opt), g = make_rig(opt);
  EXPECT_EQ(run_traced(fused, b, 6, true, OpId::ApplyMomentum, OpId::FusedApplyMomentum),
            std::make_pair(size_t(0), size_t(1)));
  run_traced(plain, b, 6, false, OpId::ApplyMomentum, OpId::FusedApplyMomentum);
  for (int i = 0; i < 6; ++i) (*e.step)(b.x[size_t(i % 3)], b.y[size_t(i % 3)]);
  expect_bit_equal(params_of(*fused.net), params_of(*plain.net), "fused vs unfused graph");
  expect_bit_equal(params_of(*fused.net), params_of(*e.net), "fused graph vs PyNative");
  {
    PyNativeAfter restore;
    set_context({.mode = Mode::Graph});
    for (int i = 0; i < 6; ++i) (*g.step)(b.x[size_t(i % 3)], b.y[size_t(i % 3)]);
  }
  test::expect_params_close(params_of(*g.net), params_of(*e.net), "Graph mode vs PyNative");
  const JitStats st = g.step->jit_stats();
  EXPECT_EQ(st.traces, 1);
  EXPECT_EQ(st.cache_hits, 5);
  EXPECT_LT(st.nodes, st.nodes_traced);
}

// Adam: one fused node; the step (bias correction) is read from the optimizer's hyper input, so
// Graph mode compiles one graph for all steps.
TEST(OptimizerFusion, AdamFusedBitEqualToUnfusedAndPyNative) {
  Batches b = make_batches();
  const MakeOpt adam = [](nn::Cell& net) {
    return std::make_shared<optim::Adam>(net.trainable_params(), 1e-3,
                                         optim::AdamOptions{.weight_decay = 1e-4});
  };
  Rig fused = make_rig(adam), plain = make_rig(adam), eager = make_rig(adam),
      jitted = make_rig(adam);
  // One traced step each (tracing writes that step's hyper values), repeated 3 times.
  for (int i = 0; i < 3; ++i) {
    auto cf = run_traced(fused, b, 1, true, OpId::ApplyAdam, OpId::FusedApplyAdam);
    auto cp = run_traced(plain, b, 1, false, OpId::ApplyAdam, OpId::FusedApplyAdam);
    EXPECT_EQ(cf, std::make_pair(size_t(0), size_t(1)));
    EXPECT_EQ(cp, std::make_pair(size_t(8), size_t(0)));
    (*eager.step)(b.x[0], b.y[0]);
  }
  expect_bit_equal(params_of(*fused.net), params_of(*plain.net), "fused vs unfused graph");
  expect_bit_equal(params_of(*fused.net), params_of(*eager.net), "fused graph vs PyNative");
  {
    PyNativeAfter restore;
    set_context({.mode = Mode::Graph});
    for (int i = 0; i < 3; ++i) (*jitted.step)(b.x[0], b.y[0]);
  }
  test::expect_params_close(params_of(*jitted.net), params_of(*eager.net),
                            "Graph mode vs PyNative");
  EXPECT_EQ(jitted.step->jit_stats().traces, 1);
  EXPECT_EQ(jitted.step->jit_stats().cache_hits, 2);
}

// Two parameter groups with different weight decay: two fused nodes, never one.
TEST(OptimizerFusion, DifferentAttributesAreNotMerged) {
  Batches b = make_batches();
  const MakeOpt grouped = [](nn::Cell& net) {
    return std::make_shared<optim::Momentum>(optim::split_decay_groups(net.named_parameters()),
                                             0.01, 0.9,
                                             optim::MomentumOptions{.weight_decay = 1e-2});
  };
  Rig s = make_rig(grouped), e = make_rig(grouped);  // s: node counts only
  auto g = graph::trace([&](const std::vector<Tensor>& a) { return s.step->forward(a); },
                        {b.x[0], b.y[0]});
  graph::run_pipeline(*g);
  EXPECT_EQ(g->count(OpId::ApplyMomentum), 0u);
  ASSERT_EQ(g->count(OpId::FusedApplyMomentum), 2u);
  std::vector<std::pair<double, size_t>> wd_operands;
  for (const auto& n : g->nodes)
    if (n->op == OpId::FusedApplyMomentum)
      wd_operands.push_back({n->attrs.get_float("weight_decay"), n->inputs.size()});
  std::sort(wd_operands.begin(), wd_operands.end());
  // LeNet-5: 3 biases without decay, 5 weights with it; 3 operands per parameter, and the hyper
  // input both groups share (same lr schedule).
  EXPECT_EQ(wd_operands, (std::vector<std::pair<double, size_t>>{{0.0, 10}, {1e-2, 16}}));
  // Numbers: DCE + fusion alone (two fused nodes) against PyNative, bitwise.
  Rig f = make_rig(grouped);
  EXPECT_EQ(run_traced(f, b, 3, true, OpId::ApplyMomentum, OpId::FusedApplyMomentum),
            std::make_pair(size_t(0), size_t(2)));
  for (int i = 0; i < 3; ++i) (*e.step)(b.x[size_t(i)], b.y[size_t(i)]);
  expect_bit_equal(params_of(*f.net), params_of(*e.net), "grouped: fused graph vs PyNative");
}

// A learning-rate list: the rate is read from the optimizer's hyper tensor at run time, so every
// rate runs the one compiled graph.
TEST(OptimizerFusion, LearningRateScheduleKeepsWorking) {
  Batches b = make_batches();
  const MakeOpt sched = [](nn::Cell& net) {
    return std::make_shared<optim::Momentum>(
        net.trainable_params(), optim::LearningRate(std::vector<double>{0.05, 0.02, 0.01}), 0.9);
  };
  Rig g = make_rig(sched), e = make_rig(sched);
  {
    PyNativeAfter restore;
    set_context({.mode = Mode::Graph});
    for (int i = 0; i < 5; ++i) (*g.step)(b.x[size_t(i % 3)], b.y[size_t(i % 3)]);
  }
  for (int i = 0; i < 5; ++i) (*e.step)(b.x[size_t(i % 3)], b.y[size_t(i % 3)]);
  test::expect_params_close(params_of(*g.net), params_of(*e.net), "lr schedule: graph vs PyNative");
  EXPECT_EQ(g.step->jit_stats().traces, 1);  // 0.05, 0.02, 0.01, 0.01, 0.01: one graph
  EXPECT_EQ(g.step->jit_stats().cache_hits, 4);
}

// Ordering: an update is not moved past a node that reads its parameter (that node must see the
// updated value), while an update with no such reader still joins the fused node.
TEST(OptimizerFusion, NeverMovesAnUpdatePastAReadOfItsParameter) {
  Tensor p1 = full({5}, 1.0), a1 = zeros({5}), p2 = full({7}, 2.0), a2 = zeros({7}),
         p3 = full({3}, 3.0), a3 = zeros({3});
  const ops::Attrs at = ops::Attrs()
                            .set("lr", 0.5)
                            .set("momentum", 0.9)
                            .set("nesterov", false)
                            .set("weight_decay", 0.0);
  auto fn = [&](const std::vector<Tensor>& a) {
    ops::call(OpId::ApplyMomentum, {p1, a1, a[0] * 1.0}, at);  // p1 -= 0.5 * 1 -> 0.5
    Tensor seen = p1 * 2.0;                                    // must read the updated p1: 1.0
    ops::call(OpId::ApplyMomentum, {p2, a2, a[1] * 1.0}, at);
    ops::call(OpId::ApplyMomentum, {p3, a3, a[2] * 1.0}, at);
    return std::vector<Tensor>{seen};
  };
  Tensor g1 = ones({5}), g2 = ones({7}), g3 = ones({3});
  auto g = graph::trace(fn, {g1, g2, g3});
  EXPECT_EQ(graph::fuse_optimizer(*g), 2u);  // p2 and p3; p1 stays before its reader
  EXPECT_EQ(g->count(OpId::ApplyMomentum), 1u);
  EXPECT_EQ(g->count(OpId::FusedApplyMomentum), 1u);
  // The remaining single update still precedes the multiply that reads p1.
  size_t upd = 0, mul = 0;
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    if (g->nodes[i]->op == OpId::ApplyMomentum) upd = i;
    if (g->nodes[i]->op == OpId::Mul && g->nodes[i]->inputs[0]->tensor.defined() &&
        g->nodes[i]->inputs[0]->tensor.is_same(p1))
      mul = i;
  }
  EXPECT_LT(upd, mul);
  graph::verify(*g);
  graph::Executor ex(std::shared_ptr<Graph>(std::move(g)));
  auto out = ex.run({g1, g2, g3}).at(0).to_vector<float>();
  for (float v : out) EXPECT_FLOAT_EQ(v, 1.0f);  // 2 * (1 - 0.5 * 1)
  for (float v : p2.to_vector<float>()) EXPECT_FLOAT_EQ(v, 1.5f);
  for (float v : p3.to_vector<float>()) EXPECT_FLOAT_EQ(v, 2.5f);
}

// A second update of the same parameter (two optimizer steps in one graph): the first may not
// move past the second (which reads and writes the same parameter), so the two stay ordered;
// each fuses with the other parameters of its own step.
TEST(OptimizerFusion, TwoStepsInOneGraphStayOrdered) {
  Tensor p1 = full({4}, 1.0), a1 = zeros({4}), p2 = full({6}, 1.0), a2 = zeros({6});
  const ops::Attrs at = ops::Attrs()
                            .set("lr", 0.1)
                            .set("momentum", 0.5)
                            .set("nesterov", false)
                            .set("weight_decay", 0.0);
  auto fn = [&](const std::vector<Tensor>& a) {
    for (int s = 0; s < 2; ++s) {
      ops::call(OpId::ApplyMomentum, {p1, a1, a[0] * 1.0}, at);
      ops::call(OpId::ApplyMomentum, {p2, a2, a[1] * 1.0}, at);
    }
    return std::vector<Tensor>{p1 + 0.0, p2 + 0.0};
  };
  Tensor g1 = ones({4}), g2 = ones({6});
  auto g = graph::trace(fn, {g1, g2});
  // Step 1: p1 then p2; step 2: p1 then p2. The first p1 update cannot pass the second p1 update.
  EXPECT_EQ(graph::fuse_optimizer(*g), 4u);
  EXPECT_EQ(g->count(OpId::ApplyMomentum), 0u);
  EXPECT_EQ(g->count(OpId::FusedApplyMomentum), 2u);  // one per step, in order
  graph::verify(*g);
  graph::Executor ex(std::shared_ptr<Graph>(std::move(g)));
  auto out = ex.run({g1, g2});
  // acc: 1, then 1.5; p: 1 - 0.1 - 0.15 = 0.75 for both.
  for (float v : out[0].to_vector<float>()) EXPECT_FLOAT_EQ(v, 0.75f);
  for (float v : out[1].to_vector<float>()) EXPECT_FLOAT_EQ(v, 0.75f);
}
