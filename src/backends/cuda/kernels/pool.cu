// Pooling on the GPU with the CPU kernels' conventions (backends/cpu/kernels/nn_pool.cpp): max
// pooling with int64 indices h * W + w into each input (H, W) plane (NaN wins, the first maximum
// in row-major order otherwise), average pooling with PyTorch's divisor (count_include_pad,
// ceil_mode windows clipped to H + pad), adaptive average pooling with PyTorch's bins, and their
// backwards. Half types compute in float32. One thread per output element forward; backward one
// thread per input element that sums, in output order, the windows that hold it: deterministic, no
// atomics, and the CPU's order of additions.
#include "backends/cuda/kernels/common.cuh"
#include "spore/grad_mode.h"

namespace spore::cuda {
namespace {

struct Pool {
  int64_t planes, H, W, OH, OW, kh, kw, sh, sw, pt, pb, pl, pr;
};

Pool pool_of(const Shape& x, const Shape& y, const ops::Attrs& a) {
  SPORE_CHECK(!a.get_bool("blocked", false),
              "[GPU] pooling: the blocked (nChw16c) layout is the CPU's");
  const auto k = a.get_ints("kernel_size"), s = a.get_ints("stride"), p = a.get_ints("padding");
  return {x[0] * x[1], x[2], x[3], y[2], y[3], k[0], k[1], s[0], s[1], p[0], p[1], p[2], p[3]};
}

Tensor dense(const Tensor& t) {
  NoGradGuard no_grad;
  return t.contiguous();
}

// The outputs along one axis whose windows (start o * s - pad, k long) may hold position h.
__device__ __forceinline__ void window_range(int64_t h, int64_t k, int64_t s, int64_t pad,
                                             int64_t out, int64_t& lo, int64_t& hi) {
  const int64_t a = h + pad - k + 1;
  lo = a <= 0 ? 0 : (a + s - 1) / s;
  hi = min(out - 1, (h + pad) / s);
}

// ---- max ----------------------------------------------------------------------------------------
template <class T>
__global__ void max_pool_kernel(T* y, int64_t* idx, const T* x, Pool p, int64_t n) {
  using A = calc_t<T>;
  SPORE_GRID_LOOP(i, n) {
    const int64_t ow = i % p.OW, oh = (i / p.OW) % p.OH, q = i / (p.OW * p.OH);
    const int64_t h0 = max(oh * p.sh - p.pt, int64_t(0)), h1 = min(oh * p.sh - p.pt + p.kh, p.H);
    const int64_t w0 = max(ow * p.sw - p.pl, int64_t(0)), w1 = min(ow * p.sw - p.pl + p.kw, p.W);
    const T* xp = x + q * p.H * p.W;
    A best = A(-INFINITY);
    int64_t bi = h0 * p.W + w0;
    bool nan = false;
    for (int64_t h = h0; h < h1 && !nan; ++h)
      for (int64_t w = w0; w < w1; ++w) {
        const A v = cvt<A>(xp[h * p.W + w]);
        if (v > best || v != v) {
          best = v;
          bi = h * p.W + w;
          if (v != v) {
            nan = true;
            break;
          }
        }
      }
    y[i] = cvt<T>(best);
    idx[i] = bi;
  }
}

// dx[h, w] = the sum of dy over the windows whose index picked (h, w).
template <class T>
__global__ void max_pool_backward_kernel(T* dx, const T* dy, const int64_t* idx, Pool p,
                                         int64_t n) {
  using A = calc_t<T>;
  SPORE_GRID_LOOP(i, n) {
    const int64_t w = i % p.W, h = (i / p.W) % p.H, q = i / (p.W * p.H);
    int64_t oh0, oh1, ow0, ow1;
    window_range(h, p.kh, p.sh, p.pt, p.OH, oh0, oh1);
    window_range(w, p.kw, p.sw, p.pl, p.OW, ow0, ow1);
    const int64_t me = h * p.W + w, base = q * p.OH * p.OW;
    A acc = A(0);
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t o = base + oh * p.OW + ow;
        if (idx[o] == me) acc += cvt<A>(dy[o]);
      }
    dx[i] = cvt<T>(acc);
  }
}

// ---- average ------------------------------------------------------------------------------------
struct Window {
  int64_t h0, h1, w0, w1, div;
};
__device__ __forceinline__ Window avg_window(const Pool& p, int64_t oh, int64_t ow,
                                             bool include_pad) {
  int64_t h0 = oh * p.sh - p.pt, w0 = ow * p.sw - p.pl;
  int64_t h1 = min(h0 + p.kh, p.H + p.pb), w1 = min(w0 + p.kw, p.W + p.pr);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = max(h0, int64_t(0));
  w0 = max(w0, int64_t(0));
  h1 = min(h1, p.H);
  w1 = min(w1, p.W);
  return {h0, h1, w0, w1, include_pad ? padded : (h1 - h0) * (w1 - w0)};
}

template <class T>
__global__ void avg_pool_kernel(T* y, const T* x, Pool p, bool include_pad, int64_t n) {
  using A = calc_t<T>;
  SPORE_GRID_LOOP(i, n) {
    const int64_t ow = i % p.OW, oh = (i / p.OW) % p.OH, q = i / (p.OW * p.OH);
    const Window wd = avg_window(p, oh, ow, include_pad);
    const T* xp = x + q * p.H * p.W;
    A s = 0;
    for (int64_t h = wd.h0; h < wd.h1; ++h)
      for (int64_t w = wd.w0; w < wd.w1; ++w) s += cvt<A>(xp[h * p.W + w]);
    y[i] = cvt<T>(wd.div > 0 ? s / A(wd.div) : A(0));
  }
}

template <class T>
__global__ void avg_pool_backward_kernel(T* dx, const T* dy, Pool p, bool include_pad, int64_t n) {
  using A = calc_t<T>;
  SPORE_GRID_LOOP(i, n) {
    const int64_t w = i % p.W, h = (i / p.W) % p.H, q = i / (p.W * p.H);
    int64_t oh0, oh1, ow0, ow1;
    window_range(h, p.kh, p.sh, p.pt, p.OH, oh0, oh1);
    window_range(w, p.kw, p.sw, p.pl, p.OW, ow0, ow1);
    const T* dyp = dy + q * p.OH * p.OW;
    A acc = A(0);
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const Window wd = avg_window(p, oh, ow, include_pad);
        if (wd.div <= 0 || h < wd.h0 || h >= wd.h1 || w < wd.w0 || w >= wd.w1) continue;
        acc += cvt<A>(dyp[oh * p.OW + ow]) / A(wd.div);
      }
    dx[i] = cvt<T>(acc);
  }
}

