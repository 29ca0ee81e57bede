// Mixed precision's one rule: which dtype an op computes in under an amp level. decide() is used
// by the PyNative dispatcher (ops::call casts the inputs while running) and by the Graph-mode pass
// insert_amp_casts (graph/passes/amp_casts.cpp, casts as graph nodes), so both modes put the same
// ops in the same dtype. The level comes from the Cell the op runs in: auto_mixed_precision sets a
// Policy on cells and Cell::operator() makes it current (PolicyScope) while its construct runs;
// the autograd tape remembers each node's policy and the backward engine makes it current again
// while that node's gradient rule runs, so backward ops follow their forward op's precision.
//
//   O0  nothing changes.
//   O1  white list only (conv, matmul, relu and their gradients): float inputs cast to the low
//       dtype, float outputs cast back to float32.
//   O2  every op in low precision, except cells marked keep_float32 (BatchNorm, LayerNorm):
//       their norm ops take the low-precision activations as they are and compute in float32 with
//       float32 parameters and statistics.
//   O3  every op in low precision.
#pragma once
#include <cstdint>
#include <string>

#include "ops/op.h"
#include "spore/amp.h"

namespace spore::amp {

// Level, level_name, parse_level, Policy, current_policy and PolicyScope are public
// (spore/amp.h); what follows is internal.

// What one op does under a policy.
struct OpPrecision {
  bool cast = false;        // false: run the op as it is
  DType compute = kFloat32; // the dtype the cast inputs get
  uint32_t input_mask = 0;  // bit i: cast input i to `compute` when it is a float16/bfloat16/
                            // float32 tensor of another dtype (float64 and integers never cast)
  bool outputs_to_float32 = false;  // O1: cast float16/bfloat16 outputs back to float32
};
OpPrecision decide(ops::OpId op, const Policy& p);

}  // namespace spore::amp
