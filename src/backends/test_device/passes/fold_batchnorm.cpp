// The test device's graph passes: those of an accelerator without the CPU's oneDNN fusions, so
// that its compiled graphs look like the GPU's (src/backends/cuda/passes/fold_batchnorm.cpp).
#include "graph/passes.h"

namespace spore {
namespace {
size_t fold_batchnorm(graph::Graph& g) {
  return graph::fold_batchnorm_into_weights(g, DeviceType::Test);
}
}  // namespace

SPORE_REGISTER_PASS(Test, "fold_batchnorm_into_weights", graph::kOrderFoldBatchnormIntoWeights,
                    fold_batchnorm);

}  // namespace spore
