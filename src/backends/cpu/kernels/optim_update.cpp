// Optimizer updates on the CPU, in place, one pass over each parameter (float32 / float64):
//   ApplyMomentum (MindSpore): g += wd * p; acc = momentum * acc + g;
//                              p -= lr * acc, or with nesterov p -= lr * (g + momentum * acc)
//   ApplyAdam:   g += wd * p (or, decoupled = AdamW, p -= lr * wd * p first);
//                m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
//                p -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps)     (step 1-based)
//   ApplyRMSProp: ms = decay ms + (1 - decay) g^2; mom = momentum mom + lr g / sqrt(ms + eps);
//                p -= mom
// FusedApplyMomentum / FusedApplyAdam (the Graph-mode optimizer fusion, graph/passes/
// optimizer_fusion.cpp) run the same update over many (param, state..., grad) groups in ONE
// parallel region: the total element count is split across the threads, so a small bias costs
// no region of its own and the threads stay balanced whatever the tensor sizes.
//
// With attr hyper_input the last input is a float64 (k) tensor of per-step scalars (ops.def:
// Momentum [lr] or [lr, momentum], RMSProp [lr], Adam [lr, step, eps]) read here once per call in
// place of those attributes, so one compiled Graph-mode step serves every learning rate and step
// count. The coefficients are computed from the same doubles either way: bit-identical results.
// With attr gated as well, the hyper ends with one more element, the gate: 0 leaves every operand
// untouched (a loss-scaled step whose gradients overflowed, decided on the device: train/
// wrappers.cpp), anything else applies the update.
//
// Contiguous float32 / float64 operands go through the Highway loops below (run-time dispatched
// per x86 target), strided ones through StridedIter. Every contiguous element, the tail too (via
// a padded buffer), goes through the same vector code, so a fused update and the per-parameter
// updates give bit-identical results however the elements are split between threads.
// foreach_target.h must come first: it re-includes this file once per target.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/optim_update.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstring>

#ifndef SPORE_OPTIM_UPDATE_COEFFS_ONCE
#define SPORE_OPTIM_UPDATE_COEFFS_ONCE
namespace spore::cpu::optim {
// The per-step scalars of each update, computed once per kernel call from the attributes.
struct MomentumCoeffs {
  double lr, momentum, weight_decay;
  bool nesterov;
};
struct AdamCoeffs {
  double step_size, inv_sqrt_bc2, eps, beta1, beta2, one_b1, one_b2, l2, shrink;
};
}  // namespace spore::cpu::optim
#endif

HWY_BEFORE_NAMESPACE();
namespace spore::cpu::optim {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// f(d, p, acc..., g) over n elements of N same-length arrays (the first N-1 written back). The
// tail runs through zero-padded buffers so it sees the very same vector arithmetic.
template <int N, class T, class F>
HWY_INLINE void flat_loop(T* const (&ptr)[N], int64_t n, F f) {
  const hn::ScalableTag<T> d;
  const int64_t L = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    if constexpr (N == 3) {
      auto p = hn::LoadU(d, ptr[0] + i), s = hn::LoadU(d, ptr[1] + i);
      f(d, p, s, hn::LoadU(d, ptr[2] + i));
      hn::StoreU(p, d, ptr[0] + i);
      hn::StoreU(s, d, ptr[1] + i);
    } else {
      auto p = hn::LoadU(d, ptr[0] + i), s1 = hn::LoadU(d, ptr[1] + i),
           s2 = hn::LoadU(d, ptr[2] + i);
      f(d, p, s1, s2, hn::LoadU(d, ptr[3] + i));
      hn::StoreU(p, d, ptr[0] + i);
      hn::StoreU(s1, d, ptr[1] + i);
      hn::StoreU(s2, d, ptr[2] + i);
    }
  }
  if (i == n) return;
  constexpr size_t kMax = HWY_MAX_BYTES / sizeof(T);
  HWY_ALIGN T buf[N][kMax] = {};
  const size_t rest = size_t(n - i) * sizeof(T);
  for (int k = 0; k < N; ++k) std::memcpy(buf[k], ptr[k] + i, rest);
  if constexpr (N == 3) {
    auto p = hn::Load(d, buf[0]), s = hn::Load(d, buf[1]);
    f(d, p, s, hn::Load(d, buf[2]));
    hn::Store(p, d, buf[0]);
    hn::Store(s, d, buf[1]);
  } else {
    auto p = hn::Load(d, buf[0]), s1 = hn::Load(d, buf[1]), s2 = hn::Load(d, buf[2]);
    f(d, p, s1, s2, hn::Load(d, buf[3]));
    hn::Store(p, d, buf[0]);
    hn::Store(s1, d, buf[1]);
    hn::Store(s2, d, buf[2]);
  }
  for (int k = 0; k + 1 < N; ++k) std::memcpy(ptr[k] + i, buf[k], rest);
}

