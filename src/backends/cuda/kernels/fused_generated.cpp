// FusedElementwise through generated kernels (SPORE_CUDA_FUSED=nvrtc; docs/cuda.md): the node's
// program becomes CUDA C (fused_codegen.h), compiled by NVRTC for the device's architecture
// (fused_nvrtc.h: cached in memory and on disk), loaded with the runtime's library API
// (cudaLibraryLoadData: no link to the driver library) and launched. Each distinct program, dtype
// and layout compiles once per process, when the graph is compiled (the pass below; at the first
// run of the node for a layout the graph did not foresee); later runs reuse the loaded kernel.
// Programs the generator declines (kCall) and architectures NVRTC cannot target run in the
// interpreter (fused.cu), which stays the default until a GPU run validates these kernels.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/fused_codegen.h"
#include "backends/cuda/fused_nvrtc.h"
#include "backends/cuda/kernels/fused_generated.h"
#include "backends/cuda/launch.h"
#include "core/log.h"
#include "ops/fused_program.h"
#include "ops/op.h"

namespace spore::cuda {
namespace gen = fusedgen;

// Read at every call (cheap beside a launch), so a test can compare both paths in one process.
bool fused_generated_enabled() {
  const char* v = std::getenv("SPORE_CUDA_FUSED");
  if (!v || !*v || std::strcmp(v, "interpreter") == 0) return false;
  if (std::strcmp(v, "nvrtc") == 0) return true;
  static std::once_flag warned;
  std::call_once(warned, [v] {
    log::warn("SPORE_CUDA_FUSED={}: expected 'nvrtc' or 'interpreter'; using the interpreter", v);
  });
  return false;
}

namespace {
int device_arch(int device) {
  static std::mutex mu;
  static std::unordered_map<int, int> archs;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = archs.find(device); it != archs.end()) return it->second;
  int major = 0, minor = 0;
  SPORE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SPORE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return archs[device] = major * 10 + minor;
}

struct Loaded {
  gen::Kernel kernel;
  cudaKernel_t fn = nullptr;  // nullptr: declined, run the interpreter
};

// What decides the generated source, as a string: the memo key (cheaper than generating).
std::string spec_key(const gen::Spec& s, int arch) {
  std::string k = std::to_string(arch) + ":" + std::to_string(int(s.out)) + ":";
  for (DType t : s.inputs) k += char('a' + int(t));
  k += ":";
  for (gen::Access a : s.layout.access) k += char('0' + int(a));
  k += ":" + std::to_string(s.layout.sizes.size()) + (s.layout.index32 ? "i" : "l") + ":";
  for (int64_t v : s.program) k += std::to_string(v) + ",";
  k += ":";
  for (int64_t v : s.consts) k += std::to_string(v) + ",";
  return k;
}

const Loaded& load(const gen::Spec& spec, int arch) {
  static std::mutex mu;
  static auto* loaded = new std::unordered_map<std::string, Loaded>;  // kept for the process
  const std::string key = spec_key(spec, arch);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = loaded->find(key); it != loaded->end()) return it->second;
  }
  Loaded L;
  const std::string why = gen::unsupported(spec);
  if (!why.empty()) {
    log::debug("[GPU] fused_elementwise: no generated kernel for {}: {}; the interpreter runs it",
               gen::describe(spec.program, spec.inputs.size()), why);
  } else if (!nvrtc::supports_arch(arch)) {
    static std::once_flag warned;
    std::call_once(warned, [&] {
      log::warn(
          "[GPU] fused_elementwise: NVRTC {} cannot compile for sm_{}; fused programs run in "
          "the interpreter",
          nvrtc::version(), arch);
    });
  } else {
    L.kernel = gen::generate(spec, gen::Target::kDevice);
    const nvrtc::Compiled c =
        nvrtc::compile(L.kernel.source, arch, gen::describe(spec.program, spec.inputs.size()));
    cudaLibrary_t lib = nullptr;
    SPORE_CUDA_CHECK(
        cudaLibraryLoadData(&lib, c.cubin->data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    SPORE_CUDA_CHECK(cudaLibraryGetKernel(&L.fn, lib, L.kernel.name.c_str()));
  }
  std::lock_guard<std::mutex> lock(mu);
  return loaded->emplace(key, std::move(L)).first->second;
}

// The spec of a node: its program, output and inputs (dtype, shape, strides each).
struct Operand {
  DType dtype;
  const Shape* shape;
  const Shape* strides;
};
gen::Spec spec_of(const ops::Attrs& attrs, DType out, const Shape& out_shape,
                  const std::vector<Operand>& in) {
  gen::Spec spec;
  spec.program = attrs.get_ints("program");
  spec.consts = attrs.get_ints("consts");
  spec.out = out;
  std::vector<std::vector<int64_t>> shapes, strides;
  for (const Operand& o : in) {
    spec.inputs.push_back(o.dtype);
    shapes.push_back(*o.shape);
    // A value whose strides the graph does not know is taken as contiguous.
    strides.push_back(o.strides->size() == o.shape->size() ? *o.strides
                                                           : contiguous_strides(*o.shape));
  }
  spec.layout = gen::make_layout(out_shape, shapes, strides);
  return spec;
}

}  // namespace

void precompile_fused(const ops::Attrs& attrs, DType out, const Shape& out_shape,
                      const std::vector<DType>& dtypes, const std::vector<Shape>& shapes,
                      const std::vector<Shape>& strides, int device) {
  std::vector<Operand> in;
  for (size_t k = 0; k < dtypes.size(); ++k) in.push_back({dtypes[k], &shapes[k], &strides[k]});
  load(spec_of(attrs, out, out_shape, in), device_arch(device));
}

bool fused_generated(ops::KernelContext& ctx) {
  if (!fused_generated_enabled()) return false;
  Tensor& out = ctx.outputs[0];
  const int64_t n = out.numel();
  if (n == 0) return true;
  std::vector<Operand> in;
  std::vector<const void*> ptrs;
  for (const Tensor& t : ctx.inputs) {
    in.push_back({t.dtype(), &t.shape(), &t.strides()});
    ptrs.push_back(t.data_ptr());
  }
  const gen::Spec spec = spec_of(ctx.attrs, out.dtype(), out.shape(), in);
  int device = 0;
  SPORE_CUDA_CHECK(cudaGetDevice(&device));
  const Loaded& L = load(spec, device_arch(device));
  if (!L.fn) return false;
  void* dst = const_cast<void*>(out.data_ptr());
  std::vector<uint64_t> words =
      gen::arg_words(spec, L.kernel, dst, ptrs, n, gen::vector_aligned(spec, dst, ptrs));
  void* args[] = {words.data()};
  const Launch1d l = launch_1d((n + L.kernel.vec - 1) / L.kernel.vec);
  SPORE_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(L.fn), dim3(l.blocks),
                                    dim3(l.threads), args, 0, native(ctx.stream->native_handle())));
  return true;
}

}  // namespace spore::cuda
