// BatchNorm (train output, MindSpore moving-statistics convention, eval, use_batch_statistics,
// 1d shapes, gradients) and LayerNorm against explicit loops.
#include <gtest/gtest.h>

#include <cmath>

#include "nn_test_util.h"
#include "spore/nn/nn.h"

using namespace spore;
using nn_test::expect_close;
using nn_test::expect_error;

namespace {
// Per-channel mean, biased and unbiased variance of x (N, C, S) flattened over N and S.
struct ChannelStats {
  std::vector<double> mean, var_biased, var_unbiased;
};
ChannelStats channel_stats(const std::vector<double>& x, int64_t N, int64_t C, int64_t S) {
  ChannelStats s;
  const double n = double(N * S);
  for (int64_t c = 0; c < C; ++c) {
    double m = 0;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < S; ++j) m += x[size_t((i * C + c) * S + j)];
    m /= n;
    double v = 0;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < S; ++j) v += std::pow(x[size_t((i * C + c) * S + j)] - m, 2);
    s.mean.push_back(m);
    s.var_biased.push_back(v / n);
    s.var_unbiased.push_back(v / (n - 1));
  }
  return s;
}
std::vector<double> normalize(const std::vector<double>& x, int64_t N, int64_t C, int64_t S,
                              const std::vector<double>& mean, const std::vector<double>& var,
                              const std::vector<double>& g, const std::vector<double>& b,
                              double eps) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < N; ++i)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < S; ++j) {
        const size_t k = size_t((i * C + c) * S + j);
        y[k] = (x[k] - mean[size_t(c)]) / std::sqrt(var[size_t(c)] + eps) * g[size_t(c)] +
               b[size_t(c)];
      }
  return y;
}
}  // namespace

TEST(BatchNorm, TrainStepAndMovingStatistics) {
  set_seed(6);
  nn::BatchNorm2d bn(3);
  EXPECT_EQ(bn.gamma().shape(), (Shape{3}));
  {
    NoGradGuard ng;
    assign(bn.gamma(), tensor({0.5, 1.0, 2.0}));
    assign(bn.beta(), tensor({0.1, -0.2, 0.3}));
  }
  Tensor x = randn({4, 3, 2, 5}) * 2.0 + 1.0;
  const auto xv = x.to_vector<double>();
  Tensor y = bn(x);
  auto st = channel_stats(xv, 4, 3, 10);
  expect_close(y,
               normalize(xv, 4, 3, 10, st.mean, st.var_biased, {0.5, 1, 2}, {0.1, -0.2, 0.3}, 1e-5),
               1e-4);
  // MindSpore: moving = 0.9 * moving + 0.1 * batch, with the unbiased batch variance.
  std::vector<double> mm, mv;
  for (int c = 0; c < 3; ++c) {
    mm.push_back(0.1 * st.mean[size_t(c)]);
    mv.push_back(0.9 + 0.1 * st.var_unbiased[size_t(c)]);
  }
  expect_close(bn.moving_mean(), mm, 1e-5);
  expect_close(bn.moving_variance(), mv, 1e-5);
  EXPECT_FALSE(bn.moving_mean().requires_grad());

  // Eval uses the moving statistics and leaves them alone.
  bn.set_train(false);
  Tensor ye = bn(x);
  expect_close(ye, normalize(xv, 4, 3, 10, mm, mv, {0.5, 1, 2}, {0.1, -0.2, 0.3}, 1e-5), 1e-4);
  expect_close(bn.moving_mean(), mm, 1e-5);
}

