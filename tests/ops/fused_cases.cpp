// Op-table rows for the Graph-mode fused ops of passes/elementwise_fusion.cpp and
// passes/softmax_ce_fusion.cpp (kNonDiff: no gradient rows). The FusedElementwise rows hand-write
// programs (format: ops/fused_program.h); references are plain loops on doubles.
#include <cmath>

#include "op_table.h"
#include "ops/fused_program.h"

namespace spore::test {
namespace {
using ops::OpId;
using ops::fused::Opcode;

// A program under construction: values 0..nin-1 are the inputs.
struct Program {
  int64_t next;
  std::vector<int64_t> prog, consts;
  explicit Program(int64_t nin) : next(nin) {}
  int64_t konst(double v) {
    consts.push_back(ops::fused::encode_double(v));
    return int64_t(consts.size()) - 1;
  }
  int64_t op(Opcode o, int64_t a, int64_t b = -1, int64_t c = -1) {
    prog.insert(prog.end(), {int64_t(o), a, b, c});
    return next++;
  }
  int64_t scalar(double v) { return op(Opcode::kConst, konst(v)); }
  ops::Attrs attrs(const Shape& shape, DType dt) const {
    return ops::Attrs()
        .set("program", prog)
        .set("consts", consts)
        .set("shape", shape)
        .set("dtype", dt);
  }
};

DType float_dtype(const Tensors& x) {
  for (const Tensor& t : x)
    if (is_floating(t.dtype())) return t.dtype();
  return kFloat32;
}

Tensors call_fused(const Tensors& x, const Program& p, const Shape& shape) {
  return ops::call(OpId::FusedElementwise, x, p.attrs(shape, float_dtype(x)));
}

// Reference: f over the broadcast inputs' values at each output element.
Tensor ref_map(const Tensors& x, const Shape& shape,
               const std::function<double(const std::vector<double>&)>& f) {
  std::vector<std::vector<double>> v;
  for (const Tensor& t : x) v.push_back(values(t));
  const int64_t n = shape_numel(shape);
  std::vector<double> out(static_cast<size_t>(n)), args(x.size());
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < x.size(); ++k)
      args[k] = v[k][size_t(broadcast_index(i, shape, x[k].shape()))];
    out[size_t(i)] = f(args);
  }
  return from_values(out, shape, float_dtype(x));
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// (x * y + 0.5) -> tanh, minus sigmoid(x): same shapes.
Program chain_program() {
  Program p(2);
  const int64_t m = p.op(Opcode::kMul, 0, 1);
  const int64_t t = p.op(Opcode::kTanh, p.op(Opcode::kAdd, m, p.scalar(0.5)));
  p.op(Opcode::kSub, t, p.op(Opcode::kSigmoid, 0));
  return p;
}
double chain_ref(const std::vector<double>& a) {
  return std::tanh(a[0] * a[1] + 0.5) - sigmoid(a[0]);
}

// leaky_relu(x * scale + bias, 0.1) * s - clamp(x, max = 0.3): x (N, C, H, W), scale (C, 1, 1),
// bias (1, C, 1, 1), s a 0-d scalar.
Program channel_program() {
  Program p(4);
  const int64_t y = p.op(Opcode::kAdd, p.op(Opcode::kMul, 0, 1), 2);
  const int64_t l = p.op(Opcode::kLeakyRelu, y, p.konst(0.1));
  p.op(Opcode::kSub, p.op(Opcode::kMul, l, 3), p.op(Opcode::kClamp, 0, -1, p.konst(0.3)));
  return p;
}
double channel_ref(const std::vector<double>& a) {
  const double y = a[0] * a[1] + a[2];
  return (y < 0 ? 0.1 * y : y) * a[3] - std::min(a[0], 0.3);
}

// where(cond, exp(x), relu_grad(y, x)) + (x > y ? 1 : 0) * max(x, y) / 2: cond bool (R, C),
// x (R, C), y (C).
Program where_program() {
  Program p(3);
  const int64_t w = p.op(Opcode::kWhere, 0, p.op(Opcode::kExp, 1), p.op(Opcode::kReluGrad, 2, 1));
  const int64_t gt = p.op(Opcode::kBoolToFloat, p.op(Opcode::kGreater, 1, 2));
  const int64_t mx = p.op(Opcode::kDiv, p.op(Opcode::kMax, 1, 2), p.scalar(2));
  p.op(Opcode::kAdd, w, p.op(Opcode::kMul, gt, mx));
  return p;
}
double where_ref(const std::vector<double>& a) {
  const double c = a[0], x = a[1], y = a[2];
  return (c != 0 ? std::exp(x) : (x > 0 ? y : 0)) + (x > y ? 1 : 0) * std::max(x, y) / 2;
}

// gelu(x) + softplus(x) * erf(y) + sqrt(|x| + 1) * sin(y) - pow(|y| + 1, x) over many blocks.
Program long_program() {
  Program p(2);
  const int64_t g = p.op(Opcode::kGeluErf, 0);
  const int64_t sp = p.op(Opcode::kSoftplus, 0, p.konst(1.0), p.konst(20.0));
  const int64_t a = p.op(Opcode::kAdd, g, p.op(Opcode::kMul, sp, p.op(Opcode::kErf, 1)));
  const int64_t one = p.scalar(1);
  const int64_t sq = p.op(Opcode::kSqrt, p.op(Opcode::kAdd, p.op(Opcode::kAbs, 0), one));
  const int64_t b = p.op(Opcode::kAdd, a, p.op(Opcode::kMul, sq, p.op(Opcode::kSin, 1)));
  p.op(Opcode::kSub, b, p.op(Opcode::kPow, p.op(Opcode::kAdd, p.op(Opcode::kAbs, 1), one), 0));
  return p;
}
double long_ref(const std::vector<double>& a) {
  const double x = a[0], y = a[1];
  const double gelu = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  const double sp = x > 20 ? x : std::log1p(std::exp(x));
  return gelu + sp * std::erf(y) + std::sqrt(std::fabs(x) + 1) * std::sin(y) -
         std::pow(std::fabs(y) + 1, x);
}

// (logits, labels) -> (loss, softmax - onehot), rows in double.
Tensors ref_softmax_ce(const Tensor& z, const Tensor& labels) {
  const int64_t n = z.size(0), c = z.size(1);
  std::vector<double> v = values(z), y = values(labels);
  std::vector<double> loss(static_cast<size_t>(n)), d(static_cast<size_t>(n * c));
  for (int64_t r = 0; r < n; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; ++j) m = std::max(m, v[size_t(r * c + j)]);
    for (int64_t j = 0; j < c; ++j) s += std::exp(v[size_t(r * c + j)] - m);
    const int64_t lab = int64_t(y[size_t(r)]);
    loss[size_t(r)] = m + std::log(s) - v[size_t(r * c + lab)];
    for (int64_t j = 0; j < c; ++j)
      d[size_t(r * c + j)] = std::exp(v[size_t(r * c + j)] - m) / s - (j == lab ? 1 : 0);
  }
  return {from_values(loss, {n}, z.dtype()), from_values(d, z.shape(), z.dtype())};
}

