// Pooling kernels on the CPU: max (with int64 argmax indices into each input H*W plane), average
// (count_include_pad, ceil_mode as PyTorch) and adaptive average, plus their backwards. Plain loops
// over (N*C) planes in parallel: a plane is small and hot in cache, and the 2x2 / 3x3 windows of
// real networks are memory-bound, so oneDNN's blocked layouts (and their reorders) would not pay.
// Half types compute in float. The 2x2 stride-2 window (LeNet, VGG...) has its own branch-free loop.
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/kernels/nn_util.h"
#include "core/parallel.h"

namespace spore::cpu {
namespace {

struct Pool {
  int64_t planes, H, W, OH, OW, kh, kw, sh, sw, pt, pb, pl, pr;
};

Pool pool_of(const Shape& x, const Shape& y, const ops::Attrs& a) {
  const auto k = a.get_ints("kernel_size"), s = a.get_ints("stride"), p = a.get_ints("padding");
  return {x[0] * x[1], x[2], x[3], y[2], y[3], k[0], k[1], s[0], s[1], p[0], p[1], p[2], p[3]};
}

int64_t plane_grain(const Pool& p) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(p.H * p.W, 1)); }

// The 2x2 stride-2 window of CNNs (every window inside the plane), branch-free: on real data
// "is this one bigger" is a coin flip the branch predictor loses. The maximum m comes from max(),
// then the first element equal to m (row-major) gives the index and the value (so -0 / +0 ties
// keep the first, as the general loop). A window holding a NaN (m may then be wrong) takes the
// general loop's answer: its first NaN.
template <typename T>
void max_pool_2x2_plane(const Pool& p, const T* xp, T* yp, int64_t* ip) {
  using A = acc_t<T>;
  const int64_t W = p.W;
  for (int64_t oh = 0; oh < p.OH; ++oh) {
    const T* r0 = xp + 2 * oh * W;
    const T* r1 = r0 + W;
    T* yr = yp + oh * p.OW;
    int64_t* ir = ip + oh * p.OW;
    const int64_t base = 2 * oh * W;
    for (int64_t ow = 0; ow < p.OW; ++ow) {
      const int64_t j = 2 * ow;
      const A a = A(r0[j]), b = A(r0[j + 1]), c = A(r1[j]), d = A(r1[j + 1]);
      const A m = std::max(std::max(a, b), std::max(c, d));
      // v == m written as !(v < m) (the same without NaN): one flag, so the compiler emits cmov.
      int64_t off = W + j + 1;
      off = c < m ? off : W + j;
      off = b < m ? off : j + 1;
      off = a < m ? off : j;
      if ((a + b + c + d) != (a + b + c + d)) [[unlikely]] {  // a NaN (or inf - inf) in the window
        const A v[4] = {a, b, c, d};
        const int64_t o4[4] = {j, j + 1, W + j, W + j + 1};
        for (int k = 0; k < 4; ++k)
          if (std::isnan(v[k])) {
            off = o4[k];
            break;
          }
      }
      yr[ow] = r0[off];
      ir[ow] = base + off;
    }
  }
}

template <typename T>
void max_pool_fwd(const Pool& p, const T* x, T* y, int64_t* idx) {
  using A = acc_t<T>;
  const bool k2s2 = p.kh == 2 && p.kw == 2 && p.sh == 2 && p.sw == 2 && p.pt == 0 && p.pl == 0 &&
                    2 * p.OH <= p.H && 2 * p.OW <= p.W;
  parallel_for(0, p.planes, plane_grain(p), [&](int64_t q0, int64_t q1) {
    if (k2s2) {
      for (int64_t q = q0; q < q1; ++q)
        max_pool_2x2_plane<T>(p, x + q * p.H * p.W, y + q * p.OH * p.OW, idx + q * p.OH * p.OW);
      return;
    }
    for (int64_t q = q0; q < q1; ++q) {
      const T* xp = x + q * p.H * p.W;
      T* yp = y + q * p.OH * p.OW;
      int64_t* ip = idx + q * p.OH * p.OW;
      for (int64_t oh = 0; oh < p.OH; ++oh) {
        const int64_t h0 = std::max<int64_t>(oh * p.sh - p.pt, 0),
                      h1 = std::min(oh * p.sh - p.pt + p.kh, p.H);
        for (int64_t ow = 0; ow < p.OW; ++ow) {
          const int64_t w0 = std::max<int64_t>(ow * p.sw - p.pl, 0),
                        w1 = std::min(ow * p.sw - p.pl + p.kw, p.W);
          A best = -std::numeric_limits<A>::infinity();
          int64_t bi = h0 * p.W + w0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) {
              const A v = A(xp[h * p.W + w]);
              if (v > best || std::isnan(v)) {  // NaN propagates, as PyTorch
                best = v;
                bi = h * p.W + w;
                if (std::isnan(v)) goto done;
              }
            }
        done:
          yp[oh * p.OW + ow] = T(best);
          ip[oh * p.OW + ow] = bi;
        }
      }
    }
  });
}

