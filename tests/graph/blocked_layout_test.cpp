// Blocked-layout propagation (backends/cpu/passes/blocked_layout.cpp): which values go blocked,
// where the re-layouts land, and the rewritten graph computing what the plain one does (both run by
// the executor), forward and backward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "backends/cpu/isa.h"
#include "backends/cpu/ops/ops.h"
#include "backends/cpu/passes/passes.h"
#include "graph/executor.h"
#include "graph/passes.h"
#include "graph/trace.h"
#include "ops/op.h"
#include "spore/spore.h"

#include "graph/graph_test_util.h"

using namespace spore;
using graph::Graph;
using ops::OpId;

namespace {

constexpr auto run_all = test::run_graph_all;
using test::expect_close;

// The nodes running blocked: convs with a blocked side, pools / batch norms with `blocked`.
size_t blocked_nodes(const Graph& g) {
  size_t n = 0;
  for (const auto& node : g.nodes)
    n += node->attrs.get_bool("blocked_x", false) || node->attrs.get_bool("blocked_y", false) ||
         node->attrs.get_bool("blocked", false);
  return n;
}

// Runs the rewritten graph and the untouched clone on args and compares every output.
void expect_same_outputs(std::unique_ptr<Graph> g, std::unique_ptr<Graph> ref,
                         const std::vector<Tensor>& args, double tol = 1e-5) {
  const auto got = run_all(std::move(g), args), want = run_all(std::move(ref), args);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    expect_close(got[k], want[k], tol, "output " + std::to_string(k));
}

// Fusion first, as in the pipeline: the pass sees conv2d_fused (bias + relu inside).
std::unique_ptr<Graph> fused_clone(const Graph& g) {
  auto f = g.clone();
  cpu::fuse_conv_matmul(*f);
  graph::dead_code_elimination(*f);
  return f;
}

struct NoBlocked : test::ScopedEnv {  // SPORE_NO_BLOCKED_LAYOUT=1 for a scope
  NoBlocked() : ScopedEnv("SPORE_NO_BLOCKED_LAYOUT", "1") {}
};

}  // namespace

// LeNet-5's conv part, forward and backward: conv1 (1 -> 6) -> relu -> pool -> conv2 (6 -> 16)
// -> relu -> pool -> flatten. The 6-channel maps stay plain (one block of 16 would be 10/16
// padding); conv2's 16-channel side runs blocked from its output through pool2 and back through
// pool2's backward to conv2's two backward ops: one from_blocked (pool2 -> flatten), one
// to_blocked (the flatten's gradient -> pool2's backward).
TEST(BlockedLayout, LeNetConvStackForwardAndBackward) {
  const cpu::ScopedBlockedLanes lanes(16);  // the expectations count 16-lane blocks
  set_seed(0);
  Tensor x = randn({8, 1, 28, 28});
  Tensor w1 = (randn({6, 1, 5, 5}) * 0.3).set_requires_grad(true),
         b1 = (randn({6}) * 0.1).set_requires_grad(true);
  Tensor w2 = (randn({16, 6, 5, 5}) * 0.1).set_requires_grad(true),
         b2 = (randn({16}) * 0.1).set_requires_grad(true);
  Tensor probe = randn({8, 400});
  auto fn = [&](const std::vector<Tensor>& a) {
    EnableGradGuard eg;
    Tensor h =
        max_pool2d(relu(conv2d(a[0], w1, b1, {.padding = {2, 2, 2, 2}})), {.kernel_size = {2, 2}});
    h = max_pool2d(relu(conv2d(h, w2, b2)), {.kernel_size = {2, 2}});
    Tensor loss = (h.reshape({8, 400}) * probe).sum();
    auto gr = autograd::grad(loss, {w1, b1, w2, b2});
    return std::vector<Tensor>{loss, gr[0], gr[1], gr[2], gr[3]};
  };
  auto traced = graph::trace(fn, {x});
  auto ref = traced->clone();
  auto g = fused_clone(*traced);
  const size_t changed = cpu::blocked_layout(*g);
  graph::dead_code_elimination(*g);
  graph::verify(*g);
  // conv2 fwd (y side), pool2, pool2 bwd, conv2 bwd data + weight (dy side): 5 nodes with a
  // flag, plus relu_grad (pointwise, no flag) and conv2's bias-gradient sum (over (0, 2, 3) of the
  // blocked tensor, then reshape + slice to (C)).
  EXPECT_EQ(changed, 7u);
  EXPECT_EQ(blocked_nodes(*g), 5u);
  for (const auto& n : g->nodes) {
    EXPECT_FALSE(n->attrs.get_bool("blocked_x", false)) << "6-channel maps stay plain";
    if (n->op == OpId::MaxPool2d && n->inputs[0]->shape[1] == 6)
      EXPECT_FALSE(n->attrs.get_bool("blocked", false));
  }
  EXPECT_EQ(g->count(cpu::op::FromBlocked()), 1u);
  EXPECT_EQ(g->count(cpu::op::ToBlocked()), 1u);
  for (const auto& n : g->nodes)
    if (n->op == cpu::op::ToBlocked()) EXPECT_EQ(n->inputs[0]->shape, (Shape{8, 16, 5, 5}));
  expect_same_outputs(std::move(g), std::move(ref), {x});
}

