// Graph passes: node counts before and after each pass, and the optimised graph computing the
// same numbers as the unoptimised one (both run by the executor).
#include <gtest/gtest.h>

#include <filesystem>

#include "graph/executor.h"
#include "graph/memory_plan.h"
#include "graph/passes.h"
#include "graph/trace.h"
#include "spore/spore.h"

using namespace spore;
using graph::Graph;
using ops::OpId;

namespace {

std::vector<float> run(std::unique_ptr<Graph> g, const std::vector<Tensor>& args) {
  graph::Executor ex(std::shared_ptr<Graph>(std::move(g)));
  return ex.run(args).at(0).to_vector<float>();
}

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
        Tensor y = a[0] * ones({2, 3, 4}) + zeros({2, 3, 4});   // x*1 + 0
        y = neg(neg(y));                                          // neg(neg(y))
        y = y.permute({1, 0, 2}).permute({1, 0, 2});              // cancelling permutes
        y = y.reshape({6, 4}).reshape({24});                      // reshape chain
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
  EXPECT_EQ(g->count(OpId::Exp), 1u);
  EXPECT_EQ(g->num_nodes(), 2u);  // exp, add
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
  // 21 buffers of 1 KiB live in turn: the arg, and at most two intermediates at once.
  EXPECT_EQ(plan.total_bytes, 21u * 1024u);
  EXPECT_LE(plan.arena_bytes, 3u * 1024u);
  // No two buffers that are live at once overlap: checked by the numbers.
  Tensor ref = x;
  for (int i = 0; i < 10; ++i) ref = exp(ref * 0.5);
  auto got = run(std::move(g), {x});
  auto want = ref.to_vector<float>();
  expect_same(want, got);
}
