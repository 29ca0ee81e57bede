// Elementwise primitives (unary, binary, where): inference and gradient rules (written with ops, so
// they run in both modes), and the public functions of spore/ops.h's "elementwise" section, which
// apply the dtype rules before calling the primitive:
//   - binary ops promote both inputs with promote_types(); kernels see one dtype;
//   - a double scalar becomes a 0-d tensor of the tensor's dtype, except that an integer / bool
//     tensor with a non-integer scalar gives float32 (and bool with an integer scalar, int64);
//   - div and pow of integers, and transcendental unary ops on integers, compute in float32;
//   - comparisons and logical ops return bool (logical ops: nonzero is true).
// To add an op: a row in ops.def, SPORE_DEFINE_OP here, a kernel in backends/cpu/kernels/
// elementwise_*.cpp, a row in tests/ops/elementwise_cases.cpp.
#include <cmath>

#include "ops/op.h"
#include "spore/grad_mode.h"
#include "spore/ops.h"

namespace spore::ops {
namespace {

// ---- inference ---------------------------------------------------------------------------------
Metas same_meta(const Metas& in, const Attrs&) { return {in[0]}; }

Metas float_meta(const Metas& in, const Attrs&) {
  SPORE_CHECK_TYPE(is_floating(in[0].dtype), "expected a floating-point input, got ",
                   dtype_name(in[0].dtype));
  return {in[0]};
}

Metas bool_unary_meta(const Metas& in, const Attrs&) { return {{in[0].shape, kBool}}; }

void check_same_dtype(const Metas& in) {
  SPORE_CHECK_TYPE(in[0].dtype == in[1].dtype, "inputs must share one dtype (the op functions ",
                   "promote them), got ", dtype_name(in[0].dtype), " and ",
                   dtype_name(in[1].dtype));
}

Metas binary_meta(const Metas& in, const Attrs&) {
  check_same_dtype(in);
  return {{broadcast_shapes(in[0].shape, in[1].shape), in[0].dtype}};
}

Metas float_binary_meta(const Metas& in, const Attrs& a) {
  SPORE_CHECK_TYPE(is_floating(in[0].dtype), "expected floating-point inputs, got ",
                   dtype_name(in[0].dtype));
  return binary_meta(in, a);
}

Metas compare_meta(const Metas& in, const Attrs&) {
  check_same_dtype(in);
  return {{broadcast_shapes(in[0].shape, in[1].shape), kBool}};
}

// ---- gradient helpers ---------------------------------------------------------------------------
Tensor zero_of(const Tensor& like) { return scalar_tensor(0, like.dtype()); }
Tensor scalar_of(double v, const Tensor& like) { return scalar_tensor(v, like.dtype()); }

// The forward output for a gradient rule. Saved outputs carry no history, so when the backward
// pass is itself recorded (create_graph: higher-order gradients) the output is recomputed.
Tensor saved_out(const VjpContext& c, Tensor (*recompute)(const Tensor&)) {
  return is_grad_enabled() ? recompute(c.in(0)) : c.out(0);
}

Tensors zero_grad(const VjpContext& c) { return {zeros_like(c.g())}; }

constexpr double kSqrtHalf = 0.70710678118654752440;       // 1 / sqrt(2)
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;  // 2 / sqrt(pi): erf' scale
constexpr double kInvSqrt2Pi = 0.39894228040143267794;     // 1 / sqrt(2 pi): the normal pdf's scale

}  // namespace

// ---- unary --------------------------------------------------------------------------------------
SPORE_DEFINE_OP(Neg, {.infer = same_meta,
                      .vjp = [](const VjpContext& c) -> Tensors { return {neg(c.g())}; }});
SPORE_DEFINE_OP(Abs, {.infer = same_meta, .vjp = [](const VjpContext& c) -> Tensors {
                        return {c.g() * sign(c.in(0))};
                      }});
SPORE_DEFINE_OP(Exp, {.infer = float_meta, .vjp = [](const VjpContext& c) -> Tensors {
                        return {c.g() * saved_out(c, spore::exp)};
                      }});
SPORE_DEFINE_OP(Log, {.infer = float_meta,
                      .vjp = [](const VjpContext& c) -> Tensors { return {c.g() / c.in(0)}; }});
SPORE_DEFINE_OP(Sqrt, {.infer = float_meta, .vjp = [](const VjpContext& c) -> Tensors {
                         return {c.g() * 0.5 / saved_out(c, spore::sqrt)};
                       }});
SPORE_DEFINE_OP(Rsqrt, {.infer = float_meta, .vjp = [](const VjpContext& c) -> Tensors {
                          // d/dx x^(-1/2) = -0.5 x^(-1/2) / x
                          return {c.g() * saved_out(c, spore::rsqrt) / c.in(0) * -0.5};
                        }});
SPORE_DEFINE_OP(Sin, {.infer = float_meta, .vjp = [](const VjpContext& c) -> Tensors {
                        return {c.g() * cos(c.in(0))};
                      }});
SPORE_DEFINE_OP(Cos, {.infer = float_meta, .vjp = [](const VjpContext& c) -> Tensors {
                        return {neg(c.g() * sin(c.in(0)))};
                      }});
SPORE_DEFINE_OP(Tanh, {.infer = float_meta, .vjp = [](const VjpContext& c) -> Tensors {
                         const Tensor y = saved_out(c, spore::tanh);
                         return {c.g() * (1.0 - y * y)};
                       }});
SPORE_DEFINE_OP(Sigmoid, {.infer = float_meta, .vjp = [](const VjpContext& c) -> Tensors {
                            const Tensor y = saved_out(c, spore::sigmoid);
                            return {c.g() * y * (1.0 - y)};
                          }});
SPORE_DEFINE_OP(Relu, {.infer = same_meta, .vjp = [](const VjpContext& c) -> Tensors {
                         const Tensor &x = c.in(0), &g = c.g();
                         // One fused pass (no bool mask) when the dtypes agree, as they do for
                         // float inputs; the composite otherwise.
                         if (g.dtype() == x.dtype() && is_floating(x.dtype()))
                           return {call1(OpId::ReluGrad, {g, x})};
                         return {where(greater(x, zero_of(x)), g, zero_of(g))};
                       }});
SPORE_DEFINE_OP(LeakyRelu,
                {.infer = float_meta, .vjp = [](const VjpContext& c) -> Tensors {
                   const double alpha = c.attrs.get_float("alpha", 0.01);
                   return {where(greater(c.in(0), zero_of(c.in(0))), c.g(), c.g() * alpha)};
                 }});
SPORE_DEFINE_OP(Silu, {.infer = float_meta, .vjp = [](const VjpContext& c) -> Tensors {
                         // d/dx x s(x) = s (1 + x (1 - s))
                         const Tensor& x = c.in(0);
                         const Tensor s = sigmoid(x);
                         return {c.g() * s * (1.0 + x * (1.0 - s))};
                       }});
SPORE_DEFINE_OP(Gelu, {.infer = float_meta, .vjp = [](const VjpContext& c) -> Tensors {
                         const Tensor& x = c.in(0);
                         if (c.attrs.get_bool("approximate", false)) {
                           // y = 0.5 x (1 + t), t = tanh(k (x + a x^3))
                           constexpr double k = 0.79788456080286535588, a = 0.044715;
                           const Tensor x2 = x * x;
                           const Tensor t = tanh(k * (x + a * x2 * x));
                           const Tensor dt = (1.0 - t * t) * (k * (1.0 + 3 * a * x2));
                           return {c.g() * (0.5 * (1.0 + t) + 0.5 * x * dt)};
                         }
                         // y = x Phi(x): dy/dx = Phi(x) + x phi(x)
                         const Tensor cdf = 0.5 * (1.0 + erf(x * kSqrtHalf));
                         const Tensor pdf = exp(x * x * -0.5) * kInvSqrt2Pi;
                         return {c.g() * (cdf + x * pdf)};
                       }});
SPORE_DEFINE_OP(Softplus, {.infer = float_meta, .vjp = [](const VjpContext& c) -> Tensors {
                             const double beta = c.attrs.get_float("beta", 1);
                             const double threshold = c.attrs.get_float("threshold", 20);
                             const Tensor bx = c.in(0) * beta;
                             return {where(greater(bx, scalar_of(threshold, bx)), c.g(),
                                           c.g() * sigmoid(bx))};
                           }});
SPORE_DEFINE_OP(Clamp, {.infer = same_meta, .vjp = [](const VjpContext& c) -> Tensors {
                          // The gradient passes where min <= x <= max.
                          const Tensor& x = c.in(0);
                          Tensor mask;
                          if (c.attrs.has("min"))
                            mask = greater_equal(x, scalar_of(c.attrs.get_float("min"), x));
                          if (c.attrs.has("max")) {
                            Tensor m = less_equal(x, scalar_of(c.attrs.get_float("max"), x));
                            mask = mask.defined() ? logical_and(mask, m) : m;
                          }
                          if (!mask.defined()) return {c.g()};
                          return {where(mask, c.g(), zero_of(c.g()))};
                        }});
SPORE_DEFINE_OP(Floor, {.infer = float_meta, .vjp = zero_grad});
SPORE_DEFINE_OP(Ceil, {.infer = float_meta, .vjp = zero_grad});
SPORE_DEFINE_OP(Round, {.infer = float_meta, .vjp = zero_grad});
SPORE_DEFINE_OP(Sign, {.infer = same_meta, .vjp = zero_grad});
SPORE_DEFINE_OP(Erf, {.infer = float_meta, .vjp = [](const VjpContext& c) -> Tensors {
                        const Tensor& x = c.in(0);
                        return {c.g() * exp(neg(x * x)) * kTwoOverSqrtPi};
                      }});
SPORE_DEFINE_OP(LogicalNot, {.infer = bool_unary_meta});

// ---- binary -------------------------------------------------------------------------------------
SPORE_DEFINE_OP(Add, {.infer = binary_meta, .vjp = [](const VjpContext& c) -> Tensors {
                        return {c.g(), c.g()};
                      }});
SPORE_DEFINE_OP(Sub, {.infer = binary_meta, .vjp = [](const VjpContext& c) -> Tensors {
                        return {c.g(), c.needs(1) ? neg(c.g()) : Tensor()};
                      }});
SPORE_DEFINE_OP(
    Mul,
    {.infer = binary_meta, .vjp = [](const VjpContext& c) -> Tensors {
       return {c.needs(0) ? c.g() * c.in(1) : Tensor(), c.needs(1) ? c.g() * c.in(0) : Tensor()};
     }});
SPORE_DEFINE_OP(Div, {.infer = float_binary_meta, .vjp = [](const VjpContext& c) -> Tensors {
                        // d(a/b)/db = -(a/b) / b
                        const Tensor ga = c.g() / c.in(1);
                        if (!c.needs(1)) return {ga};
                        const Tensor y = is_grad_enabled() ? c.in(0) / c.in(1) : c.out(0);
                        return {ga, neg(ga * y)};
                      }});
SPORE_DEFINE_OP(Pow, {.infer = float_binary_meta, .vjp = [](const VjpContext& c) -> Tensors {
                        const Tensor &a = c.in(0), &b = c.in(1);
                        const Tensor ga = c.needs(0) ? c.g() * b * pow(a, b - 1.0) : Tensor();
                        if (!c.needs(1)) return {ga};
                        // d(a^b)/db = a^b log a, defined for a > 0 (0 elsewhere, as torch)
                        const Tensor y = is_grad_enabled() ? pow(a, b) : c.out(0);
                        const Tensor gb =
                            where(greater(a, zero_of(a)), c.g() * y * log(a), zero_of(c.g()));
                        return {ga, gb};
                      }});
// maximum / minimum route the gradient to the chosen input (ties: to a).
SPORE_DEFINE_OP(Maximum, {.infer = binary_meta, .vjp = [](const VjpContext& c) -> Tensors {
                            const Tensor m = greater_equal(c.in(0), c.in(1)), z = zero_of(c.g());
                            return {c.needs(0) ? where(m, c.g(), z) : Tensor(),
                                    c.needs(1) ? where(m, z, c.g()) : Tensor()};
                          }});
SPORE_DEFINE_OP(Minimum, {.infer = binary_meta, .vjp = [](const VjpContext& c) -> Tensors {
                            const Tensor m = less_equal(c.in(0), c.in(1)), z = zero_of(c.g());
                            return {c.needs(0) ? where(m, c.g(), z) : Tensor(),
                                    c.needs(1) ? where(m, z, c.g()) : Tensor()};
                          }});
SPORE_DEFINE_OP(Equal, {.infer = compare_meta});
SPORE_DEFINE_OP(NotEqual, {.infer = compare_meta});
SPORE_DEFINE_OP(Less, {.infer = compare_meta});
SPORE_DEFINE_OP(LessEqual, {.infer = compare_meta});
SPORE_DEFINE_OP(Greater, {.infer = compare_meta});
SPORE_DEFINE_OP(GreaterEqual, {.infer = compare_meta});
SPORE_DEFINE_OP(LogicalAnd, {.infer = compare_meta});
SPORE_DEFINE_OP(LogicalOr, {.infer = compare_meta});
SPORE_DEFINE_OP(LogicalXor, {.infer = compare_meta});

// relu_grad(g, x) = g where x > 0: linear in g (its gradient is relu_grad again), piecewise
// constant in x (zero gradient).
SPORE_DEFINE_OP(ReluGrad, {.infer = float_binary_meta, .vjp = [](const VjpContext& c) -> Tensors {
                             return {
                                 c.needs(0) ? call1(OpId::ReluGrad, {c.g(), c.in(1)}) : Tensor(),
                                 c.needs(1) ? zeros_like(c.in(1)) : Tensor()};
                           }});

SPORE_DEFINE_OP(Where, {
                           .infer = [](const Metas& in, const Attrs&) -> Metas {
                             SPORE_CHECK_TYPE(in[0].dtype == kBool, "condition must be bool, got ",
                                              dtype_name(in[0].dtype));
                             SPORE_CHECK_TYPE(in[1].dtype == in[2].dtype,
                                              "x and y must share one dtype (where() promotes ",
                                              "them), got ", dtype_name(in[1].dtype), " and ",
                                              dtype_name(in[2].dtype));
                             return {{broadcast_shapes(broadcast_shapes(in[0].shape, in[1].shape),
                                                       in[2].shape),
                                      in[1].dtype}};
                           },
                           .vjp = [](const VjpContext& c) -> Tensors {
                             const Tensor z = zero_of(c.g());
                             return {Tensor(), c.needs(1) ? where(c.in(0), c.g(), z) : Tensor(),
                                     c.needs(2) ? where(c.in(0), z, c.g()) : Tensor()};
                           },
                       });

}  // namespace spore::ops

