// Constant-weight convolutions (backends/cpu/passes/constant_convs.cpp): which convs the full
// Graph-mode pipeline turns into conv2d_winograd / conv2d_packed, and the rewritten graph computing
// what the untouched one does (both run by the executor). A ResNet-style stem and block in
// inference: a 3 -> 16 stem conv (its input is the plain graph input: the packed kernel reads it in
// place, one channel at a time, and writes blocked activations), a 3x3
// conv with a BatchNorm (folded into the conv's scale and shift) and relu, a stride-2 3x3 conv, a
// 1x1 stride-2 shortcut and the residual add.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels/conv_list.h"
#include "backends/cpu/kernels/conv_packed.h"
#include "backends/cpu/kernels/conv_winograd.h"
#include "backends/cpu/ops/ops.h"
#include "graph/executor.h"
#include "graph/passes.h"
#include "graph/trace.h"
#include "spore/spore.h"

#include "graph/graph_test_util.h"

using namespace spore;
using graph::Graph;
using ops::OpId;

namespace {

struct Weights {
  Tensor w0, w1, gamma, beta, mean, var, w2, w3;
};

Weights make_weights() {
  set_seed(3);
  return {randn({16, 3, 3, 3}) * 0.3,
          randn({32, 16, 3, 3}) * 0.1,
          rand({32}) + 0.5,
          randn({32}) * 0.1,
          randn({32}) * 0.1,
          rand({32}) + 0.5,
          randn({32, 32, 3, 3}) * 0.05,
          randn({32, 32, 1, 1}) * 0.2};
}

Tensor block(const Tensor& x, const Weights& p) {
  Tensor stem = relu(conv2d(x, p.w0, {.padding = {1, 1, 1, 1}}));
  Tensor h = relu(batch_norm_infer(conv2d(stem, p.w1, {.padding = {1, 1, 1, 1}}), p.gamma, p.beta,
                                   p.mean, p.var, 1e-5));
  Tensor down = conv2d(h, p.w2, {.stride = {2, 2}, .padding = {1, 1, 1, 1}});
  return relu(down + conv2d(h, p.w3, {.stride = {2, 2}}));
}

// The weights as constants: copies made inside the traced function, which only the graph keeps
// (what the ONNX importer's initializers are).
std::unique_ptr<Graph> frozen(const Tensor& x, const Weights& p) {
  return graph::trace(
      [&](const std::vector<Tensor>& a) {
        auto own = [](const Tensor& t) { return from_vector(t.to_vector<float>(), t.shape()); };
        const Weights c{own(p.w0),   own(p.w1),  own(p.gamma), own(p.beta),
                        own(p.mean), own(p.var), own(p.w2),    own(p.w3)};
        return std::vector<Tensor>{block(a[0], c)};
      },
      {x});
}

// The channel blocks the prepared kernels run on here: 16 on every machine, 8 where their vectors
// hold at most 8 lanes (AVX2's graphs); each test runs in both where it can.
std::vector<int64_t> widths() {
  std::vector<int64_t> w{16};
  if (cpu::winograd_takes_lanes(8) && cpu::packed_takes_lanes(8)) w.push_back(8);
  return w;
}

}  // namespace

TEST(ConstantConvs, FrozenResNetBlockRunsOnPreparedWeights) {
  for (int64_t lanes : widths()) {
    SCOPED_TRACE("activations blocked in " + std::to_string(lanes) + " lanes");
    const cpu::ScopedBlockedLanes fixed(lanes);
    const Weights p = make_weights();
    const Tensor x =
        randn({4, 3, 16, 16});  // 4 x 8 x 8 = 256 tiles: Winograd for the block's first conv
    auto g = frozen(x, p);
    auto ref = g->clone();
    graph::run_pipeline(*g);
    EXPECT_EQ(g->count(cpu::op::Conv2dWinograd()), 1u);
    EXPECT_EQ(g->count(cpu::op::Conv2dPacked()), 3u);  // the stem from the plain input, 2 more
    EXPECT_EQ(g->count(OpId::Conv2d) + g->count(cpu::op::Conv2dFused()), 0u);
    EXPECT_EQ(g->count(OpId::BatchNormInference), 0u);
    size_t plain_inputs = 0;
    for (const auto& n : g->nodes)
      plain_inputs += n->op == cpu::op::Conv2dPacked() && n->inputs[0]->shape.size() == 4;
    EXPECT_EQ(plain_inputs, 1u);
    test::expect_close(test::run_graph(std::move(g), {x}), test::run_graph(std::move(ref), {x}),
                       1e-5);
  }
}

