// Conv1d, Conv2dTranspose, GroupNorm and Pad: values against explicit loops, output sizes per
// pad_mode, finite-difference gradients in float64, and the input checks. (Equality with PyTorch
// for the same weights: tests/python/test_nn_layers_torch.py.)
#include <gtest/gtest.h>

#include <cmath>

#include "nn_test_util.h"
#include "spore/nn/nn.h"

using namespace spore;
using nn_test::expect_close;
using nn_test::expect_error;
using nn_test::grad_check;

namespace {

Tensor rand64(const Shape& s, uint64_t seed) {
  set_seed(seed);
  return uniform(s, -1, 1, kFloat64);
}

// The transposed convolution as a scatter: every input pixel adds w * x into the output window.
std::vector<double> naive_conv_transpose(const Tensor& xt, const Tensor& wt, int64_t s, int64_t pt,
                                         int64_t pl, int64_t d, int64_t groups, int64_t OH,
                                         int64_t OW) {
  const auto x = xt.to_vector<double>(), w = wt.to_vector<double>();
  const int64_t N = xt.size(0), C = xt.size(1), H = xt.size(2), W = xt.size(3);
  const int64_t Og = wt.size(1), KH = wt.size(2), KW = wt.size(3), O = Og * groups, Cg = C / groups;
  std::vector<double> out(size_t(N * O * OH * OW), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j)
          for (int64_t og = 0; og < Og; ++og)
            for (int64_t a = 0; a < KH; ++a)
              for (int64_t b = 0; b < KW; ++b) {
                const int64_t oi = i * s + a * d - pt, oj = j * s + b * d - pl;
                if (oi < 0 || oi >= OH || oj < 0 || oj >= OW) continue;
                const int64_t o = (c / Cg) * Og + og;
                out[size_t(((n * O + o) * OH + oi) * OW + oj)] +=
                    x[size_t(((n * C + c) * H + i) * W + j)] *
                    w[size_t(((c * Og + og) * KH + a) * KW + b)];
              }
  return out;
}

}  // namespace

// ---- Conv1d -------------------------------------------------------------------------------------
TEST(Conv1d, EqualsConv2dOverOneRowAndSizes) {
  nn::Conv1d conv(4, 6, 3,
                  {.stride = 2,
                   .pad_mode = "pad",
                   .padding = {2, 1},
                   .dilation = 2,
                   .group = 2,
                   .has_bias = true,
                   .dtype = kFloat64});
  EXPECT_EQ(conv.weight().shape(), (Shape{6, 2, 3}));
  const Tensor x = rand64({2, 4, 9}, 1);
  const Tensor y = conv(x);
  Conv2dOptions o{.stride = {1, 2}, .padding = {0, 0, 2, 1}, .dilation = {1, 2}, .groups = 2};
  const Tensor want =
      conv2d(x.reshape({2, 4, 1, 9}), conv.weight().reshape({6, 2, 1, 3}), conv.bias(), o);
  ASSERT_EQ(y.shape(), (Shape{2, 6, 4}));  // (9 + 3 - 5) / 2 + 1
  expect_close(y, want.reshape({2, 6, 4}), 1e-12);
  // "same": ceil(L / stride); "valid": no padding.
  nn::Conv1d same(4, 6, 4, {.stride = 3});
  EXPECT_EQ(same(rand64({1, 4, 10}, 2).to(kFloat32)).shape(), (Shape{1, 6, 4}));
  nn::Conv1d valid(4, 6, 4, {.pad_mode = "valid"});
  EXPECT_EQ(valid(rand64({1, 4, 10}, 2).to(kFloat32)).shape(), (Shape{1, 6, 7}));
}

TEST(Conv1d, Gradients) {
  nn::Conv1d conv(2, 3, 3, {.stride = 2, .pad_mode = "same", .has_bias = true, .dtype = kFloat64});
  grad_check([&](const Tensor& x) { return conv(x); }, rand64({2, 2, 7}, 3), 1e-6, 1e-6, "x");
  const Tensor x = rand64({2, 2, 7}, 4);
  const Tensor w0 = conv.weight().clone();
  grad_check(
      [&](const Tensor& w) {
        return conv2d(x.unsqueeze(2), w.unsqueeze(2), conv.bias(),
                      {.stride = {1, 2}, .padding = {0, 0, 1, 1}});
      },
      w0, 1e-6, 1e-6, "weight");
}

TEST(Conv1d, Errors) {
  expect_error([] { nn::Conv1d(4, 6, 3, {.group = 4}); }, "group (4) must divide");
  expect_error([] { nn::Conv1d(4, 6, 3, {.padding = {1}}); }, "padding must be 0 when pad_mode");
  expect_error([] { nn::Conv1d(4, 6, 3, {.pad_mode = "full"}); }, "pad_mode must be");
  nn::Conv1d c(4, 6, 3);
  expect_error([&] { c(zeros({2, 3, 8})); }, "expected input (N, C, L) with 4 channels");
}

