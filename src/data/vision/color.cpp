// Color and value transforms: ConvertColor (OpenCV's cvtColor), the ColorJitter family
// (AdjustBrightness / Contrast / Saturation / Hue and RandomColorAdjust) and the layout-aware
// Normalize. The color adjustments work on a float copy of the pixels and follow torchvision's
// formulas (blend with black, the mean gray, the per-pixel gray; hue rotation in HSV).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <opencv2/imgproc.hpp>

#include "core/tensor_util.h"
#include "data/vision/image.h"
#include "spore/data/sample_rng.h"

namespace spore::vision {
namespace {
using detail::Image;

struct Conversion {
  int code, in_c, out_c;
  const char* name;
};

Conversion conversion_of(ColorConversion c) {
  switch (c) {
    case ColorConversion::RGB2GRAY:
      return {cv::COLOR_RGB2GRAY, 3, 1, "RGB2GRAY"};
    case ColorConversion::BGR2GRAY:
      return {cv::COLOR_BGR2GRAY, 3, 1, "BGR2GRAY"};
    case ColorConversion::GRAY2RGB:
      return {cv::COLOR_GRAY2RGB, 1, 3, "GRAY2RGB"};
    case ColorConversion::GRAY2BGR:
      return {cv::COLOR_GRAY2BGR, 1, 3, "GRAY2BGR"};
    case ColorConversion::RGB2BGR:
      return {cv::COLOR_RGB2BGR, 3, 3, "RGB2BGR"};
    case ColorConversion::BGR2RGB:
      return {cv::COLOR_BGR2RGB, 3, 3, "BGR2RGB"};
    case ColorConversion::RGB2HSV:
      return {cv::COLOR_RGB2HSV, 3, 3, "RGB2HSV"};
    case ColorConversion::HSV2RGB:
      return {cv::COLOR_HSV2RGB, 3, 3, "HSV2RGB"};
    case ColorConversion::BGR2HSV:
      return {cv::COLOR_BGR2HSV, 3, 3, "BGR2HSV"};
    case ColorConversion::HSV2BGR:
      return {cv::COLOR_HSV2BGR, 3, 3, "HSV2BGR"};
    case ColorConversion::RGBA2RGB:
      return {cv::COLOR_RGBA2RGB, 4, 3, "RGBA2RGB"};
    case ColorConversion::RGB2RGBA:
      return {cv::COLOR_RGB2RGBA, 3, 4, "RGB2RGBA"};
    case ColorConversion::BGRA2BGR:
      return {cv::COLOR_BGRA2BGR, 4, 3, "BGRA2BGR"};
    case ColorConversion::BGR2BGRA:
      return {cv::COLOR_BGR2BGRA, 3, 4, "BGR2BGRA"};
    case ColorConversion::RGBA2BGR:
      return {cv::COLOR_RGBA2BGR, 4, 3, "RGBA2BGR"};
    case ColorConversion::BGR2RGBA:
      return {cv::COLOR_BGR2RGBA, 3, 4, "BGR2RGBA"};
  }
  return {cv::COLOR_RGB2BGR, 3, 3, "?"};
}

// The pixels as float, plus what is needed to write them back in the input's dtype.
struct FloatImage {
  std::vector<float> v;  // (H, W, C)
  int64_t h, w, c;
  float bound;  // 255 (uint8) or 1 (float32)
};

FloatImage to_float(const Image& img) {
  FloatImage f{std::vector<float>(size_t(img.h * img.w * img.c)), img.h, img.w, img.c,
               img.dtype() == kUInt8 ? 255.f : 1.f};
  spore::detail::convert_elements(img.t.data_ptr(), img.dtype(), f.v.data(), kFloat32,
                                  int64_t(f.v.size()));
  return f;
}

Tensor from_float(const FloatImage& f, const Image& like) {
  Tensor out = detail::new_image(like, f.h, f.w);
  if (like.dtype() == kFloat32) {
    std::memcpy(out.data_ptr(), f.v.data(), f.v.size() * sizeof(float));
  } else {
    uint8_t* dst = out.data<uint8_t>();
    for (size_t i = 0; i < f.v.size(); ++i)
      dst[i] = uint8_t(std::clamp(std::lround(f.v[i]), 0l, 255l));
  }
  return out;
}

float gray_of(const float* p) { return 0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2]; }

void brightness(FloatImage& f, double factor) {
  for (float& x : f.v) x = std::clamp(float(x * factor), 0.f, f.bound);
}

void contrast(FloatImage& f, double factor) {
  double sum = 0;
  const size_t n = size_t(f.h * f.w);
  for (size_t i = 0; i < n; ++i) sum += f.c == 3 ? gray_of(&f.v[i * 3]) : f.v[i * size_t(f.c)];
  const float mean = float(sum / double(n));
  for (float& x : f.v) x = std::clamp(float(factor * x + (1 - factor) * mean), 0.f, f.bound);
}

void saturation(FloatImage& f, double factor) {
  for (size_t i = 0; i < f.v.size(); i += 3) {
    const float g = gray_of(&f.v[i]);
    for (size_t k = 0; k < 3; ++k)
      f.v[i + k] = std::clamp(float(factor * f.v[i + k] + (1 - factor) * g), 0.f, f.bound);
  }
}

void hue(FloatImage& f, double shift) {
  for (size_t i = 0; i < f.v.size(); i += 3) {
    const float r = f.v[i] / f.bound, g = f.v[i + 1] / f.bound, b = f.v[i + 2] / f.bound;
    const float mx = std::max({r, g, b}), mn = std::min({r, g, b}), d = mx - mn;
    if (d <= 0) continue;  // gray: hue does not matter
    float h;               // in turns, [0, 1)
    if (mx == r)
      h = (g - b) / d / 6.f;
    else if (mx == g)
      h = ((b - r) / d + 2.f) / 6.f;
    else
      h = ((r - g) / d + 4.f) / 6.f;
    h = float(h + shift);
    h -= std::floor(h);
    const float s = d / mx, v = mx;
    // HSV -> RGB
    const float h6 = h * 6.f;
    const int sector = std::min(int(h6), 5);
    const float frac = h6 - float(sector);
    const float p = v * (1 - s), q = v * (1 - s * frac), t = v * (1 - s * (1 - frac));
    float rgb[3];
    switch (sector) {
      case 0:
        rgb[0] = v, rgb[1] = t, rgb[2] = p;
        break;
      case 1:
        rgb[0] = q, rgb[1] = v, rgb[2] = p;
        break;
      case 2:
        rgb[0] = p, rgb[1] = v, rgb[2] = t;
        break;
      case 3:
        rgb[0] = p, rgb[1] = q, rgb[2] = v;
        break;
      case 4:
        rgb[0] = t, rgb[1] = p, rgb[2] = v;
        break;
      default:
        rgb[0] = v, rgb[1] = p, rgb[2] = q;
        break;
    }
    for (size_t k = 0; k < 3; ++k) f.v[i + k] = std::clamp(rgb[k] * f.bound, 0.f, f.bound);
  }
}

Image color_image(const Tensor& x, const char* op, bool rgb_only) {
  Image img = detail::image_of(x, op);
  if (rgb_only)
    SPORE_CHECK(img.c == 3, "[vision.", op, "] expected an RGB image (H, W, 3), got shape ",
                shape_str(x.shape()));
  else
    SPORE_CHECK(img.c == 1 || img.c == 3, "[vision.", op,
                "] expected an image of 1 or 3 channels, got shape ", shape_str(x.shape()));
  return img;
}

std::pair<double, double> jitter_range(const std::vector<double>& v, const char* what,
                                       double center, double lo_bound) {
  SPORE_CHECK(v.size() == 1 || v.size() == 2, "[vision.RandomColorAdjust] ", what,
              " must be {x} or {lo, hi}, got ", v.size(), " values");
  if (v.size() == 1) {
    SPORE_CHECK(v[0] >= 0, "[vision.RandomColorAdjust] ", what, " must be >= 0, got ", v[0]);
    return {std::max(lo_bound, center - v[0]), center + v[0]};
  }
  SPORE_CHECK(v[0] <= v[1] && v[0] >= lo_bound, "[vision.RandomColorAdjust] ", what,
              " range must satisfy ", lo_bound, " <= lo <= hi, got {", v[0], ", ", v[1], "}");
  return {v[0], v[1]};
}

}  // namespace

