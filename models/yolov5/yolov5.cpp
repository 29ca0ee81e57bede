// YOLOv5 v6/v7 (models/yolov5/yolov5.h): Conv, Bottleneck, C3, SPPF, Detect and the yolov5*.yaml
// layout with depth / width multiples. Parameter names follow the yaml's layer numbers
// ("model.4.m.0.cv1.conv.weight", BatchNorm's gamma / beta / moving_mean / moving_variance).
#include "models/yolov5/yolov5.h"

#include <cmath>

#include "spore/grad_mode.h"
#include "spore/ops.h"

namespace spore::models {
namespace {

// Conv: conv (no bias) + BatchNorm(eps 1e-3, PyTorch momentum 0.03) + SiLU.
class Conv : public nn::Cell {
 public:
  Conv(int64_t c1, int64_t c2, int64_t k = 1, int64_t s = 1, int64_t p = -1)
      : conv_(std::make_shared<nn::Conv2d>(
            c1, c2, k,
            nn::Conv2dOptions{.stride = s, .pad_mode = "pad", .padding = p < 0 ? k / 2 : p})),
        bn_(std::make_shared<nn::BatchNorm2d>(
            c2, nn::BatchNormOptions{.eps = 1e-3, .momentum = 0.97})) {
    set_cls_name("Conv");
    register_cell("conv", conv_);
    register_cell("bn", bn_);
  }
  Tensor construct(const Tensor& x) override { return silu((*bn_)((*conv_)(x))); }

 private:
  nn::CellPtr conv_, bn_;
};

class Bottleneck : public nn::Cell {
 public:
  Bottleneck(int64_t c1, int64_t c2, bool shortcut, double e = 0.5) : add_(shortcut && c1 == c2) {
    set_cls_name("Bottleneck");
    const int64_t c = int64_t(double(c2) * e);
    cv1_ = std::make_shared<Conv>(c1, c, 1, 1);
    cv2_ = std::make_shared<Conv>(c, c2, 3, 1);
    register_cell("cv1", cv1_);
    register_cell("cv2", cv2_);
  }
  Tensor construct(const Tensor& x) override {
    Tensor y = (*cv2_)((*cv1_)(x));
    return add_ ? x + y : y;
  }

 private:
  bool add_;
  nn::CellPtr cv1_, cv2_;
};

// CSP bottleneck with 3 convolutions: cv3(cat(m(cv1(x)), cv2(x))).
class C3 : public nn::Cell {
 public:
  C3(int64_t c1, int64_t c2, int64_t n, bool shortcut = true) {
    set_cls_name("C3");
    const int64_t c = c2 / 2;
    cv1_ = std::make_shared<Conv>(c1, c, 1, 1);
    cv2_ = std::make_shared<Conv>(c1, c, 1, 1);
    cv3_ = std::make_shared<Conv>(2 * c, c2, 1);
    std::vector<nn::CellPtr> blocks;
    for (int64_t i = 0; i < n; ++i)
      blocks.push_back(std::make_shared<Bottleneck>(c, c, shortcut, 1.0));
    m_ = std::make_shared<nn::SequentialCell>(blocks);
    register_cell("cv1", cv1_);
    register_cell("cv2", cv2_);
    register_cell("cv3", cv3_);
    register_cell("m", m_);
  }
  Tensor construct(const Tensor& x) override {
    return (*cv3_)(concat({(*m_)((*cv1_)(x)), (*cv2_)(x)}, 1));
  }

 private:
  nn::CellPtr cv1_, cv2_, cv3_, m_;
};

// Spatial pyramid pooling, fast: three chained 5x5/1 max pools.
class SPPF : public nn::Cell {
 public:
  SPPF(int64_t c1, int64_t c2, int64_t k = 5) : k_(k) {
    set_cls_name("SPPF");
    const int64_t c = c1 / 2;
    cv1_ = std::make_shared<Conv>(c1, c, 1, 1);
    cv2_ = std::make_shared<Conv>(4 * c, c2, 1, 1);
    register_cell("cv1", cv1_);
    register_cell("cv2", cv2_);
  }
  Tensor construct(const Tensor& x) override {
    const Pool2dOptions o{
        .kernel_size = {k_, k_}, .stride = {1, 1}, .padding = {k_ / 2, k_ / 2, k_ / 2, k_ / 2}};
    Tensor a = (*cv1_)(x);
    Tensor y1 = max_pool2d(a, o), y2 = max_pool2d(y1, o), y3 = max_pool2d(y2, o);
    return (*cv2_)(concat({a, y1, y2, y3}, 1));
  }

