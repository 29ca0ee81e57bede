// Losses against hand computation (all reductions, weights, ignore_index, label smoothing,
// pos_weight), central-difference gradient checks in float64, and label checks.
#include <gtest/gtest.h>

#include <cmath>

#include "nn_test_util.h"
#include "spore/nn/nn.h"

using namespace spore;
using nn_test::expect_close;
using nn_test::expect_error;
using nn_test::grad_check;

namespace {
const std::vector<double> kLogits{1.0, 2.0, 0.5, -1.0, 0.0, 3.0};  // (2, 3)
std::vector<double> log_softmax_rows(const std::vector<double>& x, int rows, int cols) {
  std::vector<double> out;
  for (int r = 0; r < rows; ++r) {
    double m = -1e300, z = 0;
    for (int c = 0; c < cols; ++c) m = std::max(m, x[size_t(r * cols + c)]);
    for (int c = 0; c < cols; ++c) z += std::exp(x[size_t(r * cols + c)] - m);
    for (int c = 0; c < cols; ++c) out.push_back(x[size_t(r * cols + c)] - m - std::log(z));
  }
  return out;
}
Tensor logits64() { return from_vector(kLogits, {2, 3}).to(kFloat64); }
}  // namespace

TEST(Loss, SoftmaxCrossEntropySparseAndDense) {
  const auto lp = log_softmax_rows(kLogits, 2, 3);
  Tensor logits = from_vector(kLogits, {2, 3});
  Tensor labels = from_vector<int32_t>({1, 2}, {2});
  const double l0 = -lp[1], l1 = -lp[5];
  nn::SoftmaxCrossEntropyWithLogits none({.sparse = true});  // MindSpore default reduction: none
  expect_close(none(logits, labels), {l0, l1});
  nn::SoftmaxCrossEntropyWithLogits mean_loss({.sparse = true, .reduction = "mean"});
  expect_close(mean_loss(logits, labels), {(l0 + l1) / 2});
  nn::SoftmaxCrossEntropyWithLogits sum_loss({.sparse = true, .reduction = "sum"});
  expect_close(sum_loss(logits, labels.to(kInt64)), {l0 + l1});
  Tensor probs = tensor({{0.2, 0.8, 0.0}, {0.5, 0.0, 0.5}});
  nn::SoftmaxCrossEntropyWithLogits dense({.reduction = "mean"});
  expect_close(dense(logits, probs),
               {(-(0.2 * lp[0] + 0.8 * lp[1]) - (0.5 * lp[3] + 0.5 * lp[5])) / 2});

  expect_error(
      [&] {
        none(logits, tensor({1.0, 2.0}));
      },
      "with sparse=true, labels must be int32 or int64 class indices, got float32");
  expect_error(
      [&] {
        none(logits, from_vector<int32_t>({1, 3}, {2}));
      },
      "label 3 out of range [0, 3)");
  expect_error(
      [&] {
        none(logits, from_vector<int32_t>({1, 2, 0}, {3}));
      },
      "sparse labels must have shape (2,)");
  expect_error([&] { dense(logits, labels); }, "labels must be floating-point probabilities");
  expect_error([] { nn::SoftmaxCrossEntropyWithLogits({.reduction = "avg"}); },
               "reduction must be 'mean', 'sum' or 'none', got 'avg'");
}

