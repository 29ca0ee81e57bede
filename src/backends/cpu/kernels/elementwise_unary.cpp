// Unary elementwise CPU kernels: one functor per op (the scalar definition, which also serves the
// float64 / integer / strided cases) plus its SIMD kind for the float32 / 16-bit float fast path.
// The loop itself (strided iteration, threads, SIMD hand-off) is unary_kernel in elementwise.h.
#include <cmath>
#include <limits>

#include "backends/cpu/kernels/elementwise.h"

namespace spore::cpu::ew {
namespace {

template <class TypesT, SimdUnary S = SimdUnary::kNone, bool BoolOut = false>
struct Unary {
  using types = TypesT;
  static constexpr SimdUnary simd = S;
  static constexpr bool bool_out = BoolOut;
  UnaryParams params() const { return {}; }
};

struct NegF : Unary<Signed, SimdUnary::kNeg> {
  template <class C>
  C operator()(C x) const {
    return C(-x);
  }
};
struct AbsF : Unary<Numeric, SimdUnary::kAbs> {
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>)
      return std::fabs(x);
    else if constexpr (std::is_unsigned_v<C>)
      return x;
    else
      return x < 0 ? C(-x) : x;
  }
};
struct ReluF : Unary<Numeric, SimdUnary::kRelu> {
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>)
      return x;
    else
      return x < C(0) ? C(0) : x;  // NaN passes through
  }
};
struct LeakyReluF : Unary<Floats, SimdUnary::kLeakyRelu> {
  double alpha;
  explicit LeakyReluF(const ops::Attrs& a) : alpha(a.get_float("alpha", 0.01)) {}
  UnaryParams params() const { return {float(alpha), 0}; }
  template <class C>
  C operator()(C x) const {
    return x < C(0) ? C(x * C(alpha)) : x;
  }
};
struct ClampF : Unary<Numeric, SimdUnary::kClamp> {
  bool has_lo, has_hi;
  double lo, hi;
  explicit ClampF(const ops::Attrs& a)
      : has_lo(a.has("min")),
        has_hi(a.has("max")),
        lo(a.get_float("min", 0)),
        hi(a.get_float("max", 0)) {}
  UnaryParams params() const {
    constexpr float inf = std::numeric_limits<float>::infinity();
    return {has_lo ? float(lo) : -inf, has_hi ? float(hi) : inf};
  }
  // Compared in double, so out-of-range bounds (clamp(uint8, -1, 300)) never convert.
  template <class C>
  C operator()(C x) const {
    if (has_lo && double(x) < lo) x = C(lo);
    if (has_hi && double(x) > hi) x = C(hi);
    return x;
  }
};
struct ExpF : Unary<Floats, SimdUnary::kExp> {
  template <class C>
  C operator()(C x) const {
    return std::exp(x);
  }
};
struct LogF : Unary<Floats, SimdUnary::kLog> {
  template <class C>
  C operator()(C x) const {
    return std::log(x);
  }
};
struct SqrtF : Unary<Floats, SimdUnary::kSqrt> {
  template <class C>
  C operator()(C x) const {
    return std::sqrt(x);
  }
};
struct RsqrtF : Unary<Floats, SimdUnary::kRsqrt> {
  template <class C>
  C operator()(C x) const {
    return C(1) / std::sqrt(x);
  }
};
struct SinF : Unary<Floats, SimdUnary::kSin> {
  template <class C>
  C operator()(C x) const {
    return std::sin(x);
  }
};
struct CosF : Unary<Floats, SimdUnary::kCos> {
  template <class C>
  C operator()(C x) const {
    return std::cos(x);
  }
};
struct TanhF : Unary<Floats, SimdUnary::kTanh> {
  template <class C>
  C operator()(C x) const {
    return std::tanh(x);
  }
};
struct SigmoidF : Unary<Floats, SimdUnary::kSigmoid> {
  template <class C>
  C operator()(C x) const {
    return C(1) / (C(1) + std::exp(-x));
  }
};
struct SiluF : Unary<Floats, SimdUnary::kSilu> {
  template <class C>
  C operator()(C x) const {
    return x / (C(1) + std::exp(-x));
  }
};
struct GeluErfF : Unary<Floats> {  // 0.5 x (1 + erf(x / sqrt 2))
  template <class C>
  C operator()(C x) const {
    return C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440)));
  }
};
struct GeluTanhF : Unary<Floats, SimdUnary::kGeluTanh> {
  template <class C>
  C operator()(C x) const {
    const C u = C(0.79788456080286535588) * (x + C(0.044715) * x * x * x);
    return C(0.5) * x * (C(1) + std::tanh(u));
  }
};
struct SoftplusF : Unary<Floats> {  // log(1 + exp(beta x)) / beta, linear above the threshold
  double beta, threshold;
  explicit SoftplusF(const ops::Attrs& a)
      : beta(a.get_float("beta", 1)), threshold(a.get_float("threshold", 20)) {}
  template <class C>
  C operator()(C x) const {
    const C bx = C(beta) * x;
    return bx > C(threshold) ? x : C(std::log1p(std::exp(bx)) / C(beta));
  }
};
struct ErfF : Unary<Floats> {
  template <class C>
  C operator()(C x) const {
    return std::erf(x);
  }
};
struct FloorF : Unary<Floats, SimdUnary::kFloor> {
  template <class C>
  C operator()(C x) const {
    return std::floor(x);
  }
};
struct CeilF : Unary<Floats, SimdUnary::kCeil> {
  template <class C>
  C operator()(C x) const {
    return std::ceil(x);
  }
};
struct RoundF : Unary<Floats, SimdUnary::kRound> {  // the default rounding mode: half to even
  template <class C>
  C operator()(C x) const {
    return std::nearbyint(x);
  }
};
struct SignF : Unary<Numeric, SimdUnary::kSign> {  // NaN and -0 pass through
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>)
      return C(x > 0);
    else
      return x > C(0) ? C(1) : x < C(0) ? C(-1) : x;
  }
};
struct LogicalNotF : Unary<AllTypes, SimdUnary::kNone, true> {
  template <class C>
  bool operator()(C x) const {
    return x == C(0);
  }
};

