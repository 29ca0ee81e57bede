// The libraries the CUDA backend runs on, for `spore run-check`.
#include "backends/cuda/version.h"

#include <dlfcn.h>

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nvrtc.h>

namespace spore::cuda {

namespace {
std::string dotted(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}
// NCCL (device collectives, src/parallel/nccl_group.cpp) is not linked by this library: the one
// the process would load, found as the loader finds it. Its code is major * 10000 + minor * 100 +
// patch since 2.9.
std::string nccl_version() {
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return "NCCL not found (libnccl.so.2: multi-GPU collectives need it)";
  using GetVersion = int (*)(int*);
  auto get = reinterpret_cast<GetVersion>(dlsym(lib, "ncclGetVersion"));
  int v = 0;
  const bool ok = get && get(&v) == 0 && v > 0;
  dlclose(lib);
  if (!ok) return "NCCL (version unknown)";
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}
}  // namespace

std::string versions() {
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  const bool has_driver = cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0;
  const size_t lt = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
  const size_t dnn = cudnnGetVersion();    // major * 10000 + minor * 100 + patch (cuDNN 9)
  int rtc_major = 0, rtc_minor = 0;        // generated fused kernels (fused_nvrtc.cpp)
  nvrtcVersion(&rtc_major, &rtc_minor);
  return "CUDA runtime " + dotted(rt) + " (static), driver " + (has_driver ? dotted(drv) : "none") +
         ", cuBLASLt " + std::to_string(lt / 10000) + "." + std::to_string((lt / 100) % 100) + "." +
         std::to_string(lt % 100) + ", cuDNN " + std::to_string(dnn / 10000) + "." +
         std::to_string((dnn / 100) % 100) + "." + std::to_string(dnn % 100) + ", NVRTC " +
         std::to_string(rtc_major) + "." + std::to_string(rtc_minor) + ", " + nccl_version();
}

}  // namespace spore::cuda
