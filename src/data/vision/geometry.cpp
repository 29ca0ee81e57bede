// Geometric transforms on one HWC image: Resize, crops (Center, Random, RandomResized), flips, Pad,
// Rotate, RandomAffine, CutOut. Pixel moves that need no interpolation (crop, flip, pad, cutout)
// are byte copies, so they work for every dtype and channel count; the rest go through OpenCV.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <opencv2/imgproc.hpp>

#include "data/vision/image.h"
#include "spore/data/sample_rng.h"

namespace spore::vision {
namespace detail {

std::vector<char> fill_pixel(const std::vector<double>& fill, int64_t c, DType dt, const char* op) {
  const std::vector<double> f = fill_per_channel(fill, c, op);
  const size_t is = itemsize(dt);
  std::vector<char> px(size_t(c) * is);
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t k = 0; k < c; ++k) {
      const T v = T(f[size_t(k)]);
      std::memcpy(px.data() + size_t(k) * is, &v, is);
    }
  });
  return px;
}

namespace {
// Source index for output index i (relative to the image start) in a padded axis of n pixels; -1
// means "fill" (Constant mode). Reflect mirrors about the edge pixel (numpy "reflect"), Symmetric
// repeats it (numpy "symmetric"); pads wider than the image keep mirroring.
int64_t pad_index(int64_t i, int64_t n, Border mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case Border::Constant:
      return -1;
    case Border::Edge:
      return std::clamp<int64_t>(i, 0, n - 1);
    case Border::Reflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      int64_t k = ((i % period) + period) % period;
      return k < n ? k : period - k;
    }
    case Border::Symmetric: {
      const int64_t period = 2 * n;
      int64_t k = ((i % period) + period) % period;
      return k < n ? k : period - 1 - k;
    }
  }
  return -1;
}
}  // namespace

Tensor pad(const Image& img, int64_t left, int64_t top, int64_t right, int64_t bottom,
           const std::vector<double>& fill, Border mode, const char* op) {
  SPORE_CHECK(left >= 0 && top >= 0 && right >= 0 && bottom >= 0, "[vision.", op,
              "] padding must be non-negative, got left ", left, " top ", top, " right ", right,
              " bottom ", bottom);
  const int64_t oh = img.h + top + bottom, ow = img.w + left + right;
  Tensor out = new_image(img, oh, ow);
  const size_t px = size_t(img.c) * itemsize(img.dtype());
  const std::vector<char> fpx = fill_pixel(fill, img.c, img.dtype(), op);
  std::vector<int64_t> cols(static_cast<size_t>(ow));
  for (int64_t j = 0; j < ow; ++j) cols[size_t(j)] = pad_index(j - left, img.w, mode);
  const char* src = static_cast<const char*>(img.t.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  for (int64_t i = 0; i < oh; ++i) {
    const int64_t si = pad_index(i - top, img.h, mode);
    char* drow = dst + size_t(i * ow) * px;
    for (int64_t j = 0; j < ow; ++j) {
      const int64_t sj = cols[size_t(j)];
      const char* s = si < 0 || sj < 0 ? fpx.data() : src + size_t(si * img.w + sj) * px;
      std::memcpy(drow + size_t(j) * px, s, px);
    }
  }
  return out;
}

// Crop (top, left, h, w) of img resized to (oh, ow) without copying the crop first.
Tensor crop_resize(const Image& img, int64_t top, int64_t left, int64_t h, int64_t w, int64_t oh,
                   int64_t ow, Inter inter) {
  if (h == oh && w == ow) return crop(img, top, left, h, w);
  Tensor out = new_image(img, oh, ow);
  cv::Mat dst = as_mat(out);
  const cv::Mat roi = as_mat(img.t)(cv::Rect(int(left), int(top), int(w), int(h)));
  cv::resize(roi, dst, dst.size(), 0, 0, cv_inter(inter));
  SPORE_ASSERT(dst.data == out.data_ptr(), "cv::resize reallocated its output");
  return out;
}

CropBox random_resized_crop_box(int64_t ih, int64_t iw, double s0, double s1, double r0,
                                double r1) {
  auto& rng = data::sample_rng();
  const double area = double(ih) * double(iw);
  const double lr0 = std::log(r0), lr1 = std::log(r1);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(s0, s1);
    const double aspect = std::exp(rng.uniform(lr0, lr1));
    const int64_t w = std::llround(std::sqrt(target * aspect));
    const int64_t h = std::llround(std::sqrt(target / aspect));
    if (w > 0 && h > 0 && w <= iw && h <= ih) {
      const int64_t top = rng.randint(0, ih - h + 1);
      const int64_t left = rng.randint(0, iw - w + 1);
      return {top, left, h, w};
    }
  }
  // Fallback: the whole image, cropped to the nearest allowed aspect ratio, centered.
  const double in_ratio = double(iw) / double(ih);
  int64_t w = iw, h = ih;
  if (in_ratio < r0)
    h = std::max<int64_t>(1, std::llround(double(w) / r0));
  else if (in_ratio > r1)
    w = std::max<int64_t>(1, std::llround(double(h) * r1));
  h = std::min(h, ih), w = std::min(w, iw);
  return {(ih - h) / 2, (iw - w) / 2, h, w};
}

