// oneDNN post-op fusion (fuse_conv_matmul) and BatchNorm folding (fold_batchnorm): node counts
// before and after, and the fused graph computing what the unfused one does (both run by the
// executor); a LeNet-5 training run with and without the passes; compiled evaluation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "backends/cpu/ops/ops.h"
#include "backends/cpu/passes/passes.h"
#include "graph/executor.h"
#include "graph/passes.h"
#include "graph/trace.h"
#include "models/lenet.h"
#include "models/resnet.h"
#include "spore/jit.h"
#include "spore/spore.h"

#include "graph/graph_test_util.h"

using namespace spore;
using graph::Graph;
using ops::OpId;

namespace {

constexpr auto run = test::run_graph;

using test::expect_close;

Conv2dOptions pad1() { return {.padding = {1, 1, 1, 1}}; }

struct NoFusion : test::ScopedEnv {  // SPORE_NO_DNNL_FUSION=1 for a scope
  NoFusion() : ScopedEnv("SPORE_NO_DNNL_FUSION", "1") {}
};

}  // namespace

TEST(DnnlFusion, ConvBiasRelu) {
  set_seed(0);
  Tensor x = randn({2, 3, 8, 8}), w = randn({4, 3, 3, 3}) * 0.3, b = randn({4});
  auto g = graph::trace(
      [&](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{relu(conv2d(a[0], w, b, pad1()))};
      },
      {x});
  EXPECT_EQ(g->num_nodes(), 2u);  // conv2d (bias inside), relu
  auto ref = g->clone();
  EXPECT_EQ(cpu::fuse_conv_matmul(*g), 1u);
  graph::verify(*g);
  EXPECT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(g->count(cpu::op::Conv2dFused()), 1u);
  const auto got = run(std::move(g), {x}), want = run(std::move(ref), {x});
  expect_close(got, want);
  // And against PyNative.
  expect_close(got, relu(conv2d(x, w, b, pad1())).to_vector<float>());
}

TEST(DnnlFusion, ConvBroadcastBiasAddAndResidualRelu) {
  // conv2d(x, w) + bias (C, 1, 1) + residual -> relu: one node (plus the bias reshape view). The
  // residual is computed after the conv in trace order.
  set_seed(1);
  Tensor x = randn({2, 4, 6, 6}), r = randn({2, 4, 6, 6}), w = randn({4, 4, 3, 3}) * 0.2,
         b = randn({4, 1, 1});
  auto g = graph::trace(
      [&](const std::vector<Tensor>& a) {
        Tensor y = conv2d(a[0], w, pad1()) + b;
        Tensor res = exp(a[1] * 0.5);
        return std::vector<Tensor>{relu(y + res)};
      },
      {x, r});
  EXPECT_EQ(g->count(OpId::Add), 2u);
  auto ref = g->clone();
  EXPECT_EQ(cpu::fuse_conv_matmul(*g), 1u);
  graph::verify(*g);
  EXPECT_EQ(g->count(cpu::op::Conv2dFused()), 1u);
  EXPECT_EQ(g->count(OpId::Add), 0u);
  EXPECT_EQ(g->count(OpId::Relu), 0u);
  EXPECT_EQ(g->count(OpId::Conv2d), 0u);
  expect_close(run(std::move(g), {x, r}), run(std::move(ref), {x, r}));
}

TEST(DnnlFusion, MatmulBiasReluLikeDense) {
  set_seed(2);
  Tensor x = randn({5, 12}), w = randn({7, 12}) * 0.3, b = randn({7});
  auto g = graph::trace(
      [&](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{relu(matmul(a[0], w.t()) + b)};
      },
      {x});
  EXPECT_EQ(g->count(OpId::Matmul), 1u);
  auto ref = g->clone();
  const size_t before = g->num_nodes();
  EXPECT_EQ(cpu::fuse_conv_matmul(*g), 1u);
  graph::verify(*g);
  EXPECT_EQ(g->num_nodes(), before - 2);  // matmul, add, relu -> matmul_fused
  EXPECT_EQ(g->count(cpu::op::MatmulFused()), 1u);
  expect_close(run(std::move(g), {x}), run(std::move(ref), {x}));
}

