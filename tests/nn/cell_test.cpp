// nn::Cell: registration order, dotted names, shared-weight dedupe, set_train, to(dtype), repr,
// SequentialCell and CellList.
#include <gtest/gtest.h>

#include "nn_test_util.h"
#include "spore/nn/nn.h"

using namespace spore;
using nn_test::expect_error;

namespace {

struct Block : nn::Cell {
  nn::Dense fc{4, 3};
  nn::BatchNorm1d bn{3};
  Block() {
    set_cls_name("Block");
    register_cells("fc", fc, "bn", bn);
  }
  Tensor construct(const Tensor& x) override { return bn(fc(x)); }
};

struct Net : nn::Cell {
  nn::Conv2d conv{1, 2, 3, {.has_bias = true}};
  std::shared_ptr<Block> block = std::make_shared<Block>();
  nn::Dense head{3, 2, {.has_bias = false}};
  Net() {
    register_parameter("scale", ones({1}));
    register_cell("conv", conv);
    register_cell("block", block);
    register_cell("head", head);
  }
};

std::vector<std::string> names(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> out;
  for (auto& [n, _] : v) out.push_back(n);
  return out;
}

}  // namespace

TEST(Cell, NamedParametersInRegistrationOrder) {
  Net net;
  EXPECT_EQ(names(net.named_parameters()),
            (std::vector<std::string>{"scale", "conv.weight", "conv.bias", "block.fc.weight",
                                      "block.fc.bias", "block.bn.gamma", "block.bn.beta",
                                      "head.weight"}));
  EXPECT_EQ(names(net.named_buffers()),
            (std::vector<std::string>{"block.bn.moving_mean", "block.bn.moving_variance"}));
  EXPECT_EQ(names(net.named_parameters("net"))[1], "net.conv.weight");
  EXPECT_EQ(net.parameters().size(), 8u);
  EXPECT_EQ(net.trainable_params().size(), 8u);
  EXPECT_EQ(net.parameters_and_buffers().size(), 10u);
  std::vector<std::string> cells;
  for (auto& [n, _] : net.named_cells()) cells.push_back(n);
  EXPECT_EQ(cells, (std::vector<std::string>{"", "conv", "block", "block.fc", "block.bn", "head"}));
}

TEST(Cell, ParameterShapesAndLookup) {
  Net net;
  EXPECT_EQ(net.conv.weight().shape(), (Shape{2, 1, 3, 3}));
  EXPECT_EQ(net.block->fc.weight().shape(), (Shape{3, 4}));
  EXPECT_TRUE(net.parameter("block.fc.weight").is_same(net.block->fc.weight()));
  EXPECT_TRUE(net.buffer("block.bn.moving_mean").is_same(net.block->bn.moving_mean()));
  EXPECT_TRUE(net.conv.weight().requires_grad());
  EXPECT_TRUE(net.conv.weight().is_leaf());
  expect_error([&] { net.parameter("nope"); }, "has no parameter 'nope'");
  expect_error([&] { net.parameter("block.nope.weight"); }, "has no sub-cell 'nope'");
  expect_error([&] { net.register_parameter("scale", ones({1})); }, "already registered");
  expect_error([&] { net.register_parameter("a.b", ones({1})); }, "contain no '.'");
  expect_error([&] { net.register_parameter("idx", zeros({2}, kInt64)); }, "floating-point");
  net.register_parameter("steps", zeros({1}, kInt64), /*requires_grad=*/false);
  EXPECT_EQ(net.trainable_params().size(), 8u);
  EXPECT_EQ(net.parameters().size(), 9u);
}

TEST(Cell, SharedWeightsAndCellsAppearOnce) {
  auto shared = std::make_shared<nn::Dense>(2, 2);
  nn::SequentialCell seq{shared, std::make_shared<nn::ReLU>(), shared};
  EXPECT_EQ(seq.parameters().size(), 2u);
  EXPECT_EQ(names(seq.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
}

TEST(Cell, SetTrainPropagates) {
  Net net;
  EXPECT_TRUE(net.training());
  net.set_train(false);
  for (auto& [n, c] : net.named_cells()) EXPECT_FALSE(c->training()) << n;
  net.set_train();
  for (auto& [n, c] : net.named_cells()) EXPECT_TRUE(c->training()) << n;
}

TEST(Cell, ToFloat64KeepsSlotsAndRequiresGrad) {
  Net net;
  Tensor& w = net.conv.weight();
  const std::vector<double> before = w.to_vector<double>();
  net.register_parameter("frozen", ones({2}), false);
  net.register_buffer("count", zeros({1}, kInt32));
  net.to(kFloat64);
  for (auto& [n, t] : net.named_parameters()) {
    EXPECT_EQ(t.dtype(), kFloat64) << n;
    EXPECT_TRUE(t.is_leaf()) << n;
    EXPECT_EQ(t.requires_grad(), n != "frozen") << n;
  }
  for (auto& [n, t] : net.named_buffers())
    EXPECT_EQ(t.dtype(), n == "count" ? kInt32 : kFloat64) << n;
  // The reference taken before the cast names the new tensor, with the same values.
  EXPECT_EQ(w.dtype(), kFloat64);
  nn_test::expect_close(w, before, 1e-7);
  // And the layers compute in float64.
  Tensor y = net.block->fc(ones({2, 4}, kFloat64));
  EXPECT_EQ(y.dtype(), kFloat64);
  expect_error([&] { net.to(kInt32); }, "expected a floating dtype");
}

TEST(Cell, Repr) {
  nn::SequentialCell seq{std::make_shared<nn::Dense>(3, 4), std::make_shared<nn::ReLU>()};
  EXPECT_EQ(seq.str(),
            "SequentialCell<\n"
            "  (0): Dense<input_channels=3, output_channels=4, has_bias=True>\n"
            "  (1): ReLU<>\n"
            "  >");
  struct Anonymous : nn::Cell {};
  Anonymous a;
  EXPECT_EQ(a.str(), "Anonymous<>");
}

TEST(Cell, SequentialChainsAndCellList) {
  set_seed(3);
  auto fc1 = std::make_shared<nn::Dense>(3, 5);
  auto fc2 = std::make_shared<nn::Dense>(5, 2);
  nn::SequentialCell seq{fc1, std::make_shared<nn::ReLU>(), fc2};
  EXPECT_EQ(seq.size(), 3u);
  Tensor x = randn({4, 3});
  nn_test::expect_close(seq(x), (*fc2)(relu((*fc1)(x))), 1e-6);
  seq.append(std::make_shared<nn::Sigmoid>());
  EXPECT_EQ(seq.named_cells().back().first, "3");

  nn::SequentialCell named(std::vector<std::pair<std::string, nn::CellPtr>>{
      {"dense", std::make_shared<nn::Dense>(2, 2)}, {"act", std::make_shared<nn::Tanh>()}});
  EXPECT_EQ(names(named.named_parameters())[0], "dense.weight");

  nn::CellList list{std::make_shared<nn::Dense>(2, 2), std::make_shared<nn::Dense>(2, 2)};
  EXPECT_EQ(names(list.named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
  expect_error([&] { list(x); }, "construct(x) is not defined");
  expect_error([&] { list[5]; }, "out of range");
}
