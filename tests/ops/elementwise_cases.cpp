// Op-table rows for the elementwise primitives: every unary and binary op and where, with
// broadcasting, 0-d scalars, non-contiguous inputs, integer / bool and 16-bit float dtypes. The
// references are plain double lambdas (ref_unary / ref_binary). Input ranges keep the float64
// gradient check away from kinks (abs, relu, sign at 0), domain edges (log, sqrt, pow base > 0)
// and ties (maximum / minimum).
#include <cmath>

#include "op_table.h"

namespace spore::test {
namespace {
using ops::OpId;
using F1 = std::function<double(double)>;
using F2 = std::function<double(double, double)>;
using Fn1 = std::function<Tensor(const Tensor&)>;
using Fn2 = std::function<Tensor(const Tensor&, const Tensor&)>;

const std::vector<DType> kFloatTypes = {kFloat32, kFloat64, kFloat16, kBFloat16};
const std::vector<DType> kSignedTypes = {kFloat32, kFloat64, kFloat16, kBFloat16,
                                         kInt32,   kInt64,   kInt8};
const std::vector<DType> kF32F64 = {kFloat32, kFloat64};

// The reference's values are compared as doubles, so its outputs are float64 whatever the op's.
OpCase unary(std::string name, OpId op, InputSpec in, Fn1 fn, F1 ref,
             std::vector<DType> dtypes = kF32F64) {
  return {
      .name = std::move(name),
      .op = op,
      .inputs = {std::move(in)},
      .run = [fn](const Tensors& x) -> Tensors { return {fn(x[0])}; },
      .reference = [ref](const Tensors& x) -> Tensors { return {ref_unary(x[0], ref, kFloat64)}; },
      .dtypes = std::move(dtypes)};
}
OpCase binary(std::string name, OpId op, InputSpec a, InputSpec b, Fn2 fn, F2 ref,
              std::vector<DType> dtypes = kF32F64) {
  return {.name = std::move(name),
          .op = op,
          .inputs = {std::move(a), std::move(b)},
          .run = [fn](const Tensors& x) -> Tensors { return {fn(x[0], x[1])}; },
          .reference = [ref](const Tensors& x) -> Tensors {
            return {ref_binary(x[0], x[1], ref, kFloat64)};
          },
          .dtypes = std::move(dtypes)};
}
// Values from {0, 1, ..., n-1} (as floats), so comparisons and logical ops see ties and zeros.
InputSpec small_ints(Shape shape, double n = 3) {
  return {.make = [shape, n] { return floor(uniform(shape, 0, n, kFloat64)); }};
}

// For rows whose values are too large for finite differences (exp/basic covers the gradient).
OpCase no_grad(OpCase c) {
  c.grad_check = false;
  return c;
}

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double round_half_even(double x) {
  const double r = std::floor(x), d = x - r;
  if (d > 0.5) return r + 1;
  if (d < 0.5) return r;
  return std::fmod(r, 2) == 0 ? r : r + 1;
}

SPORE_OP_CASES({
    // ---- unary ----------------------------------------------------------------------------------
    unary(
        "neg/basic", OpId::Neg, {.shape = {3, 4}, .lo = -5, .hi = 5},
        [](auto& x) { return neg(x); }, [](double x) { return -x; }, kSignedTypes),
    unary(
        "neg/non_contiguous", OpId::Neg, {.shape = {4, 5}, .non_contiguous = true},
        [](auto& x) { return -x; }, [](double x) { return -x; }),
    unary(
        "abs/basic", OpId::Abs, {.shape = {2, 3, 4}, .lo = -5, .hi = 5},
        [](auto& x) { return abs(x); }, [](double x) { return std::fabs(x); }, kSignedTypes),
    unary(
        "abs/uint8", OpId::Abs, {.shape = {7}, .lo = 0.5, .hi = 9}, [](auto& x) { return abs(x); },
        [](double x) { return std::fabs(x); }, {kUInt8, kFloat32}),
    unary(
        "exp/basic", OpId::Exp, {.shape = {2, 3, 4}, .lo = -5, .hi = 5},
        [](auto& x) { return exp(x); }, [](double x) { return std::exp(x); }, kFloatTypes),
    no_grad(unary(
        "exp/long_rows", OpId::Exp, {.shape = {3, 37}, .lo = -20, .hi = 20},
        [](auto& x) { return exp(x); }, [](double x) { return std::exp(x); })),
    unary(
        "exp/non_contiguous", OpId::Exp, {.shape = {5, 6}, .non_contiguous = true},
        [](auto& x) { return exp(x); }, [](double x) { return std::exp(x); }, kFloatTypes),
    unary(
        "log/basic", OpId::Log, {.shape = {3, 17}, .lo = 0.01, .hi = 50},
        [](auto& x) { return log(x); }, [](double x) { return std::log(x); }, kFloatTypes),
    unary(
        "log/non_contiguous", OpId::Log,
        {.shape = {4, 3}, .lo = 0.5, .hi = 2, .non_contiguous = true},
        [](auto& x) { return log(x); }, [](double x) { return std::log(x); }),
    unary(
        "sqrt/basic", OpId::Sqrt, {.shape = {3, 11}, .lo = 0.1, .hi = 9},
        [](auto& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, kFloatTypes),
    unary(
        "rsqrt/basic", OpId::Rsqrt, {.shape = {3, 11}, .lo = 0.1, .hi = 9},
        [](auto& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, kFloatTypes),
    unary(
        "sin/basic", OpId::Sin, {.shape = {4, 9}, .lo = -7, .hi = 7},
        [](auto& x) { return sin(x); }, [](double x) { return std::sin(x); }, kFloatTypes),
    unary(
        "sin/wide", OpId::Sin, {.shape = {40}, .lo = -50000, .hi = 50000},
        [](auto& x) { return sin(x); }, [](double x) { return std::sin(x); }),
    unary(
        "cos/basic", OpId::Cos, {.shape = {4, 9}, .lo = -7, .hi = 7},
        [](auto& x) { return cos(x); }, [](double x) { return std::cos(x); }, kFloatTypes),
    unary(
        "tanh/basic", OpId::Tanh, {.shape = {3, 13}, .lo = -5, .hi = 5},
        [](auto& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, kFloatTypes),
    unary(
        "sigmoid/basic", OpId::Sigmoid, {.shape = {3, 13}, .lo = -10, .hi = 10},
        [](auto& x) { return sigmoid(x); }, sigmoid_ref, kFloatTypes),
    unary(
        "relu/basic", OpId::Relu, {.shape = {3, 13}, .lo = -3, .hi = 3},
        [](auto& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0; }, kSignedTypes),
    unary(
        "relu/non_contiguous", OpId::Relu, {.shape = {4, 6}, .non_contiguous = true},
        [](auto& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0; }),
    unary(
        "leaky_relu/alpha", OpId::LeakyRelu, {.shape = {3, 13}, .lo = -3, .hi = 3},
        [](auto& x) { return leaky_relu(x, 0.2); }, [](double x) { return x > 0 ? x : 0.2 * x; },
        kFloatTypes),
    unary(
        "silu/basic", OpId::Silu, {.shape = {3, 13}, .lo = -6, .hi = 6},
        [](auto& x) { return silu(x); }, [](double x) { return x * sigmoid_ref(x); }, kFloatTypes),
    // Both sides of the SIMD sigmoid's exp(-|x|), its underflow below ln(FLT_MIN) ~ -87.3 and
    // libm's overflow of exp(-x) past 88.7.
    no_grad(unary(
        "sigmoid/wide", OpId::Sigmoid, {.shape = {5, 41}, .lo = -100, .hi = 100},
        [](auto& x) { return sigmoid(x); }, sigmoid_ref)),
    no_grad(unary(
        "silu/wide", OpId::Silu, {.shape = {5, 41}, .lo = -100, .hi = 100},
        [](auto& x) { return silu(x); }, [](double x) { return x * sigmoid_ref(x); })),
    unary(
        "gelu/exact", OpId::Gelu, {.shape = {3, 13}, .lo = -4, .hi = 4},
        [](auto& x) { return gelu(x); },
        [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }, kFloatTypes),
    unary(
        "gelu/tanh", OpId::Gelu, {.shape = {3, 13}, .lo = -4, .hi = 4},
        [](auto& x) { return gelu(x, true); },
        [](double x) {
          const double k = std::sqrt(2 / M_PI);
          return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
        },
        kFloatTypes),
    unary(
        "softplus/beta_threshold", OpId::Softplus, {.shape = {3, 13}, .lo = -5, .hi = 5},
        [](auto& x) { return softplus(x, 2, 6); },
        [](double x) { return 2 * x > 6 ? x : std::log(1 + std::exp(2 * x)) / 2; }, kFloatTypes),
    unary(
        "softplus/default", OpId::Softplus, {.shape = {2, 5}, .lo = -30, .hi = 30},
        [](auto& x) { return softplus(x); },
        [](double x) { return x > 20 ? x : std::log1p(std::exp(x)); }),
    unary(
        "clamp/both", OpId::Clamp, {.shape = {3, 13}, .lo = -2, .hi = 2},
        [](auto& x) { return clamp(x, -0.5, 0.75); },
        [](double x) { return std::min(std::max(x, -0.5), 0.75); }, kFloatTypes),
    unary(
        "clamp/min_only_int", OpId::Clamp, {.shape = {3, 5}, .lo = -5, .hi = 5},
        [](auto& x) { return clamp(x, -2.0, std::nullopt); },
        [](double x) { return std::max(x, -2.0); }, kSignedTypes),
    unary(
        "clamp/max_only_uint8", OpId::Clamp, {.shape = {3, 5}, .lo = 0.5, .hi = 9},
        [](auto& x) { return clamp(x, std::nullopt, 4.0); },
        [](double x) { return std::min(x, 4.0); }, {kUInt8, kFloat32, kFloat64}),
    unary(
        "clamp/relu6", OpId::Clamp, {.shape = {4, 5}, .lo = -3, .hi = 9, .non_contiguous = true},
        [](auto& x) { return relu6(x); }, [](double x) { return std::min(std::max(x, 0.0), 6.0); },
        kSignedTypes),
    unary(
        "floor/basic", OpId::Floor, {.shape = {3, 13}, .lo = -3, .hi = 3},
        [](auto& x) { return floor(x); }, [](double x) { return std::floor(x); }, kFloatTypes),
    unary(
        "ceil/basic", OpId::Ceil, {.shape = {3, 13}, .lo = -3, .hi = 3},
        [](auto& x) { return ceil(x); }, [](double x) { return std::ceil(x); }, kFloatTypes),
    unary(
        "round/basic", OpId::Round, {.shape = {3, 13}, .lo = -3, .hi = 3},
        [](auto& x) { return round(x); }, round_half_even, kFloatTypes),
    {.name = "round/half_to_even",
     .op = OpId::Round,
     .inputs = {{.make =
                     [] {
                       return tensor({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.5, 0.25, 4.75, 5.5});
                     }}},
     .run = [](const Tensors& x) -> Tensors { return {round(x[0])}; },
     .reference = [](const Tensors& x) -> Tensors {
       return {ref_unary(x[0], round_half_even, kFloat64)};
     },
     .dtypes = kFloatTypes,
     .grad_check = false},  // ties are where round jumps
    unary(
        "sign/basic", OpId::Sign, {.shape = {3, 13}, .lo = -3, .hi = 3},
        [](auto& x) { return sign(x); }, [](double x) { return double((x > 0) - (x < 0)); },
        kSignedTypes),
    unary(
        "erf/basic", OpId::Erf, {.shape = {3, 13}, .lo = -3, .hi = 3},
        [](auto& x) { return erf(x); }, [](double x) { return std::erf(x); }, kFloatTypes),
    unary(
        "logical_not/basic", OpId::LogicalNot, small_ints({3, 4}, 2),
        [](auto& x) { return logical_not(x); }, [](double x) { return double(x == 0); },
        {kFloat32, kFloat64, kInt32, kUInt8, kBool}),

    // ---- binary ---------------------------------------------------------------------------------
    binary(
        "add/same_shape", OpId::Add, {.shape = {2, 3}}, {.shape = {2, 3}},
        [](auto& a, auto& b) { return a + b; }, [](double a, double b) { return a + b; },
        {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kInt8}),
    binary(
        "add/broadcast", OpId::Add, {.shape = {2, 3, 4}, .lo = -5, .hi = 5},
        {.shape = {3, 1}, .lo = -5, .hi = 5}, [](auto& a, auto& b) { return add(a, b); },
        [](double a, double b) { return a + b; },
        {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt8}),
    binary(
        "add/scalar_0d", OpId::Add, {.shape = {}}, {.shape = {3, 4}},
        [](auto& a, auto& b) { return add(a, b); }, [](double a, double b) { return a + b; },
        kFloatTypes),
    binary(
        "add/non_contiguous", OpId::Add, {.shape = {4, 5}, .non_contiguous = true},
        {.shape = {4, 5}}, [](auto& a, auto& b) { return add(a, b); },
        [](double a, double b) { return a + b; }, kFloatTypes),
    binary(
        "add/long_rows", OpId::Add, {.shape = {3, 1, 67}}, {.shape = {1, 5, 67}},
        [](auto& a, auto& b) { return add(a, b); }, [](double a, double b) { return a + b; },
        kFloatTypes),
    binary(
        "add/bool", OpId::Add, small_ints({3, 4}, 2), small_ints({3, 4}, 2),
        [](auto& a, auto& b) { return add(a, b); },
        [](double a, double b) { return double(a != 0 || b != 0); }, {kBool}),
    unary(
        "add/double_scalar", OpId::Add, {.shape = {3, 4}, .lo = -5, .hi = 5},
        [](auto& x) { return x + 2.0; }, [](double x) { return x + 2; },
        {kFloat32, kFloat64, kFloat16, kInt32, kInt8}),
    unary(
        "add/double_scalar_left", OpId::Add, {.shape = {3, 4}}, [](auto& x) { return 0.5 + x; },
        [](double x) { return 0.5 + x; }, kFloatTypes),
    binary(
        "sub/both_broadcast", OpId::Sub, {.shape = {3, 1}, .lo = -5, .hi = 5},
        {.shape = {1, 4}, .lo = -5, .hi = 5}, [](auto& a, auto& b) { return a - b; },
        [](double a, double b) { return a - b; }, kSignedTypes),
    unary(
        "sub/double_scalar_left", OpId::Sub, {.shape = {2, 5}}, [](auto& x) { return 2.0 - x; },
        [](double x) { return 2 - x; }, kFloatTypes),
    unary(
        "sub/double_scalar", OpId::Sub, {.shape = {2, 5}}, [](auto& x) { return x - 0.25; },
        [](double x) { return x - 0.25; }),
    binary(
        "mul/broadcast", OpId::Mul, {.shape = {2, 3, 4}, .lo = -5, .hi = 5},
        {.shape = {4}, .lo = -5, .hi = 5}, [](auto& a, auto& b) { return a * b; },
        [](double a, double b) { return a * b; }, kSignedTypes),
    binary(
        "mul/non_contiguous_both", OpId::Mul, {.shape = {3, 5}, .non_contiguous = true},
        {.shape = {3, 5}, .non_contiguous = true}, [](auto& a, auto& b) { return mul(a, b); },
        [](double a, double b) { return a * b; }),
    unary(
        "mul/square", OpId::Mul, {.shape = {3, 4}, .lo = -3, .hi = 3},
        [](auto& x) { return square(x); }, [](double x) { return x * x; }, kSignedTypes),
    unary(
        "mul/double_scalar", OpId::Mul, {.shape = {3, 4}}, [](auto& x) { return x * 3.0; },
        [](double x) { return 3 * x; }, kFloatTypes),
    binary(
        "div/broadcast", OpId::Div, {.shape = {2, 3, 4}}, {.shape = {3, 1}, .lo = 0.5, .hi = 2},
        [](auto& a, auto& b) { return a / b; }, [](double a, double b) { return a / b; },
        kFloatTypes),
    binary(
        "div/scalar_0d_divisor", OpId::Div, {.shape = {4, 5}, .non_contiguous = true},
        {.shape = {}, .lo = 1, .hi = 2}, [](auto& a, auto& b) { return div(a, b); },
        [](double a, double b) { return a / b; }),
    unary(
        "div/reciprocal", OpId::Div, {.shape = {3, 4}, .lo = 0.5, .hi = 2},
        [](auto& x) { return reciprocal(x); }, [](double x) { return 1 / x; }, kFloatTypes),
    unary(
        "div/double_scalar", OpId::Div, {.shape = {3, 4}}, [](auto& x) { return x / 4.0; },
        [](double x) { return x / 4; }),
    unary(
        "div/double_scalar_left", OpId::Div, {.shape = {3, 4}, .lo = 0.5, .hi = 3},
        [](auto& x) { return 2.0 / x; }, [](double x) { return 2 / x; }),
    binary(
        "pow/tensor", OpId::Pow, {.shape = {3, 4}, .lo = 0.5, .hi = 2},
        {.shape = {4}, .lo = -2, .hi = 2}, [](auto& a, auto& b) { return pow(a, b); },
        [](double a, double b) { return std::pow(a, b); }, kFloatTypes),
    unary(
        "pow/scalar_cube", OpId::Pow, {.shape = {3, 4}, .lo = -2, .hi = 2},
        [](auto& x) { return pow(x, 3.0); }, [](double x) { return x * x * x; }, kFloatTypes),
    unary(
        "pow/scalar_fraction", OpId::Pow, {.shape = {3, 4}, .lo = 0.5, .hi = 3},
        [](auto& x) { return pow(x, 1.5); }, [](double x) { return x * std::sqrt(x); },
        kFloatTypes),
    binary(
        "maximum/broadcast", OpId::Maximum, {.shape = {2, 3, 4}, .lo = -5, .hi = 5},
        {.shape = {3, 1}, .lo = -5, .hi = 5}, [](auto& a, auto& b) { return maximum(a, b); },
        [](double a, double b) { return std::max(a, b); },
        {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kInt8, kUInt8}),
    binary(
        "maximum/non_contiguous", OpId::Maximum, {.shape = {4, 5}, .non_contiguous = true},
        {.shape = {4, 5}}, [](auto& a, auto& b) { return maximum(a, b); },
        [](double a, double b) { return std::max(a, b); }),
    binary(
        "minimum/broadcast", OpId::Minimum, {.shape = {2, 3, 4}, .lo = -5, .hi = 5},
        {.shape = {4}, .lo = -5, .hi = 5}, [](auto& a, auto& b) { return minimum(a, b); },
        [](double a, double b) { return std::min(a, b); },
        {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kInt8, kUInt8}),
    binary(
        "minimum/scalar_0d", OpId::Minimum, {.shape = {3, 4}}, {.shape = {}},
        [](auto& a, auto& b) { return minimum(a, b); },
        [](double a, double b) { return std::min(a, b); }),

    // comparisons and logical ops: small integer values so ties and zeros occur.
    binary(
        "equal/ties", OpId::Equal, small_ints({3, 4}), small_ints({4}),
        [](auto& a, auto& b) { return equal(a, b); },
        [](double a, double b) { return double(a == b); },
        {kFloat32, kFloat64, kFloat16, kInt32, kInt64, kUInt8, kBool}),
    binary(
        "not_equal/ties", OpId::NotEqual, small_ints({3, 4}), small_ints({3, 1}),
        [](auto& a, auto& b) { return not_equal(a, b); },
        [](double a, double b) { return double(a != b); },
        {kFloat32, kFloat64, kBFloat16, kInt32, kInt8}),
    binary(
        "less/ties", OpId::Less, small_ints({2, 3, 4}), small_ints({3, 4}),
        [](auto& a, auto& b) { return less(a, b); },
        [](double a, double b) { return double(a < b); },
        {kFloat32, kFloat64, kInt32, kInt64, kUInt8}),
    binary(
        "less_equal/ties", OpId::LessEqual, small_ints({3, 4}), small_ints({}),
        [](auto& a, auto& b) { return less_equal(a, b); },
        [](double a, double b) { return double(a <= b); }, {kFloat32, kFloat64, kInt32, kInt8}),
    binary(
        "greater/non_contiguous", OpId::Greater, {.shape = {4, 5}, .non_contiguous = true},
        {.shape = {4, 5}}, [](auto& a, auto& b) { return greater(a, b); },
        [](double a, double b) { return double(a > b); }, {kFloat32, kFloat64, kFloat16}),
    binary(
        "greater_equal/ties", OpId::GreaterEqual, small_ints({3, 4}), small_ints({4}),
        [](auto& a, auto& b) { return greater_equal(a, b); },
        [](double a, double b) { return double(a >= b); },
        {kFloat32, kFloat64, kInt32, kInt64, kUInt8}),
    binary(
        "logical_and/basic", OpId::LogicalAnd, small_ints({3, 4}, 2), small_ints({4}, 2),
        [](auto& a, auto& b) { return logical_and(a, b); },
        [](double a, double b) { return double(a != 0 && b != 0); },
        {kFloat32, kFloat64, kInt32, kUInt8, kBool}),
    binary(
        "logical_or/basic", OpId::LogicalOr, small_ints({3, 4}, 2), small_ints({3, 1}, 2),
        [](auto& a, auto& b) { return logical_or(a, b); },
        [](double a, double b) { return double(a != 0 || b != 0); },
        {kFloat32, kFloat64, kInt32, kBool}),
    binary(
        "logical_xor/basic", OpId::LogicalXor, small_ints({3, 4}, 2), small_ints({3, 4}, 2),
        [](auto& a, auto& b) { return logical_xor(a, b); },
        [](double a, double b) { return double((a != 0) != (b != 0)); },
        {kFloat32, kFloat64, kInt64, kBool}),
    {.name = "logical_and/mixed_dtypes",
     .op = OpId::LogicalAnd,
     .inputs = {small_ints({3, 4}, 2), {.shape = {4}, .lo = 0, .hi = 2, .fixed_dtype = kInt32}},
     .run = [](const Tensors& x) -> Tensors { return {logical_and(x[0], x[1])}; },
     .reference = [](const Tensors& x) -> Tensors {
       return {ref_binary(
           x[0], x[1], [](double a, double b) { return double(a != 0 && b != 0); }, kFloat64)};
     }},

    // where(cond, x, y): cond is a fixed bool input (not differentiated).
    {.name = "where/basic",
     .op = OpId::Where,
     .inputs = {{.shape = {3, 4}, .fixed_dtype = kBool, .differentiable = false},
                {.shape = {3, 4}},
                {.shape = {3, 4}}},
     .run = [](const Tensors& x) -> Tensors { return {where(x[0], x[1], x[2])}; },
     .reference = [](const Tensors& x) -> Tensors {
       std::vector<double> c = values(x[0]), a = values(x[1]), b = values(x[2]), r;
       for (size_t i = 0; i < c.size(); ++i) r.push_back(c[i] != 0 ? a[i] : b[i]);
       return {from_values(r, {3, 4}, kFloat64)};
     },
     .dtypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8, kBool}},
    {.name = "where/broadcast",
     .op = OpId::Where,
     .inputs = {{.shape = {3, 1}, .fixed_dtype = kBool, .differentiable = false},
                {.shape = {1, 4}},
                {.shape = {}}},
     .run = [](const Tensors& x) -> Tensors { return {where(x[0], x[1], x[2])}; },
     .reference = [](const Tensors& x) -> Tensors {
       std::vector<double> c = values(x[0]), a = values(x[1]), b = values(x[2]), r;
       for (int i = 0; i < 3; ++i)
         for (int j = 0; j < 4; ++j) r.push_back(c[size_t(i)] != 0 ? a[size_t(j)] : b[0]);
       return {from_values(r, {3, 4}, kFloat64)};
     },
     .dtypes = {kFloat32, kFloat64, kInt32}},
    {.name = "where/non_contiguous",
     .op = OpId::Where,
     .inputs =
         {{.shape = {4, 5}, .non_contiguous = true, .fixed_dtype = kBool, .differentiable = false},
          {.shape = {4, 5}, .non_contiguous = true},
          {.shape = {5}}},
     .run = [](const Tensors& x) -> Tensors { return {where(x[0], x[1], x[2])}; },
     .reference = [](const Tensors& x) -> Tensors {
       std::vector<double> c = values(x[0]), a = values(x[1]), b = values(x[2]), r;
       for (size_t i = 0; i < c.size(); ++i) r.push_back(c[i] != 0 ? a[i] : b[i % 5]);
       return {from_values(r, {4, 5}, kFloat64)};
     }},

    // relu_grad(g, x): relu's fused gradient; no public function, so the rows call the primitive.
    binary(
        "relu_grad/basic", OpId::ReluGrad, {.shape = {3, 13}},
        {.shape = {3, 13}, .lo = -3, .hi = 3},
        [](auto& g, auto& x) {
          return ops::call1(OpId::ReluGrad, {g, x});
        },
        [](double g, double x) { return x > 0 ? g : 0; }, kFloatTypes),
    binary(
        "relu_grad/non_contiguous", OpId::ReluGrad, {.shape = {4, 5}, .non_contiguous = true},
        {.shape = {4, 5}, .lo = -3, .hi = 3, .non_contiguous = true},
        [](auto& g, auto& x) {
          return ops::call1(OpId::ReluGrad, {g, x});
        },
        [](double g, double x) { return x > 0 ? g : 0; }),
});

}  // namespace
}  // namespace spore::test
