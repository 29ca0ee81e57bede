// Helpers shared by the nn kernels (nn_*.cpp): contiguous copies without autograd history, the
// float32 fallback for half types oneDNN cannot run on this CPU, and per-dtype accumulators.
#pragma once
#include <vector>

#include "backends/cpu/kernels/half_convert.h"
#include "ops/op.h"
#include "spore/grad_mode.h"

namespace spore::cpu {

// Kernels see raw tensors: their copies must never land on the autograd tape.
inline Tensor dense(const Tensor& t) {
  if (t.is_contiguous()) return t;
  NoGradGuard ng;
  return t.contiguous();
}
inline Tensor dense_as(const Tensor& t, DType d) {
  if (t.dtype() == d) return dense(t);
  NoGradGuard ng;
  return dense(t.to(d));
}

// Copies contiguous src into contiguous dst of the same shape, converting the element type.
inline void convert_into(const Tensor& src, Tensor& dst) {
  if (fast_half_cast(src, dst)) return;  // float32 -> float16/bfloat16: SIMD, multithreaded
  const int64_t n = src.numel();
  visit_dtype(dst.dtype(), [&](auto dtag) {
    using D = decltype(dtag);
    visit_dtype(src.dtype(), [&](auto stag) {
      using S = decltype(stag);
      const S* s = static_cast<const S*>(src.data_ptr());
      D* d = static_cast<D*>(dst.data_ptr());
      if constexpr (std::is_same_v<D, bool>) {
        for (int64_t i = 0; i < n; ++i) d[i] = float(s[i]) != 0.0f;
      } else {
        for (int64_t i = 0; i < n; ++i) d[i] = D(float(s[i]));
      }
    });
  });
}

// Runs a float32 kernel on float32 copies of the floating inputs and converts the floating
// outputs back to their dtypes.
inline void run_via_f32(ops::KernelContext& ctx, void (*f32_kernel)(ops::KernelContext&)) {
  ops::Tensors in, out;
  for (const Tensor& t : ctx.inputs)
    in.push_back(is_floating(t.dtype()) && t.dtype() != kFloat64 ? dense_as(t, kFloat32) : t);
  for (const Tensor& t : ctx.outputs)
    out.push_back(
        is_floating(t.dtype()) && t.dtype() != kFloat64 ? Tensor::empty(t.shape(), kFloat32) : t);
  ops::KernelContext c32{ctx.def, in, out, ctx.attrs};
  f32_kernel(c32);
  for (size_t i = 0; i < out.size(); ++i)
    if (!out[i].is_same(ctx.outputs[i])) convert_into(out[i], ctx.outputs[i]);
}

// Arithmetic type of element type T: double for double, float otherwise.
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// The values of a small per-channel tensor as doubles (gamma, beta, running stats).
inline std::vector<double> small_values(const Tensor& t) {
  NoGradGuard ng;
  return t.to_vector<double>();
}

}  // namespace spore::cpu
