// CPU kernels for the softmax family and the shape-changing copies: Softmax, LogSoftmax, Concat,
// Split, Pad, Dropout, UpsampleNearest2d and its backward. Inputs may have any strides; outputs
// are contiguous. Copies go through copy_into (strided iteration, memcpy on contiguous rows).
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/kernels/elementwise.h"  // simd_unary_f32 (SIMD exp)
#include "backends/cpu/strided.h"
#include "core/random.h"
#include "ops/op.h"

namespace spore::cpu {
namespace {

// A view on t's storage (kernels write through these into the output).
Tensor alias(const Tensor& t, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.impl().storage;
  impl->dtype = t.dtype();
  impl->device = t.device();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  return Tensor(std::move(impl));
}

// dst <- src, same shape and dtype, any strides.
void copy_into(const Tensor& dst, const Tensor& src) {
  const size_t es = itemsize(src.dtype());
  auto it = make_iter<2>(dst.shape(), {dst.strides(), src.strides()});
  char* d = static_cast<char*>(dst.data_ptr());
  const char* s = static_cast<const char*>(src.data_ptr());
  for_each_row<2>(
      it, [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
        char* dp = d + off[0] * int64_t(es);
        const char* sp = s + off[1] * int64_t(es);
        if (st[0] == 1 && st[1] == 1) {
          std::memcpy(dp, sp, size_t(n) * es);
          return;
        }
        for (int64_t i = 0; i < n; ++i)
          std::memcpy(dp + i * st[0] * int64_t(es), sp + i * st[1] * int64_t(es), es);
      });
}

// Calls f(x_offset, y_offset) for every lane along `axis` (all other coordinates fixed); x and y
// share the shape except maybe along the axis. Lanes are split across threads.
template <typename F>
void for_each_lane(const Shape& shape, int64_t axis, const Shape& xst, const Shape& yst,
                   int64_t lane_len, F&& f) {
  std::vector<int64_t> size, sx, sy;
  for (size_t d = 0; d < shape.size(); ++d)
    if (int64_t(d) != axis) {
      size.push_back(shape[d]);
      sx.push_back(xst[d]);
      sy.push_back(yst[d]);
    }
  const int nd = int(size.size());
  int64_t rows = 1;
  for (int64_t n : size) rows *= n;
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(lane_len, 1)),
               [&](int64_t r0, int64_t r1) {
                 int64_t idx[kMaxDims] = {0}, ox = 0, oy = 0, r = r0;
                 for (int d = nd - 1; d >= 0; --d) {
                   idx[d] = r % size[size_t(d)];
                   r /= size[size_t(d)];
                   ox += idx[d] * sx[size_t(d)];
                   oy += idx[d] * sy[size_t(d)];
                 }
                 for (int64_t row = r0; row < r1; ++row) {
                   f(ox, oy);
                   for (int d = nd - 1; d >= 0; --d) {
                     ox += sx[size_t(d)];
                     oy += sy[size_t(d)];
                     if (++idx[d] < size[size_t(d)]) break;
                     ox -= idx[d] * sx[size_t(d)];
                     oy -= idx[d] * sy[size_t(d)];
                     idx[d] = 0;
                   }
                 }
               });
}

// ---- softmax / log_softmax: max-shifted, one exp pass ------------------------------------------
// float32 lanes contiguous in x and y (softmax over the last axis): vectorised max, shift, exp
// (the elementwise kernels' SIMD exp), sum and scale.
template <bool kLog>
void softmax_lane_f32(const float* xp, float* yp, int64_t n) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = std::max(m, xp[i]);
  if (std::isinf(m) && m < 0) m = 0;
  thread_local std::vector<float> buf;
  float* e = yp;
  if constexpr (kLog) {
    buf.resize(size_t(n));
    e = buf.data();
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) e[i] = xp[i] - m;
  ew::simd_unary_f32(ew::SimdUnary::kExp, e, e, n, {});
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += e[i];
  if constexpr (kLog) {
    const float shift = m + std::log(s);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) yp[i] = xp[i] - shift;
  } else {
    const float inv = 1.0f / s;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) yp[i] *= inv;
  }
}

