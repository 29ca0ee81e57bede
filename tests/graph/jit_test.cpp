// jit() and Graph mode end to end: the host-read error, the signature cache (hit and retrace),
// and PyNative vs Graph equality of whole training steps (MLP, LeNet-5, BatchNorm state).
#include "spore/jit.h"

#include <gtest/gtest.h>

#include <cmath>

#include "models/lenet.h"
#include "models/recipe.h"
#include "models/resnet.h"
#include "spore/spore.h"

using namespace spore;

namespace {

struct PyNativeAfter {
  ~PyNativeAfter() { set_context({.mode = Mode::PyNative}); }
};

double rel_diff(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-12); }

// Losses of `steps` TrainOneStepCell steps from seed 0, in the given mode; params_out gets the
// final parameters.
template <typename MakeNet>
std::vector<double> train_losses(Mode mode, int steps, const Shape& x_shape, MakeNet make_net,
                                 std::vector<std::vector<float>>* params_out = nullptr) {
  set_seed(0);
  nn::CellPtr net = make_net();
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9);
  train::TrainOneStepCell step(std::make_shared<train::WithLossCell>(net, loss), opt);
  set_seed(1);
  std::vector<Tensor> xs, ys;
  for (int i = 0; i < 3; ++i) {  // a few batches, cycled
    xs.push_back(randn(x_shape));
    ys.push_back(randint(0, 10, {x_shape[0]}, kInt32));
  }
  PyNativeAfter restore;
  set_context({.mode = mode});
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s)
    losses.push_back(step(xs[size_t(s % 3)], ys[size_t(s % 3)]).item<double>());
  if (params_out)
    for (const Tensor& p : net->trainable_params()) params_out->push_back(p.to_vector<float>());
  return losses;
}

}  // namespace

TEST(Jit, HostReadIsAClearError) {
  auto f = jit([](const std::vector<Tensor>& a) {
    if (a[0].sum().item<float>() > 0) return std::vector<Tensor>{a[0]};  // data-dependent
    return std::vector<Tensor>{-a[0]};
  });
  try {
    f({ones({3})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic tensor while tracing"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("Compute with ops instead"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(is_tracing());  // the tracer was removed on the error
}

TEST(Jit, MatchesEagerAndCachesBySignature) {
  Tensor w = randn({5, 3}), b = randn({3});
  auto fn = [&](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{relu(matmul(a[0], w) + b).sum({1})};
  };
  JitOptions jo;
  jo.name = "mlp_layer";
  auto f = jit(fn, jo);
  Tensor x = randn({4, 5});
  auto want = fn({x})[0].to_vector<float>();
  auto got = f({x})[0].to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]);
  EXPECT_EQ(f.stats().traces, 1);
  f({randn({4, 5})});  // same signature: cached
  EXPECT_EQ(f.stats().traces, 1);
  EXPECT_EQ(f.stats().cache_hits, 1);
  // Parameters are read when the graph runs, not frozen at trace time.
  assign(w, zeros({5, 3}));
  auto zb = relu(b).sum().item<float>();
  EXPECT_FLOAT_EQ(f({x})[0].to_vector<float>()[0], zb);
  EXPECT_EQ(f.stats().traces, 1);
  f({randn({7, 5})});  // new shape: retraced
  EXPECT_EQ(f.stats().traces, 2);
  EXPECT_EQ(f.stats().cache_size, 2u);
  EXPECT_FALSE(f.graph_text().empty());
}

TEST(Jit, GradientsMatchEager) {
  Tensor w = randn({6, 4}).set_requires_grad(true);
  auto fn = [&](const std::vector<Tensor>& a) {
    EnableGradGuard eg;
    Tensor l = (tanh(matmul(a[0], w)) * a[0].sum({1}, true)).mean();
    return autograd::grad(l, {w});
  };
  Tensor x = randn({3, 6});
  auto want = fn({x})[0].to_vector<float>();
  auto f = jit(fn);
  auto got = f({x})[0].to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6f * (1 + std::abs(want[i])));
  // The traced backward was pruned (conv/matmul gradients nobody asked for): fewer nodes.
  EXPECT_LT(f.stats().nodes, f.stats().nodes_traced);
}

TEST(GraphMode, MlpTrainingMatchesPyNative) {
  auto make = [] {
    return std::make_shared<nn::SequentialCell>(
        std::vector<nn::CellPtr>{std::make_shared<nn::Dense>(8, 16), std::make_shared<nn::ReLU>(),
                                 std::make_shared<nn::Dense>(16, 10)});
  };
  std::vector<std::vector<float>> pe, pg;
  auto eager = train_losses(Mode::PyNative, 6, {5, 8}, make, &pe);
  auto graph = train_losses(Mode::Graph, 6, {5, 8}, make, &pg);
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_LE(rel_diff(graph[i], eager[i]), 1e-5) << "step " << i;
  ASSERT_EQ(pe.size(), pg.size());
  for (size_t p = 0; p < pe.size(); ++p)
    for (size_t i = 0; i < pe[p].size(); ++i)
      EXPECT_NEAR(pg[p][i], pe[p][i], 1e-5f) << p << "/" << i;
}

TEST(GraphMode, LeNetLossCurveMatchesPyNative20Steps) {
  auto make = [] { return std::make_shared<models::LeNet5>(); };
  auto eager = train_losses(Mode::PyNative, 20, {16, 1, 28, 28}, make);
  auto graph = train_losses(Mode::Graph, 20, {16, 1, 28, 28}, make);
  double worst = 0;
  for (size_t i = 0; i < eager.size(); ++i) worst = std::max(worst, rel_diff(graph[i], eager[i]));
  EXPECT_LE(worst, 1e-5);
  RecordProperty("max_rel_diff", std::to_string(worst));
  std::printf("LeNet-5 20 steps: max relative loss difference graph vs pynative = %.3g\n", worst);
}

