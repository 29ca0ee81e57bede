// The GPU's matmul epilogue fusion on the test device too (its kernel is the op's CPU kernel), so
// the compiled graphs the test device runs are shaped like the GPU's.
#include "graph/passes.h"

namespace spore {
namespace {
size_t fuse_matmul_epilogue(graph::Graph& g) {
  return graph::fuse_matmul_epilogue(g, DeviceType::Test);
}
}  // namespace

SPORE_REGISTER_PASS(Test, "fuse_matmul_epilogue", graph::kOrderMatmulEpilogue,
                    fuse_matmul_epilogue);

}  // namespace spore
