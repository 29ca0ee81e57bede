// The program of a FusedElementwise node (made by graph/passes/elementwise_fusion.cpp, run by
// backends/cpu/kernels/fused_elementwise.cpp, checked by the inference rule in ops/fused.cpp).
//
// Attributes:
//   program  vector<int64>, 4 per instruction: {opcode, a, b, c}. Values are numbered: 0..nin-1
//            are the node's inputs, nin + k is the result of instruction k; the node's output is
//            the last instruction's result. Operands refer to earlier values only.
//              unary ops      a = operand; b, c = indices into `consts` of the op's parameters
//                             (leaky_relu: b = alpha; clamp: b = min, c = max, -1 when absent;
//                             softplus: b = beta, c = threshold), -1 when unused
//              binary ops     a, b = operands (numpy broadcasting as the primitive)
//              where          a = condition, b = x, c = y
//              kConst         a = index into `consts` (a scalar broadcast to every element)
//              kCall          a, b = operands (b = -1 for a unary op), c = the OpId of a pointwise
//                             op whose trait is fused = kCall: the kernel calls the op's
//                             registered row kernels (ops::RowKernels) on each block
//   consts   vector<int64>: the doubles of the program, bit-cast (std::bit_cast<int64_t>).
//   shape    vector<int64>: the output shape; every input broadcasts (numpy rules) to it.
//   dtype    DType: the output dtype, a float dtype. Float inputs have this dtype; bool inputs
//            (where's condition, logical ops) are allowed too.
// Values are computed in float32 for float32/float16/bfloat16 (double for float64); bool values
// (comparisons, logical ops) are held as 0 / 1 in the compute type.
//
// Which primitive becomes which instruction is the op's trait (OpTraits::fused in its ops.def
// row); how its attributes become the instruction's parameters is lowering() below. To add a
// native opcode: append it to its range, give lowering() a case if it has parameters, and give
// the CPU interpreter (backends/cpu/kernels/fused_elementwise.cpp) its loop. A pointwise op that
// only needs to be fusible uses kCall and brings row kernels instead.
#pragma once
#include <bit>
#include <cstdint>
#include <vector>

namespace spore::ops::fused {

// Stable numbers (stored in graphs' attributes): append new ops at the end of their range.
// clang-format off
enum class Opcode : int64_t {
  kConst = 0,
  // unary
  kNeg = 1, kAbs, kExp, kLog, kSqrt, kRsqrt, kSin, kCos, kTanh, kSigmoid, kRelu, kLeakyRelu,
  kSilu, kGeluErf, kGeluTanh, kSoftplus, kClamp, kFloor, kCeil, kRound, kSign, kErf,
  kLogicalNot, kBoolToFloat,  // bool -> float cast: the identity on 0 / 1
  kLastUnary = kBoolToFloat,
  // binary
  kAdd = 64, kSub, kMul, kDiv, kPow, kMax, kMin, kReluGrad, kEqual, kNotEqual, kLess,
  kLessEqual, kGreater, kGreaterEqual, kLogicalAnd, kLogicalOr, kLogicalXor,
  kLastBinary = kLogicalXor,
  kWhere = 128,
  kCall = 192,
  kNone = -1,  // (OpTraits::fused) not fusible
};
// clang-format on
inline constexpr int kInstrWidth = 4;
inline constexpr int kMaxInstructions = 256;  // the kernel's fixed tables
inline constexpr int kMaxInputs = 64;

inline bool is_unary(Opcode op) { return op >= Opcode::kNeg && op <= Opcode::kLastUnary; }
inline bool is_binary(Opcode op) { return op >= Opcode::kAdd && op <= Opcode::kLastBinary; }
// Ops whose result is a bool (held as 0 / 1).
inline bool is_bool_result(Opcode op) {
  return op == Opcode::kLogicalNot || (op >= Opcode::kEqual && op <= Opcode::kLogicalXor);
}

// How an op's attributes become an instruction (the fusion pass reads the op's attributes by these
// names). Parameters: p0 / p1 = the float attribute param0 / param1, or the default when absent;
// with optional_params an absent attribute leaves the parameter unset (-1: clamp's open bound).
struct Lowering {
  const char* param0 = nullptr;
  double default0 = 0;
  const char* param1 = nullptr;
  double default1 = 0;
  bool optional_params = false;
  const char* variant_attr = nullptr;  // a bool attribute that, when true, selects `variant`
  Opcode variant = Opcode::kNone;
  bool bool_input = false;  // fusible only from a bool input to a float output
};
inline Lowering lowering(Opcode op) {
  switch (op) {
    case Opcode::kLeakyRelu:
      return {.param0 = "alpha", .default0 = 0.01};
    case Opcode::kSoftplus:
      return {.param0 = "beta", .default0 = 1, .param1 = "threshold", .default1 = 20};
    case Opcode::kClamp:
      return {.param0 = "min", .param1 = "max", .optional_params = true};
    case Opcode::kGeluErf:
      return {.variant_attr = "approximate", .variant = Opcode::kGeluTanh};
    case Opcode::kBoolToFloat:
      return {.bool_input = true};
    default:
      return {};
  }
}

inline int64_t encode_double(double v) { return std::bit_cast<int64_t>(v); }
inline double decode_double(int64_t v) { return std::bit_cast<double>(v); }

}  // namespace spore::ops::fused
