// PyNative autograd: value_and_grad / grad, the tape only recording while wanted, no_grad,
// stop_gradient, gradients through views and broadcasting, fan-in accumulation, higher order.
#include <gtest/gtest.h>

#include "spore/spore.h"

namespace spore {
namespace {

TEST(Autograd, ValueAndGradOfAPolynomial) {
  Tensor x = tensor({1, 2, 3}, kFloat64);
  auto f = [](const Tensor& v) { return (v * v * v + 2.0 * v).sum(); };  // sum(x^3 + 2x)
  auto [value, grads] = value_and_grad(f, {x})(x);
  EXPECT_DOUBLE_EQ(value.item<double>(), 1 + 8 + 27 + 2 * 6);
  EXPECT_EQ(grads[0].to_vector<double>(), (std::vector<double>{5, 14, 29}));  // 3x^2 + 2
  EXPECT_FALSE(x.requires_grad());                                            // restored afterwards
}

TEST(Autograd, BroadcastGradientsAreSummedBack) {
  Tensor a = ones({2, 3}, kFloat64), b = tensor({1, 2, 3}, kFloat64);
  auto g = grad([](const Tensor& p, const Tensor& q) { return (p * q).sum(); }, {a, b})(a, b);
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(g[1].shape(), (Shape{3}));
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{2, 2, 2}));
}

TEST(Autograd, ViewsCarryGradients) {
  Tensor x = arange(0, 12, 1, kFloat64).reshape({3, 4});
  auto g = grad([](const Tensor& v) { return (v.transpose(0, 1).slice(0, 1, 4, 2) * 2.0).sum(); },
                {x})(x);
  // transposed (4, 3); rows 1 and 3 of it = columns 1 and 3 of x
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2}));
  auto ge = grad([](const Tensor& v) { return v.reshape({12, 1}).expand({12, 5}).sum(); }, {x})(x);
  EXPECT_EQ(ge[0].to_vector<double>(), std::vector<double>(12, 5.0));
}

TEST(Autograd, FanInAccumulates) {
  Tensor x = tensor({2.0}, kFloat64);
  auto g = grad(
      [](const Tensor& v) {
        Tensor y = v * 3.0;
        return (y + y * v).sum();
      },
      {x})(x);
  EXPECT_DOUBLE_EQ(g[0].item<double>(), 3 + 6 * 2);  // d/dx (3x + 3x^2)
}

TEST(Autograd, NoGradAndStopGradient) {
  Tensor x = tensor({1, 2}).set_requires_grad();
  {
    NoGradGuard ng;
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
  }
  Tensor y = x * 2.0;
  EXPECT_TRUE(y.requires_grad());
  auto g = autograd::grad((stop_gradient(y) * x).sum(), {x});
  EXPECT_EQ(g[0].to_vector<float>(), (std::vector<float>{2, 4}));  // y treated as a constant
}

TEST(Autograd, BackwardAccumulatesIntoLeaves) {
  Tensor w = tensor({1, -1}).set_requires_grad();
  (w * w).sum().backward();
  (w * 3.0).sum().backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2 + 3, -2 + 3}));
  w.zero_grad();
  EXPECT_FALSE(w.grad().defined());
}

TEST(Autograd, SensScalesTheOutputGradient) {
  Tensor x = tensor({1, 2}, kFloat64);
  auto [v, g] = value_and_grad([](const Tensor& t) { return (t * t).sum(); }, {x},
                               scalar_tensor(0.5, kFloat64))(x);
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{1, 2}));
}

TEST(Autograd, SecondDerivativeWithCreateGraph) {
  Tensor x = tensor({3.0}, kFloat64).set_requires_grad();
  Tensor y = (x * x * x).sum();
  Tensor dy = autograd::grad(y, {x}, {.create_graph = true})[0];  // 3x^2 = 27
  EXPECT_DOUBLE_EQ(dy.item<double>(), 27);
  Tensor d2 = autograd::grad(dy.sum(), {x})[0];  // 6x = 18
  EXPECT_DOUBLE_EQ(d2.item<double>(), 18);
}

TEST(Autograd, UnusedInputGetsZeros) {
  Tensor a = tensor({1, 2}), b = tensor({5, 6});
  auto g = grad([](const Tensor& p, const Tensor&) { return p.sum(); }, {a, b})(a, b);
  EXPECT_EQ(g[1].to_vector<float>(), (std::vector<float>{0, 0}));
}

TEST(Autograd, IntegerTensorsCannotRequireGrad) {
  Tensor i = tensor({1, 2}, kInt32);
  EXPECT_THROW(i.set_requires_grad(), Error);
}

}  // namespace
}  // namespace spore