// A ResNet basic block with a projection shortcut, batch norm in training mode, global average
// pool: conv / batch norm / relu / add all blocked, their gradients too; the only re-layouts are
// the mean's input and the gradient coming back through it.
TEST(BlockedLayout, ResNetBlockWithBatchNormForwardAndBackward) {
  const cpu::ScopedBlockedLanes lanes(16);  // the expectations count 16-lane blocks
  set_seed(1);
  Tensor x = randn({4, 16, 8, 8});
  auto param = [](Shape s, double k) { return (randn(s) * k).set_requires_grad(true); };
  Tensor w1 = param({32, 16, 3, 3}, 0.1), w2 = param({32, 32, 3, 3}, 0.1),
         ws = param({32, 16, 1, 1}, 0.2);
  Tensor g1 = param({32}, 0.1) + 1.0, be1 = param({32}, 0.1), g2 = param({32}, 0.1) + 1.0,
         be2 = param({32}, 0.1);
  g1 = g1.detach().set_requires_grad(true);
  g2 = g2.detach().set_requires_grad(true);
  Tensor probe = randn({4, 32});
  auto bn = [](const Tensor& t, const Tensor& gamma, const Tensor& beta) {
    return ops::call(OpId::BatchNorm, {t, gamma, beta}, ops::Attrs().set("eps", 1e-5))[0];
  };
  auto fn = [&](const std::vector<Tensor>& a) {
    EnableGradGuard eg;
    Tensor h = relu(bn(conv2d(a[0], w1, {.stride = {2, 2}, .padding = {1, 1, 1, 1}}), g1, be1));
    h = bn(conv2d(h, w2, {.padding = {1, 1, 1, 1}}), g2, be2);
    Tensor out = relu(h + conv2d(a[0], ws, {.stride = {2, 2}}));
    Tensor loss = (out.mean({2, 3}) * probe).sum();
    auto gr = autograd::grad(loss, {w1, w2, ws, g1, be1, g2, be2});
    std::vector<Tensor> r{loss};
    r.insert(r.end(), gr.begin(), gr.end());
    return r;
  };
  auto traced = graph::trace(fn, {x});
  auto ref = traced->clone();
  auto g = fused_clone(*traced);
  EXPECT_GT(cpu::blocked_layout(*g), 10u);
  graph::dead_code_elimination(*g);
  graph::verify(*g);
  EXPECT_EQ(g->count(cpu::op::FromBlocked()), 1u);  // the mean's input
  for (const auto& n : g->nodes) {
    if (n->op == OpId::BatchNorm || n->op == OpId::BatchNormBackward)
      EXPECT_TRUE(n->attrs.get_bool("blocked", false));
    if (n->op == OpId::Conv2dBackwardData) {
      EXPECT_TRUE(n->attrs.get_bool("blocked_x", false));
      EXPECT_TRUE(n->attrs.get_bool("blocked_y", false));
    }
  }
  expect_same_outputs(std::move(g), std::move(ref), {x}, 2e-5);
}

