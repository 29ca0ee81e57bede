// spore::vision transforms: TensorOps for Dataset.map. Each one is a direct loop over the row's
// buffer (no op dispatch, no autograd), so it is cheap and safe on map's worker threads. A new
// transform is one more function returning a lambda; check its input in the lambda, naming it.
#include <cstring>

#include "core/tensor_util.h"
#include "spore/data/dataset.h"

namespace spore::vision {

data::TensorOp Rescale(double rescale, double shift) {
  return [rescale, shift](const Tensor& x) {
    SPORE_CHECK_TYPE(x.dtype() != kBool, "[vision.Rescale] expected a numeric tensor, got bool");
    const Tensor src = spore::detail::contiguous_copy(x);
    Tensor out = Tensor::empty(src.shape(), kFloat32, src.device());
    float* dst = out.data<float>();
    const int64_t n = src.numel();
    visit_dtype(src.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* p = static_cast<const T*>(src.data_ptr());
      for (int64_t i = 0; i < n; ++i) dst[i] = float(double(p[i]) * rescale + shift);
    });
    return out;
  };
}

data::TensorOp HWC2CHW() {
  return [](const Tensor& x) {
    SPORE_CHECK(x.dim() == 3, "[vision.HWC2CHW] expected an image of rank 3 (H, W, C), got shape ",
                shape_str(x.shape()));
    const int64_t h = x.shape()[0], w = x.shape()[1], c = x.shape()[2];
    const int64_t sh = x.strides()[0], sw = x.strides()[1], sc = x.strides()[2];
    if (c == 1)  // (H, W, 1) -> (1, H, W) is the same elements in the same order: a view
      return spore::detail::make_view(x, {1, h, w}, {h * sh, sh, sw}, x.offset());
    Tensor out = Tensor::empty({c, h, w}, x.dtype(), x.device());  // (C, H, W)
    const size_t is = itemsize(x.dtype());
    const char* src = static_cast<const char*>(x.data_ptr());
    char* dst = static_cast<char*>(out.data_ptr());
    for (int64_t k = 0; k < c; ++k)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j)
          std::memcpy(dst + ((k * h + i) * w + j) * is, src + (i * sh + j * sw + k * sc) * is, is);
    return out;
  };
}

data::TensorOp Normalize(std::vector<double> mean, std::vector<double> std) {
  SPORE_CHECK(!mean.empty() && mean.size() == std.size(),
              "[vision.Normalize] mean and std must "
              "have the same non-zero length, got ",
              mean.size(), " and ", std.size());
  for (size_t i = 0; i < std.size(); ++i)
    SPORE_CHECK(std[i] != 0, "[vision.Normalize] std[", i, "] is 0");
  return [mean = std::move(mean), std = std::move(std)](const Tensor& x) {
    SPORE_CHECK_TYPE(x.dtype() == kFloat32 || x.dtype() == kFloat64,
                     "[vision.Normalize] expected "
                     "a float32 or float64 image, got ",
                     dtype_name(x.dtype()), "; apply vision::Rescale first");
    SPORE_CHECK(x.dim() == 3,
                "[vision.Normalize] expected an image of rank 3 (C, H, W), got shape ",
                shape_str(x.shape()), "; apply vision::HWC2CHW first");
    const int64_t c = x.shape()[0], hw = x.shape()[1] * x.shape()[2];
    SPORE_CHECK(mean.size() == 1 || int64_t(mean.size()) == c, "[vision.Normalize] ", mean.size(),
                " means/stds for an image of ", c, " channels (shape ", shape_str(x.shape()), ")");
    const Tensor src = spore::detail::contiguous_copy(x);
    Tensor out = Tensor::empty(src.shape(), src.dtype(), src.device());
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const T* p = static_cast<const T*>(src.data_ptr());
      T* q = static_cast<T*>(out.data_ptr());
      for (int64_t k = 0; k < c; ++k) {
        const size_t m = mean.size() == 1 ? 0 : size_t(k);
        const T mu = T(mean[m]), inv = T(1.0 / std[m]);
        for (int64_t i = 0; i < hw; ++i) q[k * hw + i] = (p[k * hw + i] - mu) * inv;
      }
    };
    if (x.dtype() == kFloat32)
      run(float{});
    else
      run(double{});
    return out;
  };
}

}  // namespace spore::vision