const std::vector<DType> kFloats = {kFloat32, kFloat64, kFloat16, kBFloat16};

InputSpec labels_spec(int64_t n, int64_t classes, DType dt) {
  return {.shape = {n}, .lo = 0, .hi = double(classes), .fixed_dtype = dt, .differentiable = false};
}

// MatmulEpilogue (the accelerators' Dense fusion): act(a @ b + bias) on doubles; b optionally a
// transposed view (a Dense weight as the graph passes it).
OpCase matmul_epilogue_case(std::string name, Shape a, Shape b, std::string act,
                            bool transposed_b = false) {
  const int64_t N = b[1];
  return {.name = "matmul_epilogue/" + name,
          .op = OpId::MatmulEpilogue,
          .inputs = {{.shape = a}, {.shape = b, .non_contiguous = transposed_b}, {.shape = {N}}},
          .run = [act](const Tensors& x) -> Tensors {
            return ops::call(OpId::MatmulEpilogue, x, ops::Attrs().set("act", act));
          },
          .reference = [act, N](const Tensors& x) -> Tensors {
            const std::vector<double> av = values(x[0]), bv = values(x[1]), bias = values(x[2]);
            const int64_t K = x[1].size(0), rows = x[0].numel() / K;
            std::vector<double> out(size_t(rows * N));
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t j = 0; j < N; ++j) {
                double v = bias[size_t(j)];
                for (int64_t k = 0; k < K; ++k) v += av[size_t(r * K + k)] * bv[size_t(k * N + j)];
                if (act == "relu") v = v > 0 ? v : 0;
                if (act == "gelu_tanh")
                  v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
                out[size_t(r * N + j)] = v;
              }
            Shape s = x[0].shape();
            s.back() = N;
            return {from_values(out, s, kFloat64)};
          },
          .dtypes = {kFloat32, kFloat64, kBFloat16, kFloat16}};
}