data::TensorOp ConvertColor(ColorConversion conversion) {
  const Conversion cv_conv = conversion_of(conversion);
  return [cv_conv](const Tensor& x) {
    const Image img = detail::image_of(x, "ConvertColor");
    SPORE_CHECK(img.c == cv_conv.in_c, "[vision.ConvertColor] ", cv_conv.name, " expects ",
                cv_conv.in_c, " channels, got an image of shape ", shape_str(x.shape()));
    Tensor out = Tensor::empty({img.h, img.w, cv_conv.out_c}, img.dtype());
    cv::Mat dst = detail::as_mat(out);
    cv::cvtColor(detail::as_mat(img.t), dst, cv_conv.code);
    SPORE_ASSERT(dst.data == out.data_ptr(), "cv::cvtColor reallocated its output");
    return out;
  };
}

data::TensorOp AdjustBrightness(double factor) {
  SPORE_CHECK(factor >= 0, "[vision.AdjustBrightness] factor must be >= 0, got ", factor);
  return [factor](const Tensor& x) {
    const Image img = color_image(x, "AdjustBrightness", false);
    if (factor == 1) return img.t;  // exactly the identity
    FloatImage f = to_float(img);
    brightness(f, factor);
    return from_float(f, img);
  };
}
data::TensorOp AdjustContrast(double factor) {
  SPORE_CHECK(factor >= 0, "[vision.AdjustContrast] factor must be >= 0, got ", factor);
  return [factor](const Tensor& x) {
    const Image img = color_image(x, "AdjustContrast", false);
    if (factor == 1) return img.t;  // exactly the identity
    FloatImage f = to_float(img);
    contrast(f, factor);
    return from_float(f, img);
  };
}
data::TensorOp AdjustSaturation(double factor) {
  SPORE_CHECK(factor >= 0, "[vision.AdjustSaturation] factor must be >= 0, got ", factor);
  return [factor](const Tensor& x) {
    const Image img = color_image(x, "AdjustSaturation", true);
    if (factor == 1) return img.t;  // exactly the identity
    FloatImage f = to_float(img);
    saturation(f, factor);
    return from_float(f, img);
  };
}
data::TensorOp AdjustHue(double shift) {
  SPORE_CHECK(shift >= -0.5 && shift <= 0.5,
              "[vision.AdjustHue] shift must be in [-0.5, 0.5], got ", shift);
  return [shift](const Tensor& x) {
    const Image img = color_image(x, "AdjustHue", true);
    if (shift == 0) return img.t;  // exactly the identity
    FloatImage f = to_float(img);
    hue(f, shift);
    return from_float(f, img);
  };
}

