// Highway exp / sigmoid / silu for any float32 vector tag, shared by the elementwise kernels
// (elementwise_simd.cpp) and the convolution epilogues (conv_packed.cpp, conv_winograd.cpp), so a
// fused silu gives the same values as the standalone op. Highway's Exp is 1-2 ulp but valid only
// below expf's overflow: the lanes above and NaN are fixed up to match libm.
// Per-target include guard (Highway's -inl.h convention): include after hwy/highway.h, outside
// any namespace, in a file that foreach_target.h re-includes per target.
#if defined(SPORE_CPU_SIMD_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SPORE_CPU_SIMD_MATH_INL_H_
#undef SPORE_CPU_SIMD_MATH_INL_H_
#else
#define SPORE_CPU_SIMD_MATH_INL_H_
#endif

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace spore::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D, class V = hn::Vec<D>>
HWY_INLINE V exp_f(D d, V x) {
  const V kMax = hn::Set(d, 88.72283935546875f);  // above this expf overflows to inf
  V y = hn::Exp(d, hn::Min(x, kMax));
  y = hn::IfThenElse(hn::Gt(x, kMax), hn::Inf(d), y);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// 1 / (1 + exp(-x)); exp(-x) saturates to inf for very negative x, giving 0 as it should.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V sigmoid_f(D d, V x) {
  const V one = hn::Set(d, 1.0f);
  return hn::Div(one, hn::Add(one, exp_f(d, hn::Neg(x))));
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V silu_f(D d, V x) {
  return hn::Mul(x, sigmoid_f(d, x));
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::simd
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
