// The classification training step (models/recipe.h).
#include "models/recipe.h"

#include "spore/nn/loss.h"
#include "spore/optim/optimizers.h"

namespace spore::models {

std::shared_ptr<train::TrainOneStepCell> momentum_train_step(std::shared_ptr<nn::Cell> net,
                                                             double lr, double momentum) {
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), lr, momentum);
  return std::make_shared<train::TrainOneStepCell>(
      std::make_shared<train::WithLossCell>(std::move(net), std::move(loss)), std::move(opt));
}

}  // namespace spore::models
