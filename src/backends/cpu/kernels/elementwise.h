// Private to the elementwise CPU kernels: dtype lists, the strided loop templates every unary /
// binary op shares, and the entry points of the Highway (SIMD, run-time dispatched) float32 paths.
//
// An op is a small functor: `types` (the dtypes it accepts), `simd` (its SIMD kind, or kNone),
// `bool_out` (comparisons / logical ops), an optional constructor from the op's Attrs and
// `C operator()(C...)` on the compute type (float for float16/bfloat16, int for bool). To add an
// op: write the functor in elementwise_unary.cpp / elementwise_binary.cpp and one SPORE_KERNEL
// line; for a SIMD path add an enum value here and a case in elementwise_simd.cpp.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/kernels/half_convert.h"
#include "backends/cpu/strided.h"
#include "ops/op.h"

namespace spore::cpu::ew {

// ---- dtype lists (keep each type list and its SPORE_EW_* dtype macro in step) -----------------
template <class... Ts>
struct Types {};
using Floats = Types<float, double, Half, BFloat16>;
using Signed = Types<float, double, Half, BFloat16, int8_t, int32_t, int64_t>;
using Numeric = Types<float, double, Half, BFloat16, uint8_t, int8_t, int32_t, int64_t>;
using AllTypes = Types<float, double, Half, BFloat16, uint8_t, int8_t, int32_t, int64_t, bool>;
#define SPORE_EW_FLOATS kFloat32, kFloat64, kFloat16, kBFloat16
#define SPORE_EW_SIGNED SPORE_EW_FLOATS, kInt8, kInt32, kInt64
#define SPORE_EW_NUMERIC SPORE_EW_SIGNED, kUInt8
#define SPORE_EW_ALL SPORE_EW_NUMERIC, kBool

// Calls f(T{}) for the T of `t` among the list; the dispatcher has already checked the dtype.
template <class... Ts, class F>
void visit_types(Types<Ts...>, DType t, F&& f) {
  const bool done = ((dtype_of_v<Ts> == t ? (f(Ts{}), true) : false) || ...);
  SPORE_ASSERT(done, "elementwise kernel called with unsupported dtype ", dtype_name(t));
}

// Arithmetic type: 16-bit floats compute in float; bool in int (a + b then stored as nonzero).
template <class T>
struct ComputeOf {
  using type = T;
};
template <>
struct ComputeOf<Half> {
  using type = float;
};
template <>
struct ComputeOf<BFloat16> {
  using type = float;
};
template <>
struct ComputeOf<bool> {
  using type = int;
};
template <class T>
using compute_t = typename ComputeOf<T>::type;
using ::spore::cpu::is_half_v;

// ---- SIMD float32 entry points (elementwise_simd.cpp) -------------------------------------------
enum class SimdUnary : uint8_t {
  kNone,
  kNeg,
  kAbs,
  kRelu,
  kLeakyRelu,
  kClamp,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kSin,
  kCos,
  kTanh,
  kSigmoid,
  kSilu,
  kGeluTanh,
  kFloor,
  kCeil,
  kRound,
  kSign,
};
enum class SimdBinary : uint8_t { kNone, kAdd, kSub, kMul, kDiv, kMax, kMin, kReluGrad };
struct UnaryParams {
  float a = 0, b = 0;  // leaky_relu: a = alpha; clamp: [a, b]
};
// y[i] = f(x[i]) over n contiguous floats (x may equal y).
void simd_unary_f32(SimdUnary op, const float* x, float* y, int64_t n, UnaryParams p);
// d[i] = f(a[i * sa], b[i * sb]) with sa, sb each 0 (a broadcast scalar) or 1.
void simd_binary_f32(SimdBinary op, const float* a, int64_t sa, const float* b, int64_t sb,
                     float* d, int64_t n);

// Loads m 16-bit floats (stride s) into a float buffer / stores them back; contiguous rows use the
// vectorised conversions.
template <class T>
inline void load_f32(const T* src, int64_t s, float* buf, int64_t m) {
  if (s == 1) return to_f32(src, buf, m);
  for (int64_t j = 0; j < m; ++j) buf[j] = float(src[j * s]);
}
template <class T>
inline void store_f32(const float* buf, T* dst, int64_t m) {
  from_f32(buf, dst, m);
}

// ---- loops --------------------------------------------------------------------------------------
// float16/bfloat16 rows (and strided float32 rows of unary ops) go through float buffers this long.
inline constexpr int64_t kChunk = 256;

template <class Op>
Op make_op(const ops::Attrs& attrs) {
  if constexpr (std::is_constructible_v<Op, const ops::Attrs&>)
    return Op(attrs);
  else
    return Op{};
}

template <class Op>
void unary_kernel(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& y = ctx.outputs[0];
  const Op op = make_op<Op>(ctx.attrs);
  visit_types(typename Op::types{}, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    using Out = std::conditional_t<Op::bool_out, bool, T>;
    const T* src = base<T>(x);
    Out* dst = base<Out>(y);
    auto it = make_iter<2>(y.shape(), {y.strides(), x.strides()});
    for_each_row<2>(
        it,
        [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
          Out* d = dst + off[0];
          const T* s = src + off[1];
          const int64_t ss = st[1];
          if constexpr (Op::simd != SimdUnary::kNone && !Op::bool_out) {
            if constexpr (std::is_same_v<T, float>) {
              if (ss == 1) return simd_unary_f32(Op::simd, s, d, n, op.params());
              // A strided row (a permuted view: YOLOv5's detect head takes the sigmoid of its
              // conv output transposed) is gathered into a buffer so that it still runs the SIMD
              // function, not the scalar one per element (5x slower there).
              float buf[kChunk];
              for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
                const int64_t m = std::min(kChunk, n - i0);
                for (int64_t j = 0; j < m; ++j) buf[j] = s[(i0 + j) * ss];
                simd_unary_f32(Op::simd, buf, d + i0, m, op.params());
              }
              return;
            } else if constexpr (is_half_v<T>) {
              float buf[kChunk];
              for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
                const int64_t m = std::min(kChunk, n - i0);
                load_f32(s + i0 * ss, ss, buf, m);
                simd_unary_f32(Op::simd, buf, buf, m, op.params());
                store_f32(buf, d + i0, m);
              }
              return;
            }
          }
          if (ss == 1) {
            for (int64_t i = 0; i < n; ++i) d[i] = Out(op(C(s[i])));
          } else {
            for (int64_t i = 0; i < n; ++i) d[i] = Out(op(C(s[i * ss])));
          }
        },
        16384);
  });
}

