// Vectorised, multithreaded float32 <-> float16 / bfloat16 conversion for contiguous tensors (the
// casts mixed precision inserts around every low-precision op and weight). Same results as the
// scalar Half / BFloat16 constructors: round to nearest even, overflow to inf (NaN payloads may
// differ; a NaN stays a NaN).
#pragma once
#include "spore/tensor.h"

namespace spore::cpu {

// Converts src into dst (same shape) when both are contiguous and the pair is float32 ->
// float16/bfloat16 or back; returns false (and does nothing) otherwise.
bool fast_half_cast(const Tensor& src, Tensor& dst);

}  // namespace spore::cpu
