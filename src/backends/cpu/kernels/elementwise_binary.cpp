// Binary elementwise CPU kernels (arithmetic, comparisons, logical ops) and where(cond, x, y).
// Inputs arrive with one dtype (the op functions promote them) and any broadcast / strides; each
// functor is the scalar definition, the SIMD kind routes float32 rows to elementwise_simd.cpp.
#include <cmath>

#include "backends/cpu/kernels/elementwise.h"

namespace spore::cpu::ew {
namespace {

template <class C>
bool is_nan(C x) {
  if constexpr (std::is_floating_point_v<C>)
    return std::isnan(x);
  else
    return false;
}

template <class TypesT, SimdBinary S = SimdBinary::kNone, bool BoolOut = false>
struct Binary {
  using types = TypesT;
  static constexpr SimdBinary simd = S;
  static constexpr bool bool_out = BoolOut;
};

struct AddF : Binary<AllTypes, SimdBinary::kAdd> {  // bool: logical or (stored as nonzero)
  template <class C>
  C operator()(C a, C b) const {
    return C(a + b);
  }
};
struct SubF : Binary<Numeric, SimdBinary::kSub> {
  template <class C>
  C operator()(C a, C b) const {
    return C(a - b);
  }
};
struct MulF : Binary<AllTypes, SimdBinary::kMul> {  // bool: logical and
  template <class C>
  C operator()(C a, C b) const {
    return C(a * b);
  }
};
struct DivF : Binary<Floats, SimdBinary::kDiv> {
  template <class C>
  C operator()(C a, C b) const {
    return a / b;
  }
};
struct PowF : Binary<Floats> {
  template <class C>
  C operator()(C a, C b) const {
    return std::pow(a, b);
  }
};
struct MaximumF : Binary<AllTypes, SimdBinary::kMax> {  // NaN wins, as numpy
  template <class C>
  C operator()(C a, C b) const {
    return (a > b || is_nan(a)) ? a : b;
  }
};
struct MinimumF : Binary<AllTypes, SimdBinary::kMin> {
  template <class C>
  C operator()(C a, C b) const {
    return (a < b || is_nan(a)) ? a : b;
  }
};
// relu's gradient (g, x) -> x > 0 ? g : 0 in one pass, without a bool mask.
struct ReluGradF : Binary<Floats, SimdBinary::kReluGrad> {
  template <class C>
  C operator()(C g, C x) const {
    return x > C(0) ? g : C(0);
  }
};

#define SPORE_EW_COMPARE(Name, expr)                        \
  struct Name : Binary<AllTypes, SimdBinary::kNone, true> { \
    template <class C>                                      \
    bool operator()(C a, C b) const {                       \
      return expr;                                          \
    }                                                       \
  };
SPORE_EW_COMPARE(EqualF, a == b)
SPORE_EW_COMPARE(NotEqualF, a != b)
SPORE_EW_COMPARE(LessF, a < b)
SPORE_EW_COMPARE(LessEqualF, a <= b)
SPORE_EW_COMPARE(GreaterF, a > b)
SPORE_EW_COMPARE(GreaterEqualF, a >= b)
SPORE_EW_COMPARE(LogicalAndF, (a != C(0)) && (b != C(0)))
SPORE_EW_COMPARE(LogicalOrF, (a != C(0)) || (b != C(0)))
SPORE_EW_COMPARE(LogicalXorF, (a != C(0)) != (b != C(0)))
#undef SPORE_EW_COMPARE

// where(cond, x, y): (out, cond, x, y) over the output shape; dtype from x (cond is bool).
void where_kernel(ops::KernelContext& ctx) {
  const Tensor &cond = ctx.inputs[0], &x = ctx.inputs[1], &y = ctx.inputs[2];
  Tensor& out = ctx.outputs[0];
  const Shape& shape = out.shape();
  visit_types(AllTypes{}, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const bool* pc0 = base<bool>(cond);
    const T* px0 = base<T>(x);
    const T* py0 = base<T>(y);
    T* dst = base<T>(out);
    auto it = make_iter<4>(shape, {out.strides(), broadcast_strides(cond, shape),
                                   broadcast_strides(x, shape), broadcast_strides(y, shape)});
    for_each_row<4>(
        it, [&](const std::array<int64_t, 4>& off, int64_t n, const std::array<int64_t, 4>& st) {
          T* d = dst + off[0];
          const bool* pc = pc0 + off[1];
          const T* px = px0 + off[2];
          const T* py = py0 + off[3];
          if (st[1] == 1 && st[2] == 1 && st[3] == 1) {
            for (int64_t i = 0; i < n; ++i) d[i] = pc[i] ? px[i] : py[i];
          } else if (st[1] == 1 && st[2] == 1 && st[3] == 0) {  // where(mask, g, 0)
            const T vy = py[0];
            for (int64_t i = 0; i < n; ++i) d[i] = pc[i] ? px[i] : vy;
          } else {
            for (int64_t i = 0; i < n; ++i) d[i] = pc[i * st[1]] ? px[i * st[2]] : py[i * st[3]];
          }
        });
  });
}

}  // namespace

SPORE_KERNEL(CPU, Add, binary_kernel<AddF>, SPORE_EW_ALL);
SPORE_KERNEL(CPU, Sub, binary_kernel<SubF>, SPORE_EW_NUMERIC);
SPORE_KERNEL(CPU, Mul, binary_kernel<MulF>, SPORE_EW_ALL);
SPORE_KERNEL(CPU, Div, binary_kernel<DivF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Pow, binary_kernel<PowF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Maximum, binary_kernel<MaximumF>, SPORE_EW_ALL);
SPORE_KERNEL(CPU, Minimum, binary_kernel<MinimumF>, SPORE_EW_ALL);
SPORE_KERNEL(CPU, Equal, binary_kernel<EqualF>, SPORE_EW_ALL);
SPORE_KERNEL(CPU, NotEqual, binary_kernel<NotEqualF>, SPORE_EW_ALL);
SPORE_KERNEL(CPU, Less, binary_kernel<LessF>, SPORE_EW_ALL);
SPORE_KERNEL(CPU, LessEqual, binary_kernel<LessEqualF>, SPORE_EW_ALL);
SPORE_KERNEL(CPU, Greater, binary_kernel<GreaterF>, SPORE_EW_ALL);
SPORE_KERNEL(CPU, GreaterEqual, binary_kernel<GreaterEqualF>, SPORE_EW_ALL);
SPORE_KERNEL(CPU, LogicalAnd, binary_kernel<LogicalAndF>, SPORE_EW_ALL);
SPORE_KERNEL(CPU, LogicalOr, binary_kernel<LogicalOrF>, SPORE_EW_ALL);
SPORE_KERNEL(CPU, LogicalXor, binary_kernel<LogicalXorF>, SPORE_EW_ALL);
SPORE_KERNEL(CPU, ReluGrad, binary_kernel<ReluGradF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Where, where_kernel, SPORE_EW_ALL);  // keyed on cond (bool); x's dtype is free

}  // namespace spore::cpu::ew
