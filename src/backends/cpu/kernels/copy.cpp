// Copy (strided -> contiguous) and Cast (any dtype -> any dtype) on the CPU.
#include <algorithm>
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

// A permuted copy whose destination rows are strided in the source while another source dim is
// contiguous (a transpose: a detector head's (.., 85, H*W) -> (.., H*W, 85)) goes through 32x32
// tiles, so that both sides touch whole cache lines; the row loop would read every element of a
// row from a different line. False when the copy is not of that kind.
template <typename T>
bool transpose_copy(const Tensor& src, Tensor& dst) {
  const auto it = make_iter<2>(dst.shape(), {dst.strides(), src.strides()});
  const int a = it.ndim - 1;  // the destination's inner dim
  if (it.ndim < 2 || it.strides[0][a] != 1 || it.strides[1][a] == 1) return false;
  int b = -1;  // the source's contiguous dim
  for (int k = 0; k < a; ++k)
    if (it.strides[1][k] == 1) b = k;
  if (b < 0) return false;
  constexpr int64_t kTile = 32;
  const int64_t A = it.sizes[a], B = it.sizes[b], ta = (A + kTile - 1) / kTile,
                tb = (B + kTile - 1) / kTile, outer = it.numel / (A * B);
  const int64_t dst_b = it.strides[0][b], src_a = it.strides[1][a];
  T* d = base<T>(dst);
  const T* s = base<T>(src);
  parallel_for(0, outer * tb * ta, 32, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t r = t / (tb * ta), od = 0, os = 0;  // unravel the outer index over the other dims
      for (int k = it.ndim - 1; k >= 0; --k) {
        if (k == a || k == b) continue;
        const int64_t i = r % it.sizes[k];
        r /= it.sizes[k];
        od += i * it.strides[0][k];
        os += i * it.strides[1][k];
      }
      const int64_t i0 = (t % (tb * ta)) / ta * kTile, j0 = t % ta * kTile;
      const int64_t i1 = std::min(B, i0 + kTile), j1 = std::min(A, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i) {
        T* dp = d + od + i * dst_b;
        const T* sp = s + os + i;
        for (int64_t j = j0; j < j1; ++j) dp[j] = sp[j * src_a];
      }
    }
  });
  return true;
}

void copy_kernel(ops::KernelContext& ctx) {
  const Tensor& src = ctx.inputs[0];
  visit_dtype(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (src.numel() >= 4096 && transpose_copy<T>(src, ctx.outputs[0])) return;
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