// ---- public functions ---------------------------------------------------------------------------
namespace spore {
namespace {
using ops::Attrs;
using ops::OpId;

Tensor to_float(const Tensor& x) { return is_floating(x.dtype()) ? x : cast(x, kFloat32); }

Tensor unary(OpId id, const Tensor& x, Attrs attrs = {}) {
  return ops::call1(id, {x}, std::move(attrs));
}

// Transcendental ops: integers and bool compute in float32.
Tensor float_unary(OpId id, const Tensor& x, Attrs attrs = {}) {
  return ops::call1(id, {to_float(x)}, std::move(attrs));
}

DType promoted(const Tensor& a, const Tensor& b) { return promote_types(a.dtype(), b.dtype()); }

Tensor binary_as(OpId id, const Tensor& a, const Tensor& b, DType t) {
  return ops::call1(id, {cast(a, t), cast(b, t)});
}
Tensor binary(OpId id, const Tensor& a, const Tensor& b) {
  return binary_as(id, a, b, promoted(a, b));
}

bool is_integer_value(double v) { return std::isfinite(v) && v == std::trunc(v); }

// A Python-style scalar next to tensor t (see the file comment for the rules).
Tensor scalar_like(double v, const Tensor& t) {
  DType dt = t.dtype();
  if (!is_floating(dt)) {
    if (!is_integer_value(v))
      dt = kFloat32;
    else if (dt == kBool)
      dt = kInt64;
  }
  return scalar_tensor(v, dt, Device{});  // a host scalar: joins an op on any device (op_device)
}

}  // namespace

Tensor neg(const Tensor& x) { return unary(OpId::Neg, x); }
Tensor abs(const Tensor& x) { return unary(OpId::Abs, x); }
Tensor exp(const Tensor& x) { return float_unary(OpId::Exp, x); }
Tensor log(const Tensor& x) { return float_unary(OpId::Log, x); }
Tensor sqrt(const Tensor& x) { return float_unary(OpId::Sqrt, x); }
Tensor rsqrt(const Tensor& x) { return float_unary(OpId::Rsqrt, x); }
Tensor sin(const Tensor& x) { return float_unary(OpId::Sin, x); }
Tensor cos(const Tensor& x) { return float_unary(OpId::Cos, x); }
Tensor tanh(const Tensor& x) { return float_unary(OpId::Tanh, x); }
Tensor sigmoid(const Tensor& x) { return float_unary(OpId::Sigmoid, x); }
Tensor erf(const Tensor& x) { return float_unary(OpId::Erf, x); }
Tensor relu(const Tensor& x) { return unary(OpId::Relu, x); }
Tensor relu6(const Tensor& x) { return clamp(x, 0.0, 6.0); }
Tensor leaky_relu(const Tensor& x, double alpha) {
  return float_unary(OpId::LeakyRelu, x, Attrs().set("alpha", alpha));
}
Tensor silu(const Tensor& x) { return float_unary(OpId::Silu, x); }
Tensor gelu(const Tensor& x, bool approximate) {
  return float_unary(OpId::Gelu, x, Attrs().set("approximate", approximate));
}
Tensor softplus(const Tensor& x, double beta, double threshold) {
  SPORE_CHECK(beta != 0, "[softplus] beta must be non-zero");
  return float_unary(OpId::Softplus, x, Attrs().set("beta", beta).set("threshold", threshold));
}
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  SPORE_CHECK(min || max, "[clamp] at least one of min and max must be given");
  Attrs a;
  if (min) a.set("min", *min);
  if (max) a.set("max", *max);
  // An integer tensor with a fractional bound clamps in float32, as a scalar would promote it.
  const bool fractional = (min && !is_integer_value(*min)) || (max && !is_integer_value(*max));
  if (!is_floating(x.dtype()) && fractional)
    return unary(OpId::Clamp, cast(x, kFloat32), std::move(a));
  return unary(OpId::Clamp, x, std::move(a));
}
// Integers are already whole: floor / ceil / round return them unchanged.
Tensor floor(const Tensor& x) { return is_floating(x.dtype()) ? unary(OpId::Floor, x) : x; }
Tensor ceil(const Tensor& x) { return is_floating(x.dtype()) ? unary(OpId::Ceil, x) : x; }
Tensor round(const Tensor& x) { return is_floating(x.dtype()) ? unary(OpId::Round, x) : x; }
Tensor sign(const Tensor& x) { return unary(OpId::Sign, x); }
Tensor square(const Tensor& x) { return mul(x, x); }
Tensor reciprocal(const Tensor& x) { return div(scalar_like(1, x), x); }