TEST(DnnlFusion, EveryActivationAndResidualMatmul) {
  set_seed(3);
  Tensor x = randn({6, 10}), w = randn({10, 9}) * 0.4, b = randn({9}), r = randn({6, 9});
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> acts = {
      {"relu", [](const Tensor& t) { return relu(t); }},
      {"leaky_relu", [](const Tensor& t) { return leaky_relu(t, 0.2); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }},
      {"gelu", [](const Tensor& t) { return gelu(t, false); }},
      {"gelu_tanh", [](const Tensor& t) { return gelu(t, true); }},
      {"silu", [](const Tensor& t) { return silu(t); }},
      {"clamp", [](const Tensor& t) { return clamp(t, -0.5, 0.75); }},
  };
  for (const auto& [name, act] : acts) {
    SCOPED_TRACE(name);
    auto g = graph::trace(
        [&](const std::vector<Tensor>& a) {
          return std::vector<Tensor>{act(matmul(a[0], w) + b + a[1])};
        },
        {x, r});
    auto ref = g->clone();
    EXPECT_EQ(cpu::fuse_conv_matmul(*g), 1u);
    graph::verify(*g);
    ASSERT_EQ(g->num_nodes(), 1u);
    EXPECT_EQ(g->nodes[0]->attrs.get_string("act"), name);
    EXPECT_TRUE(g->nodes[0]->attrs.get_bool("has_residual"));
    expect_close(run(std::move(g), {x, r}), run(std::move(ref), {x, r}), 2e-5);
  }
}

TEST(DnnlFusion, LeavesIntermediatesOthersRead) {
  Tensor x = randn({2, 3, 6, 6}), w = randn({4, 3, 3, 3});
  // The conv output is also a graph output: nothing fuses.
  auto g = graph::trace(
      [&](const std::vector<Tensor>& a) {
        Tensor y = conv2d(a[0], w, pad1());
        return std::vector<Tensor>{relu(y), y};
      },
      {x});
  EXPECT_EQ(cpu::fuse_conv_matmul(*g), 0u);
  EXPECT_EQ(g->count(OpId::Conv2d), 1u);
  // Training: leaky_relu's gradient reads its input, so conv + leaky_relu stays two nodes; relu's
  // reads its input too, but relu_grad is pointed at the output, and conv + relu fuses.
  Tensor wl = randn({4, 3, 3, 3}), wr = randn({4, 3, 3, 3});
  wl.set_requires_grad(true);
  wr.set_requires_grad(true);
  auto t = graph::trace(
      [&](const std::vector<Tensor>& a) {
        EnableGradGuard eg;
        Tensor l =
            (leaky_relu(conv2d(a[0], wl, pad1()), 0.1) * relu(conv2d(a[0], wr, pad1()))).sum();
        auto gr = autograd::grad(l, {wl, wr});
        return std::vector<Tensor>{l, gr[0], gr[1]};
      },
      {x});
  graph::dead_code_elimination(*t);
  auto ref = t->clone();
  EXPECT_EQ(cpu::fuse_conv_matmul(*t), 1u);
  graph::verify(*t);
  EXPECT_EQ(t->count(cpu::op::Conv2dFused()), 1u);
  EXPECT_EQ(t->count(OpId::Conv2d), 1u);
  EXPECT_EQ(t->count(OpId::LeakyRelu), 1u);
  EXPECT_EQ(t->count(OpId::Relu), 0u);
  graph::Executor a(std::shared_ptr<Graph>(std::move(ref))),
      b(std::shared_ptr<Graph>(std::move(t)));
  auto ra = a.run({x}), rb = b.run({x});
  for (size_t i = 0; i < ra.size(); ++i)
    expect_close(rb[i].to_vector<float>(), ra[i].to_vector<float>());
}

