// Generic transforms (TypeCast, OneHot, Compose, RandomApply, RandomChoice), Beta sampling and the
// batch mixers MixUp and CutMix (rows {images (N, ...), one-hot labels (N, K), ...}).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/tensor_util.h"
#include "data/vision/image.h"
#include "spore/data/sample_rng.h"

namespace spore::vision {
namespace {

Tensor as_float32(const Tensor& x) {
  const Tensor src = spore::detail::contiguous_copy(x);
  Tensor out = Tensor::empty(src.shape(), kFloat32);
  spore::detail::convert_elements(src.data_ptr(), src.dtype(), out.data_ptr(), kFloat32,
                                  src.numel());
  return out;
}

// Marsaglia and Tsang's method, with the a < 1 boost (Gamma(a) = Gamma(a + 1) U^(1 / a)).
double sample_gamma(double a) {
  auto& rng = data::sample_rng();
  if (a < 1) {
    const double g = sample_gamma(a + 1);
    return g * std::pow(std::max(rng.uniform(), 1e-300), 1.0 / a);
  }
  const double d = a - 1.0 / 3, c = 1 / std::sqrt(9 * d);
  for (;;) {
    const double x = rng.normal();
    double v = 1 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    const double u = rng.uniform();
    if (std::log(std::max(u, 1e-300)) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

std::vector<int64_t> permutation(int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  auto& rng = data::sample_rng();
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[size_t(i)], p[size_t(rng.randint(0, i + 1))]);
  return p;
}

// Checks a batch row {images (N, ...), labels (N, K)} and returns them as float32.
std::pair<Tensor, Tensor> batch_of(const data::Row& row, const char* op, int64_t image_rank) {
  SPORE_CHECK(row.size() >= 2, "[vision.", op,
              "] expected a row {images, one-hot labels, ...}, got ", row.size(), " columns");
  const Tensor &img = row[0], &lab = row[1];
  SPORE_CHECK(img.defined() && lab.defined(), "[vision.", op, "] got an undefined column");
  SPORE_CHECK(image_rank == 0 ? img.dim() >= 1 : img.dim() == image_rank, "[vision.", op,
              "] expected images of rank ", image_rank == 0 ? 1 : image_rank,
              image_rank == 4 ? " (N, H, W, C) or (N, C, H, W)" : " or more", ", got shape ",
              shape_str(img.shape()), "; apply it after batch()");
  SPORE_CHECK(lab.dim() == 2 && lab.shape()[0] == img.shape()[0], "[vision.", op,
              "] expected one-hot labels (N, K) with N = ", img.shape()[0], ", got shape ",
              shape_str(lab.shape()), "; apply vision::OneHot to the label column first");
  SPORE_CHECK_TYPE(img.dtype() != kBool && lab.dtype() != kBool, "[vision.", op,
                   "] expected numeric images and labels, got bool");
  return {as_float32(img), as_float32(lab)};
}

}  // namespace

double sample_beta(double a, double b) {
  SPORE_CHECK(a > 0 && b > 0, "[vision.sample_beta] parameters must be positive, got ", a, ", ", b);
  const double x = sample_gamma(a), y = sample_gamma(b);
  return x + y > 0 ? x / (x + y) : 0.5;
}

data::TensorOp TypeCast(DType dtype) {
  return [dtype](const Tensor& x) {
    SPORE_CHECK(x.defined(), "[vision.TypeCast] got an undefined tensor");
    if (x.dtype() == dtype) return x;
    const Tensor src = spore::detail::contiguous_copy(x);
    Tensor out = Tensor::empty(src.shape(), dtype);
    spore::detail::convert_elements(src.data_ptr(), src.dtype(), out.data_ptr(), dtype,
                                    src.numel());
    return out;
  };
}

data::TensorOp OneHot(int64_t num_classes, double smoothing) {
  SPORE_CHECK(num_classes > 0, "[vision.OneHot] num_classes must be positive, got ", num_classes);
  SPORE_CHECK(smoothing >= 0 && smoothing <= 1, "[vision.OneHot] smoothing must be in [0, 1], got ",
              smoothing);
  return [num_classes, smoothing](const Tensor& x) {
    SPORE_CHECK(x.defined(), "[vision.OneHot] got an undefined tensor");
    SPORE_CHECK_TYPE(is_integral(x.dtype()), "[vision.OneHot] expected integer class ids, got ",
                     dtype_name(x.dtype()));
    const Tensor src = spore::detail::contiguous_copy(x);
    std::vector<int64_t> ids(static_cast<size_t>(src.numel()));
    spore::detail::convert_elements(src.data_ptr(), src.dtype(), ids.data(), kInt64, src.numel());
    Shape shape = src.shape();
    shape.push_back(num_classes);
    Tensor out = Tensor::empty(shape, kFloat32);
    float* dst = out.data<float>();
    const float off = float(smoothing / double(num_classes)), on = float(1 - smoothing) + off;
    for (size_t i = 0; i < ids.size(); ++i) {
      SPORE_CHECK_INDEX(ids[i] >= 0 && ids[i] < num_classes, "[vision.OneHot] class id ", ids[i],
                        " is outside [0, ", num_classes, ")");
      float* r = dst + i * size_t(num_classes);
      std::fill(r, r + num_classes, off);
      r[ids[i]] = on;
    }
    return out;
  };
}

data::TensorOp Compose(std::vector<data::TensorOp> transforms) {
  for (size_t i = 0; i < transforms.size(); ++i)
    SPORE_CHECK(transforms[i] != nullptr, "[vision.Compose] transform ", i, " is empty");
  return [transforms = std::move(transforms)](const Tensor& x) {
    Tensor y = x;
    for (const auto& t : transforms) y = t(y);
    return y;
  };
}

data::TensorOp RandomApply(std::vector<data::TensorOp> transforms, double prob) {
  SPORE_CHECK(prob >= 0 && prob <= 1, "[vision.RandomApply] prob must be in [0, 1], got ", prob);
  data::TensorOp all = Compose(std::move(transforms));
  return [all = std::move(all), prob](const Tensor& x) {
    return data::sample_rng().bernoulli(prob) ? all(x) : x;
  };
}

data::TensorOp RandomChoice(std::vector<data::TensorOp> transforms) {
  SPORE_CHECK(!transforms.empty(), "[vision.RandomChoice] needs at least one transform");
  for (size_t i = 0; i < transforms.size(); ++i)
    SPORE_CHECK(transforms[i] != nullptr, "[vision.RandomChoice] transform ", i, " is empty");
  return [transforms = std::move(transforms)](const Tensor& x) {
    return transforms[size_t(data::sample_rng().randint(0, int64_t(transforms.size())))](x);
  };
}

RowFn MixUp(double alpha) {
  SPORE_CHECK(alpha > 0, "[vision.MixUp] alpha must be positive, got ", alpha);
  return [alpha](const data::Row& row) {
    auto [img, lab] = batch_of(row, "MixUp", 0);
    const int64_t n = img.shape()[0];
    const double lam = sample_beta(alpha, alpha);
    const std::vector<int64_t> p = permutation(n);
    auto mix = [&](const Tensor& t) {
      Tensor out = Tensor::empty(t.shape(), kFloat32);
      const int64_t per = n ? t.numel() / n : 0;
      const float* src = t.data<float>();
      float* dst = out.data<float>();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < per; ++k)
          dst[i * per + k] =
              float(lam * src[i * per + k] + (1 - lam) * src[p[size_t(i)] * per + k]);
      return out;
    };
    data::Row out = row;
    out[0] = mix(img);
    out[1] = mix(lab);
    return out;
  };
}

RowFn CutMix(double alpha, double prob, ImageBatchFormat format) {
  SPORE_CHECK(alpha > 0, "[vision.CutMix] alpha must be positive, got ", alpha);
  SPORE_CHECK(prob >= 0 && prob <= 1, "[vision.CutMix] prob must be in [0, 1], got ", prob);
  return [=](const data::Row& row) {
    auto [img, lab] = batch_of(row, "CutMix", 4);
    const bool nhwc = format == ImageBatchFormat::NHWC;
    const int64_t n = img.shape()[0], h = img.shape()[nhwc ? 1 : 2], w = img.shape()[nhwc ? 2 : 3];
    const int64_t c = img.shape()[nhwc ? 3 : 1], k = lab.shape()[1];
    Tensor out_img = Tensor::empty(img.shape(), kFloat32);
    Tensor out_lab = Tensor::empty(lab.shape(), kFloat32);
    std::memcpy(out_img.data_ptr(), img.data_ptr(), img.nbytes());
    std::memcpy(out_lab.data_ptr(), lab.data_ptr(), lab.nbytes());
    const float *si = img.data<float>(), *sl = lab.data<float>();
    float *di = out_img.data<float>(), *dl = out_lab.data<float>();
    auto& rng = data::sample_rng();
    const std::vector<int64_t> p = permutation(n);
    const int64_t per = h * w * c;
    for (int64_t i = 0; i < n; ++i) {
      if (!rng.bernoulli(prob)) continue;
      const double lam = sample_beta(alpha, alpha);
      const double cut = std::sqrt(1 - lam);
      const int64_t cw = int64_t(double(w) * cut), ch = int64_t(double(h) * cut);
      const int64_t cx = rng.randint(0, w), cy = rng.randint(0, h);
      const int64_t x0 = std::clamp<int64_t>(cx - cw / 2, 0, w),
                    x1 = std::clamp<int64_t>(cx + cw / 2, 0, w);
      const int64_t y0 = std::clamp<int64_t>(cy - ch / 2, 0, h),
                    y1 = std::clamp<int64_t>(cy + ch / 2, 0, h);
      const int64_t j = p[size_t(i)];
      for (int64_t y = y0; y < y1; ++y)
        for (int64_t x = x0; x < x1; ++x)
          for (int64_t ch_i = 0; ch_i < c; ++ch_i) {
            const int64_t off = nhwc ? (y * w + x) * c + ch_i : (ch_i * h + y) * w + x;
            di[i * per + off] = si[j * per + off];
          }
      const double kept = 1 - double((x1 - x0) * (y1 - y0)) / double(h * w);
      for (int64_t q = 0; q < k; ++q)
        dl[i * k + q] = float(kept * sl[i * k + q] + (1 - kept) * sl[j * k + q]);
    }
    data::Row out = row;
    out[0] = out_img;
    out[1] = out_lab;
    return out;
  };
}

}  // namespace spore::vision
