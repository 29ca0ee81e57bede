// models/yolov5: parameter counts against the published ones, output shapes in training and
// evaluation, Detect's bias prior and decoding, and Graph mode against PyNative.
#include <gtest/gtest.h>

#include <cmath>

#include "models/yolov5/yolov5.h"
#include "spore/context.h"
#include "spore/jit.h"
#include "spore/nn/nn.h"
#include "spore/ops.h"
#include "spore/tensor.h"
#include "test_util.h"

namespace spore {
namespace {

int64_t count(const nn::Cell& c) {
  int64_t n = 0;
  for (const Tensor& p : c.trainable_params()) n += p.numel();
  return n;
}

TEST(YoloV5Model, ParameterCounts) {
  // Ultralytics' summaries: yolov5s 7,235,389 (80 classes), 7,046,599 at 10 classes; yolov5n
  // 1,872,157; yolov5m 21,190,557.
  EXPECT_EQ(count(*models::yolov5("s", 80)), 7235389);
  EXPECT_EQ(count(*models::yolov5("yolov5s", 10)), 7046599);
  EXPECT_EQ(count(*models::yolov5("n", 80)), 1872157);
  EXPECT_EQ(count(*models::yolov5("m", 80)), 21190557);
  auto net = models::yolov5("n", 80);
  const auto names = net->named_parameters();
  EXPECT_EQ(names.front().first, "model.0.conv.weight");
  EXPECT_EQ(names[1].first, "model.0.bn.gamma");
  EXPECT_EQ(names.back().first, "model.24.m.2.bias");
  bool has_anchors = false;
  for (const auto& [n, t] : net->named_buffers()) has_anchors |= n == "model.24.anchors";
  EXPECT_TRUE(has_anchors);
  EXPECT_NE(test::error_of([] { models::yolov5("q"); }).find("expected n, s, m, l or x"),
            std::string::npos);
}

TEST(YoloV5Model, ShapesAndDecoding) {
  set_seed(1);
  auto net = models::yolov5("n", 3);
  const Tensor x = rand({2, 3, 64, 96});
  net->set_train(true);
  const auto raw = net->forward({x});
  ASSERT_EQ(raw.size(), 3u);
  EXPECT_EQ(raw[0].shape(), (Shape{2, 3, 8, 12, 8}));
  EXPECT_EQ(raw[1].shape(), (Shape{2, 3, 4, 6, 8}));
  EXPECT_EQ(raw[2].shape(), (Shape{2, 3, 2, 3, 8}));
  net->set_train(false);
  const Tensor pred = (*net)(x);
  EXPECT_EQ(pred.shape(), (Shape{2, 3 * (96 + 24 + 6), 8}));
  // Decoding by hand for one cell: level 1 (stride 16), anchor 2 (59 x 119), cell (y 3, x 5).
  const Tensor raw1 = net->raw(x)[1];  // eval mode: moving statistics, as pred
  auto sig = [](float v) { return 1.f / (1.f + std::exp(-v)); };
  const auto rv = raw1.contiguous().to_vector<float>();
  const int64_t a = 2, gy = 3, gx = 5, no = 8;
  const int64_t at = (((1 * 3 + a) * 4 + gy) * 6 + gx) * no;  // batch 1
  const int64_t row = 3 * 8 * 12 + (a * 4 + gy) * 6 + gx;     // after level 0's rows
  const auto pv = pred.contiguous().to_vector<float>();
  const float* p = pv.data() + (1 * pred.size(1) + row) * no;
  EXPECT_NEAR(p[0], (sig(rv[size_t(at)]) * 2 - 0.5f + float(gx)) * 16, 1e-3);
  EXPECT_NEAR(p[1], (sig(rv[size_t(at + 1)]) * 2 - 0.5f + float(gy)) * 16, 1e-3);
  EXPECT_NEAR(p[2], std::pow(sig(rv[size_t(at + 2)]) * 2, 2.f) * 59, 1e-3);
  EXPECT_NEAR(p[3], std::pow(sig(rv[size_t(at + 3)]) * 2, 2.f) * 119, 1e-3);
  EXPECT_NEAR(p[4], sig(rv[size_t(at + 4)]), 1e-5);
  EXPECT_NE(test::error_of([&] {
              (*net)(rand({1, 3, 50, 64}));
            }).find("multiples of 32"),
            std::string::npos);
}

TEST(YoloV5Model, DetectBiasPrior) {
  set_seed(2);
  auto net = models::yolov5("n", 80);
  // Objectness starts near log(8 / (640 / s)^2) (+- the default U(1/sqrt(fan_in)) init), classes
  // near log(0.6 / 79.00001).
  const auto named = net->named_parameters();
  for (const auto& [name, t] : named) {
    if (name != "model.24.m.0.bias" && name != "model.24.m.2.bias") continue;
    const double s = name == "model.24.m.0.bias" ? 8 : 32;
    const double fan_in = name == "model.24.m.0.bias" ? 64 : 256;
    const auto b = t.to_vector<float>();
    for (int a = 0; a < 3; ++a) {
      EXPECT_NEAR(b[size_t(a * 85 + 4)], std::log(8.0 / std::pow(640.0 / s, 2)),
                  1 / std::sqrt(fan_in) + 1e-6);
      EXPECT_NEAR(b[size_t(a * 85 + 5)], std::log(0.6 / (80 - 0.99999)),
                  1 / std::sqrt(fan_in) + 1e-6);
    }
  }
}

TEST(YoloV5Model, GraphModeMatchesPyNative) {
  set_seed(3);
  auto net = models::yolov5("n", 4);
  net->set_train(false);
  const Tensor x = rand({1, 3, 64, 64});
  const Tensor eager = (*net)(x);
  auto f = jit([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{(*net)(a[0])}; },
               {.name = "yolo_eval"});
  const Tensor graph = f({x})[0];
  ASSERT_EQ(graph.shape(), eager.shape());
  const auto g = graph.to_vector<float>(), e = eager.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i)
    worst = std::max(worst, double(std::abs(g[i] - e[i])) / (1 + std::abs(e[i])));
  EXPECT_LT(worst, 1e-4);
}

}  // namespace
}  // namespace spore
