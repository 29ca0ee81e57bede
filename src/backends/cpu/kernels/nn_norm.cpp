// Normalisation kernels on the CPU: BatchNorm (training: batch statistics -> y, mean, invstd),
// BatchNormInference, BatchNormBackward, LayerNorm and LayerNormBackward.
// x is viewed as (N, C, S) for batch norm (S = the product of the spatial dims) and as (rows, D)
// for layer norm. Statistics are float32 (float64 for float64 input); row sums accumulate in the
// element's arithmetic type and are combined in double, which keeps float32 within 1e-5 of a
// double reference for realistic sizes. Mixed precision: x (and dy) may be float16/bfloat16 while
// gamma/beta/mean/var are float32; the math is float32 and y/dx come out in x's dtype.
//
// batch_norm / batch_norm_backward with `blocked` (graph mode's nChw16c / nChw8c activations, 5-D
// (N, Cb, H, W, L), float32, C = gamma's length): lane l of block cb is channel cb*L + l, so the
// per-channel sums are vertical vector sums over the pixels of each block, no horizontal adds.
// Work is split into tasks of at most kChunk pixels of one (n, cb) plane (parallel even for small
// N * Cb); each task sums in float vectors around its own first-pass mean (the task is hot in L1
// for the second pass) and the tasks combine in double (Chan's formula), which is at least as
// accurate as the plain kernel's float rows combined in double. Padding lanes of y / dx are zero.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/nn_norm.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "backends/cpu/kernels/half_convert.h"
#include "backends/cpu/kernels/nn_util.h"
#include "core/parallel.h"

#ifndef SPORE_NN_NORM_BLOCKED_GEOM
#define SPORE_NN_NORM_BLOCKED_GEOM
namespace spore::cpu::blkbn {
// A blocked batch-norm tensor: N*Cb planes of S pixels of 16 (or 8) floats, cut into tasks of at
// most kChunk pixels (task t: plane t / chunks, pixels from (t % chunks) * kChunk).
constexpr int64_t kChunk = 512;  // 32 KiB of floats: stays in L1/L2 between a task's passes
struct Geom {
  int64_t Cb, C, S, chunks, lanes;  // lanes: a pixel's floats, 16 or 8
  int64_t tasks(int64_t N) const { return N * Cb * chunks; }
};
}  // namespace spore::cpu::blkbn
#endif

HWY_BEFORE_NAMESPACE();
namespace spore::cpu::blkbn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
// The kernels are templates on the block's lanes kB (16 or 8: ops/blocked.h): vectors of at most
// kB floats, so an 8-lane block is read whole whatever the target's width.
template <int kB>
using DFB = hn::CappedTag<float, kB>;

struct Span {
  int64_t off, n, cb;  // first float of the task, pixels, block
};
HWY_INLINE Span span(const Geom& g, int64_t t) {
  const int64_t q = t / g.chunks, p0 = (t % g.chunks) * kChunk;
  return {(q * g.S + p0) * g.lanes, std::min(kChunk, g.S - p0), q % g.Cb};
}
template <class DF>
HWY_INLINE hn::Mask<DF> lanes_valid(DF d, const Geom& g, int64_t cb, int64_t j) {
  return hn::FirstN(d,
                    size_t(std::clamp<int64_t>(g.C - cb * g.lanes - j, 0, int64_t(hn::Lanes(d)))));
}

// Sum over the task's pixels of f(pixel offset) (a vector), four accumulators.
template <int kB, class F>
HWY_INLINE hn::Vec<DFB<kB>> vsum(int64_t n, const F& f) {
  const DFB<kB> d;
  auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a0 = hn::Add(a0, f(i * kB));
    a1 = hn::Add(a1, f(i * kB + kB));
    a2 = hn::Add(a2, f(i * kB + 2 * kB));
    a3 = hn::Add(a3, f(i * kB + 3 * kB));
  }
  for (; i < n; ++i) a0 = hn::Add(a0, f(i * kB));
  return hn::Add(hn::Add(a0, a1), hn::Add(a2, a3));
}

