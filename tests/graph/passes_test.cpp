// Graph passes: node counts before and after each pass, and the optimised graph computing the
// same numbers as the unoptimised one (both run by the executor).
#include "graph/passes.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "graph/executor.h"
#include "graph/memory_plan.h"
#include "graph/trace.h"
#include "spore/spore.h"

#include "graph/graph_test_util.h"

using namespace spore;
using graph::Graph;
using ops::OpId;

namespace {

constexpr auto run = test::run_graph;

void expect_same(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(a[i], b[i]) << "element " << i;
}

}  // namespace

TEST(GraphPasses, DeadCodeKeepsOutputsAndEffects) {
  Tensor state = zeros({3});
  Tensor x = randn({3});
  auto g = graph::trace(
      [&](const std::vector<Tensor>& a) {
        Tensor unused = exp(a[0]) * 3.0;  // two dead nodes (+ the constant)
        (void)unused;
        assign(state, a[0] + 1.0);  // an effect: kept although nothing reads it
        return std::vector<Tensor>{relu(a[0])};
      },
      {x});
  graph::verify(*g);
  const size_t before = g->num_nodes();
  EXPECT_EQ(g->count(OpId::Exp), 1u);
  auto ref = g->clone();
  EXPECT_EQ(graph::dead_code_elimination(*g), 2u);
  EXPECT_EQ(g->num_nodes(), before - 2);
  EXPECT_EQ(g->count(OpId::Exp), 0u);
  EXPECT_EQ(g->count(OpId::Assign), 1u);
  graph::verify(*g);
  expect_same(run(std::move(ref), {x}), run(std::move(g), {x}));
  // The effect ran (twice: once per executor), with x + 1.
  auto s = state.to_vector<float>(), xv = x.to_vector<float>();
  for (size_t i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(s[i], xv[i] + 1);
}

TEST(GraphPasses, CommonSubexpressions) {
  Tensor x = randn({4, 5});
  auto g = graph::trace(
      [](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{exp(a[0]) + exp(a[0]) * relu(a[0]) + relu(a[0])};
      },
      {x});
  EXPECT_EQ(g->count(OpId::Exp), 2u);
  EXPECT_EQ(g->count(OpId::Relu), 2u);
  auto ref = g->clone();
  EXPECT_EQ(graph::common_subexpression_elimination(*g), 2u);
  graph::dead_code_elimination(*g);
  EXPECT_EQ(g->count(OpId::Exp), 1u);
  EXPECT_EQ(g->count(OpId::Relu), 1u);
  graph::verify(*g);
  expect_same(run(std::move(ref), {x}), run(std::move(g), {x}));
}

TEST(GraphPasses, CseDoesNotMergeAcrossAnEffect) {
  Tensor p = ones({3});
  auto g = graph::trace(
      [&](const std::vector<Tensor>& a) {
        Tensor before = p * 2.0;
        assign(p, a[0]);
        Tensor after = p * 2.0;
        return std::vector<Tensor>{before + after};
      },
      {full({3}, 5.0)});
  const size_t muls = g->count(OpId::Mul);
  graph::common_subexpression_elimination(*g);
  EXPECT_EQ(g->count(OpId::Mul), muls);
  auto out = run(std::move(g), {full({3}, 5.0)});
  EXPECT_FLOAT_EQ(out[0], 2.0f + 10.0f);
}

TEST(GraphPasses, ConstantFolding) {
  Tensor x = randn({2, 3});
  auto g = graph::trace(
      [](const std::vector<Tensor>& a) {
        Tensor c = exp(ones({2, 3}) * 2.0);  // all-constant subgraph: folded
        return std::vector<Tensor>{a[0] + c};
      },
      {x});
  EXPECT_EQ(g->count(OpId::Exp), 1u);
  auto ref = g->clone();
  const size_t before = g->num_nodes();
  EXPECT_GE(graph::constant_folding(*g), 2u);
  EXPECT_EQ(g->count(OpId::Exp), 0u);
  EXPECT_EQ(g->num_nodes(), 1u);
  EXPECT_LT(g->num_nodes(), before);
  graph::verify(*g);
  expect_same(run(std::move(ref), {x}), run(std::move(g), {x}));
}

TEST(GraphPasses, AlgebraicSimplification) {
  Tensor x = randn({2, 3, 4});
  auto g = graph::trace(
      [](const std::vector<Tensor>& a) {
        Tensor y = a[0] * ones({2, 3, 4}) + zeros({2, 3, 4});  // x*1 + 0
        y = neg(neg(y));                                       // neg(neg(y))
        y = y.permute({1, 0, 2}).permute({1, 0, 2});           // cancelling permutes
        y = y.reshape({6, 4}).reshape({24});                   // reshape chain
        return std::vector<Tensor>{relu(y)};
      },
      {x});
  auto ref = g->clone();
  EXPECT_EQ(g->count(OpId::Reshape), 2u);
  EXPECT_GT(graph::algebraic_simplification(*g), 0u);
  graph::dead_code_elimination(*g);
  graph::verify(*g);
  EXPECT_EQ(g->count(OpId::Mul), 0u);
  EXPECT_EQ(g->count(OpId::Add), 0u);
  EXPECT_EQ(g->count(OpId::Neg), 0u);
  EXPECT_EQ(g->count(OpId::Permute), 0u);
  EXPECT_EQ(g->count(OpId::Reshape), 1u);
  EXPECT_EQ(g->num_nodes(), 2u);  // reshape, relu
  expect_same(run(std::move(ref), {x}), run(std::move(g), {x}));
}

// x * sigmoid(x) and sigmoid(x) * x -> silu(x) (ONNX's spelling of SiLU); a sigmoid that something
// else also reads (a gradient, another output) is left alone, as is sigmoid(x) * z.
TEST(GraphPasses, MulSigmoidBecomesSilu) {
  Tensor x = randn({2, 3, 4}), z = randn({2, 3, 4});
  auto g = graph::trace(
      [](const std::vector<Tensor>& a) {
        const Tensor s = sigmoid(a[1]);  // read twice: stays
        const Tensor u = a[0] + 1.0;
        return std::vector<Tensor>{a[0] * sigmoid(a[0]), sigmoid(u) * u, a[1] * s, s,
                                   sigmoid(a[0]) * a[1]};
      },
      {x, z});
  auto ref = g->clone();
  EXPECT_EQ(graph::algebraic_simplification(*g), 2u);
  graph::dead_code_elimination(*g);
  graph::verify(*g);
  EXPECT_EQ(g->count(OpId::Silu), 2u);
  EXPECT_EQ(g->count(OpId::Mul), 2u);
  EXPECT_EQ(g->count(OpId::Sigmoid), 2u);
  expect_same(run(std::move(ref), {x, z}), run(std::move(g), {x, z}));
}

// YOLOv5's detect head: sigmoid(permute(reshape(conv))) -> copy(permute(reshape(sigmoid(conv)))),
// so the sigmoid runs on contiguous memory next to its producer (where a backend fuses it); its
// readers, a slice among them, still see a contiguous output. A view something else reads, a
// random op and a contiguous view of a graph input's reader are left alone where they must be.
TEST(GraphPasses, PointwiseOpMovesBeforeLayoutViews) {
  Tensor x = randn({2, 12, 3, 5}), z = randn({2, 3, 4});
  auto g = graph::trace(
      [](const std::vector<Tensor>& a) {
        const Tensor h = a[0] * 2.0;  // the "conv"
        const Tensor p = h.reshape({2, 3, 4, 3, 5}).permute({0, 1, 3, 4, 2});
        const Tensor y = sigmoid(p);
        const Tensor q = a[1] + 1.0;
        const Tensor qt = q.permute({0, 2, 1});  // read twice below: stays
        return std::vector<Tensor>{y.slice(4, 0, 2) * 3.0, y, exp(qt), qt + 1.0};
      },
      {x, z});
  auto ref = g->clone();
  // Round 1 moves the sigmoid before the permute (with a copy after it), round 2 before the
  // reshape, next to the multiply.
  EXPECT_EQ(graph::algebraic_simplification(*g), 1u);
  EXPECT_EQ(graph::algebraic_simplification(*g), 1u);
  EXPECT_EQ(graph::algebraic_simplification(*g), 0u);
  graph::dead_code_elimination(*g);
  graph::verify(*g);
  EXPECT_EQ(g->count(OpId::Sigmoid), 1u);
  EXPECT_EQ(g->count(OpId::Copy), 1u);
  for (const auto& n : g->nodes)
    if (n->op == OpId::Sigmoid) {
      ASSERT_NE(n->inputs[0]->producer, nullptr);
      EXPECT_EQ(n->inputs[0]->producer->op, OpId::Mul);
    }
  expect_same(run(std::move(ref), {x, z}), run(std::move(g), {x, z}));
}

// transpose(x^T @ dy) -> dy^T @ x (how a Dense weight gradient is traced): one matmul on two
// transpose views, its output contiguous; a product something else also reads is left alone.
TEST(GraphPasses, TransposeMovesIntoMatmul) {
  Tensor x = randn({6, 5}), dy = randn({6, 4});
  auto g = graph::trace(
      [](const std::vector<Tensor>& a) {
        Tensor gw = matmul(a[0].permute({1, 0}), a[1]).permute({1, 0});  // (4, 5), strided
        Tensor shared = matmul(a[0], a[0].permute({1, 0}));
        return std::vector<Tensor>{gw * 2.0, shared.permute({1, 0}) + shared};
      },
      {x, dy});
  auto ref = g->clone();
  for (int round = 0; round < 2; ++round) {  // the second round folds permute(permute(x))
    graph::algebraic_simplification(*g);
    graph::dead_code_elimination(*g);
  }
  graph::verify(*g);
  EXPECT_EQ(g->count(OpId::Matmul), 2u);
  for (const auto& n : g->nodes)
    if (n->op == OpId::Matmul && n->outputs[0]->shape == Shape{4, 5}) {
      EXPECT_TRUE(n->outputs[0]->is_contiguous());
      EXPECT_EQ(n->inputs[1]->producer, nullptr);  // x itself: the two transposes cancelled
    }
  const auto want = test::run_graph_all(std::move(ref), {x, dy}),
             got = test::run_graph_all(std::move(g), {x, dy});
  for (size_t k = 0; k < 2; ++k)
    for (size_t i = 0; i < want[k].size(); ++i)
      EXPECT_NEAR(got[k][i], want[k][i], 1e-5) << k << " " << i;
}

// relu -> max pool: the backward's relu_grad moves before the pool's backward, onto the pooled
// (4x smaller) tensor, and computes the same gradient (exactly: the same mask on the same terms).
TEST(GraphPasses, ReluGradMovesBeforeMaxPoolBackward) {
  set_seed(5);
  Tensor x = randn({2, 4, 8, 8});
  Tensor w = (randn({8, 4, 3, 3}) * 0.3).set_requires_grad(true), probe = randn({2, 8, 4, 4});
  auto g = graph::trace(
      [&](const std::vector<Tensor>& a) {
        EnableGradGuard eg;
        Tensor y = max_pool2d(relu(conv2d(a[0], w, {.padding = {1, 1, 1, 1}})), 2);
        Tensor loss = (y * probe).sum();
        return std::vector<Tensor>{loss, autograd::grad(loss, {w})[0]};
      },
      {x});
  auto ref = g->clone();
  EXPECT_GT(graph::algebraic_simplification(*g), 0u);
  graph::dead_code_elimination(*g);
  graph::verify(*g);
  ASSERT_EQ(g->count(OpId::ReluGrad), 1u);
  for (const auto& n : g->nodes)
    if (n->op == OpId::ReluGrad) {
      EXPECT_EQ(n->outputs[0]->shape, (Shape{2, 8, 4, 4}));  // the pooled shape
      EXPECT_EQ(n->inputs[1]->producer->op, OpId::MaxPool2d);
    }
  const auto want = test::run_graph_all(std::move(ref), {x}),
             got = test::run_graph_all(std::move(g), {x});
  for (size_t k = 0; k < 2; ++k) expect_same(got[k], want[k]);
}

TEST(GraphPasses, PipelineAndDump) {
  const std::string dir = std::string(SPORE_BINARY_DIR) + "/graph_dump_test";
  setenv("SPORE_DUMP_IR", dir.c_str(), 1);
  Tensor x = randn({8});
  auto g = graph::trace(
      [](const std::vector<Tensor>& a) { return std::vector<Tensor>{exp(a[0]) * 1.0 + exp(a[0])}; },
      {x}, "dumped");
  auto ref = g->clone();
  graph::run_pipeline(*g);
  unsetenv("SPORE_DUMP_IR");
  EXPECT_EQ(g->count(OpId::FusedElementwise), 1u);
  EXPECT_EQ(g->num_nodes(), 1u);  // exp, add (after CSE), then fused: passes/elementwise_fusion.cpp
  EXPECT_TRUE(std::filesystem::exists(dir + "/dumped.00.traced.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/dumped.01.dce.txt"));
  expect_same(run(std::move(ref), {x}), run(std::move(g), {x}));
}

TEST(GraphPasses, MemoryPlanReusesBuffers) {
  Tensor x = randn({256});
  auto g = graph::trace(
      [](const std::vector<Tensor>& a) {
        Tensor y = a[0];
        for (int i = 0; i < 10; ++i) y = exp(y * 0.5);
        return std::vector<Tensor>{y};
      },
      {x});
  const graph::MemoryPlan plan = graph::plan_memory(*g);
  // 21 buffers of 1 KiB: the arg (kept), then a chain of pointwise ops that each write over their
  // dying input, so all 20 intermediates share one buffer.
  EXPECT_EQ(plan.total_bytes, 21u * 1024u);
  EXPECT_EQ(plan.inplace, 19u);
  EXPECT_EQ(plan.arena_bytes, 2u * 1024u);
  // The checker (what a plan read from a model file must pass) takes the planner's aliases.
  EXPECT_EQ(graph::memory_plan_error(*g, plan), "");
  // No two buffers that are live at once overlap: checked by the numbers.
  Tensor ref = x;
  for (int i = 0; i < 10; ++i) ref = exp(ref * 0.5);
  auto got = run(std::move(g), {x});
  auto want = ref.to_vector<float>();
  expect_same(want, got);
}

TEST(GraphPasses, MemoryPlanWithoutInplaceKeepsLiveBuffersApart) {
  // matmul is not pointwise: its output never shares its inputs' buffers; two dying inputs are
  // reused by later nodes.
  Tensor x = randn({16, 16});
  auto g = graph::trace(
      [](const std::vector<Tensor>& a) {
        Tensor y = matmul(a[0], a[0]);  // 1 KiB
        Tensor z = matmul(y, y);        // y dies here
        Tensor w = matmul(z, a[0]);     // z dies here
        return std::vector<Tensor>{w};
      },
      {x});
  const graph::MemoryPlan plan = graph::plan_memory(*g);
  EXPECT_EQ(plan.inplace, 0u);
  EXPECT_EQ(plan.total_bytes, 4u * 1024u);
  EXPECT_EQ(plan.arena_bytes, 3u * 1024u);  // arg + two live at each matmul
  EXPECT_EQ(graph::memory_plan_error(*g, plan), "");
  // The checker refuses what the planner never makes: a matmul writing over its dying input (not
  // pointwise), a buffer past its arena, a misaligned offset, a missing value.
  const std::vector<const graph::Value*> vals = graph::planned_values(*g);
  ASSERT_EQ(vals.size(), 4u);  // x, y, z, w
  graph::MemoryPlan bad = plan;
  bad.offset[vals[2]] = bad.offset.at(vals[1]);  // z over y, live together at z's matmul
  EXPECT_NE(graph::memory_plan_error(*g, bad).find("are live at once but share bytes"),
            std::string::npos);
  bad = plan;
  bad.offset[vals[3]] = plan.arenas[0].second;  // w starts at the arena's end
  EXPECT_NE(graph::memory_plan_error(*g, bad).find("inside its 3072-byte arena"),
            std::string::npos);
  bad = plan;
  bad.offset[vals[3]] += 4;
  EXPECT_NE(graph::memory_plan_error(*g, bad).find("not 64-byte aligned"), std::string::npos);
  bad = plan;
  bad.offset.erase(vals[0]);
  EXPECT_NE(graph::memory_plan_error(*g, bad).find("no offset for a placeholder"),
            std::string::npos);
  Tensor ref = matmul(matmul(matmul(x, x), matmul(x, x)), x);
  expect_same(ref.to_vector<float>(), run(std::move(g), {x}));
}

// Random elementwise graphs (with repeated subexpressions, constant subgraphs and identities for
// the passes to find): the optimised graph computes exactly what the traced one does.
TEST(GraphPasses, RandomGraphsOptimisedEqualUnoptimised) {
  for (uint64_t seed = 0; seed < 12; ++seed) {
    set_seed(100 + seed);
    Tensor x = randn({3, 4}), y = randn({3, 4});
    std::vector<int> script;
    for (int i = 0; i < 24; ++i) script.push_back(int(randint(0, 9, {1}).item<int64_t>()));
    auto fn = [&](const std::vector<Tensor>& a) {
      std::vector<Tensor> pool{a[0], a[1], ones({3, 4}) * 0.5};
      for (size_t i = 0; i < script.size(); ++i) {
        const Tensor& p = pool[(i * 7 + 3) % pool.size()];
        const Tensor& q = pool[(i * 5 + 1) % pool.size()];
        Tensor r;
        switch (script[i]) {
          case 0:
            r = p + q;
            break;
          case 1:
            r = p * q;
            break;
          case 2:
            r = tanh(p) - q;
            break;
          case 3:
            r = relu(p) * 1.0;
            break;
          case 4:
            r = neg(neg(p)) + 0.0;
            break;
          case 5:
            r = p.t().t() * q;
            break;
          case 6:
            r = p.reshape({12}).reshape({4, 3}).reshape({3, 4});
            break;
          case 7:
            r = exp(tanh(p)) + exp(tanh(p));
            break;  // a repeated subexpression
          default:
            r = sigmoid(q) * (ones({3, 4}) + 1.0);
            break;
        }
        pool.push_back(r);
      }
      return std::vector<Tensor>{pool.back() + pool[pool.size() / 2]};
    };
    auto g = graph::trace(fn, {x, y});
    auto ref = g->clone();
    const size_t before = g->num_nodes();
    graph::run_pipeline(*g);
    EXPECT_LE(g->num_nodes(), before);
    EXPECT_EQ(graph::memory_plan_error(*g, graph::plan_memory(*g)), "") << "seed " << seed;
    auto want = run(std::move(ref), {x, y}), got = run(std::move(g), {x, y});
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << "seed " << seed;
  }
}