// The operations are written as separate multiplies and adds in the scalar formulas' order
// (no MulAdd) so the strided scalar path computes the same roundings wherever FMA is absent.
template <class T>
HWY_INLINE void momentum(T* p, T* acc, T* g, int64_t n, const MomentumCoeffs& c) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const V l = hn::Set(d, T(c.lr)), m = hn::Set(d, T(c.momentum)), w = hn::Set(d, T(c.weight_decay));
  T* const ptr[3] = {p, acc, g};
  if (c.nesterov) {
    flat_loop<3, T>(ptr, n, [&](auto, V& pv, V& av, V gv) {
      gv = hn::Add(gv, hn::Mul(w, pv));
      av = hn::Add(hn::Mul(m, av), gv);
      pv = hn::Sub(pv, hn::Mul(l, hn::Add(gv, hn::Mul(m, av))));
    });
  } else {
    flat_loop<3, T>(ptr, n, [&](auto, V& pv, V& av, V gv) {
      av = hn::Add(hn::Mul(m, av), hn::Add(gv, hn::Mul(w, pv)));
      pv = hn::Sub(pv, hn::Mul(l, av));
    });
  }
}

template <class T>
HWY_INLINE void adam(T* p, T* m, T* v, T* g, int64_t n, const AdamCoeffs& c) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const V step = hn::Set(d, T(c.step_size)), isb = hn::Set(d, T(c.inv_sqrt_bc2)),
          e = hn::Set(d, T(c.eps)), b1 = hn::Set(d, T(c.beta1)), b2 = hn::Set(d, T(c.beta2)),
          ob1 = hn::Set(d, T(c.one_b1)), ob2 = hn::Set(d, T(c.one_b2)), l2 = hn::Set(d, T(c.l2)),
          shrink = hn::Set(d, T(c.shrink));
  T* const ptr[4] = {p, m, v, g};
  flat_loop<4, T>(ptr, n, [&](auto, V& pv, V& mv, V& vv, V gv) {
    gv = hn::Add(gv, hn::Mul(l2, pv));
    pv = hn::Mul(pv, shrink);
    mv = hn::Add(hn::Mul(b1, mv), hn::Mul(ob1, gv));
    vv = hn::Add(hn::Mul(b2, vv), hn::Mul(hn::Mul(ob2, gv), gv));
    pv = hn::Sub(pv, hn::Div(hn::Mul(step, mv), hn::Add(hn::Mul(hn::Sqrt(vv), isb), e)));
  });
}

