// Normalisation kernels on the CPU: BatchNorm (training: batch statistics -> y, mean, invstd),
// BatchNormInference, BatchNormBackward, LayerNorm and LayerNormBackward.
// x is viewed as (N, C, S) for batch norm (S = the product of the spatial dims) and as (rows, D)
// for layer norm. Statistics are float32 (float64 for float64 input); row sums accumulate in the
// element's arithmetic type and are combined in double, which keeps float32 within 1e-5 of a
// double reference for realistic sizes. Mixed precision: x (and dy) may be float16/bfloat16 while
// gamma/beta/mean/var are float32; the math is float32 and y/dx come out in x's dtype.
#include <cmath>
#include <vector>

#include "backends/cpu/kernels/half_convert.h"
#include "backends/cpu/kernels/nn_util.h"
#include "core/parallel.h"

namespace spore::cpu {
namespace {

template <typename F>
void visit_float(DType t, F&& f) {
  switch (t) {
    case kFloat32: return f(float{});
    case kFloat64: return f(double{});
    case kBFloat16: return f(BFloat16{});
    case kFloat16: return f(Half{});
    default: SPORE_ASSERT(false, "norm kernel called with dtype ", dtype_name(t));
  }
}

// float16/bfloat16 data (x, dy, y, dx): converted once with the vectorised cast and run through the
// float32 kernel: per-element 16-bit conversions keep the loops below scalar (float16's are
// out-of-line calls), and two SIMD passes cost less than that. Parameters and statistics keep
// their dtypes (float32 under mixed precision).
bool is_16bit(DType t) { return t == kFloat16 || t == kBFloat16; }
void via_f32(ops::KernelContext& ctx, void (*f32_kernel)(ops::KernelContext&)) {
  ops::Tensors in, out;
  for (const Tensor& t : ctx.inputs) in.push_back(is_16bit(t.dtype()) ? dense_as(t, kFloat32) : t);
  for (const Tensor& t : ctx.outputs)
    out.push_back(is_16bit(t.dtype()) ? Tensor::empty(t.shape(), kFloat32) : t);
  ops::KernelContext c32{ctx.def, in, out, ctx.attrs};
  f32_kernel(c32);
  for (size_t i = 0; i < out.size(); ++i)
    if (!out[i].is_same(ctx.outputs[i])) {
      const bool done = fast_half_cast(out[i], ctx.outputs[i]);
      SPORE_ASSERT(done, "norm kernel: float32 -> float16 output conversion not taken");
    }
}
bool has_half(const ops::KernelContext& ctx) {
  for (const Tensor& t : ctx.inputs)
    if (is_16bit(t.dtype())) return true;
  return false;
}

// Writes doubles into a small contiguous float tensor of any float dtype (dgamma, dbeta).
void store(Tensor& t, const std::vector<double>& v) {
  visit_float(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, double>) p[i] = v[i];
      else p[i] = T(float(v[i]));
    }
  });
}

struct NCS {
  int64_t N, C, S;
};
NCS ncs(const Tensor& x) {
  int64_t S = 1;
  for (int64_t d = 2; d < x.dim(); ++d) S *= x.size(d);
  return {x.size(0), x.size(1), S};
}

template <typename T>
void batch_norm_fwd(const NCS& d, double eps, const T* x, const std::vector<double>& gamma,
                    const std::vector<double>& beta, T* y, acc_t<T>* mean_out, acc_t<T>* invstd_out) {
  using A = acc_t<T>;
  const double n = double(d.N * d.S);
  parallel_for(0, d.C, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double s = 0;
      for (int64_t i = 0; i < d.N; ++i) {
        const T* r = x + (i * d.C + c) * d.S;
        A rs = 0;
        for (int64_t j = 0; j < d.S; ++j) rs += A(r[j]);
        s += rs;
      }
      const double mean = s / n;
      const A m = A(mean);
      double ss = 0;
      for (int64_t i = 0; i < d.N; ++i) {
        const T* r = x + (i * d.C + c) * d.S;
        A rs = 0;
        for (int64_t j = 0; j < d.S; ++j) {
          const A v = A(r[j]) - m;
          rs += v * v;
        }
        ss += rs;
      }
      const double invstd = 1.0 / std::sqrt(ss / n + eps);
      mean_out[c] = A(mean);
      invstd_out[c] = A(invstd);
      const A scale = A(invstd * gamma[size_t(c)]), shift = A(beta[size_t(c)] - mean * invstd * gamma[size_t(c)]);
      for (int64_t i = 0; i < d.N; ++i) {
        const T* r = x + (i * d.C + c) * d.S;
        T* o = y + (i * d.C + c) * d.S;
        for (int64_t j = 0; j < d.S; ++j) o[j] = T(A(r[j]) * scale + shift);
      }
    }
  });
}

