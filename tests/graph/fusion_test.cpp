// The fusion passes (elementwise fusion, softmax + cross-entropy fusion): node counts before and
// after, and the fused graph computing what the unfused one does (both run by the executor):
// hand-written graphs, seeded random elementwise DAGs over broadcast inputs, and whole LeNet-5
// training steps.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "graph/executor.h"
#include "graph/memory_plan.h"
#include "graph/passes.h"
#include "graph/trace.h"
#include "models/lenet.h"
#include "models/recipe.h"
#include "ops/fused_program.h"
#include "spore/spore.h"

#include "graph/graph_test_util.h"

using namespace spore;
using graph::Graph;
using ops::OpId;

namespace {

using test::run_graph_all;
constexpr auto run_all = run_graph_all;
constexpr auto run = test::run_graph;

// |got - want| <= tol * (1 + |want|) elementwise.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                  const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i;
      continue;
    }
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " element " << i;
  }
}

// The simplification loop of the pipeline (what the graph looks like when fusion starts).
void simplify(Graph& g) {
  for (int round = 0; round < 4; ++round) {
    size_t c = graph::dead_code_elimination(g) + graph::common_subexpression_elimination(g) +
               graph::constant_folding(g) + graph::algebraic_simplification(g);
    if (c == 0) break;
  }
}

}  // namespace

// ---- elementwise fusion ----------------------------------------------------------------------

TEST(ElementwiseFusion, ChainBecomesOneNode) {
  Tensor x = randn({7, 33}), y = randn({7, 33});
  auto g = graph::trace(
      [](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{relu(a[0] * a[1] + 1.0) * sigmoid(a[0]) - tanh(a[1])};
      },
      {x, y});
  auto ref = g->clone();
  EXPECT_EQ(g->num_nodes(), 7u);  // mul add relu sigmoid mul tanh sub
  EXPECT_EQ(graph::fuse_elementwise(*g), 1u);
  graph::verify(*g);
  EXPECT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(g->count(OpId::FusedElementwise), 1u);
  // Hand-computed reference as well as the unfused graph.
  auto xv = x.to_vector<float>(), yv = y.to_vector<float>();
  auto got = run(std::move(g), {x, y});
  auto want = run(std::move(ref), {x, y});
  expect_close(got, want, 1e-6);
  for (size_t i = 0; i < xv.size(); ++i) {
    const double r = std::max(0.0, double(xv[i]) * yv[i] + 1) / (1 + std::exp(-double(xv[i]))) -
                     std::tanh(double(yv[i]));
    EXPECT_NEAR(got[i], r, 1e-5 * (1 + std::abs(r)));
  }
}

TEST(ElementwiseFusion, PerChannelAndScalarBroadcasts) {
  Tensor x = randn({4, 3, 5, 6});
  Tensor scale = randn({3, 1, 1}), bias = randn({1, 3, 1, 1}), s = full({}, 0.25);
  auto g = graph::trace(
      [&](const std::vector<Tensor>& a) {
        // scale, bias: captures read broadcast; s a 0-d argument; the transposed x a strided read
        Tensor t = a[0].transpose(2, 3);  // (4, 3, 6, 5) strided
        Tensor y = relu(t * scale + bias) * a[1] - t / 2.0;
        return std::vector<Tensor>{leaky_relu(y, 0.1)};
      },
      {x, s});
  auto ref = g->clone();
  EXPECT_EQ(graph::fuse_elementwise(*g), 1u);
  graph::verify(*g);
  EXPECT_EQ(g->count(OpId::FusedElementwise), 1u);
  EXPECT_EQ(g->count(OpId::Mul), 0u);
  EXPECT_EQ(g->num_nodes(), 2u);  // the transpose view + the fused node
  expect_close(run(std::move(g), {x, s}), run(std::move(ref), {x, s}), 1e-6);
}

