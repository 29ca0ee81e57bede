// The model zoo's classification training step, as in MindSpore's LeNet-5 and ResNet examples:
// sparse softmax cross-entropy (mean over the batch) and Momentum on every trainable parameter.
// `spore train`, the benchmarks and the Graph-mode tests all train with it.
#pragma once
#include <memory>

#include "spore/nn/cell.h"
#include "spore/train/wrappers.h"

namespace spore::models {

std::shared_ptr<train::TrainOneStepCell> momentum_train_step(std::shared_ptr<nn::Cell> net,
                                                             double lr = 0.01,
                                                             double momentum = 0.9);

}  // namespace spore::models