TEST(Loss, CrossEntropyWeightsIgnoreSmoothing) {
  const auto lp = log_softmax_rows(kLogits, 2, 3);
  Tensor logits = from_vector(kLogits, {2, 3});
  Tensor labels = from_vector<int64_t>({2, 0}, {2});
  {
    nn::CrossEntropyLoss ce;
    expect_close(ce(logits, labels), {-(lp[2] + lp[3]) / 2});
  }
  {
    // mean divides by the weights of the targets: (w2 l0 + w0 l1) / (w2 + w0).
    Tensor w = tensor({0.5, 1.0, 2.0});
    nn::CrossEntropyLoss ce({.weight = w});
    expect_close(ce(logits, labels), {(-2.0 * lp[2] - 0.5 * lp[3]) / 2.5});
    nn::CrossEntropyLoss ce_none({.weight = w, .reduction = "none"});
    expect_close(ce_none(logits, labels), {-2.0 * lp[2], -0.5 * lp[3]});
  }
  {
    nn::CrossEntropyLoss ce({.ignore_index = 0});
    expect_close(ce(logits, labels), {-lp[2]});  // the second target is ignored
    nn::CrossEntropyLoss ce_none({.reduction = "none"});
    expect_close(ce_none(logits, from_vector<int64_t>({-100, 1}, {2})), {0.0, -lp[4]});
  }
  {
    const double eps = 0.1;
    nn::CrossEntropyLoss ce({.reduction = "sum", .label_smoothing = eps});
    double want = 0;
    const int lab[2] = {2, 0};
    for (int r = 0; r < 2; ++r) {
      double uni = 0;
      for (int c = 0; c < 3; ++c) uni -= lp[size_t(r * 3 + c)];
      want += (1 - eps) * -lp[size_t(r * 3 + lab[r])] + eps / 3 * uni;
    }
    expect_close(ce(logits, labels), {want});
  }
  {
    // Probability targets with smoothing: t' = t (1 - eps) + eps / C, mean over the batch.
    Tensor probs = tensor({{0.0, 0.0, 1.0}, {0.25, 0.25, 0.5}});
    nn::CrossEntropyLoss ce({.label_smoothing = 0.3});
    const double t[6] = {0, 0, 1, 0.25, 0.25, 0.5};
    double want = 0;
    for (int i = 0; i < 6; ++i) want -= (t[i] * 0.7 + 0.1) * lp[size_t(i)];
    expect_close(ce(logits, probs), {want / 2});
  }
  {
    // (N, C, d) logits with (N, d) labels.
    Tensor l3 = from_vector(kLogits, {1, 3, 2});
    Tensor y3 = from_vector<int32_t>({0, 2}, {1, 2});
    // Column j of l3 is the logits for position j: (1, 0.5, 0) and (2, -1, 3).
    const auto a = log_softmax_rows({1.0, 0.5, 0.0, 2.0, -1.0, 3.0}, 2, 3);
    nn::CrossEntropyLoss ce;
    expect_close(ce(l3, y3), {-(a[0] + a[5]) / 2});
  }
  nn::CrossEntropyLoss ce;
  expect_error(
      [&] {
        ce(logits, from_vector<int64_t>({5, 0}, {2}));
      },
      "label 5 out of range [0, 3) (ignore_index is -100)");
  expect_error([&] { nn::CrossEntropyLoss({.weight = ones({4})})(logits, labels); },
               "weight must have shape (3,)");
}

TEST(Loss, NLL) {
  Tensor logp = tensor({{-0.1, -2.0, -3.0}, {-1.5, -0.4, -2.5}});
  Tensor y = from_vector<int32_t>({0, 1}, {2});
  expect_close(nn::NLLLoss()(logp, y), {(0.1 + 0.4) / 2});
  expect_close(nn::NLLLoss({.weight = tensor({1.0, 3.0, 1.0}), .reduction = "sum"})(logp, y),
               {0.1 + 1.2});
  expect_close(nn::NLLLoss({.ignore_index = 1})(logp, y), {0.1});
}

TEST(Loss, Regression) {
  Tensor x = tensor({0.5, -1.0, 3.0, 0.0});
  Tensor y = tensor({0.0, 1.0, 0.5, 0.1});
  // d = (0.5, -2, 2.5, -0.1)
  expect_close(nn::MSELoss()(x, y), {(0.25 + 4 + 6.25 + 0.01) / 4});
  expect_close(nn::MSELoss({.reduction = "sum"})(x, y), {0.25 + 4 + 6.25 + 0.01});
  expect_close(nn::L1Loss()(x, y), {(0.5 + 2 + 2.5 + 0.1) / 4});
  expect_close(nn::L1Loss({.reduction = "none"})(x, y), {0.5, 2, 2.5, 0.1});
  // SmoothL1 beta = 1 (default reduction none): 0.5 d^2 if |d| < 1 else |d| - 0.5.
  expect_close(nn::SmoothL1Loss()(x, y), {0.125, 1.5, 2.0, 0.005});
  expect_close(nn::SmoothL1Loss({.beta = 3.0, .reduction = "sum"})(x, y),
               {0.25 / 6 + 4.0 / 6 + 6.25 / 6 + 0.01 / 6});
  // Huber delta = 2: 0.5 d^2 if |d| < 2 else 2 (|d| - 1).
  expect_close(nn::HuberLoss({.reduction = "none", .delta = 2.0})(x, y), {0.125, 2.0, 3.0, 0.005});
  expect_close(nn::HuberLoss()(x, y), {(0.125 + 1.5 + 2.0 + 0.005) / 4});
  expect_error([] { nn::SmoothL1Loss({.beta = 0}); }, "beta must be positive");
}