// Per task t in [t0, t1), per lane: out[t*48 + l] = c (the task's float mean), out[+16] =
// sum(x - c), out[+32] = sum((x - c)^2).
template <int kB>
HWY_INLINE void BnStatsT(const Geom& g, const float* x, double* out, int64_t t0, int64_t t1) {
  const DFB<kB> d;
  const int64_t L = int64_t(hn::Lanes(d));
  alignas(64) float c[16], s1[16], s2[16];
  for (int64_t t = t0; t < t1; ++t) {
    const Span sp = span(g, t);
    const float* xp = x + sp.off;
    const auto inv = hn::Set(d, 1.0f / float(sp.n));
    for (int64_t j = 0; j < kB; j += L) {
      const float* xj = xp + j;
      const auto cv = hn::Mul(vsum<kB>(sp.n, [&](int64_t o) { return hn::LoadU(d, xj + o); }), inv);
      hn::Store(cv, d, c + j);
      hn::Store(vsum<kB>(sp.n, [&](int64_t o) { return hn::Sub(hn::LoadU(d, xj + o), cv); }), d,
                s1 + j);
      hn::Store(vsum<kB>(sp.n,
                         [&](int64_t o) {
                           const auto v = hn::Sub(hn::LoadU(d, xj + o), cv);
                           return hn::Mul(v, v);
                         }),
                d, s2 + j);
    }
    double* o = out + t * 48;
    for (int l = 0; l < kB; ++l) {
      o[l] = c[l];
      o[16 + l] = s1[l];
      o[32 + l] = s2[l];
    }
  }
}

// y = x * scale + shift per lane (scale, shift: Cb*16 floats), padding lanes zero.
template <int kB>
HWY_INLINE void BnApplyT(const Geom& g, const float* x, const float* scale, const float* shift,
                         float* y, int64_t t0, int64_t t1) {
  const DFB<kB> d;
  const int64_t L = int64_t(hn::Lanes(d));
  for (int64_t t = t0; t < t1; ++t) {
    const Span sp = span(g, t);
    for (int64_t j = 0; j < kB; j += L) {
      const auto ok = lanes_valid(d, g, sp.cb, j);
      const auto k = hn::LoadU(d, scale + sp.cb * kB + j), b = hn::LoadU(d, shift + sp.cb * kB + j);
      const float* xp = x + sp.off + j;
      float* yp = y + sp.off + j;
      for (int64_t i = 0; i < sp.n; ++i)
        hn::StoreU(hn::IfThenElseZero(ok, hn::MulAdd(hn::LoadU(d, xp + i * kB), k, b)), d,
                   yp + i * kB);
    }
  }
}

// Per task, per lane: out[t*32 + l] = sum(dy), out[+16] = sum(dy * (x - mean)).
template <int kB>
HWY_INLINE void BnBwdSumsT(const Geom& g, const float* dy, const float* x, const float* mean,
                           double* out, int64_t t0, int64_t t1) {
  const DFB<kB> d;
  const int64_t L = int64_t(hn::Lanes(d));
  alignas(64) float s1[16], s2[16];
  for (int64_t t = t0; t < t1; ++t) {
    const Span sp = span(g, t);
    for (int64_t j = 0; j < kB; j += L) {
      const float *gp = dy + sp.off + j, *xp = x + sp.off + j;
      const auto m = hn::LoadU(d, mean + sp.cb * kB + j);
      hn::Store(vsum<kB>(sp.n, [&](int64_t o) { return hn::LoadU(d, gp + o); }), d, s1 + j);
      hn::Store(vsum<kB>(sp.n,
                         [&](int64_t o) {
                           return hn::Mul(hn::LoadU(d, gp + o), hn::Sub(hn::LoadU(d, xp + o), m));
                         }),
                d, s2 + j);
    }
    double* o = out + t * 32;
    for (int l = 0; l < kB; ++l) {
      o[l] = s1[l];
      o[16 + l] = s2[l];
    }
  }
}