// An eval-mode ResNet basic block written with the functional ops: conv-bn-relu, conv-bn, + x,
// relu.
TEST(DnnlFusion, BatchNormFoldingResNetBlock) {
  set_seed(4);
  const int64_t C = 8;
  Tensor x = randn({2, C, 8, 8});
  auto stats = [&] {
    return std::vector<Tensor>{uniform({C}, 0.5, 1.5), randn({C}) * 0.1, randn({C}) * 0.2,
                               uniform({C}, 0.5, 2.0)};  // gamma, beta, mean, var
  };
  Tensor w1 = randn({C, C, 3, 3}) * 0.1, w2 = randn({C, C, 3, 3}) * 0.1;
  auto s1 = stats(), s2 = stats();
  auto block = [&](const std::vector<Tensor>& a) {
    Tensor y = relu(batch_norm_infer(conv2d(a[0], w1, pad1()), s1[0], s1[1], s1[2], s1[3], 1e-5));
    y = batch_norm_infer(conv2d(y, w2, pad1()), s2[0], s2[1], s2[2], s2[3], 1e-5);
    return std::vector<Tensor>{relu(y + a[0])};
  };
  auto g = graph::trace(block, {x});
  EXPECT_EQ(g->count(OpId::BatchNormInference), 2u);
  auto ref = g->clone();
  EXPECT_EQ(cpu::fold_batchnorm(*g), 2u);
  graph::verify(*g);
  EXPECT_EQ(g->count(OpId::BatchNormInference), 0u);
  EXPECT_EQ(g->count(OpId::Conv2d), 0u);
  EXPECT_EQ(g->count(cpu::op::Conv2dFused()), 2u);  // conv * scale + shift
  EXPECT_EQ(g->count(OpId::Relu), 2u);
  auto folded = g->clone();
  EXPECT_EQ(cpu::fuse_conv_matmul(*g), 2u);  // + relu; + residual + relu
  graph::dead_code_elimination(*g);
  graph::verify(*g);
  EXPECT_EQ(g->count(cpu::op::Conv2dFused()), 2u);
  EXPECT_EQ(g->count(OpId::Conv2d), 0u);
  EXPECT_EQ(g->count(OpId::Relu), 0u);
  EXPECT_EQ(g->count(OpId::Add), 4u);  // var + eps and beta + shift in each folding
  const auto want = run(std::move(ref), {x});
  expect_close(run(std::move(folded), {x}), want, 1e-4);
  expect_close(run(std::move(g), {x}), want, 1e-4);
  expect_close(block({x})[0].to_vector<float>(), want, 1e-5);  // PyNative = unfused graph
}

TEST(DnnlFusion, BatchNormFoldingWithConstantsFoldsAway) {
  // Parameters nobody else holds are constants: the folding nodes are computed at compile time.
  Tensor x = randn({1, 4, 5, 5});
  auto g = graph::trace(
      [&](const std::vector<Tensor>& a) {
        Tensor w = ones({4, 4, 3, 3}) * 0.1;
        return std::vector<Tensor>{
            relu(batch_norm_infer(conv2d(a[0], w, pad1()), full({4}, 2.0), full({4}, 0.5),
                                  full({4}, 0.1), full({4}, 4.0), 0.0))};
      },
      {x});
  graph::run_pipeline(*g);
  EXPECT_EQ(g->num_nodes(), 1u);  // conv2d_fused(x, w, scale, shift) with relu
  EXPECT_EQ(g->count(cpu::op::Conv2dFused()), 1u);
  // Reference by hand: each output = relu((0.1 * window sum - 0.1) * 2 / 2 + 0.5).
  Tensor s = conv2d(x, ones({4, 4, 3, 3}) * 0.1, pad1());
  expect_close(run(std::move(g), {x}), relu((s - 0.1) + 0.5).to_vector<float>(), 1e-5);
}