TEST(Loss, BinaryCrossEntropy) {
  Tensor p = tensor({0.9, 0.2, 0.6});
  Tensor y = tensor({1.0, 0.0, 1.0});
  const double l[3] = {-std::log(0.9), -std::log(0.8), -std::log(0.6)};
  expect_close(nn::BCELoss()(p, y), {(l[0] + l[1] + l[2]) / 3});
  expect_close(nn::BCELoss({.weight = tensor({1.0, 2.0, 0.5}), .reduction = "sum"})(p, y),
               {l[0] + 2 * l[1] + 0.5 * l[2]});
  // Saturated probabilities stay finite (logs clamped at -100).
  expect_close(nn::BCELoss({.reduction = "none"})(tensor({0.0, 1.0}), tensor({1.0, 0.0})),
               {100, 100});

  Tensor x = tensor({{2.0, -1.0}, {0.5, 30.0}});
  Tensor t = tensor({{1.0, 0.0}, {0.0, 1.0}});
  auto sp = [](double v) {
    return std::log1p(std::exp(-std::abs(v))) + std::max(-v, 0.0);
  };  // softplus(-v)
  // loss = (1 - y) x + (1 + (pw - 1) y) softplus(-x)
  const double plain[4] = {sp(2.0), -1.0 + sp(-1.0), 0.5 + sp(0.5), sp(30.0)};
  expect_close(nn::BCEWithLogitsLoss({.reduction = "none"})(x, t),
               {plain[0], plain[1], plain[2], plain[3]});
  Tensor pw = tensor({3.0, 0.5});
  const double wpos[4] = {3 * sp(2.0), -1.0 + sp(-1.0), 0.5 + sp(0.5), 0.5 * sp(30.0)};
  expect_close(nn::BCEWithLogitsLoss({.reduction = "sum", .pos_weight = pw})(x, t),
               {wpos[0] + wpos[1] + wpos[2] + wpos[3]});
  expect_close(nn::BCEWithLogitsLoss({.weight = tensor({2.0, 1.0})})(x, t),
               {(2 * plain[0] + plain[1] + 2 * plain[2] + plain[3]) / 4});
  // Large logits do not overflow.
  Tensor big =
      nn::BCEWithLogitsLoss({.reduction = "none"})(tensor({-200.0, 200.0}), tensor({1.0, 0.0}));
  expect_close(big, {200, 200});
  expect_error(
      [] {
        nn::BCELoss()(tensor({0.5}), tensor({1.0, 0.0}));
      },
      "must have the same shape");
}

TEST(LossGrad, FiniteDifferences) {
  Tensor x = logits64();
  Tensor sparse = from_vector<int64_t>({1, 2}, {2});
  Tensor probs = tensor({{0.2, 0.8, 0.0}, {0.5, 0.0, 0.5}}, kFloat64);
  nn::SoftmaxCrossEntropyWithLogits sce({.sparse = true, .reduction = "mean"});
  grad_check([&](const Tensor& a) { return sce(a, sparse); }, x, 1e-6, 1e-5, "sce sparse");
  nn::SoftmaxCrossEntropyWithLogits sced({.reduction = "none"});
  grad_check([&](const Tensor& a) { return sced(a, probs); }, x, 1e-6, 1e-5, "sce dense");
  nn::CrossEntropyLoss ce(
      {.weight = tensor({0.5, 1.0, 2.0}, kFloat64), .ignore_index = 2, .label_smoothing = 0.2});
  grad_check(
      [&](const Tensor& a) {
        return ce(a, from_vector<int64_t>({1, 0}, {2}));
      },
      x, 1e-6, 1e-5, "ce");
  grad_check([&](const Tensor& a) { return ce(a, probs); }, x, 1e-6, 1e-5, "ce probs");
  nn::NLLLoss nll;
  grad_check([&](const Tensor& a) { return nll(a, sparse); }, x, 1e-6, 1e-5, "nll");

  Tensor r = tensor({0.3, -1.2, 2.5, 0.05, -0.7, 1.9}, kFloat64);
  Tensor t = tensor({0.0, 1.0, 0.5, 0.1, -0.2, -1.0}, kFloat64);
  grad_check([&](const Tensor& a) { return nn::MSELoss()(a, t); }, r, 1e-6, 1e-5, "mse");
  grad_check([&](const Tensor& a) { return nn::L1Loss()(a, t); }, r, 1e-6, 1e-5, "l1");
  grad_check([&](const Tensor& a) { return nn::SmoothL1Loss({.beta = 0.5})(a, t); }, r, 1e-6, 1e-5,
             "smoothl1");
  grad_check([&](const Tensor& a) { return nn::HuberLoss({.delta = 0.8})(a, t); }, r, 1e-6, 1e-5,
             "huber");
  Tensor pr = tensor({0.3, 0.9, 0.5, 0.05, 0.7, 0.6}, kFloat64);
  Tensor bt = tensor({0.0, 1.0, 1.0, 0.0, 0.3, 1.0}, kFloat64);
  grad_check(
      [&](const Tensor& a) { return nn::BCELoss({.weight = tensor({2.0}, kFloat64)})(a, bt); }, pr,
      1e-7, 1e-5, "bce");
  nn::BCEWithLogitsLoss bwl({.weight = tensor({1.0, 2.0, 0.5, 1.0, 1.0, 3.0}, kFloat64),
                             .pos_weight = tensor({1.5, 0.5, 2.0, 1.0, 3.0, 0.2}, kFloat64)});
  grad_check([&](const Tensor& a) { return bwl(a, bt); }, r, 1e-6, 1e-5, "bce with logits");
}