// ---- Conv2dTranspose ----------------------------------------------------------------------------
TEST(Conv2dTranspose, PadModeEqualsLoopWithOutputPaddingGroupsDilation) {
  nn::Conv2dTranspose ct(4, 6, {3, 2},
                         {.stride = {2, 3},
                          .pad_mode = "pad",
                          .padding = {1, 0, 0, 1},
                          .output_padding = {1, 2},
                          .dilation = {1, 2},
                          .group = 2,
                          .has_bias = true,
                          .dtype = kFloat64});
  EXPECT_EQ(ct.weight().shape(), (Shape{4, 3, 3, 2}));
  const Tensor x = rand64({2, 4, 3, 4}, 5);
  const Tensor y = ct(x);
  // H' = (3 - 1) * 2 - 1 + 3 + 1 = 7, W' = (4 - 1) * 3 - 1 + 3 + 2 = 13
  ASSERT_EQ(y.shape(), (Shape{2, 6, 7, 13}));
  std::vector<double> want;
  {
    // The scatter loop with stride (2, 3), dilation (1, 2), padding top 1 / left 0, groups 2.
    const auto xv = x.to_vector<double>(), wv = ct.weight().to_vector<double>(),
               bv = ct.bias().to_vector<double>();
    want.assign(size_t(2 * 6 * 7 * 13), 0.0);
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t o = 0; o < 6; ++o)
        for (int64_t i = 0; i < 7; ++i)
          for (int64_t j = 0; j < 13; ++j) want[size_t(((n * 6 + o) * 7 + i) * 13 + j)] = bv[o];
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 4; ++c)
        for (int64_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < 4; ++j)
            for (int64_t og = 0; og < 3; ++og)
              for (int64_t a = 0; a < 3; ++a)
                for (int64_t b = 0; b < 2; ++b) {
                  const int64_t oi = i * 2 + a - 1, oj = j * 3 + b * 2 - 0;
                  if (oi < 0 || oi >= 7 || oj < 0 || oj >= 13) continue;
                  const int64_t o = (c / 2) * 3 + og;
                  want[size_t(((n * 6 + o) * 7 + oi) * 13 + oj)] +=
                      xv[size_t(((n * 4 + c) * 3 + i) * 4 + j)] *
                      wv[size_t(((c * 3 + og) * 3 + a) * 2 + b)];
                }
  }
  expect_close(y, want, 1e-12);
}

TEST(Conv2dTranspose, SameAndValidSizes) {
  const Tensor x = rand64({1, 2, 5, 4}, 6);
  nn::Conv2dTranspose same(2, 3, 3, {.stride = 2, .dtype = kFloat64});
  const Tensor ys = same(x);
  ASSERT_EQ(ys.shape(), (Shape{1, 3, 10, 8}));  // H * stride
  // "same" with k = 3, s = 2: the full output (11, 9) cropped by (0, 1) top / bottom.
  const auto full = naive_conv_transpose(x, same.weight(), 2, 0, 0, 1, 1, 11, 9);
  std::vector<double> crop;
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t i = 0; i < 10; ++i)
      for (int64_t j = 0; j < 8; ++j) crop.push_back(full[size_t((o * 11 + i) * 9 + j)]);
  expect_close(ys, crop, 1e-12);
  // stride larger than the kernel: "same" and "valid" give H * stride, the rest zeros.
  nn::Conv2dTranspose wide(2, 3, 2, {.stride = 3, .pad_mode = "valid", .dtype = kFloat64});
  const Tensor yv = wide(x);
  ASSERT_EQ(yv.shape(), (Shape{1, 3, 15, 12}));
  expect_close(yv, naive_conv_transpose(x, wide.weight(), 3, 0, 0, 1, 1, 15, 12), 1e-12);
  nn::Conv2dTranspose valid(2, 3, 4, {.stride = 2, .pad_mode = "valid", .dtype = kFloat64});
  EXPECT_EQ(valid(x).shape(), (Shape{1, 3, 12, 10}));  // (H - 1) * s + k
}

TEST(Conv2dTranspose, Gradients) {
  nn::Conv2dTranspose ct(2, 4, 3,
                         {.stride = 2,
                          .pad_mode = "pad",
                          .padding = 1,
                          .output_padding = 1,
                          .group = 2,
                          .has_bias = true,
                          .dtype = kFloat64});
  grad_check([&](const Tensor& x) { return ct(x); }, rand64({2, 2, 3, 3}, 7), 1e-6, 1e-6, "x");
  const Tensor x = rand64({2, 2, 3, 3}, 8);
  grad_check(
      [&](const Tensor& w) {
        return conv_transpose2d(x, w, {.stride = {2, 2}, .padding = {1, 1, 1, 1}, .groups = 2},
                                {6, 6});
      },
      ct.weight().clone(), 1e-6, 1e-6, "weight");
}