TEST(ElementwiseFusion, SharedIntermediatesAndSmallerProducersStayOutside) {
  Tensor x = randn({6, 8}), c = randn({8});
  auto g = graph::trace(
      [&](const std::vector<Tensor>& a) {
        Tensor e = exp(a[0] * 0.5);  // read by two groups (and an output): kept
        Tensor sc = sigmoid(a[1]);   // (8,): smaller than the groups' shape: not recomputed per row
        return std::vector<Tensor>{(e + 1.0) * sc, relu(e - 2.0) * 3.0, e};
      },
      {x, c});
  auto ref = g->clone();
  EXPECT_EQ(graph::fuse_elementwise(*g), 3u);  // exp(x*0.5); (e+1)*sc; relu(e-2)*3
  graph::verify(*g);
  EXPECT_EQ(g->count(OpId::Sigmoid), 1u);
  EXPECT_EQ(g->count(OpId::FusedElementwise), 3u);
  EXPECT_EQ(g->num_nodes(), 4u);
  auto got = run_all(std::move(g), {x, c}), want = run_all(std::move(ref), {x, c});
  for (size_t k = 0; k < 3; ++k) expect_close(got[k], want[k], 1e-6, "output " + std::to_string(k));
}

TEST(ElementwiseFusion, MasksAndWhereFuseWithBoolIntermediates) {
  Tensor x = randn({5, 9}), gy = randn({5, 9});
  auto g = graph::trace(
      [](const std::vector<Tensor>& a) {
        // leaky_relu's and clamp's gradient shapes: comparisons -> where / bool -> float
        Tensor m = greater(a[0], scalar_tensor(0.0, kFloat32));
        Tensor y = where(m, a[1], a[1] * 0.2);
        Tensor k = logical_and(less(a[0], scalar_tensor(1.0, kFloat32)), logical_not(m));
        return std::vector<Tensor>{y + k.to(kFloat32) * clamp(a[0], -0.5, 0.5)};
      },
      {x, gy});
  auto ref = g->clone();
  EXPECT_EQ(graph::fuse_elementwise(*g), 1u);
  graph::verify(*g);
  EXPECT_EQ(g->num_nodes(), 1u);
  expect_close(run(std::move(g), {x, gy}), run(std::move(ref), {x, gy}), 1e-6);
}

TEST(ElementwiseFusion, NeverMovesAReadAcrossAnEffectThatChangesIt) {
  Tensor p = full({4}, 3.0);
  auto g = graph::trace(
      [&](const std::vector<Tensor>& a) {
        Tensor before = p * 2.0;  // must run before the assign
        assign(p, a[0]);
        return std::vector<Tensor>{before + a[0] * 1.5};
      },
      {full({4}, 5.0)});
  graph::fuse_elementwise(*g);
  graph::verify(*g);
  EXPECT_EQ(g->count(OpId::Mul), 1u);  // p * 2 stayed in front of the assign
  EXPECT_EQ(g->count(OpId::FusedElementwise), 1u);
  auto out = run(std::move(g), {full({4}, 5.0)});
  EXPECT_FLOAT_EQ(out[0], 2 * 3.0f + 1.5f * 5.0f);
}

TEST(ElementwiseFusion, Float64AndHalfPrecision) {
  for (DType dt : {kFloat64, kFloat16, kBFloat16}) {
    Tensor x = randn({3, 70}).to(dt), b = randn({70}).to(dt);
    auto g = graph::trace(
        [&](const std::vector<Tensor>& a) {
          return std::vector<Tensor>{sigmoid(a[0] * a[1] + 0.5) - exp(tanh(a[0]))};
        },
        {x, b});
    auto ref = g->clone();
    EXPECT_EQ(graph::fuse_elementwise(*g), 1u);
    graph::verify(*g);
    // float16/bfloat16: computed in float32 without rounding between ops, so within a few ulps
    // of the unfused (rounded per op) result.
    const double tol = dt == kFloat64 ? 1e-12 : dt == kFloat16 ? 4e-3 : 3e-2;
    expect_close(run(std::move(g), {x, b}), run(std::move(ref), {x, b}), tol, dtype_name(dt));
  }
}

TEST(ElementwiseFusion, OutputMayReuseADyingInputsBuffer) {
  // kElementwise on fused_elementwise: the planner lets its output take the buffer of the matmul
  // result that dies there; the kernel reads each block before writing it.
  Tensor x = randn({64, 64});
  auto g = graph::trace(
      [](const std::vector<Tensor>& a) {
        Tensor m = matmul(a[0], a[0]);
        return std::vector<Tensor>{relu(m + 1.0) * 2.0 - sigmoid(m)};
      },
      {x});
  auto ref = g->clone();
  EXPECT_EQ(graph::fuse_elementwise(*g), 1u);
  EXPECT_EQ(graph::plan_memory(*g).inplace, 1u);
  expect_close(run(std::move(g), {x}), run(std::move(ref), {x}), 1e-6);
}