// A 3x3 stride-1 conv with few output tiles per thread (one 4x4 map: 4 tiles) takes the packed
// direct kernel: Winograd's larger weights would cost more to read than its multiplies save.
TEST(ConstantConvs, FewTilesTakeThePackedKernel) {
  for (int64_t lanes : widths()) {
    SCOPED_TRACE("activations blocked in " + std::to_string(lanes) + " lanes");
    const cpu::ScopedBlockedLanes fixed(lanes);
    const Weights p = make_weights();
    const Tensor x = randn({1, 3, 4, 4});
    auto g = frozen(x, p);
    auto ref = g->clone();
    graph::run_pipeline(*g);
    EXPECT_EQ(g->count(cpu::op::Conv2dWinograd()), 0u);
    EXPECT_EQ(g->count(cpu::op::Conv2dPacked()), 4u);  // the stem too
    test::expect_close(test::run_graph(std::move(g), {x}), test::run_graph(std::move(ref), {x}),
                       1e-5);
  }
}

// Weights the caller holds (a model's parameters, which training changes) stay on oneDNN; so does
// everything with the pass switched off.
TEST(ConstantConvs, ParametersAndSwitchOffKeepOneDnn) {
  const Weights p = make_weights();
  const Tensor x = randn({4, 3, 16, 16});
  auto held = graph::trace(
      [&](const std::vector<Tensor>& a) { return std::vector<Tensor>{block(a[0], p)}; }, {x});
  graph::run_pipeline(*held);
  EXPECT_EQ(held->count(cpu::op::Conv2dWinograd()) + held->count(cpu::op::Conv2dPacked()), 0u);

  cpu::ScopedConvImpl off("-winograd,-packed");
  auto g = frozen(x, p);
  graph::run_pipeline(*g);
  EXPECT_EQ(g->count(cpu::op::Conv2dWinograd()) + g->count(cpu::op::Conv2dPacked()), 0u);
}

// YOLOv5's C3 pattern as ONNX spells it: conv + BatchNorm + x * sigmoid(x), two branches
// concatenated along the channels, a 1x1 conv over the concat. The pipeline makes x * sigmoid(x) a
// silu (algebraic_simplification), fuses it into the conv (dnnl_fusion), keeps the concat in the
// blocked layout (no re-layout around it) and gives the two convs inside the block a prepared
// kernel with silu in its epilogue. The stem reads the plain input (the packed kernel, one input
// channel at a time) and the last conv writes the plain output: the packed kernel in blocked
// channels, then from_blocked.
TEST(ConstantConvs, YoloStyleSiluAndConcatStayBlocked) {
  for (int64_t lanes : widths()) {
    SCOPED_TRACE("activations blocked in " + std::to_string(lanes) + " lanes");
    const cpu::ScopedBlockedLanes fixed(lanes);
    set_seed(4);
    const Tensor w0 = randn({16, 3, 3, 3}) * 0.3, w1 = randn({16, 16, 1, 1}) * 0.3,
                 w2 = randn({16, 16, 3, 3}) * 0.1, w3 = randn({32, 32, 1, 1}) * 0.2,
                 gamma = rand({16}) + 0.5, beta = randn({16}) * 0.1, mean = randn({16}) * 0.1,
                 var = rand({16}) + 0.5;
    const Tensor x = randn({2, 3, 16, 16});
    auto net = [&](const Tensor& in, const std::vector<Tensor>& c) {
      auto silu_onnx = [](const Tensor& t) { return t * sigmoid(t); };
      const Tensor stem = silu_onnx(conv2d(in, c[0], {.padding = {1, 1, 1, 1}}));
      const Tensor a =
          silu_onnx(batch_norm_infer(conv2d(stem, c[1]), c[4], c[5], c[6], c[7], 1e-5));
      const Tensor b = silu_onnx(conv2d(a, c[2], {.padding = {1, 1, 1, 1}}));
      return silu_onnx(conv2d(concat({a, b}, 1), c[3]));
    };
    auto g = graph::trace(
        [&](const std::vector<Tensor>& in) {
          std::vector<Tensor> c;  // constants: copies only the graph keeps
          for (const Tensor& t : {w0, w1, w2, w3, gamma, beta, mean, var})
            c.push_back(from_vector(t.to_vector<float>(), t.shape()));
          return std::vector<Tensor>{net(in[0], c)};
        },
        {x});
    auto ref = g->clone();
    graph::run_pipeline(*g);
    EXPECT_EQ(g->count(OpId::Mul) + g->count(OpId::Sigmoid) + g->count(OpId::Silu), 0u);
    EXPECT_EQ(g->count(cpu::op::Conv2dWinograd()), 1u);
    EXPECT_EQ(g->count(cpu::op::Conv2dPacked()), 3u);  // the stem, the 1x1s in and after it
    EXPECT_EQ(g->count(OpId::Concat), 1u);
    EXPECT_EQ(g->count(cpu::op::ToBlocked()), 0u);
    EXPECT_EQ(g->count(cpu::op::FromBlocked()), 1u);  // the last conv's plain output
    for (const auto& n : g->nodes)
      if (n->op == cpu::op::Conv2dWinograd() || n->op == cpu::op::Conv2dPacked())
        EXPECT_EQ(n->attrs.get_string("act"), "silu");
    test::expect_close(test::run_graph(std::move(g), {x}), test::run_graph(std::move(ref), {x}),
                       1e-5);
  }
}

