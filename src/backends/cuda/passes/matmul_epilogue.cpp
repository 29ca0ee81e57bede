// Dense layers on the GPU: matmul + bias [+ relu / tanh-gelu] as one cuBLASLt call with its
// epilogue (graph/passes/matmul_epilogue.cpp; the kernel is kernels/matmul.cpp's).
#include "graph/passes.h"

namespace spore::cuda {
namespace {
size_t fuse_matmul_epilogue(graph::Graph& g) {
  return graph::fuse_matmul_epilogue(g, DeviceType::GPU);
}
}  // namespace

SPORE_REGISTER_PASS(GPU, "fuse_matmul_epilogue", graph::kOrderMatmulEpilogue, fuse_matmul_epilogue);

}  // namespace spore::cuda
