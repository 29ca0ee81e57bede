// Conv + max-pool fusion (backends/cpu/passes/conv_pool_fusion.cpp): which nodes it makes, and the
// fused graph computing what the unfused one does (both run by the executor), forward and backward.
#include <gtest/gtest.h>

#include "backends/cpu/kernels/conv_direct.h"
#include "backends/cpu/kernels/conv_list.h"
#include "backends/cpu/ops/ops.h"
#include "backends/cpu/passes/passes.h"
#include "graph/executor.h"
#include "graph/passes.h"
#include "graph/trace.h"
#include "spore/spore.h"

#include "graph/graph_test_util.h"

using namespace spore;
using graph::Graph;
using ops::OpId;

namespace {

// The passes that run before it in the pipeline and make its pattern: relu_grad moved before the
// pool's backward (algebraic_simplification), conv + bias + relu fused (fuse_conv_matmul).
void prepare(Graph& g) {
  graph::algebraic_simplification(g);
  graph::dead_code_elimination(g);
  cpu::fuse_conv_matmul(g);
  graph::dead_code_elimination(g);
  cpu::blocked_layout(g);
}

// LeNet-5's first block, forward and the weight gradients: conv1 (1 -> 6, pad 2) + bias + relu
// -> 2x2 max pool -> a second conv so the pool's gradient is a real one.
std::unique_ptr<Graph> lenet_block(const Tensor& x, const Tensor& w1, const Tensor& b1,
                                   const Tensor& w2, const Tensor& probe, int64_t pool) {
  return graph::trace(
      [&](const std::vector<Tensor>& a) {
        EnableGradGuard eg;
        Tensor h = max_pool2d(relu(conv2d(a[0], w1, b1, {.padding = {2, 2, 2, 2}})), pool);
        Tensor loss = (conv2d(h, w2) * probe).sum();
        auto gr = autograd::grad(loss, {w1, b1, w2});
        return std::vector<Tensor>{loss, gr[0], gr[1], gr[2]};
      },
      {x});
}

}  // namespace

// The unfused graphs run conv1 on the direct kernel too (forced: the automatic choice times it
// against oneDNN, whose sums round differently), so both sides do the same conv arithmetic.
TEST(ConvPoolFusion, LeNetFirstBlockForwardAndBackward) {
  cpu::ScopedConvImpl direct("direct_nchw,onednn,onednn_via_f32,reference");
  set_seed(0);
  Tensor x = randn({4, 1, 28, 28});
  Tensor w1 = (randn({6, 1, 5, 5}) * 0.3).set_requires_grad(true),
         b1 = (randn({6}) * 0.1).set_requires_grad(true);
  Tensor w2 = (randn({16, 6, 5, 5}) * 0.1).set_requires_grad(true), probe = randn({4, 16, 10, 10});
  auto g = lenet_block(x, w1, b1, w2, probe, 2);
  auto ref = g->clone();
  prepare(*g);
  const size_t pools_before = g->count(OpId::MaxPool2d);
  EXPECT_EQ(cpu::fuse_conv_pool(*g), 1u);  // the forward; b1's gradient also reads the pool's
                                           // backward, so the weight gradient stays as it is
  graph::verify(*g);
  EXPECT_EQ(g->count(cpu::op::Conv2dPoolFused()), 1u);
  EXPECT_EQ(g->count(OpId::MaxPool2d), pools_before - 1);
  EXPECT_EQ(g->count(cpu::op::Conv2dBackwardWeightPooled()), 0u);
  const auto got = test::run_graph_all(std::move(g), {x}),
             want = test::run_graph_all(std::move(ref), {x});
  for (size_t k = 0; k < got.size(); ++k)
    test::expect_close(got[k], want[k], 1e-5, "output " + std::to_string(k));
}

// Without a bias (LeNet-5 as the model zoo builds it) the pool's gradient has one reader, the
// weight gradient, and both directions fuse; with a 3x3 stride-2 pool (overlapping windows)
// too.
TEST(ConvPoolFusion, NoBiasFusesBothDirectionsAndOverlappingPools) {
  cpu::ScopedConvImpl direct("direct_nchw,onednn,onednn_via_f32,reference");
  for (int64_t pool : {2, 3}) {
    SCOPED_TRACE(pool);
    set_seed(1);
    Tensor x = randn({4, 1, 28, 28});
    Tensor w1 = (randn({6, 1, 5, 5}) * 0.3).set_requires_grad(true);
    Tensor w2 = (randn({16, 6, 5, 5}) * 0.1).set_requires_grad(true);
    const int64_t ph = pool == 2 ? 14 : 13;  // pooled 28x28 plane, then conv2's valid 5x5
    Tensor probe = randn({4, 16, ph - 4, ph - 4});
    auto g = graph::trace(
        [&](const std::vector<Tensor>& a) {
          EnableGradGuard eg;
          Pool2dOptions po{.kernel_size = {pool, pool}, .stride = {2, 2}};
          Tensor h = max_pool2d(relu(conv2d(a[0], w1, {.padding = {2, 2, 2, 2}})), po);
          // Linear in h, so a last-bit difference in h is not amplified (a squared loss would).
          Tensor loss = (conv2d(h, w2) * probe).sum();
          auto gr = autograd::grad(loss, {w1, w2});
          return std::vector<Tensor>{loss, gr[0], gr[1]};
        },
        {x});
    auto ref = g->clone();
    prepare(*g);
    EXPECT_EQ(cpu::fuse_conv_pool(*g), 2u);
    graph::verify(*g);
    EXPECT_EQ(g->count(cpu::op::Conv2dPoolFused()), 1u);
    EXPECT_EQ(g->count(cpu::op::Conv2dBackwardWeightPooled()), 1u);
    EXPECT_EQ(g->count(OpId::MaxPool2dBackward), 0u);  // the only pool's backward is inside
    // The pooled weight gradient sums each weight's ~800 products (4 images x 196 argmax
    // positions) in another order than the dense one: float32 rounding of such sums (|terms| ~ 1,
    // |sum| up to ~60) reaches ~1e-5 of max(1, |sum|) (measured 1.3e-5), hence 5e-5.
    const auto got = test::run_graph_all(std::move(g), {x}),
               want = test::run_graph_all(std::move(ref), {x});
    for (size_t k = 0; k < got.size(); ++k)
      test::expect_close(got[k], want[k], 5e-5, "output " + std::to_string(k));
  }
}

// Convs with more than 4 input channels, or whose output something else reads, stay as they are.
TEST(ConvPoolFusion, LeavesWideConvsAndSharedOutputsAlone) {
  set_seed(2);
  Tensor x = randn({2, 8, 12, 12}), w = randn({8, 8, 3, 3}) * 0.2, x1 = randn({2, 1, 12, 12}),
         w1 = randn({4, 1, 3, 3}) * 0.2;
  auto g = graph::trace(
      [&](const std::vector<Tensor>& a) {
        Tensor wide = max_pool2d(relu(conv2d(a[0], w)), 2);
        Tensor c = relu(conv2d(a[1], w1));
        Tensor shared = max_pool2d(c, 2);
        return std::vector<Tensor>{wide.sum() + shared.sum() + c.sum()};
      },
      {x, x1});
  prepare(*g);
  EXPECT_EQ(cpu::fuse_conv_pool(*g), 0u);
  EXPECT_EQ(g->count(cpu::op::Conv2dPoolFused()), 0u);
}