// YOLOv5's detect convs: a 1x1 conv with bias and sigmoid from blocked activations to 3 x 85 = 255
// channels, which plain ops read (a reshape and a permute). The conv runs packed into channels
// padded to a multiple of 16 (zero weights and bias) and from_blocked drops the padding; here 20
// output channels (two blocks of 16, the second 12 short; in 8 lanes four blocks, of which a view
// of the first three reaches from_blocked) and a 3x3 one with 24.
TEST(ConstantConvs, PlainOutputsOfAnyChannelCountRunPackedThenUnblocked) {
  for (int64_t lanes : widths()) {
    SCOPED_TRACE("activations blocked in " + std::to_string(lanes) + " lanes");
    const cpu::ScopedBlockedLanes fixed(lanes);
    set_seed(5);
    const Tensor w0 = randn({32, 3, 3, 3}) * 0.3, w1 = randn({20, 32, 1, 1}) * 0.3,
                 b1 = randn({20}) * 0.1, w2 = randn({24, 32, 3, 3}) * 0.1;
    const Tensor x = randn({1, 3, 12, 12});
    auto g = graph::trace(
        [&](const std::vector<Tensor>& in) {
          auto own = [](const Tensor& t) { return from_vector(t.to_vector<float>(), t.shape()); };
          const Tensor h = relu(conv2d(in[0], own(w0), {.padding = {1, 1, 1, 1}}));
          const Tensor det = sigmoid(conv2d(h, own(w1), own(b1)));
          const Tensor other = conv2d(h, own(w2), {.padding = {1, 1, 1, 1}});
          return std::vector<Tensor>{det.reshape({1, 4, 5, 12, 12}).permute({0, 1, 3, 4, 2}),
                                     other};
        },
        {x});
    auto ref = g->clone();
    graph::run_pipeline(*g);
    EXPECT_EQ(g->count(cpu::op::Conv2dFused()) + g->count(OpId::Conv2d), 0u);
    EXPECT_EQ(g->count(cpu::op::FromBlocked()), 2u);
    for (const auto& n : g->nodes)
      if (n->op == cpu::op::Conv2dPacked() && n->inputs[1]->shape[1] == 1)
        EXPECT_EQ(n->attrs.get_string("act"), "sigmoid");  // the 1x1: 20 channels padded to 32
    const auto got = test::run_graph_all(std::move(g), {x});
    const auto want = test::run_graph_all(std::move(ref), {x});
    ASSERT_EQ(got.size(), 2u);
    ASSERT_EQ(want.size(), 2u);
    EXPECT_EQ(got[0].size(), size_t(4 * 12 * 12 * 5));
    EXPECT_EQ(got[1].size(), size_t(24 * 12 * 12));
    test::expect_close(got[0], want[0], 1e-5, "detect-style 1x1 + sigmoid");
    test::expect_close(got[1], want[1], 1e-5, "3x3 into 24 channels");
  }
}

