// The helpers of image.h: image checks, tensor <-> cv::Mat wrapping, crops, resizes and warps.
#include "data/vision/image.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <opencv2/imgproc.hpp>

#include "core/tensor_util.h"

namespace spore::vision::detail {

Image image_of(const Tensor& x, const char* op, bool cv_types) {
  SPORE_CHECK(x.defined(), "[vision.", op, "] got an undefined tensor");
  SPORE_CHECK(x.dim() == 2 || x.dim() == 3, "[vision.", op,
              "] expected an image of rank 3 (H, W, C) or 2 (H, W), got shape ",
              shape_str(x.shape()));
  if (cv_types)
    SPORE_CHECK_TYPE(x.dtype() == kUInt8 || x.dtype() == kFloat32, "[vision.", op,
                     "] expected a uint8 or float32 image, got ", dtype_name(x.dtype()),
                     "; apply vision::TypeCast first");
  Image img;
  img.t = spore::detail::contiguous_copy(x);
  img.h = x.shape()[0];
  img.w = x.shape()[1];
  img.has_c = x.dim() == 3;
  img.c = img.has_c ? x.shape()[2] : 1;
  SPORE_CHECK(img.h > 0 && img.w > 0 && img.c > 0, "[vision.", op, "] got an empty image of shape ",
              shape_str(x.shape()));
  return img;
}

Tensor new_image(const Image& like, int64_t h, int64_t w, int64_t c) {
  if (!like.has_c && c == 1) return Tensor::empty({h, w}, like.dtype());
  return Tensor::empty({h, w, c}, like.dtype());
}
Tensor new_image(const Image& like, int64_t h, int64_t w) { return new_image(like, h, w, like.c); }

int cv_type(DType dt, int64_t channels) {
  SPORE_ASSERT(channels > 0 && channels <= CV_CN_MAX);
  return dt == kUInt8 ? CV_MAKETYPE(CV_8U, int(channels)) : CV_MAKETYPE(CV_32F, int(channels));
}

cv::Mat as_mat(const Tensor& t) {
  SPORE_ASSERT(t.is_contiguous() && (t.dim() == 2 || t.dim() == 3));
  SPORE_ASSERT(t.dtype() == kUInt8 || t.dtype() == kFloat32);
  const int64_t c = t.dim() == 3 ? t.shape()[2] : 1;
  return cv::Mat(int(t.shape()[0]), int(t.shape()[1]), cv_type(t.dtype(), c), t.data_ptr());
}

int cv_inter(Inter inter) {
  switch (inter) {
    case Inter::Linear:
      return cv::INTER_LINEAR;
    case Inter::Nearest:
      return cv::INTER_NEAREST;
    case Inter::Cubic:
      return cv::INTER_CUBIC;
    case Inter::Area:
      return cv::INTER_AREA;
    case Inter::Lanczos:
      return cv::INTER_LANCZOS4;
  }
  return cv::INTER_LINEAR;
}

std::vector<double> fill_per_channel(const std::vector<double>& fill, int64_t c, const char* op) {
  if (fill.empty()) return std::vector<double>(size_t(c), 0.0);
  if (fill.size() == 1) return std::vector<double>(size_t(c), fill[0]);
  SPORE_CHECK(int64_t(fill.size()) == c, "[vision.", op, "] fill has ", fill.size(),
              " values for an image of ", c, " channels; give 1 or ", c);
  return fill;
}

cv::Scalar fill_scalar(const std::vector<double>& fill, int64_t c, const char* op) {
  const std::vector<double> f = fill_per_channel(fill, c, op);
  cv::Scalar s;
  for (int64_t i = 0; i < c && i < 4; ++i) s[int(i)] = f[size_t(i)];
  return s;
}

std::pair<int64_t, int64_t> size_hw(const std::vector<int64_t>& size, const char* op) {
  SPORE_CHECK(size.size() == 1 || size.size() == 2, "[vision.", op,
              "] size must be {s} or {h, w}, got ", size.size(), " values");
  for (int64_t s : size) SPORE_CHECK(s > 0, "[vision.", op, "] size must be positive, got ", s);
  return size.size() == 1 ? std::pair{size[0], size[0]} : std::pair{size[0], size[1]};
}

std::pair<int64_t, int64_t> resize_target(int64_t h, int64_t w, const std::vector<int64_t>& size,
                                          const char* op) {
  const auto [th, tw] = size_hw(size, op);
  if (size.size() == 2) return {th, tw};
  const int64_t s = size[0];
  if (h <= w) return {s, std::max<int64_t>(1, int64_t(double(s) * double(w) / double(h)))};
  return {std::max<int64_t>(1, int64_t(double(s) * double(h) / double(w))), s};
}

Tensor crop(const Image& img, int64_t top, int64_t left, int64_t h, int64_t w) {
  SPORE_ASSERT(top >= 0 && left >= 0 && top + h <= img.h && left + w <= img.w);
  Tensor out = new_image(img, h, w);
  const size_t px = size_t(img.c) * itemsize(img.dtype());
  const char* src = static_cast<const char*>(img.t.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  for (int64_t i = 0; i < h; ++i)
    std::memcpy(dst + size_t(i * w) * px, src + size_t((top + i) * img.w + left) * px,
                size_t(w) * px);
  return out;
}

Tensor resize(const Image& img, int64_t h, int64_t w, Inter inter) {
  SPORE_CHECK(
      img.c <= 4 || inter == Inter::Linear || inter == Inter::Nearest || inter == Inter::Area,
      "[vision.Resize] cubic and lanczos interpolation take at most 4 channels, got ", img.c);
  Tensor out = new_image(img, h, w);
  if (h == img.h && w == img.w) {
    std::memcpy(out.data_ptr(), img.t.data_ptr(), img.t.nbytes());
    return out;
  }
  cv::Mat dst = as_mat(out);
  cv::resize(as_mat(img.t), dst, dst.size(), 0, 0, cv_inter(inter));
  SPORE_ASSERT(dst.data == out.data_ptr(), "cv::resize reallocated its output");
  return out;
}

Tensor warp_affine(const Image& img, const cv::Matx23d& m, int64_t out_h, int64_t out_w,
                   Inter inter, const std::vector<double>& fill, const char* op) {
  SPORE_CHECK(img.c <= 4, "[vision.", op, "] takes images of at most 4 channels, got ", img.c);
  SPORE_CHECK(inter == Inter::Nearest || inter == Inter::Linear || inter == Inter::Cubic,
              "[vision.", op, "] resample must be Nearest, Linear or Cubic");
  Tensor out = new_image(img, out_h, out_w);
  cv::Mat dst = as_mat(out);
  cv::warpAffine(as_mat(img.t), dst, cv::Mat(m), dst.size(), cv_inter(inter), cv::BORDER_CONSTANT,
                 fill_scalar(fill, img.c, op));
  SPORE_ASSERT(dst.data == out.data_ptr(), "cv::warpAffine reallocated its output");
  return out;
}

cv::Matx33d to33(const cv::Matx23d& m) {
  return {m(0, 0), m(0, 1), m(0, 2), m(1, 0), m(1, 1), m(1, 2), 0, 0, 1};
}
cv::Matx23d to23(const cv::Matx33d& m) {
  return {m(0, 0), m(0, 1), m(0, 2), m(1, 0), m(1, 1), m(1, 2)};
}

cv::Matx23d index_to_corner(const cv::Matx23d& m) {
  cv::Matx23d r = m;
  r(0, 2) += 0.5 * (1 - m(0, 0) - m(0, 1));
  r(1, 2) += 0.5 * (1 - m(1, 0) - m(1, 1));
  return r;
}

std::pair<double, double> cos_sin_deg(double degrees) {
  const double q = degrees / 90.0;
  if (q == std::floor(q)) {
    const int k = ((int64_t(q) % 4) + 4) % 4;
    static const double c[4] = {1, 0, -1, 0}, s[4] = {0, 1, 0, -1};
    return {c[k], s[k]};
  }
  const double r = degrees * M_PI / 180.0;
  return {std::cos(r), std::sin(r)};
}

}  // namespace spore::vision::detail