// dx = k * (dy - mdy - (x - mean) * kx) per lane (each Cb*16 floats), padding lanes zero.
template <int kB>
HWY_INLINE void BnBwdApplyT(const Geom& g, const float* dy, const float* x, const float* k,
                            const float* mdy, const float* kx, const float* mean, float* dx,
                            int64_t t0, int64_t t1) {
  const DFB<kB> d;
  const int64_t L = int64_t(hn::Lanes(d));
  for (int64_t t = t0; t < t1; ++t) {
    const Span sp = span(g, t);
    for (int64_t j = 0; j < kB; j += L) {
      const int64_t c = sp.cb * kB + j;
      const auto ok = lanes_valid(d, g, sp.cb, j);
      const auto kv = hn::LoadU(d, k + c), mv = hn::LoadU(d, mdy + c), kxv = hn::LoadU(d, kx + c),
                 m = hn::LoadU(d, mean + c);
      const float *gp = dy + sp.off + j, *xp = x + sp.off + j;
      float* op = dx + sp.off + j;
      for (int64_t i = 0; i < sp.n; ++i) {
        const auto xc = hn::Sub(hn::LoadU(d, xp + i * kB), m);
        const auto r =
            hn::NegMulAdd(xc, kxv, hn::Sub(hn::LoadU(d, gp + i * kB), mv));  // dy - mdy - xc*kx
        hn::StoreU(hn::IfThenElseZero(ok, hn::Mul(kv, r)), d, op + i * kB);
      }
    }
  }
}

