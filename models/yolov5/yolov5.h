// YOLOv5 (Ultralytics v6.0 / v7.0 architecture) with depth and width multiples: n, s, m, l, x.
//   backbone  Conv 6x6/2, Conv 3x3/2, C3 x3, Conv/2, C3 x6, Conv/2, C3 x9, Conv/2, C3 x3, SPPF(5)
//   head      PANet: Conv 1x1, nearest x2, Concat, C3 (no shortcut) ... to P3/8, P4/16, P5/32
//   Detect    a 1x1 conv per level to 3 anchors x (5 + classes), anchors in stride units
// Conv = conv (no bias, "same" padding k / 2) + BatchNorm (eps 1e-3, PyTorch momentum 0.03, i.e.
// MindSpore momentum 0.97) + SiLU. Weights use the framework's defaults (HeUniform(sqrt(5)), the
// same as PyTorch's), Detect's biases get YOLOv5's prior: objectness += log(8 / (640 / s)^2),
// classes += log(0.6 / (nc - 0.99999)). yolov5s at 80 classes has 7,235,389 parameters.
//
// Training mode: forward({x}) returns the three raw level outputs (B, 3, H/s, W/s, 5 + nc).
// Eval mode: forward({x}) / construct(x) returns the decoded predictions (B, N, 5 + nc): [cx, cy,
// w, h] in input pixels (xy = (2 sigmoid - 0.5 + cell) s, wh = (2 sigmoid)^2 anchor), objectness
// and class probabilities (sigmoid), ready for detection::non_max_suppression.
#pragma once
#include <array>
#include <map>
#include <string>
#include <vector>

#include "spore/nn/nn.h"

namespace spore::models {

struct YoloV5Config {
  double depth_multiple = 0.33;
  double width_multiple = 0.50;
  int64_t num_classes = 80;
  // Per level (P3, P4, P5): three (w, h) anchors in input pixels.
  std::array<std::array<double, 6>, 3> anchors{
      {{10, 13, 16, 30, 33, 23}, {30, 61, 62, 45, 59, 119}, {116, 90, 156, 198, 373, 326}}};
};
// "n" (0.33, 0.25), "s" (0.33, 0.50), "m" (0.67, 0.75), "l" (1.0, 1.0), "x" (1.33, 1.25); also
// "yolov5s" etc.
YoloV5Config yolov5_config(const std::string& variant, int64_t num_classes = 80);

class YoloDetect : public nn::Cell {
 public:
  YoloDetect(int64_t num_classes, const std::array<std::array<double, 6>, 3>& anchors,
             const std::vector<int64_t>& ch);
  // Raw per-level outputs (B, na, ny, nx, no) from the three feature maps.
  std::vector<Tensor> forward(const std::vector<Tensor>& feats) override;
  // Raw level outputs -> (B, N, no) decoded predictions.
  Tensor decode(const std::vector<Tensor>& raw);
  // Anchors in stride units (3 levels x 3 anchors x (w, h)), as YOLOv5's Detect.anchors buffer.
  const Tensor& anchors() const { return anchors_; }
  static constexpr int64_t kStrides[3] = {8, 16, 32};
  int64_t num_outputs() const { return no_; }
  int64_t num_anchors() const { return na_; }
  void initialize_biases();

 private:
  int64_t nc_, no_, na_ = 3;
  Tensor anchors_;  // (3, 3, 2) float32, stride units
  std::array<std::array<double, 6>, 3> anchor_px_;
  std::array<Tensor, 3> anchor_grid_;  // per level (1, na, 1, 1, 2) anchors in pixels
  std::vector<nn::CellPtr> m_;
  std::map<std::pair<int64_t, int64_t>, std::array<Tensor, 3>>
      grids_;  // (ny0, nx0) -> per-level grid
};

class YoloV5 : public nn::Cell {
 public:
  explicit YoloV5(const YoloV5Config& cfg);
  // training: {P3, P4, P5 raw}; eval: {decoded (B, N, 5 + nc)}.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  Tensor construct(const Tensor& x) override;  // eval: decoded; training: P3's raw output
  const YoloV5Config& config() const { return cfg_; }
  YoloDetect& detect() { return *detect_; }
  int64_t num_classes() const { return cfg_.num_classes; }
  // The three raw level outputs (B, 3, ny, nx, 5 + nc) in either mode.
  std::vector<Tensor> raw(const Tensor& x);

 private:
  YoloV5Config cfg_;
  std::vector<nn::CellPtr> layers_;  // 0..23 as in yolov5s.yaml (Upsample / Concat are inline)
  std::shared_ptr<YoloDetect> detect_;
};

std::shared_ptr<YoloV5> yolov5(const std::string& variant, int64_t num_classes = 80);

}  // namespace spore::models
