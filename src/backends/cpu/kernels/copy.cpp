// Copy (strided -> contiguous) and Cast (any dtype -> any dtype) on the CPU.
#include <cstring>

#include "backends/cpu/kernels/half_convert.h"
#include "backends/cpu/strided.h"
#include "ops/op.h"

namespace spore::cpu {
namespace {

template <typename Dst, typename Src>
void convert_rows(const Tensor& src, Tensor& dst) {
  auto it = make_iter<2>(dst.shape(), {dst.strides(), src.strides()});
  Dst* d = base<Dst>(dst);
  const Src* s = base<Src>(src);
  for_each_row<2>(
      it, [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
        Dst* dp = d + off[0];
        const Src* sp = s + off[1];
        if constexpr (std::is_same_v<Dst, Src>) {
          if (st[1] == 1) {
            std::memcpy(dp, sp, size_t(n) * sizeof(Dst));
            return;
          }
        }
        if constexpr (std::is_same_v<Dst, bool>) {
          for (int64_t i = 0; i < n; ++i) dp[i] = float(sp[i * st[1]]) != 0.0f;
        } else if constexpr (std::is_same_v<Src, Half> || std::is_same_v<Src, BFloat16> ||
                             std::is_same_v<Dst, Half> || std::is_same_v<Dst, BFloat16>) {
          for (int64_t i = 0; i < n; ++i) dp[i] = Dst(float(sp[i * st[1]]));
        } else {
          for (int64_t i = 0; i < n; ++i) dp[i] = static_cast<Dst>(sp[i * st[1]]);
        }
      });
}

void copy_kernel(ops::KernelContext& ctx) {
  const Tensor& src = ctx.inputs[0];
  visit_dtype(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    convert_rows<T, T>(src, ctx.outputs[0]);
  });
}

void cast_kernel(ops::KernelContext& ctx) {
  const Tensor& src = ctx.inputs[0];
  Tensor& dst = ctx.outputs[0];
  if (fast_half_cast(src, dst)) return;  // amp's float32 <-> 16-bit casts: SIMD, multithreaded
  visit_dtype(dst.dtype(), [&](auto dtag) {
    visit_dtype(src.dtype(),
                [&](auto stag) { convert_rows<decltype(dtag), decltype(stag)>(src, dst); });
  });
}

}  // namespace

#define SPORE_ALL_DTYPES \
  kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64
SPORE_KERNEL(CPU, Copy, copy_kernel, SPORE_ALL_DTYPES);
SPORE_KERNEL(CPU, Cast, cast_kernel, SPORE_ALL_DTYPES);

}  // namespace spore::cpu