HWY_NOINLINE void MomentumF32(float* p, float* acc, float* g, int64_t n, const MomentumCoeffs& c) {
  momentum<float>(p, acc, g, n, c);
}
HWY_NOINLINE void MomentumF64(double* p, double* acc, double* g, int64_t n,
                              const MomentumCoeffs& c) {
  momentum<double>(p, acc, g, n, c);
}
HWY_NOINLINE void AdamF32(float* p, float* m, float* v, float* g, int64_t n, const AdamCoeffs& c) {
  adam<float>(p, m, v, g, n, c);
}
HWY_NOINLINE void AdamF64(double* p, double* m, double* v, double* g, int64_t n,
                          const AdamCoeffs& c) {
  adam<double>(p, m, v, g, n, c);
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::optim
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/strided.h"
#include "core/parallel.h"
#include "ops/op.h"

namespace spore::cpu {
namespace optim {
HWY_EXPORT(MomentumF32);
HWY_EXPORT(MomentumF64);
HWY_EXPORT(AdamF32);
HWY_EXPORT(AdamF64);
}  // namespace optim

namespace {
using optim::AdamCoeffs;
using optim::MomentumCoeffs;

// Elements per thread below which a parallel region costs more than it saves (the updates move
// 20-28 bytes per element: 16k elements are ~0.4 MB, some tens of microseconds on one core).
constexpr int64_t kGrain = 16384;

// Calls f(p, s1, ..., g) element-wise over N same-shape operands (the first N-1 are written).
template <int N, typename T, typename F>
void update(const Tensor* in, F&& f) {
  std::array<Shape, N> st;
  for (int k = 0; k < N; ++k) st[size_t(k)] = in[k].strides();
  auto it = make_iter<N>(in[0].shape(), st);
  std::array<T*, N> ptr;
  for (int k = 0; k < N; ++k) ptr[size_t(k)] = base<T>(in[k]);
  for_each_row<N>(
      it, [&](const std::array<int64_t, N>& off, int64_t n, const std::array<int64_t, N>& s) {
        std::array<T*, N> p;
        for (int k = 0; k < N; ++k) p[size_t(k)] = ptr[size_t(k)] + off[size_t(k)];
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (N == 3)
            f(p[0][i * s[0]], p[1][i * s[1]], p[2][i * s[2]]);
          else
            f(p[0][i * s[0]], p[1][i * s[1]], p[2][i * s[2]], p[3][i * s[3]]);
        }
      });
}

template <typename F>
void visit_f32_f64(DType t, F&& f) {
  if (t == kFloat64)
    f(double{});
  else
    f(float{});
}

// The per-step scalars of one call: the hyper input's values (k of them, any stride) when
// hyper_input is set, else none (the attributes hold them).
struct Hyper {
  bool present = false;
  bool skip = false;  // gated, and the gate is 0
  size_t size = 0;
  double v[3] = {};
};
// k: the most scalars the op's hyper holds (Momentum's may hold [lr] or [lr, momentum]).
Hyper hyper_of(const ops::KernelContext& ctx, size_t k) {
  Hyper h;
  if (!ctx.attrs.get_bool("hyper_input", false)) return h;
  const Tensor& t = ctx.inputs.back();  // float64 (k[, gate]), checked by the inference rule
  const double* p = base<double>(t);
  const int64_t stride = t.strides()[0];
  size_t n = size_t(t.size(0));
  if (ctx.attrs.get_bool("gated", false)) h.skip = p[int64_t(--n) * stride] == 0;
  h.size = std::min<size_t>(k, n);
  for (size_t i = 0; i < h.size; ++i) h.v[i] = p[int64_t(i) * stride];
  h.present = true;
  return h;
}

MomentumCoeffs momentum_coeffs(const ops::Attrs& a, const Hyper& h) {
  return {h.present ? h.v[0] : a.get_float("lr"), h.size >= 2 ? h.v[1] : a.get_float("momentum"),
          a.get_float("weight_decay", 0.0), a.get_bool("nesterov", false)};
}

AdamCoeffs adam_coeffs(const ops::Attrs& a, const Hyper& h, const char* who) {
  const double lr = h.present ? h.v[0] : a.get_float("lr"), b1 = a.get_float("beta1", 0.9),
               b2 = a.get_float("beta2", 0.999),
               eps = h.present ? h.v[2] : a.get_float("eps", 1e-8),
               wd = a.get_float("weight_decay", 0.0);
  // A double holds every integer step exactly up to 2^53 (and AdamWeightDecay's 2^62).
  const double step = h.present ? h.v[1] : double(a.get_int("step", 1));
  SPORE_CHECK(step >= 1, "[", who, "] step is 1-based, got ", step,
              h.present ? " (hyper input element 1)" : "");
  const bool decoupled = a.get_bool("decoupled", false);
  const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
  // p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps); the scalars are rounded to T by the loops.
  return {lr / bc1,
          1 / std::sqrt(bc2),
          eps,
          b1,
          b2,
          1 - b1,
          1 - b2,
          decoupled ? 0.0 : wd,
          decoupled ? 1 - lr * wd : 1.0};
}

// The contiguous flat loops, by dtype.
template <typename T>
void momentum_flat(T* p, T* acc, T* g, int64_t n, const MomentumCoeffs& c) {
  if constexpr (std::is_same_v<T, float>)
    HWY_DYNAMIC_DISPATCH(optim::MomentumF32)(p, acc, g, n, c);
  else
    HWY_DYNAMIC_DISPATCH(optim::MomentumF64)(p, acc, g, n, c);
}
template <typename T>
void adam_flat(T* p, T* m, T* v, T* g, int64_t n, const AdamCoeffs& c) {
  if constexpr (std::is_same_v<T, float>)
    HWY_DYNAMIC_DISPATCH(optim::AdamF32)(p, m, v, g, n, c);
  else
    HWY_DYNAMIC_DISPATCH(optim::AdamF64)(p, m, v, g, n, c);
}

// The strided fallbacks: the same formulas element by element.
template <typename T>
void momentum_strided(const Tensor* in, const MomentumCoeffs& c) {
  const T l = T(c.lr), m = T(c.momentum), w = T(c.weight_decay);
  if (c.nesterov) {
    update<3, T>(in, [=](T& p, T& acc, T& g0) {
      const T g = g0 + w * p;
      acc = m * acc + g;
      p -= l * (g + m * acc);
    });
  } else {
    update<3, T>(in, [=](T& p, T& acc, T& g0) {
      acc = m * acc + (g0 + w * p);
      p -= l * acc;
    });
  }
}
template <typename T>
void adam_strided(const Tensor* in, const AdamCoeffs& c) {
  const T step_size = T(c.step_size), isb = T(c.inv_sqrt_bc2), e = T(c.eps), beta1 = T(c.beta1),
          beta2 = T(c.beta2), one_b1 = T(c.one_b1), one_b2 = T(c.one_b2), l2 = T(c.l2),
          shrink = T(c.shrink);
  update<4, T>(in, [=](T& p, T& m, T& v, T& g0) {
    const T g = g0 + l2 * p;
    p *= shrink;
    m = beta1 * m + one_b1 * g;
    v = beta2 * v + (one_b2 * g) * g;
    p -= (step_size * m) / (std::sqrt(v) * isb + e);
  });
}

// Runs `groups` updates of N operands each, laid out as ops.def lists them (all params, then all
// first states, ..., then all grads: operand k of group t is inputs[k * groups + t]). The
// contiguous groups' elements are concatenated in thought and split evenly over the threads in
// one parallel region; flat(ptrs, n) updates n elements. Strided groups run one by one after.
template <int N, typename T, typename Flat, typename Strided>
void multi_update(const ops::Tensors& inputs, size_t groups, Flat&& flat, Strided&& strided) {
  auto operand = [&](size_t t, int k) -> const Tensor& { return inputs[size_t(k) * groups + t]; };
  auto contiguous = [&](size_t t) {
    for (int k = 0; k < N; ++k)
      if (!operand(t, k).is_contiguous()) return false;
    return true;
  };
  int64_t total = 0;
  for (size_t t = 0; t < groups; ++t)
    if (contiguous(t)) total += operand(t, 0).numel();
  parallel_for(0, total, kGrain, [&](int64_t b, int64_t e) {
    int64_t start = 0;  // of group t in the concatenation
    for (size_t t = 0; t < groups && start < e; ++t) {
      if (!contiguous(t)) continue;
      const int64_t n = operand(t, 0).numel(), lo = std::max(b, start), hi = std::min(e, start + n);
      if (lo < hi) {
        T* ptr[N];
        for (int k = 0; k < N; ++k) ptr[k] = base<T>(operand(t, k)) + (lo - start);
        flat(ptr, hi - lo);
      }
      start += n;
    }
  });
  for (size_t t = 0; t < groups; ++t) {
    if (contiguous(t)) continue;
    Tensor ins[N];  // the group's operands side by side for the strided loop
    for (int k = 0; k < N; ++k) ins[k] = operand(t, k);
    strided(ins);
  }
}

void apply_momentum_kernel(ops::KernelContext& ctx) {
  const Hyper h = hyper_of(ctx, 2);
  if (h.skip) return;
  const MomentumCoeffs c = momentum_coeffs(ctx.attrs, h);
  visit_f32_f64(ctx.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    multi_update<3, T>(
        ctx.inputs, 1, [&](T* const* p, int64_t n) { momentum_flat<T>(p[0], p[1], p[2], n, c); },
        [&](const Tensor* in) { momentum_strided<T>(in, c); });
  });
}

void fused_apply_momentum_kernel(ops::KernelContext& ctx) {
  const Hyper h = hyper_of(ctx, 2);
  if (h.skip) return;
  const MomentumCoeffs c = momentum_coeffs(ctx.attrs, h);
  const size_t groups = (ctx.inputs.size() - (h.present ? 1 : 0)) / 3;
  visit_f32_f64(ctx.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    multi_update<3, T>(
        ctx.inputs, groups,
        [&](T* const* p, int64_t n) { momentum_flat<T>(p[0], p[1], p[2], n, c); },
        [&](const Tensor* in) { momentum_strided<T>(in, c); });
  });
}

