// The amp precision rule (amp/policy.h).
#include "amp/policy.h"

#include <algorithm>
#include <cctype>

#include "spore/error.h"

namespace spore::amp {
namespace {
thread_local Policy t_policy;

using ops::OpId;

// MindSpore's O1 white list, with the gradient ops of its members (their backward runs in the
// same precision as the forward op, as it does in PyNative where their inputs are already low).
bool in_white_list(OpId op) {
  switch (op) {
    case OpId::Conv2d:
    case OpId::Conv2dBackwardData:
    case OpId::Conv2dBackwardWeight:
    case OpId::Matmul:
    case OpId::Relu:
    case OpId::ReluGrad:
    case OpId::LeakyRelu:
      return true;
    default:
      return false;
  }
}

// Norm ops whose data input (x, or dy and x for the backward) keeps its dtype in a keep_float32
// cell; the mask lists the inputs cast to float32 (parameters and statistics).
uint32_t norm_param_mask(OpId op) {
  switch (op) {
    case OpId::BatchNorm:           // (x, gamma, beta)
    case OpId::LayerNorm:           // (x, gamma, beta)
      return 0b110;
    case OpId::BatchNormInference:  // (x, gamma, beta, mean, var)
      return 0b11110;
    case OpId::BatchNormBackward:   // (dy, x, gamma, mean, invstd)
    case OpId::LayerNormBackward:   // (dy, x, gamma, mean, rstd)
      return 0b11100;
    default:
      return ~0u;  // not a norm op
  }
}

// Ops that never get casts: dtype conversions themselves, views (they pass their input's dtype
// through), in-place state updates (the state keeps its dtype) and ops with no float inputs.
bool exempt(OpId op) {
  const ops::OpDef& d = ops::op_def(op);
  if (d.has(ops::kView) || d.has(ops::kInplace)) return true;
  switch (op) {
    case OpId::Cast:
    case OpId::Copy:
    case OpId::OneHot:
    case OpId::Argmax:
    case OpId::Argmin:
      return true;
    default:
      return false;
  }
}
}  // namespace

const char* level_name(Level l) {
  switch (l) {
    case Level::O0: return "O0";
    case Level::O1: return "O1";
    case Level::O2: return "O2";
    case Level::O3: return "O3";
  }
  return "?";
}

Level parse_level(const std::string& s) {
  std::string u = s;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return std::toupper(c); });
  if (u == "O0") return Level::O0;
  if (u == "O1") return Level::O1;
  if (u == "O2") return Level::O2;
  if (u == "O3") return Level::O3;
  SPORE_THROW(ErrorKind::ValueError, "amp level '", s,
              "' is not one of 'O0', 'O1', 'O2', 'O3' (O0: float32; O1: white-list ops in low "
              "precision; O2: all but BatchNorm/LayerNorm; O3: everything)");
}

DType parse_dtype(const std::string& s) {
  std::string u = s;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return std::tolower(c); });
  if (u == "fp16" || u == "float16" || u == "half") return kFloat16;
  if (u == "bf16" || u == "bfloat16") return kBFloat16;
  SPORE_THROW(ErrorKind::ValueError, "amp dtype '", s,
              "' is not one of 'fp16' (float16) or 'bf16' (bfloat16)");
}

std::string Policy::str() const {
  if (!active()) return "O0";
  std::string s = std::string(level_name(level)) + "/" + dtype_name(dtype);
  if (keep_float32) s += "/fp32-cell";
  return s;
}

OpPrecision decide(OpId op, const Policy& p) {
  OpPrecision r;
  if (!p.active() || exempt(op)) return r;
  switch (p.level) {
    case Level::O0:
      return r;
    case Level::O1:
      if (!in_white_list(op)) return r;
      r.cast = true;
      r.compute = p.dtype;
      r.input_mask = ~0u;
      r.outputs_to_float32 = true;
      return r;
    case Level::O2:
      if (p.keep_float32) {
        r.cast = true;
        r.compute = kFloat32;
        r.input_mask = norm_param_mask(op);  // non-norm ops in the cell: every input
        return r;
      }
      [[fallthrough]];
    case Level::O3:
      r.cast = true;
      r.compute = p.dtype;
      r.input_mask = ~0u;
      return r;
  }
  return r;
}

const Policy& current_policy() { return t_policy; }

PolicyScope::PolicyScope(const Policy& p) : prev_(t_policy) { t_policy = p; }
PolicyScope::~PolicyScope() { t_policy = prev_; }

}  // namespace spore::amp