template <typename T>
void max_pool_bwd(int64_t planes, int64_t in_plane, int64_t out_plane, const T* dy, const int64_t* idx, T* dx) {
  using A = acc_t<T>;
  parallel_for(0, planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(in_plane, 1)), [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      T* dxp = dx + q * in_plane;
      const T* dyp = dy + q * out_plane;
      const int64_t* ip = idx + q * out_plane;
      if constexpr (std::is_same_v<T, A>) {
        std::fill(dxp, dxp + in_plane, T(0));
        for (int64_t o = 0; o < out_plane; ++o) dxp[ip[o]] += dyp[o];
      } else {  // accumulate half types in float
        std::vector<float> acc(size_t(in_plane), 0.0f);
        for (int64_t o = 0; o < out_plane; ++o) acc[size_t(ip[o])] += float(dyp[o]);
        for (int64_t i = 0; i < in_plane; ++i) dxp[i] = T(acc[size_t(i)]);
      }
    }
  });
}

// The PyTorch avg-pool divisor of window (oh, ow) and its clipped bounds.
struct Window {
  int64_t h0, h1, w0, w1, div;
};
Window avg_window(const Pool& p, int64_t oh, int64_t ow, bool include_pad) {
  int64_t h0 = oh * p.sh - p.pt, w0 = ow * p.sw - p.pl;
  int64_t h1 = std::min(h0 + p.kh, p.H + p.pb), w1 = std::min(w0 + p.kw, p.W + p.pr);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, p.H);
  w1 = std::min(w1, p.W);
  return {h0, h1, w0, w1, include_pad ? padded : (h1 - h0) * (w1 - w0)};
}

template <typename T>
void avg_pool_fwd(const Pool& p, bool include_pad, const T* x, T* y) {
  using A = acc_t<T>;
  parallel_for(0, p.planes, plane_grain(p), [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      const T* xp = x + q * p.H * p.W;
      T* yp = y + q * p.OH * p.OW;
      for (int64_t oh = 0; oh < p.OH; ++oh)
        for (int64_t ow = 0; ow < p.OW; ++ow) {
          const Window wd = avg_window(p, oh, ow, include_pad);
          A s = 0;
          for (int64_t h = wd.h0; h < wd.h1; ++h)
            for (int64_t w = wd.w0; w < wd.w1; ++w) s += A(xp[h * p.W + w]);
          yp[oh * p.OW + ow] = T(wd.div > 0 ? s / A(wd.div) : A(0));
        }
    }
  });
}

template <typename T>
void avg_pool_bwd(const Pool& p, bool include_pad, const T* dy, T* dx) {
  using A = acc_t<T>;
  parallel_for(0, p.planes, plane_grain(p), [&](int64_t q0, int64_t q1) {
    std::vector<A> acc(size_t(p.H * p.W));
    for (int64_t q = q0; q < q1; ++q) {
      std::fill(acc.begin(), acc.end(), A(0));
      const T* dyp = dy + q * p.OH * p.OW;
      for (int64_t oh = 0; oh < p.OH; ++oh)
        for (int64_t ow = 0; ow < p.OW; ++ow) {
          const Window wd = avg_window(p, oh, ow, include_pad);
          if (wd.div <= 0) continue;
          const A g = A(dyp[oh * p.OW + ow]) / A(wd.div);
          for (int64_t h = wd.h0; h < wd.h1; ++h)
            for (int64_t w = wd.w0; w < wd.w1; ++w) acc[size_t(h * p.W + w)] += g;
        }
      T* dxp = dx + q * p.H * p.W;
      for (int64_t i = 0; i < p.H * p.W; ++i) dxp[i] = T(acc[size_t(i)]);
    }
  });
}

// PyTorch's adaptive bins: [floor(i*n/out), ceil((i+1)*n/out)).
inline int64_t bin_start(int64_t i, int64_t n, int64_t out) { return (i * n) / out; }
inline int64_t bin_end(int64_t i, int64_t n, int64_t out) { return ((i + 1) * n + out - 1) / out; }

template <typename T>
void adaptive_avg(int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, const T* src, T* dst,
                  bool backward) {
  using A = acc_t<T>;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(H * W, 1));
  parallel_for(0, planes, grain, [&](int64_t q0, int64_t q1) {
    std::vector<A> acc(backward ? size_t(H * W) : 0);
    for (int64_t q = q0; q < q1; ++q) {
      if (backward) std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h0 = bin_start(oh, H, OH), h1 = bin_end(oh, H, OH);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = bin_start(ow, W, OW), w1 = bin_end(ow, W, OW);
          const A inv = A(1) / A((h1 - h0) * (w1 - w0));
          if (!backward) {
            const T* xp = src + q * H * W;
            A s = 0;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) s += A(xp[h * W + w]);
            dst[q * OH * OW + oh * OW + ow] = T(s * inv);
          } else {
            const A g = A(src[q * OH * OW + oh * OW + ow]) * inv;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) acc[size_t(h * W + w)] += g;
          }
        }
      }
      if (backward)
        for (int64_t i = 0; i < H * W; ++i) dst[q * H * W + i] = T(acc[size_t(i)]);
    }
  });
}