Tensor add(const Tensor& a, const Tensor& b) { return binary(OpId::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(OpId::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(OpId::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) {  // true division: integers give float32
  const DType t = promoted(a, b);
  return binary_as(OpId::Div, a, b, is_floating(t) ? t : kFloat32);
}
Tensor pow(const Tensor& a, const Tensor& b) {
  const DType t = promoted(a, b);
  return binary_as(OpId::Pow, a, b, is_floating(t) ? t : kFloat32);
}
Tensor pow(const Tensor& a, double exponent) { return pow(a, scalar_like(exponent, a)); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(OpId::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(OpId::Minimum, a, b); }
Tensor equal(const Tensor& a, const Tensor& b) { return binary(OpId::Equal, a, b); }
Tensor not_equal(const Tensor& a, const Tensor& b) { return binary(OpId::NotEqual, a, b); }
Tensor less(const Tensor& a, const Tensor& b) { return binary(OpId::Less, a, b); }
Tensor less_equal(const Tensor& a, const Tensor& b) { return binary(OpId::LessEqual, a, b); }
Tensor greater(const Tensor& a, const Tensor& b) { return binary(OpId::Greater, a, b); }
Tensor greater_equal(const Tensor& a, const Tensor& b) { return binary(OpId::GreaterEqual, a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return binary(OpId::LogicalAnd, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return binary(OpId::LogicalOr, a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return binary(OpId::LogicalXor, a, b); }
Tensor logical_not(const Tensor& a) { return unary(OpId::LogicalNot, a); }
// A non-bool condition is read as nonzero = true.
Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y) {
  const DType t = promoted(x, y);
  return ops::call1(OpId::Where, {cast(cond, kBool), cast(x, t), cast(y, t)});
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(a, b), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(a, b), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(a, b), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(a, b), b); }

}  // namespace spore
