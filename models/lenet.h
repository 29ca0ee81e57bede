// LeNet-5 as in MindSpore's model zoo (official/cv/lenet): two bias-free 5x5 convolutions, max
// pooling, three Dense layers with Normal(0.02) weights. The zoo feeds 32x32 images (MNIST
// resized); on 28x28 inputs we pad conv1 by 2, which gives the same geometry without a resize.
#pragma once
#include "spore/nn/nn.h"

namespace spore::models {

class LeNet5 : public nn::Cell {
 public:
  explicit LeNet5(int64_t num_class = 10, int64_t num_channel = 1, bool pad_for_28x28 = true);
  Tensor construct(const Tensor& x) override;  // (N, C, 28, 28) -> (N, num_class)
  // semi_auto_parallel over dp x mp ranks, Megatron-style: conv1 and fc1 cut on their outputs
  // (mp), conv2 and fc2 on their inputs (partial sums all-reduced), the batch over dp.
  void shard(int64_t dp, int64_t mp);

 private:
  nn::Conv2d conv1_, conv2_;
  nn::Dense fc1_, fc2_, fc3_;
};

// The same network (layers, initialisation order, parameter names: its checkpoints load into
// LeNet5) as one SequentialCell, for pipeline_stages: with 2 stages the convolutions are stage 0
// and the Dense layers stage 1; otherwise the cells are left for Model to cut into equal runs.
std::shared_ptr<nn::SequentialCell> lenet5_sequential(int64_t stages = 1, int64_t num_class = 10);

}  // namespace spore::models