TEST(Conv2dTranspose, Errors) {
  expect_error([] { nn::Conv2dTranspose(2, 4, 3, {.stride = 2, .output_padding = 1}); },
               "output_padding must be 0 when pad_mode is 'same'");
  expect_error(
      [] { nn::Conv2dTranspose(2, 4, 3, {.stride = 2, .pad_mode = "pad", .output_padding = 2}); },
      "output_padding must be in [0, stride)");
  expect_error([] { nn::Conv2dTranspose(3, 4, 3, {.group = 2}); }, "group (2) must divide");
  nn::Conv2dTranspose ct(2, 4, 3);
  expect_error([&] { ct(zeros({1, 3, 4, 4})); }, "expected input (N, C, H, W) with 2 channels");
  expect_error(
      [] {
        conv_transpose2d(zeros({1, 2, 3, 3}), zeros({2, 2, 3, 3}), {}, {9, 9});
      },
      "output_size (9, 9) is not reachable");
}

// ---- GroupNorm ----------------------------------------------------------------------------------
TEST(GroupNorm, EqualsLoopAndGradients) {
  nn::GroupNorm gn(2, 4, {.eps = 1e-3, .dtype = kFloat64});
  {
    NoGradGuard ng;
    assign(gn.gamma(), from_vector<double>({0.5, 1.0, 1.5, 2.0}, {4}));
    assign(gn.beta(), from_vector<double>({0.1, 0.2, 0.3, 0.4}, {4}));
  }
  const Tensor x = rand64({2, 4, 3}, 9);
  const auto xv = x.to_vector<double>();
  std::vector<double> want(xv.size());
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t g = 0; g < 2; ++g) {
      double m = 0, v = 0;
      for (int64_t i = 0; i < 6; ++i) m += xv[size_t(n * 12 + g * 6 + i)] / 6;
      for (int64_t i = 0; i < 6; ++i) v += std::pow(xv[size_t(n * 12 + g * 6 + i)] - m, 2) / 6;
      for (int64_t i = 0; i < 6; ++i) {
        const int64_t c = g * 2 + i / 3;
        want[size_t(n * 12 + g * 6 + i)] =
            (xv[size_t(n * 12 + g * 6 + i)] - m) / std::sqrt(v + 1e-3) * (0.5 * double(c + 1)) +
            0.1 * double(c + 1);
      }
    }
  expect_close(gn(x), want, 1e-10);
  grad_check([&](const Tensor& t) { return gn(t); }, rand64({2, 4, 2, 2}, 10), 1e-6, 1e-6, "x");
  nn::GroupNorm frozen(1, 4, {.affine = false});
  EXPECT_TRUE(frozen.trainable_params().empty());
  expect_error([] { nn::GroupNorm(3, 4); }, "must be a positive multiple of num_groups (3)");
  expect_error([&] { gn(zeros({2, 3, 4}, kFloat64)); }, "expected input (N, C, *) with 4 channels");
}

// ---- Pad ----------------------------------------------------------------------------------------
TEST(Pad, MindSporeExamples) {
  const Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  const std::vector<std::pair<int64_t, int64_t>> p{{1, 1}, {2, 2}};
  expect_close(nn::Pad(p, "CONSTANT")(x), {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 4, 5,
                                           6, 0, 0, 0, 0, 7, 8, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  expect_close(nn::Pad(p, "REFLECT")(x), {6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5,
                                          6, 5, 4, 9, 8, 7, 8, 9, 8, 7, 6, 5, 4, 5, 6, 5, 4});
  expect_close(nn::Pad(p, "SYMMETRIC")(x), {2, 1, 1, 2, 3, 3, 2, 2, 1, 1, 2, 3, 3, 2, 5, 4, 4, 5,
                                            6, 6, 5, 8, 7, 7, 8, 9, 9, 8, 8, 7, 7, 8, 9, 9, 8});
  // Fewer pairs than dims: the last dims.
  EXPECT_EQ(nn::Pad({{1, 2}}, "REFLECT")(zeros({2, 3, 4})).shape(), (Shape{2, 3, 7}));
}

TEST(Pad, GradientsAndErrors) {
  for (const char* mode : {"CONSTANT", "REFLECT", "SYMMETRIC"}) {
    nn::Pad pad({{0, 0}, {2, 1}, {1, 3}}, mode);
    grad_check([&](const Tensor& x) { return pad(x); }, rand64({2, 3, 4}, 11), 1e-6, 1e-8, mode);
  }
  expect_error([] { nn::Pad({{1, 1}}, "reflect"); }, "mode must be 'CONSTANT', 'REFLECT'");
  expect_error([] { nn::Pad({{-1, 1}}); }, "paddings must be non-negative");
  expect_error(
      [] {
        nn::Pad({{3, 0}}, "REFLECT")(zeros({2, 3}));
      },
      "REFLECT padding (3, 0) of dim 1 (size 3) must be at most 2");
  expect_error(
      [] {
        nn::Pad({{1, 1}, {1, 1}, {1, 1}})(zeros({2, 3}));
      },
      "3 (before, after) pairs for an input of rank 2");
}