TEST(BatchNorm, UseBatchStatisticsAndOneD) {
  set_seed(12);
  nn::BatchNorm1d fixed(4, {.use_batch_statistics = false});
  Tensor x = randn({8, 4});
  expect_close(fixed(x), x / std::sqrt(1 + 1e-5), 1e-5);  // moving stats 0 / 1
  nn::BatchNorm1d bn(4, {.momentum = 0.5});
  bn.set_train(false);
  nn::BatchNorm1d forced(4, {.momentum = 0.5, .use_batch_statistics = true});
  forced.set_train(false);
  const auto xv = x.to_vector<double>();
  auto st = channel_stats(xv, 8, 4, 1);
  expect_close(forced(x),
               normalize(xv, 8, 4, 1, st.mean, st.var_biased, {1, 1, 1, 1}, {0, 0, 0, 0}, 1e-5),
               1e-4);
  std::vector<double> mm;
  for (double m : st.mean) mm.push_back(0.5 * m);
  expect_close(forced.moving_mean(), mm, 1e-5);
  // (N, C, L)
  nn::BatchNorm1d bn3(2);
  Tensor x3 = randn({3, 2, 5});
  auto s3 = channel_stats(x3.to_vector<double>(), 3, 2, 5);
  expect_close(
      bn3(x3),
      normalize(x3.to_vector<double>(), 3, 2, 5, s3.mean, s3.var_biased, {1, 1}, {0, 0}, 1e-5),
      1e-4);
  expect_error(
      [&] {
        bn3(zeros({3, 3, 5}));
      },
      "[BatchNorm1d] expected input (N, C) or (N, C, L) with 2 channels, got shape (3, 3, 5)");
  nn::BatchNorm2d bn2(2);
  expect_error([&] { bn2(zeros({3, 2})); }, "[BatchNorm2d] expected input (N, C, H, W)");
  nn::BatchNorm1d frozen(3, {.affine = false});
  EXPECT_EQ(frozen.trainable_params().size(), 0u);
  EXPECT_EQ(frozen.parameters().size(), 2u);
}

TEST(BatchNorm, GradientsFloat64) {
  set_seed(13);
  nn::BatchNorm2d bn(2, {.dtype = kFloat64});
  {
    NoGradGuard ng;
    assign(bn.gamma(), tensor({1.5, -0.5}));
  }
  Tensor x = randn({3, 2, 2, 2}, kFloat64);
  nn_test::grad_check([&](const Tensor& in) { return bn(in); }, x, 1e-6, 1e-5, "bn input");
}

TEST(LayerNorm, MatchesLoops) {
  set_seed(14);
  Tensor x = randn({2, 3, 4});
  const auto xv = x.to_vector<double>();
  auto ln_ref = [&](int64_t groups, int64_t size, const std::vector<double>& g,
                    const std::vector<double>& b, bool per_last) {
    std::vector<double> y(xv.size());
    for (int64_t r = 0; r < groups; ++r) {
      double m = 0, v = 0;
      for (int64_t j = 0; j < size; ++j) m += xv[size_t(r * size + j)];
      m /= double(size);
      for (int64_t j = 0; j < size; ++j) v += std::pow(xv[size_t(r * size + j)] - m, 2);
      v /= double(size);
      for (int64_t j = 0; j < size; ++j) {
        const size_t gi = size_t(per_last ? j % 4 : j);
        y[size_t(r * size + j)] =
            (xv[size_t(r * size + j)] - m) / std::sqrt(v + 1e-7) * g[gi] + b[gi];
      }
    }
    return y;
  };
  nn::LayerNorm ln(
      {4}, {.gamma_init = nn::Initializer(tensor({1, 2, 3, 4})), .beta_init = nn::Constant(0.5)});
  expect_close(ln(x), ln_ref(6, 4, {1, 2, 3, 4}, {0.5, 0.5, 0.5, 0.5}, true), 1e-4);
  nn::LayerNorm ln2({3, 4}, {.begin_norm_axis = 1, .begin_params_axis = 1});
  expect_close(ln2(x), ln_ref(2, 12, std::vector<double>(12, 1), std::vector<double>(12, 0), false),
               1e-4);
  // Normalise over (3, 4) but scale per last axis only.
  nn::LayerNorm ln3({4},
                    {.begin_norm_axis = 1, .gamma_init = nn::Initializer(tensor({1, 2, 3, 4}))});
  expect_close(ln3(x), ln_ref(2, 12, {1, 2, 3, 4}, {0, 0, 0, 0}, true), 1e-4);
  expect_error(
      [&] {
        ln(zeros({2, 5}));
      },
      "[LayerNorm] expected input whose dims from axis 1 are (4,)");
  EXPECT_EQ(ln.named_parameters()[0].first, "gamma");
}
