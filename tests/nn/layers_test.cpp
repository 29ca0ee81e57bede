// Layers against explicit loops: Dense, Conv2d (same / valid / pad, stride, dilation, group),
// pooling, Embedding, Upsample, Flatten, Dropout, activations; and their input checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "nn_test_util.h"
#include "spore/nn/nn.h"

using namespace spore;
using nn_test::expect_close;
using nn_test::expect_error;

namespace {

struct ConvRef {
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, groups = 1;
  std::vector<int64_t> pads{0, 0, 0, 0};  // top, bottom, left, right
};

// The textbook loop; returns the output and its shape.
std::vector<double> naive_conv(const Tensor& xt, const Tensor& wt, const std::vector<double>& bias,
                               const ConvRef& r, Shape* out_shape) {
  const auto x = xt.to_vector<double>(), w = wt.to_vector<double>();
  const int64_t N = xt.size(0), C = xt.size(1), H = xt.size(2), W = xt.size(3);
  const int64_t O = wt.size(0), Cg = wt.size(1), KH = wt.size(2), KW = wt.size(3);
  const int64_t OH = (H + r.pads[0] + r.pads[1] - (KH - 1) * r.dh - 1) / r.sh + 1;
  const int64_t OW = (W + r.pads[2] + r.pads[3] - (KW - 1) * r.dw - 1) / r.sw + 1;
  const int64_t Og = O / r.groups;
  *out_shape = {N, O, OH, OW};
  std::vector<double> out(size_t(N * O * OH * OW), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double acc = bias.empty() ? 0.0 : bias[size_t(o)];
          const int64_t g = o / Og;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t a = 0; a < KH; ++a)
              for (int64_t b = 0; b < KW; ++b) {
                const int64_t hi = i * r.sh - r.pads[0] + a * r.dh,
                              wi = j * r.sw - r.pads[2] + b * r.dw;
                if (hi < 0 || hi >= H || wi < 0 || wi >= W) continue;
                const int64_t ci = g * Cg + c;
                acc += x[size_t(((n * C + ci) * H + hi) * W + wi)] *
                       w[size_t(((o * Cg + c) * KH + a) * KW + b)];
              }
          out[size_t(((n * O + o) * OH + i) * OW + j)] = acc;
        }
  return out;
}

// Max (or average over the real pixels, or over the padded window) pooling loop.
std::vector<double> naive_pool(const Tensor& xt, int64_t k, int64_t s, std::vector<int64_t> pads,
                               bool is_max, bool count_pad, Shape* out_shape) {
  const auto x = xt.to_vector<double>();
  const int64_t N = xt.size(0), C = xt.size(1), H = xt.size(2), W = xt.size(3);
  const int64_t OH = (H + pads[0] + pads[1] - k) / s + 1, OW = (W + pads[2] + pads[3] - k) / s + 1;
  *out_shape = {N, C, OH, OW};
  std::vector<double> out;
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        double m = -std::numeric_limits<double>::infinity(), acc = 0;
        int64_t cnt = 0;
        for (int64_t a = 0; a < k; ++a)
          for (int64_t b = 0; b < k; ++b) {
            const int64_t hi = i * s - pads[0] + a, wi = j * s - pads[2] + b;
            if (hi < 0 || hi >= H || wi < 0 || wi >= W) continue;
            const double v = x[size_t((nc * H + hi) * W + wi)];
            m = std::max(m, v);
            acc += v;
            ++cnt;
          }
        out.push_back(is_max ? m : acc / double(count_pad ? k * k : cnt));
      }
  return out;
}

}  // namespace

// ---- Dense --------------------------------------------------------------------------------------
TEST(Dense, MatchesLoops) {
  set_seed(11);
  nn::Dense fc(7, 4);
  Tensor x = randn({5, 7});
  Tensor y = fc(x);
  ASSERT_EQ(y.shape(), (Shape{5, 4}));
  const auto xv = x.to_vector<double>(), w = fc.weight().to_vector<double>(),
             b = fc.bias().to_vector<double>();
  std::vector<double> want;
  for (int i = 0; i < 5; ++i)
    for (int o = 0; o < 4; ++o) {
      double acc = b[size_t(o)];
      for (int k = 0; k < 7; ++k) acc += xv[size_t(i * 7 + k)] * w[size_t(o * 7 + k)];
      want.push_back(acc);
    }
  expect_close(y, want, 1e-5);
  // Higher-rank inputs act on the last dim.
  Tensor y3 = fc(x.reshape({5, 1, 7}));
  EXPECT_EQ(y3.shape(), (Shape{5, 1, 4}));
  expect_close(y3, want, 1e-5);
}

