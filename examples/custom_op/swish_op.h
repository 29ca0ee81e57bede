// A user-defined fused swish, swish(x) = x * sigmoid(x), registered as a custom op
// (spore/custom_op.h): one primitive instead of sigmoid + mul, with its own gradient rule and row
// kernels, fused by Graph mode with its neighbours and run in bfloat16 under amp O1.
#pragma once
#include <spore/custom_op.h>

namespace example {
// swish(x): (any shape) float32 / float64 / float16 / bfloat16 -> same shape and dtype.
const spore::CustomOpHandle& swish();
}  // namespace example
