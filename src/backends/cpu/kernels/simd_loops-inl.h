// Highway loops shared by the float32 elementwise kernels (elementwise_simd.cpp) and the fused
// elementwise interpreter (fused_elementwise.cpp): a vector functor over a row, with strides 0 /
// 1 and the tail through a padded buffer, so the two paths give bit-identical results.
// Per-target include guard (Highway's -inl.h convention): include after hwy/highway.h, outside
// any namespace, in a file that foreach_target.h re-includes per target.
#if defined(SPORE_CPU_SIMD_LOOPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SPORE_CPU_SIMD_LOOPS_INL_H_
#undef SPORE_CPU_SIMD_LOOPS_INL_H_
#else
#define SPORE_CPU_SIMD_LOOPS_INL_H_
#endif

#include <cstdint>
#include <cstring>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace spore::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// y = f(x) over whole vectors, then the tail through a padded buffer (so f sees full vectors).
template <class F>
HWY_INLINE void unary_loop(const float* x, float* y, int64_t n, F f) {
  const hn::ScalableTag<float> d;
  const int64_t L = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(f(d, hn::LoadU(d, x + i)), d, y + i);
  if (i < n) {
    HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)] = {};
    std::memcpy(buf, x + i, size_t(n - i) * sizeof(float));
    hn::Store(f(d, hn::Load(d, buf)), d, buf);
    std::memcpy(y + i, buf, size_t(n - i) * sizeof(float));
  }
}

template <class F>
HWY_INLINE void binary_loop(const float* a, int64_t sa, const float* b, int64_t sb, float* out,
                            int64_t n, F f) {
  const hn::ScalableTag<float> d;
  const int64_t L = int64_t(hn::Lanes(d));
  int64_t i = 0;
  if (sa == 1 && sb == 1) {
    for (; i + L <= n; i += L)
      hn::StoreU(f(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
  } else if (sa == 1) {
    const auto vb = hn::Set(d, b[0]);
    for (; i + L <= n; i += L) hn::StoreU(f(d, hn::LoadU(d, a + i), vb), d, out + i);
  } else if (sb == 1) {
    const auto va = hn::Set(d, a[0]);
    for (; i + L <= n; i += L) hn::StoreU(f(d, va, hn::LoadU(d, b + i)), d, out + i);
  } else {
    const float r = hn::GetLane(f(d, hn::Set(d, a[0]), hn::Set(d, b[0])));
    for (; i < n; ++i) out[i] = r;
  }
  if (i < n) {
    HWY_ALIGN float ba[HWY_MAX_BYTES / sizeof(float)] = {};
    HWY_ALIGN float bb[HWY_MAX_BYTES / sizeof(float)] = {};
    for (int64_t j = i; j < n; ++j) {
      ba[j - i] = a[j * sa];
      bb[j - i] = b[j * sb];
    }
    hn::Store(f(d, hn::Load(d, ba), hn::Load(d, bb)), d, ba);
    std::memcpy(out + i, ba, size_t(n - i) * sizeof(float));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::simd
HWY_AFTER_NAMESPACE();

#endif  // SPORE_CPU_SIMD_LOOPS_INL_H_