// Sibling convs (backends/cpu/passes/sibling_convs.cpp): YOLOv5's C3 reads its input through two
// 1x1 convs; at batch 1 they become one conv over the stacked weights, and channel-block slices
// (views) of its output stand for theirs. At batch 2 the slices would not be contiguous: the two
// convs stay.
TEST(ConstantConvs, SiblingConvsMergeAtBatchOne) {
  for (int64_t lanes : widths()) {
    SCOPED_TRACE("activations blocked in " + std::to_string(lanes) + " lanes");
    const cpu::ScopedBlockedLanes fixed(lanes);
    set_seed(5);
    const Tensor w0 = randn({16, 3, 3, 3}) * 0.3, wa = randn({16, 16, 1, 1}) * 0.3,
                 wb = randn({32, 16, 1, 1}) * 0.3, wc = randn({16, 48, 1, 1}) * 0.2;
    for (int64_t batch : {1, 2}) {
      SCOPED_TRACE("batch " + std::to_string(batch));
      const Tensor x = randn({batch, 3, 12, 12});
      auto g = graph::trace(
          [&](const std::vector<Tensor>& in) {
            std::vector<Tensor> c;  // constants: copies only the graph keeps
            for (const Tensor& t : {w0, wa, wb, wc})
              c.push_back(from_vector(t.to_vector<float>(), t.shape()));
            const Tensor stem = relu(conv2d(in[0], c[0], {.padding = {1, 1, 1, 1}}));
            const Tensor a = relu(conv2d(stem, c[1])), b = relu(conv2d(stem, c[2]));
            return std::vector<Tensor>{relu(conv2d(concat({a + stem, b}, 1), c[3]))};
          },
          {x});
      auto ref = g->clone();
      graph::run_pipeline(*g);
      // The stem, the siblings (one conv at batch 1) and the last conv (into blocked channels,
      // then from_blocked to the plain output).
      EXPECT_EQ(g->count(cpu::op::Conv2dPacked()), batch == 1 ? 3u : 4u);
      EXPECT_EQ(g->count(OpId::Slice), batch == 1 ? 2u : 0u);
      test::expect_close(test::run_graph(std::move(g), {x}), test::run_graph(std::move(ref), {x}),
                         1e-5);
    }
  }
}

// SPORE_GRAPH_DISABLE names fusion-stage passes the pipeline skips (any separator, whole names).
TEST(ConstantConvs, GraphDisableSkipsTheNamedPass) {
  set_seed(6);
  const Tensor w0 = randn({16, 3, 3, 3}) * 0.3, wa = randn({16, 16, 1, 1}) * 0.3,
               wb = randn({16, 16, 1, 1}) * 0.3;
  const Tensor x = randn({1, 3, 8, 8});
  auto count_packed = [&](const char* off) {
    if (off)
      setenv("SPORE_GRAPH_DISABLE", off, 1);
    else
      unsetenv("SPORE_GRAPH_DISABLE");
    auto g = graph::trace(
        [&](const std::vector<Tensor>& in) {
          std::vector<Tensor> c;
          for (const Tensor& t : {w0, wa, wb})
            c.push_back(from_vector(t.to_vector<float>(), t.shape()));
          const Tensor stem = relu(conv2d(in[0], c[0], {.padding = {1, 1, 1, 1}}));
          return std::vector<Tensor>{relu(conv2d(stem, c[1])) + relu(conv2d(stem, c[2]))};
        },
        {x});
    graph::run_pipeline(*g);
    unsetenv("SPORE_GRAPH_DISABLE");
    return g->count(cpu::op::Conv2dPacked());
  };
  EXPECT_EQ(count_packed(nullptr), 2u);  // the stem and the merged siblings
  EXPECT_EQ(count_packed("elementwise_fusion, sibling_convs"), 3u);
  EXPECT_EQ(count_packed("sibling_convs_x"), 2u);  // whole names only
}