data::TensorOp RandomColorAdjust(std::vector<double> brightness_, std::vector<double> contrast_,
                                 std::vector<double> saturation_, std::vector<double> hue_) {
  const auto b = jitter_range(brightness_, "brightness", 1, 0);
  const auto c = jitter_range(contrast_, "contrast", 1, 0);
  const auto s = jitter_range(saturation_, "saturation", 1, 0);
  const auto h = jitter_range(hue_, "hue", 0, -0.5);
  SPORE_CHECK(h.second <= 0.5, "[vision.RandomColorAdjust] hue must be within [-0.5, 0.5], got {",
              h.first, ", ", h.second, "}");
  return [=](const Tensor& x) {
    const bool needs_rgb = s != std::pair{1.0, 1.0} || h != std::pair{0.0, 0.0};
    const Image img = color_image(x, "RandomColorAdjust", needs_rgb);
    auto& rng = data::sample_rng();
    // torchvision ColorJitter.get_params: the order first, then the four factors.
    std::array<int, 4> order = {0, 1, 2, 3};
    for (int i = 3; i > 0; --i) std::swap(order[size_t(i)], order[size_t(rng.randint(0, i + 1))]);
    const double fb = rng.uniform(b.first, b.second), fc = rng.uniform(c.first, c.second);
    const double fs = rng.uniform(s.first, s.second), fh = rng.uniform(h.first, h.second);
    if (fb == 1 && fc == 1 && fs == 1 && fh == 0) return img.t;
    FloatImage f = to_float(img);
    for (int step : order) {
      if (step == 0 && fb != 1) brightness(f, fb);
      if (step == 1 && fc != 1) contrast(f, fc);
      if (step == 2 && fs != 1) saturation(f, fs);
      if (step == 3 && fh != 0) hue(f, fh);
    }
    return from_float(f, img);
  };
}

