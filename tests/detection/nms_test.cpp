// Detection post-processing (spore/detection/detection.h): NMS and batched NMS against torchvision
// (live when /usr/bin/python3 or $SPORE_PYTHON imports torchvision, else the committed
// fixtures/nms_torchvision.json it produced), YOLO's non_max_suppression on hand-made predictions,
// and the letterbox inverse against vision::Letterbox.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "spore/data/vision.h"
#include "spore/detection/detection.h"
#include "test_util.h"

namespace spore {
namespace {

namespace fs = std::filesystem;

std::string python() {
  const char* env = std::getenv("SPORE_PYTHON");
  return env && *env ? env : SPORE_TEST_PYTHON;
}

Tensor from_rows(const std::vector<std::vector<float>>& rows, int64_t cols) {
  Tensor t = Tensor::empty({int64_t(rows.size()), cols}, kFloat32);
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t j = 0; j < cols; ++j) t.data<float>()[int64_t(i) * cols + j] = rows[i][size_t(j)];
  return t;
}
Tensor vec(const std::vector<float>& v) {
  Tensor t = Tensor::empty({int64_t(v.size())}, kFloat32);
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return t;
}

TEST(Nms, MatchesTorchvision) {
  std::string path =
      std::string(SPORE_SOURCE_DIR) + "/tests/detection/fixtures/nms_torchvision.json";
  std::string source = "committed fixture (torchvision's output)";
  const std::string tmp =
      (fs::temp_directory_path() / ("spore_nms_" + std::to_string(::getpid()) + ".json")).string();
  if (std::system((python() + " -c 'import torch, torchvision' >/dev/null 2>&1").c_str()) == 0) {
    const std::string cmd =
        python() + " " + SPORE_SOURCE_DIR + "/tests/detection/nms_crosscheck.py " + tmp;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    path = tmp;
    source = "torchvision, live";
  }
  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << path;
  const nlohmann::json doc = nlohmann::json::parse(f);
  int n_cases = 0, n_boxes = 0, n_kept = 0;
  for (const auto& c : doc["cases"]) {
    const auto bx = c["boxes"].get<std::vector<std::vector<double>>>();
    const auto sc = c["scores"].get<std::vector<double>>();
    const auto ix = c["idxs"].get<std::vector<int64_t>>();
    const int64_t n = int64_t(bx.size());
    Tensor boxes = Tensor::empty({n, 4}, kFloat32), scores = Tensor::empty({n}, kFloat32),
           idxs = Tensor::empty({n}, kInt64);
    for (int64_t i = 0; i < n; ++i) {
      for (int j = 0; j < 4; ++j) boxes.data<float>()[i * 4 + j] = float(bx[size_t(i)][size_t(j)]);
      scores.data<float>()[i] = float(sc[size_t(i)]);
      idxs.data<int64_t>()[i] = ix[size_t(i)];
    }
    const double thr = c["iou"].get<double>();
    EXPECT_EQ(detection::nms(boxes, scores, thr).to_vector<int64_t>(),
              c["nms"].get<std::vector<int64_t>>())
        << "case " << n_cases << " (" << n << " boxes, iou " << thr << ") vs " << source;
    EXPECT_EQ(detection::batched_nms(boxes, scores, idxs, thr).to_vector<int64_t>(),
              c["batched_nms"].get<std::vector<int64_t>>())
        << "case " << n_cases << " (" << n << " boxes, iou " << thr << ") vs " << source;
    ++n_cases;
    n_boxes += int(n);
    n_kept += int(c["batched_nms"].size());
  }
  std::printf("[nms] %d cases, %d boxes, %d kept by batched_nms: compared with %s\n", n_cases,
              n_boxes, n_kept, source.c_str());
  EXPECT_GE(n_cases, 50);
  fs::remove(tmp);
}

TEST(Nms, SuppressesOnlyAboveTheThreshold) {
  // IoU of the two boxes is exactly 0.5 (the second is the left half of the first... [0,0,2,1] vs
  // [0,0,1,1] -> 1 / 2): kept at threshold 0.5, suppressed at 0.49.
  const Tensor b = from_rows({{0, 0, 2, 1}, {0, 0, 1, 1}}, 4);
  const Tensor s = vec({0.9f, 0.8f});
  EXPECT_EQ(detection::nms(b, s, 0.5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(detection::nms(b, s, 0.49).to_vector<int64_t>(), (std::vector<int64_t>{0}));
  // Different classes never suppress each other.
  Tensor idx = Tensor::empty({2}, kInt64);
  idx.data<int64_t>()[0] = 0, idx.data<int64_t>()[1] = 1;
  EXPECT_EQ(detection::batched_nms(b, s, idx, 0.1).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1}));
}

TEST(Nms, BadInputsAreErrors) {
  const Tensor b = from_rows({{0, 0, 2, 1}}, 4);
  EXPECT_NE(test::error_of([&] {
              detection::nms(from_rows({{0, 0, 2}}, 3), vec({1}), 0.5);
            }).find("expected boxes of shape (N, 4), got (1, 3)"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              detection::nms(b, vec({1, 2}), 0.5);
            }).find("expected scores of shape (1,) (one per box), got (2,)"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              detection::non_max_suppression(Tensor::empty({2, 3}, kFloat32));
            }).find("expected predictions of shape (B, N, 5 + classes)"),
            std::string::npos);
}

