// Inference graphs on the GPU: BatchNorm after a convolution with constant weights folds into the
// weights and the cuDNN convolution's bias (graph/passes/bn_weight_folding.cpp), one kernel less
// per conv of ResNet and YOLOv5.
#include "graph/passes.h"

namespace spore::cuda {
namespace {
size_t fold_batchnorm(graph::Graph& g) {
  return graph::fold_batchnorm_into_weights(g, DeviceType::GPU);
}
}  // namespace

SPORE_REGISTER_PASS(GPU, "fold_batchnorm_into_weights", graph::kOrderFoldBatchnormIntoWeights,
                    fold_batchnorm);

}  // namespace spore::cuda