template <typename T>
void batch_norm_bwd(const NCS& d, const T* dy, const T* x, const std::vector<double>& gamma,
                    const acc_t<T>* mean, const acc_t<T>* invstd, T* dx, std::vector<double>& dgamma,
                    std::vector<double>& dbeta) {
  using A = acc_t<T>;
  const double n = double(d.N * d.S);
  parallel_for(0, d.C, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const A m = mean[c], is = invstd[c];
      double sdy = 0, sdyx = 0;  // sum(dy), sum(dy * (x - mean))
      for (int64_t i = 0; i < d.N; ++i) {
        const T *g = dy + (i * d.C + c) * d.S, *r = x + (i * d.C + c) * d.S;
        A a = 0, b = 0;
        for (int64_t j = 0; j < d.S; ++j) {
          const A gv = A(g[j]);
          a += gv;
          b += gv * (A(r[j]) - m);
        }
        sdy += a;
        sdyx += b;
      }
      dbeta[size_t(c)] = sdy;
      dgamma[size_t(c)] = sdyx * double(is);
      // dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat))
      const A k = A(gamma[size_t(c)] * double(is));
      const A mdy = A(sdy / n), kx = A(sdyx / n * double(is) * double(is));
      for (int64_t i = 0; i < d.N; ++i) {
        const T *g = dy + (i * d.C + c) * d.S, *r = x + (i * d.C + c) * d.S;
        T* o = dx + (i * d.C + c) * d.S;
        for (int64_t j = 0; j < d.S; ++j) o[j] = T(k * (A(g[j]) - mdy - (A(r[j]) - m) * kx));
      }
    }
  });
}

void batch_norm_kernel(ops::KernelContext& ctx) {
  if (has_half(ctx)) return via_f32(ctx, batch_norm_kernel);
  Tensor x = dense(ctx.inputs[0]);
  const auto gamma = small_values(ctx.inputs[1]), beta = small_values(ctx.inputs[2]);
  const double eps = ctx.attrs.get_float("eps", 1e-5);
  const NCS d = ncs(x);
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    batch_norm_fwd<T>(d, eps, x.data<T>(), gamma, beta, ctx.outputs[0].data<T>(),
                      ctx.outputs[1].data<A>(), ctx.outputs[2].data<A>());
  });
}

void batch_norm_backward_kernel(ops::KernelContext& ctx) {
  if (has_half(ctx)) return via_f32(ctx, batch_norm_backward_kernel);
  Tensor dy = dense(ctx.inputs[0]), x = dense(ctx.inputs[1]);
  const auto gamma = small_values(ctx.inputs[2]);
  const NCS d = ncs(x);
  std::vector<double> dgamma(size_t(d.C)), dbeta(size_t(d.C));
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    Tensor mean = dense_as(ctx.inputs[3], dtype_of_v<A>), invstd = dense_as(ctx.inputs[4], dtype_of_v<A>);
    Tensor dyt = dense_as(dy, x.dtype());
    batch_norm_bwd<T>(d, dyt.data<T>(), x.data<T>(), gamma, mean.data<A>(), invstd.data<A>(),
                      ctx.outputs[0].data<T>(), dgamma, dbeta);
  });
  store(ctx.outputs[1], dgamma);
  store(ctx.outputs[2], dbeta);
}

void batch_norm_inference_kernel(ops::KernelContext& ctx) {
  if (has_half(ctx)) return via_f32(ctx, batch_norm_inference_kernel);
  Tensor x = dense(ctx.inputs[0]);
  const auto gamma = small_values(ctx.inputs[1]), beta = small_values(ctx.inputs[2]),
             mean = small_values(ctx.inputs[3]), var = small_values(ctx.inputs[4]);
  const double eps = ctx.attrs.get_float("eps", 1e-5);
  const NCS d = ncs(x);
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    std::vector<A> scale(size_t(d.C)), shift(size_t(d.C));
    for (size_t c = 0; c < size_t(d.C); ++c) {
      const double k = gamma[c] / std::sqrt(var[c] + eps);
      scale[c] = A(k);
      shift[c] = A(beta[c] - mean[c] * k);
    }
    const T* xp = x.data<T>();
    T* yp = ctx.outputs[0].data<T>();
    parallel_for(0, d.N * d.C, std::max<int64_t>(1, 32768 / std::max<int64_t>(d.S, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const A k = scale[size_t(r % d.C)], b = shift[size_t(r % d.C)];
        const T* src = xp + r * d.S;
        T* dst = yp + r * d.S;
        for (int64_t j = 0; j < d.S; ++j) dst[j] = T(A(src[j]) * k + b);
      }
    });
  });
}

// ---- layer norm --------------------------------------------------------------------------------

template <typename T>
void layer_norm_fwd(int64_t rows, int64_t D, double eps, const T* x, const std::vector<acc_t<T>>& gamma,
                    const std::vector<acc_t<T>>& beta, T* y, acc_t<T>* mean_out, acc_t<T>* rstd_out) {
  using A = acc_t<T>;
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(D, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * D;
      A s = 0;
      for (int64_t j = 0; j < D; ++j) s += A(xr[j]);
      const A m = s / A(D);
      A ss = 0;
      for (int64_t j = 0; j < D; ++j) {
        const A v = A(xr[j]) - m;
        ss += v * v;
      }
      const A rs = A(1.0 / std::sqrt(double(ss) / double(D) + eps));
      mean_out[r] = m;
      rstd_out[r] = rs;
      T* yr = y + r * D;
      for (int64_t j = 0; j < D; ++j) yr[j] = T((A(xr[j]) - m) * rs * gamma[size_t(j)] + beta[size_t(j)]);
    }
  });
}

