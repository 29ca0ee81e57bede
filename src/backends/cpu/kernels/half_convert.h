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

// The same conversions on n contiguous elements, on the calling thread (kernels that compute
// 16-bit types in float32 blocks use them).
void to_f32(const Half* src, float* dst, int64_t n);
void to_f32(const BFloat16* src, float* dst, int64_t n);
void from_f32(const float* src, Half* dst, int64_t n);
void from_f32(const float* src, BFloat16* dst, int64_t n);

}  // namespace spore::cpu
