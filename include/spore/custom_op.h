// Custom operators (the role of MindSpore's ops.Custom): define an op in your own file and
// register it at load time. It then runs like a built-in primitive in PyNative (autograd through
// its bprop) and in Graph mode (traced, differentiated, and, when its traits say so, fused into
// elementwise programs and cast by amp).
//
//   static const spore::CustomOpHandle swish = spore::register_custom_op({
//       .name = "my_swish",
//       .num_inputs = 1,
//       .bprop = [](const std::vector<Tensor>& in, const Tensor& out, const Tensor& dout) {
//         Tensor s = sigmoid(in[0]);
//         return std::vector<Tensor>{dout * (s + out * (1.0 - s))};
//       },
//       .cpu_row_f32 = [](const float* x, int64_t sx, const float*, int64_t, float* y, int64_t n) {
//         for (int64_t i = 0; i < n; ++i) y[i] = x[i * sx] / (1 + std::exp(-x[i * sx]));
//       },
//       .traits = {.pointwise = true},
//   });
//   Tensor y = swish(x);
//
// See examples/custom_op/ for a complete one with its test and gradient check.
//
// A kernel compiled on its own, in a shared library with MindSpore's AOT entry point (what
// ops.Custom(func_type="aot") loads from Python), is a cpu_kernel too:
//   .cpu_kernel = aot_cpu_kernel(load_aot_kernel("./libadd.so", "CustomAdd"), "CustomAdd"),
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "spore/tensor.h"

namespace spore {

// What the compiler and amp may assume about the op (the built-in ops' ops.def traits).
struct CustomOpTraits {
  enum class Amp : uint8_t {
    kDefault,  // low precision under amp O2 / O3
    kAllow16,  // also under O1 (MindSpore's white list)
    kFollow,   // never cast: runs in its inputs' dtypes
  };
  bool pointwise = false;  // elementwise with numpy broadcasting: Graph mode fuses it with its
                           // neighbours (needs the row kernels)
  bool zero_preserving = false;  // f(0, ..., 0) = 0
  bool idempotent = false;       // f(f(x)) = f(x) (unary)
  // Has effects beyond its output (prints, counts, draws its own random numbers): Graph mode
  // then runs every call, as PyNative does (no merging of equal calls, no folding at compile
  // time, no recomputation).
  bool impure = false;
  Amp amp = Amp::kDefault;
};

// out[i] = f(a[i * sa], b[i * sb]) for i < n, strides 0 (broadcast) or 1; b is null for a unary op.
template <class T>
using CustomRowKernel =
    std::function<void(const T* a, int64_t sa, const T* b, int64_t sb, T* out, int64_t n)>;

struct CustomOp {
  std::string name;    // unique among all ops ("my_swish")
  int num_inputs = 1;  // pointwise ops: 1 or 2
  // Output shape and dtype from the inputs'. Default: the inputs' shapes broadcast (numpy rules),
  // input 0's dtype. Throw spore::Error (SPORE_CHECK) on bad input: the message gets the op's name.
  std::function<std::pair<Shape, DType>(const std::vector<Shape>&, const std::vector<DType>&)>
      infer;
  // One gradient per input from the inputs, the output and the output's gradient, written with
  // spore ops (so it runs in both modes and gives higher-order gradients). Empty: not
  // differentiable.
  std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs, const Tensor& out,
                                    const Tensor& dout)>
      bprop;
  // The CPU kernel: inputs contiguous, `out` allocated (contiguous) from infer. May be left empty
  // when row kernels are given: the row kernels then run over the broadcast inputs.
  std::function<void(const std::vector<Tensor>& inputs, Tensor& out)> cpu_kernel;
  CustomRowKernel<float> cpu_row_f32;   // float32 (and float16 / bfloat16, computed in float32)
  CustomRowKernel<double> cpu_row_f64;  // float64
  // The dtypes the CPU kernel takes (input 0's). Default: what the row kernels cover, or float32.
  std::vector<DType> dtypes;
  CustomOpTraits traits;
};

// A registered op: call it like a function.
class CustomOpHandle {
 public:
  CustomOpHandle() = default;
  explicit CustomOpHandle(uint16_t id) : id_(id) {}
  std::vector<Tensor> call(std::vector<Tensor> inputs) const;
  template <class... Ts>
  Tensor operator()(const Ts&... inputs) const {
    return call({inputs...}).at(0);
  }
  const char* name() const;
  uint16_t id() const { return id_; }

 private:
  uint16_t id_ = 0;
};

// MindSpore's AOT kernel entry point, a C function in a shared library:
//   extern "C" int CustomAdd(int nparam, void** params, int* ndims, int64_t** shapes,
//                            const char** dtypes, void* stream, void* extra);
// nparam = inputs + 1; params[i] the data of input i (contiguous), then the output's; ndims[i],
// shapes[i] and dtypes[i] ("float32", "int64", ... as dtype_name) likewise. On the CPU, stream
// and extra are null (MindSpore's AotExtra, for attributes, is not passed). 0 means success.
using AotKernelFn = int (*)(int nparam, void** params, int* ndims, int64_t** shapes,
                            const char** dtypes, void* stream, void* extra);
// Opens `library` (once per path, with RTLD_NOW; never closed, as registered ops keep its code)
// and finds `symbol` in it. An Error names the library, the symbol and the loader's reason.
AotKernelFn load_aot_kernel(const std::string& library, const std::string& symbol);
// A CustomOp::cpu_kernel calling fn with the inputs and the output; a nonzero return is an Error
// naming `what` and the code.
std::function<void(const std::vector<Tensor>& inputs, Tensor& out)> aot_cpu_kernel(
    AotKernelFn fn, std::string what);

// Registers the op (call once per process, e.g. from a static initialiser). Throws spore::Error
// when the name is taken or the definition is incomplete.
CustomOpHandle register_custom_op(CustomOp op);

}  // namespace spore