data::TensorOp Normalize(std::vector<double> mean, std::vector<double> std, bool is_hwc) {
  SPORE_CHECK(!mean.empty() && mean.size() == std.size(),
              "[vision.Normalize] mean and std must have the same non-zero length, got ",
              mean.size(), " and ", std.size());
  for (size_t i = 0; i < std.size(); ++i)
    SPORE_CHECK(std[i] != 0, "[vision.Normalize] std[", i, "] is 0");
  return [mean = std::move(mean), std = std::move(std), is_hwc](const Tensor& x) {
    SPORE_CHECK(x.defined() && (x.dim() == 3 || (is_hwc && x.dim() == 2)),
                "[vision.Normalize] expected an image of rank 3 ",
                is_hwc ? "(H, W, C)" : "(C, H, W)", ", got shape ",
                x.defined() ? shape_str(x.shape()) : "undefined");
    SPORE_CHECK_TYPE(x.dtype() != kBool, "[vision.Normalize] expected a numeric image, got bool");
    const int64_t c = x.dim() == 2 ? 1 : (is_hwc ? x.shape()[2] : x.shape()[0]);
    SPORE_CHECK(mean.size() == 1 || int64_t(mean.size()) == c, "[vision.Normalize] ", mean.size(),
                " means/stds for an image of ", c, " channels (shape ", shape_str(x.shape()),
                is_hwc ? ", HWC)" : ", CHW)");
    const Tensor src = spore::detail::contiguous_copy(x);
    Tensor out = Tensor::empty(src.shape(), kFloat32);
    float* dst = out.data<float>();
    spore::detail::convert_elements(src.data_ptr(), src.dtype(), dst, kFloat32, src.numel());
    std::vector<float> mu(static_cast<size_t>(c)), inv(static_cast<size_t>(c));
    for (int64_t k = 0; k < c; ++k) {
      const size_t m = mean.size() == 1 ? 0 : size_t(k);
      mu[size_t(k)] = float(mean[m]), inv[size_t(k)] = float(1.0 / std[m]);
    }
    const int64_t n = src.numel();
    if (is_hwc) {
      for (int64_t i = 0; i < n; ++i) dst[i] = (dst[i] - mu[size_t(i % c)]) * inv[size_t(i % c)];
    } else {
      const int64_t hw = n / c;
      for (int64_t k = 0; k < c; ++k)
        for (int64_t i = 0; i < hw; ++i)
          dst[k * hw + i] = (dst[k * hw + i] - mu[size_t(k)]) * inv[size_t(k)];
    }
    return out;
  };
}

}  // namespace spore::vision
