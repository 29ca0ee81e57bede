// Generated CUDA C for Graph mode's fused elementwise programs (ops/fused_program.h): one kernel
// per program, input / output dtypes and layout, compiled with NVRTC (fused_nvrtc.h) and launched
// by kernels/fused.cu when SPORE_CUDA_FUSED=nvrtc. Host-only C++ (no CUDA header), so CI checks the
// generator and NVRTC without a GPU (tests/cuda/fused_codegen_test.cpp).
//
// The generated body uses the formulas of the GPU interpreter (kernels/fused.cu) and of the CPU
// interpreter's scalar path (backends/cpu/kernels/fused_elementwise.cpp): values in float32 for
// float32 / float16 / bfloat16 (float64 for float64), bools as 0 / 1, parameters rounded to the
// compute type as there. Two variants:
//   contiguous  every input is the output's shape and contiguous, or a scalar (one element read
//               once): a flat index, each thread handling 16 bytes of output (4 float32, 2
//               float64, 8 float16 / bfloat16) with 16-byte loads and stores when every pointer is
//               aligned (`vec_ok`), element by element otherwise and on the tail;
//   strided     inputs broadcast or strided: the output's dims (merged where every input allows)
//               unravelled per element, sizes and strides passed as kernel arguments; 32-bit index
//               arithmetic when every offset fits.
// Target::kHost emits the same body as a plain C++ function over a loop (the thread index becomes
// the loop variable through the prelude's macros), so tests compile it with the system compiler
// and compare its results with the CPU interpreter's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "spore/dtype.h"

namespace spore::cuda::fusedgen {

// How the kernel reads one input.
enum class Access : uint8_t {
  kFlat,     // the output's shape, contiguous: element i
  kScalar,   // every element broadcast from one: read once
  kStrided,  // through its strides over the (merged) output dims
};

// The inputs' access and the dims of the strided variant (see make_layout).
struct Layout {
  std::vector<Access> access;                // one per input
  std::vector<int64_t> sizes;                // merged output dims (strided variant), outer first
  std::vector<std::vector<int64_t>> stride;  // per input: strides over `sizes` (kStrided ones)
  bool index32 = false;                      // every index and offset fits in int32
  bool contiguous() const;                   // no kStrided input: the contiguous variant
};

// in_shapes / in_strides: each input's shape and element strides; out_shape: the output's. Inputs
// broadcast (numpy) to out_shape. Dims of size 1 are dropped and neighbours merged where every
// strided input steps evenly across them.
Layout make_layout(const std::vector<int64_t>& out_shape,
                   const std::vector<std::vector<int64_t>>& in_shapes,
                   const std::vector<std::vector<int64_t>>& in_strides);

struct Spec {
  std::vector<int64_t> program, consts;  // the node's attributes (ops/fused_program.h)
  DType out = kFloat32;                  // float32, float64, float16 or bfloat16
  std::vector<DType> inputs;             // each `out` or kBool
  Layout layout;
};

enum class Target { kDevice, kHost };

struct Kernel {
  std::string name;    // the extern "C" entry point
  std::string source;  // the whole translation unit
  int vec = 1;         // elements per thread (contiguous variant), 1 for strided
  int arg_words = 0;   // the argument block: this many 8-byte words (see arg_words below)
};

// Why `spec` cannot be generated ("" when it can): kCall instructions (the interpreter declines
// them too), dtypes other than the format's, or an argument block over the kernel-parameter limit.
std::string unsupported(const Spec& spec);

// The source of one kernel. The kernel takes one argument, a block of 8-byte words:
//   out, in[0..nin), n, vec_ok, then (strided variant) sizes[nd], then for each kStrided input its
//   strides[nd]; pointers and integers as 64-bit words. Device: `extern "C" __global__ void
//   name(spore_args)`, launched with 256-thread blocks over ceil(n / vec) threads (any grid: it
//   loops with a grid stride). Host: `extern "C" void name(const spore_args*)`, one call does all.
Kernel generate(const Spec& spec, Target target, const std::string& name = "spore_fused");

// The argument block of a generated kernel for these pointers (out, inputs) and n elements.
std::vector<uint64_t> arg_words(const Spec& spec, const Kernel& k, void* out,
                                const std::vector<const void*>& inputs, int64_t n, bool vec_ok);

// Whether the contiguous variant may use its 16-byte loads / stores on these pointers.
bool vector_aligned(const Spec& spec, const void* out, const std::vector<const void*>& inputs);

// The program in words ("v2 = exp(v0); v3 = mul(v2, v1)"), for error messages.
std::string describe(const std::vector<int64_t>& program, size_t nin);

// The opcode's name in describe() ("exp", "gelu_tanh", ...).
const char* opcode_name(int64_t opcode);

}  // namespace spore::cuda::fusedgen