// A channel concat of two conv outputs feeding a conv (YOLOv5's C3), forward and backward: the
// concat runs blocked (a concat of channel blocks, axis 1 of the 5-D form) with no re-layout
// around it; its backward (a split, not layout-aware) reads the gradient plain. A concat whose
// inputs are not whole 16-channel blocks stays plain.
TEST(BlockedLayout, ChannelConcatOfWholeBlocks) {
  const cpu::ScopedBlockedLanes lanes(16);  // the expectations count 16-lane blocks
  set_seed(2);
  Tensor x = randn({2, 16, 8, 8});
  auto param = [](Shape s, double k) { return (randn(s) * k).set_requires_grad(true); };
  Tensor w1 = param({16, 16, 3, 3}, 0.1), w2 = param({32, 16, 1, 1}, 0.2),
         w3 = param({16, 48, 3, 3}, 0.1);
  Tensor probe = randn({2, 16});
  auto fn = [&](const std::vector<Tensor>& a) {
    EnableGradGuard eg;
    const Tensor h1 = relu(conv2d(a[0], w1, {.padding = {1, 1, 1, 1}}));
    const Tensor h2 = relu(conv2d(a[0], w2));
    const Tensor out = relu(conv2d(concat({h1, h2}, -3), w3, {.padding = {1, 1, 1, 1}}));
    Tensor loss = (out.mean({2, 3}) * probe).sum();
    auto gr = autograd::grad(loss, {w1, w2, w3});
    std::vector<Tensor> r{loss, out};
    r.insert(r.end(), gr.begin(), gr.end());
    return r;
  };
  auto traced = graph::trace(fn, {x});
  auto ref = traced->clone();
  auto g = fused_clone(*traced);
  EXPECT_GT(cpu::blocked_layout(*g), 0u);
  graph::dead_code_elimination(*g);
  graph::verify(*g);
  size_t concats = 0;
  for (const auto& n : g->nodes) {
    if (n->op != OpId::Concat) continue;
    ++concats;
    EXPECT_EQ(n->attrs.get_int("axis"), 1);
    EXPECT_EQ(n->outputs[0]->shape, (Shape{2, 3, 8, 8, 16}));
    for (const graph::Value* in : n->inputs) {
      EXPECT_NE(in->producer->op, cpu::op::ToBlocked());
    }
  }
  EXPECT_EQ(concats, 1u);
  expect_same_outputs(std::move(g), std::move(ref), {x}, 2e-5);

  // 8 + 16 channels: the 8-channel input is not a whole block, so the concat stays plain.
  Tensor w4 = randn({8, 16, 1, 1}) * 0.2, w5 = randn({16, 24, 3, 3}) * 0.1;
  auto odd = graph::trace(
      [&](const std::vector<Tensor>& a) {
        const Tensor c =
            concat({conv2d(a[0], w4), relu(conv2d(a[0], w1, {.padding = {1, 1, 1, 1}}))}, 1);
        return std::vector<Tensor>{relu(conv2d(c, w5, {.padding = {1, 1, 1, 1}}))};
      },
      {x});
  auto odd_ref = odd->clone();
  auto go = fused_clone(*odd);
  cpu::blocked_layout(*go);
  graph::dead_code_elimination(*go);
  graph::verify(*go);
  for (const auto& n : go->nodes)
    if (n->op == OpId::Concat) EXPECT_EQ(n->outputs[0]->shape.size(), 4u);
  expect_same_outputs(std::move(go), std::move(odd_ref), {x});
}