TEST(Dense, NoBiasAndActivation) {
  nn::Dense fc(3, 2,
               {.has_bias = false,
                .weight_init = nn::Initializer(tensor({{1, -1, 2}, {-3, 0, 1}})),
                .activation = "relu"});
  EXPECT_EQ(fc.parameters().size(), 1u);
  expect_close(fc(tensor({{1, 2, 3}})), {5, 0});
  // MindSpore's repr: the activation is also a sub-cell.
  EXPECT_EQ(fc.str(),
            "Dense<\n"
            "  input_channels=3, output_channels=2, has_bias=False, activation=ReLU<>\n"
            "  (activation): ReLU<>\n"
            "  >");
}

TEST(Dense, WrongFeatureCount) {
  nn::Dense fc(400, 120);
  expect_error(
      [&] {
        fc(zeros({64, 300}));
      },
      "[Dense] expected input with 400 features (last dim), got shape (64, 300)");
  expect_error([] { nn::Dense(0, 3); }, "must be positive");
  expect_error([] { nn::Dense(3, 3, {.activation = "relux"}); }, "unknown activation 'relux'");
}

// ---- Conv2d -------------------------------------------------------------------------------------
TEST(Conv2d, SamePaddingLikeMindSpore) {
  nn::Conv2d c(1, 1, 3, {.stride = 2});
  EXPECT_EQ(c.pads_for(7, 8), (std::vector<int64_t>{1, 1, 0, 1}));
  nn::Conv2d even(1, 1, 4);
  EXPECT_EQ(even.pads_for(5, 5), (std::vector<int64_t>{1, 2, 1, 2}));
  nn::Conv2d dil(1, 1, 3, {.dilation = 2});
  EXPECT_EQ(dil.pads_for(6, 6), (std::vector<int64_t>{2, 2, 2, 2}));
  nn::Conv2d big_stride(1, 1, 1, {.stride = 3});
  EXPECT_EQ(big_stride.pads_for(7, 7), (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(Conv2d, ValuesMatchNaiveLoop) {
  set_seed(5);
  struct Case {
    const char* name;
    int64_t in, out, k;
    nn::Conv2dOptions opt;
    Shape x;
  };
  std::vector<Case> cases;
  cases.push_back({"valid", 3, 4, 3, {.pad_mode = "valid"}, {2, 3, 7, 6}});
  cases.push_back({"same_s2", 2, 3, 3, {.stride = 2}, {1, 2, 7, 8}});
  cases.push_back({"same_even_k", 2, 2, 4, {}, {1, 2, 5, 5}});
  cases.push_back(
      {"pad_dil_group_bias",
       4,
       6,
       3,
       {.pad_mode = "pad", .padding = {1, 2, 0, 1}, .dilation = 2, .group = 2, .has_bias = true},
       {2, 4, 8, 7}});
  cases.push_back({"pad_int_stride",
                   1,
                   2,
                   5,
                   {.stride = {2, 1}, .pad_mode = "pad", .padding = 2},
                   {1, 1, 9, 6}});
  for (auto& cs : cases) {
    nn::Conv2d conv(cs.in, cs.out, cs.k, cs.opt);
    Tensor x = randn(cs.x);
    Tensor y = conv(x);
    ConvRef r;
    r.sh = cs.opt.stride.h;
    r.sw = cs.opt.stride.w;
    r.dh = cs.opt.dilation.h;
    r.dw = cs.opt.dilation.w;
    r.groups = cs.opt.group;
    r.pads = conv.pads_for(cs.x[2], cs.x[3]);
    Shape want_shape;
    std::vector<double> bias =
        cs.opt.has_bias ? conv.bias().to_vector<double>() : std::vector<double>{};
    auto want = naive_conv(x, conv.weight(), bias, r, &want_shape);
    ASSERT_EQ(y.shape(), want_shape) << cs.name;
    expect_close(y, want, 1e-4, cs.name);
  }
  // "same" keeps ceil(H / stride).
  nn::Conv2d same(3, 8, 3, {.stride = 2});
  EXPECT_EQ(same(zeros({1, 3, 15, 16})).shape(), (Shape{1, 8, 8, 8}));
}

TEST(Conv2d, ParametersAndErrors) {
  nn::Conv2d conv(4, 8, {3, 5}, {.group = 2});
  EXPECT_EQ(conv.weight().shape(), (Shape{8, 2, 3, 5}));
  EXPECT_EQ(conv.parameters().size(), 1u);  // has_bias defaults to false, as in MindSpore
  expect_error(
      [&] {
        conv(zeros({2, 3, 9, 9}));
      },
      "[Conv2d] expected input (N, C, H, W) with 4 channels, got shape (2, 3, 9, 9)");
  expect_error([&] { conv(zeros({4, 9, 9})); }, "expected input (N, C, H, W)");
  expect_error([] { nn::Conv2d(3, 8, 3, {.group = 2}); }, "divisible by group");
  expect_error([] { nn::Conv2d(3, 8, 3, {.padding = 1}); },
               "padding must be 0 when pad_mode is 'same'");
  expect_error([] { nn::Conv2d(3, 8, 3, {.pad_mode = "full"}); }, "pad_mode must be");
  nn::Conv2d valid(1, 1, 5, {.pad_mode = "valid"});
  expect_error([&] { valid(zeros({1, 1, 3, 3})); }, "smaller than the (dilated) kernel");
}

// ---- pooling ------------------------------------------------------------------------------------
TEST(Pool, MaxAndAvgMatchLoops) {
  set_seed(8);
  Tensor x = randn({2, 3, 7, 6});
  Shape ws;
  {
    nn::MaxPool2d p(2, 2);
    auto want = naive_pool(x, 2, 2, {0, 0, 0, 0}, true, false, &ws);
    Tensor y = p(x);
    ASSERT_EQ(y.shape(), ws);
    expect_close(y, want);
  }
  {
    nn::MaxPool2d p(3, 2, "same");
    auto pads = p.pads_for(7, 6);
    EXPECT_EQ(pads, (std::vector<int64_t>{1, 1, 0, 1}));
    auto want = naive_pool(x, 3, 2, pads, true, false, &ws);
    Tensor y = p(x);
    ASSERT_EQ(y.shape(), (Shape{2, 3, 4, 3}));
    expect_close(y, want);
  }
  {
    nn::AvgPool2d p(3, 2, "same");  // averages over real pixels only
    auto want = naive_pool(x, 3, 2, p.pads_for(7, 6), false, false, &ws);
    expect_close(p(x), want);
  }
  {
    nn::AvgPool2d p(3, 1, {.pad_mode = "pad", .padding = 1});  // count_include_pad = true
    auto want = naive_pool(x, 3, 1, {1, 1, 1, 1}, false, true, &ws);
    expect_close(p(x), want);
  }
  {
    nn::AvgPool2d p(2, 1);
    EXPECT_EQ(p(x.select(0, 0)).shape(), (Shape{3, 6, 5}));  // (C, H, W) input
  }
  nn::AdaptiveAvgPool2d gap(1);
  Tensor g = gap(x);
  EXPECT_EQ(g.shape(), (Shape{2, 3, 1, 1}));
  expect_close(g, mean(x, {2, 3}, true), 1e-5);
  expect_error([] { nn::MaxPool2d(2, 2, "full"); }, "pad_mode must be");
  nn::MaxPool2d p(2, 2);
  expect_error([&] { p(zeros({2, 3})); }, "[MaxPool2d] expected input (N, C, H, W)");
}

// ---- Embedding, Flatten, Dropout, Upsample ------------------------------------------------------
TEST(Embedding, LooksUpRows) {
  set_seed(2);
  nn::Embedding emb(10, 4, {.padding_idx = 0});
  ASSERT_EQ(emb.embedding_table().shape(), (Shape{10, 4}));
  const auto table = emb.embedding_table().to_vector<double>();
  for (int j = 0; j < 4; ++j) EXPECT_EQ(table[size_t(j)], 0.0);  // padding row
  Tensor ids = from_vector<int32_t>({3, 0, 9, 3, 1, 2}, {2, 3});
  Tensor y = emb(ids);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
  std::vector<double> want;
  for (int id : {3, 0, 9, 3, 1, 2})
    for (int j = 0; j < 4; ++j) want.push_back(table[size_t(id * 4 + j)]);
  expect_close(y, want);
  expect_error([&] { emb(tensor({1.0, 2.0})); }, "expected integer indices");
  expect_error([&] { emb(from_vector<int64_t>({1, 10}, {2})); }, "index 10 out of range [0, 10)");
}

TEST(Flatten, KeepsBatch) {
  nn::Flatten f;
  EXPECT_EQ(f(zeros({2, 3, 4, 5})).shape(), (Shape{2, 60}));
  nn::Flatten g(0, 1);
  EXPECT_EQ(g(zeros({2, 3, 4})).shape(), (Shape{6, 4}));
}

TEST(Dropout, TrainAndEval) {
  set_seed(4);
  nn::Dropout d(0.25);
  Tensor x = ones({100, 100});
  const auto v = d(x).to_vector<double>();
  int64_t zeros_n = 0;
  for (double e : v) {
    if (e == 0)
      ++zeros_n;
    else
      EXPECT_NEAR(e, 1.0 / 0.75, 1e-6);
  }
  EXPECT_NEAR(double(zeros_n) / 10000.0, 0.25, 0.02);
  d.set_train(false);
  EXPECT_TRUE(d(x).is_same(x));
  EXPECT_DOUBLE_EQ(nn::Dropout({.keep_prob = 0.8}).p(), 1.0 - 0.8);
  expect_error([] { nn::Dropout(1.0); }, "must be in [0, 1)");
}

TEST(Upsample, Nearest) {
  Tensor x = tensor({{{{1, 2}, {3, 4}}}});  // (1, 1, 2, 2)
  nn::Upsample up({.scale_factor = {2}});
  expect_close(up(x), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  nn::Upsample to_size({.size = {4, 2}});
  Tensor y = to_size(x);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 2}));
  expect_close(y, {1, 2, 1, 2, 3, 4, 3, 4});
  expect_error([] { nn::Upsample({.size = {2, 2}, .scale_factor = {2}}); }, "exactly one of");
  expect_error([] { nn::Upsample({.scale_factor = {2}, .mode = "bilinear"}); },
               "only mode 'nearest'");
}

// ---- activations --------------------------------------------------------------------------------
TEST(Activation, Formulas) {
  const std::vector<double> xs{-3, -0.5, 0, 0.7, 4, 7};
  Tensor x = from_vector(xs, {6});
  auto each = [&](auto f) {
    std::vector<double> o;
    for (double v : xs) o.push_back(f(v));
    return o;
  };
  expect_close(nn::ReLU()(x), each([](double v) { return std::max(v, 0.0); }));
  expect_close(nn::ReLU6()(x), each([](double v) { return std::clamp(v, 0.0, 6.0); }));
  expect_close(nn::LeakyReLU()(x), each([](double v) { return v > 0 ? v : 0.2 * v; }));
  expect_close(nn::Sigmoid()(x), each([](double v) { return 1 / (1 + std::exp(-v)); }));
  expect_close(nn::SiLU()(x), each([](double v) { return v / (1 + std::exp(-v)); }));
  expect_close(nn::Tanh()(x), each([](double v) { return std::tanh(v); }));
  expect_close(nn::GELU()(x), each([](double v) {
                 return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
               }),
               1e-4);
  expect_close(nn::GELU(false)(x),
               each([](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }), 1e-4);
  double z = 0;
  for (double v : xs) z += std::exp(v);
  expect_close(nn::Softmax()(x), each([&](double v) { return std::exp(v) / z; }));
  EXPECT_EQ(nn::get_activation("LeakyReLU")->str(), "LeakyReLU<alpha=0.2>");
}

// ---- gradients through the layers (float64, central differences) -------------------------------
TEST(LayerGrad, FiniteDifferences) {
  set_seed(21);
  nn::Dense fc(3, 2, {.activation = "tanh", .dtype = kFloat64});
  nn_test::grad_check([&](const Tensor& a) { return fc(a); }, randn({4, 3}, kFloat64), 1e-6, 1e-5,
                      "dense");
}
TEST(LayerGrad, Conv2dSame) {
  set_seed(22);
  nn::Conv2d conv(4, 2, 3, {.stride = 2, .group = 2, .has_bias = true, .dtype = kFloat64});
  nn_test::grad_check([&](const Tensor& a) { return conv(a); }, randn({1, 4, 5, 4}, kFloat64), 1e-6,
                      1e-5, "conv same");
}
TEST(LayerGrad, LayerNormAndAvgPool) {
  set_seed(23);
  nn::LayerNorm ln({4}, {.dtype = kFloat64});
  nn_test::grad_check([&](const Tensor& a) { return ln(a); }, randn({3, 4}, kFloat64), 1e-6, 1e-5,
                      "layernorm");
  nn::AvgPool2d avg(3, 2, "same");
  nn_test::grad_check([&](const Tensor& a) { return avg(a); }, randn({1, 2, 5, 5}, kFloat64), 1e-6,
                      1e-5, "avgpool same");
}
TEST(LayerGrad, WeightGradients) {
  // d sum(x @ W^T + b) / d b = N per output; embedding rows get their counts.
  nn::Dense fc(3, 2, {.dtype = kFloat64});
  Tensor x = randn({5, 3}, kFloat64);
  expect_close(autograd::grad(sum(fc(x)), {fc.bias()})[0], {5, 5});
  nn::Embedding emb(4, 2);
  Tensor ids = from_vector<int64_t>({1, 3, 1, 1}, {2, 2});
  // (Multiplying by ones makes the cotangent contiguous: reshape's backward of a broadcast
  // cotangent currently trips an internal assertion in ops/view.cpp, reported to the lead.)
  Tensor ge = autograd::grad(sum(emb(ids) * ones({2, 2, 2})), {emb.embedding_table()})[0];
  expect_close(ge, {0, 0, 3, 3, 0, 0, 1, 1});
}
