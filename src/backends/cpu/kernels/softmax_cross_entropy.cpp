// CPU kernel of SoftmaxCrossEntropyFused: per row of logits z (N, C), with m = max z and
// s = sum exp(z - m): loss = (m + log s) - z[label] and dlogits = exp(z - m) / s - onehot(label).
// One exp pass per row, written straight into dlogits; float32 rows contiguous in z use the
// elementwise kernels' SIMD exp (the log_softmax kernel's approach, so the loss equals the
// unfused log_softmax -> gather -> neg bit for bit), other dtypes / strides compute in float
// (double for float64). Rows run in parallel.
#include <cmath>

#include "backends/cpu/kernels/elementwise.h"  // simd_unary_f32
#include "backends/cpu/strided.h"
#include "ops/op.h"

namespace spore::cpu {
namespace {

template <class L>
int64_t label_at(const L* labels, int64_t stride, int64_t r, int64_t classes) {
  const int64_t y = int64_t(labels[r * stride]);
  SPORE_CHECK_INDEX(y >= 0 && y < classes, "[softmax_cross_entropy_fused] label ", y, " of row ", r,
                    " is out of range for ", classes, " classes; labels must be in [0, ", classes,
                    ")");
  return y;
}

// loss of one float32 row contiguous in z; dl (contiguous) gets the softmax - onehot.
float row_f32(const float* z, float* dl, int64_t c, int64_t y) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < c; ++i) m = std::max(m, z[i]);
  if (std::isinf(m) && m < 0) m = 0;  // all -inf: nan as the unfused ops
#pragma omp simd
  for (int64_t i = 0; i < c; ++i) dl[i] = z[i] - m;
  ew::simd_unary_f32(ew::SimdUnary::kExp, dl, dl, c, {});
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < c; ++i) s += dl[i];
  const float inv = 1.0f / s;
#pragma omp simd
  for (int64_t i = 0; i < c; ++i) dl[i] *= inv;
  dl[y] -= 1.0f;
  return (m + std::log(s)) - z[y];
}

template <class T, class L>
void run(const Tensor& z, const Tensor& labels, Tensor& loss, Tensor& dlogits) {
  using A = float_calc_t<T>;
  const int64_t n = z.size(0), c = z.size(1);
  const int64_t s0 = z.strides()[0], s1 = z.strides()[1], sl = labels.strides()[0];
  const T* zp = base<T>(z);
  const L* lp = base<L>(labels);
  T* lo = base<T>(loss);
  T* dp = base<T>(dlogits);  // contiguous (N, C)
  // Checked before the parallel region: an exception must not leave an OpenMP thread.
  for (int64_t r = 0; r < n; ++r) label_at(lp, sl, r, c);
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(c, 1));
  parallel_for(0, n, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t y = int64_t(lp[r * sl]);
      const T* zr = zp + r * s0;
      T* dr = dp + r * c;
      if constexpr (std::is_same_v<T, float>) {
        if (s1 == 1) {
          lo[r] = row_f32(zr, dr, c, y);
          continue;
        }
      }
      A m = -INFINITY;
      for (int64_t i = 0; i < c; ++i) m = std::max(m, A(zr[i * s1]));
      if (std::isinf(m) && m < 0) m = 0;
      A s = 0;
      for (int64_t i = 0; i < c; ++i) s += std::exp(A(zr[i * s1]) - m);
      const A inv = A(1) / s;
      for (int64_t i = 0; i < c; ++i)
        dr[i] = T(std::exp(A(zr[i * s1]) - m) * inv - (i == y ? A(1) : A(0)));
      lo[r] = T((m + std::log(s)) - A(zr[y * s1]));
    }
  });
}

void softmax_cross_entropy_fused_kernel(ops::KernelContext& ctx) {
  const Tensor &z = ctx.inputs[0], &labels = ctx.inputs[1];
  Tensor &loss = ctx.outputs[0], &dlogits = ctx.outputs[1];
  if (z.numel() == 0) return;
  visit_dtype(z.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
      if (labels.dtype() == kInt32)
        run<T, int32_t>(z, labels, loss, dlogits);
      else
        run<T, int64_t>(z, labels, loss, dlogits);
    }
  });
}

}  // namespace

SPORE_KERNEL(CPU, SoftmaxCrossEntropyFused, softmax_cross_entropy_fused_kernel, kFloat32, kFloat64,
             kFloat16, kBFloat16);

}  // namespace spore::cpu