// ---- adaptive average: PyTorch's bins [floor(i n / out), ceil((i + 1) n / out)) -----------------
__device__ __forceinline__ int64_t bin_start(int64_t i, int64_t n, int64_t out) {
  return (i * n) / out;
}
__device__ __forceinline__ int64_t bin_end(int64_t i, int64_t n, int64_t out) {
  return ((i + 1) * n + out - 1) / out;
}

template <class T>
__global__ void adaptive_kernel(T* y, const T* x, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                int64_t n) {
  using A = calc_t<T>;
  SPORE_GRID_LOOP(i, n) {
    const int64_t ow = i % OW, oh = (i / OW) % OH, q = i / (OW * OH);
    const int64_t h0 = bin_start(oh, H, OH), h1 = bin_end(oh, H, OH), w0 = bin_start(ow, W, OW),
                  w1 = bin_end(ow, W, OW);
    const A inv = A(1) / A((h1 - h0) * (w1 - w0));
    const T* xp = x + q * H * W;
    A s = 0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) s += cvt<A>(xp[h * W + w]);
    y[i] = cvt<T>(s * inv);
  }
}

template <class T>
__global__ void adaptive_backward_kernel(T* dx, const T* dy, int64_t H, int64_t W, int64_t OH,
                                         int64_t OW, int64_t n) {
  using A = calc_t<T>;
  SPORE_GRID_LOOP(i, n) {
    const int64_t w = i % W, h = (i / W) % H, q = i / (W * H);
    const T* dyp = dy + q * OH * OW;
    A acc = A(0);
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = bin_start(oh, H, OH), h1 = bin_end(oh, H, OH);
      if (h < h0 || h >= h1) continue;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = bin_start(ow, W, OW), w1 = bin_end(ow, W, OW);
        if (w < w0 || w >= w1) continue;
        const A inv = A(1) / A((h1 - h0) * (w1 - w0));
        acc += cvt<A>(dyp[oh * OW + ow]) * inv;
      }
    }
    dx[i] = cvt<T>(acc);
  }
}

