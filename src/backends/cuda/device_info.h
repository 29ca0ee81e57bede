// Per-device facts the kernels' launch shapes need, read once from the driver.
#pragma once
#include <cuda_runtime.h>

#include <atomic>

#include "backends/cuda/cuda_check.h"

namespace spore::cuda {

// Streaming multiprocessors of `device` (132 on an H100/H200 SXM).
inline int sm_count(int device) {
  static std::atomic<int> cache[64] = {};
  if (device < 0 || device >= 64) return 132;
  int n = cache[device].load(std::memory_order_relaxed);
  if (n == 0) {
    SPORE_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    cache[device].store(n, std::memory_order_relaxed);
  }
  return n;
}

}  // namespace spore::cuda