TEST(FusedOps, ErrorsSayWhatWasExpected) {
  // A label outside [0, C) is an IndexError naming it (checked before any thread starts).
  try {
    ops::call(OpId::SoftmaxCrossEntropyFused,
              {randn({3, 4}), from_vector<int64_t>({0, 4, 1}, {3})});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::IndexError);
    EXPECT_NE(std::string(e.what()).find("label 4 of row 1"), std::string::npos) << e.what();
  }
  // A program reading a value it has not defined yet.
  ops::Attrs a;
  a.set("program", std::vector<int64_t>{int64_t(ops::fused::Opcode::kExp), 3, -1, -1})
      .set("consts", std::vector<int64_t>{})
      .set("shape", Shape{2})
      .set("dtype", kFloat32);
  try {
    ops::call(OpId::FusedElementwise, {randn({2})}, a);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reads value 3"), std::string::npos) << e.what();
  }
}

// Seeded random DAGs of 5-20 unary / binary / where ops over inputs of random broadcastable
// shapes (same shape, per-axis broadcasts, scalars, transposed views): fused == unfused.
TEST(ElementwiseFusion, RandomGraphsFusedEqualUnfused) {
  size_t total_fused = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    std::mt19937_64 rng(seed);
    auto pick = [&](int n) { return int(rng() % uint64_t(n)); };
    // Output shape: rank 1-4, some dims large enough for several blocks.
    const int rank = 1 + pick(4);
    Shape shape;
    for (int d = 0; d < rank; ++d) shape.push_back(pick(4) == 0 ? 20 + pick(120) : 1 + pick(6));
    if (seed % 3 == 0)  // NCHW-like: per-channel inputs then broadcast over runs of H * W >= 256
      shape = {1 + pick(3), 1 + pick(8), 16 + pick(17), pick(2) ? 16 : 32};
    const int n_inputs = 2 + pick(4);
    std::vector<Tensor> args;
    std::vector<bool> transposed;
    set_seed(1000 + seed);
    for (int i = 0; i < n_inputs; ++i) {
      Shape s = shape;
      const int kind = i == 0 ? 0 : pick(4);
      if (kind == 1)
        for (auto& e : s) e = pick(2) ? e : 1;  // per-axis broadcast
      if (kind == 2)
        s.erase(s.begin(), s.begin() + pick(int(s.size()) + 1));  // leading dims dropped
      if (kind == 3) s = {};                                      // scalar
      if (seed % 3 == 0 && i == 1) s = {shape[1], 1, 1};          // per-channel
      const bool tr = s.size() >= 2 && pick(3) == 0;
      if (tr) std::swap(s[s.size() - 1], s[s.size() - 2]);  // passed transposed back
      args.push_back(uniform(s, -2, 2));
      transposed.push_back(tr);
    }
    std::vector<int> script;
    const int n_ops = 5 + pick(16);
    for (int i = 0; i < 3 * n_ops; ++i) script.push_back(int(rng() % 1000003));
    auto fn = [&](const std::vector<Tensor>& a) {
      std::vector<Tensor> pool;
      for (size_t i = 0; i < a.size(); ++i)
        pool.push_back(transposed[i] ? a[i].transpose(-1, -2) : a[i]);
      for (int i = 0; i < n_ops; ++i) {
        const Tensor& p = pool[size_t(script[size_t(3 * i + 1)]) % pool.size()];
        const Tensor& q = pool[size_t(script[size_t(3 * i + 2)]) % pool.size()];
        Tensor r;
        switch (script[size_t(3 * i)] % 16) {
          case 0:
            r = p + q;
            break;
          case 1:
            r = p - q;
            break;
          case 2:
            r = p * q;
            break;
          case 3:
            r = p / (abs(q) + 1.0);
            break;
          case 4:
            r = tanh(p);
            break;
          case 5:
            r = sigmoid(p) * 2.0;
            break;
          case 6:
            r = relu(p - q);
            break;
          case 7:
            r = maximum(p, q);
            break;
          case 8:
            r = minimum(p, q * 0.5);
            break;
          case 9:
            r = where(greater(p, q), p, q * 0.3);
            break;
          case 10:
            r = exp(tanh(p));
            break;
          case 11:
            r = sin(p) + cos(q);
            break;
          case 12:
            r = leaky_relu(p, 0.2);
            break;
          case 13:
            r = clamp(p, -1.0, 1.5);
            break;
          case 14:
            r = neg(abs(p));
            break;
          default:
            r = ops::call1(OpId::ReluGrad, {p, q});
            break;
        }
        pool.push_back(r);
      }
      // The last value and one from the middle (a second output shares intermediates).
      return std::vector<Tensor>{pool.back() + pool[pool.size() - 2],
                                 pool[(pool.size() + a.size()) / 2]};
    };
    auto g = graph::trace(fn, args);
    auto ref = g->clone();
    const size_t made = graph::fuse_elementwise(*g);
    total_fused += made;
    graph::verify(*g);
    auto got = run_all(std::move(g), args), want = run_all(std::move(ref), args);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k)
      expect_close(got[k], want[k], 1e-5,
                   "seed " + std::to_string(seed) + " output " + std::to_string(k));
  }
  EXPECT_GT(total_fused, 40u);  // most graphs have at least one group
  std::printf("random elementwise graphs: %zu fused nodes over 40 graphs\n", total_fused);
}