void gelu_kernel(ops::KernelContext& ctx) {
  if (ctx.attrs.get_bool("approximate", false))
    unary_kernel<GeluTanhF>(ctx);
  else
    unary_kernel<GeluErfF>(ctx);
}

}  // namespace

SPORE_KERNEL(CPU, Neg, unary_kernel<NegF>, SPORE_EW_SIGNED);
SPORE_KERNEL(CPU, Abs, unary_kernel<AbsF>, SPORE_EW_NUMERIC);
SPORE_KERNEL(CPU, Relu, unary_kernel<ReluF>, SPORE_EW_NUMERIC);
SPORE_KERNEL(CPU, LeakyRelu, unary_kernel<LeakyReluF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Clamp, unary_kernel<ClampF>, SPORE_EW_NUMERIC);
SPORE_KERNEL(CPU, Exp, unary_kernel<ExpF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Log, unary_kernel<LogF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Sqrt, unary_kernel<SqrtF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Rsqrt, unary_kernel<RsqrtF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Sin, unary_kernel<SinF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Cos, unary_kernel<CosF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Tanh, unary_kernel<TanhF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Sigmoid, unary_kernel<SigmoidF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Silu, unary_kernel<SiluF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Gelu, gelu_kernel, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Softplus, unary_kernel<SoftplusF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Erf, unary_kernel<ErfF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Floor, unary_kernel<FloorF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Ceil, unary_kernel<CeilF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Round, unary_kernel<RoundF>, SPORE_EW_FLOATS);
SPORE_KERNEL(CPU, Sign, unary_kernel<SignF>, SPORE_EW_NUMERIC);
SPORE_KERNEL(CPU, LogicalNot, unary_kernel<LogicalNotF>, SPORE_EW_ALL);

}  // namespace spore::cpu::ew