void check_rrc_params(const std::vector<double>& scale, const std::vector<double>& ratio,
                      const char* op) {
  SPORE_CHECK(scale.size() == 2 && ratio.size() == 2, "[vision.", op,
              "] scale and ratio must be {lo, hi}, got ", scale.size(), " and ", ratio.size(),
              " values");
  SPORE_CHECK(
      0 < scale[0] && scale[0] <= scale[1] && scale[1] <= 1 && 0 < ratio[0] && ratio[0] <= ratio[1],
      "[vision.", op, "] expected 0 < scale lo <= hi <= 1 and 0 < ratio lo <= hi, got scale {",
      scale[0], ", ", scale[1], "} ratio {", ratio[0], ", ", ratio[1], "}");
}

}  // namespace detail

namespace {
using detail::Image;

// {all} | {left/right, top/bottom} | {left, top, right, bottom} -> {left, top, right, bottom}.
std::array<int64_t, 4> padding_ltrb(const std::vector<int64_t>& p, const char* op) {
  SPORE_CHECK(p.size() == 1 || p.size() == 2 || p.size() == 4, "[vision.", op,
              "] padding must have 1, 2 or 4 values, got ", p.size());
  for (int64_t v : p) SPORE_CHECK(v >= 0, "[vision.", op, "] padding must be >= 0, got ", v);
  if (p.size() == 1) return {p[0], p[0], p[0], p[0]};
  if (p.size() == 2) return {p[0], p[1], p[0], p[1]};
  return {p[0], p[1], p[2], p[3]};
}

Tensor flip(const Image& img, bool horizontal) {
  Tensor out = detail::new_image(img, img.h, img.w);
  const size_t px = size_t(img.c) * itemsize(img.dtype()), row = size_t(img.w) * px;
  const char* src = static_cast<const char*>(img.t.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  for (int64_t i = 0; i < img.h; ++i) {
    if (!horizontal) {
      std::memcpy(dst + size_t(i) * row, src + size_t(img.h - 1 - i) * row, row);
      continue;
    }
    for (int64_t j = 0; j < img.w; ++j)
      std::memcpy(dst + size_t(i) * row + size_t(j) * px,
                  src + size_t(i) * row + size_t(img.w - 1 - j) * px, px);
  }
  return out;
}

std::pair<double, double> range_of(const std::vector<double>& v, const char* op, const char* what,
                                   bool symmetric) {
  SPORE_CHECK(v.size() == 1 || v.size() == 2, "[vision.", op, "] ", what,
              " must be {x} or {lo, hi}, got ", v.size(), " values");
  if (v.size() == 1) {
    SPORE_CHECK(!symmetric || v[0] >= 0, "[vision.", op, "] ", what,
                " as one value must be >= 0, got ", v[0]);
    return symmetric ? std::pair{-v[0], v[0]} : std::pair{v[0], v[0]};
  }
  SPORE_CHECK(v[0] <= v[1], "[vision.", op, "] ", what, " range must have lo <= hi, got {", v[0],
              ", ", v[1], "}");
  return {v[0], v[1]};
}

}  // namespace

data::TensorOp Resize(std::vector<int64_t> size, Inter interpolation) {
  detail::size_hw(size, "Resize");
  return [size = std::move(size), interpolation](const Tensor& x) {
    const Image img = detail::image_of(x, "Resize");
    const auto [h, w] = detail::resize_target(img.h, img.w, size, "Resize");
    return detail::resize(img, h, w, interpolation);
  };
}

data::TensorOp CenterCrop(std::vector<int64_t> size) {
  const auto hw = detail::size_hw(
      size, "CenterCrop");  // no structured binding: lambdas capture these (clang 14)
  const int64_t ch = hw.first, cw = hw.second;
  return [ch, cw](const Tensor& x) {
    Image img = detail::image_of(x, "CenterCrop", false);
    if (ch > img.h || cw > img.w) {  // torchvision: pad with 0 to the crop size, then crop
      const int64_t ph = std::max<int64_t>(0, ch - img.h), pw = std::max<int64_t>(0, cw - img.w);
      img = detail::image_of(detail::pad(img, pw / 2, ph / 2, pw - pw / 2, ph - ph / 2, {0},
                                         Border::Constant, "CenterCrop"),
                             "CenterCrop", false);
    }
    return detail::crop(img, (img.h - ch) / 2, (img.w - cw) / 2, ch, cw);
  };
}

data::TensorOp RandomCrop(std::vector<int64_t> size, RandomCropOptions opts) {
  const auto hw = detail::size_hw(
      size, "RandomCrop");  // no structured binding: lambdas capture these (clang 14)
  const int64_t ch = hw.first, cw = hw.second;
  const std::array<int64_t, 4> p = opts.padding.empty() ? std::array<int64_t, 4>{0, 0, 0, 0}
                                                        : padding_ltrb(opts.padding, "RandomCrop");
  return [ch, cw, p, opts](const Tensor& x) {
    Image img = detail::image_of(x, "RandomCrop", false);
    if (p[0] || p[1] || p[2] || p[3])
      img = detail::image_of(
          detail::pad(img, p[0], p[1], p[2], p[3], opts.fill, opts.padding_mode, "RandomCrop"),
          "RandomCrop", false);
    if (opts.pad_if_needed && (img.h < ch || img.w < cw)) {  // torchvision pads both sides
      const int64_t ph = std::max<int64_t>(0, ch - img.h), pw = std::max<int64_t>(0, cw - img.w);
      img = detail::image_of(
          detail::pad(img, pw, ph, pw, ph, opts.fill, opts.padding_mode, "RandomCrop"),
          "RandomCrop", false);
    }
    SPORE_CHECK(img.h >= ch && img.w >= cw, "[vision.RandomCrop] crop size (", ch, ", ", cw,
                ") is larger than the (padded) image (", img.h, ", ", img.w,
                "); set pad_if_needed or padding");
    auto& rng = data::sample_rng();
    const int64_t top = rng.randint(0, img.h - ch + 1);
    const int64_t left = rng.randint(0, img.w - cw + 1);
    return detail::crop(img, top, left, ch, cw);
  };
}

data::TensorOp RandomResizedCrop(std::vector<int64_t> size, std::vector<double> scale,
                                 std::vector<double> ratio, Inter interpolation) {
  const auto hw = detail::size_hw(
      size, "RandomResizedCrop");  // no structured binding: lambdas capture these (clang 14)
  const int64_t oh = hw.first, ow = hw.second;
  detail::check_rrc_params(scale, ratio, "RandomResizedCrop");
  return [=](const Tensor& x) {
    const Image img = detail::image_of(x, "RandomResizedCrop");
    const detail::CropBox b =
        detail::random_resized_crop_box(img.h, img.w, scale[0], scale[1], ratio[0], ratio[1]);
    return detail::crop_resize(img, b.top, b.left, b.h, b.w, oh, ow, interpolation);
  };
}

data::TensorOp HorizontalFlip() {
  return [](const Tensor& x) { return flip(detail::image_of(x, "HorizontalFlip", false), true); };
}
data::TensorOp VerticalFlip() {
  return [](const Tensor& x) { return flip(detail::image_of(x, "VerticalFlip", false), false); };
}

data::TensorOp RandomHorizontalFlip(double prob) {
  SPORE_CHECK(prob >= 0 && prob <= 1, "[vision.RandomHorizontalFlip] prob must be in [0, 1], got ",
              prob);
  return [prob](const Tensor& x) {
    const Image img = detail::image_of(x, "RandomHorizontalFlip", false);
    return data::sample_rng().bernoulli(prob) ? flip(img, true) : img.t;
  };
}

data::TensorOp RandomVerticalFlip(double prob) {
  SPORE_CHECK(prob >= 0 && prob <= 1, "[vision.RandomVerticalFlip] prob must be in [0, 1], got ",
              prob);
  return [prob](const Tensor& x) {
    const Image img = detail::image_of(x, "RandomVerticalFlip", false);
    return data::sample_rng().bernoulli(prob) ? flip(img, false) : img.t;
  };
}

data::TensorOp Pad(std::vector<int64_t> padding, std::vector<double> fill, Border padding_mode) {
  const std::array<int64_t, 4> p = padding_ltrb(padding, "Pad");
  return [p, fill = std::move(fill), padding_mode](const Tensor& x) {
    const Image img = detail::image_of(x, "Pad", false);
    return detail::pad(img, p[0], p[1], p[2], p[3], fill, padding_mode, "Pad");
  };
}

data::TensorOp Rotate(double degrees, Inter resample, bool expand, std::vector<double> center,
                      std::vector<double> fill) {
  SPORE_CHECK(center.empty() || center.size() == 2,
              "[vision.Rotate] center must be {} or {x, y}, got ", center.size(), " values");
  return [=](const Tensor& x) {
    const Image img = detail::image_of(x, "Rotate");
    const double cx = center.empty() ? (img.w - 1) / 2.0 : center[0];
    const double cy = center.empty() ? (img.h - 1) / 2.0 : center[1];
    const auto [c, s] = detail::cos_sin_deg(degrees);
    // Counter-clockwise on screen (y down): p' = R (p - center) + center, R = [[c, s], [-s, c]].
    cv::Matx23d m(c, s, cx - c * cx - s * cy, -s, c, cy + s * cx - c * cy);
    int64_t oh = img.h, ow = img.w;
    if (expand) {  // the bounding box of the rotated image's corners, moved to the origin
      double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
      for (double px : {-0.5, img.w - 0.5})
        for (double py : {-0.5, img.h - 0.5}) {
          const double qx = m(0, 0) * px + m(0, 1) * py + m(0, 2);
          const double qy = m(1, 0) * px + m(1, 1) * py + m(1, 2);
          x0 = std::min(x0, qx), x1 = std::max(x1, qx), y0 = std::min(y0, qy),
          y1 = std::max(y1, qy);
        }
      ow = std::max<int64_t>(1, int64_t(std::ceil(x1 - x0 - 1e-6)));
      oh = std::max<int64_t>(1, int64_t(std::ceil(y1 - y0 - 1e-6)));
      // Center the rotated box in the output.
      m(0, 2) += (ow - (x1 - x0)) / 2 - 0.5 - x0;
      m(1, 2) += (oh - (y1 - y0)) / 2 - 0.5 - y0;
    }
    return detail::warp_affine(img, m, oh, ow, resample, fill, "Rotate");
  };
}

data::TensorOp RandomAffine(AffineOptions opts) {
  const auto deg = range_of(opts.degrees, "RandomAffine", "degrees", true);
  SPORE_CHECK(opts.translate.empty() || opts.translate.size() == 2,
              "[vision.RandomAffine] translate must be {} or {fx, fy}, got ", opts.translate.size(),
              " values");
  for (double t : opts.translate)
    SPORE_CHECK(t >= 0 && t <= 1,
                "[vision.RandomAffine] translate fractions must be in [0, 1], got ", t);
  const auto sc = opts.scale.empty() ? std::pair{1.0, 1.0}
                                     : range_of(opts.scale, "RandomAffine", "scale", false);
  SPORE_CHECK(sc.first > 0, "[vision.RandomAffine] scale must be positive, got ", sc.first);
  SPORE_CHECK(opts.shear.size() <= 2 || opts.shear.size() == 4,
              "[vision.RandomAffine] shear must have 0, 1, 2 or 4 values, got ", opts.shear.size());
  std::pair<double, double> shx{0, 0}, shy{0, 0};
  if (opts.shear.size() == 1 || opts.shear.size() == 2)
    shx = range_of(opts.shear, "RandomAffine", "shear", true);
  if (opts.shear.size() == 4)
    shx = {opts.shear[0], opts.shear[1]}, shy = {opts.shear[2], opts.shear[3]};
  return [=](const Tensor& x) {
    const Image img = detail::image_of(x, "RandomAffine");
    auto& rng = data::sample_rng();
    // torchvision's draw order: angle, translation, scale, shear.
    const double angle = rng.uniform(deg.first, deg.second);
    const double max_dx = opts.translate.empty() ? 0 : opts.translate[0] * double(img.w);
    const double max_dy = opts.translate.empty() ? 0 : opts.translate[1] * double(img.h);
    const double tx = std::round(rng.uniform(-max_dx, max_dx));
    const double ty = std::round(rng.uniform(-max_dy, max_dy));
    const double s = rng.uniform(sc.first, sc.second);
    const double sx = rng.uniform(shx.first, shx.second), sy = rng.uniform(shy.first, shy.second);
    const auto [c, sn] = detail::cos_sin_deg(angle);
    // A = s * R * Shear, Shear = [[1, tan sx], [tan sy, 1]]; p' = A (p - ctr) + ctr + t.
    const cv::Matx22d rot(c, sn, -sn, c);
    const cv::Matx22d shear(1, std::tan(sx * M_PI / 180), std::tan(sy * M_PI / 180), 1);
    const cv::Matx22d a = rot * shear * s;
    const double cx = (img.w - 1) / 2.0, cy = (img.h - 1) / 2.0;
    const cv::Matx23d m(a(0, 0), a(0, 1), cx + tx - a(0, 0) * cx - a(0, 1) * cy, a(1, 0), a(1, 1),
                        cy + ty - a(1, 0) * cx - a(1, 1) * cy);
    return detail::warp_affine(img, m, img.h, img.w, opts.resample, opts.fill, "RandomAffine");
  };
}

data::TensorOp CutOut(int64_t length, int64_t num_patches, std::vector<double> fill) {
  SPORE_CHECK(length > 0 && num_patches >= 0,
              "[vision.CutOut] expected length > 0 and num_patches >= 0, got length ", length,
              " num_patches ", num_patches);
  return [=](const Tensor& x) {
    const Image img = detail::image_of(x, "CutOut", false);
    Tensor out = detail::new_image(img, img.h, img.w);
    std::memcpy(out.data_ptr(), img.t.data_ptr(), img.t.nbytes());
    const std::vector<char> fpx = detail::fill_pixel(fill, img.c, img.dtype(), "CutOut");
    const size_t px = fpx.size();
    char* dst = static_cast<char*>(out.data_ptr());
    const int64_t lh = std::min(length, img.h), lw = std::min(length, img.w);
    auto& rng = data::sample_rng();
    for (int64_t p = 0; p < num_patches; ++p) {
      const int64_t y = rng.randint(0, img.h - lh + 1);
      const int64_t x0 = rng.randint(0, img.w - lw + 1);
      for (int64_t i = y; i < y + lh; ++i)
        for (int64_t j = x0; j < x0 + lw; ++j)
          std::memcpy(dst + size_t(i * img.w + j) * px, fpx.data(), px);
    }
    return out;
  };
}

}  // namespace spore::vision