// ---- softmax + cross-entropy fusion ---------------------------------------------------------

namespace {
// Mean sparse softmax cross-entropy of x @ w + b and its gradients (w, b captured parameters).
std::vector<Tensor> loss_and_grads(const Tensor& x, const Tensor& labels, const Tensor& w,
                                   const Tensor& b, bool backward) {
  nn::SoftmaxCrossEntropyWithLogits ce({.sparse = true, .reduction = "mean"});
  EnableGradGuard eg;
  Tensor l = ce(matmul(x, w) + b, labels);
  if (!backward) return {l};
  auto gr = autograd::grad(l, {w, b});
  return {l, gr[0], gr[1]};
}
}  // namespace

TEST(SoftmaxCrossEntropyFusion, ReplacesForwardAndBackward) {
  Tensor w = (randn({12, 10}) * 0.5).set_requires_grad(true),
         b = randn({10}).set_requires_grad(true);
  Tensor x = randn({16, 12}), y = randint(0, 10, {16}, kInt32);
  auto g = graph::trace(
      [&](const std::vector<Tensor>& a) { return loss_and_grads(a[0], a[1], w, b, true); }, {x, y});
  simplify(*g);
  auto ref = g->clone();
  EXPECT_EQ(g->count(OpId::LogSoftmax), 1u);
  EXPECT_EQ(g->count(OpId::Gather), 1u);
  EXPECT_EQ(g->count(OpId::ScatterAdd), 1u);
  const size_t before = g->num_nodes();
  EXPECT_EQ(graph::fuse_softmax_cross_entropy(*g), 1u);
  graph::constant_folding(*g);
  graph::verify(*g);
  EXPECT_EQ(g->count(OpId::SoftmaxCrossEntropyFused), 1u);
  EXPECT_EQ(g->count(OpId::LogSoftmax), 0u);
  EXPECT_EQ(g->count(OpId::Gather), 0u);
  EXPECT_EQ(g->count(OpId::ScatterAdd), 0u);
  EXPECT_EQ(g->count(OpId::Exp), 0u);
  EXPECT_LT(g->num_nodes(), before);
  auto got = run_all(std::move(g), {x, y}), want = run_all(std::move(ref), {x, y});
  ASSERT_EQ(got.size(), 3u);
  for (size_t k = 0; k < 3; ++k) expect_close(got[k], want[k], 1e-6, "output " + std::to_string(k));
  // And against PyTorch-free arithmetic: the loss by hand.
  auto z = (matmul(x, w.detach()) + b.detach()).to(kFloat64);
  auto zv = z.to_vector<double>();
  auto yv = y.to_vector<int>();
  double loss = 0;
  for (int i = 0; i < 16; ++i) {
    double m = -1e300, s = 0;
    for (int j = 0; j < 10; ++j) m = std::max(m, zv[size_t(i * 10 + j)]);
    for (int j = 0; j < 10; ++j) s += std::exp(zv[size_t(i * 10 + j)] - m);
    loss += m + std::log(s) - zv[size_t(i * 10 + yv[size_t(i)])];
  }
  EXPECT_NEAR(got[0][0], loss / 16, 1e-5);
}