SPORE_OP_CASES({
    {.name = "fused_elementwise/same_shape_chain",
     .op = OpId::FusedElementwise,
     .inputs = {{.shape = {5, 7}}, {.shape = {5, 7}}},
     .run =
         [](const Tensors& x) {
           return call_fused(x, chain_program(), {5, 7});
         },
     .reference = [](const Tensors& x) -> Tensors {
       return {ref_map(x, {5, 7}, chain_ref)};
     },
     .dtypes = kFloats},
    {.name = "fused_elementwise/per_channel_scalar_non_contiguous",
     .op = OpId::FusedElementwise,
     .inputs = {{.shape = {2, 3, 4, 5}, .non_contiguous = true},
                {.shape = {3, 1, 1}},
                {.shape = {1, 3, 1, 1}},
                {.shape = {}}},
     .run =
         [](const Tensors& x) {
           return call_fused(x, channel_program(), {2, 3, 4, 5});
         },
     .reference = [](const Tensors& x) -> Tensors {
       return {ref_map(x, {2, 3, 4, 5}, channel_ref)};
     },
     .dtypes = kFloats},
    // Broadcast runs of 16 * 32 = 512 elements: blocks read the per-channel inputs as one value.
    {.name = "fused_elementwise/per_channel_long_runs",
     .op = OpId::FusedElementwise,
     .inputs = {{.shape = {2, 3, 16, 32}},
                {.shape = {3, 1, 1}},
                {.shape = {1, 3, 1, 1}},
                {.shape = {16, 32}, .non_contiguous = true}},
     .run =
         [](const Tensors& x) {
           return call_fused(x, channel_program(), {2, 3, 16, 32});
         },
     .reference = [](const Tensors& x) -> Tensors {
       return {ref_map(x, {2, 3, 16, 32}, channel_ref)};
     },
     .dtypes = kFloats},
    {.name = "fused_elementwise/bool_condition_and_compare",
     .op = OpId::FusedElementwise,
     .inputs = {{.shape = {6, 9}, .fixed_dtype = kBool, .differentiable = false},
                {.shape = {6, 9}},
                {.shape = {9}}},
     .run =
         [](const Tensors& x) {
           return call_fused(x, where_program(), {6, 9});
         },
     .reference = [](const Tensors& x) -> Tensors {
       return {ref_map(x, {6, 9}, where_ref)};
     },
     .dtypes = kFloats},
    {.name = "fused_elementwise/many_blocks",
     .op = OpId::FusedElementwise,
     .inputs = {{.shape = {37, 1000}, .lo = -3, .hi = 3}, {.shape = {1000}, .lo = -2, .hi = 2}},
     .run =
         [](const Tensors& x) {
           return call_fused(x, long_program(), {37, 1000});
         },
     .reference = [](const Tensors& x) -> Tensors {
       return {ref_map(x, {37, 1000}, long_ref)};
     },
     .dtypes = {kFloat32, kFloat64}},
    {.name = "softmax_cross_entropy_fused/int64_labels",
     .op = OpId::SoftmaxCrossEntropyFused,
     .inputs = {{.shape = {6, 10}, .lo = -3, .hi = 3}, labels_spec(6, 10, kInt64)},
     .run = [](const Tensors& x) { return ops::call(OpId::SoftmaxCrossEntropyFused, x); },
     .reference = [](const Tensors& x) { return ref_softmax_ce(x[0], x[1]); },
     .dtypes = kFloats},
    {.name = "softmax_cross_entropy_fused/int32_labels_large_logits",
     .op = OpId::SoftmaxCrossEntropyFused,
     .inputs = {{.shape = {4, 7}, .lo = -1000, .hi = 1000}, labels_spec(4, 7, kInt32)},
     .run = [](const Tensors& x) { return ops::call(OpId::SoftmaxCrossEntropyFused, x); },
     .reference = [](const Tensors& x) { return ref_softmax_ce(x[0], x[1]); }},
    {.name = "softmax_cross_entropy_fused/non_contiguous_logits",
     .op = OpId::SoftmaxCrossEntropyFused,
     .inputs = {{.shape = {5, 8}, .lo = -4, .hi = 4, .non_contiguous = true},
                labels_spec(5, 8, kInt64)},
     .run = [](const Tensors& x) { return ops::call(OpId::SoftmaxCrossEntropyFused, x); },
     .reference = [](const Tensors& x) { return ref_softmax_ce(x[0], x[1]); },
     .dtypes = kFloats},
    matmul_epilogue_case("bias", {5, 7}, {7, 4}, ""),
    matmul_epilogue_case("bias_relu", {5, 7}, {7, 4}, "relu"),
    matmul_epilogue_case("bias_gelu_tanh_transposed_weight", {6, 9}, {9, 5}, "gelu_tanh", true),
    matmul_epilogue_case("batched_rows_relu", {2, 3, 8}, {8, 6}, "relu"),
    {.name = "softmax_cross_entropy_fused/long_rows",
     .op = OpId::SoftmaxCrossEntropyFused,
     .inputs = {{.shape = {64, 1000}, .lo = -5, .hi = 5}, labels_spec(64, 1000, kInt32)},
     .run = [](const Tensors& x) { return ops::call(OpId::SoftmaxCrossEntropyFused, x); },
     .reference = [](const Tensors& x) { return ref_softmax_ce(x[0], x[1]); }},
});

}  // namespace
}  // namespace spore::test