TEST(GraphMode, BatchNormStatisticsUpdateLikePyNative) {
  auto make_net = [] {
    return std::make_shared<nn::SequentialCell>(std::vector<nn::CellPtr>{
        std::make_shared<nn::Conv2d>(3, 4, 3), std::make_shared<nn::BatchNorm2d>(4),
        std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Dense>(4 * 8 * 8, 10)});
  };
  auto run_mode = [&](Mode mode) {
    set_seed(0);
    auto net = make_net();
    auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
        nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
    train::TrainOneStepCell step(
        std::make_shared<train::WithLossCell>(net, loss),
        std::make_shared<optim::Momentum>(net->trainable_params(), 0.05, 0.9));
    set_seed(3);
    Tensor x = randn({4, 3, 8, 8});
    Tensor y = randint(0, 10, {4}, kInt32);
    PyNativeAfter restore;
    set_context({.mode = mode});
    std::vector<double> out;
    for (int i = 0; i < 4; ++i) out.push_back(step(x, y).item<double>());
    for (auto& [name, b] : net->named_buffers())
      for (float v : b.to(kFloat32).to_vector<float>()) out.push_back(v);
    return out;
  };
  auto e = run_mode(Mode::PyNative), g = run_mode(Mode::Graph);
  ASSERT_EQ(e.size(), g.size());
  ASSERT_GT(e.size(), 4u);  // the moving statistics are there
  for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(g[i], e[i], 1e-5 * (1 + std::abs(e[i]))) << i;
}

TEST(GraphMode, ResNet18CifarLossCurveMatchesPyNative20Steps) {
  auto make = [] { return models::resnet18(10, models::ResNetStem::Cifar); };
  auto eager = train_losses(Mode::PyNative, 20, {4, 3, 32, 32}, make);
  auto graph = train_losses(Mode::Graph, 20, {4, 3, 32, 32}, make);
  double worst = 0;
  for (size_t i = 0; i < eager.size(); ++i) worst = std::max(worst, rel_diff(graph[i], eager[i]));
  EXPECT_LE(worst, 1e-5);
  std::printf("ResNet-18 (CIFAR, batch 4) 20 steps: max relative loss difference = %.3g\n", worst);
}

TEST(Jit, CompiledStepAllocatesOnlyItsOutputs) {
  Tensor w = randn({16, 8});
  auto f = jit([&](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{(exp(a[0] * 0.5) + 1.0).sum({1}) * 2.0, relu(a[0]).mean()};
  });
  Tensor x = randn({32, 16});
  f({x});  // compile
  const uint64_t before = cpu_allocator().stats().num_allocs;
  for (int i = 0; i < 5; ++i) f({x});
  // Only the two outputs copied out of the arena, per call.
  EXPECT_EQ(cpu_allocator().stats().num_allocs - before, 5u * 2u);
}

TEST(GraphMode, LeNetStepAllocations) {
  set_seed(0);
  auto net = std::make_shared<models::LeNet5>();
  auto step_ptr = models::momentum_train_step(net);
  train::TrainOneStepCell& step = *step_ptr;
  Tensor x = randn({8, 1, 28, 28}), y = randint(0, 10, {8}, kInt32);
  PyNativeAfter restore;
  step(x, y);
  uint64_t a0 = cpu_allocator().stats().num_allocs;
  step(x, y);
  const uint64_t eager = cpu_allocator().stats().num_allocs - a0;
  set_context({.mode = Mode::Graph});
  step(x, y);
  a0 = cpu_allocator().stats().num_allocs;
  step(x, y);
  const uint64_t graph = cpu_allocator().stats().num_allocs - a0;
  std::printf("LeNet-5 step allocations: PyNative %llu, Graph %llu\n", (unsigned long long)eager,
              (unsigned long long)graph);
  EXPECT_LT(graph, eager);
}

TEST(Jit, InPlaceUpdateOfAnArgumentIsAClearError) {
  auto f = jit([](const std::vector<Tensor>& a) {
    assign(a[0], zeros({3}));
    return std::vector<Tensor>{a[0] + 1.0};
  });
  try {
    f({ones({3})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("updates argument 0"), std::string::npos) << e.what();
  }
}

TEST(GraphMode, RetracesWhenTheTrainFlagChanges) {
  set_seed(0);
  auto net = std::make_shared<nn::SequentialCell>(std::vector<nn::CellPtr>{
      std::make_shared<nn::Dense>(4, 8), std::make_shared<nn::BatchNorm1d>(8),
      std::make_shared<nn::Dense>(8, 3)});
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9);
  train::TrainOneStepCell step(std::make_shared<train::WithLossCell>(net, loss), opt);
  Tensor x = randn({6, 4}), y = randint(0, 3, {6}, kInt32);
  PyNativeAfter restore;
  set_context({.mode = Mode::Graph});
  step(x, y);
  step(x, y);
  EXPECT_EQ(opt->global_step(), 2);  // advanced by cached runs too
  auto before = net->named_buffers().at(0).second.to_vector<float>();
  net->set_train(false);  // BatchNorm now uses (and no longer updates) its moving statistics
  step(x, y);
  auto after = net->named_buffers().at(0).second.to_vector<float>();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(before[i], after[i]);
  EXPECT_EQ(opt->global_step(), 3);
}