TEST(Nms, BoxFormats) {
  const Tensor xywh = from_rows({{10, 20, 4, 6}}, 4);
  EXPECT_EQ(detection::xywh2xyxy(xywh).to_vector<float>(), (std::vector<float>{8, 17, 12, 23}));
  EXPECT_EQ(detection::xyxy2xywh(detection::xywh2xyxy(xywh)).to_vector<float>(),
            xywh.to_vector<float>());
  EXPECT_EQ(detection::xyxy2ltwh(from_rows({{8, 17, 12, 23}}, 4)).to_vector<float>(),
            (std::vector<float>{8, 17, 4, 6}));
  EXPECT_EQ(detection::ltwh2xyxy(from_rows({{8, 17, 4, 6}}, 4)).to_vector<float>(),
            (std::vector<float>{8, 17, 12, 23}));
  const Tensor iou =
      detection::box_iou(from_rows({{0, 0, 2, 2}, {5, 5, 6, 6}}, 4), from_rows({{1, 1, 3, 3}}, 4));
  EXPECT_FLOAT_EQ(iou.to_vector<float>()[0], 1.f / 7.f);
  EXPECT_EQ(iou.to_vector<float>()[1], 0.f);
}

TEST(Nms, YoloNonMaxSuppression) {
  // One image, 4 predictions, 3 classes: [cx, cy, w, h, obj, p0, p1, p2].
  Tensor pred =
      from_rows(
          {{50, 50, 20, 20, 0.9f, 0.1f, 0.8f, 0.7f},  // class 1 (0.72); multi-label: 2 too (0.63)
           {51, 50, 20, 20, 0.8f, 0.1f, 0.9f,
            0.1f},  // class 1 (0.72 tie? 0.72): overlaps the first
           {150, 150, 10, 10, 0.6f, 0.9f, 0.1f, 0.1f},  // class 0 (0.54)
           {10, 10, 5, 5, 0.2f, 1.0f, 0.0f, 0.0f}},     // objectness below 0.25: dropped
          8)
          .reshape({1, 4, 8});
  auto out = detection::non_max_suppression(pred, {.conf_thres = 0.25, .iou_thres = 0.45});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].shape(), (Shape{2, 6}));
  const auto v = out[0].to_vector<float>();
  // Both top boxes score 0.72 in float32 ~ tie: the first (lower index) wins, the second is
  // suppressed.
  EXPECT_FLOAT_EQ(v[0], 40.f);
  EXPECT_FLOAT_EQ(v[2], 60.f);
  EXPECT_FLOAT_EQ(v[4], 0.9f * 0.8f);
  EXPECT_EQ(v[5], 1.f);
  EXPECT_FLOAT_EQ(v[6 + 4], 0.6f * 0.9f);
  EXPECT_EQ(v[6 + 5], 0.f);
  // Multi-label: the first box also as class 2 (0.63), which class 1's boxes do not suppress.
  auto ml = detection::non_max_suppression(
      pred, {.conf_thres = 0.25, .iou_thres = 0.45, .multi_label = true});
  ASSERT_EQ(ml[0].size(0), 3);
  EXPECT_EQ(ml[0].to_vector<float>()[2 * 6 + 5], 0.f);
  EXPECT_EQ(ml[0].to_vector<float>()[1 * 6 + 5], 2.f);
  // Agnostic: class 2's copy is suppressed by class 1's box.
  auto ag = detection::non_max_suppression(
      pred, {.conf_thres = 0.25, .iou_thres = 0.45, .multi_label = true, .agnostic = true});
  EXPECT_EQ(ag[0].size(0), 2);
  // max_det.
  EXPECT_EQ(detection::non_max_suppression(pred, {.conf_thres = 0.25, .max_det = 1})[0].size(0), 1);
}

TEST(Nms, UnletterboxInvertsVisionLetterbox) {
  // A 90 x 160 image letterboxed into 64 x 64: boxes through the transform and back.
  for (auto [h, w] :
       std::vector<std::pair<int64_t, int64_t>>{{90, 160}, {160, 90}, {33, 47}, {64, 64}}) {
    Tensor img = zeros({h, w, 3}, kUInt8);
    Tensor ltwh = from_rows({{3, 5, 20, 10}, {float(w) - 11, float(h) - 7, 10, 6}}, 4);
    const data::Row out = vision::Letterbox({64, 64})({img, ltwh});
    const auto g = detection::letterbox_geometry(h, w, 64, 64);
    EXPECT_EQ(out[0].shape(), (Shape{64, 64, 3}));
    const Tensor back =
        detection::xyxy2ltwh(detection::unletterbox_boxes(detection::ltwh2xyxy(out[1]), g));
    const auto a = back.to_vector<float>(), b = ltwh.to_vector<float>();
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(a[i], b[i], 1e-3) << h << "x" << w << " value " << i;
  }
  // Clipped to the image.
  const auto g = detection::letterbox_geometry(100, 200, 64, 64);  // r = 0.32, (32, 64) at top 16
  EXPECT_EQ(g.nh, 32);
  EXPECT_EQ(g.top, 16);
  const auto c =
      detection::unletterbox_boxes(from_rows({{-5, 0, 70, 70}}, 4), g).to_vector<float>();
  EXPECT_EQ(c, (std::vector<float>{0, 0, 200, 100}));
}

}  // namespace
}  // namespace spore
