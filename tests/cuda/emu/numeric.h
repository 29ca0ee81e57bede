// Loads and stores of the emulated libraries' element types, through double: the half types are
// converted with CUDA's own host conversions (round to nearest even, as the GPU stores them).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

namespace spore::emu {

enum class Elem { kF32, kF16, kBF16, kF64, kUnknown };

inline size_t elem_size(Elem e) {
  return e == Elem::kF64 ? 8 : e == Elem::kF32 ? 4 : e == Elem::kUnknown ? 0 : 2;
}
inline double load(Elem e, const void* base, int64_t i) {
  switch (e) {
    case Elem::kF32:
      return static_cast<const float*>(base)[i];
    case Elem::kF64:
      return static_cast<const double*>(base)[i];
    case Elem::kF16:
      return __half2float(static_cast<const __half*>(base)[i]);
    case Elem::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    default:
      return 0;
  }
}
inline void store(Elem e, void* base, int64_t i, double v) {
  switch (e) {
    case Elem::kF32:
      static_cast<float*>(base)[i] = float(v);
      break;
    case Elem::kF64:
      static_cast<double*>(base)[i] = v;
      break;
    case Elem::kF16:
      static_cast<__half*>(base)[i] = __float2half_rn(float(v));
      break;
    case Elem::kBF16:
      static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(float(v));
      break;
    default:
      break;
  }
}

}  // namespace spore::emu
