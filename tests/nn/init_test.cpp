// Initializers: statistics over large tensors, bounds, seeded reproducibility, names, fans, and
// the Dense / Conv2d defaults (HeUniform(sqrt(5)) weights, Uniform(1/sqrt(fan_in)) biases).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "nn_test_util.h"
#include "spore/nn/nn.h"

using namespace spore;
using nn_test::expect_error;

namespace {
struct Stats {
  double mean, std, min, max;
};
Stats stats(const Tensor& t) {
  const auto v = t.to_vector<double>();
  const double m = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return {m, std::sqrt(s / double(v.size())), *std::min_element(v.begin(), v.end()),
          *std::max_element(v.begin(), v.end())};
}
}  // namespace

TEST(Init, FansAndGain) {
  EXPECT_EQ(nn::calculate_fan_in_and_fan_out({64, 32, 3, 3}),
            (std::pair<int64_t, int64_t>{288, 576}));
  EXPECT_EQ(nn::calculate_fan_in_and_fan_out({10, 400}), (std::pair<int64_t, int64_t>{400, 10}));
  expect_error([] { nn::calculate_fan_in_and_fan_out({5}); }, "fewer than 2 dimensions");
  EXPECT_DOUBLE_EQ(nn::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(nn::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3.0));
  EXPECT_DOUBLE_EQ(nn::calculate_gain("tanh"), 5.0 / 3.0);
  expect_error([] { nn::calculate_gain("swishy"); }, "unsupported nonlinearity");
}

TEST(Init, ConstantsAndNames) {
  nn_test::expect_close(nn::Zero().make({2, 2}), {0, 0, 0, 0});
  nn_test::expect_close(nn::Initializer("ones").make({3}), {1, 1, 1});
  nn_test::expect_close(nn::Constant(2.5).make({2}, kFloat64), {2.5, 2.5});
  EXPECT_EQ(nn::Initializer("zeros").kind(), nn::Initializer::Kind::Zero);
  EXPECT_EQ(nn::Initializer("HE_UNIFORM").kind(), nn::Initializer::Kind::HeUniform);
  EXPECT_EQ(nn::Initializer("truncatednormal").kind(), nn::Initializer::Kind::TruncatedNormal);
  EXPECT_EQ(nn::Initializer("xavier_uniform").kind(), nn::Initializer::Kind::XavierUniform);
  expect_error([] { nn::Initializer("glorot"); }, "unknown initializer 'glorot'");
  expect_error([] { nn::Normal().make({2}, kInt32); }, "needs a floating dtype");
  Tensor given = tensor({{1, 2}, {3, 4}});
  nn_test::expect_close(nn::Initializer(given).make({2, 2}, kFloat64), {1, 2, 3, 4});
  expect_error([&] { nn::Initializer(given).make({4}); }, "needs shape (4,)");
}

TEST(Init, RandomStatistics) {
  set_seed(1);
  const Shape big{256, 1024};  // fan_in 1024, fan_out 256
  {
    Stats s = stats(nn::Uniform(0.5).make(big));
    EXPECT_NEAR(s.mean, 0, 0.005);
    EXPECT_NEAR(s.std, 0.5 / std::sqrt(3.0), 0.005);
    EXPECT_GE(s.min, -0.5);
    EXPECT_LE(s.max, 0.5);
  }
  {
    Stats s = stats(nn::Normal(0.02, 1.0).make(big));
    EXPECT_NEAR(s.mean, 1.0, 0.001);
    EXPECT_NEAR(s.std, 0.02, 0.0005);
  }
  {
    Stats s = stats(nn::TruncatedNormal(1.0, 0.0, -1.0, 1.0).make(big, kFloat64));
    EXPECT_NEAR(s.mean, 0, 0.01);
    EXPECT_GE(s.min, -1.0);
    EXPECT_LE(s.max, 1.0);
    EXPECT_NEAR(s.std, 0.5396, 0.01);  // std of N(0, 1) truncated to [-1, 1]
  }
  {
    // HeUniform(0): bound = sqrt(2) * sqrt(3 / fan_in).
    const double bound = std::sqrt(2.0) * std::sqrt(3.0 / 1024);
    Stats s = stats(nn::HeUniform().make(big));
    EXPECT_LE(s.max, bound);
    EXPECT_GE(s.min, -bound);
    EXPECT_NEAR(s.std, bound / std::sqrt(3.0), 0.02 * bound);
    Stats so = stats(nn::HeUniform(0, "fan_out").make(big));
    EXPECT_NEAR(so.std, std::sqrt(2.0) / std::sqrt(256.0), 0.002);
  }
  {
    Stats s = stats(nn::HeNormal(0, "fan_in", "relu").make(big));
    EXPECT_NEAR(s.std, std::sqrt(2.0 / 1024), 0.001);
  }
  {
    const double bound = std::sqrt(6.0 / (1024 + 256));
    Stats s = stats(nn::XavierUniform().make(big));
    EXPECT_LE(s.max, bound);
    EXPECT_NEAR(s.std, bound / std::sqrt(3.0), 0.02 * bound);
    Stats n = stats(nn::XavierNormal(2.0).make(big));
    EXPECT_NEAR(n.std, 2.0 * std::sqrt(2.0 / (1024 + 256)), 0.002);
  }
}

TEST(Init, SeedReproduces) {
  for (const char* name : {"normal", "uniform", "truncatednormal", "he_uniform", "xavier_normal"}) {
    set_seed(42);
    const auto a = nn::Initializer(name).make({16, 8}).to_vector<float>();
    const auto b = nn::Initializer(name).make({16, 8}).to_vector<float>();
    set_seed(42);
    const auto c = nn::Initializer(name).make({16, 8}).to_vector<float>();
    EXPECT_EQ(a, c) << name;
    EXPECT_NE(a, b) << name;
  }
}

TEST(Init, LayerDefaultsFollowMindSpore) {
  set_seed(7);
  nn::Dense fc(400, 300);
  // HeUniform(sqrt(5)) on fan_in 400: bound = sqrt(2 / 6) * sqrt(3 / 400) = 1 / sqrt(400).
  const double bound = 1.0 / std::sqrt(400.0);
  Stats w = stats(fc.weight());
  EXPECT_LE(w.max, bound + 1e-7);
  EXPECT_GE(w.min, -bound - 1e-7);
  EXPECT_NEAR(w.std, bound / std::sqrt(3.0), 0.03 * bound);
  Stats b = stats(fc.bias());
  EXPECT_LE(b.max, bound + 1e-7);
  EXPECT_GE(b.min, -bound - 1e-7);

  nn::Conv2d conv(16, 32, 3, {.has_bias = true});
  const double cb = 1.0 / std::sqrt(16.0 * 9);
  Stats cw = stats(conv.weight());
  EXPECT_LE(cw.max, cb + 1e-7);
  EXPECT_NEAR(cw.std, cb / std::sqrt(3.0), 0.05 * cb);
  EXPECT_LE(stats(conv.bias()).max, cb + 1e-7);

  nn::Dense named(4, 4, {.weight_init = "zeros", .bias_init = nn::Constant(0.5)});
  nn_test::expect_close(named.weight().sum(), {0.0});
  nn_test::expect_close(named.bias(), {0.5, 0.5, 0.5, 0.5});
  set_seed(9);
  nn::Dense d1(8, 8);
  set_seed(9);
  nn::Dense d2(8, 8);
  EXPECT_EQ(d1.weight().to_vector<float>(), d2.weight().to_vector<float>());
}
