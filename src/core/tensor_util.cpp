// Implementation of the data-movement helpers (see tensor_util.h).
#include "core/tensor_util.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace spore::detail {

Tensor make_view(const Tensor& t, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.impl().storage;
  impl->offset = offset;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = t.dtype();
  impl->device = t.device();
  return Tensor(std::move(impl));
}

Tensor row_view(const Tensor& t, int64_t i) {
  SPORE_ASSERT(t.dim() >= 1 && i >= 0 && i < t.shape()[0], "row_view out of range");
  Shape shape(t.shape().begin() + 1, t.shape().end());
  Shape strides(t.strides().begin() + 1, t.strides().end());
  return make_view(t, std::move(shape), std::move(strides), t.offset() + i * t.strides()[0]);
}

namespace {
// Calls run(element_offset, count, stride) for each innermost run of t, in row-major order.
template <typename F>
void for_each_run(const Tensor& t, F&& run) {
  const Shape& sh = t.shape();
  const Shape& st = t.strides();
  const size_t nd = sh.size();
  const int64_t n = t.numel(), inner = sh[nd - 1], inner_stride = st[nd - 1];
  std::vector<int64_t> idx(nd - 1, 0);
  int64_t off = 0;
  for (int64_t o = 0, outer = n / inner; o < outer; ++o) {
    run(off, inner, inner_stride);
    for (size_t d = nd - 1; d-- > 0;) {  // odometer over the outer dims
      if (++idx[d] < sh[d]) {
        off += st[d];
        break;
      }
      off -= (sh[d] - 1) * st[d];
      idx[d] = 0;
    }
  }
}
}  // namespace

void copy_to_buffer(const Tensor& t, void* dst) {
  const int64_t n = t.numel();
  if (n == 0) return;
  const int64_t is = int64_t(itemsize(t.dtype()));
  const char* base = static_cast<const char*>(t.data_ptr());
  if (t.dim() == 0 || t.is_contiguous()) {
    std::memcpy(dst, base, size_t(n * is));
    return;
  }
  char* out = static_cast<char*>(dst);
  for_each_run(t, [&](int64_t off, int64_t count, int64_t stride) {
    const char* p = base + off * is;
    if (stride == 1) {
      std::memcpy(out, p, size_t(count * is));
    } else {
      for (int64_t j = 0; j < count; ++j)
        std::memcpy(out + j * is, p + j * stride * is, size_t(is));
    }
    out += count * is;
  });
}

void copy_from_buffer(const Tensor& t, const void* src) {
  const int64_t n = t.numel();
  if (n == 0) return;
  const int64_t is = int64_t(itemsize(t.dtype()));
  char* base = static_cast<char*>(t.data_ptr());
  if (t.dim() == 0 || t.is_contiguous()) {
    std::memcpy(base, src, size_t(n * is));
    return;
  }
  const char* in = static_cast<const char*>(src);
  for_each_run(t, [&](int64_t off, int64_t count, int64_t stride) {
    char* p = base + off * is;
    if (stride == 1) {
      std::memcpy(p, in, size_t(count * is));
    } else {
      for (int64_t j = 0; j < count; ++j) std::memcpy(p + j * stride * is, in + j * is, size_t(is));
    }
    in += count * is;
  });
}

Tensor contiguous_copy(const Tensor& t) {
  if (t.device().type != DeviceType::CPU) return t.to(Device{}).contiguous();  // host bytes
  if (t.is_contiguous()) return t;
  Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
  copy_to_buffer(t, out.data_ptr());
  return out;
}

namespace {
template <typename T>
constexpr bool is_int_like = std::is_integral_v<T>;  // includes bool

// double -> float as IEEE rounding does it: beyond the float range is +-inf. (A C++ cast of an
// out-of-range value is undefined behaviour; a float64 checkpoint can hold such values.)
inline float to_float(double x) {
  if (x > double(std::numeric_limits<float>::max())) return std::numeric_limits<float>::infinity();
  if (x < -double(std::numeric_limits<float>::max()))
    return -std::numeric_limits<float>::infinity();
  return float(x);
}

// Floating -> integer: truncation toward zero, saturated at the type's range; NaN becomes 0.
template <typename D>
D to_int(double x) {
  if (std::isnan(x)) return D(0);
  if (x <= double(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
  if (x >= double(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
  return D(int64_t(x));
}

template <typename S, typename D>
void convert_loop(const S* src, D* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<D, bool>) {
      dst[i] = double(src[i]) != 0.0;
    } else if constexpr (is_int_like<S> && is_int_like<D>) {
      dst[i] = D(int64_t(src[i]));  // exact for every int64 value
    } else if constexpr (is_int_like<D>) {
      dst[i] = to_int<D>(double(src[i]));
    } else if constexpr (std::is_same_v<D, double>) {
      dst[i] = double(src[i]);
    } else {  // float, Half, BFloat16
      dst[i] = D(to_float(double(src[i])));
    }
  }
}
}  // namespace

void convert_elements(const void* src, DType sdt, void* dst, DType ddt, int64_t n) {
  if (n <= 0) return;
  if (sdt == ddt) {
    std::memcpy(dst, src, size_t(n) * itemsize(sdt));
    return;
  }
  visit_dtype(sdt, [&](auto s) {
    using S = decltype(s);
    visit_dtype(ddt, [&](auto d) {
      using D = decltype(d);
      convert_loop(static_cast<const S*>(src), static_cast<D*>(dst), n);
    });
  });
}

}  // namespace spore::detail