template <typename T>
void layer_norm_bwd(int64_t rows, int64_t D, const T* dy, const T* x, const std::vector<acc_t<T>>& gamma,
                    const acc_t<T>* mean, const acc_t<T>* rstd, T* dx, std::vector<double>& dgamma,
                    std::vector<double>& dbeta) {
  using A = acc_t<T>;
  // Rows split into one block per thread; each block keeps its own dgamma/dbeta partial sums.
  const int64_t nb = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), rows));
  std::vector<std::vector<A>> pg(size_t(nb), std::vector<A>(size_t(D), 0)), pb = pg;
  parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      A *g = pg[size_t(b)].data(), *bt = pb[size_t(b)].data();
      const int64_t r0 = rows * b / nb, r1 = rows * (b + 1) / nb;
      for (int64_t r = r0; r < r1; ++r) {
        const T *dr = dy + r * D, *xr = x + r * D;
        const A m = mean[r], rs = rstd[r];
        A a = 0, c = 0;  // sum(dy * gamma), sum(dy * gamma * xhat)
        for (int64_t j = 0; j < D; ++j) {
          const A xh = (A(xr[j]) - m) * rs, dv = A(dr[j]);
          const A dg = dv * gamma[size_t(j)];
          a += dg;
          c += dg * xh;
          g[j] += dv * xh;
          bt[j] += dv;
        }
        const A ma = a / A(D), mc = c / A(D);
        T* o = dx + r * D;
        for (int64_t j = 0; j < D; ++j) {
          const A xh = (A(xr[j]) - m) * rs;
          o[j] = T(rs * (A(dr[j]) * gamma[size_t(j)] - ma - xh * mc));
        }
      }
    }
  });
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t j = 0; j < D; ++j) {
      dgamma[size_t(j)] += pg[size_t(b)][size_t(j)];
      dbeta[size_t(j)] += pb[size_t(b)][size_t(j)];
    }
}

template <typename A>
std::vector<A> as_vec(const std::vector<double>& v) {
  return std::vector<A>(v.begin(), v.end());
}

void layer_norm_kernel(ops::KernelContext& ctx) {
  if (has_half(ctx)) return via_f32(ctx, layer_norm_kernel);
  Tensor x = dense(ctx.inputs[0]);
  const int64_t D = ctx.inputs[1].numel(), rows = D ? x.numel() / D : 0;
  const double eps = ctx.attrs.get_float("eps", 1e-5);
  const auto gamma = small_values(ctx.inputs[1]), beta = small_values(ctx.inputs[2]);
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    layer_norm_fwd<T>(rows, D, eps, x.data<T>(), as_vec<A>(gamma), as_vec<A>(beta),
                      ctx.outputs[0].data<T>(), ctx.outputs[1].data<A>(), ctx.outputs[2].data<A>());
  });
}

void layer_norm_backward_kernel(ops::KernelContext& ctx) {
  if (has_half(ctx)) return via_f32(ctx, layer_norm_backward_kernel);
  Tensor x = dense(ctx.inputs[1]);
  const int64_t D = ctx.inputs[2].numel(), rows = D ? x.numel() / D : 0;
  const auto gamma = small_values(ctx.inputs[2]);
  std::vector<double> dgamma(size_t(D), 0.0), dbeta(size_t(D), 0.0);
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    Tensor dy = dense_as(ctx.inputs[0], x.dtype());
    Tensor mean = dense_as(ctx.inputs[3], dtype_of_v<A>), rstd = dense_as(ctx.inputs[4], dtype_of_v<A>);
    layer_norm_bwd<T>(rows, D, dy.data<T>(), x.data<T>(), as_vec<A>(gamma), mean.data<A>(),
                      rstd.data<A>(), ctx.outputs[0].data<T>(), dgamma, dbeta);
  });
  store(ctx.outputs[1], dgamma);
  store(ctx.outputs[2], dbeta);
}

}  // namespace

#define SPORE_NORM_DTYPES kFloat32, kFloat64, kBFloat16, kFloat16
SPORE_KERNEL(CPU, BatchNorm, batch_norm_kernel, SPORE_NORM_DTYPES);
SPORE_KERNEL(CPU, BatchNormBackward, batch_norm_backward_kernel, SPORE_NORM_DTYPES);
SPORE_KERNEL(CPU, BatchNormInference, batch_norm_inference_kernel, SPORE_NORM_DTYPES);
SPORE_KERNEL(CPU, LayerNorm, layer_norm_kernel, SPORE_NORM_DTYPES);
SPORE_KERNEL(CPU, LayerNormBackward, layer_norm_backward_kernel, SPORE_NORM_DTYPES);

}  // namespace spore::cpu
