// Helpers for the vision transform tests: small images built from a function of (y, x, c), element
// access without op dispatch, seeded calls of random transforms and error capture.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "spore/data/sample_rng.h"
#include "spore/data/vision.h"
#include "test_util.h"

namespace vt {
using namespace spore;

// (h, w, c) uint8 or float32 image with pixel (y, x, c) = f(y, x, c).
inline Tensor make_image(int64_t h, int64_t w, int64_t c,
                         const std::function<double(int64_t, int64_t, int64_t)>& f,
                         DType dt = kUInt8) {
  Tensor t = Tensor::empty({h, w, c}, dt);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k) {
        const int64_t i = (y * w + x) * c + k;
        if (dt == kUInt8)
          t.data<uint8_t>()[i] = uint8_t(f(y, x, k));
        else
          t.data<float>()[i] = float(f(y, x, k));
      }
  return t;
}

// A distinct value per (y, x, c) below 256 for images up to 8x8x3.
inline Tensor index_image(int64_t h, int64_t w, int64_t c) {
  return make_image(h, w, c,
                    [=](int64_t y, int64_t x, int64_t k) { return double((y * w + x) * c + k); });
}

// Element (y, x, c) of a contiguous HWC image, as double.
inline double at(const Tensor& t, int64_t y, int64_t x, int64_t c = 0) {
  EXPECT_TRUE(t.is_contiguous());
  const int64_t w = t.shape()[1], ch = t.dim() == 3 ? t.shape()[2] : 1;
  const int64_t i = (y * w + x) * ch + c;
  if (t.dtype() == kUInt8) return t.data<uint8_t>()[i];
  if (t.dtype() == kFloat32) return t.data<float>()[i];
  ADD_FAILURE() << "at(): unexpected dtype";
  return 0;
}

template <typename T>
std::vector<T> values(const Tensor& t) {
  EXPECT_TRUE(t.is_contiguous());
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.numel());
}

inline bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

inline double mean_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double s = 0;
  const int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i)
    s += std::abs(double(a.data<uint8_t>()[i]) - double(b.data<uint8_t>()[i]));
  return s / double(n);
}

inline Tensor seeded(const data::TensorOp& op, const Tensor& x, uint64_t seed) {
  data::sample_rng().seed(seed);
  return op(x);
}

using ::spore::test::error_of;

// Bounding box [x0, y0, x1, y1) of the pixels of channel 0 above `thr` (corner coordinates);
// {0, 0, 0, 0} when none.
inline std::array<double, 4> bright_bbox(const Tensor& img, double thr = 127) {
  const int64_t h = img.shape()[0], w = img.shape()[1];
  int64_t x0 = w, y0 = h, x1 = -1, y1 = -1;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      if (at(img, y, x) > thr)
        x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  if (x1 < 0) return {0, 0, 0, 0};
  return {double(x0), double(y0), double(x1 + 1), double(y1 + 1)};
}

}  // namespace vt
