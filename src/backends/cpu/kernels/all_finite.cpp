// AllFinite on the CPU: one pass over every input, true when no element is inf or nan (loss-scale
// overflow detection over all gradients at once). A float is non-finite exactly when its exponent
// bits are all ones, so the test runs on the raw bits: one And + Eq per lane, the same code for
// float16, bfloat16, float32 and float64 (uint16/32/64 lanes), vectorised with Highway (run-time
// dispatch) and split across threads in blocks that stop early once an inf/nan is seen.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/all_finite.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

#include <atomic>

#include "backends/cpu/kernels/nn_util.h"
#include "core/parallel.h"

HWY_BEFORE_NAMESPACE();
namespace spore::cpu::finite {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Whether any of p[0, n) has (bits & mask) == mask.
template <typename U>
HWY_INLINE bool any_all_ones(const U* p, int64_t n, U mask) {
  const hn::ScalableTag<U> d;
  const int64_t L = int64_t(hn::Lanes(d));
  const auto m = hn::Set(d, mask);
  auto acc = hn::Zero(d);
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {  // four independent And/Eq per iteration
    const auto a = hn::Eq(hn::And(hn::LoadU(d, p + i), m), m);
    const auto b = hn::Eq(hn::And(hn::LoadU(d, p + i + L), m), m);
    const auto c = hn::Eq(hn::And(hn::LoadU(d, p + i + 2 * L), m), m);
    const auto e = hn::Eq(hn::And(hn::LoadU(d, p + i + 3 * L), m), m);
    acc = hn::Or(acc, hn::VecFromMask(d, hn::Or(hn::Or(a, b), hn::Or(c, e))));
  }
  for (; i + L <= n; i += L)
    acc = hn::Or(acc, hn::VecFromMask(d, hn::Eq(hn::And(hn::LoadU(d, p + i), m), m)));
  bool bad = !hn::AllTrue(d, hn::Eq(acc, hn::Zero(d)));
  for (; i < n; ++i) bad |= (p[i] & mask) == mask;
  return bad;
}

HWY_NOINLINE bool AnyNonFinite16(const uint16_t* p, int64_t n, uint16_t mask) {
  return any_all_ones(p, n, mask);
}
HWY_NOINLINE bool AnyNonFinite32(const uint32_t* p, int64_t n, uint32_t mask) {
  return any_all_ones(p, n, mask);
}
HWY_NOINLINE bool AnyNonFinite64(const uint64_t* p, int64_t n, uint64_t mask) {
  return any_all_ones(p, n, mask);
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::finite
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace spore::cpu {
namespace finite {
HWY_EXPORT(AnyNonFinite16);
HWY_EXPORT(AnyNonFinite32);
HWY_EXPORT(AnyNonFinite64);
}  // namespace finite
namespace {

// Exponent masks: a value is inf/nan iff all of these bits are set.
constexpr uint16_t kHalfExp = 0x7C00, kBf16Exp = 0x7F80;
constexpr uint32_t kF32Exp = 0x7F800000u;
constexpr uint64_t kF64Exp = 0x7FF0000000000000ull;

bool any_nonfinite(const void* p, DType t, int64_t n) {
  switch (t) {
    case kFloat16:
      return HWY_DYNAMIC_DISPATCH(finite::AnyNonFinite16)(static_cast<const uint16_t*>(p), n,
                                                          kHalfExp);
    case kBFloat16:
      return HWY_DYNAMIC_DISPATCH(finite::AnyNonFinite16)(static_cast<const uint16_t*>(p), n,
                                                          kBf16Exp);
    case kFloat32:
      return HWY_DYNAMIC_DISPATCH(finite::AnyNonFinite32)(static_cast<const uint32_t*>(p), n,
                                                          kF32Exp);
    case kFloat64:
      return HWY_DYNAMIC_DISPATCH(finite::AnyNonFinite64)(static_cast<const uint64_t*>(p), n,
                                                          kF64Exp);
    default:
      return false;  // integers and bool are always finite
  }
}

void all_finite_kernel(ops::KernelContext& ctx) {
  constexpr int64_t kBlock = 1 << 16;  // elements per task; also the early-exit granularity
  // (input, first element, count) blocks over all float inputs, so many small gradients and one
  // large one spread over the threads alike.
  struct Block {
    const char* p;
    DType t;
    int64_t n;
  };
  std::vector<Tensor> keep;  // contiguous copies of strided inputs
  std::vector<Block> blocks;
  for (const Tensor& x : ctx.inputs) {
    if (!is_floating(x.dtype()) || x.numel() == 0) continue;
    keep.push_back(dense(x));
    const Tensor& c = keep.back();
    const char* base = static_cast<const char*>(c.data_ptr());
    const size_t es = itemsize(c.dtype());
    for (int64_t b = 0; b < c.numel(); b += kBlock)
      blocks.push_back({base + size_t(b) * es, c.dtype(), std::min(kBlock, c.numel() - b)});
  }
  std::atomic<bool> bad{false};
  parallel_for(0, int64_t(blocks.size()), 4, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1 && !bad.load(std::memory_order_relaxed); ++b)
      if (any_nonfinite(blocks[size_t(b)].p, blocks[size_t(b)].t, blocks[size_t(b)].n))
        bad.store(true, std::memory_order_relaxed);
  });
  *ctx.outputs[0].data<bool>() = !bad.load();
}

}  // namespace

SPORE_KERNEL(CPU, AllFinite, all_finite_kernel, kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16,
             kBFloat16, kFloat32, kFloat64);

}  // namespace spore::cpu
#endif
