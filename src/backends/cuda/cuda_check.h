// Error checks for CUDA runtime and cuBLAS calls: an error names the call, the error and its code.
#pragma once
#include <cuda_runtime.h>

#include "spore/error.h"

// The failed call's error is also taken off the thread's last-error state (the runtime keeps
// it there too), so it is reported once, here, not again by the next launch's check.
#define SPORE_CUDA_CHECK(call)                                            \
  do {                                                                    \
    const cudaError_t spore_cuda_err_ = (call);                           \
    if (spore_cuda_err_ != cudaSuccess) {                                 \
      (void)cudaGetLastError();                                           \
      SPORE_THROW(::spore::ErrorKind::RuntimeError, "[GPU] ", #call,      \
                  " failed: ", cudaGetErrorString(spore_cuda_err_), " (", \
                  cudaGetErrorName(spore_cuda_err_), ")");                \
    }                                                                     \
  } while (0)

// After a kernel launch: a bad launch configuration shows here, not at the next call.
#define SPORE_CUDA_CHECK_LAUNCH() SPORE_CUDA_CHECK(cudaGetLastError())

namespace spore::cuda {
// The cudaStream_t of a Stream of this backend (nullptr: the legacy default stream).
inline cudaStream_t native(void* handle) { return static_cast<cudaStream_t>(handle); }
}  // namespace spore::cuda