void apply_adam_kernel(ops::KernelContext& ctx) {
  const Hyper h = hyper_of(ctx, 3);
  if (h.skip) return;
  const AdamCoeffs c = adam_coeffs(ctx.attrs, h, "apply_adam");
  visit_f32_f64(ctx.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    multi_update<4, T>(
        ctx.inputs, 1, [&](T* const* p, int64_t n) { adam_flat<T>(p[0], p[1], p[2], p[3], n, c); },
        [&](const Tensor* in) { adam_strided<T>(in, c); });
  });
}

void fused_apply_adam_kernel(ops::KernelContext& ctx) {
  const Hyper h = hyper_of(ctx, 3);
  if (h.skip) return;
  const AdamCoeffs c = adam_coeffs(ctx.attrs, h, "fused_apply_adam");
  const size_t groups = (ctx.inputs.size() - (h.present ? 1 : 0)) / 4;
  visit_f32_f64(ctx.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    multi_update<4, T>(
        ctx.inputs, groups,
        [&](T* const* p, int64_t n) { adam_flat<T>(p[0], p[1], p[2], p[3], n, c); },
        [&](const Tensor* in) { adam_strided<T>(in, c); });
  });
}

void apply_rms_prop_kernel(ops::KernelContext& ctx) {
  const auto& a = ctx.attrs;
  const Hyper h = hyper_of(ctx, 1);
  if (h.skip) return;
  const double lr = h.present ? h.v[0] : a.get_float("lr"), decay = a.get_float("decay", 0.9),
               mo = a.get_float("momentum", 0.0), eps = a.get_float("eps", 1e-10);
  visit_f32_f64(ctx.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T l = T(lr), d = T(decay), one_d = T(1 - decay), m = T(mo), e = T(eps);
    update<4, T>(ctx.inputs.data(), [=](T& p, T& ms, T& mom, T& g) {
      ms = d * ms + one_d * g * g;
      mom = m * mom + l * g / std::sqrt(ms + e);
      p -= mom;
    });
  });
}

}  // namespace

SPORE_KERNEL(CPU, ApplyMomentum, apply_momentum_kernel, kFloat32, kFloat64);
SPORE_KERNEL(CPU, ApplyAdam, apply_adam_kernel, kFloat32, kFloat64);
SPORE_KERNEL(CPU, ApplyRMSProp, apply_rms_prop_kernel, kFloat32, kFloat64);
SPORE_KERNEL(CPU, FusedApplyMomentum, fused_apply_momentum_kernel, kFloat32, kFloat64);
SPORE_KERNEL(CPU, FusedApplyAdam, fused_apply_adam_kernel, kFloat32, kFloat64);

}  // namespace spore::cpu
#endif  // HWY_ONCE
