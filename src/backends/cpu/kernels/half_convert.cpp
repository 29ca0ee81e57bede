// float32 <-> float16 / bfloat16 conversion loops (half_convert.h), Highway with run-time
// dispatch: float16 through F16C/AVX-512 conversions (hardware round to nearest even), bfloat16
// with integer lanes (round to nearest even by adding 0x7fff + the kept lsb; NaN made quiet).
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/half_convert.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

#include "backends/cpu/kernels/half_convert.h"

#include "core/parallel.h"

HWY_BEFORE_NAMESPACE();
namespace spore::cpu::halfcvt {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using DH = hn::Rebind<hwy::float16_t, DF>;
using DU16 = hn::Rebind<uint16_t, DF>;

HWY_NOINLINE void F32ToF16(const float* src, uint16_t* dst, int64_t n) {
  const DF df;
  const DH dh;
  const int64_t L = int64_t(hn::Lanes(df));
  auto* d = reinterpret_cast<hwy::float16_t*>(dst);
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, src + i)), dh, d + i);
  for (; i < n; ++i) dst[i] = Half(src[i]).bits;
}

HWY_NOINLINE void F16ToF32(const uint16_t* src, float* dst, int64_t n) {
  const DF df;
  const DH dh;
  const int64_t L = int64_t(hn::Lanes(df));
  const auto* s = reinterpret_cast<const hwy::float16_t*>(src);
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, s + i)), df, dst + i);
  for (; i < n; ++i) {
    Half h;
    h.bits = src[i];
    dst[i] = float(h);
  }
}

HWY_NOINLINE void F32ToBF16(const float* src, uint16_t* dst, int64_t n) {
  const DF df;
  const DU du;
  const DU16 d16;
  const int64_t L = int64_t(hn::Lanes(df));
  const auto k7fff = hn::Set(du, 0x7fffu), one = hn::Set(du, 1u), quiet = hn::Set(du, 0x40u);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const auto v = hn::LoadU(df, src + i);
    const auto u = hn::BitCast(du, v);
    const auto rounded =
        hn::ShiftRight<16>(hn::Add(u, hn::Add(k7fff, hn::And(hn::ShiftRight<16>(u), one))));
    const auto nan = hn::Or(hn::ShiftRight<16>(u), quiet);
    const auto r = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), nan, rounded);
    // Values < 2^16, non-negative as int32: the saturating demotion is exact.
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(DI(), r)), d16, dst + i);
  }
  for (; i < n; ++i) dst[i] = BFloat16(src[i]).bits;
}

HWY_NOINLINE void BF16ToF32(const uint16_t* src, float* dst, int64_t n) {
  const DF df;
  const DU du;
  const DU16 d16;
  const int64_t L = int64_t(hn::Lanes(df));
  int64_t i = 0;
  for (; i + L <= n; i += L)
    hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, src + i)))), df,
               dst + i);
  for (; i < n; ++i) {
    BFloat16 b;
    b.bits = src[i];
    dst[i] = float(b);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::halfcvt
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace spore::cpu {
namespace halfcvt {
HWY_EXPORT(F32ToF16);
HWY_EXPORT(F16ToF32);
HWY_EXPORT(F32ToBF16);
HWY_EXPORT(BF16ToF32);
}  // namespace halfcvt

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2,
              "16-bit float types hold only their bits");
void to_f32(const Half* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(halfcvt::F16ToF32)(reinterpret_cast<const uint16_t*>(src), dst, n);
}
void to_f32(const BFloat16* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(halfcvt::BF16ToF32)(reinterpret_cast<const uint16_t*>(src), dst, n);
}
void from_f32(const float* src, Half* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(halfcvt::F32ToF16)(src, reinterpret_cast<uint16_t*>(dst), n);
}
void from_f32(const float* src, BFloat16* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(halfcvt::F32ToBF16)(src, reinterpret_cast<uint16_t*>(dst), n);
}

bool fast_half_cast(const Tensor& src, Tensor& dst) {
  const DType s = src.dtype(), d = dst.dtype();
  const bool to_half = s == kFloat32 && (d == kFloat16 || d == kBFloat16);
  const bool from_half = d == kFloat32 && (s == kFloat16 || s == kBFloat16);
  if (!(to_half || from_half) || !src.is_contiguous() || !dst.is_contiguous()) return false;
  const int64_t n = src.numel();
  constexpr int64_t kGrain = 1 << 15;  // elements per thread at least (a few microseconds)
  parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    if (to_half) {
      const float* sp = static_cast<const float*>(src.data_ptr()) + b;
      uint16_t* dp = static_cast<uint16_t*>(dst.data_ptr()) + b;
      if (d == kFloat16)
        HWY_DYNAMIC_DISPATCH(halfcvt::F32ToF16)(sp, dp, e - b);
      else
        HWY_DYNAMIC_DISPATCH(halfcvt::F32ToBF16)(sp, dp, e - b);
    } else {
      const uint16_t* sp = static_cast<const uint16_t*>(src.data_ptr()) + b;
      float* dp = static_cast<float*>(dst.data_ptr()) + b;
      if (s == kFloat16)
        HWY_DYNAMIC_DISPATCH(halfcvt::F16ToF32)(sp, dp, e - b);
      else
        HWY_DYNAMIC_DISPATCH(halfcvt::BF16ToF32)(sp, dp, e - b);
    }
  });
  return true;
}

}  // namespace spore::cpu
#endif
