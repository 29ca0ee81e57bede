// YOLOv5's loss pieces, checked by hand: build_targets' anchor filter and neighbour cells, CIoU and
// the atan it needs, the objectness-only loss without targets, duplicate matches, gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "models/yolov5/loss.h"
#include "models/yolov5/yolov5.h"
#include "spore/autograd.h"
#include "spore/context.h"
#include "spore/ops.h"
#include "test_util.h"

namespace spore {
namespace {

Tensor rows(const std::vector<std::vector<float>>& r, int64_t cols) {
  Tensor t = Tensor::empty({int64_t(r.size()), cols}, kFloat32);
  for (size_t i = 0; i < r.size(); ++i)
    for (int64_t j = 0; j < cols; ++j) t.data<float>()[int64_t(i) * cols + j] = r[i][size_t(j)];
  return t;
}

// The default anchors in stride units, as YoloDetect holds them.
Tensor default_anchors() { return models::yolov5("n", 2)->detect().anchors(); }
const std::array<std::pair<int64_t, int64_t>, 3> kGrids320{{{40, 40}, {20, 20}, {10, 10}}};

TEST(YoloLoss, BuildTargetsByHand) {
  // One box: class 1, centre (0.53, 0.26), size (0.2, 0.3) of a 320 x 320 image.
  const Tensor t = rows({{0, 1, 0.53f, 0.26f, 0.2f, 0.3f}}, 6);
  const auto lv = models::build_targets(t, 1, default_anchors(), kGrids320, 2);
  // P3 (stride 8): box 16 x 24 px = 8 x 12 cells; anchors 1.25 x 1.625, 2 x 3.75 (ratio exactly 4:
  // not < 4) and 4.125 x 2.875 (12 / 2.875 = 4.17): no match.
  EXPECT_EQ(lv[0].count, 0);
  // P4 (stride 16): centre (10.6, 5.2), all three anchors pass. Cells: own (5, 10); y frac 0.2 ->
  // the one above (4, 10); x frac 0.6 -> the one to the right (5, 11). Order: offset, anchor.
  ASSERT_EQ(lv[1].count, 9);
  const std::vector<std::array<int64_t, 5>> p4{
      {0, 0, 5, 10, 1}, {0, 1, 5, 10, 1}, {0, 2, 5, 10, 1}, {0, 0, 4, 10, 1}, {0, 1, 4, 10, 1},
      {0, 2, 4, 10, 1}, {0, 0, 5, 11, 1}, {0, 1, 5, 11, 1}, {0, 2, 5, 11, 1}};
  EXPECT_EQ(lv[1].matches, p4);
  const auto tb = lv[1].tbox.to_vector<float>();
  EXPECT_NEAR(tb[6 * 4 + 0], 10.6f - 11, 1e-5);  // the right neighbour: offset -0.4
  EXPECT_NEAR(tb[6 * 4 + 1], 0.2f, 1e-5);
  EXPECT_NEAR(tb[3 * 4 + 1], 1.2f, 1e-5);  // the cell above: 5.2 - 4
  EXPECT_FLOAT_EQ(tb[2], 4.f);
  EXPECT_FLOAT_EQ(tb[3], 6.f);
  EXPECT_EQ(lv[1].index.to_vector<int64_t>()[0], (0 * 20 + 5) * 20 + 10);
  EXPECT_EQ(lv[1].index.to_vector<int64_t>()[2], (2 * 20 + 5) * 20 + 10);
  // P5 (stride 32): centre (5.3, 2.6), box 2 x 3; anchors 0 and 1 pass, 2 (11.7 x 10.2) does not.
  // x frac 0.3 -> left (2, 4); y frac 0.6 -> (10 - 2.6) frac 0.4 -> below (3, 5).
  const std::vector<std::array<int64_t, 5>> p5{{0, 0, 2, 5, 1}, {0, 1, 2, 5, 1}, {0, 0, 2, 4, 1},
                                               {0, 1, 2, 4, 1}, {0, 0, 3, 5, 1}, {0, 1, 3, 5, 1}};
  EXPECT_EQ(lv[2].matches, p5);
  // Padding to a common power-of-two capacity, masked.
  EXPECT_EQ(lv[0].index.size(0), 256);
  EXPECT_EQ(lv[2].mask.sum().item<float>(), 6.f);
  const auto cls = lv[2].cls.to_vector<float>();
  EXPECT_EQ(cls[0], 0.f);
  EXPECT_EQ(cls[1], 1.f);
}

TEST(YoloLoss, DuplicateCellsWriteObjectnessOnce) {
  // Two identical boxes: every match appears twice; only the later one writes the cell's target.
  const Tensor t = rows({{0, 0, 0.53f, 0.26f, 0.2f, 0.3f}, {0, 0, 0.53f, 0.26f, 0.2f, 0.3f}}, 6);
  const auto lv = models::build_targets(t, 1, default_anchors(), kGrids320, 2);
  ASSERT_EQ(lv[1].count, 18);
  const auto w = lv[1].obj_write.to_vector<float>();
  const auto m = lv[1].matches;
  // Order (offset, anchor, target): target 0 then 1 for each (offset, anchor).
  for (int64_t i = 0; i < 18; ++i) EXPECT_EQ(w[size_t(i)], i % 2 == 1 ? 1.f : 0.f) << i;
  EXPECT_NE(test::error_of([&] {
              models::build_targets(rows({{2, 0, .5f, .5f, .1f, .1f}}, 6), 2, default_anchors(),
                                    kGrids320, 2);
            }).find("expected an image in [0, 2)"),
            std::string::npos);
}

TEST(YoloLoss, AtanAndCiouByHand) {
  std::vector<float> xs;
  for (double x = 1e-3; x < 1e3; x *= 1.37) xs.push_back(float(x));
  Tensor x = Tensor::empty({int64_t(xs.size())}, kFloat64);
  for (size_t i = 0; i < xs.size(); ++i) x.data<double>()[i] = xs[i];
  const auto a = models::atan_positive(x).to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(a[i], std::atan(double(xs[i])), 1e-8) << xs[i];
  // Shifted by one width: IoU 1/3, enclosing 3 x 2 (c^2 = 13), centre distance 1: CIoU = 1/3 -
  // 1/13.
  const Tensor b1 = rows({{0, 0, 2, 2}, {0, 0, 2, 2}}, 4),
               b2 = rows({{1, 0, 2, 2}, {0, 0, 2, 4}}, 4);
  const auto c = models::bbox_ciou(b1, b2).to_vector<float>();
  EXPECT_NEAR(c[0], 1.0 / 3 - 1.0 / 13, 1e-6);
  // Same centre, 2 x 2 inside 2 x 4: IoU 1/2, v = 4/pi^2 (atan(1/2) - atan(1))^2, alpha = v / (v +
  // 1/2).
  const double v =
      4 / (std::numbers::pi * std::numbers::pi) * std::pow(std::atan(0.5) - std::atan(1.0), 2);
  EXPECT_NEAR(c[1], 0.5 - v * v / (v - 0.5 + 1), 1e-6);
}

TEST(YoloLoss, ObjectnessOnlyWithoutTargets) {
  // No targets: the box and class losses are 0 and the objectness loss is the balanced mean BCE
  // against 0 (times the obj gain and the batch size).
  set_seed(4);
  std::vector<Tensor> raw{randn({2, 3, 4, 4, 7}), randn({2, 3, 2, 2, 7}), randn({2, 3, 1, 1, 7})};
  const auto lv = models::build_targets(Tensor::empty({0, 6}, kFloat32), 2, default_anchors(),
                                        {{{4, 4}, {2, 2}, {1, 1}}}, 2);
  models::YoloLossHyp hyp = models::scaled_hyp(2, 320);
  EXPECT_DOUBLE_EQ(hyp.obj, 0.25);
  EXPECT_DOUBLE_EQ(hyp.cls, 0.5 * 2 / 80);
  const auto L = models::yolo_loss(raw, lv, hyp);
  double expect = 0;
  for (int l = 0; l < 3; ++l) {
    const auto v = raw[size_t(l)].to_vector<float>();
    double s = 0;
    int n = 0;
    for (size_t i = 4; i < v.size(); i += 7, ++n)
      s += std::log1p(std::exp(double(v[i])));  // BCE(x, 0)
    expect += s / n * std::array<double, 3>{4.0, 1.0, 0.4}[size_t(l)];
  }
  EXPECT_NEAR(L.lobj.item<double>(), expect * 0.25, 1e-5);
  EXPECT_EQ(L.lbox.item<double>(), 0.0);
  EXPECT_EQ(L.lcls.item<double>(), 0.0);
  EXPECT_NEAR(L.loss.item<double>(), expect * 0.25 * 2, 1e-4);
}

TEST(YoloLoss, GradientsFlowAndPaddingIsInert) {
  // Zero raw outputs against one target: a finite loss with finite gradients everywhere.
  const Tensor t = rows({{0, 1, 0.53f, 0.26f, 0.2f, 0.3f}}, 6);
  const auto lv = models::build_targets(t, 1, default_anchors(), kGrids320, 2);
  std::vector<Tensor> raw{zeros({1, 3, 40, 40, 7}), zeros({1, 3, 20, 20, 7}),
                          zeros({1, 3, 10, 10, 7})};
  for (auto& r : raw) r.set_requires_grad(true);
  const auto L = models::yolo_loss(raw, lv, models::scaled_hyp(2, 320));
  EXPECT_GT(L.lbox.item<double>(), 0);
  EXPECT_TRUE(std::isfinite(L.loss.item<double>()));
  const auto grads = autograd::grad(L.loss, raw);
  for (const auto& g : grads) {
    ASSERT_TRUE(g.defined());
    for (float v : g.to_vector<float>()) ASSERT_TRUE(std::isfinite(v));
  }
  // Objectness is trained at every cell (BCE against 0 or the CIoU).
  EXPECT_GT(abs(grads[1]).sum().item<double>(), 0);
  // Padding rows (index 0, mask 0) contribute nothing: the box-regression gradient of cell 0 of
  // P3 (no matches there) is zero.
  const auto g0 = grads[0].to_vector<float>();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(g0[size_t(k)], 0.f);
}

}  // namespace
}  // namespace spore