template <bool kLog>
void softmax_kernel(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& y = ctx.outputs[0];
  if (x.numel() == 0) return;
  const int64_t ax = ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim());
  const int64_t n = x.dim() ? x.size(ax) : 1;
  const Shape xst = x.dim() ? x.strides() : Shape{}, yst = y.dim() ? y.strides() : Shape{};
  const int64_t sx = x.dim() ? xst[size_t(ax)] : 0, sy = y.dim() ? yst[size_t(ax)] : 0;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
      using A = float_calc_t<T>;
      const T* src = base<T>(x);
      T* dst = base<T>(y);
      for_each_lane(x.shape(), x.dim() ? ax : -1, xst, yst, n, [&](int64_t ox, int64_t oy) {
        const T* xp = src + ox;
        T* yp = dst + oy;
        if constexpr (std::is_same_v<T, float>) {
          if (sx == 1 && sy == 1) return softmax_lane_f32<kLog>(xp, yp, n);
        }
        A m = -INFINITY;
        for (int64_t i = 0; i < n; ++i) m = std::max(m, A(xp[i * sx]));
        if (std::isinf(m) && m < 0) m = 0;  // all -inf: softmax is nan as PyTorch, log_softmax -inf
        A s = 0;
        if constexpr (kLog) {
          for (int64_t i = 0; i < n; ++i) s += std::exp(A(xp[i * sx]) - m);
          const A shift = m + std::log(s);
          for (int64_t i = 0; i < n; ++i) yp[i * sy] = T(A(xp[i * sx]) - shift);
        } else if constexpr (is_half_v<T>) {
          thread_local std::vector<float> buf;
          buf.resize(size_t(n));
          for (int64_t i = 0; i < n; ++i) s += (buf[size_t(i)] = std::exp(float(xp[i * sx]) - m));
          const float inv = 1.0f / s;
          for (int64_t i = 0; i < n; ++i) yp[i * sy] = T(buf[size_t(i)] * inv);
        } else {
          for (int64_t i = 0; i < n; ++i) s += (yp[i * sy] = std::exp(xp[i * sx] - m));
          const A inv = A(1) / s;
          for (int64_t i = 0; i < n; ++i) yp[i * sy] *= inv;
        }
      });
    }
  });
}

// ---- concat / split -----------------------------------------------------------------------------
void concat_kernel(ops::KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  const int64_t ax = ops::normalize_axis(ctx.attrs.get_int("axis"), out.dim());
  int64_t start = 0;
  for (const Tensor& x : ctx.inputs) {
    if (x.numel() > 0)
      copy_into(
          alias(out, x.shape(), out.strides(), out.offset() + start * out.strides()[size_t(ax)]),
          x);
    start += x.size(ax);
  }
}

void split_kernel(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const int64_t ax = ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim());
  int64_t start = 0;
  for (Tensor& o : ctx.outputs) {
    if (o.numel() > 0)
      copy_into(o, alias(x, o.shape(), x.strides(), x.offset() + start * x.strides()[size_t(ax)]));
    start += o.size(ax);
  }
}

// ---- pad: fill with the value, then copy the overlap (negative pads crop) -----------------------
void pad_kernel(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const auto& pads = ctx.attrs.get_ints("pads");
  const double value = ctx.attrs.get_float("value", 0);
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = base<T>(out);
    const T v = T(float_calc_t<T>(value));
    parallel_for(0, out.numel(), 65536, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) d[i] = v;
    });
  });
  Shape region = x.shape();
  int64_t xoff = x.offset(), ooff = out.offset();
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    const size_t dim = size_t(x.dim()) - 1 - k;
    const int64_t before = pads[2 * k], after = pads[2 * k + 1];
    const int64_t crop_lo = std::max<int64_t>(0, -before), crop_hi = std::max<int64_t>(0, -after);
    region[dim] = std::max<int64_t>(0, x.shape()[dim] - crop_lo - crop_hi);
    xoff += crop_lo * x.strides()[dim];
    ooff += std::max<int64_t>(0, before) * out.strides()[dim];
  }
  if (shape_numel(region) == 0) return;
  copy_into(alias(out, region, out.strides(), ooff), alias(x, region, x.strides(), xoff));
}

// ---- dropout: element i keeps with probability 1 - p, drawn from counter base + i ---------------
void dropout_kernel(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& y = ctx.outputs[0];
  Tensor& mask = ctx.outputs[1];
  const double p = ctx.attrs.get_float("p");
  const uint64_t seed = random::seed(), counter = random::reserve(uint64_t(x.numel()));
  uint8_t* m = base<uint8_t>(mask);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
      using A = float_calc_t<T>;
      const A scale = p < 1 ? A(1.0 / (1.0 - p)) : A(0);
      const T* src = base<T>(x);
      T* dst = base<T>(y);
      auto it = make_iter<2>(y.shape(), {y.strides(), x.strides()});
      for_each_row<2>(
          it, [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
            // y is contiguous, so its offset is the logical element index.
            for (int64_t i = 0; i < n; ++i) {
              const int64_t e = off[0] + i * st[0];
              const bool keep = random::uniform(seed, counter + uint64_t(e)) >= p;
              m[e] = keep;
              dst[e] = T(keep ? A(src[off[1] + i * st[1]]) * scale : A(0));
            }
          });
    }
  });
}