// ---- the kernels --------------------------------------------------------------------------------
void max_pool2d(ops::KernelContext& ctx) {
  const Tensor x = dense(ctx.inputs[0]);
  Tensor &y = ctx.outputs[0], &idx = ctx.outputs[1];
  const int64_t n = y.numel();
  if (n == 0) return;
  const Pool p = pool_of(x.shape(), y.shape(), ctx.attrs);
  const Launch1d l = launch_1d(n);
  visit_float(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    max_pool_kernel<T><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
        data_of<T>(y), data_of<int64_t>(idx), data_of<T>(x), p, n);
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

void max_pool2d_backward(ops::KernelContext& ctx) {
  const Tensor dy = dense(ctx.inputs[0]), idx = dense(ctx.inputs[1]);
  Tensor& dx = ctx.outputs[0];
  const int64_t n = dx.numel();
  if (n == 0) return;
  if (dy.numel() == 0) {
    SPORE_CUDA_CHECK(cudaMemsetAsync(dx.data_ptr(), 0, dx.nbytes(), stream_of(ctx)));
    return;
  }
  const Pool p = pool_of(dx.shape(), dy.shape(), ctx.attrs);
  const Launch1d l = launch_1d(n);
  visit_float(dx.dtype(), "max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    max_pool_backward_kernel<T><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
        data_of<T>(dx), data_of<T>(dy), data_of<int64_t>(idx), p, n);
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

void avg_pool2d(ops::KernelContext& ctx) {
  const Tensor x = dense(ctx.inputs[0]);
  Tensor& y = ctx.outputs[0];
  const int64_t n = y.numel();
  if (n == 0) return;
  const Pool p = pool_of(x.shape(), y.shape(), ctx.attrs);
  const bool inc = ctx.attrs.get_bool("count_include_pad", true);
  const Launch1d l = launch_1d(n);
  visit_float(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    avg_pool_kernel<T>
        <<<l.blocks, l.threads, 0, stream_of(ctx)>>>(data_of<T>(y), data_of<T>(x), p, inc, n);
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

void avg_pool2d_backward(ops::KernelContext& ctx) {
  const Tensor dy = dense(ctx.inputs[0]);
  Tensor& dx = ctx.outputs[0];
  const int64_t n = dx.numel();
  if (n == 0) return;
  const Pool p = pool_of(dx.shape(), dy.shape(), ctx.attrs);
  const bool inc = ctx.attrs.get_bool("count_include_pad", true);
  const Launch1d l = launch_1d(n);
  visit_float(dx.dtype(), "avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    avg_pool_backward_kernel<T>
        <<<l.blocks, l.threads, 0, stream_of(ctx)>>>(data_of<T>(dx), data_of<T>(dy), p, inc, n);
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

void adaptive_avg_pool2d(ops::KernelContext& ctx) {
  const Tensor x = dense(ctx.inputs[0]);
  Tensor& y = ctx.outputs[0];
  const int64_t n = y.numel();
  if (n == 0) return;
  const Launch1d l = launch_1d(n);
  visit_float(x.dtype(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    adaptive_kernel<T><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
        data_of<T>(y), data_of<T>(x), x.size(2), x.size(3), y.size(2), y.size(3), n);
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

void adaptive_avg_pool2d_backward(ops::KernelContext& ctx) {
  const Tensor dy = dense(ctx.inputs[0]);
  Tensor& dx = ctx.outputs[0];
  const int64_t n = dx.numel();
  if (n == 0) return;
  const Launch1d l = launch_1d(n);
  visit_float(dx.dtype(), "adaptive_avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    adaptive_backward_kernel<T><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
        data_of<T>(dx), data_of<T>(dy), dx.size(2), dx.size(3), dy.size(2), dy.size(3), n);
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

}  // namespace

#define SPORE_POOL_DTYPES kFloat32, kFloat64, kBFloat16, kFloat16
SPORE_KERNEL(GPU, MaxPool2d, max_pool2d, SPORE_POOL_DTYPES);
SPORE_KERNEL(GPU, MaxPool2dBackward, max_pool2d_backward, SPORE_POOL_DTYPES);
SPORE_KERNEL(GPU, AvgPool2d, avg_pool2d, SPORE_POOL_DTYPES);
SPORE_KERNEL(GPU, AvgPool2dBackward, avg_pool2d_backward, SPORE_POOL_DTYPES);
SPORE_KERNEL(GPU, AdaptiveAvgPool2d, adaptive_avg_pool2d, SPORE_POOL_DTYPES);
SPORE_KERNEL(GPU, AdaptiveAvgPool2dBackward, adaptive_avg_pool2d_backward, SPORE_POOL_DTYPES);
#undef SPORE_POOL_DTYPES

}  // namespace spore::cuda