TEST(SoftmaxCrossEntropyFusion, ForwardOnlyAndPerSampleWeights) {
  Tensor w = randn({8, 5}).set_requires_grad(true), b = zeros({5}).set_requires_grad(true);
  Tensor x = randn({6, 8}), y = randint(0, 5, {6}, kInt64), sw = uniform({6}, 0.5, 2.0);
  // Forward only (evaluation): loss from the fused node, no log_softmax left.
  {
    auto g = graph::trace(
        [&](const std::vector<Tensor>& a) { return loss_and_grads(a[0], a[1], w, b, false); },
        {x, y});
    simplify(*g);
    auto ref = g->clone();
    EXPECT_EQ(graph::fuse_softmax_cross_entropy(*g), 1u);
    graph::verify(*g);
    EXPECT_EQ(g->count(OpId::LogSoftmax), 0u);
    expect_close(run(std::move(g), {x, y}), run(std::move(ref), {x, y}), 1e-6);
  }
  // Per-sample weights from an argument: the incoming gradient is not a constant.
  auto fn = [&](const std::vector<Tensor>& a) {
    nn::SoftmaxCrossEntropyWithLogits ce({.sparse = true, .reduction = "none"});
    EnableGradGuard eg;
    Tensor l = (ce(matmul(a[0], w) + b, a[1]) * a[2]).sum();
    auto gr = autograd::grad(l, {w});
    return std::vector<Tensor>{l, gr[0]};
  };
  auto g = graph::trace(fn, {x, y, sw});
  simplify(*g);
  auto ref = g->clone();
  EXPECT_EQ(graph::fuse_softmax_cross_entropy(*g), 1u);
  graph::verify(*g);
  EXPECT_EQ(g->count(OpId::ScatterAdd), 0u);
  auto got = run_all(std::move(g), {x, y, sw}), want = run_all(std::move(ref), {x, y, sw});
  for (size_t k = 0; k < 2; ++k) expect_close(got[k], want[k], 1e-6, "output " + std::to_string(k));
}

// ---- whole training steps ---------------------------------------------------------------------

namespace {
// Losses of `steps` LeNet-5 training steps (Momentum) run from a traced graph with the
// simplification passes, then (when `fuse`) the two fusion passes.
std::vector<float> lenet_losses(bool fuse, int steps, size_t* fused_nodes = nullptr) {
  set_seed(0);
  auto net = std::make_shared<models::LeNet5>();
  auto step_ptr = models::momentum_train_step(net);
  train::TrainOneStepCell& step = *step_ptr;
  set_seed(1);
  std::vector<Tensor> xs, ys;
  for (int i = 0; i < 3; ++i) {
    xs.push_back(randn({32, 1, 28, 28}));
    ys.push_back(randint(0, 10, {32}, kInt32));
  }
  auto g =
      graph::trace([&](const std::vector<Tensor>& a) { return step.forward(a); }, {xs[0], ys[0]});
  simplify(*g);
  if (fuse) {
    EXPECT_EQ(graph::fuse_softmax_cross_entropy(*g), 1u);
    graph::constant_folding(*g);
    const size_t made = graph::fuse_elementwise(*g);
    if (fused_nodes) *fused_nodes = made;
    graph::dead_code_elimination(*g);
    graph::verify(*g);
    EXPECT_EQ(g->count(OpId::LogSoftmax), 0u);
  }
  graph::Executor ex(std::shared_ptr<Graph>(std::move(g)));
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s)
    losses.push_back(ex.run({xs[size_t(s % 3)], ys[size_t(s % 3)]})[0].item<float>());
  return losses;
}
}  // namespace

TEST(FusionTraining, LeNetLossesMatchWithoutFusion) {
  size_t made = 0;
  const auto plain = lenet_losses(false, 8);
  const auto fused = lenet_losses(true, 8, &made);
  EXPECT_GE(made, 1u);
  double worst = 0;
  for (size_t i = 0; i < plain.size(); ++i)
    worst = std::max(worst, std::abs(double(fused[i]) - plain[i]) / std::abs(double(plain[i])));
  std::printf("LeNet-5 8 steps: max relative loss difference fused vs unfused = %.3g\n", worst);
  EXPECT_LE(worst, 1e-6);
  EXPECT_LT(plain.back(), plain.front());  // it trains
}
