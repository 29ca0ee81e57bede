// Highway (SIMD) float32 paths of the elementwise kernels, compiled once per x86 target (SSE4,
// AVX2, AVX-512...) by foreach_target.h; HWY_DYNAMIC_DISPATCH picks the best one at run time.
// Highway's Exp/Log/Sin/Cos/Tanh are 1-4 ulp but only valid on part of the range, so each is
// wrapped with fix-ups for the lanes outside it (NaN, +-inf, 0, large arguments), matching libm.
// To add an op: an enum value in elementwise.h and a case in UnaryF32 / BinaryF32 below.
// foreach_target.h must come first: it re-includes this file once per target.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/elementwise_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
// clang-format on

#include <cmath>
#include <cstring>

#include "backends/cpu/kernels/elementwise.h"

#include "backends/cpu/kernels/simd_loops-inl.h"
#include "backends/cpu/kernels/simd_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace spore::cpu::ew {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;
using simd::HWY_NAMESPACE::binary_loop;
using simd::HWY_NAMESPACE::exp_f;
using simd::HWY_NAMESPACE::sigmoid_f;
using simd::HWY_NAMESPACE::silu_f;
using simd::HWY_NAMESPACE::unary_loop;

HWY_INLINE V log_f(D d, V x) {
  const V zero = hn::Zero(d), inf = hn::Inf(d);
  const auto ok = hn::And(hn::Gt(x, zero), hn::Lt(x, inf));
  const V special = hn::IfThenElse(hn::Eq(x, zero), hn::Neg(inf),
                                   hn::IfThenElse(hn::Eq(x, inf), inf, hn::NaN(d)));
  return hn::IfThenElse(ok, hn::Log(d, hn::IfThenElse(ok, x, hn::Set(d, 1.0f))), special);
}

HWY_INLINE V tanh_f(D d, V x) { return hn::IfThenElse(hn::IsNaN(x), x, hn::Tanh(d, x)); }

// Sin/Cos are accurate only for |x| <= 39000: lanes beyond go through libm.
template <bool kSin>
HWY_INLINE V sincos_f(D d, V x) {
  V y = kSin ? hn::Sin(d, x) : hn::Cos(d, x);
  const auto big = hn::Not(hn::Le(hn::Abs(x), hn::Set(d, 39000.0f)));  // also NaN / inf
  if (HWY_UNLIKELY(!hn::AllFalse(d, big))) {
    HWY_ALIGN float bx[HWY_MAX_BYTES / sizeof(float)], by[HWY_MAX_BYTES / sizeof(float)];
    hn::Store(x, d, bx);
    hn::Store(y, d, by);
    for (size_t j = 0; j < hn::Lanes(d); ++j)
      if (!(std::fabs(bx[j]) <= 39000.0f)) by[j] = kSin ? std::sin(bx[j]) : std::cos(bx[j]);
    y = hn::Load(d, by);
  }
  return y;
}

