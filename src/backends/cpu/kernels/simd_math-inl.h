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

#include "backends/cpu/kernels/conv_epilogue.h"
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

// exp(x) for x in [ln(FLT_MIN), 0], the range sigmoid needs: 2^n * p(r) with n = round(x / ln 2)
// in [-126, 0] and |r| <= ln(2) / 2 (Highway's polynomial and two-part ln 2), without Exp's
// range checks and two-step scaling. 1-2 ulp.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V exp_nonpositive_f(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504088896341f)));
  V r = hn::MulAdd(n, hn::Set(d, -0.693145751953125f), x);
  r = hn::MulAdd(n, hn::Set(d, -1.428606765330187045e-6f), r);
  V p = hn::Set(d, 0.000198527617612853646278381f);
  p = hn::MulAdd(p, r, hn::Set(d, 0.00139304355252534151077271f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.00833336077630519866943359f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.0416664853692054748535156f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.166666671633720397949219f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.5f));
  p = hn::Add(hn::MulAdd(p, hn::Mul(r, r), r), hn::Set(d, 1.0f));
  const auto biased = hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127));  // 2^n, n >= -126: normal
  return hn::Mul(p, hn::BitCast(d, hn::ShiftLeft<23>(biased)));
}

// 1 / (1 + exp(-x)) from e = exp(-|x|), which never overflows: 1 / (1 + e) for x >= 0,
// e / (1 + e) below. Below ln(FLT_MIN) the result is 0 (libm gives a subnormal there). NaN lanes
// come out as a number: sigmoid_f puts them back, silu_f's product keeps them. About 3 ulp.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V sigmoid_no_nan_f(D d, V x) {
  const V one = hn::Set(d, 1.0f), lowest = hn::Set(d, -87.33654475f);  // ln(FLT_MIN)
  const V e = exp_nonpositive_f(d, hn::Max(hn::Neg(hn::Abs(x)), lowest));
  const V r = hn::Div(one, hn::Add(one, e));
  const V s = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Mul(e, r), r);
  return hn::IfThenZeroElse(hn::Lt(x, lowest), s);
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V sigmoid_f(D d, V x) {
  return hn::IfThenElse(hn::IsNaN(x), x, sigmoid_no_nan_f(d, x));
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V silu_f(D d, V x) {
  return hn::Mul(x, sigmoid_no_nan_f(d, x));
}

// The constant-weight convolutions' epilogue after the bias (conv_packed.cpp, conv_winograd.cpp):
// + the residual at `at` when there is one, the activation, stored at y + at.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void conv_finish_f(D d, V o, const float* HWY_RESTRICT res, ConvAct act,
                              float* HWY_RESTRICT y, int64_t at) {
  if (res) o = hn::Add(o, hn::LoadU(d, res + at));
  if (act == ConvAct::kRelu)
    o = hn::Max(o, hn::Zero(d));
  else if (act == ConvAct::kSilu)
    o = silu_f(d, o);
  else if (act == ConvAct::kSigmoid)
    o = sigmoid_f(d, o);
  hn::StoreU(o, d, y + at);
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::simd
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
