// Inference rules of the fused ops made by the Graph-mode passes after autodiff (so no gradient
// rules; both are kNonDiff): FusedElementwise (graph/passes/elementwise_fusion.cpp, program format
// in ops/fused_program.h), SoftmaxCrossEntropyFused (graph/passes/softmax_ce_fusion.cpp) and
// MatmulEpilogue (graph/passes/matmul_epilogue.cpp). Kernels: backends/cpu/kernels/
// fused_elementwise.cpp, softmax_cross_entropy.cpp and matmul_epilogue.cpp.
#include "ops/fused_program.h"
#include "ops/op.h"

namespace spore::ops {
namespace {
using fused::Opcode;

// Checks the program against the inputs (see fused_program.h) and returns the output's metadata.
Metas fused_elementwise_infer(const Metas& in, const Attrs& a) {
  const std::vector<int64_t>& prog = a.get_ints("program");
  const std::vector<int64_t>& consts = a.get_ints("consts");
  const Shape shape = a.get_ints("shape");
  const DType dt = a.get_dtype("dtype");
  SPORE_CHECK_TYPE(is_floating(dt), "the output dtype must be floating-point, got ",
                   dtype_name(dt));
  SPORE_CHECK(!in.empty() && in.size() <= size_t(fused::kMaxInputs), "expected 1 to ",
              fused::kMaxInputs, " inputs, got ", in.size());
  const size_t nin = in.size();
  std::vector<char> is_bool(nin);
  for (size_t i = 0; i < nin; ++i) {
    SPORE_CHECK_TYPE(in[i].dtype == dt || in[i].dtype == kBool, "input ", i, " has dtype ",
                     dtype_name(in[i].dtype), "; inputs must be ", dtype_name(dt), " or bool");
    SPORE_CHECK(broadcast_shapes(in[i].shape, shape) == shape, "input ", i, " of shape ",
                shape_str(in[i].shape), " does not broadcast to the output shape ",
                shape_str(shape));
    is_bool[i] = in[i].dtype == kBool;
  }
  const size_t n_instr = prog.size() / fused::kInstrWidth;
  SPORE_CHECK(prog.size() % fused::kInstrWidth == 0 && n_instr >= 1 &&
                  n_instr <= size_t(fused::kMaxInstructions),
              "program must hold 1 to ", fused::kMaxInstructions, " instructions of ",
              fused::kInstrWidth, " ints, got ", prog.size(), " ints");
  auto check_value = [&](size_t k, int64_t v) {
    SPORE_CHECK(v >= 0 && size_t(v) < nin + k, "instruction ", k, " reads value ", v,
                ", which is not an input or an earlier result (", nin + k, " defined)");
  };
  auto check_const = [&](size_t k, int64_t c) {
    SPORE_CHECK(c >= -1 && c < int64_t(consts.size()), "instruction ", k, " names constant ", c,
                " of ", consts.size());
  };
  for (size_t k = 0; k < n_instr; ++k) {
    const int64_t* ins = prog.data() + k * fused::kInstrWidth;
    const auto op = Opcode(ins[0]);
    bool result_bool = fused::is_bool_result(op);
    if (op == Opcode::kConst) {
      SPORE_CHECK(ins[1] >= 0, "instruction ", k, " (const) names no constant");
      check_const(k, ins[1]);
    } else if (fused::is_unary(op)) {
      check_value(k, ins[1]);
      check_const(k, ins[2]);
      check_const(k, ins[3]);
      if (op == Opcode::kBoolToFloat)
        SPORE_CHECK(is_bool[size_t(ins[1])], "instruction ", k, " casts a non-bool value to float");
    } else if (fused::is_binary(op)) {
      check_value(k, ins[1]);
      check_value(k, ins[2]);
    } else if (op == Opcode::kCall) {
      check_value(k, ins[1]);
      if (ins[2] >= 0) check_value(k, ins[2]);
      SPORE_CHECK(
          ins[3] >= 0 && ins[3] < num_ops() && op_def(OpId(ins[3])).traits.fused == Opcode::kCall,
          "instruction ", k, " calls op ", ins[3], ", which is not a pointwise op fused by call");
    } else if (op == Opcode::kWhere) {
      for (int j = 1; j < 4; ++j) check_value(k, ins[j]);
      SPORE_CHECK(is_bool[size_t(ins[1])], "instruction ", k, " (where) has a non-bool condition");
    } else {
      SPORE_CHECK(false, "instruction ", k, " has unknown opcode ", ins[0]);
    }
    is_bool.push_back(result_bool);
  }
  SPORE_CHECK(!is_bool.back(), "the program's result is a bool; its output must be ",
              dtype_name(dt));
  return {{shape, dt}};
}

}  // namespace

SPORE_DEFINE_OP(FusedElementwise, {.infer = fused_elementwise_infer});

// (a (..., M, K), b (K, N), bias (N)) -> act(a @ b + bias) (..., M, N), one floating dtype.
SPORE_DEFINE_OP(MatmulEpilogue,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      const TensorMeta &x = in[0], &w = in[1], &bias = in[2];
                      SPORE_CHECK_TYPE(is_floating(x.dtype), "a must be floating-point, got ",
                                       dtype_name(x.dtype));
                      SPORE_CHECK_TYPE(w.dtype == x.dtype && bias.dtype == x.dtype,
                                       "a, b and bias must share one dtype, got ",
                                       dtype_name(x.dtype), ", ", dtype_name(w.dtype), " and ",
                                       dtype_name(bias.dtype));
                      SPORE_CHECK(x.shape.size() >= 2 && w.shape.size() == 2,
                                  "expected a (..., M, K) and b (K, N), got ", shape_str(x.shape),
                                  " and ", shape_str(w.shape));
                      SPORE_CHECK(x.shape.back() == w.shape[0], "a ", shape_str(x.shape), " and b ",
                                  shape_str(w.shape), " do not chain: K is ", x.shape.back(),
                                  " and ", w.shape[0]);
                      SPORE_CHECK(bias.shape == Shape{w.shape[1]}, "bias must have shape (",
                                  w.shape[1], ",), got ", shape_str(bias.shape));
                      const std::string act = a.has("act") ? a.get_string("act") : std::string();
                      SPORE_CHECK(act.empty() || act == "relu" || act == "gelu_tanh",
                                  "act must be \"\", \"relu\" or \"gelu_tanh\", got \"", act, "\"");
                      Shape out = x.shape;
                      out.back() = w.shape[1];
                      return {{out, x.dtype}};
                    },
                });

// (logits (N, C) float, labels (N) int32/int64) -> (loss (N) = logsumexp(z) - z[label],
// dlogits (N, C) = softmax(z) - onehot(label)).
SPORE_DEFINE_OP(SoftmaxCrossEntropyFused,
                {
                    .infer = [](const Metas& in, const Attrs&) -> Metas {
                      const TensorMeta &z = in[0], &y = in[1];
                      SPORE_CHECK_TYPE(is_floating(z.dtype), "logits must be floating-point, got ",
                                       dtype_name(z.dtype));
                      SPORE_CHECK(z.shape.size() == 2, "logits must be (N, C), got shape ",
                                  shape_str(z.shape));
                      SPORE_CHECK_TYPE(y.dtype == kInt32 || y.dtype == kInt64,
                                       "labels must be int32 or int64 class indices, got ",
                                       dtype_name(y.dtype));
                      SPORE_CHECK(y.shape == Shape{z.shape[0]}, "labels must have shape (",
                                  z.shape[0], ",) for logits ", shape_str(z.shape), ", got ",
                                  shape_str(y.shape));
                      return {{{z.shape[0]}, z.dtype}, {z.shape, z.dtype}};
                    },
                });

}  // namespace spore::ops