 private:
  int64_t k_;
  nn::CellPtr cv1_, cv2_;
};

// A named container for the numbered layers ("model.0" ...).
class Layers : public nn::Cell {
 public:
  Layers() { set_cls_name("Sequential"); }
};

int64_t make_divisible(double x, int64_t d = 8) { return int64_t(std::ceil(x / double(d))) * d; }

Tensor up2(const Tensor& x) { return upsample_nearest2d(x, {x.size(2) * 2, x.size(3) * 2}); }

}  // namespace

YoloV5Config yolov5_config(const std::string& variant, int64_t num_classes) {
  std::string v = variant;
  if (v.rfind("yolov5", 0) == 0) v = v.substr(6);
  YoloV5Config c;
  c.num_classes = num_classes;
  if (v == "n")
    c.depth_multiple = 0.33, c.width_multiple = 0.25;
  else if (v == "s")
    c.depth_multiple = 0.33, c.width_multiple = 0.50;
  else if (v == "m")
    c.depth_multiple = 0.67, c.width_multiple = 0.75;
  else if (v == "l")
    c.depth_multiple = 1.0, c.width_multiple = 1.0;
  else if (v == "x")
    c.depth_multiple = 1.33, c.width_multiple = 1.25;
  else
    SPORE_THROW(ErrorKind::ValueError, "[yolov5] unknown variant '", variant,
                "'; expected n, s, m, l or x (yolov5n ... yolov5x)");
  SPORE_CHECK(num_classes >= 1, "[yolov5] num_classes must be >= 1, got ", num_classes);
  return c;
}

// ---- Detect -------------------------------------------------------------------------------------

YoloDetect::YoloDetect(int64_t num_classes, const std::array<std::array<double, 6>, 3>& anchors,
                       const std::vector<int64_t>& ch)
    : nc_(num_classes), no_(num_classes + 5), anchor_px_(anchors) {
  set_cls_name("Detect");
  anchors_ = Tensor::empty({3, 3, 2}, kFloat32);
  for (int l = 0; l < 3; ++l)
    for (int a = 0; a < 6; ++a)
      anchors_.data<float>()[l * 6 + a] =
          float(anchors[size_t(l)][size_t(a)] / double(kStrides[l]));
  register_buffer("anchors", anchors_);
  for (size_t l = 0; l < 3; ++l) {
    anchor_grid_[l] = Tensor::empty({1, na_, 1, 1, 2}, kFloat32);
    for (size_t a = 0; a < 6; ++a) anchor_grid_[l].data<float>()[a] = float(anchors[l][a]);
  }
  auto* holder = new Layers();
  nn::CellPtr m(holder);
  for (size_t i = 0; i < ch.size(); ++i) {
    m_.push_back(std::make_shared<nn::Conv2d>(
        ch[i], no_ * na_, 1, nn::Conv2dOptions{.pad_mode = "valid", .has_bias = true}));
    holder->register_cell(std::to_string(i), m_.back());
  }
  register_cell("m", m);
  initialize_biases();
}

void YoloDetect::initialize_biases() {
  for (size_t i = 0; i < m_.size(); ++i) {
    Tensor& b = static_cast<nn::Conv2d&>(*m_[i]).bias();
    NoGradGuard ng;
    Tensor v = b.detach().cpu().to(kFloat32).contiguous().clone();  // edited on the host
    float* p = v.data<float>();
    const double s = double(kStrides[i]);
    for (int64_t a = 0; a < na_; ++a) {
      p[a * no_ + 4] +=
          float(std::log(8.0 / ((640.0 / s) * (640.0 / s))));  // ~8 objects per 640 image
      for (int64_t c = 0; c < nc_; ++c)
        p[a * no_ + 5 + c] += float(std::log(0.6 / (double(nc_) - 0.99999)));
    }
    assign(b, v.to(b.device()));
  }
}

std::vector<Tensor> YoloDetect::forward(const std::vector<Tensor>& feats) {
  SPORE_CHECK(feats.size() == 3, "[Detect] expected 3 feature maps (P3, P4, P5), got ",
              feats.size());
  std::vector<Tensor> out;
  for (size_t i = 0; i < 3; ++i) {
    Tensor y = (*m_[i])(feats[i]);  // (B, na * no, ny, nx)
    const int64_t B = y.size(0), ny = y.size(2), nx = y.size(3);
    out.push_back(y.reshape({B, na_, no_, ny, nx})
                      .permute({0, 1, 3, 4, 2})
                      .contiguous());  // (B, na, ny, nx, no)
  }
  return out;
}

Tensor YoloDetect::decode(const std::vector<Tensor>& raw) {
  SPORE_CHECK(raw.size() == 3, "[Detect] expected 3 level outputs, got ", raw.size());
  const auto key = std::make_pair(raw[0].size(2), raw[0].size(3));
  auto it = grids_.find(key);
  if (it == grids_.end()) {
    std::array<Tensor, 3> g;
    for (size_t i = 0; i < 3; ++i) {
      const int64_t ny = raw[i].size(2), nx = raw[i].size(3);
      g[i] = Tensor::empty({1, 1, ny, nx, 2}, kFloat32);
      float* p = g[i].data<float>();
      for (int64_t y = 0; y < ny; ++y)
        for (int64_t x = 0; x < nx; ++x)
          p[(y * nx + x) * 2] = float(x) - 0.5f, p[(y * nx + x) * 2 + 1] = float(y) - 0.5f;
    }
    it = grids_.emplace(key, g).first;
  }
  std::vector<Tensor> z;
  for (size_t i = 0; i < 3; ++i) {
    const Tensor y = sigmoid(raw[i]);  // (B, na, ny, nx, no)
    const int64_t B = y.size(0), ny = y.size(2), nx = y.size(3);
    const double s = double(kStrides[i]);
    const Tensor& anchor_grid = anchor_grid_[i];  // (1, na, 1, 1, 2) pixels
    const Tensor xy = (y.slice(4, 0, 2) * 2.0 + it->second[i]) * s;
    const Tensor wh = square(y.slice(4, 2, 4) * 2.0) * anchor_grid;
    z.push_back(concat({xy, wh, y.slice(4, 4, no_)}, 4).reshape({B, na_ * ny * nx, no_}));
  }
  return concat(z, 1);
}

// ---- YoloV5 -------------------------------------------------------------------------------------

YoloV5::YoloV5(const YoloV5Config& cfg) : cfg_(cfg) {
  set_cls_name("YoloV5");
  auto d = [&](int64_t n) {
    return n > 1 ? std::max<int64_t>(int64_t(std::llround(double(n) * cfg.depth_multiple)), 1) : n;
  };
  auto w = [&](int64_t c) { return make_divisible(double(c) * cfg.width_multiple); };
  const int64_t c64 = w(64), c128 = w(128), c256 = w(256), c512 = w(512), c1024 = w(1024);
  layers_.resize(24);
  layers_[0] = std::make_shared<Conv>(3, c64, 6, 2, 2);
  layers_[1] = std::make_shared<Conv>(c64, c128, 3, 2);
  layers_[2] = std::make_shared<C3>(c128, c128, d(3));
  layers_[3] = std::make_shared<Conv>(c128, c256, 3, 2);
  layers_[4] = std::make_shared<C3>(c256, c256, d(6));
  layers_[5] = std::make_shared<Conv>(c256, c512, 3, 2);
  layers_[6] = std::make_shared<C3>(c512, c512, d(9));
  layers_[7] = std::make_shared<Conv>(c512, c1024, 3, 2);
  layers_[8] = std::make_shared<C3>(c1024, c1024, d(3));
  layers_[9] = std::make_shared<SPPF>(c1024, c1024, 5);
  layers_[10] = std::make_shared<Conv>(c1024, c512, 1, 1);
  layers_[13] = std::make_shared<C3>(c512 + c512, c512, d(3), false);
  layers_[14] = std::make_shared<Conv>(c512, c256, 1, 1);
  layers_[17] = std::make_shared<C3>(c256 + c256, c256, d(3), false);
  layers_[18] = std::make_shared<Conv>(c256, c256, 3, 2);
  layers_[20] = std::make_shared<C3>(c256 + c256, c512, d(3), false);
  layers_[21] = std::make_shared<Conv>(c512, c512, 3, 2);
  layers_[23] = std::make_shared<C3>(c512 + c512, c1024, d(3), false);
  detect_ = std::make_shared<YoloDetect>(cfg.num_classes, cfg.anchors,
                                         std::vector<int64_t>{c256, c512, c1024});
  auto* holder = new Layers();
  nn::CellPtr model(holder);
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i]) holder->register_cell(std::to_string(i), layers_[i]);
  holder->register_cell("24", detect_);
  register_cell("model", model);
}