template <typename F>
void visit_float(DType t, F&& f) {
  switch (t) {
    case kFloat32: return f(float{});
    case kFloat64: return f(double{});
    case kBFloat16: return f(BFloat16{});
    case kFloat16: return f(Half{});
    default: SPORE_ASSERT(false, "pool kernel called with dtype ", dtype_name(t));
  }
}

void max_pool2d_kernel(ops::KernelContext& ctx) {
  Tensor x = dense(ctx.inputs[0]);
  Tensor &y = ctx.outputs[0], &idx = ctx.outputs[1];
  if (y.numel() == 0) return;
  const Pool p = pool_of(x.shape(), y.shape(), ctx.attrs);
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    max_pool_fwd<T>(p, x.data<T>(), y.data<T>(), idx.data<int64_t>());
  });
}

void max_pool2d_backward_kernel(ops::KernelContext& ctx) {
  Tensor dy = dense(ctx.inputs[0]), idx = dense(ctx.inputs[1]);
  Tensor& dx = ctx.outputs[0];
  if (dx.numel() == 0) return;
  const int64_t planes = dx.size(0) * dx.size(1);
  if (dy.numel() == 0) {
    std::memset(dx.data_ptr(), 0, dx.nbytes());
    return;
  }
  visit_float(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    max_pool_bwd<T>(planes, dx.size(2) * dx.size(3), dy.size(2) * dy.size(3), dy.data<T>(),
                    idx.data<int64_t>(), dx.data<T>());
  });
}

void avg_pool2d_kernel(ops::KernelContext& ctx) {
  Tensor x = dense(ctx.inputs[0]);
  Tensor& y = ctx.outputs[0];
  if (y.numel() == 0) return;
  const Pool p = pool_of(x.shape(), y.shape(), ctx.attrs);
  const bool inc = ctx.attrs.get_bool("count_include_pad", true);
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    avg_pool_fwd<T>(p, inc, x.data<T>(), y.data<T>());
  });
}

void avg_pool2d_backward_kernel(ops::KernelContext& ctx) {
  Tensor dy = dense(ctx.inputs[0]);
  Tensor& dx = ctx.outputs[0];
  if (dx.numel() == 0) return;
  const Pool p = pool_of(dx.shape(), dy.shape(), ctx.attrs);
  const bool inc = ctx.attrs.get_bool("count_include_pad", true);
  visit_float(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    avg_pool_bwd<T>(p, inc, dy.data<T>(), dx.data<T>());
  });
}

void adaptive_avg_pool2d_kernel(ops::KernelContext& ctx) {
  Tensor x = dense(ctx.inputs[0]);
  Tensor& y = ctx.outputs[0];
  if (y.numel() == 0) return;
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    adaptive_avg<T>(x.size(0) * x.size(1), x.size(2), x.size(3), y.size(2), y.size(3), x.data<T>(),
                    y.data<T>(), false);
  });
}

void adaptive_avg_pool2d_backward_kernel(ops::KernelContext& ctx) {
  Tensor dy = dense(ctx.inputs[0]);
  Tensor& dx = ctx.outputs[0];
  if (dx.numel() == 0) return;
  visit_float(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    adaptive_avg<T>(dx.size(0) * dx.size(1), dx.size(2), dx.size(3), dy.size(2), dy.size(3),
                    dy.data<T>(), dx.data<T>(), true);
  });
}

}  // namespace

#define SPORE_POOL_DTYPES kFloat32, kFloat64, kBFloat16, kFloat16
SPORE_KERNEL(CPU, MaxPool2d, max_pool2d_kernel, SPORE_POOL_DTYPES);
SPORE_KERNEL(CPU, MaxPool2dBackward, max_pool2d_backward_kernel, SPORE_POOL_DTYPES);
SPORE_KERNEL(CPU, AvgPool2d, avg_pool2d_kernel, SPORE_POOL_DTYPES);
SPORE_KERNEL(CPU, AvgPool2dBackward, avg_pool2d_backward_kernel, SPORE_POOL_DTYPES);
SPORE_KERNEL(CPU, AdaptiveAvgPool2d, adaptive_avg_pool2d_kernel, SPORE_POOL_DTYPES);
SPORE_KERNEL(CPU, AdaptiveAvgPool2dBackward, adaptive_avg_pool2d_backward_kernel, SPORE_POOL_DTYPES);

}  // namespace spore::cpu