// ---- nearest upsampling: source index floor(dst * in / out) -------------------------------------
std::vector<int64_t> nearest_map(int64_t in, int64_t out) {
  std::vector<int64_t> m(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) m[size_t(o)] = std::min(in - 1, o * in / out);
  return m;
}

void upsample_kernel(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];  // (N, C, H, W)
  Tensor& y = ctx.outputs[0];       // (N, C, OH, OW)
  const int64_t C = x.size(1), H = x.size(2), W = x.size(3), OH = y.size(2), OW = y.size(3);
  const auto mh = nearest_map(H, OH), mw = nearest_map(W, OW);
  const Shape& st = x.strides();
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = base<T>(x);
    T* dst = base<T>(y);
    parallel_for(0, y.size(0) * C * OH, std::max<int64_t>(1, 16384 / OW),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const int64_t oh = r % OH, c = (r / OH) % C, n = r / (OH * C);
                     const T* row = src + n * st[0] + c * st[1] + mh[size_t(oh)] * st[2];
                     T* o = dst + r * OW;
                     for (int64_t ow = 0; ow < OW; ++ow) o[ow] = row[mw[size_t(ow)] * st[3]];
                   }
                 });
  });
}

// dx[ih, iw] = sum of dy over the output pixels whose source is (ih, iw); any scale.
void upsample_backward_kernel(ops::KernelContext& ctx) {
  const Tensor& g = ctx.inputs[0];  // (N, C, OH, OW)
  Tensor& dx = ctx.outputs[0];      // (N, C, H, W)
  const int64_t C = dx.size(1), H = dx.size(2), W = dx.size(3), OH = g.size(2), OW = g.size(3);
  const auto mh = nearest_map(H, OH), mw = nearest_map(W, OW);
  const Shape& st = g.strides();
  visit_dtype(g.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
      using A = float_calc_t<T>;
      const T* src = base<T>(g);
      T* dst = base<T>(dx);
      parallel_for(0, dx.size(0) * C, 1, [&](int64_t p0, int64_t p1) {
        std::vector<A> acc(size_t(H * W));
        for (int64_t p = p0; p < p1; ++p) {
          std::fill(acc.begin(), acc.end(), A(0));
          const T* plane = src + (p / C) * st[0] + (p % C) * st[1];
          for (int64_t oh = 0; oh < OH; ++oh) {
            A* arow = acc.data() + mh[size_t(oh)] * W;
            const T* grow = plane + oh * st[2];
            for (int64_t ow = 0; ow < OW; ++ow) arow[mw[size_t(ow)]] += A(grow[ow * st[3]]);
          }
          T* o = dst + p * H * W;
          for (int64_t i = 0; i < H * W; ++i) o[i] = T(acc[size_t(i)]);
        }
      });
    }
  });
}

}  // namespace

#define SPORE_FLOAT_DTYPES kFloat16, kBFloat16, kFloat32, kFloat64
#define SPORE_ALL_DTYPES \
  kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64
SPORE_KERNEL(CPU, Softmax, softmax_kernel<false>, SPORE_FLOAT_DTYPES);
SPORE_KERNEL(CPU, LogSoftmax, softmax_kernel<true>, SPORE_FLOAT_DTYPES);
SPORE_KERNEL(CPU, Concat, concat_kernel, SPORE_ALL_DTYPES);
SPORE_KERNEL(CPU, Split, split_kernel, SPORE_ALL_DTYPES);
SPORE_KERNEL(CPU, Pad, pad_kernel, SPORE_ALL_DTYPES);
SPORE_KERNEL(CPU, Dropout, dropout_kernel, SPORE_FLOAT_DTYPES);
SPORE_KERNEL(CPU, UpsampleNearest2d, upsample_kernel, SPORE_ALL_DTYPES);
SPORE_KERNEL(CPU, UpsampleNearest2dBackward, upsample_backward_kernel, SPORE_FLOAT_DTYPES);

}  // namespace spore::cpu