HWY_NOINLINE void UnaryF32(SimdUnary op, const float* x, float* y, int64_t n, UnaryParams p) {
  switch (op) {
    case SimdUnary::kNeg:
      return unary_loop(x, y, n, [](D, V v) { return hn::Neg(v); });
    case SimdUnary::kAbs:
      return unary_loop(x, y, n, [](D, V v) { return hn::Abs(v); });
    case SimdUnary::kRelu:  // x < 0 ? 0 : x keeps NaN
      return unary_loop(x, y, n,
                        [](D d, V v) { return hn::IfThenZeroElse(hn::Lt(v, hn::Zero(d)), v); });
    case SimdUnary::kLeakyRelu:
      return unary_loop(x, y, n, [a = p.a](D d, V v) {
        return hn::IfThenElse(hn::Lt(v, hn::Zero(d)), hn::Mul(v, hn::Set(d, a)), v);
      });
    case SimdUnary::kClamp:  // compares rather than Min/Max so NaN passes through
      return unary_loop(x, y, n, [lo = p.a, hi = p.b](D d, V v) {
        const V vlo = hn::Set(d, lo), vhi = hn::Set(d, hi);
        v = hn::IfThenElse(hn::Lt(v, vlo), vlo, v);
        return hn::IfThenElse(hn::Gt(v, vhi), vhi, v);
      });
    case SimdUnary::kExp:
      return unary_loop(x, y, n, [](D d, V v) { return exp_f(d, v); });
    case SimdUnary::kLog:
      return unary_loop(x, y, n, [](D d, V v) { return log_f(d, v); });
    case SimdUnary::kSqrt:
      return unary_loop(x, y, n, [](D, V v) { return hn::Sqrt(v); });
    case SimdUnary::kRsqrt:  // exact division: the approximate rsqrt is only ~12 bits
      return unary_loop(x, y, n, [](D d, V v) { return hn::Div(hn::Set(d, 1.0f), hn::Sqrt(v)); });
    case SimdUnary::kSin:
      return unary_loop(x, y, n, [](D d, V v) { return sincos_f<true>(d, v); });
    case SimdUnary::kCos:
      return unary_loop(x, y, n, [](D d, V v) { return sincos_f<false>(d, v); });
    case SimdUnary::kTanh:
      return unary_loop(x, y, n, [](D d, V v) { return tanh_f(d, v); });
    case SimdUnary::kSigmoid:
      return unary_loop(x, y, n, [](D d, V v) { return sigmoid_f(d, v); });
    case SimdUnary::kSilu:
      return unary_loop(x, y, n, [](D d, V v) { return silu_f(d, v); });
    case SimdUnary::kGeluTanh:  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      return unary_loop(x, y, n, [](D d, V v) {
        const V k = hn::Set(d, 0.7978845608028654f), c = hn::Set(d, 0.044715f);
        const V u = hn::Mul(k, hn::MulAdd(hn::Mul(c, hn::Mul(v, v)), v, v));
        const V half_v = hn::Mul(hn::Set(d, 0.5f), v);
        return hn::MulAdd(half_v, tanh_f(d, u), half_v);
      });
    case SimdUnary::kFloor:
      return unary_loop(x, y, n, [](D, V v) { return hn::Floor(v); });
    case SimdUnary::kCeil:
      return unary_loop(x, y, n, [](D, V v) { return hn::Ceil(v); });
    case SimdUnary::kRound:
      return unary_loop(x, y, n, [](D, V v) { return hn::Round(v); });  // ties to even
    case SimdUnary::kSign:  // (x > 0) - (x < 0), NaN and -0 pass through
      return unary_loop(x, y, n, [](D d, V v) {
        const V zero = hn::Zero(d);
        v = hn::IfThenElse(hn::Gt(v, zero), hn::Set(d, 1.0f), v);
        return hn::IfThenElse(hn::Lt(v, zero), hn::Set(d, -1.0f), v);
      });
    case SimdUnary::kNone:
      break;
  }
  SPORE_ASSERT(false, "unknown SIMD unary op ", int(op));
}

HWY_NOINLINE void BinaryF32(SimdBinary op, const float* a, int64_t sa, const float* b, int64_t sb,
                            float* out, int64_t n) {
  switch (op) {
    case SimdBinary::kAdd:
      return binary_loop(a, sa, b, sb, out, n, [](D, V x, V y) { return hn::Add(x, y); });
    case SimdBinary::kSub:
      return binary_loop(a, sa, b, sb, out, n, [](D, V x, V y) { return hn::Sub(x, y); });
    case SimdBinary::kMul:
      return binary_loop(a, sa, b, sb, out, n, [](D, V x, V y) { return hn::Mul(x, y); });
    case SimdBinary::kDiv:
      return binary_loop(a, sa, b, sb, out, n, [](D, V x, V y) { return hn::Div(x, y); });
    case SimdBinary::kMax:  // NaN in either input gives NaN, as numpy
      return binary_loop(a, sa, b, sb, out, n, [](D, V x, V y) {
        return hn::IfThenElse(hn::Or(hn::Gt(x, y), hn::IsNaN(x)), x, y);
      });
    case SimdBinary::kMin:
      return binary_loop(a, sa, b, sb, out, n, [](D, V x, V y) {
        return hn::IfThenElse(hn::Or(hn::Lt(x, y), hn::IsNaN(x)), x, y);
      });
    case SimdBinary::kReluGrad:  // (g, x): g where x > 0; a NaN x gives 0, as the comparison
      return binary_loop(a, sa, b, sb, out, n, [](D d, V g, V x) {
        return hn::IfThenElseZero(hn::Gt(x, hn::Zero(d)), g);
      });
    case SimdBinary::kNone:
      break;
  }
  SPORE_ASSERT(false, "unknown SIMD binary op ", int(op));
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::ew
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace spore::cpu::ew {
HWY_EXPORT(UnaryF32);
HWY_EXPORT(BinaryF32);

void simd_unary_f32(SimdUnary op, const float* x, float* y, int64_t n, UnaryParams p) {
  HWY_DYNAMIC_DISPATCH(UnaryF32)(op, x, y, n, p);
}
void simd_binary_f32(SimdBinary op, const float* a, int64_t sa, const float* b, int64_t sb,
                     float* d, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinaryF32)(op, a, sa, b, sb, d, n);
}
}  // namespace spore::cpu::ew
#endif