TEST(DnnlFusion, LeNetTrainingLossesEqualWithAndWithoutFusion) {
  auto losses = [](bool fuse) {
    std::unique_ptr<NoFusion> off;
    if (!fuse) off = std::make_unique<NoFusion>();
    set_seed(0);
    auto net = std::make_shared<models::LeNet5>();
    auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
        nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
    auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9);
    train::TrainOneStepCell step(std::make_shared<train::WithLossCell>(net, loss), opt);
    set_seed(1);
    std::vector<Tensor> xs, ys;
    for (int i = 0; i < 3; ++i) {
      xs.push_back(randn({16, 1, 28, 28}));
      ys.push_back(randint(0, 10, {16}, kInt32));
    }
    set_context({.mode = Mode::Graph});
    std::vector<double> out;
    for (int s = 0; s < 8; ++s)
      out.push_back(step(xs[size_t(s % 3)], ys[size_t(s % 3)]).item<double>());
    set_context({.mode = Mode::PyNative});
    return out;
  };
  const auto fused = losses(true), plain = losses(false);
  for (size_t i = 0; i < fused.size(); ++i)
    EXPECT_NEAR(fused[i], plain[i], 1e-5 * std::abs(plain[i])) << "step " << i;
}

TEST(DnnlFusion, LeNetTrainingGraphFusesConvsAndDenses) {
  set_seed(0);
  models::LeNet5 net;
  auto params = net.trainable_params();
  Tensor x = randn({4, 1, 28, 28});
  Tensor y = randint(0, 10, {4}, kInt32);
  nn::SoftmaxCrossEntropyWithLogits ce({.sparse = true, .reduction = "mean"});
  auto g = graph::trace(
      [&](const std::vector<Tensor>& a) {
        EnableGradGuard eg;
        Tensor l = ce(net(a[0]), a[1]);
        std::vector<Tensor> out{l};
        for (Tensor& t : autograd::grad(l, params)) out.push_back(t);
        return out;
      },
      {x, y});
  graph::run_pipeline(*g);
  // conv1+relu, conv2+relu (the backward reads their outputs), fc1/fc2 + bias + relu, fc3 + bias;
  // conv1 + relu then goes on with its max pool into one conv2d_pool_fused (conv_pool_fusion).
  EXPECT_EQ(g->count(cpu::op::Conv2dFused()), 1u);
  EXPECT_EQ(g->count(cpu::op::Conv2dPoolFused()), 1u);
  EXPECT_EQ(g->count(cpu::op::MatmulFused()), 3u);
  EXPECT_EQ(g->count(OpId::Relu), 0u);
  EXPECT_EQ(g->count(OpId::ReluGrad), 4u);
}

TEST(DnnlFusion, CompiledEvalAndPredictMatchEager) {
  set_seed(5);
  auto net = models::resnet18(10, models::ResNetStem::Cifar);
  // Give the moving statistics values so the folding matters.
  for (auto& [name, b] : net->named_buffers())
    if (name.find("moving_variance") != std::string::npos)
      assign(b, uniform(b.shape(), 0.5, 2.0));
    else if (name.find("moving_mean") != std::string::npos)
      assign(b, randn(b.shape()) * 0.1);
  train::Model model(net, nullptr, nullptr);
  Tensor x = randn({3, 3, 32, 32});
  const auto eager = model.predict(x).to_vector<float>();
  set_context({.mode = Mode::Graph});
  const auto graph1 = model.predict(x).to_vector<float>();
  const auto graph2 = model.predict(x).to_vector<float>();  // cached
  const auto other = model.predict(randn({1, 3, 32, 32}));  // a second signature
  set_context({.mode = Mode::PyNative});
  EXPECT_EQ(other.shape(), (Shape{1, 10}));
  expect_close(graph1, eager, 1e-4);
  expect_close(graph2, graph1, 0);
}