// Per block width: the exported entry points.
HWY_NOINLINE void BnStats(const Geom g, const float* x, double* out, int64_t t0, int64_t t1) {
  if (g.lanes == 8) return BnStatsT<8>(g, x, out, t0, t1);
  BnStatsT<16>(g, x, out, t0, t1);
}
HWY_NOINLINE void BnApply(const Geom g, const float* x, const float* scale, const float* shift,
                          float* y, int64_t t0, int64_t t1) {
  if (g.lanes == 8) return BnApplyT<8>(g, x, scale, shift, y, t0, t1);
  BnApplyT<16>(g, x, scale, shift, y, t0, t1);
}
HWY_NOINLINE void BnBwdSums(const Geom g, const float* dy, const float* x, const float* mean,
                            double* out, int64_t t0, int64_t t1) {
  if (g.lanes == 8) return BnBwdSumsT<8>(g, dy, x, mean, out, t0, t1);
  BnBwdSumsT<16>(g, dy, x, mean, out, t0, t1);
}
HWY_NOINLINE void BnBwdApply(const Geom g, const float* dy, const float* x, const float* k,
                             const float* mdy, const float* kx, const float* mean, float* dx,
                             int64_t t0, int64_t t1) {
  if (g.lanes == 8) return BnBwdApplyT<8>(g, dy, x, k, mdy, kx, mean, dx, t0, t1);
  BnBwdApplyT<16>(g, dy, x, k, mdy, kx, mean, dx, t0, t1);
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::blkbn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace spore::cpu {
namespace blkbn {
HWY_EXPORT(BnStats);
HWY_EXPORT(BnApply);
HWY_EXPORT(BnBwdSums);
HWY_EXPORT(BnBwdApply);
}  // namespace blkbn
namespace {

template <typename F>
void visit_float(DType t, F&& f) {
  switch (t) {
    case kFloat32:
      return f(float{});
    case kFloat64:
      return f(double{});
    case kBFloat16:
      return f(BFloat16{});
    case kFloat16:
      return f(Half{});
    default:
      SPORE_ASSERT(false, "norm kernel called with dtype ", dtype_name(t));
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
      if constexpr (std::is_same_v<T, double>)
        p[i] = v[i];
      else
        p[i] = T(float(v[i]));
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

// Sums over j < n of the N terms f(j) returns (a std::array<A, N>) for the plain-layout batch
// norm's rows, each in kW independent accumulators: one running sum is a chain of dependent adds
// (4 cycles each), and the compiler may not reorder a float sum itself; separate accumulators are
// lanes it vectorises (batch norm forward of (32, 64, 32, 32) on a Zen 5: 1.66 -> 0.76 ms).
constexpr int64_t kW = 16;
template <typename A, size_t N, typename F>
std::array<A, N> lane_sums(int64_t n, F f) {
  A acc[N][kW] = {};
  int64_t j = 0;
  for (; j + kW <= n; j += kW)
    for (int64_t k = 0; k < kW; ++k) {
      const std::array<A, N> t = f(j + k);
      for (size_t q = 0; q < N; ++q) acc[q][k] += t[q];
    }
  std::array<A, N> s{};
  for (; j < n; ++j) {
    const std::array<A, N> t = f(j);
    for (size_t q = 0; q < N; ++q) s[q] += t[q];
  }
  for (size_t q = 0; q < N; ++q)
    for (int64_t k = 0; k < kW; ++k) s[q] += acc[q][k];
  return s;
}

template <typename T>
void batch_norm_fwd(const NCS& d, double eps, const T* x, const std::vector<double>& gamma,
                    const std::vector<double>& beta, T* y, acc_t<T>* mean_out,
                    acc_t<T>* invstd_out) {
  using A = acc_t<T>;
  const double n = double(d.N * d.S);
  parallel_for(0, d.C, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double s = 0;
      for (int64_t i = 0; i < d.N; ++i) {
        const T* r = x + (i * d.C + c) * d.S;
        s += lane_sums<A, 1>(d.S, [&](int64_t j) { return std::array<A, 1>{A(r[j])}; })[0];
      }
      const double mean = s / n;
      const A m = A(mean);
      double ss = 0;
      for (int64_t i = 0; i < d.N; ++i) {
        const T* r = x + (i * d.C + c) * d.S;
        ss += lane_sums<A, 1>(d.S, [&](int64_t j) {
          const A v = A(r[j]) - m;
          return std::array<A, 1>{v * v};
        })[0];
      }
      const double invstd = 1.0 / std::sqrt(ss / n + eps);
      mean_out[c] = A(mean);
      invstd_out[c] = A(invstd);
      const A scale = A(invstd * gamma[size_t(c)]),
              shift = A(beta[size_t(c)] - mean * invstd * gamma[size_t(c)]);
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
                    const acc_t<T>* mean, const acc_t<T>* invstd, T* dx,
                    std::vector<double>& dgamma, std::vector<double>& dbeta) {
  using A = acc_t<T>;
  const double n = double(d.N * d.S);
  parallel_for(0, d.C, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const A m = mean[c], is = invstd[c];
      double sdy = 0, sdyx = 0;  // sum(dy), sum(dy * (x - mean))
      for (int64_t i = 0; i < d.N; ++i) {
        const T *g = dy + (i * d.C + c) * d.S, *r = x + (i * d.C + c) * d.S;
        const auto [a, b] = lane_sums<A, 2>(d.S, [&](int64_t j) {
          const A gv = A(g[j]);
          return std::array<A, 2>{gv, gv * (A(r[j]) - m)};
        });
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

// ---- blocked batch norm (x (N, Cb, H, W, L), gamma (C)) ---------------------------------------

blkbn::Geom bn_blocked_geom(const Tensor& x, int64_t C) {
  SPORE_ASSERT(x.dtype() == kFloat32, "batch_norm: blocked layout supports float32 only, got ",
               dtype_name(x.dtype()));
  const int64_t S = x.size(2) * x.size(3);
  return {x.size(1), C, S, std::max<int64_t>(1, (S + blkbn::kChunk - 1) / blkbn::kChunk),
          x.size(4)};
}
// Tasks per thread chunk: ~64K floats.
int64_t bn_grain(const blkbn::Geom& g) {
  return std::max<int64_t>(1, 4096 / std::max<int64_t>(std::min(g.S, blkbn::kChunk), 1));
}
// Per-channel values padded to Cb*L lanes (padding lanes 0).
std::vector<float> lanes_of(const std::vector<double>& v, int64_t Cb, int64_t L) {
  std::vector<float> r(size_t(Cb * L), 0.0f);
  for (size_t c = 0; c < v.size(); ++c) r[c] = float(v[c]);
  return r;
}

void batch_norm_blocked(ops::KernelContext& ctx) {
  Tensor x = dense(ctx.inputs[0]);
  const auto gamma = small_values(ctx.inputs[1]), beta = small_values(ctx.inputs[2]);
  const double eps = ctx.attrs.get_float("eps", 1e-5);
  const int64_t N = x.size(0), C = int64_t(gamma.size());
  const blkbn::Geom g = bn_blocked_geom(x, C);
  const int64_t T = g.tasks(N);
  std::vector<double> part(size_t(T * 48));  // per task: c, sum(x - c), sum((x - c)^2) per lane
  const float* xp = x.data<float>();
  parallel_for(0, T, bn_grain(g), [&](int64_t t0, int64_t t1) {
    HWY_DYNAMIC_DISPATCH(blkbn::BnStats)(g, xp, part.data(), t0, t1);
  });
  // Chan: sum((x - m)^2) = sum over tasks of q - 2 (m - c) s + n (m - c)^2. Lanes innermost
  // (contiguous, vectorised): this runs on one thread and small planes make many tasks.
  const double total = double(N * g.S);
  const size_t CL = size_t(g.Cb * g.lanes);
  std::vector<double> sum(CL, 0.0), m2(CL, 0.0);
  auto count = [&](int64_t t) {
    return double(std::min(blkbn::kChunk, g.S - (t % g.chunks) * blkbn::kChunk));
  };
  for (int64_t t = 0; t < T; ++t) {
    const double cnt = count(t), *pt = &part[size_t(t * 48)];
    double* sp = &sum[size_t((t / g.chunks) % g.Cb * g.lanes)];
    for (int l = 0; l < g.lanes; ++l) sp[l] += cnt * pt[l] + pt[16 + l];
  }
  for (double& v : sum) v /= total;  // now the means
  for (int64_t t = 0; t < T; ++t) {
    const double cnt = count(t), *pt = &part[size_t(t * 48)];
    const size_t o = size_t((t / g.chunks) % g.Cb * g.lanes);
    for (int l = 0; l < g.lanes; ++l) {
      const double dm = sum[o + size_t(l)] - pt[l];
      m2[o + size_t(l)] += pt[32 + l] - 2 * dm * pt[16 + l] + cnt * dm * dm;
    }
  }
  std::vector<float> scale(CL, 0.0f), shift(CL, 0.0f);
  float *mo = ctx.outputs[1].data<float>(), *io = ctx.outputs[2].data<float>();
  for (int64_t c = 0; c < C; ++c) {
    const double mean = sum[size_t(c)],
                 invstd = 1.0 / std::sqrt(std::max(m2[size_t(c)], 0.0) / total + eps);
    mo[c] = float(mean);
    io[c] = float(invstd);
    scale[size_t(c)] = float(invstd * gamma[size_t(c)]);
    shift[size_t(c)] = float(beta[size_t(c)] - mean * invstd * gamma[size_t(c)]);
  }
  float* yp = ctx.outputs[0].data<float>();
  parallel_for(0, T, bn_grain(g), [&](int64_t t0, int64_t t1) {
    HWY_DYNAMIC_DISPATCH(blkbn::BnApply)(g, xp, scale.data(), shift.data(), yp, t0, t1);
  });
}

void batch_norm_backward_blocked(ops::KernelContext& ctx) {
  Tensor dy = dense(ctx.inputs[0]), x = dense(ctx.inputs[1]);
  SPORE_ASSERT(dy.dtype() == kFloat32,
               "batch_norm_backward: blocked layout supports float32 only, got dy of ",
               dtype_name(dy.dtype()));
  const auto gamma = small_values(ctx.inputs[2]), mean = small_values(ctx.inputs[3]),
             invstd = small_values(ctx.inputs[4]);
  const int64_t N = x.size(0), C = int64_t(gamma.size());
  const blkbn::Geom g = bn_blocked_geom(x, C);
  const int64_t T = g.tasks(N);
  const std::vector<float> m = lanes_of(mean, g.Cb, g.lanes);
  std::vector<double> part(size_t(T * 32));  // per task: sum(dy), sum(dy * (x - mean)) per lane
  const float *gp = dy.data<float>(), *xp = x.data<float>();
  parallel_for(0, T, bn_grain(g), [&](int64_t t0, int64_t t1) {
    HWY_DYNAMIC_DISPATCH(blkbn::BnBwdSums)(g, gp, xp, m.data(), part.data(), t0, t1);
  });
  const double n = double(N * g.S);
  std::vector<double> dgamma(static_cast<size_t>(C)), dbeta(static_cast<size_t>(C));
  std::vector<float> k(size_t(g.Cb * g.lanes), 0.0f), mdy(k), kx(k);
  std::vector<double> sdy(size_t(g.Cb * g.lanes), 0.0), sdyx(sdy);
  for (int64_t t = 0; t < T; ++t) {  // lanes innermost, as the forward
    const double* pt = &part[size_t(t * 32)];
    const size_t o = size_t((t / g.chunks) % g.Cb * g.lanes);
    for (int l = 0; l < g.lanes; ++l) {
      sdy[o + size_t(l)] += pt[l];
      sdyx[o + size_t(l)] += pt[16 + l];
    }
  }
  for (int64_t c = 0; c < C; ++c) {
    // As the plain kernel: the float invstd, dx = gamma*invstd*(dy - mean(dy) -
    // xhat*mean(dy*xhat)).
    const double is = double(float(invstd[size_t(c)])), a = sdy[size_t(c)], b = sdyx[size_t(c)];
    dbeta[size_t(c)] = a;
    dgamma[size_t(c)] = b * is;
    k[size_t(c)] = float(gamma[size_t(c)] * is);
    mdy[size_t(c)] = float(a / n);
    kx[size_t(c)] = float(b / n * is * is);
  }
  float* dxp = ctx.outputs[0].data<float>();
  parallel_for(0, T, bn_grain(g), [&](int64_t t0, int64_t t1) {
    HWY_DYNAMIC_DISPATCH(blkbn::BnBwdApply)
    (g, gp, xp, k.data(), mdy.data(), kx.data(), m.data(), dxp, t0, t1);
  });
  store(ctx.outputs[1], dgamma);
  store(ctx.outputs[2], dbeta);
}

void batch_norm_kernel(ops::KernelContext& ctx) {
  if (ctx.attrs.get_bool("blocked")) return batch_norm_blocked(ctx);
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
  if (ctx.attrs.get_bool("blocked")) return batch_norm_backward_blocked(ctx);
  if (has_half(ctx)) return via_f32(ctx, batch_norm_backward_kernel);
  Tensor dy = dense(ctx.inputs[0]), x = dense(ctx.inputs[1]);
  const auto gamma = small_values(ctx.inputs[2]);
  const NCS d = ncs(x);
  std::vector<double> dgamma(size_t(d.C)), dbeta(size_t(d.C));
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    Tensor mean = dense_as(ctx.inputs[3], dtype_of_v<A>),
           invstd = dense_as(ctx.inputs[4], dtype_of_v<A>);
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
    parallel_for(0, d.N * d.C, std::max<int64_t>(1, 32768 / std::max<int64_t>(d.S, 1)),
                 [&](int64_t r0, int64_t r1) {
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
void layer_norm_fwd(int64_t rows, int64_t D, double eps, const T* x,
                    const std::vector<acc_t<T>>& gamma, const std::vector<acc_t<T>>& beta, T* y,
                    acc_t<T>* mean_out, acc_t<T>* rstd_out) {
  using A = acc_t<T>;
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(D, 1)),
               [&](int64_t r0, int64_t r1) {
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
                   for (int64_t j = 0; j < D; ++j)
                     yr[j] = T((A(xr[j]) - m) * rs * gamma[size_t(j)] + beta[size_t(j)]);
                 }
               });
}

template <typename T>
void layer_norm_bwd(int64_t rows, int64_t D, const T* dy, const T* x,
                    const std::vector<acc_t<T>>& gamma, const acc_t<T>* mean, const acc_t<T>* rstd,
                    T* dx, std::vector<double>& dgamma, std::vector<double>& dbeta) {
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
    Tensor mean = dense_as(ctx.inputs[3], dtype_of_v<A>),
           rstd = dense_as(ctx.inputs[4], dtype_of_v<A>);
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
#endif  // HWY_ONCE
