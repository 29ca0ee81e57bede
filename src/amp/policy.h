// Mixed precision's one rule: which dtype an op computes in under an amp level. amp implements the
// dispatcher's precision hook (ops/precision.h) with it: PolicyScope makes the interned
// ops::PrecisionPolicy of a Policy current, the PyNative dispatcher (ops::call) casts the inputs
// while running and the Graph-mode pass insert_amp_casts (graph/passes/amp_casts.cpp) inserts the
// same casts as graph nodes, so both modes put the same ops in the same dtype. The level comes
// from the Cell the op runs in: auto_mixed_precision sets a Policy on cells and Cell::operator()
// makes it current while its construct runs; the autograd tape remembers each node's policy and
// the backward engine makes it current again while that node's gradient rule runs, so backward
// ops follow their forward op's precision. Which ops are in the O1 white list, never cast, or
// norm ops is each op's amp trait in ops.def.
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
#include "ops/precision.h"
#include "spore/amp.h"

namespace spore::amp {

// Level, level_name, parse_level, Policy, current_policy and PolicyScope are public
// (spore/amp.h); what follows is internal.

using ops::OpPrecision;
OpPrecision decide(ops::OpId op, const Policy& p);
// The process-wide precision object of a policy (nullptr for an inactive one): what PolicyScope
// makes current, and what autograd and graph nodes record.
const ops::PrecisionPolicy* interned(const Policy& p);
// The policy of a recorded precision object (O0 for nullptr).
const Policy& policy_of(const ops::PrecisionPolicy* p);

}  // namespace spore::amp
