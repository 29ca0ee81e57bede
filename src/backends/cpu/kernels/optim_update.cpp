// Optimizer updates on the CPU, in place, one pass over each parameter (float32 / float64):
//   ApplyMomentum (MindSpore): g += wd * p; acc = momentum * acc + g;
//                              p -= lr * acc, or with nesterov p -= lr * (g + momentum * acc)
//   ApplyAdam:   g += wd * p (or, decoupled = AdamW, p -= lr * wd * p first);
//                m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
//                p -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps)     (step 1-based)
//   ApplyRMSProp: ms = decay ms + (1 - decay) g^2; mom = momentum mom + lr g / sqrt(ms + eps);
//                p -= mom
// Operands may be strided (StridedIter); the contiguous case is one flat loop the compiler
// vectorises.
#include <cmath>

#include "backends/cpu/strided.h"
#include "ops/op.h"

namespace spore::cpu {
namespace {

// Calls f(p, s1, ..., g) element-wise over N same-shape operands (the first N-1 are written).
template <int N, typename T, typename F>
void update(const ops::Tensors& in, F&& f) {
  std::array<Shape, N> st;
  for (int k = 0; k < N; ++k) st[size_t(k)] = in[size_t(k)].strides();
  auto it = make_iter<N>(in[0].shape(), st);
  std::array<T*, N> ptr;
  for (int k = 0; k < N; ++k) ptr[size_t(k)] = base<T>(in[size_t(k)]);
  for_each_row<N>(it, [&](const std::array<int64_t, N>& off, int64_t n, const std::array<int64_t, N>& s) {
    std::array<T*, N> p;
    bool unit = true;
    for (int k = 0; k < N; ++k) {
      p[size_t(k)] = ptr[size_t(k)] + off[size_t(k)];
      unit = unit && s[size_t(k)] == 1;
    }
    if (unit) {
      if constexpr (N == 3) {
        T *a = p[0], *b = p[1], *c = p[2];
        for (int64_t i = 0; i < n; ++i) f(a[i], b[i], c[i]);
      } else {
        T *a = p[0], *b = p[1], *c = p[2], *d = p[3];
        for (int64_t i = 0; i < n; ++i) f(a[i], b[i], c[i], d[i]);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (N == 3) f(p[0][i * s[0]], p[1][i * s[1]], p[2][i * s[2]]);
        else f(p[0][i * s[0]], p[1][i * s[1]], p[2][i * s[2]], p[3][i * s[3]]);
      }
    }
  });
}

template <typename F>
void visit_f32_f64(DType t, F&& f) {
  if (t == kFloat64) f(double{});
  else f(float{});
}

void apply_momentum_kernel(ops::KernelContext& ctx) {
  const auto& a = ctx.attrs;
  const double lr = a.get_float("lr"), mom = a.get_float("momentum"), wd = a.get_float("weight_decay", 0.0);
  const bool nesterov = a.get_bool("nesterov", false);
  visit_f32_f64(ctx.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T l = T(lr), m = T(mom), w = T(wd);
    if (nesterov) {
      update<3, T>(ctx.inputs, [=](T& p, T& acc, T& g0) {
        const T g = g0 + w * p;
        acc = m * acc + g;
        p -= l * (g + m * acc);
      });
    } else {
      update<3, T>(ctx.inputs, [=](T& p, T& acc, T& g0) {
        acc = m * acc + (g0 + w * p);
        p -= l * acc;
      });
    }
  });
}

void apply_adam_kernel(ops::KernelContext& ctx) {
  const auto& a = ctx.attrs;
  const double lr = a.get_float("lr"), b1 = a.get_float("beta1", 0.9), b2 = a.get_float("beta2", 0.999),
               eps = a.get_float("eps", 1e-8), wd = a.get_float("weight_decay", 0.0);
  const int64_t step = a.get_int("step", 1);
  SPORE_CHECK(step >= 1, "[apply_adam] step is 1-based, got ", step);
  const bool decoupled = a.get_bool("decoupled", false);
  const double bc1 = 1 - std::pow(b1, double(step)), bc2 = 1 - std::pow(b2, double(step));
  visit_f32_f64(ctx.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    // p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
    const T step_size = T(lr / bc1), inv_sqrt_bc2 = T(1 / std::sqrt(bc2)), e = T(eps), beta1 = T(b1),
            beta2 = T(b2), one_b1 = T(1 - b1), one_b2 = T(1 - b2);
    const T l2 = decoupled ? T(0) : T(wd), shrink = decoupled ? T(1 - lr * wd) : T(1);
    update<4, T>(ctx.inputs, [=](T& p, T& m, T& v, T& g0) {
      const T g = g0 + l2 * p;
      p *= shrink;
      m = beta1 * m + one_b1 * g;
      v = beta2 * v + one_b2 * g * g;
      p -= step_size * m / (std::sqrt(v) * inv_sqrt_bc2 + e);
    });
  });
}

void apply_rms_prop_kernel(ops::KernelContext& ctx) {
  const auto& a = ctx.attrs;
  const double lr = a.get_float("lr"), decay = a.get_float("decay", 0.9), mo = a.get_float("momentum", 0.0),
               eps = a.get_float("eps", 1e-10);
  visit_f32_f64(ctx.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T l = T(lr), d = T(decay), one_d = T(1 - decay), m = T(mo), e = T(eps);
    update<4, T>(ctx.inputs, [=](T& p, T& ms, T& mom, T& g) {
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

}  // namespace spore::cpu
