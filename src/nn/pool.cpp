// MaxPool2d, AvgPool2d, AdaptiveAvgPool2d (spore/nn/pool.h) on the pooling primitives.
#include "spore/nn/pool.h"

#include <algorithm>

#include "nn/util.h"
#include "spore/ops.h"

namespace spore::nn {

using detail::fmt_bool;

Pool2d::Pool2d(std::string name, bool is_max, Int2 kernel_size, Int2 stride, PoolOptions opt)
    : is_max_(is_max), kernel_(kernel_size), stride_(stride), opt_(std::move(opt)) {
  set_cls_name(name);
  SPORE_CHECK(kernel_.h >= 1 && kernel_.w >= 1 && stride_.h >= 1 && stride_.w >= 1, "[", name,
              "] kernel_size and stride must be >= 1, got kernel_size (", kernel_.h, ", ",
              kernel_.w, "), stride (", stride_.h, ", ", stride_.w, ")");
  SPORE_CHECK(opt_.pad_mode == "valid" || opt_.pad_mode == "same" || opt_.pad_mode == "pad", "[",
              name, "] pad_mode must be 'valid', 'same' or 'pad', got '", opt_.pad_mode, "'");
  SPORE_CHECK(opt_.pad_mode == "pad" || opt_.padding.zero(), "[", name,
              "] padding must be 0 when pad_mode is '", opt_.pad_mode, "', got ",
              shape_str(opt_.padding.vec()));
  SPORE_CHECK(opt_.padding.top * 2 <= kernel_.h && opt_.padding.bottom * 2 <= kernel_.h &&
                  opt_.padding.left * 2 <= kernel_.w && opt_.padding.right * 2 <= kernel_.w,
              "[", name, "] padding ", shape_str(opt_.padding.vec()),
              " must be at most half the kernel size (", kernel_.h, ", ", kernel_.w, ")");
}

std::vector<int64_t> Pool2d::pads_for(int64_t h, int64_t w) const {
  if (opt_.pad_mode == "pad") return opt_.padding.vec();
  if (opt_.pad_mode == "valid") return {0, 0, 0, 0};
  auto same = [](int64_t in, int64_t k, int64_t s) {
    const int64_t out = (in + s - 1) / s;
    const int64_t total = std::max<int64_t>((out - 1) * s + k - in, 0);
    return std::pair<int64_t, int64_t>{total / 2, total - total / 2};
  };
  auto [t, b] = same(h, kernel_.h, stride_.h);
  auto [l, r] = same(w, kernel_.w, stride_.w);
  return {t, b, l, r};
}

Tensor Pool2d::construct(const Tensor& x) {
  SPORE_CHECK(x.dim() == 3 || x.dim() == 4, "[", cls_name(),
              "] expected input (N, C, H, W) or (C, H, W), got shape ", shape_str(x.shape()));
  if (x.dim() == 3) return construct(x.unsqueeze(0)).squeeze(0);
  Pool2dOptions o;
  o.kernel_size = kernel_.vec();
  o.stride = stride_.vec();
  o.padding = pads_for(x.size(2), x.size(3));
  o.ceil_mode = opt_.pad_mode == "pad" && opt_.ceil_mode;
  // A "same" average, as in MindSpore / TensorFlow, divides by the real pixels in each window.
  o.count_include_pad = opt_.pad_mode == "pad" ? opt_.count_include_pad : false;
  SPORE_CHECK(x.size(2) + o.padding[0] + o.padding[1] >= kernel_.h &&
                  x.size(3) + o.padding[2] + o.padding[3] >= kernel_.w,
              "[", cls_name(), "] input ", shape_str(x.shape()), " is smaller than the kernel (",
              kernel_.h, ", ", kernel_.w, ")");
  return is_max_ ? max_pool2d(x, o) : avg_pool2d(x, o);
}

std::string Pool2d::extend_repr() const {
  std::string s = "kernel_size=" + shape_str(kernel_.vec()) +
                  ", stride=" + shape_str(stride_.vec()) + ", pad_mode=" + opt_.pad_mode;
  if (opt_.pad_mode == "pad")
    s += ", padding=" + shape_str(opt_.padding.vec()) + ", ceil_mode=" + fmt_bool(opt_.ceil_mode);
  return s;
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Int2 output_size) : output_size_(output_size) {
  set_cls_name("AdaptiveAvgPool2d");
  SPORE_CHECK(output_size_.h >= 1 && output_size_.w >= 1,
              "[AdaptiveAvgPool2d] output_size must be >= 1, got (", output_size_.h, ", ",
              output_size_.w, ")");
}
Tensor AdaptiveAvgPool2d::construct(const Tensor& x) {
  SPORE_CHECK(x.dim() == 3 || x.dim() == 4,
              "[AdaptiveAvgPool2d] expected input (N, C, H, W) or (C, H, W), got shape ",
              shape_str(x.shape()));
  if (x.dim() == 3) return construct(x.unsqueeze(0)).squeeze(0);
  return adaptive_avg_pool2d(x, output_size_.vec());
}
std::string AdaptiveAvgPool2d::extend_repr() const {
  return "output_size=" + shape_str(output_size_.vec());
}

}  // namespace spore::nn