template <class Op>
void binary_kernel(ops::KernelContext& ctx) {
  const Tensor &a = ctx.inputs[0], &b = ctx.inputs[1];
  Tensor& y = ctx.outputs[0];
  const Op op = make_op<Op>(ctx.attrs);
  visit_types(typename Op::types{}, a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    using Out = std::conditional_t<Op::bool_out, bool, T>;
    const T* pa0 = base<T>(a);
    const T* pb0 = base<T>(b);
    Out* dst = base<Out>(y);
    // (out, a, b) over the output shape; a broadcast operand has stride 0 there.
    auto it = make_iter<3>(
        y.shape(), {y.strides(), broadcast_strides(a, y.shape()), broadcast_strides(b, y.shape())});
    for_each_row<3>(
        it, [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
          Out* d = dst + off[0];
          const T* pa = pa0 + off[1];
          const T* pb = pb0 + off[2];
          const int64_t sa = st[1], sb = st[2];
          if constexpr (Op::simd != SimdBinary::kNone && !Op::bool_out) {
            if constexpr (std::is_same_v<T, float>) {
              if (sa <= 1 && sb <= 1) return simd_binary_f32(Op::simd, pa, sa, pb, sb, d, n);
            } else if constexpr (is_half_v<T>) {
              float ba[kChunk], bb[kChunk], bo[kChunk];
              for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
                const int64_t m = std::min(kChunk, n - i0);
                // A broadcast operand (stride 0) is one value: load it once.
                const int64_t ma = sa == 0 ? 1 : m, mb = sb == 0 ? 1 : m;
                load_f32(pa + i0 * sa, sa == 0 ? 1 : sa, ba, ma);
                load_f32(pb + i0 * sb, sb == 0 ? 1 : sb, bb, mb);
                simd_binary_f32(Op::simd, ba, sa == 0 ? 0 : 1, bb, sb == 0 ? 0 : 1, bo, m);
                store_f32(bo, d + i0, m);
              }
              return;
            }
          }
          // Plain loops; the common stride patterns are split out so the compiler vectorises them.
          if (sa == 1 && sb == 1) {
            for (int64_t i = 0; i < n; ++i) d[i] = Out(op(C(pa[i]), C(pb[i])));
          } else if (sa == 1 && sb == 0) {
            const C vb = C(pb[0]);
            for (int64_t i = 0; i < n; ++i) d[i] = Out(op(C(pa[i]), vb));
          } else if (sa == 0 && sb == 1) {
            const C va = C(pa[0]);
            for (int64_t i = 0; i < n; ++i) d[i] = Out(op(va, C(pb[i])));
          } else {
            for (int64_t i = 0; i < n; ++i) d[i] = Out(op(C(pa[i * sa]), C(pb[i * sb])));
          }
        });
  });
}

}  // namespace spore::cpu::ew