// A lone conv whose output is read by a reduction: blocking it would trade the conv's own
// reorder for a from_blocked of the same size, so nothing changes. The 3-channel network input
// stays plain even where the output side goes blocked.
TEST(BlockedLayout, NoGainNoChangeAndSmallInputsStayPlain) {
  const cpu::ScopedBlockedLanes lanes(16);  // the expectations count 16-lane blocks
  set_seed(2);
  Tensor x = randn({2, 3, 8, 8}), w = randn({16, 3, 3, 3}) * 0.2, w2 = randn({16, 16, 3, 3}) * 0.1;
  auto lone = graph::trace(
      [&](const std::vector<Tensor>& a) { return std::vector<Tensor>{conv2d(a[0], w).sum()}; },
      {x});
  EXPECT_EQ(cpu::blocked_layout(*lone), 0u);
  EXPECT_EQ(lone->count(cpu::op::ToBlocked()) + lone->count(cpu::op::FromBlocked()), 0u);

  auto two = graph::trace(
      [&](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{
            conv2d(relu(conv2d(a[0], w, {.padding = {1, 1, 1, 1}})), w2).sum()};
      },
      {x});
  auto ref = two->clone();
  auto g = fused_clone(*two);
  EXPECT_GE(cpu::blocked_layout(*g), 1u);
  graph::dead_code_elimination(*g);
  graph::verify(*g);
  for (const auto& n : g->nodes)
    if (n->op == cpu::op::Conv2dFused() && n->inputs[0]->shape == Shape{2, 3, 8, 8}) {
      EXPECT_FALSE(n->attrs.get_bool("blocked_x", false));  // the image
      EXPECT_TRUE(n->attrs.get_bool("blocked_y", false));
    }
  EXPECT_EQ(g->count(cpu::op::ToBlocked()), 0u);
  expect_same_outputs(std::move(g), std::move(ref), {x});
}

// With 40 channels (3 blocks, 8 padding lanes), a pointwise op that does not keep zeros zero
// (exp) runs plain: the value it reads is re-laid-out back, so padding never turns non-zero.
TEST(BlockedLayout, PaddedChannelsOnlyThroughZeroKeepingOps) {
  const cpu::ScopedBlockedLanes lanes(16);  // the expectations count 16-lane blocks
  set_seed(3);
  Tensor x = randn({2, 8, 10, 10}), w = randn({40, 8, 3, 3}) * 0.2,
         w2 = randn({16, 40, 3, 3}) * 0.2;
  auto traced = graph::trace(
      [&](const std::vector<Tensor>& a) {
        Tensor h = conv2d(a[0], w);
        Tensor e = exp(h * 0.1);  // exp(0) = 1: not zero-keeping, runs plain
        Tensor m = max_pool2d(relu(h), {.kernel_size = {2, 2}});
        return std::vector<Tensor>{conv2d(m, w2).sum() + e.sum()};
      },
      {x});
  auto ref = traced->clone();
  auto g = fused_clone(*traced);
  cpu::blocked_layout(*g);
  graph::dead_code_elimination(*g);
  graph::verify(*g);
  for (const auto& n : g->nodes)
    if (n->op == OpId::Exp) {
      EXPECT_EQ(n->outputs[0]->shape.size(), 4u);
      // Its input (h * 0.1: a zero-keeping mul, so blocked) comes back through from_blocked.
      ASSERT_NE(n->inputs[0]->producer, nullptr);
      EXPECT_EQ(n->inputs[0]->producer->op, cpu::op::FromBlocked());
    }
  expect_same_outputs(std::move(g), std::move(ref), {x});
}

TEST(BlockedLayout, EnvironmentSwitchTurnsItOff) {
  const cpu::ScopedBlockedLanes lanes(16);  // the expectations count 16-lane blocks
  set_seed(4);
  Tensor x = randn({2, 16, 8, 8}), w = randn({16, 16, 3, 3}) * 0.1;
  auto traced = graph::trace(
      [&](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{
            max_pool2d(conv2d(relu(conv2d(a[0], w)), w), {.kernel_size = {2, 2}})};
      },
      {x});
  {
    NoBlocked off;
    auto g = traced->clone();
    EXPECT_EQ(cpu::blocked_layout(*g), 0u);
  }
  auto g = traced->clone();
  EXPECT_GT(cpu::blocked_layout(*g), 0u);
}
