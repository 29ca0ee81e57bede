// Generated fused kernels (fused_generated.cpp), for the GPU's graph pass
// (passes/precompile_fused.cpp) and the FusedElementwise kernel (fused.cu).
#pragma once
#include <vector>

#include "ops/op.h"

namespace spore::cuda {

// SPORE_CUDA_FUSED=nvrtc: fused nodes run generated kernels (else the interpreter).
bool fused_generated_enabled();

// Compiles and loads the kernel of a fused node for these operands (dtype, shape and strides of
// each input) on `device`, ahead of its first run; a program the generator declines is left to
// the interpreter. Throws NVRTC's error.
void precompile_fused(const ops::Attrs& attrs, DType out, const Shape& out_shape,
                      const std::vector<DType>& dtypes, const std::vector<Shape>& shapes,
                      const std::vector<Shape>& strides, int device);

// Runs FusedElementwise through its generated kernel: false when generated kernels are off or the
// program cannot be generated (the interpreter runs it then).
bool fused_generated(ops::KernelContext& ctx);

}  // namespace spore::cuda