std::vector<Tensor> YoloV5::raw(const Tensor& x) {
  SPORE_CHECK(x.dim() == 4 && x.size(1) == 3, "[YoloV5] expected images (B, 3, H, W), got ",
              shape_str(x.shape()));
  SPORE_CHECK(x.size(2) % 32 == 0 && x.size(3) % 32 == 0,
              "[YoloV5] image height and width must be multiples of 32 "
              "(the largest stride), got ",
              x.size(2), " x ", x.size(3), "; letterbox the images to e.g. 320 or 640");
  auto L = [&](int i, const Tensor& t) { return (*layers_[size_t(i)])(t); };
  Tensor y = L(0, x);
  y = L(1, y);
  y = L(2, y);
  y = L(3, y);
  const Tensor p3 = L(4, y);  // 4
  y = L(5, p3);
  const Tensor p4 = L(6, y);  // 6
  y = L(7, p4);
  y = L(8, y);
  y = L(9, y);
  const Tensor h10 = L(10, y);
  y = L(13, concat({up2(h10), p4}, 1));
  const Tensor h14 = L(14, y);
  const Tensor o17 = L(17, concat({up2(h14), p3}, 1));
  const Tensor o20 = L(20, concat({L(18, o17), h14}, 1));
  const Tensor o23 = L(23, concat({L(21, o20), h10}, 1));
  return detect_->forward({o17, o20, o23});
}

std::vector<Tensor> YoloV5::forward(const std::vector<Tensor>& inputs) {
  SPORE_CHECK(inputs.size() == 1, "[YoloV5] expected one input (images), got ", inputs.size());
  std::vector<Tensor> r = raw(inputs[0]);
  if (training()) return r;
  return {detect_->decode(r)};
}

Tensor YoloV5::construct(const Tensor& x) { return forward({x})[0]; }

std::shared_ptr<YoloV5> yolov5(const std::string& variant, int64_t num_classes) {
  return std::make_shared<YoloV5>(yolov5_config(variant, num_classes));
}

}  // namespace spore::models
